/*
 * shard.c - sharded data parallel: the units and buckets of a graph, and
 * the schedule builder that inserts the collectives.
 *
 * Design: the replay (replay.c) owns every rule about collectives; this file
 * only decides where they go. A unit is the set of params an op is the
 * first to read (one unit per op with params, the finest grouping an
 * exported graph always has) or a module prefix (shard_units.c), named by
 * its first reader op, so a collective's argument is an op index like
 * FWD's. PyTorch FSDP's sizes are here (one flat parameter per unit); its
 * builder is shard_fsdp.c. Buckets
 * fill in reverse forward order of their params' first reader, the order in
 * which a store-all backward completes gradients, as DDP's reducer and
 * DeepSpeed's ipg buckets fill in backward (graphs/README.md, "Sharded data
 * parallel", cites the source of each rule).
 */
#include "shard_internal.h"
#include "../util/util_internal.h"

#include <string.h>

void remat_shard_config_init(remat_shard_config *cfg, uint32_t stage, uint64_t dp)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->stage = stage;
    cfg->dp = dp;
    cfg->elem_bytes = 2;
    cfg->prefetch_elements = 50000000;   /* DeepSpeed stage3_prefetch_bucket_size */
    cfg->max_live_elements = 1000000000; /* DeepSpeed stage3_max_live_parameters */
    cfg->persist_threshold = 0;          /* DeepSpeed's default is 1e5; 0 partitions every param */
}

static uint64_t ceil_div(uint64_t x, uint64_t d)
{
    return x / d + (x % d != 0);
}

void remat_sharding_destroy(remat_sharding *sh)
{
    if (!sh)
        return;
    remat__free(sh->unit_of);
    remat__free(sh->unit_elements);
    remat__free(sh->unit_grad_elements);
    remat__free(sh->unit_numel);
    remat__free(sh->unit_persist_elements);
    remat__free(sh->persistent);
    remat__free(sh->param_bytes);
    remat__free(sh->bucket_of);
    remat__free(sh->bucket_elements);
    remat__free(sh->rank_elements);
    memset(sh, 0, sizeof *sh);
}

static remat_status init_sizes(remat_sharding *out, uint32_t *first, uint32_t *ubucket, uint8_t *kinds,
                               remat_err *err);

/* The caller destroys out. */
static remat_status too_big(remat_sharding *out, remat_err *err)
{
    (void)out;
    return remat_err_set(err, REMAT_EOVERFLOW, "sharding: parameter sizes exceed 2^64-1");
}

remat_status remat_sharding_init(const remat_analysis *a, const remat_shard_config *cfg, remat_sharding *out,
                                 remat_err *err)
{
    memset(out, 0, sizeof *out);
    const remat_graph *g = a->g;
    if (cfg->stage > 3)
        return remat_err_set(err, REMAT_EINVAL, "`stage`: stage %u does not exist (use 0, 1, 2 or 3)", cfg->stage);
    if (cfg->dp < 2)
        return remat_err_set(err, REMAT_EINVAL, "`dp`: a sharded replay needs at least 2 ranks (got %llu)",
                             (unsigned long long)cfg->dp);
    if (cfg->elem_bytes == 0)
        return remat_err_set(err, REMAT_EINVAL, "sharding: element size must be at least 1 byte");
    /* FSDP is stage 3's residency (or DDP's for NO_SHARD) with its own
     * padding, units and builder (shard_fsdp.c). */
    remat_shard_config fc = *cfg;
    int fsdp = cfg->fsdp != REMAT_FSDP_OFF;
    if (fsdp) {
        if (cfg->fsdp > REMAT_FSDP_NO_SHARD || cfg->backward_prefetch > REMAT_FSDP_BACKWARD_POST)
            return remat_err_set(err, REMAT_EINVAL, "sharding: unknown FSDP strategy or prefetch");
        if (cfg->offload_optimizer || cfg->persist_threshold)
            return remat_err_set(err, REMAT_EINVAL, "FSDP sharding: optimizer offload and stage 3 persistence are "
                                                    "DeepSpeed's (FSDP's CPUOffload is not modelled)");
        fc.stage = cfg->fsdp == REMAT_FSDP_NO_SHARD ? 0 : 3;
        cfg = &fc;
    }
    out->cfg = *cfg;
    out->root_unit = REMAT_NONE;
    out->a = a;
    uint64_t eb = cfg->elem_bytes, dp = cfg->dp;
    if (!out->cfg.bucket_elements)
        out->cfg.bucket_elements = cfg->stage == 0 ? (25ull << 20) / eb : 500000000ull;
    if (!out->cfg.first_bucket_elements)
        out->cfg.first_bucket_elements = cfg->stage == 0 ? (1ull << 20) / eb : out->cfg.bucket_elements;
    if (!out->cfg.bucket_elements)
        out->cfg.bucket_elements = 1;
    if (!out->cfg.first_bucket_elements)
        out->cfg.first_bucket_elements = 1;
    size_t nt = g->n_tensors ? g->n_tensors : 1, no = g->n_ops ? g->n_ops : 1;
    out->unit_of = remat__array(nt, sizeof *out->unit_of);
    out->bucket_of = remat__array(nt, sizeof *out->bucket_of);
    out->unit_elements = remat__calloc(no, sizeof *out->unit_elements);
    out->unit_grad_elements = remat__calloc(no, sizeof *out->unit_grad_elements);
    out->unit_numel = remat__calloc(no, sizeof *out->unit_numel);
    out->unit_persist_elements = remat__calloc(no, sizeof *out->unit_persist_elements);
    out->persistent = remat__calloc(nt, 1);
    out->param_bytes = remat__calloc(nt, sizeof *out->param_bytes);
    out->bucket_elements = remat__calloc(nt, sizeof *out->bucket_elements);
    out->rank_elements = remat__calloc(dp, sizeof *out->rank_elements);
    uint32_t *first = remat__array(nt, sizeof *first); /* per param: its first reader */
    uint32_t *ubucket = remat__array(no, sizeof *ubucket); /* FSDP: per unit, its bucket */
    uint8_t *kinds = remat__calloc(no, 1);              /* per unit: 1 trainable, 2 frozen params */
    remat_status st = REMAT_OK;
    if (!first || !ubucket || !kinds || !out->unit_of || !out->bucket_of || !out->unit_elements ||
        !out->unit_grad_elements || !out->unit_numel || !out->unit_persist_elements || !out->persistent ||
        !out->param_bytes || !out->bucket_elements || !out->rank_elements)
        st = remat_err_set(err, REMAT_ENOMEM, "out of memory building the sharding");
    else
        st = remat__shard_units(a, cfg, out->unit_of, &out->root_unit, err);
    if (st == REMAT_OK)
        st = init_sizes(out, first, ubucket, kinds, err);
    remat__free(first);
    remat__free(ubucket);
    remat__free(kinds);
    if (st != REMAT_OK)
        remat_sharding_destroy(out);
    return st;
}

static remat_status init_sizes(remat_sharding *out, uint32_t *first, uint32_t *ubucket, uint8_t *kinds,
                               remat_err *err)
{
    const remat_analysis *a = out->a;
    const remat_graph *g = a->g;
    const remat_shard_config *cfg = &out->cfg;
    uint64_t eb = cfg->elem_bytes, dp = cfg->dp;
    int fsdp = cfg->fsdp != REMAT_FSDP_OFF;
    for (uint32_t t = 0; t < g->n_tensors; t++)
        out->bucket_of[t] = first[t] = REMAT_NONE;
    for (uint32_t k = 0; k < g->n_ops; k++)
        ubucket[k] = REMAT_NONE;
    /* Units: remat__shard_units put each param in one. Sizes in elements:
     * a param whose bytes are not whole elements of the sharding's
     * precision cannot be partitioned. */
    uint64_t weights = 0, frozen = 0, part = 0;
    for (uint32_t i = 0; i < g->n_ops; i++) {
        uint32_t k = a->order[i];
        const remat_op *op = &g->ops[k];
        const uint32_t *inp = remat_op_inputs(g, op);
        for (uint32_t j = 0; j < op->n_in; j++) {
            uint32_t t = inp[j];
            const remat_tensor *T = &g->tensors[t];
            if (T->kind != REMAT_TENSOR_PARAM || first[t] != REMAT_NONE)
                continue;
            first[t] = k;
            if (T->bytes % eb) {
                return remat_err_set(err, REMAT_EINVAL,
                                     "param '%s': %llu B is not a whole number of %u-byte elements; give the "
                                     "params' precision (`remat_shard_config.elem_bytes`)",
                                     T->id, (unsigned long long)T->bytes, cfg->elem_bytes);
            }
            uint64_t e = T->bytes / eb, shard = ceil_div(e, dp) * eb, padded = ceil_div(e, dp) * dp;
            int trains = a->grad_flows[t] && !T->frozen;
            uint32_t u = out->unit_of[t];
            if (fsdp && u == REMAT_NONE) { /* a buffer: whole on every rank */
                out->param_bytes[t] = T->bytes;
                if (!remat_u64_add(frozen, T->bytes, &frozen))
                    return too_big(out, err);
                continue;
            }
            kinds[u] |= T->frozen ? 2 : 1;
            if (fsdp) {
                /* The flat parameter is padded as a whole, below. */
                out->param_bytes[t] = 0;
                if (trains)
                    out->unit_grad_elements[u] += e; /* bounded by psi, checked below */
                if (!remat_u64_add(out->unit_numel[u], e, &out->unit_numel[u]) ||
                    (trains && !remat_u64_add(out->psi, e, &out->psi)))
                    return too_big(out, err);
                continue;
            }
            /* ZeRO 3 keeps a param at or below the persistence threshold
             * gathered for the whole step, beside its partition
             * (DeepSpeed parameter_offload.py mark_persistent_parameters; the
             * gathered buffer is the padded whole, partition_parameters.py
             * all_gather), so it is never in a unit's gather. */
            int persist = cfg->stage == 3 && e <= cfg->persist_threshold;
            out->persistent[t] = (uint8_t)persist;
            uint64_t resident = cfg->stage == 3 ? shard : T->bytes;
            if (trains)
                out->unit_grad_elements[u] += e; /* bounded by psi, checked below */
            if (persist && (!remat_u64_mul(padded, eb, &resident) || !remat_u64_add(resident, shard, &resident)))
                return too_big(out, err);
            out->param_bytes[t] = resident;
            if (!remat_u64_add(persist ? out->unit_persist_elements[u] : out->unit_elements[u], persist ? e : padded,
                               persist ? &out->unit_persist_elements[u] : &out->unit_elements[u]) ||
                (!persist && !remat_u64_add(out->unit_numel[u], e, &out->unit_numel[u])) ||
                !remat_u64_add(T->frozen ? frozen : weights, resident, T->frozen ? &frozen : &weights) ||
                (persist && !remat_u64_add(out->persist_elements, e, &out->persist_elements)) ||
                (trains && !remat_u64_add(part, shard, &part)) || (trains && !remat_u64_add(out->psi, e, &out->psi)))
                return too_big(out, err);
        }
    }
    /* FSDP: each unit is one flat parameter, its rank's shard ceil(E_u/N)
     * elements whatever the rank (flat_param.py _get_shard pads every
     * chunk to the first's), gathered as N of them; its bytes are charged
     * to the unit's first param. */
    for (uint32_t k = 0; fsdp && k < g->n_ops; k++) {
        if (!out->unit_numel[k])
            continue;
        out->n_units++;
        uint64_t sh = ceil_div(out->unit_numel[k], dp), bytes;
        if (!remat_u64_mul(sh, dp, &out->unit_elements[k]) || !remat_u64_mul(sh, eb, &bytes))
            return too_big(out, err);
        const uint32_t *inp = remat_op_inputs(g, &g->ops[k]);
        for (uint32_t j = 0; j < g->ops[k].n_in; j++)
            if (out->unit_of[inp[j]] == k && first[inp[j]] == k) {
                out->param_bytes[inp[j]] = bytes;
                break;
            }
        int trains = out->unit_grad_elements[k] > 0;
        if (!remat_u64_add(kinds[k] & 2 ? frozen : weights, bytes, kinds[k] & 2 ? &frozen : &weights) ||
            (trains && !remat_u64_add(part, bytes, &part)) ||
            (trains && !remat_u64_add(out->fsdp_shard_elements, sh, &out->fsdp_shard_elements)))
            return too_big(out, err);
    }
    for (uint32_t k = 0; !fsdp && k < g->n_ops; k++)
        out->n_units += out->unit_numel[k] || out->unit_persist_elements[k];
    /* NO_SHARD keeps every array whole, as DDP. */
    if (fsdp && cfg->stage == 0) {
        weights = frozen = 0;
        for (uint32_t t = 0; t < g->n_tensors; t++)
            if (g->tensors[t].kind == REMAT_TENSOR_PARAM && first[t] != REMAT_NONE) {
                out->param_bytes[t] = g->tensors[t].bytes;
                if (!remat_u64_add(g->tensors[t].frozen ? frozen : weights, g->tensors[t].bytes,
                                   g->tensors[t].frozen ? &frozen : &weights))
                    return too_big(out, err);
            }
        for (uint32_t k = 0; k < g->n_ops; k++)
            out->unit_elements[k] = 0;
    }
    /* Params no op reads are resident on every rank as the graph has them. */
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        const remat_tensor *T = &g->tensors[t];
        if (T->kind != REMAT_TENSOR_PARAM || first[t] != REMAT_NONE)
            continue;
        out->param_bytes[t] = T->bytes;
        if (!remat_u64_add(T->frozen ? frozen : weights, T->bytes, T->frozen ? &frozen : &weights))
            return too_big(out, err);
    }
    /* Stages 1 and 2 partition one flat group of Psi elements padded to a
     * multiple of 2 x dp (DeepSpeed stage_1_and_2.py: nccl_start_alignment_
     * factor 2), each rank 2 ceil(Psi / 2dp) elements of it, and every rank
     * holds the padded bit16 group whole; stage 3 partitions each param
     * (partition_parameters.py), already summed in `part`. */
    uint64_t P = ceil_div(out->psi, dp);
    if (cfg->stage == 1 || cfg->stage == 2) {
        P = 2 * ceil_div(P, 2); /* ceil(ceil(x/a)/b) = ceil(x/ab) */
        uint64_t whole;
        if (!remat_u64_mul(P, dp, &whole) || !remat_u64_mul(whole - out->psi, eb, &out->weight_pad_bytes) ||
            !remat_u64_add(weights, out->weight_pad_bytes, &weights) || !remat_u64_mul(P, eb, &part))
            return too_big(out, err);
    }
    out->weight_bytes = weights;
    out->frozen_bytes = frozen;
    out->grad_partition_bytes = cfg->stage >= 2 && !cfg->offload_optimizer ? part : 0;
    for (uint64_t r = 0; r < dp; r++) {
        uint64_t lo = r * P; /* r < dp, P * dp < psi + 2dp: no overflow */
        out->rank_elements[r] = lo >= out->psi ? 0 : (out->psi - lo < P ? out->psi - lo : P);
    }
    /* FSDP: a rank owns its chunk of each trainable unit (torch.chunk:
     * chunks of ceil(E/N), the last ones short or empty). */
    for (uint64_t r = 0; fsdp && cfg->stage == 3 && r < dp; r++) {
        out->rank_elements[r] = 0;
        for (uint32_t k = 0; k < g->n_ops; k++) {
            uint64_t E = out->unit_grad_elements[k], c = ceil_div(E, dp), lo = r * c;
            out->rank_elements[r] += lo >= E ? 0 : (E - lo < c ? E - lo : c); /* bounded by psi */
        }
    }
    /* Buckets, in reverse forward order of the params' units. */
    uint32_t nb = 0;
    uint64_t fill = 0;
    for (uint32_t i = g->n_ops; i-- > 0;) {
        uint32_t k = a->order[i];
        const remat_op *op = &g->ops[k];
        const uint32_t *inp = remat_op_inputs(g, op);
        for (uint32_t j = 0; j < op->n_in; j++) {
            uint32_t t = inp[j];
            const remat_tensor *T = &g->tensors[t];
            if (T->kind != REMAT_TENSOR_PARAM || T->frozen || !a->grad_flows[t] || first[t] != k ||
                out->bucket_of[t] != REMAT_NONE)
                continue;
            uint64_t e = T->bytes / eb;
            if (fsdp) {
                /* One reduction per flat parameter (its post-backward
                 * hook), in the order backward completes the units. */
                uint32_t u = out->unit_of[t];
                if (ubucket[u] == REMAT_NONE)
                    ubucket[u] = nb++;
                out->bucket_of[t] = ubucket[u];
                out->bucket_elements[ubucket[u]] += e; /* bounded by psi */
                continue;
            }
            uint64_t cap = nb <= 1 ? out->cfg.first_bucket_elements : out->cfg.bucket_elements;
            if (nb == 0 || (fill > 0 && fill + e > cap)) {
                nb++;
                fill = 0;
            }
            out->bucket_of[t] = nb - 1;
            out->bucket_elements[nb - 1] += e; /* bounded by psi */
            fill += e;
        }
    }
    out->n_buckets = nb;
    return REMAT_OK;
}

int remat_schedule_has_collectives(const remat_schedule *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->ins[i].kind >= REMAT_I_ALLGATHER)
            return 1;
    return 0;
}

/* ---- The builder ---------------------------------------------------------- */

typedef struct {
    const remat_sharding *sh;
    const remat_graph *g;
    remat_schedule *out;
    uint8_t *gathered;  /* per op (unit) */
    uint64_t available; /* gathered elements */
    /* Per instruction of the input: the units it reads, as a CSR list. */
    size_t *uoff;
    uint32_t *units;
    /* stage3_max_reuse_distance: per CSR entry, the next instruction that
     * reads the same unit (SIZE_MAX: none); per instruction q, the elements
     * of the units read before q (DeepSpeed's params_traversed). */
    size_t *next_use;
    uint64_t *before;
} builder;

/* DeepSpeed partitioned_param_coordinator.py __params_to_release: after a
 * module runs, the modules that follow are walked, summing their params'
 * ds_numel, until the sum reaches max_reuse_distance (checked before each
 * module); a param any of them uses is not released. Entry j belongs to
 * instruction i. */
static int reused_soon(const builder *B, size_t i, size_t j)
{
    size_t q = B->next_use[j];
    return q != SIZE_MAX && B->before[q] - B->before[i + 1] < B->sh->cfg.max_reuse_elements;
}

static int reads_params(remat_instr in)
{
    return in.kind == REMAT_I_FWD || in.kind == REMAT_I_RECOMPUTE || in.kind == REMAT_I_BWD;
}

static int phase(remat_instr in)
{
    return in.kind == REMAT_I_FWD ? 0 : 1;
}

static int unit_in(const builder *B, size_t i, uint32_t u)
{
    for (size_t j = B->uoff[i]; j < B->uoff[i + 1]; j++)
        if (B->units[j] == u)
            return 1;
    return 0;
}

static remat_status push(builder *B, remat_instr_kind k, uint32_t arg, remat_err *err)
{
    if (remat_schedule_push(B->out, k, arg) != REMAT_OK)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory inserting collectives");
    return REMAT_OK;
}

static remat_status gather(builder *B, uint32_t u, remat_err *err)
{
    B->gathered[u] = 1;
    B->available += B->sh->unit_numel[u]; /* bounded by the model */
    return push(B, REMAT_I_ALLGATHER, u, err);
}

/* The units instruction `in` reads: params among an op's inputs (FWD,
 * RECOMPUTE) or inputs and saves (BWD). Appends to B->units. */
static size_t collect(builder *B, remat_instr in, size_t at)
{
    const remat_graph *g = B->g;
    if (!reads_params(in) || in.arg >= g->n_ops)
        return at;
    const remat_op *op = &g->ops[in.arg];
    const uint32_t *lists[2] = {remat_op_inputs(g, op), remat_op_saves(g, op)};
    uint32_t lens[2] = {op->n_in, in.kind == REMAT_I_BWD ? op->n_save : 0};
    size_t start = at;
    for (int l = 0; l < 2; l++)
        for (uint32_t j = 0; j < lens[l]; j++) {
            uint32_t u = B->sh->unit_of[lists[l][j]];
            if (u == REMAT_NONE || B->sh->persistent[lists[l][j]])
                continue;
            if (!B->units) { /* sizing pass: an upper bound */
                at++;
                continue;
            }
            int dup = 0;
            for (size_t q = start; q < at && !dup; q++)
                dup = B->units[q] == u;
            if (!dup)
                B->units[at++] = u;
        }
    return at;
}

/* Counts, per bucketed param, the BWD steps of the schedule that write its
 * gradient (left[t]; an op reading t twice writes it once), and per bucket
 * the params still to be written (bucket_left). Both collective builders
 * (DeepSpeed/DDP here, FSDP in shard_fsdp.c) reduce a bucket when its count
 * reaches 0; left and bucket_left must start zeroed. */
/* Whether input j of a list is its first occurrence: an op that reads a
 * param twice writes its gradient once. */
static int first_read(const uint32_t *inp, uint32_t j)
{
    for (uint32_t q = 0; q < j; q++)
        if (inp[q] == inp[j])
            return 0;
    return 1;
}

void remat__shard_count_writers(const remat_sharding *sh, const remat_schedule *in, uint32_t *left,
                                uint64_t *bucket_left)
{
    const remat_graph *g = sh->a->g;
    for (size_t i = 0; i < in->n; i++) {
        if (in->ins[i].kind != REMAT_I_BWD || in->ins[i].arg >= g->n_ops)
            continue;
        const remat_op *op = &g->ops[in->ins[i].arg];
        const uint32_t *inp = remat_op_inputs(g, op);
        for (uint32_t j = 0; j < op->n_in; j++) {
            uint32_t t = inp[j];
            if (first_read(inp, j) && sh->bucket_of[t] != REMAT_NONE && left[t]++ == 0)
                bucket_left[sh->bucket_of[t]]++;
        }
    }
}

uint32_t remat__shard_ready_buckets(const remat_sharding *sh, remat_instr I, uint32_t *left, uint64_t *bucket_left,
                                    uint32_t *ready)
{
    const remat_graph *g = sh->a->g;
    uint32_t n = 0;
    if (I.kind != REMAT_I_BWD || I.arg >= g->n_ops)
        return 0;
    const remat_op *op = &g->ops[I.arg];
    const uint32_t *inp = remat_op_inputs(g, op);
    for (uint32_t j = 0; j < op->n_in; j++) {
        uint32_t t = inp[j], b = sh->bucket_of[t];
        /* left[t] == 0: every write of t is counted down already, so its
         * bucket was reduced; a further write reduces nothing again. */
        if (!first_read(inp, j) || b == REMAT_NONE || left[t] == 0)
            continue;
        if (--left[t] == 0 && --bucket_left[b] == 0)
            ready[n++] = b;
    }
    return n;
}

remat_status remat_schedule_shard(const remat_sharding *sh, const remat_schedule *in, remat_schedule *out,
                                  remat_err *err)
{
    if (sh->cfg.fsdp == REMAT_FSDP_FULL_SHARD || sh->cfg.fsdp == REMAT_FSDP_SHARD_GRAD_OP)
        return remat__schedule_shard_fsdp(sh, in, out, err);
    const remat_analysis *a = sh->a;
    const remat_graph *g = a->g;
    const remat_shard_config *cfg = &sh->cfg;
    builder B;
    memset(&B, 0, sizeof B);
    B.sh = sh;
    B.g = g;
    B.out = out;
    size_t n = in->n, no = g->n_ops ? g->n_ops : 1, nt = g->n_tensors ? g->n_tensors : 1;
    /* Upper bound of the unit lists: every ref of every instruction. */
    size_t cap = 0;
    for (size_t i = 0; i < n; i++)
        cap += collect(&B, in->ins[i], 0);
    B.uoff = remat__array(n + 1, sizeof *B.uoff);
    B.units = remat__array(cap ? cap : 1, sizeof *B.units);
    B.gathered = remat__calloc(no, 1);
    uint32_t *left = remat__calloc(nt, sizeof *left);               /* per param: BWDs still to write it */
    uint64_t *bucket_left = remat__calloc(sh->n_buckets ? sh->n_buckets : 1, sizeof *bucket_left);
    uint32_t *ready = remat__array(sh->n_buckets ? sh->n_buckets : 1, sizeof *ready); /* one BWD's reduced buckets */
    int reuse = cfg->stage == 3 && cfg->max_reuse_elements > 0;
    if (reuse) {
        B.next_use = remat__array(cap ? cap : 1, sizeof *B.next_use);
        B.before = remat__array(n + 1, sizeof *B.before);
    }
    size_t *seen_at = reuse ? remat__array(no, sizeof *seen_at) : NULL;
    remat_status st = REMAT_OK;
    if (!B.uoff || !B.units || !B.gathered || !left || !bucket_left || !ready ||
        (reuse && (!B.next_use || !B.before || !seen_at)))
        st = remat_err_set(err, REMAT_ENOMEM, "out of memory inserting collectives");
    if (st == REMAT_OK) {
        size_t at = 0;
        for (size_t i = 0; i < n; i++) {
            B.uoff[i] = at;
            at = collect(&B, in->ins[i], at);
        }
        B.uoff[n] = at;
        /* The next reader of each entry's unit, walking back; the elements
         * read before each instruction, walking forward (saturating: a
         * distance past 2^64 is past any bound). */
        for (size_t k = 0; reuse && k < no; k++)
            seen_at[k] = SIZE_MAX;
        for (size_t i = n; reuse && i-- > 0;)
            for (size_t j = B.uoff[i]; j < B.uoff[i + 1]; j++) {
                B.next_use[j] = seen_at[B.units[j]];
                seen_at[B.units[j]] = i;
            }
        for (size_t i = 0; reuse && i <= n; i++) {
            uint64_t w = i ? B.before[i - 1] : 0;
            for (size_t j = i ? B.uoff[i - 1] : 0; i && j < B.uoff[i]; j++)
                if (!remat_u64_add(w, sh->unit_numel[B.units[j]], &w))
                    w = UINT64_MAX;
            B.before[i] = w;
        }
        remat__shard_count_writers(sh, in, left, bucket_left);
    }
    int opt_seen = 0;
    for (size_t i = 0; st == REMAT_OK && i < n; i++) {
        remat_instr I = in->ins[i];
        if (I.kind >= REMAT_I_ALLGATHER) {
            st = remat_err_set(err, REMAT_EINVAL, "instruction %zu: the schedule already has collectives", i);
            break;
        }
        if (cfg->stage == 3 && reads_params(I)) {
            for (size_t j = B.uoff[i]; j < B.uoff[i + 1] && st == REMAT_OK; j++)
                if (!B.gathered[B.units[j]])
                    st = gather(&B, B.units[j], err);
            /* Prefetch: the next units in schedule order, while what is
             * being prefetched is below the bound (DeepSpeed checks before
             * taking the next, so the last may cross it). */
            uint64_t room = cfg->max_live_elements > B.available ? cfg->max_live_elements - B.available : 0;
            uint64_t bound = room < cfg->prefetch_elements ? room : cfg->prefetch_elements, taken = 0;
            for (size_t q = i + 1; q < n && taken < bound && st == REMAT_OK; q++)
                for (size_t j = B.uoff[q]; j < B.uoff[q + 1] && taken < bound && st == REMAT_OK; j++) {
                    uint32_t u = B.units[j];
                    if (B.gathered[u])
                        continue;
                    taken += sh->unit_numel[u]; /* DeepSpeed counts ds_numel, unpadded */
                    st = gather(&B, u, err);
                }
        }
        if (st == REMAT_OK)
            st = push(&B, (remat_instr_kind)I.kind, I.arg, err);
        if (I.kind == REMAT_I_OPT)
            opt_seen = 1;
        if (st != REMAT_OK)
            break;
        if (cfg->stage == 3 && reads_params(I)) {
            /* The next param-reading instruction, if it is of this phase. */
            size_t nx = i + 1;
            while (nx < n && B.uoff[nx] == B.uoff[nx + 1])
                nx++;
            int keep_next = nx < n && phase(in->ins[nx]) == phase(I);
            for (size_t j = B.uoff[i]; j < B.uoff[i + 1] && st == REMAT_OK; j++) {
                uint32_t u = B.units[j];
                if ((keep_next && unit_in(&B, nx, u)) || (reuse && reused_soon(&B, i, j)))
                    continue;
                B.gathered[u] = 0;
                B.available -= sh->unit_numel[u];
                st = push(&B, REMAT_I_RELEASE, u, err);
            }
        }
        uint32_t n_ready = st == REMAT_OK ? remat__shard_ready_buckets(sh, I, left, bucket_left, ready) : 0;
        for (uint32_t k = 0; k < n_ready && st == REMAT_OK; k++)
            st = push(&B, cfg->stage == 0 ? REMAT_I_ALLREDUCE : REMAT_I_REDUCE_SCATTER, ready[k], err);
    }
    if (st == REMAT_OK && !opt_seen)
        st = push(&B, REMAT_I_OPT, 0, err);
    /* Stage 3: the persistent params are gathered again after the step
     * (DeepSpeed stage3.py _post_step), unit by unit. */
    for (uint32_t i = 0; cfg->stage == 3 && i < g->n_ops && st == REMAT_OK; i++)
        if (sh->unit_persist_elements[a->order[i]])
            st = push(&B, REMAT_I_ALLGATHER, a->order[i], err);
    /* Stages 1 and 2: each rank updated its partition; the updated weights
     * are all-gathered, unit by unit. */
    if (cfg->stage == 1 || cfg->stage == 2)
        for (uint32_t i = 0; i < g->n_ops && st == REMAT_OK; i++) {
            uint32_t k = a->order[i];
            int has = 0;
            const uint32_t *inp = remat_op_inputs(g, &g->ops[k]);
            for (uint32_t j = 0; j < g->ops[k].n_in && !has; j++)
                has = sh->unit_of[inp[j]] == k && sh->bucket_of[inp[j]] != REMAT_NONE;
            if (has)
                st = push(&B, REMAT_I_ALLGATHER, k, err);
        }
    remat__free(B.uoff);
    remat__free(B.units);
    remat__free(B.next_use);
    remat__free(B.before);
    remat__free(seen_at);
    remat__free(B.gathered);
    remat__free(left);
    remat__free(bucket_left);
    remat__free(ready);
    return st;
}

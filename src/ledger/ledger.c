/*
 * ledger.c - the training-state ledger: element counts, precisions and ZeRO
 * sharding turned into bytes per category.
 *
 * Both entry points reduce their input to a `census` (trainable and frozen
 * elements, plus the shape-dependent counts Adafactor and 8-bit Adam need)
 * and one function turns a census and a config into lines. Every product and
 * sum is checked, and an overflow names the term and the option that made it
 * big, because "arithmetic overflow" alone does not tell a user what to fix.
 *
 * Sharding follows ZeRO (Rajbhandari et al. 2019) as DeepSpeed pads it:
 * stages 1 and 2 flatten the trainable params into one group padded to a
 * multiple of 2 x dp (stage_1_and_2.py), so each rank's partition is
 * 2 ceil(Psi / 2dp) elements and every rank holds the padded whole in bit16;
 * stage 3 pads each param to a multiple of dp (partition_parameters.py), so a
 * rank keeps the sum of ceil(E / dp) over params. A bare --params count is one
 * flat param. Stage 1 shards optimizer state and master weights, stage 2 also
 * gradients, stage 3 also weights (including the graph's frozen params, which
 * ZeRO-3 partitions like any other param). Frozen whole-model copies (a
 * reference or teacher) are separate models and are never sharded here.
 */
#include "ledger_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* What the parameters are, before any precision or sharding. */
typedef struct {
    uint64_t trainable; /* Psi */
    uint64_t frozen;    /* the graph's frozen params */
    uint64_t fixed_bytes; /* frozen bool/integer buffers (masks, counters), counted as stored */
    int has_shapes;     /* factored counts below are known */
    uint64_t factored;  /* Adafactor: second-moment elements summed over trainable tensors */
    uint64_t e8;        /* adam8bit: trainable elements in tensors quantized to 8 bits */
    uint64_t e32;       /* adam8bit: trainable elements in tensors kept in f32 (below min_8bit) */
    uint64_t blocks;    /* adam8bit: f32 scales per state, counted per tensor */
    uint64_t n_small;   /* adam8bit: tensors below min_8bit */
    uint64_t n_fallback; /* params counted in the weight precision for want of dtype and shape */
    uint64_t s3_trainable; /* ZeRO 3: sum over trainable params of ceil(E / dp), each param padded to dp */
    uint64_t s3_frozen;    /* ZeRO 3: the same over the graph's frozen params */
    uint64_t persist;      /* ZeRO 3: elements of the persistent params (at most cfg->persist_threshold each) */
    uint64_t persist_w;    /* ZeRO 3: their gathered wholes, padded to dp (ceil(E / dp) x dp), trainable */
    uint64_t persist_f;    /* ZeRO 3: the same, frozen */
    uint64_t n_tensors;    /* trainable param tensors (Adam's step counters without ZeRO) */
    uint64_t n_groups;     /* ZeRO 3 sub groups of the rank's partitions (sub_group_size) */
    uint64_t group_fill;   /* elements in the sub group being filled */
    remat_ledger_dtype graph_dtype; /* the params' common dtype, AUTO if none is given */
} census;

/* ---- notes and checked arithmetic ---- */

void remat__ledger_note(char (*list)[REMAT_LEDGER_NOTE_LEN], uint32_t *n, const char *fmt, ...)
{
    /* The lists are sized for the worst case of the ledger's notes; the
     * guard keeps a future note from writing past them. */
    if (*n >= REMAT_LEDGER_MAX_NOTES)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(list[*n], REMAT_LEDGER_NOTE_LEN, fmt, ap);
    va_end(ap);
    (*n)++;
}

#define EXCLUDE(r, ...) remat__ledger_note((r)->excluded, &(r)->n_excluded, __VA_ARGS__)

static int mul(uint64_t a, uint64_t b, uint64_t *out, remat_err *err, const char *what)
{
    if (remat_u64_mul(a, b, out))
        return 1;
    remat_err_set(err, REMAT_EOVERFLOW, "%s: %llu x %llu exceeds 2^64-1", what, (unsigned long long)a,
                  (unsigned long long)b);
    return 0;
}

int remat__ledger_add(uint64_t a, uint64_t b, uint64_t *out, remat_err *err, const char *what)
{
    if (remat_u64_add(a, b, out))
        return 1;
    remat_err_set(err, REMAT_EOVERFLOW, "%s: %llu + %llu exceeds 2^64-1", what, (unsigned long long)a,
                  (unsigned long long)b);
    return 0;
}

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

/* ZeRO 3's persistent params (DeepSpeed parameter_offload.py
 * mark_persistent_parameters: at most stage3_param_persistence_threshold
 * elements): a rank keeps its partition (e3 elements) and, resident the whole
 * step, the gathered whole padded to dp. 0 on overflow. */
static int persist_add(const remat_ledger_config *cfg, census *c, uint64_t e, uint64_t e3, int frozen)
{
    if (cfg->zero_stage != 3 || cfg->dp < 2 || e > cfg->persist_threshold)
        return 1;
    uint64_t whole;
    uint64_t *dst = frozen ? &c->persist_f : &c->persist_w;
    return remat_u64_mul(e3, cfg->dp, &whole) && remat_u64_add(*dst, whole, dst) &&
           remat_u64_add(c->persist, e, &c->persist);
}

/* ---- the one computation ---- */

static remat_status check_config(const remat_ledger_config *cfg, remat_err *err)
{
    if (cfg->zero_stage > 3)
        return remat_err_set(err, REMAT_EINVAL, "`zero_stage`: stage %u does not exist (use 0, 1, 2 or 3)",
                             cfg->zero_stage);
    if (cfg->zero_stage > 0 && cfg->dp == 0)
        return remat_err_set(err, REMAT_EINVAL,
                             "`zero_stage` %u shards state across data-parallel devices: give their number with `dp` N",
                             cfg->zero_stage);
    if ((unsigned)cfg->optimizer >= REMAT_LEDGER_OPTIMIZER_COUNT)
        return remat_err_set(err, REMAT_EINVAL, "`optimizer`: unknown optimizer %d", (int)cfg->optimizer);
    if (cfg->optimizer == REMAT_LEDGER_ADAM8BIT && cfg->block == 0)
        return remat_err_set(err, REMAT_EINVAL, "`block`: the adam8bit block size must be at least 1 element");
    if (cfg->bucket_bytes && cfg->bucket_elements)
        return remat_err_set(err, REMAT_EINVAL, "`bucket_bytes`: give the bucket in bytes or in elements, not both");
    if (cfg->prefetch && !cfg->bucket_bytes && !cfg->bucket_elements)
        return remat_err_set(err, REMAT_EINVAL, "`prefetch` counts buckets: give their size with `bucket_bytes`");
    const struct {
        remat_ledger_dtype dt;
        const char *opt;
        int none_ok;
    } precisions[] = {
        {cfg->weights, "`weights`", 0}, {cfg->grads, "`grads`", 0}, {cfg->states, "`states`", 0},
        {cfg->master, "`master`", 1},   {cfg->comm, "`comm`", 0},
    };
    for (size_t i = 0; i < sizeof precisions / sizeof precisions[0]; i++) {
        remat_ledger_dtype dt = precisions[i].dt;
        if ((unsigned)dt >= REMAT_LEDGER_DT_COUNT)
            return remat_err_set(err, REMAT_EINVAL, "%s: unknown dtype %d", precisions[i].opt, (int)dt);
        if (dt == REMAT_LEDGER_DT_NONE && !precisions[i].none_ok)
            return remat_err_set(err, REMAT_EINVAL, "%s: 'none' is only meaningful for `master`",
                                 precisions[i].opt);
    }
    if (cfg->optimizer == REMAT_LEDGER_ADAM8BIT && cfg->states != REMAT_LEDGER_DT_AUTO &&
        remat_ledger_dtype_size(cfg->states) != 1)
        return remat_err_set(err, REMAT_EINVAL,
                             "`states` %s: adam8bit stores one-byte states (leave `states` out, or use uint8)",
                             remat_ledger_dtype_name(cfg->states));
    return REMAT_OK;
}

/* Elements of a term on one device: divided across dp devices, rounded up to
 * whole elements, when the term is sharded at this stage. */
static uint64_t shard(uint64_t elements, int sharded, uint64_t dp)
{
    return sharded && dp > 1 ? ceil_div(elements, dp) : elements;
}

/* ZeRO 1/2's partition of a flat group of e elements: DeepSpeed
 * stage_1_and_2.py pads the flattened group to a multiple of
 * nccl_start_alignment_factor (2) x dp and gives each rank 1/dp of it, so
 * 2 x ceil(e / 2dp) elements (ceil(ceil(e/dp)/2) = ceil(e/2dp): no 2dp
 * product to overflow). */
static uint64_t part12(uint64_t e, uint64_t dp)
{
    return dp > 1 ? 2 * ceil_div(ceil_div(e, dp), 2) : e;
}

/* Elements of each trainable-element array on one rank at stage z: ZeRO 3
 * per param (partition_parameters.py pads each param to dp), ZeRO 1/2 the
 * padded flat group, unsharded otherwise. `sharded` says whether the array
 * is sharded at this stage. */
static uint64_t rank_elements(const census *c, int z, int sharded, uint64_t dp)
{
    if (!sharded || dp <= 1)
        return c->trainable;
    return z >= 3 ? c->s3_trainable : part12(c->trainable, dp);
}

static int set_line(remat_ledger_line *l, uint64_t elements, remat_ledger_dtype dt, remat_err *err,
                    const char *what)
{
    l->elements = elements;
    l->dtype = dt;
    return mul(elements, remat_ledger_dtype_size(dt), &l->bytes, err, what);
}

static int optimizer_line(const remat_ledger_config *cfg, const census *c, remat_ledger_result *r,
                          remat_ledger_dtype states, remat_err *err)
{
    int sh = r->zero_stage >= 1;
    uint64_t dp = r->dp;
    uint32_t ss = remat_ledger_dtype_size(states);
    remat_ledger_line *l = &r->optimizer_state;
    const char *sn = remat_ledger_dtype_name(states);
    l->dtype = states;
    switch (r->optimizer) {
    case REMAT_LEDGER_SGD:
    case REMAT_LEDGER_MOMENTUM:
    case REMAT_LEDGER_ADAM:
    case REMAT_LEDGER_ADAMW:
    case REMAT_LEDGER_LION: {
        uint32_t k = remat_ledger_optimizer_states(r->optimizer);
        static const char *const what[] = {"no state", "1 state (the momentum buffer)",
                                           "2 states (first and second moment)"};
        if (!mul(k, rank_elements(c, (int)r->zero_stage, sh, dp), &l->elements, err, "optimizer state elements (`optimizer`)") ||
            !mul(l->elements, ss, &l->bytes, err, "optimizer state bytes (`states`)"))
            return 0;
        if (k == 0)
            l->dtype = REMAT_LEDGER_DT_NONE;
        if (k)
            ASSUME(r, "optimizer %s: %s per trainable element, each stored in %s (%u B)",
                   remat_ledger_optimizer_name(r->optimizer), what[k], sn, ss);
        else
            ASSUME(r, "optimizer sgd: no optimizer state (plain SGD, no momentum)");
        return 1;
    }
    case REMAT_LEDGER_ADAFACTOR: {
        uint64_t second = shard(c->factored, sh, dp), first = 0;
        if (cfg->adafactor_beta1)
            first = shard(c->trainable, sh, dp);
        if (!remat__ledger_add(second, first, &l->elements, err, "adafactor state elements") ||
            !mul(l->elements, ss, &l->bytes, err, "optimizer state bytes (`states`)"))
            return 0;
        ASSUME(r,
               "optimizer adafactor: factored second moment, a row and a column accumulator per matrix "
               "(%llu elements over all trainable tensors), full second moment for vectors, stored in %s",
               (unsigned long long)c->factored, sn);
        ASSUME(r, "adafactor: a tensor of shape [..., r, c] keeps prod(...)*r row and prod(...)*c column "
                  "elements (leading dims are batch dims, as in PyTorch and Hugging Face)");
        if (cfg->adafactor_beta1)
            ASSUME(r, "adafactor: beta1 set, so a full first moment per trainable element is kept too");
        else
            ASSUME(r, "adafactor: no first moment (beta1 unset, Adafactor's default; `adafactor_beta1` adds one)");
        return 1;
    }
    case REMAT_LEDGER_ADAM8BIT: {
        /* Two one-byte states per quantized element and one f32 scale per
         * block of each state; small tensors keep two f32 states, as
         * bitsandbytes does below min_8bit_size. Sharded (stage >= 1), the
         * partition is one flat array, so its blocks are counted over it. */
        uint64_t e8 = shard(c->e8, sh, dp), e32 = shard(c->e32, sh, dp);
        uint64_t blocks = sh && dp > 1 ? ceil_div(e8, cfg->block) : c->blocks;
        uint64_t q, s, f, b;
        if (!mul(2, e8, &q, err, "adam8bit states") || !mul(2, blocks, &s, err, "adam8bit scales") ||
            !mul(2, e32, &f, err, "adam8bit f32 states") || !remat__ledger_add(q, s, &l->elements, err, "adam8bit elements") ||
            !remat__ledger_add(l->elements, f, &l->elements, err, "adam8bit elements") ||
            !mul(s, 4, &s, err, "adam8bit scale bytes") || !mul(f, 4, &f, err, "adam8bit f32 state bytes") ||
            !remat__ledger_add(q, s, &b, err, "adam8bit bytes") || !remat__ledger_add(b, f, &l->bytes, err, "adam8bit bytes"))
            return 0;
        l->dtype = REMAT_LEDGER_DT_UINT8;
        ASSUME(r,
               "optimizer adam8bit: 2 one-byte states per quantized element plus one f32 scale per block of "
               "%llu elements per state, blocks rounded up (%llu scales per state)",
               (unsigned long long)cfg->block, (unsigned long long)blocks);
        if (cfg->min_8bit)
            ASSUME(r,
                   "adam8bit: tensors under %llu elements keep 2 f32 states, as bitsandbytes' min_8bit_size "
                   "(%llu such tensors, %llu elements)",
                   (unsigned long long)cfg->min_8bit, (unsigned long long)c->n_small,
                   (unsigned long long)c->e32);
        return 1;
    }
    default: break;
    }
    remat_err_set(err, REMAT_EINTERNAL, "ledger: optimizer %d not handled", (int)r->optimizer);
    return 0;
}

static int comm_lines(const remat_ledger_config *cfg, const census *c, remat_ledger_result *r, remat_err *err)
{
    remat_ledger_dtype dt = r->comm_dtype;
    uint32_t size = remat_ledger_dtype_size(dt);
    uint64_t psi = c->trainable, model, e = 0;
    if (!remat__ledger_add(c->trainable, c->frozen, &model, err, "model elements"))
        return 0;
    if (r->dp > 1) {
        if (r->zero_stage < 3) {
            if (!mul(2, psi, &e, err, "communication elements"))
                return 0;
        } else {
            /* Two all-gathers of every weight (forward and backward; frozen
             * params too) and one reduce-scatter of the gradients: 3 Psi
             * when nothing is frozen. A persistent param is gathered once,
             * after the step (DeepSpeed stage3.py _post_step). */
            uint64_t gathers;
            if (!mul(2, model - c->persist, &gathers, err, "communication elements") ||
                !remat__ledger_add(gathers, psi, &e, err, "communication elements") ||
                !remat__ledger_add(e, c->persist, &e, err, "communication elements"))
                return 0;
        }
    }
    r->comm_elements = e;
    if (!mul(e, size, &r->comm_bytes, err, "communication bytes (`comm`)"))
        return 0;
    static const char *const how[] = {
        "an all-reduce of the gradients (ZeRO stage 0, plain data parallelism)",
        "a reduce-scatter of the gradients and an all-gather of the updated weights (ZeRO stage 1)",
        "a reduce-scatter of the gradients and an all-gather of the updated weights (ZeRO stage 2)",
        "an all-gather of the weights in forward and another in backward, and a reduce-scatter of the gradients "
        "(ZeRO stage 3)",
    };
    if (r->dp > 1) {
        ASSUME(r, "communication per device per step: %s Psi%s = %llu elements in %s, Psi = %llu "
                  "(Rajbhandari et al. 2019, sections 5 and 7)",
               r->zero_stage < 3 ? "2" : "3",
               r->zero_stage < 3 ? "" : c->frozen && c->persist ? " + 2 x frozen - persistent" : c->frozen ? " + 2 x frozen"
                                        : c->persist ? " - persistent" : "",
               (unsigned long long)e, remat_ledger_dtype_name(dt), (unsigned long long)psi);
        ASSUME(r, "communication: %s; a ring moves (N-1)/N of each collective's volume", how[r->zero_stage]);
        if (c->persist)
            ASSUME(r, "ZeRO 3: %llu elements of params of at most %llu elements each are persistent "
                      "(stage3_param_persistence_threshold): kept gathered, padded to %llu, beside their "
                      "partitions, and all-gathered once after the step instead of twice per step",
                   (unsigned long long)c->persist, (unsigned long long)cfg->persist_threshold,
                   (unsigned long long)r->dp);
    } else {
        ASSUME(r, "communication: none (one device)");
    }

    /* Buffers: one bucket in flight plus `prefetch` more. A bucket larger
     * than the whole model is never filled, so it is capped there. */
    remat_ledger_line *l = &r->comm_buffers;
    uint64_t bucket = cfg->bucket_bytes, cap;
    if (cfg->bucket_elements && !mul(cfg->bucket_elements, size, &bucket, err, "`bucket_elements`"))
        return 0;
    if (!mul(r->zero_stage == 3 ? model : psi, size, &cap, err, "communication buffer cap"))
        return 0;
    if (bucket) {
        if (bucket > cap && !cfg->bucket_uncapped) {
            ASSUME(r, "communication bucket of %llu B capped at the %llu B it can ever hold",
                   (unsigned long long)bucket, (unsigned long long)cap);
            bucket = cap;
        }
        uint64_t n;
        if (!remat__ledger_add(cfg->prefetch, 1, &n, err, "`prefetch`") ||
            !mul(bucket, n, &l->bytes, err, "communication buffers (`bucket_bytes` x (1 + `prefetch`))"))
            return 0;
        l->elements = l->bytes / size;
        l->dtype = dt;
        ASSUME(r, "communication buffers: %llu bucket%s of %llu B (one in flight, %llu prefetched), in %s",
               (unsigned long long)n, n == 1 ? "" : "s", (unsigned long long)bucket, (unsigned long long)cfg->prefetch,
               remat_ledger_dtype_name(dt));
    } else {
        EXCLUDE(r, "communication buffers: not modelled (give `bucket_bytes` and `prefetch`)");
    }
    return 1;
}

static remat_status compute(const remat_ledger_config *cfg, const census *c, remat_ledger_result *r,
                            remat_err *err)
{
    remat_ledger_dtype weights = cfg->weights;
    if (weights == REMAT_LEDGER_DT_AUTO)
        weights = c->graph_dtype != REMAT_LEDGER_DT_AUTO ? c->graph_dtype : REMAT_LEDGER_DT_F32;
    remat_ledger_dtype grads = cfg->grads == REMAT_LEDGER_DT_AUTO ? weights : cfg->grads;
    remat_ledger_dtype states = cfg->states == REMAT_LEDGER_DT_AUTO ? weights : cfg->states;
    remat_ledger_dtype master = cfg->master == REMAT_LEDGER_DT_AUTO ? REMAT_LEDGER_DT_NONE : cfg->master;
    r->optimizer = cfg->optimizer;
    r->zero_stage = cfg->zero_stage;
    r->dp = cfg->dp ? cfg->dp : 1;
    r->comm_dtype = cfg->comm == REMAT_LEDGER_DT_AUTO ? grads : cfg->comm;
    r->trainable_elements = c->trainable;
    r->frozen_elements = c->frozen;
    uint64_t dp = r->dp, psi = c->trainable;
    int z = (int)r->zero_stage;

    if (cfg->weights == REMAT_LEDGER_DT_AUTO)
        ASSUME(r, "weights stored in %s (%u B per element): %s", remat_ledger_dtype_name(weights),
               remat_ledger_dtype_size(weights),
               c->graph_dtype != REMAT_LEDGER_DT_AUTO ? "the graph params' dtype" : "the default (`weights`)");
    else
        ASSUME(r, "weights stored in %s (%u B per element)", remat_ledger_dtype_name(weights),
               remat_ledger_dtype_size(weights));
    ASSUME(r, "gradients: one array per trainable element (accumulated in place), stored in %s (%u B)%s",
           remat_ledger_dtype_name(grads), remat_ledger_dtype_size(grads),
           cfg->grads == REMAT_LEDGER_DT_AUTO ? ", like the weights" : "");
    if (c->n_fallback)
        ASSUME(r, "%llu graph param(s) give neither dtype nor shape: elements = bytes / %u (the weight precision)",
               (unsigned long long)c->n_fallback, remat_ledger_dtype_size(weights));

    /* At stages 1 and 2 every rank holds the whole flat bit16 group, padding
     * included (DeepSpeed bit16_groups_flat): dp partitions of part12. */
    uint64_t wel = rank_elements(c, z, z >= 3, dp);
    if (z >= 3 && dp > 1 && !remat__ledger_add(wel, c->persist_w, &wel, err, "persistent weights (`persist_threshold`)"))
        return err->code;
    if (z >= 1 && z <= 2 && dp > 1 && !mul(part12(psi, dp), dp, &wel, err, "padded weights (`dp`)"))
        return err->code;
    if (!set_line(&r->weights, wel, weights, err, "weights (`weights`)") ||
        !set_line(&r->gradients, rank_elements(c, z, z >= 2, dp), grads, err, "gradients (`grads`)"))
        return err->code;
    if (master == REMAT_LEDGER_DT_NONE) {
        r->master_weights.dtype = REMAT_LEDGER_DT_NONE;
        ASSUME(r, "no master weights (`master` f32 adds a mixed-precision master copy)");
    } else {
        if (!set_line(&r->master_weights, rank_elements(c, z, z >= 1, dp), master, err, "master weights (`master`)"))
            return err->code;
        ASSUME(r, "master weights: one copy per trainable element in %s (%u B)", remat_ledger_dtype_name(master),
               remat_ledger_dtype_size(master));
    }
    if (!optimizer_line(cfg, c, r, states, err))
        return err->code;

    /* Frozen: the graph's frozen params (sharded with the weights at stage
     * 3), plus whole-model copies, never sharded. */
    uint64_t model, copies, frozen;
    if (!remat__ledger_add(psi, c->frozen, &model, err, "model elements") ||
        !mul(cfg->frozen_copies, model, &copies, err, "frozen copies (`frozen_copies` x model elements)") ||
        !remat__ledger_add(z >= 3 && dp > 1 ? c->s3_frozen : c->frozen, copies, &frozen, err, "frozen elements") ||
        !remat__ledger_add(frozen, z >= 3 && dp > 1 ? c->persist_f : 0, &frozen, err, "frozen elements") ||
        !set_line(&r->frozen, frozen, weights, err, "frozen weights (`frozen_copies`)"))
        return err->code;
    /* A frozen bool or integer buffer (a causal mask, a step counter) is not
     * a weight: it keeps its stored bytes in any training precision. */
    if (c->fixed_bytes && !remat__ledger_add(r->frozen.bytes, c->fixed_bytes, &r->frozen.bytes, err, "frozen buffers"))
        return err->code;
    if (c->fixed_bytes)
        ASSUME(r, "%llu B of frozen bool or integer buffers (masks, counters): counted as stored, not in %s",
               (unsigned long long)c->fixed_bytes, remat_ledger_dtype_name(weights));
    if (c->frozen)
        ASSUME(r, "%llu frozen graph param elements: weights only (no gradient, no state), in %s",
               (unsigned long long)c->frozen, remat_ledger_dtype_name(weights));
    if (cfg->frozen_copies)
        ASSUME(r,
               "%llu frozen cop%s of the whole model (%llu elements each; a reference or teacher): weights only, "
               "in %s, not sharded",
               (unsigned long long)cfg->frozen_copies, cfg->frozen_copies == 1 ? "y" : "ies",
               (unsigned long long)model, remat_ledger_dtype_name(weights));

    static const char *const sharded[] = {
        "nothing sharded",
        "optimizer state and master weights",
        "optimizer state, master weights and gradients",
        "optimizer state, master weights, gradients and weights",
    };
    if (z == 0)
        ASSUME(r, "ZeRO stage 0 over %llu data-parallel device%s: nothing sharded, every device holds every array",
               (unsigned long long)dp, dp == 1 ? "" : "s");
    else if (z <= 2)
        ASSUME(r,
               "ZeRO stage %d over %llu data-parallel devices: %s sharded; the flat group of %llu elements is "
               "padded to a multiple of 2 x %llu (DeepSpeed stage_1_and_2.py, nccl_start_alignment_factor 2), "
               "%llu elements per rank, and every rank holds the padded weights (%llu elements)",
               z, (unsigned long long)dp, sharded[z], (unsigned long long)psi, (unsigned long long)dp,
               (unsigned long long)part12(psi, dp), (unsigned long long)r->weights.elements);
    else
        ASSUME(r,
               "ZeRO stage 3 over %llu data-parallel devices: %s sharded; each param is padded to a multiple of "
               "%llu and each rank keeps ceil(E / %llu) elements of it (DeepSpeed partition_parameters.py), "
               "%llu trainable elements per rank",
               (unsigned long long)dp, sharded[z], (unsigned long long)dp, (unsigned long long)dp,
               (unsigned long long)c->s3_trainable);

    if (!comm_lines(cfg, c, r, err))
        return err->code;

    r->workspace.bytes = cfg->workspace;
    r->fragmentation_reserve.bytes = cfg->reserve;
    r->workspace.dtype = r->fragmentation_reserve.dtype = REMAT_LEDGER_DT_NONE;
    if (cfg->workspace)
        ASSUME(r, "workspace: %llu B held throughout (`workspace`)", (unsigned long long)cfg->workspace);
    else
        EXCLUDE(r, "workspace of libraries (cuBLAS, cuDNN, NCCL): not modelled (give `workspace`)");
    if (cfg->reserve)
        ASSUME(r, "fragmentation reserve: %llu B (`reserve`), an explicit line, not a factor",
               (unsigned long long)cfg->reserve);
    else
        EXCLUDE(r, "allocator fragmentation: no reserve (give `reserve`)");

    int tf32 = weights == REMAT_LEDGER_DT_TF32 || grads == REMAT_LEDGER_DT_TF32 ||
               (states == REMAT_LEDGER_DT_TF32 && r->optimizer != REMAT_LEDGER_ADAM8BIT) ||
               master == REMAT_LEDGER_DT_TF32 || r->comm_dtype == REMAT_LEDGER_DT_TF32;
    if (tf32)
        ASSUME(r, "tf32 is a compute mode: tf32 arrays are stored as 4-byte f32");

    if (!remat__ledger_host(cfg, c->n_tensors, c->n_groups, r, err))
        return err->code;

    uint64_t total = 0;
    for (int k = 0; k < REMAT_LEDGER_CATEGORY_COUNT; k++)
        if (!remat__ledger_add(total, remat_ledger_line_of(r, (remat_ledger_category)k)->bytes, &total, err, "total bytes"))
            return err->code;
    r->total_bytes = total;

    EXCLUDE(r, "activations, activation gradients and recomputation: use remat plan / replay");
    EXCLUDE(r, "input batches, CUDA context and kernels, and the optimizer step's temporaries");
    return REMAT_OK;
}

static void result_init(remat_ledger_result *r)
{
    memset(r, 0, sizeof *r);
    remat_ledger_line *lines[] = {&r->weights,      &r->gradients,    &r->optimizer_state,
                                  &r->master_weights, &r->frozen,     &r->comm_buffers,
                                  &r->workspace,    &r->fragmentation_reserve};
    for (size_t k = 0; k < sizeof lines / sizeof lines[0]; k++)
        lines[k]->dtype = REMAT_LEDGER_DT_NONE;
}

/* ---- API ---- */

void remat_ledger_config_init(remat_ledger_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->weights = cfg->grads = cfg->states = cfg->master = cfg->comm = REMAT_LEDGER_DT_AUTO;
    cfg->optimizer = REMAT_LEDGER_ADAM;
    cfg->block = REMAT_LEDGER_DEFAULT_BLOCK;
    cfg->min_8bit = REMAT_LEDGER_DEFAULT_MIN_8BIT;
    cfg->sub_group = 1000000000; /* DeepSpeed sub_group_size */
}

remat_status remat_ledger_from_count(const remat_ledger_config *cfg, uint64_t n_params, remat_ledger_result *out,
                                     remat_err *err)
{
    uint64_t n = n_params;
    result_init(out);
    remat_status st = check_config(cfg, err);
    if (st != REMAT_OK)
        return st;
    if (n == 0)
        return remat_err_set(err, REMAT_EINVAL, "`n_params`: the parameter count must be at least 1");
    if (cfg->optimizer == REMAT_LEDGER_ADAFACTOR)
        return remat_err_set(err, REMAT_EINVAL,
                             "`optimizer` adafactor: cannot factor without shapes: a bare `n_params` count has none "
                             "(use `remat_ledger_from_graph` with param shapes)");
    census c = {.trainable = n, .graph_dtype = REMAT_LEDGER_DT_AUTO};
    c.s3_trainable = cfg->dp > 1 ? ceil_div(n, cfg->dp) : n; /* one flat tensor, one param */
    c.n_tensors = c.n_groups = 1;
    if (!persist_add(cfg, &c, n, c.s3_trainable, 0))
        return remat_err_set(err, REMAT_EOVERFLOW, "`n_params`: the persistent param's gathered copy exceeds 2^64-1");
    /* One flat tensor of n elements. */
    if (cfg->optimizer == REMAT_LEDGER_ADAM8BIT) {
        if (n >= cfg->min_8bit) {
            c.e8 = n;
            c.blocks = ceil_div(n, cfg->block);
        } else {
            c.e32 = n;
            c.n_small = 1;
        }
    }
    snprintf(out->source, sizeof out->source, "`n_params` %llu", (unsigned long long)n);
    ASSUME(out, "parameters: %llu trainable elements (`n_params`), laid out as one flat tensor",
           (unsigned long long)n);
    return compute(cfg, &c, out, err);
}

remat_status remat_ledger_param_elements(const remat_graph *g, uint32_t t, remat_ledger_dtype fallback,
                                         uint64_t *out, remat_err *err)
{
    if (t >= g->n_tensors || g->tensors[t].kind != REMAT_TENSOR_PARAM)
        return remat_err_set(err, REMAT_EINVAL, "ledger: tensor %u is not a param", t);
    const remat_tensor *T = &g->tensors[t];
    uint64_t shape_elems = 1;
    for (uint32_t d = 0; d < T->ndim; d++)
        if (!remat_u64_mul(shape_elems, T->shape[d], &shape_elems))
            return remat_err_set(err, REMAT_EGRAPH, "param '%s': shape's element count exceeds 2^64-1", T->id);
    remat_ledger_dtype dt = fallback;
    if (T->dtype) {
        remat_err sub;
        remat_err_init(&sub);
        if (remat_ledger_dtype_parse(T->dtype, "dtype", &dt, &sub) != REMAT_OK || dt == REMAT_LEDGER_DT_NONE)
            return remat_err_set(err, REMAT_EGRAPH,
                                 "param '%s': unknown dtype '%s' (known: f64, f32, tf32, bf16, f16, f8_e4m3, "
                                 "f8_e5m2, int8, uint8)",
                                 T->id, T->dtype);
    } else if (T->ndim) {
        *out = shape_elems;
        return REMAT_OK;
    }
    uint32_t size = remat_ledger_dtype_size(dt);
    if (size == 0)
        return remat_err_set(err, REMAT_EGRAPH, "param '%s' has neither dtype nor shape: give one", T->id);
    if (T->ndim) {
        uint64_t want;
        if (!remat_u64_mul(shape_elems, size, &want) || want != T->bytes)
            return remat_err_set(err, REMAT_EGRAPH,
                                 "param '%s': bytes %llu do not match its shape (%llu elements) x %u B (%s)", T->id,
                                 (unsigned long long)T->bytes, (unsigned long long)shape_elems, size,
                                 remat_ledger_dtype_name(dt));
        *out = shape_elems;
        return REMAT_OK;
    }
    if (T->bytes % size)
        return remat_err_set(err, REMAT_EGRAPH, "param '%s': bytes %llu are not a whole number of %u-byte %s elements",
                             T->id, (unsigned long long)T->bytes, size, remat_ledger_dtype_name(dt));
    *out = T->bytes / size;
    return REMAT_OK;
}

/* Adafactor's second-moment elements for one tensor: rows prod(shape[:-1])
 * plus columns prod(shape[:-2]) * shape[-1] for ndim >= 2, else the full
 * tensor (PyTorch's and Hugging Face's layout). */
static int factored_elements(const remat_tensor *T, uint64_t elems, uint64_t *out, remat_err *err)
{
    if (T->ndim < 2) {
        *out = elems;
        return 1;
    }
    uint64_t lead = 1, rows, cols;
    for (uint32_t d = 0; d + 2 < T->ndim; d++)
        if (!mul(lead, T->shape[d], &lead, err, "adafactor leading dims"))
            return 0;
    if (!mul(lead, T->shape[T->ndim - 2], &rows, err, "adafactor rows") ||
        !mul(lead, T->shape[T->ndim - 1], &cols, err, "adafactor columns") ||
        !remat__ledger_add(rows, cols, out, err, "adafactor accumulators"))
        return 0;
    return 1;
}

/* A frozen param stored as bool or an integer type: a buffer such as a
 * causal mask, which exporters record as a frozen param. */
static int fixed_buffer(const remat_tensor *T)
{
    static const char *const names[] = {"bool", "i64", "int64", "long", "i32", "int32", "int", "i16", "int16"};
    if (!T->frozen || !T->dtype)
        return 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(T->dtype, names[i]) == 0)
            return 1;
    return 0;
}

remat_status remat_ledger_from_graph(const remat_ledger_config *cfg, const remat_graph *g,
                                     remat_ledger_result *out, remat_err *err)
{
    result_init(out);
    remat_status st = check_config(cfg, err);
    if (st != REMAT_OK)
        return st;
    census c = {.graph_dtype = REMAT_LEDGER_DT_AUTO, .has_shapes = 1};
    /* First pass: the params' common dtype decides the default weight
     * precision; disagreement must be settled by the user, not guessed. */
    const char *first_id = NULL;
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        const remat_tensor *T = &g->tensors[t];
        if (T->kind != REMAT_TENSOR_PARAM || !T->dtype || fixed_buffer(T))
            continue;
        remat_ledger_dtype dt;
        remat_err sub;
        remat_err_init(&sub);
        if (remat_ledger_dtype_parse(T->dtype, "dtype", &dt, &sub) != REMAT_OK || dt == REMAT_LEDGER_DT_NONE)
            return remat_err_set(err, REMAT_EGRAPH,
                                 "param '%s': unknown dtype '%s' (known: f64, f32, tf32, bf16, f16, f8_e4m3, "
                                 "f8_e5m2, int8, uint8)",
                                 T->id, T->dtype);
        if (c.graph_dtype == REMAT_LEDGER_DT_AUTO) {
            c.graph_dtype = dt;
            first_id = T->id;
        } else if (dt != c.graph_dtype && cfg->weights == REMAT_LEDGER_DT_AUTO) {
            return remat_err_set(err, REMAT_EINVAL,
                                 "`weights`: the graph's params use %s ('%s') and %s ('%s'): choose the training "
                                 "precision with `weights`",
                                 remat_ledger_dtype_name(c.graph_dtype), first_id, remat_ledger_dtype_name(dt),
                                 T->id);
        }
    }
    remat_ledger_dtype fallback = cfg->weights != REMAT_LEDGER_DT_AUTO ? cfg->weights
                                  : c.graph_dtype != REMAT_LEDGER_DT_AUTO ? c.graph_dtype
                                                                          : REMAT_LEDGER_DT_F32;
    uint64_t n_params = 0;
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        const remat_tensor *T = &g->tensors[t];
        if (T->kind != REMAT_TENSOR_PARAM)
            continue;
        n_params++;
        if (fixed_buffer(T)) {
            if (!remat_u64_add(c.fixed_bytes, T->bytes, &c.fixed_bytes))
                return remat_err_set(err, REMAT_EGRAPH, "graph: frozen buffer bytes exceed 2^64-1");
            continue;
        }
        uint64_t e;
        if ((st = remat_ledger_param_elements(g, t, fallback, &e, err)) != REMAT_OK)
            return st;
        if (!T->dtype && !T->ndim)
            c.n_fallback++;
        uint64_t e3 = cfg->dp > 1 ? ceil_div(e, cfg->dp) : e;
        if (!persist_add(cfg, &c, e, e3, T->frozen))
            return remat_err_set(err, REMAT_EGRAPH, "graph: persistent param elements exceed 2^64-1");
        if (T->frozen) {
            if (!remat_u64_add(c.s3_frozen, e3, &c.s3_frozen))
                return remat_err_set(err, REMAT_EGRAPH, "graph: frozen param elements exceed 2^64-1");
            if (!remat_u64_add(c.frozen, e, &c.frozen))
                return remat_err_set(err, REMAT_EGRAPH, "graph: frozen param elements exceed 2^64-1");
            continue;
        }
        /* ZeRO 3's sub groups (stage3.py _create_fp16_sub_groups): partitions
         * are added to a group until it holds sub_group_size elements. */
        c.n_tensors++;
        if (c.group_fill == 0)
            c.n_groups++;
        c.group_fill = c.group_fill + e3 >= cfg->sub_group || c.group_fill + e3 < e3 ? 0 : c.group_fill + e3;
        if (!remat_u64_add(c.s3_trainable, e3, &c.s3_trainable) || !remat_u64_add(c.trainable, e, &c.trainable))
            return remat_err_set(err, REMAT_EGRAPH, "graph: trainable param elements exceed 2^64-1");
        if (cfg->optimizer == REMAT_LEDGER_ADAFACTOR) {
            if (!T->ndim)
                return remat_err_set(err, REMAT_EGRAPH,
                                     "param '%s' has no shape: adafactor factors each matrix by its shape "
                                     "(add \"shape\" to the graph's params)",
                                     T->id);
            uint64_t f;
            if (!factored_elements(T, e, &f, err) || !remat__ledger_add(c.factored, f, &c.factored, err, "adafactor state"))
                return err->code;
        } else if (cfg->optimizer == REMAT_LEDGER_ADAM8BIT) {
            if (e >= cfg->min_8bit) {
                c.e8 += e; /* bounded by c.trainable, already checked */
                c.blocks += ceil_div(e, cfg->block);
            } else {
                c.e32 += e;
                c.n_small++;
            }
        }
    }
    if (c.trainable == 0 && c.frozen == 0)
        return remat_err_set(err, REMAT_EGRAPH, "graph '%s' has no params: nothing to budget", g->name);
    snprintf(out->source, sizeof out->source, "graph %s", g->name ? g->name : "(unnamed)");
    ASSUME(out, "parameters: %llu params of graph %s: %llu trainable and %llu frozen elements", (unsigned long long)n_params,
           g->name ? g->name : "(unnamed)", (unsigned long long)c.trainable, (unsigned long long)c.frozen);
    return compute(cfg, &c, out, err);
}

const remat_ledger_line *remat_ledger_line_of(const remat_ledger_result *r, remat_ledger_category c)
{
    switch (c) {
    case REMAT_LEDGER_WEIGHTS: return &r->weights;
    case REMAT_LEDGER_GRADIENTS: return &r->gradients;
    case REMAT_LEDGER_OPTIMIZER_STATE: return &r->optimizer_state;
    case REMAT_LEDGER_MASTER_WEIGHTS: return &r->master_weights;
    case REMAT_LEDGER_FROZEN: return &r->frozen;
    case REMAT_LEDGER_COMM_BUFFERS: return &r->comm_buffers;
    case REMAT_LEDGER_WORKSPACE: return &r->workspace;
    case REMAT_LEDGER_FRAGMENTATION_RESERVE: return &r->fragmentation_reserve;
    default: return NULL;
    }
}

uint64_t remat_ledger_bytes_at(const remat_ledger_result *r, remat_ledger_category c, uint64_t grad_elements)
{
    const remat_ledger_line *l = remat_ledger_line_of(r, c);
    if (!l)
        return 0;
    if (c != REMAT_LEDGER_GRADIENTS)
        return l->bytes;
    if (grad_elements >= r->trainable_elements)
        return l->bytes;
    uint64_t e = shard(grad_elements, r->zero_stage >= 2, r->dp);
    /* e <= l->elements, so the product is at most l->bytes: no overflow. */
    return e * remat_ledger_dtype_size(l->dtype);
}

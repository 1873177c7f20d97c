/*
 * ledger_opts.c - parsing of the training-state options shared by `remat
 * ledger` and the planning commands, and their translation into the
 * executor's extras (see ledger_opts.h).
 */
#include "ledger_opts.h"

#include <string.h>

void remat_cli_ledger_init(remat_cli_ledger *L)
{
    memset(L, 0, sizeof *L);
    remat_ledger_config_init(&L->cfg);
    remat_shard_config_init(&L->shard, 0, 0);
}

void remat_cli_ledger_destroy(remat_cli_ledger *L)
{
    if (L && L->sharded)
        remat_sharding_destroy(&L->sh);
    if (L)
        L->sharded = 0;
    remat_cli_shard_destroy(L);
}

/* A plain decimal integer, nothing else: "--dp 8x" must not become 8. */
static int parse_uint(const char *cmd, const char *s, const char *opt, uint64_t *out)
{
    uint64_t v = 0;
    if (!*s)
        return remat_cli_usage_error(cmd, "%s: empty value", opt);
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return remat_cli_usage_error(cmd, "%s: '%s' is not a non-negative integer", opt, s);
        if (!remat_u64_mul(v, 10, &v) || !remat_u64_add(v, (uint64_t)(*p - '0'), &v))
            return remat_cli_usage_error(cmd, "%s: '%s' exceeds 2^64-1", opt, s);
    }
    *out = v;
    return REMAT_EXIT_OK;
}

int remat_cli_ledger_option(const char *cmd, int c, const char *arg, remat_cli_ledger *L)
{
    remat_ledger_config *cfg = &L->cfg;
    remat_err err;
    remat_err_init(&err);
    remat_ledger_dtype *dt = NULL;
    const char *name = NULL;
    uint64_t v;
    int rc;
    switch (c) {
    case REMAT_LOPT_WEIGHTS: dt = &cfg->weights, name = "--weights"; break;
    case REMAT_LOPT_GRADS: dt = &cfg->grads, name = "--grads"; break;
    case REMAT_LOPT_STATES: dt = &cfg->states, name = "--states"; break;
    case REMAT_LOPT_MASTER: dt = &cfg->master, name = "--master"; break;
    case REMAT_LOPT_COMM: dt = &cfg->comm, name = "--comm"; break;
    case REMAT_LOPT_OPTIMIZER:
        if (remat_ledger_optimizer_parse(arg, "--optimizer", &cfg->optimizer, &err) != REMAT_OK)
            return remat_cli_usage_error(cmd, "%s", err.msg);
        break;
    case REMAT_LOPT_FROZEN_COPIES:
        if ((rc = parse_uint(cmd, arg, "--frozen-copies", &cfg->frozen_copies)) != REMAT_EXIT_OK)
            return rc;
        break;
    case REMAT_LOPT_ZERO:
        if ((rc = parse_uint(cmd, arg, "--zero", &v)) != REMAT_EXIT_OK)
            return rc;
        if (v > 3)
            return remat_cli_usage_error(cmd, "--zero: stage %s does not exist (use 0, 1, 2 or 3)", arg);
        cfg->zero_stage = (uint32_t)v;
        break;
    case REMAT_LOPT_DP:
        if ((rc = parse_uint(cmd, arg, "--dp", &cfg->dp)) != REMAT_EXIT_OK)
            return rc;
        if (cfg->dp == 0)
            return remat_cli_usage_error(cmd, "--dp: the data-parallel degree must be at least 1");
        break;
    case REMAT_LOPT_BUCKET:
    case REMAT_LOPT_WORKSPACE:
    case REMAT_LOPT_RESERVE: {
        const char *o = c == REMAT_LOPT_BUCKET ? "--bucket" : c == REMAT_LOPT_WORKSPACE ? "--workspace" : "--reserve";
        uint64_t *dst = c == REMAT_LOPT_BUCKET ? &cfg->bucket_bytes
                        : c == REMAT_LOPT_WORKSPACE ? &cfg->workspace
                                                    : &cfg->reserve;
        if (remat_parse_bytes(arg, o, dst, &err) != REMAT_OK)
            return remat_cli_usage_error(cmd, "%s", err.msg);
        break;
    }
    case REMAT_LOPT_BUCKET_ELEMENTS:
        if (remat_ledger_parse_count(arg, "--bucket-elements", &cfg->bucket_elements, &err) != REMAT_OK)
            return remat_cli_usage_error(cmd, "%s", err.msg);
        break;
    case REMAT_LOPT_PREFETCH:
        if ((rc = parse_uint(cmd, arg, "--prefetch", &cfg->prefetch)) != REMAT_EXIT_OK)
            return rc;
        break;
    case REMAT_LOPT_BLOCK:
        if ((rc = parse_uint(cmd, arg, "--block", &cfg->block)) != REMAT_EXIT_OK)
            return rc;
        if (cfg->block == 0)
            return remat_cli_usage_error(cmd, "--block: the adam8bit block must be at least 1 element");
        L->have_block = 1;
        break;
    case REMAT_LOPT_MIN_8BIT:
        if ((rc = parse_uint(cmd, arg, "--min-8bit", &cfg->min_8bit)) != REMAT_EXIT_OK)
            return rc;
        L->have_min8 = 1;
        break;
    case REMAT_LOPT_ADAFACTOR_BETA1: cfg->adafactor_beta1 = true; break;
    case REMAT_LOPT_DS_CONFIG: L->ds_path = arg; break;
    case REMAT_LOPT_DS_WRITE: L->ds_write = arg; break;
    case REMAT_LOPT_ADAM_STEP:
        if (!strcmp(arg, "host"))
            cfg->step = REMAT_LEDGER_STEP_HOST;
        else if (!strcmp(arg, "device"))
            cfg->step = REMAT_LEDGER_STEP_DEVICE;
        else if (!strcmp(arg, "none"))
            cfg->step = REMAT_LEDGER_STEP_NONE;
        else
            return remat_cli_usage_error(cmd, "--adam-step: '%s' is not host, device or none", arg);
        break;
    case REMAT_LOPT_SUB_GROUP:
        if (remat_ledger_parse_count(arg, "--sub-group-size", &cfg->sub_group, &err) != REMAT_OK)
            return remat_cli_usage_error(cmd, "%s", err.msg);
        break;
    case REMAT_LOPT_OFFLOAD_OPTIMIZER:
        cfg->offload_optimizer = true;
        L->shard.offload_optimizer = 1;
        break;
    case REMAT_LOPT_STAGE3_PERSIST:
        if (remat_ledger_parse_count(arg, "--stage3-persistence", &cfg->persist_threshold, &err) != REMAT_OK)
            return remat_cli_usage_error(cmd, "%s", err.msg);
        L->shard.persist_threshold = cfg->persist_threshold;
        L->have_persist = 1;
        break;
    case REMAT_LOPT_STAGE3_PREFETCH:
    case REMAT_LOPT_STAGE3_MAX_LIVE:
    case REMAT_LOPT_STAGE3_MAX_REUSE:
    case REMAT_LOPT_FIRST_BUCKET: {
        const char *o = c == REMAT_LOPT_STAGE3_PREFETCH    ? "--stage3-prefetch"
                        : c == REMAT_LOPT_STAGE3_MAX_LIVE  ? "--stage3-max-live"
                        : c == REMAT_LOPT_STAGE3_MAX_REUSE ? "--stage3-max-reuse"
                                                           : "--first-bucket-elements";
        uint64_t *dst = c == REMAT_LOPT_STAGE3_PREFETCH    ? &L->shard.prefetch_elements
                        : c == REMAT_LOPT_STAGE3_MAX_LIVE  ? &L->shard.max_live_elements
                        : c == REMAT_LOPT_STAGE3_MAX_REUSE ? &L->shard.max_reuse_elements
                                                           : &L->shard.first_bucket_elements;
        if (remat_ledger_parse_count(arg, o, dst, &err) != REMAT_OK)
            return remat_cli_usage_error(cmd, "%s", err.msg);
        L->have_prefetch |= c == REMAT_LOPT_STAGE3_PREFETCH;
        L->have_max_live |= c == REMAT_LOPT_STAGE3_MAX_LIVE;
        break;
    }
    default: return remat_cli_shard_option(cmd, c, arg, L);
    }
    if (dt && remat_ledger_dtype_parse(arg, name, dt, &err) != REMAT_OK)
        return remat_cli_usage_error(cmd, "%s", err.msg);
    L->given |= 1ull << (c - REMAT_LOPT_WEIGHTS);
    L->used = 1;
    return REMAT_EXIT_OK;
}

static int flag(const remat_cli_ledger *L, int opt)
{
    return (int)(L->given >> (opt - REMAT_LOPT_WEIGHTS) & 1u);
}

/* The file's settings, under the flags: each option a flag did not give
 * takes the file's value (or DeepSpeed's default for a key it lacks). */
static int apply_ds(remat_cli_ledger *L)
{
    char *text;
    size_t len;
    remat_err err;
    remat_err_init(&err);
    if (remat__read_file(L->ds_path, &text, &len, &err) != REMAT_OK)
        return remat_cli_fail_in(L->ds_path, &err);
    remat_status st = remat_ledger_ds_read(text, len, L->ds_path, &L->ds, &err);
    remat__free(text);
    if (st != REMAT_OK)
        return remat_cli_fail_in(L->ds_path, &err);
    const remat_ds_config *d = &L->ds;
    remat_ledger_config *cfg = &L->cfg;
    int half = d->weights != REMAT_LEDGER_DT_F32;
    if (!flag(L, REMAT_LOPT_ZERO))
        cfg->zero_stage = d->stage;
    if (!flag(L, REMAT_LOPT_WEIGHTS))
        cfg->weights = d->weights;
    if (!flag(L, REMAT_LOPT_GRADS))
        cfg->grads = d->weights; /* DeepSpeed reduces gradients in the weights' precision */
    if (!flag(L, REMAT_LOPT_STATES))
        cfg->states = REMAT_LEDGER_DT_F32; /* over the fp32 partition */
    /* An fp32 master partition: mixed precision keeps one, and ZeRO 1-3 clone
     * the partition to fp32 even in fp32 training (stage_1_and_2.py
     * single_partition_of_fp32_groups, stage3.py fp32_partitioned_groups_flat). */
    if (!flag(L, REMAT_LOPT_MASTER))
        cfg->master = half || cfg->zero_stage >= 1 ? REMAT_LEDGER_DT_F32 : REMAT_LEDGER_DT_NONE;
    if (!flag(L, REMAT_LOPT_COMM) && d->comm != REMAT_LEDGER_DT_AUTO)
        cfg->comm = d->comm;
    if (!flag(L, REMAT_LOPT_OPTIMIZER) && (d->has & REMAT_DS_HAS_OPTIMIZER))
        cfg->optimizer = d->optimizer;
    if (!flag(L, REMAT_LOPT_ADAM_STEP) && (d->has & REMAT_DS_HAS_OPTIMIZER))
        cfg->step = d->step;
    if (!flag(L, REMAT_LOPT_OFFLOAD_OPTIMIZER) && d->offload_optimizer) {
        cfg->offload_optimizer = true;
        L->shard.offload_optimizer = 1;
        if (!flag(L, REMAT_LOPT_ADAM_STEP))
            cfg->step = REMAT_LEDGER_STEP_NONE; /* DeepSpeedCPUAdam */
    }
    /* ZeRO 1-3's reduce (ipg) buffer: reduce_bucket_size elements, two at
     * stages 1-2 with overlap_comm, allocated whole (stage_1_and_2.py,
     * stage3.py __ipg_bucket_flat_buffer) when contiguous_gradients. */
    if (cfg->zero_stage >= 1 && !flag(L, REMAT_LOPT_BUCKET) && !flag(L, REMAT_LOPT_BUCKET_ELEMENTS)) {
        cfg->bucket_elements = d->reduce_bucket_size;
        cfg->bucket_uncapped = d->contiguous_gradients;
        if (!d->contiguous_gradients)
            L->shard.bucket_elements = d->reduce_bucket_size; /* the buckets, without a buffer */
        if (!flag(L, REMAT_LOPT_PREFETCH))
            cfg->prefetch = d->contiguous_gradients && d->overlap_comm && cfg->zero_stage <= 2 ? 1 : 0;
    }
    if (!d->contiguous_gradients && cfg->zero_stage >= 1 && !flag(L, REMAT_LOPT_BUCKET) &&
        !flag(L, REMAT_LOPT_BUCKET_ELEMENTS))
        cfg->bucket_elements = 0;
    if (!flag(L, REMAT_LOPT_STAGE3_PREFETCH))
        L->shard.prefetch_elements = d->prefetch_bucket_size;
    if (!flag(L, REMAT_LOPT_STAGE3_MAX_LIVE))
        L->shard.max_live_elements = d->max_live_parameters;
    if (!flag(L, REMAT_LOPT_STAGE3_MAX_REUSE))
        L->shard.max_reuse_elements = d->max_reuse_distance;
    if (!flag(L, REMAT_LOPT_STAGE3_PERSIST))
        cfg->persist_threshold = L->shard.persist_threshold = d->persistence_threshold;
    if (!flag(L, REMAT_LOPT_SUB_GROUP))
        cfg->sub_group = d->sub_group_size;
    L->used = 1;
    return REMAT_EXIT_OK;
}

int remat_cli_ledger_check(const char *cmd, remat_cli_ledger *L)
{
    if (L->ds_write && strcmp(cmd, "plan") != 0)
        return remat_cli_usage_error(cmd, "--write-deepspeed-config applies to remat plan only");
    if (L->ds_write && !L->ds_path)
        return remat_cli_usage_error(cmd, "--write-deepspeed-config rewrites a config: give it with --deepspeed-config");
    if (L->ds_path && !L->ds_applied) {
        L->ds_applied = 1;
        int rc = apply_ds(L);
        if (rc != REMAT_EXIT_OK)
            return rc;
    }
    const remat_ledger_config *cfg = &L->cfg;
    if ((L->have_block || L->have_min8) && cfg->optimizer != REMAT_LEDGER_ADAM8BIT)
        return remat_cli_usage_error(cmd, "%s applies to --optimizer adam8bit only (not %s)",
                                     L->have_block ? "--block" : "--min-8bit",
                                     remat_ledger_optimizer_name(cfg->optimizer));
    if (cfg->adafactor_beta1 && cfg->optimizer != REMAT_LEDGER_ADAFACTOR)
        return remat_cli_usage_error(cmd, "--adafactor-beta1 applies to --optimizer adafactor only (not %s)",
                                     remat_ledger_optimizer_name(cfg->optimizer));
    int reuse = flag(L, REMAT_LOPT_STAGE3_MAX_REUSE);
    if ((L->have_prefetch || L->have_max_live || L->have_persist || reuse) && cfg->zero_stage != 3)
        return remat_cli_usage_error(cmd, "%s applies to --zero 3 only (not --zero %u)",
                                     L->have_prefetch    ? "--stage3-prefetch"
                                     : L->have_max_live ? "--stage3-max-live"
                                     : reuse            ? "--stage3-max-reuse"
                                                        : "--stage3-persistence",
                                     cfg->zero_stage);
    return REMAT_EXIT_OK;
}

int remat_cli_ledger_extras(const char *cmd, const remat_analysis *a, remat_cli_ledger *L, remat_exec_extras *x,
                            uint64_t *reserve)
{
    const remat_graph *g = a->g;
    memset(x, 0, sizeof *x);
    *reserve = 0;
    if (!L->used)
        return REMAT_EXIT_OK;
    int rc = remat_cli_ledger_check(cmd, L);
    if (rc != REMAT_EXIT_OK)
        return rc;
    remat_ledger_result r;
    remat_err err;
    remat_err_init(&err);
    remat_status st = remat_ledger_from_graph(&L->cfg, g, &r, &err);
    if (st == REMAT_EINVAL || st == REMAT_EOVERFLOW)
        return remat_cli_usage_error(cmd, "%s", err.msg);
    if (st != REMAT_OK)
        return remat_cli_fail(&err);
    /* Weights and gradients are checked unsharded against the graph; the
     * sharding below divides them as the engines do. */
    remat_ledger_result whole = r;
    if (r.zero_stage >= 1) { /* stages 1-2 pad the weights, stage 3 shards them */
        remat_ledger_config c0 = L->cfg;
        c0.zero_stage = 0;
        c0.offload_optimizer = false;
        if ((st = remat_ledger_from_graph(&c0, g, &whole, &err)) != REMAT_OK)
            return remat_cli_fail(&err);
    }
    /* The replay counts each param (and its gradient) at the graph's own
     * bytes: a different stored precision would count two different arrays. */
    uint64_t graph_weights = 0, graph_frozen = 0;
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        const remat_tensor *T = &g->tensors[t];
        if (T->kind != REMAT_TENSOR_PARAM)
            continue;
        if (T->frozen)
            graph_frozen += T->bytes;
        else
            graph_weights += T->bytes;
    }
    if (whole.weights.bytes != graph_weights)
        return remat_cli_usage_error(cmd,
                                     "--weights %s gives %llu B of trainable weights but the graph's params are %llu B: "
                                     "the replay counts the graph's params as they are stored, so export the graph "
                                     "in the training precision",
                                     remat_ledger_dtype_name(r.weights.dtype), (unsigned long long)whole.weights.bytes,
                                     (unsigned long long)graph_weights);
    if (whole.gradients.bytes != graph_weights)
        return remat_cli_usage_error(cmd,
                                     "--grads %s gives %llu B of gradients but the replay allocates each gradient at its "
                                     "param's size (%llu B in all)",
                                     remat_ledger_dtype_name(r.gradients.dtype),
                                     (unsigned long long)whole.gradients.bytes, (unsigned long long)graph_weights);
    L->host_bytes = r.host.bytes;
    L->offload_elements = r.offload_elements;
    L->offload_bytes = r.offload_bytes;
    x->optimizer_state = r.optimizer_state.bytes;
    x->master_weights = r.master_weights.bytes;
    /* The ledger's frozen line holds the graph's frozen params too; the
     * replay already counts those. */
    x->frozen_copies = r.frozen.bytes >= graph_frozen ? r.frozen.bytes - graph_frozen : 0;
    x->comm_buffers = r.comm_buffers.bytes;
    x->workspace = r.workspace.bytes;
    *reserve = r.fragmentation_reserve.bytes;
    if (L->have_fsdp_opts && !L->fsdp)
        return remat_cli_usage_error(cmd, "--fsdp-strategy, --fsdp-backward-prefetch, --fsdp-forward-prefetch and "
                                          "--fsdp-limit-all-gathers apply to --shard fsdp");
    if (r.dp < 2 && (L->fsdp || L->shard.wrap_depth || L->shard.n_unit_prefixes))
        return remat_cli_usage_error(cmd, "%s needs --dp N with N >= 2",
                                     L->fsdp ? "--shard fsdp" : L->shard.wrap_depth ? "--fsdp-wrap" : "--fsdp-units");
    if (r.dp < 2)
        return remat_cli_shard_apply(cmd, a, L, &r, x);
    /* The rank of a data-parallel step: every stage, 0 being DDP. */
    remat_shard_config sc = L->shard;
    sc.stage = r.zero_stage;
    sc.dp = r.dp;
    if (L->fsdp) {
        if (r.zero_stage != 0)
            return remat_cli_usage_error(cmd, "--shard fsdp shards by --fsdp-strategy: drop --zero %u (FULL_SHARD "
                                              "shards as ZeRO 3 does; NO_SHARD keeps DDP's memory)",
                                         r.zero_stage);
        if (L->ds_path)
            return remat_cli_usage_error(cmd, "--shard fsdp and --deepspeed-config: a DeepSpeed config describes "
                                              "DeepSpeed's engine, not FSDP");
        /* (The stage 3 knobs are refused before this: they need --zero 3.) */
        static const int ds_only[] = {REMAT_LOPT_OFFLOAD_OPTIMIZER, REMAT_LOPT_SUB_GROUP};
        static const char *const ds_names[] = {"--offload-optimizer", "--sub-group-size"};
        for (size_t i = 0; i < sizeof ds_only / sizeof ds_only[0]; i++)
            if (flag(L, ds_only[i]))
                return remat_cli_usage_error(cmd, "%s is DeepSpeed's; FSDP's gathers are set by --fsdp-strategy and "
                                                  "the --fsdp-*-prefetch options",
                                             ds_names[i]);
        if (sc.fsdp == REMAT_FSDP_OFF)
            sc.fsdp = REMAT_FSDP_FULL_SHARD; /* FullyShardedDataParallel's default sharding_strategy */
    } else {
        sc.fsdp = REMAT_FSDP_OFF;
    }
    sc.elem_bytes = remat_ledger_dtype_size(r.weights.dtype);
    if (L->cfg.bucket_bytes || L->cfg.bucket_elements)
        sc.bucket_elements = L->cfg.bucket_elements ? L->cfg.bucket_elements : L->cfg.bucket_bytes / sc.elem_bytes;
    remat_cli_ledger_destroy(L);
    if ((st = remat_sharding_init(a, &sc, &L->sh, &err)) != REMAT_OK)
        return st == REMAT_EINVAL ? remat_cli_usage_error(cmd, "%s", err.msg) : remat_cli_fail(&err);
    L->sharded = 1;
    x->sharding = &L->sh;
    return remat_cli_shard_apply(cmd, a, L, &r, x);
}

int remat_cli_ledger_shard_schedule(const remat_cli_ledger *L, remat_schedule *s)
{
    if (!L->sharded || remat_schedule_has_collectives(s))
        return REMAT_EXIT_OK;
    remat_err err;
    remat_err_init(&err);
    remat_schedule full;
    remat_schedule_init(&full);
    if (remat_schedule_shard(&L->sh, s, &full, &err) != REMAT_OK) {
        remat_schedule_destroy(&full);
        return remat_cli_fail(&err);
    }
    remat_schedule_destroy(s);
    *s = full;
    return REMAT_EXIT_OK;
}

void remat_cli_ledger_print_sharding(FILE *f, const remat_cli_ledger *L, const remat_replay_result *r)
{
    if (!L->sharded)
        return;
    const remat_sharding *sh = &L->sh;
    uint64_t dp = sh->cfg.dp;
    static const char *const how[] = {"DDP: buckets all-reduced", "ZeRO 1: optimizer state sharded",
                                      "ZeRO 2: gradients and optimizer state sharded",
                                      "ZeRO 3: weights, gradients and optimizer state sharded"};
    static const char *const fsdp[] = {"", "FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"};
    static const char *const bp[] = {"none", "BACKWARD_PRE", "BACKWARD_POST"};
    if (sh->cfg.fsdp != REMAT_FSDP_OFF) {
        if (sh->cfg.stage == 3)
            fprintf(f, "sharding    FSDP %s over %llu ranks; %u units, each one flat parameter padded to a multiple "
                       "of %llu; Psi = %llu elements\n",
                    fsdp[sh->cfg.fsdp], (unsigned long long)dp, sh->n_units, (unsigned long long)dp,
                    (unsigned long long)sh->psi);
        else
            fprintf(f, "sharding    FSDP NO_SHARD over %llu ranks; %u units, each one flat parameter kept whole and its "
                       "gradient all-reduced; Psi = %llu elements\n",
                    (unsigned long long)dp, sh->n_units, (unsigned long long)sh->psi);
        if (sh->cfg.stage == 3)
            fprintf(f, "fsdp        backward_prefetch %s, forward_prefetch %s, limit_all_gathers %s%s\n",
                    bp[sh->cfg.backward_prefetch], sh->cfg.forward_prefetch ? "on" : "off",
                    sh->cfg.limit_all_gathers ? "on" : "off",
                    sh->cfg.limit_all_gathers ? " (a released buffer stays charged until an all-gather finds two "
                                                "frees queued and waits on the older, torch's _FreeEventQueue)"
                                              : " (torch 1.13's default: no bound on a CPU running ahead, so every "
                                                "released buffer stays charged to the end of the step)");
    } else {
        fprintf(f, "sharding    %s over %llu ranks; %u gradient bucket%s; Psi = %llu elements\n", how[sh->cfg.stage],
                (unsigned long long)dp, sh->n_buckets, sh->n_buckets == 1 ? "" : "s", (unsigned long long)sh->psi);
    }
    if (sh->cfg.wrap_depth || sh->cfg.n_unit_prefixes)
        fprintf(f, "units       %u, by module (%s)%s%s\n", sh->n_units,
                sh->cfg.wrap_depth ? "--fsdp-wrap" : "--fsdp-units", sh->root_unit != REMAT_NONE ? "; root unit " : "",
                sh->root_unit != REMAT_NONE ? sh->a->g->ops[sh->root_unit].id : "");
    if (L->zero_redundancy) {
        remat_cli_shard_print(f, L, r);
    } else {
        fprintf(f, "ranks       every rank holds the padded partition, so each replays the peak above; elements owned:");
        for (uint64_t k = 0; k < dp && k < 16; k++)
            fprintf(f, " %llu", (unsigned long long)sh->rank_elements[k]);
        fprintf(f, "%s\n", dp > 16 ? " ..." : "");
        fprintf(f, "largest     rank 0: peak %llu B\n", (unsigned long long)r->peak_bytes);
    }
    /* A ring sends (N-1)/N of each collective's volume from every rank. */
    uint64_t q = r->comm_bytes / dp, rem = r->comm_bytes % dp;
    uint64_t ring = q * (dp - 1) + rem * (dp - 1) / dp; /* <= comm_bytes */
    fprintf(f, "comm        %llu elements = %llu B per rank per step in %u collectives (%.4g Psi); a ring sends "
               "(N-1)/N = %llu/%llu of it: %llu B (rounded down)\n",
            (unsigned long long)r->comm_elements, (unsigned long long)r->comm_bytes, r->n_collectives,
            sh->psi ? (double)r->comm_elements / (double)sh->psi : 0.0, (unsigned long long)(dp - 1),
            (unsigned long long)dp, (unsigned long long)ring);
    if (L->offload_elements)
        fprintf(f, "offload     optimizer state, master and gradient partition on the host (%llu B, not in the "
                   "peak); %llu elements = %llu B cross PCIe per step\n",
                (unsigned long long)L->host_bytes, (unsigned long long)L->offload_elements,
                (unsigned long long)L->offload_bytes);
}

int remat_cli_apply_reserve(const char *cmd, remat_plan_options *o, uint64_t reserve)
{
    if (!reserve || o->budget_kind != REMAT_BUDGET_TOTAL)
        return REMAT_EXIT_OK;
    if (reserve > o->budget)
        return remat_cli_usage_error(cmd, "--reserve %llu B exceeds the budget of %llu B",
                                     (unsigned long long)reserve, (unsigned long long)o->budget);
    o->budget -= reserve;
    return REMAT_EXIT_OK;
}

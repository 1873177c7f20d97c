/*
 * shard_opts.c - the planning commands' PyTorch sharding options:
 * `--shard zero-redundancy` (torch's ZeroRedundancyOptimizer on DDP),
 * `--rank R` (which of its unequal ranks to replay) and
 * `--optimizer-workspace torch|BYTES` (the optimizer step's temporaries).
 *
 * Design: ZeroRedundancyOptimizer keeps DDP's weights, gradients and
 * all-reduced buckets (the replay's stage 0), and changes one thing: each
 * rank's optimizer state is that of the whole params assigned to it
 * (src/exec/shard_torch.c). Ranks therefore differ: the replay is of one
 * rank (--rank) or of a bound on every rank, and the optimizer state (and
 * master copy) come from the ledger for the rank's elements, so they are stated in the same precisions and with
 * the same rules as every other ledger line. Optimizers whose state is not
 * per element (Adafactor's factored moments, 8-bit Adam's per-tensor
 * threshold and blocks) would need the rank's own tensors and are refused.
 */
#include "ledger_opts.h"

#include <string.h>

/* The FSDP options, and the units by module (which ZeRO 3 takes too). */
static int fsdp_option(const char *cmd, int c, const char *arg, remat_cli_ledger *L)
{
    remat_shard_config *sc = &L->shard;
    if (strcmp(cmd, "ledger") == 0)
        return remat_cli_usage_error(cmd, "the --fsdp-* options apply to plan, replay, compare, trace and audit (the "
                                          "ledger has no schedule to put FSDP's gathers in)");
    switch (c) {
    case REMAT_LOPT_FSDP_STRATEGY:
        if (strcmp(arg, "full") == 0)
            sc->fsdp = REMAT_FSDP_FULL_SHARD;
        else if (strcmp(arg, "grad-op") == 0)
            sc->fsdp = REMAT_FSDP_SHARD_GRAD_OP;
        else if (strcmp(arg, "none") == 0)
            sc->fsdp = REMAT_FSDP_NO_SHARD;
        else
            return remat_cli_usage_error(cmd, "--fsdp-strategy: '%s' is not one (use full, grad-op or none: FSDP's "
                                              "FULL_SHARD, SHARD_GRAD_OP, NO_SHARD)",
                                         arg);
        L->have_fsdp_opts = 1;
        break;
    case REMAT_LOPT_FSDP_BWD_PREFETCH:
        if (strcmp(arg, "pre") == 0)
            sc->backward_prefetch = REMAT_FSDP_BACKWARD_PRE;
        else if (strcmp(arg, "post") == 0)
            sc->backward_prefetch = REMAT_FSDP_BACKWARD_POST;
        else if (strcmp(arg, "none") == 0)
            sc->backward_prefetch = REMAT_FSDP_PREFETCH_NONE;
        else
            return remat_cli_usage_error(cmd, "--fsdp-backward-prefetch: '%s' is not one (use pre, post or none: "
                                              "BackwardPrefetch.BACKWARD_PRE, BACKWARD_POST, or None)",
                                         arg);
        L->have_fsdp_opts = 1;
        break;
    case REMAT_LOPT_FSDP_FWD_PREFETCH:
        sc->forward_prefetch = 1;
        L->have_fsdp_opts = 1;
        break;
    case REMAT_LOPT_FSDP_LIMIT:
        sc->limit_all_gathers = 1;
        L->have_fsdp_opts = 1;
        break;
    case REMAT_LOPT_FSDP_WRAP: {
        if (strncmp(arg, "depth:", 6) != 0)
            return remat_cli_usage_error(cmd, "--fsdp-wrap: '%s' is not a wrap policy (use depth:N: every module N "
                                              "components deep is a unit)",
                                         arg);
        uint64_t d = 0;
        int rc = remat_cli_parse_count(cmd, "--fsdp-wrap depth", arg + 6, 1, 64, &d);
        if (rc != REMAT_EXIT_OK)
            return rc;
        sc->wrap_depth = (uint32_t)d;
        break;
    }
    default: {
        size_t n = strlen(arg), k = 0;
        if (n >= sizeof L->unit_buf)
            return remat_cli_usage_error(cmd, "--fsdp-units: the list is longer than %zu characters",
                                         sizeof L->unit_buf - 1);
        memcpy(L->unit_buf, arg, n + 1);
        for (char *p = L->unit_buf;; p++) {
            char *end = strchr(p, ',');
            if (end)
                *end = '\0';
            if (!*p)
                return remat_cli_usage_error(cmd, "--fsdp-units: prefix %zu is empty (give module paths separated "
                                                  "by commas, e.g. layers.0,layers.1)",
                                             k + 1);
            if (k == sizeof L->unit_list / sizeof L->unit_list[0])
                return remat_cli_usage_error(cmd, "--fsdp-units: more than %zu prefixes",
                                             sizeof L->unit_list / sizeof L->unit_list[0]);
            L->unit_list[k++] = p;
            if (!end)
                break;
            p = end;
        }
        sc->unit_prefixes = L->unit_list;
        sc->n_unit_prefixes = k;
        break;
    }
    }
    L->used = 1;
    return REMAT_EXIT_OK;
}

int remat_cli_shard_option(const char *cmd, int c, const char *arg, remat_cli_ledger *L)
{
    remat_err err;
    remat_err_init(&err);
    if (c >= REMAT_LOPT_FSDP_STRATEGY && c <= REMAT_LOPT_FSDP_UNITS)
        return fsdp_option(cmd, c, arg, L);
    if (c != REMAT_LOPT_SHARD && c != REMAT_LOPT_RANK && c != REMAT_LOPT_OPT_WORKSPACE)
        return -1;
    if (strcmp(cmd, "ledger") == 0)
        return remat_cli_usage_error(cmd, "--shard, --rank and --optimizer-workspace apply to plan, replay and "
                                          "compare (they choose the rank a replay measures)");
    switch (c) {
    case REMAT_LOPT_SHARD:
        L->zero_redundancy = L->fsdp = 0;
        if (strcmp(arg, "zero-redundancy") == 0)
            L->zero_redundancy = 1;
        else if (strcmp(arg, "fsdp") == 0)
            L->fsdp = 1;
        else if (strcmp(arg, "deepspeed") != 0)
            return remat_cli_usage_error(cmd, "--shard: '%s' is not a sharding (use deepspeed, the --zero stages; "
                                              "zero-redundancy, PyTorch's ZeroRedundancyOptimizer; or fsdp, "
                                              "PyTorch's FullyShardedDataParallel)",
                                         arg);
        break;
    case REMAT_LOPT_RANK: {
        int rc = remat_cli_parse_count(cmd, "--rank", arg, 0, UINT32_MAX, &L->rank);
        if (rc != REMAT_EXIT_OK)
            return rc;
        L->have_rank = 1;
        break;
    }
    default:
        L->have_opt_ws = 1;
        if (strcmp(arg, "torch") == 0) {
            L->opt_ws_torch = 1;
        } else if (remat_parse_bytes(arg, "--optimizer-workspace", &L->opt_ws_bytes, &err) != REMAT_OK) {
            return remat_cli_usage_error(cmd, "%s (or 'torch': PyTorch's Adam temporaries)", err.msg);
        }
        break;
    }
    L->used = 1;
    return REMAT_EXIT_OK;
}

void remat_cli_shard_destroy(remat_cli_ledger *L)
{
    if (L && L->zr_built)
        remat_zero_redundancy_destroy(&L->zr);
    if (L)
        L->zr_built = 0;
}

/* The ledger's lines for n trainable elements on one device, in the
 * precisions r resolved for the graph. */
static int rank_ledger(const char *cmd, const remat_cli_ledger *L, const remat_ledger_result *r, uint64_t n,
                       remat_ledger_result *out)
{
    remat_ledger_config c = L->cfg;
    c.weights = r->weights.dtype;
    c.grads = r->gradients.dtype;
    c.states = r->optimizer_state.dtype == REMAT_LEDGER_DT_NONE ? c.states : r->optimizer_state.dtype;
    c.master = r->master_weights.dtype;
    c.zero_stage = 0;
    c.dp = 0;
    c.frozen_copies = 0;
    remat_err err;
    remat_err_init(&err);
    if (remat_ledger_from_count(&c, n, out, &err) != REMAT_OK)
        return remat_cli_usage_error(cmd, "%s", err.msg);
    return REMAT_EXIT_OK;
}

int remat_cli_shard_apply(const char *cmd, const remat_analysis *a, remat_cli_ledger *L, const remat_ledger_result *r,
                          remat_exec_extras *x)
{
    remat_ledger_optimizer o = r->optimizer;
    if (L->have_rank && !L->zero_redundancy)
        return remat_cli_usage_error(cmd, "--rank applies to --shard zero-redundancy only (the --zero stages pad "
                                          "every rank to the same bytes)");
    if (L->zero_redundancy) {
        if (r->dp < 2)
            return remat_cli_usage_error(cmd, "--shard zero-redundancy needs --dp N with N >= 2");
        if (r->zero_stage != 0)
            return remat_cli_usage_error(cmd, "--shard zero-redundancy runs on DDP's whole gradients: drop --zero %u "
                                              "(ZeroRedundancyOptimizer shards the optimizer state itself)",
                                         r->zero_stage);
        if (o == REMAT_LEDGER_ADAFACTOR || o == REMAT_LEDGER_ADAM8BIT)
            return remat_cli_usage_error(cmd, "--shard zero-redundancy: %s's state depends on each tensor's shape, "
                                              "which a rank's element count does not give (use adam, adamw, "
                                              "momentum, lion or sgd)",
                                         remat_ledger_optimizer_name(o));
        if (L->have_rank && L->rank >= r->dp)
            return remat_cli_usage_error(cmd, "--rank %llu: there are %llu ranks (0 to %llu)",
                                         (unsigned long long)L->rank, (unsigned long long)r->dp,
                                         (unsigned long long)(r->dp - 1));
    }
    uint32_t eb = remat_ledger_dtype_size(r->weights.dtype);
    uint64_t temps = remat_torch_adam_temporaries(a, eb);
    int rc;
    /* FSDP's optimizer steps the rank's shards of the flat parameters:
     * the ledger's lines for those elements (NO_SHARD keeps the whole). */
    int fsdp_sharded = L->fsdp && L->sharded && L->sh.cfg.stage == 3;
    if (fsdp_sharded) {
        if (o == REMAT_LEDGER_ADAFACTOR || o == REMAT_LEDGER_ADAM8BIT)
            return remat_cli_usage_error(cmd, "--shard fsdp: %s's state depends on each tensor's shape, which a "
                                              "flat parameter's shard does not keep (use adam, adamw, momentum, "
                                              "lion or sgd)",
                                         remat_ledger_optimizer_name(o));
        remat_ledger_result mine;
        if ((rc = rank_ledger(cmd, L, r, L->sh.fsdp_shard_elements, &mine)) != REMAT_EXIT_OK)
            return rc;
        x->optimizer_state = mine.optimizer_state.bytes;
        x->master_weights = mine.master_weights.bytes;
    }
    if (L->zero_redundancy) {
        remat_cli_shard_destroy(L);
        remat_err err;
        remat_err_init(&err);
        remat_status st = remat_zero_redundancy_init(a, r->dp, eb, &L->zr, &err);
        if (st != REMAT_OK)
            return st == REMAT_EINVAL ? remat_cli_usage_error(cmd, "%s", err.msg) : remat_cli_fail(&err);
        L->zr_built = 1;
        /* Without --rank: a bound on every rank. The state (and master
         * copy) grow with the elements, so the rank with the most holds the
         * most; the optimizer's temporaries, charged only at OPT, may be
         * largest on another rank (two large params side by side), so the
         * bound takes the largest of each. Every rank's replay is then at or
         * below it, which is what a per-rank budget needs. */
        uint32_t sr = L->have_rank ? (uint32_t)L->rank : L->zr.largest_rank;
        remat_ledger_result mine;
        if ((rc = rank_ledger(cmd, L, r, L->zr.rank_state_elements[sr], &mine)) != REMAT_EXIT_OK)
            return rc;
        x->optimizer_state = mine.optimizer_state.bytes;
        x->master_weights = mine.master_weights.bytes;
        temps = L->zr.rank_temps[sr];
        for (uint64_t q = 0; !L->have_rank && q < L->zr.dp; q++)
            temps = L->zr.rank_temps[q] > temps ? L->zr.rank_temps[q] : temps;
    }
    if (!L->have_opt_ws)
        return REMAT_EXIT_OK;
    if (!L->opt_ws_torch) {
        x->optimizer_workspace = L->opt_ws_bytes;
        return REMAT_EXIT_OK;
    }
    /* torch 1.13's optimizers run their single-tensor loops by default
     * (torch/optim/adam.py: foreach None becomes False): Adam's and AdamW's
     * temporaries are remat_torch_adam_temporaries' elements in the
     * state's dtype; SGD and momentum update in place. */
    if (r->zero_stage != 0)
        return remat_cli_usage_error(cmd, "--optimizer-workspace torch models PyTorch's optimizer, not DeepSpeed's "
                                          "partitioned one (--zero %u): give the bytes instead",
                                     r->zero_stage);
    if (fsdp_sharded)
        return remat_cli_usage_error(cmd, "--optimizer-workspace torch: the temporaries over FSDP's flat shards are "
                                          "not modelled; give the bytes instead");
    uint32_t k;
    switch (o) {
    case REMAT_LEDGER_ADAM:
    case REMAT_LEDGER_ADAMW: k = 1; break;
    case REMAT_LEDGER_SGD:
    case REMAT_LEDGER_MOMENTUM: k = 0; break;
    default:
        return remat_cli_usage_error(cmd, "--optimizer-workspace torch: %s's temporaries are not modelled (adam, "
                                          "adamw, momentum, sgd are); give the bytes instead",
                                     remat_ledger_optimizer_name(o));
    }
    uint64_t sb = remat_ledger_dtype_size(r->optimizer_state.dtype), ws;
    if (!remat_u64_mul(temps, sb, &ws) || !remat_u64_mul(ws, k, &ws))
        return remat_cli_usage_error(cmd, "--optimizer-workspace torch: the temporaries exceed 2^64-1 B");
    x->optimizer_workspace = ws;
    return REMAT_EXIT_OK;
}

void remat_cli_shard_print(FILE *f, const remat_cli_ledger *L, const remat_replay_result *r)
{
    if (!L->zr_built)
        return;
    const remat_zero_redundancy *z = &L->zr;
    fprintf(f, "zero-redundancy  PyTorch ZeroRedundancyOptimizer on DDP: whole params assigned largest first to "
               "the least-loaded rank; elements with optimizer state per rank:");
    for (uint64_t k = 0; k < z->dp && k < 16; k++)
        fprintf(f, " %llu", (unsigned long long)z->rank_state_elements[k]);
    fprintf(f, "%s\n", z->dp > 16 ? " ..." : "");
    if (L->have_rank) {
        fprintf(f, "replayed    rank %llu: optimizer state %llu B, peak %llu B\n", (unsigned long long)L->rank,
                (unsigned long long)r->at_opt_by_category[REMAT_CAT_OPTIMIZER_STATE],
                (unsigned long long)r->peak_bytes);
    } else {
        uint64_t tr = 0;
        for (uint64_t q = 1; q < z->dp; q++)
            if (z->rank_temps[q] > z->rank_temps[tr])
                tr = q;
        int two = L->have_opt_ws && z->rank_temps[tr] > z->rank_temps[z->largest_rank];
        fprintf(f, "replayed    every rank's bound: the most optimizer state (rank %u, %llu B)", z->largest_rank,
                (unsigned long long)r->at_opt_by_category[REMAT_CAT_OPTIMIZER_STATE]);
        if (two)
            fprintf(f, " with the largest optimizer temporaries (rank %llu)", (unsigned long long)tr);
        fprintf(f, "; peak %llu B, %s (--rank R replays one rank)\n", (unsigned long long)r->peak_bytes,
                two ? "at or above every rank's" : "the largest rank's");
    }
    uint64_t psi = L->sh.psi;
    fprintf(f, "broadcast   after OPT each rank broadcasts the params it updated: %llu elements per step "
               "(_sync_params), besides the all-reduces above\n",
            (unsigned long long)psi);
}

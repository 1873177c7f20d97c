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

int remat_cli_shard_option(const char *cmd, int c, const char *arg, remat_cli_ledger *L)
{
    remat_err err;
    remat_err_init(&err);
    if (c != REMAT_LOPT_SHARD && c != REMAT_LOPT_RANK && c != REMAT_LOPT_OPT_WORKSPACE)
        return -1;
    if (strcmp(cmd, "ledger") == 0)
        return remat_cli_usage_error(cmd, "--shard, --rank and --optimizer-workspace apply to plan, replay and "
                                          "compare (they choose the rank a replay measures)");
    switch (c) {
    case REMAT_LOPT_SHARD:
        if (strcmp(arg, "zero-redundancy") == 0)
            L->zero_redundancy = 1;
        else if (strcmp(arg, "deepspeed") == 0)
            L->zero_redundancy = 0;
        else
            return remat_cli_usage_error(cmd, "--shard: '%s' is not a sharding (use deepspeed, the --zero stages, or "
                                              "zero-redundancy, PyTorch's ZeroRedundancyOptimizer)",
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
        return remat_cli_usage_err(cmd, &err);
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
    if (L->zero_redundancy) {
        remat_cli_shard_destroy(L);
        remat_err err;
        remat_err_init(&err);
        remat_status st = remat_zero_redundancy_init(a, r->dp, eb, &L->zr, &err);
        if (st != REMAT_OK)
            return st == REMAT_EINVAL ? remat_cli_usage_err(cmd, &err) : remat_cli_fail(&err);
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

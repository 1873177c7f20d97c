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
    default: return -1;
    }
    if (dt && remat_ledger_dtype_parse(arg, name, dt, &err) != REMAT_OK)
        return remat_cli_usage_error(cmd, "%s", err.msg);
    L->used = 1;
    return REMAT_EXIT_OK;
}

int remat_cli_ledger_check(const char *cmd, const remat_cli_ledger *L)
{
    const remat_ledger_config *cfg = &L->cfg;
    if ((L->have_block || L->have_min8) && cfg->optimizer != REMAT_LEDGER_ADAM8BIT)
        return remat_cli_usage_error(cmd, "%s applies to --optimizer adam8bit only (not %s)",
                                     L->have_block ? "--block" : "--min-8bit",
                                     remat_ledger_optimizer_name(cfg->optimizer));
    if (cfg->adafactor_beta1 && cfg->optimizer != REMAT_LEDGER_ADAFACTOR)
        return remat_cli_usage_error(cmd, "--adafactor-beta1 applies to --optimizer adafactor only (not %s)",
                                     remat_ledger_optimizer_name(cfg->optimizer));
    return REMAT_EXIT_OK;
}

int remat_cli_ledger_extras(const char *cmd, const remat_graph *g, const remat_cli_ledger *L, remat_exec_extras *x,
                            uint64_t *reserve)
{
    memset(x, 0, sizeof *x);
    *reserve = 0;
    if (!L->used)
        return REMAT_EXIT_OK;
    int rc = remat_cli_ledger_check(cmd, L);
    if (rc != REMAT_EXIT_OK)
        return rc;
    if (L->cfg.zero_stage >= 2)
        return remat_cli_usage_error(cmd,
                                     "--zero %u shards %s, which the replay counts unsharded from the graph; "
                                     "budget ZeRO stages 2 and 3 with `remat ledger` (stages 0 and 1 are supported "
                                     "here)",
                                     L->cfg.zero_stage, L->cfg.zero_stage == 2 ? "gradients" : "weights and gradients");
    remat_ledger_result r;
    remat_err err;
    remat_err_init(&err);
    remat_status st = remat_ledger_from_graph(&L->cfg, g, &r, &err);
    if (st == REMAT_EINVAL || st == REMAT_EOVERFLOW)
        return remat_cli_usage_error(cmd, "%s", err.msg);
    if (st != REMAT_OK)
        return remat_cli_fail(&err);
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
    if (r.weights.bytes != graph_weights)
        return remat_cli_usage_error(cmd,
                                     "--weights %s gives %llu B of trainable weights but the graph's params are %llu B: "
                                     "the replay counts the graph's params as they are stored, so export the graph "
                                     "in the training precision",
                                     remat_ledger_dtype_name(r.weights.dtype), (unsigned long long)r.weights.bytes,
                                     (unsigned long long)graph_weights);
    if (r.gradients.bytes != graph_weights)
        return remat_cli_usage_error(cmd,
                                     "--grads %s gives %llu B of gradients but the replay allocates each gradient at its "
                                     "param's size (%llu B in all)",
                                     remat_ledger_dtype_name(r.gradients.dtype), (unsigned long long)r.gradients.bytes,
                                     (unsigned long long)graph_weights);
    x->optimizer_state = r.optimizer_state.bytes;
    x->master_weights = r.master_weights.bytes;
    /* The ledger's frozen line holds the graph's frozen params too; the
     * replay already counts those. */
    x->frozen_copies = r.frozen.bytes >= graph_frozen ? r.frozen.bytes - graph_frozen : 0;
    x->comm_buffers = r.comm_buffers.bytes;
    x->workspace = r.workspace.bytes;
    *reserve = r.fragmentation_reserve.bytes;
    return REMAT_EXIT_OK;
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

/*
 * pp_ledger.c - the ledger's options with --pp: each pipeline stage's
 * training state from its own params.
 *
 * A device of a pipeline holds the weights, gradients and optimizer state
 * of its stages' params only, so the ledger (remat_ledger_from_graph, via
 * the same remat_cli_ledger_extras that a single device uses) runs once per
 * stage graph (remat_pp_stage_graph), with the same options, and each
 * stage's replay adds its own optimizer state, master weights and frozen
 * copies. The params of a stage are exactly the whole graph's params its
 * ops read (pp_stage.c), so the stages' states add up to the whole graph's
 * when no param is shared between stages. Data-parallel sharding of a
 * stage (--dp with --pp) is refused: the sharding would be one per stage
 * and the ledger's state keeps only one.
 */
#include "cli.h"
#include "ledger_opts.h"
#include "remat/pipeline.h"

#include <stdio.h>
#include <string.h>

int remat_cli_pp_ledger(const char *cmd, const remat_analysis *a, const remat_cli_pp *p, struct remat_cli_ledger *L,
                        const uint32_t *cuts, remat_exec_extras *x, uint64_t *reserve)
{
    const uint32_t n = p->c.stages * p->c.chunks;
    *reserve = 0;
    if (L->cfg.dp >= 2 || L->zero_redundancy || L->ds_path)
        return remat_cli_usage_error(cmd, "--dp, --shard and --deepspeed-config with --pp: a pipeline stage's "
                                          "data-parallel sharding is not modelled yet (give the ledger's other "
                                          "options)");
    remat_err err;
    remat_err_init(&err);
    int rc = REMAT_EXIT_OK;
    for (uint32_t v = 0; v < n && rc == REMAT_EXIT_OK; v++) {
        char *json = NULL;
        size_t len = 0;
        remat_graph *sg = NULL;
        remat_analysis *sa = NULL;
        char src[48];
        snprintf(src, sizeof src, "pipeline stage %u", v);
        remat_status st = remat_pp_stage_graph(a, cuts[v], cuts[v + 1], v, &json, &len, &err);
        if (st == REMAT_OK)
            st = remat_graph_load_json(json, len, src, &sg, &err);
        if (st == REMAT_OK)
            st = remat_analyze(sg, &sa, &err);
        remat_free(json);
        if (st != REMAT_OK)
            rc = st == REMAT_EINVAL ? remat_cli_usage_error(cmd, "%s", err.msg) : remat_cli_fail(&err);
        uint64_t res = 0;
        if (rc == REMAT_EXIT_OK)
            rc = remat_cli_ledger_extras(cmd, sa, L, &x[v], &res);
        /* The reserve is the device's, the same option for every stage. */
        if (res > *reserve)
            *reserve = res;
        remat_analysis_destroy(sa);
        remat_graph_destroy(sg);
    }
    return rc;
}

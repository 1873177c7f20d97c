/*
 * ds_write.c - `remat plan ... --deepspeed-config F --write-deepspeed-config
 * OUT`: the plan said in DeepSpeed's own settings, and what they cannot say.
 *
 * Design: DeepSpeed's activation checkpointing is code, not configuration:
 * the model wraps functions in deepspeed.checkpointing.checkpoint, and each
 * wrapped function's forward is run again, once, before its backward. The
 * config only sizes it (number_checkpoints, used with
 * contiguous_memory_optimization) and moves or partitions what is kept
 * (cpu_checkpointing, partition_activations, which remat does not plan). So
 * the file gets the sharding remat planned under and the number of
 * recomputed segments (maximal runs of RECOMPUTE instructions in the
 * schedule, FREEs and collectives aside), and the report names each
 * segment's ops, which the model's code must wrap; a schedule that
 * recomputes an op more than once (Revolve's passes) has no such wrapping,
 * and is said so.
 */
#include "cli.h"
#include "ledger_opts.h"

#include <string.h>

int remat_cli_ledger_write_ds(const remat_cli_ledger *L, const remat_analysis *a, const remat_schedule *s,
                              const remat_replay_result *r, FILE *H)
{
    if (!L->ds_write)
        return REMAT_EXIT_OK;
    const remat_graph *g = a->g;
    uint64_t segments = 0;
    int in_run = 0;
    size_t shown = 0;
    char ranges[512] = "";
    uint32_t first = REMAT_NONE, last = REMAT_NONE;
    for (size_t i = 0; i <= s->n; i++) {
        remat_instr in = i < s->n ? s->ins[i] : (remat_instr){REMAT_I_OPT, 0};
        if (in.kind == REMAT_I_FREE || in.kind >= REMAT_I_ALLGATHER)
            continue;
        if (in.kind == REMAT_I_RECOMPUTE) {
            if (!in_run)
                first = in.arg, segments++;
            last = in.arg;
            in_run = 1;
            continue;
        }
        if (in_run && shown < 6) {
            size_t n = strlen(ranges);
            snprintf(ranges + n, sizeof ranges - n, "%s%s..%s", shown ? ", " : "", g->ops[first].id, g->ops[last].id);
            shown++;
        }
        in_run = 0;
    }
    uint32_t multi = REMAT_NONE;
    for (uint32_t k = 0; k < g->n_ops && multi == REMAT_NONE; k++)
        if (r->recompute_counts && r->recompute_counts[k] > 1)
            multi = k;
    remat_ds_settings set;
    memset(&set, 0, sizeof set);
    set.stage = L->cfg.zero_stage;
    set.reduce_bucket_size = L->sharded ? L->sh.cfg.bucket_elements : L->cfg.bucket_elements;
    set.prefetch_bucket_size = L->shard.prefetch_elements;
    set.max_live_parameters = L->shard.max_live_elements;
    set.max_reuse_distance = L->shard.max_reuse_elements;
    set.persistence_threshold = L->cfg.persist_threshold;
    set.sub_group_size = L->cfg.sub_group;
    set.offload_optimizer = L->cfg.offload_optimizer;
    set.number_checkpoints = segments;
    char *text;
    size_t len, tlen;
    remat_err err;
    remat_err_init(&err);
    if (remat__read_file(L->ds_path, &text, &tlen, &err) != REMAT_OK)
        return remat_cli_fail_in(L->ds_path, &err);
    char *json;
    remat_status st = remat_ledger_ds_write(text, tlen, L->ds_path, &set, &json, &len, &err);
    remat__free(text);
    if (st != REMAT_OK)
        return remat_cli_fail_in(L->ds_path, &err);
    int rc = remat_cli_write(L->ds_write, json, len);
    remat_free(json);
    if (rc != REMAT_EXIT_OK)
        return rc;
    fprintf(H, "deepspeed   wrote %s: ZeRO stage %u, activation_checkpointing.number_checkpoints = %llu\n",
            L->ds_write, set.stage, (unsigned long long)segments);
    if (segments)
        fprintf(H, "deepspeed   not in the config: which ops to checkpoint; wrap each recomputed segment's ops in "
                   "deepspeed.checkpointing.checkpoint: %s%s\n",
                ranges, segments > shown ? ", ..." : "");
    else
        fprintf(H, "deepspeed   the plan recomputes nothing: no function to checkpoint\n");
    if (multi != REMAT_NONE)
        fprintf(H, "deepspeed   not expressible: op %s is recomputed %u times; a checkpointed function's forward "
                   "runs again once, before its backward\n",
                g->ops[multi].id, r->recompute_counts[multi]);
    fprintf(H, "deepspeed   not planned by remat (left false): partition_activations (model-parallel), "
               "cpu_checkpointing\n");
    return REMAT_EXIT_OK;
}

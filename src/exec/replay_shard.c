/*
 * replay_shard.c - the replay's rules for sharded data parallelism: what a
 * collective does to one rank's memory and communication, and when a
 * compute step may read a sharded param (remat/exec.h, "Sharded data
 * parallel"; graphs/README.md cites the engines' source for each rule).
 *
 * Part of the one cursor: these functions are called by replay.c's apply
 * and use its step primitives (replay_cursor.h), so a collective's bytes
 * enter the same high-water marks, category maxima and observer events as
 * every other instruction's.
 */
#include "remat/exec.h"
#include "../util/util_internal.h"
#include "replay_cursor.h"

#include <string.h>

typedef struct remat_replay_cursor replay;

/* ZeRO stage 3: every param an op reads must be gathered (its rank holds
 * only a partition of it). */
remat_status remat__replay_check_gathered(replay *R, remat_instr in, const uint32_t *ts, uint32_t n)
{
    const remat_sharding *sh = R->extras.sharding;
    if (!sh || sh->cfg.stage != 3)
        return REMAT_OK;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t u = sh->unit_of[ts[i]];
        if (u != REMAT_NONE && !sh->persistent[ts[i]] && !R->gathered[u])
            return remat__replay_invalid(R, in,
                           "reads param '%s' of unit '%s', which is sharded and not gathered (ZeRO stage 3 "
                           "all-gathers a unit before each use%s)",
                           R->g->tensors[ts[i]].id, R->g->ops[u].id,
                           in.kind == REMAT_I_RECOMPUTE ? ", a recomputation too" : "");
    }
    return REMAT_OK;
}

static remat_status count_comm(replay *R, uint64_t elements)
{
    remat_replay_result *r = R->r;
    uint64_t b;
    if (!remat_u64_add(r->comm_elements, elements, &r->comm_elements) ||
        !remat_u64_mul(elements, R->extras.sharding->cfg.elem_bytes, &b) ||
        !remat_u64_add(r->comm_bytes, b, &r->comm_bytes))
        return remat_err_set(R->err, REMAT_EOVERFLOW, "instruction %zu: communication volume exceeds 2^64-1",
                             R->index);
    r->n_collectives++;
    return REMAT_OK;
}

/* FSDP's rate limiter (limit_all_gathers; torch 1.13
 * fully_sharded_data_parallel.py _FreeEventQueue, 2 in flight): before an
 * all-gather, with two or more frees queued, the CPU synchronizes on the
 * oldest, so that buffer is reusable; the newer ones may still be held.
 * The queue holds at most units + 1 entries: after the last all-gather
 * that found fewer than two, every all-gather pops one, and the releases
 * since are at most the units gathered then plus the all-gathers since. */
static remat_status reclaim(replay *R)
{
    const remat_sharding *sh = R->extras.sharding;
    if (R->held_n < 2)
        return REMAT_OK;
    uint32_t u = R->held[R->held_head];
    R->held_head = (R->held_head + 1) % (R->g->n_ops + 2u);
    R->held_n--;
    uint64_t bytes = sh->unit_elements[u] * sh->cfg.elem_bytes; /* checked when it was gathered */
    remat__replay_free_bytes(R, REMAT_CAT_GATHERED_PARAMS, bytes);
    return remat__replay_notify_free(R, REMAT_NONE, 0, REMAT_CAT_GATHERED_PARAMS, bytes);
}

/* The rules of remat/exec.h, "Sharded data parallel". */
remat_status remat__replay_collective(replay *R, remat_instr in)
{
    const remat_sharding *sh = R->extras.sharding;
    const remat_graph *g = R->g;
    const char *name = remat_instr_name((remat_instr_kind)in.kind);
    if (!sh)
        return remat__replay_invalid(R, in, "%s in a replay without sharding (give --dp N and --zero K)", name);
    uint32_t stage = sh->cfg.stage;
    uint64_t eb = sh->cfg.elem_bytes;
    if (in.kind == REMAT_I_ALLGATHER || in.kind == REMAT_I_RELEASE) {
        uint32_t u = in.arg;
        if (u >= g->n_ops || (sh->unit_elements[u] == 0 && sh->unit_grad_elements[u] == 0 &&
                              sh->unit_persist_elements[u] == 0))
            return remat__replay_invalid(R, in, "op index %u names no unit of params", u);
        if (stage == 3 && R->opt_seen) {
            /* The persistent params' gather after the step: their gathered
             * copy is resident throughout, so it moves bytes, not memory. */
            if (in.kind == REMAT_I_RELEASE || !sh->unit_persist_elements[u])
                return remat__replay_invalid(R, in, "%s of unit '%s' after OPT: at ZeRO stage 3 only the persistent "
                                                    "params are gathered after the step", name, g->ops[u].id);
            remat__replay_step_begin(R);
            remat_status st = count_comm(R, sh->unit_persist_elements[u]);
            return st != REMAT_OK ? st : remat__replay_step_end(R, in, R->total);
        }
        if (stage == 3 && sh->unit_elements[u] == 0)
            return remat__replay_invalid(R, in, "unit '%s' holds only persistent params, which are never released",
                                         g->ops[u].id);
        if (stage == 0)
            return remat__replay_invalid(R, in, "%s at ZeRO stage 0: plain data parallelism keeps every param whole", name);
        if (stage < 3) {
            /* Stages 1-2: the updated partitions are gathered after OPT. */
            if (in.kind == REMAT_I_RELEASE)
                return remat__replay_invalid(R, in, "RELEASE at ZeRO stage %u: weights are not sharded below stage 3", stage);
            if (!R->opt_seen)
                return remat__replay_invalid(R, in, "ALLGATHER before OPT at ZeRO stage %u: the weights are whole until the "
                                      "optimizer has updated each rank's partition",
                               stage);
            remat__replay_step_begin(R);
            remat_status st = count_comm(R, sh->unit_grad_elements[u]);
            return st != REMAT_OK ? st : remat__replay_step_end(R, in, R->total);
        }
        uint64_t bytes;
        if (!remat_u64_mul(sh->unit_elements[u], eb, &bytes))
            return remat__replay_overflow(R);
        int fsdp = sh->cfg.fsdp != REMAT_FSDP_OFF;
        if (in.kind == REMAT_I_ALLGATHER) {
            if (R->gathered[u])
                return remat__replay_invalid(R, in, "unit '%s' is already gathered", g->ops[u].id);
            if (fsdp && sh->cfg.limit_all_gathers && reclaim(R) != REMAT_OK)
                return R->err->code;
            remat__replay_step_begin(R);
            remat_status st = remat__replay_step_add(R, REMAT_CAT_GATHERED_PARAMS, bytes);
            if (st == REMAT_OK)
                st = remat__replay_alloc_bytes(R, REMAT_CAT_GATHERED_PARAMS, bytes);
            if (st == REMAT_OK)
                st = remat__replay_notify_alloc(R, REMAT_NONE, 0, REMAT_CAT_GATHERED_PARAMS, bytes);
            if (st == REMAT_OK)
                st = count_comm(R, sh->unit_numel[u]); /* the real elements: padding is not counted */
            if (st != REMAT_OK)
                return st;
            R->gathered[u] = 1;
            return remat__replay_step_end(R, in, R->total);
        }
        if (!R->gathered[u])
            return remat__replay_invalid(R, in, "unit '%s' is not gathered (released twice, or never gathered)", g->ops[u].id);
        remat__replay_step_begin(R);
        R->gathered[u] = 0;
        if (fsdp) {
            /* FSDP frees the buffer on the compute stream; the caching
             * allocator reuses it once the GPU has passed the free, which a
             * CPU thread running ahead does not wait for: the bytes stay
             * until the rate limiter synchronizes on the free (reclaim), or
             * without it to the end of the step. */
            if (sh->cfg.limit_all_gathers) {
                R->held[(R->held_head + R->held_n) % (R->g->n_ops + 2u)] = u;
                R->held_n++; /* at most units + 1: see reclaim */
            }
            return remat__replay_step_end(R, in, R->total);
        }
        remat__replay_free_bytes(R, REMAT_CAT_GATHERED_PARAMS, bytes);
        R->undo_c = REMAT_CAT_GATHERED_PARAMS;
        R->undo_b = bytes;
        if (remat__replay_notify_free(R, REMAT_NONE, 0, REMAT_CAT_GATHERED_PARAMS, bytes) != REMAT_OK)
            return R->err->code;
        return remat__replay_step_end(R, in, R->total);
    }
    /* A bucket reduction. */
    uint32_t b = in.arg;
    if (b >= sh->n_buckets)
        return remat__replay_invalid(R, in, "bucket %u does not exist (%u buckets)", b, sh->n_buckets);
    if (stage == 0 && in.kind != REMAT_I_ALLREDUCE)
        return remat__replay_invalid(R, in, "REDUCE_SCATTER at ZeRO stage 0: plain data parallelism all-reduces its buckets");
    if (stage > 0 && in.kind == REMAT_I_ALLREDUCE)
        return remat__replay_invalid(R, in, "ALLREDUCE at ZeRO stage %u: each rank keeps only its partition, so ZeRO "
                              "reduce-scatters",
                       stage);
    if (R->opt_seen)
        return remat__replay_invalid(R, in, "%s after OPT", name);
    if (R->reduced[b])
        return remat__replay_invalid(R, in, "bucket %u is reduced twice", b);
    for (uint32_t t = 0; t < g->n_tensors; t++)
        if (sh->bucket_of[t] == b && (R->pending[t] > 0 || !R->grad[t]))
            return remat__replay_invalid(R, in, "gradient of param '%s' in bucket %u is incomplete", g->tensors[t].id, b);
    remat__replay_step_begin(R);
    /* FSDP's post-backward hook pads the whole flat gradient into a new
     * tensor (F.pad to N chunks) and reduce-scatters it into a new shard
     * (torch.zeros_like(chunks[0])) before adding that to the resident
     * one: both live while it runs. */
    if (sh->cfg.fsdp != REMAT_FSDP_OFF && stage == 3) {
        uint64_t dp = sh->cfg.dp, c = sh->bucket_elements[b] / dp + (sh->bucket_elements[b] % dp != 0), tb;
        if (!remat_u64_mul(c, dp + 1, &tb) || !remat_u64_mul(tb, eb, &tb))
            return remat__replay_overflow(R);
        if (remat__replay_step_add(R, REMAT_CAT_WORKSPACE, tb) != REMAT_OK)
            return R->err->code;
    }
    int first = stage >= 2 && !R->partition;
    if (first && remat__replay_step_add(R, REMAT_CAT_PARAM_GRADS, sh->grad_partition_bytes) != REMAT_OK)
        return R->err->code;
    if (first && (remat__replay_alloc_bytes(R, REMAT_CAT_PARAM_GRADS, sh->grad_partition_bytes) != REMAT_OK ||
                  remat__replay_notify_alloc(R, REMAT_NONE, 1, REMAT_CAT_PARAM_GRADS, sh->grad_partition_bytes) != REMAT_OK))
        return R->err->code;
    R->partition |= first;
    R->reduced[b] = 1;
    remat_status st = count_comm(R, (in.kind == REMAT_I_ALLREDUCE ? 2 : 1) * sh->bucket_elements[b]);
    if (st != REMAT_OK)
        return st;
    /* Stages 2-3 free the bucket's gradients into the partition; with the
     * optimizer offloaded every stage frees them once copied to the host. */
    int frees = stage >= 2 || sh->cfg.offload_optimizer;
    uint64_t whole = 0;
    if (frees)
        for (uint32_t t = 0; t < g->n_tensors; t++)
            if (sh->bucket_of[t] == b)
                whole += g->tensors[t].logical_bytes; /* each counted in R->total */
    if ((st = remat__replay_step_end(R, in, R->total - whole)) != REMAT_OK)
        return st;
    /* Stages 2-3: the whole gradients now live in the partition. */
    for (uint32_t t = 0; frees && t < g->n_tensors; t++) {
        if (sh->bucket_of[t] != b)
            continue;
        R->grad[t] = 0;
        remat__replay_free_bytes(R, REMAT_CAT_PARAM_GRADS, g->tensors[t].logical_bytes);
        if (remat__replay_notify_free(R, t, 1, REMAT_CAT_PARAM_GRADS, g->tensors[t].logical_bytes) != REMAT_OK)
            return R->err->code;
    }
    return REMAT_OK;
}

remat_status remat__replay_sharded(const remat_analysis *a, const remat_schedule *s, const remat_exec_extras *extras,
                                   remat_replay_result *r, remat_err *err)
{
    remat_schedule full;
    remat_schedule_init(&full);
    remat_status st = remat_schedule_shard(extras->sharding, s, &full, err);
    if (st == REMAT_OK)
        st = remat_replay(a, &full, extras, NULL, r, err);
    else
        memset(r, 0, sizeof *r);
    remat_schedule_destroy(&full);
    return st;
}


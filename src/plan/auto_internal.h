/*
 * auto_internal.h - what auto.c and its local search (auto_search.c)
 * share. Private to src/plan.
 */
#ifndef REMAT_PLAN_AUTO_INTERNAL_H
#define REMAT_PLAN_AUTO_INTERNAL_H

#include "planner.h"

/* What the local searches did, for auto's params: work (replayed
 * instructions, see auto_search.c), flips judged, flips skipped without a
 * replay, flips replayed. */
typedef struct remat__search_stats {
    uint64_t work, evals, skipped, replays;
    /* What the searches of one auto run share (auto_search.c): the delta
     * replay, the incremental policy and the flip order, so that a search
     * starts from the last one's base; NULL until the first search. */
    struct remat__search_ctx *ctx;
} remat__search_stats;

/* Frees S->ctx (NULL-safe); S's figures stay. */
void remat__auto_search_release(remat__search_stats *S);

/* From keep (changed in place to the result; *cur its figures under Q's
 * budget, given for the start), flips until no single flip is better or
 * S->work passes work_until; *flips counts the flips kept. Fails only on
 * ENOMEM or overflow. O(flips judged x the part of the schedule each
 * changes), plus a schedule build per flip. The first call creates S->ctx,
 * which later calls with the same planner reuse (release it after the
 * last). */
remat_status remat__auto_local_search(remat_planner *Q, uint8_t *keep, remat_eval *cur, uint32_t *flips,
                                      uint64_t work_until, remat__search_stats *S);

#endif

/*
 * auto.c - the default strategy: try everything that applies, keep the
 * plan with the least extra FLOPs within the budget, then improve it by a
 * local search that replays each candidate change.
 *
 * Candidates: store-all, sqrtn and chen-greedy (structural and linearized),
 * revolve, chain-dp, dtr, mincut, and exact on small graphs. Each is judged
 * by the same replay, so the comparison is fair by construction. Strategies
 * that are not built in (no GLPK) are skipped.
 *
 * Local search: on the best keep set, flip one activation at a time
 * (recompute a kept one to save memory, keep a recomputed one to save
 * FLOPs), accept any flip that makes the plan better under the budget,
 * until a pass changes nothing or the work bound is reached. It is bounded
 * to keep auto fast on large graphs.
 */
#include "planner.h"
#include "../util/util_internal.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *strategy;
    int linearized;
} candidate;

static const candidate candidates[] = {
    {"store-all", 0}, {"sqrtn", 0},    {"sqrtn", 1}, {"chen-greedy", 0}, {"chen-greedy", 1},
    {"revolve", 0},   {"chain-dp", 0}, {"dtr", 0},   {"mincut", 0},      {"exact", 0},
};

/* Local search budget: replays of at most this many instructions in all. */
#define LOCAL_SEARCH_WORK 30000000ULL

static remat_status local_search(remat_planner *P, uint8_t *keep, remat_eval *best, uint32_t *flips)
{
    const remat_graph *g = P->a->g;
    remat_status st = REMAT_OK;
    uint64_t work = 0;
    int improved = 1;
    *flips = 0;
    while (improved && st == REMAT_OK) {
        improved = 0;
        for (uint32_t t = 0; t < g->n_tensors && st == REMAT_OK; t++) {
            if (g->tensors[t].kind != REMAT_TENSOR_ACTIVATION || !g->ops[g->tensors[t].producer].recomputable)
                continue;
            /* A tensor no backward step saves and nothing recomputes from is
             * freed after forward whatever keep says: flipping it is moot. */
            if (P->a->life[t].last_bwd_use == REMAT_NONE && P->a->cons_off[t + 1] == P->a->cons_off[t])
                continue;
            if (work > LOCAL_SEARCH_WORK)
                return REMAT_OK;
            keep[t] ^= 1;
            remat_eval e;
            st = remat__eval_keep(P, keep, &e);
            work += P->scratch.n;
            if (st == REMAT_OK && remat__better(P, &e, best)) {
                *best = e;
                improved = 1;
                (*flips)++;
            } else {
                keep[t] ^= 1;
            }
        }
    }
    return st;
}

remat_status remat__strategy_auto(remat_planner *P, remat_plan *out)
{
    const remat_analysis *a = P->a;
    const remat_graph *g = a->g;
    remat_plan_options sub = *P->o;
    remat_planner Q = *P;
    Q.o = &sub;
    remat_eval best = {0, 0, 0, 0};
    const char *best_name = "none";
    int best_lin = 0, have = 0, best_from_keep = 0;
    remat_status st = REMAT_OK;
    char tried[512] = "";
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0] && st == REMAT_OK; i++) {
        remat_strategy_fn fn = remat__strategy_lookup(candidates[i].strategy);
        if (!fn)
            continue;
        if (strcmp(candidates[i].strategy, "exact") == 0) {
            if (g->n_ops > 60)
                continue;
            if (sub.time_limit <= 0 || sub.time_limit > 5)
                sub.time_limit = 5;
        }
        sub.linearized = candidates[i].linearized;
        remat_plan cand;
        remat_plan_init(&cand);
        remat_err local;
        remat_err_init(&local);
        Q.err = &local;
        remat_status cs = fn(&Q, &cand);
        int from_keep = cand.schedule.n == 0;
        if (cs == REMAT_OK && from_keep && cand.keep) {
            remat_status ps = remat_schedule_from_keep(a, cand.keep, &cand.schedule, &local);
            if (ps != REMAT_OK)
                cs = ps;
        }
        remat_eval e;
        if (cs == REMAT_OK && (cs = remat__eval_schedule(&Q, &cand.schedule, &e)) == REMAT_OK) {
            snprintf(tried + strlen(tried), sizeof tried - strlen(tried), "%s\"%s%s\"", tried[0] ? ", " : "",
                     candidates[i].strategy, candidates[i].linearized ? "/linearized" : "");
            if (!have || remat__better(P, &e, &best)) {
                best = e;
                best_name = candidates[i].strategy;
                best_lin = candidates[i].linearized;
                best_from_keep = from_keep;
                have = 1;
                /* Move the candidate into out. */
                remat_schedule_destroy(&out->schedule);
                out->schedule = cand.schedule;
                remat_schedule_init(&cand.schedule);
                remat__free(out->keep);
                out->keep = cand.keep;
                cand.keep = NULL;
                out->n_tensors = g->n_tensors;
            }
        } else if (cs == REMAT_ENOMEM || cs == REMAT_EOVERFLOW || cs == REMAT_EINTERNAL) {
            st = remat_err_set(P->err, cs, "auto: strategy %s: %s", candidates[i].strategy, local.msg);
        }
        /* Other failures (unsupported, a strategy refusing the graph) just
         * drop that candidate. */
        remat_plan_destroy(&cand);
    }
    P->evaluations += Q.evaluations;
    if (st != REMAT_OK)
        return st;
    if (!have)
        return remat_err_set(P->err, REMAT_EINTERNAL, "auto: no strategy produced a plan");
    /* Local search from the best keep-set plan (own schedules such as
     * Revolve's are not keep sets, so they are left as they are). */
    uint32_t flips = 0;
    if (best_from_keep && out->keep && g->n_ops <= 20000) {
        remat_eval e = best;
        st = local_search(P, out->keep, &e, &flips);
        if (st != REMAT_OK)
            return st;
        if (flips) {
            best = e;
            remat_schedule_clear(&out->schedule);
            remat_err local;
            remat_err_init(&local);
            if ((st = remat_schedule_from_keep(a, out->keep, &out->schedule, &local)) != REMAT_OK)
                return remat_err_set(P->err, st, "%s", local.msg);
        }
    }
    return remat__plan_params(P, out, "{\"chosen\": \"%s%s\", \"local_search_flips\": %u, \"candidates\": [%s]}",
                              best_name, best_lin ? "/linearized" : "", flips, tried);
}

/*
 * auto.c - the default strategy: the plan with the least extra FLOPs within
 * the budget among every strategy's, improved by a local search, and
 * monotone in the budget by construction.
 *
 * Monotone: a looser budget must never cost more extra FLOPs (DESIGN 6).
 * A strategy whose answer at budget B is "the best fitting plan of a set
 * that does not depend on B" is monotone by itself: store-all, sqrtn and
 * mincut (one plan each), chen-greedy (a fixed threshold grid), revolve
 * (every slot count on chains of up to 64 blocks), and the exact and
 * dynamic-programming planners where they are optimal. These run at B.
 * The local search, whose answer can get worse as B grows, runs only at a
 * fixed ladder of budgets (fractions of the store-all peak), and auto(B)
 * takes the best of the ladder points at or below B: a set that only grows
 * with B. DTR runs at the ladder and at B itself, so that auto is never
 * worse than dtr; its eviction order is not monotone in its limit, so here
 * monotonicity rests on the ladder (a DTR plan found for a lower budget
 * stays available at every looser one) and is checked by budget sweeps on
 * every bundled graph in tests/check_plan.c, not guaranteed by construction.
 *
 * The local search flips one activation at a time (recompute a kept one to
 * save memory, keep a recomputed one to save FLOPs) from the best keep-set
 * plan at a ladder budget, keeping flips the replay says are better, until a
 * pass changes nothing or its work bound is spent.
 */
#include "planner.h"
#include "../util/util_internal.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *strategy;
    int linearized;
    unsigned flags;
} candidate;

#define MAX_CANDIDATES 64

/* auto's candidates with every flag of `need`, from the strategy table
 * (remat/plan.h): in auto_rank order, each linearized variant right after
 * its strategy. Run at the budget itself: need = REMAT_STRATEGY_AUTO. */
static size_t candidates(unsigned need, candidate *out)
{
    const remat_strategy_info *r[MAX_CANDIDATES];
    size_t k = remat__strategies_ranked(0, r, MAX_CANDIDATES), n = 0;
    for (size_t i = 0; i < k && n + 2 <= MAX_CANDIDATES; i++) {
        if ((r[i]->flags & need) != need)
            continue;
        out[n++] = (candidate){r[i]->name, 0, r[i]->flags};
        if (r[i]->flags & REMAT_STRATEGY_LINEARIZED)
            out[n++] = (candidate){r[i]->name, 1, r[i]->flags};
    }
    return n;
}

/* The ladder: fractions of the store-all metric, in 1/32 steps. */
#define LADDER 32
/* Graphs above this size skip the ladder (its cost is LADDER plannings). */
#define LADDER_MAX_OPS 2000
/* Work bound of one local search, in replayed instructions. */
#define LOCAL_SEARCH_WORK 4000000ULL

typedef struct {
    remat_planner *P;     /* the caller's: its budget judges the final choice */
    remat_plan *out;
    remat_eval best;
    int have;
    int best_from_keep;
    char chosen[64];
    char tried[640];
    uint32_t flips;
} auto_state;

/* Offers a candidate plan (moved into the state when it is the best). */
static void offer(auto_state *S, remat_plan *cand, const remat_eval *e, const char *name, int from_keep,
                  uint32_t flips)
{
    if (S->have && !remat__better(S->P, e, &S->best))
        return;
    S->best = *e;
    S->have = 1;
    S->best_from_keep = from_keep;
    S->flips = flips;
    snprintf(S->chosen, sizeof S->chosen, "%s", name);
    remat_schedule_destroy(&S->out->schedule);
    S->out->schedule = cand->schedule;
    remat_schedule_init(&cand->schedule);
    remat__free(S->out->keep);
    S->out->keep = cand->keep;
    cand->keep = NULL;
    S->out->n_tensors = S->P->a->g->n_tensors;
}

/* Runs one strategy under options o; on success fills cand (with a
 * schedule) and e (judged by Q's budget). Returns REMAT_OK when the
 * candidate exists, a fatal status (ENOMEM...) to stop, and anything else
 * to skip this candidate. */
static remat_status run_candidate(remat_planner *Q, const char *strategy, remat_plan *cand, remat_eval *e,
                                  int *from_keep)
{
    remat_strategy_fn fn = remat__strategy_lookup(strategy);
    if (!fn)
        return REMAT_EUNSUPPORTED;
    remat_err local;
    remat_err_init(&local);
    remat_err *saved = Q->err;
    Q->err = &local;
    remat_status st = fn(Q, cand);
    *from_keep = cand->schedule.n == 0;
    if (st == REMAT_OK && *from_keep && cand->keep)
        st = remat_schedule_from_keep(Q->a, cand->keep, &cand->schedule, &local);
    if (st == REMAT_OK && cand->schedule.n == 0)
        st = REMAT_EUNSUPPORTED;
    if (st == REMAT_OK)
        st = remat__eval_schedule(Q, &cand->schedule, e);
    Q->err = saved;
    if (st == REMAT_ENOMEM || st == REMAT_EOVERFLOW || st == REMAT_EINTERNAL)
        return remat_err_set(saved, st, "auto: strategy %s: %s", strategy, local.msg);
    return st == REMAT_OK ? REMAT_OK : REMAT_EUNSUPPORTED;
}

static int fatal(remat_status st)
{
    return st != REMAT_OK && st != REMAT_EUNSUPPORTED;
}

static void note_tried(auto_state *S, const char *name)
{
    if (strstr(S->tried, name))
        return;
    snprintf(S->tried + strlen(S->tried), sizeof S->tried - strlen(S->tried), "%s\"%s\"", S->tried[0] ? ", " : "",
             name);
}

static remat_status local_search(remat_planner *Q, uint8_t *keep, remat_eval *cur, uint32_t *flips)
{
    const remat_graph *g = Q->a->g;
    remat_status st = REMAT_OK;
    uint64_t work = 0;
    int improved = 1;
    *flips = 0;
    while (improved && st == REMAT_OK) {
        improved = 0;
        for (uint32_t t = 0; t < g->n_tensors && st == REMAT_OK; t++) {
            if (g->tensors[t].kind != REMAT_TENSOR_ACTIVATION || !g->ops[g->tensors[t].producer].recomputable)
                continue;
            /* A tensor no backward step saves and nothing reads is freed
             * after forward whatever keep says: flipping it is moot. */
            if (Q->a->life[t].last_bwd_use == REMAT_NONE && Q->a->cons_off[t + 1] == Q->a->cons_off[t])
                continue;
            if (work > LOCAL_SEARCH_WORK)
                return REMAT_OK;
            keep[t] ^= 1;
            remat_eval e;
            st = remat__eval_keep(Q, keep, &e);
            work += Q->scratch.n;
            if (st == REMAT_OK && remat__better(Q, &e, cur)) {
                *cur = e;
                improved = 1;
                (*flips)++;
            } else {
                keep[t] ^= 1;
            }
        }
    }
    return st;
}

/* At ladder budget b: the heuristics, and a local search from the best
 * keep-set plan of the monotone strategies at b. Every result is offered
 * to S, judged by the real budget (a plan that fits b fits it). */
static remat_status ladder_point(auto_state *S, remat_planner *Q)
{
    remat_status st;
    remat_plan cand;
    remat_eval e;
    int fk;
    /* Run at ladder budgets too. */
    candidate heuristic[MAX_CANDIDATES];
    size_t n_heuristic = candidates(REMAT_STRATEGY_AUTO | REMAT_STRATEGY_AUTO_LADDER, heuristic);
    for (size_t i = 0; i < n_heuristic; i++) {
        remat_plan_init(&cand);
        st = run_candidate(Q, heuristic[i].strategy, &cand, &e, &fk);
        if (st == REMAT_OK && remat__fits(Q, &e)) {
            note_tried(S, heuristic[i].strategy);
            remat_eval judged;
            if ((st = remat__eval_schedule(S->P, &cand.schedule, &judged)) == REMAT_OK)
                offer(S, &cand, &judged, heuristic[i].strategy, fk, 0);
        }
        remat_plan_destroy(&cand);
        if (fatal(st))
            return st;
    }
    /* Start: the best keep-set plan among the cheap monotone strategies. */
    candidate starts[MAX_CANDIDATES];
    size_t n_starts = candidates(REMAT_STRATEGY_AUTO | REMAT_STRATEGY_LOCAL_START, starts);
    remat_plan start;
    remat_plan_init(&start);
    remat_eval se = {0};
    int have = 0;
    remat_plan_options *o = (remat_plan_options *)Q->o;
    for (size_t i = 0; i < n_starts; i++) {
        remat_plan_init(&cand);
        o->linearized = starts[i].linearized;
        /* A start only seeds the local search, at every ladder point: the
         * cheap form of Chen's searches is enough (issue 15). */
        Q->quick = 1;
        st = run_candidate(Q, starts[i].strategy, &cand, &e, &fk);
        Q->quick = 0;
        if (st == REMAT_OK && fk && cand.keep && (!have || remat__better(Q, &e, &se))) {
            remat_plan_destroy(&start);
            start = cand;
            remat_plan_init(&cand);
            se = e;
            have = 1;
        }
        remat_plan_destroy(&cand);
        if (fatal(st)) {
            remat_plan_destroy(&start);
            return st;
        }
    }
    o->linearized = 0;
    if (!have) {
        remat_plan_destroy(&start);
        return REMAT_OK;
    }
    uint32_t flips = 0;
    st = local_search(Q, start.keep, &se, &flips);
    if (st == REMAT_OK && remat__fits(Q, &se)) {
        remat_err local;
        remat_err_init(&local);
        remat_schedule_clear(&start.schedule);
        st = remat_schedule_from_keep(Q->a, start.keep, &start.schedule, &local);
        remat_eval judged;
        if (st == REMAT_OK && (st = remat__eval_schedule(S->P, &start.schedule, &judged)) == REMAT_OK) {
            note_tried(S, "local-search");
            offer(S, &start, &judged, "local-search", 1, flips);
        }
    }
    remat_plan_destroy(&start);
    return fatal(st) ? st : REMAT_OK;
}

remat_status remat__strategy_auto(remat_planner *P, remat_plan *out)
{
    const remat_analysis *a = P->a;
    const remat_graph *g = a->g;
    auto_state S;
    memset(&S, 0, sizeof S);
    S.P = P;
    S.out = out;
    remat_plan_options sub = *P->o;
    remat_planner Q = *P;
    Q.o = &sub;
    remat_schedule_init(&Q.scratch);
    remat_status st = REMAT_OK;
    candidate monotone[MAX_CANDIDATES];
    size_t n_monotone = candidates(REMAT_STRATEGY_AUTO, monotone);
    for (size_t i = 0; i < n_monotone && !fatal(st); i++) {
        if (monotone[i].flags & REMAT_STRATEGY_SMALL_ONLY) {
            /* The solver closes tiny graphs in well under a second and
             * rarely proves more on larger ones within seconds: give it a
             * second (or the user's shorter limit) on graphs that small. */
            if (g->n_ops > 40)
                continue;
            if (sub.time_limit <= 0 || sub.time_limit > 1)
                sub.time_limit = 1;
        }
        sub.linearized = monotone[i].linearized;
        remat_plan cand;
        remat_plan_init(&cand);
        remat_eval e;
        int fk;
        char name[48];
        snprintf(name, sizeof name, "%s%s", monotone[i].strategy, monotone[i].linearized ? "/linearized" : "");
        st = run_candidate(&Q, monotone[i].strategy, &cand, &e, &fk);
        if (st == REMAT_OK) {
            note_tried(&S, name);
            offer(&S, &cand, &e, name, fk, 0);
        }
        remat_plan_destroy(&cand);
    }
    sub.linearized = 0;
    if (!fatal(st) && g->n_ops <= LADDER_MAX_OPS && P->o->budget_kind != REMAT_BUDGET_NONE) {
        /* The ladder's scale: the store-all metric. */
        uint8_t *all = remat__calloc(g->n_tensors ? g->n_tensors : 1, 1);
        remat_eval base;
        if (!all) {
            st = remat_err_set(P->err, REMAT_ENOMEM, "out of memory planning");
        } else {
            memset(all, 1, g->n_tensors);
            st = remat__eval_keep(&Q, all, &base);
            remat__free(all);
        }
        for (int k = 1; k <= LADDER && st == REMAT_OK && base.valid; k++) {
            uint64_t b = (uint64_t)((double)base.metric * k / LADDER);
            if (b > P->o->budget)
                break;
            sub.budget = b;
            st = ladder_point(&S, &Q);
        }
        sub.budget = P->o->budget;
    }
    P->evaluations += Q.evaluations;
    remat_schedule_destroy(&Q.scratch);
    if (fatal(st))
        return st;
    if (!S.have)
        return remat_err_set(P->err, REMAT_EINTERNAL, "auto: no strategy produced a plan");
    return remat__plan_params(P, out, "{\"chosen\": \"%s\", \"local_search_flips\": %u, \"candidates\": [%s]}",
                              S.chosen, S.flips, S.tried);
}

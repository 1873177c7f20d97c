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
    uint32_t max_ops; /* run only on graphs of at most this many ops (0: always) */
} candidate;

/* Run at the budget itself. chen-greedy (a replay per threshold of its
 * grid, two variants) and chain-dp (table work plus up to 30 replays) cost
 * about 0.25 s each at 10^4 ops and 3 s at 10^5, and never gave the best
 * plan on a graph that large in `make bench BENCH=auto`; above HEAVY_MAX_OPS
 * auto leaves them out to stay within its time goal (0.5 s up to 10^4 ops,
 * 5 s at 10^5). exact runs last, from the best plan found (see
 * remat__strategy_auto). */
#define HEAVY_MAX_OPS 5000
static const candidate monotone[] = {
    {"store-all", 0, 0},         {"sqrtn", 0, 0},  {"sqrtn", 1, 0},
    {"chen-greedy", 0, HEAVY_MAX_OPS}, {"chen-greedy", 1, HEAVY_MAX_OPS},
    {"revolve", 0, 0},           {"mincut", 0, 0}, {"chain-dp", 0, HEAVY_MAX_OPS},
    {"dtr", 0, 0},
};

/* The ladder: fractions k/L of the store-all metric. L shrinks with the
 * graph (a fixed function of its size, never of the budget, so the set of
 * ladder points at or below a budget only grows with it). */
static uint32_t ladder_points(uint32_t n_ops)
{
    return n_ops <= 300 ? 32 : n_ops <= 3000 ? 16 : n_ops <= 30000 ? 8 : 4;
}
/* DTR at ladder points (three eviction scores each) only on graphs this
 * small: above, one DTR run costs what the whole ladder may. */
#define LADDER_DTR_MAX_OPS 300
/* chen-greedy as a ladder start (its threshold grid, per point). */
#define LADDER_CHEN_MAX_OPS 1000
/* Work of all local searches together, in replayed instructions: about
 * 0.15 s of replay on this project's reference machine whatever the size,
 * and never less than what two flips cost on the largest graphs. */
#define LOCAL_SEARCH_WORK 6000000ULL

typedef struct {
    remat_planner *P;     /* the caller's: its budget judges the final choice */
    remat_plan *out;
    remat_eval best;
    int have;
    int best_from_keep;
    char chosen[64];
    char tried[640];
    uint32_t flips;
    uint64_t ls_work;     /* instructions replayed by local searches so far */
    uint64_t ls_evals, ls_skipped;
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

/* Marks in rec the ops that schedule s recomputes. */
static void mark_recomputed(const remat_graph *g, const remat_schedule *s, uint8_t *rec)
{
    memset(rec, 0, g->n_ops ? g->n_ops : 1);
    for (size_t i = 0; i < s->n; i++)
        if (s->ins[i].kind == REMAT_I_RECOMPUTE)
            rec[s->ins[i].arg] = 1;
}

/* One activation at a time: recompute a kept one (to save memory), keep a
 * recomputed one (to save FLOPs); a flip stays when the replay of the new
 * keep set's schedule says it is better. Flips that cannot be better are
 * not replayed: once the plan fits, dropping a tensor whose producer the
 * schedule does not already recompute adds that producer's recomputation,
 * so it never lowers the extra FLOPs, and the order judges fitting plans by
 * FLOPs first. Bounded by S->ls_work against LOCAL_SEARCH_WORK. */
static remat_status local_search(auto_state *S, remat_planner *Q, uint8_t *keep, remat_eval *cur, uint32_t *flips)
{
    const remat_graph *g = Q->a->g;
    remat_status st = REMAT_OK;
    int improved = 1;
    *flips = 0;
    uint8_t *rec = remat__calloc(g->n_ops ? g->n_ops : 1, 1);
    if (!rec)
        return remat_err_set(Q->err, REMAT_ENOMEM, "out of memory planning");
    /* The current plan's recomputed ops. */
    remat_schedule_clear(&Q->scratch);
    remat_err local;
    remat_err_init(&local);
    if (remat_schedule_from_keep(Q->a, keep, &Q->scratch, &local) == REMAT_OK)
        mark_recomputed(g, &Q->scratch, rec);
    while (improved && st == REMAT_OK) {
        improved = 0;
        for (uint32_t t = 0; t < g->n_tensors && st == REMAT_OK; t++) {
            const remat_tensor *T = &g->tensors[t];
            if (T->kind != REMAT_TENSOR_ACTIVATION || !g->ops[T->producer].recomputable)
                continue;
            /* A tensor no backward step saves and nothing reads is freed
             * after forward whatever keep says: flipping it is moot. */
            if (Q->a->life[t].last_bwd_use == REMAT_NONE && Q->a->cons_off[t + 1] == Q->a->cons_off[t])
                continue;
            if (keep[t] && remat__fits(Q, cur) && g->ops[T->producer].flops > 0 && !rec[T->producer] &&
                Q->a->life[t].last_bwd_use != REMAT_NONE) {
                S->ls_skipped++;
                continue;
            }
            if (S->ls_work > LOCAL_SEARCH_WORK)
                goto out;
            keep[t] ^= 1;
            remat_eval e;
            st = remat__eval_keep(Q, keep, &e);
            S->ls_work += Q->scratch.n;
            S->ls_evals++;
            if (st == REMAT_OK && remat__better(Q, &e, cur)) {
                *cur = e;
                improved = 1;
                (*flips)++;
                mark_recomputed(g, &Q->scratch, rec);
            } else {
                keep[t] ^= 1;
            }
        }
    }
out:
    remat__free(rec);
    return st;
}

/* Keep-set plans that do not depend on the budget (one plan each): the
 * local search's starting pool at every ladder point. */
static const candidate pool_strategies[] = {{"store-all", 0, 0}, {"sqrtn", 0, 0}, {"sqrtn", 1, 0}, {"mincut", 0, 0}};
#define POOL_N (sizeof pool_strategies / sizeof pool_strategies[0])

typedef struct {
    uint8_t *keep[POOL_N + 1]; /* the last: the previous ladder point's result */
    remat_eval e[POOL_N + 1];  /* judged with no budget: metric and FLOPs */
} start_pool;

static void pool_destroy(start_pool *sp)
{
    for (size_t i = 0; i <= POOL_N; i++)
        remat__free(sp->keep[i]);
}

static remat_status pool_build(remat_planner *Q, start_pool *sp)
{
    remat_plan_options *o = (remat_plan_options *)Q->o;
    remat_status st = REMAT_OK;
    for (size_t i = 0; i < POOL_N && !fatal(st); i++) {
        remat_plan cand;
        remat_plan_init(&cand);
        remat_eval e;
        int fk;
        o->linearized = pool_strategies[i].linearized;
        st = run_candidate(Q, pool_strategies[i].strategy, &cand, &e, &fk);
        if (st == REMAT_OK && fk && cand.keep) {
            sp->keep[i] = cand.keep;
            cand.keep = NULL;
            sp->e[i] = e;
        }
        remat_plan_destroy(&cand);
    }
    o->linearized = 0;
    return fatal(st) ? st : REMAT_OK;
}

/* At ladder budget b (Q's): DTR (small graphs), then a local search from
 * the best fitting keep set among the pool, chen-greedy at b (graphs up to
 * LADDER_CHEN_MAX_OPS) and the previous point's result. Every result is
 * offered to S, judged by the real budget (a plan that fits b fits it). */
static remat_status ladder_point(auto_state *S, remat_planner *Q, start_pool *sp)
{
    const remat_graph *g = Q->a->g;
    remat_status st;
    remat_plan cand;
    remat_eval e;
    int fk;
    if (g->n_ops <= LADDER_DTR_MAX_OPS) {
        remat_plan_init(&cand);
        st = run_candidate(Q, "dtr", &cand, &e, &fk);
        if (st == REMAT_OK && remat__fits(Q, &e)) {
            note_tried(S, "dtr");
            remat_eval judged;
            if ((st = remat__eval_schedule(S->P, &cand.schedule, &judged)) == REMAT_OK)
                offer(S, &cand, &judged, "dtr", fk, 0);
        }
        remat_plan_destroy(&cand);
        if (fatal(st))
            return st;
    }
    uint8_t *start = NULL;
    remat_eval se = {0};
    int have = 0;
    for (size_t i = 0; i <= POOL_N; i++) {
        if (!sp->keep[i])
            continue;
        /* A keep set's figures do not depend on the budget: judged once. */
        if (!have || remat__better(Q, &sp->e[i], &se)) {
            start = sp->keep[i];
            se = sp->e[i];
            have = 1;
        }
    }
    remat_plan_options *o = (remat_plan_options *)Q->o;
    remat_plan chen;
    remat_plan_init(&chen);
    for (int lin = 0; lin < 2 && g->n_ops <= LADDER_CHEN_MAX_OPS; lin++) {
        remat_plan_init(&cand);
        o->linearized = lin;
        st = run_candidate(Q, "chen-greedy", &cand, &e, &fk);
        if (st == REMAT_OK && fk && cand.keep && (!have || remat__better(Q, &e, &se))) {
            remat_plan_destroy(&chen);
            chen = cand;
            remat_plan_init(&cand);
            start = chen.keep;
            se = e;
            have = 1;
        }
        remat_plan_destroy(&cand);
        if (fatal(st)) {
            o->linearized = 0;
            remat_plan_destroy(&chen);
            return st;
        }
    }
    o->linearized = 0;
    if (!have) {
        remat_plan_destroy(&chen);
        return REMAT_OK;
    }
    /* The search works on its own copy; its result becomes the next
     * point's start. */
    uint8_t *keep = remat__malloc(g->n_tensors ? g->n_tensors : 1);
    if (!keep) {
        remat_plan_destroy(&chen);
        return remat_err_set(Q->err, REMAT_ENOMEM, "out of memory planning");
    }
    memcpy(keep, start, g->n_tensors);
    remat_plan_destroy(&chen);
    uint32_t flips = 0;
    st = local_search(S, Q, keep, &se, &flips);
    if (st == REMAT_OK && remat__fits(Q, &se)) {
        remat_plan res;
        remat_plan_init(&res);
        res.keep = remat__malloc(g->n_tensors ? g->n_tensors : 1);
        remat_err local;
        remat_err_init(&local);
        if (!res.keep) {
            st = remat_err_set(Q->err, REMAT_ENOMEM, "out of memory planning");
        } else {
            memcpy(res.keep, keep, g->n_tensors);
            st = remat_schedule_from_keep(Q->a, keep, &res.schedule, &local);
        }
        remat_eval judged;
        if (st == REMAT_OK && (st = remat__eval_schedule(S->P, &res.schedule, &judged)) == REMAT_OK) {
            note_tried(S, "local-search");
            offer(S, &res, &judged, "local-search", 1, flips);
        }
        remat_plan_destroy(&res);
        remat__free(sp->keep[POOL_N]);
        sp->keep[POOL_N] = keep;
        sp->e[POOL_N] = se;
        keep = NULL;
    }
    remat__free(keep);
    return fatal(st) ? st : REMAT_OK;
}

/* The certificate of the chosen plan: the proven lower bound (bound.c) and
 * the gap, in FLOPs and in percentage points of the forward + backward
 * FLOPs (the unit of overhead), "optimal" when it is zero. The chosen
 * plan's extra FLOPs are its replayed ones (S->best). */
static remat_status certificate(remat_planner *P, const auto_state *S, char *buf, size_t cap)
{
    uint64_t lb = 0;
    int infeasible = 0;
    remat_status st = remat__bound_extra(P, &lb, &infeasible);
    if (st != REMAT_OK)
        return st;
    if (P->o->budget_kind == REMAT_BUDGET_NONE) {
        snprintf(buf, cap, "\"lower_bound\": 0, \"gap\": \"optimal\", \"gap_pp\": 0");
        return REMAT_OK;
    }
    if (infeasible || !remat__fits(P, &S->best)) {
        snprintf(buf, cap, "\"lower_bound\": null, \"gap\": \"%s\"",
                 infeasible ? "budget infeasible for the class" : "plan over budget");
        return REMAT_OK;
    }
    uint64_t extra = S->best.extra_flops;
    if (lb > extra) /* a bug in the bound or the replay: never claim it */
        return remat_err_set(P->err, REMAT_EINTERNAL, "auto: lower bound %llu above the plan's %llu extra FLOPs",
                             (unsigned long long)lb, (unsigned long long)extra);
    /* Forward + backward FLOPs, as the replay counts them: every FWD, and
     * the BWD steps of the analysis. */
    double work = 0;
    for (uint32_t i = 0; i < P->a->g->n_ops; i++)
        work += (double)P->a->g->ops[i].flops;
    for (uint32_t j = 0; j < P->a->n_bwd; j++)
        work += (double)P->a->g->ops[P->a->bwd_order[j]].bwd_flops;
    if (extra == lb)
        snprintf(buf, cap, "\"lower_bound\": %llu, \"gap\": \"optimal\", \"gap_pp\": 0", (unsigned long long)lb);
    else
        snprintf(buf, cap, "\"lower_bound\": %llu, \"gap\": %.6f, \"gap_pp\": %.4f", (unsigned long long)lb,
                 (double)(extra - lb) / (double)extra, work > 0 ? 100.0 * (double)(extra - lb) / work : 0.0);
    return REMAT_OK;
}

/* exact inside auto: on graphs of at most EXACT_IN_AUTO_MAX_OPS ops, with
 * at most EXACT_IN_AUTO_SECONDS (or the user's shorter --time-limit), last,
 * so that it starts from the best plan of every other candidate. On larger
 * graphs GLPK rarely proves anything within auto's time goal (README,
 * "How auto decides"). */
#define EXACT_IN_AUTO_MAX_OPS 40
#define EXACT_IN_AUTO_SECONDS 0.3

static remat_status run_exact(auto_state *S, remat_planner *Q, remat_plan_options *sub)
{
    const remat_plan_options *o = S->P->o;
    if (S->P->a->g->n_ops > EXACT_IN_AUTO_MAX_OPS || o->budget_kind == REMAT_BUDGET_NONE)
        return REMAT_OK;
    sub->time_limit = o->time_limit > 0 && o->time_limit < EXACT_IN_AUTO_SECONDS ? o->time_limit
                                                                               : EXACT_IN_AUTO_SECONDS;
    remat_plan cand;
    remat_plan_init(&cand);
    remat_eval e;
    int fk;
    remat_status st = run_candidate(Q, "exact", &cand, &e, &fk);
    if (st == REMAT_OK) {
        note_tried(S, "exact");
        offer(S, &cand, &e, "exact", fk, 0);
    }
    remat_plan_destroy(&cand);
    sub->time_limit = o->time_limit;
    return st;
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
    for (size_t i = 0; i < sizeof monotone / sizeof monotone[0] && !fatal(st); i++) {
        if (monotone[i].max_ops && g->n_ops > monotone[i].max_ops)
            continue;
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
    if (!fatal(st) && P->o->budget_kind != REMAT_BUDGET_NONE) {
        /* The ladder's scale: the store-all metric. */
        uint8_t *all = remat__calloc(g->n_tensors ? g->n_tensors : 1, 1);
        remat_eval base;
        start_pool sp;
        memset(&sp, 0, sizeof sp);
        if (!all) {
            st = remat_err_set(P->err, REMAT_ENOMEM, "out of memory planning");
        } else {
            memset(all, 1, g->n_tensors);
            st = remat__eval_keep(&Q, all, &base);
            remat__free(all);
        }
        if (st == REMAT_OK)
            st = pool_build(&Q, &sp);
        const uint32_t L = ladder_points(g->n_ops);
        for (uint32_t k = 1; k <= L && st == REMAT_OK && base.valid; k++) {
            uint64_t b = (uint64_t)((double)base.metric * k / L);
            if (b > P->o->budget)
                break;
            sub.budget = b;
            st = ladder_point(&S, &Q, &sp);
        }
        sub.budget = P->o->budget;
        pool_destroy(&sp);
    }
    if (!fatal(st))
        st = run_exact(&S, &Q, &sub);
    P->evaluations += Q.evaluations;
    remat_schedule_destroy(&Q.scratch);
    if (fatal(st))
        return st;
    if (!S.have)
        return remat_err_set(P->err, REMAT_EINTERNAL, "auto: no strategy produced a plan");
    char cert[160];
    if ((st = certificate(P, &S, cert, sizeof cert)) != REMAT_OK)
        return st;
    return remat__plan_params(P, out,
                              "{\"chosen\": \"%s\", \"local_search_flips\": %u, \"local_search_evaluations\": %llu, "
                              "\"local_search_skipped\": %llu, %s, \"candidates\": [%s]}",
                              S.chosen, S.flips, (unsigned long long)S.ls_evals, (unsigned long long)S.ls_skipped,
                              cert, S.tried);
}

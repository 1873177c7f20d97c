/*
 * auto.c - the default strategy: the plan with the least extra FLOPs within
 * the budget among every strategy's, improved by a local search, monotone
 * in the budget by construction (DTR aside), and certified: every plan
 * carries a proven lower bound and the gap (issue 20).
 *
 * Monotone: a looser budget must never cost more extra FLOPs (DESIGN 6).
 * A strategy whose answer at budget B is "the best fitting plan of a set
 * that does not depend on B" is monotone by itself: store-all, sqrtn and
 * mincut (one plan each), chen-greedy (a fixed threshold grid), revolve
 * (every slot count on chains of up to 64 blocks), the class search and
 * exact where they are optimal. These run at B. The local search, whose
 * answer can get worse as B grows, runs only at a fixed ladder of budgets
 * (fractions k/L of the store-all peak, L a function of the graph's size),
 * and auto(B) takes the best of the ladder points at or below B: a set that
 * only grows with B. Each point's search starts from the best fitting keep
 * set among the budget-free ones, chen-greedy at that point and the
 * previous point's result, and may work until k/L of one total is spent:
 * all of it depends on the point, never on B. DTR runs at B itself, so
 * that auto is never worse than dtr; its eviction order is not monotone in
 * its limit (layered 4x6 seed 2 cost 6.5% more at 0.52 of its peak than at
 * 0.51). Up to DTR_EVERY_LIMIT_MAX_OPS ops it runs at every limit at or
 * below B instead (dtr.c, every_limit: a run changes at finitely many
 * limits), whose best is monotone by construction and covers the ladder's
 * points; above, DTR also runs at every ladder point (every fourth above
 * LADDER_DTR_EVERY_OPS, none above LADDER_DTR_MAX_OPS), and there
 * monotonicity rests on the ladder. Budget sweeps check both, on
 * every bundled graph (tests/check_plan.c) and on generated ones
 * (tests/check_bound.c).
 *
 * Time (goals: 0.5 s up to 10^4 ops, 5 s at 10^5): the candidates and the
 * ladder are tiered by size (README, "How auto decides"); the local search
 * (auto_search.c) tries flips by their producer's FLOPs, judges each by a
 * delta replay of the part of the step it changes, rejects one whose
 * schedule recomputes more FLOPs than a fitting plan before replaying it,
 * and skips keeping a tensor that surely overflows the forward pass. The
 * ladder's sqrtn and chen-greedy starts judge a list of keep sets that does
 * not depend on the budget: it is recorded once and each keep set judged at
 * most once over all points (segments_seeds.c). Every
 * candidate is judged by the one replay in exec, and so is the plan
 * returned. Everything is bounded by work, never by time, so the plan
 * depends on the graph and the budget only (exact too: run_exact).
 *
 * Last, at B: the bound (bound.c), then on graphs of at most 64
 * activations the best-first search of the fixed-order class
 * (class_search.c) from the best plan so far, under a work limit: where it
 * finishes, its optimum (a plan, or the proof that the incumbent is one)
 * becomes the bound; where it stops, its frontier's bound raises bound.c's
 * and exact runs, handed the best plan so far and the bound. Whether the
 * search finishes depends on B, so a finished search's plan at B may be
 * better than a stopped one's at a looser B', as for exact: the budget
 * sweeps of tests/check_plan.c check monotonicity there too.
 */
#include "auto_internal.h"
#include "../util/util_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *strategy;
    int linearized;
    unsigned flags;
    const char *options;
} candidate;

#define MAX_CANDIDATES 64

/* auto's candidates with every flag of `need` and none of `unwanted`,
 * from the strategy table (remat/plan.h): in auto_rank order, each
 * linearized variant right after its strategy. */
static size_t candidates(unsigned need, unsigned unwanted, candidate *out)
{
    const remat_strategy_info *r[MAX_CANDIDATES];
    size_t k = remat__strategies_ranked(0, r, MAX_CANDIDATES), n = 0;
    for (size_t i = 0; i < k && n + 2 <= MAX_CANDIDATES; i++) {
        if ((r[i]->flags & need) != need || (r[i]->flags & unwanted))
            continue;
        out[n++] = (candidate){r[i]->name, 0, r[i]->flags, r[i]->options};
        if (r[i]->flags & REMAT_STRATEGY_LINEARIZED)
            out[n++] = (candidate){r[i]->name, 1, r[i]->flags, r[i]->options};
    }
    return n;
}

/* Run at the budget itself: the table's REMAT_STRATEGY_AUTO entries.
 * REMAT_STRATEGY_AUTO_HEAVY ones (chen-greedy: a replay per threshold of
 * its grid, two variants; chain-dp: table work plus up to 30 replays) cost
 * about 0.25 s each at 10^4 ops and 3 s at 10^5 and never gave the best
 * plan on a graph that large in `make bench BENCH=auto`: above
 * HEAVY_MAX_OPS auto leaves them out to stay within its time goal (0.5 s up
 * to 10^4 ops, 5 s at 10^5). REMAT_STRATEGY_SMALL_ONLY (exact) runs last,
 * from the best plan found (run_exact). */
#define HEAVY_MAX_OPS 5000
/* A strategy that reads dp_slots (chain-dp) gets 64 levels above 300 ops. */
#define CHAIN_DP_FULL_MAX_OPS 300
#define CHAIN_DP_AUTO_SLOTS 64

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
/* ... at every point up to this size, at every fourth point above. */
#define LADDER_DTR_EVERY_OPS 100
/* Up to DTR_EVERY_LIMIT_MAX_OPS ops DTR runs at every limit at or below
 * the budget instead (dtr.c, every_limit): the ladder's points are among
 * those limits, and DTR's best becomes monotone in the budget. Above, the
 * distinct runs grow too many (make bench BENCH=auto: the random 100-op
 * chain took 7.3 s of CPU instead of 0.3 s, the 99-op resnet 0.8 s instead
 * of 0.2 s). A plan without a budget has no limit to walk down from. */
#define DTR_EVERY_LIMIT_MAX_OPS 40
static int dtr_every_limit(const remat_planner *P)
{
    return P->a->g->n_ops <= DTR_EVERY_LIMIT_MAX_OPS && P->o->budget_kind != REMAT_BUDGET_NONE;
}
/* chen-greedy as a ladder start (its threshold grid, per point). */
#define LADDER_CHEN_MAX_OPS 300
/* Work of all local searches together, in replayed instructions: about
 * 0.2 s of CPU on the project's 2-core machine on graphs of up to
 * LOCAL_SEARCH_FULL_OPS ops (make bench BENCH=auto: with 6 x 10^6 the
 * 994-op transformer at 70% of its peak lost 19% to the old search). */
#define LOCAL_SEARCH_WORK 9000000ULL
/* Above this size the work shrinks in proportion (every replay grows with
 * the graph), but covers at least two flips. */
#define LOCAL_SEARCH_FULL_OPS 2000

static uint64_t search_work(const remat_graph *g, uint64_t schedule_len)
{
    uint64_t w = g->n_ops <= LOCAL_SEARCH_FULL_OPS ? LOCAL_SEARCH_WORK
                                                   : LOCAL_SEARCH_WORK / g->n_ops * LOCAL_SEARCH_FULL_OPS;
    return w > 2 * schedule_len ? w : 2 * schedule_len;
}

typedef struct {
    remat_planner *P;     /* the caller's: its budget judges the final choice */
    remat_plan *out;
    remat_eval best;
    int have;
    int best_from_keep;
    char chosen[64];
    char tried[640];
    uint32_t flips;
    remat__search_stats ls; /* the local searches' work and counts so far */
    uint64_t lb;       /* the proven lower bound at the caller's budget (bound.c) */
    int lb_infeasible; /* ... or: no schedule of the class fits */
    char exact_note[128]; /* exact's verdict when it ran */
    int class_optimal;    /* the class search finished: lb is the class optimum */
    uint64_t class_expansions; /* the class search's work */
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

/* Keep-set plans that do not depend on the budget: the local search's
 * starting pool at every ladder point. The table's
 * REMAT_STRATEGY_BUDGET_FREE local-search starts give one plan each; the
 * other light ones (sqrtn since issue 15 made it budget-aware) are run
 * without a budget, where each is one fixed plan (sqrtn: ceil(sqrt(ops))
 * segments spread by position). Without that plan the 994-op transformer
 * lost 9% and 19% against the baseline in make bench BENCH=auto: above
 * LADDER_CHEN_MAX_OPS nothing else seeds the search with segments. */
#define POOL_MAX 16

typedef struct {
    candidate c[POOL_MAX];
    size_t n;
    uint8_t *keep[POOL_MAX + 1]; /* [POOL_MAX]: the previous ladder point's result */
    remat_eval e[POOL_MAX + 1];  /* a keep set's figures do not depend on the budget */
    /* The ladder's budget-dependent starts, by their index in its list:
     * their keep sets recorded once (segments_seeds.c). */
    remat__seeds *seeds[MAX_CANDIDATES];
    uint8_t seeds_made[MAX_CANDIDATES]; /* 1: seeds[i] is made (NULL: that strategy gave no start) */
} start_pool;

static void pool_init(start_pool *sp)
{
    candidate all[MAX_CANDIDATES];
    memset(sp, 0, sizeof *sp);
    size_t n = candidates(REMAT_STRATEGY_AUTO | REMAT_STRATEGY_LOCAL_START, REMAT_STRATEGY_AUTO_HEAVY, all);
    sp->n = n < POOL_MAX ? n : POOL_MAX;
    memcpy(sp->c, all, sp->n * sizeof *all);
}

static void pool_destroy(start_pool *sp)
{
    for (size_t i = 0; i <= POOL_MAX; i++)
        remat__free(sp->keep[i]);
    for (size_t i = 0; i < MAX_CANDIDATES; i++)
        remat__seeds_destroy(sp->seeds[i]);
}

/* Start i of the ladder's list (strategy c, run in its quick form) at Q's
 * budget: *keep (owned by sp, NULL when it gives none) and its figures,
 * what run_candidate would give. The strategy's keep sets do not depend on
 * the budget, so they are recorded at the first point and each is judged
 * at most once over the whole ladder (segments_seeds.c); a strategy that
 * cannot record them runs at each point. Errors as run_candidate's. */
static remat_status seed_at(remat_planner *Q, start_pool *sp, size_t i, const candidate *c, const uint8_t **keep,
                            remat_eval *e)
{
    *keep = NULL;
    remat_err local;
    remat_err_init(&local);
    remat_err *saved = Q->err;
    Q->err = &local;
    remat_status st = REMAT_OK;
    if (!sp->seeds_made[i]) {
        sp->seeds_made[i] = 1;
        st = remat__seeds_create(Q, c->strategy, &sp->seeds[i]);
    }
    if (st == REMAT_OK && sp->seeds[i])
        st = remat__seeds_pick(sp->seeds[i], Q, keep, e);
    Q->err = saved;
    if (st == REMAT_ENOMEM || st == REMAT_EOVERFLOW || st == REMAT_EINTERNAL)
        return remat_err_set(saved, st, "auto: strategy %s: %s", c->strategy, local.msg);
    if (st != REMAT_OK)
        *keep = NULL;
    return st == REMAT_OK ? REMAT_OK : REMAT_EUNSUPPORTED;
}

static remat_status pool_build(remat_planner *Q, start_pool *sp, start_pool *have)
{
    remat_plan_options *o = (remat_plan_options *)Q->o;
    remat_status st = REMAT_OK;
    for (size_t i = 0; i < sp->n && !fatal(st); i++) {
        if (have->keep[i]) { /* already run at the budget: its plan is the same */
            sp->keep[i] = have->keep[i];
            sp->e[i] = have->e[i];
            have->keep[i] = NULL;
            continue;
        }
        remat_plan cand;
        remat_plan_init(&cand);
        remat_eval e;
        int fk;
        o->linearized = sp->c[i].linearized;
        const int free_run = !(sp->c[i].flags & REMAT_STRATEGY_BUDGET_FREE);
        const remat_budget_kind kind = o->budget_kind;
        if (free_run)
            o->budget_kind = REMAT_BUDGET_NONE;
        st = run_candidate(Q, sp->c[i].strategy, &cand, &e, &fk);
        o->budget_kind = kind;
        /* Judged again under the budget's metric (arena mode's arena). */
        if (st == REMAT_OK && fk && cand.keep && free_run)
            st = remat__eval_keep(Q, cand.keep, &e);
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
static remat_status ladder_point(auto_state *S, remat_planner *Q, start_pool *sp, int with_dtr, uint64_t work_until)
{
    const remat_graph *g = Q->a->g;
    remat_status st;
    remat_plan cand;
    remat_eval e;
    int fk;
    /* The table's ladder strategies (DTR: not monotone by itself). */
    candidate heuristic[MAX_CANDIDATES];
    size_t n_heuristic = with_dtr ? candidates(REMAT_STRATEGY_AUTO | REMAT_STRATEGY_AUTO_LADDER, 0, heuristic) : 0;
    for (size_t i = 0; i < n_heuristic; i++) {
        remat_plan_init(&cand);
        /* Only a fitting plan is offered: DTR's search for the budget it
         * would meet (4 x 10^6 work units where it does not fit, three
         * quarters of auto's time on the 101-op layered graph) is moot. */
        Q->fit_only = 1;
        st = run_candidate(Q, heuristic[i].strategy, &cand, &e, &fk);
        Q->fit_only = 0;
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
    const uint8_t *start = NULL;
    remat_eval se = {0};
    int have = 0;
    for (size_t i = 0; i <= POOL_MAX; i++) {
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
    /* The budget-dependent local-search starts (sqrtn, chen-greedy), at b. */
    candidate starts[MAX_CANDIDATES];
    size_t n_starts = g->n_ops <= LADDER_CHEN_MAX_OPS
                          ? candidates(REMAT_STRATEGY_AUTO | REMAT_STRATEGY_LOCAL_START, REMAT_STRATEGY_BUDGET_FREE,
                                       starts)
                          : 0;
    for (size_t i = 0; i < n_starts; i++) {
        o->linearized = starts[i].linearized;
        /* A start only seeds the local search, at every ladder point: the
         * cheap form of Chen's searches is enough (issue 15). */
        Q->quick = 1;
        const uint8_t *k = NULL;
        st = seed_at(Q, sp, i, &starts[i], &k, &e);
        Q->quick = 0;
        if (st == REMAT_OK && k && (!have || remat__better(Q, &e, &se))) {
            start = k;
            se = e;
            have = 1;
        }
        if (fatal(st)) {
            o->linearized = 0;
            return st;
        }
    }
    o->linearized = 0;
    /* Below every start's metric the search would spend its work looking
     * for memory, which the strategies already minimize: it only lowers
     * the FLOPs of a plan that fits. */
    if (!have || !remat__fits(Q, &se))
        return REMAT_OK;
    /* The search works on its own copy; its result becomes the next
     * point's start. */
    uint8_t *keep = remat__malloc(g->n_tensors ? g->n_tensors : 1);
    if (!keep)
        return remat_err_set(Q->err, REMAT_ENOMEM, "out of memory planning");
    memcpy(keep, start, g->n_tensors);
    uint32_t flips = 0;
    st = remat__auto_local_search(Q, keep, &se, &flips, work_until, &S->ls);
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
            if (st != REMAT_OK)
                st = remat_err_set(Q->err, st, "auto: %s", local.msg);
        }
        remat_eval judged;
        if (st == REMAT_OK && (st = remat__eval_schedule(S->P, &res.schedule, &judged)) == REMAT_OK) {
            note_tried(S, "local-search");
            offer(S, &res, &judged, "local-search", 1, flips);
        }
        remat_plan_destroy(&res);
        remat__free(sp->keep[POOL_MAX]);
        sp->keep[POOL_MAX] = keep;
        sp->e[POOL_MAX] = se;
        keep = NULL;
    }
    remat__free(keep);
    return fatal(st) ? st : REMAT_OK;
}

/* A keep set that describes schedule s (plan files carry one beside every
 * schedule; the schedule is what runs): every activation its schedule
 * never recomputes. */
static void keep_of(const remat_graph *g, const remat_schedule *s, uint8_t *keep)
{
    for (uint32_t t = 0; t < g->n_tensors; t++)
        keep[t] = g->tensors[t].kind == REMAT_TENSOR_ACTIVATION;
    for (size_t i = 0; i < s->n; i++)
        if (s->ins[i].kind == REMAT_I_RECOMPUTE) {
            const remat_op *op = &g->ops[s->ins[i].arg];
            const uint32_t *out = remat_op_outputs(g, op);
            for (uint32_t j = 0; j < op->n_out; j++)
                keep[out[j]] = 0;
        }
}

/* Forward + backward FLOPs, as the replay counts them: every FWD, and the
 * BWD steps of the analysis (the unit of overhead and of the gap). */
static double fwd_bwd_flops(const remat_analysis *a)
{
    double work = 0;
    for (uint32_t i = 0; i < a->g->n_ops; i++)
        work += (double)a->g->ops[i].flops;
    for (uint32_t j = 0; j < a->n_bwd; j++)
        work += (double)a->g->ops[a->bwd_order[j]].bwd_flops;
    return work;
}

/* The certificate of the chosen plan: the proven lower bound (bound.c) and
 * the gap, in FLOPs and in percentage points of the forward + backward
 * FLOPs (the unit of overhead), "optimal" when it is zero. The chosen
 * plan's extra FLOPs are its replayed ones (S->best). */
static remat_status certificate(remat_planner *P, const auto_state *S, char *buf, size_t cap)
{
    const uint64_t lb = S->lb;
    const int infeasible = S->lb_infeasible;
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
    const double work = fwd_bwd_flops(P->a);
    if (extra == lb)
        snprintf(buf, cap, "\"lower_bound\": %llu, \"gap\": \"optimal\", \"gap_pp\": 0", (unsigned long long)lb);
    else
        snprintf(buf, cap, "\"lower_bound\": %llu, \"gap\": %.6f, \"gap_pp\": %.4f", (unsigned long long)lb,
                 (double)(extra - lb) / (double)extra, work > 0 ? 100.0 * (double)(extra - lb) / work : 0.0);
    return REMAT_OK;
}

/* The best-first search of the fixed-order class (class_search.c), from
 * the best plan so far as its incumbent: it either finds the optimum,
 * cheaper than the incumbent, which becomes a candidate and, once the
 * replay confirms its figures, the certificate's bound; or proves that nothing
 * of the class is cheaper than the incumbent (the bound is the incumbent's
 * cost); or stops at its work limit with a proven bound of its own, which
 * raises bound.c's. Bounded by work (CLASS_IN_AUTO_WORK units: at most
 * about 0.2 s on the project's machine), so the plan depends on the graph
 * and the budget only. A stopped search whose best dive meets its own bound
 * has found the optimum too, and offers it. More work where the gap stays
 * open (100 times, where the gap was above 0.1 pp but within 10% of the
 * plan) proved layered DAGs of 25-33 ops optimal in 0.2-6 s, but made auto
 * lose monotonicity: optimal at 0.61 of a peak, 4% dearer at 0.62, where the
 * gap was just over 10% (issue 20, measured by a sweep; tests/check_bound.c
 * now sweeps those budgets). */
#define CLASS_IN_AUTO_WORK 12000000u
#define CLASS_IN_AUTO_STATES 2000000u
static remat_status run_class_search(auto_state *S, remat_planner *Q)
{
    if (S->P->probe)
        return REMAT_OK;
    if (S->have && remat__fits(S->P, &S->best) && S->best.extra_flops == 0) /* store-all fits */
        return REMAT_OK;
    remat_plan cand;
    remat_plan_init(&cand);
    uint64_t opt = 0, lb = 0;
    int ran = 0;
    remat_class_limits lim = {0, UINT64_MAX, CLASS_IN_AUTO_STATES, 0, 0, CLASS_IN_AUTO_WORK};
    if (S->have && remat__fits(S->P, &S->best))
        lim.ub = S->best.extra_flops;
    remat_status st = remat__class_search_within(S->P, &lim, &cand.schedule, &opt, &lb, &ran);
    S->class_expansions = lim.expanded;
    /* Only the optimum is offered: a finished search's schedule, or a
     * stopped one's best dive when it meets the search's proven bound; it
     * is as monotone as the optimum itself (file comment). Any other dive
     * is not, and its search contributes its bound only. */
    if (st == REMAT_OK && opt != UINT64_MAX && cand.schedule.n > 0 && (ran || opt == lb)) {
        remat_eval e;
        st = remat__eval_schedule(S->P, &cand.schedule, &e);
        if (st == REMAT_OK && remat__fits(S->P, &e) && e.extra_flops == opt) {
            note_tried(S, "class-search");
            if (opt > S->lb)
                S->lb = opt;
            S->class_optimal = 1;
            if ((st = remat__plan_alloc_keep(Q, &cand)) == REMAT_OK) {
                keep_of(Q->a->g, &cand.schedule, cand.keep);
                offer(S, &cand, &e, "class-search", 0, 0);
            }
        }
    } else if (st == REMAT_OK && ran && opt == UINT64_MAX && lim.ub && lb == lim.ub) {
        /* Nothing of the class below the incumbent: it is optimal. */
        note_tried(S, "class-search");
        if (lb > S->lb)
            S->lb = lb;
        S->class_optimal = 1;
    }
    if (st == REMAT_OK && !ran && lb != UINT64_MAX && lb > S->lb)
        S->lb = lb;
    remat_plan_destroy(&cand);
    return st;
}

/* exact inside auto: on graphs of at most EXACT_IN_AUTO_MAX_OPS ops, last,
 * so that it starts from the best plan of every other candidate, under a
 * work limit rather than a time limit (issue 20: under load a time limit
 * made auto's plan vary from run to run): at most
 * EXACT_IN_AUTO_LP_ITERATIONS simplex iterations for the root LP and
 * EXACT_IN_AUTO_ITERATIONS (or EXACT_IN_AUTO_NODES nodes) in all, about
 * 0.1-0.15 s of CPU on the project's machine where the limit binds (a
 * simplex iteration costs about 0.12 ms on the 5,600 columns of resnet8's
 * program). The root LP of graphs of 30-40 ops needs 2,500-7,000
 * iterations, so there exact contributes its starting plans (its greedy and
 * the warm-start strategies), which run to their end; programs small enough
 * for the LP to finish get their branch and bound. A --time-limit the user
 * gives still caps it, as a time. On larger graphs GLPK rarely proves
 * anything within auto's time goal (README, "How auto decides"). */
#define EXACT_IN_AUTO_MAX_OPS 40
#define EXACT_IN_AUTO_NODES 60
#define EXACT_IN_AUTO_LP_ITERATIONS 800
#define EXACT_IN_AUTO_ITERATIONS 1200

static remat_status run_exact(auto_state *S, remat_planner *Q)
{
    const remat_plan_options *o = S->P->o;
    if (S->P->a->g->n_ops > EXACT_IN_AUTO_MAX_OPS || o->budget_kind == REMAT_BUDGET_NONE || Q->in_exact ||
        S->P->probe)
        return REMAT_OK;
    /* The incumbent meets the bound: optimal, nothing to prove. */
    if (S->have && remat__fits(S->P, &S->best) && S->best.extra_flops <= S->lb)
        return REMAT_OK;
    Q->exact_nodes = EXACT_IN_AUTO_NODES;
    Q->exact_lp_iterations = EXACT_IN_AUTO_LP_ITERATIONS;
    Q->exact_iterations = EXACT_IN_AUTO_ITERATIONS;
    remat_plan cand;
    remat_plan_init(&cand);
    remat_eval e;
    int fk;
    candidate small[MAX_CANDIDATES];
    size_t n_small = candidates(REMAT_STRATEGY_AUTO | REMAT_STRATEGY_SMALL_ONLY, 0, small);
    if (n_small == 0) {
        Q->exact_nodes = Q->exact_lp_iterations = Q->exact_iterations = 0;
        return REMAT_OK;
    }
    remat_status st = run_candidate(Q, small[0].strategy, &cand, &e, &fk);
    if (st == REMAT_OK) {
        note_tried(S, small[0].strategy);
        /* exact's own verdict for its class (a subclass of the bound's):
         * status and bound, copied from its params. */
        const char *ps = cand.params_json ? strstr(cand.params_json, "\"status\": \"") : NULL;
        const char *pb = cand.params_json ? strstr(cand.params_json, "\"bound\": ") : NULL;
        if (ps && pb) {
            ps += 11;
            size_t n = strcspn(ps, "\"");
            snprintf(S->exact_note, sizeof S->exact_note, ", \"exact\": {\"status\": \"%.*s\", \"bound\": %llu}",
                     (int)(n < 32 ? n : 32), ps, strtoull(pb + 9, NULL, 10));
        }
        offer(S, &cand, &e, small[0].strategy, fk, 0);
    }
    remat_plan_destroy(&cand);
    Q->exact_nodes = Q->exact_lp_iterations = Q->exact_iterations = 0;
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
    start_pool pool_from_b;
    pool_init(&pool_from_b);
    candidate monotone[MAX_CANDIDATES];
    size_t n_monotone = candidates(REMAT_STRATEGY_AUTO, REMAT_STRATEGY_SMALL_ONLY, monotone);
    /* Progress counts the candidates, then the ladder's budgets (at most
     * its points, fewer when the budget stops it early). */
    const size_t n_steps = n_monotone + (P->o->budget_kind != REMAT_BUDGET_NONE ? ladder_points(g->n_ops) : 0);
    for (size_t i = 0; i < n_monotone && !fatal(st); i++) {
        if ((monotone[i].flags & REMAT_STRATEGY_AUTO_HEAVY) && g->n_ops > HEAVY_MAX_OPS)
            continue;
        sub.linearized = monotone[i].linearized;
        /* chain-dp's default table (256 memory levels and more) costs 0.5 s
         * at 10^3 ops; 64 levels cost a third and lost nothing measurable
         * where chain-dp was auto's choice (make bench BENCH=auto). */
        sub.dp_slots = P->o->dp_slots;
        if (strstr(monotone[i].options, "dp_slots") && !P->o->dp_slots && !P->o->dp_step &&
            g->n_ops > CHAIN_DP_FULL_MAX_OPS)
            sub.dp_slots = CHAIN_DP_AUTO_SLOTS;
        remat_plan cand;
        remat_plan_init(&cand);
        remat_eval e;
        int fk;
        char name[48];
        snprintf(name, sizeof name, "%s%s", monotone[i].strategy, monotone[i].linearized ? "/linearized" : "");
        if (P->o->progress)
            P->o->progress(P->o->progress_ctx, name, i, n_steps);
        /* DTR at every limit up to B where the ladder would run it at
         * every point: its best is then monotone (dtr.c, every_limit). */
        Q.dtr_every_limit = (monotone[i].flags & REMAT_STRATEGY_AUTO_LADDER) && dtr_every_limit(P);
        st = run_candidate(&Q, monotone[i].strategy, &cand, &e, &fk);
        Q.dtr_every_limit = 0;
        if (st == REMAT_OK) {
            note_tried(&S, name);
            /* The budget-free keep sets seed the ladder's pool. */
            for (size_t j = 0; j < pool_from_b.n; j++)
                if (fk && cand.keep && !pool_from_b.keep[j] &&
                    (pool_from_b.c[j].flags & REMAT_STRATEGY_BUDGET_FREE) &&
                    strcmp(pool_from_b.c[j].strategy, monotone[i].strategy) == 0 &&
                    pool_from_b.c[j].linearized == monotone[i].linearized) {
                    pool_from_b.keep[j] = remat__malloc(g->n_tensors ? g->n_tensors : 1);
                    if (pool_from_b.keep[j]) {
                        memcpy(pool_from_b.keep[j], cand.keep, g->n_tensors);
                        pool_from_b.e[j] = e;
                    }
                }
            offer(&S, &cand, &e, name, fk, 0);
        }
        remat_plan_destroy(&cand);
    }
    sub.linearized = 0;
    sub.dp_slots = P->o->dp_slots;
    if (!fatal(st) && P->o->budget_kind != REMAT_BUDGET_NONE) {
        /* The ladder's scale: the store-all metric. */
        uint8_t *all = remat__calloc(g->n_tensors ? g->n_tensors : 1, 1);
        remat_eval base;
        start_pool sp;
        pool_init(&sp);
        if (!all) {
            st = remat_err_set(P->err, REMAT_ENOMEM, "out of memory planning");
        } else {
            memset(all, 1, g->n_tensors);
            st = remat__eval_keep(&Q, all, &base);
            remat__free(all);
        }
        const uint64_t work = st == REMAT_OK ? search_work(g, Q.scratch.n) : 0;
        if (st == REMAT_OK)
            st = pool_build(&Q, &sp, &pool_from_b);
        /* Point k may search until k/L of the work is spent: what lower
         * points leave passes up, and no point's work depends on the
         * budget (monotone, see the file comment). */
        const uint32_t L = ladder_points(g->n_ops);
        for (uint32_t k = 1; k <= L && st == REMAT_OK && base.valid; k++) {
            uint64_t b = remat__u64_from_double((double)base.metric * k / L);
            if (b > P->o->budget)
                break;
            sub.budget = b;
            if (P->o->progress)
                P->o->progress(P->o->progress_ctx, "ladder", n_monotone + (size_t)k - 1, n_steps);
            st = ladder_point(&S, &Q, &sp,
                              !dtr_every_limit(P) && g->n_ops <= LADDER_DTR_MAX_OPS &&
                                  (g->n_ops <= LADDER_DTR_EVERY_OPS || k % 4 == 0),
                              work / L * k);
        }
        sub.budget = P->o->budget;
        pool_destroy(&sp);
    }
    pool_destroy(&pool_from_b);
    if (!fatal(st))
        st = remat__bound_extra(P, &S.lb, &S.lb_infeasible, NULL);
    if (!fatal(st) && !S.lb_infeasible)
        st = run_class_search(&S, &Q);
    if (!fatal(st) && !S.lb_infeasible && !S.class_optimal) {
        Q.incumbent = S.have ? &out->schedule : NULL;
        Q.known_bound = S.lb;
        st = run_exact(&S, &Q);
        Q.incumbent = NULL;
    }
    remat__auto_search_release(&S.ls);
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
                              "\"local_search_replays\": %llu, \"local_search_skipped\": %llu, %s%s, \"candidates\": [%s]}",
                              S.chosen, S.flips, (unsigned long long)S.ls.evals, (unsigned long long)S.ls.replays,
                              (unsigned long long)S.ls.skipped, cert, S.exact_note, S.tried);
}

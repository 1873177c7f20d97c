/*
 * exact_start.c - starting plans for the `exact` strategy.
 *
 * GLPK proves bounds slowly on programs of thousands of binaries, so what
 * the strategy returns under a time limit is only as good as the best
 * solution it holds. This file finds solutions before and beside the
 * solver: keep sets (a greedy descent from store-all, keep sets rounded
 * from the LP relaxation, a local search that flips one activation at a
 * time) and the schedules of the other strategies. Every candidate is
 * replayed; one enters the pool only if it fits the budget and lies in the
 * program's class (remat__exact_vector_of reads it as a feasible solution),
 * so the bound the solver proves applies to whatever the strategy returns.
 * The best entry becomes GLPK's first incumbent.
 */
#define _POSIX_C_SOURCE 200809L
#include "exact_internal.h"
#include "../util/util_internal.h"

#include <math.h>
#include <string.h>
#include <time.h>

double remat__exact_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void remat__exact_pool_init(exact_pool *pool)
{
    memset(pool, 0, sizeof *pool);
    remat_schedule_init(&pool->best);
    remat_schedule_init(&pool->fallback);
    pool->min_metric = UINT64_MAX;
    pool->source = "none";
}

void remat__exact_pool_destroy(exact_pool *pool)
{
    if (!pool)
        return;
    remat_schedule_destroy(&pool->best);
    remat_schedule_destroy(&pool->fallback);
    remat__free(pool->keep);
    remat__free(pool->x);
    remat__free(pool->x_try);
    pool->keep = NULL;
    pool->x = pool->x_try = NULL;
}

/* Whether e should replace the pool's best: in BUDGET mode it must fit and
 * be better by the planner's order; in PEAK mode (the smallest metric is
 * sought) any valid schedule with a smaller metric, then fewer FLOPs. */
static int wanted(const remat_planner *P, const exact_model *M, const exact_pool *pool, const remat_eval *e)
{
    if (M->mode == EXACT_MODE_PEAK) {
        if (!e->valid)
            return 0;
        if (!pool->have)
            return 1;
        if (e->metric != pool->best_e.metric)
            return e->metric < pool->best_e.metric;
        return e->extra_flops < pool->best_e.extra_flops;
    }
    return remat__fits(P, e) && (!pool->have || remat__better(P, e, &pool->best_e));
}

static remat_status copy_schedule(remat_planner *P, remat_schedule *dst, const remat_schedule *src)
{
    remat_schedule_clear(dst);
    for (size_t i = 0; i < src->n; i++)
        if (remat_schedule_push(dst, (remat_instr_kind)src->ins[i].kind, src->ins[i].arg) != REMAT_OK)
            return remat_err_set(P->err, REMAT_ENOMEM, "out of memory planning");
    return REMAT_OK;
}

remat_status remat__exact_offer(remat_planner *P, exact_model *M, exact_pool *pool, const remat_schedule *s,
                                const char *source, remat_eval *e_out)
{
    remat_eval e;
    remat_status st = remat__eval_schedule(P, s, &e);
    if (st != REMAT_OK)
        return st;
    if (e_out)
        *e_out = e;
    pool->offers++;
    if (!wanted(P, M, pool, &e))
        return REMAT_OK;
    if ((!pool->x && !(pool->x = remat__array((size_t)M->m.n_cols + 1, sizeof *pool->x))) ||
        (!pool->x_try && !(pool->x_try = remat__array((size_t)M->m.n_cols + 1, sizeof *pool->x_try))))
        return remat_err_set(P->err, REMAT_ENOMEM, "out of memory planning");
    int in_class = remat__exact_vector_of(M, s, pool->x_try);
    if (in_class < 0)
        return remat_err_set(P->err, REMAT_ENOMEM, "out of memory planning");
    if (!in_class) {
        /* Fits, but the program cannot express it (another strategy's
         * schedule): a fallback for when nothing in the class fits. */
        pool->outside++;
        if (M->mode == EXACT_MODE_BUDGET && (!pool->have_fallback || remat__better(P, &e, &pool->fallback_e))) {
            if ((st = copy_schedule(P, &pool->fallback, s)) != REMAT_OK)
                return st;
            pool->have_fallback = 1;
            pool->fallback_e = e;
            pool->fallback_source = source;
        }
        return REMAT_OK;
    }
    if ((st = copy_schedule(P, &pool->best, s)) != REMAT_OK)
        return st;
    double *x = pool->x;
    pool->x = pool->x_try;
    pool->x_try = x;
    pool->have = 1;
    pool->best_e = e;
    pool->source = source;
    return REMAT_OK;
}

remat_status remat__exact_offer_keep(remat_planner *P, exact_model *M, exact_pool *pool, const uint8_t *keep,
                                     const char *source, remat_eval *e_out)
{
    const remat_graph *g = P->a->g;
    remat_eval e;
    memset(&e, 0, sizeof e);
    remat_err local;
    remat_err_init(&local);
    remat_schedule_clear(&P->scratch);
    remat_status st = remat_schedule_from_keep(P->a, keep, &P->scratch, &local);
    if (st == REMAT_EINFEASIBLE) {
        if (e_out)
            *e_out = e; /* e.valid = 0: a freed tensor cannot be rebuilt */
        return REMAT_OK;
    }
    if (st != REMAT_OK)
        return remat_err_set(P->err, st, "%s", local.msg);
    if ((st = remat__exact_offer(P, M, pool, &P->scratch, source, &e)) != REMAT_OK)
        return st;
    if (e_out)
        *e_out = e;
    if (!e.valid)
        return REMAT_OK;
    /* The default policy's schedules are in the class by construction: their
     * metrics bound the smallest budget from above. */
    if (e.metric < pool->min_metric)
        pool->min_metric = e.metric;
    if (!pool->keep && !(pool->keep = remat__calloc(g->n_tensors ? g->n_tensors : 1, 1)))
        return remat_err_set(P->err, REMAT_ENOMEM, "out of memory planning");
    if (!pool->have_keep || remat__better(P, &e, &pool->keep_e)) {
        memcpy(pool->keep, keep, g->n_tensors);
        pool->keep_e = e;
        pool->have_keep = 1;
    }
    return REMAT_OK;
}

static int flippable(const remat_graph *g, uint32_t v)
{
    return g->tensors[v].kind == REMAT_TENSOR_ACTIVATION && g->ops[g->tensors[v].producer].recomputable;
}

remat_status remat__exact_greedy(remat_planner *P, exact_model *M, exact_pool *pool, double until)
{
    const remat_graph *g = P->a->g;
    uint32_t nt = g->n_tensors;
    uint8_t *keep = remat__calloc(nt ? nt : 1, 1);
    if (!keep)
        return remat_err_set(P->err, REMAT_ENOMEM, "out of memory planning");
    remat_eval cur, e;
    /* Keep none: usually the smallest metric. */
    remat_status st = remat__exact_offer_keep(P, M, pool, keep, "keep-none", &e);
    for (uint32_t v = 0; v < nt; v++)
        keep[v] = g->tensors[v].kind == REMAT_TENSOR_ACTIVATION;
    if (st == REMAT_OK)
        st = remat__eval_keep(P, keep, &cur);
    /* Drop the kept activation that buys the most metric per recomputed
     * FLOP (or, once one fits, the fitting drop with the fewest FLOPs). */
    while (st == REMAT_OK && cur.valid && !remat__fits(P, &cur) && remat__exact_now() < until) {
        uint32_t pick = REMAT_NONE;
        double pick_score = 0;
        remat_eval pick_e = cur;
        for (uint32_t v = 0; v < nt && st == REMAT_OK; v++) {
            if (!keep[v] || !flippable(g, v))
                continue;
            keep[v] = 0;
            st = remat__eval_keep(P, keep, &e);
            keep[v] = 1;
            if (st != REMAT_OK || !e.valid)
                continue;
            double score;
            if (remat__fits(P, &e))
                score = 1e300 / (1.0 + (double)e.extra_flops);
            else if (e.metric < cur.metric)
                score = (double)(cur.metric - e.metric) /
                        (1.0 + fmax(0.0, (double)e.extra_flops - (double)cur.extra_flops));
            else
                continue;
            if (pick == REMAT_NONE || score > pick_score) {
                pick = v;
                pick_score = score;
                pick_e = e;
            }
        }
        if (pick == REMAT_NONE)
            break;
        keep[pick] = 0;
        cur = pick_e;
    }
    if (st == REMAT_OK)
        st = remat__exact_offer_keep(P, M, pool, keep, "greedy", NULL);
    remat__free(keep);
    return st;
}

remat_status remat__exact_local(remat_planner *P, exact_model *M, exact_pool *pool, double until)
{
    const remat_graph *g = P->a->g;
    uint32_t nt = g->n_tensors;
    if (!pool->have_keep)
        return REMAT_OK;
    uint8_t *keep = remat__calloc(nt ? nt : 1, 1);
    if (!keep)
        return remat_err_set(P->err, REMAT_ENOMEM, "out of memory planning");
    memcpy(keep, pool->keep, nt);
    remat_eval cur = pool->keep_e, e;
    remat_status st = REMAT_OK;
    int improved = 1;
    while (improved && st == REMAT_OK) {
        improved = 0;
        for (uint32_t v = 0; v < nt && st == REMAT_OK && remat__exact_now() < until; v++) {
            if (!flippable(g, v))
                continue;
            keep[v] ^= 1;
            st = remat__exact_offer_keep(P, M, pool, keep, "local-search", &e);
            if (st == REMAT_OK && e.valid && remat__better(P, &e, &cur)) {
                cur = e;
                improved = 1;
            } else {
                keep[v] ^= 1;
            }
        }
    }
    remat__free(keep);
    return st;
}

remat_status remat__exact_round(remat_planner *P, exact_model *M, exact_pool *pool, const double *lp, double until)
{
    static const double thresholds[] = {0.999, 0.95, 0.85, 0.7, 0.5, 0.3, 0.15, 0.05, 0.001};
    const remat_graph *g = P->a->g;
    uint32_t nt = g->n_tensors;
    uint8_t *keep = remat__calloc(nt ? nt : 1, 1);
    double *avg = remat__array(nt ? nt : 1, sizeof *avg), *low = remat__array(nt ? nt : 1, sizeof *low);
    remat_status st = REMAT_OK;
    if (!keep || !avg || !low)
        st = remat_err_set(P->err, REMAT_ENOMEM, "out of memory planning");
    /* How kept the LP wants each activation during backward: the mean and
     * the least of its residency where it may still be read. */
    for (uint32_t v = 0; v < nt && st == REMAT_OK; v++) {
        double sum = 0, mn = 1;
        uint32_t cnt = 0;
        for (uint32_t t = M->n; t < M->T; t++) {
            uint32_t c = M->S[(size_t)t * nt + v];
            if (!c)
                continue;
            sum += lp[c];
            mn = lp[c] < mn ? lp[c] : mn;
            cnt++;
        }
        avg[v] = cnt ? sum / cnt : 1;
        low[v] = cnt ? mn : 1;
    }
    for (int which = 0; which < 2 && st == REMAT_OK; which++)
        for (size_t i = 0; i < sizeof thresholds / sizeof thresholds[0] && st == REMAT_OK; i++) {
            if (remat__exact_now() >= until)
                break;
            for (uint32_t v = 0; v < nt; v++)
                keep[v] = g->tensors[v].kind == REMAT_TENSOR_ACTIVATION && (which ? low[v] : avg[v]) >= thresholds[i];
            st = remat__exact_offer_keep(P, M, pool, keep, "lp-rounding", NULL);
        }
    remat__free(keep);
    remat__free(avg);
    remat__free(low);
    return st;
}

remat_status remat__exact_strategies(remat_planner *P, exact_model *M, exact_pool *pool, double until)
{
    /* The table's warm starts (remat/plan.h), in warm_rank order; not
     * mincut (it ignores budgets). auto (REMAT_STRATEGY_RUNS_OTHERS: every
     * other strategy and its local search) is the incumbent's source, run
     * here only when exact is not itself running inside auto (auto then
     * hands its best plan over as P->incumbent), and told not to run exact. */
    const remat_strategy_info *warm[65];
    size_t n_warm = 0, n;
    const remat_strategy_info *all = remat_plan_strategies(&n);
    for (size_t i = 0; i < n && !n_warm; i++)
        if (all[i].flags & REMAT_STRATEGY_RUNS_OTHERS)
            warm[n_warm++] = &all[i];
    n_warm += remat__strategies_ranked(1, warm + n_warm, 64);
    const char *names[65];
    for (size_t i = 0; i < n_warm; i++)
        names[i] = warm[i]->name;
    remat_status st = REMAT_OK;
    for (size_t i = 0; i < n_warm && st == REMAT_OK; i++) {
        remat_strategy_fn fn = remat__strategy_lookup(names[i]);
        if (!fn || remat__exact_now() >= until ||
            ((warm[i]->flags & REMAT_STRATEGY_RUNS_OTHERS) && (P->incumbent || P->in_exact)))
            continue;
        remat_plan_options sub = *P->o;
        sub.strategy = names[i];
        remat_planner Q = *P;
        Q.o = &sub;
        Q.in_exact = 1;
        remat_err local;
        remat_err_init(&local);
        Q.err = &local;
        remat_schedule_init(&Q.scratch);
        remat_plan cand;
        remat_plan_init(&cand);
        remat_status cs = fn(&Q, &cand);
        if (cs == REMAT_OK && cand.schedule.n == 0 && cand.keep)
            cs = remat_schedule_from_keep(P->a, cand.keep, &cand.schedule, &local);
        if (cs == REMAT_OK)
            st = remat__exact_offer(P, M, pool, &cand.schedule, names[i], NULL);
        else if (cs == REMAT_ENOMEM)
            st = remat_err_set(P->err, cs, "%s", local.msg);
        /* Other failures (a budget the strategy cannot meet, a graph it
         * refuses) just drop the candidate. */
        P->evaluations += Q.evaluations;
        remat_schedule_destroy(&Q.scratch);
        remat_plan_destroy(&cand);
    }
    return st;
}

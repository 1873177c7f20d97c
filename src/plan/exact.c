/*
 * exact.c - the `exact` strategy: the least extra FLOPs within the budget,
 * proved by a mixed-integer program (exact_model.c) that GLPK solves.
 *
 * Flow. No budget, or a budget that store-all meets, needs no solver: zero
 * extra FLOPs is optimal. Otherwise the program is built (for the full class
 * of schedules when it is small, else without recomputation during the
 * forward pass), starting plans are gathered (exact_start.c: a greedy search
 * over keep sets, the other strategies' plans), GLPK solves the LP
 * relaxation, its solution is rounded into more keep sets and improved by a
 * local search, and branch and bound starts from the best of them as its
 * incumbent, so that a time limit never leaves us with nothing. A callback
 * records the best bound of the open nodes (the proven lower bound) and
 * stops the search at the deadline. The solver's answer becomes a schedule
 * that is replayed like every other plan.
 *
 * GLPK works in floating point: if its answer replays a few bytes over the
 * budget (integrality and feasibility tolerances), the program is solved
 * again with the budget lowered by the overshoot. Every plan returned has
 * been replayed within the budget, and every plan in the pool lies in the
 * program's class, so the bound applies to whichever is returned. When
 * nothing in the class fits but another strategy's schedule does, that one
 * is returned with no claim (bound 0). When nothing fits at all, the same
 * program with the peak as its objective finds the smallest budget of the
 * class, and the error names it (proved when the solver finishes, else the
 * best found and the bound).
 *
 * Small graphs (issue 20): when class_search.c can take the graph, its
 * optimum over the whole fixed-order class (which contains the program's)
 * is returned, replayed, without building the program. Otherwise the warm
 * start: the caller's incumbent (auto hands over its best plan; standalone,
 * auto runs among the starting strategies) and bound.c's proven bound
 * (valid for the program's class too); an incumbent that meets the bound
 * closes the program without a solve.
 *
 * Params: status ("optimal" when the bound meets the objective, else
 * "time_limit"; "outside_class" for the case above), objective (extra
 * FLOPs, replayed), bound, gap = (objective - bound) / objective, the
 * program's size, the time spent and where the plan came from.
 *
 * GLPK prints to stdout by default; every call here runs with its terminal
 * output off (restored afterwards) so that remat's JSON stays clean.
 */
#include "exact_internal.h"
#include "../util/util_internal.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#if REMAT_HAVE_GLPK
#include <glpk.h>
#endif

/* The program has O(ops^2) columns; past this GLPK cannot say anything
 * useful within a time limit measured in seconds. */
#define EXACT_MAX_OPS 200
#define EXACT_DEFAULT_SECONDS 10.0
/* The class search's state table before the program (40 bytes a state). */
#define EXACT_CLASS_STATES 4000000u
/* Re-solves after a replay over the budget (floating-point tolerance). */
#define EXACT_MAX_RESOLVES 3
/* Under a work limit (remat_planner.exact_nodes) the deadline only stops a
 * machine so slow that the limit would take this long. */
#define EXACT_WORK_SAFETY_SECONDS 30.0

#if REMAT_HAVE_GLPK

/* ---- GLPK ------------------------------------------------------------------- */

typedef struct {
    int lp_done;    /* the LP relaxation was solved */
    int infeasible; /* proven: no solution */
    int finished;   /* branch and bound ran to the end */
    int timed_out;  /* GLPK stopped at its time limit (GLP_ETMLIM) */
    int have_sol;
    int warm_given, warm_accepted;
    int warm_checked; /* the pool's best passed the row check and went to the solver */
    double obj, bound; /* model units; bound = -inf until known */
    double seconds;
    double deadline;
    uint64_t node_limit;    /* branch and bound nodes (0: none) */
    uint64_t nodes;         /* nodes created so far */
    uint64_t it_limit;      /* simplex iterations, the root LP's included (0: none) */
    int work_stopped;       /* stopped by the work limit */
    remat_eval milp_e; /* the replay of the solver's schedule, when have_sol */
} solve_result;

static void ios_callback(glp_tree *tree, void *info)
{
    solve_result *r = info;
    /* The best open node's bound is a global bound; bounds only grow as
     * the tree is explored. */
    int p = glp_ios_best_node(tree);
    if (p) {
        double b = glp_ios_node_bound(tree, p);
        if (b > r->bound)
            r->bound = b;
    }
    /* GLPK checks its own limit only between nodes; stop as soon as we
     * see the deadline pass. The work limit counts every node created. */
    int a_cnt = 0, n_cnt = 0, t_cnt = 0;
    glp_ios_tree_size(tree, &a_cnt, &n_cnt, &t_cnt);
    if ((uint64_t)t_cnt > r->nodes)
        r->nodes = (uint64_t)t_cnt;
    if (r->node_limit) {
        glp_prob *lp = glp_ios_get_prob(tree);
        uint64_t its = (uint64_t)glp_get_it_cnt(lp);
        if ((uint64_t)t_cnt >= r->node_limit || (r->it_limit && its >= r->it_limit)) {
            r->work_stopped = 1;
            glp_ios_terminate(tree);
            return;
        }
    }
    if (remat__exact_now() >= r->deadline)
        glp_ios_terminate(tree);
}

typedef struct {
    glp_prob *lp;
    int term;
    const double *warm;
    solve_result *r;
} glpk_session;

static void heur_callback(glp_tree *tree, void *info)
{
    glpk_session *S = info;
    if (glp_ios_reason(tree) == GLP_IHEUR && S->warm && !S->r->warm_given) {
        S->r->warm_given = 1;
        S->r->warm_accepted = glp_ios_heur_sol(tree, S->warm) == 0;
    }
    ios_callback(tree, S->r);
}

/* Branching by program size (see session_mip). */
#define EXACT_PCH_COLS 2500
#define EXACT_DTH_COLS 8000

static int ms_left(double deadline)
{
    double s = deadline - remat__exact_now();
    if (s <= 0.001)
        return 1;
    return s > 2e6 ? 2000000000 : (int)(s * 1000);
}

static void session_open(const exact_model *M, glpk_session *S, solve_result *r)
{
    const exact_milp *m = &M->m;
    memset(S, 0, sizeof *S);
    S->r = r;
    S->term = glp_term_out(GLP_OFF);
    glp_prob *lp = S->lp = glp_create_prob();
    glp_set_obj_dir(lp, GLP_MIN);
    if (m->n_cols)
        glp_add_cols(lp, (int)m->n_cols);
    for (uint32_t c = 1; c <= m->n_cols; c++) {
        if (m->is_int[c])
            glp_set_col_kind(lp, (int)c, GLP_IV);
        int type = m->lb[c] == m->ub[c] ? GLP_FX : isinf(m->ub[c]) ? GLP_LO : GLP_DB;
        glp_set_col_bnds(lp, (int)c, type, m->lb[c], isinf(m->ub[c]) ? 0 : m->ub[c]);
        glp_set_obj_coef(lp, (int)c, m->obj[c]);
    }
    if (m->n_rows)
        glp_add_rows(lp, (int)m->n_rows);
    for (uint32_t i = 1; i <= m->n_rows; i++) {
        glp_set_row_bnds(lp, (int)i, m->row_type[i] == EXACT_LE ? GLP_UP : GLP_LO, m->rhs[i], m->rhs[i]);
        size_t off = m->row_off[i], len = m->row_off[i + 1] - off;
        glp_set_mat_row(lp, (int)i, (int)len, m->ja + off - 1, m->ar + off - 1);
    }
}

static void session_close(glpk_session *S)
{
    if (S->lp)
        glp_delete_prob(S->lp);
    S->lp = NULL;
    glp_term_out(S->term);
}

/* The LP relaxation (dual simplex: several times faster than primal on
 * these programs); lpx gets its solution. */
static void session_lp(glpk_session *S, double deadline, uint64_t iterations, double *lpx)
{
    solve_result *r = S->r;
    double t0 = remat__exact_now();
    glp_scale_prob(S->lp, GLP_SF_AUTO);
    glp_adv_basis(S->lp, 0);
    glp_smcp sm;
    glp_init_smcp(&sm);
    sm.msg_lev = GLP_MSG_OFF;
    sm.meth = GLP_DUALP;
    sm.tm_lim = ms_left(deadline);
    if (iterations)
        sm.it_lim = iterations > INT_MAX ? INT_MAX : (int)iterations;
    int rc = glp_simplex(S->lp, &sm), lst = glp_get_status(S->lp);
    r->timed_out |= rc == GLP_ETMLIM;
    r->work_stopped |= rc == GLP_EITLIM;
    if (rc == 0 && lst == GLP_NOFEAS) {
        r->lp_done = r->infeasible = r->finished = 1;
    } else if (rc == 0 && lst == GLP_OPT) {
        r->lp_done = 1;
        r->bound = glp_get_obj_val(S->lp);
        int n = glp_get_num_cols(S->lp);
        for (int c = 1; c <= n; c++)
            lpx[c] = glp_get_col_prim(S->lp, c);
    }
    r->seconds += remat__exact_now() - t0;
}

/* Branch and bound from the LP basis, with warm (may be NULL) as the first
 * incumbent; sol gets the incumbent. */
static void session_mip(glpk_session *S, const double *warm, double deadline, uint64_t nodes, uint64_t iterations,
                        double *sol)
{
    solve_result *r = S->r;
    double t0 = remat__exact_now();
    glp_iocp io;
    glp_init_iocp(&io);
    io.msg_lev = GLP_MSG_OFF;
    io.tm_lim = ms_left(deadline);
    io.presolve = GLP_OFF; /* keeps column numbers, which the warm start needs */
    /* Branching and cuts by size. On small programs pseudocost branching
     * (strong branching to start) with Gomory cuts closes in a fraction of
     * a second what GLPK's default (Driebeck-Tomlin, no cuts) leaves open
     * after minutes, because the LP relaxation of time-indexed memory rows is
     * weak. Both cost whole seconds at the root of larger programs without
     * calling back, which would overrun the time limit; there, the default,
     * and past EXACT_DTH_COLS most-fractional (the default stalls too). */
    int cols = glp_get_num_cols(S->lp);
    double left = deadline - remat__exact_now();
    /* Under a work limit the choice must not depend on the clock. */
    if (cols <= EXACT_PCH_COLS / 5 || (cols <= EXACT_PCH_COLS && left >= 2.0 && !nodes)) {
        io.br_tech = GLP_BR_PCH;
        io.gmi_cuts = GLP_ON;
    } else {
        io.br_tech = cols <= EXACT_DTH_COLS ? GLP_BR_DTH : GLP_BR_MFV;
    }
    S->warm = warm;
    r->deadline = deadline;
    r->node_limit = nodes;
    r->it_limit = iterations;
    io.cb_func = heur_callback;
    io.cb_info = S;
    int rc = glp_intopt(S->lp, &io), ms = glp_mip_status(S->lp);
    r->timed_out |= rc == GLP_ETMLIM;
    r->finished = rc == 0 && (ms == GLP_OPT || ms == GLP_NOFEAS);
    r->infeasible = rc == 0 && ms == GLP_NOFEAS;
    if (ms == GLP_OPT || ms == GLP_FEAS) {
        r->have_sol = 1;
        r->obj = glp_mip_obj_val(S->lp);
        int n = glp_get_num_cols(S->lp);
        for (int c = 1; c <= n; c++)
            sol[c] = glp_mip_col_val(S->lp, c);
        if (r->finished)
            r->bound = r->obj;
    }
    r->seconds += remat__exact_now() - t0;
}

/* ---- The strategy ------------------------------------------------------------------ */

/* The program for the full class when it is small enough to solve in
 * seconds, else for the class without forward-pass recomputation. */
#define EXACT_FULL_COLS 10000
/* Past this GLPK cannot even solve the LP relaxation in a time limit of
 * seconds: the starting plans are all we return. */
#define EXACT_SOLVE_COLS 60000

static uint64_t round_up_bound(double b)
{
    if (!(b > 0))
        return 0;
    double r = ceil(b - 1e-6 * fmax(1.0, b));
    return r >= 1.8e19 ? UINT64_MAX : (uint64_t)r;
}

static remat_status build(remat_planner *P, exact_mode mode, uint64_t budget, exact_model *M)
{
    remat_status st = remat__exact_build(P, mode, budget, 1, M);
    if (st == REMAT_OK && M->m.n_cols > EXACT_FULL_COLS) {
        remat__exact_destroy(M);
        st = remat__exact_build(P, mode, budget, 0, M);
    }
    return st;
}

/* Solves M (LP, starting plans from it, branch and bound) and offers the
 * solver's schedule to the pool. lp_heuristics: round the LP and search
 * locally before branching. */
static remat_status solve_model(remat_planner *P, exact_model *M, exact_pool *pool, double deadline, int lp_heuristics,
                                solve_result *r)
{
    double *lpx = remat__array((size_t)M->m.n_cols + 1, sizeof *lpx);
    double *sol = remat__array((size_t)M->m.n_cols + 1, sizeof *sol);
    remat_status st = REMAT_OK;
    memset(r, 0, sizeof *r);
    r->bound = -INFINITY;
    if (!lpx || !sol)
        st = remat_err_set(P->err, REMAT_ENOMEM, "out of memory planning");
    glpk_session S;
    if (st == REMAT_OK) {
        session_open(M, &S, r);
        session_lp(&S, deadline, P->exact_lp_iterations, lpx);
        if (r->lp_done && !r->infeasible && lp_heuristics) {
            double now = remat__exact_now(), left = deadline - now;
            st = remat__exact_round(P, M, pool, lpx, now + 0.1 * left);
            if (st == REMAT_OK)
                st = remat__exact_local(P, M, pool, now + 0.2 * left);
        }
        /* GLPK takes a heuristic solution without checking its rows: check
         * (the pool's best may come from a solve at another budget). */
        const double *warm = pool->have && remat__exact_max_violation(M, pool->x) <= 1e-7 ? pool->x : NULL;
        r->warm_checked = warm != NULL;
        if (st == REMAT_OK && r->lp_done && !r->infeasible && remat__exact_now() < deadline)
            session_mip(&S, warm, deadline, P->exact_nodes, P->exact_iterations, sol);
        session_close(&S);
    }
    if (st == REMAT_OK && r->have_sol) {
        remat_err local;
        remat_err_init(&local);
        remat_schedule s;
        remat_schedule_init(&s);
        st = remat__exact_schedule_of(M, sol, &s, &local);
        if (st != REMAT_OK)
            st = remat_err_set(P->err, st, "%s", local.msg);
        else
            st = remat__exact_offer(P, M, pool, &s, "milp", &r->milp_e);
        remat_schedule_destroy(&s);
    }
    remat__free(lpx);
    remat__free(sol);
    return st;
}

static void keep_of_schedule(const remat_graph *g, const remat_schedule *s, uint8_t *keep);

/* Nothing fits: find the smallest metric of the class and say it.
 * budget_infeasible: the solve at the budget proved there is no plan. The
 * smallest schedule found goes into out (the caller replays it as the best
 * effort, as for strategies that return an over-budget plan). */
static remat_status infeasible(remat_planner *P, const exact_pool *bp, int budget_infeasible, double limit,
                               double deadline, remat_plan *out)
{
    const remat_plan_options *o = P->o;
    exact_model M;
    exact_pool pool;
    remat__exact_pool_init(&pool);
    solve_result r;
    memset(&r, 0, sizeof r);
    uint64_t found = bp->min_metric, proven = 0;
    remat_status st = build(P, EXACT_MODE_PEAK, 0, &M);
    const uint64_t cols = st == REMAT_OK ? (uint64_t)M.m.n_cols : 0;
    if (st == REMAT_OK && M.m.n_cols <= EXACT_SOLVE_COLS && remat__exact_now() < deadline) {
        if (bp->have_keep)
            st = remat__exact_offer_keep(P, &M, &pool, bp->keep, "keep", NULL);
        if (st == REMAT_OK)
            st = solve_model(P, &M, &pool, deadline, 0, &r);
        if (st == REMAT_OK && pool.have && pool.best_e.metric <= found) {
            found = pool.best_e.metric;
            /* The best effort: the pool's best, its keep set for the record. */
            remat_schedule t = out->schedule;
            out->schedule = pool.best;
            pool.best = t;
            if ((st = remat__plan_alloc_keep(P, out)) == REMAT_OK)
                keep_of_schedule(P->a->g, &out->schedule, out->keep);
        }
        if (st == REMAT_OK && r.finished && found != UINT64_MAX)
            proven = found; /* the solver's optimum, replayed */
        else if (st == REMAT_OK && r.lp_done)
            proven = round_up_bound(r.bound * M.unit);
    }
    /* Out of time before that solve (a loaded machine) or no better plan
     * from it: the smallest keep set offered is the best effort, so the
     * figure the message names is a plan the caller gets. */
    if (st == REMAT_OK && out->schedule.n == 0 && bp->have_keep && bp->keep_e.metric == found) {
        remat_err local;
        remat_err_init(&local);
        st = remat_schedule_from_keep(P->a, bp->keep, &out->schedule, &local);
        if (st != REMAT_OK)
            st = remat_err_set(P->err, st, "%s", local.msg);
        else if ((st = remat__plan_alloc_keep(P, out)) == REMAT_OK)
            memcpy(out->keep, bp->keep, P->a->g->n_tensors);
    }
    /* Every schedule ends with the optimizer step, whose figure is fixed. */
    if (st == REMAT_OK && proven < M.c_opt)
        proven = M.c_opt;
    remat__exact_destroy(&M);
    remat__exact_pool_destroy(&pool);
    if (st != REMAT_OK)
        return st;
    if (proven > o->budget)
        budget_infeasible = 1;
    const char *kind = o->budget_kind == REMAT_BUDGET_ACTIVATION ? "activation" : "total";
    const char *what = o->budget_kind == REMAT_BUDGET_ACTIVATION ? "activation peak" : "peak";
    char b1[64], b2[64], b3[64], tail[128];
    remat_format_bytes(o->budget, b1, sizeof b1);
    remat_format_bytes(found, b2, sizeof b2);
    remat_format_bytes(proven, b3, sizeof b3);
    if (found != UINT64_MAX && proven >= found)
        return remat_err_set(P->err, REMAT_EINFEASIBLE,
                             "strategy exact cannot meet the %s budget of %s: the smallest %s of any schedule in "
                             "its class is %s, proved by the exact program",
                             kind, b1, what, b2);
    if (found != UINT64_MAX)
        snprintf(tail, sizeof tail, "; the smallest it found is %s", b2);
    else
        snprintf(tail, sizeof tail, "; it found none");
    if (budget_infeasible)
        return remat_err_set(P->err, REMAT_EINFEASIBLE,
                             "strategy exact cannot meet the %s budget of %s (proved by the exact program): the "
                             "smallest %s is at least %s%s",
                             kind, b1, what, b3, tail);
    /* Why it stopped short of a proof: the time limit only when it was the
     * time limit (raising it helps then, not otherwise). */
    char why[160];
    if (cols > EXACT_SOLVE_COLS)
        snprintf(why, sizeof why, "(its program of %llu columns is beyond the %d it solves)", (unsigned long long)cols,
                 EXACT_SOLVE_COLS);
    else if (r.timed_out || remat__exact_now() >= deadline)
        snprintf(why, sizeof why, "before its time limit of %g s (raise time_limit)", limit);
    else
        snprintf(why, sizeof why, "(GLPK stopped without a proof)");
    return remat_err_set(P->err, REMAT_EINFEASIBLE,
                         "strategy exact found no plan within the %s budget of %s %s: the smallest %s is at least %s%s",
                         kind, b1, why, what, b3, tail);
}

/* Marks as kept the activations whose op the schedule never recomputes
 * (the plan's keep set, for the record). */
static void keep_of_schedule(const remat_graph *g, const remat_schedule *s, uint8_t *keep)
{
    for (uint32_t v = 0; v < g->n_tensors; v++)
        keep[v] = g->tensors[v].kind == REMAT_TENSOR_ACTIVATION;
    for (size_t i = 0; i < s->n; i++)
        if (s->ins[i].kind == REMAT_I_RECOMPUTE) {
            const remat_op *op = &g->ops[s->ins[i].arg];
            const uint32_t *out = remat_op_outputs(g, op);
            for (uint32_t j = 0; j < op->n_out; j++)
                keep[out[j]] = 0;
        }
}

static remat_status trivial(remat_planner *P, remat_plan *out, const char *why, double t0)
{
    remat_status st = remat__plan_alloc_keep(P, out);
    if (st != REMAT_OK)
        return st;
    const remat_graph *g = P->a->g;
    for (uint32_t v = 0; v < g->n_tensors; v++)
        out->keep[v] = g->tensors[v].kind == REMAT_TENSOR_ACTIVATION;
    return remat__plan_params(P, out,
                              "{\"status\": \"optimal\", \"objective\": 0, \"bound\": 0, \"gap\": 0, \"variables\": 0, "
                              "\"constraints\": 0, \"solve_seconds\": %.3f, \"source\": \"%s\"}",
                              remat__exact_now() - t0, why);
}

/* The optimum of the fixed-order class when class_search.c can take the
 * graph and a schedule of it fits: *ran = 1 and out holds it. Anything
 * else leaves *ran = 0 (the program takes over). */
static remat_status class_optimum(remat_planner *P, remat_plan *out, double t0, double limit, int *ran,
                                  uint64_t *lb, remat_schedule *found)
{
    remat_schedule cs;
    remat_schedule_init(&cs);
    uint64_t opt = 0;
    int searched = 0;
    *ran = 0;
    /* 0.15 of the time limit, and states to about 300 MB; what is left
     * goes to the program, which starts from the search's bound and its
     * best schedule (found). */
    remat_class_limits lim = {0, UINT64_MAX, EXACT_CLASS_STATES, t0 + 0.15 * limit, 0, 0};
    remat_status st = remat__class_search_within(P, &lim, &cs, &opt, lb, &searched);
    if (*lb == UINT64_MAX) /* nothing of the class fits: the program says why */
        *lb = 0;
    if (st == REMAT_OK && !searched && opt != UINT64_MAX) {
        remat_schedule t = *found;
        *found = cs;
        cs = t;
    }
    remat_eval e;
    if (st == REMAT_OK && searched && opt != UINT64_MAX && cs.n > 0)
        st = remat__eval_schedule(P, &cs, &e);
    else
        searched = 0;
    if (st == REMAT_OK && searched && remat__fits(P, &e) && e.extra_flops == opt) {
        if ((st = remat__plan_alloc_keep(P, out)) == REMAT_OK) {
            keep_of_schedule(P->a->g, &cs, out->keep);
            out->schedule = cs;
            remat_schedule_init(&cs);
            *ran = 1;
            st = remat__plan_params(
                P, out,
                "{\"status\": \"optimal\", \"objective\": %llu, \"bound\": %llu, \"gap\": 0, \"class\": "
                "\"fixed-order (contains the program's)\", \"variables\": 0, \"constraints\": 0, \"stages\": %u, "
                "\"solve_seconds\": 0, \"seconds\": %.3f, \"time_limit\": %g, \"solver\": \"class search\", "
                "\"source\": \"class-search\", \"warm_start\": \"none\"}",
                (unsigned long long)opt, (unsigned long long)opt, P->a->g->n_ops + P->a->n_bwd,
                remat__exact_now() - t0, limit);
        }
    }
    remat_schedule_destroy(&cs);
    return st;
}

static remat_status exact_glpk(remat_planner *P, remat_plan *out)
{
    const remat_plan_options *o = P->o;
    const remat_graph *g = P->a->g;
    double t0 = remat__exact_now();
    /* A work limit (auto's) replaces the time limit, which then only
     * guards against a pathological machine. */
    double limit = o->time_limit > 0 ? o->time_limit : EXACT_DEFAULT_SECONDS;
    if (P->exact_nodes)
        limit = o->time_limit > 0 && o->time_limit < EXACT_WORK_SAFETY_SECONDS ? o->time_limit
                                                                            : EXACT_WORK_SAFETY_SECONDS;
    double deadline = t0 + limit;
    if (g->n_ops > EXACT_MAX_OPS)
        return remat_err_set(P->err, REMAT_EUNSUPPORTED,
                             "strategy exact: the graph has %u ops; the exact program handles at most %d (its size "
                             "grows with the square of the ops); use auto or another strategy",
                             g->n_ops, EXACT_MAX_OPS);
    if (o->budget_kind == REMAT_BUDGET_NONE)
        return trivial(P, out, "no budget: store-all", t0);
    /* Store-all within the budget: zero extra FLOPs, nothing to prove. */
    uint8_t *all = remat__calloc(g->n_tensors ? g->n_tensors : 1, 1);
    if (!all)
        return remat_err_set(P->err, REMAT_ENOMEM, "out of memory planning");
    for (uint32_t v = 0; v < g->n_tensors; v++)
        all[v] = g->tensors[v].kind == REMAT_TENSOR_ACTIVATION;
    remat_eval e_all;
    remat_status st = remat__eval_keep(P, all, &e_all);
    remat__free(all);
    if (st != REMAT_OK)
        return st;
    if (remat__fits(P, &e_all))
        return trivial(P, out, "store-all fits", t0);
    /* Small graphs: the shortest-path search over the whole fixed-order
     * class, which contains the program's class, finds the optimum of both
     * in a fraction of a second where branch and bound needs seconds
     * (issue 20). Its schedule, replayed, is returned with that claim. */
    uint64_t class_lb = 0;
    remat_schedule class_found;
    remat_schedule_init(&class_found);
    const double t_start = t0;
    if (!P->in_exact && !P->incumbent && !o->exact_milp) {
        int ran = 0;
        st = class_optimum(P, out, t0, limit, &ran, &class_lb, &class_found);
        if (st != REMAT_OK || ran) {
            remat_schedule_destroy(&class_found);
            return st;
        }
        /* The program's phases share what the search left of the limit. */
        double now = remat__exact_now();
        limit -= now - t0;
        t0 = now;
    }

    exact_model M;
    exact_pool pool;
    remat__exact_pool_init(&pool);
    solve_result r0, r;
    memset(&r0, 0, sizeof r0);
    st = build(P, EXACT_MODE_BUDGET, o->budget, &M);
    uint32_t vars = M.m.n_cols, ints = M.m.n_int, rows = M.m.n_rows, resolves = 0;
    size_t nnz = M.m.nnz;
    /* Under a work limit, a program whose root LP cannot finish within it
     * is not handed to GLPK: the LP needs 0.55-1.0 simplex iterations per
     * column on these programs (issue 20's measurements, 700-8,200
     * columns), and an unfinished LP proves and finds nothing. */
    int full = M.fwd_recompute,
        solved = vars <= EXACT_SOLVE_COLS && (!P->exact_lp_iterations || vars <= 2 * P->exact_lp_iterations);
    double fscale = M.fscale, solve_seconds = 0;
    const char *warm_state = "none";
    /* Warm start (issue 20): the caller's incumbent first (auto's best
     * plan), and the best proven bound: the fixed-order class contains the
     * program's, so its bound holds here too, and an incumbent that meets it
     * needs no solver. */
    uint64_t known = P->known_bound > class_lb ? P->known_bound : class_lb;
    int known_infeasible = 0;
    if (st == REMAT_OK && P->incumbent)
        st = remat__exact_offer(P, &M, &pool, P->incumbent, "incumbent", NULL);
    if (st == REMAT_OK && class_found.n > 0)
        st = remat__exact_offer(P, &M, &pool, &class_found, "class-search", NULL);
    remat_schedule_destroy(&class_found);
    if (st == REMAT_OK && !known) {
        uint64_t kb = 0;
        st = remat__bound_extra(P, &kb, &known_infeasible, NULL);
        known = known_infeasible ? 0 : kb;
    }
    int closed = st == REMAT_OK && pool.have && pool.best_e.extra_flops <= known;
    if (st == REMAT_OK && !closed)
        st = remat__exact_greedy(P, &M, &pool, t0 + 0.15 * limit);
    if (st == REMAT_OK && !closed)
        st = remat__exact_strategies(P, &M, &pool, t0 + 0.25 * limit);
    closed = st == REMAT_OK && pool.have && pool.best_e.extra_flops <= known;
    if (closed)
        warm_state = "closed by the bound: no solve";
    if (st == REMAT_OK && solved && !closed) {
        /* Without a fitting plan yet, keep time to find the smallest budget
         * in case this one is infeasible. */
        st = solve_model(P, &M, &pool, pool.have ? deadline : t0 + 0.7 * limit, 1, &r0);
        solve_seconds += r0.seconds;
        warm_state = r0.warm_given      ? (r0.warm_accepted ? "accepted" : "not better")
                     : !pool.have       ? "none"
                     : !r0.warm_checked ? "rejected: outside the program's rows"
                     : r0.finished      ? "unused: solved before branching"
                                        : "unused: stopped before branching";
        /* Over the budget by the solver's tolerance: lower the budget by the
         * overshoot and solve again (same columns), while time remains. */
        uint64_t budget = o->budget;
        r = r0;
        while (st == REMAT_OK && r.have_sol && !remat__fits(P, &r.milp_e) && r.milp_e.valid &&
               resolves < EXACT_MAX_RESOLVES && remat__exact_now() < deadline) {
            uint64_t over = r.milp_e.metric - o->budget;
            if (budget <= over)
                break;
            budget -= over;
            resolves++;
            exact_model M2;
            st = remat__exact_build(P, EXACT_MODE_BUDGET, budget, full, &M2);
            if (st == REMAT_OK)
                st = solve_model(P, &M2, &pool, deadline, 0, &r);
            solve_seconds += r.seconds;
            remat__exact_destroy(&M2);
        }
    }
    remat__exact_destroy(&M);
    int outside = st == REMAT_OK && !pool.have && pool.have_fallback;
    if (st == REMAT_OK && !pool.have && !outside)
        st = infeasible(P, &pool, r0.infeasible, limit, deadline, out);
    if (st != REMAT_OK) {
        remat__exact_pool_destroy(&pool);
        return st;
    }
    if (outside) {
        /* Nothing in the class fits, another strategy's schedule does: return
         * it, with no claim (the program's bound does not apply to it). */
        remat_schedule s = pool.best;
        pool.best = pool.fallback;
        pool.fallback = s;
        pool.best_e = pool.fallback_e;
        pool.source = pool.fallback_source;
    }
    /* The proven bound comes from the solve at the true budget; every plan in
     * the pool lies in the program's class, so it bounds them all. When that
     * solve finished and its plan fit, the pool's best is the optimum (its
     * own objective is rounded by the solver's tolerances). */
    uint64_t objective = pool.best_e.extra_flops;
    uint64_t bound = outside                                                    ? 0
                     : r0.finished && r0.have_sol && remat__fits(P, &r0.milp_e) ? objective
                     : r0.finished || r0.lp_done                                ? round_up_bound(r0.bound * fscale)
                                                                                : 0;
    if (!outside && known > bound)
        bound = known;
    if (bound > objective)
        bound = objective; /* the solver's tolerances */
    double gap = objective ? (double)(objective - bound) / (double)objective : 0.0;
    const char *status = outside && r0.infeasible ? "outside_class"
                         : bound >= objective        ? "optimal"
                         : P->exact_nodes            ? "work_limit"
                                                     : "time_limit";
    st = remat__plan_alloc_keep(P, out);
    if (st == REMAT_OK) {
        keep_of_schedule(g, &pool.best, out->keep);
        out->schedule = pool.best;
        remat_schedule_init(&pool.best);
        st = remat__plan_params(
            P, out,
            "{\"status\": \"%s\", \"objective\": %llu, \"bound\": %llu, \"gap\": %.6g, \"class\": \"%s\", "
            "\"variables\": %u, \"integer_variables\": %u, \"constraints\": %u, \"nonzeros\": %zu, \"stages\": %u, "
            "\"solve_seconds\": %.3f, \"seconds\": %.3f, \"time_limit\": %g, \"solver\": \"%s\", \"source\": \"%s\", "
            "\"warm_start\": \"%s\", \"known_bound\": %llu, \"candidates\": %llu, \"resolves\": %u, \"nodes\": %llu}",
            status, (unsigned long long)objective, (unsigned long long)bound, gap,
            full ? "full" : "no forward recompute", vars, ints, rows, nnz, g->n_ops + P->a->n_bwd, solve_seconds,
            remat__exact_now() - t_start, limit + (t0 - t_start),
            closed        ? "not run: the incumbent meets the bound"
            : !solved     ? "skipped: program too large"
            : r0.finished ? "finished"
            : r0.lp_done  ? "stopped in branch and bound"
                          : "stopped in the LP relaxation",
            pool.source, warm_state, (unsigned long long)known, (unsigned long long)pool.offers, resolves,
            (unsigned long long)r0.nodes);
    }
    remat__exact_pool_destroy(&pool);
    return st;
}

#endif /* REMAT_HAVE_GLPK */

remat_status remat__strategy_exact(remat_planner *P, remat_plan *out)
{
#if REMAT_HAVE_GLPK
    return exact_glpk(P, out);
#else
    (void)out;
    return remat_err_set(P->err, REMAT_EUNSUPPORTED,
                         "strategy exact needs GLPK, and this remat was built without it: install libglpk-dev "
                         "(sh scripts/install-deps.sh) and rebuild");
#endif
}

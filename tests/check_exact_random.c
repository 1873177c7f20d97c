/*
 * check_exact_random.c - exact on tiny random graphs against both oracles:
 * the keep-set optimum (oracle 1, check_exact.c) and a shortest-path search
 * over all schedules with the analysis's FWD and BWD order (any RECOMPUTEs
 * and FREEs in between, in any order, any number of times): a lower bound on
 * exact, which runs in a subclass. Its memory figures come from an
 * accounting written here from the rules in graphs/README.md (gradients from
 * the lifetimes), and the path it finds is replayed by the executor to check
 * that accounting. auto's certificate is checked against the same optimum.
 * Part of the "exact" suite (check_exact.c builds it).
 */
#include "check_exact.h"
#include "plan/planner.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- Oracle 2: shortest paths over all schedules in the fixed step order -------------- */

/* The executor's rules (graphs/README.md), written again: live bytes are
 * leaves + resident storages + live gradients; a FWD/RECOMPUTE allocates its
 * non-resident non-view outputs (a view costs nothing) and adds its
 * workspace; a BWD allocates the gradients its step creates (from the
 * lifetimes: grad_birth) and its workspace, and the gradients whose
 * grad_free is that step go after it. State: steps done and the resident
 * activations. Cost: recompute FLOPs. */
typedef struct {
    const remat_analysis *a;
    const remat_graph *g;
    int kind;
    uint64_t budget;
    uint32_t n_act, act[16];
    uint32_t idx[64]; /* tensor -> bit, or 99 */
    uint64_t leaves;  /* leaf bytes in the metric */
} sp_ctx;

static int in_metric_grad(const sp_ctx *c, uint32_t t)
{
    /* Param gradients are not activation categories; everything else is
     * an activation gradient (inputs with requires_grad too). */
    return !c->kind || c->g->tensors[t].kind != REMAT_TENSOR_PARAM;
}

/* Gradient bytes (in the metric) live during backward step s (its high-water
 * part) and after it. */
static void grad_bytes(const sp_ctx *c, uint32_t s, uint64_t *during, uint64_t *after)
{
    const remat_graph *g = c->g;
    uint64_t d = 0, f = 0;
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        const remat_lifetime *L = &c->a->life[t];
        if (L->grad_birth == REMAT_NONE || !in_metric_grad(c, t))
            continue;
        uint64_t b = g->tensors[t].logical_bytes;
        if (L->grad_birth <= s && s <= L->grad_free)
            d += b;
        if (L->grad_birth <= s && s < L->grad_free)
            f += b;
    }
    *during = d;
    *after = f;
}

static uint64_t storage_bytes(const sp_ctx *c, uint32_t mask)
{
    const remat_graph *g = c->g;
    uint64_t b = 0;
    for (uint32_t i = 0; i < c->n_act; i++) {
        uint32_t t = c->act[i], s = g->tensors[t].storage;
        if (!((mask >> i) & 1) || g->tensors[s].kind != REMAT_TENSOR_ACTIVATION)
            continue;
        /* Count each storage once: at its first resident member. */
        int first = 1;
        for (uint32_t j = 0; j < i; j++)
            if (((mask >> j) & 1) && g->tensors[c->act[j]].storage == s)
                first = 0;
        if (first)
            b += g->tensors[s].bytes;
    }
    return b;
}

static int all_resident(const sp_ctx *c, uint32_t mask, const uint32_t *ts, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        uint32_t t = ts[i];
        if (c->g->tensors[t].kind == REMAT_TENSOR_ACTIVATION && !((mask >> c->idx[t]) & 1))
            return 0;
    }
    return 1;
}

/* Executes op k's forward from mask: returns the high-water mark and the
 * new mask (outputs resident). */
static uint64_t sp_forward(const sp_ctx *c, uint32_t mask, uint32_t k, uint64_t base, uint32_t *out_mask)
{
    const remat_graph *g = c->g;
    const remat_op *op = &g->ops[k];
    const uint32_t *out = remat_op_outputs(g, op);
    uint64_t hw = base + storage_bytes(c, mask) + op->workspace;
    uint32_t m = mask;
    for (uint32_t j = 0; j < op->n_out; j++) {
        uint32_t o = out[j];
        if ((mask >> c->idx[o]) & 1)
            continue;
        if (g->tensors[o].storage == o)
            hw += g->tensors[o].bytes;
        m |= 1u << c->idx[o];
    }
    *out_mask = m;
    return hw;
}

typedef struct {
    uint64_t cost;
    uint32_t prev;  /* predecessor state */
    uint32_t instr; /* kind << 24 | arg */
    uint8_t done;
} sp_node;

/* A binary min-heap of (cost, state) with lazy deletion. */
typedef struct {
    uint64_t *cost;
    uint32_t *state;
    size_t n, cap;
} sp_heap;

static void heap_push(sp_heap *h, uint64_t cost, uint32_t state)
{
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 1024;
        h->cost = realloc(h->cost, h->cap * sizeof *h->cost);
        h->state = realloc(h->state, h->cap * sizeof *h->state);
        ck_assert(h->cost && h->state);
    }
    size_t i = h->n++;
    while (i > 0 && h->cost[(i - 1) / 2] > cost) {
        h->cost[i] = h->cost[(i - 1) / 2];
        h->state[i] = h->state[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->cost[i] = cost;
    h->state[i] = state;
}

static uint32_t heap_pop(sp_heap *h)
{
    uint32_t top = h->state[0];
    uint64_t c = h->cost[--h->n];
    uint32_t st = h->state[h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        uint64_t mc = c;
        if (l < h->n && h->cost[l] < mc)
            m = l, mc = h->cost[l];
        if (l + 1 < h->n && h->cost[l + 1] < mc)
            m = l + 1;
        if (m == i)
            break;
        h->cost[i] = h->cost[m];
        h->state[i] = h->state[m];
        i = m;
    }
    h->cost[i] = c;
    h->state[i] = st;
    return top;
}

/* Least extra FLOPs over all schedules with the fixed FWD/BWD order whose
 * high-water marks (by the rules above, the optimizer step's included) fit;
 * writes the best schedule. */
static uint64_t shortest_path(sp_ctx *c, remat_schedule *best)
{
    const remat_analysis *a = c->a;
    const remat_graph *g = c->g;
    uint32_t n = g->n_ops, T = n + a->n_bwd, S = 1u << c->n_act;
    size_t N = (size_t)(T + 1) * S;
    sp_node *nd = calloc(N, sizeof *nd);
    sp_heap h = {NULL, NULL, 0, 0};
    ck_assert(nd);
    for (size_t i = 0; i < N; i++)
        nd[i].cost = UINT64_MAX;
    nd[0].cost = 0;
    heap_push(&h, 0, 0);
    uint64_t answer = UINT64_MAX;
    size_t goal = SIZE_MAX;
    while (h.n > 0) {
        uint32_t u = heap_pop(&h);
        if (nd[u].done)
            continue;
        nd[u].done = 1;
        uint32_t p = u / S, mask = u % S;
        uint64_t gd = 0, ga = 0, base = c->leaves;
        if (p > n) {
            grad_bytes(c, p - 1, &gd, &ga);
            base += ga; /* gradients live between backward steps */
        }
        if (p == T && base + storage_bytes(c, mask) <= c->budget) {
            answer = nd[u].cost; /* the optimizer step fits too */
            goal = u;
            break;
        }
#define RELAX(np, nm, add, kindarg)                                                                                    \
    do {                                                                                                               \
        uint32_t v_ = (np)*S + (nm);                                                                                   \
        uint64_t c_ = nd[u].cost + (add);                                                                              \
        if (!nd[v_].done && c_ < nd[v_].cost) {                                                                        \
            nd[v_].cost = c_;                                                                                          \
            nd[v_].prev = u;                                                                                           \
            nd[v_].instr = (kindarg);                                                                                  \
            heap_push(&h, c_, v_);                                                                                     \
        }                                                                                                              \
    } while (0)
        /* FREE any resident activation. */
        for (uint32_t i = 0; i < c->n_act; i++)
            if ((mask >> i) & 1)
                RELAX(p, mask & ~(1u << i), 0, (uint32_t)REMAT_I_FREE << 24 | c->act[i]);
        if (p == T)
            continue;
        /* RECOMPUTE any op that has run forward, is recomputable, has its
         * inputs and a missing output. */
        for (uint32_t q = 0; q < (p < n ? p : n); q++) {
            uint32_t k = a->order[q];
            const remat_op *op = &g->ops[k];
            if (!op->recomputable || !all_resident(c, mask, remat_op_inputs(g, op), op->n_in))
                continue;
            uint32_t nm;
            uint64_t hw = sp_forward(c, mask, k, base, &nm);
            if (nm != mask && hw <= c->budget)
                RELAX(p, nm, op->flops, (uint32_t)REMAT_I_RECOMPUTE << 24 | k);
        }
        /* The next step: FWD, or BWD with its gradients and workspace. */
        if (p < n) {
            uint32_t k = a->order[p];
            const remat_op *op = &g->ops[k];
            uint32_t nm;
            if (all_resident(c, mask, remat_op_inputs(g, op), op->n_in) &&
                sp_forward(c, mask, k, base, &nm) <= c->budget)
                RELAX(p + 1, nm, 0, (uint32_t)REMAT_I_FWD << 24 | k);
        } else {
            uint32_t k = a->bwd_order[p - n];
            const remat_op *op = &g->ops[k];
            grad_bytes(c, p, &gd, &ga);
            uint64_t hw = c->leaves + gd + op->bwd_workspace + storage_bytes(c, mask);
            if (all_resident(c, mask, remat_op_saves(g, op), op->n_save) && hw <= c->budget)
                RELAX(p + 1, mask, 0, (uint32_t)REMAT_I_BWD << 24 | k);
        }
#undef RELAX
    }
    if (goal != SIZE_MAX) {
        /* Walk back, then emit forwards. */
        uint32_t len = 0, *path = malloc(N * sizeof *path);
        ck_assert(path);
        for (size_t v = goal; v != 0; v = nd[v].prev)
            path[len++] = nd[v].instr;
        while (len-- > 0)
            ck_assert_int_eq(remat_schedule_push(best, (remat_instr_kind)(path[len] >> 24), path[len] & 0xffffff),
                             REMAT_OK);
        free(path);
    }
    free(h.cost);
    free(h.state);
    free(nd);
    return answer;
}

static void sp_init(sp_ctx *c, const remat_analysis *a, int kind, uint64_t budget)
{
    const remat_graph *g = a->g;
    memset(c, 0, sizeof *c);
    c->a = a;
    c->g = g;
    c->kind = kind;
    c->budget = budget;
    ck_assert_uint_lt(g->n_tensors, 64);
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        c->idx[t] = 99;
        if (g->tensors[t].kind == REMAT_TENSOR_ACTIVATION) {
            c->idx[t] = c->n_act;
            c->act[c->n_act++] = t;
        } else if (!kind) {
            c->leaves += g->tensors[t].bytes;
        }
    }
}

/* ---- Tests -------------------------------------------------------------------------- */

typedef struct {
    uint32_t cases, strictly_better, equal, below_keep_min_feasible, infeasible, sp_checked, sp_equal, sp_only;
    uint32_t cert_checked, cert_optimal;
} tally;

/* auto's certificate against the optimum of the shortest-path search over
 * every schedule of the class (sp; UINT64_MAX: none fits): bound.c's bound
 * never exceeds it, and auto's lower_bound equals it (and so does its
 * plan) wherever auto's own search of the class ran. */
static void check_certificate(const remat_analysis *a, int kind, uint64_t budget, uint64_t sp, tally *tl)
{
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.budget_kind = kind ? REMAT_BUDGET_ACTIVATION : REMAT_BUDGET_TOTAL;
    o.budget = budget;
    o.time_limit = 0.2;
    remat_err err;
    remat_err_init(&err);
    remat_planner P;
    memset(&P, 0, sizeof P);
    P.a = a;
    P.o = &o;
    P.err = &err;
    uint64_t kb = 0;
    int infeasible = 0;
    ck_assert_int_eq(remat__bound_extra(&P, &kb, &infeasible, NULL), REMAT_OK);
    if (sp != UINT64_MAX)
        ck_assert_msg(!infeasible && kb <= sp, "bound %llu (infeasible %d) above the class optimum %llu",
                      (unsigned long long)kb, infeasible, (unsigned long long)sp);
    remat_plan plan;
    remat_replay_result r;
    remat_status st = remat_plan_make(a, &o, &plan, &r, &err);
    if (sp == UINT64_MAX) {
        ck_assert_msg(st != REMAT_OK, "auto fits a budget no schedule of the class meets");
    } else {
        ck_assert_msg(st == REMAT_OK, "auto at %llu: %s", (unsigned long long)budget, err.msg);
        double plb = param_num(plan.params_json, "lower_bound");
        ck_assert_msg(plb >= 0 && plb <= (double)sp, "auto's lower_bound %.0f above the class optimum %llu",
                      plb, (unsigned long long)sp);
        tl->cert_checked++;
        if (strstr(plan.params_json, "\"class-search\"")) {
            ck_assert_msg(plb == (double)sp && r.flops_recompute == sp,
                          "auto's class search: bound %.0f, plan %llu, exhaustive optimum %llu", plb,
                          (unsigned long long)r.flops_recompute, (unsigned long long)sp);
            ck_assert_msg(strstr(plan.params_json, "\"gap\": \"optimal\"") != NULL, "%s", plan.params_json);
            tl->cert_optimal++;
        }
    }
    if (st == REMAT_OK || (st == REMAT_EINFEASIBLE && r.recompute_counts)) {
        remat_replay_result_destroy(&r);
        remat_plan_destroy(&plan);
    }
}

/* One graph, both budget kinds, budgets from the keep-set minimum to just
 * below store-all. */
static void check_graph(const char *json, int with_sp, tally *tl)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(json, &g);
    keep_table kt;
    keep_table_build(a, &kt);
    for (int kind = 0; kind < 2; kind++) {
        uint64_t lo = keep_min_metric(&kt, kind), hi = kt.metric[kind][kt.sets - 1];
        ck_assert(kt.valid[kt.sets - 1]); /* store-all */
        uint64_t budgets[5] = {lo, lo + (hi - lo) / 3, lo + 2 * (hi - lo) / 3, hi > lo ? hi - 1 : hi,
                               lo > 1 ? lo - 1 : 0};
        for (int b = 0; b < 5; b++) {
            uint64_t budget = budgets[b], opt = keep_opt(&kt, kind, budget);
            exact_run x = run_exact(a, kind, budget, 20);
            tl->cases++;
            if (opt == UINT64_MAX) {
                /* Below every keep set: exact may still find a plan (its
                 * class is richer), or must say it is infeasible. */
                ck_assert_msg(x.st == REMAT_OK || x.st == REMAT_EINFEASIBLE, "budget %llu: %s",
                              (unsigned long long)budget, x.msg);
                if (x.st == REMAT_OK)
                    tl->below_keep_min_feasible++;
                else
                    tl->infeasible++;
            } else {
                ck_assert_msg(x.st == REMAT_OK, "budget %llu (keep-set optimum %llu): %s\n%s",
                              (unsigned long long)budget, (unsigned long long)opt, x.msg, json);
                ck_assert_msg(x.extra <= opt, "exact %llu > keep-set optimum %llu at budget %llu\n%s",
                              (unsigned long long)x.extra, (unsigned long long)opt, (unsigned long long)budget, json);
                ck_assert_str_eq(x.status, "optimal");
                ck_assert(x.gap == 0);
                tl->strictly_better += x.extra < opt;
                tl->equal += x.extra == opt;
            }
            if (!with_sp)
                continue;
            /* The shortest path over every schedule in the fixed step order is
             * a lower bound, and its path replays as accounted. */
            sp_ctx c;
            sp_init(&c, a, kind, budget);
            remat_schedule s;
            remat_schedule_init(&s);
            uint64_t lb = shortest_path(&c, &s);
            if (lb != UINT64_MAX) {
                remat_replay_result r;
                remat_err err;
                remat_err_init(&err);
                ck_assert_int_eq(remat_replay(a, &s, NULL, NULL, &r, &err), REMAT_OK);
                ck_assert_msg(r.valid, "shortest path invalid: %s", err.msg);
                ck_assert_uint_le(kind ? r.activation_peak : r.peak_bytes, budget);
                ck_assert_uint_eq(r.flops_recompute, lb);
                remat_replay_result_destroy(&r);
            }
            check_certificate(a, kind, budget, lb, tl);
            if (x.st == REMAT_OK) {
                ck_assert_msg(lb != UINT64_MAX && lb <= x.extra, "exact %llu below the all-schedule optimum %llu",
                              (unsigned long long)x.extra, (unsigned long long)lb);
                tl->sp_checked++;
                tl->sp_equal += lb == x.extra;
            } else if (lb != UINT64_MAX) {
                tl->sp_only++; /* a schedule outside exact's class fits */
            }
            remat_schedule_destroy(&s);
        }
    }
    keep_table_destroy(&kt);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}

static void random_graphs(int shape, uint64_t seed, int count, uint32_t min_ops, uint32_t max_ops, int with_sp,
                          const char *label)
{
    uint64_t rng = seed;
    tally tl = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    jbuf *b = malloc(sizeof *b);
    ck_assert(b);
    for (int i = 0; i < count; i++) {
        uint32_t n = min_ops + rnd(&rng, max_ops - min_ops + 1);
        gen_graph(&rng, shape, n, b);
        check_graph(b->buf, with_sp, &tl);
    }
    free(b);
    printf("exact vs keep sets (%s): %u cases, %u equal, %u strictly better, %u feasible below every keep set, "
           "%u infeasible; vs all schedules: %u checked, %u equal, %u feasible only outside exact's class; "
           "auto's certificate: %u checked, %u proved optimal by its class search\n",
           label, tl.cases, tl.equal, tl.strictly_better, tl.below_keep_min_feasible, tl.infeasible, tl.sp_checked,
           tl.sp_equal, tl.sp_only, tl.cert_checked, tl.cert_optimal);
    if (with_sp)
        ck_assert_uint_gt(tl.cert_optimal, 0);
    ck_assert_uint_gt(tl.equal + tl.strictly_better, 0);
}

START_TEST(exact_should_be_at_most_keep_set_optimum_on_plain_chains)
{
    random_graphs(SHAPE_PLAIN_CHAIN, 11, 6, 4, 8, 1, "plain chains");
}
END_TEST

START_TEST(exact_should_be_at_most_keep_set_optimum_on_chains)
{
    random_graphs(SHAPE_CHAIN, 23, 10, 4, 8, 1, "chains");
}
END_TEST

START_TEST(exact_should_be_at_most_keep_set_optimum_on_dags)
{
    random_graphs(SHAPE_DAG, 37, 10, 4, 8, 1, "dags");
}
END_TEST

/* The random-graph tests of the exact suite's one case (check_exact.c). */
void exact_random_tests(TCase *tc)
{
    tcase_add_test(tc, exact_should_be_at_most_keep_set_optimum_on_plain_chains);
    tcase_add_test(tc, exact_should_be_at_most_keep_set_optimum_on_chains);
    tcase_add_test(tc, exact_should_be_at_most_keep_set_optimum_on_dags);
}

/*
 * check_dtr.c - the dtr strategy (dynamic tensor rematerialization).
 *
 * Evidence:
 *   1. a hand-derived case: a four-op chain whose evictions and rebuilds at
 *      two budgets are worked out step by step in a comment from the
 *      accounting rules and DTR's eviction rule, compared instruction by
 *      instruction for each score, and the budget below its floor; a
 *      dropout-like op that cannot be recomputed, never rebuilt;
 *   2. the guarantees, on every bundled graph and on random layered DAGs
 *      generated here (multi-output ops, views of activations, of leaves and
 *      of views, ops that cannot be recomputed, saves of own outputs, of
 *      nothing, of an earlier tensor, workspace): at 0.5, 0.7 and 0.9 of the
 *      store-all figure, under both kinds of budget and every score, a
 *      returned plan replays valid (a second, independent replay) and within
 *      its budget; an infeasible budget is REMAT_EINFEASIBLE naming a budget
 *      that dtr then meets; at or above the store-all figure nothing is
 *      evicted and nothing recomputed;
 *   3. numeric replay: every tensor a DTR plan rebuilds is bit-identical to
 *      its first computation;
 *   4. the option's errors, and clean failure on every out-of-memory.
 * DTR itself checks, on every run, that its simulated peak equals the
 * replayed one (an internal error otherwise), so every plan made here also
 * tests that its accounting mirrors the executor's.
 */
#include "test_util.h"
#include "plan/planner.h"
#include "util/util_internal.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const scores[] = {"h_dtr", "eq", "local", NULL}; /* NULL: the default, best of all */

static uint64_t metric_of(const remat_replay_result *r, remat_budget_kind kind)
{
    return kind == REMAT_BUDGET_ACTIVATION ? r->activation_peak : r->peak_bytes;
}

static void store_all_figures(const remat_analysis *a, remat_budget_kind kind, uint64_t *metric)
{
    remat_schedule s;
    remat_schedule_init(&s);
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_schedule_store_all(a, &s, &err), REMAT_OK);
    remat_replay_result r;
    ck_assert_int_eq(remat_replay(a, &s, NULL, NULL, &r, &err), REMAT_OK);
    ck_assert(r.valid);
    *metric = metric_of(&r, kind);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
}

/* The last "N B" of a message: the exact bytes of the budget it names
 * (remat_format_bytes writes "300 B", or "1.00 KiB (1024 B)"). */
static uint64_t named_bytes(const char *msg)
{
    const char *p = NULL, *q = msg;
    while ((q = strstr(q, " B")) != NULL) {
        if (q > msg && q[-1] >= '0' && q[-1] <= '9')
            p = q;
        q++;
    }
    ck_assert_msg(p != NULL, "message '%s' names no byte count", msg);
    while (p > msg && p[-1] >= '0' && p[-1] <= '9')
        p--;
    return strtoull(p, NULL, 10);
}

typedef struct {
    unsigned made, infeasible, rebuilt;
} tally;

/* Plans with dtr and checks every guarantee; returns the status. */
static remat_status plan_and_check(const remat_analysis *a, remat_budget_kind kind, uint64_t budget,
                                   const char *score, const remat_exec_extras *extras, remat_plan *keep_plan,
                                   tally *tl)
{
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.strategy = "dtr";
    o.budget_kind = kind;
    o.budget = budget;
    o.dtr_score = score;
    if (extras)
        o.extras = *extras;
    remat_plan plan;
    remat_replay_result r;
    remat_err err;
    remat_err_init(&err);
    remat_status st = remat_plan_make(a, &o, &plan, &r, &err);
    const char *gname = a->g->name;
    if (st == REMAT_OK) {
        ck_assert_msg(r.valid, "%s: replay invalid", gname);
        ck_assert_str_eq(plan.strategy, "dtr");
        ck_assert_ptr_nonnull(plan.params_json);
        if (kind != REMAT_BUDGET_NONE)
            ck_assert_msg(metric_of(&r, kind) <= budget, "%s: %llu over budget %llu", gname,
                          (unsigned long long)metric_of(&r, kind), (unsigned long long)budget);
        /* A second replay of the schedule, owned by nobody in the planner. */
        remat_replay_result r2;
        remat_err e2;
        remat_err_init(&e2);
        ck_assert_int_eq(remat_replay(a, &plan.schedule, &o.extras, NULL, &r2, &e2), REMAT_OK);
        ck_assert_msg(r2.valid, "%s: %s", gname, e2.msg);
        ck_assert_uint_eq(r2.peak_bytes, r.peak_bytes);
        ck_assert_uint_eq(r2.activation_peak, r.activation_peak);
        ck_assert_uint_eq(r2.flops_recompute, r.flops_recompute);
        /* Outputs of ops that cannot be recomputed are never rebuilt. */
        for (uint32_t k = 0; k < a->g->n_ops; k++)
            if (!a->g->ops[k].recomputable)
                ck_assert_uint_eq(r2.recompute_counts[k], 0);
        if (tl) {
            tl->made++;
            tl->rebuilt += r.flops_recompute > 0;
        }
        remat_replay_result_destroy(&r2);
    } else {
        ck_assert_msg(st == REMAT_EINFEASIBLE, "%s: status %s: %s", gname, remat_status_str(st), err.msg);
        ck_assert_msg_contains(&err, "strategy dtr cannot meet");
        ck_assert_msg_contains(&err, "smallest");
        uint64_t named = named_bytes(err.msg);
        ck_assert_msg(named > budget, "%s: names %llu, not above %llu", gname, (unsigned long long)named,
                      (unsigned long long)budget);
        /* The refused plan, left with the caller, is the one that reaches it. */
        if (r.recompute_counts) {
            ck_assert(r.valid);
            ck_assert_uint_eq(metric_of(&r, kind), named);
        }
        /* The budget the message names is one dtr meets. */
        remat_status again = plan_and_check(a, kind, named, score, extras, NULL, NULL);
        ck_assert_msg(again == REMAT_OK, "%s: dtr fails the budget %llu it named", gname, (unsigned long long)named);
        if (tl)
            tl->infeasible++;
    }
    if (keep_plan && st == REMAT_OK) {
        *keep_plan = plan;
        remat_replay_result_destroy(&r);
        return st;
    }
    remat_replay_result_destroy(&r);
    remat_plan_destroy(&plan);
    return st;
}

/* At 0.5, 0.7, 0.9 of the store-all figure, each kind, each score; then at
 * the store-all figure and above it, where nothing may be evicted. */
static void check_graph(const remat_analysis *a, tally *tl)
{
    static const remat_budget_kind kinds[] = {REMAT_BUDGET_ACTIVATION, REMAT_BUDGET_TOTAL};
    static const double fractions[] = {0.5, 0.7, 0.9};
    for (size_t k = 0; k < 2; k++) {
        uint64_t sa;
        store_all_figures(a, kinds[k], &sa);
        for (size_t f = 0; f < 3; f++)
            for (size_t s = 0; s < sizeof scores / sizeof scores[0]; s++)
                plan_and_check(a, kinds[k], (uint64_t)((double)sa * fractions[f]), scores[s], NULL, NULL, tl);
        for (uint64_t extra = 0; extra <= 4096; extra += 4096) {
            remat_plan plan;
            remat_status st = plan_and_check(a, kinds[k], sa + extra, NULL, NULL, &plan, NULL);
            ck_assert_msg(st == REMAT_OK, "%s: dtr fails the store-all %s figure %llu + %llu", a->g->name,
                          kinds[k] == REMAT_BUDGET_TOTAL ? "total" : "activation", (unsigned long long)sa,
                          (unsigned long long)extra);
            for (size_t i = 0; i < plan.schedule.n; i++)
                ck_assert_msg(plan.schedule.ins[i].kind != REMAT_I_RECOMPUTE,
                              "%s: a recompute at a budget >= the store-all figure", a->g->name);
            remat_plan_destroy(&plan);
        }
    }
    /* No budget: DTR evicts nothing. */
    remat_plan plan;
    ck_assert_int_eq(plan_and_check(a, REMAT_BUDGET_NONE, 0, NULL, NULL, &plan, NULL), REMAT_OK);
    for (size_t i = 0; i < plan.schedule.n; i++)
        ck_assert(plan.schedule.ins[i].kind != REMAT_I_RECOMPUTE);
    remat_plan_destroy(&plan);
}

/* ---- 1. By hand ---------------------------------------------------------- */

/* x (input), w (param) -> a = f(x, w) -> b = f(a) -> c = f(b) -> loss = f(c),
 * every activation and gradient 100 B, each op saving its inputs (a: x, w),
 * flops a 10, b 20, c 30, loss 1. Activation budget: only activations,
 * recomputed ones, activation gradients and workspace count. The clock
 * counts op instructions; staleness = clock - last access (read or write).
 *
 * Store-all: FWD a 100, b 200, c 300, loss 400 (loss is read by nothing:
 * freed after), BWD loss = live 300 + seed 100 + grad c 100 = 500: the peak.
 *
 * Budget 400. FWD a..loss fit (400). BWD loss (clock 4) needs 500: evict
 * one of a, b (c is its save): a was last read by FWD b at clock 1
 * (staleness 3), b by FWD c at clock 2 (staleness 2); local scores
 * 10/(100*3) < 20/(100*2), and neither has an evicted neighbour, so every
 * score evicts a. Then BWD c (b resident), BWD b needs a: RECOMPUTE a
 * (100 + 100 live), BWD b, FREE a, BWD a. Extra FLOPs 10, peak 400.
 *
 * Budget 300. FWD loss needs 400 at clock 3: a (staleness 2, 10/200) goes
 * before b (staleness 1, 20/100). BWD loss needs b, c (200) + 200 of
 * gradients: evict b (c is saved). BWD c needs b: RECOMPUTE a (gc + a =
 * 200), RECOMPUTE b (300); BWD c needs gc + b + gb = 300 on top of a: evict
 * a (the only candidate: b is its save). BWD b needs a: RECOMPUTE a again,
 * BWD b (gb + a + ga = 300), BWD a. Extra FLOPs 10 + 20 + 10 = 40, peak 300. */
static const char *chain4 =
    "{\"format\": \"remat-graph\", \"version\": 1, \"name\": \"chain4\","
    " \"inputs\": [{\"id\": \"x\", \"bytes\": 100}], \"params\": [{\"id\": \"w\", \"bytes\": 100}],"
    " \"ops\": ["
    "  {\"id\": \"a\", \"op\": \"f\", \"inputs\": [\"x\", \"w\"], \"bytes\": 100, \"flops\": 10},"
    "  {\"id\": \"b\", \"op\": \"f\", \"inputs\": [\"a\"], \"bytes\": 100, \"flops\": 20},"
    "  {\"id\": \"c\", \"op\": \"f\", \"inputs\": [\"b\"], \"bytes\": 100, \"flops\": 30},"
    "  {\"id\": \"loss\", \"op\": \"f\", \"inputs\": [\"c\"], \"bytes\": 100, \"flops\": 1}],"
    " \"outputs\": [\"loss\"]}";

static void expect_schedule(const remat_graph *g, const remat_schedule *s, const char *const *want)
{
    size_t n = 0;
    while (want[n])
        n++;
    char buf[128], all[2048] = "";
    for (size_t i = 0; i < s->n; i++) {
        strncat(all, remat_instr_text(g, s->ins[i], buf, sizeof buf), sizeof all - strlen(all) - 1);
        strncat(all, "; ", sizeof all - strlen(all) - 1);
    }
    ck_assert_msg(s->n == n, "got %zu instructions, want %zu: %s", s->n, n, all);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(strcmp(remat_instr_text(g, s->ins[i], buf, sizeof buf), want[i]) == 0,
                      "instruction %zu is '%s', want '%s' (schedule: %s)", i, buf, want[i], all);
}

START_TEST(dtr_should_evict_the_stalest_cheapest_tensor_by_hand)
{
    static const char *const at400[] = {"FWD a", "FWD b",       "FWD c", "FWD loss", "FREE loss",
                                        "FREE a", "BWD loss",   "FREE c", "BWD c",    "FREE b",
                                        "RECOMPUTE a", "BWD b", "FREE a", "BWD a",    "OPT", NULL};
    static const char *const at300[] = {"FWD a",       "FWD b",       "FWD c",  "FREE a", "FWD loss",
                                        "FREE loss",   "FREE b",      "BWD loss", "FREE c", "RECOMPUTE a",
                                        "RECOMPUTE b", "FREE a",      "BWD c",  "FREE b", "RECOMPUTE a",
                                        "BWD b",       "FREE a",      "BWD a",  "OPT",    NULL};
    remat_graph *g;
    remat_analysis *a = t_analyze(chain4, &g);
    uint64_t sa;
    store_all_figures(a, REMAT_BUDGET_ACTIVATION, &sa);
    ck_assert_uint_eq(sa, 500);
    for (size_t s = 0; s < sizeof scores / sizeof scores[0]; s++) {
        remat_plan plan;
        ck_assert_int_eq(plan_and_check(a, REMAT_BUDGET_ACTIVATION, 400, scores[s], NULL, &plan, NULL), REMAT_OK);
        expect_schedule(g, &plan.schedule, at400);
        ck_assert_uint_eq(plan.keep[t_tensor(g, "a")], 0); /* rebuilt */
        ck_assert_uint_eq(plan.keep[t_tensor(g, "b")], 1);
        remat_plan_destroy(&plan);
        ck_assert_int_eq(plan_and_check(a, REMAT_BUDGET_ACTIVATION, 300, scores[s], NULL, &plan, NULL), REMAT_OK);
        expect_schedule(g, &plan.schedule, at300);
        remat_plan_destroy(&plan);
    }
    /* The figures of the two plans, from the replay. */
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.strategy = "dtr";
    o.budget_kind = REMAT_BUDGET_ACTIVATION;
    o.budget = 300;
    remat_plan plan;
    remat_replay_result r;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_plan_make(a, &o, &plan, &r, &err), REMAT_OK);
    ck_assert_uint_eq(r.flops_recompute, 40);
    ck_assert_uint_eq(r.activation_peak, 300);
    ck_assert_ptr_nonnull(strstr(plan.params_json, "\"limit\": 300"));
    remat_replay_result_destroy(&r);
    remat_plan_destroy(&plan);
    o.budget = 400;
    ck_assert_int_eq(remat_plan_make(a, &o, &plan, &r, &err), REMAT_OK);
    ck_assert_uint_eq(r.flops_recompute, 10);
    ck_assert_uint_eq(r.activation_peak, 400);
    remat_replay_result_destroy(&r);
    remat_plan_destroy(&plan);
    /* Below the floor (BWD c holds b, its gradient and gc: 300), the error
     * names 300, which the plan above meets. */
    o.budget = 250;
    ck_assert_int_eq(remat_plan_make(a, &o, &plan, &r, &err), REMAT_EINFEASIBLE);
    ck_assert_msg_contains(&err, "is 300 B");
    remat_replay_result_destroy(&r); /* a refused plan is left with the caller */
    remat_plan_destroy(&plan);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* A non-recomputable op's output is never evicted, and is held while a
 * tensor rebuilt from it may be needed: d (dropout, not recomputable) feeds
 * m (large, cheap), which DTR evicts under pressure and rebuilds from d. */
START_TEST(dtr_should_never_evict_what_cannot_be_recomputed)
{
    static const char *json =
        "{\"format\": \"remat-graph\", \"version\": 1, \"name\": \"drop\","
        " \"inputs\": [{\"id\": \"x\", \"bytes\": 100}], \"params\": [{\"id\": \"w\", \"bytes\": 100}],"
        " \"ops\": ["
        "  {\"id\": \"h\", \"op\": \"f\", \"inputs\": [\"x\", \"w\"], \"bytes\": 100, \"flops\": 10},"
        "  {\"id\": \"d\", \"op\": \"dropout\", \"inputs\": [\"h\"], \"bytes\": 100, \"flops\": 1,"
        "   \"recomputable\": false, \"saves\": []},"
        "  {\"id\": \"m\", \"op\": \"relu\", \"inputs\": [\"d\"], \"bytes\": 200, \"flops\": 1, \"saves\": [\"m\"]},"
        "  {\"id\": \"p\", \"op\": \"f\", \"inputs\": [\"m\"], \"bytes\": 300, \"flops\": 50},"
        "  {\"id\": \"q\", \"op\": \"f\", \"inputs\": [\"p\"], \"bytes\": 300, \"flops\": 50},"
        "  {\"id\": \"r\", \"op\": \"f\", \"inputs\": [\"q\"], \"bytes\": 300, \"flops\": 50},"
        "  {\"id\": \"loss\", \"op\": \"sum\", \"inputs\": [\"r\"], \"bytes\": 4, \"flops\": 1, \"saves\": []}],"
        " \"outputs\": [\"loss\"]}";
    remat_graph *g;
    remat_analysis *a = t_analyze(json, &g);
    uint64_t sa;
    store_all_figures(a, REMAT_BUDGET_ACTIVATION, &sa);
    tally tl = {0, 0, 0};
    ck_assert_uint_eq(sa, 1400);
    for (uint64_t b = sa; b >= 800; b -= 8)
        for (size_t s = 0; s < sizeof scores / sizeof scores[0]; s++)
            plan_and_check(a, REMAT_BUDGET_ACTIVATION, b, scores[s], NULL, NULL, &tl);
    ck_assert_uint_gt(tl.rebuilt, 0);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* A held non-recomputable output goes once nothing can rebuild from it,
 * not at the end of the step. The loss is saved by the first op (as
 * scripts/remat_torch.py writes a joint graph: the caller holds the loss
 * while backward runs), so it is read by the last backward step; every op
 * upstream of it, the dropout d included, is its ancestor. The only tensor
 * rebuilt from d is m (read by BWD m, and by BWD p's rebuild of p earlier):
 * after BWD m nothing reads d, directly or to rebuild something, whatever
 * DTR evicts, because the loss itself (the caller's) is never evicted. By
 * hand: FREE d lies between BWD m and BWD d, ahead of BWD h (the last). */
START_TEST(dtr_should_free_a_held_output_once_nothing_can_rebuild_from_it)
{
    static const char *json =
        "{\"format\": \"remat-graph\", \"version\": 1, \"name\": \"drop_loss\","
        " \"inputs\": [{\"id\": \"x\", \"bytes\": 100}], \"params\": [{\"id\": \"w\", \"bytes\": 100}],"
        " \"ops\": ["
        "  {\"id\": \"h\", \"op\": \"f\", \"inputs\": [\"x\", \"w\"], \"bytes\": 100, \"flops\": 10,"
        "   \"saves\": [\"x\", \"w\", \"loss\"]},"
        "  {\"id\": \"d\", \"op\": \"dropout\", \"inputs\": [\"h\"], \"bytes\": 100, \"flops\": 1,"
        "   \"recomputable\": false, \"saves\": []},"
        "  {\"id\": \"m\", \"op\": \"relu\", \"inputs\": [\"d\"], \"bytes\": 200, \"flops\": 1, \"saves\": [\"m\"]},"
        "  {\"id\": \"p\", \"op\": \"f\", \"inputs\": [\"m\"], \"bytes\": 300, \"flops\": 50},"
        "  {\"id\": \"q\", \"op\": \"f\", \"inputs\": [\"p\"], \"bytes\": 300, \"flops\": 50},"
        "  {\"id\": \"r\", \"op\": \"f\", \"inputs\": [\"q\"], \"bytes\": 300, \"flops\": 50},"
        "  {\"id\": \"loss\", \"op\": \"sum\", \"inputs\": [\"r\"], \"bytes\": 4, \"flops\": 1, \"saves\": []}],"
        " \"outputs\": [\"loss\"]}";
    remat_graph *g;
    remat_analysis *a = t_analyze(json, &g);
    uint64_t sa;
    store_all_figures(a, REMAT_BUDGET_ACTIVATION, &sa);
    ck_assert_uint_eq(sa, 1404);
    unsigned held = 0;
    char buf[128];
    for (uint64_t b = sa; b >= 1100; b -= 4)
        for (size_t k = 0; k < sizeof scores / sizeof scores[0]; k++) {
            remat_plan plan;
            if (plan_and_check(a, REMAT_BUDGET_ACTIVATION, b, scores[k], NULL, &plan, NULL) != REMAT_OK)
                continue;
            if (strstr(plan.params_json, "\"fixed_outputs\": \"hold\"")) {
                size_t free_d = SIZE_MAX, bwd_m = SIZE_MAX, bwd_d = SIZE_MAX;
                for (size_t i = 0; i < plan.schedule.n; i++) {
                    const char *t = remat_instr_text(g, plan.schedule.ins[i], buf, sizeof buf);
                    if (strcmp(t, "FREE d") == 0)
                        free_d = i;
                    else if (strcmp(t, "BWD m") == 0)
                        bwd_m = i;
                    else if (strcmp(t, "BWD d") == 0)
                        bwd_d = i;
                }
                ck_assert_msg(bwd_m < free_d && free_d < bwd_d, "budget %llu: FREE d at %zu, BWD m %zu, BWD d %zu",
                              (unsigned long long)b, free_d, bwd_m, bwd_d);
                held++;
            }
            remat_plan_destroy(&plan);
        }
    ck_assert_uint_gt(held, 0);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* ---- 2. Bundled graphs -------------------------------------------------- */

START_TEST(dtr_should_fit_or_name_a_met_budget_on_every_bundled_graph)
{
    DIR *d = opendir("graphs");
    ck_assert_msg(d != NULL, "run from the repository root (graphs/ not found)");
    struct dirent *e;
    unsigned graphs = 0;
    tally tl = {0, 0, 0};
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".json") != 0)
            continue;
        char path[512];
        snprintf(path, sizeof path, "graphs/%s", e->d_name);
        remat_graph *g = NULL;
        remat_analysis *a = NULL;
        remat_err err;
        remat_err_init(&err);
        ck_assert_msg(remat_graph_load_file(path, &g, &err) == REMAT_OK, "%s: %s", path, err.msg);
        ck_assert_msg(remat_analyze(g, &a, &err) == REMAT_OK, "%s: %s", path, err.msg);
        check_graph(a, &tl);
        graphs++;
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
    }
    closedir(d);
    ck_assert_uint_ge(graphs, 2);
    /* Not vacuous: most budgets are met, and some only by recomputing. */
    ck_assert_uint_gt(tl.made, tl.infeasible);
    ck_assert_uint_gt(tl.rebuilt, 0);
}
END_TEST

/* ---- 2. Random layered DAGs ---------------------------------------------- */

typedef struct {
    char *s;
    size_t n, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        ck_assert(k >= 0);
        if ((size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        }
        b->cap = b->cap * 2 + (size_t)k + 64;
        b->s = realloc(b->s, b->cap);
        ck_assert_ptr_nonnull(b->s);
    }
}

static uint64_t rnd(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint32_t below(uint64_t *x, uint32_t n)
{
    return (uint32_t)(rnd(x) % n);
}

/* A random layered DAG: `layers` layers of up to `width` ops, each reading
 * one to three tensors of the last two layers (or the input, or a param).
 * One op in eight has two or three outputs, one in eight is a view of one
 * of its inputs (an activation, a leaf or a view), one in fifteen cannot be
 * recomputed; saves are the default, nothing, the op's own first output, or
 * its first input and any earlier tensor; some ops have workspace. A sum
 * "loss" reads every tensor nothing else reads. */
static char *random_graph(uint64_t seed, uint32_t layers, uint32_t width)
{
    uint64_t x = seed;
    sbuf b = {malloc(4096), 0, 4096};
    ck_assert_ptr_nonnull(b.s);
    uint32_t cap = layers * width * 3 + 8, nt = 0, *layer_of = calloc(cap, sizeof *layer_of);
    uint8_t *read = calloc(cap, 1);
    ck_assert(layer_of && read);
    sb_printf(&b, "{\"format\": \"remat-graph\", \"version\": 1, \"name\": \"rand%llu\",",
              (unsigned long long)seed);
    sb_printf(&b, " \"inputs\": [{\"id\": \"x\", \"bytes\": %u}], \"params\": [", 64 + below(&x, 512));
    uint32_t n_params = 1 + below(&x, 3);
    for (uint32_t p = 0; p < n_params; p++)
        sb_printf(&b, "%s{\"id\": \"w%u\", \"bytes\": %u}", p ? ", " : "", p, 64 + below(&x, 256));
    sb_printf(&b, "], \"ops\": [");
    /* Tensor names: t<i>; layer_of[i] = layer + 1 (0 for none yet). */
    uint32_t op_id = 0;
    for (uint32_t L = 0; L < layers; L++) {
        uint32_t w = 1 + below(&x, width);
        for (uint32_t j = 0; j < w; j++, op_id++) {
            /* Candidate inputs: tensors of layers L-1 and L-2 (never this
             * layer's, to keep the DAG layered), else x. */
            uint32_t pool[64], np = 0;
            for (uint32_t t = 0; t < nt && np < 64; t++)
                if (layer_of[t] + 2 >= L + 1 && layer_of[t] <= L)
                    pool[np++] = t;
            uint32_t n_in = 1 + below(&x, 3), in[4], k = 0;
            char names[4][16];
            for (uint32_t i = 0; i < n_in; i++) {
                int dup = 0;
                if (np == 0 || below(&x, 6) == 0) {
                    snprintf(names[k], sizeof names[k], below(&x, 2) ? "x" : "w%u", below(&x, n_params));
                    in[k] = UINT32_MAX;
                } else {
                    in[k] = pool[below(&x, np)];
                    snprintf(names[k], sizeof names[k], "t%u", in[k]);
                }
                for (uint32_t q = 0; q < k; q++)
                    dup |= strcmp(names[q], names[k]) == 0;
                if (!dup) {
                    if (in[k] != UINT32_MAX)
                        read[in[k]] = 1;
                    k++;
                }
            }
            /* Every op reads a param now and then so gradients flow widely. */
            if (below(&x, 3) == 0) {
                snprintf(names[k], sizeof names[k], "w%u", below(&x, n_params));
                int dup = 0;
                for (uint32_t q = 0; q < k; q++)
                    dup |= strcmp(names[q], names[k]) == 0;
                if (!dup)
                    in[k++] = UINT32_MAX;
            }
            sb_printf(&b, "%s{\"id\": \"o%u\", \"op\": \"f\", \"inputs\": [", op_id ? ", " : "", op_id);
            for (uint32_t i = 0; i < k; i++)
                sb_printf(&b, "%s\"%s\"", i ? ", " : "", names[i]);
            sb_printf(&b, "]");
            uint32_t kind = below(&x, 8), first = nt;
            if (kind == 0) { /* a view of its first input */
                sb_printf(&b, ", \"outputs\": [{\"id\": \"t%u\", \"alias_of\": \"%s\"}], \"flops\": 0, \"saves\": []",
                          nt, names[0]);
                layer_of[nt++] = L + 1;
            } else {
                uint32_t n_out = kind == 1 ? 2 + below(&x, 2) : 1;
                sb_printf(&b, ", \"outputs\": [");
                for (uint32_t o = 0; o < n_out; o++) {
                    sb_printf(&b, "%s{\"id\": \"t%u\", \"bytes\": %u}", o ? ", " : "", nt, 16 + below(&x, 4096));
                    layer_of[nt++] = L + 1;
                }
                sb_printf(&b, "], \"flops\": %u", 1 + below(&x, 100000));
                switch (below(&x, 4)) {
                case 0: sb_printf(&b, ", \"saves\": []"); break;
                case 1: sb_printf(&b, ", \"saves\": [\"t%u\"]", first); break;
                case 2: /* its first input and some earlier tensor */
                    if (first > 0) {
                        char extra[16];
                        snprintf(extra, sizeof extra, "t%u", below(&x, first));
                        if (strcmp(extra, names[0]) != 0) {
                            sb_printf(&b, ", \"saves\": [\"%s\", \"%s\"]", names[0], extra);
                            break;
                        }
                    }
                    break;
                default: break;
                }
                if (below(&x, 5) == 0)
                    sb_printf(&b, ", \"workspace\": %u, \"bwd_workspace\": %u", below(&x, 2048), below(&x, 2048));
                if (below(&x, 15) == 0)
                    sb_printf(&b, ", \"recomputable\": false");
            }
            sb_printf(&b, "}");
        }
    }
    sb_printf(&b, ", {\"id\": \"loss\", \"op\": \"sum\", \"inputs\": [");
    int any = 0;
    for (uint32_t t = 0; t < nt; t++)
        if (!read[t]) {
            sb_printf(&b, "%s\"t%u\"", any ? ", " : "", t);
            any = 1;
        }
    if (!any)
        sb_printf(&b, "\"t%u\"", nt - 1);
    sb_printf(&b, "], \"bytes\": 8, \"flops\": 1, \"saves\": []}], \"outputs\": [\"loss\"]}");
    free(layer_of);
    free(read);
    return b.s;
}

START_TEST(dtr_should_fit_or_name_a_met_budget_on_random_dags)
{
    tally tl = {0, 0, 0};
    unsigned views = 0, multi = 0, fixed = 0;
    for (uint64_t seed = 1; seed <= 24; seed++) {
        char *json = random_graph(seed * 7919, 3 + (uint32_t)(seed % 6), 2 + (uint32_t)(seed % 4));
        remat_graph *g;
        remat_analysis *a = t_analyze(json, &g);
        for (uint32_t t = 0; t < g->n_tensors; t++)
            views += g->tensors[t].alias_of != REMAT_NONE;
        for (uint32_t k = 0; k < g->n_ops; k++) {
            multi += g->ops[k].n_out > 1;
            fixed += !g->ops[k].recomputable;
        }
        check_graph(a, &tl);
        /* The ledger's extras count in a total budget exactly as replay
         * counts them (DTR's own peak check would fail otherwise). */
        remat_exec_extras ex;
        memset(&ex, 0, sizeof ex);
        ex.optimizer_state = 1000;
        ex.master_weights = 200;
        ex.frozen_copies = 300;
        ex.comm_buffers = 50;
        ex.optimizer_workspace = 700;
        ex.workspace = 64;
        uint64_t sa;
        store_all_figures(a, REMAT_BUDGET_TOTAL, &sa);
        plan_and_check(a, REMAT_BUDGET_TOTAL, sa + 2314 - sa / 8, "h_dtr", &ex, NULL, &tl);
        plan_and_check(a, REMAT_BUDGET_ACTIVATION, 1, "eq", &ex, NULL, &tl);
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
        free(json);
    }
    /* The generator made what it promises, and the test was not vacuous. */
    ck_assert_uint_gt(views, 0);
    ck_assert_uint_gt(multi, 0);
    ck_assert_uint_gt(fixed, 0);
    ck_assert_uint_gt(tl.made, 0);
    ck_assert_uint_gt(tl.rebuilt, 0);
    ck_assert_uint_gt(tl.infeasible, 0);
}
END_TEST

/* Numerically, every tensor DTR rebuilds (multi-output ops, views) is bit
 * for bit what its first computation produced. */
START_TEST(dtr_should_rebuild_bit_exact_tensors)
{
    unsigned checked = 0;
    for (uint64_t seed = 1; seed <= 8; seed++) {
        char *json = random_graph(seed * 104729, 4 + (uint32_t)(seed % 4), 3);
        remat_graph *g;
        remat_analysis *a = t_analyze(json, &g);
        uint64_t sa;
        store_all_figures(a, REMAT_BUDGET_ACTIVATION, &sa);
        remat_plan plan;
        if (plan_and_check(a, REMAT_BUDGET_ACTIVATION, sa * 6 / 10, NULL, NULL, &plan, NULL) == REMAT_OK) {
            remat_numeric_result nr;
            remat_err err;
            remat_err_init(&err);
            ck_assert_int_eq(remat_numeric_replay(a, &plan.schedule, 1, &nr, &err), REMAT_OK);
            ck_assert_msg(nr.verified, "%s: %s", g->name, err.msg);
            checked += (unsigned)nr.recomputed_tensors_checked;
            remat_numeric_result_destroy(&nr);
            remat_plan_destroy(&plan);
        }
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
        free(json);
    }
    ck_assert_uint_gt(checked, 0);
}
END_TEST

/* A chain long enough that the candidates outnumber the scan, so victims
 * come from a sample: still valid and within budget. */
START_TEST(dtr_should_stay_valid_when_it_samples_candidates)
{
    sbuf b = {malloc(4096), 0, 4096};
    ck_assert_ptr_nonnull(b.s);
    const uint32_t n = 6000;
    sb_printf(&b, "{\"format\": \"remat-graph\", \"version\": 1, \"name\": \"long\","
                  " \"inputs\": [{\"id\": \"x\", \"bytes\": 64}], \"params\": [{\"id\": \"w\", \"bytes\": 64}],"
                  " \"ops\": [{\"id\": \"t0\", \"op\": \"f\", \"inputs\": [\"x\", \"w\"], \"bytes\": 64, \"flops\": 9}");
    uint64_t x = 42;
    for (uint32_t i = 1; i < n; i++)
        sb_printf(&b, ", {\"id\": \"t%u\", \"op\": \"f\", \"inputs\": [\"t%u\"], \"bytes\": %u, \"flops\": %u}", i,
                  i - 1, 64 + below(&x, 64), 1 + below(&x, 100));
    sb_printf(&b, "], \"outputs\": [\"t%u\"]}", n - 1);
    remat_graph *g;
    remat_analysis *a = t_analyze(b.s, &g);
    uint64_t sa;
    store_all_figures(a, REMAT_BUDGET_ACTIVATION, &sa);
    tally tl = {0, 0, 0};
    ck_assert_int_eq(plan_and_check(a, REMAT_BUDGET_ACTIVATION, sa / 2, "local", NULL, NULL, &tl), REMAT_OK);
    ck_assert_uint_eq(tl.rebuilt, 1);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    free(b.s);
}
END_TEST

/* ---- 3. Errors ----------------------------------------------------------- */

START_TEST(dtr_should_refuse_an_unknown_score)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(chain4, &g);
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.strategy = "dtr";
    o.dtr_score = "lru";
    o.budget_kind = REMAT_BUDGET_ACTIVATION;
    o.budget = 400;
    remat_plan plan;
    remat_replay_result r;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_plan_make(a, &o, &plan, &r, &err), REMAT_EINVAL);
    ck_assert_msg_contains(&err, "dtr_score: unknown score 'lru'");
    remat_plan_destroy(&plan);
    remat_replay_result_destroy(&r);
    /* Listed among the strategies. */
    size_t n;
    const remat_strategy_info *info = remat_plan_strategies(&n);
    int found = 0;
    for (size_t i = 0; i < n; i++)
        found |= strcmp(info[i].name, "dtr") == 0;
    ck_assert(found);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* Every allocation DTR makes can fail: each failure is REMAT_ENOMEM with
 * its message, and leaks nothing (the sanitizer build checks that). */
START_TEST(dtr_should_fail_cleanly_when_memory_runs_out)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(chain4, &g);
    /* 300: fits; 250: the search for the smallest budget dtr meets. */
    static const uint64_t budgets[] = {300, 250};
    for (size_t sc = 0; sc < sizeof scores / sizeof scores[0]; sc++)
        for (size_t b = 0; b < 2; b++) {
            remat_plan_options o;
            remat_plan_options_init(&o);
            o.strategy = "dtr";
            o.dtr_score = scores[sc];
            o.budget_kind = REMAT_BUDGET_ACTIVATION;
            o.budget = budgets[b];
            const remat_status want = b == 0 ? REMAT_OK : REMAT_EINFEASIBLE;
            remat_plan plan;
            remat_replay_result r;
            remat_err err;
            remat_err_init(&err);
            remat__alloc_fail_at(0);
            ck_assert_int_eq(remat_plan_make(a, &o, &plan, &r, &err), want);
            uint64_t made = remat__alloc_fail_at(0);
            remat_replay_result_destroy(&r);
            remat_plan_destroy(&plan);
            ck_assert_uint_gt(made, 20);
            for (uint64_t n = 1; n <= made; n++) {
                remat_err_init(&err);
                remat__alloc_fail_at(n);
                remat_status st = remat_plan_make(a, &o, &plan, &r, &err);
                remat__alloc_fail_at(0);
                remat_replay_result_destroy(&r);
                remat_plan_destroy(&plan);
                ck_assert_msg(st == REMAT_ENOMEM, "allocation %llu of %llu: %s %s", (unsigned long long)n,
                              (unsigned long long)made, remat_status_str(st), err.msg);
                ck_assert_msg_contains(&err, "out of memory");
            }
        }
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* ---- 4. Fit only (auto's ladder) ------------------------------------------ */

/* One dtr run through the strategy itself, fit_only as given. */
static remat_status dtr_direct(const remat_analysis *a, const remat_plan_options *o, int fit_only, remat_plan *out,
                               remat_err *err)
{
    remat_planner P;
    memset(&P, 0, sizeof P);
    P.a = a;
    P.o = o;
    P.err = err;
    P.fit_only = fit_only;
    remat_schedule_init(&P.scratch);
    remat_plan_init(out);
    remat_status st = remat__strategy_dtr(&P, out);
    remat_schedule_destroy(&P.scratch);
    return st;
}

/* auto's ladder asks DTR for a plan that fits or none: where the full
 * strategy's plan fits (judged by replay) the fit-only run gives the very
 * same schedule, and where it does not (the full strategy then searches
 * for the budget it would meet) the fit-only run refuses, saying so. */
static void check_fit_only(const remat_analysis *a, remat_budget_kind kind, uint64_t budget, unsigned *same,
                           unsigned *refused)
{
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.budget_kind = kind;
    o.budget = budget;
    remat_err err;
    remat_err_init(&err);
    remat_plan full, fit;
    ck_assert_msg(dtr_direct(a, &o, 0, &full, &err) == REMAT_OK, "%s", err.msg);
    remat_replay_result r;
    ck_assert_int_eq(remat_replay(a, &full.schedule, NULL, NULL, &r, &err), REMAT_OK);
    const int fits = r.valid && metric_of(&r, kind) <= budget;
    remat_replay_result_destroy(&r);
    remat_err e2;
    remat_err_init(&e2);
    remat_status st = dtr_direct(a, &o, 1, &fit, &e2);
    if (fits) {
        ck_assert_msg(st == REMAT_OK, "%s", e2.msg);
        ck_assert_uint_eq(fit.schedule.n, full.schedule.n);
        ck_assert(memcmp(fit.schedule.ins, full.schedule.ins, full.schedule.n * sizeof *full.schedule.ins) == 0);
        (*same)++;
    } else {
        ck_assert_int_eq(st, REMAT_EINFEASIBLE);
        ck_assert_msg(strstr(e2.msg, "no run fits") != NULL, "%s", e2.msg);
        (*refused)++;
    }
    remat_plan_destroy(&full);
    remat_plan_destroy(&fit);
}

START_TEST(dtr_should_give_the_same_plan_fit_only_or_refuse)
{
    unsigned same = 0, refused = 0;
    static const char *const files[] = {"graphs/resnet8.json", "graphs/mlp2.json", "graphs/unet3.json",
                                        "graphs/transformer4.json", "graphs/hetchain12.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        remat_graph *g = NULL;
        remat_analysis *a = NULL;
        remat_err err;
        remat_err_init(&err);
        ck_assert_msg(remat_graph_load_file(files[i], &g, &err) == REMAT_OK, "%s: %s", files[i], err.msg);
        ck_assert_msg(remat_analyze(g, &a, &err) == REMAT_OK, "%s: %s", files[i], err.msg);
        uint64_t sa;
        store_all_figures(a, REMAT_BUDGET_ACTIVATION, &sa);
        for (int pct = 5; pct <= 100; pct += 15)
            check_fit_only(a, REMAT_BUDGET_ACTIVATION, sa / 100 * (uint64_t)pct, &same, &refused);
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
    }
    for (uint64_t seed = 1; seed <= 12; seed++) {
        char *json = random_graph(seed * 104729, 3 + (uint32_t)(seed % 5), 2 + (uint32_t)(seed % 3));
        remat_graph *g;
        remat_analysis *a = t_analyze(json, &g);
        uint64_t sa;
        store_all_figures(a, REMAT_BUDGET_TOTAL, &sa);
        for (int k = 1; k <= 4; k++)
            check_fit_only(a, REMAT_BUDGET_TOTAL, sa - sa / 8 * (uint64_t)k, &same, &refused);
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
        free(json);
    }
    /* Not vacuous: both sides of the rule were seen. */
    ck_assert_uint_gt(same, 0);
    ck_assert_uint_gt(refused, 0);
}
END_TEST

Suite *dtr_suite(void)
{
    Suite *s = suite_create("dtr");
    TCase *hand = tcase_create("hand");
    tcase_add_test(hand, dtr_should_evict_the_stalest_cheapest_tensor_by_hand);
    tcase_add_test(hand, dtr_should_never_evict_what_cannot_be_recomputed);
    tcase_add_test(hand, dtr_should_free_a_held_output_once_nothing_can_rebuild_from_it);
    tcase_add_test(hand, dtr_should_refuse_an_unknown_score);
    tcase_add_test(hand, dtr_should_fail_cleanly_when_memory_runs_out);
    suite_add_tcase(s, hand);
    TCase *many = tcase_create("guarantees");
    tcase_add_test(many, dtr_should_fit_or_name_a_met_budget_on_every_bundled_graph);
    tcase_add_test(many, dtr_should_fit_or_name_a_met_budget_on_random_dags);
    tcase_add_test(many, dtr_should_stay_valid_when_it_samples_candidates);
    tcase_add_test(many, dtr_should_rebuild_bit_exact_tensors);
    tcase_add_test(many, dtr_should_give_the_same_plan_fit_only_or_refuse);
    tcase_set_timeout(many, 300);
    suite_add_tcase(s, many);
    return s;
}

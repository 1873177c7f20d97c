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
 *
 * The random layered DAGs of 2 and 3, and the fit-only runs auto's ladder
 * makes, are in check_dtr_random.c (the "guarantees" case).
 */
#include "check_dtr.h"
#include "plan/planner.h"
#include "util/util_internal.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const scores[] = {"h_dtr", "eq", "local", NULL}; /* NULL: the default, best of all */

uint64_t metric_of(const remat_replay_result *r, remat_budget_kind kind)
{
    return kind == REMAT_BUDGET_ACTIVATION ? r->activation_peak : r->peak_bytes;
}

void store_all_figures(const remat_analysis *a, remat_budget_kind kind, uint64_t *metric)
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

/* Plans with dtr and checks every guarantee; returns the status. */
remat_status plan_and_check(const remat_analysis *a, remat_budget_kind kind, uint64_t budget,
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
void check_graph(const remat_analysis *a, tally *tl)
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
    dtr_random_tests(many);
    tcase_set_timeout(many, 300);
    suite_add_tcase(s, many);
    return s;
}

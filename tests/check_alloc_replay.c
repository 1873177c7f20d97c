/*
 * check_alloc_replay.c - the allocator simulation on the traces of replayed
 * schedules: a brute-force sweep of the intervals must find the executor's
 * own peak, the bounds hold (arena >= logical peak, high-water >= logical
 * peak), the static plan is within 5% of the logical peak on every bundled
 * graph under store-all, recomputing strategies and --budget-mode arena
 * plans keep every invariant, the plan file carries the offsets, and every
 * allocation of the pipeline may fail cleanly. Part of the "alloc" suite
 * (check_alloc.c builds it and holds the oracles).
 */
#include "check_alloc.h"
#include "util/util_internal.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- replayed schedules ------------------------------------------------- */

static remat_graph *load_graph(const char *path)
{
    remat_graph *g = NULL;
    remat_err err;
    remat_err_init(&err);
    ck_assert_msg(remat_graph_load_file(path, &g, &err) == REMAT_OK, "%s: %s", path, err.msg);
    return g;
}

static remat_analysis *analyze_ok(const remat_graph *g)
{
    remat_analysis *a = NULL;
    remat_err err;
    remat_err_init(&err);
    ck_assert_msg(remat_analyze(g, &a, &err) == REMAT_OK, "%s", err.msg);
    return a;
}

/* Every invariant on the trace of schedule s: the recorded intervals find
 * the executor's peak by brute force; every dynamic layout and the static
 * plan are disjoint (brute force) and not below the logical peak. Returns
 * the static arena (BEST). */
static uint64_t check_schedule(const remat_analysis *a, const remat_schedule *s, uint32_t mask, const char *what)
{
    remat_err err;
    remat_err_init(&err);
    remat_replay_result r;
    ck_assert_msg(remat_replay(a, s, NULL, NULL, &r, &err) == REMAT_OK && r.valid, "%s: %s", what, err.msg);
    remat_alloc_trace t;
    ck_assert_msg(remat_alloc_trace_build(a, s, NULL, mask, &t, NULL, &err) == REMAT_OK, "%s: %s", what, err.msg);
    uint64_t want = mask == REMAT_ALLOC_ALL ? r.peak_bytes : r.activation_peak;
    ck_assert_msg(t.logical_peak == want, "%s: trace peak %llu, replay %llu", what,
                  (unsigned long long)t.logical_peak, (unsigned long long)want);
    ck_assert_msg(brute_peak(&t) == want, "%s: brute-force peak %llu, replay %llu", what,
                  (unsigned long long)brute_peak(&t), (unsigned long long)want);
    for (int p = 0; p < REMAT_ALLOC_POLICY_COUNT; p++) {
        remat_alloc_result ar;
        simulate_ok(&t, (remat_alloc_policy)p, &ar);
        ck_assert_msg(ar.high_water >= t.logical_peak, "%s %s: high-water below the logical peak", what,
                      remat_alloc_policy_name((remat_alloc_policy)p));
        ck_assert_uint_eq(ar.fragmentation, ar.high_water - t.logical_peak);
        assert_disjoint(&t, ar.offsets, ar.high_water, remat_alloc_policy_name((remat_alloc_policy)p));
        ck_assert_int_eq(remat_alloc_verify(&t, ar.offsets, ar.high_water, &err), REMAT_OK);
        remat_alloc_result_destroy(&ar);
    }
    remat_static_result sp;
    static_ok(&t, REMAT_STATIC_BEST, &sp);
    for (int i = 0; i < REMAT_STATIC_N_ALGOS; i++)
        ck_assert_msg(sp.ran[i] == 1 && sp.arena_by_algo[i] >= t.logical_peak, "%s: %s arena below the bound", what,
                      remat_static_algo_name((remat_static_algo)i));
    ck_assert(sp.arena_bytes >= sp.lower_bound);
    ck_assert_uint_eq(sp.lower_bound, t.logical_peak);
    assert_disjoint(&t, sp.offsets, sp.arena_bytes, "static best");
    ck_assert_int_eq(remat_alloc_verify(&t, sp.offsets, sp.arena_bytes, &err), REMAT_OK);
    uint64_t arena = sp.arena_bytes;
    /* Where only the best counts (stop_at_bound: plan files, compare's arena
     * column, the arena warning), passes stop early, at the bound or once
     * they cannot win: the same arena, and the same layout unless an arena
     * at the bound stopped the search before a tie-winning pass. */
    remat_static_options so;
    remat_static_options_init(&so);
    so.stop_at_bound = 1;
    remat_static_result quick;
    ck_assert_int_eq(remat_alloc_static_plan(&t, &so, &quick, &err), REMAT_OK);
    ck_assert_msg(quick.arena_bytes == sp.arena_bytes, "%s: stop_at_bound arena %llu, full %llu", what,
                  (unsigned long long)quick.arena_bytes, (unsigned long long)sp.arena_bytes);
    if (sp.arena_bytes > sp.lower_bound) {
        ck_assert_int_eq(quick.chosen, sp.chosen);
        for (size_t k = 0; k < t.n; k++)
            ck_assert_uint_eq(quick.offsets[k], sp.offsets[k]);
    }
    remat_static_result_destroy(&quick);
    /* Each algorithm's own layout is disjoint too. */
    for (int i = 0; i < REMAT_STATIC_N_ALGOS; i++) {
        remat_static_result one;
        static_ok(&t, (remat_static_algo)i, &one);
        ck_assert_uint_eq(one.arena_bytes, sp.arena_by_algo[i]);
        assert_disjoint(&t, one.offsets, one.arena_bytes, remat_static_algo_name((remat_static_algo)i));
        remat_static_result_destroy(&one);
    }
    remat_static_result_destroy(&sp);
    remat_alloc_trace_destroy(&t);
    remat_replay_result_destroy(&r);
    return arena;
}

static const char *const bundled[] = {"bnview",     "chain16",     "gpt4-b4",   "hetchain12",   "mlp2",
                                      "mlp423",     "mobilenet_v2-b2", "resnet18-b2", "resnet50-b2",
                                      "resnet8",    "transformer4", "unet-b2",  "unet3",        "vgg16-b2"};
#define N_BUNDLED (sizeof bundled / sizeof bundled[0])

START_TEST(alloc_static_should_be_within_5_percent_on_bundled_graphs)
{
    char path[256];
    snprintf(path, sizeof path, "graphs/%s.json", bundled[_i]);
    remat_graph *g = load_graph(path);
    remat_analysis *a = analyze_ok(g);
    remat_schedule s;
    remat_schedule_init(&s);
    remat_err err;
    remat_err_init(&err);
    ck_assert(remat_schedule_store_all(a, &s, &err) == REMAT_OK);
    remat_replay_result r;
    ck_assert(remat_replay(a, &s, NULL, NULL, &r, &err) == REMAT_OK);
    uint64_t arena = check_schedule(a, &s, REMAT_ALLOC_ALL, bundled[_i]);
    ck_assert_msg((double)arena <= 1.05 * (double)r.peak_bytes, "%s: arena %llu more than 5%% over the peak %llu",
                  bundled[_i], (unsigned long long)arena, (unsigned long long)r.peak_bytes);
    check_schedule(a, &s, REMAT_ALLOC_ACTIVATION, bundled[_i]);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* Plans of other strategies: recomputation makes intervals come and go. */
START_TEST(alloc_should_hold_for_recomputing_strategies)
{
    static const char *const graphs[] = {"transformer4", "resnet8", "unet3", "hetchain12"};
    static const char *const strategies[] = {"sqrtn", "chen-greedy", "revolve", "dtr"};
    char path[256];
    snprintf(path, sizeof path, "graphs/%s.json", graphs[_i]);
    remat_graph *g = load_graph(path);
    remat_analysis *a = analyze_ok(g);
    remat_err err;
    for (size_t k = 0; k < sizeof strategies / sizeof strategies[0]; k++) {
        remat_plan_options o;
        remat_plan_options_init(&o);
        o.strategy = strategies[k];
        remat_plan plan;
        remat_replay_result r;
        remat_err_init(&err);
        remat_status st = remat_plan_make(a, &o, &plan, &r, &err);
        ck_assert_msg(st == REMAT_OK, "%s %s: %s", graphs[_i], strategies[k], err.msg);
        check_schedule(a, &plan.schedule, REMAT_ALLOC_ALL, strategies[k]);
        check_schedule(a, &plan.schedule, REMAT_ALLOC_ACTIVATION, strategies[k]);
        remat_replay_result_destroy(&r);
        remat_plan_destroy(&plan);
    }
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(alloc_trace_should_refuse_an_invalid_schedule)
{
    remat_graph *g = load_graph("graphs/mlp2.json");
    remat_analysis *a = analyze_ok(g);
    remat_schedule s;
    remat_schedule_init(&s);
    remat_err err;
    remat_err_init(&err);
    ck_assert(remat_schedule_store_all(a, &s, &err) == REMAT_OK);
    s.n = 2; /* stops before every backward step */
    remat_alloc_trace t;
    remat_replay_result r;
    ck_assert_int_eq(remat_alloc_trace_build(a, &s, NULL, REMAT_ALLOC_ALL, &t, &r, &err), REMAT_ESCHEDULE);
    ck_assert_msg_contains(&err, "never ran");
    ck_assert(!r.valid);
    remat_replay_result_destroy(&r);
    remat_alloc_trace_destroy(&t);
    /* remat_alloc_arena reports it as remat_replay does. */
    uint64_t arena = 7;
    remat_err_init(&err);
    ck_assert_int_eq(remat_alloc_arena(a, &s, NULL, REMAT_ALLOC_ALL, &r, &arena, &err), REMAT_OK);
    ck_assert(!r.valid);
    ck_assert_uint_eq(arena, 0);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(alloc_trace_should_count_ledger_state_and_workspace)
{
    /* Extras are resident (allocated before the first instruction) and the
     * optimizer's workspace is an interval of the optimizer step. */
    remat_graph *g = load_graph("graphs/mlp423.json");
    remat_analysis *a = analyze_ok(g);
    remat_schedule s;
    remat_schedule_init(&s);
    remat_err err;
    remat_err_init(&err);
    ck_assert(remat_schedule_store_all(a, &s, &err) == REMAT_OK);
    remat_exec_extras x;
    memset(&x, 0, sizeof x);
    x.optimizer_state = 6768;
    x.optimizer_workspace = 100000; /* larger than anything else: the peak moves to the optimizer */
    remat_alloc_trace t;
    remat_replay_result r;
    ck_assert_msg(remat_alloc_trace_build(a, &s, &x, REMAT_ALLOC_ALL, &t, &r, &err) == REMAT_OK, "%s", err.msg);
    ck_assert_uint_eq(t.logical_peak, r.peak_bytes);
    ck_assert_uint_eq(brute_peak(&t), r.peak_bytes);
    int found_state = 0, found_ws = 0;
    for (size_t k = 0; k < t.n; k++) {
        if (t.iv[k].category == REMAT_CAT_OPTIMIZER_STATE) {
            found_state = 1;
            ck_assert(t.iv[k].first == REMAT_ALLOC_BEFORE && t.iv[k].last == REMAT_ALLOC_NEVER);
            ck_assert_uint_eq(t.iv[k].bytes, 6768);
        }
        if (t.iv[k].category == REMAT_CAT_WORKSPACE && t.iv[k].bytes == 100000) {
            found_ws = 1;
            ck_assert_uint_eq(t.iv[k].first, t.n_steps - 1);
            ck_assert_uint_eq(t.iv[k].op, REMAT_NONE);
        }
    }
    ck_assert(found_state && found_ws);
    ck_assert_uint_eq(t.logical_peak_index, t.n_steps - 1);
    remat_static_result sp;
    static_ok(&t, REMAT_STATIC_BEST, &sp);
    assert_disjoint(&t, sp.offsets, sp.arena_bytes, "extras");
    remat_static_result_destroy(&sp);
    remat_replay_result_destroy(&r);
    remat_alloc_trace_destroy(&t);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* --budget-mode arena: every plan returned has an arena within the budget;
 * a budget just below the store-all arena is refused by store-all with a
 * message naming the arena. */
START_TEST(alloc_arena_mode_plans_should_fit_their_budget)
{
    static const char *const graphs[] = {"hetchain12", "unet3", "mlp423"};
    /* auto (every strategy, a local search) is the slow one: one budget. */
    static const char *const strategies[] = {"store-all", "chen-greedy", "revolve", "dtr", "auto"};
    char path[256];
    snprintf(path, sizeof path, "graphs/%s.json", graphs[_i]);
    remat_graph *g = load_graph(path);
    remat_analysis *a = analyze_ok(g);
    remat_err err;
    remat_err_init(&err);
    remat_schedule s;
    remat_schedule_init(&s);
    ck_assert(remat_schedule_store_all(a, &s, &err) == REMAT_OK);
    remat_replay_result r0;
    uint64_t full;
    ck_assert(remat_alloc_arena(a, &s, NULL, REMAT_ALLOC_ALL, &r0, &full, &err) == REMAT_OK);
    ck_assert(full >= r0.peak_bytes);
    remat_replay_result_destroy(&r0);
    remat_schedule_destroy(&s);
    int fitted = 0;
    for (int kind = 0; kind < 2; kind++)
        for (int f = 70; f <= 100; f += 15)
            for (size_t k = 0; k < sizeof strategies / sizeof strategies[0]; k++) {
                if (strcmp(strategies[k], "auto") == 0 && f != 85)
                    continue;
                remat_plan_options o;
                remat_plan_options_init(&o);
                o.strategy = strategies[k];
                o.time_limit = 1;
                o.budget_mode = REMAT_BUDGET_MODE_ARENA;
                o.budget_kind = kind ? REMAT_BUDGET_ACTIVATION : REMAT_BUDGET_TOTAL;
                uint64_t base = full;
                if (kind) {
                    remat_schedule_init(&s);
                    ck_assert(remat_schedule_store_all(a, &s, &err) == REMAT_OK);
                    ck_assert(remat_alloc_arena(a, &s, NULL, REMAT_ALLOC_ACTIVATION, &r0, &base, &err) == REMAT_OK);
                    remat_replay_result_destroy(&r0);
                    remat_schedule_destroy(&s);
                }
                o.budget = base / 100 * (uint64_t)f;
                remat_plan plan;
                remat_replay_result r;
                remat_err_init(&err);
                remat_status st = remat_plan_make(a, &o, &plan, &r, &err);
                ck_assert_msg(st == REMAT_OK || st == REMAT_EINFEASIBLE, "%s %s: %s", graphs[_i], strategies[k],
                              err.msg);
                if (st == REMAT_EINFEASIBLE && r.recompute_counts)
                    ck_assert_msg_contains(&err, "in arena mode");
                if (st == REMAT_OK) {
                    remat_replay_result r2;
                    uint64_t arena;
                    ck_assert(remat_alloc_arena(a, &plan.schedule, NULL, remat_alloc_mask_for(o.budget_kind), &r2,
                                                &arena, &err) == REMAT_OK);
                    ck_assert_msg(arena <= o.budget, "%s %s: arena %llu over the budget %llu", graphs[_i],
                                  strategies[k], (unsigned long long)arena, (unsigned long long)o.budget);
                    uint64_t m = kind ? r2.activation_peak : r2.peak_bytes;
                    ck_assert(m <= arena);
                    remat_replay_result_destroy(&r2);
                    fitted++;
                }
                remat_replay_result_destroy(&r);
                remat_plan_destroy(&plan);
            }
    ck_assert_msg(fitted > 0, "%s: no arena-mode plan fitted at all", graphs[_i]);
    /* Store-all at one byte under its arena: refused, naming the arena. */
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.strategy = "store-all";
    o.budget_mode = REMAT_BUDGET_MODE_ARENA;
    o.budget_kind = REMAT_BUDGET_TOTAL;
    o.budget = full - 1;
    remat_plan plan;
    remat_replay_result r;
    remat_err_init(&err);
    ck_assert_int_eq(remat_plan_make(a, &o, &plan, &r, &err), REMAT_EINFEASIBLE);
    char want[64];
    snprintf(want, sizeof want, "static arena it reaches on this graph is %.0s", "");
    ck_assert_msg_contains(&err, want);
    snprintf(want, sizeof want, "(%llu B)", (unsigned long long)full);
    if (full >= 1024)
        ck_assert_msg_contains(&err, want);
    remat_replay_result_destroy(&r);
    remat_plan_destroy(&plan);
    o.budget = full;
    remat_err_init(&err);
    ck_assert_msg(remat_plan_make(a, &o, &plan, &r, &err) == REMAT_OK, "%s", err.msg);
    remat_replay_result_destroy(&r);
    remat_plan_destroy(&plan);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(alloc_plan_file_should_carry_offsets_and_load_back)
{
    remat_graph *g = load_graph("graphs/transformer4.json");
    remat_analysis *a = analyze_ok(g);
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.strategy = "sqrtn";
    remat_plan plan;
    remat_replay_result r;
    remat_err err;
    remat_err_init(&err);
    ck_assert(remat_plan_make(a, &o, &plan, &r, &err) == REMAT_OK);
    size_t len;
    uint64_t arena = 0;
    char *text = remat_report_plan_with_offsets(a, &plan, &r, NULL, &arena, &len, &err);
    ck_assert_msg(text != NULL, "%s", err.msg);
    ck_assert_uint_eq(len, strlen(text));
    char want[96];
    snprintf(want, sizeof want, "\"offsets\": {\"arena_bytes\": %llu, \"lower_bound_bytes\": %llu",
             (unsigned long long)arena, (unsigned long long)r.peak_bytes);
    ck_assert_msg(strstr(text, want) != NULL, "plan file lacks '%s'", want);
    ck_assert(strstr(text, "\"intervals\": [") != NULL);
    ck_assert(strstr(text, "\"category\": \"recomputed\", \"instruction\": ") != NULL);
    ck_assert(strstr(text, "\"tensor\": \"tokens\", \"grad\": false, \"category\": \"inputs\", \"instruction\": -1, "
                           "\"free\": null, \"offset\": 0") != NULL);
    ck_assert(text[len - 1] == '\n' && text[len - 2] == '}');
    remat_plan back;
    ck_assert_msg(remat_plan_load_json(g, text, len, "plan.json", &back, &err) == REMAT_OK, "%s", err.msg);
    ck_assert_uint_eq(back.schedule.n, plan.schedule.n);
    remat_plan_destroy(&back);
    remat_free(text);
    /* The SVG of the same layout. */
    remat_alloc_trace t;
    ck_assert(remat_alloc_trace_build(a, &plan.schedule, NULL, REMAT_ALLOC_ALL, &t, NULL, &err) == REMAT_OK);
    remat_static_result sp;
    static_ok(&t, REMAT_STATIC_BEST, &sp);
    char *svg = remat_report_alloc_svg(a, &plan.schedule, &t, sp.offsets, sp.arena_bytes, "t <&> \"x\"", 0, &len, &err);
    ck_assert(svg != NULL);
    ck_assert(strstr(svg, "<svg") && strstr(svg, "</svg>\n"));
    ck_assert(strstr(svg, "t &lt;&amp;&gt; &quot;x&quot;") != NULL);
    ck_assert(strstr(svg, ">recomputed</text>") != NULL && strstr(svg, ">params</text>") != NULL);
    size_t rects = 0;
    for (const char *p = svg; (p = strstr(p, "<title>")) != NULL; p++)
        rects++;
    ck_assert_uint_eq(rects, t.n);
    remat_free(svg);
    /* At most 10 drawn: the rest are counted. */
    svg = remat_report_alloc_svg(a, &plan.schedule, &t, sp.offsets, sp.arena_bytes, "few", 10, &len, &err);
    ck_assert(svg != NULL && strstr(svg, "allocations not drawn") != NULL);
    remat_free(svg);
    remat_static_result_destroy(&sp);
    remat_alloc_trace_destroy(&t);
    remat_replay_result_destroy(&r);
    remat_plan_destroy(&plan);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* A generated graph of 20000 ops: the simulators finish and agree with
 * the executor (the speed is reported by `remat alloc`, not tested). */
START_TEST(alloc_should_simulate_a_large_graph)
{
    remat_gen_opts go;
    remat_gen_opts_init(&go, REMAT_GEN_CHAIN);
    go.ops = 20000;
    go.random = true;
    remat_err err;
    remat_err_init(&err);
    size_t len;
    char *json = remat_gen_json(&go, &len, &err);
    ck_assert_msg(json != NULL, "%s", err.msg);
    remat_graph *g = NULL;
    ck_assert(remat_graph_load_json(json, len, "gen", &g, &err) == REMAT_OK);
    remat_free(json);
    remat_analysis *a = analyze_ok(g);
    remat_schedule s;
    remat_schedule_init(&s);
    ck_assert(remat_schedule_store_all(a, &s, &err) == REMAT_OK);
    remat_alloc_trace t;
    remat_replay_result r;
    ck_assert(remat_alloc_trace_build(a, &s, NULL, REMAT_ALLOC_ALL, &t, &r, &err) == REMAT_OK);
    ck_assert_uint_eq(t.logical_peak, r.peak_bytes);
    for (int p = 0; p < REMAT_ALLOC_POLICY_COUNT; p++) {
        remat_alloc_result ar;
        simulate_ok(&t, (remat_alloc_policy)p, &ar);
        ck_assert(ar.high_water >= t.logical_peak);
        ck_assert_int_eq(remat_alloc_verify(&t, ar.offsets, ar.high_water, &err), REMAT_OK);
        remat_alloc_result_destroy(&ar);
    }
    remat_static_options o;
    remat_static_options_init(&o);
    o.algos = 1u << REMAT_STATIC_ALLOC_ORDER;
    remat_static_result sp;
    ck_assert(remat_alloc_static_plan(&t, &o, &sp, &err) == REMAT_OK);
    ck_assert(sp.arena_bytes >= t.logical_peak);
    ck_assert_int_eq(remat_alloc_verify(&t, sp.offsets, sp.arena_bytes, &err), REMAT_OK);
    remat_static_result_destroy(&sp);
    remat_alloc_trace_destroy(&t);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* Every allocation of the pipeline fails in turn: each stage reports out
 * of memory and leaks nothing (the sanitizer build checks the leaks). */
START_TEST(alloc_should_fail_cleanly_when_memory_runs_out)
{
    remat_graph *g = load_graph("graphs/mlp423.json");
    remat_analysis *a = analyze_ok(g);
    remat_plan plan;
    remat_plan_init(&plan);
    remat_err err;
    remat_err_init(&err);
    ck_assert(remat_schedule_store_all(a, &plan.schedule, &err) == REMAT_OK);
    remat_replay_result r;
    ck_assert(remat_replay(a, &plan.schedule, NULL, NULL, &r, &err) == REMAT_OK);
    remat_alloc_trace good;
    ck_assert(remat_alloc_trace_build(a, &plan.schedule, NULL, REMAT_ALLOC_ALL, &good, NULL, &err) == REMAT_OK);
    for (int stage = 0; stage < 9; stage++)
        for (uint64_t n = 1;; n++) {
            remat_err_init(&err);
            remat_alloc_trace t;
            remat_alloc_result ar;
            remat_static_result sp;
            remat_replay_result rr;
            memset(&ar, 0, sizeof ar);
            memset(&sp, 0, sizeof sp);
            memset(&t, 0, sizeof t);
            char *text = NULL;
            size_t len;
            uint64_t arena;
            remat_static_options so;
            remat_static_options_init(&so);
            const remat_alloc_result *shown[1] = {&ar};
            remat_status st = REMAT_OK;
            if (stage >= 5) /* the reports need a simulation and a plan made without faults */
                ck_assert(remat_alloc_simulate(&good, REMAT_ALLOC_CACHING, 1, &ar, &err) == REMAT_OK &&
                          remat_alloc_static_plan(&good, &so, &sp, &err) == REMAT_OK);
            remat__alloc_fail_at(n);
            switch (stage) {
            case 0: st = remat_alloc_trace_build(a, &plan.schedule, NULL, REMAT_ALLOC_ALL, &t, NULL, &err); break;
            case 1:
            case 2:
            case 3: st = remat_alloc_simulate(&good, (remat_alloc_policy)(stage - 1), 1, &ar, &err); break;
            case 4: st = remat_alloc_static_plan(&good, &so, &sp, &err); break;
            case 5:
                text = remat_report_alloc(a, &plan.schedule, &good, shown, 1, &sp, stage & 1, &len, &err);
                st = text ? REMAT_OK : err.code;
                break;
            case 6:
                text = remat_report_alloc_svg(a, &plan.schedule, &good, sp.offsets, sp.arena_bytes, "t", 0, &len, &err);
                st = text ? REMAT_OK : err.code;
                break;
            case 7:
                text = remat_report_plan_with_offsets(a, &plan, &r, NULL, NULL, &len, &err);
                st = text ? REMAT_OK : err.code;
                break;
            default:
                st = remat_alloc_arena(a, &plan.schedule, NULL, REMAT_ALLOC_ALL, &rr, &arena, &err);
                if (st == REMAT_OK)
                    remat_replay_result_destroy(&rr);
                break;
            }
            remat__alloc_fail_at(0);
            remat_free(text);
            remat_alloc_trace_destroy(&t);
            remat_alloc_result_destroy(&ar);
            remat_static_result_destroy(&sp);
            if (st == REMAT_OK)
                break;
            ck_assert_msg(st == REMAT_ENOMEM, "stage %d, allocation %llu: %s: %s", stage, (unsigned long long)n,
                          remat_status_str(st), err.msg);
            ck_assert_msg_contains(&err, "out of memory");
        }
    remat_alloc_trace_destroy(&good);
    remat_replay_result_destroy(&r);
    remat_plan_destroy(&plan);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* The replayed-schedule tests of the alloc suite's one case (check_alloc.c). */
void alloc_replay_tests(TCase *tc)
{
    tcase_add_loop_test(tc, alloc_static_should_be_within_5_percent_on_bundled_graphs, 0, (int)N_BUNDLED);
    tcase_add_loop_test(tc, alloc_should_hold_for_recomputing_strategies, 0, 4);
    tcase_add_test(tc, alloc_trace_should_refuse_an_invalid_schedule);
    tcase_add_test(tc, alloc_trace_should_count_ledger_state_and_workspace);
    tcase_add_loop_test(tc, alloc_arena_mode_plans_should_fit_their_budget, 0, 3);
    tcase_add_test(tc, alloc_plan_file_should_carry_offsets_and_load_back);
    tcase_add_test(tc, alloc_should_simulate_a_large_graph);
    tcase_add_test(tc, alloc_should_fail_cleanly_when_memory_runs_out);
}

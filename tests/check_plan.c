/*
 * check_plan.c - the planners against independent oracles: Revolve's count
 * against Griewank's recurrence (computed here by brute force), every
 * strategy's plan replayed valid and within budget on bundled and generated
 * graphs, infeasibility reported with the smallest budget, auto never worse
 * than any strategy and monotone in the budget.
 */
#include "test_util.h"
#include "plan/planner.h"

#include <stdio.h>
#include <stdlib.h>

/* Loads a generated graph (assert ok). */
static remat_graph *gen_graph(const remat_gen_opts *o)
{
    remat_err err;
    remat_err_init(&err);
    size_t len;
    char *json = remat_gen_json(o, &len, &err);
    ck_assert_msg(json != NULL, "gen: %s", err.msg);
    remat_graph *g = NULL;
    ck_assert_msg(remat_graph_load_json(json, len, "gen", &g, &err) == REMAT_OK, "%s", err.msg);
    remat_free(json);
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

/* Griewank's minimum advances by the recurrence, not the closed form:
 * T(l, s) = min over 1 <= m < l of m + T(l - m, s - 1) + T(m, s),
 * T(1, s) = 0, T(l, 1) = l(l - 1)/2. */
#define LMAX 40
#define SMAX 8
static uint64_t T[LMAX + 1][SMAX + 1];

static void griewank_table(void)
{
    for (int s = 1; s <= SMAX; s++)
        for (int l = 1; l <= LMAX; l++) {
            if (l == 1) {
                T[l][s] = 0;
                continue;
            }
            if (s == 1) {
                T[l][s] = (uint64_t)l * (uint64_t)(l - 1) / 2;
                continue;
            }
            uint64_t best = UINT64_MAX;
            for (int m = 1; m < l; m++) {
                uint64_t c = (uint64_t)m + T[l - m][s - 1] + T[m][s];
                if (c < best)
                    best = c;
            }
            T[l][s] = best;
        }
}

START_TEST(plan_should_match_griewank_on_homogeneous_chains)
{
    griewank_table();
    remat_err err;
    remat_err_init(&err);
    for (uint32_t l = 2; l <= 30; l += (l < 12 ? 1 : 3)) {
        remat_gen_opts o;
        remat_gen_opts_init(&o, REMAT_GEN_CHAIN);
        o.ops = l;
        remat_graph *g = gen_graph(&o);
        remat_analysis *a = analyze_ok(g);
        remat_blocks bl;
        ck_assert_int_eq(remat__blocks_build(a, &bl, &err), REMAT_OK);
        ck_assert_uint_eq(bl.n, l); /* a chain of single-op blocks */
        for (uint64_t s = 1; s <= SMAX; s++) {
            /* The closed form agrees with the recurrence... */
            ck_assert_uint_eq(remat__revolve_min_advances(l, s), T[l][s]);
            remat_schedule sc;
            remat_schedule_init(&sc);
            uint64_t adv = 0;
            ck_assert_int_eq(remat__revolve_schedule(a, &bl, s, &sc, &adv, &err), REMAT_OK);
            /* ...and the emitted schedule makes exactly that many advances:
             * FWD + RECOMPUTE = t(l, s) + 1. */
            uint64_t fwd = 0, rec = 0;
            for (size_t i = 0; i < sc.n; i++) {
                fwd += sc.ins[i].kind == REMAT_I_FWD;
                rec += sc.ins[i].kind == REMAT_I_RECOMPUTE;
            }
            ck_assert_uint_eq(fwd, l);
            ck_assert_msg(fwd + rec == T[l][s] + 1, "l=%u s=%llu: %llu evaluations, Griewank %llu + 1", l,
                          (unsigned long long)s, (unsigned long long)(fwd + rec), (unsigned long long)T[l][s]);
            remat_replay_result r;
            ck_assert_int_eq(remat_replay(a, &sc, NULL, NULL, &r, &err), REMAT_OK);
            ck_assert_msg(r.valid, "l=%u s=%llu: %s", l, (unsigned long long)s, err.msg);
            /* Every op's flops are equal: extra FLOPs = recomputes x flops. */
            ck_assert_uint_eq(r.flops_recompute, rec * g->ops[0].flops);
            remat_replay_result_destroy(&r);
            remat_schedule_destroy(&sc);
        }
        remat__blocks_destroy(&bl);
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
    }
}
END_TEST

static uint64_t metric(const remat_replay_result *r, remat_budget_kind k)
{
    return k == REMAT_BUDGET_ACTIVATION ? r->activation_peak : r->peak_bytes;
}

/* Plans g with strategy at budget; checks the contract: a returned plan
 * replays valid (replayed again here, independently of the planner's own
 * replay) and within budget; an infeasible one names its smallest metric,
 * which exceeds the budget. Returns 1 and the extra FLOPs if feasible. */
static int plan_checked(const remat_analysis *a, const char *strategy, int linearized, remat_budget_kind kind,
                        uint64_t budget, uint64_t *extra)
{
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.strategy = strategy;
    o.linearized = linearized;
    o.budget_kind = kind;
    o.budget = budget;
    o.time_limit = 2;
    remat_plan plan;
    remat_replay_result r;
    remat_err err;
    remat_err_init(&err);
    remat_status st = remat_plan_make(a, &o, &plan, &r, &err);
    int ok = 0;
    if (st == REMAT_OK) {
        remat_replay_result r2;
        remat_err e2;
        remat_err_init(&e2);
        ck_assert_int_eq(remat_replay(a, &plan.schedule, NULL, NULL, &r2, &e2), REMAT_OK);
        ck_assert_msg(r2.valid, "%s on %s: %s", strategy, a->g->name, e2.msg);
        ck_assert_msg(metric(&r2, kind) <= budget, "%s on %s: replayed %llu over budget %llu", strategy, a->g->name,
                      (unsigned long long)metric(&r2, kind), (unsigned long long)budget);
        ck_assert_uint_eq(r2.peak_bytes, r.peak_bytes);
        ck_assert_uint_eq(r2.flops_recompute, r.flops_recompute);
        *extra = r2.flops_recompute;
        remat_replay_result_destroy(&r2);
        ok = 1;
    } else if (st == REMAT_EINFEASIBLE) {
        ck_assert_msg(strstr(err.msg, "smallest") != NULL, "%s", err.msg);
        if (r.recompute_counts) {
            ck_assert_uint_gt(metric(&r, kind), budget);
            char num[32];
            snprintf(num, sizeof num, "%llu B", (unsigned long long)metric(&r, kind));
            ck_assert_msg(strstr(err.msg, num) != NULL, "'%s' does not name %s", err.msg, num);
        }
    } else {
        /* A strategy may refuse a graph it does not apply to (exact on a
         * large graph, no GLPK): then it says why. */
        ck_assert_msg(st == REMAT_EUNSUPPORTED || st == REMAT_EGRAPH, "%s on %s: %s (%s)", strategy, a->g->name,
                      err.msg, remat_status_str(st));
    }
    remat_replay_result_destroy(&r);
    remat_plan_destroy(&plan);
    return ok;
}

static const char *const bundled[] = {"mlp2", "mlp423", "chain16", "hetchain12", "resnet8", "transformer4", "unet3",
                                      "bnview"};

static remat_graph *load_bundled(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "graphs/%s.json", name);
    remat_graph *g = NULL;
    remat_err err;
    remat_err_init(&err);
    ck_assert_msg(remat_graph_load_file(path, &g, &err) == REMAT_OK, "%s", err.msg);
    return g;
}

/* Every strategy at 0.5, 0.7 and 0.9 of store-all (total and activation):
 * valid and within budget whenever it answers; auto is feasible wherever
 * any strategy is, and never needs more extra FLOPs than any of them. */
static void check_all_strategies(const remat_analysis *a)
{
    size_t n;
    const remat_strategy_info *si = remat_plan_strategies(&n);
    remat_schedule sa;
    remat_schedule_init(&sa);
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_schedule_store_all(a, &sa, &err), REMAT_OK);
    remat_replay_result base;
    ck_assert_int_eq(remat_replay(a, &sa, NULL, NULL, &base, &err), REMAT_OK);
    static const double fr[] = {0.5, 0.7, 0.9};
    for (int kk = 0; kk < 2; kk++) {
        remat_budget_kind kind = kk ? REMAT_BUDGET_ACTIVATION : REMAT_BUDGET_TOTAL;
        for (int f = 0; f < 3; f++) {
            uint64_t budget = (uint64_t)((double)metric(&base, kind) * fr[f]);
            uint64_t auto_extra = 0, extra;
            int auto_ok = plan_checked(a, "auto", 0, kind, budget, &auto_extra);
            for (size_t i = 0; i < n; i++) {
                if (strcmp(si[i].name, "auto") == 0)
                    continue;
                if (strcmp(si[i].name, "exact") == 0 && a->g->n_ops > 40)
                    continue; /* exact's time is checked in its own suite */
                for (int lin = 0; lin < 2; lin++) {
                    if (lin && strcmp(si[i].name, "sqrtn") != 0 && strcmp(si[i].name, "chen-greedy") != 0)
                        continue;
                    if (plan_checked(a, si[i].name, lin, kind, budget, &extra)) {
                        ck_assert_msg(auto_ok, "%s: %s meets %.1f of store-all but auto does not", a->g->name,
                                      si[i].name, fr[f]);
                        ck_assert_msg(auto_extra <= extra, "%s at %.1f: auto %llu > %s %llu", a->g->name, fr[f],
                                      (unsigned long long)auto_extra, si[i].name, (unsigned long long)extra);
                    }
                }
            }
        }
    }
    remat_replay_result_destroy(&base);
    remat_schedule_destroy(&sa);
}

START_TEST(plan_should_keep_every_strategy_within_budget_on_bundled_graphs)
{
    remat_graph *g = load_bundled(bundled[_i]);
    remat_analysis *a = analyze_ok(g);
    check_all_strategies(a);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(plan_should_keep_every_strategy_within_budget_on_generated_graphs)
{
    remat_gen_opts o;
    static const remat_gen_family fam[] = {REMAT_GEN_RESNET, REMAT_GEN_TRANSFORMER, REMAT_GEN_UNET, REMAT_GEN_LAYERED,
                                           REMAT_GEN_LAYERED, REMAT_GEN_CHAIN};
    remat_gen_opts_init(&o, fam[_i]);
    switch (fam[_i]) {
    case REMAT_GEN_RESNET: o.blocks = 4; o.batch = 4; o.channels = 8; o.size = 16; break;
    case REMAT_GEN_TRANSFORMER: o.layers = 3; o.seq = 64; o.batch = 1; o.hidden = 128; o.heads = 4; o.vocab = 256; break;
    case REMAT_GEN_UNET: o.depth = 2; o.batch = 2; o.channels = 8; o.size = 32; break;
    case REMAT_GEN_LAYERED: o.width = 3 + (uint32_t)_i; o.layers = 5; o.seed = 11 + (uint64_t)_i; o.bytes = 4096; break;
    case REMAT_GEN_CHAIN: o.ops = 24; o.random = true; o.seed = 5; o.bytes = 1024; break;
    }
    remat_graph *g = gen_graph(&o);
    remat_analysis *a = analyze_ok(g);
    check_all_strategies(a);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(plan_should_name_the_smallest_budget_when_infeasible)
{
    remat_graph *g = load_bundled("chain16");
    remat_analysis *a = analyze_ok(g);
    static const char *const s[] = {"store-all", "sqrtn", "chen-greedy", "revolve", "auto"};
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        uint64_t extra;
        ck_assert(!plan_checked(a, s[i], 0, REMAT_BUDGET_TOTAL, 1, &extra));
        ck_assert(!plan_checked(a, s[i], 0, REMAT_BUDGET_ACTIVATION, 0, &extra));
    }
    /* The named minimum is attainable: planning again at exactly that
     * budget succeeds. */
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.strategy = "revolve";
    o.budget_kind = REMAT_BUDGET_ACTIVATION;
    o.budget = 0;
    remat_plan plan;
    remat_replay_result r;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_plan_make(a, &o, &plan, &r, &err), REMAT_EINFEASIBLE);
    o.budget = r.activation_peak;
    remat_replay_result_destroy(&r);
    remat_plan_destroy(&plan);
    remat_err_init(&err);
    ck_assert_int_eq(remat_plan_make(a, &o, &plan, &r, &err), REMAT_OK);
    remat_replay_result_destroy(&r);
    remat_plan_destroy(&plan);
    /* An unknown strategy is a usage error listing the known ones. */
    o.strategy = "frobnicate";
    remat_err_init(&err);
    ck_assert_int_eq(remat_plan_make(a, &o, &plan, &r, &err), REMAT_EINVAL);
    ck_assert_msg_contains(&err, "revolve");
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* A looser budget never costs auto more extra FLOPs. */
START_TEST(plan_should_make_auto_monotone_in_the_budget)
{
    remat_graph *g = load_bundled(bundled[_i]);
    remat_analysis *a = analyze_ok(g);
    remat_schedule sa;
    remat_schedule_init(&sa);
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_schedule_store_all(a, &sa, &err), REMAT_OK);
    remat_replay_result base;
    ck_assert_int_eq(remat_replay(a, &sa, NULL, NULL, &base, &err), REMAT_OK);
    uint64_t prev = UINT64_MAX;
    int prev_ok = 0;
    for (int i = 1; i <= 12; i++) {
        uint64_t budget = base.activation_peak * (uint64_t)i / 12, extra = 0;
        int ok = plan_checked(a, "auto", 0, REMAT_BUDGET_ACTIVATION, budget, &extra);
        if (prev_ok)
            ck_assert_msg(ok && extra <= prev, "%s: auto at %llu needs %llu extra FLOPs, more than %llu at a tighter budget",
                          g->name, (unsigned long long)budget, (unsigned long long)extra, (unsigned long long)prev);
        if (ok) {
            prev = extra;
            prev_ok = 1;
        }
    }
    ck_assert_msg(prev_ok && prev == 0, "%s: auto at the store-all activation peak must recompute nothing", g->name);
    remat_replay_result_destroy(&base);
    remat_schedule_destroy(&sa);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* sqrtn on a homogeneous chain of 25 ops, as the paper states it and
 * Checkmate implements it (solve_chen_sqrtn): 24 candidate cuts, k =
 * floor(sqrt(24)) = 4, every 4th candidate cut (after ops 3, 7, 11, 15, 19
 * and 23, 0-based): 6 kept boundaries, and the last segment (op 24 alone)
 * kept: 7 kept activations. Every other activation a backward step saves
 * is recomputed exactly once (segments are replayed once). remat's reading
 * judges the paper's candidate too, so without a budget (least memory
 * first) its peak is never above the paper's. */
START_TEST(plan_should_segment_a_chain_in_sqrt_n)
{
    remat_gen_opts o;
    remat_gen_opts_init(&o, REMAT_GEN_CHAIN);
    o.ops = 25;
    remat_graph *g = gen_graph(&o);
    remat_analysis *a = analyze_ok(g);
    remat_plan_options po;
    remat_plan_options_init(&po);
    po.strategy = "sqrtn";
    po.chen_reading = REMAT_CHEN_PAPER;
    remat_plan plan;
    remat_replay_result r;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_plan_make(a, &po, &plan, &r, &err), REMAT_OK);
    uint32_t kept = 0, expect_rec = 0;
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        if (g->tensors[t].kind != REMAT_TENSOR_ACTIVATION)
            continue;
        kept += plan.keep[t];
        if (!plan.keep[t] && a->life[t].last_bwd_use != REMAT_NONE)
            expect_rec++;
    }
    ck_assert_uint_eq(kept, 7);
    for (uint32_t i = 0; i < g->n_ops; i++) {
        uint32_t t = remat_op_outputs(g, &g->ops[a->order[i]])[0];
        int cut = i % 4 == 3 && i <= 23;
        ck_assert_msg(plan.keep[t] == (cut || i == 24), "op %u: keep %u", i, plan.keep[t]);
    }
    uint64_t rec = 0;
    for (uint32_t k = 0; k < g->n_ops; k++) {
        ck_assert_uint_le(r.recompute_counts[k], 1);
        rec += r.recompute_counts[k];
    }
    ck_assert_uint_eq(rec, expect_rec);
    ck_assert_ptr_nonnull(strstr(plan.params_json, "\"segments\": 7"));
    ck_assert_ptr_nonnull(strstr(plan.params_json, "\"last_segment\": \"kept\""));
    ck_assert_ptr_nonnull(strstr(plan.params_json, "\"reading\": \"paper\""));
    uint64_t paper_peak = r.activation_peak;
    remat_replay_result_destroy(&r);
    remat_plan_destroy(&plan);
    po.chen_reading = REMAT_CHEN_REMAT;
    ck_assert_int_eq(remat_plan_make(a, &po, &plan, &r, &err), REMAT_OK);
    ck_assert_uint_le(r.activation_peak, paper_peak);
    ck_assert_ptr_nonnull(strstr(plan.params_json, "\"reading\": \"remat\""));
    remat_replay_result_destroy(&r);
    remat_plan_destroy(&plan);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* A chain of n ops with dead side ops (read a chain tensor, feed nothing)
 * placed by seed, some listed before the op they read: the shape of a fuzz
 * finding, where a dead op between two cuts crossed by the same tensor made
 * a block that enters and leaves through one tensor, and Revolve's release
 * of that block's output freed the input of the block before it. */
static char *dead_branch_chain(uint64_t seed, uint32_t n)
{
    size_t cap = 256 + (size_t)n * 256;
    char *j = malloc(cap);
    ck_assert_ptr_nonnull(j);
    size_t len = (size_t)snprintf(j, cap, "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"dead%llu\","
                                          "\"inputs\":[{\"id\":\"x\",\"bytes\":64}],\"params\":[{\"id\":\"w\",\"bytes\":8}],"
                                          "\"ops\":[",
                                  (unsigned long long)seed);
    uint64_t x = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    uint32_t dead = 0;
    for (uint32_t i = 1; i <= n; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        /* A dead op reading t_{i+1} is listed before t_{i+1} (a forward
         * reference) one time in three, after it otherwise. */
        int d = (x >> 33) % 3 == 0 && i < n, early = (x >> 40) % 3 == 0;
        if (d && early)
            len += (size_t)snprintf(j + len, cap - len, "{\"id\":\"d%u\",\"op\":\"f\",\"inputs\":[\"t%u\"],"
                                                        "\"bytes\":%u,\"flops\":7},",
                                    dead++, i + 1, 64 + 8 * (unsigned)(x % 5));
        char prev[16] = "x";
        if (i > 1)
            snprintf(prev, sizeof prev, "t%u", i - 1);
        len += (size_t)snprintf(j + len, cap - len, "{\"id\":\"t%u\",\"op\":\"f\",\"inputs\":[\"%s\",\"w\"],"
                                                    "\"bytes\":%u,\"flops\":%u},",
                                i, prev, 64 + 16 * (unsigned)((x >> 20) % 4), 100 + (unsigned)((x >> 24) % 50));
        if (d && !early)
            len += (size_t)snprintf(j + len, cap - len, "{\"id\":\"d%u\",\"op\":\"f\",\"inputs\":[\"t%u\"],"
                                                        "\"bytes\":%u,\"flops\":7},",
                                    dead++, i, 64 + 8 * (unsigned)(x % 5));
    }
    snprintf(j + len - 1, cap - len + 1, "],\"outputs\":[\"t%u\"]}", n);
    return j;
}

START_TEST(plan_should_replay_revolve_and_plan_every_strategy_around_dead_branches)
{
    remat_err err;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        char *json = dead_branch_chain(seed, 6 + (uint32_t)(seed % 11));
        remat_graph *g = NULL;
        remat_err_init(&err);
        ck_assert_msg(remat_graph_load_json(json, strlen(json), "dead", &g, &err) == REMAT_OK, "seed %llu: %s",
                      (unsigned long long)seed, err.msg);
        free(json);
        remat_analysis *a = analyze_ok(g);
        remat_blocks bl;
        ck_assert_int_eq(remat__blocks_build(a, &bl, &err), REMAT_OK);
        /* No block enters and leaves through the same tensor. */
        for (uint32_t j = 1; j + 1 < bl.n; j++)
            ck_assert_msg(bl.in[j] == REMAT_NONE || bl.in[j] != bl.in[j + 1], "seed %llu: blocks %u and %u share %s",
                          (unsigned long long)seed, j, j + 1, g->tensors[bl.in[j]].id);
        for (uint64_t sl = 1; sl <= bl.n; sl++) {
            remat_schedule sc;
            remat_schedule_init(&sc);
            ck_assert_int_eq(remat__revolve_schedule(a, &bl, sl, &sc, NULL, &err), REMAT_OK);
            remat_replay_result r;
            ck_assert_int_eq(remat_replay(a, &sc, NULL, NULL, &r, &err), REMAT_OK);
            ck_assert_msg(r.valid, "seed %llu, %llu slots: %s", (unsigned long long)seed, (unsigned long long)sl,
                          err.msg);
            /* A dead op runs once: recomputing it would buy nothing. */
            for (size_t i = 0; i < sc.n; i++)
                ck_assert_msg(sc.ins[i].kind != REMAT_I_RECOMPUTE || g->ops[sc.ins[i].arg].id[0] != 'd',
                              "seed %llu, %llu slots: recomputes dead op %s", (unsigned long long)seed,
                              (unsigned long long)sl, g->ops[sc.ins[i].arg].id);
            remat_replay_result_destroy(&r);
            remat_schedule_destroy(&sc);
        }
        remat__blocks_destroy(&bl);
        /* Every strategy at the store-all peak, one byte under it and at half
         * of it: a plan within budget or "infeasible", never an internal error. */
        remat_schedule sa;
        remat_schedule_init(&sa);
        ck_assert_int_eq(remat_schedule_store_all(a, &sa, &err), REMAT_OK);
        remat_replay_result r;
        ck_assert_int_eq(remat_replay(a, &sa, NULL, NULL, &r, &err), REMAT_OK);
        const uint64_t peak = r.peak_bytes, budgets[] = {peak, peak - 1, peak / 2};
        remat_replay_result_destroy(&r);
        remat_schedule_destroy(&sa);
        size_t ns;
        const remat_strategy_info *si = remat_plan_strategies(&ns);
        for (size_t i = 0; i < ns; i++) {
            /* exact (and auto, which runs it) spends its time limit proving
             * an infeasible budget's bound: under budget on a few seeds only. */
            const int slow = strcmp(si[i].name, "exact") == 0 || strcmp(si[i].name, "auto") == 0;
            for (size_t k = 0; k < (slow && seed % 8 ? 1 : 3); k++) {
                uint64_t extra;
                plan_checked(a, si[i].name, 0, REMAT_BUDGET_TOTAL, budgets[k], &extra);
            }
        }
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
    }
}
END_TEST

Suite *plan_suite(void)
{
    Suite *s = suite_create("plan");
    TCase *tc = tcase_create("plan");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, plan_should_match_griewank_on_homogeneous_chains);
    tcase_add_loop_test(tc, plan_should_keep_every_strategy_within_budget_on_bundled_graphs, 0,
                        (int)(sizeof bundled / sizeof bundled[0]));
    tcase_add_loop_test(tc, plan_should_keep_every_strategy_within_budget_on_generated_graphs, 0, 6);
    tcase_add_test(tc, plan_should_name_the_smallest_budget_when_infeasible);
    tcase_add_loop_test(tc, plan_should_make_auto_monotone_in_the_budget, 0, (int)(sizeof bundled / sizeof bundled[0]));
    tcase_add_test(tc, plan_should_segment_a_chain_in_sqrt_n);
    suite_add_tcase(s, tc);
    TCase *dead = tcase_create("dead");
    tcase_set_timeout(dead, 120);
    tcase_add_test(dead, plan_should_replay_revolve_and_plan_every_strategy_around_dead_branches);
    suite_add_tcase(s, dead);
    return s;
}

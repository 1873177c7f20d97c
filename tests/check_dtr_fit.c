/*
 * check_dtr_fit.c - the dtr strategy in fit-only mode, as auto's ladder
 * calls it: where the full strategy's plan fits its budget (judged by the
 * replay) the fit-only run gives the very same schedule; where it does not,
 * the fit-only run refuses with REMAT_EINFEASIBLE instead of searching for
 * the budget it would meet. On bundled graphs and on check_dtr.c's random
 * layered DAGs; both outcomes must be seen. Part of check_dtr.c's suite.
 */
#include "check_dtr.h"
#include "plan/planner.h"

#include <stdlib.h>
#include <string.h>

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

void dtr_fit_tests(TCase *tc)
{
    tcase_add_test(tc, dtr_should_give_the_same_plan_fit_only_or_refuse);
}

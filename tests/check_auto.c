/*
 * check_auto.c - auto's plan depends on the graph and the budget only, not
 * on the machine's speed or load (issue 20).
 *
 * auto bounds exact (and everything else it runs) by work, not by time: the
 * same graph and budget must give the same schedule and the same params
 * whether the process has the CPU to itself or shares it with busy threads
 * (here two spinning threads on the project's two cores, which slow every
 * step about twice). The graphs are small enough that auto runs
 * exact (at most 40 ops, more activations than the class search takes), at
 * budgets from tight to loose; the test also checks that exact really ran
 * and that its work limit stopped it somewhere, so the comparison covers
 * the path that a time limit used to make vary.
 */
#include "test_util.h"
#include "oracle.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_int spin_stop;

static void *spin(void *arg)
{
    (void)arg;
    volatile uint64_t x = 0;
    while (!atomic_load(&spin_stop))
        x++;
    return NULL;
}

static remat_analysis *load_gen(const remat_gen_opts *o, remat_graph **g)
{
    remat_err err;
    remat_err_init(&err);
    size_t len;
    char *json = remat_gen_json(o, &len, &err);
    ck_assert_msg(json != NULL, "%s", err.msg);
    *g = NULL;
    ck_assert_msg(remat_graph_load_json(json, len, "gen.json", g, &err) == REMAT_OK, "%s", err.msg);
    remat_free(json);
    remat_analysis *a = NULL;
    ck_assert_msg(remat_analyze(*g, &a, &err) == REMAT_OK, "%s", err.msg);
    return a;
}

static uint64_t act_peak(const remat_analysis *a)
{
    remat_schedule s;
    remat_schedule_init(&s);
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_schedule_store_all(a, &s, &err), REMAT_OK);
    remat_replay_result r;
    ck_assert_int_eq(remat_replay(a, &s, NULL, NULL, &r, &err), REMAT_OK);
    uint64_t m = r.activation_peak;
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    return m;
}

typedef struct {
    remat_status st;
    remat_plan plan;
    uint64_t extra;
} outcome;

static void run_auto(const remat_analysis *a, uint64_t budget, outcome *out)
{
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.budget_kind = REMAT_BUDGET_ACTIVATION;
    o.budget = budget;
    remat_replay_result r;
    remat_err err;
    remat_err_init(&err);
    out->st = remat_plan_make(a, &o, &out->plan, &r, &err);
    out->extra = 0;
    if (out->st == REMAT_OK || out->st == REMAT_EINFEASIBLE) {
        out->extra = r.flops_recompute;
        remat_replay_result_destroy(&r);
    }
}

typedef struct {
    unsigned cases, exact_ran, work_stopped;
} tally;

static void same_plan(const remat_analysis *a, const char *what, tally *tl)
{
    static const double fr[] = {0.5, 0.8};
    const uint64_t top = act_peak(a);
    for (size_t f = 0; f < sizeof fr / sizeof fr[0]; f++) {
        uint64_t budget = (uint64_t)((double)top * fr[f]);
        outcome x, y;
        run_auto(a, budget, &x);
        /* Again with the CPU shared by two busy threads. */
        pthread_t th[2];
        atomic_store(&spin_stop, 0);
        for (int i = 0; i < 2; i++)
            ck_assert_int_eq(pthread_create(&th[i], NULL, spin, NULL), 0);
        run_auto(a, budget, &y);
        atomic_store(&spin_stop, 1);
        for (int i = 0; i < 2; i++)
            pthread_join(th[i], NULL);
        ck_assert_msg(x.st == y.st, "%s at %.2f: status %d, then %d", what, fr[f], x.st, y.st);
        if (x.st == REMAT_OK) {
            tl->cases++;
            const char *px = x.plan.params_json, *py = y.plan.params_json;
            ck_assert_msg(px && py && strcmp(px, py) == 0, "%s at %.2f: params differ:\n%s\n%s", what, fr[f],
                          px ? px : "(none)", py ? py : "(none)");
            ck_assert_msg(x.extra == y.extra, "%s at %.2f: %llu extra FLOPs, then %llu", what, fr[f],
                          (unsigned long long)x.extra, (unsigned long long)y.extra);
            ck_assert_msg(x.plan.schedule.n == y.plan.schedule.n &&
                              memcmp(x.plan.schedule.ins, y.plan.schedule.ins,
                                     x.plan.schedule.n * sizeof *x.plan.schedule.ins) == 0,
                          "%s at %.2f: the schedules differ", what, fr[f]);
            tl->exact_ran += strstr(px, "\"exact\": {") != NULL;
            tl->work_stopped += strstr(px, "\"status\": \"work_limit\"") != NULL;
        }
        if (x.st == REMAT_OK || x.st == REMAT_EINFEASIBLE)
            remat_plan_destroy(&x.plan);
        if (y.st == REMAT_OK || y.st == REMAT_EINFEASIBLE)
            remat_plan_destroy(&y.plan);
    }
}

START_TEST(auto_should_give_the_same_plan_under_different_timing)
{
    tally tl = {0, 0, 0};
    static const char *const bundled[] = {"resnet8"};
    for (size_t i = 0; i < sizeof bundled / sizeof bundled[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "graphs/%s.json", bundled[i]);
        remat_graph *g = NULL;
        remat_analysis *a = NULL;
        remat_err err;
        remat_err_init(&err);
        ck_assert_msg(remat_graph_load_file(path, &g, &err) == REMAT_OK, "%s", err.msg);
        ck_assert_msg(remat_analyze(g, &a, &err) == REMAT_OK, "%s", err.msg);
        same_plan(a, bundled[i], &tl);
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
    }
    static const struct {
        uint32_t width, layers;
        uint64_t seed;
    } lay[] = {{4, 8, 3}};
    for (size_t i = 0; i < sizeof lay / sizeof lay[0]; i++) {
        remat_gen_opts o;
        remat_gen_opts_init(&o, REMAT_GEN_LAYERED);
        o.width = lay[i].width;
        o.layers = lay[i].layers;
        o.seed = lay[i].seed;
        remat_graph *g;
        remat_analysis *a = load_gen(&o, &g);
        char what[64];
        snprintf(what, sizeof what, "layered w%u l%u seed %llu", lay[i].width, lay[i].layers,
                 (unsigned long long)lay[i].seed);
        same_plan(a, what, &tl);
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
    }
    /* Random graphs of the executor oracle's generator: few ops, many
     * tensors (multi-output ops, views), so the class search does not take
     * them and exact's program is small enough for branch and bound. */
    uint64_t seed = 0xa070;
    char *json = malloc(1 << 16);
    ck_assert(json);
    for (int k = 0; k < 5; k++) {
        spec G;
        spec_generate(&seed, &G);
        size_t len = spec_json(&G, json, 1 << 16);
        remat_graph *g = NULL;
        remat_err err;
        remat_err_init(&err);
        ck_assert_msg(remat_graph_load_json(json, len, "random.json", &g, &err) == REMAT_OK, "%s", err.msg);
        remat_analysis *a = NULL;
        ck_assert_msg(remat_analyze(g, &a, &err) == REMAT_OK, "%s", err.msg);
        char what[64];
        snprintf(what, sizeof what, "random graph %d", k);
        same_plan(a, what, &tl);
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
    }
    free(json);
    printf("auto under different timing: %u plans identical, exact ran in %u, its work limit stopped it in %u\n",
           tl.cases, tl.exact_ran, tl.work_stopped);
    ck_assert_uint_ge(tl.cases, 5);
    ck_assert_uint_gt(tl.exact_ran, 0);
    ck_assert_uint_gt(tl.work_stopped, 0);
}
END_TEST

Suite *auto_suite(void)
{
    Suite *s = suite_create("auto");
    TCase *tc = tcase_create("auto");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, auto_should_give_the_same_plan_under_different_timing);
    suite_add_tcase(s, tc);
    return s;
}

/*
 * check_time_tp.c - tensor-parallel collectives on the timeline, and the
 * step-time objective, on one rank of `gen transformer --tp 4`.
 *
 * The closed form is the ring's (Thakur et al. 2005, section 4; remat's
 * remat_time_collective is checked against it in check_time.c, and here it
 * is written out again from the device's figures): an all-reduce of B
 * bytes over N ranks takes 2(N-1)(alpha + B/(N beta)). Store-all, every
 * collective's consumer comes right after it, so nothing hides it: the
 * step is the compute stream's busy time plus all of the communication.
 */
#include "test_util.h"
#include "remat/gen.h"
#include "remat/time.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const uint32_t S = 128, B = 2, H = 256, A = 4, L = 4, T = 4;

static remat_graph *rank_graph(void)
{
    remat_gen_opts o;
    remat_gen_opts_init(&o, REMAT_GEN_TRANSFORMER);
    o.seq = S;
    o.batch = B;
    o.hidden = H;
    o.heads = A;
    o.layers = L;
    o.vocab = 1024;
    o.dropout = true;
    o.tp = T;
    remat_err err;
    remat_err_init(&err);
    size_t len = 0;
    char *json = remat_gen_json(&o, &len, &err);
    ck_assert_msg(json != NULL, "%s", err.msg);
    remat_graph *g = t_load(json);
    remat_free(json);
    return g;
}

START_TEST(timeline_should_run_tensor_parallel_all_reduces_on_the_ring)
{
    remat_graph *g = rank_graph();
    remat_err err;
    remat_err_init(&err);
    remat_analysis *a = NULL;
    ck_assert_int_eq(remat_analyze(g, &a, &err), REMAT_OK);
    remat_device d;
    ck_assert_int_eq(remat_device_preset("a100-sxm-80gb", &d, &err), REMAT_OK);
    remat_op_times t;
    ck_assert_int_eq(remat_op_times_init(a, &d, &t, &err), REMAT_OK);
    remat_schedule s;
    remat_schedule_init(&s);
    ck_assert_int_eq(remat_schedule_store_all(a, &s, &err), REMAT_OK);
    remat_timeline tl;
    ck_assert_int_eq(remat_timeline_run(a, &s, NULL, &d, &t, &tl, &err), REMAT_OK);
    /* 2 forward (g) and 2 backward (f) all-reduces of the (s, b, h) fp16
     * activation per layer. */
    const double bytes = 2.0 * S * B * H, n = T;
    const double one = 2 * (n - 1) * (d.link_latency + bytes / (n * d.link_bandwidth));
    ck_assert_msg(fabs(tl.comm_time - 4 * L * one) <= 1e-9 * tl.comm_time, "comm %.12g s, closed form %.12g s",
                  tl.comm_time, 4 * L * one);
    uint32_t on_comm = 0;
    for (size_t i = 0; i < tl.n; i++)
        on_comm += tl.stream[i] == REMAT_STREAM_COMM;
    ck_assert_uint_eq(on_comm, 4 * L);
    ck_assert(fabs(tl.step_time - (tl.compute_time + tl.comm_time)) <= 1e-9 * tl.step_time);
    ck_assert(fabs(tl.exposed_comm - tl.comm_time) <= 1e-9 * tl.step_time);
    /* The same per op, as the objective prices them. */
    double *cf = calloc(g->n_ops, sizeof *cf), *cb = calloc(g->n_ops, sizeof *cb);
    ck_assert_int_eq(remat_time_op_collectives(g, &d, cf, cb, &err), REMAT_OK);
    double sum = 0;
    for (uint32_t k = 0; k < g->n_ops; k++)
        sum += cf[k] + cb[k];
    ck_assert(fabs(sum - 4 * L * one) <= 1e-9 * sum);
    free(cf);
    free(cb);
    remat_timeline_destroy(&tl);
    remat_schedule_destroy(&s);
    remat_op_times_destroy(&t);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

static double planned_step(const remat_analysis *a, const remat_device *d, remat_objective obj, uint64_t budget,
                           uint64_t *peak)
{
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.budget_kind = REMAT_BUDGET_TOTAL;
    o.budget = budget;
    o.objective = obj;
    o.device = d;
    remat_plan p;
    remat_replay_result r;
    remat_err err;
    remat_err_init(&err);
    ck_assert_msg(remat_plan_make(a, &o, &p, &r, &err) == REMAT_OK, "%s", err.msg);
    ck_assert(r.valid);
    *peak = r.peak_bytes;
    remat_op_times t;
    ck_assert_int_eq(remat_op_times_init(a, d, &t, &err), REMAT_OK);
    remat_timeline tl;
    ck_assert_int_eq(remat_timeline_run(a, &p.schedule, NULL, d, &t, &tl, &err), REMAT_OK);
    double v = tl.step_time;
    remat_timeline_destroy(&tl);
    remat_op_times_destroy(&t);
    remat_replay_result_destroy(&r);
    remat_plan_destroy(&p);
    return v;
}

/* At 6 MiB the time objective rebuilds dropped segments through their
 * all-reduces (a view costs nothing to recompute), and every rebuilt
 * all-reduce runs on the ring again; the step-time objective does not.
 * At every budget it is never slower (the time plan is one it chooses
 * from), and its replayed peak meets the budget. */
START_TEST(step_time_objective_should_beat_the_time_objective_on_a_tp_rank)
{
    remat_graph *g = rank_graph();
    remat_err err;
    remat_err_init(&err);
    remat_analysis *a = NULL;
    ck_assert_int_eq(remat_analyze(g, &a, &err), REMAT_OK);
    remat_device d;
    ck_assert_int_eq(remat_device_preset("a100-sxm-80gb", &d, &err), REMAT_OK);
    static const uint64_t budgets[] = {6u << 20, 5767168, 7u << 20};
    for (size_t i = 0; i < 3; i++) {
        uint64_t p_time, p_step;
        double time = planned_step(a, &d, REMAT_OBJECTIVE_TIME, budgets[i], &p_time);
        double step = planned_step(a, &d, REMAT_OBJECTIVE_STEP_TIME, budgets[i], &p_step);
        ck_assert_uint_le(p_time, budgets[i]);
        ck_assert_uint_le(p_step, budgets[i]);
        ck_assert_msg(step <= time, "budget %llu: step-time %.9g s above time's %.9g s",
                      (unsigned long long)budgets[i], step, time);
        if (i == 0)
            ck_assert_msg(step < 0.95 * time, "6 MiB: step-time %.9g s, time %.9g s", step, time);
    }
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

Suite *time_tp_suite(void)
{
    Suite *s = suite_create("time_tp");
    TCase *tc = tcase_create("tp");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, timeline_should_run_tensor_parallel_all_reduces_on_the_ring);
    tcase_add_test(tc, step_time_objective_should_beat_the_time_objective_on_a_tp_rank);
    suite_add_tcase(s, tc);
    return s;
}

/*
 * check_pipeline.c - pipeline schedules against their closed forms, and the
 * per-device bytes against a chain worked by hand.
 *
 * With equal stage times (forward f, backward b) every schedule's step is
 * known in closed form: GPipe and 1F1B take (M + P - 1)(f + b), so the
 * bubble is (P - 1)/(M + P - 1) of device time and (P - 1)/M of the ideal
 * M(f + b) (Narayanan et al. 2021 section 2.2.1); interleaved with V chunks
 * of f/V and b/V each takes M(f + b) + (P - 1)(f + b)/V, a bubble of
 * (P - 1)/(V M) of the ideal (section 2.2.2). Microbatches in flight: 1F1B
 * stage s holds min(P - s, M) (the first holds P), GPipe M, interleaved
 * device d min((P - d - 1) * 2 + (V - 1) * P + 1, V M) chunk-microbatches
 * (Megatron-LM's warm-up count, plus the one its steady state adds).
 */
#include "test_util.h"

#include <math.h>
#include <stdlib.h>

static void uniform(remat_pp_config *c, double f, double b, remat_pp_timeline *t)
{
    uint32_t n = c->stages * c->chunks;
    double *fw = malloc(n * sizeof *fw), *bw = malloc(n * sizeof *bw);
    for (uint32_t i = 0; i < n; i++) {
        fw[i] = f / c->chunks;
        bw[i] = b / c->chunks;
    }
    remat_err err;
    remat_err_init(&err);
    ck_assert_msg(remat_pp_simulate(c, fw, bw, t, &err) == REMAT_OK, "%s", err.msg);
    free(fw);
    free(bw);
}

START_TEST(pipeline_should_have_the_closed_form_bubble)
{
    static const uint32_t Ps[] = {1, 2, 3, 4, 8}, Ms[] = {1, 2, 4, 7, 8, 16};
    for (int kind = 0; kind < 2; kind++)
        for (size_t i = 0; i < 5; i++)
            for (size_t j = 0; j < 6; j++) {
                const uint32_t P = Ps[i], M = Ms[j];
                remat_pp_config c = {kind ? REMAT_PP_1F1B : REMAT_PP_GPIPE, P, M, 1};
                remat_pp_timeline t;
                uniform(&c, 1, 2, &t);
                ck_assert_double_eq_tol(t.step_time, (M + P - 1) * 3.0, 1e-9);
                ck_assert_double_eq_tol(t.bubble_fraction, (P - 1.0) / (M + P - 1.0), 1e-12);
                ck_assert_double_eq_tol(t.bubble_ratio, (P - 1.0) / M, 1e-12);
                for (uint32_t s = 0; s < P; s++)
                    ck_assert_uint_eq(t.max_in_flight[s], kind ? (P - s < M ? P - s : M) : M);
                remat_pp_timeline_destroy(&t);
            }
}
END_TEST

START_TEST(interleaved_should_shrink_the_bubble_by_v)
{
    static const uint32_t Ps[] = {2, 3, 4}, Vs[] = {2, 3, 4}, Ks[] = {1, 2, 4};
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 3; j++)
            for (size_t k = 0; k < 3; k++) {
                const uint32_t P = Ps[i], V = Vs[j], M = P * Ks[k];
                remat_pp_config c = {REMAT_PP_INTERLEAVED, P, M, V};
                remat_pp_timeline t;
                uniform(&c, 1, 2, &t);
                ck_assert_msg(fabs(t.step_time - (M * 3.0 + (P - 1) * 3.0 / V)) < 1e-9,
                              "P=%u V=%u M=%u: step %.6f, closed form %.6f", P, V, M, t.step_time,
                              M * 3.0 + (P - 1) * 3.0 / V);
                ck_assert_double_eq_tol(t.bubble_ratio, (P - 1.0) / (V * M), 1e-9);
                ck_assert_double_eq_tol(t.bubble_fraction, (P - 1.0) / (V * M + P - 1.0), 1e-9);
                for (uint32_t d = 0; d < P; d++) {
                    uint32_t w = (P - d - 1) * 2 + (V - 1) * P + 1;
                    ck_assert_uint_eq(t.max_in_flight[d], w < V * M ? w : V * M);
                }
                remat_pp_timeline_destroy(&t);
            }
}
END_TEST

START_TEST(pipeline_should_refuse_bad_configs)
{
    remat_pp_config c = {REMAT_PP_1F1B, 4, 8, 1};
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_pp_parse_schedule("interleaved:1", &c, &err), REMAT_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "V must be a whole number from 2"));
    remat_err_init(&err);
    ck_assert_int_eq(remat_pp_parse_schedule("zigzag", &c, &err), REMAT_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "expected gpipe, 1f1b or interleaved:V"));
    ck_assert_int_eq(remat_pp_parse_schedule("interleaved:3", &c, &err), REMAT_OK);
    c.microbatches = 6;
    remat_err_init(&err);
    ck_assert_int_eq(remat_pp_check(&c, &err), REMAT_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "multiple of `stages` (4)"));
    uint32_t cuts[3];
    remat_err_init(&err);
    ck_assert_int_eq(remat_pp_parse_stages("0:3,4:8", 8, 2, cuts, &err), REMAT_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "entry 2 (4:8) must start at 3"));
    remat_err_init(&err);
    ck_assert_int_eq(remat_pp_parse_stages("0:3,3:7", 8, 2, cuts, &err), REMAT_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "ending at 8"));
    ck_assert_int_eq(remat_pp_parse_stages("0:3,3:8", 8, 2, cuts, &err), REMAT_OK);
    ck_assert_uint_eq(cuts[1], 3);
}
END_TEST

/* A chain of 8 ops, 1 MiB activations, a 1 KiB param per op, cut 0:4, 4:8.
 * Each op saves its inputs, so between its forward and its backward one
 * microbatch leaves on each stage exactly five tensors: stage 0 its input x
 * and t1..t3, which its backward reads, and t4, which it sent (the runtime
 * keeps a sent output until the backward: torch.autograd.backward's
 * argument); stage 1 the received t4 and t5..t7 and its output, the loss.
 * A device's peak then grows by 5 MiB per extra microbatch in flight: 1F1B
 * device 0 holds min(2, M), GPipe M. */
static remat_graph *chain8(void)
{
    remat_gen_opts o;
    remat_gen_opts_init(&o, REMAT_GEN_CHAIN);
    o.ops = 8;
    o.param_bytes = 1024;
    remat_err err;
    remat_err_init(&err);
    char *json = remat_gen_json(&o, NULL, &err);
    ck_assert_ptr_nonnull(json);
    remat_graph *g = t_load(json);
    remat_free(json);
    return g;
}

static void plan_chain(const remat_analysis *a, remat_pp_kind kind, uint32_t M, uint64_t budget, remat_pp_result *r,
                       remat_status want)
{
    static const uint32_t cuts[] = {0, 4, 8};
    remat_pp_config c = {kind, 2, M, 1};
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.strategy = budget ? "auto" : "store-all";
    if (budget) {
        o.budget_kind = REMAT_BUDGET_TOTAL;
        o.budget = budget;
    }
    remat_err err;
    remat_err_init(&err);
    remat_status st = remat_pp_plan(a, &c, cuts, REMAT_PP_BALANCE_FLOPS, &o, r, &err);
    ck_assert_msg(st == want, "status %d: %s", st, err.msg);
}

START_TEST(pipeline_should_hold_each_in_flight_microbatch)
{
    remat_graph *g = chain8();
    remat_analysis *a = NULL;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_analyze(g, &a, &err), REMAT_OK);
    const uint64_t MiB = 1u << 20;
    remat_pp_result one, r;
    plan_chain(a, REMAT_PP_1F1B, 1, 0, &one, REMAT_OK);
    for (uint32_t v = 0; v < 2; v++) {
        ck_assert_uint_eq(one.stages[v].held, 5 * MiB);
        ck_assert_uint_eq(one.stages[v].persistent, 2 * 4 * 1024); /* 4 params and their gradients */
    }
    ck_assert_uint_eq(one.stages[0].send_bytes, MiB);
    ck_assert_uint_eq(one.stages[1].recv_bytes, MiB);
    for (uint32_t M = 1; M <= 6; M++) {
        plan_chain(a, REMAT_PP_1F1B, M, 0, &r, REMAT_OK);
        ck_assert_uint_eq(r.timeline.max_in_flight[0], M < 2 ? M : 2);
        ck_assert_uint_eq(r.device_peak[0] - one.device_peak[0], ((M < 2 ? M : 2) - 1) * 5 * MiB);
        ck_assert_uint_eq(r.device_peak[1], one.device_peak[1]); /* the last stage holds one */
        ck_assert_uint_eq(r.largest, 0);
        remat_pp_result_destroy(&r);
        plan_chain(a, REMAT_PP_GPIPE, M, 0, &r, REMAT_OK);
        ck_assert_uint_eq(r.device_peak[0] - one.device_peak[0], (M - 1) * 5 * MiB);
        ck_assert_uint_eq(r.device_peak[1] - one.device_peak[1], (M - 1) * 5 * MiB);
        remat_pp_result_destroy(&r);
    }
    remat_pp_result_destroy(&one);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* Under a budget between the two devices' store-all peaks, only the first
 * device (which holds two microbatches) recomputes, and both fit. */
START_TEST(pipeline_should_plan_each_device_under_the_budget)
{
    remat_graph *g = chain8();
    remat_analysis *a = NULL;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_analyze(g, &a, &err), REMAT_OK);
    remat_pp_result sa, r;
    plan_chain(a, REMAT_PP_1F1B, 4, 0, &sa, REMAT_OK);
    ck_assert_uint_gt(sa.device_peak[0], sa.device_peak[1]);
    uint64_t budget = sa.device_peak[1] + (sa.device_peak[0] - sa.device_peak[1]) / 2;
    plan_chain(a, REMAT_PP_1F1B, 4, budget, &r, REMAT_OK);
    ck_assert_uint_le(r.device_peak[0], budget);
    ck_assert_uint_le(r.device_peak[1], budget);
    ck_assert_uint_gt(r.stages[0].replay.flops_recompute, 0);
    ck_assert_uint_eq(r.stages[1].replay.flops_recompute, 0);
    remat_pp_result_destroy(&r);
    /* Below what the first device can reach at all: refused, naming it. */
    remat_pp_result bad;
    remat_pp_config c = {REMAT_PP_GPIPE, 2, 4, 1};
    static const uint32_t cuts[] = {0, 4, 8};
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.budget_kind = REMAT_BUDGET_TOTAL;
    o.budget = sa.device_peak[1] / 2;
    remat_err_init(&err);
    ck_assert_int_eq(remat_pp_plan(a, &c, cuts, REMAT_PP_BALANCE_FLOPS, &o, &bad, &err), REMAT_EINFEASIBLE);
    ck_assert_ptr_nonnull(strstr(err.msg, "device 0"));
    remat_pp_result_destroy(&bad);
    remat_pp_result_destroy(&sa);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

Suite *pipeline_suite(void)
{
    Suite *s = suite_create("pipeline");
    TCase *tc = tcase_create("pipeline");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, pipeline_should_have_the_closed_form_bubble);
    tcase_add_test(tc, interleaved_should_shrink_the_bubble_by_v);
    tcase_add_test(tc, pipeline_should_refuse_bad_configs);
    tcase_add_test(tc, pipeline_should_hold_each_in_flight_microbatch);
    tcase_add_test(tc, pipeline_should_plan_each_device_under_the_budget);
    suite_add_tcase(s, tc);
    return s;
}

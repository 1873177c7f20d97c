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
 *
 * In time (a device): a chain whose ops carry measured durations gives each
 * stage f = k x duration_ns and b = k x bwd_duration_ns, and with a free
 * link the closed forms hold in seconds; with a costly link, a two-stage
 * 1F1B of two microbatches is worked by hand below (the sends' times, each
 * device's exposed wait, the bubble).
 */
#include "test_util.h"
#include "util/util_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    return t_gen_chain(8, 1024);
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

/* P = 2, M = 2, 1F1B, f = b = 1, every send 0.5, worked by hand:
 *   device 0: F0 [0,1] F1 [1,2] B0 [4,5] B1 [6,7]
 *   device 1: F0 [1.5,2.5] B0 [2.5,3.5] F1 [3.5,4.5] B1 [4.5,5.5]
 *   sends:    act0 [1,1.5], act1 [2,2.5] (after F1 ends), grad0 [3.5,4], grad1 [5.5,6]
 * Device 1 waits 0.5 for act0 (F1 finds act1 there); device 0 waits 0.5
 * for grad0 (B0's producer ended at 3.5, it arrives at 4) and 0.5 for grad1:
 * step 7, exposed 1 + 0.5, bubble 2 x 7 - 8 - 1.5 = 4.5. With a free link
 * the same schedule takes 6 and its bubble is 4, (P-1)/(M+P-1) = 1/3. */
START_TEST(pipeline_should_wait_for_its_sends)
{
    remat_pp_config c = {REMAT_PP_1F1B, 2, 2, 1};
    const double f[] = {1, 1}, b[] = {1, 1}, half[] = {0.5, 0.5}, zero[] = {0, 0};
    remat_pp_link link = {half, half};
    remat_pp_timeline t;
    remat_err err;
    remat_err_init(&err);
    ck_assert_msg(remat_pp_simulate_linked(&c, f, b, &link, &t, &err) == REMAT_OK, "%s", err.msg);
    ck_assert_double_eq_tol(t.step_time, 7, 1e-12);
    ck_assert_double_eq_tol(t.busy, 8, 1e-12);
    ck_assert_double_eq_tol(t.device_exposed[0], 1, 1e-12);
    ck_assert_double_eq_tol(t.device_exposed[1], 0.5, 1e-12);
    ck_assert_double_eq_tol(t.exposed_comm, 1.5, 1e-12);
    ck_assert_double_eq_tol(t.bubble_time, 4.5, 1e-12);
    ck_assert_double_eq_tol(t.bubble_fraction, 4.5 / 14, 1e-12);
    ck_assert_uint_eq(t.n_sends, 4);
    const double want[4][2] = {{1, 1.5}, {2, 2.5}, {3.5, 4}, {5.5, 6}}; /* act0, act1, grad0, grad1 */
    int seen = 0;
    for (size_t i = 0; i < t.n_sends; i++) {
        const remat_pp_send *x = &t.sends[i];
        ck_assert_uint_eq(x->from, x->backward ? 1 : 0);
        ck_assert_uint_eq(x->to, x->backward ? 0 : 1);
        const double *w = want[x->backward * 2 + x->microbatch];
        ck_assert_double_eq_tol(x->start, w[0], 1e-12);
        ck_assert_double_eq_tol(x->end, w[1], 1e-12);
        seen |= 1 << (x->backward * 2 + x->microbatch);
    }
    ck_assert_int_eq(seen, 15);
    remat_pp_timeline_destroy(&t);
    link.act = link.grad = zero;
    ck_assert_int_eq(remat_pp_simulate_linked(&c, f, b, &link, &t, &err), REMAT_OK);
    ck_assert_double_eq_tol(t.step_time, 6, 1e-12);
    ck_assert_double_eq_tol(t.exposed_comm, 0, 1e-12);
    ck_assert_double_eq_tol(t.bubble_fraction, 1.0 / 3, 1e-12);
    remat_pp_timeline_destroy(&t);
    /* A negative send time is refused, naming the stage. */
    const double bad[] = {0.5, -1};
    link.act = half;
    link.grad = bad;
    remat_err_init(&err);
    ck_assert_int_eq(remat_pp_simulate_linked(&c, f, b, &link, &t, &err), REMAT_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "stage 1: send times must be finite"));
    remat_pp_timeline_destroy(&t);
}
END_TEST

/* A chain of n ops x -> h0 -> ... -> h{n-1} (the loss), each reading its
 * own 1 KiB param, 4 KiB activations, every op measured at 1000 ns forward
 * and 2000 ns backward. */
static remat_graph *measured_chain(uint32_t n)
{
    char *buf = malloc(256 + (size_t)n * 320);
    size_t len = (size_t)sprintf(buf, "{\"format\": \"remat-graph\", \"version\": 1, \"inputs\": [{\"id\": \"x\", "
                                      "\"bytes\": 4096}], \"params\": [");
    for (uint32_t i = 0; i < n; i++)
        len += (size_t)sprintf(buf + len, "%s{\"id\": \"w%u\", \"bytes\": 1024}", i ? ", " : "", i);
    len += (size_t)sprintf(buf + len, "], \"ops\": [");
    for (uint32_t i = 0; i < n; i++) {
        char prev[16];
        if (i)
            snprintf(prev, sizeof prev, "h%u", i - 1);
        else
            snprintf(prev, sizeof prev, "x");
        len += (size_t)sprintf(buf + len,
                               "%s{\"id\": \"h%u\", \"op\": \"matmul\", \"inputs\": [\"%s\", \"w%u\"], \"bytes\": 4096, "
                               "\"flops\": 1000, \"attrs\": {\"duration_ns\": 1000, \"bwd_duration_ns\": 2000}}",
                               i ? ", " : "", i, prev, i);
    }
    sprintf(buf + len, "], \"outputs\": [\"h%u\"]}", n - 1);
    remat_graph *g = t_load(buf);
    free(buf);
    return g;
}

/* The closed forms in seconds: P stages of k measured ops each take
 * f = k us forward and b = 2k us backward; on a device whose link is free
 * (no latency, a bandwidth no send notices) GPipe and 1F1B take
 * (M + P - 1)(f + b), the bubble is (P-1)/(M+P-1); with a latency alpha
 * and bandwidth beta each stage's send is alpha + 4096 / beta. */
START_TEST(pipeline_should_have_the_closed_form_bubble_in_seconds)
{
    remat_device d;
    memset(&d, 0, sizeof d);
    snprintf(d.name, sizeof d.name, "test");
    d.peak_flops[REMAT_DTYPE_F32] = 1e12;
    d.mem_bandwidth = 1e12;
    d.link_bandwidth = 1e300;
    d.default_dtype = REMAT_DTYPE_F32;
    const uint32_t k = 3;
    for (uint32_t P = 1; P <= 4; P++) {
        remat_graph *g = measured_chain(P * k);
        remat_analysis *a = NULL;
        remat_err err;
        remat_err_init(&err);
        ck_assert_int_eq(remat_analyze(g, &a, &err), REMAT_OK);
        uint32_t cuts[5];
        for (uint32_t s = 0; s <= P; s++)
            cuts[s] = s * k;
        for (int kind = 0; kind < 2; kind++)
            for (uint32_t M = 1; M <= 8; M += 3) {
                remat_pp_config c = {kind ? REMAT_PP_1F1B : REMAT_PP_GPIPE, P, M, 1};
                remat_plan_options o;
                remat_plan_options_init(&o);
                o.strategy = "store-all";
                o.device = &d;
                d.link_latency = 0;
                d.link_bandwidth = 1e300;
                remat_pp_result r;
                ck_assert_msg(remat_pp_plan(a, &c, cuts, REMAT_PP_BALANCE_FLOPS, &o, &r, &err) == REMAT_OK, "%s",
                              err.msg);
                ck_assert(r.timed);
                const double f = k * 1e-6, b = k * 2e-6;
                for (uint32_t s = 0; s < P; s++) {
                    ck_assert_double_eq_tol(r.stages[s].fwd_time, f, 1e-15);
                    ck_assert_double_eq_tol(r.stages[s].bwd_time, b, 1e-15);
                    ck_assert_uint_eq(r.stages[s].n_measured, 2 * k);
                }
                ck_assert_double_eq_tol(r.timeline.step_time, (M + P - 1) * (f + b), 1e-15);
                ck_assert_double_eq_tol(r.timeline.bubble_fraction, (P - 1.0) / (M + P - 1.0), 1e-9);
                ck_assert_double_eq_tol(r.timeline.exposed_comm, 0, 1e-15);
                remat_pp_result_destroy(&r);
                /* A link of 1 us latency and 4096 B/us: every send takes
                 * 2 us; at M = 1 each boundary is crossed once each way on
                 * the critical path. */
                d.link_latency = 1e-6;
                d.link_bandwidth = 4096e6;
                ck_assert_int_eq(remat_pp_plan(a, &c, cuts, REMAT_PP_BALANCE_FLOPS, &o, &r, &err), REMAT_OK);
                for (uint32_t s = 0; s < P; s++) {
                    ck_assert_double_eq_tol(r.stages[s].act_send_time, s + 1 < P ? 2e-6 : 0, 1e-15);
                    ck_assert_double_eq_tol(r.stages[s].grad_send_time, s > 0 ? 2e-6 : 0, 1e-15);
                }
                if (M == 1)
                    ck_assert_double_eq_tol(r.timeline.step_time, P * (f + b) + 2 * (P - 1) * 2e-6, 1e-15);
                ck_assert_double_eq_tol(r.timeline.exposed_comm + r.timeline.bubble_time + r.timeline.busy,
                                        P * r.timeline.step_time, 1e-12);
                remat_pp_result_destroy(&r);
            }
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
    }
}
END_TEST

/* A pipeline plan file read back replays to the same devices: for each
 * schedule, under a budget that makes the first device recompute, every
 * device's peak, every stage's recomputation and the step are equal. */
START_TEST(pipeline_plan_file_should_replay_to_the_same_devices)
{
    remat_graph *g = chain8();
    remat_analysis *a = NULL;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_analyze(g, &a, &err), REMAT_OK);
    const remat_pp_config cs[] = {{REMAT_PP_1F1B, 2, 4, 1}, {REMAT_PP_GPIPE, 2, 3, 1}, {REMAT_PP_INTERLEAVED, 2, 4, 2}};
    for (size_t i = 0; i < 3; i++) {
        remat_plan_options o;
        remat_plan_options_init(&o);
        remat_pp_result sa, r, back;
        ck_assert_msg(remat_pp_plan(a, &cs[i], NULL, REMAT_PP_BALANCE_FLOPS, &o, &sa, &err) == REMAT_OK, "%s", err.msg);
        /* The loosest budget (in 1% steps) at which some stage recomputes;
         * interleaved's two-op stages of this chain cannot, so it keeps
         * the store-all peak as its budget. */
        o.budget_kind = REMAT_BUDGET_TOTAL;
        int found = 0;
        const int interleaved = cs[i].kind == REMAT_PP_INTERLEAVED;
        for (uint64_t pct = 99; pct >= 50 && !found; pct--) {
            o.budget = interleaved ? sa.device_peak[sa.largest] : sa.device_peak[sa.largest] / 100 * pct;
            remat_err_init(&err);
            if (remat_pp_plan(a, &cs[i], NULL, REMAT_PP_BALANCE_FLOPS, &o, &r, &err) != REMAT_OK) {
                remat_pp_result_destroy(&r);
                continue;
            }
            found = interleaved;
            for (uint32_t v = 0; v < r.n_stages; v++)
                found |= r.stages[v].replay.flops_recompute > 0;
            if (!found)
                remat_pp_result_destroy(&r);
        }
        ck_assert_msg(found, "schedule %zu: no budget made a stage recompute", i);
        size_t len;
        char *text = remat_pp_plan_write(a, &r, &len, &err);
        ck_assert_msg(text != NULL, "%s", err.msg);
        ck_assert(remat_pp_plan_sniff(text, len));
        ck_assert_msg(remat_pp_plan_load_json(a, text, len, "rt", NULL, &back, &err) == REMAT_OK, "%s", err.msg);
        ck_assert_uint_eq(back.budget, o.budget);
        ck_assert_uint_eq(back.n_stages, r.n_stages);
        for (uint32_t d = 0; d < 2; d++) {
            ck_assert_uint_eq(back.device_peak[d], r.device_peak[d]);
            ck_assert_uint_le(back.device_peak[d], o.budget);
        }
        double extra = 0;
        for (uint32_t v = 0; v < r.n_stages; v++) {
            ck_assert_uint_eq(back.stages[v].replay.flops_recompute, r.stages[v].replay.flops_recompute);
            ck_assert_uint_eq(back.stages[v].held, r.stages[v].held);
            extra += (double)r.stages[v].replay.flops_recompute;
        }
        ck_assert(interleaved || extra > 0);
        ck_assert_double_eq_tol(back.timeline.step_time, r.timeline.step_time, 1e-6 * r.timeline.step_time);
        remat_free(text);
        remat_pp_result_destroy(&back);
        remat_pp_result_destroy(&r);
        remat_pp_result_destroy(&sa);
    }
    /* Not a pipeline plan: sniffed as such, and refused with its path. */
    const char *single = "{\"format\": \"remat-plan\", \"version\": 1}";
    ck_assert(!remat_pp_plan_sniff(single, strlen(single)));
    const char *badv = "{\"format\": \"remat-pp-plan\", \"version\": 2}";
    remat_pp_result back;
    remat_err_init(&err);
    ck_assert_int_eq(remat_pp_plan_load_json(a, badv, strlen(badv), "v2.json", NULL, &back, &err), REMAT_EPARSE);
    ck_assert_ptr_nonnull(strstr(err.msg, "v2.json: version: must be 1"));
    remat_pp_result_destroy(&back);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* Each stage's own training state is held once per device, beside its
 * params: with 8192 B of optimizer state and 4096 B of master weights per
 * stage, every device's peak rises by exactly 12288 B per chunk it runs,
 * for store-all and under a budget that makes device 0 recompute (where
 * the state must fit beside the activations, so the plan recomputes more). */
START_TEST(pipeline_should_hold_each_stage_state_once)
{
    remat_graph *g = chain8();
    remat_analysis *a = NULL;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_analyze(g, &a, &err), REMAT_OK);
    const remat_pp_config cs[] = {{REMAT_PP_1F1B, 2, 4, 1}, {REMAT_PP_INTERLEAVED, 2, 4, 2}};
    for (size_t i = 0; i < 2; i++) {
        const uint32_t n = cs[i].stages * cs[i].chunks;
        remat_exec_extras x[4];
        memset(x, 0, sizeof x);
        for (uint32_t v = 0; v < n; v++) {
            x[v].optimizer_state = 8192;
            x[v].master_weights = 4096;
        }
        remat_plan_options o;
        remat_plan_options_init(&o);
        o.strategy = "store-all";
        remat_pp_result bare, with;
        ck_assert_int_eq(remat_pp_plan(a, &cs[i], NULL, REMAT_PP_BALANCE_FLOPS, &o, &bare, &err), REMAT_OK);
        ck_assert_msg(remat_pp_plan_staged(a, &cs[i], NULL, REMAT_PP_BALANCE_FLOPS, &o, x, &with, &err) == REMAT_OK,
                      "%s", err.msg);
        for (uint32_t d = 0; d < 2; d++)
            ck_assert_uint_eq(with.device_peak[d] - bare.device_peak[d], 12288u * cs[i].chunks);
        for (uint32_t v = 0; v < n; v++)
            ck_assert_uint_eq(with.stages[v].persistent - bare.stages[v].persistent, 12288);
        /* Read back from a plan file, the state is still there. */
        size_t len;
        char *text = remat_pp_plan_write(a, &with, &len, &err);
        ck_assert_ptr_nonnull(text);
        remat_pp_result back;
        ck_assert_msg(remat_pp_plan_load_json(a, text, len, "x", NULL, &back, &err) == REMAT_OK, "%s", err.msg);
        for (uint32_t d = 0; d < 2; d++)
            ck_assert_uint_eq(back.device_peak[d], with.device_peak[d]);
        remat_free(text);
        remat_pp_result_destroy(&back);
        remat_pp_result_destroy(&with);
        remat_pp_result_destroy(&bare);
    }
    /* State in the plan options is refused: it belongs to the stages. */
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.extras.optimizer_state = 1;
    remat_pp_config c = {REMAT_PP_1F1B, 2, 2, 1};
    remat_pp_result r;
    remat_err_init(&err);
    ck_assert_int_eq(remat_pp_plan(a, &c, NULL, REMAT_PP_BALANCE_FLOPS, &o, &r, &err), REMAT_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "goes per stage"));
    remat_pp_result_destroy(&r);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* One pipeline job: plan (timed, under a budget), write its plan file, read
 * it back, trace it. *peak and *doc: the figures to compare. */
static remat_status pp_job(const remat_analysis *a, const remat_device *d, uint64_t budget, uint64_t *peak,
                           size_t *doc, remat_err *err)
{
    const remat_pp_config c = {REMAT_PP_1F1B, 2, 3, 1};
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.strategy = "revolve";
    o.budget_kind = REMAT_BUDGET_TOTAL;
    o.budget = budget;
    o.device = d;
    remat_pp_result r, back;
    memset(&back, 0, sizeof back);
    *peak = 0;
    *doc = 0;
    remat_status st = remat_pp_plan(a, &c, NULL, REMAT_PP_BALANCE_FLOPS, &o, &r, err);
    char *text = NULL, *trace = NULL;
    size_t len = 0, tlen = 0;
    if (st == REMAT_OK && !(text = remat_pp_plan_write(a, &r, &len, err)))
        st = err->code;
    if (st == REMAT_OK)
        st = remat_pp_plan_load_json(a, text, len, "oom", d, &back, err);
    if (st == REMAT_OK && !(trace = remat_pp_trace_chrome(&back, &tlen, err)))
        st = err->code;
    if (st == REMAT_OK) {
        *peak = back.device_peak[0] + back.device_peak[1];
        *doc = len + tlen;
    }
    remat_free(text);
    remat_free(trace);
    remat_pp_result_destroy(&back);
    remat_pp_result_destroy(&r);
    return st;
}

/* Out of memory anywhere in that job: every allocation fails once in turn;
 * each run either gives the undisturbed figures or REMAT_ENOMEM saying so,
 * never a crash or a leak (LeakSanitizer and valgrind run this suite). */
START_TEST(pipeline_should_fail_cleanly_out_of_memory)
{
    remat_graph *g = chain8();
    remat_analysis *a = NULL;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_analyze(g, &a, &err), REMAT_OK);
    remat_device d;
    ck_assert_int_eq(remat_device_preset("h100-sxm", &d, &err), REMAT_OK);
    uint64_t peak0, peak;
    size_t doc0, doc;
    remat__alloc_fail_at(0);
    ck_assert_msg(pp_job(a, &d, 10u << 20, &peak0, &doc0, &err) == REMAT_OK, "%s", err.msg);
    const uint64_t total = remat__alloc_fail_at(0);
    ck_assert_uint_gt(total, 50);
    for (uint64_t n = 1; n <= total; n++) {
        remat_err_init(&err);
        remat__alloc_fail_at(n);
        remat_status st = pp_job(a, &d, 10u << 20, &peak, &doc, &err);
        remat__alloc_fail_at(0);
        if (st == REMAT_ENOMEM) {
            ck_assert_msg(strstr(err.msg, "out of memory") != NULL, "allocation %llu: '%s'", (unsigned long long)n,
                          err.msg);
            continue;
        }
        ck_assert_msg(st == REMAT_OK, "allocation %llu of %llu: %s", (unsigned long long)n,
                      (unsigned long long)total, err.msg);
        ck_assert_msg(peak == peak0 && doc == doc0, "allocation %llu failed silently", (unsigned long long)n);
    }
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
    tcase_add_test(tc, pipeline_should_wait_for_its_sends);
    tcase_add_test(tc, pipeline_should_have_the_closed_form_bubble_in_seconds);
    tcase_add_test(tc, pipeline_plan_file_should_replay_to_the_same_devices);
    tcase_add_test(tc, pipeline_should_hold_each_stage_state_once);
    tcase_add_test(tc, pipeline_should_fail_cleanly_out_of_memory);
    suite_add_tcase(s, tc);
    return s;
}

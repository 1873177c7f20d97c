/*
 * check_pp_inflight.c - a pipeline stage is planned for the microbatches
 * its device keeps in flight, not for one microbatch.
 *
 * Device d's peak is its stages' persistent state plus, at its worst event,
 * the held bytes of the microbatches in flight elsewhere and the running
 * one's high-water mark (src/dist/pp_plan.c, device_peak); with one chunk
 * and k in flight, persistent + (k - 1) * held + running. A plan that fits
 * one microbatch under the device's budget can overflow the device by
 * (k - 1) * held. Here: a chain worked by hand where exactly that happens
 * and the device's own search fits it, and, over generated transformers,
 * every device of every feasible pipeline plan at or below its budget, its
 * peak recomputed here from the timeline's clock (not the events' order).
 */
#include "test_util.h"
#include "util/util_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A generated transformer (remat gen transformer -s S -b B -h H -a A -L L
 * --vocab V [--dropout]), analyzed. */
static remat_analysis *transformer(uint32_t seq, uint32_t batch, uint32_t hidden, uint32_t heads, uint32_t layers,
                                   uint32_t vocab, bool dropout, remat_graph **g)
{
    remat_gen_opts go;
    remat_gen_opts_init(&go, REMAT_GEN_TRANSFORMER);
    go.seq = seq;
    go.batch = batch;
    go.hidden = hidden;
    go.heads = heads;
    go.layers = layers;
    go.vocab = vocab;
    go.dropout = dropout;
    *g = t_gen(&go);
    remat_analysis *a = NULL;
    remat_err err;
    remat_err_init(&err);
    ck_assert_msg(remat_analyze(*g, &a, &err) == REMAT_OK, "%s", err.msg);
    return a;
}

/* The 8-op chain (x -> t1 -> ... -> t7 -> loss, 1 MiB activations, a 1 KiB
 * param per op, each op saving its inputs) cut 0:4, 4:8, 1F1B with M = 4:
 * device 0 holds k = min(P - 0, M) = 2 microbatches, device 1 one. Worked by
 * hand, in MiB, for stage 0 (input x, no gradient; sends t4 and receives its
 * gradient g4; the runtime keeps t4 and g4 until the backward returns):
 *   store-all: held at the first backward = x, t1, t2, t3, t4 = 5;
 *     running: BWD t4 = those 5 + g4 + g3 = 7 (BWD t3: x t1 t2 g3 + t4 g4
 *     held + g2 = 7 too);
 *     device 0 = 8192 B (4 params + their gradients) + (2 - 1) x 5 + 7
 *     = 12 MiB + 8192 B = 12591104 B.
 *   Budget B = 10 MiB + 8192 B = 10493952 B. One microbatch alone fits it
 *     store-all: its replay peaks at BWD t4 with x t1 t2 t3 + g4 + g3
 *     = 6 MiB, the 4 KiB of params and w4's 1 KiB gradient (remat frees
 *     the output t4 when the backward starts; the runtime's hold of it is
 *     not in a one-microbatch replay), 6 MiB + 5120 B. So the
 *     one-microbatch plan recomputes nothing and the device overflows by
 *     2 MiB.
 *   Recomputing one op (10^9 FLOPs) is the least that can fit, and of the
 *     three choices only dropping t1 does:
 *     drop t1: held x t2 t3 t4 = 4; running 6 (BWD t4: 4 + g4 + g3; BWD t3:
 *       x t2 g3 + 2 held + g2; BWD t2: x g2 + t1 again + 2 held + g1), so
 *       device 0 = 8192 + 4 + 6 = 10 MiB + 8192 B = B: fits, exactly;
 *     drop t2: held 4, but BWD t3 = x t1 g3 + 2 held + t2 again + g2 = 7:
 *       11 MiB + 8192 B;
 *     drop t3: it is rebuilt before the first backward, so held is 5 and
 *       running 7: 12 MiB + 8192 B.
 *   Device 1 (k = 1) keeps everything: 8192 + 0 x 5 + 7 MiB = 7348224 B. */
START_TEST(pp_should_plan_a_stage_for_its_microbatches_in_flight)
{
    const uint64_t MiB = 1u << 20, B = 10 * MiB + 8192;
    remat_graph *g = t_gen_chain(8, 1024);
    remat_analysis *a = NULL;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_analyze(g, &a, &err), REMAT_OK);
    static const uint32_t cuts[] = {0, 4, 8};
    const remat_pp_config c = {REMAT_PP_1F1B, 2, 4, 1};
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.strategy = "store-all";
    remat_pp_result sa, r;
    ck_assert_int_eq(remat_pp_plan(a, &c, cuts, REMAT_PP_BALANCE_FLOPS, &o, &sa, &err), REMAT_OK);
    ck_assert_uint_eq(sa.timeline.max_in_flight[0], 2);
    ck_assert_uint_eq(sa.stages[0].held, 5 * MiB);
    ck_assert_uint_eq(sa.stages[0].running, 7 * MiB);
    ck_assert_uint_eq(sa.device_peak[0], 12 * MiB + 8192);
    ck_assert_uint_gt(sa.device_peak[0], B);

    /* The one-microbatch plan: stage 0's own graph planned under B. */
    char *json;
    size_t len;
    ck_assert_int_eq(remat_pp_stage_graph(a, 0, 4, 0, &json, &len, &err), REMAT_OK);
    remat_graph *g0 = NULL;
    remat_analysis *a0 = t_analyze(json, &g0);
    remat_free(json);
    o.strategy = "auto";
    o.budget_kind = REMAT_BUDGET_TOTAL;
    o.budget = B;
    remat_plan one;
    remat_replay_result one_r;
    ck_assert_msg(remat_plan_make(a0, &o, &one, &one_r, &err) == REMAT_OK, "%s", err.msg);
    ck_assert_uint_eq(one_r.flops_recompute, 0); /* store-all: the device would be 12 MiB + 8192 B */
    ck_assert_uint_eq(one_r.peak_bytes, 6 * MiB + 5120);
    remat_plan_destroy(&one);
    remat_replay_result_destroy(&one_r);
    remat_analysis_destroy(a0);
    remat_graph_destroy(g0);

    /* Planned for its two microbatches, device 0 fits exactly. */
    ck_assert_msg(remat_pp_plan(a, &c, cuts, REMAT_PP_BALANCE_FLOPS, &o, &r, &err) == REMAT_OK, "%s", err.msg);
    ck_assert_uint_eq(r.stages[0].replay.flops_recompute, 1000000000u);
    ck_assert_uint_eq(r.stages[0].held, 4 * MiB);
    ck_assert_uint_eq(r.stages[0].running, 6 * MiB);
    ck_assert_uint_eq(r.device_peak[0], 10 * MiB + 8192);
    ck_assert_uint_eq(r.stages[1].replay.flops_recompute, 0);
    ck_assert_uint_eq(r.device_peak[1], 7 * MiB + 8192);
    /* Its plan file replays to the same devices. */
    char *text = remat_pp_plan_write(a, &r, &len, &err);
    ck_assert_ptr_nonnull(text);
    remat_pp_result back;
    ck_assert_msg(remat_pp_plan_load_json(a, text, len, "x", NULL, &back, &err) == REMAT_OK, "%s", err.msg);
    ck_assert_uint_eq(back.device_peak[0], r.device_peak[0]);
    ck_assert_uint_eq(back.stages[0].budget_kind, r.stages[0].budget_kind);
    remat_free(text);
    remat_pp_result_destroy(&back);
    remat_pp_result_destroy(&r);
    /* One byte less: dropping t1 no longer fits, so the device recomputes more. */
    o.budget = B - 1;
    remat_err_init(&err);
    ck_assert_int_eq(remat_pp_plan(a, &c, cuts, REMAT_PP_BALANCE_FLOPS, &o, &r, &err), REMAT_OK);
    ck_assert_uint_le(r.device_peak[0], B - 1);
    ck_assert_uint_gt(r.stages[0].replay.flops_recompute, 1000000000u);
    remat_pp_result_destroy(&r);
    remat_pp_result_destroy(&sa);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* Device d's peak from the timeline's clock: its events sorted by start, a
 * chunk's microbatch in flight from its forward's start to its backward's
 * end; at each event the others in flight hold their held bytes and the
 * running one its running bytes. */
static uint64_t peak_from_clock(const remat_pp_result *r, uint32_t d)
{
    const uint32_t P = r->config.stages, V = r->config.chunks, M = r->config.microbatches;
    size_t n = 0;
    const remat_pp_event **ev = malloc(r->timeline.n_events * sizeof *ev);
    for (size_t i = 0; i < r->timeline.n_events; i++)
        if (r->timeline.events[i].device == d)
            ev[n++] = &r->timeline.events[i];
    /* Insertion sort by start: a device's events never overlap. */
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && ev[j]->start < ev[j - 1]->start; j--) {
            const remat_pp_event *t = ev[j];
            ev[j] = ev[j - 1];
            ev[j - 1] = t;
        }
    uint8_t *in = calloc((size_t)V * M, 1);
    uint64_t base = 0, worst = 0;
    for (uint32_t c = 0; c < V; c++)
        base += r->stages[c * P + d].persistent;
    for (size_t i = 0; i < n; i++) {
        const remat_pp_event *e = ev[i];
        uint64_t x = r->stages[e->chunk * P + d].running;
        for (uint32_t c = 0; c < V; c++)
            for (uint32_t m = 0; m < M; m++)
                if (in[c * M + m] && !(c == e->chunk && m == e->microbatch))
                    x += r->stages[c * P + d].held;
        if (x > worst)
            worst = x;
        in[e->chunk * M + e->microbatch] = !e->backward;
    }
    free(in);
    free(ev);
    return base + worst;
}

/* Over generated transformers (1 layer, 3 with dropout), P = 2 and 4, 1F1B and GPipe,
 * M = 2 and 8, dtr and chen-greedy (auto at the tightest), budgets from 0.55 to 0.95 of store-all's
 * largest device: whenever remat_pp_plan says feasible, every device's
 * peak, from the clock, is the one it reports and at most the budget. The
 * search must also meet some of the tight budgets (not a vacuous pass). */
START_TEST(pp_should_fit_every_device_whenever_feasible)
{
    static const char *const strategies[] = {"auto", "dtr", "chen-greedy"};
    static const double fractions[] = {0.55, 0.7, 0.85, 0.95};
    unsigned feasible = 0, tight = 0, cases = 0;
    for (uint32_t L = 1; L <= 3; L += 2) {
        remat_graph *g = NULL;
        remat_analysis *a = transformer(32, 2, 64, 4, L, 256, L == 3, &g);
        remat_err err;
        remat_err_init(&err);
        for (uint32_t P = 2; P <= 4; P += 2)
            for (int kind = 0; kind < 2; kind++)
                for (uint32_t M = 2; M <= 8; M *= 4) {
                    const remat_pp_config c = {kind ? REMAT_PP_GPIPE : REMAT_PP_1F1B, P, M, 1};
                    remat_plan_options o;
                    remat_plan_options_init(&o);
                    o.strategy = "store-all";
                    remat_pp_result sa;
                    ck_assert_msg(remat_pp_plan(a, &c, NULL, REMAT_PP_BALANCE_FLOPS, &o, &sa, &err) == REMAT_OK,
                                  "%s", err.msg);
                    const uint64_t top = sa.device_peak[sa.largest];
                    remat_pp_result_destroy(&sa);
                    for (size_t s = 0; s < 3; s++)
                        for (size_t f = 0; f < 4; f++) {
                            /* auto is the slow one: the tightest budget of the smallest graph. */
                            if (s == 0 && (f != 0 || L != 1))
                                continue;
                            remat_pp_result r;
                            o.strategy = strategies[s];
                            o.budget_kind = REMAT_BUDGET_TOTAL;
                            o.budget = (uint64_t)((double)top * fractions[f]);
                            remat_err_init(&err);
                            remat_status st = remat_pp_plan(a, &c, NULL, REMAT_PP_BALANCE_FLOPS, &o, &r, &err);
                            cases++;
                            ck_assert_msg(st == REMAT_OK || st == REMAT_EINFEASIBLE, "%s", err.msg);
                            if (st == REMAT_EINFEASIBLE)
                                ck_assert_msg(strstr(err.msg, "pipeline device ") || strstr(err.msg, "pipeline stage "), "%s", err.msg);
                            for (uint32_t d = 0; st == REMAT_OK && d < P; d++) {
                                uint64_t mine = peak_from_clock(&r, d);
                                ck_assert_msg(mine == r.device_peak[d], "L%u P%u M%u %s %.2f device %u: %llu vs %llu",
                                              L, P, M, strategies[s], fractions[f], d, (unsigned long long)mine,
                                              (unsigned long long)r.device_peak[d]);
                                ck_assert_uint_le(mine, o.budget);
                            }
                            if (st == REMAT_OK) {
                                feasible++;
                                tight += f == 0;
                            }
                            remat_pp_result_destroy(&r);
                        }
                }
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
    }
    ck_assert_uint_gt(feasible, cases / 4);
    ck_assert_uint_gt(tight, 0);
}
END_TEST

/* The four-layer transformer of the README at 12 MiB per device, P = 4,
 * M = 8: chen-greedy meets the budget, so it can be met; planned for one
 * microbatch's peak, auto's and dtr's plans held too much between forward
 * and backward for device 0's four in flight (the least the one-microbatch
 * search reached was over 12 MiB). Planned for the device, they fit. */
START_TEST(pp_should_meet_the_budget_auto_missed_for_one_microbatch)
{
    remat_graph *g = NULL;
    remat_analysis *a = transformer(128, 2, 256, 4, 4, 1024, true, &g);
    remat_err err;
    static const uint32_t cuts[] = {0, 19, 37, 55, 76};
    const remat_pp_config c = {REMAT_PP_1F1B, 4, 8, 1};
    static const char *const strategies[] = {"chen-greedy", "dtr", "auto"};
    for (size_t s = 0; s < 3; s++) {
        remat_plan_options o;
        remat_plan_options_init(&o);
        o.strategy = strategies[s];
        o.budget_kind = REMAT_BUDGET_TOTAL;
        o.budget = 12u << 20;
        remat_pp_result r;
        remat_err_init(&err);
        ck_assert_msg(remat_pp_plan(a, &c, cuts, REMAT_PP_BALANCE_FLOPS, &o, &r, &err) == REMAT_OK, "%s: %s",
                      strategies[s], err.msg);
        for (uint32_t d = 0; d < 4; d++)
            ck_assert_uint_le(peak_from_clock(&r, d), o.budget);
        remat_pp_result_destroy(&r);
    }
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

Suite *pp_inflight_suite(void)
{
    Suite *s = suite_create("pp_inflight");
    TCase *tc = tcase_create("pp_inflight");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, pp_should_plan_a_stage_for_its_microbatches_in_flight);
    tcase_add_test(tc, pp_should_fit_every_device_whenever_feasible);
    tcase_add_test(tc, pp_should_meet_the_budget_auto_missed_for_one_microbatch);
    suite_add_tcase(s, tc);
    return s;
}

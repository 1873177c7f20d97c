/*
 * check_chen.c - sqrtn and chen-greedy (src/plan/segments.c) against
 * Checkmate's implementation worked by hand, a brute-force threshold
 * search, and the invariant that remat's reading is never weaker than the
 * paper's.
 *
 * The graph of the first two tests is a Checkmate chain written here by the
 * rules of dfgraph_from_keras (layers 0..9, the loss 10, bwd(i) = 20 - i)
 * and imported, so its candidate cuts are Checkmate's articulation points
 * (every layer) one for one.
 */
#include "exec_util.h"
#include "oracle.h"
#include "plan/planner.h"
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NL 10

/* Layer i: cost_cpu 10 + i, cost_ram 100 (i + 1); its backward node twice
 * the cost, the same bytes; the loss costs 0 and holds 4 bytes. */
static char *checkmate_chain(void)
{
    size_t cap = 8192, len = 0;
    char *j = malloc(cap);
    ck_assert_ptr_nonnull(j);
    len += (size_t)snprintf(j + len, cap - len, "{\"nodes\": [");
    for (int i = 0; i < NL; i++)
        len += (size_t)snprintf(j + len, cap - len,
                                "{\"id\": %d, \"name\": \"l%d\", \"backward\": false, \"cost_cpu\": %d, \"cost_ram\": %d},",
                                i, i, 10 + i, 100 * (i + 1));
    len += (size_t)snprintf(j + len, cap - len,
                            "{\"id\": %d, \"name\": \"Loss\", \"backward\": true, \"cost_cpu\": 0, \"cost_ram\": 4}",
                            NL);
    for (int i = 0; i < NL; i++)
        len += (size_t)snprintf(j + len, cap - len,
                                ",{\"id\": %d, \"name\": \"l%d_backward\", \"backward\": true, \"cost_cpu\": %d, "
                                "\"cost_ram\": %d}",
                                2 * NL - i, i, 2 * (10 + i), 100 * (i + 1));
    len += (size_t)snprintf(j + len, cap - len, "], \"links\": [");
    const char *sep = "";
    for (int i = 0; i < NL; i++) {
        if (i + 1 < NL)
            len += (size_t)snprintf(j + len, cap - len,
                                    "%s{\"source\": %d, \"target\": %d}, {\"source\": %d, \"target\": %d},"
                                    " {\"source\": %d, \"target\": %d}",
                                    sep, i, i + 1, 2 * NL - (i + 1), 2 * NL - i, i + 1, 2 * NL - i);
        else
            len += (size_t)snprintf(j + len, cap - len,
                                    "%s{\"source\": %d, \"target\": %d}, {\"source\": %d, \"target\": %d}", sep, i,
                                    NL, NL, 2 * NL - i);
        sep = ", ";
        len += (size_t)snprintf(j + len, cap - len, ", {\"source\": %d, \"target\": %d}", i, 2 * NL - i);
    }
    snprintf(j + len, cap - len, "]}");
    return j;
}

static remat_analysis *import_chain(remat_graph **g)
{
    char *cm = checkmate_chain();
    char *json = NULL;
    size_t len = 0;
    remat_err err;
    remat_err_init(&err);
    ck_assert_msg(remat_import_checkmate(cm, strlen(cm), "chain.json", NULL, &json, &len, NULL, &err) == REMAT_OK,
                  "%s", err.msg);
    free(cm);
    remat_analysis *a = t_analyze(json, g);
    remat_free(json);
    return a;
}

static remat_status plan(const remat_analysis *a, const char *strategy, int lin, remat_chen_reading reading,
                         uint64_t budget, remat_plan *p, remat_replay_result *r)
{
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.strategy = strategy;
    o.linearized = lin;
    o.chen_reading = reading;
    if (budget) {
        o.budget_kind = REMAT_BUDGET_ACTIVATION;
        o.budget = budget;
    }
    remat_err err;
    remat_err_init(&err);
    remat_status st = remat_plan_make(a, &o, p, r, &err);
    ck_assert_msg(st == REMAT_OK || st == REMAT_EINFEASIBLE, "%s: %s", strategy, err.msg);
    return st;
}

static uint64_t store_all_activation_peak(const remat_analysis *a)
{
    remat_schedule s;
    remat_schedule_init(&s);
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_schedule_store_all(a, &s, &err), REMAT_OK);
    remat_replay_result r;
    replay_valid(a, &s, NULL, &r);
    uint64_t p = r.activation_peak;
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    return p;
}

/* Checkmate's solve_chen_sqrtn on this chain: C = the 10 layers, k =
 * floor(sqrt(10)) = 3, checkpoints at C[2], C[5], C[8]. Its S matrix
 * (gen_s_matrix_fixed_checkpoints) gives segments [0, 2), [2, 5), [5, 8)
 * and the last [8, loss]: the first three are recomputed once in backward
 * except their starting checkpoint (layers 0, 1, 3, 4, 6, 7), the last is
 * kept. Extra compute = (10 + 0) + (10 + 1) + (10 + 3) + (10 + 4) + (10 + 6) +
 * (10 + 7) = 81, of forward 145 + backward 290 (the loss node's backward
 * cost, 2 x 19 for l9_backward, is carried by the loss's BWD). */
START_TEST(chen_should_segment_a_checkmate_chain_as_checkmate_does)
{
    remat_graph *g;
    remat_analysis *a = import_chain(&g);
    remat_plan p;
    remat_replay_result r;
    ck_assert_int_eq(plan(a, "sqrtn", 0, REMAT_CHEN_PAPER, 0, &p, &r), REMAT_OK);
    for (int i = 0; i < NL; i++) {
        char id[16];
        snprintf(id, sizeof id, "l%d", i);
        int kept = i == 2 || i == 5 || i >= 8;
        ck_assert_msg(p.keep[t_tensor(g, id)] == kept, "l%d: keep %u", i, p.keep[t_tensor(g, id)]);
        ck_assert_uint_eq(r.recompute_counts[t_op(g, id)], kept ? 0 : 1);
    }
    ck_assert(p.keep[t_tensor(g, "Loss")]);
    ck_assert_uint_eq(r.flops_recompute, 81);
    ck_assert_uint_eq(r.flops_forward, 145);
    ck_assert_uint_eq(r.flops_backward, 290);
    ck_assert_ptr_nonnull(strstr(p.params_json, "\"cuts\": 3"));
    remat_replay_result_destroy(&r);
    remat_plan_destroy(&p);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* The greedy's search, by brute force: every integer threshold from 0 to
 * the forward's bytes (each decides the same cuts as some value the
 * strategy tries, so none can do better), the greedy walked here
 * independently in both directions (the paper's topological order, and
 * from the loss back as Checkmate's solve_chen_greedy walks), each cut set
 * kept as the paper does (the cuts' outputs and the last segment) and
 * replayed; the strategy's answer must have the least extra FLOPs among
 * those that fit, at each of several budgets. */
START_TEST(chen_greedy_should_find_the_best_threshold)
{
    remat_graph *g;
    remat_analysis *a = import_chain(&g);
    uint32_t n = g->n_ops;
    uint64_t bytes[NL + 1], total = 0;
    for (uint32_t i = 0; i < n; i++) {
        bytes[i] = g->tensors[remat_op_outputs(g, &g->ops[a->order[i]])[0]].bytes;
        total += bytes[i];
    }
    uint64_t peak = store_all_activation_peak(a);
    uint8_t *keep = calloc(g->n_tensors, 1);
    ck_assert_ptr_nonnull(keep);
    for (int f = 4; f <= 9; f++) {
        uint64_t budget = peak * (uint64_t)f / 10;
        uint64_t best = UINT64_MAX;
        for (int rev = 0; rev < 2; rev++) {
            uint64_t prev_sig = UINT64_MAX;
            for (uint64_t thr = 0; thr <= total; thr++) {
                uint64_t acc = 0, sig = 0;
                uint32_t last = UINT32_MAX;
                memset(keep, 0, g->n_tensors);
                /* candidates: after every op but the loss (position n - 1) */
                for (uint32_t q = 0; q + 1 < n; q++) {
                    uint32_t i = rev ? n - 2 - q : q;
                    acc += bytes[i] + (rev && q == 0 ? bytes[n - 1] : 0);
                    if (acc > thr) {
                        keep[remat_op_outputs(g, &g->ops[a->order[i]])[0]] = 1;
                        sig |= 1ull << i;
                        last = last == UINT32_MAX || i > last ? i : last;
                        acc = 0;
                    }
                }
                if (sig == prev_sig)
                    continue;
                prev_sig = sig;
                for (uint32_t i = last == UINT32_MAX ? 0 : last + 1; i < n; i++)
                    keep[remat_op_outputs(g, &g->ops[a->order[i]])[0]] = 1;
                remat_schedule s;
                remat_schedule_init(&s);
                remat_err err;
                remat_err_init(&err);
                ck_assert_int_eq(remat_schedule_from_keep(a, keep, &s, &err), REMAT_OK);
                remat_replay_result r;
                replay_valid(a, &s, NULL, &r);
                if (r.activation_peak <= budget && r.flops_recompute < best)
                    best = r.flops_recompute;
                remat_replay_result_destroy(&r);
                remat_schedule_destroy(&s);
            }
        }
        remat_plan p;
        remat_replay_result r;
        remat_status st = plan(a, "chen-greedy", 0, REMAT_CHEN_PAPER, budget, &p, &r);
        if (best == UINT64_MAX) {
            ck_assert_int_eq(st, REMAT_EINFEASIBLE);
        } else {
            ck_assert_msg(st == REMAT_OK, "budget %llu: the brute force fits with %llu extra",
                          (unsigned long long)budget, (unsigned long long)best);
            ck_assert_uint_eq(r.flops_recompute, best);
            ck_assert_uint_le(r.activation_peak, budget);
        }
        remat_replay_result_destroy(&r);
        remat_plan_destroy(&p);
    }
    free(keep);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* remat's reading judges the paper's candidates too: wherever the paper's
 * plan fits, remat's fits with no more extra FLOPs, on chains, residual
 * stacks and U-Nets, both cut variants, budgets from 0.3 to 0.9 of the
 * store-all activation peak. */
START_TEST(chen_remat_reading_should_never_be_weaker_than_the_paper)
{
    remat_gen_opts opts[3];
    remat_gen_opts_init(&opts[0], REMAT_GEN_CHAIN);
    opts[0].ops = 30;
    opts[0].random = 1;
    opts[0].seed = 7;
    remat_gen_opts_init(&opts[1], REMAT_GEN_RESNET);
    opts[1].blocks = 4;
    remat_gen_opts_init(&opts[2], REMAT_GEN_UNET);
    opts[2].depth = 2;
    static const char *const strategies[] = {"sqrtn", "chen-greedy"};
    for (int k = 0; k < 3; k++) {
        remat_err err;
        remat_err_init(&err);
        size_t len;
        char *json = remat_gen_json(&opts[k], &len, &err);
        ck_assert_msg(json != NULL, "%s", err.msg);
        remat_graph *g;
        remat_analysis *a = t_analyze(json, &g);
        remat_free(json);
        uint64_t peak = store_all_activation_peak(a);
        for (int f = 3; f <= 9; f += 2)
            for (int s = 0; s < 2; s++)
                for (int lin = 0; lin < 2; lin++) {
                    uint64_t budget = peak * (uint64_t)f / 10;
                    remat_plan pp, pr;
                    remat_replay_result rp, rr;
                    remat_status sp = plan(a, strategies[s], lin, REMAT_CHEN_PAPER, budget, &pp, &rp);
                    remat_status sr = plan(a, strategies[s], lin, REMAT_CHEN_REMAT, budget, &pr, &rr);
                    if (sp == REMAT_OK) {
                        ck_assert_msg(sr == REMAT_OK, "%s %s%s at %d/10: paper fits, remat does not", g->name,
                                      strategies[s], lin ? "/linearized" : "", f);
                        ck_assert_msg(rr.flops_recompute <= rp.flops_recompute, "%s %s%s at %d/10: %llu > %llu",
                                      g->name, strategies[s], lin ? "/linearized" : "", f,
                                      (unsigned long long)rr.flops_recompute, (unsigned long long)rp.flops_recompute);
                    }
                    remat_replay_result_destroy(&rp);
                    remat_replay_result_destroy(&rr);
                    remat_plan_destroy(&pp);
                    remat_plan_destroy(&pr);
                }
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
    }
}
END_TEST

/* What the quick strategy gives at budget b: its keep set's figures as
 * auto's ladder judged them (run_candidate: the policy's schedule of the
 * keep set, replayed), or valid = -1 when that keep set cannot be
 * scheduled. */
static void quick_at(remat_planner *P, const char *strategy, uint8_t *keep, remat_eval *e)
{
    remat_plan p;
    remat_plan_init(&p);
    P->quick = 1;
    remat_status st = remat__strategy_lookup(strategy)(P, &p);
    P->quick = 0;
    ck_assert_msg(st == REMAT_OK, "%s: %s", strategy, P->err->msg);
    memcpy(keep, p.keep, P->a->g->n_tensors);
    remat_schedule s;
    remat_schedule_init(&s);
    remat_err err;
    remat_err_init(&err);
    st = remat_schedule_from_keep(P->a, keep, &s, &err);
    if (st == REMAT_EINFEASIBLE) {
        memset(e, 0, sizeof *e);
        e->valid = -1;
    } else {
        ck_assert_int_eq(st, REMAT_OK);
        ck_assert_int_eq(remat__eval_schedule(P, &s, e), REMAT_OK);
    }
    remat_schedule_destroy(&s);
    remat_plan_destroy(&p);
}

/* One table per strategy and variant, picked at budgets from a tenth of
 * the store-all peak up (as auto's ladder) and then down again, for both
 * budget kinds: every pick is the keep set and figures of the strategy run
 * at that budget. Returns how many picks fit their budget. */
static unsigned check_seeds(const remat_analysis *a)
{
    static const char *const strategies[] = {"sqrtn", "chen-greedy"};
    const remat_graph *g = a->g;
    uint8_t *keep = malloc(g->n_tensors ? g->n_tensors : 1);
    ck_assert_ptr_nonnull(keep);
    unsigned fitting = 0;
    for (int kind = 0; kind < 2; kind++) {
        remat_schedule s;
        remat_schedule_init(&s);
        remat_err err;
        remat_err_init(&err);
        ck_assert_int_eq(remat_schedule_store_all(a, &s, &err), REMAT_OK);
        remat_replay_result r;
        replay_valid(a, &s, NULL, &r);
        const uint64_t peak = kind ? r.peak_bytes : r.activation_peak;
        remat_replay_result_destroy(&r);
        remat_schedule_destroy(&s);
        for (int si = 0; si < 2; si++)
            for (int lin = 0; lin < 2; lin++) {
                remat_plan_options o;
                remat_plan_options_init(&o);
                o.budget_kind = kind ? REMAT_BUDGET_TOTAL : REMAT_BUDGET_ACTIVATION;
                o.linearized = lin;
                remat_planner P;
                memset(&P, 0, sizeof P);
                P.a = a;
                P.o = &o;
                P.err = &err;
                remat_schedule_init(&P.scratch);
                remat__seeds *t = NULL;
                ck_assert_msg(remat__seeds_create(&P, strategies[si], &t) == REMAT_OK, "%s", err.msg);
                for (int step = 0; step < 20; step++) {
                    const int k = step < 10 ? step + 1 : 20 - step; /* 1..10, then 10..1 */
                    o.budget = kind ? peak / 2 + peak / 20 * (uint64_t)k : peak / 10 * (uint64_t)k;
                    const uint8_t *pk;
                    remat_eval pe, qe;
                    ck_assert_int_eq(remat__seeds_pick(t, &P, &pk, &pe), REMAT_OK);
                    quick_at(&P, strategies[si], keep, &qe);
                    const char *what = strategies[si];
                    if (qe.valid < 0) {
                        ck_assert_msg(pk == NULL, "%s %s at %d/10: a pick the strategy cannot schedule", g->name,
                                      what, k);
                        continue;
                    }
                    ck_assert_msg(pk != NULL, "%s %s%s at %d/10: no pick", g->name, what, lin ? "/lin" : "", k);
                    ck_assert_msg(memcmp(pk, keep, g->n_tensors) == 0, "%s %s%s at %d/10: another keep set",
                                  g->name, what, lin ? "/lin" : "", k);
                    ck_assert_int_eq(pe.valid, qe.valid);
                    ck_assert_uint_eq(pe.metric, qe.metric);
                    ck_assert_uint_eq(pe.peak, qe.peak);
                    ck_assert_uint_eq(pe.extra_flops, qe.extra_flops);
                    fitting += remat__fits(&P, &pe);
                }
                remat__seeds_destroy(t);
                remat_schedule_destroy(&P.scratch);
            }
    }
    free(keep);
    return fitting;
}

START_TEST(ladder_seeds_should_pick_what_the_quick_strategy_picks_at_each_budget)
{
    uint64_t seed = 909;
    char *json = malloc(1 << 16);
    ck_assert_ptr_nonnull(json);
    unsigned fitting = 0;
    for (int k = 0; k < 12; k++) {
        spec G;
        spec_generate(&seed, &G);
        size_t len = spec_json(&G, json, 1 << 16);
        json[len] = 0;
        remat_graph *g;
        remat_analysis *a = t_analyze(json, &g);
        fitting += check_seeds(a);
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
    }
    free(json);
    static const char *const bundled[] = {"resnet8", "unet3", "transformer4"};
    for (size_t i = 0; i < sizeof bundled / sizeof bundled[0]; i++) {
        char path[64];
        snprintf(path, sizeof path, "graphs/%s.json", bundled[i]);
        remat_graph *g = NULL;
        remat_err err;
        remat_err_init(&err);
        ck_assert_msg(remat_graph_load_file(path, &g, &err) == REMAT_OK, "%s", err.msg);
        remat_analysis *a = NULL;
        ck_assert_int_eq(remat_analyze(g, &a, &err), REMAT_OK);
        fitting += check_seeds(a);
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
    }
    printf("ladder seeds: %u picks fit their budget\n", fitting);
    ck_assert_uint_gt(fitting, 100);
}
END_TEST

Suite *chen_suite(void)
{
    Suite *s = suite_create("chen");
    TCase *tc = tcase_create("chen");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, chen_should_segment_a_checkmate_chain_as_checkmate_does);
    tcase_add_test(tc, chen_greedy_should_find_the_best_threshold);
    tcase_add_test(tc, chen_remat_reading_should_never_be_weaker_than_the_paper);
    tcase_add_test(tc, ladder_seeds_should_pick_what_the_quick_strategy_picks_at_each_budget);
    suite_add_tcase(s, tc);
    return s;
}

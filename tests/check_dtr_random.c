/*
 * check_dtr_random.c - the dtr strategy on random layered DAGs generated
 * here (multi-output ops, views of activations, of leaves and of views, ops
 * that cannot be recomputed, saves of own outputs, of nothing, of an earlier
 * tensor, workspace): every guarantee check_dtr.c's plan_and_check asserts,
 * bit-exact rebuilds under numeric replay, valid plans when it samples
 * candidates; and fit-only runs (auto's ladder) give the full strategy's
 * plan wherever it fits and refuse, naming the budget, where it does not.
 * Part of the "dtr" suite (check_dtr.c builds it; these tests are in its
 * "guarantees" case).
 */
#include "check_dtr.h"
#include "plan/planner.h"
#include "util/util_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- 2. Random layered DAGs ---------------------------------------------- */

typedef struct {
    char *s;
    size_t n, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        ck_assert(k >= 0);
        if ((size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        }
        b->cap = b->cap * 2 + (size_t)k + 64;
        b->s = realloc(b->s, b->cap);
        ck_assert_ptr_nonnull(b->s);
    }
}

static uint64_t rnd(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint32_t below(uint64_t *x, uint32_t n)
{
    return (uint32_t)(rnd(x) % n);
}

/* A random layered DAG: `layers` layers of up to `width` ops, each reading
 * one to three tensors of the last two layers (or the input, or a param).
 * One op in eight has two or three outputs, one in eight is a view of one
 * of its inputs (an activation, a leaf or a view), one in fifteen cannot be
 * recomputed; saves are the default, nothing, the op's own first output, or
 * its first input and any earlier tensor; some ops have workspace. A sum
 * "loss" reads every tensor nothing else reads. */
static char *random_graph(uint64_t seed, uint32_t layers, uint32_t width)
{
    uint64_t x = seed;
    sbuf b = {malloc(4096), 0, 4096};
    ck_assert_ptr_nonnull(b.s);
    uint32_t cap = layers * width * 3 + 8, nt = 0, *layer_of = calloc(cap, sizeof *layer_of);
    uint8_t *read = calloc(cap, 1);
    ck_assert(layer_of && read);
    sb_printf(&b, "{\"format\": \"remat-graph\", \"version\": 1, \"name\": \"rand%llu\",",
              (unsigned long long)seed);
    sb_printf(&b, " \"inputs\": [{\"id\": \"x\", \"bytes\": %u}], \"params\": [", 64 + below(&x, 512));
    uint32_t n_params = 1 + below(&x, 3);
    for (uint32_t p = 0; p < n_params; p++)
        sb_printf(&b, "%s{\"id\": \"w%u\", \"bytes\": %u}", p ? ", " : "", p, 64 + below(&x, 256));
    sb_printf(&b, "], \"ops\": [");
    /* Tensor names: t<i>; layer_of[i] = layer + 1 (0 for none yet). */
    uint32_t op_id = 0;
    for (uint32_t L = 0; L < layers; L++) {
        uint32_t w = 1 + below(&x, width);
        for (uint32_t j = 0; j < w; j++, op_id++) {
            /* Candidate inputs: tensors of layers L-1 and L-2 (never this
             * layer's, to keep the DAG layered), else x. */
            uint32_t pool[64], np = 0;
            for (uint32_t t = 0; t < nt && np < 64; t++)
                if (layer_of[t] + 2 >= L + 1 && layer_of[t] <= L)
                    pool[np++] = t;
            uint32_t n_in = 1 + below(&x, 3), in[4], k = 0;
            char names[4][16];
            for (uint32_t i = 0; i < n_in; i++) {
                int dup = 0;
                if (np == 0 || below(&x, 6) == 0) {
                    snprintf(names[k], sizeof names[k], below(&x, 2) ? "x" : "w%u", below(&x, n_params));
                    in[k] = UINT32_MAX;
                } else {
                    in[k] = pool[below(&x, np)];
                    snprintf(names[k], sizeof names[k], "t%u", in[k]);
                }
                for (uint32_t q = 0; q < k; q++)
                    dup |= strcmp(names[q], names[k]) == 0;
                if (!dup) {
                    if (in[k] != UINT32_MAX)
                        read[in[k]] = 1;
                    k++;
                }
            }
            /* Every op reads a param now and then so gradients flow widely. */
            if (below(&x, 3) == 0) {
                snprintf(names[k], sizeof names[k], "w%u", below(&x, n_params));
                int dup = 0;
                for (uint32_t q = 0; q < k; q++)
                    dup |= strcmp(names[q], names[k]) == 0;
                if (!dup)
                    in[k++] = UINT32_MAX;
            }
            sb_printf(&b, "%s{\"id\": \"o%u\", \"op\": \"f\", \"inputs\": [", op_id ? ", " : "", op_id);
            for (uint32_t i = 0; i < k; i++)
                sb_printf(&b, "%s\"%s\"", i ? ", " : "", names[i]);
            sb_printf(&b, "]");
            uint32_t kind = below(&x, 8), first = nt;
            if (kind == 0) { /* a view of its first input */
                sb_printf(&b, ", \"outputs\": [{\"id\": \"t%u\", \"alias_of\": \"%s\"}], \"flops\": 0, \"saves\": []",
                          nt, names[0]);
                layer_of[nt++] = L + 1;
            } else {
                uint32_t n_out = kind == 1 ? 2 + below(&x, 2) : 1;
                sb_printf(&b, ", \"outputs\": [");
                for (uint32_t o = 0; o < n_out; o++) {
                    sb_printf(&b, "%s{\"id\": \"t%u\", \"bytes\": %u}", o ? ", " : "", nt, 16 + below(&x, 4096));
                    layer_of[nt++] = L + 1;
                }
                sb_printf(&b, "], \"flops\": %u", 1 + below(&x, 100000));
                switch (below(&x, 4)) {
                case 0: sb_printf(&b, ", \"saves\": []"); break;
                case 1: sb_printf(&b, ", \"saves\": [\"t%u\"]", first); break;
                case 2: /* its first input and some earlier tensor */
                    if (first > 0) {
                        char extra[16];
                        snprintf(extra, sizeof extra, "t%u", below(&x, first));
                        if (strcmp(extra, names[0]) != 0) {
                            sb_printf(&b, ", \"saves\": [\"%s\", \"%s\"]", names[0], extra);
                            break;
                        }
                    }
                    break;
                default: break;
                }
                if (below(&x, 5) == 0)
                    sb_printf(&b, ", \"workspace\": %u, \"bwd_workspace\": %u", below(&x, 2048), below(&x, 2048));
                if (below(&x, 15) == 0)
                    sb_printf(&b, ", \"recomputable\": false");
            }
            sb_printf(&b, "}");
        }
    }
    sb_printf(&b, ", {\"id\": \"loss\", \"op\": \"sum\", \"inputs\": [");
    int any = 0;
    for (uint32_t t = 0; t < nt; t++)
        if (!read[t]) {
            sb_printf(&b, "%s\"t%u\"", any ? ", " : "", t);
            any = 1;
        }
    if (!any)
        sb_printf(&b, "\"t%u\"", nt - 1);
    sb_printf(&b, "], \"bytes\": 8, \"flops\": 1, \"saves\": []}], \"outputs\": [\"loss\"]}");
    free(layer_of);
    free(read);
    return b.s;
}

START_TEST(dtr_should_fit_or_name_a_met_budget_on_random_dags)
{
    tally tl = {0, 0, 0};
    unsigned views = 0, multi = 0, fixed = 0;
    for (uint64_t seed = 1; seed <= 24; seed++) {
        char *json = random_graph(seed * 7919, 3 + (uint32_t)(seed % 6), 2 + (uint32_t)(seed % 4));
        remat_graph *g;
        remat_analysis *a = t_analyze(json, &g);
        for (uint32_t t = 0; t < g->n_tensors; t++)
            views += g->tensors[t].alias_of != REMAT_NONE;
        for (uint32_t k = 0; k < g->n_ops; k++) {
            multi += g->ops[k].n_out > 1;
            fixed += !g->ops[k].recomputable;
        }
        check_graph(a, &tl);
        /* The ledger's extras count in a total budget exactly as replay
         * counts them (DTR's own peak check would fail otherwise). */
        remat_exec_extras ex;
        memset(&ex, 0, sizeof ex);
        ex.optimizer_state = 1000;
        ex.master_weights = 200;
        ex.frozen_copies = 300;
        ex.comm_buffers = 50;
        ex.optimizer_workspace = 700;
        ex.workspace = 64;
        uint64_t sa;
        store_all_figures(a, REMAT_BUDGET_TOTAL, &sa);
        plan_and_check(a, REMAT_BUDGET_TOTAL, sa + 2314 - sa / 8, "h_dtr", &ex, NULL, &tl);
        plan_and_check(a, REMAT_BUDGET_ACTIVATION, 1, "eq", &ex, NULL, &tl);
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
        free(json);
    }
    /* The generator made what it promises, and the test was not vacuous. */
    ck_assert_uint_gt(views, 0);
    ck_assert_uint_gt(multi, 0);
    ck_assert_uint_gt(fixed, 0);
    ck_assert_uint_gt(tl.made, 0);
    ck_assert_uint_gt(tl.rebuilt, 0);
    ck_assert_uint_gt(tl.infeasible, 0);
}
END_TEST

/* Numerically, every tensor DTR rebuilds (multi-output ops, views) is bit
 * for bit what its first computation produced. */
START_TEST(dtr_should_rebuild_bit_exact_tensors)
{
    unsigned checked = 0;
    for (uint64_t seed = 1; seed <= 8; seed++) {
        char *json = random_graph(seed * 104729, 4 + (uint32_t)(seed % 4), 3);
        remat_graph *g;
        remat_analysis *a = t_analyze(json, &g);
        uint64_t sa;
        store_all_figures(a, REMAT_BUDGET_ACTIVATION, &sa);
        remat_plan plan;
        if (plan_and_check(a, REMAT_BUDGET_ACTIVATION, sa * 6 / 10, NULL, NULL, &plan, NULL) == REMAT_OK) {
            remat_numeric_result nr;
            remat_err err;
            remat_err_init(&err);
            ck_assert_int_eq(remat_numeric_replay(a, &plan.schedule, 1, &nr, &err), REMAT_OK);
            ck_assert_msg(nr.verified, "%s: %s", g->name, err.msg);
            checked += (unsigned)nr.recomputed_tensors_checked;
            remat_numeric_result_destroy(&nr);
            remat_plan_destroy(&plan);
        }
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
        free(json);
    }
    ck_assert_uint_gt(checked, 0);
}
END_TEST

/* A chain long enough that the candidates outnumber the scan, so victims
 * come from a sample: still valid and within budget. */
START_TEST(dtr_should_stay_valid_when_it_samples_candidates)
{
    sbuf b = {malloc(4096), 0, 4096};
    ck_assert_ptr_nonnull(b.s);
    const uint32_t n = 6000;
    sb_printf(&b, "{\"format\": \"remat-graph\", \"version\": 1, \"name\": \"long\","
                  " \"inputs\": [{\"id\": \"x\", \"bytes\": 64}], \"params\": [{\"id\": \"w\", \"bytes\": 64}],"
                  " \"ops\": [{\"id\": \"t0\", \"op\": \"f\", \"inputs\": [\"x\", \"w\"], \"bytes\": 64, \"flops\": 9}");
    uint64_t x = 42;
    for (uint32_t i = 1; i < n; i++)
        sb_printf(&b, ", {\"id\": \"t%u\", \"op\": \"f\", \"inputs\": [\"t%u\"], \"bytes\": %u, \"flops\": %u}", i,
                  i - 1, 64 + below(&x, 64), 1 + below(&x, 100));
    sb_printf(&b, "], \"outputs\": [\"t%u\"]}", n - 1);
    remat_graph *g;
    remat_analysis *a = t_analyze(b.s, &g);
    uint64_t sa;
    store_all_figures(a, REMAT_BUDGET_ACTIVATION, &sa);
    tally tl = {0, 0, 0};
    ck_assert_int_eq(plan_and_check(a, REMAT_BUDGET_ACTIVATION, sa / 2, "local", NULL, NULL, &tl), REMAT_OK);
    ck_assert_uint_eq(tl.rebuilt, 1);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    free(b.s);
}
END_TEST

/* ---- 4. Fit only (auto's ladder) ------------------------------------------ */

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

/* The random-DAG and fit-only tests of the dtr suite's "guarantees" case (check_dtr.c). */
void dtr_random_tests(TCase *many)
{
    tcase_add_test(many, dtr_should_fit_or_name_a_met_budget_on_random_dags);
    tcase_add_test(many, dtr_should_stay_valid_when_it_samples_candidates);
    tcase_add_test(many, dtr_should_rebuild_bit_exact_tensors);
    tcase_add_test(many, dtr_should_give_the_same_plan_fit_only_or_refuse);
}

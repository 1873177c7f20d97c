/*
 * bench_plan.c - replay speed and planning time (`make bench`).
 *
 * Figures only: medians of a few runs on a shared 2-core machine. Each row
 * also prints the per-op (or per-instruction) cost so growth with size is
 * visible at a glance.
 */
#define _POSIX_C_SOURCE 200809L
#include "bench.h"
#include "remat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int load_gen(const remat_gen_opts *o, remat_graph **g, remat_analysis **a)
{
    remat_err err;
    remat_err_init(&err);
    size_t len;
    char *text = remat_gen_json(o, &len, &err);
    *g = NULL;
    *a = NULL;
    if (!text || remat_graph_load_json(text, len, "bench", g, &err) != REMAT_OK ||
        remat_analyze(*g, a, &err) != REMAT_OK) {
        fprintf(stderr, "bench: %s\n", err.msg);
        remat_free(text);
        remat_graph_destroy(*g);
        *g = NULL;
        return -1;
    }
    remat_free(text);
    return 0;
}

static void free_graph(remat_graph *g, remat_analysis *a)
{
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}

static uint64_t store_all_metric(const remat_analysis *a, remat_budget_kind kind)
{
    remat_schedule s;
    remat_schedule_init(&s);
    remat_replay_result r;
    remat_err err;
    remat_err_init(&err);
    uint64_t m = 0;
    if (remat_schedule_store_all(a, &s, &err) == REMAT_OK && remat_replay(a, &s, NULL, NULL, &r, &err) == REMAT_OK) {
        m = kind == REMAT_BUDGET_ACTIVATION ? r.activation_peak : r.peak_bytes;
        remat_replay_result_destroy(&r);
    }
    remat_schedule_destroy(&s);
    return m;
}

/* ------------------------------------------------------------- replay */

int bench_replay(const char *remat)
{
    (void)remat;
    printf("%-8s %9s %-10s %12s %10s %14s\n", "family", "ops", "schedule", "instructions", "replay", "instr/s");
    static const uint32_t sizes[] = {100000, 1000000};
    for (int f = 0; f < 2; f++)
        for (size_t i = 0; i < 2; i++) {
            remat_gen_opts o;
            remat_gen_opts_init(&o, f ? REMAT_GEN_LAYERED : REMAT_GEN_CHAIN);
            if (f) {
                o.width = 10;
                o.layers = sizes[i] / 10;
            } else {
                o.ops = sizes[i];
            }
            remat_graph *g;
            remat_analysis *a;
            if (load_gen(&o, &g, &a) != 0)
                return 1;
            for (int kind = 0; kind < 2; kind++) {
                /* store-all, and a keep set of every other activation (so
                 * the schedule recomputes). */
                uint8_t *keep = calloc(g->n_tensors, 1);
                for (uint32_t t = 0; t < g->n_tensors; t++)
                    keep[t] = kind == 0 || t % 2 == 0;
                remat_schedule s;
                remat_schedule_init(&s);
                remat_err err;
                remat_err_init(&err);
                if (remat_schedule_from_keep(a, keep, &s, &err) != REMAT_OK) {
                    fprintf(stderr, "bench: %s\n", err.msg);
                    free(keep);
                    return 1;
                }
                double t[3];
                for (int rep = 0; rep < 3; rep++) {
                    remat_replay_result r;
                    double t0 = now_s();
                    remat_replay(a, &s, NULL, NULL, &r, &err);
                    t[rep] = now_s() - t0;
                    remat_replay_result_destroy(&r);
                }
                double m = median(t, 3);
                printf("%-8s %9u %-10s %12zu %9.1fms %14.3g\n", f ? "layered" : "chain", g->n_ops,
                       kind ? "keep-half" : "store-all", s.n, 1e3 * m, (double)s.n / m);
                remat_schedule_destroy(&s);
                free(keep);
            }
            free_graph(g, a);
        }
    return 0;
}

/* ----------------------------------------------------------- planning */

/* Plans once (or the median of reps) and prints a row. */
static void plan_row(const char *label, const remat_analysis *a, const char *strategy, remat_budget_kind kind,
                     uint64_t budget, int reps)
{
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.strategy = strategy;
    o.budget_kind = kind;
    o.budget = budget;
    o.time_limit = 10;
    double t[5];
    remat_status st = REMAT_OK;
    uint64_t extra = 0, metric = 0;
    char msg[80] = "";
    if (reps > 5)
        reps = 5;
    for (int i = 0; i < reps; i++) {
        remat_plan plan;
        remat_replay_result r;
        remat_err err;
        remat_err_init(&err);
        double t0 = now_s();
        st = remat_plan_make(a, &o, &plan, &r, &err);
        t[i] = now_s() - t0;
        if (st == REMAT_OK || st == REMAT_EINFEASIBLE) {
            extra = r.flops_recompute;
            metric = kind == REMAT_BUDGET_ACTIVATION ? r.activation_peak : r.peak_bytes;
            remat_replay_result_destroy(&r);
            remat_plan_destroy(&plan);
        } else {
            snprintf(msg, sizeof msg, "%.70s", err.msg);
        }
        if (st == REMAT_EINVAL)
            return; /* strategy not built in */
    }
    double m = median(t, reps);
    if (st == REMAT_OK || st == REMAT_EINFEASIBLE)
        printf("%-14s %-12s %9u %10.1fms %9.2fus/op %-10s %12llu %16llu\n", label, strategy, a->g->n_ops, 1e3 * m,
               1e6 * m / a->g->n_ops, st == REMAT_OK ? "fits" : "over", (unsigned long long)metric,
               (unsigned long long)extra);
    else
        printf("%-14s %-12s %9u %10.1fms  %s\n", label, strategy, a->g->n_ops, 1e3 * m, msg);
    fflush(stdout);
}

static void plan_header(void)
{
    printf("%-14s %-12s %9s %12s %13s %-10s %12s %16s\n", "graph", "strategy", "ops", "time", "per op", "budget",
           "metric (B)", "extra FLOPs");
}

int bench_plan_chain(const char *remat)
{
    (void)remat;
    plan_header();
    static const uint32_t stages[] = {100, 1000, 10000};
    static const char *const strategies[] = {"sqrtn", "chen-greedy", "revolve", "chain-dp"};
    for (size_t i = 0; i < 3; i++) {
        remat_gen_opts o;
        remat_gen_opts_init(&o, REMAT_GEN_CHAIN);
        o.ops = stages[i];
        o.random = true;
        o.seed = 3;
        o.bytes = 1 << 20;
        remat_graph *g;
        remat_analysis *a;
        if (load_gen(&o, &g, &a) != 0)
            return 1;
        uint64_t b = store_all_metric(a, REMAT_BUDGET_ACTIVATION) / 2;
        char label[32];
        snprintf(label, sizeof label, "hetchain-%u", stages[i]);
        for (size_t s = 0; s < sizeof strategies / sizeof strategies[0]; s++)
            plan_row(label, a, strategies[s], REMAT_BUDGET_ACTIVATION, b, stages[i] <= 1000 ? 3 : 1);
        free_graph(g, a);
    }
    /* The 1 s target for sqrtn and chen-greedy is at 10^5 ops. */
    remat_gen_opts o;
    remat_gen_opts_init(&o, REMAT_GEN_CHAIN);
    o.ops = 100000;
    remat_graph *g;
    remat_analysis *a;
    if (load_gen(&o, &g, &a) != 0)
        return 1;
    uint64_t b = store_all_metric(a, REMAT_BUDGET_ACTIVATION) / 2;
    plan_row("chain-100000", a, "sqrtn", REMAT_BUDGET_ACTIVATION, b, 1);
    plan_row("chain-100000", a, "chen-greedy", REMAT_BUDGET_ACTIVATION, b, 1);
    free_graph(g, a);
    return 0;
}

int bench_plan_dag(const char *remat)
{
    (void)remat;
    plan_header();
    static const uint32_t sizes[] = {1000, 10000, 100000};
    static const char *const strategies[] = {"auto", "dtr", "mincut"};
    for (size_t i = 0; i < 3; i++) {
        remat_gen_opts o;
        remat_gen_opts_init(&o, REMAT_GEN_LAYERED);
        o.width = 8;
        o.layers = sizes[i] / 8;
        o.seed = 1;
        remat_graph *g;
        remat_analysis *a;
        if (load_gen(&o, &g, &a) != 0)
            return 1;
        uint64_t b = store_all_metric(a, REMAT_BUDGET_ACTIVATION) * 7 / 10;
        char label[32];
        snprintf(label, sizeof label, "layered-%u", sizes[i]);
        for (size_t s = 0; s < sizeof strategies / sizeof strategies[0]; s++)
            plan_row(label, a, strategies[s], REMAT_BUDGET_ACTIVATION, b, 1);
        free_graph(g, a);
        /* A transformer of about the same size. */
        remat_gen_opts_init(&o, REMAT_GEN_TRANSFORMER);
        o.layers = sizes[i] / 15;
        o.seq = 256;
        o.batch = 1;
        o.hidden = 256;
        o.heads = 4;
        o.vocab = 1024;
        if (load_gen(&o, &g, &a) != 0)
            return 1;
        b = store_all_metric(a, REMAT_BUDGET_ACTIVATION) * 7 / 10;
        snprintf(label, sizeof label, "transformer-%u", g->n_ops);
        for (size_t s = 0; s < sizeof strategies / sizeof strategies[0]; s++)
            plan_row(label, a, strategies[s], REMAT_BUDGET_ACTIVATION, b, 1);
        free_graph(g, a);
    }
    return 0;
}

int bench_bundled(const char *remat)
{
    (void)remat;
    static const char *const graphs[] = {"mlp2", "mlp423", "chain16", "hetchain12", "resnet8", "transformer4",
                                         "unet3", "bnview"};
    plan_header();
    size_t n;
    const remat_strategy_info *si = remat_plan_strategies(&n);
    for (size_t i = 0; i < sizeof graphs / sizeof graphs[0]; i++) {
        char path[128];
        snprintf(path, sizeof path, "graphs/%s.json", graphs[i]);
        remat_graph *g = NULL;
        remat_analysis *a = NULL;
        remat_err err;
        remat_err_init(&err);
        if (remat_graph_load_file(path, &g, &err) != REMAT_OK || remat_analyze(g, &a, &err) != REMAT_OK) {
            fprintf(stderr, "bench: %s\n", err.msg);
            remat_graph_destroy(g);
            return 1;
        }
        uint64_t b = store_all_metric(a, REMAT_BUDGET_ACTIVATION) * 7 / 10;
        for (size_t s = 0; s < n; s++)
            plan_row(graphs[i], a, si[s].name, REMAT_BUDGET_ACTIVATION, b, 3);
        free_graph(g, a);
    }
    return 0;
}

/* -------------------------------------------------------------- trace */

typedef char *(*trace_writer)(const remat_trace *, const remat_trace_options *, size_t *, remat_err *);

int bench_trace(const char *remat)
{
    (void)remat;
    printf("%-8s %9s %10s %10s %10s %10s %10s %10s\n", "family", "ops", "build", "json", "chrome", "csv", "svg",
           "json MB");
    for (int f = 0; f < 2; f++) {
        remat_gen_opts o;
        remat_gen_opts_init(&o, f ? REMAT_GEN_LAYERED : REMAT_GEN_CHAIN);
        if (f) {
            o.width = 100;
            o.layers = 1000;
        } else {
            o.ops = 100000;
        }
        remat_graph *g;
        remat_analysis *a;
        if (load_gen(&o, &g, &a) != 0)
            return 1;
        remat_schedule s;
        remat_schedule_init(&s);
        remat_err err;
        remat_err_init(&err);
        if (remat_schedule_store_all(a, &s, &err) != REMAT_OK) {
            fprintf(stderr, "bench: %s\n", err.msg);
            return 1;
        }
        double tb[3];
        remat_trace *t = NULL;
        for (int rep = 0; rep < 3; rep++) {
            remat_trace_destroy(t);
            t = NULL;
            double t0 = now_s();
            if (remat_trace_build(a, &s, NULL, &t, &err) != REMAT_OK) {
                fprintf(stderr, "bench: %s\n", err.msg);
                return 1;
            }
            tb[rep] = now_s() - t0;
        }
        static const trace_writer writers[4] = {remat_trace_json, remat_trace_chrome, remat_trace_csv, remat_trace_svg};
        double tw[4];
        size_t json_len = 0;
        remat_trace_options to;
        remat_trace_options_init(&to);
        for (int w = 0; w < 4; w++) {
            double t0 = now_s();
            size_t len = 0;
            char *text = writers[w](t, &to, &len, &err);
            tw[w] = now_s() - t0;
            if (w == 0)
                json_len = len;
            remat_free(text);
        }
        printf("%-8s %9u %9.0fms %9.0fms %9.0fms %9.0fms %9.0fms %10.1f\n", f ? "layered" : "chain", g->n_ops,
               1e3 * median(tb, 3), 1e3 * tw[0], 1e3 * tw[1], 1e3 * tw[2], 1e3 * tw[3], (double)json_len / 1e6);
        remat_trace_destroy(t);
        remat_schedule_destroy(&s);
        free_graph(g, a);
    }
    printf("target: tracing a 10^5-op graph (build + a writer) under 2 s\n");
    return 0;
}

/*
 * compare.c - strategies side by side, and the overhead-versus-budget
 * sweep with its SVG chart.
 */
#define _POSIX_C_SOURCE 200809L
#include "remat/compare.h"
#include "remat/alloc.h"
#include "remat/report.h"
#include "../util/util_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A column: a strategy, and for sqrtn and chen-greedy which cuts and which
 * reading of Chen et al. (issue 15: remat's best, and the paper's alone as
 * Checkmate implements it, so a comparison shows both by name). */
typedef struct {
    const char *name;
    int lin, paper;
} column;

/* "sqrtn", "sqrtn/linearized", "sqrtn/paper", "sqrtn/paper/linearized". */
static void label(char *buf, size_t cap, const char *name, int lin, int paper)
{
    snprintf(buf, cap, "%s%s%s", name, paper ? "/paper" : "", lin ? "/linearized" : "");
}

/* The columns: every strategy, plus the linearized and paper variants;
 * auto (the strategy that runs the others) comes last so it can be read
 * against the rest. */
static size_t columns(column *cols, size_t cap)
{
    size_t n = 0, k;
    const remat_strategy_info *s = remat_plan_strategies(&k);
    for (size_t i = 0; i < k && n < cap; i++) {
        if (s[i].flags & REMAT_STRATEGY_RUNS_OTHERS)
            continue;
        /* The linearized cuts and the paper's reading (issue 15) are
         * variants of the strategies that read those options. */
        int lin = (s[i].flags & REMAT_STRATEGY_LINEARIZED) ? 2 : 1;
        int paper = (s[i].flags & REMAT_STRATEGY_PAPER) ? 2 : 1;
        for (int p = 0; p < paper; p++)
            for (int l = 0; l < lin && n < cap; l++)
                cols[n++] = (column){s[i].name, l, p};
    }
    for (size_t i = 0; i < k && n < cap; i++)
        if (s[i].flags & REMAT_STRATEGY_RUNS_OTHERS)
            cols[n++] = (column){s[i].name, 0, 0};
    return n;
}

/* Issue 11: the best-fit allocator and the static plan over the plan's
 * schedule, in the budget's categories. */
static remat_status alloc_figures(const remat_analysis *a, const remat_plan_options *o, const remat_plan *plan,
                                  remat_compare_row *row, remat_err *err)
{
    remat_alloc_trace t;
    remat_alloc_result bf;
    remat_static_result sp;
    memset(&bf, 0, sizeof bf);
    memset(&sp, 0, sizeof sp);
    memset(&t, 0, sizeof t);
    /* A sharded rank's allocations include its collectives' buffers. */
    remat_schedule full;
    remat_schedule_init(&full);
    const remat_schedule *s = &plan->schedule;
    remat_status st = REMAT_OK;
    if (o->extras.sharding && !remat_schedule_has_collectives(s) &&
        (st = remat_schedule_shard(o->extras.sharding, s, &full, err)) == REMAT_OK)
        s = &full;
    if (st == REMAT_OK)
        st = remat_alloc_trace_build(a, s, &o->extras, remat_alloc_mask_for(o->budget_kind), &t, NULL, err);
    remat_schedule_destroy(&full);
    if (st == REMAT_OK)
        st = remat_alloc_simulate(&t, REMAT_ALLOC_BEST_FIT, 0, &bf, err);
    if (st == REMAT_OK) {
        remat_static_options so;
        remat_static_options_init(&so);
        so.stop_at_bound = 1;
        st = remat_alloc_static_plan(&t, &so, &sp, err);
    }
    if (st == REMAT_OK) {
        row->best_fit_high_water = bf.high_water;
        row->fragmentation = bf.fragmentation;
        row->arena_bytes = sp.arena_bytes;
    }
    remat_static_result_destroy(&sp);
    remat_alloc_result_destroy(&bf);
    remat_alloc_trace_destroy(&t);
    return st;
}

/* The row's predicted step time on o->device: the timeline of the plan's
 * schedule, with the sharding's collectives inserted when there is one. */
static remat_status step_time(const remat_analysis *a, const remat_plan_options *o, const remat_schedule *s,
                              remat_compare_row *row, remat_err *err)
{
    remat_schedule full;
    remat_schedule_init(&full);
    const remat_sharding *sh = o->extras.sharding;
    remat_status st = sh && !remat_schedule_has_collectives(s) ? remat_schedule_shard(sh, s, &full, err) : REMAT_OK;
    const remat_schedule *run = sh && !remat_schedule_has_collectives(s) ? &full : s;
    remat_op_times t;
    memset(&t, 0, sizeof t);
    if (st == REMAT_OK)
        st = remat_op_times_init(a, o->device, &t, err);
    remat_timeline tl;
    if (st == REMAT_OK && (st = remat_timeline_run(a, run, &o->extras, o->device, &t, &tl, err)) == REMAT_OK) {
        row->has_time = 1;
        row->step_time = tl.step_time;
        row->recompute_time = tl.recompute_time;
        remat_timeline_destroy(&tl);
    }
    remat_op_times_destroy(&t);
    remat_schedule_destroy(&full);
    return st;
}

static remat_status run_one(const remat_analysis *a, const remat_plan_options *o, column col, int with_alloc,
                            remat_compare_row *row, remat_err *err)
{
    remat_plan_options sub = *o;
    sub.strategy = col.name;
    sub.linearized = col.lin;
    sub.chen_reading = col.paper ? REMAT_CHEN_PAPER : REMAT_CHEN_REMAT;
    memset(row, 0, sizeof *row);
    snprintf(row->strategy, sizeof row->strategy, "%s", col.name);
    row->linearized = col.lin;
    row->paper = col.paper;
    remat_plan plan;
    remat_replay_result r;
    remat_err local;
    remat_err_init(&local);
    double t0 = now();
    remat_status st = remat_plan_make(a, &sub, &plan, &r, &local);
    row->seconds = now() - t0;
    row->status = st;
    /* A strategy that proves a budget infeasible without having found any
     * plan (exact, rarely) leaves no replay: its row carries the message. */
    row->replayed = st == REMAT_OK || (st == REMAT_EINFEASIBLE && r.recompute_counts);
    if (row->replayed) {
        row->peak_bytes = r.peak_bytes;
        row->metric = o->budget_kind == REMAT_BUDGET_ACTIVATION ? r.activation_peak : r.peak_bytes;
        row->extra_flops = r.flops_recompute;
        double base = (double)r.flops_forward + (double)r.flops_backward;
        row->overhead = base > 0 ? (double)r.flops_recompute / base : 0;
        const char *lb = plan.params_json ? strstr(plan.params_json, "\"lower_bound\": ") : NULL;
        if (st == REMAT_OK && lb && lb[15] >= '0' && lb[15] <= '9' && o->objective == REMAT_OBJECTIVE_FLOPS) {
            row->has_bound = 1;
            row->lower_bound = strtoull(lb + 15, NULL, 10);
        }
        remat_err aerr;
        remat_err_init(&aerr);
        if (o->device && step_time(a, o, &plan.schedule, row, &aerr) != REMAT_OK) {
            remat_replay_result_destroy(&r);
            remat_plan_destroy(&plan);
            return remat_err_set(err, aerr.code, "%s", aerr.msg);
        }
        if (with_alloc && alloc_figures(a, &sub, &plan, row, &aerr) != REMAT_OK) {
            /* The plan replayed once already: only ENOMEM can stop this. */
            remat_replay_result_destroy(&r);
            remat_plan_destroy(&plan);
            return remat_err_set(err, aerr.code, "%s", aerr.msg);
        }
        remat_replay_result_destroy(&r);
        remat_plan_destroy(&plan);
    } else {
        if (st == REMAT_EINFEASIBLE) {
            remat_replay_result_destroy(&r);
            remat_plan_destroy(&plan);
        }
        /* The whole message: its figures (exact's proven bound) come last. */
        memcpy(row->message, local.msg, sizeof row->message - 1);
        row->message[sizeof row->message - 1] = '\0';
    }
    if (st == REMAT_ENOMEM)
        return remat_err_set(err, st, "%s", local.msg);
    return REMAT_OK;
}

remat_status remat_compare_run(const remat_analysis *a, const remat_plan_options *o, remat_compare_row *rows,
                               size_t cap, size_t *n, remat_err *err)
{
    column cols[32];
    size_t k = columns(cols, cap < 32 ? cap : 32);
    *n = 0;
    for (size_t i = 0; i < k; i++) {
        remat_status st = run_one(a, o, cols[i], 1, &rows[i], err);
        if (st != REMAT_OK)
            return st;
        (*n)++;
    }
    return REMAT_OK;
}

void remat_sweep_destroy(remat_sweep *s)
{
    if (!s)
        return;
    remat__free(s->budgets);
    remat__free(s->names);
    remat__free(s->values);
    memset(s, 0, sizeof *s);
}

remat_status remat_compare_sweep(const remat_analysis *a, const remat_plan_options *o, size_t n, remat_sweep *out,
                                 void (*progress)(void *ctx, size_t done, size_t total), void *ctx, remat_err *err)
{
    memset(out, 0, sizeof *out);
    if (n < 2)
        return remat_err_set(err, REMAT_EINVAL, "n: a sweep needs at least 2 budgets (got %zu)", n);
    column cols[32];
    size_t k = columns(cols, 32);
    remat_plan_options base = *o;
    if (base.budget_kind == REMAT_BUDGET_NONE)
        base.budget_kind = REMAT_BUDGET_TOTAL;
    out->kind = base.budget_kind;
    out->n_budgets = n;
    out->n_series = k;
    out->budgets = remat__array(n, sizeof *out->budgets);
    out->names = remat__array(k, sizeof *out->names);
    out->values = remat__array(n * k, sizeof *out->values);
    if (!out->budgets || !out->names || !out->values) {
        remat_sweep_destroy(out);
        return remat_err_set(err, REMAT_ENOMEM, "out of memory in the sweep");
    }
    /* Range: each strategy at budget 0 reports the smallest it reaches. */
    remat_compare_row row;
    uint64_t lo = UINT64_MAX, hi = 0;
    base.budget = 0;
    for (size_t s = 0; s < k; s++) {
        label(out->names[s], sizeof out->names[s], cols[s].name, cols[s].lin, cols[s].paper);
        remat_status st = run_one(a, &base, cols[s], 0, &row, err);
        if (st != REMAT_OK) {
            remat_sweep_destroy(out);
            return st;
        }
        if (row.replayed && row.metric < lo)
            lo = row.metric;
        if (strcmp(cols[s].name, "store-all") == 0)
            hi = row.metric;
    }
    if (lo == UINT64_MAX || hi < lo) {
        remat_sweep_destroy(out);
        return remat_err_set(err, REMAT_EINTERNAL, "sweep: no strategy produced a plan");
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t step = remat__u64_from_double((double)(hi - lo) * (double)i / (double)(n - 1));
        out->budgets[i] = step > hi - lo ? hi : lo + step; /* rounding may overshoot hi */
        base.budget = out->budgets[i];
        for (size_t s = 0; s < k; s++) {
            remat_status st = run_one(a, &base, cols[s], 0, &row, err);
            if (st != REMAT_OK) {
                remat_sweep_destroy(out);
                return st;
            }
            out->values[s * n + i] = row.status == REMAT_OK ? row.overhead : -1.0;
        }
        if (progress)
            progress(ctx, i + 1, n);
    }
    return REMAT_OK;
}

static const char *status_word(const remat_compare_row *r)
{
    return r->status == REMAT_OK ? "yes" : r->status == REMAT_EINFEASIBLE ? "no" : "n/a";
}

char *remat_report_compare(const remat_analysis *a, const remat_plan_options *o, const remat_compare_row *rows,
                           size_t n, int json, size_t *len, remat_err *err)
{
    remat_buf b;
    remat_buf_init(&b);
    const char *kind = o->budget_kind == REMAT_BUDGET_ACTIVATION ? "activation" : "total";
    if (json) {
        remat_buf_puts(&b, "{\"graph\": ");
        remat_buf_json_str(&b, a->g->name);
        remat_buf_printf(&b, ", \"budget\": {\"kind\": \"%s\", \"bytes\": %llu},\n \"strategies\": [", kind,
                         (unsigned long long)o->budget);
        for (size_t i = 0; i < n; i++) {
            const remat_compare_row *r = &rows[i];
            char name[48];
            label(name, sizeof name, r->strategy, r->linearized, r->paper);
            remat_buf_printf(&b, "%s\n  {\"strategy\": \"%s\", \"feasible\": %s", i ? "," : "", name,
                             r->status == REMAT_OK ? "true" : "false");
            if (r->replayed)
                remat_buf_printf(&b, ", \"peak_bytes\": %llu, \"budgeted_peak_bytes\": %llu, \"extra_flops\": %llu, "
                                     "\"overhead\": %.6f, \"best_fit_high_water_bytes\": %llu, "
                                     "\"fragmentation_bytes\": %llu, \"static_arena_bytes\": %llu",
                                 (unsigned long long)r->peak_bytes, (unsigned long long)r->metric,
                                 (unsigned long long)r->extra_flops, r->overhead,
                                 (unsigned long long)r->best_fit_high_water, (unsigned long long)r->fragmentation,
                                 (unsigned long long)r->arena_bytes);
            if (r->has_time)
                remat_buf_printf(&b, ", \"step_time_s\": %.9g, \"recompute_time_s\": %.9g", r->step_time,
                                 r->recompute_time);
            if (r->has_bound)
                remat_buf_printf(&b, ", \"lower_bound\": %llu, \"gap_flops\": %llu",
                                 (unsigned long long)r->lower_bound,
                                 (unsigned long long)(r->extra_flops - r->lower_bound));
            if (!r->replayed) {
                remat_buf_puts(&b, ", \"error\": ");
                remat_buf_json_str(&b, r->message);
            }
            remat_buf_printf(&b, ", \"plan_seconds\": %.6f}", r->seconds);
        }
        remat_buf_puts(&b, "\n ]}\n");
    } else {
        char bb[64];
        remat_buf_printf(&b, "graph %s, %s budget %s\n", a->g->name, kind,
                         remat_format_bytes(o->budget, bb, sizeof bb));
        remat_buf_printf(&b, "%-28s %-8s %22s %20s %10s %10s %20s %14s %14s%s\n", "strategy", "feasible",
                         o->budget_kind == REMAT_BUDGET_ACTIVATION ? "activation peak (B)" : "replayed peak (B)",
                         "extra FLOPs", "overhead", "time (ms)", "best-fit HW (B)", "frag (B)", "arena (B)",
                         o->device ? "  step time (us)  recompute (us)" : "");
        for (size_t i = 0; i < n; i++) {
            const remat_compare_row *r = &rows[i];
            char name[48];
            label(name, sizeof name, r->strategy, r->linearized, r->paper);
            if (r->replayed)
                remat_buf_printf(&b, "%-28s %-8s %22llu %20llu %9.2f%% %10.1f %20llu %14llu %14llu", name,
                                 status_word(r), (unsigned long long)r->metric, (unsigned long long)r->extra_flops,
                                 100.0 * r->overhead, 1000.0 * r->seconds, (unsigned long long)r->best_fit_high_water,
                                 (unsigned long long)r->fragmentation, (unsigned long long)r->arena_bytes);
            if (r->replayed && r->has_time)
                remat_buf_printf(&b, " %16.3f %15.3f", 1e6 * r->step_time, 1e6 * r->recompute_time);
            if (r->replayed)
                remat_buf_puts(&b, "\n");
            if (!r->replayed)
                remat_buf_printf(&b, "%-28s %-8s %s\n", name, status_word(r), r->message);
        }
        /* The certificate: no schedule that runs the steps in the graph's
         * order needs fewer extra FLOPs than the bound at this budget. */
        for (size_t i = 0; i < n; i++) {
            const remat_compare_row *r = &rows[i];
            if (!r->has_bound)
                continue;
            double base = r->overhead > 0 ? (double)r->extra_flops / r->overhead : 0;
            if (r->extra_flops == r->lower_bound)
                remat_buf_printf(&b, "%s is optimal: lower bound %llu extra FLOPs (fixed-order class)\n",
                                 r->strategy, (unsigned long long)r->lower_bound);
            else
                remat_buf_printf(&b, "%s's lower bound: %llu extra FLOPs (fixed-order class), gap %.2f pp of "
                                     "overhead\n",
                                 r->strategy, (unsigned long long)r->lower_bound,
                                 base > 0 ? 100.0 * (double)(r->extra_flops - r->lower_bound) / base : 0.0);
        }
    }
    return remat_buf_finish(&b, len, err, "comparison");
}

/* Series styles: a colour, a dash pattern and a marker shape each, so that
 * series that coincide (chen-greedy under revolve) stay visible as two, and
 * a series with one feasible budget (store-all) still shows a marker. */
static const char *const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                                      "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#000000", "#aec7e8",
                                      "#393b79", "#637939", "#8c6d31", "#843c39"};
static const char *const dashes[] = {"", "7 3", "2 3", "9 3 2 3", "4 4", "1 2", "12 4"};
enum { N_MARKERS = 6 };

/* A hollow marker of shape k at (x, y), so that markers of coinciding
 * series show through one another. */
static void marker(remat_buf *b, int k, double x, double y, const char *col)
{
    const char *style = "fill=\"none\" stroke-width=\"1.6\"";
    switch (k % N_MARKERS) {
    case 0: remat_buf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" %s stroke=\"%s\"/>\n", x, y, style, col); break;
    case 1:
        remat_buf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"7\" height=\"7\" %s stroke=\"%s\"/>\n", x - 3.5, y - 3.5,
                         style, col);
        break;
    case 2:
        remat_buf_printf(b, "<path d=\"M%.1f %.1fl4.5 8h-9z\" %s stroke=\"%s\"/>\n", x, y - 5, style, col);
        break;
    case 3:
        remat_buf_printf(b, "<path d=\"M%.1f %.1fl5 5l-5 5l-5 -5z\" %s stroke=\"%s\"/>\n", x, y - 5, style, col);
        break;
    case 4:
        remat_buf_printf(b, "<path d=\"M%.1f %.1fh10M%.1f %.1fv10\" %s stroke=\"%s\"/>\n", x - 5, y, x, y - 5, style, col);
        break;
    default:
        remat_buf_printf(b, "<path d=\"M%.1f %.1fl-4.5 -8h9z\" %s stroke=\"%s\"/>\n", x, y + 5, style, col);
        break;
    }
}

/* The smallest of 1, 2, 5 times a power of ten at least v (> 0): tick
 * steps that read as round numbers. */
static double nice_step(double v)
{
    double p = pow(10.0, floor(log10(v)));
    double m = v / p;
    return (m <= 1.0 ? 1.0 : m <= 2.0 ? 2.0 : m <= 5.0 ? 5.0 : 10.0) * p;
}

char *remat_report_sweep(const remat_analysis *a, const remat_sweep *s, int svg, size_t *len, remat_err *err)
{
    remat_buf b;
    remat_buf_init(&b);
    const size_t n = s->n_budgets;
    if (!svg) {
        remat_buf_puts(&b, "{\"graph\": ");
        remat_buf_json_str(&b, a->g->name);
        remat_buf_printf(&b, ", \"kind\": \"%s\",\n \"budgets\": [",
                         s->kind == REMAT_BUDGET_ACTIVATION ? "activation" : "total");
        for (size_t i = 0; i < n; i++)
            remat_buf_printf(&b, "%s%llu", i ? ", " : "", (unsigned long long)s->budgets[i]);
        remat_buf_puts(&b, "],\n \"overhead\": {");
        for (size_t k = 0; k < s->n_series; k++) {
            remat_buf_printf(&b, "%s\n  \"%s\": [", k ? "," : "", s->names[k]);
            for (size_t i = 0; i < n; i++) {
                double v = s->values[k * n + i];
                if (v < 0)
                    remat_buf_printf(&b, "%snull", i ? ", " : "");
                else
                    remat_buf_printf(&b, "%s%.6f", i ? ", " : "", v);
            }
            remat_buf_puts(&b, "]");
        }
        remat_buf_puts(&b, "\n }}\n");
        return remat_buf_finish(&b, len, err, "comparison");
    }
    /* Chart: x = budget (MiB), y = overhead (%), one polyline per strategy;
     * infeasible points break the line and are marked with a cross on the
     * strategy's row below the axis. Ticks are round numbers (1, 2, 5 x
     * 10^k), the y axis ends at a tick. */
    const double W = 860, L = 80, R = 200, T = 40;
    const double rows = (double)s->n_series * 9.0 + 10.0; /* the infeasibility strip */
    const double B = 60 + rows, H = 420 + rows;
    double vmax = 0;
    for (size_t i = 0; i < n * s->n_series; i++)
        if (s->values[i] > vmax)
            vmax = s->values[i];
    vmax *= 100;
    const double ystep = nice_step(vmax > 0 ? vmax / 5 : 1);
    const double ymax = ystep * ceil(vmax / ystep + 1e-9 > 0 ? vmax / ystep + 1e-9 : 1);
    double x0 = (double)s->budgets[0], x1 = (double)s->budgets[n - 1];
    if (x1 <= x0)
        x1 = x0 + 1;
    const double MiB = 1048576.0;
    remat_buf_printf(&b,
                     "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
                     "width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" "
                     "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                     W, H, W, H);
    remat_buf_puts(&b, "<text x=\"80\" y=\"24\" font-size=\"15\">Recompute overhead versus ");
    remat_buf_puts(&b, s->kind == REMAT_BUDGET_ACTIVATION ? "activation budget" : "total budget");
    remat_buf_puts(&b, ": ");
    {
        /* Graph names are user text: escape for XML. */
        for (const char *p = a->g->name; *p; p++) {
            switch (*p) {
            case '<': remat_buf_puts(&b, "&lt;"); break;
            case '>': remat_buf_puts(&b, "&gt;"); break;
            case '&': remat_buf_puts(&b, "&amp;"); break;
            case '"': remat_buf_puts(&b, "&quot;"); break;
            default: remat_buf_putn(&b, p, 1);
            }
        }
    }
    remat_buf_puts(&b, "</text>\n");
    const double pw = W - L - R, ph = H - T - B;
    remat_buf_printf(&b, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#444\"/>\n",
                     L, T, pw, ph);
    for (double v = 0; v <= ymax * (1 + 1e-9); v += ystep) {
        double y = T + ph - ph * v / ymax;
        remat_buf_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, y,
                         L + pw, y);
        remat_buf_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g%%</text>\n", L - 6, y + 4, v);
    }
    const double xstep = nice_step((x1 - x0) / MiB / 5);
    for (double v = ceil(x0 / MiB / xstep - 1e-9) * xstep; v * MiB <= x1 * (1 + 1e-12); v += xstep) {
        double x = L + pw * (v * MiB - x0) / (x1 - x0);
        remat_buf_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>\n", x, T + ph, x,
                         T + ph + 4);
        remat_buf_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", x, T + ph + 18, v);
    }
    remat_buf_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">budget (MiB, 2^20 B)</text>\n",
                     L + pw / 2, T + ph + 36);
    remat_buf_printf(&b,
                     "<text x=\"18\" y=\"%.1f\" transform=\"rotate(-90 18 %.1f)\" text-anchor=\"middle\">extra "
                     "FLOPs / (forward + backward)</text>\n",
                     T + ph / 2, T + ph / 2);
    const double strip = T + ph + 50; /* infeasible budgets: one row per strategy */
    remat_buf_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"10\" fill=\"#555\">infeasible</text>\n",
                     L - 6, strip + 4);
    for (size_t k = 0; k < s->n_series; k++) {
        const char *col = palette[k % (sizeof palette / sizeof palette[0])];
        const char *dash = dashes[k % (sizeof dashes / sizeof dashes[0])];
        int open = 0;
        for (size_t i = 0; i < n; i++) {
            double v = s->values[k * n + i];
            double x = L + pw * ((double)s->budgets[i] - x0) / (x1 - x0);
            if (v < 0) {
                if (open)
                    remat_buf_puts(&b, "\"/>\n");
                open = 0;
                double y = strip + 9.0 * (double)k;
                remat_buf_printf(&b, "<path d=\"M%.1f %.1fl6 6M%.1f %.1fl-6 6\" stroke=\"%s\" stroke-width=\"1.4\"/>\n",
                                 x - 3, y - 3, x + 3, y - 3, col);
                continue;
            }
            double y = T + ph - ph * (v * 100) / ymax;
            if (!open)
                remat_buf_printf(&b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s%s%s points=\"", col,
                                 *dash ? " stroke-dasharray=\"" : "", dash, *dash ? "\"" : "");
            remat_buf_printf(&b, "%.1f,%.1f ", x, y);
            open = 1;
        }
        if (open)
            remat_buf_puts(&b, "\"/>\n");
        for (size_t i = 0; i < n; i++) {
            double v = s->values[k * n + i];
            if (v >= 0)
                marker(&b, (int)k, L + pw * ((double)s->budgets[i] - x0) / (x1 - x0), T + ph - ph * (v * 100) / ymax,
                       col);
        }
        const double ly = T + 12 + 18.0 * (double)k;
        remat_buf_printf(&b, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" stroke-width=\"2\"%s%s%s/>\n",
                         L + pw + 10, ly, L + pw + 38, ly, col, *dash ? " stroke-dasharray=\"" : "", dash,
                         *dash ? "\"" : "");
        marker(&b, (int)k, L + pw + 24, ly, col);
        remat_buf_printf(&b, "<text x=\"%.0f\" y=\"%.0f\">%s</text>\n", L + pw + 44, ly + 4, s->names[k]);
    }
    remat_buf_puts(&b, "</svg>\n");
    return remat_buf_finish(&b, len, err, "comparison");
}

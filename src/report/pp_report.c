/*
 * pp_report.c - the pipeline's two documents: one planned (or replayed)
 * pipeline, and every strategy planning the same pipeline side by side.
 *
 * Both are entries of the document table (report_write.c: "pipeline",
 * "pp-compare"), so a library caller writes them through remat_report_write
 * as it writes every other report, and the CLI's format flags come from the
 * same table. The pipeline document without a device gives durations as each
 * stage's FLOPs (forward; backward with its recomputation), so the step time
 * is in FLOP units at one FLOP per unit; with a device (r->timed) the step
 * and its parts per device (compute, recompute, exposed send/recv, bubble)
 * are seconds, and they sum to the step. Each document is built whole in
 * memory and returned, or NULL with the error.
 *
 * The comparison's rows (remat_pp_compare_run) are one remat_pp_plan call
 * each with that strategy for every stage (the same cuts, schedule and
 * per-device budget), so the rows differ only in how each stage recomputes;
 * a strategy that cannot meet the budget on some device, or refuses a
 * stage's graph, is a row with its reason, as in compare's single-device
 * table (compare.c). auto and the strategies that run others come last.
 */
#include "remat/pipeline.h"
#include "remat/trace.h"
#include "../util/util_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* One unit for a whole report, from its step time: us, ms or s. */
static double time_unit(double step, const char **name)
{
    if (step < 1e-3) {
        *name = "us";
        return 1e6;
    }
    if (step < 1) {
        *name = "ms";
        return 1e3;
    }
    *name = "s";
    return 1;
}

/* Device d's recomputation: each of its chunks' recompute time, once per
 * microbatch. */
static double device_recompute(const remat_pp_result *r, uint32_t d)
{
    double x = 0;
    for (uint32_t ch = 0; ch < r->config.chunks; ch++)
        x += r->stages[ch * r->config.stages + d].recompute_time * r->config.microbatches;
    return x;
}

static double device_bubble(const remat_pp_result *r, uint32_t d)
{
    double b = r->timeline.step_time - r->timeline.device_busy[d] - r->timeline.device_exposed[d];
    return b > 0 ? b : 0;
}

static void measured_counts(const remat_pp_result *r, uint32_t *measured, uint32_t *of)
{
    *measured = *of = 0;
    for (uint32_t v = 0; v < r->n_stages; v++) {
        *measured += r->stages[v].n_measured;
        *of += r->stages[v].n_timed;
    }
}

static void time_text(remat_buf *H, const remat_pp_result *r)
{
    const remat_pp_timeline *t = &r->timeline;
    const char *u;
    const double k = time_unit(t->step_time, &u);
    uint32_t meas, of;
    measured_counts(r, &meas, &of);
    remat_buf_printf(H, "step %.4f %s on %s (op times: %u of %u measured, the rest roofline; each boundary tensor a "
                        "send of latency + bytes / link bandwidth), bubble %.2f%% of device time (%.2f%% of the "
                        "ideal), exposed send/recv %.4f %s\n",
                     t->step_time * k, u, r->device.name, meas, of, 100 * t->bubble_fraction, 100 * t->bubble_ratio,
                     t->exposed_comm * k, u);
    remat_buf_printf(H, "%-5s %12s %12s %12s %12s %12s   (%s, one microbatch)\n", "stage", "forward", "backward",
                     "recompute", "send act", "send grad", u);
    for (uint32_t v = 0; v < r->n_stages; v++) {
        const remat_pp_stage *s = &r->stages[v];
        remat_buf_printf(H, "%-5u %12.4f %12.4f %12.4f %12.4f %12.4f\n", v, s->fwd_time * k, s->bwd_time * k,
                         s->recompute_time * k, s->act_send_time * k, s->grad_send_time * k);
    }
    remat_buf_printf(H, "%-6s %12s %12s %18s %12s   (%s, the whole step: they sum to the step)\n", "device", "compute",
                     "recompute", "send/recv exposed", "bubble", u);
    for (uint32_t d = 0; d < r->config.stages; d++) {
        double rc = device_recompute(r, d);
        remat_buf_printf(H, "%-6u %12.4f %12.4f %18.4f %12.4f\n", d, (t->device_busy[d] - rc) * k, rc * k,
                         t->device_exposed[d] * k, device_bubble(r, d) * k);
    }
}

static void time_json(remat_buf *H, const remat_pp_result *r)
{
    const remat_pp_timeline *t = &r->timeline;
    uint32_t meas, of;
    measured_counts(r, &meas, &of);
    /* A device file names itself: quote it as JSON. */
    remat_buf_puts(H, " \"time\": {\"device\": ");
    remat_buf_json_str(H, r->device.name);
    remat_buf_printf(H, ", \"step_s\": %.17g, \"exposed_comm_s\": %.17g, \"bubble_s\": %.17g, "
                        "\"measured_ops\": {\"measured\": %u, \"of\": %u},\n  \"stages\": [",
                     t->step_time, t->exposed_comm, t->bubble_time, meas, of);
    for (uint32_t v = 0; v < r->n_stages; v++) {
        const remat_pp_stage *s = &r->stages[v];
        remat_buf_printf(H, "%s{\"stage\": %u, \"forward_s\": %.17g, \"backward_s\": %.17g, \"recompute_s\": %.17g, "
                            "\"send_activation_s\": %.17g, \"send_gradient_s\": %.17g}",
                         v ? ",\n   " : "", v, s->fwd_time, s->bwd_time, s->recompute_time, s->act_send_time,
                         s->grad_send_time);
    }
    remat_buf_puts(H, "],\n  \"devices\": [");
    for (uint32_t d = 0; d < r->config.stages; d++) {
        double rc = device_recompute(r, d);
        remat_buf_printf(H, "%s{\"device\": %u, \"compute_s\": %.17g, \"recompute_s\": %.17g, \"exposed_comm_s\": "
                            "%.17g, \"bubble_s\": %.17g}",
                         d ? ",\n   " : "", d, t->device_busy[d] - rc, rc, t->device_exposed[d], device_bubble(r, d));
    }
    remat_buf_puts(H, "]},\n");
}

static void pipeline_text(remat_buf *H, const char *how, const remat_pp_result *r, const remat_plan_options *o)
{
    const remat_pp_config *c = &r->config;
    char b1[64];
    remat_buf_printf(H, "pipeline %s", remat_pp_kind_name(c->kind));
    if (c->kind == REMAT_PP_INTERLEAVED)
        remat_buf_printf(H, ":%u", c->chunks);
    remat_buf_printf(H, ": %u devices x %u microbatches, %u stages %s\n", c->stages, c->microbatches, r->n_stages,
                     how);
    if (o->budget_kind == REMAT_BUDGET_TOTAL)
        remat_buf_printf(H, "budget (total, per device) %s: met\n", remat_format_bytes(o->budget, b1, sizeof b1));
    const remat_pp_timeline *t = &r->timeline;
    if (!r->timed)
        remat_buf_printf(H, "step %.6g FLOP-units (each stage's FLOPs as its duration), bubble %.2f%% of device time "
                            "(%.2f%% of the ideal)\n",
                         t->step_time, 100 * t->bubble_fraction, 100 * t->bubble_ratio);
    remat_buf_printf(H, "%-6s %-5s %-13s %9s %14s %14s %14s %14s  %s\n", "device", "stage", "ops", "in flight",
                     "persistent B", "held B/mb", "running B", "recv/send B", "plan (extra FLOPs)");
    for (uint32_t v = 0; v < r->n_stages; v++) {
        const remat_pp_stage *s = &r->stages[v];
        char ops[32], rs[48];
        snprintf(ops, sizeof ops, "%u:%u", s->first, s->end);
        snprintf(rs, sizeof rs, "%" PRIu64 "/%" PRIu64, s->recv_bytes, s->send_bytes);
        remat_buf_printf(H, "%-6u %-5u %-13s %9u %14" PRIu64 " %14" PRIu64 " %14" PRIu64 " %14s  %s (%" PRIu64 ")\n",
                         s->device, v, ops, t->max_in_flight[s->device], s->persistent, s->held, s->running, rs,
                         s->plan.strategy ? s->plan.strategy : "?", s->replay.flops_recompute);
    }
    for (uint32_t d = 0; d < c->stages; d++)
        remat_buf_printf(H, "device %u peak %s, %u in flight%s\n", d,
                         remat_format_bytes(r->device_peak[d], b1, sizeof b1), t->max_in_flight[d],
                         d == r->largest ? "  <- largest" : "");
    if (r->timed)
        time_text(H, r);
}

static void pipeline_json(remat_buf *H, const remat_pp_result *r, const remat_plan_options *o)
{
    const remat_pp_config *c = &r->config;
    const remat_pp_timeline *t = &r->timeline;
    remat_buf_printf(H, "{\"pipeline\": {\"schedule\": \"%s\", \"devices\": %u, \"microbatches\": %u, \"chunks\": %u},\n",
                     remat_pp_kind_name(c->kind), c->stages, c->microbatches, c->chunks);
    if (o->budget_kind == REMAT_BUDGET_TOTAL)
        remat_buf_printf(H, " \"budget\": %" PRIu64 ",\n", o->budget);
    remat_buf_printf(H, " \"time_unit\": \"%s\", \"step_time\": %.17g, \"busy\": %.17g, \"bubble_fraction\": %.17g, "
                        "\"bubble_ratio\": %.17g,\n",
                     r->timed ? "s" : "flop", t->step_time, t->busy, t->bubble_fraction, t->bubble_ratio);
    if (r->timed)
        time_json(H, r);
    remat_buf_puts(H, " \"stages\": [");
    for (uint32_t v = 0; v < r->n_stages; v++) {
        const remat_pp_stage *s = &r->stages[v];
        remat_buf_printf(H,
                         "%s\n  {\"stage\": %u, \"device\": %u, \"chunk\": %u, \"first_op\": %u, \"end_op\": %u, "
                         "\"forward_flops\": %.17g, \"backward_flops\": %.17g, \"strategy\": \"%s\", \"extra_flops\": "
                         "%" PRIu64 ", \"persistent\": %" PRIu64 ", \"held_per_microbatch\": %" PRIu64
                         ", \"running\": %" PRIu64 ", \"recv_bytes\": %" PRIu64 ", \"send_bytes\": %" PRIu64
                         ", \"one_microbatch_peak\": %" PRIu64 "}",
                         v ? "," : "", v, s->device, s->chunk, s->first, s->end, s->fwd_flops, s->bwd_flops,
                         s->plan.strategy ? s->plan.strategy : "?", s->replay.flops_recompute, s->persistent, s->held,
                         s->running, s->recv_bytes, s->send_bytes, s->replay.peak_bytes);
    }
    remat_buf_puts(H, "],\n \"devices\": [");
    for (uint32_t d = 0; d < c->stages; d++)
        remat_buf_printf(H, "%s\n  {\"device\": %u, \"in_flight\": %u, \"peak_bytes\": %" PRIu64 "}", d ? "," : "", d,
                         t->max_in_flight[d], r->device_peak[d]);
    remat_buf_printf(H, "],\n \"largest\": {\"device\": %u, \"peak_bytes\": %" PRIu64 "}}\n", r->largest,
                     r->device_peak[r->largest]);
}

char *remat_report_pipeline(const remat_pp_result *r, const remat_plan_options *o, const char *how,
                            remat_report_format fmt, size_t *len, remat_err *err)
{
    if (fmt == REMAT_REPORT_CHROME)
        return remat_pp_trace_chrome(r, len, err);
    if (fmt != REMAT_REPORT_TEXT && fmt != REMAT_REPORT_JSON) {
        remat_err_set(err, REMAT_EINVAL, "remat_report_pipeline: `fmt` %s is not text, json or chrome",
                      remat_report_format_name(fmt));
        return NULL;
    }
    remat_buf b;
    remat_buf_init(&b);
    if (fmt == REMAT_REPORT_JSON)
        pipeline_json(&b, r, o);
    else
        pipeline_text(&b, how ? how : "", r, o);
    return remat_buf_finish(&b, len, err, "pipeline report");
}

/* ---- every strategy under one pipeline ------------------------------------ */

static void run_row(const remat_analysis *a, const remat_pp_config *c, const uint32_t *cuts, remat_pp_balance by,
                    const remat_plan_options *base, remat_pp_compare_row *w)
{
    remat_plan_options o = *base;
    o.strategy = w->strategy;
    remat_err err;
    remat_err_init(&err);
    remat_pp_result r;
    w->status = remat_pp_plan(a, c, cuts, by, &o, &r, &err);
    if (w->status == REMAT_OK) {
        w->device_peak = remat__calloc(c->stages, sizeof *w->device_peak);
        if (!w->device_peak) {
            w->status = REMAT_ENOMEM;
            snprintf(w->message, sizeof w->message, "out of memory");
        } else {
            memcpy(w->device_peak, r.device_peak, c->stages * sizeof *w->device_peak);
            w->largest = r.largest;
            w->peak = r.device_peak[r.largest];
            for (uint32_t v = 0; v < r.n_stages; v++)
                w->extra_flops += (double)r.stages[v].replay.flops_recompute * c->microbatches;
            w->step_time = r.timeline.step_time;
            w->bubble_fraction = r.timeline.bubble_fraction;
            w->exposed_comm = r.timeline.exposed_comm;
        }
    } else
        snprintf(w->message, sizeof w->message, "%s", err.msg);
    remat_pp_result_destroy(&r);
}

remat_status remat_pp_compare_begin(const remat_pp_config *c, const remat_plan_options *o, remat_pp_compare *pc,
                                    remat_err *err)
{
    memset(pc, 0, sizeof *pc);
    pc->config = *c;
    pc->budget = o->budget;
    pc->timed = o->device != NULL;
    size_t k;
    const remat_strategy_info *s = remat_plan_strategies(&k);
    pc->rows = remat__calloc(k ? k : 1, sizeof *pc->rows);
    if (!pc->rows)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory");
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < k; i++)
            if (!(s[i].flags & REMAT_STRATEGY_RUNS_OTHERS) == !pass)
                pc->rows[pc->n_rows++].strategy = s[i].name;
    return REMAT_OK;
}

void remat_pp_compare_row_run(const remat_analysis *a, const uint32_t *cuts, remat_pp_balance by,
                              const remat_plan_options *o, remat_pp_compare *pc, size_t i)
{
    run_row(a, &pc->config, cuts, by, o, &pc->rows[i]);
}

void remat_pp_compare_destroy(remat_pp_compare *pc)
{
    if (!pc)
        return;
    for (size_t i = 0; pc->rows && i < pc->n_rows; i++)
        remat__free(pc->rows[i].device_peak);
    remat__free(pc->rows);
    memset(pc, 0, sizeof *pc);
}

static void compare_json(remat_buf *b, const remat_pp_compare *pc)
{
    const remat_pp_config *c = &pc->config;
    remat_buf_printf(b, "{\"pipeline\": {\"schedule\": \"%s\", \"devices\": %u, \"microbatches\": %u, "
                        "\"chunks\": %u}, \"budget\": %" PRIu64 ", \"time_unit\": \"%s\",\n \"rows\": [",
                     remat_pp_kind_name(c->kind), c->stages, c->microbatches, c->chunks, pc->budget,
                     pc->timed ? "s" : "flop");
    for (size_t i = 0; i < pc->n_rows; i++) {
        const remat_pp_compare_row *w = &pc->rows[i];
        remat_buf_printf(b, "%s\n  {\"strategy\": \"%s\", \"feasible\": %s", i ? "," : "", w->strategy,
                         w->status == REMAT_OK ? "true" : "false");
        if (w->status == REMAT_OK) {
            remat_buf_printf(b, ", \"peak_bytes\": %" PRIu64 ", \"largest_device\": %u, \"device_peaks\": [", w->peak,
                             w->largest);
            for (uint32_t d = 0; d < c->stages; d++)
                remat_buf_printf(b, "%s%" PRIu64, d ? ", " : "", w->device_peak[d]);
            remat_buf_printf(b, "], \"extra_flops\": %.17g, \"step_time\": %.17g, \"bubble_fraction\": %.17g",
                             w->extra_flops, w->step_time, w->bubble_fraction);
            if (pc->timed)
                remat_buf_printf(b, ", \"exposed_comm_s\": %.17g", w->exposed_comm);
        } else {
            remat_buf_puts(b, ", \"message\": ");
            remat_buf_json_str(b, w->message);
        }
        remat_buf_puts(b, "}");
    }
    remat_buf_puts(b, "]}\n");
}

static void compare_text(remat_buf *b, const remat_pp_compare *pc)
{
    const remat_pp_config *c = &pc->config;
    /* One time unit for the table, from its slowest row. */
    double most = 0, scale = 1e3;
    const char *tu = "ms";
    for (size_t i = 0; i < pc->n_rows; i++)
        if (pc->rows[i].status == REMAT_OK && pc->rows[i].step_time > most)
            most = pc->rows[i].step_time;
    if (most < 1e-3) {
        scale = 1e6;
        tu = "us";
    } else if (most >= 1) {
        scale = 1;
        tu = "s";
    }
    char col[32];
    snprintf(col, sizeof col, "step (%s)", tu);
    char b1[64];
    remat_buf_printf(b, "pipeline %s: %u devices x %u microbatches, budget (total, per device) %s\n",
                     remat_pp_kind_name(c->kind), c->stages, c->microbatches,
                     remat_format_bytes(pc->budget, b1, sizeof b1));
    remat_buf_printf(b, "%-18s %-9s %16s %7s %20s %16s %9s\n", "strategy", "feasible", "largest peak B", "device",
                     "extra FLOPs/step", pc->timed ? col : "step (FLOP-units)", "bubble");
    for (size_t i = 0; i < pc->n_rows; i++) {
        const remat_pp_compare_row *w = &pc->rows[i];
        if (w->status != REMAT_OK) {
            remat_buf_printf(b, "%-18s %-9s %s\n", w->strategy, "no", w->message);
            continue;
        }
        remat_buf_printf(b, "%-18s %-9s %16" PRIu64 " %7u %20.0f %16.6g %8.2f%%\n", w->strategy, "yes", w->peak,
                         w->largest, w->extra_flops, pc->timed ? w->step_time * scale : w->step_time,
                         100 * w->bubble_fraction);
    }
}

char *remat_report_pp_compare(const remat_pp_compare *pc, remat_report_format fmt, size_t *len, remat_err *err)
{
    if (fmt != REMAT_REPORT_TEXT && fmt != REMAT_REPORT_JSON) {
        remat_err_set(err, REMAT_EINVAL, "remat_report_pp_compare: `fmt` %s is not text or json",
                      remat_report_format_name(fmt));
        return NULL;
    }
    remat_buf b;
    remat_buf_init(&b);
    if (fmt == REMAT_REPORT_JSON)
        compare_json(&b, pc);
    else
        compare_text(&b, pc);
    return remat_buf_finish(&b, len, err, "pipeline comparison");
}

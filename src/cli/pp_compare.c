/*
 * pp_compare.c - `remat compare GRAPH --pp P ... --budget B [--device D]`:
 * every strategy planning every stage of the same pipeline, side by side.
 *
 * Each row is one remat_pp_plan call with that strategy for every stage
 * (the same cuts, schedule and per-device budget; the bisection lowers a
 * device's stage budget as it does for `remat plan --pp`), so the rows
 * differ only in how each stage recomputes. A strategy that cannot meet
 * the budget on some device, or refuses a stage's graph, is a row with its
 * reason, as in compare's single-device table. The figures: the largest
 * device peak, the recomputation per step (each stage's extra FLOPs times
 * the microbatches), the step and its bubble (FLOP units, or seconds with
 * --device). auto and the strategies that run others come last, as in
 * compare's table. The document is written whole or not at all.
 */
#include "cli.h"
#include "remat/pipeline.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const char *name;
    remat_status status;
    char message[REMAT_ERR_MSG_MAX];
    uint64_t peak;         /* the largest device's */
    uint32_t largest;
    uint64_t *device_peak; /* per device (owned) */
    double extra;          /* extra FLOPs per step */
    double step, bubble, exposed;
} row;

static void run_row(const remat_analysis *a, const remat_pp_config *c, const uint32_t *cuts, remat_pp_balance by,
                    const remat_plan_options *base, row *w)
{
    remat_plan_options o = *base;
    o.strategy = w->name;
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
                w->extra += (double)r.stages[v].replay.flops_recompute * c->microbatches;
            w->step = r.timeline.step_time;
            w->bubble = r.timeline.bubble_fraction;
            w->exposed = r.timeline.exposed_comm;
        }
    } else {
        snprintf(w->message, sizeof w->message, "%s", err.msg);
    }
    remat_pp_result_destroy(&r);
}

int remat_cli_pp_compare(const char *graph, const remat_analysis *a, const remat_cli_pp *p,
                         const remat_plan_options *o, int json, const char *out)
{
    remat_err err;
    remat_err_init(&err);
    const uint32_t n = p->c.stages * p->c.chunks;
    uint32_t cuts_buf[257], *cuts = NULL;
    if (p->stages) {
        if (n > 256)
            return remat_cli_usage_error("compare", "--pp-stages: at most 256 stages");
        if (remat_pp_parse_stages(p->stages, a->g->n_ops, n, cuts_buf, &err) != REMAT_OK)
            return remat_cli_usage_error("compare", "%s", err.msg);
        cuts = cuts_buf;
    }
    size_t k;
    const remat_strategy_info *s = remat_plan_strategies(&k);
    row *rows = remat__calloc(k ? k : 1, sizeof *rows);
    if (!rows)
        return remat_cli_fail(&err);
    size_t nr = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < k; i++)
            if (!(s[i].flags & REMAT_STRATEGY_RUNS_OTHERS) == !pass)
                rows[nr++].name = s[i].name;
    int rc = REMAT_EXIT_OK;
    for (size_t i = 0; i < nr; i++) {
        run_row(a, &p->c, cuts, p->by, o, &rows[i]);
        /* A bad command line is the same for every row: say it once. */
        if (rows[i].status == REMAT_EINVAL && strstr(rows[i].message, "--")) {
            rc = remat_cli_usage_error("compare", "%s", rows[i].message);
            break;
        }
        if (rows[i].status == REMAT_EOVERFLOW || rows[i].status == REMAT_ENOMEM ||
            (rows[i].status == REMAT_EGRAPH && o->device)) {
            remat_err_set(&err, rows[i].status, "%s", rows[i].message);
            rc = remat_cli_fail_in(graph, &err);
            break;
        }
    }
    const int timed = o->device != NULL;
    const char *unit = timed ? "s" : "flop";
    remat_buf b;
    remat_buf_init(&b);
    if (rc == REMAT_EXIT_OK && json) {
        remat_buf_printf(&b, "{\"pipeline\": {\"schedule\": \"%s\", \"devices\": %u, \"microbatches\": %u, "
                             "\"chunks\": %u}, \"budget\": %" PRIu64 ", \"time_unit\": \"%s\",\n \"rows\": [",
                         remat_pp_kind_name(p->c.kind), p->c.stages, p->c.microbatches, p->c.chunks, o->budget, unit);
        for (size_t i = 0; i < nr; i++) {
            const row *w = &rows[i];
            remat_buf_printf(&b, "%s\n  {\"strategy\": \"%s\", \"feasible\": %s", i ? "," : "", w->name,
                             w->status == REMAT_OK ? "true" : "false");
            if (w->status == REMAT_OK) {
                remat_buf_printf(&b, ", \"peak_bytes\": %" PRIu64 ", \"largest_device\": %u, \"device_peaks\": [",
                                 w->peak, w->largest);
                for (uint32_t d = 0; d < p->c.stages; d++)
                    remat_buf_printf(&b, "%s%" PRIu64, d ? ", " : "", w->device_peak[d]);
                remat_buf_printf(&b, "], \"extra_flops\": %.17g, \"step_time\": %.17g, \"bubble_fraction\": %.17g",
                                 w->extra, w->step, w->bubble);
                if (timed)
                    remat_buf_printf(&b, ", \"exposed_comm_s\": %.17g", w->exposed);
            } else {
                remat_buf_puts(&b, ", \"message\": ");
                remat_buf_json_str(&b, w->message);
            }
            remat_buf_puts(&b, "}");
        }
        remat_buf_puts(&b, "]}\n");
    } else if (rc == REMAT_EXIT_OK) {
        /* One time unit for the table, from its slowest row. */
        double most = 0, scale = 1e3;
        const char *tu = "ms";
        for (size_t i = 0; i < nr; i++)
            if (rows[i].status == REMAT_OK && rows[i].step > most)
                most = rows[i].step;
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
        remat_buf_printf(&b, "pipeline %s: %u devices x %u microbatches, budget (total, per device) %s\n",
                         remat_pp_kind_name(p->c.kind), p->c.stages, p->c.microbatches,
                         remat_format_bytes(o->budget, b1, sizeof b1));
        remat_buf_printf(&b, "%-18s %-9s %16s %7s %20s %16s %9s\n", "strategy", "feasible", "largest peak B", "device",
                         "extra FLOPs/step", timed ? col : "step (FLOP-units)", "bubble");
        for (size_t i = 0; i < nr; i++) {
            const row *w = &rows[i];
            if (w->status != REMAT_OK) {
                remat_buf_printf(&b, "%-18s %-9s %s\n", w->name, "no", w->message);
                continue;
            }
            remat_buf_printf(&b, "%-18s %-9s %16" PRIu64 " %7u %20.0f %16.6g %8.2f%%\n", w->name, "yes", w->peak,
                             w->largest, w->extra, timed ? w->step * scale : w->step, 100 * w->bubble);
        }
    }
    for (size_t i = 0; i < nr; i++)
        remat__free(rows[i].device_peak);
    remat__free(rows);
    if (rc != REMAT_EXIT_OK) {
        remat_buf_destroy(&b);
        return rc;
    }
    size_t len;
    char *text = remat_buf_finish(&b, &len, &err, "pipeline comparison");
    rc = text ? remat_cli_write(out, text, len) : remat_cli_fail(&err);
    remat_free(text);
    return rc;
}

/*
 * report_pipeline.c - a pipeline plan (remat/pipeline.h) as text or JSON:
 * the schedule, the bubble, one row per stage (its ops, the microbatches
 * in flight on its device, persistent, held and running bytes, the
 * activations it receives and sends, its plan) and each device's peak.
 *
 * It was the CLI's own printer; as a document of the report table
 * (REMAT_DOC_PIPELINE) a library caller gets the same bytes, and the CLI's
 * --json is generated for it like every other document's. Durations are
 * each stage's FLOPs, so the step time is in FLOP units.
 */
#include "remat/pipeline.h"
#include "../util/util_internal.h"

#include <inttypes.h>
#include <stdio.h>

static void put_text(remat_buf *b, const remat_pp_result *r, const remat_plan_options *o)
{
    const remat_pp_config *c = &r->config;
    char b1[64];
    remat_buf_printf(b, "pipeline %s", remat_pp_kind_name(c->kind));
    if (c->kind == REMAT_PP_INTERLEAVED)
        remat_buf_printf(b, ":%u", c->chunks);
    remat_buf_printf(b, ": %u devices x %u microbatches, %u stages %s\n", c->stages, c->microbatches, r->n_stages,
                     r->cuts_given ? "as given (`cuts`)"
                     : r->by == REMAT_PP_BALANCE_BYTES ? "balanced by activation bytes"
                                                       : "balanced by FLOPs");
    if (o->budget_kind == REMAT_BUDGET_TOTAL)
        remat_buf_printf(b, "budget (total, per device) %s: met\n", remat_format_bytes(o->budget, b1, sizeof b1));
    const remat_pp_timeline *t = &r->timeline;
    remat_buf_printf(b, "step %.6g FLOP-units (each stage's FLOPs as its duration), bubble %.2f%% of device time "
                        "(%.2f%% of the ideal)\n",
                     t->step_time, 100 * t->bubble_fraction, 100 * t->bubble_ratio);
    remat_buf_printf(b, "%-6s %-5s %-13s %9s %14s %14s %14s %14s  %s\n", "device", "stage", "ops", "in flight",
                     "persistent B", "held B/mb", "running B", "recv/send B", "plan (extra FLOPs)");
    for (uint32_t v = 0; v < r->n_stages; v++) {
        const remat_pp_stage *s = &r->stages[v];
        char ops[32], rs[48];
        snprintf(ops, sizeof ops, "%u:%u", s->first, s->end);
        snprintf(rs, sizeof rs, "%" PRIu64 "/%" PRIu64, s->recv_bytes, s->send_bytes);
        remat_buf_printf(b, "%-6u %-5u %-13s %9u %14" PRIu64 " %14" PRIu64 " %14" PRIu64 " %14s  %s (%" PRIu64 ")\n",
                         s->device, v, ops, t->max_in_flight[s->device], s->persistent, s->held, s->running, rs,
                         s->plan.strategy ? s->plan.strategy : "?", s->replay.flops_recompute);
    }
    for (uint32_t d = 0; d < c->stages; d++)
        remat_buf_printf(b, "device %u peak %s, %u in flight%s\n", d,
                         remat_format_bytes(r->device_peak[d], b1, sizeof b1), t->max_in_flight[d],
                         d == r->largest ? "  <- largest" : "");
}

static void put_json(remat_buf *b, const remat_pp_result *r, const remat_plan_options *o)
{
    const remat_pp_config *c = &r->config;
    const remat_pp_timeline *t = &r->timeline;
    remat_buf_printf(b, "{\"pipeline\": {\"schedule\": \"%s\", \"devices\": %u, \"microbatches\": %u, \"chunks\": %u},\n",
                     remat_pp_kind_name(c->kind), c->stages, c->microbatches, c->chunks);
    if (o->budget_kind == REMAT_BUDGET_TOTAL)
        remat_buf_printf(b, " \"budget\": %" PRIu64 ",\n", o->budget);
    remat_buf_printf(b, " \"step_time\": %.17g, \"busy\": %.17g, \"bubble_fraction\": %.17g, \"bubble_ratio\": %.17g,\n",
                     t->step_time, t->busy, t->bubble_fraction, t->bubble_ratio);
    remat_buf_puts(b, " \"stages\": [");
    for (uint32_t v = 0; v < r->n_stages; v++) {
        const remat_pp_stage *s = &r->stages[v];
        remat_buf_printf(b,
                         "%s\n  {\"stage\": %u, \"device\": %u, \"chunk\": %u, \"first_op\": %u, \"end_op\": %u, "
                         "\"forward_flops\": %.17g, \"backward_flops\": %.17g, \"strategy\": ",
                         v ? "," : "", v, s->device, s->chunk, s->first, s->end, s->fwd_flops, s->bwd_flops);
        remat_buf_json_str(b, s->plan.strategy ? s->plan.strategy : "?");
        remat_buf_printf(b,
                         ", \"extra_flops\": %" PRIu64 ", \"persistent\": %" PRIu64 ", \"held_per_microbatch\": %" PRIu64
                         ", \"running\": %" PRIu64 ", \"recv_bytes\": %" PRIu64 ", \"send_bytes\": %" PRIu64
                         ", \"one_microbatch_peak\": %" PRIu64 "}",
                         s->replay.flops_recompute, s->persistent, s->held, s->running, s->recv_bytes, s->send_bytes,
                         s->replay.peak_bytes);
    }
    remat_buf_puts(b, "],\n \"devices\": [");
    for (uint32_t d = 0; d < c->stages; d++)
        remat_buf_printf(b, "%s\n  {\"device\": %u, \"in_flight\": %u, \"peak_bytes\": %" PRIu64 "}", d ? "," : "", d,
                         t->max_in_flight[d], r->device_peak[d]);
    remat_buf_printf(b, "],\n \"largest\": {\"device\": %u, \"peak_bytes\": %" PRIu64 "}}\n", r->largest,
                     r->device_peak[r->largest]);
}

char *remat_report_pipeline(const remat_pp_result *r, const remat_plan_options *o, remat_report_format fmt,
                            size_t *len, remat_err *err)
{
    remat_buf b;
    remat_buf_init(&b);
    if (fmt == REMAT_REPORT_JSON)
        put_json(&b, r, o);
    else
        put_text(&b, r, o);
    return remat_buf_finish(&b, len, err, "pipeline report");
}

/*
 * cmd_pipeline.c - `remat plan GRAPH --pp P --microbatches M
 * [--pp-schedule gpipe|1f1b|interleaved:V] [--pp-stages A:B,...]
 * [--pp-balance flops|bytes]`: rematerialization per pipeline stage, each
 * device judged with the microbatches its schedule keeps in flight.
 *
 * The options are parsed here and the run is one call into the library
 * (remat/pipeline.h); this file only turns the result into lines or JSON.
 * Durations are each stage's FLOPs (forward; backward with its
 * recomputation), so the step time is in FLOP units at one FLOP per unit:
 * the bubble and the ratios are what the schedule makes of them, and a time
 * model that prices ops replaces the FLOPs without changing the schedule.
 */
#include "cli.h"
#include "remat/pipeline.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

void remat_cli_pp_init(remat_cli_pp *p)
{
    memset(p, 0, sizeof *p);
    p->c.kind = REMAT_PP_1F1B;
    p->c.chunks = 1;
    p->c.stages = 1;
    p->c.microbatches = 1;
}

int remat_cli_pp_option(const char *cmd, int c, const char *arg, remat_cli_pp *p)
{
    uint64_t v;
    int rc;
    remat_err err;
    remat_err_init(&err);
    switch (c) {
    case REMAT_PPOPT_PP:
        if ((rc = remat_cli_parse_count(cmd, "--pp", arg, 1, 4096, &v)) != REMAT_EXIT_OK)
            return rc;
        p->c.stages = (uint32_t)v;
        p->set = 1;
        return 0;
    case REMAT_PPOPT_MICROBATCHES:
        if ((rc = remat_cli_parse_count(cmd, "--microbatches", arg, 1, 1u << 20, &v)) != REMAT_EXIT_OK)
            return rc;
        p->c.microbatches = (uint32_t)v;
        p->extra = 1;
        return 0;
    case REMAT_PPOPT_SCHEDULE:
        if (remat_pp_parse_schedule(arg, &p->c, &err) != REMAT_OK)
            return remat_cli_usage_err(cmd, &err);
        p->extra = 1;
        return 0;
    case REMAT_PPOPT_STAGES:
        p->stages = arg;
        p->extra = 1;
        return 0;
    case REMAT_PPOPT_BALANCE:
        if (strcmp(arg, "flops") == 0)
            p->by = REMAT_PP_BALANCE_FLOPS;
        else if (strcmp(arg, "bytes") == 0)
            p->by = REMAT_PP_BALANCE_BYTES;
        else
            return remat_cli_usage_error(cmd, "--pp-balance '%s': expected flops or bytes", arg);
        p->extra = 1;
        return 0;
    default: return -1;
    }
}

int remat_cli_pp_check(const char *cmd, const remat_cli_pp *p)
{
    if (!p->set && p->extra)
        return remat_cli_usage_error(cmd, "--microbatches, --pp-schedule, --pp-stages and --pp-balance need --pp P");
    if (!p->set)
        return REMAT_EXIT_OK;
    if (p->stages && p->by != REMAT_PP_BALANCE_FLOPS)
        return remat_cli_usage_error(cmd, "--pp-stages gives the cuts; --pp-balance chooses them: give one");
    remat_err err;
    remat_err_init(&err);
    if (remat_pp_check(&p->c, &err) != REMAT_OK)
        return remat_cli_usage_err(cmd, &err);
    return REMAT_EXIT_OK;
}

static void print_text(FILE *H, const remat_cli_pp *p, const remat_pp_result *r, const remat_plan_options *o)
{
    const remat_pp_config *c = &r->config;
    char b1[64];
    fprintf(H, "pipeline %s", remat_pp_kind_name(c->kind));
    if (c->kind == REMAT_PP_INTERLEAVED)
        fprintf(H, ":%u", c->chunks);
    fprintf(H, ": %u devices x %u microbatches, %u stages %s\n", c->stages, c->microbatches, r->n_stages,
            p->stages ? "as given (--pp-stages)"
                      : p->by == REMAT_PP_BALANCE_BYTES ? "balanced by activation bytes" : "balanced by FLOPs");
    if (o->budget_kind == REMAT_BUDGET_TOTAL)
        fprintf(H, "budget (total, per device) %s: met\n", remat_format_bytes(o->budget, b1, sizeof b1));
    const remat_pp_timeline *t = &r->timeline;
    fprintf(H, "step %.6g FLOP-units (each stage's FLOPs as its duration), bubble %.2f%% of device time "
               "(%.2f%% of the ideal)\n",
            t->step_time, 100 * t->bubble_fraction, 100 * t->bubble_ratio);
    fprintf(H, "%-6s %-5s %-13s %9s %14s %14s %14s %14s  %s\n", "device", "stage", "ops", "in flight", "persistent B",
            "held B/mb", "running B", "recv/send B", "plan (extra FLOPs)");
    for (uint32_t v = 0; v < r->n_stages; v++) {
        const remat_pp_stage *s = &r->stages[v];
        char ops[32], rs[48];
        snprintf(ops, sizeof ops, "%u:%u", s->first, s->end);
        snprintf(rs, sizeof rs, "%" PRIu64 "/%" PRIu64, s->recv_bytes, s->send_bytes);
        fprintf(H, "%-6u %-5u %-13s %9u %14" PRIu64 " %14" PRIu64 " %14" PRIu64 " %14s  %s (%" PRIu64 ")\n",
                s->device, v, ops, t->max_in_flight[s->device], s->persistent, s->held, s->running, rs,
                s->plan.strategy ? s->plan.strategy : "?", s->replay.flops_recompute);
    }
    for (uint32_t d = 0; d < c->stages; d++)
        fprintf(H, "device %u peak %s, %u in flight%s\n", d, remat_format_bytes(r->device_peak[d], b1, sizeof b1),
                t->max_in_flight[d], d == r->largest ? "  <- largest" : "");
}

static void print_json(FILE *H, const remat_pp_result *r, const remat_plan_options *o)
{
    const remat_pp_config *c = &r->config;
    const remat_pp_timeline *t = &r->timeline;
    fprintf(H, "{\"pipeline\": {\"schedule\": \"%s\", \"devices\": %u, \"microbatches\": %u, \"chunks\": %u},\n",
            remat_pp_kind_name(c->kind), c->stages, c->microbatches, c->chunks);
    if (o->budget_kind == REMAT_BUDGET_TOTAL)
        fprintf(H, " \"budget\": %" PRIu64 ",\n", o->budget);
    fprintf(H, " \"step_time\": %.17g, \"busy\": %.17g, \"bubble_fraction\": %.17g, \"bubble_ratio\": %.17g,\n",
            t->step_time, t->busy, t->bubble_fraction, t->bubble_ratio);
    fprintf(H, " \"stages\": [");
    for (uint32_t v = 0; v < r->n_stages; v++) {
        const remat_pp_stage *s = &r->stages[v];
        fprintf(H,
                "%s\n  {\"stage\": %u, \"device\": %u, \"chunk\": %u, \"first_op\": %u, \"end_op\": %u, "
                "\"forward_flops\": %.17g, \"backward_flops\": %.17g, \"strategy\": \"%s\", \"extra_flops\": %" PRIu64
                ", \"persistent\": %" PRIu64 ", \"held_per_microbatch\": %" PRIu64 ", \"running\": %" PRIu64
                ", \"recv_bytes\": %" PRIu64 ", \"send_bytes\": %" PRIu64 ", \"one_microbatch_peak\": %" PRIu64 "}",
                v ? "," : "", v, s->device, s->chunk, s->first, s->end, s->fwd_flops, s->bwd_flops,
                s->plan.strategy ? s->plan.strategy : "?", s->replay.flops_recompute, s->persistent, s->held,
                s->running, s->recv_bytes, s->send_bytes, s->replay.peak_bytes);
    }
    fprintf(H, "],\n \"devices\": [");
    for (uint32_t d = 0; d < c->stages; d++)
        fprintf(H, "%s\n  {\"device\": %u, \"in_flight\": %u, \"peak_bytes\": %" PRIu64 "}", d ? "," : "", d,
                t->max_in_flight[d], r->device_peak[d]);
    fprintf(H, "],\n \"largest\": {\"device\": %u, \"peak_bytes\": %" PRIu64 "}}\n", r->largest,
            r->device_peak[r->largest]);
}

int remat_cli_pp_run(const char *cmd, const char *graph, const remat_analysis *a, const remat_cli_pp *p,
                     const remat_plan_options *o, int json, FILE *H)
{
    remat_err err;
    remat_err_init(&err);
    const uint32_t n = p->c.stages * p->c.chunks;
    uint32_t cuts_buf[257];
    uint32_t *cuts = NULL;
    if (p->stages) {
        if (n > 256)
            return remat_cli_usage_error(cmd, "--pp-stages: at most 256 stages");
        if (remat_pp_parse_stages(p->stages, a->g->n_ops, n, cuts_buf, &err) != REMAT_OK)
            return remat_cli_usage_err(cmd, &err);
        cuts = cuts_buf;
    }
    remat_pp_result r;
    remat_status st = remat_pp_plan(a, &p->c, cuts, p->by, o, &r, &err);
    int rc;
    if (st == REMAT_EINVAL)
        rc = remat_cli_usage_err(cmd, &err);
    else if (st != REMAT_OK)
        rc = st == REMAT_EOVERFLOW ? remat_cli_fail_in(graph, &err) : remat_cli_fail(&err);
    else {
        if (json)
            print_json(H, &r, o);
        else
            print_text(H, p, &r, o);
        rc = REMAT_EXIT_OK;
    }
    remat_pp_result_destroy(&r);
    return rc;
}

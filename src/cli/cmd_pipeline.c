/*
 * cmd_pipeline.c - `remat plan GRAPH --pp P --microbatches M
 * [--pp-schedule gpipe|1f1b|interleaved:V] [--pp-stages A:B,...]
 * [--pp-balance flops|bytes]`: rematerialization per pipeline stage, each
 * device judged with the microbatches its schedule keeps in flight.
 *
 * The options are parsed here and the run is one call into the library
 * (remat/pipeline.h); this file only turns the result into lines or JSON.
 * Without --device, durations are each stage's FLOPs (forward; backward
 * with its recomputation), so the step time is in FLOP units at one FLOP
 * per unit: the bubble and the ratios are what the schedule makes of them.
 * With --device the library times each stage on the device and each
 * boundary tensor as a SEND, and the step, its parts per device (compute,
 * recompute, exposed send/recv, bubble) are seconds; the schedule and the
 * memory figures are the same either way.
 */
#include "cli.h"
#include "ledger_opts.h"
#include "remat/pipeline.h"

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

static void print_time_text(FILE *H, const remat_pp_result *r)
{
    const remat_pp_timeline *t = &r->timeline;
    const char *u;
    const double k = time_unit(t->step_time, &u);
    uint32_t meas, of;
    measured_counts(r, &meas, &of);
    fprintf(H, "step %.4f %s on %s (op times: %u of %u measured, the rest roofline; each boundary tensor a send of "
               "latency + bytes / link bandwidth), bubble %.2f%% of device time (%.2f%% of the ideal), exposed "
               "send/recv %.4f %s\n",
            t->step_time * k, u, r->device.name, meas, of, 100 * t->bubble_fraction, 100 * t->bubble_ratio,
            t->exposed_comm * k, u);
    fprintf(H, "%-5s %12s %12s %12s %12s %12s   (%s, one microbatch)\n", "stage", "forward", "backward",
            "recompute", "send act", "send grad", u);
    for (uint32_t v = 0; v < r->n_stages; v++) {
        const remat_pp_stage *s = &r->stages[v];
        fprintf(H, "%-5u %12.4f %12.4f %12.4f %12.4f %12.4f\n", v, s->fwd_time * k, s->bwd_time * k,
                s->recompute_time * k, s->act_send_time * k, s->grad_send_time * k);
    }
    fprintf(H, "%-6s %12s %12s %18s %12s   (%s, the whole step: they sum to the step)\n", "device", "compute",
            "recompute", "send/recv exposed", "bubble", u);
    for (uint32_t d = 0; d < r->config.stages; d++) {
        double rc = device_recompute(r, d);
        fprintf(H, "%-6u %12.4f %12.4f %18.4f %12.4f\n", d, (t->device_busy[d] - rc) * k, rc * k,
                t->device_exposed[d] * k, device_bubble(r, d) * k);
    }
}

static void print_time_json(FILE *H, const remat_pp_result *r)
{
    const remat_pp_timeline *t = &r->timeline;
    uint32_t meas, of;
    measured_counts(r, &meas, &of);
    /* A device file names itself: quote it as JSON. */
    remat_buf nb;
    remat_buf_init(&nb);
    remat_buf_json_str(&nb, r->device.name);
    fprintf(H, " \"time\": {\"device\": %s", nb.failed || !nb.data ? "null" : nb.data);
    remat_buf_destroy(&nb);
    fprintf(H, ", \"step_s\": %.17g, \"exposed_comm_s\": %.17g, \"bubble_s\": %.17g, "
               "\"measured_ops\": {\"measured\": %u, \"of\": %u},\n  \"stages\": [",
            t->step_time, t->exposed_comm, t->bubble_time, meas, of);
    for (uint32_t v = 0; v < r->n_stages; v++) {
        const remat_pp_stage *s = &r->stages[v];
        fprintf(H, "%s{\"stage\": %u, \"forward_s\": %.17g, \"backward_s\": %.17g, \"recompute_s\": %.17g, "
                   "\"send_activation_s\": %.17g, \"send_gradient_s\": %.17g}",
                v ? ",\n   " : "", v, s->fwd_time, s->bwd_time, s->recompute_time, s->act_send_time,
                s->grad_send_time);
    }
    fprintf(H, "],\n  \"devices\": [");
    for (uint32_t d = 0; d < r->config.stages; d++) {
        double rc = device_recompute(r, d);
        fprintf(H, "%s{\"device\": %u, \"compute_s\": %.17g, \"recompute_s\": %.17g, \"exposed_comm_s\": %.17g, "
                   "\"bubble_s\": %.17g}",
                d ? ",\n   " : "", d, t->device_busy[d] - rc, rc, t->device_exposed[d], device_bubble(r, d));
    }
    fprintf(H, "]},\n");
}

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
            return remat_cli_usage_error(cmd, "%s", err.msg);
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
        return remat_cli_usage_error(cmd, "%s", err.msg);
    return REMAT_EXIT_OK;
}

static void print_text(FILE *H, const char *how, const remat_pp_result *r, const remat_plan_options *o)
{
    const remat_pp_config *c = &r->config;
    char b1[64];
    fprintf(H, "pipeline %s", remat_pp_kind_name(c->kind));
    if (c->kind == REMAT_PP_INTERLEAVED)
        fprintf(H, ":%u", c->chunks);
    fprintf(H, ": %u devices x %u microbatches, %u stages %s\n", c->stages, c->microbatches, r->n_stages,
            how);
    if (o->budget_kind == REMAT_BUDGET_TOTAL)
        fprintf(H, "budget (total, per device) %s: met\n", remat_format_bytes(o->budget, b1, sizeof b1));
    const remat_pp_timeline *t = &r->timeline;
    if (!r->timed)
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
    if (r->timed)
        print_time_text(H, r);
}

static void print_json(FILE *H, const remat_pp_result *r, const remat_plan_options *o)
{
    const remat_pp_config *c = &r->config;
    const remat_pp_timeline *t = &r->timeline;
    fprintf(H, "{\"pipeline\": {\"schedule\": \"%s\", \"devices\": %u, \"microbatches\": %u, \"chunks\": %u},\n",
            remat_pp_kind_name(c->kind), c->stages, c->microbatches, c->chunks);
    if (o->budget_kind == REMAT_BUDGET_TOTAL)
        fprintf(H, " \"budget\": %" PRIu64 ",\n", o->budget);
    fprintf(H, " \"time_unit\": \"%s\", \"step_time\": %.17g, \"busy\": %.17g, \"bubble_fraction\": %.17g, "
               "\"bubble_ratio\": %.17g,\n",
            r->timed ? "s" : "flop", t->step_time, t->busy, t->bubble_fraction, t->bubble_ratio);
    if (r->timed)
        print_time_json(H, r);
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

/* Cuts from --pp-stages, or NULL to balance; an exit code. */
static int pp_cuts(const char *cmd, const remat_analysis *a, const remat_cli_pp *p, uint32_t *buf, uint32_t **cuts)
{
    remat_err err;
    remat_err_init(&err);
    const uint32_t n = p->c.stages * p->c.chunks;
    *cuts = NULL;
    if (!p->stages)
        return REMAT_EXIT_OK;
    if (n > 256)
        return remat_cli_usage_error(cmd, "--pp-stages: at most 256 stages");
    if (remat_pp_parse_stages(p->stages, a->g->n_ops, n, buf, &err) != REMAT_OK)
        return remat_cli_usage_error(cmd, "%s", err.msg);
    *cuts = buf;
    return REMAT_EXIT_OK;
}

int remat_cli_pp_trace(const char *graph, const remat_analysis *a, const remat_cli_pp *p, const char *pp_plan,
                       const remat_plan_options *o, const char *out)
{
    remat_err err;
    remat_err_init(&err);
    uint32_t cuts_buf[257], *cuts = NULL;
    int rc = pp_plan ? REMAT_EXIT_OK : pp_cuts("trace", a, p, cuts_buf, &cuts);
    if (rc != REMAT_EXIT_OK)
        return rc;
    remat_pp_result r;
    remat_status st = pp_plan ? remat_pp_plan_load_file(a, pp_plan, o->device, &r, &err)
                              : remat_pp_plan(a, &p->c, cuts, p->by, o, &r, &err);
    if (pp_plan && st != REMAT_OK && st != REMAT_ENOMEM)
        rc = remat_cli_fail_in(pp_plan, &err);
    else if (st == REMAT_EINVAL)
        rc = remat_cli_usage_error("trace", "%s", err.msg);
    else if (st != REMAT_OK)
        rc = st == REMAT_EOVERFLOW || st == REMAT_EGRAPH ? remat_cli_fail_in(graph, &err) : remat_cli_fail(&err);
    else {
        size_t len;
        char *text = remat_pp_trace_chrome(&r, &len, &err);
        rc = text ? remat_cli_write(out, text, len) : remat_cli_fail(&err);
        remat_free(text);
    }
    remat_pp_result_destroy(&r);
    return rc;
}

int remat_cli_pp_run(const char *cmd, const char *graph, const remat_analysis *a, const remat_cli_pp *p,
                     const remat_plan_options *o, int json, FILE *H)
{
    remat_err err;
    remat_err_init(&err);
    uint32_t cuts_buf[257], *cuts;
    int rc = pp_cuts(cmd, a, p, cuts_buf, &cuts);
    if (rc != REMAT_EXIT_OK)
        return rc;
    /* The ledger's options: each stage's state from its own params, so the
     * cuts are fixed here (the balance the library would choose). */
    const uint32_t n = p->c.stages * p->c.chunks;
    remat_exec_extras *sx = NULL;
    remat_plan_options po = *o;
    if (p->ledger) {
        if (!cuts) {
            if (n > 256)
                return remat_cli_usage_error(cmd, "--pp with the ledger's options: at most 256 stages");
            if (remat_pp_partition(a, n, p->by, cuts_buf, &err) != REMAT_OK)
                return remat_cli_usage_error(cmd, "%s", err.msg);
            cuts = cuts_buf;
        }
        sx = remat__calloc(n, sizeof *sx);
        if (!sx)
            return remat_cli_fail(&err);
        uint64_t reserve = 0;
        if ((rc = remat_cli_pp_ledger(cmd, a, p, p->ledger, cuts, sx, &reserve)) != REMAT_EXIT_OK ||
            (rc = remat_cli_apply_reserve(cmd, &po, reserve)) != REMAT_EXIT_OK) {
            remat__free(sx);
            return rc;
        }
    }
    remat_pp_result r;
    remat_status st = remat_pp_plan_staged(a, &p->c, cuts, p->by, &po, sx, &r, &err);
    remat__free(sx);
    if (st == REMAT_EINVAL)
        rc = remat_cli_usage_error(cmd, "%s", err.msg);
    else if (st != REMAT_OK)
        rc = st == REMAT_EOVERFLOW || st == REMAT_EGRAPH ? remat_cli_fail_in(graph, &err) : remat_cli_fail(&err);
    else {
        /* The plan file first: a run that cannot write it prints nothing. */
        rc = REMAT_EXIT_OK;
        if (p->plan_out) {
            size_t len;
            char *text = remat_pp_plan_write(a, &r, &len, &err);
            rc = text ? remat_cli_write(p->plan_out, text, len) : remat_cli_fail(&err);
            remat_free(text);
        }
        if (rc == REMAT_EXIT_OK && json)
            print_json(H, &r, o);
        else if (rc == REMAT_EXIT_OK)
            print_text(H,
                       p->stages ? "as given (--pp-stages)"
                                 : p->by == REMAT_PP_BALANCE_BYTES ? "balanced by activation bytes" : "balanced by FLOPs",
                       &r, o);
    }
    remat_pp_result_destroy(&r);
    return rc;
}

int remat_cli_pp_replay_file(const char *graph, const remat_analysis *a, const char *path, const char *text,
                             size_t len, const remat_device *device, int json, FILE *H)
{
    (void)graph;
    remat_err err;
    remat_err_init(&err);
    remat_pp_result r;
    int rc;
    if (remat_pp_plan_load_json(a, text, len, path, device, &r, &err) != REMAT_OK) {
        rc = err.code == REMAT_ENOMEM ? remat_cli_fail(&err) : remat_cli_fail_in(path, &err);
    } else {
        /* The file's per-device budget is judged again, not trusted. */
        remat_plan_options o;
        remat_plan_options_init(&o);
        if (r.budget) {
            o.budget_kind = REMAT_BUDGET_TOTAL;
            o.budget = r.budget;
        }
        rc = REMAT_EXIT_OK;
        if (r.budget && r.device_peak[r.largest] > r.budget) {
            char b1[64], b2[64];
            fprintf(stderr, "remat: %s: device %u peaks at %s, over the plan's budget of %s\n", path, r.largest,
                    remat_format_bytes(r.device_peak[r.largest], b1, sizeof b1),
                    remat_format_bytes(r.budget, b2, sizeof b2));
            rc = REMAT_EXIT_FAIL;
        } else if (json)
            print_json(H, &r, &o);
        else
            print_text(H, "as the plan file cut them", &r, &o);
    }
    remat_pp_result_destroy(&r);
    return rc;
}

/*
 * cmd_pipeline.c - `remat plan GRAPH --pp P --microbatches M
 * [--pp-schedule gpipe|1f1b|interleaved:V] [--pp-stages A:B,...]
 * [--pp-balance flops|bytes]`: rematerialization per pipeline stage, each
 * device judged with the microbatches its schedule keeps in flight.
 *
 * The options are parsed here and the run is one call into the library
 * (remat/pipeline.h), and so is its report: the document table's
 * "pipeline" entry (remat_report_write; src/report/pp_report.c), whose
 * formats give --json here as they do for every command. Without --device,
 * durations are each stage's FLOPs (forward; backward with its
 * recomputation), so the step time is in FLOP units at one FLOP per unit:
 * the bubble and the ratios are what the schedule makes of them. With
 * --device the library times each stage on the device and each boundary
 * tensor as a SEND, and the step, its parts per device (compute, recompute,
 * exposed send/recv, bubble) are seconds; the schedule and the memory
 * figures are the same either way.
 */
#include "cli.h"
#include "ledger_opts.h"
#include "remat/pipeline.h"

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

/* The pipeline document of r (the document table's "pipeline") to H,
 * whole: built in memory, then written. */
static int print_report(FILE *H, const char *how, const remat_pp_result *r, const remat_plan_options *o, int json)
{
    remat_err err;
    remat_err_init(&err);
    remat_report_input in = {.pp = r, .o = o, .pp_how = how};
    size_t len;
    char *text = remat_report_write(REMAT_DOC_PIPELINE, &in, remat_cli_format(REMAT_DOC_PIPELINE, json), &len, &err);
    if (!text)
        return remat_cli_fail(&err);
    fwrite(text, 1, len, H);
    remat_free(text);
    return REMAT_EXIT_OK;
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
        return remat_cli_usage_err(cmd, &err);
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
        rc = remat_cli_usage_err("trace", &err);
    else if (st != REMAT_OK)
        rc = st == REMAT_EOVERFLOW || st == REMAT_EGRAPH ? remat_cli_fail_in(graph, &err) : remat_cli_fail(&err);
    else {
        size_t len;
        remat_report_input in = {.pp = &r};
        char *text = remat_report_write(REMAT_DOC_PIPELINE, &in, REMAT_REPORT_CHROME, &len, &err);
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
                return remat_cli_usage_err(cmd, &err);
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
        rc = remat_cli_usage_err(cmd, &err);
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
        if (rc == REMAT_EXIT_OK)
            rc = print_report(H,
                              p->stages                        ? "as given (--pp-stages)"
                              : p->by == REMAT_PP_BALANCE_BYTES ? "balanced by activation bytes"
                                                                : "balanced by FLOPs",
                              &r, o, json);
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
        } else
            rc = print_report(H, "as the plan file cut them", &r, &o, json);
    }
    remat_pp_result_destroy(&r);
    return rc;
}

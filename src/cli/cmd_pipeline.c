/*
 * cmd_pipeline.c - `remat plan GRAPH --pp P --microbatches M
 * [--pp-schedule gpipe|1f1b|interleaved:V] [--pp-stages A:B,...]
 * [--pp-balance flops|bytes]`: rematerialization per pipeline stage, each
 * device judged with the microbatches its schedule keeps in flight.
 *
 * The options are parsed here, the run is one call into the library
 * (remat/pipeline.h), and its report is the library's pipeline document
 * (remat_report_write, REMAT_DOC_PIPELINE), in text or --json.
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
        /* The pipeline document of the report table: its text names the
         * caller's cuts as `cuts`, which this command calls --pp-stages. */
        size_t len;
        remat_report_input in = {.pipeline = &r, .o = o};
        char *text = remat_report_write(REMAT_DOC_PIPELINE, &in, remat_cli_format(REMAT_DOC_PIPELINE, json), &len, &err);
        if (!text) {
            rc = remat_cli_fail(&err);
        } else {
            char *told = remat__malloc(2 * len + 1);
            if (told)
                remat_cli_text_in_flags(text, 0, told, 2 * len + 1);
            fputs(told ? told : text, H);
            remat__free(told);
            rc = REMAT_EXIT_OK;
        }
        remat_free(text);
    }
    remat_pp_result_destroy(&r);
    return rc;
}

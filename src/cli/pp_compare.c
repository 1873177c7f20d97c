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
 * compare's table. The rows and the document are the library's
 * (remat_pp_compare_*, the document table's "pp-compare" entry); here each
 * row's message gets this command's flags, a bad command line is said once,
 * and the document is written whole or not at all.
 */
#include "cli.h"
#include "remat/pipeline.h"

#include <stdio.h>
#include <string.h>

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
            return remat_cli_usage_err("compare", &err);
        cuts = cuts_buf;
    }
    remat_pp_compare pc;
    if (remat_pp_compare_begin(&p->c, o, &pc, &err) != REMAT_OK) {
        remat_pp_compare_destroy(&pc);
        return remat_cli_fail(&err);
    }
    int rc = REMAT_EXIT_OK;
    for (size_t i = 0; i < pc.n_rows; i++) {
        remat_pp_compare_row *w = &pc.rows[i];
        remat_pp_compare_row_run(a, cuts, p->by, o, &pc, i);
        if (w->status != REMAT_OK) {
            /* The row's reason with this command's flags. */
            remat_err e;
            remat_err_init(&e);
            remat_err_set(&e, w->status, "%s", w->message);
            char said[2 * REMAT_ERR_MSG_MAX];
            snprintf(w->message, sizeof w->message, "%s", remat_cli_in_flags(&e, said, sizeof said));
        }
        /* A bad command line is the same for every row: say it once. */
        if (w->status == REMAT_EINVAL && strstr(w->message, "--")) {
            rc = remat_cli_usage_error("compare", "%s", w->message);
            break;
        }
        if (w->status == REMAT_EOVERFLOW || w->status == REMAT_ENOMEM || (w->status == REMAT_EGRAPH && o->device)) {
            remat_err_set(&err, w->status, "%s", w->message);
            rc = remat_cli_fail_in(graph, &err);
            break;
        }
    }
    if (rc == REMAT_EXIT_OK) {
        remat_report_input in = {.pp_compare = &pc};
        size_t len;
        char *text = remat_report_write(REMAT_DOC_PP_COMPARE, &in, remat_cli_format(REMAT_DOC_PP_COMPARE, json), &len,
                                        &err);
        rc = text ? remat_cli_write(out, text, len) : remat_cli_fail(&err);
        remat_free(text);
    }
    remat_pp_compare_destroy(&pc);
    return rc;
}

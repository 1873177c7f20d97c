/*
 * report_write.c - every report behind one call: the document table
 * (remat/report.h) and remat_report_write, which dispatches on it.
 *
 * The writers themselves keep the signatures they grew with (a format enum,
 * `int json`, `bool json`, `int svg`); this table is the one convention in
 * front of them, so a library caller names a document and a format and a
 * new format is one bit and one branch here. What each document needs is
 * checked before its writer runs, so a missing field is an error naming the
 * field, never a NULL dereference inside a writer.
 */
#include "remat/alloc.h"
#include "remat/compare.h"
#include "remat/ledger.h"
#include "remat/pipeline.h"
#include "remat/report.h"
#include "remat/trace.h"

#include <stdio.h>
#include <string.h>

#define F(x) (1u << REMAT_REPORT_##x)

static const char *const format_names[REMAT_REPORT_FORMAT_COUNT] = {"text", "json", "svg", "csv", "chrome"};

static const remat_report_doc_info infos[REMAT_DOC_COUNT] = {
    {"lifetimes", F(TEXT) | F(JSON), REMAT_REPORT_TEXT, "every tensor's lifetime (remat lifetimes)"},
    {"replay", F(TEXT) | F(JSON), REMAT_REPORT_TEXT, "a schedule's replay: peak, categories, FLOPs (remat replay)"},
    {"compare", F(TEXT) | F(JSON), REMAT_REPORT_TEXT, "every strategy at one budget (remat compare)"},
    {"sweep", F(JSON) | F(SVG), REMAT_REPORT_JSON, "every strategy over a range of budgets (compare's sweep)"},
    {"ledger", F(TEXT) | F(JSON), REMAT_REPORT_TEXT, "the training state's bytes on one device (remat ledger)"},
    {"alloc", F(TEXT) | F(JSON) | F(SVG), REMAT_REPORT_TEXT,
     "allocator simulation and static offsets; SVG: the address-space chart (remat alloc)"},
    {"audit", F(TEXT) | F(JSON), REMAT_REPORT_TEXT, "what is live at the peak and why (remat audit)"},
    {"trace", F(JSON) | F(CHROME) | F(CSV) | F(SVG), REMAT_REPORT_JSON,
     "every step and interval: remat-trace JSON, Chrome trace, CSV, timeline SVG (remat trace)"},
    {"step-time", F(TEXT) | F(JSON), REMAT_REPORT_TEXT,
     "a schedule's predicted step time on a device: compute, communication, critical path (the time model)"},
    {"pipeline", F(TEXT) | F(JSON) | F(CHROME), REMAT_REPORT_TEXT,
     "rematerialization per pipeline stage: each device's peak, the step and its bubble; Chrome: the timed "
     "timeline (remat plan, replay and trace of a pipeline)"},
    {"pp-compare", F(TEXT) | F(JSON), REMAT_REPORT_TEXT,
     "every strategy planning every stage of one pipeline (remat compare of a pipeline)"},
};

const remat_report_doc_info *remat_report_docs(size_t *n)
{
    *n = REMAT_DOC_COUNT;
    return infos;
}

const char *remat_report_format_name(remat_report_format f)
{
    return (unsigned)f < REMAT_REPORT_FORMAT_COUNT ? format_names[f] : "?";
}

int remat_report_format_parse(const char *name, remat_report_format *out)
{
    for (int i = 0; i < REMAT_REPORT_FORMAT_COUNT; i++)
        if (strcmp(name, format_names[i]) == 0) {
            *out = (remat_report_format)i;
            return 1;
        }
    return 0;
}

/* 1 when p is set; else records "the DOC document needs in->FIELD". */
static int need(const void *p, remat_report_doc doc, const char *field, remat_err *err)
{
    if (p)
        return 1;
    remat_err_set(err, REMAT_EINVAL, "remat_report_write: the %s document needs in->%s", infos[doc].name, field);
    return 0;
}

static char *trace_doc(const remat_report_input *in, remat_report_format fmt, size_t *len, remat_err *err)
{
    remat_trace_format tf = fmt == REMAT_REPORT_JSON     ? REMAT_TRACE_FORMAT_JSON
                            : fmt == REMAT_REPORT_CHROME ? REMAT_TRACE_FORMAT_CHROME
                            : fmt == REMAT_REPORT_CSV    ? REMAT_TRACE_FORMAT_CSV
                                                         : REMAT_TRACE_FORMAT_SVG;
    return remat_trace_write(in->trace, in->trace_options, tf, len, err);
}

char *remat_report_write(remat_report_doc doc, const remat_report_input *in, remat_report_format fmt, size_t *len,
                         remat_err *err)
{
    if ((unsigned)doc >= REMAT_DOC_COUNT) {
        remat_err_set(err, REMAT_EINVAL, "remat_report_write: document %d is not a remat_report_doc", (int)doc);
        return NULL;
    }
    const remat_report_doc_info *d = &infos[doc];
    if ((unsigned)fmt >= REMAT_REPORT_FORMAT_COUNT || !(d->formats & (1u << fmt))) {
        char have[64] = "";
        for (int f = 0; f < REMAT_REPORT_FORMAT_COUNT; f++)
            if (d->formats & (1u << f)) {
                strncat(have, have[0] ? ", " : "", sizeof have - strlen(have) - 1);
                strncat(have, format_names[f], sizeof have - strlen(have) - 1);
            }
        remat_err_set(err, REMAT_EINVAL, "remat_report_write: the %s document has no %s format (it has %s)", d->name,
                      remat_report_format_name(fmt), have);
        return NULL;
    }
    if (!need(in, doc, "(the input itself)", err))
        return NULL;
    const int json = fmt == REMAT_REPORT_JSON;
    switch (doc) {
    case REMAT_DOC_LIFETIMES:
        return need(in->a, doc, "a", err) ? remat_report_lifetimes(in->a, fmt, len, err) : NULL;
    case REMAT_DOC_REPLAY:
        return need(in->a, doc, "a", err) && need(in->s, doc, "s", err) && need(in->r, doc, "r", err)
                   ? remat_report_replay(in->a, in->s, in->r, in->why, fmt, len, err)
                   : NULL;
    case REMAT_DOC_COMPARE:
        return need(in->a, doc, "a", err) && need(in->o, doc, "o", err) &&
                       (in->n_rows == 0 || need(in->rows, doc, "rows", err))
                   ? remat_report_compare(in->a, in->o, in->rows, in->n_rows, json, len, err)
                   : NULL;
    case REMAT_DOC_SWEEP:
        return need(in->a, doc, "a", err) && need(in->sweep, doc, "sweep", err)
                   ? remat_report_sweep(in->a, in->sweep, fmt == REMAT_REPORT_SVG, len, err)
                   : NULL;
    case REMAT_DOC_LEDGER:
        return need(in->ledger, doc, "ledger", err) ? remat_ledger_format(in->ledger, json, len, err) : NULL;
    case REMAT_DOC_ALLOC:
        if (!need(in->a, doc, "a", err) || !need(in->s, doc, "s", err) || !need(in->alloc_trace, doc, "alloc_trace", err))
            return NULL;
        if (fmt == REMAT_REPORT_SVG)
            return need(in->offsets, doc, "offsets", err)
                       ? remat_report_alloc_svg(in->a, in->s, in->alloc_trace, in->offsets, in->extent, in->title,
                                                in->max_rects, len, err)
                       : NULL;
        return in->n_policies == 0 || need(in->policies, doc, "policies", err)
                   ? remat_report_alloc(in->a, in->s, in->alloc_trace, in->policies, in->n_policies, in->static_plan,
                                        json, len, err)
                   : NULL;
    case REMAT_DOC_AUDIT:
        return need(in->trace, doc, "trace", err) ? remat_trace_audit(in->trace, in->trace_options, fmt, len, err)
                                                  : NULL;
    case REMAT_DOC_TRACE: return need(in->trace, doc, "trace", err) ? trace_doc(in, fmt, len, err) : NULL;
    case REMAT_DOC_STEP_TIME:
        return need(in->a, doc, "a", err) && need(in->s, doc, "s", err) && need(in->timeline, doc, "timeline", err) &&
                       need(in->device, doc, "device", err) && need(in->op_times, doc, "op_times", err)
                   ? remat_report_step_time(in->a, in->s, in->timeline, in->device, in->op_times, fmt, len, err)
                   : NULL;
    case REMAT_DOC_PIPELINE:
        if (!need(in->pp, doc, "pp", err))
            return NULL;
        if (fmt == REMAT_REPORT_CHROME)
            return remat_pp_trace_chrome(in->pp, len, err);
        return need(in->o, doc, "o", err) ? remat_report_pipeline(in->pp, in->o, in->pp_how, fmt, len, err) : NULL;
    case REMAT_DOC_PP_COMPARE:
        return need(in->pp_compare, doc, "pp_compare", err) ? remat_report_pp_compare(in->pp_compare, fmt, len, err)
                                                            : NULL;
    case REMAT_DOC_COUNT: break;
    }
    remat_err_set(err, REMAT_EINTERNAL, "remat_report_write: document %d has no writer", (int)doc);
    return NULL;
}

/*
 * remat/report.h - documents for people and programs: the lifetime table
 * and the replay summary, as text or JSON (traces: remat/trace.h; the plan
 * file: remat/plan.h; allocator reports: remat/alloc.h), and the one
 * interface to every report: a table of documents, each with the formats
 * it can be written in, and one writer, remat_report_write.
 *
 * Every function here builds the whole document in memory and returns it as
 * a NUL-terminated string the caller frees with remat_free, so that a CLI
 * writes an output whole or not at all.
 *
 *     size_t len;
 *     char *json = remat_report_lifetimes(a, REMAT_REPORT_JSON, &len, &err);
 *     fwrite(json, 1, len, stdout);
 *     remat_free(json);
 */
#ifndef REMAT_REPORT_H
#define REMAT_REPORT_H

#include "remat/analyze.h"
#include "remat/exec.h"
#include "remat/time.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every report's formats, one enum. A document supports some of them
 * (remat_report_docs); TEXT is for people, the others for programs. */
typedef enum {
    REMAT_REPORT_TEXT,
    REMAT_REPORT_JSON,
    REMAT_REPORT_SVG,
    REMAT_REPORT_CSV,
    REMAT_REPORT_CHROME, /* Chrome Trace Event Format */
    REMAT_REPORT_FORMAT_COUNT
} remat_report_format;

/* The lifetime table (graphs/README.md, "Lifetimes"): every step, and for every tensor
 * its kind, bytes, birth, last forward use, last backward use, free step and
 * its gradient's lifetime. JSON:
 *   {"graph": name, "steps": ["fwd:h1", ...],
 *    "tensors": [{"id", "kind", "bytes", "birth", "last_fwd_use", "last_bwd_use", "free",
 *                 "grad_birth", "grad_free", "view_of"?}, ...]}
 * Step fields are step names or null. O(tensors + steps). NULL on ENOMEM. */
char *remat_report_lifetimes(const remat_analysis *a, remat_report_format fmt, size_t *len, remat_err *err);


/* Replay summary. JSON (valid):
 *   {"valid": true, "graph", "instructions", "peak_bytes", "peak_step", "peak_index",
 *    "peak_by_category": {...}, "category_peaks": {...}, "sum_of_category_peaks",
 *    "activation_peak_bytes", "flops": {"forward", "backward", "recompute"}, "overhead",
 *    "recompute_counts": {"op": k, ...}}
 * JSON (invalid): {"valid": false, "fail_index", "instruction", "error"}.
 * why is the error from remat_replay (used when !r->valid). */
char *remat_report_replay(const remat_analysis *a, const remat_schedule *s, const remat_replay_result *r,
                          const remat_err *why, remat_report_format fmt, size_t *len, remat_err *err);

/* The step-time summary of timeline tl of schedule s on device d (op times
 * t): text lines ("step time ... = compute ... + exposed communication
 * ...", the compute split, communication, the critical path), or one JSON
 * object {"device", "measured_ops", "step_time_s", "compute_s",
 * "forward_s", "recompute_s", "backward_s", "optimizer_s", "comm_s",
 * "exposed_comm_s", "hidden_comm_s", "critical_path": {"instructions",
 * "compute_s", "comm_s", "steps": [...]}} in seconds. O(instructions on the
 * critical path). NULL on ENOMEM. */
char *remat_report_step_time(const remat_analysis *a, const remat_schedule *s, const remat_timeline *tl,
                             const remat_device *d, const remat_op_times *t, remat_report_format fmt, size_t *len,
                             remat_err *err);

/* A duration with a unit chosen for it ("12.345 us", "0 s"), into buf. */
const char *remat_format_seconds(double s, char *buf, size_t cap);

/* ---- Every report behind one call ------------------------------------------
 *
 * A library caller asks for any report in any of its formats without knowing
 * which function, or which flag convention, writes it:
 *
 *     remat_report_input in = {.a = a, .s = &s, .r = &r};
 *     char *doc = remat_report_write(REMAT_DOC_REPLAY, &in, REMAT_REPORT_JSON, &len, &err);
 *
 * The CLI's format flags (--json) are read off the same table. */
typedef enum {
    REMAT_DOC_LIFETIMES, /* remat_report_lifetimes: a */
    REMAT_DOC_REPLAY,    /* remat_report_replay: a, s, r, why */
    REMAT_DOC_COMPARE,   /* remat_report_compare: a, o, rows, n_rows */
    REMAT_DOC_SWEEP,     /* remat_report_sweep: a, sweep */
    REMAT_DOC_LEDGER,    /* remat_ledger_format: ledger */
    REMAT_DOC_ALLOC,     /* remat_report_alloc: a, s, alloc_trace, policies, n_policies, static_plan; SVG:
                          * remat_report_alloc_svg: a, s, alloc_trace, offsets, extent, title, max_rects */
    REMAT_DOC_AUDIT,     /* remat_trace_audit: trace, trace_options */
    REMAT_DOC_TRACE,     /* remat_trace_write: trace, trace_options */
    REMAT_DOC_STEP_TIME, /* remat_report_step_time: a, s, timeline, device, op_times */
    REMAT_DOC_PIPELINE,  /* remat_report_pipeline (remat/pipeline.h): pp, o, pp_how; CHROME:
                          * remat_pp_trace_chrome: pp */
    REMAT_DOC_PP_COMPARE, /* remat_report_pp_compare (remat/pipeline.h): pp_compare */
    REMAT_DOC_COUNT
} remat_report_doc;

typedef struct remat_report_doc_info {
    const char *name;    /* "lifetimes", "replay", ... */
    unsigned formats;    /* bit (1u << f) for each remat_report_format f it is written in */
    remat_report_format first; /* its default: the format a command writes without a format flag */
    const char *summary;
} remat_report_doc_info;

/* The table, indexed by remat_report_doc (static storage). */
const remat_report_doc_info *remat_report_docs(size_t *n);
/* "text", "json", "svg", "csv", "chrome"; "?" for a value out of range. */
const char *remat_report_format_name(remat_report_format f);
/* 1 and *out when name is a format's name, else 0. */
int remat_report_format_parse(const char *name, remat_report_format *out);

/* What the documents are made from; each reads only the fields its entry
 * above names (the rest may stay zero). All borrowed. */
typedef struct remat_report_input {
    const remat_analysis *a;
    const remat_schedule *s;
    const remat_replay_result *r;
    const remat_err *why;                     /* replay: the error of an invalid schedule */
    const struct remat_plan_options *o;       /* compare */
    const struct remat_compare_row *rows;     /* compare */
    size_t n_rows;
    const struct remat_sweep *sweep;
    const struct remat_ledger_result *ledger;
    const struct remat_alloc_trace *alloc_trace;
    const struct remat_alloc_result *const *policies; /* alloc: may hold NULL entries (not run) */
    size_t n_policies;
    const struct remat_static_result *static_plan;    /* alloc: NULL when not planned */
    const uint64_t *offsets;                  /* alloc SVG: the layout drawn */
    uint64_t extent;
    const char *title;
    size_t max_rects;
    const struct remat_trace *trace;
    const struct remat_trace_options *trace_options; /* NULL: defaults */
    const struct remat_timeline *timeline;    /* step time (remat/time.h) */
    const struct remat_device *device;
    const struct remat_op_times *op_times;
    const struct remat_pp_result *pp;         /* pipeline (remat/pipeline.h); o: its budget */
    const char *pp_how;                       /* pipeline text: where the cuts came from */
    const struct remat_pp_compare *pp_compare;
} remat_report_input;

/* Document doc of in, in format fmt, as that document's own writer makes
 * it (byte for byte). NUL-terminated, freed with remat_free; *len (if not
 * NULL) its length. NULL with REMAT_EINVAL for a doc or format out of
 * range, a format the document is not written in ("the lifetimes document
 * has no svg format (it has text, json)") or a field it needs left NULL
 * ("the replay document needs in->r"); else the writer's own errors. */
char *remat_report_write(remat_report_doc doc, const remat_report_input *in, remat_report_format fmt, size_t *len,
                         remat_err *err);


#ifdef __cplusplus
}
#endif
#endif

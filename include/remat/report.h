/*
 * remat/report.h - documents for people and programs: the lifetime table
 * and the replay summary, as text or JSON (traces: remat/trace.h; the plan
 * file: remat/plan.h; allocator reports: remat/alloc.h).
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

typedef enum { REMAT_REPORT_TEXT, REMAT_REPORT_JSON } remat_report_format;

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

#ifdef __cplusplus
}
#endif
#endif

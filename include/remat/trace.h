/*
 * remat/trace.h - the lifetime tracer: every step and every storage interval
 * of a replayed schedule, written as JSON, a Chrome trace, CSV or SVG, and
 * the audit of the peak.
 *
 * A trace is built by replaying a schedule (remat_replay, the one judge) with
 * an observer that records every allocation, every free and every step's
 * high-water composition. Nothing here computes memory on its own: the trace
 * is the replay's accounting laid out tensor by tensor, and building it
 * checks that the intervals add up to the replay's figures at every step
 * (REMAT_EINTERNAL if they ever did not), so an auditor can recompute any
 * claim from the intervals alone.
 *
 *     remat_trace *t;
 *     if (remat_trace_build(a, &schedule, NULL, &t, &err) != REMAT_OK) { ...err.msg... }
 *     remat_trace_options o;
 *     remat_trace_options_init(&o);
 *     o.label = "store-all";
 *     size_t len;
 *     char *svg = remat_trace_svg(t, &o, &len, &err);   // whole document, or NULL
 *     remat_free(svg);
 *     remat_trace_destroy(t);
 *
 * ## Steps and intervals
 *
 * Step i is instruction i of the schedule; when the schedule has no OPT
 * instruction the implied optimizer step is one more step at the end, so a
 * trace has n or n+1 steps. A step's *high-water mark* is what the replay
 * measures (graphs/README.md, "Memory accounting"): resident before + what
 * the step allocates + its workspace. Its *live after* is what is resident
 * once the step is over, including the frees that follow it (a backward
 * step's output gradients are released right after it).
 *
 * An *interval* is one span of one allocation: a storage (a non-view tensor;
 * views share their root's), a gradient, a ledger extra, or a step's
 * transient bytes (workspace). It has a category (remat_category), a size in
 * bytes, the step `alloc` at which it appears and the step `free` after which
 * it is released (REMAT_TRACE_END: resident to the end). It is counted:
 *   - in the high-water mark of every step s with alloc <= s <= free;
 *   - in the live-after bytes of every step s with alloc <= s < free.
 * (A FREE step's high-water mark still holds what it frees: the mark is
 * taken before the release.) So for every step and category:
 *   high_water[s][c] = sum of bytes of the intervals of c with alloc <= s <= free,
 * and the peak is the largest total high-water mark. Leaves and ledger extras
 * have alloc 0 and free END. A tensor recomputed twice has two intervals.
 *
 * Why an interval exists (remat_trace_why): LEAF (an input or param,
 * resident throughout), LEDGER (optimizer state, master weights, frozen
 * copies, communication buffers or a library workspace held for the whole
 * step, from remat_exec_extras), PRODUCED (its FWD step),
 * RECOMPUTED (a RECOMPUTE step), GRADIENT (written by a BWD step; the loss's
 * seed at the first one), WORKSPACE (an op's transient bytes, alloc == free),
 * TRANSIENT (bytes of another category that a step counts in its high-water
 * mark without keeping them; never produced by a correct replay, listed so
 * the intervals still add up to the replay if one did). Each storage
 * interval also lists its uses while it is resident: the backward steps that
 * save it (`saved_for`; a BWD step runs once, so "bwd:OP" names it) and the
 * forward steps (FWD or RECOMPUTE) that read it (`read_at`, step indices).
 *
 * ## The JSON document (format "remat-trace", version 1)
 *
 *     {"format": "remat-trace", "version": 1,
 *      "graph": {"name": "mlp2", "fingerprint": "16 hex digits"},
 *      "label": "store-all" | null,            the plan's strategy, as given
 *      "budget": {"kind": "total"|"activation", "bytes": N} | null,
 *      "counting": "...",                      the rule above, in one sentence
 *      "categories": ["params", ...],          every category, in enum order
 *      "n_steps": N, "first_backward_step": i | null,
 *      "steps": [{"index": i, "instruction": "FWD h1", "kind": "fwd",
 *                 "flops": N, "live_after": N, "high_water": N,
 *                 "by_category": [N, ...]}, ...],   high-water composition,
 *                                                   aligned with "categories"
 *      "intervals": [{"id": "h1", "tensor": "h1" | null, "grad": false,
 *                     "category": "activations", "bytes": N,
 *                     "alloc": i, "free": i | null,   null = to the end
 *                     "why": "leaf|ledger|produced|recomputed|gradient|workspace|transient|sharding",
 *                     "by": "fwd:h1" | null,          the step that allocated it
 *                     "saved_for": ["bwd:a1"], "read_at": [1]}, ...],
 *      "peak": {"bytes": N, "step": i, "instruction": "BWD h1",
 *               "by_category": {"params": N, ...},
 *               "top": [{"id", "category", "bytes", "why_live"}, ...],
 *               "top_not_resident": [...]},   the same, leaves and ledger aside
 *      "totals": {"flops_forward": N, "flops_backward": N, "flops_recompute": N,
 *                 "category_peaks": {...}, "sum_of_category_peaks": N,
 *                 "activation_peak_bytes": N}}
 *
 * Intervals are listed by alloc step. Interval ids: a storage's tensor id;
 * "grad:ID" for the gradient of ID (with "grad": true, which is what tells it
 * from a tensor that happens to be named "grad:..."); "ledger:CATEGORY";
 * "workspace" and "transient" (with "by" naming the step); under --dp,
 * "sharding:gathered_params" for a unit gathered by an ALLGATHER (its "by"),
 * "sharding:param_grads" for the rank's gradient partition and
 * "sharding:params" for the padding of ZeRO 1/2's flat group. Byte counts are
 * JSON numbers up to 2^53-1 and decimal strings above, as in the graph
 * format. Readers must ignore fields they do not know; a change that
 * alters the meaning of a field bumps "version".
 *
 * ## The other formats
 *
 * Chrome Trace Event Format (Perfetto, chrome://tracing): one "X" event per
 * interval, packed greedily into lanes (tids) so that no two events on a lane
 * overlap (an event spans [ts, ts+dur); touching is not overlapping); leaves
 * and ledger extras in a process of their own ("resident state"), the rest in
 * "tensors"; one "C" counter track per category in use plus "total" (the
 * step's high-water composition, emitted when it changes); and a "steps"
 * process with one X event per step, named by its instruction. Time: one
 * step = 1 us, or (flops_time) step s starts at floor(FLOPs of the steps
 * before it / flops_per_us) us (when 0, a power of ten that makes the whole
 * step last 10^5..10^6 us); FREE and OPT then take no time. Times are whole
 * microseconds, so ts + dur is exact in any reader.
 *
 * CSV (RFC 4180, CRLF line ends, a header row): one row per interval with
 * the JSON fields id, tensor, grad, category, bytes, alloc, free (empty = to
 * the end), why, by, saved_for (";"-separated); a field is quoted when it
 * holds a comma, a quote or a line break, with quotes doubled. An empty
 * free means resident through the last step (the schedule's optimizer step).
 *
 * SVG: live memory (each step's high-water mark) over the steps, stacked by
 * category (activation categories at the bottom, so an activation budget
 * reads against the top of the lower bands), a legend, the budget line, the
 * peak marked and labelled (bytes, step, top tensors), the forward/backward
 * boundary, recomputation steps shaded and ticked, and axes in binary units.
 * Wide traces are drawn one pixel column per group of steps, each column
 * showing the step of largest high-water mark in it, so the peak survives.
 */
#ifndef REMAT_TRACE_H
#define REMAT_TRACE_H

#include "remat/exec.h"
#include "remat/pipeline.h"
#include "remat/plan.h"
#include "remat/report.h"

#ifdef __cplusplus
extern "C" {
#endif

#define REMAT_TRACE_END SIZE_MAX
#define REMAT_TRACE_FORMAT "remat-trace"
#define REMAT_TRACE_VERSION 1

#define REMAT_TRACE_WHY_MAP(X)      \
    X(LEAF, "leaf")                 \
    X(LEDGER, "ledger")             \
    X(PRODUCED, "produced")         \
    X(RECOMPUTED, "recomputed")     \
    X(GRADIENT, "gradient")         \
    X(WORKSPACE, "workspace")       \
    X(TRANSIENT, "transient")       \
    X(SHARDING, "sharding")

typedef enum {
#define REMAT__WHY_ENUM(name, text) REMAT_TRACE_WHY_##name,
    REMAT_TRACE_WHY_MAP(REMAT__WHY_ENUM)
#undef REMAT__WHY_ENUM
    REMAT_TRACE_WHY_COUNT
} remat_trace_why;

const char *remat_trace_why_name(remat_trace_why w);

typedef struct remat_trace_interval {
    uint32_t storage;   /* tensor owning the bytes (gradient: whose gradient); REMAT_NONE for extras, transients */
    uint8_t grad;       /* 1 for a gradient */
    uint8_t category;   /* remat_category */
    uint8_t why;        /* remat_trace_why */
    uint64_t bytes;
    size_t alloc;       /* step at which it appears */
    size_t free;        /* step after which it is released; REMAT_TRACE_END */
    uint8_t early;      /* 1: released as step `free` begins, before its mark (a held FSDP buffer that the
                         * rate limiter reclaims before an all-gather): live after free - 1, not during free */
    size_t use_off;     /* uses: t->uses[use_off .. use_off + n_uses), by step */
    uint32_t n_uses;
} remat_trace_interval;

typedef struct remat_trace_use {
    size_t step;
    uint32_t tensor;    /* the tensor read (a view of the storage, or the storage itself) */
    uint8_t saved;      /* 1: a BWD step's saves; 0: a FWD/RECOMPUTE input */
} remat_trace_use;

typedef struct remat_trace_step {
    remat_instr in;     /* the instruction ({REMAT_I_OPT, 0} for the implied optimizer step) */
    uint64_t flops;     /* FWD/RECOMPUTE: the op's flops; BWD: bwd_flops; else 0 */
    uint64_t live_after;
    uint64_t high_water;
} remat_trace_step;

typedef struct remat_trace {
    const remat_analysis *a;    /* borrowed: must outlive the trace */
    size_t n_steps;
    remat_trace_step *steps;
    uint64_t *hw;               /* n_steps x REMAT_CAT_COUNT: hw[s * REMAT_CAT_COUNT + c] */
    size_t n_intervals;
    remat_trace_interval *iv;   /* by alloc step */
    remat_trace_use *uses;
    size_t n_uses;
    size_t first_bwd;           /* first BWD step; n_steps when there is none */
    uint64_t n_recompute_steps;
    remat_replay_result replay; /* the replay's own summary (owned) */
} remat_trace;

/* Replays s with a recording observer and builds the trace. extras may be
 * NULL. On success *out owns a new trace (remat_trace_destroy). Errors:
 * REMAT_ESCHEDULE when the schedule is invalid (err is the replay's message,
 * naming the instruction), REMAT_ENOMEM, REMAT_EOVERFLOW, REMAT_EINTERNAL if
 * the recorded intervals ever disagreed with the replay's figures. Cost:
 * O(steps + refs) time after the replay, O(steps x categories + intervals +
 * uses) memory. */
remat_status remat_trace_build(const remat_analysis *a, const remat_schedule *s, const remat_exec_extras *extras,
                               remat_trace **out, remat_err *err);

/* Accepts NULL. */
void remat_trace_destroy(remat_trace *t);

typedef struct remat_trace_options {
    const char *label;             /* the plan's name in titles ("store-all", "revolve"); NULL: none */
    remat_budget_kind budget_kind; /* a budget line (SVG), a "budget" field (JSON) */
    uint64_t budget;
    int flops_time;                /* Chrome: time proportional to FLOPs instead of one unit per step */
    uint64_t flops_per_us;         /* with flops_time: FLOPs per microsecond; 0 = automatic */
    uint32_t top;                  /* tensors named at the peak (audit, JSON, SVG label); 0 = 5 */
    uint32_t width, height;        /* SVG size in pixels; 0 = 1200 x 640 */
    /* Chrome: a time axis from a timeline of the trace's schedule
     * (remat/time.h; tl->n must equal the trace's steps): each step at its
     * start and duration on its stream, one thread per stream ("compute
     * stream", "communication stream", "no time" for FREE and RELEASE), and
     * the memory and tensor tracks at the start times in schedule order.
     * NULL: one unit per step, or FLOP time. Borrowed. */
    const struct remat_timeline *timeline;
} remat_trace_options;

void remat_trace_options_init(remat_trace_options *o);

/* The writers. Each builds the whole document in memory and returns a
 * NUL-terminated string the caller frees with remat_free (*len, if not
 * NULL, gets its length), or NULL with err set (REMAT_ENOMEM, REMAT_EINVAL
 * for an SVG size out of range, REMAT_EOVERFLOW for a FLOP clock past 2^64).
 * o may be NULL (defaults). Costs: JSON and CSV O(steps + intervals + uses);
 * Chrome O(intervals log intervals) for the lane packing; SVG
 * O(steps + intervals). */
char *remat_trace_json(const remat_trace *t, const remat_trace_options *o, size_t *len, remat_err *err);
char *remat_trace_chrome(const remat_trace *t, const remat_trace_options *o, size_t *len, remat_err *err);
char *remat_trace_csv(const remat_trace *t, const remat_trace_options *o, size_t *len, remat_err *err);
char *remat_trace_svg(const remat_trace *t, const remat_trace_options *o, size_t *len, remat_err *err);

/* A timed pipeline (remat_pp_plan with a device) as a Chrome trace: a
 * process per device, tid 0 its compute stream (an X event per forward and
 * backward, named "F mb M stage V" / "B ..."), tid 1 its activation sends
 * to the next stage, tid 2 its gradient sends to the previous one; ts and
 * dur in microseconds with three decimals. REMAT_EINVAL for an untimed
 * result, REMAT_ENOMEM. O(events + sends). */
char *remat_pp_trace_chrome(const remat_pp_result *r, size_t *len, remat_err *err);

/* The formats as data: a writer per format behind one call. */
typedef enum {
    REMAT_TRACE_FORMAT_JSON,
    REMAT_TRACE_FORMAT_CHROME,
    REMAT_TRACE_FORMAT_CSV,
    REMAT_TRACE_FORMAT_SVG,
    REMAT_TRACE_FORMAT_COUNT
} remat_trace_format;

typedef struct remat_trace_format_info {
    const char *name;    /* "json", "chrome", "csv", "svg" */
    const char *suffix;  /* the file name ending that selects it (".trace.json" for chrome) */
    const char *summary;
} remat_trace_format_info;

/* The table, indexed by remat_trace_format (static storage). */
const remat_trace_format_info *remat_trace_formats(size_t *n);
/* 1 and *out when name is a format's name, else 0. */
int remat_trace_format_parse(const char *name, remat_trace_format *out);
/* 1 and *out when path ends with a format's suffix (any case; the longest
 * match wins, so NAME.trace.json is chrome), else 0. */
int remat_trace_format_of_path(const char *path, remat_trace_format *out);
/* The document in format, as the writer above for it would make it. */
char *remat_trace_write(const remat_trace *t, const remat_trace_options *o, remat_trace_format format, size_t *len,
                        remat_err *err);

/* The audit of the peak: the step, the totals per category (with the sum of
 * category peaks beside the true peak), the o->top largest intervals live at
 * that moment other than the resident state, with why each is live (saved
 * for which backward step, input of which forward step, recomputed for
 * which step, a gradient waiting for which step), then the largest resident
 * state (leaves, ledger extras). TEXT, or JSON: {"graph", "label",
 * "n_steps", "peak" (as in the trace), "resident": {"count", "bytes"},
 * "category_peaks", "sum_of_category_peaks", "live_at_peak"}. */
char *remat_trace_audit(const remat_trace *t, const remat_trace_options *o, remat_report_format fmt, size_t *len,
                        remat_err *err);

/* Why interval i is live at step s (alloc <= s <= free), as one line:
 * "saved for bwd:a1", "input of fwd:h2 (step 3)", "gradient of h1, read by
 * bwd:h1 (step 14)", "leaf: param, resident throughout". Writes into buf. */
const char *remat_trace_why_live(const remat_trace *t, size_t i, size_t s, char *buf, size_t cap);

/* Which live intervals remat_trace_top_at considers: all of them, all but
 * the resident state (leaves and ledger extras: there at every step, so
 * never what a plan changes), or only the resident state. */
typedef enum { REMAT_TRACE_TOP_ALL, REMAT_TRACE_TOP_NOT_RESIDENT, REMAT_TRACE_TOP_RESIDENT } remat_trace_top_filter;

/* The intervals live during step s (alloc <= s <= free) that pass filter,
 * largest first (ties: by alloc step, then by position), at most cap of
 * them into idx. Returns how many were written; *n_live and *bytes_live
 * (either may be NULL) get how many pass the filter in all and their
 * bytes. O(intervals x cap): cap is a handful. */
size_t remat_trace_top_at(const remat_trace *t, size_t s, remat_trace_top_filter filter, size_t *idx, size_t cap,
                          size_t *n_live, uint64_t *bytes_live);

#ifdef __cplusplus
}
#endif
#endif

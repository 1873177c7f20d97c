/*
 * remat/pipeline.h - pipeline parallelism: the schedule of microbatches over
 * stages, and what each stage's device holds.
 *
 * A graph's forward order is cut into P*V contiguous virtual stages; device
 * d runs virtual stages d, d+P, ..., d+(V-1)P (V = 1 except for the
 * interleaved schedule). Each microbatch runs forward through the virtual
 * stages in order and backward in reverse. Three schedules, each device's
 * order of work as the papers state it:
 *   gpipe          Huang et al. 2019: every forward, then every backward;
 *                  a device holds all M microbatches.
 *   1f1b           PipeDream-Flush (Narayanan et al. 2021, section 2.2.1):
 *                  stage s runs min(P-s-1, M) warm-up forwards, then one
 *                  forward and one backward in turn, then the remaining
 *                  backwards; it holds at most min(P-s, M) microbatches.
 *   interleaved:V  Narayanan et al. 2021 section 2.2.2 (Megatron-LM's
 *                  forward_backward_pipelining_with_interleaving): V chunks
 *                  per device, M a multiple of P, warm-up (P-d-1)*2 +
 *                  (V-1)*P chunk forwards; the bubble shrinks by V.
 * remat_pp_simulate runs a schedule with given per-stage durations (unit
 * times, FLOPs over a rate, or a time model's figures) and reports the step
 * time, the bubble and each device's microbatches in flight. With equal
 * stage times the bubble is (P-1)/(M+P-1) of the step for gpipe and 1f1b
 * and (P-1)/(V*M+P-1) for interleaved, i.e. (P-1)/M and (P-1)/(V*M) of the
 * ideal time as Narayanan et al. write it; tests/check_pipeline.c checks both.
 *
 * remat_pp_plan cuts the graph, writes each virtual stage as its own graph
 * (remat_pp_stage_graph: received activations become inputs that want a
 * gradient, activations that following stages read become outputs, whose
 * gradients are received), plans rematerialization for each stage with the
 * given options, and judges each device under the per-device budget with
 * its multiplicity: its persistent state (params, gradients, optimizer
 * state) once, the bytes every other in-flight microbatch holds between its
 * forward and its backward (what its backward reads, and the output it sent,
 * which the runtime keeps for the backward), and the running microbatch's
 * own replayed high-water mark (with the activation and gradient it
 * receives and sends; the received gradient and the sent output stay until
 * its backward returns, as torch.autograd.backward's arguments do). Stages
 * may get different plans; the first holds most. tests/torch/pp_1f1b.py
 * measures each stage of a real 1F1B run against this.
 *
 * With a device in the plan options, the final plans are timed: each
 * stage's forward and backward (with its recomputation) from remat/time.h's
 * op times, each boundary tensor a SEND on the sending device's link stream
 * (remat_pp_simulate_linked), so the step, the bubble and the exposed
 * send/recv are seconds; scripts/bench_pp_time.py sets the prediction
 * beside a measured 1F1B run. A result can be written as a pipeline plan
 * file and read back (remat_pp_plan_write, remat_pp_plan_load_json), and
 * each stage may carry the ledger's state for its own params
 * (remat_pp_plan_staged).
 *
 *     remat_pp_config c = {REMAT_PP_1F1B, 4, 8, 1};
 *     remat_pp_result r;
 *     if (remat_pp_plan(a, &c, NULL, REMAT_PP_BALANCE_FLOPS, &o, &r, &err) == REMAT_OK) { ... r.largest ... }
 *     remat_pp_result_destroy(&r);
 */
#ifndef REMAT_PIPELINE_H
#define REMAT_PIPELINE_H

#include "remat/plan.h"
#include "remat/report.h"
#include "remat/time.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { REMAT_PP_GPIPE, REMAT_PP_1F1B, REMAT_PP_INTERLEAVED } remat_pp_kind;

typedef struct remat_pp_config {
    remat_pp_kind kind;
    uint32_t stages;       /* P: devices in the pipeline (>= 1) */
    uint32_t microbatches; /* M (>= 1; interleaved: a multiple of P) */
    uint32_t chunks;       /* V: model chunks per device (interleaved: >= 2; else 1) */
} remat_pp_config;

/* "gpipe", "1f1b", "interleaved:V" into c->kind and c->chunks. REMAT_EINVAL
 * naming the text otherwise. */
remat_status remat_pp_parse_schedule(const char *text, remat_pp_config *c, remat_err *err);
/* "gpipe", "1f1b", "interleaved". */
const char *remat_pp_kind_name(remat_pp_kind k);
/* REMAT_EINVAL naming the rule a config breaks (P, M, V ranges, M % P). */
remat_status remat_pp_check(const remat_pp_config *c, remat_err *err);

typedef struct remat_pp_event {
    uint32_t device, chunk, microbatch;
    bool backward;
    double start, end;
    double wait_comm; /* of its wait, the part after its input was made: the link's (0 without one) */
    uint32_t held; /* microbatch-chunks this device holds while it runs, the running one excluded */
} remat_pp_event;

/* One boundary tensor on its way: a forward's output activation to the
 * next virtual stage's device, or a backward's input gradient to the
 * previous one's. */
typedef struct remat_pp_send {
    uint32_t from, to, chunk, microbatch; /* devices; the sending event's chunk and microbatch */
    bool backward;                        /* a gradient */
    double start, end;
} remat_pp_send;

/* What a boundary tensor costs to send: act[v] seconds for virtual stage
 * v's output activation to reach v+1 (read for v < P*V-1), grad[v] for its
 * input gradient to reach v-1 (read for v > 0); both P*V entries, finite
 * and >= 0. Time model: remat_time_collective(REMAT_COLL_SEND, bytes). */
typedef struct remat_pp_link {
    const double *act, *grad;
} remat_pp_link;

typedef struct remat_pp_timeline {
    uint32_t devices, chunks, microbatches;
    size_t n_events;
    remat_pp_event *events;   /* device by device, each in its order of work */
    double step_time;         /* the last event's end */
    double busy;              /* the sum of all events' durations */
    double exposed_comm;      /* the sum of the events' wait_comm: devices idle waiting on a link */
    double bubble_time;       /* devices x step time - busy - exposed_comm: the schedule's idle time */
    double bubble_fraction;   /* bubble_time over devices x step time */
    double bubble_ratio;      /* bubble_time over busy time (Narayanan et al.'s t_pb / t_id) */
    uint32_t *max_in_flight;  /* per device: most microbatch-chunks between forward and backward */
    double *device_busy;      /* per device: its events' durations */
    double *device_exposed;   /* per device: its events' wait_comm */
    size_t n_sends;           /* with a link: M x (P*V - 1) x 2, in the order they were issued */
    remat_pp_send *sends;
} remat_pp_timeline;

/* Runs c with fwd[v] and bwd[v] the durations of virtual stage v (P*V
 * entries each, finite and >= 0): each event starts when its device is free
 * and its dependence (the previous stage's forward, the next stage's
 * backward) has ended. t is owned by the caller; destroy it either way.
 * O(P * V * M) time and memory. */
remat_status remat_pp_simulate(const remat_pp_config *c, const double *fwd, const double *bwd, remat_pp_timeline *t,
                               remat_err *err);
/* The same with sends that take time (link NULL: free, as above). Each
 * device has a link stream per direction; a transfer starts when its event
 * has ended and the stream is free, and the event that reads it starts no
 * earlier than its end. A device's idle time splits into exposed send/recv
 * (waiting after the producing event ended) and the bubble. Same cost. */
remat_status remat_pp_simulate_linked(const remat_pp_config *c, const double *fwd, const double *bwd,
                                      const remat_pp_link *link, remat_pp_timeline *t, remat_err *err);
void remat_pp_timeline_destroy(remat_pp_timeline *t);

typedef enum { REMAT_PP_BALANCE_FLOPS, REMAT_PP_BALANCE_BYTES } remat_pp_balance;

/* cuts[0..n] (cuts[0] = 0, cuts[n] = n_ops): forward positions of n
 * contiguous non-empty parts of about equal forward + backward FLOPs (or
 * activation bytes produced). REMAT_EINVAL when n exceeds the ops. O(ops). */
remat_status remat_pp_partition(const remat_analysis *a, uint32_t n, remat_pp_balance by, uint32_t *cuts,
                                remat_err *err);
/* Parses "0:12,12:24,..." (forward positions, contiguous, covering every op)
 * into cuts[0..n]. REMAT_EINVAL naming the entry otherwise. */
remat_status remat_pp_parse_stages(const char *text, uint32_t n_ops, uint32_t n, uint32_t *cuts, remat_err *err);

/* The ops at forward positions [first, end) as a remat-graph of their own
 * (see above), named "<graph>.stage<k>"; *json is freed with remat_free.
 * REMAT_EINVAL when an op saves a tensor that a following stage makes. O(size). */
remat_status remat_pp_stage_graph(const remat_analysis *a, uint32_t first, uint32_t end, uint32_t k, char **json,
                                  size_t *len, remat_err *err);

typedef struct remat_pp_stage {
    uint32_t first, end;       /* forward positions */
    uint32_t device, chunk;
    double fwd_flops, bwd_flops; /* bwd includes the plan's recomputation */
    uint64_t persistent;       /* params, their gradients, optimizer state: once per device */
    uint64_t held;             /* one microbatch between its forward and its backward */
    uint64_t running;          /* one microbatch's high-water mark beyond the persistent categories */
    uint64_t recv_bytes, send_bytes; /* activations in from the previous stage, out to the next */
    uint64_t budget;           /* what its plan was made under (0: no budget), */
    remat_budget_kind budget_kind; /* ... of this kind: TOTAL for one microbatch's whole peak, ACTIVATION
                                    * when the device's search planned it for its in-flight bytes */
    /* With a device (remat_pp_result.timed), seconds for one microbatch: */
    double fwd_time, bwd_time, recompute_time; /* its FWD, BWD and RECOMPUTE instructions' op times */
    double act_send_time, grad_send_time;      /* SEND of its output activation, of its input gradient */
    uint32_t n_measured, n_timed;              /* op durations measured (attrs), of forward + backward */
    remat_exec_extras extras;                  /* the ledger's state for its params (sharding NULL), or zero */
    remat_plan plan;
    remat_replay_result replay;
} remat_pp_stage;

typedef struct remat_pp_result {
    remat_pp_config config;
    uint32_t n_stages;          /* P * V */
    remat_pp_stage *stages;
    uint64_t *device_peak;      /* per device */
    uint32_t largest;           /* the device with the largest peak */
    uint64_t budget;            /* the per-device total budget it was planned under (0: none) */
    bool timed;                 /* o->device was given: the timeline is in seconds, sends cost time */
    remat_device device;        /* the device it was timed on (when timed) */
    remat_pp_timeline timeline; /* in seconds when timed, else each stage's FLOPs as its duration */
} remat_pp_result;

/* Plans every virtual stage (cuts: P*V+1 positions, or NULL to balance by
 * `by`) with o; with a total budget, a device that its one-microbatch
 * plans put over it has its stages planned again for its microbatches in
 * flight (pp_plan.c, fit_device: an activation budget searched, each
 * candidate judged by the device's peak) until it fits (REMAT_EINFEASIBLE
 * naming the device when it cannot). Activation budgets and ledger extras are refused (REMAT_EINVAL).
 * With o->device the final plans are timed on it (pp_plan.c: op times per
 * instruction, SEND per boundary tensor) and the timeline is in seconds;
 * an op the device cannot time is REMAT_EGRAPH naming the stage's op.
 * r is owned by the caller; destroy it either way. */
remat_status remat_pp_plan(const remat_analysis *a, const remat_pp_config *c, const uint32_t *cuts,
                           remat_pp_balance by, const remat_plan_options *o, remat_pp_result *r, remat_err *err);
/* The same with the training state of each virtual stage's own params:
 * stage_extras[v] (P*V entries, sharding NULL; NULL: none) is what stage v's
 * replay adds (optimizer state, master weights, frozen copies, buffers),
 * counted once per device with its persistent bytes. o->extras must be
 * empty. The CLI fills them from the ledger of each stage graph
 * (remat_pp_stage_graph). */
remat_status remat_pp_plan_staged(const remat_analysis *a, const remat_pp_config *c, const uint32_t *cuts,
                                  remat_pp_balance by, const remat_plan_options *o,
                                  const remat_exec_extras *stage_extras, remat_pp_result *r, remat_err *err);
void remat_pp_result_destroy(remat_pp_result *r);

/* The pipeline plan file (format "remat-pp-plan", version 1; README
 * "Pipeline plan files"): the whole graph's name and fingerprint, the
 * schedule, the cuts, and each virtual stage's plan as a "remat-plan"
 * document for its stage graph. NULL with err on failure (ENOMEM). */
char *remat_pp_plan_write(const remat_analysis *a, const remat_pp_result *r, size_t *len, remat_err *err);
/* Reads one back for a's graph and replays it: every stage's plan is
 * checked against its stage graph (rebuilt from the cuts) and its schedule
 * replayed; then the devices are judged and the schedule simulated (timed
 * on device when not NULL) as remat_pp_plan does, without planning.
 * REMAT_EPARSE naming SOURCE and the JSON path (a plan for another graph
 * names both), REMAT_ESCHEDULE naming the stage for a schedule that does
 * not replay. r is owned by the caller; destroy it either way. */
remat_status remat_pp_plan_load_json(const remat_analysis *a, const char *text, size_t len, const char *source,
                                     const remat_device *device, remat_pp_result *r, remat_err *err);
remat_status remat_pp_plan_load_file(const remat_analysis *a, const char *path, const remat_device *device,
                                     remat_pp_result *r, remat_err *err);
/* True when text is a JSON object whose "format" is "remat-pp-plan" (what
 * `remat replay GRAPH FILE` uses to tell the two plan files apart). */
bool remat_pp_plan_sniff(const char *text, size_t len);

/* ---- Reports (src/report/pp_report.c) --------------------------------------
 *
 * Two entries of the document table (remat/report.h): "pipeline" (one
 * pipeline's result; text, JSON, and its Chrome trace, remat_pp_trace_chrome)
 * and "pp-compare" (every strategy under one pipeline; text, JSON). */

/* The pipeline document of r, planned under o's budget (a total budget is
 * printed as "met"; o is read for nothing else). how says where the cuts
 * came from, after "N stages" on the text's first line ("balanced by
 * FLOPs"); JSON ignores it. Text: the schedule, the step and its bubble
 * (FLOP units, or with r->timed a per-stage and per-device time table in
 * seconds), one line per stage (device, ops, microbatches in flight,
 * persistent / held / running bytes, the bytes received and sent, the
 * plan's strategy and extra FLOPs), one per device (its peak). JSON:
 *   {"pipeline": {"schedule", "devices", "microbatches", "chunks"}, "budget"?,
 *    "time_unit": "flop"|"s", "step_time", "busy", "bubble_fraction", "bubble_ratio",
 *    "time"? (timed: {"device", "step_s", "exposed_comm_s", "bubble_s", "measured_ops",
 *             "stages": [...], "devices": [...]}),
 *    "stages": [{"stage", "device", "chunk", "first_op", "end_op", "forward_flops", "backward_flops",
 *                "strategy", "extra_flops", "persistent", "held_per_microbatch", "running",
 *                "recv_bytes", "send_bytes", "one_microbatch_peak"}, ...],
 *    "devices": [{"device", "in_flight", "peak_bytes"}, ...], "largest": {"device", "peak_bytes"}}
 * CHROME is remat_pp_trace_chrome(r) (remat/trace.h). O(stages + devices).
 * NULL with REMAT_EINVAL for another format, REMAT_ENOMEM. */
char *remat_report_pipeline(const remat_pp_result *r, const remat_plan_options *o, const char *how,
                            remat_report_format fmt, size_t *len, remat_err *err);

/* One strategy planning every stage of a pipeline. */
typedef struct remat_pp_compare_row {
    const char *strategy;   /* static (the strategy table's) */
    remat_status status;    /* REMAT_OK: the figures below; else message says why */
    char message[REMAT_ERR_MSG_MAX];
    uint64_t peak;          /* the largest device's peak */
    uint32_t largest;       /* that device */
    uint64_t *device_peak;  /* per device (owned) */
    double extra_flops;     /* each stage's recomputation times the microbatches */
    double step_time, bubble_fraction, exposed_comm; /* FLOP units, or seconds when timed */
} remat_pp_compare_row;

typedef struct remat_pp_compare {
    remat_pp_config config;
    uint64_t budget;        /* the per-device total budget */
    bool timed;             /* o->device was given */
    remat_pp_compare_row *rows; /* every strategy, those that run others last */
    size_t n_rows;
} remat_pp_compare;

/* Fills pc's header from c and o and names its rows (every strategy of
 * remat_plan_strategies, REMAT_STRATEGY_RUNS_OTHERS last), none run yet.
 * REMAT_ENOMEM; destroy pc either way. */
remat_status remat_pp_compare_begin(const remat_pp_config *c, const remat_plan_options *o, remat_pp_compare *pc,
                                    remat_err *err);
/* Runs row i: remat_pp_plan(a, pc->config, cuts, by, o with the row's
 * strategy); its status and message (the library's, unmapped) or its
 * figures into the row. Rows are run one at a time so that a caller can
 * stop at the first error that is not a row's own verdict. */
void remat_pp_compare_row_run(const remat_analysis *a, const uint32_t *cuts, remat_pp_balance by,
                              const remat_plan_options *o, remat_pp_compare *pc, size_t i);
void remat_pp_compare_destroy(remat_pp_compare *pc);
/* The table of pc (text: one line per row, "no" with its message for an
 * infeasible one; JSON: {"pipeline": {...}, "budget", "time_unit",
 * "rows": [{"strategy", "feasible", "peak_bytes", "largest_device",
 * "device_peaks", "extra_flops", "step_time", "bubble_fraction",
 * "exposed_comm_s"? | "message"}, ...]}). NULL with REMAT_EINVAL for another
 * format, REMAT_ENOMEM. */
char *remat_report_pp_compare(const remat_pp_compare *pc, remat_report_format fmt, size_t *len, remat_err *err);

#ifdef __cplusplus
}
#endif
#endif

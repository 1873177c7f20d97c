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
 *     remat_pp_config c = {REMAT_PP_1F1B, 4, 8, 1};
 *     remat_pp_result r;
 *     if (remat_pp_plan(a, &c, NULL, REMAT_PP_BALANCE_FLOPS, &o, &r, &err) == REMAT_OK) { ... r.largest ... }
 *     remat_pp_result_destroy(&r);
 */
#ifndef REMAT_PIPELINE_H
#define REMAT_PIPELINE_H

#include "remat/plan.h"
#include "remat/report.h"

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
    uint32_t held; /* microbatch-chunks this device holds while it runs, the running one excluded */
} remat_pp_event;

typedef struct remat_pp_timeline {
    uint32_t devices, chunks, microbatches;
    size_t n_events;
    remat_pp_event *events;   /* device by device, each in its order of work */
    double step_time;         /* the last event's end */
    double busy;              /* the sum of all events' durations */
    double bubble_fraction;   /* idle device time over devices x step time */
    double bubble_ratio;      /* idle device time over busy time (Narayanan et al.'s t_pb / t_id) */
    uint32_t *max_in_flight;  /* per device: most microbatch-chunks between forward and backward */
} remat_pp_timeline;

/* Runs c with fwd[v] and bwd[v] the durations of virtual stage v (P*V
 * entries each, finite and >= 0): each event starts when its device is free
 * and its dependence (the previous stage's forward, the next stage's
 * backward) has ended. t is owned by the caller; destroy it either way.
 * O(P * V * M) time and memory. */
remat_status remat_pp_simulate(const remat_pp_config *c, const double *fwd, const double *bwd, remat_pp_timeline *t,
                               remat_err *err);
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
    uint64_t budget;           /* what its plan was made under (0: no budget) */
    remat_plan plan;
    remat_replay_result replay;
} remat_pp_stage;

typedef struct remat_pp_result {
    remat_pp_config config;
    bool cuts_given;            /* the stages are the caller's cuts (else balanced by `by`) */
    remat_pp_balance by;
    uint32_t n_stages;          /* P * V */
    remat_pp_stage *stages;
    uint64_t *device_peak;      /* per device */
    uint32_t largest;           /* the device with the largest peak */
    remat_pp_timeline timeline; /* with each stage's FLOPs as its duration */
} remat_pp_result;

/* Plans every virtual stage (cuts: P*V+1 positions, or NULL to balance by
 * `by`) with o; with a total budget, lowers a device's stage budgets until
 * the device's peak fits (REMAT_EINFEASIBLE naming the device when it
 * cannot). Activation budgets and ledger extras are refused (REMAT_EINVAL).
 * r is owned by the caller; destroy it either way. */
remat_status remat_pp_plan(const remat_analysis *a, const remat_pp_config *c, const uint32_t *cuts,
                           remat_pp_balance by, const remat_plan_options *o, remat_pp_result *r, remat_err *err);
void remat_pp_result_destroy(remat_pp_result *r);

/* r as text lines ("pipeline 1f1b: 4 devices x 8 microbatches, ...", one
 * row per stage, one peak line per device) or one JSON object {"pipeline",
 * "budget" (total budgets only), "step_time", "busy", "bubble_fraction",
 * "bubble_ratio", "stages": [...], "devices": [...], "largest"}; o is the
 * options r was planned with (its budget is printed). The text names the
 * caller's cuts as `cuts` (a front end spells its own option). Also
 * remat_report_write's REMAT_DOC_PIPELINE. NULL on ENOMEM. O(stages). */
char *remat_report_pipeline(const remat_pp_result *r, const remat_plan_options *o, remat_report_format fmt,
                            size_t *len, remat_err *err);

#ifdef __cplusplus
}
#endif
#endif

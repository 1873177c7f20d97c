/*
 * remat/exec.h - the executor: the one judge of every plan.
 *
 * remat_replay walks a schedule instruction by instruction, checks that each
 * is legal (what it reads is resident, nothing is freed twice, every backward
 * step runs exactly once and after the steps that complete its output
 * gradients), and measures live memory per category at every step's
 * high-water mark (resident before + new outputs + workspace), the peak,
 * and FLOPs. Nothing else in remat computes a peak: planners call this.
 *
 * remat_schedule_from_keep is the default policy that turns a keep set into
 * a schedule (graphs/README.md, "Default policy").
 *
 *     remat_schedule s; remat_schedule_init(&s);
 *     remat_schedule_from_keep(a, keep, &s, &err);
 *     remat_replay_result r;
 *     remat_replay(a, &s, NULL, &r, &err);   // r.valid, r.peak_bytes, ...
 *     remat_replay_result_destroy(&r);
 *     remat_schedule_destroy(&s);
 */
#ifndef REMAT_EXEC_H
#define REMAT_EXEC_H

#include "remat/analyze.h"
#include "remat/schedule.h"

#ifdef __cplusplus
extern "C" {
#endif

#define REMAT_CATEGORY_MAP(X)                         \
    X(PARAMS, "params")                               \
    X(PARAM_GRADS, "param_grads")                     \
    X(OPTIMIZER_STATE, "optimizer_state")             \
    X(MASTER_WEIGHTS, "master_weights")               \
    X(FROZEN, "frozen")                               \
    X(INPUTS, "inputs")                               \
    X(ACTIVATIONS, "activations")                     \
    X(RECOMPUTED, "recomputed")                       \
    X(ACTIVATION_GRADS, "activation_grads")           \
    X(WORKSPACE, "workspace")                         \
    X(COMM_BUFFERS, "comm_buffers")

typedef enum {
#define REMAT__CAT_ENUM(name, text) REMAT_CAT_##name,
    REMAT_CATEGORY_MAP(REMAT__CAT_ENUM)
#undef REMAT__CAT_ENUM
    REMAT_CAT_COUNT
} remat_category;

const char *remat_category_name(remat_category c);

/* 1 for the categories an --activation-budget caps: activations,
 * recomputed, activation_grads, workspace. */
int remat_category_is_activation(remat_category c);

/* Persistent state that the graph does not describe (from the ledger):
 * resident for the whole step, in their own categories. optimizer_workspace
 * is transient during the optimizer step. Zero-initialize for none. */
typedef struct remat_exec_extras {
    uint64_t optimizer_state;
    uint64_t master_weights;
    uint64_t frozen_copies;
    uint64_t comm_buffers;
    uint64_t optimizer_workspace;
} remat_exec_extras;

/* Observer: called during replay, for the tracer and numeric mode. Any
 * callback may be NULL. `storage` is the tensor that owns the bytes; for
 * gradients, grad = 1 and storage is the tensor whose gradient it is.
 * A callback returning non-zero stops the replay with REMAT_EINTERNAL
 * (its own error text in err, set by the observer). */
typedef struct remat_replay_observer {
    void *ctx;
    int (*on_alloc)(void *ctx, size_t index, uint32_t storage, int grad, remat_category cat, uint64_t bytes);
    int (*on_free)(void *ctx, size_t index, uint32_t storage, int grad, remat_category cat, uint64_t bytes);
    /* After the instruction has executed: live bytes now, and the step's
     * high-water mark with its per-category composition. */
    int (*on_step)(void *ctx, size_t index, remat_instr in, uint64_t live_after, uint64_t high_water,
                   const uint64_t *hw_by_category);
} remat_replay_observer;

typedef struct remat_replay_result {
    bool valid;
    /* When invalid: the first failing instruction (index == n for a problem
     * found at the end of the schedule) and why, in err. */
    size_t fail_index;
    uint64_t peak_bytes;
    size_t peak_index;           /* instruction at which the peak occurs */
    uint64_t peak_by_category[REMAT_CAT_COUNT]; /* composition at the peak */
    uint64_t category_peak[REMAT_CAT_COUNT];    /* each category's own maximum */
    uint64_t sum_of_category_peaks;
    uint64_t activation_peak;    /* max over steps of the activation categories together */
    size_t activation_peak_index;
    uint64_t flops_forward, flops_backward, flops_recompute;
    uint32_t *recompute_counts;  /* per op (owned; free with _destroy) */
    uint64_t n_instructions;
} remat_replay_result;

/* Replays s against the analysis. Returns REMAT_OK with r->valid set either
 * way when the schedule was judged (invalid: r->fail_index and err's message
 * say which instruction and why, err->code = REMAT_ESCHEDULE); other codes
 * for ENOMEM, overflow (EOVERFLOW) or an observer's failure. extras and obs
 * may be NULL. O(instructions + refs read), no allocation per instruction. */
remat_status remat_replay(const remat_analysis *a, const remat_schedule *s, const remat_exec_extras *extras,
                          const remat_replay_observer *obs, remat_replay_result *r, remat_err *err);

void remat_replay_result_destroy(remat_replay_result *r);

/* Default policy: keep[t] = 1 keeps activation t resident until its last
 * backward need; 0 frees it after its last forward use and recomputes it
 * (recursively, from resident ancestors) before the first backward step
 * that saves it. Outputs of non-recomputable ops are always kept. Appends
 * to out (which should be empty). O(instructions emitted + refs). */
remat_status remat_schedule_from_keep(const remat_analysis *a, const uint8_t *keep, remat_schedule *out,
                                      remat_err *err);

/* The store-all schedule: every activation kept. */
remat_status remat_schedule_store_all(const remat_analysis *a, remat_schedule *out, remat_err *err);

#ifdef __cplusplus
}
#endif
#endif

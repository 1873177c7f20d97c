/*
 * remat/train.h - the real training step: a schedule executed with real
 * forward and backward kernels on real buffers, then the optimizer update.
 *
 * Numeric replay (remat/exec.h) proves that a schedule is consistent with
 * keyed hash streams for kernels; this stage proves that it trains. A
 * trainer checks once that every op of the graph is executable (the op set
 * and its shapes are documented in graphs/README.md, "Executable ops"),
 * then each remat_train_step:
 *   - judges the schedule with remat_replay, passing the optimizer state
 *     the ledger budgets for this optimizer and dtype as an extra
 *     (remat_exec_extras.optimizer_state), so the accounted peak is the
 *     peak of the whole step: params, gradients, optimizer state,
 *     activations, recomputed activations, activation gradients, workspace;
 *   - executes it on the engine that numeric replay uses (src/train/engine.c):
 *     one buffer per live storage, gradient and workspace, allocated and
 *     freed when the accounting says; params and optimizer state are the
 *     model state's own arrays and the inputs the batch's, counted as live
 *     for the whole step;
 *   - checks that every RECOMPUTE reproduces its first computation bit for
 *     bit (BLAKE2b-256) and that the allocator's high-water mark equals the
 *     accounted peak;
 *   - at OPT, updates the parameters and the optimizer state in place and
 *     counts the step.
 * Kernels are deterministic and gradient contributions arrive in backward
 * order, so every valid schedule whose backward steps run in the same order
 * (every planner's does) gives the same state, bit for bit.
 *
 *     remat_trainer *tr;
 *     if (remat_trainer_create(a, &tr, &err) != REMAT_OK) { ...names the first unsupported op... }
 *     remat_optim o; remat_optim_init(&o, REMAT_LEDGER_ADAM, &err);
 *     remat_model_state st; remat_trainer_init_state(tr, &o, 1, &st, &err);
 *     remat_batch b; remat_batch_alloc(tr, &b, &err);
 *     for (uint64_t k = 0; k < 100; k++) {
 *         remat_trainer_synthetic_batch(tr, 1, st.step, &b, &err);
 *         remat_step_result r;
 *         remat_train_step(tr, &plan.schedule, &st, &b, &r, &err);   // r.loss, r.measured_peak_bytes, ...
 *     }
 *     remat_batch_destroy(&b); remat_model_state_destroy(&st); remat_trainer_destroy(tr);
 */
#ifndef REMAT_TRAIN_H
#define REMAT_TRAIN_H

#include "remat/exec.h"
#include "remat/state.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct remat_trainer remat_trainer;

/* Checks that a's graph can be executed and prepares its layouts (a and
 * its graph must outlive the trainer). REMAT_EUNSUPPORTED names the first
 * unsupported op in forward order (with the supported list), or the first
 * input or param without a shape or an f64/f32 dtype; REMAT_EGRAPH names
 * the first op whose shapes, attrs, bytes or saves do not fit its
 * semantics. O(tensors + refs). */
remat_status remat_trainer_create(const remat_analysis *a, remat_trainer **out, remat_err *err);
void remat_trainer_destroy(remat_trainer *t); /* accepts NULL */

/* The graph's float type (F64 or F32) and its parameter elements. */
remat_elem remat_trainer_dtype(const remat_trainer *t);
uint64_t remat_trainer_param_elements(const remat_trainer *t, bool trainable_only);

/* ---- the synthetic task and the initial state ------------------------------- */

typedef enum {
    REMAT_TASK_SPIRAL,     /* the loss is cross_entropy whose targets are an input: C-arm spiral */
    REMAT_TASK_REGRESSION, /* the loss is mse_loss whose target is an input: y = sin(A x + j) */
    REMAT_TASK_INPUTS      /* anything else: every input uniform in [-1, 1) */
} remat_task;

remat_task remat_trainer_task(const remat_trainer *t);
const char *remat_task_name(remat_task k); /* "spiral", "regression", "inputs" */
/* The task's features and target tensors (REMAT_NONE when none). */
uint32_t remat_trainer_features(const remat_trainer *t);
uint32_t remat_trainer_target(const remat_trainer *t);

/* A fresh model state for optimizer o: params initialized from seed
 * (Glorot-uniform for params of 2 or more dimensions, ones for a
 * layer_norm weight, zeros for other 1-D params and scalars), optimizer
 * state zero, step 0. s is overwritten (it need not be initialized).
 * REMAT_EUNSUPPORTED for an optimizer the trainer does not run. */
remat_status remat_trainer_init_state(const remat_trainer *t, const remat_optim *o, uint64_t seed,
                                      remat_model_state *s, remat_err *err);

/* Checks that a (loaded) state fits the trainer: its dtype is the graph's
 * and its optimizer is one the trainer runs. REMAT_EGRAPH / _EUNSUPPORTED. */
remat_status remat_trainer_check_state(const remat_trainer *t, const remat_model_state *s, remat_err *err);

/* One batch: a buffer of each graph input's bytes, indexed by tensor. */
typedef struct remat_batch {
    uint32_t n_tensors;
    uint8_t **data; /* per tensor: an input's bytes, NULL for other tensors */
} remat_batch;

remat_status remat_batch_alloc(const remat_trainer *t, remat_batch *b, remat_err *err);
void remat_batch_destroy(remat_batch *b); /* accepts NULL */

/* Fills b with the synthetic task's batch for (seed, step): a pure
 * function of both, so a resumed run sees the data an uninterrupted one
 * would. Documented in graphs/README.md ("Synthetic data"). */
remat_status remat_trainer_synthetic_batch(const remat_trainer *t, uint64_t seed, uint64_t step, remat_batch *b,
                                           remat_err *err);

/* Copies batch (step mod n_batches) of d (read for t's graph) into b. */
void remat_batch_from_dataset(const remat_trainer *t, const remat_dataset *d, uint64_t step, remat_batch *b);

/* ---- the step ----------------------------------------------------------------- */

typedef struct remat_step_result {
    double loss;                        /* the forward pass's loss, before the update */
    uint64_t step;                      /* the state's step count after the update */
    uint64_t measured_peak_bytes;       /* the trainer's allocator: high-water mark of live bytes */
    uint64_t accounted_peak_bytes;      /* remat_replay's peak with the optimizer state as an extra */
    uint64_t replay_peak_bytes;         /* remat_replay's peak without extras (what `remat replay` prints) */
    uint64_t optimizer_state_bytes;     /* the ledger's line; equal to the state's arrays */
    bool equal;                         /* measured == accounted */
    uint64_t recomputed_tensors_checked;
    uint64_t mismatches;
    bool verified;                      /* no mismatch and equal */
    uint64_t flops_recompute;
    double wall_seconds;                /* the execution (kernels, buffers, update), not the accounting */
} remat_step_result;

/* Times the kernels of the steps that follow: each remat_train_step (and
 * remat_train_gradients) first zeroes fwd_ns[0..n_ops) and bwd_ns[0..n_ops),
 * then writes op k's forward kernel time (its FWD; a RECOMPUTE of it is
 * not timed) into fwd_ns[k] and its backward kernel time into bwd_ns[k], in
 * nanoseconds of CLOCK_MONOTONIC; an op without a BWD step keeps 0. Only
 * the kernel is timed, not the engine's allocation and hashing around it.
 * Both arrays are the caller's (n_ops elements, alive while timing); NULL
 * and NULL stop timing. O(1); adds two clock reads per instruction. */
void remat_trainer_time_kernels(remat_trainer *t, uint64_t *fwd_ns, uint64_t *bwd_ns);

/* Runs one training step of s (FWD, RECOMPUTE, BWD, FREE, OPT) on state st
 * with batch b and applies the optimizer update. Returns REMAT_OK when the
 * step ran and was verified. An invalid schedule is REMAT_ESCHEDULE with
 * the replay's message, and nothing runs. A recomputation that differs or
 * an allocator that disagrees with the accounting is REMAT_EINTERNAL with
 * r filled (r->verified false; the update was applied). Bad data (a class
 * target out of range) is REMAT_EPARSE. Other codes: REMAT_ENOMEM,
 * REMAT_EGRAPH (a state that does not fit). Cost: the kernels' arithmetic
 * plus one BLAKE2b pass over every forward output. */
remat_status remat_train_step(remat_trainer *t, const remat_schedule *s, remat_model_state *st, const remat_batch *b,
                              remat_step_result *r, remat_err *err);

/* The loss and gradients of one forward and backward pass of s, without an
 * update: grads[t] (caller buffers of the tensor's logical bytes, NULL to
 * skip; grads itself may be NULL) receives the gradient of every param and
 * input that has one.
 * Errors as remat_train_step. */
remat_status remat_train_gradients(remat_trainer *t, const remat_schedule *s, const remat_model_state *st,
                                   const remat_batch *b, uint8_t **grads, double *loss, remat_err *err);

#ifdef __cplusplus
}
#endif
#endif

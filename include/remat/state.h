/*
 * remat/state.h - the model state and the training data, as data.
 *
 * A real training step (remat/train.h) reads parameter values and optimizer
 * state and writes them back, one optimizer update at a time; what it
 * returns to the user is this state: every parameter's values, the
 * optimizer's history (momentum buffer, or Adam's two moments) and the
 * step count. These types are plain data shared by the state-file reader
 * (load), the trainer (exec) and the state-file writer (report), as
 * remat/schedule.h's plans are. The state file's format is documented in
 * graphs/README.md ("State files"): JSON whose numbers are printed with 17
 * significant digits, so that every binary64 (and so every binary32) value
 * reads back bit for bit.
 *
 *     remat_model_state st;
 *     remat_model_state_init(&st);
 *     if (remat_model_state_load_file(g, "state.json", &st, &err) != REMAT_OK) { ...err.msg... }
 *     printf("step %llu\n", (unsigned long long)st.step);
 *     remat_model_state_destroy(&st);
 *
 * Training data (remat_dataset) is a list of batches, each holding every
 * graph input's values; a data file is read by remat_dataset_load_file
 * (format in graphs/README.md, "Data files").
 */
#ifndef REMAT_STATE_H
#define REMAT_STATE_H

#include "remat/graph.h"
#include "remat/ledger.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The element types an executable graph may hold: floats for everything
 * differentiable, integers for class targets. */
typedef enum { REMAT_ELEM_NONE = 0, REMAT_ELEM_F64, REMAT_ELEM_F32, REMAT_ELEM_I64, REMAT_ELEM_I32 } remat_elem;

/* "f64" (also float64, double, fp64, binary64), "f32" (float32, float,
 * fp32, binary32: the ledger's names), "i64"
 * (int64, long), "i32" (int32, int), case-insensitively; REMAT_ELEM_NONE
 * for NULL and anything else. */
remat_elem remat_elem_parse(const char *dtype);
const char *remat_elem_name(remat_elem e); /* "f64", ..., "none" */
uint32_t remat_elem_size(remat_elem e);    /* 8, 4, 8, 4; 0 for NONE */

/* The optimizer and its hyperparameters (PyTorch's semantics; see
 * graphs/README.md, "Optimizers"). kind is one of REMAT_LEDGER_SGD,
 * _MOMENTUM, _ADAM, _ADAMW: the ledger's enum, so that the state the
 * trainer holds and the state the ledger budgets are the same arrays. */
typedef struct remat_optim {
    remat_ledger_optimizer kind;
    double lr;           /* sgd, momentum: 0.01; adam, adamw: 0.001 */
    double momentum;     /* momentum: 0.9 */
    double beta1, beta2; /* adam, adamw: 0.9, 0.999 */
    double eps;          /* adam, adamw: 1e-8 */
    double weight_decay; /* adamw: 0.01 (decoupled); others: 0 (an L2 term added to the gradient) */
} remat_optim;

/* Sets o to kind's defaults. REMAT_EUNSUPPORTED (naming the optimizer) for
 * a kind the trainer does not implement (lion, adafactor, adam8bit). */
remat_status remat_optim_init(remat_optim *o, remat_ledger_optimizer kind, remat_err *err);

/* Optimizer state arrays per parameter element: sgd 0, momentum 1 (the
 * momentum buffer), adam and adamw 2 (exp_avg, exp_avg_sq). */
uint32_t remat_optim_states(remat_ledger_optimizer kind);
/* Name of state array i of kind in state files: "momentum_buffer",
 * "exp_avg", "exp_avg_sq". */
const char *remat_optim_state_name(remat_ledger_optimizer kind, uint32_t i);

/* The model state of one graph: indexed by tensor, filled for params. */
typedef struct remat_model_state {
    uint32_t n_tensors;    /* the graph's; 0 when empty */
    remat_elem dtype;      /* F64 or F32: params and optimizer states */
    remat_optim optim;
    uint64_t step;         /* optimizer updates applied so far */
    uint8_t **value;       /* per tensor: a param's values (its bytes), NULL for other tensors */
    uint8_t **state[2];    /* per tensor: optimizer state arrays of trainable params, NULL when none */
    uint64_t state_bytes;  /* bytes of every state array together */
} remat_model_state;

/* Empty; safe to destroy. */
void remat_model_state_init(remat_model_state *s);
/* Frees the arrays; accepts NULL. Leaves s empty. */
void remat_model_state_destroy(remat_model_state *s);

/* Allocates zeroed arrays for g's params (values: every param, frozen
 * ones too) and for o's states (trainable params only), in dtype. s must
 * be empty. REMAT_ENOMEM; REMAT_EGRAPH when a param's bytes are not a
 * whole number of elements. O(param bytes). */
remat_status remat_model_state_alloc(remat_model_state *s, const remat_graph *g, remat_elem dtype,
                                     const remat_optim *o, remat_err *err);

/* Deep copy (dst must be empty). REMAT_ENOMEM. */
remat_status remat_model_state_copy(remat_model_state *dst, const remat_model_state *src, const remat_graph *g,
                                    remat_err *err);

/* True when both hold the same optimizer, step and bytes, bit for bit.
 * When they differ and where is not NULL, it names the first difference
 * ("param 'w1' element 3", "step"). */
bool remat_model_state_equal(const remat_model_state *a, const remat_model_state *b, const remat_graph *g,
                             char *where, size_t cap);

/* Reads a state file (format "remat-state", version 1) for graph g into
 * s (which must be empty): every trainable param of g must be present with
 * its element count, and no unknown param. The graph's fingerprint is not
 * checked (a state survives edits of costs and saves); its params are.
 * REMAT_EPARSE for text that is not JSON (with line:column), REMAT_EGRAPH
 * for content (with a JSON path), REMAT_ENOMEM. O(size). */
remat_status remat_model_state_load_json(const remat_graph *g, const char *text, size_t len, const char *source,
                                         remat_model_state *s, remat_err *err);
remat_status remat_model_state_load_file(const remat_graph *g, const char *path, remat_model_state *s,
                                         remat_err *err);

/* The state file text (src/train/state_file.c); the caller frees it
 * with remat_free. NULL with REMAT_ENOMEM. O(state). */
char *remat_model_state_format(const remat_graph *g, const remat_model_state *s, size_t *len, remat_err *err);

/* Training data: batches of every graph input. */
typedef struct remat_dataset {
    uint32_t n_batches;
    uint32_t n_tensors; /* the graph's */
    uint8_t **data;     /* [batch * n_tensors + tensor]: the input's bytes, NULL for non-inputs */
} remat_dataset;

void remat_dataset_init(remat_dataset *d);
void remat_dataset_destroy(remat_dataset *d); /* accepts NULL */

/* Reads a data file (format "remat-data", version 1) for g: every graph
 * input in every batch, with its element count, in its dtype (whole
 * numbers for integer inputs). Errors as for state files. */
remat_status remat_dataset_load_json(const remat_graph *g, const char *text, size_t len, const char *source,
                                     remat_dataset *d, remat_err *err);
remat_status remat_dataset_load_file(const remat_graph *g, const char *path, remat_dataset *d, remat_err *err);

#ifdef __cplusplus
}
#endif
#endif

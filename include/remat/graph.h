/*
 * remat/graph.h - the forward compute graph: tensors, ops, and the loader.
 *
 * A graph is a DAG of ops; each op produces one or more tensors. Tensors are
 * inputs (data), params (weights) or activations (op outputs). A view
 * (alias_of) shares its base's storage: it adds no bytes and keeps the base
 * alive. The loader reads the JSON format documented in graphs/README.md,
 * checks every field, resolves every id to a dense index, and reports the
 * first problem with its JSON path. Ordering, cycle detection and the backward
 * pass live in remat/analyze.h.
 *
 *     remat_graph *g;
 *     remat_err err; remat_err_init(&err);
 *     if (remat_graph_load_file("graphs/mlp2.json", &g, &err) != REMAT_OK) { ...err.msg... }
 *     for (uint32_t i = 0; i < g->n_ops; i++) printf("%s\n", g->ops[i].id);
 *     remat_graph_destroy(g);
 *
 * Indices are uint32_t; REMAT_NONE marks "no such index". Op inputs, outputs
 * and saves are slices of one shared array (g->refs), read through the
 * remat_op_inputs/outputs/saves accessors.
 */
#ifndef REMAT_GRAPH_H
#define REMAT_GRAPH_H

#include "remat/util.h"

#ifdef __cplusplus
extern "C" {
#endif

#define REMAT_NONE UINT32_MAX
#define REMAT_GRAPH_FORMAT "remat-graph"
#define REMAT_GRAPH_VERSION 1

typedef enum {
    REMAT_TENSOR_INPUT,
    REMAT_TENSOR_PARAM,
    REMAT_TENSOR_ACTIVATION
} remat_tensor_kind;

typedef struct remat_tensor {
    const char *id;
    remat_tensor_kind kind;
    uint64_t bytes;      /* bytes of own storage; 0 for a view */
    uint64_t logical_bytes; /* size of the tensor itself (a view's own size; its gradient's size) */
    uint32_t producer;   /* op index, REMAT_NONE for inputs and params */
    uint32_t alias_of;   /* a view's direct base tensor, else REMAT_NONE */
    uint32_t storage;    /* tensor that owns the bytes: itself, or a view's root base */
    bool frozen;         /* params: no gradient (a frozen reference, a frozen layer) */
    bool requires_grad;  /* inputs: a gradient is wanted (default false) */
    const char *dtype;   /* NULL when not given */
    uint32_t ndim;       /* 0 when no shape is given */
    const uint64_t *shape;
} remat_tensor;

typedef struct remat_op {
    const char *id;
    const char *type;     /* "matmul", "relu", ... */
    uint32_t in_off, n_in; /* slices of g->refs (tensor indices) */
    uint32_t out_off, n_out;
    uint32_t save_off, n_save;
    uint64_t flops;
    uint64_t bwd_flops;   /* default 2 * flops */
    uint64_t workspace;   /* transient bytes while the forward runs */
    uint64_t bwd_workspace;
    bool recomputable;    /* default true */
    bool grad_views;      /* its backward hands each activation input a view of its output's gradient
                           * (torch.cat's, stack's): graphs/README.md, "Gradient views"; default false */
    const char *attrs_json; /* the "attrs" object re-serialized, or NULL (read by remat/train.h's kernels) */
    const char *module;   /* attrs.module: the dotted path of the module that ran the op ("" the root), or NULL */
} remat_op;

typedef struct remat_graph {
    const char *name;
    uint32_t n_tensors, n_ops, n_outputs;
    remat_tensor *tensors; /* inputs, then params, then activations in op order */
    remat_op *ops;         /* in file order */
    uint32_t *refs;
    uint32_t n_refs;
    uint32_t *outputs;     /* tensor indices of the graph outputs (the loss) */
    const char *meta_json; /* the "meta" object re-serialized, or NULL */
    uint64_t fingerprint;  /* FNV-1a over the canonical content: names plan files' target */
    void *internal_;       /* string and array storage */
} remat_graph;

static inline const uint32_t *remat_op_inputs(const remat_graph *g, const remat_op *op)
{
    return g->refs + op->in_off;
}
static inline const uint32_t *remat_op_outputs(const remat_graph *g, const remat_op *op)
{
    return g->refs + op->out_off;
}
static inline const uint32_t *remat_op_saves(const remat_graph *g, const remat_op *op)
{
    return g->refs + op->save_off;
}

/* Loads a graph from JSON text of length len (need not be NUL-terminated).
 * `source` names the input in messages (a file name). On success *out owns a
 * new graph (free with remat_graph_destroy); on failure *out is NULL and err
 * names the place: "graph.json:3:14: ..." for syntax, "graph.json: ops[2].inputs[0]: ..."
 * for content. Cost O(size of input). */
remat_status remat_graph_load_json(const char *text, size_t len, const char *source, remat_graph **out,
                                   remat_err *err);

/* Reads path ("-" for stdin) and loads it. */
remat_status remat_graph_load_file(const char *path, remat_graph **out, remat_err *err);

/* Accepts NULL. */
void remat_graph_destroy(remat_graph *g);

/* Looks up a tensor or op by id; REMAT_NONE when absent. O(1) expected. */
uint32_t remat_graph_find_tensor(const remat_graph *g, const char *id);
uint32_t remat_graph_find_op(const remat_graph *g, const char *id);

const char *remat_tensor_kind_str(remat_tensor_kind k);

/* Operator attributes (an op's "attrs" object; src/load/attrs.c). Each
 * looks up key in op k's attrs and sets *found; a missing key (or no attrs)
 * is not an error. A value of the wrong type is REMAT_EGRAPH naming
 * "ops[k].attrs.key". _ints accepts a whole number or an array of whole
 * numbers (at most cap; negative allowed), _string copies at most cap-1
 * bytes. O(size of the attrs). */
remat_status remat_op_attr_number(const remat_graph *g, uint32_t k, const char *key, double *out, bool *found,
                                  remat_err *err);
remat_status remat_op_attr_ints(const remat_graph *g, uint32_t k, const char *key, int64_t *out, uint32_t cap,
                                uint32_t *n, bool *found, remat_err *err);
remat_status remat_op_attr_bool(const remat_graph *g, uint32_t k, const char *key, bool *out, bool *found,
                                remat_err *err);
remat_status remat_op_attr_string(const remat_graph *g, uint32_t k, const char *key, char *out, size_t cap,
                                  bool *found, remat_err *err);

#ifdef __cplusplus
}
#endif
#endif

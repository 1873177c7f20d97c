/*
 * kernels.h - the executable op set: shapes, layouts and real kernels.
 *
 * remat__kprog_prepare checks that a graph can be executed for real (every
 * op type supported, every leaf with a shape and a dtype, every shape
 * consistent with its op, every tensor's bytes equal to its elements times
 * its element size, and every tensor a backward kernel reads listed in its
 * op's saves) and computes each tensor's layout: its shape (given, or
 * inferred for activations) and its element strides into its storage's
 * buffer. A view shares its base's buffer: a reshape view needs a
 * contiguous base, a transpose or permute view permutes the base's strides,
 * and every kernel reads its inputs through these strides, so a transposed
 * view is never copied. Outputs and gradients are always contiguous
 * (row-major) in their own shape.
 *
 * The kernels run inside the engine (engine.h): they read E->buf and E->grad
 * and honour E->mark. They compute in binary64 and round once per stored
 * value, so an f32 graph stores f32 everywhere but never accumulates in
 * f32; every loop runs in a fixed order, so a recomputation is bit-identical
 * to the first computation. The semantics are documented in
 * graphs/README.md ("Executable ops"). Internal; not installed.
 */
#ifndef REMAT_EXEC_KERNELS_H
#define REMAT_EXEC_KERNELS_H

#include "engine.h"
#include "remat/state.h"

#define REMAT_KMAXDIM 8

typedef enum {
    REMAT_KOP_LINEAR,
    REMAT_KOP_MATMUL,
    REMAT_KOP_ADD,
    REMAT_KOP_MUL,
    REMAT_KOP_RELU,
    REMAT_KOP_GELU,
    REMAT_KOP_TANH,
    REMAT_KOP_SIGMOID,
    REMAT_KOP_LAYER_NORM,
    REMAT_KOP_SOFTMAX,
    REMAT_KOP_CROSS_ENTROPY,
    REMAT_KOP_MSE_LOSS,
    REMAT_KOP_SUM,
    REMAT_KOP_MEAN,
    REMAT_KOP_RESHAPE,
    REMAT_KOP_TRANSPOSE, /* transpose and permute */
    REMAT_KOP_COUNT
} remat__kop_kind;

typedef struct remat__layout {
    remat_elem elem;
    uint32_t nd;
    uint64_t shape[REMAT_KMAXDIM];
    int64_t st[REMAT_KMAXDIM]; /* element strides into the storage's buffer */
    uint64_t n;                /* elements */
} remat__layout;

typedef struct remat__kop {
    remat__kop_kind kind;
    bool view;              /* reshape / transpose with alias_of: no data of its own */
    bool from_output;       /* relu, tanh, sigmoid: the backward reads the output (else the input) */
    bool ln_stats;          /* layer_norm: the backward reads the saved mean and rstd outputs */
    bool gelu_tanh;         /* gelu: the tanh approximation (else erf) */
    bool sum_reduction;     /* cross_entropy, mse_loss: reduction "sum" (else "mean") */
    double eps;             /* layer_norm */
    uint32_t perm[REMAT_KMAXDIM];  /* transpose: output dim d is input dim perm[d] */
    uint8_t rmask[REMAT_KMAXDIM];  /* sum, mean: 1 for the reduced input dims */
    uint64_t rcount;        /* sum, mean: input elements per output element */
} remat__kop;

typedef struct remat__kprog {
    const remat_analysis *a;
    remat_elem dtype;       /* F64 or F32: every differentiable tensor */
    remat__layout *lay;     /* per tensor */
    remat__kop *ops;        /* per op */
} remat__kprog;

/* Checks g for execution and fills p. REMAT_EUNSUPPORTED names the first
 * unsupported op (in forward order), then the first leaf without a shape or
 * a dtype; REMAT_EGRAPH names the first inconsistency (op, tensor, what was
 * expected). p is safe to destroy after a failure. O(tensors + refs). */
remat_status remat__kprog_prepare(remat__kprog *p, const remat_analysis *a, remat_err *err);
void remat__kprog_destroy(remat__kprog *p);

/* The supported op types, comma-separated (for messages and docs). */
const char *remat__kop_list(void);

/* Runs op k forward: writes every output whose mark is non-zero. */
remat_status remat__kernel_forward(const remat__kprog *p, remat__engine *E, uint32_t k);

/* Runs op k's backward step: reads E->grad of its outputs and its saves,
 * writes (mark 2) or adds (mark 1) the gradient of each marked input. */
remat_status remat__kernel_backward(const remat__kprog *p, remat__engine *E, uint32_t k);

/* Element access shared with the optimizer and the synthetic data. */
static inline double remat__ld(const uint8_t *p, int f32, int64_t i)
{
    return f32 ? (double)((const float *)(const void *)p)[i] : ((const double *)(const void *)p)[i];
}

static inline void remat__st(uint8_t *p, int f32, int64_t i, double v)
{
    if (f32)
        ((float *)(void *)p)[i] = (float)v;
    else
        ((double *)(void *)p)[i] = v;
}

#endif

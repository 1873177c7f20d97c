/*
 * shard_torch.c - PyTorch's own optimizer sharding: ZeroRedundancyOptimizer's
 * assignment of whole parameters to ranks.
 *
 * Design: torch 1.13's ZeroRedundancyOptimizer
 * (torch/distributed/optim/zero_redundancy_optimizer.py, _partition_parameters)
 * does not divide a flat buffer into equal partitions as DeepSpeed's ZeRO 1
 * does: per param group it sorts the params by numel, largest first (Python's
 * sort is stable, so equal sizes keep the group's order), and gives each one
 * to the rank with the fewest elements so far (_get_min_index: the first
 * such rank). Each rank's local optimizer then holds state for its params
 * only, and only for those with a gradient (Adam creates its moments at the
 * first step for p.grad is not None). remat puts every trainable param of
 * the graph in one group, in the graph's order (the exporter writes
 * model.parameters()'s order), and the per-rank sums depend on the sizes
 * alone: swapping two params of one size gives the same sums. Weights and
 * gradients stay whole on every rank (the model is wrapped in DDP), so this
 * file only assigns; the CLI turns a rank's elements into its optimizer
 * state through the ledger.
 */
#include "remat/exec.h"
#include "../util/util_internal.h"

#include <stdlib.h>
#include <string.h>

void remat_zero_redundancy_destroy(remat_zero_redundancy *z)
{
    if (!z)
        return;
    remat__free(z->rank_of);
    remat__free(z->rank_elements);
    remat__free(z->rank_state_elements);
    remat__free(z->rank_temps);
    remat__free(z->prev);
    memset(z, 0, sizeof *z);
}

typedef struct {
    uint64_t elements;
    uint32_t tensor;
} sized;

/* Largest first; equal sizes in graph order, as Python's stable sort keeps
 * them (qsort is not stable, so the tensor index breaks ties). */
static int by_size_desc(const void *x, const void *y)
{
    const sized *a = x, *b = y;
    if (a->elements != b->elements)
        return a->elements < b->elements ? 1 : -1;
    return (a->tensor > b->tensor) - (a->tensor < b->tensor);
}

/* torch 1.13's single-tensor Adam and AdamW (torch/optim/adam.py,
 * _single_tensor_adam; foreach=None becomes False) compute, per param,
 * denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps): while the
 * quotient is allocated, the square root (this param's size) is live, and
 * so is the previous param's denom, which the Python local still holds
 * until the assignment. So the loop's high-water mark is
 * max over i of 2 e_i + e_(i-1), in elements of the state's dtype. Saturates
 * (the caller multiplies with a check). */
static uint64_t adam_temps(uint64_t prev, uint64_t e)
{
    return e > (UINT64_MAX - prev) / 2 ? UINT64_MAX : 2 * e + prev;
}

uint64_t remat_torch_adam_temporaries(const remat_analysis *a, uint32_t elem_bytes)
{
    const remat_graph *g = a->g;
    uint64_t prev = 0, m = 0;
    for (uint32_t t = 0; elem_bytes && t < g->n_tensors; t++) {
        const remat_tensor *T = &g->tensors[t];
        if (T->kind != REMAT_TENSOR_PARAM || T->frozen || !a->grad_flows[t])
            continue;
        uint64_t e = T->bytes / elem_bytes, w = adam_temps(prev, e);
        if (w > m)
            m = w;
        prev = e;
    }
    return m;
}

remat_status remat_zero_redundancy_init(const remat_analysis *a, uint64_t dp, uint32_t elem_bytes,
                                        remat_zero_redundancy *out, remat_err *err)
{
    memset(out, 0, sizeof *out);
    const remat_graph *g = a->g;
    if (dp < 2)
        return remat_err_set(err, REMAT_EINVAL, "`dp`: ZeroRedundancyOptimizer needs at least 2 ranks (got %llu)",
                             (unsigned long long)dp);
    if (dp > UINT32_MAX)
        return remat_err_set(err, REMAT_EINVAL, "`dp`: %llu ranks exceed 2^32-1", (unsigned long long)dp);
    if (elem_bytes == 0)
        return remat_err_set(err, REMAT_EINVAL, "ZeroRedundancyOptimizer: element size must be at least 1 byte");
    size_t n = 0;
    for (uint32_t t = 0; t < g->n_tensors; t++)
        n += g->tensors[t].kind == REMAT_TENSOR_PARAM && !g->tensors[t].frozen;
    out->dp = dp;
    out->rank_of = remat__array(g->n_tensors ? g->n_tensors : 1, sizeof *out->rank_of);
    out->rank_elements = remat__calloc(dp, sizeof *out->rank_elements);
    out->rank_state_elements = remat__calloc(dp, sizeof *out->rank_state_elements);
    out->rank_temps = remat__calloc(dp, sizeof *out->rank_temps);
    out->prev = remat__calloc(dp, sizeof *out->prev);
    sized *ps = remat__array(n ? n : 1, sizeof *ps);
    if (!out->rank_of || !out->rank_elements || !out->rank_state_elements || !out->rank_temps || !out->prev || !ps) {
        remat__free(ps);
        remat_zero_redundancy_destroy(out);
        return remat_err_set(err, REMAT_ENOMEM, "out of memory assigning params to ranks");
    }
    size_t k = 0;
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        const remat_tensor *T = &g->tensors[t];
        out->rank_of[t] = REMAT_NONE;
        if (T->kind != REMAT_TENSOR_PARAM || T->frozen)
            continue;
        if (T->bytes % elem_bytes) {
            remat__free(ps);
            remat_zero_redundancy_destroy(out);
            return remat_err_set(err, REMAT_EINVAL,
                                 "param '%s': %llu B is not a whole number of %u-byte elements; give the params' "
                                 "precision (`remat_zero_redundancy_init.elem_bytes`)",
                                 T->id, (unsigned long long)T->bytes, elem_bytes);
        }
        ps[k].elements = T->bytes / elem_bytes;
        ps[k++].tensor = t;
    }
    qsort(ps, n, sizeof *ps, by_size_desc);
    for (size_t i = 0; i < n; i++) {
        uint32_t r = 0; /* the first rank with the fewest elements */
        for (uint32_t q = 1; q < dp; q++)
            if (out->rank_elements[q] < out->rank_elements[r])
                r = q;
        uint32_t t = ps[i].tensor;
        uint64_t e = ps[i].elements;
        out->rank_of[t] = r;
        if (!remat_u64_add(out->rank_elements[r], e, &out->rank_elements[r])) {
            remat__free(ps);
            remat_zero_redundancy_destroy(out);
            return remat_err_set(err, REMAT_EOVERFLOW, "ZeroRedundancyOptimizer: a rank's elements exceed 2^64-1");
        }
        if (a->grad_flows[t]) {
            out->rank_state_elements[r] += e; /* <= rank_elements[r] */
            /* The local optimizer's list is the rank's params in this
             * (sorted) order; its Adam loop visits those with a gradient. */
            uint64_t w = adam_temps(out->prev[r], e);
            if (w > out->rank_temps[r])
                out->rank_temps[r] = w;
            out->prev[r] = e;
        }
    }
    remat__free(ps);
    for (uint32_t q = 1; q < dp; q++)
        if (out->rank_state_elements[q] > out->rank_state_elements[out->largest_rank])
            out->largest_rank = q;
    return REMAT_OK;
}

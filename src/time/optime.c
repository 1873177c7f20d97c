/*
 * optime.c - how long one op, one optimizer step and one collective take.
 *
 * Per op, a measured duration (the exporter's attrs.duration_ns and
 * attrs.bwd_duration_ns, in nanoseconds) wins; otherwise the roofline of
 * Williams, Waterman and Patterson (2009): the op is bound either by its
 * arithmetic (FLOPs / peak of its element type) or by the bytes it moves
 * to and from device memory (bytes / bandwidth), whichever is slower, plus
 * the device's per-kernel overhead. The bytes are the tensors the kernel
 * must touch at least once: a lower bound, like the peak, so the roofline
 * is optimistic and the docs say so. A collective costs the ring
 * algorithm's alpha-beta time (Thakur, Rabenseifner and Gropp 2005,
 * section 4: all-gather (p-1) alpha + (p-1)/p n beta; reduce-scatter the
 * same plus the reduction's arithmetic, which is left out; all-reduce as
 * reduce-scatter then all-gather, twice both terms), which NCCL's
 * performance notes use too (bus bandwidth = algorithm bandwidth x
 * 2(n-1)/n for all-reduce, (n-1)/n for all-gather and reduce-scatter).
 */
#include "remat/time.h"
#include "../util/util_internal.h"

#include <math.h>
#include <string.h>

double remat_time_roofline(double flops, double bytes, double peak, double bandwidth, double overhead)
{
    double c = peak > 0 ? flops / peak : 0, m = bandwidth > 0 ? bytes / bandwidth : 0;
    return overhead + (c > m ? c : m);
}

double remat_time_collective(const remat_device *d, remat_collective kind, uint64_t bytes, uint64_t ranks)
{
    if (ranks < 2 || bytes == 0)
        return 0;
    if (kind == REMAT_COLL_SEND)
        return d->link_latency + (double)bytes / d->link_bandwidth;
    double n = (double)ranks, steps = n - 1;
    double t = steps * d->link_latency + steps / n * (double)bytes / d->link_bandwidth;
    return kind == REMAT_COLL_ALLREDUCE ? 2 * t : t;
}

double remat_time_optimizer(const remat_device *d, uint64_t param_bytes, uint64_t grad_bytes,
                            const remat_exec_extras *extras)
{
    double state = 0;
    if (extras)
        state = (double)extras->optimizer_state + (double)extras->master_weights;
    /* Read weights, gradients, state and master copy; write weights, state
     * and master copy back. */
    double bytes = 2.0 * (double)param_bytes + (double)grad_bytes + 2.0 * state;
    if (bytes == 0)
        return 0;
    return d->kernel_overhead + bytes / d->mem_bandwidth;
}

/* The element type of op k: its first output's, else its first input's. */
static remat_dtype op_dtype(const remat_graph *g, const remat_op *op, const remat_device *d)
{
    remat_dtype t;
    const uint32_t *out = remat_op_outputs(g, op), *in = remat_op_inputs(g, op);
    if (op->n_out && remat_dtype_parse(g->tensors[out[0]].dtype, &t))
        return t;
    if (op->n_in && remat_dtype_parse(g->tensors[in[0]].dtype, &t))
        return t;
    return d->default_dtype;
}

/* attrs.KEY as seconds, when given: a non-negative number of nanoseconds. */
static remat_status measured(const remat_graph *g, uint32_t k, const char *key, double *out, bool *found,
                             remat_err *err)
{
    double ns = 0;
    remat_status st = remat_op_attr_number(g, k, key, &ns, found, err);
    if (st != REMAT_OK)
        return st;
    if (*found && !(ns >= 0))
        return remat_err_set(err, REMAT_EGRAPH, "ops[%u].attrs.%s (op '%.80s'): must not be negative", k, key,
                             g->ops[k].id);
    *out = ns * 1e-9;
    return REMAT_OK;
}

void remat_op_times_destroy(remat_op_times *t)
{
    if (!t)
        return;
    remat__free(t->fwd);
    remat__free(t->bwd);
    memset(t, 0, sizeof *t);
}

remat_status remat_op_times_init(const remat_analysis *a, const remat_device *d, remat_op_times *out,
                                 remat_err *err)
{
    const remat_graph *g = a->g;
    memset(out, 0, sizeof *out);
    out->fwd = remat__calloc(g->n_ops ? g->n_ops : 1, sizeof *out->fwd);
    out->bwd = remat__calloc(g->n_ops ? g->n_ops : 1, sizeof *out->bwd);
    if (!out->fwd || !out->bwd) {
        remat_op_times_destroy(out);
        return remat_err_set(err, REMAT_ENOMEM, "out of memory timing the ops");
    }
    out->n_ops = g->n_ops;
    for (uint32_t k = 0; k < g->n_ops; k++) {
        const remat_op *op = &g->ops[k];
        const uint32_t *in = remat_op_inputs(g, op), *outs = remat_op_outputs(g, op), *sv = remat_op_saves(g, op);
        bool ff = false, fb = false;
        remat_status st = measured(g, k, "duration_ns", &out->fwd[k], &ff, err);
        if (st == REMAT_OK)
            st = measured(g, k, "bwd_duration_ns", &out->bwd[k], &fb, err);
        if (st != REMAT_OK) {
            remat_op_times_destroy(out);
            return st;
        }
        out->n_fwd_measured += ff;
        out->n_bwd_measured += fb;
        if (ff && fb)
            continue;
        int kernel = 0;
        double fwd_bytes = 0, bwd_bytes = 0;
        for (uint32_t j = 0; j < op->n_out; j++) {
            const remat_tensor *t = &g->tensors[outs[j]];
            if (t->alias_of == REMAT_NONE) {
                kernel = 1;
                fwd_bytes += (double)t->logical_bytes;
            }
            bwd_bytes += (double)t->logical_bytes; /* its gradient, read */
        }
        for (uint32_t j = 0; j < op->n_in; j++) {
            fwd_bytes += (double)g->tensors[in[j]].logical_bytes;
            if (a->grad_flows[in[j]])
                bwd_bytes += (double)g->tensors[in[j]].logical_bytes; /* its gradient, written */
        }
        for (uint32_t j = 0; j < op->n_save; j++)
            bwd_bytes += (double)g->tensors[sv[j]].logical_bytes;
        remat_dtype dt = op_dtype(g, op, d);
        double peak = d->peak_flops[dt];
        if (kernel && !(peak > 0) && (op->flops || op->bwd_flops)) {
            remat_op_times_destroy(out);
            return remat_err_set(err, REMAT_EGRAPH,
                                 "ops[%u] (op '%.80s'): device %s has no %s peak (give peak_flops.%s in a device "
                                 "file, or measured durations)",
                                 k, op->id, d->name, remat_dtype_name(dt), remat_dtype_name(dt));
        }
        if (!ff)
            out->fwd[k] = kernel ? remat_time_roofline((double)op->flops, fwd_bytes, peak, d->mem_bandwidth,
                                                       d->kernel_overhead)
                                 : 0;
        if (!fb)
            out->bwd[k] = kernel || op->bwd_flops ? remat_time_roofline((double)op->bwd_flops, bwd_bytes, peak,
                                                                         d->mem_bandwidth, d->kernel_overhead)
                                                  : 0;
    }
    return REMAT_OK;
}

/*
 * timeline.c - a schedule on two streams: when each instruction starts and
 * ends, the step time, and the critical path.
 *
 * The model is the one a training framework runs on an accelerator: one
 * compute stream executes FWD, RECOMPUTE, BWD and OPT in schedule order;
 * one communication stream (NCCL's own CUDA stream, as DDP and DeepSpeed
 * use) executes the collectives in schedule order. The program issues each
 * instruction where the schedule puts it and never blocks the host, so a
 * collective can run while later compute runs, and compute waits only where
 * it needs a collective's result (a ZeRO 3 gather of the params it reads;
 * the optimizer step's reduced gradients). Every start records the
 * instruction that bound it, so the critical path is read backwards from
 * the last end in one pass. Memory is not judged here: the replay in exec
 * did that, and a collective never starts before its schedule position's
 * compute starts, so the order the replay measured holds.
 *
 * Tensor-parallel collectives are ops of the graph (gen transformer --tp,
 * remat tp-split): an op whose attrs name a collective for a direction
 * (collective_fwd for its FWD and RECOMPUTE, collective_bwd for its BWD)
 * and that does no arithmetic of its own runs that step on the
 * communication stream, over attrs.ranks ranks, on its largest tensor (the
 * whole buffer of an all-reduce, all-gather or reduce-scatter). What it
 * makes (its outputs in forward, its inputs' gradients in backward) is then
 * ready only when it ends: a compute step that reads one waits. So a
 * recomputation scheduled between a backward all-reduce and the step that
 * needs its result runs while the all-reduce does.
 */
#include "remat/time.h"
#include "../util/util_internal.h"

#include <string.h>

void remat_timeline_destroy(remat_timeline *tl)
{
    if (!tl)
        return;
    remat__free(tl->start);
    remat__free(tl->end);
    remat__free(tl->stream);
    remat__free(tl->pred);
    remat__free(tl->crit);
    memset(tl, 0, sizeof *tl);
}

static int is_collective(uint32_t k)
{
    return k == REMAT_I_ALLGATHER || k == REMAT_I_REDUCE_SCATTER || k == REMAT_I_ALLREDUCE;
}

/* Trainable weights and their gradients as one rank holds them when the
 * optimizer runs (a ZeRO stage >= 1 rank updates its partition only). */
static void opt_bytes(const remat_analysis *a, const remat_sharding *sh, uint64_t *w, uint64_t *gr)
{
    const remat_graph *g = a->g;
    *w = *gr = 0;
    if (sh && sh->cfg.stage >= 1) {
        uint64_t part = (sh->psi + sh->cfg.dp - 1) / sh->cfg.dp * sh->cfg.elem_bytes;
        *w = *gr = part;
        return;
    }
    for (uint32_t t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].kind == REMAT_TENSOR_PARAM && a->grad_flows[t]) {
            *w += g->tensors[t].bytes;
            *gr += g->tensors[t].logical_bytes;
        }
}

/* Per op: the collective each direction runs (-1: none, or an op with
 * arithmetic of its own, whose collective is not modelled), its ranks and
 * the bytes it moves. */
typedef struct {
    int8_t kind[2];
    uint32_t ranks;
    uint64_t bytes;
} tp_coll;

static int coll_kind(const char *s)
{
    return !strcmp(s, "all_reduce") ? REMAT_COLL_ALLREDUCE
           : !strcmp(s, "all_gather") ? REMAT_COLL_ALLGATHER
           : !strcmp(s, "reduce_scatter") ? REMAT_COLL_REDUCE_SCATTER
                                           : -1;
}

static remat_status tp_collectives(const remat_graph *g, tp_coll *c, remat_err *err)
{
    for (uint32_t k = 0; k < g->n_ops; k++) {
        const remat_op *op = &g->ops[k];
        c[k].kind[0] = c[k].kind[1] = -1;
        if (!op->attrs_json || op->flops || op->bwd_flops)
            continue;
        double ranks = 0;
        bool found = false;
        remat_status st = remat_op_attr_number(g, k, "ranks", &ranks, &found, err);
        if (st != REMAT_OK)
            return st;
        if (!found || !(ranks >= 2) || ranks > 1e6)
            continue;
        static const char *const keys[2] = {"collective_fwd", "collective_bwd"};
        for (int dir = 0; dir < 2; dir++) {
            char what[32];
            bool f = false;
            if ((st = remat_op_attr_string(g, k, keys[dir], what, sizeof what, &f, err)) != REMAT_OK)
                return st;
            c[k].kind[dir] = f ? (int8_t)coll_kind(what) : -1;
        }
        c[k].ranks = (uint32_t)ranks;
        const uint32_t *in = remat_op_inputs(g, op), *out = remat_op_outputs(g, op);
        for (uint32_t j = 0; j < op->n_in; j++)
            if (g->tensors[in[j]].logical_bytes > c[k].bytes)
                c[k].bytes = g->tensors[in[j]].logical_bytes;
        for (uint32_t j = 0; j < op->n_out; j++)
            if (g->tensors[out[j]].logical_bytes > c[k].bytes)
                c[k].bytes = g->tensors[out[j]].logical_bytes;
    }
    return REMAT_OK;
}

remat_status remat_time_op_collectives(const remat_graph *g, const remat_device *d, double *fwd, double *bwd,
                                       remat_err *err)
{
    tp_coll *tc = remat__calloc(g->n_ops ? g->n_ops : 1, sizeof *tc);
    if (!tc)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory timing the collectives");
    remat_status st = tp_collectives(g, tc, err);
    for (uint32_t k = 0; st == REMAT_OK && k < g->n_ops; k++) {
        fwd[k] = tc[k].kind[0] >= 0 ? remat_time_collective(d, (remat_collective)tc[k].kind[0], tc[k].bytes,
                                                            tc[k].ranks)
                                    : 0;
        bwd[k] = tc[k].kind[1] >= 0 ? remat_time_collective(d, (remat_collective)tc[k].kind[1], tc[k].bytes,
                                                            tc[k].ranks)
                                    : 0;
    }
    remat__free(tc);
    return st;
}

/* Waits for instruction j when it ends after *start. */
static void wait_for(const remat_timeline *tl, size_t j, double *start, size_t *pred)
{
    if (j != SIZE_MAX && tl->end[j] > *start) {
        *start = tl->end[j];
        *pred = j;
    }
}

remat_status remat_timeline_run(const remat_analysis *a, const remat_schedule *s, const remat_exec_extras *extras,
                                const remat_device *d, const remat_op_times *t, remat_timeline *out,
                                remat_err *err)
{
    const remat_graph *g = a->g;
    const remat_sharding *sh = extras ? extras->sharding : NULL;
    memset(out, 0, sizeof *out);
    if (t->n_ops != g->n_ops)
        return remat_err_set(err, REMAT_EINVAL, "timeline: op times for %u ops, graph has %u", t->n_ops, g->n_ops);
    int has_opt = 0;
    for (size_t i = 0; i < s->n; i++)
        has_opt |= s->ins[i].kind == REMAT_I_OPT;
    size_t n = s->n + !has_opt;
    out->n = n;
    out->start = remat__calloc(n, sizeof *out->start);
    out->end = remat__calloc(n, sizeof *out->end);
    out->stream = remat__calloc(n, 1);
    out->pred = remat__calloc(n, sizeof *out->pred);
    out->crit = remat__calloc(n, sizeof *out->crit);
    size_t *gathered = remat__calloc(g->n_ops ? g->n_ops : 1, sizeof *gathered);
    tp_coll *tc = remat__calloc(g->n_ops ? g->n_ops : 1, sizeof *tc);
    /* The tensor-parallel collective that made a tensor, or its gradient. */
    size_t *ready = remat__calloc(g->n_tensors ? g->n_tensors : 1, sizeof *ready);
    size_t *gready = remat__calloc(g->n_tensors ? g->n_tensors : 1, sizeof *gready);
    if (!out->start || !out->end || !out->stream || !out->pred || !out->crit || !gathered || !tc || !ready ||
        !gready) {
        remat__free(gathered);
        remat__free(tc);
        remat__free(ready);
        remat__free(gready);
        remat_timeline_destroy(out);
        return remat_err_set(err, REMAT_ENOMEM, "out of memory building the timeline");
    }
    for (uint32_t k = 0; k < g->n_ops; k++)
        gathered[k] = SIZE_MAX;
    for (uint32_t x = 0; x < g->n_tensors; x++)
        ready[x] = gready[x] = SIZE_MAX;
    remat_status st = tp_collectives(g, tc, err);
    uint64_t pw, pg;
    opt_bytes(a, sh, &pw, &pg);
    const double t_opt = remat_time_optimizer(d, pw, pg, extras);
    const int stage3 = sh && sh->cfg.stage == 3;
    size_t last_compute = SIZE_MAX, last_comm = SIZE_MAX, last_reduce = SIZE_MAX, opt = SIZE_MAX;
    double compute_free = 0, comm_free = 0;
    for (size_t i = 0; i < n && st == REMAT_OK; i++) {
        remat_instr in = i < s->n ? s->ins[i] : (remat_instr){REMAT_I_OPT, 0};
        double start, dur = 0;
        size_t pred;
        const int op_step = in.kind == REMAT_I_FWD || in.kind == REMAT_I_RECOMPUTE || in.kind == REMAT_I_BWD;
        if (op_step && in.arg >= g->n_ops) {
            st = remat_err_set(err, REMAT_EINVAL, "timeline: instruction %zu names op %u of %u", i, in.arg, g->n_ops);
            break;
        }
        const int bwd = in.kind == REMAT_I_BWD;
        if (op_step && tc[in.arg].kind[bwd] >= 0) {
            /* A tensor-parallel collective: issued here, after the compute
             * step that made its data (the one before it in the schedule). */
            const remat_op *op = &g->ops[in.arg];
            start = comm_free;
            pred = last_comm;
            if (last_compute != SIZE_MAX && out->start[last_compute] > start) {
                start = out->start[last_compute];
                pred = out->pred[last_compute];
            }
            wait_for(out, last_compute, &start, &pred);
            const uint32_t *rd = remat_op_inputs(g, op);
            for (uint32_t j = 0; j < op->n_in; j++)
                wait_for(out, ready[rd[j]], &start, &pred);
            dur = remat_time_collective(d, (remat_collective)tc[in.arg].kind[bwd], tc[in.arg].bytes,
                                        tc[in.arg].ranks);
            out->stream[i] = REMAT_STREAM_COMM;
            comm_free = start + dur;
            out->comm_time += dur;
            last_comm = i;
            const uint32_t *made = bwd ? rd : remat_op_outputs(g, op);
            for (uint32_t j = 0; j < (bwd ? op->n_in : op->n_out); j++)
                (bwd ? gready : ready)[made[j]] = i;
        } else if (op_step || in.kind == REMAT_I_OPT) {
            start = compute_free;
            pred = last_compute;
            if (op_step) {
                /* What a tensor-parallel collective made: the inputs a
                 * forward reads, the output gradients a backward reads. */
                const remat_op *op = &g->ops[in.arg];
                const uint32_t *rd = bwd ? remat_op_outputs(g, op) : remat_op_inputs(g, op);
                for (uint32_t j = 0; j < (bwd ? op->n_out : op->n_in); j++)
                    wait_for(out, (bwd ? gready : ready)[rd[j]], &start, &pred);
            }
            if (stage3 && in.kind != REMAT_I_OPT) {
                const remat_op *op = &g->ops[in.arg];
                const uint32_t *rd = remat_op_inputs(g, op);
                for (uint32_t j = 0; j < op->n_in; j++)
                    if (sh->unit_of[rd[j]] != REMAT_NONE)
                        wait_for(out, gathered[sh->unit_of[rd[j]]], &start, &pred);
                if (in.kind == REMAT_I_BWD) {
                    rd = remat_op_saves(g, op);
                    for (uint32_t j = 0; j < op->n_save; j++)
                        if (sh->unit_of[rd[j]] != REMAT_NONE)
                            wait_for(out, gathered[sh->unit_of[rd[j]]], &start, &pred);
                }
            }
            if (in.kind == REMAT_I_OPT) {
                wait_for(out, last_reduce, &start, &pred);
                dur = t_opt;
                out->optimizer_time += dur;
                opt = i;
            } else if (in.kind == REMAT_I_BWD) {
                dur = t->bwd[in.arg];
                out->backward_time += dur;
            } else {
                dur = t->fwd[in.arg];
                if (in.kind == REMAT_I_FWD)
                    out->forward_time += dur;
                else
                    out->recompute_time += dur;
            }
            out->stream[i] = REMAT_STREAM_COMPUTE;
            compute_free = start + dur;
            out->compute_time += dur;
            last_compute = i;
        } else if (is_collective(in.kind)) {
            if (!sh) {
                st = remat_err_set(err, REMAT_EINVAL,
                                   "timeline: instruction %zu is a collective and the replay has no sharding", i);
                break;
            }
            uint64_t bytes;
            remat_collective kind;
            if (in.kind == REMAT_I_ALLGATHER) {
                if (in.arg >= g->n_ops) {
                    st = remat_err_set(err, REMAT_EINVAL, "timeline: instruction %zu names op %u", i, in.arg);
                    break;
                }
                bytes = sh->unit_elements[in.arg] * sh->cfg.elem_bytes;
                kind = REMAT_COLL_ALLGATHER;
            } else {
                if (in.arg >= sh->n_buckets) {
                    st = remat_err_set(err, REMAT_EINVAL, "timeline: instruction %zu names bucket %u of %u", i,
                                       in.arg, sh->n_buckets);
                    break;
                }
                bytes = sh->bucket_elements[in.arg] * sh->cfg.elem_bytes;
                kind = in.kind == REMAT_I_ALLREDUCE ? REMAT_COLL_ALLREDUCE : REMAT_COLL_REDUCE_SCATTER;
            }
            start = comm_free;
            pred = last_comm;
            /* Issued where the schedule puts it: not before the compute
             * instruction before it starts (and then bound by what bound
             * that start, so the path does not count that compute). */
            if (last_compute != SIZE_MAX && out->start[last_compute] > start) {
                start = out->start[last_compute];
                pred = out->pred[last_compute];
            }
            if (kind != REMAT_COLL_ALLGATHER)
                wait_for(out, last_compute, &start, &pred); /* the BWD that completed the bucket */
            else
                wait_for(out, opt, &start, &pred); /* stages 1-2: the updated weights */
            dur = remat_time_collective(d, kind, bytes, sh->cfg.dp);
            out->stream[i] = REMAT_STREAM_COMM;
            comm_free = start + dur;
            out->comm_time += dur;
            last_comm = i;
            if (kind == REMAT_COLL_ALLGATHER)
                gathered[in.arg] = i;
            else
                last_reduce = i;
        } else {
            /* FREE, RELEASE: bookkeeping, no time. */
            start = last_compute != SIZE_MAX ? out->end[last_compute] : 0;
            pred = last_compute;
            out->stream[i] = REMAT_STREAM_NONE;
        }
        out->start[i] = start;
        out->end[i] = start + dur;
        out->pred[i] = pred;
    }
    remat__free(gathered);
    remat__free(tc);
    remat__free(ready);
    remat__free(gready);
    if (st != REMAT_OK) {
        remat_timeline_destroy(out);
        return st;
    }
    size_t last = SIZE_MAX;
    for (size_t i = 0; i < n; i++)
        if (out->stream[i] != REMAT_STREAM_NONE && (last == SIZE_MAX || out->end[i] >= out->end[last]))
            last = i;
    out->step_time = last == SIZE_MAX ? 0 : out->end[last];
    out->exposed_comm = out->step_time > out->compute_time ? out->step_time - out->compute_time : 0;
    size_t k = 0;
    for (size_t i = last; i != SIZE_MAX; i = out->pred[i])
        out->crit[k++] = i;
    for (size_t i = 0; i < k / 2; i++) {
        size_t x = out->crit[i];
        out->crit[i] = out->crit[k - 1 - i];
        out->crit[k - 1 - i] = x;
    }
    out->n_crit = k;
    for (size_t i = 0; i < k; i++) {
        double dur = out->end[out->crit[i]] - out->start[out->crit[i]];
        if (out->stream[out->crit[i]] == REMAT_STREAM_COMPUTE)
            out->crit_compute += dur;
        else
            out->crit_comm += dur;
    }
    return REMAT_OK;
}

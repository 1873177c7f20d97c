/*
 * policy.c - the default policy: a keep set becomes a schedule.
 *
 * Forward: every op once, in forward order; a tensor that is not kept (or
 * that nothing in backward needs) is freed right after its last forward use
 * (graph outputs at the end of forward).
 *
 * Backward: before each backward step, every saved tensor that is not
 * resident is rebuilt by recomputing its missing ancestors, in forward
 * order, from what is resident (builder.c). Ancestors rebuilt only as
 * stepping stones are freed right after their last read in that chain; a
 * rebuilt tensor that later backward steps save stays until the last of them.
 *
 * How long a kept tensor stays: until its last backward need, which is the
 * later of its last backward use and the last need of any tensor that is
 * recomputed from it (need_end below). Without the second term a kept
 * segment boundary (Chen's sqrt(n)) would be freed before the segment that
 * is replayed from it. Outputs of ops that are not recomputable are always
 * kept.
 */
#include "builder.h"
#include "../util/util_internal.h"

#include <string.h>

static void compute_need_end(const remat_analysis *a, const uint8_t *ekeep, uint32_t *need_end)
{
    const remat_graph *g = a->g;
    for (uint32_t i = g->n_ops; i-- > 0;) {
        const remat_op *op = &g->ops[a->order[i]];
        const uint32_t *out = remat_op_outputs(g, op);
        for (uint32_t j = 0; j < op->n_out; j++) {
            uint32_t t = out[j], ne = a->life[t].last_bwd_use;
            for (uint32_t c = a->cons_off[t]; c < a->cons_off[t + 1]; c++) {
                const remat_op *cop = &g->ops[a->cons[c]];
                if (!cop->recomputable)
                    continue;
                const uint32_t *cout = remat_op_outputs(g, cop);
                for (uint32_t m = 0; m < cop->n_out; m++)
                    if (!ekeep[cout[m]])
                        ne = remat__later_step(ne, need_end[cout[m]]);
            }
            need_end[t] = ne;
        }
    }
}

/* The step after which the policy frees activation t. */
static uint32_t free_step(const remat_analysis *a, const uint8_t *ekeep, const uint32_t *need_end, uint32_t t)
{
    if (ekeep[t] && need_end[t] != REMAT_NONE)
        return need_end[t];
    return a->is_output[t] ? a->g->n_ops - 1 : remat__later_step(a->life[t].birth, a->life[t].last_fwd_use);
}

static remat_status run(remat_builder *B, const uint8_t *ekeep, uint32_t *need_end, uint32_t *off, uint32_t *list)
{
    const remat_analysis *a = B->a;
    const remat_graph *g = B->g;
    remat_status st;
    compute_need_end(a, ekeep, need_end);
    /* Bucket every activation by the step after which it is freed. */
    memset(off, 0, ((size_t)a->n_steps + 1) * sizeof *off);
    for (uint32_t t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].kind == REMAT_TENSOR_ACTIVATION)
            off[free_step(a, ekeep, need_end, t) + 1]++;
    for (uint32_t s = 0; s < a->n_steps; s++)
        off[s + 1] += off[s];
    for (uint32_t t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].kind == REMAT_TENSOR_ACTIVATION)
            list[off[free_step(a, ekeep, need_end, t)]++] = t;
    /* The fill advanced each bucket's start to the next one's: shift back. */
    for (uint32_t s = a->n_steps; s > 0; s--)
        off[s] = off[s - 1];
    off[0] = 0;
    for (uint32_t t = 0; t < g->n_tensors; t++)
        B->pin[t] = g->tensors[t].kind == REMAT_TENSOR_ACTIVATION && ekeep[t] && need_end[t] != REMAT_NONE;
    for (uint32_t i = 0; i < g->n_ops; i++) {
        if ((st = remat__builder_forward(B, a->order[i])) != REMAT_OK)
            return st;
        for (uint32_t j = off[i]; j < off[i + 1]; j++)
            if ((st = remat__builder_free(B, list[j])) != REMAT_OK)
                return st;
    }
    for (uint32_t j = 0; j < a->n_bwd; j++) {
        uint32_t s = g->n_ops + j;
        if ((st = remat__builder_backward(B, a->bwd_order[j])) != REMAT_OK)
            return st;
        for (uint32_t i = off[s]; i < off[s + 1]; i++) {
            B->pin[list[i]] = 0;
            if ((st = remat__builder_free(B, list[i])) != REMAT_OK)
                return st;
        }
    }
    return remat__builder_opt(B);
}

remat_status remat_schedule_from_keep(const remat_analysis *a, const uint8_t *keep, remat_schedule *out,
                                      remat_err *err)
{
    const remat_graph *g = a->g;
    size_t nt = g->n_tensors ? g->n_tensors : 1;
    remat_builder B;
    remat_status st = remat__builder_init(&B, a, out, err);
    if (st != REMAT_OK)
        return st;
    uint8_t *ekeep = remat__calloc(nt, 1);
    uint32_t *need_end = remat__array(nt, sizeof *need_end);
    uint32_t *off = remat__array((size_t)a->n_steps + 1, sizeof *off);
    uint32_t *list = remat__array(nt, sizeof *list);
    if (!ekeep || !need_end || !off || !list) {
        st = remat_err_set(err, REMAT_ENOMEM, "out of memory building the schedule");
    } else {
        for (uint32_t t = 0; t < g->n_tensors; t++) {
            const remat_tensor *T = &g->tensors[t];
            ekeep[t] = T->kind == REMAT_TENSOR_ACTIVATION &&
                       (!keep || keep[t] || !g->ops[T->producer].recomputable);
        }
        st = run(&B, ekeep, need_end, off, list);
    }
    remat__free(ekeep);
    remat__free(need_end);
    remat__free(off);
    remat__free(list);
    remat__builder_destroy(&B);
    return st;
}

remat_status remat_schedule_store_all(const remat_analysis *a, remat_schedule *out, remat_err *err)
{
    return remat_schedule_from_keep(a, NULL, out, err);
}

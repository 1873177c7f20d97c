/*
 * builder.c - schedule-building primitives (see builder.h).
 */
#include "builder.h"
#include "../util/util_internal.h"

#include <string.h>

static remat_status emit(remat_builder *b, remat_instr_kind k, uint32_t arg)
{
    if (remat_schedule_push(b->out, k, arg) != REMAT_OK)
        return remat_err_set(b->err, REMAT_ENOMEM, "out of memory building the schedule");
    return REMAT_OK;
}

remat_status remat__builder_init(remat_builder *b, const remat_analysis *a, remat_schedule *out, remat_err *err)
{
    const remat_graph *g = a->g;
    memset(b, 0, sizeof *b);
    b->a = a;
    b->g = g;
    b->out = out;
    b->err = err;
    size_t nt = g->n_tensors ? g->n_tensors : 1, no = g->n_ops ? g->n_ops : 1;
    /* A rebuild pushes each missing save once plus each chain op's inputs:
     * at most saves + refs entries. */
    size_t stack_n = (size_t)g->n_refs + nt + 1;
    b->res = remat__calloc(nt, 1);
    b->fwd_done = remat__calloc(no, 1);
    b->pin = remat__calloc(nt, 1);
    b->rem = remat__array(nt, sizeof *b->rem);
    b->in_chain = remat__array(no, sizeof *b->in_chain);
    b->last_read = remat__array(nt, sizeof *b->last_read);
    b->stack = remat__array(stack_n, sizeof *b->stack);
    b->chain = remat__array(no, sizeof *b->chain);
    b->live = remat__calloc(no, 1);
    b->res0 = remat__calloc(nt, 1);
    b->rem0 = remat__array(nt, sizeof *b->rem0);
    if (!b->res || !b->fwd_done || !b->pin || !b->rem || !b->in_chain || !b->last_read || !b->stack || !b->chain ||
        !b->live || !b->res0 || !b->rem0) {
        remat__builder_destroy(b);
        return remat_err_set(err, REMAT_ENOMEM, "out of memory building the schedule");
    }
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        b->res0[t] = b->res[t] = g->tensors[t].kind != REMAT_TENSOR_ACTIVATION;
        b->rem0[t] = b->rem[t] = a->saver_off[t + 1] - a->saver_off[t];
    }
    /* An op is live when something it makes is a graph output, is saved by
     * a backward step or is read by a live op: one sweep against forward
     * order, with res standing in for "needed" (it is reset below). */
    for (uint32_t i = g->n_ops; i-- > 0;) {
        uint32_t k = a->order[i];
        const remat_op *o = &g->ops[k];
        const uint32_t *in = remat_op_inputs(g, o), *made = remat_op_outputs(g, o);
        for (uint32_t q = 0; q < o->n_out && !b->live[k]; q++)
            b->live[k] = a->is_output[made[q]] || b->rem[made[q]] > 0 || b->res[made[q]] == 2;
        if (b->live[k])
            for (uint32_t q = 0; q < o->n_in; q++)
                if (g->tensors[in[q]].kind == REMAT_TENSOR_ACTIVATION)
                    b->res[in[q]] = 2;
    }
    remat__builder_reset(b, out);
    return REMAT_OK;
}

void remat__builder_reset(remat_builder *b, remat_schedule *out)
{
    const remat_graph *g = b->g;
    b->out = out;
    b->shadow = NULL;
    b->ndiff = 0;
    memcpy(b->res, b->res0, g->n_tensors ? g->n_tensors : 1);
    memcpy(b->rem, b->rem0, (g->n_tensors ? g->n_tensors : 1) * sizeof *b->rem);
    memset(b->fwd_done, 0, g->n_ops ? g->n_ops : 1);
    memset(b->pin, 0, g->n_tensors ? g->n_tensors : 1);
}

void remat__builder_destroy(remat_builder *b)
{
    remat__free(b->res);
    remat__free(b->fwd_done);
    remat__free(b->pin);
    remat__free(b->rem);
    remat__free(b->in_chain);
    remat__free(b->last_read);
    remat__free(b->stack);
    remat__free(b->chain);
    remat__free(b->live);
    remat__free(b->res0);
    remat__free(b->rem0);
    b->res = b->fwd_done = b->pin = b->live = b->res0 = NULL;
    b->rem = b->in_chain = b->last_read = b->stack = b->chain = b->rem0 = NULL;
}

remat_status remat__builder_forward(remat_builder *b, uint32_t op)
{
    if (b->fwd_done[op] && !b->live[op])
        return REMAT_OK;
    remat_status st = emit(b, b->fwd_done[op] ? REMAT_I_RECOMPUTE : REMAT_I_FWD, op);
    if (st != REMAT_OK)
        return st;
    b->fwd_done[op] = 1;
    const remat_op *o = &b->g->ops[op];
    const uint32_t *out = remat_op_outputs(b->g, o);
    for (uint32_t i = 0; i < o->n_out; i++)
        remat__builder_set_res(b, out[i], 1);
    return REMAT_OK;
}

remat_status remat__builder_free(remat_builder *b, uint32_t t)
{
    if (!b->res[t] || b->g->tensors[t].kind != REMAT_TENSOR_ACTIVATION)
        return REMAT_OK;
    remat__builder_set_res(b, t, 0);
    return emit(b, REMAT_I_FREE, t);
}

/* Sorts a chain by forward position. Chains are usually short (a segment,
 * a block), where insertion sort is fastest; but the walk collects them in
 * reverse order, insertion sort's worst case, and keeping 1% of a 10^6-op
 * chain makes one chain of 990000 ops: that took minutes. Long chains are
 * heap-sorted (O(n log n), in place: qsort has no context argument). */
static void sift_down(const remat_analysis *a, uint32_t *v, uint32_t root, uint32_t n)
{
    uint32_t x = v[root];
    for (;;) {
        uint32_t c = 2 * root + 1;
        if (c >= n)
            break;
        if (c + 1 < n && a->pos[v[c + 1]] > a->pos[v[c]])
            c++;
        if (a->pos[v[c]] <= a->pos[x])
            break;
        v[root] = v[c];
        root = c;
    }
    v[root] = x;
}

static void sort_by_pos(const remat_analysis *a, uint32_t *v, uint32_t n)
{
    if (n <= 32) {
        for (uint32_t i = 1; i < n; i++) {
            uint32_t x = v[i], j = i;
            while (j > 0 && a->pos[v[j - 1]] > a->pos[x]) {
                v[j] = v[j - 1];
                j--;
            }
            v[j] = x;
        }
        return;
    }
    for (uint32_t i = n / 2; i-- > 0;)
        sift_down(a, v, i, n);
    for (uint32_t end = n; end-- > 1;) {
        uint32_t t = v[0];
        v[0] = v[end];
        v[end] = t;
        sift_down(a, v, 0, end);
    }
}

remat_status remat__builder_ensure(remat_builder *b, const uint32_t *ts, uint32_t n_ts, const char *why_op)
{
    const remat_analysis *a = b->a;
    const remat_graph *g = b->g;
    if (++b->stamp == 0) { /* wrapped: no op may carry a current stamp */
        memset(b->in_chain, 0, (g->n_ops ? g->n_ops : 1) * sizeof *b->in_chain);
        b->stamp = 1;
    }
    uint32_t sp = 0, n = 0, stamp = b->stamp;
    for (uint32_t i = 0; i < n_ts; i++)
        if (!b->res[ts[i]])
            b->stack[sp++] = ts[i];
    if (sp == 0)
        return REMAT_OK;
    while (sp > 0) {
        uint32_t t = b->stack[--sp], p = g->tensors[t].producer;
        if (p == REMAT_NONE || b->in_chain[p] == stamp)
            continue;
        if (!g->ops[p].recomputable)
            return remat_err_set(b->err, REMAT_EINFEASIBLE,
                                 "tensor '%s' is needed by the backward step of '%s' but was freed, and its op '%s' "
                                 "is not recomputable",
                                 g->tensors[t].id, why_op ? why_op : "?", g->ops[p].id);
        b->in_chain[p] = stamp;
        b->chain[n++] = p;
        const uint32_t *in = remat_op_inputs(g, &g->ops[p]);
        for (uint32_t i = 0; i < g->ops[p].n_in; i++)
            if (!b->res[in[i]] && b->in_chain[g->tensors[in[i]].producer] != stamp)
                b->stack[sp++] = in[i];
    }
    sort_by_pos(a, b->chain, n);
    /* Targets are "read" after the whole chain; mark them with n. */
    for (uint32_t q = 0; q < n; q++) {
        const remat_op *op = &g->ops[b->chain[q]];
        const uint32_t *out = remat_op_outputs(g, op);
        for (uint32_t i = 0; i < op->n_out; i++)
            b->last_read[out[i]] = REMAT_NONE;
    }
    for (uint32_t q = 0; q < n; q++) {
        const remat_op *op = &g->ops[b->chain[q]];
        const uint32_t *in = remat_op_inputs(g, op);
        for (uint32_t i = 0; i < op->n_in; i++)
            b->last_read[in[i]] = q;
    }
    for (uint32_t i = 0; i < n_ts; i++)
        b->last_read[ts[i]] = n;
    for (uint32_t q = 0; q < n; q++) {
        const remat_op *op = &g->ops[b->chain[q]];
        remat_status st = remat__builder_forward(b, b->chain[q]);
        if (st != REMAT_OK)
            return st;
        const uint32_t *in = remat_op_inputs(g, op), *out = remat_op_outputs(g, op);
        for (uint32_t i = 0; i < op->n_in + op->n_out; i++) {
            uint32_t t = i < op->n_in ? in[i] : out[i - op->n_in];
            uint32_t pr = g->tensors[t].producer;
            if (pr == REMAT_NONE || b->in_chain[pr] != stamp || !b->res[t] || b->pin[t] || b->rem[t] > 0)
                continue;
            uint32_t lr = b->last_read[t];
            if (lr != REMAT_NONE && lr > q)
                continue;
            if ((st = remat__builder_free(b, t)) != REMAT_OK)
                return st;
        }
    }
    return REMAT_OK;
}

remat_status remat__builder_backward(remat_builder *b, uint32_t op)
{
    const remat_graph *g = b->g;
    const remat_op *o = &g->ops[op];
    const uint32_t *sv = remat_op_saves(g, o);
    remat_status st = remat__builder_ensure(b, sv, o->n_save, o->id);
    if (st != REMAT_OK || (st = emit(b, REMAT_I_BWD, op)) != REMAT_OK)
        return st;
    for (uint32_t i = 0; i < o->n_save; i++)
        b->rem[sv[i]]--;
    for (uint32_t i = 0; i < o->n_save; i++) {
        uint32_t t = sv[i];
        if (b->rem[t] == 0 && !b->pin[t] && (st = remat__builder_free(b, t)) != REMAT_OK)
            return st;
    }
    return REMAT_OK;
}

remat_status remat__builder_opt(remat_builder *b)
{
    return emit(b, REMAT_I_OPT, 0);
}

/*
 * analyze.c - forward order, backward derivation and lifetimes.
 *
 * The store-all step is derived once here and everything downstream (the
 * default policy, the executor, the tracer) reads these arrays. Definitions
 * follow graphs/README.md, "Execution model":
 *   - a gradient flows into tensor t iff t needs one (a trainable param, an
 *     input with requires_grad, or an activation computed from such a tensor)
 *     and t reaches an output;
 *   - op has a backward step iff a gradient flows into one of its outputs;
 *   - free(t) is the step after which t is dead: its last backward use if
 *     any, else (for graph outputs) the last forward step, else its last
 *     forward use, else its birth. A base's free also covers its views,
 *     because a view keeps the base's storage alive.
 */
#include "igraph_adapter.h"
#include "../util/util_internal.h"

#include <stdio.h>
#include <string.h>

static int file_order_is_topological(const remat_graph *g)
{
    for (uint32_t k = 0; k < g->n_ops; k++) {
        const uint32_t *in = remat_op_inputs(g, &g->ops[k]);
        for (uint32_t i = 0; i < g->ops[k].n_in; i++) {
            uint32_t p = g->tensors[in[i]].producer;
            if (p != REMAT_NONE && p >= k)
                return 0;
        }
    }
    return 1;
}

/* CSR of "ops that read t" (each op once per tensor), ops listed in the
 * given op sequence's order. `which` selects inputs (0) or saves (1). */
static remat_status build_csr(const remat_graph *g, const uint32_t *seq, uint32_t n_seq, int which,
                              uint32_t **off_out, uint32_t **list_out)
{
    uint32_t *off = remat__array((size_t)g->n_tensors + 1, sizeof *off);
    uint32_t *last = remat__array(g->n_tensors ? g->n_tensors : 1, sizeof *last);
    if (!off || !last)
        goto nomem;
    for (uint32_t t = 0; t < g->n_tensors; t++)
        last[t] = REMAT_NONE;
    for (uint32_t s = 0; s < n_seq; s++) {
        const remat_op *op = &g->ops[seq[s]];
        const uint32_t *r = which ? remat_op_saves(g, op) : remat_op_inputs(g, op);
        uint32_t n = which ? op->n_save : op->n_in;
        for (uint32_t i = 0; i < n; i++)
            if (last[r[i]] != s) {
                last[r[i]] = s;
                off[r[i] + 1]++;
            }
    }
    for (uint32_t t = 0; t < g->n_tensors; t++)
        off[t + 1] += off[t];
    uint32_t *list = remat__array(off[g->n_tensors] ? off[g->n_tensors] : 1, sizeof *list);
    if (!list)
        goto nomem;
    for (uint32_t t = 0; t < g->n_tensors; t++)
        last[t] = REMAT_NONE;
    /* Fill using `last` as the per-tensor cursor offset after a reset. */
    uint32_t *cur = remat__array(g->n_tensors ? g->n_tensors : 1, sizeof *cur);
    if (!cur) {
        remat__free(list);
        goto nomem;
    }
    memcpy(cur, off, g->n_tensors * sizeof *cur);
    for (uint32_t s = 0; s < n_seq; s++) {
        const remat_op *op = &g->ops[seq[s]];
        const uint32_t *r = which ? remat_op_saves(g, op) : remat_op_inputs(g, op);
        uint32_t n = which ? op->n_save : op->n_in;
        for (uint32_t i = 0; i < n; i++)
            if (last[r[i]] != s) {
                last[r[i]] = s;
                list[cur[r[i]]++] = seq[s];
            }
    }
    remat__free(cur);
    remat__free(last);
    *off_out = off;
    *list_out = list;
    return REMAT_OK;
nomem:
    remat__free(off);
    remat__free(last);
    return REMAT_ENOMEM;
}

static void compute_lifetimes(remat_analysis *a)
{
    const remat_graph *g = a->g;
    const uint32_t last_fwd_step = g->n_ops - 1, opt_step = a->n_steps - 1;
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        const remat_tensor *T = &g->tensors[t];
        remat_lifetime *L = &a->life[t];
        L->birth = L->last_fwd_use = L->last_bwd_use = L->free = REMAT_NONE;
        L->grad_birth = L->grad_free = REMAT_NONE;
        for (uint32_t j = a->cons_off[t]; j < a->cons_off[t + 1]; j++)
            L->last_fwd_use = a->pos[a->cons[j]]; /* consumers are in forward order */
        if (a->saver_off[t + 1] > a->saver_off[t])
            L->last_bwd_use = a->bwd_step[a->savers[a->saver_off[t + 1] - 1]];
        if (T->producer != REMAT_NONE) {
            L->birth = a->pos[T->producer];
            if (L->last_bwd_use != REMAT_NONE)
                L->free = L->last_bwd_use;
            else if (a->is_output[t])
                L->free = last_fwd_step;
            else if (L->last_fwd_use != REMAT_NONE)
                L->free = L->last_fwd_use;
            else
                L->free = L->birth;
        }
        if (a->grad_flows[t]) {
            uint32_t gb = a->is_output[t] && a->n_bwd ? g->n_ops : REMAT_NONE;
            for (uint32_t j = a->cons_off[t]; j < a->cons_off[t + 1]; j++) {
                uint32_t s = a->bwd_step[a->cons[j]];
                if (s != REMAT_NONE && (gb == REMAT_NONE || s < gb))
                    gb = s;
            }
            /* A gradient that no step writes does not exist. That happens
             * only to a leaf that is a graph output in a step with no
             * backward steps at all (no seed step, no consumer's backward). */
            L->grad_birth = gb;
            if (gb != REMAT_NONE)
                L->grad_free = T->producer != REMAT_NONE ? a->bwd_step[T->producer] : opt_step;
        }
    }
    /* A view keeps its root's storage alive: the root dies with the last of
     * its views. Roots that are inputs or params are resident throughout. */
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        uint32_t r = g->tensors[t].storage;
        if (r == t || a->life[r].free == REMAT_NONE)
            continue;
        if (a->life[t].free > a->life[r].free)
            a->life[r].free = a->life[t].free;
    }
}

remat_status remat_analyze(const remat_graph *g, remat_analysis **out, remat_err *err)
{
    *out = NULL;
    remat_analysis *a = remat__calloc(1, sizeof *a);
    uint8_t *needs = NULL, *reach = NULL, *treach = NULL;
    remat_status st = REMAT_ENOMEM;
    if (!a)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory analyzing the graph");
    a->g = g;
    uint32_t n = g->n_ops, nt = g->n_tensors;
    a->order = remat__array(n, sizeof *a->order);
    a->pos = remat__array(n, sizeof *a->pos);
    a->bwd_step = remat__array(n, sizeof *a->bwd_step);
    a->bwd_order = remat__array(n, sizeof *a->bwd_order);
    a->grad_flows = remat__calloc(nt ? nt : 1, 1);
    a->is_output = remat__calloc(nt ? nt : 1, 1);
    a->life = remat__array(nt ? nt : 1, sizeof *a->life);
    needs = remat__calloc(nt ? nt : 1, 1);
    treach = remat__calloc(nt ? nt : 1, 1);
    reach = remat__calloc(n ? n : 1, 1);
    if (!a->order || !a->pos || !a->bwd_step || !a->bwd_order || !a->grad_flows || !a->is_output || !a->life ||
        !needs || !reach || !treach) {
        remat_err_set(err, REMAT_ENOMEM, "out of memory analyzing the graph");
        goto fail;
    }
    if (file_order_is_topological(g)) {
        for (uint32_t i = 0; i < n; i++)
            a->order[i] = i;
    } else if ((st = remat__ig_topo_order(g, a->order, err)) != REMAT_OK) {
        goto fail;
    }
    for (uint32_t i = 0; i < n; i++)
        a->pos[a->order[i]] = i;
    for (uint32_t i = 0; i < g->n_outputs; i++)
        a->is_output[g->outputs[i]] = 1;

    /* needs-gradient, forward: leaves by declaration, activations from any
     * input that needs one. */
    for (uint32_t t = 0; t < nt; t++) {
        const remat_tensor *T = &g->tensors[t];
        needs[t] = (T->kind == REMAT_TENSOR_PARAM && !T->frozen) || (T->kind == REMAT_TENSOR_INPUT && T->requires_grad);
    }
    for (uint32_t i = 0; i < n; i++) {
        const remat_op *op = &g->ops[a->order[i]];
        const uint32_t *in = remat_op_inputs(g, op), *o = remat_op_outputs(g, op);
        uint8_t any = 0;
        for (uint32_t j = 0; j < op->n_in; j++)
            any |= needs[in[j]];
        for (uint32_t j = 0; j < op->n_out; j++)
            needs[o[j]] = any;
    }
    if ((st = remat__ig_reaches_outputs(g, reach, err)) != REMAT_OK)
        goto fail;
    /* Tensor-level reach: an output, or read by an op that reaches one. */
    for (uint32_t t = 0; t < nt; t++)
        treach[t] = a->is_output[t];
    for (uint32_t k = 0; k < n; k++) {
        if (!reach[k])
            continue;
        const uint32_t *in = remat_op_inputs(g, &g->ops[k]);
        for (uint32_t j = 0; j < g->ops[k].n_in; j++)
            treach[in[j]] = 1;
    }
    for (uint32_t t = 0; t < nt; t++)
        a->grad_flows[t] = needs[t] && treach[t];

    a->n_bwd = 0;
    for (uint32_t i = n; i-- > 0;) {
        uint32_t k = a->order[i];
        const remat_op *op = &g->ops[k];
        const uint32_t *o = remat_op_outputs(g, op);
        uint8_t any = 0;
        for (uint32_t j = 0; j < op->n_out; j++)
            any |= a->grad_flows[o[j]];
        a->bwd_step[k] = REMAT_NONE;
        if (any) {
            a->bwd_step[k] = n + a->n_bwd;
            a->bwd_order[a->n_bwd++] = k;
        }
    }
    a->n_steps = n + a->n_bwd + 1;
    if ((st = build_csr(g, a->order, n, 0, &a->cons_off, &a->cons)) != REMAT_OK ||
        (st = build_csr(g, a->bwd_order, a->n_bwd, 1, &a->saver_off, &a->savers)) != REMAT_OK) {
        remat_err_set(err, REMAT_ENOMEM, "out of memory analyzing the graph");
        goto fail;
    }
    compute_lifetimes(a);
    remat__free(needs);
    remat__free(reach);
    remat__free(treach);
    *out = a;
    return REMAT_OK;
fail:
    remat__free(needs);
    remat__free(reach);
    remat__free(treach);
    remat_analysis_destroy(a);
    return err && err->code != REMAT_OK ? err->code : st;
}

void remat_analysis_destroy(remat_analysis *a)
{
    if (!a)
        return;
    remat__free(a->order);
    remat__free(a->pos);
    remat__free(a->bwd_order);
    remat__free(a->bwd_step);
    remat__free(a->grad_flows);
    remat__free(a->is_output);
    remat__free(a->cons_off);
    remat__free(a->cons);
    remat__free(a->saver_off);
    remat__free(a->savers);
    remat__free(a->life);
    remat__free(a);
}

const char *remat_step_name(const remat_analysis *a, uint32_t s, char *buf, size_t cap)
{
    const remat_graph *g = a->g;
    if (s == REMAT_NONE)
        snprintf(buf, cap, "none");
    else if (s < g->n_ops)
        snprintf(buf, cap, "fwd:%s", g->ops[a->order[s]].id);
    else if (s < g->n_ops + a->n_bwd)
        snprintf(buf, cap, "bwd:%s", g->ops[a->bwd_order[s - g->n_ops]].id);
    else
        snprintf(buf, cap, "optimizer");
    return buf;
}

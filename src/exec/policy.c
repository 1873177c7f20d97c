/*
 * policy.c - the default policy: a keep set becomes a schedule.
 *
 * Forward: every op once, in forward order; a tensor that is not kept (or
 * that nothing in backward needs) is freed right after its last forward use
 * (graph outputs at the end of forward).
 *
 * Backward: before each backward step, every saved tensor that is not
 * resident is rebuilt by recomputing its missing ancestors, in forward
 * order, from what is resident. Ancestors rebuilt only as stepping stones
 * are freed right after their last read in that chain; a rebuilt tensor that
 * later backward steps save stays until the last of them.
 *
 * How long a kept tensor stays: until its last backward need, which is the
 * later of its last backward use and the last need of any tensor that is
 * recomputed from it (need_end below). Without the second term a kept
 * segment boundary (Chen's sqrt(n)) would be freed before the segment that
 * is replayed from it. Outputs of ops that are not recomputable are always
 * kept.
 */
#include "remat/exec.h"
#include "../util/util_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const remat_analysis *a;
    const remat_graph *g;
    remat_schedule *out;
    remat_err *err;
    uint8_t *ekeep;     /* effective keep */
    uint8_t *res;       /* residency as the schedule so far leaves it */
    uint32_t *need_end; /* kept tensors: step after which nothing needs them */
    uint32_t *rem;      /* backward steps still to save the tensor */
    uint32_t *in_chain; /* op -> stamp of the chain that recomputes it */
    uint32_t *last_read;/* tensor -> position in the chain of its last reader */
    uint32_t *stack, *chain;
    uint32_t *bucket_off, *bucket; /* kept tensors by need_end step */
} policy;

static uint32_t later(uint32_t x, uint32_t y)
{
    if (x == REMAT_NONE)
        return y;
    if (y == REMAT_NONE)
        return x;
    return x > y ? x : y;
}

static remat_status emit(policy *P, remat_instr_kind k, uint32_t arg)
{
    if (remat_schedule_push(P->out, k, arg) != REMAT_OK)
        return remat_err_set(P->err, REMAT_ENOMEM, "out of memory building the schedule");
    return REMAT_OK;
}

static remat_status emit_free(policy *P, uint32_t t)
{
    P->res[t] = 0;
    return emit(P, REMAT_I_FREE, t);
}

static void compute_need_end(policy *P)
{
    const remat_analysis *a = P->a;
    const remat_graph *g = P->g;
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
                    if (!P->ekeep[cout[m]])
                        ne = later(ne, P->need_end[cout[m]]);
            }
            P->need_end[t] = ne;
        }
    }
}

/* Chains are short (a segment, a few ops); insertion sort by forward
 * position keeps the policy free of qsort's missing context argument. */
static void sort_by_pos(const remat_analysis *a, uint32_t *v, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++) {
        uint32_t x = v[i], j = i;
        while (j > 0 && a->pos[v[j - 1]] > a->pos[x]) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
}

/* Rebuilds every saved tensor of backward step j (op b) that is missing. */
static remat_status rebuild(policy *P, uint32_t b, uint32_t stamp)
{
    const remat_analysis *a = P->a;
    const remat_graph *g = P->g;
    const remat_op *bop = &g->ops[b];
    const uint32_t *sv = remat_op_saves(g, bop);
    uint32_t sp = 0, n = 0;
    for (uint32_t i = 0; i < bop->n_save; i++)
        if (!P->res[sv[i]])
            P->stack[sp++] = sv[i];
    if (sp == 0)
        return REMAT_OK;
    while (sp > 0) {
        uint32_t t = P->stack[--sp], p = g->tensors[t].producer;
        if (p == REMAT_NONE || P->in_chain[p] == stamp)
            continue;
        if (!g->ops[p].recomputable)
            return remat_err_set(P->err, REMAT_EINFEASIBLE,
                                 "tensor '%s' is needed by the backward step of '%s' but was freed, and its op "
                                 "'%s' is not recomputable",
                                 g->tensors[t].id, bop->id, g->ops[p].id);
        P->in_chain[p] = stamp;
        P->chain[n++] = p;
        const uint32_t *in = remat_op_inputs(g, &g->ops[p]);
        for (uint32_t i = 0; i < g->ops[p].n_in; i++)
            if (!P->res[in[i]] && P->in_chain[g->tensors[in[i]].producer] != stamp)
                P->stack[sp++] = in[i];
    }
    sort_by_pos(a, P->chain, n);
    /* Last reader inside the chain, to free stepping stones early. */
    for (uint32_t q = 0; q < n; q++) {
        const remat_op *op = &g->ops[P->chain[q]];
        const uint32_t *in = remat_op_inputs(g, op);
        for (uint32_t i = 0; i < op->n_in; i++)
            P->last_read[in[i]] = q;
        const uint32_t *out = remat_op_outputs(g, op);
        for (uint32_t i = 0; i < op->n_out; i++)
            P->last_read[out[i]] = REMAT_NONE;
    }
    for (uint32_t q = 0; q < n; q++) {
        const remat_op *op = &g->ops[P->chain[q]];
        const uint32_t *in = remat_op_inputs(g, op);
        const uint32_t *out = remat_op_outputs(g, op);
        remat_status st = emit(P, REMAT_I_RECOMPUTE, P->chain[q]);
        if (st != REMAT_OK)
            return st;
        for (uint32_t i = 0; i < op->n_out; i++)
            P->res[out[i]] = 1;
        /* Free what this chain rebuilt and no longer reads, unless this or
         * a later backward step saves it. */
        for (uint32_t i = 0; i < op->n_in + op->n_out; i++) {
            uint32_t t = i < op->n_in ? in[i] : out[i - op->n_in];
            uint32_t pr = g->tensors[t].producer;
            if (pr == REMAT_NONE || P->in_chain[pr] != stamp || !P->res[t] || P->ekeep[t] || P->rem[t] > 0)
                continue;
            uint32_t lr = P->last_read[t];
            if (lr != REMAT_NONE && lr > q)
                continue;
            if ((st = emit_free(P, t)) != REMAT_OK)
                return st;
        }
    }
    return REMAT_OK;
}

static remat_status run(policy *P)
{
    const remat_analysis *a = P->a;
    const remat_graph *g = P->g;
    remat_status st;
    const uint32_t n = g->n_ops, last_fwd = n - 1;
    compute_need_end(P);
    /* Forward: bucket each tensor freed during forward by its step. */
    uint32_t *fwd_off = P->bucket_off, *fwd_list = P->bucket;
    memset(fwd_off, 0, ((size_t)a->n_steps + 1) * sizeof *fwd_off);
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        const remat_lifetime *L = &a->life[t];
        if (g->tensors[t].kind != REMAT_TENSOR_ACTIVATION)
            continue;
        uint32_t s;
        if (P->ekeep[t] && P->need_end[t] != REMAT_NONE)
            s = P->need_end[t]; /* freed in backward */
        else
            s = a->is_output[t] ? last_fwd : later(L->birth, L->last_fwd_use);
        fwd_off[s + 1]++;
    }
    for (uint32_t s = 0; s < a->n_steps; s++)
        fwd_off[s + 1] += fwd_off[s];
    {
        uint32_t *cur = P->stack; /* reused as per-step cursors (n_steps <= 2 * tensors bound below) */
        memcpy(cur, fwd_off, a->n_steps * sizeof *cur);
        for (uint32_t t = 0; t < g->n_tensors; t++) {
            if (g->tensors[t].kind != REMAT_TENSOR_ACTIVATION)
                continue;
            const remat_lifetime *L = &a->life[t];
            uint32_t s;
            if (P->ekeep[t] && P->need_end[t] != REMAT_NONE)
                s = P->need_end[t];
            else
                s = a->is_output[t] ? last_fwd : later(L->birth, L->last_fwd_use);
            fwd_list[cur[s]++] = t;
        }
    }
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        P->res[t] = g->tensors[t].kind != REMAT_TENSOR_ACTIVATION;
        P->rem[t] = a->saver_off[t + 1] - a->saver_off[t];
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t k = a->order[i];
        if ((st = emit(P, REMAT_I_FWD, k)) != REMAT_OK)
            return st;
        const uint32_t *out = remat_op_outputs(g, &g->ops[k]);
        for (uint32_t j = 0; j < g->ops[k].n_out; j++)
            P->res[out[j]] = 1;
        for (uint32_t j = fwd_off[i]; j < fwd_off[i + 1]; j++)
            if (P->res[fwd_list[j]] && (st = emit_free(P, fwd_list[j])) != REMAT_OK)
                return st;
    }
    for (uint32_t j = 0; j < a->n_bwd; j++) {
        uint32_t b = a->bwd_order[j], s = n + j;
        if ((st = rebuild(P, b, j + 1)) != REMAT_OK)
            return st;
        if ((st = emit(P, REMAT_I_BWD, b)) != REMAT_OK)
            return st;
        const remat_op *bop = &g->ops[b];
        const uint32_t *sv = remat_op_saves(g, bop);
        for (uint32_t i = 0; i < bop->n_save; i++)
            P->rem[sv[i]]--;
        for (uint32_t i = 0; i < bop->n_save; i++) {
            uint32_t t = sv[i];
            if (g->tensors[t].kind != REMAT_TENSOR_ACTIVATION || !P->res[t] || P->rem[t] > 0)
                continue;
            if (P->ekeep[t] && P->need_end[t] != REMAT_NONE && P->need_end[t] > s)
                continue;
            if ((st = emit_free(P, t)) != REMAT_OK)
                return st;
        }
        for (uint32_t i = fwd_off[s]; i < fwd_off[s + 1]; i++)
            if (P->res[fwd_list[i]] && (st = emit_free(P, fwd_list[i])) != REMAT_OK)
                return st;
    }
    return emit(P, REMAT_I_OPT, 0);
}

remat_status remat_schedule_from_keep(const remat_analysis *a, const uint8_t *keep, remat_schedule *out,
                                      remat_err *err)
{
    const remat_graph *g = a->g;
    policy P;
    memset(&P, 0, sizeof P);
    P.a = a;
    P.g = g;
    P.out = out;
    P.err = err;
    size_t nt = g->n_tensors ? g->n_tensors : 1, no = g->n_ops ? g->n_ops : 1;
    /* The stack holds at most one entry per tensor reference in a chain, and
     * doubles as the bucket cursor array (n_steps entries). */
    size_t stack_n = (size_t)g->n_refs + nt + a->n_steps + 1;
    P.ekeep = remat__calloc(nt, 1);
    P.res = remat__calloc(nt, 1);
    P.need_end = remat__array(nt, sizeof *P.need_end);
    P.rem = remat__array(nt, sizeof *P.rem);
    P.in_chain = remat__array(no, sizeof *P.in_chain);
    P.last_read = remat__array(nt, sizeof *P.last_read);
    P.stack = remat__array(stack_n, sizeof *P.stack);
    P.chain = remat__array(no, sizeof *P.chain);
    P.bucket_off = remat__array((size_t)a->n_steps + 1, sizeof *P.bucket_off);
    P.bucket = remat__array(nt, sizeof *P.bucket);
    remat_status st;
    if (!P.ekeep || !P.res || !P.need_end || !P.rem || !P.in_chain || !P.last_read || !P.stack || !P.chain ||
        !P.bucket_off || !P.bucket) {
        st = remat_err_set(err, REMAT_ENOMEM, "out of memory building the schedule");
    } else {
        for (uint32_t t = 0; t < g->n_tensors; t++) {
            const remat_tensor *T = &g->tensors[t];
            P.ekeep[t] = T->kind == REMAT_TENSOR_ACTIVATION &&
                         (!keep || keep[t] || !g->ops[T->producer].recomputable);
        }
        st = run(&P);
    }
    remat__free(P.ekeep);
    remat__free(P.res);
    remat__free(P.need_end);
    remat__free(P.rem);
    remat__free(P.in_chain);
    remat__free(P.last_read);
    remat__free(P.stack);
    remat__free(P.chain);
    remat__free(P.bucket_off);
    remat__free(P.bucket);
    return st;
}

remat_status remat_schedule_store_all(const remat_analysis *a, remat_schedule *out, remat_err *err)
{
    return remat_schedule_from_keep(a, NULL, out, err);
}

/*
 * mincut.c - the min-cut partitioner, as PyTorch's AOTAutograd does it.
 *
 * Save the set of tensors of least total bytes such that everything a
 * backward step reads can be recomputed from saved tensors and leaves,
 * without ever recomputing a costly op (matmul, convolution, attention by
 * default) or one that is not recomputable. As a flow network: each
 * activation t is an edge t_in -> t_out whose capacity is its bytes (cutting
 * it = saving t); t_out -> u_in is infinite when u is computed from t; leaves
 * hang off the source at no cost; whatever a backward step saves feeds the
 * sink; an op that must not be recomputed has its outputs' t_in tied to the
 * source. A minimum s-t cut (igraph's push-relabel maxflow) is then a
 * minimum-bytes saved set.
 *
 * The cut knows nothing of time, so it cannot express a budget: the plan is
 * replayed like any other and its peak reported as it is, feasible or not.
 */
#include "planner.h"
#include "../analyze/igraph_adapter.h"
#include "../util/util_internal.h"

#include <string.h>

static const char *const default_never[] = {"matmul", "mm", "bmm", "addmm", "baddbmm", "linear", "einsum",
                                            "conv", "conv1d", "conv2d", "conv3d", "convolution",
                                            "conv_transpose", "attention", "sdpa",
                                            "scaled_dot_product_attention", NULL};

/* Is op type `type` in the comma-separated list (or the default list)? */
static int never_recompute(const char *list, const char *type)
{
    if (!list) {
        for (const char *const *p = default_never; *p; p++)
            if (strcmp(*p, type) == 0)
                return 1;
        return 0;
    }
    size_t n = strlen(type);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, type, n) == 0)
            return 1;
        p += len + (e ? 1 : 0);
    }
    return 0;
}

remat_status remat__strategy_mincut(remat_planner *P, remat_plan *out)
{
    const remat_analysis *a = P->a;
    const remat_graph *g = a->g;
    const char *list = P->o->never_recompute;
    if (list && strcmp(list, "none") == 0)
        list = "";
    remat_status st = remat__plan_alloc_keep(P, out);
    if (st != REMAT_OK)
        return st;
    uint32_t nt = g->n_tensors, nv = 2 * nt + 2, src = 2 * nt, snk = 2 * nt + 1;
    size_t max_edges = (size_t)nt * 3 + (size_t)g->n_refs * 2 + 1;
    uint32_t *edges = remat__array(max_edges * 2, sizeof *edges);
    double *cap = remat__array(max_edges, sizeof *cap);
    uint8_t *side = remat__calloc(nv, 1);
    if (!edges || !cap || !side) {
        st = remat_err_set(P->err, REMAT_ENOMEM, "out of memory planning");
        goto out;
    }
    /* "Infinite": more than every finite edge together. */
    double inf = 1.0;
    for (uint32_t t = 0; t < nt; t++)
        inf += (double)g->tensors[g->tensors[t].storage].bytes;
    inf *= 4;
    size_t ne = 0;
#define EDGE(u, v, c) (edges[2 * ne] = (u), edges[2 * ne + 1] = (v), cap[ne++] = (c))
    uint32_t banned = 0;
    for (uint32_t t = 0; t < nt; t++) {
        const remat_tensor *T = &g->tensors[t];
        if (T->kind != REMAT_TENSOR_ACTIVATION) {
            EDGE(src, 2 * t, inf);
            EDGE(2 * t, 2 * t + 1, 0.0);
            continue;
        }
        /* A view is saved by keeping its base's storage. */
        EDGE(2 * t, 2 * t + 1, (double)g->tensors[T->storage].bytes + 1e-3);
        const remat_op *op = &g->ops[T->producer];
        if (!op->recomputable || never_recompute(list, op->type)) {
            EDGE(src, 2 * t, inf);
            banned++;
        }
        const uint32_t *in = remat_op_inputs(g, op);
        for (uint32_t i = 0; i < op->n_in; i++)
            EDGE(2 * in[i] + 1, 2 * t, inf);
        if (a->saver_off[t + 1] > a->saver_off[t])
            EDGE(2 * t + 1, snk, inf);
    }
#undef EDGE
    double value = 0;
    st = remat__ig_st_mincut(nv, edges, ne, cap, src, snk, side, &value, P->err);
    if (st != REMAT_OK)
        goto out;
    uint64_t saved = 0;
    uint32_t n_saved = 0;
    for (uint32_t t = 0; t < nt; t++)
        if (g->tensors[t].kind == REMAT_TENSOR_ACTIVATION && side[2 * t] && !side[2 * t + 1]) {
            out->keep[t] = 1;
            saved += g->tensors[g->tensors[t].storage].bytes;
            n_saved++;
        }
    st = remat__plan_params(P, out,
                            "{\"saved_tensors\": %u, \"saved_bytes\": %llu, \"never_recomputed_tensors\": %u, "
                            "\"never_recompute\": \"%s\"}",
                            n_saved, (unsigned long long)saved, banned,
                            list ? list : "matmul,mm,bmm,addmm,baddbmm,linear,einsum,conv*,attention,sdpa");
out:
    remat__free(edges);
    remat__free(cap);
    remat__free(side);
    return st;
}

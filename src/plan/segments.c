/*
 * segments.c - Chen et al. 2016: sqrt(n) segments and the greedy
 * byte-threshold segmenting with a threshold search.
 *
 * Both keep the tensors at chosen cuts and recompute everything else; the
 * default policy then replays a segment's forward from its kept boundary
 * when backward reaches it, which is Chen's segment replay.
 *
 * Structural cuts (the default) are the block boundaries of blocks.c: one
 * tensor crosses, so keeping it is enough. The linearized variant cuts at
 * any forward position and keeps every activation live across it (the
 * frontier), which is how the method is often applied to DAGs when the
 * structure offers few cuts (U-Net skips); the plan says which was used.
 */
#include "planner.h"
#include "../util/util_internal.h"

#include <math.h>
#include <string.h>

typedef struct {
    uint32_t n;   /* candidate cuts */
    uint32_t *pos;/* forward position after which the cut lies */
    remat_blocks blocks;
    int linearized;
} cut_set;

static void cuts_destroy(cut_set *c)
{
    remat__free(c->pos);
    remat__blocks_destroy(&c->blocks);
}

static remat_status cuts_build(remat_planner *P, cut_set *c)
{
    const remat_graph *g = P->a->g;
    memset(c, 0, sizeof *c);
    c->linearized = P->o->linearized;
    if (c->linearized) {
        c->n = g->n_ops > 1 ? g->n_ops - 1 : 0;
        c->pos = remat__array(c->n ? c->n : 1, sizeof *c->pos);
        if (!c->pos)
            return remat_err_set(P->err, REMAT_ENOMEM, "out of memory planning");
        for (uint32_t i = 0; i < c->n; i++)
            c->pos[i] = i;
        return REMAT_OK;
    }
    remat_status st = remat__blocks_build(P->a, &c->blocks, P->err);
    if (st != REMAT_OK)
        return st;
    c->n = c->blocks.n - 1;
    c->pos = remat__array(c->n ? c->n : 1, sizeof *c->pos);
    if (!c->pos)
        return remat_err_set(P->err, REMAT_ENOMEM, "out of memory planning");
    for (uint32_t j = 0; j < c->n; j++)
        c->pos[j] = c->blocks.start[j + 1] - 1;
    return REMAT_OK;
}

/* keep = the tensors at the chosen cuts (chosen[j] for candidate j). */
static void keep_from_cuts(const remat_analysis *a, const cut_set *c, const uint8_t *chosen, uint8_t *keep)
{
    const remat_graph *g = a->g;
    memset(keep, 0, g->n_tensors);
    if (!c->linearized) {
        for (uint32_t j = 0; j < c->n; j++)
            if (chosen[j] && c->blocks.in[j + 1] != REMAT_NONE)
                keep[c->blocks.in[j + 1]] = 1;
        return;
    }
    /* Frontier of cut p: activations with birth <= p < last forward use.
     * Mark chosen positions, then each tensor is kept if any chosen cut
     * falls in [birth, last_fwd_use): a prefix count answers that in O(1). */
    uint32_t *pre = (uint32_t *)remat__array((size_t)g->n_ops + 1, sizeof *pre);
    if (!pre)
        return; /* keep nothing: the caller's replay still judges it */
    for (uint32_t j = 0; j < c->n; j++)
        pre[c->pos[j] + 1] = chosen[j] ? 1 : 0;
    for (uint32_t i = 0; i < g->n_ops; i++)
        pre[i + 1] += pre[i];
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        const remat_lifetime *L = &a->life[t];
        if (g->tensors[t].kind != REMAT_TENSOR_ACTIVATION || L->last_fwd_use == REMAT_NONE ||
            L->last_fwd_use <= L->birth)
            continue;
        keep[t] = pre[L->last_fwd_use] - pre[L->birth] > 0;
    }
    remat__free(pre);
}

remat_status remat__strategy_sqrtn(remat_planner *P, remat_plan *out)
{
    const remat_graph *g = P->a->g;
    cut_set c;
    remat_status st = cuts_build(P, &c);
    uint8_t *chosen = NULL;
    if (st == REMAT_OK)
        st = remat__plan_alloc_keep(P, out);
    if (st == REMAT_OK && !(chosen = remat__calloc(c.n ? c.n : 1, 1)))
        st = remat_err_set(P->err, REMAT_ENOMEM, "out of memory planning");
    uint32_t k = 0, kept = 0;
    if (st == REMAT_OK) {
        /* About sqrt(n) segments of about sqrt(n) ops: cut at the candidate
         * nearest each multiple of n/k (ties to the earlier one). */
        k = P->o->segments ? P->o->segments : (uint32_t)ceil(sqrt((double)g->n_ops));
        if (k < 1)
            k = 1;
        uint32_t j = 0;
        for (uint32_t s = 1; s < k && c.n; s++) {
            double target = (double)s * g->n_ops / k - 1;
            while (j + 1 < c.n && fabs((double)c.pos[j + 1] - target) <= fabs((double)c.pos[j] - target))
                j++;
            if (!chosen[j]) {
                chosen[j] = 1;
                kept++;
            }
        }
        keep_from_cuts(P->a, &c, chosen, out->keep);
        st = remat__plan_params(P, out, "{\"segments\": %u, \"cuts\": %u, \"variant\": \"%s\", \"candidate_cuts\": %u}",
                                kept + 1, kept, c.linearized ? "linearized" : "articulation", c.n);
    }
    remat__free(chosen);
    cuts_destroy(&c);
    return st;
}

/* Chen's greedy: walk forward, add each op's output bytes; once the sum
 * passes the threshold at a candidate cut, cut there and restart. */
static uint32_t greedy(const remat_analysis *a, const cut_set *c, uint64_t threshold, uint8_t *chosen)
{
    const remat_graph *g = a->g;
    uint64_t acc = 0;
    uint32_t j = 0, n = 0;
    memset(chosen, 0, c->n ? c->n : 1);
    for (uint32_t i = 0; i < g->n_ops && j < c->n; i++) {
        const remat_op *op = &g->ops[a->order[i]];
        const uint32_t *out = remat_op_outputs(g, op);
        for (uint32_t q = 0; q < op->n_out; q++)
            acc += g->tensors[out[q]].bytes;
        if (c->pos[j] != i)
            continue;
        if (acc > threshold) {
            chosen[j] = 1;
            n++;
            acc = 0;
        }
        j++;
    }
    return n;
}

remat_status remat__strategy_chen_greedy(remat_planner *P, remat_plan *out)
{
    const remat_analysis *a = P->a;
    const remat_graph *g = a->g;
    cut_set c;
    remat_status st = cuts_build(P, &c);
    uint8_t *chosen = NULL, *best_keep = NULL;
    if (st == REMAT_OK)
        st = remat__plan_alloc_keep(P, out);
    if (st == REMAT_OK) {
        chosen = remat__calloc(c.n ? c.n : 1, 1);
        best_keep = remat__calloc(g->n_tensors ? g->n_tensors : 1, 1);
        if (!chosen || !best_keep)
            st = remat_err_set(P->err, REMAT_ENOMEM, "out of memory planning");
    }
    /* Threshold grid: geometric from the smallest op output to the whole
     * forward's bytes, 64 points, plus 0 (cut everywhere). Consecutive
     * thresholds often give the same cuts; those are not replayed again. */
    uint64_t lo = UINT64_MAX, total = 0, best_thr = 0;
    for (uint32_t t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].kind == REMAT_TENSOR_ACTIVATION && g->tensors[t].bytes) {
            if (g->tensors[t].bytes < lo)
                lo = g->tensors[t].bytes;
            if (!remat_u64_add(total, g->tensors[t].bytes, &total)) /* bytes near 2^64: saturate */
                total = UINT64_MAX;
        }
    if (lo == UINT64_MAX)
        lo = total = 1;
    remat_eval best = {0};
    uint64_t prev_sig = 0;
    uint32_t best_cuts = 0, tried = 0;
    const int steps = 64;
    for (int i = -1; st == REMAT_OK && i <= steps; i++) {
        uint64_t thr = i < 0 ? 0 : remat__u64_from_double((double)lo * pow((double)total / (double)lo, (double)i / steps));
        uint32_t n = greedy(a, &c, thr, chosen);
        uint64_t sig = remat__fnv1a(REMAT_FNV_OFFSET, chosen, c.n ? c.n : 1) ^ n;
        if (i >= 0 && sig == prev_sig)
            continue;
        prev_sig = sig;
        keep_from_cuts(a, &c, chosen, out->keep);
        remat_eval e;
        if ((st = remat__eval_keep(P, out->keep, &e)) != REMAT_OK)
            break;
        tried++;
        if (tried == 1 || remat__better(P, &e, &best)) {
            best = e;
            best_thr = thr;
            best_cuts = n;
            memcpy(best_keep, out->keep, g->n_tensors);
        }
    }
    if (st == REMAT_OK) {
        memcpy(out->keep, best_keep, g->n_tensors);
        st = remat__plan_params(P, out,
                                "{\"threshold_bytes\": %llu, \"cuts\": %u, \"variant\": \"%s\", \"thresholds_tried\": %u}",
                                (unsigned long long)best_thr, best_cuts, c.linearized ? "linearized" : "articulation",
                                tried);
    }
    remat__free(chosen);
    remat__free(best_keep);
    cuts_destroy(&c);
    return st;
}

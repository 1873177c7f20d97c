/*
 * blocks.c - the chain of blocks hidden in a DAG.
 *
 * A cut after forward position i is structural when at most one activation
 * is produced at or before i and read after it: every path from the inputs
 * to the loss then crosses that tensor, so keeping it is enough to replay
 * everything after it. A sweep counts crossing tensors (and sums their
 * indices, so that when exactly one crosses the sum names it) in O(ops +
 * refs). This is sharper than articulation points of the op graph, which
 * also fire at dangling branches and miss the chain's first op.
 *
 * Backward steps may save tensors of other blocks (graphs converted from
 * joint forward/backward graphs do); such blocks are merged so that replaying
 * one block from its input boundary rebuilds everything its backward reads.
 */
#include "planner.h"
#include "../util/util_internal.h"

#include <string.h>

void remat__blocks_destroy(remat_blocks *b)
{
    if (!b)
        return;
    remat__free(b->start);
    remat__free(b->in);
    b->start = b->in = NULL;
    b->n = 0;
}

remat_status remat__blocks_build(const remat_analysis *a, remat_blocks *b, remat_err *err)
{
    const remat_graph *g = a->g;
    const uint32_t n = g->n_ops;
    memset(b, 0, sizeof *b);
    int64_t *dcount = remat__array((size_t)n + 1, sizeof *dcount);
    uint64_t *dsum = remat__array((size_t)n + 1, sizeof *dsum);
    uint32_t *cut_tensor = remat__array(n ? n : 1, sizeof *cut_tensor); /* NONE: not a cut */
    uint8_t *is_cut = remat__calloc(n ? n : 1, 1);
    uint32_t *blk = remat__array(n ? n : 1, sizeof *blk);
    uint32_t *reach = remat__array((size_t)n + 1, sizeof *reach);
    remat_status st = REMAT_OK;
    if (!dcount || !dsum || !cut_tensor || !is_cut || !blk || !reach) {
        st = remat_err_set(err, REMAT_ENOMEM, "out of memory finding blocks");
        goto out;
    }
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        const remat_lifetime *L = &a->life[t];
        if (g->tensors[t].kind != REMAT_TENSOR_ACTIVATION || L->last_fwd_use == REMAT_NONE ||
            L->last_fwd_use <= L->birth)
            continue;
        dcount[L->birth]++;
        dcount[L->last_fwd_use]--;
        dsum[L->birth] += t;
        dsum[L->last_fwd_use] -= t;
    }
    int64_t c = 0;
    uint64_t s = 0;
    for (uint32_t i = 0; i + 1 < n; i++) {
        c += dcount[i];
        s += dsum[i];
        is_cut[i] = c <= 1;
        cut_tensor[i] = c == 1 ? (uint32_t)s : REMAT_NONE;
    }
    /* Provisional blocks. */
    uint32_t nb = 0;
    for (uint32_t i = 0; i < n; i++) {
        blk[i] = nb;
        if (i + 1 == n || is_cut[i])
            nb++;
    }
    /* Merge: lo[j] is the lowest block that must share block j's merged
     * block, because a backward step saves a tensor across blocks. The
     * input boundary of a block is the one outside tensor it may save. */
    uint32_t *lo = reach;
    for (uint32_t j = 0; j < nb; j++)
        lo[j] = j;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t k = a->order[i];
        if (a->bwd_step[k] == REMAT_NONE)
            continue;
        const uint32_t *sv = remat_op_saves(g, &g->ops[k]);
        for (uint32_t q = 0; q < g->ops[k].n_save; q++) {
            uint32_t t = sv[q];
            if (g->tensors[t].kind != REMAT_TENSOR_ACTIVATION)
                continue;
            uint32_t bt = blk[a->life[t].birth], bk = blk[i];
            if (bt < bk) {
                /* blk[] is non-decreasing: the cut before bk sits just
                 * before the first position of bk, found by the caller's
                 * order; i is in bk, so walk back to bk's first position. */
                uint32_t p = i;
                while (p > 0 && blk[p - 1] == bk)
                    p--;
                if (!(p > 0 && cut_tensor[p - 1] == t) && bt < lo[bk])
                    lo[bk] = bt;
            } else if (bt > bk && bk < lo[bt]) {
                lo[bt] = bk;
            }
        }
    }
    uint8_t *alive = is_cut; /* reused: alive[j] = the cut after block j survives */
    for (uint32_t j = 0; j < nb; j++)
        alive[j] = 1;
    uint32_t cur = nb;
    for (uint32_t j = nb; j-- > 0;) {
        if (lo[j] < cur)
            cur = lo[j];
        if (cur < j)
            alive[j - 1] = 0;
        else
            cur = nb;
    }
    /* A cut crossed by the same tensor as the cut kept before it is dropped:
     * the block between them (dead ops, or ops whose results die inside it)
     * would enter and leave through one tensor, and a schedule that releases
     * a block's output boundary would free its input. Such cuts follow each
     * other (a tensor's crossing span is contiguous). */
    uint32_t m = 0, prev = REMAT_NONE;
    for (uint32_t i = 0; i + 1 < n; i++)
        if (blk[i] != blk[i + 1] && alive[blk[i]]) {
            if (cut_tensor[i] != REMAT_NONE && cut_tensor[i] == prev)
                alive[blk[i]] = 0;
            else
                m++;
            prev = cut_tensor[i];
        }
    b->n = m + 1;
    b->start = remat__array((size_t)b->n + 1, sizeof *b->start);
    b->in = remat__array((size_t)b->n + 1, sizeof *b->in);
    if (!b->start || !b->in) {
        st = remat_err_set(err, REMAT_ENOMEM, "out of memory finding blocks");
        goto out;
    }
    uint32_t q = 0;
    b->start[0] = 0;
    b->in[0] = REMAT_NONE;
    for (uint32_t i = 0; i + 1 < n; i++)
        if (blk[i] != blk[i + 1] && alive[blk[i]]) {
            q++;
            b->start[q] = i + 1;
            b->in[q] = cut_tensor[i];
        }
    b->start[b->n] = n;
    b->in[b->n] = REMAT_NONE;
out:
    remat__free(dcount);
    remat__free(dsum);
    remat__free(cut_tensor);
    remat__free(is_cut);
    remat__free(blk);
    remat__free(reach);
    if (st != REMAT_OK)
        remat__blocks_destroy(b);
    return st;
}

/*
 * policy_edit.c - the incremental build's bookkeeping (policy.c, issue 20):
 * the last prepare edited for a keep set that differs in a few flags, and
 * the step signatures that let a build copy runs of clean steps without
 * looking at their tensors.
 *
 * A local search's builds differ from the last one in one or two flags:
 * prepare_edit recomputes only the need_end they reach and moves only the
 * buckets of the tensors whose free step moved, and keeps the tensors
 * moved since the base (bd) so that a build finds its window without a
 * pass over every tensor. Keep sets that differ in many flags (sqrtn's,
 * chen-greedy's) go to prepare, which is cheaper for them.
 */
#include "policy_internal.h"
#include "../util/util_internal.h"

#include <string.h>

/* Moves activation t from bucket a to bucket b, each bucket in tensor id
 * order as prepare's fill leaves it: O(the entries and steps between),
 * which it returns (in entries). */
static uint64_t bucket_move(remat__policy *P, uint32_t t, uint32_t a, uint32_t b)
{
    uint32_t *L = P->list, *off = P->off;
    uint32_t p = off[a];
    while (L[p] != t)
        p++;
    uint32_t q = off[b];
    while (q < off[b + 1] && L[q] < t)
        q++;
    if (a < b) {
        memmove(L + p, L + p + 1, (size_t)(q - 1 - p) * sizeof *L);
        L[q - 1] = t;
        for (uint32_t s = a + 1; s <= b; s++)
            off[s]--;
    } else {
        memmove(L + q + 1, L + q, (size_t)(p - q) * sizeof *L);
        L[q] = t;
        for (uint32_t s = b + 1; s <= a; s++)
            off[s]++;
    }
    return (uint64_t)(a < b ? b - a : a - b) + (p > q ? p - q : q - p);
}

/* Activation t's free step and pin from its ekeep and need_end, as
 * prepare sets them, its bucket moved along; returns what the move cost. */
static uint64_t refresh(remat__policy *P, uint32_t t)
{
    if (!P->act[t])
        return 0;
    const uint8_t pin = P->ekeep[t] && P->need_end[t] != REMAT_NONE;
    const uint32_t fs = pin ? P->need_end[t] : P->fwd_free[t];
    uint64_t cost = 1;
    if (fs != P->fstep[t])
        cost += bucket_move(P, t, P->fstep[t], fs);
    P->fstep[t] = fs;
    P->fpin[t] = pin;
    if (P->bd_ok && P->bd_mark[t] != P->bd_epoch) {
        P->bd_mark[t] = P->bd_epoch;
        P->bd[P->n_bd++] = t;
    }
    return cost;
}

/* Queues the activations whose need_end reads t's (the inputs of t's
 * producer, when it can be recomputed). */
static void push_readers(remat__policy *P, uint32_t t)
{
    const remat_graph *g = P->a->g;
    const remat_op *op = &g->ops[g->tensors[t].producer];
    if (!op->recomputable)
        return;
    const uint32_t *in = remat_op_inputs(g, op);
    for (uint32_t i = 0; i < op->n_in; i++) {
        const uint32_t k = P->kpos[in[i]];
        if (k == UINT32_MAX || P->hmark[k] == P->hepoch)
            continue;
        P->hmark[k] = P->hepoch;
        /* Sift up: a min-heap of places in acts (need_end's order). */
        uint32_t j = P->n_heap++;
        while (j > 0 && P->heap[(j - 1) / 2] > k) {
            P->heap[j] = P->heap[(j - 1) / 2];
            j = (j - 1) / 2;
        }
        P->heap[j] = k;
    }
}

static uint32_t pop_min(remat__policy *P)
{
    const uint32_t top = P->heap[0], last = P->heap[--P->n_heap];
    uint32_t j = 0;
    for (;;) {
        uint32_t c = 2 * j + 1;
        if (c >= P->n_heap)
            break;
        if (c + 1 < P->n_heap && P->heap[c + 1] < P->heap[c])
            c++;
        if (P->heap[c] >= last)
            break;
        P->heap[j] = P->heap[c];
        j = c;
    }
    if (P->n_heap)
        P->heap[j] = last;
    return top;
}

/* What prepare(P, keep) gives, as an edit of the last prepare's: only
 * the activations whose keep changed, the need_end they change (in
 * need_end's order, each once, so each reads its readers' final values),
 * and their free steps and buckets. 0: no last prepare to edit, or the
 * edit grew dearer than prepare itself (many flags changed: a ladder's new
 * start, sqrtn's next cut set), which the caller then runs; prepare
 * recomputes everything from keep, so an edit left half done is harmless. */
int remat__policy_prepare_edit(remat__policy *P, const uint8_t *keep)
{
    if (!P->prep_ok || !keep)
        return 0;
    const remat_analysis *a = P->a;
    const remat_graph *g = a->g;
    const uint64_t budget = (uint64_t)g->n_tensors + a->n_steps + P->dep_off[P->n_acts];
    uint64_t cost = 0;
    enum { BLOCK = 64 };
    /* Many changed flags: straight to prepare (a local search changes one
     * or two). */
    uint32_t changed = 0;
    for (uint32_t t0 = 0; t0 < g->n_tensors; t0 += BLOCK) {
        const uint32_t n = g->n_tensors - t0 < BLOCK ? g->n_tensors - t0 : BLOCK;
        if (memcmp(keep + t0, P->pkeep + t0, n) == 0)
            continue;
        for (uint32_t t = t0; t < t0 + n; t++)
            changed += keep[t] != P->pkeep[t];
        if (changed > 16 + P->n_acts / 64)
            return 0;
    }
    P->last_ok = 0; /* fstep and fpin are about to change */
    if (++P->hepoch == 0) {
        memset(P->hmark, 0, (P->n_acts ? P->n_acts : 1) * sizeof *P->hmark);
        P->hepoch = 1;
    }
    P->n_heap = 0;
    for (uint32_t t0 = 0; t0 < g->n_tensors; t0 += BLOCK) {
        const uint32_t n = g->n_tensors - t0 < BLOCK ? g->n_tensors - t0 : BLOCK;
        if (memcmp(keep + t0, P->pkeep + t0, n) == 0)
            continue;
        for (uint32_t t = t0; t < t0 + n; t++) {
            if (keep[t] == P->pkeep[t])
                continue;
            P->pkeep[t] = keep[t];
            if (P->kpos[t] == UINT32_MAX)
                continue;
            const uint8_t e = keep[t] || P->forced[t];
            if (e == P->ekeep[t])
                continue;
            P->ekeep[t] = e;
            cost += refresh(P, t);
            push_readers(P, t);
            if (cost > budget)
                return 0;
        }
    }
    while (P->n_heap) {
        const uint32_t k = pop_min(P), x = P->acts[k];
        uint32_t ne = a->life[x].last_bwd_use;
        for (uint32_t d = P->dep_off[k]; d < P->dep_off[k + 1]; d++)
            if (!P->ekeep[P->dep[d]])
                ne = remat__later_step(ne, P->need_end[P->dep[d]]);
        cost += 1 + P->dep_off[k + 1] - P->dep_off[k];
        if (ne != P->need_end[x]) {
            P->need_end[x] = ne;
            cost += refresh(P, x);
            if (!P->ekeep[x])
                push_readers(P, x);
        }
        if (cost > budget)
            return 0;
    }
    return 1;
}

/* The base was just made from the last prepare: no tensor's (free step,
 * pin) differs from it. */
void remat__policy_bd_reset(remat__policy *P)
{
    if (!P->bd) { /* not allocated (out of memory): every build scans every tensor */
        P->bd_ok = 0;
        return;
    }
    if (++P->bd_epoch == 0) {
        memset(P->bd_mark, 0, (P->a->g->n_tensors ? P->a->g->n_tensors : 1) * sizeof *P->bd_mark);
        P->bd_epoch = 1;
    }
    P->n_bd = 0;
    P->bd_ok = 1;
}

/* Step signatures: a 256-bit Bloom filter of the tensors a step's
 * instructions name (instr_tensors) and of its bucket. A step whose
 * signature shares no bit with the dirty tensors' (those whose residency
 * differs from the shadow's, and the dmarked ones) names none of them, so
 * step_clean would pass it: the build copies a run of such steps without
 * looking at their tensors (stretch_copy). A signature may name more than
 * its step (a bucket that lost a tensor keeps its bit): that only sends
 * the step to step_clean. The base's signatures are made by the first
 * build with few dirty tensors (sig_all); a build that is adopted changes
 * the instructions or the bucket only of the steps it made itself (the
 * first one and its real steps: a tensor whose free step moved is dmarked,
 * so the step it moves to is real), whose signatures it records (csig),
 * unless it ran without signatures (many changes: sqrtn's and chen-greedy's
 * keep sets), which leaves them to be made again. */
static inline void sig_add(uint64_t *sg, uint32_t x)
{
    const uint32_t h = (x * 2654435761u) >> 24;
    sg[h >> 6] |= 1ull << (h & 63);
}

/* The signature of instructions ins[from, to) and step s's bucket. */
void remat__policy_sig_of(const remat__policy *P, const remat_instr *ins, size_t from, size_t to, uint32_t s, uint64_t *sg)
{
    const remat_graph *g = P->a->g;
    memset(sg, 0, SIG_WORDS * sizeof *sg);
    for (size_t i = from; i < to; i++) {
        const uint32_t *l1 = NULL, *l2 = NULL;
        uint32_t n1, n2;
        instr_tensors(g, &ins[i], &l1, &n1, &l2, &n2);
        for (uint32_t k = 0; k < n1 + n2; k++)
            sig_add(sg, k < n1 ? l1[k] : l2[k - n1]);
    }
    for (uint32_t i = P->off[s]; i < P->off[s + 1]; i++)
        sig_add(sg, P->list[i]);
}

void remat__policy_dirty_add(remat__policy *P, uint32_t x)
{
    if (P->sig_off || P->dirty_mark[x] == P->dirty_epoch)
        return;
    if (P->n_dirty >= 4 * DIRTY_MAX) { /* even before pruning: off */
        P->sig_off = 1;
        return;
    }
    P->dirty_mark[x] = P->dirty_epoch;
    P->dirty[P->n_dirty++] = x;
    P->dmask_stale = 1;
}

/* The tensors whose residency instruction in changes: where the builder
 * and the shadow can come to differ. */
void remat__policy_dirty_from(remat__policy *P, remat_instr in)
{
    const remat_graph *g = P->a->g;
    if (in.kind == REMAT_I_FWD || in.kind == REMAT_I_RECOMPUTE) {
        const remat_op *op = &g->ops[in.arg];
        const uint32_t *o = remat_op_outputs(g, op);
        for (uint32_t j = 0; j < op->n_out; j++)
            remat__policy_dirty_add(P, o[j]);
    } else if (in.kind == REMAT_I_FREE) {
        remat__policy_dirty_add(P, in.arg);
    }
}

/* Drops the candidates that no longer differ and signs the rest. */
void remat__policy_dmask_make(remat__policy *P)
{
    const remat_builder *B = &P->B;
    uint32_t w = 0;
    memset(P->dmask, 0, sizeof P->dmask);
    for (uint32_t k = 0; k < P->n_dirty; k++) {
        const uint32_t x = P->dirty[k];
        if (B->res[x] != P->shadow[x] || P->dmark[x] == P->depoch) {
            P->dirty[w++] = x;
            sig_add(P->dmask, x);
        } else {
            P->dirty_mark[x] = 0;
        }
    }
    P->n_dirty = w;
    P->dmask_stale = 0;
    if (w > DIRTY_MAX)
        P->sig_off = 1;
}

/* Every base step's signature, during a build (P->off is the candidate's
 * buckets: a dmarked tensor also gets its bit at its base free step, where
 * the base's bucket holds it). */
void remat__policy_sig_all(remat__policy *P)
{
    const uint32_t n_op_steps = P->a->g->n_ops + P->a->n_bwd;
    if (!P->sig) { /* made here: a policy whose builds never use them has none */
        const size_t ns = (size_t)P->a->n_steps;
        P->sig = remat__array(ns * SIG_WORDS, sizeof *P->sig);
        P->csig = remat__array(ns * SIG_WORDS, sizeof *P->csig);
        if (!P->sig || !P->csig) {
            remat__free(P->sig);
            remat__free(P->csig);
            P->sig = P->csig = NULL;
            P->sig_off = 1; /* the build goes on without them */
            return;
        }
    }
    for (uint32_t k = 0; k < n_op_steps; k++)
        remat__policy_sig_of(P, P->base.ins, P->pos_start[k], P->pos_start[k + 1], k, P->sig + (size_t)k * SIG_WORDS);
    for (uint32_t i = 0; i < P->n_dirty; i++) {
        const uint32_t t = P->dirty[i];
        if (P->bstep[t] < n_op_steps)
            sig_add(P->sig + (size_t)P->bstep[t] * SIG_WORDS, t);
    }
    P->sig_ok = 1;
}

/* Whether step s surely passes step_clean (dmask current). */
int remat__policy_sig_clean(const remat__policy *P, uint32_t s)
{
    if (P->sig_off || P->force[s] == P->depoch)
        return 0;
    const uint64_t *sg = P->sig + (size_t)s * SIG_WORDS;
    return ((sg[0] & P->dmask[0]) | (sg[1] & P->dmask[1]) | (sg[2] & P->dmask[2]) | (sg[3] & P->dmask[3])) == 0;
}


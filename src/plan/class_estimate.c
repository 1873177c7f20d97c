/*
 * class_estimate.c - the tables of the class search (class_search.c) and
 * its estimate of a state, a lower bound on the FLOPs still to recompute.
 *
 * The tables, built once per search: one bit per activation (at most 64),
 * the storages and their bytes, each op's input, output and save masks,
 * what a later step may need (alive) or reads directly (needmask), the
 * non-activation part of the budget's metric per step (fixed_profile.c),
 * and the pressure steps: each step whose storages produced before it and
 * read after it, beside its own, exceed the budget, with those storages by
 * charge per byte (bound.c's charges: a producer's FLOPs by byte share).
 *
 * The estimate h(p, R) adds (1) the FLOPs of every op with an output read
 * at or after p that R lacks, and of the producers of its missing inputs,
 * transitively: each must run again as a RECOMPUTE (its FWD is done), and a
 * RECOMPUTE needs its inputs resident; and (2) the largest fractional
 * knapsack over the pressure steps s >= p, where a storage missing from R or
 * made by an op (1) pays leaves at no further cost and any other dropped at
 * s needs a RECOMPUTE of its producer after s, a different instruction from
 * (1)'s (charged by byte share, so one RECOMPUTE is never charged twice).
 * The steps are visited by their largest possible charge, descending, so
 * the scan stops at the first that cannot raise the figure. O(steps x
 * storages) at worst per state, usually far less.
 */
#include "class_internal.h"
#include "../util/util_internal.h"

#include <string.h>

static uint64_t bits_of(const class_state *S, const uint32_t *ts, uint32_t n)
{
    uint64_t m = 0;
    for (uint32_t i = 0; i < n; i++)
        if (S->g->tensors[ts[i]].kind == REMAT_TENSOR_ACTIVATION)
            m |= 1ull << S->bit[ts[i]];
    return m;
}

/* The estimate (file comment); CLASS_INF when no schedule can go on from here. */
uint64_t remat__class_estimate(class_state *S, uint32_t p, uint64_t mask)
{
    const remat_graph *g = S->g;
    /* Part 1, closed under inputs: an op recomputed later needs its
     * inputs resident then, and one missing now needs its producer
     * recomputed too. */
    uint64_t req = S->needmask[p] & ~mask, todo = req, h1 = 0, zero = 0;
    S->gen++;
    S->work += 4;
    while (todo) {
        uint32_t k = S->prod[__builtin_ctzll(todo)];
        todo &= todo - 1;
        if (S->stamp[k] == S->gen)
            continue;
        S->stamp[k] = S->gen;
        if (!g->ops[k].recomputable)
            return CLASS_INF;
        h1 += g->ops[k].flops;
        zero |= S->out_m[k];
        uint64_t more = S->in_m[k] & ~mask & ~req;
        req |= more;
        todo |= more;
    }
    /* Part 2: the storages that leave at no further cost, as root bits:
     * produced before p and not resident, or made by an op part 1 pays. */
    uint64_t res;
    if (!S->has_views) {
        res = mask;
    } else {
        res = 0;
        for (uint32_t j = 0; j < S->n_roots; j++)
            if (mask & S->root_mask[j])
                res |= 1ull << S->root_bit[j];
    }
    const uint64_t free_r = ((S->bornmask[p] & ~res) | zero) & S->root_bits;
    uint64_t h2 = 0;
    for (uint32_t q = 0; q < S->n_ps; q++) {
        const class_step *s = &S->ps[q];
        if (s->most <= h2)
            break; /* by most, descending: no later step can raise h2 */
        if (s->step < p)
            continue;
        uint64_t rem = s->excess;
        for (uint64_t m = free_r & s->roots; m && rem; m &= m - 1) {
            uint64_t b = S->bit_bytes[__builtin_ctzll(m)];
            rem = rem > b ? rem - b : 0;
        }
        const class_item *it = S->items + s->off;
        uint64_t c = 0;
        uint32_t i = 0;
        for (; i < s->n && rem; i++) {
            if (free_r >> it[i].bit & 1)
                continue;
            if (it[i].bytes <= rem) {
                rem -= it[i].bytes;
                c += it[i].cost;
            } else {
                c += it[i].cost <= UINT64_MAX / rem ? it[i].cost * rem / it[i].bytes
                                                    : (uint64_t)((class_u128)it[i].cost * rem / it[i].bytes);
                rem = 0;
            }
        }
        S->work += 1 + i;
        if (rem)
            return CLASS_INF;
        if (c > h2)
            h2 = c;
    }
    return h1 + h2 < h1 ? CLASS_INF : h1 + h2;
}

/* Builds the tables the search and the estimate read; REMAT_OK and
 * *usable = 0 when the graph is out of the search's reach. */
remat_status remat__class_prepare(class_state *S, int *usable)
{
    remat_planner *P = S->P;
    const remat_analysis *a = S->a;
    const remat_graph *g = S->g;
    const uint32_t n = S->n, T = S->T, na = S->n_act;
    *usable = 0;
    S->bit = remat__calloc(g->n_tensors ? g->n_tensors : 1, sizeof *S->bit);
    S->act = remat__calloc(na ? na : 1, sizeof *S->act);
    S->smask = remat__calloc(na ? na : 1, sizeof *S->smask);
    S->root_mask = remat__calloc(na ? na : 1, sizeof *S->root_mask);
    S->root_bytes = remat__calloc(na ? na : 1, sizeof *S->root_bytes);
    S->root_bit = remat__calloc(na ? na : 1, sizeof *S->root_bit);
    S->bit_bytes = remat__calloc(na ? na : 1, sizeof *S->bit_bytes);
    S->bornmask = remat__calloc((size_t)T + 1, sizeof *S->bornmask);
    S->in_m = remat__calloc(n ? n : 1, sizeof *S->in_m);
    S->out_m = remat__calloc(n ? n : 1, sizeof *S->out_m);
    S->save_m = remat__calloc(n ? n : 1, sizeof *S->save_m);
    S->alive = remat__calloc((size_t)T + 1, sizeof *S->alive);
    S->needmask = remat__calloc((size_t)T + 1, sizeof *S->needmask);
    S->pre = remat__calloc((size_t)T + 1, sizeof *S->pre);
    S->hw = remat__calloc((size_t)T + 1, sizeof *S->hw);
    S->prod = remat__calloc(na ? na : 1, sizeof *S->prod);
    S->stamp = remat__calloc(n ? n : 1, sizeof *S->stamp);
    S->ps = remat__calloc((size_t)T + 1, sizeof *S->ps);
    S->items = remat__array((size_t)(T + 1) * (na ? na : 1), sizeof *S->items);
    uint32_t *need = remat__calloc(na ? na : 1, sizeof *need);
    uint32_t *lastread = remat__calloc(na ? na : 1, sizeof *lastread);
    uint32_t *born = remat__calloc(na ? na : 1, sizeof *born);
    uint64_t *own = remat__calloc(n ? n : 1, sizeof *own);
    remat_status st = REMAT_OK;
    if (!S->bit || !S->act || !S->smask || !S->root_mask || !S->root_bytes || !S->root_bit || !S->bit_bytes ||
        !S->bornmask || !S->in_m || !S->out_m || !S->save_m ||
        !S->alive || !S->needmask || !S->pre || !S->hw || !S->prod || !S->stamp || !S->ps || !S->items || !need ||
        !lastread || !born || !own) {
        st = remat_err_set(P->err, REMAT_ENOMEM, "out of memory searching schedules");
        goto out;
    }
    for (uint32_t t = 0, k = 0; t < g->n_tensors; t++)
        if (g->tensors[t].kind == REMAT_TENSOR_ACTIVATION) {
            S->bit[t] = k;
            S->act[k++] = t;
        }
    /* Storages: a member's storage is resident when any member is; only
     * an activation root owns bytes (a view of a leaf owns nothing). */
    for (uint32_t i = 0; i < na; i++) {
        uint32_t r = g->tensors[S->act[i]].storage;
        for (uint32_t j = 0; j < na; j++)
            if (g->tensors[S->act[j]].storage == r)
                S->smask[i] |= 1ull << j;
        if (S->act[i] == r) {
            S->root_mask[S->n_roots] = S->smask[i];
            S->root_bit[S->n_roots] = i;
            S->root_bits |= 1ull << i;
            S->bit_bytes[i] = g->tensors[r].bytes;
            S->root_bytes[S->n_roots++] = g->tensors[r].bytes;
        }
        if (S->smask[i] != 1ull << i || S->act[i] != r)
            S->has_views = 1;
    }
    for (uint32_t k = 0; k < n; k++) {
        const remat_op *op = &g->ops[k];
        S->in_m[k] = bits_of(S, remat_op_inputs(g, op), op->n_in);
        S->out_m[k] = bits_of(S, remat_op_outputs(g, op), op->n_out);
        S->save_m[k] = bits_of(S, remat_op_saves(g, op), op->n_save);
        if (__builtin_popcountll(S->in_m[k] | S->out_m[k]) > CLASS_MAX_TOUCHED ||
            __builtin_popcountll(S->save_m[k]) > CLASS_MAX_TOUCHED)
            goto out;
        const uint32_t *outs = remat_op_outputs(g, op);
        for (uint32_t j = 0; j < op->n_out; j++)
            if (g->tensors[outs[j]].kind == REMAT_TENSOR_ACTIVATION) {
                S->prod[S->bit[outs[j]]] = k;
                born[S->bit[outs[j]]] = a->pos[k];
                if (g->tensors[outs[j]].storage == outs[j])
                    own[k] += g->tensors[outs[j]].bytes;
            }
    }
    /* need(v): the last step that may read v, directly or as an input of a
     * recomputation of something read later (a view keeps its root);
     * lastread(v): directly only. */
    for (uint32_t i = 0; i < na; i++) {
        uint32_t v = S->act[i], ne = REMAT_NONE;
        for (uint32_t j = a->cons_off[v]; j < a->cons_off[v + 1]; j++)
            ne = remat__later_step(ne, a->pos[a->cons[j]]);
        for (uint32_t j = a->saver_off[v]; j < a->saver_off[v + 1]; j++)
            ne = remat__later_step(ne, a->bwd_step[a->savers[j]]);
        need[i] = lastread[i] = ne;
    }
    for (uint32_t q = n; q-- > 0;) {
        const remat_op *op = &g->ops[a->order[q]];
        const uint32_t *in = remat_op_inputs(g, op), *outs = remat_op_outputs(g, op);
        uint32_t ne = REMAT_NONE;
        for (uint32_t j = 0; j < op->n_out; j++)
            if (g->tensors[outs[j]].kind == REMAT_TENSOR_ACTIVATION) {
                uint32_t o = S->bit[outs[j]], r = g->tensors[outs[j]].storage;
                ne = remat__later_step(ne, need[o]);
                if (r != outs[j] && r != REMAT_NONE && g->tensors[r].kind == REMAT_TENSOR_ACTIVATION)
                    need[S->bit[r]] = remat__later_step(need[S->bit[r]], need[o]);
            }
        if (!op->recomputable)
            continue;
        for (uint32_t i = 0; i < op->n_in; i++)
            if (g->tensors[in[i]].kind == REMAT_TENSOR_ACTIVATION)
                need[S->bit[in[i]]] = remat__later_step(need[S->bit[in[i]]], ne);
    }
    for (uint32_t p = 0; p <= T; p++)
        for (uint32_t i = 0; i < na; i++) {
            if (need[i] != REMAT_NONE && need[i] >= p)
                S->alive[p] |= 1ull << i;
            if (born[i] < p && lastread[i] != REMAT_NONE && lastread[i] >= p)
                S->needmask[p] |= 1ull << i;
            if (born[i] < p)
                S->bornmask[p] |= 1ull << i;
        }
    {
        remat_err local;
        remat_err_init(&local);
        st = remat__fixed_profile(P, &P->o->extras, S->pre, S->hw, &local);
        if (st != REMAT_OK) {
            st = remat_err_set(P->err, st, "class search: %s", local.msg);
            goto out;
        }
    }
    /* The pressure steps of the estimate's part 2: at step s, every
     * activation storage produced before s and read after s, less the
     * step's own; those that cannot be recomputed stay in the excess. */
    uint32_t off = 0;
    for (uint32_t s = 0; s < T; s++) {
        const remat_op *op = s < n ? &g->ops[a->order[s]] : &g->ops[a->bwd_order[s - n]];
        uint64_t ownm = s < n ? S->in_m[a->order[s]] | S->out_m[a->order[s]] : S->save_m[a->bwd_order[s - n]];
        (void)op;
        uint64_t total = S->hw[s], fixed_b = 0;
        uint32_t cnt = 0;
        for (uint32_t j = 0; j < S->n_roots; j++) {
            uint64_t rm = S->root_mask[j];
            uint32_t rb = (uint32_t)__builtin_ctzll(rm), last = REMAT_NONE, rt = S->act[rb];
            for (uint64_t m = rm; m; m &= m - 1)
                last = remat__later_step(last, lastread[__builtin_ctzll(m)]);
            (void)rt;
            if (ownm & rm) {
                total += S->root_bytes[j];
                continue;
            }
            if (!(born[rb] < s && last != REMAT_NONE && last > s) || S->root_bytes[j] == 0)
                continue;
            total += S->root_bytes[j];
            uint32_t k = S->prod[rb];
            if (!g->ops[k].recomputable) {
                fixed_b += S->root_bytes[j];
                continue;
            }
            class_item *x = &S->items[off + cnt++];
            x->smask = rm;
            x->bytes = S->root_bytes[j];
            x->cost = own[k] ? (uint64_t)((class_u128)g->ops[k].flops * x->bytes / own[k]) : 0;
            x->born = born[rb];
            x->bit = rb;
        }
        (void)fixed_b;
        if (total <= S->budget)
            continue;
        /* Lowest charge per byte first (insertion sort: a few dozen). */
        class_item *it = &S->items[off];
        for (uint32_t i = 1; i < cnt; i++) {
            class_item x = it[i];
            uint32_t j = i;
            while (j > 0 && (class_u128)x.cost * it[j - 1].bytes < (class_u128)it[j - 1].cost * x.bytes) {
                it[j] = it[j - 1];
                j--;
            }
            it[j] = x;
        }
        uint64_t rem = total - S->budget, most = 0;
        for (uint32_t i = 0; i < cnt && rem; i++) {
            uint64_t b = it[i].bytes < rem ? it[i].bytes : rem;
            most += b == it[i].bytes ? it[i].cost : (uint64_t)((class_u128)it[i].cost * b / it[i].bytes);
            rem -= b;
        }
        uint64_t roots = 0;
        for (uint32_t i = 0; i < cnt; i++)
            roots |= 1ull << it[i].bit;
        S->ps[S->n_ps++] = (class_step){s, off, cnt, total - S->budget, rem ? CLASS_INF : most, roots};
        off += cnt;
    }
    /* The estimate visits the steps by their largest charge, descending,
     * and stops at the first that cannot beat what it has. */
    for (uint32_t i = 1; i < S->n_ps; i++) {
        class_step x = S->ps[i];
        uint32_t j = i;
        while (j > 0 && S->ps[j - 1].most < x.most) {
            S->ps[j] = S->ps[j - 1];
            j--;
        }
        S->ps[j] = x;
    }
    *usable = 1;
out:
    remat__free(need);
    remat__free(lastread);
    remat__free(born);
    remat__free(own);
    return st;
}

void remat__class_release(class_state *S)
{
    remat__free(S->bit);
    remat__free(S->act);
    remat__free(S->smask);
    remat__free(S->root_mask);
    remat__free(S->root_bytes);
    remat__free(S->root_bit);
    remat__free(S->bit_bytes);
    remat__free(S->bornmask);
    remat__free(S->in_m);
    remat__free(S->out_m);
    remat__free(S->save_m);
    remat__free(S->alive);
    remat__free(S->needmask);
    remat__free(S->pre);
    remat__free(S->hw);
    remat__free(S->prod);
    remat__free(S->stamp);
    remat__free(S->items);
    remat__free(S->ps);
    remat__free(S->nd);
    remat__free(S->slot);
    remat__free(S->heap.v);
    remat__free(S->kids);
}


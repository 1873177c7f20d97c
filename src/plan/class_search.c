/*
 * class_search.c - the least extra FLOPs over every schedule of the
 * fixed-order class, by a shortest-path search, on graphs small enough
 * (issue 20: auto's certificate is the optimum there, and so is its plan).
 *
 * The class is bound.c's: FWD steps once each in forward order, BWD steps
 * once each in backward order, any RECOMPUTE and FREE between them. A
 * state is (p, R): the steps before p are done and R is the set of
 * resident activations. Edges: FREE a resident activation (cost 0);
 * RECOMPUTE an op that has run forward, can be recomputed, has its inputs
 * resident and a missing output (cost: its FLOPs); run step p, the next
 * FWD (its inputs resident) or BWD (its saves resident). An edge exists
 * only if its high-water mark fits the budget: the bytes of the storages
 * with a resident member (a view shares its root's storage), the bytes the
 * instruction allocates (outputs not yet resident, with their storage) and
 * the non-activation part of the budget's categories. That part depends on
 * the step order alone (exact_model.c relies on the same fact) and is read
 * from one replay of the store-all schedule with an observer: before each
 * step (what a RECOMPUTE there sees, plus its op's workspace), at each step
 * (its high-water mark, workspace and new gradients included), and at the
 * optimizer step, which must fit with whatever is still resident. Dijkstra
 * from (0, {}) to (T, R) for any R that fits the optimizer step gives the
 * optimum and a schedule that reaches it; that schedule, like every plan,
 * is judged again by the one replay before anything is reported, and
 * tests/check_exact.c compares the optimum with an independent search.
 *
 * A state drops what no later step can need (read directly, or as an input
 * of a recomputation of something read later): freeing it costs nothing
 * and keeping it only costs memory, so the optimum is the same and far
 * fewer states are reached; the reconstructed schedule writes those frees
 * right after the step. Size: (T + 1) * 2^activations states, run only up
 * to CLASS_MAX_STATES (4 x 10^6: about 60 MB and a second).
 */
#include "planner.h"
#include "../util/util_internal.h"

#include <string.h>

#define CLASS_MAX_ACT 20
#define CLASS_MAX_STATES (1u << 22)

typedef struct {
    uint64_t cost;
    uint32_t prev;
    uint32_t instr; /* kind << 24 | arg */
} node;

typedef struct {
    uint64_t *cost;
    uint32_t *state;
    size_t n, cap;
} heap;

static int heap_push(heap *h, uint64_t cost, uint32_t state)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 4096;
        uint64_t *c = remat__realloc(h->cost, cap * sizeof *c);
        if (!c)
            return 0;
        h->cost = c;
        uint32_t *s = remat__realloc(h->state, cap * sizeof *s);
        if (!s)
            return 0;
        h->state = s;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0 && h->cost[(i - 1) / 2] > cost) {
        h->cost[i] = h->cost[(i - 1) / 2];
        h->state[i] = h->state[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->cost[i] = cost;
    h->state[i] = state;
    return 1;
}

static uint32_t heap_pop(heap *h)
{
    uint32_t top = h->state[0];
    uint64_t c = h->cost[--h->n];
    uint32_t s = h->state[h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        uint64_t mc = c;
        if (l < h->n && h->cost[l] < mc)
            m = l, mc = h->cost[l];
        if (l + 1 < h->n && h->cost[l + 1] < mc)
            m = l + 1;
        if (m == i)
            break;
        h->cost[i] = h->cost[m];
        h->state[i] = h->state[m];
        i = m;
    }
    h->cost[i] = c;
    h->state[i] = s;
    return top;
}

/* Bit masks of a tensor list's activations; 0 when it names none. */
static uint32_t bits_of(const remat_graph *g, const uint32_t *bit, const uint32_t *ts, uint32_t n)
{
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++)
        if (g->tensors[ts[i]].kind == REMAT_TENSOR_ACTIVATION)
            m |= 1u << bit[ts[i]];
    return m;
}

remat_status remat__class_search(remat_planner *P, remat_schedule *out, uint64_t *opt, int *ran)
{
    const remat_analysis *a = P->a;
    const remat_graph *g = a->g;
    const uint32_t n = g->n_ops, T = n + a->n_bwd;
    const uint64_t budget = P->o->budget;
    *ran = 0;
    *opt = UINT64_MAX;
    /* The search's states hold activations only; a sharded rank's
     * collectives are not among its edges. */
    if (P->o->budget_kind == REMAT_BUDGET_NONE || P->o->extras.sharding)
        return REMAT_OK;
    uint32_t n_act = 0;
    for (uint32_t t = 0; t < g->n_tensors; t++)
        n_act += g->tensors[t].kind == REMAT_TENSOR_ACTIVATION;
    if (n_act > CLASS_MAX_ACT || (uint64_t)(T + 1) << n_act > CLASS_MAX_STATES)
        return REMAT_OK;
    const uint32_t S = 1u << n_act;
    const size_t N = (size_t)(T + 1) * S;
    uint32_t *bit = remat__calloc(g->n_tensors ? g->n_tensors : 1, sizeof *bit);
    uint32_t *act = remat__calloc(n_act ? n_act : 1, sizeof *act);
    uint32_t *smask = remat__calloc(n_act ? n_act : 1, sizeof *smask); /* per member: its storage's members */
    uint64_t *sbytes = remat__calloc(n_act ? n_act : 1, sizeof *sbytes);
    uint64_t *mbytes = remat__calloc(S, sizeof *mbytes);
    uint64_t *pre = remat__calloc((size_t)T + 1, sizeof *pre), *hw = remat__calloc((size_t)T + 1, sizeof *hw);
    uint32_t *in_m = remat__calloc(n ? n : 1, sizeof *in_m), *out_m = remat__calloc(n ? n : 1, sizeof *out_m);
    uint32_t *save_m = remat__calloc(n ? n : 1, sizeof *save_m);
    uint32_t *need = remat__calloc(n_act ? n_act : 1, sizeof *need);
    uint32_t *alive = remat__calloc((size_t)T + 1, sizeof *alive);
    node *nd = remat__array(N, sizeof *nd);
    uint8_t *done = remat__calloc(N, 1);
    heap h = {NULL, NULL, 0, 0};
    remat_status st = REMAT_OK;
    if (!bit || !act || !smask || !sbytes || !mbytes || !pre || !hw || !in_m || !out_m || !save_m || !need || !alive || !nd ||
        !done) {
        st = remat_err_set(P->err, REMAT_ENOMEM, "out of memory searching schedules");
        goto done_;
    }
    for (uint32_t t = 0, k = 0; t < g->n_tensors; t++)
        if (g->tensors[t].kind == REMAT_TENSOR_ACTIVATION) {
            bit[t] = k;
            act[k++] = t;
        }
    /* Storages: a member's storage is resident when any member is. Only
     * the root's own bytes count, once. */
    for (uint32_t i = 0; i < n_act; i++) {
        uint32_t r = g->tensors[act[i]].storage;
        for (uint32_t j = 0; j < n_act; j++)
            if (g->tensors[act[j]].storage == r)
                smask[i] |= 1u << j;
        sbytes[i] = act[i] == r ? g->tensors[r].bytes : 0;
    }
    for (uint32_t m = 1; m < S; m++) {
        uint64_t b = 0;
        for (uint32_t i = 0; i < n_act; i++) {
            uint32_t root = g->tensors[act[i]].storage;
            if (act[i] != root || root == REMAT_NONE) {
                /* A view of a leaf owns nothing; a view of an activation is
                 * counted through its root's entry below. */
                continue;
            }
            if (m & smask[i])
                b += sbytes[i];
        }
        mbytes[m] = b;
    }
    /* need(v): the last step that may read v, directly or as an input of
     * a recomputation of something read later (a view keeps its root). A
     * state drops what no later step can need: freeing it costs nothing,
     * and keeping it can only cost memory. */
    for (uint32_t i = 0; i < n_act; i++) {
        uint32_t v = act[i], ne = REMAT_NONE;
        for (uint32_t j = a->cons_off[v]; j < a->cons_off[v + 1]; j++)
            ne = remat__later_step(ne, a->pos[a->cons[j]]);
        for (uint32_t j = a->saver_off[v]; j < a->saver_off[v + 1]; j++)
            ne = remat__later_step(ne, a->bwd_step[a->savers[j]]);
        need[i] = ne;
    }
    for (uint32_t q = n; q-- > 0;) {
        const remat_op *op = &g->ops[a->order[q]];
        const uint32_t *in = remat_op_inputs(g, op), *outs = remat_op_outputs(g, op);
        uint32_t ne = REMAT_NONE;
        for (uint32_t j = 0; j < op->n_out; j++)
            if (g->tensors[outs[j]].kind == REMAT_TENSOR_ACTIVATION) {
                uint32_t o = bit[outs[j]], r = g->tensors[outs[j]].storage;
                ne = remat__later_step(ne, need[o]);
                if (r != outs[j] && r != REMAT_NONE && g->tensors[r].kind == REMAT_TENSOR_ACTIVATION)
                    need[bit[r]] = remat__later_step(need[bit[r]], need[o]);
            }
        if (!op->recomputable)
            continue;
        for (uint32_t i = 0; i < op->n_in; i++)
            if (g->tensors[in[i]].kind == REMAT_TENSOR_ACTIVATION)
                need[bit[in[i]]] = remat__later_step(need[bit[in[i]]], ne);
    }
    for (uint32_t p = 0; p <= T; p++)
        for (uint32_t i = 0; i < n_act; i++)
            if (need[i] != REMAT_NONE && need[i] >= p)
                alive[p] |= 1u << i;
    for (uint32_t k = 0; k < n; k++) {
        const remat_op *op = &g->ops[k];
        in_m[k] = bits_of(g, bit, remat_op_inputs(g, op), op->n_in);
        out_m[k] = bits_of(g, bit, remat_op_outputs(g, op), op->n_out);
        save_m[k] = bits_of(g, bit, remat_op_saves(g, op), op->n_save);
    }
    /* The non-activation part, from the store-all replay. */
    {
        remat_err local;
        remat_err_init(&local);
        st = remat__fixed_profile(P, &P->o->extras, pre, hw, &local);
        if (st != REMAT_OK) {
            st = remat_err_set(P->err, st, "class search: %s", local.msg);
            goto done_;
        }
    }
    for (size_t i = 0; i < N; i++)
        nd[i].cost = UINT64_MAX;
    nd[0].cost = 0;
    if (!heap_push(&h, 0, 0)) {
        st = remat_err_set(P->err, REMAT_ENOMEM, "out of memory searching schedules");
        goto done_;
    }
    size_t goal = SIZE_MAX;
    while (h.n > 0 && st == REMAT_OK) {
        uint32_t u = heap_pop(&h);
        if (done[u])
            continue;
        done[u] = 1;
        const uint32_t p = u / S, mask = u % S;
        const uint64_t cu = nd[u].cost;
        if (p == T) {
            if (hw[T] + mbytes[mask] <= budget) {
                goal = u;
                break;
            }
        }
#define RELAX(v_, add_, instr_)                                                                                        \
    do {                                                                                                               \
        uint32_t v = (v_);                                                                                             \
        uint64_t c = cu + (add_);                                                                                      \
        if (!done[v] && c < nd[v].cost) {                                                                              \
            nd[v].cost = c;                                                                                            \
            nd[v].prev = u;                                                                                            \
            nd[v].instr = (instr_);                                                                                    \
            if (!heap_push(&h, c, v))                                                                                  \
                st = remat_err_set(P->err, REMAT_ENOMEM, "out of memory searching schedules");                        \
        }                                                                                                              \
    } while (0)
        for (uint32_t i = 0; i < n_act; i++)
            if (mask >> i & 1)
                RELAX(p * S + (mask & ~(1u << i)), 0, (uint32_t)REMAT_I_FREE << 24 | act[i]);
        if (p == T)
            continue;
        const uint32_t lim = p < n ? p : n;
        for (uint32_t q = 0; q < lim; q++) {
            uint32_t k = a->order[q];
            const remat_op *op = &g->ops[k];
            if (!op->recomputable || (in_m[k] & ~mask) || !(out_m[k] & ~mask))
                continue;
            uint32_t nm = mask | out_m[k];
            if (pre[p] + mbytes[nm] + op->workspace <= budget)
                RELAX(p * S + nm, op->flops, (uint32_t)REMAT_I_RECOMPUTE << 24 | k);
        }
        if (p < n) {
            uint32_t k = a->order[p];
            uint32_t nm = mask | out_m[k];
            if (!(in_m[k] & ~mask) && hw[p] + mbytes[nm] <= budget)
                RELAX((p + 1) * S + (nm & alive[p + 1]), 0, (uint32_t)REMAT_I_FWD << 24 | k);
        } else {
            uint32_t k = a->bwd_order[p - n];
            if (!(save_m[k] & ~mask) && hw[p] + mbytes[mask] <= budget)
                RELAX((p + 1) * S + (mask & alive[p + 1]), 0, (uint32_t)REMAT_I_BWD << 24 | k);
        }
#undef RELAX
    }
    *ran = st == REMAT_OK;
    if (st == REMAT_OK && goal != SIZE_MAX) {
        *opt = nd[goal].cost;
        uint32_t len = 0;
        for (size_t v = goal; v != 0; v = nd[v].prev)
            len++;
        uint32_t *path = remat__array(len ? len : 1, sizeof *path);
        if (!path) {
            st = remat_err_set(P->err, REMAT_ENOMEM, "out of memory searching schedules");
            goto done_;
        }
        uint32_t i = len;
        for (size_t v = goal; v != 0; v = nd[v].prev)
            path[--i] = nd[v].instr;
        remat_schedule_clear(out);
        /* Replay the path's masks to write the frees that the step edges
         * made implicitly (what no later step needs), right after the step. */
        uint32_t mask = 0;
        for (i = 0; i < len && st == REMAT_OK; i++) {
            remat_instr_kind kind = (remat_instr_kind)(path[i] >> 24);
            uint32_t arg = path[i] & 0xffffff, p = 0, drop = 0;
            if (remat_schedule_push(out, kind, arg) != REMAT_OK)
                st = remat_err_set(P->err, REMAT_ENOMEM, "out of memory searching schedules");
            if (kind == REMAT_I_FREE) {
                mask &= ~(1u << bit[arg]);
            } else if (kind == REMAT_I_RECOMPUTE) {
                mask |= out_m[arg];
            } else {
                mask |= kind == REMAT_I_FWD ? out_m[arg] : 0;
                p = kind == REMAT_I_FWD ? a->pos[arg] + 1 : a->bwd_step[arg] + 1;
                drop = mask & ~alive[p];
                mask &= alive[p];
            }
            for (uint32_t j = 0; j < n_act && st == REMAT_OK; j++)
                if (drop >> j & 1 && remat_schedule_push(out, REMAT_I_FREE, act[j]) != REMAT_OK)
                    st = remat_err_set(P->err, REMAT_ENOMEM, "out of memory searching schedules");
        }
        if (st == REMAT_OK && remat_schedule_push(out, REMAT_I_OPT, 0) != REMAT_OK)
            st = remat_err_set(P->err, REMAT_ENOMEM, "out of memory searching schedules");
        remat__free(path);
    }
done_:
    remat__free(bit);
    remat__free(act);
    remat__free(smask);
    remat__free(sbytes);
    remat__free(mbytes);
    remat__free(pre);
    remat__free(hw);
    remat__free(in_m);
    remat__free(out_m);
    remat__free(save_m);
    remat__free(need);
    remat__free(alive);
    remat__free(nd);
    remat__free(done);
    remat__free(h.cost);
    remat__free(h.state);
    return st;
}

/*
 * class_search.c - the least extra FLOPs over every schedule of the
 * fixed-order class, by a best-first (A*) search with an admissible
 * estimate, and a proven lower bound where the search is stopped (issue
 * 20: auto's certificate is the optimum where the search finishes, and its
 * plan too).
 *
 * The class is bound.c's: FWD steps once each in forward order, BWD steps
 * once each in backward order, any RECOMPUTE and FREE between them. A
 * state is (p, R): the steps before p are done and R is the set of
 * resident activations (at most 64: one bit each). An edge runs one
 * instruction, RECOMPUTE of an op that has run forward, can be recomputed,
 * has its inputs resident and a missing output that a later step may need
 * (cost: its FLOPs), or step p, the next FWD (its inputs resident) or BWD
 * (its saves resident), and then frees any subset of the activations that
 * instruction read or wrote (cost 0). Frees nowhere else: moving each FREE
 * of a schedule back to just after the last instruction that touched its
 * tensor keeps the schedule valid (nothing reads it in between) and lowers
 * memory in between, so the schedules of that form reach the optimum, and
 * the search branches on a handful of frees instead of every resident
 * tensor. An edge exists only if its high-water mark fits the budget: the
 * bytes of the storages with a resident member (a view shares its root's
 * storage), the bytes the instruction allocates and the non-activation part
 * of the budget's categories, which depends on the step order alone
 * (exact_model.c relies on the same fact) and is read from one replay of
 * the store-all schedule (fixed_profile.c): before each step (what a
 * RECOMPUTE there sees, plus its op's workspace), at each step, and at the
 * optimizer step, which must fit with whatever is still resident. A state
 * drops what no later step can need (read directly, or as an input of a
 * recomputation of something read later), and the schedule written back
 * frees it right after the step.
 *
 * The estimate h(p, R), a lower bound on the FLOPs still to recompute:
 * (1) every activation produced before p, read directly at or after p and
 * not in R must be made again, and only a RECOMPUTE of its producer makes
 * it, which needs the op's inputs resident then: so every such op, and the
 * producers of its inputs missing from R, transitively, cost their FLOPs
 * at least once each; (2) at each later step s
 * the activation storages produced before s and read after s that remain
 * resident must fit beside the step's own storages and the fixed part;
 * those missing now (or whose producer (1) already charges) leave at no
 * further cost, any other one left out at s needs a RECOMPUTE of its
 * producer after s, charged a share of that op's FLOPs by bytes, distinct
 * from (1)'s: bound.c's fractional knapsack, from state R. h = (1) + the
 * largest (2). So f = g + h never exceeds the cost of a schedule through
 * the state, A* with re-expansion returns the optimum, and when it stops
 * early the least f on its frontier is a proven lower bound on the optimum
 * (some state of an optimal schedule is always on the frontier). Given an
 * incumbent's cost U, states with f >= U are never opened: an empty
 * frontier then proves that no schedule of the class costs less than U.
 *
 * Cost: O(steps x storages) per state for h; states and frontier are
 * bounded by the caller's limits (expansions, states, a deadline).
 * tests/check_exact.c compares the optimum with an independent search,
 * tests/check_bound.c the stopped search's bound with every strategy's
 * replayed plans.
 */
#include "planner.h"
#include "exact_internal.h"
#include "../util/util_internal.h"

#include <string.h>

__extension__ typedef unsigned __int128 u128;

#define CLASS_MAX_ACT 64
/* More than this many tensors touched by one instruction: 2^n free subsets
 * per edge is too many; the search declines the graph. */
#define CLASS_MAX_TOUCHED 12
#define CLASS_DEFAULT_EXPANSIONS 400000u
#define CLASS_DEFAULT_STATES 2000000u
#define CLASS_DIVE_EVERY 1024u
#define CLASS_DIVE_WORK 512u
#define INF UINT64_MAX

typedef struct {
    uint64_t mask, g, h;
    uint32_t p, parent, instr; /* instr: kind << 24 | arg of the edge from parent */
} cnode;

typedef struct {
    uint64_t f, g;
    uint32_t node, p;
} hentry;

/* 1 if x should come out before y: least f, then the most spent (the
 * least left to estimate), then the deeper step. */
static int before(const hentry *x, const hentry *y)
{
    if (x->f != y->f)
        return x->f < y->f;
    if (x->g != y->g)
        return x->g > y->g;
    return x->p > y->p;
}

typedef struct {
    hentry *v;
    size_t n, cap;
} cheap;

static int cheap_push(cheap *h, hentry e)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 4096;
        hentry *v = remat__realloc(h->v, cap * sizeof *v);
        if (!v)
            return 0;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0 && before(&e, &h->v[(i - 1) / 2])) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = e;
    return 1;
}

static hentry cheap_pop(cheap *h)
{
    hentry top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        const hentry *mv = &last;
        if (l < h->n && before(&h->v[l], mv))
            m = l, mv = &h->v[l];
        if (l + 1 < h->n && before(&h->v[l + 1], mv))
            m = l + 1;
        if (m == i)
            break;
        h->v[i] = h->v[m];
        i = m;
    }
    if (h->n)
        h->v[i] = last;
    return top;
}

/* One droppable storage at a pressure step (the estimate's part 2). */
typedef struct {
    uint64_t smask, bytes, cost;
    uint32_t born, bit;
} pitem;

typedef struct {
    uint32_t step, off, n;
    uint64_t excess; /* over the budget with every listed storage resident */
    uint64_t most;   /* the step's charge with nothing missing: no state's is higher */
    uint64_t roots;  /* the listed storages' root bits */
} pstep;

typedef struct {
    remat_planner *P;
    const remat_analysis *a;
    const remat_graph *g;
    uint32_t n, T, n_act;
    uint64_t budget;
    uint32_t *bit, *act;
    uint64_t *smask;      /* per member: its storage's members */
    uint32_t n_roots;
    uint64_t *root_mask;  /* per activation storage: its members */
    uint64_t *root_bytes;
    uint32_t *root_bit;   /* per activation storage: its root's bit */
    uint64_t root_bits;   /* every root's bit */
    uint64_t *bit_bytes;  /* per bit: its bytes when it is a root */
    uint64_t *bornmask;   /* per step: the bits produced before it */
    int has_views;
    uint64_t *in_m, *out_m, *save_m; /* per op */
    uint64_t *alive;      /* per step: what a later step may need */
    uint64_t *needmask;   /* per step: produced before it and read directly at or after it */
    uint64_t *pre, *hw;
    uint32_t *prod;       /* per member: its producer op */
    uint32_t *stamp, gen; /* per op */
    pitem *items;
    pstep *ps;
    uint32_t n_ps;
    cnode *nd;
    uint32_t n_nd, cap_nd, max_nd;
    uint32_t *slot;
    uint32_t slot_mask;
    cheap heap;
    uint64_t ub;
    uint64_t work; /* 8 an expansion, 4 a look-up, 4 a state, 1 per step and storage the estimate visits */
    /* Dives (file comment): the best successor seen, and the schedule of
     * the cheapest complete schedule found so far (own = 1). */
    int diving;
    cnode *kids;
    size_t kids_n, kids_cap;
    remat_schedule found;
    int own;
} search;

static uint64_t bytes_of(const search *S, uint64_t mask)
{
    uint64_t b = 0;
    for (uint32_t j = 0; j < S->n_roots; j++)
        if (mask & S->root_mask[j])
            b += S->root_bytes[j];
    return b;
}

static uint64_t bits_of(const search *S, const uint32_t *ts, uint32_t n)
{
    uint64_t m = 0;
    for (uint32_t i = 0; i < n; i++)
        if (S->g->tensors[ts[i]].kind == REMAT_TENSOR_ACTIVATION)
            m |= 1ull << S->bit[ts[i]];
    return m;
}

/* The estimate (file comment); INF when no schedule can go on from here. */
static uint64_t estimate(search *S, uint32_t p, uint64_t mask)
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
            return INF;
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
        const pstep *s = &S->ps[q];
        if (s->most <= h2)
            break; /* by most, descending: no later step can raise h2 */
        if (s->step < p)
            continue;
        uint64_t rem = s->excess;
        for (uint64_t m = free_r & s->roots; m && rem; m &= m - 1) {
            uint64_t b = S->bit_bytes[__builtin_ctzll(m)];
            rem = rem > b ? rem - b : 0;
        }
        const pitem *it = S->items + s->off;
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
                                                    : (uint64_t)((u128)it[i].cost * rem / it[i].bytes);
                rem = 0;
            }
        }
        S->work += 1 + i;
        if (rem)
            return INF;
        if (c > h2)
            h2 = c;
    }
    return h1 + h2 < h1 ? INF : h1 + h2;
}

static uint32_t hash_of(uint32_t p, uint64_t mask)
{
    uint64_t x = mask ^ ((uint64_t)p * 0x9e3779b97f4a7c15ull);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (uint32_t)x;
}

/* Doubles the slot table; 0 on out of memory. */
static int rehash(search *S)
{
    uint32_t cap = (S->slot_mask + 1) * 2;
    uint32_t *sl = remat__calloc(cap, sizeof *sl);
    if (!sl)
        return 0;
    for (uint32_t i = 0; i < S->n_nd; i++) {
        uint32_t h = hash_of(S->nd[i].p, S->nd[i].mask) & (cap - 1);
        while (sl[h])
            h = (h + 1) & (cap - 1);
        sl[h] = i + 1;
    }
    remat__free(S->slot);
    S->slot = sl;
    S->slot_mask = cap - 1;
    return 1;
}

/* Offers the state (p, mask) at cost c from node u by instr. Returns 0 on
 * out of memory, 2 when the state table is full, 1 otherwise. */
static int relax(search *S, uint32_t u, uint32_t p, uint64_t mask, uint64_t c, uint32_t instr)
{
    if (S->diving) {
        uint64_t est = estimate(S, p, mask);
        if (est == INF || c + est < c || c + est >= S->ub)
            return 1;
        if (S->kids_n == S->kids_cap) {
            size_t nc = S->kids_cap ? 2 * S->kids_cap : 256;
            cnode *k = remat__realloc(S->kids, nc * sizeof *k);
            if (!k)
                return 0;
            S->kids = k;
            S->kids_cap = nc;
        }
        S->kids[S->kids_n++] = (cnode){mask, c, est, p, u, instr};
        return 1;
    }
    uint32_t h = hash_of(p, mask) & S->slot_mask, v = UINT32_MAX;
    S->work += 4;
    while (S->slot[h]) {
        const cnode *x = &S->nd[S->slot[h] - 1];
        if (x->p == p && x->mask == mask) {
            v = S->slot[h] - 1;
            break;
        }
        h = (h + 1) & S->slot_mask;
    }
    if (v == UINT32_MAX) {
        uint64_t est = estimate(S, p, mask);
        if (est == INF || c + est < c || c + est >= S->ub)
            return 1;
        if (S->n_nd >= S->max_nd)
            return 2;
        if (S->n_nd == S->cap_nd) {
            uint32_t cap = S->cap_nd ? 2 * S->cap_nd : 4096;
            if (cap > S->max_nd)
                cap = S->max_nd;
            cnode *nd = remat__realloc(S->nd, (size_t)cap * sizeof *nd);
            if (!nd)
                return 0;
            S->nd = nd;
            S->cap_nd = cap;
        }
        v = S->n_nd++;
        S->nd[v] = (cnode){mask, c, est, p, u, instr};
        S->slot[h] = v + 1;
        if ((uint64_t)S->n_nd * 2 > S->slot_mask && !rehash(S))
            return 0;
    } else {
        cnode *x = &S->nd[v];
        if (c >= x->g || c + x->h >= S->ub)
            return 1;
        x->g = c;
        x->parent = u;
        x->instr = instr;
    }
    const cnode *x = &S->nd[v];
    return cheap_push(&S->heap, (hentry){x->g + x->h, x->g, v, p});
}

/* The edges of one instruction: m1 the mask after it, touched what it read
 * or wrote; every subset of touched may be freed, then what is not alive at
 * step np is dropped. */
static int relax_frees(search *S, uint32_t u, uint32_t np, uint64_t m1, uint64_t touched, uint64_t c, uint32_t instr)
{
    m1 &= S->alive[np];
    touched &= m1;
    /* Enumerate the subsets of touched (Gosper-free: x = (x - t) & t). */
    uint64_t f = 0;
    do {
        int r = relax(S, u, np, m1 & ~f, c, instr);
        if (r != 1)
            return r;
        f = (f - touched) & touched;
    } while (f);
    return 1;
}

/* Builds the tables the search and the estimate read; REMAT_OK and
 * *usable = 0 when the graph is out of the search's reach. */
static remat_status prepare(search *S, int *usable)
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
            pitem *x = &S->items[off + cnt++];
            x->smask = rm;
            x->bytes = S->root_bytes[j];
            x->cost = own[k] ? (uint64_t)((u128)g->ops[k].flops * x->bytes / own[k]) : 0;
            x->born = born[rb];
            x->bit = rb;
        }
        (void)fixed_b;
        if (total <= S->budget)
            continue;
        /* Lowest charge per byte first (insertion sort: a few dozen). */
        pitem *it = &S->items[off];
        for (uint32_t i = 1; i < cnt; i++) {
            pitem x = it[i];
            uint32_t j = i;
            while (j > 0 && (u128)x.cost * it[j - 1].bytes < (u128)it[j - 1].cost * x.bytes) {
                it[j] = it[j - 1];
                j--;
            }
            it[j] = x;
        }
        uint64_t rem = total - S->budget, most = 0;
        for (uint32_t i = 0; i < cnt && rem; i++) {
            uint64_t b = it[i].bytes < rem ? it[i].bytes : rem;
            most += b == it[i].bytes ? it[i].cost : (uint64_t)((u128)it[i].cost * b / it[i].bytes);
            rem -= b;
        }
        uint64_t roots = 0;
        for (uint32_t i = 0; i < cnt; i++)
            roots |= 1ull << it[i].bit;
        S->ps[S->n_ps++] = (pstep){s, off, cnt, total - S->budget, rem ? INF : most, roots};
        off += cnt;
    }
    /* The estimate visits the steps by their largest charge, descending,
     * and stops at the first that cannot beat what it has. */
    for (uint32_t i = 1; i < S->n_ps; i++) {
        pstep x = S->ps[i];
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

static void release(search *S)
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

/* Offers every edge out of state (p, mask) at cost cu, from node u (the
 * dive's state when diving). Returns relax's codes. */
static int edges(search *S, uint32_t u, uint32_t p, uint64_t mask, uint64_t cu)
{
    const remat_analysis *a = S->a;
    const remat_graph *g = S->g;
    const uint32_t n = S->n;
    int r = 1;
    const uint32_t lim_q = p < n ? p : n;
    for (uint32_t q = 0; q < lim_q && r == 1; q++) {
        uint32_t k = a->order[q];
        const remat_op *op = &g->ops[k];
        if (!op->recomputable || (S->in_m[k] & ~mask) || !(S->out_m[k] & ~mask & S->alive[p]))
            continue;
        uint64_t nm = mask | S->out_m[k];
        if (S->pre[p] + bytes_of(S, nm) + op->workspace > S->budget)
            continue;
        r = relax_frees(S, u, p, nm, S->in_m[k] | S->out_m[k], cu + op->flops, (uint32_t)REMAT_I_RECOMPUTE << 24 | k);
    }
    if (r == 1 && p < n) {
        uint32_t k = a->order[p];
        uint64_t nm = mask | S->out_m[k];
        if (!(S->in_m[k] & ~mask) && S->hw[p] + bytes_of(S, nm) <= S->budget)
            r = relax_frees(S, u, p + 1, nm, S->in_m[k] | S->out_m[k], cu, (uint32_t)REMAT_I_FWD << 24 | k);
    } else if (r == 1 && p < S->T) {
        uint32_t k = a->bwd_order[p - n];
        if (!(S->save_m[k] & ~mask) && S->hw[p] + bytes_of(S, mask) <= S->budget)
            r = relax_frees(S, u, p + 1, mask, S->save_m[k], cu, (uint32_t)REMAT_I_BWD << 24 | k);
    }
    return r;
}

/* Appends one edge to s: its instruction, then FREE of what it dropped
 * (its chosen frees and what no later step needs). */
static int push_edge(const search *S, remat_schedule *s, uint64_t from, uint64_t to, uint32_t instr)
{
    remat_instr_kind kind = (remat_instr_kind)(instr >> 24);
    uint32_t arg = instr & 0xffffff;
    uint64_t m1 = from | (kind == REMAT_I_BWD ? 0 : S->out_m[arg]);
    if (remat_schedule_push(s, kind, arg) != REMAT_OK)
        return 0;
    for (uint64_t d = m1 & ~to; d; d &= d - 1)
        if (remat_schedule_push(s, REMAT_I_FREE, S->act[__builtin_ctzll(d)]) != REMAT_OK)
            return 0;
    return 1;
}

/* The schedule of the table's path to node v, without the optimizer step. */
static int write_path(search *S, uint32_t v, remat_schedule *out)
{
    uint32_t len = 0;
    for (uint32_t x = v; x != 0; x = S->nd[x].parent)
        len++;
    uint32_t *path = remat__array(len ? len : 1, sizeof *path);
    if (!path)
        return 0;
    uint32_t i = len;
    for (uint32_t x = v; x != 0; x = S->nd[x].parent)
        path[--i] = x;
    remat_schedule_clear(out);
    int ok = 1;
    for (i = 0; i < len && ok; i++)
        ok = push_edge(S, out, S->nd[S->nd[path[i]].parent].mask, S->nd[path[i]].mask, S->nd[path[i]].instr);
    remat__free(path);
    return ok;
}

/* A dive: a depth-first search from table node v, the successors of each
 * state tried by f (then the most spent), pruned at the incumbent, until
 * CLASS_DIVE_WORK states are expanded. A complete schedule cheaper than ub
 * becomes the search's incumbent (S->found, S->ub). Returns 0 on out of
 * memory. */
static int dive(search *S, uint32_t v, uint64_t *work)
{
    typedef struct {
        size_t lo, pos, hi;
    } level;
    const uint32_t max_depth = 4 * S->T + 16;
    level *lv = remat__array(max_depth + 1, sizeof *lv);
    cnode *kids = NULL;
    size_t n_kids = 0, cap = 0;
    int ok = lv != NULL;
    uint32_t depth = 0;
    uint64_t spent = 0;
    cnode cur = S->nd[v];
    /* Collects cur's successors, best first, as a new level. */
#define EXPAND_CUR()                                                                                                   \
    do {                                                                                                               \
        S->diving = 2;                                                                                                 \
        S->kids_n = 0;                                                                                                 \
        edges(S, 0, cur.p, cur.mask, cur.g);                                                                           \
        S->diving = 0;                                                                                                 \
        spent++;                                                                                                       \
        if (n_kids + S->kids_n > cap) {                                                                                \
            size_t nc = (n_kids + S->kids_n) * 2 + 64;                                                                 \
            cnode *k2 = remat__realloc(kids, nc * sizeof *k2);                                                         \
            if (!k2) {                                                                                                 \
                ok = 0;                                                                                                \
                break;                                                                                                 \
            }                                                                                                          \
            kids = k2;                                                                                                 \
            cap = nc;                                                                                                  \
        }                                                                                                              \
        for (size_t i_ = 0; i_ < S->kids_n; i_++) {                                                                    \
            cnode x_ = S->kids[i_];                                                                                    \
            size_t j_ = n_kids + i_;                                                                                   \
            hentry hx = {x_.g + x_.h, x_.g, 0, x_.p};                                                                  \
            while (j_ > n_kids) {                                                                                      \
                hentry hy = {kids[j_ - 1].g + kids[j_ - 1].h, kids[j_ - 1].g, 0, kids[j_ - 1].p};                      \
                if (!before(&hx, &hy))                                                                                 \
                    break;                                                                                             \
                kids[j_] = kids[j_ - 1];                                                                               \
                j_--;                                                                                                  \
            }                                                                                                          \
            kids[j_] = x_;                                                                                             \
        }                                                                                                              \
        lv[depth] = (level){n_kids, n_kids, n_kids + S->kids_n};                                                       \
        n_kids += S->kids_n;                                                                                           \
    } while (0)
    if (ok)
        EXPAND_CUR();
    while (ok && spent < CLASS_DIVE_WORK) {
        level *L = &lv[depth];
        while (L->pos < L->hi && kids[L->pos].g + kids[L->pos].h >= S->ub)
            L->pos = L->hi; /* sorted by f: the rest cannot beat the incumbent */
        if (L->pos >= L->hi) {
            if (depth == 0)
                break;
            n_kids = L->lo;
            depth--;
            continue;
        }
        cur = kids[L->pos++];
        if (cur.p == S->T) {
            if (S->hw[S->T] + bytes_of(S, cur.mask) <= S->budget && cur.g < S->ub) {
                ok = write_path(S, v, &S->found);
                uint64_t from = S->nd[v].mask;
                for (uint32_t d = 0; ok && d <= depth; d++) {
                    const cnode *x = &kids[lv[d].pos - 1];
                    ok = push_edge(S, &S->found, from, x->mask, x->instr);
                    from = x->mask;
                }
                ok = ok && remat_schedule_push(&S->found, REMAT_I_OPT, 0) == REMAT_OK;
                S->ub = cur.g;
                S->own = ok;
            }
            continue;
        }
        if (depth + 1 >= max_depth)
            continue;
        depth++;
        EXPAND_CUR();
    }
#undef EXPAND_CUR
    *work += spent;
    remat__free(lv);
    remat__free(kids);
    return ok;
}

remat_status remat__class_search_within(remat_planner *P, remat_class_limits *lim, remat_schedule *out,
                                        uint64_t *opt, uint64_t *lb, int *ran)
{
    const remat_analysis *a = P->a;
    const remat_graph *g = a->g;
    *ran = 0;
    *opt = INF;
    *lb = 0;
    /* The search's states hold activations only; a sharded rank's
     * collectives are not among its edges. */
    if (P->o->budget_kind == REMAT_BUDGET_NONE || P->o->extras.sharding)
        return REMAT_OK;
    search S;
    memset(&S, 0, sizeof S);
    S.P = P;
    S.a = a;
    S.g = g;
    S.n = g->n_ops;
    S.T = g->n_ops + a->n_bwd;
    S.budget = P->o->budget;
    S.ub = lim && lim->ub ? lim->ub : INF;
    for (uint32_t t = 0; t < g->n_tensors; t++)
        S.n_act += g->tensors[t].kind == REMAT_TENSOR_ACTIVATION;
    if (S.n_act > CLASS_MAX_ACT)
        return REMAT_OK;
    const uint64_t max_exp = lim && lim->expansions ? lim->expansions : CLASS_DEFAULT_EXPANSIONS;
    const uint64_t max_work = lim && lim->work ? lim->work : UINT64_MAX;
    S.max_nd = lim && lim->states ? lim->states : CLASS_DEFAULT_STATES;
    if (S.max_nd < 2)
        S.max_nd = 2;
    const double deadline = lim ? lim->deadline : 0;
    int usable = 0;
    remat_status st = prepare(&S, &usable);
    if (st != REMAT_OK || !usable) {
        release(&S);
        return st;
    }
    S.slot_mask = 4095;
    S.slot = remat__calloc(S.slot_mask + 1, sizeof *S.slot);
    if (!S.slot) {
        release(&S);
        return remat_err_set(P->err, REMAT_ENOMEM, "out of memory searching schedules");
    }
    /* The root: nothing done, nothing resident. */
    uint64_t h0 = estimate(&S, 0, 0);
    if (h0 == INF || h0 >= S.ub) {
        /* Nothing of the class can run, or cost less than the incumbent. */
        *ran = 1;
        *lb = h0 == INF ? INF : S.ub;
        if (h0 != INF && S.ub == INF)
            *lb = h0;
        release(&S);
        return REMAT_OK;
    }
    S.nd = remat__array(4096, sizeof *S.nd);
    S.cap_nd = 4096;
    if (!S.nd || !cheap_push(&S.heap, (hentry){h0, 0, 0, 0})) {
        release(&S);
        return remat_err_set(P->err, REMAT_ENOMEM, "out of memory searching schedules");
    }
    S.nd[0] = (cnode){0, 0, h0, 0, 0, 0};
    S.n_nd = 1;
    S.slot[hash_of(0, 0) & S.slot_mask] = 1;
    uint64_t expansions = 0, last_f = h0, ticks = 0;
    uint32_t goal = UINT32_MAX;
    int stopped = 0;
    remat_schedule_init(&S.found);
    /* A first dive from the root gives an incumbent (or a better one). */
    if (!dive(&S, 0, &expansions))
        st = remat_err_set(P->err, REMAT_ENOMEM, "out of memory searching schedules");
    while (S.heap.n > 0 && st == REMAT_OK) {
        hentry e = S.heap.v[0];
        const cnode *x0 = &S.nd[e.node];
        if (e.g != x0->g || e.f >= S.ub) { /* improved since it was pushed, or no better than the incumbent */
            cheap_pop(&S.heap);
            continue;
        }
        if (expansions >= max_exp || S.work >= max_work ||
            (deadline > 0 && ++ticks % 256 == 0 && remat__exact_now() > deadline)) {
            stopped = 1; /* e stays on the frontier: its f is the least there */
            break;
        }
        cheap_pop(&S.heap);
        expansions++;
        S.work += 8;
        last_f = e.f;
        const uint32_t u = e.node, p = x0->p;
        const uint64_t mask = x0->mask, cu = x0->g;
        if (p == S.T) {
            if (S.hw[S.T] + bytes_of(&S, mask) <= S.budget) {
                goal = u;
                break;
            }
            continue;
        }
        /* Now and then a dive from the best open state: the frontier can
         * hold a plateau of equal f that best-first alone crosses slowly. */
        if (expansions % CLASS_DIVE_EVERY == 0 && !dive(&S, u, &expansions)) {
            st = remat_err_set(P->err, REMAT_ENOMEM, "out of memory searching schedules");
            break;
        }
        int r = edges(&S, u, p, mask, cu);
        if (r == 0)
            st = remat_err_set(P->err, REMAT_ENOMEM, "out of memory searching schedules");
        else if (r == 2) {
            stopped = 1; /* the state table is full; the frontier still bounds */
            break;
        }
    }
    if (st == REMAT_OK) {
        if (goal != UINT32_MAX) {
            /* Popped at the least f, below every incumbent: the optimum. */
            *ran = 1;
            *opt = *lb = S.nd[goal].g;
            if (!write_path(&S, goal, out) || remat_schedule_push(out, REMAT_I_OPT, 0) != REMAT_OK)
                st = remat_err_set(P->err, REMAT_ENOMEM, "out of memory searching schedules");
        } else {
            if (S.own) {
                /* A dive's schedule, cheaper than the caller's incumbent. */
                *opt = S.ub;
                remat_schedule_destroy(out);
                *out = S.found;
                remat_schedule_init(&S.found);
            }
            if (stopped) {
                /* The least f among fresh frontier entries (stale ones have
                 * a larger f than their fresh twin) and of the state being
                 * expanded when the table filled (some of its successors may
                 * be missing), never above the incumbent, below which
                 * everything was searched. */
                uint64_t best = last_f < S.ub ? last_f : S.ub;
                for (size_t i = 0; i < S.heap.n; i++) {
                    const hentry *h = &S.heap.v[i];
                    if (h->g == S.nd[h->node].g && h->f < best)
                        best = h->f;
                }
                *lb = best;
            } else {
                /* Everything below the incumbent searched: nothing cheaper. */
                *ran = 1;
                *lb = S.ub;
            }
        }
    }
    remat_schedule_destroy(&S.found);
    if (lim)
        lim->expanded = expansions;
    release(&S);
    return st;
}

remat_status remat__class_search(remat_planner *P, remat_schedule *out, uint64_t *opt, int *ran)
{
    uint64_t lb = 0;
    remat_status st = remat__class_search_within(P, NULL, out, opt, &lb, ran);
    /* The old contract: ran means the optimum is known (or none fits). */
    if (st == REMAT_OK && *ran && *opt == INF && lb != INF)
        *ran = 0;
    return st;
}

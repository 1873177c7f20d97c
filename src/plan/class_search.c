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
 * tests/check_exact_random.c compares the optimum with an independent search,
 * tests/check_bound.c the stopped search's bound with every strategy's
 * replayed plans.
 */
#include "class_internal.h"
#include "exact_internal.h"
#include "../util/util_internal.h"

#include <string.h>

#define CLASS_DEFAULT_EXPANSIONS 400000u
#define CLASS_DEFAULT_STATES 2000000u
#define CLASS_DIVE_EVERY 1024u
#define CLASS_DIVE_WORK 512u

/* 1 if x should come out before y: least f, then the fewest resident
 * activations, then the most spent (the least left to estimate), then the
 * deeper step. The second key crosses plateaus of equal f: on vgg_unet at
 * 0.6 of its peak the optimum lies among 3.7 x 10^6 states of equal f,
 * most of them dead ends that hold too much to finish within the budget;
 * the search that opens the leanest first reaches it after 4,274
 * expansions instead of 3.7 x 10^6 (the most spent first) or 3.9 x 10^6
 * (the deepest first). */
static int before(const class_hentry *x, const class_hentry *y)
{
    if (x->f != y->f)
        return x->f < y->f;
    if (x->pop != y->pop)
        return x->pop < y->pop;
    if (x->g != y->g)
        return x->g > y->g;
    return x->p > y->p;
}
static int cheap_push(class_heap *h, class_hentry e)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 4096;
        class_hentry *v = remat__realloc(h->v, cap * sizeof *v);
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

static class_hentry cheap_pop(class_heap *h)
{
    class_hentry top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        const class_hentry *mv = &last;
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
static uint32_t hash_of(uint32_t p, uint64_t mask)
{
    uint64_t x = mask ^ ((uint64_t)p * 0x9e3779b97f4a7c15ull);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (uint32_t)x;
}

/* A slot holds a node's index + 1 in its low half and its full hash in the
 * high half: a probe compares the hash before it reads the node, so a
 * mismatch costs no miss in the (large) node array, and a rehash needs no
 * node at all (the look-ups are most of the search's time). */
#define SLOT_NODE(x) ((uint32_t)(x))
#define SLOT_HASH(x) ((uint32_t)((x) >> 32))

/* Doubles the slot table; 0 on out of memory. */
static int rehash(class_state *S)
{
    uint32_t cap = (S->slot_mask + 1) * 2;
    uint64_t *sl = remat__calloc(cap, sizeof *sl);
    if (!sl)
        return 0;
    for (uint32_t i = 0; i <= S->slot_mask; i++) {
        if (!S->slot[i])
            continue;
        uint32_t h = SLOT_HASH(S->slot[i]) & (cap - 1);
        while (sl[h])
            h = (h + 1) & (cap - 1);
        sl[h] = S->slot[i];
    }
    remat__free(S->slot);
    S->slot = sl;
    S->slot_mask = cap - 1;
    return 1;
}

/* Offers the state (p, mask) at cost c from node u by instr. Returns 0 on
 * out of memory, 2 when the state table is full, 1 otherwise. */
static int relax(class_state *S, uint32_t u, uint32_t p, uint64_t mask, uint64_t c, uint32_t instr)
{
    if (S->diving) {
        uint64_t est = remat__class_estimate(S, p, mask);
        if (est == CLASS_INF || c + est < c || c + est >= S->ub)
            return 1;
        if (S->kids_n == S->kids_cap) {
            size_t nc = S->kids_cap ? 2 * S->kids_cap : 256;
            class_node *k = remat__realloc(S->kids, nc * sizeof *k);
            if (!k)
                return 0;
            S->kids = k;
            S->kids_cap = nc;
        }
        S->kids[S->kids_n++] = (class_node){mask, c, est, p, u, instr};
        return 1;
    }
    const uint32_t hf = hash_of(p, mask);
    uint32_t h = hf & S->slot_mask, v = UINT32_MAX;
    S->work += 4;
    while (S->slot[h]) {
        const class_node *x = &S->nd[SLOT_NODE(S->slot[h]) - 1];
        if (SLOT_HASH(S->slot[h]) == hf && x->p == p && x->mask == mask) {
            v = SLOT_NODE(S->slot[h]) - 1;
            break;
        }
        h = (h + 1) & S->slot_mask;
    }
    if (v == UINT32_MAX) {
        uint64_t est = remat__class_estimate(S, p, mask);
        if (est == CLASS_INF || c + est < c || c + est >= S->ub)
            return 1;
        if (S->n_nd >= S->max_nd)
            return 2;
        if (S->n_nd == S->cap_nd) {
            uint32_t cap = S->cap_nd ? 2 * S->cap_nd : 4096;
            if (cap > S->max_nd)
                cap = S->max_nd;
            class_node *nd = remat__realloc(S->nd, (size_t)cap * sizeof *nd);
            if (!nd)
                return 0;
            S->nd = nd;
            S->cap_nd = cap;
        }
        v = S->n_nd++;
        S->nd[v] = (class_node){mask, c, est, p, u, instr};
        S->slot[h] = (uint64_t)hf << 32 | (v + 1);
        if ((uint64_t)S->n_nd * 2 > S->slot_mask && !rehash(S))
            return 0;
    } else {
        class_node *x = &S->nd[v];
        if (c >= x->g || c + x->h >= S->ub)
            return 1;
        x->g = c;
        x->parent = u;
        x->instr = instr;
    }
    const class_node *x = &S->nd[v];
    return cheap_push(&S->heap, (class_hentry){x->g + x->h, x->g, v, p, (uint32_t)__builtin_popcountll(mask)});
}

/* The edges of one instruction: m1 the mask after it, touched what it read
 * or wrote; every subset of touched may be freed, then what is not alive at
 * step np is dropped. */
static int relax_frees(class_state *S, uint32_t u, uint32_t np, uint64_t m1, uint64_t touched, uint64_t c, uint32_t instr)
{
    m1 &= S->alive[np];
    touched &= m1;
    /* Enumerate the subsets of touched (Gosper-free: x = (x - t) & t),
     * first to prefetch their slots (each look-up is a cache miss; issued
     * together they overlap), then to relax them. */
    uint64_t f = 0;
    if (!S->diving)
        do {
            __builtin_prefetch(&S->slot[hash_of(np, m1 & ~f) & S->slot_mask]);
            f = (f - touched) & touched;
        } while (f);
    do {
        int r = relax(S, u, np, m1 & ~f, c, instr);
        if (r != 1)
            return r;
        f = (f - touched) & touched;
    } while (f);
    return 1;
}
/* Offers every edge out of state (p, mask) at cost cu, from node u (the
 * dive's state when diving). Returns relax's codes. */
static int edges(class_state *S, uint32_t u, uint32_t p, uint64_t mask, uint64_t cu)
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
        if (S->pre[p] + remat__class_bytes(S, nm) + op->workspace > S->budget)
            continue;
        r = relax_frees(S, u, p, nm, S->in_m[k] | S->out_m[k], cu + op->flops, (uint32_t)REMAT_I_RECOMPUTE << 24 | k);
    }
    if (r == 1 && p < n) {
        uint32_t k = a->order[p];
        uint64_t nm = mask | S->out_m[k];
        if (!(S->in_m[k] & ~mask) && S->hw[p] + remat__class_bytes(S, nm) <= S->budget)
            r = relax_frees(S, u, p + 1, nm, S->in_m[k] | S->out_m[k], cu, (uint32_t)REMAT_I_FWD << 24 | k);
    } else if (r == 1 && p < S->T) {
        uint32_t k = a->bwd_order[p - n];
        if (!(S->save_m[k] & ~mask) && S->hw[p] + remat__class_bytes(S, mask) <= S->budget)
            r = relax_frees(S, u, p + 1, mask, S->save_m[k], cu, (uint32_t)REMAT_I_BWD << 24 | k);
    }
    return r;
}

/* Appends one edge to s: its instruction, then FREE of what it dropped
 * (its chosen frees and what no later step needs). */
static int push_edge(const class_state *S, remat_schedule *s, uint64_t from, uint64_t to, uint32_t instr)
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
static int write_path(class_state *S, uint32_t v, remat_schedule *out)
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
static int dive(class_state *S, uint32_t v, uint64_t *work)
{
    typedef struct {
        size_t lo, pos, hi;
    } level;
    const uint32_t max_depth = 4 * S->T + 16;
    level *lv = remat__array(max_depth + 1, sizeof *lv);
    class_node *kids = NULL;
    size_t n_kids = 0, cap = 0;
    int ok = lv != NULL;
    uint32_t depth = 0;
    uint64_t spent = 0;
    class_node cur = S->nd[v];
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
            class_node *k2 = remat__realloc(kids, nc * sizeof *k2);                                                         \
            if (!k2) {                                                                                                 \
                ok = 0;                                                                                                \
                break;                                                                                                 \
            }                                                                                                          \
            kids = k2;                                                                                                 \
            cap = nc;                                                                                                  \
        }                                                                                                              \
        for (size_t i_ = 0; i_ < S->kids_n; i_++) {                                                                    \
            class_node x_ = S->kids[i_];                                                                                    \
            size_t j_ = n_kids + i_;                                                                                   \
            class_hentry hx = {x_.g + x_.h, x_.g, 0, x_.p, (uint32_t)__builtin_popcountll(x_.mask)};                                                                \
            while (j_ > n_kids) {                                                                                      \
                class_hentry hy = {kids[j_ - 1].g + kids[j_ - 1].h, kids[j_ - 1].g, 0, kids[j_ - 1].p,                          \
                                  (uint32_t)__builtin_popcountll(kids[j_ - 1].mask)};                      \
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
            if (S->hw[S->T] + remat__class_bytes(S, cur.mask) <= S->budget && cur.g < S->ub) {
                ok = write_path(S, v, &S->found);
                uint64_t from = S->nd[v].mask;
                for (uint32_t d = 0; ok && d <= depth; d++) {
                    const class_node *x = &kids[lv[d].pos - 1];
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
    *opt = CLASS_INF;
    *lb = 0;
    /* The search's states hold activations only; a sharded rank's
     * collectives are not among its edges. */
    if (P->o->budget_kind == REMAT_BUDGET_NONE || P->o->extras.sharding)
        return REMAT_OK;
    class_state S;
    memset(&S, 0, sizeof S);
    S.P = P;
    S.a = a;
    S.g = g;
    S.n = g->n_ops;
    S.T = g->n_ops + a->n_bwd;
    S.budget = P->o->budget;
    S.ub = lim && lim->ub ? lim->ub : CLASS_INF;
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
    remat_status st = remat__class_prepare(&S, &usable);
    if (st != REMAT_OK || !usable) {
        remat__class_release(&S);
        return st;
    }
    S.slot_mask = 4095;
    S.slot = remat__calloc(S.slot_mask + 1, sizeof *S.slot);
    if (!S.slot) {
        remat__class_release(&S);
        return remat_err_set(P->err, REMAT_ENOMEM, "out of memory searching schedules");
    }
    /* The root: nothing done, nothing resident. */
    uint64_t h0 = remat__class_estimate(&S, 0, 0);
    if (h0 == CLASS_INF || h0 >= S.ub) {
        /* Nothing of the class can run, or cost less than the incumbent. */
        *ran = 1;
        *lb = h0 == CLASS_INF ? CLASS_INF : S.ub;
        if (h0 != CLASS_INF && S.ub == CLASS_INF)
            *lb = h0;
        remat__class_release(&S);
        return REMAT_OK;
    }
    S.nd = remat__array(4096, sizeof *S.nd);
    S.cap_nd = 4096;
    if (!S.nd || !cheap_push(&S.heap, (class_hentry){h0, 0, 0, 0, 0})) {
        remat__class_release(&S);
        return remat_err_set(P->err, REMAT_ENOMEM, "out of memory searching schedules");
    }
    S.nd[0] = (class_node){0, 0, h0, 0, 0, 0};
    S.n_nd = 1;
    S.slot[hash_of(0, 0) & S.slot_mask] = (uint64_t)hash_of(0, 0) << 32 | 1;
    uint64_t expansions = 0, last_f = h0, ticks = 0;
    uint32_t goal = UINT32_MAX;
    int stopped = 0;
    remat_schedule_init(&S.found);
    /* A first dive from the root gives an incumbent (or a better one). */
    if (!dive(&S, 0, &expansions))
        st = remat_err_set(P->err, REMAT_ENOMEM, "out of memory searching schedules");
    while (S.heap.n > 0 && st == REMAT_OK) {
        class_hentry e = S.heap.v[0];
        const class_node *x0 = &S.nd[e.node];
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
            if (S.hw[S.T] + remat__class_bytes(&S, mask) <= S.budget) {
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
                    const class_hentry *h = &S.heap.v[i];
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
    remat__class_release(&S);
    return st;
}

remat_status remat__class_search(remat_planner *P, remat_schedule *out, uint64_t *opt, int *ran)
{
    uint64_t lb = 0;
    remat_status st = remat__class_search_within(P, NULL, out, opt, &lb, ran);
    /* The old contract: ran means the optimum is known (or none fits). */
    if (st == REMAT_OK && *ran && *opt == CLASS_INF && lb != CLASS_INF)
        *ran = 0;
    return st;
}

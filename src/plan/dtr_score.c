/*
 * dtr_score.c - choosing DTR's victims: the three scores and the search for
 * the smallest (the design is in dtr.c).
 *
 * An evicted tensor here is an activation that has been produced, is not
 * resident, can be rebuilt, and is not banished (a later step may need it).
 *
 * The search is lazy and exact. Within one instruction the clock stands
 * still and evicting a tensor can only raise other tensors' h_dtr and eq
 * scores (their evicted neighbourhoods grow), so every key computed earlier
 * in the same instruction stays a lower bound. Candidates enter one heap
 * keyed by their local score, a lower bound of all three scores that costs
 * O(1) (the local score plus nsum, the evicted direct neighbours' costs
 * shared among their op's outputs); a popped entry gets its exact score and
 * goes back, and one whose key is its exact score, computed since the last
 * eviction, is the minimum. Most candidates are never scored exactly.
 */
#include "dtr_internal.h"
#include "../util/util_internal.h"

#include <string.h>

static uint32_t next_mark(remat_dtr_run *R)
{
    if (++R->stamp == 0) {
        memset(R->mark, 0, (R->g->n_tensors ? R->g->n_tensors : 1) * sizeof *R->mark);
        memset(R->opmark, 0, (R->g->n_ops ? R->g->n_ops : 1) * sizeof *R->opmark);
        if (R->uf_mark)
            memset(R->uf_mark, 0, R->cap_nodes * sizeof *R->uf_mark);
        R->stamp = 1;
    }
    return R->stamp;
}

/* Calls BODY with y bound to each neighbour of t that may ever be
 * evicted: the inputs of its producer, and the outputs of its consumers,
 * from the dense lists of dtr_internal.h (the others are never evicted nor
 * candidates, so no score reads them). */
#define FOR_NEIGHBOURS(R, t, y, BODY)                                                          \
    do {                                                                                       \
        const uint32_t *nb_ = (R)->S->nb;                                                      \
        for (uint32_t i_ = (R)->S->nb_off[t]; i_ < (R)->S->nb_off[(t) + 1]; i_++) {            \
            uint32_t y = nb_[i_];                                                              \
            BODY                                                                               \
        }                                                                                      \
    } while (0)

/* ------------------------------------------------------------ eq: union-find */

static uint32_t uf_find(remat_dtr_run *R, uint32_t x)
{
    uint32_t r = x;
    while (R->uf_parent[r] != r)
        r = R->uf_parent[r];
    while (R->uf_parent[x] != r) {
        uint32_t n = R->uf_parent[x];
        R->uf_parent[x] = r;
        x = n;
    }
    return r;
}

static void uf_union(remat_dtr_run *R, uint32_t x, uint32_t y)
{
    x = uf_find(R, x);
    y = uf_find(R, y);
    if (x == y)
        return;
    /* The younger root joins the older: deterministic, and path compression
     * keeps the trees flat. */
    if (y < x) {
        uint32_t t = x;
        x = y;
        y = t;
    }
    R->uf_parent[y] = x;
    R->uf_cost[x] += R->uf_cost[y];
}

/* A node per eviction event: a tensor evicted again after a rebuild gets a
 * new one, since classes are never split. */
static remat_status uf_add(remat_dtr_run *R, uint32_t t)
{
    if (R->n_nodes == R->cap_nodes) {
        uint32_t cap = R->cap_nodes ? R->cap_nodes * 2 : 1024;
        if (cap < R->cap_nodes)
            return remat_err_set(R->err, REMAT_EOVERFLOW, "dtr: more than 2^32 evictions");
        uint32_t *p = remat__realloc(R->uf_parent, (size_t)cap * sizeof *p);
        if (p)
            R->uf_parent = p;
        uint32_t *m = p ? remat__realloc(R->uf_mark, (size_t)cap * sizeof *m) : NULL;
        if (m) {
            memset(m + R->cap_nodes, 0, (size_t)(cap - R->cap_nodes) * sizeof *m);
            R->uf_mark = m;
        }
        double *c = m ? remat__realloc(R->uf_cost, (size_t)cap * sizeof *c) : NULL;
        if (!c)
            return remat_err_set(R->err, REMAT_ENOMEM, "out of memory planning dtr");
        R->uf_cost = c;
        R->cap_nodes = cap;
    }
    uint32_t id = R->n_nodes++;
    R->uf_parent[id] = id;
    R->uf_cost[id] = R->S->cost[t];
    R->uf_mark[id] = 0;
    R->node_of[t] = id;
    FOR_NEIGHBOURS(R, t, y, {
        if (R->node_of[y] != REMAT_NONE && y != t)
            uf_union(R, id, R->node_of[y]);
    });
    return REMAT_OK;
}

static void uf_remove(remat_dtr_run *R, uint32_t t)
{
    uint32_t r = uf_find(R, R->node_of[t]);
    R->uf_cost[r] -= R->S->cost[t];
    if (R->uf_cost[r] < 0)
        R->uf_cost[r] = 0; /* rounding */
    R->node_of[t] = REMAT_NONE;
}

remat_status remat__dtr_set_evicted(remat_dtr_run *R, uint32_t t, int on)
{
    if (R->ev[t] == (uint8_t)on)
        return REMAT_OK;
    R->ev[t] = (uint8_t)on;
    /* Modular: a removal subtracts exactly what the insertion added. */
    const uint64_t share = on ? R->S->share[t] : (uint64_t)0 - R->S->share[t];
    FOR_NEIGHBOURS(R, t, y, { R->nsum[y] += share; });
    R->work += R->S->nb_deg[t];
    if (R->score != REMAT_DTR_EQ)
        return REMAT_OK;
    if (!on) {
        uf_remove(R, t);
        return REMAT_OK;
    }
    return uf_add(R, t);
}

/* ------------------------------------------------------------ scores */

/* The members of candidate s: s and its resident views. */
#define FOR_MEMBERS(R, s, m, BODY)                                                             \
    do {                                                                                       \
        for (uint32_t k_ = (R)->S->view_off[s]; k_ <= (R)->S->view_off[(s) + 1]; k_++) {       \
            uint32_t m = k_ < (R)->S->view_off[(s) + 1] ? (R)->S->views[k_] : (s);             \
            if (!(R)->res[m])                                                                  \
                continue;                                                                      \
            BODY                                                                               \
        }                                                                                      \
    } while (0)

/* Sum of c over the evicted neighbourhood e*(s): the direct evicted
 * neighbours of s and its views, and what is reachable from them through
 * evicted tensors (upward from parents, downward from children), up to
 * REMAT_DTR_DFS_CAP more tensors. Each producer op counts once, and the
 * candidates' own producers not at all. */
static double neighbourhood_cost(remat_dtr_run *R, uint32_t s)
{
    const remat_dtr_static *S = R->S;
    const uint32_t *prod = S->prod, *nb = S->nb, *nb_off = S->nb_off, *nb_mid = S->nb_mid;
    const uint8_t *ev = R->ev;
    uint32_t *mark = R->mark, *opmark = R->opmark, *dfs = R->dfs;
    uint32_t mk = next_mark(R), up = 0, down = (uint32_t)R->g->n_tensors, visits = 0;
    double sum = 0;
    FOR_MEMBERS(R, s, x, { opmark[prod[x]] = mk; });
    /* Parents are stacked from the bottom of R->dfs, children from the top:
     * each tensor is marked once, so the two never meet. */
#define VISIT(y, PUSH)                                                                        \
    do {                                                                                       \
        if (mark[y] != mk && ev[y]) {                                                          \
            mark[y] = mk;                                                                      \
            uint32_t p_ = prod[y];                                                             \
            if (opmark[p_] != mk) {                                                            \
                opmark[p_] = mk;                                                               \
                sum += S->cost[y];                                                             \
            }                                                                                  \
            PUSH;                                                                              \
        }                                                                                      \
    } while (0)
    FOR_MEMBERS(R, s, x, {
        for (uint32_t i = nb_off[x]; i < nb_mid[x]; i++)
            VISIT(nb[i], dfs[up++] = nb[i]);
        for (uint32_t i = nb_mid[x]; i < nb_off[x + 1]; i++)
            VISIT(nb[i], dfs[--down] = nb[i]);
    });
    while (up > 0 && visits < REMAT_DTR_DFS_CAP) {
        uint32_t x = dfs[--up];
        for (uint32_t i = nb_off[x]; i < nb_mid[x]; i++)
            VISIT(nb[i], (dfs[up++] = nb[i], visits++));
    }
    while (down < R->g->n_tensors && visits < REMAT_DTR_DFS_CAP) {
        uint32_t x = dfs[down++];
        for (uint32_t i = nb_mid[x]; i < nb_off[x + 1]; i++)
            VISIT(nb[i], (dfs[--down] = nb[i], visits++));
    }
#undef VISIT
    R->work += visits + 1;
    return sum;
}

/* Sum of the costs of the distinct classes next to s and its views. */
static double adjacent_classes(remat_dtr_run *R, uint32_t s)
{
    uint32_t mk = next_mark(R);
    double sum = 0;
    FOR_MEMBERS(R, s, t, {
        FOR_NEIGHBOURS(R, t, y, {
            if (R->node_of[y] != REMAT_NONE) {
                uint32_t r = uf_find(R, R->node_of[y]);
                if (R->uf_mark[r] != mk) {
                    R->uf_mark[r] = mk;
                    sum += R->uf_cost[r];
                }
            }
        });
    });
    R->work += 1;
    return sum;
}

/* s's score (exact) or its lower bound: the local score c/(m s), for
 * h_dtr and eq with nsum[s] added to c, which neither neighbourhood cost
 * can be below (it counts s's own neighbours only, not its views', and
 * never an op more than once in all). */
static double score_at(remat_dtr_run *R, uint32_t s, int exact)
{
    double c = 0;
    FOR_MEMBERS(R, s, m, { c += R->S->cost[m]; });
    uint64_t stale = R->clock > R->last[s] ? R->clock - R->last[s] : 1;
    if (R->score != REMAT_DTR_LOCAL)
        c += !exact                      ? (double)R->nsum[s]
             : R->score == REMAT_DTR_EQ ? adjacent_classes(R, s)
                                         : neighbourhood_cost(R, s);
    return c / ((double)R->S->bytes[s] * (double)stale);
}

/* ------------------------------------------------------------ the heap */

static int hless(const remat_dtr_hent *x, const remat_dtr_hent *y)
{
    if (x->key != y->key)
        return x->key < y->key;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes; /* ties: the larger storage frees more */
    return x->s < y->s;
}

static void sift_down(remat_dtr_hent *h, uint32_t n, uint32_t i)
{
    remat_dtr_hent e = h[i];
    for (;;) {
        uint32_t l = 2 * i + 1, m = i;
        const remat_dtr_hent *best = &e;
        if (l < n && hless(&h[l], best)) {
            m = l;
            best = &h[l];
        }
        if (l + 1 < n && hless(&h[l + 1], best))
            m = l + 1;
        if (m == i)
            break;
        h[i] = h[m];
        i = m;
    }
    h[i] = e;
}

/* Replaces the top with e (a refined key is never smaller). */
static void replace_top(remat_dtr_run *R, remat_dtr_hent e)
{
    R->heap[0] = e;
    sift_down(R->heap, R->n_heap, 0);
}

static void pop_top(remat_dtr_run *R)
{
    R->heap[0] = R->heap[--R->n_heap];
    if (R->n_heap > 0)
        sift_down(R->heap, R->n_heap, 0);
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Fills the heap with every unlocked candidate, or a deterministic random
 * sample of REMAT_DTR_SCAN_MAX of them, at level 0. */
static void build_heap(remat_dtr_run *R, int full)
{
    uint32_t n = full || R->n_cand <= REMAT_DTR_SCAN_MAX ? R->n_cand : REMAT_DTR_SAMPLE;
    uint32_t sk = remat__dtr_next_seen(R);
    R->n_heap = 0;
    /* In batches: first the batch's candidates (the sample's draws in
     * order), with what their lower bounds read fetched ahead, then their
     * bounds. A sample of a large graph is scattered over memory, and one
     * candidate at a time waits for each of its reads in turn (a third of
     * DTR's time at 10^5 ops). */
    enum { BATCH = 32 };
    uint32_t pick[BATCH];
    for (uint32_t i0 = 0; i0 < n; i0 += BATCH) {
        const uint32_t nb = n - i0 < BATCH ? n - i0 : BATCH;
        for (uint32_t k = 0; k < nb; k++) {
            uint32_t s = n == R->n_cand ? R->cand[i0 + k] : R->cand[splitmix64(&R->rng) % R->n_cand];
            pick[k] = s;
#if defined(__GNUC__)
            __builtin_prefetch(&R->slock[s]);
            __builtin_prefetch(&R->seen[s]);
            __builtin_prefetch(&R->nsum[s]);
            __builtin_prefetch(&R->last[s]);
            __builtin_prefetch(&R->S->cost[s]);
            __builtin_prefetch(&R->S->bytes[s]);
            __builtin_prefetch(&R->S->view_off[s]);
            __builtin_prefetch(&R->res[s]);
#endif
        }
        for (uint32_t k = 0; k < nb; k++) {
            uint32_t s = pick[k];
            if (R->slock[s] || R->seen[s] == sk)
                continue;
            R->seen[s] = sk;
            remat_dtr_hent e = {score_at(R, s, 0), R->S->bytes[s], s, R->score == REMAT_DTR_LOCAL, R->evictions};
            R->heap[R->n_heap++] = e;
        }
    }
    for (uint32_t i = R->n_heap / 2; i-- > 0;)
        sift_down(R->heap, R->n_heap, i);
    R->work += n;
}

remat_status remat__dtr_make_room(remat_dtr_run *R, uint64_t add)
{
    int scanned = 0; /* 1: a sample, 2: every candidate */
    uint32_t scored = 0; /* exact scores computed for this eviction */
    remat_dtr_hent best = {0, 0, REMAT_NONE, 0, 0};
    R->n_heap = 0;
    while (add > R->limit || R->live > R->limit - add) {
        if (R->n_heap == 0) {
            if (scanned == 2)
                break;
            /* A sample that runs dry is followed by one full scan. */
            int full = scanned == 1 || R->n_cand <= REMAT_DTR_SCAN_MAX;
            build_heap(R, full);
            scanned = full ? 2 : 1;
            continue;
        }
        remat_dtr_hent x = R->heap[0];
        if (!R->res[x.s] || R->cpos[x.s] == REMAT_NONE) {
            pop_top(R);
            continue;
        }
        if ((!x.exact || (R->score != REMAT_DTR_LOCAL && x.epoch != R->evictions)) &&
            scored < REMAT_DTR_EXACT_MAX) {
            /* Score it exactly, or again after an eviction that may have
             * raised its score. */
            double fresh = score_at(R, x.s, 1);
            x.exact = 1;
            /* Never below the bound it refines (a multi-output view op can
             * make nsum count an op the exact score leaves out). */
            x.key = fresh > x.key ? fresh : x.key;
            x.epoch = R->evictions;
            replace_top(R, x);
            if (best.s == REMAT_NONE || hless(&x, &best))
                best = x;
            scored++;
            continue;
        }
        /* The top is exact and current: the minimum. Or the scoring
         * allowance is spent: the best scored so far. */
        if (scored >= REMAT_DTR_EXACT_MAX && best.s != REMAT_NONE && R->res[best.s] && R->cpos[best.s] != REMAT_NONE)
            x = best;
        else
            pop_top(R);
        remat_status st = remat__dtr_evict(R, x.s);
        if (st != REMAT_OK)
            return st;
        scored = 0;
        best.s = REMAT_NONE;
    }
    R->n_heap = 0;
    return REMAT_OK;
}

/*
 * bound.c - a proven lower bound on the extra FLOPs that any schedule of the
 * fixed-order class needs at a budget (auto's certificate, issue 20).
 *
 * The class: every schedule the executor accepts that runs each op's FWD
 * once, in the analysis's forward order, and each backward step once, in
 * the analysis's backward order, with any RECOMPUTE and FREE instructions
 * between them (every strategy's schedules are of this class: the default
 * policy's, Chen's segments, Revolve's and chain-dp's actions, DTR's
 * evictions, exact's program).
 *
 * The argument, one step s at a time. At the high-water mark of step s the
 * schedule holds (a) the non-activation bytes of the budget's categories,
 * which depend on the order of the FWD and BWD steps alone (the executor
 * manages gradients by the backward order: exact_model.c relies on the same
 * fact) and are read here from one replay of the store-all schedule; (b)
 * every activation storage the step reads or writes (a FWD's inputs and
 * outputs, a BWD's saves); (c) every activation storage produced before s
 * and read after s (by a later FWD or a later BWD's saves, directly or
 * through a view) that the schedule chose to leave resident. A storage of
 * (c) that is not resident at s must be produced again after s, and the
 * only instruction that makes it is a RECOMPUTE of its producer, which
 * costs that op's FLOPs. Charging each storage a share of its producer's
 * FLOPs in proportion to its bytes (rounded down) never charges an op more
 * than it costs, however many of its outputs are dropped. So the extra
 * FLOPs are at least the least charge of a set of storages of (c) whose
 * bytes, once dropped, bring the step within the budget: a knapsack, whose
 * fractional relaxation (drop the lowest charge per byte first, the last
 * one in part) is a lower bound too. The bound is the largest such figure
 * over all steps; a step whose (a) and (b) and the outputs of ops that
 * cannot be recomputed exceed the budget on their own proves the budget
 * infeasible for the class. The largest of those sums over all steps is a
 * floor no schedule of the class peaks below, whatever it recomputes (the
 * peak floor plan.c quotes when a strategy misses a budget).
 *
 * Cost: the storages enter a Fenwick tree ranked by charge per byte when
 * they are born and leave it after their last read; the steps' own
 * storages step out of it while their step is judged. O((ops + refs) log
 * tensors), one replay, linear memory. The arena budget mode caps an arena
 * that is never below the logical peak, so the bound holds there too.
 */
#include "planner.h"
#include "../util/util_internal.h"

#include <string.h>

__extension__ typedef unsigned __int128 u128;

/* ---- A Fenwick tree of bytes and charges by rank --------------------------- */

typedef struct {
    uint32_t n, log;
    uint64_t *bytes, *cost;
} fenwick;

static void fw_add(fenwick *f, uint32_t i, uint64_t b, uint64_t c, int sign)
{
    for (; i <= f->n; i += i & (0u - i)) {
        f->bytes[i] = sign > 0 ? f->bytes[i] + b : f->bytes[i] - b;
        f->cost[i] = sign > 0 ? f->cost[i] + c : f->cost[i] - c;
    }
}

/* The least charge that removes `need` bytes (fractional knapsack by rank);
 * the caller knows the tree holds at least `need` bytes. */
static uint64_t fw_least(const fenwick *f, const uint64_t *rank_bytes, const uint64_t *rank_cost, uint64_t need)
{
    uint32_t pos = 0;
    uint64_t b = 0, c = 0;
    for (uint32_t step = f->log; step; step >>= 1) {
        uint32_t nx = pos + step;
        if (nx <= f->n && b + f->bytes[nx] < need) {
            pos = nx;
            b += f->bytes[nx];
            c += f->cost[nx];
        }
    }
    /* Item pos+1 is present and completes need. */
    if (pos + 1 > f->n || rank_bytes[pos + 1] == 0)
        return c;
    return c + (uint64_t)((u128)rank_cost[pos + 1] * (need - b) / rank_bytes[pos + 1]);
}

/* ---- The bound ---------------------------------------------------------- */

typedef struct {
    uint64_t bytes, cost; /* the storage's bytes and its charge */
    uint32_t birth, last; /* producer's step; last step that reads it (NONE: never read) */
    uint8_t forced;       /* its producer cannot be recomputed */
} item;

/* 1 if item x charges less per byte than y (ties by index: deterministic). */
static int cheaper(const item *it, uint32_t x, uint32_t y)
{
    u128 l = (u128)it[x].cost * it[y].bytes, r = (u128)it[y].cost * it[x].bytes;
    return l != r ? l < r : x < y;
}

/* Bottom-up merge sort of v[0..n) by charge per byte, tmp as scratch:
 * O(n log n), and no global state (qsort has no context argument). */
static void sort_by_ratio(const item *it, uint32_t *v, uint32_t *tmp, uint32_t n)
{
    for (uint32_t w = 1; w < n; w *= 2) {
        for (uint32_t lo = 0; lo < n; lo += 2 * w) {
            uint32_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            uint32_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                tmp[k++] = cheaper(it, v[j], v[i]) ? v[j++] : v[i++];
            while (i < mid)
                tmp[k++] = v[i++];
            while (j < hi)
                tmp[k++] = v[j++];
        }
        memcpy(v, tmp, (size_t)n * sizeof *v);
    }
}

static remat_status fixed_profile(remat_planner *P, uint64_t *fixed)
{
    remat_err local;
    remat_err_init(&local);
    remat_status st = remat__fixed_profile(P, &P->o->extras, NULL, fixed, &local);
    if (st != REMAT_OK)
        return remat_err_set(P->err, st, "bound: %s", local.msg);
    return REMAT_OK;
}

static uint64_t sat_add(uint64_t x, uint64_t y)
{
    return x > UINT64_MAX - y ? UINT64_MAX : x + y;
}

remat_status remat__bound_extra(remat_planner *P, uint64_t *lb, int *infeasible, remat_peak_floor *floor)
{
    const remat_analysis *a = P->a;
    const remat_graph *g = a->g;
    const uint64_t budget = P->o->budget;
    const uint32_t n = g->n_ops, T = n + a->n_bwd, nt = g->n_tensors;
    *lb = 0;
    *infeasible = 0;
    if (floor) {
        floor->bytes = 0;
        floor->step = REMAT_NONE;
    }
    /* Under sharding the fixed bytes of (a) depend on where the collectives
     * land, which the store-all profile does not show: 0 is the bound that
     * stays true. */
    if (P->o->budget_kind == REMAT_BUDGET_NONE || nt == 0 || P->o->extras.sharding)
        return REMAT_OK;
    item *it = remat__calloc(nt, sizeof *it);
    uint64_t *fixed = remat__calloc((size_t)T + 1, sizeof *fixed);
    uint64_t *own = remat__calloc((size_t)n + 1, sizeof *own);
    uint32_t *rank = remat__calloc((size_t)nt + 1, sizeof *rank);
    uint32_t *byrank = remat__calloc((size_t)nt + 1, sizeof *byrank);
    uint32_t *tmp = remat__calloc((size_t)nt + 1, sizeof *tmp);
    uint32_t *ev_off = remat__calloc((size_t)T + 2, sizeof *ev_off);
    uint32_t *ev = remat__calloc((size_t)nt * 2 + 1, sizeof *ev);
    uint32_t *stamp = remat__calloc(nt, sizeof *stamp);
    uint8_t *in_tree = remat__calloc(nt, 1);
    uint64_t *rb = remat__calloc((size_t)nt + 1, sizeof *rb), *rc = remat__calloc((size_t)nt + 1, sizeof *rc);
    fenwick f = {0, 0, remat__calloc((size_t)nt + 1, sizeof(uint64_t)), remat__calloc((size_t)nt + 1, sizeof(uint64_t))};
    remat_status st = REMAT_OK;
    if (!it || !fixed || !own || !rank || !byrank || !tmp || !ev_off || !ev || !stamp || !in_tree || !rb || !rc ||
        !f.bytes || !f.cost) {
        st = remat_err_set(P->err, REMAT_ENOMEM, "out of memory bounding the plan");
        goto done;
    }
    if ((st = fixed_profile(P, fixed)) != REMAT_OK)
        goto done;
    /* Items: activation storages that own bytes. A view's reads are its
     * root's reads (a resident view keeps its root). */
    for (uint32_t t = 0; t < nt; t++) {
        it[t].last = REMAT_NONE;
        it[t].birth = REMAT_NONE;
    }
    for (uint32_t t = 0; t < nt; t++) {
        const remat_tensor *T_ = &g->tensors[t];
        if (T_->kind != REMAT_TENSOR_ACTIVATION)
            continue;
        uint32_t r = T_->storage;
        if (r == REMAT_NONE || g->tensors[r].kind != REMAT_TENSOR_ACTIVATION)
            continue;
        uint32_t last = remat__later_step(a->life[t].last_fwd_use, a->life[t].last_bwd_use);
        it[r].last = remat__later_step(it[r].last, last);
    }
    for (uint32_t t = 0; t < nt; t++) {
        const remat_tensor *T_ = &g->tensors[t];
        if (T_->kind != REMAT_TENSOR_ACTIVATION || T_->storage != t || T_->producer == REMAT_NONE)
            continue;
        it[t].bytes = T_->bytes;
        it[t].birth = a->pos[T_->producer];
        it[t].forced = !g->ops[T_->producer].recomputable;
        own[a->pos[T_->producer]] = sat_add(own[a->pos[T_->producer]], T_->bytes);
    }
    for (uint32_t t = 0; t < nt; t++) {
        if (it[t].birth == REMAT_NONE || it[t].bytes == 0)
            continue;
        uint32_t p = it[t].birth;
        uint64_t fl = g->ops[a->order[p]].flops;
        it[t].cost = own[p] ? (uint64_t)((u128)fl * it[t].bytes / own[p]) : 0;
    }
    /* Ranks by charge per byte, among storages that can ever be dropped:
     * read after the step after their birth. */
    uint32_t m = 0;
    for (uint32_t t = 0; t < nt; t++)
        if (it[t].birth != REMAT_NONE && it[t].bytes && it[t].last != REMAT_NONE && it[t].last > it[t].birth + 1)
            byrank[m++] = t;
    sort_by_ratio(it, byrank, tmp, m);
    memmove(byrank + 1, byrank, (size_t)m * sizeof *byrank);
    for (uint32_t k = 1; k <= m; k++) {
        rank[byrank[k]] = k;
        rb[k] = it[byrank[k]].bytes;
        rc[k] = it[byrank[k]].cost;
    }
    f.n = m;
    f.log = 1;
    while (f.log * 2 <= m)
        f.log *= 2;
    /* Events: item enters at birth + 1 and leaves at its last read (where
     * it is one of the step's own storages, and dead after). */
    for (uint32_t k = 1; k <= m; k++) {
        const item *x = &it[byrank[k]];
        ev_off[x->birth + 1 + 1]++;
        ev_off[x->last + 1]++;
    }
    for (uint32_t s = 0; s <= T; s++)
        ev_off[s + 1] += ev_off[s];
    for (uint32_t k = 1; k <= m; k++) {
        const item *x = &it[byrank[k]];
        ev[ev_off[x->birth + 1]++] = k;
        ev[ev_off[x->last]++] = k | 0x80000000u;
    }
    for (uint32_t s = T + 1; s > 0; s--)
        ev_off[s] = ev_off[s - 1];
    ev_off[0] = 0;
    uint64_t tree_bytes = 0, forced = 0, best = 0;
    uint32_t gen = 0;
    /* With a floor asked for, every step is judged: the floor is the
     * largest of them, not the first one over the budget. */
    for (uint32_t s = 0; s < T && (floor || !*infeasible); s++) {
        for (uint32_t e = ev_off[s]; e < ev_off[s + 1]; e++) {
            uint32_t k = ev[e] & 0x7fffffffu, t = byrank[k];
            int enter = !(ev[e] & 0x80000000u);
            if (it[t].forced) {
                forced = enter ? forced + it[t].bytes : forced - it[t].bytes;
            } else if (enter) {
                fw_add(&f, k, rb[k], rc[k], 1);
                in_tree[t] = 1;
                tree_bytes += rb[k];
            } else if (in_tree[t]) {
                fw_add(&f, k, rb[k], rc[k], -1);
                in_tree[t] = 0;
                tree_bytes -= rb[k];
            }
        }
        /* The step's own storages: forced resident, out of the tree while
         * this step is judged. */
        const remat_op *op = s < n ? &g->ops[a->order[s]] : &g->ops[a->bwd_order[s - n]];
        const uint32_t *lists[2];
        uint32_t lens[2];
        if (s < n) {
            lists[0] = remat_op_inputs(g, op);
            lens[0] = op->n_in;
            lists[1] = remat_op_outputs(g, op);
            lens[1] = op->n_out;
        } else {
            lists[0] = remat_op_saves(g, op);
            lens[0] = op->n_save;
            lists[1] = NULL;
            lens[1] = 0;
        }
        ++gen;
        uint64_t must = 0, fixed_out = 0;
        for (int l = 0; l < 2; l++)
            for (uint32_t i = 0; i < lens[l]; i++) {
                uint32_t v = lists[l][i];
                if (g->tensors[v].kind != REMAT_TENSOR_ACTIVATION)
                    continue;
                uint32_t r = g->tensors[v].storage;
                if (r == REMAT_NONE || g->tensors[r].kind != REMAT_TENSOR_ACTIVATION || stamp[r] == gen)
                    continue;
                stamp[r] = gen;
                must = sat_add(must, g->tensors[r].bytes);
                if (in_tree[r]) {
                    uint32_t k = rank[r];
                    fw_add(&f, k, rb[k], rc[k], -1);
                    tree_bytes -= rb[k];
                } else if (it[r].forced && rank[r] && it[r].birth < s && s < it[r].last) {
                    fixed_out += it[r].bytes; /* counted in forced already */
                }
            }
        uint64_t floor_b = sat_add(sat_add(fixed[s], must), forced - fixed_out);
        if (floor && (floor->step == REMAT_NONE || floor_b > floor->bytes)) {
            floor->bytes = floor_b;
            floor->step = s;
        }
        if (floor_b > budget) {
            *infeasible = 1;
        } else {
            uint64_t total = sat_add(floor_b, tree_bytes);
            if (total > budget) {
                uint64_t c = fw_least(&f, rb, rc, total - budget);
                if (c > best)
                    best = c;
            }
        }
        /* Back into the tree. */
        ++gen;
        for (int l = 0; l < 2; l++)
            for (uint32_t i = 0; i < lens[l]; i++) {
                uint32_t v = lists[l][i];
                if (g->tensors[v].kind != REMAT_TENSOR_ACTIVATION)
                    continue;
                uint32_t r = g->tensors[v].storage;
                if (r == REMAT_NONE || stamp[r] == gen)
                    continue;
                stamp[r] = gen;
                if (in_tree[r]) {
                    uint32_t k = rank[r];
                    fw_add(&f, k, rb[k], rc[k], 1);
                    tree_bytes += rb[k];
                }
            }
    }
    *lb = *infeasible ? UINT64_MAX : best;
done:
    remat__free(it);
    remat__free(fixed);
    remat__free(own);
    remat__free(rank);
    remat__free(byrank);
    remat__free(tmp);
    remat__free(ev_off);
    remat__free(ev);
    remat__free(stamp);
    remat__free(in_tree);
    remat__free(rb);
    remat__free(rc);
    remat__free(f.bytes);
    remat__free(f.cost);
    return st;
}

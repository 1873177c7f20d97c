/*
 * chain_table.c - the tables of the chain dynamic program: filling them,
 * reading a plan back out, and emitting its schedule (chain.h).
 *
 * A solve is (s, t) with flags: fresh (stages s..t never ran; then t is
 * the last stage), k (x_{t+1} is still resident because stage t's backward
 * saves it) and drop (x_s may be freed as soon as stage s no longer needs
 * it, even though stage s-1's backward saves it: the caller rebuilds it).
 * Its row holds, for every memory level m in 0..W-1, the least recompute
 * FLOPs (INF when nothing fits). Memory m is in slots, net of everything
 * enclosing solves hold and of the gradient load (chain_dp.c explains the
 * model). The options, in the order every function here tries them:
 *
 *   leaf        s = t: reverse the stage from x_s (eager or lazy rebuild;
 *               fresh, its first run with its tape);
 *   tape        run stage s keeping its tape, solve (s+1, t), backward s;
 *   checkpoint  advance to s', keep x_{s'}, solve (s', t); free x_{s'}
 *               (k' = 0: the left part rebuilds it if stage s'-1 saves it,
 *               and the right part may drop it early) or keep it while
 *               stage s'-1 still needs it (k' = 1); then solve (s, s'-1);
 *   forward     fresh only, s' = n: run everything left without a tape,
 *               then replay (s, n-1);
 *   peel        stage t saves no activation but x_{t+1}, and that only
 *               with k = 1 (a ReLU; an add saves nothing): its backward
 *               runs at once, without x_t, then (s, t-1) is solved.
 *
 * Rows are non-increasing in m (more memory never costs more), so each row
 * keeps the first level it is finite at, and loops start there.
 */
#include "chain.h"
#include "../util/util_internal.h"

#include <string.h>

#define BIG (1 << 30)    /* more slots than any table has */
#define COMBINE_RUN 16   /* levels combine() skips at once when they cannot improve */

enum { OPT_NONE, OPT_LEAF, OPT_TAPE, OPT_CKPT, OPT_FORWARD, OPT_PEEL };

typedef struct {
    int kind;
    uint32_t sp; /* checkpoint split */
    int kp;      /* checkpoint: keep x_{s'} (k' = 1); leaf: lazy rebuild */
    int32_t mr, ml;
} choice;

/* ---- slots ---------------------------------------------------------------- */

static int32_t clamp32(int64_t v)
{
    return v > BIG ? BIG : v < -BIG ? -BIG : (int32_t)v;
}

/* ceil(bytes / q) for signed bytes: what a requirement costs in slots. */
static int32_t up(uint64_t q, int64_t bytes)
{
    if (bytes <= 0) {
        uint64_t mag = bytes == INT64_MIN ? (uint64_t)INT64_MAX + 1 : (uint64_t)-bytes;
        return clamp32(-(int64_t)(mag / q));
    }
    return clamp32((int64_t)(((uint64_t)bytes - 1) / q + 1));
}

int32_t remat__chain_slots(const remat_chain_dp *D, int64_t bytes)
{
    return up(D->q, bytes);
}

static int64_t add64(int64_t x, int64_t y)
{
    if (y > 0 && x > INT64_MAX - y)
        return INT64_MAX;
    if (y < 0 && x < INT64_MIN - y)
        return INT64_MIN;
    return x + y;
}

/* x + y, saturating at INF (which stands for "does not fit"). */
static uint64_t sadd(uint64_t x, uint64_t y)
{
    uint64_t r = x + y;
    return r < x || r > REMAT_CHAIN_INF ? REMAT_CHAIN_INF : r;
}

static uint64_t min64(uint64_t x, uint64_t y)
{
    return x < y ? x : y;
}

/* The first m in [lo, hi) with out[m] <= c (hi if none): out is
 * non-increasing, so a candidate whose least value is c can only improve
 * levels before it. */
static int32_t first_at_most(const uint64_t *out, int32_t lo, int32_t hi, uint64_t c)
{
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (out[mid] <= c)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* out[m] = min(out[m], adv + right[m - wr] + left[min(m + dl, W - 1)]) for
 * m in [lo, W), where every table value is at most INF (so two of them
 * add without overflow). The loop that does the work has no branches; the
 * clamped tail reads one left value. */
static void combine(uint64_t *out, int32_t lo, int32_t W, uint64_t adv, const uint64_t *right, int32_t wr,
                    const uint64_t *left, int32_t dl)
{
    const uint64_t INF = REMAT_CHAIN_INF;
    if (lo < wr)
        lo = wr;
    if (lo + dl < 0)
        lo = -dl;
    /* Nothing below the candidate's least value can change. */
    uint64_t least = sadd(adv, sadd(right[W - 1 - wr > 0 ? W - 1 - wr : 0], left[W - 1]));
    int32_t hi = first_at_most(out, lo < 0 ? 0 : lo, W, least);
    int32_t mid = W - dl < hi ? W - dl : hi; /* m + dl < W below mid */
    for (int32_t m0 = lo; m0 < mid; m0 += COMBINE_RUN) {
        int32_t m1 = m0 + COMBINE_RUN < mid ? m0 + COMBINE_RUN : mid;
        /* The candidate is least at the run's end and out is largest at
         * its start: if even those do not cross, skip the run. */
        if (sadd(adv, right[m1 - 1 - wr] + left[m1 - 1 + dl]) >= out[m0])
            continue;
        for (int32_t m = m0; m < m1; m++) {
            uint64_t c = right[m - wr] + left[m + dl];
            c = c > INF ? INF : c;
            c += adv;
            c = c > INF ? INF : c;
            out[m] = c < out[m] ? c : out[m];
        }
    }
    for (int32_t m = mid > lo ? mid : lo; m < hi; m++) {
        uint64_t c = sadd(adv, sadd(right[m - wr], left[W - 1]));
        out[m] = min64(c, out[m]);
    }
}

/* ---- rows ----------------------------------------------------------------- */

static size_t tri(uint32_t s, uint32_t t)
{
    return (size_t)t * (t + 1) / 2 + s;
}

/* The row index of a solve; flags a row would not change alias to the row
 * without them (k only exists where stage t saves x_{t+1}, drop only where
 * dropping x_s early frees something). */
static size_t row_index(const remat_chain_dp *D, int fresh, int k, int drop, uint32_t s, uint32_t t)
{
    const size_t *ix = fresh ? D->fidx + (size_t)s * 4 : D->ridx + tri(s, t) * 4;
    size_t r = ix[k * 2 + drop];
    if (r == SIZE_MAX)
        r = ix[k * 2];
    if (r == SIZE_MAX)
        r = ix[drop];
    if (r == SIZE_MAX)
        r = ix[0];
    return r;
}

static uint64_t *row(const remat_chain_dp *D, int fresh, int k, int drop, uint32_t s, uint32_t t)
{
    return D->cost + row_index(D, fresh, k, drop, s, t) * (size_t)D->W;
}

static int32_t row_lo(const remat_chain_dp *D, int fresh, int k, int drop, uint32_t s, uint32_t t)
{
    return D->lo[row_index(D, fresh, k, drop, s, t)];
}

/* ---- filling -------------------------------------------------------------- */

/* The advance requirement of a running maximum A with the gradient load of
 * the solve's end t. */
static int32_t adv_need(const remat_chain_dp *D, int64_t A, uint32_t t)
{
    return up(D->q, add64(A, D->pr->grad[t + 1]));
}

static void fill(remat_chain_dp *D, int fresh, int k, int drop, uint32_t s, uint32_t t)
{
    const remat_chain_profile *pr = D->pr;
    const int32_t W = D->W;
    size_t ri = row_index(D, fresh, k, drop, s, t);
    uint64_t *out = D->cost + ri * (size_t)W;
    for (int32_t m = 0; m < W; m++)
        out[m] = REMAT_CHAIN_INF;
    D->entries += (uint64_t)W;
    if (s == t && fresh) {
        for (int32_t m = D->first_need < 0 ? 0 : D->first_need; m < W; m++)
            out[m] = 0;
    } else if (s == t) {
        if (pr->nr[s])
            goto done;
        for (int v = k; v < 4; v += 2) { /* eager, lazy */
            int32_t need = D->leaf_need[v][s];
            uint64_t cost = pr->leaf_cost[v][s];
            for (int32_t m = need < 0 ? 0 : need; m < W; m++)
                if (cost < out[m])
                    out[m] = cost;
        }
        goto done;
    }
    const int64_t Gt = pr->grad[t + 1];
    if (s < t && (fresh || !pr->nr[s])) {
        int32_t lo = up(D->q, add64(pr->tf_pk[s], Gt));
        const int32_t tb = drop ? D->tb_need_drop[s] : D->tb_need[s];
        if (lo < tb)
            lo = tb;
        const int32_t held = drop ? D->tf_held_drop[s] : D->tf_held[s];
        const int32_t rlo = row_lo(D, fresh, k, 0, s + 1, t);
        if (lo < rlo + held)
            lo = rlo + held;
        const uint64_t *right = row(D, fresh, k, 0, s + 1, t);
        const uint64_t cost = fresh ? 0 : pr->tf_cost[s];
        for (int32_t m = lo < 0 ? 0 : lo; m < W; m++) {
            int64_t mr = (int64_t)m - held;
            uint64_t v = right[mr >= W ? W - 1 : mr];
            if (v != REMAT_CHAIN_INF && sadd(cost, v) < out[m])
                out[m] = sadd(cost, v);
        }
    }
    const int32_t gain = k ? D->wfl[t + 1] : 0;
    if (!fresh && s < t && pr->peel[t] && (k || !pr->so[t])) {
        const uint64_t *left = row(D, 0, 0, drop, s, t - 1);
        const int32_t need = D->peel_need[t], llo = row_lo(D, 0, 0, drop, s, t - 1) - gain;
        for (int32_t m = need > llo ? (need < 0 ? 0 : need) : (llo < 0 ? 0 : llo); m < W; m++) {
            uint64_t v = left[m + gain >= W ? W - 1 : m + gain];
            if (v < out[m])
                out[m] = v;
        }
    }
    int64_t A = pr->adv_first[s];
    uint64_t adv = 0;
    for (uint32_t sp = s + 1; sp <= t + (uint32_t)fresh; sp++) {
        if (sp - 1 > s && pr->adv_mid[sp - 1] > A)
            A = pr->adv_mid[sp - 1];
        if (pr->nr[sp - 1])
            break; /* the left part would replay it */
        if (!fresh)
            adv = sadd(adv, pr->adv_cost[sp - 1]);
        const int32_t need = adv_need(D, A, t);
        if (need >= W)
            break; /* A only grows with s' */
        if (sp > t) {
            const uint64_t *left = row(D, 0, 0, drop, s, t);
            int32_t lo = row_lo(D, 0, 0, drop, s, t);
            for (int32_t m = need > lo ? need : lo; m < W; m++)
                if (left[m] < out[m])
                    out[m] = left[m];
            break;
        }
        const int32_t wr = D->wq[sp];
        int32_t lo = need < 0 ? 0 : need;
#if defined(__GNUC__)
        /* The next split's left rows, (s, s') for s' = sp, lie a row
         * triangle apart (tri() is t-major) and miss the cache: fetched
         * ahead, while this split's combine runs (a fifth of chain-dp's
         * time was the wait for left[W - 1]). */
        if (sp < t) {
            const uint64_t *l0 = row(D, 0, 0, drop, s, sp), *l1 = row(D, 0, 1, drop, s, sp);
            __builtin_prefetch(l0);
            __builtin_prefetch(l0 + W - 1);
            __builtin_prefetch(l1);
            __builtin_prefetch(l1 + W - 1);
        }
#endif
        /* k' = 0: x_{s'} freed after the right part, which may drop it. */
        combine(out, lo, W, adv, row(D, fresh, k, 1, sp, t), wr, row(D, 0, 0, drop, s, sp - 1), gain);
        /* k' = 1: x_{s'} kept while stage s'-1 still saves it. */
        if (pr->so[sp - 1])
            combine(out, lo, W, adv, row(D, fresh, k, 0, sp, t), wr, row(D, 0, 1, drop, s, sp - 1), gain - wr);
    }
done:;
    int32_t first = W;
    for (int32_t m = 0; m < W; m++)
        if (out[m] != REMAT_CHAIN_INF) {
            first = m;
            break;
        }
    D->lo[ri] = first;
}

/* ---- reading a plan back ---------------------------------------------------- */

/* The choice behind row(fresh, k, drop, s, t)[m]: the options are tried in
 * fill()'s order and the first that attains the row's value is taken. */
static int choose(const remat_chain_dp *D, int fresh, int k, int drop, uint32_t s, uint32_t t, int32_t m, choice *c)
{
    const remat_chain_profile *pr = D->pr;
    const int32_t W = D->W;
    const uint64_t target = row(D, fresh, k, drop, s, t)[m];
    memset(c, 0, sizeof *c);
    if (target == REMAT_CHAIN_INF)
        return 0;
    if (s == t && fresh && m >= D->first_need && target == 0) {
        c->kind = OPT_LEAF;
        return 1;
    }
    if (s == t && !fresh) {
        for (int v = k; v < 4; v += 2)
            if (m >= D->leaf_need[v][s] && pr->leaf_cost[v][s] == target) {
                c->kind = OPT_LEAF;
                c->kp = v >= 2;
                return 1;
            }
        return 0;
    }
    const int64_t Gt = pr->grad[t + 1];
    if (s < t && (fresh || !pr->nr[s])) {
        int32_t lo = up(D->q, add64(pr->tf_pk[s], Gt));
        const int32_t tb = drop ? D->tb_need_drop[s] : D->tb_need[s];
        if (lo < tb)
            lo = tb;
        int64_t mr = (int64_t)m - (drop ? D->tf_held_drop[s] : D->tf_held[s]);
        if (m >= lo && mr >= 0) {
            int32_t r = mr >= W ? W - 1 : (int32_t)mr;
            uint64_t v = row(D, fresh, k, 0, s + 1, t)[r];
            if (v != REMAT_CHAIN_INF && sadd(fresh ? 0 : pr->tf_cost[s], v) == target) {
                *c = (choice){OPT_TAPE, 0, 0, r, 0};
                return 1;
            }
        }
    }
    const int32_t gain = k ? D->wfl[t + 1] : 0;
    if (!fresh && s < t && pr->peel[t] && (k || !pr->so[t]) && m >= D->peel_need[t]) {
        const int32_t ml = m + gain >= W ? W - 1 : m + gain;
        if (row(D, 0, 0, drop, s, t - 1)[ml] == target) {
            *c = (choice){OPT_PEEL, 0, 0, 0, ml};
            return 1;
        }
    }
    int64_t A = pr->adv_first[s];
    uint64_t adv = 0;
    for (uint32_t sp = s + 1; sp <= t + (uint32_t)fresh; sp++) {
        if (sp - 1 > s && pr->adv_mid[sp - 1] > A)
            A = pr->adv_mid[sp - 1];
        if (pr->nr[sp - 1])
            break;
        if (!fresh)
            adv = sadd(adv, pr->adv_cost[sp - 1]);
        if (m < adv_need(D, A, t))
            break;
        if (sp > t) {
            if (row(D, 0, 0, drop, s, t)[m] == target) {
                *c = (choice){OPT_FORWARD, sp, 0, 0, m};
                return 1;
            }
            break;
        }
        const int32_t wr = D->wq[sp];
        if (m - wr < 0)
            continue;
        const int32_t ml = m + gain >= W ? W - 1 : m + gain;
        uint64_t r = row(D, fresh, k, 1, sp, t)[m - wr], l = row(D, 0, 0, drop, s, sp - 1)[ml];
        if (r != REMAT_CHAIN_INF && l != REMAT_CHAIN_INF && sadd(adv, sadd(r, l)) == target) {
            *c = (choice){OPT_CKPT, sp, 0, m - wr, ml};
            return 1;
        }
        const int32_t x1 = m + gain - wr;
        if (pr->so[sp - 1] && x1 >= 0) {
            const int32_t ml1 = x1 >= W ? W - 1 : x1;
            r = row(D, fresh, k, 0, sp, t)[m - wr];
            l = row(D, 0, 1, drop, s, sp - 1)[ml1];
            if (r != REMAT_CHAIN_INF && l != REMAT_CHAIN_INF && sadd(adv, sadd(r, l)) == target) {
                *c = (choice){OPT_CKPT, sp, 1, m - wr, ml1};
                return 1;
            }
        }
    }
    return 0; /* cannot happen: fill() took the minimum of these */
}

static remat_status emit(const remat_chain_dp *D, remat_chain_emit *E, int fresh, int k, int drop, uint32_t s,
                         uint32_t t, int32_t m)
{
    choice c;
    remat_status st;
    if (!choose(D, fresh, k, drop, s, t, m, &c))
        return remat_err_set(E->B.err, REMAT_EINTERNAL, "chain-dp: no choice behind a finite table entry");
    switch (c.kind) {
    case OPT_LEAF:
        /* No caller replays from x_s after this: let the leaf free it. */
        return remat__chain_reverse(E, s, c.kp ? REMAT_CHAIN_LAZY : 0);
    case OPT_TAPE:
        if ((st = remat__chain_tape_forward(E, s, drop)) != REMAT_OK ||
            (st = emit(D, E, fresh, k, 0, s + 1, t, c.mr)) != REMAT_OK ||
            (st = remat__chain_unpin(E, s + 1)) != REMAT_OK)
            return st;
        return remat__chain_backward(E, s);
    case OPT_PEEL:
        if ((st = remat__chain_backward(E, t)) != REMAT_OK)
            return st;
        return emit(D, E, 0, 0, drop, s, t - 1, c.ml);
    case OPT_FORWARD:
        if ((st = remat__chain_advance(E, s, c.sp)) != REMAT_OK)
            return st;
        return emit(D, E, 0, 0, drop, s, t, c.ml);
    default:
        if ((st = remat__chain_advance(E, s, c.sp)) != REMAT_OK)
            return st;
        remat__chain_pin(E, c.sp);
        if ((st = emit(D, E, fresh, k, !c.kp, c.sp, t, c.mr)) != REMAT_OK)
            return st;
        st = c.kp ? remat__chain_unpin(E, c.sp) : remat__chain_release(E, c.sp);
        if (st != REMAT_OK)
            return st;
        return emit(D, E, 0, c.kp, drop, s, c.sp - 1, c.ml);
    }
}

/* ---- the API ---------------------------------------------------------------- */

void remat__chain_dp_destroy(remat_chain_dp *D)
{
    void *v[] = {D->leaf_need[0], D->leaf_need[1], D->leaf_need[2], D->leaf_need[3], D->tb_need,
                 D->tb_need_drop, D->tf_held,      D->tf_held_drop, D->peel_need,    D->wq,
                 D->wfl,          D->cost,         D->lo,           D->ridx,         D->fidx};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        remat__free(v[i]);
    memset(D, 0, sizeof *D);
}

/* Row indices: every (s, t) has its plain row and, where they differ, its
 * k and drop rows; fresh rows exist for every s (t = n-1). */
static size_t index_rows(remat_chain_dp *D)
{
    const remat_chain_profile *pr = D->pr;
    const uint32_t n = D->n;
    size_t rows = 0;
    for (uint32_t t = 0; t < n; t++)
        for (uint32_t s = 0; s <= t; s++) {
            size_t *ix = D->ridx + tri(s, t) * 4;
            int hk = t + 1 < n && pr->so[t], hd = D->tf_held_drop[s] < D->tf_held[s];
            for (int v = 0; v < 4; v++)
                ix[v] = ((v & 2) && !hk) || ((v & 1) && !hd) ? SIZE_MAX : rows++;
        }
    for (uint32_t s = 0; s < n; s++) {
        size_t *ix = D->fidx + (size_t)s * 4;
        int hd = D->tf_held_drop[s] < D->tf_held[s];
        for (int v = 0; v < 4; v++)
            ix[v] = (v & 2) || ((v & 1) && !hd) ? SIZE_MAX : rows++;
    }
    return rows;
}

remat_status remat__chain_dp_fill(const remat_chain_profile *pr, uint64_t q, int32_t W, remat_chain_dp *D,
                                  remat_err *err)
{
    const uint32_t n = pr->n;
    memset(D, 0, sizeof *D);
    D->pr = pr;
    D->n = n;
    D->q = q;
    D->W = W;
    size_t n1 = (size_t)n + 1, pairs = tri(0, n - 1) + n;
    int32_t **i32[] = {&D->leaf_need[0], &D->leaf_need[1], &D->leaf_need[2], &D->leaf_need[3],
                       &D->tb_need,      &D->tb_need_drop, &D->tf_held,      &D->tf_held_drop,
                       &D->peel_need,    &D->wq,           &D->wfl};
    int ok = 1;
    for (size_t i = 0; i < sizeof i32 / sizeof i32[0]; i++)
        ok &= (*i32[i] = remat__array(n1, sizeof(int32_t))) != NULL;
    D->ridx = remat__array(pairs * 4, sizeof *D->ridx);
    D->fidx = remat__array((size_t)n * 4, sizeof *D->fidx);
    if (!ok || !D->ridx || !D->fidx)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory planning");
    for (uint32_t j = 0; j <= n; j++) {
        if (j < n) {
            for (int v = 0; v < 4; v++)
                D->leaf_need[v][j] = up(q, add64(pr->leaf_pk[v][j], pr->grad[j + 1]));
            /* Before stage j's backward: its tape, x_{j+1} only if saved.
             * Dropping x_j after the tape forward frees it, for the rest of
             * the solve, when its own backward does not keep it. */
            int64_t before_bwd = add64(add64(pr->tf_end[j], pr->so[j] ? 0 : -pr->gain[j + 1]), pr->grad[j + 1]);
            int64_t dg = j > 0 && pr->so[j - 1] && !pr->own_in[j] ? pr->gain[j] : 0;
            D->tb_need[j] = up(q, add64(before_bwd, pr->tb_pk[j]));
            D->tb_need_drop[j] = up(q, add64(add64(before_bwd, -dg), pr->tb_pk[j]));
            D->tf_held[j] = up(q, pr->tf_end[j]);
            D->tf_held_drop[j] = up(q, add64(pr->tf_end[j], -dg));
            D->peel_need[j] = up(q, add64(pr->tb_pk[j], pr->grad[j + 1]));
        }
        D->wq[j] = up(q, pr->hold[j]);
        D->wfl[j] = clamp32((int64_t)((uint64_t)pr->gain[j] / q));
    }
    D->first_need = up(q, pr->first_pk);
    size_t rows = index_rows(D);
    if ((uint64_t)rows * (uint64_t)W > REMAT_CHAIN_MAX_ENTRIES)
        return remat_err_set(err, REMAT_EINVAL,
                             "chain-dp: %u stages need %zu table rows of %d memory levels, more than %llu entries; "
                             "use a larger dp_step or fewer dp_slots",
                             n, rows, W, (unsigned long long)REMAT_CHAIN_MAX_ENTRIES);
    D->cost = remat__array(rows * (size_t)W, sizeof *D->cost);
    D->lo = remat__array(rows, sizeof *D->lo);
    if (!D->cost || !D->lo)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory planning (chain-dp: %zu rows of %d levels)", rows, W);
    for (uint32_t len = 0; len < n; len++)
        for (uint32_t s = 0; s + len < n; s++) {
            uint32_t t = s + len;
            const size_t *ix = D->ridx + tri(s, t) * 4;
            for (int v = 0; v < 4; v++)
                if (ix[v] != SIZE_MAX)
                    fill(D, 0, v >> 1, v & 1, s, t);
        }
    for (uint32_t s = n; s-- > 0;) {
        const size_t *ix = D->fidx + (size_t)s * 4;
        for (int v = 0; v < 2; v++)
            if (ix[v] != SIZE_MAX)
                fill(D, 1, 0, v, s, n - 1);
    }
    return REMAT_OK;
}

const uint64_t *remat__chain_dp_top(const remat_chain_dp *D)
{
    return row(D, 1, 0, 0, 0, D->n - 1);
}

remat_status remat__chain_dp_schedule(const remat_analysis *a, const remat_blocks *st, const remat_chain_dp *D,
                                      int32_t m, remat_schedule *out, remat_err *err)
{
    remat_chain_emit E;
    remat_status s = remat__chain_emit_init(&E, a, st, out, err);
    if (s == REMAT_OK)
        s = emit(D, &E, 1, 0, 0, 0, D->n - 1, m);
    if (s == REMAT_OK)
        s = remat__builder_opt(&E.B);
    remat__chain_emit_destroy(&E);
    return s;
}

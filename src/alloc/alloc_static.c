/*
 * alloc_static.c - static offset plans: every interval of a trace gets an
 * offset ahead of time, intervals alive at the same time never share a
 * byte, and the arena (the highest end) is as small as the heuristics find.
 *
 * Packing intervals with sizes (dynamic storage allocation) is NP-hard;
 * compiler memory planners use greedy orders. The greedy passes here are
 * TFLite's and XLA's "greedy by size" (largest first) and a "greedy by
 * lifetime" (longest-lived first): each interval in turn goes to the lowest
 * offset at which it overlaps no placed interval that is alive at the same
 * time. Placed intervals are kept in a list sorted by offset, so the search
 * walks up from the bottom and stops at the first placed interval that
 * starts above the candidate's end: nothing above can collide. The third
 * layout is the dynamic best-fit allocator's, fixed ahead of time (a static
 * plan too, and O(n log n)). BEST takes the smallest arena.
 *
 * Resident state (inputs, params, ledger state) overlaps every interval in
 * time, so it is stacked at the bottom first: in any packing each other
 * interval lies wholly between two resident blocks (it cannot straddle
 * one), and sliding the resident blocks down and the rest up keeps every
 * pair apart without growing the arena.
 */
#include "alloc_internal.h"
#include "../util/util_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const algo_names[REMAT_STATIC_ALGO_COUNT] = {"greedy-size", "greedy-lifetime", "alloc-order",
                                                                "best"};

const char *remat_static_algo_name(remat_static_algo a)
{
    return (unsigned)a < REMAT_STATIC_ALGO_COUNT ? algo_names[a] : "?";
}

int remat_static_algo_parse(const char *name, remat_static_algo *out)
{
    for (int i = 0; i < REMAT_STATIC_ALGO_COUNT; i++)
        if (strcmp(name, algo_names[i]) == 0) {
            *out = (remat_static_algo)i;
            return 1;
        }
    return 0;
}

void remat_static_options_init(remat_static_options *o)
{
    memset(o, 0, sizeof *o);
    o->algo = REMAT_STATIC_BEST;
    o->work_limit = REMAT_STATIC_WORK_DEFAULT;
}

void remat_static_result_destroy(remat_static_result *r)
{
    if (!r)
        return;
    remat__free(r->offsets);
    r->offsets = NULL;
}

/* ---- greedy passes ----------------------------------------------------------- */

/* qsort has no context argument in C11: sort keys are copied into records. */
typedef struct {
    uint64_t k1, k2, k3;
    uint32_t idx;
} sort_rec;

static int cmp_rec(const void *x, const void *y)
{
    const sort_rec *a = x, *b = y;
    if (a->k1 != b->k1)
        return a->k1 > b->k1 ? -1 : 1; /* descending */
    if (a->k2 != b->k2)
        return a->k2 > b->k2 ? -1 : 1; /* descending */
    if (a->k3 != b->k3)
        return a->k3 < b->k3 ? -1 : 1; /* ascending: earlier start first */
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* Placed intervals, sorted by offset, in chunks of up to CHUNK records
 * (an unrolled list): a scan reads memory in order, an insertion moves at
 * most one chunk. Each chunk is summarized (in an array of its own, so a
 * scan that passes chunks reads memory in order too), and every GROUP
 * consecutive chunks again: a scan passes a chunk or a group in O(1) when
 * none of its records is alive during the query's time range, or when all
 * are and no hole in their byte ranges is wide enough. */
#define CHUNK 64
#define GROUP 32

typedef struct {
    uint32_t n;
    uint64_t off[CHUNK], endo[CHUNK], ts[CHUNK], te[CHUNK];
} chunk;

typedef struct {
    uint64_t first_off;                      /* lowest offset */
    uint64_t min_ts, max_ts, min_te, max_te; /* over the records' [start, end) */
    uint64_t max_end;                        /* largest offset + bytes */
    uint64_t max_gap;                        /* widest hole between a record and the ranges before it */
} summary;

typedef struct {
    chunk **c;
    summary *s;   /* per chunk */
    summary *gs;  /* per group of GROUP chunks: chunks [g * GROUP, (g + 1) * GROUP) */
    size_t n, cap;
} placed;

static void summary_empty(summary *m)
{
    m->first_off = 0;
    m->min_ts = m->min_te = UINT64_MAX;
    m->max_ts = m->max_te = m->max_end = m->max_gap = 0;
}

/* Folds x (whose offsets are all >= those already folded) into m. */
static void summary_fold(summary *m, const summary *x, int first)
{
    if (first)
        m->first_off = x->first_off;
    if (x->min_ts < m->min_ts)
        m->min_ts = x->min_ts;
    if (x->max_ts > m->max_ts)
        m->max_ts = x->max_ts;
    if (x->min_te < m->min_te)
        m->min_te = x->min_te;
    if (x->max_te > m->max_te)
        m->max_te = x->max_te;
    if (!first && x->first_off > m->max_end && x->first_off - m->max_end > m->max_gap)
        m->max_gap = x->first_off - m->max_end;
    if (x->max_gap > m->max_gap)
        m->max_gap = x->max_gap;
    if (x->max_end > m->max_end)
        m->max_end = x->max_end;
}

/* Called after every insertion: one tight pass over the chunk. */
static void summarize(placed *P, size_t i)
{
    const chunk *k = P->c[i];
    summary *m = &P->s[i];
    uint64_t min_ts = UINT64_MAX, max_ts = 0, min_te = UINT64_MAX, max_te = 0, cover = 0, gap = 0;
    for (uint32_t r = 0; r < k->n; r++) {
        uint64_t ts = k->ts[r], te = k->te[r], off = k->off[r];
        min_ts = ts < min_ts ? ts : min_ts;
        max_ts = ts > max_ts ? ts : max_ts;
        min_te = te < min_te ? te : min_te;
        max_te = te > max_te ? te : max_te;
        if (r > 0 && off > cover && off - cover > gap)
            gap = off - cover;
        cover = k->endo[r] > cover ? k->endo[r] : cover;
    }
    m->first_off = k->n ? k->off[0] : 0;
    m->min_ts = min_ts;
    m->max_ts = max_ts;
    m->min_te = min_te;
    m->max_te = max_te;
    m->max_end = cover;
    m->max_gap = gap;
}

static void summarize_group(placed *P, size_t g)
{
    summary *m = &P->gs[g];
    summary_empty(m);
    size_t end = (g + 1) * GROUP < P->n ? (g + 1) * GROUP : P->n;
    for (size_t i = g * GROUP; i < end; i++)
        summary_fold(m, &P->s[i], i == g * GROUP);
}

static void placed_destroy(placed *P)
{
    for (size_t i = 0; i < P->n; i++)
        remat__free(P->c[i]);
    remat__free(P->c);
    remat__free(P->s);
    remat__free(P->gs);
}

/* Inserts chunk k at position i of the chunk order; groups from i's on are
 * summarized again by the caller. */
static int chunk_insert(placed *P, size_t i, chunk *k)
{
    if (P->n == P->cap) {
        size_t cap = P->cap ? P->cap * 2 : 16;
        chunk **nc = remat__realloc(P->c, cap * sizeof *nc);
        if (!nc)
            return -1;
        P->c = nc;
        summary *ns = remat__realloc(P->s, cap * sizeof *ns);
        if (!ns)
            return -1;
        P->s = ns;
        summary *ng = remat__realloc(P->gs, (cap / GROUP + 1) * sizeof *ng);
        if (!ng)
            return -1;
        P->gs = ng;
        P->cap = cap;
    }
    memmove(P->c + i + 1, P->c + i, (P->n - i) * sizeof *P->c);
    memmove(P->s + i + 1, P->s + i, (P->n - i) * sizeof *P->s);
    P->c[i] = k;
    P->n++;
    return 0;
}

/* Records [off, off + bytes) over [ts, te) in offset order. */
static int placed_add(placed *P, uint64_t off, uint64_t bytes, uint64_t ts, uint64_t te)
{
    if (P->n == 0) {
        chunk *k = remat__malloc(sizeof *k);
        if (!k || chunk_insert(P, 0, k)) {
            remat__free(k);
            return -1;
        }
        k->n = 0;
    }
    /* The last chunk whose first offset is <= off (or the first chunk). */
    size_t lo = 0, hi = P->n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (P->c[mid]->off[0] <= off)
            lo = mid;
        else
            hi = mid;
    }
    chunk *k = P->c[lo];
    uint32_t a = 0, b = k->n;
    while (a < b) { /* upper bound of off */
        uint32_t mid = a + (b - a) / 2;
        if (k->off[mid] <= off)
            a = mid + 1;
        else
            b = mid;
    }
    const uint32_t pos = a;
    size_t tail = k->n - pos;
    memmove(k->off + pos + 1, k->off + pos, tail * sizeof *k->off);
    memmove(k->endo + pos + 1, k->endo + pos, tail * sizeof *k->endo);
    memmove(k->ts + pos + 1, k->ts + pos, tail * sizeof *k->ts);
    memmove(k->te + pos + 1, k->te + pos, tail * sizeof *k->te);
    k->off[pos] = off;
    k->endo[pos] = off + bytes;
    k->ts[pos] = ts;
    k->te[pos] = te;
    k->n++;
    size_t regroup_from = lo / GROUP, regroup_to = lo / GROUP + 1;
    if (k->n == CHUNK) {
        /* Full: the upper half moves to a new chunk right after it, and
         * every group from here on shifts by one chunk. */
        chunk *h = remat__malloc(sizeof *h);
        if (!h || chunk_insert(P, lo + 1, h)) {
            remat__free(h);
            return -1;
        }
        h->n = CHUNK / 2;
        k->n = CHUNK / 2;
        memcpy(h->off, k->off + CHUNK / 2, (CHUNK / 2) * sizeof *h->off);
        memcpy(h->endo, k->endo + CHUNK / 2, (CHUNK / 2) * sizeof *h->endo);
        memcpy(h->ts, k->ts + CHUNK / 2, (CHUNK / 2) * sizeof *h->ts);
        memcpy(h->te, k->te + CHUNK / 2, (CHUNK / 2) * sizeof *h->te);
        summarize(P, lo + 1);
        regroup_to = (P->n + GROUP - 1) / GROUP;
    }
    summarize(P, lo);
    for (size_t g = regroup_from; g < regroup_to; g++)
        summarize_group(P, g);
    return 0;
}

/* 1 if a summarized run can be passed whole: nothing in it is alive during
 * [s, e), or all of it is and no hole in it fits b (cand is then raised to
 * its end). */
static int pass(const summary *m, uint64_t s, uint64_t e, uint64_t b, uint64_t *cand)
{
    if (m->max_te <= s || m->min_ts >= e)
        return 1;
    if (m->max_ts < e && m->min_te > s && m->max_gap < b) {
        if (m->max_end > *cand)
            *cand = m->max_end;
        return 1;
    }
    return 0;
}

/* The lowest offset >= base at which [s, e) x b collides with nothing
 * placed. Every placed record at or above cand + b is above the gap, so
 * the scan stops at the first one: the records are sorted by offset. */
static uint64_t lowest_fit(const placed *P, uint64_t base, uint64_t s, uint64_t e, uint64_t b, uint64_t *work)
{
    uint64_t cand = base, w = 0;
    const size_t n_groups = (P->n + GROUP - 1) / GROUP;
    for (size_t g = 0; g < n_groups; g++) {
        w++;
        if (P->gs[g].first_off >= cand + b)
            break;
        if (pass(&P->gs[g], s, e, b, &cand))
            continue;
        size_t end = (g + 1) * GROUP < P->n ? (g + 1) * GROUP : P->n;
        for (size_t i = g * GROUP; i < end; i++) {
            w++;
            if (P->s[i].first_off >= cand + b)
                goto found;
            if (pass(&P->s[i], s, e, b, &cand))
                continue;
            const chunk *k = P->c[i];
            for (uint32_t r = 0; r < k->n; r++) {
                w++;
                if (k->off[r] >= cand + b)
                    goto found;
                if (k->ts[r] < e && s < k->te[r] && k->endo[r] > cand)
                    cand = k->endo[r];
            }
        }
    }
found:
    *work += w;
    return cand;
}

/* Places the non-resident intervals in the order of recs above base.
 * Returns 0 on success, 1 when the work bound was hit or the arena went
 * above cutoff (the pass cannot win then: an arena only grows), -1 out of
 * memory. */
static int greedy(const remat_alloc_trace *t, const sort_rec *recs, size_t m, uint64_t base, uint64_t work_limit,
                  uint64_t cutoff, uint64_t *off, uint64_t *arena)
{
    const remat_alloc_interval *iv = t->iv;
    placed P = {NULL, NULL, NULL, 0, 0};
    uint64_t work = 0, top = base;
    int rc = 0;
    for (size_t i = 0; i < m; i++) {
        uint32_t k = recs[i].idx;
        uint64_t cand = lowest_fit(&P, base, iv[k].start, iv[k].end, iv[k].bytes, &work);
        if (work > work_limit) {
            rc = 1;
            break;
        }
        if (placed_add(&P, cand, iv[k].bytes, iv[k].start, iv[k].end)) {
            rc = -1;
            break;
        }
        off[k] = cand;
        if (cand + iv[k].bytes > top)
            top = cand + iv[k].bytes;
        if (top > cutoff) {
            rc = 1;
            break;
        }
    }
    placed_destroy(&P);
    *arena = top;
    return rc;
}

/* Runs one greedy order into off (every interval). Returns REMAT_OK with
 * *gave_up set when the work bound stopped it. */
static remat_status run_greedy(const remat_alloc_trace *t, remat_static_algo algo, uint64_t work_limit,
                               uint64_t cutoff, uint64_t *off, uint64_t *arena, int *gave_up, remat_err *err)
{
    size_t n = t->n, m = 0;
    uint64_t base = 0;
    sort_rec *recs = remat__array(n ? n : 1, sizeof *recs);
    if (!recs)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory planning offsets");
    for (size_t k = 0; k < n; k++) {
        const remat_alloc_interval *v = &t->iv[k];
        if (v->first == REMAT_ALLOC_BEFORE) {
            off[k] = base;
            base += v->bytes; /* the trace's total was checked by the caller */
            continue;
        }
        uint64_t life = v->end - v->start;
        sort_rec *r = &recs[m++];
        r->idx = (uint32_t)k;
        r->k3 = v->start;
        if (algo == REMAT_STATIC_GREEDY_SIZE) {
            r->k1 = v->bytes;
            r->k2 = life;
        } else {
            r->k1 = life;
            r->k2 = v->bytes;
        }
    }
    qsort(recs, m, sizeof *recs, cmp_rec);
    int rc = greedy(t, recs, m, base, work_limit, cutoff, off, arena);
    remat__free(recs);
    if (rc < 0)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory planning offsets");
    *gave_up = rc;
    return REMAT_OK;
}

remat_status remat_alloc_static_plan(const remat_alloc_trace *t, const remat_static_options *o,
                                     remat_static_result *out, remat_err *err)
{
    double t0 = remat__alloc_now();
    remat_static_options dflt;
    remat_static_options_init(&dflt);
    if (!o)
        o = &dflt;
    memset(out, 0, sizeof *out);
    out->algo = o->algo;
    out->lower_bound = t->logical_peak;
    if ((unsigned)o->algo >= REMAT_STATIC_ALGO_COUNT)
        return remat_err_set(err, REMAT_EINVAL, "unknown static planning algorithm %d", (int)o->algo);
    /* Every offset + bytes is at most the sum of all bytes: check it once. */
    uint64_t total = 0;
    for (size_t k = 0; k < t->n; k++)
        if (!remat_u64_add(total, t->iv[k].bytes, &total))
            return remat_err_set(err, REMAT_EOVERFLOW, "static plan: the bytes of all allocations exceed 2^64-1");
    const uint64_t limit = o->work_limit ? o->work_limit : REMAT_STATIC_WORK_DEFAULT;
    size_t n = t->n ? t->n : 1;
    uint64_t *cur = remat__array(n, sizeof *cur);
    out->offsets = remat__array(n, sizeof *out->offsets);
    if (!cur || !out->offsets) {
        remat__free(cur);
        remat_static_result_destroy(out);
        return remat_err_set(err, REMAT_ENOMEM, "out of memory planning offsets");
    }
    /* BEST tries the cheap layout first: it often reaches the bound. */
    static const remat_static_algo best_order[REMAT_STATIC_N_ALGOS] = {
        REMAT_STATIC_ALLOC_ORDER, REMAT_STATIC_GREEDY_SIZE, REMAT_STATIC_GREEDY_LIFETIME};
    int have = 0;
    remat_status st = REMAT_OK;
    for (int i = 0; i < REMAT_STATIC_N_ALGOS && st == REMAT_OK; i++) {
        remat_static_algo al = o->algo == REMAT_STATIC_BEST ? best_order[i] : o->algo;
        if (o->algo != REMAT_STATIC_BEST && i > 0)
            break;
        if (o->algo == REMAT_STATIC_BEST && o->stop_at_bound && have && out->arena_bytes == out->lower_bound)
            break;
        if (o->algo == REMAT_STATIC_BEST && o->algos && !(o->algos & (1u << al)))
            continue;
        double a0 = remat__alloc_now();
        uint64_t arena = 0;
        int gave_up = 0;
        if (al == REMAT_STATIC_ALLOC_ORDER) {
            remat_alloc_result bf;
            st = remat_alloc_simulate(t, REMAT_ALLOC_BEST_FIT, 1, &bf, err);
            if (st == REMAT_OK) {
                memcpy(cur, bf.offsets, t->n * sizeof *cur);
                arena = bf.high_water;
            }
            remat_alloc_result_destroy(&bf);
        } else {
            /* Where only the best layout counts (stop_at_bound), a pass
             * stops as soon as its arena passes the best so far: it
             * would lose even a tie then. */
            st = run_greedy(t, al, limit, o->stop_at_bound && have ? out->arena_bytes : UINT64_MAX, cur, &arena,
                            &gave_up, err);
        }
        if (st != REMAT_OK)
            break;
        out->seconds_by_algo[al] = remat__alloc_now() - a0;
        out->ran[al] = gave_up ? -1 : 1;
        if (gave_up)
            continue;
        out->arena_by_algo[al] = arena;
        /* Ties go to the earlier algorithm in the enum (greedy-size first). */
        if (!have || arena < out->arena_bytes || (arena == out->arena_bytes && al < out->chosen)) {
            have = 1;
            out->arena_bytes = arena;
            out->chosen = al;
            memcpy(out->offsets, cur, t->n * sizeof *cur);
        }
    }
    remat__free(cur);
    if (st == REMAT_OK && !have)
        st = remat_err_set(err, REMAT_EUNSUPPORTED,
                           "static plan: %s gave up after %llu conflict checks (its work bound); "
                           "alloc-order or best always finish",
                           remat_static_algo_name(o->algo), (unsigned long long)limit);
    if (st != REMAT_OK) {
        remat_static_result_destroy(out);
        return st;
    }
    out->seconds = remat__alloc_now() - t0;
    return REMAT_OK;
}

/* ---- checks and the arena of a schedule --------------------------------------- */

remat_status remat_alloc_verify(const remat_alloc_trace *t, const uint64_t *offsets, uint64_t extent,
                                remat_err *err)
{
    remat__blkpool P;
    remat__blkpool_init(&P);
    remat__treap live;
    remat__treap_init(&live, 1);
    uint32_t *node = remat__array(t->n ? t->n : 1, sizeof *node);
    remat_status st = node ? REMAT_OK : remat_err_set(err, REMAT_ENOMEM, "out of memory checking a layout");
    for (size_t e = 0; st == REMAT_OK && e < t->n_events; e++) {
        uint32_t k = t->events[e] >> 1;
        if (t->events[e] & 1u) {
            remat__treap_erase(P.b, &live, node[k]);
            remat__blk_release(&P, node[k]);
            continue;
        }
        uint64_t off = offsets[k], end = 0;
        if (!remat_u64_add(off, t->iv[k].bytes, &end) || end > extent) {
            st = remat_err_set(err, REMAT_EINTERNAL, "layout: allocation %u ends at %llu, past the extent %llu", k,
                               (unsigned long long)end, (unsigned long long)extent);
            break;
        }
        uint32_t x = remat__blk_new(&P, off, t->iv[k].bytes);
        if (x == REMAT__NIL) {
            st = remat_err_set(err, REMAT_ENOMEM, "out of memory checking a layout");
            break;
        }
        P.b[x].owner = k;
        /* Live intervals are disjoint, so only the neighbours can collide. */
        uint32_t lo = remat__treap_below(P.b, &live, x), hi = remat__treap_above(P.b, &live, x);
        uint32_t hit = REMAT__NIL;
        if (lo != REMAT__NIL && P.b[lo].off + P.b[lo].size > off)
            hit = lo;
        else if (hi != REMAT__NIL && P.b[hi].off < end)
            hit = hi;
        if (hit != REMAT__NIL) {
            uint32_t j = P.b[hit].owner;
            st = remat_err_set(err, REMAT_EINTERNAL,
                               "layout: allocations %u [%llu, %llu) and %u [%llu, %llu) are alive together and "
                               "share bytes",
                               j, (unsigned long long)offsets[j], (unsigned long long)(offsets[j] + t->iv[j].bytes),
                               k, (unsigned long long)off, (unsigned long long)end);
            break;
        }
        remat__treap_insert(P.b, &live, x);
        node[k] = x;
    }
    remat__free(node);
    remat__blkpool_destroy(&P);
    return st;
}

remat_status remat_alloc_arena(const remat_analysis *a, const remat_schedule *s, const remat_exec_extras *extras,
                               uint32_t mask, remat_replay_result *r, uint64_t *arena, remat_err *err)
{
    *arena = 0;
    remat_alloc_trace t;
    remat_status st = remat_alloc_trace_build(a, s, extras, mask, &t, r, err);
    if (st == REMAT_ESCHEDULE)
        return REMAT_OK; /* r->valid is false and err says why, as remat_replay does */
    if (st != REMAT_OK)
        return st;
    remat_static_options o;
    remat_static_options_init(&o);
    o.stop_at_bound = 1;
    o.algos = (1u << REMAT_STATIC_ALLOC_ORDER) | (1u << REMAT_STATIC_GREEDY_SIZE);
    remat_static_result sp;
    st = remat_alloc_static_plan(&t, &o, &sp, err);
    if (st == REMAT_OK)
        *arena = sp.arena_bytes;
    remat_static_result_destroy(&sp);
    remat_alloc_trace_destroy(&t);
    if (st != REMAT_OK)
        remat_replay_result_destroy(r);
    return st;
}

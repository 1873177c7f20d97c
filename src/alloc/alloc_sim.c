/*
 * alloc_sim.c - dynamic allocators over an allocation trace: best fit and
 * first fit with coalescing, and a model of PyTorch's CUDA caching
 * allocator.
 *
 * Best fit and first fit manage one heap that grows upward from address 0
 * (as dlmalloc's top chunk does): a request takes a free hole when one fits
 * (split, the rest stays free) and otherwise extends the top; a freed block
 * merges with its free neighbours, and a free block that reaches the top is
 * given back to it, so the top is always the end of the highest live block.
 * The high-water mark is the highest top. Holes are kept in a treap: by
 * (size, address) for best fit, by address with each subtree's largest hole
 * for first fit; both find a hole in O(log n).
 *
 * The caching model (remat/alloc.h states its assumptions) reserves
 * segments by bumping a pointer and never gives them back; blocks are
 * carved from them and cached in two pools, each a treap by (size,
 * address). The high-water mark is the bytes reserved.
 */
#include "alloc_internal.h"
#include "../util/util_internal.h"

#include <string.h>

static const char *const policy_names[REMAT_ALLOC_POLICY_COUNT] = {"best-fit", "first-fit", "caching"};

const char *remat_alloc_policy_name(remat_alloc_policy p)
{
    return (unsigned)p < REMAT_ALLOC_POLICY_COUNT ? policy_names[p] : "?";
}

int remat_alloc_policy_parse(const char *name, remat_alloc_policy *out)
{
    for (int i = 0; i < REMAT_ALLOC_POLICY_COUNT; i++)
        if (strcmp(name, policy_names[i]) == 0) {
            *out = (remat_alloc_policy)i;
            return 1;
        }
    return 0;
}

const char *remat_alloc_caching_assumptions(void)
{
    return "caching allocator model after PyTorch's CUDACachingAllocator (one device, one stream)\n"
           "requests rounded up to a multiple of 512 B (at least 512 B)\n"
           "requests of at most 1 MiB: small pool, carved from 2 MiB segments\n"
           "larger requests: large pool, from 20 MiB segments under 10 MiB, else a segment of the request "
           "rounded up to 2 MiB\n"
           "best fit within a pool (smallest block, then lowest address); a block is split when the rest is at "
           "least 512 B (small pool) or more than 1 MiB (large pool)\n"
           "freed blocks are cached in their pool and merge with free neighbours of the same segment only\n"
           "segments are never released (no empty_cache, no retry on out of memory: the address space is "
           "unbounded)\n"
           "not modelled: streams and events, max_split_size, expandable segments, roundup_power2_divisions, "
           "memory fractions\n"
           "parameters, inputs and ledger state go through the same allocator, first, in tensor order\n";
}

typedef struct {
    const remat_alloc_trace *t;
    remat_alloc_result *out;
    remat_err *err;
    remat__blkpool P;
    remat__treap holes;    /* best/first fit */
    remat__treap pool[2];  /* caching: small, large */
    uint32_t last;         /* best/first fit: the highest block (NIL when the heap is empty) */
    uint64_t top;          /* best/first fit: end of the heap; caching: bytes reserved */
    uint64_t live;         /* bytes in handed-out blocks */
    uint32_t *blk_of;      /* interval -> its block */
    uint32_t n_segments;
} sim;

static remat_status oom(sim *S)
{
    return remat_err_set(S->err, REMAT_ENOMEM, "out of memory simulating the %s allocator",
                         remat_alloc_policy_name(S->out->policy));
}

static remat_status too_far(sim *S)
{
    return remat_err_set(S->err, REMAT_EOVERFLOW, "%s allocator: addresses past 2^64-1",
                         remat_alloc_policy_name(S->out->policy));
}

static uint64_t largest_free(sim *S)
{
    if (S->out->policy == REMAT_ALLOC_CACHING) {
        uint64_t a = remat__treap_largest(S->P.b, &S->pool[0]), b = remat__treap_largest(S->P.b, &S->pool[1]);
        return a > b ? a : b;
    }
    return remat__treap_largest(S->P.b, &S->holes);
}

/* Called after an allocation: the high-water mark and its moment. */
static void note_high_water(sim *S, size_t index)
{
    remat_alloc_result *o = S->out;
    if (S->top > o->high_water) {
        o->high_water = S->top;
        o->high_water_index = index;
        o->live_at_high_water = S->live;
        o->free_at_high_water = S->top - S->live;
        o->largest_free_at_high_water = largest_free(S);
    }
}

/* Links y into the address list right after x. */
static void link_after(remat__blk *b, uint32_t x, uint32_t y)
{
    b[y].prev = x;
    b[y].next = b[x].next;
    if (b[x].next != REMAT__NIL)
        b[b[x].next].prev = y;
    b[x].next = y;
}

static void unlink_blk(remat__blk *b, uint32_t x)
{
    if (b[x].prev != REMAT__NIL)
        b[b[x].prev].next = b[x].next;
    if (b[x].next != REMAT__NIL)
        b[b[x].next].prev = b[x].prev;
}

/* ---- best fit and first fit ------------------------------------------------ */

static remat_status heap_alloc(sim *S, uint32_t k)
{
    uint64_t n = S->t->iv[k].bytes;
    uint32_t x = S->out->policy == REMAT_ALLOC_BEST_FIT ? remat__treap_best_fit(S->P.b, &S->holes, n)
                                                         : remat__treap_first_fit(S->P.b, &S->holes, n);
    if (x != REMAT__NIL) {
        remat__treap_erase(S->P.b, &S->holes, x);
        if (S->P.b[x].size > n) {
            /* The rest of the hole stays free, above the block. */
            uint32_t y = remat__blk_new(&S->P, S->P.b[x].off + n, S->P.b[x].size - n);
            if (y == REMAT__NIL)
                return oom(S);
            remat__blk *b = S->P.b;
            b[y].free = 1;
            link_after(b, x, y);
            if (S->last == x)
                S->last = y; /* unreachable: the highest block is never free */
            b[x].size = n;
            remat__treap_insert(b, &S->holes, y);
        }
    } else {
        uint64_t end;
        if (!remat_u64_add(S->top, n, &end))
            return too_far(S);
        x = remat__blk_new(&S->P, S->top, n);
        if (x == REMAT__NIL)
            return oom(S);
        if (S->last != REMAT__NIL)
            link_after(S->P.b, S->last, x);
        S->last = x;
        S->top = end;
    }
    S->P.b[x].free = 0;
    S->P.b[x].owner = k;
    S->blk_of[k] = x;
    S->live += n;
    return REMAT_OK;
}

static void heap_free(sim *S, uint32_t k)
{
    uint32_t x = S->blk_of[k];
    remat__blk *b = S->P.b;
    S->live -= b[x].size;
    b[x].free = 1;
    b[x].owner = REMAT__NIL;
    uint32_t p = b[x].prev, nx = b[x].next;
    if (p != REMAT__NIL && b[p].free) {
        remat__treap_erase(b, &S->holes, p);
        b[p].size += b[x].size;
        unlink_blk(b, x);
        if (S->last == x)
            S->last = p;
        remat__blk_release(&S->P, x);
        x = p;
    }
    if (nx != REMAT__NIL && b[nx].free) {
        remat__treap_erase(b, &S->holes, nx);
        b[x].size += b[nx].size;
        unlink_blk(b, nx);
        if (S->last == nx)
            S->last = x;
        remat__blk_release(&S->P, nx);
    }
    if (S->last == x) {
        /* The top block is free: the heap shrinks back to the block below. */
        S->top = b[x].off;
        S->last = b[x].prev;
        unlink_blk(b, x);
        remat__blk_release(&S->P, x);
    } else {
        remat__treap_insert(b, &S->holes, x);
    }
}

/* ---- the caching model ------------------------------------------------------ */

static uint64_t round_up(uint64_t v, uint64_t m, int *ovf)
{
    uint64_t r = v % m;
    if (r == 0)
        return v;
    if (v > UINT64_MAX - (m - r)) {
        *ovf = 1;
        return v;
    }
    return v + (m - r);
}

static remat_status cache_alloc(sim *S, uint32_t k)
{
    int ovf = 0;
    uint64_t req = S->t->iv[k].bytes;
    uint64_t n = req < REMAT_CACHING_ROUND ? REMAT_CACHING_ROUND : round_up(req, REMAT_CACHING_ROUND, &ovf);
    int large = n > REMAT_CACHING_SMALL_SIZE;
    remat__treap *pool = &S->pool[large];
    uint32_t x = remat__treap_best_fit(S->P.b, pool, n);
    if (x != REMAT__NIL) {
        remat__treap_erase(S->P.b, pool, x);
    } else {
        uint64_t seg = !large                               ? REMAT_CACHING_SMALL_SEGMENT
                       : n < REMAT_CACHING_MIN_LARGE_ALLOC ? REMAT_CACHING_LARGE_SEGMENT
                                                            : round_up(n, REMAT_CACHING_ROUND_LARGE, &ovf);
        uint64_t end;
        if (ovf || !remat_u64_add(S->top, seg, &end))
            return too_far(S);
        x = remat__blk_new(&S->P, S->top, seg);
        if (x == REMAT__NIL)
            return oom(S);
        S->P.b[x].seg = S->n_segments++;
        S->P.b[x].pool = (uint8_t)large;
        S->top = end;
        if (large)
            S->out->segments_large++;
        else
            S->out->segments_small++;
    }
    uint64_t rest = S->P.b[x].size - n;
    if (large ? rest > REMAT_CACHING_SMALL_SIZE : rest >= REMAT_CACHING_ROUND) {
        uint32_t y = remat__blk_new(&S->P, S->P.b[x].off + n, rest);
        if (y == REMAT__NIL)
            return oom(S);
        remat__blk *b = S->P.b;
        b[y].free = 1;
        b[y].seg = b[x].seg;
        b[y].pool = b[x].pool;
        link_after(b, x, y);
        b[x].size = n;
        remat__treap_insert(b, pool, y);
    }
    remat__blk *b = S->P.b;
    b[x].free = 0;
    b[x].owner = k;
    S->blk_of[k] = x;
    S->live += b[x].size; /* a block not split is handed out whole */
    if (S->live > S->out->allocated_peak)
        S->out->allocated_peak = S->live;
    return REMAT_OK;
}

static void cache_free(sim *S, uint32_t k)
{
    uint32_t x = S->blk_of[k];
    remat__blk *b = S->P.b;
    remat__treap *pool = &S->pool[b[x].pool];
    S->live -= b[x].size;
    b[x].free = 1;
    b[x].owner = REMAT__NIL;
    /* The address list links blocks of one segment only: merging follows it. */
    uint32_t p = b[x].prev, nx = b[x].next;
    if (p != REMAT__NIL && b[p].free) {
        remat__treap_erase(b, pool, p);
        b[p].size += b[x].size;
        unlink_blk(b, x);
        remat__blk_release(&S->P, x);
        x = p;
    }
    if (nx != REMAT__NIL && b[nx].free) {
        remat__treap_erase(b, pool, nx);
        b[x].size += b[nx].size;
        unlink_blk(b, nx);
        remat__blk_release(&S->P, nx);
    }
    remat__treap_insert(b, pool, x);
}

/* ---- driver ------------------------------------------------------------------ */

void remat_alloc_result_destroy(remat_alloc_result *r)
{
    if (!r)
        return;
    remat__free(r->offsets);
    r->offsets = NULL;
}

static void snapshot_logical_peak(sim *S)
{
    S->out->extent_at_logical_peak = S->top;
    S->out->largest_free_at_logical_peak = largest_free(S);
}

remat_status remat_alloc_simulate(const remat_alloc_trace *t, remat_alloc_policy policy, int with_offsets,
                                  remat_alloc_result *out, remat_err *err)
{
    double t0 = remat__alloc_now();
    memset(out, 0, sizeof *out);
    out->policy = policy;
    out->logical_peak = t->logical_peak;
    out->high_water_index = REMAT_ALLOC_BEFORE;
    if ((unsigned)policy >= REMAT_ALLOC_POLICY_COUNT)
        return remat_err_set(err, REMAT_EINVAL, "unknown allocator policy %d", (int)policy);
    sim S;
    memset(&S, 0, sizeof S);
    S.t = t;
    S.out = out;
    S.err = err;
    S.last = REMAT__NIL;
    remat__blkpool_init(&S.P);
    remat__treap_init(&S.holes, policy == REMAT_ALLOC_FIRST_FIT);
    remat__treap_init(&S.pool[0], 0);
    remat__treap_init(&S.pool[1], 0);
    S.blk_of = remat__array(t->n ? t->n : 1, sizeof *S.blk_of);
    if (with_offsets)
        out->offsets = remat__array(t->n ? t->n : 1, sizeof *out->offsets);
    remat_status st = REMAT_OK;
    if (!S.blk_of || (with_offsets && !out->offsets))
        st = oom(&S);
    const int caching = policy == REMAT_ALLOC_CACHING;
    for (size_t e = 0; st == REMAT_OK && e < t->n_events; e++) {
        if (e == t->logical_peak_event)
            snapshot_logical_peak(&S);
        uint32_t k = t->events[e] >> 1;
        if (t->events[e] & 1u) {
            if (caching)
                cache_free(&S, k);
            else
                heap_free(&S, k);
            continue;
        }
        st = caching ? cache_alloc(&S, k) : heap_alloc(&S, k);
        if (st != REMAT_OK)
            break;
        out->allocations++;
        if (out->offsets)
            out->offsets[k] = S.P.b[S.blk_of[k]].off;
        note_high_water(&S, t->iv[k].first);
    }
    if (st == REMAT_OK && t->logical_peak_event >= t->n_events)
        snapshot_logical_peak(&S);
    remat__free(S.blk_of);
    remat__blkpool_destroy(&S.P);
    if (st != REMAT_OK) {
        remat_alloc_result_destroy(out);
        return st;
    }
    if (!caching)
        out->allocated_peak = t->logical_peak; /* exact sizes: what is handed out is what was asked */
    out->fragmentation = out->high_water - out->logical_peak;
    out->seconds = remat__alloc_now() - t0;
    return REMAT_OK;
}

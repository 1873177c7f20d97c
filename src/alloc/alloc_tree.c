/*
 * alloc_tree.c - the block pool and the treap the allocator simulation
 * keeps its free blocks in.
 *
 * Blocks live in one growable array and are named by index, so that a
 * realloc of the array never leaves a dangling link (the style of ggml's
 * allocator side records, without pointers). Released blocks are recycled
 * through a free list. The treap's recursion depth is O(log n) expected.
 */
#define _POSIX_C_SOURCE 200809L
#include "alloc_internal.h"
#include "../util/util_internal.h"

#include <string.h>
#include <time.h>

double remat__alloc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void remat__blkpool_init(remat__blkpool *p)
{
    memset(p, 0, sizeof *p);
    p->recycled = REMAT__NIL;
}

void remat__blkpool_destroy(remat__blkpool *p)
{
    if (!p)
        return;
    remat__free(p->b);
    remat__blkpool_init(p);
}

/* splitmix64's finalizer: well-spread priorities from a counter. */
static uint32_t priority(uint64_t serial)
{
    uint64_t z = serial + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

uint32_t remat__blk_new(remat__blkpool *p, uint64_t off, uint64_t size)
{
    uint32_t x;
    if (p->recycled != REMAT__NIL) {
        x = p->recycled;
        p->recycled = p->b[x].next;
    } else {
        if (p->n == p->cap) {
            /* Indices are uint32 and NIL is the largest: stop short of it. */
            if (p->cap >= UINT32_MAX / 2)
                return REMAT__NIL;
            uint32_t cap = p->cap ? p->cap * 2 : 64;
            remat__blk *nb = remat__realloc(p->b, (size_t)cap * sizeof *nb);
            if (!nb)
                return REMAT__NIL;
            p->b = nb;
            p->cap = cap;
        }
        x = p->n++;
    }
    remat__blk *k = &p->b[x];
    memset(k, 0, sizeof *k);
    k->off = off;
    k->size = k->max = size;
    k->l = k->r = k->prev = k->next = REMAT__NIL;
    k->owner = REMAT__NIL;
    k->pri = priority(p->serial++);
    return x;
}

void remat__blk_release(remat__blkpool *p, uint32_t x)
{
    p->b[x].next = p->recycled;
    p->recycled = x;
}

void remat__treap_init(remat__treap *t, int by_addr)
{
    t->root = REMAT__NIL;
    t->by_addr = by_addr;
}

/* key(x) < key(y). The index breaks ties so that keys are unique. */
static int less(const remat__blk *b, int by_addr, uint32_t x, uint32_t y)
{
    if (!by_addr && b[x].size != b[y].size)
        return b[x].size < b[y].size;
    if (b[x].off != b[y].off)
        return b[x].off < b[y].off;
    return x < y;
}

static void update(remat__blk *b, uint32_t x)
{
    uint64_t m = b[x].size;
    if (b[x].l != REMAT__NIL && b[b[x].l].max > m)
        m = b[b[x].l].max;
    if (b[x].r != REMAT__NIL && b[b[x].r].max > m)
        m = b[b[x].r].max;
    b[x].max = m;
}

static uint32_t insert(remat__blk *b, int by_addr, uint32_t t, uint32_t x)
{
    if (t == REMAT__NIL) {
        b[x].l = b[x].r = REMAT__NIL;
        update(b, x);
        return x;
    }
    if (less(b, by_addr, x, t)) {
        b[t].l = insert(b, by_addr, b[t].l, x);
        if (b[b[t].l].pri > b[t].pri) { /* rotate right */
            uint32_t l = b[t].l;
            b[t].l = b[l].r;
            b[l].r = t;
            update(b, t);
            update(b, l);
            return l;
        }
    } else {
        b[t].r = insert(b, by_addr, b[t].r, x);
        if (b[b[t].r].pri > b[t].pri) { /* rotate left */
            uint32_t r = b[t].r;
            b[t].r = b[r].l;
            b[r].l = t;
            update(b, t);
            update(b, r);
            return r;
        }
    }
    update(b, t);
    return t;
}

static uint32_t merge(remat__blk *b, uint32_t x, uint32_t y)
{
    if (x == REMAT__NIL)
        return y;
    if (y == REMAT__NIL)
        return x;
    if (b[x].pri > b[y].pri) {
        b[x].r = merge(b, b[x].r, y);
        update(b, x);
        return x;
    }
    b[y].l = merge(b, x, b[y].l);
    update(b, y);
    return y;
}

static uint32_t erase(remat__blk *b, int by_addr, uint32_t t, uint32_t x)
{
    if (t == REMAT__NIL)
        return t; /* not present: callers only erase members, so this is unreachable */
    if (t == x)
        return merge(b, b[t].l, b[t].r);
    if (less(b, by_addr, x, t))
        b[t].l = erase(b, by_addr, b[t].l, x);
    else
        b[t].r = erase(b, by_addr, b[t].r, x);
    update(b, t);
    return t;
}

void remat__treap_insert(remat__blk *b, remat__treap *t, uint32_t x)
{
    t->root = insert(b, t->by_addr, t->root, x);
}

void remat__treap_erase(remat__blk *b, remat__treap *t, uint32_t x)
{
    t->root = erase(b, t->by_addr, t->root, x);
    b[x].l = b[x].r = REMAT__NIL;
}

uint32_t remat__treap_best_fit(const remat__blk *b, const remat__treap *t, uint64_t size)
{
    uint32_t cur = t->root, best = REMAT__NIL;
    while (cur != REMAT__NIL) {
        if (b[cur].size >= size) {
            best = cur;
            cur = b[cur].l;
        } else {
            cur = b[cur].r;
        }
    }
    return best;
}

uint32_t remat__treap_first_fit(const remat__blk *b, const remat__treap *t, uint64_t size)
{
    uint32_t cur = t->root;
    if (cur == REMAT__NIL || b[cur].max < size)
        return REMAT__NIL;
    for (;;) {
        uint32_t l = b[cur].l;
        if (l != REMAT__NIL && b[l].max >= size)
            cur = l;
        else if (b[cur].size >= size)
            return cur;
        else
            cur = b[cur].r; /* its max is >= size: the subtree's is, and neither l nor cur has it */
    }
}

uint64_t remat__treap_largest(const remat__blk *b, const remat__treap *t)
{
    if (t->root == REMAT__NIL)
        return 0;
    if (t->by_addr)
        return b[t->root].max;
    uint32_t cur = t->root;
    while (b[cur].r != REMAT__NIL)
        cur = b[cur].r;
    return b[cur].size;
}

uint32_t remat__treap_below(const remat__blk *b, const remat__treap *t, uint32_t x)
{
    uint32_t cur = t->root, best = REMAT__NIL;
    while (cur != REMAT__NIL) {
        if (less(b, t->by_addr, cur, x)) {
            best = cur;
            cur = b[cur].r;
        } else {
            cur = b[cur].l;
        }
    }
    return best;
}

uint32_t remat__treap_above(const remat__blk *b, const remat__treap *t, uint32_t x)
{
    uint32_t cur = t->root, best = REMAT__NIL;
    while (cur != REMAT__NIL) {
        if (less(b, t->by_addr, x, cur)) {
            best = cur;
            cur = b[cur].l;
        } else {
            cur = b[cur].r;
        }
    }
    return best;
}

/*
 * alloc_internal.h - what the allocator simulation's files share: a pool of
 * address blocks and a treap over them (by size then address for best fit,
 * or by address with each subtree's largest block for first fit and for
 * neighbour queries).
 *
 * A treap keeps the cost of every operation O(log n) expected without the
 * bookkeeping of a red-black tree; priorities come from a hash of a serial
 * number, so runs are deterministic and nothing global is touched.
 */
#ifndef REMAT_ALLOC_INTERNAL_H
#define REMAT_ALLOC_INTERNAL_H

#include "remat/alloc.h"

#define REMAT__NIL UINT32_MAX

typedef struct remat__blk {
    uint64_t off, size;
    uint64_t max;          /* largest size in the subtree (address-keyed trees) */
    uint32_t l, r, pri;    /* treap links and priority */
    uint32_t prev, next;   /* address-order neighbours (within one segment for the caching model) */
    uint32_t seg;          /* caching model: segment number */
    uint32_t owner;        /* interval index, or REMAT__NIL for a free block */
    uint8_t free;
    uint8_t pool;          /* caching model: 0 small, 1 large */
} remat__blk;

typedef struct remat__blkpool {
    remat__blk *b;
    uint32_t n, cap;
    uint32_t recycled; /* head of the list of released blocks (linked through .next) */
    uint64_t serial;
} remat__blkpool;

void remat__blkpool_init(remat__blkpool *p);
void remat__blkpool_destroy(remat__blkpool *p);
/* A new block with every link NIL; REMAT__NIL when out of memory. May move
 * p->b: reload pointers into it afterwards. */
uint32_t remat__blk_new(remat__blkpool *p, uint64_t off, uint64_t size);
void remat__blk_release(remat__blkpool *p, uint32_t x);

typedef struct remat__treap {
    uint32_t root;
    int by_addr; /* 1: key (off, index), subtree max maintained; 0: key (size, off, index) */
} remat__treap;

void remat__treap_init(remat__treap *t, int by_addr);
void remat__treap_insert(remat__blk *b, remat__treap *t, uint32_t x);
void remat__treap_erase(remat__blk *b, remat__treap *t, uint32_t x);
/* Size-keyed: the smallest block of at least size (lowest address on ties). */
uint32_t remat__treap_best_fit(const remat__blk *b, const remat__treap *t, uint64_t size);
/* Address-keyed: the lowest-address block of at least size. */
uint32_t remat__treap_first_fit(const remat__blk *b, const remat__treap *t, uint64_t size);
/* The largest block's size (0 when empty). */
uint64_t remat__treap_largest(const remat__blk *b, const remat__treap *t);
/* Address-keyed: the nearest blocks below and above key(x) (x need not be
 * in the tree), REMAT__NIL when none. */
uint32_t remat__treap_below(const remat__blk *b, const remat__treap *t, uint32_t x);
uint32_t remat__treap_above(const remat__blk *b, const remat__treap *t, uint32_t x);

double remat__alloc_now(void);

#endif

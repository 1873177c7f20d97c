/*
 * class_internal.h - what the class search (class_search.c) and its tables
 * and estimate (class_estimate.c) share: the state of one search.
 */
#ifndef REMAT_CLASS_INTERNAL_H
#define REMAT_CLASS_INTERNAL_H

#include "planner.h"

__extension__ typedef unsigned __int128 class_u128;

#define CLASS_MAX_ACT 64
/* More than this many tensors touched by one instruction: 2^n free subsets
 * per edge is too many; the search declines the graph. */
#define CLASS_MAX_TOUCHED 12
#define CLASS_INF UINT64_MAX

typedef struct {
    uint64_t mask, g, h;
    uint32_t p, parent, instr; /* instr: kind << 24 | arg of the edge from parent */
} class_node;

typedef struct {
    uint64_t f, g;
    uint32_t node, p, pop; /* pop: resident activations, the plateau's tie-break (class_search.c) */
} class_hentry;

typedef struct {
    class_hentry *v;
    size_t n, cap;
} class_heap;

/* One droppable storage at a pressure step (the estimate's part 2). */
typedef struct {
    uint64_t smask, bytes, cost;
    uint32_t born, bit;
} class_item;

typedef struct {
    uint32_t step, off, n;
    uint64_t excess; /* over the budget with every listed storage resident */
    uint64_t most;   /* the step's charge with nothing missing: no state's is higher */
    uint64_t roots;  /* the listed storages' root bits */
} class_step;

typedef struct class_state {
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
    class_item *items;
    class_step *ps;
    uint32_t n_ps;
    class_node *nd;
    uint32_t n_nd, cap_nd, max_nd;
    uint64_t *slot; /* open addressing: hash << 32 | node + 1 (class_search.c) */
    uint32_t slot_mask;
    class_heap heap;
    uint64_t ub;
    uint64_t work; /* 8 an expansion, 4 a look-up, 4 a state, 1 per step and storage the estimate visits */
    /* Dives (file comment): the best successor seen, and the schedule of
     * the cheapest complete schedule found so far (own = 1). */
    int diving;
    class_node *kids;
    size_t kids_n, kids_cap;
    remat_schedule found;
    int own;
} class_state;

/* The bytes of the storages with a member in mask. */
static inline uint64_t remat__class_bytes(const class_state *S, uint64_t mask)
{
    uint64_t b = 0;
    for (uint32_t j = 0; j < S->n_roots; j++)
        if (mask & S->root_mask[j])
            b += S->root_bytes[j];
    return b;
}

/* Builds S's tables (S->P, a, g, n, T, n_act and budget set); REMAT_OK and
 * *usable = 0 when the graph is out of the search's reach. */
remat_status remat__class_prepare(class_state *S, int *usable);
/* Frees everything S holds (safe on a zeroed or partly built S). */
void remat__class_release(class_state *S);
/* The estimate of state (p, mask): a lower bound on the FLOPs still to
 * recompute; CLASS_INF when no schedule of the class goes on from there. */
uint64_t remat__class_estimate(class_state *S, uint32_t p, uint64_t mask);

#endif

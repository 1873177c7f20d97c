/*
 * revolve.c - Griewank and Walther's binomial checkpointing (Revolve) over
 * the block chain.
 *
 * The chain: blocks 0..L-1 of blocks.c, x_j = the tensor entering block j
 * (x_0 is the graph input, a leaf). Reversing blocks a..b-1 from a resident
 * x_a with s snapshot slots (x_a's own included, as Griewank counts them):
 *   - one block: run its backward (its first forward if it has not run yet);
 *   - s = 1: for each block from the last down, advance from x_a to it and
 *     run its backward;
 *   - else advance m blocks, keep x_{a+m} in a slot, reverse the right part
 *     with s-1 slots, drop x_{a+m}, reverse the left part with s slots.
 * With r the repetition number (beta(s, r-1) < l <= beta(s, r), beta(s, r) =
 * C(s+r, s)), m = min(beta(s, r-1), l - beta(s-1, r-1)) makes both halves
 * optimal with repetition numbers r-1 and r, so the advances total Griewank's
 * minimum t(l, s) = r*l - C(s+r, s+1) (the derivation is in graphs/README.md).
 *
 * Our memory model: x_0 is a graph input and costs no activation bytes, so
 * s slots keep s-1 boundary activations; a block's backward rebuilds its
 * internal tape from its input boundary. Counting: the advances are our FWD
 * and RECOMPUTE instructions of the advancing sweeps, and the last block's
 * first forward is the +1: on a chain of single ops that save their input,
 * FWD + RECOMPUTE = t(l, s) + 1 and RECOMPUTE = t(l, s) + 1 - l.
 *
 * Emitting: the blocks are chain.h's stages (the same remat_blocks
 * record), and Revolve writes through chain.h's primitives: an advance is
 * remat__chain_advance, a block's reverse is remat__chain_reverse with
 * REMAT_CHAIN_KEEP_INPUT (x_j keeps the pin a snapshot gave it), taking and
 * dropping a snapshot are remat__chain_pin and remat__chain_release. Its
 * schedules are therefore schedules of the chain dynamic program's family,
 * with the same replayed memory, and the emitter's advance count is the
 * block_advances reported.
 *
 * The slot count comes from the budget: the s whose replayed plan is best
 * (every s on chains of up to 64 blocks, else a binary search for the
 * largest s that fits, from the smallest s whose schedule has a sane length;
 * the replay judges every probe).
 */
#include "chain.h"
#include "../util/util_internal.h"

#include <stdio.h>
#include <string.h>

/* C(n, k), saturating at UINT64_MAX. */
static uint64_t binom(uint64_t n, uint64_t k)
{
    if (k > n)
        return 0;
    if (k > n - k)
        k = n - k;
    uint64_t r = 1;
    for (uint64_t i = 1; i <= k; i++) {
        /* r * (n - k + i) / i stays integral at every step. */
        uint64_t num = n - k + i;
        uint64_t g1 = r, g2 = i;
        while (g2) { uint64_t t = g1 % g2; g1 = g2; g2 = t; } /* gcd(r, i) */
        uint64_t rr = r / g1, ii = i / g1, nn;
        if (num % ii != 0)
            return UINT64_MAX; /* cannot happen for true binomials; be safe */
        nn = num / ii;
        if (!remat_u64_mul(rr, nn, &r))
            return UINT64_MAX;
    }
    return r;
}

static uint64_t beta(uint64_t s, uint64_t r)
{
    return binom(s + r, s);
}

/* The repetition number: the smallest r with beta(s, r) >= l. */
static uint64_t repetitions(uint64_t l, uint64_t s)
{
    uint64_t r = 0;
    while (beta(s, r) < l)
        r++;
    return r;
}

uint64_t remat__revolve_min_advances(uint64_t l, uint64_t s)
{
    if (l <= 1)
        return 0;
    if (s == 1)
        return l * (l - 1) / 2;
    uint64_t r = repetitions(l, s);
    return r * l - binom(s + r, s + 1);
}

static uint64_t split(uint64_t l, uint64_t s)
{
    uint64_t r = repetitions(l, s);
    uint64_t a = beta(s, r - 1), b = l - beta(s - 1, r - 1);
    uint64_t m = a < b ? a : b;
    if (m < 1)
        m = 1;
    if (m > l - 1)
        m = l - 1;
    return m;
}

/* Reverses blocks a..b-1 with s slots. The split case is written as
 * recursion in the papers: advance m, reverse the right part with s-1 slots,
 * release, reverse the left part with s slots. Here the right part is a
 * pushed frame and the left part reuses the frame (a tail call), so the
 * depth is at most s and lives on the heap: with s near the block count a
 * 10^5-block chain would otherwise recurse 10^5 deep and overflow the stack. */
typedef struct {
    uint32_t a, b, m;
    uint64_t s;
    int right_done; /* the right part of the split is reversed */
} rev_frame;

static remat_status rev_leaf(remat_chain_emit *E, uint32_t a, uint32_t b, uint64_t s)
{
    remat_status st;
    if (b - a == 1)
        return remat__chain_reverse(E, a, REMAT_CHAIN_KEEP_INPUT);
    if (s >= b - a) {
        /* Enough slots for every boundary: one sweep, then reverse. */
        for (uint32_t j = a; j + 1 < b; j++) {
            if ((st = remat__chain_advance(E, j, j + 1)) != REMAT_OK)
                return st;
            remat__chain_pin(E, j + 1);
        }
        for (uint32_t j = b; j-- > a;) {
            if ((st = remat__chain_reverse(E, j, REMAT_CHAIN_KEEP_INPUT)) != REMAT_OK)
                return st;
            if (j > a && (st = remat__chain_release(E, j)) != REMAT_OK)
                return st;
        }
        return REMAT_OK;
    }
    /* s <= 1 */
    for (uint32_t j = b; j-- > a;) {
        if (j > a && (st = remat__chain_advance(E, a, j)) != REMAT_OK)
            return st;
        if ((st = remat__chain_reverse(E, j, REMAT_CHAIN_KEEP_INPUT)) != REMAT_OK)
            return st;
        if (j > a && (st = remat__chain_release(E, j)) != REMAT_OK)
            return st;
    }
    return REMAT_OK;
}

static remat_status rev(remat_chain_emit *E, uint32_t a, uint32_t b, uint64_t s)
{
    uint64_t cap = (s < b - a ? s : b - a) + 1;
    rev_frame *stack = remat__array((size_t)cap, sizeof *stack);
    if (!stack)
        return remat_err_set(E->B.err, REMAT_ENOMEM, "out of memory building the schedule");
    size_t depth = 1;
    stack[0] = (rev_frame){a, b, 0, s, 0};
    remat_status st = REMAT_OK;
    while (depth > 0 && st == REMAT_OK) {
        rev_frame *f = &stack[depth - 1];
        uint32_t l = f->b - f->a;
        if (f->right_done) {
            /* Release x_{a+m}, then reverse the left part with s slots. */
            if ((st = remat__chain_release(E, f->a + f->m)) != REMAT_OK)
                break;
            f->b = f->a + f->m;
            f->right_done = 0;
            continue;
        }
        if (l == 1 || f->s >= l || f->s <= 1) {
            st = rev_leaf(E, f->a, f->b, f->s);
            depth--;
            continue;
        }
        f->m = (uint32_t)split(l, f->s);
        if ((st = remat__chain_advance(E, f->a, f->a + f->m)) != REMAT_OK)
            break;
        remat__chain_pin(E, f->a + f->m);
        f->right_done = 1;
        /* s - 1 >= 1 slots for at least one block: depth stays below cap. */
        stack[depth++] = (rev_frame){f->a + f->m, f->b, 0, f->s - 1, 0};
    }
    remat__free(stack);
    return st;
}

/* Builds the Revolve schedule with s slots into out. */
remat_status remat__revolve_schedule(const remat_analysis *a, const remat_blocks *bl, uint64_t s,
                                     remat_schedule *out, uint64_t *advances, remat_err *err)
{
    remat_chain_emit E;
    remat_status st = remat__chain_emit_init(&E, a, bl, out, err);
    if (st != REMAT_OK)
        return st;
    st = rev(&E, 0, bl->n, s < 1 ? 1 : s);
    if (st == REMAT_OK)
        st = remat__builder_opt(&E.B);
    if (advances)
        *advances = E.advances;
    remat__chain_emit_destroy(&E);
    return st;
}

/* With few slots on a long chain the advances grow like l^2 (s = 1 makes
 * l(l-1)/2: 5*10^9 on 10^5 blocks, a schedule of tens of gigabytes that no
 * one could run). The search never builds one whose advances exceed this
 * bound: it starts at the smallest slot count that stays within it. */
static uint64_t min_slots(uint64_t l)
{
    uint64_t limit = l * 4 > ((uint64_t)1 << 24) ? l * 4 : ((uint64_t)1 << 24);
    uint64_t s = 1;
    while (s < l && remat__revolve_min_advances(l, s) > limit)
        s++;
    return s;
}

remat_status remat__revolve_search(remat_planner *P, const remat_blocks *bl, uint64_t *slots)
{
    /* s = L keeps every boundary; s = 1 keeps none. On chains of up to 64
     * blocks every s is replayed and the best kept (least extra FLOPs that
     * fits, else the smallest peak): the candidate set does not depend on
     * the budget, so a looser budget never gets a worse plan. Longer chains
     * binary-search the largest s that fits (peaks grow with s in practice;
     * the replay still judges the answer), from min_slots up. */
    const remat_analysis *a = P->a;
    remat_status st = REMAT_OK;
    uint64_t lo = 1, hi = bl->n, best = 1;
    remat_eval e, be = {0};
    if (P->o->budget_kind == REMAT_BUDGET_NONE) {
        best = hi;
    } else if (bl->n <= 64) {
        for (uint64_t s = 1; s <= bl->n && st == REMAT_OK; s++) {
            remat_schedule_clear(&P->scratch);
            if ((st = remat__revolve_schedule(a, bl, s, &P->scratch, NULL, P->err)) != REMAT_OK ||
                (st = remat__eval_schedule(P, &P->scratch, &e)) != REMAT_OK)
                break;
            if (s == 1 || remat__better(P, &e, &be)) {
                be = e;
                best = s;
            }
        }
    } else {
        best = lo = min_slots(bl->n);
        while (lo <= hi && st == REMAT_OK) {
            uint64_t mid = lo + (hi - lo) / 2;
            remat_schedule_clear(&P->scratch);
            if ((st = remat__revolve_schedule(a, bl, mid, &P->scratch, NULL, P->err)) != REMAT_OK ||
                (st = remat__eval_schedule(P, &P->scratch, &e)) != REMAT_OK)
                break;
            if (remat__fits(P, &e)) {
                best = mid;
                lo = mid + 1;
            } else {
                hi = mid - 1;
            }
        }
    }
    remat_schedule_clear(&P->scratch);
    *slots = best;
    return st;
}

remat_status remat__strategy_revolve(remat_planner *P, remat_plan *out)
{
    const remat_analysis *a = P->a;
    remat_blocks bl;
    remat_status st = remat__blocks_build(a, &bl, P->err);
    if (st != REMAT_OK)
        return st;
    if ((st = remat__plan_alloc_keep(P, out)) != REMAT_OK) {
        remat__blocks_destroy(&bl);
        return st;
    }
    uint64_t best = 1, adv = 0;
    st = remat__revolve_search(P, &bl, &best);
    if (st == REMAT_OK)
        st = remat__revolve_schedule(a, &bl, best, &out->schedule, &adv, P->err);
    /* Why not more slots (issue 15): what best + 1 replays to, and how
     * unequal the boundaries are. Griewank's schedule is optimal for a chain
     * of equal steps and places snapshots by position only; on a chain whose
     * boundaries differ in bytes (a CNN's early blocks hold several times
     * the bytes of its late ones) a slot costs what the boundary it lands on
     * costs, so few slots may fit where a byte-aware segmenting (sqrtn,
     * chain-dp) fits with less recomputation. */
    uint64_t next_metric = 0, bmin = UINT64_MAX, bmax = 0;
    if (st == REMAT_OK && P->o->budget_kind != REMAT_BUDGET_NONE && best < bl.n) {
        remat_eval e;
        remat_schedule_clear(&P->scratch);
        if ((st = remat__revolve_schedule(a, &bl, best + 1, &P->scratch, NULL, P->err)) == REMAT_OK &&
            (st = remat__eval_schedule(P, &P->scratch, &e)) == REMAT_OK)
            next_metric = e.valid ? e.metric : 0;
        remat_schedule_clear(&P->scratch);
    }
    for (uint32_t j = 1; j < bl.n; j++) {
        if (bl.in[j] == REMAT_NONE)
            continue;
        uint64_t b = a->g->tensors[bl.in[j]].bytes;
        if (!b)
            continue; /* a 0-byte boundary costs its slot nothing */
        bmin = b < bmin ? b : bmin;
        bmax = b > bmax ? b : bmax;
    }
    if (st == REMAT_OK) {
        /* Keep set for the record: the boundaries, as the slots hold them. */
        for (uint32_t j = 1; j < bl.n; j++)
            if (bl.in[j] != REMAT_NONE && best >= bl.n)
                out->keep[bl.in[j]] = 1;
        char why[160] = "";
        if (next_metric)
            snprintf(why, sizeof why, ", \"next_slots_metric\": %llu", (unsigned long long)next_metric);
        if (bmax && bmin)
            snprintf(why + strlen(why), sizeof why - strlen(why), ", \"boundary_bytes_max_over_min\": %.2f",
                     (double)bmax / (double)bmin);
        st = remat__plan_params(P, out,
                                "{\"slots\": %llu, \"blocks\": %u, \"block_advances\": %llu, \"min_advances\": "
                                "%llu%s}",
                                (unsigned long long)best, bl.n, (unsigned long long)adv,
                                (unsigned long long)remat__revolve_min_advances(bl.n, best), why);
    }
    remat__blocks_destroy(&bl);
    return st;
}

/*
 * builder.h - primitives for writing schedules that are legal by
 * construction. The default policy, Revolve and the chain dynamic program
 * all emit through these, so each states only its own decisions (what to
 * keep, where to advance) and never re-derives residency bookkeeping.
 *
 * The builder mirrors the executor's residency (per tensor), knows which
 * ops have had their first forward execution (FWD vs RECOMPUTE), and how
 * many backward steps still save each tensor (rem). A pinned tensor is
 * never freed implicitly: strategies pin what they decided to keep.
 */
#ifndef REMAT_BUILDER_H
#define REMAT_BUILDER_H

#include "remat/exec.h"

typedef struct remat_builder {
    const remat_analysis *a;
    const remat_graph *g;
    remat_schedule *out;
    remat_err *err;
    uint8_t *res;       /* tensor resident */
    uint8_t *fwd_done;  /* op has had its FWD */
    uint8_t *pin;       /* never freed implicitly */
    uint32_t *rem;      /* backward steps still to save the tensor */
    uint32_t *in_chain; /* op -> stamp of the rebuild chain that recomputes it */
    uint32_t *last_read;
    uint32_t *stack, *chain;
    uint8_t *live;      /* op: something it makes reaches an output, a save or a live op */
    /* res and rem as reset leaves them: copied, not re-derived from the
     * tensor records (the incremental policy resets once per candidate). */
    uint8_t *res0;
    uint32_t *rem0;
    uint32_t stamp;
    /* The incremental policy (policy.c): another schedule's residency at
     * the same point, and the number of tensors where res differs from it;
     * NULL: not tracked. */
    const uint8_t *shadow;
    uint32_t ndiff;
} remat_builder;

/* Leaves resident, nothing else; O(tensors + ops). */
remat_status remat__builder_init(remat_builder *b, const remat_analysis *a, remat_schedule *out, remat_err *err);
void remat__builder_destroy(remat_builder *b);
/* Back to the state init leaves (leaves resident, no FWD run, every save
 * owed, nothing pinned), writing to out from now on; live is kept.
 * O(tensors + ops). */
void remat__builder_reset(remat_builder *b, remat_schedule *out);
/* Sets t's residency, counting it against b->shadow when one is tracked. */
static inline void remat__builder_set_res(remat_builder *b, uint32_t t, uint8_t v)
{
    if (b->shadow)
        b->ndiff += (uint32_t)(v != b->shadow[t]) - (uint32_t)(b->res[t] != b->shadow[t]);
    b->res[t] = v;
}

/* Emits FWD op (first time) or RECOMPUTE op; its inputs must be resident.
 * A dead op (not live) runs once, in the forward pass: a sweep that
 * advances through it again emits nothing, as recomputing it would cost
 * FLOPs for tensors no one reads. */
remat_status remat__builder_forward(remat_builder *b, uint32_t op);

/* Emits FREE t if t is a resident activation. */
remat_status remat__builder_free(remat_builder *b, uint32_t t);

/* Makes every tensor in ts resident by recomputing missing ones from
 * resident ancestors in forward order; stepping stones that are neither in
 * ts, pinned, nor saved by a later backward step are freed after their last
 * read. Fails with REMAT_EINFEASIBLE if that needs a non-recomputable op. */
remat_status remat__builder_ensure(remat_builder *b, const uint32_t *ts, uint32_t n, const char *why_op);

/* Ensures op's saves, emits BWD op, and frees the saves that no later
 * backward step needs unless pinned. */
remat_status remat__builder_backward(remat_builder *b, uint32_t op);

/* Emits OPT. */
remat_status remat__builder_opt(remat_builder *b);

/* The default policy (policy.c) with its buffers kept across builds, and
 * the incremental build a local search uses: the schedule of a keep set
 * near the base's, made by editing the base's schedule where they differ.
 * Every build gives exactly remat_schedule_from_keep's instructions and
 * errors. */
typedef struct remat__policy remat__policy;
/* O(tensors + ops + refs). */
remat_status remat__policy_create(const remat_analysis *a, remat__policy **out, remat_err *err);
void remat__policy_destroy(remat__policy *p);
/* remat_schedule_from_keep (appends to out). O(tensors + refs + its length). */
remat_status remat__policy_whole(remat__policy *p, const uint8_t *keep, remat_schedule *out, remat_err *err);
/* Builds keep's schedule into out (cleared first) and makes it the base. */
remat_status remat__policy_base(remat__policy *p, const uint8_t *keep, remat_schedule *out, remat_err *err);
/* keep's schedule into out (cleared first), from the base when there is
 * one: O(tensors + refs), plus the base's prefix before the first change,
 * plus the instructions built between the changes and the join. */
remat_status remat__policy_build(remat__policy *p, const uint8_t *keep, remat_schedule *out, remat_err *err);
/* Makes the schedule of the last remat__policy_build (s, unchanged since)
 * the base, without building it again: O(its length + tensors). */
remat_status remat__policy_adopt(remat__policy *p, const remat_schedule *s, remat_err *err);

#endif

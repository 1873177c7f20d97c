/*
 * policy_internal.h - the default policy's state, shared by policy.c (the
 * builds) and policy_edit.c (the incremental build's bookkeeping: editing
 * the last prepare, and the step signatures that find clean steps).
 */
#ifndef REMAT_POLICY_INTERNAL_H
#define REMAT_POLICY_INTERNAL_H

#include "builder.h"

#define SIG_WORDS 4 /* a step signature: 256 bits */
/* More dirty tensors than this fill most of a signature's bits: the build
 * then checks every step (step_clean) and stops tracking them, which would
 * cost it O(dirty) per step made. */
#define DIRTY_MAX 48

struct remat__policy {
    const remat_analysis *a;
    remat_builder B;
    int have_builder;
    uint8_t *ekeep;      /* effective keep: kept, or not recomputable */
    uint32_t *need_end, *off, *list; /* the buckets: off by step (n_steps + 1), list of activations */
    uint32_t *fstep;     /* activation -> the step after which it is freed (UINT32_MAX: not an activation) */
    uint8_t *fpin;       /* activation -> pinned from the start */
    /* The base (remat__policy_base): its schedule, free steps and pins, and
     * where each step's instructions start and its op's end. */
    int have_base;
    remat_schedule base;
    uint32_t *bstep;
    uint8_t *bpin;
    size_t *pos_start, *pos_main; /* n_steps entries */
    uint8_t *shadow;     /* the base's residency, advanced along its instructions */
    /* The last incremental build, for remat__policy_adopt: its window
     * [lo, join) with the positions it recorded there (cpos_*), and from
     * join on the base's positions shifted by (cand_at - base_at). */
    int last_ok;
    uint32_t last_lo, last_join;
    size_t cand_at, base_at;
    size_t *cpos_start, *cpos_main;
    uint32_t *dmark, depoch; /* tensor -> the build that found its (free step, pin) changed */
    /* Clean steps found without looking at them (policy_edit.c): each base
     * step's signature, the real steps of the last build with theirs, the
     * tensors that may differ from the base (dirty: residency against the
     * shadow, or dmark), and the steps whose bucket a dmarked tensor joined. */
    uint64_t *sig, *csig;   /* SIG_WORDS per step (n_steps) */
    uint32_t *real, n_real; /* the last build's real steps, ascending */
    uint32_t *dirty, n_dirty, *dirty_mark, dirty_epoch;
    uint32_t *force;        /* step -> depoch when a dmarked tensor is freed there */
    uint64_t dmask[4];      /* the signature of the dirty tensors */
    int dmask_stale;        /* dirty grew since dmask was made */
    int sig_off;            /* this build has too many dirty tensors for signatures */
    int sig_ok;             /* sig holds the base's signatures (made on the first build that uses them) */
    int last_sig_off;       /* the last build ran without them: adopting it leaves sig stale */
    /* What prepare needs that no keep set changes: the activations in
     * reverse forward order of their producers (need_end's order), each
     * one's forward free step, and for each the outputs of its recomputable
     * consumers (CSR over acts' positions). */
    uint32_t n_acts;
    uint32_t *acts, *fwd_free, *dep_off, *dep;
    uint8_t *forced;     /* activation whose producer cannot be recomputed: always kept */
    uint8_t *act;        /* tensor is an activation: prepare's pass over every tensor reads this dense
                          * copy, not the tensor records (a cache line each) */
    /* The edit of the last prepare (prepare_edit): the keep set it was for,
     * each activation's place in acts, a heap of places whose need_end is
     * due again, and the tensors whose (free step, pin) moved since the
     * base was made (bd: a superset of those that differ from the base's;
     * bd_ok = 0 after a whole prepare, which may have moved any). */
    int prep_ok;
    uint8_t *pkeep;
    uint32_t *kpos, *heap, n_heap, *hmark, hepoch;
    uint32_t *bd, n_bd, *bd_mark, bd_epoch;
    int bd_ok;
};

/* The tensors base instruction in reads or changes the residency of (its
 * inputs and outputs, its saves, or its tensor), into l1/l2. */
static inline void instr_tensors(const remat_graph *g, const remat_instr *in, const uint32_t **l1, uint32_t *n1,
                          const uint32_t **l2, uint32_t *n2)
{
    *n1 = *n2 = 0;
    if (in->kind == REMAT_I_FWD || in->kind == REMAT_I_RECOMPUTE) {
        *l1 = remat_op_inputs(g, &g->ops[in->arg]);
        *n1 = g->ops[in->arg].n_in;
        *l2 = remat_op_outputs(g, &g->ops[in->arg]);
        *n2 = g->ops[in->arg].n_out;
    } else if (in->kind == REMAT_I_BWD) {
        *l1 = remat_op_saves(g, &g->ops[in->arg]);
        *n1 = g->ops[in->arg].n_save;
    } else if (in->kind == REMAT_I_FREE) {
        *l1 = &in->arg;
        *n1 = 1;
    }
}

/* policy_edit.c. What prepare(P, keep) gives, as an edit of the last
 * prepare's; 0: not done (no last prepare, or many changes), prepare then
 * runs. O(the changed flags and what they reach). */
int remat__policy_prepare_edit(remat__policy *P, const uint8_t *keep);
/* The base was just made from the last prepare (bd empty). */
void remat__policy_bd_reset(remat__policy *P);
/* The signature of instructions ins[from, to) and step s's bucket. */
void remat__policy_sig_of(const remat__policy *P, const remat_instr *ins, size_t from, size_t to, uint32_t s,
                          uint64_t *sg);
/* Every base step's signature, during a build (made on the first call;
 * out of memory sets sig_off instead). O(the base). */
void remat__policy_sig_all(remat__policy *P);
/* Dirty tensors: x may differ from the base; in's residency changes. */
void remat__policy_dirty_add(remat__policy *P, uint32_t x);
void remat__policy_dirty_from(remat__policy *P, remat_instr in);
/* Drops the dirty tensors that no longer differ and signs the rest. */
void remat__policy_dmask_make(remat__policy *P);
/* Whether step s surely passes step_clean (dmask current). O(1). */
int remat__policy_sig_clean(const remat__policy *P, uint32_t s);

#endif

/*
 * fixed_profile.c - the part of the budget's metric that no plan changes,
 * step by step, for the planners that model activations themselves (the
 * bound, the class search, exact's program).
 *
 * Along the fixed-order class's steps (each FWD in forward order, each BWD
 * in backward order, then the optimizer step), everything but the
 * activation categories (activations, recomputed) is the same in every
 * schedule of the class: parameters, inputs, gradients, workspace and the
 * resident extras. One replay of the store-all schedule with an observer
 * measures it: the live bytes of those categories (the budget's among
 * them: every category, or the activation ones) before each step and at
 * its high-water mark. The three planners had each their own copy of this
 * observer; they now read one.
 */
#include "planner.h"
#include "../util/util_internal.h"

#include <string.h>

typedef struct {
    const remat_analysis *a;
    remat_budget_kind kind;
    uint64_t live[REMAT_CAT_COUNT];
    uint64_t *pre, *hw;
    size_t cur;
    int started;
    uint32_t fwd, bwd;
    int opt_seen, out_of_order;
    uint64_t pending; /* live before the current instruction */
} profile_obs;

/* The categories measured: the budget's, less the activations the callers
 * count themselves. */
static int relevant(remat_budget_kind kind, int c)
{
    if (c == REMAT_CAT_ACTIVATIONS || c == REMAT_CAT_RECOMPUTED)
        return 0;
    return kind == REMAT_BUDGET_ACTIVATION ? remat_category_is_activation((remat_category)c) : 1;
}

static uint64_t sum_relevant(remat_budget_kind kind, const uint64_t *v)
{
    uint64_t s = 0;
    for (int c = 0; c < REMAT_CAT_COUNT; c++)
        if (relevant(kind, c))
            s += v[c]; /* bounded by the replay's checked total */
    return s;
}

/* The first event of an instruction sees the live bytes before it. */
static void touch(profile_obs *o, size_t index)
{
    if (o->started && index == o->cur)
        return;
    o->started = 1;
    o->cur = index;
    o->pending = sum_relevant(o->kind, o->live);
}

static int on_alloc(void *ctx, size_t index, uint32_t storage, int grad, remat_category cat, uint64_t bytes)
{
    profile_obs *o = ctx;
    (void)storage;
    (void)grad;
    touch(o, index);
    o->live[cat] += bytes;
    return 0;
}

static int on_free(void *ctx, size_t index, uint32_t storage, int grad, remat_category cat, uint64_t bytes)
{
    profile_obs *o = ctx;
    (void)storage;
    (void)grad;
    touch(o, index);
    o->live[cat] -= bytes;
    return 0;
}

static int on_step(void *ctx, size_t index, remat_instr in, uint64_t live_after, uint64_t high_water,
                   const uint64_t *hw_by_category)
{
    profile_obs *o = ctx;
    (void)live_after;
    (void)high_water;
    touch(o, index);
    /* The leaves are placed before the first instruction, but under its
     * index: before step 0 is what is live now (a FWD allocates
     * activations only, which are not measured). */
    if (index == 0)
        o->pending = sum_relevant(o->kind, o->live);
    const uint32_t n = o->a->g->n_ops, T = n + o->a->n_bwd;
    uint32_t p = UINT32_MAX;
    if (in.kind == REMAT_I_FWD && o->fwd < n) {
        p = o->fwd++;
    } else if (in.kind == REMAT_I_BWD && o->bwd < o->a->n_bwd) {
        o->out_of_order |= o->a->bwd_order[o->bwd] != in.arg;
        p = n + o->bwd++;
    } else if (in.kind == REMAT_I_OPT) {
        p = T;
        o->opt_seen = 1;
    }
    if (p != UINT32_MAX) {
        if (o->pre)
            o->pre[p] = o->pending;
        o->hw[p] = sum_relevant(o->kind, hw_by_category);
    }
    return 0;
}

remat_status remat__fixed_profile(const remat_planner *P, const remat_exec_extras *extras, uint64_t *pre,
                                  uint64_t *hw, remat_err *err)
{
    const remat_analysis *a = P->a;
    remat_schedule s;
    remat_schedule_init(&s);
    profile_obs o;
    memset(&o, 0, sizeof o);
    o.a = a;
    o.kind = P->o->budget_kind;
    o.pre = pre;
    o.hw = hw;
    remat_replay_result r;
    memset(&r, 0, sizeof r);
    remat_status st = remat_schedule_store_all(a, &s, err);
    if (st == REMAT_OK) {
        remat_replay_observer obs = {&o, on_alloc, on_free, on_step};
        st = remat_replay(a, &s, extras, &obs, &r, err);
        if (st == REMAT_OK && (!r.valid || o.fwd != a->g->n_ops || o.bwd != a->n_bwd || !o.opt_seen ||
                               o.out_of_order))
            st = remat_err_set(err, REMAT_EINTERNAL, "the store-all schedule did not replay as expected");
    }
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    return st;
}

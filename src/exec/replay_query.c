/*
 * replay_query.c - what a replay cursor answers without changing it: the
 * bytes an instruction would add (remat_replay_cost, for planners that
 * price a candidate step before taking it), live bytes, residency, the
 * result so far.
 *
 * The cost mirrors replay.c's step accounting instruction by instruction
 * (do_forward's and do_backward's step_add calls, summed), so a planner's
 * prediction and the replay's mark cannot drift apart: a change to one is a
 * change to the other, beside it in the same folder.
 */
#include "replay_cursor.h"

#include <string.h>

/* Byte sums of a cost saturate: the replay reports the overflow itself. */
static uint64_t sat_add(uint64_t x, uint64_t y)
{
    return x > UINT64_MAX - y ? UINT64_MAX : x + y;
}

uint64_t remat_replay_cost(remat_replay_cursor *c, remat_instr in, uint32_t mask)
{
    const remat_graph *g = c->g;
    const remat_analysis *a = c->a;
    uint64_t add = 0;
    if (in.kind == REMAT_I_FREE)
        return 0;
    if (in.kind == REMAT_I_OPT)
        return (mask >> REMAT_CAT_WORKSPACE & 1u) ? c->extras.optimizer_workspace : 0;
    const remat_sharding *sh = c->extras.sharding;
    if (in.kind == REMAT_I_ALLGATHER)
        return sh && sh->cfg.stage == 3 && in.arg < g->n_ops && (mask >> REMAT_CAT_GATHERED_PARAMS & 1u)
                   ? sh->unit_elements[in.arg] * sh->cfg.elem_bytes
                   : 0;
    if (in.kind == REMAT_I_REDUCE_SCATTER)
        return sh && sh->cfg.stage >= 2 && !c->partition && (mask >> REMAT_CAT_PARAM_GRADS & 1u)
                   ? sh->grad_partition_bytes
                   : 0;
    if (in.kind > REMAT_I_OPT)
        return 0;
    if (in.arg >= g->n_ops)
        return 0;
    const remat_op *op = &g->ops[in.arg];
    const uint32_t *out = remat_op_outputs(g, op);
    if (in.kind == REMAT_I_FWD || in.kind == REMAT_I_RECOMPUTE) {
        /* do_forward's step_add calls, summed. */
        remat_category cat = in.kind == REMAT_I_RECOMPUTE ? REMAT_CAT_RECOMPUTED : REMAT_CAT_ACTIVATIONS;
        if (mask >> cat & 1u)
            for (uint32_t i = 0; i < op->n_out; i++) {
                uint32_t t = out[i];
                if (!c->res[t] && g->tensors[t].storage == t && c->cnt[t] == 0)
                    add = sat_add(add, g->tensors[t].bytes);
            }
        return (mask >> REMAT_CAT_WORKSPACE & 1u) ? sat_add(add, op->workspace) : add;
    }
    if (in.kind != REMAT_I_BWD)
        return 0;
    /* do_backward's: the seed, the new input gradients, the workspace. */
    int seed_now = !c->seeded;
    if (seed_now)
        for (uint32_t i = 0; i < g->n_outputs; i++) {
            uint32_t t = g->outputs[i];
            if (a->grad_flows[t] && (mask >> remat__grad_category(&g->tensors[t]) & 1u))
                add = sat_add(add, g->tensors[t].logical_bytes);
        }
    /* Stamps are 0 between steps (do_backward clears its own), and no
     * instruction index + 1 is SIZE_MAX: this mark collides with none. */
    const uint32_t *inp = remat_op_inputs(g, op);
    for (uint32_t i = 0; i < op->n_in; i++) {
        uint32_t t = inp[i];
        if (!a->grad_flows[t] || c->stamp[t] == SIZE_MAX)
            continue;
        c->stamp[t] = SIZE_MAX;
        if (seed_now && a->is_output[t])
            continue;
        int fresh = c->grad[t] == REMAT__GRAD_VIEW || (!c->grad[t] && !remat__grad_slice_now(c, in.arg, t, seed_now));
        if (fresh && (mask >> remat__grad_category(&g->tensors[t]) & 1u))
            add = sat_add(add, g->tensors[t].logical_bytes);
    }
    for (uint32_t i = 0; i < op->n_in; i++)
        if (c->stamp[inp[i]] == SIZE_MAX)
            c->stamp[inp[i]] = 0;
    return (mask >> REMAT_CAT_WORKSPACE & 1u) ? sat_add(add, op->bwd_workspace) : add;
}

uint64_t remat_replay_live(const remat_replay_cursor *c, uint32_t mask)
{
    mask &= REMAT_CAT_MASK_ALL;
    if (mask == REMAT_CAT_MASK_ALL)
        return c->total;
    if (mask == REMAT_CAT_MASK_ACTIVATION)
        return c->act_live;
    uint64_t v = 0;
    for (int k = 0; k < REMAT_CAT_COUNT; k++)
        if (mask >> k & 1u)
            v += c->live[k]; /* bounded by total */
    return v;
}

void remat_replay_live_by_category(const remat_replay_cursor *c, uint64_t *by_category)
{
    memcpy(by_category, c->live, sizeof c->live);
}

int remat_replay_resident(const remat_replay_cursor *c, uint32_t tensor)
{
    return tensor < c->g->n_tensors && c->res[tensor];
}

const remat_replay_result *remat_replay_progress(const remat_replay_cursor *c)
{
    return c->r;
}

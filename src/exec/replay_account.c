/*
 * replay_account.c - the replay's accounting: the bytes the rules move.
 *
 * replay.c decides what an instruction allocates and frees; this file keeps
 * the books (graphs/README.md, "Memory accounting"): live bytes per
 * category with overflow checks, each step's high-water mark (live before,
 * plus what it allocates, plus its workspace) folded into the peaks of the
 * result, the observer's alloc/free/step events that the interval record
 * and the traces are built from, and the cursor's read-only queries (what
 * an instruction would add, live bytes by category) that DTR's driver and
 * the public cursor ask between steps. Keeping the books apart from the
 * rules is the seam (the four hottest primitives, alloc/free bytes and a
 * step's open/add, are inline in replay_cursor.h so the rules pay no call
 * for them): every peak remat prints passes through
 * remat__replay_step_end here, whichever driver applied the instruction.
 */
#include "remat/exec.h"
#include "../util/util_internal.h"
#include "replay_cursor.h"

#include <string.h>

typedef struct remat_replay_cursor replay;

remat_category remat__replay_grad_category(const remat_tensor *t)
{
    return t->kind == REMAT_TENSOR_PARAM ? REMAT_CAT_PARAM_GRADS : REMAT_CAT_ACTIVATION_GRADS;
}

remat_status remat__replay_overflow(replay *R)
{
    return remat_err_set(R->err, REMAT_EOVERFLOW, "instruction %zu: live bytes exceed 2^64-1", R->index);
}

static remat_status observer_failed(replay *R)
{
    return remat_err_set(R->err, REMAT_EINTERNAL, "instruction %zu: replay observer failed", R->index);
}

remat_status remat__replay_notify_alloc(replay *R, uint32_t storage, int grad, remat_category c, uint64_t bytes)
{
    if (R->obs && R->obs->on_alloc && R->obs->on_alloc(R->obs->ctx, R->index, storage, grad, c, bytes))
        return observer_failed(R);
    return REMAT_OK;
}

remat_status remat__replay_notify_free(replay *R, uint32_t storage, int grad, remat_category c, uint64_t bytes)
{
    if (R->obs && R->obs->on_free && R->obs->on_free(R->obs->ctx, R->index, storage, grad, c, bytes))
        return observer_failed(R);
    return REMAT_OK;
}

/* Category c's bytes at this step's high-water mark. */
static uint64_t step_hw(const replay *R, int c)
{
    if (R->mask & (1u << c))
        return R->base[c] + R->add[c];
    return R->live[c] + (c == R->undo_c ? R->undo_b : 0);
}

/* Closes a step: folds its high-water mark into the result. live_after is
 * what stays live once the step is over (for a BWD, without the output
 * gradients it releases right after this call). Only the categories the
 * step added to can reach a new maximum: any other holds at most what it
 * held at the end of the previous step, which that step's mark covered. */
remat_status remat__replay_step_end(replay *R, remat_instr in, uint64_t live_after)
{
    remat_replay_result *r = R->r;
    uint64_t total;
    if (!remat_u64_add(R->base_total, R->add_total, &total) || total < R->base_total)
        return remat__replay_overflow(R);
    uint64_t act = R->base_act + R->add_act; /* bounded by total */
    for (uint32_t m = R->mask; m; m &= m - 1) {
        int c = __builtin_ctz(m);
        uint64_t v = R->base[c] + R->add[c];
        if (v > r->category_peak[c])
            r->category_peak[c] = v;
    }
    if (total > r->peak_bytes || R->index == 0) {
        r->peak_bytes = total;
        r->peak_index = R->index;
        for (int c = 0; c < REMAT_CAT_COUNT; c++)
            r->peak_by_category[c] = step_hw(R, c);
    }
    R->step_total = total;
    R->step_act = act;
    if (act > r->activation_peak || R->index == 0) {
        r->activation_peak = act;
        r->activation_peak_index = R->index;
    }
    if (R->obs && R->obs->on_step) {
        uint64_t hw[REMAT_CAT_COUNT];
        for (int c = 0; c < REMAT_CAT_COUNT; c++)
            hw[c] = step_hw(R, c);
        if (R->obs->on_step(R->obs->ctx, R->index, in, live_after, total, hw))
            return observer_failed(R);
    }
    return REMAT_OK;
}

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
            if (a->grad_flows[t] && (mask >> remat__replay_grad_category(&g->tensors[t]) & 1u))
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
        if (!c->grad[t] && (mask >> remat__replay_grad_category(&g->tensors[t]) & 1u))
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


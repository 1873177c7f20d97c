/*
 * replay_account.c - the replay's accounting: the bytes the rules move.
 *
 * replay.c decides what an instruction allocates and frees; this file keeps
 * the books (graphs/README.md, "Memory accounting"): live bytes per
 * category with overflow checks, each step's high-water mark (live before,
 * plus what it allocates, plus its workspace) folded into the peaks of the
 * result, and the observer's alloc/free/step events that the interval
 * record and the traces are built from (the cursor's read-only queries
 * over the books are replay_query.c). Keeping the books apart from the
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

remat_category remat__grad_category(const remat_tensor *t)
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

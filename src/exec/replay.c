/*
 * replay.c - the executor: replay a schedule, judge it, measure it.
 *
 * State is a handful of dense arrays indexed by tensor or op id (as ggml's
 * allocator keeps side records, minus the hash): resident flags per tensor,
 * a count of resident members per storage (a base and its views share one),
 * the category each live storage was allocated in, and done flags per op.
 * Each instruction is checked before it changes anything, so the first
 * failure leaves a precise message: index, text and why.
 *
 * Accounting (graphs/README.md, "Memory accounting"): a step's high-water
 * mark is the live bytes before it plus what it allocates plus its
 * workspace; the peak is the largest high-water mark. Gradients are managed
 * here, not by the schedule: an activation's gradient is allocated by the
 * first backward step that writes it (the loss's seed by the first backward
 * step) and freed right after its producer's backward step; parameter and
 * input gradients live to the end.
 *
 * Gradient views (an op with grad_views, torch.cat's backward): the
 * gradient such an op writes into an activation input that has none yet is a
 * slice of its output's gradient, so it allocates nothing, and the output's
 * gradient storage stays (REMAT__GRAD_HELD) until the last of those slices is
 * freed. Which input may get a slice is fixed per tensor (gview, from the
 * backward order), so the state stays in the grad flags that the delta
 * replay already copies. A later write into a slice is PyTorch's
 * out-of-place accumulation: the gradient gets its own storage and lets go
 * of the slice.
 */
#include "remat/exec.h"
#include "../util/util_internal.h"
#include "replay_cursor.h"

#include <stdio.h>
#include <string.h>

typedef struct remat_replay_cursor replay;

remat_status remat__replay_invalid(replay *R, remat_instr in, const char *fmt, ...)
{
    char why[REMAT_ERR_MSG_MAX], text[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    R->r->valid = false;
    R->r->fail_index = R->index;
    if (R->index == SIZE_MAX) /* end-of-schedule checks */
        R->r->fail_index = R->r->n_instructions;
    /* The id the instruction names, as data beside the message. */
    const char *id = NULL;
    if (R->index != SIZE_MAX && in.kind == REMAT_I_FREE && in.arg < R->g->n_tensors)
        id = R->g->tensors[in.arg].id;
    else if (R->index != SIZE_MAX && in.kind != REMAT_I_FREE && in.kind != REMAT_I_OPT && in.arg < R->g->n_ops)
        id = R->g->ops[in.arg].id;
    remat_err_loc loc;
    remat_err_loc_make(&loc, NULL, NULL, 0, 0, id);
    if (R->index == SIZE_MAX)
        remat_err_set_at(R->err, REMAT_ESCHEDULE, &loc, "end of schedule (after all %zu instructions): %s",
                         (size_t)R->r->n_instructions, why);
    else
        remat_err_set_at(R->err, REMAT_ESCHEDULE, &loc, "instruction %zu (%s): %s", R->index,
                         remat_instr_text(R->g, in, text, sizeof text), why);
    return REMAT_ESCHEDULE;
}

remat_status remat__replay_overflow(replay *R)
{
    return remat_err_set(R->err, REMAT_EOVERFLOW, "instruction %zu: live bytes exceed 2^64-1", R->index);
}

remat_status remat__replay_alloc_bytes(replay *R, remat_category c, uint64_t bytes)
{
    if (!remat_u64_add(R->live[c], bytes, &R->live[c]) || !remat_u64_add(R->total, bytes, &R->total))
        return remat__replay_overflow(R);
    if (remat_category_is_activation(c))
        R->act_live += bytes; /* bounded by total */
    return REMAT_OK;
}

/* Releases bytes of category c (the inverse of alloc_bytes). */
void remat__replay_free_bytes(replay *R, remat_category c, uint64_t bytes)
{
    R->live[c] -= bytes;
    R->total -= bytes;
    if (remat_category_is_activation(c))
        R->act_live -= bytes;
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

/* Starts a step; callers then add what it allocates (before allocating). */
void remat__replay_step_begin(replay *R)
{
    R->mask = 0;
    R->add_total = R->add_act = 0;
    R->base_total = R->total;
    R->base_act = R->act_live;
    R->undo_b = 0;
}

remat_status remat__replay_step_add(replay *R, remat_category c, uint64_t bytes)
{
    if (!(R->mask & (1u << c))) {
        R->mask |= 1u << c;
        R->base[c] = R->live[c];
        R->add[c] = 0;
    }
    if (!remat_u64_add(R->add[c], bytes, &R->add[c]) || !remat_u64_add(R->add_total, bytes, &R->add_total))
        return remat__replay_overflow(R);
    if (remat_category_is_activation(c))
        R->add_act += bytes; /* bounded by add_total */
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

remat_category remat__grad_category(const remat_tensor *t)
{
    return t->kind == REMAT_TENSOR_PARAM ? REMAT_CAT_PARAM_GRADS : REMAT_CAT_ACTIVATION_GRADS;
}

static remat_status do_forward(replay *R, remat_instr in, int recompute)
{
    const remat_graph *g = R->g;
    uint32_t k = in.arg;
    if (k >= g->n_ops)
        return remat__replay_invalid(R, in, "op index %u out of range", k);
    const remat_op *op = &g->ops[k];
    if (!recompute && R->fwd_done[k])
        return remat__replay_invalid(R, in, "op '%s' already ran forward; a second execution is a RECOMPUTE", op->id);
    if (recompute && !R->fwd_done[k])
        return remat__replay_invalid(R, in, "RECOMPUTE of op '%s' before its FWD", op->id);
    if (recompute && !op->recomputable)
        return remat__replay_invalid(R, in, "op '%s' is not recomputable", op->id);
    const uint32_t *inp = remat_op_inputs(g, op), *out = remat_op_outputs(g, op);
    for (uint32_t i = 0; i < op->n_in; i++)
        if (!R->res[inp[i]])
            return remat__replay_invalid(R, in, "input '%s' is not resident%s", g->tensors[inp[i]].id,
                           R->ever[inp[i]] ? " (it was freed)" : " (it was never produced)");
    if (remat__replay_check_gathered(R, in, inp, op->n_in) != REMAT_OK)
        return R->err->code;
    remat__replay_step_begin(R);
    remat_category c = recompute ? REMAT_CAT_RECOMPUTED : REMAT_CAT_ACTIVATIONS;
    uint32_t fresh = 0;
    for (uint32_t i = 0; i < op->n_out; i++) {
        uint32_t t = out[i];
        if (R->res[t])
            continue;
        fresh++;
        /* A base rebuilt while one of its views still holds its storage
         * allocates nothing: the bytes never left. */
        if (g->tensors[t].storage == t && R->cnt[t] == 0 && remat__replay_step_add(R, c, g->tensors[t].bytes) != REMAT_OK)
            return R->err->code;
    }
    if (recompute && fresh == 0)
        return remat__replay_invalid(R, in, "every output of op '%s' is already resident", op->id);
    if (remat__replay_step_add(R, REMAT_CAT_WORKSPACE, op->workspace) != REMAT_OK)
        return R->err->code;
    for (uint32_t i = 0; i < op->n_out; i++) {
        uint32_t t = out[i], s = g->tensors[t].storage;
        if (R->res[t])
            continue;
        R->res[t] = 1;
        R->ever[t] = 1;
        if (R->cnt[s]++ == 0) {
            R->cat[s] = (uint8_t)c;
            if (remat__replay_alloc_bytes(R, c, g->tensors[s].bytes) != REMAT_OK ||
                remat__replay_notify_alloc(R, s, 0, c, g->tensors[s].bytes) != REMAT_OK)
                return R->err->code;
        }
    }
    R->fwd_done[k] = 1;
    uint64_t *fl = recompute ? &R->r->flops_recompute : &R->r->flops_forward;
    if (!remat_u64_add(*fl, op->flops, fl))
        return remat_err_set(R->err, REMAT_EOVERFLOW, "instruction %zu: FLOP total exceeds 2^64-1", R->index);
    if (recompute)
        R->r->recompute_counts[k]++;
    return remat__replay_step_end(R, in, R->total);
}

static remat_status release(replay *R, uint32_t t)
{
    const remat_graph *g = R->g;
    uint32_t s = g->tensors[t].storage;
    R->res[t] = 0;
    if (--R->cnt[s] == 0) {
        remat_category c = (remat_category)R->cat[s];
        remat__replay_free_bytes(R, c, g->tensors[s].bytes);
        /* A FREE's mark is the live bytes before it. */
        R->undo_c = (int)c;
        R->undo_b = g->tensors[s].bytes;
        return remat__replay_notify_free(R, s, 0, c, g->tensors[s].bytes);
    }
    return REMAT_OK;
}

static remat_status do_free(replay *R, remat_instr in)
{
    const remat_graph *g = R->g;
    uint32_t t = in.arg;
    if (t >= g->n_tensors)
        return remat__replay_invalid(R, in, "tensor index %u out of range", t);
    if (g->tensors[t].kind != REMAT_TENSOR_ACTIVATION)
        return remat__replay_invalid(R, in, "'%s' is %s %s, resident for the whole step; only activations are freed",
                       g->tensors[t].id, g->tensors[t].kind == REMAT_TENSOR_INPUT ? "an" : "a",
                       remat_tensor_kind_str(g->tensors[t].kind));
    if (!R->res[t])
        return remat__replay_invalid(R, in, "'%s' is not resident (%s)", g->tensors[t].id,
                       R->ever[t] ? "double free" : "never produced");
    remat__replay_step_begin(R);
    if (release(R, t) != REMAT_OK)
        return R->err->code;
    return remat__replay_step_end(R, in, R->total);
}

static remat_status alloc_grad(replay *R, uint32_t t)
{
    const remat_tensor *T = &R->g->tensors[t];
    R->grad[t] = REMAT__GRAD_OWN;
    if (remat__replay_alloc_bytes(R, remat__grad_category(T), T->logical_bytes) != REMAT_OK)
        return R->err->code;
    return remat__replay_notify_alloc(R, t, 1, remat__grad_category(T), T->logical_bytes);
}

static remat_status do_backward(replay *R, remat_instr in)
{
    const remat_analysis *a = R->a;
    const remat_graph *g = R->g;
    uint32_t k = in.arg;
    if (k >= g->n_ops)
        return remat__replay_invalid(R, in, "op index %u out of range", k);
    const remat_op *op = &g->ops[k];
    if (a->bwd_step[k] == REMAT_NONE)
        return remat__replay_invalid(R, in, "op '%s' has no backward step (no gradient flows through it)", op->id);
    if (R->bwd_done[k])
        return remat__replay_invalid(R, in, "backward step of '%s' repeated", op->id);
    if (!R->fwd_done[k])
        return remat__replay_invalid(R, in, "backward step of '%s' before its forward step", op->id);
    const uint32_t *inp = remat_op_inputs(g, op), *out = remat_op_outputs(g, op), *sv = remat_op_saves(g, op);
    for (uint32_t i = 0; i < op->n_out; i++) {
        uint32_t t = out[i];
        if (!a->grad_flows[t] || R->pending[t] == 0)
            continue;
        /* Name one backward step that still owes this gradient. */
        for (uint32_t j = a->cons_off[t]; j < a->cons_off[t + 1]; j++) {
            uint32_t c = a->cons[j];
            if (a->bwd_step[c] != REMAT_NONE && !R->bwd_done[c])
                return remat__replay_invalid(R, in, "gradient of '%s' is incomplete: backward step of '%s' has not run",
                               g->tensors[t].id, g->ops[c].id);
        }
    }
    for (uint32_t i = 0; i < op->n_save; i++)
        if (!R->res[sv[i]])
            return remat__replay_invalid(R, in, "saved tensor '%s' is not resident%s", g->tensors[sv[i]].id,
                           R->ever[sv[i]] ? " (it was freed; recompute it first)" : " (it was never produced)");
    if (remat__replay_check_gathered(R, in, inp, op->n_in) != REMAT_OK || remat__replay_check_gathered(R, in, sv, op->n_save) != REMAT_OK)
        return R->err->code;
    remat__replay_step_begin(R);
    /* The loss's gradient seed appears with the first backward step. */
    int seed_now = !R->seeded;
    if (seed_now)
        for (uint32_t i = 0; i < g->n_outputs; i++) {
            uint32_t t = g->outputs[i];
            if (a->grad_flows[t] && remat__replay_step_add(R, remat__grad_category(&g->tensors[t]), g->tensors[t].logical_bytes))
                return R->err->code;
        }
    /* Stamp each differentiable input once (mul(x, x) reads x twice). */
    const size_t mark = R->index + 1;
    for (uint32_t i = 0; i < op->n_in; i++) {
        uint32_t t = inp[i];
        if (!a->grad_flows[t] || R->stamp[t] == mark)
            continue;
        R->stamp[t] = mark;
        /* An output's gradient that is seeded in this very step is not a
         * second allocation. */
        if (seed_now && a->is_output[t])
            continue;
        /* A slice costs nothing; a write into a slice makes the gradient
         * its own storage. */
        int fresh = R->grad[t] == REMAT__GRAD_VIEW || (!R->grad[t] && !remat__grad_slice_now(R, k, t, seed_now));
        if (fresh && remat__replay_step_add(R, remat__grad_category(&g->tensors[t]), g->tensors[t].logical_bytes) != REMAT_OK)
            return R->err->code;
    }
    if (remat__replay_step_add(R, REMAT_CAT_WORKSPACE, op->bwd_workspace) != REMAT_OK)
        return R->err->code;
    if (seed_now) {
        R->seeded = 1;
        for (uint32_t i = 0; i < g->n_outputs; i++)
            if (a->grad_flows[g->outputs[i]] && alloc_grad(R, g->outputs[i]) != REMAT_OK)
                return R->err->code;
    }
    /* Write or accumulate each input's gradient: one contributor fewer.
     * An input whose slice gives way to its own storage keeps its stamp
     * until the slice is let go, after the step's mark. */
    for (uint32_t i = 0; i < op->n_in; i++) {
        uint32_t t = inp[i];
        if (R->stamp[t] != mark)
            continue;
        R->stamp[t] = 0;
        if (R->grad[t] == REMAT__GRAD_VIEW) {
            if (alloc_grad(R, t) != REMAT_OK)
                return R->err->code;
            R->stamp[t] = mark;
        } else if (!R->grad[t]) {
            if (remat__grad_slice_now(R, k, t, 0))
                R->grad[t] = REMAT__GRAD_VIEW;
            else if (alloc_grad(R, t) != REMAT_OK)
                return R->err->code;
        }
        R->pending[t]--;
    }
    if (!remat_u64_add(R->r->flops_backward, op->bwd_flops, &R->r->flops_backward))
        return remat_err_set(R->err, REMAT_EOVERFLOW, "instruction %zu: FLOP total exceeds 2^64-1", R->index);
    R->bwd_done[k] = 1;
    /* The output gradients are released after on_step (numeric mode
     * counts them live at this step's mark), but they are not live after
     * the step: say so in live_after. */
    /* Decide what the step lets go of, flag it REMAT__GRAD_DYING, free it after
     * the mark: the output gradients (read now) unless slices of them are
     * live, the slices among them, and the bases that a slice let go of
     * (here or by an input's out-of-place write) was the last to hold. */
    uint64_t dying = 0;
    for (uint32_t i = 0; i < op->n_in; i++)
        if (R->stamp[inp[i]] == mark)
            dying += remat__grad_mark_dying(R, R->gview[inp[i]]);
    for (uint32_t i = 0; i < op->n_out; i++) {
        uint32_t t = out[i];
        if (R->grad[t] == REMAT__GRAD_VIEW) {
            R->grad[t] = REMAT__GRAD_NONE;
            dying += remat__grad_mark_dying(R, R->gview[t]);
        } else if (R->grad[t] == REMAT__GRAD_OWN) {
            R->grad[t] = REMAT__GRAD_HELD;
            dying += remat__grad_mark_dying(R, t);
        }
    }
    remat_status st = remat__replay_step_end(R, in, R->total - dying); /* each counted in R->total */
    if (st != REMAT_OK)
        return st;
    for (uint32_t i = 0; i < op->n_in; i++) {
        uint32_t t = inp[i];
        if (R->stamp[t] != mark)
            continue;
        R->stamp[t] = 0;
        if (remat__grad_free_dying(R, R->gview[t]) != REMAT_OK)
            return R->err->code;
    }
    for (uint32_t i = 0; i < op->n_out; i++)
        if (remat__grad_free_dying(R, out[i]) != REMAT_OK || remat__grad_free_dying(R, R->gview[out[i]]) != REMAT_OK)
            return R->err->code;
    return REMAT_OK;
}

static remat_status check_complete(replay *R, remat_instr in)
{
    const remat_analysis *a = R->a;
    const remat_graph *g = R->g;
    for (uint32_t i = 0; i < g->n_ops; i++) {
        uint32_t k = a->order[i];
        if (!R->fwd_done[k])
            return remat__replay_invalid(R, in, "forward step of '%s' never ran", g->ops[k].id);
    }
    for (uint32_t i = 0; i < a->n_bwd; i++) {
        uint32_t k = a->bwd_order[i];
        if (R->bwd_done[k])
            continue;
        /* Say which parameter gradient this leaves incomplete, if any. */
        const uint32_t *inp = remat_op_inputs(g, &g->ops[k]);
        for (uint32_t j = 0; j < g->ops[k].n_in; j++)
            if (g->tensors[inp[j]].kind == REMAT_TENSOR_PARAM && a->grad_flows[inp[j]])
                return remat__replay_invalid(R, in, "backward step of '%s' never ran: gradient of param '%s' is incomplete",
                               g->ops[k].id, g->tensors[inp[j]].id);
        return remat__replay_invalid(R, in, "backward step of '%s' never ran", g->ops[k].id);
    }
    return REMAT_OK;
}

static remat_status do_opt(replay *R, remat_instr in, uint64_t workspace)
{
    remat_status st = check_complete(R, in);
    if (st != REMAT_OK)
        return st;
    const remat_sharding *sh = R->extras.sharding;
    if (sh)
        for (uint32_t b = 0; b < sh->n_buckets; b++)
            if (!R->reduced[b])
                return remat__replay_invalid(R, in, "gradient bucket %u (%llu elements) was never %s: every rank's optimizer "
                                      "step needs the reduced gradients",
                               b, (unsigned long long)sh->bucket_elements[b],
                               sh->cfg.stage == 0 ? "all-reduced" : "reduce-scattered");
    memcpy(R->r->at_opt_by_category, R->live, sizeof R->live);
    remat__replay_step_begin(R);
    if (remat__replay_step_add(R, REMAT_CAT_WORKSPACE, workspace) != REMAT_OK)
        return R->err->code;
    R->opt_seen = 1;
    return remat__replay_step_end(R, in, R->total);
}

static remat_status setup(replay *R)
{
    const remat_graph *g = R->g;
    uint32_t nt = g->n_tensors ? g->n_tensors : 1, no = g->n_ops ? g->n_ops : 1;
    R->res = remat__calloc(nt, 1);
    R->ever = remat__calloc(nt, 1);
    R->grad = remat__calloc(nt, 1);
    R->cat = remat__calloc(nt, 1);
    R->fwd_done = remat__calloc(no, 1);
    R->bwd_done = remat__calloc(no, 1);
    R->cnt = remat__array(nt, sizeof *R->cnt);
    R->pending = remat__array(nt, sizeof *R->pending);
    R->stamp = remat__array(nt, sizeof *R->stamp);
    R->gview = remat__array(nt, sizeof *R->gview);
    R->r->recompute_counts = remat__array(no, sizeof *R->r->recompute_counts);
    const remat_sharding *sh = R->extras.sharding;
    if (sh) {
        R->gathered = remat__calloc(no, 1);
        R->reduced = remat__calloc(sh->n_buckets ? sh->n_buckets : 1, 1);
        R->held = remat__array((size_t)no + 2, sizeof *R->held);
        if (!R->gathered || !R->reduced || !R->held)
            return remat_err_set(R->err, REMAT_ENOMEM, "out of memory setting up the replay");
    }
    if (!R->res || !R->ever || !R->grad || !R->cat || !R->fwd_done || !R->bwd_done || !R->cnt || !R->pending ||
        !R->stamp || !R->gview || !R->r->recompute_counts)
        return remat_err_set(R->err, REMAT_ENOMEM, "out of memory setting up the replay");
    remat__grad_find_slices(R);
    return REMAT_OK;
}

static void teardown(replay *R)
{
    remat__free(R->res);
    remat__free(R->ever);
    remat__free(R->grad);
    remat__free(R->cat);
    remat__free(R->fwd_done);
    remat__free(R->bwd_done);
    remat__free(R->cnt);
    remat__free(R->pending);
    remat__free(R->stamp);
    remat__free(R->gview);
    R->gview = NULL;
    remat__free(R->gathered);
    remat__free(R->reduced);
    remat__free(R->held);
    R->gathered = R->reduced = NULL;
    R->res = R->ever = R->grad = R->cat = R->fwd_done = R->bwd_done = NULL;
    R->cnt = R->pending = R->held = NULL;
    R->stamp = NULL;
}

static remat_status place_leaves(replay *R)
{
    const remat_graph *g = R->g;
    const remat_analysis *a = R->a;
    const remat_exec_extras *x = &R->extras;
    R->index = 0;
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        const remat_tensor *T = &g->tensors[t];
        /* Gradient contributors: consumers with a backward step. */
        if (a->grad_flows[t])
            for (uint32_t j = a->cons_off[t]; j < a->cons_off[t + 1]; j++)
                R->pending[t] += a->bwd_step[a->cons[j]] != REMAT_NONE;
        if (T->kind == REMAT_TENSOR_ACTIVATION)
            continue;
        R->res[t] = R->ever[t] = 1;
        R->cnt[t] = 1;
        remat_category c = T->kind == REMAT_TENSOR_INPUT ? REMAT_CAT_INPUTS
                           : T->frozen                    ? REMAT_CAT_FROZEN
                                                          : REMAT_CAT_PARAMS;
        R->cat[t] = (uint8_t)c;
        uint64_t bytes = T->bytes;
        const remat_sharding *sh = x->sharding;
        if (sh && T->kind == REMAT_TENSOR_PARAM)
            bytes = sh->param_bytes[t]; /* this rank's partition at stage 3 (remat_sharding_init) */
        if (remat__replay_alloc_bytes(R, c, bytes) != REMAT_OK || remat__replay_notify_alloc(R, t, 0, c, bytes) != REMAT_OK)
            return R->err->code;
    }
    /* ZeRO 1/2: the padding of the flat bit16 group every rank holds.
     * ZeRO 3: the gradient partition, which DeepSpeed allocates when the
     * engine starts (stage3.py _setup_for_real_optimizer), not at the first
     * reduction as stage 2 does. */
    const remat_sharding *sh = x->sharding;
    if (sh && sh->weight_pad_bytes &&
        (remat__replay_alloc_bytes(R, REMAT_CAT_PARAMS, sh->weight_pad_bytes) != REMAT_OK ||
         remat__replay_notify_alloc(R, REMAT_NONE, 0, REMAT_CAT_PARAMS, sh->weight_pad_bytes) != REMAT_OK))
        return R->err->code;
    if (sh && sh->cfg.stage == 3) {
        R->partition = 1;
        if (sh->grad_partition_bytes &&
            (remat__replay_alloc_bytes(R, REMAT_CAT_PARAM_GRADS, sh->grad_partition_bytes) != REMAT_OK ||
             remat__replay_notify_alloc(R, REMAT_NONE, 1, REMAT_CAT_PARAM_GRADS, sh->grad_partition_bytes) != REMAT_OK))
            return R->err->code;
    }
    /* Views of leaves are produced by ops; their storage is the leaf's. */
    static const remat_category cats[5] = {REMAT_CAT_OPTIMIZER_STATE, REMAT_CAT_MASTER_WEIGHTS, REMAT_CAT_FROZEN,
                                            REMAT_CAT_COMM_BUFFERS, REMAT_CAT_WORKSPACE};
    const uint64_t bytes[5] = {x->optimizer_state, x->master_weights, x->frozen_copies, x->comm_buffers,
                               x->workspace};
    for (int i = 0; i < 5; i++)
        if (bytes[i] && (remat__replay_alloc_bytes(R, cats[i], bytes[i]) != REMAT_OK ||
                         remat__replay_notify_alloc(R, REMAT_NONE, 0, cats[i], bytes[i]) != REMAT_OK))
            return R->err->code;
    /* Resident state counts in its categories' maxima from the start. */
    for (int c = 0; c < REMAT_CAT_COUNT; c++)
        R->r->category_peak[c] = R->live[c];
    return REMAT_OK;
}

/* Fills the cursor's fields for a (re)start; its arrays must be zero. */
static void clear_state(replay *R)
{
    uint32_t *counts = R->r->recompute_counts;
    memset(R->r, 0, sizeof *R->r);
    R->r->recompute_counts = counts;
    R->r->valid = false;
    memset(R->live, 0, sizeof R->live);
    R->total = R->act_live = 0;
    R->mask = 0;
    R->base_total = R->base_act = R->add_total = R->add_act = 0;
    R->undo_c = 0;
    R->undo_b = 0;
    R->seeded = R->opt_seen = 0;
    R->partition = 0;
    R->held_head = R->held_n = 0;
    R->index = 0;
    R->failed = REMAT_OK;
    R->ended = 0;
}

static void init_cursor(replay *R, const remat_analysis *a, const remat_exec_extras *extras,
                        const remat_replay_observer *obs, remat_replay_result *r, remat_err *err)
{
    memset(R, 0, sizeof *R);
    R->a = a;
    R->g = a->g;
    if (obs) {
        R->obs_copy = *obs;
        R->obs = &R->obs_copy;
    }
    if (extras)
        R->extras = *extras;
    remat_err_init(&R->local);
    R->err = err ? err : &R->local;
    R->r = r;
    memset(r, 0, sizeof *r);
}

/* Applies one instruction; the first failure stops the cursor for good. */
static remat_status apply(replay *R, remat_instr in)
{
    remat_status st;
    if (R->opt_seen && !(in.kind == REMAT_I_ALLGATHER && R->extras.sharding && R->extras.sharding->cfg.stage >= 1))
        st = remat__replay_invalid(R, in, "instruction after OPT (the optimizer step ends the schedule)");
    else
        switch ((remat_instr_kind)in.kind) {
        case REMAT_I_FWD: st = do_forward(R, in, 0); break;
        case REMAT_I_RECOMPUTE: st = do_forward(R, in, 1); break;
        case REMAT_I_BWD: st = do_backward(R, in); break;
        case REMAT_I_FREE: st = do_free(R, in); break;
        case REMAT_I_OPT: st = do_opt(R, in, R->extras.optimizer_workspace); break;
        case REMAT_I_ALLGATHER:
        case REMAT_I_RELEASE:
        case REMAT_I_REDUCE_SCATTER:
        case REMAT_I_ALLREDUCE: st = remat__replay_collective(R, in); break;
        default: st = remat__replay_invalid(R, in, "unknown instruction kind %u", in.kind); break;
        }
    if (st != REMAT_OK)
        R->failed = st;
    else
        R->index++;
    return st;
}

/* The implied optimizer step (when no OPT came) and the sums: the end of
 * every replay, stepped or not. */
static remat_status finish(replay *R, size_t n)
{
    remat_replay_result *r = R->r;
    remat_status st = R->failed;
    r->n_instructions = n;
    if (st == REMAT_OK && !R->opt_seen) {
        /* No OPT instruction: the optimizer step is implied at the end. */
        remat_instr opt = {REMAT_I_OPT, 0};
        R->index = SIZE_MAX;
        st = check_complete(R, opt);
        if (st == REMAT_OK) {
            R->index = n;
            st = do_opt(R, opt, R->extras.optimizer_workspace);
        }
    }
    for (int c = 0; c < REMAT_CAT_COUNT && st == REMAT_OK; c++)
        if (!remat_u64_add(r->sum_of_category_peaks, r->category_peak[c], &r->sum_of_category_peaks))
            st = remat_err_set(R->err, REMAT_EOVERFLOW, "sum of category peaks exceeds 2^64-1");
    R->ended = 1;
    if (st == REMAT_ESCHEDULE) {
        r->valid = false;
        return REMAT_OK;
    }
    if (st != REMAT_OK) {
        remat_replay_result_destroy(r);
        return st;
    }
    r->valid = true;
    return REMAT_OK;
}

remat_status remat_replay(const remat_analysis *a, const remat_schedule *s, const remat_exec_extras *extras,
                          const remat_replay_observer *obs, remat_replay_result *r, remat_err *err)
{
    if (extras && extras->sharding && !remat_schedule_has_collectives(s)) {
        if (obs) {
            memset(r, 0, sizeof *r);
            return remat_err_set(err, REMAT_EINVAL,
                                 "a sharded replay with an observer needs its collectives in the schedule "
                                 "(remat_schedule_shard)");
        }
        return remat__replay_sharded(a, s, extras, r, err);
    }
    replay R;
    init_cursor(&R, a, extras, obs, r, err);
    r->n_instructions = s->n; /* messages at the end of the schedule name it */
    remat_status st = setup(&R);
    if (st == REMAT_OK) {
        clear_state(&R);
        r->n_instructions = s->n;
        st = place_leaves(&R);
    }
    if (st != REMAT_OK)
        R.failed = st;
    for (size_t i = 0; R.failed == REMAT_OK && i < s->n; i++)
        apply(&R, s->ins[i]);
    st = finish(&R, s->n);
    teardown(&R);
    return st;
}

void remat_replay_result_destroy(remat_replay_result *r)
{
    if (!r)
        return;
    remat__free(r->recompute_counts);
    r->recompute_counts = NULL;
}

/* ---- The cursor -------------------------------------------------------- */

remat_status remat__replay_restart(remat_replay_cursor *c, remat_err *err)
{
    const remat_graph *g = c->g;
    size_t nt = g->n_tensors ? g->n_tensors : 1, no = g->n_ops ? g->n_ops : 1;
    remat_err_init(&c->local);
    c->err = err ? err : &c->local;
    memset(c->res, 0, nt);
    memset(c->ever, 0, nt);
    memset(c->grad, 0, nt);
    memset(c->cat, 0, nt);
    memset(c->fwd_done, 0, no);
    memset(c->bwd_done, 0, no);
    memset(c->cnt, 0, nt * sizeof *c->cnt);
    memset(c->pending, 0, nt * sizeof *c->pending);
    memset(c->stamp, 0, nt * sizeof *c->stamp);
    if (c->extras.sharding) {
        memset(c->gathered, 0, no);
        memset(c->reduced, 0, c->extras.sharding->n_buckets ? c->extras.sharding->n_buckets : 1);
    }
    /* remat_replay_end gave the last run's counts away. */
    if (!c->r->recompute_counts && !(c->r->recompute_counts = remat__array(no, sizeof *c->r->recompute_counts)))
        return c->failed = remat_err_set(c->err, REMAT_ENOMEM, "out of memory setting up the replay");
    memset(c->r->recompute_counts, 0, no * sizeof *c->r->recompute_counts);
    clear_state(c);
    remat_status st = place_leaves(c);
    if (st != REMAT_OK)
        c->failed = st;
    return st;
}

remat_status remat_replay_begin(const remat_analysis *a, const remat_exec_extras *extras,
                                const remat_replay_observer *obs, remat_replay_cursor **out, remat_err *err)
{
    *out = NULL;
    remat_replay_cursor *c = remat__malloc(sizeof *c);
    if (!c)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory setting up the replay");
    init_cursor(c, a, extras, obs, &c->result, err);
    remat_status st = setup(c);
    if (st == REMAT_OK) {
        clear_state(c);
        st = place_leaves(c);
    }
    if (st != REMAT_OK) {
        remat_replay_cursor_destroy(c);
        return st;
    }
    *out = c;
    return REMAT_OK;
}

remat_status remat_replay_apply(remat_replay_cursor *c, remat_instr in, remat_err *err)
{
    c->err = err ? err : &c->local;
    if (c->ended)
        return remat_err_set(c->err, REMAT_EINVAL, "remat_replay_apply: the replay has ended");
    if (c->failed != REMAT_OK)
        return remat_err_set(c->err, c->failed, "remat_replay_apply: the replay already failed at instruction %zu",
                             c->r->fail_index);
    return apply(c, in);
}

remat_status remat_replay_end(remat_replay_cursor *c, remat_replay_result *r, remat_err *err)
{
    memset(r, 0, sizeof *r);
    c->err = err ? err : &c->local;
    if (c->ended)
        return remat_err_set(c->err, REMAT_EINVAL, "remat_replay_end: the replay has already ended");
    remat_status st = finish(c, c->failed == REMAT_OK ? c->index : c->index + 1);
    if (st == REMAT_OK) {
        *r = c->result;
        c->result.recompute_counts = NULL; /* now the caller's */
    }
    return st;
}

void remat_replay_cursor_destroy(remat_replay_cursor *c)
{
    if (!c)
        return;
    teardown(c);
    remat_replay_result_destroy(&c->result);
    remat__free(c);
}

/*
 * trace.c - build a lifetime trace from the one interval record.
 *
 * The executor is the only judge of memory, so the tracer measures nothing
 * itself: the interval record (src/exec/intervals.h, which the allocator
 * reads too) gives the replay's allocations, frees and each step's own
 * workspace as intervals; this file adds why each exists and, chained to
 * the record's replay, which steps read each storage while it is resident.
 * It then sweeps the steps once and checks, per step and per category, that
 * the intervals resident during the step add up to the high-water
 * composition the replay reported, and that those resident after it add up
 * to its live bytes after. What a step counted beyond its intervals would
 * become a TRANSIENT interval of its own (alloc == free == the step; a
 * correct replay has none), so the document is complete: every figure in it
 * can be recomputed from the intervals alone.
 *
 * Event order in the replay (src/exec/replay.c) that the recorder relies on:
 * leaves and ledger extras are allocated before the first step (index 0);
 * a step's allocations come before its on_step, a FREE's release before its
 * on_step, and a BWD step's output gradients are released after its
 * on_step with the same index. In every case an interval freed "at" step s
 * is part of s's high-water mark, which is what the counting rule says.
 */
#include "trace_internal.h"
#include "../exec/intervals.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const remat_analysis *a;
    const remat_graph *g;
    remat_trace *t;
    const remat__intervals *rec; /* the one record, being made */
    size_t use_cap, use_iv_cap, steps_cap;
    size_t *use_iv;    /* per recorded use: the interval it belongs to */
    remat_err *err;
} recorder;

/* ---- Recording ---------------------------------------------------------- */

static int rec_fail(recorder *R, remat_status code, const char *what)
{
    remat_err_set(R->err, code, "trace: %s", what);
    return 1;
}

/* Records that step s reads tensor x (saved: a BWD step's saves). The
 * storage's open interval owns the use. A tensor read twice by one op
 * (mul(x, x)) is one use. */
static int record_use(recorder *R, size_t s, uint32_t x, int saved)
{
    remat_trace *t = R->t;
    uint32_t st = R->g->tensors[x].storage;
    size_t iv = remat__intervals_open(R->rec, st, 0);
    if (!iv)
        return 0; /* cannot happen for a valid step; the replay judged it */
    if (t->n_uses && t->uses[t->n_uses - 1].step == s && R->use_iv[t->n_uses - 1] == iv - 1 &&
        t->uses[t->n_uses - 1].tensor == x)
        return 0;
    if (!remat__grow((void **)&t->uses, &R->use_cap, t->n_uses + 1, sizeof *t->uses) ||
        !remat__grow((void **)&R->use_iv, &R->use_iv_cap, t->n_uses + 1, sizeof *R->use_iv))
        return rec_fail(R, REMAT_ENOMEM, "out of memory recording uses");
    t->uses[t->n_uses] = (remat_trace_use){s, x, (uint8_t)saved};
    R->use_iv[t->n_uses] = iv - 1;
    t->n_uses++;
    return 0;
}

static int on_step(void *ctx, size_t index, remat_instr in, uint64_t live_after, uint64_t high_water,
                   const uint64_t *hw_by_category)
{
    recorder *R = ctx;
    remat_trace *t = R->t;
    const remat_graph *g = R->g;
    if (index != t->n_steps || index >= R->steps_cap)
        return rec_fail(R, REMAT_EINTERNAL, "steps out of order");
    (void)hw_by_category; /* the record keeps the composition */
    remat_trace_step *st = &t->steps[index];
    st->in = in;
    st->high_water = high_water;
    /* Kept to check the sweep's own figure against (see sweep). */
    st->live_after = live_after;
    st->flops = 0;
    t->n_steps++;
    if (in.kind == REMAT_I_FWD || in.kind == REMAT_I_RECOMPUTE) {
        const remat_op *op = &g->ops[in.arg];
        st->flops = op->flops;
        t->n_recompute_steps += in.kind == REMAT_I_RECOMPUTE;
        const uint32_t *inp = remat_op_inputs(g, op);
        for (uint32_t i = 0; i < op->n_in; i++)
            if (record_use(R, index, inp[i], 0))
                return 1;
    } else if (in.kind == REMAT_I_BWD) {
        const remat_op *op = &g->ops[in.arg];
        st->flops = op->bwd_flops;
        if (t->first_bwd == REMAT_TRACE_END)
            t->first_bwd = index;
        const uint32_t *sv = remat_op_saves(g, op);
        for (uint32_t i = 0; i < op->n_save; i++)
            if (record_use(R, index, sv[i], 1))
                return 1;
    }
    return 0;
}

/* ---- Checking and completing -------------------------------------------- */

/* Sweeps the steps: checks the resident intervals against the replay's
 * high-water composition and its live bytes after each step, and collects
 * the transient remainder of each step as new intervals (into *tr, by
 * step). */
static remat_status sweep(remat_trace *t, remat_trace_interval **tr, size_t *n_tr, remat_err *err)
{
    const size_t n = t->n_steps, ni = t->n_intervals;
    remat_status st = REMAT_OK;
    size_t cap = 0;
    *tr = NULL;
    *n_tr = 0;
    /* Intervals by free step (counting sort), to release them in the sweep. */
    size_t *cnt = remat__array(n + 1, sizeof *cnt), *by_free = remat__array(ni ? ni : 1, sizeof *by_free);
    if (!cnt || !by_free) {
        st = remat_err_set(err, REMAT_ENOMEM, "out of memory building the trace");
        goto out;
    }
    for (size_t i = 0; i < ni; i++)
        if (t->iv[i].free != REMAT_TRACE_END)
            cnt[t->iv[i].free]++;
    for (size_t s = 0, sum = 0; s <= n; s++) {
        size_t c = cnt[s];
        cnt[s] = sum;
        sum += c;
    }
    for (size_t i = 0; i < ni; i++)
        if (t->iv[i].free != REMAT_TRACE_END)
            by_free[cnt[t->iv[i].free]++] = i;
    /* cnt[s] is now the end of step s's run in by_free. */
    uint64_t cur[REMAT_CAT_COUNT] = {0};
    size_t next = 0, fr = 0;
    for (size_t s = 0; s < n; s++) {
        for (; next < ni && t->iv[next].alloc == s; next++)
            if (!remat_u64_add(cur[t->iv[next].category], t->iv[next].bytes, &cur[t->iv[next].category])) {
                st = remat_err_set(err, REMAT_EOVERFLOW, "trace: live bytes exceed 2^64-1 at step %zu", s);
                goto out;
            }
        /* Released as the step begins: not in its mark. */
        for (size_t j = fr; j < cnt[s]; j++)
            if (t->iv[by_free[j]].early)
                cur[t->iv[by_free[j]].category] -= t->iv[by_free[j]].bytes;
        const uint64_t *hw = t->hw + s * REMAT_CAT_COUNT;
        for (int c = 0; c < REMAT_CAT_COUNT; c++) {
            if (hw[c] < cur[c]) {
                st = remat_err_set(err, REMAT_EINTERNAL,
                                   "trace: at step %zu the %s intervals hold %llu B but the replay counted %llu B", s,
                                   remat_category_name((remat_category)c), (unsigned long long)cur[c],
                                   (unsigned long long)hw[c]);
                goto out;
            }
            if (hw[c] == cur[c])
                continue;
            if (!remat__grow((void **)tr, &cap, *n_tr + 1, sizeof **tr)) {
                st = remat_err_set(err, REMAT_ENOMEM, "out of memory building the trace");
                goto out;
            }
            remat_trace_interval *x = &(*tr)[(*n_tr)++];
            memset(x, 0, sizeof *x);
            x->storage = REMAT_NONE;
            x->category = (uint8_t)c;
            x->why = c == REMAT_CAT_WORKSPACE ? REMAT_TRACE_WHY_WORKSPACE : REMAT_TRACE_WHY_TRANSIENT;
            x->bytes = hw[c] - cur[c];
            x->alloc = x->free = s;
        }
        for (; fr < cnt[s]; fr++)
            if (!t->iv[by_free[fr]].early)
                cur[t->iv[by_free[fr]].category] -= t->iv[by_free[fr]].bytes;
        uint64_t live = 0;
        for (int c = 0; c < REMAT_CAT_COUNT; c++)
            live += cur[c]; /* bounded by the high-water total, which fit */
        if (live != t->steps[s].live_after) {
            st = remat_err_set(err, REMAT_EINTERNAL,
                               "trace: after step %zu the intervals hold %llu B but the replay reported %llu B live", s,
                               (unsigned long long)live, (unsigned long long)t->steps[s].live_after);
            goto out;
        }
    }
    if (next != ni)
        st = remat_err_set(err, REMAT_EINTERNAL, "trace: an interval starts after the last step");
out:
    remat__free(cnt);
    remat__free(by_free);
    return st;
}

/* Merges the transient intervals into the list (both by alloc step; at one
 * step the resident ones first), re-points the uses and groups them by
 * interval, in step order. */
static remat_status finish(remat_trace *t, recorder *R, remat_trace_interval *tr, size_t n_tr, remat_err *err)
{
    size_t ni = t->n_intervals, total = ni + n_tr;
    remat_trace_interval *iv = remat__array(total ? total : 1, sizeof *iv);
    size_t *map = remat__array(ni ? ni : 1, sizeof *map);
    size_t *cnt = remat__array(total + 1, sizeof *cnt);
    remat_trace_use *uses = remat__array(t->n_uses ? t->n_uses : 1, sizeof *uses);
    if (!iv || !map || !cnt || !uses) {
        remat__free(iv);
        remat__free(map);
        remat__free(cnt);
        remat__free(uses);
        return remat_err_set(err, REMAT_ENOMEM, "out of memory building the trace");
    }
    size_t i = 0, j = 0, k = 0;
    while (i < ni || j < n_tr) {
        if (j == n_tr || (i < ni && t->iv[i].alloc <= tr[j].alloc)) {
            map[i] = k;
            iv[k++] = t->iv[i++];
        } else {
            iv[k++] = tr[j++];
        }
    }
    for (size_t u = 0; u < t->n_uses; u++)
        cnt[map[R->use_iv[u]]]++;
    for (size_t x = 0, sum = 0; x < total; x++) {
        iv[x].use_off = sum;
        iv[x].n_uses = (uint32_t)cnt[x];
        sum += cnt[x];
        cnt[x] = iv[x].use_off;
    }
    for (size_t u = 0; u < t->n_uses; u++)
        uses[cnt[map[R->use_iv[u]]]++] = t->uses[u];
    remat__free(t->iv);
    remat__free(t->uses);
    t->iv = iv;
    t->uses = uses;
    t->n_intervals = total;
    remat__free(map);
    remat__free(cnt);
    return REMAT_OK;
}

/* The record's intervals, each with why it exists, and its steps'
 * composition and replay result, moved into the trace. */
static remat_status take_record(remat_trace *t, remat__intervals *rec, remat_err *err)
{
    const remat_graph *g = t->a->g;
    t->iv = remat__array(rec->n ? rec->n : 1, sizeof *t->iv);
    if (!t->iv)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory building the trace");
    for (size_t k = 0; k < rec->n; k++) {
        const remat__interval *v = &rec->iv[k];
        remat_trace_interval *iv = &t->iv[k];
        memset(iv, 0, sizeof *iv);
        iv->storage = v->storage;
        iv->grad = v->grad;
        iv->category = v->category;
        iv->bytes = v->bytes;
        iv->alloc = v->first;
        iv->free = v->last == REMAT__IV_NEVER ? REMAT_TRACE_END : v->last;
        iv->early = v->early;
        if (v->workspace)
            iv->why = REMAT_TRACE_WHY_WORKSPACE;
        else if (v->storage == REMAT_NONE && (v->grad || v->category == REMAT_CAT_GATHERED_PARAMS ||
                                              v->category == REMAT_CAT_PARAMS))
            iv->why = REMAT_TRACE_WHY_SHARDING; /* a gathered unit, a gradient partition, a flat group's padding */
        else if (v->grad)
            iv->why = REMAT_TRACE_WHY_GRADIENT;
        else if (v->storage == REMAT_NONE)
            iv->why = REMAT_TRACE_WHY_LEDGER;
        else if (g->tensors[v->storage].kind != REMAT_TENSOR_ACTIVATION)
            iv->why = REMAT_TRACE_WHY_LEAF;
        else
            iv->why = v->category == REMAT_CAT_RECOMPUTED ? REMAT_TRACE_WHY_RECOMPUTED : REMAT_TRACE_WHY_PRODUCED;
    }
    t->n_intervals = rec->n;
    t->hw = rec->hw;
    rec->hw = NULL;
    t->replay = rec->replay;
    rec->replay.recompute_counts = NULL; /* now the trace's */
    return REMAT_OK;
}

remat_status remat_trace_build(const remat_analysis *a, const remat_schedule *s, const remat_exec_extras *extras,
                               remat_trace **out, remat_err *err)
{
    *out = NULL;
    remat_err local;
    remat_err_init(&local);
    if (!err)
        err = &local;
    const remat_graph *g = a->g;
    remat_trace *t = remat__calloc(1, sizeof *t);
    recorder R;
    memset(&R, 0, sizeof R);
    R.a = a;
    R.g = g;
    R.t = t;
    R.err = err;
    R.steps_cap = s->n + 1;
    if (t) {
        t->a = a;
        t->first_bwd = REMAT_TRACE_END;
        t->steps = remat__array(R.steps_cap, sizeof *t->steps);
    }
    if (!t || !t->steps) {
        remat_trace_destroy(t);
        return remat_err_set(err, REMAT_ENOMEM, "out of memory building the trace");
    }
    remat__intervals rec;
    R.rec = &rec;
    remat_replay_observer obs = {&R, NULL, NULL, on_step};
    remat_status st = remat__intervals_record(a, s, extras, REMAT__IV_STEPS, &obs, &rec, err);
    if (st == REMAT_OK)
        st = take_record(t, &rec, err);
    remat__intervals_destroy(&rec);
    remat_trace_interval *tr = NULL;
    size_t n_tr = 0;
    if (st == REMAT_OK)
        st = sweep(t, &tr, &n_tr, err);
    if (st == REMAT_OK)
        st = finish(t, &R, tr, n_tr, err);
    if (st == REMAT_OK && t->first_bwd == REMAT_TRACE_END)
        t->first_bwd = t->n_steps;
    remat__free(tr);
    remat__free(R.use_iv);
    if (st != REMAT_OK) {
        remat_trace_destroy(t);
        return st;
    }
    *out = t;
    return REMAT_OK;
}

void remat_trace_destroy(remat_trace *t)
{
    if (!t)
        return;
    remat__free(t->steps);
    remat__free(t->hw);
    remat__free(t->iv);
    remat__free(t->uses);
    remat_replay_result_destroy(&t->replay);
    remat__free(t);
}

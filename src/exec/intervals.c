/*
 * intervals.c - the one interval recorder (see intervals.h).
 *
 * The executor is the one judge of a schedule and the one place that knows
 * when bytes appear and go, so nothing here re-derives lifetimes: the record
 * is the replay's own events, kept in order, with each step's transient
 * workspace added as a span of its own so that the intervals alone add up
 * to every figure the replay reports.
 */
#include "intervals.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const remat_graph *g;
    const remat_schedule *s; /* the instructions, so a RELEASE finds its unit's gather */
    remat__intervals *out;
    const remat_replay_observer *next;
    unsigned keep;
    size_t cap_iv, cap_ev;
    uint64_t cur[REMAT_CAT_COUNT]; /* bytes of the open intervals, per category */
    uint64_t cur_total;            /* their sum */
    uint64_t rel_total;            /* released by the current step before its on_step */
    size_t stepped;                /* 1 + the index of the last on_step (0: none yet) */
    size_t cap_steps;              /* the schedule's steps: its instructions and an implied OPT */
    remat_status st;
    remat_err *err;
} recorder;

static int fail(recorder *R, remat_status st, size_t index, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static int fail(recorder *R, remat_status st, size_t index, const char *fmt, ...)
{
    char msg[REMAT_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    R->st = remat_err_set(R->err, st, "interval record, instruction %zu: %s", index, msg);
    return 1;
}

static int push_event(recorder *R, uint32_t e, size_t index)
{
    remat__intervals *o = R->out;
    if (!(R->keep & REMAT__IV_EVENTS))
        return 0;
    if (!remat__grow((void **)&o->events, &R->cap_ev, o->n_events + 1, sizeof *o->events))
        return fail(R, REMAT_ENOMEM, index, "out of memory");
    o->events[o->n_events++] = e;
    return 0;
}

static int open_interval(recorder *R, const remat__interval *v, size_t index, uint32_t *k)
{
    remat__intervals *o = R->out;
    if (o->n >= (size_t)INT32_MAX)
        return fail(R, REMAT_ENOMEM, index, "more than 2^31 allocations");
    if (!remat__grow((void **)&o->iv, &R->cap_iv, o->n + 1, sizeof *o->iv))
        return fail(R, REMAT_ENOMEM, index, "out of memory");
    *k = (uint32_t)o->n;
    o->iv[o->n] = *v;
    o->iv[o->n].start = o->n_events;
    o->iv[o->n++].end = UINT64_MAX;
    if (!remat_u64_add(R->cur_total, v->bytes, &R->cur_total))
        return fail(R, REMAT_EOVERFLOW, index, "live bytes exceed 2^64-1");
    R->cur[v->category] += v->bytes; /* bounded by cur_total */
    if (push_event(R, *k << 1, index))
        return 1;
    if (R->cur_total > o->peak) {
        o->peak = R->cur_total;
        o->peak_first = v->resident ? REMAT__IV_NEVER : v->first;
        o->peak_event = o->n_events;
    }
    return 0;
}

static int close_interval(recorder *R, uint32_t k, size_t index)
{
    remat__interval *v = &R->out->iv[k];
    v->last = index;
    v->end = R->out->n_events;
    R->cur[v->category] -= v->bytes;
    R->cur_total -= v->bytes;
    return push_event(R, (k << 1) | 1u, index);
}

static int on_alloc(void *ctx, size_t index, uint32_t storage, int grad, remat_category c, uint64_t bytes)
{
    recorder *R = ctx;
    remat__interval v;
    memset(&v, 0, sizeof v);
    v.storage = storage;
    v.op = REMAT_NONE;
    v.grad = (uint8_t)(grad != 0);
    v.category = (uint8_t)c;
    /* Inputs, params and ledger state are placed before the first
     * instruction and are the only storage that is not an activation. */
    v.resident = !grad && (storage == REMAT_NONE || R->g->tensors[storage].kind != REMAT_TENSOR_ACTIVATION);
    v.first = index;
    v.last = REMAT__IV_NEVER;
    v.bytes = bytes;
    /* A sharded rank's gathered unit belongs to no tensor: it is known by
     * the op that names its unit (the ALLGATHER's argument). */
    if (c == REMAT_CAT_GATHERED_PARAMS && storage == REMAT_NONE && index < R->s->n &&
        R->s->ins[index].kind == REMAT_I_ALLGATHER)
        v.op = R->s->ins[index].arg;
    uint32_t k;
    if (open_interval(R, &v, index, &k))
        return 1;
    if (storage != REMAT_NONE) {
        size_t *slot = grad ? &R->out->open_grad[storage] : &R->out->open[storage];
        if (*slot)
            return fail(R, REMAT_EINTERNAL, index, "a storage allocated twice without a release");
        *slot = (size_t)k + 1;
    }
    return R->next && R->next->on_alloc ? R->next->on_alloc(R->next->ctx, index, storage, grad, c, bytes) : 0;
}

static int on_free(void *ctx, size_t index, uint32_t storage, int grad, remat_category c, uint64_t bytes)
{
    recorder *R = ctx;
    size_t *slot = storage == REMAT_NONE ? NULL : grad ? &R->out->open_grad[storage] : &R->out->open[storage];
    uint32_t k;
    if (!slot && c == REMAT_CAT_GATHERED_PARAMS) {
        /* A sharded rank's gathered unit (RELEASE u) belongs to no tensor:
         * close the open gather of unit u. */
        uint32_t u = index < R->s->n && R->s->ins[index].kind == REMAT_I_RELEASE ? R->s->ins[index].arg : REMAT_NONE;
        size_t j = R->out->n;
        int reclaim = index < R->s->n && R->s->ins[index].kind == REMAT_I_ALLGATHER;
        if (reclaim) {
            /* FSDP's rate limiter reclaims the oldest held buffer before
             * the all-gather's step opens (replay_shard.c reclaim), so the
             * step's mark does not count it. */
            size_t best = SIZE_MAX;
            for (j = 0; j < R->out->n; j++)
                if (R->out->iv[j].held && R->out->iv[j].end == UINT64_MAX &&
                    (best == SIZE_MAX || R->out->iv[j].held_at < R->out->iv[best].held_at))
                    best = j;
            if (best == SIZE_MAX || R->out->iv[best].bytes != bytes)
                return fail(R, REMAT_EINTERNAL, index, "a reclaim without a held buffer of %llu B",
                            (unsigned long long)bytes);
            j = best;
            k = (uint32_t)j;
            if (close_interval(R, k, index))
                return 1;
            R->out->iv[k].early = 1; /* gone before this step's mark, live after the one before */
            return
                   (R->next && R->next->on_free ? R->next->on_free(R->next->ctx, index, storage, grad, c, bytes) : 0);
        }
        while (j-- > 0)
            if (R->out->iv[j].category == c && R->out->iv[j].end == UINT64_MAX && R->out->iv[j].bytes == bytes &&
                !R->out->iv[j].held && (u == REMAT_NONE || R->out->iv[j].op == u))
                break;
        if (j == SIZE_MAX)
            return fail(R, REMAT_EINTERNAL, index, "a release without an allocation");
        k = (uint32_t)j;
    } else {
        if (!slot || !*slot)
            return fail(R, REMAT_EINTERNAL, index, "a release without an allocation");
        k = (uint32_t)(*slot - 1);
        *slot = 0;
    }
    /* A release after the step's on_step (a backward step's output
     * gradients) was part of its mark, and the intervals still held it
     * then; one before it is what a FREE's mark still counts. */
    (void)c;
    if (R->stepped != index + 1)
        R->rel_total += bytes; /* bounded by the open bytes it leaves */
    if (close_interval(R, k, index))
        return 1;
    return R->next && R->next->on_free ? R->next->on_free(R->next->ctx, index, storage, grad, c, bytes) : 0;
}

static int on_step(void *ctx, size_t index, remat_instr in, uint64_t live_after, uint64_t high_water,
                   const uint64_t *hw)
{
    recorder *R = ctx;
    remat__intervals *o = R->out;
    if (index != o->n_steps || index >= R->cap_steps)
        return fail(R, REMAT_EINTERNAL, index, "steps out of order");
    if (R->keep & REMAT__IV_STEPS) {
        o->steps[index] = (remat__iv_step){in, live_after, high_water};
        memcpy(o->hw + index * REMAT_CAT_COUNT, hw, REMAT_CAT_COUNT * sizeof *hw);
    }
    o->n_steps++;
    /* Under FSDP a RELEASE frees nothing yet: its unit's open gather is
     * held until a reclaim (replay_shard.c) closes it. */
    if (in.kind == REMAT_I_RELEASE) {
        size_t j = o->n;
        while (j-- > 0)
            if (o->iv[j].category == REMAT_CAT_GATHERED_PARAMS && o->iv[j].end == UINT64_MAX && !o->iv[j].held &&
                o->iv[j].op == in.arg)
                break;
        if (j != SIZE_MAX) {
            o->iv[j].held = 1;
            o->iv[j].held_at = index;
        }
    }
    /* The open intervals, and what the step released before this call (a
     * FREE's mark is taken before its release), are its mark; what the
     * workspace category counts beyond its open intervals is the step's own
     * workspace. (The trace's sweep checks every category on its own.) */
    uint64_t ws = hw[REMAT_CAT_WORKSPACE] - R->cur[REMAT_CAT_WORKSPACE]; /* workspace is never released */
    uint64_t held = R->cur_total + R->rel_total; /* bounded: both were in the replay's checked total */
    if (hw[REMAT_CAT_WORKSPACE] < R->cur[REMAT_CAT_WORKSPACE] || held > high_water || high_water - held != ws)
        return fail(R, REMAT_EINTERNAL, index, "the intervals hold %llu B and %llu B of workspace, the executor's mark is %llu B",
                    (unsigned long long)held, (unsigned long long)ws, (unsigned long long)high_water);
    R->rel_total = 0;
    R->stepped = index + 1;
    if (ws > 0) {
        remat__interval v;
        memset(&v, 0, sizeof v);
        v.storage = REMAT_NONE;
        v.op = in.kind == REMAT_I_OPT || in.kind == REMAT_I_FREE ? REMAT_NONE : in.arg;
        v.category = REMAT_CAT_WORKSPACE;
        v.workspace = 1;
        v.first = index;
        v.bytes = ws;
        uint32_t k;
        if (open_interval(R, &v, index, &k) || close_interval(R, k, index))
            return 1;
    }
    return R->next && R->next->on_step ? R->next->on_step(R->next->ctx, index, in, live_after, high_water, hw) : 0;
}

void remat__intervals_destroy(remat__intervals *r)
{
    if (!r)
        return;
    remat__free(r->iv);
    remat__free(r->events);
    remat__free(r->steps);
    remat__free(r->hw);
    remat__free(r->open);
    remat__free(r->open_grad);
    remat_replay_result_destroy(&r->replay);
    memset(r, 0, sizeof *r);
}

remat_status remat__intervals_record(const remat_analysis *a, const remat_schedule *s, const remat_exec_extras *extras,
                                     unsigned keep, const remat_replay_observer *next, remat__intervals *out,
                                     remat_err *err)
{
    memset(out, 0, sizeof *out);
    const remat_graph *g = a->g;
    size_t nt = g->n_tensors ? g->n_tensors : 1;
    recorder R;
    memset(&R, 0, sizeof R);
    R.g = g;
    R.s = s;
    R.out = out;
    R.next = next;
    R.err = err;
    R.keep = keep;
    size_t steps = R.cap_steps = s->n + 1;
    /* Most schedules open about one interval per instruction and tensor:
     * start there, and grow by doubling past it. */
    R.cap_iv = steps + g->n_tensors;
    /* Uninitialized: every entry is written before it is read, and zeroing
     * megabytes per record would cost more than recording them. */
    out->iv = R.cap_iv <= SIZE_MAX / 2 / sizeof *out->iv ? remat__malloc(R.cap_iv * sizeof *out->iv) : NULL;
    if (keep & REMAT__IV_EVENTS) {
        R.cap_ev = 2 * R.cap_iv;
        out->events = out->iv ? remat__malloc(R.cap_ev * sizeof *out->events) : NULL;
    }
    out->open = remat__array(nt, sizeof *out->open);
    out->open_grad = remat__array(nt, sizeof *out->open_grad);
    int ok = out->open && out->open_grad && out->iv && (!(keep & REMAT__IV_EVENTS) || out->events);
    if (keep & REMAT__IV_STEPS) {
        out->steps = remat__array(steps, sizeof *out->steps);
        out->hw = steps <= SIZE_MAX / REMAT_CAT_COUNT ? remat__array(steps * REMAT_CAT_COUNT, sizeof *out->hw) : NULL;
        ok = ok && out->steps && out->hw;
    }
    if (!ok) {
        remat__intervals_destroy(out);
        return remat_err_set(err, REMAT_ENOMEM, "out of memory recording allocations");
    }
    remat_replay_observer obs = {&R, on_alloc, on_free, on_step};
    remat_status st = remat_replay(a, s, extras, &obs, &out->replay, err);
    if (st == REMAT_EINTERNAL && R.st != REMAT_OK)
        st = R.st; /* the recorder's own failure, not the replay's "observer failed" */
    else if (st == REMAT_EINTERNAL && err && err->code != REMAT_EINTERNAL)
        st = err->code; /* a chained reader's own failure (ENOMEM), in err */
    if (st == REMAT_OK && !out->replay.valid)
        st = REMAT_ESCHEDULE; /* err holds the executor's message */
    if (st == REMAT_OK && out->n_steps != s->n && out->n_steps != s->n + 1)
        st = remat_err_set(err, REMAT_EINTERNAL, "interval record: the replay reported %zu steps for %zu instructions",
                           out->n_steps, s->n);
    remat__free(out->open);
    remat__free(out->open_grad);
    out->open = out->open_grad = NULL;
    for (size_t k = 0; k < out->n; k++)
        if (out->iv[k].end == UINT64_MAX)
            out->iv[k].end = out->n_events; /* lives to the end of the step */
    if (st != REMAT_OK) {
        /* A judged failure keeps the replay's verdict (fail_index). */
        remat_replay_result verdict = out->replay;
        remat_replay_result_destroy(&verdict);
        out->replay.recompute_counts = NULL;
        remat__intervals_destroy(out);
        if (st == REMAT_ESCHEDULE)
            out->replay = verdict;
    }
    return st;
}

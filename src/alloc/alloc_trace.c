/*
 * alloc_trace.c - record a schedule's allocations as intervals on an event
 * clock, by replaying it with an observer.
 *
 * The executor is the one judge of a schedule and the one place that knows
 * when bytes appear and go, so nothing here re-derives lifetimes: every
 * on_alloc opens an interval, every on_free closes the one its storage (or
 * gradient) holds, and a step's workspace, which the executor only counts
 * in the step's high-water mark, becomes an interval opened at on_step and
 * closed right after it. At on_step every other allocation of the step has
 * happened and none of its releases (a backward step's output gradients go
 * after on_step), so the workspace overlaps exactly what the executor
 * counts in that step's mark.
 *
 * The recorder checks itself at every step that releases nothing: its live
 * bytes plus the workspace must equal the executor's high-water mark over
 * the recorded categories, and at the end its largest live total must equal
 * the replay's peak. A mismatch is a bug in remat, reported as such.
 */
#include "alloc_internal.h"
#include "../util/util_internal.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const remat_graph *g;
    uint32_t mask;
    remat_alloc_trace *t;
    size_t cap_iv, cap_ev;
    uint32_t *cur_storage; /* tensor -> open interval of its storage, NIL if none */
    uint32_t *cur_grad;    /* tensor -> open interval of its gradient */
    uint64_t live;
    uint64_t live_ws; /* workspace held for the whole step (ledger extras), not a step's own */
    remat_status st;
    remat_err *err;
} recorder;

uint32_t remat_alloc_mask_for(remat_budget_kind kind)
{
    return kind == REMAT_BUDGET_ACTIVATION ? REMAT_ALLOC_ACTIVATION : REMAT_ALLOC_ALL;
}

static int fail(recorder *R, remat_status st, const char *msg, size_t index)
{
    R->st = remat_err_set(R->err, st, "allocation trace, instruction %zu: %s", index, msg);
    return 1;
}

static int push_event(recorder *R, uint32_t e, size_t index)
{
    remat_alloc_trace *t = R->t;
    if (t->n_events == R->cap_ev) {
        size_t cap = R->cap_ev ? R->cap_ev * 2 : 256;
        uint32_t *ne = remat__realloc(t->events, cap * sizeof *ne);
        if (!ne)
            return fail(R, REMAT_ENOMEM, "out of memory", index);
        t->events = ne;
        R->cap_ev = cap;
    }
    t->events[t->n_events++] = e;
    return 0;
}

/* Opens an interval; *out gets its index. */
static int open_interval(recorder *R, size_t index, uint32_t tensor, uint32_t op, int grad, remat_category c,
                         uint64_t bytes, int resident, uint32_t *out)
{
    remat_alloc_trace *t = R->t;
    if (t->n >= (size_t)INT32_MAX)
        return fail(R, REMAT_ENOMEM, "more than 2^31 allocations", index);
    if (t->n == R->cap_iv) {
        size_t cap = R->cap_iv ? R->cap_iv * 2 : 128;
        remat_alloc_interval *ni = remat__realloc(t->iv, cap * sizeof *ni);
        if (!ni)
            return fail(R, REMAT_ENOMEM, "out of memory", index);
        t->iv = ni;
        R->cap_iv = cap;
    }
    uint32_t k = (uint32_t)t->n;
    remat_alloc_interval *v = &t->iv[t->n++];
    v->tensor = tensor;
    v->op = op;
    v->grad = (uint8_t)grad;
    v->category = (uint8_t)c;
    v->first = resident ? REMAT_ALLOC_BEFORE : index;
    v->last = REMAT_ALLOC_NEVER;
    v->start = t->n_events;
    v->end = UINT64_MAX; /* set when released, or to the clock's end */
    v->bytes = bytes;
    if (push_event(R, k << 1, index))
        return 1;
    if (!remat_u64_add(R->live, bytes, &R->live))
        return fail(R, REMAT_EOVERFLOW, "live bytes exceed 2^64-1", index);
    if (resident && !remat_u64_add(t->resident_bytes, bytes, &t->resident_bytes))
        return fail(R, REMAT_EOVERFLOW, "resident bytes exceed 2^64-1", index);
    if (R->live > t->logical_peak) {
        t->logical_peak = R->live;
        t->logical_peak_index = resident ? REMAT_ALLOC_BEFORE : index;
        t->logical_peak_event = t->n_events;
    }
    *out = k;
    return 0;
}

static int close_interval(recorder *R, size_t index, uint32_t k)
{
    remat_alloc_interval *v = &R->t->iv[k];
    v->end = R->t->n_events;
    v->last = index;
    R->live -= v->bytes;
    return push_event(R, (k << 1) | 1u, index);
}

static int on_alloc(void *ctx, size_t index, uint32_t storage, int grad, remat_category c, uint64_t bytes)
{
    recorder *R = ctx;
    if (!(R->mask & (1u << c)) || bytes == 0)
        return 0;
    /* Inputs, params and ledger state are placed before the first
     * instruction and are the only storage that is not an activation. */
    int resident = !grad && (storage == REMAT_NONE || R->g->tensors[storage].kind != REMAT_TENSOR_ACTIVATION);
    uint32_t k;
    if (open_interval(R, index, storage, REMAT_NONE, grad, c, bytes, resident, &k))
        return 1;
    if (c == REMAT_CAT_WORKSPACE)
        R->live_ws += bytes;
    if (storage != REMAT_NONE) {
        uint32_t *slot = grad ? &R->cur_grad[storage] : &R->cur_storage[storage];
        if (*slot != REMAT__NIL)
            return fail(R, REMAT_EINTERNAL, "a storage allocated twice without a release", index);
        *slot = k;
    }
    return 0;
}

static int on_free(void *ctx, size_t index, uint32_t storage, int grad, remat_category c, uint64_t bytes)
{
    recorder *R = ctx;
    if (!(R->mask & (1u << c)) || bytes == 0 || storage == REMAT_NONE)
        return 0;
    uint32_t *slot = grad ? &R->cur_grad[storage] : &R->cur_storage[storage];
    if (*slot == REMAT__NIL)
        return fail(R, REMAT_EINTERNAL, "a release without an allocation", index);
    uint32_t k = *slot;
    *slot = REMAT__NIL;
    if (c == REMAT_CAT_WORKSPACE)
        R->live_ws -= bytes;
    return close_interval(R, index, k);
}

static int on_step(void *ctx, size_t index, remat_instr in, uint64_t live_after, uint64_t high_water,
                   const uint64_t *hw)
{
    recorder *R = ctx;
    (void)live_after;
    (void)high_water;
    remat_alloc_trace *t = R->t;
    if (index + 1 > t->n_steps)
        t->n_steps = index + 1;
    /* The step's own workspace: the category's mark less what is held. */
    uint64_t ws = (R->mask & (1u << REMAT_CAT_WORKSPACE)) ? hw[REMAT_CAT_WORKSPACE] - R->live_ws : 0;
    uint64_t expect = 0;
    for (int c = 0; c < REMAT_CAT_COUNT; c++)
        if (R->mask & (1u << c))
            expect += hw[c]; /* bounded by high_water, which the executor checked */
    /* A FREE step's mark is the live bytes before its release. */
    if (in.kind != REMAT_I_FREE && R->live + ws != expect) {
        char msg[160];
        snprintf(msg, sizeof msg, "recorded %llu live bytes, the executor's mark is %llu",
                 (unsigned long long)(R->live + ws), (unsigned long long)expect);
        return fail(R, REMAT_EINTERNAL, msg, index);
    }
    if (ws == 0)
        return 0;
    uint32_t op = in.kind == REMAT_I_OPT || in.kind == REMAT_I_FREE ? REMAT_NONE : in.arg;
    uint32_t k;
    if (open_interval(R, index, REMAT_NONE, op, 0, REMAT_CAT_WORKSPACE, ws, 0, &k))
        return 1;
    return close_interval(R, index, k);
}

void remat_alloc_trace_destroy(remat_alloc_trace *t)
{
    if (!t)
        return;
    remat__free(t->iv);
    remat__free(t->events);
    memset(t, 0, sizeof *t);
}

remat_status remat_alloc_trace_build(const remat_analysis *a, const remat_schedule *s, const remat_exec_extras *extras,
                                     uint32_t mask, remat_alloc_trace *t, remat_replay_result *r, remat_err *err)
{
    double t0 = remat__alloc_now();
    memset(t, 0, sizeof *t);
    t->mask = mask & REMAT_ALLOC_ALL;
    t->logical_peak_index = REMAT_ALLOC_BEFORE;
    const remat_graph *g = a->g;
    recorder R;
    memset(&R, 0, sizeof R);
    R.g = g;
    R.mask = t->mask;
    R.t = t;
    R.err = err;
    size_t nt = g->n_tensors ? g->n_tensors : 1;
    R.cur_storage = remat__array(nt, sizeof *R.cur_storage);
    R.cur_grad = remat__array(nt, sizeof *R.cur_grad);
    if (!R.cur_storage || !R.cur_grad) {
        remat__free(R.cur_storage);
        remat__free(R.cur_grad);
        return remat_err_set(err, REMAT_ENOMEM, "out of memory recording allocations");
    }
    memset(R.cur_storage, 0xff, nt * sizeof *R.cur_storage);
    memset(R.cur_grad, 0xff, nt * sizeof *R.cur_grad);
    remat_replay_observer obs = {&R, on_alloc, on_free, on_step};
    remat_replay_result local;
    remat_replay_result *rr = r ? r : &local;
    remat_status st = remat_replay(a, s, extras, &obs, rr, err);
    if (R.st != REMAT_OK)
        st = R.st; /* the observer's own failure, not the replay's "observer failed" */
    if (st == REMAT_OK && !rr->valid)
        st = REMAT_ESCHEDULE; /* err holds the executor's message */
    if (st == REMAT_OK) {
        uint64_t want = mask == REMAT_ALLOC_ALL          ? rr->peak_bytes
                        : mask == REMAT_ALLOC_ACTIVATION ? rr->activation_peak
                                                         : t->logical_peak;
        if (want != t->logical_peak)
            st = remat_err_set(err, REMAT_EINTERNAL,
                               "allocation trace: recorded peak %llu B differs from the replayed peak %llu B",
                               (unsigned long long)t->logical_peak, (unsigned long long)want);
    }
    for (size_t i = 0; st == REMAT_OK && i < t->n; i++)
        if (t->iv[i].end == UINT64_MAX)
            t->iv[i].end = t->n_events; /* lives to the end of the step */
    remat__free(R.cur_storage);
    remat__free(R.cur_grad);
    if (!r || st != REMAT_OK)
        remat_replay_result_destroy(rr);
    if (st != REMAT_OK) {
        remat_alloc_trace_destroy(t);
        if (r && st != REMAT_ESCHEDULE)
            memset(r, 0, sizeof *r);
        return st;
    }
    t->seconds = remat__alloc_now() - t0;
    return REMAT_OK;
}

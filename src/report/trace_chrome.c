/*
 * trace_chrome.c - the trace in Chrome's Trace Event Format, for Perfetto
 * (ui.perfetto.dev) and chrome://tracing.
 *
 * Four processes: "steps" (one complete event per step, named by its
 * instruction, plus instant markers for the backward boundary and the
 * peak), "memory" (one counter track per category in use and "total": each
 * step's high-water composition), "tensors" (every interval that comes and
 * goes) and "resident state" (leaves and ledger extras, there throughout).
 * An interval is a complete ("X") event. Trace viewers draw events on one
 * thread as a stack and misdraw ones that overlap without nesting, so
 * intervals are packed into lanes (tids) with the classic greedy interval
 * partitioning: in order of start, each takes the lane that fell free
 * earliest if it is free by then, else a new lane. That uses the fewest
 * lanes any packing could (as many as the most intervals live at once).
 *
 * Time is whole microseconds: one per step, or the FLOPs so far divided by
 * FLOPs per microsecond (see make_clock); or, with a timeline
 * (remat/time.h), whole nanoseconds of predicted device time, written as
 * microseconds with three decimals. Steps then sit on one thread per
 * stream, where they run; the memory and tensor tracks need a clock that
 * never goes back, so they use each step's start in schedule order, the
 * latest start so far (a collective issued early but run late does not
 * move its neighbours' memory).
 */
#include "trace_internal.h"
#include "remat/time.h"

#include <string.h>

typedef struct {
    const remat_trace *t;
    uint64_t *clock;  /* step -> start, in whole microseconds (ns with a timeline); clock[n] = the end */
    uint64_t per_us;  /* FLOP time: FLOPs per microsecond (0 in step time) */
    const remat_timeline *tl; /* device time: clock ticks are nanoseconds */
} chrome;

static void put_tick(remat_buf *b, const chrome *C, uint64_t tick)
{
    if (C->tl)
        remat_buf_printf(b, "%llu.%03llu", (unsigned long long)(tick / 1000), (unsigned long long)(tick % 1000));
    else
        remat__put_u64(b, tick);
}
#define put_time(b, tick) put_tick((b), C, (tick))

static uint64_t ns_of(double s)
{
    return remat__u64_from_double(s * 1e9 + 0.5);
}

/* Step time: step s starts at s us. FLOP time: at floor(FLOPs before s /
 * per_us) us. Flooring the running sum, not each step, keeps the clock
 * monotone and every step's duration within 1 us of exact; whole numbers
 * keep ts + dur exact in every reader's floating point, so touching events
 * never appear to overlap. */
static remat_status make_clock(chrome *C, const remat_trace_options *o, remat_err *err)
{
    const remat_trace *t = C->t;
    size_t n = t->n_steps;
    C->clock = remat__array(n + 1, sizeof *C->clock);
    if (!C->clock)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory writing the Chrome trace");
    C->per_us = 0;
    if (C->tl) {
        if (C->tl->n != n)
            return remat_err_set(err, REMAT_EINVAL, "Chrome trace: the timeline has %zu steps, the trace %zu",
                                 C->tl->n, n);
        uint64_t now = 0;
        for (size_t s = 0; s < n; s++) {
            uint64_t st = ns_of(C->tl->start[s]);
            C->clock[s] = now = st > now ? st : now;
        }
        uint64_t end = ns_of(C->tl->step_time);
        C->clock[n] = end > now ? end : now;
        return REMAT_OK;
    }
    if (!o->flops_time) {
        for (size_t s = 0; s <= n; s++)
            C->clock[s] = s;
        return REMAT_OK;
    }
    for (size_t s = 0; s < n; s++)
        if (!remat_u64_add(C->clock[s], t->steps[s].flops, &C->clock[s + 1]))
            return remat_err_set(err, REMAT_EOVERFLOW, "Chrome trace: the FLOP clock exceeds 2^64-1");
    C->per_us = o->flops_per_us;
    if (!C->per_us) {
        /* Automatic: a power of ten that makes the whole step last 10^5 to
         * 10^6 us when it has that many FLOPs. */
        C->per_us = 1;
        for (uint64_t total = C->clock[n]; total >= 1000000; total /= 10)
            C->per_us *= 10;
    }
    for (size_t s = 0; s <= n; s++)
        C->clock[s] /= C->per_us;
    return REMAT_OK;
}

/* A binary min-heap of (end tick, lane): lanes in use, earliest free first. */
typedef struct {
    uint64_t end;
    uint32_t lane;
} lane_slot;

static void heap_push(lane_slot *h, size_t *n, lane_slot x)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p].end < x.end || (h[p].end == x.end && h[p].lane <= x.lane))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}

static lane_slot heap_pop(lane_slot *h, size_t *n)
{
    lane_slot top = h[0], x = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        lane_slot best = x;
        if (l < *n && (h[l].end < best.end || (h[l].end == best.end && h[l].lane < best.lane))) {
            m = l;
            best = h[l];
        }
        if (r < *n && (h[r].end < best.end || (h[r].end == best.end && h[r].lane < best.lane)))
            m = r;
        if (m == i)
            break;
        h[i] = h[m];
        i = m;
    }
    if (*n)
        h[i] = x;
    return top;
}

static int resident_state(const remat_trace_interval *iv)
{
    return iv->why == REMAT_TRACE_WHY_LEAF || iv->why == REMAT_TRACE_WHY_LEDGER;
}

static uint64_t iv_end(const chrome *C, const remat_trace_interval *iv)
{
    return C->clock[iv->free == REMAT_TRACE_END ? C->t->n_steps : iv->free + 1];
}

/* Assigns lanes to the intervals of one process (resident or not); returns
 * the number of lanes, or -1 on ENOMEM. Intervals come by alloc step, so
 * by start tick. */
static long pack(const chrome *C, int resident, uint32_t *lane)
{
    const remat_trace *t = C->t;
    lane_slot *h = remat__array(t->n_intervals ? t->n_intervals : 1, sizeof *h);
    if (!h)
        return -1;
    size_t n = 0;
    uint32_t lanes = 0;
    for (size_t i = 0; i < t->n_intervals; i++) {
        const remat_trace_interval *iv = &t->iv[i];
        if (resident_state(iv) != resident)
            continue;
        uint64_t start = C->clock[iv->alloc];
        lane_slot x;
        if (n && h[0].end <= start)
            x = heap_pop(h, &n);
        else
            x.lane = lanes++;
        lane[i] = x.lane;
        x.end = iv_end(C, iv);
        heap_push(h, &n, x);
    }
    remat__free(h);
    return (long)lanes;
}

enum { PID_STEPS = 1, PID_MEMORY = 2, PID_TENSORS = 3, PID_RESIDENT = 4 };

static void meta_process(remat_buf *b, int pid, const char *name)
{
    remat_buf_printf(b, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, \"args\": {\"name\": \"%s\"}},\n"
                        "{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, \"args\": {\"sort_index\": %d}},\n",
                     pid, name, pid, pid);
}

static void meta_lanes(remat_buf *b, int pid, long lanes, const char *what)
{
    for (long l = 0; l < lanes && !b->failed; l++)
        remat_buf_printf(b, "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %ld, \"args\": {\"name\": \"%s %ld\"}},\n",
                         pid, l, what, l);
}

static void step_events(remat_buf *b, const chrome *C)
{
    const remat_trace *t = C->t;
    for (size_t s = 0; s < t->n_steps && !b->failed; s++) {
        remat_buf_puts(b, "{\"name\": ");
        remat__trace_instr_text(b, t, s, 1);
        remat_buf_puts(b, ", \"cat\": \"");
        remat_buf_puts(b, remat__trace_kind(t->steps[s].in));
        remat_buf_puts(b, "\", \"ph\": \"X\", \"ts\": ");
        int tid = 0;
        if (C->tl) {
            uint64_t st = ns_of(C->tl->start[s]), en = ns_of(C->tl->end[s]);
            put_time(b, st);
            remat_buf_puts(b, ", \"dur\": ");
            put_time(b, en > st ? en - st : 0);
            tid = C->tl->stream[s];
        } else {
            put_time(b, C->clock[s]);
            remat_buf_puts(b, ", \"dur\": ");
            put_time(b, C->clock[s + 1] - C->clock[s]);
        }
        remat_buf_printf(b, ", \"pid\": 1, \"tid\": %d, \"args\": {\"step\": ", tid);
        remat__put_u64(b, s);
        remat_buf_puts(b, ", \"high_water\": ");
        remat__put_u64(b, t->steps[s].high_water);
        remat_buf_puts(b, ", \"live_after\": ");
        remat__put_u64(b, t->steps[s].live_after);
        remat_buf_puts(b, ", \"flops\": ");
        remat__put_u64(b, t->steps[s].flops);
        remat_buf_puts(b, "}},\n");
    }
    if (t->first_bwd < t->n_steps) {
        remat_buf_puts(b, "{\"name\": \"backward starts\", \"ph\": \"i\", \"s\": \"g\", \"ts\": ");
        put_time(b, C->clock[t->first_bwd]);
        remat_buf_printf(b, ", \"pid\": %d, \"tid\": 0, \"args\": {\"step\": %zu}},\n", PID_STEPS, t->first_bwd);
    }
    size_t p = t->replay.peak_index;
    char x[64];
    remat_buf_printf(b, "{\"name\": \"peak %s\", \"ph\": \"i\", \"s\": \"g\", \"ts\": ",
                     remat_format_bytes_short(t->replay.peak_bytes, x, sizeof x));
    put_time(b, C->clock[p]);
    remat_buf_printf(b, ", \"pid\": %d, \"tid\": 0, \"args\": {\"step\": %zu, \"bytes\": %llu}},\n", PID_STEPS, p,
                     (unsigned long long)t->replay.peak_bytes);
}

/* One counter track per category that is ever non-zero, and the total;
 * an event only where the value changes (and at the first step). */
static void counter_events(remat_buf *b, const chrome *C)
{
    const remat_trace *t = C->t;
    int used[REMAT_CAT_COUNT] = {0};
    for (size_t s = 0; s < t->n_steps; s++)
        for (int c = 0; c < REMAT_CAT_COUNT; c++)
            used[c] |= t->hw[s * REMAT_CAT_COUNT + c] != 0;
    for (size_t s = 0; s < t->n_steps && !b->failed; s++) {
        const uint64_t *hw = t->hw + s * REMAT_CAT_COUNT;
        for (int c = 0; c <= REMAT_CAT_COUNT; c++) {
            uint64_t v = c < REMAT_CAT_COUNT ? hw[c] : t->steps[s].high_water;
            uint64_t prev = s == 0 ? 0
                            : c < REMAT_CAT_COUNT ? hw[c - REMAT_CAT_COUNT]
                                                  : t->steps[s - 1].high_water;
            if ((c < REMAT_CAT_COUNT && !used[c]) || (s > 0 && v == prev))
                continue;
            remat_buf_puts(b, "{\"name\": \"");
            remat_buf_puts(b, c < REMAT_CAT_COUNT ? remat_category_name((remat_category)c) : "total");
            remat_buf_puts(b, "\", \"ph\": \"C\", \"ts\": ");
            put_time(b, C->clock[s]);
            remat_buf_puts(b, ", \"pid\": 2, \"tid\": 0, \"args\": {\"bytes\": ");
            remat__put_u64(b, v);
            remat_buf_puts(b, "}},\n");
        }
    }
}

static void interval_events(remat_buf *b, const chrome *C, const uint32_t *lane)
{
    const remat_trace *t = C->t;
    for (size_t i = 0; i < t->n_intervals && !b->failed; i++) {
        const remat_trace_interval *iv = &t->iv[i];
        uint64_t start = C->clock[iv->alloc], end = iv_end(C, iv);
        remat_buf_puts(b, "{\"name\": ");
        remat__trace_interval_id(b, t, i, 1);
        remat_buf_puts(b, ", \"cat\": \"");
        remat_buf_puts(b, remat_category_name((remat_category)iv->category));
        remat_buf_puts(b, "\", \"ph\": \"X\", \"ts\": ");
        put_time(b, start);
        remat_buf_puts(b, ", \"dur\": ");
        put_time(b, end - start);
        remat_buf_puts(b, resident_state(iv) ? ", \"pid\": 4, \"tid\": " : ", \"pid\": 3, \"tid\": ");
        remat__put_u64(b, lane[i]);
        remat_buf_puts(b, ", \"args\": {\"bytes\": ");
        remat__put_u64(b, iv->bytes);
        remat_buf_puts(b, ", \"why\": \"");
        remat_buf_puts(b, remat_trace_why_name((remat_trace_why)iv->why));
        remat_buf_puts(b, "\", \"alloc_step\": ");
        remat__put_u64(b, iv->alloc);
        remat_buf_puts(b, ", \"free_step\": ");
        if (iv->free == REMAT_TRACE_END)
            remat_buf_puts(b, "null");
        else
            remat__put_u64(b, iv->free);
        if (!resident_state(iv)) {
            remat_buf_puts(b, ", \"by\": ");
            remat__trace_step_name(b, t, iv->alloc, 1);
        }
        const remat_trace_use *u = t->uses + iv->use_off;
        int first = 1;
        for (uint32_t k = 0; k < iv->n_uses; k++) {
            if (!u[k].saved)
                continue;
            remat_buf_puts(b, first ? ", \"saved_for\": [" : ", ");
            remat__trace_step_name(b, t, u[k].step, 1);
            first = 0;
        }
        remat_buf_puts(b, first ? "}},\n" : "]}},\n");
    }
}

char *remat_trace_chrome(const remat_trace *t, const remat_trace_options *opts, size_t *len, remat_err *err)
{
    remat_trace_options o = remat__trace_opts(opts);
    chrome C = {t, NULL, 0, o.timeline};
    remat_status st = make_clock(&C, &o, err);
    if (st != REMAT_OK) {
        remat__free(C.clock);
        return NULL;
    }
    uint32_t *lane = remat__array(t->n_intervals ? t->n_intervals : 1, sizeof *lane);
    long lanes = lane ? pack(&C, 0, lane) : -1;
    long rlanes = lanes >= 0 ? pack(&C, 1, lane) : -1;
    if (rlanes < 0) {
        remat__free(C.clock);
        remat__free(lane);
        remat_err_set(err, REMAT_ENOMEM, "out of memory writing the Chrome trace");
        return NULL;
    }
    remat_buf b;
    remat_buf_init(&b);
    remat_buf_puts(&b, "{\"traceEvents\": [\n");
    meta_process(&b, PID_STEPS, "steps");
    meta_process(&b, PID_MEMORY, "memory (bytes, high-water mark of each step)");
    meta_process(&b, PID_TENSORS, "tensors");
    meta_process(&b, PID_RESIDENT, "resident state");
    if (C.tl) {
        static const char *const streams[] = {"compute stream", "communication stream", "no time (FREE, RELEASE)"};
        for (int k = 0; k < 3; k++)
            remat_buf_printf(&b, "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": \"%s\"}},\n",
                             PID_STEPS, k, streams[k]);
    } else {
        remat_buf_printf(&b, "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, \"args\": {\"name\": \"instructions\"}},\n",
                         PID_STEPS);
    }
    meta_lanes(&b, PID_TENSORS, lanes, "lane");
    meta_lanes(&b, PID_RESIDENT, rlanes, "lane");
    step_events(&b, &C);
    counter_events(&b, &C);
    interval_events(&b, &C, lane);
    /* Every event line ends in ",\n"; the last one's comma goes. There is
     * always one (the process names). */
    if (!b.failed && b.len >= 2 && b.data[b.len - 2] == ',') {
        b.len -= 2;
        b.data[b.len] = '\0';
    }
    remat_buf_puts(&b, "\n],\n \"otherData\": {\"format\": \"remat-chrome-trace\", \"graph\": ");
    remat_buf_json_str(&b, t->a->g->name);
    remat_buf_puts(&b, ", \"label\": ");
    remat_buf_json_str(&b, o.label ? o.label : "");
    if (C.tl) {
        remat_buf_printf(&b, ", \"time_unit\": \"1 us = 1 us of predicted device time\", \"step_time_us\": \"%.3f\"",
                         C.tl->step_time * 1e6);
    } else if (o.flops_time) {
        remat_buf_printf(&b, ", \"time_unit\": \"1 us = %llu FLOPs\"", (unsigned long long)C.per_us);
    } else {
        remat_buf_puts(&b, ", \"time_unit\": \"1 us = 1 step\"");
    }
    remat_buf_printf(&b, ", \"peak_bytes\": \"%llu\", \"peak_step\": \"%zu\", \"lanes\": \"%ld\"}}\n",
                     (unsigned long long)t->replay.peak_bytes, t->replay.peak_index, lanes);
    remat__free(C.clock);
    remat__free(lane);
    return remat_buf_finish(&b, len, err, "Chrome trace");
}

/*
 * alloc_trace.c - a schedule's allocations as intervals on an event clock:
 * the allocator's view of the one interval record (src/exec/intervals.h).
 *
 * The record is the replay's own events with each step's workspace as a
 * span of its own, checked against the executor's marks at every step.
 * This file keeps the intervals of the requested categories that occupy
 * bytes, renumbers the events among them, and checks that its largest live
 * total equals the replay's peak over the mask. A mismatch is a bug in
 * remat, reported as such.
 */
#include "alloc_internal.h"
#include "../exec/intervals.h"
#include "../util/util_internal.h"

#include <stdio.h>
#include <string.h>

void remat_alloc_trace_destroy(remat_alloc_trace *t)
{
    if (!t)
        return;
    remat__free(t->iv);
    remat__free(t->events);
    memset(t, 0, sizeof *t);
}

static void copy_interval(remat_alloc_interval *w, const remat__interval *v)
{
    w->tensor = v->storage;
    w->op = v->op;
    w->grad = v->grad;
    w->category = v->category;
    w->first = v->resident ? REMAT_ALLOC_BEFORE : v->first;
    w->last = v->last == REMAT__IV_NEVER ? REMAT_ALLOC_NEVER : v->last;
    w->bytes = v->bytes;
}

/* Every recorded interval is kept (the usual case: all categories, no
 * empty allocation): the record's clock is the trace's, in one pass. */
static remat_status take_all(remat__intervals *rec, remat_alloc_trace *t, remat_err *err)
{
    t->iv = remat__malloc((rec->n ? rec->n : 1) * sizeof *t->iv);
    if (!t->iv)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory recording allocations");
    t->n = rec->n;
    t->events = rec->events;
    t->n_events = rec->n_events;
    rec->events = NULL;
    for (size_t k = 0; k < rec->n; k++) {
        copy_interval(&t->iv[k], &rec->iv[k]);
        t->iv[k].start = rec->iv[k].start;
        t->iv[k].end = rec->iv[k].end;
        if (rec->iv[k].resident)
            t->resident_bytes += rec->iv[k].bytes; /* bounded: the record checked its sums */
    }
    if (rec->peak > 0) {
        t->logical_peak = rec->peak;
        t->logical_peak_index = rec->peak_first == REMAT__IV_NEVER ? REMAT_ALLOC_BEFORE : rec->peak_first;
        t->logical_peak_event = rec->peak_event;
    }
    t->n_steps = rec->n_steps;
    return REMAT_OK;
}

/* The record's intervals of the mask's categories that occupy bytes, on
 * their own event clock (the record's events in order, less the others). */
static remat_status filter(remat__intervals *rec, uint32_t mask, remat_alloc_trace *t, remat_err *err)
{
    size_t kept = 0;
    for (size_t k = 0; k < rec->n; k++)
        kept += (mask >> rec->iv[k].category & 1u) && rec->iv[k].bytes > 0;
    if (kept == rec->n)
        return take_all(rec, t, err);
    uint32_t *map = remat__array(rec->n ? rec->n : 1, sizeof *map);
    if (!map)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory recording allocations");
    kept = 0;
    for (size_t k = 0; k < rec->n; k++)
        map[k] = (mask >> rec->iv[k].category & 1u) && rec->iv[k].bytes > 0 ? (uint32_t)kept++ : REMAT__NIL;
    t->iv = remat__array(kept ? kept : 1, sizeof *t->iv);
    t->events = remat__array(2 * kept + 1, sizeof *t->events);
    if (!t->iv || !t->events) {
        remat__free(map);
        return remat_err_set(err, REMAT_ENOMEM, "out of memory recording allocations");
    }
    t->n = kept;
    uint64_t live = 0;
    for (size_t e = 0; e < rec->n_events; e++) {
        uint32_t k = rec->events[e] >> 1, j = map[k];
        if (j == REMAT__NIL)
            continue;
        const remat__interval *v = &rec->iv[k];
        remat_alloc_interval *w = &t->iv[j];
        t->events[t->n_events++] = (j << 1) | (rec->events[e] & 1u);
        if (rec->events[e] & 1u) {
            w->end = t->n_events - 1;
            live -= v->bytes;
            continue;
        }
        copy_interval(w, v);
        w->start = t->n_events - 1;
        w->end = UINT64_MAX; /* set when released, or to the clock's end */
        live += v->bytes; /* bounded: the record checked its sums */
        if (v->resident)
            t->resident_bytes += v->bytes;
        if (live > t->logical_peak) {
            t->logical_peak = live;
            t->logical_peak_index = w->first;
            t->logical_peak_event = t->n_events;
        }
    }
    for (size_t i = 0; i < t->n; i++)
        if (t->iv[i].end == UINT64_MAX)
            t->iv[i].end = t->n_events; /* lives to the end of the step */
    t->n_steps = rec->n_steps;
    remat__free(map);
    return REMAT_OK;
}

remat_status remat_alloc_trace_build(const remat_analysis *a, const remat_schedule *s, const remat_exec_extras *extras,
                                     uint32_t mask, remat_alloc_trace *t, remat_replay_result *r, remat_err *err)
{
    double t0 = remat__alloc_now();
    memset(t, 0, sizeof *t);
    t->mask = mask & REMAT_ALLOC_ALL;
    t->logical_peak_index = REMAT_ALLOC_BEFORE;
    if (r)
        memset(r, 0, sizeof *r);
    remat__intervals rec;
    remat_status st = remat__intervals_record(a, s, extras, REMAT__IV_EVENTS, NULL, &rec, err);
    if (st == REMAT_ESCHEDULE && r) {
        *r = rec.replay; /* the judged failure: fail_index and its message */
        rec.replay.recompute_counts = NULL;
    }
    if (st == REMAT_OK)
        st = filter(&rec, t->mask, t, err);
    if (st == REMAT_OK) {
        const remat_replay_result *rr = &rec.replay;
        uint64_t want = mask == REMAT_ALLOC_ALL          ? rr->peak_bytes
                        : mask == REMAT_ALLOC_ACTIVATION ? rr->activation_peak
                                                         : t->logical_peak;
        if (want != t->logical_peak)
            st = remat_err_set(err, REMAT_EINTERNAL,
                               "allocation trace: recorded peak %llu B differs from the replayed peak %llu B",
                               (unsigned long long)t->logical_peak, (unsigned long long)want);
    }
    if (st == REMAT_OK && r) {
        *r = rec.replay;
        rec.replay.recompute_counts = NULL; /* now the caller's */
    }
    remat__intervals_destroy(&rec);
    if (st != REMAT_OK) {
        remat_alloc_trace_destroy(t);
        return st;
    }
    t->seconds = remat__alloc_now() - t0;
    return REMAT_OK;
}

/*
 * intervals.h - the one interval recorder: a replay's allocations as spans.
 *
 * Part of exec's inner interface (src/README.md). The allocation trace
 * (src/alloc/alloc_trace.c: the allocator simulation and static offsets
 * read it) and the lifetime trace (src/report/trace.c: the trace writers and
 * the audit read it) are both views of this one record, so no two readers
 * can disagree about when bytes appear and go.
 *
 * The recorder is a replay observer. Every on_alloc opens an interval, every
 * on_free closes the one its storage (or gradient) holds, and a step's own
 * workspace, which the executor only counts in the step's high-water mark,
 * becomes an interval opened at on_step and closed right after it. At
 * on_step every other allocation of the step has happened and none of its
 * post-step releases (a backward step's output gradients go after on_step),
 * so that workspace overlaps exactly what the executor counts. It checks
 * itself at every step, per category: the open intervals plus what the step
 * released (a FREE's mark is taken before its release) must equal the
 * executor's high-water composition (REMAT_EINTERNAL otherwise).
 */
#ifndef REMAT_EXEC_INTERVALS_H
#define REMAT_EXEC_INTERVALS_H

#include "remat/exec.h"
#include "../util/util_internal.h"

#define REMAT__IV_NEVER SIZE_MAX

typedef struct {
    uint32_t storage;  /* the storage, or whose gradient; REMAT_NONE for ledger state and workspace */
    uint32_t op;       /* workspace: the op whose step it serves (REMAT_NONE for FREE and OPT);
                        * a gathered unit (sharding): the op naming the unit */
    uint8_t grad;      /* 1: a gradient */
    uint8_t category;  /* remat_category */
    uint8_t resident;  /* placed before the first instruction (leaves, ledger extras) */
    uint8_t workspace; /* a step's own workspace (first == last) */
    uint8_t held;      /* a gathered unit RELEASEd under FSDP whose buffer is not reusable yet */
    uint8_t early;     /* released as step `last` begins, before its mark (remat_trace_interval.early) */
    size_t held_at;    /* held: the RELEASE's instruction (the rate limiter reclaims in that order) */
    size_t first;      /* instruction that allocates it (0 for resident state) */
    size_t last;       /* instruction after which it is released; REMAT__IV_NEVER */
    uint64_t start;    /* REMAT__IV_EVENTS: live over events [start, end); end = n_events if never released */
    uint64_t end;
    uint64_t bytes;
} remat__interval;

typedef struct {
    remat_instr in;    /* {REMAT_I_OPT, 0} for the implied optimizer step */
    uint64_t live_after, high_water;
} remat__iv_step;

typedef struct {
    remat__interval *iv; /* in opening order */
    size_t n;
    uint32_t *events;    /* (interval << 1) | is_release, in order (REMAT__IV_EVENTS) */
    size_t n_events;
    remat__iv_step *steps; /* (REMAT__IV_STEPS) */
    uint64_t *hw;        /* n_steps x REMAT_CAT_COUNT high-water composition (REMAT__IV_STEPS) */
    size_t n_steps;
    uint64_t peak;       /* the largest sum of open intervals, at the opening of... */
    size_t peak_first;   /* ...an interval of this instruction (REMAT__IV_NEVER: resident state)... */
    size_t peak_event;   /* ...when this many events had happened */
    remat_replay_result replay; /* the replay's result (owned) */
    /* While recording only: storage / gradient -> 1 + its open interval. */
    size_t *open, *open_grad;
} remat__intervals;

/* Replays s with extras (may be NULL) and records it into *out. `next`,
 * when not NULL, is called after the recorder on every event (a reader that
 * needs more, such as the trace's uses, chains itself here; during its
 * on_step, remat__intervals_open answers for the storage it reads). An
 * invalid schedule is REMAT_ESCHEDULE with the executor's message; *out is
 * always safe to destroy. O(instructions + allocations). */
enum {
    REMAT__IV_EVENTS = 1, /* keep the event order (the allocator's clock) */
    REMAT__IV_STEPS = 2   /* keep each step's figures and composition (the trace's) */
};
remat_status remat__intervals_record(const remat_analysis *a, const remat_schedule *s, const remat_exec_extras *extras,
                                     unsigned keep, const remat_replay_observer *next, remat__intervals *out,
                                     remat_err *err);
void remat__intervals_destroy(remat__intervals *r);

/* While recording (from next's callbacks): 1 + the open interval of
 * storage (gradient: grad = 1), 0 when none. */
static inline size_t remat__intervals_open(const remat__intervals *r, uint32_t storage, int grad)
{
    return grad ? r->open_grad[storage] : r->open[storage];
}

#endif

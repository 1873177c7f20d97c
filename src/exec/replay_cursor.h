/*
 * replay_cursor.h - the replay's state, for drivers inside the library.
 *
 * Part of exec's inner interface (src/README.md). remat/exec.h offers the
 * cursor as an opaque handle (remat_replay_begin, _apply, _cost, _live,
 * _end); a driver in the library that makes its own schedule while it
 * replays it (DTR, src/plan/dtr_run.c) also reads the residency arrays here
 * directly, in its inner loops, instead of keeping a copy of them. Nothing
 * outside src/exec writes a field: every change goes through
 * remat_replay_apply, so the rules of graphs/README.md live in replay.c
 * alone.
 */
#ifndef REMAT_EXEC_REPLAY_CURSOR_H
#define REMAT_EXEC_REPLAY_CURSOR_H

#include "remat/exec.h"
#include "../util/util_internal.h"

struct remat_replay_cursor {
    const remat_analysis *a;
    const remat_graph *g;
    const remat_replay_observer *obs; /* NULL, or &obs_copy */
    remat_replay_observer obs_copy;
    remat_exec_extras extras;        /* zero when none were given */
    remat_replay_result *r;          /* &result, or the caller's (remat_replay) */
    remat_replay_result result;
    remat_err *err;                  /* the current call's, or &local */
    remat_err local;
    uint8_t *res;       /* tensor resident */
    uint8_t *ever;      /* tensor was produced at least once */
    uint8_t *grad;      /* gradient state: GRAD_NONE, GRAD_OWN, GRAD_VIEW, GRAD_HELD (replay.c) */
    uint32_t *gview;    /* tensor -> the output whose gradient its own may be a view of, else REMAT_NONE */
    uint8_t *cat;       /* storage -> category of its live allocation */
    uint8_t *fwd_done, *bwd_done;
    uint32_t *cnt;      /* storage -> resident members */
    /* Sharded replays (extras.sharding): per op, its unit is gathered; per
     * bucket, it was reduced; the rank's gradient partition exists. */
    uint8_t *gathered, *reduced;
    int partition;
    /* FSDP: released units whose buffers the allocator cannot reuse yet
     * (replay_shard.c), oldest first. */
    uint32_t *held;
    uint32_t held_head, held_n;
    uint32_t *pending;  /* tensor -> backward steps still to add to its gradient */
    size_t *stamp;      /* tensor -> instruction index + 1 that last touched it (dedupe) */
    uint64_t live[REMAT_CAT_COUNT];
    uint64_t total;
    uint64_t act_live;            /* live bytes of the activation categories */
    /* The current step, kept incrementally so that a step costs what it
     * touches, not a pass over every category: what it adds per category
     * (mask says which), the live bytes of those categories and the totals
     * before it, and a free made during the step (FREE) to add back. */
    uint32_t mask;
    uint64_t add[REMAT_CAT_COUNT], base[REMAT_CAT_COUNT];
    uint64_t base_total, base_act, add_total, add_act;
    int undo_c;
    uint64_t undo_b;
    /* The last step's high-water mark, in total and over the activation
     * categories: what it folded into the peaks (replay_delta.c reads it
     * to know every step's mark without an observer). */
    uint64_t step_total, step_act;
    int seeded;
    int opt_seen;
    size_t index;       /* the instruction being applied (instructions applied so far) */
    remat_status failed; /* REMAT_OK, or the status that stopped the replay */
    int ended;
};

/* Starts cursor c over again from the resident leaves and extras, keeping
 * its arrays: a driver that replays many candidate schedules of one graph
 * (DTR) pays for the allocation once. O(tensors). */
remat_status remat__replay_restart(remat_replay_cursor *c, remat_err *err);

/* The step primitives, for replay.c's rules and replay_shard.c's: a
 * failure naming the instruction (REMAT_ESCHEDULE, replay.c), and from
 * replay_account.c live bytes in and out of a category, the observer's
 * events, a step's open/add/close, and the category of a tensor's
 * gradient. */
remat_status remat__replay_invalid(remat_replay_cursor *R, remat_instr in, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
remat_status remat__replay_overflow(remat_replay_cursor *R);
remat_status remat__replay_notify_alloc(remat_replay_cursor *R, uint32_t storage, int grad, remat_category c,
                                        uint64_t bytes);
remat_status remat__replay_notify_free(remat_replay_cursor *R, uint32_t storage, int grad, remat_category c,
                                       uint64_t bytes);
remat_status remat__replay_step_end(remat_replay_cursor *R, remat_instr in, uint64_t live_after);

/* remat_category_is_activation, inline for the hot primitives below (a
 * call per byte movement was 1.6% of a local search's instructions). */
static inline int remat__cat_is_act(remat_category c)
{
    return c == REMAT_CAT_ACTIVATIONS || c == REMAT_CAT_RECOMPUTED || c == REMAT_CAT_ACTIVATION_GRADS ||
           c == REMAT_CAT_WORKSPACE;
}

/* The books' four hot primitives, inline: every instruction of every
 * replay moves bytes through them, in replay.c, replay_shard.c and
 * replay_account.c alike (a call across files cost 0.7% of a replay). */
static inline remat_status remat__replay_alloc_bytes(remat_replay_cursor *R, remat_category c, uint64_t bytes)
{
    if (!remat_u64_add(R->live[c], bytes, &R->live[c]) || !remat_u64_add(R->total, bytes, &R->total))
        return remat__replay_overflow(R);
    if (remat__cat_is_act(c))
        R->act_live += bytes; /* bounded by total */
    return REMAT_OK;
}

/* Releases bytes of category c (the inverse of alloc_bytes). */
static inline void remat__replay_free_bytes(remat_replay_cursor *R, remat_category c, uint64_t bytes)
{
    R->live[c] -= bytes;
    R->total -= bytes;
    if (remat__cat_is_act(c))
        R->act_live -= bytes;
}

/* Starts a step; callers then add what it allocates (before allocating). */
static inline void remat__replay_step_begin(remat_replay_cursor *R)
{
    R->mask = 0;
    R->add_total = R->add_act = 0;
    R->base_total = R->total;
    R->base_act = R->act_live;
    R->undo_b = 0;
}

static inline remat_status remat__replay_step_add(remat_replay_cursor *R, remat_category c, uint64_t bytes)
{
    if (!(R->mask & (1u << c))) {
        R->mask |= 1u << c;
        R->base[c] = R->live[c];
        R->add[c] = 0;
    }
    if (!remat_u64_add(R->add[c], bytes, &R->add[c]) || !remat_u64_add(R->add_total, bytes, &R->add_total))
        return remat__replay_overflow(R);
    if (remat__cat_is_act(c))
        R->add_act += bytes; /* bounded by add_total */
    return REMAT_OK;
}

/* replay_shard.c: stage 3's gathered-param check for the params among ts,
 * one collective instruction, and remat_replay of a compute schedule with
 * its collectives inserted. */
remat_status remat__replay_check_gathered(remat_replay_cursor *R, remat_instr in, const uint32_t *ts, uint32_t n);
remat_status remat__replay_collective(remat_replay_cursor *R, remat_instr in);
remat_status remat__replay_sharded(const remat_analysis *a, const remat_schedule *s, const remat_exec_extras *extras,
                                   remat_replay_result *r, remat_err *err);

/* replay_grad.c: gradient views (an op with grad_views). R->grad[t] is one
 * of these; R->gview[t] the output whose gradient t's may be a slice of. */
enum {
    REMAT__GRAD_NONE = 0, /* no gradient */
    REMAT__GRAD_OWN = 1,  /* its own storage (logical bytes) */
    REMAT__GRAD_VIEW = 2, /* a slice of gview[t]'s gradient storage: no bytes of its own */
    REMAT__GRAD_HELD = 3, /* read and done, but its storage is held by the slices of it still live */
    REMAT__GRAD_DYING = 4 /* within a BWD step only: freed right after the step's mark */
};
remat_category remat__grad_category(const remat_tensor *t); /* replay_account.c */
void remat__grad_find_slices(remat_replay_cursor *R);
int remat__grad_slice_now(const remat_replay_cursor *R, uint32_t k, uint32_t t, int seed_now);
uint64_t remat__grad_mark_dying(remat_replay_cursor *R, uint32_t u);
remat_status remat__grad_free_dying(remat_replay_cursor *R, uint32_t u);

/* ---- Delta replay (replay_delta.c) -------------------------------------
 *
 * Replays candidate schedules that differ from one base schedule in a
 * window (a local search's flip), at about the cost of the window: the
 * base is replayed once with snapshots of the state; a candidate starts
 * from the last snapshot before its first changed instruction and stops as
 * soon as its state equals the base's at a point from which both run the
 * same instructions to the end. The figures are the full replay's (a test
 * checks them on many random flips: tests/check_exec_delta.c). Sharded
 * replays, and schedules that do not end with OPT, are replayed whole. */
typedef struct remat__delta remat__delta;

typedef struct {
    int valid;                  /* remat_replay_result.valid */
    uint64_t peak_bytes, activation_peak, flops_recompute;
    uint64_t work;              /* instructions replayed, plus state copied and compared (64 B = 1) */
} remat__delta_figures;

/* O(tensors); *out is NULL on failure. extras may be NULL. */
remat_status remat__delta_create(const remat_analysis *a, const remat_exec_extras *extras, remat__delta **out,
                                 remat_err *err);
/* Makes s (copied) the base: one full replay, its figures in f. */
remat_status remat__delta_base(remat__delta *d, const remat_schedule *s, remat__delta_figures *f, remat_err *err);
/* The figures of s's replay. REMAT_OK with f->valid = 0 for a schedule the
 * replay rejects; other codes for ENOMEM or overflow. */
remat_status remat__delta_eval(remat__delta *d, const remat_schedule *s, remat__delta_figures *f, remat_err *err);
/* The base's high-water mark at each of its instructions, in total or over
 * the activation categories (what remat_replay_observer.on_step gets as
 * high_water, or summed from hw_by_category), so that a caller needs no
 * second replay of the base; NULL when the base was invalid or replayed
 * whole. Owned by d, valid until the next base. */
const uint64_t *remat__delta_marks(const remat__delta *d, int activation);
void remat__delta_destroy(remat__delta *d);

#endif

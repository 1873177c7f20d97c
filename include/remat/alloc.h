/*
 * remat/alloc.h - allocator simulation: where every byte of a replayed
 * schedule would live in one address space, and a static offset plan.
 *
 * The logical peak that remat_replay measures is a lower bound: a real
 * allocator gives every allocation an address, and the holes between live
 * blocks (fragmentation), rounding and cached blocks make it need more. This
 * stage answers "how much would an allocator really need for this plan":
 *
 *   1. remat_alloc_trace_build replays a schedule (the executor is the one
 *      judge) with an observer that records every allocation as an interval:
 *      each storage (a base and its views share one), each gradient, each
 *      op's workspace, the inputs and parameters, and the ledger's persistent
 *      state. A tensor recomputed twice is two intervals. The intervals live
 *      on an event clock (one tick per allocation or release) so that "alive
 *      at the same time" is exact: a FREE followed by an allocation may reuse
 *      the bytes; a backward step's new input gradients and its output
 *      gradients (released right after the step) may not.
 *   2. remat_alloc_simulate places the intervals in event order with a
 *      dynamic policy: best-fit with coalescing, first-fit, or a model of
 *      PyTorch's CUDA caching allocator. It reports the address-space
 *      high-water mark, the fragmentation (high-water minus logical peak) and
 *      the largest free block at the moment of the high-water mark.
 *   3. remat_alloc_static_plan assigns every interval an offset ahead of time
 *      (greedy by size as TFLite and XLA do, greedy by lifetime, or the
 *      allocation-order best-fit layout) so that intervals alive at the same
 *      time never share a byte; the arena is never below the logical peak.
 *
 * One address space holds everything the replay allocates, persistent state
 * included: inputs, parameters and ledger state are allocated first, before
 * the first instruction, in tensor order, and never freed. A category mask
 * restricts the trace (e.g. to the categories --activation-budget caps);
 * the logical peak is then that of the masked categories.
 *
 *     remat_alloc_trace t;
 *     if (remat_alloc_trace_build(a, &s, NULL, REMAT_ALLOC_ALL, &t, NULL, &err) == REMAT_OK) {
 *         remat_alloc_result bf;
 *         remat_alloc_simulate(&t, REMAT_ALLOC_BEST_FIT, 0, &bf, &err);  // bf.high_water, bf.fragmentation
 *         remat_static_options so; remat_static_options_init(&so);
 *         remat_static_result sp;
 *         remat_alloc_static_plan(&t, &so, &sp, &err);                  // sp.arena_bytes, sp.offsets[i]
 *         remat_static_result_destroy(&sp);
 *         remat_alloc_result_destroy(&bf);
 *     }
 *     remat_alloc_trace_destroy(&t);
 */
#ifndef REMAT_ALLOC_H
#define REMAT_ALLOC_H

#include "remat/exec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the allocation trace ------------------------------------------------ */

/* Category masks: bit c for remat_category c. */
#define REMAT_ALLOC_ALL REMAT_CAT_MASK_ALL
#define REMAT_ALLOC_ACTIVATION REMAT_CAT_MASK_ACTIVATION


/* "before" for instruction indices of state resident before the schedule,
 * and "never" for allocations that live to the end of the step. */
#define REMAT_ALLOC_BEFORE SIZE_MAX
#define REMAT_ALLOC_NEVER SIZE_MAX

typedef struct remat_alloc_interval {
    uint32_t tensor;   /* the storage (a view's root base) or the tensor whose gradient this is;
                        * REMAT_NONE for ledger state and workspace */
    uint32_t op;       /* workspace: the op whose step it serves (REMAT_NONE for the optimizer's) */
    uint8_t grad;      /* 1: a gradient */
    uint8_t category;  /* remat_category */
    size_t first;      /* instruction that allocates it; REMAT_ALLOC_BEFORE for resident state */
    size_t last;       /* instruction after which it is released; REMAT_ALLOC_NEVER if it lives to the end */
    uint64_t start;    /* event clock: live over [start, end) */
    uint64_t end;
    uint64_t bytes;    /* > 0: allocations of 0 bytes occupy no address space and are not recorded */
} remat_alloc_interval;

typedef struct remat_alloc_trace {
    remat_alloc_interval *iv; /* in allocation order (start ascending) */
    size_t n;
    uint32_t *events;         /* (interval << 1) | is_release, in order; event k happens at clock k */
    size_t n_events;
    uint32_t mask;            /* categories recorded */
    size_t n_steps;           /* instructions judged (the schedule, plus an implied optimizer step) */
    uint64_t resident_bytes;  /* intervals allocated before the first instruction */
    uint64_t logical_peak;    /* largest live bytes at any moment: the replay's peak over the mask */
    size_t logical_peak_index; /* its instruction */
    size_t logical_peak_event; /* events done at that moment (the state after event logical_peak_event-1) */
    double seconds;           /* replay and recording */
} remat_alloc_trace;

/* Replays s with extras (may be NULL) and records the allocations of the
 * categories in mask. When r is not NULL it receives the replay's result
 * (destroy it). The recorder checks itself against the executor: its own
 * largest live total must equal the replay's peak over the mask (else
 * REMAT_EINTERNAL). An invalid schedule is REMAT_ESCHEDULE with the
 * executor's message (index, instruction, why), t left empty. t is always
 * safe to destroy. O(instructions + allocations). */
remat_status remat_alloc_trace_build(const remat_analysis *a, const remat_schedule *s, const remat_exec_extras *extras,
                                     uint32_t mask, remat_alloc_trace *t, remat_replay_result *r, remat_err *err);

/* Accepts NULL and a trace after a failed build. */
void remat_alloc_trace_destroy(remat_alloc_trace *t);

/* ---- dynamic allocators -------------------------------------------------- */

typedef enum {
    REMAT_ALLOC_BEST_FIT,  /* smallest hole that fits (lowest address on ties); split; coalesce on free */
    REMAT_ALLOC_FIRST_FIT, /* lowest-address hole that fits; split; coalesce on free */
    REMAT_ALLOC_CACHING,   /* PyTorch CUDA caching allocator model (see below) */
    REMAT_ALLOC_POLICY_COUNT
} remat_alloc_policy;

/* "best-fit", "first-fit", "caching". */
const char *remat_alloc_policy_name(remat_alloc_policy p);
/* Parses a policy name; 0 if unknown. */
int remat_alloc_policy_parse(const char *name, remat_alloc_policy *out);

/* The caching model's constants (PyTorch c10/cuda/CUDACachingAllocator.cpp):
 * every request rounded up to a multiple of 512 B (at least 512); requests of
 * at most 1 MiB come from the small pool, carved from 2 MiB segments; larger
 * ones from the large pool, carved from 20 MiB segments when under 10 MiB,
 * else from a segment of the request rounded up to 2 MiB. A block is found
 * best-fit (smallest, then lowest address) in its pool and split when the
 * rest is at least 512 B (small pool) or more than 1 MiB (large pool). Freed
 * blocks return to their pool and merge with free neighbours in their own
 * segment, never across segments; segments are never returned (no
 * empty_cache, no OOM retry: the address space is unbounded). Not modelled:
 * streams and events, max_split_size, expandable segments, the power-of-two
 * rounding divisions, per-process memory fractions. The high-water mark is
 * then the bytes reserved in segments (max_memory_reserved). */
#define REMAT_CACHING_ROUND 512u
#define REMAT_CACHING_SMALL_SIZE (1ull << 20)
#define REMAT_CACHING_SMALL_SEGMENT (2ull << 20)
#define REMAT_CACHING_LARGE_SEGMENT (20ull << 20)
#define REMAT_CACHING_MIN_LARGE_ALLOC (10ull << 20)
#define REMAT_CACHING_ROUND_LARGE (2ull << 20)

/* Text of the model's assumptions for reports (static storage, one line
 * per assumption, each ending in '\n'). */
const char *remat_alloc_caching_assumptions(void);

typedef struct remat_alloc_result {
    remat_alloc_policy policy;
    uint64_t logical_peak;      /* the trace's */
    uint64_t high_water;        /* address-space high-water mark (caching: bytes reserved in segments) */
    size_t high_water_index;    /* instruction at which it was first reached (REMAT_ALLOC_BEFORE: resident state) */
    uint64_t fragmentation;     /* high_water - logical_peak */
    /* At the moment the high-water mark was first reached: */
    uint64_t live_at_high_water;    /* bytes in blocks handed out (caching: rounded block sizes) */
    uint64_t free_at_high_water;    /* high_water - live: holes, cached blocks, unused segment space */
    uint64_t largest_free_at_high_water; /* the largest free block below the high-water mark */
    /* At the moment of the logical peak: */
    uint64_t extent_at_logical_peak;     /* top of the address space then (caching: reserved) */
    uint64_t largest_free_at_logical_peak;
    /* Caching model only: */
    uint64_t allocated_peak;    /* largest sum of handed-out (rounded) block sizes: max_memory_allocated */
    uint64_t segments_small, segments_large;
    uint64_t allocations;       /* intervals placed */
    uint64_t *offsets;          /* when asked for: per interval, its address (owned) */
    double seconds;
} remat_alloc_result;

/* Simulates policy over t's events. with_offsets: fill out->offsets. Never
 * fails for lack of address space (it is unbounded); REMAT_ENOMEM or
 * REMAT_EOVERFLOW (addresses past 2^64-1) otherwise. Best-fit and first-fit
 * keep free blocks in a treap (by size and address, or by address with the
 * subtree's largest block), the caching model one per pool:
 * O(events log blocks). out is always safe to destroy. */
remat_status remat_alloc_simulate(const remat_alloc_trace *t, remat_alloc_policy policy, int with_offsets,
                                  remat_alloc_result *out, remat_err *err);

void remat_alloc_result_destroy(remat_alloc_result *r);

/* ---- static offset plans ------------------------------------------------- */

typedef enum {
    REMAT_STATIC_GREEDY_SIZE,     /* largest first (then longest-lived), each at the lowest offset that fits */
    REMAT_STATIC_GREEDY_LIFETIME, /* longest-lived first (then largest), each at the lowest offset that fits */
    REMAT_STATIC_ALLOC_ORDER,     /* allocation order, best fit: the dynamic best-fit layout, fixed ahead */
    REMAT_STATIC_BEST,            /* every algorithm above; the smallest arena */
    REMAT_STATIC_ALGO_COUNT
} remat_static_algo;

#define REMAT_STATIC_N_ALGOS 3 /* the algorithms that BEST chooses among */

/* "greedy-size", "greedy-lifetime", "alloc-order", "best". */
const char *remat_static_algo_name(remat_static_algo a);
int remat_static_algo_parse(const char *name, remat_static_algo *out);

/* The default work bound of one greedy pass, in conflict checks: about a
 * second. A pass that would exceed it is abandoned (reported as not run);
 * the allocation-order layout always runs, so BEST always has a plan. */
#define REMAT_STATIC_WORK_DEFAULT 300000000ull

typedef struct remat_static_options {
    remat_static_algo algo;
    uint64_t work_limit; /* greedy passes: conflict checks before a pass gives up (0: the default) */
    int stop_at_bound;   /* BEST: stop at the first arena equal to the lower bound (it cannot be beaten), and
                          * stop a pass once its arena is above the best so far (reported as not run) */
    uint32_t algos;      /* BEST: bit (1 << algo) for each algorithm to try; 0 tries all */
} remat_static_options;

void remat_static_options_init(remat_static_options *o); /* BEST, default work, stop_at_bound 0, all */

typedef struct remat_static_result {
    remat_static_algo algo;     /* what was asked */
    remat_static_algo chosen;   /* the algorithm whose offsets these are */
    uint64_t arena_bytes;       /* max over intervals of offset + bytes */
    uint64_t lower_bound;       /* the logical peak: no arena is smaller */
    int ran[REMAT_STATIC_N_ALGOS];      /* 1 ran, 0 not asked or stopped early, -1 gave up at the work bound */
    uint64_t arena_by_algo[REMAT_STATIC_N_ALGOS];
    double seconds_by_algo[REMAT_STATIC_N_ALGOS];
    uint64_t *offsets;          /* per interval of the trace (owned) */
    double seconds;
} remat_static_result;

/* Plans offsets for t. Resident state (inputs, parameters, ledger state)
 * lives for the whole step, so it is stacked at the bottom in allocation
 * order: every other interval overlaps it in time, and any packing can be
 * compacted so (no arena grows). The greedy passes keep placed intervals in
 * a list sorted by offset and take, for each new interval, the lowest gap
 * among those alive at the same time: O(n * placed) checks, bounded by
 * work_limit. REMAT_EUNSUPPORTED when the one greedy pass asked for gives
 * up at the work bound (BEST falls back to what did run); REMAT_EOVERFLOW
 * when the bytes of all intervals exceed 2^64-1; REMAT_ENOMEM; out is
 * always safe to destroy. */
remat_status remat_alloc_static_plan(const remat_alloc_trace *t, const remat_static_options *o,
                                     remat_static_result *out, remat_err *err);

void remat_static_result_destroy(remat_static_result *r);

/* Checks a layout: intervals alive at the same time share no byte and
 * none ends past extent. REMAT_EINTERNAL names the first two that collide.
 * A sweep over the events with a treap of live intervals by offset:
 * O(events log live). */
remat_status remat_alloc_verify(const remat_alloc_trace *t, const uint64_t *offsets, uint64_t extent,
                                remat_err *err);

/* The arena a budget mode judges: replays s (r receives the result; destroy
 * it), records the categories in mask and plans offsets with BEST over
 * alloc-order and greedy-size (greedy-lifetime is left out: planners call
 * this for every candidate, and it has never been the smallest on the
 * bundled graphs), stopping at the lower bound. An invalid schedule returns
 * REMAT_OK with r->valid false and *arena 0, as remat_replay does. */
remat_status remat_alloc_arena(const remat_analysis *a, const remat_schedule *s, const remat_exec_extras *extras,
                               uint32_t mask, remat_replay_result *r, uint64_t *arena, remat_err *err);

/* ---- reports (src/alloc/alloc_report.c, src/alloc/alloc_svg.c) ---- */

/* The address space over time as SVG: one rectangle per interval, x = the
 * instructions it spans (resident state from the left edge, what lives to
 * the end to the right edge), y = [offset, offset + bytes), coloured by
 * category, with binary-unit axes, a dashed line at the logical peak, a
 * solid one at extent, and a legend. title is plain text (escaped here).
 * With more than max_rects intervals (0: 20000) the smallest are left out
 * and the chart says how many. NULL on ENOMEM. */
char *remat_report_alloc_svg(const remat_analysis *a, const remat_schedule *s, const remat_alloc_trace *t,
                             const uint64_t *offsets, uint64_t extent, const char *title, size_t max_rects,
                             size_t *len, remat_err *err);

/* `remat alloc`'s report, text or JSON: the logical peak, each dynamic
 * policy's figures (policies may hold NULL entries: not run), the static
 * plan's arena per algorithm, timings and the caching model's assumptions. */
char *remat_report_alloc(const remat_analysis *a, const remat_schedule *s, const remat_alloc_trace *t,
                         const remat_alloc_result *const *policies, size_t n_policies,
                         const remat_static_result *sp, int json, size_t *len, remat_err *err);

/* Appends the static plan to a plan file written by remat_report_plan (which
 * it consumes: plan_text is freed, also on failure): an "offsets" object
 * {"arena_bytes", "lower_bound_bytes", "algorithm", "categories",
 * "intervals": [{"tensor", "op" (workspace only), "grad", "category",
 * "instruction", "free", "offset", "bytes"}, ...]} goes in before the final
 * brace: one entry per interval, in allocation order; "instruction" -1 for
 * resident state, "free" null for what lives to the end. NULL on ENOMEM or
 * when plan_text does not end with an object. */
char *remat_report_plan_offsets(const remat_analysis *a, const remat_alloc_trace *t, const remat_static_result *sp,
                                char *plan_text, size_t *len, remat_err *err);

#ifdef __cplusplus
}
#endif
#endif

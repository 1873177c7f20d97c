/*
 * planner.h - what strategies share: the evaluation of a candidate by
 * replay, the comparison of two candidates under a budget, and the block
 * chain of a graph (single-tensor cuts).
 */
#ifndef REMAT_PLANNER_H
#define REMAT_PLANNER_H

#include "remat/plan.h"
#include "../exec/builder.h"
#include "strategies.h"

typedef struct remat_planner {
    const remat_analysis *a;
    const remat_plan_options *o;
    remat_err *err;
    remat_schedule scratch;
    uint64_t evaluations; /* replays run, for the plan's params */
    /* auto -> exact (issue 20): the best plan any strategy found (NULL:
     * none), which exact offers its solver as the first incumbent, and a
     * proven lower bound on extra FLOPs for the fixed-order class (0: none;
     * remat__bound_extra). in_exact: set while exact runs auto for its
     * incumbent, so that auto does not run exact in turn. */
    const remat_schedule *incumbent;
    uint64_t known_bound;
    int in_exact;
    /* auto -> exact: a work limit instead of the time limit, so that auto's
     * plan does not depend on the machine's load (0: exact's own time
     * limit). GLPK's root LP stops after lp_iterations simplex iterations
     * and its branch and bound after this many nodes; the deadlines only
     * guard against a pathological machine (EXACT_WORK_SAFETY_SECONDS). */
    uint64_t exact_nodes;
    uint64_t exact_lp_iterations;
    uint64_t exact_iterations; /* ... and all its simplex iterations together, the root LP's included */
    int quick;            /* a seed, not an answer (auto's ladder starts): sqrtn and chen-greedy judge only
                           * the paper's candidates over a coarse threshold grid */
    int fit_only;         /* only a plan that fits is wanted (auto's ladder): dtr skips its search for the
                           * smallest budget it meets when nothing fits, which only names that budget */
    int probe;            /* remat__plan_make_probe: auto skips its certifying searches (probe.h) */
    int dtr_every_limit;  /* auto on small graphs: dtr runs at every limit at or below the budget (its
                           * runs change at finitely many), so its answer never grows with the budget */
} remat_planner;

/* A candidate's replayed figures. metric is what the budget caps: the total
 * peak, or the activation peak for --activation-budget. */
typedef struct remat_eval {
    int valid;
    uint64_t peak;
    uint64_t metric;
    uint64_t extra_flops;
    uint64_t arena; /* --budget-mode arena only: the static arena over the budget's categories
                     * (what fits and better judge then); metric stays the logical figure */
} remat_eval;

/* Builds the default-policy schedule of keep and replays it. A policy
 * error (e.g. a freed non-recomputable tensor) gives valid = 0, not a
 * failure; only ENOMEM/overflow fail. */
remat_status remat__eval_keep(remat_planner *P, const uint8_t *keep, remat_eval *e);
/* Replays s. */
remat_status remat__eval_schedule(remat_planner *P, const remat_schedule *s, remat_eval *e);
/* The logical judgement of a replay already made (no arena): what
 * remat__eval_schedule gives in logical mode, for a strategy that replayed
 * its schedule while making it (DTR's cursor). */
void remat__eval_result(const remat_planner *P, const remat_replay_result *r, remat_eval *e);
int remat__fits(const remat_planner *P, const remat_eval *e);
/* The FLOPs of s's RECOMPUTE instructions (saturating): what the replay
 * reports as extra FLOPs for a valid schedule, without replaying it, so a
 * search can reject a candidate that recomputes more before judging its
 * memory. O(instructions). tests/check_bound.c checks it against replays. */
uint64_t remat__schedule_extra_flops(const remat_graph *g, const remat_schedule *s);

/* A lower bound on remat__schedule_extra_flops of the default-policy
 * schedule of any keep set, read off the keep set without building the
 * schedule (keep_floor.c): the FLOPs of the recomputable ops with an output
 * that is not kept and that a backward step saves.
 * _init is O(ops + tensors) and fails only with REMAT_ENOMEM (f is
 * then safe to destroy); remat__keep_floor_of is O(outputs), saturating. */
typedef struct remat__keep_floor {
    uint32_t n;      /* ops with a counted output */
    uint64_t *flops; /* n: each one's FLOPs */
    uint32_t *off;   /* n + 1: its counted outputs in t */
    uint32_t *t;
} remat__keep_floor;
remat_status remat__keep_floor_init(const remat_analysis *a, remat__keep_floor *f);
void remat__keep_floor_destroy(remat__keep_floor *f);
uint64_t remat__keep_floor_of(const remat__keep_floor *f, const uint8_t *keep);

/* auto's ladder seeds (segments_seeds.c): the keep sets the quick form of
 * sqrtn or chen-greedy judges under P's options (not its budget), recorded
 * once, and the strategy's answer at any budget picked from them, each
 * keep set built and replayed at most once over all picks. _create:
 * REMAT_EUNSUPPORTED for any other strategy; *out owned by the caller.
 * _pick: *keep (owned by t, NULL when the answer cannot be scheduled) and
 * its replayed figures *e under P, exactly what running the strategy with
 * P->quick at P's budget gives. remat__segments_record (segments.c) and
 * remat__seeds_add fill the list. */
typedef struct remat__seeds remat__seeds;
remat_status remat__seeds_create(remat_planner *P, const char *strategy, remat__seeds **out);
void remat__seeds_destroy(remat__seeds *t);
remat_status remat__seeds_pick(remat__seeds *t, remat_planner *P, const uint8_t **keep, remat_eval *e);
remat_status remat__seeds_add(remat__seeds *t, const uint8_t *keep);
remat_status remat__segments_record(remat_planner *P, int greedy, remat__seeds *rec);
/* 1 if x is preferable to y: fits when y does not; among fitting, fewer
 * extra FLOPs then lower metric; among non-fitting, lower metric. */
int remat__better(const remat_planner *P, const remat_eval *x, const remat_eval *y);

/* Block chain: ops in forward order split at every cut that exactly one
 * activation crosses (or none), then merged so that every backward step
 * saves only tensors of its own block, its block's input boundary, or
 * leaves. Block j covers forward positions start[j] .. start[j+1]-1; its
 * input boundary is in[j] (REMAT_NONE for the first block or when nothing
 * crosses) and in[j+1] is its output. */
typedef struct remat_blocks {
    uint32_t n;
    uint32_t *start; /* n + 1 entries */
    uint32_t *in;    /* n + 1 entries: in[0] = in[n] = NONE */
} remat_blocks;

remat_status remat__blocks_build(const remat_analysis *a, remat_blocks *b, remat_err *err);
void remat__blocks_destroy(remat_blocks *b);

/* Strategies: fill out->keep (always) and out->schedule (or leave it
 * empty to have the default policy build it), and out->params_json. */
typedef remat_status (*remat_strategy_fn)(remat_planner *P, remat_plan *out);
/* Every strategy's function, declared from the registry (strategies.h). */
#define REMAT__DECLARE(name, fn, summary, options, flags, auto_rank, warm_rank) \
    remat_status fn(remat_planner *P, remat_plan *out);
REMAT__STRATEGIES(REMAT__DECLARE)
#undef REMAT__DECLARE
/* The strategy function of a name, NULL if unknown. */
remat_strategy_fn remat__strategy_lookup(const char *name);

/* remat_plan_make for REMAT_OBJECTIVE_TIME (objective.c): plans a copy of
 * the graph whose op costs are their durations on o->device, then replays
 * the plan on a. Same contract as remat_plan_make. */
remat_status remat__plan_make_for_time(const remat_analysis *a, const remat_plan_options *o, remat_plan *out,
                                       remat_replay_result *r, remat_err *err);
/* The table's entries with REMAT_STRATEGY_AUTO (warm = 0) or
 * REMAT_STRATEGY_WARM_START (warm = 1), in auto_rank or warm_rank order;
 * returns how many went to out (at most cap). */
size_t remat__strategies_ranked(int warm, const remat_strategy_info **out, size_t cap);

/* The non-activation part of the budget's metric at each step of the
 * fixed-order class (fixed_profile.c): step p < n_ops is forward position
 * p's FWD, n_ops + j the j-th backward step, n_ops + n_bwd the optimizer
 * step; pre[p] (pre may be NULL) the live bytes of every category but
 * activations and recomputed (of the activation ones for an activation
 * budget) before it, hw[p] at its high-water mark. Both arrays have
 * n_ops + n_bwd + 1 entries. One replay of the store-all schedule under
 * extras (the caller's choice: with or without a sharding). */
remat_status remat__fixed_profile(const remat_planner *P, const remat_exec_extras *extras, uint64_t *pre,
                                  uint64_t *hw, remat_err *err);

/* A proven lower bound on the extra FLOPs of every schedule that runs the
 * FWD and BWD steps in the analysis's order (any RECOMPUTE and FREE between
 * them) within P's budget (bound.c). *infeasible = 1 (and *lb = UINT64_MAX)
 * when no such schedule fits; no budget gives 0. O((ops + refs) log tensors)
 * and one replay of the store-all schedule. With floor (may be NULL): the
 * peak floor of the class in the budget's metric, every schedule's peak is
 * at least floor->bytes, and the step that forces it (0..n-1 the forward
 * positions, n.. the backward steps; REMAT_NONE with bytes 0 where no bound
 * is known: no budget, or sharded). */
typedef struct {
    uint64_t bytes;
    uint32_t step;
} remat_peak_floor;
remat_status remat__bound_extra(remat_planner *P, uint64_t *lb, int *infeasible, remat_peak_floor *floor);

/* The least extra FLOPs over every schedule of that class within P's
 * budget, by a best-first search over (step, resident activations), and a
 * schedule that reaches it (class_search.c), under the default limits
 * below. *ran = 1 when the optimum is known (*opt = UINT64_MAX when no
 * schedule of the class fits), else 0 and nothing else is touched. The
 * schedule is still to be replayed by the caller. */
remat_status remat__class_search(remat_planner *P, remat_schedule *out, uint64_t *opt, int *ran);

/* The same search under limits, with a proven bound when it stops early
 * (class_search.c). ub: an incumbent's extra FLOPs (0: none); states that
 * cannot beat it are never opened. expansions and states cap the work (0:
 * defaults, 4 x 10^5 and 2 x 10^6), deadline (remat__exact_now's clock; 0:
 * none) the time; expanded reports the work done. On return: *ran = 1 when
 * the search finished: *opt is the optimum and out its schedule, or *opt =
 * UINT64_MAX and *lb = ub (nothing in the class is cheaper than the
 * incumbent; UINT64_MAX: nothing in the class fits). *ran = 0: stopped by a
 * limit (*lb the least cost the search has not ruled out, a proven lower
 * bound), or the graph is out of its reach (more than 64 activations, or
 * an op touching more than 12: *lb = 0). */
typedef struct remat_class_limits {
    uint64_t ub;
    uint64_t expansions;
    uint32_t states;
    double deadline;
    uint64_t expanded;
    uint64_t work; /* 0: none; else a cap on work units (8 an expansion, 4 a state looked up, 4 a state
                    * estimated and 1 per step and storage the estimate visits: about 10 ns each) */
} remat_class_limits;
remat_status remat__class_search_within(remat_planner *P, remat_class_limits *lim, remat_schedule *out,
                                        uint64_t *opt, uint64_t *lb, int *ran);

/* Allocates out->keep (all zero). */
remat_status remat__plan_alloc_keep(remat_planner *P, remat_plan *out);
/* Sets out->params_json from a printf format. */
remat_status remat__plan_params(remat_planner *P, remat_plan *out, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Griewank's minimum number of forward advances to reverse l steps with s
 * snapshot slots (x_0's included): r*l - C(s+r, s+1). */
uint64_t remat__revolve_min_advances(uint64_t l, uint64_t s);
/* The Revolve schedule over the block chain with s slots; *advances gets
 * the number of block advances made. */
remat_status remat__revolve_schedule(const remat_analysis *a, const remat_blocks *bl, uint64_t s,
                                     remat_schedule *out, uint64_t *advances, remat_err *err);
/* The slot count the revolve strategy picks on bl for P's budget: every s
 * judged by replay on up to 64 blocks, else a binary search for the largest
 * s that fits, never below the fewest slots whose schedule has a sane
 * length (with s = 1 a 10^5-block chain makes 5*10^9 advances). Uses
 * P->scratch. */
remat_status remat__revolve_search(remat_planner *P, const remat_blocks *bl, uint64_t *slots);

#endif

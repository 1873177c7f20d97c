/*
 * remat/plan.h - planners: which activations to keep, which to recompute.
 *
 * Every strategy proposes a plan (a keep set and a schedule); remat_plan_make
 * replays it with the executor before anything is reported, and never
 * returns a plan whose replayed peak exceeds the budget. A strategy that
 * cannot meet the budget yields REMAT_EINFEASIBLE with a message naming the
 * smallest budget that strategy meets.
 *
 * Certificates (issue 20): an "auto" plan's params carry "lower_bound", a
 * proven lower bound on the extra FLOPs of every schedule of the
 * fixed-order class at the budget (every schedule that runs each FWD once
 * in the analysis's forward order and each backward step once in its
 * backward order, with any RECOMPUTE and FREE between them: every
 * strategy's schedules are of this class), "gap" (relative to the plan's
 * extra FLOPs; "optimal" when the plan meets the bound) and "gap_pp"
 * (percentage points of forward + backward FLOPs). On graphs small enough
 * for an exhaustive search of the class the bound is the class optimum;
 * graphs/README.md ("The certificate") gives the argument and its limits.
 *
 *     remat_plan_options o;
 *     remat_plan_options_init(&o);
 *     o.strategy = "sqrtn";
 *     o.budget_kind = REMAT_BUDGET_TOTAL;
 *     o.budget = 40ULL << 30;
 *     remat_plan plan; remat_replay_result r;
 *     if (remat_plan_make(a, &o, &plan, &r, &err) == REMAT_OK) { ... r.peak_bytes ... }
 *     remat_replay_result_destroy(&r);
 *     remat_plan_destroy(&plan);
 */
#ifndef REMAT_PLAN_H
#define REMAT_PLAN_H

#include "remat/exec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a budget caps (issue 11): the logical peak the executor measures,
 * or the arena of a static offset plan of the schedule (remat/alloc.h:
 * every allocation at a fixed offset, intervals alive together never
 * sharing a byte), which is never below the logical peak. */
typedef enum { REMAT_BUDGET_MODE_LOGICAL, REMAT_BUDGET_MODE_ARENA } remat_budget_mode;

typedef struct remat_plan_options {
    const char *strategy;          /* see remat_plan_strategies(); NULL means "auto" */
    remat_budget_kind budget_kind; /* NONE: the strategy's unconstrained choice */
    uint64_t budget;               /* bytes */
    remat_exec_extras extras;      /* persistent state from the ledger */
    int linearized;                /* sqrtn, chen-greedy: cut anywhere, keeping every tensor live across the cut */
    uint32_t segments;             /* sqrtn: number of segments (0 = about sqrt(ops)) */
    uint64_t dp_step;              /* chain-dp: memory discretization in bytes (0 = automatic) */
    uint32_t dp_slots;             /* chain-dp: number of memory slots when dp_step is 0 (0 = default) */
    double time_limit;             /* exact: seconds (0 = default) */
    const char *never_recompute;   /* mincut: comma-separated op types never recomputed (NULL = default) */
    const char *dtr_score;         /* dtr: eviction score "h_dtr", "eq" or "local"; NULL or "best" = try all three */
    remat_budget_mode budget_mode; /* LOGICAL (default) or ARENA: the budget caps the static arena */
    int exact_milp;                /* exact: always solve the mixed-integer program, even where the
                                    * shortest-path search of the whole class could take the graph
                                    * (0 = default; tests check the program this way) */
} remat_plan_options;

void remat_plan_options_init(remat_plan_options *o);

typedef struct remat_strategy_info {
    const char *name;
    const char *summary;
} remat_strategy_info;

/* The strategy table (static storage); *n gets its length. */
const remat_strategy_info *remat_plan_strategies(size_t *n);

/* Plans with o->strategy, replays the result and checks the budget. On
 * success *out owns the plan and *r the replay of its schedule (destroy
 * both). When the strategy cannot meet the budget the result is
 * REMAT_EINFEASIBLE and, when the strategy made one (r->recompute_counts is
 * then set), *out / *r hold its best effort (the smallest budget it meets
 * is r's peak, or activation peak for an activation budget); exact, when
 * it proves a budget infeasible and found no schedule at all, leaves both
 * empty. Destroy them either way. On other failures both are left empty. */
remat_status remat_plan_make(const remat_analysis *a, const remat_plan_options *o, remat_plan *out,
                             remat_replay_result *r, remat_err *err);

#ifdef __cplusplus
}
#endif
#endif

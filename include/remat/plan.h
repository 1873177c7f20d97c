/*
 * remat/plan.h - planners: which activations to keep, which to recompute.
 *
 * Every strategy proposes a plan (a keep set and a schedule); remat_plan_make
 * replays it with the executor before anything is reported, and never
 * returns a plan whose replayed peak exceeds the budget. A strategy that
 * cannot meet the budget yields REMAT_EINFEASIBLE with a message naming the
 * smallest budget that strategy meets.
 *
 * Certificates: an "auto" plan's params carry "lower_bound", a
 * proven lower bound on the extra FLOPs of every schedule of the
 * fixed-order class at the budget (every schedule that runs each FWD once
 * in the analysis's forward order and each backward step once in its
 * backward order, with any RECOMPUTE and FREE between them: every
 * strategy's schedules are of this class), "gap" (relative to the plan's
 * extra FLOPs; "optimal" when the plan meets the bound) and "gap_pp"
 * (percentage points of forward + backward FLOPs). On graphs of at most 64
 * activations a best-first search of the class from auto's best plan makes
 * the bound the class optimum when it finishes, and the least cost it has
 * not ruled out when its work limit (or a time_limit) stops it;
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
#include "remat/alloc.h"
#include "remat/time.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { REMAT_BUDGET_NONE, REMAT_BUDGET_TOTAL, REMAT_BUDGET_ACTIVATION } remat_budget_kind;

/* A plan: what a planner decided and the schedule that executes it. */
typedef struct remat_plan {
    char *graph_name;
    uint64_t graph_fingerprint;
    char *strategy;     /* "store-all", "sqrtn", ... */
    char *params_json;  /* the strategy's parameters as a JSON object text, or NULL */
    remat_budget_kind budget_kind;
    uint64_t budget;    /* bytes, when budget_kind != NONE */
    uint8_t *keep;      /* per tensor: 1 keep, 0 recompute (meaningful for activations) */
    uint32_t n_tensors;
    remat_schedule schedule;
} remat_plan;

/* Sets every field empty; a plan after _init is safe to destroy. */
void remat_plan_init(remat_plan *p);
void remat_plan_destroy(remat_plan *p);

/* Reads a plan file (JSON, see README "Plan files") for graph g. Refuses a
 * plan whose fingerprint differs from g's, naming both graphs. Every id is
 * resolved; unknown ones are errors naming the JSON path. */
remat_status remat_plan_load_json(const remat_graph *g, const char *text, size_t len, const char *source,
                                  remat_plan *out, remat_err *err);
remat_status remat_plan_load_file(const remat_graph *g, const char *path, remat_plan *out, remat_err *err);

/* A plan file (format "remat-plan", version 1), with the replayed figures
 * under "replayed" for the reader's information (ignored on load). */
char *remat_report_plan(const remat_analysis *a, const remat_plan *p, const remat_replay_result *r, size_t *len,
                        remat_err *err);

/* remat_report_plan with the offsets of the best static plan of p's
 * schedule over every category (extras may be NULL): what `remat plan -o`
 * writes. *arena (may be NULL) gets the arena. NULL on failure (err). */
char *remat_report_plan_with_offsets(const remat_analysis *a, const remat_plan *p, const remat_replay_result *r,
                                     const remat_exec_extras *extras, uint64_t *arena, size_t *len, remat_err *err);

/* The category mask a budget kind caps (remat/exec.h): ACTIVATION for an
 * activation budget, ALL otherwise. */
uint32_t remat_alloc_mask_for(remat_budget_kind kind);

/* What a budget caps: the logical peak the executor measures,
 * or the arena of a static offset plan of the schedule (remat/alloc.h:
 * every allocation at a fixed offset, intervals alive together never
 * sharing a byte), which is never below the logical peak. */
typedef enum { REMAT_BUDGET_MODE_LOGICAL, REMAT_BUDGET_MODE_ARENA } remat_budget_mode;

/* sqrtn, chen-greedy: which reading of Chen et al. 2016 (src/plan/segments.c
 * names the sections): REMAT's best of the paper's segmenting and its own
 * variations, or the PAPER's alone, as Checkmate implements it. */
typedef enum { REMAT_CHEN_REMAT, REMAT_CHEN_PAPER } remat_chen_reading;

/* What every strategy minimises among the plans that fit: the extra FLOPs
 * of its recomputations (FLOPS, the default), or their predicted time on a
 * device (TIME: each op's recomputation costs its remat/time.h duration,
 * roofline or measured, instead of its FLOPs; memory-bound ops are cheap in
 * FLOPs but not in time). The strategies are unchanged: they plan a copy of
 * the graph whose op costs are those durations in picoseconds, and the plan
 * is replayed on the real graph (so the replay's FLOPs are real FLOPs). */
/* STEP_TIME goes one step further: recomputing a tensor-parallel
 * collective op (an all-reduce that a dropped segment rebuilds) costs its
 * ring time, and the plan is the one with the lowest predicted step time
 * on the two-stream timeline (remat_timeline_run, where a recomputation
 * that runs while a collective does is hidden) among the TIME plan and the
 * plan made with those collective prices. So its step time is never above
 * TIME's; it does not search placements for overlap beyond that choice. */
typedef enum { REMAT_OBJECTIVE_FLOPS, REMAT_OBJECTIVE_TIME, REMAT_OBJECTIVE_STEP_TIME } remat_objective;

typedef struct remat_plan_options {
    const char *strategy;          /* see remat_plan_strategies(); NULL means "auto" */
    remat_budget_kind budget_kind; /* NONE: the strategy's unconstrained choice */
    uint64_t budget;               /* bytes */
    remat_exec_extras extras;      /* persistent state from the ledger */
    int linearized;                /* sqrtn, chen-greedy: cut anywhere, keeping every tensor live across the cut */
    uint32_t segments;             /* sqrtn: number of segments of remat's placement (0 = about sqrt(ops)) */
    remat_chen_reading chen_reading; /* sqrtn, chen-greedy: REMAT (default) or PAPER */
    uint64_t dp_step;              /* chain-dp: memory discretization in bytes (0 = automatic) */
    uint32_t dp_slots;             /* chain-dp: number of memory slots when dp_step is 0 (0 = default) */
    double time_limit;             /* exact: seconds (0 = default) */
    const char *never_recompute;   /* mincut: comma-separated op types never recomputed (NULL = default) */
    const char *dtr_score;         /* dtr: eviction score "h_dtr", "eq" or "local"; NULL or "best" = try all three */
    remat_budget_mode budget_mode; /* LOGICAL (default) or ARENA: the budget caps the static arena */
    int exact_milp;                /* exact: always solve the mixed-integer program, even where the
                                    * shortest-path search of the whole class could take the graph
                                    * (0 = default; tests check the program this way) */
    /* When not NULL, told what planning is doing, for a progress line:
     * the strategy about to run (auto: each candidate and each ladder
     * budget in turn) as "what", with done of total steps before it.
     * Called a few dozen times per plan at most, from the planning thread. */
    void (*progress)(void *ctx, const char *what, size_t done, size_t total);
    void *progress_ctx;
    remat_objective objective;     /* FLOPS (default), TIME or STEP_TIME */
    const remat_device *device;    /* TIME: the device whose durations are minimised (borrowed) */
} remat_plan_options;

void remat_plan_options_init(remat_plan_options *o);

/* What the rest of remat derives from a strategy's table entry. */
#define REMAT_STRATEGY_MONOTONE 1u     /* its answer at a budget only improves as the budget grows */
#define REMAT_STRATEGY_LINEARIZED 2u   /* reads `linearized`: auto and compare run that variant too */
#define REMAT_STRATEGY_RUNS_OTHERS 4u  /* auto: it runs the others, so compare shows it last */
#define REMAT_STRATEGY_AUTO 8u         /* auto runs it at the budget (in auto_rank order) */
#define REMAT_STRATEGY_AUTO_LADDER 16u /* auto also runs it at each ladder budget (not monotone by itself) */
#define REMAT_STRATEGY_LOCAL_START 32u /* its keep set may start auto's local search */
#define REMAT_STRATEGY_WARM_START 64u  /* exact offers its plan to the solver as a start (warm_rank order) */
#define REMAT_STRATEGY_SMALL_ONLY 128u /* auto runs it only on graphs of at most 40 ops, for at most 0.35 s,
                                        * last, from auto's best plan and bound */
#define REMAT_STRATEGY_PAPER 256u      /* reads `chen_reading`: compare runs the paper's reading too */
#define REMAT_STRATEGY_BUDGET_FREE 512u /* its plan does not depend on the budget: auto judges it once for
                                         * every ladder point */
#define REMAT_STRATEGY_AUTO_HEAVY 1024u /* auto leaves it out above 5000 ops (README, "How auto decides") */

typedef struct remat_strategy_info {
    const char *name;
    const char *summary;
    const char *options;    /* the remat_plan_options fields it reads, space-separated (see
                             * remat_plan_option_table), or "" */
    unsigned flags;         /* REMAT_STRATEGY_* */
    unsigned auto_rank;     /* REMAT_STRATEGY_AUTO: auto's order (ties keep the earlier) */
    unsigned warm_rank;     /* REMAT_STRATEGY_WARM_START: exact's order */
} remat_strategy_info;

/* The strategy table (static, constant storage); *n gets its length. Adding
 * a strategy is its own file in src/plan, its entries in the registry
 * (src/plan/strategies.h: the strategy, and each option it reads), and
 * (when it has an option) a field of remat_plan_options here: three files,
 * which tests/cli/strategy_cost.sh checks by adding one. */
const remat_strategy_info *remat_plan_strategies(size_t *n);

/* The options strategies read, as data: each names a remat_plan_options
 * field (the CLI's flag is the name with '-' for '_', e.g. dp_step ->
 * --dp-step). */
typedef enum {
    REMAT_OPTION_FLAG,    /* int, set to 1; no value */
    REMAT_OPTION_COUNT,   /* uint32_t, a whole number */
    REMAT_OPTION_BYTES,   /* uint64_t, a byte size (remat_parse_bytes) */
    REMAT_OPTION_SECONDS, /* double, positive */
    REMAT_OPTION_TEXT,    /* const char *, borrowed */
    REMAT_OPTION_CHOICE   /* const char * (or the enum of budget_mode, chen_reading), one of `choices` */
} remat_option_kind;

typedef struct remat_plan_option_info {
    const char *name;     /* the field */
    remat_option_kind kind;
    const char *arg;      /* how the value reads in a usage line ("N", "B", "S", "OPS"), NULL for a flag */
    const char *choices;  /* CHOICE: the values, space-separated */
    const char *help;     /* one line */
} remat_plan_option_info;

const remat_plan_option_info *remat_plan_option_table(size_t *n);

/* Sets option `name` of o from its text (NULL for a flag). Errors
 * (REMAT_EINVAL) begin with the option's name: "segments: 'x' is not a
 * whole number"; an unknown name is "unknown option 'NAME'". TEXT values
 * are borrowed: value must outlive o. */
remat_status remat_plan_option_set(remat_plan_options *o, const char *name, const char *value, remat_err *err);

/* 1 when option `name` of o holds other than remat_plan_options_init's
 * value (a set flag, a nonzero count, a text given), else 0 (also for an
 * unknown name). A choice set to its default reads as not given. O(1). */
int remat_plan_option_given(const remat_plan_options *o, const char *name);

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

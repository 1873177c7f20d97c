/*
 * remat/compare.h - strategies side by side: one budget, or a sweep of
 * budgets from the smallest any strategy meets to the store-all peak.
 *
 *     remat_compare_row rows[16]; size_t n;
 *     remat_compare_run(a, &opts, rows, 16, &n, &err);   // opts.budget set
 *
 * Every figure comes from remat_plan_make, hence from a replay.
 */
#ifndef REMAT_COMPARE_H
#define REMAT_COMPARE_H

#include "remat/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct remat_compare_row {
    char strategy[32];
    int linearized;
    int paper;               /* sqrtn, chen-greedy: the paper's reading alone ("sqrtn/paper") */
    remat_status status;     /* OK, EINFEASIBLE, or why it did not run */
    int replayed;            /* the figures below are a replayed plan's: OK, or EINFEASIBLE with a best
                              * effort (exact may prove a budget infeasible having found none) */
    char message[REMAT_ERR_MSG_MAX]; /* when not replayed: why (the whole message, as remat plan prints it) */
    uint64_t peak_bytes;     /* replayed total peak */
    uint64_t metric;         /* what the budget caps (total or activation peak) */
    uint64_t extra_flops;
    double overhead;         /* extra / (forward + backward) */
    double seconds;          /* planning time, replay included */
    /* The plan's allocations over the budget's categories (remat/alloc.h;
     * remat_compare_run only, feasible and infeasible rows alike): */
    uint64_t best_fit_high_water; /* best-fit allocator's address-space high-water mark */
    uint64_t fragmentation;       /* best_fit_high_water - metric */
    uint64_t arena_bytes;         /* the best static offset plan's arena */
    /* auto's certificate, from its params: a proven lower bound on
     * the extra FLOPs of every schedule of the fixed-order class at this
     * budget (remat/plan.h), when the row has one. */
    int has_bound;
    uint64_t lower_bound;
    /* With o->device (remat/time.h): the plan's predicted step time and its
     * recomputations' share, from the two-stream timeline of its schedule
     * (its collectives inserted under a sharding). Under the time objective
     * auto's bound is in picoseconds, so no row has one. */
    int has_time;
    double step_time, recompute_time;
} remat_compare_row;

/* Runs every strategy (and, for sqrtn and chen-greedy, the linearized
 * variants and the paper's reading: "sqrtn", "sqrtn/linearized",
 * "sqrtn/paper", "sqrtn/paper/linearized") at o's budget. rows must hold at
 * least 16. */
remat_status remat_compare_run(const remat_analysis *a, const remat_plan_options *o, remat_compare_row *rows,
                               size_t cap, size_t *n, remat_err *err);

/* A sweep: values[s * n_budgets + i] is strategy s's overhead at budget i,
 * or a negative number where it is infeasible. */
typedef struct remat_sweep {
    size_t n_budgets, n_series;
    uint64_t *budgets;
    char (*names)[48];
    double *values;
    remat_budget_kind kind;
} remat_sweep;

/* Budgets from the smallest metric any strategy reaches to the store-all
 * metric, n points (n >= 2). progress (may be NULL) is called after each
 * budget. */
remat_status remat_compare_sweep(const remat_analysis *a, const remat_plan_options *o, size_t n, remat_sweep *out,
                                 void (*progress)(void *ctx, size_t done, size_t total), void *ctx, remat_err *err);
void remat_sweep_destroy(remat_sweep *s);

/* Documents: a text table or JSON for rows; JSON or SVG for a sweep. */
char *remat_report_compare(const remat_analysis *a, const remat_plan_options *o, const remat_compare_row *rows,
                           size_t n, int json, size_t *len, remat_err *err);
char *remat_report_sweep(const remat_analysis *a, const remat_sweep *s, int svg, size_t *len, remat_err *err);

#ifdef __cplusplus
}
#endif
#endif

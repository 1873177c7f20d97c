/*
 * check_dtr.h - what the dtr suite's two files share: the figures and the
 * guarantee checks check_dtr.c defines, and the hook by which
 * check_dtr_random.c (random layered DAGs, fit-only runs) adds its tests to
 * the suite's "guarantees" case, so `check_remat dtr` still runs every dtr
 * test.
 */
#ifndef REMAT_CHECK_DTR_H
#define REMAT_CHECK_DTR_H

#include "test_util.h"

typedef struct {
    unsigned made, infeasible, rebuilt;
} tally;

/* check_dtr.c. check_trace.c exports a check_graph too: the macro gives this
 * one its own linker name while the tests still call it check_graph. */
#define check_graph dtr_check_graph
uint64_t metric_of(const remat_replay_result *r, remat_budget_kind kind);
void store_all_figures(const remat_analysis *a, remat_budget_kind kind, uint64_t *metric);
remat_status plan_and_check(const remat_analysis *a, remat_budget_kind kind, uint64_t budget, const char *score,
                            const remat_exec_extras *extras, remat_plan *keep_plan, tally *tl);
void check_graph(const remat_analysis *a, tally *tl);

/* check_dtr_random.c: adds its tests to the "guarantees" case. */
void dtr_random_tests(TCase *many);

#endif

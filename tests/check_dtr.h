/*
 * check_dtr.h - what the dtr suite's two files share: check_dtr.c's figures
 * and random graphs, and the hook by which check_dtr_fit.c adds its test to
 * the suite's "guarantees" case, so `check_remat dtr` still runs them all.
 */
#ifndef REMAT_CHECK_DTR_H
#define REMAT_CHECK_DTR_H

#include "test_util.h"

/* check_dtr.c */
uint64_t metric_of(const remat_replay_result *r, remat_budget_kind kind);
void store_all_figures(const remat_analysis *a, remat_budget_kind kind, uint64_t *metric);
char *random_graph(uint64_t seed, uint32_t layers, uint32_t width);

/* check_dtr_fit.c */
void dtr_fit_tests(TCase *tc);

#endif

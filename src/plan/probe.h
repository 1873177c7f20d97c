/*
 * probe.h - plan's inner interface for folders above it (dist): a plan made
 * to probe a budget, not to answer it.
 *
 * A caller that plans one graph at many budgets to find the one whose plan
 * fits a constraint of its own (the pipeline's per-device fit, which judges
 * each candidate by the device's peak over the microbatches in flight)
 * needs each budget's plan fast, and the full answer only at the budget it
 * chooses. With probe set, auto runs its ladder of strategies and its local
 * search as always but skips the two searches that certify a plan rather
 * than find one, the fixed-order class search and exact (auto.c); its
 * lower bound is then bound.c's alone. Every other strategy plans as
 * remat_plan_make does. probe 0 is remat_plan_make itself.
 */
#ifndef REMAT_PLAN_PROBE_H
#define REMAT_PLAN_PROBE_H

#include "remat/plan.h"

remat_status remat__plan_make_probe(const remat_analysis *a, const remat_plan_options *o, int probe, remat_plan *out,
                                    remat_replay_result *r, remat_err *err);

#endif

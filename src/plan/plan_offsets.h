/*
 * plan_offsets.h - the check of a plan file's "offsets" section
 * (plan_offsets.c), for the plan file reader. Private to src/plan.
 */
#ifndef REMAT_PLAN_OFFSETS_H
#define REMAT_PLAN_OFFSETS_H

#include "remat/graph.h"
#include "../load/json_glue.h"

/* Checks o against g and a schedule of n_instr instructions: REMAT_EPLAN
 * naming the interval for a bad field, an instruction outside the schedule,
 * bytes outside the arena, or two intervals alive together that share
 * bytes; REMAT_ENOMEM. Reads nothing into the plan: it only refuses. */
remat_status remat__plan_check_offsets(const remat_graph *g, const cJSON *o, size_t n_instr, const char *source,
                                       remat_err *err);

#endif

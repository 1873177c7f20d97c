/*
 * schedule_json.h - exact JSON spellings of instructions and steps.
 *
 * Part of exec's inner interface (src/README.md): the plan file writer in
 * src/plan and the reports in src/report and src/alloc spell instructions
 * through these, so every document names a step the same way and an id of
 * any length survives (remat_instr_text writes into a fixed buffer).
 */
#ifndef REMAT_EXEC_SCHEDULE_JSON_H
#define REMAT_EXEC_SCHEDULE_JSON_H

#include "remat/exec.h"
#include "../util/util_internal.h"

/* "KIND id" (or "OPT"), as a JSON string. */
void remat__instr_json(remat_buf *b, const remat_graph *g, remat_instr in);
/* The step name of instruction i ("bwd:id", "optimizer"), as a JSON string. */
void remat__step_json(remat_buf *b, const remat_graph *g, const remat_schedule *s, size_t i);
/* Recompute FLOPs over forward + backward FLOPs (0 when there are none). */
double remat__flops_overhead(const remat_replay_result *r);

#endif

/*
 * pp_internal.h - what pp_plan.c (planning the stages) and pp_file.c
 * (reading them back from a pipeline plan file) share: a stage's own graph
 * and the steps that turn a stage's plan into a device's figures.
 */
#ifndef REMAT_PP_INTERNAL_H
#define REMAT_PP_INTERNAL_H

#include "remat/pipeline.h"

typedef struct {
    remat_graph *g;
    remat_analysis *a;
    uint8_t *out_storage; /* per tensor of the stage graph: 1 for the storage of an output */
    uint64_t *grad_hold;  /* per op: bytes of the received gradients of the sent outputs it makes */
} stage_graph;

/* Writes, loads and analyzes virtual stage k (forward positions
 * [first, end)) into sg, and fills st's sent and received bytes and FLOPs. */
remat_status remat__pp_open_stage(const remat_analysis *a, uint32_t first, uint32_t end, uint32_t k, stage_graph *sg,
                                  remat_pp_stage *st, remat_err *err);
/* Frees n stage graphs and the array (NULL is fine). */
void remat__pp_close_stages(stage_graph *sg, uint32_t n);
/* From st->plan and st->replay (a valid replay of it on sg): persistent,
 * held and running bytes; *bwd_time gets its backward FLOPs with the
 * recomputation. */
remat_status remat__pp_measure_stage(const stage_graph *sg, remat_pp_stage *st, double *bwd_time, remat_err *err);
/* With every stage measured (fwd[v], bwd[v] their FLOPs): times them on
 * device (NULL: FLOP units), simulates the schedule into r->timeline and
 * sets each device's peak and the largest. */
remat_status remat__pp_finish(remat_pp_result *r, const stage_graph *sg, const remat_device *device, double *fwd,
                              double *bwd, remat_err *err);

#endif

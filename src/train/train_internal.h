/*
 * train_internal.h - what train.c (the step and the optimizer) and
 * train_data.c (synthetic data, initialization, batches) share: the
 * trainer itself. Internal; not installed.
 */
#ifndef REMAT_EXEC_TRAIN_INTERNAL_H
#define REMAT_EXEC_TRAIN_INTERNAL_H

#include "kernels.h"
#include "remat/train.h"

struct remat_trainer {
    const remat_analysis *a;
    remat__kprog P;
    uint32_t loss_op;   /* the op that produces the graph's one output */
    remat_task task;
    uint32_t features;  /* the task's input features, REMAT_NONE when none */
    uint32_t target;    /* the loss's target input, REMAT_NONE when none */
    uint64_t *fwd_ns;   /* remat_trainer_time_kernels: where the next steps' kernel times go, or NULL */
    uint64_t *bwd_ns;
};

/* Sets t->task, features and target from the loss op (train_data.c). */
void remat__train_detect_task(remat_trainer *t);

#endif

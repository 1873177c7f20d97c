/*
 * remat/schedule.h - schedules as data.
 *
 * A schedule is the instruction list FWD op, RECOMPUTE op, BWD op, FREE
 * tensor, OPT (the optimizer step, last) that the replay judges (exec). It
 * is plain data shared by the policies that build schedules, the plan file
 * (remat/plan.h: a plan carries one) and the writers (report).
 *
 *     remat_schedule s;
 *     remat_schedule_init(&s);
 *     remat_schedule_push(&s, REMAT_I_FWD, op_index);
 *     ...
 *     remat_schedule_destroy(&s);
 */
#ifndef REMAT_SCHEDULE_H
#define REMAT_SCHEDULE_H

#include "remat/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    REMAT_I_FWD,       /* arg: op; the op's first forward execution */
    REMAT_I_RECOMPUTE, /* arg: op; a further forward execution that rebuilds freed outputs */
    REMAT_I_BWD,       /* arg: op; its backward step */
    REMAT_I_FREE,      /* arg: tensor; releases it (storage goes when no view of it remains) */
    REMAT_I_OPT,       /* arg: unused; the optimizer step */
    /* Collectives of sharded data parallelism (remat/exec.h, "Sharded data
     * parallel"); they appear only in a schedule replayed with a sharding. */
    REMAT_I_ALLGATHER,      /* arg: op; gathers the params of that op's unit */
    REMAT_I_RELEASE,        /* arg: op; frees the gathered copy of that op's unit */
    REMAT_I_REDUCE_SCATTER, /* arg: bucket; reduces a gradient bucket, each rank keeping its partition */
    REMAT_I_ALLREDUCE       /* arg: bucket; reduces a gradient bucket onto every rank (DDP) */
} remat_instr_kind;

typedef struct remat_instr {
    uint32_t kind; /* remat_instr_kind */
    uint32_t arg;
} remat_instr;

typedef struct remat_schedule {
    remat_instr *ins;
    size_t n, cap;
} remat_schedule;

void remat_schedule_init(remat_schedule *s);
void remat_schedule_destroy(remat_schedule *s);
/* Appends one instruction; REMAT_ENOMEM on failure. Amortized O(1). */
remat_status remat_schedule_push(remat_schedule *s, remat_instr_kind kind, uint32_t arg);
void remat_schedule_clear(remat_schedule *s);

/* "FWD", "RECOMPUTE", "BWD", "FREE", "OPT", "ALLGATHER", "RELEASE",
 * "REDUCE_SCATTER", "ALLREDUCE". */
const char *remat_instr_name(remat_instr_kind k);

/* Writes an instruction as text ("BWD h3", "FREE a1", "OPT"). */
const char *remat_instr_text(const remat_graph *g, remat_instr in, char *buf, size_t cap);

/* The name of instruction i of s as a step: "fwd:h1", "recompute:h1",
 * "bwd:h1", "free:h1", "optimizer" (i == s->n names the implied optimizer
 * step). Writes into buf. */
const char *remat_report_step_name(const remat_graph *g, const remat_schedule *s, size_t i, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif

/*
 * remat/schedule.h - plans and schedules as data.
 *
 * A plan marks every activation keep or recompute and carries its schedule:
 * the instruction list FWD op, RECOMPUTE op, BWD op, FREE tensor, OPT (the
 * optimizer step, last). These types are plain data shared by the plan-file
 * reader (load), the policies that build schedules and the replay that
 * judges them (exec), and the writers (report).
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

#ifdef __cplusplus
}
#endif
#endif

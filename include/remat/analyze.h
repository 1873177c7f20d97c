/*
 * remat/analyze.h - forward order, the derived backward pass, and lifetimes.
 *
 * Analysis turns a loaded graph into the store-all training step of
 * DESIGN (graphs/README.md, "Execution model"): the forward steps in a
 * topological order (file order when it already is one), then one backward
 * step for every op that lies on a path to an output and depends on something
 * that needs a gradient, in reverse forward order, then the optimizer step.
 * Step indices number that sequence:
 *
 *     0 .. n_ops-1                  fwd:<op>   (position in a->order)
 *     n_ops .. n_ops+n_bwd-1        bwd:<op>   (a->bwd_order)
 *     n_ops+n_bwd                   optimizer
 *
 * and every lifetime field is such a step index (REMAT_NONE when none).
 * A cycle is reported as an error naming the ops on it.
 *
 *     remat_analysis *a;
 *     if (remat_analyze(g, &a, &err) != REMAT_OK) { ... }
 *     printf("%s born at %u\n", g->tensors[t].id, a->life[t].birth);
 *     remat_analysis_destroy(a);
 *
 * Cost: O(ops + refs) time and memory, plus igraph's topological sort and
 * reachability (also linear).
 */
#ifndef REMAT_ANALYZE_H
#define REMAT_ANALYZE_H

#include "remat/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct remat_lifetime {
    uint32_t birth;        /* fwd step of the producer; NONE for inputs and params (resident throughout) */
    uint32_t last_fwd_use; /* last fwd step that reads it as an input; NONE if none */
    uint32_t last_bwd_use; /* last bwd step whose saves name it; NONE if none */
    uint32_t free;         /* step after which this tensor is dead (for a base: the last of its views too) */
    uint32_t grad_birth;   /* first bwd step that writes its gradient; NONE if it gets none */
    uint32_t grad_free;    /* step after which the gradient is freed (optimizer step for params and inputs) */
} remat_lifetime;

typedef struct remat_analysis {
    const remat_graph *g;
    uint32_t *order;      /* forward order: op indices */
    uint32_t *pos;        /* op -> forward step */
    uint32_t n_bwd;
    uint32_t *bwd_order;  /* ops with a backward step, in backward order */
    uint32_t *bwd_step;   /* op -> its bwd step index, NONE if it has none */
    uint32_t n_steps;     /* n_ops + n_bwd + 1 */
    uint8_t *grad_flows;  /* tensor -> 1 if a gradient flows into it (needs one and reaches an output) */
    uint8_t *is_output;   /* tensor -> 1 if it is a graph output */
    /* consumers: ops that read tensor t as an input, in forward order:
     * cons[cons_off[t] .. cons_off[t+1]) */
    uint32_t *cons_off, *cons;
    /* savers: ops whose backward step reads t (t in saves), in backward order */
    uint32_t *saver_off, *savers;
    remat_lifetime *life; /* per tensor */
} remat_analysis;

/* Analyzes g (which must outlive the analysis). Fails with REMAT_EGRAPH on a
 * cycle ("cycle through ops a -> b -> a") and REMAT_ENOMEM. */
remat_status remat_analyze(const remat_graph *g, remat_analysis **out, remat_err *err);

/* Accepts NULL. */
void remat_analysis_destroy(remat_analysis *a);

/* Writes "fwd:<op>", "bwd:<op>", "optimizer" or "none" for step s into buf. */
const char *remat_step_name(const remat_analysis *a, uint32_t s, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif

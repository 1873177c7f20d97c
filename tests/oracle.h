/*
 * oracle.h - an independent second simulator of the executor, for the tests.
 *
 * The oracle knows a graph only as a `spec`: a plain description that the
 * tests generate at random (spec_generate), write out as JSON for the
 * loader (spec_json), and from which the oracle derives, by itself, which
 * tensors get a gradient and which ops have a backward step (spec_derive,
 * DESIGN 2) and a closed-form lower bound on any valid schedule's peak
 * (spec_lower_bound). oracle_run then simulates a schedule under the
 * accounting rules (graphs/README.md, DESIGN sections 2-5; check_exec.c
 * states them in its opening comment) and yields every figure remat_replay
 * reports: the high-water mark of every step in total and by category, the
 * peaks, the FLOPs, the recompute counts, and the first illegal instruction.
 *
 * It is worth something only while it stays independent of src/exec: it
 * must never call the code under test (the executor, the policy, the
 * analyzer's arrays, not even remat_category_is_activation), so that a
 * mistake in the executor cannot be repeated here and agree with itself. It
 * reads the public types (remat_schedule, remat_exec_extras, the category
 * and instruction enums) and nothing else from remat. It is deliberately
 * naive: it recomputes live bytes from scratch at every step instead of
 * keeping running totals, so the two do not even share a method.
 * check_exec_oracle.c does the comparing.
 */
#ifndef REMAT_TEST_ORACLE_H
#define REMAT_TEST_ORACLE_H

#include "remat.h"

#include <stddef.h>
#include <stdint.h>

/* Sizes of a generated graph: tensors, ops, inputs, outputs and saves per
 * op, graph outputs. */
enum { GN_T = 96, GN_OPS = 24, GN_IN = 3, GN_OUT = 3, GN_SAVE = 8, GN_OUTPUTS = 2 };

/* A generated graph, indexed by generation order (which is topological).
 * The tensor and op ids are what ties it to the loaded remat_graph. */
typedef struct {
    int n_t, n_ops, n_outputs;
    char tid[GN_T][32];
    int kind[GN_T];
    uint64_t bytes[GN_T];   /* own storage; 0 for a view */
    uint64_t logical[GN_T]; /* gradient size */
    int alias[GN_T], root[GN_T], producer[GN_T];
    int frozen[GN_T], rg[GN_T], is_out[GN_T];
    int outputs[GN_OUTPUTS];
    char oid[GN_OPS][32];
    int n_in[GN_OPS], in[GN_OPS][GN_IN];
    int n_out[GN_OPS], out[GN_OPS][GN_OUT];
    int n_save[GN_OPS], save[GN_OPS][GN_SAVE]; /* effective saves */
    int saves_given[GN_OPS], multi[GN_OPS], flops_given[GN_OPS], bwd_given[GN_OPS], view_bytes_given[GN_T];
    uint64_t flops[GN_OPS], bwd_flops[GN_OPS], ws[GN_OPS], bws[GN_OPS];
    int recomputable[GN_OPS];
    int file_pos[GN_OPS]; /* op written at file position file_pos[k]... */
    int file_op[GN_OPS];  /* ...and file position i holds op file_op[i] */
    /* Derived by the oracle, from the spec alone (spec_derive). */
    uint8_t gflow[GN_T];
    uint8_t has_bwd[GN_OPS];
} spec;

/* What oracle_run finds. The caller allocates hw, live_after (one entry per
 * step) and hw_cat (REMAT_CAT_COUNT per step) for at least s->n + 1 steps
 * and frees them; oracle_run fills in everything else. */
typedef struct {
    /* Per instruction (index n: the implied optimizer step, if any). */
    uint64_t *hw, *hw_cat, *live_after;
    size_t n_steps;
    uint64_t peak, act_peak;
    size_t peak_i, act_peak_i;
    uint64_t peak_cat[REMAT_CAT_COUNT], cat_peak[REMAT_CAT_COUNT];
    uint64_t f_fwd, f_bwd, f_rec;
    uint32_t rec_count[GN_OPS];
    size_t release_at[GN_T]; /* storage root -> instruction whose FREE released it last */
    int resident_at_end;     /* activations still resident when OPT runs */
    int n_fwd[GN_OPS], n_bwd[GN_OPS];
    size_t fail_index;       /* first illegal instruction; SIZE_MAX: legal */
} oracle;

/* A number below n from the seed (splitmix64: tiny, seedable, and a failure
 * reproduces from the seed). Advances *seed. */
uint32_t oracle_rnd(uint64_t *seed, uint32_t n);
/* 1 if x is among v[0..n). */
int oracle_contains(const int *v, int n, int x);

/* Generates a random graph into G (views, multi-output ops, workspaces,
 * frozen params, explicit saves, sometimes a shuffled file order); asserts
 * it fits the GN_ sizes. Call spec_derive before oracle_run. */
void spec_generate(uint64_t *seed, spec *G);
/* Writes G as remat-graph JSON into buf (NUL-terminated); asserts it fits in
 * cap. Returns its length. */
size_t spec_json(const spec *G, char *buf, size_t cap);
/* Fills G->gflow and G->has_bwd (DESIGN 2) from the rest of the spec. */
void spec_derive(spec *G);
/* No valid schedule of G peaks below the result (spec_derive first);
 * *leaves is set to the bytes of the inputs and params. */
uint64_t spec_lower_bound(const spec *G, uint64_t *leaves);

/* Simulates schedule s with the extras x (may be NULL) and fills O.
 * Instruction arguments are indices of the loaded graph; op_of and t_of map
 * them to the spec's ops and tensors (through the ids, never through the
 * analysis). An illegal instruction stops it: O->fail_index is its index (n
 * for a problem found at the end), SIZE_MAX when the schedule is legal. */
void oracle_run(const spec *G, const int *op_of, const int *t_of, const remat_schedule *s,
                const remat_exec_extras *x, oracle *O);

#endif

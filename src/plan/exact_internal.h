/*
 * exact_internal.h - what the files of the `exact` strategy share:
 * exact_milp.c (a mixed-integer program as plain data), exact_model.c (the
 * program for a graph and a budget), exact_solution.c (solutions to
 * schedules and back), exact_start.c (starting plans) and exact.c (the
 * strategy: GLPK, the time limit, the bound and the params).
 *
 * The model is described in exact_model.c; in one paragraph: the training
 * step is cut into stages, one per forward step and one per backward step of
 * the analysis (stage t ends with step t). In stage t the schedule may
 * recompute any set of forward ops, each at most once and in forward order,
 * before the stage's own step (FWD of op t, or the t-th BWD). R(t,p) says op
 * p is executed in stage t, S(t,v) that activation v is resident when stage t
 * begins. A storage is freed right after its last reader in the stage unless
 * it is kept into the next stage. The memory of every execution point is the
 * executor's high-water mark, with the non-activation part (parameters,
 * gradients, workspace of backward steps, ledger extras) taken from a replay
 * of the store-all schedule, which is exact because it does not depend on
 * what is recomputed.
 */
#ifndef REMAT_EXACT_INTERNAL_H
#define REMAT_EXACT_INTERNAL_H

#include "planner.h"

/* A column index that stands for the constant 1 (the FWD of stage t's own
 * op); 0 stands for the constant 0 (a variable pruned away). */
#define EXACT_ONE UINT32_MAX

enum { EXACT_LE = 1, EXACT_GE = 2 };

/* The program: columns and rows 1-based as GLPK numbers them (entry 0 is
 * unused), rows stored by row (CSR) with their terms from index 1. */
typedef struct exact_milp {
    uint32_t n_cols, cap_cols;
    double *lb, *ub, *obj;
    uint8_t *is_int;
    uint32_t n_rows, cap_rows;
    uint8_t *row_type; /* EXACT_LE or EXACT_GE */
    double *rhs;
    uint32_t *row_defines; /* a U column this row defines (warm start), else 0 */
    uint8_t *row_hw;       /* 1 for high-water rows */
    size_t *row_off;       /* terms of row i: [row_off[i], row_off[i+1]) */
    size_t nnz, cap_nnz;   /* terms in ja/ar, from index 1 */
    int *ja;
    double *ar;
    uint32_t n_int;
    int failed; /* an allocation failed: the program is incomplete */
    /* Row under construction: a constant part moved to the right-hand side,
     * and each column's slot in the row (merges repeated columns). */
    double row_const;
    size_t *slot;
} exact_milp;

typedef enum { EXACT_MODE_BUDGET, EXACT_MODE_PEAK } exact_mode;

/* A FREE column: storage `storage` released after a point of a stage. */
typedef struct exact_free {
    uint32_t col, storage;
} exact_free;

typedef struct exact_model {
    const remat_analysis *a;
    const remat_graph *g;
    exact_mode mode;
    int fwd_recompute; /* recomputes allowed in forward stages (the full class) */
    uint32_t n;        /* forward ops (= forward stages) */
    uint32_t T;        /* stages: n + backward steps */
    uint32_t nt;       /* tensors */
    double unit;       /* bytes per memory unit of the rows (a power of two) */
    double fscale;     /* FLOPs per objective unit (a power of two) */
    uint64_t budget;   /* bytes (BUDGET mode) */
    /* Non-activation bytes in the budget's categories (from the store-all
     * replay): resident while stage t's forward executions run, at stage
     * t's backward step (its high-water mark), and at the optimizer step. */
    uint64_t *c_pre, *c_main;
    uint64_t c_opt;
    uint32_t *need;    /* tensor -> last stage it may be read in (REMAT_NONE) */
    uint32_t *R;       /* T x n: column of R(t, forward position) */
    uint32_t *S;       /* T x nt: column of S(t, tensor) */
    uint32_t *NEW;     /* T x nt: column of NEW(t, output), 0 when NEW = R */
    uint32_t peak_col; /* PEAK mode: the peak variable */
    /* FREE(t, storage, p) columns of the point (t, p):
     * frees[free_off[t*n+p] .. free_off[t*n+p+1]) */
    exact_free *frees;
    uint32_t *free_off;
    uint32_t *u_first; /* per stage: the U column of its first point */
    uint32_t n_free;
    /* Storages: for each activation storage root, its members (the root and
     * every view stored in it), members[mem_off[s] .. mem_off[s+1]) indexed
     * by tensor id of the root. */
    uint32_t *mem_off, *members;
    uint32_t *stamp; /* tensor scratch */
    uint32_t stamp_gen;
    exact_milp m;
} exact_model;

/* ---- The program as data (exact_milp.c) ---------------------------------- */

/* Grows *p (of *cap elements of elem bytes) to hold need; 0 when out of
 * memory (*p unchanged). Doubling: amortized O(1) per element. */
int remat__exact_grow(void **p, size_t *cap, size_t need, size_t elem);
/* Appends a column; returns its 1-based index, 0 when out of memory. */
uint32_t remat__milp_col(exact_milp *m, double lb, double ub, double obj, int is_int);
/* A row: begin, add terms (column 0 is the constant 0, EXACT_ONE the
 * constant 1; a column already in the row is merged), end with its type and
 * right-hand side. defines: the U column the row defines, else 0; hw: 1 for
 * a high-water row. Columns must all exist before the first row. */
void remat__milp_row_begin(exact_milp *m);
void remat__milp_term(exact_milp *m, uint32_t c, double coef);
void remat__milp_row_end(exact_milp *m, int type, double rhs, uint32_t defines, int hw);
void remat__milp_destroy(exact_milp *m);
/* Activity of row i at x, leaving out column skip (whose coefficient goes to
 * *skip_coef when not NULL). */
double remat__milp_activity(const exact_milp *m, uint32_t i, const double *x, uint32_t skip, double *skip_coef);

/* ---- The model (exact_model.c) --------------------------------------------- */

static inline uint32_t exact_R(const exact_model *M, uint32_t t, uint32_t p)
{
    return M->R[(size_t)t * M->n + p];
}

/* S(t, v)'s column; 0 past the last stage (nothing is kept after it). */
static inline uint32_t exact_S(const exact_model *M, uint32_t t, uint32_t v)
{
    return t < M->T ? M->S[(size_t)t * M->nt + v] : 0;
}

static inline int exact_is_act(const remat_graph *g, uint32_t v)
{
    return g->tensors[v].kind == REMAT_TENSOR_ACTIVATION;
}

/* The activation storage root of tensor v, or REMAT_NONE (a leaf, or a view
 * of one: resident throughout, nothing to plan). */
static inline uint32_t exact_root_of(const remat_graph *g, uint32_t v)
{
    uint32_t s = g->tensors[v].storage;
    return exact_is_act(g, s) ? s : REMAT_NONE;
}

/* Forward position of the op that produces activation v. */
static inline uint32_t exact_pos_of(const exact_model *M, uint32_t v)
{
    return M->a->pos[M->g->tensors[v].producer];
}

/* 1 if stage t's own step reads a member of storage r: the FWD of op t, or
 * the saves of the backward step. O(the op's refs). */
int remat__exact_main_reads(const exact_model *M, uint32_t t, uint32_t r);
/* The storages op touches (activation roots of its inputs and of its own
 * non-view outputs), each once, into buf (room for n_in + n_out); returns
 * how many. Uses M's stamp scratch. */
uint32_t remat__exact_touched(exact_model *M, const remat_op *op, uint32_t *buf);

/* Builds the program for budget (BUDGET mode) or for the smallest peak
 * (PEAK mode). With fwd_recompute 0 the class is narrowed to schedules that
 * recompute only between backward steps (no rematerialization during the
 * forward pass), which halves the program. c_pre/c_main/c_opt are computed
 * here from a store-all replay with the planner's extras.
 * O(T * (ops + refs)) columns and rows. */
remat_status remat__exact_build(remat_planner *P, exact_mode mode, uint64_t budget, int fwd_recompute, exact_model *M);
void remat__exact_destroy(exact_model *M);

/* Schedule -> a full column vector x[1..n_cols] that satisfies every row,
 * if the schedule has the model's stage structure and fits; returns 1 and
 * fills x, 0 if not (x unspecified), -1 when out of memory. Used for the
 * warm start. O(T * (tensors + ops) + nonzeros). */
int remat__exact_vector_of(exact_model *M, const remat_schedule *s, double *x);

/* ---- Solutions and schedules (exact_solution.c) -------------------------- */

/* A 0/1 solution (R and S columns read from x, rounded) -> the schedule,
 * appended to out. The schedule frees every storage right after its last
 * reader in a stage. O(T * (ops + tensors) + instructions). */
remat_status remat__exact_schedule_of(exact_model *M, const double *x, remat_schedule *out, remat_err *err);

/* Largest violation of a column bound, an integrality or a row by x
 * (rows relative to 1 + |rhs|). O(columns + nonzeros). */
double remat__exact_max_violation(const exact_model *M, const double *x);

/* ---- Starting plans (exact_start.c) -------------------------------------- */

/* Seconds on a monotonic clock. */
double remat__exact_now(void);

/* The best schedule found so far that fits the budget and lies in the
 * model's class, with its solution vector; the best fitting one outside the
 * class (another strategy's); and the best keep set offered (fitting or
 * not), where the local search starts. In PEAK mode "best" is the smallest
 * metric. */
typedef struct exact_pool {
    remat_schedule best;
    remat_eval best_e;
    int have;
    double *x;          /* best as a solution vector (1-based), once have */
    double *x_try;      /* scratch: a candidate's vector */
    const char *source; /* which search found best */
    uint8_t *keep;
    remat_eval keep_e;
    int have_keep;
    uint64_t min_metric;     /* smallest metric of the keep sets offered (all in the class) */
    remat_schedule fallback; /* best fitting schedule outside the class */
    remat_eval fallback_e;
    int have_fallback;
    const char *fallback_source;
    uint64_t offers, outside; /* candidates replayed; fitting ones outside the class */
} exact_pool;

void remat__exact_pool_init(exact_pool *pool);
void remat__exact_pool_destroy(exact_pool *pool);

/* Replays s; keeps it if it fits, is in M's class and beats the best.
 * e_out (may be NULL) gets its figures. Fails only for ENOMEM/overflow. */
remat_status remat__exact_offer(remat_planner *P, exact_model *M, exact_pool *pool, const remat_schedule *s,
                                const char *source, remat_eval *e_out);
/* The same for a keep set, through the default policy. */
remat_status remat__exact_offer_keep(remat_planner *P, exact_model *M, exact_pool *pool, const uint8_t *keep,
                                     const char *source, remat_eval *e_out);
/* Greedy descent from store-all: O(activations^2) replays, until `until`. */
remat_status remat__exact_greedy(remat_planner *P, exact_model *M, exact_pool *pool, double until);
/* One-activation flips from the pool's best keep set while they improve. */
remat_status remat__exact_local(remat_planner *P, exact_model *M, exact_pool *pool, double until);
/* Keep sets rounded at several thresholds from an LP solution lp. */
remat_status remat__exact_round(remat_planner *P, exact_model *M, exact_pool *pool, const double *lp, double until);
/* The plans of the other budget-aware strategies. */
remat_status remat__exact_strategies(remat_planner *P, exact_model *M, exact_pool *pool, double until);

#endif

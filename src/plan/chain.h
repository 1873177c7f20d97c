/*
 * chain.h - a graph seen as a chain of stages, for strategies that move
 * along it (the chain dynamic program of chain_dp.c, and Revolve, which
 * emits through the primitives below over the block chain).
 *
 * A stage is a run of consecutive blocks of blocks.c, described by the same
 * remat_blocks record (start[j], in[j]): the block chain itself, or a
 * coarsening of it that keeps only some of its cuts. x_j = in[j] is the one
 * tensor entering stage j (REMAT_NONE when nothing crosses).
 *
 * Two parts:
 *   - emitting primitives (chain_emit.c): advance along the chain, run a
 *     stage forward keeping its tape, run its backward, reverse one stage
 *     from its input; all write through the builder, so every schedule is
 *     legal by construction;
 *   - the stage profile (chain_profile.c): each stage's costs and memory
 *     figures, measured by replaying probe schedules made of those same
 *     primitives. The figures are what the dynamic program reasons with;
 *     the replay of the final schedule stays the judge.
 */
#ifndef REMAT_CHAIN_H
#define REMAT_CHAIN_H

#include "planner.h"

/* ---- emitting primitives (chain_emit.c) -------------------------------- */

typedef struct remat_chain_emit {
    remat_builder B;
    const remat_blocks *st; /* the stages */
    uint32_t *tape;         /* scratch: the saves of one stage's backward steps */
    uint64_t advances;      /* stage forward runs made by advance() */
} remat_chain_emit;

remat_status remat__chain_emit_init(remat_chain_emit *E, const remat_analysis *a, const remat_blocks *st,
                                    remat_schedule *out, remat_err *err);
void remat__chain_emit_destroy(remat_chain_emit *E);

/* Runs stages a..m-1 forward from a resident x_a (pinned by the caller),
 * keeping x_m and nothing else that is not pinned: every other tensor goes
 * after its last forward use, x_{a+1}..x_{m-1} included. */
remat_status remat__chain_advance(remat_chain_emit *E, uint32_t a, uint32_t m);

/* Runs stage j forward from a resident x_j keeping its tape (every tensor a
 * backward step still saves) and x_{j+1} (pinned). Then x_j is unpinned and
 * freed unless a backward step still saves it: the stage's tape replaces
 * it, so nobody replays from x_j again. With drop, x_j goes even if stage
 * j-1's backward saves it (that stage will rebuild it); only stage j's own
 * saves keep it. */
remat_status remat__chain_tape_forward(remat_chain_emit *E, uint32_t j, int drop);

/* The backward steps of stage j, its tape rebuilt from x_j first where it
 * is not resident; then whatever is left of the stage is freed. */
remat_status remat__chain_backward(remat_chain_emit *E, uint32_t j);

/* Reverses one stage from a resident x_j: its first forward if it never
 * ran (keeping its tape), else a rebuild of its tape from x_j; then its
 * backward (with KEEP_INPUT, how Revolve reverses each block). `how`
 * combines:
 *   REMAT_CHAIN_KEEP_INPUT  x_j keeps the pin it had (else it is freed as
 *                           soon as nothing here needs it, unless saved);
 *   REMAT_CHAIN_LAZY        rebuild each backward step's saves just before
 *                           it runs (the default policy's way), instead of
 *                           the whole tape first: less memory when a large
 *                           gradient arrives before most of the tape is
 *                           needed, more when x_j could have gone early. */
#define REMAT_CHAIN_KEEP_INPUT 1
#define REMAT_CHAIN_LAZY 2
remat_status remat__chain_reverse(remat_chain_emit *E, uint32_t j, int how);

/* x_j is a checkpoint: never freed implicitly. */
void remat__chain_pin(remat_chain_emit *E, uint32_t j);
/* Unpins x_j and frees it. */
remat_status remat__chain_release(remat_chain_emit *E, uint32_t j);
/* Unpins x_j and frees it unless a backward step still saves it. */
remat_status remat__chain_unpin(remat_chain_emit *E, uint32_t j);

/* ---- the stage profile (chain_profile.c) ------------------------------- */

/* Byte figures are signed: they are differences of live bytes (in the
 * budget's metric: total, or activation categories only) between two
 * instants of a probe replay, and a stage can end with less than it began
 * with. "Peak" figures are a high-water mark over the state a phase starts
 * in. G(j) is the gradient load once the backward steps of stages j..n-1
 * have run (activation gradients, and parameter gradients under --budget):
 * the same in every schedule, because the backward order is fixed. */
typedef struct remat_chain_profile {
    uint32_t n;           /* stages */
    int activation;       /* the metric is the activation peak */
    uint64_t base;        /* live bytes before the first instruction (leaves, extras) */
    int64_t fin;          /* the optimizer step's high-water mark over base */
    uint8_t *nr;          /* stage has an op that is not recomputable */
    uint8_t *so;          /* stage j's backward saves its output x_{j+1} */
    uint8_t *own_in;      /* stage j's backward saves its input x_j */
    uint8_t *peel;        /* stage j's backward saves no activation but perhaps x_{j+1} */
    int64_t *grad;        /* n+1: G(j); G(n) = 0 */
    int64_t *hold;        /* n+1: bytes x_j holds as a checkpoint (0 for NONE) */
    int64_t *gain;        /* n+1: bytes freeing x_j surely returns (0 for a view) */
    int64_t *adv_first;   /* advancing stage j from a pinned x_j: peak */
    int64_t *adv_mid;     /* advancing stage j inside a longer advance: peak over the advance's start */
    /* Reverse of stage j, four ways: [v] with v = keep + 2 * lazy, keep
     * meaning x_{j+1} is still resident (so[j]) and lazy the per-step
     * rebuild of remat__chain_reverse; all replays. */
    int64_t *leaf_pk[4];
    int64_t first_pk;       /* the last stage's first run and reverse */
    uint64_t *leaf_cost[4]; /* its recompute FLOPs */
    int64_t *tf_pk;       /* tape forward of stage j: peak */
    int64_t *tf_end;      /* tape forward of stage j: bytes it leaves (tape + x_{j+1} - x_j if freed) */
    int64_t *tb_pk;       /* backward of stage j after a tape forward: peak */
    uint64_t *adv_cost;   /* FLOPs of advancing stage j once more */
    uint64_t *tf_cost;    /* FLOPs of a tape forward of stage j that is not its first */
    /* The probes are plans of the dynamic program's family; their replays
     * are candidates too. */
    remat_eval ckpt_all;  /* every boundary a checkpoint, each stage reversed from it */
    remat_eval tape_all;  /* every stage's tape kept: no recomputation */
    uint32_t replays;     /* probe replays run */
} remat_chain_profile;

/* Measures every figure by replaying probe schedules (3 to 6 replays, each
 * O(instructions)); P->o gives the metric and the extras. Frees nothing on
 * failure that destroy would not: always call remat__chain_profile_destroy. */
remat_status remat__chain_profile_build(remat_planner *P, const remat_blocks *st, remat_chain_profile *pr);
void remat__chain_profile_destroy(remat_chain_profile *pr);

/* The greatest common divisor of every byte figure (0 if all are 0): a
 * memory step that divides it rounds nothing. */
uint64_t remat__chain_profile_gcd(const remat_chain_profile *pr);

/* The probe schedules, for reuse as plans: kind 0 = checkpoint every
 * boundary, 1 = keep every tape. */
remat_status remat__chain_probe_schedule(const remat_analysis *a, const remat_blocks *st, const uint8_t *nr,
                                         int kind, remat_schedule *out, remat_err *err);

/* ---- the tables (chain_table.c) ---------------------------------------- */

#define REMAT_CHAIN_INF ((uint64_t)INT64_MAX) /* two costs add without overflow */
#define REMAT_CHAIN_MAX_ENTRIES (1ULL << 24) /* 128 MiB of 8-byte costs */

/* The dynamic program's tables for one step q and W memory levels: per
 * solve (stages s..t with its flags), the least recompute FLOPs at each
 * level. Figures in slots are derived from the profile (sizes rounded up). */
typedef struct remat_chain_dp {
    const remat_chain_profile *pr;
    uint32_t n;
    int32_t W;  /* memory levels 0 .. W-1 */
    uint64_t q; /* bytes per slot */
    int32_t *leaf_need[4], *tb_need, *tb_need_drop, *tf_held, *tf_held_drop, *peel_need, *wq, *wfl;
    int32_t first_need;
    uint64_t *cost;    /* rows of W costs */
    int32_t *lo;       /* per row: its first finite level (W if none) */
    size_t *ridx, *fidx; /* row numbers of replay and fresh solves */
    uint64_t entries;  /* costs computed */
} remat_chain_dp;

/* Fills every table: O(n^3 W / 6) time, O(n^2 W) memory. Fails with
 * REMAT_EINVAL naming --dp-step when the tables would exceed
 * REMAT_CHAIN_MAX_ENTRIES. Always destroy. */
remat_status remat__chain_dp_fill(const remat_chain_profile *pr, uint64_t q, int32_t W, remat_chain_dp *D,
                                  remat_err *err);
void remat__chain_dp_destroy(remat_chain_dp *D);
/* ceil(bytes / q): a requirement in slots. */
int32_t remat__chain_slots(const remat_chain_dp *D, int64_t bytes);
/* The whole problem's row: W costs, by memory level. */
const uint64_t *remat__chain_dp_top(const remat_chain_dp *D);
/* The schedule of the plan at level m of the top row (finite there). */
remat_status remat__chain_dp_schedule(const remat_analysis *a, const remat_blocks *st, const remat_chain_dp *D,
                                      int32_t m, remat_schedule *out, remat_err *err);

#endif

/*
 * dtr_internal.h - what the dtr strategy's files share (the design is in
 * dtr.c): the tables derived once per graph, the state of one run, and the
 * seams between the strategy (dtr.c), the replay that emits a schedule
 * (dtr_run.c) and the choice of victims by score (dtr_score.c).
 */
#ifndef REMAT_DTR_INTERNAL_H
#define REMAT_DTR_INTERNAL_H

#include "planner.h"
#include "../exec/replay_cursor.h"

/* Up to this many candidates, an instruction that must evict considers
 * them all; above it, a deterministic random sample of REMAT_DTR_SAMPLE
 * (the paper's sampling). */
#ifndef REMAT_DTR_SCAN_MAX
#define REMAT_DTR_SCAN_MAX 1024u
#endif
#ifndef REMAT_DTR_SAMPLE
#define REMAT_DTR_SAMPLE 256u
#endif
/* Exact scores computed per eviction at most; beyond them the smallest
 * computed so far is evicted (large graphs at tight budgets only). */
#ifndef REMAT_DTR_EXACT_MAX
#define REMAT_DTR_EXACT_MAX 256u
#endif
/* h_dtr's search of an evicted neighbourhood stops after this many tensors
 * beyond the direct neighbours. */
#ifndef REMAT_DTR_DFS_CAP
#define REMAT_DTR_DFS_CAP 64u
#endif

typedef enum { REMAT_DTR_H_DTR, REMAT_DTR_EQ, REMAT_DTR_LOCAL, REMAT_DTR_SCORES } remat_dtr_score;

/* One run's settings. */
typedef struct remat_dtr_config {
    remat_dtr_score score;
    int release;          /* outputs of ops that cannot be recomputed: hold (0) or release (1) */
    uint64_t limit;       /* bytes of the budget's metric: DTR evicts to stay at or below it */
    uint64_t abort_above; /* a step above this abandons the run (it cannot be the answer) */
    uint64_t work_cap;    /* abandon past this much work; 0: the thrashing guard of dtr_run.c */
} remat_dtr_config;

/* What every run of one planning call shares: derived once from the graph. */
typedef struct remat_dtr_static {
    const remat_analysis *a;
    const remat_graph *g;
    remat_budget_kind kind;
    const remat_exec_extras *x;
    remat_exec_extras x_unsharded; /* o->extras without its sharding (see dtr_run.c) */
    uint32_t *need_end;           /* activation -> last step that may read it */
    uint32_t *end_off, *end_list; /* activations bucketed by need_end */
    uint32_t *view_off, *views;   /* storage -> the views stored in it */
    uint8_t *evictable;           /* storage -> may be evicted at all (hold mode) */
    uint8_t *evictable_release;   /* the same less descendants of fixed outputs (release mode) */
    uint8_t *rebuildable;         /* tensor -> an activation whose producer can be recomputed */
    double *cost;                 /* tensor -> its producer's FLOPs (0 for leaves) */
    /* The scores' hot loops read these dense copies of what the graph
     * holds in its tensor and op records (dtr_score.c: a score touches a
     * few tensors far apart, and each record is a cache line of its own):
     * each activation's producer, each tensor's bytes, and the share of
     * its producer's FLOPs that set_evicted moves into its neighbours'
     * nsum. */
    uint32_t *prod;
    uint64_t *bytes, *share;
    /* Activation t's neighbours that may ever be evicted (rebuildable
     * activations), with repeats, in FOR_NEIGHBOURS' order: its
     * producer's inputs at [nb_off[t], nb_mid[t]), its consumers' outputs
     * at [nb_mid[t], nb_off[t + 1]). No other neighbour is ever evicted or
     * a candidate, so the scores never read them; nb_deg[t] counts all of
     * them for the work. */
    uint32_t *nb_off, *nb_mid, *nb, *nb_deg;
    int has_fixed;                /* some op that cannot be recomputed has an output */
    const remat_replay_observer *obs; /* NULL; a test may watch the runs' replay (set before run_init) */
} remat_dtr_static;

/* A pending instruction: its requirements are made resident first. */
typedef struct {
    uint32_t op, kind, i, stage;
} remat_dtr_frame;

enum { REMAT_DTR_FR_FWD, REMAT_DTR_FR_RECOMPUTE, REMAT_DTR_FR_BWD };

/* A candidate in make_room's heap: key is a lower bound of its score, or
 * (exact) its score as of `epoch` (evictions so far). */
typedef struct {
    double key;
    uint64_t bytes;
    uint32_t s;
    uint32_t exact;
    uint64_t epoch;
} remat_dtr_hent;

typedef struct remat_dtr_run {
    const remat_dtr_static *S;
    const remat_analysis *a;
    const remat_graph *g;
    remat_dtr_score score;
    int release;
    const uint8_t *evictable;
    uint64_t limit, abort_above;
    remat_schedule *out;
    remat_err *err;
    /* The replay this run drives (every instruction it emits is applied
     * there, so the executor's rules are the only ones), and its residency
     * read in place: tensor resident, produced at least once; storage ->
     * resident members. */
    remat_replay_cursor *cur;
    uint32_t mask;              /* the categories the budget caps */
    const uint8_t *res, *made;
    const uint32_t *cnt;
    uint32_t *lockc, *slock;    /* tensor / storage -> locks held by pending frames */
    uint32_t *fwd_rem, *bwd_rem;/* forward consumers / backward savers still to run */
    uint64_t live, peak, clock; /* the replay's live bytes in mask (kept after every instruction), its
                                 * peak of them, op instructions so far */
    uint64_t hw_pass;           /* the highest high-water mark of an instruction that ran within the limit:
                                 * the run is the same at every limit from it up to its own (dtr.c) */
    uint32_t now;               /* the store-all step being run */
    int seeded, step_over;
    remat_dtr_frame *fr;
    uint32_t n_fr;
    /* Candidates: resident evictable storages, dense, and their last access. */
    uint32_t *cpos, *cand, n_cand;
    uint64_t *last;
    remat_dtr_hent *heap;
    uint32_t n_heap;
    /* Scratch stamps for de-duplication and searches. */
    uint32_t *mark, *seen, *opmark, *dfs;
    uint32_t stamp, seen_stamp;
    /* Evicted tensors: a flag each, and per tensor the sum over its evicted
     * direct neighbours u of c(u) / (outputs of u's producer), a lower bound
     * of the neighbourhood cost both h_dtr and eq add (integer: exact). */
    uint8_t *ev;
    uint64_t *nsum;
    /* eq: a union-find over eviction events. */
    uint32_t *node_of, *uf_parent, *uf_mark;
    double *uf_cost;
    uint32_t n_nodes, cap_nodes;
    uint64_t rng;
    uint64_t evictions, rebuilds, work, work_cap, thrash_cap;
    int abandoned; /* thrashing (work_cap), or a step above abort_above */
} remat_dtr_run;

/* dtr_run.c */
remat_status remat__dtr_static_build(const remat_analysis *a, const remat_plan_options *o, remat_dtr_static *S,
                                     remat_err *err);
void remat__dtr_static_destroy(remat_dtr_static *S);
remat_status remat__dtr_run_init(remat_dtr_run *R, const remat_dtr_static *S, remat_err *err);
void remat__dtr_run_destroy(remat_dtr_run *R);
/* Runs the store-all step under cfg, writing the schedule to out (cleared
 * first) while the replay cursor judges it. R->peak is the replayed peak of
 * the budget's metric and *r, when the run completes and r is not NULL, the
 * replay's whole result (destroy it); R->abandoned is set when the run was
 * abandoned (out is then partial, *r empty). */
remat_status remat__dtr_run(remat_dtr_run *R, remat_dtr_config cfg, remat_schedule *out, remat_replay_result *r);
/* FREE of storage s and its resident views. */
remat_status remat__dtr_evict(remat_dtr_run *R, uint32_t s);

/* dtr_score.c */
/* Evicts by score until live + add fits the limit or nothing is left. */
remat_status remat__dtr_make_room(remat_dtr_run *R, uint64_t add);
/* t became evicted (freed while rebuildable and not banished; on = 1) or
 * stopped being evicted (resident again, or banished; on = 0): updates its
 * neighbours' evicted-neighbour bounds and, for eq, the classes. Idempotent. */
remat_status remat__dtr_set_evicted(remat_dtr_run *R, uint32_t t, int on);

/* No later step can read t, directly or to rebuild another tensor. */
static inline int remat__dtr_banished(const remat_dtr_run *R, uint32_t t)
{
    uint32_t ne = R->S->need_end[t];
    return ne < R->now || (ne == R->now && R->step_over);
}

/* A fresh stamp for R->seen (wrapping safely). */
static inline uint32_t remat__dtr_next_seen(remat_dtr_run *R)
{
    if (++R->seen_stamp == 0) {
        for (uint32_t t = 0; t < R->g->n_tensors; t++)
            R->seen[t] = 0;
        R->seen_stamp = 1;
    }
    return R->seen_stamp;
}

#endif

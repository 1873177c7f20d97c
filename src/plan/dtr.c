/*
 * dtr.c - dynamic tensor rematerialization (Kirisame et al., ICLR 2021):
 * the strategy. One replay lives in dtr_run.c, the choice of victims in
 * dtr_score.c.
 *
 * DTR treats activation memory as a cache in front of recomputation. We
 * replay the store-all step (every FWD in forward order, then every BWD in
 * backward order, then OPT) against a memory limit with the executor's own
 * accounting, and:
 *   - before each instruction, while its high-water mark (live + what it
 *     allocates + its workspace) would exceed the limit, evict (FREE) the
 *     resident, evictable activation with the smallest score;
 *   - when an instruction needs a tensor that is not resident, rematerialize
 *     it: RECOMPUTE its producer after making the producer's inputs resident,
 *     recursively; nothing that a pending instruction needs is evicted;
 *   - free a tensor as soon as nothing reads it directly any more (no forward
 *     consumer and no backward saver left to run). This is the paper's eager
 *     eviction of tensors the program has dropped: the tensor stays
 *     rebuildable, and is rebuilt if a later recomputation needs it.
 * The emitted schedule is exactly what the replay did: every instruction is
 * applied to the executor's own cursor as it is emitted (dtr_run.c), so the
 * peak DTR plans against is the executor's, and the replay's result judges
 * the run without a second pass (arena mode adds the static arena).
 * tests/check_engine.c checks the per-step live bytes against remat_replay,
 * the allocation trace and an independent oracle.
 *
 * What may be evicted. The unit is a storage (a non-view activation with
 * bytes): evicting it frees it and every resident view stored in it, since
 * freeing a base alone releases nothing while a view holds its bytes. It
 * must be rebuildable (its producer, and its views' producers, can be
 * recomputed), and nothing a pending instruction reads may be in it. The
 * graph's outputs (the loss) are never evicted: the caller holds them, and
 * rebuilding a 4-byte loss would replay the whole forward.
 *
 * need_end(t) is the last step that may read t: its last forward use, its
 * last backward use, and the last step at which an output o of a
 * recomputable op reading t may have to be rebuilt (rebuilding o reads t):
 * need_end(o) if o's storage may be evicted, else only the rebuilds of o's
 * own consumers' outputs once o has been dropped (dtr_run.c). After that
 * step t is banished: it is never needed again and leaves the evicted
 * neighbourhoods below. (Counting need_end(o) for an o that is never
 * evicted made every ancestor of the loss, which the first op's backward
 * step reads, "needed" to the end of the step, so hold mode below kept
 * every dropout's raw mask to the end.)
 *
 * Ops that cannot be recomputed. Their outputs ("fixed") are never evicted,
 * but a tensor rebuilt from one needs it resident. Two modes keep that safe:
 * hold keeps a fixed output until need_end, so everything downstream stays
 * evictable; release frees it when nothing reads it directly, as store-all
 * does, and never evicts anything downstream of it (so no rebuild can reach
 * it). Hold is what DTR wants under pressure; release never holds more than
 * store-all, so a budget at or above the store-all peak is met without
 * evicting. Graphs without fixed outputs have one mode.
 *
 * Scores (smaller is evicted first), with c(t) the FLOPs of t's producer,
 * m(t) its bytes and s(t) its staleness, the clock (op instructions run so
 * far) minus the clock of its last read or write:
 *   h_dtr  (c(t) + the sum of c over e*(t)) / (m(t) s(t)). The evicted
 *          neighbourhood e*(t) holds the evicted (produced, not resident,
 *          rebuildable, not banished) tensors reachable from t through
 *          evicted tensors upward (what rebuilding t would rebuild) and
 *          downward (what needs t to be rebuilt); each producer op counts
 *          once. The search visits every direct neighbour and at most
 *          REMAT_DTR_DFS_CAP tensors beyond, which bounds its cost where
 *          neighbourhoods are huge and the score is large anyway.
 *   eq     the paper's equivalence-class approximation h_DTR^eq: evicted
 *          tensors are joined in a union-find when one is evicted next to
 *          another; a class carries the sum of its members' costs, and e*(t)
 *          becomes the classes of t's evicted neighbours. A rebuilt or
 *          banished tensor subtracts its cost from its class, which is never
 *          split (as in the paper).
 *   local  c(t) / (m(t) s(t)).
 * A candidate's c includes its resident views' producers. Ties go to the
 * larger storage, then the lower index. Up to REMAT_DTR_SCAN_MAX (1024)
 * candidates the choice is exact; above, an instruction considers a
 * deterministic random sample of REMAT_DTR_SAMPLE (256) of them (the
 * paper's sampling), and an eviction computes at most REMAT_DTR_EXACT_MAX
 * (256) exact scores (never reached on the bundled graphs).
 *
 * The plan. DTR's heuristics are not monotone in the limit, so the strategy
 * runs the replay for each score (all three unless --dtr-score names one,
 * h_dtr first) and mode at the budget, then at limits of 95%, 90% and 80%
 * of it while the work done stays under DTR_PLAN_WORK (small graphs get
 * every run, large ones the first score), and keeps the run with the least
 * extra FLOPs that fits, then the lowest peak; the params say which. A run
 * with a step above the budget is abandoned as soon as it happens. When
 * nothing fits, smallest_fit() below looks for a limit at which DTR does
 * fit, so that the error names a budget `--strategy dtr` meets. Without a
 * budget nothing is evicted. In arena mode (--budget-mode arena) the limit still caps the
 * logical peak, the replay's static arena is what fits and better judge,
 * and the lower limits are how DTR leaves room for fragmentation.
 *
 * Cost per run: O(instructions emitted + refs), plus, per instruction that
 * must evict, a heap of the candidates considered keyed by a lower bound,
 * refined lazily to exact scores (dtr_score.c), and O(log n) per eviction.
 * A run that recomputes without end (thrashing) is abandoned (dtr_run.c).
 * Measured (user time beyond loading, best of three scores): 10^3 ops
 * 0.01-0.1 s, 10^4 ops 0.1-0.2 s at half the store-all activation peak
 * and up to ~2 s at a fifth of it, 10^5 ops 0.3-2 s at half.
 */
#include "dtr_internal.h"
#include "../util/util_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define DTR_FIXPOINT_ROUNDS 6
/* The infeasible case's search: to 1/64 of the upper end, within
 * DTR_SEARCH_FACTOR work units per tensor, op and ref (at least
 * DTR_PLAN_WORK). */
#define DTR_SEARCH_PRECISION 64u
#define DTR_SEARCH_FACTOR 256u
/* Runs beyond the first are made only while the work so far (the runs'
 * own count of candidates scored, tensors searched and instructions) is
 * under this: about a tenth of a second. */
#ifndef DTR_PLAN_WORK
#define DTR_PLAN_WORK 4000000u
#endif

static const char *const score_names[REMAT_DTR_SCORES] = {"h_dtr", "eq", "local"};

/* What the budget caps for a judged run: the logical metric, or in arena
 * mode the static arena (as plan.c's fits and better judge). */
static uint64_t judged(const remat_planner *P, const remat_eval *e)
{
    return P->o->budget_mode == REMAT_BUDGET_MODE_ARENA && P->o->budget_kind != REMAT_BUDGET_NONE ? e->arena
                                                                                                  : e->metric;
}

/* Limits tried, as fractions of the budget (the budget itself first). */
static const double limit_fractions[] = {1.0, 0.95, 0.9, 0.8};
#define N_FRACTIONS (sizeof limit_fractions / sizeof limit_fractions[0])

typedef struct {
    remat_schedule sched;
    remat_eval e;
    int have;
    remat_dtr_config c;
    uint64_t evictions, rebuilds;
} dtr_best;

/* Runs DTR once and judges the schedule by replay; keeps it in *best if it
 * is better. A run abandoned as thrashing is dropped. */
static remat_status try_run(remat_planner *P, remat_dtr_run *R, remat_dtr_config c, remat_schedule *tmp,
                            dtr_best *best)
{
    remat_replay_result r;
    remat_status st = remat__dtr_run(R, c, tmp, &r);
    if (st != REMAT_OK || R->abandoned)
        return st;
    /* The run replayed its schedule as it made it: only the static arena
     * (arena mode) needs another pass. */
    remat_eval e;
    int arena = P->o->budget_mode == REMAT_BUDGET_MODE_ARENA && P->o->budget_kind != REMAT_BUDGET_NONE;
    if (!arena)
        P->evaluations++;
    remat__eval_result(P, &r, &e);
    remat_replay_result_destroy(&r);
    if (arena && (st = remat__eval_schedule(P, tmp, &e)) != REMAT_OK)
        return st;
    if (!e.valid || e.metric != R->peak) {
        char b1[64], b2[64];
        return remat_err_set(P->err, REMAT_EINTERNAL,
                             "dtr: its simulated peak %s and the replayed one %s differ (%s schedule): the "
                             "simulation is out of step with the executor",
                             remat_format_bytes(R->peak, b1, sizeof b1), remat_format_bytes(e.metric, b2, sizeof b2),
                             e.valid ? "valid" : "invalid");
    }
    if (!best->have || remat__better(P, &e, &best->e)) {
        remat_schedule t = best->sched;
        best->sched = *tmp;
        *tmp = t;
        best->e = e;
        best->have = 1;
        best->c = c;
        best->evictions = R->evictions;
        best->rebuilds = R->rebuilds;
    }
    return REMAT_OK;
}

static remat_status parse_score(remat_planner *P, int *first, int *last)
{
    const char *name = P->o->dtr_score;
    *first = 0;
    *last = REMAT_DTR_SCORES - 1;
    if (!name || strcmp(name, "best") == 0)
        return REMAT_OK;
    for (int i = 0; i < REMAT_DTR_SCORES; i++)
        if (strcmp(name, score_names[i]) == 0) {
            *first = *last = i;
            return REMAT_OK;
        }
    return remat_err_set(P->err, REMAT_EINVAL, "dtr_score: unknown score '%s' (known: h_dtr, eq, local, best)",
                         name);
}

/* Counters of what the search did, for the params. */
typedef struct {
    uint32_t runs, probes, rounds;
    uint64_t work;
} dtr_effort;

/* Runs scores first..last in every mode at one limit, abandoning any run
 * with a step above abort_above or past work_cap (0: the thrashing guard);
 * the best completed run goes to *at. */
static remat_status run_all(remat_planner *P, remat_dtr_run *R, int first, int last, uint64_t limit,
                            uint64_t abort_above, uint64_t work_cap, remat_schedule *tmp, dtr_best *at,
                            dtr_effort *ef)
{
    remat_status st = REMAT_OK;
    for (int sc = first; sc <= last && st == REMAT_OK; sc++)
        for (int m = 0; m < (R->S->has_fixed ? 2 : 1) && st == REMAT_OK; m++) {
            remat_dtr_config c = {(remat_dtr_score)sc, m, limit, abort_above, work_cap};
            st = try_run(P, R, c, tmp, at);
            ef->work += R->work;
            ef->runs++;
        }
    return st;
}

/* Nothing fits the budget: find a limit at which DTR fits, as small as a
 * bounded search finds, so that the error names a budget dtr meets. The
 * run without a limit evicts nothing, so it fits at its own peak M0: the
 * upper end. Probes bisect between the budget and the upper end at the
 * geometric mean, each running the first score in every mode, abandoned at
 * its first step above the probe's limit (a quick "no" below the floor);
 * one that fits lowers the upper end to its peak. Probes near the floor
 * are the dear ones (DTR rebuilds much there), so all of them together get
 * DTR_SEARCH_FACTOR work units per tensor, op and ref, and one at most a
 * quarter of that (past it, it counts as a "no"): on a large graph the
 * named budget is then further above the floor, never below what dtr
 * meets. Last, run(limit = that peak) is iterated until the peak is its own
 * limit: a budget at which the first run dtr makes is that very run. */
static remat_status smallest_fit(remat_planner *P, remat_dtr_run *R, int first, uint64_t lo,
                                 remat_schedule *tmp, dtr_best *best, dtr_effort *ef)
{
    const remat_graph *g = P->a->g;
    uint64_t allowance = ((uint64_t)g->n_tensors + g->n_refs + g->n_ops) * DTR_SEARCH_FACTOR;
    if (allowance < DTR_PLAN_WORK)
        allowance = DTR_PLAN_WORK;
    dtr_best hi;
    memset(&hi, 0, sizeof hi);
    remat_schedule_init(&hi.sched);
    remat_status st = run_all(P, R, first, first, UINT64_MAX, UINT64_MAX, 0, tmp, &hi, ef);
    if (st != REMAT_OK || !hi.have) {
        remat_schedule_destroy(&hi.sched);
        return st != REMAT_OK ? st
                              : remat_err_set(P->err, REMAT_EINTERNAL, "dtr: the run without a limit did not complete");
    }
    uint64_t top = judged(P, &hi.e), spent = 0;
    if (lo < 1)
        lo = 1;
    while (st == REMAT_OK && lo < top && top - lo > top / DTR_SEARCH_PRECISION && spent < allowance) {
        uint64_t mid = remat__u64_from_double(sqrt((double)lo * (double)top));
        if (mid <= lo || mid >= top)
            mid = lo + (top - lo) / 2;
        if (mid <= lo) /* top = lo + 1: nothing lies between them */
            break;
        dtr_best at;
        memset(&at, 0, sizeof at);
        remat_schedule_init(&at.sched);
        uint64_t before = ef->work;
        /* A quarter of the allowance at most: one probe too close to the
         * floor, and abandoned, leaves room for the ones above it. */
        uint64_t cap = allowance / 4 < allowance - spent ? allowance / 4 : allowance - spent;
        st = run_all(P, R, first, first, mid, mid, cap, tmp, &at, ef);
        spent += ef->work - before + 1; /* a probe abandoned at once still counts */
        ef->probes++;
        if (st == REMAT_OK && at.have && judged(P, &at.e) <= mid) {
            remat_schedule_destroy(&hi.sched);
            hi = at;
            top = judged(P, &at.e);
        } else {
            remat_schedule_destroy(&at.sched);
            lo = mid;
        }
    }
    for (int round = 0; round < DTR_FIXPOINT_ROUNDS && st == REMAT_OK && hi.c.limit != top; round++) {
        dtr_best at;
        memset(&at, 0, sizeof at);
        remat_schedule_init(&at.sched);
        st = run_all(P, R, first, first, top, top, 0, tmp, &at, ef);
        ef->rounds++;
        if (st != REMAT_OK || !at.have || judged(P, &at.e) > top) {
            remat_schedule_destroy(&at.sched);
            break;
        }
        remat_schedule_destroy(&hi.sched);
        hi = at;
        top = judged(P, &at.e);
    }
    remat_schedule_destroy(&best->sched);
    *best = hi;
    return st;
}

/* Every limit at or below the budget (auto on small graphs, issue 20):
 * a run depends on its limit only through make_room's test "live + add >
 * limit", so it is the same run at every limit from the highest
 * high-water mark among the instructions it ran within its limit
 * (hw_pass, and for a completed run its peak, which counts the optimizer
 * step) up to its own. The next limit below that is the next different
 * run, down to a limit no first instruction fits. The set of runs at or
 * below a budget B is thus the same for every budget B' > B once B''s
 * walk reaches B (a walk from B' meets B's runs where it first passes
 * below B), so the best of them, what this returns, is non-increasing in
 * the budget: DTR's own non-monotone eviction order (tests/check_bound.c:
 * 0.51 vs 0.52 of a layered DAG's peak) stops showing in auto. Cost: one
 * run per distinct run, each abandoned at its first step above its limit;
 * DTR_EVERY_LIMIT_RUNS caps each score's walk on a pathological graph (never
 * reached on the generated and bundled graphs auto uses it on). */
#define DTR_EVERY_LIMIT_RUNS 20000u
static remat_status every_limit(remat_planner *P, remat_dtr_run *R, int first, int last, dtr_best *best,
                                dtr_effort *ef)
{
    remat_schedule tmp;
    remat_schedule_init(&tmp);
    remat_status st = REMAT_OK;
    for (int sc = first; sc <= last && st == REMAT_OK; sc++)
        for (int m = 0; m < (R->S->has_fixed ? 2 : 1) && st == REMAT_OK; m++)
            for (uint64_t limit = P->o->budget, runs = 0; st == REMAT_OK && runs < DTR_EVERY_LIMIT_RUNS; runs++) {
                remat_dtr_config c = {(remat_dtr_score)sc, m, limit, limit, 0};
                st = try_run(P, R, c, &tmp, best);
                ef->work += R->work;
                ef->runs++;
                uint64_t same_from = R->hw_pass;
                if (!R->abandoned && R->peak > same_from)
                    same_from = R->peak;
                if (st != REMAT_OK || same_from == 0 || same_from > limit)
                    break;
                limit = same_from - 1;
            }
    remat_schedule_destroy(&tmp);
    return st;
}

/* The search described above. */
static remat_status search(remat_planner *P, remat_dtr_run *R, int first, int last, dtr_best *best, dtr_effort *ef)
{
    const int budgeted = P->o->budget_kind != REMAT_BUDGET_NONE;
    const uint64_t budget = budgeted ? P->o->budget : UINT64_MAX;
    const int modes = R->S->has_fixed ? 2 : 1;
    remat_schedule tmp;
    remat_schedule_init(&tmp);
    remat_status st = REMAT_OK;
    size_t n_fr = budgeted ? N_FRACTIONS : 1;
    /* A run above the budget at any step cannot be the answer: abandoned. */
    for (size_t f = 0; f < n_fr && st == REMAT_OK; f++)
        for (int sc = first; sc <= (budgeted ? last : first) && st == REMAT_OK; sc++)
            for (int m = 0; m < modes && st == REMAT_OK; m++) {
                /* The first score runs at the budget in every mode, always. */
                if ((f > 0 || sc > first) && ef->work > DTR_PLAN_WORK)
                    goto searched;
                uint64_t limit = f == 0 ? budget : remat__u64_from_double((double)budget * limit_fractions[f]);
                remat_dtr_config c = {(remat_dtr_score)sc, m, limit, budget, 0};
                st = try_run(P, R, c, &tmp, best);
                ef->work += R->work;
                ef->runs++;
                /* A run that fits with nothing recomputed cannot be beaten. */
                if (st == REMAT_OK && budgeted && best->have && remat__fits(P, &best->e) &&
                    best->e.extra_flops == 0)
                    goto searched;
            }
searched:
    if (st == REMAT_OK && !P->fit_only && (!best->have || !remat__fits(P, &best->e)))
        st = smallest_fit(P, R, first, budget, &tmp, best, ef);
    remat_schedule_destroy(&tmp);
    return st;
}

/* Moves the winner into out, with its keep set and parameters. */
static remat_status finish(remat_planner *P, const remat_dtr_static *S, int first, int last, dtr_best *best,
                           const dtr_effort *ef, remat_plan *out)
{
    const remat_graph *g = P->a->g;
    remat_status st = remat__plan_alloc_keep(P, out);
    if (st != REMAT_OK)
        return st;
    /* keep: the activations no RECOMPUTE rebuilt (informational: the
     * schedule is the plan). */
    for (uint32_t t = 0; t < g->n_tensors; t++)
        out->keep[t] = g->tensors[t].kind == REMAT_TENSOR_ACTIVATION;
    for (size_t i = 0; i < best->sched.n; i++)
        if (best->sched.ins[i].kind == REMAT_I_RECOMPUTE) {
            const remat_op *op = &g->ops[best->sched.ins[i].arg];
            const uint32_t *o = remat_op_outputs(g, op);
            for (uint32_t j = 0; j < op->n_out; j++)
                out->keep[o[j]] = 0;
        }
    remat_schedule_destroy(&out->schedule);
    out->schedule = best->sched;
    remat_schedule_init(&best->sched);
    char lim[32], tried[64] = "";
    if (best->c.limit == UINT64_MAX)
        snprintf(lim, sizeof lim, "null");
    else
        snprintf(lim, sizeof lim, "%llu", (unsigned long long)best->c.limit);
    for (int sc = first; sc <= last; sc++)
        snprintf(tried + strlen(tried), sizeof tried - strlen(tried), "%s\"%s\"", sc > first ? ", " : "",
                 score_names[sc]);
    return remat__plan_params(P, out,
                              "{\"score\": \"%s\", \"scores_tried\": [%s], \"fixed_outputs\": \"%s\", \"limit\": %s, "
                              "\"limit_fractions\": [1, 0.95, 0.9, 0.8], \"runs\": %u, \"probes\": %u, "
                              "\"fixpoint_rounds\": %u, "
                              "\"evictions\": %llu, \"rebuilds\": %llu, \"work\": %llu, \"scan_max\": %u, "
                              "\"dfs_cap\": %u}",
                              score_names[best->c.score], tried,
                              !S->has_fixed ? "none" : best->c.release ? "release" : "hold", lim, ef->runs,
                              ef->probes, ef->rounds, (unsigned long long)best->evictions,
                              (unsigned long long)best->rebuilds, (unsigned long long)ef->work, REMAT_DTR_SCAN_MAX,
                              REMAT_DTR_DFS_CAP);
}

remat_status remat__strategy_dtr(remat_planner *P, remat_plan *out)
{
    int first, last;
    remat_status st = parse_score(P, &first, &last);
    if (st != REMAT_OK)
        return st;
    remat_dtr_static S;
    remat_dtr_run R;
    dtr_best best;
    memset(&best, 0, sizeof best);
    remat_schedule_init(&best.sched);
    memset(&R, 0, sizeof R);
    dtr_effort ef = {0, 0, 0, 0};
    st = remat__dtr_static_build(P->a, P->o, &S, P->err);
    if (st == REMAT_OK)
        st = remat__dtr_run_init(&R, &S, P->err);
    if (st == REMAT_OK)
        st = P->dtr_every_limit && P->o->budget_kind != REMAT_BUDGET_NONE ? every_limit(P, &R, first, last, &best, &ef)
                                                                         : search(P, &R, first, last, &best, &ef);
    if (st == REMAT_OK && P->fit_only && (!best.have || !remat__fits(P, &best.e)))
        st = remat_err_set(P->err, REMAT_EINFEASIBLE, "dtr: no run fits the budget");
    if (st == REMAT_OK)
        st = finish(P, &S, first, last, &best, &ef, out);
    remat_schedule_destroy(&best.sched);
    remat__dtr_run_destroy(&R);
    remat__dtr_static_destroy(&S);
    return st;
}

/*
 * chain_dp.c - an optimal dynamic program for heterogeneous chains under a
 * byte budget (after Beaumont, Eyraud-Dubois, Herrmann, Joly and Shilova,
 * "Optimal checkpointing for heterogeneous chains", 2019): the strategy
 * "chain-dp". The tables live in chain_table.c, the per-stage figures in
 * chain_profile.c, the schedule primitives in chain_emit.c.
 *
 * Stages. The chain of blocks of blocks.c (single-tensor cuts: on a DAG,
 * the chain of blocks between articulation-like cuts), less the cuts whose
 * tensor shares its storage with the next cut's (make_stages below), and
 * grouped into at most MAX_STAGES stages on long chains (coarsen). x_j is
 * the tensor entering stage j. Each stage has its own costs and bytes,
 * measured by replaying probe schedules (chain_profile.c): forward FLOPs,
 * the recompute FLOPs of each way to replay it, its output's bytes, its
 * tape's bytes, and its transient memory in every phase.
 *
 * The recurrence. C(s, t, m) is the least recompute FLOPs to run the
 * backward steps of stages s..t from a resident x_s within memory m:
 *   - tape: run stage s keeping its tape, solve (s+1, t) with m less the
 *     tape, run stage s's backward (Beaumont et al.'s "F_all" branch);
 *   - checkpoint: advance without tape to s' in (s, t], keep x_{s'}, solve
 *     (s', t) with m less x_{s'}, drop x_{s'}, solve (s, s'-1) with m (the
 *     "F_ck" branch; nested, it is multi-level recomputation, and every
 *     Revolve schedule is one of its plans);
 *   - s = t: reverse the stage from x_s, rebuilding its whole tape first
 *     (Revolve's way) or each backward step's saves just before it (the
 *     default policy's way), whichever the memory allows;
 * plus three refinements, each a plan the default keep-set policy can make
 * and the plain recurrence cannot: the stage before a checkpoint x_{s'}
 * that its backward saves may keep it through the left part (flag k)
 * rather than rebuild it; the right part may drop x_{s'} as soon as its
 * first stage is done with it when the left part rebuilds it anyway (flag
 * drop); a stage whose backward saves only its output (a ReLU) or nothing
 * (an add) runs its backward at once, without its input ("peel"). On the
 * spine that starts at
 * stage 0 nothing has run yet, so forwards there are free ("fresh"), and
 * the spine may also run everything left without a tape and replay it.
 * Costs are recompute FLOPs only: the first forward of each op is paid by
 * every plan alike.
 *
 * The memory model. m counts free bytes, in slots of `step` bytes, over
 * the resident leaves and the ledger's extras, net of everything that
 * enclosing solves hold, and as if no gradient existed: each requirement
 * adds the gradient load G(j) of the moment it applies to (activation
 * gradients, and parameter gradients under --budget, grow in the fixed
 * backward order, so G depends on the stage alone). With gradients taken
 * out, the left part of a split gets exactly its parent's m, as in
 * Beaumont et al. Every size rounds up and the available memory rounds
 * down, so a plan fits in the model only if it fits in the replay, as long
 * as the stages' figures compose; the replay decides either way.
 *
 * Discretization. step = --dp-step bytes, or floor(available / slots) with
 * slots = --dp-slots, or by default 256, or more on short chains (up to
 * 4096, as far as a 16 MiB table and about 0.1 s of work allow: finer steps
 * round less). By default, too, when every figure of the profile
 * is a multiple of one step that gives at most EXACT_LEVELS levels (and
 * bounded work), that step is used: it rounds nothing, so the program is
 * exact. The tables extend a quarter beyond the budget's level, because
 * the rounding is conservative.
 *
 * The search. Keeping every tape recomputes nothing: if it fits, it is the
 * plan. Otherwise the tables' distinct cost levels are replayed, the
 * budget's own level first, then by binary search for the cheapest level
 * whose replayed metric fits; checkpointing every boundary, and Revolve's
 * plan on the block chain when stages merged cuts, are candidates too.
 * If nothing fits, the plan of least memory in the family is returned, so
 * that remat_plan_make names the smallest budget chain-dp meets, and
 * planning at that budget returns that very plan.
 *
 * Cost: O(n^3 W / 6) time and O(n^2 W) memory for n stages and W memory
 * levels (W = 1.25 x slots), pruned (chain_table.c); measured on random
 * chains at the default 256 slots: 0.05 s at 100 stages, 0.9 s at 200
 * (hence MAX_STAGES), then the probes and replays grow linearly with the
 * graph.
 */
#include "chain.h"
#include "../util/util_internal.h"

#include <string.h>

#define DEFAULT_SLOTS 256       /* memory levels the budget gives by default, at least */
#define MAX_DEFAULT_SLOTS 4096  /* and at most, on short chains */
#define TABLE_BUDGET (1u << 21) /* table entries the default aims at (16 MiB) */
#define WORK_BUDGET 100000000ULL /* and table work (about 0.1 s) */
#define MAX_STAGES 128 /* more blocks are grouped into this many stages (cubic time) */
#define MAX_LEVELS (1 << 16) /* memory levels of one table row */
#define EXACT_LEVELS 4096    /* the most levels an exact step may give by default */
#define EXACT_WORK 200000000ULL /* and the most table work it may cost (about 0.2 s) */

/* ---- the strategy --------------------------------------------------------- */

typedef struct {
    remat_planner *P;
    const remat_blocks *st;
    const remat_chain_profile *pr;
    remat_eval best;
    int have;
    const char *how;      /* "dp", "store-tapes", "checkpoint-all", "revolve", "min-memory" */
    int32_t level;        /* the table level of the best plan (dp) */
    uint64_t predicted;   /* the table's cost at that level */
    remat_schedule sched; /* the best plan's schedule */
} search;

/* Replays s; makes it the best candidate when it is better. */
static remat_status offer(search *S, remat_schedule *s, const char *how, int32_t level, uint64_t predicted,
                          remat_eval *e)
{
    remat_status st = remat__eval_schedule(S->P, s, e);
    if (st != REMAT_OK)
        return st;
    if (!e->valid) /* the builder makes legal schedules: this is a bug */
        return remat_err_set(S->P->err, REMAT_EINTERNAL, "chain-dp: its %s plan does not replay", how);
    if (!S->have || remat__better(S->P, e, &S->best)) {
        remat_schedule tmp = S->sched;
        S->sched = *s;
        *s = tmp;
        S->best = *e;
        S->have = 1;
        S->how = how;
        S->level = level;
        S->predicted = predicted;
    }
    return REMAT_OK;
}

/* The table's distinct cost levels: bp[i] is the smallest m of the i-th,
 * ascending in m (so descending in cost). Returns their number. */
static int32_t levels(const remat_chain_dp *D, int32_t fin, int32_t *bp)
{
    const uint64_t *f = remat__chain_dp_top(D);
    int32_t nb = 0;
    uint64_t prev = REMAT_CHAIN_INF;
    for (int32_t m = fin < 0 ? 0 : fin; m < D->W; m++)
        if (f[m] != REMAT_CHAIN_INF && f[m] != prev) {
            bp[nb++] = m;
            prev = f[m];
        }
    return nb;
}

/* Tries the DP's plans: the level of the budget first, then a binary
 * search for the cheapest level whose replay fits. */
static remat_status try_levels(search *S, const remat_chain_dp *D, int32_t M0, int32_t *bp, int32_t nb)
{
    remat_planner *P = S->P;
    remat_schedule s;
    remat_schedule_init(&s);
    remat_status st = REMAT_OK;
    const uint64_t *f = remat__chain_dp_top(D);
    int32_t i0 = -1;
    for (int32_t i = 0; i < nb; i++)
        if (bp[i] <= M0)
            i0 = i;
    /* fits(i) for the invariant: lo fits (or is -1), hi+1 does not. */
    int32_t lo = -1, hi = nb - 1;
    if (i0 >= 0) {
        remat_eval e;
        remat_schedule_clear(&s);
        if ((st = remat__chain_dp_schedule(P->a, S->st, D, bp[i0], &s, P->err)) == REMAT_OK &&
            (st = offer(S, &s, "dp", bp[i0], f[bp[i0]], &e)) == REMAT_OK) {
            if (remat__fits(P, &e))
                lo = i0;
            else
                hi = i0 - 1;
        }
    }
    while (st == REMAT_OK && lo < hi) {
        int32_t mid = lo + (hi - lo + 1) / 2;
        remat_eval e;
        remat_schedule_clear(&s);
        if ((st = remat__chain_dp_schedule(P->a, S->st, D, bp[mid], &s, P->err)) != REMAT_OK ||
            (st = offer(S, &s, "dp", bp[mid], f[bp[mid]], &e)) != REMAT_OK)
            break;
        if (remat__fits(P, &e))
            lo = mid;
        else
            hi = mid - 1;
    }
    remat_schedule_destroy(&s);
    return st;
}

/* Fills the tables for a budget of `avail` bytes over the base. */
static remat_status plan_for(remat_planner *P, const remat_chain_profile *pr, uint64_t avail, remat_chain_dp *D,
                             int32_t *M0, uint64_t *q_out)
{
    const remat_plan_options *o = P->o;
    uint64_t n = pr->n, slots = o->dp_slots;
    if (!slots) {
        /* Short chains can afford finer steps, which round less: as many
         * levels as a small table and little work allow, 256 to 4096. */
        uint64_t rows = n * (n + 1) + 2 * n, work = n * n * n / 6 + 1;
        slots = TABLE_BUDGET / rows < WORK_BUDGET / work ? TABLE_BUDGET / rows : WORK_BUDGET / work;
        slots = slots * 4 / 5;
        slots = slots < DEFAULT_SLOTS ? DEFAULT_SLOTS : slots > MAX_DEFAULT_SLOTS ? MAX_DEFAULT_SLOTS : slots;
    }
    uint64_t q = o->dp_step ? o->dp_step : avail / slots;
    /* When every figure is a multiple of one step that still gives few
     * levels, that step rounds nothing: the program is exact. */
    uint64_t g = remat__chain_profile_gcd(pr);
    if (!o->dp_step && !o->dp_slots && g > 0 && avail / g <= EXACT_LEVELS &&
        n * n * n / 6 * (avail / g + avail / g / 4 + 2) <= EXACT_WORK)
        q = g;
    if (q == 0)
        q = 1;
    uint64_t m0 = avail / q;
    uint64_t w = m0 + m0 / 4 + 2;
    if (w > MAX_LEVELS) {
        char b[64];
        return remat_err_set(P->err, REMAT_EINVAL,
                             "chain-dp: a step of %s gives %llu memory levels, more than %d; use a larger dp_step "
                             "or fewer dp_slots",
                             remat_format_bytes(q, b, sizeof b), (unsigned long long)w, MAX_LEVELS);
    }
    *M0 = (int32_t)m0;
    *q_out = q;
    return remat__chain_dp_fill(pr, q, (int32_t)w, D, P->err);
}

/* The stages: the block chain, less every cut whose tensor shares its
 * storage with the next cut's (the next is a view of it, or the same tensor
 * passing through a block that does not read it). The profile measures
 * each stage's figures as its own, which holds only if freeing a stage's
 * input frees its bytes: with two cuts on one storage it would not, and
 * two checkpoints there would hold the bytes once. The last cut of such a
 * run stays, so that reversing what follows it can free the storage (a
 * loss reading reshaped logits drops them). Returns the cuts removed. */
static remat_status make_stages(const remat_analysis *a, const remat_blocks *bl, remat_blocks *st, uint32_t *merged,
                                remat_err *err)
{
    const remat_graph *g = a->g;
    memset(st, 0, sizeof *st);
    st->start = remat__array((size_t)bl->n + 1, sizeof *st->start);
    st->in = remat__array((size_t)bl->n + 1, sizeof *st->in);
    if (!st->start || !st->in) {
        remat__blocks_destroy(st);
        return remat_err_set(err, REMAT_ENOMEM, "out of memory planning");
    }
    uint32_t n = 0;
    *merged = 0;
    st->start[0] = 0;
    st->in[0] = bl->in[0];
    for (uint32_t j = 1; j < bl->n; j++) {
        uint32_t x = bl->in[j], y = j + 1 < bl->n ? bl->in[j + 1] : REMAT_NONE;
        if (x != REMAT_NONE && y != REMAT_NONE && g->tensors[x].storage == g->tensors[y].storage) {
            (*merged)++;
            continue;
        }
        n++;
        st->start[n] = bl->start[j];
        st->in[n] = x;
    }
    st->n = n + 1;
    st->start[st->n] = bl->start[bl->n];
    st->in[st->n] = REMAT_NONE;
    return REMAT_OK;
}

/* Keeps at most `max` stages: about every (n / max)-th cut, each moved to
 * the cut with the smallest tensor within half a group of its place
 * (cheap checkpoints make good group boundaries). In place; returns the
 * cuts removed. O(n). */
static uint32_t coarsen(const remat_analysis *a, remat_blocks *st, uint32_t max)
{
    const remat_graph *g = a->g;
    const uint32_t n = st->n;
    if (n <= max)
        return 0;
    uint32_t q = 0, last = 0, half = (n / max) / 2;
    for (uint32_t k = 1; k < max; k++) {
        uint32_t target = (uint32_t)((uint64_t)k * n / max);
        uint32_t lo = target > half ? target - half : 1, hi = target + half < n ? target + half : n - 1;
        if (lo <= last)
            lo = last + 1;
        if (lo > hi)
            continue;
        uint32_t best = lo;
        uint64_t bb = UINT64_MAX;
        for (uint32_t j = lo; j <= hi; j++) {
            uint64_t b = st->in[j] == REMAT_NONE ? 0 : g->tensors[g->tensors[st->in[j]].storage].bytes;
            uint32_t d = j > target ? j - target : target - j, bd = best > target ? best - target : target - best;
            if (b < bb || (b == bb && d < bd)) {
                bb = b;
                best = j;
            }
        }
        last = best;
        q++;
        st->start[q] = st->start[best];
        st->in[q] = st->in[best];
    }
    st->start[q + 1] = st->start[n];
    st->in[q + 1] = REMAT_NONE;
    st->n = q + 1;
    return n - st->n;
}

/* Revolve's schedule on the block chain, with the slot count the revolve
 * strategy picks (remat__revolve_search): offered when the stages merged or
 * coarsened the block chain's cuts, because Revolve's schedules belong to
 * the family on that finer chain. The search's lower bound on slots matters
 * here: searching down to one slot on a 30000-block chain once took 35 s
 * and 7 GB at an infeasible budget. */
static remat_status offer_revolve(search *S, const remat_blocks *bl)
{
    remat_planner *P = S->P;
    uint64_t slots = 1;
    remat_status st = remat__revolve_search(P, bl, &slots);
    if (st != REMAT_OK)
        return st;
    remat_schedule s;
    remat_schedule_init(&s);
    remat_eval e;
    if ((st = remat__revolve_schedule(P->a, bl, slots, &s, NULL, P->err)) == REMAT_OK)
        st = offer(S, &s, "revolve", -1, 0, &e);
    remat_schedule_destroy(&s);
    return st;
}

/* Records, for the plan's keep set, the activations the schedule never
 * rebuilds. */
static void keep_from_schedule(const remat_graph *g, const remat_schedule *s, uint8_t *keep)
{
    for (uint32_t t = 0; t < g->n_tensors; t++)
        keep[t] = g->tensors[t].kind == REMAT_TENSOR_ACTIVATION;
    for (size_t i = 0; i < s->n; i++)
        if (s->ins[i].kind == REMAT_I_RECOMPUTE) {
            const remat_op *op = &g->ops[s->ins[i].arg];
            const uint32_t *out = remat_op_outputs(g, op);
            for (uint32_t q = 0; q < op->n_out; q++)
                keep[out[q]] = 0;
        }
}

remat_status remat__strategy_chain_dp(remat_planner *P, remat_plan *out)
{
    const remat_analysis *a = P->a;
    remat_blocks bl, stg;
    remat_chain_profile pr;
    memset(&pr, 0, sizeof pr);
    search S;
    memset(&S, 0, sizeof S);
    S.P = P;
    S.st = &stg;
    memset(&stg, 0, sizeof stg);
    uint32_t merged = 0, coarse = 0;
    S.pr = &pr;
    S.level = -1;
    remat_schedule_init(&S.sched);
    remat_chain_dp D;
    memset(&D, 0, sizeof D);
    int32_t *bp = NULL;
    uint64_t q = 0, evals0 = P->evaluations;
    int32_t M0 = 0;
    remat_eval e;
    remat_schedule s;
    remat_schedule_init(&s);
    remat_status st = remat__blocks_build(a, &bl, P->err);
    if (st != REMAT_OK) {
        remat_schedule_destroy(&S.sched);
        return st;
    }
    if ((st = remat__plan_alloc_keep(P, out)) != REMAT_OK ||
        (st = make_stages(a, &bl, &stg, &merged, P->err)) != REMAT_OK)
        goto done;
    coarse = coarsen(a, &stg, MAX_STAGES);
    merged += coarse;
    if ((st = remat__chain_profile_build(P, &stg, &pr)) != REMAT_OK)
        goto done;
    /* Keeping every tape recomputes nothing: the plan to beat. */
    st = remat__chain_probe_schedule(a, &stg, pr.nr, 1, &s, P->err);
    if (st == REMAT_OK)
        st = offer(&S, &s, "store-tapes", -1, 0, &e);
    remat_schedule_clear(&s);
    if (st == REMAT_OK && !remat__fits(P, &S.best)) {
        uint64_t budget = P->o->budget, avail = budget > pr.base ? budget - pr.base : 0;
        if ((st = plan_for(P, &pr, avail, &D, &M0, &q)) == REMAT_OK &&
            !(bp = remat__array((size_t)D.W + 1, sizeof *bp)))
            st = remat_err_set(P->err, REMAT_ENOMEM, "out of memory planning");
        if (st == REMAT_OK) {
            int32_t nb = levels(&D, remat__chain_slots(&D, pr.fin), bp);
            st = try_levels(&S, &D, M0, bp, nb);
        }
        if (st == REMAT_OK && remat__better(P, &pr.ckpt_all, &S.best)) {
            /* Checkpointing every boundary is in the family; the tables'
             * rounding may have hidden it. */
            remat_schedule_clear(&s);
            if ((st = remat__chain_probe_schedule(a, &stg, pr.nr, 0, &s, P->err)) == REMAT_OK)
                st = offer(&S, &s, "checkpoint-all", -1, 0, &e);
        }
        if (st == REMAT_OK && merged && (!remat__fits(P, &S.best) || S.best.extra_flops > 0))
            st = offer_revolve(&S, &bl);
        if (st == REMAT_OK && !remat__fits(P, &S.best)) {
            /* Nothing fits: find the plan of least memory, planning for a
             * budget every plan of the family could meet, so that the
             * error names the least budget chain-dp meets (and planning at
             * that budget finds this very plan). */
            remat__chain_dp_destroy(&D);
            uint64_t hi = pr.ckpt_all.metric > pr.base ? pr.ckpt_all.metric - pr.base : 0;
            remat_plan_options o2 = *P->o;
            o2.dp_step = 0;
            const remat_plan_options *keep_o = P->o;
            P->o = &o2;
            int32_t M1;
            uint64_t q1;
            st = plan_for(P, &pr, hi, &D, &M1, &q1);
            P->o = keep_o;
            remat__free(bp);
            if (st == REMAT_OK && !(bp = remat__array((size_t)D.W + 1, sizeof *bp)))
                st = remat_err_set(P->err, REMAT_ENOMEM, "out of memory planning");
            if (st == REMAT_OK) {
                int32_t nb = levels(&D, remat__chain_slots(&D, pr.fin), bp);
                remat_schedule_clear(&s);
                if (nb > 0 && (st = remat__chain_dp_schedule(a, &stg, &D, bp[0], &s, P->err)) == REMAT_OK)
                    st = offer(&S, &s, "min-memory", bp[0], remat__chain_dp_top(&D)[bp[0]], &e);
            }
        }
    }
    if (st == REMAT_OK) {
        /* Hand the best schedule to the plan. */
        remat_schedule tmp = out->schedule;
        out->schedule = S.sched;
        S.sched = tmp;
        keep_from_schedule(a->g, &out->schedule, out->keep);
        st = remat__plan_params(P, out,
                                "{\"plan\": \"%s\", \"stages\": %u, \"blocks\": %u, \"merged_cuts\": %u, "
                                "\"coarsened\": %s, \"slots\": %d, \"step_bytes\": %llu, \"level\": %d, "
                                "\"dp_states\": %llu, \"predicted_extra_flops\": %llu, \"probe_replays\": %u, "
                                "\"replays\": %llu}",
                                S.how, pr.n, bl.n, merged, coarse ? "true" : "false", q ? M0 : 0, (unsigned long long)q,
                                S.level,
                                (unsigned long long)D.entries, (unsigned long long)S.predicted, pr.replays,
                                (unsigned long long)(P->evaluations - evals0));
    }
done:
    remat_schedule_destroy(&s);
    remat__free(bp);
    remat__chain_dp_destroy(&D);
    remat_schedule_destroy(&S.sched);
    remat__chain_profile_destroy(&pr);
    remat__blocks_destroy(&stg);
    remat__blocks_destroy(&bl);
    return st;
}

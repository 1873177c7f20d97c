/*
 * auto_search.c - auto's local search (auto.c calls it at every ladder
 * point): one activation at a time, keep <-> recompute, a flip kept when the
 * replay says the plan is better.
 *
 * Each flip is judged by the delta replay (src/exec/replay_delta.c) from
 * the current plan's schedule, which replays only the part of the step the
 * flip changes and gives the full replay's figures; flips that cannot be
 * better are not replayed at all: once the plan fits, dropping a tensor
 * whose producer the schedule does not already recompute only adds FLOPs,
 * a schedule that recomputes more FLOPs than a fitting plan is rejected
 * from its instructions, and keeping a tensor that surely overflows the
 * forward pass is skipped. The work (in replayed instructions, the
 * schedule's build counting a third of its length) stops the search where
 * auto's shared budget says, so the search, and auto, depend on the graph
 * and the budget only.
 */
#include "auto_internal.h"
#include "../exec/replay_cursor.h"
#include "../util/util_internal.h"

#include <string.h>

/* Marks in rec the ops that schedule s recomputes. */
static void mark_recomputed(const remat_graph *g, const remat_schedule *s, uint8_t *rec)
{
    memset(rec, 0, g->n_ops ? g->n_ops : 1);
    for (size_t i = 0; i < s->n; i++)
        if (s->ins[i].kind == REMAT_I_RECOMPUTE)
            rec[s->ins[i].arg] = 1;
}

/* The current plan's high-water mark (the budget's metric) at each FWD,
 * from the one replay's observer, as a suffix maximum over forward
 * positions: fwd_tail[i] = the most any FWD from position i on reaches. */
typedef struct {
    const remat_analysis *a;
    remat_budget_kind kind;
    uint64_t *fwd_tail;
    uint32_t seen;
} tail_obs;

static int tail_step(void *ctx, size_t index, remat_instr in, uint64_t live_after, uint64_t high_water,
                     const uint64_t *hw_by_category)
{
    tail_obs *o = ctx;
    (void)index;
    (void)live_after;
    if (in.kind != REMAT_I_FWD || o->seen >= o->a->g->n_ops)
        return 0;
    uint64_t m = high_water;
    if (o->kind == REMAT_BUDGET_ACTIVATION) {
        m = 0;
        for (int c = 0; c < REMAT_CAT_COUNT; c++)
            if (remat_category_is_activation((remat_category)c))
                m += hw_by_category[c];
    }
    o->fwd_tail[o->seen++] = m;
    return 0;
}

/* The suffix maximum of fwd_tail[0..n), in place. */
static void suffix_max(uint64_t *fwd_tail, uint32_t n)
{
    for (uint32_t i = n; i-- > 1;)
        if (fwd_tail[i] > fwd_tail[i - 1])
            fwd_tail[i - 1] = fwd_tail[i];
}

static remat_status forward_tail(remat_planner *Q, const remat_schedule *s, uint64_t *fwd_tail)
{
    const uint32_t n = Q->a->g->n_ops;
    tail_obs o = {Q->a, Q->o->budget_kind, fwd_tail, 0};
    remat_replay_observer obs = {&o, NULL, NULL, tail_step};
    remat_replay_result r;
    remat_err local;
    remat_err_init(&local);
    remat_status st = remat_replay(Q->a, s, &Q->o->extras, &obs, &r, &local);
    if (st != REMAT_OK)
        return remat_err_set(Q->err, st, "auto: %s", local.msg);
    remat_replay_result_destroy(&r);
    if (o.seen != n) /* not a plain schedule: no filter */
        for (uint32_t i = 0; i < n; i++)
            fwd_tail[i] = 0;
    suffix_max(fwd_tail, n);
    return REMAT_OK;
}

/* forward_tail from the delta replay's marks of its base s (the replay it
 * already made), or from a replay of its own when there are none. */
static remat_status current_tail(remat_planner *Q, remat__delta *D, const remat_schedule *s, uint64_t *fwd_tail)
{
    if (Q->o->extras.sharding) { /* the observer would see collectives too: no filter */
        for (uint32_t i = 0; i < Q->a->g->n_ops; i++)
            fwd_tail[i] = 0;
        return REMAT_OK;
    }
    const uint64_t *marks = D ? remat__delta_marks(D, Q->o->budget_kind == REMAT_BUDGET_ACTIVATION) : NULL;
    if (!marks)
        return forward_tail(Q, s, fwd_tail);
    const uint32_t n = Q->a->g->n_ops;
    uint32_t seen = 0;
    for (size_t i = 0; i < s->n && seen < n; i++)
        if (s->ins[i].kind == REMAT_I_FWD)
            fwd_tail[seen++] = marks[i];
    if (seen != n) /* not a plain schedule: no filter */
        for (uint32_t i = 0; i < n; i++)
            fwd_tail[i] = 0;
    suffix_max(fwd_tail, n);
    return REMAT_OK;
}

/* Whether keeping t (now recomputed) surely overflows the budget: after its
 * last forward read the forward pass runs as before with t resident, so
 * every later FWD's high-water mark grows by t's bytes. The exception, a
 * kept input of t's producer that only t's recomputation holds in memory
 * (it is then freed in forward instead), is not filtered. */
static int keep_overflows(const remat_planner *Q, const uint8_t *keep, const uint64_t *fwd_tail, uint32_t t)
{
    const remat_analysis *a = Q->a;
    const remat_graph *g = a->g;
    const remat_tensor *T = &g->tensors[t];
    if (T->storage != t || a->life[t].last_bwd_use == REMAT_NONE || a->is_output[t])
        return 0;
    uint32_t from = a->life[t].last_fwd_use == REMAT_NONE ? a->life[t].birth + 1 : a->life[t].last_fwd_use + 1;
    if (from >= g->n_ops)
        return 0;
    const remat_op *op = &g->ops[T->producer];
    const uint32_t *in = remat_op_inputs(g, op);
    for (uint32_t i = 0; i < op->n_in; i++)
        if (g->tensors[in[i]].kind == REMAT_TENSOR_ACTIVATION && keep[in[i]] &&
            a->life[in[i]].last_bwd_use == REMAT_NONE)
            return 0;
    return fwd_tail[from] > Q->o->budget || T->bytes > Q->o->budget - fwd_tail[from];
}

/* A delta replay's figures as the planners' judgement: what
 * remat__eval_schedule gives in logical mode (the delta replay is used
 * only there: arena mode judges the static arena of a whole replay). */
static void delta_judged(const remat_planner *Q, const remat__delta_figures *f, remat_eval *e)
{
    memset(e, 0, sizeof *e);
    e->valid = f->valid;
    e->peak = f->peak_bytes;
    e->metric = Q->o->budget_kind == REMAT_BUDGET_ACTIVATION ? f->activation_peak : f->peak_bytes;
    e->extra_flops = f->flops_recompute;
}

/* Judges a flipped keep set against the current plan: builds its schedule
 * (the default policy) and, when the current plan fits and the new
 * schedule recomputes more FLOPs, stops there (*worse = 1: it cannot be
 * better, since fitting plans are judged by FLOPs first); otherwise the
 * one replay judges it (*worse = 0, e filled): in logical mode the delta
 * replay D from the current plan's schedule, which replays only the window
 * the flip changed. *work: what it cost, in replayed instructions (building
 * the schedule counts a third of its length, as before). */
static remat_status flip_eval(remat_planner *Q, remat__policy *pol, remat__delta *D, const uint8_t *keep,
                              const remat_eval *cur, remat_eval *e, int *worse, uint64_t *work)
{
    remat_err local;
    remat_err_init(&local);
    memset(e, 0, sizeof *e);
    *worse = 0;
    /* The incremental build gives the whole build's schedule; its work
     * still counts as the whole build's, so the search stops where it
     * always did and the plan does not depend on how it was built. */
    remat_status st = remat__policy_build(pol, keep, &Q->scratch, &local);
    *work = Q->scratch.n / 3;
    if (st == REMAT_EINFEASIBLE) {
        *worse = 1;
        return REMAT_OK;
    }
    if (st != REMAT_OK)
        return remat_err_set(Q->err, st, "%s", local.msg);
    if (remat__fits(Q, cur) && remat__schedule_extra_flops(Q->a->g, &Q->scratch) > cur->extra_flops) {
        *worse = 1;
        return REMAT_OK;
    }
    if (!D) {
        *work += Q->scratch.n;
        return remat__eval_schedule(Q, &Q->scratch, e);
    }
    remat__delta_figures f;
    Q->evaluations++;
    if ((st = remat__delta_eval(D, &Q->scratch, &f, &local)) != REMAT_OK)
        return remat_err_set(Q->err, st, "%s", local.msg);
    /* The units of the whole replay it stands for (a third for the
     * build, two for the replay): the search's work means what it meant. */
    *work += f.work * 2 / 3;
    delta_judged(Q, &f, e);
    return REMAT_OK;
}

/* order[] = tensor ids by their producer's FLOPs, descending, ties by id:
 * a stable bottom-up merge sort (qsort has no context argument). */
static void sort_by_flops(const remat_graph *g, uint32_t *order)
{
    const uint32_t n = g->n_tensors;
    for (uint32_t t = 0; t < n; t++)
        order[t] = t;
    uint32_t *tmp = remat__array(n ? n : 1, sizeof *tmp);
    if (!tmp)
        return; /* id order: still every candidate */
    for (uint32_t w = 1; w < n; w *= 2) {
        for (uint32_t lo = 0; lo < n; lo += 2 * w) {
            uint32_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            uint32_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                uint32_t pi = g->tensors[order[i]].producer, pj = g->tensors[order[j]].producer;
                uint64_t fi = pi == REMAT_NONE ? 0 : g->ops[pi].flops, fj = pj == REMAT_NONE ? 0 : g->ops[pj].flops;
                tmp[k++] = fj > fi ? order[j++] : order[i++];
            }
            while (i < mid)
                tmp[k++] = order[i++];
            while (j < hi)
                tmp[k++] = order[j++];
        }
        memcpy(order, tmp, (size_t)n * sizeof *order);
    }
    remat__free(tmp);
}

/* One activation at a time: recompute a kept one (to save memory), keep a
 * recomputed one (to save FLOPs); a flip stays when the replay of the new
 * keep set's schedule says it is better. Flips that cannot be better are
 * not replayed: once the plan fits, dropping a tensor whose producer the
 * schedule does not already recompute adds that producer's recomputation,
 * so it never lowers the extra FLOPs, and the order judges fitting plans by
 * FLOPs first. Stops when S->work passes work_until. */
struct remat__search_ctx {
    remat__delta *D;     /* NULL in arena mode */
    remat__policy *pol;
    uint32_t *order;     /* tensor ids by their producer's FLOPs, the most first */
    int have_base;       /* pol has a base (a search ran) */
};

void remat__auto_search_release(remat__search_stats *S)
{
    if (!S->ctx)
        return;
    remat__delta_destroy(S->ctx->D);
    remat__policy_destroy(S->ctx->pol);
    remat__free(S->ctx->order);
    remat__free(S->ctx);
    S->ctx = NULL;
}

/* S->ctx for Q, made on the first search. Every search of one auto run
 * has the same graph, extras and budget mode (only the budget moves along
 * the ladder), so one delta replay and one policy serve them all, and each
 * search's first base is an edit of the last one's. */
static remat_status search_ctx(remat_planner *Q, remat__search_stats *S)
{
    if (S->ctx)
        return REMAT_OK;
    const remat_graph *g = Q->a->g;
    struct remat__search_ctx *c = remat__calloc(1, sizeof *c);
    if (!c)
        return remat_err_set(Q->err, REMAT_ENOMEM, "out of memory planning");
    S->ctx = c;
    /* Candidates by their producer's FLOPs, the most first: the flips
     * that can save the most are tried while work remains. */
    c->order = remat__array(g->n_tensors ? g->n_tensors : 1, sizeof *c->order);
    if (!c->order)
        return remat_err_set(Q->err, REMAT_ENOMEM, "out of memory planning");
    sort_by_flops(g, c->order);
    remat_err local;
    remat_err_init(&local);
    remat_status st;
    /* Flips are judged by the delta replay from the current plan's
     * schedule (logical mode; arena mode replays whole, see delta_judged). */
    if (Q->o->budget_mode != REMAT_BUDGET_MODE_ARENA &&
        (st = remat__delta_create(Q->a, &Q->o->extras, &c->D, &local)) != REMAT_OK)
        return remat_err_set(Q->err, st, "auto: %s", local.msg);
    if ((st = remat__policy_create(Q->a, &c->pol, &local)) != REMAT_OK)
        return remat_err_set(Q->err, st, "auto: %s", local.msg);
    return REMAT_OK;
}

remat_status remat__auto_local_search(remat_planner *Q, uint8_t *keep, remat_eval *cur, uint32_t *flips,
                                      uint64_t work_until, remat__search_stats *S)
{
    const remat_graph *g = Q->a->g;
    remat_status st = REMAT_OK;
    int improved = 1;
    *flips = 0;
    if ((st = search_ctx(Q, S)) != REMAT_OK)
        return st;
    uint8_t *rec = remat__calloc(g->n_ops ? g->n_ops : 1, 1);
    uint64_t *tail = remat__calloc(g->n_ops ? g->n_ops : 1, sizeof *tail);
    if (!rec || !tail) {
        remat__free(rec);
        remat__free(tail);
        return remat_err_set(Q->err, REMAT_ENOMEM, "out of memory planning");
    }
    const uint32_t *order = S->ctx->order;
    remat__delta *D = S->ctx->D;
    remat__policy *pol = S->ctx->pol;
    remat__delta_figures df;
    remat_err local;
    remat_err_init(&local);
    /* The current plan's recomputed ops and forward profile; its schedule
     * is the incremental builds' base (built as an edit of the last
     * search's base, which is the whole build's schedule all the same). */
    remat_status bst = S->ctx->have_base ? remat__policy_build(pol, keep, &Q->scratch, &local)
                                         : remat__policy_base(pol, keep, &Q->scratch, &local);
    if (bst == REMAT_OK && S->ctx->have_base)
        bst = remat__policy_adopt(pol, &Q->scratch, &local);
    S->ctx->have_base = bst == REMAT_OK;
    if (bst == REMAT_OK) {
        mark_recomputed(g, &Q->scratch, rec);
        if (D && (st = remat__delta_base(D, &Q->scratch, &df, &local)) != REMAT_OK)
            st = remat_err_set(Q->err, st, "auto: %s", local.msg);
        if (st == REMAT_OK)
            st = current_tail(Q, D, &Q->scratch, tail);
    }
    while (improved && st == REMAT_OK) {
        improved = 0;
        for (uint32_t it = 0; it < g->n_tensors && st == REMAT_OK; it++) {
            const uint32_t t = order[it];
            const remat_tensor *T = &g->tensors[t];
            if (T->kind != REMAT_TENSOR_ACTIVATION || !g->ops[T->producer].recomputable)
                continue;
            /* A tensor no backward step saves and nothing reads is freed
             * after forward whatever keep says: flipping it is moot. */
            if (Q->a->life[t].last_bwd_use == REMAT_NONE && Q->a->cons_off[t + 1] == Q->a->cons_off[t])
                continue;
            if (keep[t] && remat__fits(Q, cur) && g->ops[T->producer].flops > 0 && !rec[T->producer] &&
                Q->a->life[t].last_bwd_use != REMAT_NONE) {
                S->skipped++;
                continue;
            }
            if (!keep[t] && remat__fits(Q, cur) && Q->o->budget_kind != REMAT_BUDGET_NONE &&
                keep_overflows(Q, keep, tail, t)) {
                S->skipped++;
                continue;
            }
            if (S->work > work_until)
                goto out;
            keep[t] ^= 1;
            remat_eval e;
            int worse = 0;
            uint64_t w = 0;
            st = flip_eval(Q, pol, D, keep, cur, &e, &worse, &w);
            S->work += w;
            S->evals++;
            S->replays += !worse;
            if (st == REMAT_OK && !worse && remat__better(Q, &e, cur)) {
                *cur = e;
                improved = 1;
                (*flips)++;
                /* The flip's schedule (in Q->scratch) becomes the base. */
                if ((st = remat__policy_adopt(pol, &Q->scratch, &local)) != REMAT_OK)
                    st = remat_err_set(Q->err, st, "auto: %s", local.msg);
                mark_recomputed(g, &Q->scratch, rec);
                /* The new base's replay is the one forward_tail made
                 * before (uncounted then); its snapshots are new work. */
                if (D && st == REMAT_OK) {
                    if ((st = remat__delta_base(D, &Q->scratch, &df, &local)) != REMAT_OK)
                        st = remat_err_set(Q->err, st, "auto: %s", local.msg);
                    S->work += (df.work - Q->scratch.n) * 2 / 3;
                }
                if (st == REMAT_OK)
                    st = current_tail(Q, D, &Q->scratch, tail);
            } else {
                keep[t] ^= 1;
            }
        }
    }
out:
    remat__free(rec);
    remat__free(tail);
    return st;
}

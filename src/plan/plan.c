/*
 * plan.c - the strategy table, candidate evaluation, and the one exit
 * through which every plan leaves: replayed, checked against the budget.
 */
#include "planner.h"
#include "probe.h"
#include "remat/alloc.h"
#include "../util/util_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define REMAT__INFO(name, fn, summary, options, flags, auto_rank, warm_rank) \
    {name, summary, options, flags, auto_rank, warm_rank},
static const remat_strategy_info infos[] = {REMAT__STRATEGIES(REMAT__INFO)};
#undef REMAT__INFO
#define REMAT__FN(name, fn, summary, options, flags, auto_rank, warm_rank) fn,
static const remat_strategy_fn fns[] = {REMAT__STRATEGIES(REMAT__FN)};
#undef REMAT__FN
#define N_STRATEGIES (sizeof infos / sizeof infos[0])

remat_strategy_fn remat__strategy_lookup(const char *name)
{
    for (size_t i = 0; i < N_STRATEGIES; i++)
        if (strcmp(infos[i].name, name) == 0)
            return fns[i];
    return NULL;
}

const remat_strategy_info *remat_plan_strategies(size_t *n)
{
    *n = N_STRATEGIES;
    return infos;
}

size_t remat__strategies_ranked(int warm, const remat_strategy_info **out, size_t cap)
{
    size_t n = 0;
    /* Ranks are small and distinct within each order: one pass per rank. */
    for (unsigned r = 1; r <= N_STRATEGIES && n < cap; r++)
        for (size_t i = 0; i < N_STRATEGIES; i++) {
            unsigned want = warm ? REMAT_STRATEGY_WARM_START : REMAT_STRATEGY_AUTO;
            if ((infos[i].flags & want) && (warm ? infos[i].warm_rank : infos[i].auto_rank) == r && n < cap)
                out[n++] = &infos[i];
        }
    return n;
}

uint32_t remat_alloc_mask_for(remat_budget_kind kind)
{
    return kind == REMAT_BUDGET_ACTIVATION ? REMAT_CAT_MASK_ACTIVATION : REMAT_CAT_MASK_ALL;
}

void remat_plan_options_init(remat_plan_options *o)
{
    memset(o, 0, sizeof *o);
    o->strategy = "auto";
    o->budget_kind = REMAT_BUDGET_NONE;
}

remat_status remat__plan_alloc_keep(remat_planner *P, remat_plan *out)
{
    uint32_t nt = P->a->g->n_tensors;
    remat__free(out->keep);
    out->keep = remat__calloc(nt ? nt : 1, 1);
    out->n_tensors = nt;
    if (!out->keep)
        return remat_err_set(P->err, REMAT_ENOMEM, "out of memory planning");
    return REMAT_OK;
}

remat_status remat__plan_params(remat_planner *P, remat_plan *out, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    remat__free(out->params_json);
    out->params_json = remat__strdup(buf);
    if (!out->params_json)
        return remat_err_set(P->err, REMAT_ENOMEM, "out of memory planning");
    return REMAT_OK;
}

static uint64_t metric_of(const remat_planner *P, const remat_replay_result *r)
{
    return P->o->budget_kind == REMAT_BUDGET_ACTIVATION ? r->activation_peak : r->peak_bytes;
}

remat_status remat__eval_schedule(remat_planner *P, const remat_schedule *s, remat_eval *e)
{
    remat_replay_result r;
    remat_err local;
    remat_err_init(&local);
    memset(e, 0, sizeof *e);
    P->evaluations++;
    /* Arena mode (issue 11) judges the static arena too; the logical mode's
     * path is the plain replay, unchanged. */
    remat_status st = P->o->budget_mode == REMAT_BUDGET_MODE_ARENA && P->o->budget_kind != REMAT_BUDGET_NONE
                          ? remat_alloc_arena(P->a, s, &P->o->extras, remat_alloc_mask_for(P->o->budget_kind), &r,
                                              &e->arena, &local)
                          : remat_replay(P->a, s, &P->o->extras, NULL, &r, &local);
    if (st != REMAT_OK) {
        remat_err_set(P->err, st, "%s", local.msg);
        return st;
    }
    uint64_t arena = e->arena;
    remat__eval_result(P, &r, e);
    e->arena = arena;
    remat_replay_result_destroy(&r);
    return REMAT_OK;
}

void remat__eval_result(const remat_planner *P, const remat_replay_result *r, remat_eval *e)
{
    memset(e, 0, sizeof *e);
    e->valid = r->valid;
    e->peak = r->peak_bytes;
    e->metric = metric_of(P, r);
    e->extra_flops = r->flops_recompute;
}

remat_status remat__eval_keep(remat_planner *P, const uint8_t *keep, remat_eval *e)
{
    remat_err local;
    remat_err_init(&local);
    memset(e, 0, sizeof *e);
    remat_schedule_clear(&P->scratch);
    remat_status st = remat_schedule_from_keep(P->a, keep, &P->scratch, &local);
    if (st == REMAT_EINFEASIBLE)
        return REMAT_OK; /* e->valid = 0: this keep set cannot be scheduled */
    if (st != REMAT_OK)
        return remat_err_set(P->err, st, "%s", local.msg);
    return remat__eval_schedule(P, &P->scratch, e);
}

uint64_t remat__schedule_extra_flops(const remat_graph *g, const remat_schedule *s)
{
    uint64_t f = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->ins[i].kind == REMAT_I_RECOMPUTE && s->ins[i].arg < g->n_ops) {
            uint64_t x = g->ops[s->ins[i].arg].flops;
            f = f > UINT64_MAX - x ? UINT64_MAX : f + x;
        }
    return f;
}

/* What the budget caps: the logical metric, or the static arena in arena
 * mode (issue 11). A candidate judged without remat__eval_schedule has no
 * arena (0): its metric, a lower bound of the arena, stands in, and
 * remat_plan_make's own check of the final plan keeps the promise. */
static uint64_t budgeted(const remat_planner *P, const remat_eval *e)
{
    if (P->o->budget_mode != REMAT_BUDGET_MODE_ARENA || P->o->budget_kind == REMAT_BUDGET_NONE)
        return e->metric;
    return e->arena > e->metric ? e->arena : e->metric;
}

int remat__fits(const remat_planner *P, const remat_eval *e)
{
    return e->valid && (P->o->budget_kind == REMAT_BUDGET_NONE || budgeted(P, e) <= P->o->budget);
}

int remat__better(const remat_planner *P, const remat_eval *x, const remat_eval *y)
{
    int fx = remat__fits(P, x), fy = remat__fits(P, y);
    if (!x->valid)
        return 0;
    if (!y->valid)
        return 1;
    if (fx != fy)
        return fx;
    if (fx) {
        if (x->extra_flops != y->extra_flops)
            return x->extra_flops < y->extra_flops;
        return budgeted(P, x) < budgeted(P, y);
    }
    if (budgeted(P, x) != budgeted(P, y))
        return budgeted(P, x) < budgeted(P, y);
    return x->extra_flops < y->extra_flops;
}

/* What the class's peak floor (bound.c) adds to a missed budget, after the
 * budget in the message (the smallest figure reached stays last): that no schedule of the class fits, with the step that
 * proves it, or the floor a better schedule of the class could still get
 * down to when it lies below what the strategy reached. Empty where no
 * floor is known (sharded). The bound's own failure (out of memory) is
 * the caller's, in P->err. */
static remat_status floor_note(remat_planner *P, uint64_t reached, char *buf, size_t cap)
{
    uint64_t lb;
    int infeasible;
    remat_peak_floor f;
    buf[0] = '\0';
    remat_status st = remat__bound_extra(P, &lb, &infeasible, &f);
    if (st != REMAT_OK || f.step == REMAT_NONE)
        return st;
    const remat_analysis *a = P->a;
    const uint32_t n = a->g->n_ops;
    const char *id = a->g->ops[f.step < n ? a->order[f.step] : a->bwd_order[f.step - n]].id;
    char b[64];
    remat_format_bytes(f.bytes, b, sizeof b);
    if (f.bytes > P->o->budget)
        snprintf(buf, cap,
                 ", and no schedule that runs each step once, in the graph's order, can (at %s:%.80s every such "
                 "schedule holds at least %s)",
                 f.step < n ? "fwd" : "bwd", id, b);
    else if (f.bytes < reached)
        snprintf(buf, cap, " (no schedule that runs each step once, in the graph's order, goes below %s, at %s:%.80s)",
                 b, f.step < n ? "fwd" : "bwd", id);
    return REMAT_OK;
}

remat_status remat_plan_make(const remat_analysis *a, const remat_plan_options *o, remat_plan *out,
                             remat_replay_result *r, remat_err *err)
{
    return remat__plan_make_probe(a, o, 0, out, r, err);
}

remat_status remat__plan_make_probe(const remat_analysis *a, const remat_plan_options *o, int probe, remat_plan *out,
                                    remat_replay_result *r, remat_err *err)
{
    if (o->objective == REMAT_OBJECTIVE_TIME || o->objective == REMAT_OBJECTIVE_STEP_TIME)
        return remat__plan_make_for_time(a, o, out, r, err);
    const remat_graph *g = a->g;
    const char *name = o->strategy ? o->strategy : "auto";
    remat_plan_init(out);
    memset(r, 0, sizeof *r);
    size_t i = 0;
    while (i < N_STRATEGIES && strcmp(infos[i].name, name) != 0)
        i++;
    if (i == N_STRATEGIES) {
        char list[512] = "";
        for (size_t j = 0; j < N_STRATEGIES; j++) {
            strncat(list, j ? ", " : "", sizeof list - strlen(list) - 1);
            strncat(list, infos[j].name, sizeof list - strlen(list) - 1);
        }
        return remat_err_set(err, REMAT_EINVAL, "strategy: unknown strategy '%s' (known: %s)", name, list);
    }
    remat_planner P;
    memset(&P, 0, sizeof P);
    P.a = a;
    P.o = o;
    P.err = err;
    P.probe = probe;
    remat_schedule_init(&P.scratch);
    out->graph_name = remat__strdup(g->name);
    out->strategy = remat__strdup(name);
    out->graph_fingerprint = g->fingerprint;
    out->budget_kind = o->budget_kind;
    out->budget = o->budget;
    remat_status st = REMAT_OK;
    if (!out->graph_name || !out->strategy)
        st = remat_err_set(err, REMAT_ENOMEM, "out of memory planning");
    if (st == REMAT_OK && o->progress && strcmp(name, "auto") != 0) /* auto reports its own steps */
        o->progress(o->progress_ctx, name, 0, 1);
    if (st == REMAT_OK)
        st = fns[i](&P, out);
    if (st == REMAT_EINFEASIBLE && out->schedule.n > 0) {
        /* A strategy that judged the budget itself (exact) may leave its
         * best effort in the plan: replay it, keeping the strategy's own
         * message, so the caller gets its figures as from any other. */
        remat_err local;
        remat_err_init(&local);
        remat_status rst = remat_replay(a, &out->schedule, &o->extras, NULL, r, &local);
        if (rst != REMAT_OK || !r->valid) {
            remat_replay_result_destroy(r);
            memset(r, 0, sizeof *r);
        }
        if (rst != REMAT_OK && err) { /* out of memory, overflow: that is the failure now */
            *err = local;
            st = rst;
        }
    }
    if (st == REMAT_OK && !out->keep)
        st = remat__plan_alloc_keep(&P, out);
    if (st == REMAT_OK && out->schedule.n == 0) {
        remat_status pst = remat_schedule_from_keep(a, out->keep, &out->schedule, err);
        st = pst;
    }
    /* Arena mode (issue 11): the budget caps the static arena of the plan's
     * schedule, computed from the same replay. */
    const int arena_mode = o->budget_mode == REMAT_BUDGET_MODE_ARENA && o->budget_kind != REMAT_BUDGET_NONE;
    uint64_t arena = 0;
    if (st == REMAT_OK)
        st = arena_mode ? remat_alloc_arena(a, &out->schedule, &o->extras, remat_alloc_mask_for(o->budget_kind), r,
                                            &arena, err)
                        : remat_replay(a, &out->schedule, &o->extras, NULL, r, err);
    if (st == REMAT_OK && !r->valid) {
        /* A strategy emitted a schedule the executor rejects: a bug. */
        st = REMAT_EINTERNAL;
        char msg[REMAT_ERR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", err && err->msg[0] ? err->msg : "?");
        if (err)
            err->code = REMAT_OK;
        remat_err_set(err, REMAT_EINTERNAL, "strategy %s produced an invalid schedule: %s", name, msg);
    }
    if (st == REMAT_OK && o->budget_kind != REMAT_BUDGET_NONE) {
        uint64_t m = o->budget_kind == REMAT_BUDGET_ACTIVATION ? r->activation_peak : r->peak_bytes;
        if (arena_mode && arena > o->budget) {
            char b1[64], b2[64], b3[64];
            st = remat_err_set(err, REMAT_EINFEASIBLE,
                               "strategy %s cannot meet the %s budget of %s in arena mode: the smallest static arena "
                               "it reaches on this graph is %s (its logical %s is %s)",
                               name, o->budget_kind == REMAT_BUDGET_ACTIVATION ? "activation" : "total",
                               remat_format_bytes(o->budget, b1, sizeof b1), remat_format_bytes(arena, b2, sizeof b2),
                               o->budget_kind == REMAT_BUDGET_ACTIVATION ? "activation peak" : "peak",
                               remat_format_bytes(m, b3, sizeof b3));
        } else if (m > o->budget) {
            char b1[64], b2[64], tail[320] = "";
            st = probe ? REMAT_OK : floor_note(&P, m, tail, sizeof tail);
            if (st == REMAT_OK)
                st = remat_err_set(err, REMAT_EINFEASIBLE,
                                   "strategy %s cannot meet the %s budget of %s%s: the smallest %s it reaches on this "
                                   "graph is %s",
                                   name, o->budget_kind == REMAT_BUDGET_ACTIVATION ? "activation" : "total",
                                   remat_format_bytes(o->budget, b1, sizeof b1), tail,
                                   o->budget_kind == REMAT_BUDGET_ACTIVATION ? "activation peak" : "peak",
                                   remat_format_bytes(m, b2, sizeof b2));
        }
    }
    remat_schedule_destroy(&P.scratch);
    if (st == REMAT_EINFEASIBLE && r->recompute_counts) {
        /* The strategy's best effort stays with the caller, replayed, so
         * that comparisons can show what it reaches. */
        return st;
    }
    if (st != REMAT_OK) {
        remat_replay_result_destroy(r);
        memset(r, 0, sizeof *r);
        remat_plan_destroy(out);
    }
    return st;
}

remat_status remat__strategy_store_all(remat_planner *P, remat_plan *out)
{
    remat_status st = remat__plan_alloc_keep(P, out);
    if (st != REMAT_OK)
        return st;
    const remat_graph *g = P->a->g;
    for (uint32_t t = 0; t < g->n_tensors; t++)
        out->keep[t] = g->tensors[t].kind == REMAT_TENSOR_ACTIVATION;
    return remat__plan_params(P, out, "{}");
}

/*
 * objective.c - planning for time instead of FLOPs (--objective time and
 * step-time).
 *
 * Every strategy prices a recomputation by its op's `flops`. Rather than
 * teach each strategy a second price, the time objective hands them a copy
 * of the graph whose `flops` and `bwd_flops` are the op's durations on the
 * device (remat/time.h: measured, or the roofline) in picoseconds: the same
 * tensors, bytes, ops and order, so every memory figure, every schedule and
 * every keep set is the real graph's, and the copy only changes what
 * "cheaper" means. The plan is then replayed on the real graph, so the
 * figures the caller gets (extra FLOPs, peaks) are real ones. Picoseconds
 * keep a 1 KiB elementwise op on the fastest preset (about 0.2 ns) a
 * non-zero cost, and 2^64 ps (213 days) is far beyond any op.
 *
 * Durations alone price a tensor-parallel all-reduce at nothing (it is a
 * view), so a TIME plan may rebuild a dropped segment through one, and the
 * rebuilt all-reduce then runs again on the communication stream. The
 * step-time objective also plans with each collective op priced at its
 * ring time, runs both plans on the timeline (remat_timeline_run, where a
 * recomputation that overlaps a collective costs only what is left
 * exposed), and keeps the one with the lower predicted step time.
 */
#include "planner.h"
#include "../util/util_internal.h"

#include <stdio.h>
#include <string.h>

static uint64_t picoseconds(double s)
{
    return remat__u64_from_double(s * 1e12 + 0.5);
}

/* Plans a copy of a's graph whose op costs are fwd/bwd seconds, then
 * replays the plan on the real graph (r: the real figures). */
static remat_status plan_priced(const remat_analysis *a, const remat_plan_options *o, const double *fwd,
                                const double *bwd, remat_plan *out, remat_replay_result *r, remat_err *err)
{
    const remat_graph *g = a->g;
    remat_plan_init(out);
    memset(r, 0, sizeof *r);
    remat_op *ops = remat__calloc(g->n_ops ? g->n_ops : 1, sizeof *ops);
    if (!ops)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory planning for time");
    memcpy(ops, g->ops, (size_t)g->n_ops * sizeof *ops);
    for (uint32_t k = 0; k < g->n_ops; k++) {
        ops[k].flops = picoseconds(fwd[k]);
        ops[k].bwd_flops = picoseconds(bwd[k]);
    }
    /* Shallow copies: the timed graph shares every array but the ops, the
     * analysis every array (none of which depends on costs). */
    remat_graph timed = *g;
    timed.ops = ops;
    remat_analysis ta = *a;
    ta.g = &timed;
    remat_plan_options to = *o;
    to.objective = REMAT_OBJECTIVE_FLOPS;
    remat_status st = remat_plan_make(&ta, &to, out, r, err);
    remat__free(ops);
    if (r->recompute_counts) {
        /* The same schedule on the real graph: real FLOPs, same bytes. */
        remat_replay_result_destroy(r);
        memset(r, 0, sizeof *r);
        remat_err local;
        remat_err_init(&local);
        remat_status rst = remat_replay(a, &out->schedule, &o->extras, NULL, r, &local);
        if (rst != REMAT_OK) {
            remat_replay_result_destroy(r);
            memset(r, 0, sizeof *r);
            remat_plan_destroy(out);
            if (err)
                err->code = REMAT_OK;
            return remat_err_set(err, rst, "%s", local.msg);
        }
    }
    return st;
}

/* The predicted step time of a plan's schedule (seconds), or a negative
 * value when the timeline cannot run it (err set). */
static double step_time(const remat_analysis *a, const remat_plan_options *o, const remat_op_times *t,
                        const remat_plan *p, remat_err *err)
{
    remat_timeline tl;
    if (remat_timeline_run(a, &p->schedule, &o->extras, o->device, t, &tl, err) != REMAT_OK)
        return -1;
    double v = tl.step_time;
    remat_timeline_destroy(&tl);
    return v;
}

/* STEP_TIME: the TIME plan and the collective-priced one, the one with the
 * lower step time kept (the TIME plan on a tie). *chosen is 0 or 1; s0, s1
 * are their step times (s1 < 0: the second plan did not plan). */
static remat_status plan_step_time(const remat_analysis *a, const remat_plan_options *o, const remat_op_times *t,
                                   remat_plan *out, remat_replay_result *r, int *chosen, double *s0, double *s1,
                                   remat_err *err)
{
    const remat_graph *g = a->g;
    *chosen = 0;
    *s1 = -1;
    remat_status st = plan_priced(a, o, t->fwd, t->bwd, out, r, err);
    if (st != REMAT_OK || !out->strategy)
        return st;
    if ((*s0 = step_time(a, o, t, out, err)) < 0)
        return err->code;
    double *cf = remat__calloc(g->n_ops ? g->n_ops : 1, sizeof *cf);
    double *cb = remat__calloc(g->n_ops ? g->n_ops : 1, sizeof *cb);
    if (!cf || !cb) {
        remat__free(cf);
        remat__free(cb);
        return remat_err_set(err, REMAT_ENOMEM, "out of memory planning for step time");
    }
    int any = 0;
    if ((st = remat_time_op_collectives(g, o->device, cf, cb, err)) == REMAT_OK) {
        for (uint32_t k = 0; k < g->n_ops; k++) {
            any |= cf[k] > 0 || cb[k] > 0;
            cf[k] += t->fwd[k];
            cb[k] += t->bwd[k];
        }
    }
    remat_plan p1;
    remat_replay_result r1;
    remat_plan_init(&p1);
    memset(&r1, 0, sizeof r1);
    if (st == REMAT_OK && any) {
        /* A budget the first plan met, the second meets too (the same
         * strategies, the same bytes); a failure here keeps the first. */
        remat_err local;
        remat_err_init(&local);
        if (plan_priced(a, o, cf, cb, &p1, &r1, &local) == REMAT_OK && p1.strategy) {
            *s1 = step_time(a, o, t, &p1, &local);
            if (*s1 >= 0 && *s1 < *s0) {
                remat_plan_destroy(out);
                remat_replay_result_destroy(r);
                *out = p1;
                *r = r1;
                remat_plan_init(&p1);
                memset(&r1, 0, sizeof r1);
                *chosen = 1;
            }
        }
    }
    remat_plan_destroy(&p1);
    remat_replay_result_destroy(&r1);
    remat__free(cf);
    remat__free(cb);
    return st;
}

remat_status remat__plan_make_for_time(const remat_analysis *a, const remat_plan_options *o, remat_plan *out,
                                       remat_replay_result *r, remat_err *err)
{
    remat_plan_init(out);
    memset(r, 0, sizeof *r);
    if (!o->device)
        return remat_err_set(err, REMAT_EINVAL,
                             "the time objective needs a device (the device field of the plan options)");
    remat_op_times t;
    remat_status st = remat_op_times_init(a, o->device, &t, err);
    if (st != REMAT_OK)
        return st;
    const int steps = o->objective == REMAT_OBJECTIVE_STEP_TIME;
    int chosen = 0;
    double s0 = -1, s1 = -1;
    st = steps ? plan_step_time(a, o, &t, out, r, &chosen, &s0, &s1, err) : plan_priced(a, o, t.fwd, t.bwd, out, r, err);
    remat_op_times_destroy(&t);
    if (out->strategy) {
        /* The strategy's own figures (extra, bounds) are in picoseconds now:
         * say so where they are written. */
        remat_buf b;
        remat_buf_init(&b);
        remat_buf_printf(&b, "{\"objective\": \"%s\", \"device\": ", steps ? "step-time" : "time");
        remat_buf_json_str(&b, o->device->name);
        if (steps) {
            remat_buf_printf(&b, ", \"step_time_s\": {\"durations\": %.9g", s0);
            if (s1 >= 0)
                remat_buf_printf(&b, ", \"durations_and_collectives\": %.9g", s1);
            remat_buf_printf(&b, "}, \"prices\": \"%s\"", chosen ? "durations_and_collectives" : "durations");
        }
        remat_buf_printf(&b, ", \"cost_unit\": \"ps\", \"planned\": %s}", out->params_json ? out->params_json : "{}");
        size_t len;
        char *text = remat_buf_finish(&b, &len, err, "plan parameters");
        if (!text) {
            remat_replay_result_destroy(r);
            memset(r, 0, sizeof *r);
            remat_plan_destroy(out);
            return REMAT_ENOMEM;
        }
        remat__free(out->params_json);
        out->params_json = text;
    }
    return st;
}

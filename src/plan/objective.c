/*
 * objective.c - planning for time instead of FLOPs (--objective time).
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
 */
#include "planner.h"
#include "../util/util_internal.h"

#include <stdio.h>
#include <string.h>

static uint64_t picoseconds(double s)
{
    return remat__u64_from_double(s * 1e12 + 0.5);
}

remat_status remat__plan_make_for_time(const remat_analysis *a, const remat_plan_options *o, remat_plan *out,
                                       remat_replay_result *r, remat_err *err)
{
    remat_plan_init(out);
    memset(r, 0, sizeof *r);
    if (!o->device)
        return remat_err_set(err, REMAT_EINVAL,
                             "the time objective needs a device (the device field of the plan options)");
    const remat_graph *g = a->g;
    remat_op_times t;
    remat_status st = remat_op_times_init(a, o->device, &t, err);
    if (st != REMAT_OK)
        return st;
    remat_op *ops = remat__calloc(g->n_ops ? g->n_ops : 1, sizeof *ops);
    if (!ops) {
        remat_op_times_destroy(&t);
        return remat_err_set(err, REMAT_ENOMEM, "out of memory planning for time");
    }
    memcpy(ops, g->ops, (size_t)g->n_ops * sizeof *ops);
    for (uint32_t k = 0; k < g->n_ops; k++) {
        ops[k].flops = picoseconds(t.fwd[k]);
        ops[k].bwd_flops = picoseconds(t.bwd[k]);
    }
    remat_op_times_destroy(&t);
    /* Shallow copies: the timed graph shares every array but the ops, the
     * analysis every array (none of which depends on costs). */
    remat_graph timed = *g;
    timed.ops = ops;
    remat_analysis ta = *a;
    ta.g = &timed;
    remat_plan_options to = *o;
    to.objective = REMAT_OBJECTIVE_FLOPS;
    st = remat_plan_make(&ta, &to, out, r, err);
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
    if (out->strategy) {
        /* The strategy's own figures (extra, bounds) are in picoseconds now:
         * say so where they are written. */
        remat_buf b;
        remat_buf_init(&b);
        remat_buf_puts(&b, "{\"objective\": \"time\", \"device\": ");
        remat_buf_json_str(&b, o->device->name);
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

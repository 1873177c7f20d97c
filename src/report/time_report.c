/*
 * time_report.c - the step-time summary of a timeline (remat/time.h), as
 * text or JSON: step time, the compute it spends (forward, recompute,
 * backward, optimizer), communication on its own stream and how much of it
 * compute hid, and the critical path.
 *
 * Times print with a unit chosen per figure (ns to s) in text, and as
 * seconds in JSON, so that a program never parses a unit.
 */
#include "remat/report.h"
#include "../util/util_internal.h"

#include <stdio.h>
#include <string.h>

/* A duration with a readable unit: "12.345 us". */
const char *remat_format_seconds(double s, char *buf, size_t cap)
{
    double a = s < 0 ? -s : s;
    if (a == 0)
        snprintf(buf, cap, "0 s");
    else if (a < 1e-6)
        snprintf(buf, cap, "%.3f ns", s * 1e9);
    else if (a < 1e-3)
        snprintf(buf, cap, "%.3f us", s * 1e6);
    else if (a < 1)
        snprintf(buf, cap, "%.3f ms", s * 1e3);
    else
        snprintf(buf, cap, "%.3f s", s);
    return buf;
}

char *remat_report_step_time(const remat_analysis *a, const remat_schedule *s, const remat_timeline *tl,
                             const remat_device *d, const remat_op_times *t, remat_report_format fmt, size_t *len,
                             remat_err *err)
{
    const remat_graph *g = a->g;
    remat_buf b;
    remat_buf_init(&b);
    char x[4][48], step[256];
    double hidden = tl->comm_time - tl->exposed_comm;
    if (hidden < 0)
        hidden = 0;
    const char *last = "none";
    if (tl->n_crit)
        last = remat_report_step_name(g, s, tl->crit[tl->n_crit - 1] < s->n ? tl->crit[tl->n_crit - 1] : s->n, step,
                                      sizeof step);
    if (fmt == REMAT_REPORT_JSON) {
        remat_buf_puts(&b, "{\"device\": ");
        remat_buf_json_str(&b, d->name);
        remat_buf_printf(&b,
                         ", \"measured_ops\": {\"forward\": %u, \"backward\": %u, \"of\": %u},\n  \"step_time_s\": %.9g, "
                         "\"compute_s\": %.9g, \"forward_s\": %.9g, \"recompute_s\": %.9g, \"backward_s\": %.9g, "
                         "\"optimizer_s\": %.9g,\n  \"comm_s\": %.9g, \"exposed_comm_s\": %.9g, \"hidden_comm_s\": %.9g,"
                         "\n  \"critical_path\": {\"instructions\": %zu, \"compute_s\": %.9g, \"comm_s\": %.9g, "
                         "\"steps\": [",
                         t->n_fwd_measured, t->n_bwd_measured, t->n_ops, tl->step_time, tl->compute_time,
                         tl->forward_time, tl->recompute_time, tl->backward_time, tl->optimizer_time, tl->comm_time,
                         tl->exposed_comm, hidden, tl->n_crit, tl->crit_compute, tl->crit_comm);
        for (size_t i = 0; i < tl->n_crit; i++) {
            remat_buf_puts(&b, i ? ", " : "");
            remat_buf_json_str(&b, remat_report_step_name(g, s, tl->crit[i] < s->n ? tl->crit[i] : s->n, step,
                                                          sizeof step));
        }
        remat_buf_puts(&b, "]}}");
    } else {
        remat_buf_puts(&b, "device      ");
        remat_buf_puts(&b, d->name);
        if (t->n_fwd_measured || t->n_bwd_measured)
            remat_buf_printf(&b, ": measured durations for %u forward and %u backward of %u ops, roofline for the rest\n",
                             t->n_fwd_measured, t->n_bwd_measured, t->n_ops);
        else
            remat_buf_printf(&b, ": roofline for all %u ops\n", t->n_ops);
        remat_buf_printf(&b, "step time   %s = compute %s + exposed communication %s\n",
                         remat_format_seconds(tl->step_time, x[0], sizeof x[0]),
                         remat_format_seconds(tl->compute_time, x[1], sizeof x[1]),
                         remat_format_seconds(tl->exposed_comm, x[2], sizeof x[2]));
        remat_buf_printf(&b, "  compute   forward %s, recompute %s, ", remat_format_seconds(tl->forward_time, x[0], 48),
                         remat_format_seconds(tl->recompute_time, x[1], 48));
        remat_buf_printf(&b, "backward %s, optimizer %s\n", remat_format_seconds(tl->backward_time, x[2], 48),
                         remat_format_seconds(tl->optimizer_time, x[3], 48));
        if (tl->comm_time > 0)
            remat_buf_printf(&b, "  comm      %s on its own stream, %s of it hidden behind compute\n",
                             remat_format_seconds(tl->comm_time, x[0], 48), remat_format_seconds(hidden, x[1], 48));
        remat_buf_printf(&b, "  critical path %zu instructions (%s compute, %s communication), ending at %s\n",
                         tl->n_crit, remat_format_seconds(tl->crit_compute, x[0], 48),
                         remat_format_seconds(tl->crit_comm, x[1], 48), last);
    }
    return remat_buf_finish(&b, len, err, "step-time report");
}

/*
 * replay_report.c - replay summaries (the plan file itself is src/plan/plan_file.c).
 */
#include "remat/report.h"
#include "../util/util_internal.h"
#include "../exec/schedule_json.h"

#include <stdio.h>
#include <string.h>

static void json_categories(remat_buf *b, const uint64_t *v)
{
    remat_buf_puts(b, "{");
    for (int c = 0; c < REMAT_CAT_COUNT; c++)
        remat_buf_printf(b, "%s\"%s\": %llu", c ? ", " : "", remat_category_name((remat_category)c),
                         (unsigned long long)v[c]);
    remat_buf_puts(b, "}");
}

char *remat_report_replay(const remat_analysis *a, const remat_schedule *s, const remat_replay_result *r,
                          const remat_err *why, remat_report_format fmt, size_t *len, remat_err *err)
{
    const remat_graph *g = a->g;
    remat_buf b;
    remat_buf_init(&b);
    char step[256], text[256];
    if (!r->valid) {
        if (r->fail_index < s->n)
            remat_instr_text(g, s->ins[r->fail_index], text, sizeof text);
        else
            snprintf(text, sizeof text, "end of schedule");
        if (fmt == REMAT_REPORT_JSON) {
            remat_buf_printf(&b, "{\"valid\": false, \"fail_index\": %zu, \"instruction\": ", r->fail_index);
            if (r->fail_index < s->n)
                remat__instr_json(&b, g, s->ins[r->fail_index]);
            else
                remat_buf_json_str(&b, text);
            remat_buf_puts(&b, ", \"error\": ");
            remat_buf_json_str(&b, why ? why->msg : "");
            remat_buf_puts(&b, "}\n");
        } else {
            remat_buf_printf(&b, "INVALID schedule: %s\n", why ? why->msg : "");
        }
        return remat_buf_finish(&b, len, err, "replay report");
    }
    remat_report_step_name(g, s, r->peak_index, step, sizeof step);
    if (fmt == REMAT_REPORT_JSON) {
        remat_buf_puts(&b, "{\"valid\": true, \"graph\": ");
        remat_buf_json_str(&b, g->name);
        remat_buf_printf(&b, ", \"instructions\": %llu, \"peak_bytes\": %llu, \"peak_step\": ",
                         (unsigned long long)r->n_instructions, (unsigned long long)r->peak_bytes);
        remat__step_json(&b, g, s, r->peak_index);
        remat_buf_printf(&b, ", \"peak_index\": %zu,\n \"peak_by_category\": ", r->peak_index);
        json_categories(&b, r->peak_by_category);
        remat_buf_puts(&b, ",\n \"category_peaks\": ");
        json_categories(&b, r->category_peak);
        remat_buf_printf(&b, ",\n \"sum_of_category_peaks\": %llu, \"activation_peak_bytes\": %llu,\n",
                         (unsigned long long)r->sum_of_category_peaks, (unsigned long long)r->activation_peak);
        remat_buf_printf(&b, " \"flops\": {\"forward\": %llu, \"backward\": %llu, \"recompute\": %llu}, \"overhead\": %.6f,\n",
                         (unsigned long long)r->flops_forward, (unsigned long long)r->flops_backward,
                         (unsigned long long)r->flops_recompute, remat__flops_overhead(r));
        remat_buf_puts(&b, " \"recompute_counts\": {");
        int first = 1;
        for (uint32_t i = 0; i < a->n_bwd + g->n_ops && i < g->n_ops; i++) {
            uint32_t k = a->order[i];
            if (!r->recompute_counts[k])
                continue;
            remat_buf_puts(&b, first ? "" : ", ");
            remat_buf_json_str(&b, g->ops[k].id);
            remat_buf_printf(&b, ": %u", r->recompute_counts[k]);
            first = 0;
        }
        remat_buf_puts(&b, "}");
        if (r->n_collectives) {
            /* A sharded rank: its state at the optimizer step (the ledger's
             * lines) and its communication volume (Rajbhandari et al. 7). */
            remat_buf_puts(&b, ",\n \"at_optimizer\": ");
            json_categories(&b, r->at_opt_by_category);
            remat_buf_printf(&b, ",\n \"communication\": {\"collectives\": %u, \"elements\": %llu, \"bytes\": %llu}",
                             r->n_collectives, (unsigned long long)r->comm_elements,
                             (unsigned long long)r->comm_bytes);
        }
        remat_buf_puts(&b, "}\n");
    } else {
        char x[64], y[64];
        remat_buf_printf(&b, "graph %s: schedule of %llu instructions is valid\n", g->name,
                         (unsigned long long)r->n_instructions);
        remat_buf_printf(&b, "peak        %s at %s (instruction %zu)\n",
                         remat_format_bytes(r->peak_bytes, x, sizeof x), step, r->peak_index);
        for (int c = 0; c < REMAT_CAT_COUNT; c++)
            if (r->peak_by_category[c] || r->category_peak[c])
                remat_buf_printf(&b, "  %-18s %14llu B at the peak; own max %14llu B\n",
                                 remat_category_name((remat_category)c), (unsigned long long)r->peak_by_category[c],
                                 (unsigned long long)r->category_peak[c]);
        remat_buf_printf(&b, "sum of category peaks %s (the categories peak at different steps)\n",
                         remat_format_bytes(r->sum_of_category_peaks, y, sizeof y));
        remat_buf_printf(&b, "activation peak %s\n", remat_format_bytes(r->activation_peak, y, sizeof y));
        remat_buf_printf(&b, "flops       forward %llu, backward %llu, recompute %llu (overhead %.2f%%)\n",
                         (unsigned long long)r->flops_forward, (unsigned long long)r->flops_backward,
                         (unsigned long long)r->flops_recompute, 100.0 * remat__flops_overhead(r));
    }
    return remat_buf_finish(&b, len, err, "replay report");
}

/*
 * replay_report.c - replay summaries and plan files.
 */
#include "remat/report.h"
#include "../util/util_internal.h"

#include <stdio.h>
#include <string.h>

const char *remat_report_step_name(const remat_graph *g, const remat_schedule *s, size_t i, char *buf, size_t cap)
{
    if (i >= s->n) {
        snprintf(buf, cap, "optimizer");
        return buf;
    }
    remat_instr in = s->ins[i];
    switch ((remat_instr_kind)in.kind) {
    case REMAT_I_FWD: snprintf(buf, cap, "fwd:%s", g->ops[in.arg].id); break;
    case REMAT_I_RECOMPUTE: snprintf(buf, cap, "recompute:%s", g->ops[in.arg].id); break;
    case REMAT_I_BWD: snprintf(buf, cap, "bwd:%s", g->ops[in.arg].id); break;
    case REMAT_I_FREE: snprintf(buf, cap, "free:%s", g->tensors[in.arg].id); break;
    case REMAT_I_OPT: snprintf(buf, cap, "optimizer"); break;
    default: snprintf(buf, cap, "?"); break;
    }
    return buf;
}

/* JSON documents name steps and instructions exactly, whatever the length
 * of an id: remat_report_step_name and remat_instr_text write into fixed
 * buffers and would cut a long one (a plan file then would not read back). */
static const char *instr_id(const remat_graph *g, remat_instr in)
{
    switch ((remat_instr_kind)in.kind) {
    case REMAT_I_FWD:
    case REMAT_I_RECOMPUTE:
    case REMAT_I_BWD: return in.arg < g->n_ops ? g->ops[in.arg].id : "?";
    case REMAT_I_FREE: return in.arg < g->n_tensors ? g->tensors[in.arg].id : "?";
    case REMAT_I_OPT: return NULL;
    }
    return "?";
}

/* "KIND id" (or "OPT"), as a JSON string. */
static void json_instr(remat_buf *b, const remat_graph *g, remat_instr in)
{
    const char *id = instr_id(g, in);
    remat_buf_puts(b, "\"");
    remat_buf_json_chars(b, remat_instr_name((remat_instr_kind)in.kind));
    if (id) {
        remat_buf_puts(b, " ");
        remat_buf_json_chars(b, id);
    }
    remat_buf_puts(b, "\"");
}

/* The step name of instruction i ("bwd:id", "optimizer"), as a JSON string. */
static void json_step(remat_buf *b, const remat_graph *g, const remat_schedule *s, size_t i)
{
    static const char *const prefix[] = {"fwd:", "recompute:", "bwd:", "free:"};
    const char *id = i < s->n ? instr_id(g, s->ins[i]) : NULL;
    remat_buf_puts(b, "\"");
    if (id && s->ins[i].kind < sizeof prefix / sizeof prefix[0]) {
        remat_buf_puts(b, prefix[s->ins[i].kind]);
        remat_buf_json_chars(b, id);
    } else {
        remat_buf_puts(b, "optimizer");
    }
    remat_buf_puts(b, "\"");
}

static void json_categories(remat_buf *b, const uint64_t *v)
{
    remat_buf_puts(b, "{");
    for (int c = 0; c < REMAT_CAT_COUNT; c++)
        remat_buf_printf(b, "%s\"%s\": %llu", c ? ", " : "", remat_category_name((remat_category)c),
                         (unsigned long long)v[c]);
    remat_buf_puts(b, "}");
}

static double overhead(const remat_replay_result *r)
{
    double base = (double)r->flops_forward + (double)r->flops_backward;
    return base > 0 ? (double)r->flops_recompute / base : 0.0;
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
                json_instr(&b, g, s->ins[r->fail_index]);
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
        json_step(&b, g, s, r->peak_index);
        remat_buf_printf(&b, ", \"peak_index\": %zu,\n \"peak_by_category\": ", r->peak_index);
        json_categories(&b, r->peak_by_category);
        remat_buf_puts(&b, ",\n \"category_peaks\": ");
        json_categories(&b, r->category_peak);
        remat_buf_printf(&b, ",\n \"sum_of_category_peaks\": %llu, \"activation_peak_bytes\": %llu,\n",
                         (unsigned long long)r->sum_of_category_peaks, (unsigned long long)r->activation_peak);
        remat_buf_printf(&b, " \"flops\": {\"forward\": %llu, \"backward\": %llu, \"recompute\": %llu}, \"overhead\": %.6f,\n",
                         (unsigned long long)r->flops_forward, (unsigned long long)r->flops_backward,
                         (unsigned long long)r->flops_recompute, overhead(r));
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
        remat_buf_puts(&b, "}}\n");
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
                         (unsigned long long)r->flops_recompute, 100.0 * overhead(r));
    }
    return remat_buf_finish(&b, len, err, "replay report");
}

char *remat_report_plan(const remat_analysis *a, const remat_plan *p, const remat_replay_result *r, size_t *len,
                        remat_err *err)
{
    const remat_graph *g = a->g;
    remat_buf b;
    remat_buf_init(&b);
    remat_buf_puts(&b, "{\"format\": \"remat-plan\", \"version\": 1,\n \"graph\": {\"name\": ");
    remat_buf_json_str(&b, g->name);
    remat_buf_printf(&b, ", \"fingerprint\": \"%016llx\"},\n \"strategy\": ", (unsigned long long)g->fingerprint);
    remat_buf_json_str(&b, p->strategy ? p->strategy : "unknown");
    remat_buf_printf(&b, ",\n \"params\": %s,\n \"budget\": ", p->params_json ? p->params_json : "{}");
    if (p->budget_kind == REMAT_BUDGET_NONE)
        remat_buf_puts(&b, "null");
    else
        remat_buf_printf(&b, "{\"kind\": \"%s\", \"bytes\": \"%llu\"}",
                         p->budget_kind == REMAT_BUDGET_TOTAL ? "total" : "activation", (unsigned long long)p->budget);
    if (r && r->valid) {
        remat_buf_printf(&b, ",\n \"replayed\": {\"peak_bytes\": \"%llu\", \"peak_step\": ",
                         (unsigned long long)r->peak_bytes);
        json_step(&b, g, &p->schedule, r->peak_index);
        remat_buf_printf(&b, ", \"activation_peak_bytes\": \"%llu\", \"recompute_flops\": \"%llu\", \"overhead\": %.6f}",
                         (unsigned long long)r->activation_peak, (unsigned long long)r->flops_recompute, overhead(r));
    }
    remat_buf_puts(&b, ",\n \"keep\": [");
    int first = 1;
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        if (g->tensors[t].kind != REMAT_TENSOR_ACTIVATION || !p->keep || !p->keep[t])
            continue;
        remat_buf_puts(&b, first ? "" : ", ");
        remat_buf_json_str(&b, g->tensors[t].id);
        first = 0;
    }
    remat_buf_puts(&b, "],\n \"schedule\": [");
    for (size_t i = 0; i < p->schedule.n; i++) {
        remat_buf_puts(&b, i ? ",\n  " : "\n  ");
        json_instr(&b, g, p->schedule.ins[i]);
    }
    remat_buf_puts(&b, "\n ]\n}\n");
    return remat_buf_finish(&b, len, err, "plan");
}

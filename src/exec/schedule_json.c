/*
 * schedule_json.c - instructions and steps spelled exactly (see
 * schedule_json.h): step names, JSON strings, and the recompute overhead
 * every document prints beside them.
 */
#include "remat/exec.h"
#include "../util/util_internal.h"
#include "schedule_json.h"

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
    case REMAT_I_ALLGATHER: snprintf(buf, cap, "allgather:%s", g->ops[in.arg].id); break;
    case REMAT_I_RELEASE: snprintf(buf, cap, "release:%s", g->ops[in.arg].id); break;
    case REMAT_I_REDUCE_SCATTER: snprintf(buf, cap, "reduce_scatter:bucket%u", in.arg); break;
    case REMAT_I_ALLREDUCE: snprintf(buf, cap, "allreduce:bucket%u", in.arg); break;
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
    case REMAT_I_BWD:
    case REMAT_I_ALLGATHER:
    case REMAT_I_RELEASE: return in.arg < g->n_ops ? g->ops[in.arg].id : "?";
    case REMAT_I_REDUCE_SCATTER:
    case REMAT_I_ALLREDUCE: return "bucket";
    case REMAT_I_FREE: return in.arg < g->n_tensors ? g->tensors[in.arg].id : "?";
    case REMAT_I_OPT: return NULL;
    }
    return "?";
}

/* "KIND id" (or "OPT"), as a JSON string. */
void remat__instr_json(remat_buf *b, const remat_graph *g, remat_instr in)
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
void remat__step_json(remat_buf *b, const remat_graph *g, const remat_schedule *s, size_t i)
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

double remat__flops_overhead(const remat_replay_result *r)
{
    double base = (double)r->flops_forward + (double)r->flops_backward;
    return base > 0 ? (double)r->flops_recompute / base : 0.0;
}

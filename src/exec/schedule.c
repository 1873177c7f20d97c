/*
 * schedule.c - instruction lists as data.
 *
 * The schedule is the executor's input, so it lives in exec, below the plan
 * file reader (src/plan/plan_file.c) that builds one.
 */
#include "remat/schedule.h"
#include "../util/util_internal.h"

#include <stdio.h>
#include <string.h>

void remat_schedule_init(remat_schedule *s)
{
    s->ins = NULL;
    s->n = s->cap = 0;
}

void remat_schedule_destroy(remat_schedule *s)
{
    if (!s)
        return;
    remat__free(s->ins);
    remat_schedule_init(s);
}

void remat_schedule_clear(remat_schedule *s)
{
    s->n = 0;
}

remat_status remat_schedule_push(remat_schedule *s, remat_instr_kind kind, uint32_t arg)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        if (cap > SIZE_MAX / sizeof *s->ins)
            return REMAT_ENOMEM;
        remat_instr *p = remat__realloc(s->ins, cap * sizeof *p);
        if (!p)
            return REMAT_ENOMEM;
        s->ins = p;
        s->cap = cap;
    }
    s->ins[s->n].kind = (uint32_t)kind;
    s->ins[s->n].arg = arg;
    s->n++;
    return REMAT_OK;
}

const char *remat_instr_name(remat_instr_kind k)
{
    switch (k) {
    case REMAT_I_FWD: return "FWD";
    case REMAT_I_RECOMPUTE: return "RECOMPUTE";
    case REMAT_I_BWD: return "BWD";
    case REMAT_I_FREE: return "FREE";
    case REMAT_I_OPT: return "OPT";
    case REMAT_I_ALLGATHER: return "ALLGATHER";
    case REMAT_I_RELEASE: return "RELEASE";
    case REMAT_I_REDUCE_SCATTER: return "REDUCE_SCATTER";
    case REMAT_I_ALLREDUCE: return "ALLREDUCE";
    }
    return "?";
}

const char *remat_instr_text(const remat_graph *g, remat_instr in, char *buf, size_t cap)
{
    const char *name = "?";
    switch ((remat_instr_kind)in.kind) {
    case REMAT_I_FWD:
    case REMAT_I_RECOMPUTE:
    case REMAT_I_BWD:
    case REMAT_I_ALLGATHER:
    case REMAT_I_RELEASE:
        if (in.arg < g->n_ops)
            name = g->ops[in.arg].id;
        break;
    case REMAT_I_FREE:
        if (in.arg < g->n_tensors)
            name = g->tensors[in.arg].id;
        break;
    case REMAT_I_OPT:
        snprintf(buf, cap, "OPT");
        return buf;
    case REMAT_I_REDUCE_SCATTER:
    case REMAT_I_ALLREDUCE:
        snprintf(buf, cap, "%s bucket%u", remat_instr_name((remat_instr_kind)in.kind), in.arg);
        return buf;
    }
    snprintf(buf, cap, "%s %s", remat_instr_name((remat_instr_kind)in.kind), name);
    return buf;
}

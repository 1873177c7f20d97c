/*
 * trace_names.c - what every trace writer shares: the names of steps,
 * instructions and intervals, written as is or as JSON string literals
 * without a scratch buffer (the JSON and Chrome writers name hundreds of
 * thousands of things), JSON counts, the writer options and the common
 * ending of a writer.
 */
#include "trace_internal.h"

#include <stdio.h>
#include <string.h>

static const char *const why_names[] = {
#define REMAT__WHY_STR(name, text) text,
    REMAT_TRACE_WHY_MAP(REMAT__WHY_STR)
#undef REMAT__WHY_STR
};

const char *remat_trace_why_name(remat_trace_why w)
{
    return (unsigned)w < REMAT_TRACE_WHY_COUNT ? why_names[w] : "?";
}

void remat_trace_options_init(remat_trace_options *o)
{
    memset(o, 0, sizeof *o);
    o->budget_kind = REMAT_BUDGET_NONE;
}

remat_trace_options remat__trace_opts(const remat_trace_options *o)
{
    remat_trace_options r;
    if (o)
        r = *o;
    else
        remat_trace_options_init(&r);
    if (!r.top)
        r.top = REMAT__TRACE_TOP;
    if (!r.width)
        r.width = REMAT__TRACE_W;
    if (!r.height)
        r.height = REMAT__TRACE_H;
    return r;
}

const char *remat__trace_kind(remat_instr in)
{
    switch ((remat_instr_kind)in.kind) {
    case REMAT_I_FWD: return "fwd";
    case REMAT_I_RECOMPUTE: return "recompute";
    case REMAT_I_BWD: return "bwd";
    case REMAT_I_FREE: return "free";
    case REMAT_I_OPT: return "opt";
    case REMAT_I_ALLGATHER: return "allgather";
    case REMAT_I_RELEASE: return "release";
    case REMAT_I_REDUCE_SCATTER: return "reduce_scatter";
    case REMAT_I_ALLREDUCE: return "allreduce";
    }
    return "?";
}

void remat__json_esc(remat_buf *b, const char *s)
{
    const char *run = s;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p >= 0x20 && *p != '"' && *p != '\\')
            continue;
        remat_buf_putn(b, run, (size_t)((const char *)p - run));
        char esc[8] = {'\\', (char)*p, 0};
        switch (*p) {
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        case '"':
        case '\\': break;
        default: snprintf(esc, sizeof esc, "\\u%04x", *p); break;
        }
        remat_buf_puts(b, esc);
        run = (const char *)p + 1;
    }
    remat_buf_puts(b, run);
}

void remat__put_u64(remat_buf *b, uint64_t v)
{
    char d[20];
    size_t i = sizeof d;
    do {
        d[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    remat_buf_putn(b, d + i, sizeof d - i);
}

/* prefix (plain ASCII) then id, as is or as one JSON string. */
static void put_name(remat_buf *b, const char *prefix, const char *id, int json)
{
    if (json)
        remat_buf_putn(b, "\"", 1);
    remat_buf_puts(b, prefix);
    if (json)
        remat__json_esc(b, id);
    else
        remat_buf_puts(b, id);
    if (json)
        remat_buf_putn(b, "\"", 1);
}

void remat__trace_step_name(remat_buf *b, const remat_trace *t, size_t s, int json)
{
    const remat_graph *g = t->a->g;
    remat_instr in = t->steps[s].in;
    switch ((remat_instr_kind)in.kind) {
    case REMAT_I_FWD: put_name(b, "fwd:", g->ops[in.arg].id, json); return;
    case REMAT_I_RECOMPUTE: put_name(b, "recompute:", g->ops[in.arg].id, json); return;
    case REMAT_I_BWD: put_name(b, "bwd:", g->ops[in.arg].id, json); return;
    case REMAT_I_FREE: put_name(b, "free:", g->tensors[in.arg].id, json); return;
    case REMAT_I_ALLGATHER: put_name(b, "allgather:", g->ops[in.arg].id, json); return;
    case REMAT_I_RELEASE: put_name(b, "release:", g->ops[in.arg].id, json); return;
    case REMAT_I_REDUCE_SCATTER: put_name(b, "reduce_scatter:", "bucket", json); return;
    case REMAT_I_ALLREDUCE: put_name(b, "allreduce:", "bucket", json); return;
    case REMAT_I_OPT: break;
    }
    put_name(b, "optimizer", "", json);
}

void remat__trace_instr_text(remat_buf *b, const remat_trace *t, size_t s, int json)
{
    const remat_graph *g = t->a->g;
    remat_instr in = t->steps[s].in;
    switch ((remat_instr_kind)in.kind) {
    case REMAT_I_FWD: put_name(b, "FWD ", g->ops[in.arg].id, json); return;
    case REMAT_I_RECOMPUTE: put_name(b, "RECOMPUTE ", g->ops[in.arg].id, json); return;
    case REMAT_I_BWD: put_name(b, "BWD ", g->ops[in.arg].id, json); return;
    case REMAT_I_FREE: put_name(b, "FREE ", g->tensors[in.arg].id, json); return;
    case REMAT_I_ALLGATHER: put_name(b, "ALLGATHER ", g->ops[in.arg].id, json); return;
    case REMAT_I_RELEASE: put_name(b, "RELEASE ", g->ops[in.arg].id, json); return;
    case REMAT_I_REDUCE_SCATTER: put_name(b, "REDUCE_SCATTER ", "bucket", json); return;
    case REMAT_I_ALLREDUCE: put_name(b, "ALLREDUCE ", "bucket", json); return;
    case REMAT_I_OPT: break;
    }
    put_name(b, "OPT", "", json);
}

void remat__trace_interval_id(remat_buf *b, const remat_trace *t, size_t i, int json)
{
    const remat_trace_interval *iv = &t->iv[i];
    switch ((remat_trace_why)iv->why) {
    case REMAT_TRACE_WHY_LEDGER:
        put_name(b, "ledger:", remat_category_name((remat_category)iv->category), json);
        return;
    case REMAT_TRACE_WHY_WORKSPACE: put_name(b, "workspace", "", json); return;
    case REMAT_TRACE_WHY_SHARDING:
        put_name(b, "sharding:", remat_category_name((remat_category)iv->category), json);
        return;
    case REMAT_TRACE_WHY_TRANSIENT: put_name(b, "transient", "", json); return;
    default: break;
    }
    put_name(b, iv->grad ? "grad:" : "", t->a->g->tensors[iv->storage].id, json);
}

void remat__json_count(remat_buf *b, uint64_t v)
{
    int big = v > 9007199254740991ULL;
    if (big)
        remat_buf_putn(b, "\"", 1);
    remat__put_u64(b, v);
    if (big)
        remat_buf_putn(b, "\"", 1);
}


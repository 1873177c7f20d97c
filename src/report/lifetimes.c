/*
 * lifetimes.c - the lifetime table as text or JSON.
 */
#include "remat/report.h"
#include "../util/util_internal.h"

#include <stdio.h>
#include <string.h>

/* Appends the step name as a JSON string. */
static void put_step(remat_buf *b, const remat_analysis *a, uint32_t s)
{
    const remat_graph *g = a->g;
    if (s == REMAT_NONE) {
        remat_buf_puts(b, "null");
        return;
    }
    remat_buf tmp;
    remat_buf_init(&tmp);
    if (s < g->n_ops) {
        remat_buf_puts(&tmp, "fwd:");
        remat_buf_puts(&tmp, g->ops[a->order[s]].id);
    } else if (s < g->n_ops + a->n_bwd) {
        remat_buf_puts(&tmp, "bwd:");
        remat_buf_puts(&tmp, g->ops[a->bwd_order[s - g->n_ops]].id);
    } else {
        remat_buf_puts(&tmp, "optimizer");
    }
    if (tmp.failed)
        b->failed = 1;
    else
        remat_buf_json_str(b, tmp.data);
    remat_buf_destroy(&tmp);
}

static void text_step(remat_buf *b, const remat_analysis *a, uint32_t s, int width)
{
    char name[48];
    remat_step_name(a, s, name, sizeof name);
    if (s == REMAT_NONE)
        strcpy(name, "-");
    remat_buf_printf(b, " %-*s", width, name);
}

char *remat_report_lifetimes(const remat_analysis *a, remat_report_format fmt, size_t *len, remat_err *err)
{
    const remat_graph *g = a->g;
    remat_buf b;
    remat_buf_init(&b);
    if (fmt == REMAT_REPORT_JSON) {
        remat_buf_puts(&b, "{\"graph\": ");
        remat_buf_json_str(&b, g->name);
        remat_buf_puts(&b, ",\n \"steps\": [");
        for (uint32_t s = 0; s < a->n_steps && !b.failed; s++) {
            if (s)
                remat_buf_puts(&b, ", ");
            put_step(&b, a, s);
        }
        remat_buf_puts(&b, "],\n \"tensors\": [");
        for (uint32_t t = 0; t < g->n_tensors && !b.failed; t++) {
            const remat_tensor *T = &g->tensors[t];
            const remat_lifetime *L = &a->life[t];
            remat_buf_puts(&b, t ? ",\n  {\"id\": " : "\n  {\"id\": ");
            remat_buf_json_str(&b, T->id);
            remat_buf_printf(&b, ", \"kind\": \"%s\", \"bytes\": %llu", remat_tensor_kind_str(T->kind),
                             (unsigned long long)T->bytes);
            if (T->alias_of != REMAT_NONE) {
                remat_buf_puts(&b, ", \"view_of\": ");
                remat_buf_json_str(&b, g->tensors[T->storage].id);
            }
            remat_buf_puts(&b, ", \"birth\": ");
            put_step(&b, a, L->birth);
            remat_buf_puts(&b, ", \"last_fwd_use\": ");
            put_step(&b, a, L->last_fwd_use);
            remat_buf_puts(&b, ", \"last_bwd_use\": ");
            put_step(&b, a, L->last_bwd_use);
            remat_buf_puts(&b, ", \"free\": ");
            put_step(&b, a, L->free);
            remat_buf_puts(&b, ", \"grad_birth\": ");
            put_step(&b, a, L->grad_birth);
            remat_buf_puts(&b, ", \"grad_free\": ");
            put_step(&b, a, L->grad_free);
            remat_buf_puts(&b, "}");
        }
        remat_buf_puts(&b, "\n ]\n}\n");
    } else {
        const int w = 20;
        remat_buf_printf(&b, "graph %s: %u ops, %u tensors, %u backward steps, %u steps in all\n", g->name,
                         g->n_ops, g->n_tensors, a->n_bwd, a->n_steps);
        remat_buf_printf(&b, "%-20s %-10s %14s %-*s %-*s %-*s %-*s %-*s\n", "tensor", "kind", "bytes", w + 1,
                         " birth", w + 1, " last_fwd_use", w + 1, " last_bwd_use", w + 1, " free", w + 1,
                         " grad (birth..free)");
        for (uint32_t t = 0; t < g->n_tensors && !b.failed; t++) {
            const remat_tensor *T = &g->tensors[t];
            const remat_lifetime *L = &a->life[t];
            remat_buf_printf(&b, "%-20s %-10s %14llu", T->id, remat_tensor_kind_str(T->kind),
                             (unsigned long long)T->bytes);
            if (T->kind != REMAT_TENSOR_ACTIVATION) {
                remat_buf_printf(&b, " %-*s", 3 * (w + 1) + w, "(resident for the whole step)");
            } else {
                text_step(&b, a, L->birth, w);
                text_step(&b, a, L->last_fwd_use, w);
                text_step(&b, a, L->last_bwd_use, w);
                text_step(&b, a, L->free, w);
            }
            if (L->grad_birth != REMAT_NONE) {
                char x[48], y[48];
                remat_buf_printf(&b, " %s..%s", remat_step_name(a, L->grad_birth, x, sizeof x),
                                 remat_step_name(a, L->grad_free, y, sizeof y));
            }
            if (T->alias_of != REMAT_NONE)
                remat_buf_printf(&b, " (view of %s)", g->tensors[T->storage].id);
            remat_buf_puts(&b, "\n");
        }
    }
    return remat_buf_finish(&b, len, err, "lifetime report");
}

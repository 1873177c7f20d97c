/*
 * trace_json.c - the trace as JSON (format "remat-trace", version 1) and as
 * CSV: the two tabular forms, complete enough to recompute every step's
 * high-water mark and its composition from the intervals alone (the format
 * is documented in include/remat/trace.h).
 *
 * Both are written row by row into one buffer; a failed allocation is noted
 * by the buffer and reported once at the end, so the caller gets the whole
 * document or nothing.
 */
#include "trace_internal.h"

#include <string.h>

static void json_budget(remat_buf *b, const remat_trace_options *o)
{
    if (o->budget_kind == REMAT_BUDGET_NONE) {
        remat_buf_puts(b, "null");
        return;
    }
    remat_buf_printf(b, "{\"kind\": \"%s\", \"bytes\": ", o->budget_kind == REMAT_BUDGET_TOTAL ? "total" : "activation");
    remat__json_count(b, o->budget);
    remat_buf_puts(b, "}");
}

static void json_steps(remat_buf *b, const remat_trace *t)
{
    for (size_t s = 0; s < t->n_steps && !b->failed; s++) {
        const remat_trace_step *st = &t->steps[s];
        remat_buf_puts(b, s ? ",\n  {\"index\": " : "\n  {\"index\": ");
        remat__put_u64(b, s);
        remat_buf_puts(b, ", \"instruction\": ");
        remat__trace_instr_text(b, t, s, 1);
        remat_buf_puts(b, ", \"kind\": \"");
        remat_buf_puts(b, remat__trace_kind(st->in));
        remat_buf_puts(b, "\", \"flops\": ");
        remat__json_count(b, st->flops);
        remat_buf_puts(b, ", \"live_after\": ");
        remat__json_count(b, st->live_after);
        remat_buf_puts(b, ", \"high_water\": ");
        remat__json_count(b, st->high_water);
        remat_buf_puts(b, ", \"by_category\": [");
        const uint64_t *hw = t->hw + s * REMAT_CAT_COUNT;
        for (int c = 0; c < REMAT_CAT_COUNT; c++) {
            if (c)
                remat_buf_putn(b, ", ", 2);
            remat__json_count(b, hw[c]);
        }
        remat_buf_puts(b, "]}");
    }
}

static void json_intervals(remat_buf *b, const remat_trace *t)
{
    const remat_graph *g = t->a->g;
    for (size_t i = 0; i < t->n_intervals && !b->failed; i++) {
        const remat_trace_interval *iv = &t->iv[i];
        remat_buf_puts(b, i ? ",\n  {\"id\": " : "\n  {\"id\": ");
        remat__trace_interval_id(b, t, i, 1);
        remat_buf_puts(b, ", \"tensor\": ");
        if (iv->storage == REMAT_NONE) {
            remat_buf_puts(b, "null");
        } else {
            remat_buf_putn(b, "\"", 1);
            remat__json_esc(b, g->tensors[iv->storage].id);
            remat_buf_putn(b, "\"", 1);
        }
        remat_buf_puts(b, iv->grad ? ", \"grad\": true, \"category\": \"" : ", \"grad\": false, \"category\": \"");
        remat_buf_puts(b, remat_category_name((remat_category)iv->category));
        remat_buf_puts(b, "\", \"bytes\": ");
        remat__json_count(b, iv->bytes);
        remat_buf_puts(b, ", \"alloc\": ");
        remat__put_u64(b, iv->alloc);
        remat_buf_puts(b, ", \"free\": ");
        if (iv->free == REMAT_TRACE_END)
            remat_buf_puts(b, "null");
        else
            remat__put_u64(b, iv->free);
        remat_buf_puts(b, ", \"why\": \"");
        remat_buf_puts(b, remat_trace_why_name((remat_trace_why)iv->why));
        remat_buf_puts(b, "\", \"by\": ");
        if (iv->why == REMAT_TRACE_WHY_LEAF || iv->why == REMAT_TRACE_WHY_LEDGER)
            remat_buf_puts(b, "null");
        else
            remat__trace_step_name(b, t, iv->alloc, 1);
        const remat_trace_use *u = t->uses + iv->use_off;
        remat_buf_puts(b, ", \"saved_for\": [");
        int first = 1;
        for (uint32_t k = 0; k < iv->n_uses; k++) {
            if (!u[k].saved)
                continue;
            if (!first)
                remat_buf_putn(b, ", ", 2);
            remat__trace_step_name(b, t, u[k].step, 1);
            first = 0;
        }
        remat_buf_puts(b, "], \"read_at\": [");
        first = 1;
        for (uint32_t k = 0; k < iv->n_uses; k++) {
            if (u[k].saved)
                continue;
            if (!first)
                remat_buf_putn(b, ", ", 2);
            remat__put_u64(b, u[k].step);
            first = 0;
        }
        remat_buf_puts(b, "]}");
    }
}

char *remat_trace_json(const remat_trace *t, const remat_trace_options *opts, size_t *len, remat_err *err)
{
    remat_trace_options o = remat__trace_opts(opts);
    const remat_graph *g = t->a->g;
    const remat_replay_result *r = &t->replay;
    remat_buf b;
    remat_buf_init(&b);
    remat_buf_printf(&b, "{\"format\": \"%s\", \"version\": %d,\n \"graph\": {\"name\": ", REMAT_TRACE_FORMAT,
                     REMAT_TRACE_VERSION);
    remat_buf_json_str(&b, g->name);
    remat_buf_printf(&b, ", \"fingerprint\": \"%016llx\"},\n \"label\": ", (unsigned long long)g->fingerprint);
    if (o.label)
        remat_buf_json_str(&b, o.label);
    else
        remat_buf_puts(&b, "null");
    remat_buf_puts(&b, ",\n \"budget\": ");
    json_budget(&b, &o);
    remat_buf_puts(&b, ",\n \"counting\": \"an interval counts in the high-water mark of every step s with "
                       "alloc <= s <= free and in the live_after of every step s with alloc <= s < free; "
                       "free null means through the last step; the peak is the largest high_water\",\n"
                       " \"categories\": [");
    for (int c = 0; c < REMAT_CAT_COUNT; c++)
        remat_buf_printf(&b, "%s\"%s\"", c ? ", " : "", remat_category_name((remat_category)c));
    remat_buf_printf(&b, "],\n \"n_steps\": %zu, \"first_backward_step\": ", t->n_steps);
    if (t->first_bwd < t->n_steps)
        remat_buf_printf(&b, "%zu", t->first_bwd);
    else
        remat_buf_puts(&b, "null");
    remat_buf_puts(&b, ",\n \"steps\": [");
    json_steps(&b, t);
    remat_buf_puts(&b, "\n ],\n \"intervals\": [");
    json_intervals(&b, t);
    remat_buf_puts(&b, "\n ],\n \"peak\": ");
    remat__trace_peak_json(&b, t, &o);
    remat_buf_puts(&b, ",\n \"totals\": {\"flops_forward\": ");
    remat__json_count(&b, r->flops_forward);
    remat_buf_puts(&b, ", \"flops_backward\": ");
    remat__json_count(&b, r->flops_backward);
    remat_buf_puts(&b, ", \"flops_recompute\": ");
    remat__json_count(&b, r->flops_recompute);
    remat_buf_puts(&b, ",\n  \"category_peaks\": {");
    for (int c = 0; c < REMAT_CAT_COUNT; c++) {
        remat_buf_printf(&b, "%s\"%s\": ", c ? ", " : "", remat_category_name((remat_category)c));
        remat__json_count(&b, r->category_peak[c]);
    }
    remat_buf_puts(&b, "},\n  \"sum_of_category_peaks\": ");
    remat__json_count(&b, r->sum_of_category_peaks);
    remat_buf_puts(&b, ", \"activation_peak_bytes\": ");
    remat__json_count(&b, r->activation_peak);
    remat_buf_puts(&b, "}\n}\n");
    return remat_buf_finish(&b, len, err, "JSON trace");
}

/* ---- CSV ---------------------------------------------------------------- */

/* One RFC 4180 field: quoted (quotes doubled) when it holds a comma, a
 * quote or a line break; as is otherwise. */
static void csv_field(remat_buf *b, const char *s, size_t n)
{
    int quote = 0;
    for (size_t i = 0; i < n && !quote; i++)
        quote = s[i] == ',' || s[i] == '"' || s[i] == '\r' || s[i] == '\n';
    if (!quote) {
        remat_buf_putn(b, s, n);
        return;
    }
    remat_buf_putn(b, "\"", 1);
    const char *run = s;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '"') {
            remat_buf_putn(b, run, (size_t)(s + i + 1 - run));
            remat_buf_putn(b, "\"", 1);
            run = s + i + 1;
        }
    remat_buf_putn(b, run, (size_t)(s + n - run));
    remat_buf_putn(b, "\"", 1);
}

/* Builds a field in tmp (reset first) and appends it quoted as needed. */
static void csv_put(remat_buf *b, remat_buf *tmp)
{
    if (tmp->failed)
        b->failed = 1;
    csv_field(b, tmp->data ? tmp->data : "", tmp->len);
    tmp->len = 0;
    if (tmp->data)
        tmp->data[0] = '\0';
}

char *remat_trace_csv(const remat_trace *t, const remat_trace_options *opts, size_t *len, remat_err *err)
{
    (void)opts;
    const remat_graph *g = t->a->g;
    remat_buf b, tmp;
    remat_buf_init(&b);
    remat_buf_init(&tmp);
    remat_buf_puts(&b, "id,tensor,grad,category,bytes,alloc,free,why,by,saved_for\r\n");
    for (size_t i = 0; i < t->n_intervals && !b.failed; i++) {
        const remat_trace_interval *iv = &t->iv[i];
        remat__trace_interval_id(&tmp, t, i, 0);
        csv_put(&b, &tmp);
        remat_buf_puts(&b, ",");
        if (iv->storage != REMAT_NONE) {
            remat_buf_puts(&tmp, g->tensors[iv->storage].id);
            csv_put(&b, &tmp);
        }
        remat_buf_puts(&b, iv->grad ? ",1," : ",0,");
        remat_buf_puts(&b, remat_category_name((remat_category)iv->category));
        remat_buf_putn(&b, ",", 1);
        remat__put_u64(&b, iv->bytes);
        remat_buf_putn(&b, ",", 1);
        remat__put_u64(&b, iv->alloc);
        remat_buf_putn(&b, ",", 1);
        if (iv->free != REMAT_TRACE_END)
            remat__put_u64(&b, iv->free);
        remat_buf_putn(&b, ",", 1);
        remat_buf_puts(&b, remat_trace_why_name((remat_trace_why)iv->why));
        remat_buf_putn(&b, ",", 1);
        if (iv->why != REMAT_TRACE_WHY_LEAF && iv->why != REMAT_TRACE_WHY_LEDGER) {
            remat__trace_step_name(&tmp, t, iv->alloc, 0);
            csv_put(&b, &tmp);
        }
        remat_buf_puts(&b, ",");
        const remat_trace_use *u = t->uses + iv->use_off;
        int first = 1;
        for (uint32_t k = 0; k < iv->n_uses; k++) {
            if (!u[k].saved)
                continue;
            if (!first)
                remat_buf_puts(&tmp, ";");
            remat__trace_step_name(&tmp, t, u[k].step, 0);
            first = 0;
        }
        if (!first)
            csv_put(&b, &tmp);
        remat_buf_puts(&b, "\r\n");
    }
    if (tmp.failed)
        b.failed = 1;
    remat_buf_destroy(&tmp);
    return remat_buf_finish(&b, len, err, "CSV trace");
}

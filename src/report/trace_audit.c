/*
 * trace_audit.c - why each allocation is live at a given step, the largest
 * ones at a step, and the audit of the peak built from them.
 *
 * The explanations come from the uses recorded with each interval (which
 * forward steps read it, which backward steps save it) and from its kind, so
 * they name the step that keeps a tensor alive, not a rule: "saved for
 * bwd:a1 (step 12)", "input of fwd:h2 (step 4), then saved for ...",
 * "gradient of h1, written by bwd:a1, read by bwd:h1 (step 14)".
 */
#include "trace_internal.h"

#include <stdio.h>
#include <string.h>

/* ---- Why live ----------------------------------------------------------- */

/* A step name into a fixed buffer, without allocating (why_live is a
 * one-line summary: a very long id may be cut there; the documents write
 * names whole). */
static const char *step_str(const remat_trace *t, size_t s, char *buf, size_t cap)
{
    const remat_graph *g = t->a->g;
    remat_instr in = t->steps[s].in;
    if (in.kind == REMAT_I_OPT)
        snprintf(buf, cap, "optimizer");
    else
        snprintf(buf, cap, "%s:%s", remat__trace_kind(in),
                 in.kind == REMAT_I_FREE ? g->tensors[in.arg].id : g->ops[in.arg].id);
    return buf;
}

static const char *leaf_kind(const remat_tensor *T)
{
    if (T->kind == REMAT_TENSOR_INPUT)
        return "input";
    return T->frozen ? "frozen param" : "param";
}

const char *remat_trace_why_live(const remat_trace *t, size_t i, size_t s, char *buf, size_t cap)
{
    const remat_graph *g = t->a->g;
    const remat_trace_interval *iv = &t->iv[i];
    char a[160], b2[160];
    switch ((remat_trace_why)iv->why) {
    case REMAT_TRACE_WHY_LEAF:
        snprintf(buf, cap, "leaf: %s, resident throughout", leaf_kind(&g->tensors[iv->storage]));
        return buf;
    case REMAT_TRACE_WHY_LEDGER:
        snprintf(buf, cap, "ledger: %s, resident throughout", remat_category_name((remat_category)iv->category));
        return buf;
    case REMAT_TRACE_WHY_WORKSPACE:
        snprintf(buf, cap, "workspace of %s, held while it runs", step_str(t, iv->alloc, a, sizeof a));
        return buf;
    case REMAT_TRACE_WHY_TRANSIENT:
        snprintf(buf, cap, "transient bytes counted by %s", step_str(t, iv->alloc, a, sizeof a));
        return buf;
    case REMAT_TRACE_WHY_GRADIENT: {
        const remat_tensor *T = &g->tensors[iv->storage];
        if (T->kind != REMAT_TENSOR_ACTIVATION)
            snprintf(buf, cap, "gradient of %s %s, kept for the optimizer", leaf_kind(T), T->id);
        else if (iv->free == REMAT_TRACE_END)
            snprintf(buf, cap, "gradient of %s, kept to the end", T->id);
        else
            snprintf(buf, cap, "gradient of %s, written by %s, read by %s (step %zu)", T->id,
                     step_str(t, iv->alloc, a, sizeof a), step_str(t, iv->free, b2, sizeof b2), iv->free);
        return buf;
    }
    case REMAT_TRACE_WHY_SHARDING:
        if (iv->category == REMAT_CAT_GATHERED_PARAMS)
            snprintf(buf, cap, "a unit gathered by %s (step %zu), until its RELEASE", step_str(t, iv->alloc, a, sizeof a),
                     iv->alloc);
        else if (iv->grad)
            snprintf(buf, cap, "the rank's gradient partition, from %s (step %zu) to the optimizer step",
                     step_str(t, iv->alloc, a, sizeof a), iv->alloc);
        else
            snprintf(buf, cap, "the padding of ZeRO's flat group, held throughout");
        return buf;
    case REMAT_TRACE_WHY_PRODUCED:
    case REMAT_TRACE_WHY_RECOMPUTED:
    default: break;
    }
    const remat_tensor *T = &g->tensors[iv->storage];
    const remat_trace_use *u = t->uses + iv->use_off, *next = NULL, *save = NULL;
    for (uint32_t k = 0; k < iv->n_uses; k++) {
        if (u[k].step < s)
            continue;
        if (!next)
            next = &u[k];
        if (u[k].saved) {
            save = &u[k];
            break;
        }
    }
    size_t len = 0;
    int w;
    if (iv->alloc == s)
        w = snprintf(buf, cap, "just %s; ", iv->why == REMAT_TRACE_WHY_RECOMPUTED ? "recomputed" : "produced");
    else if (iv->why == REMAT_TRACE_WHY_RECOMPUTED)
        w = snprintf(buf, cap, "recomputed by %s (step %zu); ", step_str(t, iv->alloc, a, sizeof a), iv->alloc);
    else
        w = snprintf(buf, cap, "%s", "");
    len = w > 0 && (size_t)w < cap ? (size_t)w : 0;
    char *p = buf + len;
    size_t left = cap - len;
    if (next && !next->saved) {
        w = snprintf(p, left, "input of %s (step %zu)", step_str(t, next->step, a, sizeof a), next->step);
        if (w > 0 && (size_t)w < left && save)
            snprintf(p + w, left - (size_t)w, ", then saved for %s (step %zu)", step_str(t, save->step, b2, sizeof b2),
                     save->step);
    } else if (save) {
        if (save->tensor != iv->storage)
            snprintf(p, left, "saved for %s (step %zu) through view %s", step_str(t, save->step, a, sizeof a),
                     save->step, g->tensors[save->tensor].id);
        else
            snprintf(p, left, "saved for %s (step %zu)", step_str(t, save->step, a, sizeof a), save->step);
    } else if (iv->free == REMAT_TRACE_END) {
        snprintf(p, left, "no further use; never freed");
    } else if (t->a->is_output[iv->storage] && t->steps[iv->free].in.kind == REMAT_I_FREE) {
        snprintf(p, left, "graph output %s, held until %s (step %zu)", T->id, step_str(t, iv->free, a, sizeof a),
                 iv->free);
    } else {
        snprintf(p, left, "no further use; released by %s (step %zu)", step_str(t, iv->free, a, sizeof a),
                 iv->free);
    }
    return buf;
}

static int is_resident(const remat_trace_interval *iv)
{
    return iv->why == REMAT_TRACE_WHY_LEAF || iv->why == REMAT_TRACE_WHY_LEDGER ||
           (iv->why == REMAT_TRACE_WHY_SHARDING && iv->category == REMAT_CAT_PARAMS);
}

size_t remat_trace_top_at(const remat_trace *t, size_t s, remat_trace_top_filter filter, size_t *idx, size_t cap,
                          size_t *n_live, uint64_t *bytes_live)
{
    size_t n = 0, live = 0;
    uint64_t bytes = 0;
    for (size_t i = 0; i < t->n_intervals; i++) {
        const remat_trace_interval *iv = &t->iv[i];
        if (iv->alloc > s)
            break; /* by alloc step: nothing later is live yet */
        if (iv->free != REMAT_TRACE_END && iv->free < s)
            continue;
        if ((filter == REMAT_TRACE_TOP_NOT_RESIDENT && is_resident(iv)) ||
            (filter == REMAT_TRACE_TOP_RESIDENT && !is_resident(iv)))
            continue;
        live++;
        bytes += iv->bytes; /* live at one step: bounded by that step's high-water mark */
        /* Insertion into a short list kept largest first; an equal size
         * goes after the ones already there (earlier intervals win ties). */
        size_t pos = n;
        while (pos > 0 && t->iv[idx[pos - 1]].bytes < iv->bytes)
            pos--;
        if (pos >= cap)
            continue;
        size_t last = n < cap ? n : cap - 1;
        memmove(idx + pos + 1, idx + pos, (last - pos) * sizeof *idx);
        idx[pos] = i;
        if (n < cap)
            n++;
    }
    if (n_live)
        *n_live = live;
    if (bytes_live)
        *bytes_live = bytes;
    return n;
}

/* ---- The peak object and the audit ---------------------------------------- */

/* Appends a JSON array of the largest intervals live at step p. */
static void top_json(remat_buf *b, const remat_trace *t, size_t p, remat_trace_top_filter filter, size_t *idx,
                     size_t cap)
{
    size_t n = remat_trace_top_at(t, p, filter, idx, cap, NULL, NULL);
    char why[512];
    remat_buf_puts(b, "[");
    for (size_t k = 0; k < n; k++) {
        const remat_trace_interval *iv = &t->iv[idx[k]];
        remat_buf_puts(b, k ? ",\n    {\"id\": " : "\n    {\"id\": ");
        remat__trace_interval_id(b, t, idx[k], 1);
        remat_buf_printf(b, ", \"category\": \"%s\", \"bytes\": ", remat_category_name((remat_category)iv->category));
        remat__json_count(b, iv->bytes);
        remat_buf_puts(b, ", \"why_live\": ");
        remat_buf_json_str(b, remat_trace_why_live(t, idx[k], p, why, sizeof why));
        remat_buf_puts(b, "}");
    }
    remat_buf_puts(b, "]");
}

void remat__trace_peak_json(remat_buf *b, const remat_trace *t, const remat_trace_options *o)
{
    const remat_replay_result *r = &t->replay;
    size_t p = r->peak_index;
    size_t *idx = remat__array(o->top, sizeof *idx);
    if (!idx) {
        b->failed = 1;
        return;
    }
    remat_buf_puts(b, "{\"bytes\": ");
    remat__json_count(b, r->peak_bytes);
    remat_buf_printf(b, ", \"step\": %zu, \"instruction\": ", p);
    remat__trace_instr_text(b, t, p, 1);
    remat_buf_puts(b, ", \"by_category\": {");
    for (int c = 0; c < REMAT_CAT_COUNT; c++) {
        remat_buf_printf(b, "%s\"%s\": ", c ? ", " : "", remat_category_name((remat_category)c));
        remat__json_count(b, r->peak_by_category[c]);
    }
    remat_buf_puts(b, "},\n  \"top\": ");
    top_json(b, t, p, REMAT_TRACE_TOP_ALL, idx, o->top);
    remat_buf_puts(b, ",\n  \"top_not_resident\": ");
    top_json(b, t, p, REMAT_TRACE_TOP_NOT_RESIDENT, idx, o->top);
    remat_buf_puts(b, "}");
    remat__free(idx);
}

/* Appends the text lines of the largest intervals live at step p. */
static void top_text(remat_buf *b, const remat_trace *t, size_t p, const size_t *idx, size_t n)
{
    char why[512];
    for (size_t k = 0; k < n; k++) {
        const remat_trace_interval *iv = &t->iv[idx[k]];
        remat_buf_printf(b, "  %15llu B  %-17s ", (unsigned long long)iv->bytes,
                         remat_category_name((remat_category)iv->category));
        remat__trace_interval_id(b, t, idx[k], 0);
        remat_buf_printf(b, ": %s\n", remat_trace_why_live(t, idx[k], p, why, sizeof why));
    }
}

char *remat_trace_audit(const remat_trace *t, const remat_trace_options *opts, remat_report_format fmt,
                        size_t *len, remat_err *err)
{
    remat_trace_options o = remat__trace_opts(opts);
    const remat_graph *g = t->a->g;
    const remat_replay_result *r = &t->replay;
    size_t p = r->peak_index, n_live, n_res;
    uint64_t b_res;
    size_t *idx = remat__array(o.top, sizeof *idx);
    if (!idx) {
        remat_err_set(err, REMAT_ENOMEM, "out of memory writing the audit");
        return NULL;
    }
    remat_trace_top_at(t, p, REMAT_TRACE_TOP_ALL, idx, 0, &n_live, NULL);
    remat_trace_top_at(t, p, REMAT_TRACE_TOP_RESIDENT, idx, 0, &n_res, &b_res);
    remat_buf b;
    remat_buf_init(&b);
    if (fmt == REMAT_REPORT_JSON) {
        remat_buf_puts(&b, "{\"graph\": ");
        remat_buf_json_str(&b, g->name);
        remat_buf_puts(&b, ", \"label\": ");
        if (o.label)
            remat_buf_json_str(&b, o.label);
        else
            remat_buf_puts(&b, "null");
        remat_buf_printf(&b, ", \"n_steps\": %zu,\n \"peak\": ", t->n_steps);
        remat__trace_peak_json(&b, t, &o);
        remat_buf_printf(&b, ",\n \"resident\": {\"count\": %zu, \"bytes\": ", n_res);
        remat__json_count(&b, b_res);
        remat_buf_puts(&b, "},\n \"category_peaks\": {");
        for (int c = 0; c < REMAT_CAT_COUNT; c++) {
            remat_buf_printf(&b, "%s\"%s\": ", c ? ", " : "", remat_category_name((remat_category)c));
            remat__json_count(&b, r->category_peak[c]);
        }
        remat_buf_puts(&b, "}, \"sum_of_category_peaks\": ");
        remat__json_count(&b, r->sum_of_category_peaks);
        remat_buf_printf(&b, ", \"live_at_peak\": %zu}\n", n_live);
        remat__free(idx);
        return remat_buf_finish(&b, len, err, "audit");
    }
    char x[64], y[64];
    remat_buf_printf(&b, "graph %s%s%s: %zu steps, peak %s\n", g->name, o.label ? ", " : "", o.label ? o.label : "",
                     t->n_steps, remat_format_bytes(r->peak_bytes, x, sizeof x));
    remat_buf_printf(&b, "peak at step %zu: ", p);
    remat__trace_instr_text(&b, t, p, 0);
    remat_buf_printf(&b, " (%s)\n\nat the peak, by category:\n", p < t->first_bwd ? "forward" : "backward");
    for (int c = 0; c < REMAT_CAT_COUNT; c++) {
        uint64_t v = r->peak_by_category[c];
        if (!v)
            continue;
        double pct = r->peak_bytes ? 100.0 * (double)v / (double)r->peak_bytes : 0.0;
        remat_buf_printf(&b, "  %-17s %15llu B  %12s  %5.1f%%\n", remat_category_name((remat_category)c),
                         (unsigned long long)v, remat_format_bytes_short(v, y, sizeof y), pct);
    }
    remat_buf_printf(&b, "  %-17s %15llu B  %12s\n", "total", (unsigned long long)r->peak_bytes,
                     remat_format_bytes_short(r->peak_bytes, y, sizeof y));
    remat_buf_printf(&b, "sum of category peaks %s: the categories peak at different steps\n",
                     remat_format_bytes(r->sum_of_category_peaks, x, sizeof x));
    size_t n_other, n = remat_trace_top_at(t, p, REMAT_TRACE_TOP_NOT_RESIDENT, idx, o.top, &n_other, NULL);
    remat_buf_printf(&b, "\nlargest live at the peak, leaves and ledger aside (%zu of %zu):\n", n, n_other);
    top_text(&b, t, p, idx, n);
    n = remat_trace_top_at(t, p, REMAT_TRACE_TOP_RESIDENT, idx, o.top < 5 ? o.top : 5, NULL, NULL);
    remat_buf_printf(&b, "\nresident throughout: %zu leaves and ledger extras, %s; the largest %zu:\n", n_res,
                     remat_format_bytes(b_res, x, sizeof x), n);
    top_text(&b, t, p, idx, n);
    remat__free(idx);
    return remat_buf_finish(&b, len, err, "audit");
}

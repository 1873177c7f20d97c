/*
 * alloc_report.c - the allocator simulation as text and JSON (`remat
 * alloc`), and the static plan's offsets inside a plan file.
 *
 * Every figure is one the simulation computed; this file only lays them
 * out. Byte counts are exact integers; ratios are fractions of the logical
 * peak.
 */
#include "remat/alloc.h"
#include "remat/report.h"
#include "../util/util_internal.h"

#include <stdio.h>
#include <string.h>

static const char *mask_name(uint32_t mask)
{
    return mask == REMAT_ALLOC_ALL ? "all" : mask == REMAT_ALLOC_ACTIVATION ? "activation" : "custom";
}

/* The step an index names: "resident" for state placed before the first
 * instruction. */
static const char *step_of(const remat_analysis *a, const remat_schedule *s, size_t i, char *buf, size_t cap)
{
    if (i == REMAT_ALLOC_BEFORE) {
        snprintf(buf, cap, "resident");
        return buf;
    }
    return remat_report_step_name(a->g, s, i, buf, cap);
}

static double ratio(uint64_t x, uint64_t of)
{
    return of ? (double)x / (double)of : 0.0;
}

static void json_index(remat_buf *b, size_t i)
{
    if (i == REMAT_ALLOC_BEFORE)
        remat_buf_puts(b, "-1");
    else
        remat_buf_printf(b, "%zu", i);
}

static void json_policy(remat_buf *b, const remat_analysis *a, const remat_schedule *s, const remat_alloc_result *r)
{
    char step[256];
    remat_buf_printf(b, "{\"policy\": \"%s\", \"high_water_bytes\": %llu, \"high_water_step\": ",
                     remat_alloc_policy_name(r->policy), (unsigned long long)r->high_water);
    remat_buf_json_str(b, step_of(a, s, r->high_water_index, step, sizeof step));
    remat_buf_puts(b, ", \"high_water_index\": ");
    json_index(b, r->high_water_index);
    remat_buf_printf(b,
                     ", \"fragmentation_bytes\": %llu, \"fragmentation_ratio\": %.6f,\n"
                     "    \"live_at_high_water_bytes\": %llu, \"free_at_high_water_bytes\": %llu, "
                     "\"largest_free_at_high_water_bytes\": %llu,\n"
                     "    \"extent_at_logical_peak_bytes\": %llu, \"largest_free_at_logical_peak_bytes\": %llu, "
                     "\"allocated_peak_bytes\": %llu",
                     (unsigned long long)r->fragmentation, ratio(r->fragmentation, r->logical_peak),
                     (unsigned long long)r->live_at_high_water, (unsigned long long)r->free_at_high_water,
                     (unsigned long long)r->largest_free_at_high_water, (unsigned long long)r->extent_at_logical_peak,
                     (unsigned long long)r->largest_free_at_logical_peak, (unsigned long long)r->allocated_peak);
    if (r->policy == REMAT_ALLOC_CACHING)
        remat_buf_printf(b, ", \"segments\": {\"small\": %llu, \"large\": %llu}",
                         (unsigned long long)r->segments_small, (unsigned long long)r->segments_large);
    remat_buf_printf(b, ", \"allocations\": %llu, \"seconds\": %.6f}", (unsigned long long)r->allocations, r->seconds);
}

static void json_static(remat_buf *b, const remat_static_result *sp)
{
    remat_buf_printf(b,
                     "{\"algorithm\": \"%s\", \"chosen\": \"%s\", \"arena_bytes\": %llu, \"lower_bound_bytes\": %llu, "
                     "\"over_bound_bytes\": %llu, \"over_bound_ratio\": %.6f,\n   \"by_algorithm\": {",
                     remat_static_algo_name(sp->algo), remat_static_algo_name(sp->chosen),
                     (unsigned long long)sp->arena_bytes, (unsigned long long)sp->lower_bound,
                     (unsigned long long)(sp->arena_bytes - sp->lower_bound),
                     ratio(sp->arena_bytes - sp->lower_bound, sp->lower_bound));
    int first = 1;
    for (int i = 0; i < REMAT_STATIC_N_ALGOS; i++) {
        if (sp->ran[i] == 0)
            continue;
        remat_buf_printf(b, "%s\"%s\": ", first ? "" : ", ", remat_static_algo_name((remat_static_algo)i));
        first = 0;
        if (sp->ran[i] < 0)
            remat_buf_printf(b, "{\"arena_bytes\": null, \"gave_up\": true, \"seconds\": %.6f}", sp->seconds_by_algo[i]);
        else
            remat_buf_printf(b, "{\"arena_bytes\": %llu, \"seconds\": %.6f}", (unsigned long long)sp->arena_by_algo[i],
                             sp->seconds_by_algo[i]);
    }
    remat_buf_printf(b, "}, \"seconds\": %.6f}", sp->seconds);
}

static void json_assumptions(remat_buf *b)
{
    const char *p = remat_alloc_caching_assumptions();
    remat_buf_puts(b, "[");
    int first = 1;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), p);
        remat_buf_puts(b, first ? "\n   " : ",\n   ");
        remat_buf_json_str(b, line);
        first = 0;
        p += n + (nl ? 1 : 0);
    }
    remat_buf_puts(b, "]");
}

char *remat_report_alloc(const remat_analysis *a, const remat_schedule *s, const remat_alloc_trace *t,
                         const remat_alloc_result *const *policies, size_t n_policies,
                         const remat_static_result *sp, int json, size_t *len, remat_err *err)
{
    remat_buf b;
    remat_buf_init(&b);
    char step[256], x[64], y[64];
    int caching = 0;
    for (size_t i = 0; i < n_policies; i++)
        caching |= policies[i] && policies[i]->policy == REMAT_ALLOC_CACHING;
    if (json) {
        remat_buf_puts(&b, "{\"graph\": ");
        remat_buf_json_str(&b, a->g->name);
        remat_buf_printf(&b,
                         ", \"instructions\": %zu, \"allocations\": %zu, \"categories\": \"%s\", "
                         "\"address_space\": \"one, resident state first\",\n \"logical_peak_bytes\": %llu, "
                         "\"logical_peak_step\": ",
                         t->n_steps, t->n, mask_name(t->mask), (unsigned long long)t->logical_peak);
        remat_buf_json_str(&b, step_of(a, s, t->logical_peak_index, step, sizeof step));
        remat_buf_puts(&b, ", \"logical_peak_index\": ");
        json_index(&b, t->logical_peak_index);
        remat_buf_printf(&b, ", \"resident_bytes\": %llu, \"trace_seconds\": %.6f,\n \"dynamic\": [",
                         (unsigned long long)t->resident_bytes, t->seconds);
        int first = 1;
        for (size_t i = 0; i < n_policies; i++) {
            if (!policies[i])
                continue;
            remat_buf_puts(&b, first ? "\n  " : ",\n  ");
            json_policy(&b, a, s, policies[i]);
            first = 0;
        }
        remat_buf_puts(&b, "]");
        if (sp) {
            remat_buf_puts(&b, ",\n \"static\": ");
            json_static(&b, sp);
        }
        if (caching) {
            remat_buf_puts(&b, ",\n \"caching_assumptions\": ");
            json_assumptions(&b);
        }
        remat_buf_puts(&b, "}\n");
        return remat_buf_finish(&b, len, err, "allocator report");
    }
    remat_buf_printf(&b, "graph %s: %zu instructions, %zu allocations (%s categories; one address space, "
                         "resident state first)\n",
                     a->g->name, t->n_steps, t->n, mask_name(t->mask));
    remat_buf_printf(&b, "logical peak     %s at %s; resident %s\n", remat_format_bytes(t->logical_peak, x, sizeof x),
                     step_of(a, s, t->logical_peak_index, step, sizeof step),
                     remat_format_bytes_short(t->resident_bytes, y, sizeof y));
    if (n_policies) {
        remat_buf_printf(&b, "\n%-12s %20s %18s %8s %20s %20s %10s\n", "allocator", "high-water (B)",
                         "fragmentation (B)", "frag %", "free at HW (B)", "largest free (B)", "time (ms)");
        for (size_t i = 0; i < n_policies; i++) {
            const remat_alloc_result *r = policies[i];
            if (!r)
                continue;
            remat_buf_printf(&b, "%-12s %20llu %18llu %7.2f%% %20llu %20llu %10.2f\n", remat_alloc_policy_name(r->policy),
                             (unsigned long long)r->high_water, (unsigned long long)r->fragmentation,
                             100.0 * ratio(r->fragmentation, r->logical_peak), (unsigned long long)r->free_at_high_water,
                             (unsigned long long)r->largest_free_at_high_water, 1000.0 * r->seconds);
        }
        for (size_t i = 0; i < n_policies; i++) {
            const remat_alloc_result *r = policies[i];
            if (!r)
                continue;
            remat_buf_printf(&b, "  %s: high-water first reached at %s", remat_alloc_policy_name(r->policy),
                             step_of(a, s, r->high_water_index, step, sizeof step));
            if (r->policy == REMAT_ALLOC_CACHING)
                remat_buf_printf(&b, "; allocated peak %s (rounding), %llu small + %llu large segments",
                                 remat_format_bytes(r->allocated_peak, x, sizeof x),
                                 (unsigned long long)r->segments_small, (unsigned long long)r->segments_large);
            remat_buf_printf(&b, "; at the logical peak: extent %s, largest free %s\n",
                             remat_format_bytes_short(r->extent_at_logical_peak, x, sizeof x),
                             remat_format_bytes_short(r->largest_free_at_logical_peak, y, sizeof y));
        }
    }
    if (sp) {
        remat_buf_printf(&b, "\n%-16s %20s %18s %8s %10s\n", "static plan", "arena (B)", "over bound (B)", "over %",
                         "time (ms)");
        for (int i = 0; i < REMAT_STATIC_N_ALGOS; i++) {
            if (sp->ran[i] == 0)
                continue;
            if (sp->ran[i] < 0) {
                remat_buf_printf(&b, "%-16s %20s %18s %8s %10.2f\n", remat_static_algo_name((remat_static_algo)i),
                                 "gave up", "-", "-", 1000.0 * sp->seconds_by_algo[i]);
                continue;
            }
            uint64_t ar = sp->arena_by_algo[i];
            remat_buf_printf(&b, "%-16s %20llu %18llu %7.2f%% %10.2f\n", remat_static_algo_name((remat_static_algo)i),
                             (unsigned long long)ar, (unsigned long long)(ar - sp->lower_bound),
                             100.0 * ratio(ar - sp->lower_bound, sp->lower_bound), 1000.0 * sp->seconds_by_algo[i]);
        }
        remat_buf_printf(&b, "arena            %s by %s; lower bound (logical peak) %s\n",
                         remat_format_bytes(sp->arena_bytes, x, sizeof x), remat_static_algo_name(sp->chosen),
                         remat_format_bytes(sp->lower_bound, y, sizeof y));
    }
    remat_buf_printf(&b, "trace            %.2f ms (replay and recording)\n", 1000.0 * t->seconds);
    if (caching) {
        remat_buf_puts(&b, "\ncaching model assumptions:\n");
        const char *p = remat_alloc_caching_assumptions();
        while (*p) {
            const char *nl = strchr(p, '\n');
            size_t n = nl ? (size_t)(nl - p) : strlen(p);
            remat_buf_puts(&b, "  ");
            remat_buf_putn(&b, p, n);
            remat_buf_puts(&b, "\n");
            p += n + (nl ? 1 : 0);
        }
    }
    return remat_buf_finish(&b, len, err, "allocator report");
}

char *remat_report_plan_offsets(const remat_analysis *a, const remat_alloc_trace *t, const remat_static_result *sp,
                                char *plan_text, size_t *len, remat_err *err)
{
    const remat_graph *g = a->g;
    size_t n = plan_text ? strlen(plan_text) : 0;
    /* The plan file is one object ending in "}\n": the offsets go in before
     * that brace, so every other field stays as remat_report_plan wrote it. */
    while (n > 0 && (plan_text[n - 1] == '\n' || plan_text[n - 1] == ' '))
        n--;
    if (n == 0 || plan_text[n - 1] != '}') {
        remat_free(plan_text);
        remat_err_set(err, REMAT_EINTERNAL, "plan file does not end with an object");
        return NULL;
    }
    n--;
    while (n > 0 && (plan_text[n - 1] == '\n' || plan_text[n - 1] == ' '))
        n--;
    remat_buf b;
    remat_buf_init(&b);
    remat_buf_putn(&b, plan_text, n);
    remat_free(plan_text);
    remat_buf_printf(&b,
                     ",\n \"offsets\": {\"arena_bytes\": %llu, \"lower_bound_bytes\": %llu, \"algorithm\": \"%s\", "
                     "\"categories\": \"%s\",\n  \"intervals\": [",
                     (unsigned long long)sp->arena_bytes, (unsigned long long)sp->lower_bound,
                     remat_static_algo_name(sp->chosen), mask_name(t->mask));
    for (size_t k = 0; k < t->n; k++) {
        const remat_alloc_interval *v = &t->iv[k];
        remat_buf_puts(&b, k ? ",\n   {\"tensor\": " : "\n   {\"tensor\": ");
        if (v->tensor == REMAT_NONE)
            remat_buf_puts(&b, "null");
        else
            remat_buf_json_str(&b, g->tensors[v->tensor].id);
        if (v->category == REMAT_CAT_WORKSPACE) {
            remat_buf_puts(&b, ", \"op\": ");
            if (v->op == REMAT_NONE)
                remat_buf_puts(&b, "null");
            else
                remat_buf_json_str(&b, g->ops[v->op].id);
        }
        remat_buf_printf(&b, ", \"grad\": %s, \"category\": \"%s\", \"instruction\": ", v->grad ? "true" : "false",
                         remat_category_name((remat_category)v->category));
        json_index(&b, v->first);
        remat_buf_puts(&b, ", \"free\": ");
        if (v->last == REMAT_ALLOC_NEVER)
            remat_buf_puts(&b, "null");
        else
            remat_buf_printf(&b, "%zu", v->last);
        remat_buf_printf(&b, ", \"offset\": %llu, \"bytes\": %llu}", (unsigned long long)sp->offsets[k],
                         (unsigned long long)v->bytes);
    }
    remat_buf_puts(&b, "\n  ]}\n}\n");
    return remat_buf_finish(&b, len, err, "plan offsets");
}

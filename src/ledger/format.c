/*
 * format.c - the ledger as a table for people or JSON for programs.
 *
 * Both print exact bytes; the text adds GiB (2^30) and GB (10^9) columns,
 * each labelled, because the two differ by 7% at this scale and a budget
 * quoted in the wrong one is a wrong budget.
 */
#include "remat/ledger.h"
#include "../util/util_internal.h"

#include <stdio.h>
#include <string.h>

static const char *const labels[REMAT_LEDGER_CATEGORY_COUNT] = {
    "weights", "gradients",    "optimizer state", "master weights",
    "frozen",  "comm buffers", "workspace",       "fragmentation reserve",
};

static void text_row(remat_buf *b, const char *label, const char *dtype, const char *elements, uint64_t bytes)
{
    remat_buf_printf(b, "%-22s %-8s %20s %22llu %14.3f %14.3f\n", label, dtype, elements, (unsigned long long)bytes,
                     (double)bytes / 1073741824.0, (double)bytes / 1e9);
}

static void format_text(remat_buf *b, const remat_ledger_result *r)
{
    remat_buf_printf(b, "training-state ledger: %s, optimizer %s, ZeRO stage %u, %llu data-parallel device%s\n",
                     r->source, remat_ledger_optimizer_name(r->optimizer), r->zero_stage, (unsigned long long)r->dp,
                     r->dp == 1 ? "" : "s");
    remat_buf_printf(b, "parameters: %llu trainable elements (Psi), %llu frozen; figures are per device\n\n",
                     (unsigned long long)r->trainable_elements, (unsigned long long)r->frozen_elements);
    remat_buf_printf(b, "%-22s %-8s %20s %22s %14s %14s\n", "category", "dtype", "elements", "bytes", "GiB (2^30)",
                     "GB (10^9)");
    for (int k = 0; k < REMAT_LEDGER_CATEGORY_COUNT; k++) {
        const remat_ledger_line *l = remat_ledger_line_of(r, (remat_ledger_category)k);
        char el[24];
        int bytes_only = k == REMAT_LEDGER_WORKSPACE || k == REMAT_LEDGER_FRAGMENTATION_RESERVE;
        if (bytes_only)
            strcpy(el, "-");
        else
            snprintf(el, sizeof el, "%llu", (unsigned long long)l->elements);
        const char *dt = l->dtype == REMAT_LEDGER_DT_NONE ? "-" : remat_ledger_dtype_name(l->dtype);
        if (k == REMAT_LEDGER_OPTIMIZER_STATE && r->optimizer == REMAT_LEDGER_ADAM8BIT)
            dt = "u8+f32";
        text_row(b, labels[k], dt, el, l->bytes);
    }
    text_row(b, "total", "", "", r->total_bytes);
    if (r->host.bytes) {
        char el[24];
        snprintf(el, sizeof el, "%llu", (unsigned long long)r->host.elements);
        text_row(b, "host (not in total)", "", el, r->host.bytes);
    }
    if (r->offload_elements)
        remat_buf_printf(b, "offload transfers per step (not memory): %llu elements, %llu B between host and device\n",
                         (unsigned long long)r->offload_elements, (unsigned long long)r->offload_bytes);
    if (r->comm_elements)
        remat_buf_printf(b, "\ncommunication per step (not memory): %llu elements, %llu B in %s (%.3f GiB, %.3f GB)\n",
                         (unsigned long long)r->comm_elements, (unsigned long long)r->comm_bytes,
                         remat_ledger_dtype_name(r->comm_dtype), (double)r->comm_bytes / 1073741824.0,
                         (double)r->comm_bytes / 1e9);
    else
        remat_buf_puts(b, "\ncommunication per step (not memory): none (one device)\n");
    remat_buf_puts(b, "\nassumptions:\n");
    for (uint32_t i = 0; i < r->n_assumptions; i++)
        remat_buf_printf(b, "  - %s\n", r->assumptions[i]);
    remat_buf_puts(b, "excluded (not in the total):\n");
    for (uint32_t i = 0; i < r->n_excluded; i++)
        remat_buf_printf(b, "  - %s\n", r->excluded[i]);
}

static void json_strings(remat_buf *b, const char (*list)[REMAT_LEDGER_NOTE_LEN], uint32_t n)
{
    remat_buf_puts(b, "[");
    for (uint32_t i = 0; i < n; i++) {
        remat_buf_puts(b, i ? ",\n   " : "\n   ");
        remat_buf_json_str(b, list[i]);
    }
    remat_buf_puts(b, "]");
}

static void format_json(remat_buf *b, const remat_ledger_result *r)
{
    remat_buf_puts(b, "{\"source\": ");
    remat_buf_json_str(b, r->source);
    remat_buf_printf(b, ",\n \"optimizer\": \"%s\", \"zero_stage\": %u, \"dp\": %llu,\n",
                     remat_ledger_optimizer_name(r->optimizer), r->zero_stage, (unsigned long long)r->dp);
    remat_buf_printf(b, " \"params\": {\"trainable\": %llu, \"frozen\": %llu},\n",
                     (unsigned long long)r->trainable_elements, (unsigned long long)r->frozen_elements);
    remat_buf_puts(b, " \"dtypes\": {");
    for (int k = 0; k <= REMAT_LEDGER_FROZEN; k++) {
        const remat_ledger_line *l = remat_ledger_line_of(r, (remat_ledger_category)k);
        remat_buf_printf(b, "%s\"%s\": \"%s\"", k ? ", " : "", remat_ledger_category_name((remat_ledger_category)k),
                         remat_ledger_dtype_name(l->dtype));
    }
    remat_buf_puts(b, "},\n \"categories\": {");
    for (int k = 0; k < REMAT_LEDGER_CATEGORY_COUNT; k++)
        remat_buf_printf(b, "%s\"%s\": %llu", k ? ", " : "", remat_ledger_category_name((remat_ledger_category)k),
                         (unsigned long long)remat_ledger_line_of(r, (remat_ledger_category)k)->bytes);
    remat_buf_puts(b, "},\n \"elements\": {");
    for (int k = 0; k <= REMAT_LEDGER_COMM_BUFFERS; k++)
        remat_buf_printf(b, "%s\"%s\": %llu", k ? ", " : "", remat_ledger_category_name((remat_ledger_category)k),
                         (unsigned long long)remat_ledger_line_of(r, (remat_ledger_category)k)->elements);
    remat_buf_printf(b,
                     "},\n \"communication\": {\"elements_per_step\": %llu, \"bytes_per_step\": %llu, "
                     "\"dtype\": \"%s\"},\n",
                     (unsigned long long)r->comm_elements, (unsigned long long)r->comm_bytes,
                     remat_ledger_dtype_name(r->comm_dtype));
    remat_buf_printf(b,
                     " \"host\": {\"elements\": %llu, \"bytes\": %llu, \"step_tensors\": %llu},\n"
                     " \"offload\": {\"elements_per_step\": %llu, \"bytes_per_step\": %llu},\n",
                     (unsigned long long)r->host.elements, (unsigned long long)r->host.bytes,
                     (unsigned long long)r->step_tensors, (unsigned long long)r->offload_elements,
                     (unsigned long long)r->offload_bytes);
    remat_buf_printf(b, " \"total_bytes\": %llu,\n \"assumptions\": ", (unsigned long long)r->total_bytes);
    json_strings(b, r->assumptions, r->n_assumptions);
    remat_buf_puts(b, ",\n \"excluded\": ");
    json_strings(b, r->excluded, r->n_excluded);
    remat_buf_puts(b, "}\n");
}

char *remat_ledger_format(const remat_ledger_result *r, bool json, size_t *len, remat_err *err)
{
    remat_buf b;
    remat_buf_init(&b);
    if (json)
        format_json(&b, r);
    else
        format_text(&b, r);
    if (b.failed) {
        remat_buf_destroy(&b);
        remat_err_set(err, REMAT_ENOMEM, "out of memory formatting the ledger");
        return NULL;
    }
    if (len)
        *len = b.len;
    return b.data;
}

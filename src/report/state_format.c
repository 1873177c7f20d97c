/*
 * state_format.c - the state file: a model's parameters and optimizer
 * history as JSON that reads back bit for bit.
 *
 * Every float is printed with the fewest significant digits (15 to 17 for
 * a binary64, 6 to 9 for a binary32) that read back to the same value:
 * 17 and 9 always do, since strtod (which cJSON calls) rounds correctly,
 * and each shorter candidate is checked by reading it back the way the
 * reader does. So the value that reads back is the one written. NaN
 * and the infinities, which JSON numbers cannot spell, are the strings
 * "nan", "inf" and "-inf" (a diverged run still saves). The format is
 * documented in graphs/README.md ("State files") and read by
 * src/load/state_load.c.
 */
#include "remat/state.h"
#include "../util/util_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The shortest of %.{lo..hi}g that reads back (strtod, then a binary32
 * conversion for f32, as the reader does) to the same value; hi digits
 * always do: 17 for binary64, 9 for binary32. */
static void put_value(remat_buf *b, double v, int f32)
{
    if (isnan(v)) {
        remat_buf_puts(b, "\"nan\"");
        return;
    }
    if (isinf(v)) {
        remat_buf_puts(b, v > 0 ? "\"inf\"" : "\"-inf\"");
        return;
    }
    char text[40];
    for (int digits = f32 ? 6 : 15; digits <= (f32 ? 9 : 17); digits++) {
        snprintf(text, sizeof text, "%.*g", digits, v);
        double back = strtod(text, NULL);
        if (f32 ? (float)back == (float)v : back == v)
            break;
    }
    remat_buf_puts(b, text);
}

static void put_array(remat_buf *b, const uint8_t *p, uint64_t n, remat_elem dtype)
{
    remat_buf_puts(b, "[");
    for (uint64_t i = 0; i < n; i++) {
        double v;
        if (dtype == REMAT_ELEM_F32) {
            float f;
            memcpy(&f, p + 4 * i, 4);
            v = f;
        } else {
            memcpy(&v, p + 8 * i, 8);
        }
        if (i)
            remat_buf_puts(b, ", ");
        put_value(b, v, dtype == REMAT_ELEM_F32);
    }
    remat_buf_puts(b, "]");
}

char *remat_model_state_format(const remat_graph *g, const remat_model_state *s, size_t *len, remat_err *err)
{
    remat_buf b;
    remat_buf_init(&b);
    const remat_optim *o = &s->optim;
    remat_buf_puts(&b, "{\"format\": \"remat-state\", \"version\": 1,\n \"graph\": {\"name\": ");
    remat_buf_json_str(&b, g->name);
    remat_buf_printf(&b, ", \"fingerprint\": \"%016llx\"},\n", (unsigned long long)g->fingerprint);
    remat_buf_printf(&b, " \"dtype\": \"%s\", \"step\": %llu,\n", remat_elem_name(s->dtype),
                     (unsigned long long)s->step);
    remat_buf_printf(&b, " \"optimizer\": {\"name\": \"%s\", \"lr\": ", remat_ledger_optimizer_name(o->kind));
    put_value(&b, o->lr, 0);
    if (o->kind == REMAT_LEDGER_MOMENTUM) {
        remat_buf_puts(&b, ", \"momentum\": ");
        put_value(&b, o->momentum, 0);
    }
    if (o->kind == REMAT_LEDGER_ADAM || o->kind == REMAT_LEDGER_ADAMW) {
        remat_buf_puts(&b, ", \"beta1\": ");
        put_value(&b, o->beta1, 0);
        remat_buf_puts(&b, ", \"beta2\": ");
        put_value(&b, o->beta2, 0);
        remat_buf_puts(&b, ", \"eps\": ");
        put_value(&b, o->eps, 0);
    }
    remat_buf_puts(&b, ", \"weight_decay\": ");
    put_value(&b, o->weight_decay, 0);
    remat_buf_puts(&b, "},\n \"params\": {");
    uint32_t size = remat_elem_size(s->dtype), ns = remat_optim_states(o->kind), n = 0;
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        const remat_tensor *T = &g->tensors[t];
        if (T->kind != REMAT_TENSOR_PARAM || !s->value || !s->value[t])
            continue;
        uint64_t elems = size ? T->bytes / size : 0;
        remat_buf_puts(&b, n++ ? ",\n  " : "\n  ");
        remat_buf_json_str(&b, T->id);
        remat_buf_puts(&b, ": {\"shape\": [");
        for (uint32_t d = 0; d < T->ndim; d++)
            remat_buf_printf(&b, "%s%llu", d ? ", " : "", (unsigned long long)T->shape[d]);
        remat_buf_puts(&b, "],\n   \"value\": ");
        put_array(&b, s->value[t], elems, s->dtype);
        for (uint32_t j = 0; j < ns; j++) {
            if (!s->state[j] || !s->state[j][t])
                continue;
            remat_buf_printf(&b, ",\n   \"%s\": ", remat_optim_state_name(o->kind, j));
            put_array(&b, s->state[j][t], elems, s->dtype);
        }
        remat_buf_puts(&b, "}");
    }
    remat_buf_puts(&b, "}}\n");
    return remat_buf_finish(&b, len, err, "model state");
}

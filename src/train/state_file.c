/*
 * state_file.c - state files ("remat-state": reader and writer) and data
 * files ("remat-data": reader), in one module so the format has one owner.
 *
 * Both hold arrays of numbers for a graph's tensors, so both are read by one
 * routine that flattens nested arrays in row-major order, checks the
 * element count against the tensor's bytes and stores each number in the
 * tensor's own element type. Floats are JSON numbers (the writer prints 17
 * significant digits, which strtod reads back to the same binary64, and a
 * binary32 converted to binary64 and back is unchanged) or the strings
 * "nan", "inf" and "-inf" for what JSON cannot spell. Integers must be whole
 * numbers in range. Every error names the file and a JSON path, as the
 * plan reader's do, and carries them (with the tensor's id where one is at
 * fault) in remat_err.loc.
 *
 * The writer prints every float with the fewest significant digits (15 to
 * 17 for a binary64, 6 to 9 for a binary32) that read back to the same
 * value: 17 and 9 always do, since strtod (which cJSON calls) rounds
 * correctly, and each shorter candidate is checked by reading it back the
 * way the reader does. NaN and the infinities, which JSON numbers cannot
 * spell, are the strings "nan", "inf" and "-inf" (a diverged run still
 * saves). The format is documented in graphs/README.md ("State files").
 */
#include "../load/graph_store.h"
#include "../load/json_glue.h"
#include "remat/state.h"
#include "../util/util_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
    const remat_graph *g;
    const char *source;
    remat_err *err;
} reader;

/* Records "source: path: message" (REMAT_EGRAPH) with the file, the JSON
 * path and the tensor the message is about (id, may be NULL) in err's
 * location. */
static remat_status rfail_id(reader *R, const char *path, const char *id, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static remat_status rfail_id(reader *R, const char *path, const char *id, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    remat_status st = remat__err_vat(R->err, REMAT_EGRAPH, R->source, 0, 0, path, id, fmt, ap);
    va_end(ap);
    return st;
}

#define rfail(R, path, ...) rfail_id((R), (path), NULL, __VA_ARGS__)

static remat_status nomem(reader *R)
{
    return remat_err_set(R->err, REMAT_ENOMEM, "%s: out of memory", R->source);
}

/* A float from a number or one of the strings JSON has no number for. */
static int float_of(const cJSON *e, double *v)
{
    if (cJSON_IsNumber(e)) {
        *v = e->valuedouble;
        return 1;
    }
    if (!cJSON_IsString(e))
        return 0;
    const char *s = e->valuestring;
    if (strcasecmp(s, "nan") == 0 || strcasecmp(s, "-nan") == 0)
        *v = strcasecmp(s, "nan") == 0 ? NAN : -NAN;
    else if (strcasecmp(s, "inf") == 0 || strcasecmp(s, "infinity") == 0)
        *v = INFINITY;
    else if (strcasecmp(s, "-inf") == 0 || strcasecmp(s, "-infinity") == 0)
        *v = -INFINITY;
    else
        return 0;
    return 1;
}

/* Stores the numbers of a (possibly nested) array into dst, counting them
 * in *i; more than n is an error reported by the caller. */
static remat_status fill(reader *R, const cJSON *a, remat_elem elem, uint8_t *dst, uint64_t n, uint64_t *i,
                         const char *path, int depth)
{
    if (depth > 16)
        return rfail(R, path, "arrays nested deeper than 16 levels");
    for (const cJSON *e = a->child; e; e = e->next) {
        if (cJSON_IsArray(e)) {
            remat_status st = fill(R, e, elem, dst, n, i, path, depth + 1);
            if (st != REMAT_OK)
                return st;
            continue;
        }
        if (*i >= n)
            return rfail(R, path, "more than the tensor's %llu elements", (unsigned long long)n);
        double v;
        if (elem == REMAT_ELEM_F64 || elem == REMAT_ELEM_F32) {
            if (!float_of(e, &v))
                return rfail(R, path, "element %llu is not a number (or \"nan\", \"inf\", \"-inf\")",
                             (unsigned long long)*i);
            if (elem == REMAT_ELEM_F64)
                memcpy(dst + 8 * *i, &v, 8);
            else {
                float f = (float)v;
                memcpy(dst + 4 * *i, &f, 4);
            }
        } else {
            double lim = elem == REMAT_ELEM_I64 ? 9007199254740992.0 : 2147483647.0;
            if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || fabs(e->valuedouble) > lim)
                return rfail(R, path, "element %llu is not a whole number within the %s range",
                             (unsigned long long)*i, remat_elem_name(elem));
            v = e->valuedouble;
            if (elem == REMAT_ELEM_I64) {
                int64_t x = (int64_t)v;
                memcpy(dst + 8 * *i, &x, 8);
            } else {
                int32_t x = (int32_t)v;
                memcpy(dst + 4 * *i, &x, 4);
            }
        }
        (*i)++;
    }
    return REMAT_OK;
}

/* Reads the array at a into a new buffer of tensor t's bytes. */
static remat_status read_tensor(reader *R, const cJSON *a, uint32_t t, remat_elem elem, const char *path,
                                uint8_t **out)
{
    const remat_tensor *T = &R->g->tensors[t];
    uint32_t size = remat_elem_size(elem);
    if (!cJSON_IsArray(a))
        return rfail(R, path, "must be an array of numbers");
    if (size == 0 || T->bytes % size != 0)
        return rfail_id(R, path, T->id, "tensor '%.80s' (%llu B) is not a whole number of %s elements", T->id,
                     (unsigned long long)T->bytes, remat_elem_name(elem));
    uint64_t n = T->bytes / size, i = 0;
    uint8_t *buf = remat__malloc(T->bytes ? (size_t)T->bytes : 1);
    if (!buf)
        return nomem(R);
    remat_status st = fill(R, a, elem, buf, n, &i, path, 0);
    if (st == REMAT_OK && i != n)
        st = rfail_id(R, path, T->id, "%llu elements, but tensor '%.80s' has %llu", (unsigned long long)i, T->id,
                   (unsigned long long)n);
    if (st != REMAT_OK) {
        remat__free(buf);
        return st;
    }
    *out = buf;
    return REMAT_OK;
}

static remat_status check_header(reader *R, const cJSON *root, const char *format, const char *const *allowed)
{
    if (!cJSON_IsObject(root))
        return rfail(R, "", "top level must be an object");
    for (const cJSON *c = root->child; c; c = c->next) {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            ok |= c->string && strcmp(c->string, *a) == 0;
        if (!ok)
            return rfail(R, "", "unknown field '%.40s'", c->string ? c->string : "");
    }
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, format) != 0)
        return rfail(R, "format", "must be \"%s\"", format);
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (!cJSON_IsNumber(ver) || ver->valuedouble != 1)
        return rfail(R, "version", "unsupported version (this remat reads version 1)");
    return REMAT_OK;
}

static cJSON *parse(reader *R, const char *text, size_t len)
{
    cJSON *root;
    return remat__json_document(text, len, R->source, &root, R->err) == REMAT_OK ? root : NULL;
}

/* ---- state files -------------------------------------------------------------- */

static remat_status read_optimizer(reader *R, const cJSON *o, remat_optim *out)
{
    if (!cJSON_IsObject(o))
        return rfail(R, "optimizer", "must be an object {\"name\", \"lr\", ...}");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
    if (!cJSON_IsString(name))
        return rfail(R, "optimizer.name", "must be a string");
    remat_ledger_optimizer kind;
    remat_err e2;
    remat_err_init(&e2);
    if (remat_ledger_optimizer_parse(name->valuestring, "optimizer.name", &kind, &e2) != REMAT_OK ||
        remat_optim_init(out, kind, &e2) != REMAT_OK)
        return rfail(R, "optimizer.name", "%s", e2.msg);
    static const char *const keys[] = {"lr", "momentum", "beta1", "beta2", "eps", "weight_decay"};
    double *dst[] = {&out->lr, &out->momentum, &out->beta1, &out->beta2, &out->eps, &out->weight_decay};
    for (const cJSON *c = o->child; c; c = c->next) {
        size_t i = 0;
        while (i < 6 && strcmp(c->string, keys[i]) != 0)
            i++;
        if (strcmp(c->string, "name") == 0)
            continue;
        char p[64];
        snprintf(p, sizeof p, "optimizer.%.40s", c->string);
        if (i == 6)
            return rfail(R, p, "unknown field");
        if (!cJSON_IsNumber(c) || !isfinite(c->valuedouble))
            return rfail(R, p, "must be a number");
        *dst[i] = c->valuedouble;
    }
    return REMAT_OK;
}

static remat_status load_state(reader *R, const cJSON *root, remat_model_state *s)
{
    static const char *const allowed[] = {"format", "version", "graph", "dtype", "step", "optimizer", "params", NULL};
    const remat_graph *g = R->g;
    remat_status st = check_header(R, root, "remat-state", allowed);
    if (st != REMAT_OK)
        return st;
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(root, "dtype");
    remat_elem dtype = cJSON_IsString(dt) ? remat_elem_parse(dt->valuestring) : REMAT_ELEM_NONE;
    if (dtype != REMAT_ELEM_F64 && dtype != REMAT_ELEM_F32)
        return rfail(R, "dtype", "must be \"f64\" or \"f32\"");
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(root, "step");
    if (!cJSON_IsNumber(step) || step->valuedouble < 0 || step->valuedouble != floor(step->valuedouble) ||
        step->valuedouble > 9007199254740991.0)
        return rfail(R, "step", "must be a whole number from 0 to 2^53-1");
    remat_optim o;
    if ((st = read_optimizer(R, cJSON_GetObjectItemCaseSensitive(root, "optimizer"), &o)) != REMAT_OK)
        return st;
    if ((st = remat_model_state_alloc(s, g, dtype, &o, R->err)) != REMAT_OK)
        return st;
    s->step = (uint64_t)step->valuedouble;
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(root, "params");
    if (!cJSON_IsObject(params))
        return rfail(R, "params", "must be an object {\"param id\": {\"value\": [...], ...}}");
    uint32_t ns = remat_optim_states(o.kind);
    for (const cJSON *p = params->child; p; p = p->next) {
        char path[100];
        snprintf(path, sizeof path, "params.%.80s", p->string);
        uint32_t t = remat_graph_find_tensor(g, p->string);
        if (t == REMAT_NONE || g->tensors[t].kind != REMAT_TENSOR_PARAM)
            return rfail_id(R, path, p->string, "graph '%.80s' has no param '%.80s'", g->name, p->string);
        if (!cJSON_IsObject(p))
            return rfail(R, path, "must be an object {\"value\": [...], ...}");
        for (const cJSON *f = p->child; f; f = f->next) {
            char fp[256];
            snprintf(fp, sizeof fp, "%s.%.40s", path, f->string);
            uint8_t **dst = NULL;
            if (strcmp(f->string, "value") == 0)
                dst = &s->value[t];
            else if (strcmp(f->string, "shape") == 0)
                continue; /* informational: the element count is checked */
            for (uint32_t j = 0; j < ns && !dst; j++)
                if (strcmp(f->string, remat_optim_state_name(o.kind, j)) == 0) {
                    if (!s->state[j][t])
                        return rfail_id(R, fp, p->string, "param '%.80s' is frozen: it has no optimizer state",
                                        p->string);
                    dst = &s->state[j][t];
                }
            if (!dst)
                return rfail(R, fp, "unknown field (value%s%s%s%s)", ns ? ", " : "",
                             ns ? remat_optim_state_name(o.kind, 0) : "", ns > 1 ? ", " : "",
                             ns > 1 ? remat_optim_state_name(o.kind, 1) : "");
            uint8_t *buf;
            if ((st = read_tensor(R, f, t, dtype, fp, &buf)) != REMAT_OK)
                return st;
            remat__free(*dst);
            *dst = buf;
        }
        /* Every array must be given: a missing one would silently be zero. */
        if (!cJSON_GetObjectItemCaseSensitive(p, "value"))
            return rfail(R, path, "missing \"value\"");
        for (uint32_t j = 0; j < ns; j++)
            if (s->state[j][t] && !cJSON_GetObjectItemCaseSensitive(p, remat_optim_state_name(o.kind, j)))
                return rfail(R, path, "missing \"%s\" (optimizer %s)", remat_optim_state_name(o.kind, j),
                             remat_ledger_optimizer_name(o.kind));
    }
    for (uint32_t t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].kind == REMAT_TENSOR_PARAM && !cJSON_GetObjectItemCaseSensitive(params, g->tensors[t].id))
            return rfail_id(R, "params", g->tensors[t].id, "param '%.80s' of graph '%.80s' is missing",
                            g->tensors[t].id, g->name);
    return REMAT_OK;
}

remat_status remat_model_state_load_json(const remat_graph *g, const char *text, size_t len, const char *source,
                                         remat_model_state *s, remat_err *err)
{
    remat_err local;
    remat_err_init(&local);
    reader R = {g, source ? source : "<state>", err ? err : &local};
    remat_model_state_init(s);
    cJSON *root = parse(&R, text, len);
    if (!root)
        return R.err->code;
    remat_status st = load_state(&R, root, s);
    cJSON_Delete(root);
    if (st != REMAT_OK)
        remat_model_state_destroy(s);
    return st;
}

remat_status remat_model_state_load_file(const remat_graph *g, const char *path, remat_model_state *s,
                                         remat_err *err)
{
    char *text;
    size_t len;
    remat_model_state_init(s);
    remat_status st = remat__read_file(path, &text, &len, err);
    if (st != REMAT_OK)
        return st;
    st = remat_model_state_load_json(g, text, len, path, s, err);
    remat__free(text);
    return st;
}

/* ---- data files --------------------------------------------------------------- */

static remat_status load_data(reader *R, const cJSON *root, remat_dataset *d)
{
    static const char *const allowed[] = {"format", "version", "batches", "meta", NULL};
    const remat_graph *g = R->g;
    remat_status st = check_header(R, root, "remat-data", allowed);
    if (st != REMAT_OK)
        return st;
    const cJSON *batches = cJSON_GetObjectItemCaseSensitive(root, "batches");
    int nb = cJSON_IsArray(batches) ? cJSON_GetArraySize(batches) : 0;
    if (nb <= 0)
        return rfail(R, "batches", "must be a non-empty array of batches {\"input id\": [...], ...}");
    d->n_batches = (uint32_t)nb;
    d->n_tensors = g->n_tensors;
    d->data = remat__array((size_t)nb * (g->n_tensors ? g->n_tensors : 1), sizeof *d->data);
    if (!d->data)
        return nomem(R);
    int b = 0;
    for (const cJSON *e = batches->child; e; e = e->next, b++) {
        char path[200];
        snprintf(path, sizeof path, "batches[%d]", b);
        if (!cJSON_IsObject(e))
            return rfail(R, path, "must be an object {\"input id\": [...], ...}");
        for (const cJSON *f = e->child; f; f = f->next) {
            char fp[320];
            snprintf(fp, sizeof fp, "%s.%.80s", path, f->string);
            uint32_t t = remat_graph_find_tensor(g, f->string);
            if (t == REMAT_NONE || g->tensors[t].kind != REMAT_TENSOR_INPUT)
                return rfail_id(R, fp, f->string, "graph '%.80s' has no input '%.80s'", g->name, f->string);
            remat_elem elem = remat_elem_parse(g->tensors[t].dtype);
            if (elem == REMAT_ELEM_NONE)
                return rfail_id(R, fp, f->string, "input '%.80s' has no dtype the trainer reads (f64, f32, i64, i32)",
                               f->string);
            uint8_t **dst = &d->data[(size_t)b * g->n_tensors + t];
            if ((st = read_tensor(R, f, t, elem, fp, dst)) != REMAT_OK)
                return st;
        }
        for (uint32_t t = 0; t < g->n_tensors; t++)
            if (g->tensors[t].kind == REMAT_TENSOR_INPUT && !d->data[(size_t)b * g->n_tensors + t])
                return rfail_id(R, path, g->tensors[t].id, "input '%.80s' is missing", g->tensors[t].id);
    }
    return REMAT_OK;
}

remat_status remat_dataset_load_json(const remat_graph *g, const char *text, size_t len, const char *source,
                                     remat_dataset *d, remat_err *err)
{
    remat_err local;
    remat_err_init(&local);
    reader R = {g, source ? source : "<data>", err ? err : &local};
    remat_dataset_init(d);
    cJSON *root = parse(&R, text, len);
    if (!root)
        return R.err->code;
    remat_status st = load_data(&R, root, d);
    cJSON_Delete(root);
    if (st != REMAT_OK)
        remat_dataset_destroy(d);
    return st;
}

remat_status remat_dataset_load_file(const remat_graph *g, const char *path, remat_dataset *d, remat_err *err)
{
    char *text;
    size_t len;
    remat_dataset_init(d);
    remat_status st = remat__read_file(path, &text, &len, err);
    if (st != REMAT_OK)
        return st;
    st = remat_dataset_load_json(g, text, len, path, d, err);
    remat__free(text);
    return st;
}

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

/*
 * load_elems.c - what each element of a remat-graph document means: the top
 * level's fields, a leaf, an op (in two passes: its ids, then its
 * references). The checks an op needs once its references are known, and
 * the stream driver's deferred references, are in load_checks.c.
 *
 * Both drivers (load_internal.h) call these, so the checks and messages are
 * written once; load_graph.c finishes the graph. Every value read gets its JSON path, though only error
 * messages print it. While the stream driver runs (L->streaming), a
 * reference to an id not registered yet is not an error: it is noted and
 * resolved at the end (remat__load_resolve_deferred), together with the
 * checks that need it.
 *
 * No cJSON pointer survives: ids are copied into the graph's arena.
 */
#include "load_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GCC cannot see the bound on paths (PATH_MAX_LEN) through nested snprintf. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif

const char *const remat__load_top_keys[] = {"format", "version", "name", "inputs", "params",
                                            "ops",    "outputs", "meta", NULL};
static const char *const leaf_keys[] = {"id", "bytes", "frozen", "requires_grad", "dtype", "shape", NULL};
/* In the order of the OP_ enum; the most frequent keys first, since a key
 * is found by comparing it with these in turn. */
static const char *const op_keys[] = {"id",           "op",       "inputs",    "bytes", "flops",
                                      "saves",        "outputs",  "alias_of",  "bwd_flops", "workspace",
                                      "bwd_workspace", "recomputable", "dtype", "shape", "attrs",
                                      "grad_views", NULL};
static const char *const out_keys[] = {"id", "bytes", "alias_of", "dtype", "shape", NULL};

/* ------------------------------------------------------------ messages */

remat_status remat__load_fail(loader *L, remat_status code, const char *path, const char *fmt, ...)
{
    char detail[REMAT_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    remat_err_loc loc;
    remat_err_loc_make(&loc, L->source, path, 0, 0, NULL);
    if (path && *path)
        return remat_err_set_at(L->err, code, &loc, "%s: %s: %s", L->source, path, detail);
    return remat_err_set_at(L->err, code, &loc, "%s: %s", L->source, detail);
}
#define fail remat__load_fail

remat_status remat__load_nomem(loader *L)
{
    return remat_err_set(L->err, REMAT_ENOMEM, "%s: out of memory while loading", L->source);
}
#define nomem remat__load_nomem
#define short_id remat__load_short_id
#define path_index remat__load_path_index
#define check_saves_distinct remat__load_check_saves
#define check_op_id remat__load_check_op_id

/* Ids are printed in messages; cap them so a 1 MB id cannot drown the text. */
const char *short_id(const char *id, char *buf, size_t cap)
{
    size_t n = strlen(id);
    if (n < cap)
        return id;
    snprintf(buf, cap, "%.*s...", (int)(cap - 4), id);
    return buf;
}

/* Built with snprintf, paths were half of all the loader's instructions on a
 * 10^6-op graph (callgrind), so the paths built per value are joined by hand.
 * Both truncate at cap, as snprintf would. */
static size_t path_put(char *dst, size_t at, size_t cap, const char *s)
{
    while (*s && at + 1 < cap)
        dst[at++] = *s++;
    dst[at] = '\0';
    return at;
}

/* "base.key", or "key" when base is empty (a top-level field). */
static void path_key(char *dst, size_t cap, const char *base, const char *key)
{
    size_t at = path_put(dst, 0, cap, base);
    if (*base)
        at = path_put(dst, at, cap, ".");
    path_put(dst, at, cap, key);
}

/* "base[i]", or "base.key[i]" when key is not NULL. */
void path_index(char *dst, size_t cap, const char *base, const char *key, uint32_t i)
{
    char num[16], *d = num + sizeof num - 1;
    *d = '\0';
    do
        *--d = (char)('0' + i % 10);
    while ((i /= 10) != 0);
    size_t at = path_put(dst, 0, cap, base);
    if (key) {
        at = path_put(dst, at, cap, ".");
        at = path_put(dst, at, cap, key);
    }
    at = path_put(dst, at, cap, "[");
    at = path_put(dst, at, cap, d);
    path_put(dst, at, cap, "]");
}

/* --------------------------------------------------------------- arrays */

/* While streaming, the lengths are not known in advance: arrays double.
 * Large blocks are mmapped by the C library, so doubling moves no bytes
 * (mremap) and pages that are never written cost no memory. */
static int reserve(loader *L, void **p, size_t *cap, uint64_t n, size_t elem)
{
    if (n <= *cap)
        return 1;
    uint64_t c = *cap ? *cap : 64;
    while (c < n)
        c *= 2;
    if (c > SIZE_MAX / elem)
        return nomem(L), 0;
    void *q = remat__realloc(*p, (size_t)c * elem);
    if (!q)
        return nomem(L), 0;
    *p = q;
    *cap = (size_t)c;
    return 1;
}

int remat__load_reserve_tensors(loader *L, uint64_t n)
{
    return reserve(L, (void **)&L->g->tensors, &L->cap_tensors, n, sizeof *L->g->tensors);
}

int remat__load_reserve_ops(loader *L, uint64_t n)
{
    return reserve(L, (void **)&L->g->ops, &L->cap_ops, n, sizeof *L->g->ops);
}

int remat__load_reserve_refs(loader *L, uint64_t n)
{
    return reserve(L, (void **)&L->g->refs, &L->cap_refs, n, sizeof *L->g->refs);
}

/* --------------------------------------------------------------- fields */

/* Rejects unknown keys and keys given twice (cJSON keeps both and lookups
 * would see the first, so a repeated key would silently lose a value). A
 * repeat is found by its slot being taken, which is the same as comparing
 * with every earlier key, because every earlier key was an allowed one. */
int remat__load_fields(loader *L, const cJSON *obj, const char *path, const char *const *allowed, load_fields *f)
{
    memset(f, 0, sizeof *f);
    for (const cJSON *c = obj->child; c; c = c->next) {
        int slot = -1;
        for (int a = 0; allowed[a] && c->string; a++)
            if (strcmp(c->string, allowed[a]) == 0) {
                slot = a;
                break;
            }
        if (slot < 0) {
            char b[64];
            fail(L, REMAT_EGRAPH, path, "unknown field '%s'", short_id(c->string ? c->string : "", b, sizeof b));
            return 0;
        }
        if (f->v[slot]) {
            fail(L, REMAT_EGRAPH, path, "field '%s' is given twice", c->string);
            return 0;
        }
        f->v[slot] = c;
    }
    return 1;
}

/* --------------------------------------------------------------- values */

/* A byte count or FLOP count: a non-negative integer number below 2^53, or
 * a string of decimal digits for exact larger values up to 2^64-1. Every
 * integer up to 2^53 is a double, but the text 2^53+1 also rounds to 2^53,
 * so a parsed 2^53 may not be what the file says; below it, it always is. */
static int get_u64(loader *L, const cJSON *v, const char *path, uint64_t *out)
{
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (!isfinite(d))
            return fail(L, REMAT_EGRAPH, path, "must be a finite number"), 0;
        if (d < 0)
            return fail(L, REMAT_EGRAPH, path, "must not be negative (got %.17g)", d), 0;
        if (d != floor(d))
            return fail(L, REMAT_EGRAPH, path, "must be a whole number (got %.17g)", d), 0;
        if (d >= 9007199254740992.0)
            return fail(L, REMAT_EGRAPH, path,
                        "%.17g exceeds 2^53-1, where JSON numbers stop being exact; write it as a decimal string", d),
                   0;
        *out = (uint64_t)d;
        return 1;
    }
    if (cJSON_IsString(v)) {
        const char *s = v->valuestring;
        uint64_t x = 0;
        if (!*s)
            return fail(L, REMAT_EGRAPH, path, "empty string is not a count"), 0;
        for (const char *p = s; *p; p++) {
            if (*p < '0' || *p > '9')
                return fail(L, REMAT_EGRAPH, path, "string '%.40s' is not a decimal count", s), 0;
            if (!remat_u64_mul(x, 10, &x) || !remat_u64_add(x, (uint64_t)(*p - '0'), &x))
                return fail(L, REMAT_EOVERFLOW, path, "'%.40s' exceeds 2^64-1", s), 0;
        }
        *out = x;
        return 1;
    }
    return fail(L, REMAT_EGRAPH, path, "must be a non-negative integer (or a decimal string)"), 0;
}

static int get_bool(loader *L, const cJSON *v, const char *key, const char *path, bool *out, bool dflt)
{
    *out = dflt;
    if (!v)
        return 1;
    if (!cJSON_IsBool(v)) {
        char p[PATH_MAX_LEN];
        snprintf(p, sizeof p, "%s.%s", path, key);
        return fail(L, REMAT_EGRAPH, p, "must be true or false"), 0;
    }
    *out = cJSON_IsTrue(v);
    return 1;
}

static int get_opt_u64(loader *L, const cJSON *v, const char *key, const char *path, uint64_t *out, int *present)
{
    if (present)
        *present = v != NULL;
    if (!v)
        return 1;
    char p[PATH_MAX_LEN];
    path_key(p, sizeof p, path, key);
    return get_u64(L, v, p, out);
}

/* A string field, copied into the arena; required ones must not be empty. */
static int get_str(loader *L, const cJSON *v, const char *key, const char *path, const char **out, int required)
{
    *out = NULL;
    if (!v) {
        if (required)
            return fail(L, REMAT_EGRAPH, path, "missing required field '%s'", key), 0;
        return 1;
    }
    char p[PATH_MAX_LEN];
    path_key(p, sizeof p, path, key); /* top-level keys have no prefix */
    if (!cJSON_IsString(v))
        return fail(L, REMAT_EGRAPH, p, "must be a string"), 0;
    if (required && !*v->valuestring)
        return fail(L, REMAT_EGRAPH, p, "must not be empty"), 0;
    *out = remat__store_strndup(L->st, v->valuestring, strlen(v->valuestring));
    if (!*out)
        return nomem(L), 0;
    return 1;
}

static int get_shape(loader *L, const cJSON *v, const char *path, remat_tensor *t)
{
    if (!v)
        return 1;
    char p[PATH_MAX_LEN];
    path_key(p, sizeof p, path, "shape");
    if (!cJSON_IsArray(v))
        return fail(L, REMAT_EGRAPH, p, "must be an array of non-negative integers"), 0;
    int n = cJSON_GetArraySize(v);
    uint64_t *shape = remat__store_alloc(L->st, (size_t)n, sizeof *shape);
    if (!shape)
        return nomem(L), 0;
    int i = 0;
    for (const cJSON *d = v->child; d; d = d->next, i++) {
        char pi[PATH_MAX_LEN + 16];
        path_index(pi, sizeof pi, p, NULL, (uint32_t)i);
        if (!get_u64(L, d, pi, &shape[i]))
            return 0;
    }
    t->ndim = (uint32_t)n;
    t->shape = shape;
    return 1;
}

static int array_field(loader *L, const cJSON *v, const char *key, const char *path, const cJSON **out, int required)
{
    *out = v;
    if (!v) {
        if (required)
            return fail(L, REMAT_EGRAPH, path, "missing required field '%s'", key), 0;
        return 1;
    }
    if (!cJSON_IsArray(v)) {
        char p[PATH_MAX_LEN];
        snprintf(p, sizeof p, "%s%s%s", path, *path ? "." : "", key);
        return fail(L, REMAT_EGRAPH, p, "must be an array"), 0;
    }
    return 1;
}

static int register_tensor(loader *L, uint32_t index, const char *id, const char *path)
{
    uint32_t prev;
    remat_status st = remat_strmap_put(&L->st->tensor_ids, id, index, &prev);
    if (st == REMAT_ENOMEM)
        return nomem(L), 0;
    if (st != REMAT_OK) {
        char b[64];
        return fail(L, REMAT_EGRAPH, path, "duplicate id '%s' (already used by %s tensor)", short_id(id, b, sizeof b),
                    remat_tensor_kind_str(L->g->tensors[prev].kind)),
               0;
    }
    return 1;
}

/* A JSON value kept as compact text in the graph's store (meta, attrs:
 * read later by whoever needs them, never by the loader). */
static int json_text(loader *L, const cJSON *v, const char **dst)
{
    char *m = cJSON_PrintUnformatted(v);
    if (!m)
        return nomem(L), 0;
    *dst = remat__store_strndup(L->st, m, strlen(m));
    cJSON_free(m);
    return *dst ? 1 : (nomem(L), 0);
}

/* ------------------------------------------------------------ top level */

int remat__load_top_fields(loader *L, const load_fields *f, load_top_arrays *a)
{
    remat_graph *g = L->g;
    const cJSON *fmt = f->v[TOP_FORMAT];
    if (!fmt)
        return fail(L, REMAT_EGRAPH, "", "missing required field 'format' (\"" REMAT_GRAPH_FORMAT "\")"), 0;
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, REMAT_GRAPH_FORMAT) != 0)
        return fail(L, REMAT_EGRAPH, "format", "must be \"" REMAT_GRAPH_FORMAT "\""), 0;
    const cJSON *ver = f->v[TOP_VERSION];
    if (!ver)
        return fail(L, REMAT_EGRAPH, "", "missing required field 'version'"), 0;
    if (!cJSON_IsNumber(ver) || ver->valuedouble != REMAT_GRAPH_VERSION)
        return fail(L, REMAT_EGRAPH, "version", "unsupported version (this remat reads version %d)",
                    REMAT_GRAPH_VERSION),
               0;
    if (!get_str(L, f->v[TOP_NAME], "name", "", &g->name, 0))
        return 0;
    if (!g->name && !(g->name = remat__store_strndup(L->st, "unnamed", 7)))
        return nomem(L), 0;
    if (!array_field(L, f->v[TOP_INPUTS], "inputs", "", &a->inputs, 0) ||
        !array_field(L, f->v[TOP_PARAMS], "params", "", &a->params, 0) ||
        !array_field(L, f->v[TOP_OPS], "ops", "", &a->ops, 1) ||
        !array_field(L, f->v[TOP_OUTPUTS], "outputs", "", &a->outputs, 1))
        return 0;
    const cJSON *meta = f->v[TOP_META];
    if (meta) {
        if (!cJSON_IsObject(meta))
            return fail(L, REMAT_EGRAPH, "meta", "must be an object"), 0;
        if (!json_text(L, meta, &g->meta_json))
            return 0;
    }
    return 1;
}

/* --------------------------------------------------------------- leaves */

/* Inputs and params: {"id", "bytes", ...}. */
int remat__load_leaf(loader *L, const cJSON *e, const char *name, uint32_t i, remat_tensor_kind kind, uint32_t index)
{
    char path[PATH_MAX_LEN];
    path_index(path, sizeof path, name, NULL, i);
    if (!cJSON_IsObject(e))
        return fail(L, REMAT_EGRAPH, path, "must be an object"), 0;
    load_fields f;
    if (!remat__load_fields(L, e, path, leaf_keys, &f))
        return 0;
    remat_tensor *t = &L->g->tensors[index];
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->producer = REMAT_NONE;
    t->alias_of = REMAT_NONE;
    t->storage = index;
    if (!get_str(L, f.v[LEAF_ID], "id", path, &t->id, 1) || !get_str(L, f.v[LEAF_DTYPE], "dtype", path, &t->dtype, 0) ||
        !get_shape(L, f.v[LEAF_SHAPE], path, t))
        return 0;
    int has_bytes;
    if (!get_opt_u64(L, f.v[LEAF_BYTES], "bytes", path, &t->bytes, &has_bytes))
        return 0;
    if (!has_bytes)
        return fail(L, REMAT_EGRAPH, path, "missing required field 'bytes'"), 0;
    t->logical_bytes = t->bytes;
    if (kind == REMAT_TENSOR_PARAM) {
        if (f.v[LEAF_REQUIRES_GRAD])
            return fail(L, REMAT_EGRAPH, path, "params use 'frozen', not 'requires_grad'"), 0;
        if (!get_bool(L, f.v[LEAF_FROZEN], "frozen", path, &t->frozen, false))
            return 0;
    } else {
        if (f.v[LEAF_FROZEN])
            return fail(L, REMAT_EGRAPH, path, "inputs use 'requires_grad', not 'frozen'"), 0;
        if (!get_bool(L, f.v[LEAF_REQUIRES_GRAD], "requires_grad", path, &t->requires_grad, false))
            return 0;
    }
    return register_tensor(L, index, t->id, path);
}

/* ------------------------------------------------------------------ ops */

/* A view op is one whose every output is a view: its backward only routes
 * the gradient to the base, so its "saves" defaults to nothing. */
static int is_view_op(const load_fields *f)
{
    const cJSON *outs = f->v[OP_OUTPUTS];
    if (!outs)
        return f->v[OP_ALIAS_OF] != NULL;
    if (!outs->child)
        return 0;
    for (const cJSON *o = outs->child; o; o = o->next)
        if (!cJSON_IsObject(o) || !cJSON_GetObjectItemCaseSensitive(o, "alias_of"))
            return 0;
    return 1;
}

int remat__load_op_ids(loader *L, const cJSON *e, uint32_t k, uint32_t *next, uint64_t *n_refs)
{
    remat_graph *g = L->g;
    char path[PATH_MAX_LEN];
    path_index(path, sizeof path, "ops", NULL, k);
    if (!cJSON_IsObject(e))
        return fail(L, REMAT_EGRAPH, path, "must be an object"), 0;
    load_fields f;
    if (!remat__load_fields(L, e, path, op_keys, &f))
        return 0;
    remat_op *op = &g->ops[k];
    memset(op, 0, sizeof *op);
    if (!get_str(L, f.v[OP_ID], "id", path, &op->id, 1) || !get_str(L, f.v[OP_OP], "op", path, &op->type, 1))
        return 0;
    uint32_t prev;
    remat_status st = remat_strmap_put(&L->st->op_ids, op->id, k, &prev);
    if (st == REMAT_ENOMEM)
        return nomem(L), 0;
    if (st != REMAT_OK) {
        char b[64];
        return fail(L, REMAT_EGRAPH, path, "duplicate op id '%s' (first at ops[%u])", short_id(op->id, b, sizeof b),
                    prev),
               0;
    }
    const cJSON *inputs, *outs, *saves;
    if (!array_field(L, f.v[OP_INPUTS], "inputs", path, &inputs, 1) ||
        !array_field(L, f.v[OP_OUTPUTS], "outputs", path, &outs, 0) ||
        !array_field(L, f.v[OP_SAVES], "saves", path, &saves, 0))
        return 0;
    op->n_in = (uint32_t)cJSON_GetArraySize(inputs);
    if (outs) {
        if (f.v[OP_BYTES] || f.v[OP_ALIAS_OF] || f.v[OP_DTYPE] || f.v[OP_SHAPE])
            return fail(L, REMAT_EGRAPH, path, "an op with 'outputs' gives bytes, alias_of, dtype and shape per output"),
                   0;
        op->n_out = (uint32_t)cJSON_GetArraySize(outs);
        if (op->n_out == 0)
            return fail(L, REMAT_EGRAPH, path, "'outputs' must not be empty"), 0;
        if (!remat__load_reserve_tensors(L, (uint64_t)*next + op->n_out))
            return 0;
        uint32_t j = 0;
        for (const cJSON *o = outs->child; o; o = o->next, j++) {
            char op_path[PATH_MAX_LEN];
            path_index(op_path, sizeof op_path, path, "outputs", j);
            if (!cJSON_IsObject(o))
                return fail(L, REMAT_EGRAPH, op_path, "must be an object"), 0;
            load_fields of;
            if (!remat__load_fields(L, o, op_path, out_keys, &of))
                return 0;
            remat_tensor *t = &g->tensors[*next];
            memset(t, 0, sizeof *t);
            /* Kind and producer now, so a duplicate-id message about this
             * tensor names its kind right (the second pass sets the rest). */
            t->kind = REMAT_TENSOR_ACTIVATION;
            t->producer = k;
            t->alias_of = REMAT_NONE;
            if (!get_str(L, of.v[OUT_ID], "id", op_path, &t->id, 1))
                return 0;
            if (!register_tensor(L, *next, t->id, op_path))
                return 0;
            (*next)++;
        }
    } else {
        op->n_out = 1;
        if (!remat__load_reserve_tensors(L, (uint64_t)*next + 1))
            return 0;
        remat_tensor *t = &g->tensors[*next];
        memset(t, 0, sizeof *t);
        t->kind = REMAT_TENSOR_ACTIVATION;
        t->producer = k;
        t->alias_of = REMAT_NONE;
        t->id = op->id;
        if (!register_tensor(L, *next, t->id, path))
            return 0;
        (*next)++;
    }
    /* Space for the saves: as given, else the inputs (the default is their
     * distinct subset), or none for a view op. */
    op->n_save = saves ? (uint32_t)cJSON_GetArraySize(saves) : is_view_op(&f) ? 0 : op->n_in;
    *n_refs += (uint64_t)op->n_in + op->n_out + op->n_save;
    return 1;
}

/* Fills one output tensor's fields from its object (the op itself, or one
 * entry of its "outputs"): v holds bytes, alias_of, dtype and shape. */
static int load_output(loader *L, const cJSON *bytes, const cJSON *alias, const cJSON *dtype, const cJSON *shape,
                       const char *path, uint32_t ti, const remat_op *op, uint64_t alias_where)
{
    remat_graph *g = L->g;
    remat_tensor *t = &g->tensors[ti];
    t->alias_of = REMAT_NONE;
    t->storage = ti;
    if (!get_str(L, dtype, "dtype", path, &t->dtype, 0) || !get_shape(L, shape, path, t))
        return 0;
    int has_bytes;
    if (!get_opt_u64(L, bytes, "bytes", path, &t->bytes, &has_bytes))
        return 0;
    if (alias) {
        char p[PATH_MAX_LEN];
        snprintf(p, sizeof p, "%s.alias_of", path);
        uint32_t base;
        if (!remat__load_resolve(L, alias, p, &base, alias_where, LOAD_ALIAS_PENDING))
            return 0;
        /* Whether the base is among the op's inputs waits, while streaming,
         * until every reference of the op is resolved
         * (remat__load_resolve_deferred). */
        if (!L->op_pending) {
            const uint32_t *in = remat_op_inputs(g, op);
            int found = 0;
            for (uint32_t i = 0; i < op->n_in; i++)
                found |= in[i] == base;
            if (!found) {
                char b[64];
                return fail(L, REMAT_EGRAPH, p, "'%s' is not among the op's inputs (a view aliases one of its inputs)",
                            short_id(g->tensors[base].id, b, sizeof b)),
                       0;
            }
        }
        t->alias_of = base;
        /* A view's bytes, when given, are its logical size (its gradient's
         * size); it owns no storage. Without them the size is its base's,
         * which may be defined later in the file: finish_storage fills it. */
        t->logical_bytes = has_bytes ? t->bytes : 0;
        t->storage = has_bytes ? ti : LOAD_LOGICAL_INHERIT;
        t->bytes = 0;
        return 1;
    }
    if (!has_bytes)
        return fail(L, REMAT_EGRAPH, path, "missing required field 'bytes'"), 0;
    t->logical_bytes = t->bytes;
    return 1;
}

static int fill_refs(loader *L, const cJSON *arr, const char *path, const char *key, uint64_t at)
{
    uint32_t i = 0;
    for (const cJSON *v = arr->child; v; v = v->next, i++) {
        char p[PATH_MAX_LEN];
        path_index(p, sizeof p, path, key, i);
        if (!remat__load_resolve(L, v, p, &L->g->refs[at + i], at + i, REMAT_NONE))
            return 0;
    }
    return 1;
}

static int defer_op(loader *L, uint32_t k, int dflt, int explicit_saves)
{
    if (L->n_dops == L->cap_dops) {
        size_t cap = L->cap_dops ? L->cap_dops * 2 : 64;
        load_deferred *d = remat__realloc(L->dops, cap * sizeof *d);
        if (!d)
            return nomem(L), 0;
        L->dops = d;
        L->cap_dops = cap;
    }
    L->dops[L->n_dops++] = (load_deferred){k, (uint8_t)dflt, (uint8_t)explicit_saves};
    return 1;
}

int remat__load_op_refs(loader *L, const cJSON *e, uint32_t k, uint32_t *ti, uint64_t *ref)
{
    remat_graph *g = L->g;
    char path[PATH_MAX_LEN];
    path_index(path, sizeof path, "ops", NULL, k);
    load_fields f;
    if (!remat__load_fields(L, e, path, op_keys, &f)) /* passed in the first pass: no error here */
        return 0;
    remat_op *op = &g->ops[k];
    const cJSON *saves = f.v[OP_SAVES], *outs = f.v[OP_OUTPUTS];
    uint64_t at = *ref;
    if (!remat__load_reserve_refs(L, at + op->n_in + op->n_out + op->n_save))
        return 0;
    op->in_off = (uint32_t)at;
    op->out_off = (uint32_t)(at + op->n_in);
    op->save_off = (uint32_t)(at + op->n_in + op->n_out);
    *ref = at + op->n_in + op->n_out + op->n_save;
    memset(g->refs + at, 0, ((size_t)op->n_in + op->n_out + op->n_save) * sizeof *g->refs);
    L->op_pending = 0;
    if (!fill_refs(L, f.v[OP_INPUTS], path, "inputs", op->in_off))
        return 0;
    uint32_t *out = g->refs + op->out_off;
    if (outs) {
        uint32_t j = 0;
        for (const cJSON *o = outs->child; o; o = o->next, j++) {
            char op_path[PATH_MAX_LEN];
            path_index(op_path, sizeof op_path, path, "outputs", j);
            load_fields of;
            if (!remat__load_fields(L, o, op_path, out_keys, &of))
                return 0;
            out[j] = *ti;
            if (!load_output(L, of.v[OUT_BYTES], of.v[OUT_ALIAS_OF], of.v[OUT_DTYPE], of.v[OUT_SHAPE], op_path, *ti,
                             op, LOAD_ALIAS_BIT | *ti))
                return 0;
            (*ti)++;
        }
    } else {
        out[0] = *ti;
        if (!load_output(L, f.v[OP_BYTES], f.v[OP_ALIAS_OF], f.v[OP_DTYPE], f.v[OP_SHAPE], path, *ti, op,
                         LOAD_ALIAS_BIT | *ti))
            return 0;
        (*ti)++;
    }
    /* While streaming, later ops' ids are not registered yet: the check
     * runs for every op at the end. */
    if (!L->streaming && !check_op_id(L, k, path))
        return 0;
    int dflt = !saves && op->n_save > 0;
    if (saves && !fill_refs(L, saves, path, "saves", op->save_off))
        return 0;
    if (L->op_pending) {
        if (!defer_op(L, k, dflt, saves != NULL))
            return 0;
    } else {
        if (dflt && !remat__load_default_saves(L, op))
            return 0;
        if (saves && !check_saves_distinct(L, op, path))
            return 0;
    }
    int has_flops, has_bwd;
    const int is_view = op->n_out == 1 && g->tensors[out[0]].alias_of != REMAT_NONE;
    if (!get_opt_u64(L, f.v[OP_FLOPS], "flops", path, &op->flops, &has_flops) ||
        !get_opt_u64(L, f.v[OP_BWD_FLOPS], "bwd_flops", path, &op->bwd_flops, &has_bwd) ||
        !get_opt_u64(L, f.v[OP_WORKSPACE], "workspace", path, &op->workspace, NULL) ||
        !get_opt_u64(L, f.v[OP_BWD_WORKSPACE], "bwd_workspace", path, &op->bwd_workspace, NULL) ||
        !get_bool(L, f.v[OP_RECOMPUTABLE], "recomputable", path, &op->recomputable, true) ||
        !get_bool(L, f.v[OP_GRAD_VIEWS], "grad_views", path, &op->grad_views, false))
        return 0;
    /* The views are slices of one output's gradient: an op with several
     * outputs would have to say whose, and a view op's backward already
     * hands its base the gradient itself. */
    if (op->grad_views && (op->n_out != 1 || is_view)) {
        char p[PATH_MAX_LEN], b[64];
        snprintf(p, sizeof p, "%s.grad_views", path);
        return fail(L, REMAT_EGRAPH, p, "op '%s': grad_views needs an op with one output that is not a view (%s)",
                    short_id(op->id, b, sizeof b), op->n_out != 1 ? "it has several outputs" : "its output has alias_of"),
               0;
    }
    if (!has_flops && !is_view)
        return fail(L, REMAT_EGRAPH, path, "missing required field 'flops' (only views may omit it)"), 0;
    if (!has_bwd && !remat_u64_mul(op->flops, 2, &op->bwd_flops))
        return fail(L, REMAT_EOVERFLOW, path, "default bwd_flops = 2 * flops overflows 2^64-1"), 0;
    const cJSON *attrs = f.v[OP_ATTRS];
    if (attrs && !cJSON_IsObject(attrs)) {
        char p[PATH_MAX_LEN];
        snprintf(p, sizeof p, "%s.attrs", path);
        return fail(L, REMAT_EGRAPH, p, "must be an object"), 0;
    }
    if (attrs) {
        /* Kept as text, like meta: the executable kernels read it
         * (src/load/attrs.c), nothing else does. */
        if (!json_text(L, attrs, &op->attrs_json))
            return 0;
        /* The module that ran the op (scripts/export_torch.py writes it):
         * sharded data parallel takes its units from it (shard_units.c). */
        char p[PATH_MAX_LEN];
        snprintf(p, sizeof p, "%s.attrs", path);
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(attrs, "module");
        if (m && cJSON_IsNull(m))
            m = NULL;
        if (m && !get_str(L, m, "module", p, &op->module, 0))
            return 0;
    }
    return 1;
}

/*
 * loader.c - JSON graph (format "remat-graph", version 1) to remat_graph.
 *
 * The loader is the only place that reads cJSON input. It works in passes:
 * parse (syntax errors carry line:column), check the top level, register
 * every tensor id (inputs, params, op outputs) so that ops may refer to
 * tensors defined later in the file, then resolve every reference. Every
 * message names the JSON path of the offending value, so a user can find it
 * in a 10^6-op export. Ordering and cycles are the analyzer's job: the loader
 * accepts any reference structure and analyze reports a cycle by its nodes.
 *
 * No cJSON pointer survives: ids are copied into the graph's arena.
 */
#include "graph_store.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* cJSON's allocator is process-wide; point it at our gate once so that
 * out-of-memory injection covers parsing too. Setting it again is harmless.
 * cJSON reports a failed allocation as a failed parse, so the hook notes it:
 * the flag is thread-local because the hook gets no user pointer (as with
 * igraph's error handler), and it is reset before every parse. */
static _Thread_local int cjson_alloc_failed;

/* While a graph is parsed, cJSON's nodes and strings come from a bump arena
 * instead of one malloc each. A 10^6-op graph makes about 10^7 of them; as
 * separate mallocs they cost as many instructions as the parse itself, take
 * 80 heap bytes per 64-byte node, need a cJSON_Delete walk, and leave a heap
 * of small free chunks that the analyzer's first large calloc then has to
 * consolidate. The arena is released whole when loading ends, and cJSON's
 * frees meanwhile are no-ops. It is thread-local for the same reason as the
 * flag above, and off outside remat_graph_load_json, so other cJSON users
 * (the plan loader) keep plain allocations. */
typedef struct cj_chunk {
    struct cj_chunk *next;
    size_t used, cap;
    unsigned char data[]; /* 8-aligned: it follows a pointer and two size_t */
} cj_chunk;

#define CJ_CHUNK_SIZE ((size_t)1 << 20)
static _Thread_local cj_chunk *cj_arena;
static _Thread_local int cj_arena_on;

static void *cj_arena_alloc(size_t n)
{
    /* cJSON stores pointers, ints and doubles: 8-byte alignment suffices. */
    size_t need = (n + 7) & ~(size_t)7;
    if (need < n || need > SIZE_MAX - sizeof(cj_chunk))
        return NULL;
    cj_chunk *c = cj_arena;
    if (!c || c->cap - c->used < need) {
        size_t cap = need > CJ_CHUNK_SIZE / 4 ? need : CJ_CHUNK_SIZE;
        cj_chunk *nc = remat__malloc(sizeof *nc + cap);
        if (!nc)
            return NULL;
        nc->used = 0;
        nc->cap = cap;
        /* A one-off big block goes behind the current chunk, whose free
         * space later small requests still use. */
        if (c && cap == need) {
            nc->next = c->next;
            c->next = nc;
        } else {
            nc->next = c;
            cj_arena = nc;
        }
        c = nc;
    }
    void *p = c->data + c->used;
    c->used += need;
    return p;
}

static void cj_arena_begin(void)
{
    cj_arena = NULL;
    cj_arena_on = 1;
}

static void cj_arena_end(void)
{
    for (cj_chunk *c = cj_arena, *n; c; c = n) {
        n = c->next;
        remat__free(c);
    }
    cj_arena = NULL;
    cj_arena_on = 0;
}

static void *cjson_malloc(size_t n)
{
    void *p = cj_arena_on ? cj_arena_alloc(n) : remat__malloc(n);
    if (!p)
        cjson_alloc_failed = 1;
    return p;
}

static void cjson_free(void *p)
{
    if (!cj_arena_on)
        remat__free(p);
}

static void hook_cjson(void)
{
    cJSON_Hooks hooks = {cjson_malloc, cjson_free};
    cJSON_InitHooks(&hooks);
}

typedef struct {
    const char *source;
    remat_err *err;
    remat_graph *g;
    remat_graph_store *st;
} loader;

/* JSON paths are built from fixed keys and array indices, so they stay far
 * below this; a truncated path in a message would still name the place.
 * GCC cannot see that bound through the nested snprintf calls. */
#define PATH_MAX_LEN 160
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif

/* Every value read gets its JSON path, though only error messages print it.
 * Built with snprintf, paths were half of all the loader's instructions on a
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
static void path_index(char *dst, size_t cap, const char *base, const char *key, uint32_t i)
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

static remat_status fail(loader *L, remat_status code, const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static remat_status fail(loader *L, remat_status code, const char *path, const char *fmt, ...)
{
    char detail[REMAT_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    if (path && *path)
        return remat_err_set(L->err, code, "%s: %s: %s", L->source, path, detail);
    return remat_err_set(L->err, code, "%s: %s", L->source, detail);
}

static remat_status nomem(loader *L)
{
    return remat_err_set(L->err, REMAT_ENOMEM, "%s: out of memory while loading", L->source);
}

/* Ids are printed in messages; cap them so a 1 MB id cannot drown the text. */
static const char *short_id(const char *id, char *buf, size_t cap)
{
    size_t n = strlen(id);
    if (n < cap) {
        return id;
    }
    snprintf(buf, cap, "%.*s...", (int)(cap - 4), id);
    return buf;
}

/* Rejects unknown keys and keys given twice (cJSON keeps both and lookups
 * see the first, so a repeated key would silently lose a value). Every key
 * before a failure is a distinct allowed one, so the scan for repeats stays
 * within |allowed|^2 comparisons. */
static int check_keys(loader *L, const cJSON *obj, const char *path, const char *const *allowed)
{
    for (const cJSON *c = obj->child; c; c = c->next) {
        int ok = 0;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = c->string && strcmp(c->string, *a) == 0;
        if (!ok) {
            char b[64];
            fail(L, REMAT_EGRAPH, path, "unknown field '%s'", short_id(c->string ? c->string : "", b, sizeof b));
            return 0;
        }
        for (const cJSON *d = obj->child; d != c; d = d->next)
            if (strcmp(d->string, c->string) == 0) {
                fail(L, REMAT_EGRAPH, path, "field '%s' is given twice", c->string);
                return 0;
            }
    }
    return 1;
}

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

static int get_bool(loader *L, const cJSON *obj, const char *key, const char *path, bool *out, bool dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
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

static int get_opt_u64(loader *L, const cJSON *obj, const char *key, const char *path, uint64_t *out, int *present)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (present)
        *present = v != NULL;
    if (!v)
        return 1;
    char p[PATH_MAX_LEN];
    path_key(p, sizeof p, path, key);
    return get_u64(L, v, p, out);
}

/* A required string field, copied into the arena. */
static int get_str(loader *L, const cJSON *obj, const char *key, const char *path, const char **out, int required)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    char p[PATH_MAX_LEN];
    path_key(p, sizeof p, path, key); /* top-level keys have no prefix */
    *out = NULL;
    if (!v) {
        if (required)
            return fail(L, REMAT_EGRAPH, path, "missing required field '%s'", key), 0;
        return 1;
    }
    if (!cJSON_IsString(v))
        return fail(L, REMAT_EGRAPH, p, "must be a string"), 0;
    if (required && !*v->valuestring)
        return fail(L, REMAT_EGRAPH, p, "must not be empty"), 0;
    *out = remat__store_strndup(L->st, v->valuestring, strlen(v->valuestring));
    if (!*out)
        return nomem(L), 0;
    return 1;
}

static int get_shape(loader *L, const cJSON *obj, const char *path, remat_tensor *t)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, "shape");
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

static int resolve(loader *L, const cJSON *v, const char *path, uint32_t *out)
{
    char b[64];
    if (!cJSON_IsString(v))
        return fail(L, REMAT_EGRAPH, path, "must be a tensor id (string)"), 0;
    if (!remat_strmap_get(&L->st->tensor_ids, v->valuestring, out))
        return fail(L, REMAT_EGRAPH, path, "unknown tensor id '%s'", short_id(v->valuestring, b, sizeof b)), 0;
    return 1;
}

static const char *const top_keys[] = {"format", "version", "name", "inputs", "params", "ops", "outputs", "meta", NULL};
static const char *const leaf_keys[] = {"id", "bytes", "frozen", "requires_grad", "dtype", "shape", NULL};
static const char *const op_keys[] = {"id",        "op",           "inputs",    "bytes",        "outputs",
                                      "flops",     "bwd_flops",    "saves",     "workspace",    "bwd_workspace",
                                      "recomputable", "alias_of",  "dtype",     "shape",        "attrs",
                                      NULL};
static const char *const out_keys[] = {"id", "bytes", "alias_of", "dtype", "shape", NULL};

/* Inputs and params: [{"id", "bytes", ...}]. */
static int load_leaves(loader *L, const cJSON *arr, const char *name, remat_tensor_kind kind, uint32_t *next)
{
    int i = 0;
    for (const cJSON *e = arr->child; e; e = e->next, i++) {
        char path[PATH_MAX_LEN];
        path_index(path, sizeof path, name, NULL, (uint32_t)i);
        if (!cJSON_IsObject(e))
            return fail(L, REMAT_EGRAPH, path, "must be an object"), 0;
        if (!check_keys(L, e, path, leaf_keys))
            return 0;
        remat_tensor *t = &L->g->tensors[*next];
        t->kind = kind;
        t->producer = REMAT_NONE;
        t->alias_of = REMAT_NONE;
        t->storage = *next;
        if (!get_str(L, e, "id", path, &t->id, 1) || !get_str(L, e, "dtype", path, &t->dtype, 0) ||
            !get_shape(L, e, path, t))
            return 0;
        int has_bytes;
        if (!get_opt_u64(L, e, "bytes", path, &t->bytes, &has_bytes))
            return 0;
        if (!has_bytes)
            return fail(L, REMAT_EGRAPH, path, "missing required field 'bytes'"), 0;
        t->logical_bytes = t->bytes;
        if (kind == REMAT_TENSOR_PARAM) {
            if (cJSON_GetObjectItemCaseSensitive(e, "requires_grad"))
                return fail(L, REMAT_EGRAPH, path, "params use 'frozen', not 'requires_grad'"), 0;
            if (!get_bool(L, e, "frozen", path, &t->frozen, false))
                return 0;
        } else {
            if (cJSON_GetObjectItemCaseSensitive(e, "frozen"))
                return fail(L, REMAT_EGRAPH, path, "inputs use 'requires_grad', not 'frozen'"), 0;
            if (!get_bool(L, e, "requires_grad", path, &t->requires_grad, false))
                return 0;
        }
        if (!register_tensor(L, *next, t->id, path))
            return 0;
        (*next)++;
    }
    return 1;
}

static int array_field(loader *L, const cJSON *obj, const char *key, const char *path, const cJSON **out, int required)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
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

/* First pass over ops: register their output tensors and count refs. */
static int register_op_outputs(loader *L, const cJSON *ops, uint32_t *next, uint64_t *n_refs)
{
    remat_graph *g = L->g;
    uint32_t k = 0;
    for (const cJSON *e = ops->child; e; e = e->next, k++) {
        char path[PATH_MAX_LEN];
        path_index(path, sizeof path, "ops", NULL, k);
        if (!cJSON_IsObject(e))
            return fail(L, REMAT_EGRAPH, path, "must be an object"), 0;
        if (!check_keys(L, e, path, op_keys))
            return 0;
        remat_op *op = &g->ops[k];
        if (!get_str(L, e, "id", path, &op->id, 1) || !get_str(L, e, "op", path, &op->type, 1))
            return 0;
        uint32_t prev;
        remat_status st = remat_strmap_put(&L->st->op_ids, op->id, k, &prev);
        if (st == REMAT_ENOMEM)
            return nomem(L), 0;
        if (st != REMAT_OK) {
            char b[64];
            return fail(L, REMAT_EGRAPH, path, "duplicate op id '%s' (first at ops[%u])",
                        short_id(op->id, b, sizeof b), prev),
                   0;
        }
        const cJSON *inputs, *outs, *saves;
        if (!array_field(L, e, "inputs", path, &inputs, 1) || !array_field(L, e, "outputs", path, &outs, 0) ||
            !array_field(L, e, "saves", path, &saves, 0))
            return 0;
        op->n_in = (uint32_t)cJSON_GetArraySize(inputs);
        op->n_save = saves ? (uint32_t)cJSON_GetArraySize(saves) : op->n_in;
        op->out_off = 0;
        if (outs) {
            if (cJSON_GetObjectItemCaseSensitive(e, "bytes") || cJSON_GetObjectItemCaseSensitive(e, "alias_of") ||
                cJSON_GetObjectItemCaseSensitive(e, "dtype") || cJSON_GetObjectItemCaseSensitive(e, "shape"))
                return fail(L, REMAT_EGRAPH, path,
                            "an op with 'outputs' gives bytes, alias_of, dtype and shape per output"),
                       0;
            op->n_out = (uint32_t)cJSON_GetArraySize(outs);
            if (op->n_out == 0)
                return fail(L, REMAT_EGRAPH, path, "'outputs' must not be empty"), 0;
            uint32_t j = 0;
            for (const cJSON *o = outs->child; o; o = o->next, j++) {
                char op_path[PATH_MAX_LEN];
                path_index(op_path, sizeof op_path, path, "outputs", j);
                if (!cJSON_IsObject(o))
                    return fail(L, REMAT_EGRAPH, op_path, "must be an object"), 0;
                if (!check_keys(L, o, op_path, out_keys))
                    return 0;
                remat_tensor *t = &g->tensors[*next];
                /* Kind and producer now, so a duplicate-id message about
                 * this tensor names its kind right (load_output sets the rest). */
                t->kind = REMAT_TENSOR_ACTIVATION;
                t->producer = k;
                if (!get_str(L, o, "id", op_path, &t->id, 1))
                    return 0;
                if (!register_tensor(L, *next, t->id, op_path))
                    return 0;
                (*next)++;
            }
        } else {
            op->n_out = 1;
            remat_tensor *t = &g->tensors[*next];
            t->kind = REMAT_TENSOR_ACTIVATION;
            t->producer = k;
            t->id = op->id;
            if (!register_tensor(L, *next, t->id, path))
                return 0;
            (*next)++;
        }
        *n_refs += (uint64_t)op->n_in + op->n_out + op->n_save;
    }
    return 1;
}

/* Fills one output tensor's fields from obj (the op itself, or one entry of
 * its "outputs"). */
static int load_output(loader *L, const cJSON *obj, const char *path, uint32_t op_index, uint32_t ti,
                       const remat_op *op)
{
    remat_graph *g = L->g;
    remat_tensor *t = &g->tensors[ti];
    t->kind = REMAT_TENSOR_ACTIVATION;
    t->producer = op_index;
    t->alias_of = REMAT_NONE;
    t->storage = ti;
    if (!get_str(L, obj, "dtype", path, &t->dtype, 0) || !get_shape(L, obj, path, t))
        return 0;
    int has_bytes;
    if (!get_opt_u64(L, obj, "bytes", path, &t->bytes, &has_bytes))
        return 0;
    const cJSON *al = cJSON_GetObjectItemCaseSensitive(obj, "alias_of");
    if (al) {
        char p[PATH_MAX_LEN];
        snprintf(p, sizeof p, "%s.alias_of", path);
        uint32_t base;
        if (!resolve(L, al, p, &base))
            return 0;
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
        t->alias_of = base;
        /* A view's bytes, when given, are its logical size (its gradient's
         * size); it owns no storage. */
        t->logical_bytes = has_bytes ? t->bytes : g->tensors[base].logical_bytes;
        t->bytes = 0;
        return 1;
    }
    if (!has_bytes)
        return fail(L, REMAT_EGRAPH, path, "missing required field 'bytes'"), 0;
    t->logical_bytes = t->bytes;
    return 1;
}

static int fill_refs(loader *L, const cJSON *arr, const char *path, const char *key, uint32_t *dst)
{
    uint32_t i = 0;
    for (const cJSON *v = arr->child; v; v = v->next, i++) {
        char p[PATH_MAX_LEN];
        path_index(p, sizeof p, path, key, i);
        if (!resolve(L, v, p, &dst[i]))
            return 0;
    }
    return 1;
}

/* Second pass: resolve inputs, saves and aliases; read costs. Views must
 * come after their base in this pass, so it resolves storage roots after all
 * ops are read (see finish_storage). */
static int load_ops(loader *L, const cJSON *ops, uint32_t first_act)
{
    remat_graph *g = L->g;
    uint32_t k = 0, ti = first_act, ref = 0;
    for (const cJSON *e = ops->child; e; e = e->next, k++) {
        char path[PATH_MAX_LEN];
        path_index(path, sizeof path, "ops", NULL, k);
        remat_op *op = &g->ops[k];
        const cJSON *inputs = cJSON_GetObjectItemCaseSensitive(e, "inputs");
        const cJSON *saves = cJSON_GetObjectItemCaseSensitive(e, "saves");
        const cJSON *outs = cJSON_GetObjectItemCaseSensitive(e, "outputs");
        op->in_off = ref;
        ref += op->n_in;
        op->out_off = ref;
        ref += op->n_out;
        op->save_off = ref;
        ref += op->n_save;
        if (!fill_refs(L, inputs, path, "inputs", g->refs + op->in_off))
            return 0;
        uint32_t *out = g->refs + op->out_off;
        if (outs) {
            uint32_t j = 0;
            for (const cJSON *o = outs->child; o; o = o->next, j++) {
                char op_path[PATH_MAX_LEN];
                path_index(op_path, sizeof op_path, path, "outputs", j);
                out[j] = ti;
                if (!load_output(L, o, op_path, k, ti, op))
                    return 0;
                ti++;
            }
        } else {
            out[0] = ti;
            if (!load_output(L, e, path, k, ti, op))
                return 0;
            ti++;
        }
        /* An op id that is also a tensor id must name one of its own
         * outputs; otherwise "fwd:x" and tensor "x" would be different things. */
        uint32_t same;
        if (remat_strmap_get(&L->st->tensor_ids, op->id, &same) && g->tensors[same].producer != k) {
            char b[64];
            return fail(L, REMAT_EGRAPH, path, "op id '%s' is also the id of another tensor",
                        short_id(op->id, b, sizeof b)),
                   0;
        }
        if (saves) {
            if (!fill_refs(L, saves, path, "saves", g->refs + op->save_off))
                return 0;
        } else {
            /* Default: the op's distinct inputs (mul(x, x) saves x once). */
            const uint32_t *in = g->refs + op->in_off;
            uint32_t *sv = g->refs + op->save_off, n = 0;
            for (uint32_t a = 0; a < op->n_in; a++) {
                uint32_t b2 = 0;
                while (b2 < n && sv[b2] != in[a])
                    b2++;
                if (b2 == n)
                    sv[n++] = in[a];
            }
            op->n_save = n;
        }
        /* A tensor that is read twice by one op is one read. Duplicate saves
         * would make the executor count a tensor twice, so reject them. */
        const uint32_t *sv = g->refs + op->save_off;
        for (uint32_t a = 0; a < op->n_save; a++)
            for (uint32_t b2 = 0; b2 < a && saves; b2++)
                if (sv[a] == sv[b2]) {
                    char p[PATH_MAX_LEN], b[64];
                    snprintf(p, sizeof p, "%s.saves[%u]", path, a);
                    return fail(L, REMAT_EGRAPH, p, "tensor '%s' is listed twice",
                                short_id(g->tensors[sv[a]].id, b, sizeof b)),
                           0;
                }
        int has_flops, has_bwd;
        const int is_view = op->n_out == 1 && g->tensors[out[0]].alias_of != REMAT_NONE;
        if (!get_opt_u64(L, e, "flops", path, &op->flops, &has_flops) ||
            !get_opt_u64(L, e, "bwd_flops", path, &op->bwd_flops, &has_bwd) ||
            !get_opt_u64(L, e, "workspace", path, &op->workspace, NULL) ||
            !get_opt_u64(L, e, "bwd_workspace", path, &op->bwd_workspace, NULL) ||
            !get_bool(L, e, "recomputable", path, &op->recomputable, true))
            return 0;
        if (!has_flops && !is_view)
            return fail(L, REMAT_EGRAPH, path, "missing required field 'flops' (only views may omit it)"), 0;
        if (!has_bwd && !remat_u64_mul(op->flops, 2, &op->bwd_flops))
            return fail(L, REMAT_EOVERFLOW, path, "default bwd_flops = 2 * flops overflows 2^64-1"), 0;
        const cJSON *attrs = cJSON_GetObjectItemCaseSensitive(e, "attrs");
        if (attrs && !cJSON_IsObject(attrs)) {
            char p[PATH_MAX_LEN];
            snprintf(p, sizeof p, "%s.attrs", path);
            return fail(L, REMAT_EGRAPH, p, "must be an object"), 0;
        }
        if (attrs) {
            /* Kept as text, like meta: the executable kernels read it
             * (src/load/attrs.c), nothing else does. */
            char *m = cJSON_PrintUnformatted(attrs);
            if (!m)
                return nomem(L), 0;
            op->attrs_json = remat__store_strndup(L->st, m, strlen(m));
            cJSON_free(m);
            if (!op->attrs_json)
                return nomem(L), 0;
        }
    }
    return 1;
}

/* Views of views resolve to the root base. Walking alias chains is bounded
 * by the number of tensors; a chain can only be cyclic if the op graph is,
 * which analyze reports, so a cycle here stops at the bound. */
static int finish_storage(loader *L)
{
    remat_graph *g = L->g;
    for (uint32_t i = 0; i < g->n_tensors; i++) {
        uint32_t r = i, steps = 0;
        while (g->tensors[r].alias_of != REMAT_NONE && steps++ <= g->n_tensors)
            r = g->tensors[r].alias_of;
        g->tensors[i].storage = r;
    }
    return 1;
}

static uint64_t fingerprint(const remat_graph *g)
{
    uint64_t h = REMAT_FNV_OFFSET;
    for (uint32_t i = 0; i < g->n_tensors; i++) {
        const remat_tensor *t = &g->tensors[i];
        h = remat__fnv1a(h, t->id, strlen(t->id) + 1);
        uint64_t f[5] = {(uint64_t)t->kind, t->bytes, t->logical_bytes, t->alias_of,
                         (uint64_t)t->frozen | (uint64_t)t->requires_grad << 1};
        h = remat__fnv1a(h, f, sizeof f);
    }
    for (uint32_t k = 0; k < g->n_ops; k++) {
        const remat_op *op = &g->ops[k];
        h = remat__fnv1a(h, op->id, strlen(op->id) + 1);
        h = remat__fnv1a(h, op->type, strlen(op->type) + 1);
        uint64_t f[8] = {op->n_in, op->n_out, op->n_save, op->flops, op->bwd_flops, op->workspace, op->bwd_workspace,
                         op->recomputable};
        h = remat__fnv1a(h, f, sizeof f);
    }
    h = remat__fnv1a(h, g->refs, (size_t)g->n_refs * sizeof *g->refs);
    h = remat__fnv1a(h, g->outputs, (size_t)g->n_outputs * sizeof *g->outputs);
    return h;
}

static void line_col(const char *text, size_t len, const char *at, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (const char *p = text; p < at && p < text + len; p++) {
        if (*p == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

static int load_top(loader *L, const cJSON *root)
{
    remat_graph *g = L->g;
    if (!cJSON_IsObject(root))
        return fail(L, REMAT_EGRAPH, "", "top level must be an object"), 0;
    if (!check_keys(L, root, "", top_keys))
        return 0;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!fmt)
        return fail(L, REMAT_EGRAPH, "", "missing required field 'format' (\"" REMAT_GRAPH_FORMAT "\")"), 0;
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, REMAT_GRAPH_FORMAT) != 0)
        return fail(L, REMAT_EGRAPH, "format", "must be \"" REMAT_GRAPH_FORMAT "\""), 0;
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (!ver)
        return fail(L, REMAT_EGRAPH, "", "missing required field 'version'"), 0;
    if (!cJSON_IsNumber(ver) || ver->valuedouble != REMAT_GRAPH_VERSION)
        return fail(L, REMAT_EGRAPH, "version", "unsupported version (this remat reads version %d)",
                    REMAT_GRAPH_VERSION),
               0;
    if (!get_str(L, root, "name", "", &g->name, 0))
        return 0;
    if (!g->name && !(g->name = remat__store_strndup(L->st, "unnamed", 7)))
        return nomem(L), 0;
    const cJSON *inputs, *params, *ops, *outputs;
    if (!array_field(L, root, "inputs", "", &inputs, 0) || !array_field(L, root, "params", "", &params, 0) ||
        !array_field(L, root, "ops", "", &ops, 1) || !array_field(L, root, "outputs", "", &outputs, 1))
        return 0;
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "meta");
    if (meta) {
        if (!cJSON_IsObject(meta))
            return fail(L, REMAT_EGRAPH, "meta", "must be an object"), 0;
        char *m = cJSON_PrintUnformatted(meta);
        if (!m)
            return nomem(L), 0;
        g->meta_json = remat__store_strndup(L->st, m, strlen(m));
        cJSON_free(m);
        if (!g->meta_json)
            return nomem(L), 0;
    }
    uint64_t n_ops = (uint64_t)cJSON_GetArraySize(ops);
    if (n_ops == 0)
        return fail(L, REMAT_EGRAPH, "ops", "the graph has no ops"), 0;
    if (cJSON_GetArraySize(outputs) == 0)
        return fail(L, REMAT_EGRAPH, "outputs", "the graph names no outputs (the loss)"), 0;

    /* Count tensors: every op has one output unless it lists several. */
    uint64_t n_t = (uint64_t)(inputs ? cJSON_GetArraySize(inputs) : 0) + (params ? cJSON_GetArraySize(params) : 0);
    for (const cJSON *e = ops->child; e; e = e->next) {
        const cJSON *o = cJSON_IsObject(e) ? cJSON_GetObjectItemCaseSensitive(e, "outputs") : NULL;
        n_t += cJSON_IsArray(o) ? (uint64_t)cJSON_GetArraySize(o) : 1;
    }
    if (n_t >= REMAT_NONE || n_ops >= REMAT_NONE)
        return fail(L, REMAT_EGRAPH, "", "too many tensors (limit 2^32-2)"), 0;
    g->n_ops = (uint32_t)n_ops;
    g->n_tensors = (uint32_t)n_t;
    g->ops = remat__store_alloc(L->st, g->n_ops, sizeof *g->ops);
    g->tensors = remat__store_alloc(L->st, g->n_tensors, sizeof *g->tensors);
    if (!g->ops || !g->tensors)
        return nomem(L), 0;
    if (remat_strmap_init(&L->st->tensor_ids, g->n_tensors) != REMAT_OK ||
        remat_strmap_init(&L->st->op_ids, g->n_ops) != REMAT_OK)
        return nomem(L), 0;

    uint32_t next = 0;
    if (inputs && !load_leaves(L, inputs, "inputs", REMAT_TENSOR_INPUT, &next))
        return 0;
    if (params && !load_leaves(L, params, "params", REMAT_TENSOR_PARAM, &next))
        return 0;
    uint32_t first_act = next;
    uint64_t n_refs = 0;
    if (!register_op_outputs(L, ops, &next, &n_refs))
        return 0;
    if (n_refs >= REMAT_NONE)
        return fail(L, REMAT_EGRAPH, "ops", "too many references (limit 2^32-2)"), 0;
    g->n_refs = (uint32_t)n_refs;
    g->refs = remat__store_alloc(L->st, g->n_refs, sizeof *g->refs);
    if (!g->refs)
        return nomem(L), 0;
    if (!load_ops(L, ops, first_act) || !finish_storage(L))
        return 0;

    g->n_outputs = (uint32_t)cJSON_GetArraySize(outputs);
    g->outputs = remat__store_alloc(L->st, g->n_outputs, sizeof *g->outputs);
    if (!g->outputs)
        return nomem(L), 0;
    uint32_t i = 0;
    for (const cJSON *v = outputs->child; v; v = v->next, i++) {
        char p[PATH_MAX_LEN];
        snprintf(p, sizeof p, "outputs[%u]", i);
        if (!resolve(L, v, p, &g->outputs[i]))
            return 0;
        for (uint32_t j = 0; j < i; j++)
            if (g->outputs[j] == g->outputs[i])
                return fail(L, REMAT_EGRAPH, p, "output '%s' is listed twice", g->tensors[g->outputs[i]].id), 0;
    }
    g->fingerprint = fingerprint(g);
    return 1;
}

/* remat_graph_load_json inside the cJSON arena: every cJSON allocation
 * here is released by cj_arena_end, so no path calls cJSON_Delete. */
static remat_status load_json(const char *text, size_t len, const char *source, remat_graph **out, remat_err *err)
{
    *out = NULL;
    if (!source)
        source = "<graph>";
    hook_cjson();
    const char *end = NULL;
    cjson_alloc_failed = 0;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        int line, col;
        /* cJSON leaves end at the failing byte; an allocation failure inside
         * cJSON looks the same, which is why the hook records it. */
        if (cjson_alloc_failed)
            return remat_err_set(err, REMAT_ENOMEM, "%s: out of memory while parsing", source);
        if (!end)
            end = text;
        line_col(text, len, end, &line, &col);
        if (len == 0)
            return remat_err_set(err, REMAT_EPARSE, "%s: empty file, not JSON", source);
        return remat_err_set(err, REMAT_EPARSE, "%s:%d:%d: not valid JSON near here", source, line, col);
    }
    /* Trailing non-space after the value is an error too. */
    const char *p = end;
    while (p < text + len && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    if (p < text + len && *p != '\0') {
        int line, col;
        line_col(text, len, p, &line, &col);
        return remat_err_set(err, REMAT_EPARSE, "%s:%d:%d: unexpected text after the JSON value", source, line, col);
    }

    remat_graph *g = remat__calloc(1, sizeof *g);
    remat_graph_store *st = remat__calloc(1, sizeof *st);
    if (!g || !st) {
        remat__free(g);
        remat__free(st);
        return remat_err_set(err, REMAT_ENOMEM, "%s: out of memory while loading", source);
    }
    g->internal_ = st;
    loader L = {source, err, g, st};
    remat_err local;
    remat_err_init(&local);
    if (!err)
        L.err = &local;
    int ok = load_top(&L, root);
    if (!ok) {
        remat_status code = L.err->code != REMAT_OK ? L.err->code : REMAT_EGRAPH;
        remat_graph_destroy(g);
        return code;
    }
    *out = g;
    return REMAT_OK;
}

remat_status remat_graph_load_json(const char *text, size_t len, const char *source, remat_graph **out,
                                   remat_err *err)
{
    cj_arena_begin();
    remat_status st = load_json(text, len, source, out, err);
    cj_arena_end();
    return st;
}

remat_status remat_graph_load_file(const char *path, remat_graph **out, remat_err *err)
{
    char *text;
    size_t len;
    *out = NULL;
    remat_status st = remat__read_file(path, &text, &len, err);
    if (st != REMAT_OK)
        return st;
    st = remat_graph_load_json(text, len, path, out, err);
    remat__free(text);
    return st;
}

void remat_graph_destroy(remat_graph *g)
{
    if (!g)
        return;
    remat_graph_store *st = g->internal_;
    if (st) {
        remat_strmap_destroy(&st->tensor_ids);
        remat_strmap_destroy(&st->op_ids);
        for (remat_chunk *c = st->chunks, *n; c; c = n) {
            n = c->next;
            remat__free(c);
        }
        remat__free(st);
    }
    remat__free(g);
}

uint32_t remat_graph_find_tensor(const remat_graph *g, const char *id)
{
    uint32_t v;
    const remat_graph_store *st = g->internal_;
    return remat_strmap_get(&st->tensor_ids, id, &v) ? v : REMAT_NONE;
}

uint32_t remat_graph_find_op(const remat_graph *g, const char *id)
{
    uint32_t v;
    const remat_graph_store *st = g->internal_;
    return remat_strmap_get(&st->op_ids, id, &v) ? v : REMAT_NONE;
}

const char *remat_tensor_kind_str(remat_tensor_kind k)
{
    switch (k) {
    case REMAT_TENSOR_INPUT: return "input";
    case REMAT_TENSOR_PARAM: return "param";
    case REMAT_TENSOR_ACTIVATION: return "activation";
    }
    return "?";
}

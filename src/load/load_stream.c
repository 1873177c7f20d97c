/*
 * load_stream.c - the graph loader's stream driver: one element at a time.
 *
 * The document's top level is scanned here, by hand, exactly as cJSON's
 * parse_object and parse_array walk it (the same whitespace, the same
 * separators); every value inside it is parsed by cJSON itself, starting at
 * the value's first byte with the rest of the document as its buffer, so
 * cJSON accepts and reads each value exactly as it would inside the whole
 * document. Two things differ and are handled:
 *
 *  - nesting: cJSON refuses a document nested 1000 deep. A value parsed on
 *    its own starts at depth 0 instead of 1 (a top-level field) or 2 (an
 *    array element), so a value long enough to nest that deep is measured,
 *    and the driver gives up if the whole document would have been refused;
 *  - a byte order mark: cJSON skips one at the start of its buffer, which is
 *    the start of a value here; such a value makes the driver give up.
 *
 * Elements of "inputs", "params" and "ops" are read as they are parsed and
 * their trees released at once (an arena mark), so memory holds the graph
 * and one element's tree, never the whole document's tree. An op is read in
 * both passes at once; a reference to a tensor defined later is deferred.
 * Tensors are numbered inputs, params, activations, so the driver needs
 * "inputs" before "params" before "ops" in the file (as every exporter and
 * `remat gen` write them); any other order makes it give up.
 *
 * Giving up is always safe: the tree driver then loads the document and
 * reports its first error with the canonical message (load_internal.h).
 */
#include "load_internal.h"

#include <string.h>

typedef struct {
    loader *L;
    const unsigned char *text, *end;
    cJSON *root;  /* the top-level fields, "inputs", "params" and "ops" as empty placeholders */
    int stage;    /* 0 start, 1 after "inputs", 2 after "params", 3 after "ops" */
    uint32_t next; /* the next tensor index */
    uint32_t n_ops;
    uint64_t ref; /* the next free slot of g->refs */
} stream;

/* cJSON's whitespace: every byte up to and including space. */
static const unsigned char *skip_ws(const unsigned char *p, const unsigned char *end)
{
    while (p < end && *p <= 32)
        p++;
    return p;
}

/* Whether text[p, q) opens a container at nesting level `limit` or deeper
 * (the value itself is level 0). Strings are skipped with their escapes. */
static int too_deep(const unsigned char *p, const unsigned char *q, size_t limit)
{
    size_t level = 0;
    for (; p < q; p++) {
        switch (*p) {
        case '"':
            for (p++; p < q && *p != '"'; p++)
                if (*p == '\\')
                    p++;
            break;
        case '[':
        case '{':
            if (level >= limit)
                return 1;
            level++;
            break;
        case ']':
        case '}':
            if (level > 0)
                level--;
            break;
        default:
            break;
        }
    }
    return 0;
}

/* Parses the value at p as cJSON would at nesting depth `depth` of the whole
 * document; *q is set past it. NULL to give up; with an out-of-memory error
 * recorded in L->err when that was the cause. */
static cJSON *parse_at(stream *S, const unsigned char *p, size_t depth, const unsigned char **q)
{
    if (p >= S->end || *p == 0xEF)
        return NULL;
    const char *e = NULL;
    remat__json_clear_alloc_failed();
    cJSON *v = cJSON_ParseWithLengthOpts((const char *)p, (size_t)(S->end - p), &e, 0);
    if (!v) {
        if (remat__json_alloc_failed())
            remat_err_set(S->L->err, REMAT_ENOMEM, "%s: out of memory while parsing", S->L->source);
        return NULL;
    }
    *q = (const unsigned char *)e;
    /* Reaching level L takes L+1 opening and L+1 closing brackets. */
    size_t limit = CJSON_NESTING_LIMIT - depth;
    if ((size_t)(*q - p) >= 2 * limit && too_deep(p, *q, limit))
        return NULL;
    return v;
}

/* Starts loading the map slots of every id an element names: on a 10^6-op
 * graph each is a cache miss, and issued together they overlap. */
static void prefetch_ids(const loader *L, const cJSON *e, int op)
{
    const remat_strmap *t = &L->st->tensor_ids;
    for (const cJSON *c = cJSON_IsObject(e) ? e->child : NULL; c; c = c->next) {
        if (cJSON_IsString(c) && (strcmp(c->string, "id") == 0 || strcmp(c->string, "alias_of") == 0)) {
            remat_strmap_prefetch(t, c->valuestring);
            if (op && c->string[0] == 'i')
                remat_strmap_prefetch(&L->st->op_ids, c->valuestring);
        } else if (op && cJSON_IsArray(c)) {
            int outs = strcmp(c->string, "outputs") == 0;
            for (const cJSON *v = c->child; v; v = v->next) {
                const cJSON *id = outs && cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, "id") : v;
                if (cJSON_IsString(id))
                    remat_strmap_prefetch(t, id->valuestring);
            }
        }
    }
}

static int leaf_element(stream *S, const cJSON *e, int params, uint32_t i)
{
    loader *L = S->L;
    if (S->next >= REMAT_NONE - 1 || !remat__load_reserve_tensors(L, (uint64_t)S->next + 1))
        return 0;
    prefetch_ids(L, e, 0);
    if (!remat__load_leaf(L, e, params ? "params" : "inputs", i,
                          params ? REMAT_TENSOR_PARAM : REMAT_TENSOR_INPUT, S->next))
        return 0;
    S->next++;
    return 1;
}

static int op_element(stream *S, const cJSON *e)
{
    loader *L = S->L;
    prefetch_ids(L, e, 1);
    uint32_t k = S->n_ops;
    if (k >= REMAT_NONE - 1 || !remat__load_reserve_ops(L, (uint64_t)k + 1))
        return 0;
    uint32_t ti = S->next, next = S->next;
    uint64_t n_refs = 0;
    if (!remat__load_op_ids(L, e, k, &next, &n_refs))
        return 0;
    /* The tree driver's limits: 2^32-2 tensors and references. */
    if (next >= REMAT_NONE - 1 || S->ref + n_refs >= REMAT_NONE)
        return 0;
    S->next = next;
    if (!remat__load_op_refs(L, e, k, &ti, &S->ref))
        return 0;
    S->n_ops++;
    return 1;
}

/* An array of leaves or ops, elements parsed and read one by one. */
static int stream_array(stream *S, const unsigned char **pp, int which)
{
    const unsigned char *p = skip_ws(*pp + 1, S->end), *q;
    uint32_t i = 0;
    if (p < S->end && *p == ']') {
        *pp = p + 1;
        return 1;
    }
    for (;;) {
        remat_json_mark m;
        remat__json_arena_mark(&m);
        cJSON *e = parse_at(S, p, 2, &q);
        int ok = e && (which == 2 ? op_element(S, e) : leaf_element(S, e, which, i));
        remat__json_arena_release(&m);
        if (!ok || i == REMAT_NONE - 1)
            return 0;
        i++;
        p = skip_ws(q, S->end);
        if (p < S->end && *p == ',') {
            p = skip_ws(p + 1, S->end);
            continue;
        }
        if (p < S->end && *p == ']') {
            *pp = p + 1;
            return 1;
        }
        return 0;
    }
}

/* The streamed arrays, in the order the driver needs them. */
static int streamed(const char *key)
{
    return strcmp(key, "inputs") == 0 ? 0 : strcmp(key, "params") == 0 ? 1 : strcmp(key, "ops") == 0 ? 2 : -1;
}

static int scan_top(stream *S)
{
    const unsigned char *p = S->text, *q, *end = S->end;
    if (p < end && *p == 0xEF) /* a byte order mark: rare, left to the tree driver */
        return 0;
    p = skip_ws(p, end);
    if (p >= end || *p != '{')
        return 0;
    if (!(S->root = cJSON_CreateObject())) {
        remat__load_nomem(S->L);
        return 0;
    }
    p = skip_ws(p + 1, end);
    if (p < end && *p == '}') {
        p++;
    } else {
        for (;;) {
            if (p >= end || *p != '"')
                return 0;
            cJSON *key = parse_at(S, p, 1, &q);
            if (!key || !cJSON_IsString(key))
                return 0;
            p = skip_ws(q, end);
            if (p >= end || *p != ':')
                return 0;
            p = skip_ws(p + 1, end);
            int which = streamed(key->valuestring);
            cJSON *v;
            if (which >= 0 && p < end && *p == '[') {
                /* inputs (stage 0 -> 1), params (-> 2), ops (-> 3): each once, in this order. */
                if (S->stage > which)
                    return 0;
                S->stage = which + 1;
                v = cJSON_CreateArray();
                if (!v || !cJSON_AddItemToObject(S->root, key->valuestring, v)) {
                    remat__load_nomem(S->L);
                    return 0;
                }
                if (!stream_array(S, &p, which))
                    return 0;
            } else {
                if (!(v = parse_at(S, p, 1, &q)))
                    return 0;
                if (!cJSON_AddItemToObject(S->root, key->valuestring, v)) {
                    remat__load_nomem(S->L);
                    return 0;
                }
                p = q;
            }
            p = skip_ws(p, end);
            if (p < end && *p == ',') {
                p = skip_ws(p + 1, end);
                continue;
            }
            if (p < end && *p == '}') {
                p++;
                break;
            }
            return 0;
        }
    }
    /* As the tree driver: only whitespace (or a NUL) may follow. */
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    return !(p < end && *p != '\0');
}

int remat__load_stream(loader *L, const char *text, size_t len)
{
    stream S = {L, (const unsigned char *)text, (const unsigned char *)text + len, NULL, 0, 0, 0, 0};
    remat_graph *g = L->g;
    L->streaming = 1;
    remat__json_hook();
    /* Sized for files like `remat gen`'s (about 70 bytes of text per tensor,
     * 140 per op); the maps double past that. */
    if (remat_strmap_init(&L->st->tensor_ids, len / 128) != REMAT_OK ||
        remat_strmap_init(&L->st->op_ids, len / 256) != REMAT_OK)
        return remat__load_nomem(L), 0;
    if (!scan_top(&S))
        return 0;
    g->n_ops = S.n_ops;
    g->n_tensors = S.next;
    g->n_refs = (uint32_t)S.ref;
    load_fields f;
    load_top_arrays a;
    if (!remat__load_fields(L, S.root, "", remat__load_top_keys, &f) || !remat__load_top_fields(L, &f, &a))
        return 0;
    if (g->n_ops == 0 || cJSON_GetArraySize(a.outputs) == 0)
        return 0;
    return remat__load_resolve_deferred(L) && remat__load_finish(L, a.outputs);
}

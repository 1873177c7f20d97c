/*
 * loader.c - JSON graph (format "remat-graph", version 1) to remat_graph.
 *
 * The loader is the only place that reads cJSON graph input. What each field
 * means is in load_elems.c; this file holds the public API and the tree
 * driver, which parses the whole document and walks it in passes: check the
 * top level, register every tensor id (inputs, params, op outputs) so that
 * ops may refer to tensors defined later in the file, then resolve every
 * reference. Every message names the JSON path of the offending value (or
 * its line:column for syntax), so a user can find it in a 10^6-op export.
 * Ordering and cycles are the analyzer's job: the loader accepts any
 * reference structure and analyze reports a cycle by its nodes.
 *
 * A large graph's cJSON tree is several times the size of its text, so the
 * stream driver (load_stream.c) loads first, one element at a time, and the
 * tree driver runs only when the stream driver gives up: on bad input, whose
 * messages are the tree driver's, or on a field order it does not handle.
 * (The error path therefore holds a whole tree; bad input is the rare case.)
 */
#include "load_internal.h"

#include <stdio.h>
#include <string.h>

#define fail remat__load_fail
#define nomem remat__load_nomem

/* ------------------------------------------------------------ tree driver */

static int load_tree(loader *L, const cJSON *root)
{
    remat_graph *g = L->g;
    if (!cJSON_IsObject(root))
        return fail(L, REMAT_EGRAPH, "", "top level must be an object"), 0;
    load_fields f;
    load_top_arrays a;
    if (!remat__load_fields(L, root, "", remat__load_top_keys, &f) || !remat__load_top_fields(L, &f, &a))
        return 0;
    uint64_t n_ops = (uint64_t)cJSON_GetArraySize(a.ops);
    if (n_ops == 0)
        return fail(L, REMAT_EGRAPH, "ops", "the graph has no ops"), 0;
    if (cJSON_GetArraySize(a.outputs) == 0)
        return fail(L, REMAT_EGRAPH, "outputs", "the graph names no outputs (the loss)"), 0;

    /* Count tensors: every op has one output unless it lists several. */
    uint64_t n_t =
        (uint64_t)(a.inputs ? cJSON_GetArraySize(a.inputs) : 0) + (uint64_t)(a.params ? cJSON_GetArraySize(a.params) : 0);
    for (const cJSON *e = a.ops->child; e; e = e->next) {
        const cJSON *o = cJSON_IsObject(e) ? cJSON_GetObjectItemCaseSensitive(e, "outputs") : NULL;
        n_t += cJSON_IsArray(o) ? (uint64_t)cJSON_GetArraySize(o) : 1;
    }
    if (n_t >= REMAT_NONE || n_ops >= REMAT_NONE)
        return fail(L, REMAT_EGRAPH, "", "too many tensors (limit 2^32-2)"), 0;
    g->n_ops = (uint32_t)n_ops;
    g->n_tensors = (uint32_t)n_t;
    if (!remat__load_reserve_ops(L, g->n_ops) || !remat__load_reserve_tensors(L, g->n_tensors))
        return 0;
    if (remat_strmap_init(&L->st->tensor_ids, g->n_tensors) != REMAT_OK ||
        remat_strmap_init(&L->st->op_ids, g->n_ops) != REMAT_OK)
        return nomem(L), 0;

    uint32_t next = 0, i = 0;
    for (const cJSON *e = a.inputs ? a.inputs->child : NULL; e; e = e->next, i++)
        if (!remat__load_leaf(L, e, "inputs", i, REMAT_TENSOR_INPUT, next++))
            return 0;
    i = 0;
    for (const cJSON *e = a.params ? a.params->child : NULL; e; e = e->next, i++)
        if (!remat__load_leaf(L, e, "params", i, REMAT_TENSOR_PARAM, next++))
            return 0;
    uint32_t first_act = next, k = 0;
    uint64_t n_refs = 0;
    for (const cJSON *e = a.ops->child; e; e = e->next, k++)
        if (!remat__load_op_ids(L, e, k, &next, &n_refs))
            return 0;
    if (n_refs >= REMAT_NONE)
        return fail(L, REMAT_EGRAPH, "ops", "too many references (limit 2^32-2)"), 0;
    g->n_refs = (uint32_t)n_refs;
    if (!remat__load_reserve_refs(L, g->n_refs))
        return 0;
    uint32_t ti = first_act;
    uint64_t ref = 0;
    k = 0;
    for (const cJSON *e = a.ops->child; e; e = e->next, k++)
        if (!remat__load_op_refs(L, e, k, &ti, &ref))
            return 0;
    return remat__load_finish(L, a.outputs);
}

/* The whole document as one cJSON tree; syntax errors carry line:column. */
static remat_status parse_tree(loader *L, const char *text, size_t len)
{
    const char *end = NULL;
    cJSON *root = remat__json_parse(text, len, &end);
    if (!root) {
        int line, col;
        /* cJSON leaves end at the failing byte; an allocation failure inside
         * cJSON looks the same, which is why the hook records it. */
        if (remat__json_alloc_failed())
            return remat_err_set(L->err, REMAT_ENOMEM, "%s: out of memory while parsing", L->source);
        if (!end)
            end = text;
        remat__json_line_col(text, len, end, &line, &col);
        if (len == 0)
            return remat_err_set(L->err, REMAT_EPARSE, "%s: empty file, not JSON", L->source);
        remat_err_loc loc;
        remat_err_loc_make(&loc, L->source, NULL, line, col, NULL);
        return remat_err_set_at(L->err, REMAT_EPARSE, &loc, "%s:%d:%d: not valid JSON near here", L->source, line, col);
    }
    /* Trailing non-space after the value is an error too. */
    const char *p = end;
    while (p < text + len && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    if (p < text + len && *p != '\0') {
        int line, col;
        remat__json_line_col(text, len, p, &line, &col);
        remat_err_loc loc;
        remat_err_loc_make(&loc, L->source, NULL, line, col, NULL);
        return remat_err_set_at(L->err, REMAT_EPARSE, &loc, "%s:%d:%d: unexpected text after the JSON value",
                                L->source, line, col);
    }
    if (!load_tree(L, root))
        return L->err->code != REMAT_OK ? L->err->code : REMAT_EGRAPH;
    return REMAT_OK;
}

/* ----------------------------------------------------------------- API */

static remat_status new_graph(loader *L, const char *source, remat_err *err)
{
    memset(L, 0, sizeof *L);
    L->source = source;
    L->err = err;
    remat_buf_init(&L->pend_ids);
    L->g = remat__calloc(1, sizeof *L->g);
    L->st = remat__calloc(1, sizeof *L->st);
    if (!L->g || !L->st) {
        remat__free(L->g);
        remat__free(L->st);
        L->g = NULL;
        L->st = NULL;
        return remat_err_set(err, REMAT_ENOMEM, "%s: out of memory while loading", source);
    }
    L->g->internal_ = L->st;
    return REMAT_OK;
}

/* Frees what only loading needed; the graph itself too unless keep. */
static void end_loader(loader *L, int keep)
{
    remat__free(L->pend);
    remat__free(L->dops);
    remat_buf_destroy(&L->pend_ids);
    if (!keep)
        remat_graph_destroy(L->g);
    L->g = NULL;
}

/* Measured durations (graphs/README.md, "Measured durations"): when an op's
 * attrs give duration_ns or bwd_duration_ns, each is a finite number of
 * nanoseconds, at least 0. The attrs are free-form, so this is the one
 * place the loader looks inside them; ops whose attrs never mention a
 * duration are not parsed again. */
static remat_status check_durations(const remat_graph *g, const char *source, remat_err *err)
{
    static const char *const keys[] = {"duration_ns", "bwd_duration_ns"};
    for (uint32_t k = 0; k < g->n_ops; k++) {
        if (!g->ops[k].attrs_json || !strstr(g->ops[k].attrs_json, "duration_ns"))
            continue;
        for (int i = 0; i < 2; i++) {
            double v = 0;
            bool found = false;
            remat_err local;
            remat_err_init(&local);
            remat_status st = remat_op_attr_number(g, k, keys[i], &v, &found, &local);
            if (st == REMAT_OK && found && v < 0)
                st = remat_err_set(&local, REMAT_EGRAPH, "ops[%u].attrs.%s (op '%.80s'): must not be negative", k,
                                   keys[i], g->ops[k].id);
            if (st == REMAT_ENOMEM)
                return remat_err_set(err, st, "%s", local.msg);
            if (st != REMAT_OK) {
                char path[64];
                snprintf(path, sizeof path, "ops[%u].attrs.%s", k, keys[i]);
                remat_err_loc loc;
                remat_err_loc_make(&loc, source, path, 0, 0, g->ops[k].id);
                return remat_err_set_at(err, st, &loc, "%s: %s (nanoseconds)", source, local.msg);
            }
        }
    }
    return REMAT_OK;
}

static remat_status load_mode(const char *text, size_t len, const char *source, remat_graph **out, remat_err *err,
                              remat_load_mode mode);

remat_status remat__graph_load_json_mode(const char *text, size_t len, const char *source, remat_graph **out,
                                         remat_err *err, remat_load_mode mode)
{
    remat_status st = load_mode(text, len, source, out, err, mode);
    if (st == REMAT_OK && (st = check_durations(*out, source ? source : "<graph>", err)) != REMAT_OK) {
        remat_graph_destroy(*out);
        *out = NULL;
    }
    return st;
}

static remat_status load_mode(const char *text, size_t len, const char *source, remat_graph **out, remat_err *err,
                              remat_load_mode mode)
{
    *out = NULL;
    if (!source)
        source = "<graph>";
    remat_err local;
    remat_err_init(&local);
    if (!err)
        err = &local;
    loader L;
    remat_status st;
    /* Before either driver, so both refuse the same bytes the same way
     * (the stream driver alone gives up as it does on anything it refuses,
     * leaving the canonical message to the tree driver). */
    remat_err uerr;
    remat_err_init(&uerr);
    if ((st = remat__json_check_utf8(text, len, source, &uerr)) != REMAT_OK) {
        if (mode == REMAT_LOAD_STREAM)
            return remat_err_set(err, REMAT_EUNSUPPORTED, "%s: the stream driver gave up (%s)", source, uerr.msg);
        return remat_err_set(err, st, "%s", uerr.msg);
    }
    /* Every cJSON allocation below comes from the arena, which
     * remat__json_arena_end releases: no path calls cJSON_Delete. */
    remat__json_arena_begin();
    if (mode != REMAT_LOAD_TREE) {
        remat_err serr;
        remat_err_init(&serr);
        if ((st = new_graph(&L, source, err)) != REMAT_OK) {
            remat__json_arena_end();
            return st;
        }
        L.err = &serr;
        int ok = remat__load_stream(&L, text, len);
        remat_graph *g = L.g;
        end_loader(&L, ok);
        if (ok) {
            remat__json_arena_end();
            *out = g;
            return REMAT_OK;
        }
        if (serr.code == REMAT_ENOMEM || mode == REMAT_LOAD_STREAM) {
            remat__json_arena_end();
            if (serr.code == REMAT_ENOMEM)
                return remat_err_set(err, REMAT_ENOMEM, "%s", serr.msg);
            return remat_err_set(err, REMAT_EUNSUPPORTED, "%s: the stream driver gave up (%s)", source,
                                 serr.code != REMAT_OK ? serr.msg : "syntax or field order");
        }
        /* Start the tree driver with an empty arena. */
        remat__json_arena_end();
        remat__json_arena_begin();
    }
    if ((st = new_graph(&L, source, err)) == REMAT_OK) {
        st = parse_tree(&L, text, len);
        remat_graph *g = L.g;
        end_loader(&L, st == REMAT_OK);
        if (st == REMAT_OK)
            *out = g;
    }
    remat__json_arena_end();
    return st;
}

remat_status remat_graph_load_json(const char *text, size_t len, const char *source, remat_graph **out,
                                   remat_err *err)
{
    return remat__graph_load_json_mode(text, len, source, out, err, REMAT_LOAD_AUTO);
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
    remat__free(g->tensors);
    remat__free(g->ops);
    remat__free(g->refs);
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

/* ------------------------------------------------------------ comparison */

static int str_same(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

#define DIFFER(...) (snprintf(why, cap, __VA_ARGS__), 0)

int remat__graph_same(const remat_graph *a, const remat_graph *b, char *why, size_t cap)
{
    if (a->n_tensors != b->n_tensors || a->n_ops != b->n_ops || a->n_refs != b->n_refs || a->n_outputs != b->n_outputs)
        return DIFFER("counts differ: %u/%u tensors, %u/%u ops, %u/%u refs, %u/%u outputs", a->n_tensors, b->n_tensors,
                      a->n_ops, b->n_ops, a->n_refs, b->n_refs, a->n_outputs, b->n_outputs);
    if (!str_same(a->name, b->name) || !str_same(a->meta_json, b->meta_json))
        return DIFFER("name or meta differ");
    for (uint32_t i = 0; i < a->n_tensors; i++) {
        const remat_tensor *x = &a->tensors[i], *y = &b->tensors[i];
        if (!str_same(x->id, y->id) || x->kind != y->kind || x->bytes != y->bytes ||
            x->logical_bytes != y->logical_bytes || x->producer != y->producer || x->alias_of != y->alias_of ||
            x->storage != y->storage || x->frozen != y->frozen || x->requires_grad != y->requires_grad ||
            !str_same(x->dtype, y->dtype) || x->ndim != y->ndim ||
            (x->ndim && memcmp(x->shape, y->shape, x->ndim * sizeof *x->shape) != 0))
            return DIFFER("tensor %u ('%.40s') differs", i, x->id);
        if (remat_graph_find_tensor(a, x->id) != i || remat_graph_find_tensor(b, y->id) != i)
            return DIFFER("tensor %u ('%.40s') is not found by its id", i, x->id);
    }
    for (uint32_t k = 0; k < a->n_ops; k++) {
        const remat_op *x = &a->ops[k], *y = &b->ops[k];
        if (!str_same(x->id, y->id) || !str_same(x->type, y->type) || x->in_off != y->in_off || x->n_in != y->n_in ||
            x->out_off != y->out_off || x->n_out != y->n_out || x->save_off != y->save_off || x->n_save != y->n_save ||
            x->flops != y->flops || x->bwd_flops != y->bwd_flops || x->workspace != y->workspace ||
            x->bwd_workspace != y->bwd_workspace || x->recomputable != y->recomputable || x->grad_views != y->grad_views ||
            !str_same(x->attrs_json, y->attrs_json))
            return DIFFER("op %u ('%.40s') differs", k, x->id);
        if (remat_graph_find_op(a, x->id) != k || remat_graph_find_op(b, y->id) != k)
            return DIFFER("op %u ('%.40s') is not found by its id", k, x->id);
    }
    if (memcmp(a->refs, b->refs, (size_t)a->n_refs * sizeof *a->refs) != 0)
        return DIFFER("references differ");
    if (memcmp(a->outputs, b->outputs, (size_t)a->n_outputs * sizeof *a->outputs) != 0)
        return DIFFER("outputs differ");
    if (a->fingerprint != b->fingerprint)
        return DIFFER("fingerprints differ");
    return 1;
}

/*
 * import_tp.c - one rank's graph of Megatron-LM tensor parallelism from an
 * exported graph and a partition file (the rules are in remat/import.h).
 *
 * The split follows Shoeybi et al. 2019 section 3: a column-parallel linear
 * (its weight split by output features) starts a parallel region and a
 * row-parallel linear (split by input features) ends it with a partial sum.
 * The file only says which modules are which; everything between is found by
 * data flow. A tensor is replicated (every rank holds all of it), sharded
 * (each holds 1/t), and the op that makes it does 1/t of its work when it
 * reads a sharded tensor. Two things data flow alone gets wrong are handled
 * by name: the linear of a module is the op that reads "<module>.weight"
 * (the views an exporter records around it are not linears), and tensors
 * made from nothing (empty_like -> bernoulli_ -> div_, a dropout mask) take
 * the state of their consumers, because a mask inside a region has the
 * region's shard shape although it reads no sharded tensor.
 *
 * The file is edited as a cJSON tree, not rebuilt from a remat_graph, so
 * that every field the exporter wrote (dtype, attrs, meta, durations) goes
 * through unless the split changes it. The input is loaded by the one loader
 * first, so the edit can assume a valid graph and only the partition's own
 * mistakes are reported here. This file decides the states; the edit that
 * applies them and inserts the collectives is import_tp_edit.c.
 */
#define _POSIX_C_SOURCE 200809L

#include "import_tp_internal.h"
#include "remat/graph.h"

#include <fnmatch.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int remat__tp_bad(tx *c, const char *file, const char *path, const char *id, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    remat__err_at(c->err, REMAT_EGRAPH, file, 0, 0, path, id, "%s", msg);
    return 0;
}

int remat__tp_nomem(tx *c)
{
    remat_err_set(c->err, REMAT_ENOMEM, "%s: out of memory splitting the graph", c->source);
    return 0;
}

/* Byte counts and FLOPs are JSON numbers, or decimal strings above 2^53
 * (the loader's rule); both are read and written back in their own form. */
int remat__tp_count(const cJSON *v, uint64_t *out)
{
    if (cJSON_IsNumber(v)) {
        *out = (uint64_t)v->valuedouble;
        return 1;
    }
    if (cJSON_IsString(v)) {
        *out = strtoull(v->valuestring, NULL, 10);
        return 1;
    }
    return 0;
}

int remat__tp_set_count(tx *c, cJSON *v, uint64_t x)
{
    if (cJSON_IsNumber(v)) {
        cJSON_SetNumberValue(v, (double)x);
        return 1;
    }
    char s[24];
    snprintf(s, sizeof s, "%" PRIu64, x);
    return cJSON_SetValuestring(v, s) ? 1 : remat__tp_nomem(c);
}

/* Divides obj[key] by t: exactly when `exact` (a tensor's bytes, a weight),
 * rounded up otherwise (work and workspace, where a remainder is a rounding
 * of the model, not an inconsistency). */
int remat__tp_divide(tx *c, cJSON *obj, const char *key, int exact, const char *what, const char *id)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    uint64_t x;
    if (!v || !remat__tp_count(v, &x))
        return 1;
    if (exact && x % c->t != 0)
        return remat__tp_bad(c, c->source, NULL, id, "%s '%s' has %" PRIu64 " %s, which --tp %" PRIu64 " does not divide", what,
                   id, x, key, c->t);
    return remat__tp_set_count(c, v, x / c->t + (!exact && x % c->t ? 1 : 0));
}

uint32_t remat__tp_add_tensor(tx *c, const char *id, cJSON *obj, uint32_t op, int is_param, int is_leaf)
{
    if (c->n_ten == c->cap_ten) {
        uint32_t cap = c->cap_ten ? 2 * c->cap_ten : 256;
        tten *p = remat__realloc(c->ten, cap * sizeof *p);
        if (!p)
            return remat__tp_nomem(c), NONE;
        c->ten = p;
        c->cap_ten = cap;
    }
    uint32_t i = c->n_ten++;
    c->ten[i] = (tten){id, obj, op, is_param, is_leaf, 0, REPL, 0, NONE};
    /* The loader has checked that ids are unique. */
    if (remat_strmap_put(&c->ids, id, i, NULL) != REMAT_OK)
        return remat__tp_nomem(c), NONE;
    return i;
}

static int add_use(tx *c, uint32_t tensor, uint32_t op)
{
    if (c->n_uses == c->cap_uses) {
        uint32_t cap = c->cap_uses ? 2 * c->cap_uses : 512;
        tuse *p = remat__realloc(c->uses, cap * sizeof *p);
        if (!p)
            return remat__tp_nomem(c);
        c->uses = p;
        c->cap_uses = cap;
    }
    c->uses[c->n_uses] = (tuse){op, c->ten[tensor].first_use};
    c->ten[tensor].first_use = c->n_uses++;
    return 1;
}

uint32_t remat__tp_lookup(const tx *c, const char *id)
{
    uint32_t i;
    return remat_strmap_get(&c->ids, id, &i) ? i : NONE;
}

uint64_t remat__tp_bytes(const tx *c, uint32_t t)
{
    uint64_t b = 0;
    remat__tp_count(cJSON_GetObjectItemCaseSensitive(c->ten[t].obj, "bytes"), &b);
    return b;
}

/* ------------------------------------------------------------- partition */

static int read_patterns(tx *c, const cJSON *arr, const char *key)
{
    if (!arr)
        return 1;
    if (!cJSON_IsArray(arr))
        return remat__tp_bad(c, c->psource, key, NULL, "must be an array of module-name patterns");
    int k = 0;
    for (const cJSON *v = arr->child; v; v = v->next, k++) {
        if (!cJSON_IsString(v) || !v->valuestring[0]) {
            char p[48];
            snprintf(p, sizeof p, "%s[%d]", key, k);
            return remat__tp_bad(c, c->psource, p, NULL, "must be a non-empty string (a module name or a glob such as "
                                              "\"blocks.*.attn.qkv\")");
        }
    }
    return 1;
}

static int read_partition(tx *c)
{
    const cJSON *p = c->part;
    if (!cJSON_IsObject(p))
        return remat__tp_bad(c, c->psource, "", NULL, "a partition is an object {\"format\": \"remat-tp-partition\", ...}");
    static const char *const keys[] = {"format", "version", "column", "row", "comment", NULL};
    for (const cJSON *v = p->child; v; v = v->next) {
        int known = 0;
        for (int k = 0; keys[k]; k++)
            known |= strcmp(v->string, keys[k]) == 0;
        if (!known)
            return remat__tp_bad(c, c->psource, v->string, NULL,
                       "unknown key (known: format, version, column, row, comment)");
    }
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(p, "format");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(p, "version");
    if (!cJSON_IsString(f) || strcmp(f->valuestring, "remat-tp-partition") != 0)
        return remat__tp_bad(c, c->psource, "format", NULL, "must be \"remat-tp-partition\"");
    if (!cJSON_IsNumber(ver) || ver->valuedouble != 1)
        return remat__tp_bad(c, c->psource, "version", NULL, "must be 1");
    c->col = cJSON_GetObjectItemCaseSensitive(p, "column");
    c->row = cJSON_GetObjectItemCaseSensitive(p, "row");
    if (!read_patterns(c, c->col, "column") || !read_patterns(c, c->row, "row"))
        return 0;
    if (cJSON_GetArraySize(c->col) == 0 || cJSON_GetArraySize(c->row) == 0)
        return remat__tp_bad(c, c->psource, cJSON_GetArraySize(c->col) == 0 ? "column" : "row", NULL,
                   "needs at least one pattern: every parallel region opens with a column-parallel linear and "
                   "closes with a row-parallel one");
    return 1;
}

/* The index of the first pattern of arr matching module, or -1. */
static int match(const cJSON *arr, const char *module)
{
    int k = 0;
    for (const cJSON *v = arr ? arr->child : NULL; v; v = v->next, k++)
        if (fnmatch(v->valuestring, module, 0) == 0)
            return k;
    return -1;
}

/* ------------------------------------------------------------ the graph */

static int index_leaves(tx *c, const char *key, int is_param)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(c->root, key);
    for (cJSON *v = arr ? arr->child : NULL; v; v = v->next) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(v, "id");
        if (remat__tp_add_tensor(c, id->valuestring, v, NONE, is_param, 1) == NONE)
            return 0;
    }
    return 1;
}

static int index_ops(tx *c)
{
    cJSON *arr = cJSON_GetObjectItemCaseSensitive(c->root, "ops");
    c->n_ops = (uint32_t)cJSON_GetArraySize(arr);
    c->ops = remat__calloc(c->n_ops ? c->n_ops : 1, sizeof *c->ops);
    if (!c->ops)
        return remat__tp_nomem(c);
    uint32_t i = 0;
    for (cJSON *o = arr->child; o; o = o->next, i++) {
        top *x = &c->ops[i];
        x->obj = o;
        x->id = cJSON_GetObjectItemCaseSensitive(o, "id")->valuestring;
        const cJSON *attrs = cJSON_GetObjectItemCaseSensitive(o, "attrs");
        const cJSON *m = cJSON_IsObject(attrs) ? cJSON_GetObjectItemCaseSensitive(attrs, "module") : NULL;
        x->module = cJSON_IsString(m) ? m->valuestring : NULL;
        x->weight = NONE;
        /* The loader sorts a file whose order is not topological; the split
         * walks file order, so it refuses such a file, naming the op. */
        const cJSON *ins = cJSON_GetObjectItemCaseSensitive(o, "inputs");
        for (const cJSON *in = ins ? ins->child : NULL; in; in = in->next) {
            uint32_t t = remat__tp_lookup(c, in->valuestring);
            if (t == NONE) {
                char p[40];
                snprintf(p, sizeof p, "ops[%" PRIu32 "].inputs", i);
                return remat__tp_bad(c, c->source, p, x->id,
                           "op '%s' reads '%s' before any op makes it: tp-split needs the ops in a "
                           "topological file order, as the exporter writes them",
                           x->id, in->valuestring);
            }
            if (!add_use(c, t, i))
                return 0;
        }
        cJSON *outs = cJSON_GetObjectItemCaseSensitive(o, "outputs");
        x->out0 = c->n_ten;
        if (cJSON_IsArray(outs)) {
            for (cJSON *e = outs->child; e; e = e->next, x->n_out++)
                if (remat__tp_add_tensor(c, cJSON_GetObjectItemCaseSensitive(e, "id")->valuestring, e, i, 0, 0) == NONE)
                    return 0;
        } else {
            if (remat__tp_add_tensor(c, x->id, o, i, 0, 0) == NONE)
                return 0;
            x->n_out = 1;
        }
    }
    return 1;
}

/* The role of op i from its module, and for a linear the weight it reads. */
static int assign_role(tx *c, uint32_t i, int *col_hits, int *row_hits)
{
    top *x = &c->ops[i];
    if (!x->module)
        return 1;
    int kc = match(c->col, x->module), kr = match(c->row, x->module);
    if (kc < 0 && kr < 0)
        return 1;
    if (kc >= 0 && kr >= 0)
        return remat__tp_bad(c, c->psource, NULL, x->id, "module '%s' matches column[%d] and row[%d]: a linear is split one way",
                   x->module, kc, kr);
    char wid[512];
    snprintf(wid, sizeof wid, "%s.weight", x->module);
    const cJSON *ins = cJSON_GetObjectItemCaseSensitive(x->obj, "inputs");
    for (const cJSON *in = ins->child; in; in = in->next)
        if (strcmp(in->valuestring, wid) == 0)
            x->weight = remat__tp_lookup(c, wid);
    if (x->weight == NONE || !c->ten[x->weight].is_param)
        return x->weight = NONE, 1; /* a view or reshape recorded in the linear's module */
    x->role = kc >= 0 ? ROLE_COL : ROLE_ROW;
    c->sum.linears[kc >= 0 ? 0 : 1]++;
    if (kc >= 0)
        col_hits[kc]++;
    else
        row_hits[kr]++;
    return 1;
}

/* An op that reads a split tensor and also a whole activation as large as
 * its own output (a residual add of a shard and the full stream) means a
 * region the partition left open: the ranks would add tensors of different
 * shapes. Params, inputs and tensors made from nothing are exempt (a
 * broadcast mask, a dropout mask that settle_free splits later). */
static int mixes_ok(tx *c, const top *x, const cJSON *ins)
{
    uint64_t out = remat__tp_bytes(c, x->out0);
    for (const cJSON *in = ins ? ins->child : NULL; in; in = in->next) {
        uint32_t t = remat__tp_lookup(c, in->valuestring);
        const tten *w = &c->ten[t];
        if (w->is_leaf || w->free_ || w->state == SHARD || !out)
            continue;
        uint32_t base = t;
        for (const cJSON *al; (al = cJSON_GetObjectItemCaseSensitive(c->ten[base].obj, "alias_of")) &&
                              cJSON_IsString(al) && remat__tp_lookup(c, al->valuestring) != NONE;)
            base = remat__tp_lookup(c, al->valuestring);
        if (remat__tp_bytes(c, t) == out || remat__tp_bytes(c, base) == out)
            return remat__tp_bad(c, c->source, NULL, x->id,
                       "op '%s' reads a split tensor and the whole tensor '%s' of its own size: the partition "
                       "leaves a parallel region open before it (is a row-parallel linear missing?)",
                       x->id, w->id);
    }
    return 1;
}

/* Forward pass: each op's state from its inputs; the linears by role. */
static int propagate(tx *c)
{
    for (uint32_t i = 0; i < c->n_ops; i++) {
        top *x = &c->ops[i];
        const cJSON *ins = cJSON_GetObjectItemCaseSensitive(x->obj, "inputs");
        int any_shard = 0, all_free = 1;
        const char *act = NULL;
        for (const cJSON *in = ins ? ins->child : NULL; in; in = in->next) {
            const tten *t = &c->ten[remat__tp_lookup(c, in->valuestring)];
            if (t->is_leaf) {
                all_free = 0;
                if (!t->is_param && !act)
                    act = t->id; /* data read straight into a linear */
                continue;
            }
            any_shard |= t->state == SHARD;
            all_free &= t->free_;
            if (!act)
                act = t->id;
        }
        int out = any_shard ? SHARD : REPL;
        if (any_shard && x->role == ROLE_NONE && !mixes_ok(c, x, ins))
            return 0;
        if (x->role == ROLE_COL) {
            if (any_shard)
                return remat__tp_bad(c, c->source, NULL, x->id,
                           "column-parallel op '%s' (module '%s') reads a tensor that is already split: the "
                           "region opened before it is not closed by a row-parallel linear",
                           x->id, x->module);
            if (!act)
                return remat__tp_bad(c, c->source, NULL, x->id, "column-parallel op '%s' (module '%s') reads no activation",
                           x->id, x->module);
            out = SHARD;
        } else if (x->role == ROLE_ROW) {
            if (!any_shard)
                return remat__tp_bad(c, c->source, NULL, x->id,
                           "row-parallel op '%s' (module '%s') reads no split tensor: no column-parallel linear "
                           "opens its region",
                           x->id, x->module);
            out = REPL; /* after the all-reduce inserted behind it */
        }
        x->sharded = any_shard || x->role != ROLE_NONE;
        x->free_ = all_free && x->role == ROLE_NONE;
        for (uint32_t k = 0; k < x->n_out; k++) {
            c->ten[x->out0 + k].state = out;
            c->ten[x->out0 + k].free_ = x->free_;
        }
    }
    return 1;
}

/* Backward pass over tensors made from nothing: one is split when every
 * consumer is a split op whose first output is as large as it is (the
 * shard shape), or a made-from-nothing op already split this way. A scalar
 * or a broadcast mask stays whole. */
static void settle_free(tx *c)
{
    for (uint32_t i = c->n_ops; i-- > 0;) {
        top *x = &c->ops[i];
        if (!x->free_)
            continue;
        int all = x->n_out > 0;
        for (uint32_t k = 0; k < x->n_out && all; k++) {
            uint32_t t = x->out0 + k;
            uint64_t bytes = remat__tp_bytes(c, t);
            const char *base = NULL;
            const cJSON *al = cJSON_GetObjectItemCaseSensitive(c->ten[t].obj, "alias_of");
            if (cJSON_IsString(al))
                base = al->valuestring;
            int any = 0;
            for (uint32_t u = c->ten[t].first_use; u != NONE && all; u = c->uses[u].next) {
                const top *y = &c->ops[c->uses[u].op];
                any = 1;
                if (!y->sharded)
                    all = 0;
                else if (!y->free_ && !base && remat__tp_bytes(c, y->out0) != bytes)
                    all = 0;
            }
            all &= any;
        }
        if (!all)
            continue;
        x->sharded = 1;
        for (uint32_t k = 0; k < x->n_out; k++)
            c->ten[x->out0 + k].state = SHARD;
    }
}

static int check_outputs(tx *c)
{
    const cJSON *outs = cJSON_GetObjectItemCaseSensitive(c->root, "outputs");
    int k = 0;
    for (const cJSON *v = outs ? outs->child : NULL; v; v = v->next, k++) {
        uint32_t t = remat__tp_lookup(c, v->valuestring);
        if (t != NONE && c->ten[t].state == SHARD) {
            char p[32];
            snprintf(p, sizeof p, "outputs[%d]", k);
            return remat__tp_bad(c, c->source, p, v->valuestring,
                       "graph output '%s' would be split across the ranks: a column-parallel region is not closed "
                       "by a row-parallel linear before it",
                       v->valuestring);
        }
    }
    return 1;
}

static int check_hits(tx *c, const cJSON *arr, const int *hits, const char *key)
{
    int k = 0;
    for (const cJSON *v = arr->child; v; v = v->next, k++)
        if (!hits[k]) {
            char p[48];
            snprintf(p, sizeof p, "%s[%d]", key, k);
            return remat__tp_bad(c, c->psource, p, NULL,
                       "'%s' matches no linear of the graph (an op whose attrs.module it matches and that reads "
                       "the param '<module>.weight')",
                       v->valuestring);
        }
    return 1;
}

static int meta_and_name(tx *c)
{
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(c->root, "meta");
    if (!meta && !(meta = cJSON_AddObjectToObject(c->root, "meta")))
        return remat__tp_nomem(c);
    cJSON_DeleteItemFromObjectCaseSensitive(meta, "tp");
    cJSON_DeleteItemFromObjectCaseSensitive(meta, "tp_partition");
    if (!cJSON_AddNumberToObject(meta, "tp", (double)c->t) ||
        !cJSON_AddStringToObject(meta, "tp_partition", c->psource))
        return remat__tp_nomem(c);
    cJSON *name = cJSON_GetObjectItemCaseSensitive(c->root, "name");
    if (cJSON_IsString(name)) {
        char s[300];
        snprintf(s, sizeof s, "%.280s-tp%" PRIu64, name->valuestring, c->t);
        if (!cJSON_SetValuestring(name, s))
            return remat__tp_nomem(c);
    }
    return 1;
}

remat_status remat_import_tp_split(const char *text, size_t len, const char *source, const char *part_text,
                                   size_t part_len, const char *part_source, uint32_t tp, char **out, size_t *out_len,
                                   remat_import_tp_summary *summary, remat_err *err)
{
    remat_err local;
    remat__import_begin(&err, &local, out, out_len);
    if (!source)
        source = "<graph>";
    if (!part_source)
        part_source = "<partition>";
    if (tp < 1)
        return remat_err_set(err, REMAT_EINVAL, "--tp must be at least 1 (got %" PRIu32 ")", tp);
    /* The one loader judges the graph, so everything below may assume its
     * rules (unique ids, known references, counts in range). */
    remat_graph *g = NULL;
    remat_status st = remat_graph_load_json(text, len, source, &g, err);
    remat_graph_destroy(g);
    if (st != REMAT_OK)
        return st;
    tx c = {.source = source, .psource = part_source, .err = err, .t = tp};
    remat_buf b;
    remat_buf_init(&b);
    int *hits = NULL, ok = 1;
    if (remat__json_document(text, len, source, &c.root, err) != REMAT_OK ||
        remat__json_document(part_text, part_len, part_source, &c.part, err) != REMAT_OK)
        ok = 0;
    ok = ok && read_partition(&c);
    if (ok && remat_strmap_init(&c.ids, 1024) != REMAT_OK)
        ok = remat__tp_nomem(&c);
    c.ids_ok = ok;
    ok = ok && index_leaves(&c, "params", 1) && index_leaves(&c, "inputs", 0) && index_ops(&c);
    int nc = ok ? cJSON_GetArraySize(c.col) : 0, nr = ok ? cJSON_GetArraySize(c.row) : 0;
    if (ok && !(hits = remat__calloc((size_t)(nc + nr), sizeof *hits)))
        ok = remat__tp_nomem(&c);
    for (uint32_t i = 0; ok && i < c.n_ops; i++)
        ok = assign_role(&c, i, hits, hits + nc);
    ok = ok && check_hits(&c, c.col, hits, "column") && check_hits(&c, c.row, hits + nc, "row") && propagate(&c);
    if (ok)
        settle_free(&c);
    /* One rank of one is the graph itself: nothing to split or to
     * communicate, as gen transformer --tp 1 writes no collectives. */
    ok = ok && check_outputs(&c) && (c.t == 1 || remat__tp_apply(&c)) && meta_and_name(&c) && (remat__import_write_doc(c.root, &b) || remat__tp_nomem(&c));
    remat__free(hits);
    remat__free(c.ten);
    remat__free(c.ops);
    remat__free(c.uses);
    if (c.ids_ok)
        remat_strmap_destroy(&c.ids);
    cJSON_Delete(c.root);
    cJSON_Delete(c.part);
    if (ok && summary)
        *summary = c.sum;
    return remat__import_finish(ok, &b, out, out_len, err);
}

remat_status remat_import_tp_split_files(const char *graph_path, const char *part_path, uint32_t tp, char **out,
                                         size_t *out_len, remat_import_tp_summary *summary, remat_err *err)
{
    char *text = NULL, *ptext = NULL;
    size_t len = 0, plen = 0;
    *out = NULL;
    if (out_len)
        *out_len = 0;
    remat_status st = remat__read_file(graph_path, &text, &len, err);
    if (st == REMAT_OK && (st = remat__read_file(part_path, &ptext, &plen, err)) == REMAT_OK)
        st = remat_import_tp_split(text, len, graph_path, ptext, plen, part_path, tp, out, out_len, summary, err);
    remat__free(text);
    remat__free(ptext);
    return st;
}

/*
 * import_tp_edit.c - the second half of the tensor-parallel split
 * (import_tp.c decides the states): bytes, work and weights divided where
 * the states say, and Megatron's f and g inserted into the ops array where
 * they run, each as gen transformer --tp writes it.
 *
 * The tree is edited in place and stays whole after any failure, so the
 * caller frees it with its root whatever happened here.
 */
#define _POSIX_C_SOURCE 200809L

#include "import_tp_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Every string of arr equal to from becomes to (*fail on out of memory). */
static void rename_refs(cJSON *arr, const char *from, const char *to, int *fail)
{
    for (cJSON *v = arr ? arr->child : NULL; v; v = v->next)
        if (cJSON_IsString(v) && strcmp(v->valuestring, from) == 0 && !cJSON_SetValuestring(v, to))
            *fail = 1;
}

/* A fresh id "<base><suffix>", or with "_2", "_3"... when taken. */
static int fresh_id(tx *c, const char *base, const char *suffix, char *out, size_t n)
{
    snprintf(out, n, "%s%s", base, suffix);
    for (int k = 2; remat__tp_lookup(c, out) != NONE; k++) {
        if (k > 1000)
            return remat__tp_bad(c, c->source, NULL, base, "no free id for the collective after '%s'", base);
        snprintf(out, n, "%s%s_%d", base, suffix, k);
    }
    return 1;
}

/* One collective op as gen transformer writes it: in place (a view of what
 * it reduces, adding no bytes), saving nothing, its attrs naming what it
 * moves in each direction. NULL when out of memory. */
static cJSON *collective(const tx *c, const char *id, const char *type, const char *in, const char *fwd,
                         const char *bwd, const char *dtype, const char *module)
{
    cJSON *o = cJSON_CreateObject(), *attrs = cJSON_CreateObject(), *ins = NULL;
    int ok = o && attrs && cJSON_AddStringToObject(o, "id", id) && cJSON_AddStringToObject(o, "op", type) &&
             (ins = cJSON_AddArrayToObject(o, "inputs")) && cJSON_AddItemToArray(ins, cJSON_CreateString(in)) &&
             ins->child &&
             cJSON_AddStringToObject(o, "alias_of", in) && (!dtype || cJSON_AddStringToObject(o, "dtype", dtype)) &&
             cJSON_AddArrayToObject(o, "saves") && cJSON_AddStringToObject(attrs, "collective_fwd", fwd) &&
             cJSON_AddStringToObject(attrs, "collective_bwd", bwd) &&
             cJSON_AddStringToObject(attrs, "group", "tensor") &&
             cJSON_AddNumberToObject(attrs, "ranks", (double)c->t) &&
             (!module || cJSON_AddStringToObject(attrs, "module", module));
    if (ok && cJSON_AddItemToObject(o, "attrs", attrs))
        return o;
    cJSON_Delete(attrs);
    cJSON_Delete(o);
    return NULL;
}

static const char *dtype_of(const cJSON *obj)
{
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(obj, "dtype");
    return cJSON_IsString(d) ? d->valuestring : NULL;
}

static int mark_attr(tx *c, cJSON *op, const char *how)
{
    cJSON *attrs = cJSON_GetObjectItemCaseSensitive(op, "attrs");
    if (!attrs) {
        attrs = cJSON_AddObjectToObject(op, "attrs");
        if (!attrs)
            return remat__tp_nomem(c);
    }
    return cJSON_AddStringToObject(attrs, "tp_split", how) ? 1 : remat__tp_nomem(c);
}

static int split_tensor(tx *c, uint32_t t)
{
    tten *x = &c->ten[t];
    if (!remat__tp_divide(c, x->obj, "bytes", 1, "tensor", x->id))
        return 0;
    /* The split dimension is not tracked through views and transposes, so
     * a shape would be a guess: it is dropped, the exact bytes stay. */
    cJSON_DeleteItemFromObjectCaseSensitive(x->obj, "shape");
    c->sum.sharded_tensors++;
    return 1;
}

static int split_param(tx *c, uint32_t t)
{
    tten *x = &c->ten[t];
    if (x->state == SHARD)
        return 1; /* read by two linears: split once */
    uint64_t before = remat__tp_bytes(c, t);
    if (!remat__tp_divide(c, x->obj, "bytes", 1, "param", x->id))
        return 0;
    cJSON_DeleteItemFromObjectCaseSensitive(x->obj, "shape");
    x->state = SHARD;
    c->sum.split_params++;
    c->sum.param_bytes_split += before;
    return 1;
}

/* Whether a column linear already reads an f inserted for an earlier one. */
static int col_reads_f(const tx *c, const cJSON *op)
{
    const cJSON *ins = cJSON_GetObjectItemCaseSensitive(op, "inputs");
    for (const cJSON *in = ins->child; in; in = in->next)
        if (c->ten[remat__tp_lookup(c, in->valuestring)].is_f)
            return 1;
    return 0;
}

/* Links item into arr before `next` (NULL: at the end). cJSON's own
 * cJSON_InsertItemInArray has changed its checks between releases; this
 * keeps the one invariant every release relies on: the first item's prev
 * is the last item. */
static int link_before(cJSON *arr, cJSON *next, cJSON *item)
{
    if (!next)
        return cJSON_AddItemToArray(arr, item) ? 1 : 0;
    item->next = next;
    item->prev = next->prev;
    if (next == arr->child)
        arr->child = item;
    else
        next->prev->next = item;
    next->prev = item;
    return 1;
}

/* Inserts a collective into the ops array before `next` (NULL: at the
 * end), indexes its output and returns its id (owned by the tree), or NULL
 * (out of memory, err set). The tree stays whole either way, so a failure
 * frees it all with the root. */
static const char *insert(tx *c, cJSON *arr, cJSON *next, cJSON *coll, int is_f)
{
    if (!coll || !link_before(arr, next, coll)) {
        cJSON_Delete(coll);
        return remat__tp_nomem(c), NULL;
    }
    const char *id = cJSON_GetObjectItemCaseSensitive(coll, "id")->valuestring;
    uint32_t t = remat__tp_add_tensor(c, id, coll, NONE, 0, 0);
    if (t == NONE)
        return NULL;
    c->ten[t].is_f = is_f;
    c->sum.collectives++;
    return id;
}

static int rename_in(cJSON *op, const char *from, const char *to)
{
    int fail = 0;
    rename_refs(cJSON_GetObjectItemCaseSensitive(op, "inputs"), from, to, &fail);
    rename_refs(cJSON_GetObjectItemCaseSensitive(op, "saves"), from, to, &fail);
    return !fail;
}

/* f before column linear i: the identity whose backward all-reduces the
 * input's gradient, once per input tensor (column linears reading the same
 * tensor, as Q, K and V as three linears would, share it). */
static int insert_f(tx *c, cJSON *arr, uint32_t i)
{
    top *x = &c->ops[i];
    const cJSON *ins = cJSON_GetObjectItemCaseSensitive(x->obj, "inputs");
    const char *act = NULL;
    for (const cJSON *in = ins->child; in && !act; in = in->next)
        if (!c->ten[remat__tp_lookup(c, in->valuestring)].is_param)
            act = in->valuestring;
    char id[560];
    if (!fresh_id(c, act, "_tp", id, sizeof id))
        return 0;
    /* act lives in an inputs array that the renaming below rewrites. */
    const char *from = c->ten[remat__tp_lookup(c, act)].id;
    const char *fid = insert(c, arr, x->obj, collective(c, id, "tp_copy", from, "none", "all_reduce",
                                                         dtype_of(c->ten[remat__tp_lookup(c, from)].obj), x->module), 1);
    if (!fid)
        return 0;
    for (uint32_t j = i; j < c->n_ops; j++)
        if (c->ops[j].role == ROLE_COL && !rename_in(c->ops[j].obj, from, fid))
            return remat__tp_nomem(c);
    return 1;
}

/* g after row linear i: its partial sums all-reduced in place; every later
 * reader (inputs, saves, views, the graph outputs) reads the reduced tensor. */
static int insert_g(tx *c, cJSON *arr, uint32_t i)
{
    top *x = &c->ops[i];
    const char *out = c->ten[x->out0].id;
    char id[560];
    if (!fresh_id(c, out, "_ar", id, sizeof id))
        return 0;
    const char *gid = insert(c, arr, x->obj->next, collective(c, id, "all_reduce", out, "all_reduce", "none",
                                                         dtype_of(c->ten[x->out0].obj), x->module), 0);
    if (!gid)
        return 0;
    int fail = 0;
    for (uint32_t j = i + 1; j < c->n_ops; j++) {
        fail |= !rename_in(c->ops[j].obj, out, gid);
        cJSON *al = cJSON_GetObjectItemCaseSensitive(c->ops[j].obj, "alias_of");
        if (cJSON_IsString(al) && strcmp(al->valuestring, out) == 0 && !cJSON_SetValuestring(al, gid))
            fail = 1;
        cJSON *mo = cJSON_GetObjectItemCaseSensitive(c->ops[j].obj, "outputs");
        for (cJSON *e = mo ? mo->child : NULL; e; e = e->next) {
            al = cJSON_GetObjectItemCaseSensitive(e, "alias_of");
            if (cJSON_IsString(al) && strcmp(al->valuestring, out) == 0 && !cJSON_SetValuestring(al, gid))
                fail = 1;
        }
    }
    rename_refs(cJSON_GetObjectItemCaseSensitive(c->root, "outputs"), out, gid, &fail);
    return fail ? remat__tp_nomem(c) : 1;
}

/* The op's own changes: work / t, its split outputs, its split weights. */
static int split_op(tx *c, uint32_t i)
{
    top *x = &c->ops[i];
    cJSON *o = x->obj;
    if (x->sharded) {
        static const char *const work[] = {"flops", "bwd_flops", "workspace", "bwd_workspace"};
        for (int k = 0; k < 4; k++)
            if (!remat__tp_divide(c, o, work[k], 0, "op", x->id))
                return 0;
        cJSON *attrs = cJSON_GetObjectItemCaseSensitive(o, "attrs");
        if (cJSON_IsObject(attrs) &&
            (!remat__tp_divide(c, attrs, "duration_ns", 0, "op", x->id) || !remat__tp_divide(c, attrs, "bwd_duration_ns", 0, "op", x->id)))
            return 0;
        if (!mark_attr(c, o, x->role == ROLE_COL ? "column" : x->role == ROLE_ROW ? "row" : "shard"))
            return 0;
        c->sum.split_ops++;
    }
    for (uint32_t k = 0; k < x->n_out; k++)
        if (c->ten[x->out0 + k].state == SHARD && !split_tensor(c, x->out0 + k))
            return 0;
    if (x->role == ROLE_NONE)
        return 1;
    /* The weight splits by output (column) or input (row) features; a
     * column linear's bias splits with it, a row linear's is added once
     * after the reduction (Megatron's RowParallelLinear), so it stays whole. */
    if (!split_param(c, x->weight))
        return 0;
    if (x->role == ROLE_ROW)
        return 1;
    char bid[512];
    snprintf(bid, sizeof bid, "%s.bias", x->module);
    uint32_t bt = remat__tp_lookup(c, bid);
    const cJSON *ins = cJSON_GetObjectItemCaseSensitive(o, "inputs");
    for (const cJSON *in = ins->child; in; in = in->next)
        if (strcmp(in->valuestring, bid) == 0 && bt != NONE && c->ten[bt].is_param)
            return split_param(c, bt);
    return 1;
}

/* Applies the states: bytes, work, the split weights, and the collectives
 * inserted into the ops array where they run. */
int remat__tp_apply(tx *c)
{
    cJSON *arr = cJSON_GetObjectItemCaseSensitive(c->root, "ops");
    for (uint32_t i = 0; i < c->n_ops; i++) {
        const top *x = &c->ops[i];
        if (x->role == ROLE_COL && !col_reads_f(c, x->obj) && !insert_f(c, arr, i))
            return 0;
        if (!split_op(c, i) || (x->role == ROLE_ROW && !insert_g(c, arr, i)))
            return 0;
    }
    return 1;
}


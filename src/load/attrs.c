/*
 * attrs.c - typed access to an op's free-form "attrs" object.
 *
 * The loader keeps each op's attrs as re-serialized JSON text (they are
 * free-form, and most of remat never reads them). The executable kernels
 * (src/train/kernels.c) need a few: layer norm's eps, a reduction's dims, a
 * transpose's dims, gelu's approximation. Reading them here keeps cJSON in
 * the load stage; each call parses the op's attrs text, which is short,
 * once per question, and only when a graph is prepared for execution.
 */
#include "json_glue.h"
#include "remat/graph.h"
#include "../util/util_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

/* Finds key in op k's attrs: *root owns the parse (cJSON_Delete it), *item
 * the value or NULL. */
static remat_status lookup(const remat_graph *g, uint32_t k, const char *key, cJSON **root, const cJSON **item,
                           bool *found, remat_err *err)
{
    *root = NULL;
    *item = NULL;
    *found = false;
    const char *text = k < g->n_ops ? g->ops[k].attrs_json : NULL;
    if (!text)
        return REMAT_OK;
    const char *end;
    *root = remat__json_parse(text, strlen(text), &end);
    if (!*root) /* the loader printed this text from a parse: only memory can fail */
        return remat_err_set(err, REMAT_ENOMEM, "ops[%u].attrs: out of memory reading the attributes", k);
    *item = cJSON_GetObjectItemCaseSensitive(*root, key);
    *found = *item != NULL;
    return REMAT_OK;
}

static remat_status wrong(const remat_graph *g, uint32_t k, const char *key, const char *what, remat_err *err)
{
    return remat_err_set(err, REMAT_EGRAPH, "ops[%u].attrs.%s (op '%.80s'): must be %s", k, key, g->ops[k].id, what);
}

remat_status remat_op_attr_number(const remat_graph *g, uint32_t k, const char *key, double *out, bool *found,
                                  remat_err *err)
{
    cJSON *root;
    const cJSON *it;
    remat_status st = lookup(g, k, key, &root, &it, found, err);
    if (st == REMAT_OK && it) {
        if (cJSON_IsNumber(it) && isfinite(it->valuedouble))
            *out = it->valuedouble;
        else
            st = wrong(g, k, key, "a number", err);
    }
    cJSON_Delete(root);
    return st;
}

static int whole(const cJSON *it, int64_t *v)
{
    if (!cJSON_IsNumber(it))
        return 0;
    double d = it->valuedouble;
    if (!(d == floor(d)) || d < -9007199254740992.0 || d > 9007199254740992.0)
        return 0;
    *v = (int64_t)d;
    return 1;
}

remat_status remat_op_attr_ints(const remat_graph *g, uint32_t k, const char *key, int64_t *out, uint32_t cap,
                                uint32_t *n, bool *found, remat_err *err)
{
    cJSON *root;
    const cJSON *it;
    *n = 0;
    remat_status st = lookup(g, k, key, &root, &it, found, err);
    if (st == REMAT_OK && it) {
        if (cJSON_IsArray(it)) {
            for (const cJSON *e = it->child; e && st == REMAT_OK; e = e->next) {
                if (*n >= cap)
                    st = wrong(g, k, key, "a short array of whole numbers", err);
                else if (!whole(e, &out[*n]))
                    st = wrong(g, k, key, "a whole number or an array of whole numbers", err);
                else
                    (*n)++;
            }
        } else if (cap > 0 && whole(it, &out[0])) {
            *n = 1;
        } else {
            st = wrong(g, k, key, "a whole number or an array of whole numbers", err);
        }
    }
    cJSON_Delete(root);
    return st;
}

remat_status remat_op_attr_bool(const remat_graph *g, uint32_t k, const char *key, bool *out, bool *found,
                                remat_err *err)
{
    cJSON *root;
    const cJSON *it;
    remat_status st = lookup(g, k, key, &root, &it, found, err);
    if (st == REMAT_OK && it) {
        if (cJSON_IsBool(it))
            *out = cJSON_IsTrue(it);
        else
            st = wrong(g, k, key, "true or false", err);
    }
    cJSON_Delete(root);
    return st;
}

remat_status remat_op_attr_string(const remat_graph *g, uint32_t k, const char *key, char *out, size_t cap,
                                  bool *found, remat_err *err)
{
    cJSON *root;
    const cJSON *it;
    remat_status st = lookup(g, k, key, &root, &it, found, err);
    if (st == REMAT_OK && it) {
        if (cJSON_IsString(it) && cap > 0) {
            strncpy(out, it->valuestring, cap - 1);
            out[cap - 1] = '\0';
        } else {
            st = wrong(g, k, key, "a string", err);
        }
    }
    cJSON_Delete(root);
    return st;
}

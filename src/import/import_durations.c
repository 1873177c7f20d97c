/*
 * import_durations.c - a graph file with measured per-op durations written
 * into it (attrs.duration_ns and attrs.bwd_duration_ns, graphs/README.md
 * "Measured durations"), for `remat step --record-durations`.
 *
 * The caller's graph text is edited as a cJSON tree, not rewritten from the
 * loaded remat_graph, so every field the file had (meta, shapes, other
 * attrs) goes through unchanged; the ops array is matched to the loaded
 * graph's ops by position (the loader keeps file order) and each id is
 * checked, so durations never land on the wrong op.
 */
#include "import_internal.h"
#include "../load/json_glue.h"
#include "remat/graph.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int nomem(remat_err *err, const char *source)
{
    remat_err_set(err, REMAT_ENOMEM, "%s: out of memory writing the durations", source);
    return 0;
}

/* attrs[key] = ns (replaced when present), or removed when ns is 0: a stale
 * figure from another machine must not survive beside the new ones. */
static int set_ns(cJSON *attrs, const char *key, uint64_t ns)
{
    cJSON_DeleteItemFromObjectCaseSensitive(attrs, key);
    return !ns || cJSON_AddNumberToObject(attrs, key, (double)ns);
}

static int annotate(cJSON *root, const remat_graph *g, const uint64_t *fwd_ns, const uint64_t *bwd_ns,
                    const char *note, const char *source, remat_err *err)
{
    cJSON *ops = cJSON_GetObjectItemCaseSensitive(root, "ops");
    uint32_t k = 0;
    for (cJSON *o = ops ? ops->child : NULL; o; o = o->next, k++) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
        if (k >= g->n_ops || !cJSON_IsString(id) || strcmp(id->valuestring, g->ops[k].id) != 0)
            return remat_err_set(err, REMAT_EINVAL, "%s: ops[%" PRIu32 "] is not the graph's op '%s'", source, k,
                                 k < g->n_ops ? g->ops[k].id : "(none)"),
                   0;
        cJSON *attrs = cJSON_GetObjectItemCaseSensitive(o, "attrs");
        if (!attrs && !(attrs = cJSON_AddObjectToObject(o, "attrs")))
            return nomem(err, source);
        if (!set_ns(attrs, "duration_ns", fwd_ns[k]) || !set_ns(attrs, "bwd_duration_ns", bwd_ns[k]))
            return nomem(err, source);
    }
    if (k != g->n_ops)
        return remat_err_set(err, REMAT_EINVAL, "%s: the file has %" PRIu32 " ops, the graph %" PRIu32, source, k,
                             g->n_ops),
               0;
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "meta");
    if (!meta && !(meta = cJSON_AddObjectToObject(root, "meta")))
        return nomem(err, source);
    cJSON_DeleteItemFromObjectCaseSensitive(meta, "durations");
    return cJSON_AddStringToObject(meta, "durations", note) ? 1 : nomem(err, source);
}

remat_status remat_import_set_durations(const char *text, size_t len, const char *source, const remat_graph *g,
                                        const uint64_t *fwd_ns, const uint64_t *bwd_ns, const char *note, char **out,
                                        size_t *out_len, remat_err *err)
{
    remat_err local;
    remat__import_begin(&err, &local, out, out_len);
    if (!source)
        source = "<graph>";
    cJSON *root = NULL;
    if (remat__json_document(text, len, source, &root, err) != REMAT_OK)
        return err->code;
    remat_buf b;
    remat_buf_init(&b);
    int ok = cJSON_IsObject(root) ? annotate(root, g, fwd_ns, bwd_ns, note ? note : "measured", source, err)
                                  : (remat_err_set(err, REMAT_EINVAL, "%s: not a graph object", source), 0);
    if (ok && !remat__import_write_doc(root, &b))
        ok = nomem(err, source);
    cJSON_Delete(root);
    return remat__import_finish(ok, &b, out, out_len, err);
}

/*
 * import_common.c - the pieces every importer shares (import_internal.h):
 * the head and tail of a public import call and its file reader, which the
 * Checkmate and DTR importers had each written out in full.
 */
#include "import_internal.h"

#include <cjson/cJSON.h>
#include <string.h>

void remat__import_begin(remat_err **err_io, remat_err *local, char **out, size_t *out_len)
{
    remat_err_init(local);
    if (!*err_io)
        *err_io = local;
    *out = NULL;
    if (out_len)
        *out_len = 0;
}

remat_status remat__import_finish(int ok, remat_buf *b, char **out, size_t *out_len, const remat_err *err)
{
    if (!ok) {
        remat_buf_destroy(b);
        return err->code ? err->code : REMAT_EINTERNAL;
    }
    *out = b->data;
    if (out_len)
        *out_len = b->len;
    return REMAT_OK;
}

remat_status remat__import_file(remat__import_text_fn fn, const char *path, const char *name, char **out,
                                size_t *out_len, void *summary, remat_err *err)
{
    char *text;
    size_t len;
    *out = NULL;
    if (out_len)
        *out_len = 0;
    remat_status st = remat__read_file(path, &text, &len, err);
    if (st != REMAT_OK)
        return st;
    st = fn(text, len, path, name, out, out_len, summary, err);
    remat__free(text);
    return st;
}

int remat__import_write_doc(const struct cJSON *root, remat_buf *b)
{
    remat_buf_puts(b, "{");
    for (const cJSON *v = root->child; v; v = v->next) {
        remat_buf_puts(b, v == root->child ? "\n " : ",\n ");
        remat_buf_json_str(b, v->string);
        remat_buf_puts(b, ": ");
        int list = cJSON_IsArray(v) && (!strcmp(v->string, "ops") || !strcmp(v->string, "params") ||
                                        !strcmp(v->string, "inputs"));
        for (const cJSON *e = list ? v->child : v; e; e = list ? e->next : NULL) {
            char *s = cJSON_PrintUnformatted(e);
            if (!s)
                return 0;
            if (list)
                remat_buf_puts(b, e == v->child ? "[\n  " : ",\n  ");
            remat_buf_puts(b, s);
            cJSON_free(s);
        }
        if (list)
            remat_buf_puts(b, v->child ? "\n ]" : "[]");
    }
    remat_buf_puts(b, "\n}\n");
    return !b->failed;
}

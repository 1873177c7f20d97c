/*
 * import_common.c - the pieces every importer shares (import_internal.h):
 * the head and tail of a public import call, and the file entry points of
 * both importers (read the file, convert its text), which the Checkmate and
 * DTR importers had each written out in full.
 */
#include "import_internal.h"

#include <cjson/cJSON.h>
#include <string.h>

void remat__import_begin(remat_err **err_io, remat_err *local, char **out, size_t *out_len, const char **source,
                         const char *fallback)
{
    if (!*source)
        *source = fallback;
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

/* Reads path ("-" for stdin) and converts its text with the importer of
 * format f, naming the file as the source; *out is NULL after any failure.
 * The summary's type is the importer's: one switch here instead of one
 * type-erasing wrapper per importer. */
typedef enum { FROM_CHECKMATE, FROM_DTR } import_format;

static remat_status import_file(import_format f, const char *path, const char *name, char **out, size_t *out_len,
                                void *summary, remat_err *err)
{
    char *text;
    size_t len;
    *out = NULL;
    if (out_len)
        *out_len = 0;
    remat_status st = remat__read_file(path, &text, &len, err);
    if (st != REMAT_OK)
        return st;
    st = f == FROM_CHECKMATE ? remat_import_checkmate(text, len, path, name, out, out_len, summary, err)
                : remat_import_dtr(text, len, path, name, out, out_len, summary, err);
    remat__free(text);
    return st;
}

remat_status remat_import_checkmate_file(const char *path, const char *name, char **out, size_t *out_len,
                                         remat_import_summary *summary, remat_err *err)
{
    return import_file(FROM_CHECKMATE, path, name, out, out_len, summary, err);
}

remat_status remat_import_dtr_file(const char *path, const char *name, char **out, size_t *out_len,
                                   remat_import_dtr_summary *summary, remat_err *err)
{
    return import_file(FROM_DTR, path, name, out, out_len, summary, err);
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

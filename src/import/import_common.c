/*
 * import_common.c - the pieces every importer shares (import_internal.h):
 * one message-and-location writer, and the head and tail of a public import
 * call, which the Checkmate and DTR importers had each written out in full.
 *
 * The message is built from the location rather than beside it, so the two
 * cannot disagree: a caller that shows err.msg and one that points at
 * err.loc see the same place.
 */
#include "import_internal.h"

#include <stdio.h>

int remat__import_vfail(remat_err *err, remat_status code, const char *file, uint32_t line, int column,
                        const char *path, const char *id, const char *fmt, va_list ap)
{
    char detail[REMAT_ERR_MSG_MAX], where[REMAT_ERR_MSG_MAX];
    vsnprintf(detail, sizeof detail, fmt, ap);
    if (!path)
        path = "";
    if (line && column)
        snprintf(where, sizeof where, "%s:%u:%d", file, line, column);
    else if (line)
        snprintf(where, sizeof where, "%s:%u", file, line);
    else
        snprintf(where, sizeof where, "%s", file);
    remat_err_loc loc;
    remat_err_loc_make(&loc, file, path, (int)line, column, id);
    remat_err_set_at(err, code, &loc, "%s: %s%s%s", where, path, *path ? ": " : "", detail);
    return 0;
}

int remat__import_fail(remat_err *err, remat_status code, const char *file, uint32_t line, int column,
                       const char *path, const char *id, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    remat__import_vfail(err, code, file, line, column, path, id, fmt, ap);
    va_end(ap);
    return 0;
}

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

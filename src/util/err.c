/*
 * err.c - status names, first-error-wins error records (with their
 * location, and one writer that builds the message from the location), and
 * the library's version.
 */
#include "util_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const status_names[] = {
#define REMAT__STATUS_STR(name, text) text,
    REMAT_STATUS_MAP(REMAT__STATUS_STR)
#undef REMAT__STATUS_STR
};

const char *remat_version(void)
{
    return REMAT_VERSION_STRING;
}

const char *remat_status_str(remat_status code)
{
    if ((int)code < 0 || code >= REMAT_STATUS_COUNT)
        return "unknown status";
    return status_names[code];
}

void remat_err_init(remat_err *err)
{
    if (!err)
        return;
    err->code = REMAT_OK;
    err->msg[0] = '\0';
    memset(&err->loc, 0, sizeof err->loc);
}

void remat_err_loc_make(remat_err_loc *loc, const char *file, const char *path, int line, int column,
                        const char *id)
{
    memset(loc, 0, sizeof *loc);
    snprintf(loc->file, sizeof loc->file, "%s", file ? file : "");
    snprintf(loc->path, sizeof loc->path, "%s", path ? path : "");
    loc->line = line;
    loc->column = column;
    snprintf(loc->id, sizeof loc->id, "%s", id ? id : "");
}

remat_status remat_err_set_at(remat_err *err, remat_status code, const remat_err_loc *loc, const char *fmt, ...)
{
    if (!err)
        return code;
    if (err->code != REMAT_OK)
        return err->code;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    if (loc)
        err->loc = *loc;
    else
        memset(&err->loc, 0, sizeof err->loc);
    return code;
}

remat_status remat_err_set(remat_err *err, remat_status code, const char *fmt, ...)
{
    if (!err)
        return code;
    /* The first error is the cause; later ones are usually its echoes. */
    if (err->code != REMAT_OK)
        return err->code;
    err->code = code;
    memset(&err->loc, 0, sizeof err->loc);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return code;
}

remat_status remat__err_vat(remat_err *err, remat_status code, const char *file, uint32_t line, int column,
                            const char *path, const char *id, const char *fmt, va_list ap)
{
    if (!err)
        return code;
    if (err->code != REMAT_OK)
        return err->code;
    char detail[REMAT_ERR_MSG_MAX], where[REMAT_ERR_MSG_MAX];
    vsnprintf(detail, sizeof detail, fmt, ap);
    if (!file)
        file = "";
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
    return remat_err_set_at(err, code, &loc, "%s: %s%s%s", where, path, *path ? ": " : "", detail);
}

remat_status remat__err_at(remat_err *err, remat_status code, const char *file, uint32_t line, int column,
                           const char *path, const char *id, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    remat_status st = remat__err_vat(err, code, file, line, column, path, id, fmt, ap);
    va_end(ap);
    return st;
}

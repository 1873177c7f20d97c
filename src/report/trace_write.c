/*
 * trace_write.c - the trace's formats as one table, and the one writer
 * that dispatches on it.
 *
 * A library caller writes a trace with remat_trace_write(t, o, format), not
 * by knowing four function names; the CLI's --format values, its output
 * suffixes and their messages are read off the same table, so a new format
 * is one row here and its writer.
 */
#include "trace_internal.h"

#include <string.h>

typedef char *(*writer_fn)(const remat_trace *t, const remat_trace_options *o, size_t *len, remat_err *err);

static const remat_trace_format_info infos[REMAT_TRACE_FORMAT_COUNT] = {
    {"json", ".json", "the remat-trace JSON document (every step and interval)"},
    {"chrome", ".trace.json", "Chrome Trace Event Format, for Perfetto and chrome://tracing"},
    {"csv", ".csv", "one row per interval (RFC 4180)"},
    {"svg", ".svg", "the memory timeline, stacked by category"},
};
static const writer_fn writers[REMAT_TRACE_FORMAT_COUNT] = {remat_trace_json, remat_trace_chrome, remat_trace_csv,
                                                            remat_trace_svg};

const remat_trace_format_info *remat_trace_formats(size_t *n)
{
    *n = REMAT_TRACE_FORMAT_COUNT;
    return infos;
}

int remat_trace_format_parse(const char *name, remat_trace_format *out)
{
    for (int i = 0; i < REMAT_TRACE_FORMAT_COUNT; i++)
        if (strcmp(name, infos[i].name) == 0) {
            *out = (remat_trace_format)i;
            return 1;
        }
    return 0;
}

/* 1 if s ends with suffix, letters compared without regard to case. */
static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    if (n < m)
        return 0;
    for (size_t i = 0; i < m; i++) {
        char c = s[n - m + i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != suffix[i])
            return 0;
    }
    return 1;
}

int remat_trace_format_of_path(const char *path, remat_trace_format *out)
{
    /* The longest matching suffix wins: NAME.trace.json is Chrome's. */
    size_t best = 0;
    int found = 0;
    for (int i = 0; i < REMAT_TRACE_FORMAT_COUNT; i++)
        if (ends_with(path, infos[i].suffix) && strlen(infos[i].suffix) > best) {
            best = strlen(infos[i].suffix);
            *out = (remat_trace_format)i;
            found = 1;
        }
    return found;
}

char *remat_trace_write(const remat_trace *t, const remat_trace_options *o, remat_trace_format format, size_t *len,
                        remat_err *err)
{
    if ((unsigned)format >= REMAT_TRACE_FORMAT_COUNT) {
        remat_err_set(err, REMAT_EINVAL, "remat_trace_write: format %d is not a remat_trace_format", (int)format);
        return NULL;
    }
    return writers[format](t, o, len, err);
}

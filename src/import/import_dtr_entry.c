/*
 * import_dtr_entry.c - the DTR log importer's public entry point
 * (remat/import.h): a log's text to remat-graph text (its file entry point
 * is the importers' shared one, import_common.c), composed of
 * the two halves, the reader (import_dtr.c) and the mapper
 * (import_dtr_map.c), and the graph's default name, taken from the file's.
 */
#include "import_dtr_internal.h"

#include <string.h>

/* "dir/resnet32.log" -> "resnet32"; "-" and "" -> "dtr". */
static char *default_name(const char *source)
{
    const char *base = strrchr(source, '/');
    base = base ? base + 1 : source;
    size_t n = strlen(base);
    const char *dot = strrchr(base, '.');
    if (dot && dot != base)
        n = (size_t)(dot - base);
    if (n == 0 || strcmp(base, "-") == 0)
        return remat__strdup("dtr");
    char *s = remat__malloc(n + 1);
    if (s) {
        memcpy(s, base, n);
        s[n] = '\0';
    }
    return s;
}

remat_status remat_import_dtr(const char *text, size_t len, const char *source, const char *name, char **out,
                              size_t *out_len, remat_import_dtr_summary *summary, remat_err *err)
{
    remat_err local;
    remat__import_begin(&err, &local, out, out_len, &source, "<dtr>");
    dtr_cx c = {.source = source, .err = err};
    remat_buf b;
    remat_buf_init(&b);
    char *own_name = NULL;
    int ok = remat__dtr_read(&c, text, len);
    if (ok && !name)
        ok = (name = own_name = default_name(source)) != NULL ? 1 : remat__dtr_nomem(&c);
    ok = ok && remat__dtr_map(&c, name, &b);
    remat_import_dtr_summary sum = c.sum;
    remat__dtr_free(&c);
    remat__free(own_name);
    if (ok && summary)
        *summary = sum;
    return remat__import_finish(ok, &b, out, out_len, err);
}

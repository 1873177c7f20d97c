/*
 * buf.c - growable strings, whole-file reads and atomic writes.
 *
 * remat_buf records an allocation failure and then ignores further appends,
 * so report writers build a whole document and check once at the end; an
 * output is then written with remat__write_file_atomic, whole or not at all.
 */
#define _POSIX_C_SOURCE 200809L
#include "util_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void remat_buf_init(remat_buf *b)
{
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = 0;
}

void remat_buf_destroy(remat_buf *b)
{
    if (!b)
        return;
    remat__free(b->data);
    remat_buf_init(b);
}

char *remat_buf_finish(remat_buf *b, size_t *len, remat_err *err, const char *what)
{
    if (!b->failed && !b->data) /* an empty document is still a string */
        remat_buf_puts(b, "");
    if (b->failed) {
        remat_buf_destroy(b);
        remat_err_set(err, REMAT_ENOMEM, "out of memory writing the %s", what);
        return NULL;
    }
    if (len)
        *len = b->len;
    return b->data;
}

static int buf_reserve(remat_buf *b, size_t extra)
{
    if (b->failed)
        return 0;
    if (extra > SIZE_MAX - b->len - 1) {
        b->failed = 1;
        return 0;
    }
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *p = remat__realloc(b->data, cap);
    if (!p) {
        b->failed = 1;
        return 0;
    }
    b->data = p;
    b->cap = cap;
    return 1;
}

void remat_buf_putn(remat_buf *b, const char *s, size_t n)
{
    if (!buf_reserve(b, n))
        return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void remat_buf_puts(remat_buf *b, const char *s)
{
    remat_buf_putn(b, s, strlen(s));
}

void remat_buf_printf(remat_buf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        remat_buf_putn(b, small, (size_t)n);
        return;
    }
    if (!buf_reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void remat_buf_json_str(remat_buf *b, const char *s)
{
    remat_buf_putn(b, "\"", 1);
    remat_buf_json_chars(b, s);
    remat_buf_putn(b, "\"", 1);
}

size_t remat__utf8_seq(const unsigned char *p)
{
    /* A NUL ends the string, and no valid sequence holds one: the checks
     * below stop at it, so SIZE_MAX bytes are never read. */
    return remat__utf8_seq_n(p, SIZE_MAX);
}

size_t remat__utf8_seq_n(const unsigned char *p, size_t avail)
{
    /* RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF. */
    if (avail == 0)
        return 0;
    unsigned c = p[0];
    if (c < 0x80)
        return 1;
    size_t n;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    if (avail < n || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    return n;
}

size_t remat__utf8_invalid_at_n(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        if (p[i] < 0x80) { /* the common case, byte by byte */
            i++;
            continue;
        }
        size_t n = remat__utf8_seq_n(p + i, len - i);
        if (!n)
            return i;
        i += n;
    }
    return SIZE_MAX;
}

size_t remat__utf8_invalid_at(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (p[i]) {
        size_t n = remat__utf8_seq(p + i);
        if (!n)
            return i;
        i += n;
    }
    return SIZE_MAX;
}

void remat_buf_json_chars(remat_buf *b, const char *s)
{
    /* Every document remat writes is valid JSON whatever its strings hold:
     * control characters are escaped, and a byte that does not begin a
     * valid UTF-8 sequence (the loader refuses them in graphs, but names can
     * come from elsewhere) becomes U+FFFD rather than invalid output. */
    const char *run = s;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        const char *esc = NULL;
        char tmp[8];
        size_t n = 1;
        switch (*p) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default:
            if (*p < 0x20 || *p == 0x7f) {
                snprintf(tmp, sizeof tmp, "\\u%04x", *p);
                esc = tmp;
            } else if (*p >= 0x80 && !(n = remat__utf8_seq(p))) {
                esc = "\\ufffd";
                n = 1;
            }
        }
        if (esc) {
            remat_buf_putn(b, run, (size_t)((const char *)p - run));
            remat_buf_puts(b, esc);
            run = (const char *)p + n;
        }
        p += n;
    }
    remat_buf_puts(b, run);
}

remat_status remat__read_file(const char *path, char **out, size_t *len, remat_err *err)
{
    *out = NULL;
    if (len)
        *len = 0;
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f)
        return remat_err_set(err, REMAT_EIO, "%s: cannot open: %s", path, strerror(errno));
    remat_buf b;
    remat_buf_init(&b);
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        remat_buf_putn(&b, chunk, n);
    int bad = ferror(f);
    int saved = errno;
    if (f != stdin)
        fclose(f);
    if (bad) {
        remat_buf_destroy(&b);
        return remat_err_set(err, REMAT_EIO, "%s: cannot read: %s", path, strerror(saved));
    }
    if (b.failed) {
        remat_buf_destroy(&b);
        return remat_err_set(err, REMAT_ENOMEM, "%s: out of memory reading file", path);
    }
    if (!b.data) { /* empty file */
        b.data = remat__malloc(1);
        if (!b.data)
            return remat_err_set(err, REMAT_ENOMEM, "%s: out of memory reading file", path);
        b.data[0] = '\0';
    }
    *out = b.data;
    if (len)
        *len = b.len;
    return REMAT_OK;
}

uint64_t remat__fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

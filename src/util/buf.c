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
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

void remat_buf_json_chars(remat_buf *b, const char *s)
{
    const char *run = s;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        const char *esc = NULL;
        char tmp[8];
        switch (*p) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default:
            if (*p < 0x20) {
                snprintf(tmp, sizeof tmp, "\\u%04x", *p);
                esc = tmp;
            }
        }
        if (esc) {
            remat_buf_putn(b, run, (size_t)((const char *)p - run));
            remat_buf_puts(b, esc);
            run = (const char *)p + 1;
        }
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

/* Creates path's temporary sibling "path.tmp.XXXXXX" exclusively. mkstemp
 * would make it 0600, and rename would give the output that mode; opened
 * with 0666 the file gets what the umask allows, like any file the user's
 * tools create. The name's letters come from the clock, the process and a
 * counter; a name that exists already is just tried again. */
static int create_temp(char *tmp, size_t plen)
{
    static const char letters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 16) ^ (uint64_t)(uintptr_t)tmp;
    for (int attempt = 0; attempt < 100; attempt++) {
        x = remat__fnv1a(x, &attempt, sizeof attempt);
        uint64_t r = x;
        memcpy(tmp + plen, ".tmp.", 5);
        for (int i = 0; i < 6; i++, r /= 62)
            tmp[plen + 5 + i] = letters[r % 62];
        tmp[plen + 11] = '\0';
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    errno = EEXIST;
    return -1;
}

remat_status remat__write_file_atomic(const char *path, const char *data, size_t len, remat_err *err)
{
    if (strcmp(path, "-") == 0) {
        if (fwrite(data, 1, len, stdout) != len || fflush(stdout) != 0)
            return remat_err_set(err, REMAT_EIO, "stdout: write failed: %s", strerror(errno));
        return REMAT_OK;
    }
    size_t plen = strlen(path);
    char *tmp = remat__malloc(plen + 16);
    if (!tmp)
        return remat_err_set(err, REMAT_ENOMEM, "%s: out of memory", path);
    memcpy(tmp, path, plen);
    int fd = create_temp(tmp, plen);
    if (fd < 0) {
        remat_status st = remat_err_set(err, REMAT_EIO, "%s: cannot create temporary file: %s", path, strerror(errno));
        remat__free(tmp);
        return st;
    }
    /* Replacing a file keeps its permissions (and the umask does not apply
     * to them, so fchmod rather than the mode given to open). */
    struct stat old;
    int ok = 1;
    if (stat(path, &old) == 0 && S_ISREG(old.st_mode))
        ok = fchmod(fd, old.st_mode & 07777) == 0;
    size_t done = 0;
    while (ok && done < len) {
        ssize_t w = write(fd, data + done, len - done);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        done += (size_t)w;
    }
    ok = ok && done == len && fsync(fd) == 0;
    int saved = errno;
    if (close(fd) != 0)
        ok = 0;
    if (ok && rename(tmp, path) != 0) {
        saved = errno;
        ok = 0;
    }
    if (!ok) {
        unlink(tmp);
        remat__free(tmp);
        return remat_err_set(err, REMAT_EIO, "%s: write failed: %s", path, strerror(saved));
    }
    remat__free(tmp);
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

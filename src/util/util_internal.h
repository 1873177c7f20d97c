/*
 * util_internal.h - helpers shared by every module but not part of the API:
 * the one allocation gate, a growable string buffer and hashing.
 */
#ifndef REMAT_UTIL_INTERNAL_H
#define REMAT_UTIL_INTERNAL_H

#include "remat/util.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* All heap memory goes through these four so that tests can make the Nth
 * allocation fail (remat__alloc_fail_at) and check that every path reports
 * REMAT_ENOMEM cleanly. They behave like the libc functions. */
void *remat__malloc(size_t n);
void *remat__calloc(size_t count, size_t size);
void *remat__realloc(void *p, size_t n);
void remat__free(void *p);
char *remat__strdup(const char *s);
/* calloc of count*size with the product checked; NULL on overflow too. */
void *remat__array(size_t count, size_t size);
/* Grows the array *p of *cap elements of size bytes, doubling from 64, until
 * it holds need; returns 1, or 0 (array and *cap unchanged) when out of
 * memory or the size overflows. Amortised O(1) per appended element. */
int remat__grow(void **p, size_t *cap, size_t need, size_t size);

/* Test hook: allocation number n (1-based, counted from this call) of the
 * calling thread fails; n = 0 turns injection off. Returns the number of
 * allocations the thread made since its previous call. The counters are
 * thread-local (remat has no mutable process-wide state of its own besides
 * the igraph lock and the once-installed cJSON hooks); only tests arm it. */
uint64_t remat__alloc_fail_at(uint64_t n);

/* The later of two steps, where UINT32_MAX (REMAT_NONE) means "no step":
 * the last-use folds of the policy, DTR and the exact model. */
static inline uint32_t remat__later_step(uint32_t x, uint32_t y)
{
    if (x == UINT32_MAX)
        return y;
    if (y == UINT32_MAX)
        return x;
    return x > y ? x : y;
}

/* Double to integer, defined for every input. Converting a double outside
 * (-1, 2^64) to uint64_t is undefined behaviour (C11 6.3.1.4), and a
 * product of byte counts near 2^64 rounds up to 2^64 exactly: every such
 * conversion in remat goes through one of these two.
 *
 * remat__u64_from_double saturates: NaN and x < 1 give 0 (the fraction is
 * dropped, as a cast would), x >= 2^64 gives UINT64_MAX. For thresholds and
 * interpolated budgets, where the nearest representable count is right. */
static inline uint64_t remat__u64_from_double(double x)
{
    if (!(x > 0)) /* NaN too */
        return 0;
    if (x >= 18446744073709551616.0)
        return UINT64_MAX;
    return (uint64_t)x;
}

/* remat__u64_from_double_checked stores x in *out and returns 1 only when x
 * is a whole number in [0, 2^64); else 0 and *out is unchanged. For values
 * read from input, which must be refused rather than clamped. */
static inline int remat__u64_from_double_checked(double x, uint64_t *out)
{
    if (!(x >= 0) || x >= 18446744073709551616.0 || x != (double)(uint64_t)x)
        return 0;
    *out = (uint64_t)x;
    return 1;
}

/* A growable, always NUL-terminated string. On allocation failure it sets
 * `failed` and ignores further appends, so callers check once at the end. */
typedef struct {
    char *data;
    size_t len, cap;
    int failed;
} remat_buf;

void remat_buf_init(remat_buf *b);
void remat_buf_destroy(remat_buf *b);
/* Hands over a finished document: on success its NUL-terminated text
 * (an empty document is "", never NULL; free with remat_free) and *len (if
 * not NULL); after an allocation failure during writing, NULL with
 * REMAT_ENOMEM "out of memory writing the <what>", b destroyed. */
char *remat_buf_finish(remat_buf *b, size_t *len, remat_err *err, const char *what);
void remat_buf_puts(remat_buf *b, const char *s);
void remat_buf_putn(remat_buf *b, const char *s, size_t n);
void remat_buf_printf(remat_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Appends s as a JSON string literal, quotes included. */
void remat_buf_json_str(remat_buf *b, const char *s);
/* Appends s escaped for the inside of a JSON string literal (no quotes), so
 * that a string can be built from parts of any length. Control characters
 * (and DEL) are escaped; a byte that is not valid UTF-8 is written U+FFFD,
 * so the document is valid JSON whatever s holds. */
void remat_buf_json_chars(remat_buf *b, const char *s);

/* The length of the valid UTF-8 sequence at p (1 to 4; 1 for ASCII, NUL
 * included), or 0 when p does not begin one (RFC 3629: overlong forms,
 * surrogates and code points above U+10FFFF are invalid). Reads at most
 * up to the first byte that ends the sequence, so never past a NUL. */
size_t remat__utf8_seq(const unsigned char *p);
/* The same within p[0..avail), NULs and all. */
size_t remat__utf8_seq_n(const unsigned char *p, size_t avail);
/* The offset of the first byte of s[0..len) that is not valid UTF-8, or
 * SIZE_MAX: JSON text must be UTF-8 (RFC 8259 section 8.1). */
size_t remat__utf8_invalid_at_n(const char *s, size_t len);
/* The offset of s's first byte that is not valid UTF-8, or SIZE_MAX. */
size_t remat__utf8_invalid_at(const char *s);

/* Writes an output document (output.c). A regular file, or a new name, is
 * written atomically: a temporary file in its directory, fsync'd and renamed
 * over it, so a failed run never leaves a truncated file; a symbolic link is
 * followed and the file it names replaced (the link stays). Anything else -
 * a device, a FIFO, /dev/stdout - is written in place, never replaced.
 * path "-" writes to stdout; "" is REMAT_EINVAL. Errors: REMAT_EIO naming
 * path, REMAT_ENOMEM. */
remat_status remat__write_file_atomic(const char *path, const char *data, size_t len, remat_err *err);

/* Reads a whole file (NUL-terminated). "-" reads stdin. *out is owned by the
 * caller (remat__free). */
remat_status remat__read_file(const char *path, char **out, size_t *len, remat_err *err);

/* An error at a place in an input, told twice from the same facts: the
 * message "file[:line[:column]]: [path: ]detail" and err->loc = {file,
 * path, line, column, id} (line and column 0, path and id NULL or "" where
 * they do not apply). First error wins, as remat_err_set; returns the code
 * err holds. The readers of imported files and state files write through
 * it, so their words and their locations cannot disagree (err.c). */
remat_status remat__err_vat(remat_err *err, remat_status code, const char *file, uint32_t line, int column,
                            const char *path, const char *id, const char *fmt, va_list ap);
remat_status remat__err_at(remat_err *err, remat_status code, const char *file, uint32_t line, int column,
                           const char *path, const char *id, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 8, 9)))
#endif
    ;

/* FNV-1a 64-bit, for ids and fingerprints (identity, not security). */
uint64_t remat__fnv1a(uint64_t h, const void *data, size_t n);
#define REMAT_FNV_OFFSET 0xcbf29ce484222325ULL

/* Open-addressing string -> uint32 index (for id lookup). Keys are borrowed:
 * they must outlive the map. A slot keeps 32 bits of its key's hash beside
 * the key and the value, so a probe reads one cache line and rarely calls
 * strcmp on a mismatch. */
typedef struct {
    const char *key; /* NULL: empty */
    uint32_t tag;
    uint32_t val;
} remat_strmap_slot;

typedef struct {
    remat_strmap_slot *slots;
    size_t cap; /* power of two */
    size_t count;
} remat_strmap;

remat_status remat_strmap_init(remat_strmap *m, size_t expected);
void remat_strmap_destroy(remat_strmap *m);
/* A hint that key is about to be looked up or inserted: starts loading its
 * slot, so that several lookups' cache misses overlap instead of queueing. */
void remat_strmap_prefetch(const remat_strmap *m, const char *key);
/* Returns 1 and sets *val if found, 0 otherwise. */
int remat_strmap_get(const remat_strmap *m, const char *key, uint32_t *val);
/* Inserts; returns REMAT_OK, or REMAT_EINVAL if key is present (*val set to
 * the existing value), or REMAT_ENOMEM. */
remat_status remat_strmap_put(remat_strmap *m, const char *key, uint32_t val, uint32_t *existing);

#endif

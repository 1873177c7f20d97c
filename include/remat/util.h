/*
 * remat/util.h - status codes, error records, checked arithmetic and byte units.
 *
 * Every fallible remat function returns a remat_status and fills a caller-owned
 * remat_err with the code, a message and, where the input has one, the place
 * (a JSON path, a line:column, an option name). The first error wins: later
 * calls of remat_err_set on an err that already holds an error change nothing,
 * so the message a user sees names the root cause, not its consequences.
 *
 *     remat_err err;
 *     remat_err_init(&err);
 *     remat_graph *g = NULL;
 *     if (remat_graph_load_file("graph.json", &g, &err) != REMAT_OK)
 *         fprintf(stderr, "remat: %s\n", err.msg);
 *
 * Byte counts are uint64_t everywhere. Sums and products go through the
 * remat_u64_add/mul helpers, which report overflow instead of wrapping.
 */
#ifndef REMAT_UTIL_H
#define REMAT_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of these headers. remat_version() is the library's own, so a
 * program can check that the library it runs with is the one it was built
 * against (the Makefile reads the version from these lines). */
#define REMAT_VERSION_MAJOR 0
#define REMAT_VERSION_MINOR 1
#define REMAT_VERSION_PATCH 0
#define REMAT_VERSION_STRING "0.1.0"
/* One number that compares: (major << 16) | (minor << 8) | patch. */
#define REMAT_VERSION_NUMBER ((REMAT_VERSION_MAJOR << 16) | (REMAT_VERSION_MINOR << 8) | REMAT_VERSION_PATCH)

/* The library's version, "MAJOR.MINOR.PATCH" (static storage). */
const char *remat_version(void);

/* One X-macro table gives the enum and its names (as libuv's UV_ERRNO_MAP). */
#define REMAT_STATUS_MAP(X)                                   \
    X(OK, "ok")                                               \
    X(EINVAL, "invalid argument")                             \
    X(EIO, "input/output error")                              \
    X(EPARSE, "malformed input")                              \
    X(EGRAPH, "invalid graph")                                \
    X(EPLAN, "invalid plan")                                  \
    X(ESCHEDULE, "invalid schedule")                          \
    X(EINFEASIBLE, "infeasible budget")                       \
    X(EOVERFLOW, "arithmetic overflow")                       \
    X(ENOMEM, "out of memory")                                \
    X(EUNSUPPORTED, "unsupported")                            \
    X(EINTERNAL, "internal error")

typedef enum {
#define REMAT__STATUS_ENUM(name, text) REMAT_##name,
    REMAT_STATUS_MAP(REMAT__STATUS_ENUM)
#undef REMAT__STATUS_ENUM
    REMAT_STATUS_COUNT
} remat_status;

#define REMAT_ERR_MSG_MAX 512

/* Where an error is, as data beside the message (which says the same in
 * words): a caller can point at the input without parsing text. Fields
 * that do not apply are empty (""), or 0 for line and column. */
typedef struct remat_err_loc {
    char file[256];  /* the source as the caller named it ("graph.json") */
    char path[256];  /* the JSON path ("ops[3].inputs[1]") */
    int line, column; /* 1-based, of a syntax error */
    char id[128];    /* the graph id (op or tensor) the error is about */
} remat_err_loc;

/* A message about a bad argument names the API parameter (a struct field
 * or function parameter), not any front end's option: leading the message
 * bare ("strategy: unknown strategy 'x'"), elsewhere in backquotes
 * ("`zero_stage` 2 shards state ...: give their number with `dp` N"). The
 * remat command spells them as its flags. */
typedef struct remat_err {
    remat_status code;
    char msg[REMAT_ERR_MSG_MAX]; /* "ops[3].inputs[1]: unknown tensor 'x'" */
    remat_err_loc loc;
} remat_err;

/* Frees memory that a remat function returned to the caller (report texts). */
void remat_free(void *p);

/* Short fixed name of a status ("invalid graph"); never NULL. */
const char *remat_status_str(remat_status code);

void remat_err_init(remat_err *err);

/* Records code and message unless err already holds an error; returns the
 * code stored in err so callers can write `return remat_err_set(...)`.
 * err may be NULL (the code is still returned). */
remat_status remat_err_set(remat_err *err, remat_status code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* remat_err_set, recording loc (may be NULL) with the message when this is
 * the first error. */
remat_status remat_err_set_at(remat_err *err, remat_status code, const remat_err_loc *loc, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Fills a location (any argument may be NULL or 0). */
void remat_err_loc_make(remat_err_loc *loc, const char *file, const char *path, int line, int column,
                        const char *id);

/* Overflow-checked u64 arithmetic: return false (and leave *out unchanged)
 * on overflow. */
static inline bool remat_u64_add(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a > UINT64_MAX - b)
        return false;
    *out = a + b;
    return true;
}

static inline bool remat_u64_mul(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a != 0 && b > UINT64_MAX / a)
        return false;
    *out = a * b;
    return true;
}

/* Parses "123", "4KiB", "1.5GiB", "2GB", "512MB", "7B" (case-insensitive
 * suffix; KiB/MiB/GiB/TiB = 2^10.., KB/MB/GB/TB = 10^3..; "K", "M", "G", "T"
 * alone are refused as ambiguous). The result must be an exact whole number
 * of bytes. Failure: REMAT_EINVAL with a message naming `what` (e.g.
 * "--budget"). */
remat_status remat_parse_bytes(const char *s, const char *what, uint64_t *out, remat_err *err);

/* Writes "40.00 GiB (42949672960 B)"-style text: the exact bytes always,
 * plus a binary-unit rendering. Returns buf. */
char *remat_format_bytes(uint64_t bytes, char *buf, size_t cap);

/* Binary-unit rendering only ("1.50 GiB", "512 B"). Returns buf. */
char *remat_format_bytes_short(uint64_t bytes, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif

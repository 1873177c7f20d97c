/*
 * json_glue.h - how src/load drives cJSON: allocation hooks through remat's
 * allocation gate, out-of-memory detection, and a bump arena for parses
 * whose trees die together.
 *
 * cJSON reports a failed allocation exactly like a syntax error (a NULL
 * tree), so every reader in src/load parses through remat__json_parse and
 * asks remat__json_alloc_failed before it blames the input: the first makes
 * a failed allocation "out of memory" (REMAT_ENOMEM), not "not valid JSON".
 *
 *     const char *end;
 *     cJSON *root = remat__json_parse(text, len, &end);
 *     if (!root && remat__json_alloc_failed())
 *         return remat_err_set(err, REMAT_ENOMEM, "%s: out of memory while parsing", source);
 *
 * Internal to remat. Hooks and arena state are per thread (cJSON's hooks take
 * no user pointer, as igraph's error handler does not).
 */
#ifndef REMAT_LOAD_JSON_GLUE_H
#define REMAT_LOAD_JSON_GLUE_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* Points cJSON's allocator at remat's gate, once per process (cheap after). */
void remat__json_hook(void);

/* Parses one JSON value from text[0..len) (trailing text is left to the
 * caller; *end is where the value ended, or where parsing failed). Installs
 * the hooks and clears the out-of-memory flag first. */
cJSON *remat__json_parse(const char *text, size_t len, const char **end);

/* True when a cJSON allocation failed since the last remat__json_parse or
 * remat__json_clear_alloc_failed. */
int remat__json_alloc_failed(void);
void remat__json_clear_alloc_failed(void);

/* The 1-based line and column of `at` in text[0..len). */
void remat__json_line_col(const char *text, size_t len, const char *at, int *line, int *col);

/* While an arena is open, cJSON's nodes and strings come from 1 MiB chunks
 * and cJSON's frees do nothing; remat__json_arena_end releases everything.
 * A mark taken with remat__json_arena_mark lets a streaming reader release
 * one element's tree (remat__json_arena_release) and keep what came before. */
typedef struct {
    void *head;  /* the chunk in use when the mark was taken */
    size_t used; /* its fill level then */
    void *big;   /* the newest one-off large block then */
} remat_json_mark;

void remat__json_arena_begin(void);
void remat__json_arena_end(void);
void remat__json_arena_mark(remat_json_mark *m);
void remat__json_arena_release(const remat_json_mark *m);

#endif

/*
 * json_glue.c - cJSON's allocation hooks, out-of-memory detection and the
 * parse arena (see json_glue.h).
 *
 * Why an arena: a 10^6-op graph makes about 10^7 cJSON nodes and strings. As
 * separate mallocs they cost as many instructions as the parse itself, take
 * 80 heap bytes per 64-byte node, need a cJSON_Delete walk, and leave a heap
 * of small free chunks. The graph loader streams its big arrays element by
 * element, so an element's tree is released by rewinding the arena to a mark
 * taken before it was parsed; a chunk that the rewind empties is kept as a
 * spare, so a stream does not malloc and free a chunk per element.
 *
 * The state is thread-local because cJSON's hooks get no user pointer. The
 * hooks themselves are process-wide, so they are installed exactly once
 * (pthread_once): rewriting cJSON's globals on every parse, as this file
 * once did, is a data race between two threads loading at the same time.
 */
#define _POSIX_C_SOURCE 200809L
#include "json_glue.h"
#include "../util/util_internal.h"

#include <pthread.h>
#include <stdint.h>

typedef struct cj_chunk {
    struct cj_chunk *next;
    size_t used, cap;
    unsigned char data[]; /* 8-aligned: it follows a pointer and two size_t */
} cj_chunk;

/* Chunks start at 16 KiB and double up to 1 MiB, so a small document does
 * not fault in a megabyte of pages per parse. */
#define CJ_CHUNK_SIZE ((size_t)1 << 20)
#define CJ_CHUNK_FIRST ((size_t)1 << 14)

static _Thread_local int alloc_failed;
static _Thread_local int arena_on;
static _Thread_local cj_chunk *arena_head;  /* chunks of CJ_CHUNK_SIZE, newest first */
static _Thread_local cj_chunk *arena_big;   /* one-off blocks above CJ_CHUNK_SIZE/4, newest first */
static _Thread_local cj_chunk *arena_spare; /* one emptied chunk kept for reuse */

static void *arena_alloc(size_t n)
{
    /* cJSON stores pointers, ints and doubles: 8-byte alignment suffices. */
    size_t need = (n + 7) & ~(size_t)7;
    if (need < n || need > SIZE_MAX - sizeof(cj_chunk))
        return NULL;
    if (need > CJ_CHUNK_SIZE / 4) {
        cj_chunk *b = remat__malloc(sizeof *b + need);
        if (!b)
            return NULL;
        b->used = b->cap = need;
        b->next = arena_big;
        arena_big = b;
        return b->data;
    }
    cj_chunk *c = arena_head;
    if (!c || c->cap - c->used < need) {
        cj_chunk *nc = arena_spare;
        if (nc && nc->cap >= need) {
            arena_spare = NULL;
        } else {
            size_t cap = c ? c->cap * 2 : CJ_CHUNK_FIRST;
            if (cap > CJ_CHUNK_SIZE)
                cap = CJ_CHUNK_SIZE;
            while (cap < need)
                cap *= 2;
            nc = remat__malloc(sizeof *nc + cap);
            if (!nc)
                return NULL;
            nc->cap = cap;
        }
        nc->used = 0;
        nc->next = c;
        arena_head = c = nc;
    }
    void *p = c->data + c->used;
    c->used += need;
    return p;
}

static void *hook_malloc(size_t n)
{
    void *p = arena_on ? arena_alloc(n) : remat__malloc(n);
    if (!p)
        alloc_failed = 1;
    return p;
}

static void hook_free(void *p)
{
    if (!arena_on)
        remat__free(p);
}

static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;

static void install_hooks(void)
{
    cJSON_Hooks hooks = {hook_malloc, hook_free};
    cJSON_InitHooks(&hooks);
}

void remat__json_hook(void)
{
    pthread_once(&hooks_once, install_hooks);
}

cJSON *remat__json_parse(const char *text, size_t len, const char **end)
{
    remat__json_hook();
    alloc_failed = 0;
    *end = NULL;
    return cJSON_ParseWithLengthOpts(text, len, end, 0);
}

int remat__json_alloc_failed(void)
{
    return alloc_failed;
}

void remat__json_clear_alloc_failed(void)
{
    alloc_failed = 0;
}

void remat__json_line_col(const char *text, size_t len, const char *at, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (const char *p = text; at && p < at && p < text + len; p++) {
        if (*p == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

static void free_list(cj_chunk *c, const cj_chunk *stop)
{
    while (c != stop) {
        cj_chunk *n = c->next;
        remat__free(c);
        c = n;
    }
}

void remat__json_arena_begin(void)
{
    arena_head = arena_big = arena_spare = NULL;
    arena_on = 1;
}

void remat__json_arena_end(void)
{
    free_list(arena_head, NULL);
    free_list(arena_big, NULL);
    free_list(arena_spare, NULL);
    arena_head = arena_big = arena_spare = NULL;
    arena_on = 0;
}

void remat__json_arena_mark(remat_json_mark *m)
{
    m->head = arena_head;
    m->used = arena_head ? arena_head->used : 0;
    m->big = arena_big;
}

void remat__json_arena_release(const remat_json_mark *m)
{
    while (arena_head != m->head) {
        cj_chunk *c = arena_head;
        arena_head = c->next;
        if (!arena_spare) {
            c->next = NULL;
            arena_spare = c;
        } else {
            remat__free(c);
        }
    }
    if (arena_head)
        arena_head->used = m->used;
    free_list(arena_big, m->big);
    arena_big = m->big;
}

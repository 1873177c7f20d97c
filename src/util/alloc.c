/*
 * alloc.c - the single allocation gate.
 *
 * Routing every allocation through here lets the out-of-memory tests fail
 * exactly the Nth one. The counters are per thread: a test arms injection
 * (remat__alloc_fail_at) in its own thread and counts that thread's
 * allocations, and two threads planning at once never share or race on a
 * counter. Normal runs never arm it.
 */
#include "util_internal.h"

#include <stdlib.h>
#include <string.h>

static _Thread_local uint64_t alloc_count;
static _Thread_local uint64_t alloc_fail_at;

uint64_t remat__alloc_fail_at(uint64_t n)
{
    uint64_t made = alloc_count;
    alloc_count = 0;
    alloc_fail_at = n;
    return made;
}

static int should_fail(void)
{
    alloc_count++;
    return alloc_fail_at != 0 && alloc_count == alloc_fail_at;
}

void *remat__malloc(size_t n)
{
    if (should_fail())
        return NULL;
    return malloc(n ? n : 1);
}

void *remat__calloc(size_t count, size_t size)
{
    if (should_fail())
        return NULL;
    if (count == 0 || size == 0)
        return calloc(1, 1);
    return calloc(count, size);
}

void *remat__array(size_t count, size_t size)
{
    if (size != 0 && count > SIZE_MAX / size)
        return NULL;
    return remat__calloc(count, size);
}

void *remat__realloc(void *p, size_t n)
{
    if (should_fail())
        return NULL;
    return realloc(p, n ? n : 1);
}

void remat__free(void *p)
{
    free(p);
}

char *remat__strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = remat__malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

void remat_free(void *p)
{
    free(p);
}

int remat__grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 1;
    size_t n = *cap ? *cap : 64;
    while (n < need) {
        if (n > SIZE_MAX / 2)
            return 0;
        n *= 2;
    }
    if (n > SIZE_MAX / size)
        return 0;
    void *q = remat__realloc(*p, n * size);
    if (!q)
        return 0;
    *p = q;
    *cap = n;
    return 1;
}

/*
 * store.c - the arena that owns a graph's strings and small arrays.
 *
 * A 10^6-op graph has millions of short ids; one malloc each would double the
 * loader's memory. Chunks hold them (or one exactly-sized chunk for a large
 * request), and the whole arena goes with remat_graph_destroy. Chunks start
 * at 16 KiB and double up to 1 MiB, so a small graph costs little.
 */
#include "graph_store.h"

#include <string.h>

#define CHUNK_SIZE ((size_t)1 << 20)
#define CHUNK_FIRST ((size_t)1 << 14)

void *remat__store_alloc(remat_graph_store *st, size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size)
        return NULL;
    size_t n = (count * size + 7) & ~(size_t)7;
    if (n == 0)
        n = 8;
    remat_chunk *c = st->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = c ? c->cap * 2 : CHUNK_FIRST;
        if (cap > CHUNK_SIZE)
            cap = CHUNK_SIZE;
        if (n > cap / 4)
            cap = n;
        remat_chunk *nc = remat__malloc(sizeof *nc + cap);
        if (!nc)
            return NULL;
        nc->used = 0;
        nc->cap = cap;
        /* A big one-off block goes behind the current chunk so that the
         * current chunk's free space is still used by later small requests. */
        if (c && cap == n) {
            nc->next = c->next;
            c->next = nc;
        } else {
            nc->next = c;
            st->chunks = nc;
        }
        c = nc;
    }
    void *p = c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

char *remat__store_strndup(remat_graph_store *st, const char *s, size_t n)
{
    char *d = remat__store_alloc(st, n + 1, 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

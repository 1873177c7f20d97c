/*
 * graph_store.h - what a loaded graph owns behind remat_graph.internal_.
 *
 * Strings and small arrays live in a chunked arena that is freed in one go;
 * id lookups use two string maps whose keys point into that arena. The three
 * big arrays (g->tensors, g->ops, g->refs) are separate heap blocks, because
 * the stream driver grows them while it reads (remat_graph_destroy frees
 * them).
 */
#ifndef REMAT_GRAPH_STORE_H
#define REMAT_GRAPH_STORE_H

#include "remat/graph.h"
#include "../util/util_internal.h"

typedef struct remat_chunk {
    struct remat_chunk *next;
    size_t used, cap;
    char data[];
} remat_chunk;

typedef struct {
    remat_chunk *chunks;
    remat_strmap tensor_ids;
    remat_strmap op_ids;
} remat_graph_store;

/* Copies n bytes of s plus a NUL into the store's arena; NULL on ENOMEM. */
char *remat__store_strndup(remat_graph_store *st, const char *s, size_t n);
/* Zeroed, 8-byte-aligned arena memory; NULL on ENOMEM or overflow. */
void *remat__store_alloc(remat_graph_store *st, size_t count, size_t size);

#endif

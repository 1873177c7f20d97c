/*
 * strmap.c - string to index map with open addressing and linear probing.
 *
 * Graph ids are looked up once per reference while loading, so the map is
 * sized up front from the expected count (load factor <= 1/2) and grows by
 * doubling; keys are borrowed from the graph's own storage.
 */
#include "util_internal.h"

#include <string.h>

static size_t hash_str(const char *s)
{
    return (size_t)remat__fnv1a(REMAT_FNV_OFFSET, s, strlen(s));
}

remat_status remat_strmap_init(remat_strmap *m, size_t expected)
{
    size_t cap = 16;
    while (cap < expected * 2 + 1 && cap < ((size_t)1 << 40))
        cap <<= 1;
    m->count = 0;
    m->cap = cap;
    m->keys = remat__array(cap, sizeof *m->keys);
    m->vals = remat__array(cap, sizeof *m->vals);
    if (!m->keys || !m->vals) {
        remat_strmap_destroy(m);
        return REMAT_ENOMEM;
    }
    return REMAT_OK;
}

void remat_strmap_destroy(remat_strmap *m)
{
    if (!m)
        return;
    remat__free(m->keys);
    remat__free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
    m->cap = m->count = 0;
}

int remat_strmap_get(const remat_strmap *m, const char *key, uint32_t *val)
{
    if (!m->cap)
        return 0;
    size_t mask = m->cap - 1;
    for (size_t i = hash_str(key) & mask;; i = (i + 1) & mask) {
        if (!m->keys[i])
            return 0;
        if (strcmp(m->keys[i], key) == 0) {
            if (val)
                *val = m->vals[i];
            return 1;
        }
    }
}

static remat_status grow(remat_strmap *m)
{
    remat_strmap bigger;
    if (remat_strmap_init(&bigger, m->cap) != REMAT_OK)
        return REMAT_ENOMEM;
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i])
            remat_strmap_put(&bigger, m->keys[i], m->vals[i], NULL);
    remat_strmap_destroy(m);
    *m = bigger;
    return REMAT_OK;
}

remat_status remat_strmap_put(remat_strmap *m, const char *key, uint32_t val, uint32_t *existing)
{
    if ((m->count + 1) * 2 > m->cap && grow(m) != REMAT_OK)
        return REMAT_ENOMEM;
    size_t mask = m->cap - 1;
    for (size_t i = hash_str(key) & mask;; i = (i + 1) & mask) {
        if (!m->keys[i]) {
            m->keys[i] = key;
            m->vals[i] = val;
            m->count++;
            return REMAT_OK;
        }
        if (strcmp(m->keys[i], key) == 0) {
            if (existing)
                *existing = m->vals[i];
            return REMAT_EINVAL;
        }
    }
}

/*
 * strmap.c - string to index map with open addressing and linear probing.
 *
 * Graph ids are looked up once per reference while loading, so the map is
 * sized up front from the expected count (load factor <= 1/2) and grows by
 * doubling; keys are borrowed from the graph's own storage.
 *
 * What made it slow on 10^6 ids that differ only in their last digits
 * ("t999998", "t999999"): FNV-1a mixes only upwards (bit k of its state
 * depends on bits 0..k), so the low bits that pick a slot were nearly an
 * arithmetic progression of the ids and the probe chains grew long; and a
 * probe read three arrays (keys, values, then the key's text). Now the hash
 * ends with an avalanche step (MurmurHash3's fmix64) that spreads every
 * input bit over the slot bits, and a slot is one 16-byte record holding the
 * key, its value and 32 more bits of its hash (the tag), so a probe reads one
 * cache line and compares text only when the tags agree.
 */
#define _DEFAULT_SOURCE /* madvise */
#include "util_internal.h"

#include <stdint.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

/* A big table is touched at random, one slot per id: with 4 KiB pages
 * nearly every probe also misses the TLB (expensive in a virtual machine).
 * Asking Linux for transparent huge pages on it halves the loader's time
 * on 10^6 ids. Only a hint: nothing depends on it being honoured. */
static void want_huge_pages(void *p, size_t n)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)1 << 21;
    if (n < 4 * huge)
        return;
    uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1), b = ((uintptr_t)p + n) & ~(huge - 1);
    if (b > a)
        madvise((void *)a, b - a, MADV_HUGEPAGE);
#else
    (void)p;
    (void)n;
#endif
}

/* 8 bytes at a time (ids are short), then the avalanche. Identity only:
 * not for anything an adversary could exploit beyond slowing lookups. */
static uint64_t hash_str(const char *s)
{
    size_t n = strlen(s);
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ n;
    for (; n >= 8; n -= 8, s += 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 31;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0x94d049bb133111ebULL;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

/* The slot comes from the low bits, the tag from the high ones. */
#define TAG(h) ((uint32_t)((h) >> 32))

remat_status remat_strmap_init(remat_strmap *m, size_t expected)
{
    size_t cap = 16;
    while (cap < expected * 2 + 1 && cap < ((size_t)1 << 40))
        cap <<= 1;
    m->count = 0;
    m->cap = cap;
    m->slots = remat__array(cap, sizeof *m->slots);
    if (!m->slots) {
        m->cap = 0;
        return REMAT_ENOMEM;
    }
    want_huge_pages(m->slots, cap * sizeof *m->slots);
    return REMAT_OK;
}

void remat_strmap_destroy(remat_strmap *m)
{
    if (!m)
        return;
    remat__free(m->slots);
    m->slots = NULL;
    m->cap = m->count = 0;
}

int remat_strmap_get(const remat_strmap *m, const char *key, uint32_t *val)
{
    if (!m->cap)
        return 0;
    size_t mask = m->cap - 1;
    uint64_t h = hash_str(key);
    uint32_t tag = TAG(h);
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        const remat_strmap_slot *s = &m->slots[i];
        if (!s->key)
            return 0;
        if (s->tag == tag && strcmp(s->key, key) == 0) {
            if (val)
                *val = s->val;
            return 1;
        }
    }
}

void remat_strmap_prefetch(const remat_strmap *m, const char *key)
{
#if defined(__GNUC__)
    if (m->cap)
        __builtin_prefetch(&m->slots[(size_t)hash_str(key) & (m->cap - 1)]);
#else
    (void)m;
    (void)key;
#endif
}

static remat_status grow(remat_strmap *m)
{
    remat_strmap bigger;
    if (remat_strmap_init(&bigger, m->cap / 2) != REMAT_OK) /* twice the slots */
        return REMAT_ENOMEM;
    size_t mask = bigger.cap - 1;
    for (size_t i = 0; i < m->cap; i++) {
        const remat_strmap_slot *s = &m->slots[i];
        if (!s->key)
            continue;
        /* Keys are distinct: no comparisons, just the first free slot. */
        size_t j = (size_t)hash_str(s->key) & mask;
        while (bigger.slots[j].key)
            j = (j + 1) & mask;
        bigger.slots[j] = *s;
        bigger.count++;
    }
    remat_strmap_destroy(m);
    *m = bigger;
    return REMAT_OK;
}

remat_status remat_strmap_put(remat_strmap *m, const char *key, uint32_t val, uint32_t *existing)
{
    if ((m->count + 1) * 2 > m->cap && grow(m) != REMAT_OK)
        return REMAT_ENOMEM;
    size_t mask = m->cap - 1;
    uint64_t h = hash_str(key);
    uint32_t tag = TAG(h);
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        remat_strmap_slot *s = &m->slots[i];
        if (!s->key) {
            s->key = key;
            s->tag = tag;
            s->val = val;
            m->count++;
            return REMAT_OK;
        }
        if (s->tag == tag && strcmp(s->key, key) == 0) {
            if (existing)
                *existing = s->val;
            return REMAT_EINVAL;
        }
    }
}

/*
 * hash.h - BLAKE2b (RFC 7693), the strong hash behind numeric replay.
 *
 * FNV-1a (util_internal.h) names things; it is not collision resistant, so
 * anything that claims "bit-identical" (a recomputed tensor against its first
 * computation, parameter gradients across plans) compares BLAKE2b digests.
 * Written from RFC 7693; tests/check_numeric_hash.c checks it against the RFC's
 * appendix and the reference implementation's known-answer vectors.
 *
 *     remat_blake2b S;
 *     remat__blake2b_init(&S, 32, NULL, 0);
 *     remat__blake2b_update(&S, data, n);
 *     uint8_t digest[32];
 *     remat__blake2b_final(&S, digest);
 *
 * Internal to remat (not installed). No allocation; O(bytes hashed).
 */
#ifndef REMAT_UTIL_HASH_H
#define REMAT_UTIL_HASH_H

#include "remat/util.h"

#include <stddef.h>
#include <stdint.h>

#define REMAT_BLAKE2B_BLOCK 128
#define REMAT_BLAKE2B_OUTMAX 64
#define REMAT_BLAKE2B_KEYMAX 64

typedef struct {
    uint64_t h[8];
    uint64_t t[2];                      /* bytes compressed so far, 128-bit */
    uint8_t buf[REMAT_BLAKE2B_BLOCK];   /* the pending block: always kept until final */
    size_t buflen;
    size_t outlen;
} remat_blake2b;

/* Starts a hash with a digest of outlen bytes (1..64) and an optional key
 * (keylen 0..64; key may be NULL when keylen is 0). REMAT_EINVAL for lengths
 * out of range (S is then unusable). */
remat_status remat__blake2b_init(remat_blake2b *S, size_t outlen, const void *key, size_t keylen);

/* Absorbs n bytes; any split of the input gives the same digest. */
void remat__blake2b_update(remat_blake2b *S, const void *in, size_t n);

/* Writes S->outlen bytes to out. S must be re-initialized before reuse. */
void remat__blake2b_final(remat_blake2b *S, void *out);

/* One call: digest of in (outlen and keylen as for _init). */
remat_status remat__blake2b(void *out, size_t outlen, const void *key, size_t keylen, const void *in, size_t n);

/* Writes the 2n lowercase hex digits of bytes[0..n) and a NUL to hex
 * (which holds 2n+1 chars). Returns hex. */
char *remat__hex(const uint8_t *bytes, size_t n, char *hex);

#endif

/*
 * hash.c - BLAKE2b, from RFC 7693 (sections 2 and 3, appendix C's structure).
 *
 * The state is eight 64-bit words h, a 128-bit byte counter t and one
 * pending block. The RFC's one subtlety is that the last block is compressed
 * with the final flag, so update never compresses a full buffer until it
 * knows more input follows: an input that is an exact multiple of 128 bytes
 * leaves its last block pending for final. Words are read and written
 * little-endian byte by byte, so digests do not depend on the host's byte
 * order or on the alignment of the input.
 */
#include "hash.h"

#include <string.h>

/* The IV is SHA-512's (RFC 7693 section 2.6). */
static const uint64_t blake2b_iv[8] = {
    0x6A09E667F3BCC908ULL, 0xBB67AE8584CAA73BULL, 0x3C6EF372FE94F82BULL, 0xA54FF53A5F1D36F1ULL,
    0x510E527FADE682D1ULL, 0x9B05688C2B3E6C1FULL, 0x1F83D9ABFB41BD6BULL, 0x5BE0CD19137E2179ULL,
};

/* Message word schedule (section 2.7); rounds 10 and 11 reuse rows 0 and 1. */
static const uint8_t blake2b_sigma[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
};

static uint64_t rotr64(uint64_t x, unsigned n)
{
    return (x >> n) | (x << (64 - n));
}

static uint64_t load64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* The mixing function G (section 3.1) with its rotations 32, 24, 16, 63. */
#define B2B_G(a, b, c, d, x, y)            \
    do {                                   \
        v[a] = v[a] + v[b] + (x);          \
        v[d] = rotr64(v[d] ^ v[a], 32);    \
        v[c] = v[c] + v[d];                \
        v[b] = rotr64(v[b] ^ v[c], 24);    \
        v[a] = v[a] + v[b] + (y);          \
        v[d] = rotr64(v[d] ^ v[a], 16);    \
        v[c] = v[c] + v[d];                \
        v[b] = rotr64(v[b] ^ v[c], 63);    \
    } while (0)

/* Compression F (section 3.2). */
static void compress(remat_blake2b *S, const uint8_t *block, int last)
{
    uint64_t v[16], m[16];
    for (int i = 0; i < 16; i++)
        m[i] = load64(block + 8 * i);
    for (int i = 0; i < 8; i++) {
        v[i] = S->h[i];
        v[i + 8] = blake2b_iv[i];
    }
    v[12] ^= S->t[0];
    v[13] ^= S->t[1];
    if (last)
        v[14] = ~v[14];
    for (int r = 0; r < 12; r++) {
        const uint8_t *s = blake2b_sigma[r];
        B2B_G(0, 4, 8, 12, m[s[0]], m[s[1]]);
        B2B_G(1, 5, 9, 13, m[s[2]], m[s[3]]);
        B2B_G(2, 6, 10, 14, m[s[4]], m[s[5]]);
        B2B_G(3, 7, 11, 15, m[s[6]], m[s[7]]);
        B2B_G(0, 5, 10, 15, m[s[8]], m[s[9]]);
        B2B_G(1, 6, 11, 12, m[s[10]], m[s[11]]);
        B2B_G(2, 7, 8, 13, m[s[12]], m[s[13]]);
        B2B_G(3, 4, 9, 14, m[s[14]], m[s[15]]);
    }
    for (int i = 0; i < 8; i++)
        S->h[i] ^= v[i] ^ v[i + 8];
}

static void count(remat_blake2b *S, uint64_t n)
{
    S->t[0] += n;
    if (S->t[0] < n)
        S->t[1]++;
}

remat_status remat__blake2b_init(remat_blake2b *S, size_t outlen, const void *key, size_t keylen)
{
    if (outlen == 0 || outlen > REMAT_BLAKE2B_OUTMAX || keylen > REMAT_BLAKE2B_KEYMAX || (keylen && !key))
        return REMAT_EINVAL;
    memset(S, 0, sizeof *S);
    memcpy(S->h, blake2b_iv, sizeof S->h);
    /* Parameter block word 0: digest length, key length, fanout 1, depth 1. */
    S->h[0] ^= 0x01010000ULL ^ ((uint64_t)keylen << 8) ^ (uint64_t)outlen;
    S->outlen = outlen;
    if (keylen) {
        /* The key, zero-padded, is the first block (section 3.3). */
        uint8_t block[REMAT_BLAKE2B_BLOCK] = {0};
        memcpy(block, key, keylen);
        remat__blake2b_update(S, block, sizeof block);
    }
    return REMAT_OK;
}

void remat__blake2b_update(remat_blake2b *S, const void *in, size_t n)
{
    const uint8_t *p = in;
    while (n > 0) {
        if (S->buflen == REMAT_BLAKE2B_BLOCK) {
            /* More input follows, so the pending block is not the last. */
            count(S, REMAT_BLAKE2B_BLOCK);
            compress(S, S->buf, 0);
            S->buflen = 0;
        }
        if (S->buflen == 0 && n > REMAT_BLAKE2B_BLOCK) {
            /* Whole blocks straight from the input, keeping one back. */
            count(S, REMAT_BLAKE2B_BLOCK);
            compress(S, p, 0);
            p += REMAT_BLAKE2B_BLOCK;
            n -= REMAT_BLAKE2B_BLOCK;
            continue;
        }
        size_t take = REMAT_BLAKE2B_BLOCK - S->buflen;
        if (take > n)
            take = n;
        memcpy(S->buf + S->buflen, p, take);
        S->buflen += take;
        p += take;
        n -= take;
    }
}

void remat__blake2b_final(remat_blake2b *S, void *out)
{
    count(S, S->buflen);
    memset(S->buf + S->buflen, 0, REMAT_BLAKE2B_BLOCK - S->buflen);
    compress(S, S->buf, 1);
    uint8_t full[REMAT_BLAKE2B_OUTMAX];
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++)
            full[8 * i + j] = (uint8_t)(S->h[i] >> (8 * j));
    memcpy(out, full, S->outlen);
}

remat_status remat__blake2b(void *out, size_t outlen, const void *key, size_t keylen, const void *in, size_t n)
{
    remat_blake2b S;
    remat_status st = remat__blake2b_init(&S, outlen, key, keylen);
    if (st != REMAT_OK)
        return st;
    remat__blake2b_update(&S, in, n);
    remat__blake2b_final(&S, out);
    return REMAT_OK;
}

char *remat__hex(const uint8_t *bytes, size_t n, char *hex)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        hex[2 * i] = digits[bytes[i] >> 4];
        hex[2 * i + 1] = digits[bytes[i] & 15];
    }
    hex[2 * n] = '\0';
    return hex;
}

/*
 * check_numeric_hash.c - BLAKE2b (src/util/hash.c), the hash numeric replay
 * digests gradients with, against published vectors: RFC 7693 appendix A,
 * and the BLAKE2 reference implementation's keyed known-answer file
 * blake2b-kat.txt (key 00..3f, message 00..n-1). Part of the "numeric"
 * suite (check_numeric.c builds it; these tests are its "hash" case).
 */
#include "check_numeric.h"
#include "util/hash.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- BLAKE2b ------------------------------------------------------------ */

static void expect_digest(const char *hex_expected, size_t outlen, const void *key, size_t keylen, const void *msg,
                          size_t n)
{
    uint8_t d[64];
    char hex[129];
    ck_assert_int_eq(remat__blake2b(d, outlen, key, keylen, msg, n), REMAT_OK);
    ck_assert_str_eq(remat__hex(d, outlen, hex), hex_expected);
}

START_TEST(hash_should_match_published_vectors)
{
    /* RFC 7693 appendix A: BLAKE2b-512("abc"). */
    expect_digest("ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d1"
                  "7d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923",
                  64, NULL, 0, "abc", 3);
    expect_digest("786a02f742015903c6c6fd852552d272912f4740e15847618a86e217f71f5419"
                  "d25e1031afee585313896444934eb04b903a685b1448b755d56f701afe9be2ce",
                  64, NULL, 0, "", 0);
    expect_digest("a8add4bdddfd93e4877d2746e62817b116364a1fa7bc148d95090bc7333b3673"
                  "f82401cf7aa2e4cb1ecd90296e3f14cb5413f8ed77be73045b13914cdcd6a918",
                  64, NULL, 0, "The quick brown fox jumps over the lazy dog", 43);
    /* BLAKE2b-256 differs from a truncated BLAKE2b-512 (the length is in
     * the parameter block). */
    expect_digest("bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319", 32, NULL, 0, "abc", 3);
    expect_digest("0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8", 32, NULL, 0, "", 0);
    /* blake2b-kat.txt (keyed): lengths around the 128-byte block. */
    static const struct {
        size_t n;
        const char *hex;
    } kat[] = {
        {0, "10ebb67700b1868efb4417987acf4690ae9d972fb7a590c2f02871799aaa4786"
            "b5e996e8f0f4eb981fc214b005f42d2ff4233499391653df7aefcbc13fc51568"},
        {1, "961f6dd1e4dd30f63901690c512e78e4b45e4742ed197c3c5e45c549fd25f2e4"
            "187b0bc9fe30492b16b0d0bc4ef9b0f34c7003fac09a5ef1532e69430234cebd"},
        {2, "da2cfbe2d8409a0f38026113884f84b50156371ae304c4430173d08a99d9fb1b"
            "983164a3770706d537f49e0c916d9f32b95cc37a95b99d857436f0232c88a965"},
        {127, "76d2d819c92bce55fa8e092ab1bf9b9eab237a25267986cacf2b8ee14d214d73"
              "0dc9a5aa2d7b596e86a1fd8fa0804c77402d2fcd45083688b218b1cdfa0dcbcb"},
        {128, "72065ee4dd91c2d8509fa1fc28a37c7fc9fa7d5b3f8ad3d0d7a25626b57b1b44"
              "788d4caf806290425f9890a3a2a35a905ab4b37acfd0da6e4517b2525c9651e4"},
        {129, "64475dfe7600d7171bea0b394e27c9b00d8e74dd1e416a79473682ad3dfdbb70"
              "6631558055cfc8a40e07bd015a4540dcdea15883cbbf31412df1de1cd4152b91"},
        {255, "142709d62e28fcccd0af97fad0f8465b971e82201dc51070faa0372aa43e9248"
              "4be1c1e73ba10906d5d1853db6a4106e0a7bf9800d373d6dee2d46d62ef2a461"},
    };
    uint8_t key[64], msg[256];
    for (int i = 0; i < 64; i++)
        key[i] = (uint8_t)i;
    for (int i = 0; i < 256; i++)
        msg[i] = (uint8_t)i;
    for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++)
        expect_digest(kat[i].hex, 64, key, 64, msg, kat[i].n);
}
END_TEST

START_TEST(hash_should_not_depend_on_how_input_is_split)
{
    uint8_t msg[700], whole[32], part[32];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (uint8_t)(i * 131 + 7);
    for (size_t n = 0; n <= sizeof msg; n += 37) {
        ck_assert_int_eq(remat__blake2b(whole, 32, NULL, 0, msg, n), REMAT_OK);
        for (size_t cut = 0; cut <= n; cut += 13) {
            remat_blake2b S;
            ck_assert_int_eq(remat__blake2b_init(&S, 32, NULL, 0), REMAT_OK);
            remat__blake2b_update(&S, msg, cut);
            remat__blake2b_update(&S, msg + cut, 0);
            remat__blake2b_update(&S, msg + cut, n - cut);
            remat__blake2b_final(&S, part);
            ck_assert_mem_eq(whole, part, 32);
        }
    }
    /* One byte at a time across several blocks. */
    remat_blake2b S;
    remat__blake2b_init(&S, 32, NULL, 0);
    for (size_t i = 0; i < 384; i++)
        remat__blake2b_update(&S, msg + i, 1);
    remat__blake2b_final(&S, part);
    remat__blake2b(whole, 32, NULL, 0, msg, 384);
    ck_assert_mem_eq(whole, part, 32);
}
END_TEST

START_TEST(hash_should_refuse_bad_lengths)
{
    remat_blake2b S;
    uint8_t key[65] = {0};
    ck_assert_int_eq(remat__blake2b_init(&S, 0, NULL, 0), REMAT_EINVAL);
    ck_assert_int_eq(remat__blake2b_init(&S, 65, NULL, 0), REMAT_EINVAL);
    ck_assert_int_eq(remat__blake2b_init(&S, 32, key, 65), REMAT_EINVAL);
    ck_assert_int_eq(remat__blake2b_init(&S, 32, NULL, 4), REMAT_EINVAL);
    ck_assert_int_eq(remat__blake2b_init(&S, 1, key, 64), REMAT_OK);
}
END_TEST

/* The "hash" case of the numeric suite (check_numeric.c). */
void numeric_hash_tests(TCase *tc)
{
    tcase_add_test(tc, hash_should_match_published_vectors);
    tcase_add_test(tc, hash_should_not_depend_on_how_input_is_split);
    tcase_add_test(tc, hash_should_refuse_bad_lengths);
}

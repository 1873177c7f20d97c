/*
 * units.c - byte sizes in and out.
 *
 * Parsing is exact: "1.5GiB" is computed as 15 * 2^30 / 10 in integers, and a
 * size that is not a whole number of bytes is refused rather than rounded,
 * because a budget that silently moves by a byte can flip a feasibility
 * verdict. Bare "K"/"M"/"G" are refused: users mean both 2^30 and 10^9.
 */
#include "remat/util.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const struct {
    const char *suffix;
    uint64_t mult;
} units[] = {
    {"", 1},
    {"b", 1},
    {"kib", 1ULL << 10},
    {"mib", 1ULL << 20},
    {"gib", 1ULL << 30},
    {"tib", 1ULL << 40},
    {"pib", 1ULL << 50},
    {"eib", 1ULL << 60}, /* 2^64 - 1 is 15.99... EiB */
    {"kb", 1000ULL},
    {"mb", 1000000ULL},
    {"gb", 1000000000ULL},
    {"tb", 1000000000000ULL},
    {"pb", 1000000000000000ULL},
    {"eb", 1000000000000000000ULL},
};

remat_status remat_parse_bytes(const char *s, const char *what, uint64_t *out, remat_err *err)
{
    const char *p = s;
    uint64_t whole = 0, frac = 0, frac_div = 1;
    int digits = 0;
    if (!s || !*s)
        return remat_err_set(err, REMAT_EINVAL, "%s: empty byte size", what);
    while (isdigit((unsigned char)*p)) {
        if (!remat_u64_mul(whole, 10, &whole) || !remat_u64_add(whole, (uint64_t)(*p - '0'), &whole))
            return remat_err_set(err, REMAT_EOVERFLOW, "%s: byte size '%s' exceeds 2^64-1", what, s);
        p++;
        digits++;
    }
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char)*p)) {
            if (frac_div >= 1000000000000000000ULL)
                return remat_err_set(err, REMAT_EINVAL, "%s: too many decimals in '%s'", what, s);
            frac = frac * 10 + (uint64_t)(*p - '0');
            frac_div *= 10;
            p++;
            digits++;
        }
    }
    if (!digits)
        return remat_err_set(err, REMAT_EINVAL,
                             "%s: '%s' is not a byte size (examples: 123, 4KiB, 1.5GiB, 2GB)", what, s);
    while (*p == ' ')
        p++;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcasecmp(p, units[i].suffix) != 0)
            continue;
        uint64_t m = units[i].mult, a, b;
        if (!remat_u64_mul(whole, m, &a))
            return remat_err_set(err, REMAT_EOVERFLOW, "%s: byte size '%s' exceeds 2^64-1", what, s);
        /* frac/frac_div * m must be a whole number of bytes. frac < frac_div
         * <= 10^18 and m <= 2^60, so divide out common factors first (the
         * products are still checked). */
        if (frac) {
            uint64_t num = frac, den = frac_div;
            uint64_t mm = m;
            while (den > 1 && mm % 2 == 0 && den % 2 == 0) { den /= 2; mm /= 2; }
            while (den > 1 && mm % 5 == 0 && den % 5 == 0) { den /= 5; mm /= 5; }
            while (den > 1 && num % 2 == 0 && den % 2 == 0) { den /= 2; num /= 2; }
            while (den > 1 && num % 5 == 0 && den % 5 == 0) { den /= 5; num /= 5; }
            if (den != 1)
                return remat_err_set(err, REMAT_EINVAL, "%s: '%s' is not a whole number of bytes", what, s);
            if (!remat_u64_mul(num, mm, &b) || !remat_u64_add(a, b, &a))
                return remat_err_set(err, REMAT_EOVERFLOW, "%s: byte size '%s' exceeds 2^64-1", what, s);
        }
        *out = a;
        return REMAT_OK;
    }
    return remat_err_set(err, REMAT_EINVAL,
                         "%s: unknown unit in '%s' (use B, KiB, MiB, GiB, TiB, PiB, EiB for 2^10.. or KB, MB, GB, TB, PB, EB "
                         "for 10^3..)",
                         what, s);
}

char *remat_format_bytes_short(uint64_t bytes, char *buf, size_t cap)
{
    static const char *names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, cap, "%llu B", (unsigned long long)bytes);
        return buf;
    }
    int u = 0;
    double v = (double)bytes;
    while (v >= 1024.0 && u < 6) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, cap, "%.2f %s", v, names[u]);
    return buf;
}

char *remat_format_bytes(uint64_t bytes, char *buf, size_t cap)
{
    char s[32];
    remat_format_bytes_short(bytes, s, sizeof s);
    if (bytes < 1024)
        snprintf(buf, cap, "%s", s);
    else
        snprintf(buf, cap, "%s (%llu B)", s, (unsigned long long)bytes);
    return buf;
}

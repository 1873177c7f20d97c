/*
 * names.c - the ledger's vocabulary: precisions, optimizers, categories, and
 * parameter counts as people write them ("7B").
 *
 * Names are matched case-insensitively against one table each, so the list
 * printed in an error message is the list that is accepted.
 */
#include "remat/ledger.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const struct {
    remat_ledger_dtype dt;
    const char *name;
    uint32_t size;
    const char *aliases[7];
} dtypes[] = {
    {REMAT_LEDGER_DT_F64, "f64", 8, {"float64", "fp64", "double", "binary64", NULL}},
    {REMAT_LEDGER_DT_F32, "f32", 4, {"float32", "fp32", "float", "binary32", NULL}},
    {REMAT_LEDGER_DT_TF32, "tf32", 4, {"tensorfloat32", NULL}},
    {REMAT_LEDGER_DT_BF16, "bf16", 2, {"bfloat16", NULL}},
    {REMAT_LEDGER_DT_F16, "f16", 2, {"float16", "fp16", "half", "binary16", NULL}},
    {REMAT_LEDGER_DT_F8_E4M3, "f8_e4m3", 1, {"fp8_e4m3", "e4m3", "float8_e4m3fn", "float8_e4m3", "f8e4m3", NULL}},
    {REMAT_LEDGER_DT_F8_E5M2, "f8_e5m2", 1, {"fp8_e5m2", "e5m2", "float8_e5m2", "f8e5m2", NULL}},
    {REMAT_LEDGER_DT_INT8, "int8", 1, {"i8", NULL}},
    {REMAT_LEDGER_DT_UINT8, "uint8", 1, {"u8", NULL}},
};
#define N_DTYPES (sizeof dtypes / sizeof dtypes[0])

static const struct {
    const char *name;
    uint32_t states;
} optimizers[REMAT_LEDGER_OPTIMIZER_COUNT] = {
    [REMAT_LEDGER_SGD] = {"sgd", 0},
    [REMAT_LEDGER_MOMENTUM] = {"momentum", 1},
    [REMAT_LEDGER_ADAM] = {"adam", 2},
    [REMAT_LEDGER_ADAMW] = {"adamw", 2},
    [REMAT_LEDGER_LION] = {"lion", 1},
    [REMAT_LEDGER_ADAFACTOR] = {"adafactor", 0},
    [REMAT_LEDGER_ADAM8BIT] = {"adam8bit", 2},
};

static const char *const categories[REMAT_LEDGER_CATEGORY_COUNT] = {
    "weights", "gradients", "optimizer_state", "master_weights", "frozen", "comm_buffers", "workspace",
    "fragmentation_reserve",
};

remat_status remat_ledger_dtype_parse(const char *name, const char *what, remat_ledger_dtype *out, remat_err *err)
{
    if (name && strcasecmp(name, "none") == 0) {
        *out = REMAT_LEDGER_DT_NONE;
        return REMAT_OK;
    }
    for (size_t i = 0; name && i < N_DTYPES; i++) {
        if (strcasecmp(name, dtypes[i].name) == 0) {
            *out = dtypes[i].dt;
            return REMAT_OK;
        }
        for (const char *const *a = dtypes[i].aliases; *a; a++) {
            if (strcasecmp(name, *a) == 0) {
                *out = dtypes[i].dt;
                return REMAT_OK;
            }
        }
    }
    return remat_err_set(err, REMAT_EINVAL,
                         "%s: unknown dtype '%s' (known: f64, f32, tf32, bf16, f16, f8_e4m3, f8_e5m2, int8, uint8, "
                         "and aliases such as fp32, float64, half, bfloat16)",
                         what, name ? name : "");
}

const char *remat_ledger_dtype_name(remat_ledger_dtype dt)
{
    if (dt == REMAT_LEDGER_DT_AUTO)
        return "auto";
    if (dt == REMAT_LEDGER_DT_NONE)
        return "none";
    for (size_t i = 0; i < N_DTYPES; i++)
        if (dtypes[i].dt == dt)
            return dtypes[i].name;
    return "?";
}

uint32_t remat_ledger_dtype_size(remat_ledger_dtype dt)
{
    for (size_t i = 0; i < N_DTYPES; i++)
        if (dtypes[i].dt == dt)
            return dtypes[i].size;
    return 0;
}

remat_status remat_ledger_optimizer_parse(const char *name, const char *what, remat_ledger_optimizer *out,
                                          remat_err *err)
{
    for (int i = 0; name && i < REMAT_LEDGER_OPTIMIZER_COUNT; i++) {
        if (strcasecmp(name, optimizers[i].name) == 0) {
            *out = (remat_ledger_optimizer)i;
            return REMAT_OK;
        }
    }
    /* Spellings people use for the same optimizers. */
    if (name && (strcasecmp(name, "adam_8bit") == 0 || strcasecmp(name, "adamw8bit") == 0 ||
                 strcasecmp(name, "adam-8bit") == 0)) {
        *out = REMAT_LEDGER_ADAM8BIT;
        return REMAT_OK;
    }
    return remat_err_set(err, REMAT_EINVAL,
                         "%s: unknown optimizer '%s' (known: sgd, momentum, adam, adamw, lion, adafactor, adam8bit)",
                         what, name ? name : "");
}

const char *remat_ledger_optimizer_name(remat_ledger_optimizer o)
{
    return (unsigned)o < REMAT_LEDGER_OPTIMIZER_COUNT ? optimizers[o].name : "?";
}

uint32_t remat_ledger_optimizer_states(remat_ledger_optimizer o)
{
    return (unsigned)o < REMAT_LEDGER_OPTIMIZER_COUNT ? optimizers[o].states : 0;
}

const char *remat_ledger_category_name(remat_ledger_category c)
{
    return (unsigned)c < REMAT_LEDGER_CATEGORY_COUNT ? categories[c] : "?";
}

/* value = mantissa * 10^exp10 exactly, or fail. The grammar is
 * DIGITS [. DIGITS] [e DIGITS] [k|M|B|G|T]: enough for "7B", "1.5B" and
 * "175e9" without floating point, so 2^53-and-up counts stay exact. */
remat_status remat_ledger_parse_count(const char *s, const char *what, uint64_t *out, remat_err *err)
{
    const char *p = s;
    uint64_t mant = 0;
    int digits = 0, exp10 = 0;
    if (!s || !*s)
        return remat_err_set(err, REMAT_EINVAL, "%s: empty parameter count", what);
    for (int frac = 0;; p++) {
        if (*p == '.' && !frac) {
            frac = 1;
            continue;
        }
        if (!isdigit((unsigned char)*p))
            break;
        if (!remat_u64_mul(mant, 10, &mant) || !remat_u64_add(mant, (uint64_t)(*p - '0'), &mant))
            return remat_err_set(err, REMAT_EOVERFLOW, "%s: count '%s' exceeds 2^64-1", what, s);
        digits++;
        exp10 -= frac;
    }
    if (!digits)
        return remat_err_set(err, REMAT_EINVAL,
                             "%s: '%s' is not a parameter count (examples: 423, 1000000000, 7B, 1.5B, 175e9)", what,
                             s);
    if (*p == 'e' || *p == 'E') {
        p++;
        if (!isdigit((unsigned char)*p))
            return remat_err_set(err, REMAT_EINVAL, "%s: '%s' has no exponent digits", what, s);
        int e = 0;
        while (isdigit((unsigned char)*p)) {
            if (e > 100)
                return remat_err_set(err, REMAT_EOVERFLOW, "%s: count '%s' exceeds 2^64-1", what, s);
            e = e * 10 + (*p++ - '0');
        }
        exp10 += e;
    }
    if (*p) {
        static const char suffixes[] = "kmbgt";
        static const int powers[] = {3, 6, 9, 9, 12};
        const char *q = p[1] ? NULL : strchr(suffixes, tolower((unsigned char)*p));
        if (!q)
            return remat_err_set(err, REMAT_EINVAL,
                                 "%s: unknown suffix in '%s' (k = 10^3, M = 10^6, B = 10^9, T = 10^12)", what, s);
        exp10 += powers[q - suffixes];
    }
    for (; exp10 > 0; exp10--)
        if (!remat_u64_mul(mant, 10, &mant))
            return remat_err_set(err, REMAT_EOVERFLOW, "%s: count '%s' exceeds 2^64-1", what, s);
    for (; exp10 < 0; exp10++) {
        if (mant % 10 != 0)
            return remat_err_set(err, REMAT_EINVAL, "%s: '%s' is not a whole number of parameters", what, s);
        mant /= 10;
    }
    *out = mant;
    return REMAT_OK;
}

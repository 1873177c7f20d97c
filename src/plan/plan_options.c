/*
 * plan_options.c - the options strategies read, as a table, and the one
 * parser of their values.
 *
 * Each entry of REMAT__OPTIONS (strategies.h) names a remat_plan_options
 * field, its kind and its usage; the CLI derives its flags and --help text
 * from this table (the field dp_step is the flag --dp-step) and passes
 * values through remat_plan_option_set, so a new option is one entry in the
 * registry and one field in remat/plan.h. Errors name the field (the API
 * parameter); the CLI rewrites that name as its flag. Whether an option was
 * set (remat_plan_option_given) is read off the same table, by each field's
 * offset and size against remat_plan_options_init's value, so the check
 * that refuses another strategy's option needs no per-option code either.
 */
#include "planner.h"
#include "../util/util_internal.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define REMAT__OPT_INFO(field, kind, arg, choices, help) {#field, kind, arg, choices, help},
static const remat_plan_option_info infos[] = {REMAT__OPTIONS(REMAT__OPT_INFO)};
#undef REMAT__OPT_INFO
#define REMAT__OPT_OFF(field, kind, arg, choices, help) offsetof(remat_plan_options, field),
static const size_t offsets[] = {REMAT__OPTIONS(REMAT__OPT_OFF)};
#undef REMAT__OPT_OFF
#define REMAT__OPT_SIZE(field, kind, arg, choices, help) sizeof(((remat_plan_options *)0)->field),
static const size_t sizes[] = {REMAT__OPTIONS(REMAT__OPT_SIZE)};
#undef REMAT__OPT_SIZE
#define N_OPTIONS (sizeof infos / sizeof infos[0])

const remat_plan_option_info *remat_plan_option_table(size_t *n)
{
    *n = N_OPTIONS;
    return infos;
}

/* The index of value among the space-separated words of choices, or -1. */
static int choice_index(const char *choices, const char *value)
{
    size_t n = strlen(value);
    int i = 0;
    for (const char *p = choices; *p; i++) {
        const char *e = strchr(p, ' ');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && n > 0 && strncmp(p, value, n) == 0)
            return i;
        p += len + (e ? 1 : 0);
    }
    return -1;
}

static remat_status bad_choice(const remat_plan_option_info *in, const char *value, remat_err *err)
{
    char list[128];
    size_t k = 0;
    for (const char *p = in->choices; *p && k + 3 < sizeof list; p++) {
        if (*p == ' ') {
            list[k++] = ',';
            list[k++] = ' ';
        } else {
            list[k++] = *p;
        }
    }
    list[k] = 0;
    return remat_err_set(err, REMAT_EINVAL, "%s: '%s' is not one of %s", in->name, value, list);
}

remat_status remat_plan_option_set(remat_plan_options *o, const char *name, const char *value, remat_err *err)
{
    size_t i = 0;
    while (i < N_OPTIONS && strcmp(infos[i].name, name) != 0)
        i++;
    if (i == N_OPTIONS)
        return remat_err_set(err, REMAT_EINVAL, "unknown option '%s'", name);
    const remat_plan_option_info *in = &infos[i];
    char *field = (char *)o + offsets[i];
    if (in->kind != REMAT_OPTION_FLAG && !value)
        return remat_err_set(err, REMAT_EINVAL, "%s: a value is required", in->name);
    switch (in->kind) {
    case REMAT_OPTION_FLAG: *(int *)field = 1; return REMAT_OK;
    case REMAT_OPTION_COUNT: {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(value, &end, 10);
        if (!*value || *end || value[0] == '-' || value[0] == '+')
            return remat_err_set(err, REMAT_EINVAL, "%s: '%s' is not a whole number", in->name, value);
        if (v > UINT32_MAX || errno == ERANGE) /* a whole number, too large: say which */
            return remat_err_set(err, REMAT_EINVAL, "%s: %s is out of range (at most %u)", in->name, value, UINT32_MAX);
        *(uint32_t *)field = (uint32_t)v;
        return REMAT_OK;
    }
    case REMAT_OPTION_BYTES: return remat_parse_bytes(value, in->name, (uint64_t *)field, err);
    case REMAT_OPTION_SECONDS: {
        char *end;
        double v = strtod(value, &end);
        if (!*value || *end || !(v > 0) || !isfinite(v)) /* inf would reach JSON as "inf" */
            return remat_err_set(err, REMAT_EINVAL, "%s: '%s' is not a positive number of seconds", in->name, value);
        *(double *)field = v;
        return REMAT_OK;
    }
    case REMAT_OPTION_TEXT: *(const char **)field = value; return REMAT_OK;
    case REMAT_OPTION_CHOICE: {
        int k = choice_index(in->choices, value);
        if (k < 0)
            return bad_choice(in, value, err);
        /* The budget mode and Chen's reading are enums in choice order;
         * every other choice is kept as its text. */
        if (offsets[i] == offsetof(remat_plan_options, budget_mode))
            o->budget_mode = (remat_budget_mode)k;
        else if (offsets[i] == offsetof(remat_plan_options, chen_reading))
            o->chen_reading = (remat_chen_reading)k;
        else
            *(const char **)field = value;
        return REMAT_OK;
    }
    }
    return remat_err_set(err, REMAT_EINTERNAL, "%s: unknown option kind", in->name);
}

int remat_plan_option_given(const remat_plan_options *o, const char *name)
{
    size_t i = 0;
    while (i < N_OPTIONS && strcmp(infos[i].name, name) != 0)
        i++;
    if (i == N_OPTIONS)
        return 0;
    remat_plan_options d;
    remat_plan_options_init(&d);
    return memcmp((const char *)o + offsets[i], (const char *)&d + offsets[i], sizes[i]) != 0;
}

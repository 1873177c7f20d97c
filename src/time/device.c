/*
 * device.c - device descriptions: the named presets and the device file
 * (format "remat-device", version 1).
 *
 * A preset carries the figures of its vendor datasheet and nothing else, so
 * that a reader can check each one against the document README.md cites:
 * peak FLOP/s per element type (the dense figure, Tensor Core where the
 * datasheet lists one, never the "with sparsity" one), memory bandwidth, and
 * the NVLink bandwidth halved (datasheets give the sum of both directions; a
 * ring sends one way). The one figure no datasheet gives, the per-step link
 * latency, is NCCL's own model of one ring hop over NVLink with its LL128
 * protocol (src/graph/tuning.cc, hwLat[NVLINK][RING][LL128] = 1.9 us; NCCL
 * adds a base latency per call, left out here) for every preset; a device
 * file sets its own. The reader is strict like every remat reader: unknown
 * keys, wrong types and impossible figures are errors naming the JSON path.
 */
#define _POSIX_C_SOURCE 200809L
#include "../load/json_glue.h"
#include "remat/time.h"
#include "../util/util_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define T 1e12
#define GBS 1e9

/* Peaks in the remat_dtype order: f64 f32 tf32 bf16 f16 fp8 int8. */
typedef struct {
    const char *name;
    double peak[REMAT_DTYPE_COUNT];
    double mem_bw, link_bw;
} preset;

static const preset presets[] = {
    /* NVIDIA A100 Tensor Core GPU datasheet (2021), SXM 80GB column. */
    {"a100-sxm-80gb", {19.5 * T, 19.5 * T, 156 * T, 312 * T, 312 * T, 0, 624 * T}, 2039 * GBS, 300 * GBS},
    /* NVIDIA H100 Tensor Core GPU datasheet (2023), H100 SXM column. */
    {"h100-sxm", {67 * T, 67 * T, 494.5 * T, 989.5 * T, 989.5 * T, 1979 * T, 1979 * T}, 3350 * GBS, 450 * GBS},
    /* NVIDIA H200 Tensor Core GPU datasheet (2024), H200 SXM column. */
    {"h200", {67 * T, 67 * T, 494.5 * T, 989.5 * T, 989.5 * T, 1979 * T, 1979 * T}, 4800 * GBS, 450 * GBS},
    /* NVIDIA Tesla V100 GPU datasheet (2020), V100 SXM2 column (no bf16,
     * tf32, fp8 or int8 units listed). */
    {"v100-sxm2", {7.8 * T, 15.7 * T, 0, 0, 125 * T, 0, 0}, 900 * GBS, 150 * GBS},
};
#define N_PRESETS (sizeof presets / sizeof presets[0])
static const char *const preset_names[] = {"a100-sxm-80gb", "h100-sxm", "h200", "v100-sxm2"};

#define PRESET_LATENCY 1.9e-6

static const char *const dtype_names[] = {
#define REMAT__DTYPE_NAME(name, text) text,
    REMAT_DTYPE_MAP(REMAT__DTYPE_NAME)
#undef REMAT__DTYPE_NAME
};

const char *remat_dtype_name(remat_dtype d)
{
    return (unsigned)d < REMAT_DTYPE_COUNT ? dtype_names[d] : "?";
}

int remat_dtype_parse(const char *s, remat_dtype *out)
{
    static const struct {
        const char *alias;
        remat_dtype d;
    } aliases[] = {{"float64", REMAT_DTYPE_F64},  {"double", REMAT_DTYPE_F64},   {"fp64", REMAT_DTYPE_F64},
                   {"float32", REMAT_DTYPE_F32},  {"float", REMAT_DTYPE_F32},    {"fp32", REMAT_DTYPE_F32},
                   {"bfloat16", REMAT_DTYPE_BF16}, {"float16", REMAT_DTYPE_F16}, {"half", REMAT_DTYPE_F16},
                   {"fp16", REMAT_DTYPE_F16},     {"e4m3", REMAT_DTYPE_FP8},     {"e5m2", REMAT_DTYPE_FP8},
                   {"float8", REMAT_DTYPE_FP8},   {"i8", REMAT_DTYPE_INT8}};
    if (!s)
        return 0;
    for (unsigned d = 0; d < REMAT_DTYPE_COUNT; d++)
        if (strcmp(s, dtype_names[d]) == 0)
            return *out = (remat_dtype)d, 1;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(s, aliases[i].alias) == 0)
            return *out = aliases[i].d, 1;
    return 0;
}

const char *const *remat_device_presets(size_t *n)
{
    *n = N_PRESETS;
    return preset_names;
}

static void names_list(char *buf, size_t cap)
{
    buf[0] = 0;
    for (size_t i = 0; i < N_PRESETS; i++) {
        strncat(buf, i ? ", " : "", cap - strlen(buf) - 1);
        strncat(buf, presets[i].name, cap - strlen(buf) - 1);
    }
}

remat_status remat_device_preset(const char *name, remat_device *out, remat_err *err)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < N_PRESETS; i++)
        if (name && strcmp(name, presets[i].name) == 0) {
            snprintf(out->name, sizeof out->name, "%s", presets[i].name);
            memcpy(out->peak_flops, presets[i].peak, sizeof out->peak_flops);
            out->mem_bandwidth = presets[i].mem_bw;
            out->link_bandwidth = presets[i].link_bw;
            out->link_latency = PRESET_LATENCY;
            out->kernel_overhead = 0;
            /* Mixed-precision training computes in bf16 (f16 on V100). */
            out->default_dtype = presets[i].peak[REMAT_DTYPE_BF16] > 0 ? REMAT_DTYPE_BF16 : REMAT_DTYPE_F16;
            return REMAT_OK;
        }
    char list[256];
    names_list(list, sizeof list);
    return remat_err_set(err, REMAT_EINVAL, "unknown device '%.80s' (presets: %s; or a remat-device JSON file)",
                         name ? name : "", list);
}

/* ---- the device file ---------------------------------------------------- */

static remat_status dfail(remat_err *err, const char *source, const char *path, const char *what)
{
    remat_err_loc loc;
    remat_err_loc_make(&loc, source, path, 0, 0, NULL);
    return remat_err_set_at(err, REMAT_EPARSE, &loc, "%s: %s%s%s", source, path, *path ? ": " : "", what);
}

/* A figure: a finite number >= 0 (> 0 when positive is set). */
static remat_status figure(const cJSON *v, const char *source, const char *path, int positive, double *out,
                           remat_err *err)
{
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return dfail(err, source, path, "must be a number");
    if (v->valuedouble < 0 || (positive && v->valuedouble == 0))
        return dfail(err, source, path, positive ? "must be positive" : "must not be negative");
    *out = v->valuedouble;
    return REMAT_OK;
}

static remat_status load(const cJSON *root, const char *source, remat_device *d, remat_err *err)
{
    static const char *const allowed[] = {"format",         "version",        "name",         "base",
                                          "peak_flops",     "memory_bandwidth", "link_bandwidth", "link_latency",
                                          "kernel_overhead", "default_dtype", NULL};
    char path[96];
    if (!cJSON_IsObject(root))
        return dfail(err, source, "", "top level must be an object");
    for (const cJSON *c = root->child; c; c = c->next) {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            ok |= c->string && strcmp(c->string, *a) == 0;
        if (!ok) {
            snprintf(path, sizeof path, "%.60s", c->string ? c->string : "");
            return dfail(err, source, path, "unknown field");
        }
    }
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "remat-device") != 0)
        return dfail(err, source, "format", "must be \"remat-device\"");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (!cJSON_IsNumber(ver) || ver->valuedouble != 1)
        return dfail(err, source, "version", "unsupported device version (this remat reads version 1)");
    const cJSON *base = cJSON_GetObjectItemCaseSensitive(root, "base");
    memset(d, 0, sizeof *d);
    d->default_dtype = REMAT_DTYPE_F32;
    if (base) {
        remat_err local;
        remat_err_init(&local);
        if (!cJSON_IsString(base))
            return dfail(err, source, "base", "must be a preset name");
        if (remat_device_preset(base->valuestring, d, &local) != REMAT_OK)
            return dfail(err, source, "base", local.msg);
    }
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
    if (name && (!cJSON_IsString(name) || !name->valuestring[0]))
        return dfail(err, source, "name", "must be a non-empty string");
    if (name)
        snprintf(d->name, sizeof d->name, "%s", name->valuestring);
    else if (!base)
        snprintf(d->name, sizeof d->name, "%s", source);
    const cJSON *peaks = cJSON_GetObjectItemCaseSensitive(root, "peak_flops");
    if (peaks && !cJSON_IsObject(peaks))
        return dfail(err, source, "peak_flops", "must be an object {\"f32\": FLOP/s, ...}");
    for (const cJSON *c = peaks ? peaks->child : NULL; c; c = c->next) {
        remat_dtype k;
        snprintf(path, sizeof path, "peak_flops.%.60s", c->string ? c->string : "");
        if (!c->string || !remat_dtype_parse(c->string, &k))
            return dfail(err, source, path, "unknown element type (f64, f32, tf32, bf16, f16, fp8, int8)");
        remat_status st = figure(c, source, path, 0, &d->peak_flops[k], err);
        if (st != REMAT_OK)
            return st;
    }
    int any = 0;
    for (unsigned k = 0; k < REMAT_DTYPE_COUNT; k++)
        any |= d->peak_flops[k] > 0;
    if (!any)
        return dfail(err, source, "peak_flops", "is required: at least one element type with a positive peak");
    static const struct {
        const char *key;
        size_t off;
        int positive;
    } figs[] = {{"memory_bandwidth", offsetof(remat_device, mem_bandwidth), 1},
                {"link_bandwidth", offsetof(remat_device, link_bandwidth), 1},
                {"link_latency", offsetof(remat_device, link_latency), 0},
                {"kernel_overhead", offsetof(remat_device, kernel_overhead), 0}};
    for (size_t i = 0; i < sizeof figs / sizeof figs[0]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, figs[i].key);
        if (!v)
            continue;
        remat_status st = figure(v, source, figs[i].key, figs[i].positive, (double *)((char *)d + figs[i].off), err);
        if (st != REMAT_OK)
            return st;
    }
    if (!(d->mem_bandwidth > 0))
        return dfail(err, source, "memory_bandwidth", "is required (bytes per second)");
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(root, "default_dtype");
    if (dt && (!cJSON_IsString(dt) || !remat_dtype_parse(dt->valuestring, &d->default_dtype)))
        return dfail(err, source, "default_dtype", "must be an element type (f64, f32, tf32, bf16, f16, fp8, int8)");
    if (!(d->peak_flops[d->default_dtype] > 0))
        return dfail(err, source, dt ? "default_dtype" : "peak_flops",
                     "the default element type needs a positive peak in peak_flops");
    return REMAT_OK;
}

remat_status remat_device_load_json(const char *text, size_t len, const char *source, remat_device *out,
                                    remat_err *err)
{
    memset(out, 0, sizeof *out);
    if (!source)
        source = "<device>";
    cJSON *root;
    remat_status st = remat__json_document(text, len, source, &root, err);
    if (st != REMAT_OK)
        return st;
    st = load(root, source, out, err);
    cJSON_Delete(root);
    if (st != REMAT_OK)
        memset(out, 0, sizeof *out);
    return st;
}

remat_status remat_device_load_file(const char *path, remat_device *out, remat_err *err)
{
    char *text;
    size_t len;
    memset(out, 0, sizeof *out);
    remat_status st = remat__read_file(path, &text, &len, err);
    if (st != REMAT_OK)
        return st;
    st = remat_device_load_json(text, len, path, out, err);
    remat__free(text);
    return st;
}

remat_status remat_device_resolve(const char *name_or_path, remat_device *out, remat_err *err)
{
    for (size_t i = 0; i < N_PRESETS; i++)
        if (name_or_path && strcmp(name_or_path, presets[i].name) == 0)
            return remat_device_preset(name_or_path, out, err);
    /* Not a preset: a file, unless the name has no path character and no
     * such file exists, which is a preset misspelled (say so, naming the
     * presets, rather than "no such file"). */
    if (name_or_path && !strchr(name_or_path, '/') && !strchr(name_or_path, '.') && access(name_or_path, F_OK) != 0)
        return remat_device_preset(name_or_path, out, err);
    return remat_device_load_file(name_or_path, out, err);
}

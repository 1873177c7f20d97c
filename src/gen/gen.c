/*
 * gen.c - synthetic remat-graph JSON for tests and benchmarks.
 *
 * Every family writes straight into one remat_buf: no intermediate graph, so
 * a 10^6-op chain costs only its own text. Chain and layered are the ones
 * that get big, so their loops format ids and numbers by hand rather than
 * with printf. The model families (resnet, transformer, unet) are in
 * gen_nets.c.
 *
 * Randomness is splitmix64 seeded by opts->seed: the stream is part of the
 * output's definition (the same seed must give the same file on every
 * machine and in every later version), so it must never change silently.
 *
 * Sections: PRNG, the writer shared with gen_nets.c (resnet, transformer,
 * unet), chain, layered, API.
 */
#include "gen_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The loader takes JSON numbers below 2^53 (where a double stops telling
 * 2^53 from 2^53+1) and decimal strings for larger counts. */
#define EXACT_LIMIT 9007199254740992ULL

/* ---------------------------------------------------------------- PRNG */

typedef struct {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi] without modulo bias: draws past the last whole
 * multiple of the span are rejected (at most half of them, usually none). */
static uint64_t rng_range(rng *r, uint64_t lo, uint64_t hi)
{
    if (lo >= hi)
        return lo;
    uint64_t span = hi - lo;
    if (span == UINT64_MAX)
        return rng_next(r);
    span++;
    uint64_t limit = UINT64_MAX - UINT64_MAX % span;
    uint64_t x;
    do
        x = rng_next(r);
    while (x >= limit);
    return lo + x % span;
}

/* ------------------------------- the writer (shared with gen_nets.c) */

typedef remat__gen_writer gw;

/* Decimal digits by hand: chain and layered print ~10^7 numbers at the
 * largest sizes, and printf costs ten times this. */
static void put_dec(gw *w, uint64_t v)
{
    char buf[24], *d = buf + sizeof buf;
    do
        *--d = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    remat_buf_putn(&w->b, d, (size_t)(buf + sizeof buf - d));
}

void remat__gen_put_u64(gw *w, uint64_t v)
{
    if (v >= EXACT_LIMIT)
        remat_buf_putn(&w->b, "\"", 1);
    put_dec(w, v);
    if (v >= EXACT_LIMIT)
        remat_buf_putn(&w->b, "\"", 1);
}

/* "<prefix><n>" with quotes: a short id such as "t123". */
static void put_id(gw *w, const char *prefix, uint64_t n)
{
    remat_buf_putn(&w->b, "\"", 1);
    remat_buf_puts(&w->b, prefix);
    put_dec(w, n);
    remat_buf_putn(&w->b, "\"", 1);
}

/* Records an option error (the first wins) and returns 0. */
int remat__gen_invalid(gw *w, const char *fmt, ...)
{
    char msg[REMAT_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!w->bad)
        remat_err_set(w->err, REMAT_EINVAL, "%s", msg);
    w->bad = 1;
    return 0;
}

/* Checked product; on overflow records an error naming `what` and returns 0,
 * which later products keep at 0, so one message names the first cause. */
uint64_t remat__gen_mul(gw *w, uint64_t a, uint64_t b, const char *what)
{
    uint64_t r;
    if (!remat_u64_mul(a, b, &r)) {
        remat__gen_invalid(w, "%s: the count overflows 2^64-1; choose smaller sizes", what);
        return 0;
    }
    return r;
}

void remat__gen_header(gw *w, const char *name, const char *family)
{
    remat_buf_puts(&w->b, "{\"format\": \"remat-graph\", \"version\": 1, \"name\": ");
    remat_buf_json_str(&w->b, name);
    remat_buf_printf(&w->b, ",\n \"meta\": {\"generator\": \"remat gen %s\"", family);
}

/* A meta field: key and an unsigned value. */
void remat__gen_meta_u64(gw *w, const char *key, uint64_t v)
{
    remat_buf_printf(&w->b, ", \"%s\": ", key);
    remat__gen_put_u64(w, v);
}

/* Closes meta; the family writes "inputs" next. */
void remat__gen_meta_end(gw *w)
{
    remat_buf_puts(&w->b, "},\n");
}

void remat__gen_footer(gw *w)
{
    remat_buf_puts(&w->b, "],\n \"outputs\": [\"loss\"]}\n");
}

/* ---------------------------------------------------------------- chain */

/* The default maximum of a random range is 4x its minimum (saturating). */
static uint64_t max_or_4x(uint64_t lo, uint64_t hi)
{
    return hi ? hi : lo > UINT64_MAX / 4 ? UINT64_MAX : 4 * lo;
}

static int gen_chain(gw *w, const remat_gen_opts *o, const char *name)
{
    if (o->ops < 1 || o->ops > REMAT__GEN_MAX_OPS)
        return remat__gen_invalid(w, "`ops` must be between 1 and %llu (got %" PRIu32 ")", REMAT__GEN_MAX_OPS, o->ops);
    if (o->param_every < 1)
        return remat__gen_invalid(w, "`param_every` must be at least 1");
    if (o->bytes < 1)
        return remat__gen_invalid(w, "`bytes` must be at least 1 byte");
    uint64_t bmax = max_or_4x(o->bytes, o->max_bytes);
    uint64_t fmax = max_or_4x(o->flops, o->max_flops);
    if (o->random && bmax < o->bytes)
        return remat__gen_invalid(w, "`max_bytes` (%" PRIu64 ") is below `bytes` (%" PRIu64 ")", bmax, o->bytes);
    if (o->random && fmax < o->flops)
        return remat__gen_invalid(w, "`max_flops` (%" PRIu64 ") is below `flops` (%" PRIu64 ")", fmax, o->flops);
    if (w->bad)
        return 0;
    uint64_t pbytes = o->param_bytes ? o->param_bytes : o->bytes;
    uint32_t n = o->ops, k = o->param_every;
    uint32_t n_params = (n - 1) / k + 1;
    rng r = {o->seed};

    remat__gen_header(w, name, "chain");
    remat__gen_meta_u64(w, "ops", n);
    remat__gen_meta_u64(w, "param_every", k);
    if (o->random) {
        remat__gen_meta_u64(w, "seed", o->seed);
        remat_buf_puts(&w->b, ", \"random\": true");
    }
    remat__gen_meta_end(w);
    remat_buf_puts(&w->b, " \"inputs\": [\n  {\"id\": \"x\", \"bytes\": ");
    remat__gen_put_u64(w, o->bytes);
    remat_buf_puts(&w->b, "}],\n \"params\": [");
    for (uint32_t j = 1; j <= n_params; j++) {
        remat_buf_puts(&w->b, j > 1 ? ",\n  {\"id\": " : "\n  {\"id\": ");
        put_id(w, "w", j);
        remat_buf_puts(&w->b, ", \"bytes\": ");
        remat__gen_put_u64(w, pbytes);
        remat_buf_puts(&w->b, "}");
    }
    remat_buf_puts(&w->b, "],\n \"ops\": [");
    for (uint32_t i = 1; i <= n && !w->b.failed; i++) {
        uint64_t bytes = o->random ? rng_range(&r, o->bytes, bmax) : o->bytes;
        uint64_t flops = o->random ? rng_range(&r, o->flops, fmax) : o->flops;
        remat_buf_puts(&w->b, i > 1 ? ",\n  {\"id\": " : "\n  {\"id\": ");
        if (i == n)
            remat_buf_puts(&w->b, "\"loss\", \"op\": \"loss\"");
        else {
            put_id(w, "t", i);
            remat_buf_puts(&w->b, ", \"op\": \"f\"");
        }
        remat_buf_puts(&w->b, ", \"inputs\": [");
        if (i == 1)
            remat_buf_puts(&w->b, "\"x\"");
        else
            put_id(w, "t", i - 1);
        if ((i - 1) % k == 0) {
            remat_buf_puts(&w->b, ", ");
            put_id(w, "w", (i - 1) / k + 1);
        }
        remat_buf_puts(&w->b, "], \"bytes\": ");
        remat__gen_put_u64(w, bytes);
        remat_buf_puts(&w->b, ", \"flops\": ");
        remat__gen_put_u64(w, flops);
        remat_buf_puts(&w->b, "}");
    }
    remat__gen_footer(w);
    return 1;
}

/* -------------------------------------------------------------- layered */

/* Op in layer l (0-based), column c: "t<l*width+c+1>". */
static int gen_layered(gw *w, const remat_gen_opts *o, const char *name)
{
    uint64_t n_ops = (uint64_t)o->width * o->layers;
    if (o->width < 1)
        return remat__gen_invalid(w, "`width` must be at least 1");
    if (o->layers < 1)
        return remat__gen_invalid(w, "`layers` must be at least 1");
    if (n_ops + 1 > REMAT__GEN_MAX_OPS)
        return remat__gen_invalid(w, "`width` x `layers` = %" PRIu64 " ops; the limit is %llu", n_ops,
                                  REMAT__GEN_MAX_OPS - 1);
    if (o->fan_in < 1 || o->fan_in > o->width)
        return remat__gen_invalid(w, "`fan_in` must be between 1 and `width` (%" PRIu32 "), got %" PRIu32, o->width,
                                  o->fan_in);
    if (o->bytes < 1)
        return remat__gen_invalid(w, "`bytes` must be at least 1 byte");
    uint64_t bmax = max_or_4x(o->bytes, o->max_bytes);
    uint64_t fmax = max_or_4x(o->flops, o->max_flops);
    if (bmax < o->bytes)
        return remat__gen_invalid(w, "`max_bytes` (%" PRIu64 ") is below `bytes` (%" PRIu64 ")", bmax, o->bytes);
    if (fmax < o->flops)
        return remat__gen_invalid(w, "`max_flops` (%" PRIu64 ") is below `flops` (%" PRIu64 ")", fmax, o->flops);
    if (w->bad)
        return 0;
    uint64_t pbytes = o->param_bytes ? o->param_bytes : o->bytes;
    const uint32_t W = o->width, F = o->fan_in;
    uint32_t *pick = remat__array(F, sizeof *pick);
    if (!pick) {
        w->b.failed = 1;
        return 0;
    }
    rng r = {o->seed};

    remat__gen_header(w, name, "layered");
    remat__gen_meta_u64(w, "width", W);
    remat__gen_meta_u64(w, "layers", o->layers);
    remat__gen_meta_u64(w, "fan_in", F);
    remat__gen_meta_u64(w, "seed", o->seed);
    remat__gen_meta_end(w);
    remat_buf_puts(&w->b, " \"inputs\": [\n  {\"id\": \"x\", \"bytes\": ");
    remat__gen_put_u64(w, o->bytes);
    remat_buf_puts(&w->b, "}],\n \"params\": [");
    for (uint32_t l = 0; l < o->layers; l++) {
        remat_buf_puts(&w->b, l ? ",\n  {\"id\": " : "\n  {\"id\": ");
        put_id(w, "w", l);
        remat_buf_puts(&w->b, ", \"bytes\": ");
        remat__gen_put_u64(w, pbytes);
        remat_buf_puts(&w->b, "}");
    }
    remat_buf_puts(&w->b, "],\n \"ops\": [");
    uint64_t id = 1;
    for (uint32_t l = 0; l < o->layers && !w->b.failed; l++) {
        for (uint32_t c = 0; c < W; c++, id++) {
            remat_buf_puts(&w->b, id > 1 ? ",\n  {\"id\": " : "\n  {\"id\": ");
            put_id(w, "t", id);
            remat_buf_puts(&w->b, ", \"op\": \"node\", \"inputs\": [");
            if (l == 0) {
                remat_buf_puts(&w->b, "\"x\"");
            } else {
                /* Column c of the layer before, then F-1 distinct others by
                 * Floyd's sampling over the W-1 remaining columns: each
                 * subset equally likely, F-1 draws, no per-op O(W) reset. */
                uint32_t n = 0;
                pick[n++] = c;
                for (uint32_t j = W - F; j < W - 1; j++) {
                    uint32_t t = (uint32_t)rng_range(&r, 0, j);
                    uint32_t col = t >= c ? t + 1 : t; /* skip column c */
                    uint32_t jcol = j >= c ? j + 1 : j;
                    int seen = 0;
                    for (uint32_t q = 1; q < n; q++)
                        seen |= pick[q] == col;
                    pick[n++] = seen ? jcol : col;
                }
                uint64_t base = id - c - W; /* id of column 0 in layer l-1 */
                for (uint32_t q = 0; q < n; q++) {
                    if (q)
                        remat_buf_puts(&w->b, ", ");
                    put_id(w, "t", base + pick[q]);
                }
            }
            remat_buf_puts(&w->b, ", ");
            put_id(w, "w", l);
            remat_buf_puts(&w->b, "], \"bytes\": ");
            remat__gen_put_u64(w, rng_range(&r, o->bytes, bmax));
            remat_buf_puts(&w->b, ", \"flops\": ");
            remat__gen_put_u64(w, rng_range(&r, o->flops, fmax));
            remat_buf_puts(&w->b, "}");
        }
    }
    /* A sum needs no saved tensors: its backward broadcasts the seed. */
    remat_buf_puts(&w->b, ",\n  {\"id\": \"loss\", \"op\": \"sum\", \"inputs\": [");
    for (uint32_t c = 0; c < W; c++) {
        if (c)
            remat_buf_puts(&w->b, ", ");
        put_id(w, "t", id - W + c);
    }
    remat_buf_printf(&w->b, "], \"bytes\": 4, \"flops\": %" PRIu32 ", \"saves\": []}", W);
    remat__gen_footer(w);
    remat__free(pick);
    return 1;
}

/* ------------------------------------------------------------------ API */

static const char *const family_names[REMAT_GEN_FAMILY_COUNT] = {"chain", "layered", "resnet", "transformer", "unet"};

const char *remat_gen_family_name(remat_gen_family family)
{
    return (unsigned)family < REMAT_GEN_FAMILY_COUNT ? family_names[family] : "?";
}

remat_status remat_gen_family_parse(const char *name, remat_gen_family *out, remat_err *err)
{
    for (int i = 0; i < REMAT_GEN_FAMILY_COUNT; i++)
        if (strcmp(name, family_names[i]) == 0) {
            *out = (remat_gen_family)i;
            return REMAT_OK;
        }
    return remat_err_set(err, REMAT_EINVAL, "unknown family '%.64s' (known: chain, layered, resnet, transformer, unet)",
                         name);
}

void remat_gen_opts_init(remat_gen_opts *o, remat_gen_family family)
{
    memset(o, 0, sizeof *o);
    o->family = family;
    o->seed = 1;
    o->ops = 16;
    o->param_every = 1;
    o->bytes = (uint64_t)1 << 20;
    o->flops = 1000000000;
    o->width = 4;
    o->layers = family == REMAT_GEN_TRANSFORMER ? 24 : 4;
    o->fan_in = 2;
    o->batch = family == REMAT_GEN_TRANSFORMER ? 4 : 8;
    o->elem_bytes = family == REMAT_GEN_TRANSFORMER ? 2 : 4;
    o->blocks = 3;
    o->depth = 3;
    o->channels = family == REMAT_GEN_UNET ? 16 : 64;
    o->size = family == REMAT_GEN_UNET ? 64 : 32;
    o->in_channels = 3;
    o->classes = family == REMAT_GEN_UNET ? 1 : 10;
    o->seq = 1024;
    o->hidden = 1024;
    o->heads = 16;
    o->vocab = 50257;
    o->tp = 1;
}

char *remat_gen_json(const remat_gen_opts *o, size_t *len, remat_err *err)
{
    gw w;
    remat_buf_init(&w.b);
    w.err = err;
    w.bad = 0;
    if (len)
        *len = 0;
    char name[64];
    switch (o->family) {
    case REMAT_GEN_CHAIN: snprintf(name, sizeof name, "chain%" PRIu32, o->ops); break;
    case REMAT_GEN_LAYERED: snprintf(name, sizeof name, "layered%" PRIu32 "x%" PRIu32, o->width, o->layers); break;
    case REMAT_GEN_RESNET: snprintf(name, sizeof name, "resnet%" PRIu64, (uint64_t)o->blocks * 2 + 2); break;
    case REMAT_GEN_TRANSFORMER: snprintf(name, sizeof name, "transformer%" PRIu32, o->layers); break;
    case REMAT_GEN_UNET: snprintf(name, sizeof name, "unet%" PRIu32, o->depth); break;
    default:
        remat_err_set(err, REMAT_EINVAL, "unknown generator family %d", (int)o->family);
        return NULL;
    }
    /* The size limit (gen.h). chain, layered and transformer check it
     * with their other options; resnet and unet here, from their closed
     * forms for the op count (remat gen --help), before anything is written. */
    uint64_t ops = o->family == REMAT_GEN_RESNET ? (uint64_t)o->blocks * 7 + 8
                   : o->family == REMAT_GEN_UNET ? (uint64_t)o->depth * 11 + 6
                                                 : 0;
    if (ops > REMAT_GEN_MAX_OPS) {
        remat_err_set(err, REMAT_EINVAL, "%s: %" PRIu64 " ops is out of range (at most %u ops, about 1.4 GB of JSON)",
                      o->family == REMAT_GEN_RESNET ? "`blocks`" : "`depth`", ops, (unsigned)REMAT_GEN_MAX_OPS);
        return NULL;
    }
    const char *nm = o->name ? o->name : name;
    switch (o->family) {
    case REMAT_GEN_CHAIN: gen_chain(&w, o, nm); break;
    case REMAT_GEN_LAYERED: gen_layered(&w, o, nm); break;
    case REMAT_GEN_RESNET: remat__gen_resnet(&w, o, nm); break;
    case REMAT_GEN_TRANSFORMER: remat__gen_transformer(&w, o, nm); break;
    case REMAT_GEN_UNET: remat__gen_unet(&w, o, nm); break;
    }
    if (w.bad) {
        remat_buf_destroy(&w.b);
        return NULL;
    }
    if (w.b.failed || !w.b.data) {
        remat_buf_destroy(&w.b);
        remat_err_set(err, REMAT_ENOMEM, "out of memory generating a %s graph", remat_gen_family_name(o->family));
        return NULL;
    }
    if (len)
        *len = w.b.len;
    /* Doubling leaves up to half the buffer unused; give it back. */
    char *fit = remat__realloc(w.b.data, w.b.len + 1);
    return fit ? fit : w.b.data;
}

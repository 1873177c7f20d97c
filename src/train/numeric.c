/*
 * numeric.c - numeric replay: run a schedule on real buffers and prove it.
 *
 * The buffers, their lifetimes, the recomputation check and the allocator
 * that is compared with the accounted peak are engine.c's, shared with the
 * real training step (train.c); this file supplies the kernels (engine
 * hooks) and the parameter-gradient hash.
 *
 * Kernels are deterministic and keyed: BLAKE2b over a domain string, the op
 * id and every input byte gives a digest; each output's bytes are a
 * counter-mode stream seeded by that digest and the output's index. So a
 * recomputation reproduces its first computation exactly, and any change in
 * what an op reads (a wrong buffer, a stale byte, another op's output) shows
 * up in its digest and in everything downstream, ending in the parameter
 * gradients. Backward contributions are added byte-wise with wraparound,
 * which commutes, so the order in which a gradient's contributions arrive
 * cannot change it.
 */
#define _POSIX_C_SOURCE 200809L

#include "numeric_internal.h"
#include "engine.h"
#include "../util/hash.h"
#include "../util/util_internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define DIGEST REMAT_ENGINE_DIGEST

typedef struct {
    uint64_t k[4];
} stream_key;

/* The kernels' context: the engine (engine.c) owns the buffers. */
typedef struct {
    const remat__numeric_faults *faults; /* NULL outside tests */
} numeric;

/* ---- hashing and the keyed stream ------------------------------------------ */

static void absorb_u64(remat_blake2b *S, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    remat__blake2b_update(S, b, sizeof b);
}

/* Length-prefixed, so that consecutive strings cannot run into each other. */
static void absorb_str(remat_blake2b *S, const char *s)
{
    size_t n = strlen(s);
    absorb_u64(S, n);
    remat__blake2b_update(S, s, n);
}

static void absorb_bytes(remat_blake2b *S, const uint8_t *p, uint64_t n)
{
    absorb_u64(S, n);
    remat__blake2b_update(S, p, (size_t)n);
}

static void hash_begin(remat_blake2b *S, const char *domain)
{
    (void)remat__blake2b_init(S, DIGEST, NULL, 0); /* DIGEST is in range: cannot fail */
    absorb_str(S, domain);
}

/* seed = H(d || index): one stream per output or per gradient contribution. */
static stream_key derive_key(const uint8_t d[DIGEST], uint64_t index)
{
    remat_blake2b S;
    uint8_t seed[DIGEST];
    hash_begin(&S, "remat-stream");
    remat__blake2b_update(&S, d, DIGEST);
    absorb_u64(&S, index);
    remat__blake2b_final(&S, seed);
    stream_key K;
    for (int i = 0; i < 4; i++) {
        K.k[i] = 0;
        for (int j = 7; j >= 0; j--)
            K.k[i] = (K.k[i] << 8) | seed[8 * i + j];
    }
    return K;
}

/* SplitMix64's finalizer: a bijection on 64 bits with full avalanche. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Word j of the stream: every key word takes part, and distinct j give
 * distinct words (mix64 is a bijection). The seed is strong; the stream only
 * has to spread it over the buffer. */
static uint64_t stream_word(const stream_key *K, uint64_t j)
{
    uint64_t x = mix64(j ^ K->k[0]) + K->k[1];
    return mix64(x ^ K->k[2]) + K->k[3];
}

/* The stream's bytes are the words in little-endian order on every host. */
static uint64_t to_le(uint64_t w)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    return w;
}

/* Eight independent byte additions mod 256 in one word. */
static uint64_t add_bytes(uint64_t x, uint64_t y)
{
    const uint64_t lo = 0x7F7F7F7F7F7F7F7FULL, hi = 0x8080808080808080ULL;
    return ((x & lo) + (y & lo)) ^ ((x ^ y) & hi);
}

/* Writes (add = 0) or adds (add = 1) stream bytes [8*j0, 8*j0 + n) into p. */
static void stream_apply(const stream_key *K, uint64_t j0, uint8_t *p, size_t n, int add)
{
    size_t words = n / 8;
    for (size_t j = 0; j < words; j++) {
        uint64_t w = to_le(stream_word(K, j0 + j));
        if (add) {
            uint64_t b;
            memcpy(&b, p + 8 * j, 8);
            w = add_bytes(b, w);
        }
        memcpy(p + 8 * j, &w, 8);
    }
    if (n % 8) {
        uint64_t w = stream_word(K, j0 + words);
        for (size_t r = 0; r < n % 8; r++) {
            uint8_t v = (uint8_t)(w >> (8 * r));
            uint8_t *q = p + 8 * words + r;
            *q = add ? (uint8_t)(*q + v) : v;
        }
    }
}

/* ---- the kernels: engine hooks ------------------------------------------------ */

static remat_status fill_leaf(void *ctx, remat__engine *E, uint32_t t, uint8_t *buf, uint64_t len)
{
    (void)ctx;
    const remat_tensor *T = &E->g->tensors[t];
    remat_blake2b S;
    uint8_t d[DIGEST];
    hash_begin(&S, "remat-leaf");
    absorb_str(&S, remat_tensor_kind_str(T->kind));
    absorb_str(&S, T->id);
    remat__blake2b_final(&S, d);
    stream_key K = derive_key(d, 0);
    stream_apply(&K, 0, buf, (size_t)len, 0);
    return REMAT_OK;
}

/* Each output's bytes are the stream keyed by the digest of the op id and
 * every input byte and by the output's index. A rebuilt base whose storage
 * a view kept alive (mark 2) gets the same bytes written again; the engine
 * hashes both kinds and compares. */
static remat_status forward(void *ctx, remat__engine *E, uint32_t k, int recompute, uint8_t *ws, uint64_t ws_len)
{
    numeric *N = ctx;
    const remat_graph *g = E->g;
    const remat_op *op = &g->ops[k];
    const uint32_t *inp = remat_op_inputs(g, op), *outp = remat_op_outputs(g, op);
    (void)recompute, (void)ws, (void)ws_len; /* the workspace's contents never reach an output */
    remat_blake2b S;
    uint8_t d[DIGEST];
    hash_begin(&S, "remat-fwd");
    absorb_str(&S, op->id);
    absorb_u64(&S, op->n_in);
    for (uint32_t i = 0; i < op->n_in; i++)
        absorb_bytes(&S, E->buf[g->tensors[inp[i]].storage], remat__engine_storage_len(E, inp[i]));
    remat__blake2b_final(&S, d);
    for (uint32_t j = 0; j < op->n_out; j++) {
        uint32_t t = outp[j];
        if (!E->mark[t] || g->tensors[t].storage != t)
            continue; /* views own no bytes */
        stream_key K = derive_key(d, j);
        size_t len = (size_t)remat__engine_storage_len(E, t);
        stream_apply(&K, 0, E->buf[t], len, 0);
        if (E->mark[t] == 1 && N->faults && N->faults->tamper)
            N->faults->tamper(N->faults->ctx, E->index, E->in, t, E->buf[t], len);
    }
    return REMAT_OK;
}

/* The loss's gradient: a fixed stream per output tensor. */
static remat_status seed(void *ctx, remat__engine *E, uint32_t t, uint8_t *buf, uint64_t len)
{
    (void)ctx;
    remat_blake2b S;
    uint8_t d[DIGEST];
    hash_begin(&S, "remat-seed");
    absorb_str(&S, E->g->tensors[t].id);
    remat__blake2b_final(&S, d);
    stream_key K = derive_key(d, 0);
    stream_apply(&K, 0, buf, (size_t)len, 0);
    return REMAT_OK;
}

/* Each distinct differentiable input gets one contribution, keyed by its
 * first slot, written (mark 2) or added byte-wise (mark 1). */
static remat_status backward(void *ctx, remat__engine *E, uint32_t k, uint8_t *ws, uint64_t ws_len)
{
    (void)ctx, (void)ws, (void)ws_len;
    const remat_graph *g = E->g;
    const remat_op *op = &g->ops[k];
    const uint32_t *inp = remat_op_inputs(g, op), *outp = remat_op_outputs(g, op), *sv = remat_op_saves(g, op);
    remat_blake2b S;
    uint8_t d[DIGEST];
    hash_begin(&S, "remat-bwd");
    absorb_str(&S, op->id);
    absorb_u64(&S, op->n_out);
    for (uint32_t j = 0; j < op->n_out; j++) {
        uint32_t t = outp[j];
        absorb_u64(&S, E->grad[t] != NULL);
        if (E->grad[t])
            absorb_bytes(&S, E->grad[t], remat__engine_grad_len(E, t));
    }
    absorb_u64(&S, op->n_save);
    for (uint32_t i = 0; i < op->n_save; i++)
        absorb_bytes(&S, E->buf[g->tensors[sv[i]].storage], remat__engine_storage_len(E, sv[i]));
    remat__blake2b_final(&S, d);
    for (uint32_t i = 0; i < op->n_in; i++) {
        uint32_t t = inp[i];
        if (!E->mark[t])
            continue;
        stream_key K = derive_key(d, i);
        stream_apply(&K, 0, E->grad[t], (size_t)remat__engine_grad_len(E, t), E->mark[t] == 1);
        E->mark[t] = 0;
    }
    return REMAT_OK;
}

static remat_status hash_param_grads(remat__engine *E, remat_numeric_result *out)
{
    const remat_graph *g = E->g;
    remat_blake2b S;
    hash_begin(&S, "remat-param-grads");
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        if (g->tensors[t].kind != REMAT_TENSOR_PARAM)
            continue;
        if (!E->grad[t]) {
            if (E->a->grad_flows[t])
                return remat__engine_broken(E, "param '%s' has no gradient at the end", g->tensors[t].id);
            continue;
        }
        absorb_str(&S, g->tensors[t].id);
        absorb_bytes(&S, E->grad[t], remat__engine_grad_len(E, t));
        out->param_grads_hashed++;
    }
    remat__blake2b_final(&S, out->param_grad_hash);
    remat__hex(out->param_grad_hash, DIGEST, out->param_grad_hash_hex);
    return REMAT_OK;
}

/* ---- the run, the result ------------------------------------------------------ */

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

remat_status remat__numeric_replay_faulty(const remat_analysis *a, const remat_schedule *s, uint64_t scale,
                                          const remat__numeric_faults *faults, remat_numeric_result *out,
                                          remat_err *err)
{
    memset(out, 0, sizeof *out);
    out->scale = scale;
    remat_err local;
    remat_err_init(&local);
    if (!err)
        err = &local;
    if (scale == 0)
        return remat_err_set(err, REMAT_EINVAL, "numeric replay: the scale must be at least 1");
    uint64_t accounted;
    remat_status st = remat__engine_judge(a, s, NULL, scale, &out->replay, &accounted, err);
    if (st != REMAT_OK || !out->replay.valid)
        return st;
    out->accounted_peak_bytes_scaled = accounted;

    numeric N = {faults};
    const remat__engine_hooks hooks = {&N, NULL, fill_leaf, forward, seed, backward, NULL};
    remat__engine E;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    st = remat__engine_init(&E, a, scale, "numeric replay", &hooks, err);
    if (st == REMAT_OK && faults) {
        E.overallocate_at = faults->overallocate_at;
        E.overallocate_bytes = faults->overallocate_bytes;
    }
    if (st == REMAT_OK)
        st = remat__engine_run(&E, s);
    if (st == REMAT_OK) {
        E.index = s->n;
        E.in = (remat_instr){REMAT_I_OPT, 0};
        st = hash_param_grads(&E, out);
    }
    out->recomputed_tensors_checked = E.recomputed_checked;
    out->mismatches = E.mismatches;
    out->first_mismatch_index = E.first_mismatch_index;
    out->first_mismatch_tensor = E.first_mismatch_tensor;
    uint64_t high = E.high;
    remat__engine_destroy(&E);
    out->wall_seconds = seconds_since(&t0);
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0 && ru.ru_maxrss > 0)
        out->peak_rss_bytes = (uint64_t)ru.ru_maxrss * 1024; /* Linux reports KiB */
    if (st != REMAT_OK)
        return st;
    out->ran = true;
    out->allocator_peak_bytes = high;
    /* At scale 1 the allocator answers to remat_replay's own peak as well:
     * the scaled rule above is derived from its allocation events, so only
     * this comparison would notice the replay counting bytes that no
     * allocation holds. */
    out->equal = high == accounted && (scale != 1 || high == out->replay.peak_bytes);
    if (high != accounted)
        remat_err_set(err, REMAT_EINTERNAL,
                      "numeric replay: the allocator's high-water mark %llu B differs from the accounted peak "
                      "%llu B at scale %llu",
                      (unsigned long long)high, (unsigned long long)accounted, (unsigned long long)scale);
    else if (!out->equal) {
        char text[160];
        size_t at = out->replay.peak_index;
        remat_instr pin = at < s->n ? s->ins[at] : (remat_instr){REMAT_I_OPT, 0};
        remat_err_set(err, REMAT_EINTERNAL,
                      "numeric replay: the allocator's high-water mark %llu B differs from the replayed peak %llu B "
                      "(instruction %zu, %s)",
                      (unsigned long long)high, (unsigned long long)out->replay.peak_bytes, at,
                      remat_instr_text(a->g, pin, text, sizeof text));
    }
    out->verified = out->mismatches == 0 && out->equal;
    return REMAT_OK;
}

remat_status remat_numeric_replay(const remat_analysis *a, const remat_schedule *s, uint64_t scale,
                                  remat_numeric_result *out, remat_err *err)
{
    return remat__numeric_replay_faulty(a, s, scale, NULL, out, err);
}

void remat_numeric_result_destroy(remat_numeric_result *out)
{
    if (!out)
        return;
    remat_replay_result_destroy(&out->replay);
}

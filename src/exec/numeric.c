/*
 * numeric.c - numeric replay: run a schedule on real buffers and prove it.
 *
 * The accounting replay (replay.c) says what a schedule would hold; this
 * file holds it. Two passes. The first is remat_replay itself, with an
 * observer that re-adds every allocation at its scaled size: it judges the
 * schedule (nothing invalid is executed) and yields the scaled accounted
 * peak. The second walks the schedule with its own state (dense arrays by
 * tensor id, as in replay.c) and its own allocator: one buffer per live
 * storage, one per live gradient, one per running op's workspace, each
 * counted at the size it was malloc'd with. The allocator's high-water mark
 * is then compared with the accounted one: two independent implementations
 * of the lifetime rules that must agree to the byte.
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
#include "../util/hash.h"
#include "../util/util_internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define DIGEST 32
/* Stack chunk for hashing a stream without a buffer; a multiple of 8 so
 * chunked generation matches whole-buffer generation word for word. */
#define STREAM_CHUNK 4096

/* The scaled accounting: remat_replay's allocation events, each rounded up
 * to the numeric buffer size. */
typedef struct {
    uint64_t scale, live, high;
} scaled_acct;

typedef struct {
    uint64_t k[4];
} stream_key;

typedef struct {
    const remat_analysis *a;
    const remat_graph *g;
    uint64_t scale;
    const remat__numeric_faults *faults; /* NULL outside tests */
    remat_numeric_result *out;
    remat_err *err;
    uint8_t **buf;   /* storage -> its buffer while any member is resident */
    uint8_t **grad;  /* tensor -> its gradient buffer while live */
    uint32_t *cnt;   /* storage -> resident members (a base and its views) */
    uint8_t *res;    /* tensor resident */
    uint8_t *mark;   /* per instruction scratch, always cleared again (see do_forward, do_backward) */
    uint8_t *digest; /* tensor -> DIGEST bytes: its first computation */
    uint64_t live, high;
    size_t index;    /* current instruction; SIZE_MAX while placing leaves */
    remat_instr in;
    int seeded;
} numeric;

/* ---- sizes and the allocator ---------------------------------------------- */

static uint64_t scaled(uint64_t bytes, uint64_t scale)
{
    return bytes / scale + (bytes % scale != 0);
}

static const char *where(const numeric *N, char *buf, size_t cap)
{
    char text[160];
    if (N->index == SIZE_MAX)
        snprintf(buf, cap, "placing inputs and params");
    else
        snprintf(buf, cap, "instruction %zu (%s)", N->index, remat_instr_text(N->g, N->in, text, sizeof text));
    return buf;
}

/* Allocates bytes for `what` of tensor t; the allocator's live count and
 * high-water mark move with every buffer, at the size requested. */
static remat_status n_alloc(numeric *N, uint64_t bytes, uint8_t **p, const char *what, uint32_t t)
{
    char w[256];
    uint64_t live;
    if (!remat_u64_add(N->live, bytes, &live))
        return remat_err_set(N->err, REMAT_EOVERFLOW, "numeric replay: %s: live bytes exceed 2^64-1",
                             where(N, w, sizeof w));
    *p = bytes <= SIZE_MAX ? remat__malloc((size_t)bytes) : NULL;
    if (!*p)
        return remat_err_set(N->err, REMAT_ENOMEM,
                             "numeric replay: %s: cannot allocate %llu B for %s '%s' (a larger --scale divides "
                             "every buffer)",
                             where(N, w, sizeof w), (unsigned long long)bytes, what,
                             t == REMAT_NONE ? "?" : N->g->tensors[t].id);
    N->live = live;
    if (live > N->high)
        N->high = live;
    return REMAT_OK;
}

static void n_free(numeric *N, uint8_t **p, uint64_t bytes)
{
    remat__free(*p);
    *p = NULL;
    N->live -= bytes;
}

static remat_status broken(numeric *N, const char *fmt, const char *id)
{
    char w[256], why[256];
    snprintf(why, sizeof why, fmt, id);
    return remat_err_set(N->err, REMAT_EINTERNAL, "numeric replay: %s: %s", where(N, w, sizeof w), why);
}

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

/* The digest of the stream's first n bytes, generated in stack chunks: what
 * hashing a buffer filled by stream_apply would give, without the buffer. */
static void stream_digest(const stream_key *K, uint64_t n, uint8_t d[DIGEST])
{
    uint8_t chunk[STREAM_CHUNK];
    remat_blake2b S;
    (void)remat__blake2b_init(&S, DIGEST, NULL, 0);
    for (uint64_t off = 0; off < n; off += STREAM_CHUNK) {
        size_t len = n - off < STREAM_CHUNK ? (size_t)(n - off) : STREAM_CHUNK;
        stream_apply(K, off / 8, chunk, len, 0);
        remat__blake2b_update(&S, chunk, len);
    }
    remat__blake2b_final(&S, d);
}

/* The scaled workspace of the current instruction, plus an injected
 * overallocation in tests. */
static uint64_t workspace_len(const numeric *N, uint64_t bytes)
{
    uint64_t len = scaled(bytes, N->scale);
    if (N->faults && N->faults->overallocate_at == N->index + 1)
        len += N->faults->overallocate_bytes;
    return len;
}

/* A transient workspace: allocated, touched (so it is really resident, as
 * the RSS figure assumes), freed by the caller when the op is done. Its
 * contents never reach an output. */
static remat_status with_workspace(numeric *N, uint64_t bytes, uint8_t **ws)
{
    *ws = NULL;
    remat_status st = n_alloc(N, workspace_len(N, bytes), ws, "the workspace of", REMAT_NONE);
    if (st == REMAT_OK)
        memset(*ws, 0xA5, (size_t)workspace_len(N, bytes));
    return st;
}

/* ---- instructions ----------------------------------------------------------- */

static uint64_t storage_len(const numeric *N, uint32_t t)
{
    return scaled(N->g->tensors[N->g->tensors[t].storage].bytes, N->scale);
}

static uint64_t grad_len(const numeric *N, uint32_t t)
{
    return scaled(N->g->tensors[t].logical_bytes, N->scale);
}

static void mismatch(numeric *N, uint32_t t, const uint8_t now[DIGEST])
{
    remat_numeric_result *o = N->out;
    if (o->mismatches++ == 0) {
        char w[256], h1[2 * DIGEST + 1], h2[2 * DIGEST + 1];
        o->first_mismatch_index = N->index;
        o->first_mismatch_tensor = t;
        remat_err_set(N->err, REMAT_EINTERNAL,
                      "numeric replay: %s: recomputed tensor '%s' differs from its first computation "
                      "(BLAKE2b-256 %.16s... now, %.16s... first)",
                      where(N, w, sizeof w), N->g->tensors[t].id, remat__hex(now, DIGEST, h1),
                      remat__hex(N->digest + (size_t)t * DIGEST, DIGEST, h2));
    }
}

/* mark[t] during a forward step: 1 = fresh output in a new buffer, 2 =
 * fresh output whose storage a resident view kept alive (no new buffer). */
static remat_status do_forward(numeric *N, uint32_t k, int recompute)
{
    const remat_graph *g = N->g;
    const remat_op *op = &g->ops[k];
    const uint32_t *inp = remat_op_inputs(g, op), *outp = remat_op_outputs(g, op);
    for (uint32_t i = 0; i < op->n_in; i++)
        if (!N->res[inp[i]] || !N->buf[g->tensors[inp[i]].storage])
            return broken(N, "input '%s' has no buffer", g->tensors[inp[i]].id);
    remat_status st;
    for (uint32_t j = 0; j < op->n_out; j++) {
        uint32_t t = outp[j], s = g->tensors[t].storage;
        if (N->res[t])
            continue; /* a RECOMPUTE rebuilds only what is missing */
        N->res[t] = 1;
        N->mark[t] = 2;
        if (N->cnt[s]++ > 0)
            continue;
        if (s != t)
            return broken(N, "view '%s' has no live base", g->tensors[t].id);
        N->mark[t] = 1;
        if ((st = n_alloc(N, storage_len(N, t), &N->buf[t], "tensor", t)) != REMAT_OK)
            return st;
    }
    uint8_t *ws;
    if ((st = with_workspace(N, op->workspace, &ws)) != REMAT_OK)
        return st;
    remat_blake2b S;
    uint8_t d[DIGEST], h[DIGEST];
    hash_begin(&S, "remat-fwd");
    absorb_str(&S, op->id);
    absorb_u64(&S, op->n_in);
    for (uint32_t i = 0; i < op->n_in; i++)
        absorb_bytes(&S, N->buf[g->tensors[inp[i]].storage], storage_len(N, inp[i]));
    remat__blake2b_final(&S, d);
    for (uint32_t j = 0; j < op->n_out; j++) {
        uint32_t t = outp[j];
        uint8_t m = N->mark[t];
        N->mark[t] = 0;
        if (!m || g->tensors[t].storage != t)
            continue; /* views own no bytes: their base is checked */
        stream_key K = derive_key(d, j);
        uint64_t len = storage_len(N, t);
        if (m == 1) {
            stream_apply(&K, 0, N->buf[t], (size_t)len, 0);
            if (N->faults && N->faults->tamper)
                N->faults->tamper(N->faults->ctx, N->index, N->in, t, N->buf[t], (size_t)len);
            remat__blake2b(h, DIGEST, NULL, 0, N->buf[t], (size_t)len);
        } else {
            stream_digest(&K, len, h);
        }
        if (!recompute) {
            memcpy(N->digest + (size_t)t * DIGEST, h, DIGEST);
        } else {
            N->out->recomputed_tensors_checked++;
            if (memcmp(h, N->digest + (size_t)t * DIGEST, DIGEST) != 0)
                mismatch(N, t, h);
        }
    }
    n_free(N, &ws, workspace_len(N, op->workspace));
    return REMAT_OK;
}

static void free_tensor(numeric *N, uint32_t t)
{
    uint32_t s = N->g->tensors[t].storage;
    N->res[t] = 0;
    if (--N->cnt[s] == 0)
        n_free(N, &N->buf[s], storage_len(N, s));
}

/* The loss's gradient: a fixed stream per output tensor. */
static remat_status seed_gradients(numeric *N)
{
    const remat_graph *g = N->g;
    for (uint32_t i = 0; i < g->n_outputs; i++) {
        uint32_t t = g->outputs[i];
        if (!N->a->grad_flows[t] || N->grad[t])
            continue;
        remat_status st = n_alloc(N, grad_len(N, t), &N->grad[t], "the gradient of", t);
        if (st != REMAT_OK)
            return st;
        remat_blake2b S;
        uint8_t d[DIGEST];
        hash_begin(&S, "remat-seed");
        absorb_str(&S, g->tensors[t].id);
        remat__blake2b_final(&S, d);
        stream_key K = derive_key(d, 0);
        stream_apply(&K, 0, N->grad[t], (size_t)grad_len(N, t), 0);
    }
    return REMAT_OK;
}

/* mark[t] during a backward step: 1 = differentiable input whose gradient
 * exists (add), 2 = whose gradient this step creates (write). Each distinct
 * input gets one contribution, keyed by its first slot, as replay.c counts
 * one contributor per distinct input. */
static remat_status do_backward(numeric *N, uint32_t k)
{
    const remat_analysis *a = N->a;
    const remat_graph *g = N->g;
    const remat_op *op = &g->ops[k];
    const uint32_t *inp = remat_op_inputs(g, op), *outp = remat_op_outputs(g, op), *sv = remat_op_saves(g, op);
    for (uint32_t i = 0; i < op->n_save; i++)
        if (!N->res[sv[i]] || !N->buf[g->tensors[sv[i]].storage])
            return broken(N, "saved tensor '%s' has no buffer", g->tensors[sv[i]].id);
    remat_status st;
    if (!N->seeded) {
        N->seeded = 1;
        if ((st = seed_gradients(N)) != REMAT_OK)
            return st;
    }
    for (uint32_t i = 0; i < op->n_in; i++) {
        uint32_t t = inp[i];
        if (!a->grad_flows[t] || N->mark[t])
            continue;
        N->mark[t] = 1;
        if (N->grad[t])
            continue;
        N->mark[t] = 2;
        if ((st = n_alloc(N, grad_len(N, t), &N->grad[t], "the gradient of", t)) != REMAT_OK)
            return st;
    }
    uint8_t *ws;
    if ((st = with_workspace(N, op->bwd_workspace, &ws)) != REMAT_OK)
        return st;
    remat_blake2b S;
    uint8_t d[DIGEST];
    hash_begin(&S, "remat-bwd");
    absorb_str(&S, op->id);
    absorb_u64(&S, op->n_out);
    for (uint32_t j = 0; j < op->n_out; j++) {
        uint32_t t = outp[j];
        absorb_u64(&S, N->grad[t] != NULL);
        if (N->grad[t])
            absorb_bytes(&S, N->grad[t], grad_len(N, t));
    }
    absorb_u64(&S, op->n_save);
    for (uint32_t i = 0; i < op->n_save; i++)
        absorb_bytes(&S, N->buf[g->tensors[sv[i]].storage], storage_len(N, sv[i]));
    remat__blake2b_final(&S, d);
    for (uint32_t i = 0; i < op->n_in; i++) {
        uint32_t t = inp[i];
        if (!N->mark[t])
            continue;
        stream_key K = derive_key(d, i);
        stream_apply(&K, 0, N->grad[t], (size_t)grad_len(N, t), N->mark[t] == 1);
        N->mark[t] = 0;
    }
    n_free(N, &ws, workspace_len(N, op->bwd_workspace));
    /* The output gradients have been read (replay.c frees them here too). */
    for (uint32_t j = 0; j < op->n_out; j++)
        if (N->grad[outp[j]])
            n_free(N, &N->grad[outp[j]], grad_len(N, outp[j]));
    return REMAT_OK;
}

/* ---- setup, the run, the result --------------------------------------------- */

static remat_status place_leaves(numeric *N)
{
    const remat_graph *g = N->g;
    N->index = SIZE_MAX;
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        const remat_tensor *T = &g->tensors[t];
        if (T->kind == REMAT_TENSOR_ACTIVATION)
            continue;
        N->res[t] = 1;
        N->cnt[t] = 1;
        remat_status st = n_alloc(N, storage_len(N, t), &N->buf[t], remat_tensor_kind_str(T->kind), t);
        if (st != REMAT_OK)
            return st;
        remat_blake2b S;
        uint8_t d[DIGEST];
        hash_begin(&S, "remat-leaf");
        absorb_str(&S, remat_tensor_kind_str(T->kind));
        absorb_str(&S, T->id);
        remat__blake2b_final(&S, d);
        stream_key K = derive_key(d, 0);
        stream_apply(&K, 0, N->buf[t], (size_t)storage_len(N, t), 0);
    }
    return REMAT_OK;
}

static remat_status hash_param_grads(numeric *N)
{
    const remat_graph *g = N->g;
    remat_blake2b S;
    hash_begin(&S, "remat-param-grads");
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        if (g->tensors[t].kind != REMAT_TENSOR_PARAM)
            continue;
        if (!N->grad[t]) {
            if (N->a->grad_flows[t])
                return broken(N, "param '%s' has no gradient at the end", g->tensors[t].id);
            continue;
        }
        absorb_str(&S, g->tensors[t].id);
        absorb_bytes(&S, N->grad[t], grad_len(N, t));
        N->out->param_grads_hashed++;
    }
    remat__blake2b_final(&S, N->out->param_grad_hash);
    remat__hex(N->out->param_grad_hash, DIGEST, N->out->param_grad_hash_hex);
    return REMAT_OK;
}

static remat_status execute(numeric *N, const remat_schedule *s)
{
    remat_status st = place_leaves(N);
    for (size_t i = 0; st == REMAT_OK && i < s->n; i++) {
        N->index = i;
        N->in = s->ins[i];
        switch ((remat_instr_kind)N->in.kind) {
        case REMAT_I_FWD: st = do_forward(N, N->in.arg, 0); break;
        case REMAT_I_RECOMPUTE: st = do_forward(N, N->in.arg, 1); break;
        case REMAT_I_BWD: st = do_backward(N, N->in.arg); break;
        case REMAT_I_FREE: free_tensor(N, N->in.arg); break;
        case REMAT_I_OPT: break; /* no optimizer workspace: the numeric replay has no extras */
        default: st = broken(N, "unknown instruction%s", ""); break;
        }
    }
    if (st == REMAT_OK) {
        N->index = s->n;
        N->in = (remat_instr){REMAT_I_OPT, 0};
        st = hash_param_grads(N);
    }
    return st;
}

static remat_status setup(numeric *N)
{
    size_t nt = N->g->n_tensors ? N->g->n_tensors : 1;
    N->buf = remat__array(nt, sizeof *N->buf);
    N->grad = remat__array(nt, sizeof *N->grad);
    N->cnt = remat__array(nt, sizeof *N->cnt);
    N->res = remat__calloc(nt, 1);
    N->mark = remat__calloc(nt, 1);
    N->digest = remat__array(nt, DIGEST);
    if (!N->buf || !N->grad || !N->cnt || !N->res || !N->mark || !N->digest)
        return remat_err_set(N->err, REMAT_ENOMEM, "out of memory setting up the numeric replay");
    return REMAT_OK;
}

static void teardown(numeric *N)
{
    for (uint32_t t = 0; N->buf && N->grad && t < N->g->n_tensors; t++) {
        remat__free(N->buf[t]);
        remat__free(N->grad[t]);
    }
    remat__free(N->buf);
    remat__free(N->grad);
    remat__free(N->cnt);
    remat__free(N->res);
    remat__free(N->mark);
    remat__free(N->digest);
}

static int acct_alloc(void *ctx, size_t index, uint32_t storage, int grad, remat_category cat, uint64_t bytes)
{
    scaled_acct *A = ctx;
    (void)index, (void)storage, (void)grad, (void)cat;
    A->live += scaled(bytes, A->scale); /* bounded by remat_replay's own checked total */
    if (A->live > A->high)
        A->high = A->live;
    return 0;
}

static int acct_free(void *ctx, size_t index, uint32_t storage, int grad, remat_category cat, uint64_t bytes)
{
    scaled_acct *A = ctx;
    (void)index, (void)storage, (void)grad, (void)cat;
    A->live -= scaled(bytes, A->scale);
    return 0;
}

/* At on_step the step's allocations are made and its frees (except a BWD
 * step's output gradients, released after) are not: for a FREE the live
 * bytes before it were already seen at an earlier step. The step's
 * workspace is transient, so the replay's workspace category at the
 * high-water mark is exactly this step's workspace. */
static int acct_step(void *ctx, size_t index, remat_instr in, uint64_t live_after, uint64_t high_water,
                     const uint64_t *hw_by_category)
{
    scaled_acct *A = ctx;
    (void)index, (void)in, (void)live_after, (void)high_water;
    uint64_t hw = A->live + scaled(hw_by_category[REMAT_CAT_WORKSPACE], A->scale);
    if (hw > A->high)
        A->high = hw;
    return 0;
}

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
    scaled_acct acct = {scale, 0, 0};
    const remat_replay_observer obs = {&acct, acct_alloc, acct_free, acct_step};
    remat_status st = remat_replay(a, s, NULL, &obs, &out->replay, err);
    if (st != REMAT_OK || !out->replay.valid)
        return st;
    out->accounted_peak_bytes_scaled = acct.high;

    numeric N;
    memset(&N, 0, sizeof N);
    N.a = a;
    N.g = a->g;
    N.scale = scale;
    N.faults = faults;
    N.out = out;
    N.err = err;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    st = setup(&N);
    if (st == REMAT_OK)
        st = execute(&N, s);
    teardown(&N);
    out->wall_seconds = seconds_since(&t0);
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0 && ru.ru_maxrss > 0)
        out->peak_rss_bytes = (uint64_t)ru.ru_maxrss * 1024; /* Linux reports KiB */
    if (st != REMAT_OK)
        return st;
    out->ran = true;
    out->allocator_peak_bytes = N.high;
    /* At scale 1 the allocator answers to remat_replay's own peak as well:
     * the scaled rule above is derived from its allocation events, so only
     * this comparison would notice the replay counting bytes that no
     * allocation holds. */
    out->equal = N.high == acct.high && (scale != 1 || N.high == out->replay.peak_bytes);
    if (N.high != acct.high)
        remat_err_set(err, REMAT_EINTERNAL,
                      "numeric replay: the allocator's high-water mark %llu B differs from the accounted peak "
                      "%llu B at scale %llu",
                      (unsigned long long)N.high, (unsigned long long)acct.high, (unsigned long long)scale);
    else if (!out->equal) {
        char text[160];
        size_t at = out->replay.peak_index;
        remat_instr pin = at < s->n ? s->ins[at] : (remat_instr){REMAT_I_OPT, 0};
        remat_err_set(err, REMAT_EINTERNAL,
                      "numeric replay: the allocator's high-water mark %llu B differs from the replayed peak %llu B "
                      "(instruction %zu, %s)",
                      (unsigned long long)N.high, (unsigned long long)out->replay.peak_bytes, at,
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

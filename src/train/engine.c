/*
 * engine.c - walk a schedule on real buffers; kernels are the caller's.
 *
 * The accounting replay (replay.c) says what a schedule would hold; this
 * file holds it. Two passes, as numeric replay introduced them. The first
 * is remat_replay itself (remat__engine_judge), with an observer that
 * re-adds every allocation at its scaled size: it judges the schedule
 * (nothing invalid is executed) and yields the scaled accounted peak. The
 * second walks the schedule with its own state (dense arrays by tensor id,
 * as in replay.c) and its own allocator: one buffer per live storage, one
 * per live gradient, one per running op's workspace, each counted at the
 * size it was allocated with. The caller compares the two high-water marks:
 * two independent implementations of the lifetime rules that must agree to
 * the byte.
 *
 * Every storage-owning output of a forward execution is hashed (BLAKE2b-256)
 * after its kernel ran: the first execution records the digest and every
 * RECOMPUTE must reproduce it. The kernels (numeric.c's keyed streams,
 * train.c's arithmetic) never see residency; they see buffers and marks.
 */
#define _POSIX_C_SOURCE 200809L

#include "engine.h"
#include "../util/hash.h"
#include "../util/util_internal.h"

#include <stdio.h>
#include <string.h>

#define DIGEST REMAT_ENGINE_DIGEST

/* ---- sizes and the allocator ---------------------------------------------- */

static uint64_t scaled(uint64_t bytes, uint64_t scale)
{
    return bytes / scale + (bytes % scale != 0);
}

uint64_t remat__engine_storage_len(const remat__engine *E, uint32_t t)
{
    return scaled(E->g->tensors[E->g->tensors[t].storage].bytes, E->scale);
}

uint64_t remat__engine_grad_len(const remat__engine *E, uint32_t t)
{
    return scaled(E->g->tensors[t].logical_bytes, E->scale);
}

const char *remat__engine_where(const remat__engine *E, char *buf, size_t cap)
{
    char text[160];
    if (E->index == SIZE_MAX)
        snprintf(buf, cap, "placing inputs and params");
    else
        snprintf(buf, cap, "instruction %zu (%s)", E->index, remat_instr_text(E->g, E->in, text, sizeof text));
    return buf;
}

remat_status remat__engine_broken(remat__engine *E, const char *fmt, const char *id)
{
    char w[256], why[256];
    snprintf(why, sizeof why, fmt, id);
    return remat_err_set(E->err, REMAT_EINTERNAL, "%s: %s: %s", E->name, remat__engine_where(E, w, sizeof w), why);
}

static remat_status count_live(remat__engine *E, uint64_t bytes)
{
    char w[256];
    uint64_t live;
    if (!remat_u64_add(E->live, bytes, &live))
        return remat_err_set(E->err, REMAT_EOVERFLOW, "%s: %s: live bytes exceed 2^64-1", E->name,
                             remat__engine_where(E, w, sizeof w));
    E->live = live;
    if (live > E->high)
        E->high = live;
    return REMAT_OK;
}

/* Allocates bytes for `what` of tensor t; the allocator's live count and
 * high-water mark move with every buffer, at the size requested. */
static remat_status e_alloc(remat__engine *E, uint64_t bytes, uint8_t **p, const char *what, uint32_t t)
{
    char w[256];
    uint64_t live;
    if (!remat_u64_add(E->live, bytes, &live))
        return remat_err_set(E->err, REMAT_EOVERFLOW, "%s: %s: live bytes exceed 2^64-1", E->name,
                             remat__engine_where(E, w, sizeof w));
    /* malloc(0) may return NULL; a zero-byte tensor still needs an address. */
    *p = bytes <= SIZE_MAX ? remat__malloc(bytes ? (size_t)bytes : 1) : NULL;
    if (!*p)
        return remat_err_set(E->err, REMAT_ENOMEM,
                             "%s: %s: cannot allocate %llu B for %s '%s' (a larger `scale` divides every buffer)",
                             E->name, remat__engine_where(E, w, sizeof w), (unsigned long long)bytes, what,
                             t == REMAT_NONE ? "?" : E->g->tensors[t].id);
    return count_live(E, bytes);
}

static void e_free(remat__engine *E, uint8_t **p, uint64_t bytes)
{
    remat__free(*p);
    *p = NULL;
    E->live -= bytes;
}

remat_status remat__engine_hold(remat__engine *E, uint64_t bytes)
{
    return count_live(E, bytes);
}

/* The scaled workspace of the current instruction, plus an injected
 * overallocation in tests. */
static uint64_t workspace_len(const remat__engine *E, uint64_t bytes)
{
    uint64_t len = scaled(bytes, E->scale);
    if (E->overallocate_at == E->index + 1)
        len += E->overallocate_bytes;
    return len;
}

/* A transient workspace: allocated, touched (so it is really resident, as
 * an RSS figure assumes), freed by the caller when the op is done. */
static remat_status with_workspace(remat__engine *E, uint64_t bytes, uint8_t **ws)
{
    *ws = NULL;
    remat_status st = e_alloc(E, workspace_len(E, bytes), ws, "the workspace of", REMAT_NONE);
    if (st == REMAT_OK)
        memset(*ws, 0xA5, (size_t)workspace_len(E, bytes));
    return st;
}

/* ---- instructions ----------------------------------------------------------- */

static void mismatch(remat__engine *E, uint32_t t, const uint8_t now[DIGEST])
{
    if (E->mismatches++ == 0) {
        char w[256], h1[2 * DIGEST + 1], h2[2 * DIGEST + 1];
        E->first_mismatch_index = E->index;
        E->first_mismatch_tensor = t;
        remat_err_set(E->err, REMAT_EINTERNAL,
                      "%s: %s: recomputed tensor '%s' differs from its first computation "
                      "(BLAKE2b-256 %.16s... now, %.16s... first)",
                      E->name, remat__engine_where(E, w, sizeof w), E->g->tensors[t].id, remat__hex(now, DIGEST, h1),
                      remat__hex(E->digest + (size_t)t * DIGEST, DIGEST, h2));
    }
}

static remat_status do_forward(remat__engine *E, uint32_t k, int recompute)
{
    const remat_graph *g = E->g;
    const remat_op *op = &g->ops[k];
    const uint32_t *inp = remat_op_inputs(g, op), *outp = remat_op_outputs(g, op);
    for (uint32_t i = 0; i < op->n_in; i++)
        if (!E->res[inp[i]] || !E->buf[g->tensors[inp[i]].storage])
            return remat__engine_broken(E, "input '%s' has no buffer", g->tensors[inp[i]].id);
    remat_status st;
    for (uint32_t j = 0; j < op->n_out; j++) {
        uint32_t t = outp[j], s = g->tensors[t].storage;
        if (E->res[t])
            continue; /* a RECOMPUTE rebuilds only what is missing */
        E->res[t] = 1;
        E->mark[t] = 2;
        if (E->cnt[s]++ > 0)
            continue;
        if (s != t)
            return remat__engine_broken(E, "view '%s' has no live base", g->tensors[t].id);
        E->mark[t] = 1;
        if ((st = e_alloc(E, remat__engine_storage_len(E, t), &E->buf[t], "tensor", t)) != REMAT_OK)
            return st;
    }
    uint8_t *ws;
    if ((st = with_workspace(E, op->workspace, &ws)) != REMAT_OK)
        return st;
    st = E->h->forward(E->h->ctx, E, k, recompute, ws, workspace_len(E, op->workspace));
    for (uint32_t j = 0; st == REMAT_OK && j < op->n_out; j++) {
        uint32_t t = outp[j];
        if (!E->mark[t] || g->tensors[t].storage != t)
            continue; /* views own no bytes: their base is checked */
        uint8_t h[DIGEST];
        remat__blake2b(h, DIGEST, NULL, 0, E->buf[t], (size_t)remat__engine_storage_len(E, t));
        if (!recompute) {
            memcpy(E->digest + (size_t)t * DIGEST, h, DIGEST);
        } else {
            E->recomputed_checked++;
            if (memcmp(h, E->digest + (size_t)t * DIGEST, DIGEST) != 0)
                mismatch(E, t, h);
        }
    }
    for (uint32_t j = 0; j < op->n_out; j++)
        E->mark[outp[j]] = 0;
    e_free(E, &ws, workspace_len(E, op->workspace));
    return st;
}

static void free_tensor(remat__engine *E, uint32_t t)
{
    uint32_t s = E->g->tensors[t].storage;
    E->res[t] = 0;
    if (--E->cnt[s] == 0)
        e_free(E, &E->buf[s], remat__engine_storage_len(E, s));
}

/* The loss's gradient, at the first backward step (as replay.c seeds it). */
static remat_status seed_gradients(remat__engine *E)
{
    const remat_graph *g = E->g;
    for (uint32_t i = 0; i < g->n_outputs; i++) {
        uint32_t t = g->outputs[i];
        if (!E->a->grad_flows[t] || E->grad[t])
            continue;
        remat_status st = e_alloc(E, remat__engine_grad_len(E, t), &E->grad[t], "the gradient of", t);
        if (st == REMAT_OK)
            st = E->h->seed(E->h->ctx, E, t, E->grad[t], remat__engine_grad_len(E, t));
        if (st != REMAT_OK)
            return st;
    }
    return REMAT_OK;
}

static remat_status do_backward(remat__engine *E, uint32_t k)
{
    const remat_analysis *a = E->a;
    const remat_graph *g = E->g;
    const remat_op *op = &g->ops[k];
    const uint32_t *inp = remat_op_inputs(g, op), *outp = remat_op_outputs(g, op), *sv = remat_op_saves(g, op);
    for (uint32_t i = 0; i < op->n_save; i++)
        if (!E->res[sv[i]] || !E->buf[g->tensors[sv[i]].storage])
            return remat__engine_broken(E, "saved tensor '%s' has no buffer", g->tensors[sv[i]].id);
    remat_status st;
    if (!E->seeded) {
        E->seeded = 1;
        if ((st = seed_gradients(E)) != REMAT_OK)
            return st;
    }
    /* One gradient per distinct differentiable input, as replay.c counts
     * one contributor per distinct input. */
    for (uint32_t i = 0; i < op->n_in; i++) {
        uint32_t t = inp[i];
        if (!a->grad_flows[t] || E->mark[t])
            continue;
        E->mark[t] = 1;
        if (E->grad[t])
            continue;
        E->mark[t] = 2;
        if ((st = e_alloc(E, remat__engine_grad_len(E, t), &E->grad[t], "the gradient of", t)) != REMAT_OK) {
            for (uint32_t j = 0; j < op->n_in; j++)
                E->mark[inp[j]] = 0;
            return st;
        }
    }
    uint8_t *ws;
    if ((st = with_workspace(E, op->bwd_workspace, &ws)) == REMAT_OK) {
        st = E->h->backward(E->h->ctx, E, k, ws, workspace_len(E, op->bwd_workspace));
        for (uint32_t i = 0; st == REMAT_OK && i < op->n_in; i++)
            if (E->mark[inp[i]] == 2)
                st = remat__engine_broken(E, "the backward kernel wrote no gradient for '%s'", g->tensors[inp[i]].id);
        e_free(E, &ws, workspace_len(E, op->bwd_workspace));
    }
    for (uint32_t i = 0; i < op->n_in; i++)
        E->mark[inp[i]] = 0;
    if (st != REMAT_OK)
        return st;
    /* The output gradients have been read (replay.c frees them here too). */
    for (uint32_t j = 0; j < op->n_out; j++)
        if (E->grad[outp[j]])
            e_free(E, &E->grad[outp[j]], remat__engine_grad_len(E, outp[j]));
    return REMAT_OK;
}

/* ---- setup, the run --------------------------------------------------------- */

static remat_status place_leaves(remat__engine *E)
{
    const remat_graph *g = E->g;
    E->index = SIZE_MAX;
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        const remat_tensor *T = &g->tensors[t];
        if (T->kind == REMAT_TENSOR_ACTIVATION)
            continue;
        E->res[t] = 1;
        E->cnt[t] = 1;
        uint64_t len = remat__engine_storage_len(E, t);
        uint8_t *ext = E->h->leaf_buffer ? E->h->leaf_buffer(E->h->ctx, E, t, len) : NULL;
        remat_status st;
        if (ext) {
            E->buf[t] = ext;
            st = count_live(E, len);
        } else {
            E->owned[t] = 1;
            st = e_alloc(E, len, &E->buf[t], remat_tensor_kind_str(T->kind), t);
            if (st == REMAT_OK)
                st = E->h->fill_leaf(E->h->ctx, E, t, E->buf[t], len);
        }
        if (st != REMAT_OK)
            return st;
    }
    return REMAT_OK;
}

remat_status remat__engine_run(remat__engine *E, const remat_schedule *s)
{
    remat_status st = place_leaves(E);
    int opt_done = 0;
    for (size_t i = 0; st == REMAT_OK && i < s->n; i++) {
        E->index = i;
        E->in = s->ins[i];
        switch ((remat_instr_kind)E->in.kind) {
        case REMAT_I_FWD: st = do_forward(E, E->in.arg, 0); break;
        case REMAT_I_RECOMPUTE: st = do_forward(E, E->in.arg, 1); break;
        case REMAT_I_BWD: st = do_backward(E, E->in.arg); break;
        case REMAT_I_FREE: free_tensor(E, E->in.arg); break;
        case REMAT_I_OPT:
            opt_done = 1;
            if (E->h->opt)
                st = E->h->opt(E->h->ctx, E);
            break;
        default: st = remat__engine_broken(E, "unknown instruction%s", ""); break;
        }
    }
    if (st == REMAT_OK && !opt_done) {
        /* No OPT instruction: the optimizer step is implied at the end. */
        E->index = s->n;
        E->in = (remat_instr){REMAT_I_OPT, 0};
        if (E->h->opt)
            st = E->h->opt(E->h->ctx, E);
    }
    return st;
}

remat_status remat__engine_init(remat__engine *E, const remat_analysis *a, uint64_t scale, const char *name,
                                const remat__engine_hooks *h, remat_err *err)
{
    memset(E, 0, sizeof *E);
    E->a = a;
    E->g = a->g;
    E->scale = scale ? scale : 1;
    E->name = name;
    E->h = h;
    E->err = err;
    size_t nt = E->g->n_tensors ? E->g->n_tensors : 1;
    E->buf = remat__array(nt, sizeof *E->buf);
    E->grad = remat__array(nt, sizeof *E->grad);
    E->cnt = remat__array(nt, sizeof *E->cnt);
    E->res = remat__calloc(nt, 1);
    E->mark = remat__calloc(nt, 1);
    E->owned = remat__calloc(nt, 1);
    E->digest = remat__array(nt, DIGEST);
    if (!E->buf || !E->grad || !E->cnt || !E->res || !E->mark || !E->owned || !E->digest)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory setting up the %s", name);
    return REMAT_OK;
}

void remat__engine_destroy(remat__engine *E)
{
    if (!E)
        return;
    for (uint32_t t = 0; E->buf && E->grad && E->owned && t < E->g->n_tensors; t++) {
        /* Leaves the caller lent are not ours; everything else is. */
        if (E->g->tensors[t].kind == REMAT_TENSOR_ACTIVATION || E->owned[t])
            remat__free(E->buf[t]);
        remat__free(E->grad[t]);
    }
    remat__free(E->buf);
    remat__free(E->grad);
    remat__free(E->cnt);
    remat__free(E->res);
    remat__free(E->mark);
    remat__free(E->owned);
    remat__free(E->digest);
    memset(E, 0, sizeof *E);
}

/* ---- the judge and the scaled accounting ------------------------------------ */

typedef struct {
    uint64_t scale, live, high;
    uint64_t held_workspace; /* extras.workspace: resident all step, in the workspace category */
} scaled_acct;

static int acct_alloc(void *ctx, size_t index, uint32_t storage, int grad, remat_category cat, uint64_t bytes)
{
    scaled_acct *A = ctx;
    (void)index, (void)grad;
    if (cat == REMAT_CAT_WORKSPACE && storage == REMAT_NONE)
        A->held_workspace += bytes;
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
 * high-water mark is this step's workspace plus the workspace the extras
 * hold for the whole step (already in live, from its allocation event). */
static int acct_step(void *ctx, size_t index, remat_instr in, uint64_t live_after, uint64_t high_water,
                     const uint64_t *hw_by_category)
{
    scaled_acct *A = ctx;
    (void)index, (void)in, (void)live_after, (void)high_water;
    uint64_t hw = A->live + scaled(hw_by_category[REMAT_CAT_WORKSPACE] - A->held_workspace, A->scale);
    if (hw > A->high)
        A->high = hw;
    return 0;
}

remat_status remat__engine_judge(const remat_analysis *a, const remat_schedule *s, const remat_exec_extras *extras,
                                 uint64_t scale, remat_replay_result *r, uint64_t *accounted_scaled, remat_err *err)
{
    scaled_acct acct = {scale ? scale : 1, 0, 0, 0};
    const remat_replay_observer obs = {&acct, acct_alloc, acct_free, acct_step};
    remat_status st = remat_replay(a, s, extras, &obs, r, err);
    *accounted_scaled = acct.high;
    return st;
}

/*
 * check_analyze_random.c - the analyzer against a model of random DAGs: the
 * lifetime invariants hold on every graph, and the generator covers the
 * features it is meant to (views, multi-output ops, late saves, ops without
 * a backward step). Part of the "analyze" suite (check_analyze.c builds it).
 */
#include "check_analyze.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- invariants over random DAGs ---------------------------------------
 *
 * Each graph is built here from a seeded PRNG as a model (arrays below),
 * written out as JSON, loaded and analyzed. The expectations come from the
 * model by brute force: fixed-point iteration for "needs a gradient" and
 * "reaches an output", full scans for every use. Nothing here calls the
 * analyzer's helpers. */

#define RG_OPS 96
#define RG_T (8 + 3 * RG_OPS)
#define RG_IN 4
#define RG_SAVE 8

typedef struct {
    uint32_t n_t, n_ops, n_leaf;
    char tid[RG_T][32];
    int is_leaf[RG_T], wants_grad[RG_T]; /* declared: trainable param or input with requires_grad */
    int is_param[RG_T];
    uint32_t producer[RG_T], alias[RG_T];
    uint64_t bytes[RG_T];
    char oid[RG_OPS][32];
    uint32_t n_in[RG_OPS], in[RG_OPS][RG_IN];
    uint32_t n_out[RG_OPS], out[RG_OPS][3];
    int multi[RG_OPS];
    int saves_given[RG_OPS]; /* 0: default (distinct inputs) */
    uint32_t n_save[RG_OPS], save[RG_OPS][RG_SAVE];
    uint32_t n_outputs, outputs[3];
    uint32_t file_order[RG_OPS];
    int shuffled;
} rgraph;

static uint64_t rng_next(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint32_t rng_below(uint64_t *s, uint32_t n)
{
    return (uint32_t)(rng_next(s) % n);
}

static int contains(const uint32_t *v, uint32_t n, uint32_t x)
{
    for (uint32_t i = 0; i < n; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

/* A tensor that exists before op k: mostly a recent one (deep chains),
 * sometimes any (long skips). */
static uint32_t pick_existing(uint64_t *s, const rgraph *m)
{
    if (m->n_t > 6 && rng_below(s, 10) < 7)
        return m->n_t - 1 - rng_below(s, 6);
    return rng_below(s, m->n_t);
}

static uint32_t new_tensor(rgraph *m, const char *id, uint32_t producer, uint32_t alias, uint64_t bytes)
{
    uint32_t t = m->n_t++;
    snprintf(m->tid[t], sizeof m->tid[t], "%s", id);
    m->producer[t] = producer;
    m->alias[t] = alias;
    m->bytes[t] = bytes;
    return t;
}

static void rgraph_build(rgraph *m, uint64_t seed)
{
    uint64_t s = seed;
    memset(m, 0, sizeof *m);
    uint32_t n_in = 1 + rng_below(&s, 3), n_par = 1 + rng_below(&s, 4);
    for (uint32_t i = 0; i < n_in + n_par; i++) {
        char id[32];
        snprintf(id, sizeof id, "%s%u", i < n_in ? "in" : "p", i);
        uint32_t t = new_tensor(m, id, NONE, NONE, 1 + rng_below(&s, 4096));
        m->is_leaf[t] = 1;
        m->is_param[t] = i >= n_in;
        /* Inputs: 30% requires_grad; params: 70% trainable. */
        m->wants_grad[t] = i < n_in ? rng_below(&s, 10) < 3 : rng_below(&s, 10) < 7;
    }
    m->n_leaf = m->n_t;
    m->n_ops = 1 + rng_below(&s, RG_OPS);
    for (uint32_t k = 0; k < m->n_ops; k++) {
        uint32_t kind = rng_below(&s, 20); /* 0-2 view, 3-5 multi-output, else plain */
        if (kind < 3) {
            uint32_t base = pick_existing(&s, m);
            snprintf(m->oid[k], sizeof m->oid[k], "v%u", k);
            m->n_in[k] = 1;
            m->in[k][0] = base;
            m->n_out[k] = 1;
            m->out[k][0] = new_tensor(m, m->oid[k], k, base, 0);
        } else {
            m->n_in[k] = 1 + rng_below(&s, RG_IN);
            for (uint32_t i = 0; i < m->n_in[k]; i++)
                m->in[k][i] = pick_existing(&s, m); /* repeats allowed: mul(x, x) */
            if (kind < 6) {
                m->multi[k] = 1;
                snprintf(m->oid[k], sizeof m->oid[k], "m%u", k);
                m->n_out[k] = 2 + rng_below(&s, 2);
                for (uint32_t j = 0; j < m->n_out[k]; j++) {
                    char id[32];
                    snprintf(id, sizeof id, "m%u_%u", k, j);
                    /* Now and then one output is a view of an input. */
                    uint32_t al = j == 1 && rng_below(&s, 3) == 0 ? m->in[k][rng_below(&s, m->n_in[k])] : NONE;
                    m->out[k][j] = new_tensor(m, id, k, al, al == NONE ? rng_below(&s, 5000) : 0);
                }
            } else {
                snprintf(m->oid[k], sizeof m->oid[k], "o%u", k);
                m->n_out[k] = 1;
                m->out[k][0] = new_tensor(m, m->oid[k], k, NONE, rng_below(&s, 5000));
            }
        }
        m->file_order[k] = k;
    }
    /* Saves, chosen once every tensor exists: default, none, own outputs,
     * inputs and outputs, or any tensors at all (even later ones). */
    for (uint32_t k = 0; k < m->n_ops; k++) {
        uint32_t mode = rng_below(&s, 5);
        m->saves_given[k] = mode != 0;
        m->n_save[k] = 0;
        if (mode == 0) {
            for (uint32_t i = 0; i < m->n_in[k]; i++)
                if (!contains(m->save[k], m->n_save[k], m->in[k][i]))
                    m->save[k][m->n_save[k]++] = m->in[k][i];
        } else if (mode == 2) {
            for (uint32_t j = 0; j < m->n_out[k]; j++)
                if (rng_below(&s, 2) || j == 0)
                    m->save[k][m->n_save[k]++] = m->out[k][j];
        } else if (mode == 3) {
            uint32_t pool[RG_IN + 3], np = 0;
            for (uint32_t i = 0; i < m->n_in[k]; i++)
                pool[np++] = m->in[k][i];
            for (uint32_t j = 0; j < m->n_out[k]; j++)
                pool[np++] = m->out[k][j];
            for (uint32_t i = 0; i < np; i++)
                if (rng_below(&s, 2) && !contains(m->save[k], m->n_save[k], pool[i]))
                    m->save[k][m->n_save[k]++] = pool[i];
        } else if (mode == 4) {
            uint32_t want = 1 + rng_below(&s, 3);
            for (uint32_t i = 0; i < want; i++) {
                uint32_t t = rng_below(&s, m->n_t);
                if (!contains(m->save[k], m->n_save[k], t))
                    m->save[k][m->n_save[k]++] = t;
            }
        }
    }
    /* Outputs: the last op's first output, sometimes more (any tensor,
     * leaves included). */
    m->outputs[m->n_outputs++] = m->out[m->n_ops - 1][0];
    for (int extra = rng_below(&s, 3); extra > 0; extra--) {
        uint32_t t = rng_below(&s, m->n_t);
        if (!contains(m->outputs, m->n_outputs, t))
            m->outputs[m->n_outputs++] = t;
    }
    /* Half the graphs are written in a shuffled (non-topological) order. */
    m->shuffled = rng_below(&s, 2);
    if (m->shuffled)
        for (uint32_t i = m->n_ops; i > 1; i--) {
            uint32_t j = rng_below(&s, i), tmp = m->file_order[i - 1];
            m->file_order[i - 1] = m->file_order[j];
            m->file_order[j] = tmp;
        }
}

typedef struct {
    char *s;
    size_t len, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void sb_printf(sbuf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        ck_assert_int_ge(n, 0);
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        b->cap = 2 * b->cap + (size_t)n + 64;
        b->s = realloc(b->s, b->cap);
        ck_assert_ptr_nonnull(b->s);
    }
}

static void sb_ids(sbuf *b, const rgraph *m, const uint32_t *ts, uint32_t n)
{
    sb_printf(b, "[");
    for (uint32_t i = 0; i < n; i++)
        sb_printf(b, "%s\"%s\"", i ? "," : "", m->tid[ts[i]]);
    sb_printf(b, "]");
}

/* Bytes as a number or, now and then, as a decimal string. */
static void sb_count(sbuf *b, uint64_t v, int as_string)
{
    if (as_string)
        sb_printf(b, "\"%llu\"", (unsigned long long)v);
    else
        sb_printf(b, "%llu", (unsigned long long)v);
}

static char *rgraph_json(const rgraph *m)
{
    sbuf b = {malloc(256), 0, 256};
    ck_assert_ptr_nonnull(b.s);
    sb_printf(&b, "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"random\",\"inputs\":[");
    int first = 1;
    for (uint32_t t = 0; t < m->n_leaf; t++)
        if (!m->is_param[t]) {
            sb_printf(&b, "%s{\"id\":\"%s\",\"bytes\":", first ? "" : ",", m->tid[t]);
            sb_count(&b, m->bytes[t], t % 2);
            sb_printf(&b, ",\"requires_grad\":%s}", m->wants_grad[t] ? "true" : "false");
            first = 0;
        }
    sb_printf(&b, "],\"params\":[");
    first = 1;
    for (uint32_t t = 0; t < m->n_leaf; t++)
        if (m->is_param[t]) {
            sb_printf(&b, "%s{\"id\":\"%s\",\"bytes\":%llu%s}", first ? "" : ",", m->tid[t],
                      (unsigned long long)m->bytes[t], m->wants_grad[t] ? "" : ",\"frozen\":true");
            first = 0;
        }
    sb_printf(&b, "],\"ops\":[");
    for (uint32_t i = 0; i < m->n_ops; i++) {
        uint32_t k = m->file_order[i];
        sb_printf(&b, "%s{\"id\":\"%s\",\"op\":\"%s\",\"inputs\":", i ? "," : "", m->oid[k],
                  m->multi[k] ? "multi" : "f");
        sb_ids(&b, m, m->in[k], m->n_in[k]);
        if (m->multi[k]) {
            sb_printf(&b, ",\"flops\":%u,\"outputs\":[", 7 * k + 1);
            for (uint32_t j = 0; j < m->n_out[k]; j++) {
                uint32_t t = m->out[k][j];
                sb_printf(&b, "%s{\"id\":\"%s\"", j ? "," : "", m->tid[t]);
                if (m->alias[t] != NONE)
                    sb_printf(&b, ",\"alias_of\":\"%s\"}", m->tid[m->alias[t]]);
                else {
                    sb_printf(&b, ",\"bytes\":");
                    sb_count(&b, m->bytes[t], j % 2);
                    sb_printf(&b, "}");
                }
            }
            sb_printf(&b, "]");
        } else if (m->alias[m->out[k][0]] != NONE) {
            sb_printf(&b, ",\"alias_of\":\"%s\"", m->tid[m->alias[m->out[k][0]]]);
        } else {
            sb_printf(&b, ",\"bytes\":%llu,\"flops\":%u", (unsigned long long)m->bytes[m->out[k][0]], 3 * k + 2);
        }
        /* A view op's default saves are none (graphs/README.md); the
         * model's default is the distinct inputs, so write them out. */
        int all_views = 1;
        for (uint32_t o = 0; o < m->n_out[k]; o++)
            all_views &= m->alias[m->out[k][o]] != NONE;
        if (m->saves_given[k] || all_views) {
            sb_printf(&b, ",\"saves\":");
            sb_ids(&b, m, m->save[k], m->n_save[k]);
        }
        sb_printf(&b, "}");
    }
    sb_printf(&b, "],\"outputs\":");
    sb_ids(&b, m, m->outputs, m->n_outputs);
    sb_printf(&b, "}");
    return b.s;
}

static uint32_t max_step(uint32_t a, uint32_t b)
{
    if (a == NONE)
        return b;
    if (b == NONE)
        return a;
    return a > b ? a : b;
}

static uint32_t min_step(uint32_t a, uint32_t b)
{
    if (a == NONE)
        return b;
    if (b == NONE)
        return a;
    return a < b ? a : b;
}

/* The storage root by the model's own alias chain. */
static uint32_t model_root(const rgraph *m, uint32_t t)
{
    while (m->alias[t] != NONE)
        t = m->alias[t];
    return t;
}

static void check_random_graph(uint64_t seed)
{
    rgraph *m = calloc(1, sizeof *m);
    ck_assert_ptr_nonnull(m);
    rgraph_build(m, seed);
    char *json = rgraph_json(m);
    remat_graph *g = NULL;
    remat_err err;
    remat_err_init(&err);
    ck_assert_msg(remat_graph_load_json(json, strlen(json), "random", &g, &err) == REMAT_OK, "seed %llu: %s",
                  (unsigned long long)seed, err.msg);
    remat_analysis *a = NULL;
    ck_assert_msg(remat_analyze(g, &a, &err) == REMAT_OK, "seed %llu: %s", (unsigned long long)seed, err.msg);
    free(json);

    const uint32_t n = m->n_ops, nt = m->n_t;
    uint32_t T[RG_T], K[RG_OPS]; /* model index -> graph index */
    for (uint32_t t = 0; t < nt; t++)
        T[t] = t_tensor(g, m->tid[t]);
    for (uint32_t k = 0; k < n; k++)
        K[k] = t_op(g, m->oid[k]);
    ck_assert_uint_eq(g->n_tensors, nt);
    ck_assert_uint_eq(g->n_ops, n);

    /* Forward order: a permutation, topological, and file order when the
     * file was already topological. */
    uint32_t pos[RG_OPS];
    for (uint32_t k = 0; k < n; k++) {
        pos[k] = a->pos[K[k]];
        ck_assert_uint_lt(pos[k], n);
        ck_assert_uint_eq(a->order[pos[k]], K[k]);
    }
    for (uint32_t k = 0; k < n; k++)
        for (uint32_t i = 0; i < m->n_in[k]; i++) {
            uint32_t p = m->producer[m->in[k][i]];
            ck_assert_msg(p == NONE || pos[p] < pos[k], "seed %llu: %s runs before its input's producer %s",
                          (unsigned long long)seed, m->oid[k], m->oid[p]);
        }
    if (!m->shuffled)
        for (uint32_t i = 0; i < n; i++)
            ck_assert_uint_eq(a->order[i], i);

    /* Needs a gradient / reaches an output: fixed points in file order. */
    int needs[RG_T], treach[RG_T], is_out[RG_T] = {0};
    for (uint32_t i = 0; i < m->n_outputs; i++)
        is_out[m->outputs[i]] = 1;
    for (uint32_t t = 0; t < nt; t++) {
        needs[t] = m->is_leaf[t] && m->wants_grad[t];
        treach[t] = is_out[t];
    }
    for (int changed = 1; changed;) {
        changed = 0;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t k = m->file_order[i];
            int any_in = 0, any_out = 0;
            for (uint32_t j = 0; j < m->n_in[k]; j++)
                any_in |= needs[m->in[k][j]];
            for (uint32_t j = 0; j < m->n_out[k]; j++)
                any_out |= treach[m->out[k][j]];
            for (uint32_t j = 0; j < m->n_out[k]; j++)
                if (any_in && !needs[m->out[k][j]])
                    needs[m->out[k][j]] = changed = 1;
            for (uint32_t j = 0; j < m->n_in[k]; j++)
                if (any_out && !treach[m->in[k][j]])
                    treach[m->in[k][j]] = changed = 1;
        }
    }
    int flows[RG_T], has_bwd[RG_OPS];
    uint32_t n_bwd = 0;
    for (uint32_t t = 0; t < nt; t++) {
        flows[t] = needs[t] && treach[t];
        ck_assert_int_eq(a->grad_flows[T[t]], flows[t]);
    }
    for (uint32_t k = 0; k < n; k++) {
        has_bwd[k] = 0;
        for (uint32_t j = 0; j < m->n_out[k]; j++)
            has_bwd[k] |= flows[m->out[k][j]];
        n_bwd += (uint32_t)has_bwd[k];
    }
    ck_assert_uint_eq(a->n_bwd, n_bwd);
    ck_assert_uint_eq(a->n_steps, n + n_bwd + 1);
    /* Backward steps: exactly the ops with a gradient flowing out, in
     * reverse forward order, numbered n .. n+n_bwd-1. */
    uint32_t bwd[RG_OPS];
    for (uint32_t k = 0; k < n; k++) {
        bwd[k] = a->bwd_step[K[k]];
        ck_assert_msg((bwd[k] != NONE) == has_bwd[k], "seed %llu: op %s backward step %u, expected %s",
                      (unsigned long long)seed, m->oid[k], bwd[k], has_bwd[k] ? "one" : "none");
        if (!has_bwd[k])
            continue;
        ck_assert_uint_ge(bwd[k], n);
        ck_assert_uint_lt(bwd[k], n + n_bwd);
        uint32_t later = 0; /* ops with a backward step that run later in forward */
        for (uint32_t k2 = 0; k2 < n; k2++)
            later += has_bwd[k2] && pos[k2] > pos[k];
        ck_assert_uint_eq(bwd[k], n + later);
    }
    const uint32_t last_fwd = n - 1, opt = n + n_bwd;

    /* Expected lifetimes by full scans. */
    uint32_t e_lfu[RG_T], e_lbu[RG_T], e_own[RG_T];
    for (uint32_t t = 0; t < nt; t++) {
        e_lfu[t] = e_lbu[t] = NONE;
        for (uint32_t k = 0; k < n; k++) {
            if (contains(m->in[k], m->n_in[k], t))
                e_lfu[t] = max_step(e_lfu[t], pos[k]);
            if (has_bwd[k] && contains(m->save[k], m->n_save[k], t))
                e_lbu[t] = max_step(e_lbu[t], bwd[k]);
        }
        if (m->is_leaf[t])
            e_own[t] = NONE;
        else if (e_lbu[t] != NONE)
            e_own[t] = e_lbu[t];
        else if (is_out[t])
            e_own[t] = last_fwd;
        else if (e_lfu[t] != NONE)
            e_own[t] = e_lfu[t];
        else
            e_own[t] = pos[m->producer[t]];
    }
    for (uint32_t t = 0; t < nt; t++) {
        const remat_lifetime *L = &a->life[T[t]];
        const remat_tensor *gt = &g->tensors[T[t]];
        uint32_t root = model_root(m, t);
        ck_assert_uint_eq(gt->storage, T[root]);
        ck_assert_uint_eq(gt->bytes, m->alias[t] != NONE ? 0 : m->bytes[t]);
        uint32_t e_free = e_own[t];
        if (root == t && !m->is_leaf[t])
            for (uint32_t v = 0; v < nt; v++)
                if (v != t && model_root(m, v) == t)
                    e_free = max_step(e_free, e_own[v]);
        uint32_t e_birth = m->is_leaf[t] ? NONE : pos[m->producer[t]];
        uint32_t e_gb = NONE, e_gf = NONE;
        if (flows[t]) {
            if (is_out[t] && n_bwd > 0)
                e_gb = n;
            for (uint32_t k = 0; k < n; k++)
                if (has_bwd[k] && contains(m->in[k], m->n_in[k], t))
                    e_gb = min_step(e_gb, bwd[k]);
            if (e_gb != NONE)
                e_gf = m->is_leaf[t] ? opt : bwd[m->producer[t]];
        }
        ck_assert_msg(L->birth == e_birth && L->last_fwd_use == e_lfu[t] && L->last_bwd_use == e_lbu[t] &&
                          L->free == e_free && L->grad_birth == e_gb && L->grad_free == e_gf,
                      "seed %llu: %s: got (%u %u %u %u | %u %u), expected (%u %u %u %u | %u %u)",
                      (unsigned long long)seed, m->tid[t], L->birth, L->last_fwd_use, L->last_bwd_use, L->free,
                      L->grad_birth, L->grad_free, e_birth, e_lfu[t], e_lbu[t], e_free, e_gb, e_gf);

        /* The invariants DESIGN states, checked directly as well. */
        if (!m->is_leaf[t]) {
            ck_assert_uint_le(L->birth, L->free);
            if (L->last_fwd_use != NONE) {
                ck_assert_uint_le(L->birth, L->last_fwd_use);
                ck_assert_uint_le(L->last_fwd_use, L->free);
            }
            if (L->last_bwd_use != NONE)
                ck_assert_uint_le(L->last_bwd_use, L->free);
            if (is_out[t])
                ck_assert_uint_ge(a->life[T[root]].free, last_fwd);
        } else {
            ck_assert_uint_eq(L->birth, NONE);
            ck_assert_uint_eq(L->free, NONE);
        }
        ck_assert_int_eq(L->grad_birth == NONE, L->grad_free == NONE);
        if (L->grad_birth != NONE) {
            ck_assert_uint_ge(L->grad_birth, n);
            ck_assert_uint_le(L->grad_birth, L->grad_free);
        }
    }
    /* Residency: what a forward step reads and what a backward step saves
     * is resident (through its storage root) when the step runs; the
     * gradients a backward step reads and writes exist then too. */
    for (uint32_t k = 0; k < n; k++) {
        for (uint32_t i = 0; i < m->n_in[k]; i++) {
            const remat_lifetime *R = &a->life[T[model_root(m, m->in[k][i])]];
            if (R->birth != NONE)
                ck_assert_msg(R->birth <= pos[k] && pos[k] <= R->free, "seed %llu: input %s of fwd:%s not resident",
                              (unsigned long long)seed, m->tid[m->in[k][i]], m->oid[k]);
        }
        if (!has_bwd[k])
            continue;
        for (uint32_t i = 0; i < m->n_save[k]; i++) {
            const remat_lifetime *R = &a->life[T[model_root(m, m->save[k][i])]];
            if (R->birth != NONE)
                ck_assert_msg(R->birth <= bwd[k] && bwd[k] <= R->free, "seed %llu: %s saved by bwd:%s not resident",
                              (unsigned long long)seed, m->tid[m->save[k][i]], m->oid[k]);
        }
        for (uint32_t j = 0; j < m->n_out[k]; j++) {
            const remat_lifetime *L = &a->life[T[m->out[k][j]]];
            if (flows[m->out[k][j]])
                ck_assert(L->grad_birth <= bwd[k] && bwd[k] <= L->grad_free);
        }
        for (uint32_t i = 0; i < m->n_in[k]; i++) {
            const remat_lifetime *L = &a->life[T[m->in[k][i]]];
            if (flows[m->in[k][i]])
                ck_assert(L->grad_birth <= bwd[k] && bwd[k] <= L->grad_free);
        }
    }
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    free(m);
}

START_TEST(analyze_should_satisfy_lifetime_invariants_on_random_dags)
{
    for (uint64_t seed = 1; seed <= 400; seed++)
        check_random_graph(seed * 7919);
}
END_TEST

START_TEST(analyze_should_generate_varied_random_dags)
{
    /* The invariant test is only as good as its graphs: check that the
     * generator really produces the features it is meant to cover. */
    int shuffled = 0, views = 0, multi = 0, view_outputs = 0, any_saves = 0, big = 0, no_bwd_ops = 0;
    for (uint64_t seed = 1; seed <= 400; seed++) {
        rgraph *m = calloc(1, sizeof *m);
        ck_assert_ptr_nonnull(m);
        rgraph_build(m, seed * 7919);
        shuffled += m->shuffled;
        big += m->n_ops >= 50;
        for (uint32_t k = 0; k < m->n_ops; k++) {
            multi += m->multi[k];
            views += !m->multi[k] && m->alias[m->out[k][0]] != NONE;
            for (uint32_t j = 0; m->multi[k] && j < m->n_out[k]; j++)
                view_outputs += m->alias[m->out[k][j]] != NONE;
            for (uint32_t i = 0; i < m->n_save[k]; i++)
                any_saves += m->producer[m->save[k][i]] != NONE && m->producer[m->save[k][i]] > k;
        }
        free(m);
    }
    /* Some ops must end up without a backward step (frozen-only inputs or
     * branches off the loss): check that on the analyzer's own output. */
    for (uint64_t seed = 1; seed <= 40 && !no_bwd_ops; seed++) {
        rgraph *m = calloc(1, sizeof *m);
        ck_assert_ptr_nonnull(m);
        rgraph_build(m, seed * 7919);
        char *json = rgraph_json(m);
        remat_graph *g = t_load(json);
        remat_analysis *a = NULL;
        ck_assert_int_eq(remat_analyze(g, &a, NULL), REMAT_OK);
        no_bwd_ops += a->n_bwd < g->n_ops;
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
        free(json);
        free(m);
    }
    ck_assert_int_gt(shuffled, 100);
    ck_assert_int_gt(views, 100);
    ck_assert_int_gt(multi, 100);
    ck_assert_int_gt(view_outputs, 20);
    ck_assert_int_gt(any_saves, 20);
    ck_assert_int_gt(big, 100);
    ck_assert_int_gt(no_bwd_ops, 0);
}
END_TEST

/* The "invariants" case of the analyze suite (check_analyze.c). */
void analyze_random_tests(TCase *inv)
{
    tcase_add_test(inv, analyze_should_satisfy_lifetime_invariants_on_random_dags);
    tcase_add_test(inv, analyze_should_generate_varied_random_dags);
}

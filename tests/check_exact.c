/*
 * check_exact.c - the `exact` strategy (src/plan/exact*.c) against oracles
 * written here.
 *
 * 1. Exhaustive search over keep sets. On tiny random graphs (chains and
 *    small DAGs with multi-output ops, views, workspace, non-recomputable
 *    ops and every kind of `saves`, built as JSON from a seeded splitmix64),
 *    every one of the 2^n keep sets is turned into a schedule by the default
 *    policy and replayed; the least extra FLOPs within a budget is the
 *    keep-set optimum. exact's schedules are richer than keep sets (a tensor
 *    can be rebuilt in one backward stage and dropped again, rebuilt during
 *    the forward pass, or rebuilt through an op that a keep set would have to
 *    keep), and every keep-set schedule is a solution of its program, so
 *    exact must be at most the keep-set optimum: the tests assert <= and
 *    count how often it is strictly better.
 * 2. A shortest-path search over all schedules with the analysis's FWD and
 *    BWD order (any RECOMPUTEs and FREEs in between, in any order, any number
 *    of times): a lower bound on exact, which runs in a subclass. Its
 *    memory figures come from an accounting written here from the rules in
 *    graphs/README.md (gradients from the lifetimes), and the path it finds
 *    is replayed by the executor to check that accounting.
 * 3. Infeasible budgets: the error names the smallest peak, and that number
 *    is right to the byte (it is met; one byte less is refused).
 * 4. The bundled graphs of up to 60 ops are solved within a time limit.
 */
#define _POSIX_C_SOURCE 200809L
#include "test_util.h"
#include "plan/planner.h"
#include "util/util_internal.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* ---- Random tiny graphs --------------------------------------------------- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint32_t rnd(uint64_t *s, uint32_t n)
{
    return (uint32_t)(splitmix(s) % n);
}

typedef struct {
    char buf[8192];
    size_t len;
} jbuf;

static void jp(jbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void jp(jbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->buf + b->len, sizeof b->buf - b->len, fmt, ap);
    va_end(ap);
    ck_assert(n >= 0 && (size_t)n < sizeof b->buf - b->len);
    b->len += (size_t)n;
}

enum { SHAPE_CHAIN, SHAPE_DAG, SHAPE_PLAIN_CHAIN };

/* Writes a graph of n_ops ops (plus the loss) into b. PLAIN_CHAIN: single
 * outputs, each op reads the previous one and saves its input. */
static void gen_graph(uint64_t *rng, int shape, uint32_t n_ops, jbuf *b)
{
    char tname[16][16]; /* activation tensors readable by later ops */
    uint32_t nt = 0, extra = 0;
    b->len = 0;
    jp(b,
       "{\"format\": \"remat-graph\", \"version\": 1, \"name\": \"tiny\",\n"
       " \"inputs\": [{\"id\": \"x\", \"bytes\": %u}],\n"
       " \"params\": [{\"id\": \"w0\", \"bytes\": %u}, {\"id\": \"w1\", \"bytes\": %u}],\n \"ops\": [\n",
       256 * (1 + rnd(rng, 4)), 128 * (1 + rnd(rng, 4)), 128 * (1 + rnd(rng, 4)));
    for (uint32_t i = 0; i < n_ops && i < 16; i++) {
        char id[16];
        snprintf(id, sizeof id, "o%u", i);
        uint32_t bytes = 512 * (1 + rnd(rng, 8)), flops = 1000 * (1 + rnd(rng, 100));
        /* Inputs: the previous activation, maybe another earlier one. */
        const char *in1 = nt ? tname[nt - 1] : "x";
        const char *in2 = NULL;
        if (shape == SHAPE_DAG && nt > 1 && rnd(rng, 2))
            in2 = tname[rnd(rng, nt - 1)];
        const char *param = i == 0 || rnd(rng, 3) == 0 ? (i % 2 ? "w1" : "w0") : NULL;
        jp(b, "  {\"id\": \"%s\", \"op\": \"f\", \"inputs\": [\"%s\"%s%s%s%s%s%s]", id, in1, in2 ? ", \"" : "",
           in2 ? in2 : "", in2 ? "\"" : "", param ? ", \"" : "", param ? param : "", param ? "\"" : "");
        int kind = shape == SHAPE_PLAIN_CHAIN ? 0 : (int)rnd(rng, 10);
        if (kind == 8 && n_ops + extra >= 11)
            kind = 0; /* keep 2^activations small for the exhaustive search */
        extra += kind == 8;
        if (kind == 9 && nt > 0 && i + 1 < n_ops) {
            /* A view of its first input (zero cost, no bytes). */
            jp(b, ", \"alias_of\": \"%s\"", in1);
        } else if (kind == 8) {
            /* Two outputs: a big one and small statistics. */
            jp(b, ", \"flops\": %u, \"outputs\": [{\"id\": \"%s\", \"bytes\": %u}, {\"id\": \"%s_s\", \"bytes\": %u}]",
               flops, id, bytes, id, 64 * (1 + rnd(rng, 4)));
        } else {
            jp(b, ", \"bytes\": %u, \"flops\": %u", bytes, flops);
        }
        if (shape == SHAPE_PLAIN_CHAIN) {
            jp(b, ", \"saves\": [\"%s\"]", in1);
        } else {
            switch (rnd(rng, 4)) {
            case 0: break; /* its inputs */
            case 1: jp(b, ", \"saves\": [\"%s\"]", id); break;
            case 2: jp(b, ", \"saves\": []"); break;
            default:
                if (kind == 8)
                    jp(b, ", \"saves\": [\"%s\", \"%s_s\"]", in1, id);
                else
                    jp(b, ", \"saves\": [\"%s\", \"%s\"]", in1, id);
                break;
            }
            if (rnd(rng, 5) == 0)
                jp(b, ", \"workspace\": %u", 256 * (1 + rnd(rng, 4)));
            if (rnd(rng, 5) == 0)
                jp(b, ", \"bwd_workspace\": %u", 256 * (1 + rnd(rng, 4)));
            if (rnd(rng, 12) == 0 && kind != 9)
                jp(b, ", \"recomputable\": false");
        }
        jp(b, "},\n");
        snprintf(tname[nt++], sizeof tname[0], "%s", id);
    }
    jp(b,
       "  {\"id\": \"loss\", \"op\": \"sum\", \"inputs\": [\"%s\"], \"bytes\": 4, \"flops\": 100, \"saves\": []}\n"
       " ],\n \"outputs\": [\"loss\"]}\n",
       tname[nt - 1]);
}

/* ---- Oracle 1: exhaustive search over keep sets -------------------------------- */

typedef struct {
    uint32_t n; /* activations */
    uint32_t act[16];
    uint32_t sets;       /* 2^n */
    int *valid;          /* per keep set */
    uint64_t *metric[2]; /* TOTAL, ACTIVATION */
    uint64_t *extra;
} keep_table;

static void keep_table_build(const remat_analysis *a, keep_table *kt)
{
    const remat_graph *g = a->g;
    memset(kt, 0, sizeof *kt);
    for (uint32_t t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].kind == REMAT_TENSOR_ACTIVATION) {
            ck_assert_uint_lt(kt->n, 16);
            kt->act[kt->n++] = t;
        }
    kt->sets = 1u << kt->n;
    kt->valid = calloc(kt->sets, sizeof *kt->valid);
    kt->metric[0] = calloc(kt->sets, sizeof(uint64_t));
    kt->metric[1] = calloc(kt->sets, sizeof(uint64_t));
    kt->extra = calloc(kt->sets, sizeof(uint64_t));
    uint8_t *keep = calloc(g->n_tensors, 1);
    ck_assert(kt->valid && kt->metric[0] && kt->metric[1] && kt->extra && keep);
    for (uint32_t m = 0; m < kt->sets; m++) {
        for (uint32_t i = 0; i < kt->n; i++)
            keep[kt->act[i]] = (m >> i) & 1;
        remat_schedule s;
        remat_schedule_init(&s);
        remat_err err;
        remat_err_init(&err);
        remat_status st = remat_schedule_from_keep(a, keep, &s, &err);
        if (st == REMAT_OK) {
            remat_replay_result r;
            ck_assert_int_eq(remat_replay(a, &s, NULL, NULL, &r, &err), REMAT_OK);
            ck_assert_msg(r.valid, "keep-set schedule invalid: %s", err.msg);
            kt->valid[m] = 1;
            kt->metric[0][m] = r.peak_bytes;
            kt->metric[1][m] = r.activation_peak;
            kt->extra[m] = r.flops_recompute;
            remat_replay_result_destroy(&r);
        } else {
            ck_assert_int_eq(st, REMAT_EINFEASIBLE); /* a non-recomputable tensor freed */
        }
        remat_schedule_destroy(&s);
    }
    free(keep);
}

static void keep_table_destroy(keep_table *kt)
{
    free(kt->valid);
    free(kt->metric[0]);
    free(kt->metric[1]);
    free(kt->extra);
}

/* Least extra FLOPs of a keep set within budget (UINT64_MAX: none fits). */
static uint64_t keep_opt(const keep_table *kt, int kind, uint64_t budget)
{
    uint64_t best = UINT64_MAX;
    for (uint32_t m = 0; m < kt->sets; m++)
        if (kt->valid[m] && kt->metric[kind][m] <= budget && kt->extra[m] < best)
            best = kt->extra[m];
    return best;
}

static uint64_t keep_min_metric(const keep_table *kt, int kind)
{
    uint64_t best = UINT64_MAX;
    for (uint32_t m = 0; m < kt->sets; m++)
        if (kt->valid[m] && kt->metric[kind][m] < best)
            best = kt->metric[kind][m];
    return best;
}

/* ---- Running exact --------------------------------------------------------------- */

typedef struct {
    remat_status st;
    char msg[REMAT_ERR_MSG_MAX];
    uint64_t extra, metric;
    uint64_t effort; /* EINFEASIBLE: the best effort's metric (0: none) */
    char status[32];
    double seconds;
    double gap;
} exact_run;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A string field of the params JSON ("status": "optimal"). */
static void param_str(const char *json, const char *key, char *out, size_t cap)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": \"", key);
    const char *p = json ? strstr(json, pat) : NULL;
    out[0] = 0;
    if (!p)
        return;
    p += strlen(pat);
    size_t i = 0;
    while (p[i] && p[i] != '"' && i + 1 < cap) {
        out[i] = p[i];
        i++;
    }
    out[i] = 0;
}

static double param_num(const char *json, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = json ? strstr(json, pat) : NULL;
    return p ? strtod(p + strlen(pat), NULL) : -1;
}

static exact_run run_exact(const remat_analysis *a, int kind, uint64_t budget, double time_limit)
{
    exact_run x;
    memset(&x, 0, sizeof x);
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.strategy = "exact";
    o.budget_kind = kind ? REMAT_BUDGET_ACTIVATION : REMAT_BUDGET_TOTAL;
    o.budget = budget;
    o.time_limit = time_limit;
    o.exact_milp = 1; /* the program itself, not the class search (checked against it below) */
    remat_plan plan;
    remat_replay_result r;
    remat_err err;
    remat_err_init(&err);
    double t0 = now_s();
    x.st = remat_plan_make(a, &o, &plan, &r, &err);
    x.seconds = now_s() - t0;
    snprintf(x.msg, sizeof x.msg, "%s", err.msg);
    if (x.st == REMAT_OK) {
        /* Replay again, independently of remat_plan_make's own check. */
        remat_replay_result r2;
        remat_err e2;
        remat_err_init(&e2);
        ck_assert_int_eq(remat_replay(a, &plan.schedule, NULL, NULL, &r2, &e2), REMAT_OK);
        ck_assert_msg(r2.valid, "exact's schedule is invalid: %s", e2.msg);
        x.metric = kind ? r2.activation_peak : r2.peak_bytes;
        x.extra = r2.flops_recompute;
        ck_assert_uint_le(x.metric, budget);
        ck_assert_uint_eq(x.extra, r.flops_recompute);
        param_str(plan.params_json, "status", x.status, sizeof x.status);
        x.gap = param_num(plan.params_json, "gap");
        ck_assert_uint_eq((uint64_t)param_num(plan.params_json, "objective"), x.extra);
        remat_replay_result_destroy(&r2);
    } else if (x.st == REMAT_EINFEASIBLE && r.recompute_counts) {
        /* The best effort: over the budget, and the very plan whose peak
         * the message names as the smallest found. */
        uint64_t m = kind ? r.activation_peak : r.peak_bytes;
        ck_assert_msg(r.valid && m > budget, "best effort %llu at budget %llu", (unsigned long long)m,
                      (unsigned long long)budget);
        const char *found = strstr(x.msg, "the smallest it found is");
        if (!found)
            found = strstr(x.msg, "of any schedule in its class is");
        if (found) {
            char want[48];
            snprintf(want, sizeof want, "(%llu B)", (unsigned long long)m);
            ck_assert_msg(strstr(found, want) != NULL, "'%s' does not name the best effort %s", x.msg, want);
        }
        x.effort = m;
    }
    if (x.st == REMAT_EINFEASIBLE)
        ck_assert_msg(x.effort || strstr(x.msg, "it found none"), "no best effort: %s", x.msg);
    remat_replay_result_destroy(&r);
    remat_plan_destroy(&plan);
    return x;
}

/* ---- Oracle 2: shortest paths over all schedules in the fixed step order -------------- */

/* The executor's rules (graphs/README.md), written again: live bytes are
 * leaves + resident storages + live gradients; a FWD/RECOMPUTE allocates its
 * non-resident non-view outputs (a view costs nothing) and adds its
 * workspace; a BWD allocates the gradients its step creates (from the
 * lifetimes: grad_birth) and its workspace, and the gradients whose
 * grad_free is that step go after it. State: steps done and the resident
 * activations. Cost: recompute FLOPs. */
typedef struct {
    const remat_analysis *a;
    const remat_graph *g;
    int kind;
    uint64_t budget;
    uint32_t n_act, act[16];
    uint32_t idx[64]; /* tensor -> bit, or 99 */
    uint64_t leaves;  /* leaf bytes in the metric */
} sp_ctx;

static int in_metric_grad(const sp_ctx *c, uint32_t t)
{
    /* Param gradients are not activation categories; everything else is
     * an activation gradient (inputs with requires_grad too). */
    return !c->kind || c->g->tensors[t].kind != REMAT_TENSOR_PARAM;
}

/* Gradient bytes (in the metric) live during backward step s (its high-water
 * part) and after it. */
static void grad_bytes(const sp_ctx *c, uint32_t s, uint64_t *during, uint64_t *after)
{
    const remat_graph *g = c->g;
    uint64_t d = 0, f = 0;
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        const remat_lifetime *L = &c->a->life[t];
        if (L->grad_birth == REMAT_NONE || !in_metric_grad(c, t))
            continue;
        uint64_t b = g->tensors[t].logical_bytes;
        if (L->grad_birth <= s && s <= L->grad_free)
            d += b;
        if (L->grad_birth <= s && s < L->grad_free)
            f += b;
    }
    *during = d;
    *after = f;
}

static uint64_t storage_bytes(const sp_ctx *c, uint32_t mask)
{
    const remat_graph *g = c->g;
    uint64_t b = 0;
    for (uint32_t i = 0; i < c->n_act; i++) {
        uint32_t t = c->act[i], s = g->tensors[t].storage;
        if (!((mask >> i) & 1) || g->tensors[s].kind != REMAT_TENSOR_ACTIVATION)
            continue;
        /* Count each storage once: at its first resident member. */
        int first = 1;
        for (uint32_t j = 0; j < i; j++)
            if (((mask >> j) & 1) && g->tensors[c->act[j]].storage == s)
                first = 0;
        if (first)
            b += g->tensors[s].bytes;
    }
    return b;
}

static int all_resident(const sp_ctx *c, uint32_t mask, const uint32_t *ts, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        uint32_t t = ts[i];
        if (c->g->tensors[t].kind == REMAT_TENSOR_ACTIVATION && !((mask >> c->idx[t]) & 1))
            return 0;
    }
    return 1;
}

/* Executes op k's forward from mask: returns the high-water mark and the
 * new mask (outputs resident). */
static uint64_t sp_forward(const sp_ctx *c, uint32_t mask, uint32_t k, uint64_t base, uint32_t *out_mask)
{
    const remat_graph *g = c->g;
    const remat_op *op = &g->ops[k];
    const uint32_t *out = remat_op_outputs(g, op);
    uint64_t hw = base + storage_bytes(c, mask) + op->workspace;
    uint32_t m = mask;
    for (uint32_t j = 0; j < op->n_out; j++) {
        uint32_t o = out[j];
        if ((mask >> c->idx[o]) & 1)
            continue;
        if (g->tensors[o].storage == o)
            hw += g->tensors[o].bytes;
        m |= 1u << c->idx[o];
    }
    *out_mask = m;
    return hw;
}

typedef struct {
    uint64_t cost;
    uint32_t prev;  /* predecessor state */
    uint32_t instr; /* kind << 24 | arg */
    uint8_t done;
} sp_node;

/* A binary min-heap of (cost, state) with lazy deletion. */
typedef struct {
    uint64_t *cost;
    uint32_t *state;
    size_t n, cap;
} sp_heap;

static void heap_push(sp_heap *h, uint64_t cost, uint32_t state)
{
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 1024;
        h->cost = realloc(h->cost, h->cap * sizeof *h->cost);
        h->state = realloc(h->state, h->cap * sizeof *h->state);
        ck_assert(h->cost && h->state);
    }
    size_t i = h->n++;
    while (i > 0 && h->cost[(i - 1) / 2] > cost) {
        h->cost[i] = h->cost[(i - 1) / 2];
        h->state[i] = h->state[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->cost[i] = cost;
    h->state[i] = state;
}

static uint32_t heap_pop(sp_heap *h)
{
    uint32_t top = h->state[0];
    uint64_t c = h->cost[--h->n];
    uint32_t st = h->state[h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        uint64_t mc = c;
        if (l < h->n && h->cost[l] < mc)
            m = l, mc = h->cost[l];
        if (l + 1 < h->n && h->cost[l + 1] < mc)
            m = l + 1;
        if (m == i)
            break;
        h->cost[i] = h->cost[m];
        h->state[i] = h->state[m];
        i = m;
    }
    h->cost[i] = c;
    h->state[i] = st;
    return top;
}

/* Least extra FLOPs over all schedules with the fixed FWD/BWD order whose
 * high-water marks (by the rules above, the optimizer step's included) fit;
 * writes the best schedule. */
static uint64_t shortest_path(sp_ctx *c, remat_schedule *best)
{
    const remat_analysis *a = c->a;
    const remat_graph *g = c->g;
    uint32_t n = g->n_ops, T = n + a->n_bwd, S = 1u << c->n_act;
    size_t N = (size_t)(T + 1) * S;
    sp_node *nd = calloc(N, sizeof *nd);
    sp_heap h = {NULL, NULL, 0, 0};
    ck_assert(nd);
    for (size_t i = 0; i < N; i++)
        nd[i].cost = UINT64_MAX;
    nd[0].cost = 0;
    heap_push(&h, 0, 0);
    uint64_t answer = UINT64_MAX;
    size_t goal = SIZE_MAX;
    while (h.n > 0) {
        uint32_t u = heap_pop(&h);
        if (nd[u].done)
            continue;
        nd[u].done = 1;
        uint32_t p = u / S, mask = u % S;
        uint64_t gd = 0, ga = 0, base = c->leaves;
        if (p > n) {
            grad_bytes(c, p - 1, &gd, &ga);
            base += ga; /* gradients live between backward steps */
        }
        if (p == T && base + storage_bytes(c, mask) <= c->budget) {
            answer = nd[u].cost; /* the optimizer step fits too */
            goal = u;
            break;
        }
#define RELAX(np, nm, add, kindarg)                                                                                    \
    do {                                                                                                               \
        uint32_t v_ = (np)*S + (nm);                                                                                   \
        uint64_t c_ = nd[u].cost + (add);                                                                              \
        if (!nd[v_].done && c_ < nd[v_].cost) {                                                                        \
            nd[v_].cost = c_;                                                                                          \
            nd[v_].prev = u;                                                                                           \
            nd[v_].instr = (kindarg);                                                                                  \
            heap_push(&h, c_, v_);                                                                                     \
        }                                                                                                              \
    } while (0)
        /* FREE any resident activation. */
        for (uint32_t i = 0; i < c->n_act; i++)
            if ((mask >> i) & 1)
                RELAX(p, mask & ~(1u << i), 0, (uint32_t)REMAT_I_FREE << 24 | c->act[i]);
        if (p == T)
            continue;
        /* RECOMPUTE any op that has run forward, is recomputable, has its
         * inputs and a missing output. */
        for (uint32_t q = 0; q < (p < n ? p : n); q++) {
            uint32_t k = a->order[q];
            const remat_op *op = &g->ops[k];
            if (!op->recomputable || !all_resident(c, mask, remat_op_inputs(g, op), op->n_in))
                continue;
            uint32_t nm;
            uint64_t hw = sp_forward(c, mask, k, base, &nm);
            if (nm != mask && hw <= c->budget)
                RELAX(p, nm, op->flops, (uint32_t)REMAT_I_RECOMPUTE << 24 | k);
        }
        /* The next step: FWD, or BWD with its gradients and workspace. */
        if (p < n) {
            uint32_t k = a->order[p];
            const remat_op *op = &g->ops[k];
            uint32_t nm;
            if (all_resident(c, mask, remat_op_inputs(g, op), op->n_in) &&
                sp_forward(c, mask, k, base, &nm) <= c->budget)
                RELAX(p + 1, nm, 0, (uint32_t)REMAT_I_FWD << 24 | k);
        } else {
            uint32_t k = a->bwd_order[p - n];
            const remat_op *op = &g->ops[k];
            grad_bytes(c, p, &gd, &ga);
            uint64_t hw = c->leaves + gd + op->bwd_workspace + storage_bytes(c, mask);
            if (all_resident(c, mask, remat_op_saves(g, op), op->n_save) && hw <= c->budget)
                RELAX(p + 1, mask, 0, (uint32_t)REMAT_I_BWD << 24 | k);
        }
#undef RELAX
    }
    if (goal != SIZE_MAX) {
        /* Walk back, then emit forwards. */
        uint32_t len = 0, *path = malloc(N * sizeof *path);
        ck_assert(path);
        for (size_t v = goal; v != 0; v = nd[v].prev)
            path[len++] = nd[v].instr;
        while (len-- > 0)
            ck_assert_int_eq(remat_schedule_push(best, (remat_instr_kind)(path[len] >> 24), path[len] & 0xffffff),
                             REMAT_OK);
        free(path);
    }
    free(h.cost);
    free(h.state);
    free(nd);
    return answer;
}

static void sp_init(sp_ctx *c, const remat_analysis *a, int kind, uint64_t budget)
{
    const remat_graph *g = a->g;
    memset(c, 0, sizeof *c);
    c->a = a;
    c->g = g;
    c->kind = kind;
    c->budget = budget;
    ck_assert_uint_lt(g->n_tensors, 64);
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        c->idx[t] = 99;
        if (g->tensors[t].kind == REMAT_TENSOR_ACTIVATION) {
            c->idx[t] = c->n_act;
            c->act[c->n_act++] = t;
        } else if (!kind) {
            c->leaves += g->tensors[t].bytes;
        }
    }
}

/* ---- Tests -------------------------------------------------------------------------- */

typedef struct {
    uint32_t cases, strictly_better, equal, below_keep_min_feasible, infeasible, sp_checked, sp_equal, sp_only;
    uint32_t cert_checked, cert_optimal;
} tally;

/* auto's certificate against the optimum of the shortest-path search over
 * every schedule of the class (sp; UINT64_MAX: none fits): bound.c's bound
 * never exceeds it, and auto's lower_bound equals it (and so does its
 * plan) wherever auto's own search of the class ran. */
static void check_certificate(const remat_analysis *a, int kind, uint64_t budget, uint64_t sp, tally *tl)
{
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.budget_kind = kind ? REMAT_BUDGET_ACTIVATION : REMAT_BUDGET_TOTAL;
    o.budget = budget;
    o.time_limit = 0.2;
    remat_err err;
    remat_err_init(&err);
    remat_planner P;
    memset(&P, 0, sizeof P);
    P.a = a;
    P.o = &o;
    P.err = &err;
    uint64_t kb = 0;
    int infeasible = 0;
    ck_assert_int_eq(remat__bound_extra(&P, &kb, &infeasible), REMAT_OK);
    if (sp != UINT64_MAX)
        ck_assert_msg(!infeasible && kb <= sp, "bound %llu (infeasible %d) above the class optimum %llu",
                      (unsigned long long)kb, infeasible, (unsigned long long)sp);
    remat_plan plan;
    remat_replay_result r;
    remat_status st = remat_plan_make(a, &o, &plan, &r, &err);
    if (sp == UINT64_MAX) {
        ck_assert_msg(st != REMAT_OK, "auto fits a budget no schedule of the class meets");
    } else {
        ck_assert_msg(st == REMAT_OK, "auto at %llu: %s", (unsigned long long)budget, err.msg);
        double plb = param_num(plan.params_json, "lower_bound");
        ck_assert_msg(plb >= 0 && plb <= (double)sp, "auto's lower_bound %.0f above the class optimum %llu",
                      plb, (unsigned long long)sp);
        tl->cert_checked++;
        if (strstr(plan.params_json, "\"class-search\"")) {
            ck_assert_msg(plb == (double)sp && r.flops_recompute == sp,
                          "auto's class search: bound %.0f, plan %llu, exhaustive optimum %llu", plb,
                          (unsigned long long)r.flops_recompute, (unsigned long long)sp);
            ck_assert_msg(strstr(plan.params_json, "\"gap\": \"optimal\"") != NULL, "%s", plan.params_json);
            tl->cert_optimal++;
        }
    }
    if (st == REMAT_OK || (st == REMAT_EINFEASIBLE && r.recompute_counts)) {
        remat_replay_result_destroy(&r);
        remat_plan_destroy(&plan);
    }
}

/* One graph, both budget kinds, budgets from the keep-set minimum to just
 * below store-all. */
static void check_graph(const char *json, int with_sp, tally *tl)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(json, &g);
    keep_table kt;
    keep_table_build(a, &kt);
    for (int kind = 0; kind < 2; kind++) {
        uint64_t lo = keep_min_metric(&kt, kind), hi = kt.metric[kind][kt.sets - 1];
        ck_assert(kt.valid[kt.sets - 1]); /* store-all */
        uint64_t budgets[5] = {lo, lo + (hi - lo) / 3, lo + 2 * (hi - lo) / 3, hi > lo ? hi - 1 : hi,
                               lo > 1 ? lo - 1 : 0};
        for (int b = 0; b < 5; b++) {
            uint64_t budget = budgets[b], opt = keep_opt(&kt, kind, budget);
            exact_run x = run_exact(a, kind, budget, 20);
            tl->cases++;
            if (opt == UINT64_MAX) {
                /* Below every keep set: exact may still find a plan (its
                 * class is richer), or must say it is infeasible. */
                ck_assert_msg(x.st == REMAT_OK || x.st == REMAT_EINFEASIBLE, "budget %llu: %s",
                              (unsigned long long)budget, x.msg);
                if (x.st == REMAT_OK)
                    tl->below_keep_min_feasible++;
                else
                    tl->infeasible++;
            } else {
                ck_assert_msg(x.st == REMAT_OK, "budget %llu (keep-set optimum %llu): %s\n%s",
                              (unsigned long long)budget, (unsigned long long)opt, x.msg, json);
                ck_assert_msg(x.extra <= opt, "exact %llu > keep-set optimum %llu at budget %llu\n%s",
                              (unsigned long long)x.extra, (unsigned long long)opt, (unsigned long long)budget, json);
                ck_assert_str_eq(x.status, "optimal");
                ck_assert(x.gap == 0);
                tl->strictly_better += x.extra < opt;
                tl->equal += x.extra == opt;
            }
            if (!with_sp)
                continue;
            /* The shortest path over every schedule in the fixed step order is
             * a lower bound, and its path replays as accounted. */
            sp_ctx c;
            sp_init(&c, a, kind, budget);
            remat_schedule s;
            remat_schedule_init(&s);
            uint64_t lb = shortest_path(&c, &s);
            if (lb != UINT64_MAX) {
                remat_replay_result r;
                remat_err err;
                remat_err_init(&err);
                ck_assert_int_eq(remat_replay(a, &s, NULL, NULL, &r, &err), REMAT_OK);
                ck_assert_msg(r.valid, "shortest path invalid: %s", err.msg);
                ck_assert_uint_le(kind ? r.activation_peak : r.peak_bytes, budget);
                ck_assert_uint_eq(r.flops_recompute, lb);
                remat_replay_result_destroy(&r);
            }
            check_certificate(a, kind, budget, lb, tl);
            if (x.st == REMAT_OK) {
                ck_assert_msg(lb != UINT64_MAX && lb <= x.extra, "exact %llu below the all-schedule optimum %llu",
                              (unsigned long long)x.extra, (unsigned long long)lb);
                tl->sp_checked++;
                tl->sp_equal += lb == x.extra;
            } else if (lb != UINT64_MAX) {
                tl->sp_only++; /* a schedule outside exact's class fits */
            }
            remat_schedule_destroy(&s);
        }
    }
    keep_table_destroy(&kt);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}

static void random_graphs(int shape, uint64_t seed, int count, uint32_t min_ops, uint32_t max_ops, int with_sp,
                          const char *label)
{
    uint64_t rng = seed;
    tally tl = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    jbuf *b = malloc(sizeof *b);
    ck_assert(b);
    for (int i = 0; i < count; i++) {
        uint32_t n = min_ops + rnd(&rng, max_ops - min_ops + 1);
        gen_graph(&rng, shape, n, b);
        check_graph(b->buf, with_sp, &tl);
    }
    free(b);
    printf("exact vs keep sets (%s): %u cases, %u equal, %u strictly better, %u feasible below every keep set, "
           "%u infeasible; vs all schedules: %u checked, %u equal, %u feasible only outside exact's class; "
           "auto's certificate: %u checked, %u proved optimal by its class search\n",
           label, tl.cases, tl.equal, tl.strictly_better, tl.below_keep_min_feasible, tl.infeasible, tl.sp_checked,
           tl.sp_equal, tl.sp_only, tl.cert_checked, tl.cert_optimal);
    if (with_sp)
        ck_assert_uint_gt(tl.cert_optimal, 0);
    ck_assert_uint_gt(tl.equal + tl.strictly_better, 0);
}

START_TEST(exact_should_be_at_most_keep_set_optimum_on_plain_chains)
{
    random_graphs(SHAPE_PLAIN_CHAIN, 11, 6, 4, 8, 1, "plain chains");
}
END_TEST

START_TEST(exact_should_be_at_most_keep_set_optimum_on_chains)
{
    random_graphs(SHAPE_CHAIN, 23, 10, 4, 8, 1, "chains");
}
END_TEST

START_TEST(exact_should_be_at_most_keep_set_optimum_on_dags)
{
    random_graphs(SHAPE_DAG, 37, 10, 4, 8, 1, "dags");
}
END_TEST

/* Parses "(N B), proved" out of the infeasibility message. */
static uint64_t proved_minimum(const char *msg)
{
    const char *p = strstr(msg, " B), proved by the exact program");
    ck_assert_msg(p != NULL, "message '%s' names no proved minimum", msg);
    while (p > msg && p[-1] >= '0' && p[-1] <= '9')
        p--;
    return strtoull(p, NULL, 10);
}

START_TEST(exact_should_name_the_smallest_budget_to_the_byte)
{
    uint64_t rng = 5;
    jbuf *b = malloc(sizeof *b);
    ck_assert(b);
    for (int i = 0; i < 6; i++) {
        gen_graph(&rng, i % 2 ? SHAPE_DAG : SHAPE_CHAIN, 5 + (uint32_t)i % 3, b);
        remat_graph *g;
        remat_analysis *a = t_analyze(b->buf, &g);
        for (int kind = 0; kind < 2; kind++) {
            exact_run x = run_exact(a, kind, 1, 20);
            ck_assert_int_eq(x.st, REMAT_EINFEASIBLE);
            ck_assert_msg(strstr(x.msg, "strategy exact cannot meet the") != NULL, "%s", x.msg);
            uint64_t m = proved_minimum(x.msg);
            exact_run at = run_exact(a, kind, m, 20);
            ck_assert_msg(at.st == REMAT_OK, "the named minimum %llu is not met: %s", (unsigned long long)m, at.msg);
            ck_assert_uint_eq(at.metric, m);
            exact_run below = run_exact(a, kind, m - 1, 20);
            ck_assert_int_eq(below.st, REMAT_EINFEASIBLE);
            ck_assert_uint_eq(proved_minimum(below.msg), m);
        }
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
    }
    free(b);
}
END_TEST

START_TEST(exact_should_need_no_solver_when_store_all_fits)
{
    remat_graph *g;
    remat_analysis *a =
        t_analyze("{\"format\": \"remat-graph\", \"version\": 1,"
                  " \"inputs\": [{\"id\": \"x\", \"bytes\": 64}], \"params\": [{\"id\": \"w\", \"bytes\": 64}],"
                  " \"ops\": [{\"id\": \"h\", \"op\": \"f\", \"inputs\": [\"x\", \"w\"], \"bytes\": 64, \"flops\": 9},"
                  "  {\"id\": \"loss\", \"op\": \"sum\", \"inputs\": [\"h\"], \"bytes\": 4, \"flops\": 1}],"
                  " \"outputs\": [\"loss\"]}",
                  &g);
    exact_run x = run_exact(a, 0, 1u << 20, 0);
    ck_assert_int_eq(x.st, REMAT_OK);
    ck_assert_uint_eq(x.extra, 0);
    ck_assert_str_eq(x.status, "optimal");
    /* No budget at all: store-all, zero extra FLOPs, optimal. */
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.strategy = "exact";
    remat_plan plan;
    remat_replay_result r;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_plan_make(a, &o, &plan, &r, &err), REMAT_OK);
    ck_assert_uint_eq(r.flops_recompute, 0);
    ck_assert_ptr_nonnull(strstr(plan.params_json, "\"status\": \"optimal\""));
    remat_replay_result_destroy(&r);
    remat_plan_destroy(&plan);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(exact_should_refuse_graphs_too_large_for_its_program)
{
    size_t cap = 64000, len;
    char *json = malloc(cap);
    ck_assert(json);
    len = (size_t)snprintf(json, cap,
                           "{\"format\": \"remat-graph\", \"version\": 1, \"inputs\": [{\"id\": \"x\", "
                           "\"bytes\": 8}], \"params\": [{\"id\": \"w\", \"bytes\": 8}], \"ops\": [");
    for (int i = 0; i < 201; i++) {
        char prev[16];
        snprintf(prev, sizeof prev, i ? "o%d" : "x", i - 1);
        len += (size_t)snprintf(json + len, cap - len,
                                "%s{\"id\": \"o%d\", \"op\": \"f\", \"inputs\": [\"%s\", \"w\"], \"bytes\": 8, "
                                "\"flops\": 1}",
                                i ? ", " : "", i, prev);
    }
    snprintf(json + len, cap - len, "], \"outputs\": [\"o200\"]}");
    remat_graph *g;
    remat_analysis *a = t_analyze(json, &g);
    exact_run x = run_exact(a, 0, 100, 1);
    ck_assert_int_eq(x.st, REMAT_EUNSUPPORTED);
    ck_assert_msg(strstr(x.msg, "has 201 ops") && strstr(x.msg, "at most 200"), "%s", x.msg);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    free(json);
}
END_TEST

/* Allocations fail one at a time across a whole run (sampled evenly): each
 * reports out of memory or, where a failure only drops a candidate plan,
 * still plans within the budget; ASan checks that nothing leaks. */
START_TEST(exact_should_fail_cleanly_when_memory_runs_out)
{
    uint64_t rng = 77;
    jbuf *b = malloc(sizeof *b);
    ck_assert(b);
    gen_graph(&rng, SHAPE_DAG, 6, b);
    remat_graph *g;
    remat_analysis *a = t_analyze(b->buf, &g);
    keep_table kt;
    keep_table_build(a, &kt);
    uint64_t lo = keep_min_metric(&kt, 0), hi = kt.metric[0][kt.sets - 1];
    ck_assert_uint_lt(lo, hi);
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.strategy = "exact";
    o.budget_kind = REMAT_BUDGET_TOTAL;
    o.budget = lo + (hi - lo) / 2;
    o.time_limit = 10;
    o.exact_milp = 1;
    remat__alloc_fail_at(0);
    exact_run full = run_exact(a, 0, o.budget, 10);
    uint64_t total = remat__alloc_fail_at(0);
    ck_assert_int_eq(full.st, REMAT_OK);
    int failures = 0;
    for (uint64_t i = 0; i < 60; i++) {
        remat_plan p;
        remat_replay_result r;
        remat_err err;
        remat_err_init(&err);
        remat__alloc_fail_at(1 + i * total / 60);
        remat_status st = remat_plan_make(a, &o, &p, &r, &err);
        remat__alloc_fail_at(0);
        if (st == REMAT_OK) {
            ck_assert_uint_le(r.peak_bytes, o.budget);
        } else {
            ck_assert_msg(st == REMAT_ENOMEM, "allocation %llu of %llu: %s (%s)",
                          (unsigned long long)(1 + i * total / 60), (unsigned long long)total, err.msg,
                          remat_status_str(st));
            ck_assert_msg_contains(&err, "out of memory");
            failures++;
        }
        remat_replay_result_destroy(&r);
        remat_plan_destroy(&p);
    }
    ck_assert_int_gt(failures, 30);
    keep_table_destroy(&kt);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    free(b);
}
END_TEST

/* Store-all's metric of a graph. */
static uint64_t store_all_peak(const remat_analysis *a, int kind)
{
    remat_schedule s;
    remat_schedule_init(&s);
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_schedule_store_all(a, &s, &err), REMAT_OK);
    remat_replay_result r;
    ck_assert_int_eq(remat_replay(a, &s, NULL, NULL, &r, &err), REMAT_OK);
    uint64_t m = kind ? r.activation_peak : r.peak_bytes;
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    return m;
}

START_TEST(exact_should_solve_bundled_graphs_within_the_time_limit)
{
    const double limit = 1.0;
    DIR *d = opendir("graphs");
    ck_assert_msg(d != NULL, "run from the repository root (graphs/ not found)");
    struct dirent *de;
    int solved = 0, saw_mlp2 = 0;
    while ((de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);
        if (l < 6 || strcmp(de->d_name + l - 5, ".json") != 0)
            continue;
        char path[512];
        snprintf(path, sizeof path, "graphs/%s", de->d_name);
        remat_graph *g;
        remat_err err;
        remat_err_init(&err);
        ck_assert_int_eq(remat_graph_load_file(path, &g, &err), REMAT_OK);
        if (g->n_ops > 60) {
            remat_graph_destroy(g);
            continue;
        }
        remat_analysis *a;
        ck_assert_int_eq(remat_analyze(g, &a, &err), REMAT_OK);
        saw_mlp2 |= strcmp(de->d_name, "mlp2.json") == 0;
        /* The activation budget at 60% of store-all's: binding on every graph,
         * and feasible on most. */
        uint64_t budget = store_all_peak(a, 1) * 6 / 10;
        exact_run x = run_exact(a, 1, budget, limit);
        ck_assert_msg(x.st == REMAT_OK || x.st == REMAT_EINFEASIBLE, "%s: %s", path, x.msg);
        /* The slack covers what runs outside the solver's clock checks
         * (building the program, replays) on a loaded machine. */
        ck_assert_msg(x.seconds < limit + 2.0, "%s took %.2f s with a %.1f s limit", path, x.seconds, limit);
        if (x.st == REMAT_OK) {
            ck_assert(!strcmp(x.status, "optimal") || !strcmp(x.status, "time_limit") ||
                      !strcmp(x.status, "outside_class"));
            printf("exact %-24s %3u ops: %-10s gap %.3f, %.2f s\n", de->d_name, g->n_ops, x.status, x.gap, x.seconds);
        } else {
            printf("exact %-24s %3u ops: infeasible at 60%% of store-all's activation peak, %.2f s\n", de->d_name,
                   g->n_ops, x.seconds);
        }
        solved++;
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
    }
    closedir(d);
    ck_assert(saw_mlp2);
    ck_assert_int_gt(solved, 0);
}
END_TEST

#if !REMAT_HAVE_GLPK
/* Built without GLPK (no /usr/include/glpk.h): the strategy says so. */
START_TEST(exact_should_say_when_glpk_is_missing)
{
    remat_graph *g;
    remat_analysis *a = t_analyze("{\"format\": \"remat-graph\", \"version\": 1,"
                                  " \"inputs\": [{\"id\": \"x\", \"bytes\": 64}],"
                                  " \"ops\": [{\"id\": \"loss\", \"op\": \"f\", \"inputs\": [\"x\"], \"bytes\": 4, "
                                  "\"flops\": 1}], \"outputs\": [\"loss\"]}",
                                  &g);
    exact_run x = run_exact(a, 0, 1000, 1);
    ck_assert_int_eq(x.st, REMAT_EUNSUPPORTED);
    ck_assert_msg(strstr(x.msg, "needs GLPK") != NULL, "%s", x.msg);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST
#endif

Suite *exact_suite(void)
{
    Suite *s = suite_create("exact");
    TCase *tc = tcase_create("exact");
    tcase_set_timeout(tc, 120);
#if !REMAT_HAVE_GLPK
    tcase_add_test(tc, exact_should_say_when_glpk_is_missing);
    suite_add_tcase(s, tc);
    return s;
#endif
    tcase_add_test(tc, exact_should_be_at_most_keep_set_optimum_on_plain_chains);
    tcase_add_test(tc, exact_should_be_at_most_keep_set_optimum_on_chains);
    tcase_add_test(tc, exact_should_be_at_most_keep_set_optimum_on_dags);
    tcase_add_test(tc, exact_should_name_the_smallest_budget_to_the_byte);
    tcase_add_test(tc, exact_should_need_no_solver_when_store_all_fits);
    tcase_add_test(tc, exact_should_refuse_graphs_too_large_for_its_program);
    tcase_add_test(tc, exact_should_fail_cleanly_when_memory_runs_out);
    tcase_add_test(tc, exact_should_solve_bundled_graphs_within_the_time_limit);
    suite_add_tcase(s, tc);
    return s;
}

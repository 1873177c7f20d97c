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
 *    BWD order: a lower bound on exact (check_exact_random.c, which also
 *    holds the comparisons on random graphs against both oracles).
 * 3. Infeasible budgets: the error names the smallest peak, and that number
 *    is right to the byte (it is met; one byte less is refused).
 * 4. The bundled graphs of up to 60 ops are solved within a time limit.
 *
 * This file holds the graphs, oracle 1 and the run of exact that both files
 * use (check_exact.h), and the tests of 3 and 4.
 */
#define _POSIX_C_SOURCE 200809L
#include "check_exact.h"
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

uint32_t rnd(uint64_t *s, uint32_t n)
{
    return (uint32_t)(splitmix(s) % n);
}

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

/* Writes a graph of n_ops ops (plus the loss) into b. PLAIN_CHAIN: single
 * outputs, each op reads the previous one and saves its input. */
void gen_graph(uint64_t *rng, int shape, uint32_t n_ops, jbuf *b)
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

void keep_table_build(const remat_analysis *a, keep_table *kt)
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

void keep_table_destroy(keep_table *kt)
{
    free(kt->valid);
    free(kt->metric[0]);
    free(kt->metric[1]);
    free(kt->extra);
}

/* Least extra FLOPs of a keep set within budget (UINT64_MAX: none fits). */
uint64_t keep_opt(const keep_table *kt, int kind, uint64_t budget)
{
    uint64_t best = UINT64_MAX;
    for (uint32_t m = 0; m < kt->sets; m++)
        if (kt->valid[m] && kt->metric[kind][m] <= budget && kt->extra[m] < best)
            best = kt->extra[m];
    return best;
}

uint64_t keep_min_metric(const keep_table *kt, int kind)
{
    uint64_t best = UINT64_MAX;
    for (uint32_t m = 0; m < kt->sets; m++)
        if (kt->valid[m] && kt->metric[kind][m] < best)
            best = kt->metric[kind][m];
    return best;
}

/* ---- Running exact --------------------------------------------------------------- */

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

double param_num(const char *json, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = json ? strstr(json, pat) : NULL;
    return p ? strtod(p + strlen(pat), NULL) : -1;
}

exact_run run_exact(const remat_analysis *a, int kind, uint64_t budget, double time_limit)
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

/* ---- Tests -------------------------------------------------------------------------- */

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
    exact_random_tests(tc);
    tcase_add_test(tc, exact_should_name_the_smallest_budget_to_the_byte);
    tcase_add_test(tc, exact_should_need_no_solver_when_store_all_fits);
    tcase_add_test(tc, exact_should_refuse_graphs_too_large_for_its_program);
    tcase_add_test(tc, exact_should_fail_cleanly_when_memory_runs_out);
    tcase_add_test(tc, exact_should_solve_bundled_graphs_within_the_time_limit);
    suite_add_tcase(s, tc);
    return s;
}

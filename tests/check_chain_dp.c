/*
 * check_chain_dp.c - the chain dynamic program against independent oracles:
 * an exhaustive search over keep sets (every subset of activations, each
 * scheduled by the default policy and replayed) on random heterogeneous
 * chains, and sqrtn, chen-greedy and revolve at the same budgets. Every
 * returned plan is replayed again here; every refusal must name a budget at
 * which planning succeeds.
 */
#include "test_util.h"
#include "util/util_internal.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- a seeded generator of random heterogeneous chains ------------------ */

static uint64_t next(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t between(uint64_t *s, uint64_t lo, uint64_t hi)
{
    return lo + next(s) % (hi - lo + 1);
}

/* A chain of n ops (the last a loss) with random bytes and FLOPs per op;
 * each op reads the previous output and, mostly, a param of its own, and
 * saves its input (the default), its output (a ReLU), both, or nothing (an
 * add); some have forward or backward workspace. Sizes are multiples of 64
 * bytes, as real tensors' are of their element size, so that chain-dp's
 * default step divides every figure and it plans exactly (chain_dp.c). */
static char *random_chain(uint64_t seed, uint32_t n)
{
    uint64_t s = seed;
    size_t cap = 1024 + (size_t)n * 512, len = 0;
    char *j = malloc(cap);
    ck_assert_ptr_nonnull(j);
#define PUT(...)                                                        \
    do {                                                                \
        len += (size_t)snprintf(j + len, cap - len, __VA_ARGS__);       \
        ck_assert_uint_lt(len, cap);                                    \
    } while (0)
    PUT("{\"format\": \"remat-graph\", \"version\": 1, \"name\": \"rnd%llu\", ", (unsigned long long)seed);
    PUT("\"inputs\": [{\"id\": \"x\", \"bytes\": %llu}], \"params\": [", (unsigned long long)between(&s, 4, 128) * 64);
    uint8_t has_param[16] = {0};
    int first = 1;
    for (uint32_t i = 0; i + 1 < n; i++) {
        has_param[i] = i == 0 || between(&s, 0, 9) < 7;
        if (has_param[i]) {
            PUT("%s{\"id\": \"w%u\", \"bytes\": %llu}", first ? "" : ", ", i,
                (unsigned long long)between(&s, 1, 64) * 64);
            first = 0;
        }
    }
    PUT("], \"ops\": [");
    for (uint32_t i = 0; i + 1 < n; i++) {
        char prev[16], ins[48];
        snprintf(prev, sizeof prev, i ? "o%u" : "x", i - 1);
        if (has_param[i])
            snprintf(ins, sizeof ins, "\"%s\", \"w%u\"", prev, i);
        else
            snprintf(ins, sizeof ins, "\"%s\"", prev);
        PUT("{\"id\": \"o%u\", \"op\": \"f\", \"inputs\": [%s], \"bytes\": %llu, \"flops\": %llu", i, ins,
            (unsigned long long)between(&s, 4, 256) * 64, (unsigned long long)between(&s, 1, 1000000));
        switch (between(&s, 0, 5)) {
        case 0: PUT(", \"saves\": [\"o%u\"]", i); break;
        case 1: PUT(", \"saves\": [%s, \"o%u\"]", ins, i); break;
        case 2: PUT(", \"saves\": []"); break;
        default: break; /* its inputs */
        }
        if (between(&s, 0, 4) == 0)
            PUT(", \"workspace\": %llu", (unsigned long long)between(&s, 1, 128) * 64);
        if (between(&s, 0, 4) == 0)
            PUT(", \"bwd_workspace\": %llu", (unsigned long long)between(&s, 1, 128) * 64);
        PUT("}, ");
    }
    PUT("{\"id\": \"loss\", \"op\": \"sum\", \"inputs\": [\"o%u\"], \"bytes\": 64, \"flops\": %llu, \"saves\": []}",
        n - 2, (unsigned long long)between(&s, 1, 1000));
    PUT("], \"outputs\": [\"loss\"]}");
#undef PUT
    return j;
}

/* ---- the oracle: every keep set ----------------------------------------- */

typedef struct {
    uint32_t n;       /* keep sets */
    uint64_t *metric; /* UINT64_MAX: not schedulable */
    uint64_t *extra;
} exhaustive;

static uint64_t metric_of(const remat_replay_result *r, remat_budget_kind k)
{
    return k == REMAT_BUDGET_ACTIVATION ? r->activation_peak : r->peak_bytes;
}

static void exhaust(const remat_analysis *a, remat_budget_kind kind, exhaustive *x)
{
    const remat_graph *g = a->g;
    uint32_t act[32], na = 0;
    for (uint32_t t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].kind == REMAT_TENSOR_ACTIVATION)
            act[na++] = t;
    ck_assert_uint_le(na, 14);
    x->n = 1u << na;
    x->metric = malloc(x->n * sizeof *x->metric);
    x->extra = malloc(x->n * sizeof *x->extra);
    uint8_t *keep = calloc(g->n_tensors, 1);
    ck_assert(x->metric && x->extra && keep);
    remat_schedule s;
    remat_schedule_init(&s);
    for (uint32_t mask = 0; mask < x->n; mask++) {
        for (uint32_t i = 0; i < na; i++)
            keep[act[i]] = (mask >> i) & 1;
        remat_err err;
        remat_err_init(&err);
        remat_schedule_clear(&s);
        x->metric[mask] = UINT64_MAX;
        if (remat_schedule_from_keep(a, keep, &s, &err) != REMAT_OK)
            continue;
        remat_replay_result r;
        ck_assert_int_eq(remat_replay(a, &s, NULL, NULL, &r, &err), REMAT_OK);
        ck_assert_msg(r.valid, "keep set %u: %s", mask, err.msg);
        x->metric[mask] = metric_of(&r, kind);
        x->extra[mask] = r.flops_recompute;
        remat_replay_result_destroy(&r);
    }
    remat_schedule_destroy(&s);
    free(keep);
}

/* The least extra FLOPs of a keep set within budget; 0 if none fits. */
static int best_within(const exhaustive *x, uint64_t budget, uint64_t *extra)
{
    int found = 0;
    for (uint32_t i = 0; i < x->n; i++)
        if (x->metric[i] <= budget && (!found || x->extra[i] < *extra)) {
            *extra = x->extra[i];
            found = 1;
        }
    return found;
}

/* ---- planning, checked -------------------------------------------------- */

typedef struct {
    remat_status st;
    uint64_t extra, metric, named; /* named: the smallest budget an EINFEASIBLE names */
    char params[512];
} outcome;

/* The last "(N B)" of a message. */
static uint64_t named_bytes(const char *msg)
{
    const char *p = msg, *last = NULL;
    while ((p = strchr(p, '(')) != NULL)
        last = p++;
    ck_assert_msg(last != NULL, "no '(N B)' in '%s'", msg);
    return strtoull(last + 1, NULL, 10);
}

static outcome plan(const remat_analysis *a, const char *strategy, remat_budget_kind kind, uint64_t budget,
                    uint32_t slots, uint64_t step)
{
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.strategy = strategy;
    o.budget_kind = kind;
    o.budget = budget;
    o.dp_slots = slots;
    o.dp_step = step;
    remat_plan p;
    remat_replay_result r;
    remat_err err;
    remat_err_init(&err);
    outcome out;
    memset(&out, 0, sizeof out);
    out.st = remat_plan_make(a, &o, &p, &r, &err);
    if (out.st == REMAT_OK) {
        /* Replayed again, independently of the planner's own replay. */
        remat_replay_result r2;
        remat_err e2;
        remat_err_init(&e2);
        ck_assert_int_eq(remat_replay(a, &p.schedule, NULL, NULL, &r2, &e2), REMAT_OK);
        ck_assert_msg(r2.valid, "%s on %s: %s", strategy, a->g->name, e2.msg);
        out.metric = metric_of(&r2, kind);
        out.extra = r2.flops_recompute;
        ck_assert_msg(kind == REMAT_BUDGET_NONE || out.metric <= budget, "%s on %s: replayed %llu over budget %llu",
                      strategy, a->g->name, (unsigned long long)out.metric, (unsigned long long)budget);
        snprintf(out.params, sizeof out.params, "%s", p.params_json ? p.params_json : "");
        remat_replay_result_destroy(&r2);
    } else if (out.st == REMAT_EINFEASIBLE) {
        ck_assert_msg_contains(&err, "smallest");
        out.named = named_bytes(err.msg);
        ck_assert_msg(out.named > budget, "%s names %llu, not above the budget %llu", err.msg,
                      (unsigned long long)out.named, (unsigned long long)budget);
    } else {
        snprintf(out.params, sizeof out.params, "%s", err.msg);
    }
    remat_replay_result_destroy(&r);
    remat_plan_destroy(&p);
    return out;
}

static remat_analysis *analyze_json(const char *json, remat_graph **g)
{
    return t_analyze(json, g);
}

/* chain-dp at budget: feasible whenever the oracle or another strategy is,
 * and never more extra FLOPs than either. */
static void check_budget(const remat_analysis *a, const exhaustive *x, remat_budget_kind kind, uint64_t budget)
{
    static const char *const others[] = {"sqrtn", "chen-greedy", "revolve"};
    outcome dp = plan(a, "chain-dp", kind, budget, 0, 0);
    ck_assert_msg(dp.st == REMAT_OK || dp.st == REMAT_EINFEASIBLE, "%s", dp.params);
    uint64_t ex = 0;
    if (best_within(x, budget, &ex)) {
        ck_assert_msg(dp.st == REMAT_OK,
                      "%s budget %llu (%s): a keep set with %llu extra FLOPs fits, chain-dp names %llu",
                      a->g->name, (unsigned long long)budget, kind == REMAT_BUDGET_ACTIVATION ? "activation" : "total",
                      (unsigned long long)ex, (unsigned long long)dp.named);
        ck_assert_msg(dp.extra <= ex, "%s budget %llu (%s): chain-dp %llu extra FLOPs, a keep set %llu (%s)",
                      a->g->name, (unsigned long long)budget, kind == REMAT_BUDGET_ACTIVATION ? "activation" : "total",
                      (unsigned long long)dp.extra, (unsigned long long)ex, dp.params);
    }
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        outcome o = plan(a, others[i], kind, budget, 0, 0);
        if (o.st != REMAT_OK)
            continue;
        ck_assert_msg(dp.st == REMAT_OK, "%s budget %llu: %s fits, chain-dp does not", a->g->name,
                      (unsigned long long)budget, others[i]);
        ck_assert_msg(dp.extra <= o.extra, "%s budget %llu (%s): chain-dp %llu > %s %llu (%s)", a->g->name,
                      (unsigned long long)budget, kind == REMAT_BUDGET_ACTIVATION ? "activation" : "total",
                      (unsigned long long)dp.extra, others[i], (unsigned long long)o.extra, dp.params);
    }
    if (dp.st == REMAT_EINFEASIBLE) {
        /* The named budget is one chain-dp meets. */
        outcome again = plan(a, "chain-dp", kind, dp.named, 0, 0);
        ck_assert_msg(again.st == REMAT_OK, "%s: chain-dp named %llu but fails there", a->g->name,
                      (unsigned long long)dp.named);
    }
}

/* Budgets: every distinct metric of a keep set on the oracle's Pareto
 * front (exactly: where rounding hurts most), a grid between half the
 * least and the most, and 0. */
static void check_graph(const remat_analysis *a, remat_budget_kind kind)
{
    exhaustive x;
    exhaust(a, kind, &x);
    uint64_t lo = UINT64_MAX, hi = 0;
    for (uint32_t i = 0; i < x.n; i++)
        if (x.metric[i] != UINT64_MAX) {
            lo = x.metric[i] < lo ? x.metric[i] : lo;
            hi = x.metric[i] > hi ? x.metric[i] : hi;
        }
    ck_assert_uint_ne(lo, UINT64_MAX);
    check_budget(a, &x, kind, 0);
    for (int k = 0; k <= 8; k++)
        check_budget(a, &x, kind, lo / 2 + (hi - lo / 2) * (uint64_t)k / 8);
    /* The Pareto front: metrics m where the least extra FLOPs drops. */
    uint64_t prev = UINT64_MAX;
    int shown = 0;
    for (uint64_t m = lo; shown < 6;) {
        uint64_t e = 0, next_m = UINT64_MAX;
        best_within(&x, m, &e);
        if (e < prev) {
            check_budget(a, &x, kind, m);
            prev = e;
            shown++;
        }
        for (uint32_t i = 0; i < x.n; i++)
            if (x.metric[i] > m && x.metric[i] < next_m)
                next_m = x.metric[i];
        if (next_m == UINT64_MAX)
            break;
        m = next_m;
    }
    free(x.metric);
    free(x.extra);
}

START_TEST(chain_dp_should_never_lose_to_keep_sets_or_other_strategies_on_random_chains)
{
    uint64_t seed = 1000 + (uint64_t)_i;
    uint64_t s = seed;
    uint32_t n = (uint32_t)between(&s, 3, 12);
    char *json = random_chain(seed, n);
    remat_graph *g;
    remat_analysis *a = analyze_json(json, &g);
    check_graph(a, REMAT_BUDGET_ACTIVATION);
    check_graph(a, REMAT_BUDGET_TOTAL);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    free(json);
}
END_TEST

START_TEST(chain_dp_should_recompute_nothing_without_a_budget)
{
    char *json = random_chain(7, 12);
    remat_graph *g;
    remat_analysis *a = analyze_json(json, &g);
    outcome o = plan(a, "chain-dp", REMAT_BUDGET_NONE, 0, 0, 0);
    ck_assert_int_eq(o.st, REMAT_OK);
    ck_assert_uint_eq(o.extra, 0);
    ck_assert_ptr_nonnull(strstr(o.params, "\"plan\": \"store-tapes\""));
    /* At the metric of keeping every tape, still nothing is recomputed. */
    outcome at = plan(a, "chain-dp", REMAT_BUDGET_ACTIVATION, o.metric, 0, 0);
    (void)at;
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    free(json);
}
END_TEST

/* Any discretization, however coarse, returns only plans that replay
 * within the budget; the table's cost at the chosen level is the replayed
 * extra FLOPs (the profile's costs are exact). */
START_TEST(chain_dp_should_stay_within_budget_at_any_discretization)
{
    char *json = random_chain(42, 12);
    remat_graph *g;
    remat_analysis *a = analyze_json(json, &g);
    outcome all = plan(a, "chain-dp", REMAT_BUDGET_NONE, 0, 0, 0);
    static const uint32_t slots[] = {1, 2, 3, 5, 8, 16, 64, 256, 1024, 4096};
    for (int k = 1; k <= 6; k++) {
        uint64_t budget = all.metric * (uint64_t)k / 7;
        uint64_t prev_extra = UINT64_MAX;
        for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++) {
            outcome o = plan(a, "chain-dp", REMAT_BUDGET_ACTIVATION, budget, slots[i], 0);
            ck_assert_msg(o.st == REMAT_OK || o.st == REMAT_EINFEASIBLE, "%s", o.params);
            if (o.st != REMAT_OK)
                continue;
            const char *pe = strstr(o.params, "\"predicted_extra_flops\": ");
            ck_assert_ptr_nonnull(pe);
            if (strstr(o.params, "\"plan\": \"dp\""))
                ck_assert_msg(strtoull(pe + 25, NULL, 10) == o.extra, "predicted %s, replayed %llu", o.params,
                              (unsigned long long)o.extra);
            (void)prev_extra;
        }
        /* A step in bytes works the same way. */
        outcome o = plan(a, "chain-dp", REMAT_BUDGET_ACTIVATION, budget, 0, budget / 10 + 1);
        ck_assert(o.st == REMAT_OK || o.st == REMAT_EINFEASIBLE);
    }
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    free(json);
}
END_TEST

START_TEST(chain_dp_should_refuse_a_step_that_makes_too_many_levels)
{
    remat_gen_opts go;
    remat_gen_opts_init(&go, REMAT_GEN_CHAIN);
    go.ops = 8; /* 1 MiB activations */
    remat_err err;
    remat_err_init(&err);
    size_t len;
    char *json = remat_gen_json(&go, &len, &err);
    ck_assert_ptr_nonnull(json);
    remat_graph *g;
    remat_analysis *a = analyze_json(json, &g);
    outcome all = plan(a, "chain-dp", REMAT_BUDGET_ACTIVATION, UINT64_MAX, 0, 0);
    /* A budget that keeping every tape meets returns at once, whatever the
     * step... */
    outcome o = plan(a, "chain-dp", REMAT_BUDGET_ACTIVATION, all.metric, 0, 1);
    ck_assert_int_eq(o.st, REMAT_OK);
    ck_assert_uint_eq(o.extra, 0);
    /* ...but a tighter one with a 1-byte step would need millions of
     * memory levels. */
    remat_plan_options po;
    remat_plan_options_init(&po);
    po.strategy = "chain-dp";
    po.budget_kind = REMAT_BUDGET_ACTIVATION;
    po.budget = all.metric - 1;
    po.dp_step = 1;
    remat_plan p;
    remat_replay_result r;
    remat_err_init(&err);
    ck_assert_int_eq(remat_plan_make(a, &po, &p, &r, &err), REMAT_EINVAL);
    ck_assert_msg_contains(&err, "use a larger dp_step or fewer dp_slots");
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    remat_free(json);
}
END_TEST

/* A dropout-like op that cannot be replayed: never recomputed, and the
 * plan is still valid and within budget. */
START_TEST(chain_dp_should_never_recompute_a_non_recomputable_op)
{
    const char *json =
        "{\"format\": \"remat-graph\", \"version\": 1, \"name\": \"nr\","
        " \"inputs\": [{\"id\": \"x\", \"bytes\": 1024}],"
        " \"params\": [{\"id\": \"w1\", \"bytes\": 64}, {\"id\": \"w2\", \"bytes\": 64},"
        "  {\"id\": \"w3\", \"bytes\": 64}],"
        " \"ops\": ["
        "  {\"id\": \"a\", \"op\": \"mm\", \"inputs\": [\"x\", \"w1\"], \"bytes\": 4096, \"flops\": 100},"
        "  {\"id\": \"b\", \"op\": \"mm\", \"inputs\": [\"a\", \"w2\"], \"bytes\": 4096, \"flops\": 100},"
        "  {\"id\": \"d\", \"op\": \"dropout\", \"inputs\": [\"b\"], \"bytes\": 4096, \"flops\": 10,"
        "   \"recomputable\": false},"
        "  {\"id\": \"c\", \"op\": \"mm\", \"inputs\": [\"d\", \"w3\"], \"bytes\": 4096, \"flops\": 100},"
        "  {\"id\": \"e\", \"op\": \"relu\", \"inputs\": [\"c\"], \"bytes\": 4096, \"flops\": 10, \"saves\": [\"e\"]},"
        "  {\"id\": \"loss\", \"op\": \"sum\", \"inputs\": [\"e\"], \"bytes\": 4, \"flops\": 1, \"saves\": []}],"
        " \"outputs\": [\"loss\"]}";
    remat_graph *g;
    remat_analysis *a = analyze_json(json, &g);
    uint32_t d = t_op(g, "d");
    for (uint64_t budget = 4096; budget <= 6 * 4096; budget += 2048) {
        remat_plan_options o;
        remat_plan_options_init(&o);
        o.strategy = "chain-dp";
        o.budget_kind = REMAT_BUDGET_ACTIVATION;
        o.budget = budget;
        remat_plan p;
        remat_replay_result r;
        remat_err err;
        remat_err_init(&err);
        remat_status st = remat_plan_make(a, &o, &p, &r, &err);
        ck_assert_msg(st == REMAT_OK || st == REMAT_EINFEASIBLE, "%s", err.msg);
        if (st == REMAT_OK)
            ck_assert_uint_eq(r.recompute_counts[d], 0);
        remat_replay_result_destroy(&r);
        remat_plan_destroy(&p);
    }
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* A chain whose boundaries b, v, r share one storage (logits reshaped
 * before the loss): the cuts at b and v merge into one stage (so that the
 * profile's figures stay each stage's own), and chain-dp still never loses
 * to revolve, which keeps them. */
START_TEST(chain_dp_should_handle_cuts_that_share_storage)
{
    const char *json =
        "{\"format\": \"remat-graph\", \"version\": 1, \"name\": \"views\","
        " \"inputs\": [{\"id\": \"x\", \"bytes\": 1024}],"
        " \"params\": [{\"id\": \"w1\", \"bytes\": 64}, {\"id\": \"w2\", \"bytes\": 64}],"
        " \"ops\": ["
        "  {\"id\": \"a\", \"op\": \"mm\", \"inputs\": [\"x\", \"w1\"], \"bytes\": 4096, \"flops\": 100},"
        "  {\"id\": \"b\", \"op\": \"mm\", \"inputs\": [\"a\", \"w2\"], \"bytes\": 16384, \"flops\": 300},"
        "  {\"id\": \"v\", \"op\": \"view\", \"inputs\": [\"b\"], \"alias_of\": \"b\"},"
        "  {\"id\": \"r\", \"op\": \"reshape\", \"inputs\": [\"v\"], \"alias_of\": \"v\"},"
        "  {\"id\": \"ls\", \"op\": \"logsoftmax\", \"inputs\": [\"r\"], \"bytes\": 16384, \"flops\": 50,"
        "   \"saves\": [\"ls\"]},"
        "  {\"id\": \"loss\", \"op\": \"nll\", \"inputs\": [\"ls\"], \"bytes\": 4, \"flops\": 1}],"
        " \"outputs\": [\"loss\"]}";
    remat_graph *g;
    remat_analysis *a = analyze_json(json, &g);
    outcome all = plan(a, "chain-dp", REMAT_BUDGET_ACTIVATION, UINT64_MAX, 0, 0);
    ck_assert_ptr_nonnull(strstr(all.params, "\"stages\": 4, \"blocks\": 6, \"merged_cuts\": 2"));
    for (int k = 1; k <= 40; k++) {
        uint64_t budget = all.metric * (uint64_t)k / 40;
        outcome dp = plan(a, "chain-dp", REMAT_BUDGET_ACTIVATION, budget, 0, 0);
        outcome rv = plan(a, "revolve", REMAT_BUDGET_ACTIVATION, budget, 0, 0);
        if (rv.st == REMAT_OK)
            ck_assert_msg(dp.st == REMAT_OK && dp.extra <= rv.extra, "budget %llu: chain-dp %llu, revolve %llu",
                          (unsigned long long)budget, (unsigned long long)dp.extra, (unsigned long long)rv.extra);
    }
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* On a homogeneous chain the family holds Revolve's binomial schedules:
 * never more extra FLOPs than revolve at any budget. */
START_TEST(chain_dp_should_match_revolve_on_homogeneous_chains)
{
    remat_gen_opts go;
    remat_gen_opts_init(&go, REMAT_GEN_CHAIN);
    go.ops = 20;
    remat_err err;
    remat_err_init(&err);
    size_t len;
    char *json = remat_gen_json(&go, &len, &err);
    ck_assert_ptr_nonnull(json);
    remat_graph *g;
    remat_analysis *a = analyze_json(json, &g);
    outcome all = plan(a, "chain-dp", REMAT_BUDGET_NONE, 0, 0, 0);
    for (int kk = 0; kk < 2; kk++) {
        remat_budget_kind kind = kk ? REMAT_BUDGET_TOTAL : REMAT_BUDGET_ACTIVATION;
        outcome top = plan(a, "store-all", kind, UINT64_MAX, 0, 0);
        for (int k = 1; k <= 24; k++) {
            uint64_t budget = top.metric * (uint64_t)k / 24;
            outcome rv = plan(a, "revolve", kind, budget, 0, 0);
            outcome dp = plan(a, "chain-dp", kind, budget, 0, 0);
            if (rv.st == REMAT_OK)
                ck_assert_msg(dp.st == REMAT_OK && dp.extra <= rv.extra, "budget %llu: chain-dp %llu, revolve %llu",
                              (unsigned long long)budget, (unsigned long long)dp.extra, (unsigned long long)rv.extra);
        }
    }
    (void)all;
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    remat_free(json);
}
END_TEST

/* On a chain of thousands of blocks (grouped into 128 stages) at budgets
 * nothing meets, chain-dp's Revolve candidate is searched as the revolve
 * strategy searches it, from the fewest slots with a sane schedule length:
 * the least budget chain-dp names is never above revolve's, and planning at
 * it succeeds. (It once searched down to one slot: a 30000-block chain
 * took 35 s and 7 GB, and on 5000 blocks it named 42 MiB to revolve's 3.) */
START_TEST(chain_dp_should_name_no_more_than_revolve_on_long_chains)
{
    remat_gen_opts go;
    remat_gen_opts_init(&go, REMAT_GEN_CHAIN);
    go.ops = 3000;
    remat_err err;
    remat_err_init(&err);
    size_t len;
    char *json = remat_gen_json(&go, &len, &err);
    ck_assert_ptr_nonnull(json);
    remat_graph *g;
    remat_analysis *a = analyze_json(json, &g);
    for (int kk = 0; kk < 2; kk++) {
        remat_budget_kind kind = kk ? REMAT_BUDGET_TOTAL : REMAT_BUDGET_ACTIVATION;
        outcome rv = plan(a, "revolve", kind, 1, 0, 0);
        outcome dp = plan(a, "chain-dp", kind, 1, 0, 0);
        ck_assert_int_eq(rv.st, REMAT_EINFEASIBLE);
        ck_assert_int_eq(dp.st, REMAT_EINFEASIBLE);
        ck_assert_msg(dp.named <= rv.named, "chain-dp names %llu, revolve %llu", (unsigned long long)dp.named,
                      (unsigned long long)rv.named);
        outcome at = plan(a, "chain-dp", kind, dp.named, 0, 0);
        ck_assert_msg(at.st == REMAT_OK, "chain-dp at the %llu it named: %s", (unsigned long long)dp.named,
                      at.params);
    }
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    remat_free(json);
}
END_TEST

/* Every allocation of chain-dp's planning fails in turn: each reports out
 * of memory and frees what it made (ASan's leak check). */
START_TEST(chain_dp_should_fail_cleanly_when_memory_runs_out)
{
    char *json = random_chain(11, 7);
    remat_graph *g;
    remat_analysis *a = analyze_json(json, &g);
    outcome all = plan(a, "chain-dp", REMAT_BUDGET_ACTIVATION, UINT64_MAX, 0, 0);
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.strategy = "chain-dp";
    o.budget_kind = REMAT_BUDGET_ACTIVATION;
    o.budget = all.metric * 6 / 10; /* the tables, the search and a replay each */
    int failures = 0;
    for (uint64_t n = 1;; n++) {
        remat_plan p;
        remat_replay_result r;
        remat_err err;
        remat_err_init(&err);
        remat__alloc_fail_at(n);
        remat_status st = remat_plan_make(a, &o, &p, &r, &err);
        remat__alloc_fail_at(0);
        remat_replay_result_destroy(&r);
        remat_plan_destroy(&p);
        if (st == REMAT_OK)
            break;
        ck_assert_msg(st == REMAT_ENOMEM, "allocation %llu: %s (%s)", (unsigned long long)n, err.msg,
                      remat_status_str(st));
        ck_assert_msg_contains(&err, "out of memory");
        failures++;
    }
    ck_assert_int_gt(failures, 20);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    free(json);
}
END_TEST

Suite *chain_dp_suite(void)
{
    Suite *s = suite_create("chain_dp");
    TCase *tc = tcase_create("chain_dp");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, chain_dp_should_never_lose_to_keep_sets_or_other_strategies_on_random_chains, 0, 40);
    tcase_add_test(tc, chain_dp_should_recompute_nothing_without_a_budget);
    tcase_add_test(tc, chain_dp_should_stay_within_budget_at_any_discretization);
    tcase_add_test(tc, chain_dp_should_refuse_a_step_that_makes_too_many_levels);
    tcase_add_test(tc, chain_dp_should_never_recompute_a_non_recomputable_op);
    tcase_add_test(tc, chain_dp_should_handle_cuts_that_share_storage);
    tcase_add_test(tc, chain_dp_should_match_revolve_on_homogeneous_chains);
    tcase_add_test(tc, chain_dp_should_name_no_more_than_revolve_on_long_chains);
    tcase_add_test(tc, chain_dp_should_fail_cleanly_when_memory_runs_out);
    suite_add_tcase(s, tc);
    return s;
}

/*
 * check_engine.c - one accounting engine behind every peak.
 *
 * DESIGN's promise is that a peak printed by one part of remat is the peak
 * replayed by another. Four readers of a schedule's memory exist: the replay
 * itself (remat_replay, and its stepping cursor), DTR's driver (which makes
 * its schedule while a cursor replays it), the allocation trace that the
 * allocator simulation, static offsets and reports read, and an independent
 * oracle (tests/oracle.c) that shares no code with src/exec. For generated
 * graphs and DTR schedules at several budgets, this suite checks that all of
 * them report the same live bytes after every step and the same high-water
 * mark during it, and that the allocator's own figures rest on the same
 * intervals.
 */
#include "exec_util.h"
#include "oracle.h"
#include "plan/dtr_internal.h"
#include "remat/alloc.h"

#include <stdio.h>
#include <stdlib.h>

/* Per-step figures from an observer's on_step. */
typedef struct {
    size_t cap, n;
    uint64_t *hw, *live;
} steps;

static void steps_init(steps *S, size_t cap)
{
    S->cap = cap;
    S->n = 0;
    S->hw = calloc(cap, sizeof *S->hw);
    S->live = calloc(cap, sizeof *S->live);
    ck_assert(S->hw && S->live);
}

static void steps_free(steps *S)
{
    free(S->hw);
    free(S->live);
}

static int on_step(void *ctx, size_t index, remat_instr in, uint64_t live_after, uint64_t high_water,
                   const uint64_t *by_cat)
{
    (void)in;
    (void)by_cat;
    steps *S = ctx;
    if (index != S->n || index >= S->cap)
        return 1; /* out of order: the replay stops with EINTERNAL */
    S->hw[index] = high_water;
    S->live[index] = live_after;
    S->n++;
    return 0;
}

/* One generated graph, loaded, with the id maps oracle_run needs. */
typedef struct {
    spec G;
    remat_graph *g;
    remat_analysis *a;
    int t_of[GN_T], op_of[GN_OPS]; /* graph -> spec */
} ecase;

static void ecase_load(ecase *C, char *json, size_t cap)
{
    size_t len = spec_json(&C->G, json, cap);
    remat_err err;
    remat_err_init(&err);
    ck_assert_msg(remat_graph_load_json(json, len, "gen.json", &C->g, &err) == REMAT_OK, "%s\n%s", err.msg, json);
    ck_assert_msg(remat_analyze(C->g, &C->a, &err) == REMAT_OK, "%s\n%s", err.msg, json);
    for (int t = 0; t < C->G.n_t; t++)
        C->t_of[t_tensor(C->g, C->G.tid[t])] = t;
    for (int k = 0; k < C->G.n_ops; k++)
        C->op_of[t_op(C->g, C->G.oid[k])] = k;
}

/* Live bytes after step i and during it, summed from the allocation
 * trace's intervals alone: an interval counts during every step from the
 * one that allocates it to the one after which it is released, and after
 * every step before that one. */
static void interval_sums(const remat_alloc_trace *t, size_t i, uint64_t *live, uint64_t *hw)
{
    *live = *hw = 0;
    for (size_t k = 0; k < t->n; k++) {
        const remat_alloc_interval *v = &t->iv[k];
        if (v->first != REMAT_ALLOC_BEFORE && v->first > i)
            continue;
        if (v->last == REMAT_ALLOC_NEVER || v->last >= i)
            *hw += v->bytes;
        if (v->last == REMAT_ALLOC_NEVER || v->last > i)
            *live += v->bytes;
    }
}

START_TEST(engine_should_give_every_reader_the_same_live_bytes_per_step)
{
    enum { N_GRAPHS = 150, JSON_CAP = 1 << 16, CAP = 4096 };
    static const double fractions[] = {1.0, 0.8, 0.6, 0.45};
    uint64_t seed = 0x656e67696e65ULL; /* fixed: a failure reproduces */
    char *json = malloc(JSON_CAP);
    ecase *C = malloc(sizeof *C);
    oracle O;
    O.hw = malloc(CAP * sizeof *O.hw);
    O.live_after = malloc(CAP * sizeof *O.live_after);
    O.hw_cat = malloc(CAP * REMAT_CAT_COUNT * sizeof *O.hw_cat);
    ck_assert(json && C && O.hw && O.live_after && O.hw_cat);
    uint64_t compared = 0, evicting = 0, steps_checked = 0;
    for (int n = 0; n < N_GRAPHS; n++) {
        spec_generate(&seed, &C->G);
        spec_derive(&C->G);
        ecase_load(C, json, JSON_CAP);
        remat_plan_options o;
        remat_plan_options_init(&o);
        if (oracle_rnd(&seed, 3) == 0) {
            o.extras.optimizer_state = oracle_rnd(&seed, 5000);
            o.extras.comm_buffers = oracle_rnd(&seed, 5000);
            o.extras.workspace = oracle_rnd(&seed, 5000);
            o.extras.optimizer_workspace = oracle_rnd(&seed, 50000);
        }
        o.budget_kind = n % 2 ? REMAT_BUDGET_TOTAL : REMAT_BUDGET_ACTIVATION;
        remat_schedule sa;
        build_keep(C->a, NULL, &sa);
        remat_replay_result r0;
        replay_valid(C->a, &sa, &o.extras, &r0);
        uint64_t top = o.budget_kind == REMAT_BUDGET_TOTAL ? r0.peak_bytes : r0.activation_peak;
        remat_replay_result_destroy(&r0);
        remat_schedule_destroy(&sa);

        for (size_t f = 0; f < sizeof fractions / sizeof fractions[0]; f++) {
            remat_err err;
            remat_err_init(&err);
            o.budget = (uint64_t)((double)top * fractions[f]);
            /* DTR's driver, watched through its own cursor. */
            steps D;
            steps_init(&D, CAP);
            remat_replay_observer dobs = {&D, NULL, NULL, on_step};
            remat_dtr_static S;
            ck_assert_int_eq(remat__dtr_static_build(C->a, &o, &S, &err), REMAT_OK);
            S.obs = &dobs;
            remat_dtr_run R;
            ck_assert_int_eq(remat__dtr_run_init(&R, &S, &err), REMAT_OK);
            remat_dtr_config cfg = {(remat_dtr_score)(n % REMAT_DTR_SCORES), S.has_fixed && (n / 3) % 2, o.budget,
                                    UINT64_MAX, 0};
            remat_schedule s;
            remat_schedule_init(&s);
            remat_replay_result rd;
            ck_assert_msg(remat__dtr_run(&R, cfg, &s, &rd) == REMAT_OK, "%s\n%s", err.msg, json);
            if (R.abandoned) {
                remat__dtr_run_destroy(&R);
                remat__dtr_static_destroy(&S);
                remat_schedule_destroy(&s);
                steps_free(&D);
                continue;
            }
            evicting += R.evictions > 0;
            ck_assert_uint_lt(s.n + 1, CAP);
            /* The schedule as remat_replay sees it. */
            steps P;
            steps_init(&P, CAP);
            remat_replay_observer pobs = {&P, NULL, NULL, on_step};
            remat_replay_result rp;
            ck_assert_int_eq(remat_replay(C->a, &s, &o.extras, &pobs, &rp, &err), REMAT_OK);
            ck_assert_msg(rp.valid, "%s\n%s", err.msg, json);
            ck_assert_uint_eq(rp.peak_bytes, rd.peak_bytes);
            ck_assert_uint_eq(rp.activation_peak, rd.activation_peak);
            ck_assert_uint_eq(R.peak, o.budget_kind == REMAT_BUDGET_TOTAL ? rp.peak_bytes : rp.activation_peak);
            /* The stepping cursor, driven from outside. */
            remat_replay_cursor *cur;
            ck_assert_int_eq(remat_replay_begin(C->a, &o.extras, NULL, &cur, &err), REMAT_OK);
            uint64_t *cur_live = calloc(s.n + 1, sizeof *cur_live);
            ck_assert_ptr_nonnull(cur_live);
            for (size_t i = 0; i < s.n; i++) {
                ck_assert_int_eq(remat_replay_apply(cur, s.ins[i], &err), REMAT_OK);
                cur_live[i] = remat_replay_live(cur, REMAT_CAT_MASK_ALL);
            }
            remat_replay_result rc;
            ck_assert_int_eq(remat_replay_end(cur, &rc, &err), REMAT_OK);
            ck_assert(rc.valid);
            ck_assert_uint_eq(rc.peak_bytes, rp.peak_bytes);
            remat_replay_result_destroy(&rc);
            remat_replay_cursor_destroy(cur);
            /* The allocator's intervals. */
            remat_alloc_trace t;
            ck_assert_int_eq(remat_alloc_trace_build(C->a, &s, &o.extras, REMAT_ALLOC_ALL, &t, NULL, &err), REMAT_OK);
            remat_alloc_result bf;
            ck_assert_int_eq(remat_alloc_simulate(&t, REMAT_ALLOC_BEST_FIT, 0, &bf, &err), REMAT_OK);
            ck_assert_uint_eq(t.logical_peak, rp.peak_bytes);
            ck_assert_uint_ge(bf.high_water, rp.peak_bytes); /* an address space holds what is live */
            remat_alloc_result_destroy(&bf);
            /* The oracle, from the spec alone. */
            oracle_run(&C->G, C->op_of, C->t_of, &s, &o.extras, &O);
            ck_assert_msg(O.fail_index == SIZE_MAX, "the oracle refuses instruction %zu\n%s", O.fail_index, json);

            ck_assert_uint_eq(D.n, s.n);
            ck_assert_uint_eq(P.n, s.n);
            ck_assert_uint_eq(O.n_steps, s.n);
            for (size_t i = 0; i < s.n; i++) {
                uint64_t tl, th;
                interval_sums(&t, i, &tl, &th);
                ck_assert_msg(D.live[i] == P.live[i] && P.live[i] == O.live_after[i] && O.live_after[i] == tl &&
                                  tl == cur_live[i],
                              "step %zu: live after: dtr %llu, replay %llu, oracle %llu, intervals %llu, cursor %llu\n%s",
                              i, (unsigned long long)D.live[i], (unsigned long long)P.live[i],
                              (unsigned long long)O.live_after[i], (unsigned long long)tl,
                              (unsigned long long)cur_live[i], json);
                ck_assert_msg(D.hw[i] == P.hw[i] && P.hw[i] == O.hw[i] && O.hw[i] == th,
                              "step %zu: high water: dtr %llu, replay %llu, oracle %llu, intervals %llu\n%s", i,
                              (unsigned long long)D.hw[i], (unsigned long long)P.hw[i], (unsigned long long)O.hw[i],
                              (unsigned long long)th, json);
                steps_checked++;
            }
            compared++;
            free(cur_live);
            remat_alloc_trace_destroy(&t);
            remat_replay_result_destroy(&rp);
            remat_replay_result_destroy(&rd);
            steps_free(&P);
            remat__dtr_run_destroy(&R);
            remat__dtr_static_destroy(&S);
            remat_schedule_destroy(&s);
            steps_free(&D);
        }
        remat_analysis_destroy(C->a);
        remat_graph_destroy(C->g);
    }
    printf("engine: %llu DTR schedules (%llu evicting), %llu steps, five readers agree on every one\n",
           (unsigned long long)compared, (unsigned long long)evicting, (unsigned long long)steps_checked);
    /* The comparison must cover what it claims: most runs complete, and
     * many of them evict (the budgets bind). */
    ck_assert_uint_gt(compared, N_GRAPHS * 2);
    ck_assert_uint_gt(evicting, N_GRAPHS / 2);
    free(O.hw);
    free(O.live_after);
    free(O.hw_cat);
    free(C);
    free(json);
}
END_TEST

/* The cursor refuses what remat_replay refuses, at the same instruction,
 * and refuses everything after its first failure. */
START_TEST(engine_cursor_should_stop_at_the_first_illegal_instruction)
{
    remat_graph *g;
    remat_schedule s;
    remat_analysis *a = mlp2_schedule(&g, &s);
    remat_schedule bad;
    sched_copy(&bad, &s);
    sched_del(&bad, 0); /* the first FWD gone: its consumer reads a tensor never produced */
    remat_err e1, e2;
    remat_err_init(&e1);
    remat_err_init(&e2);
    remat_replay_result r;
    ck_assert_int_eq(remat_replay(a, &bad, NULL, NULL, &r, &e1), REMAT_OK);
    ck_assert(!r.valid);
    remat_replay_cursor *c;
    ck_assert_int_eq(remat_replay_begin(a, NULL, NULL, &c, &e2), REMAT_OK);
    size_t i = 0;
    while (i < bad.n && remat_replay_apply(c, bad.ins[i], &e2) == REMAT_OK)
        i++;
    ck_assert_uint_eq(i, r.fail_index);
    ck_assert_int_eq(e2.code, REMAT_ESCHEDULE);
    ck_assert_str_eq(e2.msg, e1.msg);
    remat_err e3;
    remat_err_init(&e3);
    ck_assert_int_eq(remat_replay_apply(c, bad.ins[0], &e3), REMAT_ESCHEDULE);
    ck_assert_ptr_nonnull(strstr(e3.msg, "already failed"));
    remat_replay_result rc;
    ck_assert_int_eq(remat_replay_end(c, &rc, &e3), REMAT_OK);
    ck_assert(!rc.valid);
    ck_assert_uint_eq(rc.fail_index, r.fail_index);
    remat_replay_result_destroy(&rc);
    remat_replay_cursor_destroy(c);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&bad);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

Suite *engine_suite(void)
{
    Suite *s = suite_create("engine");
    TCase *tc = tcase_create("engine");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, engine_should_give_every_reader_the_same_live_bytes_per_step);
    tcase_add_test(tc, engine_cursor_should_stop_at_the_first_illegal_instruction);
    suite_add_tcase(s, tc);
    return s;
}

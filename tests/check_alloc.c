/*
 * check_alloc.c - the allocator simulation against oracles of its own: hand
 * computations (the classic fragmentation pattern, best fit against first
 * fit, the caching model's rounding, segments and pools), a brute-force
 * pairwise check that no two intervals alive at the same time share a byte
 * (in the static plan and in every dynamic policy), a brute-force sweep of
 * the intervals that must find the executor's own peak, the bounds
 * (arena >= logical peak, high-water >= logical peak), the static plan
 * within 5% of the logical peak on every bundled graph under store-all, and
 * --budget-mode arena plans whose arena is within the budget.
 */
#include "test_util.h"
#include "remat/alloc.h"
#include "util/util_internal.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- hand-made traces ---------------------------------------------------- */

/* Builds a trace from events: "+NAME BYTES" allocates, "-NAME" releases.
 * Names are single letters; the instruction of an event is its index. */
static void hand_trace(remat_alloc_trace *t, const char *const *ev, size_t n_ev)
{
    memset(t, 0, sizeof *t);
    t->iv = remat__array(n_ev, sizeof *t->iv);
    t->events = remat__array(n_ev, sizeof *t->events);
    ck_assert(t->iv && t->events);
    t->mask = REMAT_ALLOC_ALL;
    uint32_t open[128];
    memset(open, 0xff, sizeof open);
    uint64_t live = 0;
    for (size_t e = 0; e < n_ev; e++) {
        unsigned char name = (unsigned char)ev[e][1];
        if (ev[e][0] == '+') {
            uint32_t k = (uint32_t)t->n++;
            remat_alloc_interval *v = &t->iv[k];
            memset(v, 0, sizeof *v);
            v->tensor = REMAT_NONE;
            v->op = REMAT_NONE;
            v->category = REMAT_CAT_ACTIVATIONS;
            v->first = e;
            v->last = REMAT_ALLOC_NEVER;
            v->start = e;
            v->end = UINT64_MAX;
            v->bytes = strtoull(ev[e] + 3, NULL, 10);
            open[name] = k;
            t->events[t->n_events++] = k << 1;
            live += v->bytes;
            if (live > t->logical_peak) {
                t->logical_peak = live;
                t->logical_peak_index = e;
                t->logical_peak_event = t->n_events;
            }
        } else {
            uint32_t k = open[name];
            ck_assert(k != UINT32_MAX);
            t->iv[k].end = e;
            t->iv[k].last = e;
            live -= t->iv[k].bytes;
            t->events[t->n_events++] = (k << 1) | 1u;
        }
    }
    for (size_t k = 0; k < t->n; k++)
        if (t->iv[k].end == UINT64_MAX)
            t->iv[k].end = t->n_events;
    t->n_steps = n_ev;
}

/* The oracle: every pair of intervals alive at the same time is disjoint in
 * bytes, and all lie below extent. O(n^2), independent of remat_alloc_verify.
 * (Plain ifs: a passing ck_assert marks a point, which costs a write per
 * pair in fork mode.) */
static void assert_disjoint(const remat_alloc_trace *t, const uint64_t *off, uint64_t extent, const char *what)
{
    for (size_t i = 0; i < t->n; i++) {
        const remat_alloc_interval *a = &t->iv[i];
        if (off[i] + a->bytes > extent)
            ck_abort_msg("%s: interval %zu ends at %llu past %llu", what, i, (unsigned long long)(off[i] + a->bytes),
                         (unsigned long long)extent);
        for (size_t j = i + 1; j < t->n; j++) {
            const remat_alloc_interval *b = &t->iv[j];
            if (!(a->start < b->end && b->start < a->end))
                continue;
            if (!(off[i] + a->bytes <= off[j] || off[j] + b->bytes <= off[i]))
                ck_abort_msg("%s: intervals %zu [%llu, +%llu) and %zu [%llu, +%llu) are alive together and overlap",
                             what, i, (unsigned long long)off[i], (unsigned long long)a->bytes, j,
                             (unsigned long long)off[j], (unsigned long long)b->bytes);
        }
    }
}

/* The largest sum of bytes alive at one moment, by brute force over the
 * clock (each interval alive on [start, end)). */
static uint64_t brute_peak(const remat_alloc_trace *t)
{
    uint64_t best = 0;
    for (uint64_t c = 0; c < t->n_events; c++) {
        uint64_t live = 0;
        for (size_t k = 0; k < t->n; k++)
            if (t->iv[k].start <= c && c < t->iv[k].end)
                live += t->iv[k].bytes;
        if (live > best)
            best = live;
    }
    return best;
}

static void simulate_ok(const remat_alloc_trace *t, remat_alloc_policy p, remat_alloc_result *r)
{
    remat_err err;
    remat_err_init(&err);
    ck_assert_msg(remat_alloc_simulate(t, p, 1, r, &err) == REMAT_OK, "%s", err.msg);
}

static void static_ok(const remat_alloc_trace *t, remat_static_algo algo, remat_static_result *sp)
{
    remat_err err;
    remat_err_init(&err);
    remat_static_options o;
    remat_static_options_init(&o);
    o.algo = algo;
    ck_assert_msg(remat_alloc_static_plan(t, &o, sp, &err) == REMAT_OK, "%s", err.msg);
}

START_TEST(alloc_should_show_the_classic_fragmentation_pattern)
{
    /* A B C, free B, D larger than B: the hole B left cannot take D. */
    static const char *const ev[] = {"+A 100", "+B 50", "+C 100", "-B", "+D 80"};
    remat_alloc_trace t;
    hand_trace(&t, ev, 5);
    ck_assert_uint_eq(t.logical_peak, 280); /* A + C + D */
    for (int p = REMAT_ALLOC_BEST_FIT; p <= REMAT_ALLOC_FIRST_FIT; p++) {
        remat_alloc_result r;
        simulate_ok(&t, (remat_alloc_policy)p, &r);
        ck_assert_uint_eq(r.offsets[0], 0);
        ck_assert_uint_eq(r.offsets[1], 100);
        ck_assert_uint_eq(r.offsets[2], 150);
        ck_assert_uint_eq(r.offsets[3], 250); /* above C: the 50-byte hole is too small */
        ck_assert_uint_eq(r.high_water, 330);
        ck_assert_uint_eq(r.fragmentation, 50);
        ck_assert_uint_eq(r.high_water_index, 4);
        ck_assert_uint_eq(r.live_at_high_water, 280);
        ck_assert_uint_eq(r.free_at_high_water, 50);
        ck_assert_uint_eq(r.largest_free_at_high_water, 50);
        assert_disjoint(&t, r.offsets, r.high_water, remat_alloc_policy_name((remat_alloc_policy)p));
        remat_alloc_result_destroy(&r);
    }
    /* Knowing the future, the static plan puts B above C: no hole. */
    remat_static_result sp;
    static_ok(&t, REMAT_STATIC_GREEDY_SIZE, &sp);
    ck_assert_uint_eq(sp.arena_bytes, 280);
    ck_assert_uint_eq(sp.lower_bound, 280);
    assert_disjoint(&t, sp.offsets, sp.arena_bytes, "greedy-size");
    remat_static_result_destroy(&sp);
    static_ok(&t, REMAT_STATIC_BEST, &sp);
    ck_assert_uint_eq(sp.arena_bytes, 280);
    ck_assert_int_eq(sp.chosen, REMAT_STATIC_GREEDY_SIZE);
    ck_assert_uint_eq(sp.arena_by_algo[REMAT_STATIC_ALLOC_ORDER], 330); /* the dynamic best-fit layout */
    remat_static_result_destroy(&sp);
    remat_alloc_trace_destroy(&t);
}
END_TEST

START_TEST(alloc_should_tell_best_fit_from_first_fit)
{
    /* Holes of 60 (low) and 45 (high); a 40-byte request: first fit takes
     * the low hole, best fit the snug one; then 55 bytes fit only in what
     * best fit left whole. */
    static const char *const ev[] = {"+A 10", "+B 60", "+C 10", "+D 45", "+E 10", "-B", "-D", "+F 40", "+G 55"};
    remat_alloc_trace t;
    hand_trace(&t, ev, 9);
    remat_alloc_result bf, ff;
    simulate_ok(&t, REMAT_ALLOC_BEST_FIT, &bf);
    simulate_ok(&t, REMAT_ALLOC_FIRST_FIT, &ff);
    ck_assert_uint_eq(bf.offsets[5], 80); /* F in D's 45-byte hole */
    ck_assert_uint_eq(bf.offsets[6], 10); /* G in B's 60-byte hole */
    ck_assert_uint_eq(bf.high_water, 135);
    ck_assert_uint_eq(ff.offsets[5], 10);  /* F in B's hole */
    ck_assert_uint_eq(ff.offsets[6], 135); /* G: 20 and 45 left, neither fits: the top grows */
    ck_assert_uint_eq(ff.high_water, 190);
    ck_assert_uint_eq(ff.fragmentation, 190 - t.logical_peak);
    ck_assert_uint_eq(t.logical_peak, 135);
    ck_assert_uint_eq(bf.fragmentation, 0);
    assert_disjoint(&t, bf.offsets, bf.high_water, "best-fit");
    assert_disjoint(&t, ff.offsets, ff.high_water, "first-fit");
    remat_alloc_result_destroy(&bf);
    remat_alloc_result_destroy(&ff);
    remat_alloc_trace_destroy(&t);
}
END_TEST

START_TEST(alloc_should_coalesce_and_give_the_top_back)
{
    /* Freeing B then C merges them with the top: the heap shrinks to A, and
     * D reuses the space without raising the high-water mark. */
    static const char *const ev[] = {"+A 100", "+B 50", "+C 70", "-C", "-B", "+D 120"};
    remat_alloc_trace t;
    hand_trace(&t, ev, 6);
    remat_alloc_result r;
    simulate_ok(&t, REMAT_ALLOC_BEST_FIT, &r);
    ck_assert_uint_eq(r.offsets[3], 100);
    ck_assert_uint_eq(r.high_water, 220);
    ck_assert_uint_eq(r.fragmentation, 0);
    remat_alloc_result_destroy(&r);
    /* Free the middle one and its neighbour below: one merged hole of 150
     * takes a 140-byte request. */
    static const char *const ev2[] = {"+A 100", "+B 50", "+C 70", "-A", "-B", "+D 140"};
    remat_alloc_trace_destroy(&t);
    hand_trace(&t, ev2, 6);
    simulate_ok(&t, REMAT_ALLOC_FIRST_FIT, &r);
    ck_assert_uint_eq(r.offsets[3], 0);
    ck_assert_uint_eq(r.high_water, 220);
    remat_alloc_result_destroy(&r);
    remat_alloc_trace_destroy(&t);
}
END_TEST

START_TEST(alloc_caching_should_round_pool_and_cache)
{
    const uint64_t MiB = 1ull << 20;
    char b1[40], b2[40], b3[40], b4[40], b5[40];
    snprintf(b1, sizeof b1, "+A %llu", 1ull);                                 /* 512 B, small pool */
    snprintf(b2, sizeof b2, "+B %llu", (unsigned long long)(3 * MiB));        /* large pool: a 20 MiB segment */
    snprintf(b3, sizeof b3, "+C %llu", (unsigned long long)(3 * MiB + 1));    /* rounded up to 512 B; same segment */
    snprintf(b4, sizeof b4, "+D %llu", (unsigned long long)(12 * MiB - 100)); /* 12 MiB: the cached rest fits */
    snprintf(b5, sizeof b5, "+F %llu", (unsigned long long)(30 * MiB - 1));   /* a segment of its own, 30 MiB */
    const char *ev[] = {b1, b2, b3, b4, b5, "-B", "-C", "+E 100"};
    remat_alloc_trace t;
    hand_trace(&t, ev, 8);
    remat_alloc_result r;
    simulate_ok(&t, REMAT_ALLOC_CACHING, &r);
    ck_assert_uint_eq(r.segments_small, 1);
    ck_assert_uint_eq(r.segments_large, 2);
    ck_assert_uint_eq(r.high_water, 2 * MiB + 20 * MiB + 30 * MiB);
    ck_assert_uint_eq(r.high_water_index, 4);
    ck_assert_uint_eq(r.offsets[0], 0);
    ck_assert_uint_eq(r.offsets[1], 2 * MiB);
    ck_assert_uint_eq(r.offsets[2], 5 * MiB);
    ck_assert_uint_eq(r.offsets[3], 8 * MiB + 512);
    ck_assert_uint_eq(r.offsets[4], 22 * MiB);
    /* E (100 B) comes from the small segment, after A's 512 bytes. */
    ck_assert_uint_eq(r.offsets[5], 512);
    ck_assert_uint_eq(r.allocated_peak, 512 + 3 * MiB + (3 * MiB + 512) + 12 * MiB + 30 * MiB);
    ck_assert_uint_eq(r.live_at_high_water, r.allocated_peak);
    /* At the high-water mark the free blocks are the small segment's rest
     * and the 20 MiB segment's rest (2 MiB - 512, split off D). */
    ck_assert_uint_eq(r.largest_free_at_high_water, 2 * MiB - 512);
    ck_assert_uint_eq(r.fragmentation, r.high_water - t.logical_peak);
    assert_disjoint(&t, r.offsets, r.high_water, "caching");
    remat_alloc_result_destroy(&r);
    remat_alloc_trace_destroy(&t);
}
END_TEST

START_TEST(alloc_caching_should_not_coalesce_across_segments)
{
    /* Two 12 MiB segments, side by side in the address space, both freed:
     * 24 MiB free and contiguous, yet a 20 MiB request takes a new segment. */
    const uint64_t MiB = 1ull << 20;
    char a[32], b[32], c[32];
    snprintf(a, sizeof a, "+A %llu", (unsigned long long)(12 * MiB));
    snprintf(b, sizeof b, "+B %llu", (unsigned long long)(12 * MiB));
    snprintf(c, sizeof c, "+C %llu", (unsigned long long)(20 * MiB));
    const char *ev[] = {a, b, "-A", "-B", c};
    remat_alloc_trace t;
    hand_trace(&t, ev, 5);
    remat_alloc_result r;
    simulate_ok(&t, REMAT_ALLOC_CACHING, &r);
    ck_assert_uint_eq(r.high_water, 44 * MiB);
    ck_assert_uint_eq(r.offsets[2], 24 * MiB);
    ck_assert_uint_eq(r.largest_free_at_high_water, 12 * MiB);
    ck_assert_uint_eq(r.free_at_high_water, 24 * MiB);
    remat_alloc_result_destroy(&r);
    /* Best fit in one heap merges them. */
    simulate_ok(&t, REMAT_ALLOC_BEST_FIT, &r);
    ck_assert_uint_eq(r.high_water, 24 * MiB);
    remat_alloc_result_destroy(&r);
    /* A small block left whole: 19.5 MiB from a 20 MiB segment leaves
     * 0.5 MiB, not more than 1 MiB, so the block is not split. */
    char d[32];
    snprintf(d, sizeof d, "+D %llu", (unsigned long long)(19 * MiB + MiB / 2));
    const char *ev2[] = {d, "-D", "+E 2000000"};
    remat_alloc_trace_destroy(&t);
    hand_trace(&t, ev2, 3);
    simulate_ok(&t, REMAT_ALLOC_CACHING, &r);
    ck_assert_uint_eq(r.allocated_peak, 20 * MiB);
    ck_assert_uint_eq(r.high_water, 20 * MiB); /* E reuses the cached 20 MiB block */
    ck_assert_uint_eq(r.offsets[1], 0);
    remat_alloc_result_destroy(&r);
    remat_alloc_trace_destroy(&t);
}
END_TEST

START_TEST(alloc_verify_should_name_two_colliding_intervals)
{
    static const char *const ev[] = {"+A 100", "+B 50", "-A", "+C 10"};
    remat_alloc_trace t;
    hand_trace(&t, ev, 4);
    uint64_t ok[3] = {0, 100, 0}; /* C reuses A's bytes after A is gone */
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_alloc_verify(&t, ok, 150, &err), REMAT_OK);
    uint64_t bad[3] = {0, 99, 0};
    ck_assert_int_eq(remat_alloc_verify(&t, bad, 150, &err), REMAT_EINTERNAL);
    ck_assert_msg_contains(&err, "share bytes");
    remat_err_init(&err);
    ck_assert_int_eq(remat_alloc_verify(&t, ok, 149, &err), REMAT_EINTERNAL);
    ck_assert_msg_contains(&err, "past the extent");
    remat_alloc_trace_destroy(&t);
}
END_TEST

START_TEST(alloc_static_should_respect_the_work_bound)
{
    static const char *const ev[] = {"+A 100", "+B 50", "+C 100", "-B", "+D 80", "+E 7", "-A", "+F 30"};
    remat_alloc_trace t;
    hand_trace(&t, ev, 8);
    remat_static_options o;
    remat_static_options_init(&o);
    o.work_limit = 1;
    o.algo = REMAT_STATIC_GREEDY_SIZE;
    remat_static_result sp;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_alloc_static_plan(&t, &o, &sp, &err), REMAT_EUNSUPPORTED);
    ck_assert_msg_contains(&err, "work bound");
    remat_static_result_destroy(&sp);
    o.algo = REMAT_STATIC_BEST;
    ck_assert_int_eq(remat_alloc_static_plan(&t, &o, &sp, &err), REMAT_OK);
    ck_assert_int_eq(sp.ran[REMAT_STATIC_GREEDY_SIZE], -1);
    ck_assert_int_eq(sp.ran[REMAT_STATIC_ALLOC_ORDER], 1);
    ck_assert_int_eq(sp.chosen, REMAT_STATIC_ALLOC_ORDER);
    assert_disjoint(&t, sp.offsets, sp.arena_bytes, "best at work 1");
    remat_static_result_destroy(&sp);
    remat_alloc_trace_destroy(&t);
}
END_TEST

/* ---- replayed schedules ------------------------------------------------- */

static remat_graph *load_graph(const char *path)
{
    remat_graph *g = NULL;
    remat_err err;
    remat_err_init(&err);
    ck_assert_msg(remat_graph_load_file(path, &g, &err) == REMAT_OK, "%s: %s", path, err.msg);
    return g;
}

static remat_analysis *analyze_ok(const remat_graph *g)
{
    remat_analysis *a = NULL;
    remat_err err;
    remat_err_init(&err);
    ck_assert_msg(remat_analyze(g, &a, &err) == REMAT_OK, "%s", err.msg);
    return a;
}

/* Every invariant on the trace of schedule s: the recorded intervals find
 * the executor's peak by brute force; every dynamic layout and the static
 * plan are disjoint (brute force) and not below the logical peak. Returns
 * the static arena (BEST). */
static uint64_t check_schedule(const remat_analysis *a, const remat_schedule *s, uint32_t mask, const char *what)
{
    remat_err err;
    remat_err_init(&err);
    remat_replay_result r;
    ck_assert_msg(remat_replay(a, s, NULL, NULL, &r, &err) == REMAT_OK && r.valid, "%s: %s", what, err.msg);
    remat_alloc_trace t;
    ck_assert_msg(remat_alloc_trace_build(a, s, NULL, mask, &t, NULL, &err) == REMAT_OK, "%s: %s", what, err.msg);
    uint64_t want = mask == REMAT_ALLOC_ALL ? r.peak_bytes : r.activation_peak;
    ck_assert_msg(t.logical_peak == want, "%s: trace peak %llu, replay %llu", what,
                  (unsigned long long)t.logical_peak, (unsigned long long)want);
    ck_assert_msg(brute_peak(&t) == want, "%s: brute-force peak %llu, replay %llu", what,
                  (unsigned long long)brute_peak(&t), (unsigned long long)want);
    for (int p = 0; p < REMAT_ALLOC_POLICY_COUNT; p++) {
        remat_alloc_result ar;
        simulate_ok(&t, (remat_alloc_policy)p, &ar);
        ck_assert_msg(ar.high_water >= t.logical_peak, "%s %s: high-water below the logical peak", what,
                      remat_alloc_policy_name((remat_alloc_policy)p));
        ck_assert_uint_eq(ar.fragmentation, ar.high_water - t.logical_peak);
        assert_disjoint(&t, ar.offsets, ar.high_water, remat_alloc_policy_name((remat_alloc_policy)p));
        ck_assert_int_eq(remat_alloc_verify(&t, ar.offsets, ar.high_water, &err), REMAT_OK);
        remat_alloc_result_destroy(&ar);
    }
    remat_static_result sp;
    static_ok(&t, REMAT_STATIC_BEST, &sp);
    for (int i = 0; i < REMAT_STATIC_N_ALGOS; i++)
        ck_assert_msg(sp.ran[i] == 1 && sp.arena_by_algo[i] >= t.logical_peak, "%s: %s arena below the bound", what,
                      remat_static_algo_name((remat_static_algo)i));
    ck_assert(sp.arena_bytes >= sp.lower_bound);
    ck_assert_uint_eq(sp.lower_bound, t.logical_peak);
    assert_disjoint(&t, sp.offsets, sp.arena_bytes, "static best");
    ck_assert_int_eq(remat_alloc_verify(&t, sp.offsets, sp.arena_bytes, &err), REMAT_OK);
    uint64_t arena = sp.arena_bytes;
    /* Each algorithm's own layout is disjoint too. */
    for (int i = 0; i < REMAT_STATIC_N_ALGOS; i++) {
        remat_static_result one;
        static_ok(&t, (remat_static_algo)i, &one);
        ck_assert_uint_eq(one.arena_bytes, sp.arena_by_algo[i]);
        assert_disjoint(&t, one.offsets, one.arena_bytes, remat_static_algo_name((remat_static_algo)i));
        remat_static_result_destroy(&one);
    }
    remat_static_result_destroy(&sp);
    remat_alloc_trace_destroy(&t);
    remat_replay_result_destroy(&r);
    return arena;
}

static const char *const bundled[] = {"bnview",     "chain16",     "gpt4-b4",   "hetchain12",   "mlp2",
                                      "mlp423",     "mobilenet_v2-b2", "resnet18-b2", "resnet50-b2",
                                      "resnet8",    "transformer4", "unet-b2",  "unet3",        "vgg16-b2"};
#define N_BUNDLED (sizeof bundled / sizeof bundled[0])

START_TEST(alloc_static_should_be_within_5_percent_on_bundled_graphs)
{
    char path[256];
    snprintf(path, sizeof path, "graphs/%s.json", bundled[_i]);
    remat_graph *g = load_graph(path);
    remat_analysis *a = analyze_ok(g);
    remat_schedule s;
    remat_schedule_init(&s);
    remat_err err;
    remat_err_init(&err);
    ck_assert(remat_schedule_store_all(a, &s, &err) == REMAT_OK);
    remat_replay_result r;
    ck_assert(remat_replay(a, &s, NULL, NULL, &r, &err) == REMAT_OK);
    uint64_t arena = check_schedule(a, &s, REMAT_ALLOC_ALL, bundled[_i]);
    ck_assert_msg((double)arena <= 1.05 * (double)r.peak_bytes, "%s: arena %llu more than 5%% over the peak %llu",
                  bundled[_i], (unsigned long long)arena, (unsigned long long)r.peak_bytes);
    check_schedule(a, &s, REMAT_ALLOC_ACTIVATION, bundled[_i]);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* Plans of other strategies: recomputation makes intervals come and go. */
START_TEST(alloc_should_hold_for_recomputing_strategies)
{
    static const char *const graphs[] = {"transformer4", "resnet8", "unet3", "hetchain12"};
    static const char *const strategies[] = {"sqrtn", "chen-greedy", "revolve", "dtr"};
    char path[256];
    snprintf(path, sizeof path, "graphs/%s.json", graphs[_i]);
    remat_graph *g = load_graph(path);
    remat_analysis *a = analyze_ok(g);
    remat_err err;
    for (size_t k = 0; k < sizeof strategies / sizeof strategies[0]; k++) {
        remat_plan_options o;
        remat_plan_options_init(&o);
        o.strategy = strategies[k];
        remat_plan plan;
        remat_replay_result r;
        remat_err_init(&err);
        remat_status st = remat_plan_make(a, &o, &plan, &r, &err);
        ck_assert_msg(st == REMAT_OK, "%s %s: %s", graphs[_i], strategies[k], err.msg);
        check_schedule(a, &plan.schedule, REMAT_ALLOC_ALL, strategies[k]);
        check_schedule(a, &plan.schedule, REMAT_ALLOC_ACTIVATION, strategies[k]);
        remat_replay_result_destroy(&r);
        remat_plan_destroy(&plan);
    }
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(alloc_trace_should_refuse_an_invalid_schedule)
{
    remat_graph *g = load_graph("graphs/mlp2.json");
    remat_analysis *a = analyze_ok(g);
    remat_schedule s;
    remat_schedule_init(&s);
    remat_err err;
    remat_err_init(&err);
    ck_assert(remat_schedule_store_all(a, &s, &err) == REMAT_OK);
    s.n = 2; /* stops before every backward step */
    remat_alloc_trace t;
    remat_replay_result r;
    ck_assert_int_eq(remat_alloc_trace_build(a, &s, NULL, REMAT_ALLOC_ALL, &t, &r, &err), REMAT_ESCHEDULE);
    ck_assert_msg_contains(&err, "never ran");
    ck_assert(!r.valid);
    remat_replay_result_destroy(&r);
    remat_alloc_trace_destroy(&t);
    /* remat_alloc_arena reports it as remat_replay does. */
    uint64_t arena = 7;
    remat_err_init(&err);
    ck_assert_int_eq(remat_alloc_arena(a, &s, NULL, REMAT_ALLOC_ALL, &r, &arena, &err), REMAT_OK);
    ck_assert(!r.valid);
    ck_assert_uint_eq(arena, 0);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(alloc_trace_should_count_ledger_state_and_workspace)
{
    /* Extras are resident (allocated before the first instruction) and the
     * optimizer's workspace is an interval of the optimizer step. */
    remat_graph *g = load_graph("graphs/mlp423.json");
    remat_analysis *a = analyze_ok(g);
    remat_schedule s;
    remat_schedule_init(&s);
    remat_err err;
    remat_err_init(&err);
    ck_assert(remat_schedule_store_all(a, &s, &err) == REMAT_OK);
    remat_exec_extras x;
    memset(&x, 0, sizeof x);
    x.optimizer_state = 6768;
    x.optimizer_workspace = 100000; /* larger than anything else: the peak moves to the optimizer */
    remat_alloc_trace t;
    remat_replay_result r;
    ck_assert_msg(remat_alloc_trace_build(a, &s, &x, REMAT_ALLOC_ALL, &t, &r, &err) == REMAT_OK, "%s", err.msg);
    ck_assert_uint_eq(t.logical_peak, r.peak_bytes);
    ck_assert_uint_eq(brute_peak(&t), r.peak_bytes);
    int found_state = 0, found_ws = 0;
    for (size_t k = 0; k < t.n; k++) {
        if (t.iv[k].category == REMAT_CAT_OPTIMIZER_STATE) {
            found_state = 1;
            ck_assert(t.iv[k].first == REMAT_ALLOC_BEFORE && t.iv[k].last == REMAT_ALLOC_NEVER);
            ck_assert_uint_eq(t.iv[k].bytes, 6768);
        }
        if (t.iv[k].category == REMAT_CAT_WORKSPACE && t.iv[k].bytes == 100000) {
            found_ws = 1;
            ck_assert_uint_eq(t.iv[k].first, t.n_steps - 1);
            ck_assert_uint_eq(t.iv[k].op, REMAT_NONE);
        }
    }
    ck_assert(found_state && found_ws);
    ck_assert_uint_eq(t.logical_peak_index, t.n_steps - 1);
    remat_static_result sp;
    static_ok(&t, REMAT_STATIC_BEST, &sp);
    assert_disjoint(&t, sp.offsets, sp.arena_bytes, "extras");
    remat_static_result_destroy(&sp);
    remat_replay_result_destroy(&r);
    remat_alloc_trace_destroy(&t);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* --budget-mode arena: every plan returned has an arena within the budget;
 * a budget just below the store-all arena is refused by store-all with a
 * message naming the arena. */
START_TEST(alloc_arena_mode_plans_should_fit_their_budget)
{
    static const char *const graphs[] = {"hetchain12", "unet3", "mlp423"};
    /* auto (every strategy, a local search) is the slow one: one budget. */
    static const char *const strategies[] = {"store-all", "chen-greedy", "revolve", "dtr", "auto"};
    char path[256];
    snprintf(path, sizeof path, "graphs/%s.json", graphs[_i]);
    remat_graph *g = load_graph(path);
    remat_analysis *a = analyze_ok(g);
    remat_err err;
    remat_err_init(&err);
    remat_schedule s;
    remat_schedule_init(&s);
    ck_assert(remat_schedule_store_all(a, &s, &err) == REMAT_OK);
    remat_replay_result r0;
    uint64_t full;
    ck_assert(remat_alloc_arena(a, &s, NULL, REMAT_ALLOC_ALL, &r0, &full, &err) == REMAT_OK);
    ck_assert(full >= r0.peak_bytes);
    remat_replay_result_destroy(&r0);
    remat_schedule_destroy(&s);
    int fitted = 0;
    for (int kind = 0; kind < 2; kind++)
        for (int f = 70; f <= 100; f += 15)
            for (size_t k = 0; k < sizeof strategies / sizeof strategies[0]; k++) {
                if (strcmp(strategies[k], "auto") == 0 && f != 85)
                    continue;
                remat_plan_options o;
                remat_plan_options_init(&o);
                o.strategy = strategies[k];
                o.time_limit = 1;
                o.budget_mode = REMAT_BUDGET_MODE_ARENA;
                o.budget_kind = kind ? REMAT_BUDGET_ACTIVATION : REMAT_BUDGET_TOTAL;
                uint64_t base = full;
                if (kind) {
                    remat_schedule_init(&s);
                    ck_assert(remat_schedule_store_all(a, &s, &err) == REMAT_OK);
                    ck_assert(remat_alloc_arena(a, &s, NULL, REMAT_ALLOC_ACTIVATION, &r0, &base, &err) == REMAT_OK);
                    remat_replay_result_destroy(&r0);
                    remat_schedule_destroy(&s);
                }
                o.budget = base / 100 * (uint64_t)f;
                remat_plan plan;
                remat_replay_result r;
                remat_err_init(&err);
                remat_status st = remat_plan_make(a, &o, &plan, &r, &err);
                ck_assert_msg(st == REMAT_OK || st == REMAT_EINFEASIBLE, "%s %s: %s", graphs[_i], strategies[k],
                              err.msg);
                if (st == REMAT_EINFEASIBLE && r.recompute_counts)
                    ck_assert_msg_contains(&err, "in arena mode");
                if (st == REMAT_OK) {
                    remat_replay_result r2;
                    uint64_t arena;
                    ck_assert(remat_alloc_arena(a, &plan.schedule, NULL, remat_alloc_mask_for(o.budget_kind), &r2,
                                                &arena, &err) == REMAT_OK);
                    ck_assert_msg(arena <= o.budget, "%s %s: arena %llu over the budget %llu", graphs[_i],
                                  strategies[k], (unsigned long long)arena, (unsigned long long)o.budget);
                    uint64_t m = kind ? r2.activation_peak : r2.peak_bytes;
                    ck_assert(m <= arena);
                    remat_replay_result_destroy(&r2);
                    fitted++;
                }
                remat_replay_result_destroy(&r);
                remat_plan_destroy(&plan);
            }
    ck_assert_msg(fitted > 0, "%s: no arena-mode plan fitted at all", graphs[_i]);
    /* Store-all at one byte under its arena: refused, naming the arena. */
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.strategy = "store-all";
    o.budget_mode = REMAT_BUDGET_MODE_ARENA;
    o.budget_kind = REMAT_BUDGET_TOTAL;
    o.budget = full - 1;
    remat_plan plan;
    remat_replay_result r;
    remat_err_init(&err);
    ck_assert_int_eq(remat_plan_make(a, &o, &plan, &r, &err), REMAT_EINFEASIBLE);
    char want[64];
    snprintf(want, sizeof want, "static arena it reaches on this graph is %.0s", "");
    ck_assert_msg_contains(&err, want);
    snprintf(want, sizeof want, "(%llu B)", (unsigned long long)full);
    if (full >= 1024)
        ck_assert_msg_contains(&err, want);
    remat_replay_result_destroy(&r);
    remat_plan_destroy(&plan);
    o.budget = full;
    remat_err_init(&err);
    ck_assert_msg(remat_plan_make(a, &o, &plan, &r, &err) == REMAT_OK, "%s", err.msg);
    remat_replay_result_destroy(&r);
    remat_plan_destroy(&plan);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(alloc_plan_file_should_carry_offsets_and_load_back)
{
    remat_graph *g = load_graph("graphs/transformer4.json");
    remat_analysis *a = analyze_ok(g);
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.strategy = "sqrtn";
    remat_plan plan;
    remat_replay_result r;
    remat_err err;
    remat_err_init(&err);
    ck_assert(remat_plan_make(a, &o, &plan, &r, &err) == REMAT_OK);
    size_t len;
    uint64_t arena = 0;
    char *text = remat_report_plan_with_offsets(a, &plan, &r, NULL, &arena, &len, &err);
    ck_assert_msg(text != NULL, "%s", err.msg);
    ck_assert_uint_eq(len, strlen(text));
    char want[96];
    snprintf(want, sizeof want, "\"offsets\": {\"arena_bytes\": %llu, \"lower_bound_bytes\": %llu",
             (unsigned long long)arena, (unsigned long long)r.peak_bytes);
    ck_assert_msg(strstr(text, want) != NULL, "plan file lacks '%s'", want);
    ck_assert(strstr(text, "\"intervals\": [") != NULL);
    ck_assert(strstr(text, "\"category\": \"recomputed\", \"instruction\": ") != NULL);
    ck_assert(strstr(text, "\"tensor\": \"tokens\", \"grad\": false, \"category\": \"inputs\", \"instruction\": -1, "
                           "\"free\": null, \"offset\": 0") != NULL);
    ck_assert(text[len - 1] == '\n' && text[len - 2] == '}');
    remat_plan back;
    ck_assert_msg(remat_plan_load_json(g, text, len, "plan.json", &back, &err) == REMAT_OK, "%s", err.msg);
    ck_assert_uint_eq(back.schedule.n, plan.schedule.n);
    remat_plan_destroy(&back);
    remat_free(text);
    /* The SVG of the same layout. */
    remat_alloc_trace t;
    ck_assert(remat_alloc_trace_build(a, &plan.schedule, NULL, REMAT_ALLOC_ALL, &t, NULL, &err) == REMAT_OK);
    remat_static_result sp;
    static_ok(&t, REMAT_STATIC_BEST, &sp);
    char *svg = remat_report_alloc_svg(a, &plan.schedule, &t, sp.offsets, sp.arena_bytes, "t <&> \"x\"", 0, &len, &err);
    ck_assert(svg != NULL);
    ck_assert(strstr(svg, "<svg") && strstr(svg, "</svg>\n"));
    ck_assert(strstr(svg, "t &lt;&amp;&gt; &quot;x&quot;") != NULL);
    ck_assert(strstr(svg, ">recomputed</text>") != NULL && strstr(svg, ">params</text>") != NULL);
    size_t rects = 0;
    for (const char *p = svg; (p = strstr(p, "<title>")) != NULL; p++)
        rects++;
    ck_assert_uint_eq(rects, t.n);
    remat_free(svg);
    /* At most 10 drawn: the rest are counted. */
    svg = remat_report_alloc_svg(a, &plan.schedule, &t, sp.offsets, sp.arena_bytes, "few", 10, &len, &err);
    ck_assert(svg != NULL && strstr(svg, "allocations not drawn") != NULL);
    remat_free(svg);
    remat_static_result_destroy(&sp);
    remat_alloc_trace_destroy(&t);
    remat_replay_result_destroy(&r);
    remat_plan_destroy(&plan);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* A generated graph of 20000 ops: the simulators finish and agree with
 * the executor (the speed is reported by `remat alloc`, not tested). */
START_TEST(alloc_should_simulate_a_large_graph)
{
    remat_gen_opts go;
    remat_gen_opts_init(&go, REMAT_GEN_CHAIN);
    go.ops = 20000;
    go.random = true;
    remat_err err;
    remat_err_init(&err);
    size_t len;
    char *json = remat_gen_json(&go, &len, &err);
    ck_assert_msg(json != NULL, "%s", err.msg);
    remat_graph *g = NULL;
    ck_assert(remat_graph_load_json(json, len, "gen", &g, &err) == REMAT_OK);
    remat_free(json);
    remat_analysis *a = analyze_ok(g);
    remat_schedule s;
    remat_schedule_init(&s);
    ck_assert(remat_schedule_store_all(a, &s, &err) == REMAT_OK);
    remat_alloc_trace t;
    remat_replay_result r;
    ck_assert(remat_alloc_trace_build(a, &s, NULL, REMAT_ALLOC_ALL, &t, &r, &err) == REMAT_OK);
    ck_assert_uint_eq(t.logical_peak, r.peak_bytes);
    for (int p = 0; p < REMAT_ALLOC_POLICY_COUNT; p++) {
        remat_alloc_result ar;
        simulate_ok(&t, (remat_alloc_policy)p, &ar);
        ck_assert(ar.high_water >= t.logical_peak);
        ck_assert_int_eq(remat_alloc_verify(&t, ar.offsets, ar.high_water, &err), REMAT_OK);
        remat_alloc_result_destroy(&ar);
    }
    remat_static_options o;
    remat_static_options_init(&o);
    o.algos = 1u << REMAT_STATIC_ALLOC_ORDER;
    remat_static_result sp;
    ck_assert(remat_alloc_static_plan(&t, &o, &sp, &err) == REMAT_OK);
    ck_assert(sp.arena_bytes >= t.logical_peak);
    ck_assert_int_eq(remat_alloc_verify(&t, sp.offsets, sp.arena_bytes, &err), REMAT_OK);
    remat_static_result_destroy(&sp);
    remat_alloc_trace_destroy(&t);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* Every allocation of the pipeline fails in turn: each stage reports out
 * of memory and leaks nothing (the sanitizer build checks the leaks). */
START_TEST(alloc_should_fail_cleanly_when_memory_runs_out)
{
    remat_graph *g = load_graph("graphs/mlp423.json");
    remat_analysis *a = analyze_ok(g);
    remat_plan plan;
    remat_plan_init(&plan);
    remat_err err;
    remat_err_init(&err);
    ck_assert(remat_schedule_store_all(a, &plan.schedule, &err) == REMAT_OK);
    remat_replay_result r;
    ck_assert(remat_replay(a, &plan.schedule, NULL, NULL, &r, &err) == REMAT_OK);
    remat_alloc_trace good;
    ck_assert(remat_alloc_trace_build(a, &plan.schedule, NULL, REMAT_ALLOC_ALL, &good, NULL, &err) == REMAT_OK);
    for (int stage = 0; stage < 9; stage++)
        for (uint64_t n = 1;; n++) {
            remat_err_init(&err);
            remat_alloc_trace t;
            remat_alloc_result ar;
            remat_static_result sp;
            remat_replay_result rr;
            memset(&ar, 0, sizeof ar);
            memset(&sp, 0, sizeof sp);
            memset(&t, 0, sizeof t);
            char *text = NULL;
            size_t len;
            uint64_t arena;
            remat_static_options so;
            remat_static_options_init(&so);
            const remat_alloc_result *shown[1] = {&ar};
            remat_status st = REMAT_OK;
            if (stage >= 5) /* the reports need a simulation and a plan made without faults */
                ck_assert(remat_alloc_simulate(&good, REMAT_ALLOC_CACHING, 1, &ar, &err) == REMAT_OK &&
                          remat_alloc_static_plan(&good, &so, &sp, &err) == REMAT_OK);
            remat__alloc_fail_at(n);
            switch (stage) {
            case 0: st = remat_alloc_trace_build(a, &plan.schedule, NULL, REMAT_ALLOC_ALL, &t, NULL, &err); break;
            case 1:
            case 2:
            case 3: st = remat_alloc_simulate(&good, (remat_alloc_policy)(stage - 1), 1, &ar, &err); break;
            case 4: st = remat_alloc_static_plan(&good, &so, &sp, &err); break;
            case 5:
                text = remat_report_alloc(a, &plan.schedule, &good, shown, 1, &sp, stage & 1, &len, &err);
                st = text ? REMAT_OK : err.code;
                break;
            case 6:
                text = remat_report_alloc_svg(a, &plan.schedule, &good, sp.offsets, sp.arena_bytes, "t", 0, &len, &err);
                st = text ? REMAT_OK : err.code;
                break;
            case 7:
                text = remat_report_plan_with_offsets(a, &plan, &r, NULL, NULL, &len, &err);
                st = text ? REMAT_OK : err.code;
                break;
            default:
                st = remat_alloc_arena(a, &plan.schedule, NULL, REMAT_ALLOC_ALL, &rr, &arena, &err);
                if (st == REMAT_OK)
                    remat_replay_result_destroy(&rr);
                break;
            }
            remat__alloc_fail_at(0);
            remat_free(text);
            remat_alloc_trace_destroy(&t);
            remat_alloc_result_destroy(&ar);
            remat_static_result_destroy(&sp);
            if (st == REMAT_OK)
                break;
            ck_assert_msg(st == REMAT_ENOMEM, "stage %d, allocation %llu: %s: %s", stage, (unsigned long long)n,
                          remat_status_str(st), err.msg);
            ck_assert_msg_contains(&err, "out of memory");
        }
    remat_alloc_trace_destroy(&good);
    remat_replay_result_destroy(&r);
    remat_plan_destroy(&plan);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(alloc_names_should_parse_back)
{
    for (int p = 0; p < REMAT_ALLOC_POLICY_COUNT; p++) {
        remat_alloc_policy q;
        ck_assert(remat_alloc_policy_parse(remat_alloc_policy_name((remat_alloc_policy)p), &q));
        ck_assert_int_eq(q, p);
    }
    for (int a = 0; a < REMAT_STATIC_ALGO_COUNT; a++) {
        remat_static_algo q;
        ck_assert(remat_static_algo_parse(remat_static_algo_name((remat_static_algo)a), &q));
        ck_assert_int_eq(q, a);
    }
    remat_alloc_policy q;
    ck_assert(!remat_alloc_policy_parse("worst-fit", &q));
    ck_assert_uint_eq(remat_alloc_mask_for(REMAT_BUDGET_ACTIVATION), REMAT_ALLOC_ACTIVATION);
    ck_assert_uint_eq(remat_alloc_mask_for(REMAT_BUDGET_TOTAL), REMAT_ALLOC_ALL);
    ck_assert(strstr(remat_alloc_caching_assumptions(), "512 B") != NULL);
}
END_TEST

Suite *alloc_suite(void)
{
    Suite *s = suite_create("alloc");
    TCase *tc = tcase_create("alloc");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, alloc_should_show_the_classic_fragmentation_pattern);
    tcase_add_test(tc, alloc_should_tell_best_fit_from_first_fit);
    tcase_add_test(tc, alloc_should_coalesce_and_give_the_top_back);
    tcase_add_test(tc, alloc_caching_should_round_pool_and_cache);
    tcase_add_test(tc, alloc_caching_should_not_coalesce_across_segments);
    tcase_add_test(tc, alloc_verify_should_name_two_colliding_intervals);
    tcase_add_test(tc, alloc_static_should_respect_the_work_bound);
    tcase_add_loop_test(tc, alloc_static_should_be_within_5_percent_on_bundled_graphs, 0, (int)N_BUNDLED);
    tcase_add_loop_test(tc, alloc_should_hold_for_recomputing_strategies, 0, 4);
    tcase_add_test(tc, alloc_trace_should_refuse_an_invalid_schedule);
    tcase_add_test(tc, alloc_trace_should_count_ledger_state_and_workspace);
    tcase_add_loop_test(tc, alloc_arena_mode_plans_should_fit_their_budget, 0, 3);
    tcase_add_test(tc, alloc_plan_file_should_carry_offsets_and_load_back);
    tcase_add_test(tc, alloc_should_simulate_a_large_graph);
    tcase_add_test(tc, alloc_should_fail_cleanly_when_memory_runs_out);
    tcase_add_test(tc, alloc_names_should_parse_back);
    suite_add_tcase(s, tc);
    return s;
}

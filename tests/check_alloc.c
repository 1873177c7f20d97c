/*
 * check_alloc.c - the allocator simulation against oracles of its own: hand
 * computations (the classic fragmentation pattern, best fit against first
 * fit, the caching model's rounding, segments and pools) and a brute-force
 * pairwise check that no two intervals alive at the same time share a byte
 * (in the static plan and in every dynamic policy); and every policy and
 * static algorithm name parses back.
 *
 * The same oracles on replayed schedules (a brute-force sweep of the
 * intervals that must find the executor's own peak, the bounds: arena >=
 * logical peak, high-water >= logical peak; the static plan within 5% of the
 * logical peak on every bundled graph under store-all, and --budget-mode
 * arena plans whose arena is within the budget) are in check_alloc_replay.c,
 * in this suite's one case.
 */
#include "check_alloc.h"
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
void assert_disjoint(const remat_alloc_trace *t, const uint64_t *off, uint64_t extent, const char *what)
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
uint64_t brute_peak(const remat_alloc_trace *t)
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

void simulate_ok(const remat_alloc_trace *t, remat_alloc_policy p, remat_alloc_result *r)
{
    remat_err err;
    remat_err_init(&err);
    ck_assert_msg(remat_alloc_simulate(t, p, 1, r, &err) == REMAT_OK, "%s", err.msg);
}

void static_ok(const remat_alloc_trace *t, remat_static_algo algo, remat_static_result *sp)
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
    alloc_replay_tests(tc);
    tcase_add_test(tc, alloc_names_should_parse_back);
    suite_add_tcase(s, tc);
    return s;
}

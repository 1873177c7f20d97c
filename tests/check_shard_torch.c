/*
 * check_shard_torch.c - PyTorch's ZeroRedundancyOptimizer assignment and
 * the single-tensor Adam's temporaries (src/exec/shard_torch.c).
 *
 * Oracles: a five-param graph worked by hand against the rules of torch
 * 1.13's _partition_parameters (sort by numel, largest first, stable; each
 * param to the first rank with the fewest elements) and of
 * _single_tensor_adam (2 e_i + e_(i-1)); on random graphs a second,
 * independent implementation (a selection of the largest remaining param
 * by a linear scan, no sort) and the bound every greedy longest-first
 * assignment meets (the most and least loaded ranks differ by at most the
 * largest param). The real ranks are checked against torch itself by
 * tests/torch/dp_optimizer_state.py.
 */
#include "exec_util.h"

#include <stdio.h>
#include <stdlib.h>

/* p1..p5 of 3, 5, 4, 3, 1 f32 elements, each read by its own op; f is
 * frozen (not in the optimizer's group). */
static const char *const FIVE =
    "{\"format\": \"remat-graph\", \"version\": 1, \"name\": \"five\","
    " \"inputs\": [{\"id\": \"x\", \"bytes\": 16}],"
    " \"params\": [{\"id\": \"p1\", \"bytes\": 12}, {\"id\": \"p2\", \"bytes\": 20},"
    "              {\"id\": \"p3\", \"bytes\": 16}, {\"id\": \"p4\", \"bytes\": 12},"
    "              {\"id\": \"p5\", \"bytes\": 4}, {\"id\": \"f\", \"bytes\": 400, \"frozen\": true}],"
    " \"ops\": [{\"id\": \"a\", \"op\": \"matmul\", \"inputs\": [\"x\", \"p1\", \"f\"], \"bytes\": 16, \"flops\": 1},"
    "          {\"id\": \"b\", \"op\": \"matmul\", \"inputs\": [\"a\", \"p2\"], \"bytes\": 16, \"flops\": 1},"
    "          {\"id\": \"c\", \"op\": \"matmul\", \"inputs\": [\"b\", \"p3\"], \"bytes\": 16, \"flops\": 1},"
    "          {\"id\": \"d\", \"op\": \"matmul\", \"inputs\": [\"c\", \"p4\"], \"bytes\": 16, \"flops\": 1},"
    "          {\"id\": \"e\", \"op\": \"matmul\", \"inputs\": [\"d\", \"p5\"], \"bytes\": 4, \"flops\": 1}],"
    " \"outputs\": [\"e\"]}";

static uint32_t tensor(const remat_graph *g, const char *id)
{
    for (uint32_t t = 0; t < g->n_tensors; t++)
        if (strcmp(g->tensors[t].id, id) == 0)
            return t;
    ck_abort_msg("no tensor %s", id);
    return 0;
}

/* By hand, 2 ranks. Sorted: p2 (5), p3 (4), p1 (3), p4 (3: after p1, the
 * graph's order), p5 (1). p2 -> rank 0 (0, 0: the first); p3 -> 1 (5, 0);
 * p1 -> 1 (5, 4); p4 -> 0 (5, 7); p5 -> 1 (8, 7): 8 and 8 elements.
 * Rank 0's Adam visits p2, p4: max(2x5, 2x3 + 5) = 11 elements; rank 1's
 * p3, p1, p5: max(2x4, 2x3 + 4, 2x1 + 3) = 10. Unsharded, in the graph's
 * order p1..p5: max(6, 10 + 3, 8 + 5, 6 + 4, 2 + 3) = 13. */
START_TEST(zero_redundancy_should_assign_as_worked_by_hand)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(FIVE, &g);
    remat_zero_redundancy z;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_zero_redundancy_init(a, 2, 4, &z, &err), REMAT_OK);
    const char *ids[5] = {"p1", "p2", "p3", "p4", "p5"};
    const uint32_t want[5] = {1, 0, 1, 0, 1};
    for (int i = 0; i < 5; i++)
        ck_assert_msg(z.rank_of[tensor(g, ids[i])] == want[i], "%s: rank %u, want %u", ids[i],
                      z.rank_of[tensor(g, ids[i])], want[i]);
    ck_assert_uint_eq(z.rank_of[tensor(g, "f")], REMAT_NONE);
    ck_assert_uint_eq(z.rank_elements[0], 8);
    ck_assert_uint_eq(z.rank_elements[1], 8);
    ck_assert_uint_eq(z.rank_state_elements[0], 8);
    ck_assert_uint_eq(z.rank_temps[0], 11);
    ck_assert_uint_eq(z.rank_temps[1], 10);
    ck_assert_uint_eq(z.largest_rank, 0);
    ck_assert_uint_eq(remat_torch_adam_temporaries(a, 4), 13);
    remat_zero_redundancy_destroy(&z);
    /* 3 ranks: p2 -> 0, p3 -> 1, p1 -> 2, p4 -> 2 (5, 4, 3), p5 -> 1 (5, 4, 6):
     * 5, 5, 6; rank 2 holds the most state. */
    ck_assert_int_eq(remat_zero_redundancy_init(a, 3, 4, &z, &err), REMAT_OK);
    ck_assert_uint_eq(z.rank_elements[0], 5);
    ck_assert_uint_eq(z.rank_elements[1], 5);
    ck_assert_uint_eq(z.rank_elements[2], 6);
    ck_assert_uint_eq(z.largest_rank, 2);
    ck_assert_uint_eq(z.rank_temps[2], 9); /* p1 then p4: 2x3 + 3 */
    remat_zero_redundancy_destroy(&z);
    /* Bad input: one rank; params that are not whole elements. */
    ck_assert_int_eq(remat_zero_redundancy_init(a, 1, 4, &z, &err), REMAT_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "at least 2 ranks"));
    remat_zero_redundancy_destroy(&z);
    remat_err_init(&err);
    ck_assert_int_eq(remat_zero_redundancy_init(a, 2, 8, &z, &err), REMAT_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "param 'p1': 12 B is not a whole number of 8-byte elements"));
    remat_zero_redundancy_destroy(&z);
    remat_zero_redundancy_destroy(NULL);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* A chain of n ops, op i reading param i of sizes[i] f32 elements. */
static char *chain_json(const uint64_t *sizes, int n)
{
    size_t cap = 256 + (size_t)n * 160;
    char *s = malloc(cap);
    ck_assert_ptr_nonnull(s);
    size_t at = (size_t)snprintf(s, cap, "{\"format\": \"remat-graph\", \"version\": 1, \"name\": \"r\", "
                                         "\"inputs\": [{\"id\": \"x\", \"bytes\": 8}], \"params\": [");
    for (int i = 0; i < n; i++)
        at += (size_t)snprintf(s + at, cap - at, "%s{\"id\": \"p%d\", \"bytes\": %llu}", i ? ", " : "", i,
                               (unsigned long long)(4 * sizes[i]));
    at += (size_t)snprintf(s + at, cap - at, "], \"ops\": [");
    for (int i = 0; i < n; i++) {
        char prev[16] = "x";
        if (i)
            snprintf(prev, sizeof prev, "o%d", i - 1);
        at += (size_t)snprintf(s + at, cap - at,
                               "%s{\"id\": \"o%d\", \"op\": \"matmul\", \"inputs\": [\"%s\", \"p%d\"], \"bytes\": 8, \"flops\": 1}",
                               i ? ", " : "", i, prev, i);
    }
    at += (size_t)snprintf(s + at, cap - at, "], \"outputs\": [\"o%d\"]}", n - 1);
    ck_assert(at < cap);
    return s;
}

START_TEST(zero_redundancy_should_match_a_second_greedy)
{
    srand(17);
    for (int trial = 0; trial < 60; trial++) {
        int n = 1 + rand() % 30;
        uint64_t sizes[30];
        for (int i = 0; i < n; i++)
            sizes[i] = 1 + (uint64_t)(rand() % (trial % 3 == 0 ? 4 : 1000)); /* many ties in a third */
        char *json = chain_json(sizes, n);
        remat_graph *g;
        remat_analysis *a = t_analyze(json, &g);
        free(json);
        uint64_t dp = 2 + (uint64_t)(rand() % 7);
        remat_zero_redundancy z;
        remat_err err;
        remat_err_init(&err);
        ck_assert_int_eq(remat_zero_redundancy_init(a, dp, 4, &z, &err), REMAT_OK);
        /* The second greedy: take the largest unassigned param (the first
         * in graph order on a tie) by scanning, give it to the first least
         * loaded rank. */
        uint64_t load[8] = {0}, temps[8] = {0}, prev[8] = {0};
        int used[30] = {0};
        for (int k = 0; k < n; k++) {
            int best = -1;
            for (int i = 0; i < n; i++)
                if (!used[i] && (best < 0 || sizes[i] > sizes[best]))
                    best = i;
            used[best] = 1;
            uint64_t r = 0;
            for (uint64_t q2 = 1; q2 < dp; q2++)
                if (load[q2] < load[r])
                    r = q2;
            load[r] += sizes[best];
            uint64_t w = 2 * sizes[best] + prev[r];
            temps[r] = w > temps[r] ? w : temps[r];
            prev[r] = sizes[best];
            char id[16];
            snprintf(id, sizeof id, "p%d", best);
            ck_assert_uint_eq(z.rank_of[tensor(g, id)], r);
        }
        uint64_t lo = UINT64_MAX, hi = 0, big = 0, sum = 0;
        for (uint64_t r = 0; r < dp; r++) {
            ck_assert_uint_eq(z.rank_elements[r], load[r]);
            ck_assert_uint_eq(z.rank_state_elements[r], load[r]);
            ck_assert_uint_eq(z.rank_temps[r], temps[r]);
            lo = load[r] < lo ? load[r] : lo;
            hi = load[r] > hi ? load[r] : hi;
            sum += load[r];
        }
        for (int i = 0; i < n; i++) {
            big = sizes[i] > big ? sizes[i] : big;
            sum -= sizes[i];
        }
        ck_assert_uint_eq(sum, 0);
        ck_assert_uint_le(hi - lo, big);
        ck_assert_uint_eq(z.rank_state_elements[z.largest_rank], hi);
        remat_zero_redundancy_destroy(&z);
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
    }
}
END_TEST

Suite *shard_torch_suite(void)
{
    Suite *s = suite_create("shard_torch");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, zero_redundancy_should_assign_as_worked_by_hand);
    tcase_add_test(tc, zero_redundancy_should_match_a_second_greedy);
    suite_add_tcase(s, tc);
    return s;
}

/*
 * check_exec_mutation.c - the executor rejects every way of breaking a schedule.
 *
 * Each test starts from a schedule that replays valid (mostly mlp2's
 * store-all text, exec_util.c), breaks it one way - an instruction moved,
 * dropped, repeated or inserted - and asserts that remat_replay rejects it at
 * the right instruction, for the right reason, with a message that names
 * both. The accounting rules are in check_exec.c's opening comment.
 */
#include "exec_util.h"

#include <stdint.h>

/* ---- Schedule edits ----------------------------------------------------- */

/* Index of the instruction with this text; asserts it occurs exactly once. */
static size_t sched_find(const remat_graph *g, const remat_schedule *s, const char *text)
{
    remat_instr in = instr_of(g, text);
    size_t at = SIZE_MAX;
    for (size_t i = 0; i < s->n; i++)
        if (s->ins[i].kind == in.kind && (in.kind == REMAT_I_OPT || s->ins[i].arg == in.arg)) {
            ck_assert_msg(at == SIZE_MAX, "'%s' occurs twice", text);
            at = i;
        }
    ck_assert_msg(at != SIZE_MAX, "'%s' not in the schedule", text);
    return at;
}

/* Replays s and asserts it is rejected at fail_index with a message that
 * contains both substrings (sub2 may be NULL). */
static void expect_invalid(const remat_analysis *a, const remat_schedule *s, size_t fail_index, const char *sub1,
                           const char *sub2)
{
    remat_err err;
    remat_err_init(&err);
    remat_replay_result r;
    remat_status st = remat_replay(a, s, NULL, NULL, &r, &err);
    ck_assert_msg(st == REMAT_OK, "replay failed outright: %s", err.msg);
    ck_assert_msg(!r.valid, "broken schedule accepted (expected failure at %zu: %s)", fail_index, sub1);
    ck_assert_int_eq(err.code, REMAT_ESCHEDULE);
    ck_assert_msg(r.fail_index == fail_index, "failed at %zu, expected %zu: %s", r.fail_index, fail_index, err.msg);
    ck_assert_msg_contains(&err, sub1);
    if (sub2)
        ck_assert_msg_contains(&err, sub2);
    remat_replay_result_destroy(&r);
}

/* Moves the instruction `what` so that it lands before the instruction
 * now at position `to`. */
static void sched_move(const remat_graph *g, remat_schedule *s, const char *what, size_t to)
{
    size_t from = sched_find(g, s, what);
    remat_instr in = s->ins[from];
    sched_del(s, from);
    sched_ins(s, to > from ? to - 1 : to, in);
}

/* Index of the n-th (0-based) occurrence of an instruction. */
static size_t sched_find_nth(const remat_graph *g, const remat_schedule *s, const char *text, int nth)
{
    remat_instr in = instr_of(g, text);
    for (size_t i = 0; i < s->n; i++)
        if (s->ins[i].kind == in.kind && s->ins[i].arg == in.arg && nth-- == 0)
            return i;
    ck_abort_msg("'%s' does not occur that often", text);
    return SIZE_MAX;
}

/* ---- Mutation tests ----------------------------------------------------- */

/* mlp2's store-all schedule, by index:
 *  0 FWD h1   1 FWD a1   2 FREE h1   3 FWD v1   4 FWD h2   5 FWD loss
 *  6 FREE h2  7 FREE loss  8 BWD loss  9 BWD h2  10 FREE v1  11 BWD v1
 * 12 BWD a1  13 FREE a1  14 BWD h1  15 OPT
 * mlp2_schedule (exec_util.c) loads it and checks that it replays valid;
 * the mutations start from this text, not from the policy. */

START_TEST(exec_should_reject_reading_a_freed_tensor)
{
    remat_graph *g;
    remat_schedule base, s;
    remat_analysis *a = mlp2_schedule(&g, &base);
    /* FREE h2 before FWD loss: the loss reads a freed input. */
    sched_copy(&s, &base);
    sched_move(g, &s, "FREE h2", 5);
    expect_invalid(a, &s, 6, "instruction 6 (FWD loss)", "input 'h2' is not resident (it was freed)");
    remat_schedule_destroy(&s);
    /* FREE a1 before FREE v1: allowed (v1 still holds the storage), but the
     * tensor a1 is gone when bwd:a1 (relu saves its output) reads it; the
     * view's own backward step saves nothing. */
    sched_copy(&s, &base);
    sched_move(g, &s, "FREE a1", 10);
    expect_invalid(a, &s, 13, "instruction 13 (BWD a1)", "saved tensor 'a1' is not resident (it was freed");
    remat_schedule_destroy(&s);
    /* FREE v1 before bwd:h2, which saves it. */
    sched_copy(&s, &base);
    sched_move(g, &s, "FREE v1", 9);
    expect_invalid(a, &s, 10, "instruction 10 (BWD h2)", "saved tensor 'v1' is not resident");
    remat_schedule_destroy(&s);
    /* FWD h2 before FWD v1: v1 was never produced. */
    sched_copy(&s, &base);
    sched_move(g, &s, "FWD h2", 3);
    expect_invalid(a, &s, 3, "instruction 3 (FWD h2)", "input 'v1' is not resident (it was never produced)");
    remat_schedule_destroy(&s);
    remat_schedule_destroy(&base);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(exec_should_reject_a_dropped_recompute)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(CHAIN4, &g);
    uint8_t keep[8] = {0};
    remat_schedule base, s;
    build_keep(a, keep, &base);
    remat_replay_result r;
    replay_valid(a, &base, NULL, &r);
    ck_assert_uint_eq(r.flops_recompute, 110);
    remat_replay_result_destroy(&r);
    /* Without RECOMPUTE a, RECOMPUTE b reads a freed a. */
    sched_copy(&s, &base);
    size_t ra = sched_find(g, &s, "RECOMPUTE a");
    sched_del(&s, ra);
    expect_invalid(a, &s, ra, "(RECOMPUTE b)", "input 'a' is not resident (it was freed)");
    remat_schedule_destroy(&s);
    /* Without RECOMPUTE b (and the FREE of its stepping stone), bwd:c finds
     * its saved b missing. */
    sched_copy(&s, &base);
    size_t rb = sched_find(g, &s, "RECOMPUTE b");
    sched_del(&s, rb);
    ck_assert_uint_eq(sched_find_nth(g, &s, "FREE a", 1), rb);
    sched_del(&s, rb);
    size_t bc = sched_find(g, &s, "BWD c");
    expect_invalid(a, &s, bc, "(BWD c)", "saved tensor 'b' is not resident (it was freed; recompute it first)");
    remat_schedule_destroy(&s);
    /* Dropping both recomputes, then re-adding b's alone: a is missing. */
    sched_copy(&s, &base);
    sched_del(&s, sched_find(g, &s, "RECOMPUTE a"));
    expect_invalid(a, &s, sched_find(g, &s, "RECOMPUTE b"), "input 'a' is not resident", NULL);
    remat_schedule_destroy(&s);
    remat_schedule_destroy(&base);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(exec_should_reject_double_free_and_freeing_leaves)
{
    remat_graph *g;
    remat_schedule base, s;
    remat_analysis *a = mlp2_schedule(&g, &base);
    sched_copy(&s, &base);
    sched_ins(&s, 3, instr_of(g, "FREE h1"));
    expect_invalid(a, &s, 3, "instruction 3 (FREE h1)", "'h1' is not resident (double free)");
    remat_schedule_destroy(&s);
    /* A double free of a view whose base is still resident. */
    sched_copy(&s, &base);
    sched_ins(&s, 11, instr_of(g, "FREE v1"));
    expect_invalid(a, &s, 11, "(FREE v1)", "'v1' is not resident (double free)");
    remat_schedule_destroy(&s);
    sched_copy(&s, &base);
    sched_ins(&s, 0, instr_of(g, "FREE h2"));
    expect_invalid(a, &s, 0, "instruction 0 (FREE h2)", "'h2' is not resident (never produced)");
    remat_schedule_destroy(&s);
    static const char *const leaves[][2] = {{"FREE x", "'x' is an input"},
                                            {"FREE w1", "'w1' is a param"},
                                            {"FREE w2", "'w2' is a param"}};
    for (int i = 0; i < 3; i++) {
        sched_copy(&s, &base);
        sched_ins(&s, 4, instr_of(g, leaves[i][0]));
        expect_invalid(a, &s, 4, leaves[i][0], leaves[i][1]);
        remat_schedule_destroy(&s);
    }
    remat_schedule_destroy(&base);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(exec_should_reject_repeated_missing_and_misordered_backward_steps)
{
    remat_graph *g;
    remat_schedule base, s;
    remat_analysis *a = mlp2_schedule(&g, &base);
    /* Repeated. */
    sched_copy(&s, &base);
    sched_ins(&s, 13, instr_of(g, "BWD a1"));
    expect_invalid(a, &s, 13, "instruction 13 (BWD a1)", "backward step of 'a1' repeated");
    remat_schedule_destroy(&s);
    /* Missing, with an explicit OPT: OPT is where it is found. bwd:h1 is
     * the one that writes w1's gradient. */
    sched_copy(&s, &base);
    sched_del(&s, 14);
    expect_invalid(a, &s, 14, "instruction 14 (OPT)",
                   "backward step of 'h1' never ran: gradient of param 'w1' is incomplete");
    /* ... and without OPT: found at the end (fail_index == n). */
    sched_del(&s, 14);
    expect_invalid(a, &s, 14, "end of schedule",
                   "backward step of 'h1' never ran: gradient of param 'w1' is incomplete");
    remat_schedule_destroy(&s);
    /* Missing in the middle: bwd:h1 then reads an incomplete gradient. */
    sched_copy(&s, &base);
    sched_del(&s, 12);
    expect_invalid(a, &s, 13, "instruction 13 (BWD h1)",
                   "gradient of 'h1' is incomplete: backward step of 'a1' has not run");
    remat_schedule_destroy(&s);
    /* Out of order: bwd:h2 before bwd:loss, which writes h2's gradient. */
    sched_copy(&s, &base);
    sched_move(g, &s, "BWD h2", 8);
    expect_invalid(a, &s, 8, "instruction 8 (BWD h2)",
                   "gradient of 'h2' is incomplete: backward step of 'loss' has not run");
    remat_schedule_destroy(&s);
    /* Before its forward step. */
    sched_copy(&s, &base);
    sched_ins(&s, 0, instr_of(g, "BWD h1"));
    expect_invalid(a, &s, 0, "instruction 0 (BWD h1)", "backward step of 'h1' before its forward step");
    remat_schedule_destroy(&s);
    remat_schedule_destroy(&base);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* An input that wants a gradient: its backward step writes no param. */
static const char *XGRAD =
    "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"xgrad\","
    "\"inputs\":[{\"id\":\"x\",\"bytes\":40,\"requires_grad\":true}],\"params\":[],"
    "\"ops\":[{\"id\":\"e\",\"op\":\"exp\",\"inputs\":[\"x\"],\"bytes\":40,\"flops\":4,\"saves\":[\"e\"]},"
    "{\"id\":\"loss\",\"op\":\"sum\",\"inputs\":[\"e\"],\"bytes\":4,\"flops\":1,\"saves\":[]}],"
    "\"outputs\":[\"loss\"]}";

START_TEST(exec_should_name_a_missing_backward_step_at_the_end)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(XGRAD, &g);
    remat_schedule s;
    remat_schedule_init(&s);
    /* Leaves x 40. 0 FWD e +40 -> 80; 1 FWD loss +4 -> 84; 2 FREE loss;
     * 3 BWD loss +4 seed +40 de -> 124 (then 120); 4 BWD e +40 dx -> 160
     * (then 120: x 40, e 40, dx 40); 5 FREE e -> 80 (dx stays). */
    sched_parse(g, "FWD e, FWD loss, FREE loss, BWD loss, BWD e, FREE e", &s);
    remat_replay_result r;
    replay_valid(a, &s, NULL, &r);
    ck_assert_uint_eq(r.peak_bytes, 160);
    ck_assert_uint_eq(r.peak_index, 4);
    ck_assert_uint_eq(r.peak_by_category[REMAT_CAT_ACTIVATION_GRADS], 80);
    /* The implied optimizer step is instruction n. */
    ck_assert_uint_eq(r.category_peak[REMAT_CAT_PARAM_GRADS], 0);
    remat_replay_result_destroy(&r);
    sched_del(&s, 4);
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_replay(a, &s, NULL, NULL, &r, &err), REMAT_OK);
    ck_assert(!r.valid);
    ck_assert_uint_eq(r.fail_index, 5);
    ck_assert_msg_contains(&err, "end of schedule (after all 5 instructions)");
    ck_assert_msg_contains(&err, "backward step of 'e' never ran");
    ck_assert_msg(strstr(err.msg, "param") == NULL, "no param is involved: %s", err.msg);
    /* The report says the same. */
    size_t len;
    remat_err rerr;
    remat_err_init(&rerr);
    char *json = remat_report_replay(a, &s, &r, &err, REMAT_REPORT_JSON, &len, &rerr);
    ck_assert_ptr_nonnull(json);
    ck_assert_ptr_nonnull(strstr(json, "\"valid\": false, \"fail_index\": 5, \"instruction\": \"end of schedule\""));
    remat_free(json);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

static const char *CHAIN4_NR =
    "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"chain4nr\","
    "\"inputs\":[{\"id\":\"x\",\"bytes\":1000}],\"params\":[{\"id\":\"w\",\"bytes\":200}],"
    "\"ops\":["
    "{\"id\":\"a\",\"op\":\"matmul\",\"inputs\":[\"x\",\"w\"],\"bytes\":400,\"flops\":100},"
    "{\"id\":\"b\",\"op\":\"dropout\",\"inputs\":[\"a\"],\"bytes\":300,\"flops\":10,\"saves\":[\"b\"],"
    "\"recomputable\":false},"
    "{\"id\":\"c\",\"op\":\"scale\",\"inputs\":[\"b\"],\"bytes\":500,\"flops\":20},"
    "{\"id\":\"loss\",\"op\":\"sum\",\"inputs\":[\"c\"],\"bytes\":8,\"flops\":5,\"saves\":[]}],"
    "\"outputs\":[\"loss\"]}";

START_TEST(exec_should_reject_bad_forward_and_recompute_steps)
{
    remat_graph *g;
    remat_schedule base, s;
    remat_analysis *a = mlp2_schedule(&g, &base);
    /* FWD twice. */
    sched_copy(&s, &base);
    sched_ins(&s, 1, instr_of(g, "FWD h1"));
    expect_invalid(a, &s, 1, "instruction 1 (FWD h1)", "already ran forward; a second execution is a RECOMPUTE");
    remat_schedule_destroy(&s);
    /* RECOMPUTE before FWD. */
    sched_copy(&s, &base);
    s.ins[0].kind = REMAT_I_RECOMPUTE;
    expect_invalid(a, &s, 0, "instruction 0 (RECOMPUTE h1)", "RECOMPUTE of op 'h1' before its FWD");
    remat_schedule_destroy(&s);
    /* A pointless RECOMPUTE: a1 is resident. */
    sched_copy(&s, &base);
    sched_ins(&s, 2, instr_of(g, "RECOMPUTE a1"));
    expect_invalid(a, &s, 2, "instruction 2 (RECOMPUTE a1)", "every output of op 'a1' is already resident");
    remat_schedule_destroy(&s);
    /* RECOMPUTE h1 after FREE h1 is legal (nothing needs it, but it rebuilds
     * a freed output): +4096 recomputed, and it stays to the end. */
    sched_copy(&s, &base);
    sched_ins(&s, 3, instr_of(g, "RECOMPUTE h1"));
    remat_replay_result r;
    replay_valid(a, &s, NULL, &r);
    ck_assert_uint_eq(r.flops_recompute, 131072);
    ck_assert_uint_eq(r.peak_bytes, 204800 + 4096);
    ck_assert_uint_eq(r.peak_by_category[REMAT_CAT_RECOMPUTED], 4096);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    /* Anything after OPT. */
    sched_copy(&s, &base);
    ck_assert_int_eq(remat_schedule_push(&s, REMAT_I_FREE, t_tensor(g, "h1")), REMAT_OK);
    expect_invalid(a, &s, 16, "instruction 16 (FREE h1)", "instruction after OPT");
    remat_schedule_destroy(&s);
    sched_copy(&s, &base);
    ck_assert_int_eq(remat_schedule_push(&s, REMAT_I_OPT, 0), REMAT_OK);
    expect_invalid(a, &s, 16, "instruction 16 (OPT)", "instruction after OPT");
    remat_schedule_destroy(&s);
    /* Malformed instructions. */
    sched_copy(&s, &base);
    s.ins[4].arg = 999;
    expect_invalid(a, &s, 4, "instruction 4", "op index 999 out of range");
    s.ins[4] = (remat_instr){REMAT_I_FREE, 999};
    expect_invalid(a, &s, 4, "instruction 4", "tensor index 999 out of range");
    s.ins[4] = (remat_instr){42, 0};
    expect_invalid(a, &s, 4, "instruction 4", "unknown instruction kind 42");
    remat_schedule_destroy(&s);
    remat_schedule_destroy(&base);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);

    /* A non-recomputable op. */
    a = t_analyze(CHAIN4_NR, &g);
    remat_schedule_init(&s);
    sched_parse(g, "FWD a, FWD b, FREE a, FWD c, FWD loss, FREE c, FREE loss, BWD loss, BWD c, BWD b, FREE b, "
                   "RECOMPUTE b, BWD a, OPT", &s);
    expect_invalid(a, &s, 11, "instruction 11 (RECOMPUTE b)", "op 'b' is not recomputable");
    remat_schedule_destroy(&s);
    /* The policy keeps such outputs whatever the keep set says: keeping
     * nothing rebuilds nothing, because b (the only saved activation) is
     * the output of the non-recomputable op. */
    uint8_t keep[8] = {0};
    build_keep(a, keep, &s);
    replay_valid(a, &s, NULL, &r);
    ck_assert_uint_eq(r.flops_recompute, 0);
    ck_assert_uint_eq(r.peak_bytes, 2300); /* store-all's, as computed by hand for chain4 */
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* mlp2 plus an op that nothing reads and that needs no backward step. */
static const char *AUX =
    "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"aux\","
    "\"inputs\":[{\"id\":\"x\",\"bytes\":4096}],"
    "\"params\":[{\"id\":\"w1\",\"bytes\":65536},{\"id\":\"w2\",\"bytes\":65536,\"frozen\":true}],"
    "\"ops\":["
    "{\"id\":\"aux\",\"op\":\"mean\",\"inputs\":[\"x\"],\"bytes\":8,\"flops\":1},"
    "{\"id\":\"h1\",\"op\":\"matmul\",\"inputs\":[\"x\",\"w1\"],\"bytes\":4096,\"flops\":131072},"
    "{\"id\":\"a1\",\"op\":\"relu\",\"inputs\":[\"h1\"],\"bytes\":4096,\"flops\":1024,\"saves\":[\"a1\"]},"
    "{\"id\":\"v1\",\"op\":\"view\",\"inputs\":[\"a1\"],\"alias_of\":\"a1\"},"
    "{\"id\":\"h2\",\"op\":\"matmul\",\"inputs\":[\"v1\",\"w2\"],\"bytes\":4096,\"flops\":131072},"
    "{\"id\":\"loss\",\"op\":\"sum\",\"inputs\":[\"h2\"],\"bytes\":4,\"flops\":1024,\"saves\":[]}],"
    "\"outputs\":[\"loss\"]}";

START_TEST(exec_should_reject_a_forward_step_that_never_ran)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(AUX, &g);
    remat_schedule s, full;
    remat_schedule_init(&full);
    sched_parse(g, "FWD aux, FREE aux", &full);
    sched_parse(g, MLP2_STORE_ALL, &full);
    remat_replay_result r;
    replay_valid(a, &full, NULL, &r);
    ck_assert_uint_eq(r.peak_bytes, 204800); /* aux's 8 bytes are gone long before */
    remat_replay_result_destroy(&r);
    /* Without FWD aux / FREE aux: found at OPT, or at the end. */
    sched_copy(&s, &full);
    sched_del(&s, 0);
    sched_del(&s, 0);
    expect_invalid(a, &s, 15, "instruction 15 (OPT)", "forward step of 'aux' never ran");
    sched_del(&s, 15);
    expect_invalid(a, &s, 15, "end of schedule", "forward step of 'aux' never ran");
    remat_schedule_destroy(&s);
    /* aux gets no gradient: it has no backward step to run. */
    sched_copy(&s, &full);
    sched_ins(&s, 16, instr_of(g, "BWD aux"));
    expect_invalid(a, &s, 16, "instruction 16 (BWD aux)", "op 'aux' has no backward step");
    remat_schedule_destroy(&s);
    remat_schedule_destroy(&full);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

Suite *exec_mutation_suite(void)
{
    Suite *s = suite_create("exec_mutation");
    TCase *mut = tcase_create("mutation");
    tcase_add_test(mut, exec_should_reject_reading_a_freed_tensor);
    tcase_add_test(mut, exec_should_reject_a_dropped_recompute);
    tcase_add_test(mut, exec_should_reject_double_free_and_freeing_leaves);
    tcase_add_test(mut, exec_should_reject_repeated_missing_and_misordered_backward_steps);
    tcase_add_test(mut, exec_should_name_a_missing_backward_step_at_the_end);
    tcase_add_test(mut, exec_should_reject_bad_forward_and_recompute_steps);
    tcase_add_test(mut, exec_should_reject_a_forward_step_that_never_ran);
    suite_add_tcase(s, mut);
    return s;
}

/*
 * check_exec_files.c - plan files and the executor's failure paths.
 *
 * A plan file is the executor's output that outlives a run: these tests
 * write one, read it back to the same schedule and bytes, refuse it for
 * another graph (by name or by fingerprint) and name the JSON path of a bad
 * entry. The failure paths are the ones a valid schedule can still hit: a
 * byte total past 2^64 - 1, an observer that gives up, and every allocation of
 * the policy, the replay, the writers and the plan reader failing in turn.
 */
#include "exec_util.h"
#include "remat/report.h"
#include "util/util_internal.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- Plan files --------------------------------------------------------- */

/* The plan owns its strings and frees them with free() (remat's allocator
 * is malloc underneath); C11 has no strdup. */
static char *dupstr(const char *s)
{
    char *d = malloc(strlen(s) + 1);
    ck_assert_ptr_nonnull(d);
    return strcpy(d, s);
}

static char *write_plan(const remat_analysis *a, const remat_plan *p, const remat_replay_result *r)
{
    remat_err err;
    remat_err_init(&err);
    size_t len;
    char *text = remat_report_plan(a, p, r, &len, &err);
    ck_assert_msg(text != NULL, "%s", err.msg);
    ck_assert_uint_eq(strlen(text), len);
    return text;
}

static void expect_plan_error(const remat_graph *g, const char *text, remat_status code, const char *sub1,
                              const char *sub2)
{
    remat_err err;
    remat_err_init(&err);
    remat_plan p;
    remat_status st = remat_plan_load_json(g, text, strlen(text), "plan.json", &p, &err);
    ck_assert_msg(st == code, "expected %s, got %s (%s)", remat_status_str(code), remat_status_str(st), err.msg);
    ck_assert_msg_contains(&err, sub1);
    if (sub2)
        ck_assert_msg_contains(&err, sub2);
    remat_plan_destroy(&p);
}

START_TEST(exec_should_round_trip_a_plan_file)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(CHAIN4, &g);
    remat_plan p;
    remat_plan_init(&p);
    p.strategy = dupstr("test-strategy");
    p.params_json = dupstr("{\"segments\":2}");
    /* Above 2^53: exact only as a decimal string, which is how it is written. */
    p.budget_kind = REMAT_BUDGET_ACTIVATION;
    p.budget = 9007199254740993ULL;
    p.n_tensors = g->n_tensors;
    p.keep = calloc(g->n_tensors, 1);
    ck_assert(p.strategy && p.params_json && p.keep);
    p.keep[t_tensor(g, "c")] = 1;
    build_keep(a, p.keep, &p.schedule);
    remat_replay_result r;
    replay_valid(a, &p.schedule, NULL, &r);
    char *text = write_plan(a, &p, &r);
    ck_assert_ptr_nonnull(strstr(text, "\"keep\": [\"c\"]"));
    ck_assert_ptr_nonnull(strstr(text, "\"RECOMPUTE a\""));

    remat_plan q;
    remat_err err;
    remat_err_init(&err);
    ck_assert_msg(remat_plan_load_json(g, text, strlen(text), "p.json", &q, &err) == REMAT_OK, "%s\n%s", err.msg,
                  text);
    ck_assert_str_eq(q.graph_name, "chain4");
    ck_assert_uint_eq(q.graph_fingerprint, g->fingerprint);
    ck_assert_str_eq(q.strategy, "test-strategy");
    ck_assert_str_eq(q.params_json, "{\"segments\":2}");
    ck_assert_int_eq(q.budget_kind, REMAT_BUDGET_ACTIVATION);
    ck_assert_uint_eq(q.budget, 9007199254740993ULL);
    ck_assert_uint_eq(q.n_tensors, g->n_tensors);
    for (uint32_t t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].kind == REMAT_TENSOR_ACTIVATION)
            ck_assert_msg(q.keep[t] == p.keep[t], "keep[%s]", g->tensors[t].id);
    ck_assert_uint_eq(q.schedule.n, p.schedule.n);
    ck_assert(memcmp(q.schedule.ins, p.schedule.ins, p.schedule.n * sizeof *p.schedule.ins) == 0);
    /* Written again, the same document. */
    remat_replay_result r2;
    replay_valid(a, &q.schedule, NULL, &r2);
    ck_assert_uint_eq(r2.peak_bytes, r.peak_bytes);
    char *again = write_plan(a, &q, &r2);
    ck_assert_str_eq(again, text);
    remat_free(again);
    remat_replay_result_destroy(&r2);
    remat_plan_destroy(&q);

    /* A total budget in the JSON-number form, no budget, no params. */
    char buf[4096];
    snprintf(buf, sizeof buf,
             "{\"format\":\"remat-plan\",\"version\":1,\"graph\":{\"name\":\"chain4\",\"fingerprint\":\"%016llx\"},"
             "\"budget\":{\"kind\":\"total\",\"bytes\":4096},\"keep\":[],\"schedule\":[\"FWD a\",\"OPT\"]}",
             (unsigned long long)g->fingerprint);
    ck_assert_msg(remat_plan_load_json(g, buf, strlen(buf), "p.json", &q, &err) == REMAT_OK, "%s", err.msg);
    ck_assert_int_eq(q.budget_kind, REMAT_BUDGET_TOTAL);
    ck_assert_uint_eq(q.budget, 4096);
    ck_assert_uint_eq(q.schedule.n, 2);
    ck_assert_uint_eq(q.schedule.ins[1].kind, REMAT_I_OPT);
    remat_plan_destroy(&q);

    remat_free(text);
    remat_replay_result_destroy(&r);
    remat_plan_destroy(&p);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(exec_should_refuse_a_plan_for_another_graph)
{
    remat_graph *g, *g2;
    remat_analysis *a = t_analyze(MLP2, &g);
    remat_analysis *a2 = t_analyze(CHAIN4, &g2);
    remat_plan p;
    remat_plan_init(&p);
    build_keep(a, NULL, &p.schedule);
    char *text = write_plan(a, &p, NULL);
    expect_plan_error(g2, text, REMAT_EPLAN, "made for graph 'mlp2'", "not for graph 'chain4'");
    /* Same name, different content: the fingerprint decides, and the
     * message shows both fingerprints. */
    char *mlp2b = dupstr(MLP2);
    ck_assert_ptr_nonnull(mlp2b);
    char *at = strstr(mlp2b, "\"bytes\":4096}]");
    ck_assert_ptr_nonnull(at);
    memcpy(at, "\"bytes\":4097}]", 14);
    remat_graph *g3;
    remat_analysis *a3 = t_analyze(mlp2b, &g3);
    ck_assert_uint_ne(g3->fingerprint, g->fingerprint);
    char fp[32];
    snprintf(fp, sizeof fp, "%016llx", (unsigned long long)g3->fingerprint);
    expect_plan_error(g3, text, REMAT_EPLAN, "made for graph 'mlp2'", fp);
    remat_analysis_destroy(a3);
    remat_graph_destroy(g3);
    free(mlp2b);
    remat_free(text);
    remat_plan_destroy(&p);
    remat_analysis_destroy(a2);
    remat_graph_destroy(g2);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(exec_should_name_the_json_path_of_a_bad_plan_entry)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(MLP2, &g);
    char head[256], buf[2048];
    snprintf(head, sizeof head,
             "{\"format\":\"remat-plan\",\"version\":1,\"graph\":{\"name\":\"mlp2\",\"fingerprint\":\"%016llx\"},",
             (unsigned long long)g->fingerprint);
    static const char *const cases[][3] = {
        {"\"schedule\":[\"FWD h1\",\"FWD a1\",\"FREE h1\",\"JUMP v1\"]}", "plan.json: schedule[3]",
         "unknown instruction 'JUMP v1'"},
        {"\"schedule\":[\"FWD h1\",\"FWD nope\"]}", "plan.json: schedule[1]", "unknown op id 'nope'"},
        {"\"schedule\":[\"FWD h1\",\"FREE zz\"]}", "plan.json: schedule[1]", "unknown tensor id 'zz'"},
        /* An op id where a tensor is expected, and the reverse. */
        {"\"schedule\":[\"FWD x\"]}", "schedule[0]", "unknown op id 'x'"},
        {"\"schedule\":[\"BWD\"]}", "schedule[0]", "'BWD' needs an op id"},
        {"\"schedule\":[\"OPT now\"]}", "schedule[0]", "OPT takes no argument"},
        {"\"schedule\":[\"FWD h1\",7]}", "schedule[1]", "must be a string"},
        {"\"keep\":[\"a1\",\"zz\"],\"schedule\":[]}", "plan.json: keep[1]", "unknown tensor id 'zz'"},
        {"\"schedule\":{}}", "plan.json: schedule", "not an array"},
        {"\"budget\":{\"kind\":\"most\",\"bytes\":1},\"schedule\":[]}", "budget.kind", "\"total\" or \"activation\""},
        {"\"budget\":{\"kind\":\"total\",\"bytes\":1.5},\"schedule\":[]}", "budget.bytes", "non-negative integer"},
        {"\"frobs\":1,\"schedule\":[]}", "plan.json", "unknown field 'frobs'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(buf, sizeof buf, "%s%s", head, cases[i][0]);
        expect_plan_error(g, buf, REMAT_EPLAN, cases[i][1], cases[i][2]);
    }
    expect_plan_error(g, "{\"format\":\"remat-plan\",\n \"version\": 1,\n \"graph\": [}", REMAT_EPARSE,
                      "plan.json:3:", "not valid JSON");
    expect_plan_error(g, "{\"format\":\"remat-graph\",\"version\":1}", REMAT_EPLAN, "format", "remat-plan");
    expect_plan_error(g, "{\"format\":\"remat-plan\",\"version\":2}", REMAT_EPLAN, "version", "version 1");
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* ---- Failure paths ------------------------------------------------------ */

START_TEST(exec_should_report_byte_overflow_instead_of_wrapping)
{
    /* 2^63 + 2^63 does not fit in 64 bits: the replay says so instead of
     * reporting a wrapped peak. Byte counts above 2^53 are decimal strings. */
    remat_graph *g;
    remat_analysis *a = t_analyze(
        "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"huge\","
        "\"inputs\":[{\"id\":\"x\",\"bytes\":\"9223372036854775808\"}],\"params\":[{\"id\":\"w\",\"bytes\":8}],"
        "\"ops\":[{\"id\":\"a\",\"op\":\"f\",\"inputs\":[\"x\",\"w\"],\"bytes\":\"9223372036854775808\",\"flops\":1}],"
        "\"outputs\":[\"a\"]}",
        &g);
    remat_schedule s;
    remat_schedule_init(&s);
    sched_parse(g, "FWD a, BWD a, FREE a, OPT", &s);
    remat_replay_result r;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_replay(a, &s, NULL, NULL, &r, &err), REMAT_EOVERFLOW);
    ck_assert_msg_contains(&err, "instruction 0");
    ck_assert_msg_contains(&err, "2^64-1");
    ck_assert_ptr_null(r.recompute_counts);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

static int refuse_step(void *ctx, size_t index, remat_instr in, uint64_t live_after, uint64_t high_water,
                       const uint64_t *hw_by_category)
{
    (void)in, (void)live_after, (void)high_water, (void)hw_by_category;
    return index == *(size_t *)ctx;
}

START_TEST(exec_should_stop_when_an_observer_fails)
{
    remat_graph *g;
    remat_schedule s;
    remat_analysis *a = mlp2_schedule(&g, &s);
    size_t stop_at = 5;
    remat_replay_observer obs = {0};
    obs.ctx = &stop_at;
    obs.on_step = refuse_step;
    remat_replay_result r;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_replay(a, &s, NULL, &obs, &r, &err), REMAT_EINTERNAL);
    ck_assert_msg_contains(&err, "instruction 5: replay observer failed");
    ck_assert_ptr_null(r.recompute_counts);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* Every allocation of the policy, the replay, the plan reader and the
 * writers fails in turn: each reports out of memory, frees what it made
 * (ASan's leak check), and the next attempt gets further. */
START_TEST(exec_should_fail_cleanly_when_memory_runs_out)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(CHAIN4, &g);
    uint8_t keep[8] = {0};
    int failures = 0;
    remat_schedule s;
    for (uint64_t n = 1;; n++) {
        remat_err err;
        remat_err_init(&err);
        remat_schedule_init(&s);
        remat__alloc_fail_at(n);
        remat_status st = remat_schedule_from_keep(a, keep, &s, &err);
        remat__alloc_fail_at(0);
        if (st == REMAT_OK)
            break;
        ck_assert_msg(st == REMAT_ENOMEM, "allocation %llu: %s", (unsigned long long)n, err.msg);
        ck_assert_msg_contains(&err, "out of memory");
        remat_schedule_destroy(&s);
        failures++;
    }
    ck_assert_int_gt(failures, 3);
    remat_replay_result r;
    for (uint64_t n = 1;; n++) {
        remat_err err;
        remat_err_init(&err);
        remat__alloc_fail_at(n);
        remat_status st = remat_replay(a, &s, NULL, NULL, &r, &err);
        remat__alloc_fail_at(0);
        if (st == REMAT_OK)
            break;
        ck_assert_msg(st == REMAT_ENOMEM, "allocation %llu: %s", (unsigned long long)n, err.msg);
        ck_assert_msg_contains(&err, "out of memory");
        ck_assert_ptr_null(r.recompute_counts);
        failures++;
    }
    ck_assert(r.valid);
    remat_plan p;
    remat_plan_init(&p);
    p.n_tensors = g->n_tensors;
    p.keep = calloc(g->n_tensors, 1);
    ck_assert_ptr_nonnull(p.keep);
    sched_copy(&p.schedule, &s);
    for (int doc = 0; doc < 3; doc++)
        for (uint64_t n = 1;; n++) {
            remat_err err;
            remat_err_init(&err);
            size_t len;
            remat__alloc_fail_at(n);
            char *text = doc == 0   ? remat_report_replay(a, &s, &r, NULL, REMAT_REPORT_JSON, &len, &err)
                         : doc == 1 ? remat_report_replay(a, &s, &r, NULL, REMAT_REPORT_TEXT, &len, &err)
                                    : remat_report_plan(a, &p, &r, &len, &err);
            remat__alloc_fail_at(0);
            if (text) {
                remat_free(text);
                break;
            }
            ck_assert_int_eq(err.code, REMAT_ENOMEM);
            ck_assert_msg_contains(&err, "out of memory");
        }
    /* The plan reader too, including allocations inside cJSON's parser,
     * which say out of memory rather than "not valid JSON". */
    char *text = write_plan(a, &p, &r);
    for (uint64_t n = 1;; n++) {
        remat_err err;
        remat_err_init(&err);
        remat_plan q;
        remat__alloc_fail_at(n);
        remat_status st = remat_plan_load_json(g, text, strlen(text), "p.json", &q, &err);
        remat__alloc_fail_at(0);
        remat_plan_destroy(&q);
        if (st == REMAT_OK)
            break;
        ck_assert_msg(st == REMAT_ENOMEM, "allocation %llu: %s: %s", (unsigned long long)n, remat_status_str(st),
                      err.msg);
        ck_assert_msg_contains(&err, "out of memory");
    }
    remat_free(text);
    remat_plan_destroy(&p);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

Suite *exec_files_suite(void)
{
    Suite *s = suite_create("exec_files");
    TCase *plan = tcase_create("plan");
    tcase_add_test(plan, exec_should_round_trip_a_plan_file);
    tcase_add_test(plan, exec_should_refuse_a_plan_for_another_graph);
    tcase_add_test(plan, exec_should_name_the_json_path_of_a_bad_plan_entry);
    suite_add_tcase(s, plan);
    TCase *fail = tcase_create("failure");
    tcase_add_test(fail, exec_should_report_byte_overflow_instead_of_wrapping);
    tcase_add_test(fail, exec_should_stop_when_an_observer_fails);
    tcase_add_test(fail, exec_should_fail_cleanly_when_memory_runs_out);
    suite_add_tcase(s, fail);
    return s;
}

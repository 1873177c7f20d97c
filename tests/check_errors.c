/*
 * check_errors.c - errors as data: remat_err's location beside its message.
 *
 * The message says where an error is in words; remat_err.loc says the same
 * as fields (file, JSON path, line and column, graph id) so that a caller
 * can point at the input without parsing text. Each case here builds an
 * input whose faulty place is known by construction and checks the fields,
 * and that the message and the fields agree.
 */
#include "exec_util.h"

#include <stdio.h>
#include <string.h>

START_TEST(errors_should_carry_the_json_path_and_file_of_a_bad_graph)
{
    const char *json = "{\"format\": \"remat-graph\", \"version\": 1, \"inputs\": [{\"id\": \"x\", \"bytes\": 4}],"
                       " \"ops\": [{\"id\": \"a\", \"op\": \"f\", \"inputs\": [\"nope\"], \"bytes\": 4}],"
                       " \"outputs\": [\"a\"]}";
    remat_graph *g = NULL;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_graph_load_json(json, strlen(json), "t.json", &g, &err), REMAT_EGRAPH);
    ck_assert_str_eq(err.loc.file, "t.json");
    ck_assert_str_eq(err.loc.path, "ops[0].inputs[0]");
    ck_assert_int_eq(err.loc.line, 0);
    char want[600];
    snprintf(want, sizeof want, "%s: %s: ", err.loc.file, err.loc.path);
    ck_assert_msg(strncmp(err.msg, want, strlen(want)) == 0, "'%s' does not start with '%s'", err.msg, want);
}
END_TEST

START_TEST(errors_should_carry_the_line_and_column_of_a_syntax_error)
{
    /* The third line's "}" cannot close the array its "[" opened. */
    const char *json = "{\"format\": \"remat-graph\",\n \"version\": 1,\n \"ops\": [}";
    remat_graph *g = NULL;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_graph_load_json(json, strlen(json), "s.json", &g, &err), REMAT_EPARSE);
    ck_assert_str_eq(err.loc.file, "s.json");
    ck_assert_int_eq(err.loc.line, 3);
    ck_assert_int_gt(err.loc.column, 0);
    ck_assert_int_le(err.loc.column, 10); /* the line is ' "ops": [}' */
    char want[64];
    snprintf(want, sizeof want, "s.json:%d:%d:", err.loc.line, err.loc.column);
    ck_assert_msg(strncmp(err.msg, want, strlen(want)) == 0, "'%s' does not start with '%s'", err.msg, want);
}
END_TEST

START_TEST(errors_should_carry_the_json_path_of_a_bad_plan_file)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(MLP2, &g);
    char plan[1024];
    snprintf(plan, sizeof plan,
             "{\"format\": \"remat-plan\", \"version\": 1, \"graph\": {\"name\": \"%s\", \"fingerprint\": \"%016llx\"},"
             " \"strategy\": \"x\", \"params\": {}, \"budget\": null, \"keep\": [],"
             " \"schedule\": [\"FWD h1\", \"JUMP h1\"]}",
             g->name, (unsigned long long)g->fingerprint);
    remat_plan p;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_plan_load_json(g, plan, strlen(plan), "p.json", &p, &err), REMAT_EPLAN);
    ck_assert_str_eq(err.loc.file, "p.json");
    ck_assert_str_eq(err.loc.path, "schedule[1]");
    remat_plan_destroy(&p);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(errors_should_carry_the_id_an_illegal_instruction_names)
{
    remat_graph *g;
    remat_schedule s;
    remat_analysis *a = mlp2_schedule(&g, &s);
    /* BWD of the first op moved to the front: its forward step has not run. */
    remat_instr first = s.ins[0];
    remat_instr bwd = {REMAT_I_BWD, first.arg};
    sched_ins(&s, 0, bwd);
    remat_replay_result r;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_replay(a, &s, NULL, NULL, &r, &err), REMAT_OK);
    ck_assert(!r.valid);
    ck_assert_uint_eq(r.fail_index, 0);
    ck_assert_str_eq(err.loc.id, g->ops[first.arg].id);
    ck_assert_ptr_nonnull(strstr(err.msg, err.loc.id));
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(errors_should_keep_the_first_location)
{
    remat_err err;
    remat_err_init(&err);
    remat_err_loc one, two;
    remat_err_loc_make(&one, "a.json", "ops[1]", 0, 0, "h1");
    remat_err_loc_make(&two, "b.json", "ops[2]", 0, 0, "h2");
    ck_assert_int_eq(remat_err_set_at(&err, REMAT_EGRAPH, &one, "first"), REMAT_EGRAPH);
    ck_assert_int_eq(remat_err_set_at(&err, REMAT_EPLAN, &two, "second"), REMAT_EGRAPH);
    ck_assert_str_eq(err.msg, "first");
    ck_assert_str_eq(err.loc.file, "a.json");
    ck_assert_str_eq(err.loc.id, "h1");
    /* remat_err_set records no location. */
    remat_err_init(&err);
    remat_err_set(&err, REMAT_EINVAL, "plain");
    ck_assert_str_eq(err.loc.file, "");
    ck_assert_int_eq(err.loc.line, 0);
}
END_TEST

Suite *errors_suite(void)
{
    Suite *s = suite_create("errors");
    TCase *tc = tcase_create("errors");
    tcase_add_test(tc, errors_should_carry_the_json_path_and_file_of_a_bad_graph);
    tcase_add_test(tc, errors_should_carry_the_line_and_column_of_a_syntax_error);
    tcase_add_test(tc, errors_should_carry_the_json_path_of_a_bad_plan_file);
    tcase_add_test(tc, errors_should_carry_the_id_an_illegal_instruction_names);
    tcase_add_test(tc, errors_should_keep_the_first_location);
    suite_add_tcase(s, tc);
    return s;
}

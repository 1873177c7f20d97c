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

/* The fields say where, and the message opens with the same place:
 * "file[:line[:column]]: [path: ]". */
static void loc_agrees(const remat_err *err, const char *file, int line, const char *path, const char *id)
{
    ck_assert_str_eq(err->loc.file, file);
    ck_assert_int_eq(err->loc.line, line);
    ck_assert_str_eq(err->loc.path, path);
    ck_assert_str_eq(err->loc.id, id);
    char want[700];
    int n = snprintf(want, sizeof want, "%s", file);
    if (line)
        n += snprintf(want + n, sizeof want - (size_t)n, ":%d", line);
    if (line && err->loc.column)
        n += snprintf(want + n, sizeof want - (size_t)n, ":%d", err->loc.column);
    snprintf(want + n, sizeof want - (size_t)n, ": %s%s", path, *path ? ": " : "");
    ck_assert_msg(strncmp(err->msg, want, strlen(want)) == 0, "'%s' does not start with '%s'", err->msg, want);
    if (*id)
        ck_assert_msg(strstr(err->msg, id) != NULL, "'%s' does not name '%s'", err->msg, id);
}

static remat_err checkmate_fails(const char *text, remat_status code)
{
    remat_err err;
    remat_err_init(&err);
    char *out = (char *)"untouched";
    ck_assert_int_eq(remat_import_checkmate(text, strlen(text), "c.json", NULL, &out, NULL, NULL, &err), code);
    ck_assert_ptr_null(out);
    return err;
}

START_TEST(errors_should_carry_the_place_of_a_bad_checkmate_graph)
{
    /* Each input's faulty place is known by construction: a link to a node
     * that does not exist, a node that reads itself, an id used twice, and
     * a "}" on line 2 that closes the "[" before it. */
    remat_err err = checkmate_fails("{\"nodes\": [{\"id\": 0, \"cost_cpu\": 1, \"cost_ram\": 8}], "
                                    "\"links\": [{\"source\": 0, \"target\": 5}]}",
                                    REMAT_EGRAPH);
    loc_agrees(&err, "c.json", 0, "links[0].target", "");
    err = checkmate_fails("{\"nodes\": [{\"id\": 0, \"cost_cpu\": 1, \"cost_ram\": 8}, {\"id\": 7, \"cost_cpu\": 1, "
                          "\"cost_ram\": 8}], \"links\": [{\"source\": 0, \"target\": 7}, {\"source\": 7, \"target\": 7}]}",
                          REMAT_EGRAPH);
    loc_agrees(&err, "c.json", 0, "links[1]", "7");
    err = checkmate_fails("{\"nodes\": [{\"id\": \"a\", \"cost_cpu\": 1, \"cost_ram\": 8}, {\"id\": \"a\", "
                          "\"cost_cpu\": 1, \"cost_ram\": 8}], \"links\": []}",
                          REMAT_EGRAPH);
    loc_agrees(&err, "c.json", 0, "nodes[1].id", "a");
    err = checkmate_fails("{\"nodes\": [{\"id\": 0, \"cost_cpu\": 1}], \"links\": []}", REMAT_EGRAPH);
    loc_agrees(&err, "c.json", 0, "nodes[0].cost_ram", "");
    err = checkmate_fails("{\"nodes\":\n [}", REMAT_EPARSE);
    loc_agrees(&err, "c.json", 2, "", "");
    ck_assert_int_ge(err.loc.column, 2);
    ck_assert_int_le(err.loc.column, 3);
}
END_TEST

static remat_err dtr_fails(const char *text, remat_status code)
{
    remat_err err;
    remat_err_init(&err);
    char *out = (char *)"untouched";
    ck_assert_int_eq(remat_import_dtr(text, strlen(text), "t.log", NULL, &out, NULL, NULL, &err), code);
    ck_assert_ptr_null(out);
    return err;
}

START_TEST(errors_should_carry_the_line_field_and_tensor_of_a_bad_dtr_log)
{
    const char *head = "{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"x1\"}\n"
                       "{\"INSTRUCTION\":\"MEMORY\",\"NAME\":\"x1\",\"MEMORY\":\"4\"}\n";
    char log[512];
    /* Line 3 reads a tensor nothing made: its second argument. */
    snprintf(log, sizeof log, "%s{\"INSTRUCTION\":\"CALL\",\"NAME\":\"f\",\"ARGS\":[\"x1\",\"x42\"],"
             "\"RESULT\":[\"x2\"],\"TIME\":\"1\"}\n", head);
    remat_err err = dtr_fails(log, REMAT_EGRAPH);
    loc_agrees(&err, "t.log", 3, "ARGS[1]", "x42");
    /* Line 3 makes x1 a second time. */
    snprintf(log, sizeof log, "%s{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"x1\"}\n", head);
    err = dtr_fails(log, REMAT_EGRAPH);
    loc_agrees(&err, "t.log", 3, "NAME", "x1");
    /* Line 2 is not JSON; its first character is where cJSON stops. */
    err = dtr_fails("{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"x1\"}\nnot json\n", REMAT_EPARSE);
    loc_agrees(&err, "t.log", 2, "", "");
    ck_assert_int_eq(err.loc.column, 1);
    /* The log ends before x1's MEMORY line: the log as a whole, about x1. */
    err = dtr_fails("{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"x1\"}\n", REMAT_EGRAPH);
    loc_agrees(&err, "t.log", 0, "", "x1");
    /* A log that reads but cannot be mapped (no op) is at fault as a whole. */
    err = dtr_fails(head, REMAT_EGRAPH);
    loc_agrees(&err, "t.log", 0, "", "");
    ck_assert_msg_contains(&err, "no forward CALL or MUTATE");
}
END_TEST

/* Two f64 params (p trainable, q frozen) and a 4-element f64 input. */
static const char *const STATE_GRAPH =
    "{\"format\": \"remat-graph\", \"version\": 1, \"name\": \"t\","
    " \"inputs\": [{\"id\": \"x\", \"bytes\": 32, \"dtype\": \"f64\"}],"
    " \"params\": [{\"id\": \"p\", \"bytes\": 16, \"dtype\": \"f64\"}, {\"id\": \"q\", \"bytes\": 16, \"dtype\": "
    "\"f64\", \"frozen\": true}],"
    " \"ops\": [{\"id\": \"m\", \"op\": \"f\", \"inputs\": [\"p\", \"q\", \"x\"], \"bytes\": 16, \"flops\": 1}],"
    " \"outputs\": [\"m\"]}";

static remat_err state_fails(const remat_graph *g, const char *text, remat_status code)
{
    remat_err err;
    remat_err_init(&err);
    remat_model_state st;
    ck_assert_int_eq(remat_model_state_load_json(g, text, strlen(text), "s.json", &st, &err), code);
    ck_assert_ptr_null(st.value);
    return err;
}

START_TEST(errors_should_carry_the_json_path_and_tensor_of_a_bad_state_or_data_file)
{
    remat_graph *g = t_load(STATE_GRAPH);
    const char *head = "{\"format\": \"remat-state\", \"version\": 1, \"dtype\": \"f64\", \"step\": 1, "
                       "\"optimizer\": {\"name\": \"sgd\"}, ";
    char text[512];
    snprintf(text, sizeof text, "%s\"params\": {\"z\": {\"value\": [1]}}}", head);
    remat_err err = state_fails(g, text, REMAT_EGRAPH);
    loc_agrees(&err, "s.json", 0, "params.z", "z");
    snprintf(text, sizeof text, "%s\"params\": {}}", head);
    err = state_fails(g, text, REMAT_EGRAPH);
    loc_agrees(&err, "s.json", 0, "params", "p");
    snprintf(text, sizeof text, "%s\"params\": {\"p\": {\"value\": [1, 2, 3]}}}", head);
    err = state_fails(g, text, REMAT_EGRAPH);
    loc_agrees(&err, "s.json", 0, "params.p.value", "");
    err = state_fails(g, "{\"format\": \"remat-state\", \"version\": 2}", REMAT_EGRAPH);
    loc_agrees(&err, "s.json", 0, "version", "");
    err = state_fails(g, "{\"format\": \"remat-state\",\n \"version\": }", REMAT_EPARSE);
    loc_agrees(&err, "s.json", 2, "", "");
    ck_assert_int_gt(err.loc.column, 0);
    /* Data files are read by the same routine. */
    static const struct {
        const char *json, *path, *id;
    } bads[] = {
        {"{\"format\": \"remat-data\", \"version\": 1, \"batches\": [{\"x\": [1, 2, 3]}]}", "batches[0].x", "x"},
        {"{\"format\": \"remat-data\", \"version\": 1, \"batches\": [{}, {\"w\": [1]}]}", "batches[0]", "x"},
        {"{\"format\": \"remat-data\", \"version\": 1, \"batches\": [{\"x\": [1, 2, 3, 4], \"w\": [1]}]}",
         "batches[0].w", "w"},
        {"{\"format\": \"remat-data\", \"version\": 1, \"batches\": []}", "batches", ""},
    };
    for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++) {
        remat_dataset d;
        remat_err_init(&err);
        ck_assert_int_eq(remat_dataset_load_json(g, bads[i].json, strlen(bads[i].json), "d.json", &d, &err),
                         REMAT_EGRAPH);
        loc_agrees(&err, "d.json", 0, bads[i].path, bads[i].id);
    }
    remat_graph_destroy(g);
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
    tcase_add_test(tc, errors_should_carry_the_place_of_a_bad_checkmate_graph);
    tcase_add_test(tc, errors_should_carry_the_line_field_and_tensor_of_a_bad_dtr_log);
    tcase_add_test(tc, errors_should_carry_the_json_path_and_tensor_of_a_bad_state_or_data_file);
    suite_add_tcase(s, tc);
    return s;
}

/*
 * check_load_errors.c - the graph loader refuses every bad input the format
 * forbids (syntax, wrong types, missing and unknown fields, references and
 * ids, cycles, numbers, semantic checks, files) with the right status and a
 * message that names the place (JSON path, id, or line:column). Part of the
 * "load" suite (check_load.c builds it; these tests are its "errors" case).
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, mkstemp */
#include "check_load.h"
#include "util/util_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- syntax ---------------------------------------------------------- */

START_TEST(load_should_report_line_and_column_of_a_syntax_error)
{
    /* The missing comma is before "op" on line 3; counting by hand, its
     * opening quote is column 22. */
    t_load_fails("{\"format\": \"remat-graph\",\n \"version\": 1,\n \"ops\": [ {\"id\": \"a\" \"op\": \"relu\"} ]}",
                 REMAT_EPARSE, "t.json:3:22: not valid JSON");
    /* A doubled comma on line 2: the second comma is column 11. */
    t_load_fails("{\n  \"a\": [1,, 2]}", REMAT_EPARSE, "t.json:2:11:");
    /* A bare word at the very start. */
    t_load_fails("graph", REMAT_EPARSE, "t.json:1:1:");
}
END_TEST

START_TEST(load_should_reject_text_after_the_json_value)
{
    /* Line 2, column 3 holds the stray 'x'. */
    fails(HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1}],'outputs':['y']}\n  x",
          REMAT_EPARSE, "t.json:2:3: unexpected text after the JSON value");
}
END_TEST

START_TEST(load_should_reject_empty_input)
{
    t_load_fails("", REMAT_EPARSE, "t.json: empty file, not JSON");
    /* Whitespace only is not JSON either; it is still located. */
    t_load_fails("  \n  ", REMAT_EPARSE, "t.json:2:");
}
END_TEST

START_TEST(load_should_reject_a_top_level_that_is_not_an_object)
{
    static const bad_case c[] = {
        {"[1, 2]", REMAT_EGRAPH, "t.json: top level must be an object"},
        {"'remat-graph'", REMAT_EGRAPH, "t.json: top level must be an object"},
        {"42", REMAT_EGRAPH, "t.json: top level must be an object"},
        {"null", REMAT_EGRAPH, "t.json: top level must be an object"},
    };
    FAILS_ALL(c);
}
END_TEST

START_TEST(load_should_reject_a_wrong_format_or_version)
{
    static const bad_case c[] = {
        {"{'format':'onnx','version':1,'ops':[],'outputs':[]}", REMAT_EGRAPH,
         "t.json: format: must be \"remat-graph\""},
        {"{'format':7,'version':1,'ops':[],'outputs':[]}", REMAT_EGRAPH, "t.json: format: must be"},
        {"{'format':'remat-graph','version':2,'ops':[],'outputs':[]}", REMAT_EGRAPH,
         "t.json: version: unsupported version (this remat reads version 1)"},
        {"{'format':'remat-graph','version':'1','ops':[],'outputs':[]}", REMAT_EGRAPH,
         "t.json: version: unsupported version"},
    };
    FAILS_ALL(c);
}
END_TEST

/* ---- wrong types ----------------------------------------------------- */

START_TEST(load_should_reject_fields_of_the_wrong_type)
{
    static const bad_case c[] = {
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':'lots','flops':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].bytes: string 'lots' is not a decimal count"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':true,'flops':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].bytes: must be a non-negative integer"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':'x','bytes':4,'flops':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].inputs: must be an array"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':[7],'bytes':4,'flops':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].inputs[0]: must be a tensor id (string)"},
        {HDR X_IN ",'params':[{'id':'w','bytes':4,'frozen':'yes'}],"
                  "'ops':[{'id':'y','op':'mul','inputs':['x','w'],'bytes':4,'flops':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: params[0].frozen: must be true or false"},
        {HDR "'inputs':[{'id':'x','bytes':4,'requires_grad':1}],"
             "'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: inputs[0].requires_grad: must be true or false"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1,'recomputable':0}],"
                  "'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].recomputable: must be true or false"},
        {HDR X_IN ",'ops':[{'id':'y','op':'cat','inputs':['x'],'bytes':4,'flops':1,'grad_views':'yes'}],"
                  "'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].grad_views: must be true or false"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1},"
                  "{'id':'v','op':'view','inputs':['y'],'alias_of':'y','grad_views':true}],'outputs':['v']}",
         REMAT_EGRAPH, "t.json: ops[1].grad_views: op 'v': grad_views needs an op with one output that is not a view "
                       "(its output has alias_of)"},
        {HDR X_IN ",'ops':[{'id':'s','op':'split','inputs':['x'],'flops':1,'grad_views':true,"
                  "'outputs':[{'id':'a','bytes':2},{'id':'b','bytes':2}]}],'outputs':['a']}",
         REMAT_EGRAPH, "t.json: ops[0].grad_views: op 's': grad_views needs an op with one output that is not a view "
                       "(it has several outputs)"},
        {HDR X_IN ",'ops':[{'id':5,'op':'relu','inputs':['x'],'bytes':4,'flops':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].id: must be a string"},
        {HDR X_IN ",'ops':[{'id':'y','op':['relu'],'inputs':['x'],'bytes':4,'flops':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].op: must be a string"},
        {HDR X_IN ",'ops':[{'id':'','op':'relu','inputs':['x'],'bytes':4,'flops':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].id: must not be empty"},
        {HDR X_IN ",'ops':{'id':'y'},'outputs':['y']}", REMAT_EGRAPH, "t.json: ops: must be an array"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1}],'outputs':'y'}",
         REMAT_EGRAPH, "t.json: outputs: must be an array"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1}],'outputs':[0]}",
         REMAT_EGRAPH, "t.json: outputs[0]: must be a tensor id (string)"},
        {HDR "'inputs':{'id':'x','bytes':4},'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1}],"
             "'outputs':['y']}",
         REMAT_EGRAPH, "t.json: inputs: must be an array"},
        {HDR "'inputs':['x'],'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: inputs[0]: must be an object"},
        {HDR X_IN ",'ops':['y'],'outputs':['y']}", REMAT_EGRAPH, "t.json: ops[0]: must be an object"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1,'saves':'x'}],"
                  "'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].saves: must be an array"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1,'attrs':[1]}],"
                  "'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].attrs: must be an object"},
        {HDR X_IN ",'meta':'exported','ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1}],"
                  "'outputs':['y']}",
         REMAT_EGRAPH, "t.json: meta: must be an object"},
        {HDR X_IN ",'name':3,'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: name: must be a string"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1,'dtype':16}],"
                  "'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].dtype: must be a string"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1,'shape':4}],"
                  "'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].shape: must be an array"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1,'shape':[2,-2]}],"
                  "'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].shape[1]: must not be negative"},
        {HDR X_IN ",'ops':[{'id':'y','op':'split','inputs':['x'],'flops':1,'outputs':[{'id':'a','bytes':2},7]}],"
                  "'outputs':['a']}",
         REMAT_EGRAPH, "t.json: ops[0].outputs[1]: must be an object"},
    };
    FAILS_ALL(c);
}
END_TEST

/* ---- missing and unknown fields --------------------------------------- */

START_TEST(load_should_reject_missing_required_fields)
{
    static const bad_case c[] = {
        {"{'version':1,'ops':[],'outputs':[]}", REMAT_EGRAPH, "t.json: missing required field 'format'"},
        {"{'format':'remat-graph','ops':[],'outputs':[]}", REMAT_EGRAPH, "t.json: missing required field 'version'"},
        {HDR X_IN ",'outputs':['x']}", REMAT_EGRAPH, "t.json: missing required field 'ops'"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1}]}", REMAT_EGRAPH,
         "t.json: missing required field 'outputs'"},
        {HDR X_IN ",'ops':[{'op':'relu','inputs':['x'],'bytes':4,'flops':1}],'outputs':['x']}", REMAT_EGRAPH,
         "t.json: ops[0]: missing required field 'id'"},
        {HDR X_IN ",'ops':[{'id':'y','inputs':['x'],'bytes':4,'flops':1}],'outputs':['y']}", REMAT_EGRAPH,
         "t.json: ops[0]: missing required field 'op'"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','bytes':4,'flops':1}],'outputs':['y']}", REMAT_EGRAPH,
         "t.json: ops[0]: missing required field 'inputs'"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'flops':1}],'outputs':['y']}", REMAT_EGRAPH,
         "t.json: ops[0]: missing required field 'bytes'"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4}],'outputs':['y']}", REMAT_EGRAPH,
         "t.json: ops[0]: missing required field 'flops'"},
        {HDR "'inputs':[{'id':'x'}],'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1}],"
             "'outputs':['y']}",
         REMAT_EGRAPH, "t.json: inputs[0]: missing required field 'bytes'"},
        {HDR "'params':[{'bytes':4}],'ops':[{'id':'y','op':'relu','inputs':[],'bytes':4,'flops':1}],"
             "'outputs':['y']}",
         REMAT_EGRAPH, "t.json: params[0]: missing required field 'id'"},
        {HDR X_IN ",'ops':[{'id':'y','op':'split','inputs':['x'],'flops':1,'outputs':[{'bytes':2}]}],"
                  "'outputs':['x']}",
         REMAT_EGRAPH, "t.json: ops[0].outputs[0]: missing required field 'id'"},
        {HDR X_IN ",'ops':[{'id':'y','op':'split','inputs':['x'],'flops':1,'outputs':[{'id':'a','bytes':2},"
                  "{'id':'b'}]}],'outputs':['a']}",
         REMAT_EGRAPH, "t.json: ops[0].outputs[1]: missing required field 'bytes'"},
    };
    FAILS_ALL(c);
}
END_TEST

START_TEST(load_should_reject_unknown_fields)
{
    static const bad_case c[] = {
        {HDR X_IN ",'opps':[],'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: unknown field 'opps'"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flop':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0]: unknown field 'flop'"},
        {HDR "'inputs':[{'id':'x','byte':4}],'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1}],"
             "'outputs':['y']}",
         REMAT_EGRAPH, "t.json: inputs[0]: unknown field 'byte'"},
        {HDR X_IN ",'ops':[{'id':'y','op':'split','inputs':['x'],'flops':1,'outputs':[{'id':'a','bytes':2,"
                  "'frozen':true}]}],'outputs':['a']}",
         REMAT_EGRAPH, "t.json: ops[0].outputs[0]: unknown field 'frozen'"},
        /* Each kind of leaf has its own flag; the other one is a mistake. */
        {HDR X_IN ",'params':[{'id':'w','bytes':4,'requires_grad':true}],"
                  "'ops':[{'id':'y','op':'mul','inputs':['x','w'],'bytes':4,'flops':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: params[0]: params use 'frozen', not 'requires_grad'"},
        {HDR "'inputs':[{'id':'x','bytes':4,'frozen':true}],"
             "'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: inputs[0]: inputs use 'requires_grad', not 'frozen'"},
        /* An op with an 'outputs' list gives sizes per output, not at the
         * op level. */
        {HDR X_IN ",'ops':[{'id':'y','op':'split','inputs':['x'],'bytes':4,'flops':1,"
                  "'outputs':[{'id':'a','bytes':2}]}],'outputs':['a']}",
         REMAT_EGRAPH, "t.json: ops[0]: an op with 'outputs' gives bytes, alias_of, dtype and shape per output"},
        {HDR X_IN ",'ops':[{'id':'y','op':'split','inputs':['x'],'flops':1,'outputs':[]}],'outputs':['x']}",
         REMAT_EGRAPH, "t.json: ops[0]: 'outputs' must not be empty"},
    };
    FAILS_ALL(c);
}
END_TEST

START_TEST(load_should_reject_a_key_given_twice_in_one_object)
{
    /* JSON leaves duplicate keys undefined; taking either value silently
     * would load a graph the author did not write. */
    fails(HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'bytes':8,'flops':1}],'outputs':['y']}",
          REMAT_EGRAPH, "t.json: ops[0]: field 'bytes' is given twice");
    fails(HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1}],'outputs':['y'],"
              "'outputs':['x']}",
          REMAT_EGRAPH, "t.json: field 'outputs' is given twice");
}
END_TEST

/* ---- references and ids ---------------------------------------------- */

START_TEST(load_should_reject_unknown_tensor_ids)
{
    static const bad_case c[] = {
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1},"
                  "{'id':'z','op':'add','inputs':['y','zz'],'bytes':4,'flops':1}],'outputs':['z']}",
         REMAT_EGRAPH, "t.json: ops[1].inputs[1]: unknown tensor id 'zz'"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1,'saves':['y','ghost']}],"
                  "'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].saves[1]: unknown tensor id 'ghost'"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1}],'outputs':['loss']}",
         REMAT_EGRAPH, "t.json: outputs[0]: unknown tensor id 'loss'"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1},"
                  "{'id':'v','op':'view','inputs':['y'],'alias_of':'q'}],'outputs':['v']}",
         REMAT_EGRAPH, "t.json: ops[1].alias_of: unknown tensor id 'q'"},
        /* Ids are case-sensitive. */
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['X'],'bytes':4,'flops':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].inputs[0]: unknown tensor id 'X'"},
    };
    FAILS_ALL(c);
}
END_TEST

START_TEST(load_should_shorten_a_huge_id_in_its_message)
{
    /* A 3000-character unknown id must not push the place out of the
     * fixed-size message: the path comes first and the id is cut. */
    char id[3001];
    memset(id, 'q', sizeof id - 1);
    id[sizeof id - 1] = '\0';
    char json[JSON_CAP];
    snprintf(json, sizeof json,
             HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['%s'],'bytes':4,'flops':1}],'outputs':['y']}", id);
    fails(json, REMAT_EGRAPH, "t.json: ops[0].inputs[0]: unknown tensor id 'qqqq");
    fails(json, REMAT_EGRAPH, "...'");
}
END_TEST

START_TEST(load_should_reject_duplicate_ids)
{
    static const bad_case c[] = {
        {HDR X_IN ",'params':[{'id':'x','bytes':4}],'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,"
                  "'flops':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: params[0]: duplicate id 'x' (already used by input tensor)"},
        {HDR "'inputs':[{'id':'x','bytes':4},{'id':'x','bytes':8}],'ops':[{'id':'y','op':'relu','inputs':['x'],"
             "'bytes':4,'flops':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: inputs[1]: duplicate id 'x' (already used by input tensor)"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1},"
                  "{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[1]: duplicate op id 'y' (first at ops[0])"},
        {HDR X_IN ",'ops':[{'id':'x','op':'relu','inputs':['x'],'bytes':4,'flops':1}],'outputs':['x']}",
         REMAT_EGRAPH, "t.json: ops[0]: duplicate id 'x' (already used by input tensor)"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1},"
                  "{'id':'s','op':'split','inputs':['y'],'flops':1,'outputs':[{'id':'a','bytes':2},"
                  "{'id':'y','bytes':2}]}],'outputs':['a']}",
         REMAT_EGRAPH, "t.json: ops[1].outputs[1]: duplicate id 'y' (already used by activation tensor)"},
        /* A multi-output op's own id may not name somebody else's tensor:
         * 'fwd:x' and tensor 'x' would be different things. */
        {HDR X_IN ",'ops':[{'id':'x','op':'split','inputs':['x'],'flops':1,'outputs':[{'id':'a','bytes':2}]}],"
                  "'outputs':['a']}",
         REMAT_EGRAPH, "t.json: ops[0]: op id 'x' is also the id of another tensor"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1}],'outputs':['y','y']}",
         REMAT_EGRAPH, "t.json: outputs[1]: output 'y' is listed twice"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1,'saves':['x','y','x']}],"
                  "'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].saves[2]: tensor 'x' is listed twice"},
    };
    FAILS_ALL(c);
}
END_TEST

/* Checks that a cycle message "the graph has a cycle: a -> b -> ... -> a"
 * names exactly the ops in `expect` (comma-separated), starts and ends at
 * the same op, and that every arrow is a real producer -> consumer edge of
 * the graph. The edge check goes through the graph's own references, not
 * through the code that built the message. */
static void check_cycle_message(const char *sq, const char *expect_csv)
{
    char buf[JSON_CAP];
    dq(buf, sq);
    remat_graph *g = t_load(buf);
    remat_analysis *a = NULL;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_analyze(g, &a, &err), REMAT_EGRAPH);
    ck_assert_ptr_null(a);
    const char *p = strstr(err.msg, "the graph has a cycle: ");
    ck_assert_msg(p != NULL, "message '%s' does not report a cycle", err.msg);
    p += strlen("the graph has a cycle: ");
    char names[32][32];
    int n = 0;
    while (*p && n < 32) {
        const char *e = strstr(p, " -> ");
        size_t len = e ? (size_t)(e - p) : strlen(p);
        ck_assert_uint_lt(len, sizeof names[0]);
        memcpy(names[n], p, len);
        names[n++][len] = '\0';
        p = e ? e + 4 : p + len;
    }
    ck_assert_msg(n >= 2 && strcmp(names[0], names[n - 1]) == 0, "cycle '%s' does not close", err.msg);
    for (int i = 0; i + 1 < n; i++) {
        const remat_op *from = &g->ops[t_op(g, names[i])], *to = &g->ops[t_op(g, names[i + 1])];
        int edge = 0;
        for (uint32_t j = 0; j < to->n_in; j++)
            edge |= g->tensors[remat_op_inputs(g, to)[j]].producer == t_op(g, names[i]);
        ck_assert_msg(edge, "'%s -> %s' in '%s' is not an edge", from->id, to->id, err.msg);
        /* Each op on the cycle once, and only the expected ones. */
        for (int k = 0; k < i; k++)
            ck_assert_str_ne(names[k], names[i]);
        char key[40];
        snprintf(key, sizeof key, ",%.31s,", names[i]);
        char set[256];
        snprintf(set, sizeof set, ",%.250s,", expect_csv);
        ck_assert_msg(strstr(set, key) != NULL, "'%s' is not on the cycle {%s}", names[i], expect_csv);
    }
    /* Every expected op appears. */
    int expected = 1;
    for (const char *c = expect_csv; *c; c++)
        expected += *c == ',';
    ck_assert_int_eq(n - 1, expected);
    remat_graph_destroy(g);
}

START_TEST(load_should_reject_a_cycle_naming_its_ops)
{
    /* Two ops reading each other; the loss hangs off the cycle and is not
     * named. */
    check_cycle_message(HDR X_IN ",'ops':[{'id':'a','op':'add','inputs':['x','b'],'bytes':4,'flops':1},"
                                 "{'id':'b','op':'relu','inputs':['a'],'bytes':4,'flops':1},"
                                 "{'id':'loss','op':'sum','inputs':['b'],'bytes':4,'flops':1}],'outputs':['loss']}",
                        "a,b");
    fails(HDR X_IN ",'ops':[{'id':'a','op':'add','inputs':['x','b'],'bytes':4,'flops':1},"
                   "{'id':'b','op':'relu','inputs':['a'],'bytes':4,'flops':1}],'outputs':['b']}",
          REMAT_EGRAPH, "the graph has a cycle: ");
    /* Three ops on a cycle behind an acyclic prefix: p -> c1 -> c2 -> c3 -> c1. */
    check_cycle_message(HDR X_IN ",'ops':[{'id':'p','op':'relu','inputs':['x'],'bytes':4,'flops':1},"
                                 "{'id':'c2','op':'relu','inputs':['c1'],'bytes':4,'flops':1},"
                                 "{'id':'c1','op':'add','inputs':['p','c3'],'bytes':4,'flops':1},"
                                 "{'id':'c3','op':'relu','inputs':['c2'],'bytes':4,'flops':1},"
                                 "{'id':'loss','op':'sum','inputs':['c3'],'bytes':4,'flops':1}],'outputs':['loss']}",
                        "c1,c2,c3");
    /* An op reading its own output. */
    check_cycle_message(HDR X_IN ",'ops':[{'id':'a','op':'add','inputs':['x','a'],'bytes':4,'flops':1}],"
                                 "'outputs':['a']}",
                        "a");
    /* Views that alias each other: the loader must not loop resolving
     * their storage, and analysis names the cycle. */
    check_cycle_message(HDR X_IN ",'ops':[{'id':'u','op':'view','inputs':['v'],'alias_of':'v'},"
                                 "{'id':'v','op':'view','inputs':['u'],'alias_of':'u'}],'outputs':['v']}",
                        "u,v");
}
END_TEST

START_TEST(load_should_abbreviate_a_long_cycle)
{
    /* c0 reads c19, ci reads c(i-1): a 20-op cycle. */
    char json[JSON_CAP];
    int n = snprintf(json, sizeof json, HDR X_IN ",'ops':[");
    for (int i = 0; i < 20; i++)
        n += snprintf(json + n, sizeof json - (size_t)n,
                      "%s{'id':'c%d','op':'add','inputs':['x','c%d'],'bytes':4,'flops':1}", i ? "," : "", i,
                      (i + 19) % 20);
    snprintf(json + n, sizeof json - (size_t)n, "],'outputs':['c0']}");
    fails(json, REMAT_EGRAPH, "(20 ops)");
}
END_TEST

/* ---- numbers --------------------------------------------------------- */

START_TEST(load_should_reject_negative_counts)
{
    static const bad_case c[] = {
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':-4,'flops':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].bytes: must not be negative (got -4)"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':-1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].flops: must not be negative"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1,'bwd_flops':-2}],"
                  "'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].bwd_flops: must not be negative"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1,'workspace':-8}],"
                  "'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].workspace: must not be negative"},
        {HDR "'inputs':[{'id':'x','bytes':-1}],'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1}],"
             "'outputs':['y']}",
         REMAT_EGRAPH, "t.json: inputs[0].bytes: must not be negative"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':'-4','flops':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].bytes: string '-4' is not a decimal count"},
    };
    FAILS_ALL(c);
}
END_TEST

START_TEST(load_should_reject_fractional_counts)
{
    static const bad_case c[] = {
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4.5,'flops':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].bytes: must be a whole number (got 4.5)"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':0.25}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].flops: must be a whole number (got 0.25)"},
        {HDR X_IN ",'params':[{'id':'w','bytes':1e-3}],'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,"
                  "'flops':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: params[0].bytes: must be a whole number"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':'4.0','flops':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].bytes: string '4.0' is not a decimal count"},
    };
    FAILS_ALL(c);
}
END_TEST

START_TEST(load_should_reject_numbers_beyond_2_pow_53)
{
    /* 2^53 = 9007199254740992. Its text and that of 2^53+1 parse to the
     * same double, so neither can be trusted: only 2^53-1 and below are
     * exact as JSON numbers. */
    static const bad_case c[] = {
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':9007199254740993,'flops':1}],"
                  "'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].bytes: 9007199254740992 exceeds 2^53-1"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':9007199254740992,'flops':1}],"
                  "'outputs':['y']}",
         REMAT_EGRAPH, "write it as a decimal string"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1e17}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].flops: 1e+17 exceeds 2^53-1"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':1e400,'flops':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].bytes: must be a finite number"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1,'bwd_workspace':1e300}],"
                  "'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].bwd_workspace: 1.0000000000000001e+300 exceeds 2^53-1"},
    };
    FAILS_ALL(c);
    /* 2^53-1 is the largest exact JSON number and loads as itself. */
    remat_graph *g = load(HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':9007199254740991,"
                                   "'flops':9007199254740991}],'outputs':['y']}");
    ck_assert_uint_eq(g->tensors[t_tensor(g, "y")].bytes, 9007199254740991ULL);
    ck_assert_uint_eq(g->ops[0].flops, 9007199254740991ULL);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(load_should_accept_decimal_strings_up_to_2_pow_64_minus_1)
{
    remat_graph *g = load(HDR "'inputs':[{'id':'x','bytes':'18446744073709551615'}],"
                              "'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':'9007199254740993',"
                              "'flops':'12345678901234567890','bwd_flops':'18446744073709551615',"
                              "'workspace':'0','bwd_workspace':'007'}],'outputs':['y']}");
    ck_assert_uint_eq(g->tensors[t_tensor(g, "x")].bytes, UINT64_MAX);
    /* 2^53+1 is not a double; a decimal string keeps it exact. */
    ck_assert_uint_eq(g->tensors[t_tensor(g, "y")].bytes, 9007199254740993ULL);
    ck_assert_uint_eq(g->tensors[t_tensor(g, "y")].logical_bytes, 9007199254740993ULL);
    ck_assert_uint_eq(g->ops[0].flops, 12345678901234567890ULL);
    ck_assert_uint_eq(g->ops[0].bwd_flops, UINT64_MAX);
    ck_assert_uint_eq(g->ops[0].workspace, 0);
    ck_assert_uint_eq(g->ops[0].bwd_workspace, 7);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(load_should_reject_decimal_strings_above_2_pow_64_minus_1)
{
    static const bad_case c[] = {
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':'18446744073709551616','flops':1}],"
                  "'outputs':['y']}",
         REMAT_EOVERFLOW, "t.json: ops[0].bytes: '18446744073709551616' exceeds 2^64-1"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':'99999999999999999999'}],"
                  "'outputs':['y']}",
         REMAT_EOVERFLOW, "t.json: ops[0].flops: '99999999999999999999' exceeds 2^64-1"},
        /* Leading zeros do not make a number larger; 21 digits do. */
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':'000000000000000000000000001',"
                  "'flops':'100000000000000000000'}],'outputs':['y']}",
         REMAT_EOVERFLOW, "t.json: ops[0].flops: '100000000000000000000' exceeds 2^64-1"},
        /* The default bwd_flops is 2 * flops, which must fit too. */
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':'9223372036854775808'}],"
                  "'outputs':['y']}",
         REMAT_EOVERFLOW, "t.json: ops[0]: default bwd_flops = 2 * flops overflows 2^64-1"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':'','flops':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].bytes: empty string is not a count"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':' 12','flops':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].bytes: string ' 12' is not a decimal count"},
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':'+12','flops':1}],'outputs':['y']}",
         REMAT_EGRAPH, "t.json: ops[0].bytes: string '+12' is not a decimal count"},
    };
    FAILS_ALL(c);
    /* Exactly 2 * (2^63 - 1) still fits as the default bwd_flops. */
    remat_graph *g = load(HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,"
                                   "'flops':'9223372036854775807'}],'outputs':['y']}");
    ck_assert_uint_eq(g->ops[0].bwd_flops, 18446744073709551614ULL);
    remat_graph_destroy(g);
}
END_TEST

/* ---- semantic checks ------------------------------------------------- */

START_TEST(load_should_reject_alias_of_not_among_the_inputs)
{
    static const bad_case c[] = {
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1},"
                  "{'id':'z','op':'relu','inputs':['x'],'bytes':4,'flops':1},"
                  "{'id':'v','op':'view','inputs':['z'],'alias_of':'y'}],'outputs':['v']}",
         REMAT_EGRAPH, "t.json: ops[2].alias_of: 'y' is not among the op's inputs"},
        /* In a multi-output op, per output. */
        {HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1},"
                  "{'id':'s','op':'split','inputs':['x'],'flops':1,'outputs':[{'id':'a','bytes':2},"
                  "{'id':'b','alias_of':'y'}]}],'outputs':['a']}",
         REMAT_EGRAPH, "t.json: ops[1].outputs[1].alias_of: 'y' is not among the op's inputs"},
        /* A view of itself is not a view of an input. */
        {HDR X_IN ",'ops':[{'id':'v','op':'view','inputs':['x'],'alias_of':'v'}],'outputs':['v']}", REMAT_EGRAPH,
         "t.json: ops[0].alias_of: 'v' is not among the op's inputs"},
        {HDR X_IN ",'ops':[{'id':'v','op':'view','inputs':['x'],'alias_of':3}],'outputs':['v']}", REMAT_EGRAPH,
         "t.json: ops[0].alias_of: must be a tensor id (string)"},
    };
    FAILS_ALL(c);
}
END_TEST

START_TEST(load_should_reject_a_graph_without_outputs)
{
    fails(HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1}],'outputs':[]}", REMAT_EGRAPH,
          "t.json: outputs: the graph names no outputs (the loss)");
}
END_TEST

START_TEST(load_should_reject_a_graph_without_ops)
{
    fails(HDR X_IN ",'ops':[],'outputs':['x']}", REMAT_EGRAPH, "t.json: ops: the graph has no ops");
}
END_TEST

/* ---- files ----------------------------------------------------------- */

START_TEST(load_should_report_an_unreadable_file)
{
    remat_graph *g = (remat_graph *)&g; /* must be reset to NULL */
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_graph_load_file("/nonexistent-remat-dir/graph.json", &g, &err), REMAT_EIO);
    ck_assert_ptr_null(g);
    ck_assert_msg_contains(&err, "/nonexistent-remat-dir/graph.json: cannot open");
    /* A directory opens but cannot be read. */
    char dir[] = "/tmp/remat-load-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    remat_err_init(&err);
    remat_status st = remat_graph_load_file(dir, &g, &err);
    rmdir(dir);
    ck_assert_int_eq(st, REMAT_EIO);
    ck_assert_msg_contains(&err, "cannot read");
}
END_TEST

START_TEST(load_should_name_the_file_in_messages)
{
    char path[] = "/tmp/remat-load-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char *text = "{\"format\": \"remat-graph\", \"version\": 1,\n \"ops\": [], \"outputs\": []}\n";
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    remat_graph *g;
    remat_err err;
    remat_err_init(&err);
    remat_status st = remat_graph_load_file(path, &g, &err);
    unlink(path);
    ck_assert_int_eq(st, REMAT_EGRAPH);
    char want[64];
    snprintf(want, sizeof want, "%s: ops: the graph has no ops", path);
    ck_assert_msg_contains(&err, want);
}
END_TEST

/* The "errors" case of the load suite (check_load.c). */
void load_errors_tests(TCase *tc)
{
    tcase_add_test(tc, load_should_report_line_and_column_of_a_syntax_error);
    tcase_add_test(tc, load_should_reject_text_after_the_json_value);
    tcase_add_test(tc, load_should_reject_empty_input);
    tcase_add_test(tc, load_should_reject_a_top_level_that_is_not_an_object);
    tcase_add_test(tc, load_should_reject_a_wrong_format_or_version);
    tcase_add_test(tc, load_should_reject_fields_of_the_wrong_type);
    tcase_add_test(tc, load_should_reject_missing_required_fields);
    tcase_add_test(tc, load_should_reject_unknown_fields);
    tcase_add_test(tc, load_should_reject_a_key_given_twice_in_one_object);
    tcase_add_test(tc, load_should_reject_unknown_tensor_ids);
    tcase_add_test(tc, load_should_shorten_a_huge_id_in_its_message);
    tcase_add_test(tc, load_should_reject_duplicate_ids);
    tcase_add_test(tc, load_should_reject_a_cycle_naming_its_ops);
    tcase_add_test(tc, load_should_abbreviate_a_long_cycle);
    tcase_add_test(tc, load_should_reject_negative_counts);
    tcase_add_test(tc, load_should_reject_fractional_counts);
    tcase_add_test(tc, load_should_reject_numbers_beyond_2_pow_53);
    tcase_add_test(tc, load_should_accept_decimal_strings_up_to_2_pow_64_minus_1);
    tcase_add_test(tc, load_should_reject_decimal_strings_above_2_pow_64_minus_1);
    tcase_add_test(tc, load_should_reject_alias_of_not_among_the_inputs);
    tcase_add_test(tc, load_should_reject_a_graph_without_outputs);
    tcase_add_test(tc, load_should_reject_a_graph_without_ops);
    tcase_add_test(tc, load_should_report_an_unreadable_file);
    tcase_add_test(tc, load_should_name_the_file_in_messages);
}

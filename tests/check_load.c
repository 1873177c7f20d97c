/*
 * check_load.c - the graph loader: every bad input the format forbids is
 * refused with the right status and a message that names the place (JSON
 * path, id, or line:column), and every feature it allows loads to the values
 * the format documents (graphs/README.md).
 *
 * Test JSON is written with ' in place of " so that it stays readable in C;
 * the helpers below swap them back before loading. No id or string in these
 * tests contains a real apostrophe.
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, mkstemp */
#include "test_util.h"
#include "load/load_internal.h"
#include "util/util_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define JSON_CAP 8192

/* The header every test graph starts with. */
#define HDR "{'format':'remat-graph','version':1,"
/* A valid one-op graph body to vary one field at a time. */
#define X_IN "'inputs':[{'id':'x','bytes':4}]"

static void dq(char *dst, const char *sq)
{
    size_t n = strlen(sq);
    ck_assert_msg(n < JSON_CAP, "test JSON too long");
    for (size_t i = 0; i <= n; i++)
        dst[i] = sq[i] == '\'' ? '"' : sq[i];
}

static remat_graph *load(const char *sq)
{
    char buf[JSON_CAP];
    dq(buf, sq);
    return t_load(buf);
}

static remat_analysis *analyze(const char *sq, remat_graph **g)
{
    char buf[JSON_CAP];
    dq(buf, sq);
    return t_analyze(buf, g);
}

/* Asserts that loading (and analyzing) fails with code and a message that
 * contains substr. */
static void fails(const char *sq, remat_status code, const char *substr)
{
    char buf[JSON_CAP];
    dq(buf, sq);
    t_load_fails(buf, code, substr);
}

typedef struct {
    const char *json; /* single-quoted */
    remat_status code;
    const char *substr;
} bad_case;

static void fails_all(const bad_case *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fails(c[i].json, c[i].code, c[i].substr);
}

#define FAILS_ALL(cases) fails_all((cases), sizeof(cases) / sizeof((cases)[0]))

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

START_TEST(load_should_load_a_bundled_graph_from_a_file)
{
    char path[256];
    t_fixture("../../graphs/mlp2.json", path, sizeof path);
    remat_graph *g;
    remat_err err;
    remat_err_init(&err);
    ck_assert_msg(remat_graph_load_file(path, &g, &err) == REMAT_OK, "%s", err.msg);
    ck_assert_str_eq(g->name, "mlp2");
    ck_assert_uint_eq(g->n_ops, 5);
    /* x, w1, w2 and one tensor per op. */
    ck_assert_uint_eq(g->n_tensors, 8);
    remat_graph_destroy(g);
}
END_TEST

/* ---- what loads, and to what ----------------------------------------- */

START_TEST(load_should_make_every_output_of_a_multi_output_op_addressable)
{
    remat_graph *g = load(HDR "'inputs':[{'id':'x','bytes':400}],'params':[{'id':'gamma','bytes':40}],"
                              "'ops':[{'id':'bn','op':'batch_norm','inputs':['x','gamma'],'flops':1000,"
                              "'outputs':[{'id':'y','bytes':400,'dtype':'f32','shape':[10,10]},"
                              "{'id':'mean','bytes':40},{'id':'invstd','bytes':40}],"
                              "'saves':['x','gamma','mean','invstd']},"
                              "{'id':'z','op':'add','inputs':['y','mean'],'bytes':400,'flops':100},"
                              "{'id':'loss','op':'sum','inputs':['z','invstd'],'bytes':4,'flops':100,'saves':[]}],"
                              "'outputs':['loss']}");
    uint32_t bn = t_op(g, "bn");
    const remat_op *op = &g->ops[bn];
    ck_assert_uint_eq(op->n_out, 3);
    const char *ids[] = {"y", "mean", "invstd"};
    const uint64_t bytes[] = {400, 40, 40};
    for (uint32_t j = 0; j < 3; j++) {
        uint32_t t = remat_op_outputs(g, op)[j];
        ck_assert_uint_eq(t, t_tensor(g, ids[j]));
        ck_assert_str_eq(g->tensors[t].id, ids[j]);
        ck_assert_uint_eq(g->tensors[t].bytes, bytes[j]);
        ck_assert_uint_eq(g->tensors[t].producer, bn);
        ck_assert_int_eq(g->tensors[t].kind, REMAT_TENSOR_ACTIVATION);
    }
    ck_assert_str_eq(g->tensors[t_tensor(g, "y")].dtype, "f32");
    ck_assert_uint_eq(g->tensors[t_tensor(g, "y")].ndim, 2);
    ck_assert_uint_eq(g->tensors[t_tensor(g, "y")].shape[1], 10);
    ck_assert_ptr_null(g->tensors[t_tensor(g, "mean")].dtype);
    /* The op's own id names no tensor. */
    ck_assert_uint_eq(remat_graph_find_tensor(g, "bn"), REMAT_NONE);
    /* Later ops read the outputs by id. */
    const remat_op *z = &g->ops[t_op(g, "z")];
    ck_assert_uint_eq(remat_op_inputs(g, z)[0], t_tensor(g, "y"));
    ck_assert_uint_eq(remat_op_inputs(g, z)[1], t_tensor(g, "mean"));
    ck_assert_uint_eq(remat_op_inputs(g, &g->ops[t_op(g, "loss")])[1], t_tensor(g, "invstd"));
    /* Explicit saves are kept in order. */
    ck_assert_uint_eq(op->n_save, 4);
    ck_assert_uint_eq(remat_op_saves(g, op)[2], t_tensor(g, "mean"));
    ck_assert_uint_eq(remat_op_saves(g, op)[3], t_tensor(g, "invstd"));
    /* x, gamma, 3 outputs of bn, z, loss. */
    ck_assert_uint_eq(g->n_tensors, 7);
    ck_assert_uint_eq(g->n_outputs, 1);
    ck_assert_uint_eq(g->outputs[0], t_tensor(g, "loss"));
    remat_graph_destroy(g);
    /* A multi-output op may share its id with one of its own outputs. */
    g = load(HDR X_IN ",'ops':[{'id':'lstm','op':'lstm_cell','inputs':['x'],'flops':8,"
                      "'outputs':[{'id':'lstm','bytes':4},{'id':'c','bytes':4}]}],'outputs':['lstm']}");
    ck_assert_uint_eq(g->tensors[t_tensor(g, "lstm")].producer, t_op(g, "lstm"));
    ck_assert_uint_eq(g->tensors[t_tensor(g, "c")].producer, t_op(g, "lstm"));
    remat_graph_destroy(g);
}
END_TEST

START_TEST(load_should_give_views_no_bytes_and_their_root_storage)
{
    remat_graph *g = load(HDR X_IN ",'params':[{'id':'w','bytes':64}],"
                              "'ops':[{'id':'h','op':'matmul','inputs':['x','w'],'bytes':256,'flops':10},"
                              "{'id':'v','op':'view','inputs':['h'],'alias_of':'h'},"
                              "{'id':'u','op':'reshape','inputs':['v'],'alias_of':'v','bytes':256,'flops':0},"
                              "{'id':'t','op':'transpose','inputs':['w'],'alias_of':'w'},"
                              "{'id':'s','op':'chunk','inputs':['u'],'flops':0,'outputs':["
                              "{'id':'s0','alias_of':'u','bytes':128},{'id':'s1','alias_of':'u','bytes':128}]},"
                              "{'id':'loss','op':'dot','inputs':['s0','s1','t'],'bytes':4,'flops':10}],"
                              "'outputs':['loss']}");
    uint32_t h = t_tensor(g, "h"), v = t_tensor(g, "v"), u = t_tensor(g, "u"), w = t_tensor(g, "w");
    ck_assert_uint_eq(g->tensors[h].bytes, 256);
    ck_assert_uint_eq(g->tensors[h].storage, h);
    ck_assert_uint_eq(g->tensors[h].alias_of, REMAT_NONE);
    /* A view owns nothing; its logical size defaults to its base's. */
    ck_assert_uint_eq(g->tensors[v].bytes, 0);
    ck_assert_uint_eq(g->tensors[v].logical_bytes, 256);
    ck_assert_uint_eq(g->tensors[v].alias_of, h);
    ck_assert_uint_eq(g->tensors[v].storage, h);
    /* A view of a view: alias_of is the direct base, storage the root. */
    ck_assert_uint_eq(g->tensors[u].bytes, 0);
    ck_assert_uint_eq(g->tensors[u].alias_of, v);
    ck_assert_uint_eq(g->tensors[u].storage, h);
    /* Views in a multi-output op: explicit bytes are the logical size. */
    for (int i = 0; i < 2; i++) {
        const remat_tensor *s = &g->tensors[t_tensor(g, i ? "s1" : "s0")];
        ck_assert_uint_eq(s->bytes, 0);
        ck_assert_uint_eq(s->logical_bytes, 128);
        ck_assert_uint_eq(s->alias_of, u);
        ck_assert_uint_eq(s->storage, h);
    }
    /* A view of a param is stored in the param. */
    ck_assert_uint_eq(g->tensors[t_tensor(g, "t")].storage, w);
    ck_assert_uint_eq(g->tensors[t_tensor(g, "t")].bytes, 0);
    /* Views may omit flops (they cost nothing). */
    ck_assert_uint_eq(g->ops[t_op(g, "v")].flops, 0);
    ck_assert_uint_eq(g->ops[t_op(g, "v")].bwd_flops, 0);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(load_should_default_saves_to_the_distinct_inputs)
{
    remat_graph *g = load(HDR X_IN ",'params':[{'id':'w','bytes':4}],"
                              "'ops':[{'id':'y','op':'mul3','inputs':['x','w','x'],'bytes':4,'flops':1},"
                              "{'id':'z','op':'add','inputs':['y','y'],'bytes':4,'flops':1,'saves':[]},"
                              "{'id':'r','op':'relu','inputs':['z'],'bytes':4,'flops':1,'saves':['r']}],"
                              "'outputs':['r']}");
    const remat_op *y = &g->ops[t_op(g, "y")];
    ck_assert_uint_eq(y->n_in, 3);
    ck_assert_uint_eq(y->n_save, 2);
    ck_assert_uint_eq(remat_op_saves(g, y)[0], t_tensor(g, "x"));
    ck_assert_uint_eq(remat_op_saves(g, y)[1], t_tensor(g, "w"));
    ck_assert_uint_eq(g->ops[t_op(g, "z")].n_save, 0);
    const remat_op *r = &g->ops[t_op(g, "r")];
    ck_assert_uint_eq(r->n_save, 1);
    ck_assert_uint_eq(remat_op_saves(g, r)[0], t_tensor(g, "r"));
    remat_graph_destroy(g);
}
END_TEST

START_TEST(load_should_apply_documented_defaults)
{
    remat_graph *g = load(HDR "'inputs':[{'id':'x','bytes':4},{'id':'q','bytes':4,'requires_grad':true}],"
                              "'params':[{'id':'w','bytes':8},{'id':'f','bytes':8,'frozen':true}],"
                              "'ops':[{'id':'y','op':'matmul','inputs':['x','w','q','f'],'bytes':4,'flops':21},"
                              "{'id':'z','op':'dropout','inputs':['y'],'bytes':4,'flops':3,'bwd_flops':5,"
                              "'workspace':16,'bwd_workspace':32,'recomputable':false,'grad_views':true}],"
                              "'outputs':['z']}");
    ck_assert_str_eq(g->name, "unnamed");
    ck_assert_ptr_null(g->meta_json);
    const remat_op *y = &g->ops[t_op(g, "y")], *z = &g->ops[t_op(g, "z")];
    ck_assert_str_eq(y->type, "matmul");
    ck_assert_uint_eq(y->bwd_flops, 42);
    ck_assert_uint_eq(y->workspace, 0);
    ck_assert_uint_eq(y->bwd_workspace, 0);
    ck_assert(y->recomputable);
    ck_assert(!y->grad_views);
    ck_assert(z->grad_views);
    ck_assert_uint_eq(z->bwd_flops, 5);
    ck_assert_uint_eq(z->workspace, 16);
    ck_assert_uint_eq(z->bwd_workspace, 32);
    ck_assert(!z->recomputable);
    ck_assert(!g->tensors[t_tensor(g, "x")].requires_grad);
    ck_assert(g->tensors[t_tensor(g, "q")].requires_grad);
    ck_assert(!g->tensors[t_tensor(g, "w")].frozen);
    ck_assert(g->tensors[t_tensor(g, "f")].frozen);
    /* Tensors are numbered inputs, params, then activations in op order. */
    const char *order[] = {"x", "q", "w", "f", "y", "z"};
    const remat_tensor_kind kinds[] = {REMAT_TENSOR_INPUT, REMAT_TENSOR_INPUT, REMAT_TENSOR_PARAM,
                                       REMAT_TENSOR_PARAM, REMAT_TENSOR_ACTIVATION, REMAT_TENSOR_ACTIVATION};
    ck_assert_uint_eq(g->n_tensors, 6);
    for (uint32_t i = 0; i < 6; i++) {
        ck_assert_str_eq(g->tensors[i].id, order[i]);
        ck_assert_int_eq(g->tensors[i].kind, kinds[i]);
        ck_assert_uint_eq(g->tensors[i].producer, i < 4 ? REMAT_NONE : i - 4);
    }
    remat_graph_destroy(g);
}
END_TEST

START_TEST(load_should_accept_free_form_attrs_and_meta)
{
    remat_graph *g = load(HDR "'name':'tiny','meta':{'exporter':'torch.fx','nested':{'a':[1,2]}},"
                              X_IN ",'ops':[{'id':'y','op':'conv','inputs':['x'],'bytes':4,'flops':1,"
                              "'attrs':{'kernel':[3,3],'anything':{'goes':true}}}],'outputs':['y']}");
    ck_assert_str_eq(g->name, "tiny");
    ck_assert_ptr_nonnull(g->meta_json);
    ck_assert_msg(strstr(g->meta_json, "\"exporter\":\"torch.fx\"") != NULL, "meta_json %s", g->meta_json);
    ck_assert_msg(strstr(g->meta_json, "\"nested\":{\"a\":[1,2]}") != NULL, "meta_json %s", g->meta_json);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(load_should_accept_a_file_order_that_is_not_topological)
{
    /* File order: loss, b, a; data flows x -> a -> b -> loss. */
    remat_graph *g;
    remat_analysis *a = analyze(HDR X_IN ",'params':[{'id':'w','bytes':4}],"
                                     "'ops':[{'id':'loss','op':'sum','inputs':['b'],'bytes':4,'flops':1},"
                                     "{'id':'b','op':'relu','inputs':['a'],'bytes':4,'flops':1},"
                                     "{'id':'a','op':'mul','inputs':['x','w'],'bytes':4,'flops':1}],"
                                     "'outputs':['loss']}",
                                &g);
    /* The only topological order here is a, b, loss. */
    ck_assert_uint_eq(a->order[0], t_op(g, "a"));
    ck_assert_uint_eq(a->order[1], t_op(g, "b"));
    ck_assert_uint_eq(a->order[2], t_op(g, "loss"));
    for (uint32_t i = 0; i < 3; i++)
        ck_assert_uint_eq(a->pos[a->order[i]], i);
    ck_assert_uint_eq(a->life[t_tensor(g, "a")].birth, 0);
    ck_assert_uint_eq(a->life[t_tensor(g, "a")].last_fwd_use, 1);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(load_should_not_need_a_nul_terminator)
{
    /* The text is followed by garbage that is not part of it. */
    char buf[JSON_CAP];
    dq(buf, HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1}],'outputs':['y']}"
                     "@@@@ not json");
    size_t len = strlen(buf) - strlen("@@@@ not json");
    remat_graph *g;
    remat_err err;
    remat_err_init(&err);
    ck_assert_msg(remat_graph_load_json(buf, len, "t.json", &g, &err) == REMAT_OK, "%s", err.msg);
    ck_assert_uint_eq(g->n_ops, 1);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(load_should_work_without_an_error_record)
{
    remat_graph *g = (remat_graph *)&g;
    ck_assert_int_eq(remat_graph_load_json("[]", 2, NULL, &g, NULL), REMAT_EGRAPH);
    ck_assert_ptr_null(g);
    ck_assert_int_eq(remat_graph_load_json("{", 1, NULL, &g, NULL), REMAT_EPARSE);
    /* Without a source name, messages say <graph>. */
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_graph_load_json("[]", 2, NULL, &g, &err), REMAT_EGRAPH);
    ck_assert_msg_contains(&err, "<graph>: top level must be an object");
}
END_TEST

START_TEST(load_should_fingerprint_content_not_formatting)
{
    const char *a = HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1}],'outputs':['y']}";
    const char *b = "{ 'outputs': ['y'], 'version': 1, 'format': 'remat-graph',\n"
                    "  'inputs': [ {'bytes': 4, 'id': 'x'} ],\n"
                    "  'ops': [ {'flops': 1, 'bytes': 4, 'inputs': ['x'], 'op': 'relu', 'id': 'y'} ] }";
    const char *c = HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':8,'flops':1}],'outputs':['y']}";
    const char *d = HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1,'saves':[]}],"
                             "'outputs':['y']}";
    remat_graph *ga = load(a), *gb = load(b), *gc = load(c), *gd = load(d);
    ck_assert_uint_eq(ga->fingerprint, gb->fingerprint);
    ck_assert_uint_ne(ga->fingerprint, gc->fingerprint);
    ck_assert_uint_ne(ga->fingerprint, gd->fingerprint);
    remat_graph_destroy(ga);
    remat_graph_destroy(gb);
    remat_graph_destroy(gc);
    remat_graph_destroy(gd);
}
END_TEST

START_TEST(load_should_return_none_for_unknown_ids)
{
    remat_graph *g = load(HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1}],"
                                   "'outputs':['y']}");
    ck_assert_uint_eq(remat_graph_find_tensor(g, "nope"), REMAT_NONE);
    ck_assert_uint_eq(remat_graph_find_op(g, "x"), REMAT_NONE); /* x is a tensor, not an op */
    ck_assert_uint_eq(remat_graph_find_op(g, "y"), 0);
    ck_assert_uint_eq(remat_graph_find_tensor(g, "y"), 1);
    remat_graph_destroy(g);
}
END_TEST

/* ---- robustness ------------------------------------------------------ */

static const char *ROBUST =
    HDR "'name':'r','inputs':[{'id':'x','bytes':'4096','requires_grad':true}],"
        "'params':[{'id':'w','bytes':64,'frozen':false,'dtype':'bf16','shape':[4,8]}],"
        "'ops':[{'id':'h','op':'matmul','inputs':['x','w'],'bytes':4096,'flops':131072,'attrs':{'k':1}},"
        "{'id':'bn','op':'bn','inputs':['h'],'flops':9,'outputs':[{'id':'y','bytes':4096},{'id':'m','bytes':8}],"
        "'saves':['h','m']},"
        "{'id':'v','op':'view','inputs':['y'],'alias_of':'y'},"
        "{'id':'loss','op':'sum','inputs':['v'],'bytes':4,'flops':1024,'saves':[]}],"
        "'outputs':['loss'],'meta':{'m':null}}";

START_TEST(load_should_refuse_every_truncation_of_a_valid_graph)
{
    char buf[JSON_CAP];
    dq(buf, ROBUST);
    size_t n = strlen(buf);
    for (size_t len = 0; len < n; len++) {
        remat_graph *g = (remat_graph *)buf;
        remat_err err;
        remat_err_init(&err);
        /* Every proper prefix of an object lacks its closing brace. */
        remat_status st = remat_graph_load_json(buf, len, "t.json", &g, &err);
        ck_assert_msg(st == REMAT_EPARSE, "prefix of %zu bytes: %s (%s)", len, remat_status_str(st), err.msg);
        ck_assert_ptr_null(g);
        ck_assert_msg(strncmp(err.msg, "t.json:", 7) == 0, "message '%s'", err.msg);
    }
    remat_graph *g = t_load(buf);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(load_should_survive_every_single_byte_corruption)
{
    /* Replacing any one byte gives valid JSON or not, a valid graph or not;
     * whatever it gives must be a clean status, never a crash or a leak
     * (the sanitizer and valgrind runs check the latter). */
    static const char subst[] = {'"', '0', '-', '}', ']', '{', ',', ' ', 'a', '\0'};
    char buf[JSON_CAP];
    dq(buf, ROBUST);
    size_t n = strlen(buf);
    for (size_t i = 0; i < n; i++) {
        for (size_t s = 0; s < sizeof subst; s++) {
            char saved = buf[i];
            buf[i] = subst[s];
            remat_graph *g = NULL;
            remat_err err;
            remat_err_init(&err);
            remat_status st = remat_graph_load_json(buf, n, "t.json", &g, &err);
            if (st == REMAT_OK) {
                remat_analysis *a = NULL;
                st = remat_analyze(g, &a, &err);
                remat_analysis_destroy(a);
                remat_graph_destroy(g);
                ck_assert_msg(st == REMAT_OK || st == REMAT_EGRAPH, "byte %zu: %s", i, err.msg);
            } else {
                ck_assert_ptr_null(g);
                ck_assert_msg(st == REMAT_EPARSE || st == REMAT_EGRAPH || st == REMAT_EOVERFLOW,
                              "byte %zu = '%c': %s (%s)", i, subst[s], remat_status_str(st), err.msg);
                ck_assert_msg(strncmp(err.msg, "t.json", 6) == 0, "message '%s' does not name the source", err.msg);
            }
            buf[i] = saved;
        }
    }
}
END_TEST

START_TEST(load_should_report_out_of_memory_at_every_allocation)
{
    /* Make allocation 1, 2, ... fail in turn until the load needs no more
     * than were made: every failure must be ENOMEM with no leak, including
     * those inside cJSON's parser. */
    char buf[JSON_CAP];
    dq(buf, ROBUST);
    size_t n = strlen(buf);
    uint64_t k;
    for (k = 1; k < 100000; k++) {
        remat__alloc_fail_at(k);
        remat_graph *g = NULL;
        remat_err err;
        remat_err_init(&err);
        remat_status st = remat_graph_load_json(buf, n, "t.json", &g, &err);
        uint64_t made = remat__alloc_fail_at(0);
        if (st == REMAT_OK) {
            ck_assert_uint_lt(made, k);
            remat_graph_destroy(g);
            break;
        }
        ck_assert_msg(st == REMAT_ENOMEM, "allocation %llu: %s (%s)", (unsigned long long)k, remat_status_str(st),
                      err.msg);
        ck_assert_ptr_null(g);
        ck_assert_msg_contains(&err, "out of memory");
    }
    /* The load did allocate, so injection was exercised: at least the graph,
     * its store, the id maps and a cJSON arena chunk (cJSON's nodes share
     * chunks since the arena, so the count no longer grows with the input). */
    ck_assert_uint_gt(k, 5);
}
END_TEST

START_TEST(load_should_report_out_of_memory_in_either_driver)
{
    /* The tree driver alone, and the path through both (the stream driver
     * gives up on a bad field at the end, then the tree driver finds it):
     * every allocation failure is out of memory, the rest the same error. */
    char good[JSON_CAP], bad[JSON_CAP];
    dq(good, ROBUST);
    dq(bad, HDR X_IN ",'ops':[{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1}],'outputs':['y'],'extra':1}");
    for (int which = 0; which < 2; which++) {
        const char *text = which ? bad : good;
        remat_load_mode mode = which ? REMAT_LOAD_AUTO : REMAT_LOAD_TREE;
        remat_status want = which ? REMAT_EGRAPH : REMAT_OK;
        uint64_t k;
        for (k = 1; k < 100000; k++) {
            remat__alloc_fail_at(k);
            remat_graph *g = NULL;
            remat_err err;
            remat_err_init(&err);
            remat_status st = remat__graph_load_json_mode(text, strlen(text), "t.json", &g, &err, mode);
            uint64_t made = remat__alloc_fail_at(0);
            remat_graph_destroy(g);
            if (made < k) { /* no allocation failed: the normal answer */
                ck_assert_int_eq(st, want);
                break;
            }
            ck_assert_msg(st == REMAT_ENOMEM || st == want, "%d: allocation %llu: %s (%s)", which,
                          (unsigned long long)k, remat_status_str(st), err.msg);
            if (st == REMAT_ENOMEM)
                ck_assert_msg_contains(&err, "out of memory");
        }
        ck_assert_uint_gt(k, 5);
    }
}
END_TEST

START_TEST(load_should_refuse_absurd_nesting_without_crashing)
{
    /* 100000 nested arrays inside attrs: cJSON stops at its nesting limit
     * instead of recursing off the stack, and that is a parse error. */
    enum { DEPTH = 100000 };
    const char *pre = "{\"format\":\"remat-graph\",\"version\":1,\"ops\":[{\"id\":\"y\",\"op\":\"f\","
                      "\"inputs\":[],\"bytes\":4,\"flops\":1,\"attrs\":{\"a\":";
    const char *post = "}}],\"outputs\":[\"y\"]}";
    size_t np = strlen(pre), nq = strlen(post);
    char *text = malloc(np + 2 * DEPTH + nq + 1);
    ck_assert_ptr_nonnull(text);
    memcpy(text, pre, np);
    memset(text + np, '[', DEPTH);
    memset(text + np + DEPTH, ']', DEPTH);
    memcpy(text + np + 2 * DEPTH, post, nq + 1);
    remat_graph *g;
    remat_err err;
    remat_err_init(&err);
    remat_status st = remat_graph_load_json(text, strlen(text), "t.json", &g, &err);
    free(text);
    ck_assert_int_eq(st, REMAT_EPARSE);
    ck_assert_msg_contains(&err, "t.json:1:");
}
END_TEST

/* ---- the two drivers ------------------------------------------------- */

/* Loads sq with the tree driver and with the stream driver (which must not
 * give up unless may_give_up) and asserts both give the same graph. */
static remat_graph *load_both(const char *json, size_t len, int may_give_up)
{
    remat_graph *a = NULL, *b = NULL;
    remat_err err;
    remat_err_init(&err);
    remat_status st = remat__graph_load_json_mode(json, len, "t.json", &a, &err, REMAT_LOAD_TREE);
    ck_assert_msg(st == REMAT_OK, "tree driver: %s", err.msg);
    remat_err_init(&err);
    st = remat__graph_load_json_mode(json, len, "t.json", &b, &err, REMAT_LOAD_STREAM);
    if (st == REMAT_EUNSUPPORTED && may_give_up) {
        ck_assert_ptr_null(b);
        return a;
    }
    ck_assert_msg(st == REMAT_OK, "stream driver: %s", err.msg);
    char why[256];
    ck_assert_msg(remat__graph_same(a, b, why, sizeof why), "the drivers disagree: %s", why);
    remat_graph_destroy(b);
    return a;
}

static remat_graph *load2(const char *sq)
{
    char buf[JSON_CAP];
    dq(buf, sq);
    return load_both(buf, strlen(buf), 0);
}

START_TEST(load_should_read_every_bundled_graph_alike_with_both_drivers)
{
    /* The stream driver must take every bundled graph (none has an unusual
     * field order) and read it exactly as the tree driver does. */
    static const char *const names[] = {"mlp2", "mlp423", "chain16", "hetchain12", "resnet8", "transformer4",
                                        "unet3", "bnview"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char rel[64], path[256];
        snprintf(rel, sizeof rel, "../../graphs/%s.json", names[i]);
        t_fixture(rel, path, sizeof path);
        char *text;
        size_t len;
        remat_err err;
        remat_err_init(&err);
        ck_assert_msg(remat__read_file(path, &text, &len, &err) == REMAT_OK, "%s", err.msg);
        remat_graph_destroy(load_both(text, len, 0));
        remat__free(text);
    }
    char buf[JSON_CAP];
    dq(buf, ROBUST);
    remat_graph_destroy(load_both(buf, strlen(buf), 0));
}
END_TEST

START_TEST(load_should_resolve_forward_references_while_streaming)
{
    /* Every kind of reference to a tensor defined later: an input, a save,
     * a view's base, a multi-output op's view, and the outputs. */
    remat_graph *g = load2(HDR X_IN ",'ops':["
                               "{'id':'c','op':'add','inputs':['b','a'],'bytes':4,'flops':1,'saves':['m']},"
                               "{'id':'v','op':'view','inputs':['b'],'alias_of':'b'},"
                               "{'id':'sp','op':'split','inputs':['a'],'flops':0,'outputs':[{'id':'s0','alias_of':'a'},"
                               "{'id':'s1','alias_of':'a','bytes':2}]},"
                               "{'id':'b','op':'mul','inputs':['a','a'],'bytes':4,'flops':1},"
                               "{'id':'bn','op':'bn','inputs':['x'],'flops':1,'outputs':[{'id':'a','bytes':4},"
                               "{'id':'m','bytes':1}]},"
                               "{'id':'loss','op':'sum','inputs':['c','v','s0','s1'],'bytes':4,'flops':1}],"
                               "'outputs':['loss']}");
    const remat_op *c = &g->ops[t_op(g, "c")];
    ck_assert_uint_eq(remat_op_inputs(g, c)[0], t_tensor(g, "b"));
    ck_assert_uint_eq(remat_op_saves(g, c)[0], t_tensor(g, "m"));
    /* mul(a, a) saves a once, though 'a' was unknown when it was read. */
    const remat_op *b = &g->ops[t_op(g, "b")];
    ck_assert_uint_eq(b->n_save, 1);
    ck_assert_uint_eq(remat_op_saves(g, b)[0], t_tensor(g, "a"));
    ck_assert_uint_eq(g->tensors[t_tensor(g, "v")].alias_of, t_tensor(g, "b"));
    ck_assert_uint_eq(g->tensors[t_tensor(g, "s0")].storage, t_tensor(g, "a"));
    remat_graph_destroy(g);
}
END_TEST

START_TEST(load_should_refuse_a_forward_reference_error_with_the_canonical_message)
{
    /* Each error is only visible once every id is known: the stream driver
     * gives up and the message is the tree driver's. */
    static const bad_case c[] = {
        {HDR X_IN ",'ops':[{'id':'v','op':'view','inputs':['x'],'alias_of':'y'},"
                  "{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1}],'outputs':['v']}",
         REMAT_EGRAPH, "t.json: ops[0].alias_of: 'y' is not among the op's inputs"},
        {HDR X_IN ",'ops':[{'id':'z','op':'f','inputs':['x'],'bytes':4,'flops':1,'saves':['y','x','y']},"
                  "{'id':'y','op':'relu','inputs':['x'],'bytes':4,'flops':1}],'outputs':['z']}",
         REMAT_EGRAPH, "t.json: ops[0].saves[2]: tensor 'y' is listed twice"},
        {HDR X_IN ",'ops':[{'id':'m','op':'f','inputs':['x'],'flops':1,'outputs':[{'id':'m1','bytes':4}]},"
                  "{'id':'q','op':'f','inputs':['x'],'flops':1,'outputs':[{'id':'m','bytes':4}]}],'outputs':['m1']}",
         REMAT_EGRAPH, "t.json: ops[0]: op id 'm' is also the id of another tensor"},
        {HDR X_IN ",'ops':[{'id':'z','op':'f','inputs':['ghost'],'bytes':4,'flops':1}],'outputs':['z']}",
         REMAT_EGRAPH, "t.json: ops[0].inputs[0]: unknown tensor id 'ghost'"},
    };
    FAILS_ALL(c);
}
END_TEST

START_TEST(load_should_accept_fields_in_any_order)
{
    /* "ops" before "params" before "inputs" (the stream driver numbers
     * tensors inputs first, so it leaves such files to the tree driver);
     * the result is the usual numbering. */
    remat_graph *g = load(HDR "'outputs':['y'],'ops':[{'id':'y','op':'f','inputs':['x','w'],'bytes':4,'flops':1}],"
                              "'params':[{'id':'w','bytes':8}],'inputs':[{'id':'x','bytes':4}]}");
    ck_assert_uint_eq(t_tensor(g, "x"), 0);
    ck_assert_uint_eq(t_tensor(g, "w"), 1);
    ck_assert_uint_eq(t_tensor(g, "y"), 2);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(load_should_refuse_nesting_that_only_the_whole_document_exceeds)
{
    /* cJSON refuses a container at depth 1000 (the top object is depth 0).
     * The stream driver parses an op on its own, two levels down: n arrays
     * inside an op's attrs put the innermost at depth 3 + n in the document
     * but only 1 + n in the element, so n = 997 and 998 are refused by the
     * document, not by the element. Both drivers must say the same. */
    int ok = 0, refused = 0;
    for (int n = 994; n <= 999; n++) {
        const char *pre = "{\"format\":\"remat-graph\",\"version\":1,\"ops\":[{\"id\":\"y\",\"op\":\"f\","
                          "\"inputs\":[],\"bytes\":4,\"flops\":1,\"attrs\":{\"a\":";
        const char *post = "}}],\"outputs\":[\"y\"]}";
        size_t np = strlen(pre), nq = strlen(post);
        char *text = malloc(np + 2 * (size_t)n + nq + 1);
        ck_assert_ptr_nonnull(text);
        memcpy(text, pre, np);
        memset(text + np, '[', (size_t)n);
        memset(text + np + n, ']', (size_t)n);
        memcpy(text + np + 2 * (size_t)n, post, nq + 1);
        remat_graph *g = NULL, *t = NULL;
        remat_err err, terr;
        remat_err_init(&err);
        remat_err_init(&terr);
        remat_status st = remat_graph_load_json(text, strlen(text), "t.json", &g, &err);
        remat_status tst = remat__graph_load_json_mode(text, strlen(text), "t.json", &t, &terr, REMAT_LOAD_TREE);
        ck_assert_msg(st == tst, "n=%d: %s vs %s (%s / %s)", n, remat_status_str(st), remat_status_str(tst), err.msg,
                      terr.msg);
        ck_assert_str_eq(err.msg, terr.msg);
        ck_assert_int_eq(st, 3 + n >= 1000 ? REMAT_EPARSE : REMAT_OK);
        if (n == 997 || n == 998) { /* the element alone would parse: the stream driver must give up */
            remat_graph *sg = NULL;
            remat_err serr;
            remat_err_init(&serr);
            ck_assert_int_eq(remat__graph_load_json_mode(text, strlen(text), "t.json", &sg, &serr, REMAT_LOAD_STREAM),
                             REMAT_EUNSUPPORTED);
            ck_assert_ptr_null(sg);
        }
        free(text);
        ok += st == REMAT_OK;
        refused += st == REMAT_EPARSE;
        remat_graph_destroy(g);
        remat_graph_destroy(t);
    }
    ck_assert_int_eq(ok, 3);
    ck_assert_int_eq(refused, 3);
}
END_TEST

/* ---- views and saves ------------------------------------------------- */

START_TEST(load_should_size_a_view_from_a_base_defined_later)
{
    /* u views v views h, listed in the reverse of data-flow order: the
     * sizes must not depend on which op the file lists first. s gives its
     * own logical size, and t, a view of s, inherits that. */
    remat_graph *g = load2(HDR X_IN ",'ops':["
                               "{'id':'t','op':'view','inputs':['s'],'alias_of':'s'},"
                               "{'id':'u','op':'view','inputs':['v'],'alias_of':'v'},"
                               "{'id':'s','op':'narrow','inputs':['v'],'alias_of':'v','bytes':100},"
                               "{'id':'v','op':'view','inputs':['h'],'alias_of':'h'},"
                               "{'id':'h','op':'relu','inputs':['x'],'bytes':256,'flops':1},"
                               "{'id':'loss','op':'sum','inputs':['u','t'],'bytes':4,'flops':1}],"
                               "'outputs':['loss']}");
    const uint32_t h = t_tensor(g, "h");
    const char *const ids[] = {"v", "u", "s", "t"};
    const uint64_t logical[] = {256, 256, 100, 100};
    for (int i = 0; i < 4; i++) {
        const remat_tensor *t = &g->tensors[t_tensor(g, ids[i])];
        ck_assert_msg(t->logical_bytes == logical[i], "%s: logical %llu", ids[i], (unsigned long long)t->logical_bytes);
        ck_assert_uint_eq(t->bytes, 0);
        ck_assert_uint_eq(t->storage, h);
    }
    remat_graph_destroy(g);
}
END_TEST

START_TEST(load_should_settle_a_long_view_chain_without_recursion)
{
    /* 20000 views of views, listed last to first: linear work, no deep
     * recursion, every one sized and stored in the root. */
    enum { N = 20000 };
    size_t cap = (size_t)N * 96 + 512, at = 0;
    char *text = malloc(cap);
    ck_assert_ptr_nonnull(text);
    at += (size_t)snprintf(text + at, cap - at,
                           "{\"format\":\"remat-graph\",\"version\":1,\"inputs\":[{\"id\":\"x\",\"bytes\":4}],\"ops\":[");
    for (int i = N; i >= 1; i--)
        at += (size_t)snprintf(text + at, cap - at, "{\"id\":\"v%d\",\"op\":\"view\",\"inputs\":[\"v%d\"],\"alias_of\":\"v%d\"},",
                               i, i - 1, i - 1);
    at += (size_t)snprintf(text + at, cap - at,
                           "{\"id\":\"v0\",\"op\":\"relu\",\"inputs\":[\"x\"],\"bytes\":64,\"flops\":1}],\"outputs\":[\"v%d\"]}",
                           N);
    remat_graph *g = load_both(text, at, 0);
    free(text);
    const uint32_t root = t_tensor(g, "v0");
    for (uint32_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].kind == REMAT_TENSOR_ACTIVATION) {
            ck_assert_uint_eq(g->tensors[i].storage, root);
            ck_assert_uint_eq(g->tensors[i].logical_bytes, 64);
        }
    remat_graph_destroy(g);
}
END_TEST

START_TEST(load_should_default_a_view_ops_saves_to_nothing)
{
    /* A view's backward only routes the gradient to its base: without
     * "saves" it saves nothing. Given, "saves" is kept. An op whose every
     * output is a view (a split) is a view op too; one with a real output
     * is not. */
    remat_graph *g = load2(HDR X_IN ",'ops':[{'id':'h','op':'relu','inputs':['x'],'bytes':8,'flops':1},"
                               "{'id':'v','op':'view','inputs':['h'],'alias_of':'h'},"
                               "{'id':'w','op':'view','inputs':['h'],'alias_of':'h','saves':['h']},"
                               "{'id':'sp','op':'split','inputs':['h'],'flops':0,'outputs':[{'id':'s0','alias_of':'h'},"
                               "{'id':'s1','alias_of':'h'}]},"
                               "{'id':'mx','op':'max','inputs':['h'],'flops':1,'outputs':[{'id':'m0','alias_of':'h'},"
                               "{'id':'idx','bytes':8}]},"
                               "{'id':'loss','op':'sum','inputs':['v','w','s0','s1','m0','idx'],'bytes':4,'flops':1}],"
                               "'outputs':['loss']}");
    ck_assert_uint_eq(g->ops[t_op(g, "v")].n_save, 0);
    ck_assert_uint_eq(g->ops[t_op(g, "w")].n_save, 1);
    ck_assert_uint_eq(g->ops[t_op(g, "sp")].n_save, 0);
    const remat_op *mx = &g->ops[t_op(g, "mx")];
    ck_assert_uint_eq(mx->n_save, 1);
    ck_assert_uint_eq(remat_op_saves(g, mx)[0], t_tensor(g, "h"));
    remat_graph_destroy(g);
    /* The bundled mlp2's view v1 gives no saves: its backward reads nothing. */
    char path[256];
    t_fixture("../../graphs/mlp2.json", path, sizeof path);
    remat_err err;
    remat_err_init(&err);
    ck_assert_msg(remat_graph_load_file(path, &g, &err) == REMAT_OK, "%s", err.msg);
    ck_assert_uint_eq(g->ops[t_op(g, "v1")].n_save, 0);
    remat_graph_destroy(g);
}
END_TEST

/* ---- long lists ------------------------------------------------------ */

/* A graph whose op 'y' reads in0..in{n-1} (in{i} = in{i % distinct}); saves
 * and outputs as given (raw JSON). */
static char *many_inputs(int n, int distinct, const char *saves, const char *outputs, size_t *len)
{
    size_t cap = (size_t)n * 24 + 1024 + strlen(saves) + strlen(outputs), at = 0;
    char *t = malloc(cap);
    ck_assert_ptr_nonnull(t);
    at += (size_t)snprintf(t + at, cap - at, "{\"format\":\"remat-graph\",\"version\":1,\"inputs\":[");
    for (int i = 0; i < distinct; i++)
        at += (size_t)snprintf(t + at, cap - at, "%s{\"id\":\"in%d\",\"bytes\":4}", i ? "," : "", i);
    at += (size_t)snprintf(t + at, cap - at, "],\"ops\":[{\"id\":\"y\",\"op\":\"cat\",\"bytes\":4,\"flops\":1,\"inputs\":[");
    for (int i = 0; i < n; i++)
        at += (size_t)snprintf(t + at, cap - at, "%s\"in%d\"", i ? "," : "", i % distinct);
    at += (size_t)snprintf(t + at, cap - at, "]%s}],\"outputs\":%s}", saves, outputs);
    *len = at;
    return t;
}

START_TEST(load_should_check_long_lists_in_n_log_n)
{
    /* 100000 inputs over 1000 distinct tensors: the default saves are the
     * 1000, in order of first appearance. */
    size_t len;
    char *t = many_inputs(100000, 1000, "", "[\"y\"]", &len);
    remat_graph *g = load_both(t, len, 0);
    free(t);
    const remat_op *y = &g->ops[t_op(g, "y")];
    ck_assert_uint_eq(y->n_save, 1000);
    for (uint32_t i = 0; i < 1000; i++)
        ck_assert_uint_eq(remat_op_saves(g, y)[i], i);
    remat_graph_destroy(g);
    /* A repeated save or output is named at its first repetition. */
    char saves[2048] = ",\"saves\":[", outs[2048] = "[";
    for (int i = 0; i < 100; i++) {
        char one[32];
        snprintf(one, sizeof one, "%s\"in%d\"", i ? "," : "", i == 90 ? 40 : i == 95 ? 7 : i);
        strcat(saves, one);
        strcat(outs, one);
    }
    strcat(saves, "]");
    strcat(outs, "]");
    t = many_inputs(100, 100, saves, "[\"y\"]", &len);
    t_load_fails(t, REMAT_EGRAPH, "t.json: ops[0].saves[90]: tensor 'in40' is listed twice");
    free(t);
    t = many_inputs(100, 100, "", outs, &len);
    t_load_fails(t, REMAT_EGRAPH, "t.json: outputs[90]: output 'in40' is listed twice");
    free(t);
    /* An unknown output after a repeated one: the repeat comes first. */
    t_load_fails("{\"format\":\"remat-graph\",\"version\":1,\"ops\":[{\"id\":\"y\",\"op\":\"f\",\"inputs\":[],"
                 "\"bytes\":4,\"flops\":1}],\"outputs\":[\"y\",\"y\",\"ghost\"]}",
                 REMAT_EGRAPH, "t.json: outputs[1]: output 'y' is listed twice");
}
END_TEST

/* ---- the plan reader (src/load/plan_load.c) --------------------------- */

static remat_status read_plan(const remat_graph *g, const char *fp, const char *budget_bytes, remat_err *err)
{
    char text[512];
    snprintf(text, sizeof text,
             "{\"format\":\"remat-plan\",\"version\":1,\"graph\":{\"name\":\"g\",\"fingerprint\":\"%s\"},"
             "\"budget\":{\"kind\":\"total\",\"bytes\":%s},\"schedule\":[]}",
             fp, budget_bytes);
    remat_plan p;
    remat_err_init(err);
    remat_status st = remat_plan_load_json(g, text, strlen(text), "p.json", &p, err);
    remat_plan_destroy(&p);
    return st;
}

START_TEST(plan_should_read_only_plain_hex_fingerprints_and_exact_budgets)
{
    remat_graph *g = load(HDR X_IN ",'ops':[{'id':'y','op':'f','inputs':['x'],'bytes':4,'flops':1}],'outputs':['y']}");
    char fp[32], upper[32];
    snprintf(fp, sizeof fp, "%llx", (unsigned long long)g->fingerprint);
    snprintf(upper, sizeof upper, "%016llX", (unsigned long long)g->fingerprint);
    remat_err err;
    ck_assert_msg(read_plan(g, fp, "64", &err) == REMAT_OK, "%s", err.msg);
    ck_assert_msg(read_plan(g, upper, "9007199254740991", &err) == REMAT_OK, "%s", err.msg);
    /* strtoull alone would read a sign, spaces or 0x: "-1" is 2^64-1. */
    static const char *const bad[] = {"-1", " 1", "+1", "0x1", "", "00000000000000001", "12g", "1 "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(read_plan(g, bad[i], "64", &err), REMAT_EPLAN);
        ck_assert_msg_contains(&err, "p.json: graph.fingerprint: must be a hex string");
    }
    /* 2^53 is where JSON numbers stop being exact, as in graphs. */
    ck_assert_int_eq(read_plan(g, fp, "9007199254740992", &err), REMAT_EPLAN);
    ck_assert_msg_contains(&err, "p.json: budget.bytes:");
    ck_assert_msg(read_plan(g, fp, "\"9007199254740993\"", &err) == REMAT_OK, "%s", err.msg);
    remat_graph_destroy(g);
}
END_TEST

Suite *load_suite(void)
{
    Suite *s = suite_create("load");
    TCase *tc = tcase_create("errors");
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
    suite_add_tcase(s, tc);

    TCase *ok = tcase_create("content");
    tcase_add_test(ok, load_should_load_a_bundled_graph_from_a_file);
    tcase_add_test(ok, load_should_make_every_output_of_a_multi_output_op_addressable);
    tcase_add_test(ok, load_should_give_views_no_bytes_and_their_root_storage);
    tcase_add_test(ok, load_should_default_saves_to_the_distinct_inputs);
    tcase_add_test(ok, load_should_apply_documented_defaults);
    tcase_add_test(ok, load_should_accept_free_form_attrs_and_meta);
    tcase_add_test(ok, load_should_accept_a_file_order_that_is_not_topological);
    tcase_add_test(ok, load_should_not_need_a_nul_terminator);
    tcase_add_test(ok, load_should_work_without_an_error_record);
    tcase_add_test(ok, load_should_fingerprint_content_not_formatting);
    tcase_add_test(ok, load_should_return_none_for_unknown_ids);
    tcase_add_test(ok, load_should_size_a_view_from_a_base_defined_later);
    tcase_add_test(ok, load_should_settle_a_long_view_chain_without_recursion);
    tcase_add_test(ok, load_should_default_a_view_ops_saves_to_nothing);
    tcase_add_test(ok, load_should_accept_fields_in_any_order);
    tcase_set_timeout(ok, 60);
    suite_add_tcase(s, ok);

    TCase *dr = tcase_create("drivers");
    tcase_add_test(dr, load_should_read_every_bundled_graph_alike_with_both_drivers);
    tcase_add_test(dr, load_should_resolve_forward_references_while_streaming);
    tcase_add_test(dr, load_should_refuse_a_forward_reference_error_with_the_canonical_message);
    tcase_add_test(dr, load_should_refuse_nesting_that_only_the_whole_document_exceeds);
    tcase_add_test(dr, load_should_check_long_lists_in_n_log_n);
    tcase_add_test(dr, plan_should_read_only_plain_hex_fingerprints_and_exact_budgets);
    tcase_set_timeout(dr, 60);
    suite_add_tcase(s, dr);

    TCase *rb = tcase_create("robustness");
    tcase_add_test(rb, load_should_refuse_every_truncation_of_a_valid_graph);
    tcase_add_test(rb, load_should_survive_every_single_byte_corruption);
    tcase_add_test(rb, load_should_report_out_of_memory_at_every_allocation);
    tcase_add_test(rb, load_should_report_out_of_memory_in_either_driver);
    tcase_add_test(rb, load_should_refuse_absurd_nesting_without_crashing);
    tcase_set_timeout(rb, 60);
    suite_add_tcase(s, rb);
    return s;
}

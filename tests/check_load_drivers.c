/*
 * check_load_drivers.c - the graph loader's two drivers (the whole-document
 * tree and the op-at-a-time stream) read every bundled graph alike, resolve
 * forward references, refuse alike, and check long lists in n log n; the
 * plan reader takes only plain hex fingerprints and exact budgets; and the
 * loader survives every truncation and single-byte corruption of a valid
 * graph, out of memory at every allocation in either driver, and absurd
 * nesting. Part of the "load" suite (check_load.c builds it; these tests are
 * its "drivers" and "robustness" cases).
 */
#include "check_load.h"
#include "load/load_internal.h"
#include "util/util_internal.h"

#include <stdio.h>
#include <stdlib.h>

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

/* The "drivers" and "robustness" cases of the load suite (check_load.c). */
void load_drivers_tests(TCase *dr)
{
    tcase_add_test(dr, load_should_read_every_bundled_graph_alike_with_both_drivers);
    tcase_add_test(dr, load_should_resolve_forward_references_while_streaming);
    tcase_add_test(dr, load_should_refuse_a_forward_reference_error_with_the_canonical_message);
    tcase_add_test(dr, load_should_refuse_nesting_that_only_the_whole_document_exceeds);
    tcase_add_test(dr, load_should_check_long_lists_in_n_log_n);
    tcase_add_test(dr, plan_should_read_only_plain_hex_fingerprints_and_exact_budgets);
}

void load_robustness_tests(TCase *rb)
{
    tcase_add_test(rb, load_should_refuse_every_truncation_of_a_valid_graph);
    tcase_add_test(rb, load_should_survive_every_single_byte_corruption);
    tcase_add_test(rb, load_should_report_out_of_memory_at_every_allocation);
    tcase_add_test(rb, load_should_report_out_of_memory_in_either_driver);
    tcase_add_test(rb, load_should_refuse_absurd_nesting_without_crashing);
}

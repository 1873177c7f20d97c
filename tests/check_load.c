/*
 * check_load.c - the graph loader: every feature the format allows loads to
 * the values the format documents (graphs/README.md), views and saves
 * included, and the helpers the load suite's files share (check_load.h).
 *
 * The bad inputs it refuses, with the right status and a message that names
 * the place (JSON path, id, or line:column), are in check_load_errors.c; the
 * two drivers' agreement, long lists, the plan reader's numbers and
 * robustness against truncation, corruption and out of memory in
 * check_load_drivers.c. All are one suite, "load".
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, mkstemp */
#include "check_load.h"
#include "load/load_internal.h"
#include "util/util_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void dq(char *dst, const char *sq)
{
    size_t n = strlen(sq);
    ck_assert_msg(n < JSON_CAP, "test JSON too long");
    for (size_t i = 0; i <= n; i++)
        dst[i] = sq[i] == '\'' ? '"' : sq[i];
}

remat_graph *load(const char *sq)
{
    char buf[JSON_CAP];
    dq(buf, sq);
    return t_load(buf);
}

remat_analysis *analyze(const char *sq, remat_graph **g)
{
    char buf[JSON_CAP];
    dq(buf, sq);
    return t_analyze(buf, g);
}

/* Asserts that loading (and analyzing) fails with code and a message that
 * contains substr. */
void fails(const char *sq, remat_status code, const char *substr)
{
    char buf[JSON_CAP];
    dq(buf, sq);
    t_load_fails(buf, code, substr);
}

void fails_all(const bad_case *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fails(c[i].json, c[i].code, c[i].substr);
}

/* ---- loading with both drivers --------------------------------------- */

/* Loads sq with the tree driver and with the stream driver (which must not
 * give up unless may_give_up) and asserts both give the same graph. */
remat_graph *load_both(const char *json, size_t len, int may_give_up)
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

remat_graph *load2(const char *sq)
{
    char buf[JSON_CAP];
    dq(buf, sq);
    return load_both(buf, strlen(buf), 0);
}

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

Suite *load_suite(void)
{
    Suite *s = suite_create("load");
    TCase *tc = tcase_create("errors");
    load_errors_tests(tc);
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
    load_drivers_tests(dr);
    tcase_set_timeout(dr, 60);
    suite_add_tcase(s, dr);

    TCase *rb = tcase_create("robustness");
    load_robustness_tests(rb);
    tcase_set_timeout(rb, 60);
    suite_add_tcase(s, rb);
    return s;
}

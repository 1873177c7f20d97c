/*
 * check_analyze.c - backward derivation and lifetimes against hand-derived
 * expectations; the invariants over generated graphs are in
 * check_analyze_random.c (same suite, its "invariants" case).
 */
#include "check_analyze.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* DESIGN's example: a view (v1 of a1), an op that saves its output (relu),
 * a sum that saves nothing, and a frozen param (w2). */
static const char *MLP2 =
    "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"mlp2\","
    "\"inputs\":[{\"id\":\"x\",\"bytes\":4096}],"
    "\"params\":[{\"id\":\"w1\",\"bytes\":65536},{\"id\":\"w2\",\"bytes\":65536,\"frozen\":true}],"
    "\"ops\":["
    "{\"id\":\"h1\",\"op\":\"matmul\",\"inputs\":[\"x\",\"w1\"],\"bytes\":4096,\"flops\":131072},"
    "{\"id\":\"a1\",\"op\":\"relu\",\"inputs\":[\"h1\"],\"bytes\":4096,\"flops\":1024,\"saves\":[\"a1\"]},"
    "{\"id\":\"v1\",\"op\":\"view\",\"inputs\":[\"a1\"],\"alias_of\":\"a1\"},"
    "{\"id\":\"h2\",\"op\":\"matmul\",\"inputs\":[\"v1\",\"w2\"],\"bytes\":4096,\"flops\":131072},"
    "{\"id\":\"loss\",\"op\":\"sum\",\"inputs\":[\"h2\"],\"bytes\":4,\"flops\":1024,\"saves\":[]}],"
    "\"outputs\":[\"loss\"]}";

START_TEST(analyze_should_derive_mlp2_lifetimes_by_hand)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(MLP2, &g);
    /* Steps: fwd h1 a1 v1 h2 loss = 0..4; every op feeds the loss and
     * depends on w1, so all five have backward steps: bwd loss h2 v1 a1 h1 =
     * 5..9; optimizer = 10. */
    ck_assert_uint_eq(a->n_bwd, 5);
    ck_assert_uint_eq(a->n_steps, 11);
    ck_assert_uint_eq(t_bwd(a, "loss"), 5);
    ck_assert_uint_eq(t_bwd(a, "h1"), 9);
    const remat_lifetime *h1 = &a->life[t_tensor(g, "h1")];
    /* h1 is read by relu only, and relu saves its output: h1 dies at fwd:a1. */
    ck_assert_uint_eq(h1->birth, 0);
    ck_assert_uint_eq(h1->last_fwd_use, 1);
    ck_assert_uint_eq(h1->last_bwd_use, REMAT_NONE);
    ck_assert_uint_eq(h1->free, 1);
    ck_assert_uint_eq(h1->grad_birth, t_bwd(a, "a1"));
    ck_assert_uint_eq(h1->grad_free, t_bwd(a, "h1"));
    /* a1 is saved by its own backward (relu saves its output); its view v1
     * is saved by bwd:h2 (step 6), earlier than bwd:a1 (step 8). */
    const remat_lifetime *a1 = &a->life[t_tensor(g, "a1")];
    ck_assert_uint_eq(a1->last_fwd_use, t_fwd(a, "v1"));
    ck_assert_uint_eq(a1->last_bwd_use, t_bwd(a, "a1"));
    ck_assert_uint_eq(a1->free, t_bwd(a, "a1"));
    const remat_lifetime *v1 = &a->life[t_tensor(g, "v1")];
    ck_assert_uint_eq(v1->last_bwd_use, t_bwd(a, "h2"));
    ck_assert_uint_eq(g->tensors[t_tensor(g, "v1")].bytes, 0);
    ck_assert_uint_eq(g->tensors[t_tensor(g, "v1")].storage, t_tensor(g, "a1"));
    /* sum saves nothing: h2 dies after its last forward use. */
    const remat_lifetime *h2 = &a->life[t_tensor(g, "h2")];
    ck_assert_uint_eq(h2->free, t_fwd(a, "loss"));
    /* The loss lives until backward starts; its gradient seed is born at
     * the first backward step. */
    const remat_lifetime *loss = &a->life[t_tensor(g, "loss")];
    ck_assert_uint_eq(loss->free, 4);
    ck_assert_uint_eq(loss->grad_birth, 5);
    /* Frozen w2 has no gradient; w1's lives from bwd:h1 to the optimizer. */
    ck_assert_uint_eq(a->life[t_tensor(g, "w2")].grad_birth, REMAT_NONE);
    ck_assert_uint_eq(a->life[t_tensor(g, "w1")].grad_birth, t_bwd(a, "h1"));
    ck_assert_uint_eq(a->life[t_tensor(g, "w1")].grad_free, 10);
    /* x needs no gradient. */
    ck_assert_uint_eq(a->life[t_tensor(g, "x")].grad_birth, REMAT_NONE);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* ---- hand-derived lifetimes on small graphs ---------------------------
 *
 * Test JSON below is written with ' for " (no id contains an apostrophe);
 * sq() swaps them back. Each test spells out the step numbering it derives
 * by hand from the rules in graphs/README.md, then checks every field. */

#define HDR "{'format':'remat-graph','version':1,"
#define JSON_CAP 4096

static remat_analysis *analyze_sq(const char *sq, remat_graph **g)
{
    char buf[JSON_CAP];
    size_t n = strlen(sq);
    ck_assert_uint_lt(n, sizeof buf);
    for (size_t i = 0; i <= n; i++)
        buf[i] = sq[i] == '\'' ? '"' : sq[i];
    return t_analyze(buf, g);
}

/* Asserts all six lifetime fields of tensor `id`. */
static void expect_life(const remat_analysis *a, const char *id, uint32_t birth, uint32_t last_fwd, uint32_t last_bwd,
                        uint32_t free_, uint32_t grad_birth, uint32_t grad_free)
{
    const remat_lifetime *L = &a->life[t_tensor(a->g, id)];
    ck_assert_msg(L->birth == birth, "%s.birth = %u, expected %u", id, L->birth, birth);
    ck_assert_msg(L->last_fwd_use == last_fwd, "%s.last_fwd_use = %u, expected %u", id, L->last_fwd_use, last_fwd);
    ck_assert_msg(L->last_bwd_use == last_bwd, "%s.last_bwd_use = %u, expected %u", id, L->last_bwd_use, last_bwd);
    ck_assert_msg(L->free == free_, "%s.free = %u, expected %u", id, L->free, free_);
    ck_assert_msg(L->grad_birth == grad_birth, "%s.grad_birth = %u, expected %u", id, L->grad_birth, grad_birth);
    ck_assert_msg(L->grad_free == grad_free, "%s.grad_free = %u, expected %u", id, L->grad_free, grad_free);
}

/* Asserts the backward order: exactly the listed ops, in this order. */
static void expect_bwd(const remat_analysis *a, const char *const *ops, uint32_t n)
{
    ck_assert_uint_eq(a->n_bwd, n);
    ck_assert_uint_eq(a->n_steps, a->g->n_ops + n + 1);
    uint32_t with_bwd = 0;
    for (uint32_t k = 0; k < a->g->n_ops; k++)
        with_bwd += a->bwd_step[k] != NONE;
    ck_assert_uint_eq(with_bwd, n);
    for (uint32_t i = 0; i < n; i++)
        ck_assert_msg(a->bwd_step[t_op(a->g, ops[i])] == a->g->n_ops + i, "bwd:%s is not step %u", ops[i],
                      a->g->n_ops + i);
}

START_TEST(analyze_should_derive_a_multi_output_batchnorm)
{
    /* bn produces y, mean, invstd and an unused scratch; its backward
     * saves h, gamma, mean and invstd (not y). relu saves its output.
     *   fwd: h 0, bn 1, r 2, loss 3   bwd: loss 4, r 5, bn 6, h 7   opt 8 */
    remat_graph *g;
    remat_analysis *a = analyze_sq(
        HDR "'inputs':[{'id':'x','bytes':400}],'params':[{'id':'w','bytes':400},{'id':'gamma','bytes':40}],"
            "'ops':[{'id':'h','op':'matmul','inputs':['x','w'],'bytes':400,'flops':100},"
            "{'id':'bn','op':'batch_norm','inputs':['h','gamma'],'flops':50,'saves':['h','gamma','mean','invstd'],"
            "'outputs':[{'id':'y','bytes':400},{'id':'mean','bytes':40},{'id':'invstd','bytes':40},"
            "{'id':'scratch','bytes':8}]},"
            "{'id':'r','op':'relu','inputs':['y'],'bytes':400,'flops':10,'saves':['r']},"
            "{'id':'loss','op':'sum','inputs':['r'],'bytes':4,'flops':10,'saves':[]}],'outputs':['loss']}",
        &g);
    static const char *const bwd[] = {"loss", "r", "bn", "h"};
    expect_bwd(a, bwd, 4);
    /* h is read by bn (fwd 1) and saved by bn's backward (6). */
    expect_life(a, "h", 0, 1, 6, 6, 6, 7);
    /* y is read by relu only, and relu saves its own output instead. */
    expect_life(a, "y", 1, 2, NONE, 2, 5, 6);
    /* mean and invstd are read by no forward op; bn's backward keeps them.
     * Nothing reads them toward the loss, so they get no gradient. */
    expect_life(a, "mean", 1, NONE, 6, 6, NONE, NONE);
    expect_life(a, "invstd", 1, NONE, 6, 6, NONE, NONE);
    /* Produced and never read: dead right after birth. */
    expect_life(a, "scratch", 1, NONE, NONE, 1, NONE, NONE);
    expect_life(a, "r", 2, 3, 5, 5, 4, 5);
    /* The loss lives until backward starts; its seed is born at step 4. */
    expect_life(a, "loss", 3, NONE, NONE, 3, 4, 4);
    /* Leaves are resident throughout (no birth, no free); parameter
     * gradients live to the optimizer step. */
    expect_life(a, "gamma", NONE, 1, 6, NONE, 6, 8);
    expect_life(a, "w", NONE, 0, 7, NONE, 7, 8);
    expect_life(a, "x", NONE, 0, 7, NONE, NONE, NONE);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(analyze_should_give_ops_on_frozen_params_no_backward)
{
    /* a and b depend only on the input and the frozen wf: no gradient
     * flows into them, so neither has a backward step, and b's default
     * saves (a) do not keep a alive.
     *   fwd: a 0, b 1, c 2, loss 3   bwd: loss 4, c 5   opt 6 */
    remat_graph *g;
    remat_analysis *a = analyze_sq(
        HDR "'inputs':[{'id':'x','bytes':16}],"
            "'params':[{'id':'wf','bytes':64,'frozen':true},{'id':'w','bytes':64}],"
            "'ops':[{'id':'a','op':'matmul','inputs':['x','wf'],'bytes':16,'flops':8},"
            "{'id':'b','op':'relu','inputs':['a'],'bytes':16,'flops':1},"
            "{'id':'c','op':'matmul','inputs':['b','w'],'bytes':16,'flops':8},"
            "{'id':'loss','op':'sum','inputs':['c'],'bytes':4,'flops':1,'saves':[]}],'outputs':['loss']}",
        &g);
    static const char *const bwd[] = {"loss", "c"};
    expect_bwd(a, bwd, 2);
    ck_assert_uint_eq(a->bwd_step[t_op(g, "a")], NONE);
    ck_assert_uint_eq(a->bwd_step[t_op(g, "b")], NONE);
    expect_life(a, "a", 0, 1, NONE, 1, NONE, NONE);
    /* b is saved by c's backward (default saves: b and w). */
    expect_life(a, "b", 1, 2, 5, 5, NONE, NONE);
    expect_life(a, "c", 2, 3, NONE, 3, 4, 5);
    expect_life(a, "loss", 3, NONE, NONE, 3, 4, 4);
    expect_life(a, "wf", NONE, 0, NONE, NONE, NONE, NONE);
    expect_life(a, "w", NONE, 2, 5, NONE, 5, 6);
    ck_assert(!a->grad_flows[t_tensor(g, "wf")]);
    ck_assert(a->grad_flows[t_tensor(g, "w")]);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(analyze_should_give_an_input_with_requires_grad_a_gradient)
{
    /* No params at all: the only gradient wanted is x's. t reads only y
     * (no gradient), so it has no backward step.
     *   fwd: s 0, t 1, loss 2   bwd: loss 3, s 4   opt 5 */
    remat_graph *g;
    remat_analysis *a = analyze_sq(
        HDR "'inputs':[{'id':'x','bytes':8,'requires_grad':true},{'id':'y','bytes':8}],"
            "'ops':[{'id':'s','op':'mul','inputs':['x','y'],'bytes':8,'flops':8},"
            "{'id':'t','op':'relu','inputs':['y'],'bytes':8,'flops':8},"
            "{'id':'loss','op':'add','inputs':['s','t'],'bytes':4,'flops':2,'saves':[]}],'outputs':['loss']}",
        &g);
    static const char *const bwd[] = {"loss", "s"};
    expect_bwd(a, bwd, 2);
    expect_life(a, "s", 0, 2, NONE, 2, 3, 4);
    expect_life(a, "t", 1, 2, NONE, 2, NONE, NONE);
    /* An input's gradient, like a parameter's, lives to the optimizer. */
    expect_life(a, "x", NONE, 0, 4, NONE, 4, 5);
    expect_life(a, "y", NONE, 1, 4, NONE, NONE, NONE);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(analyze_should_give_a_branch_off_the_loss_no_backward)
{
    /* side and side2 hang off h but never reach the loss: no backward
     * steps, no gradients, and side's default saves (h) do not keep h.
     *   fwd: h 0, side 1, side2 2, loss 3   bwd: loss 4, h 5   opt 6 */
    remat_graph *g;
    remat_analysis *a = analyze_sq(
        HDR "'inputs':[{'id':'x','bytes':16}],'params':[{'id':'w','bytes':64}],"
            "'ops':[{'id':'h','op':'matmul','inputs':['x','w'],'bytes':16,'flops':8},"
            "{'id':'side','op':'relu','inputs':['h'],'bytes':16,'flops':1},"
            "{'id':'side2','op':'exp','inputs':['side'],'bytes':16,'flops':1,'saves':['side2']},"
            "{'id':'loss','op':'sum','inputs':['h'],'bytes':4,'flops':1,'saves':[]}],'outputs':['loss']}",
        &g);
    static const char *const bwd[] = {"loss", "h"};
    expect_bwd(a, bwd, 2);
    expect_life(a, "h", 0, 3, NONE, 3, 4, 5);
    expect_life(a, "side", 1, 2, NONE, 2, NONE, NONE);
    expect_life(a, "side2", 2, NONE, NONE, 2, NONE, NONE);
    expect_life(a, "w", NONE, 0, 5, NONE, 5, 6);
    ck_assert(!a->grad_flows[t_tensor(g, "side")]);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(analyze_should_handle_a_graph_whose_only_output_is_an_input)
{
    /* Nothing reaches the output through an op, so there is no backward
     * at all: steps are fwd:h then the optimizer. x wants a gradient, but
     * no step writes one, so it has none (not a gradient freed without
     * ever being born). */
    remat_graph *g;
    remat_analysis *a = analyze_sq(
        HDR "'inputs':[{'id':'x','bytes':16,'requires_grad':true}],'params':[{'id':'w','bytes':64}],"
            "'ops':[{'id':'h','op':'matmul','inputs':['x','w'],'bytes':16,'flops':8}],'outputs':['x']}",
        &g);
    expect_bwd(a, NULL, 0);
    ck_assert_uint_eq(a->n_steps, 2);
    char name[32];
    ck_assert_str_eq(remat_step_name(a, 1, name, sizeof name), "optimizer");
    expect_life(a, "h", 0, NONE, NONE, 0, NONE, NONE);
    expect_life(a, "x", NONE, 0, NONE, NONE, NONE, NONE);
    expect_life(a, "w", NONE, 0, NONE, NONE, NONE, NONE);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(analyze_should_keep_a_view_chain_root_until_its_last_view_dies)
{
    /* u is a view of v, a view of h; the loss's backward saves u.
     * Views save nothing themselves.
     *   fwd: h 0, v 1, u 2, r 3, loss 4   bwd: loss 5, r 6, u 7, v 8, h 9   opt 10 */
    remat_graph *g;
    remat_analysis *a = analyze_sq(
        HDR "'inputs':[{'id':'x','bytes':64}],'params':[{'id':'w','bytes':64}],"
            "'ops':[{'id':'h','op':'matmul','inputs':['x','w'],'bytes':64,'flops':8},"
            "{'id':'v','op':'view','inputs':['h'],'alias_of':'h','saves':[]},"
            "{'id':'u','op':'view','inputs':['v'],'alias_of':'v','saves':[]},"
            "{'id':'r','op':'relu','inputs':['u'],'bytes':64,'flops':1,'saves':['r']},"
            "{'id':'loss','op':'sum','inputs':['r'],'bytes':4,'flops':1,'saves':['u']}],'outputs':['loss']}",
        &g);
    static const char *const bwd[] = {"loss", "r", "u", "v", "h"};
    expect_bwd(a, bwd, 5);
    expect_life(a, "u", 2, 3, 5, 5, 6, 7);
    expect_life(a, "v", 1, 2, NONE, 2, 7, 8);
    /* h's own last use is fwd:v (1), but its storage holds u until 5. */
    expect_life(a, "h", 0, 1, NONE, 5, 8, 9);
    expect_life(a, "r", 3, 4, 6, 6, 5, 6);
    expect_life(a, "loss", 4, NONE, NONE, 4, 5, 5);
    ck_assert_uint_eq(g->tensors[t_tensor(g, "u")].storage, t_tensor(g, "h"));
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(analyze_should_keep_graph_outputs_until_backward_starts)
{
    /* h is both a graph output and an intermediate: it lives to the last
     * forward step, and its gradient seed is born at the first backward
     * step, before bwd:r adds to it.
     *   fwd: h 0, r 1, loss 2   bwd: loss 3, r 4, h 5   opt 6 */
    remat_graph *g;
    remat_analysis *a = analyze_sq(
        HDR "'inputs':[{'id':'x','bytes':64}],'params':[{'id':'w','bytes':64}],"
            "'ops':[{'id':'h','op':'matmul','inputs':['x','w'],'bytes':64,'flops':8},"
            "{'id':'r','op':'relu','inputs':['h'],'bytes':64,'flops':1,'saves':['r']},"
            "{'id':'loss','op':'sum','inputs':['r'],'bytes':4,'flops':1,'saves':[]}],'outputs':['loss','h']}",
        &g);
    static const char *const bwd[] = {"loss", "r", "h"};
    expect_bwd(a, bwd, 3);
    expect_life(a, "h", 0, 1, NONE, 2, 3, 5);
    expect_life(a, "r", 1, 2, 4, 4, 3, 4);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(analyze_should_let_saves_name_a_later_tensor)
{
    /* Graphs converted from joint forward/backward graphs may save a
     * consumer's output: a's backward reads b, which keeps b to bwd:a.
     *   fwd: a 0, b 1, loss 2   bwd: loss 3, b 4, a 5   opt 6 */
    remat_graph *g;
    remat_analysis *a = analyze_sq(
        HDR "'inputs':[{'id':'x','bytes':8}],'params':[{'id':'w','bytes':8}],"
            "'ops':[{'id':'a','op':'mul','inputs':['x','w'],'bytes':8,'flops':1,'saves':['b','w']},"
            "{'id':'b','op':'tanh','inputs':['a'],'bytes':8,'flops':1,'saves':[]},"
            "{'id':'loss','op':'sum','inputs':['b'],'bytes':4,'flops':1,'saves':[]}],'outputs':['loss']}",
        &g);
    expect_life(a, "a", 0, 1, NONE, 1, 4, 5);
    expect_life(a, "b", 1, 2, 5, 5, 3, 4);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

Suite *analyze_suite(void)
{
    Suite *s = suite_create("analyze");
    TCase *tc = tcase_create("lifetimes");
    tcase_add_test(tc, analyze_should_derive_mlp2_lifetimes_by_hand);
    tcase_add_test(tc, analyze_should_derive_a_multi_output_batchnorm);
    tcase_add_test(tc, analyze_should_give_ops_on_frozen_params_no_backward);
    tcase_add_test(tc, analyze_should_give_an_input_with_requires_grad_a_gradient);
    tcase_add_test(tc, analyze_should_give_a_branch_off_the_loss_no_backward);
    tcase_add_test(tc, analyze_should_handle_a_graph_whose_only_output_is_an_input);
    tcase_add_test(tc, analyze_should_keep_a_view_chain_root_until_its_last_view_dies);
    tcase_add_test(tc, analyze_should_keep_graph_outputs_until_backward_starts);
    tcase_add_test(tc, analyze_should_let_saves_name_a_later_tensor);
    suite_add_tcase(s, tc);
    TCase *inv = tcase_create("invariants");
    analyze_random_tests(inv);
    tcase_set_timeout(inv, 60);
    suite_add_tcase(s, inv);
    return s;
}

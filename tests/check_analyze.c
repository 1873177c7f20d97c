/*
 * check_analyze.c - backward derivation and lifetimes against hand-derived
 * expectations, and invariants over generated graphs.
 */
#include "test_util.h"

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

Suite *analyze_suite(void)
{
    Suite *s = suite_create("analyze");
    TCase *tc = tcase_create("lifetimes");
    tcase_add_test(tc, analyze_should_derive_mlp2_lifetimes_by_hand);
    suite_add_tcase(s, tc);
    return s;
}

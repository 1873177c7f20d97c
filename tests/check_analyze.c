/*
 * check_analyze.c - backward derivation and lifetimes against hand-derived
 * expectations, and invariants over generated graphs.
 */
#include "test_util.h"

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
#define NONE REMAT_NONE

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

/* ---- invariants over random DAGs ---------------------------------------
 *
 * Each graph is built here from a seeded PRNG as a model (arrays below),
 * written out as JSON, loaded and analyzed. The expectations come from the
 * model by brute force: fixed-point iteration for "needs a gradient" and
 * "reaches an output", full scans for every use. Nothing here calls the
 * analyzer's helpers. */

#define RG_OPS 96
#define RG_T (8 + 3 * RG_OPS)
#define RG_IN 4
#define RG_SAVE 8

typedef struct {
    uint32_t n_t, n_ops, n_leaf;
    char tid[RG_T][32];
    int is_leaf[RG_T], wants_grad[RG_T]; /* declared: trainable param or input with requires_grad */
    int is_param[RG_T];
    uint32_t producer[RG_T], alias[RG_T];
    uint64_t bytes[RG_T];
    char oid[RG_OPS][32];
    uint32_t n_in[RG_OPS], in[RG_OPS][RG_IN];
    uint32_t n_out[RG_OPS], out[RG_OPS][3];
    int multi[RG_OPS];
    int saves_given[RG_OPS]; /* 0: default (distinct inputs) */
    uint32_t n_save[RG_OPS], save[RG_OPS][RG_SAVE];
    uint32_t n_outputs, outputs[3];
    uint32_t file_order[RG_OPS];
    int shuffled;
} rgraph;

static uint64_t rng_next(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint32_t rng_below(uint64_t *s, uint32_t n)
{
    return (uint32_t)(rng_next(s) % n);
}

static int contains(const uint32_t *v, uint32_t n, uint32_t x)
{
    for (uint32_t i = 0; i < n; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

/* A tensor that exists before op k: mostly a recent one (deep chains),
 * sometimes any (long skips). */
static uint32_t pick_existing(uint64_t *s, const rgraph *m)
{
    if (m->n_t > 6 && rng_below(s, 10) < 7)
        return m->n_t - 1 - rng_below(s, 6);
    return rng_below(s, m->n_t);
}

static uint32_t new_tensor(rgraph *m, const char *id, uint32_t producer, uint32_t alias, uint64_t bytes)
{
    uint32_t t = m->n_t++;
    snprintf(m->tid[t], sizeof m->tid[t], "%s", id);
    m->producer[t] = producer;
    m->alias[t] = alias;
    m->bytes[t] = bytes;
    return t;
}

static void rgraph_build(rgraph *m, uint64_t seed)
{
    uint64_t s = seed;
    memset(m, 0, sizeof *m);
    uint32_t n_in = 1 + rng_below(&s, 3), n_par = 1 + rng_below(&s, 4);
    for (uint32_t i = 0; i < n_in + n_par; i++) {
        char id[32];
        snprintf(id, sizeof id, "%s%u", i < n_in ? "in" : "p", i);
        uint32_t t = new_tensor(m, id, NONE, NONE, 1 + rng_below(&s, 4096));
        m->is_leaf[t] = 1;
        m->is_param[t] = i >= n_in;
        /* Inputs: 30% requires_grad; params: 70% trainable. */
        m->wants_grad[t] = i < n_in ? rng_below(&s, 10) < 3 : rng_below(&s, 10) < 7;
    }
    m->n_leaf = m->n_t;
    m->n_ops = 1 + rng_below(&s, RG_OPS);
    for (uint32_t k = 0; k < m->n_ops; k++) {
        uint32_t kind = rng_below(&s, 20); /* 0-2 view, 3-5 multi-output, else plain */
        if (kind < 3) {
            uint32_t base = pick_existing(&s, m);
            snprintf(m->oid[k], sizeof m->oid[k], "v%u", k);
            m->n_in[k] = 1;
            m->in[k][0] = base;
            m->n_out[k] = 1;
            m->out[k][0] = new_tensor(m, m->oid[k], k, base, 0);
        } else {
            m->n_in[k] = 1 + rng_below(&s, RG_IN);
            for (uint32_t i = 0; i < m->n_in[k]; i++)
                m->in[k][i] = pick_existing(&s, m); /* repeats allowed: mul(x, x) */
            if (kind < 6) {
                m->multi[k] = 1;
                snprintf(m->oid[k], sizeof m->oid[k], "m%u", k);
                m->n_out[k] = 2 + rng_below(&s, 2);
                for (uint32_t j = 0; j < m->n_out[k]; j++) {
                    char id[32];
                    snprintf(id, sizeof id, "m%u_%u", k, j);
                    /* Now and then one output is a view of an input. */
                    uint32_t al = j == 1 && rng_below(&s, 3) == 0 ? m->in[k][rng_below(&s, m->n_in[k])] : NONE;
                    m->out[k][j] = new_tensor(m, id, k, al, al == NONE ? rng_below(&s, 5000) : 0);
                }
            } else {
                snprintf(m->oid[k], sizeof m->oid[k], "o%u", k);
                m->n_out[k] = 1;
                m->out[k][0] = new_tensor(m, m->oid[k], k, NONE, rng_below(&s, 5000));
            }
        }
        m->file_order[k] = k;
    }
    /* Saves, chosen once every tensor exists: default, none, own outputs,
     * inputs and outputs, or any tensors at all (even later ones). */
    for (uint32_t k = 0; k < m->n_ops; k++) {
        uint32_t mode = rng_below(&s, 5);
        m->saves_given[k] = mode != 0;
        m->n_save[k] = 0;
        if (mode == 0) {
            for (uint32_t i = 0; i < m->n_in[k]; i++)
                if (!contains(m->save[k], m->n_save[k], m->in[k][i]))
                    m->save[k][m->n_save[k]++] = m->in[k][i];
        } else if (mode == 2) {
            for (uint32_t j = 0; j < m->n_out[k]; j++)
                if (rng_below(&s, 2) || j == 0)
                    m->save[k][m->n_save[k]++] = m->out[k][j];
        } else if (mode == 3) {
            uint32_t pool[RG_IN + 3], np = 0;
            for (uint32_t i = 0; i < m->n_in[k]; i++)
                pool[np++] = m->in[k][i];
            for (uint32_t j = 0; j < m->n_out[k]; j++)
                pool[np++] = m->out[k][j];
            for (uint32_t i = 0; i < np; i++)
                if (rng_below(&s, 2) && !contains(m->save[k], m->n_save[k], pool[i]))
                    m->save[k][m->n_save[k]++] = pool[i];
        } else if (mode == 4) {
            uint32_t want = 1 + rng_below(&s, 3);
            for (uint32_t i = 0; i < want; i++) {
                uint32_t t = rng_below(&s, m->n_t);
                if (!contains(m->save[k], m->n_save[k], t))
                    m->save[k][m->n_save[k]++] = t;
            }
        }
    }
    /* Outputs: the last op's first output, sometimes more (any tensor,
     * leaves included). */
    m->outputs[m->n_outputs++] = m->out[m->n_ops - 1][0];
    for (int extra = rng_below(&s, 3); extra > 0; extra--) {
        uint32_t t = rng_below(&s, m->n_t);
        if (!contains(m->outputs, m->n_outputs, t))
            m->outputs[m->n_outputs++] = t;
    }
    /* Half the graphs are written in a shuffled (non-topological) order. */
    m->shuffled = rng_below(&s, 2);
    if (m->shuffled)
        for (uint32_t i = m->n_ops; i > 1; i--) {
            uint32_t j = rng_below(&s, i), tmp = m->file_order[i - 1];
            m->file_order[i - 1] = m->file_order[j];
            m->file_order[j] = tmp;
        }
}

typedef struct {
    char *s;
    size_t len, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void sb_printf(sbuf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        ck_assert_int_ge(n, 0);
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        b->cap = 2 * b->cap + (size_t)n + 64;
        b->s = realloc(b->s, b->cap);
        ck_assert_ptr_nonnull(b->s);
    }
}

static void sb_ids(sbuf *b, const rgraph *m, const uint32_t *ts, uint32_t n)
{
    sb_printf(b, "[");
    for (uint32_t i = 0; i < n; i++)
        sb_printf(b, "%s\"%s\"", i ? "," : "", m->tid[ts[i]]);
    sb_printf(b, "]");
}

/* Bytes as a number or, now and then, as a decimal string. */
static void sb_count(sbuf *b, uint64_t v, int as_string)
{
    if (as_string)
        sb_printf(b, "\"%llu\"", (unsigned long long)v);
    else
        sb_printf(b, "%llu", (unsigned long long)v);
}

static char *rgraph_json(const rgraph *m)
{
    sbuf b = {malloc(256), 0, 256};
    ck_assert_ptr_nonnull(b.s);
    sb_printf(&b, "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"random\",\"inputs\":[");
    int first = 1;
    for (uint32_t t = 0; t < m->n_leaf; t++)
        if (!m->is_param[t]) {
            sb_printf(&b, "%s{\"id\":\"%s\",\"bytes\":", first ? "" : ",", m->tid[t]);
            sb_count(&b, m->bytes[t], t % 2);
            sb_printf(&b, ",\"requires_grad\":%s}", m->wants_grad[t] ? "true" : "false");
            first = 0;
        }
    sb_printf(&b, "],\"params\":[");
    first = 1;
    for (uint32_t t = 0; t < m->n_leaf; t++)
        if (m->is_param[t]) {
            sb_printf(&b, "%s{\"id\":\"%s\",\"bytes\":%llu%s}", first ? "" : ",", m->tid[t],
                      (unsigned long long)m->bytes[t], m->wants_grad[t] ? "" : ",\"frozen\":true");
            first = 0;
        }
    sb_printf(&b, "],\"ops\":[");
    for (uint32_t i = 0; i < m->n_ops; i++) {
        uint32_t k = m->file_order[i];
        sb_printf(&b, "%s{\"id\":\"%s\",\"op\":\"%s\",\"inputs\":", i ? "," : "", m->oid[k],
                  m->multi[k] ? "multi" : "f");
        sb_ids(&b, m, m->in[k], m->n_in[k]);
        if (m->multi[k]) {
            sb_printf(&b, ",\"flops\":%u,\"outputs\":[", 7 * k + 1);
            for (uint32_t j = 0; j < m->n_out[k]; j++) {
                uint32_t t = m->out[k][j];
                sb_printf(&b, "%s{\"id\":\"%s\"", j ? "," : "", m->tid[t]);
                if (m->alias[t] != NONE)
                    sb_printf(&b, ",\"alias_of\":\"%s\"}", m->tid[m->alias[t]]);
                else {
                    sb_printf(&b, ",\"bytes\":");
                    sb_count(&b, m->bytes[t], j % 2);
                    sb_printf(&b, "}");
                }
            }
            sb_printf(&b, "]");
        } else if (m->alias[m->out[k][0]] != NONE) {
            sb_printf(&b, ",\"alias_of\":\"%s\"", m->tid[m->alias[m->out[k][0]]]);
        } else {
            sb_printf(&b, ",\"bytes\":%llu,\"flops\":%u", (unsigned long long)m->bytes[m->out[k][0]], 3 * k + 2);
        }
        /* A view op's default saves are none (graphs/README.md); the
         * model's default is the distinct inputs, so write them out. */
        int all_views = 1;
        for (uint32_t o = 0; o < m->n_out[k]; o++)
            all_views &= m->alias[m->out[k][o]] != NONE;
        if (m->saves_given[k] || all_views) {
            sb_printf(&b, ",\"saves\":");
            sb_ids(&b, m, m->save[k], m->n_save[k]);
        }
        sb_printf(&b, "}");
    }
    sb_printf(&b, "],\"outputs\":");
    sb_ids(&b, m, m->outputs, m->n_outputs);
    sb_printf(&b, "}");
    return b.s;
}

static uint32_t max_step(uint32_t a, uint32_t b)
{
    if (a == NONE)
        return b;
    if (b == NONE)
        return a;
    return a > b ? a : b;
}

static uint32_t min_step(uint32_t a, uint32_t b)
{
    if (a == NONE)
        return b;
    if (b == NONE)
        return a;
    return a < b ? a : b;
}

/* The storage root by the model's own alias chain. */
static uint32_t model_root(const rgraph *m, uint32_t t)
{
    while (m->alias[t] != NONE)
        t = m->alias[t];
    return t;
}

static void check_random_graph(uint64_t seed)
{
    rgraph *m = calloc(1, sizeof *m);
    ck_assert_ptr_nonnull(m);
    rgraph_build(m, seed);
    char *json = rgraph_json(m);
    remat_graph *g = NULL;
    remat_err err;
    remat_err_init(&err);
    ck_assert_msg(remat_graph_load_json(json, strlen(json), "random", &g, &err) == REMAT_OK, "seed %llu: %s",
                  (unsigned long long)seed, err.msg);
    remat_analysis *a = NULL;
    ck_assert_msg(remat_analyze(g, &a, &err) == REMAT_OK, "seed %llu: %s", (unsigned long long)seed, err.msg);
    free(json);

    const uint32_t n = m->n_ops, nt = m->n_t;
    uint32_t T[RG_T], K[RG_OPS]; /* model index -> graph index */
    for (uint32_t t = 0; t < nt; t++)
        T[t] = t_tensor(g, m->tid[t]);
    for (uint32_t k = 0; k < n; k++)
        K[k] = t_op(g, m->oid[k]);
    ck_assert_uint_eq(g->n_tensors, nt);
    ck_assert_uint_eq(g->n_ops, n);

    /* Forward order: a permutation, topological, and file order when the
     * file was already topological. */
    uint32_t pos[RG_OPS];
    for (uint32_t k = 0; k < n; k++) {
        pos[k] = a->pos[K[k]];
        ck_assert_uint_lt(pos[k], n);
        ck_assert_uint_eq(a->order[pos[k]], K[k]);
    }
    for (uint32_t k = 0; k < n; k++)
        for (uint32_t i = 0; i < m->n_in[k]; i++) {
            uint32_t p = m->producer[m->in[k][i]];
            ck_assert_msg(p == NONE || pos[p] < pos[k], "seed %llu: %s runs before its input's producer %s",
                          (unsigned long long)seed, m->oid[k], m->oid[p]);
        }
    if (!m->shuffled)
        for (uint32_t i = 0; i < n; i++)
            ck_assert_uint_eq(a->order[i], i);

    /* Needs a gradient / reaches an output: fixed points in file order. */
    int needs[RG_T], treach[RG_T], is_out[RG_T] = {0};
    for (uint32_t i = 0; i < m->n_outputs; i++)
        is_out[m->outputs[i]] = 1;
    for (uint32_t t = 0; t < nt; t++) {
        needs[t] = m->is_leaf[t] && m->wants_grad[t];
        treach[t] = is_out[t];
    }
    for (int changed = 1; changed;) {
        changed = 0;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t k = m->file_order[i];
            int any_in = 0, any_out = 0;
            for (uint32_t j = 0; j < m->n_in[k]; j++)
                any_in |= needs[m->in[k][j]];
            for (uint32_t j = 0; j < m->n_out[k]; j++)
                any_out |= treach[m->out[k][j]];
            for (uint32_t j = 0; j < m->n_out[k]; j++)
                if (any_in && !needs[m->out[k][j]])
                    needs[m->out[k][j]] = changed = 1;
            for (uint32_t j = 0; j < m->n_in[k]; j++)
                if (any_out && !treach[m->in[k][j]])
                    treach[m->in[k][j]] = changed = 1;
        }
    }
    int flows[RG_T], has_bwd[RG_OPS];
    uint32_t n_bwd = 0;
    for (uint32_t t = 0; t < nt; t++) {
        flows[t] = needs[t] && treach[t];
        ck_assert_int_eq(a->grad_flows[T[t]], flows[t]);
    }
    for (uint32_t k = 0; k < n; k++) {
        has_bwd[k] = 0;
        for (uint32_t j = 0; j < m->n_out[k]; j++)
            has_bwd[k] |= flows[m->out[k][j]];
        n_bwd += (uint32_t)has_bwd[k];
    }
    ck_assert_uint_eq(a->n_bwd, n_bwd);
    ck_assert_uint_eq(a->n_steps, n + n_bwd + 1);
    /* Backward steps: exactly the ops with a gradient flowing out, in
     * reverse forward order, numbered n .. n+n_bwd-1. */
    uint32_t bwd[RG_OPS];
    for (uint32_t k = 0; k < n; k++) {
        bwd[k] = a->bwd_step[K[k]];
        ck_assert_msg((bwd[k] != NONE) == has_bwd[k], "seed %llu: op %s backward step %u, expected %s",
                      (unsigned long long)seed, m->oid[k], bwd[k], has_bwd[k] ? "one" : "none");
        if (!has_bwd[k])
            continue;
        ck_assert_uint_ge(bwd[k], n);
        ck_assert_uint_lt(bwd[k], n + n_bwd);
        uint32_t later = 0; /* ops with a backward step that run later in forward */
        for (uint32_t k2 = 0; k2 < n; k2++)
            later += has_bwd[k2] && pos[k2] > pos[k];
        ck_assert_uint_eq(bwd[k], n + later);
    }
    const uint32_t last_fwd = n - 1, opt = n + n_bwd;

    /* Expected lifetimes by full scans. */
    uint32_t e_lfu[RG_T], e_lbu[RG_T], e_own[RG_T];
    for (uint32_t t = 0; t < nt; t++) {
        e_lfu[t] = e_lbu[t] = NONE;
        for (uint32_t k = 0; k < n; k++) {
            if (contains(m->in[k], m->n_in[k], t))
                e_lfu[t] = max_step(e_lfu[t], pos[k]);
            if (has_bwd[k] && contains(m->save[k], m->n_save[k], t))
                e_lbu[t] = max_step(e_lbu[t], bwd[k]);
        }
        if (m->is_leaf[t])
            e_own[t] = NONE;
        else if (e_lbu[t] != NONE)
            e_own[t] = e_lbu[t];
        else if (is_out[t])
            e_own[t] = last_fwd;
        else if (e_lfu[t] != NONE)
            e_own[t] = e_lfu[t];
        else
            e_own[t] = pos[m->producer[t]];
    }
    for (uint32_t t = 0; t < nt; t++) {
        const remat_lifetime *L = &a->life[T[t]];
        const remat_tensor *gt = &g->tensors[T[t]];
        uint32_t root = model_root(m, t);
        ck_assert_uint_eq(gt->storage, T[root]);
        ck_assert_uint_eq(gt->bytes, m->alias[t] != NONE ? 0 : m->bytes[t]);
        uint32_t e_free = e_own[t];
        if (root == t && !m->is_leaf[t])
            for (uint32_t v = 0; v < nt; v++)
                if (v != t && model_root(m, v) == t)
                    e_free = max_step(e_free, e_own[v]);
        uint32_t e_birth = m->is_leaf[t] ? NONE : pos[m->producer[t]];
        uint32_t e_gb = NONE, e_gf = NONE;
        if (flows[t]) {
            if (is_out[t] && n_bwd > 0)
                e_gb = n;
            for (uint32_t k = 0; k < n; k++)
                if (has_bwd[k] && contains(m->in[k], m->n_in[k], t))
                    e_gb = min_step(e_gb, bwd[k]);
            if (e_gb != NONE)
                e_gf = m->is_leaf[t] ? opt : bwd[m->producer[t]];
        }
        ck_assert_msg(L->birth == e_birth && L->last_fwd_use == e_lfu[t] && L->last_bwd_use == e_lbu[t] &&
                          L->free == e_free && L->grad_birth == e_gb && L->grad_free == e_gf,
                      "seed %llu: %s: got (%u %u %u %u | %u %u), expected (%u %u %u %u | %u %u)",
                      (unsigned long long)seed, m->tid[t], L->birth, L->last_fwd_use, L->last_bwd_use, L->free,
                      L->grad_birth, L->grad_free, e_birth, e_lfu[t], e_lbu[t], e_free, e_gb, e_gf);

        /* The invariants DESIGN states, checked directly as well. */
        if (!m->is_leaf[t]) {
            ck_assert_uint_le(L->birth, L->free);
            if (L->last_fwd_use != NONE) {
                ck_assert_uint_le(L->birth, L->last_fwd_use);
                ck_assert_uint_le(L->last_fwd_use, L->free);
            }
            if (L->last_bwd_use != NONE)
                ck_assert_uint_le(L->last_bwd_use, L->free);
            if (is_out[t])
                ck_assert_uint_ge(a->life[T[root]].free, last_fwd);
        } else {
            ck_assert_uint_eq(L->birth, NONE);
            ck_assert_uint_eq(L->free, NONE);
        }
        ck_assert_int_eq(L->grad_birth == NONE, L->grad_free == NONE);
        if (L->grad_birth != NONE) {
            ck_assert_uint_ge(L->grad_birth, n);
            ck_assert_uint_le(L->grad_birth, L->grad_free);
        }
    }
    /* Residency: what a forward step reads and what a backward step saves
     * is resident (through its storage root) when the step runs; the
     * gradients a backward step reads and writes exist then too. */
    for (uint32_t k = 0; k < n; k++) {
        for (uint32_t i = 0; i < m->n_in[k]; i++) {
            const remat_lifetime *R = &a->life[T[model_root(m, m->in[k][i])]];
            if (R->birth != NONE)
                ck_assert_msg(R->birth <= pos[k] && pos[k] <= R->free, "seed %llu: input %s of fwd:%s not resident",
                              (unsigned long long)seed, m->tid[m->in[k][i]], m->oid[k]);
        }
        if (!has_bwd[k])
            continue;
        for (uint32_t i = 0; i < m->n_save[k]; i++) {
            const remat_lifetime *R = &a->life[T[model_root(m, m->save[k][i])]];
            if (R->birth != NONE)
                ck_assert_msg(R->birth <= bwd[k] && bwd[k] <= R->free, "seed %llu: %s saved by bwd:%s not resident",
                              (unsigned long long)seed, m->tid[m->save[k][i]], m->oid[k]);
        }
        for (uint32_t j = 0; j < m->n_out[k]; j++) {
            const remat_lifetime *L = &a->life[T[m->out[k][j]]];
            if (flows[m->out[k][j]])
                ck_assert(L->grad_birth <= bwd[k] && bwd[k] <= L->grad_free);
        }
        for (uint32_t i = 0; i < m->n_in[k]; i++) {
            const remat_lifetime *L = &a->life[T[m->in[k][i]]];
            if (flows[m->in[k][i]])
                ck_assert(L->grad_birth <= bwd[k] && bwd[k] <= L->grad_free);
        }
    }
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    free(m);
}

START_TEST(analyze_should_satisfy_lifetime_invariants_on_random_dags)
{
    for (uint64_t seed = 1; seed <= 400; seed++)
        check_random_graph(seed * 7919);
}
END_TEST

START_TEST(analyze_should_generate_varied_random_dags)
{
    /* The invariant test is only as good as its graphs: check that the
     * generator really produces the features it is meant to cover. */
    int shuffled = 0, views = 0, multi = 0, view_outputs = 0, any_saves = 0, big = 0, no_bwd_ops = 0;
    for (uint64_t seed = 1; seed <= 400; seed++) {
        rgraph *m = calloc(1, sizeof *m);
        ck_assert_ptr_nonnull(m);
        rgraph_build(m, seed * 7919);
        shuffled += m->shuffled;
        big += m->n_ops >= 50;
        for (uint32_t k = 0; k < m->n_ops; k++) {
            multi += m->multi[k];
            views += !m->multi[k] && m->alias[m->out[k][0]] != NONE;
            for (uint32_t j = 0; m->multi[k] && j < m->n_out[k]; j++)
                view_outputs += m->alias[m->out[k][j]] != NONE;
            for (uint32_t i = 0; i < m->n_save[k]; i++)
                any_saves += m->producer[m->save[k][i]] != NONE && m->producer[m->save[k][i]] > k;
        }
        free(m);
    }
    /* Some ops must end up without a backward step (frozen-only inputs or
     * branches off the loss): check that on the analyzer's own output. */
    for (uint64_t seed = 1; seed <= 40 && !no_bwd_ops; seed++) {
        rgraph *m = calloc(1, sizeof *m);
        ck_assert_ptr_nonnull(m);
        rgraph_build(m, seed * 7919);
        char *json = rgraph_json(m);
        remat_graph *g = t_load(json);
        remat_analysis *a = NULL;
        ck_assert_int_eq(remat_analyze(g, &a, NULL), REMAT_OK);
        no_bwd_ops += a->n_bwd < g->n_ops;
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
        free(json);
        free(m);
    }
    ck_assert_int_gt(shuffled, 100);
    ck_assert_int_gt(views, 100);
    ck_assert_int_gt(multi, 100);
    ck_assert_int_gt(view_outputs, 20);
    ck_assert_int_gt(any_saves, 20);
    ck_assert_int_gt(big, 100);
    ck_assert_int_gt(no_bwd_ops, 0);
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
    tcase_add_test(inv, analyze_should_satisfy_lifetime_invariants_on_random_dags);
    tcase_add_test(inv, analyze_should_generate_varied_random_dags);
    tcase_set_timeout(inv, 60);
    suite_add_tcase(s, inv);
    return s;
}

/*
 * check_exec.c - the executor (replay) and the default policy, by hand.
 *
 * The executor is tested four ways, as the issue asks, one suite each:
 *   1. hand computations (here): store-all (and one recompute) replays of
 *      small graphs, every figure derived step by step in a comment from the
 *      accounting rules (graphs/README.md, DESIGN sections 2-5);
 *   2. mutation tests (check_exec_mutation.c): each way of breaking a valid
 *      schedule is rejected at the right instruction, for the right reason;
 *   3. an independent oracle (oracle.c, compared in check_exec_oracle.c): a
 *      deliberately naive simulator of the same rules, sharing no code with
 *      src/exec (it recomputes live bytes from scratch at every step),
 *      checked against remat_replay on hundreds of generated graphs, keep
 *      sets and random schedules;
 *   4. plan files and failure paths (check_exec_files.c): write, read back,
 *      refuse the wrong graph, name the path; overflow, a failing observer,
 *      out of memory.
 * What they share (schedules as text, replay asserted valid, the MLP2 and
 * CHAIN4 graphs) is in exec_util.c.
 *
 * The accounting rules the comments apply: leaves (inputs, params; frozen
 * params in "frozen") are resident throughout; FWD allocates its non-view
 * outputs in "activations", RECOMPUTE in "recomputed" (a storage that is
 * still live through a view allocates nothing); a step's high-water mark is
 * live before + what it allocates + its workspace; BWD allocates the
 * gradients (logical_bytes) of its differentiable inputs that do not exist
 * yet (params in "param_grads", everything else in "activation_grads"), the
 * loss's gradient seed appears at the first BWD, and after a BWD the
 * gradients of its outputs are freed; FREE of a view releases storage only
 * when the base and all its views are non-resident; FREE and OPT allocate
 * nothing (OPT: the optimizer workspace from the extras).
 */
#include "exec_util.h"
#include "remat/report.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- The policy, compared as text --------------------------------------- */

/* Canonical text of a schedule: the order of FREEs that follow one step
 * is left open by the rules (they all take effect before the next step), so
 * each run of consecutive FREEs is sorted by tensor id. */
static int cmp_str(const void *x, const void *y)
{
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

static const char *sched_canon(const remat_graph *g, const remat_schedule *s, char *buf, size_t cap)
{
    enum { MAX = 256 };
    char text[MAX][64];
    const char *order[MAX];
    ck_assert_uint_le(s->n, MAX);
    for (size_t i = 0; i < s->n; i++) {
        remat_instr_text(g, s->ins[i], text[i], sizeof text[i]);
        order[i] = text[i];
    }
    for (size_t i = 0; i < s->n;) {
        size_t j = i;
        while (j < s->n && s->ins[j].kind == REMAT_I_FREE)
            j++;
        if (j > i + 1)
            qsort(order + i, j - i, sizeof *order, cmp_str);
        i = j > i ? j : i + 1;
    }
    size_t len = 0;
    buf[0] = 0;
    for (size_t i = 0; i < s->n; i++) {
        int w = snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", order[i]);
        ck_assert(w > 0 && (size_t)w < cap - len);
        len += (size_t)w;
    }
    return buf;
}

/* Asserts that the default policy turns keep (NULL: store-all) into the
 * schedule `want`, up to the order of FREEs after one step, and leaves
 * `want` itself, as written, in s: the hand tables index that text. */
static void expect_policy(const remat_analysis *a, const uint8_t *keep, const char *want, remat_schedule *s)
{
    const remat_graph *g = a->g;
    remat_schedule got;
    build_keep(a, keep, &got);
    remat_schedule_init(s);
    sched_parse(g, want, s);
    char x[4096], y[4096];
    ck_assert_str_eq(sched_canon(g, &got, x, sizeof x), sched_canon(g, s, y, sizeof y));
    remat_schedule_destroy(&got);
}

/* ---- Hand computations -------------------------------------------------- */

/* MLP2 and CHAIN4, whose figures are derived below, are defined in
 * exec_util.c: the mutation and plan-file suites replay them too. */

START_TEST(exec_should_replay_mlp2_store_all_as_computed_by_hand)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(MLP2, &g);
    remat_schedule s;
    /* Lifetimes (check_analyze): h1 dies at fwd:a1 (relu saves its output),
     * h2 at fwd:loss, the loss at the end of forward, v1 after bwd:h2 (its
     * last saver), a1 after bwd:a1. Saves: h1 [x w1], a1 [a1], v1 [a1]
     * (default: its input), h2 [v1 w2], loss []. */
    expect_policy(a, NULL, MLP2_STORE_ALL, &s);
    remat_replay_result r;
    replay_valid(a, &s, NULL, &r);
    /* Leaves: x 4096 (inputs) + w1 65536 (params) + w2 65536 (frozen) =
     * 135168, resident throughout. Every op feeds the loss and depends on
     * w1, so all five have a BWD; x and w2 get no gradient.
     *
     *  #  instruction  allocates                       high-water  live after
     *  0  FWD h1       +4096 h1                        139264      139264
     *  1  FWD a1       +4096 a1                        143360      143360
     *  2  FREE h1      -                               143360      139264
     *  3  FWD v1       +0 (a view of a1)               139264      139264
     *  4  FWD h2       +4096 h2                        143360      143360
     *  5  FWD loss     +4 loss                         143364      143364
     *  6  FREE h2      -                               143364      139268
     *  7  FREE loss    -                               139268      139264
     *  8  BWD loss     +4 seed dloss, +4096 dh2        143364      143360 (dloss freed)
     *  9  BWD h2       +4096 dv1 (logical size of v1)  147456      143360 (dh2 freed)
     * 10  FREE v1      - (a1 still resident: storage stays)  143360  143360
     * 11  BWD v1       +4096 da1                       147456      143360 (dv1 freed)
     * 12  BWD a1       +4096 dh1                       147456      143360 (da1 freed)
     * 13  FREE a1      -                               143360      139264
     * 14  BWD h1       +65536 dw1 (param_grads)        204800      200704 (dh1 freed)
     * 15  OPT          -                               200704
     *
     * Peak 204800 at 14 (bwd:h1): params 65536 + frozen 65536 + inputs 4096
     * + param_grads 65536 + activation_grads 4096 (dh1, freed after). */
    ck_assert_uint_eq(r.peak_bytes, 204800);
    ck_assert_uint_eq(r.peak_index, 14);
    uint64_t want[REMAT_CAT_COUNT] = {0};
    want[REMAT_CAT_PARAMS] = 65536;
    want[REMAT_CAT_FROZEN] = 65536;
    want[REMAT_CAT_INPUTS] = 4096;
    want[REMAT_CAT_PARAM_GRADS] = 65536;
    want[REMAT_CAT_ACTIVATION_GRADS] = 4096;
    assert_categories(r.peak_by_category, want);
    /* Each category's own maximum: activations 8196 at 5 (a1 h2 loss),
     * activation_grads 8192 at 9, 11 and 12 (two gradients at once). */
    want[REMAT_CAT_ACTIVATIONS] = 8196;
    want[REMAT_CAT_ACTIVATION_GRADS] = 8192;
    assert_categories(r.category_peak, want);
    ck_assert_uint_eq(r.sum_of_category_peaks, 3 * 65536 + 4096 + 8196 + 8192); /* 217092 */
    /* Activation categories per step: 0: 4096; 1, 2: 8192; 4: 8192; 5, 6:
     * 8196; 8: a1 4096 + 4 + 4096 = 8196; 9: a1 + dh2 + dv1 = 12288 (first);
     * 11, 12: 12288; 14: dh1 4096. */
    ck_assert_uint_eq(r.activation_peak, 12288);
    ck_assert_uint_eq(r.activation_peak_index, 9);
    /* FLOPs: forward 131072 + 1024 + 0 + 131072 + 1024 = 264192; backward
     * defaults to twice that; nothing recomputed. */
    ck_assert_uint_eq(r.flops_forward, 264192);
    ck_assert_uint_eq(r.flops_backward, 528384);
    ck_assert_uint_eq(r.flops_recompute, 0);
    ck_assert_uint_eq(r.n_instructions, 16);
    for (uint32_t k = 0; k < g->n_ops; k++)
        ck_assert_uint_eq(r.recompute_counts[k], 0);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(exec_should_add_ledger_extras_and_optimizer_workspace)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(MLP2, &g);
    remat_schedule s;
    expect_policy(a, NULL, MLP2_STORE_ALL, &s);
    /* Extras are resident throughout in their own categories (frozen copies
     * join "frozen"); the optimizer workspace exists only during OPT. The
     * step-14 mark becomes 204800 + 1000 + 2000 + 300 + 40 = 208140; OPT
     * becomes 200704 + 3340 + 5000 = 209044, the new peak. */
    remat_exec_extras x = {.optimizer_state = 1000, .master_weights = 2000, .frozen_copies = 300,
                           .comm_buffers = 40, .optimizer_workspace = 5000};
    remat_replay_result r;
    replay_valid(a, &s, &x, &r);
    ck_assert_uint_eq(r.peak_bytes, 209044);
    ck_assert_uint_eq(r.peak_index, 15);
    char step[64];
    ck_assert_str_eq(remat_report_step_name(g, &s, r.peak_index, step, sizeof step), "optimizer");
    uint64_t want[REMAT_CAT_COUNT] = {0};
    want[REMAT_CAT_PARAMS] = 65536;
    want[REMAT_CAT_FROZEN] = 65536 + 300;
    want[REMAT_CAT_INPUTS] = 4096;
    want[REMAT_CAT_PARAM_GRADS] = 65536;
    want[REMAT_CAT_OPTIMIZER_STATE] = 1000;
    want[REMAT_CAT_MASTER_WEIGHTS] = 2000;
    want[REMAT_CAT_COMM_BUFFERS] = 40;
    want[REMAT_CAT_WORKSPACE] = 5000;
    assert_categories(r.peak_by_category, want);
    /* The optimizer workspace counts as workspace, an activation category,
     * but 5000 < 12288: bwd:h2 keeps the activation peak. */
    ck_assert_uint_eq(r.activation_peak, 12288);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(exec_should_replay_a_chain_store_all_as_computed_by_hand)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(CHAIN4, &g);
    remat_schedule s;
    /* Steps: fwd a b c loss = 0..3, bwd loss c b a = 4..7. Saves: a [x w],
     * b [b], c [b] (default), loss []. So a dies at fwd:b, b after bwd:b,
     * c at fwd:loss, the loss at the end of forward. */
    expect_policy(a, NULL, "FWD a, FWD b, FREE a, FWD c, FWD loss, FREE c, FREE loss, BWD loss, BWD c, BWD b, FREE b, "
                     "BWD a, OPT", &s);
    remat_replay_result r;
    replay_valid(a, &s, NULL, &r);
    /* Leaves x 1000 + w 200 = 1200.
     *  #  instruction  allocates             high-water  live after
     *  0  FWD a        +400                  1600        1600
     *  1  FWD b        +300                  1900        1900
     *  2  FREE a                             1900        1500
     *  3  FWD c        +500                  2000        2000
     *  4  FWD loss     +8                    2008        2008
     *  5  FREE c                             2008        1508
     *  6  FREE loss                          1508        1500
     *  7  BWD loss     +8 seed, +500 dc      2008        2000
     *  8  BWD c        +300 db               2300        1800
     *  9  BWD b        +400 da               2200        1900
     * 10  FREE b                             1900        1600
     * 11  BWD a        +200 dw               1800        1400
     * 12  OPT                                1400
     * Peak 2300 at 8 (bwd:c): inputs 1000, params 200, activations 300 (b),
     * activation_grads 800 (dc 500 + db 300). */
    ck_assert_uint_eq(r.peak_bytes, 2300);
    ck_assert_uint_eq(r.peak_index, 8);
    uint64_t want[REMAT_CAT_COUNT] = {0};
    want[REMAT_CAT_INPUTS] = 1000;
    want[REMAT_CAT_PARAMS] = 200;
    want[REMAT_CAT_ACTIVATIONS] = 300;
    want[REMAT_CAT_ACTIVATION_GRADS] = 800;
    assert_categories(r.peak_by_category, want);
    /* Activation categories: 808 at 4 and 7, 1100 at 8 (first max). */
    ck_assert_uint_eq(r.activation_peak, 1100);
    ck_assert_uint_eq(r.activation_peak_index, 8);
    /* Own maxima: activations 808 (b c loss at 4), param_grads 200. */
    want[REMAT_CAT_ACTIVATIONS] = 808;
    want[REMAT_CAT_PARAM_GRADS] = 200;
    assert_categories(r.category_peak, want);
    ck_assert_uint_eq(r.sum_of_category_peaks, 1000 + 200 + 808 + 800 + 200);
    ck_assert_uint_eq(r.flops_forward, 135);
    ck_assert_uint_eq(r.flops_backward, 270);
    ck_assert_uint_eq(r.flops_recompute, 0);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(exec_should_replay_a_chain_keeping_nothing_as_computed_by_hand)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(CHAIN4, &g);
    uint8_t keep[8] = {0};
    remat_schedule s;
    /* Nothing kept: each activation is freed after its last forward use
     * (the loss at the end of forward). bwd:c saves b, which is gone: the
     * policy rebuilds it from resident ancestors in forward order, a then
     * b, frees the stepping stone a after its last read (by b), keeps b
     * for bwd:b (which saves it too) and frees it after. */
    expect_policy(a, keep, "FWD a, FWD b, FREE a, FWD c, FREE b, FWD loss, FREE c, FREE loss, BWD loss, "
                     "RECOMPUTE a, RECOMPUTE b, FREE a, BWD c, BWD b, FREE b, BWD a, OPT", &s);
    remat_replay_result r;
    replay_valid(a, &s, NULL, &r);
    /*  #  instruction    allocates                high-water  live after
     *  0  FWD a          +400                     1600        1600
     *  1  FWD b          +300                     1900        1900
     *  2  FREE a                                  1900        1500
     *  3  FWD c          +500                     2000        2000
     *  4  FREE b                                  2000        1700
     *  5  FWD loss       +8                       1708        1708
     *  6  FREE c                                  1708        1208
     *  7  FREE loss                               1208        1200
     *  8  BWD loss       +8 seed, +500 dc         1708        1700
     *  9  RECOMPUTE a    +400 (recomputed)        2100        2100
     * 10  RECOMPUTE b    +300 (recomputed)        2400        2400
     * 11  FREE a                                  2400        2000
     * 12  BWD c          +300 db                  2300        1800
     * 13  BWD b          +400 da                  2200        1900
     * 14  FREE b                                  1900        1600
     * 15  BWD a          +200 dw                  1800        1400
     * 16  OPT                                     1400
     * Peak 2400 at 10 (recompute:b): worse than store-all's 2300, because
     * the stepping stone a (400) is live again beside dc. Extra FLOPs:
     * 100 + 10 = 110. */
    ck_assert_uint_eq(r.peak_bytes, 2400);
    ck_assert_uint_eq(r.peak_index, 10);
    char step[64];
    ck_assert_str_eq(remat_report_step_name(g, &s, r.peak_index, step, sizeof step), "recompute:b");
    uint64_t want[REMAT_CAT_COUNT] = {0};
    want[REMAT_CAT_INPUTS] = 1000;
    want[REMAT_CAT_PARAMS] = 200;
    want[REMAT_CAT_RECOMPUTED] = 700;
    want[REMAT_CAT_ACTIVATION_GRADS] = 500;
    assert_categories(r.peak_by_category, want);
    ck_assert_uint_eq(r.activation_peak, 1200);
    ck_assert_uint_eq(r.activation_peak_index, 10);
    ck_assert_uint_eq(r.flops_forward, 135);
    ck_assert_uint_eq(r.flops_backward, 270);
    ck_assert_uint_eq(r.flops_recompute, 110);
    ck_assert_uint_eq(r.recompute_counts[t_op(g, "a")], 1);
    ck_assert_uint_eq(r.recompute_counts[t_op(g, "b")], 1);
    ck_assert_uint_eq(r.recompute_counts[t_op(g, "c")], 0);
    ck_assert_uint_eq(r.recompute_counts[t_op(g, "loss")], 0);
    /* The report names the extra work. */
    remat_err err;
    remat_err_init(&err);
    size_t len;
    char *json = remat_report_replay(a, &s, &r, NULL, REMAT_REPORT_JSON, &len, &err);
    ck_assert_ptr_nonnull(json);
    ck_assert_ptr_nonnull(strstr(json, "\"peak_step\": \"recompute:b\""));
    ck_assert_ptr_nonnull(strstr(json, "\"recompute\": 110"));
    ck_assert_ptr_nonnull(strstr(json, "\"recompute_counts\": {\"a\": 1, \"b\": 1}"));
    remat_free(json);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* A multi-output op (s -> p, q), a view of p, an input that wants a
 * gradient. */
static const char *MULTI =
    "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"multi\","
    "\"inputs\":[{\"id\":\"x\",\"bytes\":100,\"requires_grad\":true}],\"params\":[{\"id\":\"w\",\"bytes\":50}],"
    "\"ops\":["
    "{\"id\":\"s\",\"op\":\"split\",\"inputs\":[\"x\",\"w\"],\"outputs\":[{\"id\":\"p\",\"bytes\":600},"
    "{\"id\":\"q\",\"bytes\":400}],\"flops\":60,\"saves\":[\"w\"]},"
    "{\"id\":\"v\",\"op\":\"reshape\",\"inputs\":[\"p\"],\"alias_of\":\"p\",\"saves\":[]},"
    "{\"id\":\"m\",\"op\":\"mul\",\"inputs\":[\"v\",\"q\"],\"bytes\":200,\"flops\":20},"
    "{\"id\":\"loss\",\"op\":\"sum\",\"inputs\":[\"m\"],\"bytes\":4,\"flops\":2,\"saves\":[]}],"
    "\"outputs\":[\"loss\"]}";

typedef struct {
    size_t release_index[16]; /* storage tensor -> instruction that released it */
} release_log;

static int log_free(void *ctx, size_t index, uint32_t storage, int grad, remat_category cat, uint64_t bytes)
{
    (void)cat;
    (void)bytes;
    release_log *L = ctx;
    if (!grad && storage < 16)
        L->release_index[storage] = index;
    return 0;
}

START_TEST(exec_should_replay_multi_output_op_and_view_as_computed_by_hand)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(MULTI, &g);
    remat_schedule s;
    /* Steps: fwd s v m loss = 0..3, bwd loss m v s = 4..7. p is read only
     * by the view op and saved by nobody: the policy frees the tensor p at
     * fwd:v, but its storage lives on in v, which bwd:m saves. */
    expect_policy(a, NULL, "FWD s, FWD v, FREE p, FWD m, FWD loss, FREE m, FREE loss, BWD loss, BWD m, FREE v, FREE q, "
                     "BWD v, BWD s, OPT", &s);
    remat_replay_observer obs = {0};
    release_log L;
    memset(&L, 0xff, sizeof L);
    obs.ctx = &L;
    obs.on_free = log_free;
    remat_replay_result r;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_replay(a, &s, NULL, &obs, &r, &err), REMAT_OK);
    ck_assert_msg(r.valid, "%s", err.msg);
    /* Leaves x 100 + w 50 = 150.
     *  #  instruction  allocates                          high-water  live after
     *  0  FWD s        +600 p, +400 q                     1150        1150
     *  1  FWD v        +0 (view of p)                     1150        1150
     *  2  FREE p       - (v still holds the storage)      1150        1150
     *  3  FWD m        +200                               1350        1350
     *  4  FWD loss     +4                                 1354        1354
     *  5  FREE m                                          1354        1154
     *  6  FREE loss                                       1154        1150
     *  7  BWD loss     +4 seed, +200 dm                   1354        1350
     *  8  BWD m        +600 dv (logical = p's), +400 dq   2350        2150
     *  9  FREE v       -600: p and v both gone now         2150        1550
     * 10  FREE q                                          1550        1150
     * 11  BWD v        +600 dp                            1750        1150 (dv freed)
     * 12  BWD s        +100 dx, +50 dw                    1300        300 (dp dq freed;
     *                                                                 dx stays: an input's
     *                                                                 gradient lives to the end)
     * 13  OPT                                             300
     * Peak 2350 at 8 (bwd:m). */
    ck_assert_uint_eq(r.peak_bytes, 2350);
    ck_assert_uint_eq(r.peak_index, 8);
    uint64_t want[REMAT_CAT_COUNT] = {0};
    want[REMAT_CAT_INPUTS] = 100;
    want[REMAT_CAT_PARAMS] = 50;
    want[REMAT_CAT_ACTIVATIONS] = 1000;
    want[REMAT_CAT_ACTIVATION_GRADS] = 1200;
    assert_categories(r.peak_by_category, want);
    ck_assert_uint_eq(r.activation_peak, 2200);
    ck_assert_uint_eq(r.activation_peak_index, 8);
    /* The view op gives no flops: 0. Forward 60 + 0 + 20 + 2. */
    ck_assert_uint_eq(r.flops_forward, 82);
    ck_assert_uint_eq(r.flops_backward, 164);
    /* p's storage went at instruction 9 (FREE v), not at FREE p (2): the
     * analyzer's free step for p (extended by its view) is bwd:m. */
    ck_assert_uint_eq(L.release_index[t_tensor(g, "p")], 9);
    ck_assert_uint_eq(L.release_index[t_tensor(g, "q")], 10);
    ck_assert_uint_eq(a->life[t_tensor(g, "p")].free, t_bwd(a, "m"));
    /* After OPT: leaves 150 + dx 100 + dw 50. */
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* Workspace in both directions and a frozen param. */
static const char *WS =
    "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"ws\","
    "\"inputs\":[{\"id\":\"x\",\"bytes\":64}],"
    "\"params\":[{\"id\":\"w\",\"bytes\":32},{\"id\":\"f\",\"bytes\":16,\"frozen\":true}],"
    "\"ops\":["
    "{\"id\":\"h\",\"op\":\"conv\",\"inputs\":[\"x\",\"w\"],\"bytes\":128,\"flops\":10,\"workspace\":1000,"
    "\"bwd_workspace\":2000},"
    "{\"id\":\"gm\",\"op\":\"mul\",\"inputs\":[\"h\",\"f\"],\"bytes\":128,\"flops\":4,\"workspace\":50},"
    "{\"id\":\"loss\",\"op\":\"sum\",\"inputs\":[\"gm\"],\"bytes\":4,\"flops\":1,\"saves\":[]}],"
    "\"outputs\":[\"loss\"]}";

START_TEST(exec_should_count_workspace_and_frozen_params_by_hand)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(WS, &g);
    remat_schedule s;
    expect_policy(a, NULL, "FWD h, FWD gm, FWD loss, FREE gm, FREE loss, BWD loss, BWD gm, FREE h, BWD h, OPT", &s);
    remat_replay_result r;
    replay_valid(a, &s, NULL, &r);
    /* Leaves x 64 (inputs) + w 32 (params) + f 16 (frozen) = 112. f gets no
     * gradient; gm's BWD writes only dh.
     *  #  instruction  allocates                   high-water  live after
     *  0  FWD h        +128, workspace 1000        1240        240
     *  1  FWD gm       +128, workspace 50          418         368
     *  2  FWD loss     +4                          372         372
     *  3  FREE gm                                  372         244
     *  4  FREE loss                                244         240
     *  5  BWD loss     +4 seed, +128 dgm           372         368
     *  6  BWD gm       +128 dh                     496         368
     *  7  FREE h                                   368         240
     *  8  BWD h        +32 dw, bwd_workspace 2000  2272        144
     *  9  OPT                                      144
     * Peak 2272 at 8 (bwd:h). */
    ck_assert_uint_eq(r.peak_bytes, 2272);
    ck_assert_uint_eq(r.peak_index, 8);
    uint64_t want[REMAT_CAT_COUNT] = {0};
    want[REMAT_CAT_INPUTS] = 64;
    want[REMAT_CAT_PARAMS] = 32;
    want[REMAT_CAT_FROZEN] = 16;
    want[REMAT_CAT_PARAM_GRADS] = 32;
    want[REMAT_CAT_ACTIVATION_GRADS] = 128;
    want[REMAT_CAT_WORKSPACE] = 2000;
    assert_categories(r.peak_by_category, want);
    /* Activation categories: 1128 at 0; 2128 at 8 (dh 128 + 2000). */
    ck_assert_uint_eq(r.activation_peak, 2128);
    ck_assert_uint_eq(r.activation_peak_index, 8);
    /* Own maxima: activations 260 at 2 (h gm loss), activation_grads 256
     * at 6 (dgm dh), workspace 2000. */
    want[REMAT_CAT_ACTIVATIONS] = 260;
    want[REMAT_CAT_ACTIVATION_GRADS] = 256;
    assert_categories(r.category_peak, want);
    ck_assert_uint_eq(r.sum_of_category_peaks, 64 + 32 + 16 + 32 + 260 + 256 + 2000);
    ck_assert_uint_eq(r.flops_forward, 15);
    ck_assert_uint_eq(r.flops_backward, 30);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* A base that is recomputed while a view of it still holds its storage:
 * the RECOMPUTE allocates nothing, because the bytes never left. */
static const char *VIEWBASE =
    "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"viewbase\","
    "\"inputs\":[{\"id\":\"x\",\"bytes\":100}],\"params\":[{\"id\":\"w\",\"bytes\":10}],"
    "\"ops\":["
    "{\"id\":\"b\",\"op\":\"matmul\",\"inputs\":[\"x\",\"w\"],\"bytes\":1000,\"flops\":50},"
    "{\"id\":\"v\",\"op\":\"view\",\"inputs\":[\"b\"],\"alias_of\":\"b\",\"saves\":[]},"
    "{\"id\":\"c\",\"op\":\"mul\",\"inputs\":[\"v\",\"b\"],\"bytes\":10,\"flops\":5},"
    "{\"id\":\"loss\",\"op\":\"sum\",\"inputs\":[\"c\"],\"bytes\":4,\"flops\":1,\"saves\":[]}],"
    "\"outputs\":[\"loss\"]}";

START_TEST(exec_should_not_count_a_recomputed_base_whose_view_holds_the_storage)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(VIEWBASE, &g);
    uint8_t keep[16] = {0};
    keep[t_tensor(g, "v")] = keep[t_tensor(g, "c")] = keep[t_tensor(g, "loss")] = 1;
    remat_schedule s;
    /* b is not kept: freed after its last forward use (fwd:c); v is kept
     * for bwd:c, so b's storage stays. bwd:c saves b too, so b is rebuilt
     * before it by recomputing op b. */
    expect_policy(a, keep, "FWD b, FWD v, FWD c, FREE b, FWD loss, FREE c, FREE loss, BWD loss, RECOMPUTE b, BWD c, "
                     "FREE v, FREE b, BWD v, BWD b, OPT", &s);
    remat_replay_result r;
    replay_valid(a, &s, NULL, &r);
    /* Leaves 110.
     *  #  instruction   allocates                     high-water  live after
     *  0  FWD b         +1000                         1110        1110
     *  1  FWD v         +0                            1110        1110
     *  2  FWD c         +10                           1120        1120
     *  3  FREE b        - (v holds the storage)       1120        1120
     *  4  FWD loss      +4                            1124        1124
     *  5  FREE c                                      1124        1114
     *  6  FREE loss                                   1114        1110
     *  7  BWD loss      +4 seed, +10 dc               1124        1120
     *  8  RECOMPUTE b   +0: the storage is live       1120        1120
     *  9  BWD c         +1000 dv, +1000 db            3120        3110
     * 10  FREE v                                      3110        3110
     * 11  FREE b        -1000                         3110        2110
     * 12  BWD v         +0 (db exists: accumulate)    2110        1110 (dv freed)
     * 13  BWD b         +10 dw                        1120        120 (db freed)
     * 14  OPT                                         120
     * Peak 3120 at 9; the rebuilt b was never a second 1000 bytes. */
    ck_assert_uint_eq(r.peak_bytes, 3120);
    ck_assert_uint_eq(r.peak_index, 9);
    ck_assert_uint_eq(r.category_peak[REMAT_CAT_RECOMPUTED], 0);
    ck_assert_uint_eq(r.category_peak[REMAT_CAT_ACTIVATIONS], 1014);
    ck_assert_uint_eq(r.flops_recompute, 50);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* torch.cat's backward (grad_views): each input's gradient is a slice of the
 * output's gradient, so it allocates nothing, and that gradient's storage
 * lives until the last slice is freed (graphs/README.md, "Gradient
 * views"). p1's bwd_workspace puts the peak where the held storage shows. */
static const char *CATVIEWS =
    "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"catviews\","
    "\"inputs\":[{\"id\":\"x\",\"bytes\":100}],\"params\":[{\"id\":\"w\",\"bytes\":10}],"
    "\"ops\":["
    "{\"id\":\"p1\",\"op\":\"conv\",\"inputs\":[\"x\",\"w\"],\"bytes\":300,\"flops\":10,\"bwd_workspace\":2000},"
    "{\"id\":\"p2\",\"op\":\"conv\",\"inputs\":[\"x\",\"w\"],\"bytes\":500,\"flops\":10},"
    "{\"id\":\"c\",\"op\":\"cat\",\"inputs\":[\"p1\",\"p2\"],\"bytes\":800,\"flops\":1,\"saves\":[],"
    "\"grad_views\":true},"
    "{\"id\":\"loss\",\"op\":\"sum\",\"inputs\":[\"c\"],\"bytes\":4,\"flops\":1,\"saves\":[]}],"
    "\"outputs\":[\"loss\"]}";

START_TEST(exec_should_hold_a_cat_gradient_until_its_last_slice_is_freed)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(CATVIEWS, &g);
    remat_schedule s;
    expect_policy(a, NULL, "FWD p1, FWD p2, FWD c, FREE p1, FREE p2, FWD loss, FREE c, FREE loss, BWD loss, BWD c, "
                     "BWD p2, BWD p1, OPT", &s);
    remat_replay_result r;
    replay_valid(a, &s, NULL, &r);
    /* Leaves x 100 + w 10 = 110.
     *  #  instruction  allocates                   high-water  live after
     *  0  FWD p1       +300                        410         410
     *  1  FWD p2       +500                        910         910
     *  2  FWD c        +800                        1710        1710
     *  3  FREE p1                                  1710        1410
     *  4  FREE p2                                  1410        910
     *  5  FWD loss     +4                          914         914
     *  6  FREE c                                   914         114
     *  7  FREE loss                                114         110
     *  8  BWD loss     +4 seed, +800 dc            914         910
     *  9  BWD c        +0: dp1, dp2 slice dc       910         910 (dc held)
     * 10  BWD p2       +10 dw                      920         920 (dp2 goes; dp1 holds dc)
     * 11  BWD p1       +0, bwd_workspace 2000      2920        120 (dp1 goes, and dc with it)
     * 12  OPT                                      120
     * Peak 2920 at 11. Were dp1 and dp2 their own (no grad_views), BWD c
     * would reach 1710 and free dc, BWD p2 free dp2: BWD p1 at 2420. */
    ck_assert_uint_eq(r.peak_bytes, 2920);
    ck_assert_uint_eq(r.peak_index, 11);
    ck_assert_uint_eq(r.peak_by_category[REMAT_CAT_ACTIVATION_GRADS], 800);
    ck_assert_uint_eq(r.category_peak[REMAT_CAT_ACTIVATION_GRADS], 804);
    ck_assert_uint_eq(r.activation_peak, 2800);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    /* The same graph without the field: each input's gradient its own. */
    static char plain[2048];
    ck_assert_uint_lt(strlen(CATVIEWS), sizeof plain);
    strcpy(plain, CATVIEWS);
    char *at = strstr(plain, ",\"grad_views\":true");
    ck_assert_ptr_nonnull(at);
    memmove(at, at + strlen(",\"grad_views\":true"), strlen(at + strlen(",\"grad_views\":true")) + 1);
    a = t_analyze(plain, &g);
    expect_policy(a, NULL, "FWD p1, FWD p2, FWD c, FREE p1, FREE p2, FWD loss, FREE c, FREE loss, BWD loss, BWD c, "
                     "BWD p2, BWD p1, OPT", &s);
    replay_valid(a, &s, NULL, &r);
    ck_assert_uint_eq(r.peak_bytes, 2420);
    ck_assert_uint_eq(r.category_peak[REMAT_CAT_ACTIVATION_GRADS], 1600);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* A write into a slice after cat's backward (q also reads p1, and its
 * backward runs after cat's) is PyTorch's out-of-place accumulation: dp1
 * gets its own 300 bytes and lets go of the slice; dc stays while dp2's
 * slice holds it. */
static const char *CATWRITE =
    "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"catwrite\","
    "\"inputs\":[{\"id\":\"x\",\"bytes\":100}],\"params\":[{\"id\":\"w\",\"bytes\":10}],"
    "\"ops\":["
    "{\"id\":\"p1\",\"op\":\"conv\",\"inputs\":[\"x\",\"w\"],\"bytes\":300,\"flops\":10},"
    "{\"id\":\"p2\",\"op\":\"conv\",\"inputs\":[\"x\",\"w\"],\"bytes\":500,\"flops\":10,\"bwd_workspace\":5000},"
    "{\"id\":\"q\",\"op\":\"relu\",\"inputs\":[\"p1\"],\"bytes\":300,\"flops\":1,\"saves\":[\"q\"]},"
    "{\"id\":\"c\",\"op\":\"cat\",\"inputs\":[\"p1\",\"p2\"],\"bytes\":800,\"flops\":1,\"saves\":[],"
    "\"grad_views\":true},"
    "{\"id\":\"loss\",\"op\":\"add\",\"inputs\":[\"c\",\"q\"],\"bytes\":4,\"flops\":1,\"saves\":[]}],"
    "\"outputs\":[\"loss\"]}";

START_TEST(exec_should_give_a_slice_its_own_gradient_when_written_again)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(CATWRITE, &g);
    remat_schedule s;
    expect_policy(a, NULL, "FWD p1, FWD p2, FWD q, FWD c, FREE p1, FREE p2, FWD loss, FREE c, FREE loss, BWD loss, "
                     "BWD c, BWD q, FREE q, BWD p2, BWD p1, OPT", &s);
    remat_replay_result r;
    replay_valid(a, &s, NULL, &r);
    /* Leaves 110.
     *  #  instruction  allocates                    high-water  live after
     *  0  FWD p1       +300                         410         410
     *  1  FWD p2       +500                         910         910
     *  2  FWD q        +300                         1210        1210
     *  3  FWD c        +800                         2010        2010
     *  4  FREE p1                                   2010        1710
     *  5  FREE p2                                   1710        1210
     *  6  FWD loss     +4                           1214        1214
     *  7  FREE c                                    1214        414
     *  8  FREE loss                                 414         410
     *  9  BWD loss     +4 seed, +800 dc, +300 dq    1514        1510
     * 10  BWD c        +0: dp1, dp2 slice dc        1510        1510
     * 11  BWD q        +300: dp1 its own            1810        1510 (dq goes; dp2 holds dc)
     * 12  FREE q                                    1510        1210
     * 13  BWD p2       +10 dw, bwd_workspace 5000   6220        420 (dp2 goes, and dc with it)
     * 14  BWD p1       +0                           420         120
     * 15  OPT                                       120
     * Activation grads at most dc + dp1 + dq = 1400 (at 11). */
    ck_assert_uint_eq(r.peak_bytes, 6220);
    ck_assert_uint_eq(r.peak_index, 13);
    ck_assert_uint_eq(r.peak_by_category[REMAT_CAT_ACTIVATION_GRADS], 1100);
    ck_assert_uint_eq(r.category_peak[REMAT_CAT_ACTIVATION_GRADS], 1400);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

Suite *exec_suite(void)
{
    Suite *s = suite_create("exec");
    TCase *hand = tcase_create("hand");
    tcase_add_test(hand, exec_should_replay_mlp2_store_all_as_computed_by_hand);
    tcase_add_test(hand, exec_should_add_ledger_extras_and_optimizer_workspace);
    tcase_add_test(hand, exec_should_replay_a_chain_store_all_as_computed_by_hand);
    tcase_add_test(hand, exec_should_replay_a_chain_keeping_nothing_as_computed_by_hand);
    tcase_add_test(hand, exec_should_replay_multi_output_op_and_view_as_computed_by_hand);
    tcase_add_test(hand, exec_should_count_workspace_and_frozen_params_by_hand);
    tcase_add_test(hand, exec_should_not_count_a_recomputed_base_whose_view_holds_the_storage);
    tcase_add_test(hand, exec_should_hold_a_cat_gradient_until_its_last_slice_is_freed);
    tcase_add_test(hand, exec_should_give_a_slice_its_own_gradient_when_written_again);
    suite_add_tcase(s, hand);
    return s;
}

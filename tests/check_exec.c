/*
 * check_exec.c - the executor (replay), the default policy and plan files.
 *
 * Four kinds of evidence, as the issue asks:
 *   1. hand computations: store-all (and one recompute) replays of small
 *      graphs, every figure derived step by step in a comment from the
 *      accounting rules (graphs/README.md, DESIGN sections 2-5);
 *   2. mutation tests: each way of breaking a valid schedule is rejected at
 *      the right instruction, for the right reason;
 *   3. an independent oracle: a deliberately naive simulator of the same
 *      rules, written here and sharing no code with src/exec (it recomputes
 *      live bytes from scratch at every step), checked against remat_replay
 *      on hundreds of generated graphs and keep sets;
 *   4. plan files: write, read back, refuse the wrong graph, name the path.
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
#include "test_util.h"
#include "remat/report.h"
#include "util/util_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- Schedules as text -------------------------------------------------- */

static remat_instr instr_of(const remat_graph *g, const char *text)
{
    static const struct {
        const char *name;
        remat_instr_kind kind;
        int op;
    } kinds[] = {{"FWD", REMAT_I_FWD, 1},
                 {"RECOMPUTE", REMAT_I_RECOMPUTE, 1},
                 {"BWD", REMAT_I_BWD, 1},
                 {"FREE", REMAT_I_FREE, 0},
                 {"OPT", REMAT_I_OPT, -1}};
    char kind[16];
    const char *sp = strchr(text, ' ');
    size_t kl = sp ? (size_t)(sp - text) : strlen(text);
    ck_assert_msg(kl < sizeof kind, "bad instruction '%s'", text);
    memcpy(kind, text, kl);
    kind[kl] = 0;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        if (strcmp(kinds[i].name, kind) != 0)
            continue;
        remat_instr in = {(uint32_t)kinds[i].kind, 0};
        if (kinds[i].op > 0)
            in.arg = t_op(g, sp + 1);
        else if (kinds[i].op == 0)
            in.arg = t_tensor(g, sp + 1);
        return in;
    }
    ck_abort_msg("bad instruction '%s'", text);
    return (remat_instr){0, 0};
}

/* "FWD a, FREE b, OPT" -> s (appended). */
static void sched_parse(const remat_graph *g, const char *text, remat_schedule *s)
{
    char one[128];
    const char *p = text;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        ck_assert(n < sizeof one);
        memcpy(one, p, n);
        one[n] = 0;
        remat_instr in = instr_of(g, one);
        ck_assert_int_eq(remat_schedule_push(s, (remat_instr_kind)in.kind, in.arg), REMAT_OK);
        p += n;
        while (*p == ',' || *p == ' ')
            p++;
    }
}

static const char *sched_str(const remat_graph *g, const remat_schedule *s, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = 0;
    for (size_t i = 0; i < s->n; i++) {
        char one[128];
        remat_instr_text(g, s->ins[i], one, sizeof one);
        int w = snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", one);
        ck_assert(w > 0 && (size_t)w < cap - len);
        len += (size_t)w;
    }
    return buf;
}

static void sched_copy(remat_schedule *dst, const remat_schedule *src)
{
    remat_schedule_init(dst);
    for (size_t i = 0; i < src->n; i++)
        ck_assert_int_eq(remat_schedule_push(dst, (remat_instr_kind)src->ins[i].kind, src->ins[i].arg), REMAT_OK);
}

static void sched_del(remat_schedule *s, size_t i)
{
    ck_assert(i < s->n);
    memmove(s->ins + i, s->ins + i + 1, (s->n - i - 1) * sizeof *s->ins);
    s->n--;
}

static void sched_ins(remat_schedule *s, size_t i, remat_instr in)
{
    ck_assert(i <= s->n);
    ck_assert_int_eq(remat_schedule_push(s, REMAT_I_OPT, 0), REMAT_OK);
    memmove(s->ins + i + 1, s->ins + i, (s->n - 1 - i) * sizeof *s->ins);
    s->ins[i] = in;
}

/* Index of the instruction with this text; asserts it occurs exactly once. */
static size_t sched_find(const remat_graph *g, const remat_schedule *s, const char *text)
{
    remat_instr in = instr_of(g, text);
    size_t at = SIZE_MAX;
    for (size_t i = 0; i < s->n; i++)
        if (s->ins[i].kind == in.kind && (in.kind == REMAT_I_OPT || s->ins[i].arg == in.arg)) {
            ck_assert_msg(at == SIZE_MAX, "'%s' occurs twice", text);
            at = i;
        }
    ck_assert_msg(at != SIZE_MAX, "'%s' not in the schedule", text);
    return at;
}

/* ---- Replay helpers ----------------------------------------------------- */

static void build_keep(const remat_analysis *a, const uint8_t *keep, remat_schedule *s)
{
    remat_err err;
    remat_err_init(&err);
    remat_schedule_init(s);
    remat_status st = keep ? remat_schedule_from_keep(a, keep, s, &err) : remat_schedule_store_all(a, s, &err);
    ck_assert_msg(st == REMAT_OK, "policy failed: %s", err.msg);
}

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

static void replay_valid(const remat_analysis *a, const remat_schedule *s, const remat_exec_extras *x,
                         remat_replay_result *r)
{
    remat_err err;
    remat_err_init(&err);
    remat_status st = remat_replay(a, s, x, NULL, r, &err);
    ck_assert_msg(st == REMAT_OK, "replay failed: %s", err.msg);
    ck_assert_msg(r->valid, "schedule rejected: %s", err.msg);
}

/* Replays s and asserts it is rejected at fail_index with a message that
 * contains both substrings (sub2 may be NULL). */
static void expect_invalid(const remat_analysis *a, const remat_schedule *s, size_t fail_index, const char *sub1,
                           const char *sub2)
{
    remat_err err;
    remat_err_init(&err);
    remat_replay_result r;
    remat_status st = remat_replay(a, s, NULL, NULL, &r, &err);
    ck_assert_msg(st == REMAT_OK, "replay failed outright: %s", err.msg);
    ck_assert_msg(!r.valid, "broken schedule accepted (expected failure at %zu: %s)", fail_index, sub1);
    ck_assert_int_eq(err.code, REMAT_ESCHEDULE);
    ck_assert_msg(r.fail_index == fail_index, "failed at %zu, expected %zu: %s", r.fail_index, fail_index, err.msg);
    ck_assert_msg_contains(&err, sub1);
    if (sub2)
        ck_assert_msg_contains(&err, sub2);
    remat_replay_result_destroy(&r);
}

static void assert_categories(const uint64_t *got, const uint64_t *want)
{
    for (int c = 0; c < REMAT_CAT_COUNT; c++)
        ck_assert_msg(got[c] == want[c], "category %s: %llu, expected %llu", remat_category_name((remat_category)c),
                      (unsigned long long)got[c], (unsigned long long)want[c]);
}

/* ---- Hand computations -------------------------------------------------- */

/* graphs/mlp2.json: a view (v1 of a1), relu saving its output, a sum saving
 * nothing, a frozen param (w2). */
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

static const char *MLP2_STORE_ALL = "FWD h1, FWD a1, FREE h1, FWD v1, FWD h2, FWD loss, FREE h2, FREE loss, "
                                    "BWD loss, BWD h2, FREE v1, BWD v1, BWD a1, FREE a1, BWD h1, OPT";

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

/* A 4-op chain with distinct sizes so every figure has one explanation. */
static const char *CHAIN4 =
    "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"chain4\","
    "\"inputs\":[{\"id\":\"x\",\"bytes\":1000}],\"params\":[{\"id\":\"w\",\"bytes\":200}],"
    "\"ops\":["
    "{\"id\":\"a\",\"op\":\"matmul\",\"inputs\":[\"x\",\"w\"],\"bytes\":400,\"flops\":100},"
    "{\"id\":\"b\",\"op\":\"tanh\",\"inputs\":[\"a\"],\"bytes\":300,\"flops\":10,\"saves\":[\"b\"]},"
    "{\"id\":\"c\",\"op\":\"scale\",\"inputs\":[\"b\"],\"bytes\":500,\"flops\":20},"
    "{\"id\":\"loss\",\"op\":\"sum\",\"inputs\":[\"c\"],\"bytes\":8,\"flops\":5,\"saves\":[]}],"
    "\"outputs\":[\"loss\"]}";

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

/* ---- Mutation tests ----------------------------------------------------- */

/* mlp2's store-all schedule, by index:
 *  0 FWD h1   1 FWD a1   2 FREE h1   3 FWD v1   4 FWD h2   5 FWD loss
 *  6 FREE h2  7 FREE loss  8 BWD loss  9 BWD h2  10 FREE v1  11 BWD v1
 * 12 BWD a1  13 FREE a1  14 BWD h1  15 OPT
 * Mutations start from this text (not from the policy), after checking
 * that it replays valid. */
static remat_analysis *mlp2_schedule(remat_graph **g, remat_schedule *s)
{
    remat_analysis *a = t_analyze(MLP2, g);
    remat_schedule_init(s);
    sched_parse(*g, MLP2_STORE_ALL, s);
    remat_replay_result r;
    replay_valid(a, s, NULL, &r);
    ck_assert_uint_eq(r.peak_bytes, 204800);
    remat_replay_result_destroy(&r);
    return a;
}

/* Moves the instruction `what` so that it lands before the instruction
 * now at position `to`. */
static void sched_move(const remat_graph *g, remat_schedule *s, const char *what, size_t to)
{
    size_t from = sched_find(g, s, what);
    remat_instr in = s->ins[from];
    sched_del(s, from);
    sched_ins(s, to > from ? to - 1 : to, in);
}

/* Index of the n-th (0-based) occurrence of an instruction. */
static size_t sched_find_nth(const remat_graph *g, const remat_schedule *s, const char *text, int nth)
{
    remat_instr in = instr_of(g, text);
    for (size_t i = 0; i < s->n; i++)
        if (s->ins[i].kind == in.kind && s->ins[i].arg == in.arg && nth-- == 0)
            return i;
    ck_abort_msg("'%s' does not occur that often", text);
    return SIZE_MAX;
}

START_TEST(exec_should_reject_reading_a_freed_tensor)
{
    remat_graph *g;
    remat_schedule base, s;
    remat_analysis *a = mlp2_schedule(&g, &base);
    /* FREE h2 before FWD loss: the loss reads a freed input. */
    sched_copy(&s, &base);
    sched_move(g, &s, "FREE h2", 5);
    expect_invalid(a, &s, 6, "instruction 6 (FWD loss)", "input 'h2' is not resident (it was freed)");
    remat_schedule_destroy(&s);
    /* FREE a1 before FREE v1: allowed (v1 still holds the storage), but the
     * tensor a1 is gone when bwd:a1 (relu saves its output) reads it; the
     * view's own backward step saves nothing. */
    sched_copy(&s, &base);
    sched_move(g, &s, "FREE a1", 10);
    expect_invalid(a, &s, 13, "instruction 13 (BWD a1)", "saved tensor 'a1' is not resident (it was freed");
    remat_schedule_destroy(&s);
    /* FREE v1 before bwd:h2, which saves it. */
    sched_copy(&s, &base);
    sched_move(g, &s, "FREE v1", 9);
    expect_invalid(a, &s, 10, "instruction 10 (BWD h2)", "saved tensor 'v1' is not resident");
    remat_schedule_destroy(&s);
    /* FWD h2 before FWD v1: v1 was never produced. */
    sched_copy(&s, &base);
    sched_move(g, &s, "FWD h2", 3);
    expect_invalid(a, &s, 3, "instruction 3 (FWD h2)", "input 'v1' is not resident (it was never produced)");
    remat_schedule_destroy(&s);
    remat_schedule_destroy(&base);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(exec_should_reject_a_dropped_recompute)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(CHAIN4, &g);
    uint8_t keep[8] = {0};
    remat_schedule base, s;
    build_keep(a, keep, &base);
    remat_replay_result r;
    replay_valid(a, &base, NULL, &r);
    ck_assert_uint_eq(r.flops_recompute, 110);
    remat_replay_result_destroy(&r);
    /* Without RECOMPUTE a, RECOMPUTE b reads a freed a. */
    sched_copy(&s, &base);
    size_t ra = sched_find(g, &s, "RECOMPUTE a");
    sched_del(&s, ra);
    expect_invalid(a, &s, ra, "(RECOMPUTE b)", "input 'a' is not resident (it was freed)");
    remat_schedule_destroy(&s);
    /* Without RECOMPUTE b (and the FREE of its stepping stone), bwd:c finds
     * its saved b missing. */
    sched_copy(&s, &base);
    size_t rb = sched_find(g, &s, "RECOMPUTE b");
    sched_del(&s, rb);
    ck_assert_uint_eq(sched_find_nth(g, &s, "FREE a", 1), rb);
    sched_del(&s, rb);
    size_t bc = sched_find(g, &s, "BWD c");
    expect_invalid(a, &s, bc, "(BWD c)", "saved tensor 'b' is not resident (it was freed; recompute it first)");
    remat_schedule_destroy(&s);
    /* Dropping both recomputes, then re-adding b's alone: a is missing. */
    sched_copy(&s, &base);
    sched_del(&s, sched_find(g, &s, "RECOMPUTE a"));
    expect_invalid(a, &s, sched_find(g, &s, "RECOMPUTE b"), "input 'a' is not resident", NULL);
    remat_schedule_destroy(&s);
    remat_schedule_destroy(&base);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(exec_should_reject_double_free_and_freeing_leaves)
{
    remat_graph *g;
    remat_schedule base, s;
    remat_analysis *a = mlp2_schedule(&g, &base);
    sched_copy(&s, &base);
    sched_ins(&s, 3, instr_of(g, "FREE h1"));
    expect_invalid(a, &s, 3, "instruction 3 (FREE h1)", "'h1' is not resident (double free)");
    remat_schedule_destroy(&s);
    /* A double free of a view whose base is still resident. */
    sched_copy(&s, &base);
    sched_ins(&s, 11, instr_of(g, "FREE v1"));
    expect_invalid(a, &s, 11, "(FREE v1)", "'v1' is not resident (double free)");
    remat_schedule_destroy(&s);
    sched_copy(&s, &base);
    sched_ins(&s, 0, instr_of(g, "FREE h2"));
    expect_invalid(a, &s, 0, "instruction 0 (FREE h2)", "'h2' is not resident (never produced)");
    remat_schedule_destroy(&s);
    static const char *const leaves[][2] = {{"FREE x", "'x' is an input"},
                                            {"FREE w1", "'w1' is a param"},
                                            {"FREE w2", "'w2' is a param"}};
    for (int i = 0; i < 3; i++) {
        sched_copy(&s, &base);
        sched_ins(&s, 4, instr_of(g, leaves[i][0]));
        expect_invalid(a, &s, 4, leaves[i][0], leaves[i][1]);
        remat_schedule_destroy(&s);
    }
    remat_schedule_destroy(&base);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(exec_should_reject_repeated_missing_and_misordered_backward_steps)
{
    remat_graph *g;
    remat_schedule base, s;
    remat_analysis *a = mlp2_schedule(&g, &base);
    /* Repeated. */
    sched_copy(&s, &base);
    sched_ins(&s, 13, instr_of(g, "BWD a1"));
    expect_invalid(a, &s, 13, "instruction 13 (BWD a1)", "backward step of 'a1' repeated");
    remat_schedule_destroy(&s);
    /* Missing, with an explicit OPT: OPT is where it is found. bwd:h1 is
     * the one that writes w1's gradient. */
    sched_copy(&s, &base);
    sched_del(&s, 14);
    expect_invalid(a, &s, 14, "instruction 14 (OPT)",
                   "backward step of 'h1' never ran: gradient of param 'w1' is incomplete");
    /* ... and without OPT: found at the end (fail_index == n). */
    sched_del(&s, 14);
    expect_invalid(a, &s, 14, "end of schedule",
                   "backward step of 'h1' never ran: gradient of param 'w1' is incomplete");
    remat_schedule_destroy(&s);
    /* Missing in the middle: bwd:h1 then reads an incomplete gradient. */
    sched_copy(&s, &base);
    sched_del(&s, 12);
    expect_invalid(a, &s, 13, "instruction 13 (BWD h1)",
                   "gradient of 'h1' is incomplete: backward step of 'a1' has not run");
    remat_schedule_destroy(&s);
    /* Out of order: bwd:h2 before bwd:loss, which writes h2's gradient. */
    sched_copy(&s, &base);
    sched_move(g, &s, "BWD h2", 8);
    expect_invalid(a, &s, 8, "instruction 8 (BWD h2)",
                   "gradient of 'h2' is incomplete: backward step of 'loss' has not run");
    remat_schedule_destroy(&s);
    /* Before its forward step. */
    sched_copy(&s, &base);
    sched_ins(&s, 0, instr_of(g, "BWD h1"));
    expect_invalid(a, &s, 0, "instruction 0 (BWD h1)", "backward step of 'h1' before its forward step");
    remat_schedule_destroy(&s);
    remat_schedule_destroy(&base);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* An input that wants a gradient: its backward step writes no param. */
static const char *XGRAD =
    "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"xgrad\","
    "\"inputs\":[{\"id\":\"x\",\"bytes\":40,\"requires_grad\":true}],\"params\":[],"
    "\"ops\":[{\"id\":\"e\",\"op\":\"exp\",\"inputs\":[\"x\"],\"bytes\":40,\"flops\":4,\"saves\":[\"e\"]},"
    "{\"id\":\"loss\",\"op\":\"sum\",\"inputs\":[\"e\"],\"bytes\":4,\"flops\":1,\"saves\":[]}],"
    "\"outputs\":[\"loss\"]}";

START_TEST(exec_should_name_a_missing_backward_step_at_the_end)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(XGRAD, &g);
    remat_schedule s;
    remat_schedule_init(&s);
    /* Leaves x 40. 0 FWD e +40 -> 80; 1 FWD loss +4 -> 84; 2 FREE loss;
     * 3 BWD loss +4 seed +40 de -> 124 (then 120); 4 BWD e +40 dx -> 160
     * (then 120: x 40, e 40, dx 40); 5 FREE e -> 80 (dx stays). */
    sched_parse(g, "FWD e, FWD loss, FREE loss, BWD loss, BWD e, FREE e", &s);
    remat_replay_result r;
    replay_valid(a, &s, NULL, &r);
    ck_assert_uint_eq(r.peak_bytes, 160);
    ck_assert_uint_eq(r.peak_index, 4);
    ck_assert_uint_eq(r.peak_by_category[REMAT_CAT_ACTIVATION_GRADS], 80);
    /* The implied optimizer step is instruction n. */
    ck_assert_uint_eq(r.category_peak[REMAT_CAT_PARAM_GRADS], 0);
    remat_replay_result_destroy(&r);
    sched_del(&s, 4);
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_replay(a, &s, NULL, NULL, &r, &err), REMAT_OK);
    ck_assert(!r.valid);
    ck_assert_uint_eq(r.fail_index, 5);
    ck_assert_msg_contains(&err, "end of schedule (after all 5 instructions)");
    ck_assert_msg_contains(&err, "backward step of 'e' never ran");
    ck_assert_msg(strstr(err.msg, "param") == NULL, "no param is involved: %s", err.msg);
    /* The report says the same. */
    size_t len;
    remat_err rerr;
    remat_err_init(&rerr);
    char *json = remat_report_replay(a, &s, &r, &err, REMAT_REPORT_JSON, &len, &rerr);
    ck_assert_ptr_nonnull(json);
    ck_assert_ptr_nonnull(strstr(json, "\"valid\": false, \"fail_index\": 5, \"instruction\": \"end of schedule\""));
    remat_free(json);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

static const char *CHAIN4_NR =
    "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"chain4nr\","
    "\"inputs\":[{\"id\":\"x\",\"bytes\":1000}],\"params\":[{\"id\":\"w\",\"bytes\":200}],"
    "\"ops\":["
    "{\"id\":\"a\",\"op\":\"matmul\",\"inputs\":[\"x\",\"w\"],\"bytes\":400,\"flops\":100},"
    "{\"id\":\"b\",\"op\":\"dropout\",\"inputs\":[\"a\"],\"bytes\":300,\"flops\":10,\"saves\":[\"b\"],"
    "\"recomputable\":false},"
    "{\"id\":\"c\",\"op\":\"scale\",\"inputs\":[\"b\"],\"bytes\":500,\"flops\":20},"
    "{\"id\":\"loss\",\"op\":\"sum\",\"inputs\":[\"c\"],\"bytes\":8,\"flops\":5,\"saves\":[]}],"
    "\"outputs\":[\"loss\"]}";

START_TEST(exec_should_reject_bad_forward_and_recompute_steps)
{
    remat_graph *g;
    remat_schedule base, s;
    remat_analysis *a = mlp2_schedule(&g, &base);
    /* FWD twice. */
    sched_copy(&s, &base);
    sched_ins(&s, 1, instr_of(g, "FWD h1"));
    expect_invalid(a, &s, 1, "instruction 1 (FWD h1)", "already ran forward; a second execution is a RECOMPUTE");
    remat_schedule_destroy(&s);
    /* RECOMPUTE before FWD. */
    sched_copy(&s, &base);
    s.ins[0].kind = REMAT_I_RECOMPUTE;
    expect_invalid(a, &s, 0, "instruction 0 (RECOMPUTE h1)", "RECOMPUTE of op 'h1' before its FWD");
    remat_schedule_destroy(&s);
    /* A pointless RECOMPUTE: a1 is resident. */
    sched_copy(&s, &base);
    sched_ins(&s, 2, instr_of(g, "RECOMPUTE a1"));
    expect_invalid(a, &s, 2, "instruction 2 (RECOMPUTE a1)", "every output of op 'a1' is already resident");
    remat_schedule_destroy(&s);
    /* RECOMPUTE h1 after FREE h1 is legal (nothing needs it, but it rebuilds
     * a freed output): +4096 recomputed, and it stays to the end. */
    sched_copy(&s, &base);
    sched_ins(&s, 3, instr_of(g, "RECOMPUTE h1"));
    remat_replay_result r;
    replay_valid(a, &s, NULL, &r);
    ck_assert_uint_eq(r.flops_recompute, 131072);
    ck_assert_uint_eq(r.peak_bytes, 204800 + 4096);
    ck_assert_uint_eq(r.peak_by_category[REMAT_CAT_RECOMPUTED], 4096);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    /* Anything after OPT. */
    sched_copy(&s, &base);
    ck_assert_int_eq(remat_schedule_push(&s, REMAT_I_FREE, t_tensor(g, "h1")), REMAT_OK);
    expect_invalid(a, &s, 16, "instruction 16 (FREE h1)", "instruction after OPT");
    remat_schedule_destroy(&s);
    sched_copy(&s, &base);
    ck_assert_int_eq(remat_schedule_push(&s, REMAT_I_OPT, 0), REMAT_OK);
    expect_invalid(a, &s, 16, "instruction 16 (OPT)", "instruction after OPT");
    remat_schedule_destroy(&s);
    /* Malformed instructions. */
    sched_copy(&s, &base);
    s.ins[4].arg = 999;
    expect_invalid(a, &s, 4, "instruction 4", "op index 999 out of range");
    s.ins[4] = (remat_instr){REMAT_I_FREE, 999};
    expect_invalid(a, &s, 4, "instruction 4", "tensor index 999 out of range");
    s.ins[4] = (remat_instr){42, 0};
    expect_invalid(a, &s, 4, "instruction 4", "unknown instruction kind 42");
    remat_schedule_destroy(&s);
    remat_schedule_destroy(&base);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);

    /* A non-recomputable op. */
    a = t_analyze(CHAIN4_NR, &g);
    remat_schedule_init(&s);
    sched_parse(g, "FWD a, FWD b, FREE a, FWD c, FWD loss, FREE c, FREE loss, BWD loss, BWD c, BWD b, FREE b, "
                   "RECOMPUTE b, BWD a, OPT", &s);
    expect_invalid(a, &s, 11, "instruction 11 (RECOMPUTE b)", "op 'b' is not recomputable");
    remat_schedule_destroy(&s);
    /* The policy keeps such outputs whatever the keep set says: keeping
     * nothing rebuilds nothing, because b (the only saved activation) is
     * the output of the non-recomputable op. */
    uint8_t keep[8] = {0};
    build_keep(a, keep, &s);
    replay_valid(a, &s, NULL, &r);
    ck_assert_uint_eq(r.flops_recompute, 0);
    ck_assert_uint_eq(r.peak_bytes, 2300); /* store-all's, as computed by hand for chain4 */
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* mlp2 plus an op that nothing reads and that needs no backward step. */
static const char *AUX =
    "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"aux\","
    "\"inputs\":[{\"id\":\"x\",\"bytes\":4096}],"
    "\"params\":[{\"id\":\"w1\",\"bytes\":65536},{\"id\":\"w2\",\"bytes\":65536,\"frozen\":true}],"
    "\"ops\":["
    "{\"id\":\"aux\",\"op\":\"mean\",\"inputs\":[\"x\"],\"bytes\":8,\"flops\":1},"
    "{\"id\":\"h1\",\"op\":\"matmul\",\"inputs\":[\"x\",\"w1\"],\"bytes\":4096,\"flops\":131072},"
    "{\"id\":\"a1\",\"op\":\"relu\",\"inputs\":[\"h1\"],\"bytes\":4096,\"flops\":1024,\"saves\":[\"a1\"]},"
    "{\"id\":\"v1\",\"op\":\"view\",\"inputs\":[\"a1\"],\"alias_of\":\"a1\"},"
    "{\"id\":\"h2\",\"op\":\"matmul\",\"inputs\":[\"v1\",\"w2\"],\"bytes\":4096,\"flops\":131072},"
    "{\"id\":\"loss\",\"op\":\"sum\",\"inputs\":[\"h2\"],\"bytes\":4,\"flops\":1024,\"saves\":[]}],"
    "\"outputs\":[\"loss\"]}";

START_TEST(exec_should_reject_a_forward_step_that_never_ran)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(AUX, &g);
    remat_schedule s, full;
    remat_schedule_init(&full);
    sched_parse(g, "FWD aux, FREE aux", &full);
    sched_parse(g, MLP2_STORE_ALL, &full);
    remat_replay_result r;
    replay_valid(a, &full, NULL, &r);
    ck_assert_uint_eq(r.peak_bytes, 204800); /* aux's 8 bytes are gone long before */
    remat_replay_result_destroy(&r);
    /* Without FWD aux / FREE aux: found at OPT, or at the end. */
    sched_copy(&s, &full);
    sched_del(&s, 0);
    sched_del(&s, 0);
    expect_invalid(a, &s, 15, "instruction 15 (OPT)", "forward step of 'aux' never ran");
    sched_del(&s, 15);
    expect_invalid(a, &s, 15, "end of schedule", "forward step of 'aux' never ran");
    remat_schedule_destroy(&s);
    /* aux gets no gradient: it has no backward step to run. */
    sched_copy(&s, &full);
    sched_ins(&s, 16, instr_of(g, "BWD aux"));
    expect_invalid(a, &s, 16, "instruction 16 (BWD aux)", "op 'aux' has no backward step");
    remat_schedule_destroy(&s);
    remat_schedule_destroy(&full);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* ---- The independent oracle ------------------------------------------- */

/* Generated graphs are described here first (spec), then written as JSON
 * and loaded. The oracle reads only the spec and the instruction list: it
 * uses neither the analyzer's arrays nor the executor. */
enum { GN_T = 96, GN_OPS = 24, GN_IN = 3, GN_OUT = 3, GN_SAVE = 8, GN_OUTPUTS = 2 };

typedef struct {
    int n_t, n_ops, n_outputs;
    char tid[GN_T][32];
    int kind[GN_T];
    uint64_t bytes[GN_T];   /* own storage; 0 for a view */
    uint64_t logical[GN_T]; /* gradient size */
    int alias[GN_T], root[GN_T], producer[GN_T];
    int frozen[GN_T], rg[GN_T], is_out[GN_T];
    int outputs[GN_OUTPUTS];
    char oid[GN_OPS][32];
    int n_in[GN_OPS], in[GN_OPS][GN_IN];
    int n_out[GN_OPS], out[GN_OPS][GN_OUT];
    int n_save[GN_OPS], save[GN_OPS][GN_SAVE]; /* effective saves */
    int saves_given[GN_OPS], multi[GN_OPS], flops_given[GN_OPS], bwd_given[GN_OPS], view_bytes_given[GN_T];
    uint64_t flops[GN_OPS], bwd_flops[GN_OPS], ws[GN_OPS], bws[GN_OPS];
    int recomputable[GN_OPS];
    int file_pos[GN_OPS]; /* op written at file position file_pos[k]... */
    int file_op[GN_OPS];  /* ...and file position i holds op file_op[i] */
    /* Derived by the oracle, from the spec alone. */
    uint8_t gflow[GN_T];
    uint8_t has_bwd[GN_OPS];
} spec;

static uint64_t rng_next(uint64_t *s)
{
    /* splitmix64: tiny, seedable, good enough to spread test cases. */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint32_t rnd(uint64_t *s, uint32_t n)
{
    return (uint32_t)(rng_next(s) % n);
}

static int add_tensor(spec *G, const char *id, int kind, int producer)
{
    ck_assert_int_lt(G->n_t, GN_T);
    int t = G->n_t++;
    snprintf(G->tid[t], sizeof G->tid[t], "%s", id);
    G->kind[t] = kind;
    G->alias[t] = -1;
    G->root[t] = t;
    G->producer[t] = producer;
    G->frozen[t] = G->rg[t] = G->is_out[t] = 0;
    G->view_bytes_given[t] = 0;
    return t;
}

static uint64_t rand_bytes(uint64_t *s)
{
    return rnd(s, 25) == 0 ? 0 : 1 + rnd(s, 4096);
}

static int contains(const int *v, int n, int x)
{
    for (int i = 0; i < n; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

static void gen_spec(uint64_t *s, spec *G)
{
    memset(G, 0, sizeof *G);
    char id[32];
    int n_inputs = 1 + (int)rnd(s, 2), n_params = 1 + (int)rnd(s, 4);
    for (int i = 0; i < n_inputs; i++) {
        snprintf(id, sizeof id, "x%d", i);
        int t = add_tensor(G, id, REMAT_TENSOR_INPUT, -1);
        G->bytes[t] = G->logical[t] = rand_bytes(s);
        G->rg[t] = rnd(s, 5) == 0;
    }
    for (int i = 0; i < n_params; i++) {
        snprintf(id, sizeof id, "w%d", i);
        int t = add_tensor(G, id, REMAT_TENSOR_PARAM, -1);
        G->bytes[t] = G->logical[t] = rand_bytes(s);
        G->frozen[t] = rnd(s, 4) == 0;
    }
    G->n_ops = 2 + (int)rnd(s, GN_OPS - 1);
    for (int k = 0; k < G->n_ops; k++) {
        snprintf(G->oid[k], sizeof G->oid[k], "k%d", k);
        /* Inputs: mostly recent activations (long chains), sometimes any
         * tensor (skip connections, leaves); a repeat (mul(x, x)) now and then. */
        G->n_in[k] = 1 + (int)rnd(s, GN_IN);
        for (int i = 0; i < G->n_in[k]; i++) {
            int t;
            if (G->n_t > n_inputs + n_params && rnd(s, 10) < 6) {
                int lo = G->n_t - 6 > n_inputs + n_params ? G->n_t - 6 : n_inputs + n_params;
                t = lo + (int)rnd(s, (uint32_t)(G->n_t - lo));
            } else {
                t = (int)rnd(s, (uint32_t)G->n_t);
            }
            G->in[k][i] = t;
        }
        G->multi[k] = rnd(s, 5) == 0;
        G->n_out[k] = G->multi[k] ? 2 + (int)rnd(s, GN_OUT - 1) : 1;
        for (int j = 0; j < G->n_out[k]; j++) {
            if (G->multi[k])
                snprintf(id, sizeof id, "k%d_%d", k, j);
            else
                snprintf(id, sizeof id, "k%d", k);
            int t = add_tensor(G, id, REMAT_TENSOR_ACTIVATION, k);
            G->out[k][j] = t;
            if (rnd(s, 100) < 15) { /* a view of one of the op's inputs */
                int base = G->in[k][rnd(s, (uint32_t)G->n_in[k])];
                G->alias[t] = base;
                G->root[t] = G->root[base];
                G->bytes[t] = 0;
                G->view_bytes_given[t] = rnd(s, 2);
                G->logical[t] = G->view_bytes_given[t] ? rand_bytes(s) : G->logical[base];
            } else {
                G->bytes[t] = G->logical[t] = rand_bytes(s);
            }
        }
        int view_op = !G->multi[k] && G->alias[G->out[k][0]] >= 0;
        G->flops_given[k] = !view_op || rnd(s, 2);
        G->flops[k] = G->flops_given[k] ? rnd(s, 100000) : 0;
        G->bwd_given[k] = rnd(s, 10) < 3;
        G->bwd_flops[k] = G->bwd_given[k] ? rnd(s, 200000) : 2 * G->flops[k];
        G->ws[k] = rnd(s, 10) < 3 ? 1 + rnd(s, 3000) : 0;
        G->bws[k] = rnd(s, 10) < 3 ? 1 + rnd(s, 3000) : 0;
        G->recomputable[k] = rnd(s, 10) != 0;
        /* Saves: the default (distinct inputs), or a random subset of
         * inputs and outputs, sometimes with any other activation (graphs
         * converted from joint graphs save what they like). */
        G->saves_given[k] = rnd(s, 4) != 0;
        G->n_save[k] = 0;
        if (!G->saves_given[k]) {
            for (int i = 0; i < G->n_in[k]; i++)
                if (!contains(G->save[k], G->n_save[k], G->in[k][i]))
                    G->save[k][G->n_save[k]++] = G->in[k][i];
        } else {
            for (int i = 0; i < G->n_in[k] + G->n_out[k]; i++) {
                int t = i < G->n_in[k] ? G->in[k][i] : G->out[k][i - G->n_in[k]];
                if (rnd(s, 2) && !contains(G->save[k], G->n_save[k], t))
                    G->save[k][G->n_save[k]++] = t;
            }
            if (rnd(s, 10) == 0) {
                int t = n_inputs + n_params + (int)rnd(s, (uint32_t)(G->n_t - n_inputs - n_params));
                if (!contains(G->save[k], G->n_save[k], t))
                    G->save[k][G->n_save[k]++] = t;
            }
        }
    }
    /* The loss is the last op's first output; sometimes a second output. */
    G->outputs[G->n_outputs++] = G->out[G->n_ops - 1][0];
    if (rnd(s, 10) < 3) {
        int t = n_inputs + n_params + (int)rnd(s, (uint32_t)(G->n_t - n_inputs - n_params));
        if (t != G->outputs[0])
            G->outputs[G->n_outputs++] = t;
    }
    for (int i = 0; i < G->n_outputs; i++)
        G->is_out[G->outputs[i]] = 1;
    /* File order: usually generation order (topological); sometimes
     * shuffled, so the analyzer must sort. */
    for (int k = 0; k < G->n_ops; k++)
        G->file_op[k] = k;
    if (rnd(s, 5) == 0) {
        for (int k = G->n_ops - 1; k > 0; k--) {
            int j = (int)rnd(s, (uint32_t)k + 1), x = G->file_op[k];
            G->file_op[k] = G->file_op[j];
            G->file_op[j] = x;
        }
        /* The loader sizes a view without "bytes" from its base at the
         * moment it reads the view, so a base defined later in the file
         * gives it 0 bytes (a loader bug, reported): shuffled files state
         * every view's size. Files in order still use the default. */
        for (int t = 0; t < G->n_t; t++)
            if (G->alias[t] >= 0)
                G->view_bytes_given[t] = 1;
    }
    for (int i = 0; i < G->n_ops; i++)
        G->file_pos[G->file_op[i]] = i;
}

typedef struct {
    char *p;
    size_t len, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void sb_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    ck_assert(w >= 0 && (size_t)w < b->cap - b->len);
    b->len += (size_t)w;
}

static void sb_ids(sbuf *b, const spec *G, const int *v, int n)
{
    sb_printf(b, "[");
    for (int i = 0; i < n; i++)
        sb_printf(b, "%s\"%s\"", i ? "," : "", G->tid[v[i]]);
    sb_printf(b, "]");
}

static void spec_json(const spec *G, sbuf *b)
{
    sb_printf(b, "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"gen\",\"inputs\":[");
    int first = 1;
    for (int t = 0; t < G->n_t; t++)
        if (G->kind[t] == REMAT_TENSOR_INPUT) {
            sb_printf(b, "%s{\"id\":\"%s\",\"bytes\":%llu%s}", first ? "" : ",", G->tid[t],
                      (unsigned long long)G->bytes[t], G->rg[t] ? ",\"requires_grad\":true" : "");
            first = 0;
        }
    sb_printf(b, "],\"params\":[");
    first = 1;
    for (int t = 0; t < G->n_t; t++)
        if (G->kind[t] == REMAT_TENSOR_PARAM) {
            sb_printf(b, "%s{\"id\":\"%s\",\"bytes\":%llu%s}", first ? "" : ",", G->tid[t],
                      (unsigned long long)G->bytes[t], G->frozen[t] ? ",\"frozen\":true" : "");
            first = 0;
        }
    sb_printf(b, "],\"ops\":[");
    for (int i = 0; i < G->n_ops; i++) {
        int k = G->file_op[i];
        sb_printf(b, "%s{\"id\":\"%s\",\"op\":\"f\",\"inputs\":", i ? "," : "", G->oid[k]);
        sb_ids(b, G, G->in[k], G->n_in[k]);
        if (G->multi[k])
            sb_printf(b, ",\"outputs\":[");
        for (int j = 0; j < G->n_out[k]; j++) {
            int t = G->out[k][j];
            if (G->multi[k])
                sb_printf(b, "%s{\"id\":\"%s\"", j ? "," : "", G->tid[t]);
            if (G->alias[t] >= 0) {
                sb_printf(b, ",\"alias_of\":\"%s\"", G->tid[G->alias[t]]);
                if (G->view_bytes_given[t])
                    sb_printf(b, ",\"bytes\":%llu", (unsigned long long)G->logical[t]);
            } else {
                sb_printf(b, ",\"bytes\":%llu", (unsigned long long)G->bytes[t]);
            }
            if (G->multi[k])
                sb_printf(b, "}");
        }
        if (G->multi[k])
            sb_printf(b, "]");
        if (G->flops_given[k])
            sb_printf(b, ",\"flops\":%llu", (unsigned long long)G->flops[k]);
        if (G->bwd_given[k])
            sb_printf(b, ",\"bwd_flops\":%llu", (unsigned long long)G->bwd_flops[k]);
        if (G->ws[k])
            sb_printf(b, ",\"workspace\":%llu", (unsigned long long)G->ws[k]);
        if (G->bws[k])
            sb_printf(b, ",\"bwd_workspace\":%llu", (unsigned long long)G->bws[k]);
        if (!G->recomputable[k])
            sb_printf(b, ",\"recomputable\":false");
        /* An op whose outputs are all views saves nothing by default
         * (graphs/README.md); the model's default is the distinct inputs,
         * so write them out. */
        int all_views = 1;
        for (int o = 0; o < G->n_out[k]; o++)
            all_views &= G->alias[G->out[k][o]] >= 0;
        if (G->saves_given[k] || all_views) {
            sb_printf(b, ",\"saves\":");
            sb_ids(b, G, G->save[k], G->n_save[k]);
        }
        sb_printf(b, "}");
    }
    sb_printf(b, "],\"outputs\":");
    sb_ids(b, G, G->outputs, G->n_outputs);
    sb_printf(b, "}");
}

/* DESIGN 2: a gradient flows into t iff t needs one (a trainable param, an
 * input with requires_grad, or an activation computed from such a tensor)
 * and t reaches an output; an op has a backward step iff a gradient flows
 * into one of its outputs. Generation order is topological. */
static void spec_derive(spec *G)
{
    uint8_t needs[GN_T] = {0}, reach[GN_T] = {0};
    for (int t = 0; t < G->n_t; t++)
        needs[t] = (G->kind[t] == REMAT_TENSOR_PARAM && !G->frozen[t]) || (G->kind[t] == REMAT_TENSOR_INPUT && G->rg[t]);
    for (int k = 0; k < G->n_ops; k++) {
        int any = 0;
        for (int i = 0; i < G->n_in[k]; i++)
            any |= needs[G->in[k][i]];
        for (int j = 0; j < G->n_out[k]; j++)
            needs[G->out[k][j]] = (uint8_t)any;
    }
    for (int t = 0; t < G->n_t; t++)
        reach[t] = (uint8_t)G->is_out[t];
    for (int k = G->n_ops - 1; k >= 0; k--) {
        int any = 0;
        for (int j = 0; j < G->n_out[k]; j++)
            any |= reach[G->out[k][j]];
        if (any)
            for (int i = 0; i < G->n_in[k]; i++)
                reach[G->in[k][i]] = 1;
    }
    for (int t = 0; t < G->n_t; t++)
        G->gflow[t] = needs[t] && reach[t];
    for (int k = 0; k < G->n_ops; k++) {
        G->has_bwd[k] = 0;
        for (int j = 0; j < G->n_out[k]; j++)
            G->has_bwd[k] |= G->gflow[G->out[k][j]];
    }
}

typedef struct {
    /* Per instruction (index n: the implied optimizer step, if any). */
    uint64_t *hw, *hw_cat, *live_after;
    size_t n_steps;
    uint64_t peak, act_peak;
    size_t peak_i, act_peak_i;
    uint64_t peak_cat[REMAT_CAT_COUNT], cat_peak[REMAT_CAT_COUNT];
    uint64_t f_fwd, f_bwd, f_rec;
    uint32_t rec_count[GN_OPS];
    size_t release_at[GN_T]; /* storage root -> instruction whose FREE released it last */
    int resident_at_end;     /* activations still resident when OPT runs */
    int n_fwd[GN_OPS], n_bwd[GN_OPS];
    size_t fail_index;       /* first illegal instruction; SIZE_MAX: legal */
} oracle;

typedef struct {
    const spec *G;
    uint8_t res[GN_T], grad[GN_T], scat[GN_T];
    uint8_t fwd_done[GN_OPS], bwd_done[GN_OPS];
    int seeded;
} osim;

static int storage_live(const osim *S, int root)
{
    for (int t = 0; t < S->G->n_t; t++)
        if (S->res[t] && S->G->root[t] == root)
            return 1;
    return 0;
}

static remat_category grad_cat(const spec *G, int t)
{
    return G->kind[t] == REMAT_TENSOR_PARAM ? REMAT_CAT_PARAM_GRADS : REMAT_CAT_ACTIVATION_GRADS;
}

/* Live bytes per category, summed from scratch over every storage root and
 * every gradient at every step: nothing incremental that could drift the
 * way the executor's running totals could. */
static void live_now(const osim *S, uint64_t *cat)
{
    const spec *G = S->G;
    uint8_t live[GN_T] = {0};
    for (int t = 0; t < G->n_t; t++)
        live[G->root[t]] |= S->res[t];
    memset(cat, 0, REMAT_CAT_COUNT * sizeof *cat);
    for (int r = 0; r < G->n_t; r++)
        if (G->root[r] == r && live[r])
            cat[S->scat[r]] += G->bytes[r];
    for (int t = 0; t < G->n_t; t++)
        if (S->grad[t])
            cat[grad_cat(G, t)] += G->logical[t];
}

static uint64_t sum_cat(const uint64_t *cat, int activation_only)
{
    uint64_t s = 0;
    for (int c = 0; c < REMAT_CAT_COUNT; c++)
        if (!activation_only || remat_category_is_activation((remat_category)c))
            s += cat[c];
    return s;
}

static void oracle_step(oracle *O, size_t i, const uint64_t *hw, const uint64_t *after)
{
    uint64_t tot = sum_cat(hw, 0), act = sum_cat(hw, 1);
    O->hw[i] = tot;
    memcpy(O->hw_cat + i * REMAT_CAT_COUNT, hw, REMAT_CAT_COUNT * sizeof *hw);
    O->live_after[i] = sum_cat(after, 0);
    if (i == 0 || tot > O->peak) {
        O->peak = tot;
        O->peak_i = i;
        memcpy(O->peak_cat, hw, sizeof O->peak_cat);
    }
    if (i == 0 || act > O->act_peak) {
        O->act_peak = act;
        O->act_peak_i = i;
    }
    for (int c = 0; c < REMAT_CAT_COUNT; c++)
        if (hw[c] > O->cat_peak[c])
            O->cat_peak[c] = hw[c];
    O->n_steps = i + 1;
}

/* Simulates schedule s (instruction args are indices of g, translated to
 * the spec through ids) with the extras x (may be NULL). An illegal
 * instruction stops it: O->fail_index is its index (n for a problem found
 * at the end), SIZE_MAX when the schedule is legal. */
#define OFAIL(cond)                 \
    do {                            \
        if (cond) {                 \
            O->fail_index = i;      \
            return;                 \
        }                           \
    } while (0)

static void oracle_run(const spec *G, const int *op_of, const int *t_of, const remat_schedule *s,
                       const remat_exec_extras *x, oracle *O)
{
    osim S;
    memset(&S, 0, sizeof S);
    S.G = G;
    memset(O->rec_count, 0, sizeof O->rec_count);
    memset(O->n_fwd, 0, sizeof O->n_fwd);
    memset(O->n_bwd, 0, sizeof O->n_bwd);
    O->peak = O->act_peak = O->f_fwd = O->f_bwd = O->f_rec = 0;
    O->n_steps = 0;
    O->fail_index = SIZE_MAX;
    memset(O->cat_peak, 0, sizeof O->cat_peak);
    for (int t = 0; t < GN_T; t++)
        O->release_at[t] = SIZE_MAX;
    O->resident_at_end = 0;
    for (int t = 0; t < G->n_t; t++)
        if (G->kind[t] != REMAT_TENSOR_ACTIVATION) {
            S.res[t] = 1;
            S.scat[t] = G->kind[t] == REMAT_TENSOR_INPUT ? REMAT_CAT_INPUTS
                        : G->frozen[t]                   ? REMAT_CAT_FROZEN
                                                         : REMAT_CAT_PARAMS;
        }
    /* Persistent extras, in their own categories the whole time. */
    uint64_t fixed[REMAT_CAT_COUNT] = {0};
    if (x) {
        fixed[REMAT_CAT_OPTIMIZER_STATE] = x->optimizer_state;
        fixed[REMAT_CAT_MASTER_WEIGHTS] = x->master_weights;
        fixed[REMAT_CAT_FROZEN] = x->frozen_copies;
        fixed[REMAT_CAT_COMM_BUFFERS] = x->comm_buffers;
    }
    int opt_seen = 0;
    for (size_t i = 0; i <= s->n; i++) {
        remat_instr in = i < s->n ? s->ins[i] : (remat_instr){REMAT_I_OPT, 0};
        if (i == s->n && opt_seen)
            break;
        OFAIL(opt_seen);
        uint64_t before[REMAT_CAT_COUNT], hw[REMAT_CAT_COUNT], after[REMAT_CAT_COUNT];
        live_now(&S, before);
        for (int c = 0; c < REMAT_CAT_COUNT; c++)
            before[c] += fixed[c];
        memcpy(hw, before, sizeof hw);
        int k = -1, t = -1;
        if (in.kind == REMAT_I_FWD || in.kind == REMAT_I_RECOMPUTE || in.kind == REMAT_I_BWD)
            k = op_of[in.arg];
        else if (in.kind == REMAT_I_FREE)
            t = t_of[in.arg];
        switch (in.kind) {
        case REMAT_I_FWD:
        case REMAT_I_RECOMPUTE: {
            int rec = in.kind == REMAT_I_RECOMPUTE;
            OFAIL(rec ? !S.fwd_done[k] || !G->recomputable[k] : S.fwd_done[k]);
            for (int j = 0; j < G->n_in[k]; j++)
                OFAIL(!S.res[G->in[k][j]]);
            remat_category c = rec ? REMAT_CAT_RECOMPUTED : REMAT_CAT_ACTIVATIONS;
            int fresh = 0;
            for (int j = 0; j < G->n_out[k]; j++) {
                int o = G->out[k][j];
                if (S.res[o])
                    continue;
                fresh = 1;
                /* A non-view output allocates unless its storage is still
                 * live through one of its views. */
                if (G->root[o] == o && !storage_live(&S, o)) {
                    hw[c] += G->bytes[o];
                    S.scat[o] = (uint8_t)c;
                }
            }
            OFAIL(!fresh);
            hw[REMAT_CAT_WORKSPACE] += G->ws[k];
            for (int j = 0; j < G->n_out[k]; j++)
                S.res[G->out[k][j]] = 1;
            S.fwd_done[k] = 1;
            if (rec) {
                O->f_rec += G->flops[k];
                O->rec_count[k]++;
            } else {
                O->f_fwd += G->flops[k];
                O->n_fwd[k]++;
            }
            break;
        }
        case REMAT_I_FREE:
            OFAIL(G->kind[t] != REMAT_TENSOR_ACTIVATION || !S.res[t]);
            S.res[t] = 0;
            if (!storage_live(&S, G->root[t]))
                O->release_at[G->root[t]] = i;
            break;
        case REMAT_I_BWD: {
            OFAIL(!G->has_bwd[k] || S.bwd_done[k] || !S.fwd_done[k]);
            /* Its output gradients are complete: every other op reading an
             * output that gets a gradient has run its backward step. */
            for (int j = 0; j < G->n_out[k]; j++) {
                int o = G->out[k][j];
                if (!G->gflow[o])
                    continue;
                for (int q = 0; q < G->n_ops; q++)
                    if (q != k && G->has_bwd[q] && contains(G->in[q], G->n_in[q], o))
                        OFAIL(!S.bwd_done[q]);
            }
            for (int j = 0; j < G->n_save[k]; j++)
                OFAIL(!S.res[G->save[k][j]]);
            uint8_t will[GN_T];
            memcpy(will, S.grad, sizeof will);
            if (!S.seeded)
                for (int j = 0; j < G->n_outputs; j++) {
                    int o = G->outputs[j];
                    if (G->gflow[o] && !will[o]) {
                        hw[grad_cat(G, o)] += G->logical[o];
                        will[o] = 1;
                    }
                }
            for (int j = 0; j < G->n_in[k]; j++) {
                int xi = G->in[k][j];
                if (G->gflow[xi] && !will[xi]) {
                    hw[grad_cat(G, xi)] += G->logical[xi];
                    will[xi] = 1;
                }
            }
            hw[REMAT_CAT_WORKSPACE] += G->bws[k];
            memcpy(S.grad, will, sizeof S.grad);
            for (int j = 0; j < G->n_out[k]; j++)
                S.grad[G->out[k][j]] = 0;
            S.seeded = 1;
            S.bwd_done[k] = 1;
            O->f_bwd += G->bwd_flops[k];
            O->n_bwd[k]++;
            break;
        }
        case REMAT_I_OPT:
            for (int q = 0; q < G->n_ops; q++)
                OFAIL(!S.fwd_done[q] || S.bwd_done[q] != G->has_bwd[q]);
            opt_seen = 1;
            hw[REMAT_CAT_WORKSPACE] += x ? x->optimizer_workspace : 0;
            for (int q = 0; q < G->n_t; q++)
                O->resident_at_end += G->kind[q] == REMAT_TENSOR_ACTIVATION && S.res[q];
            break;
        default:
            OFAIL(1);
        }
        live_now(&S, after);
        for (int c = 0; c < REMAT_CAT_COUNT; c++)
            after[c] += fixed[c];
        oracle_step(O, i, hw, after);
    }
}

/* What remat_replay reports per step, through its observer. */
typedef struct {
    size_t cap, calls;
    uint64_t *hw, *hw_cat, *live_after;
} step_log;

static int log_step(void *ctx, size_t index, remat_instr in, uint64_t live_after, uint64_t high_water,
                    const uint64_t *hw_by_category)
{
    (void)in;
    step_log *L = ctx;
    ck_assert_msg(index == L->calls && index < L->cap, "on_step out of order: %zu", index);
    L->hw[index] = high_water;
    L->live_after[index] = live_after;
    memcpy(L->hw_cat + index * REMAT_CAT_COUNT, hw_by_category, REMAT_CAT_COUNT * sizeof *hw_by_category);
    L->calls++;
    return 0;
}

/* One generated graph, loaded and analyzed, with id maps both ways. */
typedef struct {
    spec G;
    remat_graph *g;
    remat_analysis *a;
    int gt[GN_T], go[GN_OPS]; /* spec -> graph */
    int t_of[GN_T], op_of[GN_OPS]; /* graph -> spec */
    uint64_t leaves;
    uint64_t lower_bound; /* no valid schedule peaks below this (see bounds()) */
} gcase;

static void gcase_load(gcase *C, char *json, size_t cap)
{
    sbuf b = {json, 0, cap};
    spec_json(&C->G, &b);
    remat_err err;
    remat_err_init(&err);
    C->g = NULL;
    ck_assert_msg(remat_graph_load_json(json, b.len, "gen.json", &C->g, &err) == REMAT_OK, "%s\n%s", err.msg, json);
    ck_assert_msg(remat_analyze(C->g, &C->a, &err) == REMAT_OK, "%s\n%s", err.msg, json);
    const spec *G = &C->G;
    ck_assert_int_eq(C->g->n_tensors, G->n_t);
    ck_assert_int_eq(C->g->n_ops, G->n_ops);
    for (int t = 0; t < G->n_t; t++) {
        C->gt[t] = (int)t_tensor(C->g, G->tid[t]);
        C->t_of[C->gt[t]] = t;
    }
    for (int k = 0; k < G->n_ops; k++) {
        C->go[k] = (int)t_op(C->g, G->oid[k]);
        C->op_of[C->go[k]] = k;
    }
}

/* A closed-form lower bound on any valid schedule's peak: at op k's BWD,
 * the leaves, the storage of everything it saves, the gradients of its
 * outputs (which exist by then) and its backward workspace are live
 * together; at its FWD, the leaves, its inputs' storage and its workspace. */
static void bounds(gcase *C)
{
    const spec *G = &C->G;
    C->leaves = 0;
    for (int t = 0; t < G->n_t; t++)
        if (G->kind[t] != REMAT_TENSOR_ACTIVATION)
            C->leaves += G->bytes[t];
    uint64_t best = C->leaves;
    for (int k = 0; k < G->n_ops; k++) {
        int roots[GN_IN + GN_SAVE], nr = 0;
        uint64_t f = C->leaves + G->ws[k], b = C->leaves + G->bws[k];
        for (int i = 0; i < G->n_in[k]; i++) {
            int r = G->root[G->in[k][i]];
            if (G->kind[r] == REMAT_TENSOR_ACTIVATION && !contains(roots, nr, r)) {
                roots[nr++] = r;
                f += G->bytes[r];
            }
        }
        best = f > best ? f : best;
        if (!G->has_bwd[k])
            continue;
        nr = 0;
        for (int i = 0; i < G->n_save[k]; i++) {
            int r = G->root[G->save[k][i]];
            if (G->kind[r] == REMAT_TENSOR_ACTIVATION && !contains(roots, nr, r)) {
                roots[nr++] = r;
                b += G->bytes[r];
            }
        }
        for (int j = 0; j < G->n_out[k]; j++)
            if (G->gflow[G->out[k][j]])
                b += G->logical[G->out[k][j]];
        best = b > best ? b : best;
    }
    C->lower_bound = best;
}

static void gcase_destroy(gcase *C)
{
    remat_analysis_destroy(C->a);
    remat_graph_destroy(C->g);
}

/* Replays s with remat_replay (observing every step) and with the oracle,
 * and asserts that they agree on every figure. */
static int replay_vs_oracle(const gcase *C, const remat_schedule *s, const remat_exec_extras *x, oracle *O,
                            remat_replay_result *r, const char *json, int may_be_invalid)
{
    const spec *G = &C->G;
    step_log L = {0};
    L.cap = s->n + 1;
    uint64_t *mem = malloc((s->n + 1) * (REMAT_CAT_COUNT + 2) * sizeof *mem);
    ck_assert_ptr_nonnull(mem);
    L.hw = mem;
    L.live_after = mem + (s->n + 1);
    L.hw_cat = mem + 2 * (s->n + 1);
    remat_replay_observer obs = {0};
    obs.ctx = &L;
    obs.on_step = log_step;
    remat_err err;
    remat_err_init(&err);
    ck_assert_msg(remat_replay(C->a, s, x, &obs, r, &err) == REMAT_OK, "%s", err.msg);
    oracle_run(G, C->op_of, C->t_of, s, x, O);
    if (may_be_invalid && O->fail_index != SIZE_MAX) {
        /* Both judges reject it, at the same instruction. */
        char sched[16384];
        ck_assert_msg(!r->valid && r->fail_index == O->fail_index,
                      "oracle rejects instruction %zu; replay says %s (%zu: %s)\nschedule: %s\n%s", O->fail_index,
                      r->valid ? "valid" : "invalid", r->fail_index, err.msg,
                      sched_str(C->g, s, sched, sizeof sched), json);
        ck_assert_int_eq(err.code, REMAT_ESCHEDULE);
        free(mem);
        return 0;
    }
    ck_assert_msg(r->valid, "%s\n%s", err.msg, json);
    ck_assert_msg(O->fail_index == SIZE_MAX, "the oracle finds instruction %zu illegal\n%s", O->fail_index, json);
    ck_assert_uint_eq(r->n_instructions, s->n);
    ck_assert_msg(r->peak_bytes == O->peak, "peak %llu, oracle %llu\n%s", (unsigned long long)r->peak_bytes,
                  (unsigned long long)O->peak, json);
    ck_assert_uint_eq(r->peak_index, O->peak_i);
    assert_categories(r->peak_by_category, O->peak_cat);
    assert_categories(r->category_peak, O->cat_peak);
    uint64_t sum = 0;
    for (int c = 0; c < REMAT_CAT_COUNT; c++)
        sum += O->cat_peak[c];
    ck_assert_uint_eq(r->sum_of_category_peaks, sum);
    ck_assert_uint_eq(r->activation_peak, O->act_peak);
    ck_assert_uint_eq(r->activation_peak_index, O->act_peak_i);
    ck_assert_uint_eq(r->flops_forward, O->f_fwd);
    ck_assert_uint_eq(r->flops_backward, O->f_bwd);
    ck_assert_uint_eq(r->flops_recompute, O->f_rec);
    for (int k = 0; k < G->n_ops; k++)
        ck_assert_uint_eq(r->recompute_counts[C->go[k]], O->rec_count[k]);
    /* Every step, not only the peak. */
    ck_assert_uint_eq(L.calls, O->n_steps);
    for (size_t i = 0; i < O->n_steps; i++) {
        if (L.hw[i] != O->hw[i]) {
            char text[128], sched[16384];
            remat_instr_text(C->g, i < s->n ? s->ins[i] : (remat_instr){REMAT_I_OPT, 0}, text, sizeof text);
            ck_abort_msg("step %zu (%s): high-water %llu, oracle %llu\nschedule: %s\n%s", i, text,
                         (unsigned long long)L.hw[i], (unsigned long long)O->hw[i],
                         sched_str(C->g, s, sched, sizeof sched), json);
        }
        assert_categories(L.hw_cat + i * REMAT_CAT_COUNT, O->hw_cat + i * REMAT_CAT_COUNT);
        ck_assert_msg(L.live_after[i] == O->live_after[i], "step %zu (%s): live after %llu, oracle %llu\n%s", i,
                      i < s->n ? remat_instr_name((remat_instr_kind)s->ins[i].kind) : "implied OPT",
                      (unsigned long long)L.live_after[i], (unsigned long long)O->live_after[i], json);
    }
    free(mem);
    /* The closed-form bound holds for every valid schedule. */
    ck_assert_msg(r->peak_bytes >= C->lower_bound, "peak %llu below the bound %llu\n%s",
                  (unsigned long long)r->peak_bytes, (unsigned long long)C->lower_bound, json);
    ck_assert_uint_ge(r->activation_peak, C->lower_bound - C->leaves);
    return 1;
}

/* Store-all frees every activation right after the step DESIGN 3 gives
 * (computed here from the spec, and compared with the analyzer's), and
 * releases every activation storage after the last of its tensors. */
static void check_store_all_lifetimes(const gcase *C, const remat_schedule *s, const oracle *O, const char *json)
{
    const spec *G = &C->G;
    const remat_analysis *a = C->a;
    const uint32_t n = (uint32_t)G->n_ops;
    uint32_t fstep[GN_OPS], bstep[GN_OPS], own_free[GN_T], root_free[GN_T];
    for (int k = 0; k < G->n_ops; k++)
        fstep[k] = a->pos[C->go[k]];
    /* The order is topological... */
    for (int k = 0; k < G->n_ops; k++)
        for (int i = 0; i < G->n_in[k]; i++) {
            int p = G->producer[G->in[k][i]];
            ck_assert(p < 0 || fstep[p] < fstep[k]);
        }
    /* ...and backward runs it in reverse, for the ops that need a BWD. */
    uint32_t nb = 0;
    for (uint32_t i = n; i-- > 0;) {
        int k = C->op_of[a->order[i]];
        bstep[k] = G->has_bwd[k] ? n + nb++ : REMAT_NONE;
        ck_assert_uint_eq(a->bwd_step[C->go[k]], bstep[k]);
    }
    ck_assert_uint_eq(a->n_bwd, nb);
    for (int t = 0; t < G->n_t; t++) {
        own_free[t] = root_free[t] = REMAT_NONE;
        if (G->kind[t] != REMAT_TENSOR_ACTIVATION)
            continue;
        uint32_t lbu = REMAT_NONE, lfu = REMAT_NONE;
        for (int k = 0; k < G->n_ops; k++) {
            if (G->has_bwd[k] && contains(G->save[k], G->n_save[k], t) && (lbu == REMAT_NONE || bstep[k] > lbu))
                lbu = bstep[k];
            if (contains(G->in[k], G->n_in[k], t) && (lfu == REMAT_NONE || fstep[k] > lfu))
                lfu = fstep[k];
        }
        own_free[t] = lbu != REMAT_NONE ? lbu : G->is_out[t] ? n - 1 : lfu != REMAT_NONE ? lfu : fstep[G->producer[t]];
    }
    for (int t = 0; t < G->n_t; t++) {
        int r = G->root[t];
        if (G->kind[t] == REMAT_TENSOR_ACTIVATION && G->kind[r] == REMAT_TENSOR_ACTIVATION &&
            (root_free[r] == REMAT_NONE || own_free[t] > root_free[r]))
            root_free[r] = own_free[t];
    }
    int freed[GN_T] = {0};
    uint32_t step = REMAT_NONE;
    for (size_t i = 0; i < s->n; i++) {
        remat_instr in = s->ins[i];
        if (in.kind == REMAT_I_FWD)
            step = fstep[C->op_of[in.arg]];
        else if (in.kind == REMAT_I_BWD)
            step = bstep[C->op_of[in.arg]];
        else if (in.kind == REMAT_I_FREE) {
            int t = C->t_of[in.arg];
            freed[t]++;
            ck_assert_msg(step == own_free[t], "FREE %s after step %u, expected after %u\n%s", G->tid[t], step,
                          own_free[t], json);
            if (O->release_at[G->root[t]] == i)
                ck_assert_msg(step == root_free[G->root[t]], "storage of %s released early\n%s", G->tid[t], json);
        }
    }
    for (int t = 0; t < G->n_t; t++) {
        if (G->kind[t] != REMAT_TENSOR_ACTIVATION)
            continue;
        ck_assert_msg(freed[t] == 1, "%s freed %d times\n%s", G->tid[t], freed[t], json);
        const remat_lifetime *L = &a->life[C->gt[t]];
        /* The analyzer: a root's free covers its views; a view's is its own. */
        ck_assert_uint_eq(L->free, G->root[t] == t ? root_free[t] : own_free[t]);
        if (G->root[t] == t)
            ck_assert_msg(O->release_at[t] != SIZE_MAX, "storage of %s never released\n%s", G->tid[t], json);
    }
}

/* DESIGN 5's residency promises, read off the instruction list: a kept
 * activation stays resident from its FWD until the last BWD that saves it,
 * and so does a recomputed one from its RECOMPUTE ("a recomputed tensor
 * stays until its last remaining use"). */
static void check_residency_rules(const gcase *C, const remat_schedule *s, const uint8_t *keep, const char *json)
{
    const spec *G = &C->G;
    size_t last_save[GN_T];
    for (int t = 0; t < G->n_t; t++)
        last_save[t] = SIZE_MAX;
    for (size_t i = 0; i < s->n; i++)
        if (s->ins[i].kind == REMAT_I_BWD) {
            int k = C->op_of[s->ins[i].arg];
            for (int j = 0; j < G->n_save[k]; j++)
                last_save[G->save[k][j]] = i;
        }
    for (size_t i = 0; i < s->n; i++) {
        remat_instr in = s->ins[i];
        if (in.kind != REMAT_I_FWD && in.kind != REMAT_I_RECOMPUTE)
            continue;
        int k = C->op_of[in.arg];
        for (int o = 0; o < G->n_out[k]; o++) {
            int t = G->out[k][o];
            int kept = keep[C->gt[t]] || !G->recomputable[k];
            if (last_save[t] == SIZE_MAX || last_save[t] < i || (in.kind == REMAT_I_FWD && !kept))
                continue;
            for (size_t j = i + 1; j < last_save[t]; j++)
                ck_assert_msg(s->ins[j].kind != REMAT_I_FREE || C->t_of[s->ins[j].arg] != t,
                              "%s %s freed at %zu before its last saver at %zu\n%s",
                              kept ? "kept" : "recomputed", G->tid[t], j, last_save[t], json);
        }
    }
}

START_TEST(exec_should_agree_with_an_independent_oracle_on_generated_graphs)
{
    enum { N_GRAPHS = 300, N_KEEPS = 4, JSON_CAP = 1 << 16 };
    uint64_t seed = 0x72656d6174ULL; /* fixed: a failure reproduces */
    char *json = malloc(JSON_CAP);
    oracle O;
    size_t cap = 4096;
    O.hw = malloc(cap * sizeof *O.hw);
    O.live_after = malloc(cap * sizeof *O.live_after);
    O.hw_cat = malloc(cap * REMAT_CAT_COUNT * sizeof *O.hw_cat);
    gcase *C = malloc(sizeof *C);
    ck_assert(json && O.hw && O.live_after && O.hw_cat && C);
    uint64_t replays = 0, with_recompute = 0, views_rebuilt = 0;
    for (int n = 0; n < N_GRAPHS; n++) {
        gen_spec(&seed, &C->G);
        spec_derive(&C->G);
        gcase_load(C, json, JSON_CAP);
        const spec *G = &C->G;
        /* The analyzer derives the same backward pass as DESIGN 2 here. */
        for (int t = 0; t < G->n_t; t++)
            ck_assert_msg(C->a->grad_flows[C->gt[t]] == G->gflow[t], "grad_flows(%s)\n%s", G->tid[t], json);
        bounds(C);
        /* Ledger extras for a third of the graphs. */
        remat_exec_extras x = {0}, *xp = NULL;
        if (rnd(&seed, 3) == 0) {
            x.optimizer_state = rnd(&seed, 5000);
            x.master_weights = rnd(&seed, 5000);
            x.frozen_copies = rnd(&seed, 5000);
            x.comm_buffers = rnd(&seed, 5000);
            x.optimizer_workspace = rnd(&seed, 50000);
            xp = &x;
        }

        remat_schedule sa;
        build_keep(C->a, NULL, &sa);
        ck_assert_uint_lt(sa.n + 1, cap);
        remat_replay_result r;
        replay_vs_oracle(C, &sa, xp, &O, &r, json, 0);
        replays++;
        /* Store-all: each op forward once, each backward step once, no
         * extra work, nothing left resident, frees where DESIGN 3 says. */
        ck_assert_uint_eq(r.flops_recompute, 0);
        for (int k = 0; k < G->n_ops; k++) {
            ck_assert_int_eq(O.n_fwd[k], 1);
            ck_assert_int_eq(O.n_bwd[k], G->has_bwd[k]);
            ck_assert_uint_eq(O.rec_count[k], 0);
        }
        ck_assert_int_eq(O.resident_at_end, 0);
        check_store_all_lifetimes(C, &sa, &O, json);
        uint64_t sa_fwd = r.flops_forward, sa_bwd = r.flops_backward;
        remat_replay_result_destroy(&r);

        /* Keeping everything explicitly is store-all. */
        uint8_t keep[GN_T];
        memset(keep, 1, sizeof keep);
        remat_schedule s;
        build_keep(C->a, keep, &s);
        ck_assert_uint_eq(s.n, sa.n);
        ck_assert(memcmp(s.ins, sa.ins, s.n * sizeof *s.ins) == 0);
        remat_schedule_destroy(&s);

        for (int j = 0; j < N_KEEPS; j++) {
            static const uint32_t pct[N_KEEPS] = {0, 30, 70, 101};
            uint32_t p = pct[j] <= 100 ? pct[j] : rnd(&seed, 101);
            memset(keep, 0, sizeof keep);
            for (int t = 0; t < G->n_t; t++)
                keep[C->gt[t]] = G->kind[t] == REMAT_TENSOR_ACTIVATION && rnd(&seed, 100) < p;
            build_keep(C->a, keep, &s);
            ck_assert_uint_lt(s.n + 1, cap);
            replay_vs_oracle(C, &s, xp, &O, &r, json, 0);
            replays++;
            uint32_t n_rec = 0;
            for (int k = 0; k < G->n_ops; k++)
                n_rec += O.rec_count[k];
            with_recompute += n_rec > 0;
            /* Recomputation changes neither the forward nor the backward
             * work; every FWD and BWD still runs exactly once. */
            ck_assert_uint_eq(r.flops_forward, sa_fwd);
            ck_assert_uint_eq(r.flops_backward, sa_bwd);
            for (int k = 0; k < G->n_ops; k++) {
                ck_assert_int_eq(O.n_fwd[k], 1);
                ck_assert_int_eq(O.n_bwd[k], G->has_bwd[k]);
                /* An op whose outputs are all kept (or cannot be
                 * recomputed) is never recomputed. */
                int all_kept = 1;
                for (int o = 0; o < G->n_out[k]; o++)
                    all_kept &= keep[C->gt[G->out[k][o]]] || !G->recomputable[k];
                if (all_kept)
                    ck_assert_msg(O.rec_count[k] == 0, "kept op %s recomputed\n%s", G->oid[k], json);
                if (O.rec_count[k])
                    for (int o = 0; o < G->n_out[k]; o++)
                        views_rebuilt += G->alias[G->out[k][o]] >= 0;
            }
            check_residency_rules(C, &s, keep, json);
            /* "Free each tensor right after its last remaining use": the
             * optimizer step finds no activation resident. */
            ck_assert_msg(O.resident_at_end == 0, "%d activations left resident\n%s", O.resident_at_end, json);
            remat_replay_result_destroy(&r);
            remat_schedule_destroy(&s);
        }
        remat_schedule_destroy(&sa);
        gcase_destroy(C);
    }
    /* The generator must exercise what it claims to. */
    ck_assert_uint_eq(replays, N_GRAPHS * (N_KEEPS + 1));
    ck_assert_uint_gt(with_recompute, N_GRAPHS);
    ck_assert_uint_gt(views_rebuilt, 10);
    free(C);
    free(O.hw);
    free(O.live_after);
    free(O.hw_cat);
    free(json);
}
END_TEST

/* ---- Random schedules: the executor judges any schedule ----------------- */

/* Builds a random legal schedule from the spec alone: forward in generation
 * order, backward in its reverse, random FREEs of anything recomputable
 * along the way (bases before their views, things needed again soon), each
 * missing tensor rebuilt by recursive RECOMPUTE, now and then a wasteful
 * RECOMPUTE, sometimes a final clean-up, sometimes no explicit OPT. This
 * reaches states the default policy never makes. */
typedef struct {
    const gcase *C;
    remat_schedule *s;
    uint64_t *seed;
    uint8_t res[GN_T];
    uint8_t done[GN_OPS];
} rgen;

static void rg_emit(rgen *R, remat_instr_kind kind, int x)
{
    uint32_t arg = kind == REMAT_I_FREE ? (uint32_t)R->C->gt[x] : kind == REMAT_I_OPT ? 0 : (uint32_t)R->C->go[x];
    ck_assert_int_eq(remat_schedule_push(R->s, kind, arg), REMAT_OK);
}

static void rg_run(rgen *R, int k)
{
    const spec *G = &R->C->G;
    rg_emit(R, R->done[k] ? REMAT_I_RECOMPUTE : REMAT_I_FWD, k);
    R->done[k] = 1;
    for (int j = 0; j < G->n_out[k]; j++)
        R->res[G->out[k][j]] = 1;
}

static void rg_ensure(rgen *R, int t)
{
    const spec *G = &R->C->G;
    if (R->res[t])
        return;
    int p = G->producer[t];
    ck_assert(p >= 0 && R->done[p] && G->recomputable[p]);
    for (int i = 0; i < G->n_in[p]; i++)
        rg_ensure(R, G->in[p][i]);
    rg_run(R, p);
}

static void rg_frees(rgen *R, int max)
{
    const spec *G = &R->C->G;
    int n = (int)rnd(R->seed, (uint32_t)max + 1);
    for (int i = 0; i < n; i++) {
        int t = (int)rnd(R->seed, (uint32_t)G->n_t);
        /* Outputs of non-recomputable ops stay: nothing could rebuild them. */
        if (G->kind[t] != REMAT_TENSOR_ACTIVATION || !R->res[t] || !G->recomputable[G->producer[t]])
            continue;
        rg_emit(R, REMAT_I_FREE, t);
        R->res[t] = 0;
    }
}

static void gen_schedule(const gcase *C, uint64_t *seed, remat_schedule *s)
{
    const spec *G = &C->G;
    rgen R;
    memset(&R, 0, sizeof R);
    R.C = C;
    R.s = s;
    R.seed = seed;
    remat_schedule_init(s);
    for (int t = 0; t < G->n_t; t++)
        R.res[t] = G->kind[t] != REMAT_TENSOR_ACTIVATION;
    for (int k = 0; k < G->n_ops; k++) {
        rg_frees(&R, 2);
        for (int i = 0; i < G->n_in[k]; i++)
            rg_ensure(&R, G->in[k][i]);
        rg_run(&R, k);
        if (rnd(seed, 10) == 0) { /* wasteful, but legal */
            int q = (int)rnd(seed, (uint32_t)k + 1), missing = 0;
            for (int j = 0; j < G->n_out[q]; j++)
                missing |= !R.res[G->out[q][j]];
            if (missing && G->recomputable[q]) {
                for (int i = 0; i < G->n_in[q]; i++)
                    rg_ensure(&R, G->in[q][i]);
                rg_run(&R, q);
            }
        }
    }
    for (int k = G->n_ops - 1; k >= 0; k--) {
        if (!G->has_bwd[k])
            continue;
        rg_frees(&R, 2);
        for (int i = 0; i < G->n_save[k]; i++)
            rg_ensure(&R, G->save[k][i]);
        rg_emit(&R, REMAT_I_BWD, k);
    }
    if (rnd(seed, 2))
        for (int t = 0; t < G->n_t; t++)
            if (G->kind[t] == REMAT_TENSOR_ACTIVATION && R.res[t])
                rg_emit(&R, REMAT_I_FREE, t);
    if (rnd(seed, 10) < 7)
        rg_emit(&R, REMAT_I_OPT, 0);
}

/* One random edit: delete, duplicate, move, or insert a FREE; or turn a FWD
 * into a RECOMPUTE and back. The result may still be legal. */
static void mutate(const gcase *C, uint64_t *seed, remat_schedule *s)
{
    const spec *G = &C->G;
    size_t n = s->n, i = rnd(seed, (uint32_t)n);
    switch (rnd(seed, 5)) {
    case 0: sched_del(s, i); break;
    case 1: sched_ins(s, rnd(seed, (uint32_t)n + 1), s->ins[i]); break;
    case 2: {
        remat_instr in = s->ins[i];
        sched_del(s, i);
        sched_ins(s, rnd(seed, (uint32_t)n), in);
        break;
    }
    case 3: {
        int t = (int)rnd(seed, (uint32_t)G->n_t);
        sched_ins(s, rnd(seed, (uint32_t)n + 1), (remat_instr){REMAT_I_FREE, (uint32_t)C->gt[t]});
        break;
    }
    default:
        if (s->ins[i].kind == REMAT_I_FWD)
            s->ins[i].kind = REMAT_I_RECOMPUTE;
        else if (s->ins[i].kind == REMAT_I_RECOMPUTE)
            s->ins[i].kind = REMAT_I_FWD;
        else
            sched_del(s, i);
        break;
    }
}

START_TEST(exec_should_judge_random_schedules_like_the_oracle)
{
    enum { N_GRAPHS = 200, N_SCHEDULES = 2, N_MUTANTS = 6, JSON_CAP = 1 << 16 };
    uint64_t seed = 0x6a75646765ULL;
    char *json = malloc(JSON_CAP);
    oracle O;
    size_t cap = 4096;
    O.hw = malloc(cap * sizeof *O.hw);
    O.live_after = malloc(cap * sizeof *O.live_after);
    O.hw_cat = malloc(cap * REMAT_CAT_COUNT * sizeof *O.hw_cat);
    gcase *C = malloc(sizeof *C);
    ck_assert(json && O.hw && O.live_after && O.hw_cat && C);
    uint64_t legal = 0, rejected = 0, still_legal = 0, recomputes = 0;
    for (int n = 0; n < N_GRAPHS; n++) {
        gen_spec(&seed, &C->G);
        spec_derive(&C->G);
        gcase_load(C, json, JSON_CAP);
        bounds(C);
        for (int j = 0; j < N_SCHEDULES; j++) {
            remat_schedule s, m;
            gen_schedule(C, &seed, &s);
            ck_assert_uint_lt(s.n + 2, cap);
            remat_replay_result r;
            replay_vs_oracle(C, &s, NULL, &O, &r, json, 0);
            legal++;
            for (int k = 0; k < C->G.n_ops; k++)
                recomputes += O.rec_count[k];
            remat_replay_result_destroy(&r);
            for (int q = 0; q < N_MUTANTS; q++) {
                sched_copy(&m, &s);
                mutate(C, &seed, &m);
                if (replay_vs_oracle(C, &m, NULL, &O, &r, json, 1))
                    still_legal++;
                else
                    rejected++;
                remat_replay_result_destroy(&r);
                remat_schedule_destroy(&m);
            }
            remat_schedule_destroy(&s);
        }
        gcase_destroy(C);
    }
    ck_assert_uint_eq(legal, N_GRAPHS * N_SCHEDULES);
    ck_assert_uint_gt(rejected, N_GRAPHS * N_SCHEDULES);
    ck_assert_uint_gt(still_legal, 100);
    ck_assert_uint_gt(recomputes, N_GRAPHS);
    free(C);
    free(O.hw);
    free(O.live_after);
    free(O.hw_cat);
    free(json);
}
END_TEST

/* ---- Plan files --------------------------------------------------------- */

/* The plan owns its strings and frees them with free() (remat's allocator
 * is malloc underneath); C11 has no strdup. */
static char *dupstr(const char *s)
{
    char *d = malloc(strlen(s) + 1);
    ck_assert_ptr_nonnull(d);
    return strcpy(d, s);
}

static char *write_plan(const remat_analysis *a, const remat_plan *p, const remat_replay_result *r)
{
    remat_err err;
    remat_err_init(&err);
    size_t len;
    char *text = remat_report_plan(a, p, r, &len, &err);
    ck_assert_msg(text != NULL, "%s", err.msg);
    ck_assert_uint_eq(strlen(text), len);
    return text;
}

static void expect_plan_error(const remat_graph *g, const char *text, remat_status code, const char *sub1,
                              const char *sub2)
{
    remat_err err;
    remat_err_init(&err);
    remat_plan p;
    remat_status st = remat_plan_load_json(g, text, strlen(text), "plan.json", &p, &err);
    ck_assert_msg(st == code, "expected %s, got %s (%s)", remat_status_str(code), remat_status_str(st), err.msg);
    ck_assert_msg_contains(&err, sub1);
    if (sub2)
        ck_assert_msg_contains(&err, sub2);
    remat_plan_destroy(&p);
}

START_TEST(exec_should_round_trip_a_plan_file)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(CHAIN4, &g);
    remat_plan p;
    remat_plan_init(&p);
    p.strategy = dupstr("test-strategy");
    p.params_json = dupstr("{\"segments\":2}");
    /* Above 2^53: exact only as a decimal string, which is how it is written. */
    p.budget_kind = REMAT_BUDGET_ACTIVATION;
    p.budget = 9007199254740993ULL;
    p.n_tensors = g->n_tensors;
    p.keep = calloc(g->n_tensors, 1);
    ck_assert(p.strategy && p.params_json && p.keep);
    p.keep[t_tensor(g, "c")] = 1;
    build_keep(a, p.keep, &p.schedule);
    remat_replay_result r;
    replay_valid(a, &p.schedule, NULL, &r);
    char *text = write_plan(a, &p, &r);
    ck_assert_ptr_nonnull(strstr(text, "\"keep\": [\"c\"]"));
    ck_assert_ptr_nonnull(strstr(text, "\"RECOMPUTE a\""));

    remat_plan q;
    remat_err err;
    remat_err_init(&err);
    ck_assert_msg(remat_plan_load_json(g, text, strlen(text), "p.json", &q, &err) == REMAT_OK, "%s\n%s", err.msg,
                  text);
    ck_assert_str_eq(q.graph_name, "chain4");
    ck_assert_uint_eq(q.graph_fingerprint, g->fingerprint);
    ck_assert_str_eq(q.strategy, "test-strategy");
    ck_assert_str_eq(q.params_json, "{\"segments\":2}");
    ck_assert_int_eq(q.budget_kind, REMAT_BUDGET_ACTIVATION);
    ck_assert_uint_eq(q.budget, 9007199254740993ULL);
    ck_assert_uint_eq(q.n_tensors, g->n_tensors);
    for (uint32_t t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].kind == REMAT_TENSOR_ACTIVATION)
            ck_assert_msg(q.keep[t] == p.keep[t], "keep[%s]", g->tensors[t].id);
    ck_assert_uint_eq(q.schedule.n, p.schedule.n);
    ck_assert(memcmp(q.schedule.ins, p.schedule.ins, p.schedule.n * sizeof *p.schedule.ins) == 0);
    /* Written again, the same document. */
    remat_replay_result r2;
    replay_valid(a, &q.schedule, NULL, &r2);
    ck_assert_uint_eq(r2.peak_bytes, r.peak_bytes);
    char *again = write_plan(a, &q, &r2);
    ck_assert_str_eq(again, text);
    remat_free(again);
    remat_replay_result_destroy(&r2);
    remat_plan_destroy(&q);

    /* A total budget in the JSON-number form, no budget, no params. */
    char buf[4096];
    snprintf(buf, sizeof buf,
             "{\"format\":\"remat-plan\",\"version\":1,\"graph\":{\"name\":\"chain4\",\"fingerprint\":\"%016llx\"},"
             "\"budget\":{\"kind\":\"total\",\"bytes\":4096},\"keep\":[],\"schedule\":[\"FWD a\",\"OPT\"]}",
             (unsigned long long)g->fingerprint);
    ck_assert_msg(remat_plan_load_json(g, buf, strlen(buf), "p.json", &q, &err) == REMAT_OK, "%s", err.msg);
    ck_assert_int_eq(q.budget_kind, REMAT_BUDGET_TOTAL);
    ck_assert_uint_eq(q.budget, 4096);
    ck_assert_uint_eq(q.schedule.n, 2);
    ck_assert_uint_eq(q.schedule.ins[1].kind, REMAT_I_OPT);
    remat_plan_destroy(&q);

    remat_free(text);
    remat_replay_result_destroy(&r);
    remat_plan_destroy(&p);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(exec_should_refuse_a_plan_for_another_graph)
{
    remat_graph *g, *g2;
    remat_analysis *a = t_analyze(MLP2, &g);
    remat_analysis *a2 = t_analyze(CHAIN4, &g2);
    remat_plan p;
    remat_plan_init(&p);
    build_keep(a, NULL, &p.schedule);
    char *text = write_plan(a, &p, NULL);
    expect_plan_error(g2, text, REMAT_EPLAN, "made for graph 'mlp2'", "not for graph 'chain4'");
    /* Same name, different content: the fingerprint decides, and the
     * message shows both fingerprints. */
    char *mlp2b = dupstr(MLP2);
    ck_assert_ptr_nonnull(mlp2b);
    char *at = strstr(mlp2b, "\"bytes\":4096}]");
    ck_assert_ptr_nonnull(at);
    memcpy(at, "\"bytes\":4097}]", 14);
    remat_graph *g3;
    remat_analysis *a3 = t_analyze(mlp2b, &g3);
    ck_assert_uint_ne(g3->fingerprint, g->fingerprint);
    char fp[32];
    snprintf(fp, sizeof fp, "%016llx", (unsigned long long)g3->fingerprint);
    expect_plan_error(g3, text, REMAT_EPLAN, "made for graph 'mlp2'", fp);
    remat_analysis_destroy(a3);
    remat_graph_destroy(g3);
    free(mlp2b);
    remat_free(text);
    remat_plan_destroy(&p);
    remat_analysis_destroy(a2);
    remat_graph_destroy(g2);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(exec_should_name_the_json_path_of_a_bad_plan_entry)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(MLP2, &g);
    char head[256], buf[2048];
    snprintf(head, sizeof head,
             "{\"format\":\"remat-plan\",\"version\":1,\"graph\":{\"name\":\"mlp2\",\"fingerprint\":\"%016llx\"},",
             (unsigned long long)g->fingerprint);
    static const char *const cases[][3] = {
        {"\"schedule\":[\"FWD h1\",\"FWD a1\",\"FREE h1\",\"JUMP v1\"]}", "plan.json: schedule[3]",
         "unknown instruction 'JUMP v1'"},
        {"\"schedule\":[\"FWD h1\",\"FWD nope\"]}", "plan.json: schedule[1]", "unknown op id 'nope'"},
        {"\"schedule\":[\"FWD h1\",\"FREE zz\"]}", "plan.json: schedule[1]", "unknown tensor id 'zz'"},
        /* An op id where a tensor is expected, and the reverse. */
        {"\"schedule\":[\"FWD x\"]}", "schedule[0]", "unknown op id 'x'"},
        {"\"schedule\":[\"BWD\"]}", "schedule[0]", "'BWD' needs an op id"},
        {"\"schedule\":[\"OPT now\"]}", "schedule[0]", "OPT takes no argument"},
        {"\"schedule\":[\"FWD h1\",7]}", "schedule[1]", "must be a string"},
        {"\"keep\":[\"a1\",\"zz\"],\"schedule\":[]}", "plan.json: keep[1]", "unknown tensor id 'zz'"},
        {"\"schedule\":{}}", "plan.json: schedule", "not an array"},
        {"\"budget\":{\"kind\":\"most\",\"bytes\":1},\"schedule\":[]}", "budget.kind", "\"total\" or \"activation\""},
        {"\"budget\":{\"kind\":\"total\",\"bytes\":1.5},\"schedule\":[]}", "budget.bytes", "non-negative integer"},
        {"\"frobs\":1,\"schedule\":[]}", "plan.json", "unknown field 'frobs'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(buf, sizeof buf, "%s%s", head, cases[i][0]);
        expect_plan_error(g, buf, REMAT_EPLAN, cases[i][1], cases[i][2]);
    }
    expect_plan_error(g, "{\"format\":\"remat-plan\",\n \"version\": 1,\n \"graph\": [}", REMAT_EPARSE,
                      "plan.json:3:", "not valid JSON");
    expect_plan_error(g, "{\"format\":\"remat-graph\",\"version\":1}", REMAT_EPLAN, "format", "remat-plan");
    expect_plan_error(g, "{\"format\":\"remat-plan\",\"version\":2}", REMAT_EPLAN, "version", "version 1");
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* ---- Failure paths ------------------------------------------------------ */

START_TEST(exec_should_report_byte_overflow_instead_of_wrapping)
{
    /* 2^63 + 2^63 does not fit in 64 bits: the replay says so instead of
     * reporting a wrapped peak. Byte counts above 2^53 are decimal strings. */
    remat_graph *g;
    remat_analysis *a = t_analyze(
        "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"huge\","
        "\"inputs\":[{\"id\":\"x\",\"bytes\":\"9223372036854775808\"}],\"params\":[{\"id\":\"w\",\"bytes\":8}],"
        "\"ops\":[{\"id\":\"a\",\"op\":\"f\",\"inputs\":[\"x\",\"w\"],\"bytes\":\"9223372036854775808\",\"flops\":1}],"
        "\"outputs\":[\"a\"]}",
        &g);
    remat_schedule s;
    remat_schedule_init(&s);
    sched_parse(g, "FWD a, BWD a, FREE a, OPT", &s);
    remat_replay_result r;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_replay(a, &s, NULL, NULL, &r, &err), REMAT_EOVERFLOW);
    ck_assert_msg_contains(&err, "instruction 0");
    ck_assert_msg_contains(&err, "2^64-1");
    ck_assert_ptr_null(r.recompute_counts);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

static int refuse_step(void *ctx, size_t index, remat_instr in, uint64_t live_after, uint64_t high_water,
                       const uint64_t *hw_by_category)
{
    (void)in, (void)live_after, (void)high_water, (void)hw_by_category;
    return index == *(size_t *)ctx;
}

START_TEST(exec_should_stop_when_an_observer_fails)
{
    remat_graph *g;
    remat_schedule s;
    remat_analysis *a = mlp2_schedule(&g, &s);
    size_t stop_at = 5;
    remat_replay_observer obs = {0};
    obs.ctx = &stop_at;
    obs.on_step = refuse_step;
    remat_replay_result r;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_replay(a, &s, NULL, &obs, &r, &err), REMAT_EINTERNAL);
    ck_assert_msg_contains(&err, "instruction 5: replay observer failed");
    ck_assert_ptr_null(r.recompute_counts);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* Every allocation of the policy, the replay, the plan reader and the
 * writers fails in turn: each reports out of memory, frees what it made
 * (ASan's leak check), and the next attempt gets further. */
START_TEST(exec_should_fail_cleanly_when_memory_runs_out)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(CHAIN4, &g);
    uint8_t keep[8] = {0};
    int failures = 0;
    remat_schedule s;
    for (uint64_t n = 1;; n++) {
        remat_err err;
        remat_err_init(&err);
        remat_schedule_init(&s);
        remat__alloc_fail_at(n);
        remat_status st = remat_schedule_from_keep(a, keep, &s, &err);
        remat__alloc_fail_at(0);
        if (st == REMAT_OK)
            break;
        ck_assert_msg(st == REMAT_ENOMEM, "allocation %llu: %s", (unsigned long long)n, err.msg);
        ck_assert_msg_contains(&err, "out of memory");
        remat_schedule_destroy(&s);
        failures++;
    }
    ck_assert_int_gt(failures, 3);
    remat_replay_result r;
    for (uint64_t n = 1;; n++) {
        remat_err err;
        remat_err_init(&err);
        remat__alloc_fail_at(n);
        remat_status st = remat_replay(a, &s, NULL, NULL, &r, &err);
        remat__alloc_fail_at(0);
        if (st == REMAT_OK)
            break;
        ck_assert_msg(st == REMAT_ENOMEM, "allocation %llu: %s", (unsigned long long)n, err.msg);
        ck_assert_msg_contains(&err, "out of memory");
        ck_assert_ptr_null(r.recompute_counts);
        failures++;
    }
    ck_assert(r.valid);
    remat_plan p;
    remat_plan_init(&p);
    p.n_tensors = g->n_tensors;
    p.keep = calloc(g->n_tensors, 1);
    ck_assert_ptr_nonnull(p.keep);
    sched_copy(&p.schedule, &s);
    for (int doc = 0; doc < 3; doc++)
        for (uint64_t n = 1;; n++) {
            remat_err err;
            remat_err_init(&err);
            size_t len;
            remat__alloc_fail_at(n);
            char *text = doc == 0   ? remat_report_replay(a, &s, &r, NULL, REMAT_REPORT_JSON, &len, &err)
                         : doc == 1 ? remat_report_replay(a, &s, &r, NULL, REMAT_REPORT_TEXT, &len, &err)
                                    : remat_report_plan(a, &p, &r, &len, &err);
            remat__alloc_fail_at(0);
            if (text) {
                remat_free(text);
                break;
            }
            ck_assert_int_eq(err.code, REMAT_ENOMEM);
            ck_assert_msg_contains(&err, "out of memory");
        }
    /* The plan reader too, including allocations inside cJSON's parser,
     * which say out of memory rather than "not valid JSON". */
    char *text = write_plan(a, &p, &r);
    for (uint64_t n = 1;; n++) {
        remat_err err;
        remat_err_init(&err);
        remat_plan q;
        remat__alloc_fail_at(n);
        remat_status st = remat_plan_load_json(g, text, strlen(text), "p.json", &q, &err);
        remat__alloc_fail_at(0);
        remat_plan_destroy(&q);
        if (st == REMAT_OK)
            break;
        ck_assert_msg(st == REMAT_ENOMEM, "allocation %llu: %s: %s", (unsigned long long)n, remat_status_str(st),
                      err.msg);
        ck_assert_msg_contains(&err, "out of memory");
    }
    remat_free(text);
    remat_plan_destroy(&p);
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
    suite_add_tcase(s, hand);
    TCase *mut = tcase_create("mutation");
    tcase_add_test(mut, exec_should_reject_reading_a_freed_tensor);
    tcase_add_test(mut, exec_should_reject_a_dropped_recompute);
    tcase_add_test(mut, exec_should_reject_double_free_and_freeing_leaves);
    tcase_add_test(mut, exec_should_reject_repeated_missing_and_misordered_backward_steps);
    tcase_add_test(mut, exec_should_name_a_missing_backward_step_at_the_end);
    tcase_add_test(mut, exec_should_reject_bad_forward_and_recompute_steps);
    tcase_add_test(mut, exec_should_reject_a_forward_step_that_never_ran);
    suite_add_tcase(s, mut);
    TCase *orc = tcase_create("oracle");
    tcase_set_timeout(orc, 60);
    tcase_add_test(orc, exec_should_agree_with_an_independent_oracle_on_generated_graphs);
    tcase_add_test(orc, exec_should_judge_random_schedules_like_the_oracle);
    suite_add_tcase(s, orc);
    TCase *plan = tcase_create("plan");
    tcase_add_test(plan, exec_should_round_trip_a_plan_file);
    tcase_add_test(plan, exec_should_refuse_a_plan_for_another_graph);
    tcase_add_test(plan, exec_should_name_the_json_path_of_a_bad_plan_entry);
    suite_add_tcase(s, plan);
    TCase *fail = tcase_create("failure");
    tcase_add_test(fail, exec_should_report_byte_overflow_instead_of_wrapping);
    tcase_add_test(fail, exec_should_stop_when_an_observer_fails);
    tcase_add_test(fail, exec_should_fail_cleanly_when_memory_runs_out);
    suite_add_tcase(s, fail);
    return s;
}

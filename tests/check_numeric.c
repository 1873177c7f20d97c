/*
 * check_numeric.c - numeric replay, checked for what it claims: the
 * parameter-gradient hash is the same under store-all and under random keep
 * sets (on hand-written graphs with a view, a multi-output op, workspace, a
 * repeated input, a non-recomputable op, and on randomly generated graphs),
 * it changes when the graph changes, the allocator's high-water mark equals
 * the accounted peak at scale 1 (equal to remat_replay's peak) and at scale 7
 * (equal to a hand computation for mlp2), and injected faults are reported:
 * a recomputation that differs (with the tensor's name) and an allocator that
 * holds more than the accounting says.
 *
 * BLAKE2b, the hash it digests with, is checked in check_numeric_hash.c (the
 * suite's "hash" case).
 */
#include "check_numeric.h"
#include "train/numeric_internal.h"
#include "util/util_internal.h"

#include <stdio.h>
#include <stdlib.h>

/* Graph texts are written with single quotes; q() turns them into JSON. */
static char *q(const char *s)
{
    char *d = malloc(strlen(s) + 1);
    ck_assert_ptr_nonnull(d);
    size_t i = 0;
    for (; s[i]; i++)
        d[i] = s[i] == '\'' ? '"' : s[i];
    d[i] = '\0';
    return d;
}

static remat_analysis *analyze_q(const char *text, remat_graph **g)
{
    char *json = q(text);
    remat_analysis *a = t_analyze(json, g);
    free(json);
    return a;
}

/* ---- graphs ---------------------------------------------------------------- */

/* DESIGN's example: a view (v1 of a1), relu saving its output, a sum that
 * saves nothing, a frozen param. */
static const char *MLP2 =
    "{'format':'remat-graph','version':1,'name':'mlp2',"
    "'inputs':[{'id':'x','bytes':4096}],"
    "'params':[{'id':'w1','bytes':65536},{'id':'w2','bytes':65536,'frozen':true}],"
    "'ops':["
    "{'id':'h1','op':'matmul','inputs':['x','w1'],'bytes':4096,'flops':131072},"
    "{'id':'a1','op':'relu','inputs':['h1'],'bytes':4096,'flops':1024,'saves':['a1']},"
    "{'id':'v1','op':'view','inputs':['a1'],'alias_of':'a1'},"
    "{'id':'h2','op':'matmul','inputs':['v1','w2'],'bytes':4096,'flops':131072},"
    "{'id':'loss','op':'sum','inputs':['h2'],'bytes':4,'flops':1024,'saves':[]}],"
    "'outputs':['loss']}";

/* A chain of linear layers with odd sizes (so scaling rounds) and
 * workspace in both directions. */
static const char *CHAIN =
    "{'format':'remat-graph','version':1,'name':'chain',"
    "'inputs':[{'id':'x','bytes':1001}],"
    "'params':[{'id':'w0','bytes':517},{'id':'w1','bytes':333},{'id':'w2','bytes':901},"
    "{'id':'w3','bytes':64},{'id':'w4','bytes':1000}],"
    "'ops':["
    "{'id':'l0','op':'linear','inputs':['x','w0'],'bytes':1203,'flops':100,'workspace':700,'bwd_workspace':1500},"
    "{'id':'l1','op':'linear','inputs':['l0','w1'],'bytes':999,'flops':100,'workspace':13},"
    "{'id':'l2','op':'linear','inputs':['l1','w2'],'bytes':2048,'flops':100,'bwd_workspace':4000},"
    "{'id':'l3','op':'linear','inputs':['l2','w3'],'bytes':777,'flops':100},"
    "{'id':'l4','op':'linear','inputs':['l3','w4'],'bytes':1500,'flops':100,'workspace':2999},"
    "{'id':'l5','op':'tanh','inputs':['l4'],'bytes':1500,'flops':10,'saves':['l5']},"
    "{'id':'loss','op':'sum','inputs':['l5'],'bytes':8,'flops':10,'saves':[]}],"
    "'outputs':['loss']}";

/* Everything at once: a view of a param, a multi-output op whose backward
 * saves its side outputs, a view of one of those outputs, an op that reads
 * the same tensor twice, a non-recomputable op, a residual (diamond), an
 * op saving a tensor that is not its own input or output, an input that
 * wants a gradient, and workspace. */
static const char *MIXED =
    "{'format':'remat-graph','version':1,'name':'mixed',"
    "'inputs':[{'id':'x','bytes':3000,'requires_grad':true}],"
    "'params':[{'id':'w','bytes':2048},{'id':'g','bytes':512},{'id':'b2','bytes':100}],"
    "'ops':["
    "{'id':'wt','op':'transpose','inputs':['w'],'alias_of':'w'},"
    "{'id':'m1','op':'matmul','inputs':['x','wt'],'bytes':3000,'flops':500,'workspace':777},"
    "{'id':'ln','op':'layernorm','inputs':['m1','g'],'flops':90,'workspace':100,'bwd_workspace':333,"
    " 'outputs':[{'id':'y','bytes':3000},{'id':'mu','bytes':24},{'id':'rs','bytes':24}],"
    " 'saves':['m1','g','mu','rs']},"
    "{'id':'yv','op':'reshape','inputs':['y'],'alias_of':'y'},"
    "{'id':'sq','op':'mul','inputs':['yv','yv'],'bytes':3000,'flops':30},"
    "{'id':'dr','op':'dropout','inputs':['sq'],'bytes':3000,'flops':30,'recomputable':false,'saves':['dr']},"
    "{'id':'r','op':'add','inputs':['dr','m1'],'bytes':3000,'flops':30,'saves':[]},"
    "{'id':'h','op':'matmul','inputs':['r','b2'],'bytes':1001,'flops':200,'saves':['r','b2','mu'],"
    " 'bwd_workspace':5000},"
    "{'id':'loss','op':'sum','inputs':['h'],'bytes':8,'flops':10,'saves':[]}],"
    "'outputs':['loss']}";

/* Two branches from one input that meet again, each with a param. */
static const char *DIAMOND =
    "{'format':'remat-graph','version':1,'name':'diamond',"
    "'inputs':[{'id':'x','bytes':640}],"
    "'params':[{'id':'p','bytes':320},{'id':'q','bytes':320}],"
    "'ops':["
    "{'id':'a','op':'f','inputs':['x'],'bytes':640,'flops':5},"
    "{'id':'b','op':'g','inputs':['a','p'],'bytes':640,'flops':5},"
    "{'id':'c','op':'g','inputs':['a','q'],'bytes':640,'flops':5,'workspace':640},"
    "{'id':'d','op':'add','inputs':['b','c'],'bytes':640,'flops':5,'saves':[]},"
    "{'id':'e','op':'g','inputs':['d','a'],'bytes':640,'flops':5},"
    "{'id':'loss','op':'sum','inputs':['e'],'bytes':8,'flops':1,'saves':[]}],"
    "'outputs':['loss']}";

/* ---- helpers ----------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
    /* xorshift64*: deterministic, independent of libc's rand. */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

static void numeric_ok(const remat_analysis *a, const remat_schedule *s, uint64_t scale, remat_numeric_result *nr)
{
    remat_err err;
    remat_err_init(&err);
    remat_status st = remat_numeric_replay(a, s, scale, nr, &err);
    ck_assert_msg(st == REMAT_OK, "numeric replay failed: %s", err.msg);
    ck_assert_msg(nr->replay.valid, "schedule invalid: %s", err.msg);
    ck_assert_msg(nr->ran && nr->verified, "not verified: %s", err.msg);
    ck_assert_uint_eq(nr->mismatches, 0);
    ck_assert_msg(nr->equal, "allocator %llu != accounted %llu", (unsigned long long)nr->allocator_peak_bytes,
                  (unsigned long long)nr->accounted_peak_bytes_scaled);
    ck_assert_uint_eq(nr->allocator_peak_bytes, nr->accounted_peak_bytes_scaled);
    ck_assert_uint_eq(strlen(nr->param_grad_hash_hex), 64);
}

static void schedule_for_keep(const remat_analysis *a, const uint8_t *keep, remat_schedule *s)
{
    remat_err err;
    remat_err_init(&err);
    remat_schedule_init(s);
    remat_status st = keep ? remat_schedule_from_keep(a, keep, s, &err) : remat_schedule_store_all(a, s, &err);
    ck_assert_msg(st == REMAT_OK, "policy failed: %s", err.msg);
}

typedef struct {
    uint64_t runs, recomputes_checked, schedules_with_recompute;
    uint64_t graphs_with_param_grads;
    uint32_t last_params_hashed;
} sweep_stats;

/* Store-all's hash at scales 1 and 7 against `keep_sets` random keep sets:
 * every plan verifies and hashes the same; at scale 1 the allocator's peak
 * is remat_replay's peak. */
static void sweep(const remat_analysis *a, uint64_t seed, int keep_sets, sweep_stats *stats)
{
    const remat_graph *g = a->g;
    static const uint64_t scales[2] = {1, 7};
    uint8_t ref[2][32];
    for (int si = 0; si < 2; si++) {
        remat_schedule s;
        schedule_for_keep(a, NULL, &s);
        remat_numeric_result nr;
        numeric_ok(a, &s, scales[si], &nr);
        ck_assert_uint_eq(nr.recomputed_tensors_checked, 0);
        if (scales[si] == 1)
            ck_assert_uint_eq(nr.allocator_peak_bytes, nr.replay.peak_bytes);
        memcpy(ref[si], nr.param_grad_hash, 32);
        stats->last_params_hashed = nr.param_grads_hashed;
        remat_numeric_result_destroy(&nr);
        remat_schedule_destroy(&s);
    }
    if (stats->last_params_hashed > 0)
        ck_assert_msg(memcmp(ref[0], ref[1], 32) != 0, "scale 7 should hash other bytes than scale 1");
    stats->graphs_with_param_grads += stats->last_params_hashed > 0;
    uint8_t *keep = calloc(g->n_tensors ? g->n_tensors : 1, 1);
    ck_assert_ptr_nonnull(keep);
    uint64_t rng = seed * 0x9E3779B97F4A7C15ULL + 1;
    for (int k = 0; k < keep_sets; k++) {
        /* Vary the density: some sets keep almost nothing, some almost all. */
        uint64_t density = rng_next(&rng) % 5;
        for (uint32_t t = 0; t < g->n_tensors; t++)
            keep[t] = (uint8_t)(rng_next(&rng) % 4 < density);
        remat_schedule s;
        schedule_for_keep(a, keep, &s);
        for (int si = 0; si < 2; si++) {
            remat_numeric_result nr;
            numeric_ok(a, &s, scales[si], &nr);
            ck_assert_msg(memcmp(nr.param_grad_hash, ref[si], 32) == 0,
                          "graph %s, keep set %d, scale %llu: parameter-gradient hash differs from store-all", g->name,
                          k, (unsigned long long)scales[si]);
            if (scales[si] == 1)
                ck_assert_msg(nr.allocator_peak_bytes == nr.replay.peak_bytes,
                              "graph %s, keep set %d: allocator peak %llu, replay peak %llu", g->name, k,
                              (unsigned long long)nr.allocator_peak_bytes, (unsigned long long)nr.replay.peak_bytes);
            stats->runs++;
            stats->recomputes_checked += nr.recomputed_tensors_checked;
            stats->schedules_with_recompute += si == 0 && nr.replay.flops_recompute + nr.recomputed_tensors_checked > 0;
            remat_numeric_result_destroy(&nr);
        }
        remat_schedule_destroy(&s);
    }
    free(keep);
}

/* ---- numeric replay ---------------------------------------------------------- */

START_TEST(numeric_should_hash_the_same_under_random_keep_sets)
{
    const char *graphs[] = {MLP2, CHAIN, MIXED, DIAMOND};
    sweep_stats stats = {0, 0, 0, 0, 0};
    for (size_t i = 0; i < sizeof graphs / sizeof graphs[0]; i++) {
        remat_graph *g;
        remat_analysis *a = analyze_q(graphs[i], &g);
        sweep(a, i + 1, 60, &stats);
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
    }
    /* The sweep must have exercised recomputation, not only store-all. */
    ck_assert_uint_gt(stats.schedules_with_recompute, 100); /* of 240 keep sets */
    ck_assert_uint_gt(stats.recomputes_checked, 500);
    ck_assert_uint_eq(stats.graphs_with_param_grads, 4);
}
END_TEST

/* A random graph: leaves, then ops that read 1-3 recent tensors (sometimes
 * the same one twice, sometimes a param), some views (of activations and of
 * leaves), some multi-output ops, random saves, workspace, and now and then
 * a non-recomputable op; a loss reads the last two tensors. */
static char *random_graph(uint64_t *rng, int n_ops)
{
    enum { MAXT = 256 };
    char ids[MAXT][16];
    int nt = 0;
    remat_buf b;
    remat_buf_init(&b);
    remat_buf_printf(&b, "{'format':'remat-graph','version':1,'name':'rand','inputs':[");
    for (int i = 0; i < 2; i++) {
        snprintf(ids[nt], sizeof ids[nt], "x%d", i);
        remat_buf_printf(&b, "%s{'id':'%s','bytes':%llu%s}", i ? "," : "", ids[nt],
                         (unsigned long long)(1 + rng_next(rng) % 3000), rng_next(rng) % 2 ? ",'requires_grad':true" : "");
        nt++;
    }
    remat_buf_puts(&b, "],'params':[");
    for (int i = 0; i < 4; i++) {
        snprintf(ids[nt], sizeof ids[nt], "p%d", i);
        remat_buf_printf(&b, "%s{'id':'%s','bytes':%llu%s}", i ? "," : "", ids[nt],
                         (unsigned long long)(1 + rng_next(rng) % 2000), i == 3 ? ",'frozen':true" : "");
        nt++;
    }
    remat_buf_puts(&b, "],'ops':[");
    for (int k = 0; k < n_ops && nt + 3 < MAXT; k++) {
        uint64_t kind = rng_next(rng) % 10;
        remat_buf_puts(&b, k ? ",\n" : "\n");
        int pick = nt - 1 - (int)(rng_next(rng) % (uint64_t)(nt < 5 ? nt : 5));
        if (kind == 0) {
            snprintf(ids[nt], sizeof ids[nt], "v%d", k);
            remat_buf_printf(&b, "{'id':'%s','op':'view','inputs':['%s'],'alias_of':'%s'}", ids[nt], ids[pick],
                             ids[pick]);
            nt++;
            continue;
        }
        int n_in = 1 + (int)(rng_next(rng) % 3);
        remat_buf_printf(&b, "{'id':'o%d','op':'f%d','inputs':['%s'", k, (int)(rng_next(rng) % 3), ids[pick]);
        for (int i = 1; i < n_in; i++) {
            int j = rng_next(rng) % 3 == 0 ? 2 + (int)(rng_next(rng) % 4) /* a param */
                                           : nt - 1 - (int)(rng_next(rng) % (uint64_t)(nt < 6 ? nt : 6));
            remat_buf_printf(&b, ",'%s'", ids[j]);
        }
        remat_buf_puts(&b, "]");
        int first = nt;
        if (kind == 1) {
            int n_out = 2 + (int)(rng_next(rng) % 2);
            remat_buf_puts(&b, ",'outputs':[");
            for (int j = 0; j < n_out; j++) {
                snprintf(ids[nt], sizeof ids[nt], "o%d_%d", k, j);
                remat_buf_printf(&b, "%s{'id':'%s','bytes':%llu}", j ? "," : "", ids[nt],
                                 (unsigned long long)(rng_next(rng) % 2500));
                nt++;
            }
            remat_buf_puts(&b, "]");
        } else {
            snprintf(ids[nt], sizeof ids[nt], "o%d", k);
            remat_buf_printf(&b, ",'bytes':%llu", (unsigned long long)(1 + rng_next(rng) % 4000));
            nt++;
        }
        switch (rng_next(rng) % 4) {
        case 0: remat_buf_puts(&b, ",'saves':[]"); break;
        case 1: remat_buf_printf(&b, ",'saves':['%s']", ids[first]); break;
        case 2: remat_buf_printf(&b, ",'saves':['%s','%s']", ids[first], ids[pick]); break;
        default: break; /* the default: its inputs */
        }
        if (rng_next(rng) % 2)
            remat_buf_printf(&b, ",'workspace':%llu", (unsigned long long)(rng_next(rng) % 3000));
        if (rng_next(rng) % 2)
            remat_buf_printf(&b, ",'bwd_workspace':%llu", (unsigned long long)(rng_next(rng) % 5000));
        if (rng_next(rng) % 12 == 0)
            remat_buf_puts(&b, ",'recomputable':false");
        remat_buf_printf(&b, ",'flops':%llu}", (unsigned long long)(1 + rng_next(rng) % 1000));
    }
    remat_buf_printf(&b, ",\n{'id':'loss','op':'sum','inputs':['%s','%s'],'bytes':8,'flops':1,'saves':[]}],"
                         "'outputs':['loss']}",
                     ids[nt - 1], ids[nt - 2]);
    ck_assert(!b.failed);
    return b.data;
}

START_TEST(numeric_should_hash_the_same_on_random_graphs)
{
    uint64_t rng = 0xC0FFEE;
    sweep_stats stats = {0, 0, 0, 0, 0};
    for (int i = 0; i < 25; i++) {
        char *text = random_graph(&rng, 8 + (int)(rng_next(&rng) % 25));
        remat_graph *g;
        remat_analysis *a = analyze_q(text, &g);
        sweep(a, 100 + (uint64_t)i, 12, &stats);
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
        remat_free(text);
    }
    ck_assert_uint_gt(stats.schedules_with_recompute, 150); /* of 300 keep sets */
    ck_assert_uint_ge(stats.graphs_with_param_grads, 20); /* of 25 graphs */
}
END_TEST

static void hash_of(const char *text, uint64_t scale, uint8_t out[32])
{
    remat_graph *g;
    remat_analysis *a = analyze_q(text, &g);
    remat_schedule s;
    schedule_for_keep(a, NULL, &s);
    remat_numeric_result nr;
    numeric_ok(a, &s, scale, &nr);
    memcpy(out, nr.param_grad_hash, 32);
    remat_numeric_result_destroy(&nr);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}

/* A copy of text with the first occurrence of `from` replaced by `to`. */
static char *mutate(const char *text, const char *from, const char *to)
{
    const char *at = strstr(text, from);
    ck_assert_msg(at != NULL, "'%s' not in the graph", from);
    size_t head = (size_t)(at - text), n = strlen(text) - strlen(from) + strlen(to);
    char *d = malloc(n + 1);
    ck_assert_ptr_nonnull(d);
    memcpy(d, text, head);
    strcpy(d + head, to);
    strcat(d, at + strlen(from));
    return d;
}

START_TEST(numeric_should_change_hash_when_the_graph_changes)
{
    uint8_t ref[32], h[32];
    hash_of(MLP2, 1, ref);
    static const struct {
        const char *from, *to;
    } edits[] = {
        {"'bytes':4096,'flops':131072}", "'bytes':4097,'flops':131072}"}, /* h1 one byte larger */
        {"'inputs':['x','w1']", "'inputs':['w1','x']"},                   /* h1's inputs swapped */
        {"'saves':['a1']", "'saves':['h1']"},                             /* relu saves its input */
        {"{'id':'x','bytes':4096}", "{'id':'x','bytes':4095}"},           /* the data one byte shorter */
        {"'op':'matmul','inputs':['v1','w2']", "'op':'matmul','inputs':['a1','w2']"}, /* bypass the view */
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        char *text = mutate(MLP2, edits[i].from, edits[i].to);
        hash_of(text, 1, h);
        ck_assert_msg(memcmp(h, ref, 32) != 0, "edit %zu (%s) left the hash unchanged", i, edits[i].to);
        free(text);
    }
    /* Renaming the loss changes its gradient seed; renaming a param changes
     * its data and its place in the hash. */
    char *text = mutate(MLP2, "'id':'w1','bytes'", "'id':'w9','bytes'");
    char *t2 = mutate(text, "['x','w1']", "['x','w9']");
    hash_of(t2, 1, h);
    ck_assert(memcmp(h, ref, 32) != 0);
    free(text);
    free(t2);
    /* The same graph again: the same hash (nothing depends on addresses). */
    hash_of(MLP2, 1, h);
    ck_assert_mem_eq(h, ref, 32);
}
END_TEST

START_TEST(numeric_should_match_hand_computed_peaks_for_mlp2)
{
    remat_graph *g;
    remat_analysis *a = analyze_q(MLP2, &g);
    remat_schedule s;
    schedule_for_keep(a, NULL, &s);
    remat_numeric_result nr;
    /* Scale 1: leaves x + w1 + w2 = 135168; the peak is bwd:h1, which holds
     * the leaves, h1's gradient (4096) and w1's new gradient (65536). */
    numeric_ok(a, &s, 1, &nr);
    ck_assert_uint_eq(nr.replay.peak_bytes, 204800);
    ck_assert_uint_eq(nr.allocator_peak_bytes, 204800);
    ck_assert_uint_eq(nr.param_grads_hashed, 1); /* w2 is frozen */
    ck_assert_uint_gt(nr.peak_rss_bytes, 0);
    ck_assert(nr.wall_seconds >= 0);
    remat_numeric_result_destroy(&nr);
    /* Scale 7, every buffer rounded up: x 4096 -> 586, w 65536 -> 9363,
     * 4096-byte activations and gradients -> 586. The same step:
     * 586 + 2 * 9363 + 586 + 9363 = 29261. */
    numeric_ok(a, &s, 7, &nr);
    ck_assert_uint_eq(nr.accounted_peak_bytes_scaled, 29261);
    ck_assert_uint_eq(nr.allocator_peak_bytes, 29261);
    remat_numeric_result_destroy(&nr);
    /* A scale larger than every tensor: each buffer is one byte, so the
     * peak counts buffers. bwd:h1 holds 5 (3 leaves, h1's and w1's
     * gradients); bwd:loss holds 6: the leaves, a1 (v1 keeps it for bwd:h2),
     * the loss's seed and h2's new gradient. */
    numeric_ok(a, &s, 1000000, &nr);
    ck_assert_uint_eq(nr.allocator_peak_bytes, 6);
    remat_numeric_result_destroy(&nr);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* A schedule written by hand, unlike any the policy emits: a1 is freed
 * while its view v1 still holds the storage, then recomputed into that same
 * storage (no new buffer); h1 is freed and recomputed though it was never
 * needed again in between. */
START_TEST(numeric_should_verify_a_hand_written_schedule_with_a_view_holding_storage)
{
    remat_graph *g;
    remat_analysis *a = analyze_q(MLP2, &g);
    uint8_t ref[32];
    hash_of(MLP2, 1, ref);
    static const struct {
        remat_instr_kind k;
        const char *id;
    } prog[] = {
        {REMAT_I_FWD, "h1"},       {REMAT_I_FWD, "a1"},       {REMAT_I_FWD, "v1"},  {REMAT_I_FREE, "a1"},
        {REMAT_I_FWD, "h2"},       {REMAT_I_FWD, "loss"},     {REMAT_I_FREE, "h2"}, {REMAT_I_FREE, "loss"},
        {REMAT_I_BWD, "loss"},     {REMAT_I_FREE, "h1"},      {REMAT_I_RECOMPUTE, "h1"}, {REMAT_I_BWD, "h2"},
        {REMAT_I_RECOMPUTE, "a1"}, {REMAT_I_BWD, "v1"},       {REMAT_I_FREE, "v1"}, {REMAT_I_BWD, "a1"},
        {REMAT_I_FREE, "a1"},      {REMAT_I_FREE, "h1"},      {REMAT_I_BWD, "h1"},  {REMAT_I_OPT, NULL},
    };
    remat_schedule s;
    remat_schedule_init(&s);
    for (size_t i = 0; i < sizeof prog / sizeof prog[0]; i++) {
        uint32_t arg = 0;
        if (prog[i].k == REMAT_I_FREE)
            arg = t_tensor(g, prog[i].id);
        else if (prog[i].id)
            arg = t_op(g, prog[i].id);
        ck_assert_int_eq(remat_schedule_push(&s, prog[i].k, arg), REMAT_OK);
    }
    remat_numeric_result nr;
    numeric_ok(a, &s, 1, &nr);
    ck_assert_uint_eq(nr.recomputed_tensors_checked, 2); /* h1 (new buffer), a1 (v1's storage) */
    ck_assert_mem_eq(nr.param_grad_hash, ref, 32);
    remat_numeric_result_destroy(&nr);
    numeric_ok(a, &s, 3, &nr);
    remat_numeric_result_destroy(&nr);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* mlp2 with small leaves, a large a1 and a view v1 whose own (gradient)
 * size is 16 bytes. */
static const char *MLP2_VIEW =
    "{'format':'remat-graph','version':1,'name':'mlp2v',"
    "'inputs':[{'id':'x','bytes':16}],"
    "'params':[{'id':'w1','bytes':16},{'id':'w2','bytes':16,'frozen':true}],"
    "'ops':["
    "{'id':'h1','op':'matmul','inputs':['x','w1'],'bytes':1024,'flops':10},"
    "{'id':'a1','op':'relu','inputs':['h1'],'bytes':8192,'flops':10,'saves':['a1']},"
    "{'id':'v1','op':'view','inputs':['a1'],'alias_of':'a1','bytes':16},"
    "{'id':'h2','op':'matmul','inputs':['v1','w2'],'bytes':4096,'flops':10},"
    "{'id':'loss','op':'sum','inputs':['h2'],'bytes':4,'flops':1,'saves':[]}],"
    "'outputs':['loss']}";

/* RECOMPUTE a1 while v1 holds a1's storage allocates nothing, so the peak
 * is not there. Live bytes by hand (leaves 48): bwd:h2 48 + a1 8192 + h1
 * 1024 + h2's gradient 4096 + v1's 16 = 13376; recompute:a1 9280; after
 * FREE h1, bwd:v1 48 + 8192 + 16 + a1's gradient 8192 = 16448; bwd:a1
 * 48 + 8192 + 8192 + h1's gradient 1024 = 17456, the peak. */
START_TEST(numeric_should_not_count_a_rebuilt_tensor_whose_storage_a_view_kept)
{
    remat_graph *g;
    remat_analysis *a = analyze_q(MLP2_VIEW, &g);
    static const struct {
        remat_instr_kind k;
        const char *id;
    } prog[] = {
        {REMAT_I_FWD, "h1"},  {REMAT_I_FWD, "a1"},  {REMAT_I_FWD, "v1"},       {REMAT_I_FREE, "a1"},
        {REMAT_I_FWD, "h2"},  {REMAT_I_FWD, "loss"}, {REMAT_I_FREE, "h2"},     {REMAT_I_FREE, "loss"},
        {REMAT_I_BWD, "loss"}, {REMAT_I_BWD, "h2"}, {REMAT_I_RECOMPUTE, "a1"}, {REMAT_I_FREE, "h1"},
        {REMAT_I_BWD, "v1"},  {REMAT_I_FREE, "v1"}, {REMAT_I_BWD, "a1"},       {REMAT_I_FREE, "a1"},
        {REMAT_I_BWD, "h1"},
    };
    remat_schedule s;
    remat_schedule_init(&s);
    for (size_t i = 0; i < sizeof prog / sizeof prog[0]; i++)
        ck_assert_int_eq(remat_schedule_push(&s, prog[i].k,
                                             prog[i].k == REMAT_I_FREE ? t_tensor(g, prog[i].id) : t_op(g, prog[i].id)),
                         REMAT_OK);
    remat_numeric_result nr;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_numeric_replay(a, &s, 1, &nr, &err), REMAT_OK);
    ck_assert(nr.replay.valid && nr.ran);
    ck_assert_uint_eq(nr.mismatches, 0);
    ck_assert_uint_eq(nr.recomputed_tensors_checked, 1);
    ck_assert_uint_eq(nr.allocator_peak_bytes, 17456);
    ck_assert_uint_eq(nr.accounted_peak_bytes_scaled, 17456);
    /* The replay must agree. Before the fix in replay.c's do_forward (count
     * a fresh base only when its storage has no resident member) it added
     * a1's 8192 bytes to the RECOMPUTE step and reported 17472 there, and
     * this run was "not verified": "the allocator's high-water mark 17456 B
     * differs from the replayed peak 17472 B (instruction 10, RECOMPUTE a1)". */
    ck_assert_uint_eq(nr.replay.peak_bytes, 17456);
    ck_assert_msg(nr.equal && nr.verified, "%s", err.msg);
    remat_numeric_result_destroy(&nr);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

typedef struct {
    remat_instr_kind when;
    uint32_t tensor;
    int hits;
} tamper_spec;

static void flip_first_byte(void *ctx, size_t index, remat_instr in, uint32_t tensor, uint8_t *buf, size_t len)
{
    tamper_spec *T = ctx;
    (void)index;
    if (in.kind == (uint32_t)T->when && tensor == T->tensor && len > 0) {
        buf[0] ^= 0x01;
        T->hits++;
    }
}

static void run_tampered(const remat_analysis *a, const remat_schedule *s, tamper_spec *T, remat_numeric_result *nr,
                         remat_err *err)
{
    remat_err_init(err);
    remat__numeric_faults f = {flip_first_byte, T, 0, 0};
    remat_status st = remat__numeric_replay_faulty(a, s, 1, &f, nr, err);
    ck_assert_msg(st == REMAT_OK, "%s", err->msg);
    ck_assert(nr->ran);
}

START_TEST(numeric_should_report_a_recomputation_that_differs)
{
    remat_graph *g;
    remat_analysis *a = analyze_q(CHAIN, &g);
    uint8_t *keep = calloc(g->n_tensors, 1); /* keep nothing: l0..l4 are recomputed */
    remat_schedule s;
    schedule_for_keep(a, keep, &s);
    uint8_t ref[32];
    hash_of(CHAIN, 1, ref);
    /* A fault in the recomputation: the recomputed l2 is not what the
     * forward pass computed. */
    tamper_spec T = {REMAT_I_RECOMPUTE, t_tensor(g, "l2"), 0};
    remat_numeric_result nr;
    remat_err err;
    run_tampered(a, &s, &T, &nr, &err);
    ck_assert_int_ge(T.hits, 1);
    ck_assert(!nr.verified);
    ck_assert_uint_ge(nr.mismatches, 1);
    ck_assert_uint_eq(nr.first_mismatch_tensor, t_tensor(g, "l2"));
    ck_assert_uint_eq(s.ins[nr.first_mismatch_index].kind, REMAT_I_RECOMPUTE);
    ck_assert_int_eq(err.code, REMAT_EINTERNAL);
    ck_assert_msg_contains(&err, "recomputed tensor 'l2' differs from its first computation");
    ck_assert_msg_contains(&err, "(RECOMPUTE l2)");
    ck_assert(memcmp(nr.param_grad_hash, ref, 32) != 0);
    remat_numeric_result_destroy(&nr);
    /* A fault in the first computation is caught when the tensor is rebuilt. */
    tamper_spec F = {REMAT_I_FWD, t_tensor(g, "l1"), 0};
    run_tampered(a, &s, &F, &nr, &err);
    ck_assert_int_eq(F.hits, 1);
    ck_assert(!nr.verified);
    ck_assert_msg_contains(&err, "recomputed tensor 'l1'");
    remat_numeric_result_destroy(&nr);
    /* Under store-all nothing is rebuilt, so nothing mismatches, but one
     * flipped bit in one activation still changes the parameter gradients. */
    remat_schedule_destroy(&s);
    schedule_for_keep(a, NULL, &s);
    tamper_spec A = {REMAT_I_FWD, t_tensor(g, "l3"), 0};
    run_tampered(a, &s, &A, &nr, &err);
    ck_assert(nr.verified);
    ck_assert(memcmp(nr.param_grad_hash, ref, 32) != 0);
    remat_numeric_result_destroy(&nr);
    free(keep);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* An executor that holds one byte more than it accounts, at the step of
 * the peak, is caught; the same byte at a step below the peak changes no
 * high-water mark and is not (the check is on peaks, as the issue asks). */
START_TEST(numeric_should_report_an_allocator_that_exceeds_the_accounting)
{
    remat_graph *g;
    remat_analysis *a = analyze_q(CHAIN, &g);
    remat_schedule s;
    schedule_for_keep(a, NULL, &s);
    remat_numeric_result nr;
    numeric_ok(a, &s, 7, &nr);
    size_t peak = nr.replay.peak_index;
    uint64_t expected = nr.accounted_peak_bytes_scaled;
    remat_numeric_result_destroy(&nr);
    ck_assert_uint_lt(peak, s.n);
    ck_assert_uint_ne(s.ins[peak].kind, REMAT_I_FREE); /* a step that runs an op, with a workspace */
    ck_assert_uint_ne(s.ins[peak].kind, REMAT_I_OPT);
    remat__numeric_faults f = {NULL, NULL, peak + 1, 1};
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat__numeric_replay_faulty(a, &s, 7, &f, &nr, &err), REMAT_OK);
    ck_assert(nr.ran && !nr.equal && !nr.verified);
    ck_assert_uint_eq(nr.mismatches, 0);
    ck_assert_uint_eq(nr.allocator_peak_bytes, expected + 1);
    ck_assert_uint_eq(nr.accounted_peak_bytes_scaled, expected);
    ck_assert_int_eq(err.code, REMAT_EINTERNAL);
    ck_assert_msg_contains(&err, "differs from the accounted peak");
    remat_numeric_result_destroy(&nr);
    /* Below the peak: the first FWD holds far less than the peak. */
    f.overallocate_at = 1;
    remat_err_init(&err);
    ck_assert_int_eq(remat__numeric_replay_faulty(a, &s, 7, &f, &nr, &err), REMAT_OK);
    ck_assert(nr.equal && nr.verified);
    remat_numeric_result_destroy(&nr);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(numeric_should_not_run_an_invalid_schedule)
{
    remat_graph *g;
    remat_analysis *a = analyze_q(MLP2, &g);
    remat_schedule s;
    remat_schedule_init(&s);
    remat_schedule_push(&s, REMAT_I_FWD, t_op(g, "a1")); /* h1 never ran */
    remat_numeric_result nr;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_numeric_replay(a, &s, 1, &nr, &err), REMAT_OK);
    ck_assert(!nr.replay.valid);
    ck_assert(!nr.ran && !nr.verified);
    ck_assert_int_eq(err.code, REMAT_ESCHEDULE);
    ck_assert_msg_contains(&err, "input 'h1' is not resident");
    remat_numeric_result_destroy(&nr);
    /* Scale 0 is refused before anything runs. */
    remat_err_init(&err);
    ck_assert_int_eq(remat_numeric_replay(a, &s, 0, &nr, &err), REMAT_EINVAL);
    ck_assert_msg_contains(&err, "scale must be at least 1");
    remat_numeric_result_destroy(&nr);
    remat_numeric_result_destroy(NULL);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(numeric_should_fail_cleanly_at_every_allocation)
{
    remat_graph *g;
    remat_analysis *a = analyze_q(MIXED, &g);
    uint8_t *keep = calloc(g->n_tensors, 1);
    remat_schedule s;
    schedule_for_keep(a, keep, &s);
    int failures = 0;
    for (uint64_t n = 1; n < 10000; n++) {
        remat_numeric_result nr;
        remat_err err;
        remat_err_init(&err);
        remat__alloc_fail_at(n);
        remat_status st = remat_numeric_replay(a, &s, 3, &nr, &err);
        remat__alloc_fail_at(0);
        remat_numeric_result_destroy(&nr);
        if (st == REMAT_OK) {
            ck_assert(nr.verified);
            break;
        }
        ck_assert_msg(st == REMAT_ENOMEM, "allocation %llu: %s", (unsigned long long)n, err.msg);
        ck_assert_msg(strstr(err.msg, "out of memory") || strstr(err.msg, "cannot allocate"), "%s", err.msg);
        failures++;
    }
    ck_assert_int_gt(failures, 20); /* every leaf, activation, gradient and workspace buffer */
    free(keep);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

Suite *numeric_suite(void)
{
    Suite *s = suite_create("numeric");
    TCase *tc = tcase_create("hash");
    numeric_hash_tests(tc);
    suite_add_tcase(s, tc);
    tc = tcase_create("replay");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, numeric_should_hash_the_same_under_random_keep_sets);
    tcase_add_test(tc, numeric_should_hash_the_same_on_random_graphs);
    tcase_add_test(tc, numeric_should_change_hash_when_the_graph_changes);
    tcase_add_test(tc, numeric_should_match_hand_computed_peaks_for_mlp2);
    tcase_add_test(tc, numeric_should_verify_a_hand_written_schedule_with_a_view_holding_storage);
    tcase_add_test(tc, numeric_should_not_count_a_rebuilt_tensor_whose_storage_a_view_kept);
    tcase_add_test(tc, numeric_should_report_a_recomputation_that_differs);
    tcase_add_test(tc, numeric_should_report_an_allocator_that_exceeds_the_accounting);
    tcase_add_test(tc, numeric_should_not_run_an_invalid_schedule);
    tcase_add_test(tc, numeric_should_fail_cleanly_at_every_allocation);
    suite_add_tcase(s, tc);
    return s;
}

/*
 * check_tp_split.c - `remat tp-split` on the exported GPT (graphs/gpt4-b4.json,
 * scripts/models.py:gpt: s = 128, b = 4, h = 128, a = 4, 4 layers, fp32,
 * dropout 0.1) with Megatron's partition (graphs/partitions/gpt4-b4.tp.json: QKV and
 * fc1 column-parallel, the projection and fc2 row-parallel; Shoeybi et al.
 * 2019 section 3).
 *
 * The oracle is Korthikanti et al. 2022's account of what a layer saves
 * (section 4.1, Table 2), term by term, with this model's element sizes:
 * activations are 4 bytes (p = 4) and PyTorch's dropout keeps its mask as a
 * float tensor of the activation's dtype (4 bytes, where the paper's is 1).
 * Per layer, with t-way tensor parallelism:
 *
 *   whole on every rank   the two layernorm inputs and outputs (the outputs
 *                         are what QKV and fc1 save): 4p*sbh; the masks of
 *                         the dropouts after the projection and after fc2:
 *                         2*4*sbh                         = 24*sbh
 *   split t ways          Q, K, V (3p), the projection's input (p), fc1's
 *                         output (4p, GELU's input), GELU's output (4p, fc2's
 *                         input)                          = 48*sbh / t
 *                         softmax output (p), its dropout mask (4), the
 *                         dropped probabilities (p)       = 12*a*s^2*b / t
 *   small buffers         layernorm mean and rstd, fp32, two layernorms:
 *                         16*sb; the fp64 attention scale constant: 8
 *
 * which is the paper's sbh(10 + 24/t + 5as/(ht)) with p = 4 for its 2 and
 * 4-byte masks for its 1-byte ones. The same terms give gen transformer
 * --dropout --elem-bytes 4 at the same shape less 3 bytes per mask element:
 * 6*sbh + 3*a*s^2*b/t + 8 apart; that is checked too. "Saved per layer" is
 * the distinct storage of what the layer's ops save (module blocks.L or
 * blocks.L.*; gen's ops l<L>_*), so a layer's input counts where its first
 * layernorm saves it.
 */
#include "test_util.h"
#include "remat/gen.h"
#include "remat/import.h"
#include "util/util_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GPT "graphs/gpt4-b4.json"
#define PART "graphs/partitions/gpt4-b4.tp.json"

static const uint64_t S = 128, B = 4, H = 128, A = 4, LAYERS = 4;

static uint64_t closed_form(uint64_t t)
{
    const uint64_t sbh = S * B * H;
    return 24 * sbh + 48 * sbh / t + 12 * A * S * S * B / t + 16 * S * B + 8;
}

static remat_graph *split(uint32_t t)
{
    remat_err err;
    remat_err_init(&err);
    char *json = NULL;
    size_t len = 0;
    remat_import_tp_summary sum;
    ck_assert_msg(remat_import_tp_split_files(GPT, PART, t, &json, &len, &sum, &err) == REMAT_OK, "tp-split: %s",
                  err.msg);
    ck_assert_uint_eq(sum.linears[0], 2 * LAYERS);
    ck_assert_uint_eq(sum.linears[1], 2 * LAYERS);
    remat_graph *g = t_load(json);
    remat_free(json);
    return g;
}

static int in_layer(const remat_graph *g, uint32_t k, uint32_t l, int gen)
{
    char want[32];
    if (gen) {
        snprintf(want, sizeof want, "l%u_", l);
        return strncmp(g->ops[k].id, want, strlen(want)) == 0;
    }
    char mod[128];
    bool found = false;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_op_attr_string(g, k, "module", mod, sizeof mod, &found, &err), REMAT_OK);
    snprintf(want, sizeof want, "blocks.%u", l);
    size_t n = strlen(want);
    return found && strncmp(mod, want, n) == 0 && (mod[n] == 0 || mod[n] == '.');
}

/* Distinct activation storage saved by the ops of layer l. */
static uint64_t layer_saved(const remat_graph *g, uint32_t l, int gen)
{
    uint8_t *seen = calloc(g->n_tensors, 1);
    ck_assert_ptr_nonnull(seen);
    uint64_t total = 0;
    for (uint32_t k = 0; k < g->n_ops; k++) {
        if (!in_layer(g, k, l, gen))
            continue;
        const uint32_t *sv = remat_op_saves(g, &g->ops[k]);
        for (uint32_t j = 0; j < g->ops[k].n_save; j++) {
            uint32_t st = g->tensors[sv[j]].storage;
            if (g->tensors[st].kind != REMAT_TENSOR_ACTIVATION || seen[st])
                continue;
            seen[st] = 1;
            total += g->tensors[st].bytes;
        }
    }
    free(seen);
    return total;
}

static remat_graph *gen_gpt_shape(uint32_t t)
{
    remat_gen_opts o;
    remat_gen_opts_init(&o, REMAT_GEN_TRANSFORMER);
    o.seq = (uint32_t)S;
    o.batch = (uint32_t)B;
    o.hidden = (uint32_t)H;
    o.heads = (uint32_t)A;
    o.layers = (uint32_t)LAYERS;
    o.vocab = 1024;
    o.elem_bytes = 4;
    o.dropout = true;
    o.tp = t;
    remat_err err;
    remat_err_init(&err);
    size_t len = 0;
    char *json = remat_gen_json(&o, &len, &err);
    ck_assert_msg(json != NULL, "gen: %s", err.msg);
    remat_graph *g = t_load(json);
    remat_free(json);
    return g;
}

static const uint32_t degrees[] = {1, 2, 4};

START_TEST(tp_split_should_give_the_closed_form_per_layer)
{
    for (size_t d = 0; d < sizeof degrees / sizeof degrees[0]; d++) {
        uint32_t t = degrees[d];
        remat_graph *g = split(t), *gen = gen_gpt_shape(t);
        for (uint32_t l = 0; l < LAYERS; l++) {
            uint64_t got = layer_saved(g, l, 0), want = closed_form(t);
            ck_assert_msg(got == want, "t=%u layer %u: %llu B saved, closed form %llu B", t, l,
                          (unsigned long long)got, (unsigned long long)want);
            uint64_t g_gen = layer_saved(gen, l, 1);
            uint64_t masks = 6 * S * B * H + 3 * A * S * S * B / t + 8;
            ck_assert_msg(got == g_gen + masks, "t=%u layer %u: %llu B against gen transformer's %llu B + %llu B",
                          t, l, (unsigned long long)got, (unsigned long long)g_gen, (unsigned long long)masks);
        }
        remat_graph_destroy(gen);
        remat_graph_destroy(g);
    }
}
END_TEST

static uint64_t activation_max(const remat_graph *g)
{
    remat_err err;
    remat_err_init(&err);
    remat_analysis *an = NULL;
    ck_assert_int_eq(remat_analyze(g, &an, &err), REMAT_OK);
    remat_schedule s;
    remat_schedule_init(&s);
    ck_assert_int_eq(remat_schedule_store_all(an, &s, &err), REMAT_OK);
    remat_replay_result r;
    ck_assert_int_eq(remat_replay(an, &s, NULL, NULL, &r, &err), REMAT_OK);
    ck_assert_msg(r.valid, "store-all replay invalid: %s", err.msg);
    uint64_t v = r.category_peak[REMAT_CAT_ACTIVATIONS];
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(an);
    return v;
}

/* The replay measures it independently: the activations' maximum (every
 * saved tensor resident when the forward pass ends) falls by exactly the
 * split part of each layer, (48*sbh + 12*a*s^2*b)(1 - 1/t) per layer, the
 * embedding, the head and the loss being whole on every rank. */
START_TEST(tp_split_should_shrink_the_replayed_activations_by_the_split_part)
{
    remat_graph *g1 = split(1);
    uint64_t base = activation_max(g1);
    remat_graph_destroy(g1);
    for (size_t d = 1; d < sizeof degrees / sizeof degrees[0]; d++) {
        uint32_t t = degrees[d];
        remat_graph *g = split(t);
        uint64_t part = 48 * S * B * H + 12 * A * S * S * B;
        uint64_t want = base - LAYERS * (part - part / t);
        ck_assert_uint_eq(activation_max(g), want);
        remat_graph_destroy(g);
    }
}
END_TEST

/* Weights: exactly the four matrices per layer and the column linears'
 * biases are divided by t; layernorms, the row linears' biases, the
 * embeddings and the head are whole (Megatron's ColumnParallelLinear and
 * RowParallelLinear; the embedding is not vocabulary-split here). */
START_TEST(tp_split_should_divide_the_weights_the_partition_names)
{
    remat_graph *orig = NULL;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_graph_load_file(GPT, &orig, &err), REMAT_OK);
    for (size_t d = 0; d < sizeof degrees / sizeof degrees[0]; d++) {
        uint32_t t = degrees[d];
        remat_graph *g = split(t);
        uint32_t divided = 0;
        for (uint32_t i = 0; i < orig->n_tensors; i++) {
            const remat_tensor *p = &orig->tensors[i];
            if (p->kind != REMAT_TENSOR_PARAM)
                continue;
            const char *id = p->id;
            size_t n = strlen(id);
            int is_w = n > 7 && strcmp(id + n - 7, ".weight") == 0, is_b = n > 5 && strcmp(id + n - 5, ".bias") == 0;
            int col = strstr(id, ".attn.qkv.") || strstr(id, ".fc1.");
            int row = strstr(id, ".attn.proj.") || strstr(id, ".fc2.");
            int split_here = strncmp(id, "blocks.", 7) == 0 && ((col && (is_w || is_b)) || (row && is_w));
            uint64_t got = g->tensors[t_tensor(g, id)].bytes;
            ck_assert_msg(got == (split_here ? p->bytes / t : p->bytes), "t=%u %s: %llu B of %llu", t, id,
                          (unsigned long long)got, (unsigned long long)p->bytes);
            divided += split_here;
        }
        ck_assert_uint_eq(divided, 6 * LAYERS);
        remat_graph_destroy(g);
    }
    remat_graph_destroy(orig);
}
END_TEST

/* f and g per region: t > 1 has 2 tp_copy and 2 all_reduce ops per layer;
 * in the store-all step the forward all-reduces are g's and the backward
 * ones f's, 2 per layer each; t = 1 has none. */
START_TEST(tp_split_should_insert_f_and_g_per_region)
{
    for (size_t d = 0; d < sizeof degrees / sizeof degrees[0]; d++) {
        uint32_t t = degrees[d];
        remat_graph *g = split(t);
        remat_err err;
        remat_err_init(&err);
        remat_analysis *an = NULL;
        ck_assert_int_eq(remat_analyze(g, &an, &err), REMAT_OK);
        remat_schedule sc;
        remat_schedule_init(&sc);
        ck_assert_int_eq(remat_schedule_store_all(an, &sc, &err), REMAT_OK);
        uint32_t fwd = 0, bwd = 0, f_ops = 0, g_ops = 0;
        for (uint32_t k = 0; k < g->n_ops; k++) {
            f_ops += strcmp(g->ops[k].type, "tp_copy") == 0;
            g_ops += strcmp(g->ops[k].type, "all_reduce") == 0;
        }
        for (size_t i = 0; i < sc.n; i++) {
            if (sc.ins[i].kind != REMAT_I_FWD && sc.ins[i].kind != REMAT_I_BWD)
                continue;
            char what[32];
            bool found = false;
            const char *key = sc.ins[i].kind == REMAT_I_FWD ? "collective_fwd" : "collective_bwd";
            ck_assert_int_eq(remat_op_attr_string(g, sc.ins[i].arg, key, what, sizeof what, &found, &err), REMAT_OK);
            if (found && strcmp(what, "all_reduce") == 0)
                *(sc.ins[i].kind == REMAT_I_FWD ? &fwd : &bwd) += 1;
        }
        uint32_t want = t > 1 ? 2 * LAYERS : 0;
        ck_assert_uint_eq(f_ops, want);
        ck_assert_uint_eq(g_ops, want);
        ck_assert_uint_eq(fwd, want);
        ck_assert_uint_eq(bwd, want);
        remat_schedule_destroy(&sc);
        remat_analysis_destroy(an);
        remat_graph_destroy(g);
    }
}
END_TEST

static void split_fails(const char *part, uint32_t t, remat_status code, const char *substr)
{
    char *text = NULL;
    size_t len = 0;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat__read_file(GPT, &text, &len, &err), REMAT_OK);
    char *out = (char *)"x";
    size_t out_len = 1;
    remat_status st = remat_import_tp_split(text, len, GPT, part, strlen(part), "p.json", t, &out, &out_len, NULL, &err);
    remat_free(text);
    ck_assert_msg(st == code, "expected %s, got %s (%s)", remat_status_str(code), remat_status_str(st), err.msg);
    ck_assert_ptr_null(out);
    ck_assert_msg(strstr(err.msg, substr) != NULL, "message '%s' lacks '%s'", err.msg, substr);
}

#define P(col, row) "{\"format\": \"remat-tp-partition\", \"version\": 1, \"column\": " col ", \"row\": " row "}"
#define MEGATRON_COL "[\"blocks.*.attn.qkv\", \"blocks.*.fc1\"]"
#define MEGATRON_ROW "[\"blocks.*.attn.proj\", \"blocks.*.fc2\"]"

START_TEST(tp_split_should_refuse_partitions_that_do_not_make_a_rank)
{
    split_fails("{\"format\": \"remat-tp-partition\"", 2, REMAT_EPARSE, "p.json:1:");
    split_fails("{\"format\": \"remat-tp\", \"version\": 1}", 2, REMAT_EGRAPH, "p.json: format: must be");
    split_fails(P(MEGATRON_COL, "[]"), 2, REMAT_EGRAPH, "row: needs at least one pattern");
    split_fails("{\"format\": \"remat-tp-partition\", \"version\": 1, \"colum\": []}", 2, REMAT_EGRAPH,
                "colum: unknown key");
    split_fails(P("[\"blocks.*.attn.qkv\", 7]", MEGATRON_ROW), 2, REMAT_EGRAPH, "column[1]: must be a non-empty");
    split_fails(P("[\"blocks.*.attn.qkv\", \"blocks.*.mlp.fc1\"]", MEGATRON_ROW), 2, REMAT_EGRAPH,
                "column[1]: 'blocks.*.mlp.fc1' matches no linear");
    split_fails(P(MEGATRON_ROW, MEGATRON_COL), 2, REMAT_EGRAPH, "reads no split tensor");
    split_fails(P("[\"blocks.*.attn.qkv\"]", "[\"blocks.*.fc2\"]"), 2, REMAT_EGRAPH,
                "op 'add50' reads a split tensor and the whole tensor 'mul5'");
    split_fails(P("[\"blocks.*.attn.qkv\", \"blocks.*.fc1\", \"head\"]", MEGATRON_ROW), 2, REMAT_EGRAPH,
                "graph output 'nll245' would be split");
    split_fails(P("[\"blocks.*\"]", "[\"blocks.*.fc2\"]"), 2, REMAT_EGRAPH, "matches column[0] and row[0]");
    split_fails(P(MEGATRON_COL, MEGATRON_ROW), 3, REMAT_EGRAPH, "which --tp 3 does not divide");
    split_fails(P(MEGATRON_COL, MEGATRON_ROW), 0, REMAT_EINVAL, "--tp must be at least 1");
}
END_TEST

/* A two-linear MLP worked by hand: fc1 (column) reads the data x, so f is a
 * view of an input; h and a are split (128 -> 64 B at t = 2), y is the
 * all-reduced partial sum (whole, 64 B); fc1's weight and bias and fc2's
 * weight halve, fc2's bias stays 16 B; fc1, gelu and fc2 do half their
 * FLOPs, the loss all of its. */
static const char mlp[] =
    "{\"format\": \"remat-graph\", \"version\": 1, \"name\": \"mlp\",\n"
    " \"inputs\": [{\"id\": \"x\", \"bytes\": 64}],\n"
    " \"params\": [{\"id\": \"fc1.weight\", \"bytes\": 256}, {\"id\": \"fc1.bias\", \"bytes\": 32},\n"
    "            {\"id\": \"fc2.weight\", \"bytes\": 256}, {\"id\": \"fc2.bias\", \"bytes\": 16}],\n"
    " \"ops\": [\n"
    "  {\"id\": \"h\", \"op\": \"addmm\", \"inputs\": [\"fc1.bias\", \"x\", \"fc1.weight\"], \"bytes\": 128, "
    "\"flops\": 1000, \"saves\": [\"x\", \"fc1.weight\"], \"attrs\": {\"module\": \"fc1\"}},\n"
    "  {\"id\": \"a\", \"op\": \"gelu\", \"inputs\": [\"h\"], \"bytes\": 128, \"flops\": 64, \"saves\": [\"h\"], "
    "\"attrs\": {\"module\": \"act\"}},\n"
    "  {\"id\": \"y\", \"op\": \"addmm\", \"inputs\": [\"fc2.bias\", \"a\", \"fc2.weight\"], \"bytes\": 64, "
    "\"flops\": 1000, \"saves\": [\"a\", \"fc2.weight\"], \"attrs\": {\"module\": \"fc2\"}},\n"
    "  {\"id\": \"loss\", \"op\": \"sum\", \"inputs\": [\"y\"], \"bytes\": 4, \"flops\": 16, \"saves\": []}],\n"
    " \"outputs\": [\"loss\"]}\n";
static const char mlp_part[] = P("[\"fc1\"]", "[\"fc2\"]");

START_TEST(tp_split_should_split_a_hand_worked_mlp)
{
    remat_err err;
    remat_err_init(&err);
    char *json = NULL;
    size_t len = 0;
    remat_import_tp_summary sum;
    ck_assert_int_eq(remat_import_tp_split(mlp, strlen(mlp), "mlp.json", mlp_part, strlen(mlp_part), "p.json", 2,
                                           &json, &len, &sum, &err),
                     REMAT_OK);
    remat_graph *g = t_load(json);
    remat_free(json);
    static const struct { const char *id; uint64_t bytes; } want[] = {
        {"x", 64}, {"fc1.weight", 128}, {"fc1.bias", 16}, {"fc2.weight", 128}, {"fc2.bias", 16},
        {"h", 64}, {"a", 64}, {"y", 64}, {"loss", 4}, {"x_tp", 0}, {"y_ar", 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(g->tensors[t_tensor(g, want[i].id)].bytes == want[i].bytes, "%s: %llu B", want[i].id,
                      (unsigned long long)g->tensors[t_tensor(g, want[i].id)].bytes);
    ck_assert_uint_eq(g->ops[t_op(g, "h")].flops, 500);
    ck_assert_uint_eq(g->ops[t_op(g, "a")].flops, 32);
    ck_assert_uint_eq(g->ops[t_op(g, "y")].flops, 500);
    ck_assert_uint_eq(g->ops[t_op(g, "loss")].flops, 16);
    /* fc1 reads x through f, the loss reads y through g. */
    ck_assert_str_eq(g->tensors[remat_op_inputs(g, &g->ops[t_op(g, "h")])[1]].id, "x_tp");
    ck_assert_str_eq(g->tensors[remat_op_inputs(g, &g->ops[t_op(g, "loss")])[0]].id, "y_ar");
    ck_assert_uint_eq(sum.collectives, 2);
    ck_assert_uint_eq(sum.split_params, 3);
    ck_assert_uint_eq(sum.param_bytes_split, 256 + 32 + 256);
    ck_assert_str_eq(g->name, "mlp-tp2");
    remat_graph_destroy(g);
}
END_TEST

START_TEST(tp_split_should_fail_cleanly_out_of_memory)
{
    int succeeded = 0;
    for (uint64_t n = 1; n < 20000 && !succeeded; n++) {
        remat_err err;
        remat_err_init(&err);
        char *out = NULL;
        remat__alloc_fail_at(n);
        remat_status st = remat_import_tp_split(mlp, strlen(mlp), "mlp.json", mlp_part, strlen(mlp_part), "p.json", 2,
                                                &out, NULL, NULL, &err);
        remat__alloc_fail_at(0);
        if (st == REMAT_OK) {
            succeeded = 1;
            remat_free(out);
        } else {
            ck_assert_msg(st == REMAT_ENOMEM, "allocation %llu: %s", (unsigned long long)n, err.msg);
            ck_assert_ptr_null(out);
        }
    }
    ck_assert(succeeded);
}
END_TEST

Suite *tp_split_suite(void)
{
    Suite *s = suite_create("tp_split");
    TCase *tc = tcase_create("megatron");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, tp_split_should_give_the_closed_form_per_layer);
    tcase_add_test(tc, tp_split_should_shrink_the_replayed_activations_by_the_split_part);
    tcase_add_test(tc, tp_split_should_divide_the_weights_the_partition_names);
    tcase_add_test(tc, tp_split_should_insert_f_and_g_per_region);
    tcase_add_test(tc, tp_split_should_refuse_partitions_that_do_not_make_a_rank);
    tcase_add_test(tc, tp_split_should_split_a_hand_worked_mlp);
    tcase_add_test(tc, tp_split_should_fail_cleanly_out_of_memory);
    suite_add_tcase(s, tc);
    return s;
}

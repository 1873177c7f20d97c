/*
 * check_korthikanti.c - `remat gen transformer --dropout` against Korthikanti
 * et al. 2022 ("Reducing Activation Recomputation in Large Transformer
 * Models", section 4.1): with 16-bit activations and 1-byte dropout masks a
 * transformer layer stores s*b*h*(34 + 5*a*s/h) bytes for its backward pass.
 *
 * "Saved bytes per layer" in remat's terms: in the store-all training step,
 * the distinct storages of the layer's activations that some backward step
 * reads (lifetimes: last_bwd_use is not none). The layer's output is read
 * by the next layer's first layernorm, so it counts in its own layer, as
 * the paper's "input to the layernorm" does for the next. The paper ignores
 * small buffers; remat keeps the layernorms' fp32 mean and rstd (2 layernorms
 * x 2 x 4 bytes x s*b = 16*s*b), so the test checks both parts exactly: the
 * layernorm statistics against 16*s*b, everything else against the formula.
 *
 * A second, independent measurement goes through the executor: the
 * activations category's maximum in the store-all replay is reached when
 * the forward pass ends, when every saved activation is resident, so adding
 * one layer must add exactly one layer's saved bytes, statistics included.
 *
 * The oracle is the closed form, computed here and nowhere else. The same
 * holds for one rank of t-way tensor (and sequence) parallelism and for
 * selective recomputation: Table 2 of the paper, t in {1, 2, 4, 8}.
 */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t s, b, h, a;
} megatron;

/* Korthikanti et al., eq. 1: s*b*h*(34 + 5*a*s/h) = 34*s*b*h + 5*a*s^2*b
 * (the product is whole for every a, s, h). */
static uint64_t korthikanti(const megatron *m)
{
    return 34 * m->s * m->b * m->h + 5 * m->a * m->s * m->s * m->b;
}

static remat_graph *gen_rank(const megatron *m, uint32_t layers, bool dropout, uint32_t tp, bool sp, bool selective)
{
    remat_gen_opts o;
    remat_gen_opts_init(&o, REMAT_GEN_TRANSFORMER);
    o.seq = (uint32_t)m->s;
    o.batch = (uint32_t)m->b;
    o.hidden = (uint32_t)m->h;
    o.heads = (uint32_t)m->a;
    o.layers = layers;
    o.vocab = 64;
    o.elem_bytes = 2;
    o.dropout = dropout;
    o.tp = tp;
    o.sp = sp;
    o.selective = selective;
    remat_err err;
    remat_err_init(&err);
    size_t len = 0;
    char *json = remat_gen_json(&o, &len, &err);
    ck_assert_msg(json != NULL, "gen transformer failed: %s", err.msg);
    remat_graph *g = t_load(json);
    remat_free(json);
    return g;
}

static remat_graph *gen_transformer(const megatron *m, uint32_t layers, bool dropout)
{
    return gen_rank(m, layers, dropout, 1, false, false);
}

/* Saved bytes of layer l, split into layernorm statistics (a layernorm
 * op's second and third outputs) and the rest. */
static void layer_saved(const remat_graph *g, const remat_analysis *a, uint32_t l, uint64_t *stats, uint64_t *rest)
{
    char prefix[24];
    snprintf(prefix, sizeof prefix, "l%u_", l);
    uint8_t *counted = calloc(g->n_tensors, 1);
    ck_assert_ptr_nonnull(counted);
    *stats = *rest = 0;
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        const remat_tensor *T = &g->tensors[t];
        if (T->kind != REMAT_TENSOR_ACTIVATION || a->life[t].last_bwd_use == REMAT_NONE)
            continue;
        const remat_tensor *S = &g->tensors[T->storage];
        if (strncmp(S->id, prefix, strlen(prefix)) != 0 || counted[T->storage])
            continue;
        counted[T->storage] = 1;
        const remat_op *p = &g->ops[S->producer];
        int is_stat = strcmp(p->type, "layernorm") == 0 && remat_op_outputs(g, p)[0] != T->storage;
        *(is_stat ? stats : rest) += S->bytes;
    }
    free(counted);
}

static const megatron configs[] = {
    {128, 2, 256, 4},       /* the bundled transformer4's shape */
    {2048, 1, 12288, 96},   /* GPT-3 175B, one sequence */
    {2048, 4, 5120, 40},    /* a 22B-class layer, micro-batch 4 */
    {17, 3, 40, 5},         /* odd sizes */
    {1, 1, 1, 1},
};
#define N_CONFIGS (sizeof configs / sizeof configs[0])

START_TEST(korthikanti_should_match_saved_bytes_per_layer_exactly)
{
    for (size_t i = 0; i < N_CONFIGS; i++) {
        const megatron *m = &configs[i];
        const uint32_t L = 3;
        remat_graph *g = gen_transformer(m, L, true);
        remat_err err;
        remat_err_init(&err);
        remat_analysis *an = NULL;
        ck_assert_int_eq(remat_analyze(g, &an, &err), REMAT_OK);
        ck_assert_uint_eq(g->n_ops, 18 * L + 4);
        for (uint32_t l = 0; l < L; l++) {
            uint64_t stats, rest;
            layer_saved(g, an, l, &stats, &rest);
            ck_assert_msg(rest == korthikanti(m),
                          "s=%llu b=%llu h=%llu a=%llu layer %u: remat saves %llu B, Korthikanti et al. %llu B",
                          (unsigned long long)m->s, (unsigned long long)m->b, (unsigned long long)m->h,
                          (unsigned long long)m->a, l, (unsigned long long)rest,
                          (unsigned long long)korthikanti(m));
            ck_assert_uint_eq(stats, 16 * m->s * m->b);
        }
        remat_analysis_destroy(an);
        remat_graph_destroy(g);
    }
}
END_TEST

/* Without --dropout the graph is Korthikanti's less the two s*b*h masks,
 * the attention mask (a*s^2*b) and the dropped probabilities (2*a*s^2*b). */
START_TEST(korthikanti_should_account_for_each_dropout_without_it)
{
    for (size_t i = 0; i < N_CONFIGS; i++) {
        const megatron *m = &configs[i];
        remat_graph *g = gen_transformer(m, 2, false);
        remat_err err;
        remat_err_init(&err);
        remat_analysis *an = NULL;
        ck_assert_int_eq(remat_analyze(g, &an, &err), REMAT_OK);
        ck_assert_uint_eq(g->n_ops, 15 * 2 + 4);
        uint64_t stats, rest;
        layer_saved(g, an, 1, &stats, &rest);
        ck_assert_uint_eq(rest, korthikanti(m) - 2 * m->s * m->b * m->h - 3 * m->a * m->s * m->s * m->b);
        ck_assert_uint_eq(stats, 16 * m->s * m->b);
        remat_analysis_destroy(an);
        remat_graph_destroy(g);
    }
}
END_TEST

static uint64_t rank_activation_max(const megatron *m, uint32_t layers, uint32_t tp, bool sp, bool selective)
{
    remat_graph *g = gen_rank(m, layers, true, tp, sp, selective);
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
    remat_graph_destroy(g);
    return v;
}

static uint64_t store_all_activation_max(const megatron *m, uint32_t layers)
{
    return rank_activation_max(m, layers, 1, false, false);
}

START_TEST(korthikanti_should_add_one_layer_of_saved_bytes_per_layer_in_replay)
{
    for (size_t i = 0; i < N_CONFIGS; i++) {
        const megatron *m = &configs[i];
        uint64_t one = store_all_activation_max(m, 1), two = store_all_activation_max(m, 2),
                 four = store_all_activation_max(m, 4);
        ck_assert_uint_eq(two - one, korthikanti(m) + 16 * m->s * m->b);
        ck_assert_uint_eq(four - two, 2 * (korthikanti(m) + 16 * m->s * m->b));
    }
}
END_TEST

/* ------------------------------------------------ Table 2: one rank of t
 *
 * Korthikanti et al. 2022, Table 2, activation bytes per layer per rank
 * (16-bit activations, 1-byte dropout masks), written as the paper prints
 * them, sbh(10 + 24/t + 5as/(ht)) = sbh(10ht + 24h + 5as)/(ht), and checked
 * to be whole before use:
 *   tensor parallel                  sbh(10 + 24/t + 5as/(ht))
 *   tensor + sequence parallel       sbh(34/t + 5as/(ht))
 *   tensor parallel, selective       sbh(10 + 24/t)
 *   tensor + sequence, selective     sbh(34/t)
 * The layernorm statistics (fp32 mean and rstd, two layernorms) come on
 * top: 16sb, or 16sb/t where sequence parallelism splits the layernorms. */
static uint64_t table2(const megatron *m, uint64_t t, bool sp, bool selective)
{
    const uint64_t s = m->s, b = m->b, h = m->h, a = m->a;
    uint64_t replicated = sp ? 0 : 10 * h * t; /* the 10 in units of 1/(ht) */
    uint64_t split = sp ? 34 * h : 24 * h;
    uint64_t core = selective ? 0 : 5 * a * s;
    uint64_t num = s * b * h * (replicated + split + core), den = h * t;
    ck_assert_msg(num % den == 0, "Table 2 is not whole for s=%llu t=%llu", (unsigned long long)s,
                  (unsigned long long)t);
    return num / den;
}

static const megatron tp_configs[] = {
    {128, 2, 256, 8},     /* transformer4's shape with 8 heads */
    {2048, 1, 12288, 96}, /* GPT-3 175B: Megatron ran it at t = 8 */
    {2048, 4, 5120, 40},  /* 22B-class */
    {16, 3, 64, 8},       /* small and odd batch */
};
#define N_TP_CONFIGS (sizeof tp_configs / sizeof tp_configs[0])
static const uint32_t degrees[] = {1, 2, 4, 8};

START_TEST(table2_should_match_saved_bytes_per_layer_for_each_degree)
{
    for (size_t i = 0; i < N_TP_CONFIGS; i++)
        for (size_t d = 0; d < 4; d++)
            for (int variant = 0; variant < 4; variant++) {
                const megatron *m = &tp_configs[i];
                const uint32_t t = degrees[d], L = 2;
                const bool sp = variant & 1, sel = variant & 2;
                remat_graph *g = gen_rank(m, L, true, t, sp, sel);
                remat_err err;
                remat_err_init(&err);
                remat_analysis *an = NULL;
                ck_assert_int_eq(remat_analyze(g, &an, &err), REMAT_OK);
                for (uint32_t l = 0; l < L; l++) {
                    uint64_t stats, rest;
                    layer_saved(g, an, l, &stats, &rest);
                    ck_assert_msg(rest == table2(m, t, sp, sel),
                                  "s=%llu h=%llu a=%llu t=%u%s%s layer %u: remat saves %llu B, Table 2 %llu B",
                                  (unsigned long long)m->s, (unsigned long long)m->h, (unsigned long long)m->a, t,
                                  sp ? " sp" : "", sel ? " selective" : "", l, (unsigned long long)rest,
                                  (unsigned long long)table2(m, t, sp, sel));
                    ck_assert_uint_eq(stats, 16 * m->s * m->b / (sp ? t : 1));
                }
                remat_analysis_destroy(an);
                remat_graph_destroy(g);
            }
}
END_TEST

/* The executor's measurement: one more layer adds one layer's saved bytes
 * (and its statistics) to the activations category's maximum. */
START_TEST(table2_should_add_one_layer_per_layer_in_replay)
{
    for (size_t i = 0; i < N_TP_CONFIGS; i++)
        for (size_t d = 1; d < 4; d++)
            for (int variant = 0; variant < 4; variant++) {
                const megatron *m = &tp_configs[i];
                const uint32_t t = degrees[d];
                const bool sp = variant & 1, sel = variant & 2;
                uint64_t one = rank_activation_max(m, 1, t, sp, sel), two = rank_activation_max(m, 2, t, sp, sel);
                ck_assert_msg(two - one == table2(m, t, sp, sel) + 16 * m->s * m->b / (sp ? t : 1),
                              "t=%u%s%s: a layer adds %llu B in replay, Table 2 %llu B + statistics", t,
                              sp ? " sp" : "", sel ? " selective" : "", (unsigned long long)(two - one),
                              (unsigned long long)table2(m, t, sp, sel));
            }
}
END_TEST

/* Shoeybi et al. section 3: QKV and fc1 split by columns, W_o and fc2 by
 * rows, layernorms replicated: p(12h^2/t + 4h) weight bytes per layer. */
START_TEST(tensor_parallel_should_split_the_layer_weights)
{
    const megatron m = {16, 3, 64, 8};
    for (size_t d = 0; d < 4; d++) {
        remat_graph *g = gen_rank(&m, 1, true, degrees[d], false, false);
        uint64_t bytes = 0;
        for (uint32_t t = 0; t < g->n_tensors; t++)
            if (g->tensors[t].kind == REMAT_TENSOR_PARAM && strncmp(g->tensors[t].id, "l0_", 3) == 0)
                bytes += g->tensors[t].bytes;
        ck_assert_uint_eq(bytes, 2 * (12 * m.h * m.h / degrees[d] + 4 * m.h));
        remat_graph_destroy(g);
    }
}
END_TEST

/* The collectives in the store-all schedule, by what they move: with
 * tensor parallelism two all-reduces per layer in forward (g, after the
 * attention projection and after fc2) and two in backward (f, before QKV
 * and fc1); with sequence parallelism two all-gathers and two
 * reduce-scatters per layer each way (plus, in backward, the all-gather
 * each column-parallel linear repeats for its weight gradient), and one
 * all-gather before the head. Forward collectives run as FWD steps of
 * their ops, backward ones as BWD steps. */
static void count_collectives(const remat_graph *g, const remat_analysis *an, uint32_t fwd[3], uint32_t bwd[3])
{
    static const char *const kinds[3] = {"all_reduce", "all_gather", "reduce_scatter"};
    remat_schedule sc;
    remat_schedule_init(&sc);
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_schedule_store_all(an, &sc, &err), REMAT_OK);
    for (int j = 0; j < 3; j++)
        fwd[j] = bwd[j] = 0;
    for (size_t i = 0; i < sc.n; i++) {
        if (sc.ins[i].kind != REMAT_I_FWD && sc.ins[i].kind != REMAT_I_BWD)
            continue;
        char what[32];
        bool found = false;
        const char *key = sc.ins[i].kind == REMAT_I_FWD ? "collective_fwd" : "collective_bwd";
        ck_assert_int_eq(remat_op_attr_string(g, sc.ins[i].arg, key, what, sizeof what, &found, &err), REMAT_OK);
        for (int j = 0; found && j < 3; j++)
            if (strcmp(what, kinds[j]) == 0)
                (sc.ins[i].kind == REMAT_I_FWD ? fwd : bwd)[j]++;
    }
    remat_schedule_destroy(&sc);
}

START_TEST(tensor_parallel_should_schedule_its_collectives)
{
    const megatron m = {16, 3, 64, 8};
    const uint32_t L = 3;
    for (int sp = 0; sp < 2; sp++) {
        remat_graph *g = gen_rank(&m, L, true, 4, sp, false);
        remat_err err;
        remat_err_init(&err);
        remat_analysis *an = NULL;
        ck_assert_int_eq(remat_analyze(g, &an, &err), REMAT_OK);
        uint32_t fwd[3], bwd[3];
        count_collectives(g, an, fwd, bwd);
        if (!sp) {
            ck_assert_uint_eq(fwd[0], 2 * L);
            ck_assert_uint_eq(bwd[0], 2 * L);
            ck_assert_uint_eq(fwd[1] + fwd[2] + bwd[1] + bwd[2], 0);
        } else {
            ck_assert_uint_eq(fwd[0] + bwd[0], 0);
            ck_assert_uint_eq(fwd[1], 2 * L + 1);             /* + the head's */
            ck_assert_uint_eq(fwd[2], 2 * L);
            ck_assert_uint_eq(bwd[1], 2 * L + 2 * L + 1);     /* reduce-scatters' and the re-gathers, + embedding's */
            ck_assert_uint_eq(bwd[2], 2 * L + 1);
        }
        remat_analysis_destroy(an);
        remat_graph_destroy(g);
    }
    /* t = 1 has nothing to communicate. */
    remat_graph *g = gen_rank(&m, L, true, 1, true, false);
    remat_err err;
    remat_err_init(&err);
    remat_analysis *an = NULL;
    ck_assert_int_eq(remat_analyze(g, &an, &err), REMAT_OK);
    uint32_t fwd[3], bwd[3];
    count_collectives(g, an, fwd, bwd);
    ck_assert_uint_eq(fwd[0] + fwd[1] + fwd[2] + bwd[0] + bwd[1] + bwd[2], 0);
    remat_analysis_destroy(an);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(tensor_parallel_should_refuse_degrees_that_do_not_divide)
{
    remat_gen_opts o;
    remat_gen_opts_init(&o, REMAT_GEN_TRANSFORMER);
    o.layers = 1;
    o.heads = 12;
    o.hidden = 96;
    o.seq = 10;
    o.tp = 8;
    remat_err err;
    remat_err_init(&err);
    ck_assert_ptr_null(remat_gen_json(&o, NULL, &err));
    ck_assert_int_eq(err.code, REMAT_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "--tp 8 must divide -a/--heads (12)"));
    o.tp = 4;
    o.sp = true;
    remat_err_init(&err);
    ck_assert_ptr_null(remat_gen_json(&o, NULL, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "--sp: --tp 4 must divide -s/--seq (10)"));
}
END_TEST

/* Megatron's vocabulary-parallel embedding and head (VocabParallelEmbedding,
 * parallel_lm_logits and vocab_parallel_cross_entropy in
 * megatron/core/tensor_parallel): each rank holds V/t rows of the embedding
 * and of the head, so v*h/t elements each; the embedding's output is a
 * partial sum all-reduced in place (reduce-scattered with SP), the head reads
 * the final layer norm through f, the logits are (s, b, V/t), and the loss
 * all-reduces three fp32 values per token (12sb bytes). */
static remat_graph *gen_vp(const megatron *m, uint32_t layers, uint32_t tp, bool sp, bool vp, uint32_t vocab)
{
    remat_gen_opts o;
    remat_gen_opts_init(&o, REMAT_GEN_TRANSFORMER);
    o.seq = (uint32_t)m->s;
    o.batch = (uint32_t)m->b;
    o.hidden = (uint32_t)m->h;
    o.heads = (uint32_t)m->a;
    o.layers = layers;
    o.vocab = vocab;
    o.elem_bytes = 2;
    o.dropout = true;
    o.tp = tp;
    o.sp = sp;
    o.vocab_parallel = vp;
    remat_err err;
    remat_err_init(&err);
    size_t len = 0;
    char *json = remat_gen_json(&o, &len, &err);
    ck_assert_msg(json != NULL, "gen transformer failed: %s", err.msg);
    remat_graph *g = t_load(json);
    remat_free(json);
    return g;
}

START_TEST(vocab_parallel_should_split_the_embedding_and_head)
{
    const megatron m = {16, 3, 64, 8};
    const uint64_t V = 96, L = 2, p = 2;
    for (size_t d = 0; d < 4; d++) {
        const uint64_t t = degrees[d];
        for (int sp = 0; sp < 2; sp++) {
            remat_graph *g = gen_vp(&m, (uint32_t)L, (uint32_t)t, sp, true, (uint32_t)V);
            ck_assert_uint_eq(g->tensors[t_tensor(g, "wte")].bytes, p * V * m.h / t);
            ck_assert_uint_eq(g->tensors[t_tensor(g, "head_w")].bytes, p * m.h * V / t);
            ck_assert_uint_eq(g->tensors[t_tensor(g, "logits")].bytes, p * m.s * m.b * V / t);
            uint64_t params = 0;
            for (uint32_t i = 0; i < g->n_tensors; i++)
                if (g->tensors[i].kind == REMAT_TENSOR_PARAM)
                    params += g->tensors[i].bytes;
            ck_assert_uint_eq(params, p * (L * (12 * m.h * m.h / t + 4 * m.h) + 2 * m.h + 2 * V * m.h / t));
            const remat_op *loss = &g->ops[t_op(g, "loss")];
            ck_assert_str_eq(loss->type, t > 1 ? "vocab_parallel_cross_entropy" : "cross_entropy");
            ck_assert_uint_eq(loss->flops, 5 * m.s * m.b * V / t);
            if (t > 1) {
                double moved = 0;
                bool found = false;
                remat_err err;
                remat_err_init(&err);
                ck_assert_int_eq(remat_op_attr_number(g, t_op(g, "loss"), "collective_fwd_bytes", &moved, &found, &err),
                                 REMAT_OK);
                ck_assert(found);
                ck_assert_uint_eq((uint64_t)moved, 12 * m.s * m.b);
                /* The op after the embedding reduces its partial sums. */
                const char *red = sp ? "embed_rs" : "embed_ar";
                ck_assert_str_eq(g->ops[t_op(g, red)].type, sp ? "reduce_scatter" : "all_reduce");
                ck_assert_uint_eq(g->tensors[t_tensor(g, red)].bytes, sp ? p * m.s / t * m.b * m.h : 0);
            }
            remat_graph_destroy(g);
        }
    }
}
END_TEST

static uint64_t activation_max(remat_graph *g)
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

/* In the replay the saved logits are all that changes: the activations'
 * maximum falls by p*s*b*V*(1 - 1/t), and the collectives gain the
 * embedding's all-reduce (forward) and the head's f (backward) without SP;
 * with SP the embedding's reduce-scatter replaces the scatter. */
START_TEST(vocab_parallel_should_shrink_the_logits_and_add_its_collectives)
{
    const megatron m = {16, 3, 64, 8};
    const uint64_t V = 96, L = 2, p = 2;
    for (size_t d = 1; d < 4; d++) {
        const uint64_t t = degrees[d];
        for (int sp = 0; sp < 2; sp++) {
            remat_graph *whole = gen_vp(&m, (uint32_t)L, (uint32_t)t, sp, false, (uint32_t)V);
            remat_graph *g = gen_vp(&m, (uint32_t)L, (uint32_t)t, sp, true, (uint32_t)V);
            ck_assert_uint_eq(activation_max(whole) - activation_max(g), p * m.s * m.b * V - p * m.s * m.b * V / t);
            remat_err err;
            remat_err_init(&err);
            remat_analysis *an = NULL;
            ck_assert_int_eq(remat_analyze(g, &an, &err), REMAT_OK);
            uint32_t fwd[3], bwd[3];
            count_collectives(g, an, fwd, bwd);
            if (!sp) {
                ck_assert_uint_eq(fwd[0], 2 * L + 2); /* + the embedding's and the loss's */
                ck_assert_uint_eq(bwd[0], 2 * L + 1); /* + the head's f */
            } else {
                ck_assert_uint_eq(fwd[2], 2 * L + 1); /* + the embedding's reduce-scatter */
                ck_assert_uint_eq(fwd[0], 1);         /* the loss's */
                ck_assert_uint_eq(bwd[1], 2 * L + 2 * L + 1);
            }
            remat_analysis_destroy(an);
            remat_graph_destroy(g);
            remat_graph_destroy(whole);
        }
    }
    /* t must divide the vocabulary. */
    remat_gen_opts o;
    remat_gen_opts_init(&o, REMAT_GEN_TRANSFORMER);
    o.seq = 16;
    o.batch = 1;
    o.hidden = 64;
    o.heads = 8;
    o.layers = 1;
    o.vocab = 50;
    o.tp = 4;
    o.vocab_parallel = true;
    remat_err err;
    remat_err_init(&err);
    ck_assert_ptr_null(remat_gen_json(&o, NULL, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "--vocab-parallel: --tp 4 must divide --vocab (50)"));
}
END_TEST

Suite *korthikanti_suite(void)
{
    Suite *s = suite_create("korthikanti");
    TCase *tc = tcase_create("korthikanti");
    tcase_add_test(tc, korthikanti_should_match_saved_bytes_per_layer_exactly);
    tcase_add_test(tc, korthikanti_should_account_for_each_dropout_without_it);
    tcase_add_test(tc, korthikanti_should_add_one_layer_of_saved_bytes_per_layer_in_replay);
    suite_add_tcase(s, tc);
    TCase *t2 = tcase_create("table2");
    tcase_set_timeout(t2, 60);
    tcase_add_test(t2, table2_should_match_saved_bytes_per_layer_for_each_degree);
    tcase_add_test(t2, table2_should_add_one_layer_per_layer_in_replay);
    tcase_add_test(t2, tensor_parallel_should_split_the_layer_weights);
    tcase_add_test(t2, tensor_parallel_should_schedule_its_collectives);
    tcase_add_test(t2, tensor_parallel_should_refuse_degrees_that_do_not_divide);
    tcase_add_test(t2, vocab_parallel_should_split_the_embedding_and_head);
    tcase_add_test(t2, vocab_parallel_should_shrink_the_logits_and_add_its_collectives);
    suite_add_tcase(s, t2);
    return s;
}

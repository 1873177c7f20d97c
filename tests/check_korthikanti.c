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
 * The oracle is the closed form, computed here and nowhere else.
 */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct {
    uint64_t s, b, h, a;
} megatron;

/* Korthikanti et al., eq. 1: s*b*h*(34 + 5*a*s/h) = 34*s*b*h + 5*a*s^2*b
 * (the product is whole for every a, s, h). */
static uint64_t korthikanti(const megatron *m)
{
    return 34 * m->s * m->b * m->h + 5 * m->a * m->s * m->s * m->b;
}

static remat_graph *gen_transformer(const megatron *m, uint32_t layers, bool dropout)
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
    remat_err err;
    remat_err_init(&err);
    size_t len = 0;
    char *json = remat_gen_json(&o, &len, &err);
    ck_assert_msg(json != NULL, "gen transformer failed: %s", err.msg);
    remat_graph *g = t_load(json);
    remat_free(json);
    return g;
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

static uint64_t store_all_activation_max(const megatron *m, uint32_t layers)
{
    remat_graph *g = gen_transformer(m, layers, true);
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

Suite *korthikanti_suite(void)
{
    Suite *s = suite_create("korthikanti");
    TCase *tc = tcase_create("korthikanti");
    tcase_add_test(tc, korthikanti_should_match_saved_bytes_per_layer_exactly);
    tcase_add_test(tc, korthikanti_should_account_for_each_dropout_without_it);
    tcase_add_test(tc, korthikanti_should_add_one_layer_of_saved_bytes_per_layer_in_replay);
    suite_add_tcase(s, tc);
    return s;
}

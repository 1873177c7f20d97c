/*
 * check_ledger.c - the training-state ledger against the specification's
 * worked numbers and against closed forms computed here, independently of
 * the code under test: the ZeRO memory formulas of Rajbhandari et al. 2019
 * (arXiv 1910.02054, section 5 and Figure 1), Adafactor's row/column
 * accumulators, 8-bit Adam's block scales.
 */
#include "test_util.h"
#include "util/util_internal.h"

#include <stdio.h>

/* The specification's MLP 2->20->15->3 with biases: 423 binary64 params.
 * graphs/mlp423.json is the same graph with activations and FLOPs; the CLI
 * tests run that file. */
static const char *MLP423 =
    "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"mlp423\","
    "\"inputs\":[{\"id\":\"x\",\"bytes\":256}],"
    "\"params\":["
    "{\"id\":\"w1\",\"bytes\":320,\"dtype\":\"f64\",\"shape\":[2,20]},"
    "{\"id\":\"b1\",\"bytes\":160,\"dtype\":\"f64\",\"shape\":[20]},"
    "{\"id\":\"w2\",\"bytes\":2400,\"dtype\":\"f64\",\"shape\":[20,15]},"
    "{\"id\":\"b2\",\"bytes\":120,\"dtype\":\"f64\",\"shape\":[15]},"
    "{\"id\":\"w3\",\"bytes\":360,\"dtype\":\"f64\",\"shape\":[15,3]},"
    "{\"id\":\"b3\",\"bytes\":24,\"dtype\":\"f64\",\"shape\":[3]}],"
    "\"ops\":[{\"id\":\"h1\",\"op\":\"linear\",\"inputs\":[\"x\",\"w1\",\"b1\"],\"bytes\":2560,\"flops\":1600},"
    "{\"id\":\"h2\",\"op\":\"linear\",\"inputs\":[\"h1\",\"w2\",\"b2\"],\"bytes\":1920,\"flops\":9840},"
    "{\"id\":\"h3\",\"op\":\"linear\",\"inputs\":[\"h2\",\"w3\",\"b3\"],\"bytes\":384,\"flops\":1488},"
    "{\"id\":\"loss\",\"op\":\"sum\",\"inputs\":[\"h3\"],\"bytes\":8,\"flops\":48}],"
    "\"outputs\":[\"loss\"]}";

/* A graph whose params are given by `params_json` (the array's contents). */
static remat_graph *graph_with(const char *params_json)
{
    char buf[4096];
    snprintf(buf, sizeof buf,
             "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"g\",\"inputs\":[{\"id\":\"x\",\"bytes\":8}],"
             "\"params\":[%s],\"ops\":[{\"id\":\"loss\",\"op\":\"f\",\"inputs\":[\"x\"],\"bytes\":8,\"flops\":1}],"
             "\"outputs\":[\"loss\"]}",
             params_json);
    return t_load(buf);
}

static remat_ledger_result count_ok(const remat_ledger_config *cfg, uint64_t n)
{
    remat_ledger_result r;
    remat_err err;
    remat_err_init(&err);
    remat_status st = remat_ledger_from_count(cfg, n, &r, &err);
    ck_assert_msg(st == REMAT_OK, "ledger failed: %s", err.msg);
    return r;
}

static remat_ledger_result graph_ok(const remat_ledger_config *cfg, const remat_graph *g)
{
    remat_ledger_result r;
    remat_err err;
    remat_err_init(&err);
    remat_status st = remat_ledger_from_graph(cfg, g, &r, &err);
    ck_assert_msg(st == REMAT_OK, "ledger failed: %s", err.msg);
    return r;
}

static void count_fails(const remat_ledger_config *cfg, uint64_t n, remat_status code, const char *substr)
{
    remat_ledger_result r;
    remat_err err;
    remat_err_init(&err);
    remat_status st = remat_ledger_from_count(cfg, n, &r, &err);
    ck_assert_msg(st == code, "expected %s, got %s (%s)", remat_status_str(code), remat_status_str(st), err.msg);
    ck_assert_msg_contains(&err, substr);
}

static void graph_fails(const remat_ledger_config *cfg, const remat_graph *g, remat_status code, const char *substr)
{
    remat_ledger_result r;
    remat_err err;
    remat_err_init(&err);
    remat_status st = remat_ledger_from_graph(cfg, g, &r, &err);
    ck_assert_msg(st == code, "expected %s, got %s (%s)", remat_status_str(code), remat_status_str(st), err.msg);
    ck_assert_msg_contains(&err, substr);
}

static int has_note(const char (*list)[REMAT_LEDGER_NOTE_LEN], uint32_t n, const char *substr)
{
    for (uint32_t i = 0; i < n; i++)
        if (strstr(list[i], substr))
            return 1;
    return 0;
}

#define ck_assert_assumes(r, s)                                                                           \
    ck_assert_msg(has_note((r)->assumptions, (r)->n_assumptions, (s)), "no assumption mentions '%s'", (s))
#define ck_assert_excludes(r, s) ck_assert_msg(has_note((r)->excluded, (r)->n_excluded, (s)), "no exclusion mentions '%s'", (s))

/* ---- the specification's worked numbers ---- */

START_TEST(ledger_should_reproduce_the_423_binary64_worked_numbers)
{
    remat_ledger_config cfg;
    remat_ledger_config_init(&cfg);
    cfg.weights = REMAT_LEDGER_DT_F64;
    cfg.grads = REMAT_LEDGER_DT_F64;
    cfg.states = REMAT_LEDGER_DT_F64;
    cfg.optimizer = REMAT_LEDGER_ADAM;
    remat_ledger_result r = count_ok(&cfg, 423);
    ck_assert_uint_eq(r.weights.elements, 423);
    ck_assert_uint_eq(r.weights.bytes, 3384);
    ck_assert_uint_eq(r.optimizer_state.elements, 846);
    ck_assert_uint_eq(r.weights.bytes + r.optimizer_state.bytes, 10152);
    ck_assert_uint_eq(r.gradients.bytes, 3384);
    ck_assert_uint_eq(r.total_bytes, 13536);
    ck_assert_uint_eq(r.master_weights.bytes, 0);
    /* A frozen reference (one copy of the model) adds 3384 B. */
    cfg.frozen_copies = 1;
    remat_ledger_result f = count_ok(&cfg, 423);
    ck_assert_uint_eq(f.frozen.bytes, 3384);
    ck_assert_uint_eq(f.total_bytes, 13536 + 3384);
}
END_TEST

START_TEST(ledger_should_count_the_423_params_of_the_mlp_graph)
{
    remat_graph *g = t_load(MLP423);
    remat_ledger_config cfg;
    remat_ledger_config_init(&cfg);
    /* The graph's params are f64, so every precision defaults to f64. */
    remat_ledger_result r = graph_ok(&cfg, g);
    ck_assert_uint_eq(r.trainable_elements, 2 * 20 + 20 + 20 * 15 + 15 + 15 * 3 + 3);
    ck_assert_uint_eq(r.weights.bytes, 3384);
    ck_assert_uint_eq(r.optimizer_state.bytes, 6768);
    ck_assert_uint_eq(r.total_bytes, 13536);
    ck_assert_assumes(&r, "the graph params' dtype");
    /* The same numbers when the precisions are given explicitly. */
    cfg.weights = cfg.grads = cfg.states = REMAT_LEDGER_DT_F64;
    cfg.frozen_copies = 1;
    r = graph_ok(&cfg, g);
    ck_assert_uint_eq(r.total_bytes, 13536 + 3384);
    ck_assert_uint_eq(r.frozen.bytes, 3384);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(ledger_should_reproduce_the_1e9_mixed_precision_worked_numbers)
{
    remat_ledger_config cfg;
    remat_ledger_config_init(&cfg);
    cfg.weights = REMAT_LEDGER_DT_BF16;
    cfg.grads = REMAT_LEDGER_DT_BF16;
    cfg.states = REMAT_LEDGER_DT_F32;
    remat_ledger_result r = count_ok(&cfg, 1000000000);
    ck_assert_uint_eq(r.total_bytes, 12000000000ULL);
    ck_assert_uint_eq(r.optimizer_state.bytes, 8000000000ULL);
    ck_assert_assumes(&r, "each stored in f32");
    cfg.master = REMAT_LEDGER_DT_F32;
    r = count_ok(&cfg, 1000000000);
    ck_assert_uint_eq(r.master_weights.bytes, 4000000000ULL);
    ck_assert_uint_eq(r.total_bytes, 16000000000ULL);
}
END_TEST

/* ---- ZeRO (Rajbhandari et al. 2019, section 5) ---- */

/* Mixed-precision Adam: bf16 weights and gradients (2 B each), an f32
 * master copy and two f32 moments: K = 12 bytes of optimizer state per
 * element, the paper's setting. */
static void mixed_adam(remat_ledger_config *cfg, uint32_t stage, uint64_t dp)
{
    remat_ledger_config_init(cfg);
    cfg->weights = cfg->grads = REMAT_LEDGER_DT_BF16;
    cfg->states = cfg->master = REMAT_LEDGER_DT_F32;
    cfg->zero_stage = stage;
    cfg->dp = dp;
}

/* The paper's per-device memory (K/4 f32 arrays of Psi/N_d), as DeepSpeed
 * pads it: stages 1-2 flatten the group padded to a multiple of 2 N_d
 * (stage_1_and_2.py, nccl_start_alignment_factor = 2), so a rank's
 * partition is 2 ceil(Psi / 2N_d) and every rank holds the padded weights,
 * N_d partitions; stage 3 pads each param to N_d (a bare count is one
 * param): ceil(Psi / N_d). With 2 N_d dividing Psi this is the paper's
 * formula exactly. */
static uint64_t paper_bytes(uint32_t stage, uint64_t psi, uint64_t nd)
{
    const uint64_t K = 12;
    uint64_t part12 = nd == 1 ? psi : 2 * ((psi + 2 * nd - 1) / (2 * nd)), w12 = nd == 1 ? psi : nd * part12;
    uint64_t part3 = (psi + nd - 1) / nd;
    switch (stage) {
    case 0: return (2 + 2 + K) * psi;
    case 1: return 2 * w12 + 2 * psi + K * part12;
    case 2: return 2 * w12 + (2 + K) * part12;
    default: return (2 + 2 + K) * part3;
    }
}

START_TEST(ledger_should_match_the_zero_paper_formulas)
{
    static const uint64_t cases[][2] = {
        {7500000000ULL, 64}, /* the paper's Figure 1 example */
        {1000000000ULL, 8},  {1000000000ULL, 1}, {423, 4},    {423, 423}, {423, 1000},
        {1000003, 7},        {1000000001ULL, 3}, {17, 16},    {65536, 1024},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t psi = cases[i][0], nd = cases[i][1];
        for (uint32_t stage = 0; stage <= 3; stage++) {
            remat_ledger_config cfg;
            mixed_adam(&cfg, stage, nd);
            remat_ledger_result r = count_ok(&cfg, psi);
            if (psi % (2 * nd) == 0) /* the paper's own formula, no padding */
                ck_assert_uint_eq(r.total_bytes, stage == 0   ? 16 * psi
                                                 : stage == 1 ? 4 * psi + 12 * psi / nd
                                                 : stage == 2 ? 2 * psi + 14 * psi / nd
                                                              : 16 * psi / nd);
            ck_assert_msg(r.total_bytes == paper_bytes(stage, psi, nd),
                          "psi %llu N_d %llu stage %u: %llu B, paper %llu B", (unsigned long long)psi,
                          (unsigned long long)nd, stage, (unsigned long long)r.total_bytes,
                          (unsigned long long)paper_bytes(stage, psi, nd));
            /* Communication (section 7): 2 Psi for stages 0-2, 3 Psi for
             * stage 3, none on one device; in the gradients' bf16. */
            uint64_t want = nd == 1 ? 0 : (stage == 3 ? 3 : 2) * psi;
            ck_assert_uint_eq(r.comm_elements, want);
            ck_assert_uint_eq(r.comm_bytes, 2 * want);
        }
    }
    /* Figure 1's figures: 120 GB, 31.4 GB, 16.6 GB, 1.9 GB for 7.5B on 64. */
    remat_ledger_config cfg;
    static const uint64_t fig1[] = {120000000000ULL, 31406250000ULL, 16640625000ULL, 1875000000ULL};
    for (uint32_t stage = 0; stage <= 3; stage++) {
        mixed_adam(&cfg, stage, 64);
        ck_assert_uint_eq(count_ok(&cfg, 7500000000ULL).total_bytes, fig1[stage]);
    }
}
END_TEST

START_TEST(ledger_should_round_shards_up_per_array)
{
    /* 10 elements on 4 devices. Stages 1-2: the flat group is padded to a
     * multiple of 2 x 4 = 8, so 16 elements, 4 per rank, for each array
     * separately: two f32 moments are 2 * 4 * 4 = 32 B; every rank holds
     * the padded 16 weights. Stage 3: one param padded to 12, 3 per rank. */
    remat_ledger_config cfg;
    remat_ledger_config_init(&cfg);
    cfg.weights = REMAT_LEDGER_DT_F32;
    cfg.zero_stage = 1;
    cfg.dp = 4;
    remat_ledger_result r = count_ok(&cfg, 10);
    ck_assert_uint_eq(r.optimizer_state.elements, 8);
    ck_assert_uint_eq(r.optimizer_state.bytes, 32);
    ck_assert_uint_eq(r.gradients.elements, 10);
    ck_assert_uint_eq(r.weights.elements, 16);
    ck_assert_assumes(&r, "padded to a multiple of 2 x 4");
    cfg.zero_stage = 2;
    r = count_ok(&cfg, 10);
    ck_assert_uint_eq(r.gradients.elements, 4);
    ck_assert_uint_eq(r.weights.elements, 16);
    cfg.zero_stage = 3;
    r = count_ok(&cfg, 10);
    ck_assert_uint_eq(r.weights.elements, 3);
    ck_assert_uint_eq(r.total_bytes, 4 * (3 + 3 + 6));
    ck_assert_assumes(&r, "each rank keeps ceil(E / 4) elements of it");
}
END_TEST

START_TEST(ledger_should_shard_frozen_graph_params_only_at_stage_3)
{
    remat_graph *g = graph_with("{\"id\":\"w\",\"bytes\":400,\"dtype\":\"f32\",\"shape\":[10,10]},"
                                "{\"id\":\"f\",\"bytes\":40,\"dtype\":\"f32\",\"shape\":[10],\"frozen\":true}");
    remat_ledger_config cfg;
    remat_ledger_config_init(&cfg);
    cfg.optimizer = REMAT_LEDGER_SGD;
    cfg.zero_stage = 2;
    cfg.dp = 3;
    cfg.frozen_copies = 1;
    remat_ledger_result r = graph_ok(&cfg, g);
    ck_assert_uint_eq(r.trainable_elements, 100);
    ck_assert_uint_eq(r.frozen_elements, 10);
    /* Frozen: the graph's 10 elements plus one whole-model copy of 110. */
    ck_assert_uint_eq(r.frozen.elements, 10 + 110);
    ck_assert_uint_eq(r.gradients.elements, 34);
    ck_assert_uint_eq(r.comm_elements, 200);
    cfg.zero_stage = 3;
    r = graph_ok(&cfg, g);
    /* ZeRO-3 partitions the model's frozen params too; the copy is a
     * separate model and stays whole. */
    ck_assert_uint_eq(r.frozen.elements, 4 + 110);
    ck_assert_uint_eq(r.weights.elements, 34);
    /* Two all-gathers of all 110 weights, one reduce-scatter of 100 grads. */
    ck_assert_uint_eq(r.comm_elements, 2 * 110 + 100);
    remat_graph_destroy(g);
}
END_TEST

/* ---- optimizers ---- */

START_TEST(ledger_should_count_states_per_optimizer)
{
    static const struct {
        remat_ledger_optimizer o;
        uint64_t states;
    } want[] = {
        {REMAT_LEDGER_SGD, 0},  {REMAT_LEDGER_MOMENTUM, 1}, {REMAT_LEDGER_ADAM, 2},
        {REMAT_LEDGER_ADAMW, 2}, {REMAT_LEDGER_LION, 1},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        remat_ledger_config cfg;
        remat_ledger_config_init(&cfg);
        cfg.optimizer = want[i].o;
        cfg.weights = REMAT_LEDGER_DT_BF16;
        cfg.states = REMAT_LEDGER_DT_F32;
        remat_ledger_result r = count_ok(&cfg, 1000);
        ck_assert_uint_eq(r.optimizer_state.elements, want[i].states * 1000);
        ck_assert_uint_eq(r.optimizer_state.bytes, want[i].states * 4000);
        ck_assert_uint_eq(r.total_bytes, 2000 + 2000 + want[i].states * 4000);
    }
}
END_TEST

START_TEST(ledger_should_round_adam8bit_block_scales_up)
{
    remat_ledger_config cfg;
    remat_ledger_config_init(&cfg);
    cfg.optimizer = REMAT_LEDGER_ADAM8BIT;
    /* 5000 elements, blocks of 2048: ceil(5000/2048) = 3 scales per state. */
    remat_ledger_result r = count_ok(&cfg, 5000);
    ck_assert_uint_eq(r.optimizer_state.bytes, 2 * 5000 + 2 * 3 * 4);
    ck_assert_uint_eq(r.optimizer_state.elements, 2 * 5000 + 2 * 3);
    ck_assert_uint_eq(r.optimizer_state.dtype, REMAT_LEDGER_DT_UINT8);
    /* An exact multiple needs no extra block. */
    ck_assert_uint_eq(count_ok(&cfg, 4096).optimizer_state.bytes, 2 * 4096 + 2 * 2 * 4);
    /* Other block sizes. */
    cfg.block = 64;
    ck_assert_uint_eq(count_ok(&cfg, 5000).optimizer_state.bytes, 2 * 5000 + 2 * 79 * 4);
    cfg.block = 1;
    ck_assert_uint_eq(count_ok(&cfg, 5000).optimizer_state.bytes, 2 * 5000 + 2 * 5000 * 4);
    cfg.block = 2048;
    /* Below min_8bit (4096, as bitsandbytes) states stay in f32. */
    r = count_ok(&cfg, 4095);
    ck_assert_uint_eq(r.optimizer_state.bytes, 2 * 4095 * 4);
    ck_assert_assumes(&r, "min_8bit_size");
    cfg.min_8bit = 0;
    ck_assert_uint_eq(count_ok(&cfg, 4095).optimizer_state.bytes, 2 * 4095 + 2 * 2 * 4);
    /* Sharded: the partition of ceil(5000/3) = 1667 elements has 1 block. */
    cfg.zero_stage = 1;
    cfg.dp = 3;
    ck_assert_uint_eq(count_ok(&cfg, 5000).optimizer_state.bytes, 2 * 1667 + 2 * 1 * 4);
}
END_TEST

START_TEST(ledger_should_count_adam8bit_blocks_per_tensor)
{
    /* Tensors of 3000 and 5000 elements: 2 + 3 = 5 blocks per state (one
     * flat tensor of 8000 would have 4); a 100-element bias keeps f32. */
    remat_graph *g = graph_with("{\"id\":\"a\",\"bytes\":6000,\"dtype\":\"bf16\",\"shape\":[3000]},"
                                "{\"id\":\"b\",\"bytes\":10000,\"dtype\":\"bf16\",\"shape\":[50,100]},"
                                "{\"id\":\"c\",\"bytes\":200,\"dtype\":\"bf16\",\"shape\":[100]}");
    remat_ledger_config cfg;
    remat_ledger_config_init(&cfg);
    cfg.optimizer = REMAT_LEDGER_ADAM8BIT;
    cfg.min_8bit = 1000;
    remat_ledger_result r = graph_ok(&cfg, g);
    ck_assert_uint_eq(r.optimizer_state.bytes, 2 * 8000 + 2 * 5 * 4 + 2 * 100 * 4);
    ck_assert_uint_eq(r.weights.bytes, 8100 * 2);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(ledger_should_factor_adafactor_by_shape)
{
    /* A [20, 15] matrix keeps 20 + 15 accumulators; a [15] vector keeps a
     * full second moment; a [4, 5, 6] tensor keeps 4*5 rows and 4*6 columns
     * (leading dims are batch dims); the frozen param keeps nothing. */
    remat_graph *g = graph_with("{\"id\":\"w\",\"bytes\":1200,\"dtype\":\"f32\",\"shape\":[20,15]},"
                                "{\"id\":\"b\",\"bytes\":60,\"dtype\":\"f32\",\"shape\":[15]},"
                                "{\"id\":\"t\",\"bytes\":480,\"dtype\":\"f32\",\"shape\":[4,5,6]},"
                                "{\"id\":\"f\",\"bytes\":4000,\"dtype\":\"f32\",\"shape\":[1000],\"frozen\":true}");
    remat_ledger_config cfg;
    remat_ledger_config_init(&cfg);
    cfg.optimizer = REMAT_LEDGER_ADAFACTOR;
    remat_ledger_result r = graph_ok(&cfg, g);
    uint64_t second = (20 + 15) + 15 + (4 * 5 + 4 * 6);
    ck_assert_uint_eq(r.optimizer_state.elements, second);
    ck_assert_uint_eq(r.optimizer_state.bytes, 4 * second);
    ck_assert_assumes(&r, "no first moment");
    /* beta1 adds a full first moment over the 435 trainable elements. */
    cfg.adafactor_beta1 = true;
    r = graph_ok(&cfg, g);
    ck_assert_uint_eq(r.optimizer_state.elements, second + 300 + 15 + 120);
    /* Sharded over 4 devices (stage 1): each array's partition rounds up. */
    cfg.zero_stage = 1;
    cfg.dp = 4;
    r = graph_ok(&cfg, g);
    ck_assert_uint_eq(r.optimizer_state.elements, (second + 3) / 4 + (435 + 3) / 4);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(ledger_should_refuse_adafactor_without_shapes)
{
    remat_ledger_config cfg;
    remat_ledger_config_init(&cfg);
    cfg.optimizer = REMAT_LEDGER_ADAFACTOR;
    count_fails(&cfg, 1000, REMAT_EINVAL, "cannot factor without shapes");
    remat_graph *g = graph_with("{\"id\":\"w\",\"bytes\":1200,\"dtype\":\"f32\"}");
    graph_fails(&cfg, g, REMAT_EGRAPH, "param 'w' has no shape");
    remat_graph_destroy(g);
}
END_TEST

/* ---- element counts from graphs ---- */

START_TEST(ledger_should_count_graph_elements_from_dtype_or_shape)
{
    remat_err err;
    remat_err_init(&err);
    uint64_t e;
    remat_graph *g = graph_with("{\"id\":\"a\",\"bytes\":24,\"dtype\":\"bf16\"},"
                                "{\"id\":\"b\",\"bytes\":999,\"shape\":[3,4]},"
                                "{\"id\":\"c\",\"bytes\":64}");
    ck_assert_int_eq(remat_ledger_param_elements(g, t_tensor(g, "a"), REMAT_LEDGER_DT_F32, &e, &err), REMAT_OK);
    ck_assert_uint_eq(e, 12);
    ck_assert_int_eq(remat_ledger_param_elements(g, t_tensor(g, "b"), REMAT_LEDGER_DT_F32, &e, &err), REMAT_OK);
    ck_assert_uint_eq(e, 12);
    ck_assert_int_eq(remat_ledger_param_elements(g, t_tensor(g, "c"), REMAT_LEDGER_DT_F64, &e, &err), REMAT_OK);
    ck_assert_uint_eq(e, 8);
    ck_assert_int_eq(remat_ledger_param_elements(g, t_tensor(g, "x"), REMAT_LEDGER_DT_F64, &e, &err), REMAT_EINVAL);
    /* The graph's one dtype (bf16) is the default weight precision; c has
     * neither dtype nor shape and is counted in it: 64 / 2 = 32. */
    remat_ledger_config cfg;
    remat_ledger_config_init(&cfg);
    cfg.optimizer = REMAT_LEDGER_SGD;
    remat_ledger_result r = graph_ok(&cfg, g);
    ck_assert_uint_eq(r.trainable_elements, 12 + 12 + 32);
    ck_assert_uint_eq(r.weights.dtype, REMAT_LEDGER_DT_BF16);
    ck_assert_assumes(&r, "neither dtype nor shape");
    remat_graph_destroy(g);
}
END_TEST

START_TEST(ledger_should_reject_inconsistent_graph_params)
{
    remat_ledger_config cfg;
    remat_ledger_config_init(&cfg);
    remat_graph *g = graph_with("{\"id\":\"w\",\"bytes\":100,\"dtype\":\"f64\",\"shape\":[2,3]}");
    graph_fails(&cfg, g, REMAT_EGRAPH, "param 'w': bytes 100 do not match its shape");
    remat_graph_destroy(g);
    g = graph_with("{\"id\":\"w\",\"bytes\":10,\"dtype\":\"f64\"}");
    graph_fails(&cfg, g, REMAT_EGRAPH, "not a whole number of 8-byte f64 elements");
    remat_graph_destroy(g);
    g = graph_with("{\"id\":\"w\",\"bytes\":10,\"dtype\":\"fp12\"}");
    graph_fails(&cfg, g, REMAT_EGRAPH, "param 'w': unknown dtype 'fp12'");
    remat_graph_destroy(g);
    /* Params in two precisions: the user must choose one. */
    g = graph_with("{\"id\":\"w\",\"bytes\":8,\"dtype\":\"f32\"},{\"id\":\"v\",\"bytes\":8,\"dtype\":\"bf16\"}");
    graph_fails(&cfg, g, REMAT_EINVAL, "choose the training precision with `weights`");
    cfg.weights = REMAT_LEDGER_DT_F32;
    ck_assert_uint_eq(graph_ok(&cfg, g).trainable_elements, 2 + 4);
    remat_graph_destroy(g);
    g = graph_with("");
    graph_fails(&cfg, g, REMAT_EGRAPH, "has no params");
    remat_graph_destroy(g);
}
END_TEST

/* ---- options, buffers and explicit lines ---- */

START_TEST(ledger_should_reject_bad_options)
{
    remat_ledger_config cfg;
    remat_err err;
    remat_ledger_dtype dt;
    remat_ledger_optimizer o;
    remat_err_init(&err);
    ck_assert_int_eq(remat_ledger_dtype_parse("fp12", "--weights", &dt, &err), REMAT_EINVAL);
    ck_assert_msg_contains(&err, "--weights: unknown dtype 'fp12'");
    remat_err_init(&err);
    ck_assert_int_eq(remat_ledger_optimizer_parse("adagrad", "--optimizer", &o, &err), REMAT_EINVAL);
    ck_assert_msg_contains(&err, "--optimizer: unknown optimizer 'adagrad'");

    remat_ledger_config_init(&cfg);
    cfg.zero_stage = 3;
    count_fails(&cfg, 1000, REMAT_EINVAL, "give their number with `dp` N");
    cfg.zero_stage = 4;
    cfg.dp = 2;
    count_fails(&cfg, 1000, REMAT_EINVAL, "`zero_stage`: stage 4 does not exist");
    remat_ledger_config_init(&cfg);
    count_fails(&cfg, 0, REMAT_EINVAL, "`n_params`: the parameter count must be at least 1");
    cfg.weights = REMAT_LEDGER_DT_NONE;
    count_fails(&cfg, 10, REMAT_EINVAL, "`weights`: 'none'");
    remat_ledger_config_init(&cfg);
    cfg.optimizer = REMAT_LEDGER_ADAM8BIT;
    cfg.block = 0;
    count_fails(&cfg, 10, REMAT_EINVAL, "`block`");
    cfg.block = 2048;
    cfg.states = REMAT_LEDGER_DT_F32;
    count_fails(&cfg, 10, REMAT_EINVAL, "adam8bit stores one-byte states");
    cfg.states = REMAT_LEDGER_DT_UINT8;
    count_ok(&cfg, 10);
    remat_ledger_config_init(&cfg);
    cfg.prefetch = 2;
    count_fails(&cfg, 10, REMAT_EINVAL, "`prefetch` counts buckets");
    cfg.bucket_bytes = 8;
    cfg.bucket_elements = 8;
    count_fails(&cfg, 10, REMAT_EINVAL, "not both");
}
END_TEST

START_TEST(ledger_should_report_overflow_naming_the_term)
{
    remat_ledger_config cfg;
    remat_ledger_config_init(&cfg);
    cfg.weights = REMAT_LEDGER_DT_F64;
    count_fails(&cfg, 1ULL << 62, REMAT_EOVERFLOW, "weights (`weights`)");
    cfg.weights = REMAT_LEDGER_DT_INT8;
    cfg.optimizer = REMAT_LEDGER_SGD;
    /* 2^62 one-byte elements fit; a 4-byte master copy does not. */
    remat_ledger_result r = count_ok(&cfg, 1ULL << 62);
    ck_assert_uint_eq(r.total_bytes, 2 * (1ULL << 62));
    cfg.master = REMAT_LEDGER_DT_F32;
    count_fails(&cfg, 1ULL << 62, REMAT_EOVERFLOW, "master weights (`master`)");
    cfg.master = REMAT_LEDGER_DT_NONE;
    cfg.frozen_copies = 1ULL << 40;
    count_fails(&cfg, 1ULL << 30, REMAT_EOVERFLOW, "`frozen_copies`");
    cfg.frozen_copies = 0;
    /* Each line fits; the sum does not. */
    cfg.workspace = UINT64_MAX - 100;
    count_fails(&cfg, 1000, REMAT_EOVERFLOW, "total bytes");
}
END_TEST

START_TEST(ledger_should_keep_buffers_workspace_and_reserve_as_lines)
{
    remat_ledger_config cfg;
    remat_ledger_config_init(&cfg);
    cfg.weights = REMAT_LEDGER_DT_BF16;
    cfg.states = REMAT_LEDGER_DT_F32;
    cfg.dp = 8;
    cfg.bucket_bytes = 25000000;
    cfg.prefetch = 1;
    cfg.workspace = 1 << 20;
    cfg.reserve = 1 << 30;
    remat_ledger_result r = count_ok(&cfg, 1000000000);
    ck_assert_uint_eq(r.comm_buffers.bytes, 2 * 25000000);
    ck_assert_uint_eq(r.workspace.bytes, 1 << 20);
    ck_assert_uint_eq(r.fragmentation_reserve.bytes, 1 << 30);
    ck_assert_uint_eq(r.total_bytes, 12000000000ULL + 50000000 + (1 << 20) + (1 << 30));
    ck_assert_uint_eq(r.comm_elements, 2000000000ULL);
    ck_assert_uint_eq(r.comm_bytes, 4000000000ULL);
    /* A bucket in elements is in the comm dtype (here f32). */
    cfg.bucket_bytes = 0;
    cfg.bucket_elements = 1000;
    cfg.comm = REMAT_LEDGER_DT_F32;
    r = count_ok(&cfg, 1000000000);
    ck_assert_uint_eq(r.comm_buffers.bytes, 2 * 4000);
    ck_assert_uint_eq(r.comm_bytes, 8000000000ULL);
    /* A bucket can never hold more than the whole model. */
    r = count_ok(&cfg, 100);
    ck_assert_uint_eq(r.comm_buffers.bytes, 2 * 400);
    ck_assert_assumes(&r, "capped");
    /* Nothing given: explicit exclusions instead of hidden factors. */
    remat_ledger_config_init(&cfg);
    r = count_ok(&cfg, 10);
    ck_assert_excludes(&r, "communication buffers");
    ck_assert_excludes(&r, "workspace");
    ck_assert_excludes(&r, "fragmentation");
    ck_assert_excludes(&r, "activations");
    ck_assert_assumes(&r, "no master weights");
}
END_TEST

START_TEST(ledger_should_store_tf32_as_f32_and_say_so)
{
    remat_ledger_config cfg;
    remat_ledger_config_init(&cfg);
    cfg.weights = REMAT_LEDGER_DT_TF32;
    cfg.optimizer = REMAT_LEDGER_SGD;
    remat_ledger_result r = count_ok(&cfg, 10);
    ck_assert_uint_eq(r.weights.bytes, 40);
    ck_assert_assumes(&r, "tf32 arrays are stored as 4-byte f32");
}
END_TEST

START_TEST(ledger_should_parse_dtype_names_and_aliases)
{
    static const struct {
        const char *name;
        remat_ledger_dtype dt;
        uint32_t size;
    } cases[] = {
        {"f64", REMAT_LEDGER_DT_F64, 8},        {"FLOAT64", REMAT_LEDGER_DT_F64, 8},
        {"double", REMAT_LEDGER_DT_F64, 8},     {"fp32", REMAT_LEDGER_DT_F32, 4},
        {"Float32", REMAT_LEDGER_DT_F32, 4},    {"tf32", REMAT_LEDGER_DT_TF32, 4},
        {"bfloat16", REMAT_LEDGER_DT_BF16, 2},  {"half", REMAT_LEDGER_DT_F16, 2},
        {"fp16", REMAT_LEDGER_DT_F16, 2},       {"f8_e4m3", REMAT_LEDGER_DT_F8_E4M3, 1},
        {"float8_e4m3fn", REMAT_LEDGER_DT_F8_E4M3, 1}, {"E5M2", REMAT_LEDGER_DT_F8_E5M2, 1},
        {"int8", REMAT_LEDGER_DT_INT8, 1},      {"u8", REMAT_LEDGER_DT_UINT8, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        remat_ledger_dtype dt;
        remat_err err;
        remat_err_init(&err);
        ck_assert_msg(remat_ledger_dtype_parse(cases[i].name, "t", &dt, &err) == REMAT_OK, "%s", cases[i].name);
        ck_assert_int_eq(dt, cases[i].dt);
        ck_assert_uint_eq(remat_ledger_dtype_size(dt), cases[i].size);
    }
    ck_assert_str_eq(remat_ledger_dtype_name(REMAT_LEDGER_DT_F8_E5M2), "f8_e5m2");
    remat_ledger_optimizer o;
    ck_assert_int_eq(remat_ledger_optimizer_parse("AdamW", "t", &o, NULL), REMAT_OK);
    ck_assert_int_eq(o, REMAT_LEDGER_ADAMW);
}
END_TEST

START_TEST(ledger_should_parse_parameter_counts)
{
    static const struct {
        const char *s;
        uint64_t v;
    } ok[] = {
        {"423", 423},          {"7B", 7000000000ULL}, {"1.5B", 1500000000ULL}, {"175e9", 175000000000ULL},
        {"70M", 70000000ULL},  {"8k", 8000},          {"2T", 2000000000000ULL}, {"7.5g", 7500000000ULL},
        {"1.25e3", 1250},      {"18446744073709551615", UINT64_MAX},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        uint64_t v = 0;
        remat_err err;
        remat_err_init(&err);
        ck_assert_msg(remat_ledger_parse_count(ok[i].s, "--params", &v, &err) == REMAT_OK, "%s: %s", ok[i].s, err.msg);
        ck_assert_uint_eq(v, ok[i].v);
    }
    static const struct {
        const char *s;
        remat_status st;
        const char *msg;
    } bad[] = {
        {"", REMAT_EINVAL, "empty"},
        {"1.5", REMAT_EINVAL, "not a whole number"},
        {"7x", REMAT_EINVAL, "unknown suffix"},
        {"7GB", REMAT_EINVAL, "unknown suffix"},
        {"abc", REMAT_EINVAL, "not a parameter count"},
        {"1e", REMAT_EINVAL, "no exponent"},
        {"18446744073709551616", REMAT_EOVERFLOW, "exceeds 2^64-1"},
        {"20e18", REMAT_EOVERFLOW, "exceeds 2^64-1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v;
        remat_err err;
        remat_err_init(&err);
        ck_assert_msg(remat_ledger_parse_count(bad[i].s, "--params", &v, &err) == bad[i].st, "%s", bad[i].s);
        ck_assert_msg_contains(&err, bad[i].msg);
        ck_assert_msg_contains(&err, "--params");
    }
}
END_TEST

START_TEST(ledger_should_grow_gradients_during_backward)
{
    remat_ledger_config cfg;
    remat_ledger_config_init(&cfg);
    cfg.weights = REMAT_LEDGER_DT_BF16;
    cfg.states = REMAT_LEDGER_DT_F32;
    remat_ledger_result r = count_ok(&cfg, 1000);
    ck_assert_uint_eq(remat_ledger_bytes_at(&r, REMAT_LEDGER_GRADIENTS, 0), 0);
    ck_assert_uint_eq(remat_ledger_bytes_at(&r, REMAT_LEDGER_GRADIENTS, 300), 600);
    ck_assert_uint_eq(remat_ledger_bytes_at(&r, REMAT_LEDGER_GRADIENTS, 1000), r.gradients.bytes);
    ck_assert_uint_eq(remat_ledger_bytes_at(&r, REMAT_LEDGER_GRADIENTS, 5000), r.gradients.bytes);
    /* Optimizer state is there throughout. */
    ck_assert_uint_eq(remat_ledger_bytes_at(&r, REMAT_LEDGER_OPTIMIZER_STATE, 0), 8000);
    ck_assert_uint_eq(remat_ledger_bytes_at(&r, REMAT_LEDGER_CATEGORY_COUNT, 0), 0);
    /* From stage 2, a device keeps its share of the gradients. */
    cfg.zero_stage = 2;
    cfg.dp = 4;
    r = count_ok(&cfg, 1000);
    ck_assert_uint_eq(remat_ledger_bytes_at(&r, REMAT_LEDGER_GRADIENTS, 301), 2 * 76);
    ck_assert_uint_eq(remat_ledger_bytes_at(&r, REMAT_LEDGER_GRADIENTS, 1000), 2 * 250);
    uint64_t sum = 0;
    for (int k = 0; k < REMAT_LEDGER_CATEGORY_COUNT; k++)
        sum += remat_ledger_bytes_at(&r, (remat_ledger_category)k, r.trainable_elements);
    ck_assert_uint_eq(sum, r.total_bytes);
}
END_TEST

START_TEST(ledger_should_format_text_and_json)
{
    remat_graph *g = t_load(MLP423);
    remat_ledger_config cfg;
    remat_ledger_config_init(&cfg);
    remat_ledger_result r = graph_ok(&cfg, g);
    remat_err err;
    remat_err_init(&err);
    size_t len;
    char *json = remat_ledger_format(&r, true, &len, &err);
    ck_assert_ptr_nonnull(json);
    ck_assert_uint_eq(len, strlen(json));
    ck_assert_ptr_nonnull(strstr(json, "\"categories\": {\"weights\": 3384, \"gradients\": 3384, "
                                       "\"optimizer_state\": 6768, \"master_weights\": 0, \"frozen\": 0, "
                                       "\"comm_buffers\": 0, \"workspace\": 0, \"fragmentation_reserve\": 0}"));
    ck_assert_ptr_nonnull(strstr(json, "\"total_bytes\": 13536"));
    ck_assert_ptr_nonnull(strstr(json, "\"communication\": {\"elements_per_step\": 0"));
    ck_assert_ptr_nonnull(strstr(json, "\"excluded\": ["));
    remat_free(json);
    char *text = remat_ledger_format(&r, false, NULL, &err);
    ck_assert_ptr_nonnull(text);
    ck_assert_ptr_nonnull(strstr(text, "GiB (2^30)"));
    ck_assert_ptr_nonnull(strstr(text, "GB (10^9)"));
    ck_assert_ptr_nonnull(strstr(text, "13536"));
    ck_assert_ptr_nonnull(strstr(text, "assumptions:"));
    remat_free(text);
    /* Out of memory: NULL and ENOMEM, nothing leaked (valgrind checks). */
    remat__alloc_fail_at(1);
    text = remat_ledger_format(&r, false, NULL, &err);
    remat__alloc_fail_at(0);
    ck_assert_ptr_null(text);
    ck_assert_int_eq(err.code, REMAT_ENOMEM);
    remat_graph_destroy(g);
}
END_TEST

Suite *ledger_suite(void)
{
    Suite *s = suite_create("ledger");
    TCase *tc = tcase_create("worked");
    tcase_add_test(tc, ledger_should_reproduce_the_423_binary64_worked_numbers);
    tcase_add_test(tc, ledger_should_count_the_423_params_of_the_mlp_graph);
    tcase_add_test(tc, ledger_should_reproduce_the_1e9_mixed_precision_worked_numbers);
    suite_add_tcase(s, tc);
    tc = tcase_create("zero");
    tcase_add_test(tc, ledger_should_match_the_zero_paper_formulas);
    tcase_add_test(tc, ledger_should_round_shards_up_per_array);
    tcase_add_test(tc, ledger_should_shard_frozen_graph_params_only_at_stage_3);
    suite_add_tcase(s, tc);
    tc = tcase_create("optimizers");
    tcase_add_test(tc, ledger_should_count_states_per_optimizer);
    tcase_add_test(tc, ledger_should_round_adam8bit_block_scales_up);
    tcase_add_test(tc, ledger_should_count_adam8bit_blocks_per_tensor);
    tcase_add_test(tc, ledger_should_factor_adafactor_by_shape);
    tcase_add_test(tc, ledger_should_refuse_adafactor_without_shapes);
    suite_add_tcase(s, tc);
    tc = tcase_create("graph");
    tcase_add_test(tc, ledger_should_count_graph_elements_from_dtype_or_shape);
    tcase_add_test(tc, ledger_should_reject_inconsistent_graph_params);
    suite_add_tcase(s, tc);
    tc = tcase_create("options");
    tcase_add_test(tc, ledger_should_reject_bad_options);
    tcase_add_test(tc, ledger_should_report_overflow_naming_the_term);
    tcase_add_test(tc, ledger_should_keep_buffers_workspace_and_reserve_as_lines);
    tcase_add_test(tc, ledger_should_store_tf32_as_f32_and_say_so);
    tcase_add_test(tc, ledger_should_parse_dtype_names_and_aliases);
    tcase_add_test(tc, ledger_should_parse_parameter_counts);
    tcase_add_test(tc, ledger_should_grow_gradients_during_backward);
    tcase_add_test(tc, ledger_should_format_text_and_json);
    suite_add_tcase(s, tc);
    return s;
}

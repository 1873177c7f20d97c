/*
 * check_deepspeed.c - DeepSpeed ZeRO as the engine implements it: the
 * padding of its partitions, the persistence threshold, Adam's step state,
 * optimizer offload and the JSON config (graphs/README.md, "Sharded data
 * parallel" and "DeepSpeed").
 *
 * Oracles are worked by hand from the rules in DeepSpeed's source (commit
 * 38327e0): stage_1_and_2.py pads the flat group to a multiple of
 * nccl_start_alignment_factor (2) x dp; partition_parameters.py pads each
 * param to a multiple of dp and keeps ceil(E / dp) elements on each rank;
 * parameter_offload.py keeps params of at most
 * stage3_param_persistence_threshold elements gathered. The ledger and the
 * replay are then checked against those figures and against each other.
 */
#include "exec_util.h"
#include "remat/ledger.h"

#include <stdio.h>
#include <string.h>

/* Four bf16 params of 1, 1, 1 and 14 elements (Psi = 17), each read by its
 * own op in a chain. */
static const char *const ODD =
    "{\"format\": \"remat-graph\", \"version\": 1, \"name\": \"odd\","
    " \"inputs\": [{\"id\": \"x\", \"bytes\": 64}],"
    " \"params\": [{\"id\": \"p1\", \"bytes\": 2, \"dtype\": \"bf16\"}, {\"id\": \"p2\", \"bytes\": 2, \"dtype\": \"bf16\"},"
    "              {\"id\": \"p3\", \"bytes\": 2, \"dtype\": \"bf16\"}, {\"id\": \"p4\", \"bytes\": 28, \"dtype\": \"bf16\"}],"
    " \"ops\": [{\"id\": \"a\", \"op\": \"matmul\", \"inputs\": [\"x\", \"p1\"], \"bytes\": 64, \"flops\": 10},"
    "          {\"id\": \"b\", \"op\": \"matmul\", \"inputs\": [\"a\", \"p2\"], \"bytes\": 64, \"flops\": 10},"
    "          {\"id\": \"c\", \"op\": \"matmul\", \"inputs\": [\"b\", \"p3\"], \"bytes\": 64, \"flops\": 10},"
    "          {\"id\": \"d\", \"op\": \"matmul\", \"inputs\": [\"c\", \"p4\"], \"bytes\": 4, \"flops\": 10}],"
    " \"outputs\": [\"d\"]}";

typedef struct {
    uint64_t weights, grads, states, master; /* bytes per rank at OPT */
    uint64_t comm;                           /* elements per rank per step */
} rank_figures;

/* The ledger (mixed-precision Adam: bf16 weights and gradients, f32 moments
 * and master) and a store-all replay of the same rank; both must equal
 * `want`, and so each other. */
static void check_rank(const remat_analysis *a, const remat_graph *g, uint32_t z, uint64_t dp,
                       uint64_t persist, const rank_figures *want)
{
    remat_err err;
    remat_err_init(&err);
    remat_ledger_config lc;
    remat_ledger_config_init(&lc);
    lc.weights = REMAT_LEDGER_DT_BF16;
    lc.states = lc.master = REMAT_LEDGER_DT_F32;
    lc.zero_stage = z;
    lc.dp = dp;
    lc.persist_threshold = persist;
    remat_ledger_result lr;
    ck_assert_int_eq(remat_ledger_from_graph(&lc, g, &lr, &err), REMAT_OK);
    ck_assert_msg(lr.weights.bytes == want->weights, "zero %u: ledger weights %llu, by hand %llu", z,
                  (unsigned long long)lr.weights.bytes, (unsigned long long)want->weights);
    ck_assert_uint_eq(lr.gradients.bytes, want->grads);
    ck_assert_uint_eq(lr.optimizer_state.bytes, want->states);
    ck_assert_uint_eq(lr.master_weights.bytes, want->master);
    ck_assert_uint_eq(lr.comm_elements, want->comm);

    remat_shard_config sc;
    remat_shard_config_init(&sc, z, dp);
    sc.persist_threshold = persist;
    remat_sharding sh;
    ck_assert_int_eq(remat_sharding_init(a, &sc, &sh, &err), REMAT_OK);
    remat_exec_extras x = {0};
    x.optimizer_state = lr.optimizer_state.bytes;
    x.master_weights = lr.master_weights.bytes;
    x.sharding = &sh;
    remat_schedule s;
    build_keep(a, NULL, &s);
    remat_replay_result r;
    ck_assert_int_eq(remat_replay(a, &s, &x, NULL, &r, &err), REMAT_OK);
    ck_assert_msg(r.valid, "zero %u: %s", z, err.msg);
    const uint64_t *at = r.at_opt_by_category;
    ck_assert_msg(at[REMAT_CAT_PARAMS] == want->weights, "zero %u: replay weights %llu, by hand %llu", z,
                  (unsigned long long)at[REMAT_CAT_PARAMS], (unsigned long long)want->weights);
    ck_assert_uint_eq(at[REMAT_CAT_PARAM_GRADS], want->grads);
    ck_assert_uint_eq(at[REMAT_CAT_OPTIMIZER_STATE], want->states);
    ck_assert_uint_eq(at[REMAT_CAT_MASTER_WEIGHTS], want->master);
    ck_assert_msg(r.comm_elements == want->comm, "zero %u: replay comm %llu, by hand %llu", z,
                  (unsigned long long)r.comm_elements, (unsigned long long)want->comm);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_sharding_destroy(&sh);
}

/* Psi = 17 over dp = 4, by hand:
 *   stages 1-2: 17 padded to a multiple of 2 x 4 = 8 is 24; each rank's
 *     partition is 6 elements: Adam 2 x 6 x 4 B = 48 B, master 6 x 4 = 24 B;
 *     every rank holds the padded bit16 group, 24 x 2 = 48 B; gradients stay
 *     whole at stage 1 (17 x 2 = 34 B) and are the 6-element partition at
 *     stage 2 (12 B). The flat ceil(17/4) = 5 would give 40 B and 20 B.
 *   stage 3: each param padded to 4: ceil(1/4) x 3 + ceil(14/4) = 3 + 4 = 7
 *     elements per rank: weights and gradients 14 B, Adam 56 B, master 28 B.
 *   communication: 2 Psi = 34 at stages 0-2; 3 Psi = 51 at stage 3 (real
 *     elements; the padding moves too but is not counted). */
START_TEST(deepspeed_should_pad_as_the_engine_pads)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(ODD, &g);
    const rank_figures want[4] = {
        {34, 34, 136, 68, 34}, {48, 34, 48, 24, 34}, {48, 12, 48, 24, 34}, {14, 14, 56, 28, 51}};
    for (uint32_t z = 0; z <= 3; z++)
        check_rank(a, g, z, 4, 0, &want[z]);
    /* Before the first instruction: ZeRO 3's gradient partition (7 x 2 B)
     * is already there (stage3.py allocates grad_partitions_flat_buffer
     * when the engine starts); stage 2's comes at the first reduction
     * (stage_1_and_2.py grads_in_partition), and its padded weights (48 B)
     * are resident from the start. */
    for (uint32_t z = 2; z <= 3; z++) {
        remat_shard_config sc;
        remat_shard_config_init(&sc, z, 4);
        remat_sharding sh;
        remat_err err;
        remat_err_init(&err);
        ck_assert_int_eq(remat_sharding_init(a, &sc, &sh, &err), REMAT_OK);
        remat_exec_extras x = {0};
        x.sharding = &sh;
        remat_replay_cursor *c;
        ck_assert_int_eq(remat_replay_begin(a, &x, NULL, &c, &err), REMAT_OK);
        uint64_t by[REMAT_CAT_COUNT];
        remat_replay_live_by_category(c, by);
        ck_assert_uint_eq(by[REMAT_CAT_PARAM_GRADS], z == 3 ? 14 : 0);
        ck_assert_uint_eq(by[REMAT_CAT_PARAMS], z == 3 ? 14 : 48);
        remat_replay_cursor_destroy(c);
        remat_sharding_destroy(&sh);
    }
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* stage3_param_persistence_threshold = 1 over dp = 4: p1, p2, p3 (one
 * element each) are persistent. By hand, per rank: each keeps its
 * partition (1) and its gathered whole padded to 4 (4): 3 x 5 = 15, plus
 * p4's partition 4: 19 elements, 38 B of weights; gradients, Adam and
 * master are partitioned as before (7 elements). Communication: p4 is
 * gathered in forward and in backward (2 x 14), the persistent params once
 * after the step (3), and the gradients reduce-scattered (17): 48. Only
 * p4's unit is ever gathered: 16 padded elements, 32 B. */
START_TEST(deepspeed_should_keep_persistent_params_gathered)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(ODD, &g);
    const rank_figures want = {38, 14, 56, 28, 48};
    check_rank(a, g, 3, 4, 1, &want);
    /* The schedule: only d's unit in forward and backward, the persistent
     * units after OPT. */
    remat_shard_config sc;
    remat_shard_config_init(&sc, 3, 4);
    sc.persist_threshold = 1;
    remat_sharding sh;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_sharding_init(a, &sc, &sh, &err), REMAT_OK);
    remat_schedule s, full;
    build_keep(a, NULL, &s);
    remat_schedule_init(&full);
    ck_assert_int_eq(remat_schedule_shard(&sh, &s, &full, &err), REMAT_OK);
    char text[1024] = "";
    for (size_t i = 0; i < full.n; i++) {
        remat_instr in = full.ins[i];
        if (in.kind < REMAT_I_ALLGATHER && in.kind != REMAT_I_OPT)
            continue;
        size_t n = strlen(text);
        snprintf(text + n, sizeof text - n, "%s%s %s", n ? ", " : "", remat_instr_name((remat_instr_kind)in.kind),
                 in.kind == REMAT_I_OPT ? "" : in.kind == REMAT_I_REDUCE_SCATTER ? "b" : g->ops[in.arg].id);
    }
    ck_assert_str_eq(text, "ALLGATHER d, RELEASE d, ALLGATHER d, RELEASE d, REDUCE_SCATTER b, OPT , "
                           "ALLGATHER a, ALLGATHER b, ALLGATHER c");
    remat_exec_extras x = {0};
    x.sharding = &sh;
    remat_replay_result r;
    ck_assert_int_eq(remat_replay(a, &full, &x, NULL, &r, &err), REMAT_OK);
    ck_assert_msg(r.valid, "%s", err.msg);
    ck_assert_uint_eq(r.category_peak[REMAT_CAT_GATHERED_PARAMS], 32);
    remat_replay_result_destroy(&r);
    /* Gathering a persistent param's unit before the step is refused. */
    remat_schedule bad;
    remat_schedule_init(&bad);
    ck_assert_int_eq(remat_schedule_push(&bad, REMAT_I_ALLGATHER, 0), REMAT_OK);
    ck_assert_int_eq(remat_replay(a, &bad, &x, NULL, &r, &err), REMAT_OK);
    ck_assert(!r.valid);
    ck_assert_ptr_nonnull(strstr(err.msg, "holds only persistent params"));
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&bad);
    remat_schedule_destroy(&full);
    remat_schedule_destroy(&s);
    remat_sharding_destroy(&sh);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

static remat_ledger_result ledger_of(const remat_graph *g, uint32_t z, uint64_t dp, remat_ledger_step step,
                                     uint64_t sub_group, bool offload)
{
    remat_err err;
    remat_err_init(&err);
    remat_ledger_config lc;
    remat_ledger_config_init(&lc);
    lc.weights = REMAT_LEDGER_DT_BF16;
    lc.states = lc.master = REMAT_LEDGER_DT_F32;
    lc.zero_stage = z;
    lc.dp = dp;
    lc.step = step;
    lc.sub_group = sub_group;
    lc.offload_optimizer = offload;
    remat_ledger_result r;
    ck_assert_int_eq(remat_ledger_from_graph(&lc, g, &r, &err), REMAT_OK);
    return r;
}

/* Adam's step counters, 4 B each, by hand on the odd graph: without ZeRO
 * one per param (4 params: 16 B); ZeRO 1/2 hand the optimizer one flat
 * partition (4 B); ZeRO 3 one per sub group: partitions 1, 1, 1, 4 with
 * sub_group_size 2 close a group at p2 (2) and at p4 (1 + 4): 2 groups, 8 B;
 * with the default 1e9, one. HOST puts them on the host line, DEVICE in the
 * optimizer state (Adam's 136 B without ZeRO, 48 B at ZeRO 1, 56 B at ZeRO 3
 * per check_rank's figures), NONE nowhere. */
START_TEST(deepspeed_should_count_adam_step_where_it_lives)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(ODD, &g);
    remat_ledger_result r = ledger_of(g, 0, 1, REMAT_LEDGER_STEP_HOST, 1000000000, false);
    ck_assert_uint_eq(r.step_tensors, 4);
    ck_assert_uint_eq(r.host.bytes, 16);
    ck_assert_uint_eq(r.optimizer_state.bytes, 136);
    r = ledger_of(g, 0, 1, REMAT_LEDGER_STEP_DEVICE, 1000000000, false);
    ck_assert_uint_eq(r.host.bytes, 0);
    ck_assert_uint_eq(r.optimizer_state.bytes, 136 + 16);
    r = ledger_of(g, 1, 4, REMAT_LEDGER_STEP_DEVICE, 1000000000, false);
    ck_assert_uint_eq(r.optimizer_state.bytes, 48 + 4);
    r = ledger_of(g, 3, 4, REMAT_LEDGER_STEP_DEVICE, 2, false);
    ck_assert_uint_eq(r.step_tensors, 2);
    ck_assert_uint_eq(r.optimizer_state.bytes, 56 + 8);
    r = ledger_of(g, 3, 4, REMAT_LEDGER_STEP_HOST, 1000000000, false);
    ck_assert_uint_eq(r.step_tensors, 1);
    ck_assert_uint_eq(r.host.bytes, 4);
    r = ledger_of(g, 3, 4, REMAT_LEDGER_STEP_NONE, 2, false);
    ck_assert_uint_eq(r.host.bytes, 0);
    ck_assert_uint_eq(r.optimizer_state.bytes, 56);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* offload_optimizer {device: cpu} on the odd graph over 4 ranks, by hand:
 *   stages 1-2: the 6-element fp32 partition on the host: Adam 48 B, master
 *     24 B, its fp32 gradient 24 B, the step counter 4 B: 100 B; the device
 *     keeps no gradients, state or master at OPT; per step the gradient
 *     partition goes down (6 x 4 B) and the bf16 weights come up (6 x 2 B):
 *     12 elements, 36 B.
 *   stage 3: the 7-element partition: 56 + 28 + gradients in bf16 14 + 4 =
 *     102 B on the host; 14 elements, 7 x 2 + 7 x 2 = 28 B cross.
 * The replay of the same rank agrees at OPT, and its peak is lower than
 * without offload by at least the device state moved (Adam and master). */
START_TEST(deepspeed_should_offload_the_optimizer_to_the_host)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(ODD, &g);
    remat_err err;
    remat_err_init(&err);
    static const uint64_t host[4] = {0, 100, 100, 102}, moved[4] = {0, 12, 12, 14}, bytes[4] = {0, 36, 36, 28};
    for (uint32_t z = 1; z <= 3; z++) {
        remat_ledger_result r = ledger_of(g, z, 4, REMAT_LEDGER_STEP_HOST, 1000000000, true);
        ck_assert_msg(r.host.bytes == host[z], "zero %u: host %llu, by hand %llu", z, (unsigned long long)r.host.bytes,
                      (unsigned long long)host[z]);
        ck_assert_uint_eq(r.offload_elements, moved[z]);
        ck_assert_uint_eq(r.offload_bytes, bytes[z]);
        ck_assert_uint_eq(r.optimizer_state.bytes + r.master_weights.bytes + r.gradients.bytes, 0);
        remat_ledger_result on = ledger_of(g, z, 4, REMAT_LEDGER_STEP_HOST, 1000000000, false);
        uint64_t peaks[2];
        for (int off = 0; off < 2; off++) {
            const remat_ledger_result *l = off ? &r : &on;
            remat_shard_config sc;
            remat_shard_config_init(&sc, z, 4);
            sc.offload_optimizer = off;
            remat_sharding sh;
            ck_assert_int_eq(remat_sharding_init(a, &sc, &sh, &err), REMAT_OK);
            remat_exec_extras x = {0};
            x.optimizer_state = l->optimizer_state.bytes;
            x.master_weights = l->master_weights.bytes;
            x.sharding = &sh;
            remat_schedule s;
            build_keep(a, NULL, &s);
            remat_replay_result rr;
            ck_assert_int_eq(remat_replay(a, &s, &x, NULL, &rr, &err), REMAT_OK);
            ck_assert_msg(rr.valid, "%s", err.msg);
            ck_assert_uint_eq(rr.at_opt_by_category[REMAT_CAT_PARAM_GRADS], l->gradients.bytes);
            ck_assert_uint_eq(rr.at_opt_by_category[REMAT_CAT_OPTIMIZER_STATE], l->optimizer_state.bytes);
            ck_assert_uint_eq(rr.at_opt_by_category[REMAT_CAT_PARAMS], l->weights.bytes);
            peaks[off] = rr.peak_bytes;
            remat_replay_result_destroy(&rr);
            remat_schedule_destroy(&s);
            remat_sharding_destroy(&sh);
        }
        ck_assert_uint_ge(peaks[0], peaks[1] + on.optimizer_state.bytes + on.master_weights.bytes);
    }
    /* Without ZeRO there is no DeepSpeed optimizer to offload. */
    remat_ledger_config lc;
    remat_ledger_config_init(&lc);
    lc.offload_optimizer = true;
    remat_ledger_result r;
    ck_assert_int_eq(remat_ledger_from_graph(&lc, g, &r, &err), REMAT_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "offload_optimizer: DeepSpeed offloads the optimizer of ZeRO stages 1-3"));
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

static remat_status ds_read(const char *text, remat_ds_config *c, remat_err *err)
{
    remat_err_init(err);
    return remat_ledger_ds_read(text, strlen(text), "ds.json", c, err);
}

/* DeepSpeed's defaults for absent keys (config.py), the keys a config
 * gives, and refusals that name the key's path. */
START_TEST(deepspeed_should_read_its_config)
{
    remat_ds_config c;
    remat_err err;
    ck_assert_int_eq(ds_read("{}", &c, &err), REMAT_OK);
    ck_assert_uint_eq(c.stage, 0);
    ck_assert_uint_eq(c.reduce_bucket_size, 500000000);
    ck_assert_uint_eq(c.prefetch_bucket_size, 50000000);
    ck_assert_uint_eq(c.max_live_parameters, 1000000000);
    ck_assert_uint_eq(c.persistence_threshold, 100000);
    ck_assert_uint_eq(c.sub_group_size, 1000000000);
    ck_assert(c.contiguous_gradients && !c.overlap_comm && !c.offload_optimizer);
    ck_assert_int_eq(c.weights, REMAT_LEDGER_DT_F32);
    ck_assert_uint_eq(c.has, 0);
    ck_assert_int_eq(ds_read("{\"fp16\": {\"enabled\": true, \"loss_scale\": 0},"
                             " \"optimizer\": {\"type\": \"Adam\", \"params\": {\"torch_adam\": true}},"
                             " \"zero_optimization\": {\"stage\": 3, \"stage3_max_live_parameters\": 3e6,"
                             " \"prefetch_bucket_size\": 1000, \"cpu_offload\": false},"
                             " \"activation_checkpointing\": {\"partition_activations\": true,"
                             " \"number_checkpoints\": 4}}",
                             &c, &err),
                     REMAT_OK);
    ck_assert_uint_eq(c.stage, 3);
    ck_assert(c.overlap_comm); /* stage 3's default */
    ck_assert_uint_eq(c.max_live_parameters, 3000000);
    ck_assert_uint_eq(c.prefetch_bucket_size, 1000);
    ck_assert_int_eq(c.weights, REMAT_LEDGER_DT_F16);
    ck_assert_int_eq(c.step, REMAT_LEDGER_STEP_HOST); /* torch_adam: torch.optim's tensor step */
    ck_assert(c.partition_activations && c.number_checkpoints == 4);
    ck_assert_uint_eq(c.has & (REMAT_DS_HAS_STAGE | REMAT_DS_HAS_MAX_LIVE | REMAT_DS_HAS_PREFETCH),
                      REMAT_DS_HAS_STAGE | REMAT_DS_HAS_MAX_LIVE | REMAT_DS_HAS_PREFETCH);
    static const struct {
        const char *text, *path, *msg;
    } bad[] = {
        {"{\"zero_optimization\": {\"stage\": 2, \"bucket\": 1}}", "zero_optimization.bucket", "unknown key"},
        {"{\"zero_optimization\": {\"stage\": 2.5}}", "zero_optimization.stage", "whole number"},
        {"{\"zero_optimization\": {\"stage\": 1, \"stage\": 2}}", "zero_optimization.stage", "given twice"},
        {"{\"zero_optimization\": {\"offload_param\": {\"device\": \"cpu\"}}}",
         "zero_optimization.offload_param.device", "not modelled yet"},
        {"{\"zero_optimization\": {\"offload_optimizer\": {\"device\": \"cpu\", \"ratio\": 0.5}}}",
         "zero_optimization.offload_optimizer.ratio", "partial offload"},
        {"{\"zero_optimization\": {\"zero_quantized_weights\": true}}", "zero_optimization.zero_quantized_weights",
         "ZeRO++"},
        {"{\"zero_optimization\": {\"prefetch_bucket_size\": 1, \"stage3_prefetch_bucket_size\": 2}}",
         "zero_optimization", "the same setting"},
        {"{\"bf16\": {\"enabled\": true}, \"fp16\": {\"enabled\": true}}", "fp16.enabled", "both enabled"},
        {"{\"optimizer\": {\"type\": \"Lamb\"}}", "optimizer.type", "'Lamb' is not modelled"},
        {"{\"activation_checkpointing\": {\"cpu_checkpointing\": 1}}", "activation_checkpointing.cpu_checkpointing",
         "true or false"},
        {"{\"train_micro_batch_size_per_gpu\": \"auto\"}", "train_micro_batch_size_per_gpu", "Hugging Face"},
        {"{\"zero_optimisation\": {}}", "zero_optimisation", "unknown key"},
        {"[]", "", "must be an object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(ds_read(bad[i].text, &c, &err), REMAT_EPARSE);
        ck_assert_msg(strstr(err.msg, bad[i].msg) && strcmp(err.loc.path, bad[i].path) == 0, "%s: %s (path '%s')",
                      bad[i].text, err.msg, err.loc.path);
        ck_assert_str_eq(err.loc.file, "ds.json");
    }
    ck_assert_int_eq(ds_read("{\"zero_optimization\": }", &c, &err), REMAT_EPARSE);
    ck_assert_ptr_nonnull(strstr(err.msg, "ds.json:1:"));
}
END_TEST

/* stage3_max_reuse_distance (partitioned_param_coordinator.py
 * __params_to_release): after a module runs, the modules that follow are
 * walked, summing their params' elements, until the sum reaches the
 * distance; a param one of them uses stays gathered. On ODD over 4 ranks,
 * store-all, no prefetch: the forward reads 1, 1, 1, 14 elements (a, b,
 * c, d), the backward 14, 1, 1, 1 (d, c, b, a). Between d's forward and
 * its backward nothing is read (0); between c's: d twice, 28; b's: 30;
 * a's: 32. So a distance of 1 keeps d (3 Psi - 14 = 37 elements moved),
 * 29 keeps c too (36), 31 b (35), 33 everything (2 Psi = 34). Gathered
 * (each param padded to 4 elements, bf16): a, b, c 8 B each, d 32 B; the
 * most held at once is 32 B (0 and 1), 40 (29: c and d), 48 (31), 56 (33:
 * the whole model). */
START_TEST(deepspeed_should_keep_params_reused_within_the_distance)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(ODD, &g);
    const uint64_t dist[5] = {0, 1, 29, 31, 33}, comm[5] = {51, 37, 36, 35, 34}, held[5] = {32, 32, 40, 48, 56};
    for (int k = 0; k < 5; k++) {
        remat_shard_config sc;
        remat_shard_config_init(&sc, 3, 4);
        sc.prefetch_elements = 0;
        sc.max_reuse_elements = dist[k];
        remat_sharding sh;
        remat_err err;
        remat_err_init(&err);
        ck_assert_int_eq(remat_sharding_init(a, &sc, &sh, &err), REMAT_OK);
        remat_exec_extras x = {0};
        x.sharding = &sh;
        remat_schedule s;
        build_keep(a, NULL, &s);
        remat_replay_result r;
        ck_assert_int_eq(remat_replay(a, &s, &x, NULL, &r, &err), REMAT_OK);
        ck_assert_msg(r.valid, "%s", err.msg);
        ck_assert_msg(r.comm_elements == comm[k], "distance %llu: %llu elements moved, by hand %llu",
                      (unsigned long long)dist[k], (unsigned long long)r.comm_elements, (unsigned long long)comm[k]);
        ck_assert_msg(r.category_peak[REMAT_CAT_GATHERED_PARAMS] == held[k], "distance %llu: %llu B gathered, by hand %llu",
                      (unsigned long long)dist[k], (unsigned long long)r.category_peak[REMAT_CAT_GATHERED_PARAMS],
                      (unsigned long long)held[k]);
        remat_replay_result_destroy(&r);
        remat_schedule_destroy(&s);
        remat_sharding_destroy(&sh);
    }
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

Suite *deepspeed_suite(void)
{
    Suite *s = suite_create("deepspeed");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, deepspeed_should_pad_as_the_engine_pads);
    tcase_add_test(tc, deepspeed_should_keep_persistent_params_gathered);
    tcase_add_test(tc, deepspeed_should_count_adam_step_where_it_lives);
    tcase_add_test(tc, deepspeed_should_offload_the_optimizer_to_the_host);
    tcase_add_test(tc, deepspeed_should_read_its_config);
    tcase_add_test(tc, deepspeed_should_keep_params_reused_within_the_distance);
    suite_add_tcase(s, tc);
    return s;
}

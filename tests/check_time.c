/*
 * check_time.c - the step-time model (remat/time.h) against figures worked
 * by hand.
 *
 * Oracles: the vendor datasheets for the presets; the ring collectives'
 * closed forms (Thakur, Rabenseifner and Gropp 2005, section 4: all-reduce
 * 2(N-1) alpha + 2(N-1)/N n beta, all-gather and reduce-scatter half of
 * that); the roofline of each op worked out below from its FLOPs and the
 * bytes it touches; a DDP step on two streams worked instruction by
 * instruction; and a four-op graph on which the least-FLOPs plan and the
 * least-time plan differ, with both step times computed by hand.
 */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* A device with round figures: 1 TFLOP/s in f32, 1 GB/s to memory and on
 * the link, 1 us per ring step. */
static const char *UNIT_DEVICE =
    "{\"format\": \"remat-device\", \"version\": 1, \"name\": \"unit\", \"peak_flops\": {\"f32\": 1e12},"
    " \"memory_bandwidth\": 1e9, \"link_bandwidth\": 1e9, \"link_latency\": 1e-6}";

static void unit_device(remat_device *d)
{
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_device_load_json(UNIT_DEVICE, strlen(UNIT_DEVICE), "unit.json", d, &err), REMAT_OK);
}

static int near(double x, double y)
{
    return fabs(x - y) <= 1e-12 * fabs(y) + 1e-18;
}
#define ck_assert_time(x, y) \
    ck_assert_msg(near((x), (y)), "%s = %.12g, expected %.12g", #x, (double)(x), (double)(y))

START_TEST(time_should_carry_datasheet_figures)
{
    remat_device d;
    remat_err err;
    remat_err_init(&err);
    /* NVIDIA A100 datasheet, SXM 80GB: BF16 Tensor Core 312 TFLOPS (dense),
     * FP32 19.5 TFLOPS, HBM2e 2,039 GB/s, NVLink 600 GB/s both ways. */
    ck_assert_int_eq(remat_device_preset("a100-sxm-80gb", &d, &err), REMAT_OK);
    ck_assert_time(d.peak_flops[REMAT_DTYPE_BF16], 312e12);
    ck_assert_time(d.peak_flops[REMAT_DTYPE_F32], 19.5e12);
    ck_assert_time(d.mem_bandwidth, 2039e9);
    ck_assert_time(d.link_bandwidth, 300e9);
    /* H200 datasheet: HBM3e 4.8 TB/s, the H100 SXM's compute. */
    ck_assert_int_eq(remat_device_resolve("h200", &d, &err), REMAT_OK);
    ck_assert_time(d.mem_bandwidth, 4.8e12);
    ck_assert_time(d.peak_flops[REMAT_DTYPE_BF16], 989.5e12);
    /* V100 has no bf16 unit: its default is f16 (125 TFLOPS Tensor Core). */
    ck_assert_int_eq(remat_device_preset("v100-sxm2", &d, &err), REMAT_OK);
    ck_assert_int_eq(d.default_dtype, REMAT_DTYPE_F16);
    ck_assert_time(d.peak_flops[REMAT_DTYPE_F16], 125e12);
    ck_assert_int_eq(remat_device_preset("a100", &d, &err), REMAT_EINVAL);
    ck_assert_msg_contains(&err, "unknown device 'a100'");
    ck_assert_msg_contains(&err, "a100-sxm-80gb");
}
END_TEST

static void device_fails(const char *json, remat_status code, const char *substr)
{
    remat_device d;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_device_load_json(json, strlen(json), "dev.json", &d, &err), code);
    ck_assert_msg_contains(&err, substr);
}

START_TEST(time_should_read_device_files_strictly)
{
    remat_device d;
    unit_device(&d);
    ck_assert_str_eq(d.name, "unit");
    ck_assert_int_eq(d.default_dtype, REMAT_DTYPE_F32);
    ck_assert_time(d.link_latency, 1e-6);
    /* A base preset, one figure overridden. */
    const char *based = "{\"format\": \"remat-device\", \"version\": 1, \"base\": \"a100-sxm-80gb\","
                        " \"link_bandwidth\": 25e9, \"kernel_overhead\": 4e-6}";
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_device_load_json(based, strlen(based), "dev.json", &d, &err), REMAT_OK);
    ck_assert_str_eq(d.name, "a100-sxm-80gb");
    ck_assert_time(d.link_bandwidth, 25e9);
    ck_assert_time(d.mem_bandwidth, 2039e9);
    ck_assert_time(d.kernel_overhead, 4e-6);
    device_fails("{\"format\": \"remat-device\", \"version\": 1, \"peak_flops\": {\"f32\": 1e12}, "
                 "\"memory_bandwidth\": 1e9, \"link_bandwith\": 1}",
                 REMAT_EPARSE, "dev.json: link_bandwith: unknown field");
    device_fails("{\"format\": \"remat-device\", \"version\": 1, \"peak_flops\": {\"f32\": -1}, "
                 "\"memory_bandwidth\": 1e9}",
                 REMAT_EPARSE, "dev.json: peak_flops.f32: must not be negative");
    device_fails("{\"format\": \"remat-device\", \"version\": 1, \"peak_flops\": {\"f33\": 1}, "
                 "\"memory_bandwidth\": 1e9}",
                 REMAT_EPARSE, "peak_flops.f33: unknown element type");
    device_fails("{\"format\": \"remat-device\", \"version\": 1, \"peak_flops\": {\"f32\": 1e12}}", REMAT_EPARSE,
                 "memory_bandwidth: is required");
    device_fails("{\"format\": \"remat-device\", \"version\": 1, \"peak_flops\": {\"f32\": 1e12}, "
                 "\"memory_bandwidth\": \"fast\"}",
                 REMAT_EPARSE, "memory_bandwidth: must be a number");
    device_fails("{\"format\": \"remat-device\", \"version\": 1, \"peak_flops\": {\"f32\": 1e12}, "
                 "\"memory_bandwidth\": 1e9, \"default_dtype\": \"bf16\"}",
                 REMAT_EPARSE, "default_dtype: the default element type needs a positive peak");
    device_fails("{\"format\": \"remat-graph\", \"version\": 1}", REMAT_EPARSE, "format: must be \"remat-device\"");
    device_fails("{\"format\": \"remat-device\",\n \"version\": 1,,}", REMAT_EPARSE, "dev.json:2:");
    device_fails("{\"format\": \"remat-device\", \"version\": 1, \"base\": \"tpu\"}", REMAT_EPARSE,
                 "base: unknown device 'tpu'");
}
END_TEST

START_TEST(time_should_follow_ring_closed_forms)
{
    remat_device d;
    unit_device(&d);
    d.link_bandwidth = 1e11;
    d.link_latency = 1e-5;
    /* N = 8, 1 GB: all-reduce 2 * 7 * 10 us + 2 * 7/8 * 1e9 / 1e11 s. */
    ck_assert_time(remat_time_collective(&d, REMAT_COLL_ALLREDUCE, 1000000000, 8), 14e-5 + 0.0175);
    ck_assert_time(remat_time_collective(&d, REMAT_COLL_ALLGATHER, 1000000000, 8), 7e-5 + 0.00875);
    ck_assert_time(remat_time_collective(&d, REMAT_COLL_REDUCE_SCATTER, 1000000000, 8), 7e-5 + 0.00875);
    /* N = 2: half the buffer crosses the link once (twice for all-reduce). */
    ck_assert_time(remat_time_collective(&d, REMAT_COLL_ALLREDUCE, 400, 2), 2e-5 + 400 / 1e11);
    for (uint64_t n = 2; n <= 64; n *= 2)
        ck_assert_time(remat_time_collective(&d, REMAT_COLL_ALLREDUCE, 1 << 20, n),
                       2 * (double)(n - 1) * 1e-5 + 2.0 * (double)(n - 1) / (double)n * (1 << 20) / 1e11);
    ck_assert_time(remat_time_collective(&d, REMAT_COLL_ALLREDUCE, 1 << 20, 1), 0);
    /* A pipeline's point-to-point send: one hop, the whole buffer. */
    ck_assert_time(remat_time_collective(&d, REMAT_COLL_SEND, 1000000, 2), 1e-5 + 1e6 / 1e11);
    ck_assert_time(remat_time_roofline(4e6, 2000, 1e12, 1e9, 0), 4e-6);
    ck_assert_time(remat_time_roofline(1e6, 10000, 1e12, 1e9, 5e-6), 1.5e-5);
}
END_TEST

/* Four ops; x wants a gradient, w is frozen (8000 B that Q reads). */
static const char *PQ_GRAPH =
    "{\"format\": \"remat-graph\", \"version\": 1, \"name\": \"pq\","
    " \"inputs\": [{\"id\": \"x\", \"bytes\": 1000, \"dtype\": \"f32\", \"requires_grad\": true}],"
    " \"params\": [{\"id\": \"w\", \"bytes\": 8000, \"dtype\": \"f32\", \"frozen\": true}],"
    " \"ops\": ["
    "  {\"id\": \"p\", \"op\": \"P\", \"inputs\": [\"x\"], \"bytes\": 1000, \"dtype\": \"f32\", \"flops\": 4000000},"
    "  {\"id\": \"q\", \"op\": \"Q\", \"inputs\": [\"p\", \"w\"], \"bytes\": 1000, \"dtype\": \"f32\", \"flops\": 1000000},"
    "  {\"id\": \"r\", \"op\": \"R\", \"inputs\": [\"q\"], \"bytes\": 1000, \"dtype\": \"f32\", \"flops\": 1000000},"
    "  {\"id\": \"loss\", \"op\": \"L\", \"inputs\": [\"r\"], \"bytes\": 4, \"dtype\": \"f32\", \"flops\": 1000,"
    "   \"bwd_workspace\": 2000}],"
    " \"outputs\": [\"loss\"]}";

/* By hand at 1 TFLOP/s and 1 GB/s (max of FLOPs / peak and bytes / bw):
 *   FWD p: 4e6 FLOPs = 4 us; x + p = 2000 B = 2 us          -> 4 us
 *   FWD q: 1 us; p + w + q = 10000 B                        -> 10 us
 *   FWD r: 1 us; 2000 B                                     -> 2 us
 *   FWD loss: 1 ns; r + loss = 1004 B                       -> 1.004 us
 *   BWD p: 8 us; saves x, grad p in, grad x out = 3000 B    -> 8 us
 *   BWD q: 2 us; p + w saved, grad q in, grad p out = 11000 -> 11 us
 *   BWD r: 2 us; q saved, grad r in, grad q out = 3000 B    -> 3 us
 *   BWD loss: 2 ns; r saved, grad loss 4 B, grad r 1000 B   -> 2.004 us
 * No trainable param: the optimizer step moves nothing (0 s). */
START_TEST(time_should_price_ops_by_roofline)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(PQ_GRAPH, &g);
    remat_device d;
    unit_device(&d);
    remat_op_times t;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_op_times_init(a, &d, &t, &err), REMAT_OK);
    const double fwd[] = {4e-6, 10e-6, 2e-6, 1.004e-6}, bwd[] = {8e-6, 11e-6, 3e-6, 2.004e-6};
    for (uint32_t k = 0; k < 4; k++) {
        ck_assert_time(t.fwd[k], fwd[k]);
        ck_assert_time(t.bwd[k], bwd[k]);
    }
    ck_assert_uint_eq(t.n_fwd_measured, 0);
    remat_schedule s;
    remat_schedule_init(&s);
    ck_assert_int_eq(remat_schedule_store_all(a, &s, &err), REMAT_OK);
    remat_timeline tl;
    ck_assert_int_eq(remat_timeline_run(a, &s, NULL, &d, &t, &tl, &err), REMAT_OK);
    ck_assert_time(tl.forward_time, 17.004e-6);
    ck_assert_time(tl.backward_time, 24.004e-6);
    ck_assert_time(tl.step_time, 41.008e-6);
    ck_assert_time(tl.exposed_comm, 0);
    ck_assert_time(tl.optimizer_time, 0);
    remat_timeline_destroy(&tl);
    remat_schedule_destroy(&s);
    remat_op_times_destroy(&t);
    /* A device with no f32 unit cannot time these ops. */
    d.peak_flops[REMAT_DTYPE_F32] = 0;
    d.peak_flops[REMAT_DTYPE_BF16] = 1e12;
    ck_assert_int_eq(remat_op_times_init(a, &d, &t, &err), REMAT_EGRAPH);
    ck_assert_msg_contains(&err, "ops[0] (op 'p'): device unit has no f32 peak");
    remat_op_times_destroy(&t);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(time_should_prefer_measured_durations)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(
        "{\"format\": \"remat-graph\", \"version\": 1, \"inputs\": [{\"id\": \"x\", \"bytes\": 1000}],"
        " \"params\": [{\"id\": \"w\", \"bytes\": 1000}],"
        " \"ops\": [{\"id\": \"h\", \"op\": \"matmul\", \"inputs\": [\"x\", \"w\"], \"bytes\": 1000, \"flops\": 1,"
        "   \"attrs\": {\"duration_ns\": 1500, \"bwd_duration_ns\": 2500.5}},"
        "  {\"id\": \"loss\", \"op\": \"sum\", \"inputs\": [\"h\"], \"bytes\": 4, \"flops\": 1,"
        "   \"attrs\": {\"duration_ns\": 0}}], \"outputs\": [\"loss\"]}",
        &g);
    remat_device d;
    unit_device(&d);
    remat_op_times t;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_op_times_init(a, &d, &t, &err), REMAT_OK);
    ck_assert_time(t.fwd[0], 1.5e-6);
    ck_assert_time(t.bwd[0], 2.5005e-6);
    ck_assert_time(t.fwd[1], 0);
    /* loss's backward is not measured: roofline, 4 B of grad in, h saved
     * and its gradient out: 2004 B at 1 GB/s. */
    ck_assert_time(t.bwd[1], 2.004e-6);
    ck_assert_uint_eq(t.n_fwd_measured, 2);
    ck_assert_uint_eq(t.n_bwd_measured, 1);
    remat_op_times_destroy(&t);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    t_load_fails("{\"format\": \"remat-graph\", \"version\": 1, \"inputs\": [{\"id\": \"x\", \"bytes\": 4}],"
                 " \"ops\": [{\"id\": \"h\", \"op\": \"relu\", \"inputs\": [\"x\"], \"bytes\": 4, \"flops\": 1,"
                 " \"attrs\": {\"duration_ns\": -3}}], \"outputs\": [\"h\"]}",
                 REMAT_EGRAPH, "ops[0].attrs.duration_ns (op 'h'): must not be negative");
    t_load_fails("{\"format\": \"remat-graph\", \"version\": 1, \"inputs\": [{\"id\": \"x\", \"bytes\": 4}],"
                 " \"ops\": [{\"id\": \"h\", \"op\": \"relu\", \"inputs\": [\"x\"], \"bytes\": 4, \"flops\": 1,"
                 " \"attrs\": {\"bwd_duration_ns\": \"fast\"}}], \"outputs\": [\"h\"]}",
                 REMAT_EGRAPH, "ops[0].attrs.bwd_duration_ns (op 'h'): must be a number");
}
END_TEST

/* DDP over 2 ranks, one bucket per param (100 elements of 4 B each):
 *   FWD a 0-2.4 (x + w1 + h1 = 2400 B), FWD b 2.4-4.8, FWD loss 4.8-5.804,
 *   BWD loss 5.804-7.808 (2004 B), BWD b 7.808-11.608 (h1 + w2 saved, grad
 *   h2 in, grads h1 and w2 out: 3800 B), which completes bucket 0 (w2):
 *   ALLREDUCE 0 at 11.608, 2 us latency + 2 * 1/2 * 400 B / 1 GB/s = 2.4 us,
 *   ends 14.008, hidden behind BWD a 11.608-14.408 (2800 B);
 *   ALLREDUCE 1 (w1) 14.408-16.808; OPT waits for it: 2 x 800 B weights +
 *   800 B gradients = 2.4 us, 16.808-19.208. Step 19.208 us = compute
 *   16.808 + exposed 2.4; communication 4.8 us, 2.4 of it hidden. */
static const char *DDP_GRAPH =
    "{\"format\": \"remat-graph\", \"version\": 1, \"name\": \"ddp\","
    " \"inputs\": [{\"id\": \"x\", \"bytes\": 1000}],"
    " \"params\": [{\"id\": \"w1\", \"bytes\": 400}, {\"id\": \"w2\", \"bytes\": 400}],"
    " \"ops\": ["
    "  {\"id\": \"a\", \"op\": \"A\", \"inputs\": [\"x\", \"w1\"], \"bytes\": 1000, \"flops\": 1000000},"
    "  {\"id\": \"b\", \"op\": \"B\", \"inputs\": [\"a\", \"w2\"], \"bytes\": 1000, \"flops\": 1000000},"
    "  {\"id\": \"loss\", \"op\": \"L\", \"inputs\": [\"b\"], \"bytes\": 4, \"flops\": 1000}],"
    " \"outputs\": [\"loss\"]}";

START_TEST(time_should_overlap_reductions_with_backward)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(DDP_GRAPH, &g);
    remat_device d;
    unit_device(&d);
    remat_shard_config c;
    remat_shard_config_init(&c, 0, 2);
    c.elem_bytes = 4;
    c.bucket_elements = 100;
    c.first_bucket_elements = 100;
    remat_sharding sh;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_sharding_init(a, &c, &sh, &err), REMAT_OK);
    ck_assert_uint_eq(sh.n_buckets, 2);
    remat_schedule s, full;
    remat_schedule_init(&s);
    remat_schedule_init(&full);
    ck_assert_int_eq(remat_schedule_store_all(a, &s, &err), REMAT_OK);
    ck_assert_int_eq(remat_schedule_shard(&sh, &s, &full, &err), REMAT_OK);
    remat_exec_extras x = {0};
    x.sharding = &sh;
    remat_replay_result r;
    ck_assert_int_eq(remat_replay(a, &full, &x, NULL, &r, &err), REMAT_OK);
    ck_assert_msg(r.valid, "%s", err.msg);
    remat_replay_result_destroy(&r);
    remat_op_times t;
    ck_assert_int_eq(remat_op_times_init(a, &d, &t, &err), REMAT_OK);
    remat_timeline tl;
    ck_assert_int_eq(remat_timeline_run(a, &full, &x, &d, &t, &tl, &err), REMAT_OK);
    ck_assert_time(tl.step_time, 19.208e-6);
    ck_assert_time(tl.compute_time, 16.808e-6);
    ck_assert_time(tl.exposed_comm, 2.4e-6);
    ck_assert_time(tl.comm_time, 4.8e-6);
    ck_assert_time(tl.optimizer_time, 2.4e-6);
    int seen = 0;
    for (size_t i = 0; i < tl.n; i++) {
        if (i < full.n && full.ins[i].kind == REMAT_I_ALLREDUCE) {
            ck_assert_int_eq(tl.stream[i], REMAT_STREAM_COMM);
            ck_assert_time(tl.start[i], seen ? 14.408e-6 : 11.608e-6);
            ck_assert_time(tl.end[i], seen ? 16.808e-6 : 14.008e-6);
            seen++;
        }
        if (i < full.n && full.ins[i].kind == REMAT_I_BWD && full.ins[i].arg == t_op(g, "a"))
            ck_assert_time(tl.start[i], 11.608e-6);
    }
    ck_assert_int_eq(seen, 2);
    /* The critical path: the six compute steps, the second all-reduce,
     * OPT; its durations add up to the step (no gap on it). */
    ck_assert_uint_eq(tl.n_crit, 8);
    ck_assert_time(tl.crit_compute, 16.808e-6);
    ck_assert_time(tl.crit_comm, 2.4e-6);
    ck_assert_int_eq(full.ins[tl.crit[6]].kind, REMAT_I_ALLREDUCE);
    remat_timeline_destroy(&tl);
    /* Without the sharding the collectives have no size. */
    ck_assert_int_eq(remat_timeline_run(a, &full, NULL, &d, &t, &tl, &err), REMAT_EINVAL);
    ck_assert_msg_contains(&err, "is a collective and the replay has no sharding");
    remat_op_times_destroy(&t);
    remat_schedule_destroy(&full);
    remat_schedule_destroy(&s);
    remat_sharding_destroy(&sh);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* Invariants over every ZeRO stage of a generated transformer on a preset:
 * each stream runs one instruction at a time in schedule order, a ZeRO 3
 * compute step starts after the gathers of the units it reads, step time
 * is compute plus exposed communication, and the critical path's
 * durations add up to the step time. */
START_TEST(time_should_keep_stream_invariants)
{
    remat_gen_opts go;
    remat_gen_opts_init(&go, REMAT_GEN_TRANSFORMER);
    go.seq = 32;
    go.batch = 2;
    go.hidden = 64;
    go.heads = 4;
    go.layers = 2;
    go.vocab = 128;
    go.elem_bytes = 4;
    remat_err err;
    remat_err_init(&err);
    size_t len = 0;
    char *json = remat_gen_json(&go, &len, &err);
    ck_assert_msg(json != NULL, "%s", err.msg);
    remat_graph *g;
    remat_analysis *a = t_analyze(json, &g);
    remat_free(json);
    remat_device d;
    ck_assert_int_eq(remat_device_preset("h100-sxm", &d, &err), REMAT_OK);
    remat_op_times t;
    ck_assert_int_eq(remat_op_times_init(a, &d, &t, &err), REMAT_OK);
    for (uint32_t z = 0; z <= 3; z++) {
        remat_shard_config c;
        remat_shard_config_init(&c, z, 4);
        c.elem_bytes = 4;
        remat_sharding sh;
        ck_assert_int_eq(remat_sharding_init(a, &c, &sh, &err), REMAT_OK);
        remat_schedule s, full;
        remat_schedule_init(&s);
        remat_schedule_init(&full);
        ck_assert_int_eq(remat_schedule_store_all(a, &s, &err), REMAT_OK);
        ck_assert_int_eq(remat_schedule_shard(&sh, &s, &full, &err), REMAT_OK);
        remat_exec_extras x = {0};
        x.sharding = &sh;
        remat_timeline tl;
        ck_assert_int_eq(remat_timeline_run(a, &full, &x, &d, &t, &tl, &err), REMAT_OK);
        double free_at[2] = {0, 0};
        double *gathered = calloc(g->n_ops, sizeof *gathered);
        for (size_t i = 0; i < tl.n; i++) {
            if (tl.stream[i] == REMAT_STREAM_NONE)
                continue;
            ck_assert_msg(tl.start[i] >= free_at[tl.stream[i]] - 1e-15, "stage %u: instruction %zu overlaps", z, i);
            free_at[tl.stream[i]] = tl.end[i];
            remat_instr in = i < full.n ? full.ins[i] : (remat_instr){REMAT_I_OPT, 0};
            if (in.kind == REMAT_I_ALLGATHER)
                gathered[in.arg] = tl.end[i];
            if (z == 3 && (in.kind == REMAT_I_FWD || in.kind == REMAT_I_BWD || in.kind == REMAT_I_RECOMPUTE)) {
                const remat_op *op = &g->ops[in.arg];
                const uint32_t *rd = remat_op_inputs(g, op);
                for (uint32_t j = 0; j < op->n_in; j++)
                    if (sh.unit_of[rd[j]] != REMAT_NONE)
                        ck_assert(tl.start[i] >= gathered[sh.unit_of[rd[j]]] - 1e-15);
            }
        }
        free(gathered);
        ck_assert_time(tl.step_time, tl.compute_time + tl.exposed_comm);
        ck_assert_msg(fabs(tl.crit_compute + tl.crit_comm - tl.step_time) <= 1e-9 * tl.step_time,
                      "stage %u: path %.9g + %.9g vs step %.9g", z, tl.crit_compute, tl.crit_comm, tl.step_time);
        ck_assert(tl.comm_time > 0);
        remat_timeline_destroy(&tl);
        remat_schedule_destroy(&full);
        remat_schedule_destroy(&s);
        remat_sharding_destroy(&sh);
    }
    remat_op_times_destroy(&t);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* The least-FLOPs plan and the least-time plan of PQ_GRAPH at a 14500 B
 * total budget. Store-all peaks at BWD loss, the one step with workspace:
 * x + w + p + q + r + loss (12004 B) + grad r (1000 B) + its 2000 B
 * workspace, 15004 B; every later step is lower (BWD r: x, w, p, q, grad r,
 * grad q = 13000 B). Freeing p (rebuilt before BWD q from x) or q (rebuilt
 * before BWD r from p) takes 1000 B off BWD loss, 14004 B, and leaves every
 * other step at or below 13000 B; r does not help (BWD loss reads it), nor
 * does the loss. So the cheapest plans recompute exactly one of p, q:
 *   FLOPs: q costs 1e6, p 4e6 -> recompute q; step 41.008 + 10 us;
 *   time:  p costs 4 us, q 10 us (its 8000 B weight read) -> recompute p;
 *          step 41.008 + 4 = 45.008 us, 6 us less, at 3e6 more FLOPs. */
START_TEST(time_should_plan_for_time_when_asked)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(PQ_GRAPH, &g);
    remat_device d;
    unit_device(&d);
    remat_err err;
    remat_err_init(&err);
    remat_op_times t;
    ck_assert_int_eq(remat_op_times_init(a, &d, &t, &err), REMAT_OK);
    const char *strategies[] = {"auto", "exact", "chain-dp", "chen-greedy"};
    for (size_t k = 0; k < sizeof strategies / sizeof strategies[0]; k++) {
        double step[2];
        for (int obj = 0; obj < 2; obj++) {
            remat_plan_options o;
            remat_plan_options_init(&o);
            o.strategy = strategies[k];
            o.budget_kind = REMAT_BUDGET_TOTAL;
            o.budget = 14500;
            o.objective = obj ? REMAT_OBJECTIVE_TIME : REMAT_OBJECTIVE_FLOPS;
            o.device = &d;
            remat_plan p;
            remat_replay_result r;
            remat_status st = remat_plan_make(a, &o, &p, &r, &err);
            if (st == REMAT_EINVAL && strstr(err.msg, "unknown strategy")) { /* not built with it */
                remat_err_init(&err);
                break;
            }
            ck_assert_msg(st == REMAT_OK, "%s: %s", strategies[k], err.msg);
            ck_assert_uint_le(r.peak_bytes, 14500);
            ck_assert_msg(r.flops_recompute == (obj ? 4000000u : 1000000u), "%s objective %d: extra %llu", strategies[k], obj, (unsigned long long)r.flops_recompute);
            ck_assert_uint_eq(r.recompute_counts[t_op(g, obj ? "p" : "q")], 1);
            ck_assert_uint_eq(r.recompute_counts[t_op(g, obj ? "q" : "p")], 0);
            remat_timeline tl;
            ck_assert_int_eq(remat_timeline_run(a, &p.schedule, NULL, &d, &t, &tl, &err), REMAT_OK);
            ck_assert_time(tl.recompute_time, obj ? 4e-6 : 10e-6);
            step[obj] = tl.step_time;
            if (obj)
                ck_assert_msg(strstr(p.params_json, "\"objective\": \"time\"") != NULL, "%s", p.params_json);
            remat_timeline_destroy(&tl);
            remat_replay_result_destroy(&r);
            remat_plan_destroy(&p);
        }
        if (err.code == REMAT_OK) {
            ck_assert_time(step[0], 51.008e-6);
            ck_assert_time(step[1], 45.008e-6);
        }
    }
    /* Time needs a device. */
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.objective = REMAT_OBJECTIVE_TIME;
    remat_plan p;
    remat_replay_result r;
    ck_assert_int_eq(remat_plan_make(a, &o, &p, &r, &err), REMAT_EINVAL);
    ck_assert_msg_contains(&err, "the time objective needs a device");
    remat_plan_destroy(&p);
    remat_replay_result_destroy(&r);
    remat_op_times_destroy(&t);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

Suite *time_suite(void)
{
    Suite *s = suite_create("time");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, time_should_carry_datasheet_figures);
    tcase_add_test(tc, time_should_read_device_files_strictly);
    tcase_add_test(tc, time_should_follow_ring_closed_forms);
    tcase_add_test(tc, time_should_price_ops_by_roofline);
    tcase_add_test(tc, time_should_prefer_measured_durations);
    tcase_add_test(tc, time_should_overlap_reductions_with_backward);
    tcase_add_test(tc, time_should_keep_stream_invariants);
    tcase_add_test(tc, time_should_plan_for_time_when_asked);
    suite_add_tcase(s, tc);
    return s;
}

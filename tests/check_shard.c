/*
 * check_shard.c - sharded data parallel: the collectives in the schedule,
 * the replay's rules for them, and one rank's memory and communication
 * against closed forms (graphs/README.md, "Sharded data parallel").
 *
 * Oracles: Rajbhandari et al. 2020 (Figure 1: 2 Psi + 2 Psi + K Psi per
 * device with the sharded terms divided by N_d; section 7: 2 Psi of
 * communication for DDP and ZeRO 1/2, 3 Psi for ZeRO 3), with Psi summed
 * here from the graph's own params; remat's ledger for the same sharding;
 * and a four-op chain worked by hand, instruction by instruction, for
 * ZeRO 3's gathers, prefetch and releases.
 */
#include "exec_util.h"
#include "remat/gen.h"
#include "remat/ledger.h"

#include <stdio.h>
#include <stdlib.h>

/* Four ops in a line, each reading one param of 8 f32 elements (32 B). */
static const char *const Z3CHAIN =
    "{\"format\": \"remat-graph\", \"version\": 1, \"name\": \"z3chain\","
    " \"inputs\": [{\"id\": \"x\", \"bytes\": 64}],"
    " \"params\": [{\"id\": \"p1\", \"bytes\": 32}, {\"id\": \"p2\", \"bytes\": 32},"
    "              {\"id\": \"p3\", \"bytes\": 32}, {\"id\": \"p4\", \"bytes\": 32}],"
    " \"ops\": [{\"id\": \"a\", \"op\": \"matmul\", \"inputs\": [\"x\", \"p1\"], \"bytes\": 64, \"flops\": 10},"
    "          {\"id\": \"b\", \"op\": \"matmul\", \"inputs\": [\"a\", \"p2\"], \"bytes\": 64, \"flops\": 10},"
    "          {\"id\": \"c\", \"op\": \"matmul\", \"inputs\": [\"b\", \"p3\"], \"bytes\": 64, \"flops\": 10},"
    "          {\"id\": \"d\", \"op\": \"matmul\", \"inputs\": [\"c\", \"p4\"], \"bytes\": 4, \"flops\": 10}],"
    " \"outputs\": [\"d\"]}";

/* The schedule as text without its FREEs (their place is the policy's). */
static void text_no_free(const remat_graph *g, const remat_schedule *s, char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->ins[i].kind == REMAT_I_FREE)
            continue;
        char t[96];
        remat_instr_text(g, s->ins[i], t, sizeof t);
        int w = snprintf(buf + at, cap - at, "%s%s", at ? ", " : "", t);
        ck_assert(w > 0 && (size_t)w < cap - at);
        at += (size_t)w;
    }
}

typedef struct {
    uint64_t max_gathered;
    size_t first_at_max;
} gobs;

static int on_step(void *ctx, size_t index, remat_instr in, uint64_t live_after, uint64_t hw, const uint64_t *by)
{
    (void)in, (void)live_after, (void)hw;
    gobs *o = ctx;
    if (by[REMAT_CAT_GATHERED_PARAMS] > o->max_gathered) {
        o->max_gathered = by[REMAT_CAT_GATHERED_PARAMS];
        o->first_at_max = index;
    }
    return 0;
}

static void z3_setup(uint32_t stage, uint64_t prefetch, uint64_t max_live, remat_graph **g, remat_analysis **a,
                     remat_sharding *sh)
{
    *a = t_analyze(Z3CHAIN, g);
    remat_shard_config c;
    remat_shard_config_init(&c, stage, 2);
    c.elem_bytes = 4;
    c.prefetch_elements = prefetch;
    c.max_live_elements = max_live;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_sharding_init(*a, &c, sh, &err), REMAT_OK);
}

/* Worked by hand (dp = 2, every unit 8 elements = 32 B gathered, max_live
 * 16 elements = two units, prefetch unbounded): before FWD a, a is gathered
 * on demand (8 live) and the room min(16 - 8, prefetch) = 8 prefetches b;
 * a is released after FWD a (FWD b does not read p1); each later forward
 * prefetches the next unit, FWD d prefetches c (BWD c's, the next one not
 * gathered), d is released at the phase change and gathered again for BWD
 * d, which leaves no room to prefetch; then BWD c prefetches b, BWD b
 * prefetches a, and the one bucket is reduce-scattered after BWD a. At most
 * two units (64 B) are ever gathered, first at instruction 1 (the prefetch
 * of b). Communication: eight gathers of 8 elements and one reduce-scatter
 * of Psi = 32: 96 = 3 Psi. */
START_TEST(shard_should_gather_what_prefetch_allows)
{
    remat_graph *g;
    remat_analysis *a;
    remat_sharding sh;
    z3_setup(3, 1000, 16, &g, &a, &sh);
    ck_assert_uint_eq(sh.psi, 32);
    ck_assert_uint_eq(sh.weight_bytes, 4 * 16); /* four params, 4 elements each per rank */
    remat_schedule s, full;
    build_keep(a, NULL, &s);
    remat_schedule_init(&full);
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_schedule_shard(&sh, &s, &full, &err), REMAT_OK);
    char text[2048];
    text_no_free(g, &full, text, sizeof text);
    ck_assert_str_eq(text, "ALLGATHER a, ALLGATHER b, FWD a, RELEASE a, ALLGATHER c, FWD b, RELEASE b, "
                           "ALLGATHER d, FWD c, RELEASE c, ALLGATHER c, FWD d, RELEASE d, ALLGATHER d, BWD d, "
                           "RELEASE d, ALLGATHER b, BWD c, RELEASE c, ALLGATHER a, BWD b, RELEASE b, BWD a, "
                           "RELEASE a, REDUCE_SCATTER bucket0, OPT");
    gobs o = {0, 0};
    remat_replay_observer obs = {&o, NULL, NULL, on_step};
    remat_exec_extras x = {0};
    x.sharding = &sh;
    remat_replay_result r;
    ck_assert_int_eq(remat_replay(a, &full, &x, &obs, &r, &err), REMAT_OK);
    ck_assert_msg(r.valid, "%s", err.msg);
    ck_assert_uint_eq(o.max_gathered, 64);
    ck_assert_uint_eq(o.first_at_max, 1);
    ck_assert_uint_eq(r.category_peak[REMAT_CAT_GATHERED_PARAMS], 64);
    ck_assert_uint_eq(r.comm_elements, 96);
    ck_assert_uint_eq(r.comm_bytes, 96 * 4);
    /* At OPT: each rank's partition of the gradients, 16 elements x 4 B. */
    ck_assert_uint_eq(r.at_opt_by_category[REMAT_CAT_PARAM_GRADS], 64);
    ck_assert_uint_eq(r.at_opt_by_category[REMAT_CAT_GATHERED_PARAMS], 0);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&full);

    /* No prefetch: one unit at a time, 32 B, from the first instruction. */
    remat_sharding_destroy(&sh);
    remat_shard_config c;
    remat_shard_config_init(&c, 3, 2);
    c.elem_bytes = 4;
    c.prefetch_elements = 0;
    c.max_live_elements = 1000;
    ck_assert_int_eq(remat_sharding_init(a, &c, &sh, &err), REMAT_OK);
    remat_schedule_init(&full);
    ck_assert_int_eq(remat_schedule_shard(&sh, &s, &full, &err), REMAT_OK);
    o.max_gathered = 0;
    ck_assert_int_eq(remat_replay(a, &full, &x, &obs, &r, &err), REMAT_OK);
    ck_assert_msg(r.valid, "%s", err.msg);
    ck_assert_uint_eq(o.max_gathered, 32);
    ck_assert_uint_eq(o.first_at_max, 0);
    ck_assert_uint_eq(r.comm_elements, 96);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&full);
    remat_schedule_destroy(&s);
    remat_sharding_destroy(&sh);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* Recomputing b in backward reads p2: its unit is gathered again right
 * before the RECOMPUTE (released after, since BWD c reads p3 only), one
 * more all-gather of 8 elements than store-all's 3 Psi = 96. */
START_TEST(shard_should_gather_for_recompute)
{
    remat_graph *g;
    remat_analysis *a;
    remat_sharding sh;
    z3_setup(3, 0, 1000, &g, &a, &sh);
    uint8_t keep[16];
    memset(keep, 1, sizeof keep);
    ck_assert_uint_le(g->n_tensors, sizeof keep);
    keep[remat_graph_find_tensor(g, "b")] = 0;
    remat_schedule s, full;
    build_keep(a, keep, &s);
    remat_schedule_init(&full);
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_schedule_shard(&sh, &s, &full, &err), REMAT_OK);
    char text[2048];
    text_no_free(g, &full, text, sizeof text);
    ck_assert_ptr_nonnull(strstr(text, "BWD d, RELEASE d, ALLGATHER b, RECOMPUTE b, RELEASE b, ALLGATHER c, BWD c"));
    remat_exec_extras x = {0};
    x.sharding = &sh;
    remat_replay_result r;
    replay_valid(a, &full, &x, &r);
    ck_assert_uint_eq(r.comm_elements, 104);
    ck_assert_uint_eq(r.flops_recompute, 10);
    remat_replay_result_destroy(&r);
    /* Without that gather the recomputation reads a sharded param. */
    for (size_t i = 0; i + 1 < full.n; i++)
        if (full.ins[i].kind == REMAT_I_ALLGATHER && full.ins[i + 1].kind == REMAT_I_RECOMPUTE) {
            sched_del(&full, i);
            break;
        }
    ck_assert_int_eq(remat_replay(a, &full, &x, NULL, &r, &err), REMAT_OK);
    ck_assert(!r.valid);
    ck_assert_ptr_nonnull(strstr(err.msg, "RECOMPUTE b): reads param 'p2' of unit 'b', which is sharded and not "
                                          "gathered"));
    ck_assert_ptr_nonnull(strstr(err.msg, "a recomputation too"));
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&full);
    remat_schedule_destroy(&s);
    remat_sharding_destroy(&sh);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* Each rule refuses its breach at the right instruction, for its reason. */
static void expect_invalid(const remat_analysis *a, const remat_schedule *s, const remat_exec_extras *x,
                           const char *why)
{
    remat_replay_result r;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_replay(a, s, x, NULL, &r, &err), REMAT_OK);
    ck_assert_msg(!r.valid, "expected '%s'", why);
    ck_assert_msg(strstr(err.msg, why), "'%s' lacks '%s'", err.msg, why);
    remat_replay_result_destroy(&r);
}

START_TEST(shard_should_refuse_broken_collectives)
{
    remat_graph *g;
    remat_analysis *a;
    remat_sharding sh;
    z3_setup(3, 0, 1000, &g, &a, &sh);
    remat_schedule s, full, m;
    build_keep(a, NULL, &s);
    remat_schedule_init(&full);
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_schedule_shard(&sh, &s, &full, &err), REMAT_OK);
    remat_exec_extras x = {0};
    x.sharding = &sh;
    /* full[0] = ALLGATHER a, full[1] = FWD a, full[2] = RELEASE a. */
    ck_assert_uint_eq(full.ins[0].kind, REMAT_I_ALLGATHER);
    sched_copy(&m, &full);
    sched_del(&m, 0);
    expect_invalid(a, &m, &x, "instruction 0 (FWD a): reads param 'p1' of unit 'a', which is sharded and not gathered");
    remat_schedule_destroy(&m);
    sched_copy(&m, &full);
    sched_ins(&m, 3, full.ins[2]);
    expect_invalid(a, &m, &x, "instruction 3 (RELEASE a): unit 'a' is not gathered");
    remat_schedule_destroy(&m);
    sched_copy(&m, &full);
    sched_ins(&m, 1, full.ins[0]);
    expect_invalid(a, &m, &x, "unit 'a' is already gathered");
    remat_schedule_destroy(&m);
    /* The reduce-scatter: dropped, or moved before the last gradient. */
    size_t rs = full.n;
    for (size_t i = 0; i < full.n; i++)
        if (full.ins[i].kind == REMAT_I_REDUCE_SCATTER)
            rs = i;
    ck_assert_uint_lt(rs, full.n);
    sched_copy(&m, &full);
    sched_del(&m, rs);
    expect_invalid(a, &m, &x, "gradient bucket 0 (32 elements) was never reduce-scattered");
    remat_schedule_destroy(&m);
    sched_copy(&m, &full);
    remat_instr rsi = full.ins[rs];
    sched_del(&m, rs);
    sched_ins(&m, 1, rsi);
    expect_invalid(a, &m, &x, "in bucket 0 is incomplete");
    remat_schedule_destroy(&m);
    /* A collective needs a sharding; ALLREDUCE is not ZeRO's. */
    expect_invalid(a, &full, NULL, "ALLGATHER in a replay without sharding");
    sched_copy(&m, &full);
    m.ins[rs].kind = REMAT_I_ALLREDUCE;
    expect_invalid(a, &m, &x, "ALLREDUCE at ZeRO stage 3");
    remat_schedule_destroy(&m);
    /* An observer indexes the caller's schedule: no silent insertion. */
    remat_replay_observer obs = {NULL, NULL, NULL, NULL};
    remat_replay_result r;
    ck_assert_int_eq(remat_replay(a, &s, &x, &obs, &r, &err), REMAT_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "needs its collectives in the schedule"));
    remat_schedule_destroy(&full);
    remat_schedule_destroy(&s);
    remat_sharding_destroy(&sh);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* DDP: the one bucket is all-reduced (2 x 32 elements); REDUCE_SCATTER
 * is not DDP's; and a param whose bytes are not whole elements is named. */
START_TEST(shard_should_allreduce_under_ddp)
{
    remat_graph *g;
    remat_analysis *a;
    remat_sharding sh;
    z3_setup(0, 0, 0, &g, &a, &sh);
    remat_schedule s, full;
    build_keep(a, NULL, &s);
    remat_schedule_init(&full);
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_schedule_shard(&sh, &s, &full, &err), REMAT_OK);
    remat_exec_extras x = {0};
    x.sharding = &sh;
    remat_replay_result r;
    replay_valid(a, &full, &x, &r);
    ck_assert_uint_eq(r.comm_elements, 64);
    ck_assert_uint_eq(r.n_collectives, 1);
    ck_assert_uint_eq(r.at_opt_by_category[REMAT_CAT_PARAMS], 128);
    ck_assert_uint_eq(r.at_opt_by_category[REMAT_CAT_PARAM_GRADS], 128);
    remat_replay_result_destroy(&r);
    for (size_t i = 0; i < full.n; i++)
        if (full.ins[i].kind == REMAT_I_ALLREDUCE)
            full.ins[i].kind = REMAT_I_REDUCE_SCATTER;
    expect_invalid(a, &full, &x, "REDUCE_SCATTER at ZeRO stage 0");
    remat_schedule_destroy(&full);
    remat_schedule_destroy(&s);
    remat_sharding_destroy(&sh);
    remat_shard_config c;
    remat_shard_config_init(&c, 3, 2);
    c.elem_bytes = 64;
    ck_assert_int_eq(remat_sharding_init(a, &c, &sh, &err), REMAT_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "param 'p1': 32 B is not a whole number of 64-byte elements"));
    remat_sharding_destroy(&sh);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* Figure 1 in the replay: a generated transformer in bf16 with f32 Adam
 * moments and an f32 master copy (2 + 2 + 12 bytes per element), each rank's
 * state at the optimizer step stage by stage, against Psi summed here from
 * the graph's params and against the ledger for the same sharding; and the
 * communication of section 7. */
START_TEST(shard_should_match_figure1_and_ledger)
{
    remat_gen_opts go;
    remat_gen_opts_init(&go, REMAT_GEN_TRANSFORMER);
    go.seq = 64, go.batch = 1, go.hidden = 128, go.heads = 4, go.layers = 2, go.vocab = 512;
    remat_err err;
    remat_err_init(&err);
    char *json = remat_gen_json(&go, NULL, &err);
    ck_assert_ptr_nonnull(json);
    remat_graph *g;
    remat_analysis *a = t_analyze(json, &g);
    remat_free(json);
    uint64_t psi = 0;
    const uint64_t dps[2] = {2, 8};
    for (uint32_t t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].kind == REMAT_TENSOR_PARAM) {
            ck_assert(!g->tensors[t].frozen);
            ck_assert_uint_eq(g->tensors[t].bytes % (2 * 8), 0); /* every param divides by 8 ranks */
            psi += g->tensors[t].bytes / 2;
        }
    for (int d = 0; d < 2; d++)
        for (uint32_t z = 0; z <= 3; z++) {
            uint64_t N = dps[d];
            remat_ledger_config lc;
            remat_ledger_config_init(&lc);
            lc.weights = REMAT_LEDGER_DT_BF16;
            lc.states = REMAT_LEDGER_DT_F32;
            lc.master = REMAT_LEDGER_DT_F32;
            lc.zero_stage = z;
            lc.dp = N;
            remat_ledger_result lr;
            ck_assert_int_eq(remat_ledger_from_graph(&lc, g, &lr, &err), REMAT_OK);
            remat_shard_config sc;
            remat_shard_config_init(&sc, z, N);
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
            ck_assert_msg(r.valid, "zero %u dp %llu: %s", z, (unsigned long long)N, err.msg);
            const uint64_t *at = r.at_opt_by_category;
            uint64_t w = z >= 3 ? 2 * psi / N : 2 * psi, gr = z >= 2 ? 2 * psi / N : 2 * psi;
            uint64_t os = z >= 1 ? 8 * psi / N : 8 * psi, ms = z >= 1 ? 4 * psi / N : 4 * psi;
            ck_assert_uint_eq(at[REMAT_CAT_PARAMS], w);
            ck_assert_uint_eq(at[REMAT_CAT_PARAM_GRADS], gr);
            ck_assert_uint_eq(at[REMAT_CAT_OPTIMIZER_STATE], os);
            ck_assert_uint_eq(at[REMAT_CAT_MASTER_WEIGHTS], ms);
            ck_assert_uint_eq(at[REMAT_CAT_GATHERED_PARAMS], 0);
            ck_assert_uint_eq(at[REMAT_CAT_PARAMS], lr.weights.bytes);
            ck_assert_uint_eq(at[REMAT_CAT_PARAM_GRADS], lr.gradients.bytes);
            ck_assert_uint_eq(at[REMAT_CAT_OPTIMIZER_STATE], lr.optimizer_state.bytes);
            ck_assert_uint_eq(at[REMAT_CAT_MASTER_WEIGHTS], lr.master_weights.bytes);
            ck_assert_uint_eq(r.comm_elements, (z == 3 ? 3 : 2) * psi);
            ck_assert_uint_eq(r.comm_elements, lr.comm_elements);
            ck_assert_uint_eq(r.comm_bytes, 2 * r.comm_elements);
            remat_replay_result_destroy(&r);
            remat_schedule_destroy(&s);
            remat_sharding_destroy(&sh);
        }
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

Suite *shard_suite(void)
{
    Suite *s = suite_create("shard");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, shard_should_gather_what_prefetch_allows);
    tcase_add_test(tc, shard_should_gather_for_recompute);
    tcase_add_test(tc, shard_should_refuse_broken_collectives);
    tcase_add_test(tc, shard_should_allreduce_under_ddp);
    tcase_add_test(tc, shard_should_match_figure1_and_ledger);
    suite_add_tcase(s, tc);
    return s;
}

/*
 * check_fsdp.c - PyTorch FSDP as torch 1.13 implements it
 * (torch/distributed/fsdp/fully_sharded_data_parallel.py, flat_param.py),
 * and units taken from the exporter's attrs.module.
 *
 * Oracles are worked by hand below from the rules in the source
 * (graphs/README.md, "Sharded data parallel", FSDP): a unit is one flat
 * parameter whose rank shard is ceil(E/N) elements (torch.chunk, padded
 * to the first chunk), gathered as N of them; FULL_SHARD frees after a
 * unit's forward except the root's, SHARD_GRAD_OP keeps it to the
 * unit's post-backward hook; the rate limiter (_FreeEventQueue) lets a
 * freed buffer be reused once an all-gather finds two frees queued. The
 * invariants check FSDP against the ledger's ZeRO 3 on the flat
 * parameters and NO_SHARD against DDP.
 */
#include "exec_util.h"
#include "remat/gen.h"
#include "remat/ledger.h"
#include "remat/trace.h"
#include "util/util_internal.h"

#include <stdio.h>
#include <string.h>

/* Three units by module, bf16 (2 B an element): blocks.0 holds pa1 (1
 * element) and pa2 (5), E = 6, read by a1 and a2; blocks.1 holds pb (10),
 * read by b; the head's pc (5) is not under a wrapped module at depth 2, so
 * it is the root unit. Psi = 21. */
static const char *const UNITS3 =
    "{\"format\": \"remat-graph\", \"version\": 1, \"name\": \"units3\","
    " \"inputs\": [{\"id\": \"x\", \"bytes\": 64}],"
    " \"params\": [{\"id\": \"pa1\", \"bytes\": 2}, {\"id\": \"pa2\", \"bytes\": 10},"
    "              {\"id\": \"pb\", \"bytes\": 20}, {\"id\": \"pc\", \"bytes\": 10}],"
    " \"ops\": [{\"id\": \"a1\", \"op\": \"matmul\", \"inputs\": [\"x\", \"pa1\"], \"bytes\": 64, \"flops\": 10,"
    "            \"attrs\": {\"module\": \"blocks.0.fc1\"}},"
    "          {\"id\": \"a2\", \"op\": \"matmul\", \"inputs\": [\"a1\", \"pa2\"], \"bytes\": 64, \"flops\": 10,"
    "            \"attrs\": {\"module\": \"blocks.0.fc2\"}},"
    "          {\"id\": \"b\", \"op\": \"matmul\", \"inputs\": [\"a2\", \"pb\"], \"bytes\": 64, \"flops\": 10,"
    "            \"attrs\": {\"module\": \"blocks.1.fc\"}},"
    "          {\"id\": \"c\", \"op\": \"matmul\", \"inputs\": [\"b\", \"pc\"], \"bytes\": 4, \"flops\": 10,"
    "            \"attrs\": {\"module\": \"head\"}}],"
    " \"outputs\": [\"c\"]}";

/* The same model with each unit flattened into one param, as FSDP's
 * FlatParameter holds it: what DeepSpeed's per-param padding gives for
 * FSDP's per-unit padding. */
static const char *const FLAT3 =
    "{\"format\": \"remat-graph\", \"version\": 1, \"name\": \"flat3\","
    " \"inputs\": [{\"id\": \"x\", \"bytes\": 64}],"
    " \"params\": [{\"id\": \"fa\", \"bytes\": 12}, {\"id\": \"fb\", \"bytes\": 20}, {\"id\": \"fc\", \"bytes\": 10}],"
    " \"ops\": [{\"id\": \"a\", \"op\": \"matmul\", \"inputs\": [\"x\", \"fa\"], \"bytes\": 64, \"flops\": 20},"
    "          {\"id\": \"b\", \"op\": \"matmul\", \"inputs\": [\"a\", \"fb\"], \"bytes\": 64, \"flops\": 10},"
    "          {\"id\": \"c\", \"op\": \"matmul\", \"inputs\": [\"b\", \"fc\"], \"bytes\": 4, \"flops\": 10}],"
    " \"outputs\": [\"c\"]}";

static void fsdp_config(remat_shard_config *sc, remat_fsdp_strategy st, uint64_t dp)
{
    remat_shard_config_init(sc, 3, dp);
    sc->fsdp = st;
    sc->wrap_depth = 2;
    sc->limit_all_gathers = 1;
}

/* The store-all schedule with FSDP's collectives, replayed instruction by
 * instruction: "F:op", "B:op", "AG:unit=G", "RL:unit=G" (G the gathered
 * bytes live after it), "RS"; FREE and OPT left out. Also returns the
 * replay's result. */
static void run(const remat_analysis *a, const remat_shard_config *sc, const uint64_t *state, char *out, size_t cap,
                remat_replay_result *r)
{
    const remat_graph *g = a->g;
    remat_err err;
    remat_err_init(&err);
    remat_sharding sh;
    ck_assert_msg(remat_sharding_init(a, sc, &sh, &err) == REMAT_OK, "%s", err.msg);
    remat_exec_extras x = {0};
    x.sharding = &sh;
    if (state) {
        x.optimizer_state = state[0];
        x.master_weights = state[1];
    }
    remat_schedule s, full;
    build_keep(a, NULL, &s);
    remat_schedule_init(&full);
    ck_assert_int_eq(remat_schedule_shard(&sh, &s, &full, &err), REMAT_OK);
    remat_replay_cursor *c;
    ck_assert_int_eq(remat_replay_begin(a, &x, NULL, &c, &err), REMAT_OK);
    size_t at = 0;
    out[0] = '\0';
    for (size_t i = 0; i < full.n; i++) {
        remat_instr in = full.ins[i];
        ck_assert_msg(remat_replay_apply(c, in, &err) == REMAT_OK, "instruction %zu: %s", i, err.msg);
        uint64_t by[REMAT_CAT_COUNT];
        remat_replay_live_by_category(c, by);
        const char *op = in.arg < g->n_ops ? g->ops[in.arg].id : "";
        int n = 0;
        switch (in.kind) {
        case REMAT_I_FWD: n = snprintf(out + at, cap - at, "%sF:%s", at ? " " : "", op); break;
        case REMAT_I_BWD: n = snprintf(out + at, cap - at, "%sB:%s", at ? " " : "", op); break;
        case REMAT_I_ALLGATHER:
        case REMAT_I_RELEASE:
            n = snprintf(out + at, cap - at, "%s%s:%s=%llu", at ? " " : "", in.kind == REMAT_I_ALLGATHER ? "AG" : "RL",
                         op, (unsigned long long)by[REMAT_CAT_GATHERED_PARAMS]);
            break;
        case REMAT_I_REDUCE_SCATTER: n = snprintf(out + at, cap - at, "%sRS", at ? " " : ""); break;
        case REMAT_I_ALLREDUCE: n = snprintf(out + at, cap - at, "%sAR", at ? " " : ""); break;
        default: break;
        }
        ck_assert(n >= 0 && (size_t)n < cap - at);
        at += (size_t)n;
    }
    ck_assert_int_eq(remat_replay_end(c, r, &err), REMAT_OK);
    ck_assert_msg(r->valid, "%s", err.msg);
    remat_replay_cursor_destroy(c);
    /* remat_replay inserts the same collectives itself: the same figures. */
    remat_replay_result r2;
    ck_assert_int_eq(remat_replay(a, &s, &x, NULL, &r2, &err), REMAT_OK);
    ck_assert_uint_eq(r2.peak_bytes, r->peak_bytes);
    ck_assert_uint_eq(r2.comm_elements, r->comm_elements);
    remat_replay_result_destroy(&r2);
    remat_schedule_destroy(&full);
    remat_schedule_destroy(&s);
    remat_sharding_destroy(&sh);
}

/* By hand, N = 4. Shards (ceil(E/4)): blocks.0 2, blocks.1 3, head 2
 * elements: 7 per rank, 14 B of weights and 14 B of gradient shards
 * (DeepSpeed's per-param padding would give 1 + 2 + 3 + 2 = 8). Gathered
 * (4 shards): blocks.0 (unit a1) 16 B, blocks.1 (b) 24 B, head (c) 16 B.
 * Adam's f32 moments over 7 elements 56 B, the f32 master 28 B.
 *
 * FULL_SHARD, limiter on, no prefetch. Forward: AG a1 (16); a2 is its last
 * forward reader, RL a1 queues its free [a1] (still 16 held); AG b finds
 * one free queued, reclaims nothing: 40; RL b [a1 b]; AG c finds two and
 * reclaims a1: 40 - 16 + 16 = 40; c is the root, not freed after forward.
 * Backward: RL c after B:c [b c]; AG b reclaims the old b: 40 - 24 + 24 =
 * 40; RL b [c b]; AG a1 reclaims c: 40 - 16 + 16 = 40; RL a1 after B:a1.
 * Each unit's REDUCE_SCATTER follows its post-backward release.
 * Gathered peak 40 B = blocks.1 + the larger other unit.
 * Communication: forward AG 6 + 10 + 5, backward AG 10 + 6 (the root is not
 * gathered again), RS 6 + 10 + 5: 58 elements = 3 Psi - 5.
 *
 * Limiter off: nothing is reclaimed in the step: 16, 40, 56, then AG b 80
 * and AG a1 96 = the five gathers summed.
 *
 * BACKWARD_PRE: at c's pre-backward hook b is prefetched, with the old b
 * still held ([b] only one free queued): 40 + 24 = 64, the peak, before
 * B:c; at b's hook a1 is prefetched, reclaiming the old b: 64 - 24 + 16 =
 * 56. BACKWARD_POST: after RL c ([b c]) the prefetch of b reclaims the old
 * b: 40; after RL b ([c b]) the prefetch of a1 reclaims c: 40. Peak 40.
 *
 * The reduce-scatter of a unit of E elements also holds, while it runs,
 * the whole gradient padded to N chunks and the new shard: ceil(E/N) x
 * (N + 1) elements (the post-backward hook's F.pad and zeros_like).
 *
 * SHARD_GRAD_OP: 16, 40, 56 in forward and nothing freed until each
 * post-backward hook; no all-gather follows, so nothing is reclaimed:
 * 56 B = the whole model gathered. Communication 2 Psi = 42. */
START_TEST(fsdp_should_gather_as_worked_by_hand)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(UNITS3, &g);
    remat_shard_config sc;
    remat_replay_result r;
    char got[2048];
    const uint64_t state[2] = {56, 28};

    fsdp_config(&sc, REMAT_FSDP_FULL_SHARD, 4);
    run(a, &sc, state, got, sizeof got, &r);
    ck_assert_str_eq(got, "AG:a1=16 F:a1 F:a2 RL:a1=16 AG:b=40 F:b RL:b=40 AG:c=40 F:c B:c RL:c=40 RS AG:b=40 B:b "
                          "RL:b=40 RS AG:a1=40 B:a2 B:a1 RL:a1=40 RS");
    const uint64_t *at = r.at_opt_by_category;
    ck_assert_uint_eq(at[REMAT_CAT_PARAMS], 14);
    ck_assert_uint_eq(at[REMAT_CAT_PARAM_GRADS], 14);
    ck_assert_uint_eq(at[REMAT_CAT_OPTIMIZER_STATE], 56);
    ck_assert_uint_eq(at[REMAT_CAT_MASTER_WEIGHTS], 28);
    ck_assert_uint_eq(r.category_peak[REMAT_CAT_GATHERED_PARAMS], 40);
    ck_assert_uint_eq(r.comm_elements, 58);
    ck_assert_uint_eq(r.comm_bytes, 116);
    /* Each REDUCE_SCATTER's transients, the padded whole gradient and the
     * new shard, ceil(E/4) x 5 elements: c 10 x 2 = 20 B, b 3 x 5 x 2 =
     * 30 B, a1 20 B; the graph has no other workspace. */
    ck_assert_uint_eq(r.category_peak[REMAT_CAT_WORKSPACE], 30);
    remat_replay_result_destroy(&r);

    sc.limit_all_gathers = 0;
    run(a, &sc, state, got, sizeof got, &r);
    ck_assert_str_eq(got, "AG:a1=16 F:a1 F:a2 RL:a1=16 AG:b=40 F:b RL:b=40 AG:c=56 F:c B:c RL:c=56 RS AG:b=80 B:b "
                          "RL:b=80 RS AG:a1=96 B:a2 B:a1 RL:a1=96 RS");
    ck_assert_uint_eq(r.category_peak[REMAT_CAT_GATHERED_PARAMS], 96);
    remat_replay_result_destroy(&r);

    sc.limit_all_gathers = 1;
    sc.backward_prefetch = REMAT_FSDP_BACKWARD_PRE;
    run(a, &sc, state, got, sizeof got, &r);
    ck_assert_str_eq(got, "AG:a1=16 F:a1 F:a2 RL:a1=16 AG:b=40 F:b RL:b=40 AG:c=40 F:c AG:b=64 B:c RL:c=64 RS "
                          "AG:a1=56 B:b RL:b=56 RS B:a2 B:a1 RL:a1=56 RS");
    ck_assert_uint_eq(r.category_peak[REMAT_CAT_GATHERED_PARAMS], 64);
    ck_assert_uint_eq(r.comm_elements, 58); /* prefetch moves the same elements earlier */
    remat_replay_result_destroy(&r);

    sc.backward_prefetch = REMAT_FSDP_BACKWARD_POST;
    run(a, &sc, state, got, sizeof got, &r);
    ck_assert_str_eq(got, "AG:a1=16 F:a1 F:a2 RL:a1=16 AG:b=40 F:b RL:b=40 AG:c=40 F:c B:c RL:c=40 AG:b=40 RS B:b "
                          "RL:b=40 AG:a1=40 RS B:a2 B:a1 RL:a1=40 RS");
    ck_assert_uint_eq(r.category_peak[REMAT_CAT_GATHERED_PARAMS], 40);
    remat_replay_result_destroy(&r);

    fsdp_config(&sc, REMAT_FSDP_SHARD_GRAD_OP, 4);
    run(a, &sc, state, got, sizeof got, &r);
    ck_assert_str_eq(got, "AG:a1=16 F:a1 F:a2 AG:b=40 F:b AG:c=56 F:c B:c RL:c=56 RS B:b RL:b=56 RS B:a2 B:a1 "
                          "RL:a1=56 RS");
    ck_assert_uint_eq(r.category_peak[REMAT_CAT_GATHERED_PARAMS], 56);
    ck_assert_uint_eq(r.comm_elements, 42);
    ck_assert_uint_eq(r.at_opt_by_category[REMAT_CAT_PARAMS], 14);
    remat_replay_result_destroy(&r);

    /* The trace records the same: its intervals add up to the replay's
     * figures at every step (remat_trace_build checks), and the three
     * reclaimed buffers (a1 at AG c, the old b at AG b, c at AG a1) end
     * as their all-gather begins, before its mark. */
    {
        remat_sharding sh;
        remat_err err;
        remat_err_init(&err);
        fsdp_config(&sc, REMAT_FSDP_FULL_SHARD, 4);
        ck_assert_int_eq(remat_sharding_init(a, &sc, &sh, &err), REMAT_OK);
        remat_exec_extras x = {0};
        x.sharding = &sh;
        remat_schedule s, full;
        build_keep(a, NULL, &s);
        remat_schedule_init(&full);
        ck_assert_int_eq(remat_schedule_shard(&sh, &s, &full, &err), REMAT_OK);
        remat_trace *t = NULL;
        ck_assert_msg(remat_trace_build(a, &full, &x, &t, &err) == REMAT_OK, "%s", err.msg);
        uint32_t early = 0;
        for (size_t i = 0; i < t->n_intervals; i++)
            if (t->iv[i].early) {
                early++;
                ck_assert_int_eq(t->iv[i].category, REMAT_CAT_GATHERED_PARAMS);
                ck_assert_int_eq(full.ins[t->iv[i].free].kind, REMAT_I_ALLGATHER);
            }
        ck_assert_uint_eq(early, 3);
        remat_trace_destroy(t);
        remat_schedule_destroy(&full);
        remat_schedule_destroy(&s);
        remat_sharding_destroy(&sh);
    }

    /* N = 2: shards 3, 5, 3 (11 elements, 22 B); gathered 12, 20, 12 B.
     * FULL_SHARD with the limiter peaks at 20 + 12 = 32 B. */
    fsdp_config(&sc, REMAT_FSDP_FULL_SHARD, 2);
    run(a, &sc, NULL, got, sizeof got, &r);
    ck_assert_str_eq(got, "AG:a1=12 F:a1 F:a2 RL:a1=12 AG:b=32 F:b RL:b=32 AG:c=32 F:c B:c RL:c=32 RS AG:b=32 B:b "
                          "RL:b=32 RS AG:a1=32 B:a2 B:a1 RL:a1=32 RS");
    ck_assert_uint_eq(r.at_opt_by_category[REMAT_CAT_PARAMS], 22);
    ck_assert_uint_eq(r.at_opt_by_category[REMAT_CAT_PARAM_GRADS], 22);
    remat_replay_result_destroy(&r);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* Forward prefetch (N = 4, limiter on): at a1's pre-forward b is
 * prefetched (40), at b's c (56, one free queued so none reclaimed); in
 * backward AG b reclaims a1 (56 - 16 + 24 = 64) and AG a1 the old b (64 -
 * 24 + 16 = 56). A recomputation in backward needs its unit gathered: with
 * a2 recomputed, blocks.0 is gathered before RECOMPUTE a2, not at B:a2. */
START_TEST(fsdp_should_prefetch_forward_and_regather_for_recompute)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(UNITS3, &g);
    remat_shard_config sc;
    remat_replay_result r;
    char got[2048];
    fsdp_config(&sc, REMAT_FSDP_FULL_SHARD, 4);
    sc.forward_prefetch = 1;
    run(a, &sc, NULL, got, sizeof got, &r);
    ck_assert_str_eq(got, "AG:a1=16 AG:b=40 F:a1 F:a2 RL:a1=40 AG:c=56 F:b RL:b=56 F:c B:c RL:c=56 RS AG:b=64 B:b "
                          "RL:b=64 RS AG:a1=56 B:a2 B:a1 RL:a1=56 RS");
    remat_replay_result_destroy(&r);

    remat_sharding sh;
    remat_err err;
    remat_err_init(&err);
    fsdp_config(&sc, REMAT_FSDP_FULL_SHARD, 4);
    ck_assert_int_eq(remat_sharding_init(a, &sc, &sh, &err), REMAT_OK);
    remat_schedule s, full;
    remat_schedule_init(&s);
    sched_parse(g, "FWD a1, FWD a2, FWD b, FREE a2, FWD c, BWD c, RECOMPUTE a2, BWD b, FREE a2, BWD a2, FREE a1, "
                   "BWD a1, OPT",
                &s);
    remat_schedule_init(&full);
    ck_assert_int_eq(remat_schedule_shard(&sh, &s, &full, &err), REMAT_OK);
    size_t rec = SIZE_MAX, ag = SIZE_MAX;
    for (size_t i = 0; i < full.n; i++) {
        if (full.ins[i].kind == REMAT_I_RECOMPUTE)
            rec = i;
        if (full.ins[i].kind == REMAT_I_ALLGATHER && g->ops[full.ins[i].arg].id[0] == 'a' && rec == SIZE_MAX && i > 3)
            ag = i;
    }
    ck_assert_uint_lt(ag, rec); /* gathered again before the recomputation */
    remat_exec_extras x = {0};
    x.sharding = &sh;
    replay_valid(a, &full, &x, &r);
    remat_replay_result_destroy(&r);
    /* Without that gather the replay refuses the recomputation. */
    sched_del(&full, ag);
    ck_assert_int_eq(remat_replay(a, &full, &x, NULL, &r, &err), REMAT_OK);
    ck_assert(!r.valid);
    ck_assert_int_eq(err.code, REMAT_ESCHEDULE);
    ck_assert_ptr_nonnull(strstr(err.msg, "a recomputation too"));
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&full);
    remat_schedule_destroy(&s);
    remat_sharding_destroy(&sh);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* FULL_SHARD's resident state is the ledger's ZeRO 3 over the flat
 * parameters (FLAT3: one param per unit, so DeepSpeed's per-param padding
 * is FSDP's per-unit padding), and NO_SHARD replays DDP's memory exactly,
 * with 2 Psi all-reduced (one all-reduce per unit instead of per bucket). */
START_TEST(fsdp_should_equal_zero3_on_flat_params_and_ddp_unsharded)
{
    remat_graph *g, *gf;
    remat_analysis *a = t_analyze(UNITS3, &g), *af = t_analyze(FLAT3, &gf);
    remat_err err;
    remat_err_init(&err);
    for (uint64_t N = 2; N <= 8; N++) {
        remat_ledger_config lc;
        remat_ledger_config_init(&lc);
        lc.weights = REMAT_LEDGER_DT_BF16;
        lc.states = lc.master = REMAT_LEDGER_DT_F32;
        lc.zero_stage = 3;
        lc.dp = N;
        remat_ledger_result lr;
        ck_assert_int_eq(remat_ledger_from_graph(&lc, gf, &lr, &err), REMAT_OK);
        /* The closed form: sum over units of ceil(E/N). */
        uint64_t e = (6 + N - 1) / N + (10 + N - 1) / N + (5 + N - 1) / N;
        ck_assert_uint_eq(lr.weights.bytes, 2 * e);
        remat_shard_config sc;
        fsdp_config(&sc, REMAT_FSDP_FULL_SHARD, N);
        remat_sharding sh;
        ck_assert_int_eq(remat_sharding_init(a, &sc, &sh, &err), REMAT_OK);
        ck_assert_uint_eq(sh.fsdp_shard_elements, e);
        remat_exec_extras x = {0};
        x.sharding = &sh;
        x.optimizer_state = lr.optimizer_state.bytes;
        x.master_weights = lr.master_weights.bytes;
        remat_schedule s;
        build_keep(a, NULL, &s);
        remat_replay_result r;
        replay_valid(a, &s, &x, &r);
        ck_assert_uint_eq(r.at_opt_by_category[REMAT_CAT_PARAMS], lr.weights.bytes);
        ck_assert_uint_eq(r.at_opt_by_category[REMAT_CAT_PARAM_GRADS], lr.gradients.bytes);
        ck_assert_uint_eq(lr.optimizer_state.bytes, 8 * e);
        remat_replay_result_destroy(&r);
        remat_sharding_destroy(&sh);

        /* NO_SHARD against DDP (ZeRO 0), every category at every step's
         * maximum and at OPT. */
        remat_sharding shn, shd;
        fsdp_config(&sc, REMAT_FSDP_NO_SHARD, N);
        ck_assert_int_eq(remat_sharding_init(a, &sc, &shn, &err), REMAT_OK);
        remat_shard_config dc;
        remat_shard_config_init(&dc, 0, N);
        ck_assert_int_eq(remat_sharding_init(a, &dc, &shd, &err), REMAT_OK);
        ck_assert_uint_eq(shn.n_buckets, 3); /* one per unit */
        remat_exec_extras xn = {0}, xd = {0};
        xn.sharding = &shn;
        xd.sharding = &shd;
        xn.optimizer_state = xd.optimizer_state = 8 * 21;
        remat_replay_result rn, rd;
        replay_valid(a, &s, &xn, &rn);
        replay_valid(a, &s, &xd, &rd);
        ck_assert_uint_eq(rn.peak_bytes, rd.peak_bytes);
        assert_categories(rn.category_peak, rd.category_peak);
        assert_categories(rn.at_opt_by_category, rd.at_opt_by_category);
        ck_assert_uint_eq(rn.comm_elements, 2 * 21);
        ck_assert_uint_eq(rd.comm_elements, 2 * 21);
        remat_replay_result_destroy(&rn);
        remat_replay_result_destroy(&rd);
        remat_sharding_destroy(&shn);
        remat_sharding_destroy(&shd);
        remat_schedule_destroy(&s);
    }
    remat_analysis_destroy(af);
    remat_graph_destroy(gf);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* On a generated transformer every op reads at most one param, so the
 * default units are single params and FSDP's padding is DeepSpeed's: each
 * rank's weights, gradients and optimizer state under FULL_SHARD equal
 * the ledger's ZeRO 3 (Psi/N, every param divides by N here), and the
 * store-all step moves 3 Psi; SHARD_GRAD_OP moves 2 Psi. */
START_TEST(fsdp_should_match_the_ledger_on_a_transformer)
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
    for (uint32_t t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].kind == REMAT_TENSOR_PARAM)
            psi += g->tensors[t].bytes / 2;
    const uint64_t dps[2] = {2, 8};
    for (int d = 0; d < 2; d++)
        for (int gop = 0; gop < 2; gop++) {
            uint64_t N = dps[d];
            remat_ledger_config lc;
            remat_ledger_config_init(&lc);
            lc.weights = REMAT_LEDGER_DT_BF16;
            lc.states = lc.master = REMAT_LEDGER_DT_F32;
            lc.zero_stage = 3;
            lc.dp = N;
            remat_ledger_result lr;
            ck_assert_int_eq(remat_ledger_from_graph(&lc, g, &lr, &err), REMAT_OK);
            remat_shard_config sc;
            remat_shard_config_init(&sc, 3, N);
            sc.fsdp = gop ? REMAT_FSDP_SHARD_GRAD_OP : REMAT_FSDP_FULL_SHARD;
            remat_sharding sh;
            ck_assert_int_eq(remat_sharding_init(a, &sc, &sh, &err), REMAT_OK);
            ck_assert_uint_eq(sh.fsdp_shard_elements, psi / N);
            remat_exec_extras x = {0};
            x.sharding = &sh;
            x.optimizer_state = lr.optimizer_state.bytes;
            x.master_weights = lr.master_weights.bytes;
            remat_schedule s;
            build_keep(a, NULL, &s);
            remat_replay_result r;
            replay_valid(a, &s, &x, &r);
            const uint64_t *at = r.at_opt_by_category;
            ck_assert_uint_eq(at[REMAT_CAT_PARAMS], 2 * psi / N);
            ck_assert_uint_eq(at[REMAT_CAT_PARAMS], lr.weights.bytes);
            ck_assert_uint_eq(at[REMAT_CAT_PARAM_GRADS], lr.gradients.bytes);
            ck_assert_uint_eq(at[REMAT_CAT_OPTIMIZER_STATE], 8 * psi / N);
            ck_assert_uint_eq(r.comm_elements, (gop ? 2 : 3) * psi);
            remat_replay_result_destroy(&r);
            remat_schedule_destroy(&s);
            remat_sharding_destroy(&sh);
        }
    /* Recomputation releases units in another order than it gathers them;
     * the limiter reclaims by release order, and the trace must follow it
     * (its intervals add up to the replay's marks at every step, or
     * remat_trace_build fails). Keep one activation in k, k = 2..4, under
     * each prefetch. */
    for (uint32_t k = 2; k <= 4; k++)
        for (int pf = 0; pf < 3; pf++) {
            uint8_t *keep = remat__calloc(g->n_tensors, 1);
            ck_assert_ptr_nonnull(keep);
            for (uint32_t t = 0; t < g->n_tensors; t++)
                keep[t] = g->tensors[t].kind == REMAT_TENSOR_ACTIVATION ? t % k == 0 : 1;
            remat_shard_config sc;
            remat_shard_config_init(&sc, 3, 8);
            sc.fsdp = REMAT_FSDP_FULL_SHARD;
            sc.limit_all_gathers = 1;
            sc.backward_prefetch = (remat_fsdp_prefetch)pf;
            remat_sharding sh;
            ck_assert_int_eq(remat_sharding_init(a, &sc, &sh, &err), REMAT_OK);
            remat_exec_extras x = {0};
            x.sharding = &sh;
            remat_schedule s, full;
            build_keep(a, keep, &s);
            remat_schedule_init(&full);
            ck_assert_int_eq(remat_schedule_shard(&sh, &s, &full, &err), REMAT_OK);
            remat_trace *t = NULL;
            ck_assert_msg(remat_trace_build(a, &full, &x, &t, &err) == REMAT_OK, "keep 1 in %u, prefetch %d: %s", k, pf,
                          err.msg);
            remat_trace_destroy(t);
            remat_schedule_destroy(&full);
            remat_schedule_destroy(&s);
            remat_sharding_destroy(&sh);
            remat__free(keep);
        }
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* Units by module: depth 2 and the explicit list give blocks.0, blocks.1
 * and the root; depth 1 puts blocks.* in one unit; errors name the
 * option, the prefix or the op. */
START_TEST(fsdp_should_take_units_from_modules)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(UNITS3, &g);
    ck_assert_str_eq(g->ops[0].module, "blocks.0.fc1");
    remat_err err;
    remat_err_init(&err);
    remat_shard_config sc;
    remat_sharding sh;
    uint32_t pa1 = 1, pa2 = 2, pb = 3, pc = 4; /* inputs, then params in file order */
    ck_assert_str_eq(g->tensors[pa2].id, "pa2");
    fsdp_config(&sc, REMAT_FSDP_FULL_SHARD, 4);
    ck_assert_int_eq(remat_sharding_init(a, &sc, &sh, &err), REMAT_OK);
    ck_assert_uint_eq(sh.n_units, 3);
    ck_assert_uint_eq(sh.unit_of[pa1], 0);
    ck_assert_uint_eq(sh.unit_of[pa2], 0);
    ck_assert_uint_eq(sh.unit_of[pb], 2);
    ck_assert_uint_eq(sh.unit_of[pc], 3);
    ck_assert_uint_eq(sh.root_unit, 3);
    ck_assert_uint_eq(sh.unit_elements[0], 8); /* ceil(6/4) x 4 */
    remat_sharding_destroy(&sh);
    const char *list[2] = {"blocks.0", "blocks.1"};
    sc.wrap_depth = 0;
    sc.unit_prefixes = list;
    sc.n_unit_prefixes = 2;
    ck_assert_int_eq(remat_sharding_init(a, &sc, &sh, &err), REMAT_OK);
    ck_assert_uint_eq(sh.unit_of[pa2], 0);
    ck_assert_uint_eq(sh.unit_of[pb], 2);
    ck_assert_uint_eq(sh.root_unit, 3);
    remat_sharding_destroy(&sh);
    /* The longest listed prefix wins; a module under none is the root's. */
    const char *nested[2] = {"blocks", "blocks.1"};
    sc.unit_prefixes = nested;
    ck_assert_int_eq(remat_sharding_init(a, &sc, &sh, &err), REMAT_OK);
    ck_assert_uint_eq(sh.unit_of[pa1], 0);
    ck_assert_uint_eq(sh.unit_of[pa2], 0);
    ck_assert_uint_eq(sh.unit_of[pb], 2);
    remat_sharding_destroy(&sh);
    sc.unit_prefixes = NULL;
    sc.n_unit_prefixes = 0;
    sc.wrap_depth = 1;
    ck_assert_int_eq(remat_sharding_init(a, &sc, &sh, &err), REMAT_OK);
    ck_assert_uint_eq(sh.unit_of[pb], 0);
    ck_assert_uint_eq(sh.unit_of[pc], 3); /* "head" is one component: its own unit at depth 1 */
    ck_assert_uint_eq(sh.root_unit, REMAT_NONE);
    remat_sharding_destroy(&sh);

    const char *bad[1] = {"blocks.7"};
    sc.wrap_depth = 0;
    sc.unit_prefixes = bad;
    sc.n_unit_prefixes = 1;
    ck_assert_int_eq(remat_sharding_init(a, &sc, &sh, &err), REMAT_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "--fsdp-units: no op that reads a param runs in module 'blocks.7'"));
    remat_sharding_destroy(&sh);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);

    /* A graph without attrs.module cannot be wrapped by module. */
    a = t_analyze(FLAT3, &g);
    remat_err_init(&err);
    fsdp_config(&sc, REMAT_FSDP_FULL_SHARD, 4);
    ck_assert_int_eq(remat_sharding_init(a, &sc, &sh, &err), REMAT_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "--fsdp-wrap: the graph's ops carry no attrs.module"));
    remat_sharding_destroy(&sh);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);

    /* attrs.module must be a string. */
    const char *bad_module =
        "{\"format\": \"remat-graph\", \"version\": 1, \"inputs\": [{\"id\": \"x\", \"bytes\": 4}],"
        " \"ops\": [{\"id\": \"a\", \"op\": \"relu\", \"inputs\": [\"x\"], \"bytes\": 4, \"flops\": 1,"
        " \"attrs\": {\"module\": 3}}], \"outputs\": [\"a\"]}";
    remat_err_init(&err);
    ck_assert_int_eq(remat_graph_load_json(bad_module, strlen(bad_module), "m.json", &g, &err), REMAT_EGRAPH);
    ck_assert_ptr_nonnull(strstr(err.msg, "ops[0].attrs.module: must be a string"));
}
END_TEST

/* One FSDP job and one ZeRO 3 job with units by module and a reuse
 * distance: loaded, analysed, sharded, the collectives inserted, replayed
 * and traced. Returns the peaks and volumes summed (to compare runs). */
static remat_status oom_job(uint64_t *figure, remat_err *err)
{
    *figure = 0;
    remat_graph *g = NULL;
    remat_analysis *a = NULL;
    remat_status st = remat_graph_load_json(UNITS3, strlen(UNITS3), "units3.json", &g, err);
    if (st == REMAT_OK)
        st = remat_analyze(g, &a, err);
    for (int k = 0; k < 2 && st == REMAT_OK; k++) {
        remat_shard_config sc;
        fsdp_config(&sc, k ? REMAT_FSDP_OFF : REMAT_FSDP_FULL_SHARD, 4);
        sc.backward_prefetch = REMAT_FSDP_BACKWARD_PRE;
        sc.max_reuse_elements = k ? 30 : 0;
        const char *list[2] = {"blocks.0", "blocks.1"};
        if (k) {
            sc.wrap_depth = 0;
            sc.unit_prefixes = list;
            sc.n_unit_prefixes = 2;
        }
        remat_sharding sh;
        if ((st = remat_sharding_init(a, &sc, &sh, err)) != REMAT_OK) {
            remat_sharding_destroy(&sh);
            break;
        }
        remat_exec_extras x = {0};
        x.sharding = &sh;
        remat_schedule s, full;
        remat_schedule_init(&s);
        remat_schedule_init(&full);
        remat_replay_result r;
        memset(&r, 0, sizeof r);
        st = remat_schedule_store_all(a, &s, err);
        if (st == REMAT_OK)
            st = remat_schedule_shard(&sh, &s, &full, err);
        if (st == REMAT_OK && (st = remat_replay(a, &full, &x, NULL, &r, err)) == REMAT_OK) {
            ck_assert(r.valid);
            *figure += r.peak_bytes + r.comm_elements;
        }
        remat_trace *t = NULL;
        if (st == REMAT_OK && (st = remat_trace_build(a, &full, &x, &t, err)) == REMAT_OK)
            *figure += t->n_intervals;
        remat_trace_destroy(t);
        remat_replay_result_destroy(&r);
        remat_schedule_destroy(&full);
        remat_schedule_destroy(&s);
        remat_sharding_destroy(&sh);
    }
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    return st;
}

/* Out of memory at every allocation of those jobs: a clean REMAT_ENOMEM
 * saying so, or the undisturbed figures (check_oom.c's contract). */
START_TEST(fsdp_should_fail_cleanly_out_of_memory)
{
    remat_err err;
    remat_err_init(&err);
    uint64_t clean, got;
    remat__alloc_fail_at(0);
    ck_assert_int_eq(oom_job(&clean, &err), REMAT_OK);
    uint64_t total = remat__alloc_fail_at(0);
    ck_assert_uint_gt(total, 20);
    for (uint64_t n = 1; n <= total; n++) {
        remat_err_init(&err);
        remat__alloc_fail_at(n);
        remat_status st = oom_job(&got, &err);
        remat__alloc_fail_at(0);
        if (st == REMAT_ENOMEM) {
            ck_assert_msg(strstr(err.msg, "out of memory") != NULL, "allocation %llu: '%s'", (unsigned long long)n,
                          err.msg);
            continue;
        }
        ck_assert_msg(st == REMAT_OK, "allocation %llu: %s", (unsigned long long)n, err.msg);
        ck_assert_uint_eq(got, clean);
    }
}
END_TEST

Suite *fsdp_suite(void)
{
    Suite *s = suite_create("fsdp");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, fsdp_should_gather_as_worked_by_hand);
    tcase_add_test(tc, fsdp_should_prefetch_forward_and_regather_for_recompute);
    tcase_add_test(tc, fsdp_should_equal_zero3_on_flat_params_and_ddp_unsharded);
    tcase_add_test(tc, fsdp_should_match_the_ledger_on_a_transformer);
    tcase_add_test(tc, fsdp_should_take_units_from_modules);
    tcase_add_test(tc, fsdp_should_fail_cleanly_out_of_memory);
    suite_add_tcase(s, tc);
    return s;
}

/*
 * check_exec_oracle.c - the executor against an independent oracle.
 *
 * oracle.c generates random graphs and simulates schedules on them from the
 * spec alone; this file loads each graph, replays the same schedules with
 * remat_replay and asserts that the two agree on every figure of every step.
 * Two sources of schedules: the default policy (store-all and random keep
 * sets, with DESIGN 3's free steps and DESIGN 5's residency promises checked
 * on the way), and random legal schedules with random one-edit mutants,
 * where both must also agree on which instruction is the first illegal one.
 */
#include "exec_util.h"
#include "oracle.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- The oracle against remat_replay ------------------------------------ */

/* A schedule as text, for the failure messages. */
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
    uint64_t lower_bound; /* no valid schedule peaks below this (spec_lower_bound) */
} gcase;

static void gcase_load(gcase *C, char *json, size_t cap)
{
    size_t len = spec_json(&C->G, json, cap);
    remat_err err;
    remat_err_init(&err);
    C->g = NULL;
    ck_assert_msg(remat_graph_load_json(json, len, "gen.json", &C->g, &err) == REMAT_OK, "%s\n%s", err.msg, json);
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
            if (G->has_bwd[k] && oracle_contains(G->save[k], G->n_save[k], t) &&
                (lbu == REMAT_NONE || bstep[k] > lbu))
                lbu = bstep[k];
            if (oracle_contains(G->in[k], G->n_in[k], t) && (lfu == REMAT_NONE || fstep[k] > lfu))
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
        spec_generate(&seed, &C->G);
        spec_derive(&C->G);
        gcase_load(C, json, JSON_CAP);
        const spec *G = &C->G;
        /* The analyzer derives the same backward pass as DESIGN 2 here. */
        for (int t = 0; t < G->n_t; t++)
            ck_assert_msg(C->a->grad_flows[C->gt[t]] == G->gflow[t], "grad_flows(%s)\n%s", G->tid[t], json);
        C->lower_bound = spec_lower_bound(&C->G, &C->leaves);
        /* Ledger extras for a third of the graphs. */
        remat_exec_extras x = {0}, *xp = NULL;
        if (oracle_rnd(&seed, 3) == 0) {
            x.optimizer_state = oracle_rnd(&seed, 5000);
            x.master_weights = oracle_rnd(&seed, 5000);
            x.frozen_copies = oracle_rnd(&seed, 5000);
            x.comm_buffers = oracle_rnd(&seed, 5000);
            x.optimizer_workspace = oracle_rnd(&seed, 50000);
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
            uint32_t p = pct[j] <= 100 ? pct[j] : oracle_rnd(&seed, 101);
            memset(keep, 0, sizeof keep);
            for (int t = 0; t < G->n_t; t++)
                keep[C->gt[t]] = G->kind[t] == REMAT_TENSOR_ACTIVATION && oracle_rnd(&seed, 100) < p;
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
    int n = (int)oracle_rnd(R->seed, (uint32_t)max + 1);
    for (int i = 0; i < n; i++) {
        int t = (int)oracle_rnd(R->seed, (uint32_t)G->n_t);
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
        if (oracle_rnd(seed, 10) == 0) { /* wasteful, but legal */
            int q = (int)oracle_rnd(seed, (uint32_t)k + 1), missing = 0;
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
    if (oracle_rnd(seed, 2))
        for (int t = 0; t < G->n_t; t++)
            if (G->kind[t] == REMAT_TENSOR_ACTIVATION && R.res[t])
                rg_emit(&R, REMAT_I_FREE, t);
    if (oracle_rnd(seed, 10) < 7)
        rg_emit(&R, REMAT_I_OPT, 0);
}

/* One random edit: delete, duplicate, move, or insert a FREE; or turn a FWD
 * into a RECOMPUTE and back. The result may still be legal. */
static void mutate(const gcase *C, uint64_t *seed, remat_schedule *s)
{
    const spec *G = &C->G;
    size_t n = s->n, i = oracle_rnd(seed, (uint32_t)n);
    switch (oracle_rnd(seed, 5)) {
    case 0: sched_del(s, i); break;
    case 1: sched_ins(s, oracle_rnd(seed, (uint32_t)n + 1), s->ins[i]); break;
    case 2: {
        remat_instr in = s->ins[i];
        sched_del(s, i);
        sched_ins(s, oracle_rnd(seed, (uint32_t)n), in);
        break;
    }
    case 3: {
        int t = (int)oracle_rnd(seed, (uint32_t)G->n_t);
        sched_ins(s, oracle_rnd(seed, (uint32_t)n + 1), (remat_instr){REMAT_I_FREE, (uint32_t)C->gt[t]});
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
        spec_generate(&seed, &C->G);
        spec_derive(&C->G);
        gcase_load(C, json, JSON_CAP);
        C->lower_bound = spec_lower_bound(&C->G, &C->leaves);
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

Suite *exec_oracle_suite(void)
{
    Suite *s = suite_create("exec_oracle");
    TCase *orc = tcase_create("oracle");
    tcase_set_timeout(orc, 60);
    tcase_add_test(orc, exec_should_agree_with_an_independent_oracle_on_generated_graphs);
    tcase_add_test(orc, exec_should_judge_random_schedules_like_the_oracle);
    suite_add_tcase(s, orc);
    return s;
}

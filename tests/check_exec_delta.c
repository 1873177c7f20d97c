/*
 * check_exec_delta.c - the delta replay (src/exec/replay_delta.c) against
 * the full replay, its second algorithm.
 *
 * On random graphs of the executor oracle's generator (views, multi-output
 * ops, workspaces, explicit saves, ops that cannot be recomputed, frozen
 * params), on generated layered DAGs, transformers, ResNets and chains, and
 * on bundled graphs (unet-b2 with its cats' gradient views), with and without
 * resident extras: a random keep set's schedule becomes the base, then
 * random flips of one to three activations (as auto's local search makes
 * them), and mutated schedules (an
 * instruction dropped, two swapped, one duplicated) that the replay may
 * reject. Each candidate's validity, peak, activation peak and extra FLOPs
 * from the delta replay must equal remat_replay's; some flips become the
 * new base. The shortcut must also be taken: on the generated families the
 * delta replay must do less work than replaying every candidate whole.
 *
 * Beside it, the two other incremental pieces of auto's local search, each
 * against its whole computation: the incremental default policy
 * (remat__policy_build from the last base, remat__policy_adopt of a flip)
 * must give remat_schedule_from_keep's schedule instruction by instruction,
 * or its error, on every keep set; and a new delta base that resumes from
 * the old base's snapshots must leave the same marks (every step's
 * high-water mark) as a base replayed from the start.
 */
#include "test_util.h"
#include "oracle.h"
#include "exec/replay_cursor.h"
#include "exec/builder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static remat_analysis *load_json(const char *json, size_t len, remat_graph **g)
{
    remat_err err;
    remat_err_init(&err);
    *g = NULL;
    ck_assert_msg(remat_graph_load_json(json, len, "t.json", g, &err) == REMAT_OK, "%s", err.msg);
    remat_analysis *a = NULL;
    ck_assert_msg(remat_analyze(*g, &a, &err) == REMAT_OK, "%s", err.msg);
    return a;
}

typedef struct {
    unsigned evals, invalid, shortcut;
    uint64_t work, whole;
    unsigned builds; /* incremental builds compared with the whole build */
} tally;

/* The incremental policy's schedule (or error) for keep equals the whole
 * build's, s (st: the whole build's status). */
static void compare_build(remat__policy *pol, const uint8_t *keep, const remat_schedule *s, remat_status st,
                          remat_schedule *ps, const char *what, tally *tl)
{
    remat_err err;
    remat_err_init(&err);
    remat_status pst = remat__policy_build(pol, keep, ps, &err);
    ck_assert_msg(pst == st, "%s: incremental build status %d, whole build %d (%s)", what, (int)pst, (int)st,
                  err.msg);
    tl->builds++;
    if (st != REMAT_OK)
        return;
    ck_assert_msg(ps->n == s->n, "%s: incremental build has %zu instructions, the whole build %zu", what, ps->n,
                  s->n);
    for (size_t i = 0; i < s->n; i++)
        ck_assert_msg(ps->ins[i].kind == s->ins[i].kind && ps->ins[i].arg == s->ins[i].arg,
                      "%s: instruction %zu differs: %s %u, the whole build's %s %u", what, i,
                      remat_instr_name(ps->ins[i].kind), ps->ins[i].arg, remat_instr_name(s->ins[i].kind),
                      s->ins[i].arg);
}

/* d's base marks equal those of a fresh delta replay based on s. */
static void compare_marks(const remat__delta *d, const remat_analysis *a, const remat_exec_extras *x,
                          const remat_schedule *s, const char *what)
{
    remat_err err;
    remat_err_init(&err);
    remat__delta *fresh = NULL;
    ck_assert_msg(remat__delta_create(a, x, &fresh, &err) == REMAT_OK, "%s", err.msg);
    remat__delta_figures f;
    ck_assert_msg(remat__delta_base(fresh, s, &f, &err) == REMAT_OK, "%s: %s", what, err.msg);
    for (int act = 0; act < 2; act++) {
        const uint64_t *m1 = remat__delta_marks(d, act), *m2 = remat__delta_marks(fresh, act);
        ck_assert_msg((m1 == NULL) == (m2 == NULL), "%s: marks present in one base only", what);
        for (size_t i = 0; m1 && i < s->n; i++)
            ck_assert_msg(m1[i] == m2[i], "%s: %s mark at instruction %zu: %llu, a fresh base's %llu", what,
                          act ? "activation" : "total", i, (unsigned long long)m1[i], (unsigned long long)m2[i]);
    }
    remat__delta_destroy(fresh);
}

/* The delta replay's figures for s equal the full replay's. */
static void compare(remat__delta *d, const remat_analysis *a, const remat_exec_extras *x, const remat_schedule *s,
                    int as_base, const char *what, tally *tl, remat__delta_figures *out)
{
    remat_err err;
    remat_err_init(&err);
    remat__delta_figures own, *fp = out ? out : &own; /* out: d's figures for the caller */
    remat_status st = as_base ? remat__delta_base(d, s, fp, &err) : remat__delta_eval(d, s, fp, &err);
    ck_assert_msg(st == REMAT_OK, "%s: %s", what, err.msg);
    remat_replay_result r;
    remat_err_init(&err);
    ck_assert_msg(remat_replay(a, s, x, NULL, &r, &err) == REMAT_OK, "%s: %s", what, err.msg);
    ck_assert_msg(fp->valid == (int)r.valid, "%s (%zu instructions): delta says %s, the replay %s", what, s->n,
                  fp->valid ? "valid" : "invalid", r.valid ? "valid" : "invalid");
    if (r.valid) {
        ck_assert_msg(fp->peak_bytes == r.peak_bytes, "%s: peak %llu, replay %llu", what,
                      (unsigned long long)fp->peak_bytes, (unsigned long long)r.peak_bytes);
        ck_assert_msg(fp->activation_peak == r.activation_peak, "%s: activation peak %llu, replay %llu", what,
                      (unsigned long long)fp->activation_peak, (unsigned long long)r.activation_peak);
        ck_assert_msg(fp->flops_recompute == r.flops_recompute, "%s: extra FLOPs %llu, replay %llu", what,
                      (unsigned long long)fp->flops_recompute, (unsigned long long)r.flops_recompute);
    }
    remat_replay_result_destroy(&r);
    if (!as_base) {
        tl->evals++;
        tl->invalid += !fp->valid;
        tl->shortcut += fp->work < s->n;
        tl->work += fp->work;
        tl->whole += s->n;
    }
}

/* A delta replay re-based along a search (d) judges s exactly as one based
 * from scratch on the same schedule (fresh): the same figures and the same
 * work, so its snapshots and touch lists are a fresh base's (the search's
 * work, and so its plans, do not depend on how the base was reached). */
static void compare_fresh(remat__delta *fresh, const remat__delta_figures *fd, const remat_schedule *s,
                          const char *what)
{
    remat_err err;
    remat_err_init(&err);
    remat__delta_figures ff;
    ck_assert_msg(remat__delta_eval(fresh, s, &ff, &err) == REMAT_OK, "%s: %s", what, err.msg);
    ck_assert_msg(ff.valid == fd->valid && ff.work == fd->work, "%s: re-based work %llu (valid %d), fresh %llu (%d)",
                  what, (unsigned long long)fd->work, fd->valid, (unsigned long long)ff.work, ff.valid);
    if (ff.valid)
        ck_assert_msg(ff.peak_bytes == fd->peak_bytes && ff.activation_peak == fd->activation_peak &&
                          ff.flops_recompute == fd->flops_recompute,
                      "%s: re-based and fresh figures differ", what);
}

/* s with one random mutation: an instruction dropped, two swapped, or one
 * duplicated. */
static void mutate(uint64_t *seed, const remat_schedule *s, remat_schedule *out)
{
    remat_schedule_clear(out);
    size_t n = s->n, i = oracle_rnd(seed, (uint32_t)n), j = oracle_rnd(seed, (uint32_t)n);
    int how = (int)oracle_rnd(seed, 3);
    for (size_t k = 0; k < n; k++) {
        size_t from = k;
        if (how == 1 && k == i)
            from = j;
        else if (how == 1 && k == j)
            from = i;
        if (how == 0 && k == i)
            continue;
        ck_assert_int_eq(remat_schedule_push(out, s->ins[from].kind, s->ins[from].arg), REMAT_OK);
        if (how == 2 && k == i)
            ck_assert_int_eq(remat_schedule_push(out, s->ins[from].kind, s->ins[from].arg), REMAT_OK);
    }
}

/* A random base, then flips and mutations, on one graph. */
static void check_graph(const remat_analysis *a, const remat_exec_extras *x, uint64_t *seed, int flips,
                        const char *what, tally *tl)
{
    const remat_graph *g = a->g;
    remat_err err;
    remat_err_init(&err);
    remat__delta *d = NULL;
    ck_assert_msg(remat__delta_create(a, x, &d, &err) == REMAT_OK, "%s", err.msg);
    remat__policy *pol = NULL;
    ck_assert_msg(remat__policy_create(a, &pol, &err) == REMAT_OK, "%s", err.msg);
    remat_schedule ps;
    remat_schedule_init(&ps);
    uint8_t *keep = calloc(g->n_tensors ? g->n_tensors : 1, 1);
    uint32_t *acts = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *acts);
    ck_assert(keep && acts);
    uint32_t n_acts = 0;
    for (uint32_t t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].kind == REMAT_TENSOR_ACTIVATION)
            acts[n_acts++] = t;
    remat_schedule s, m;
    remat_schedule_init(&s);
    remat_schedule_init(&m);
    int have_base = 0;
    remat__delta *fresh = NULL; /* based from scratch on d's base, once d has been re-based */
    char label[160];
    for (int k = 0; k < flips; k++) {
        if (!have_base || oracle_rnd(seed, 16) == 0) /* now and then a fresh keep set */
            for (uint32_t t = 0; t < g->n_tensors; t++)
                keep[t] = oracle_rnd(seed, 2);
        uint32_t changed[3] = {0, 0, 0}, nc = n_acts ? 1 + oracle_rnd(seed, 3) : 0;
        for (uint32_t c = 0; c < nc; c++) {
            changed[c] = acts[oracle_rnd(seed, n_acts)];
            keep[changed[c]] ^= 1;
        }
        remat_schedule_clear(&s);
        remat_err_init(&err);
        remat_status st = remat_schedule_from_keep(a, keep, &s, &err);
        snprintf(label, sizeof label, "%s, step %d", what, k);
        if (have_base) {
            compare_build(pol, keep, &s, st, &ps, label, tl);
        } else if (st == REMAT_OK) {
            remat_err_init(&err);
            ck_assert_msg(remat__policy_base(pol, keep, &ps, &err) == REMAT_OK, "%s: %s", label, err.msg);
            compare_build(pol, keep, &s, st, &ps, label, tl); /* from itself: the whole schedule again */
        }
        if (st == REMAT_EINFEASIBLE) {
            for (uint32_t c = nc; c-- > 0;)
                keep[changed[c]] ^= 1;
            continue;
        }
        ck_assert_msg(st == REMAT_OK, "%s: %s", what, err.msg);
        if (!have_base) {
            compare(d, a, x, &s, 1, label, tl, NULL);
            have_base = 1;
            continue;
        }
        remat__delta_figures fd;
        compare(d, a, x, &s, 0, label, tl, &fd);
        if (fresh)
            compare_fresh(fresh, &fd, &s, label);
        if (oracle_rnd(seed, 4) == 0) {
            mutate(seed, &s, &m);
            snprintf(label, sizeof label, "%s, step %d mutated", what, k);
            compare(d, a, x, &m, 0, label, tl, &fd);
            if (fresh)
                compare_fresh(fresh, &fd, &m, label);
        }
        if (oracle_rnd(seed, 4) == 0) { /* accepted: the new base */
            snprintf(label, sizeof label, "%s, step %d as the base", what, k);
            compare(d, a, x, &s, 1, label, tl, NULL);
            if (oracle_rnd(seed, 2) == 0) /* the same base again, as the next search's start */
                compare(d, a, x, &s, 1, label, tl, NULL);
            compare_marks(d, a, x, &s, label);
            remat__delta_destroy(fresh);
            fresh = NULL;
            remat__delta_figures fb;
            ck_assert_msg(remat__delta_create(a, x, &fresh, &err) == REMAT_OK, "%s", err.msg);
            ck_assert_msg(remat__delta_base(fresh, &s, &fb, &err) == REMAT_OK, "%s: %s", label, err.msg);
            /* The policy's base too: the flip just built, adopted (its
             * next builds are checked), or now and then built whole. */
            remat_err_init(&err);
            if (oracle_rnd(seed, 4) == 0)
                ck_assert_msg(remat__policy_base(pol, keep, &ps, &err) == REMAT_OK, "%s: %s", label, err.msg);
            else
                ck_assert_msg(remat__policy_adopt(pol, &ps, &err) == REMAT_OK, "%s: %s", label, err.msg);
        } else {
            for (uint32_t c = nc; c-- > 0;)
                keep[changed[c]] ^= 1;
        }
    }
    remat_schedule_destroy(&s);
    remat_schedule_destroy(&m);
    remat_schedule_destroy(&ps);
    free(keep);
    free(acts);
    remat__delta_destroy(d);
    remat__delta_destroy(fresh);
    remat__policy_destroy(pol);
}

START_TEST(delta_should_equal_the_full_replay_on_random_graphs)
{
    uint64_t seed = 0xde17a0 + (uint64_t)_i;
    char *json = malloc(1 << 16);
    ck_assert(json);
    tally tl = {0};
    for (int k = 0; k < 60; k++) {
        spec G;
        spec_generate(&seed, &G);
        size_t len = spec_json(&G, json, 1 << 16);
        remat_graph *g;
        remat_analysis *a = load_json(json, len, &g);
        remat_exec_extras x;
        memset(&x, 0, sizeof x);
        x.optimizer_state = 1000;
        x.workspace = 24;
        char what[64];
        snprintf(what, sizeof what, "random graph %d.%d", _i, k);
        check_graph(a, k % 3 == 0 ? &x : NULL, &seed, 30, what, &tl);
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
    }
    free(json);
    printf("delta replay on random graphs (%d): %u candidates, %u invalid, %u by the shortcut; %u incremental "
           "builds equal to the whole\n",
           _i, tl.evals, tl.invalid, tl.shortcut, tl.builds);
    ck_assert_uint_gt(tl.evals, 500);
    ck_assert_uint_gt(tl.invalid, 0);
    ck_assert_uint_gt(tl.builds, 500);
}
END_TEST

START_TEST(delta_should_equal_the_full_replay_and_save_work_on_generated_families)
{
    uint64_t seed = 0x5eed;
    tally tl = {0};
    static const remat_gen_family fams[] = {REMAT_GEN_LAYERED, REMAT_GEN_TRANSFORMER, REMAT_GEN_RESNET,
                                            REMAT_GEN_CHAIN};
    for (size_t fi = 0; fi < sizeof fams / sizeof fams[0]; fi++) {
        remat_gen_opts o;
        remat_gen_opts_init(&o, fams[fi]);
        switch (fams[fi]) {
        case REMAT_GEN_LAYERED: o.width = 6; o.layers = 30; o.seed = 2; break;
        case REMAT_GEN_TRANSFORMER: o.layers = 6; break;
        case REMAT_GEN_RESNET: o.blocks = 20; break;
        default: o.ops = 200; o.random = true; o.seed = 5; break;
        }
        remat_err err;
        remat_err_init(&err);
        size_t len;
        char *json = remat_gen_json(&o, &len, &err);
        ck_assert_msg(json != NULL, "%s", err.msg);
        remat_graph *g;
        remat_analysis *a = load_json(json, len, &g);
        remat_free(json);
        check_graph(a, NULL, &seed, 120, remat_gen_family_name(fams[fi]), &tl);
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
    }
    static const char *const bundled[] = {"unet3", "resnet8", "transformer4", "gpt4-b4", "unet-b2"};
    for (size_t i = 0; i < sizeof bundled / sizeof bundled[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "graphs/%s.json", bundled[i]);
        remat_graph *g = NULL;
        remat_analysis *a = NULL;
        remat_err err;
        remat_err_init(&err);
        ck_assert_msg(remat_graph_load_file(path, &g, &err) == REMAT_OK, "%s", err.msg);
        ck_assert_msg(remat_analyze(g, &a, &err) == REMAT_OK, "%s", err.msg);
        check_graph(a, NULL, &seed, 60, bundled[i], &tl);
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
    }
    printf("delta replay on generated and bundled graphs: %u candidates, %u by the shortcut, work %.3f of whole "
           "replays; %u incremental builds equal to the whole\n",
           tl.evals, tl.shortcut, (double)tl.work / (double)tl.whole, tl.builds);
    ck_assert_uint_gt(tl.builds, 500);
    ck_assert_uint_gt(tl.shortcut, tl.evals / 4);
    ck_assert_uint_lt(tl.work, tl.whole);
}
END_TEST

Suite *exec_delta_suite(void)
{
    Suite *s = suite_create("exec_delta");
    TCase *tc = tcase_create("exec_delta");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, delta_should_equal_the_full_replay_on_random_graphs, 0, 2);
    tcase_add_test(tc, delta_should_equal_the_full_replay_and_save_work_on_generated_families);
    suite_add_tcase(s, tc);
    return s;
}

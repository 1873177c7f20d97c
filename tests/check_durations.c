/*
 * check_durations.c - `remat step --record-durations` underneath: the
 * trainer's kernel timing (remat_trainer_time_kernels) and the graph file
 * with the figures written in (remat_import_set_durations), on the
 * specification's MLP (graphs/mlp423.json).
 *
 * A time is a measurement, so no test compares one with a figure: they
 * check what must hold whatever the machine does. Every op's forward is
 * timed and positive; an op has a backward time exactly when the analysis
 * gives it a backward step; the written file loads, carries exactly the
 * figures it was given, and the step-time model then takes every op's time
 * from it instead of its roofline.
 */
#include "test_util.h"
#include "remat/import.h"
#include "remat/time.h"
#include "remat/train.h"
#include "util/util_internal.h"

#include <stdlib.h>
#include <string.h>

#define MLP "graphs/mlp423.json"

typedef struct {
    remat_graph *g;
    remat_analysis *a;
    uint64_t *fwd, *bwd;
} timed;

/* Three SGD steps of store-all, kernel times of the last in t->fwd/bwd. */
static void time_steps(timed *t)
{
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_graph_load_file(MLP, &t->g, &err), REMAT_OK);
    ck_assert_int_eq(remat_analyze(t->g, &t->a, &err), REMAT_OK);
    remat_trainer *tr = NULL;
    ck_assert_int_eq(remat_trainer_create(t->a, &tr, &err), REMAT_OK);
    remat_optim o;
    ck_assert_int_eq(remat_optim_init(&o, REMAT_LEDGER_SGD, &err), REMAT_OK);
    remat_model_state st;
    ck_assert_int_eq(remat_trainer_init_state(tr, &o, 1, &st, &err), REMAT_OK);
    remat_batch b;
    ck_assert_int_eq(remat_batch_alloc(tr, &b, &err), REMAT_OK);
    remat_schedule s;
    remat_schedule_init(&s);
    ck_assert_int_eq(remat_schedule_store_all(t->a, &s, &err), REMAT_OK);
    t->fwd = calloc(t->g->n_ops, sizeof *t->fwd);
    t->bwd = calloc(t->g->n_ops, sizeof *t->bwd);
    ck_assert(t->fwd && t->bwd);
    for (int k = 0; k < 3; k++) {
        /* Stale figures must not survive a step: the trainer zeroes first. */
        for (uint32_t j = 0; j < t->g->n_ops; j++)
            t->fwd[j] = t->bwd[j] = UINT64_MAX;
        remat_trainer_time_kernels(tr, t->fwd, t->bwd);
        ck_assert_int_eq(remat_trainer_synthetic_batch(tr, 1, st.step, &b, &err), REMAT_OK);
        remat_step_result r;
        ck_assert_msg(remat_train_step(tr, &s, &st, &b, &r, &err) == REMAT_OK, "%s", err.msg);
        for (uint32_t j = 0; j < t->g->n_ops; j++) {
            ck_assert_msg(t->fwd[j] > 0 && t->fwd[j] < UINT64_MAX, "op %s: forward %llu ns", t->g->ops[j].id,
                          (unsigned long long)t->fwd[j]);
            int has_bwd = t->a->bwd_step[j] != REMAT_NONE;
            ck_assert_msg(has_bwd ? t->bwd[j] > 0 && t->bwd[j] < UINT64_MAX : t->bwd[j] == 0,
                          "op %s: backward %llu ns", t->g->ops[j].id, (unsigned long long)t->bwd[j]);
        }
    }
    /* Timing off: the arrays are left alone. */
    remat_trainer_time_kernels(tr, NULL, NULL);
    uint64_t keep = t->fwd[0];
    ck_assert_int_eq(remat_trainer_synthetic_batch(tr, 1, st.step, &b, &err), REMAT_OK);
    remat_step_result r;
    ck_assert_int_eq(remat_train_step(tr, &s, &st, &b, &r, &err), REMAT_OK);
    ck_assert_uint_eq(t->fwd[0], keep);
    remat_schedule_destroy(&s);
    remat_batch_destroy(&b);
    remat_model_state_destroy(&st);
    remat_trainer_destroy(tr);
}

static void timed_destroy(timed *t)
{
    free(t->fwd);
    free(t->bwd);
    remat_analysis_destroy(t->a);
    remat_graph_destroy(t->g);
}

START_TEST(durations_should_time_every_kernel_and_load_back)
{
    timed t = {0};
    time_steps(&t);
    char *text = NULL, *out = NULL;
    size_t len = 0, out_len = 0;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat__read_file(MLP, &text, &len, &err), REMAT_OK);
    ck_assert_int_eq(remat_import_set_durations(text, len, MLP, t.g, t.fwd, t.bwd, "test", &out, &out_len, &err),
                     REMAT_OK);
    remat_graph *g = t_load(out);
    ck_assert_uint_eq(g->n_ops, t.g->n_ops);
    remat_analysis *a = NULL;
    ck_assert_int_eq(remat_analyze(g, &a, &err), REMAT_OK);
    for (uint32_t k = 0; k < g->n_ops; k++) {
        double f = 0, b = 0;
        bool ff = false, fb = false;
        ck_assert_int_eq(remat_op_attr_number(g, k, "duration_ns", &f, &ff, &err), REMAT_OK);
        ck_assert_int_eq(remat_op_attr_number(g, k, "bwd_duration_ns", &b, &fb, &err), REMAT_OK);
        ck_assert(ff && f > 0 && (uint64_t)f == t.fwd[k]);
        ck_assert_int_eq(fb, a->bwd_step[k] != REMAT_NONE);
        if (fb)
            ck_assert(b > 0 && (uint64_t)b == t.bwd[k]);
    }
    ck_assert_ptr_nonnull(strstr(g->meta_json, "\"durations\":\"test\""));
    /* The step-time model now reads every op's time from the file. */
    remat_device d;
    ck_assert_int_eq(remat_device_preset("a100-sxm-80gb", &d, &err), REMAT_OK);
    remat_op_times ot;
    ck_assert_int_eq(remat_op_times_init(a, &d, &ot, &err), REMAT_OK);
    ck_assert_uint_eq(ot.n_fwd_measured, g->n_ops);
    ck_assert_uint_eq(ot.n_bwd_measured, a->n_bwd);
    for (uint32_t k = 0; k < g->n_ops; k++)
        ck_assert(ot.fwd[k] == (double)t.fwd[k] * 1e-9);
    remat_op_times_destroy(&ot);
    /* Written again with no backward figures, the old ones are removed. */
    char *again = NULL;
    memset(t.bwd, 0, g->n_ops * sizeof *t.bwd);
    ck_assert_int_eq(remat_import_set_durations(out, out_len, "again", g, t.fwd, t.bwd, "x", &again, NULL, &err),
                     REMAT_OK);
    ck_assert_ptr_null(strstr(again, "bwd_duration_ns"));
    remat_free(again);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    remat_free(out);
    remat__free(text);
    timed_destroy(&t);
}
END_TEST

START_TEST(durations_should_refuse_a_file_that_is_not_the_graph)
{
    timed t = {0};
    time_steps(&t);
    char *text = NULL, *out = (char *)"x";
    size_t len = 0;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat__read_file("graphs/mlp2.json", &text, &len, &err), REMAT_OK);
    ck_assert_int_eq(remat_import_set_durations(text, len, "mlp2.json", t.g, t.fwd, t.bwd, "x", &out, NULL, &err),
                     REMAT_EINVAL);
    ck_assert_ptr_null(out);
    ck_assert_ptr_nonnull(strstr(err.msg, "mlp2.json: ops[2] is not the graph's op 'h2'"));
    remat__free(text);
    remat_err_init(&err);
    ck_assert_int_eq(remat_import_set_durations("{\"ops\": [", 9, "cut.json", t.g, t.fwd, t.bwd, "x", &out, NULL,
                                                &err),
                     REMAT_EPARSE);
    ck_assert_ptr_nonnull(strstr(err.msg, "cut.json:1:"));
    timed_destroy(&t);
}
END_TEST

Suite *durations_suite(void)
{
    Suite *s = suite_create("durations");
    TCase *tc = tcase_create("record");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, durations_should_time_every_kernel_and_load_back);
    tcase_add_test(tc, durations_should_refuse_a_file_that_is_not_the_graph);
    suite_add_tcase(s, tc);
    return s;
}

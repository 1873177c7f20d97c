/*
 * cmd_step.c - `remat step GRAPH [PLAN] --optimizer NAME [--lr X] [--steps K]
 * (--data FILE | --seed S) [--state STATE] [-o STATE]`: real training steps.
 *
 * Each step executes the plan's schedule (store-all without PLAN) with real
 * kernels and the optimizer update (remat_train_step), and prints its loss.
 * Beside the plan, the same steps run under the store-all schedule on a
 * copy of the state: that gives the wall time without recomputation, and a
 * check that both runs hold the same parameters and optimizer state, bit
 * for bit, after every step. The summary puts the trainer's measured peak
 * of live bytes next to the replay's accounted one (with the ledger's
 * optimizer state), which must be equal.
 *
 * Exit codes: 0 trained and verified; 1 the plan was not proved (an invalid
 * schedule, a recomputation or peak that differs, a store-all run that
 * ends elsewhere); 2 usage; 3 a graph that cannot be executed, a bad plan,
 * state or data file; 5 out of memory or a write failure.
 */
#include "cli.h"
#include "remat/import.h"
#include "remat/train.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_OPTIMIZER = 256, OPT_LR, OPT_MOMENTUM, OPT_BETAS, OPT_EPS, OPT_WD, OPT_STEPS, OPT_DATA, OPT_SEED, OPT_STATE,
       OPT_EVERY, OPT_DURATIONS };

typedef struct {
    const char *optimizer, *lr, *momentum, *betas, *eps, *wd;
    const char *data, *state, *out;
    const char *durations; /* --record-durations OUT */
    uint64_t steps, seed, every;
    int has_seed;
} step_args;

static int parse_u64(const char *opt, const char *s, uint64_t *out, int allow_zero)
{
    return remat_cli_parse_count("step", opt, s, allow_zero ? 0 : 1, UINT64_MAX, out);
}

static int parse_real(const char *opt, const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (!*s || *end || !isfinite(v) || v < 0)
        return remat_cli_usage_error("step", "%s: '%s' is not a non-negative number", opt, s);
    *out = v;
    return REMAT_EXIT_OK;
}

/* Applies the command line's hyperparameters over o (the optimizer's
 * defaults, or a resumed state's values). */
static int apply_hyper(const step_args *A, remat_optim *o)
{
    int rc = REMAT_EXIT_OK;
    if (A->lr && (rc = parse_real("--lr", A->lr, &o->lr)) != REMAT_EXIT_OK)
        return rc;
    if (A->momentum && (rc = parse_real("--momentum", A->momentum, &o->momentum)) != REMAT_EXIT_OK)
        return rc;
    if (A->eps && (rc = parse_real("--eps", A->eps, &o->eps)) != REMAT_EXIT_OK)
        return rc;
    if (A->wd && (rc = parse_real("--weight-decay", A->wd, &o->weight_decay)) != REMAT_EXIT_OK)
        return rc;
    if (A->betas) {
        char *end;
        double b1 = strtod(A->betas, &end), b2 = -1;
        if (*end == ',')
            b2 = strtod(end + 1, &end);
        if (*end || !(b1 >= 0 && b1 < 1) || !(b2 >= 0 && b2 < 1))
            return remat_cli_usage_error("step", "--betas: '%s' is not two numbers in [0, 1) like 0.9,0.999",
                                         A->betas);
        o->beta1 = b1;
        o->beta2 = b2;
    }
    if (o->kind == REMAT_LEDGER_MOMENTUM && o->momentum >= 1)
        return remat_cli_usage_error("step", "--momentum: must be below 1");
    return REMAT_EXIT_OK;
}

static const char *fmt_time(double s, char *buf, size_t cap)
{
    if (s < 1e-3)
        snprintf(buf, cap, "%.1f us", s * 1e6);
    else if (s < 1)
        snprintf(buf, cap, "%.3f ms", s * 1e3);
    else
        snprintf(buf, cap, "%.3f s", s);
    return buf;
}

static const char *fmt_shape_of(const remat_tensor *T, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (uint32_t d = 0; d < T->ndim && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%llu", d ? ", " : "", (unsigned long long)T->shape[d]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
    return buf;
}

static void print_optimizer(FILE *H, const remat_optim *o)
{
    fprintf(H, "optimizer %s: lr %.6g", remat_ledger_optimizer_name(o->kind), o->lr);
    if (o->kind == REMAT_LEDGER_MOMENTUM)
        fprintf(H, ", momentum %.6g", o->momentum);
    if (o->kind == REMAT_LEDGER_ADAM || o->kind == REMAT_LEDGER_ADAMW)
        fprintf(H, ", betas %.6g %.6g, eps %.6g", o->beta1, o->beta2, o->eps);
    fprintf(H, ", weight decay %.6g%s\n", o->weight_decay, o->kind == REMAT_LEDGER_ADAMW ? " (decoupled)" : "");
}

typedef struct {
    const remat_graph *g;
    const remat_analysis *a;
    remat_trainer *tr;
    remat_plan plan;
    remat_schedule store_all;
    int has_plan;
    remat_model_state st, st_ref;
    remat_dataset data;
    int has_data;
    remat_batch batch;
    FILE *H;         /* human lines: stdout, or stderr when the state goes to stdout */
    uint64_t *dur_fwd, *dur_bwd; /* --record-durations: steps x ops kernel times, in ns */
    const char *src; /* the schedule's file: the plan, or the graph for store-all */
} session;

/* Fills the batch of the state's current step. */
static remat_status next_batch(session *S, const step_args *A, remat_err *err)
{
    if (S->has_data) {
        remat_batch_from_dataset(S->tr, &S->data, S->st.step, &S->batch);
        return REMAT_OK;
    }
    return remat_trainer_synthetic_batch(S->tr, A->seed, S->st.step, &S->batch, err);
}

/* A failed step: the schedule was not valid or not proved (exit 1), or the
 * data was bad (exit 3), or memory ran out. */
static int step_failed(const session *S, remat_status st, const remat_err *err)
{
    if (st == REMAT_ESCHEDULE || st == REMAT_EOVERFLOW) /* about the schedule's file */
        remat_cli_fail_in(S->src, err);
    else
        remat_cli_fail(err);
    return st == REMAT_ESCHEDULE || st == REMAT_EINTERNAL ? REMAT_EXIT_FAIL : remat_cli_exit_for(st);
}

/* The first parameter or optimizer state element that is not finite, as
 * "parameter 'w1'" or "exp_avg of parameter 'w1'" in where; 0 when all are.
 * A non-finite gradient shows here too: the update carries it into its
 * parameter (SGD, momentum) or its moments (Adam). O(param elements). */
static int first_nonfinite(const session *S, char *where, size_t cap)
{
    const remat_graph *g = S->g;
    const remat_model_state *st = &S->st;
    const uint32_t esz = remat_elem_size(st->dtype);
    for (uint32_t t = 0; t < st->n_tensors && esz; t++) {
        for (uint32_t k = 0; k < 3; k++) {
            const uint8_t *p = k == 0 ? st->value[t] : st->state[k - 1] ? st->state[k - 1][t] : NULL;
            if (!p)
                continue;
            uint64_t n = g->tensors[t].bytes / esz;
            for (uint64_t i = 0; i < n; i++) {
                double v;
                if (st->dtype == REMAT_ELEM_F64) {
                    memcpy(&v, p + i * 8, 8);
                } else {
                    float f;
                    memcpy(&f, p + i * 4, 4);
                    v = f;
                }
                if (!isfinite(v)) {
                    snprintf(where, cap, "%s%sparameter '%s' (element %llu is %g)",
                             k ? remat_optim_state_name(st->optim.kind, k - 1) : "", k ? " of " : "", g->tensors[t].id,
                             (unsigned long long)i, v);
                    return 1;
                }
            }
        }
    }
    return 0;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The median of n times (sorts them). */
static double median(double *t, uint64_t n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

static int train_loop(session *S, const step_args *A, double *t_plan, double *t_ref)
{
    remat_err err;
    remat_err_init(&err);
    const remat_graph *g = S->g;
    char b1[64], b2[64];
    remat_step_result r, rr, first;
    memset(&first, 0, sizeof first);
    memset(&rr, 0, sizeof rr);
    uint64_t checked = 0;
    if (A->every)
        fprintf(S->H, " step  loss                     %-12s%s\n", S->has_plan ? "plan" : "store-all",
               S->has_plan ? "store-all" : "");
    for (uint64_t k = 0; k < A->steps; k++) {
        remat_status st = next_batch(S, A, &err);
        /* Only the run under the plan (store-all without one) is timed; its
         * FWD and BWD kernels are those of every schedule. */
        if (S->dur_fwd)
            remat_trainer_time_kernels(S->tr, S->dur_fwd + k * g->n_ops, S->dur_bwd + k * g->n_ops);
        if (st == REMAT_OK)
            st = remat_train_step(S->tr, S->has_plan ? &S->plan.schedule : &S->store_all, &S->st, &S->batch, &r,
                                  &err);
        if (st != REMAT_OK)
            return step_failed(S, st, &err);
        /* A diverged run stops here, before any state is written: a NaN
         * state file would be resumed from and trained on silently. */
        char bad[256];
        if (!isfinite(r.loss)) {
            fprintf(stderr, "remat: step %llu: the loss is %g (not finite); no state written (lower --lr?)\n",
                    (unsigned long long)r.step, r.loss);
            return REMAT_EXIT_FAIL;
        }
        if (first_nonfinite(S, bad, sizeof bad)) {
            remat_cli_errorf("step %llu: after the update, %s is not finite; no state written (lower --lr?)",
                             (unsigned long long)r.step, bad);
            return REMAT_EXIT_FAIL;
        }
        t_plan[k] = r.wall_seconds;
        checked += r.recomputed_tensors_checked;
        if (k == 0)
            first = r;
        remat_trainer_time_kernels(S->tr, NULL, NULL);
        if (S->has_plan) {
            /* The same step without recomputation, on the copy. */
            if ((st = remat_train_step(S->tr, &S->store_all, &S->st_ref, &S->batch, &rr, &err)) != REMAT_OK)
                return step_failed(S, st, &err);
            t_ref[k] = rr.wall_seconds;
            char where[160];
            if (!remat_model_state_equal(&S->st, &S->st_ref, g, where, sizeof where)) {
                remat_cli_errorf("step %llu: the plan's state differs from store-all's at %s (are the plan's backward "
                                 "steps in another order? gradient sums are then rounded differently)",
                                 (unsigned long long)r.step, where);
                return REMAT_EXIT_FAIL;
            }
        }
        if (A->every && (k % A->every == 0 || k + 1 == A->steps))
            fprintf(S->H, "%5llu  %-23.17g  %-12s%s\n", (unsigned long long)r.step, r.loss,
                   fmt_time(r.wall_seconds, b1, sizeof b1), S->has_plan ? fmt_time(rr.wall_seconds, b2, sizeof b2) : "");
    }
    fprintf(S->H, "peak       measured %llu B by the trainer's allocator, accounted %llu B (remat replay %llu B + %llu B of "
           "%s optimizer state from the ledger): %s\n",
           (unsigned long long)first.measured_peak_bytes, (unsigned long long)first.accounted_peak_bytes,
           (unsigned long long)first.replay_peak_bytes, (unsigned long long)first.optimizer_state_bytes,
           remat_ledger_optimizer_name(S->st.optim.kind), first.equal ? "equal" : "DIFFERENT");
    if (checked == 0)
        fprintf(S->H, "recompute  none: the schedule rebuilds no tensor\n");
    else
        fprintf(S->H, "recompute  %llu tensor%s rebuilt per step (%llu in all), each bit-identical to its first "
               "computation\n",
               (unsigned long long)first.recomputed_tensors_checked, first.recomputed_tensors_checked == 1 ? "" : "s",
               (unsigned long long)checked);
    if (S->has_plan)
        fprintf(S->H, "store-all  parameters and optimizer state bit-identical to the plan's after every step\n");
    return REMAT_EXIT_OK;
}

static int train(session *S, const step_args *A)
{
    char b1[64], b2[64];
    double *t_plan = remat__array((size_t)A->steps, sizeof *t_plan), *t_ref = remat__array((size_t)A->steps, sizeof *t_ref);
    if (!t_plan || !t_ref) {
        remat__free(t_plan);
        remat__free(t_ref);
        fprintf(stderr, "remat: out of memory for %llu step times\n", (unsigned long long)A->steps);
        return REMAT_EXIT_INTERNAL;
    }
    int rc = train_loop(S, A, t_plan, t_ref);
    if (rc == REMAT_EXIT_OK) {
        /* The median: a step is tens of microseconds, and one preempted
         * step would move a mean. */
        double mp = median(t_plan, A->steps);
        if (S->has_plan) {
            double mr = median(t_ref, A->steps);
            fprintf(S->H, "time       median per step over %llu: plan %s, store-all %s (recomputation %+.1f%%)\n",
                   (unsigned long long)A->steps, fmt_time(mp, b1, sizeof b1), fmt_time(mr, b2, sizeof b2),
                   mr > 0 ? 100.0 * (mp - mr) / mr : 0.0);
        } else {
            fprintf(S->H, "time       median per step over %llu: %s (store-all: no recomputation)\n",
                   (unsigned long long)A->steps, fmt_time(mp, b1, sizeof b1));
        }
    }
    remat__free(t_plan);
    remat__free(t_ref);
    return rc;
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* Per op, the median over the steps of its kernel's time (a preempted step
 * would move a mean), at least 1 ns where the step runs (so a recorded op
 * is never mistaken for a free one); 0 for a backward the op does not have.
 * Column j of the steps x ops matrix m is sorted in place. */
static void medians(const session *S, uint64_t steps, uint64_t *m, int bwd, uint64_t *out)
{
    const uint32_t n = S->g->n_ops;
    uint64_t *col = remat__array((size_t)steps, sizeof *col);
    for (uint32_t j = 0; col && j < n; j++) {
        if (bwd && S->a->bwd_step[j] == REMAT_NONE) {
            out[j] = 0;
            continue;
        }
        for (uint64_t k = 0; k < steps; k++)
            col[k] = m[k * n + j];
        qsort(col, (size_t)steps, sizeof *col, cmp_u64);
        uint64_t med = steps % 2 ? col[steps / 2] : col[steps / 2 - 1] / 2 + col[steps / 2] / 2;
        out[j] = med ? med : 1;
    }
    remat__free(col);
}

/* --record-durations OUT: the graph file with each op's median kernel
 * times as attrs.duration_ns and bwd_duration_ns, loaded and analyzed
 * before it is written (as `remat import` does), so OUT is whole or absent. */
static int write_durations(session *S, const step_args *A, const char *graph_path)
{
    const uint32_t n = S->g->n_ops;
    uint64_t *fwd = remat__array(n ? n : 1, sizeof *fwd), *bwd = remat__array(n ? n : 1, sizeof *bwd);
    char *text = NULL, *json = NULL;
    size_t len = 0, jlen = 0;
    remat_err err;
    remat_err_init(&err);
    int rc = REMAT_EXIT_OK;
    if (!fwd || !bwd) {
        remat_err_set(&err, REMAT_ENOMEM, "out of memory for the durations");
        rc = remat_cli_fail(&err);
    }
    if (rc == REMAT_EXIT_OK) {
        medians(S, A->steps, S->dur_fwd, 0, fwd);
        medians(S, A->steps, S->dur_bwd, 1, bwd);
    }
    char note[200];
    snprintf(note, sizeof note, "remat step: median of %llu steps' kernel times on this machine (1 thread)",
             (unsigned long long)A->steps);
    if (rc == REMAT_EXIT_OK && (remat__read_file(graph_path, &text, &len, &err) != REMAT_OK ||
                                remat_import_set_durations(text, len, graph_path, S->g, fwd, bwd, note, &json, &jlen,
                                                           &err) != REMAT_OK))
        rc = remat_cli_fail(&err);
    remat_graph *g2 = NULL;
    remat_analysis *a2 = NULL;
    if (rc == REMAT_EXIT_OK && (remat_graph_load_json(json, jlen, A->durations, &g2, &err) != REMAT_OK ||
                                remat_analyze(g2, &a2, &err) != REMAT_OK))
        rc = remat_cli_fail(&err);
    if (rc == REMAT_EXIT_OK)
        rc = remat_cli_write(A->durations, json, jlen);
    if (rc == REMAT_EXIT_OK) {
        uint64_t sf = 0, sb = 0;
        for (uint32_t j = 0; j < n; j++)
            sf += fwd[j], sb += bwd[j];
        fprintf(S->H, "durations  %u ops, median of %llu steps: forward %.3f ms, backward %.3f ms in kernels; "
                      "written to %s\n",
                n, (unsigned long long)A->steps, (double)sf / 1e6, (double)sb / 1e6, A->durations);
    }
    remat_analysis_destroy(a2);
    remat_graph_destroy(g2);
    remat__free(fwd);
    remat__free(bwd);
    remat__free(text);
    remat_free(json);
    return rc;
}

static int run_session(session *S, const step_args *A, const char *graph_path, const char *plan_path)
{
    remat_err err;
    remat_err_init(&err);
    remat_graph *g;
    remat_analysis *a;
    int rc = remat_cli_open_graph(graph_path, &g, &a);
    if (rc != REMAT_EXIT_OK)
        return rc;
    S->g = g;
    S->a = a;
    S->H = remat_cli_human(A->out);
    S->src = plan_path ? plan_path : graph_path;
    remat_status st = remat_trainer_create(a, &S->tr, &err);
    if (st != REMAT_OK) {
        return remat_cli_fail_in(graph_path, &err);
    }
    if (plan_path) {
        S->has_plan = 1;
        if ((st = remat_plan_load_file(g, plan_path, &S->plan, &err)) != REMAT_OK)
            return remat_cli_fail(&err);
    }
    if ((st = remat_schedule_store_all(a, &S->store_all, &err)) != REMAT_OK)
        return remat_cli_fail(&err);
    /* The state: resumed, or fresh from the seed. */
    remat_ledger_optimizer kind = REMAT_LEDGER_ADAM;
    if (A->optimizer && remat_ledger_optimizer_parse(A->optimizer, "--optimizer", &kind, &err) != REMAT_OK)
        return remat_cli_usage_error("step", "%s", err.msg);
    if (A->state) {
        if ((st = remat_model_state_load_file(g, A->state, &S->st, &err)) != REMAT_OK)
            return remat_cli_fail(&err);
        if (A->optimizer && kind != S->st.optim.kind)
            return remat_cli_usage_error("step",
                                         "--optimizer %s: the state holds %s state (resume with --optimizer %s, or "
                                         "start afresh without --state)",
                                         remat_ledger_optimizer_name(kind), remat_ledger_optimizer_name(S->st.optim.kind),
                                         remat_ledger_optimizer_name(S->st.optim.kind));
        if ((rc = apply_hyper(A, &S->st.optim)) != REMAT_EXIT_OK)
            return rc;
    } else {
        remat_optim o;
        if ((st = remat_optim_init(&o, kind, &err)) != REMAT_OK)
            return remat_cli_usage_error("step", "%s", err.msg);
        if ((rc = apply_hyper(A, &o)) != REMAT_EXIT_OK)
            return rc;
        if ((st = remat_trainer_init_state(S->tr, &o, A->has_seed ? A->seed : 0, &S->st, &err)) != REMAT_OK)
            return remat_cli_fail(&err);
    }
    if ((st = remat_trainer_check_state(S->tr, &S->st, &err)) != REMAT_OK) {
        return remat_cli_fail_in(A->state ? A->state : graph_path, &err);
    }
    if (A->data) {
        if ((st = remat_dataset_load_file(g, A->data, &S->data, &err)) != REMAT_OK)
            return remat_cli_fail(&err);
        S->has_data = 1;
    }
    if ((st = remat_batch_alloc(S->tr, &S->batch, &err)) != REMAT_OK ||
        (S->has_plan && (st = remat_model_state_copy(&S->st_ref, &S->st, g, &err)) != REMAT_OK))
        return remat_cli_fail(&err);

    /* What is about to run. */
    char b1[96], b2[96];
    fprintf(S->H, "graph      %s: %llu %s parameters (%llu trainable), %u ops, starting at step %llu%s\n", g->name,
           (unsigned long long)remat_trainer_param_elements(S->tr, false), remat_elem_name(remat_trainer_dtype(S->tr)),
           (unsigned long long)remat_trainer_param_elements(S->tr, true), g->n_ops, (unsigned long long)S->st.step,
           A->state ? " (resumed)" : "");
    fprintf(S->H, "           ");
    print_optimizer(S->H, &S->st.optim);
    if (S->has_data) {
        fprintf(S->H, "data       %s: %u batch%s, batch k = step k mod %u\n", A->data, S->data.n_batches,
               S->data.n_batches == 1 ? "" : "es", S->data.n_batches);
    } else {
        remat_task task = remat_trainer_task(S->tr);
        uint32_t x = remat_trainer_features(S->tr), y = remat_trainer_target(S->tr);
        if (task == REMAT_TASK_INPUTS)
            fprintf(S->H, "data       synthetic (seed %llu): every input uniform in [-1, 1)\n", (unsigned long long)A->seed);
        else
            fprintf(S->H, "data       synthetic %s (seed %llu): %s %s -> %s %s, a fresh batch per step\n",
                   remat_task_name(task), (unsigned long long)A->seed, g->tensors[x].id,
                   fmt_shape_of(&g->tensors[x], b1, sizeof b1), g->tensors[y].id,
                   fmt_shape_of(&g->tensors[y], b2, sizeof b2));
    }
    if (S->has_plan)
        fprintf(S->H, "plan       %s (%s): %zu instructions; store-all: %zu\n", plan_path, S->plan.strategy,
               S->plan.schedule.n, S->store_all.n);
    if (A->durations) {
        S->dur_fwd = remat__array((size_t)(A->steps * g->n_ops), sizeof *S->dur_fwd);
        S->dur_bwd = remat__array((size_t)(A->steps * g->n_ops), sizeof *S->dur_bwd);
        if (!S->dur_fwd || !S->dur_bwd) {
            remat_err_set(&err, REMAT_ENOMEM, "out of memory for %llu steps of kernel times",
                          (unsigned long long)A->steps);
            return remat_cli_fail(&err);
        }
    }
    rc = train(S, A);
    if (rc == REMAT_EXIT_OK && A->durations)
        rc = write_durations(S, A, graph_path);
    if (rc == REMAT_EXIT_OK && A->out) {
        size_t len;
        char *text = remat_model_state_format(g, &S->st, &len, &err);
        rc = text ? remat_cli_write(A->out, text, len) : remat_cli_fail(&err);
        remat_free(text);
        if (rc == REMAT_EXIT_OK && strcmp(A->out, "-") != 0)
            fprintf(S->H, "state      step %llu written to %s\n", (unsigned long long)S->st.step, A->out);
    }
    return rc;
}

int cmd_step(int argc, char **argv)
{
    static const struct option opts[] = {
        {"optimizer", required_argument, NULL, OPT_OPTIMIZER},
        {"lr", required_argument, NULL, OPT_LR},
        {"momentum", required_argument, NULL, OPT_MOMENTUM},
        {"betas", required_argument, NULL, OPT_BETAS},
        {"eps", required_argument, NULL, OPT_EPS},
        {"weight-decay", required_argument, NULL, OPT_WD},
        {"steps", required_argument, NULL, OPT_STEPS},
        {"data", required_argument, NULL, OPT_DATA},
        {"seed", required_argument, NULL, OPT_SEED},
        {"state", required_argument, NULL, OPT_STATE},
        {"every", required_argument, NULL, OPT_EVERY},
        {"record-durations", required_argument, NULL, OPT_DURATIONS},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    step_args A;
    memset(&A, 0, sizeof A);
    A.steps = 1;
    A.every = 1;
    int c, rc;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (c) {
        case OPT_OPTIMIZER: A.optimizer = optarg; break;
        case OPT_LR: A.lr = optarg; break;
        case OPT_MOMENTUM: A.momentum = optarg; break;
        case OPT_BETAS: A.betas = optarg; break;
        case OPT_EPS: A.eps = optarg; break;
        case OPT_WD: A.wd = optarg; break;
        case OPT_DATA: A.data = optarg; break;
        case OPT_STATE: A.state = optarg; break;
        case OPT_DURATIONS: A.durations = optarg; break;
        case 'o': A.out = optarg; break;
        case OPT_STEPS:
            if ((rc = parse_u64("--steps", optarg, &A.steps, 0)) != REMAT_EXIT_OK)
                return rc;
            break;
        case OPT_EVERY:
            if ((rc = parse_u64("--every", optarg, &A.every, 1)) != REMAT_EXIT_OK)
                return rc;
            break;
        case OPT_SEED:
            if ((rc = parse_u64("--seed", optarg, &A.seed, 1)) != REMAT_EXIT_OK)
                return rc;
            A.has_seed = 1;
            break;
        case 'h':
            remat_cli_print_usage(stdout, "step");
            printf("\n--optimizer is required unless --state resumes a run (its optimizer and hyperparameters are\n"
                   "then the state's; options given override them). --seed S generates the synthetic task\n"
                   "(graphs/README.md, \"Synthetic data\") and initializes fresh parameters; with --data FILE\n"
                   "the batches come from the file and --seed only initializes (default 0). --every N prints\n"
                   "every Nth step's loss (0: none). Options: --momentum X, --betas B1,B2, --eps X,\n"
                   "--weight-decay X. The state file format is in graphs/README.md (\"State files\").\n"
                   "--record-durations OUT writes the graph with each op's kernel times, the median over the\n"
                   "steps, as attrs.duration_ns and bwd_duration_ns (graphs/README.md, \"Measured durations\"),\n"
                   "for --device step times without PyTorch.\n");
            return REMAT_EXIT_OK;
        default: return remat_cli_usage_error("step", "bad option");
        }
    }
    if (optind != argc - 1 && optind != argc - 2)
        return remat_cli_usage_error("step", "expected GRAPH [PLAN]");
    if (!A.optimizer && !A.state)
        return remat_cli_usage_error("step", "give --optimizer sgd|momentum|adam|adamw (or --state to resume)");
    if (!A.data && !A.has_seed)
        return remat_cli_usage_error("step", "give --seed S (synthetic data) or --data FILE");
    session S;
    memset(&S, 0, sizeof S);
    remat_plan_init(&S.plan);
    remat_schedule_init(&S.store_all);
    remat_model_state_init(&S.st);
    remat_model_state_init(&S.st_ref);
    remat_dataset_init(&S.data);
    rc = run_session(&S, &A, argv[optind], optind == argc - 2 ? argv[optind + 1] : NULL);
    remat__free(S.dur_fwd);
    remat__free(S.dur_bwd);
    remat_batch_destroy(&S.batch);
    remat_dataset_destroy(&S.data);
    remat_model_state_destroy(&S.st_ref);
    remat_model_state_destroy(&S.st);
    remat_schedule_destroy(&S.store_all);
    remat_plan_destroy(&S.plan);
    remat_trainer_destroy(S.tr);
    remat_analysis_destroy((remat_analysis *)S.a);
    remat_graph_destroy((remat_graph *)S.g);
    return rc;
}

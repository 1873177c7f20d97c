/*
 * check_oom.c - out of memory anywhere: for every N from 1 to the number of
 * allocations a whole job makes, allocation N fails (remat__alloc_fail_at)
 * while a bundled graph is loaded, analyzed, planned with sqrt(n) and
 * Revolve (remat_plan_make, which replays every candidate), replayed,
 * reported and traced. Each run must either succeed with the same figures as
 * a run without failures or fail with REMAT_ENOMEM and a message saying
 * "out of memory"; never crash, and never leak (the suite runs under
 * LeakSanitizer in `make sanitize` and under valgrind in `make valgrind`,
 * which is where a leak on one of these paths shows).
 */
#include "test_util.h"
#include "util/util_internal.h"

#include <stdio.h>
#include <stdlib.h>

/* The figures a job produces, to compare a run that survived a failed
 * allocation (a caller may fall back) with the undisturbed run. */
typedef struct {
    uint64_t peak[2], extra[2];
    uint64_t store_all_peak;
    size_t doc_bytes; /* the length of every document written, summed */
} job_figures;

static const char *const STRATEGIES[2] = {"sqrtn", "revolve"};

/* Frees doc (counting its length) and returns the status: a document
 * writer returns NULL with err set when it fails. */
static remat_status take_doc(char *doc, size_t len, job_figures *f, const remat_err *err)
{
    if (!doc)
        return err->code != REMAT_OK ? err->code : REMAT_EINTERNAL;
    f->doc_bytes += len;
    remat_free(doc);
    return REMAT_OK;
}

/* The trace of a schedule, with every writer. */
static remat_status trace_all(const remat_analysis *a, const remat_schedule *s, job_figures *f, remat_err *err)
{
    remat_trace *t = NULL;
    remat_status st = remat_trace_build(a, s, NULL, &t, err);
    if (st != REMAT_OK)
        return st;
    remat_trace_options o;
    remat_trace_options_init(&o);
    o.label = "oom";
    size_t len = 0;
    if ((st = take_doc(remat_trace_json(t, &o, &len, err), len, f, err)) == REMAT_OK &&
        (st = take_doc(remat_trace_chrome(t, &o, &len, err), len, f, err)) == REMAT_OK &&
        (st = take_doc(remat_trace_csv(t, &o, &len, err), len, f, err)) == REMAT_OK &&
        (st = take_doc(remat_trace_svg(t, &o, &len, err), len, f, err)) == REMAT_OK)
        st = take_doc(remat_trace_audit(t, &o, REMAT_REPORT_TEXT, &len, err), len, f, err);
    remat_trace_destroy(t);
    return st;
}

/* The whole job on a graph's JSON text. */
static remat_status job(const char *text, size_t len, uint64_t budget, job_figures *f, remat_err *err)
{
    memset(f, 0, sizeof *f);
    remat_graph *g = NULL;
    remat_analysis *a = NULL;
    remat_status st = remat_graph_load_json(text, len, "oom.json", &g, err);
    if (st == REMAT_OK)
        st = remat_analyze(g, &a, err);
    size_t n = 0;
    if (st == REMAT_OK)
        st = take_doc(remat_report_lifetimes(a, REMAT_REPORT_JSON, &n, err), n, f, err);
    /* Store-all, replayed and reported. */
    if (st == REMAT_OK) {
        remat_schedule s;
        remat_schedule_init(&s);
        remat_replay_result r;
        memset(&r, 0, sizeof r);
        st = remat_schedule_store_all(a, &s, err);
        if (st == REMAT_OK && (st = remat_replay(a, &s, NULL, NULL, &r, err)) == REMAT_OK) {
            ck_assert_msg(r.valid, "store-all invalid: %s", err->msg);
            f->store_all_peak = r.peak_bytes;
            st = take_doc(remat_report_replay(a, &s, &r, NULL, REMAT_REPORT_TEXT, &n, err), n, f, err);
            remat_replay_result_destroy(&r);
        }
        remat_schedule_destroy(&s);
    }
    /* Two planners, each plan reported, written as a plan file, read back,
     * and traced. */
    for (int i = 0; i < 2 && st == REMAT_OK; i++) {
        remat_plan_options o;
        remat_plan_options_init(&o);
        o.strategy = STRATEGIES[i];
        o.budget_kind = REMAT_BUDGET_TOTAL;
        o.budget = budget;
        remat_plan p;
        remat_replay_result r;
        st = remat_plan_make(a, &o, &p, &r, err);
        if (st == REMAT_OK) {
            f->peak[i] = r.peak_bytes;
            f->extra[i] = r.flops_recompute;
            char *doc = remat_report_plan(a, &p, &r, &n, err);
            if (!doc) {
                st = err->code;
            } else {
                remat_plan q;
                st = remat_plan_load_json(g, doc, n, "oom.plan", &q, err);
                if (st == REMAT_OK)
                    ck_assert_uint_eq(q.schedule.n, p.schedule.n);
                remat_plan_destroy(&q);
                st = st == REMAT_OK ? take_doc(doc, n, f, err) : (remat_free(doc), st);
            }
            if (st == REMAT_OK)
                st = take_doc(remat_report_replay(a, &p.schedule, &r, NULL, REMAT_REPORT_JSON, &n, err), n, f, err);
            if (st == REMAT_OK)
                st = trace_all(a, &p.schedule, f, err);
        }
        remat_replay_result_destroy(&r);
        remat_plan_destroy(&p);
    }
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    return st;
}

static char *read_graph(const char *name, size_t *len)
{
    char rel[64], path[256];
    snprintf(rel, sizeof rel, "../../graphs/%s.json", name);
    t_fixture(rel, path, sizeof path);
    char *text;
    remat_err err;
    remat_err_init(&err);
    ck_assert_msg(remat__read_file(path, &text, len, &err) == REMAT_OK, "%s", err.msg);
    return text;
}

/* Sweeps every allocation of the job on one graph. */
static void sweep(const char *name, uint64_t budget)
{
    size_t len;
    char *text = read_graph(name, &len);
    job_figures clean, got;
    remat_err err;
    remat_err_init(&err);
    remat__alloc_fail_at(0);
    remat_status st = job(text, len, budget, &clean, &err);
    uint64_t total = remat__alloc_fail_at(0);
    ck_assert_msg(st == REMAT_OK, "%s without failures: %s", name, err.msg);
    ck_assert_uint_gt(total, 100);
    uint64_t nomem = 0, survived = 0;
    for (uint64_t n = 1; n <= total; n++) {
        remat_err_init(&err);
        remat__alloc_fail_at(n);
        st = job(text, len, budget, &got, &err);
        uint64_t made = remat__alloc_fail_at(0);
        if (st == REMAT_ENOMEM) {
            ck_assert_msg(strstr(err.msg, "out of memory") != NULL, "%s, allocation %llu: message '%s'", name,
                          (unsigned long long)n, err.msg);
            nomem++;
            continue;
        }
        ck_assert_msg(st == REMAT_OK, "%s, allocation %llu of %llu: %s: %s", name, (unsigned long long)n,
                      (unsigned long long)total, remat_status_str(st), err.msg);
        /* A job that went on after a failed allocation must still give the
         * undisturbed figures. */
        ck_assert_msg(made >= n, "%s: allocation %llu was never made", name, (unsigned long long)n);
        ck_assert_msg(memcmp(got.peak, clean.peak, sizeof got.peak) == 0 &&
                          memcmp(got.extra, clean.extra, sizeof got.extra) == 0 &&
                          got.store_all_peak == clean.store_all_peak && got.doc_bytes == clean.doc_bytes,
                      "%s, allocation %llu failed silently and changed the result", name, (unsigned long long)n);
        survived++;
    }
    fprintf(stderr, "oom sweep %s: %llu allocations; %llu runs out of memory, %llu recovered\n", name,
            (unsigned long long)total, (unsigned long long)nomem, (unsigned long long)survived);
    remat__free(text);
}

START_TEST(oom_should_fail_cleanly_at_every_allocation_on_mlp2)
{
    sweep("mlp2", 200 << 10);
}
END_TEST

START_TEST(oom_should_fail_cleanly_at_every_allocation_on_transformer4)
{
    sweep("transformer4", 16 << 20);
}
END_TEST

Suite *oom_suite(void)
{
    Suite *s = suite_create("oom");
    TCase *tc = tcase_create("sweep");
    tcase_add_test(tc, oom_should_fail_cleanly_at_every_allocation_on_mlp2);
    tcase_add_test(tc, oom_should_fail_cleanly_at_every_allocation_on_transformer4);
    tcase_set_timeout(tc, 1800);
    suite_add_tcase(s, tc);
    return s;
}

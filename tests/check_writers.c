/*
 * check_writers.c - the report tables and their one writers.
 *
 * remat_trace_write(t, o, format) must give, byte for byte, the document of
 * that format's own writer; names and file suffixes must select the format
 * the table says (the longest suffix wins, so NAME.trace.json is Chrome's).
 * remat_report_write(doc, in, format) must do the same for every document
 * in every format its table entry lists, and refuse the formats it does not
 * list and the inputs it lacks, naming them.
 */
#include "exec_util.h"
#include "remat/trace.h"
#include "remat/alloc.h"
#include "remat/compare.h"
#include "remat/ledger.h"
#include "remat/pipeline.h"

#include <cjson/cJSON.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(trace_write_should_be_each_formats_own_writer)
{
    remat_graph *g;
    remat_schedule s;
    remat_analysis *a = mlp2_schedule(&g, &s);
    remat_trace *t;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_trace_build(a, &s, NULL, &t, &err), REMAT_OK);
    char *(*const own[])(const remat_trace *, const remat_trace_options *, size_t *, remat_err *) = {
        remat_trace_json, remat_trace_chrome, remat_trace_csv, remat_trace_svg};
    size_t n;
    const remat_trace_format_info *f = remat_trace_formats(&n);
    ck_assert_uint_eq(n, REMAT_TRACE_FORMAT_COUNT);
    ck_assert_uint_eq(n, sizeof own / sizeof own[0]);
    for (size_t i = 0; i < n; i++) {
        size_t l1, l2;
        char *x = remat_trace_write(t, NULL, (remat_trace_format)i, &l1, &err);
        char *y = own[i](t, NULL, &l2, &err);
        ck_assert_msg(x && y, "%s: %s", f[i].name, err.msg);
        ck_assert_uint_eq(l1, l2);
        ck_assert_msg(memcmp(x, y, l1) == 0, "%s differs from its own writer", f[i].name);
        remat_trace_format back;
        ck_assert(remat_trace_format_parse(f[i].name, &back));
        ck_assert_int_eq(back, (int)i);
        remat_free(x);
        remat_free(y);
    }
    ck_assert_ptr_null(remat_trace_write(t, NULL, REMAT_TRACE_FORMAT_COUNT, NULL, &err));
    ck_assert_int_eq(err.code, REMAT_EINVAL);
    remat_trace_destroy(t);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(trace_format_should_follow_the_longest_suffix)
{
    static const struct {
        const char *path;
        int found;
        remat_trace_format want;
    } cases[] = {
        {"run.trace.json", 1, REMAT_TRACE_FORMAT_CHROME}, {"RUN.TRACE.JSON", 1, REMAT_TRACE_FORMAT_CHROME},
        {"run.json", 1, REMAT_TRACE_FORMAT_JSON},         {"t.csv", 1, REMAT_TRACE_FORMAT_CSV},
        {"t.Svg", 1, REMAT_TRACE_FORMAT_SVG},             {"t.txt", 0, REMAT_TRACE_FORMAT_JSON},
        {"json", 0, REMAT_TRACE_FORMAT_JSON},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        remat_trace_format f = REMAT_TRACE_FORMAT_COUNT;
        ck_assert_int_eq(remat_trace_format_of_path(cases[i].path, &f), cases[i].found);
        if (cases[i].found)
            ck_assert_msg(f == cases[i].want, "%s", cases[i].path);
    }
    remat_trace_format f;
    ck_assert_int_eq(remat_trace_format_parse("perfetto", &f), 0);
}
END_TEST

/* Every document's own writer, called the way its header says. */
static char *own_writer(remat_report_doc doc, const remat_report_input *in, remat_report_format f, size_t *len,
                        remat_err *err)
{
    int json = f == REMAT_REPORT_JSON;
    switch (doc) {
    case REMAT_DOC_LIFETIMES: return remat_report_lifetimes(in->a, f, len, err);
    case REMAT_DOC_REPLAY: return remat_report_replay(in->a, in->s, in->r, in->why, f, len, err);
    case REMAT_DOC_COMPARE: return remat_report_compare(in->a, in->o, in->rows, in->n_rows, json, len, err);
    case REMAT_DOC_SWEEP: return remat_report_sweep(in->a, in->sweep, f == REMAT_REPORT_SVG, len, err);
    case REMAT_DOC_LEDGER: return remat_ledger_format(in->ledger, json, len, err);
    case REMAT_DOC_ALLOC:
        return f == REMAT_REPORT_SVG ? remat_report_alloc_svg(in->a, in->s, in->alloc_trace, in->offsets, in->extent,
                                                              in->title, in->max_rects, len, err)
                                     : remat_report_alloc(in->a, in->s, in->alloc_trace, in->policies, in->n_policies,
                                                          in->static_plan, json, len, err);
    case REMAT_DOC_AUDIT: return remat_trace_audit(in->trace, in->trace_options, f, len, err);
    case REMAT_DOC_STEP_TIME:
        return remat_report_step_time(in->a, in->s, in->timeline, in->device, in->op_times, f, len, err);
    case REMAT_DOC_TRACE:
        return f == REMAT_REPORT_JSON     ? remat_trace_json(in->trace, in->trace_options, len, err)
               : f == REMAT_REPORT_CHROME ? remat_trace_chrome(in->trace, in->trace_options, len, err)
               : f == REMAT_REPORT_CSV    ? remat_trace_csv(in->trace, in->trace_options, len, err)
                                          : remat_trace_svg(in->trace, in->trace_options, len, err);
    case REMAT_DOC_PIPELINE:
        return f == REMAT_REPORT_CHROME ? remat_pp_trace_chrome(in->pp, len, err)
                                        : remat_report_pipeline(in->pp, in->o, in->pp_how, f, len, err);
    case REMAT_DOC_PP_COMPARE: return remat_report_pp_compare(in->pp_compare, f, len, err);
    default: return NULL;
    }
}

START_TEST(report_write_should_be_every_documents_own_writer)
{
    remat_graph *g;
    remat_schedule s;
    remat_analysis *a = mlp2_schedule(&g, &s);
    remat_err err;
    remat_err_init(&err);
    remat_replay_result r;
    ck_assert_int_eq(remat_replay(a, &s, NULL, NULL, &r, &err), REMAT_OK);
    remat_trace *t;
    ck_assert_int_eq(remat_trace_build(a, &s, NULL, &t, &err), REMAT_OK);
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.budget_kind = REMAT_BUDGET_ACTIVATION;
    o.budget = r.activation_peak;
    o.time_limit = 1;
    remat_compare_row rows[32];
    size_t n_rows = 0;
    ck_assert_msg(remat_compare_run(a, &o, rows, 32, &n_rows, &err) == REMAT_OK, "%s", err.msg);
    remat_sweep sw;
    ck_assert_msg(remat_compare_sweep(a, &o, 2, &sw, NULL, NULL, &err) == REMAT_OK, "%s", err.msg);
    remat_ledger_config cfg;
    remat_ledger_config_init(&cfg);
    remat_ledger_result lr;
    ck_assert_msg(remat_ledger_from_graph(&cfg, g, &lr, &err) == REMAT_OK, "%s", err.msg);
    remat_alloc_trace at;
    ck_assert_int_eq(remat_alloc_trace_build(a, &s, NULL, REMAT_ALLOC_ALL, &at, NULL, &err), REMAT_OK);
    remat_alloc_result pr;
    ck_assert_int_eq(remat_alloc_simulate(&at, (remat_alloc_policy)0, 1, &pr, &err), REMAT_OK);
    remat_static_options so;
    remat_static_options_init(&so);
    remat_static_result sp;
    ck_assert_int_eq(remat_alloc_static_plan(&at, &so, &sp, &err), REMAT_OK);
    const remat_alloc_result *policies[] = {&pr, NULL};
    remat_device dev;
    ck_assert_int_eq(remat_device_preset("h200", &dev, &err), REMAT_OK);
    remat_op_times times;
    ck_assert_int_eq(remat_op_times_init(a, &dev, &times, &err), REMAT_OK);
    remat_timeline tl;
    ck_assert_int_eq(remat_timeline_run(a, &s, NULL, &dev, &times, &tl, &err), REMAT_OK);
    /* A timed two-device pipeline (its Chrome trace needs the times), and
     * every strategy under it. */
    remat_pp_config pcfg = {REMAT_PP_1F1B, 2, 4, 1};
    remat_plan_options po;
    remat_plan_options_init(&po);
    po.device = &dev;
    po.time_limit = 1;
    po.budget_kind = REMAT_BUDGET_TOTAL;
    po.budget = (uint64_t)1 << 30;
    remat_pp_result ppr;
    ck_assert_msg(remat_pp_plan(a, &pcfg, NULL, REMAT_PP_BALANCE_FLOPS, &po, &ppr, &err) == REMAT_OK, "%s", err.msg);
    remat_pp_compare ppc;
    ck_assert_int_eq(remat_pp_compare_begin(&pcfg, &po, &ppc, &err), REMAT_OK);
    for (size_t i = 0; i < ppc.n_rows; i++)
        remat_pp_compare_row_run(a, NULL, REMAT_PP_BALANCE_FLOPS, &po, &ppc, i);
    remat_report_input in = {.pp = &ppr, .pp_how = "balanced by FLOPs", .pp_compare = &ppc, .timeline = &tl, .device = &dev, .op_times = &times, .a = a, .s = &s, .r = &r, .o = &o, .rows = rows, .n_rows = n_rows, .sweep = &sw,
                             .ledger = &lr, .alloc_trace = &at, .policies = policies, .n_policies = 2,
                             .static_plan = &sp, .offsets = sp.offsets, .extent = sp.arena_bytes, .title = "t",
                             .trace = t};
    size_t n;
    const remat_report_doc_info *d = remat_report_docs(&n);
    ck_assert_uint_eq(n, REMAT_DOC_COUNT);
    int written = 0;
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(d[i].formats & (1u << d[i].first), "%s: its default is not one of its formats", d[i].name);
        for (int f = 0; f < REMAT_REPORT_FORMAT_COUNT; f++) {
            remat_report_format back;
            ck_assert(remat_report_format_parse(remat_report_format_name((remat_report_format)f), &back));
            ck_assert_int_eq(back, f);
            size_t l1 = 0, l2 = 0;
            remat_err_init(&err);
            char *x = remat_report_write((remat_report_doc)i, &in, (remat_report_format)f, &l1, &err);
            if (!(d[i].formats & (1u << f))) {
                ck_assert_ptr_null(x);
                ck_assert_int_eq(err.code, REMAT_EINVAL);
                char want[128];
                snprintf(want, sizeof want, "the %s document has no %s format", d[i].name,
                         remat_report_format_name((remat_report_format)f));
                ck_assert_msg_contains(&err, want);
                continue;
            }
            char *y = own_writer((remat_report_doc)i, &in, (remat_report_format)f, &l2, &err);
            ck_assert_msg(x && y, "%s/%s: %s", d[i].name, remat_report_format_name((remat_report_format)f), err.msg);
            ck_assert_uint_eq(l1, l2);
            ck_assert_msg(memcmp(x, y, l1) == 0, "%s/%s differs from its own writer", d[i].name,
                          remat_report_format_name((remat_report_format)f));
            written++;
            remat_free(x);
            remat_free(y);
        }
    }
    /* text and JSON (sweep: JSON and SVG) each, 3 for alloc, 4 for the trace;
     * the pipeline's 3 (text, JSON, Chrome) and pp-compare's 2 */
    ck_assert_int_eq(written, 7 * 2 + 3 + 4 + 3 + 2);
    /* The pipeline document as a program reads it: its devices' peaks are
     * the result's, and the largest is their maximum (found here). */
    {
        remat_report_input pin = {.pp = &ppr, .o = &po};
        size_t pl;
        char *pj = remat_report_write(REMAT_DOC_PIPELINE, &pin, REMAT_REPORT_JSON, &pl, &err);
        ck_assert_msg(pj, "%s", err.msg);
        cJSON *root = cJSON_ParseWithLength(pj, pl);
        ck_assert_ptr_nonnull(root);
        ck_assert_uint_eq((uint64_t)cJSON_GetObjectItem(root, "budget")->valuedouble, po.budget);
        const cJSON *devs = cJSON_GetObjectItem(root, "devices");
        ck_assert_int_eq(cJSON_GetArraySize(devs), 2);
        uint64_t most = 0;
        for (int k = 0; k < 2; k++) {
            uint64_t p = (uint64_t)cJSON_GetObjectItem(cJSON_GetArrayItem(devs, k), "peak_bytes")->valuedouble;
            ck_assert_uint_eq(p, ppr.device_peak[k]);
            most = p > most ? p : most;
        }
        ck_assert_uint_eq((uint64_t)cJSON_GetObjectItem(cJSON_GetObjectItem(root, "largest"), "peak_bytes")->valuedouble,
                          most);
        cJSON_Delete(root);
        remat_free(pj);
        size_t ns;
        remat_plan_strategies(&ns);
        ck_assert_uint_eq(ppc.n_rows, ns);
    }
    /* A field a document needs, left out, is named; nothing is dereferenced. */
    remat_report_input partial = {.a = a, .s = &s};
    remat_err_init(&err);
    ck_assert_ptr_null(remat_report_write(REMAT_DOC_REPLAY, &partial, REMAT_REPORT_JSON, NULL, &err));
    ck_assert_msg_contains(&err, "the replay document needs in->r");
    remat_err_init(&err);
    ck_assert_ptr_null(remat_report_write(REMAT_DOC_TRACE, &partial, REMAT_REPORT_CSV, NULL, &err));
    ck_assert_msg_contains(&err, "the trace document needs in->trace");
    remat_report_input no_tl = {.a = a, .s = &s};
    remat_err_init(&err);
    ck_assert_ptr_null(remat_report_write(REMAT_DOC_STEP_TIME, &no_tl, REMAT_REPORT_TEXT, NULL, &err));
    ck_assert_msg_contains(&err, "the step-time document needs in->timeline");
    remat_err_init(&err);
    ck_assert_ptr_null(remat_report_write(REMAT_DOC_PIPELINE, &partial, REMAT_REPORT_TEXT, NULL, &err));
    ck_assert_msg_contains(&err, "the pipeline document needs in->pp");
    remat_err_init(&err);
    ck_assert_ptr_null(remat_report_write(REMAT_DOC_PP_COMPARE, &partial, REMAT_REPORT_JSON, NULL, &err));
    ck_assert_msg_contains(&err, "the pp-compare document needs in->pp_compare");
    remat_err_init(&err);
    ck_assert_ptr_null(remat_report_write(REMAT_DOC_COUNT, &partial, REMAT_REPORT_TEXT, NULL, &err));
    ck_assert_int_eq(err.code, REMAT_EINVAL);
    remat_pp_compare_destroy(&ppc);
    remat_pp_result_destroy(&ppr);
    remat_static_result_destroy(&sp);
    remat_alloc_result_destroy(&pr);
    remat_alloc_trace_destroy(&at);
    remat_sweep_destroy(&sw);
    remat_timeline_destroy(&tl);
    remat_op_times_destroy(&times);
    remat_trace_destroy(t);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

Suite *writers_suite(void)
{
    Suite *s = suite_create("writers");
    TCase *tc = tcase_create("writers");
    tcase_add_test(tc, trace_write_should_be_each_formats_own_writer);
    tcase_add_test(tc, trace_format_should_follow_the_longest_suffix);
    tcase_add_test(tc, report_write_should_be_every_documents_own_writer);
    suite_add_tcase(s, tc);
    return s;
}

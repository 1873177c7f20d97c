/*
 * check_writers.c - the trace's format table and its one writer.
 *
 * remat_trace_write(t, o, format) must give, byte for byte, the document of
 * that format's own writer; names and file suffixes must select the format
 * the table says (the longest suffix wins, so NAME.trace.json is Chrome's).
 */
#include "exec_util.h"
#include "remat/trace.h"

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

Suite *writers_suite(void)
{
    Suite *s = suite_create("writers");
    TCase *tc = tcase_create("writers");
    tcase_add_test(tc, trace_write_should_be_each_formats_own_writer);
    tcase_add_test(tc, trace_format_should_follow_the_longest_suffix);
    suite_add_tcase(s, tc);
    return s;
}

/*
 * check_strategies.c - the strategy table and the option table, and what is
 * derived from them.
 *
 * remat/plan.h's tables are the one place a strategy is described: auto's
 * candidates, exact's warm starts, compare's columns and the CLI's flags are
 * read off them. These tests check the tables against themselves (every
 * option a strategy claims exists; ranks are orders) and the derived
 * behaviour against the tables (auto names only table candidates, in their
 * order; compare has one column per strategy and variant, auto last), and
 * the one option parser on good and bad values of every kind.
 */
#include "test_util.h"
#include "remat/compare.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* graphs/mlp2.json (tests run from the repository root), analyzed. */
static remat_analysis *mlp2(remat_graph **g)
{
    remat_err err;
    remat_err_init(&err);
    remat_analysis *a;
    ck_assert_msg(remat_graph_load_file("graphs/mlp2.json", g, &err) == REMAT_OK, "%s", err.msg);
    ck_assert_msg(remat_analyze(*g, &a, &err) == REMAT_OK, "%s", err.msg);
    return a;
}

static const remat_plan_option_info *option_named(const char *name, size_t len)
{
    size_t n;
    const remat_plan_option_info *t = remat_plan_option_table(&n);
    for (size_t i = 0; i < n; i++)
        if (strlen(t[i].name) == len && strncmp(t[i].name, name, len) == 0)
            return &t[i];
    return NULL;
}

START_TEST(strategies_should_read_only_options_the_option_table_has)
{
    size_t n;
    const remat_strategy_info *s = remat_plan_strategies(&n);
    ck_assert_uint_ge(n, 9);
    unsigned seen_auto[64] = {0}, seen_warm[64] = {0};
    for (size_t i = 0; i < n; i++) {
        for (const char *p = s[i].options; *p;) {
            size_t len = strcspn(p, " ");
            ck_assert_msg(option_named(p, len), "%s reads option '%.*s', which the option table lacks", s[i].name,
                          (int)len, p);
            p += len + (p[len] == ' ');
        }
        /* A linearized variant is read through the linearized option. */
        if (s[i].flags & REMAT_STRATEGY_LINEARIZED)
            ck_assert_ptr_nonnull(strstr(s[i].options, "linearized"));
        /* Ranks order the strategies that have the flag, once each. */
        if (s[i].flags & REMAT_STRATEGY_AUTO) {
            ck_assert_uint_gt(s[i].auto_rank, 0);
            ck_assert_uint_lt(s[i].auto_rank, 64);
            ck_assert_uint_eq(seen_auto[s[i].auto_rank]++, 0);
        }
        if (s[i].flags & REMAT_STRATEGY_WARM_START) {
            ck_assert_uint_gt(s[i].warm_rank, 0);
            ck_assert_uint_lt(s[i].warm_rank, 64);
            ck_assert_uint_eq(seen_warm[s[i].warm_rank]++, 0);
        }
        /* auto runs every other strategy; only exact runs it, for its
         * incumbent (found by this flag, not as a warm start). */
        if (s[i].flags & REMAT_STRATEGY_RUNS_OTHERS)
            ck_assert(!(s[i].flags & (REMAT_STRATEGY_AUTO | REMAT_STRATEGY_WARM_START)));
    }
}
END_TEST

/* The index of name in the table, or -1. */
static int index_of(const remat_strategy_info *s, size_t n, const char *name, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(s[i].name) == len && strncmp(s[i].name, name, len) == 0)
            return (int)i;
    return -1;
}

START_TEST(auto_should_name_only_table_candidates_in_their_order)
{
    remat_graph *g;
    remat_analysis *a = mlp2(&g);
    size_t n;
    const remat_strategy_info *s = remat_plan_strategies(&n);
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.budget_kind = REMAT_BUDGET_ACTIVATION;
    o.budget = UINT64_MAX / 2;
    remat_plan plan;
    remat_replay_result r;
    remat_err err;
    remat_err_init(&err);
    ck_assert_msg(remat_plan_make(a, &o, &plan, &r, &err) == REMAT_OK, "%s", err.msg);
    const char *c = strstr(plan.params_json, "\"candidates\": [");
    ck_assert_ptr_nonnull(c);
    c += strlen("\"candidates\": [");
    unsigned last_rank = 0;
    int named = 0;
    while (*c == '"') {
        const char *end = strchr(c + 1, '"');
        ck_assert_ptr_nonnull(end);
        const char *name = c + 1;
        size_t len = (size_t)(end - name);
        const char *slash = memchr(name, '/', len);
        if ((len == strlen("local-search") && strncmp(name, "local-search", len) == 0) ||
            (len == strlen("class-search") && strncmp(name, "class-search", len) == 0)) {
            last_rank = 64; /* the ladder and the class search come after every candidate at the budget */
        } else {
            int k = index_of(s, n, name, slash ? (size_t)(slash - name) : len);
            ck_assert_msg(k >= 0 && (s[k].flags & REMAT_STRATEGY_AUTO), "auto tried '%.*s'", (int)len, name);
            if (slash)
                ck_assert(s[k].flags & REMAT_STRATEGY_LINEARIZED);
            ck_assert_msg(s[k].auto_rank >= last_rank || (s[k].flags & REMAT_STRATEGY_AUTO_LADDER),
                          "'%.*s' out of auto_rank order", (int)len, name);
            if (last_rank < 64)
                last_rank = s[k].auto_rank;
            named++;
        }
        c = end + 1;
        if (strncmp(c, ", ", 2) == 0)
            c += 2;
    }
    ck_assert_int_gt(named, 3);
    remat_replay_result_destroy(&r);
    remat_plan_destroy(&plan);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(compare_should_have_one_column_per_strategy_and_variant_auto_last)
{
    remat_graph *g;
    remat_analysis *a = mlp2(&g);
    size_t n, want = 0;
    const remat_strategy_info *s = remat_plan_strategies(&n);
    for (size_t i = 0; i < n; i++)
        want += (1 + ((s[i].flags & REMAT_STRATEGY_LINEARIZED) != 0)) * (1 + ((s[i].flags & REMAT_STRATEGY_PAPER) != 0));
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.budget_kind = REMAT_BUDGET_ACTIVATION;
    o.budget = UINT64_MAX / 2;
    o.time_limit = 1;
    remat_compare_row rows[32];
    size_t got;
    remat_err err;
    remat_err_init(&err);
    ck_assert_msg(remat_compare_run(a, &o, rows, 32, &got, &err) == REMAT_OK, "%s", err.msg);
    ck_assert_uint_eq(got, want);
    int k = index_of(s, n, rows[got - 1].strategy, strlen(rows[got - 1].strategy));
    ck_assert(k >= 0 && (s[k].flags & REMAT_STRATEGY_RUNS_OTHERS));
    for (size_t i = 0; i + 1 < got; i++)
        if (rows[i].linearized || rows[i].paper)
            ck_assert_str_eq(rows[i].strategy, rows[i - 1].strategy);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(option_set_should_parse_every_kind_and_name_the_field_on_errors)
{
    remat_plan_options o;
    remat_plan_options_init(&o);
    remat_err err;
    static const struct {
        const char *name, *value;
        remat_status code;
        const char *msg;
    } cases[] = {
        {"linearized", NULL, REMAT_OK, NULL},
        {"segments", "12", REMAT_OK, NULL},
        {"segments", "-1", REMAT_EINVAL, "segments: '-1' is not a whole number"},
        {"segments", "4294967296", REMAT_EINVAL, "segments: 4294967296 is out of range (at most 4294967295)"},
        {"segments", "x", REMAT_EINVAL, "segments: 'x' is not a whole number"},
        {"time_limit", "inf", REMAT_EINVAL, "time_limit: 'inf' is not a positive number of seconds"},
        {"dp_step", "2KiB", REMAT_OK, NULL},
        {"dp_step", "2 apples", REMAT_EINVAL, "dp_step: "},
        {"time_limit", "0.5", REMAT_OK, NULL},
        {"time_limit", "0", REMAT_EINVAL, "time_limit: '0' is not a positive number of seconds"},
        {"never_recompute", "matmul,conv", REMAT_OK, NULL},
        {"dtr_score", "eq", REMAT_OK, NULL},
        {"dtr_score", "lru", REMAT_EINVAL, "dtr_score: 'lru' is not one of h_dtr, eq, local, best"},
        {"budget_mode", "arena", REMAT_OK, NULL},
        {"budget_mode", "", REMAT_EINVAL, "budget_mode: '' is not one of logical, arena"},
        {"segments", NULL, REMAT_EINVAL, "segments: a value is required"},
        {"frobnicate", "1", REMAT_EINVAL, "unknown option 'frobnicate'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        remat_err_init(&err);
        ck_assert_int_eq(remat_plan_option_set(&o, cases[i].name, cases[i].value, &err), cases[i].code);
        if (cases[i].msg)
            ck_assert_msg(strstr(err.msg, cases[i].msg), "%s: got '%s'", cases[i].name, err.msg);
    }
    ck_assert_int_eq(o.linearized, 1);
    ck_assert_uint_eq(o.segments, 12);
    ck_assert_uint_eq(o.dp_step, 2048);
    ck_assert(o.time_limit == 0.5);
    ck_assert_str_eq(o.never_recompute, "matmul,conv");
    ck_assert_str_eq(o.dtr_score, "eq");
    ck_assert_int_eq(o.budget_mode, REMAT_BUDGET_MODE_ARENA);
}
END_TEST

/* Every option of the table, on its own: not given after init; given once
 * set to a value other than init's (a value per kind, chosen here); a
 * choice set to its first value, which for the enums (budget_mode,
 * chen_reading) is init's, reads as not given. Setting one never makes
 * another read as given. */
START_TEST(option_given_should_follow_each_field_of_the_table)
{
    size_t n;
    const remat_plan_option_info *t = remat_plan_option_table(&n);
    ck_assert_uint_gt(n, 0);
    remat_err err;
    for (size_t i = 0; i < n; i++) {
        remat_plan_options o;
        remat_plan_options_init(&o);
        for (size_t j = 0; j < n; j++)
            ck_assert_msg(!remat_plan_option_given(&o, t[j].name), "%s given after init", t[j].name);
        char first[32] = "", last[32] = "";
        if (t[i].kind == REMAT_OPTION_CHOICE) {
            sscanf(t[i].choices, "%31s", first);
            const char *sp = strrchr(t[i].choices, ' ');
            snprintf(last, sizeof last, "%s", sp ? sp + 1 : t[i].choices);
        }
        const char *value = t[i].kind == REMAT_OPTION_FLAG      ? NULL
                            : t[i].kind == REMAT_OPTION_COUNT   ? "7"
                            : t[i].kind == REMAT_OPTION_BYTES   ? "1KiB"
                            : t[i].kind == REMAT_OPTION_SECONDS ? "2.5"
                            : t[i].kind == REMAT_OPTION_TEXT    ? "matmul"
                                                                : last;
        remat_err_init(&err);
        ck_assert_msg(remat_plan_option_set(&o, t[i].name, value, &err) == REMAT_OK, "%s: %s", t[i].name, err.msg);
        ck_assert_msg(remat_plan_option_given(&o, t[i].name), "%s set but not given", t[i].name);
        for (size_t j = 0; j < n; j++)
            if (j != i)
                ck_assert_msg(!remat_plan_option_given(&o, t[j].name), "setting %s gave %s", t[i].name, t[j].name);
        if (t[i].kind == REMAT_OPTION_CHOICE && (strcmp(t[i].name, "budget_mode") == 0 ||
                                                 strcmp(t[i].name, "chen_reading") == 0)) {
            remat_plan_options_init(&o);
            ck_assert_int_eq(remat_plan_option_set(&o, t[i].name, first, &err), REMAT_OK);
            ck_assert_msg(!remat_plan_option_given(&o, t[i].name), "%s at its default %s reads as given", t[i].name,
                          first);
        }
    }
    remat_plan_options o;
    remat_plan_options_init(&o);
    ck_assert(!remat_plan_option_given(&o, "frobnicate"));
}
END_TEST

Suite *strategies_suite(void)
{
    Suite *s = suite_create("strategies");
    TCase *tc = tcase_create("strategies");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, strategies_should_read_only_options_the_option_table_has);
    tcase_add_test(tc, auto_should_name_only_table_candidates_in_their_order);
    tcase_add_test(tc, compare_should_have_one_column_per_strategy_and_variant_auto_last);
    tcase_add_test(tc, option_set_should_parse_every_kind_and_name_the_field_on_errors);
    tcase_add_test(tc, option_given_should_follow_each_field_of_the_table);
    suite_add_tcase(s, tc);
    return s;
}

/*
 * cmd_compare.c - `remat compare GRAPH --budget B [--sweep N [--svg FILE]] [--json]`.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "ledger_opts.h"
#include "time_opts.h"
#include "remat/compare.h"

#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void progress(void *ctx, size_t done, size_t total)
{
    (void)ctx;
    fprintf(stderr, "\rremat compare: budget %zu of %zu", done, total);
    if (done == total)
        fputc('\n', stderr);
    fflush(stderr);
}

int cmd_compare(int argc, char **argv)
{
    enum { OPT_ACT = 256, OPT_SVG, OPT_TIME };
    static const struct option own[] = {
        {"budget", required_argument, NULL, 'b'},
        {"activation-budget", required_argument, NULL, OPT_ACT},
        {"sweep", required_argument, NULL, 'n'},
        {"svg", required_argument, NULL, OPT_SVG},
        {"time-limit", required_argument, NULL, OPT_TIME},
        REMAT_CLI_LEDGER_LONG_OPTS,
        REMAT_CLI_TIME_LONG_OPTS,
        REMAT_CLI_PP_LONG_OPTS,
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct option buf[sizeof own / sizeof own[0] + REMAT_CLI_FORMAT_FLAGS];
    const unsigned docs =
        REMAT_CLI_DOC(REMAT_DOC_COMPARE) | REMAT_CLI_DOC(REMAT_DOC_SWEEP) | REMAT_CLI_DOC(REMAT_DOC_PP_COMPARE);
    const struct option *opts = remat_cli_options(docs, own, buf);
    remat_plan_options o;
    remat_plan_options_init(&o);
    int json = 0, c;
    unsigned long sweep = 0;
    const char *svg = NULL, *out = "-";
    remat_err err;
    remat_err_init(&err);
    optind = 1;
    remat_cli_ledger L;
    remat_cli_ledger_init(&L);
    remat_cli_time T;
    remat_cli_time_init(&T);
    remat_cli_pp pp;
    remat_cli_pp_init(&pp);
    while ((c = remat_cli_getopt(argc, argv, "b:n:jo:h", opts)) != -1) {
        int lrc = remat_cli_ledger_option("compare", c, optarg, &L);
        if (lrc > 0)
            return lrc;
        if (lrc == 0)
            continue;
        if ((lrc = remat_cli_time_option("compare", c, optarg, 1, &T)) > 0)
            return lrc;
        if (lrc == 0)
            continue;
        if ((lrc = remat_cli_pp_option("compare", c, optarg, &pp)) > 0)
            return lrc;
        if (lrc == 0)
            continue;
        switch (c) {
        case 'b':
        case OPT_ACT: {
            int brc = remat_cli_budget_option("compare", c == 'b', optarg, &o);
            if (brc != REMAT_EXIT_OK)
                return brc;
            break;
        }
        case 'n': {
            uint64_t v;
            int nrc = remat_cli_parse_count("compare", "--sweep", optarg, 2, 1000, &v);
            if (nrc != REMAT_EXIT_OK)
                return nrc;
            sweep = (unsigned long)v;
            break;
        }
        case OPT_SVG: svg = optarg; break;
        case OPT_TIME: {
            char *end;
            o.time_limit = strtod(optarg, &end);
            if (!*optarg || *end || !(o.time_limit > 0) || !isfinite(o.time_limit))
                return remat_cli_usage_error("compare", "--time-limit: '%s' is not a positive number", optarg);
            break;
        }
        case 'j': json = 1; break;
        case 'o': out = optarg; break;
        case 'h': remat_cli_print_usage(stdout, "compare"); return REMAT_EXIT_OK;
        default: return remat_cli_usage_error("compare", "bad option");
        }
    }
    if (optind != argc - 1)
        return remat_cli_usage_error("compare", "expected exactly one GRAPH");
    int trc = remat_cli_time_load("compare", &T, &o);
    if (trc != REMAT_EXIT_OK)
        return trc;
    /* A side-by-side table should come back in about a second: exact (and
     * auto's run of it) gets 1 s here unless --time-limit says otherwise;
     * `remat plan --strategy exact` keeps its 10 s default. A sweep runs
     * exact once per budget, so the same applies per point. */
    if (o.time_limit <= 0)
        o.time_limit = 1;
    if (!sweep && o.budget_kind == REMAT_BUDGET_NONE)
        return remat_cli_usage_error("compare", "give --budget B or --activation-budget B (or --sweep N)");
    if (svg && !sweep)
        return remat_cli_usage_error("compare", "--svg draws a sweep: give --sweep N too");
    /* A sweep chooses its budgets; --activation-budget 0 only says which
     * kind. A budget beside it would be ignored, so it is an error. */
    if (sweep && o.budget_kind == REMAT_BUDGET_TOTAL)
        return remat_cli_usage_error("compare", "--budget does not apply to --sweep (it sweeps its own budgets; "
                                                "--activation-budget 0 sweeps activation budgets)");
    if (sweep && o.budget_kind == REMAT_BUDGET_ACTIVATION && o.budget != 0)
        return remat_cli_usage_error("compare", "--activation-budget B does not apply to --sweep (it sweeps its own "
                                                "budgets; --activation-budget 0 sweeps activation budgets)");
    if ((trc = remat_cli_pp_check("compare", &pp)) != REMAT_EXIT_OK)
        return trc;
    if (pp.set && (sweep || o.budget_kind != REMAT_BUDGET_TOTAL || L.used))
        return remat_cli_usage_error("compare", "--pp compares at one per-device --budget B: no --sweep, "
                                                "--activation-budget or ledger options with it");
    remat_graph *g;
    remat_analysis *a;
    int rc = remat_cli_open_graph(argv[optind], &g, &a);
    if (rc != REMAT_EXIT_OK)
        return rc;
    if (pp.set) {
        rc = remat_cli_pp_compare(argv[optind], a, &pp, &o, json, out);
        remat_cli_ledger_destroy(&L);
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
        return rc;
    }
    uint64_t reserve = 0;
    if ((rc = remat_cli_ledger_extras("compare", a, &L, &o.extras, &reserve)) != REMAT_EXIT_OK ||
        (rc = remat_cli_apply_reserve("compare", &o, reserve)) != REMAT_EXIT_OK) {
        remat_cli_ledger_destroy(&L);
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
        return rc;
    }
    size_t len;
    char *text = NULL;
    if (sweep) {
        remat_sweep s;
        if (remat_compare_sweep(a, &o, sweep, &s, isatty(2) ? progress : NULL, NULL, &err) != REMAT_OK) {
            rc = err.code == REMAT_EOVERFLOW ? remat_cli_fail_in(argv[optind], &err) : remat_cli_fail(&err);
        } else {
            remat_report_input in = {.a = a, .sweep = &s};
            if (svg) {
                text = remat_report_write(REMAT_DOC_SWEEP, &in, REMAT_REPORT_SVG, &len, &err);
                rc = text ? remat_cli_write(svg, text, len) : remat_cli_fail(&err);
                remat_free(text);
            }
            if (rc == REMAT_EXIT_OK) {
                text = remat_report_write(REMAT_DOC_SWEEP, &in, remat_cli_format(REMAT_DOC_SWEEP, json), &len, &err);
                rc = text ? remat_cli_write(out, text, len) : remat_cli_fail(&err);
                remat_free(text);
            }
            remat_sweep_destroy(&s);
        }
    } else {
        remat_compare_row rows[32];
        size_t n;
        if (remat_compare_run(a, &o, rows, 32, &n, &err) != REMAT_OK) {
            rc = err.code == REMAT_EOVERFLOW ? remat_cli_fail_in(argv[optind], &err) : remat_cli_fail(&err);
        } else {
            /* A row's message is the library's: told in this command's flags. */
            for (size_t i = 0; i < n; i++) {
                remat_err why = {.code = rows[i].status};
                char said[2 * REMAT_ERR_MSG_MAX];
                snprintf(why.msg, sizeof why.msg, "%s", rows[i].message);
                snprintf(rows[i].message, sizeof rows[i].message, "%s", remat_cli_in_flags(&why, said, sizeof said));
            }
            remat_report_input in = {.a = a, .o = &o, .rows = rows, .n_rows = n};
            text = remat_report_write(REMAT_DOC_COMPARE, &in, remat_cli_format(REMAT_DOC_COMPARE, json), &len, &err);
            rc = text ? remat_cli_write(out, text, len) : remat_cli_fail(&err);
            remat_free(text);
        }
    }
    remat_cli_ledger_destroy(&L);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    return rc;
}

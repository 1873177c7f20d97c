/*
 * cmd_audit.c - `remat audit GRAPH [PLAN] [--top N] [--json] [-o FILE]`.
 *
 * The peak, explained: the step at which it occurs, the bytes of every
 * category at that moment (beside the sum of the categories' own maxima),
 * and the largest allocations live then, each with why it is live (saved
 * for which backward step, input of which forward step, recomputed for
 * which step, a gradient waiting for which step, a leaf). It is built from
 * the same trace as `remat trace`, so every line can be checked against the
 * trace's intervals.
 */
#include "cli.h"
#include "ledger_opts.h"
#include "remat/trace.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

int cmd_audit(int argc, char **argv)
{
    static const struct option own[] = {
        {"top", required_argument, NULL, 't'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        REMAT_CLI_LEDGER_LONG_OPTS,
        {NULL, 0, NULL, 0},
    };
    struct option buf[sizeof own / sizeof own[0] + REMAT_CLI_FORMAT_FLAGS];
    const struct option *opts = remat_cli_options(REMAT_CLI_DOC(REMAT_DOC_AUDIT), own, buf);
    remat_cli_ledger L;
    remat_cli_ledger_init(&L);
    L.cmd = "audit";
    remat_trace_options o;
    remat_trace_options_init(&o);
    o.top = 10;
    int json = 0, c;
    const char *out = "-";
    optind = 1;
    while ((c = remat_cli_getopt(argc, argv, "t:jo:h", opts)) != -1) {
        int lrc = remat_cli_ledger_option("audit", c, optarg, &L);
        if (lrc >= 0) {
            if (lrc != REMAT_EXIT_OK)
                return lrc;
            continue;
        }
        switch (c) {
        case 't': {
            uint64_t v;
            int rc = remat_cli_parse_count("audit", "--top", optarg, 1, 1000, &v);
            if (rc != REMAT_EXIT_OK)
                return rc;
            o.top = (uint32_t)v;
            break;
        }
        case 'j': json = 1; break;
        case 'o': out = optarg; break;
        case 'h': remat_cli_print_usage(stdout, "audit"); return REMAT_EXIT_OK;
        default: return remat_cli_usage_error("audit", "bad option");
        }
    }
    if (optind != argc - 1 && optind != argc - 2)
        return remat_cli_usage_error("audit", "expected GRAPH [PLAN]");
    remat_graph *g;
    remat_analysis *a;
    remat_plan plan;
    remat_plan_init(&plan);
    remat_trace *t;
    int rc = remat_cli_trace_open(argv[optind], optind == argc - 2 ? argv[optind + 1] : NULL, &L, &g, &a, &plan, &t, NULL);
    if (rc != REMAT_EXIT_OK) {
        remat_plan_destroy(&plan);
        remat_cli_ledger_destroy(&L);
        return rc;
    }
    o.label = plan.strategy;
    remat_err err;
    remat_err_init(&err);
    size_t len = 0;
    remat_report_input in = {.trace = t, .trace_options = &o};
    char *text = remat_report_write(REMAT_DOC_AUDIT, &in, remat_cli_format(REMAT_DOC_AUDIT, json), &len, &err);
    rc = text ? remat_cli_write(out, text, len) : remat_cli_fail(&err);
    remat_free(text);
    remat_trace_destroy(t);
    remat_plan_destroy(&plan);
    remat_cli_ledger_destroy(&L);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    return rc;
}

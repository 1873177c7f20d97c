/*
 * cmd_replay.c - `remat replay GRAPH [PLAN] [--json] [-o FILE]`.
 *
 * With no plan it replays the store-all schedule. An invalid schedule prints
 * valid: false with the first failing instruction and exits 1.
 */
#include "cli.h"

#include <getopt.h>
#include <string.h>

int cmd_replay(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int json = 0, c;
    const char *out = "-";
    optind = 1;
    while ((c = getopt_long(argc, argv, "jo:h", opts, NULL)) != -1) {
        switch (c) {
        case 'j': json = 1; break;
        case 'o': out = optarg; break;
        case 'h': remat_cli_print_usage(stdout, "replay"); return REMAT_EXIT_OK;
        default: return remat_cli_usage_error("replay", "bad option");
        }
    }
    if (optind != argc - 1 && optind != argc - 2)
        return remat_cli_usage_error("replay", "expected GRAPH [PLAN]");
    remat_graph *g;
    remat_analysis *a;
    int rc = remat_cli_open_graph(argv[optind], &g, &a);
    if (rc != REMAT_EXIT_OK)
        return rc;
    remat_err err;
    remat_err_init(&err);
    remat_plan plan;
    remat_plan_init(&plan);
    remat_status st;
    if (optind == argc - 2)
        st = remat_plan_load_file(g, argv[optind + 1], &plan, &err);
    else
        st = remat_schedule_store_all(a, &plan.schedule, &err);
    remat_replay_result r;
    memset(&r, 0, sizeof r);
    if (st == REMAT_OK)
        st = remat_replay(a, &plan.schedule, NULL, NULL, &r, &err);
    if (st != REMAT_OK) {
        rc = remat_cli_fail(&err);
    } else {
        remat_err rerr;
        remat_err_init(&rerr);
        size_t len;
        char *text = remat_report_replay(a, &plan.schedule, &r, &err, json ? REMAT_REPORT_JSON : REMAT_REPORT_TEXT,
                                         &len, &rerr);
        rc = text ? remat_cli_write(out, text, len) : remat_cli_fail(&rerr);
        remat_free(text);
        if (rc == REMAT_EXIT_OK && !r.valid) {
            if (!json)
                fprintf(stderr, "remat: %s\n", err.msg);
            rc = REMAT_EXIT_FAIL;
        }
    }
    remat_replay_result_destroy(&r);
    remat_plan_destroy(&plan);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    return rc;
}

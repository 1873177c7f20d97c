/*
 * cmd_lifetimes.c - `remat lifetimes GRAPH [--json] [-o FILE]`.
 */
#include "cli.h"

#include <getopt.h>
#include <string.h>

int cmd_lifetimes(int argc, char **argv)
{
    static const struct option own[] = {
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct option buf[sizeof own / sizeof own[0] + REMAT_CLI_FORMAT_FLAGS];
    const struct option *opts = remat_cli_options(REMAT_CLI_DOC(REMAT_DOC_LIFETIMES), own, buf);
    int json = 0, c;
    const char *out = "-";
    optind = 1;
    while ((c = remat_cli_getopt(argc, argv, "jo:h", opts)) != -1) {
        switch (c) {
        case 'j': json = 1; break;
        case 'o': out = optarg; break;
        case 'h': remat_cli_print_usage(stdout, "lifetimes"); return REMAT_EXIT_OK;
        default: return remat_cli_usage_error("lifetimes", "bad option");
        }
    }
    if (optind != argc - 1)
        return remat_cli_usage_error("lifetimes", "expected exactly one GRAPH");
    remat_graph *g;
    remat_analysis *a;
    int rc = remat_cli_open_graph(argv[optind], &g, &a);
    if (rc != REMAT_EXIT_OK)
        return rc;
    remat_err err;
    remat_err_init(&err);
    size_t len;
    remat_report_input in = {.a = a};
    char *text = remat_report_write(REMAT_DOC_LIFETIMES, &in, remat_cli_format(REMAT_DOC_LIFETIMES, json), &len, &err);
    rc = text ? remat_cli_write(out, text, len) : remat_cli_fail(&err);
    remat_free(text);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    return rc;
}

/*
 * cmd_tp_split.c - `remat tp-split GRAPH --tp T --partition FILE [-o GRAPH]`.
 *
 * Writes one rank's graph of T-way Megatron tensor parallelism from an
 * exported graph and a partition file naming its column- and row-parallel
 * linears (remat/import.h has the rules). As `remat import` does, the result
 * is loaded and analyzed by the one loader before it is written, so a split
 * that does not make a valid training step is refused and never written.
 */
#include "cli.h"
#include "remat/import.h"

#include <getopt.h>
#include <inttypes.h>
#include <string.h>

int cmd_tp_split(int argc, char **argv)
{
    static const struct option opts[] = {
        {"tp", required_argument, NULL, 't'},
        {"partition", required_argument, NULL, 'p'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *out = "-", *part = NULL;
    uint64_t tp = 0;
    int c, rc;
    optind = 1;
    while ((c = getopt_long(argc, argv, "t:p:o:h", opts, NULL)) != -1) {
        switch (c) {
        case 't':
            if ((rc = remat_cli_parse_count("tp-split", "--tp", optarg, 1, 1u << 20, &tp)) != REMAT_EXIT_OK)
                return rc;
            break;
        case 'p': part = optarg; break;
        case 'o': out = optarg; break;
        case 'h':
            remat_cli_print_usage(stdout, "tp-split");
            printf("\nThe partition file (Shoeybi et al. 2019 section 3; remat/import.h has the rules):\n"
                   "  {\"format\": \"remat-tp-partition\", \"version\": 1,\n"
                   "   \"column\": [\"blocks.*.attn.qkv\", \"blocks.*.fc1\"],\n"
                   "   \"row\": [\"blocks.*.attn.proj\", \"blocks.*.fc2\"]}\n"
                   "Patterns are globs on each op's attrs.module. A matched module's linear is the op\n"
                   "reading '<module>.weight'. Column: weight and bias / T, output split, input through f\n"
                   "(tp_copy). Row: weight / T, an all_reduce (g) after it. Ops reading split tensors\n"
                   "hold 1/T of their bytes and work.\n");
            return REMAT_EXIT_OK;
        default: return remat_cli_usage_error("tp-split", "bad option");
        }
    }
    if (optind != argc - 1)
        return remat_cli_usage_error("tp-split", "expected one GRAPH");
    if (!tp)
        return remat_cli_usage_error("tp-split", "--tp T is required");
    if (!part)
        return remat_cli_usage_error("tp-split", "--partition FILE is required");
    const char *path = argv[optind];
    remat_err err;
    remat_err_init(&err);
    char *json = NULL;
    size_t len = 0;
    remat_import_tp_summary s;
    if (remat_import_tp_split_files(path, part, (uint32_t)tp, &json, &len, &s, &err) != REMAT_OK)
        return remat_cli_fail(&err);
    remat_graph *g = NULL;
    remat_analysis *a = NULL;
    rc = REMAT_EXIT_OK;
    if (remat_graph_load_json(json, len, path, &g, &err) != REMAT_OK || remat_analyze(g, &a, &err) != REMAT_OK) {
        remat_cli_errorf("%s: the split graph is not a valid training step: %s", path, err.msg);
        rc = remat_cli_exit_for(err.code);
    } else {
        rc = remat_cli_write(out, json, len);
    }
    if (rc == REMAT_EXIT_OK) {
        FILE *f = remat_cli_human(out);
        fprintf(f,
                "split %s %" PRIu64 " ways: %u column- and %u row-parallel linears, %u ops doing 1/%" PRIu64
                " of their work, %u activations and %u params split (%" PRIu64 " B of params -> %" PRIu64
                " B), %u collectives inserted -> graph '%s': %u ops\n",
                path, tp, s.linears[0], s.linears[1], s.split_ops, tp, s.sharded_tensors, s.split_params,
                s.param_bytes_split, s.param_bytes_split / tp, s.collectives, g->name, g->n_ops);
        if (strcmp(out, "-") != 0)
            fprintf(f, "graph written to %s\n", out);
    }
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    remat_free(json);
    return rc;
}

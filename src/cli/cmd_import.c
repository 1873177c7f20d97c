/*
 * cmd_import.c - `remat import checkmate|dtr FILE [--name NAME] [-o GRAPH]`.
 *
 * Converts a peer's graph file into a remat graph (remat/import.h has the
 * mapping), then loads and analyzes the result with the one loader before
 * writing it, so a file that converts but does not make a valid training
 * step (a cycle, say) is refused here, naming the problem, and never
 * written.
 */
#include "cli.h"
#include "remat/import.h"

#include <getopt.h>
#include <string.h>

static void print_dtr_summary(FILE *f, const char *path, const remat_import_dtr_summary *s, const remat_graph *g,
                              const remat_analysis *a)
{
    fprintf(f, "imported %s: %u lines after START (%u skipped before it); forward %u CALLs, %u MUTATEs", path,
            s->lines, s->skipped, s->forward_calls, s->forward_mutates);
    if (s->backward_line)
        fprintf(f, "; backward from line %u: %u CALLs, %u MUTATEs", s->backward_line, s->backward_calls,
                s->backward_mutates);
    else
        fprintf(f, "; no backward part (an inference log)");
    fprintf(f, "; %u releases (%u of unknown names)\n", s->releases, s->releases_ignored);
    fprintf(f,
            "-> graph '%s': %u ops (%u of them views), %u params, %u inputs, loss %s, %u backward steps, %llu "
            "saves; costs in ns: forward %llu, backward %llu (%llu in %u backward instructions no forward op "
            "took)\n",
            g->name, g->n_ops, s->views, s->params, s->inputs,
            s->seed ? "from the gradient seed" : "= the unread live results", a->n_bwd, (unsigned long long)s->saves,
            (unsigned long long)s->forward_ns, (unsigned long long)s->backward_ns,
            (unsigned long long)s->unattributed_ns, s->unattributed);
}

int cmd_import(int argc, char **argv)
{
    static const struct option opts[] = {
        {"name", required_argument, NULL, 'n'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *out = "-", *name = NULL;
    int c;
    optind = 1;
    while ((c = remat_cli_getopt(argc, argv, "n:o:h", opts)) != -1) {
        switch (c) {
        case 'n': name = optarg; break;
        case 'o': out = optarg; break;
        case 'h':
            remat_cli_print_usage(stdout, "import");
            printf("\nformats:\n"
                   "  checkmate  Checkmate/Moccasin training graphs: networkx node-link JSON whose nodes\n"
                   "             have id, name, backward, cost_cpu, cost_ram. Forward nodes become ops\n"
                   "             (bytes = cost_ram, flops = cost_cpu); each backward node becomes its\n"
                   "             forward op's bwd_flops and saves (the forward tensors it reads); the\n"
                   "             loss node is the graph output; the input is implicit (0 bytes).\n"
                   "  dtr        the DTR prototype's operator logs (uwsampl/dtr-prototype): JSON lines\n"
                   "             CALL/MEMORY/ALIAS/MUTATE/CONSTANT/COPY/COPY_FROM/RELEASE/ANNOTATE, read\n"
                   "             from the START annotation. Forward CALLs and MUTATEs become ops (flops =\n"
                   "             TIME in ns, bytes = MEMORY, ALIAS -> a view, MUTATE -> a new version\n"
                   "             'x5@1'); constants the log never releases are params, the rest inputs;\n"
                   "             the backward part (from the first op named *backward*) gives saves and\n"
                   "             bwd_flops, each backward call to the forward op it names (X_backward)\n"
                   "             or else the earliest that has its arguments; ones_like(loss) before it\n"
                   "             marks the loss. remat/import.h has the details.\n");
            return REMAT_EXIT_OK;
        default: return remat_cli_usage_error("import", "bad option");
        }
    }
    if (optind != argc - 2)
        return remat_cli_usage_error("import", "expected FORMAT and FILE");
    int dtr = strcmp(argv[optind], "dtr") == 0;
    if (!dtr && strcmp(argv[optind], "checkmate") != 0)
        return remat_cli_usage_error("import", "unknown format '%s' (known: checkmate, dtr)", argv[optind]);
    const char *path = argv[optind + 1];
    remat_err err;
    remat_err_init(&err);
    char *json = NULL;
    size_t len = 0;
    remat_import_summary sum;
    remat_import_dtr_summary ds;
    remat_status st = dtr ? remat_import_dtr_file(path, name, &json, &len, &ds, &err)
                          : remat_import_checkmate_file(path, name, &json, &len, &sum, &err);
    if (st != REMAT_OK)
        return remat_cli_fail(&err);
    remat_graph *g = NULL;
    remat_analysis *a = NULL;
    int rc = REMAT_EXIT_OK;
    if (remat_graph_load_json(json, len, path, &g, &err) != REMAT_OK || remat_analyze(g, &a, &err) != REMAT_OK) {
        remat_cli_errorf("%s: the converted graph is not a valid training step: %s", path, err.msg);
        rc = remat_cli_exit_for(err.code);
    } else {
        rc = remat_cli_write(out, json, len);
    }
    if (rc == REMAT_EXIT_OK) {
        /* The summary goes where it cannot mix with the graph text. */
        FILE *f = strcmp(out, "-") == 0 ? stderr : stdout;
        if (dtr)
            print_dtr_summary(f, path, &ds, g, a);
        else
            fprintf(f,
                    "imported %s: %u forward nodes, %s, %u backward nodes (%u matched by Checkmate's layout, not "
                    "by name), %u links -> graph '%s': %u ops, %u backward steps, %llu saves; %u forward nodes "
                    "without a backward node; %u gradient nodes of a tensor with several consumers (each carried "
                    "by its first consumer's backward step), %u of a tensor nothing reads\n",
                    path, sum.forward_nodes, sum.backward_nodes ? "a loss" : "no loss (an inference graph)",
                    sum.backward_nodes, sum.by_layout, sum.links, g->name, g->n_ops, a->n_bwd,
                    (unsigned long long)sum.saves, sum.without_backward, sum.shared, sum.own_step);
        if (strcmp(out, "-") != 0)
            fprintf(f, "graph written to %s\n", out);
    }
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    remat_free(json);
    return rc;
}

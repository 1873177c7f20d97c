/*
 * main.c - the remat command: one table of subcommands (as git.c does).
 *
 * Each entry's function parses its own options with getopt_long and returns
 * an exit code; only main() exits.
 */
#include "cli.h"

#include <stdarg.h>
#include <string.h>

static int cmd_help(int argc, char **argv);

static const remat_command commands[] = {
    {"lifetimes", cmd_lifetimes, "GRAPH [--json] [-o FILE]",
     "derive the backward pass and print every tensor's lifetime"},
    {"plan", cmd_plan, "GRAPH [--strategy S] [--budget B | --activation-budget B] [-o PLAN] [--json]",
     "choose what to keep and recompute under a budget; the figures are the replayed ones"},
    {"compare", cmd_compare,
     "GRAPH (--budget B | --activation-budget B) [--json] [--time-limit S] | GRAPH --sweep N [--svg FILE] "
     "[--activation-budget 0]",
     "run every strategy at one budget (a table), or sweep budgets (JSON and an SVG chart); exact gets "
     "--time-limit S seconds (default 1)"},
    {"replay", cmd_replay, "GRAPH [PLAN] [--numeric [--scale K]] [--json] [-o FILE]",
     "replay a plan's schedule (store-all without PLAN): validate it, measure peak and FLOPs"},
    {"ledger", cmd_ledger,
     "(--params N | --graph GRAPH) [--weights DT] [--grads DT] [--states DT] [--master DT] [--comm DT] "
     "[--optimizer NAME] [--frozen-copies K] [--zero S --dp N] [--bucket B | --bucket-elements N] [--prefetch K] "
     "[--workspace B] [--reserve B] [--block N] [--min-8bit N] [--adafactor-beta1] [--json] [-o FILE]",
     "budget one device's weights, gradients, optimizer state, copies and ZeRO shards"},
    {"gen", cmd_gen, "FAMILY [options] [-o FILE]",
     "write a synthetic graph: chain, layered, resnet, transformer or unet"},
    {"trace", cmd_trace,
     "GRAPH [--plan PLAN] [--budget B | --activation-budget B] [--format json|chrome|csv|svg] "
     "[--flops-time [--flops-per-us N]] [--top N] [--width W] [--height H] -o FILE",
     "trace every step and tensor interval of a replay: JSON, Chrome/Perfetto, CSV or SVG timeline"},
    {"audit", cmd_audit, "GRAPH [PLAN] [--top N] [--json] [-o FILE]",
     "explain the peak: its step, bytes per category, the largest live tensors and why each is live"},
    {"step", cmd_step,
     "GRAPH [PLAN] --optimizer sgd|momentum|adam|adamw [--lr X] [--steps K] (--data FILE | --seed S) "
     "[--state STATE] [-o STATE] [--every N]",
     "run real training steps under a plan: losses, measured vs accounted peak, time with and without recompute"},
    {"import", cmd_import, "checkmate|dtr FILE [--name NAME] [-o GRAPH]",
     "convert a Checkmate/Moccasin training graph or a DTR operator log into a remat graph"},
    {"alloc", cmd_alloc,
     "GRAPH [PLAN] [--policy best-fit|first-fit|caching|all] [--static greedy-size|greedy-lifetime|alloc-order|best|none] "
     "[--activation-only] [--svg FILE [--svg-layout static|POLICY]] [--work N] [--json] [-o FILE]",
     "place every allocation in one address space: allocator high-water, fragmentation, a static offset plan"},
    {"help", cmd_help, "[COMMAND]", "show help for remat or one command"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const remat_command *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

void remat_cli_print_usage(FILE *f, const char *cmd)
{
    const remat_command *c = find_command(cmd);
    if (!c)
        return;
    fprintf(f, "usage: remat %s %s", c->name, c->usage);
    if (c->fn == cmd_plan) /* the strategies' options, from their table */
        remat_cli_plan_usage_options(f);
    fprintf(f, "\n  %s\n", c->summary);
}

static void print_help(FILE *f)
{
    fprintf(f, "remat %s - plan activation rematerialization for training, and prove it by replay\n\n"
               "usage: remat COMMAND [options]\n\ncommands:\n",
            REMAT_VERSION);
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n`remat COMMAND --help` shows a command's options. Byte sizes accept 123, 4KiB,\n"
               "1.5GiB (2^30) and 2GB (10^9). Exit codes: 0 ok, 1 invalid result, 2 usage,\n"
               "3 bad input, 4 infeasible budget, 5 internal error.\n");
}

static int cmd_help(int argc, char **argv)
{
    if (argc > 1) {
        if (!find_command(argv[1]))
            return remat_cli_usage_error("help", "unknown command '%s'", argv[1]);
        remat_cli_print_usage(stdout, argv[1]);
        return REMAT_EXIT_OK;
    }
    print_help(stdout);
    return REMAT_EXIT_OK;
}

int remat_cli_exit_for(remat_status st)
{
    switch (st) {
    case REMAT_OK: return REMAT_EXIT_OK;
    case REMAT_EINVAL: return REMAT_EXIT_USAGE;
    case REMAT_EIO:
    case REMAT_EPARSE:
    case REMAT_EGRAPH:
    case REMAT_EPLAN:
    case REMAT_EOVERFLOW:
    case REMAT_EUNSUPPORTED: return REMAT_EXIT_INPUT;
    case REMAT_ESCHEDULE: return REMAT_EXIT_FAIL;
    case REMAT_EINFEASIBLE: return REMAT_EXIT_INFEASIBLE;
    default: return REMAT_EXIT_INTERNAL;
    }
}

int remat_cli_fail(const remat_err *err)
{
    fprintf(stderr, "remat: %s\n", err->msg[0] ? err->msg : remat_status_str(err->code));
    return remat_cli_exit_for(err->code);
}

int remat_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "remat %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    remat_cli_print_usage(stderr, cmd);
    return REMAT_EXIT_USAGE;
}

int remat_cli_open_graph(const char *path, remat_graph **g, remat_analysis **a)
{
    remat_err err;
    remat_err_init(&err);
    *g = NULL;
    *a = NULL;
    if (remat_graph_load_file(path, g, &err) != REMAT_OK)
        return remat_cli_fail(&err);
    if (remat_analyze(*g, a, &err) != REMAT_OK) {
        remat_graph_destroy(*g);
        *g = NULL;
        /* Analysis errors (a cycle) are about the file: name it. */
        fprintf(stderr, "remat: %s: %s\n", path, err.msg);
        return remat_cli_exit_for(err.code);
    }
    return REMAT_EXIT_OK;
}

int remat_cli_write(const char *path, const char *text, size_t len)
{
    remat_err err;
    remat_err_init(&err);
    if (remat__write_file_atomic(path, text, len, &err) != REMAT_OK) {
        fprintf(stderr, "remat: %s\n", err.msg);
        return REMAT_EXIT_INTERNAL;
    }
    return REMAT_EXIT_OK;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        print_help(stderr);
        return REMAT_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("remat %s\n", REMAT_VERSION);
        return REMAT_EXIT_OK;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        print_help(stdout);
        return REMAT_EXIT_OK;
    }
    const remat_command *c = find_command(argv[1]);
    if (!c) {
        fprintf(stderr, "remat: unknown command '%s' (see `remat help`)\n", argv[1]);
        return REMAT_EXIT_USAGE;
    }
    return c->fn(argc - 1, argv + 1);
}

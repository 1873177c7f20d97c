/*
 * cmd_plan.c - `remat plan GRAPH --strategy S (--budget B | --activation-budget B) [-o plan.json] [--json]`.
 *
 * Every printed figure is the replayed one: remat_plan_make replays the
 * plan's schedule and refuses one that exceeds the budget.
 */
#include "cli.h"
#include "ledger_opts.h"
#include "remat/plan.h"
#include "remat/alloc.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_ACT = 256, OPT_TABLE = 512 /* + the option's index in remat_plan_option_table */ };

/* The flag of a remat_plan_options field: dp_step -> dp-step. */
static void flag_of(const char *field, char *buf, size_t cap)
{
    size_t i = 0;
    for (; field[i] && i + 1 < cap; i++)
        buf[i] = field[i] == '_' ? '-' : field[i];
    buf[i] = 0;
}

void remat_cli_plan_usage_options(FILE *f)
{
    size_t n;
    const remat_plan_option_info *t = remat_plan_option_table(&n);
    for (size_t i = 0; i < n; i++) {
        char flag[64];
        flag_of(t[i].name, flag, sizeof flag);
        fprintf(f, " [--%s%s%s]", flag, t[i].arg ? " " : "", t[i].arg ? t[i].arg : "");
    }
}

size_t remat_cli_plan_long_opts(struct option *out, char (*names)[32], size_t cap)
{
    size_t n, k = 0;
    const remat_plan_option_info *t = remat_plan_option_table(&n);
    out[k++] = (struct option){"strategy", required_argument, NULL, 's'};
    out[k++] = (struct option){"budget", required_argument, NULL, 'b'};
    out[k++] = (struct option){"activation-budget", required_argument, NULL, OPT_ACT};
    for (size_t i = 0; i < n && k < cap; i++) {
        flag_of(t[i].name, names[i], sizeof names[i]);
        out[k++] = (struct option){names[i], t[i].arg ? required_argument : no_argument, NULL, OPT_TABLE + (int)i};
    }
    return k;
}

/* Parses the options every planning command shares; returns an exit code.
 * Unknown options are left for the caller (returns -1 for them). The
 * strategies' options come from remat_plan_option_table: the library
 * parses them, and its message, which names the field, is given back with
 * the field spelled as this command's flag. */
int remat_cli_plan_option(const char *cmd, int c, const char *arg, remat_plan_options *o)
{
    remat_err err;
    remat_err_init(&err);
    size_t n;
    const remat_plan_option_info *t = remat_plan_option_table(&n);
    switch (c) {
    case 's': o->strategy = arg; return REMAT_EXIT_OK;
    case 'b':
    case OPT_ACT:
        if (o->budget_kind != REMAT_BUDGET_NONE)
            return remat_cli_usage_error(cmd, "give one of --budget and --activation-budget");
        if (remat_parse_bytes(arg, c == 'b' ? "--budget" : "--activation-budget", &o->budget, &err) != REMAT_OK)
            return remat_cli_usage_error(cmd, "%s", err.msg);
        o->budget_kind = c == 'b' ? REMAT_BUDGET_TOTAL : REMAT_BUDGET_ACTIVATION;
        return REMAT_EXIT_OK;
    }
    if (c < OPT_TABLE || (size_t)(c - OPT_TABLE) >= n)
        return -1;
    const remat_plan_option_info *in = &t[c - OPT_TABLE];
    if (remat_plan_option_set(o, in->name, arg, &err) == REMAT_OK)
        return REMAT_EXIT_OK;
    char flag[64];
    flag_of(in->name, flag, sizeof flag);
    size_t len = strlen(in->name);
    if (strncmp(err.msg, in->name, len) == 0 && err.msg[len] == ':')
        return remat_cli_usage_error(cmd, "--%s%s", flag, err.msg + len);
    return remat_cli_usage_error(cmd, "%s", err.msg);
}

int cmd_plan(int argc, char **argv)
{
    static const struct option tail[] = {
        REMAT_CLI_LEDGER_LONG_OPTS,
        {"json", no_argument, NULL, 'j'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    enum { CAP = 64 };
    struct option opts[CAP + sizeof tail / sizeof tail[0]];
    char names[CAP][32];
    size_t k = remat_cli_plan_long_opts(opts, names, CAP);
    memcpy(opts + k, tail, sizeof tail);
    remat_plan_options o;
    remat_plan_options_init(&o);
    int json = 0, c;
    const char *out = NULL;
    optind = 1;
    remat_cli_ledger L;
    remat_cli_ledger_init(&L);
    while ((c = getopt_long(argc, argv, "s:b:jo:h", opts, NULL)) != -1) {
        int rc = remat_cli_ledger_option("plan", c, optarg, &L);
        if (rc > 0)
            return rc;
        if (rc == 0)
            continue;
        rc = remat_cli_plan_option("plan", c, optarg, &o);
        if (rc > 0)
            return rc;
        if (rc == 0)
            continue;
        switch (c) {
        case 'j': json = 1; break;
        case 'o': out = optarg; break;
        case 'h': {
            remat_cli_print_usage(stdout, "plan");
            size_t n;
            const remat_strategy_info *si = remat_plan_strategies(&n);
            printf("\nstrategies (--strategy, default auto):\n");
            for (size_t i = 0; i < n; i++)
                printf("  %-12s %s\n", si[i].name, si[i].summary);
            size_t no;
            const remat_plan_option_info *t = remat_plan_option_table(&no);
            printf("\nstrategy options:\n");
            for (size_t i = 0; i < no; i++) {
                char flag[64], col[96];
                flag_of(t[i].name, flag, sizeof flag);
                snprintf(col, sizeof col, "--%s%s%s", flag, t[i].arg ? " " : "", t[i].arg ? t[i].arg : "");
                printf("  %-22s %s\n", col, t[i].help);
            }
            printf("\n--budget caps the total peak (every category); --activation-budget caps activations,\n"
                   "recomputed activations, activation gradients and workspace only.\n");
            printf("--budget-mode arena makes the budget cap the arena of a static offset plan of the schedule\n"
                   "(remat alloc; never below the logical peak) instead of the logical peak.\n");
            return REMAT_EXIT_OK;
        }
        default: return remat_cli_usage_error("plan", "bad option");
        }
    }
    if (optind != argc - 1)
        return remat_cli_usage_error("plan", "expected exactly one GRAPH");
    remat_graph *g;
    remat_analysis *a;
    int rc = remat_cli_open_graph(argv[optind], &g, &a);
    if (rc != REMAT_EXIT_OK)
        return rc;
    uint64_t reserve = 0;
    if ((rc = remat_cli_ledger_extras("plan", a, &L, &o.extras, &reserve)) != REMAT_EXIT_OK ||
        (rc = remat_cli_apply_reserve("plan", &o, reserve)) != REMAT_EXIT_OK) {
        remat_cli_ledger_destroy(&L);
        remat_cli_ledger_destroy(&L);
    remat_analysis_destroy(a);
        remat_graph_destroy(g);
        return rc;
    }
    remat_err err;
    remat_err_init(&err);
    remat_plan plan;
    remat_replay_result r;
    remat_status st = remat_plan_make(a, &o, &plan, &r, &err);
    /* Arena mode (issue 11): report the arena the budget was judged by. */
    const int arena_mode = o.budget_mode == REMAT_BUDGET_MODE_ARENA && o.budget_kind != REMAT_BUDGET_NONE;
    uint64_t arena = 0;
    if (st == REMAT_OK && arena_mode) {
        remat_replay_result r2;
        st = remat_alloc_arena(a, &plan.schedule, &o.extras, remat_alloc_mask_for(o.budget_kind), &r2, &arena, &err);
        remat_replay_result_destroy(&r2);
    }
    if (st != REMAT_OK) {
        rc = remat_cli_fail(&err);
        /* An infeasible budget leaves the strategy's best effort with us. */
        remat_replay_result_destroy(&r);
        remat_plan_destroy(&plan);
    } else {
        size_t len;
        char *text = NULL;
        if (out) {
            /* The plan file carries the static plan's offsets (issue 11). */
            /* A sharded rank's static offsets would need the collectives'
             * buffers in the file's schedule, which keeps compute only. */
            text = L.sharded ? remat_report_plan(a, &plan, &r, &len, &err)
                             : remat_report_plan_with_offsets(a, &plan, &r, &o.extras, NULL, &len, &err);
            rc = text ? remat_cli_write(out, text, len) : remat_cli_fail(&err);
            remat_free(text);
        }
        /* Reports name the instructions the sharded replay judged. */
        if (rc == REMAT_EXIT_OK && L.sharded) {
            rc = remat_cli_ledger_shard_schedule(&L, &plan.schedule);
            remat_replay_result_destroy(&r);
            memset(&r, 0, sizeof r);
            if (rc == REMAT_EXIT_OK && remat_replay(a, &plan.schedule, &o.extras, NULL, &r, &err) != REMAT_OK)
                rc = remat_cli_fail(&err);
        }
        if (rc == REMAT_EXIT_OK) {
            text = remat_report_replay(a, &plan.schedule, &r, NULL, json ? REMAT_REPORT_JSON : REMAT_REPORT_TEXT,
                                       &len, &err);
            if (!text) {
                rc = remat_cli_fail(&err);
            } else if (json) {
                /* Wrap the replay summary with the plan's identity. */
                printf("{\"strategy\": \"%s\", \"params\": %s, \"budget\": ", plan.strategy,
                       plan.params_json ? plan.params_json : "{}");
                if (o.budget_kind == REMAT_BUDGET_NONE)
                    printf("null");
                else
                    printf("{\"kind\": \"%s\", \"bytes\": %llu}",
                           o.budget_kind == REMAT_BUDGET_TOTAL ? "total" : "activation",
                           (unsigned long long)o.budget);
                if (arena_mode)
                    printf(",\n \"budget_mode\": \"arena\", \"arena_bytes\": %llu", (unsigned long long)arena);
                printf(",\n \"replay\": %s}\n", text);
            } else {
                char b[64];
                printf("strategy %s %s\n", plan.strategy, plan.params_json ? plan.params_json : "");
                if (o.budget_kind != REMAT_BUDGET_NONE)
                    printf("budget (%s) %s: met\n", o.budget_kind == REMAT_BUDGET_TOTAL ? "total" : "activation",
                           remat_format_bytes(o.budget, b, sizeof b));
                if (arena_mode)
                    printf("arena       %s (static offset plan; the budget caps it)\n",
                           remat_format_bytes(arena, b, sizeof b));
                fputs(text, stdout);
                remat_cli_ledger_print_sharding(stdout, &L, &r);
                if (out)
                    printf("plan written to %s\n", out);
            }
            remat_free(text);
        }
        remat_replay_result_destroy(&r);
        remat_plan_destroy(&plan);
    }
    remat_cli_ledger_destroy(&L);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    return rc;
}

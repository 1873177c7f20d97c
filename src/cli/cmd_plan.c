/*
 * cmd_plan.c - `remat plan GRAPH --strategy S (--budget B | --activation-budget B) [-o plan.json] [--json]`.
 *
 * Every printed figure is the replayed one: remat_plan_make replays the
 * plan's schedule and refuses one that exceeds the budget.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "ledger_opts.h"
#include "time_opts.h"
#include "remat/plan.h"
#include "remat/alloc.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { OPT_ACT = 256, OPT_TABLE = 512 /* + the option's index in remat_plan_option_table */ };

/* The flag of a remat_plan_options field: dp_step -> dp-step. */
static void flag_of(const char *field, char *buf, size_t cap)
{
    size_t i = 0;
    for (; field[i] && i + 1 < cap; i++)
        buf[i] = field[i] == '_' ? '-' : field[i];
    buf[i] = 0;
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

int remat_cli_budget_option(const char *cmd, int total, const char *arg, remat_plan_options *o)
{
    const char *name = total ? "--budget" : "--activation-budget";
    if (o->budget_kind != REMAT_BUDGET_NONE) {
        if ((o->budget_kind == REMAT_BUDGET_TOTAL) == (total != 0))
            return remat_cli_usage_error(cmd, "%s given twice (give it once)", name);
        return remat_cli_usage_error(cmd, "give one of --budget and --activation-budget, not both");
    }
    remat_err err;
    remat_err_init(&err);
    if (remat_parse_bytes(arg, name, &o->budget, &err) != REMAT_OK)
        return remat_cli_usage_err(cmd, &err);
    o->budget_kind = total ? REMAT_BUDGET_TOTAL : REMAT_BUDGET_ACTIVATION;
    return REMAT_EXIT_OK;
}

static int lists(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return 1;
    return 0;
}

/* Whether strategy s reads option `name`, by the strategy table
 * (remat/plan.h): its own options, and for one that runs the others (auto)
 * theirs too, except `linearized`, whose two forms auto tries itself. */
static int reads(const remat_strategy_info *s, const remat_strategy_info *all, size_t n, const char *name)
{
    if (lists(s->options, name))
        return 1;
    if (!(s->flags & REMAT_STRATEGY_RUNS_OTHERS) || strcmp(name, "linearized") == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((all[i].flags & REMAT_STRATEGY_AUTO) && lists(all[i].options, name))
            return 1;
    return 0;
}

int remat_cli_plan_check(const char *cmd, const remat_plan_options *o)
{
    size_t ns, no;
    const remat_strategy_info *si = remat_plan_strategies(&ns);
    const remat_plan_option_info *t = remat_plan_option_table(&no);
    const char *name = o->strategy ? o->strategy : "auto";
    const remat_strategy_info *s = NULL;
    for (size_t i = 0; i < ns; i++)
        if (strcmp(si[i].name, name) == 0)
            s = &si[i];
    for (size_t k = 0; s && k < no; k++) {
        if (!remat_plan_option_given(o, t[k].name) || reads(s, si, ns, t[k].name))
            continue;
        /* An option given to a strategy that would ignore it: name both,
         * and the strategies that read it. One that no strategy lists
         * (budget_mode) is read by every strategy. */
        char flag[64], who[256] = "";
        flag_of(t[k].name, flag, sizeof flag);
        for (size_t i = 0; i < ns; i++)
            if (reads(&si[i], si, ns, t[k].name)) {
                size_t len = strlen(who);
                snprintf(who + len, sizeof who - len, "%s%s", len ? " " : "", si[i].name);
            }
        if (!who[0])
            continue;
        return remat_cli_usage_error(cmd, "--%s does not apply to --strategy %s (it applies to %s)", flag, name, who);
    }
    if (o->dp_step && o->dp_slots)
        return remat_cli_usage_error(cmd, "give one of --dp-step and --dp-slots, not both");
    if (o->budget_mode == REMAT_BUDGET_MODE_ARENA && o->budget_kind == REMAT_BUDGET_NONE)
        return remat_cli_usage_error(cmd, "--budget-mode arena needs a budget (--budget or --activation-budget)");
    return REMAT_EXIT_OK;
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
    case OPT_ACT: return remat_cli_budget_option(cmd, c == 'b', arg, o);
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
    return remat_cli_usage_err(cmd, &err);
}

/* In logical mode the budget caps the accounted peak; a static offset plan
 * of the same schedule can need more (fragmentation), and a user who sizes a
 * device by the budget should hear so. arena: the plan file's, when -o
 * computed it (it covers every category, as a total budget does); else one
 * is computed here for the budget's categories. */
static void warn_arena(const remat_analysis *a, const remat_plan *plan, const remat_plan_options *o, uint64_t arena)
{
    if (!arena || o->budget_kind == REMAT_BUDGET_ACTIVATION) {
        remat_replay_result r2;
        remat_err e2;
        remat_err_init(&e2);
        arena = 0;
        if (remat_alloc_arena(a, &plan->schedule, &o->extras, remat_alloc_mask_for(o->budget_kind), &r2, &arena, &e2) !=
            REMAT_OK)
            arena = 0; /* out of memory: no warning rather than a failure */
        remat_replay_result_destroy(&r2);
    }
    if (arena <= o->budget)
        return;
    char b1[64], b2[64];
    fprintf(stderr,
            "remat: warning: the static arena of this plan (remat alloc) is %s, over the %s budget of %s: the budget "
            "caps the logical peak; --budget-mode arena caps the arena\n",
            remat_format_bytes(arena, b1, sizeof b1), o->budget_kind == REMAT_BUDGET_ACTIVATION ? "activation" : "total",
            remat_format_bytes(o->budget, b2, sizeof b2));
}

/* A progress line on a terminal (stderr only, and only when it is a TTY:
 * logs and pipes get nothing): what planning is doing and for how long. A
 * 20000-op plan takes seconds, and silence looks like a hang. */
typedef struct {
    struct timespec t0;
    int shown;
} plan_progress;

static double since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) * 1e-9;
}

static void show_progress(void *ctx, const char *what, size_t done, size_t total)
{
    plan_progress *p = ctx;
    fprintf(stderr, "\rremat plan: %-22s %3zu%% %7.1f s", what, total ? 100 * done / total : 0, since(&p->t0));
    fflush(stderr);
    p->shown = 1;
}

static void end_progress(plan_progress *p)
{
    if (p->shown)
        fprintf(stderr, "\r%60s\r", "");
    fflush(stderr);
}

static void print_budget_json(FILE *f, const remat_plan_options *o)
{
    if (o->budget_kind == REMAT_BUDGET_NONE)
        fprintf(f, "null");
    else
        fprintf(f, "{\"kind\": \"%s\", \"bytes\": %llu}", o->budget_kind == REMAT_BUDGET_TOTAL ? "total" : "activation",
                (unsigned long long)o->budget);
}

/* --json on an infeasible budget still prints a document: feasible false,
 * the smallest budget the strategy's best effort meets (null when it made
 * none, as exact may), and the message. */
static void print_infeasible_json(const remat_analysis *a, const remat_plan_options *o, const remat_plan *plan,
                                  const remat_replay_result *r, int arena_mode, const remat_err *err, FILE *f)
{
    int have = r->recompute_counts != NULL;
    uint64_t smallest = 0;
    if (have)
        smallest = o->budget_kind == REMAT_BUDGET_ACTIVATION ? r->activation_peak : r->peak_bytes;
    if (have && arena_mode) { /* the arena, which the budget capped */
        remat_replay_result r2;
        remat_err e2;
        remat_err_init(&e2);
        have = remat_alloc_arena(a, &plan->schedule, &o->extras, remat_alloc_mask_for(o->budget_kind), &r2, &smallest,
                                 &e2) == REMAT_OK;
        remat_replay_result_destroy(&r2);
    }
    remat_buf b;
    remat_buf_init(&b);
    remat_buf_puts(&b, "{\"strategy\": ");
    remat_buf_json_str(&b, o->strategy ? o->strategy : "auto");
    remat_buf_puts(&b, ", \"feasible\": false, \"budget\": ");
    if (o->budget_kind == REMAT_BUDGET_NONE)
        remat_buf_puts(&b, "null");
    else
        remat_buf_printf(&b, "{\"kind\": \"%s\", \"bytes\": %llu}",
                         o->budget_kind == REMAT_BUDGET_TOTAL ? "total" : "activation", (unsigned long long)o->budget);
    if (arena_mode)
        remat_buf_puts(&b, ", \"budget_mode\": \"arena\"");
    if (have)
        remat_buf_printf(&b, ", \"smallest_budget\": %llu", (unsigned long long)smallest);
    else
        remat_buf_puts(&b, ", \"smallest_budget\": null");
    char said[2 * REMAT_ERR_MSG_MAX];
    remat_buf_puts(&b, ", \"message\": ");
    remat_buf_json_str(&b, remat_cli_in_flags(err, said, sizeof said));
    remat_buf_puts(&b, "}\n");
    if (!b.failed)
        fputs(b.data, f);
    remat_buf_destroy(&b);
}

int cmd_plan(int argc, char **argv)
{
    static const struct option tail[] = {
        REMAT_CLI_LEDGER_LONG_OPTS,
        REMAT_CLI_TIME_LONG_OPTS,
        REMAT_CLI_PP_LONG_OPTS,
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    enum { CAP = 64 };
    struct option own[CAP + sizeof tail / sizeof tail[0]];
    struct option opts[CAP + sizeof tail / sizeof tail[0] + REMAT_CLI_FORMAT_FLAGS];
    char names[CAP][32];
    size_t k = remat_cli_plan_long_opts(own, names, CAP);
    memcpy(own + k, tail, sizeof tail);
    /* Its documents: the replay summary, or with --pp the pipeline report. */
    remat_cli_options(REMAT_CLI_DOC(REMAT_DOC_REPLAY) | REMAT_CLI_DOC(REMAT_DOC_PIPELINE), own, opts);
    remat_plan_options o;
    remat_plan_options_init(&o);
    int json = 0, c, rc0;
    const char *out = NULL;
    optind = 1;
    remat_cli_ledger L;
    remat_cli_ledger_init(&L);
    remat_cli_time T;
    remat_cli_time_init(&T);
    remat_cli_pp pp;
    remat_cli_pp_init(&pp);
    while ((c = remat_cli_getopt(argc, argv, "s:b:jo:h", opts)) != -1) {
        int rc = remat_cli_pp_option("plan", c, optarg, &pp);
        if (rc > 0)
            return rc;
        if (rc == 0)
            continue;
        rc = remat_cli_ledger_option("plan", c, optarg, &L);
        if (rc > 0)
            return rc;
        if (rc == 0)
            continue;
        if ((rc = remat_cli_time_option("plan", c, optarg, 1, &T)) > 0)
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
    if ((rc0 = remat_cli_plan_check("plan", &o)) != REMAT_EXIT_OK ||
        (rc0 = remat_cli_pp_check("plan", &pp)) != REMAT_EXIT_OK)
        return rc0;
    if ((rc0 = remat_cli_time_load("plan", &T, &o)) != REMAT_EXIT_OK)
        return rc0;
    pp.plan_out = out;
    remat_graph *g;
    remat_analysis *a;
    int rc = remat_cli_open_graph(argv[optind], &g, &a);
    if (rc != REMAT_EXIT_OK)
        return rc;
    if (pp.set) {
        /* The ledger's state goes per stage (pp_ledger.c). */
        pp.ledger = L.used ? &L : NULL;
        rc = remat_cli_pp_run("plan", argv[optind], a, &pp, &o, json, stdout);
        remat_cli_ledger_destroy(&L);
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
        return rc;
    }
    uint64_t reserve = 0;
    if ((rc = remat_cli_ledger_extras("plan", a, &L, &o.extras, &reserve)) != REMAT_EXIT_OK ||
        (rc = remat_cli_apply_reserve("plan", &o, reserve)) != REMAT_EXIT_OK) {
        remat_cli_ledger_destroy(&L);
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
        return rc;
    }
    remat_err err;
    remat_err_init(&err);
    remat_plan plan;
    remat_replay_result r;
    plan_progress prog = {.shown = 0};
    if (isatty(STDERR_FILENO)) {
        clock_gettime(CLOCK_MONOTONIC, &prog.t0);
        o.progress = show_progress;
        o.progress_ctx = &prog;
    }
    remat_status st = remat_plan_make(a, &o, &plan, &r, &err);
    end_progress(&prog);
    /* Arena mode (issue 11): report the arena the budget was judged by. */
    const int arena_mode = o.budget_mode == REMAT_BUDGET_MODE_ARENA && o.budget_kind != REMAT_BUDGET_NONE;
    uint64_t arena = 0;
    if (st == REMAT_OK && arena_mode) {
        remat_replay_result r2;
        st = remat_alloc_arena(a, &plan.schedule, &o.extras, remat_alloc_mask_for(o.budget_kind), &r2, &arena, &err);
        remat_replay_result_destroy(&r2);
    }
    FILE *H = remat_cli_human(out); /* -o -: stdout carries the plan alone */
    if (st != REMAT_OK) {
        /* Sizes that overflow are the graph file's. */
        rc = st == REMAT_EOVERFLOW ? remat_cli_fail_in(argv[optind], &err) : remat_cli_fail(&err);
        if (json && st == REMAT_EINFEASIBLE)
            print_infeasible_json(a, &o, &plan, &r, arena_mode, &err, H);
        /* An infeasible budget leaves the strategy's best effort with us. */
        remat_replay_result_destroy(&r);
        remat_plan_destroy(&plan);
    } else {
        size_t len;
        char *text = NULL;
        uint64_t static_arena = 0;
        if (out) {
            /* The plan file carries the static plan's offsets (issue 11). */
            /* A sharded rank's static offsets would need the collectives'
             * buffers in the file's schedule, which keeps compute only. */
            text = L.sharded ? remat_report_plan(a, &plan, &r, &len, &err)
                             : remat_report_plan_with_offsets(a, &plan, &r, &o.extras, &static_arena, &len, &err);
            rc = text ? remat_cli_write(out, text, len) : remat_cli_fail(&err);
            remat_free(text);
        }
        if (rc == REMAT_EXIT_OK && !arena_mode && !L.sharded && o.budget_kind != REMAT_BUDGET_NONE)
            warn_arena(a, &plan, &o, out ? static_arena : 0);
        /* Reports name the instructions the sharded replay judged. */
        if (rc == REMAT_EXIT_OK && L.sharded) {
            rc = remat_cli_ledger_shard_schedule(&L, &plan.schedule);
            remat_replay_result_destroy(&r);
            memset(&r, 0, sizeof r);
            if (rc == REMAT_EXIT_OK && remat_replay(a, &plan.schedule, &o.extras, NULL, &r, &err) != REMAT_OK)
                rc = remat_cli_fail(&err);
        }
        if (rc == REMAT_EXIT_OK) {
            remat_report_input in = {.a = a, .s = &plan.schedule, .r = &r};
            text = remat_report_write(REMAT_DOC_REPLAY, &in, remat_cli_format(REMAT_DOC_REPLAY, json), &len, &err);
            if (text && (rc = remat_cli_time_append(&T, a, &plan.schedule, &o.extras, json, &text, &len)) !=
                            REMAT_EXIT_OK) {
                /* the error is printed */
            } else if (!text) {
                rc = remat_cli_fail(&err);
            } else if (json) {
                /* Wrap the replay summary with the plan's identity. */
                fprintf(H, "{\"strategy\": \"%s\", \"params\": %s, \"feasible\": true, \"budget\": ", plan.strategy,
                        plan.params_json ? plan.params_json : "{}");
                print_budget_json(H, &o);
                if (arena_mode)
                    fprintf(H, ",\n \"budget_mode\": \"arena\", \"arena_bytes\": %llu", (unsigned long long)arena);
                fprintf(H, ",\n \"replay\": %s}\n", text);
            } else {
                char b[64];
                fprintf(H, "strategy %s %s\n", plan.strategy, plan.params_json ? plan.params_json : "");
                if (o.budget_kind != REMAT_BUDGET_NONE)
                    fprintf(H, "budget (%s) %s: met\n", o.budget_kind == REMAT_BUDGET_TOTAL ? "total" : "activation",
                            remat_format_bytes(o.budget, b, sizeof b));
                if (arena_mode)
                    fprintf(H, "arena       %s (static offset plan; the budget caps it)\n",
                            remat_format_bytes(arena, b, sizeof b));
                fputs(text, H);
                remat_cli_ledger_print_sharding(H, &L, &r);
                rc = remat_cli_ledger_write_ds(&L, a, &plan.schedule, &r, H);
                if (out && strcmp(out, "-") != 0)
                    fprintf(H, "plan written to %s\n", out);
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

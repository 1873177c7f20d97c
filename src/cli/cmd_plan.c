/*
 * cmd_plan.c - `remat plan GRAPH --strategy S (--budget B | --activation-budget B) [-o plan.json] [--json]`.
 *
 * Every printed figure is the replayed one: remat_plan_make replays the
 * plan's schedule and refuses one that exceeds the budget.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "ledger_opts.h"
#include "remat/plan.h"
#include "remat/alloc.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { OPT_ACT = 256, OPT_LINEAR, OPT_SEGMENTS, OPT_DPSTEP, OPT_DPSLOTS, OPT_TIME, OPT_NEVER, OPT_DTR_SCORE,
       OPT_BUDGET_MODE /* issue 11 */ };

static int parse_u32(const char *cmd, const char *opt, const char *s, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || s[0] == '-' || s[0] == '+')
        return remat_cli_usage_error(cmd, "%s: '%s' is not a whole number", opt, s);
    if (v > UINT32_MAX || errno == ERANGE)
        return remat_cli_usage_error(cmd, "%s: %s is out of range (at most %u)", opt, s, UINT32_MAX);
    *out = (uint32_t)v;
    return REMAT_EXIT_OK;
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
        return remat_cli_usage_error(cmd, "%s", err.msg);
    o->budget_kind = total ? REMAT_BUDGET_TOTAL : REMAT_BUDGET_ACTIVATION;
    return REMAT_EXIT_OK;
}

/* Which strategies read each strategy option. auto hands every option on
 * to the strategies it runs, except --linearized: it tries both forms of
 * sqrtn and chen-greedy itself. One table, so that an option given to a
 * strategy that would ignore it is an error naming both, never a silent
 * no-op. */
static const struct {
    const char *option;
    const char *strategies; /* space-separated, as the message lists them */
} applies[] = {
    {"--linearized", "sqrtn chen-greedy"},
    {"--segments", "sqrtn auto"},
    {"--dp-step", "chain-dp auto"},
    {"--dp-slots", "chain-dp auto"},
    {"--time-limit", "exact auto"},
    {"--never-recompute", "mincut auto"},
    {"--dtr-score", "dtr auto"},
};

static int option_given(const remat_plan_options *o, size_t i)
{
    switch (i) {
    case 0: return o->linearized != 0;
    case 1: return o->segments != 0;
    case 2: return o->dp_step != 0;
    case 3: return o->dp_slots != 0;
    case 4: return o->time_limit > 0;
    case 5: return o->never_recompute != NULL;
    default: return o->dtr_score != NULL;
    }
}

static int lists(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return 1;
    return 0;
}

int remat_cli_plan_check(const char *cmd, const remat_plan_options *o)
{
    const char *s = o->strategy ? o->strategy : "auto";
    for (size_t i = 0; i < sizeof applies / sizeof applies[0]; i++)
        if (option_given(o, i) && !lists(applies[i].strategies, s))
            return remat_cli_usage_error(cmd, "%s does not apply to --strategy %s (it applies to %s)", applies[i].option,
                                         s, applies[i].strategies);
    if (o->dp_step && o->dp_slots)
        return remat_cli_usage_error(cmd, "give one of --dp-step and --dp-slots, not both");
    if (o->budget_mode == REMAT_BUDGET_MODE_ARENA && o->budget_kind == REMAT_BUDGET_NONE)
        return remat_cli_usage_error(cmd, "--budget-mode arena needs a budget (--budget or --activation-budget)");
    return REMAT_EXIT_OK;
}

/* Parses the options every planning command shares; returns an exit code.
 * Unknown options are left for the caller (returns -1 for them). */
int remat_cli_plan_option(const char *cmd, int c, const char *arg, remat_plan_options *o)
{
    remat_err err;
    remat_err_init(&err);
    switch (c) {
    case 's': o->strategy = arg; return REMAT_EXIT_OK;
    case 'b':
    case OPT_ACT: return remat_cli_budget_option(cmd, c == 'b', arg, o);
    case OPT_LINEAR: o->linearized = 1; return REMAT_EXIT_OK;
    case OPT_SEGMENTS: return parse_u32(cmd, "--segments", arg, &o->segments);
    case OPT_DPSLOTS: return parse_u32(cmd, "--dp-slots", arg, &o->dp_slots);
    case OPT_DPSTEP:
        if (remat_parse_bytes(arg, "--dp-step", &o->dp_step, &err) != REMAT_OK)
            return remat_cli_usage_error(cmd, "%s", err.msg);
        return REMAT_EXIT_OK;
    case OPT_TIME: {
        char *end;
        double v = strtod(arg, &end);
        if (!*arg || *end || !(v > 0) || !isfinite(v))
            return remat_cli_usage_error(cmd, "--time-limit: '%s' is not a positive number of seconds", arg);
        o->time_limit = v;
        return REMAT_EXIT_OK;
    }
    case OPT_NEVER: o->never_recompute = arg; return REMAT_EXIT_OK;
    case OPT_DTR_SCORE: /* dtr's eviction score; checked against the list here so a typo is a usage error */
        if (strcmp(arg, "h_dtr") != 0 && strcmp(arg, "eq") != 0 && strcmp(arg, "local") != 0 &&
            strcmp(arg, "best") != 0)
            return remat_cli_usage_error(cmd, "--dtr-score: '%s' is not one of h_dtr, eq, local, best", arg);
        o->dtr_score = arg;
        return REMAT_EXIT_OK;
    case OPT_BUDGET_MODE: /* issue 11: what the budget caps, the logical peak or the static arena */
        if (strcmp(arg, "logical") == 0)
            o->budget_mode = REMAT_BUDGET_MODE_LOGICAL;
        else if (strcmp(arg, "arena") == 0)
            o->budget_mode = REMAT_BUDGET_MODE_ARENA;
        else
            return remat_cli_usage_error(cmd, "--budget-mode: '%s' is not one of logical, arena", arg);
        return REMAT_EXIT_OK;
    }
    return -1;
}

#define PLAN_LONG_OPTS                                                   \
    {"strategy", required_argument, NULL, 's'},                         \
    {"budget", required_argument, NULL, 'b'},                           \
    {"activation-budget", required_argument, NULL, OPT_ACT},            \
    {"linearized", no_argument, NULL, OPT_LINEAR},                      \
    {"segments", required_argument, NULL, OPT_SEGMENTS},                \
    {"dp-step", required_argument, NULL, OPT_DPSTEP},                   \
    {"dp-slots", required_argument, NULL, OPT_DPSLOTS},                 \
    {"time-limit", required_argument, NULL, OPT_TIME},                  \
    {"never-recompute", required_argument, NULL, OPT_NEVER},            \
    {"dtr-score", required_argument, NULL, OPT_DTR_SCORE},              \
    {"budget-mode", required_argument, NULL, OPT_BUDGET_MODE}

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
    remat_buf_puts(&b, ", \"message\": ");
    remat_buf_json_str(&b, err->msg);
    remat_buf_puts(&b, "}\n");
    if (!b.failed)
        fputs(b.data, f);
    remat_buf_destroy(&b);
}

int cmd_plan(int argc, char **argv)
{
    static const struct option opts[] = {
        PLAN_LONG_OPTS,
        REMAT_CLI_LEDGER_LONG_OPTS,
        {"json", no_argument, NULL, 'j'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    remat_plan_options o;
    remat_plan_options_init(&o);
    int json = 0, c, rc0;
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
    if ((rc0 = remat_cli_plan_check("plan", &o)) != REMAT_EXIT_OK)
        return rc0;
    remat_graph *g;
    remat_analysis *a;
    int rc = remat_cli_open_graph(argv[optind], &g, &a);
    if (rc != REMAT_EXIT_OK)
        return rc;
    uint64_t reserve = 0;
    if ((rc = remat_cli_ledger_extras("plan", g, &L, &o.extras, &reserve)) != REMAT_EXIT_OK ||
        (rc = remat_cli_apply_reserve("plan", &o, reserve)) != REMAT_EXIT_OK) {
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
            text = remat_report_plan_with_offsets(a, &plan, &r, &o.extras, &static_arena, &len, &err);
            rc = text ? remat_cli_write(out, text, len) : remat_cli_fail(&err);
            remat_free(text);
        }
        if (rc == REMAT_EXIT_OK && !arena_mode && o.budget_kind != REMAT_BUDGET_NONE)
            warn_arena(a, &plan, &o, out ? static_arena : 0);
        if (rc == REMAT_EXIT_OK) {
            text = remat_report_replay(a, &plan.schedule, &r, NULL, json ? REMAT_REPORT_JSON : REMAT_REPORT_TEXT,
                                       &len, &err);
            if (!text) {
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
                if (out && strcmp(out, "-") != 0)
                    fprintf(H, "plan written to %s\n", out);
            }
            remat_free(text);
        }
        remat_replay_result_destroy(&r);
        remat_plan_destroy(&plan);
    }
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    return rc;
}

/*
 * cmd_trace.c - `remat trace GRAPH [--plan PLAN] [--budget B | --activation-budget B]
 *               [--format json|chrome|csv|svg] [--flops-time [--flops-per-us N]] [-o FILE]`.
 *
 * Replays the plan's schedule (store-all without a plan) with the tracer and
 * writes the trace whole, or nothing. The format comes from --format, else
 * from the output's name: NAME.trace.json is a Chrome trace (the name
 * Perfetto users expect), NAME.json the remat-trace JSON, NAME.csv and
 * NAME.svg the obvious ones. The budget drawn in the SVG and recorded in the
 * JSON is --budget/--activation-budget, else the plan's own.
 *
 * remat_cli_trace_open, shared with `remat audit`, loads the graph and the
 * plan and builds the trace.
 */
#include "cli.h"
#include "ledger_opts.h"
#include "remat/trace.h"
#include "time_opts.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { FMT_NONE = -1, FMT_JSON = REMAT_TRACE_FORMAT_JSON, FMT_CHROME = REMAT_TRACE_FORMAT_CHROME,
       FMT_CSV = REMAT_TRACE_FORMAT_CSV, FMT_SVG = REMAT_TRACE_FORMAT_SVG };
enum { OPT_PLAN = 256, OPT_ACT, OPT_FLOPS_TIME, OPT_PER_US, OPT_TOP, OPT_WIDTH, OPT_HEIGHT };

/* The format's names or suffixes from the library's table, as "a, b, c or d". */
static void format_list(char *buf, size_t cap, int suffixes)
{
    size_t n;
    const remat_trace_format_info *f = remat_trace_formats(&n);
    buf[0] = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(buf);
        snprintf(buf + len, cap - len, "%s%s", i == 0 ? "" : i + 1 == n ? " or " : ", ",
                 suffixes ? f[i].suffix : f[i].name);
    }
}

static int format_from_name(const char *path)
{
    remat_trace_format f;
    return remat_trace_format_of_path(path, &f) ? (int)f : FMT_NONE;
}

static int format_from_option(const char *s)
{
    remat_trace_format f;
    return remat_trace_format_parse(s, &f) ? (int)f : FMT_NONE;
}

/* The format's name, for messages. */
static const char *format_label(int fmt)
{
    switch (fmt) {
    case FMT_JSON: return "json";
    case FMT_CHROME: return "chrome";
    case FMT_CSV: return "csv";
    default: return "svg";
    }
}

int remat_cli_trace_open(const char *graph, const char *plan_path, remat_cli_ledger *L, remat_graph **g,
                         remat_analysis **a, remat_plan *plan, remat_trace **t, remat_exec_extras *xo)
{
    *t = NULL;
    int rc = remat_cli_open_graph(graph, g, a);
    if (rc != REMAT_EXIT_OK)
        return rc;
    remat_err err;
    remat_err_init(&err);
    remat_status st;
    if (plan_path) {
        st = remat_plan_load_file(*g, plan_path, plan, &err);
    } else {
        st = remat_schedule_store_all(*a, &plan->schedule, &err);
        if (st == REMAT_OK && !(plan->strategy = remat__strdup("store-all")))
            st = remat_err_set(&err, REMAT_ENOMEM, "out of memory");
    }
    remat_exec_extras x;
    memset(&x, 0, sizeof x);
    if (st == REMAT_OK && L) {
        /* The ledger's state, and with --dp the rank's collectives inserted
         * into the schedule so the trace's steps are the replay's. */
        uint64_t reserve;
        if ((rc = remat_cli_ledger_extras(L->cmd, *a, L, &x, &reserve)) == REMAT_EXIT_OK)
            rc = remat_cli_ledger_shard_schedule(L, &plan->schedule);
        if (rc != REMAT_EXIT_OK) {
            remat_analysis_destroy(*a);
            remat_graph_destroy(*g);
            *a = NULL;
            *g = NULL;
            return rc;
        }
    }
    if (st == REMAT_OK)
        st = remat_trace_build(*a, &plan->schedule, &x, t, &err);
    if (xo)
        *xo = x;
    if (st != REMAT_OK) {
        rc = remat_cli_fail_in(plan_path ? plan_path : graph, &err);
        remat_analysis_destroy(*a);
        remat_graph_destroy(*g);
        *a = NULL;
        *g = NULL;
    }
    return rc;
}

/* trace --pp (store-all stages), or trace --plan FILE with a pipeline plan
 * file (`remat plan --pp ... -o FILE`, its stages' own plans): the timed
 * pipeline's Chrome trace. A budget plans nothing here, as for one device:
 * plan under it with `remat plan --pp`, then trace the file. */
static int trace_pipeline(const char *graph, const char *pp_plan, int fmt, const remat_cli_time *T,
                          remat_cli_ledger *L, const remat_cli_pp *pp, const remat_trace_options *to,
                          int budget_given, const char *out)
{
    int rc;
    if (fmt != FMT_CHROME || !T->have_device || L->used || to->flops_time || budget_given) {
        rc = remat_cli_usage_error("trace", "a pipeline is traced on a device's time axis: give --format chrome and "
                                            "--device, and no --budget, --flops-time or ledger options (plan under "
                                            "a budget with remat plan --pp ... -o FILE, then trace --plan FILE)");
        remat_cli_ledger_destroy(L);
        return rc;
    }
    remat_graph *g;
    remat_analysis *a;
    if ((rc = remat_cli_open_graph(graph, &g, &a)) == REMAT_EXIT_OK) {
        remat_plan_options po;
        remat_plan_options_init(&po);
        po.strategy = "store-all";
        po.device = &T->dev;
        rc = remat_cli_pp_trace(graph, a, pp, pp_plan, &po, out ? out : "-");
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
    }
    remat_cli_ledger_destroy(L);
    return rc;
}

/* True when path reads as a pipeline plan file. */
static int is_pp_plan(const char *path)
{
    char *text = NULL;
    size_t len = 0;
    remat_err err;
    remat_err_init(&err);
    int yes = remat__read_file(path, &text, &len, &err) == REMAT_OK && remat_pp_plan_sniff(text, len);
    remat__free(text);
    return yes;
}

int cmd_trace(int argc, char **argv)
{
    static const struct option opts[] = {
        {"plan", required_argument, NULL, OPT_PLAN},
        {"budget", required_argument, NULL, 'b'},
        {"activation-budget", required_argument, NULL, OPT_ACT},
        {"format", required_argument, NULL, 'f'},
        {"flops-time", no_argument, NULL, OPT_FLOPS_TIME},
        {"flops-per-us", required_argument, NULL, OPT_PER_US},
        {"top", required_argument, NULL, OPT_TOP},
        {"width", required_argument, NULL, OPT_WIDTH},
        {"height", required_argument, NULL, OPT_HEIGHT},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        REMAT_CLI_LEDGER_LONG_OPTS,
        REMAT_CLI_TIME_LONG_OPTS,
        REMAT_CLI_PP_LONG_OPTS,
        {NULL, 0, NULL, 0},
    };
    remat_cli_pp pp;
    remat_cli_pp_init(&pp);
    remat_cli_ledger L;
    remat_cli_ledger_init(&L);
    L.cmd = "trace";
    remat_cli_time T;
    remat_cli_time_init(&T);
    remat_trace_options o;
    remat_trace_options_init(&o);
    const char *out = NULL, *plan_path = NULL, *per_us = NULL;
    int fmt = FMT_NONE, c, rc0, budget_given = 0;
    uint64_t v;
    remat_err err;
    remat_err_init(&err);
    optind = 1;
    while ((c = getopt_long(argc, argv, "b:f:o:h", opts, NULL)) != -1) {
        int lrc = remat_cli_ledger_option("trace", c, optarg, &L);
        if (lrc >= 0) {
            if (lrc != REMAT_EXIT_OK)
                return lrc;
            continue;
        }
        if ((lrc = remat_cli_time_option("trace", c, optarg, 0, &T)) >= 0) {
            if (lrc != REMAT_EXIT_OK)
                return lrc;
            continue;
        }
        if ((lrc = remat_cli_pp_option("trace", c, optarg, &pp)) >= 0) {
            if (lrc != REMAT_EXIT_OK)
                return lrc;
            continue;
        }
        switch (c) {
        case OPT_PLAN: plan_path = optarg; break;
        case 'b':
        case OPT_ACT:
            if (budget_given && (o.budget_kind == REMAT_BUDGET_TOTAL) == (c == 'b'))
                return remat_cli_usage_error("trace", "%s given twice (give it once)",
                                             c == 'b' ? "--budget" : "--activation-budget");
            if (budget_given)
                return remat_cli_usage_error("trace", "give one of --budget and --activation-budget, not both");
            if (remat_parse_bytes(optarg, c == 'b' ? "--budget" : "--activation-budget", &o.budget, &err) != REMAT_OK)
                return remat_cli_usage_error("trace", "%s", err.msg);
            o.budget_kind = c == 'b' ? REMAT_BUDGET_TOTAL : REMAT_BUDGET_ACTIVATION;
            budget_given = 1;
            break;
        case 'f':
            if ((fmt = format_from_option(optarg)) == FMT_NONE) {
                char list[128];
                format_list(list, sizeof list, 0);
                return remat_cli_usage_error("trace", "--format: '%s' is not %s", optarg, list);
            }
            break;
        case OPT_FLOPS_TIME: o.flops_time = 1; break;
        case OPT_PER_US: per_us = optarg; break;
        case OPT_TOP:
            if ((rc0 = remat_cli_parse_count("trace", "--top", optarg, 1, 1000, &v)) != REMAT_EXIT_OK)
                return rc0;
            o.top = (uint32_t)v;
            break;
        case OPT_WIDTH:
        case OPT_HEIGHT:
            if ((rc0 = remat_cli_parse_count("trace", c == OPT_WIDTH ? "--width" : "--height", optarg, 1, 20000, &v)) !=
                REMAT_EXIT_OK)
                return rc0;
            *(c == OPT_WIDTH ? &o.width : &o.height) = (uint32_t)v;
            break;
        case 'o': out = optarg; break;
        case 'h': remat_cli_print_usage(stdout, "trace"); return REMAT_EXIT_OK;
        default: return remat_cli_usage_error("trace", "bad option");
        }
    }
    if (optind != argc - 1 && !(optind == argc - 2 && !plan_path))
        return remat_cli_usage_error("trace", "expected GRAPH (and the plan as --plan PLAN)");
    if (optind == argc - 2)
        plan_path = argv[optind + 1];
    /* A format that contradicts the file's name would write, say, CSV into
     * x.svg: an error, not a surprise (a Chrome trace may be any .json). */
    const int named = out ? format_from_name(out) : FMT_NONE;
    if (fmt != FMT_NONE && named != FMT_NONE && fmt != named && !(fmt == FMT_CHROME && named == FMT_JSON))
        return remat_cli_usage_error("trace", "--format %s does not match -o %s (name the file for its format, or drop "
                                              "--format)",
                                     format_label(fmt), out);
    if (fmt == FMT_NONE)
        fmt = named;
    if (fmt == FMT_NONE) {
        char list[128];
        format_list(list, sizeof list, 1);
        return remat_cli_usage_error("trace", "give --format, or an -o name ending %s", list);
    }
    if (per_us && !o.flops_time)
        return remat_cli_usage_error("trace", "--flops-per-us applies to --flops-time only");
    if (per_us && (rc0 = remat_cli_parse_count("trace", "--flops-per-us", per_us, 1, UINT64_MAX, &o.flops_per_us)) !=
                      REMAT_EXIT_OK)
        return rc0;
    if (o.flops_time && fmt != FMT_CHROME)
        return remat_cli_usage_error("trace", "--flops-time applies to the Chrome trace only");
    if ((o.width || o.height) && fmt != FMT_SVG)
        return remat_cli_usage_error("trace", "--width and --height apply to the SVG only");
    if (T.device_arg && fmt != FMT_CHROME)
        return remat_cli_usage_error("trace", "--device applies to the Chrome trace only (its time axis)");
    if (T.device_arg && o.flops_time)
        return remat_cli_usage_error("trace", "give one of --device and --flops-time, not both");
    if ((rc0 = remat_cli_time_load("trace", &T, NULL)) != REMAT_EXIT_OK)
        return rc0;
    if ((rc0 = remat_cli_pp_check("trace", &pp)) != REMAT_EXIT_OK)
        return rc0;
    const int pp_file = plan_path && is_pp_plan(plan_path);
    if (pp.set && plan_path)
        return remat_cli_usage_error("trace", "--pp traces store-all stages; a pipeline plan file gives its own "
                                              "pipeline (give --plan FILE without --pp)");
    if (pp.set || pp_file)
        return trace_pipeline(argv[optind], pp_file ? plan_path : NULL, fmt, &T, &L, &pp, &o, budget_given, out);

    remat_graph *g;
    remat_analysis *a;
    remat_plan plan;
    remat_plan_init(&plan);
    remat_trace *t;
    remat_exec_extras x;
    memset(&x, 0, sizeof x);
    int rc = remat_cli_trace_open(argv[optind], plan_path, &L, &g, &a, &plan, &t, &x);
    if (rc != REMAT_EXIT_OK) {
        remat_plan_destroy(&plan);
        remat_cli_ledger_destroy(&L);
        return rc;
    }
    /* A time axis: the timeline of the schedule the trace replayed. */
    remat_op_times times;
    remat_timeline tl;
    memset(&times, 0, sizeof times);
    memset(&tl, 0, sizeof tl);
    if (T.have_device) {
        remat_status tst = remat_op_times_init(a, &T.dev, &times, &err);
        if (tst == REMAT_OK)
            tst = remat_timeline_run(a, &plan.schedule, &x, &T.dev, &times, &tl, &err);
        if (tst != REMAT_OK)
            rc = remat_cli_fail_in(argv[optind], &err);
        o.timeline = &tl;
    }
    o.label = plan.strategy;
    if (!budget_given && plan.budget_kind != REMAT_BUDGET_NONE) {
        o.budget_kind = plan.budget_kind;
        o.budget = plan.budget;
    }
    size_t len = 0;
    char *text = NULL;
    /* The trace's format table names each format as the report table does. */
    size_t n_fmt;
    remat_report_format rf = REMAT_REPORT_JSON;
    remat_report_format_parse(remat_trace_formats(&n_fmt)[fmt].name, &rf);
    remat_report_input in = {.trace = t, .trace_options = &o};
    if (rc == REMAT_EXIT_OK) {
        text = remat_report_write(REMAT_DOC_TRACE, &in, rf, &len, &err);
        rc = text ? remat_cli_write(out ? out : "-", text, len) : remat_cli_fail(&err);
    }
    remat_free(text);
    remat_timeline_destroy(&tl);
    remat_op_times_destroy(&times);
    remat_trace_destroy(t);
    remat_plan_destroy(&plan);
    remat_cli_ledger_destroy(&L);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    return rc;
}

/*
 * cmd_alloc.c - `remat alloc GRAPH [PLAN] [--policy P] [--static S]
 * [--activation-only] [--svg FILE [--svg-layout L]] [--json] [-o FILE]`.
 *
 * Replays the plan (store-all without one), records its allocations, runs
 * the dynamic allocators and the static planner over them, checks every
 * layout (no two live allocations share a byte) and reports high-water
 * marks, fragmentation and the arena against the logical peak.
 */
#include "cli.h"
#include "remat/alloc.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static int parse_work(const char *s, uint64_t *out)
{
    char *end;
    if (!*s || s[0] == '-')
        return 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || v == 0)
        return 0;
    *out = v;
    return 1;
}

int cmd_alloc(int argc, char **argv)
{
    enum { OPT_POLICY = 256, OPT_STATIC, OPT_SVG, OPT_LAYOUT, OPT_ACT, OPT_WORK };
    static const struct option own[] = {
        {"policy", required_argument, NULL, OPT_POLICY},
        {"static", required_argument, NULL, OPT_STATIC},
        {"svg", required_argument, NULL, OPT_SVG},
        {"svg-layout", required_argument, NULL, OPT_LAYOUT},
        {"activation-only", no_argument, NULL, OPT_ACT},
        {"work", required_argument, NULL, OPT_WORK},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct option buf[sizeof own / sizeof own[0] + REMAT_CLI_FORMAT_FLAGS];
    const struct option *opts = remat_cli_options(REMAT_CLI_DOC(REMAT_DOC_ALLOC), own, buf);
    int json = 0, c, run_policy[REMAT_ALLOC_POLICY_COUNT] = {1, 1, 1}, run_static = 1;
    remat_static_options so;
    remat_static_options_init(&so);
    uint32_t mask = REMAT_ALLOC_ALL;
    const char *svg = NULL, *layout = NULL, *out = "-";
    optind = 1;
    while ((c = remat_cli_getopt(argc, argv, "jo:h", opts)) != -1) {
        switch (c) {
        case OPT_POLICY: {
            remat_alloc_policy p;
            if (strcmp(optarg, "all") == 0) {
                for (int i = 0; i < REMAT_ALLOC_POLICY_COUNT; i++)
                    run_policy[i] = 1;
                break;
            }
            if (strcmp(optarg, "none") != 0 && !remat_alloc_policy_parse(optarg, &p))
                return remat_cli_usage_error("alloc", "--policy: '%s' is not one of best-fit, first-fit, caching, "
                                                      "all, none",
                                             optarg);
            for (int i = 0; i < REMAT_ALLOC_POLICY_COUNT; i++)
                run_policy[i] = strcmp(optarg, "none") != 0 && i == (int)p;
            break;
        }
        case OPT_STATIC:
            if (strcmp(optarg, "none") == 0) {
                run_static = 0;
                break;
            }
            if (!remat_static_algo_parse(optarg, &so.algo))
                return remat_cli_usage_error("alloc", "--static: '%s' is not one of greedy-size, greedy-lifetime, "
                                                      "alloc-order, best, none",
                                             optarg);
            run_static = 1;
            break;
        case OPT_SVG: svg = optarg; break;
        case OPT_LAYOUT: layout = optarg; break;
        case OPT_ACT: mask = REMAT_ALLOC_ACTIVATION; break;
        case OPT_WORK:
            if (!parse_work(optarg, &so.work_limit))
                return remat_cli_usage_error("alloc", "--work: '%s' is not a positive whole number", optarg);
            break;
        case 'j': json = 1; break;
        case 'o': out = optarg; break;
        case 'h':
            remat_cli_print_usage(stdout, "alloc");
            printf("\n--policy     dynamic allocators to simulate (default all three): best-fit and first-fit with\n"
                   "             coalescing, or caching (a model of PyTorch's CUDA caching allocator)\n"
                   "--static     static offset plan (default best: the smallest arena of greedy-size,\n"
                   "             greedy-lifetime and alloc-order); none to skip\n"
                   "--svg-layout the layout --svg draws: static (default when planned) or a policy name\n"
                   "--work N     conflict checks a greedy pass may make before it gives up (default %llu)\n"
                   "--activation-only  record only what --activation-budget caps\n\n%s",
                   (unsigned long long)REMAT_STATIC_WORK_DEFAULT, remat_alloc_caching_assumptions());
            return REMAT_EXIT_OK;
        default: return remat_cli_usage_error("alloc", "bad option");
        }
    }
    if (optind != argc - 1 && optind != argc - 2)
        return remat_cli_usage_error("alloc", "expected GRAPH [PLAN]");
    /* The layout to draw: a policy or the static plan, and it must run. */
    int draw_policy = -1;
    if (layout && strcmp(layout, "static") != 0) {
        remat_alloc_policy p;
        if (!remat_alloc_policy_parse(layout, &p))
            return remat_cli_usage_error("alloc", "--svg-layout: '%s' is not one of static, best-fit, first-fit, "
                                                  "caching",
                                         layout);
        draw_policy = (int)p;
        run_policy[p] = 1;
    } else if (layout && !run_static) {
        return remat_cli_usage_error("alloc", "--svg-layout static needs a static plan (not --static none)");
    }
    if (svg && !layout && !run_static) {
        for (int i = 0; i < REMAT_ALLOC_POLICY_COUNT && draw_policy < 0; i++)
            if (run_policy[i])
                draw_policy = i;
        if (draw_policy < 0)
            return remat_cli_usage_error("alloc", "--svg: nothing to draw (--policy none and --static none)");
    }
    remat_graph *g;
    remat_analysis *a;
    int rc = remat_cli_open_graph(argv[optind], &g, &a);
    if (rc != REMAT_EXIT_OK)
        return rc;
    remat_err err;
    remat_err_init(&err);
    remat_plan plan;
    remat_plan_init(&plan);
    remat_alloc_trace t;
    memset(&t, 0, sizeof t);
    remat_alloc_result res[REMAT_ALLOC_POLICY_COUNT];
    const remat_alloc_result *shown[REMAT_ALLOC_POLICY_COUNT] = {NULL, NULL, NULL};
    memset(res, 0, sizeof res);
    remat_static_result sp;
    memset(&sp, 0, sizeof sp);
    remat_status st;
    if (optind == argc - 2)
        st = remat_plan_load_file(g, argv[optind + 1], &plan, &err);
    else
        st = remat_schedule_store_all(a, &plan.schedule, &err);
    if (st == REMAT_OK)
        st = remat_alloc_trace_build(a, &plan.schedule, NULL, mask, &t, NULL, &err);
    for (int i = 0; i < REMAT_ALLOC_POLICY_COUNT && st == REMAT_OK; i++) {
        if (!run_policy[i])
            continue;
        st = remat_alloc_simulate(&t, (remat_alloc_policy)i, 1, &res[i], &err);
        /* The caching model hands out rounded blocks: its layout is checked
         * against the rounded sizes by construction, and against the
         * requested ones here. */
        if (st == REMAT_OK)
            st = remat_alloc_verify(&t, res[i].offsets, res[i].high_water, &err);
        if (st == REMAT_OK)
            shown[i] = &res[i];
    }
    if (st == REMAT_OK && run_static) {
        st = remat_alloc_static_plan(&t, &so, &sp, &err);
        if (st == REMAT_OK)
            st = remat_alloc_verify(&t, sp.offsets, sp.arena_bytes, &err);
    }
    if (st != REMAT_OK) {
        rc = remat_cli_fail_in(optind == argc - 2 ? argv[optind + 1] : argv[optind], &err);
    } else {
        size_t len;
        char *text;
        if (svg) {
            char title[320];
            const char *who = plan.strategy ? plan.strategy : "store-all";
            const uint64_t *offs;
            uint64_t extent;
            if (draw_policy >= 0) {
                offs = res[draw_policy].offsets;
                extent = res[draw_policy].high_water;
                snprintf(title, sizeof title, "%s, %s: %s allocator, high-water %llu B, logical peak %llu B", g->name,
                         who, remat_alloc_policy_name((remat_alloc_policy)draw_policy), (unsigned long long)extent,
                         (unsigned long long)t.logical_peak);
            } else {
                offs = sp.offsets;
                extent = sp.arena_bytes;
                snprintf(title, sizeof title, "%s, %s: static plan (%s), arena %llu B, logical peak %llu B", g->name,
                         who, remat_static_algo_name(sp.chosen), (unsigned long long)extent,
                         (unsigned long long)t.logical_peak);
            }
            remat_report_input in = {.a = a, .s = &plan.schedule, .alloc_trace = &t, .offsets = offs, .extent = extent,
                                     .title = title};
            text = remat_report_write(REMAT_DOC_ALLOC, &in, REMAT_REPORT_SVG, &len, &err);
            rc = text ? remat_cli_write(svg, text, len) : remat_cli_fail(&err);
            remat_free(text);
        }
        if (rc == REMAT_EXIT_OK) {
            remat_report_input in = {.a = a, .s = &plan.schedule, .alloc_trace = &t, .policies = shown,
                                     .n_policies = REMAT_ALLOC_POLICY_COUNT, .static_plan = run_static ? &sp : NULL};
            text = remat_report_write(REMAT_DOC_ALLOC, &in, remat_cli_format(REMAT_DOC_ALLOC, json), &len, &err);
            rc = text ? remat_cli_write(out, text, len) : remat_cli_fail(&err);
            remat_free(text);
        }
    }
    for (int i = 0; i < REMAT_ALLOC_POLICY_COUNT; i++)
        remat_alloc_result_destroy(&res[i]);
    remat_static_result_destroy(&sp);
    remat_alloc_trace_destroy(&t);
    remat_plan_destroy(&plan);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    return rc;
}

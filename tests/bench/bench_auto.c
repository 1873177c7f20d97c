/*
 * bench_auto.c - auto's planning time against its goals, and its plans
 * against a recorded baseline (`make bench BENCH=auto`, issue 20).
 *
 * Goals (issue 20): auto plans in at most 0.5 s at every size up to 10^4
 * ops and at most 5 s at 10^5, on every generated family and every bundled
 * graph, and its plans are never worse than before. "Before" is the table
 * below: the extra FLOPs and time the code of commit e8e8503 (32-point
 * ladder, a local search that replays the whole step for every flip)
 * printed on this machine, nice'd, for the same graph and budget. Each row
 * prints the time (wall, which the goal judges, and this process's CPU),
 * whether it meets its goal, the extra FLOPs, their ratio
 * to before (below 1: better), the proven lower bound and the gap.
 *
 * Figures only, never pass/fail: the machine is shared and noisy (one run
 * per size from 10^3 up, the median of three below).
 */
#define _POSIX_C_SOURCE 200809L
#include "bench.h"
#include "remat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* CPU seconds of this process: on a shared machine the wall clock also
 * counts other people's work; both are printed. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct {
    const char *label;
    int pct; /* budget: percent of the store-all activation peak */
    double seconds;
    unsigned long long extra;
} before_row;

/* Recorded from commit e8e8503 (see the file comment); 0 s: not recorded. */
static const before_row before[] = {
#include "bench_auto_before.h"
    {NULL, 0, 0, 0},
};

static const before_row *find_before(const char *label, int pct)
{
    for (size_t i = 0; before[i].label; i++)
        if (before[i].pct == pct && strcmp(before[i].label, label) == 0)
            return &before[i];
    return NULL;
}

static uint64_t act_peak_store_all(const remat_analysis *a)
{
    remat_schedule s;
    remat_schedule_init(&s);
    remat_replay_result r;
    remat_err err;
    remat_err_init(&err);
    uint64_t m = 0;
    if (remat_schedule_store_all(a, &s, &err) == REMAT_OK && remat_replay(a, &s, NULL, NULL, &r, &err) == REMAT_OK) {
        m = r.activation_peak;
        remat_replay_result_destroy(&r);
    }
    remat_schedule_destroy(&s);
    return m;
}

/* A string field of the params object, copied into buf ("" if absent). */
static void param_str(const char *params, const char *key, char *buf, size_t cap)
{
    buf[0] = 0;
    if (!params)
        return;
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(params, pat);
    if (!p)
        return;
    p += strlen(pat);
    if (*p == '"')
        p++;
    size_t n = 0;
    while (p[n] && p[n] != '"' && p[n] != ',' && p[n] != '}' && n + 1 < cap)
        n++;
    memcpy(buf, p, n);
    buf[n] = 0;
}

static void header(void)
{
    printf("%-22s %4s %7s %10s %8s %-5s %-16s %18s %8s %9s %18s %8s %8s\n", "graph", "bud", "ops", "time", "cpu", "goal",
           "chosen", "extra FLOPs", "/before", "t/before", "lower bound", "gap", "gap pp");
}

/* One row at pct % of the store-all activation peak, or (pct 0) at the
 * activation budget given in bytes. */
static void row_at(const char *label, const remat_analysis *a, int pct, uint64_t bytes)
{
    remat_plan_options o;
    remat_plan_options_init(&o);
    o.budget_kind = REMAT_BUDGET_ACTIVATION;
    o.budget = pct ? act_peak_store_all(a) / 100 * (uint64_t)pct : bytes;
    int reps = a->g->n_ops < 1000 ? 3 : 1;
    double t[3], c[3];
    remat_status st = REMAT_OK;
    unsigned long long extra = 0;
    char chosen[40] = "", bound[40] = "", gap[40] = "", gap_pp[40] = "", msg[80] = "";
    for (int i = 0; i < reps; i++) {
        remat_plan plan;
        remat_replay_result r;
        remat_err err;
        remat_err_init(&err);
        double t0 = now_s(), c0 = cpu_s();
        st = remat_plan_make(a, &o, &plan, &r, &err);
        t[i] = now_s() - t0;
        c[i] = cpu_s() - c0;
        if (st == REMAT_OK) {
            extra = r.flops_recompute;
            param_str(plan.params_json, "chosen", chosen, sizeof chosen);
            param_str(plan.params_json, "lower_bound", bound, sizeof bound);
            param_str(plan.params_json, "gap", gap, sizeof gap);
            param_str(plan.params_json, "gap_pp", gap_pp, sizeof gap_pp);
            remat_replay_result_destroy(&r);
            remat_plan_destroy(&plan);
        } else {
            snprintf(msg, sizeof msg, "%.70s", err.msg);
            if (st == REMAT_EINFEASIBLE) {
                remat_replay_result_destroy(&r);
                remat_plan_destroy(&plan);
            }
            break;
        }
    }
    double m = median(t, st == REMAT_OK ? reps : 1), mc = median(c, st == REMAT_OK ? reps : 1);
    double goal = a->g->n_ops <= 10000 ? 0.5 : 5.0;
    const before_row *b = find_before(label, pct);
    char ratio[16] = "-", tratio[16] = "-";
    if (b && st == REMAT_OK) {
        if (b->extra)
            snprintf(ratio, sizeof ratio, "%.4f", (double)extra / (double)b->extra);
        else
            snprintf(ratio, sizeof ratio, "%s", extra ? "worse" : "1");
        if (b->seconds > 0)
            snprintf(tratio, sizeof tratio, "%.3f", m / b->seconds);
    }
    if (st == REMAT_OK)
        printf("%-22s %3d%% %7u %9.3fs %7.3fs %-5s %-16s %18llu %8s %9s %18s %8s %8s\n", label, pct, a->g->n_ops, m,
               mc, m <= goal ? "met" : "OVER", chosen, extra, ratio, tratio, bound[0] ? bound : "-",
               gap[0] ? gap : "-", gap_pp[0] ? gap_pp : "-");
    else
        printf("%-22s %3d%% %7u %9.3fs %7.3fs %-5s %s\n", label, pct, a->g->n_ops, m, mc, m <= goal ? "met" : "OVER",
               msg);
    /* The line the baseline table is made of (grep '^before'). */
    if (getenv("REMAT_BENCH_RECORD"))
        printf("before {\"%s\", %d, %.3f, %lluULL},\n", label, pct, m, extra);
    fflush(stdout);
}

static void row(const char *label, const remat_analysis *a, int pct)
{
    row_at(label, a, pct, 0);
}

static int gen_graph(remat_gen_family f, uint32_t n, remat_graph **g, remat_analysis **a)
{
    remat_gen_opts o;
    remat_gen_opts_init(&o, f);
    switch (f) {
    case REMAT_GEN_CHAIN:
        o.ops = n;
        o.random = true;
        o.seed = 3;
        break;
    case REMAT_GEN_LAYERED:
        o.width = n >= 1000 ? 100 : 10;
        o.layers = n / o.width;
        o.seed = 1;
        break;
    case REMAT_GEN_TRANSFORMER:
        o.layers = n / 15;
        o.seq = 256;
        o.batch = 1;
        o.hidden = 256;
        o.heads = 4;
        o.vocab = 1024;
        break;
    case REMAT_GEN_RESNET:
        o.blocks = (n - 8) / 7;
        o.batch = 2;
        o.channels = 16;
        o.size = 16;
        break;
    default:
        return -1;
    }
    remat_err err;
    remat_err_init(&err);
    size_t len;
    char *text = remat_gen_json(&o, &len, &err);
    *g = NULL;
    *a = NULL;
    if (!text || remat_graph_load_json(text, len, "bench", g, &err) != REMAT_OK ||
        remat_analyze(*g, a, &err) != REMAT_OK) {
        fprintf(stderr, "bench: %s\n", err.msg);
        remat_free(text);
        remat_graph_destroy(*g);
        return -1;
    }
    remat_free(text);
    return 0;
}

int bench_auto(const char *remat)
{
    (void)remat;
    printf("goal: auto <= 0.5 s up to 10^4 ops, <= 5 s at 10^5; /before < 1: fewer extra FLOPs than commit e8e8503\n");
    header();
    static const remat_gen_family fams[] = {REMAT_GEN_LAYERED, REMAT_GEN_TRANSFORMER, REMAT_GEN_RESNET,
                                            REMAT_GEN_CHAIN};
    static const uint32_t sizes[] = {100, 1000, 10000, 100000};
    static const int pcts[] = {50, 70};
    const char *only = getenv("REMAT_BENCH_MAX_OPS");
    uint32_t max_ops = only ? (uint32_t)strtoul(only, NULL, 10) : 100000;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        if (sizes[si] > max_ops)
            continue;
        for (size_t fi = 0; fi < sizeof fams / sizeof fams[0]; fi++) {
            remat_graph *g;
            remat_analysis *a;
            if (gen_graph(fams[fi], sizes[si], &g, &a) != 0)
                return 1;
            char label[48];
            snprintf(label, sizeof label, "%s-%u", remat_gen_family_name(fams[fi]), sizes[si]);
            for (size_t p = 0; p < sizeof pcts / sizeof pcts[0]; p++)
                row(label, a, pcts[p]);
            remat_analysis_destroy(a);
            remat_graph_destroy(g);
        }
    }
    static const char *const bundled[] = {"bnview",   "chain16",         "gpt4-b4",     "hetchain12", "mlp2",
                                          "mlp423",   "mobilenet_v2-b2", "resnet18-b2", "resnet50-b2", "resnet8",
                                          "transformer4", "unet-b2",     "unet3",       "vgg16-b2"};
    /* Checkmate's graphs (../shared/checkmate-graphs, when present), at the
     * activation budgets that directory's README and issue 20 name, in GB
     * (10^9 B). Their figures depend on remat import checkmate's mapping
     * (issue 15). */
    static const struct {
        const char *file;
        double gb[3];
    } peers[] = {{"VGG16_train_nx.json", {13.71, 15.67, 0}},
                 {"MobileNet_train_nx.json", {22.70, 26.48, 0}},
                 {"vgg_unet_train_nx.json", {16.06, 16.77, 0}}};
    const char *dir = getenv("REMAT_CHECKMATE_DIR") ? getenv("REMAT_CHECKMATE_DIR") : "../shared/checkmate-graphs";
    for (size_t i = 0; i < sizeof peers / sizeof peers[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, peers[i].file);
        char *json = NULL;
        size_t len = 0;
        remat_err err;
        remat_err_init(&err);
        if (remat_import_checkmate_file(path, NULL, &json, &len, NULL, &err) != REMAT_OK) {
            printf("%-22s (skipped: %s)\n", peers[i].file, err.msg);
            continue;
        }
        remat_graph *g = NULL;
        remat_analysis *a = NULL;
        if (remat_graph_load_json(json, len, path, &g, &err) != REMAT_OK || remat_analyze(g, &a, &err) != REMAT_OK) {
            fprintf(stderr, "bench: %s\n", err.msg);
            remat_free(json);
            remat_graph_destroy(g);
            return 1;
        }
        remat_free(json);
        for (int k = 0; k < 3 && peers[i].gb[k] > 0; k++) {
            char label[48];
            snprintf(label, sizeof label, "%.*s@%.2fGB", (int)(strchr(peers[i].file, '_') - peers[i].file),
                     peers[i].file, peers[i].gb[k]);
            row_at(label, a, 0, (uint64_t)(peers[i].gb[k] * 1e9));
        }
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
    }
    for (size_t i = 0; i < sizeof bundled / sizeof bundled[0]; i++) {
        char path[128];
        snprintf(path, sizeof path, "graphs/%s.json", bundled[i]);
        remat_graph *g = NULL;
        remat_analysis *a = NULL;
        remat_err err;
        remat_err_init(&err);
        if (remat_graph_load_file(path, &g, &err) != REMAT_OK || remat_analyze(g, &a, &err) != REMAT_OK) {
            fprintf(stderr, "bench: %s\n", err.msg);
            remat_graph_destroy(g);
            return 1;
        }
        for (size_t p = 0; p < sizeof pcts / sizeof pcts[0]; p++)
            row(bundled[i], a, pcts[p]);
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
    }
    return 0;
}

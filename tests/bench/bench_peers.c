/*
 * bench_peers.c - `make bench BENCH=peers`: Checkmate's own training graphs
 * imported, and every strategy on them beside Checkmate's figures.
 *
 *     make bench BENCH=peers [PEERS=DIR] [PEERS_EXACT_S=S]
 *
 * DIR (default ../shared/checkmate-graphs) holds Checkmate/Moccasin
 * `*_train_nx.json` files and, optionally, a README.md whose tables give
 * Checkmate's reference figures:
 *
 *     | VGG16 | 15.825 GB | 15500 |             free-at-last-use peak, sum of cost_cpu
 *     | VGG16 | 15.67 GB | 28.2% | 5.2% |        a budget, sqrt(n), greedy
 *     | MobileNet | 26.48–34.04 GB | 14.4% | 3.5% |  a range: both ends are budgets
 *
 * Rows are matched to files by name (VGG16_train_nx.json -> "VGG16"). For
 * each graph it prints the imported graph's store-all activation peak and
 * forward + backward compute beside the README's, then, at 0.6, 0.7, 0.8
 * and 0.9 of the free-at-last-use peak (the README's, else remat's store-all
 * activation peak) and at the README's budgets, every strategy's
 * feasibility, overhead (extra / (forward + backward)) and plan time, all
 * under --activation-budget, which is the quantity Checkmate's budget caps
 * (graphs/README.md). exact gets a bounded time limit (PEERS_EXACT_S,
 * default 10 s; printed); auto is bounded by work, and the limit only caps
 * it. Last, the moonshot's line: the worst gap and auto's longest time
 * against issue 20's goals (0.1 pp, 60 s per budget). Without the directory the section says so and passes: the tests
 * never depend on it. Figures only, never pass/fail.
 */
#define _POSIX_C_SOURCE 200809L
#include "bench.h"
#include "remat.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GRAPHS 64
#define MAX_REF 32
#define MAX_BUDGETS 16

typedef struct {
    char name[64];
    int kind; /* 1: peak + compute row; 2: budget row */
    double gb_lo, gb_hi;
    unsigned long long compute;
    char sqrtn[32], greedy[32];
} ref_row;

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
    size_t k = 0;
    while (s[k] == ' ')
        k++;
    memmove(s, s + k, strlen(s + k) + 1);
}

/* "15.825 GB" or "26.48–34.04 GB" (an en dash or a hyphen) -> GB values. */
static int parse_gb(const char *cell, double *lo, double *hi)
{
    char *end;
    *lo = strtod(cell, &end);
    if (end == cell)
        return 0;
    *hi = *lo;
    const char *p = end;
    if (strncmp(p, "\xe2\x80\x93", 3) == 0)
        p += 3;
    else if (*p == '-')
        p++;
    if (p != end) {
        *hi = strtod(p, &end);
        if (end == p)
            return 0;
    }
    while (*end == ' ')
        end++;
    return strncmp(end, "GB", 2) == 0;
}

/* Reads the README's table rows; returns how many. */
static int read_refs(const char *dir, ref_row *refs, int cap)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/README.md", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[1024];
    int n = 0;
    while (n < cap && fgets(line, sizeof line, f)) {
        if (line[0] != '|')
            continue;
        char *cells[8];
        int k = 0;
        for (char *p = strtok(line + 1, "|"); p && k < 8; p = strtok(NULL, "|"))
            cells[k++] = p;
        for (int i = 0; i < k; i++)
            trim(cells[i]);
        if (k >= 1 && cells[k - 1][0] == '\0')
            k--;
        ref_row r;
        memset(&r, 0, sizeof r);
        if (k < 3 || !parse_gb(cells[1], &r.gb_lo, &r.gb_hi))
            continue;
        snprintf(r.name, sizeof r.name, "%s", cells[0]);
        if (k == 3) {
            char *end;
            r.compute = strtoull(cells[2], &end, 10);
            if (*end)
                continue;
            r.kind = 1;
        } else {
            r.kind = 2;
            snprintf(r.sqrtn, sizeof r.sqrtn, "%s", cells[2]);
            snprintf(r.greedy, sizeof r.greedy, "%s", cells[3]);
        }
        refs[n++] = r;
    }
    fclose(f);
    return n;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int import_graph(const char *path, remat_graph **g, remat_analysis **a)
{
    remat_err err;
    remat_err_init(&err);
    char *json = NULL;
    size_t len = 0;
    *g = NULL;
    *a = NULL;
    if (remat_import_checkmate_file(path, NULL, &json, &len, NULL, &err) != REMAT_OK ||
        remat_graph_load_json(json, len, path, g, &err) != REMAT_OK || remat_analyze(*g, a, &err) != REMAT_OK) {
        printf("  %s: %s\n", path, err.msg);
        remat_free(json);
        remat_graph_destroy(*g);
        *g = NULL;
        return -1;
    }
    remat_free(json);
    return 0;
}

/* The moonshot's figures over every graph and budget (issue 20: a gap of
 * at most 0.1 pp within 60 s per budget): the worst gap, auto's longest
 * plan time, and budgets where auto has a plan but no bound. */
static double worst_gap_pp, worst_auto_s;
static int n_gaps, n_unbounded;

static void one_graph(const char *dir, const char *file, const ref_row *refs, int n_refs, double exact_s)
{
    char path[1024], name[64];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    snprintf(name, sizeof name, "%.*s", (int)(strlen(file) - strlen("_train_nx.json")), file);
    remat_graph *g;
    remat_analysis *a;
    if (import_graph(path, &g, &a) != 0)
        return;
    remat_schedule s;
    remat_schedule_init(&s);
    remat_replay_result r;
    remat_err err;
    remat_err_init(&err);
    uint64_t peak = 0, compute = 0;
    if (remat_schedule_store_all(a, &s, &err) == REMAT_OK && remat_replay(a, &s, NULL, NULL, &r, &err) == REMAT_OK) {
        peak = r.activation_peak;
        compute = r.flops_forward + r.flops_backward;
        remat_replay_result_destroy(&r);
    }
    remat_schedule_destroy(&s);
    const ref_row *pk = NULL;
    for (int i = 0; i < n_refs; i++)
        if (refs[i].kind == 1 && strcmp(refs[i].name, name) == 0)
            pk = &refs[i];
    printf("%s (%s): %u ops, %u backward steps\n", name, file, g->n_ops, a->n_bwd);
    printf("  store-all activation peak %llu B = %.3f GB", (unsigned long long)peak, (double)peak / 1e9);
    if (pk)
        printf("; README free-at-last-use %.3f GB (%+.3f%%)", pk->gb_lo,
               100.0 * ((double)peak / 1e9 - pk->gb_lo) / pk->gb_lo);
    printf("\n  forward + backward compute %llu", (unsigned long long)compute);
    if (pk)
        printf("; README sum of cost_cpu %llu (%s)", pk->compute, pk->compute == compute ? "equal" : "DIFFERENT");
    printf("\n");
    /* Budgets: fractions of the reference peak, then the README's. */
    double ref_gb = pk ? pk->gb_lo : (double)peak / 1e9;
    uint64_t budgets[MAX_BUDGETS];
    char labels[MAX_BUDGETS][32];
    const ref_row *bref[MAX_BUDGETS];
    int nb = 0;
    static const double fr[] = {0.6, 0.7, 0.8, 0.9};
    for (int i = 0; i < 4; i++) {
        budgets[nb] = (uint64_t)(fr[i] * ref_gb * 1e9);
        bref[nb] = NULL;
        snprintf(labels[nb++], sizeof labels[0], "%.1fx", fr[i]);
    }
    for (int i = 0; i < n_refs && nb + 2 <= MAX_BUDGETS; i++) {
        if (refs[i].kind != 2 || strcmp(refs[i].name, name) != 0)
            continue;
        for (int e = 0; e < (refs[i].gb_hi != refs[i].gb_lo ? 2 : 1); e++) {
            budgets[nb] = (uint64_t)((e ? refs[i].gb_hi : refs[i].gb_lo) * 1e9 + 0.5);
            bref[nb] = &refs[i];
            snprintf(labels[nb++], sizeof labels[0], "README");
        }
    }
    enum { MAXR = 32 };
    remat_compare_row rows[MAX_BUDGETS][MAXR];
    size_t nr[MAX_BUDGETS];
    for (int b = 0; b < nb; b++) {
        remat_plan_options o;
        remat_plan_options_init(&o);
        o.budget_kind = REMAT_BUDGET_ACTIVATION;
        o.budget = budgets[b];
        o.time_limit = exact_s;
        remat_err_init(&err);
        if (remat_compare_run(a, &o, rows[b], MAXR, &nr[b], &err) != REMAT_OK) {
            printf("  budget %llu B: %s\n", (unsigned long long)budgets[b], err.msg);
            nr[b] = 0;
        }
    }
    printf("  activation budgets (GB = 10^9 B; exact: time limit %g s): overhead %% / plan time ms, "
           "or 'no' (infeasible)\n",
           exact_s);
    printf("  %-28s", "strategy");
    for (int b = 0; b < nb; b++)
        printf(" %8.3f %-7s", (double)budgets[b] / 1e9, labels[b]);
    printf("\n");
    size_t n_rows = nb ? nr[0] : 0;
    for (size_t i = 0; i < n_rows; i++) {
        printf("  %s%s%s%*s", rows[0][i].strategy, rows[0][i].paper ? "/paper" : "",
               rows[0][i].linearized ? "/linearized" : "",
               (int)(28 - strlen(rows[0][i].strategy) - (rows[0][i].paper ? 6 : 0) - (rows[0][i].linearized ? 11 : 0)),
               "");
        for (int b = 0; b < nb; b++) {
            char cell[40];
            const remat_compare_row *x = i < nr[b] ? &rows[b][i] : NULL;
            if (!x)
                snprintf(cell, sizeof cell, "-");
            else if (x->status == REMAT_OK)
                snprintf(cell, sizeof cell, "%.2f/%.0f", 100.0 * x->overhead, 1000.0 * x->seconds);
            else
                snprintf(cell, sizeof cell, "no/%.0f", 1000.0 * x->seconds);
            printf(" %16s", cell);
        }
        printf("\n");
    }
    /* auto's certificate at each budget (issue 20): the gap between its
     * plan and the proven lower bound, in percentage points of overhead. */
    printf("  %-28s", "auto's gap (pp; 0 = optimal)");
    for (int b = 0; b < nb; b++) {
        char cell[40] = "-";
        for (size_t i = 0; i < nr[b]; i++) {
            const remat_compare_row *x = &rows[b][i];
            if (!x->has_bound || x->status != REMAT_OK)
                continue;
            double base = x->overhead > 0 ? (double)x->extra_flops / x->overhead : 0;
            double gap = base > 0 ? 100.0 * (double)(x->extra_flops - x->lower_bound) / base : 0.0;
            snprintf(cell, sizeof cell, "%.3f", gap);
            n_gaps++;
            worst_gap_pp = gap > worst_gap_pp ? gap : worst_gap_pp;
        }
        for (size_t i = 0; i < nr[b]; i++)
            if (strcmp(rows[b][i].strategy, "auto") == 0 && rows[b][i].status == REMAT_OK) {
                worst_auto_s = rows[b][i].seconds > worst_auto_s ? rows[b][i].seconds : worst_auto_s;
                n_unbounded += !rows[b][i].has_bound;
            }
        printf(" %16s", cell);
    }
    printf("\n");
    for (int b = 0; b < nb; b++)
        if (bref[b])
            printf("  Checkmate at %.3f GB (README): sqrt(n) %s, greedy %s\n", (double)budgets[b] / 1e9,
                   bref[b]->sqrtn, bref[b]->greedy);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}

int bench_peers(const char *remat)
{
    (void)remat;
    const char *dir = getenv("REMAT_PEERS_DIR");
    if (!dir || !*dir)
        dir = "../shared/checkmate-graphs";
    const char *ex = getenv("REMAT_PEERS_EXACT_S");
    double exact_s = ex && *ex ? strtod(ex, NULL) : 10;
    if (!(exact_s > 0))
        exact_s = 10;
    DIR *d = opendir(dir);
    if (!d) {
        printf("skipped: no directory %s (make bench BENCH=peers PEERS=DIR names one holding *_train_nx.json)\n",
               dir);
        return 0;
    }
    char *files[MAX_GRAPHS];
    int n = 0;
    const char *suffix = "_train_nx.json";
    for (struct dirent *e; (e = readdir(d)) && n < MAX_GRAPHS;) {
        size_t l = strlen(e->d_name), sl = strlen(suffix);
        if (l > sl && strcmp(e->d_name + l - sl, suffix) == 0 && (files[n] = malloc(l + 1)))
            memcpy(files[n++], e->d_name, l + 1);
    }
    closedir(d);
    if (n == 0) {
        printf("skipped: no *_train_nx.json in %s\n", dir);
        return 0;
    }
    qsort(files, (size_t)n, sizeof *files, cmp_str);
    ref_row refs[MAX_REF];
    int n_refs = read_refs(dir, refs, MAX_REF);
    printf("directory %s: %d graphs, %d reference rows in its README.md\n", dir, n, n_refs);
    for (int i = 0; i < n; i++) {
        one_graph(dir, files[i], refs, n_refs, exact_s);
        free(files[i]);
    }
    printf("moonshot (issue 20): auto's gap at most %.3f pp over %d feasible budgets (goal 0.1: %s), %d without a "
           "bound; auto's longest plan %.1f s wall (goal 60 s on 2 cores: %s)\n",
           worst_gap_pp, n_gaps, worst_gap_pp <= 0.1 ? "met" : "NOT met", n_unbounded, worst_auto_s,
           worst_auto_s <= 60 ? "met" : "NOT met");
    return 0;
}

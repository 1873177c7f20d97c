/*
 * bench_main.c - `make bench`: figures, never pass/fail on time.
 *
 *     build/bench_remat build/remat [BENCH...]
 *
 * Each benchmark is one row of `benches[]` below; later benchmarks add a
 * function and a row. With no BENCH arguments every benchmark runs.
 *
 * Peak memory is measured in a fresh child process per size (fork), so each
 * size's peak is its own and not the largest seen so far. Inside the child
 * the kernel's high-water mark is reset (/proc/self/clear_refs, "5") after the
 * graph text has been generated, so the peak printed is that of load +
 * analysis while the text is held, which is what `remat` itself pays when it
 * reads a file. Times are CLOCK_MONOTONIC, the median of several runs for
 * small sizes.
 */
#define _POSIX_C_SOURCE 200809L
#include "bench.h"
#include "remat.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024.0 * 1024.0)
#define MAX_REPS 9

/* ------------------------------------------------------------ helpers */

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* A /proc/self/status field in kB ("VmHWM", "VmRSS"); -1 if unavailable. */
long proc_status_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    long kb = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            kb = strtol(line + n + 1, NULL, 10);
            break;
        }
    fclose(f);
    return kb;
}

/* Resets the peak-RSS counter so a later VmHWM covers only what follows
 * (Linux >= 4.0). Returns 0 when unsupported: the caller then reports the
 * whole process's peak and says so. */
int reset_peak_rss(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return 0;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

static long max_rss_kb(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
}

/* Runs fn(arg, out) in a child process and copies its result back through
 * a pipe. Returns 0 on success. */
int in_child(int (*fn)(const void *arg, void *out), const void *arg, void *out, size_t out_size)
{
    int fd[2];
    if (pipe(fd) != 0)
        return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        close(fd[0]);
        int rc = fn(arg, out);
        const char *p = out;
        size_t left = rc == 0 ? out_size : 0;
        while (left > 0) {
            ssize_t w = write(fd[1], p, left);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                _exit(3);
            p += w;
            left -= (size_t)w;
        }
        _exit(rc == 0 ? 0 : 2);
    }
    close(fd[1]);
    char *p = out;
    size_t got = 0;
    while (got < out_size) {
        ssize_t r = read(fd[0], p + got, out_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return got == out_size && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* ------------------------------------------- load + lifetime analysis */

typedef struct {
    remat_gen_opts opts;
    int reps;
} la_case;

typedef struct {
    uint32_t n_ops, n_tensors;
    size_t text_bytes;
    double gen_s, load_s, analyze_s;
    long text_rss_kb; /* resident after generating the text */
    long peak_kb;     /* high-water mark during load + analysis (text included) */
    int peak_is_whole;
    char err[REMAT_ERR_MSG_MAX];
} la_result;

static int la_child(const void *arg, void *out)
{
    const la_case *c = arg;
    la_result *r = out;
    memset(r, 0, sizeof *r);
    remat_err err;
    remat_err_init(&err);
    double t0 = now_s();
    size_t len;
    char *text = remat_gen_json(&c->opts, &len, &err);
    r->gen_s = now_s() - t0;
    if (!text) {
        snprintf(r->err, sizeof r->err, "gen: %.480s", err.msg);
        return 0;
    }
    r->text_bytes = len;
    r->text_rss_kb = proc_status_kb("VmRSS");
    r->peak_is_whole = !reset_peak_rss();
    double load[MAX_REPS], ana[MAX_REPS];
    int reps = c->reps < 1 ? 1 : c->reps > MAX_REPS ? MAX_REPS : c->reps;
    for (int i = 0; i < reps; i++) {
        remat_graph *g = NULL;
        remat_analysis *a = NULL;
        double a0 = now_s();
        if (remat_graph_load_json(text, len, "bench", &g, &err) != REMAT_OK) {
            snprintf(r->err, sizeof r->err, "load: %.480s", err.msg);
            break;
        }
        double a1 = now_s();
        if (remat_analyze(g, &a, &err) != REMAT_OK) {
            snprintf(r->err, sizeof r->err, "analyze: %.480s", err.msg);
            remat_graph_destroy(g);
            break;
        }
        double a2 = now_s();
        load[i] = a1 - a0;
        ana[i] = a2 - a1;
        r->n_ops = g->n_ops;
        r->n_tensors = g->n_tensors;
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
    }
    if (!r->err[0]) {
        r->load_s = median(load, reps);
        r->analyze_s = median(ana, reps);
    }
    long hwm = r->peak_is_whole ? -1 : proc_status_kb("VmHWM");
    r->peak_kb = hwm > 0 ? hwm : max_rss_kb();
    if (hwm <= 0)
        r->peak_is_whole = 1;
    remat_free(text);
    return 0;
}

static int bench_load_analyze(const char *remat)
{
    (void)remat;
    static const uint32_t sizes[] = {10000, 100000, 1000000};
    static const int reps[] = {9, 5, 3};
    const uint32_t width = 100;
    printf("load + lifetime analysis (median of 9/5/3 runs; peak RSS of a fresh process per size, JSON text "
           "included)\n\n");
    printf("%-8s %8s %9s | %8s %7s | %8s %7s | %8s %7s | %9s %7s\n", "family", "ops", "JSON MiB", "load ms",
           "ns/op", "anlz ms", "ns/op", "total ms", "ns/op", "peak MiB", "B/op");
    for (int fam = 0; fam < 2; fam++) {
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            la_case c;
            remat_gen_opts_init(&c.opts, fam ? REMAT_GEN_LAYERED : REMAT_GEN_CHAIN);
            c.reps = reps[s];
            if (fam) {
                c.opts.width = width;
                c.opts.layers = sizes[s] / width;
            } else {
                c.opts.ops = sizes[s];
            }
            la_result r;
            if (in_child(la_child, &c, &r, sizeof r) != 0) {
                printf("%-8s %8u  (the child process failed)\n", fam ? "layered" : "chain", sizes[s]);
                continue;
            }
            if (r.err[0]) {
                printf("%-8s %8u  %s\n", fam ? "layered" : "chain", sizes[s], r.err);
                continue;
            }
            double n = r.n_ops, total = r.load_s + r.analyze_s;
            printf("%-8s %8u %9.1f | %8.1f %7.0f | %8.1f %7.0f | %8.1f %7.0f | %9.1f %7.0f%s\n",
                   fam ? "layered" : "chain", r.n_ops, (double)r.text_bytes / MIB, r.load_s * 1e3, r.load_s * 1e9 / n,
                   r.analyze_s * 1e3, r.analyze_s * 1e9 / n, total * 1e3, total * 1e9 / n, (double)r.peak_kb / 1024,
                   (double)r.peak_kb * 1024 / n, r.peak_is_whole ? " (whole process)" : "");
            if (r.n_ops >= 1000000)
                printf("%-8s %8s   10^6-op target (< 3 s, < 1 GiB): time %s, memory %s\n", "", "",
                       total < 3.0 ? "met" : "MISSED", (double)r.peak_kb * 1024 < 1073741824.0 ? "met" : "MISSED");
        }
    }
    printf("\nB/op is peak bytes per op. Layered DAGs are %u wide with fan-in 2; chains have one param per op.\n",
           width);
    return 0;
}

/* ------------------------------------------ the CLI end to end (file) */

typedef struct {
    const char *remat;
    const char *graph;
    const char *out;
} cli_case;

typedef struct {
    double wall_s;
    long peak_kb;
    int exit_code;
} cli_result;

/* Runs `remat lifetimes GRAPH -o OUT` as this child's only child, so that
 * RUSAGE_CHILDREN's peak is that command's own. */
static int cli_child(const void *arg, void *out)
{
    const cli_case *c = arg;
    cli_result *r = out;
    memset(r, 0, sizeof *r);
    double t0 = now_s();
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        execl(c->remat, c->remat, "lifetimes", c->graph, "-o", c->out, (char *)NULL);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    r->wall_s = now_s() - t0;
    struct rusage ru;
    r->peak_kb = getrusage(RUSAGE_CHILDREN, &ru) == 0 ? ru.ru_maxrss : -1;
    r->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return 0;
}

static int bench_cli(const char *remat)
{
    const char *tmp = getenv("TMPDIR");
    char dir[512], graph[600], outp[600];
    snprintf(dir, sizeof dir, "%s/remat-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        printf("cli: cannot create a temporary directory: %s\n", strerror(errno));
        return 1;
    }
    snprintf(graph, sizeof graph, "%s/chain.json", dir);
    snprintf(outp, sizeof outp, "%s/lifetimes.txt", dir);
    printf("\n`remat lifetimes` end to end (read file, load, analyze, write the table)\n\n");
    printf("%-8s %8s %9s | %9s %7s | %9s\n", "family", "ops", "JSON MiB", "wall ms", "ns/op", "peak MiB");
    static const uint32_t sizes[] = {100000, 1000000};
    int rc = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        remat_gen_opts o;
        remat_gen_opts_init(&o, REMAT_GEN_CHAIN);
        o.ops = sizes[s];
        remat_err err;
        remat_err_init(&err);
        size_t len;
        char *text = remat_gen_json(&o, &len, &err);
        FILE *f = text ? fopen(graph, "wb") : NULL;
        int ok = f && fwrite(text, 1, len, f) == len;
        if (f && fclose(f) != 0)
            ok = 0;
        remat_free(text);
        if (!ok) {
            printf("cli: cannot write %s\n", graph);
            rc = 1;
            break;
        }
        cli_case c = {remat, graph, outp};
        cli_result r;
        if (in_child(cli_child, &c, &r, sizeof r) != 0 || r.exit_code != 0) {
            printf("%-8s %8u  remat lifetimes failed (exit %d)\n", "chain", sizes[s], r.exit_code);
            rc = 1;
            continue;
        }
        printf("%-8s %8u %9.1f | %9.1f %7.0f | %9.1f\n", "chain", sizes[s], (double)len / MIB, r.wall_s * 1e3,
               r.wall_s * 1e9 / sizes[s], (double)r.peak_kb / 1024);
    }
    remove(graph);
    remove(outp);
    rmdir(dir);
    return rc;
}

/* ----------------------------------------------------------- resnet50 */

/* Runs /usr/bin/python3 SCRIPT ARGS REMAT (ARGS: empty, or options ending
 * in a space), or says why it is skipped; its exit status is the section's. */
static int run_python(const char *section, const char *script, const char *args, const char *remat)
{
    static const char py[] = "/usr/bin/python3";
    if (access(py, X_OK) != 0) {
        printf("skipped: %s not found (apt-get install python3 python3-torch python3-torchvision)\n", py);
        return 0;
    }
    char cmd[4096];
    if ((size_t)snprintf(cmd, sizeof cmd, "%s %s %s'%s'", py, script, args, remat) >= sizeof cmd ||
        strchr(remat, '\'') != NULL) {
        fprintf(stderr, "bench %s: remat path too long or quoted: %s\n", section, remat);
        return 1;
    }
    fflush(stdout);
    int st = system(cmd);
    if (st != 0)
        fprintf(stderr, "bench %s: %s exited with status %d\n", section, cmd, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return st != 0;
}

/* ResNet-50's figures come from scripts/bench_resnet50.py: the export needs
 * PyTorch, which the C core never links. It runs with Debian's python3
 * (/usr/bin/python3, where python3-torch installs); without torch the
 * script plans the bundled export instead, and without python3 the section
 * says so. The script's exit status is the comparison's verdict (auto at
 * block checkpointing's peak needs less than half its extra FLOPs). */
static int bench_resnet50(const char *remat)
{
    return run_python("resnet50", "scripts/bench_resnet50.py", "", remat);
}

/* ----------------------------------------------------------- steptime */

/* remat's predicted step time beside a measured one (scripts/
 * bench_step_time.py): small models exported with per-op durations
 * measured on this CPU, predicted by `remat replay --device`, then timed
 * for real. A ratio, never a verdict on time. */
static int bench_steptime(const char *remat)
{
    return run_python("steptime", "scripts/bench_step_time.py", "", remat);
}

/* ----------------------------------------------------------- fidelity */

/* The exporter on every model torchvision 0.14 builds (classification and
 * segmentation) and on nn.LSTM/nn.TransformerEncoder: saved bytes against
 * autograd's saved-tensor hooks, the store-all peak against the profiler
 * (scripts/torch_fidelity.py --set all; batch 2, 64x64, one thread). The
 * resnet50 section runs the first seventeen; this one all of them, which
 * takes the better part of an hour on two cores. */
static int bench_fidelity(const char *remat)
{
    return run_python("fidelity", "scripts/torch_fidelity.py", "--set all ", remat);
}

/* ------------------------------------------------------------ pp-time */

/* The predicted step time of a pipeline beside a measured one (scripts/
 * bench_pp_time.py): tests/torch/
 * pp_1f1b.py's 1F1B run over 2 and 4 gloo processes on loopback, predicted
 * by `remat replay --pp P --device` from this CPU's measured op durations
 * and a measured gloo link, beside the median real step. */
static int bench_pp_time(const char *remat)
{
    return run_python("pp-time", "scripts/bench_pp_time.py", "", remat);
}

/* --------------------------------------------------------------- main */

typedef struct {
    const char *name;
    const char *summary;
    int (*run)(const char *remat);
} bench;

static const bench benches[] = {
    {"load", "load + lifetime analysis of generated chains and layered DAGs, 10^4..10^6 ops", bench_load_analyze},
    {"cli", "`remat lifetimes` on a generated chain file, end to end", bench_cli},
    {"replay", "replay speed (instructions per second) on 10^5- and 10^6-op graphs", bench_replay},
    {"chain", "planning time on chains of 10^2, 10^3, 10^4 stages and sqrtn/chen-greedy at 10^5 ops", bench_plan_chain},
    {"dag", "planning time of auto, dtr and mincut on generated DAGs of 10^3, 10^4, 10^5 ops", bench_plan_dag},
    {"bundled", "every strategy on every bundled graph at 0.7 of the store-all activation peak", bench_bundled},
    {"auto", "auto's time per size and family against its goals, its plans against the recorded baseline",
     bench_auto},
    {"trace", "trace building and each writer on 10^5-op graphs (store-all)", bench_trace},
    {"resnet50", "ResNet-50: export and plan times; checkpointing every block (P, E) against auto at P",
     bench_resnet50},
    {"steptime", "predicted step time (remat replay --device, per-op durations measured on this CPU) beside "
                 "the measured one, small models",
     bench_steptime},
    {"fidelity", "the exporter on every torchvision classification and segmentation model, nn.LSTM and "
                 "nn.TransformerEncoder: saved bytes against autograd's hooks, store-all peak against the profiler",
     bench_fidelity},
    {"pp-time", "predicted step time of a real 1F1B pipeline over 2 and 4 gloo processes (remat replay --pp "
                "--device, measured op durations and link) beside the measured one",
     bench_pp_time},
    {"peers", "Checkmate's graphs (PEERS=DIR, default ../shared/checkmate-graphs): import against its README, "
              "every strategy at 0.6-0.9 of its peak and its budgets",
     bench_peers},
};
#define N_BENCHES (sizeof benches / sizeof benches[0])

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_remat path/to/remat [BENCH...]\nbenchmarks:\n");
        for (size_t i = 0; i < N_BENCHES; i++)
            fprintf(stderr, "  %-9s %s\n", benches[i].name, benches[i].summary);
        return 2;
    }
    int rc = 0;
    for (size_t i = 0; i < N_BENCHES; i++) {
        int wanted = argc == 2;
        for (int a = 2; a < argc; a++)
            wanted |= strcmp(argv[a], benches[i].name) == 0;
        if (!wanted)
            continue;
        printf("== %s: %s\n", benches[i].name, benches[i].summary);
        if (benches[i].run(argv[1]) != 0)
            rc = 1;
        printf("\n");
    }
    return rc;
}

/*
 * threads.c - two threads planning different graphs at once.
 *
 * The library promises no mutable process-wide state of its own (the
 * allocation gate's counters are per thread, cJSON's hooks are installed
 * once, the one igraph lock serializes the adapter, the strategy tables are
 * constant). This program holds it to that: it computes, in one thread,
 * every figure a set of jobs yields (load, analyze, plan with several
 * strategies including DTR's cursor, the mincut's igraph calls and exact's
 * solver, replay, the lifetime trace, the allocation trace and a static
 * offset plan), then runs the jobs again from two threads at once, each
 * thread on its own graphs, several rounds, and checks that every figure is
 * the same. Under ThreadSanitizer (`make tsan`) a data race anywhere on
 * those paths fails the run; without it the comparison still catches a race
 * that corrupts a result.
 *
 * Usage: threads [ROUNDS]   (run from the repository root; exit 0 = ok)
 */
#define _POSIX_C_SOURCE 200809L
#include "remat.h"
#include "remat/alloc.h"

#include <pthread.h>
#include <stdio.h>
#if REMAT_HAVE_GLPK
#include <glpk.h>
#endif
#include <stdlib.h>
#include <string.h>

static const char *const graphs[2][2] = {{"graphs/transformer4.json", "graphs/mlp423.json"},
                                         {"graphs/resnet8.json", "graphs/unet3.json"}};
static const char *const strategies[] = {"auto", "dtr", "mincut", "chain-dp", "exact", "sqrtn"};
#define N_STRATEGIES (sizeof strategies / sizeof strategies[0])

/* Every figure of one job: per strategy the replayed peak and extra FLOPs,
 * then the trace's interval count and peak, and the static arena. */
typedef struct {
    uint64_t peak[N_STRATEGIES], extra[N_STRATEGIES];
    int status[N_STRATEGIES];
    uint64_t trace_intervals, trace_peak, arena;
    int failed;
    char why[REMAT_ERR_MSG_MAX + 256];
} figures;

static void job(const char *path, figures *f)
{
    memset(f, 0, sizeof *f);
    remat_err err;
    remat_err_init(&err);
    remat_graph *g = NULL;
    remat_analysis *a = NULL;
    if (remat_graph_load_file(path, &g, &err) != REMAT_OK || remat_analyze(g, &a, &err) != REMAT_OK) {
        f->failed = 1;
        snprintf(f->why, sizeof f->why, "%s: %s", path, err.msg);
        remat_graph_destroy(g);
        return;
    }
    remat_schedule sa;
    remat_schedule_init(&sa);
    remat_replay_result r0;
    if (remat_schedule_store_all(a, &sa, &err) != REMAT_OK || remat_replay(a, &sa, NULL, NULL, &r0, &err) != REMAT_OK) {
        f->failed = 1;
        snprintf(f->why, sizeof f->why, "%s: %s", path, err.msg);
    } else {
        for (size_t i = 0; i < N_STRATEGIES; i++) {
            remat_plan_options o;
            remat_plan_options_init(&o);
            o.strategy = strategies[i];
            o.budget_kind = REMAT_BUDGET_ACTIVATION;
            o.budget = r0.activation_peak / 2;
            o.time_limit = 0.5;
            remat_plan p;
            remat_replay_result r;
            remat_err_init(&err);
            remat_status st = remat_plan_make(a, &o, &p, &r, &err);
            f->status[i] = st;
            f->peak[i] = r.peak_bytes;
            f->extra[i] = r.flops_recompute;
            /* exact under a time limit (and auto, which runs it on small
             * graphs) may stop at a different incumbent from run to run,
             * more so under a sanitizer: for them only "planned, or an
             * honest infeasible" is compared, not the figures. */
            if (strcmp(strategies[i], "exact") == 0 || strcmp(strategies[i], "auto") == 0) {
                f->status[i] = st == REMAT_OK || st == REMAT_EINFEASIBLE ? REMAT_OK : st;
                f->peak[i] = f->extra[i] = 0;
            }
            remat_replay_result_destroy(&r);
            remat_plan_destroy(&p);
        }
        remat_trace *t = NULL;
        if (remat_trace_build(a, &sa, NULL, &t, &err) == REMAT_OK) {
            f->trace_intervals = t->n_intervals;
            f->trace_peak = t->replay.peak_bytes;
        } else {
            f->failed = 1;
            snprintf(f->why, sizeof f->why, "%s: trace: %s", path, err.msg);
        }
        remat_trace_destroy(t);
        remat_replay_result ra;
        if (remat_alloc_arena(a, &sa, NULL, REMAT_ALLOC_ALL, &ra, &f->arena, &err) != REMAT_OK) {
            f->failed = 1;
            snprintf(f->why, sizeof f->why, "%s: arena: %s", path, err.msg);
        }
        remat_replay_result_destroy(&ra);
        remat_replay_result_destroy(&r0);
    }
    remat_schedule_destroy(&sa);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}

typedef struct {
    int who, rounds;
    const figures *want; /* [2]: the serial figures of this thread's graphs */
    int bad;
    char why[REMAT_ERR_MSG_MAX + 512];
} worker;

static void *run(void *arg)
{
    worker *w = arg;
    for (int r = 0; r < w->rounds && !w->bad; r++)
        for (int k = 0; k < 2 && !w->bad; k++) {
            figures f;
            job(graphs[w->who][k], &f);
            if (f.failed) {
                w->bad = 1;
                snprintf(w->why, sizeof w->why, "%s", f.why);
            } else if (memcmp(&f, &w->want[k], sizeof f) != 0) {
                w->bad = 1;
                snprintf(w->why, sizeof w->why, "%s: round %d: figures differ from the serial run", graphs[w->who][k],
                         r);
            }
        }
#if REMAT_HAVE_GLPK
    /* GLPK keeps a per-thread environment (exact's solver made it): a
     * thread that planned with exact frees it before it ends, as GLPK asks
     * (glp_free_env); remat cannot, since the caller may hold GLPK objects. */
    glp_free_env();
#endif
    return NULL;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 2;
    figures want[2][2];
    for (int w = 0; w < 2; w++)
        for (int k = 0; k < 2; k++) {
            job(graphs[w][k], &want[w][k]);
            if (want[w][k].failed) {
                fprintf(stderr, "threads: serial run: %s\n", want[w][k].why);
                return 1;
            }
        }
    worker ws[2];
    pthread_t th[2];
    for (int w = 0; w < 2; w++) {
        memset(&ws[w], 0, sizeof ws[w]);
        ws[w].who = w;
        ws[w].rounds = rounds;
        ws[w].want = want[w];
        if (pthread_create(&th[w], NULL, run, &ws[w]) != 0) {
            fprintf(stderr, "threads: pthread_create failed\n");
            return 1;
        }
    }
    int bad = 0;
    for (int w = 0; w < 2; w++) {
        pthread_join(th[w], NULL);
        if (ws[w].bad) {
            fprintf(stderr, "threads: thread %d: %s\n", w, ws[w].why);
            bad = 1;
        }
    }
    if (!bad)
        printf("threads: 2 threads x %d rounds x 2 graphs x %zu strategies, trace and arena: the serial figures\n",
               rounds, N_STRATEGIES);
    return bad;
}

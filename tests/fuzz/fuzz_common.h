/*
 * fuzz_common.h - what both fuzz targets do with a loaded graph: analyze it,
 * then run the cheap consumers of an analysis (the default policy, the
 * replay, the reports, the tracer and a few planners) and check what must
 * hold whatever the input: every failure is a clean status, every schedule
 * the policy builds replays as valid, every plan stays within its budget.
 *
 * A violated expectation aborts with a message (libFuzzer then saves the
 * input); a crash, a leak or undefined behaviour is caught by the sanitizers.
 */
#ifndef REMAT_FUZZ_COMMON_H
#define REMAT_FUZZ_COMMON_H

#include "remat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_EXPECT(cond, ...)                                                 \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz: expectation failed: %s: ", #cond);          \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
            abort();                                                           \
        }                                                                      \
    } while (0)

/* A failure that bad input may cause (as opposed to a bug). */
static inline int fuzz_clean_failure(remat_status st)
{
    return st == REMAT_EPARSE || st == REMAT_EGRAPH || st == REMAT_EPLAN || st == REMAT_ESCHEDULE ||
           st == REMAT_EINFEASIBLE || st == REMAT_EOVERFLOW || st == REMAT_EUNSUPPORTED || st == REMAT_EINVAL;
}

static inline void fuzz_free_doc(char *doc, const remat_err *err, const char *what)
{
    FUZZ_EXPECT(doc || fuzz_clean_failure(err->code), "%s: %s", what, err->msg);
    remat_free(doc);
}

/* Replays s; a schedule a policy built must be valid unless the byte counts
 * overflow. Writes the replay report and the trace documents too. */
static inline void fuzz_replay(const remat_analysis *a, const remat_schedule *s, int must_be_valid, const char *what)
{
    remat_err err;
    remat_err_init(&err);
    remat_replay_result r;
    remat_status st = remat_replay(a, s, NULL, NULL, &r, &err);
    FUZZ_EXPECT(st == REMAT_OK || fuzz_clean_failure(st), "%s replay: %s", what, err.msg);
    if (st != REMAT_OK)
        return;
    FUZZ_EXPECT(r.valid || !must_be_valid, "%s: policy schedule invalid: %s", what, err.msg);
    size_t len;
    remat_err e2;
    remat_err_init(&e2);
    fuzz_free_doc(remat_report_replay(a, s, &r, &err, REMAT_REPORT_JSON, &len, &e2), &e2, "replay report");
    remat_err_init(&e2);
    fuzz_free_doc(remat_report_replay(a, s, &r, &err, REMAT_REPORT_TEXT, &len, &e2), &e2, "replay text");
    if (r.valid) {
        remat_trace *t = NULL;
        remat_err_init(&e2);
        st = remat_trace_build(a, s, NULL, &t, &e2);
        FUZZ_EXPECT(st == REMAT_OK || fuzz_clean_failure(st), "%s trace: %s", what, e2.msg);
        if (st == REMAT_OK) {
            remat_err_init(&e2);
            fuzz_free_doc(remat_trace_json(t, NULL, &len, &e2), &e2, "trace json");
            remat_err_init(&e2);
            fuzz_free_doc(remat_trace_csv(t, NULL, &len, &e2), &e2, "trace csv");
            remat_err_init(&e2);
            fuzz_free_doc(remat_trace_audit(t, NULL, REMAT_REPORT_JSON, &len, &e2), &e2, "trace audit");
        }
        remat_trace_destroy(t);
    }
    remat_replay_result_destroy(&r);
}

/* Plans at the store-all peak (which store-all meets, so it may fail only
 * by overflow), one byte under it and at half of it: the last two take each
 * planner's infeasible path, whose search for the smallest budget it meets
 * once bisected forever between lo and lo + 1. exact and auto (which runs
 * every strategy, exact included) only on tiny graphs, with a short time
 * limit: on a 12-op graph they cost about a second per input under the
 * sanitizers, a thousand times the rest.
 *
 * Every strategy at every budget made about 530 executions a second; one
 * (strategy, budget) pair per input, chosen by a hash of the input's bytes,
 * makes the target several times faster, and the fuzzer still reaches every
 * pair, since a mutation changes the hash. pick = UINT64_MAX runs them all
 * (the import target, whose inputs are rarer). */
static inline void fuzz_plans(const remat_analysis *a, uint64_t store_all_peak, uint64_t pick)
{
    static const char *const strategies[] = {"store-all", "sqrtn", "chen-greedy", "revolve", "chain-dp",
                                              "dtr",       "mincut", "exact",      "auto"};
    enum { N_STRATEGIES = sizeof strategies / sizeof strategies[0], N_BUDGETS = 3 };
    const uint64_t budgets[N_BUDGETS] = {store_all_peak, store_all_peak - 1, store_all_peak / 2};
    for (size_t i = 0; i < N_STRATEGIES; i++) {
        if (pick != UINT64_MAX && i != pick % N_STRATEGIES)
            continue;
        /* The ops a strategy is fuzzed on at most: the first four are cheap. */
        const uint32_t most = i < 4 ? 48 : i < 7 ? 24 : 6;
        if (a->g->n_ops > most)
            continue;
        for (size_t k = 0; k < N_BUDGETS; k++) {
            if (pick != UINT64_MAX && k != (pick / N_STRATEGIES) % N_BUDGETS)
                continue;
            remat_plan_options o;
            remat_plan_options_init(&o);
            o.strategy = strategies[i];
            o.budget_kind = REMAT_BUDGET_TOTAL;
            o.budget = budgets[k];
            o.time_limit = 0.05;
            remat_plan p;
            remat_replay_result r;
            remat_err err;
            remat_err_init(&err);
            remat_status st = remat_plan_make(a, &o, &p, &r, &err);
            FUZZ_EXPECT(st == REMAT_OK || fuzz_clean_failure(st), "plan %s: %s", strategies[i], err.msg);
            FUZZ_EXPECT(st != REMAT_OK || r.peak_bytes <= o.budget, "plan %s: peak %llu over budget %llu",
                        strategies[i], (unsigned long long)r.peak_bytes, (unsigned long long)o.budget);
            FUZZ_EXPECT(k || i != 0 || st == REMAT_OK || st == REMAT_EOVERFLOW,
                        "store-all infeasible at its own peak: %s", err.msg);
            if (st == REMAT_OK) {
                size_t len;
                remat_err e2;
                remat_err_init(&e2);
                fuzz_free_doc(remat_report_plan(a, &p, &r, &len, &e2), &e2, "plan report");
            }
            remat_replay_result_destroy(&r);
            remat_plan_destroy(&p);
        }
    }
}

/* A cheap hash of the input, for fuzz_plans' choice. */
static inline uint64_t fuzz_pick(const uint8_t *data, size_t size)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < size; i++)
        h = (h ^ data[i]) * 0x100000001b3ULL;
    return h ^ (h >> 29);
}

/* Everything cheap that reads an analysis of g. */
static inline void fuzz_exercise(const remat_graph *g, int plan, uint64_t pick)
{
    remat_analysis *a = NULL;
    remat_err err;
    remat_err_init(&err);
    remat_status st = remat_analyze(g, &a, &err);
    FUZZ_EXPECT(st == REMAT_OK || fuzz_clean_failure(st), "analyze: %s", err.msg);
    if (st != REMAT_OK)
        return;
    size_t len;
    remat_err_init(&err);
    fuzz_free_doc(remat_report_lifetimes(a, REMAT_REPORT_JSON, &len, &err), &err, "lifetimes json");
    remat_err_init(&err);
    fuzz_free_doc(remat_report_lifetimes(a, REMAT_REPORT_TEXT, &len, &err), &err, "lifetimes text");
    /* Store-all, keep nothing, keep every other activation. */
    uint8_t *keep = calloc(g->n_tensors ? g->n_tensors : 1, 1);
    FUZZ_EXPECT(keep != NULL, "calloc");
    uint64_t store_all_peak = 0;
    for (int mode = 0; mode < 3; mode++) {
        for (uint32_t t = 0; t < g->n_tensors; t++)
            keep[t] = mode == 0 ? 1 : mode == 1 ? 0 : (uint8_t)(t & 1);
        remat_schedule s;
        remat_schedule_init(&s);
        remat_err_init(&err);
        st = remat_schedule_from_keep(a, keep, &s, &err);
        FUZZ_EXPECT(st == REMAT_OK || fuzz_clean_failure(st), "policy: %s", err.msg);
        if (st == REMAT_OK) {
            fuzz_replay(a, &s, 1, mode == 0 ? "store-all" : mode == 1 ? "keep nothing" : "keep half");
            if (mode == 0) {
                remat_replay_result r;
                remat_err_init(&err);
                if (remat_replay(a, &s, NULL, NULL, &r, &err) == REMAT_OK && r.valid)
                    store_all_peak = r.peak_bytes;
                remat_replay_result_destroy(&r);
            }
        }
        remat_schedule_destroy(&s);
    }
    free(keep);
    if (plan && store_all_peak)
        fuzz_plans(a, store_all_peak, pick);
    remat_analysis_destroy(a);
}

#endif

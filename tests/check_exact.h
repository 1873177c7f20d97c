/*
 * check_exact.h - what the exact suite's two files share: the random tiny
 * graphs, oracle 1 (every keep set, replayed) and the run of exact, which
 * check_exact.c defines, and the hook by which check_exact_random.c (oracle
 * 2 and the random-graph comparisons) adds its tests to the suite's one
 * case, so `check_remat exact` still runs every exact test.
 */
#ifndef REMAT_CHECK_EXACT_H
#define REMAT_CHECK_EXACT_H

#include "test_util.h"

typedef struct {
    char buf[8192];
    size_t len;
} jbuf;

enum { SHAPE_CHAIN, SHAPE_DAG, SHAPE_PLAIN_CHAIN };

typedef struct {
    uint32_t n; /* activations */
    uint32_t act[16];
    uint32_t sets;       /* 2^n */
    int *valid;          /* per keep set */
    uint64_t *metric[2]; /* TOTAL, ACTIVATION */
    uint64_t *extra;
} keep_table;

typedef struct {
    remat_status st;
    char msg[REMAT_ERR_MSG_MAX];
    uint64_t extra, metric;
    uint64_t effort; /* EINFEASIBLE: the best effort's metric (0: none) */
    char status[32];
    double seconds;
    double gap;
} exact_run;

/* check_exact.c: random tiny graphs (splitmix64), oracle 1, running exact. */
uint32_t rnd(uint64_t *s, uint32_t n);
void gen_graph(uint64_t *rng, int shape, uint32_t n_ops, jbuf *b);
void keep_table_build(const remat_analysis *a, keep_table *kt);
void keep_table_destroy(keep_table *kt);
uint64_t keep_opt(const keep_table *kt, int kind, uint64_t budget);
uint64_t keep_min_metric(const keep_table *kt, int kind);
double param_num(const char *json, const char *key);
exact_run run_exact(const remat_analysis *a, int kind, uint64_t budget, double time_limit);

/* check_exact_random.c: adds its tests to the "exact" case. */
void exact_random_tests(TCase *tc);

#endif

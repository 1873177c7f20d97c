/*
 * check_alloc.h - what the alloc suite's two files share: the oracles
 * check_alloc.c defines (the pairwise disjointness check, the brute-force
 * peak) and its two "must succeed" wrappers, and the hook by which
 * check_alloc_replay.c adds the tests on replayed schedules to the suite's
 * one case, so `check_remat alloc` still runs every allocator test.
 */
#ifndef REMAT_CHECK_ALLOC_H
#define REMAT_CHECK_ALLOC_H

#include "test_util.h"
#include "remat/alloc.h"

/* check_alloc.c: the oracles and wrappers both files use. */
void assert_disjoint(const remat_alloc_trace *t, const uint64_t *off, uint64_t extent, const char *what);
uint64_t brute_peak(const remat_alloc_trace *t);
void simulate_ok(const remat_alloc_trace *t, remat_alloc_policy p, remat_alloc_result *r);
void static_ok(const remat_alloc_trace *t, remat_static_algo algo, remat_static_result *sp);

/* check_alloc_replay.c: adds its tests to the "alloc" case. */
void alloc_replay_tests(TCase *tc);

#endif

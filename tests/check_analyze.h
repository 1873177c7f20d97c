/*
 * check_analyze.h - what the analyze suite's two files share.
 *
 * check_analyze.c builds the "analyze" suite and holds the hand-derived
 * lifetimes; check_analyze_random.c holds the invariants over random DAGs
 * and adds them to the suite's "invariants" case, so `check_remat analyze`
 * still runs every analyze test.
 */
#ifndef REMAT_CHECK_ANALYZE_H
#define REMAT_CHECK_ANALYZE_H

#include "test_util.h"

#define NONE REMAT_NONE

/* check_analyze_random.c: adds its tests to the "invariants" case. */
void analyze_random_tests(TCase *inv);

#endif

/*
 * check_numeric.h - how the numeric suite's files meet: check_numeric.c
 * builds the "numeric" suite and holds the numeric replay's tests;
 * check_numeric_hash.c fills its "hash" case with BLAKE2b's, so
 * `check_remat numeric` still runs them all.
 */
#ifndef REMAT_CHECK_NUMERIC_H
#define REMAT_CHECK_NUMERIC_H

#include "test_util.h"

/* check_numeric_hash.c: adds its tests to the "hash" case. */
void numeric_hash_tests(TCase *tc);

#endif

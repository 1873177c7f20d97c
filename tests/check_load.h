/*
 * check_load.h - what the load suite's three files share: the test JSON
 * conventions and helpers check_load.c defines, and the hooks by which
 * check_load_errors.c and check_load_drivers.c fill the suite's "errors",
 * "drivers" and "robustness" cases, so `check_remat load` still runs every
 * loader test.
 *
 * Test JSON is written with ' in place of " so that it stays readable in C;
 * the helpers swap them back before loading. No id or string in these tests
 * contains a real apostrophe.
 */
#ifndef REMAT_CHECK_LOAD_H
#define REMAT_CHECK_LOAD_H

#include "test_util.h"

#define JSON_CAP 8192

/* The header every test graph starts with. */
#define HDR "{'format':'remat-graph','version':1,"
/* A valid one-op graph body to vary one field at a time. */
#define X_IN "'inputs':[{'id':'x','bytes':4}]"

typedef struct {
    const char *json; /* single-quoted */
    remat_status code;
    const char *substr;
} bad_case;

#define FAILS_ALL(cases) fails_all((cases), sizeof(cases) / sizeof((cases)[0]))

/* check_load.c: load, analyze, refuse (single-quoted JSON), both drivers. */
void dq(char *dst, const char *sq);
remat_graph *load(const char *sq);
remat_analysis *analyze(const char *sq, remat_graph **g);
void fails(const char *sq, remat_status code, const char *substr);
void fails_all(const bad_case *c, size_t n);
remat_graph *load_both(const char *json, size_t len, int may_give_up);
remat_graph *load2(const char *sq);

/* check_load_errors.c, check_load_drivers.c: each adds its tests to the case it names. */
void load_errors_tests(TCase *tc);
void load_drivers_tests(TCase *dr);
void load_robustness_tests(TCase *rb);

#endif

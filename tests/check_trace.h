/*
 * check_trace.h - what the trace suite's two files share: the cheap assert
 * and the checks check_trace.c defines (SVG well-formedness, xmllint, the
 * whole oracle over one graph), and the hook by which check_trace_hand.c
 * adds the hand-checked cases and errors to the suite's one case, so
 * `check_remat trace` still runs every trace test.
 */
#ifndef REMAT_CHECK_TRACE_H
#define REMAT_CHECK_TRACE_H

#include "test_util.h"

/* Check's ck_assert* records a checkpoint on every call (a write to a pipe
 * in fork mode), which dominates loops over every character, step and
 * category; REQUIRE only costs a branch when the condition holds. */
#define REQUIRE(cond, ...)                \
    do {                                  \
        if (!(cond))                      \
            ck_abort_msg(__VA_ARGS__);    \
    } while (0)

/* check_trace.c */
void xml_wellformed(const char *p);
void xmllint_ok(const char *text, size_t len);
void check_graph(const remat_analysis *a, uint64_t seed, int rounds, int lint);

/* check_trace_hand.c: adds its tests to the "trace" case. */
void trace_hand_tests(TCase *tc);

#endif

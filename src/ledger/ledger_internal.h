/*
 * ledger_internal.h - what the ledger's files share: the notes a result
 * carries and the host-side lines (host.c) that ledger.c's one computation
 * calls last. Private to src/ledger.
 */
#ifndef REMAT_LEDGER_INTERNAL_H
#define REMAT_LEDGER_INTERNAL_H

#include "remat/ledger.h"

/* Appends a note (an assumption or an exclusion) to list, dropping it when
 * the list is full. */
void remat__ledger_note(char (*list)[REMAT_LEDGER_NOTE_LEN], uint32_t *n, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#define ASSUME(r, ...) remat__ledger_note((r)->assumptions, &(r)->n_assumptions, __VA_ARGS__)

/* *out = a + b; 0 with err set (naming what) when it exceeds 2^64-1. */
int remat__ledger_add(uint64_t a, uint64_t b, uint64_t *out, remat_err *err, const char *what);

/* Adam's step counters and optimizer offload, on r's device lines as
 * computed: n_tensors trainable param tensors (1 for a bare count),
 * n_groups ZeRO 3 sub groups of the rank's partitions. Moves the offloaded
 * lines to r->host and counts the transfers. 0 with err set on overflow or
 * a bad combination (names the option). O(1). */
int remat__ledger_host(const remat_ledger_config *cfg, uint64_t n_tensors, uint64_t n_groups,
                       remat_ledger_result *r, remat_err *err);

#endif

/*
 * numeric_internal.h - the test seam of numeric replay: injected faults.
 *
 * Deterministic kernels cannot make a recomputation differ, and a correct
 * executor never holds bytes the accounting does not know, so both checks
 * would go untested without a way to break things on purpose. A test
 * passes faults here; remat_numeric_replay is this with none. Not
 * installed, never used outside tests.
 */
#ifndef REMAT_EXEC_NUMERIC_INTERNAL_H
#define REMAT_EXEC_NUMERIC_INTERNAL_H

#include "remat/exec.h"

typedef struct remat__numeric_faults {
    /* Called after a forward kernel has written a storage-owning output into
     * a fresh buffer and before the buffer is hashed (index: the
     * instruction; len = ceil(bytes / scale)). May change the bytes. */
    void (*tamper)(void *ctx, size_t index, remat_instr in, uint32_t tensor, uint8_t *buf, size_t len);
    void *ctx;
    /* Instruction index + 1 whose workspace is overallocated by
     * overallocate_bytes (0: none): an executor holding more than it
     * accounts. */
    size_t overallocate_at;
    uint64_t overallocate_bytes;
} remat__numeric_faults;

/* remat_numeric_replay with faults (NULL: none). */
remat_status remat__numeric_replay_faulty(const remat_analysis *a, const remat_schedule *s, uint64_t scale,
                                          const remat__numeric_faults *faults, remat_numeric_result *out,
                                          remat_err *err);

#endif

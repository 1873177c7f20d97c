/*
 * engine.h - the buffer executor shared by numeric replay and the training
 * step: it walks a schedule on real memory, and the kernels are hooks.
 *
 * Numeric replay (numeric.c) and the real training step (train.c) hold the
 * same buffers at the same instants: one per live storage (a base and its
 * views share it), one per live gradient, one per running op's workspace,
 * by the lifetime rules of replay.c. This file owns that residency and the
 * allocator that counts it; the two callers differ only in what a kernel
 * writes (a keyed hash stream, or real arithmetic). It also owns the two
 * checks both make: every RECOMPUTE must reproduce its first computation bit
 * for bit (BLAKE2b-256 digests of every storage-owning output), and the
 * allocator's high-water mark must equal the accounted peak, which
 * remat__engine_judge derives from remat_replay's own allocation events.
 *
 * Marks (E->mark, per tensor) tell a kernel what to do:
 *   forward:  mark[t] = 1 for an output in a fresh buffer, 2 for an output
 *             whose storage a resident view kept alive (the bytes are still
 *             there; the kernel writes them again), 0 for an output that was
 *             already resident (a RECOMPUTE rebuilds only what is missing:
 *             leave it alone);
 *   backward: mark[t] = 2 for a differentiable input whose gradient this
 *             step creates (the kernel must write it), 1 for one whose
 *             gradient exists (the kernel adds into it), 0 otherwise. A
 *             kernel that writes a gradient turns its mark to 1 (so a second
 *             contribution from the same op adds) or to 0 (it contributed
 *             once); a mark still 2 afterwards is an unwritten gradient, an
 *             error.
 * The engine clears every mark after the hook. Internal; not installed.
 */
#ifndef REMAT_EXEC_ENGINE_H
#define REMAT_EXEC_ENGINE_H

#include "remat/exec.h"

#define REMAT_ENGINE_DIGEST 32

typedef struct remat__engine remat__engine;

typedef struct remat__engine_hooks {
    void *ctx;
    /* Leaf t (an input or a param): return a caller-owned buffer of len
     * bytes that the engine counts as live but never frees, or NULL to have
     * the engine allocate one and call fill_leaf. May be NULL. */
    uint8_t *(*leaf_buffer)(void *ctx, remat__engine *E, uint32_t t, uint64_t len);
    remat_status (*fill_leaf)(void *ctx, remat__engine *E, uint32_t t, uint8_t *buf, uint64_t len);
    /* Computes op k's fresh outputs (marks above); ws holds the op's
     * workspace bytes while it runs. */
    remat_status (*forward)(void *ctx, remat__engine *E, uint32_t k, int recompute, uint8_t *ws, uint64_t ws_len);
    /* Writes the gradient seed of graph output t (at the first BWD). */
    remat_status (*seed)(void *ctx, remat__engine *E, uint32_t t, uint8_t *buf, uint64_t len);
    /* Op k's backward step: reads the output gradients (E->grad) and its
     * saves, writes or adds the input gradients (marks above). */
    remat_status (*backward)(void *ctx, remat__engine *E, uint32_t k, uint8_t *ws, uint64_t ws_len);
    /* The optimizer step (OPT, or the implied one at the end): every
     * parameter gradient is complete. May be NULL. */
    remat_status (*opt)(void *ctx, remat__engine *E);
} remat__engine_hooks;

struct remat__engine {
    const remat_analysis *a;
    const remat_graph *g;
    uint64_t scale;
    const remat__engine_hooks *h;
    const char *name; /* "numeric replay", "training step": prefixes every message */
    remat_err *err;
    uint8_t **buf;   /* storage -> its buffer while any member is resident */
    uint8_t **grad;  /* tensor -> its gradient buffer while live */
    uint32_t *cnt;   /* storage -> resident members (a base and its views) */
    uint8_t *res;    /* tensor resident */
    uint8_t *mark;   /* per instruction scratch (see above), always cleared again */
    uint8_t *owned;  /* leaf storage -> 1 if the engine allocated its buffer */
    uint8_t *digest; /* tensor -> REMAT_ENGINE_DIGEST bytes: its first computation */
    uint64_t live, high;
    size_t index;    /* current instruction; SIZE_MAX while placing leaves */
    remat_instr in;
    int seeded;
    /* The recomputation check. */
    uint64_t recomputed_checked, mismatches;
    size_t first_mismatch_index;
    uint32_t first_mismatch_tensor;
    /* Test seam: instruction index + 1 whose workspace is overallocated by
     * overallocate_bytes (0: none), an executor holding more than it
     * accounts. */
    size_t overallocate_at;
    uint64_t overallocate_bytes;
};

/* Sets up E for a run of a's graph at 1/scale size (scale >= 1); name
 * prefixes its messages. E is safe to destroy after a failed init.
 * O(tensors). */
remat_status remat__engine_init(remat__engine *E, const remat_analysis *a, uint64_t scale, const char *name,
                                const remat__engine_hooks *h, remat_err *err);
/* Frees every buffer the engine allocated (not the caller's leaves). */
void remat__engine_destroy(remat__engine *E);

/* Counts bytes that the caller holds for the whole run (the optimizer
 * state) as live, before remat__engine_run. */
remat_status remat__engine_hold(remat__engine *E, uint64_t bytes);

/* Places the leaves and executes s, which remat_replay must have judged
 * valid (the engine re-checks only what would crash it). Ends with the opt
 * hook. A recomputation that differs is counted (E->mismatches) with its
 * error in err (REMAT_EINTERNAL) but does not stop the run; kernel and
 * allocation failures do. Gradient buffers of params and inputs stay
 * readable in E->grad until destroy. */
remat_status remat__engine_run(remat__engine *E, const remat_schedule *s);

/* The judge: remat_replay(a, s, extras) (r owned by the caller, destroy
 * it), plus the high-water mark of its allocation events at 1/scale size
 * (each allocation rounded up, as the engine allocates). */
remat_status remat__engine_judge(const remat_analysis *a, const remat_schedule *s, const remat_exec_extras *extras,
                                 uint64_t scale, remat_replay_result *r, uint64_t *accounted_scaled, remat_err *err);

/* Bytes of a buffer at the engine's scale. */
uint64_t remat__engine_storage_len(const remat__engine *E, uint32_t t);
uint64_t remat__engine_grad_len(const remat__engine *E, uint32_t t);

/* "instruction 12 (BWD h1)" or "placing inputs and params". */
const char *remat__engine_where(const remat__engine *E, char *buf, size_t cap);

/* REMAT_EINTERNAL "<name>: <where>: <fmt with id>". */
remat_status remat__engine_broken(remat__engine *E, const char *fmt, const char *id);

#endif

/*
 * exec_util.h - helpers shared by the executor's suites (check_exec.c,
 * check_exec_mutation.c, check_exec_oracle.c, check_exec_files.c):
 * schedules written and edited as text, the default policy and the replay
 * wrapped in assertions, and the two small graphs (MLP2, CHAIN4) whose
 * figures check_exec.c derives by hand and the other suites reuse.
 */
#ifndef REMAT_TEST_EXEC_UTIL_H
#define REMAT_TEST_EXEC_UTIL_H

#include "test_util.h"

/* graphs/mlp2.json: a view (v1 of a1), relu saving its output, a sum saving
 * nothing, a frozen param (w2). */
extern const char *const MLP2;
/* The default policy's store-all schedule of MLP2, as text. */
extern const char *const MLP2_STORE_ALL;
/* A 4-op chain with distinct sizes so every figure has one explanation. */
extern const char *const CHAIN4;

/* ---- Schedules as text ---- */

/* "FWD a", "RECOMPUTE a", "BWD a", "FREE t" or "OPT" with ids of g; asserts
 * the text names a known instruction and id. */
remat_instr instr_of(const remat_graph *g, const char *text);
/* "FWD a, FREE b, OPT" -> s (appended). */
void sched_parse(const remat_graph *g, const char *text, remat_schedule *s);
/* dst = a fresh copy of src (dst need not be initialised). */
void sched_copy(remat_schedule *dst, const remat_schedule *src);
/* Deletes instruction i, or inserts `in` before instruction i (i may be n). */
void sched_del(remat_schedule *s, size_t i);
void sched_ins(remat_schedule *s, size_t i, remat_instr in);

/* ---- Replay helpers ---- */

/* The default policy's schedule for keep (NULL: store-all) into a fresh s;
 * asserts it succeeds. */
void build_keep(const remat_analysis *a, const uint8_t *keep, remat_schedule *s);
/* Replays s with the extras x (may be NULL); asserts the replay succeeds and
 * finds s valid. The caller destroys r. */
void replay_valid(const remat_analysis *a, const remat_schedule *s, const remat_exec_extras *x,
                  remat_replay_result *r);
/* Asserts got[c] == want[c] for every category, naming the first that
 * differs. */
void assert_categories(const uint64_t *got, const uint64_t *want);
/* Loads MLP2 into *g and MLP2_STORE_ALL, as written, into a fresh s, and
 * asserts it replays valid with its hand-computed peak. The caller destroys
 * the analysis it returns, *g and s. */
remat_analysis *mlp2_schedule(remat_graph **g, remat_schedule *s);

#endif

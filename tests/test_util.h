/*
 * test_util.h - helpers shared by the unit tests: load a graph from inline
 * JSON, assert an error's status and message substring, find fixtures.
 */
#ifndef REMAT_TEST_UTIL_H
#define REMAT_TEST_UTIL_H

#include "remat.h"

#include <check.h>
#include <string.h>

/* Loads JSON text; asserts success; returns the graph. */
remat_graph *t_load(const char *json);
/* Loads and analyzes; asserts success. */
remat_analysis *t_analyze(const char *json, remat_graph **g);
/* Generates a graph with `remat gen`'s options (remat_gen_json) and loads
 * it; asserts success. */
remat_graph *t_gen(const remat_gen_opts *o);
/* The chain of `ops` ops of 1 MiB activations with a param of param_bytes
 * per op (remat gen chain --ops N --param-bytes B). */
remat_graph *t_gen_chain(uint32_t ops, uint64_t param_bytes);
/* Loads JSON text and asserts it fails with `code` and a message containing
 * `substr`. */
void t_load_fails(const char *json, remat_status code, const char *substr);
/* Path of a fixture under $REMAT_FIXTURES (default tests/fixtures). */
const char *t_fixture(const char *name, char *buf, size_t cap);
/* Tensor/op index by id, asserting it exists. */
uint32_t t_tensor(const remat_graph *g, const char *id);
uint32_t t_op(const remat_graph *g, const char *id);
/* Forward/backward step index of an op by id (asserting it has one). */
uint32_t t_fwd(const remat_analysis *a, const char *op);
uint32_t t_bwd(const remat_analysis *a, const char *op);

#define ck_assert_msg_contains(err, substr)                                                          \
    ck_assert_msg(strstr((err)->msg, (substr)) != NULL, "message '%s' lacks '%s'", (err)->msg, (substr))

#endif

/*
 * load_internal.h - the graph loader's parts, shared by its two drivers.
 *
 * The meaning of every field lives in load_elems.c, one function per kind of
 * element (a leaf, an op's first pass, an op's second pass, the outputs).
 * Two drivers feed them cJSON trees:
 *
 *  - the tree driver (loader.c) parses the whole document with cJSON and
 *    walks it in the canonical order: top-level fields, leaves, every op's
 *    first pass (ids), every op's second pass (references), the outputs.
 *    Its first error is the error the user sees.
 *  - the stream driver (load_stream.c) scans the document's top level itself
 *    and parses one element of "inputs", "params" or "ops" at a time, doing
 *    both passes of an op at once; a reference to an id not yet seen is
 *    deferred and resolved at the end. It only has to be right on input
 *    that loads: at anything it does not like (any content error, a syntax
 *    error, an unusual field order) it gives up and the tree driver runs,
 *    so every message, JSON path and line:column is the tree driver's.
 *    Out of memory is the one failure it reports itself.
 *
 * The stream driver exists for memory: the tree of a 10^6-op graph is about
 * 760 MiB, one element's tree is a few hundred bytes.
 */
#ifndef REMAT_LOAD_INTERNAL_H
#define REMAT_LOAD_INTERNAL_H

#include "graph_store.h"
#include "json_glue.h"

/* JSON paths are built from fixed keys and array indices, so they stay far
 * below this; a truncated path in a message would still name the place. */
#define PATH_MAX_LEN 160

/* A reference whose id was not yet registered when the stream driver read
 * it: where its index goes, and the id (an offset into loader.pend_ids). */
typedef struct {
    uint64_t where; /* index into g->refs, or LOAD_ALIAS_BIT | tensor index */
    size_t id;
} load_pending;
#define LOAD_ALIAS_BIT ((uint64_t)1 << 63)

/* An op whose checks that need resolved references wait for the end. */
typedef struct {
    uint32_t op;
    uint8_t default_saves; /* "saves" absent and not a view op: fill with the distinct inputs */
    uint8_t explicit_saves;
} load_deferred;

/* alias_of of a view whose base is still unresolved (never a tensor index:
 * graphs hold at most 2^32-2 tensors). */
#define LOAD_ALIAS_PENDING (REMAT_NONE - 1)
/* storage of a view that gave no bytes, until finish_storage gives it its
 * base's logical size. */
#define LOAD_LOGICAL_INHERIT REMAT_NONE

typedef struct {
    const char *source;
    remat_err *err;
    remat_graph *g;
    remat_graph_store *st;
    size_t cap_tensors, cap_ops, cap_refs; /* allocated lengths of g->tensors, g->ops, g->refs */
    /* Stream driver only. */
    int streaming;
    int op_pending; /* the op being read has a deferred reference */
    load_pending *pend;
    size_t n_pend, cap_pend;
    remat_buf pend_ids;
    load_deferred *dops;
    size_t n_dops, cap_dops;
} loader;

/* Field tables: one pass over an object's members checks every key against
 * the allowed list (an unknown key or a key given twice is an error) and
 * files each value in its slot, so later lookups cost nothing. */
enum { TOP_FORMAT, TOP_VERSION, TOP_NAME, TOP_INPUTS, TOP_PARAMS, TOP_OPS, TOP_OUTPUTS, TOP_META, TOP_N };
enum { LEAF_ID, LEAF_BYTES, LEAF_FROZEN, LEAF_REQUIRES_GRAD, LEAF_DTYPE, LEAF_SHAPE, LEAF_N };
enum {
    OP_ID, OP_OP, OP_INPUTS, OP_BYTES, OP_FLOPS, OP_SAVES, OP_OUTPUTS, OP_ALIAS_OF, OP_BWD_FLOPS, OP_WORKSPACE,
    OP_BWD_WORKSPACE, OP_RECOMPUTABLE, OP_DTYPE, OP_SHAPE, OP_ATTRS, OP_GRAD_VIEWS, OP_N
};
enum { OUT_ID, OUT_BYTES, OUT_ALIAS_OF, OUT_DTYPE, OUT_SHAPE, OUT_N };
extern const char *const remat__load_top_keys[];

typedef struct {
    const cJSON *v[OP_N];
} load_fields;

int remat__load_fields(loader *L, const cJSON *obj, const char *path, const char *const *allowed, load_fields *f);

remat_status remat__load_fail(loader *L, remat_status code, const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
remat_status remat__load_nomem(loader *L);

/* Makes room for n tensors, ops or refs in all (growing by doubling while
 * streaming). 0 on out of memory (reported). */
int remat__load_reserve_tensors(loader *L, uint64_t n);
int remat__load_reserve_ops(loader *L, uint64_t n);
int remat__load_reserve_refs(loader *L, uint64_t n);

/* The top level's fields, already filed: format, version, name, the four
 * arrays' types and meta. */
typedef struct {
    const cJSON *inputs, *params, *ops, *outputs;
} load_top_arrays;
int remat__load_top_fields(loader *L, const load_fields *f, load_top_arrays *a);

/* One leaf (inputs[i] or params[i]) into tensor `index`. */
int remat__load_leaf(loader *L, const cJSON *e, const char *name, uint32_t i, remat_tensor_kind kind, uint32_t index);

/* An op's first pass: op k's ids and counts; registers its output tensors
 * from *next on; adds its reference count to *n_refs. */
int remat__load_op_ids(loader *L, const cJSON *e, uint32_t k, uint32_t *next, uint64_t *n_refs);

/* An op's second pass: resolves its references (refs from *ref on, its
 * outputs from tensor *ti on) and reads its costs. */
int remat__load_op_refs(loader *L, const cJSON *e, uint32_t k, uint32_t *ti, uint64_t *ref);

/* Resolves a tensor reference (a string) into *out. While streaming, an id
 * not seen yet is deferred (recorded at `where`: an index of g->refs, or
 * LOAD_ALIAS_BIT | tensor) and *out gets `placeholder` until the end. */
int remat__load_resolve(loader *L, const cJSON *v, const char *path, uint32_t *out, uint64_t where,
                        uint32_t placeholder);

/* Small lists are checked pairwise; long ones (an op may read 10^5
 * tensors) through a sort, so that no list costs more than O(n log n). */
#define PAIRWISE_MAX 64
/* Sets first[i] = 1 for every i whose value does not occur before i.
 * 0 on out of memory (reported). */
int remat__load_first_occurrences(loader *L, const uint32_t *v, uint32_t n, uint8_t *first);

/* The stream driver's end: resolves deferred references and runs the checks
 * they held back. 0 when something does not resolve or check. */
int remat__load_resolve_deferred(loader *L);

/* Ids are printed in messages, capped (a 1 MB id would drown the text):
 * id itself, or its start and "..." in buf. */
const char *remat__load_short_id(const char *id, char *buf, size_t cap);
/* "base[i]", or "base.key[i]" when key is not NULL, truncated at cap. */
void remat__load_path_index(char *dst, size_t cap, const char *base, const char *key, uint32_t i);
/* An op's default saves: its distinct inputs, in order (load_checks.c). */
int remat__load_default_saves(loader *L, remat_op *op);
/* Refuses explicit saves that name a tensor twice, at path.saves[i]. */
int remat__load_check_saves(loader *L, const remat_op *op, const char *path);
/* Refuses an op id that is the id of a tensor other than its own output. */
int remat__load_check_op_id(loader *L, uint32_t k, const char *path);

/* Views' storage and sizes, the graph outputs, the fingerprint
 * (load_graph.c). */
int remat__load_finish(loader *L, const cJSON *outputs);

/* The stream driver (load_stream.c): 1 when the graph is loaded; 0 when it
 * gave up (L->err then holds REMAT_ENOMEM if memory ran out, which is final;
 * any other failure means "let the tree driver tell"). The cJSON arena must
 * be open. */
int remat__load_stream(loader *L, const char *text, size_t len);

/* remat_graph_load_json with the driver chosen: REMAT_LOAD_AUTO (stream,
 * then tree if the stream gives up), REMAT_LOAD_TREE, or REMAT_LOAD_STREAM
 * (REMAT_EUNSUPPORTED when it gives up). For tests that compare the two. */
typedef enum { REMAT_LOAD_AUTO, REMAT_LOAD_TREE, REMAT_LOAD_STREAM } remat_load_mode;
remat_status remat__graph_load_json_mode(const char *text, size_t len, const char *source, remat_graph **out,
                                         remat_err *err, remat_load_mode mode);

/* Whether two loaded graphs are the same in every field (ids by content);
 * if not, why (at most cap bytes). For tests and the fuzz target. */
int remat__graph_same(const remat_graph *a, const remat_graph *b, char *why, size_t cap);

#endif

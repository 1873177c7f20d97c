/*
 * import_tp_internal.h - what the two halves of the tensor-parallel split
 * share: import_tp.c decides each tensor's state (replicated or split) from
 * the partition and the data flow; import_tp_edit.c applies the states to
 * the cJSON tree and inserts the collectives. Internal to src/import.
 */
#ifndef REMAT_IMPORT_TP_INTERNAL_H
#define REMAT_IMPORT_TP_INTERNAL_H

#include "import_internal.h"
#include "../load/json_glue.h"

#define NONE UINT32_MAX

enum { REPL = 0, SHARD = 1 };
enum { ROLE_NONE = 0, ROLE_COL = 1, ROLE_ROW = 2 };

typedef struct {
    const char *id;     /* borrowed from the tree */
    cJSON *obj;         /* the object holding its bytes (an op, an outputs[] entry, a leaf) */
    uint32_t op;        /* producing op, or NONE for params and inputs */
    int is_param;
    int is_leaf;        /* param or input */
    int is_f;           /* a tp_copy inserted here */
    int state;
    int free_;          /* made from nothing: every input (if any) is such a tensor */
    uint32_t first_use; /* a consumer list as a singly linked chain through uses[] */
} tten;

typedef struct {
    uint32_t op;
    uint32_t next;
} tuse;

typedef struct {
    cJSON *obj;
    const char *id;
    const char *module;
    int role;
    int sharded;         /* does 1/t of its work */
    int free_;
    uint32_t weight;     /* column/row: the "<module>.weight" param */
    uint32_t n_out;
    uint32_t out0;       /* tensor index of its first output */
} top;

typedef struct {
    const char *source, *psource;
    remat_err *err;
    uint64_t t;
    cJSON *root, *part;
    tten *ten;
    uint32_t n_ten, cap_ten;
    top *ops;
    uint32_t n_ops;
    tuse *uses;
    uint32_t n_uses, cap_uses;
    remat_strmap ids;
    int ids_ok;
    const cJSON *col, *row; /* the partition's pattern arrays */
    remat_import_tp_summary sum;
} tx;

/* Records "file: [path: ]message" (REMAT_EGRAPH) naming id, returns 0. */
int remat__tp_bad(tx *c, const char *file, const char *path, const char *id, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;
int remat__tp_nomem(tx *c);
/* A count (a JSON number, or a decimal string above 2^53) into *out. */
int remat__tp_count(const cJSON *v, uint64_t *out);
int remat__tp_set_count(tx *c, cJSON *v, uint64_t x);
/* obj[key] / t: exactly (else an error naming id) or rounded up. */
int remat__tp_divide(tx *c, cJSON *obj, const char *key, int exact, const char *what, const char *id);
/* Indexes a tensor (NONE when out of memory, err set). */
uint32_t remat__tp_add_tensor(tx *c, const char *id, cJSON *obj, uint32_t op, int is_param, int is_leaf);
uint32_t remat__tp_lookup(const tx *c, const char *id);
uint64_t remat__tp_bytes(const tx *c, uint32_t t);
/* Applies the states to the tree (import_tp_edit.c). */
int remat__tp_apply(tx *c);

#endif

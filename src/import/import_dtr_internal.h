/*
 * import_dtr_internal.h - the state shared by the two halves of the DTR log
 * importer: import_dtr.c reads the log into tables of tensors, names, ops
 * and backward reads; import_dtr_map.c decides the roles (seed, loss,
 * params, backward steps), gives each backward instruction to a forward op
 * and writes the remat graph; import_dtr_entry.c joins them behind the
 * public calls. Internal to src/import.
 */
#ifndef REMAT_LOAD_IMPORT_DTR_INTERNAL_H
#define REMAT_LOAD_IMPORT_DTR_INTERNAL_H

#include "import_internal.h"

#include <stddef.h>
#include <stdint.h>

#define REMAT_DTR_NONE UINT32_MAX

typedef struct {
    char *id;           /* the log name that made it, or "n@k" for a MUTATE version (owned) */
    uint64_t bytes;     /* MEMORY: own storage (a view's is ignored) */
    uint32_t producer;  /* forward op, or REMAT_DTR_NONE */
    uint32_t alias_of;  /* a view's base, or REMAT_DTR_NONE */
    uint32_t line;
    int64_t refs;       /* names bound to it and not released (simrd's _ref) */
    uint8_t fwd;        /* made in the forward part */
    uint8_t constant, param;
    uint8_t live_at_split; /* refs > 0 when the forward part ended */
    uint8_t read_fwd, read_bwd;
} dten;

typedef struct {
    char *name;         /* owned */
    uint32_t tensor, line, versions;
    uint8_t released;
} dname;

typedef struct {
    char *type;         /* NAME (owned) */
    uint64_t time, bwd_time;
    uint32_t in_off, n_in, out_off, n_out; /* slices of dtr_cx.ref */
    uint32_t line;
    uint8_t mutate, has_bwd, dropped;
} dop;

/* A backward CALL or MUTATE: the forward tensors it reads (a slice of
 * dtr_cx.rref, no repeats), its time, and the forward op type its NAME
 * points at ("cudnn_convolution" for "cudnn_convolution_backward"; owned,
 * NULL when the NAME has no "_backward" after some prefix). */
typedef struct {
    uint32_t off, n, line;
    uint64_t time;
    char *fwd_type;
} dread;

typedef struct {
    uint32_t op, t;
} dsave;

typedef enum { P_NONE, P_CONST_MEMORY, P_MEMORY, P_ALIAS } pend_kind;

/* A growable array: data, count, capacity (in elements). */
#define DTR_VEC(T) struct { T *v; uint32_t n, cap; }

typedef struct {
    const char *source;
    remat_err *err;
    uint32_t line;
    DTR_VEC(dten) t;
    DTR_VEC(dname) nm;
    DTR_VEC(dop) op;
    DTR_VEC(uint32_t) ref;  /* forward ops' inputs then outputs */
    DTR_VEC(dread) rd;
    DTR_VEC(uint32_t) rref; /* backward reads */
    DTR_VEC(dsave) sv;
    DTR_VEC(uint32_t) tmp;  /* one instruction's resolved arguments */
    DTR_VEC(uint32_t) tmpn; /* ... and the names they were read through */
    remat_strmap names; /* log name -> nm index */
    remat_strmap ids;   /* tensor id -> t index */
    void *grown;        /* PUSH's new array, before it is stored with its type */
    int maps_ok, started, in_bwd;
    /* The line awaited after a CONSTANT or a CALL. */
    pend_kind pend;
    uint32_t pend_line, pend_first, pend_k, pend_n, pend_op, pend_nargs;
    remat_import_dtr_summary sum;
} dtr_cx;

/* A larger copy of the array v (capacity doubled, *cap updated), or NULL
 * with the error recorded in c->err. The bound keeps every index below
 * REMAT_DTR_NONE. */
void *remat__dtr_grow(dtr_cx *c, void *v, uint32_t *cap, size_t elem);

/* Room for one more element of vec: 1, or 0 with the error recorded. The
 * new array comes back as void * and is stored through the typed member
 * (no type-punned pointer writes). */
#define DTR_PUSH(c, vec)                                                                                   \
    ((vec).n < (vec).cap ||                                                                               \
     (((c)->grown = remat__dtr_grow((c), (vec).v, &(vec).cap, sizeof *(vec).v)) != NULL &&                \
      ((vec).v = (c)->grown, 1)))

/* Records "source: out of memory ..." (REMAT_ENOMEM); returns 0. */
int remat__dtr_nomem(dtr_cx *c);

static inline uint64_t remat__dtr_sat_add(uint64_t a, uint64_t b)
{
    uint64_t s;
    return remat_u64_add(a, b, &s) ? s : UINT64_MAX;
}

/* Reads every line of the log into c (c->source and c->err set, the rest
 * zero). 0 on failure, with the error (naming the line and field) in
 * c->err. */
int remat__dtr_read(dtr_cx *c, const char *text, size_t len);

/* After remat__dtr_read: the roles, the saves and bwd_flops, and the graph
 * text appended to b; fills c->sum's derived counts. 0 on failure. */
int remat__dtr_map(dtr_cx *c, const char *name, remat_buf *b);

/* Frees everything c holds (safe after any failure). */
void remat__dtr_free(dtr_cx *c);

#endif

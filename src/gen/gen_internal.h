/*
 * gen_internal.h - what gen.c (chain, layered, the API) and gen_nets.c
 * (resnet, transformer, unet) share: one JSON writer over a remat_buf, the
 * option errors it records, and the entry point of each model family.
 */
#ifndef REMAT_GEN_INTERNAL_H
#define REMAT_GEN_INTERNAL_H

#include "remat/gen.h"
#include "../util/util_internal.h"

/* Enough for 10^8 ops of text in memory (several GB); beyond that nobody
 * means it and the loader's 2^32 index limit is near. */
#define REMAT__GEN_MAX_OPS 100000000ULL

typedef struct {
    remat_buf b;
    remat_err *err;
    int bad; /* an option error is recorded in err; stop writing */
} remat__gen_writer;

/* A count as a JSON number, or as a decimal string above 2^53. */
void remat__gen_put_u64(remat__gen_writer *w, uint64_t v);

/* Records an option error (REMAT_EINVAL; the first wins) and returns 0. */
int remat__gen_invalid(remat__gen_writer *w, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Checked product; on overflow records an error naming `what`, returns 0. */
uint64_t remat__gen_mul(remat__gen_writer *w, uint64_t a, uint64_t b, const char *what);

/* The document's frame: header opens "meta" (add fields with meta_u64,
 * close it with meta_end, which leaves the writer before "inputs"); footer
 * closes the ops array and names the output "loss". */
void remat__gen_header(remat__gen_writer *w, const char *name, const char *family);
void remat__gen_meta_u64(remat__gen_writer *w, const char *key, uint64_t v);
void remat__gen_meta_end(remat__gen_writer *w);
void remat__gen_footer(remat__gen_writer *w);

/* The model families (gen_nets.c). Each validates its options, writes the
 * whole document and returns 1, or returns 0 with the error recorded. */
int remat__gen_resnet(remat__gen_writer *w, const remat_gen_opts *o, const char *name);
int remat__gen_transformer(remat__gen_writer *w, const remat_gen_opts *o, const char *name);
int remat__gen_unet(remat__gen_writer *w, const remat_gen_opts *o, const char *name);

#endif

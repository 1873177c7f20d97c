/*
 * import_internal.h - what every importer (Checkmate graphs, DTR logs)
 * shares: the error helper that writes one message and fills remat_err's
 * location with the same facts, and the common head and tail of a public
 * import call (the caller's out-parameters cleared first, the converted text
 * handed over or freed last, a file read before its text is converted).
 * Internal to src/import.
 *
 * Errors are written with remat__err_at (util), which builds the message
 * "file[:line[:column]]: [path: ]detail" from the same facts it stores in
 * remat_err.loc, so the words and the location always agree.
 */
#ifndef REMAT_IMPORT_INTERNAL_H
#define REMAT_IMPORT_INTERNAL_H

#include "remat/import.h"
#include "../util/util_internal.h"

#include <stddef.h>
#include <stdint.h>

/* The head of a public import call: *err_io is the caller's err, or local
 * when the caller passed NULL (local initialised); *out and *out_len are
 * cleared so a failure never leaves them pointing anywhere. */
void remat__import_begin(remat_err **err_io, remat_err *local, char **out, size_t *out_len);

/* The tail: when ok, b's text becomes the caller's (*out, *out_len) and
 * REMAT_OK is returned; otherwise b is freed and err's code returned
 * (REMAT_EINTERNAL if a reader failed without saying why). */
remat_status remat__import_finish(int ok, remat_buf *b, char **out, size_t *out_len, const remat_err *err);

/* One importer's text entry point with its summary type erased, so that one
 * file reader serves every format. */
typedef remat_status (*remat__import_text_fn)(const char *text, size_t len, const char *source, const char *name,
                                              char **out, size_t *out_len, void *summary, remat_err *err);

/* Reads path ("-" for stdin) and converts its text with fn, naming the file
 * as the source; *out is NULL after any failure. */
remat_status remat__import_file(remat__import_text_fn fn, const char *path, const char *name, char **out,
                                size_t *out_len, void *summary, remat_err *err);

/* Writes a remat-graph tree as the exporter lays one out: one key per line,
 * and one element per line in "inputs", "params" and "ops", so that a diff
 * of two graphs shows the ops that changed. Returns 0 when out of memory
 * (b may then be partly written). */
struct cJSON;
int remat__import_write_doc(const struct cJSON *root, remat_buf *b);

#endif

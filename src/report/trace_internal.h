/*
 * trace_internal.h - what the trace writers share (src/report/trace*.c):
 * step and interval names written without truncation, JSON counts, the peak
 * object, and the common ending of every writer.
 */
#ifndef REMAT_TRACE_INTERNAL_H
#define REMAT_TRACE_INTERNAL_H

#include "remat/trace.h"
#include "../util/util_internal.h"

/* Default top-N and SVG size, applied by remat__trace_opts. */
#define REMAT__TRACE_TOP 5
#define REMAT__TRACE_W 1200
#define REMAT__TRACE_H 640

/* Copies o (or the defaults when NULL) with every 0 replaced by its
 * default. */
remat_trace_options remat__trace_opts(const remat_trace_options *o);

/* "fwd", "recompute", "bwd", "free", "opt". */
const char *remat__trace_kind(remat_instr in);

/* The name writers append a name as is (json = 0), or as a complete JSON
 * string literal, quotes included (json = 1), without a scratch buffer:
 * the JSON and Chrome writers name hundreds of thousands of things.
 *   step name:   "fwd:ID", "recompute:ID", "bwd:ID", "free:ID", "optimizer";
 *   instruction: "FWD ID", ..., "OPT";
 *   interval id: the tensor id, "grad:ID", "ledger:CATEGORY", "workspace"
 *                or "transient". */
typedef void (*remat__trace_namer)(remat_buf *b, const remat_trace *t, size_t k, int json);
void remat__trace_step_name(remat_buf *b, const remat_trace *t, size_t s, int json);
void remat__trace_instr_text(remat_buf *b, const remat_trace *t, size_t s, int json);
void remat__trace_interval_id(remat_buf *b, const remat_trace *t, size_t i, int json);

/* Appends s JSON-escaped, without quotes. */
void remat__json_esc(remat_buf *b, const char *s);

/* Appends a decimal number (no printf: the writers' hot path). */
void remat__put_u64(remat_buf *b, uint64_t v);

/* Appends a byte or FLOP count: a JSON number up to 2^53-1, a decimal
 * string above (the graph format's convention for exact large counts). */
void remat__json_count(remat_buf *b, uint64_t v);

/* Appends the "peak" object of the JSON trace and the audit:
 * {"bytes", "step", "instruction", "by_category": {...}, "top": [...]}. */
void remat__trace_peak_json(remat_buf *b, const remat_trace *t, const remat_trace_options *o);

/* Ends a writer: on success returns the text (and its length), else frees
 * it and sets REMAT_ENOMEM naming `what`. */

#endif

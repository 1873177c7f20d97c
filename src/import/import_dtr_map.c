/*
 * import_dtr_map.c - the second half of the DTR log importer (see
 * import_dtr.c and remat/import.h): once the whole log is read, decides the
 * gradient seed and the loss (or the outputs) and which constants are
 * params, asks remat_analyze which ops get a backward step (so that saves
 * are given only to ops whose backward step will read them) and, from the
 * same analysis, which ops read each tensor, gives
 * every backward instruction's reads and time to a forward op, and writes
 * the remat graph.
 */
#include "import_dtr_internal.h"
#include "remat/analyze.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONE REMAT_DTR_NONE

/* Records "source: message" (REMAT_EGRAPH, the file in err's location)
 * and returns 0: what this half refuses is the log as a whole, not a line. */
static int fail(dtr_cx *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static int fail(dtr_cx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    remat__err_vat(c->err, REMAT_EGRAPH, c->source, 0, 0, NULL, NULL, fmt, ap);
    va_end(ap);
    return 0;
}

/* ---- After the log: roles, gradient flow, saves ------------------------ */

static int touches(const dtr_cx *c, uint32_t op, uint32_t ti)
{
    const dop *o = &c->op.v[op];
    const uint32_t *r = c->ref.v + o->in_off;
    for (uint32_t k = 0; k < o->n_in + o->n_out; k++)
        if (r[k] == ti)
            return 1;
    return 0;
}

/* Whether op gets a backward step and has every one of s[1..n) among its
 * inputs or outputs (s[0] is the tensor it was found through). */
static int fits(const dtr_cx *c, uint32_t op, const uint32_t *s, uint32_t n)
{
    if (!c->op.v[op].has_bwd || c->op.v[op].dropped)
        return 0;
    for (uint32_t q = 1; q < n; q++)
        if (!touches(c, op, s[q]))
            return 0;
    return 1;
}

/* The converted graph's view of the log's tables: its analysis (whose
 * consumer lists are the readers of each tensor, in forward order), each
 * log tensor's graph tensor (NONE for those the graph has not: backward
 * ones) and each graph op's log op. */
typedef struct {
    const remat_analysis *a;
    uint32_t *tensor; /* log tensor -> graph tensor */
    uint32_t *op;     /* graph op -> log op */
} graph_view;

/* The op that fits s[0..n): the earliest, in forward order, whose type is
 * fwd_type (the backward NAME's own forward op), else the earliest of all.
 * The producer of s[0] comes before every op that reads it and the readers
 * are listed in forward order, so the first fit found is the earliest. NONE
 * if none fits. */
static uint32_t pick(const dtr_cx *c, const graph_view *v, const uint32_t *s, uint32_t n, const char *fwd_type)
{
    uint32_t t0 = s[0], first = NONE, gt = v->tensor[t0];
    const uint32_t *cons = gt == NONE ? NULL : v->a->cons + v->a->cons_off[gt];
    uint32_t n_cand = 1 + (gt == NONE ? 0 : v->a->cons_off[gt + 1] - v->a->cons_off[gt]);
    for (uint32_t k = 0; k < n_cand; k++) {
        uint32_t op = k == 0 ? c->t.v[t0].producer : v->op[cons[k - 1]];
        if (op == NONE || !fits(c, op, s, n))
            continue;
        if (first == NONE)
            first = op;
        if (!fwd_type || strcmp(c->op.v[op].type, fwd_type) == 0)
            return op;
    }
    return first;
}

static int add_save(dtr_cx *c, uint32_t op, uint32_t ti)
{
    if (!DTR_PUSH(c, c->sv))
        return 0;
    c->sv.v[c->sv.n].op = op;
    c->sv.v[c->sv.n++].t = ti;
    return 1;
}

static int give_time(dtr_cx *c, uint32_t op, uint64_t time)
{
    if (!remat_u64_add(c->op.v[op].bwd_time, time, &c->op.v[op].bwd_time)) {
        const char *id = c->t.v[c->ref.v[c->op.v[op].out_off]].id;
        remat__err_at(c->err, REMAT_EOVERFLOW, c->source, 0, 0, NULL, id,
                      "the backward TIME given to op '%.80s' (line %u) exceeds 2^64-1 ns", id, c->op.v[op].line);
        return 0;
    }
    return 1;
}

static int attribute(dtr_cx *c, const remat_graph *g, const remat_analysis *a)
{
    graph_view v = {a, remat__array(c->t.n ? c->t.n : 1, sizeof *v.tensor),
                    remat__array(g->n_ops ? g->n_ops : 1, sizeof *v.op)};
    int ok = v.tensor && v.op ? 1 : remat__dtr_nomem(c);
    for (uint32_t i = 0; ok && i < c->t.n; i++)
        v.tensor[i] = c->t.v[i].fwd ? remat_graph_find_tensor(g, c->t.v[i].id) : NONE;
    for (uint32_t o = 0, k = 0; ok && o < c->op.n; o++)
        if (!c->op.v[o].dropped)
            v.op[k++] = o;
    for (uint32_t r = 0; ok && r < c->rd.n; r++) {
        const dread *d = &c->rd.v[r];
        uint32_t n = 0, *s = c->rref.v + d->off;
        /* The seed is no graph tensor: drop it from the set (in place). */
        for (uint32_t k = 0; k < d->n; k++) {
            uint32_t p = c->t.v[s[k]].producer;
            if (p == NONE || !c->op.v[p].dropped)
                s[n++] = s[k];
        }
        if (n == 0) {
            c->sum.unattributed++;
            c->sum.unattributed_ns = remat__dtr_sat_add(c->sum.unattributed_ns, d->time);
            continue;
        }
        uint32_t op = pick(c, &v, s, n, d->fwd_type), timed = NONE;
        if (op != NONE) {
            for (uint32_t k = 0; ok && k < n; k++)
                ok = add_save(c, op, s[k]);
            timed = op;
        } else {
            for (uint32_t k = 0; ok && k < n; k++) {
                uint32_t o1 = pick(c, &v, s + k, 1, d->fwd_type);
                if (o1 == NONE) {
                    c->sum.unattributed_reads++;
                    continue;
                }
                ok = add_save(c, o1, s[k]);
                if (timed == NONE)
                    timed = o1;
            }
        }
        if (!ok)
            break;
        if (timed == NONE) {
            c->sum.unattributed++;
            c->sum.unattributed_ns = remat__dtr_sat_add(c->sum.unattributed_ns, d->time);
        } else {
            ok = give_time(c, timed, d->time);
        }
    }
    remat__free(v.tensor);
    remat__free(v.op);
    return ok;
}

static int cmp_save(const void *a, const void *b)
{
    const dsave *x = a, *y = b;
    if (x->op != y->op)
        return (x->op > y->op) - (x->op < y->op);
    return (x->t > y->t) - (x->t < y->t);
}

/* Without a gradient seed, the outputs are the forward results nothing
 * reads that are still live when the forward part ends. */
static int is_output(const dten *x)
{
    return x->fwd && x->producer != NONE && !x->read_fwd && !x->read_bwd && x->live_at_split;
}

/* Decides the seed and the loss (or the outputs) and the params. */
static int roles(dtr_cx *c, uint32_t *loss, uint32_t *seed)
{
    *loss = *seed = NONE;
    if (c->op.n == 0)
        return fail(c, "no forward CALL or MUTATE with results%s: nothing to make ops of",
                   c->sum.backward_line ? " before the backward part" : "");
    /* The seed: loss.backward() logs ones_like(loss) as the last forward
     * CALL. At least one other op must remain. */
    dop *last = &c->op.v[c->op.n - 1];
    if (c->in_bwd && c->op.n > 1 && !last->mutate && last->n_in == 1 && last->n_out == 1) {
        const dten *r = &c->t.v[c->ref.v[last->out_off]];
        if (r->alias_of == NONE && !r->read_fwd && r->read_bwd) {
            last->dropped = 1;
            *seed = c->op.n - 1;
            *loss = c->ref.v[last->in_off];
            c->sum.seed = 1;
        }
    }
    if (*loss == NONE) {
        uint32_t outs = 0;
        for (uint32_t i = 0; i < c->t.n; i++) {
            dten *x = &c->t.v[i];
            outs += is_output(x);
        }
        if (outs == 0)
            return fail(c,
                       "cannot tell the graph's outputs: no gradient seed (a one-argument CALL just before the "
                       "backward part whose result only the backward part reads, as loss.backward() logs "
                       "ones_like(loss)) and no forward result that nothing reads and that is still live when the "
                       "forward part ends");
    }
    for (uint32_t i = 0; i < c->t.n; i++) {
        dten *x = &c->t.v[i];
        if (!x->fwd || !x->constant)
            continue;
        /* A weight is a constant the log never releases; a log without a
         * backward part trains nothing, so there every constant is an
         * input. */
        x->param = c->in_bwd && x->refs > 0;
        if (x->param)
            c->sum.params++;
        else
            c->sum.inputs++;
    }
    return 1;
}

/* ---- Output ------------------------------------------------------------- */

static void put_count(remat_buf *b, uint64_t v)
{
    if (v <= 9007199254740991ULL)
        remat_buf_printf(b, "%" PRIu64, v);
    else
        remat_buf_printf(b, "\"%" PRIu64 "\"", v);
}

static void put_leaves(dtr_cx *c, remat_buf *b, const char *key, int params)
{
    remat_buf_printf(b, " \"%s\": [", key);
    uint32_t k = 0;
    for (uint32_t i = 0; i < c->t.n; i++) {
        const dten *x = &c->t.v[i];
        if (!x->fwd || !x->constant || x->param != params)
            continue;
        remat_buf_puts(b, k++ ? ",\n  {\"id\": " : "\n  {\"id\": ");
        remat_buf_json_str(b, x->id);
        remat_buf_puts(b, ", \"bytes\": ");
        put_count(b, x->bytes);
        remat_buf_puts(b, "}");
    }
    remat_buf_puts(b, "],\n");
}

/* ", \"bytes\": N" or, for a view, ", \"alias_of\": BASE". */
static void put_storage(dtr_cx *c, remat_buf *b, const dten *x)
{
    if (x->alias_of != NONE) {
        remat_buf_puts(b, ", \"alias_of\": ");
        remat_buf_json_str(b, c->t.v[x->alias_of].id);
        c->sum.views++;
    } else {
        remat_buf_puts(b, ", \"bytes\": ");
        put_count(b, x->bytes);
    }
}

static int write_graph(dtr_cx *c, const char *name, uint32_t loss, uint32_t seed, remat_buf *b)
{
    remat_import_dtr_summary *s = &c->sum;
    remat_buf_puts(b, "{\"format\": \"remat-graph\", \"version\": 1, \"name\": ");
    remat_buf_json_str(b, name);
    remat_buf_puts(b, ",\n \"meta\": {\"imported_from\": \"dtr\", \"source\": ");
    remat_buf_json_str(b, c->source);
    remat_buf_printf(b,
                     ", \"cost_unit\": \"ns: flops and bwd_flops are the log's TIME in nanoseconds\", \"lines\": %u, "
                     "\"skipped_before_start\": %u, \"backward_from_line\": %u, \"forward_calls\": %u, "
                     "\"forward_mutates\": %u, \"backward_calls\": %u, \"backward_mutates\": %u",
                     s->lines, s->skipped, s->backward_line, s->forward_calls, s->forward_mutates, s->backward_calls,
                     s->backward_mutates);
    if (loss != NONE) {
        remat_buf_puts(b, ", \"loss\": ");
        remat_buf_json_str(b, c->t.v[loss].id);
        remat_buf_puts(b, ", \"gradient_seed\": {\"id\": ");
        remat_buf_json_str(b, c->t.v[c->ref.v[c->op.v[seed].out_off]].id);
        remat_buf_puts(b, ", \"op\": ");
        remat_buf_json_str(b, c->op.v[seed].type);
        remat_buf_printf(b, ", \"line\": %u}", c->op.v[seed].line);
    }
    remat_buf_printf(b, ", \"unattributed_backward_instructions\": %u, \"unattributed_backward_ns\": ",
                     s->unattributed);
    put_count(b, s->unattributed_ns);
    remat_buf_puts(b, ", \"mapping\": \"see remat/import.h: forward CALL/MUTATE -> op (flops = TIME); CONSTANT -> "
                      "param if never released, else input; each backward instruction -> saves and bwd_flops of "
                      "a forward op with a backward step that has all its forward arguments: the one its NAME "
                      "names (X_backward -> X), else the earliest\"},\n");
    put_leaves(c, b, "inputs", 0);
    put_leaves(c, b, "params", 1);
    remat_buf_puts(b, " \"ops\": [");
    uint32_t sv = 0, n_ops = 0;
    for (uint32_t o = 0; o < c->op.n; o++) {
        const dop *x = &c->op.v[o];
        while (sv < c->sv.n && c->sv.v[sv].op < o)
            sv++;
        if (x->dropped)
            continue;
        const uint32_t *r = c->ref.v + x->in_off, *outs = c->ref.v + x->out_off;
        const dten *first = &c->t.v[outs[0]];
        remat_buf_puts(b, n_ops++ ? ",\n  {\"id\": " : "\n  {\"id\": ");
        remat_buf_json_str(b, first->id);
        remat_buf_puts(b, ", \"op\": ");
        remat_buf_json_str(b, x->type);
        remat_buf_puts(b, ", \"inputs\": [");
        for (uint32_t k = 0; k < x->n_in; k++) {
            if (k)
                remat_buf_puts(b, ", ");
            remat_buf_json_str(b, c->t.v[r[k]].id);
        }
        remat_buf_puts(b, "]");
        if (x->n_out == 1) {
            put_storage(c, b, first);
        } else {
            remat_buf_puts(b, ", \"outputs\": [");
            for (uint32_t k = 0; k < x->n_out; k++) {
                remat_buf_puts(b, k ? ", {\"id\": " : "{\"id\": ");
                remat_buf_json_str(b, c->t.v[outs[k]].id);
                put_storage(c, b, &c->t.v[outs[k]]);
                remat_buf_puts(b, "}");
            }
            remat_buf_puts(b, "]");
        }
        remat_buf_puts(b, ", \"flops\": ");
        put_count(b, x->time);
        remat_buf_puts(b, ", \"bwd_flops\": ");
        put_count(b, x->bwd_time);
        remat_buf_puts(b, ", \"saves\": [");
        for (uint32_t k = 0; sv < c->sv.n && c->sv.v[sv].op == o; sv++, k++) {
            if (k)
                remat_buf_puts(b, ", ");
            remat_buf_json_str(b, c->t.v[c->sv.v[sv].t].id);
            s->saves++;
        }
        remat_buf_printf(b, "], \"attrs\": {\"line\": %u%s}}", x->line, x->mutate ? ", \"mutate\": true" : "");
    }
    s->ops = n_ops;
    remat_buf_puts(b, "],\n \"outputs\": [");
    if (loss != NONE) {
        remat_buf_json_str(b, c->t.v[loss].id);
    } else {
        uint32_t k = 0;
        for (uint32_t i = 0; i < c->t.n; i++) {
            const dten *x = &c->t.v[i];
            if (is_output(x)) {
                if (k++)
                    remat_buf_puts(b, ", ");
                remat_buf_json_str(b, x->id);
            }
        }
    }
    remat_buf_puts(b, "]}\n");
    return b->failed ? remat__dtr_nomem(c) : 1;
}

/* Which ops get a backward step is remat's own rule (graphs/README.md,
 * "Execution model"), so it is asked of remat_analyze rather than derived a
 * second time here: the graph is written before any backward instruction is
 * given out (every op's saves empty, which cannot change which ops have a
 * backward step), loaded by the one loader and analyzed. Op k of that graph
 * is the k-th op not dropped. A graph the loader refuses would be refused
 * after the conversion too; the message says so in the words the CLI used
 * for that case, keeping the loader's location. */
static int backward_steps(dtr_cx *c, const char *name, uint32_t loss, uint32_t seed, remat_graph **gp,
                          remat_analysis **ap)
{
    remat_import_dtr_summary counted = c->sum; /* the writer counts views and saves: once, at the end */
    remat_buf b;
    remat_buf_init(&b);
    int ok = write_graph(c, name, loss, seed, &b);
    c->sum = counted;
    remat_graph *g = NULL;
    remat_analysis *a = NULL;
    remat_err e;
    remat_err_init(&e);
    ok = ok && remat_graph_load_json(b.data, b.len, c->source, &g, &e) == REMAT_OK;
    remat_buf_destroy(&b); /* the graph holds copies of what it needs: the text can go before the analysis */
    ok = ok && remat_analyze(g, &a, &e) == REMAT_OK;
    if (!ok && e.code != REMAT_OK) {
        if (e.code == REMAT_ENOMEM)
            ok = remat__dtr_nomem(c);
        else
            ok = 0, remat_err_set_at(c->err, e.code, &e.loc, "%s: the converted graph is not a valid training step: %s",
                                     c->source, e.msg);
    }
    for (uint32_t o = 0, k = 0; ok && o < c->op.n; o++)
        if (!c->op.v[o].dropped)
            c->op.v[o].has_bwd = a->bwd_step[k++] != REMAT_NONE;
    *gp = g;
    *ap = a;
    return ok;
}

int remat__dtr_map(dtr_cx *c, const char *name, remat_buf *b)
{
    uint32_t loss, seed;
    remat_graph *g = NULL;
    remat_analysis *a = NULL;
    int ok = roles(c, &loss, &seed) && backward_steps(c, name, loss, seed, &g, &a) && attribute(c, g, a);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    if (!ok)
        return 0;
    /* One save per (op, tensor), in tensor order within each op. */
    if (c->sv.n) /* qsort wants an array even for no elements */
        qsort(c->sv.v, c->sv.n, sizeof *c->sv.v, cmp_save);
    uint32_t w = 0;
    for (uint32_t k = 0; k < c->sv.n; k++)
        if (w == 0 || c->sv.v[k].op != c->sv.v[w - 1].op || c->sv.v[k].t != c->sv.v[w - 1].t)
            c->sv.v[w++] = c->sv.v[k];
    c->sv.n = w;
    return write_graph(c, name, loss, seed, b);
}

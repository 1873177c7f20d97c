/*
 * import_dtr.c - the DTR prototype's operator-trace logs to remat-graph JSON
 * (the log format, where it was learned, and the mapping are documented in
 * remat/import.h).
 *
 * One pass reads the log a line at a time, each line parsed into a cJSON
 * tree that is released (an arena rewind) before the next: a log of a
 * million lines never holds more than one tree. The pass keeps three
 * tables: the tensors (constants, CALL results and MUTATE versions, each
 * with simrd's reference count), the names that stand for them (COPY adds
 * a name, COPY_FROM rebinds one, MUTATE moves one to the new version), and
 * the forward ops; a backward instruction only records the forward tensors
 * it reads and its time. Everything that needs the whole log (which
 * constants are weights, the loss, which ops get a backward step, who saves
 * what) is decided after the pass, in import_dtr_map.c, which also writes
 * the graph as text; the one loader checks that text, as it checks the
 * Checkmate importer's.
 *
 * Every message names the line and the field: "log:17: ARGS[1]: unknown
 * tensor 'x42'".
 */
#include "import_dtr_internal.h"
#include "../load/json_glue.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Records "source:line: field: message" (REMAT_EGRAPH), with the line, the
 * field (as the JSON path within the line's object) and the tensor the
 * message names (id, may be NULL) in err's location, and returns 0. Past
 * the last line (c->line 0) the log as a whole is at fault: no field. */
static int bad_id(dtr_cx *c, const char *field, const char *id, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static int bad_id(dtr_cx *c, const char *field, const char *id, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    remat__err_vat(c->err, REMAT_EGRAPH, c->source, c->line, 0, c->line ? field : NULL, id, fmt, ap);
    va_end(ap);
    return 0;
}

#define bad(c, field, ...) bad_id((c), (field), NULL, __VA_ARGS__)

static int nomem(dtr_cx *c)
{
    remat_err_set(c->err, REMAT_ENOMEM, "%s: out of memory converting the log", c->source);
    return 0;
}

void *remat__dtr_grow(dtr_cx *c, void *v, uint32_t *cap, size_t elem)
{
    if (*cap >= UINT32_MAX / 4)
        return bad(c, "", "more than 2^30 entries: the log is too large to convert"), NULL;
    uint32_t nc = *cap ? *cap * 2 : 64;
    void *p = remat__realloc(v, (size_t)nc * elem);
    if (!p)
        return nomem(c), NULL;
    *cap = nc;
    return p;
}

int remat__dtr_nomem(dtr_cx *c)
{
    return nomem(c);
}

/* ---- Field readers ------------------------------------------------------ */

static int get_str(dtr_cx *c, const cJSON *j, const char *key, const char **out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v)
        return bad(c, key, "missing");
    if (!cJSON_IsString(v))
        return bad(c, key, "must be a string");
    *out = v->valuestring;
    return 1;
}

/* A tensor name: a non-empty string. */
static int get_name(dtr_cx *c, const cJSON *v, const char *field, const char **out)
{
    if (!v)
        return bad(c, field, "missing");
    if (!cJSON_IsString(v))
        return bad(c, field, "must be a string (a tensor name)");
    if (!v->valuestring[0])
        return bad(c, field, "an empty tensor name");
    *out = v->valuestring;
    return 1;
}

static const cJSON *get_array(dtr_cx *c, const cJSON *j, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v)
        return bad(c, key, "missing"), NULL;
    if (!cJSON_IsArray(v))
        return bad(c, key, "must be an array"), NULL;
    return v;
}

/* A whole number written as a JSON number (exact up to 2^53-1) or a decimal
 * string (the writer's std::to_string); min_neg1 also takes -1. Returns 0
 * with *why set when it is not one. */
static int whole(const cJSON *v, int min_neg1, uint64_t *out, int *neg1, const char **why)
{
    *neg1 = 0;
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (!isfinite(d) || d != floor(d))
            return *why = "not a whole number", 0;
        if (d == -1 && min_neg1)
            return *neg1 = 1, 1;
        if (d < 0)
            return *why = "negative", 0;
        if (d > 9007199254740991.0)
            return *why = "above 2^53-1, where JSON numbers stop being exact (write a decimal string)", 0;
        *out = (uint64_t)d;
        return 1;
    }
    if (!cJSON_IsString(v))
        return *why = "must be a number or a decimal string", 0;
    const char *s = v->valuestring;
    if (min_neg1 && strcmp(s, "-1") == 0)
        return *neg1 = 1, 1;
    if (!*s)
        return *why = "an empty string", 0;
    uint64_t x = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return *why = "not a whole non-negative decimal number", 0;
        if (!remat_u64_mul(x, 10, &x) || !remat_u64_add(x, (uint64_t)(*s - '0'), &x))
            return *why = "above 2^64-1", 0;
    }
    *out = x;
    return 1;
}

static void value_text(const cJSON *v, char *buf, size_t cap)
{
    if (cJSON_IsNumber(v))
        snprintf(buf, cap, "%.17g", v->valuedouble);
    else if (cJSON_IsString(v))
        snprintf(buf, cap, "'%.40s'", v->valuestring);
    else
        snprintf(buf, cap, "a %s", cJSON_IsArray(v) ? "list" : cJSON_IsObject(v) ? "object" : "literal");
}

/* MEMORY or TIME: a whole count from 0 to 2^64-1. */
static int get_count(dtr_cx *c, const cJSON *j, const char *key, const char *unit, uint64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v)
        return bad(c, key, "missing");
    const char *why;
    int neg1;
    if (!whole(v, 0, out, &neg1, &why)) {
        char got[64];
        value_text(v, got, sizeof got);
        return bad(c, key, "must be a whole number of %s from 0 to 2^64-1, got %s (%s)", unit, got, why);
    }
    return 1;
}

/* ---- Names and tensors -------------------------------------------------- */

static int find_name(dtr_cx *c, const char *name, uint32_t *k)
{
    return remat_strmap_get(&c->names, name, k);
}

/* Refuses a name that the log has used before (simrd asserts the same). */
static int fresh_name(dtr_cx *c, const char *field, const char *name)
{
    uint32_t k;
    if (find_name(c, name, &k))
        return bad_id(c, field, name, "'%.80s' is already defined (line %u)", name, c->nm.v[k].line);
    if (remat_strmap_get(&c->ids, name, &k))
        return bad_id(c, field, name, "'%.80s' is already the id of a MUTATE version (line %u)", name, c->t.v[k].line);
    return 1;
}

/* A new tensor with id `id` (copied); its index in *out. */
static int new_tensor(dtr_cx *c, const char *id, uint32_t *out)
{
    if (!DTR_PUSH(c, c->t))
        return 0;
    dten *x = &c->t.v[c->t.n];
    memset(x, 0, sizeof *x);
    x->id = remat__strdup(id);
    if (!x->id)
        return nomem(c);
    x->producer = x->alias_of = REMAT_DTR_NONE;
    x->line = c->line;
    x->fwd = !c->in_bwd;
    *out = c->t.n++;
    remat_status st = remat_strmap_put(&c->ids, x->id, *out, NULL);
    return st == REMAT_OK ? 1 : st == REMAT_ENOMEM ? nomem(c) : bad_id(c, "", id, "duplicate tensor id '%.80s'", id);
}

/* Binds a fresh name to tensor ti (one more reference). */
static int bind(dtr_cx *c, const char *name, uint32_t ti)
{
    if (!DTR_PUSH(c, c->nm))
        return 0;
    dname *n = &c->nm.v[c->nm.n];
    memset(n, 0, sizeof *n);
    n->name = remat__strdup(name);
    if (!n->name)
        return nomem(c);
    n->tensor = ti;
    n->line = c->line;
    remat_status st = remat_strmap_put(&c->names, n->name, c->nm.n, NULL);
    if (st != REMAT_OK)
        return remat__free(n->name), nomem(c);
    c->nm.n++;
    c->t.v[ti].refs++;
    return 1;
}

/* Resolves ARGS into c->tmp (tensors) and c->tmpn (names). */
static int read_args(dtr_cx *c, const cJSON *args)
{
    c->tmp.n = c->tmpn.n = 0;
    uint32_t i = 0;
    for (const cJSON *a = args->child; a; a = a->next, i++) {
        char field[32];
        snprintf(field, sizeof field, "ARGS[%u]", i);
        const char *s;
        uint32_t k;
        if (!get_name(c, a, field, &s))
            return 0;
        if (!find_name(c, s, &k))
            return bad_id(c, field, s, "unknown tensor '%.80s'", s);
        if (!DTR_PUSH(c, c->tmp) || !DTR_PUSH(c, c->tmpn))
            return 0;
        c->tmp.v[c->tmp.n++] = c->nm.v[k].tensor;
        c->tmpn.v[c->tmpn.n++] = k;
        c->sum.reads_after_release += c->nm.v[k].released;
    }
    return 1;
}

/* The backward part starts here: every tensor's liveness is noted, for the
 * outputs rule. */
static void split(dtr_cx *c)
{
    c->in_bwd = 1;
    c->sum.backward_line = c->line;
    for (uint32_t i = 0; i < c->t.n; i++)
        c->t.v[i].live_at_split = c->t.v[i].refs > 0;
}

/* Records what a forward op reads, or what a backward instruction reads of
 * the forward part. */
static int note_reads(dtr_cx *c, const char *type, uint64_t time)
{
    if (!c->in_bwd) {
        for (uint32_t k = 0; k < c->tmp.n; k++)
            c->t.v[c->tmp.v[k]].read_fwd = 1;
        return 1;
    }
    if (!DTR_PUSH(c, c->rd))
        return 0;
    dread *r = &c->rd.v[c->rd.n];
    memset(r, 0, sizeof *r);
    r->off = c->rref.n;
    r->line = c->line;
    const char *b = strstr(type, "_backward");
    if (b && b > type) {
        r->fwd_type = remat__malloc((size_t)(b - type) + 1);
        if (!r->fwd_type)
            return nomem(c);
        memcpy(r->fwd_type, type, (size_t)(b - type));
        r->fwd_type[b - type] = '\0';
    }
    c->rd.n++;
    r->time = time;
    for (uint32_t k = 0; k < c->tmp.n; k++) {
        uint32_t ti = c->tmp.v[k];
        if (!c->t.v[ti].fwd)
            continue;
        c->t.v[ti].read_bwd = 1;
        int seen = 0;
        for (uint32_t q = r->off; q < c->rref.n && !seen; q++)
            seen = c->rref.v[q] == ti;
        if (seen)
            continue;
        if (!DTR_PUSH(c, c->rref))
            return 0;
        c->rref.v[c->rref.n++] = ti;
        r->n++;
    }
    return 1;
}

/* A forward op reading c->tmp; its outputs are appended by the caller. */
static int new_op(dtr_cx *c, const char *type, uint64_t time, int mutate, uint32_t *out)
{
    if (!DTR_PUSH(c, c->op))
        return 0;
    dop *o = &c->op.v[c->op.n];
    memset(o, 0, sizeof *o);
    o->type = remat__strdup(type);
    if (!o->type)
        return nomem(c);
    o->time = time;
    o->line = c->line;
    o->mutate = (uint8_t)mutate;
    o->in_off = c->ref.n;
    *out = c->op.n++;
    for (uint32_t k = 0; k < c->tmp.n; k++) {
        if (!DTR_PUSH(c, c->ref))
            return 0;
        c->ref.v[c->ref.n++] = c->tmp.v[k];
    }
    c->op.v[*out].n_in = c->tmp.n;
    c->op.v[*out].out_off = c->ref.n;
    return 1;
}

static int add_output(dtr_cx *c, uint32_t op, uint32_t ti)
{
    if (!DTR_PUSH(c, c->ref))
        return 0;
    c->ref.v[c->ref.n++] = ti;
    c->op.v[op].n_out++;
    c->t.v[ti].producer = op;
    return 1;
}

/* ---- Instructions ------------------------------------------------------- */

static int is_backward_name(const char *type)
{
    return strstr(type, "backward") != NULL;
}

static int do_constant(dtr_cx *c, const cJSON *j)
{
    const char *name;
    uint32_t ti;
    if (!get_name(c, cJSON_GetObjectItemCaseSensitive(j, "NAME"), "NAME", &name) || !fresh_name(c, "NAME", name) ||
        !new_tensor(c, name, &ti) || !bind(c, name, ti))
        return 0;
    c->t.v[ti].constant = 1;
    c->sum.constants++;
    c->pend = P_CONST_MEMORY;
    c->pend_first = ti;
    c->pend_line = c->line;
    return 1;
}

/* What a CALL and a MUTATE share: NAME, ARGS, the list field `list`
 * (RESULT or MUTATE) and TIME; a backward name starts the backward part
 * before the arguments are read. */
static int op_head(dtr_cx *c, const cJSON *j, const char *list, const char **type, const cJSON **items,
                   uint64_t *time)
{
    const cJSON *args;
    if (!get_str(c, j, "NAME", type) || !(args = get_array(c, j, "ARGS")) || !(*items = get_array(c, j, list)) ||
        !get_count(c, j, "TIME", "nanoseconds", time))
        return 0;
    if (!c->in_bwd && is_backward_name(*type))
        split(c);
    return read_args(c, args);
}

static int do_call(dtr_cx *c, const cJSON *j)
{
    const char *type;
    uint64_t time;
    const cJSON *res;
    if (!op_head(c, j, "RESULT", &type, &res, &time))
        return 0;
    uint32_t n = (uint32_t)cJSON_GetArraySize(res), op = REMAT_DTR_NONE;
    if (c->in_bwd) {
        c->sum.backward_calls++;
        c->sum.backward_ns = remat__dtr_sat_add(c->sum.backward_ns, time);
        if (!note_reads(c, type, time))
            return 0;
    } else {
        c->sum.forward_calls++;
        c->sum.forward_ns = remat__dtr_sat_add(c->sum.forward_ns, time);
        if (n == 0)
            c->sum.empty++; /* it makes nothing, so it is no op and reads nothing */
        else if (!note_reads(c, type, time) || !new_op(c, type, time, 0, &op))
            return 0;
    }
    c->pend_nargs = c->tmp.n;
    c->pend_first = c->t.n;
    uint32_t i = 0;
    for (const cJSON *r = res->child; r; r = r->next, i++) {
        char field[32];
        snprintf(field, sizeof field, "RESULT[%u]", i);
        const char *name;
        uint32_t ti;
        if (!get_name(c, r, field, &name))
            return 0;
        for (const cJSON *q = res->child; q != r; q = q->next)
            if (strcmp(q->valuestring, name) == 0)
                return bad_id(c, field, name, "'%.80s' is listed twice", name);
        if (!fresh_name(c, field, name) || !new_tensor(c, name, &ti) || !bind(c, name, ti) ||
            (op != REMAT_DTR_NONE && !add_output(c, op, ti)))
            return 0;
    }
    if (n) {
        c->pend = P_MEMORY;
        c->pend_k = 0;
        c->pend_n = n;
        c->pend_op = op;
        c->pend_line = c->line;
    }
    return 1;
}

/* The storage a tensor lives in: itself, or a view's root base. */
static uint32_t root(const dtr_cx *c, uint32_t ti)
{
    while (c->t.v[ti].alias_of != REMAT_DTR_NONE)
        ti = c->t.v[ti].alias_of;
    return ti;
}

static int do_mutate(dtr_cx *c, const cJSON *j)
{
    const char *type;
    uint64_t time;
    const cJSON *mut;
    if (!op_head(c, j, "MUTATE", &type, &mut, &time))
        return 0;
    /* Check every index before anything is rebound. */
    uint32_t m = (uint32_t)cJSON_GetArraySize(mut), i = 0;
    for (const cJSON *v = mut->child; v; v = v->next, i++) {
        char field[32];
        snprintf(field, sizeof field, "MUTATE[%u]", i);
        uint64_t idx;
        int neg1;
        const char *why;
        if (!whole(v, 0, &idx, &neg1, &why))
            return bad(c, field, "must be an index into ARGS (%s)", why);
        if (idx >= c->tmp.n)
            return bad(c, field, "index %" PRIu64 " is outside ARGS (%u arguments)", idx, c->tmp.n);
        uint32_t k = 0;
        for (const cJSON *q = mut->child; q != v; q = q->next, k++) {
            uint64_t other;
            if (whole(q, 0, &other, &neg1, &why) && other == idx)
                return bad(c, field, "index %" PRIu64 " is also MUTATE[%u]", idx, k);
        }
    }
    uint32_t op = REMAT_DTR_NONE;
    if (c->in_bwd) {
        c->sum.backward_mutates++;
        c->sum.backward_ns = remat__dtr_sat_add(c->sum.backward_ns, time);
        if (!note_reads(c, type, time))
            return 0;
    } else {
        c->sum.forward_mutates++;
        c->sum.forward_ns = remat__dtr_sat_add(c->sum.forward_ns, time);
        if (m == 0)
            c->sum.empty++;
        else if (!note_reads(c, type, time) || !new_op(c, type, time, 1, &op))
            return 0;
    }
    i = 0;
    for (const cJSON *v = mut->child; v; v = v->next, i++) {
        uint64_t idx;
        int neg1;
        const char *why;
        whole(v, 0, &idx, &neg1, &why);
        uint32_t old = c->tmp.v[idx], nk = c->tmpn.v[idx], ti;
        dname *n = &c->nm.v[nk];
        char id[256];
        int len = snprintf(id, sizeof id, "%s@%u", n->name, n->versions + 1);
        char field[32];
        snprintf(field, sizeof field, "MUTATE[%u]", i);
        if (len < 0 || (size_t)len >= sizeof id)
            return bad(c, field, "the name '%.80s...' is too long to version", n->name);
        uint32_t prev;
        if (find_name(c, id, &prev) || remat_strmap_get(&c->ids, id, &prev))
            return bad(c, field, "cannot name the new version of '%.80s': '%s' is taken", n->name, id);
        if (!new_tensor(c, id, &ti))
            return 0;
        n = &c->nm.v[nk];
        n->versions++;
        /* simrd: the new version owns as many bytes as the storage it
         * overwrites, and the name moves to it. */
        c->t.v[ti].bytes = c->t.v[root(c, old)].bytes;
        if (!n->released)
            c->t.v[old].refs--;
        n->released = 0;
        n->tensor = ti;
        c->t.v[ti].refs = 1;
        if (op != REMAT_DTR_NONE && !add_output(c, op, ti))
            return 0;
    }
    return 1;
}

/* The MEMORY or ALIAS line that must follow a CONSTANT or a CALL. */
static int do_pending(dtr_cx *c, const cJSON *j, const char *ins)
{
    const char *want = c->pend == P_ALIAS ? "ALIAS" : "MEMORY";
    const dten *x = &c->t.v[c->pend_first + (c->pend == P_CONST_MEMORY ? 0 : c->pend_k)];
    char what[160];
    if (c->pend == P_CONST_MEMORY)
        snprintf(what, sizeof what, "CONSTANT '%.80s' (line %u)", x->id, c->pend_line);
    else
        snprintf(what, sizeof what, "'%.80s' (RESULT[%u] of the CALL at line %u)", x->id, c->pend_k, c->pend_line);
    if (strcmp(ins, want) != 0)
        return bad(c, "INSTRUCTION", "expected the %s line of %s, found %.40s", want, what, ins);
    const char *name;
    if (!get_name(c, cJSON_GetObjectItemCaseSensitive(j, "NAME"), "NAME", &name))
        return 0;
    if (strcmp(name, x->id) != 0)
        return bad(c, "NAME", "expected the %s line of %s, found one for '%.80s'", want, what, name);
    uint32_t ti = (uint32_t)(x - c->t.v);
    if (c->pend != P_ALIAS) {
        if (!get_count(c, j, "MEMORY", "bytes", &c->t.v[ti].bytes))
            return 0;
        c->pend = c->pend == P_CONST_MEMORY ? P_NONE : P_ALIAS;
        return 1;
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "ALIAS");
    uint64_t idx;
    int neg1;
    const char *why;
    if (!v)
        return bad(c, "ALIAS", "missing");
    if (!whole(v, 1, &idx, &neg1, &why)) {
        char got[64];
        value_text(v, got, sizeof got);
        return bad(c, "ALIAS", "must be -1 or an index into the CALL's ARGS, got %s (%s)", got, why);
    }
    if (!neg1) {
        if (idx >= c->pend_nargs)
            return bad(c, "ALIAS", "index %" PRIu64 " is outside the ARGS of the CALL at line %u (%u arguments)", idx,
                       c->pend_line, c->pend_nargs);
        if (c->pend_op != REMAT_DTR_NONE)
            c->t.v[ti].alias_of = c->ref.v[c->op.v[c->pend_op].in_off + idx];
    }
    c->pend = ++c->pend_k < c->pend_n ? P_MEMORY : P_NONE;
    return 1;
}

static int do_copy(dtr_cx *c, const cJSON *j, int from)
{
    const char *dst, *src;
    uint32_t sk, dk;
    if (!get_name(c, cJSON_GetObjectItemCaseSensitive(j, "DST"), "DST", &dst) ||
        !get_name(c, cJSON_GetObjectItemCaseSensitive(j, "SRC"), "SRC", &src))
        return 0;
    if (!find_name(c, src, &sk))
        return bad_id(c, "SRC", src, "unknown tensor '%.80s'", src);
    uint32_t ti = c->nm.v[sk].tensor;
    if (!from) {
        c->sum.copies++;
        return fresh_name(c, "DST", dst) && bind(c, dst, ti);
    }
    c->sum.copy_froms++;
    if (!find_name(c, dst, &dk))
        return bad_id(c, "DST", dst, "unknown tensor '%.80s'", dst);
    dname *n = &c->nm.v[dk];
    if (!n->released)
        c->t.v[n->tensor].refs--;
    n->released = 0;
    n->tensor = ti;
    c->t.v[ti].refs++;
    return 1;
}

static int do_release(dtr_cx *c, const cJSON *j)
{
    const char *name;
    uint32_t k;
    if (!get_name(c, cJSON_GetObjectItemCaseSensitive(j, "NAME"), "NAME", &name))
        return 0;
    c->sum.releases++;
    if (!find_name(c, name, &k) || c->nm.v[k].released) {
        c->sum.releases_ignored++;
        return 1;
    }
    c->nm.v[k].released = 1;
    c->t.v[c->nm.v[k].tensor].refs--;
    return 1;
}

static void free_tables(dtr_cx *c)
{
    for (uint32_t i = 0; i < c->t.n; i++)
        remat__free(c->t.v[i].id);
    for (uint32_t i = 0; i < c->nm.n; i++)
        remat__free(c->nm.v[i].name);
    for (uint32_t i = 0; i < c->op.n; i++)
        remat__free(c->op.v[i].type);
    for (uint32_t i = 0; i < c->rd.n; i++)
        remat__free(c->rd.v[i].fwd_type);
    c->t.n = c->nm.n = c->op.n = c->ref.n = c->rd.n = c->rref.n = 0;
    if (c->maps_ok) {
        remat_strmap_destroy(&c->names);
        remat_strmap_destroy(&c->ids);
        c->maps_ok = 0;
    }
}

void remat__dtr_free(dtr_cx *c)
{
    free_tables(c);
    remat__free(c->t.v);
    remat__free(c->nm.v);
    remat__free(c->op.v);
    remat__free(c->ref.v);
    remat__free(c->rd.v);
    remat__free(c->rref.v);
    remat__free(c->sv.v);
    remat__free(c->tmp.v);
    remat__free(c->tmpn.v);
    memset(c, 0, sizeof *c);
}

static int init_maps(dtr_cx *c)
{
    if (remat_strmap_init(&c->names, 1024) != REMAT_OK)
        return nomem(c);
    if (remat_strmap_init(&c->ids, 1024) != REMAT_OK) {
        remat_strmap_destroy(&c->names);
        return nomem(c);
    }
    c->maps_ok = 1;
    return 1;
}

/* The first START drops everything read so far, as simrd skips to it. */
static int do_annotate(dtr_cx *c, const cJSON *j)
{
    const char *a;
    if (!get_str(c, j, "ANNOTATION", &a))
        return 0;
    c->sum.annotations++;
    if (strcmp(a, "START") == 0 && !c->started) {
        uint32_t skipped = c->sum.lines - 1; /* not the START line itself */
        free_tables(c);
        memset(&c->sum, 0, sizeof c->sum);
        c->sum.skipped = skipped;
        c->in_bwd = 0;
        c->started = 1;
        return init_maps(c);
    }
    if (strcmp(a, "BACKWARD") == 0 && !c->in_bwd)
        split(c);
    return 1;
}

static int do_line(dtr_cx *c, const cJSON *j)
{
    const char *ins;
    if (!cJSON_IsObject(j))
        return bad(c, "", "must be a JSON object with an INSTRUCTION field");
    if (!get_str(c, j, "INSTRUCTION", &ins))
        return 0;
    c->sum.lines++;
    if (c->pend != P_NONE)
        return do_pending(c, j, ins);
    if (strcmp(ins, "CALL") == 0)
        return do_call(c, j);
    if (strcmp(ins, "MUTATE") == 0)
        return do_mutate(c, j);
    if (strcmp(ins, "CONSTANT") == 0)
        return do_constant(c, j);
    if (strcmp(ins, "RELEASE") == 0)
        return do_release(c, j);
    if (strcmp(ins, "COPY") == 0)
        return do_copy(c, j, 0);
    if (strcmp(ins, "COPY_FROM") == 0)
        return do_copy(c, j, 1);
    if (strcmp(ins, "ANNOTATE") == 0)
        return do_annotate(c, j);
    if (strcmp(ins, "PIN") == 0) {
        const char *name;
        c->sum.pins++;
        return get_name(c, cJSON_GetObjectItemCaseSensitive(j, "NAME"), "NAME", &name);
    }
    if (strcmp(ins, "MEMORY") == 0 || strcmp(ins, "ALIAS") == 0)
        return bad(c, "INSTRUCTION", "a %s line must follow the CONSTANT or CALL that makes its tensor", ins);
    return bad(c, "INSTRUCTION",
               "unknown instruction '%.40s' (known: CALL, MUTATE, CONSTANT, MEMORY, ALIAS, COPY, COPY_FROM, RELEASE, "
               "ANNOTATE, PIN)",
               ins);
}

int remat__dtr_read(dtr_cx *c, const char *text, size_t len)
{
    if (!init_maps(c))
        return 0;
    remat__json_arena_begin();
    remat_json_mark mark;
    remat__json_arena_mark(&mark);
    int ok = 1;
    const char *p = text, *end = text + len;
    while (ok && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        c->line++;
        const char *q = p;
        while (q < le && (*q == ' ' || *q == '\t' || *q == '\r'))
            q++;
        if (q < le) {
            const char *stop = NULL;
            cJSON *j = remat__json_parse(p, (size_t)(le - p), &stop);
            if (!j) {
                if (remat__json_alloc_failed())
                    ok = nomem(c);
                else
                    ok = 0, remat__err_at(c->err, REMAT_EPARSE, c->source, c->line,
                                          stop ? (int)(stop - p) + 1 : 1, NULL, NULL, "not valid JSON near here%s",
                                          /* cJSON puts an input that ends too soon at its last character */
                                          stop && stop + 1 >= le ? " (at the end of the line: a DTR log has "
                                                                   "one JSON object per line)" : "");
            } else {
                const char *r = stop;
                while (r && r < le && (*r == ' ' || *r == '\t' || *r == '\r'))
                    r++;
                if (r && r < le)
                    ok = 0, remat__err_at(c->err, REMAT_EPARSE, c->source, c->line, (int)(r - p) + 1, NULL,
                                          NULL, "text after the JSON object (one instruction per line)");
                else
                    ok = do_line(c, j);
            }
            remat__json_arena_release(&mark);
        }
        p = nl ? nl + 1 : end;
    }
    remat__json_arena_end();
    if (ok && c->pend != P_NONE) {
        const dten *x = &c->t.v[c->pend_first + (c->pend == P_CONST_MEMORY ? 0 : c->pend_k)];
        c->line = 0;
        if (c->pend == P_CONST_MEMORY)
            return bad_id(c, "", x->id, "the log ends before the MEMORY line of CONSTANT '%.80s' (line %u)", x->id,
                          c->pend_line);
        return bad_id(c, "", x->id, "the log ends before the %s line of '%.80s' (RESULT[%u] of the CALL at line %u)",
                      c->pend == P_ALIAS ? "ALIAS" : "MEMORY", x->id, c->pend_k, c->pend_line);
    }
    c->line = 0;
    if (ok && !c->in_bwd)
        for (uint32_t i = 0; i < c->t.n; i++)
            c->t.v[i].live_at_split = c->t.v[i].refs > 0;
    return ok;
}

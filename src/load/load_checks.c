/*
 * load_checks.c - what the loader checks of an op once its references are
 * known: its default saves (the distinct inputs), that explicit saves do not
 * repeat, that an op id is not another tensor's id; and the stream driver's
 * deferred references, which postpone exactly these checks to the end of
 * the document (load_elems.c reads the elements themselves).
 *
 * A list's repeats are found pairwise up to PAIRWISE_MAX entries and
 * through a sort above it, so that no list costs more than O(n log n).
 */
#include "load_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GCC cannot see the bound on paths (PATH_MAX_LEN) through nested snprintf. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif

#define fail remat__load_fail
#define nomem remat__load_nomem
#define short_id remat__load_short_id
#define path_index remat__load_path_index
#define check_saves_distinct remat__load_check_saves
#define check_op_id remat__load_check_op_id

/* Notes a reference to an id not registered yet (streaming only). */
static int defer(loader *L, const char *id, uint64_t where)
{
    load_pending *p = L->pend;
    if (L->n_pend == L->cap_pend) {
        size_t cap = L->cap_pend ? L->cap_pend * 2 : 64;
        p = remat__realloc(L->pend, cap * sizeof *p);
        if (!p)
            return nomem(L), 0;
        L->pend = p;
        L->cap_pend = cap;
    }
    p[L->n_pend].where = where;
    p[L->n_pend].id = L->pend_ids.len;
    remat_buf_putn(&L->pend_ids, id, strlen(id) + 1);
    if (L->pend_ids.failed)
        return nomem(L), 0;
    L->n_pend++;
    L->op_pending = 1;
    return 1;
}

int remat__load_resolve(loader *L, const cJSON *v, const char *path, uint32_t *out, uint64_t where, uint32_t placeholder)
{
    char b[64];
    if (!cJSON_IsString(v))
        return fail(L, REMAT_EGRAPH, path, "must be a tensor id (string)"), 0;
    if (remat_strmap_get(&L->st->tensor_ids, v->valuestring, out))
        return 1;
    if (L->streaming) {
        *out = placeholder;
        return defer(L, v->valuestring, where);
    }
    return fail(L, REMAT_EGRAPH, path, "unknown tensor id '%s'", short_id(v->valuestring, b, sizeof b)), 0;
}

typedef struct {
    uint32_t value, pos;
} ref_pos;

static int cmp_ref_pos(const void *a, const void *b)
{
    const ref_pos *x = a, *y = b;
    if (x->value != y->value)
        return x->value < y->value ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

int remat__load_first_occurrences(loader *L, const uint32_t *v, uint32_t n, uint8_t *first)
{
    if (n <= PAIRWISE_MAX) {
        for (uint32_t a = 0; a < n; a++) {
            uint32_t b = 0;
            while (b < a && v[b] != v[a])
                b++;
            first[a] = b == a;
        }
        return 1;
    }
    ref_pos *s = remat__array(n, sizeof *s);
    if (!s)
        return nomem(L), 0;
    for (uint32_t a = 0; a < n; a++)
        s[a] = (ref_pos){v[a], a};
    qsort(s, n, sizeof *s, cmp_ref_pos);
    for (uint32_t a = 0; a < n; a++)
        first[s[a].pos] = a == 0 || s[a].value != s[a - 1].value;
    remat__free(s);
    return 1;
}

/* The default saves: the op's distinct inputs in order (mul(x, x) saves x
 * once). The slots left over stay zero, so the fingerprint sees no stale
 * values. */
int remat__load_default_saves(loader *L, remat_op *op)
{
    remat_graph *g = L->g;
    const uint32_t *in = g->refs + op->in_off;
    uint32_t *sv = g->refs + op->save_off, n = 0;
    uint8_t small[PAIRWISE_MAX], *first = small;
    if (op->n_in > PAIRWISE_MAX && !(first = remat__malloc(op->n_in)))
        return nomem(L), 0;
    int ok = remat__load_first_occurrences(L, in, op->n_in, first);
    for (uint32_t a = 0; ok && a < op->n_in; a++)
        if (first[a])
            sv[n++] = in[a];
    if (first != small)
        remat__free(first);
    if (!ok)
        return 0;
    for (uint32_t a = n; a < op->n_save; a++)
        sv[a] = 0;
    op->n_save = n;
    return 1;
}

/* A tensor that is read twice by one op is one read. Duplicate saves would
 * make the executor count a tensor twice, so they are refused, naming the
 * first entry that repeats an earlier one. */
int check_saves_distinct(loader *L, const remat_op *op, const char *path)
{
    const uint32_t *sv = L->g->refs + op->save_off;
    uint8_t small[PAIRWISE_MAX], *first = small;
    if (op->n_save > PAIRWISE_MAX && !(first = remat__malloc(op->n_save)))
        return nomem(L), 0;
    int ok = remat__load_first_occurrences(L, sv, op->n_save, first);
    uint32_t a = 0;
    while (ok && a < op->n_save && first[a])
        a++;
    if (first != small)
        remat__free(first);
    if (!ok)
        return 0;
    if (a < op->n_save) {
        char p[PATH_MAX_LEN], b[64];
        snprintf(p, sizeof p, "%s.saves[%u]", path, a);
        return fail(L, REMAT_EGRAPH, p, "tensor '%s' is listed twice", short_id(L->g->tensors[sv[a]].id, b, sizeof b)),
               0;
    }
    return 1;
}

/* An op id that is also a tensor id must name one of its own outputs;
 * otherwise "fwd:x" and tensor "x" would be different things. */
int check_op_id(loader *L, uint32_t k, const char *path)
{
    uint32_t same;
    const remat_op *op = &L->g->ops[k];
    /* Without "outputs" the op's tensor has the op's id (the very string),
     * and ids are unique: the lookup could only find that tensor. */
    if (op->n_out == 1 && L->g->tensors[L->g->refs[op->out_off]].id == op->id)
        return 1;
    if (remat_strmap_get(&L->st->tensor_ids, op->id, &same) && L->g->tensors[same].producer != k) {
        char b[64];
        return fail(L, REMAT_EGRAPH, path, "op id '%s' is also the id of another tensor", short_id(op->id, b, sizeof b)),
               0;
    }
    return 1;
}

int remat__load_resolve_deferred(loader *L)
{
    remat_graph *g = L->g;
    for (size_t i = 0; i < L->n_pend; i++) {
        uint32_t v;
        if (!remat_strmap_get(&L->st->tensor_ids, L->pend_ids.data + L->pend[i].id, &v))
            return 0;
        uint64_t w = L->pend[i].where;
        if (w & LOAD_ALIAS_BIT)
            g->tensors[w & ~LOAD_ALIAS_BIT].alias_of = v;
        else
            g->refs[w] = v;
    }
    char path[PATH_MAX_LEN];
    for (size_t i = 0; i < L->n_dops; i++) {
        const load_deferred *d = &L->dops[i];
        remat_op *op = &g->ops[d->op];
        path_index(path, sizeof path, "ops", NULL, d->op);
        const uint32_t *in = remat_op_inputs(g, op), *out = remat_op_outputs(g, op);
        for (uint32_t j = 0; j < op->n_out; j++) {
            uint32_t base = g->tensors[out[j]].alias_of;
            if (base == REMAT_NONE)
                continue;
            int found = 0;
            for (uint32_t a = 0; a < op->n_in; a++)
                found |= in[a] == base;
            if (!found)
                return 0;
        }
        if (d->default_saves && !remat__load_default_saves(L, op))
            return 0;
        if (d->explicit_saves && !check_saves_distinct(L, op, path))
            return 0;
    }
    for (uint32_t k = 0; k < g->n_ops; k++) {
        path_index(path, sizeof path, "ops", NULL, k);
        if (!check_op_id(L, k, path))
            return 0;
    }
    return 1;
}

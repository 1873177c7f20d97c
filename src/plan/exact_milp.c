/*
 * exact_milp.c - a mixed-integer program as plain data, for the `exact`
 * strategy: columns with bounds, kinds and objective, rows kept by row
 * (CSR) as GLPK numbers them, built one row at a time. Constants in a row
 * (the column EXACT_ONE) move to its right-hand side, a column named twice
 * in a row is merged, and an allocation failure is remembered (`failed`)
 * so that builders check once at the end.
 */
#include "exact_internal.h"
#include "../util/util_internal.h"

#include <string.h>

int remat__exact_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 1;
    size_t nc = *cap ? *cap : 64;
    while (nc < need)
        nc *= 2;
    void *q = remat__realloc(*p, nc * elem);
    if (!q)
        return 0;
    *p = q;
    *cap = nc;
    return 1;
}

/* Appends a column; returns its 1-based index, 0 when out of memory. */
uint32_t remat__milp_col(exact_milp *m, double lb, double ub, double obj, int is_int)
{
    if (m->failed)
        return 0;
    size_t cap = m->cap_cols, need = (size_t)m->n_cols + 2;
    size_t c1 = cap, c2 = cap, c3 = cap, c4 = cap;
    if (!remat__exact_grow((void **)&m->lb, &c1, need, sizeof *m->lb) ||
        !remat__exact_grow((void **)&m->ub, &c2, need, sizeof *m->ub) ||
        !remat__exact_grow((void **)&m->obj, &c3, need, sizeof *m->obj) ||
        !remat__exact_grow((void **)&m->is_int, &c4, need, sizeof *m->is_int)) {
        m->failed = 1;
        return 0;
    }
    m->cap_cols = (uint32_t)c1;
    uint32_t c = ++m->n_cols;
    m->lb[c] = lb;
    m->ub[c] = ub;
    m->obj[c] = obj;
    m->is_int[c] = (uint8_t)is_int;
    m->n_int += is_int != 0;
    return c;
}

void remat__milp_row_begin(exact_milp *m)
{
    if (m->failed)
        return;
    size_t cap = m->cap_rows, need = (size_t)m->n_rows + 3;
    size_t c1 = cap, c2 = cap, c3 = cap, c4 = cap, c5 = cap;
    if (!remat__exact_grow((void **)&m->row_type, &c1, need, sizeof *m->row_type) ||
        !remat__exact_grow((void **)&m->rhs, &c2, need, sizeof *m->rhs) ||
        !remat__exact_grow((void **)&m->row_defines, &c3, need, sizeof *m->row_defines) ||
        !remat__exact_grow((void **)&m->row_hw, &c4, need, sizeof *m->row_hw) ||
        !remat__exact_grow((void **)&m->row_off, &c5, need, sizeof *m->row_off)) {
        m->failed = 1;
        return;
    }
    m->cap_rows = (uint32_t)c1;
    m->row_off[m->n_rows + 1] = m->nnz + 1;
    m->row_const = 0;
}

/* Adds coef * column c to the row being built: c = 0 is the constant 0,
 * EXACT_ONE the constant 1; a column already in the row is merged. */
void remat__milp_term(exact_milp *m, uint32_t c, double coef)
{
    if (m->failed || c == 0 || coef == 0)
        return;
    if (c == EXACT_ONE) {
        m->row_const += coef;
        return;
    }
    size_t start = m->row_off[m->n_rows + 1];
    if (m->slot[c] >= start && m->slot[c] <= m->nnz && (uint32_t)m->ja[m->slot[c]] == c) {
        m->ar[m->slot[c]] += coef;
        return;
    }
    size_t cj = m->cap_nnz, ca = m->cap_nnz;
    if (!remat__exact_grow((void **)&m->ja, &cj, m->nnz + 2, sizeof *m->ja) ||
        !remat__exact_grow((void **)&m->ar, &ca, m->nnz + 2, sizeof *m->ar)) {
        m->failed = 1;
        return;
    }
    m->cap_nnz = cj;
    m->nnz++;
    m->ja[m->nnz] = (int)c;
    m->ar[m->nnz] = coef;
    m->slot[c] = m->nnz;
}

void remat__milp_row_end(exact_milp *m, int type, double rhs, uint32_t defines, int hw)
{
    if (m->failed)
        return;
    uint32_t i = ++m->n_rows;
    m->row_type[i] = (uint8_t)type;
    m->rhs[i] = rhs - m->row_const;
    m->row_defines[i] = defines;
    m->row_hw[i] = (uint8_t)hw;
    m->row_off[i + 1] = m->nnz + 1;
}

void remat__milp_destroy(exact_milp *m)
{
    remat__free(m->lb);
    remat__free(m->ub);
    remat__free(m->obj);
    remat__free(m->is_int);
    remat__free(m->row_type);
    remat__free(m->rhs);
    remat__free(m->row_defines);
    remat__free(m->row_hw);
    remat__free(m->row_off);
    remat__free(m->ja);
    remat__free(m->ar);
    remat__free(m->slot);
    memset(m, 0, sizeof *m);
}

/* Activity of row i without column skip. */
double remat__milp_activity(const exact_milp *m, uint32_t i, const double *x, uint32_t skip, double *skip_coef)
{
    double s = 0;
    for (size_t q = m->row_off[i]; q < m->row_off[i + 1]; q++) {
        if ((uint32_t)m->ja[q] == skip) {
            if (skip_coef)
                *skip_coef = m->ar[q];
            continue;
        }
        s += m->ar[q] * x[m->ja[q]];
    }
    return s;
}

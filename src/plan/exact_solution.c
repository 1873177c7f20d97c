/*
 * exact_solution.c - between the `exact` program's solutions and schedules.
 *
 * remat__exact_schedule_of writes the schedule of a 0/1 solution: in each
 * stage the executions it marks, in forward order (a RECOMPUTE, or the
 * stage's FWD), each storage freed right after its last reader in the stage
 * unless a member is kept into the next stage or read by the stage's own
 * step, then the stage's BWD, then the release of whatever the next stage
 * does not start with. Freeing at the earliest point makes every replayed
 * high-water mark at most the program's.
 *
 * remat__exact_vector_of goes the other way for the warm start: it reads the
 * stage structure off a schedule (the default policy's, another
 * strategy's), fills in the continuous columns as the program defines them
 * and checks every row.
 */
#include "exact_internal.h"
#include "../util/util_internal.h"

#include <math.h>
#include <string.h>

#define NONE REMAT_NONE

/* 0/1 values of R and S: Rv is T x n, Sv is (T+1) x nt (row T all zero). */
typedef struct {
    uint8_t *Rv, *Sv;
} assignment;

static int free_ok(const exact_model *M, const assignment *x, uint32_t t, uint32_t p, uint32_t r)
{
    const remat_analysis *a = M->a;
    if (t >= M->n && remat__exact_main_reads(M, t, r))
        return 0;
    for (uint32_t q = M->mem_off[r]; q < M->mem_off[r + 1]; q++) {
        uint32_t v = M->members[q];
        if (x->Sv[(size_t)(t + 1) * M->nt + v])
            return 0;
        for (uint32_t j = a->cons_off[v]; j < a->cons_off[v + 1]; j++) {
            uint32_t pj = a->pos[a->cons[j]];
            if (pj > p && x->Rv[(size_t)t * M->n + pj])
                return 0;
        }
    }
    return 1;
}

static int assignment_init(const exact_model *M, assignment *x)
{
    x->Rv = remat__calloc((size_t)M->T * M->n + 1, 1);
    x->Sv = remat__calloc((size_t)(M->T + 1) * M->nt + 1, 1);
    return x->Rv && x->Sv;
}

static void assignment_destroy(assignment *x)
{
    remat__free(x->Rv);
    remat__free(x->Sv);
}

remat_status remat__exact_schedule_of(exact_model *M, const double *sol, remat_schedule *out, remat_err *err)
{
    const remat_analysis *a = M->a;
    const remat_graph *g = M->g;
    uint32_t n = M->n, T = M->T, nt = M->nt;
    assignment x;
    uint8_t *res = remat__calloc(nt ? nt : 1, 1);
    uint32_t *buf = remat__array((size_t)g->n_refs + 1, sizeof *buf);
    remat_status st = REMAT_OK;
    if (!assignment_init(M, &x) || !res || !buf)
        st = remat_err_set(err, REMAT_ENOMEM, "out of memory building the schedule");
    for (uint32_t t = 0; t < T && st == REMAT_OK; t++) {
        for (uint32_t p = 0; p < n; p++) {
            uint32_t c = exact_R(M, t, p);
            x.Rv[(size_t)t * n + p] = c == EXACT_ONE || (c && sol[c] > 0.5);
        }
        for (uint32_t v = 0; v < nt; v++) {
            uint32_t c = exact_S(M, t, v);
            x.Sv[(size_t)t * nt + v] = c && sol[c] > 0.5;
        }
    }
#define PUSH(k, arg)                                                                                                   \
    do {                                                                                                               \
        if (st == REMAT_OK && remat_schedule_push(out, (k), (arg)) != REMAT_OK)                                        \
            st = remat_err_set(err, REMAT_ENOMEM, "out of memory building the schedule");                              \
    } while (0)
    for (uint32_t t = 0; t < T && st == REMAT_OK; t++) {
        for (uint32_t p = 0; p < n && st == REMAT_OK; p++) {
            if (!x.Rv[(size_t)t * n + p])
                continue;
            uint32_t k = a->order[p];
            const remat_op *op = &g->ops[k];
            const uint32_t *out_t = remat_op_outputs(g, op);
            int fresh = 0;
            for (uint32_t j = 0; j < op->n_out; j++)
                fresh |= !res[out_t[j]];
            if (t < n && p == t)
                PUSH(REMAT_I_FWD, k);
            else if (fresh)
                PUSH(REMAT_I_RECOMPUTE, k);
            for (uint32_t j = 0; j < op->n_out; j++)
                res[out_t[j]] = 1;
            if (t < n && p == t)
                continue;
            /* Release every storage whose last reader in this stage this was. */
            uint32_t nb = remat__exact_touched(M, op, buf);
            for (uint32_t i = 0; i < nb; i++) {
                if (!free_ok(M, &x, t, p, buf[i]))
                    continue;
                for (uint32_t q = M->mem_off[buf[i]]; q < M->mem_off[buf[i] + 1]; q++) {
                    uint32_t v = M->members[q];
                    if (res[v]) {
                        res[v] = 0;
                        PUSH(REMAT_I_FREE, v);
                    }
                }
            }
        }
        if (t >= n)
            PUSH(REMAT_I_BWD, a->bwd_order[t - n]);
        /* The stage's end: keep only what the next stage starts with. */
        for (uint32_t v = 0; v < nt; v++)
            if (res[v] && !x.Sv[(size_t)(t + 1) * nt + v]) {
                res[v] = 0;
                PUSH(REMAT_I_FREE, v);
            }
    }
    PUSH(REMAT_I_OPT, 0);
#undef PUSH
    assignment_destroy(&x);
    remat__free(res);
    remat__free(buf);
    return st;
}

double remat__exact_max_violation(const exact_model *M, const double *x)
{
    const exact_milp *m = &M->m;
    double worst = 0;
    for (uint32_t c = 1; c <= m->n_cols; c++) {
        worst = fmax(worst, m->lb[c] - x[c]);
        worst = fmax(worst, x[c] - m->ub[c]);
        if (m->is_int[c])
            worst = fmax(worst, fabs(x[c] - floor(x[c] + 0.5)));
    }
    for (uint32_t i = 1; i <= m->n_rows; i++) {
        double s = remat__milp_activity(m, i, x, 0, NULL),
               v = m->row_type[i] == EXACT_LE ? s - m->rhs[i] : m->rhs[i] - s;
        worst = fmax(worst, v / (1 + fabs(m->rhs[i])));
    }
    return worst;
}

/* Reads the stage structure off a schedule: 1, 0 when it does not have
 * it, -1 when out of memory. */
static int assignment_of(exact_model *M, const remat_schedule *s, assignment *x)
{
    const remat_analysis *a = M->a;
    const remat_graph *g = M->g;
    uint32_t n = M->n, nt = M->nt, t = 0;
    uint8_t *res = remat__calloc(nt ? nt : 1, 1);
    if (!res)
        return -1;
    int ok = 1, snap = 0;
    uint32_t last_p = NONE;
    for (size_t i = 0; i < s->n && ok; i++) {
        remat_instr in = s->ins[i];
        if (in.kind == REMAT_I_FREE) {
            res[in.arg] = 0;
            continue;
        }
        if (in.kind == REMAT_I_OPT)
            break;
        if (t >= M->T) {
            ok = 0;
            break;
        }
        if (!snap) {
            for (uint32_t v = 0; v < nt; v++)
                x->Sv[(size_t)t * nt + v] = res[v] && exact_is_act(g, v);
            snap = 1;
        }
        if (in.kind == REMAT_I_FWD || in.kind == REMAT_I_RECOMPUTE) {
            uint32_t p = a->pos[in.arg];
            int main_step = in.kind == REMAT_I_FWD;
            if ((main_step && p != t) || (!main_step && t < n && p >= t) || (last_p != NONE && p <= last_p)) {
                ok = 0;
                break;
            }
            x->Rv[(size_t)t * n + p] = 1;
            last_p = p;
            const remat_op *op = &g->ops[in.arg];
            const uint32_t *out = remat_op_outputs(g, op);
            for (uint32_t j = 0; j < op->n_out; j++)
                res[out[j]] = 1;
            if (main_step) {
                t++;
                snap = 0;
                last_p = NONE;
            }
        } else if (in.kind == REMAT_I_BWD) {
            if (t < n || a->bwd_order[t - n] != in.arg) {
                ok = 0;
                break;
            }
            t++;
            snap = 0;
            last_p = NONE;
        }
    }
    remat__free(res);
    if (!ok || t != M->T)
        return 0;
    /* A view resident without its root: the root is kept too (free: they
     * share storage). Residency the model pruned (never read again) is
     * dropped. */
    for (uint32_t tt = 0; tt < M->T; tt++)
        for (uint32_t v = 0; v < nt; v++) {
            uint8_t *sv = &x->Sv[(size_t)tt * nt + v];
            uint32_t r = exact_is_act(g, v) ? exact_root_of(g, v) : NONE;
            if (*sv && r != NONE && r != v)
                x->Sv[(size_t)tt * nt + r] = 1;
        }
    for (uint32_t tt = 0; tt < M->T; tt++)
        for (uint32_t v = 0; v < nt; v++)
            if (!exact_S(M, tt, v))
                x->Sv[(size_t)tt * nt + v] = 0;
    return 1;
}

int remat__exact_vector_of(exact_model *M, const remat_schedule *s, double *sol)
{
    const exact_milp *m = &M->m;
    uint32_t n = M->n, nt = M->nt;
    assignment x;
    if (!assignment_init(M, &x)) {
        assignment_destroy(&x);
        return -1;
    }
    int ok = assignment_of(M, s, &x);
    if (ok == 1) {
        for (uint32_t c = 0; c <= m->n_cols; c++)
            sol[c] = 0;
        for (uint32_t t = 0; t < M->T; t++) {
            for (uint32_t p = 0; p < n; p++) {
                uint32_t c = exact_R(M, t, p);
                if (x.Rv[(size_t)t * n + p] && c != EXACT_ONE) {
                    if (!c)
                        ok = 0; /* a recompute the model does not offer */
                    else
                        sol[c] = 1;
                }
            }
            for (uint32_t v = 0; v < nt; v++) {
                uint32_t c = exact_S(M, t, v), cn = M->NEW[(size_t)t * nt + v];
                if (c)
                    sol[c] = x.Sv[(size_t)t * nt + v];
                if (cn) {
                    uint32_t pc = exact_R(M, t, exact_pos_of(M, v));
                    sol[cn] = sol[pc] > 0.5 && !x.Sv[(size_t)t * nt + v];
                }
            }
            for (uint32_t p = 0; p < n; p++)
                for (uint32_t f = M->free_off[(size_t)t * n + p]; f < M->free_off[(size_t)t * n + p + 1]; f++)
                    sol[M->frees[f].col] = x.Rv[(size_t)t * n + p] && free_ok(M, &x, t, p, M->frees[f].storage);
        }
        /* U columns follow from the rows that define them, in order. */
        double peak = M->peak_col ? m->lb[M->peak_col] : 0;
        for (uint32_t i = 1; i <= m->n_rows; i++) {
            uint32_t d = m->row_defines[i];
            if (d) {
                double coef = 1, rest = remat__milp_activity(m, i, sol, d, &coef);
                sol[d] = fmax(0, (m->rhs[i] - rest) / coef);
            } else if (m->row_hw[i] && M->peak_col) {
                peak = fmax(peak, remat__milp_activity(m, i, sol, M->peak_col, NULL) - m->rhs[i]);
            }
        }
        if (M->peak_col)
            sol[M->peak_col] = peak;
        if (ok && remat__exact_max_violation(M, sol) > 1e-7)
            ok = 0;
    }
    assignment_destroy(&x);
    return ok;
}

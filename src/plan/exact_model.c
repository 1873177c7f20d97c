/*
 * exact_model.c - the mixed-integer program of the `exact` strategy, in the
 * spirit of Checkmate (Jain et al., MLSys 2020), written for remat's executor.
 *
 * Stages. The analysis numbers the steps of the store-all training step
 * 0 .. T-1 (n forward steps, then the backward steps in their fixed order);
 * stage t is everything a schedule does after step t-1 up to and including
 * step t. Inside stage t the schedule may execute forward ops, each at most
 * once and in forward order, and then the stage's own step: in a forward
 * stage that is the FWD of op t (the last execution of the stage, so only
 * ops before it can be recomputed), in a backward stage the t-th BWD.
 *
 * Variables.
 *   R(t,p)   binary: op at forward position p runs in stage t (a RECOMPUTE,
 *            or the FWD when p = t < n, which is the constant 1);
 *   S(t,v)   binary: activation v is resident when stage t begins;
 *   NEW(t,o) in [0,1]: output o of a multi-output op is allocated when the
 *            op is recomputed in stage t (>= R - S: an output that is still
 *            resident is not allocated again, as in the executor);
 *   FREE(t,s,p) in [0,1]: storage s is released right after position p of
 *            stage t (<= R(t,p), <= 1 - R(t,j) for every later reader j,
 *            <= 1 - S(t+1,v) for every member v of s);
 *   U(t,j)   the activation bytes live before point j of stage t.
 * Rows: an op runs only when its inputs are resident (kept into the stage,
 * or produced earlier in it); a backward step's saves are resident; what is
 * resident at t+1 was resident at t or produced in t; a view is resident
 * only with its root (the root costs nothing more, since they share
 * storage, and it keeps one storage one unit); a recompute has an output
 * that is not resident (the executor refuses one that has none); graph
 * outputs stay resident until forward ends; and at every point the
 * executor's high-water mark fits:
 *   U(t,j) + sum of the bytes it allocates + its workspace + C <= budget,
 * where C is the non-activation part: leaves and ledger extras in the
 * forward stages; in backward stages, the gradients and extras resident
 * between backward steps, and at the backward step itself the step's own
 * high-water mark outside activations (gradients it allocates, its
 * workspace). Those figures come from a replay of the store-all schedule
 * with an observer: they do not depend on what is recomputed, because the
 * executor manages gradients by the backward order alone, which is fixed.
 * Objective: the FLOPs of all recomputes.
 *
 * Exactness. For every 0/1 solution, the schedule that remat__exact_schedule_of
 * writes frees each storage at the latest at the model's FREE points, so its
 * replayed high-water marks are at most the model's, and its extra FLOPs are
 * at most the objective (equal unless a recompute turns out to be a no-op).
 * Conversely every schedule with this stage structure (the default policy's
 * schedules of every keep set among them) maps to a feasible solution
 * (remat__exact_vector_of). So the optimum of the program is the least extra
 * FLOPs over all schedules that run FWD and BWD steps in the analysis's
 * order and recompute each op at most once, in forward order, between two
 * such steps. Outside that class are schedules that recompute one op twice
 * between two steps or reorder ops, which a tighter budget could in
 * principle reward; the strategy reports optimality for the class.
 *
 * Pruning keeps the program small: need(v) is the last stage in which v
 * can be read (directly, or as a source to recompute something read later),
 * S(t,v) exists only while v may still be needed, R(t,p) only when an
 * output of the op may be needed at t or later.
 */
#include "exact_internal.h"
#include "../util/util_internal.h"

#include <math.h>
#include <string.h>

#define NONE REMAT_NONE

/* ---- Helpers ---------------------------------------------------------------- */

/* ---- need(v): the last stage in which v may be read ----------------------- */

static void compute_need(exact_model *M)
{
    const remat_analysis *a = M->a;
    const remat_graph *g = M->g;
    for (uint32_t v = 0; v < g->n_tensors; v++) {
        uint32_t ne = NONE;
        if (exact_is_act(g, v)) {
            for (uint32_t j = a->cons_off[v]; j < a->cons_off[v + 1]; j++)
                ne = remat__later_step(ne, a->pos[a->cons[j]]);
            for (uint32_t j = a->saver_off[v]; j < a->saver_off[v + 1]; j++)
                ne = remat__later_step(ne, a->bwd_step[a->savers[j]]);
            if (a->is_output[v])
                ne = remat__later_step(ne, M->n - 1);
        }
        M->need[v] = ne;
    }
    /* Reverse forward order: when op k is reached, every later op has pushed
     * its needs back, so k's outputs are final. */
    for (uint32_t p = M->n; p-- > 0;) {
        const remat_op *op = &g->ops[a->order[p]];
        const uint32_t *in = remat_op_inputs(g, op), *out = remat_op_outputs(g, op);
        for (uint32_t j = 0; j < op->n_out; j++) {
            uint32_t o = out[j], r = exact_root_of(g, o);
            if (r != NONE && r != o)
                M->need[r] = remat__later_step(M->need[r], M->need[o]); /* a view keeps its root */
        }
        if (!op->recomputable)
            continue;
        for (uint32_t i = 0; i < op->n_in; i++) {
            if (!exact_is_act(g, in[i]))
                continue;
            for (uint32_t j = 0; j < op->n_out; j++)
                M->need[in[i]] = remat__later_step(M->need[in[i]], M->need[out[j]]);
        }
    }
}

static uint32_t max_need_of_op(const exact_model *M, const remat_op *op)
{
    const uint32_t *out = remat_op_outputs(M->g, op);
    uint32_t ne = NONE;
    for (uint32_t j = 0; j < op->n_out; j++)
        ne = remat__later_step(ne, M->need[out[j]]);
    return ne;
}

/* ---- Constants from the store-all replay --------------------------------- */

static remat_status compute_constants(remat_planner *P, exact_model *M)
{
    const remat_analysis *a = M->a;
    const size_t T = (size_t)a->g->n_ops + a->n_bwd;
    uint64_t *pre = remat__array(T + 1, sizeof *pre), *hw = remat__array(T + 1, sizeof *hw);
    remat_err local;
    remat_err_init(&local);
    remat_status st = pre && hw ? REMAT_OK : remat_err_set(&local, REMAT_ENOMEM, "out of memory planning");
    /* The probe indexes the compute schedule: it measures without the
     * sharding (plan.c's final replay judges each rank). */
    remat_exec_extras xu = P->o->extras;
    xu.sharding = NULL;
    if (st == REMAT_OK)
        st = remat__fixed_profile(P, &xu, pre, hw, &local);
    if (st == REMAT_OK) {
        /* A FWD allocates activations only: the non-activation part is
         * the same before every forward step. */
        for (uint32_t t = 0; t < M->n; t++)
            M->c_pre[t] = pre[0];
        for (uint32_t j = 0; j < a->n_bwd; j++) {
            M->c_pre[M->n + j] = pre[M->n + j];
            M->c_main[M->n + j] = hw[M->n + j];
        }
        M->c_opt = hw[T];
    }
    remat__free(pre);
    remat__free(hw);
    if (st != REMAT_OK)
        return remat_err_set(P->err, st, "exact: %s", local.msg);
    return REMAT_OK;
}

/* ---- Columns ---------------------------------------------------------------- */

static uint32_t next_stamp(exact_model *M)
{
    if (++M->stamp_gen == 0) {
        memset(M->stamp, 0, (size_t)M->nt * sizeof *M->stamp);
        M->stamp_gen = 1;
    }
    return M->stamp_gen;
}

/* 1 if the stage's own step reads a member of storage r: the FWD of op t,
 * or the saves of the t-th backward step. */
int remat__exact_main_reads(const exact_model *M, uint32_t t, uint32_t r)
{
    const remat_graph *g = M->g;
    const remat_op *op;
    const uint32_t *ts;
    uint32_t n;
    if (t < M->n) {
        op = &g->ops[M->a->order[t]];
        ts = remat_op_inputs(g, op);
        n = op->n_in;
    } else {
        op = &g->ops[M->a->bwd_order[t - M->n]];
        ts = remat_op_saves(g, op);
        n = op->n_save;
    }
    for (uint32_t i = 0; i < n; i++)
        if (exact_root_of(g, ts[i]) == r)
            return 1;
    return 0;
}

/* The storages an op touches (activation roots of its inputs and its own
 * non-view outputs), each once, into buf; returns how many. */
uint32_t remat__exact_touched(exact_model *M, const remat_op *op, uint32_t *buf)
{
    const remat_graph *g = M->g;
    const uint32_t *in = remat_op_inputs(g, op), *out = remat_op_outputs(g, op);
    uint32_t n = 0, st = next_stamp(M);
    for (uint32_t i = 0; i < op->n_in + op->n_out; i++) {
        uint32_t v = i < op->n_in ? in[i] : out[i - op->n_in];
        uint32_t r = exact_root_of(g, v);
        if (r == NONE || M->stamp[r] == st)
            continue;
        M->stamp[r] = st;
        buf[n++] = r;
    }
    return n;
}

static int forced_resident(const exact_model *M, uint32_t t, uint32_t v)
{
    uint32_t c = exact_S(M, t, v);
    return c && M->m.lb[c] > 0.5;
}

/* Whether FREE(t, r, p) can be 1 at all (otherwise no column is made). */
static int free_possible(exact_model *M, uint32_t t, uint32_t p, uint32_t r)
{
    const remat_analysis *a = M->a;
    if (M->g->tensors[r].bytes == 0 || remat__exact_main_reads(M, t, r))
        return 0;
    for (uint32_t q = M->mem_off[r]; q < M->mem_off[r + 1]; q++) {
        uint32_t v = M->members[q];
        if (forced_resident(M, t + 1, v))
            return 0;
        for (uint32_t j = a->cons_off[v]; j < a->cons_off[v + 1]; j++) {
            uint32_t pj = a->pos[a->cons[j]];
            if (pj > p && exact_R(M, t, pj) == EXACT_ONE)
                return 0;
        }
    }
    return 1;
}

static remat_status make_columns(exact_model *M)
{
    const remat_analysis *a = M->a;
    const remat_graph *g = M->g;
    exact_milp *m = &M->m;
    uint32_t n = M->n, T = M->T;
    double fmax = 1;
    for (uint32_t k = 0; k < g->n_ops; k++)
        if ((double)g->ops[k].flops > fmax)
            fmax = (double)g->ops[k].flops;
    M->fscale = 1;
    while (fmax / M->fscale > 1048576.0)
        M->fscale *= 2;
    /* R */
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t p = 0; p < n; p++) {
            const remat_op *op = &g->ops[a->order[p]];
            uint32_t c = 0, ne = max_need_of_op(M, op);
            if (t < n && p == t)
                c = EXACT_ONE;
            else if ((t >= n || (p < t && M->fwd_recompute)) && op->recomputable && ne != NONE && ne >= t)
                c = remat__milp_col(m, 0, 1, M->mode == EXACT_MODE_BUDGET ? (double)op->flops / M->fscale : 0, 1);
            M->R[(size_t)t * n + p] = c;
        }
    /* S */
    for (uint32_t t = 1; t < T; t++)
        for (uint32_t v = 0; v < g->n_tensors; v++) {
            if (!exact_is_act(g, v) || M->need[v] == NONE || exact_pos_of(M, v) >= t || t > M->need[v])
                continue;
            int forced = a->is_output[v] && t <= n - 1;
            M->S[(size_t)t * M->nt + v] = remat__milp_col(m, forced ? 1 : 0, 1, 0, 1);
        }
    /* NEW: outputs of multi-output ops that may be resident when the op
     * is recomputed. */
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t p = 0; p < n; p++) {
            uint32_t rc = exact_R(M, t, p);
            const remat_op *op = &g->ops[a->order[p]];
            if (rc == 0 || rc == EXACT_ONE || op->n_out < 2)
                continue;
            const uint32_t *out = remat_op_outputs(g, op);
            for (uint32_t j = 0; j < op->n_out; j++) {
                uint32_t o = out[j];
                if (g->tensors[o].storage == o && g->tensors[o].bytes > 0 && exact_S(M, t, o))
                    M->NEW[(size_t)t * M->nt + o] = remat__milp_col(m, 0, 1, 0, 0);
            }
        }
    /* FREE, and U per point. */
    uint32_t *buf = remat__array((size_t)g->n_refs + 1, sizeof *buf);
    size_t cap = 0;
    if (!buf)
        m->failed = 1;
    for (uint32_t t = 0; t < T && !m->failed; t++) {
        uint32_t points = 0;
        for (uint32_t p = 0; p < n; p++) {
            M->free_off[(size_t)t * n + p] = M->n_free;
            if (exact_R(M, t, p) == 0)
                continue;
            points++;
            if (t < n && p == t)
                continue; /* the stage's last point: what follows is the next stage */
            uint32_t nb = remat__exact_touched(M, &g->ops[a->order[p]], buf);
            for (uint32_t i = 0; i < nb; i++) {
                if (!free_possible(M, t, p, buf[i]))
                    continue;
                if (!remat__exact_grow((void **)&M->frees, &cap, (size_t)M->n_free + 1, sizeof *M->frees)) {
                    m->failed = 1;
                    break;
                }
                M->frees[M->n_free].col = remat__milp_col(m, 0, 1, 0, 0);
                M->frees[M->n_free].storage = buf[i];
                M->n_free++;
            }
        }
        points += t >= n;
        M->u_first[t] = m->n_cols + 1;
        for (uint32_t j = 0; j < points; j++)
            remat__milp_col(m, 0, INFINITY, 0, 0);
    }
    M->free_off[(size_t)T * n] = M->n_free;
    remat__free(buf);
    if (M->mode == EXACT_MODE_PEAK)
        M->peak_col = remat__milp_col(m, (double)M->c_opt / M->unit, INFINITY, 1, 0);
    if (m->failed)
        return REMAT_ENOMEM;
    m->slot = remat__array((size_t)m->n_cols + 1, sizeof *m->slot);
    return m->slot ? REMAT_OK : REMAT_ENOMEM;
}

/* ---- Rows ---------------------------------------------------------------------- */

/* Bytes an execution of the op at position p in stage t allocates, as
 * terms: a FWD allocates all its outputs; a recompute those not resident. */
static void alloc_terms(exact_model *M, uint32_t t, uint32_t p, double sign)
{
    const remat_graph *g = M->g;
    const remat_op *op = &g->ops[M->a->order[p]];
    const uint32_t *out = remat_op_outputs(g, op);
    uint32_t rc = exact_R(M, t, p);
    for (uint32_t j = 0; j < op->n_out; j++) {
        uint32_t o = out[j];
        if (g->tensors[o].storage != o || g->tensors[o].bytes == 0)
            continue;
        uint32_t c = M->NEW[(size_t)t * M->nt + o];
        remat__milp_term(&M->m, c ? c : rc, sign * (double)g->tensors[o].bytes / M->unit);
    }
}

static void structure_rows(exact_model *M, uint32_t t)
{
    const remat_analysis *a = M->a;
    const remat_graph *g = M->g;
    exact_milp *m = &M->m;
    uint32_t n = M->n;
    for (uint32_t p = 0; p < n; p++) {
        uint32_t rc = exact_R(M, t, p);
        if (rc == 0)
            continue;
        const remat_op *op = &g->ops[a->order[p]];
        const uint32_t *in = remat_op_inputs(g, op), *out = remat_op_outputs(g, op);
        /* Inputs resident: kept into the stage or produced earlier in it. */
        uint32_t st = next_stamp(M);
        for (uint32_t i = 0; i < op->n_in; i++) {
            uint32_t v = in[i];
            if (!exact_is_act(g, v) || M->stamp[v] == st)
                continue;
            M->stamp[v] = st;
            remat__milp_row_begin(m);
            remat__milp_term(m, rc, 1);
            remat__milp_term(m, exact_S(M, t, v), -1);
            remat__milp_term(m, exact_R(M, t, exact_pos_of(M, v)), -1);
            remat__milp_row_end(m, EXACT_LE, 0, 0, 0);
        }
        if (rc == EXACT_ONE)
            continue;
        /* A recompute needs an output that is not resident. */
        remat__milp_row_begin(m);
        remat__milp_term(m, rc, 1);
        for (uint32_t j = 0; j < op->n_out; j++)
            remat__milp_term(m, exact_S(M, t, out[j]), 1);
        remat__milp_row_end(m, EXACT_LE, op->n_out, 0, 0);
        for (uint32_t j = 0; j < op->n_out; j++) {
            uint32_t c = M->NEW[(size_t)t * M->nt + out[j]];
            if (!c)
                continue;
            remat__milp_row_begin(m);
            remat__milp_term(m, c, 1);
            remat__milp_term(m, rc, -1);
            remat__milp_term(m, exact_S(M, t, out[j]), 1);
            remat__milp_row_end(m, EXACT_GE, 0, 0, 0);
        }
    }
    if (t >= n) {
        const remat_op *op = &g->ops[a->bwd_order[t - n]];
        const uint32_t *sv = remat_op_saves(g, op);
        for (uint32_t i = 0; i < op->n_save; i++) {
            uint32_t v = sv[i];
            if (!exact_is_act(g, v))
                continue;
            remat__milp_row_begin(m);
            remat__milp_term(m, exact_S(M, t, v), 1);
            remat__milp_term(m, exact_R(M, t, exact_pos_of(M, v)), 1);
            remat__milp_row_end(m, EXACT_GE, 1, 0, 0);
        }
    }
    for (uint32_t v = 0; v < g->n_tensors; v++) {
        if (!exact_is_act(g, v))
            continue;
        uint32_t next = exact_S(M, t + 1, v), here = exact_S(M, t, v), pr = exact_R(M, t, exact_pos_of(M, v));
        /* Resident at t+1: resident at t or produced in t. */
        if (next && pr != EXACT_ONE) {
            remat__milp_row_begin(m);
            remat__milp_term(m, next, 1);
            remat__milp_term(m, here, -1);
            remat__milp_term(m, pr, -1);
            remat__milp_row_end(m, EXACT_LE, 0, 0, 0);
        }
        uint32_t r = exact_root_of(g, v);
        if (here && r != NONE && r != v) {
            remat__milp_row_begin(m);
            remat__milp_term(m, here, 1);
            remat__milp_term(m, exact_S(M, t, r), -1);
            remat__milp_row_end(m, EXACT_LE, 0, 0, 0);
        }
    }
    /* FREE(t, r, p): only after an execution, after the last reader of any
     * member, and when no member is kept. */
    for (uint32_t p = 0; p < n; p++) {
        for (uint32_t f = M->free_off[(size_t)t * n + p]; f < M->free_off[(size_t)t * n + p + 1]; f++) {
            uint32_t col = M->frees[f].col, r = M->frees[f].storage;
            remat__milp_row_begin(m);
            remat__milp_term(m, col, 1);
            remat__milp_term(m, exact_R(M, t, p), -1);
            remat__milp_row_end(m, EXACT_LE, 0, 0, 0);
            for (uint32_t q = M->mem_off[r]; q < M->mem_off[r + 1]; q++) {
                uint32_t v = M->members[q];
                if (exact_S(M, t + 1, v)) {
                    remat__milp_row_begin(m);
                    remat__milp_term(m, col, 1);
                    remat__milp_term(m, exact_S(M, t + 1, v), 1);
                    remat__milp_row_end(m, EXACT_LE, 1, 0, 0);
                }
                for (uint32_t j = a->cons_off[v]; j < a->cons_off[v + 1]; j++) {
                    uint32_t pj = a->pos[a->cons[j]];
                    if (pj <= p || exact_R(M, t, pj) == 0)
                        continue;
                    remat__milp_row_begin(m);
                    remat__milp_term(m, col, 1);
                    remat__milp_term(m, exact_R(M, t, pj), 1);
                    remat__milp_row_end(m, EXACT_LE, 1, 0, 0);
                }
            }
        }
    }
}

/* hw row: lhs + (PEAK: - peak) <= budget - c. */
static void hw_end(exact_model *M, uint64_t c)
{
    exact_milp *m = &M->m;
    if (M->mode == EXACT_MODE_PEAK) {
        remat__milp_term(m, M->peak_col, -1);
        remat__milp_row_end(m, EXACT_LE, -(double)c / M->unit, 0, 1);
    } else {
        remat__milp_row_end(m, EXACT_LE, ((double)M->budget - (double)c) / M->unit, 0, 1);
    }
}

static void memory_rows(exact_model *M, uint32_t t)
{
    const remat_analysis *a = M->a;
    const remat_graph *g = M->g;
    exact_milp *m = &M->m;
    uint32_t n = M->n, u = M->u_first[t];
    /* U of the first point: what is resident when the stage begins. */
    remat__milp_row_begin(m);
    remat__milp_term(m, u, 1);
    for (uint32_t v = 0; v < g->n_tensors; v++)
        if (exact_is_act(g, v) && g->tensors[v].storage == v && g->tensors[v].bytes)
            remat__milp_term(m, exact_S(M, t, v), -(double)g->tensors[v].bytes / M->unit);
    remat__milp_row_end(m, EXACT_GE, 0, u, 0);
    uint32_t last = NONE;
    for (uint32_t p = 0; p < n; p++)
        if (exact_R(M, t, p))
            last = p;
    for (uint32_t p = 0; p < n; p++) {
        uint32_t rc = exact_R(M, t, p);
        if (rc == 0)
            continue;
        const remat_op *op = &g->ops[a->order[p]];
        remat__milp_row_begin(m);
        remat__milp_term(m, u, 1);
        alloc_terms(M, t, p, 1);
        remat__milp_term(m, rc, (double)op->workspace / M->unit);
        hw_end(M, M->c_pre[t]);
        if (p == last && t < n)
            break;
        /* U of the next point: plus what this one allocated, less what it
         * freed. */
        remat__milp_row_begin(m);
        remat__milp_term(m, u + 1, 1);
        remat__milp_term(m, u, -1);
        alloc_terms(M, t, p, -1);
        for (uint32_t f = M->free_off[(size_t)t * n + p]; f < M->free_off[(size_t)t * n + p + 1]; f++)
            remat__milp_term(m, M->frees[f].col, (double)g->tensors[M->frees[f].storage].bytes / M->unit);
        remat__milp_row_end(m, EXACT_GE, 0, u + 1, 0);
        u++;
    }
    if (t >= n) {
        remat__milp_row_begin(m);
        remat__milp_term(m, u, 1);
        hw_end(M, M->c_main[t]);
    }
}

/* ---- Build / destroy ---------------------------------------------------------- */

static remat_status build_members(exact_model *M)
{
    const remat_graph *g = M->g;
    uint32_t nt = M->nt;
    M->mem_off = remat__array((size_t)nt + 1, sizeof *M->mem_off);
    M->members = remat__array(nt ? nt : 1, sizeof *M->members);
    if (!M->mem_off || !M->members)
        return REMAT_ENOMEM;
    for (uint32_t v = 0; v < nt; v++) {
        uint32_t r = exact_is_act(g, v) ? exact_root_of(g, v) : NONE;
        if (r != NONE)
            M->mem_off[r + 1]++;
    }
    for (uint32_t v = 0; v < nt; v++)
        M->mem_off[v + 1] += M->mem_off[v];
    uint32_t *fill = M->stamp; /* scratch, reset below */
    for (uint32_t v = 0; v < nt; v++) {
        uint32_t r = exact_is_act(g, v) ? exact_root_of(g, v) : NONE;
        if (r != NONE)
            M->members[M->mem_off[r] + fill[r]++] = v;
    }
    memset(M->stamp, 0, (size_t)nt * sizeof *M->stamp);
    return REMAT_OK;
}

remat_status remat__exact_build(remat_planner *P, exact_mode mode, uint64_t budget, int fwd_recompute, exact_model *M)
{
    const remat_analysis *a = P->a;
    const remat_graph *g = a->g;
    memset(M, 0, sizeof *M);
    M->a = a;
    M->g = g;
    M->mode = mode;
    M->budget = budget;
    M->fwd_recompute = fwd_recompute;
    M->n = g->n_ops;
    M->T = g->n_ops + a->n_bwd;
    M->nt = g->n_tensors;
    size_t TN = (size_t)M->T * M->n, TT = (size_t)M->T * M->nt;
    M->c_pre = remat__array(M->T, sizeof *M->c_pre);
    M->c_main = remat__array(M->T, sizeof *M->c_main);
    M->need = remat__array(M->nt, sizeof *M->need);
    M->R = remat__array(TN, sizeof *M->R);
    M->S = remat__array(TT, sizeof *M->S);
    M->NEW = remat__array(TT, sizeof *M->NEW);
    M->free_off = remat__array(TN + 1, sizeof *M->free_off);
    M->u_first = remat__array(M->T, sizeof *M->u_first);
    M->stamp = remat__array(M->nt, sizeof *M->stamp);
    if (!M->c_pre || !M->c_main || !M->need || !M->R || !M->S || !M->NEW || !M->free_off || !M->u_first || !M->stamp ||
        build_members(M) != REMAT_OK)
        return remat_err_set(P->err, REMAT_ENOMEM, "out of memory building the exact program");
    remat_status st = compute_constants(P, M);
    if (st != REMAT_OK)
        return st;
    /* Memory unit: a power of two that brings the largest figure near 2^30,
     * so that rows are well scaled and the division is exact. */
    double bmax = (double)budget;
    for (uint32_t t = 0; t < M->T; t++)
        bmax = fmax(bmax, fmax((double)M->c_pre[t], (double)M->c_main[t]));
    for (uint32_t v = 0; v < M->nt; v++)
        bmax = fmax(bmax, (double)g->tensors[v].bytes);
    M->unit = 1;
    while (bmax / M->unit > 1073741824.0)
        M->unit *= 2;
    compute_need(M);
    if ((st = make_columns(M)) != REMAT_OK)
        return remat_err_set(P->err, st, "out of memory building the exact program");
    for (uint32_t t = 0; t < M->T; t++) {
        structure_rows(M, t);
        memory_rows(M, t);
    }
    if (M->m.failed)
        return remat_err_set(P->err, REMAT_ENOMEM, "out of memory building the exact program");
    return REMAT_OK;
}

void remat__exact_destroy(exact_model *M)
{
    if (!M)
        return;
    remat__milp_destroy(&M->m);
    remat__free(M->c_pre);
    remat__free(M->c_main);
    remat__free(M->need);
    remat__free(M->R);
    remat__free(M->S);
    remat__free(M->NEW);
    remat__free(M->frees);
    remat__free(M->free_off);
    remat__free(M->u_first);
    remat__free(M->mem_off);
    remat__free(M->members);
    remat__free(M->stamp);
    memset(M, 0, sizeof *M);
}

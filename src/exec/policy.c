/*
 * policy.c - the default policy: a keep set becomes a schedule, whole or
 * (for a local search) as an edit of the schedule of a nearby keep set.
 *
 * Forward: every op once, in forward order; a tensor that is not kept (or
 * that nothing in backward needs) is freed right after its last forward use
 * (graph outputs at the end of forward).
 *
 * Backward: before each backward step, every saved tensor that is not
 * resident is rebuilt by recomputing its missing ancestors, in forward
 * order, from what is resident (builder.c). Ancestors rebuilt only as
 * stepping stones are freed right after their last read in that chain; a
 * rebuilt tensor that later backward steps save stays until the last of them.
 *
 * How long a kept tensor stays: until its last backward need, which is the
 * later of its last backward use and the last need of any tensor that is
 * recomputed from it (need_end below). Without the second term a kept
 * segment boundary (Chen's sqrt(n)) would be freed before the segment that
 * is replayed from it. Outputs of ops that are not recomputable are always
 * kept.
 *
 * The incremental build (remat__policy_build, issue 20). The builder is a
 * deterministic machine that, step by step, runs the step's op (a FWD, or a
 * rebuild and a BWD) and then frees the step's bucket: the activations whose
 * free step it is. A keep set enters it only through each activation's free
 * step and pin (pinned: freed only by its bucket), and pins are read only in
 * backward. So two keep sets whose (free step, pin) pairs differ only for
 * tensors whose free steps lie in [s_lo, s_hi] give the same instructions
 * up to step s_lo's op; and once both have passed s_hi, the rest depends
 * only on the residency they reach (every FWD has run by then in both, the
 * same saves are owed, the same pins held, the buckets are equal): at the
 * first step boundary after s_hi where the residency equals the base's at
 * the same boundary, the rest is the base's suffix. The candidate copies the
 * base's prefix, rebuilds the builder's state by applying it, builds the
 * window, and tracks the difference from the base's residency (advanced
 * along the base's instructions: builder.h's shadow) to find the join.
 * tests/check_exec_delta.c checks the result equals the whole build's,
 * instruction by instruction, on thousands of flips.
 */
#include "builder.h"
#include "policy_internal.h"
#include "../util/util_internal.h"

#include <string.h>


/* The keep-independent tables of prepare (see the struct), in need_end's
 * order: ops against forward order, each op's outputs in order, so that
 * every tensor's need comes after those of the tensors recomputed from it. */
static remat_status tables(remat__policy *P)
{
    const remat_analysis *a = P->a;
    const remat_graph *g = a->g;
    uint32_t n = 0;
    uint64_t n_dep = 0;
    for (uint32_t i = g->n_ops; i-- > 0;) {
        const remat_op *op = &g->ops[a->order[i]];
        const uint32_t *out = remat_op_outputs(g, op);
        for (uint32_t j = 0; j < op->n_out; j++) {
            uint32_t t = out[j];
            n++;
            for (uint32_t c = a->cons_off[t]; c < a->cons_off[t + 1]; c++)
                if (g->ops[a->cons[c]].recomputable)
                    n_dep += g->ops[a->cons[c]].n_out;
        }
    }
    if (n_dep > UINT32_MAX)
        return REMAT_ENOMEM;
    P->n_acts = n;
    P->acts = remat__array(n ? n : 1, sizeof *P->acts);
    P->dep_off = remat__array((size_t)n + 1, sizeof *P->dep_off);
    P->dep = remat__array(n_dep ? n_dep : 1, sizeof *P->dep);
    P->fwd_free = remat__array(g->n_tensors ? g->n_tensors : 1, sizeof *P->fwd_free);
    P->forced = remat__calloc(g->n_tensors ? g->n_tensors : 1, 1);
    P->act = remat__calloc(g->n_tensors ? g->n_tensors : 1, 1);
    if (!P->acts || !P->dep_off || !P->dep || !P->fwd_free || !P->forced || !P->act)
        return REMAT_ENOMEM;
    uint32_t k = 0, d = 0;
    for (uint32_t i = g->n_ops; i-- > 0;) {
        const remat_op *op = &g->ops[a->order[i]];
        const uint32_t *out = remat_op_outputs(g, op);
        for (uint32_t j = 0; j < op->n_out; j++) {
            uint32_t t = out[j];
            P->acts[k] = t;
            P->dep_off[k] = d;
            for (uint32_t c = a->cons_off[t]; c < a->cons_off[t + 1]; c++) {
                const remat_op *cop = &g->ops[a->cons[c]];
                if (!cop->recomputable)
                    continue;
                const uint32_t *cout = remat_op_outputs(g, cop);
                for (uint32_t m = 0; m < cop->n_out; m++)
                    P->dep[d++] = cout[m];
            }
            k++;
        }
    }
    P->dep_off[k] = d;
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        const remat_tensor *T = &g->tensors[t];
        if (T->kind != REMAT_TENSOR_ACTIVATION)
            continue;
        P->act[t] = 1;
        P->fwd_free[t] = a->is_output[t] ? g->n_ops - 1 : remat__later_step(a->life[t].birth, a->life[t].last_fwd_use);
        P->forced[t] = !g->ops[T->producer].recomputable;
    }
    return REMAT_OK;
}

/* keep's free steps, pins and buckets. need_end (a kept tensor stays until
 * its last backward need): the later of its last backward use and the need
 * of each tensor recomputed from it (the outputs of its recomputable
 * consumers that are not kept). */
static void prepare(remat__policy *P, const uint8_t *keep)
{
    const remat_analysis *a = P->a;
    const remat_graph *g = a->g;
    P->last_ok = 0; /* fstep and fpin are about to change */
    for (uint32_t k = 0; k < P->n_acts; k++) {
        uint32_t t = P->acts[k];
        P->ekeep[t] = !keep || keep[t] || P->forced[t];
    }
    for (uint32_t k = 0; k < P->n_acts; k++) {
        uint32_t t = P->acts[k], ne = a->life[t].last_bwd_use;
        for (uint32_t d = P->dep_off[k]; d < P->dep_off[k + 1]; d++)
            if (!P->ekeep[P->dep[d]])
                ne = remat__later_step(ne, P->need_end[P->dep[d]]);
        P->need_end[t] = ne;
    }
    /* Bucket every activation by the step after which it is freed (the
     * lists in tensor id order, as the builder frees them). */
    memset(P->off, 0, ((size_t)a->n_steps + 1) * sizeof *P->off);
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        P->fstep[t] = UINT32_MAX;
        P->fpin[t] = 0;
        if (!P->act[t])
            continue;
        const int pin = P->ekeep[t] && P->need_end[t] != REMAT_NONE;
        P->fstep[t] = pin ? P->need_end[t] : P->fwd_free[t];
        P->fpin[t] = (uint8_t)pin;
        P->off[P->fstep[t] + 1]++;
    }
    for (uint32_t s = 0; s < a->n_steps; s++)
        P->off[s + 1] += P->off[s];
    for (uint32_t t = 0; t < g->n_tensors; t++)
        if (P->fstep[t] != UINT32_MAX)
            P->list[P->off[P->fstep[t]]++] = t;
    /* The fill advanced each bucket's start to the next one's: shift back. */
    for (uint32_t s = a->n_steps; s > 0; s--)
        P->off[s] = P->off[s - 1];
    P->off[0] = 0;
    P->prep_ok = keep != NULL && P->pkeep != NULL; /* pkeep: made with a base */
    if (P->prep_ok)
        memcpy(P->pkeep, keep, g->n_tensors);
    P->bd_ok = 0;
}

/* Step s's op: its FWD, or its rebuild and BWD. */
static remat_status step_op(remat__policy *P, uint32_t s)
{
    const remat_analysis *a = P->a;
    return s < a->g->n_ops ? remat__builder_forward(&P->B, a->order[s])
                           : remat__builder_backward(&P->B, a->bwd_order[s - a->g->n_ops]);
}

/* Step s's bucket (a backward one unpins its tensors first). */
static remat_status step_frees(remat__policy *P, uint32_t s)
{
    const int bwd = s >= P->a->g->n_ops;
    for (uint32_t i = P->off[s]; i < P->off[s + 1]; i++) {
        if (bwd)
            P->B.pin[P->list[i]] = 0;
        remat_status st = remat__builder_free(&P->B, P->list[i]);
        if (st != REMAT_OK)
            return st;
    }
    return REMAT_OK;
}

/* The whole build into out (the builder reset), recording each step's
 * positions when pos_start is given. */
static remat_status build_whole(remat__policy *P, remat_schedule *out, size_t *pos_start, size_t *pos_main)
{
    const remat_analysis *a = P->a;
    const remat_graph *g = a->g;
    remat_status st;
    remat__builder_reset(&P->B, out);
    memcpy(P->B.pin, P->fpin, g->n_tensors ? g->n_tensors : 1);
    const uint32_t n_op_steps = g->n_ops + a->n_bwd;
    for (uint32_t s = 0; s < n_op_steps; s++) {
        if (pos_start)
            pos_start[s] = out->n;
        if ((st = step_op(P, s)) != REMAT_OK)
            return st;
        if (pos_start)
            pos_main[s] = out->n;
        if ((st = step_frees(P, s)) != REMAT_OK)
            return st;
    }
    if (pos_start)
        pos_start[n_op_steps] = pos_main[n_op_steps] = out->n;
    return remat__builder_opt(&P->B);
}

static void free_arrays(remat__policy *P)
{
    remat__free(P->ekeep);
    remat__free(P->need_end);
    remat__free(P->off);
    remat__free(P->list);
    remat__free(P->fstep);
    remat__free(P->fpin);
    remat__free(P->bstep);
    remat__free(P->bpin);
    remat__free(P->pos_start);
    remat__free(P->pos_main);
    remat__free(P->shadow);
    remat__free(P->cpos_start);
    remat__free(P->cpos_main);
    remat__free(P->dmark);
    remat__free(P->sig);
    remat__free(P->csig);
    remat__free(P->real);
    remat__free(P->dirty);
    remat__free(P->dirty_mark);
    remat__free(P->force);
    remat__free(P->acts);
    remat__free(P->fwd_free);
    remat__free(P->dep_off);
    remat__free(P->dep);
    remat__free(P->forced);
    remat__free(P->act);
    remat__free(P->pkeep);
    remat__free(P->kpos);
    remat__free(P->heap);
    remat__free(P->hmark);
    remat__free(P->bd);
    remat__free(P->bd_mark);
}

remat_status remat__policy_create(const remat_analysis *a, remat__policy **out, remat_err *err)
{
    *out = NULL;
    remat__policy *P = remat__calloc(1, sizeof *P);
    if (!P)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory building the schedule");
    const remat_graph *g = a->g;
    size_t nt = g->n_tensors ? g->n_tensors : 1, ns = (size_t)a->n_steps + 1;
    P->a = a;
    remat_schedule_init(&P->base);
    P->ekeep = remat__calloc(nt, 1);
    P->need_end = remat__array(nt, sizeof *P->need_end);
    P->off = remat__array(ns, sizeof *P->off);
    P->list = remat__array(nt, sizeof *P->list);
    P->fstep = remat__array(nt, sizeof *P->fstep);
    P->fpin = remat__calloc(nt, 1);
    if (!P->ekeep || !P->need_end || !P->off || !P->list || !P->fstep || !P->fpin) {
        remat__policy_destroy(P);
        return remat_err_set(err, REMAT_ENOMEM, "out of memory building the schedule");
    }
    if (tables(P) != REMAT_OK) {
        remat__policy_destroy(P);
        return remat_err_set(err, REMAT_ENOMEM, "out of memory building the schedule");
    }
    remat_status st = remat__builder_init(&P->B, a, NULL, err);
    if (st != REMAT_OK) {
        remat__policy_destroy(P);
        return st;
    }
    P->have_builder = 1;
    *out = P;
    return REMAT_OK;
}

void remat__policy_destroy(remat__policy *P)
{
    if (!P)
        return;
    if (P->have_builder)
        remat__builder_destroy(&P->B);
    free_arrays(P);
    remat_schedule_destroy(&P->base);
    remat__free(P);
}

remat_status remat__policy_whole(remat__policy *P, const uint8_t *keep, remat_schedule *out, remat_err *err)
{
    P->B.err = err;
    prepare(P, keep);
    return build_whole(P, out, NULL, NULL);
}

/* Appends n instructions to out (one copy, not n pushes). */
static remat_status append(remat_schedule *out, const remat_instr *ins, size_t n, remat_err *err)
{
    if (n > SIZE_MAX / sizeof *ins - out->n)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory building the schedule");
    if (out->n + n > out->cap) {
        size_t cap = out->cap ? out->cap : 64;
        while (cap < out->n + n)
            cap = cap > SIZE_MAX / sizeof *ins / 2 ? out->n + n : cap * 2;
        remat_instr *p = remat__realloc(out->ins, cap * sizeof *p);
        if (!p)
            return remat_err_set(err, REMAT_ENOMEM, "out of memory building the schedule");
        out->ins = p;
        out->cap = cap;
    }
    if (n)
        memcpy(out->ins + out->n, ins, n * sizeof *ins);
    out->n += n;
    return REMAT_OK;
}

remat_status remat__policy_base(remat__policy *P, const uint8_t *keep, remat_schedule *out, remat_err *err)
{
    const remat_graph *g = P->a->g;
    size_t nt = g->n_tensors ? g->n_tensors : 1, ns = (size_t)P->a->n_steps;
    P->have_base = 0;
    P->B.err = err;
    if (!P->bstep) {
        P->bstep = remat__array(nt, sizeof *P->bstep);
        P->bpin = remat__calloc(nt, 1);
        P->shadow = remat__calloc(nt, 1);
        P->pos_start = remat__array(ns, sizeof *P->pos_start);
        P->pos_main = remat__array(ns, sizeof *P->pos_main);
        P->cpos_start = remat__array(ns, sizeof *P->cpos_start);
        P->cpos_main = remat__array(ns, sizeof *P->cpos_main);
        P->dmark = remat__calloc(nt, sizeof *P->dmark);
        P->real = remat__array(ns, sizeof *P->real);
        P->dirty = remat__array(nt, sizeof *P->dirty);
        P->dirty_mark = remat__calloc(nt, sizeof *P->dirty_mark);
        P->force = remat__calloc(ns, sizeof *P->force);
        /* prepare_edit's tables: only a policy with a base edits. */
        const size_t na = P->n_acts ? P->n_acts : 1;
        P->pkeep = remat__calloc(nt, 1);
        P->kpos = remat__array(nt, sizeof *P->kpos);
        P->heap = remat__array(na, sizeof *P->heap);
        P->hmark = remat__calloc(na, sizeof *P->hmark);
        P->bd = remat__array(nt, sizeof *P->bd);
        P->bd_mark = remat__calloc(nt, sizeof *P->bd_mark);
        if (!P->bstep || !P->bpin || !P->shadow || !P->pos_start || !P->pos_main || !P->cpos_start || !P->cpos_main ||
            !P->dmark || !P->real || !P->dirty || !P->dirty_mark || !P->force || !P->pkeep || !P->kpos || !P->heap ||
            !P->hmark || !P->bd || !P->bd_mark)
            return remat_err_set(err, REMAT_ENOMEM, "out of memory building the schedule");
        for (size_t t = 0; t < nt; t++)
            P->kpos[t] = UINT32_MAX;
        for (uint32_t k = 0; k < P->n_acts; k++)
            P->kpos[P->acts[k]] = k;
    }
    prepare(P, keep);
    remat_schedule_clear(out);
    remat_status st = build_whole(P, out, P->pos_start, P->pos_main);
    if (st != REMAT_OK)
        return st;
    P->sig_ok = 0; /* made by the first build that can use them */
    remat_schedule_clear(&P->base);
    if ((st = append(&P->base, out->ins, out->n, err)) != REMAT_OK)
        return st;
    memcpy(P->bstep, P->fstep, nt * sizeof *P->bstep);
    memcpy(P->bpin, P->fpin, nt);
    remat__policy_bd_reset(P);
    P->have_base = 1;
    return REMAT_OK;
}

/* Applies base instruction in to the shadow residency (what the base's
 * builder did to res there), counting against the candidate's. */
static void shadow_apply(remat__policy *P, remat_instr in)
{
    const remat_graph *g = P->a->g;
    remat_builder *B = &P->B;
    if (in.kind == REMAT_I_FWD || in.kind == REMAT_I_RECOMPUTE) {
        const remat_op *op = &g->ops[in.arg];
        const uint32_t *out = remat_op_outputs(g, op);
        for (uint32_t i = 0; i < op->n_out; i++) {
            uint32_t t = out[i];
            B->ndiff += (uint32_t)(B->res[t] != 1) - (uint32_t)(B->res[t] != P->shadow[t]);
            P->shadow[t] = 1;
        }
    } else if (in.kind == REMAT_I_FREE) {
        uint32_t t = in.arg;
        B->ndiff += (uint32_t)(B->res[t] != 0) - (uint32_t)(B->res[t] != P->shadow[t]);
        P->shadow[t] = 0;
    }
}


/* Whether step s (the shadow at its start) would make the base's
 * instructions: the builder's step reads the residency of the tensors its
 * own instructions name (a rebuild walks from the saves through the inputs
 * of the ops it recomputes; frees test what they free) and of its bucket,
 * and the pins of some of them; when none of these differs from the base
 * (residency against the shadow, free step and pin against the base's), it
 * decides as the base did. */
static int step_clean(const remat__policy *P, uint32_t s)
{
    const remat_graph *g = P->a->g;
    const remat_builder *B = &P->B;
    const remat_instr *ins = P->base.ins;
    for (size_t i = P->pos_start[s]; i < P->pos_start[s + 1]; i++) {
        const uint32_t *l1 = NULL, *l2 = NULL;
        uint32_t n1, n2;
        instr_tensors(g, &ins[i], &l1, &n1, &l2, &n2);
        for (uint32_t k = 0; k < n1 + n2; k++) {
            uint32_t x = k < n1 ? l1[k] : l2[k - n1];
            if (B->res[x] != P->shadow[x] || P->dmark[x] == P->depoch)
                return 0;
        }
    }
    for (uint32_t i = P->off[s]; i < P->off[s + 1]; i++) {
        uint32_t x = P->list[i];
        if (B->res[x] != P->shadow[x] || P->dmark[x] == P->depoch)
            return 0;
    }
    return 1;
}

/* Step s as the base made it (step_clean said so): its instructions
 * copied, their effects applied to the builder and the shadow alike. */
static remat_status step_copy(remat__policy *P, uint32_t s, remat_schedule *out, remat_err *err)
{
    const remat_graph *g = P->a->g;
    remat_builder *B = &P->B;
    const remat_instr *ins = P->base.ins;
    const size_t from = P->pos_start[s], to = P->pos_start[s + 1];
    P->cpos_start[s] = out->n;
    P->cpos_main[s] = out->n + (P->pos_main[s] - from);
    remat_status st = append(out, ins + from, to - from, err);
    if (st != REMAT_OK)
        return st;
    for (size_t i = from; i < to; i++) {
        remat_instr in = ins[i];
        if (in.kind == REMAT_I_FWD || in.kind == REMAT_I_RECOMPUTE) {
            const remat_op *op = &g->ops[in.arg];
            const uint32_t *o = remat_op_outputs(g, op);
            for (uint32_t j = 0; j < op->n_out; j++)
                remat__builder_set_res(B, o[j], 1);
            B->fwd_done[in.arg] = 1;
        } else if (in.kind == REMAT_I_FREE) {
            remat__builder_set_res(B, in.arg, 0);
        } else if (in.kind == REMAT_I_BWD) {
            const remat_op *op = &g->ops[in.arg];
            const uint32_t *sv = remat_op_saves(g, op);
            for (uint32_t j = 0; j < op->n_save; j++)
                B->rem[sv[j]]--;
        }
        shadow_apply(P, in);
    }
    if (s >= g->n_ops)
        for (uint32_t i = P->off[s]; i < P->off[s + 1]; i++)
            B->pin[P->list[i]] = 0;
    return REMAT_OK;
}

/* Steps [s, e) as the base made them, each of them sig_clean (so
 * step_clean would pass it and step_copy copy it): their instructions in
 * one copy, their effects on the builder and the shadow alike. No tensor
 * they name is dirty, so its residency is the shadow's before and after
 * and ndiff does not move. */
static remat_status stretch_copy(remat__policy *P, uint32_t s, uint32_t e, remat_schedule *out, remat_err *err)
{
    const remat_graph *g = P->a->g;
    remat_builder *B = &P->B;
    const remat_instr *ins = P->base.ins;
    const size_t from = P->pos_start[s], to = P->pos_start[e], at = out->n;
    for (uint32_t k = s; k < e; k++) {
        P->cpos_start[k] = at + (P->pos_start[k] - from);
        P->cpos_main[k] = at + (P->pos_main[k] - from);
    }
    remat_status st = append(out, ins + from, to - from, err);
    if (st != REMAT_OK)
        return st;
    for (size_t i = from; i < to; i++) {
        const remat_instr in = ins[i];
        if (in.kind == REMAT_I_FWD || in.kind == REMAT_I_RECOMPUTE) {
            const remat_op *op = &g->ops[in.arg];
            const uint32_t *o = remat_op_outputs(g, op);
            for (uint32_t j = 0; j < op->n_out; j++)
                B->res[o[j]] = P->shadow[o[j]] = 1;
            B->fwd_done[in.arg] = 1;
        } else if (in.kind == REMAT_I_FREE) {
            B->res[in.arg] = P->shadow[in.arg] = 0;
        } else if (in.kind == REMAT_I_BWD) {
            const remat_op *op = &g->ops[in.arg];
            const uint32_t *sv = remat_op_saves(g, op);
            for (uint32_t j = 0; j < op->n_save; j++)
                B->rem[sv[j]]--;
        }
    }
    for (uint32_t k = s > g->n_ops ? s : g->n_ops; k < e; k++)
        for (uint32_t i = P->off[k]; i < P->off[k + 1]; i++)
            B->pin[P->list[i]] = 0;
    return REMAT_OK;
}

remat_status remat__policy_build(remat__policy *P, const uint8_t *keep, remat_schedule *out, remat_err *err)
{
    if (!P->have_base)
        return remat__policy_whole(P, keep, out, err);
    const remat_analysis *a = P->a;
    const remat_graph *g = a->g;
    remat_builder *B = &P->B;
    B->err = err;
    if (!remat__policy_prepare_edit(P, keep))
        prepare(P, keep);
    /* The window: the free steps of the tensors whose (free step, pin)
     * differ from the base's. */
    uint32_t s_lo = UINT32_MAX, s_hi = 0;
    if (++P->depoch == 0) {
        memset(P->dmark, 0, (g->n_tensors ? g->n_tensors : 1) * sizeof *P->dmark);
        memset(P->force, 0, (size_t)a->n_steps * sizeof *P->force);
        P->depoch = 1;
    }
    if (++P->dirty_epoch == 0) {
        memset(P->dirty_mark, 0, (g->n_tensors ? g->n_tensors : 1) * sizeof *P->dirty_mark);
        P->dirty_epoch = 1;
    }
    P->n_dirty = 0;
    P->sig_off = 0;
    P->n_real = 0;
    /* Those tensors are among bd when it is kept (bd_ok), else anywhere. */
    const uint32_t n_scan = P->bd_ok ? P->n_bd : g->n_tensors;
    uint32_t w = 0;
    for (uint32_t i = 0; i < n_scan; i++) {
        const uint32_t t = P->bd_ok ? P->bd[i] : i;
        if (P->fstep[t] == P->bstep[t] && P->fpin[t] == P->bpin[t]) {
            if (P->bd_ok)
                P->bd_mark[t] = 0; /* back to the base's: dropped */
            continue;
        }
        if (P->bd_ok)
            P->bd[w++] = t;
        P->dmark[t] = P->depoch;
        remat__policy_dirty_add(P, t);
        if (P->fstep[t] != P->bstep[t] && P->fstep[t] < a->n_steps)
            P->force[P->fstep[t]] = P->depoch; /* its new bucket: not in the base's signature */
        uint32_t lo = P->fstep[t] < P->bstep[t] ? P->fstep[t] : P->bstep[t];
        uint32_t hi = P->fstep[t] > P->bstep[t] ? P->fstep[t] : P->bstep[t];
        s_lo = lo < s_lo ? lo : s_lo;
        s_hi = hi > s_hi ? hi : s_hi;
    }
    if (P->bd_ok)
        P->n_bd = w;
    remat_schedule_clear(out);
    const remat_schedule *b = &P->base;
    const uint32_t n_op_steps = g->n_ops + a->n_bwd;
    remat_status st;
    if (s_lo == UINT32_MAX) { /* the same free steps and pins: the same schedule */
        P->last_sig_off = 0;
        if ((st = append(out, b->ins, b->n, err)) != REMAT_OK)
            return st;
        P->last_lo = P->last_join = 0;
        P->cand_at = P->base_at = 0;
        P->last_ok = 1;
        return REMAT_OK;
    }
    /* The prefix, through step s_lo's op, and the builder's state there. */
    const size_t pre = P->pos_main[s_lo];
    st = append(out, b->ins, pre, err);
    if (st != REMAT_OK)
        return st;
    remat__builder_reset(B, out);
    for (size_t i = 0; i < pre; i++) {
        remat_instr in = b->ins[i];
        if (in.kind == REMAT_I_FWD || in.kind == REMAT_I_RECOMPUTE) {
            const remat_op *op = &g->ops[in.arg];
            const uint32_t *o = remat_op_outputs(g, op);
            for (uint32_t j = 0; j < op->n_out; j++)
                B->res[o[j]] = 1;
            B->fwd_done[in.arg] = 1;
        } else if (in.kind == REMAT_I_FREE) {
            B->res[in.arg] = 0;
        } else if (in.kind == REMAT_I_BWD) {
            const remat_op *op = &g->ops[in.arg];
            const uint32_t *sv = remat_op_saves(g, op);
            for (uint32_t j = 0; j < op->n_save; j++)
                B->rem[sv[j]]--;
        }
    }
    /* Pins: the candidate's, less those its backward buckets before s_lo
     * released (the same tensors as the base's there). */
    memcpy(B->pin, P->fpin, g->n_tensors ? g->n_tensors : 1);
    if (s_lo > g->n_ops) /* the tensors freed in backward before s_lo: their buckets */
        for (uint32_t i = P->off[g->n_ops]; i < P->off[s_lo]; i++)
            B->pin[P->list[i]] = 0;
    memcpy(P->shadow, B->res, g->n_tensors ? g->n_tensors : 1);
    B->shadow = P->shadow;
    B->ndiff = 0;
    /* Every dirty tensor so far is dmarked: few of them, and the base's
     * signatures are worth making now if they are not made yet. */
    if (!P->sig_off && !P->sig_ok) {
        if (P->n_dirty <= DIRTY_MAX)
            remat__policy_sig_all(P);
        else
            P->sig_off = 1;
    }
    size_t bi = pre; /* the base's instructions applied to the shadow */
    P->last_lo = s_lo;
    for (uint32_t s = s_lo; s < n_op_steps; s++) {
        /* Where this step's instructions start in out (the first step's
         * op is the prefix's end). */
        size_t c0 = s == s_lo ? P->pos_start[s_lo] : out->n;
        if (s > s_lo) {
            for (; bi < P->pos_start[s]; bi++) {
                remat__policy_dirty_from(P, b->ins[bi]);
                shadow_apply(P, b->ins[bi]);
            }
            if (P->dmask_stale && !P->sig_off)
                remat__policy_dmask_make(P);
            if (remat__policy_sig_clean(P, s)) {
                /* A run of clean steps; with no difference left, it stops
                 * where the join test below is due (past s_hi). */
                const uint32_t e_max = B->ndiff == 0 ? (s > s_hi ? s : s_hi) + 1 : n_op_steps;
                uint32_t e = s + 1;
                while (e < e_max && remat__policy_sig_clean(P, e))
                    e++;
                if ((st = stretch_copy(P, s, e, out, err)) != REMAT_OK)
                    break;
                bi = P->pos_start[e];
                s = e - 1;
                goto stepped;
            }
            if (step_clean(P, s)) {
                if ((st = step_copy(P, s, out, err)) != REMAT_OK)
                    break;
                bi = P->pos_start[s + 1];
                goto stepped;
            }
            P->cpos_start[s] = out->n;
            if ((st = step_op(P, s)) != REMAT_OK)
                break;
            P->cpos_main[s] = out->n;
        }
        if ((st = step_frees(P, s)) != REMAT_OK)
            break;
        /* A step made here: its changes are dirty candidates, and its
         * signature is the base's should this build be adopted. */
        for (size_t i = c0; i < out->n && !P->sig_off; i++)
            remat__policy_dirty_from(P, out->ins[i]);
        if (!P->sig_off) {
            remat__policy_sig_of(P, out->ins, c0, out->n, s, P->csig + (size_t)P->n_real * SIG_WORDS);
            P->real[P->n_real++] = s;
        }
    stepped:
        if (s < s_hi || s + 1 >= n_op_steps)
            continue;
        /* Past the window: the join, where the residency is the base's. */
        for (; bi < P->pos_start[s + 1]; bi++) {
            remat__policy_dirty_from(P, b->ins[bi]);
            shadow_apply(P, b->ins[bi]);
        }
        if (B->ndiff == 0) {
            B->shadow = NULL;
            P->last_join = s + 1;
            P->cand_at = out->n;
            P->base_at = bi;
            if ((st = append(out, b->ins + bi, b->n - bi, err)) != REMAT_OK)
                return st;
            P->last_sig_off = P->sig_off;
            P->last_ok = 1;
            return REMAT_OK;
        }
    }
    B->shadow = NULL;
    if (st != REMAT_OK)
        return st;
    P->last_join = n_op_steps;
    P->cpos_start[n_op_steps] = P->cpos_main[n_op_steps] = out->n;
    P->cand_at = P->base_at = 0;
    if ((st = remat__builder_opt(B)) != REMAT_OK)
        return st;
    P->last_sig_off = P->sig_off;
    P->last_ok = 1;
    return REMAT_OK;
}

remat_status remat__policy_adopt(remat__policy *P, const remat_schedule *s, remat_err *err)
{
    if (!P->have_base || !P->last_ok)
        return remat_err_set(err, REMAT_EINTERNAL, "policy: nothing built to adopt");
    const remat_graph *g = P->a->g;
    const uint32_t n_op_steps = g->n_ops + P->a->n_bwd;
    if (P->last_join > P->last_lo) {
        for (uint32_t k = P->last_lo + 1; k < P->last_join; k++) {
            P->pos_start[k] = P->cpos_start[k];
            P->pos_main[k] = P->cpos_main[k];
        }
        if (P->last_join == n_op_steps) {
            P->pos_start[n_op_steps] = P->pos_main[n_op_steps] = P->cpos_start[n_op_steps];
        } else {
            /* Modular: the shift may be negative, every result is a true position. */
            for (uint32_t k = P->last_join; k <= n_op_steps; k++) {
                P->pos_start[k] = P->pos_start[k] - P->base_at + P->cand_at;
                P->pos_main[k] = P->pos_main[k] - P->base_at + P->cand_at;
            }
        }
    }
    if (P->last_sig_off)
        P->sig_ok = 0; /* the steps it made are not signed */
    else
        for (uint32_t k = 0; k < P->n_real; k++)
            memcpy(P->sig + (size_t)P->real[k] * SIG_WORDS, P->csig + (size_t)k * SIG_WORDS,
                   SIG_WORDS * sizeof *P->sig);
    P->n_real = 0;
    remat_schedule_clear(&P->base);
    remat_status st = append(&P->base, s->ins, s->n, err);
    if (st != REMAT_OK) {
        P->have_base = 0;
        return st;
    }
    size_t nt = g->n_tensors ? g->n_tensors : 1;
    memcpy(P->bstep, P->fstep, nt * sizeof *P->bstep);
    memcpy(P->bpin, P->fpin, nt);
    remat__policy_bd_reset(P);
    P->last_ok = 0;
    return REMAT_OK;
}

remat_status remat_schedule_from_keep(const remat_analysis *a, const uint8_t *keep, remat_schedule *out,
                                      remat_err *err)
{
    remat__policy *P;
    remat_status st = remat__policy_create(a, &P, err);
    if (st != REMAT_OK)
        return st;
    st = remat__policy_whole(P, keep, out, err);
    remat__policy_destroy(P);
    return st;
}

remat_status remat_schedule_store_all(const remat_analysis *a, remat_schedule *out, remat_err *err)
{
    return remat_schedule_from_keep(a, NULL, out, err);
}

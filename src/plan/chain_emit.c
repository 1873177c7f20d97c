/*
 * chain_emit.c - schedule primitives along a chain of stages (chain.h).
 *
 * Each primitive states one decision (what stays resident when a stage
 * runs) and leaves residency bookkeeping to the builder. Two strategies
 * emit through them: Revolve (revolve.c) with advance, pin, release and
 * chain_reverse(KEEP_INPUT) over the block chain, and the chain dynamic
 * program (chain_profile.c's probes, chain_table.c's plans) over stages,
 * so a schedule Revolve emits is a schedule of the program's family with
 * the same replayed memory. What the program adds: the tape forward and
 * the separate backward (Beaumont et al.'s "store the stage's whole tape"
 * choice), a reverse that frees its input once nothing needs it, and a
 * lazy reverse that rebuilds each backward step's saves just before it
 * runs.
 */
#include "chain.h"
#include "../util/util_internal.h"

#include <string.h>

remat_status remat__chain_emit_init(remat_chain_emit *E, const remat_analysis *a, const remat_blocks *st,
                                    remat_schedule *out, remat_err *err)
{
    memset(E, 0, sizeof *E);
    E->st = st;
    remat_status s = remat__builder_init(&E->B, a, out, err);
    if (s != REMAT_OK)
        return s;
    /* A stage's tape lists each of its backward steps' saves: at most refs. */
    E->tape = remat__array((size_t)a->g->n_refs + 1, sizeof *E->tape);
    if (!E->tape) {
        remat__chain_emit_destroy(E);
        return remat_err_set(err, REMAT_ENOMEM, "out of memory building the schedule");
    }
    return REMAT_OK;
}

void remat__chain_emit_destroy(remat_chain_emit *E)
{
    remat__builder_destroy(&E->B);
    remat__free(E->tape);
    E->tape = NULL;
}

/* The last forward position that reads t (its birth when nothing does). */
static uint32_t last_use(const remat_analysis *an, uint32_t t)
{
    const remat_lifetime *L = &an->life[t];
    return L->last_fwd_use == REMAT_NONE || L->last_fwd_use < L->birth ? L->birth : L->last_fwd_use;
}

static int all_outputs_resident(const remat_builder *B, const remat_op *op)
{
    const uint32_t *out = remat_op_outputs(B->g, op);
    for (uint32_t q = 0; q < op->n_out; q++)
        if (!B->res[out[q]])
            return 0;
    return 1;
}

remat_status remat__chain_advance(remat_chain_emit *E, uint32_t a, uint32_t m)
{
    const remat_analysis *an = E->B.a;
    const remat_graph *g = an->g;
    uint32_t target = E->st->in[m];
    remat_status st;
    for (uint32_t j = a; j < m; j++) {
        E->advances++;
        for (uint32_t i = E->st->start[j]; i < E->st->start[j + 1]; i++) {
            uint32_t k = an->order[i];
            const remat_op *op = &g->ops[k];
            const uint32_t *in = remat_op_inputs(g, op), *out = remat_op_outputs(g, op);
            if (!all_outputs_resident(&E->B, op) && (st = remat__builder_forward(&E->B, k)) != REMAT_OK)
                return st;
            for (uint32_t q = 0; q < op->n_in + op->n_out; q++) {
                uint32_t t = q < op->n_in ? in[q] : out[q - op->n_in];
                if (t == target || E->B.pin[t] || g->tensors[t].kind != REMAT_TENSOR_ACTIVATION)
                    continue;
                if (last_use(an, t) <= i && (st = remat__builder_free(&E->B, t)) != REMAT_OK)
                    return st;
            }
        }
    }
    return REMAT_OK;
}

/* 1 if a backward step of stage j saves t. */
static int stage_saves(const remat_chain_emit *E, uint32_t j, uint32_t t)
{
    const remat_analysis *an = E->B.a;
    const remat_graph *g = an->g;
    for (uint32_t i = E->st->start[j]; i < E->st->start[j + 1]; i++) {
        uint32_t k = an->order[i];
        if (an->bwd_step[k] == REMAT_NONE)
            continue;
        const uint32_t *sv = remat_op_saves(g, &g->ops[k]);
        for (uint32_t q = 0; q < g->ops[k].n_save; q++)
            if (sv[q] == t)
                return 1;
    }
    return 0;
}

remat_status remat__chain_tape_forward(remat_chain_emit *E, uint32_t j, int drop)
{
    const remat_analysis *an = E->B.a;
    const remat_graph *g = an->g;
    uint32_t xin = E->st->in[j], xout = E->st->in[j + 1];
    remat_status st;
    remat__chain_pin(E, j + 1);
    for (uint32_t i = E->st->start[j]; i < E->st->start[j + 1]; i++) {
        uint32_t k = an->order[i];
        const remat_op *op = &g->ops[k];
        const uint32_t *in = remat_op_inputs(g, op), *out = remat_op_outputs(g, op);
        if (!all_outputs_resident(&E->B, op) && (st = remat__builder_forward(&E->B, k)) != REMAT_OK)
            return st;
        for (uint32_t q = 0; q < op->n_in + op->n_out; q++) {
            uint32_t t = q < op->n_in ? in[q] : out[q - op->n_in];
            if (E->B.pin[t] || E->B.rem[t] > 0 || g->tensors[t].kind != REMAT_TENSOR_ACTIVATION)
                continue;
            if (last_use(an, t) <= i && (st = remat__builder_free(&E->B, t)) != REMAT_OK)
                return st;
        }
    }
    /* x_j passes through a stage that does not read it when in[j+1] is
     * in[j]: it is this stage's output too, and stays pinned. */
    if (xin != REMAT_NONE && xin != xout) {
        E->B.pin[xin] = 0;
        if ((E->B.rem[xin] == 0 || (drop && !stage_saves(E, j, xin))) &&
            (st = remat__builder_free(&E->B, xin)) != REMAT_OK)
            return st;
    }
    return REMAT_OK;
}

/* Collects stage j's tape (the saves of its backward steps) into E->tape. */
static uint32_t collect_tape(remat_chain_emit *E, uint32_t j)
{
    const remat_analysis *an = E->B.a;
    const remat_graph *g = an->g;
    uint32_t nt = 0;
    for (uint32_t i = E->st->start[j]; i < E->st->start[j + 1]; i++) {
        uint32_t k = an->order[i];
        if (an->bwd_step[k] == REMAT_NONE)
            continue;
        const uint32_t *sv = remat_op_saves(g, &g->ops[k]);
        for (uint32_t q = 0; q < g->ops[k].n_save; q++)
            E->tape[nt++] = sv[q];
    }
    return nt;
}

/* Backward steps of stage j in reverse order, then drop what is left of
 * the stage (dead outputs, unsaved stepping stones). */
static remat_status run_backward(remat_chain_emit *E, uint32_t j)
{
    const remat_analysis *an = E->B.a;
    const remat_graph *g = an->g;
    remat_status st;
    for (uint32_t i = E->st->start[j + 1]; i-- > E->st->start[j];) {
        uint32_t k = an->order[i];
        if (an->bwd_step[k] != REMAT_NONE && (st = remat__builder_backward(&E->B, k)) != REMAT_OK)
            return st;
    }
    for (uint32_t i = E->st->start[j]; i < E->st->start[j + 1]; i++) {
        const remat_op *op = &g->ops[an->order[i]];
        const uint32_t *out = remat_op_outputs(g, op);
        for (uint32_t q = 0; q < op->n_out; q++)
            if (!E->B.pin[out[q]] && E->B.rem[out[q]] == 0 && (st = remat__builder_free(&E->B, out[q])) != REMAT_OK)
                return st;
    }
    return REMAT_OK;
}

remat_status remat__chain_backward(remat_chain_emit *E, uint32_t j)
{
    const remat_analysis *an = E->B.a;
    uint32_t nt = collect_tape(E, j);
    remat_status st =
        remat__builder_ensure(&E->B, E->tape, nt, an->g->ops[an->order[E->st->start[j + 1] - 1]].id);
    if (st != REMAT_OK)
        return st;
    return run_backward(E, j);
}

static int stage_has_unrun_ops(const remat_chain_emit *E, uint32_t j)
{
    for (uint32_t i = E->st->start[j]; i < E->st->start[j + 1]; i++)
        if (!E->B.fwd_done[E->B.a->order[i]])
            return 1;
    return 0;
}

remat_status remat__chain_reverse(remat_chain_emit *E, uint32_t j, int how)
{
    const remat_analysis *an = E->B.a;
    const remat_graph *g = an->g;
    remat_status st;
    uint32_t x = E->st->in[j];
    uint8_t was = x != REMAT_NONE && (how & REMAT_CHAIN_KEEP_INPUT) ? E->B.pin[x] : 0;
    if (x != REMAT_NONE)
        E->B.pin[x] = 1;
    if (stage_has_unrun_ops(E, j)) {
        /* First forward of this stage: keep what its backward saves. */
        for (uint32_t i = E->st->start[j]; i < E->st->start[j + 1]; i++) {
            uint32_t k = an->order[i];
            if ((st = remat__builder_forward(&E->B, k)) != REMAT_OK)
                return st;
            const remat_op *op = &g->ops[k];
            const uint32_t *in = remat_op_inputs(g, op), *out = remat_op_outputs(g, op);
            for (uint32_t q = 0; q < op->n_in + op->n_out; q++) {
                uint32_t t = q < op->n_in ? in[q] : out[q - op->n_in];
                if (E->B.pin[t] || E->B.rem[t] > 0 || g->tensors[t].kind != REMAT_TENSOR_ACTIVATION)
                    continue;
                uint32_t last = last_use(an, t);
                if (an->is_output[t] && last < g->n_ops - 1)
                    last = g->n_ops - 1;
                if (last <= i && (st = remat__builder_free(&E->B, t)) != REMAT_OK)
                    return st;
            }
        }
    }
    if (!(how & REMAT_CHAIN_LAZY)) {
        /* Rebuild the stage's whole tape first; then x_j, unless it is a
         * checkpoint or saved itself, is no longer needed. */
        uint32_t nt = collect_tape(E, j);
        if ((st = remat__builder_ensure(&E->B, E->tape, nt, g->ops[an->order[E->st->start[j + 1] - 1]].id)) !=
            REMAT_OK)
            return st;
    }
    /* Lazily, each backward step rebuilds what it saves just before it
     * runs (the default policy's way): x_j stays until the last. */
    if ((how & REMAT_CHAIN_LAZY) && (st = run_backward(E, j)) != REMAT_OK)
        return st;
    if (x != REMAT_NONE) {
        E->B.pin[x] = was;
        if (!was && E->B.rem[x] == 0 && (st = remat__builder_free(&E->B, x)) != REMAT_OK)
            return st;
    }
    return (how & REMAT_CHAIN_LAZY) ? REMAT_OK : run_backward(E, j);
}

void remat__chain_pin(remat_chain_emit *E, uint32_t j)
{
    uint32_t x = E->st->in[j];
    if (x != REMAT_NONE)
        E->B.pin[x] = 1;
}

remat_status remat__chain_release(remat_chain_emit *E, uint32_t j)
{
    uint32_t x = E->st->in[j];
    if (x == REMAT_NONE)
        return REMAT_OK;
    E->B.pin[x] = 0;
    return remat__builder_free(&E->B, x);
}

remat_status remat__chain_unpin(remat_chain_emit *E, uint32_t j)
{
    uint32_t x = E->st->in[j];
    if (x == REMAT_NONE)
        return REMAT_OK;
    E->B.pin[x] = 0;
    return E->B.rem[x] == 0 ? remat__builder_free(&E->B, x) : REMAT_OK;
}

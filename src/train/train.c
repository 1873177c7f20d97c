/*
 * train.c - the real training step: judge, execute, check, update.
 *
 * A step is remat_replay's judgement of the schedule (with the optimizer
 * state the ledger budgets as an extra, so the accounted peak covers the
 * whole step), then one walk of the schedule on the engine (engine.c) with
 * the real kernels (kernels.c) as hooks, then two checks: every
 * recomputation reproduced its first computation bit for bit, and the
 * engine's allocator peaked at exactly the accounted bytes. The parameters
 * and the optimizer state are the model state's arrays, lent to the engine
 * for the step: the forward pass reads the parameters in place and the
 * optimizer hook (OPT) updates both in place, reading the gradients the
 * engine holds.
 *
 * The optimizer formulas are PyTorch's single-tensor ones (torch.optim.SGD,
 * Adam, AdamW), computed in binary64 and rounded once per stored value;
 * graphs/README.md ("Optimizers") writes them out.
 */
#define _POSIX_C_SOURCE 200809L

#include "train_internal.h"
#include "../util/util_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef enum { RUN_STEP, RUN_GRADIENTS } run_mode;

typedef struct {
    remat_trainer *T;
    remat_model_state *st;
    const remat_batch *b;
    run_mode mode;
    uint8_t **grads; /* RUN_GRADIENTS: where the gradients go */
    double loss;
    int have_loss;
} run;

/* ---- the trainer ---------------------------------------------------------------- */

remat_status remat_trainer_create(const remat_analysis *a, remat_trainer **out, remat_err *err)
{
    *out = NULL;
    remat_trainer *t = remat__calloc(1, sizeof *t);
    if (!t)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory creating the trainer");
    t->a = a;
    remat_status st = remat__kprog_prepare(&t->P, a, err);
    if (st != REMAT_OK) {
        remat_trainer_destroy(t);
        return st;
    }
    t->loss_op = a->g->tensors[a->g->outputs[0]].producer;
    remat__train_detect_task(t);
    *out = t;
    return REMAT_OK;
}

void remat_trainer_destroy(remat_trainer *t)
{
    if (!t)
        return;
    remat__kprog_destroy(&t->P);
    remat__free(t);
}

remat_elem remat_trainer_dtype(const remat_trainer *t)
{
    return t->P.dtype;
}

uint64_t remat_trainer_param_elements(const remat_trainer *t, bool trainable_only)
{
    const remat_graph *g = t->a->g;
    uint64_t n = 0;
    for (uint32_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].kind == REMAT_TENSOR_PARAM && (!trainable_only || !g->tensors[i].frozen))
            n += t->P.lay[i].n;
    return n;
}

static int trainable(const remat_tensor *T)
{
    return T->kind == REMAT_TENSOR_PARAM && !T->frozen;
}

remat_status remat_trainer_check_state(const remat_trainer *t, const remat_model_state *s, remat_err *err)
{
    const remat_graph *g = t->a->g;
    if (s->n_tensors != g->n_tensors || !s->value)
        return remat_err_set(err, REMAT_EGRAPH, "the model state was not made for graph '%s'", g->name);
    if (s->dtype != t->P.dtype)
        return remat_err_set(err, REMAT_EGRAPH, "the model state is %s, graph '%s' is %s", remat_elem_name(s->dtype),
                             g->name, remat_elem_name(t->P.dtype));
    remat_optim o;
    remat_status st = remat_optim_init(&o, s->optim.kind, err);
    if (st != REMAT_OK)
        return st;
    uint32_t ns = remat_optim_states(s->optim.kind);
    for (uint32_t i = 0; i < g->n_tensors; i++) {
        const remat_tensor *T = &g->tensors[i];
        if (T->kind != REMAT_TENSOR_PARAM)
            continue;
        if (!s->value[i])
            return remat_err_set(err, REMAT_EGRAPH, "the model state has no values for param '%s'", T->id);
        for (uint32_t j = 0; j < ns; j++)
            if (trainable(T) && (!s->state[j] || !s->state[j][i]))
                return remat_err_set(err, REMAT_EGRAPH, "the model state has no %s for param '%s'",
                                     remat_optim_state_name(s->optim.kind, j), T->id);
    }
    return REMAT_OK;
}

/* ---- engine hooks ------------------------------------------------------------- */

static uint8_t *leaf_buffer(void *ctx, remat__engine *E, uint32_t t, uint64_t len)
{
    run *R = ctx;
    (void)len; /* the state's and the batch's arrays are the tensors' bytes */
    return E->g->tensors[t].kind == REMAT_TENSOR_PARAM ? R->st->value[t] : R->b->data[t];
}

static remat_status fill_leaf(void *ctx, remat__engine *E, uint32_t t, uint8_t *buf, uint64_t len)
{
    (void)ctx, (void)buf, (void)len;
    return remat__engine_broken(E, "leaf '%s' has no data", E->g->tensors[t].id);
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static remat_status forward(void *ctx, remat__engine *E, uint32_t k, int recompute, uint8_t *ws, uint64_t ws_len)
{
    run *R = ctx;
    (void)ws, (void)ws_len; /* held as the graph says; the kernels need no scratch */
    /* Only the first computation is timed: it is the op's duration_ns, and
     * a recomputation is the same kernel again. */
    const int timed = R->T->fwd_ns && !recompute;
    const uint64_t t0 = timed ? now_ns() : 0;
    remat_status st = remat__kernel_forward(&R->T->P, E, k);
    if (timed)
        R->T->fwd_ns[k] = now_ns() - t0;
    if (st == REMAT_OK && k == R->T->loss_op && !recompute) {
        R->loss = remat__ld(E->buf[E->g->outputs[0]], R->T->P.dtype == REMAT_ELEM_F32, 0);
        R->have_loss = 1;
    }
    return st;
}

static remat_status seed(void *ctx, remat__engine *E, uint32_t t, uint8_t *buf, uint64_t len)
{
    run *R = ctx;
    (void)E, (void)t, (void)len;
    remat__st(buf, R->T->P.dtype == REMAT_ELEM_F32, 0, 1.0); /* dLoss/dLoss */
    return REMAT_OK;
}

static remat_status backward(void *ctx, remat__engine *E, uint32_t k, uint8_t *ws, uint64_t ws_len)
{
    run *R = ctx;
    (void)ws, (void)ws_len;
    if (!R->T->bwd_ns)
        return remat__kernel_backward(&R->T->P, E, k);
    const uint64_t t0 = now_ns();
    remat_status st = remat__kernel_backward(&R->T->P, E, k);
    R->T->bwd_ns[k] = now_ns() - t0;
    return st;
}

void remat_trainer_time_kernels(remat_trainer *t, uint64_t *fwd_ns, uint64_t *bwd_ns)
{
    t->fwd_ns = fwd_ns;
    t->bwd_ns = bwd_ns;
}

/* One parameter's update, in place; t is the step count after this step. */
static void update(const remat_optim *o, int f32, uint64_t t, uint8_t *p, const uint8_t *g, uint8_t *s0, uint8_t *s1,
                   uint64_t n)
{
    const double lr = o->lr, wd = o->weight_decay;
    const double bc1 = 1.0 - pow(o->beta1, (double)t), bc2 = 1.0 - pow(o->beta2, (double)t);
    const double step_size = lr / bc1, bc2_sqrt = sqrt(bc2);
    for (uint64_t i = 0; i < n; i++) {
        const int64_t j = (int64_t)i;
        double w = remat__ld(p, f32, j), gr = remat__ld(g, f32, j);
        switch (o->kind) {
        case REMAT_LEDGER_SGD:
            if (wd != 0)
                gr += wd * w;
            w += -lr * gr;
            break;
        case REMAT_LEDGER_MOMENTUM: {
            if (wd != 0)
                gr += wd * w;
            /* torch.optim.SGD: the buffer starts as the first gradient. */
            double buf = t == 1 ? gr : o->momentum * remat__ld(s0, f32, j) + gr;
            remat__st(s0, f32, j, buf);
            w += -lr * remat__ld(s0, f32, j);
            break;
        }
        default: { /* adam, adamw */
            if (o->kind == REMAT_LEDGER_ADAMW)
                w *= 1.0 - lr * wd;
            else if (wd != 0)
                gr += wd * w;
            double m = remat__ld(s0, f32, j);
            m += (1.0 - o->beta1) * (gr - m);
            double v = o->beta2 * remat__ld(s1, f32, j) + (1.0 - o->beta2) * gr * gr;
            remat__st(s0, f32, j, m);
            remat__st(s1, f32, j, v);
            m = remat__ld(s0, f32, j);
            v = remat__ld(s1, f32, j);
            w += -step_size * (m / (sqrt(v) / bc2_sqrt + o->eps));
            break;
        }
        }
        remat__st(p, f32, j, w);
    }
}

static remat_status opt(void *ctx, remat__engine *E)
{
    run *R = ctx;
    const remat_graph *g = E->g;
    const int f32 = R->T->P.dtype == REMAT_ELEM_F32;
    if (R->mode == RUN_GRADIENTS) {
        for (uint32_t t = 0; R->grads && t < g->n_tensors; t++)
            if (R->grads[t] && E->grad[t] && g->tensors[t].kind != REMAT_TENSOR_ACTIVATION)
                memcpy(R->grads[t], E->grad[t], (size_t)g->tensors[t].logical_bytes);
        return REMAT_OK;
    }
    remat_model_state *st = R->st;
    uint64_t step = st->step + 1;
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        if (!trainable(&g->tensors[t]))
            continue;
        if (!E->grad[t]) {
            /* A param no gradient reaches keeps its value (as PyTorch skips
             * a param whose .grad is None). */
            if (E->a->grad_flows[t])
                return remat__engine_broken(E, "param '%s' has no gradient at the optimizer step", g->tensors[t].id);
            continue;
        }
        update(&st->optim, f32, step, st->value[t], E->grad[t], st->state[0] ? st->state[0][t] : NULL,
               st->state[1] ? st->state[1][t] : NULL, R->T->P.lay[t].n);
    }
    st->step = step;
    return REMAT_OK;
}

/* ---- the step ------------------------------------------------------------------ */

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* The optimizer state the ledger budgets for this graph, dtype and
 * optimizer: the extra that remat_replay adds, and what the state holds. */
static remat_status ledger_state_bytes(const remat_trainer *t, const remat_model_state *s, uint64_t *out,
                                       remat_err *err)
{
    remat_ledger_config cfg;
    remat_ledger_config_init(&cfg);
    cfg.weights = s->dtype == REMAT_ELEM_F32 ? REMAT_LEDGER_DT_F32 : REMAT_LEDGER_DT_F64;
    cfg.optimizer = s->optim.kind;
    remat_ledger_result lr;
    remat_status st = remat_ledger_from_graph(&cfg, t->a->g, &lr, err);
    if (st != REMAT_OK)
        return st;
    *out = lr.optimizer_state.bytes;
    if (*out != s->state_bytes)
        return remat_err_set(err, REMAT_EINTERNAL,
                             "the ledger budgets %llu B of %s optimizer state, the model state holds %llu B",
                             (unsigned long long)*out, remat_ledger_optimizer_name(s->optim.kind),
                             (unsigned long long)s->state_bytes);
    return REMAT_OK;
}

static remat_status check_batch(const remat_trainer *t, const remat_batch *b, remat_err *err)
{
    const remat_graph *g = t->a->g;
    if (!b || b->n_tensors != g->n_tensors || !b->data)
        return remat_err_set(err, REMAT_EINVAL, "the batch was not made for graph '%s'", g->name);
    for (uint32_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].kind == REMAT_TENSOR_INPUT && !b->data[i])
            return remat_err_set(err, REMAT_EINVAL, "the batch has no data for input '%s'", g->tensors[i].id);
    return REMAT_OK;
}

static remat_status execute(remat_trainer *T, const remat_schedule *s, remat_model_state *st, const remat_batch *b,
                            run_mode mode, uint8_t **grads, remat_step_result *r, remat_err *err)
{
    memset(r, 0, sizeof *r);
    remat_status rc;
    if ((rc = remat_trainer_check_state(T, st, err)) != REMAT_OK || (rc = check_batch(T, b, err)) != REMAT_OK)
        return rc;
    remat_exec_extras x;
    memset(&x, 0, sizeof x);
    if ((rc = ledger_state_bytes(T, st, &x.optimizer_state, err)) != REMAT_OK)
        return rc;
    r->optimizer_state_bytes = x.optimizer_state;
    remat_replay_result rr;
    uint64_t accounted;
    if ((rc = remat__engine_judge(T->a, s, &x, 1, &rr, &accounted, err)) != REMAT_OK)
        return rc;
    int valid = rr.valid;
    r->accounted_peak_bytes = rr.peak_bytes;
    r->flops_recompute = rr.flops_recompute;
    remat_replay_result_destroy(&rr);
    if (!valid)
        return REMAT_ESCHEDULE; /* err holds the replay's message */
    /* The same schedule without extras: the figure `remat replay` prints. */
    remat_replay_result plain;
    if ((rc = remat_replay(T->a, s, NULL, NULL, &plain, err)) != REMAT_OK)
        return rc;
    r->replay_peak_bytes = plain.peak_bytes;
    remat_replay_result_destroy(&plain);

    if (T->fwd_ns) {
        memset(T->fwd_ns, 0, T->a->g->n_ops * sizeof *T->fwd_ns);
        memset(T->bwd_ns, 0, T->a->g->n_ops * sizeof *T->bwd_ns);
    }
    run R = {T, st, b, mode, grads, 0, 0};
    const remat__engine_hooks hooks = {&R, leaf_buffer, fill_leaf, forward, seed, backward, opt};
    remat__engine E;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = remat__engine_init(&E, T->a, 1, "training step", &hooks, err);
    if (rc == REMAT_OK)
        rc = remat__engine_hold(&E, st->state_bytes);
    if (rc == REMAT_OK)
        rc = remat__engine_run(&E, s);
    r->measured_peak_bytes = E.high;
    r->recomputed_tensors_checked = E.recomputed_checked;
    r->mismatches = E.mismatches;
    remat__engine_destroy(&E);
    r->wall_seconds = seconds_since(&t0);
    if (rc != REMAT_OK)
        return rc;
    r->loss = R.have_loss ? R.loss : NAN;
    r->step = st->step;
    r->equal = r->measured_peak_bytes == r->accounted_peak_bytes && accounted == r->accounted_peak_bytes;
    r->verified = r->mismatches == 0 && r->equal;
    if (r->verified)
        return REMAT_OK;
    if (r->mismatches == 0) /* else the engine has named the first mismatch */
        remat_err_set(err, REMAT_EINTERNAL,
                      "training step: the allocator's high-water mark %llu B differs from the accounted peak %llu B",
                      (unsigned long long)r->measured_peak_bytes, (unsigned long long)r->accounted_peak_bytes);
    return REMAT_EINTERNAL;
}

remat_status remat_train_step(remat_trainer *t, const remat_schedule *s, remat_model_state *st, const remat_batch *b,
                              remat_step_result *r, remat_err *err)
{
    remat_err local;
    remat_err_init(&local);
    return execute(t, s, st, b, RUN_STEP, NULL, r, err ? err : &local);
}

remat_status remat_train_gradients(remat_trainer *t, const remat_schedule *s, const remat_model_state *st,
                                   const remat_batch *b, uint8_t **grads, double *loss, remat_err *err)
{
    remat_err local;
    remat_err_init(&local);
    remat_step_result r;
    /* The state is only read: RUN_GRADIENTS never calls the update. */
    remat_status rc = execute(t, s, (remat_model_state *)st, b, RUN_GRADIENTS, grads, &r, err ? err : &local);
    if (loss)
        *loss = r.loss;
    return rc;
}

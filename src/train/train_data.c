/*
 * train_data.c - what a training run starts from: initial parameters,
 * input batches, and the synthetic task that --seed generates.
 *
 * Everything random here comes from SplitMix64 streams keyed by the seed
 * and by a name (a param's id, a step number), never by call order, so a
 * param's initial values do not change when another param is added and the
 * batch of step k is the same whether the run started at step 0 or resumed
 * at step k. The task is read off the loss: cross_entropy over an input's
 * class targets is a spiral, mse_loss against an input target is a
 * regression, anything else gets uniform inputs. graphs/README.md
 * ("Synthetic data") states the formulas.
 */
#include "train_internal.h"
#include "../util/util_internal.h"

#include <math.h>
#include <string.h>

static const double PI = 3.14159265358979323846;

/* ---- random streams --------------------------------------------------------------- */

typedef struct {
    uint64_t s;
} rng;

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static rng rng_for(uint64_t seed, uint64_t domain, uint64_t key)
{
    uint64_t s = seed;
    uint64_t a = splitmix(&s) ^ domain;
    uint64_t b = splitmix(&a) ^ key;
    rng r = {splitmix(&b)};
    return r;
}

/* Uniform in [0, 1), 53 bits. */
static double uniform(rng *r)
{
    return (double)(splitmix(&r->s) >> 11) * (1.0 / 9007199254740992.0);
}

/* Standard normal (Box-Muller; one value per call keeps streams simple). */
static double gaussian(rng *r)
{
    double u = uniform(r), v = uniform(r);
    return sqrt(-2.0 * log(1.0 - u)) * cos(2.0 * PI * v);
}

/* ---- the task ------------------------------------------------------------------------ */

static int is_float(remat_elem e)
{
    return e == REMAT_ELEM_F64 || e == REMAT_ELEM_F32;
}

void remat__train_detect_task(remat_trainer *t)
{
    const remat_graph *g = t->a->g;
    const remat_op *loss = &g->ops[t->loss_op];
    const remat__kop *o = &t->P.ops[t->loss_op];
    t->task = REMAT_TASK_INPUTS;
    t->features = t->target = REMAT_NONE;
    if ((o->kind != REMAT_KOP_CROSS_ENTROPY && o->kind != REMAT_KOP_MSE_LOSS) || loss->n_in != 2)
        return;
    uint32_t y = remat_op_inputs(g, loss)[1];
    if (g->tensors[y].kind != REMAT_TENSOR_INPUT)
        return;
    /* The features: the first float input besides the target, whose rows
     * pair with the target's. */
    const remat__layout *Ly = &t->P.lay[y];
    uint64_t target_rows = Ly->n;
    if (o->kind == REMAT_KOP_MSE_LOSS) {
        uint64_t O = Ly->nd ? Ly->shape[Ly->nd - 1] : 1;
        target_rows = O ? Ly->n / O : 0;
    }
    for (uint32_t i = 0; i < g->n_tensors; i++) {
        const remat__layout *L = &t->P.lay[i];
        if (i == y || g->tensors[i].kind != REMAT_TENSOR_INPUT || !is_float(L->elem) || L->nd == 0)
            continue;
        uint64_t D = L->shape[L->nd - 1], rows = D ? L->n / D : 0;
        if (rows != target_rows)
            continue;
        t->features = i;
        t->target = y;
        t->task = o->kind == REMAT_KOP_CROSS_ENTROPY ? REMAT_TASK_SPIRAL : REMAT_TASK_REGRESSION;
        return;
    }
}

remat_task remat_trainer_task(const remat_trainer *t)
{
    return t->task;
}

const char *remat_task_name(remat_task k)
{
    switch (k) {
    case REMAT_TASK_SPIRAL: return "spiral";
    case REMAT_TASK_REGRESSION: return "regression";
    default: return "inputs";
    }
}

uint32_t remat_trainer_features(const remat_trainer *t)
{
    return t->features;
}

uint32_t remat_trainer_target(const remat_trainer *t)
{
    return t->target;
}

/* ---- batches ------------------------------------------------------------------------- */

remat_status remat_batch_alloc(const remat_trainer *t, remat_batch *b, remat_err *err)
{
    const remat_graph *g = t->a->g;
    memset(b, 0, sizeof *b);
    b->n_tensors = g->n_tensors;
    b->data = remat__array(g->n_tensors ? g->n_tensors : 1, sizeof *b->data);
    if (!b->data)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory allocating a batch");
    for (uint32_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].kind == REMAT_TENSOR_INPUT &&
            !(b->data[i] = remat__calloc(g->tensors[i].bytes ? (size_t)g->tensors[i].bytes : 1, 1))) {
            remat_batch_destroy(b);
            return remat_err_set(err, REMAT_ENOMEM, "out of memory allocating input '%s'", g->tensors[i].id);
        }
    return REMAT_OK;
}

void remat_batch_destroy(remat_batch *b)
{
    if (!b)
        return;
    for (uint32_t i = 0; b->data && i < b->n_tensors; i++)
        remat__free(b->data[i]);
    remat__free(b->data);
    memset(b, 0, sizeof *b);
}

void remat_batch_from_dataset(const remat_trainer *t, const remat_dataset *d, uint64_t step, remat_batch *b)
{
    const remat_graph *g = t->a->g;
    if (!d->n_batches || d->n_tensors != g->n_tensors || b->n_tensors != g->n_tensors)
        return;
    uint64_t k = step % d->n_batches;
    for (uint32_t i = 0; i < g->n_tensors; i++) {
        const uint8_t *src = d->data[k * d->n_tensors + i];
        if (src && b->data[i])
            memcpy(b->data[i], src, (size_t)g->tensors[i].bytes);
    }
}

/* ---- synthetic data ------------------------------------------------------------------ */

#define DOMAIN_DATA 0xDA7AULL
#define DOMAIN_INIT 0x1217ULL

/* The regression target's weights: fixed numbers, not drawn from the seed,
 * so that every seed poses the same problem. */
static double teacher(uint64_t j, uint64_t d)
{
    return 2.0 * sin(1.0 + 3.0 * (double)j + 5.0 * (double)d);
}

/* The class count of the cross_entropy that reads integer input y (the
 * preparation guarantees there is one). */
static uint64_t classes_of(const remat_trainer *t, uint32_t y)
{
    const remat_graph *g = t->a->g;
    for (uint32_t k = 0; k < g->n_ops; k++) {
        const uint32_t *in = remat_op_inputs(g, &g->ops[k]);
        if (t->P.ops[k].kind == REMAT_KOP_CROSS_ENTROPY && in[1] == y) {
            const remat__layout *L = &t->P.lay[in[0]];
            return L->shape[L->nd - 1];
        }
    }
    return 1;
}

remat_status remat_trainer_synthetic_batch(const remat_trainer *t, uint64_t seed, uint64_t step, remat_batch *b,
                                           remat_err *err)
{
    const remat_graph *g = t->a->g;
    const int f32 = t->P.dtype == REMAT_ELEM_F32;
    if (b->n_tensors != g->n_tensors || !b->data)
        return remat_err_set(err, REMAT_EINVAL, "the batch was not made for graph '%s'", g->name);
    rng r = rng_for(seed, DOMAIN_DATA, step);
    /* Every input but the task's features and target: uniform in [-1, 1),
     * or, for class targets, uniform over the classes. */
    for (uint32_t i = 0; i < g->n_tensors; i++) {
        if (g->tensors[i].kind != REMAT_TENSOR_INPUT || i == t->features || i == t->target)
            continue;
        const remat__layout *L = &t->P.lay[i];
        if (L->elem == REMAT_ELEM_I64 || L->elem == REMAT_ELEM_I32) {
            uint64_t C = classes_of(t, i);
            for (uint64_t e = 0; e < L->n; e++) {
                uint64_t c = (uint64_t)(uniform(&r) * (double)C);
                c = c < C ? c : C - 1;
                if (L->elem == REMAT_ELEM_I64)
                    ((int64_t *)(void *)b->data[i])[e] = (int64_t)c;
                else
                    ((int32_t *)(void *)b->data[i])[e] = (int32_t)c;
            }
            continue;
        }
        for (uint64_t e = 0; e < L->n; e++)
            remat__st(b->data[i], f32, (int64_t)e, 2.0 * uniform(&r) - 1.0);
    }
    if (t->task == REMAT_TASK_INPUTS)
        return REMAT_OK;
    const remat__layout *X = &t->P.lay[t->features], *Y = &t->P.lay[t->target];
    uint64_t D = X->shape[X->nd - 1], rows = D ? X->n / D : 0;
    uint8_t *x = b->data[t->features], *y = b->data[t->target];
    if (t->task == REMAT_TASK_REGRESSION) {
        uint64_t O = Y->nd ? Y->shape[Y->nd - 1] : 1;
        for (uint64_t e = 0; e < X->n; e++)
            remat__st(x, f32, (int64_t)e, 2.0 * uniform(&r) - 1.0);
        for (uint64_t n = 0; n < rows; n++)
            for (uint64_t j = 0; j < O; j++) {
                double s = (double)j;
                for (uint64_t d = 0; d < D; d++)
                    s += teacher(j, d) * remat__ld(x, f32, (int64_t)(n * D + d));
                remat__st(y, f32, (int64_t)(n * O + j), sin(s));
            }
        return REMAT_OK;
    }
    /* The spiral: C arms, one per class (cs231n's), in the first two
     * feature columns; further columns are 0. A single feature column gets
     * C intervals of [-1, 1) instead. */
    const remat__layout *Lg = &t->P.lay[remat_op_inputs(g, &g->ops[t->loss_op])[0]];
    uint64_t C = Lg->shape[Lg->nd - 1];
    for (uint64_t n = 0; n < rows; n++) {
        uint64_t c = (uint64_t)(uniform(&r) * (double)C);
        double u = uniform(&r), noise = gaussian(&r);
        if (c >= C)
            c = C - 1;
        for (uint64_t d = 0; d < D; d++)
            remat__st(x, f32, (int64_t)(n * D + d), 0.0);
        if (D >= 2) {
            double angle = 2.0 * PI * (double)c / (double)C + 4.0 * u + 0.2 * noise;
            remat__st(x, f32, (int64_t)(n * D), u * sin(angle));
            remat__st(x, f32, (int64_t)(n * D + 1), u * cos(angle));
        } else if (D == 1) {
            remat__st(x, f32, (int64_t)n, -1.0 + (2.0 * (double)c + u) / (double)C);
        }
        if (Y->elem == REMAT_ELEM_I64)
            ((int64_t *)(void *)y)[n] = (int64_t)c;
        else
            ((int32_t *)(void *)y)[n] = (int32_t)c;
    }
    return REMAT_OK;
}

/* ---- initial parameters ----------------------------------------------------------------- */

/* 1 if param t is read as a layer_norm weight (it then starts at one). */
static int is_norm_weight(const remat_trainer *t, uint32_t p)
{
    const remat_graph *g = t->a->g;
    for (uint32_t k = 0; k < g->n_ops; k++)
        if (t->P.ops[k].kind == REMAT_KOP_LAYER_NORM && g->ops[k].n_in > 1 && remat_op_inputs(g, &g->ops[k])[1] == p)
            return 1;
    return 0;
}

remat_status remat_trainer_init_state(const remat_trainer *t, const remat_optim *o, uint64_t seed,
                                      remat_model_state *s, remat_err *err)
{
    const remat_graph *g = t->a->g;
    const int f32 = t->P.dtype == REMAT_ELEM_F32;
    remat_optim check;
    remat_status st = remat_optim_init(&check, o->kind, err);
    if (st != REMAT_OK)
        return st;
    if ((st = remat_model_state_alloc(s, g, t->P.dtype, o, err)) != REMAT_OK)
        return st;
    for (uint32_t i = 0; i < g->n_tensors; i++) {
        if (g->tensors[i].kind != REMAT_TENSOR_PARAM)
            continue;
        const remat__layout *L = &t->P.lay[i];
        const char *id = g->tensors[i].id;
        rng r = rng_for(seed, DOMAIN_INIT, remat__fnv1a(REMAT_FNV_OFFSET, id, strlen(id)));
        double fill = L->nd == 1 && is_norm_weight(t, i) ? 1.0 : 0.0, limit = 0;
        if (L->nd >= 2) {
            double fan_in = (double)L->shape[L->nd - 2], fan_out = (double)L->shape[L->nd - 1];
            limit = fan_in + fan_out > 0 ? sqrt(6.0 / (fan_in + fan_out)) : 0;
        }
        for (uint64_t e = 0; e < L->n; e++)
            remat__st(s->value[i], f32, (int64_t)e, L->nd >= 2 ? limit * (2.0 * uniform(&r) - 1.0) : fill);
    }
    return REMAT_OK;
}

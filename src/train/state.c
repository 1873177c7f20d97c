/*
 * state.c - the model state and training data as plain data: element
 * types, optimizer defaults, and the arrays' create/copy/compare/destroy.
 *
 * Like schedule.c for plans, this is the data that the readers in
 * state_file.c fill, the trainer updates and the writer prints. Every
 * array is a param's exact bytes, so "bit-identical" is memcmp.
 */
#include "remat/state.h"
#include "../util/util_internal.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* ---- element types ------------------------------------------------------------ */

remat_elem remat_elem_parse(const char *dtype)
{
    static const struct {
        const char *name;
        remat_elem e;
    } names[] = {
        {"f64", REMAT_ELEM_F64},   {"float64", REMAT_ELEM_F64}, {"double", REMAT_ELEM_F64},
        {"fp64", REMAT_ELEM_F64},  {"binary64", REMAT_ELEM_F64}, {"f32", REMAT_ELEM_F32},
        {"float32", REMAT_ELEM_F32}, {"float", REMAT_ELEM_F32},  {"fp32", REMAT_ELEM_F32},
        {"binary32", REMAT_ELEM_F32},
        {"i64", REMAT_ELEM_I64}, {"int64", REMAT_ELEM_I64},   {"long", REMAT_ELEM_I64},   {"i32", REMAT_ELEM_I32},
        {"int32", REMAT_ELEM_I32}, {"int", REMAT_ELEM_I32},
    };
    if (!dtype)
        return REMAT_ELEM_NONE;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(dtype, names[i].name) == 0)
            return names[i].e;
    return REMAT_ELEM_NONE;
}

const char *remat_elem_name(remat_elem e)
{
    switch (e) {
    case REMAT_ELEM_F64: return "f64";
    case REMAT_ELEM_F32: return "f32";
    case REMAT_ELEM_I64: return "i64";
    case REMAT_ELEM_I32: return "i32";
    default: return "none";
    }
}

uint32_t remat_elem_size(remat_elem e)
{
    switch (e) {
    case REMAT_ELEM_F64:
    case REMAT_ELEM_I64: return 8;
    case REMAT_ELEM_F32:
    case REMAT_ELEM_I32: return 4;
    default: return 0;
    }
}

/* ---- optimizers ----------------------------------------------------------------- */

remat_status remat_optim_init(remat_optim *o, remat_ledger_optimizer kind, remat_err *err)
{
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->momentum = 0.9;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->eps = 1e-8;
    switch (kind) {
    case REMAT_LEDGER_SGD:
    case REMAT_LEDGER_MOMENTUM: o->lr = 0.01; return REMAT_OK;
    case REMAT_LEDGER_ADAM: o->lr = 0.001; return REMAT_OK;
    case REMAT_LEDGER_ADAMW:
        o->lr = 0.001;
        o->weight_decay = 0.01; /* torch.optim.AdamW's default */
        return REMAT_OK;
    default:
        return remat_err_set(err, REMAT_EUNSUPPORTED,
                             "optimizer %s is budgeted by the ledger but not executed (sgd, momentum, adam, adamw)",
                             remat_ledger_optimizer_name(kind));
    }
}

uint32_t remat_optim_states(remat_ledger_optimizer kind)
{
    switch (kind) {
    case REMAT_LEDGER_MOMENTUM: return 1;
    case REMAT_LEDGER_ADAM:
    case REMAT_LEDGER_ADAMW: return 2;
    default: return 0;
    }
}

const char *remat_optim_state_name(remat_ledger_optimizer kind, uint32_t i)
{
    if (kind == REMAT_LEDGER_MOMENTUM && i == 0)
        return "momentum_buffer";
    if ((kind == REMAT_LEDGER_ADAM || kind == REMAT_LEDGER_ADAMW) && i < 2)
        return i == 0 ? "exp_avg" : "exp_avg_sq";
    return "?";
}

/* ---- the model state ---------------------------------------------------------- */

void remat_model_state_init(remat_model_state *s)
{
    memset(s, 0, sizeof *s);
}

void remat_model_state_destroy(remat_model_state *s)
{
    if (!s)
        return;
    for (uint32_t t = 0; t < s->n_tensors; t++) {
        if (s->value)
            remat__free(s->value[t]);
        for (int j = 0; j < 2; j++)
            if (s->state[j])
                remat__free(s->state[j][t]);
    }
    remat__free(s->value);
    remat__free(s->state[0]);
    remat__free(s->state[1]);
    memset(s, 0, sizeof *s);
}

static int trainable(const remat_tensor *T)
{
    return T->kind == REMAT_TENSOR_PARAM && !T->frozen;
}

remat_status remat_model_state_alloc(remat_model_state *s, const remat_graph *g, remat_elem dtype,
                                     const remat_optim *o, remat_err *err)
{
    uint32_t size = remat_elem_size(dtype);
    if (dtype != REMAT_ELEM_F64 && dtype != REMAT_ELEM_F32)
        return remat_err_set(err, REMAT_EINVAL, "model state: dtype must be f64 or f32");
    remat_model_state_init(s);
    s->n_tensors = g->n_tensors;
    s->dtype = dtype;
    s->optim = *o;
    size_t nt = g->n_tensors ? g->n_tensors : 1;
    uint32_t ns = remat_optim_states(o->kind);
    s->value = remat__array(nt, sizeof *s->value);
    for (uint32_t j = 0; j < ns; j++)
        s->state[j] = remat__array(nt, sizeof *s->state[j]);
    if (!s->value || (ns > 0 && !s->state[0]) || (ns > 1 && !s->state[1]))
        goto nomem;
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        const remat_tensor *T = &g->tensors[t];
        if (T->kind != REMAT_TENSOR_PARAM)
            continue;
        if (T->bytes % size != 0) {
            remat_model_state_destroy(s);
            return remat_err_set(err, REMAT_EGRAPH, "param '%s': %llu B is not a whole number of %s elements", T->id,
                                 (unsigned long long)T->bytes, remat_elem_name(dtype));
        }
        /* One byte for an empty param, so that a NULL always means "none". */
        if (!(s->value[t] = remat__calloc(T->bytes ? (size_t)T->bytes : 1, 1)))
            goto nomem;
        for (uint32_t j = 0; j < ns && trainable(T); j++) {
            if (!(s->state[j][t] = remat__calloc(T->bytes ? (size_t)T->bytes : 1, 1)))
                goto nomem;
            s->state_bytes += T->bytes;
        }
    }
    return REMAT_OK;
nomem:
    remat_model_state_destroy(s);
    return remat_err_set(err, REMAT_ENOMEM, "out of memory allocating the model state");
}

remat_status remat_model_state_copy(remat_model_state *dst, const remat_model_state *src, const remat_graph *g,
                                    remat_err *err)
{
    remat_status st = remat_model_state_alloc(dst, g, src->dtype, &src->optim, err);
    if (st != REMAT_OK)
        return st;
    dst->step = src->step;
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        if (src->value[t])
            memcpy(dst->value[t], src->value[t], (size_t)g->tensors[t].bytes);
        for (int j = 0; j < 2; j++)
            if (src->state[j] && src->state[j][t])
                memcpy(dst->state[j][t], src->state[j][t], (size_t)g->tensors[t].bytes);
    }
    return REMAT_OK;
}

static bool same_bytes(const uint8_t *x, const uint8_t *y, uint64_t n, uint32_t size, uint64_t *at)
{
    if (memcmp(x, y, (size_t)n) == 0)
        return true;
    for (uint64_t i = 0; i < n; i++)
        if (x[i] != y[i]) {
            *at = size ? i / size : i;
            break;
        }
    return false;
}

bool remat_model_state_equal(const remat_model_state *a, const remat_model_state *b, const remat_graph *g,
                             char *where, size_t cap)
{
    char dummy[8];
    if (!where) {
        where = dummy;
        cap = sizeof dummy;
    }
    if (a->dtype != b->dtype || a->optim.kind != b->optim.kind || a->n_tensors != b->n_tensors) {
        snprintf(where, cap, "dtype or optimizer");
        return false;
    }
    if (a->step != b->step) {
        snprintf(where, cap, "step (%llu vs %llu)", (unsigned long long)a->step, (unsigned long long)b->step);
        return false;
    }
    uint32_t size = remat_elem_size(a->dtype);
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        uint64_t at = 0;
        if (!a->value[t] != !b->value[t]) {
            snprintf(where, cap, "param '%s' present in one state only", g->tensors[t].id);
            return false;
        }
        if (a->value[t] && !same_bytes(a->value[t], b->value[t], g->tensors[t].bytes, size, &at)) {
            snprintf(where, cap, "param '%s' element %llu", g->tensors[t].id, (unsigned long long)at);
            return false;
        }
        for (int j = 0; j < 2; j++) {
            const uint8_t *x = a->state[j] ? a->state[j][t] : NULL, *y = b->state[j] ? b->state[j][t] : NULL;
            if (!x != !y || (x && !same_bytes(x, y, g->tensors[t].bytes, size, &at))) {
                snprintf(where, cap, "%s of param '%s' element %llu", remat_optim_state_name(a->optim.kind, (uint32_t)j),
                         g->tensors[t].id, (unsigned long long)at);
                return false;
            }
        }
    }
    return true;
}

/* ---- data sets ------------------------------------------------------------------ */

void remat_dataset_init(remat_dataset *d)
{
    memset(d, 0, sizeof *d);
}

void remat_dataset_destroy(remat_dataset *d)
{
    if (!d)
        return;
    for (uint64_t i = 0; d->data && i < (uint64_t)d->n_batches * d->n_tensors; i++)
        remat__free(d->data[i]);
    remat__free(d->data);
    memset(d, 0, sizeof *d);
}

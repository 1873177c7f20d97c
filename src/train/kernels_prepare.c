/*
 * kernels_prepare.c - can this graph be executed for real, and how are its
 * tensors laid out?
 *
 * A graph's costs and sizes are enough to plan and replay it; to execute it,
 * remat needs what the graph format leaves optional: every op's type among
 * the supported set, every leaf's shape and dtype, every op's attrs. This
 * file checks all of that once, in forward order, and refuses the first
 * problem with a message that names the op or tensor and what was expected,
 * so that the kernels (kernels.c) can trust every shape they are given.
 * Activations may omit shape and dtype: they are inferred from the op (a
 * reshape needs its target shape, or keeps its input's) and checked against
 * the bytes the graph gives, since the accounting is in those bytes.
 */
#include "kernels.h"
#include "../util/util_internal.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    remat__kop_kind kind;
} op_types[] = {
    {"linear", REMAT_KOP_LINEAR},
    {"matmul", REMAT_KOP_MATMUL},
    {"add", REMAT_KOP_ADD},
    {"mul", REMAT_KOP_MUL},
    {"relu", REMAT_KOP_RELU},
    {"gelu", REMAT_KOP_GELU},
    {"tanh", REMAT_KOP_TANH},
    {"sigmoid", REMAT_KOP_SIGMOID},
    {"layer_norm", REMAT_KOP_LAYER_NORM},
    {"softmax", REMAT_KOP_SOFTMAX},
    {"cross_entropy", REMAT_KOP_CROSS_ENTROPY},
    {"mse_loss", REMAT_KOP_MSE_LOSS},
    {"sum", REMAT_KOP_SUM},
    {"mean", REMAT_KOP_MEAN},
    {"reshape", REMAT_KOP_RESHAPE},
    {"view", REMAT_KOP_RESHAPE},
    {"transpose", REMAT_KOP_TRANSPOSE},
    {"permute", REMAT_KOP_TRANSPOSE},
};
#define N_TYPES (sizeof op_types / sizeof op_types[0])

const char *remat__kop_list(void)
{
    return "linear, matmul, add, mul, relu, gelu, tanh, sigmoid, layer_norm, softmax, cross_entropy, mse_loss, "
           "sum, mean, reshape (view), transpose, permute";
}

typedef struct {
    remat__kprog *P;
    const remat_analysis *a;
    const remat_graph *g;
    remat_err *err;
    uint32_t k; /* the op being checked */
} prep;

static const char *fmt_shape(uint32_t nd, const uint64_t *shape, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (uint32_t d = 0; d < nd && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%llu", d ? ", " : "", (unsigned long long)shape[d]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
    return buf;
}

/* "op 'h1' (linear): <why>", REMAT_EGRAPH. */
static remat_status bad(prep *R, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static remat_status bad(prep *R, const char *fmt, ...)
{
    char why[REMAT_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    const remat_op *op = &R->g->ops[R->k];
    return remat_err_set(R->err, REMAT_EGRAPH, "op '%.80s' (%s): %s", op->id, op->type, why);
}

static void contiguous(remat__layout *L)
{
    int64_t s = 1;
    for (uint32_t d = L->nd; d-- > 0;) {
        L->st[d] = s;
        s *= (int64_t)L->shape[d];
    }
}

static bool is_contiguous(const remat__layout *L)
{
    int64_t s = 1;
    for (uint32_t d = L->nd; d-- > 0;) {
        if (L->shape[d] != 1 && L->st[d] != s)
            return false;
        s *= (int64_t)L->shape[d];
    }
    return true;
}

static bool all_ones(uint32_t nd, const uint64_t *shape)
{
    for (uint32_t d = 0; d < nd; d++)
        if (shape[d] != 1)
            return false;
    return true;
}

static bool same_shape(uint32_t n1, const uint64_t *s1, uint32_t n2, const uint64_t *s2)
{
    if (n1 == n2 && (n1 == 0 || memcmp(s1, s2, n1 * sizeof *s1) == 0))
        return true;
    return all_ones(n1, s1) && all_ones(n2, s2); /* [] and [1] are both a scalar */
}

static uint64_t elements(uint32_t nd, const uint64_t *shape)
{
    uint64_t n = 1;
    for (uint32_t d = 0; d < nd; d++)
        if (!remat_u64_mul(n, shape[d], &n))
            return UINT64_MAX;
    return n;
}

/* Checks a tensor's bytes against its layout (storage bytes for a tensor
 * that owns storage, logical bytes for a view). */
static remat_status check_bytes(prep *R, uint32_t t, const char *what)
{
    const remat_tensor *T = &R->g->tensors[t];
    const remat__layout *L = &R->P->lay[t];
    uint64_t want = 0, have = T->storage == t ? T->bytes : T->logical_bytes;
    char b[96];
    if (L->n == UINT64_MAX || !remat_u64_mul(L->n, remat_elem_size(L->elem), &want) || want != have)
        return remat_err_set(R->err, REMAT_EGRAPH, "%s '%.80s': %llu B, but shape %s of %s is %llu B", what, T->id,
                             (unsigned long long)have, fmt_shape(L->nd, L->shape, b, sizeof b),
                             remat_elem_name(L->elem), (unsigned long long)want);
    return REMAT_OK;
}

/* Sets output j of the current op to an inferred shape (contiguous) and
 * checks what the graph says about it. */
static remat_status set_output(prep *R, uint32_t j, uint32_t nd, const uint64_t *shape, remat_elem elem)
{
    uint32_t t = remat_op_outputs(R->g, &R->g->ops[R->k])[j];
    const remat_tensor *T = &R->g->tensors[t];
    remat__layout *L = &R->P->lay[t];
    char b1[96], b2[96];
    if (T->shape && T->ndim > REMAT_KMAXDIM)
        return bad(R, "output '%.80s' has %u dimensions; at most %d", T->id, T->ndim, REMAT_KMAXDIM);
    if (T->shape && !same_shape(T->ndim, T->shape, nd, shape))
        return bad(R, "output '%.80s' has shape %s, expected %s", T->id, fmt_shape(T->ndim, T->shape, b1, sizeof b1),
                   fmt_shape(nd, shape, b2, sizeof b2));
    if (T->dtype && remat_elem_parse(T->dtype) != elem)
        return bad(R, "output '%.80s' has dtype '%s', expected %s", T->id, T->dtype, remat_elem_name(elem));
    L->elem = elem;
    L->nd = T->shape ? T->ndim : nd;
    memcpy(L->shape, T->shape ? T->shape : shape, L->nd * sizeof *L->shape);
    L->n = elements(L->nd, L->shape);
    contiguous(L);
    return T->storage == t ? check_bytes(R, t, "tensor") : REMAT_OK;
}

static const remat__layout *in_lay(prep *R, uint32_t i)
{
    return &R->P->lay[remat_op_inputs(R->g, &R->g->ops[R->k])[i]];
}

static const char *in_id(prep *R, uint32_t i)
{
    return R->g->tensors[remat_op_inputs(R->g, &R->g->ops[R->k])[i]].id;
}

static remat_status want_inputs(prep *R, uint32_t lo, uint32_t hi)
{
    uint32_t n = R->g->ops[R->k].n_in;
    if (n < lo || n > hi) {
        if (lo == hi)
            return bad(R, "takes %u input%s, not %u", lo, lo == 1 ? "" : "s", n);
        return bad(R, "takes %u to %u inputs, not %u", lo, hi, n);
    }
    for (uint32_t i = 0; i < n; i++) {
        const remat__layout *L = in_lay(R, i);
        int is_target = R->P->ops[R->k].kind == REMAT_KOP_CROSS_ENTROPY && i == 1;
        int is_int = L->elem == REMAT_ELEM_I64 || L->elem == REMAT_ELEM_I32;
        if (is_int != is_target)
            return bad(R, "input '%.80s' is %s; %s", in_id(R, i), remat_elem_name(L->elem),
                       is_target ? "class targets must be i64 or i32" : "integer tensors are cross_entropy targets only");
    }
    return REMAT_OK;
}

static remat_status want_rank(prep *R, uint32_t i, uint32_t lo, const char *name)
{
    const remat__layout *L = in_lay(R, i);
    char b[96];
    if (L->nd < lo)
        return bad(R, "%s '%.80s' has shape %s; it needs at least %u dimension%s", name, in_id(R, i),
                   fmt_shape(L->nd, L->shape, b, sizeof b), lo, lo == 1 ? "" : "s");
    return REMAT_OK;
}

static remat_status only_single_output(prep *R)
{
    if (R->g->ops[R->k].n_out != 1)
        return bad(R, "has %u outputs; this op has one", R->g->ops[R->k].n_out);
    return REMAT_OK;
}

/* Normalizes a possibly negative dimension index. */
static int norm_dim(int64_t d, uint32_t nd, uint32_t *out)
{
    if (d < 0)
        d += nd;
    if (d < 0 || d >= (int64_t)nd)
        return 0;
    *out = (uint32_t)d;
    return 1;
}

/* ---- per op ----------------------------------------------------------------- */

static remat_status prep_matmul(prep *R, int linear)
{
    remat_status st;
    if ((st = want_inputs(R, 2, linear ? 3 : 2)) != REMAT_OK || (st = only_single_output(R)) != REMAT_OK ||
        (st = want_rank(R, 0, 2, linear ? "x" : "the first input")) != REMAT_OK ||
        (st = want_rank(R, 1, 2, linear ? "w" : "the second input")) != REMAT_OK)
        return st;
    const remat__layout *A = in_lay(R, 0), *B = in_lay(R, 1);
    char b1[96], b2[96];
    uint64_t K = A->shape[A->nd - 1], N = B->shape[B->nd - 1];
    if (B->shape[B->nd - 2] != K)
        return bad(R, "inner dimensions differ: '%.80s' %s and '%.80s' %s", in_id(R, 0),
                   fmt_shape(A->nd, A->shape, b1, sizeof b1), in_id(R, 1), fmt_shape(B->nd, B->shape, b2, sizeof b2));
    if (linear && B->nd != 2)
        return bad(R, "w '%.80s' must be [in, out], not %s", in_id(R, 1), fmt_shape(B->nd, B->shape, b1, sizeof b1));
    /* Batch dimensions: equal, or one operand 2-D (shared by every batch). */
    if (A->nd > 2 && B->nd > 2 &&
        (A->nd != B->nd || memcmp(A->shape, B->shape, (A->nd - 2) * sizeof *A->shape) != 0))
        return bad(R, "batch dimensions differ: %s and %s (they must be equal, or one operand 2-D)",
                   fmt_shape(A->nd, A->shape, b1, sizeof b1), fmt_shape(B->nd, B->shape, b2, sizeof b2));
    if (linear && R->g->ops[R->k].n_in == 3) {
        const remat__layout *b = in_lay(R, 2);
        if (b->nd != 1 || b->shape[0] != N)
            return bad(R, "bias '%.80s' has shape %s, expected [%llu]", in_id(R, 2),
                       fmt_shape(b->nd, b->shape, b1, sizeof b1), (unsigned long long)N);
    }
    const remat__layout *big = A->nd >= B->nd ? A : B;
    uint64_t shape[REMAT_KMAXDIM];
    uint32_t nd = big->nd;
    memcpy(shape, big->shape, (nd - 2) * sizeof *shape);
    shape[nd - 2] = A->shape[A->nd - 2];
    shape[nd - 1] = N;
    return set_output(R, 0, nd, shape, R->P->dtype);
}

static remat_status prep_binary(prep *R)
{
    remat_status st;
    if ((st = want_inputs(R, 2, 2)) != REMAT_OK || (st = only_single_output(R)) != REMAT_OK)
        return st;
    const remat__layout *A = in_lay(R, 0), *B = in_lay(R, 1);
    uint32_t nd = A->nd > B->nd ? A->nd : B->nd;
    uint64_t shape[REMAT_KMAXDIM];
    for (uint32_t d = 0; d < nd; d++) {
        int da = (int)d - (int)(nd - A->nd), db = (int)d - (int)(nd - B->nd);
        uint64_t x = da >= 0 ? A->shape[da] : 1, y = db >= 0 ? B->shape[db] : 1;
        if (x != y && x != 1 && y != 1) {
            char b1[96], b2[96];
            return bad(R, "shapes %s and %s do not broadcast", fmt_shape(A->nd, A->shape, b1, sizeof b1),
                       fmt_shape(B->nd, B->shape, b2, sizeof b2));
        }
        shape[d] = x == 1 ? y : x;
    }
    return set_output(R, 0, nd, shape, R->P->dtype);
}

static remat_status prep_unary(prep *R)
{
    remat_status st;
    if ((st = want_inputs(R, 1, 1)) != REMAT_OK || (st = only_single_output(R)) != REMAT_OK)
        return st;
    const remat__layout *X = in_lay(R, 0);
    remat__kop *o = &R->P->ops[R->k];
    if (o->kind == REMAT_KOP_GELU) {
        char approx[16] = "none";
        bool found;
        if ((st = remat_op_attr_string(R->g, R->k, "approximate", approx, sizeof approx, &found, R->err)) != REMAT_OK)
            return st;
        if (strcmp(approx, "tanh") != 0 && strcmp(approx, "none") != 0)
            return bad(R, "attrs.approximate is '%s'; it must be \"none\" (erf) or \"tanh\"", approx);
        o->gelu_tanh = strcmp(approx, "tanh") == 0;
    }
    if (o->kind == REMAT_KOP_SOFTMAX) {
        int64_t dim = -1;
        uint32_t n, d = 0;
        bool found;
        if ((st = want_rank(R, 0, 1, "input")) != REMAT_OK ||
            (st = remat_op_attr_ints(R->g, R->k, "dim", &dim, 1, &n, &found, R->err)) != REMAT_OK)
            return st;
        if (!norm_dim(dim, X->nd, &d) || d != X->nd - 1)
            return bad(R, "attrs.dim is %lld; softmax runs over the last dimension only (-1)", (long long)dim);
    }
    return set_output(R, 0, X->nd, X->shape, R->P->dtype);
}

static remat_status prep_layer_norm(prep *R)
{
    remat_status st;
    const remat_op *op = &R->g->ops[R->k];
    remat__kop *o = &R->P->ops[R->k];
    if ((st = want_inputs(R, 1, 3)) != REMAT_OK || (st = want_rank(R, 0, 1, "x")) != REMAT_OK)
        return st;
    if (op->n_out != 1 && op->n_out != 3)
        return bad(R, "has %u outputs; layer_norm has one (y) or three (y, mean, rstd)", op->n_out);
    const remat__layout *X = in_lay(R, 0);
    uint64_t D = X->shape[X->nd - 1];
    for (uint32_t i = 1; i < op->n_in; i++) {
        const remat__layout *L = in_lay(R, i);
        char b[96];
        if (L->nd != 1 || L->shape[0] != D)
            return bad(R, "%s '%.80s' has shape %s, expected [%llu]", i == 1 ? "weight" : "bias", in_id(R, i),
                       fmt_shape(L->nd, L->shape, b, sizeof b), (unsigned long long)D);
    }
    bool found;
    o->eps = 1e-5;
    if ((st = remat_op_attr_number(R->g, R->k, "eps", &o->eps, &found, R->err)) != REMAT_OK)
        return st;
    if (!(o->eps > 0))
        return bad(R, "attrs.eps must be positive");
    if ((st = set_output(R, 0, X->nd, X->shape, R->P->dtype)) != REMAT_OK)
        return st;
    /* The statistics have one value per row: the shape of x without its
     * last dimension (or with it as 1). */
    for (uint32_t j = 1; j < op->n_out; j++) {
        uint32_t t = remat_op_outputs(R->g, op)[j];
        uint64_t shape[REMAT_KMAXDIM];
        memcpy(shape, X->shape, X->nd * sizeof *shape);
        const remat_tensor *T = &R->g->tensors[t];
        uint32_t nd = X->nd - 1;
        if (T->shape && T->ndim == X->nd && T->shape[X->nd - 1] == 1) {
            shape[nd] = 1;
            nd++;
        }
        if ((st = set_output(R, j, nd, shape, R->P->dtype)) != REMAT_OK)
            return st;
        if (R->a->grad_flows[t])
            return bad(R, "a gradient flows into its statistics output '%.80s'; remat differentiates layer_norm's "
                          "first output only",
                       T->id);
    }
    return REMAT_OK;
}

static remat_status prep_reduction_attr(prep *R, remat__kop *o)
{
    bool found;
    char red[16] = "mean";
    remat_status st = remat_op_attr_string(R->g, R->k, "reduction", red, sizeof red, &found, R->err);
    if (st != REMAT_OK)
        return st;
    if (strcmp(red, "mean") != 0 && strcmp(red, "sum") != 0)
        return bad(R, "attrs.reduction is '%s'; it must be \"mean\" or \"sum\"", red);
    o->sum_reduction = strcmp(red, "sum") == 0;
    return REMAT_OK;
}

static remat_status prep_loss(prep *R)
{
    remat_status st;
    remat__kop *o = &R->P->ops[R->k];
    if ((st = want_inputs(R, 2, 2)) != REMAT_OK || (st = only_single_output(R)) != REMAT_OK ||
        (st = prep_reduction_attr(R, o)) != REMAT_OK)
        return st;
    const remat__layout *A = in_lay(R, 0), *B = in_lay(R, 1);
    char b1[96], b2[96], b3[96];
    if (o->kind == REMAT_KOP_MSE_LOSS) {
        if (A->nd != B->nd || (A->nd && memcmp(A->shape, B->shape, A->nd * sizeof *A->shape) != 0))
            return bad(R, "prediction %s and target %s differ in shape", fmt_shape(A->nd, A->shape, b1, sizeof b1),
                       fmt_shape(B->nd, B->shape, b2, sizeof b2));
    } else {
        if ((st = want_rank(R, 0, 1, "logits")) != REMAT_OK)
            return st;
        if (B->nd != A->nd - 1 || (B->nd && memcmp(A->shape, B->shape, B->nd * sizeof *A->shape) != 0))
            return bad(R, "targets '%.80s' have shape %s; logits %s need targets %s", in_id(R, 1),
                       fmt_shape(B->nd, B->shape, b1, sizeof b1), fmt_shape(A->nd, A->shape, b2, sizeof b2),
                       fmt_shape(A->nd - 1, A->shape, b3, sizeof b3));
        if (A->shape[A->nd - 1] == 0)
            return bad(R, "logits have no classes");
        if (R->a->grad_flows[remat_op_inputs(R->g, &R->g->ops[R->k])[1]])
            return bad(R, "class targets '%.80s' cannot have a gradient", in_id(R, 1));
    }
    return set_output(R, 0, 0, NULL, R->P->dtype);
}

static remat_status prep_sum(prep *R)
{
    remat_status st;
    remat__kop *o = &R->P->ops[R->k];
    if ((st = want_inputs(R, 1, 1)) != REMAT_OK || (st = only_single_output(R)) != REMAT_OK)
        return st;
    const remat__layout *X = in_lay(R, 0);
    int64_t dims[REMAT_KMAXDIM];
    uint32_t n = 0;
    bool found, keep = false;
    if ((st = remat_op_attr_ints(R->g, R->k, "dim", dims, REMAT_KMAXDIM, &n, &found, R->err)) != REMAT_OK ||
        (st = remat_op_attr_bool(R->g, R->k, "keepdim", &keep, &found, R->err)) != REMAT_OK)
        return st;
    memset(o->rmask, 0, sizeof o->rmask);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t d;
        if (!norm_dim(dims[i], X->nd, &d) || o->rmask[d])
            return bad(R, "attrs.dim %lld is not a dimension of '%.80s' (or is repeated)", (long long)dims[i],
                       in_id(R, 0));
        o->rmask[d] = 1;
    }
    if (n == 0) /* no dim: every dimension */
        memset(o->rmask, 1, X->nd);
    uint64_t shape[REMAT_KMAXDIM];
    uint32_t nd = 0;
    o->rcount = 1;
    for (uint32_t d = 0; d < X->nd; d++) {
        if (o->rmask[d])
            o->rcount *= X->shape[d];
        if (!o->rmask[d] || keep)
            shape[nd++] = o->rmask[d] ? 1 : X->shape[d];
    }
    return set_output(R, 0, nd, shape, R->P->dtype);
}

static remat_status prep_view(prep *R)
{
    remat_status st;
    const remat_op *op = &R->g->ops[R->k];
    remat__kop *o = &R->P->ops[R->k];
    if ((st = want_inputs(R, 1, 1)) != REMAT_OK || (st = only_single_output(R)) != REMAT_OK)
        return st;
    uint32_t t = remat_op_outputs(R->g, op)[0];
    const remat_tensor *T = &R->g->tensors[t];
    const remat__layout *X = in_lay(R, 0);
    o->view = T->alias_of != REMAT_NONE;
    uint64_t shape[REMAT_KMAXDIM];
    uint32_t nd = X->nd;
    char b1[96], b2[96];
    if (o->kind == REMAT_KOP_RESHAPE) {
        /* Without a shape, a reshape keeps its input's (mlp2's "view"). */
        if (T->shape) {
            if (T->ndim > REMAT_KMAXDIM)
                return bad(R, "output '%.80s' has %u dimensions; at most %d", T->id, T->ndim, REMAT_KMAXDIM);
            nd = T->ndim;
            memcpy(shape, T->shape, nd * sizeof *shape);
        } else {
            memcpy(shape, X->shape, nd * sizeof *shape);
        }
        if (elements(nd, shape) != X->n)
            return bad(R, "reshapes %s (%llu elements) to %s", fmt_shape(X->nd, X->shape, b1, sizeof b1),
                       (unsigned long long)X->n, fmt_shape(nd, shape, b2, sizeof b2));
        if (o->view && !is_contiguous(X))
            return bad(R, "a reshape view needs a contiguous input, and '%.80s' is a transposed view; make the "
                          "reshape a copy (no alias_of)",
                       in_id(R, 0));
    } else {
        int64_t dims[REMAT_KMAXDIM];
        uint32_t n = 0;
        bool found;
        if ((st = remat_op_attr_ints(R->g, R->k, "dims", dims, REMAT_KMAXDIM, &n, &found, R->err)) != REMAT_OK)
            return st;
        for (uint32_t d = 0; d < nd; d++)
            o->perm[d] = d;
        if (strcmp(op->type, "permute") == 0) {
            uint8_t seen[REMAT_KMAXDIM] = {0};
            if (n != nd)
                return bad(R, "attrs.dims must list all %u dimensions", nd);
            for (uint32_t d = 0; d < nd; d++) {
                uint32_t x;
                if (!norm_dim(dims[d], nd, &x) || seen[x]++)
                    return bad(R, "attrs.dims is not a permutation of the %u dimensions", nd);
                o->perm[d] = x;
            }
        } else {
            if (!found) {
                if (nd < 2)
                    return bad(R, "needs at least 2 dimensions (or attrs.dims)");
                dims[0] = -2;
                dims[1] = -1;
                n = 2;
            }
            uint32_t d0, d1;
            if (n != 2 || !norm_dim(dims[0], nd, &d0) || !norm_dim(dims[1], nd, &d1))
                return bad(R, "attrs.dims must be two dimensions of the input, e.g. [0, 1]");
            o->perm[d0] = d1;
            o->perm[d1] = d0;
        }
        for (uint32_t d = 0; d < nd; d++)
            shape[d] = X->shape[o->perm[d]];
    }
    if ((st = set_output(R, 0, nd, shape, X->elem)) != REMAT_OK)
        return st;
    remat__layout *L = &R->P->lay[t];
    if (o->view) {
        /* A view reads its base's buffer: a reshape of a contiguous input is
         * contiguous; a transpose permutes the input's strides. */
        if (o->kind == REMAT_KOP_TRANSPOSE)
            for (uint32_t d = 0; d < nd; d++)
                L->st[d] = X->st[o->perm[d]];
        return check_bytes(R, t, "view");
    }
    return REMAT_OK;
}

/* ---- what each backward kernel reads -------------------------------------------- */

static int saves_has(const remat_graph *g, const remat_op *op, uint32_t t)
{
    const uint32_t *sv = remat_op_saves(g, op);
    for (uint32_t i = 0; i < op->n_save; i++)
        if (sv[i] == t)
            return 1;
    return 0;
}

static remat_status need(prep *R, uint32_t t, const char *why)
{
    const remat_op *op = &R->g->ops[R->k];
    if (saves_has(R->g, op, t))
        return REMAT_OK;
    return bad(R, "its backward step reads '%.80s' (%s), which its saves do not list", R->g->tensors[t].id, why);
}

static remat_status check_saves(prep *R)
{
    const remat_graph *g = R->g;
    const remat_op *op = &g->ops[R->k];
    remat__kop *o = &R->P->ops[R->k];
    if (R->a->bwd_step[R->k] == REMAT_NONE)
        return REMAT_OK; /* no backward step: it reads nothing */
    const uint32_t *in = remat_op_inputs(g, op), *out = remat_op_outputs(g, op);
    const uint8_t *gf = R->a->grad_flows;
    remat_status st = REMAT_OK;
    switch (o->kind) {
    case REMAT_KOP_LINEAR:
    case REMAT_KOP_MATMUL:
    case REMAT_KOP_MUL:
        if (gf[in[0]])
            st = need(R, in[1], "for the gradient of the first input");
        if (st == REMAT_OK && gf[in[1]])
            st = need(R, in[0], "for the gradient of the second input");
        return st;
    case REMAT_KOP_RELU:
    case REMAT_KOP_TANH:
    case REMAT_KOP_SIGMOID:
        o->from_output = saves_has(g, op, out[0]);
        if (!o->from_output && !saves_has(g, op, in[0]))
            return bad(R, "its backward step reads its output '%.80s' or its input '%.80s', and its saves list "
                          "neither",
                       g->tensors[out[0]].id, g->tensors[in[0]].id);
        return REMAT_OK;
    case REMAT_KOP_GELU: return need(R, in[0], "the input");
    case REMAT_KOP_LAYER_NORM:
        st = need(R, in[0], "to normalize it again");
        if (st == REMAT_OK && op->n_in > 1 && gf[in[0]])
            st = need(R, in[1], "for the gradient of x");
        o->ln_stats = op->n_out == 3 && saves_has(g, op, out[1]) && saves_has(g, op, out[2]);
        return st;
    case REMAT_KOP_SOFTMAX: return need(R, out[0], "its output");
    case REMAT_KOP_CROSS_ENTROPY:
    case REMAT_KOP_MSE_LOSS:
        st = need(R, in[0], o->kind == REMAT_KOP_MSE_LOSS ? "the prediction" : "the logits");
        return st == REMAT_OK ? need(R, in[1], o->kind == REMAT_KOP_MSE_LOSS ? "the target" : "the targets") : st;
    default: return REMAT_OK; /* add, sum, mean, reshape, transpose read no forward tensor */
    }
}

/* ---- the graph ------------------------------------------------------------------- */

static remat_status prep_leaves(prep *R)
{
    const remat_graph *g = R->g;
    remat__kprog *P = R->P;
    uint32_t first_float = REMAT_NONE;
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        const remat_tensor *T = &g->tensors[t];
        if (T->kind == REMAT_TENSOR_ACTIVATION)
            continue;
        const char *kind = remat_tensor_kind_str(T->kind);
        if (!T->shape)
            return remat_err_set(R->err, REMAT_EUNSUPPORTED,
                                 "%s '%.80s' has no shape: executing a graph needs the shape of every input and param",
                                 kind, T->id);
        if (T->ndim > REMAT_KMAXDIM)
            return remat_err_set(R->err, REMAT_EUNSUPPORTED, "%s '%.80s' has %u dimensions; at most %d", kind, T->id,
                                 T->ndim, REMAT_KMAXDIM);
        remat_elem e = remat_elem_parse(T->dtype);
        if (e == REMAT_ELEM_NONE)
            return remat_err_set(R->err, REMAT_EUNSUPPORTED,
                                 "%s '%.80s' has %s%s%s: executable graphs hold f64 or f32 (and i64 or i32 class "
                                 "targets)",
                                 kind, T->id, T->dtype ? "dtype '" : "no dtype", T->dtype ? T->dtype : "",
                                 T->dtype ? "'" : "");
        int is_float = e == REMAT_ELEM_F64 || e == REMAT_ELEM_F32;
        if (!is_float && T->kind == REMAT_TENSOR_PARAM)
            return remat_err_set(R->err, REMAT_EUNSUPPORTED, "param '%.80s' is %s: params must be f64 or f32", T->id,
                                 remat_elem_name(e));
        if (is_float && first_float == REMAT_NONE) {
            first_float = t;
            P->dtype = e;
        } else if (is_float && e != P->dtype) {
            return remat_err_set(R->err, REMAT_EUNSUPPORTED,
                                 "%s '%.80s' is %s but '%.80s' is %s: an executable graph has one float dtype", kind,
                                 T->id, remat_elem_name(e), g->tensors[first_float].id, remat_elem_name(P->dtype));
        }
        remat__layout *L = &P->lay[t];
        L->elem = e;
        L->nd = T->ndim;
        memcpy(L->shape, T->shape, T->ndim * sizeof *T->shape);
        L->n = elements(L->nd, L->shape);
        contiguous(L);
        remat_status st = check_bytes(R, t, kind);
        if (st != REMAT_OK)
            return st;
    }
    if (first_float == REMAT_NONE)
        return remat_err_set(R->err, REMAT_EUNSUPPORTED, "the graph has no f64 or f32 input or param");
    return REMAT_OK;
}

remat_status remat__kprog_prepare(remat__kprog *p, const remat_analysis *a, remat_err *err)
{
    const remat_graph *g = a->g;
    memset(p, 0, sizeof *p);
    p->a = a;
    p->lay = remat__array(g->n_tensors ? g->n_tensors : 1, sizeof *p->lay);
    p->ops = remat__array(g->n_ops ? g->n_ops : 1, sizeof *p->ops);
    if (!p->lay || !p->ops)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory preparing the graph for execution");
    prep R = {p, a, g, err, 0};
    /* First the op types, so that a graph of foreign ops is told so before
     * it is told about shapes. */
    for (uint32_t i = 0; i < g->n_ops; i++) {
        uint32_t k = a->order[i];
        size_t j = 0;
        while (j < N_TYPES && strcmp(op_types[j].name, g->ops[k].type) != 0)
            j++;
        if (j == N_TYPES)
            return remat_err_set(err, REMAT_EUNSUPPORTED,
                                 "op '%.80s' has type '%.40s', which remat cannot execute (executable ops: %s)",
                                 g->ops[k].id, g->ops[k].type, remat__kop_list());
        p->ops[k].kind = op_types[j].kind;
    }
    remat_status st = prep_leaves(&R);
    for (uint32_t i = 0; st == REMAT_OK && i < g->n_ops; i++) {
        R.k = a->order[i];
        const remat_op *op = &g->ops[R.k];
        remat__kop_kind kind = p->ops[R.k].kind;
        const uint32_t *out = remat_op_outputs(g, op);
        int is_view_kind = kind == REMAT_KOP_RESHAPE || kind == REMAT_KOP_TRANSPOSE;
        for (uint32_t j = 0; j < op->n_out && st == REMAT_OK; j++)
            if (g->tensors[out[j]].alias_of != REMAT_NONE && !is_view_kind)
                st = bad(&R, "output '%.80s' is a view (alias_of); only reshape, view, transpose and permute may be "
                             "views",
                         g->tensors[out[j]].id);
        /* No executable op's backward slices its output gradient, and the
         * engine's own gradient buffers (engine.c) are whole. */
        if (st == REMAT_OK && op->grad_views)
            st = bad(&R, "grad_views is set, but this op's executable backward writes whole gradients");
        if (st != REMAT_OK)
            break;
        switch (kind) {
        case REMAT_KOP_LINEAR: st = prep_matmul(&R, 1); break;
        case REMAT_KOP_MATMUL: st = prep_matmul(&R, 0); break;
        case REMAT_KOP_ADD:
        case REMAT_KOP_MUL: st = prep_binary(&R); break;
        case REMAT_KOP_RELU:
        case REMAT_KOP_GELU:
        case REMAT_KOP_TANH:
        case REMAT_KOP_SIGMOID:
        case REMAT_KOP_SOFTMAX: st = prep_unary(&R); break;
        case REMAT_KOP_LAYER_NORM: st = prep_layer_norm(&R); break;
        case REMAT_KOP_CROSS_ENTROPY:
        case REMAT_KOP_MSE_LOSS: st = prep_loss(&R); break;
        case REMAT_KOP_SUM:
        case REMAT_KOP_MEAN: st = prep_sum(&R); break;
        case REMAT_KOP_RESHAPE:
        case REMAT_KOP_TRANSPOSE: st = prep_view(&R); break;
        default: st = bad(&R, "internal: no preparation"); break;
        }
        if (st == REMAT_OK)
            st = check_saves(&R);
    }
    if (st != REMAT_OK)
        return st;
    if (g->n_outputs != 1)
        return remat_err_set(err, REMAT_EUNSUPPORTED,
                             "the graph has %u outputs; a training step needs exactly one, the loss", g->n_outputs);
    const remat__layout *L = &p->lay[g->outputs[0]];
    if (L->n != 1)
        return remat_err_set(err, REMAT_EUNSUPPORTED, "the loss '%.80s' has %llu elements; it must be a scalar",
                             g->tensors[g->outputs[0]].id, (unsigned long long)L->n);
    if (g->tensors[g->outputs[0]].kind != REMAT_TENSOR_ACTIVATION)
        return remat_err_set(err, REMAT_EUNSUPPORTED, "the loss '%.80s' is not computed by an op",
                             g->tensors[g->outputs[0]].id);
    return REMAT_OK;
}

void remat__kprog_destroy(remat__kprog *p)
{
    if (!p)
        return;
    remat__free(p->lay);
    remat__free(p->ops);
    memset(p, 0, sizeof *p);
}

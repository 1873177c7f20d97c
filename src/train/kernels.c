/*
 * kernels.c - forward and backward kernels of the executable op set.
 *
 * Every kernel reads its inputs through their layouts (kernels.h: strides
 * into the storage buffer, so a transposed view is read in place) and
 * writes contiguous outputs and gradients. Arithmetic is binary64 with one
 * rounding per stored value, and every loop has a fixed order, so running
 * an op twice on the same bytes gives the same bytes: that is what makes a
 * recomputation bit-identical and a run's result independent of the plan.
 *
 * A gradient contribution is computed whole and then written (mark 2, the
 * first contribution) or added (mark 1) element by element; an operand that
 * was broadcast has its contribution summed over the broadcast dimensions
 * first (reduce_into). Kernels need no scratch memory: the engine's
 * allocator, which must match the accounting, sees every buffer there is.
 * The formulas are in graphs/README.md ("Executable ops").
 */
#include "kernels.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define MAXD REMAT_KMAXDIM
#define LD remat__ld
#define ST remat__st

static const double SQRT1_2 = 0.70710678118654752440;    /* 1/sqrt(2) */
static const double INV_SQRT_2PI = 0.39894228040143267794; /* 1/sqrt(2 pi) */
static const double SQRT_2_OVER_PI = 0.79788456080286535588;

static inline void put(uint8_t *p, int f32, int64_t i, double v, int add)
{
    ST(p, f32, i, add ? LD(p, f32, i) + v : v);
}

/* The gradient mode of input t: 0 none, 2 write, 1 add; later
 * contributions of the same op to t add. */
static int take(remat__engine *E, uint32_t t)
{
    int m = E->mark[t];
    if (m == 2)
        E->mark[t] = 1;
    return m;
}

static uint8_t *data_of(const remat__engine *E, uint32_t t)
{
    return E->buf[E->g->tensors[t].storage];
}

/* ---- iteration ---------------------------------------------------------------- */

/* An odometer over a shape carrying up to three offsets, each with its own
 * strides: O(1) amortized per step. */
typedef struct {
    uint32_t nd;
    uint64_t shape[MAXD], idx[MAXD];
    int64_t st[3][MAXD];
    int64_t off[3];
} odo;

static void odo_init(odo *o, uint32_t nd, const uint64_t *shape)
{
    memset(o, 0, sizeof *o);
    o->nd = nd;
    memcpy(o->shape, shape, nd * sizeof *shape);
}

static inline void odo_next(odo *o)
{
    for (uint32_t d = o->nd; d-- > 0;) {
        o->off[0] += o->st[0][d];
        o->off[1] += o->st[1][d];
        o->off[2] += o->st[2][d];
        if (++o->idx[d] < o->shape[d])
            return;
        o->off[0] -= o->st[0][d] * (int64_t)o->shape[d];
        o->off[1] -= o->st[1][d] * (int64_t)o->shape[d];
        o->off[2] -= o->st[2][d] * (int64_t)o->shape[d];
        o->idx[d] = 0;
    }
}

static void contig(uint32_t nd, const uint64_t *shape, int64_t *st)
{
    int64_t s = 1;
    for (uint32_t d = nd; d-- > 0;) {
        st[d] = s;
        s *= (int64_t)shape[d];
    }
}

/* Strides lst of an lnd-dim operand aligned to an nd-dim result (numpy
 * broadcasting: missing and size-1 dimensions read stride 0). */
static void align(uint32_t nd, const uint64_t *shape, uint32_t lnd, const uint64_t *lshape, const int64_t *lst,
                  int64_t *out)
{
    for (uint32_t d = 0; d < nd; d++) {
        int ld = (int)d - (int)(nd - lnd);
        out[d] = ld < 0 || (lshape[ld] == 1 && shape[d] != 1) ? 0 : lst[ld];
    }
}

/* Offset of "row" r of L: r decomposed over L's first `lead` dimensions. */
static int64_t lead_off(const remat__layout *L, uint32_t lead, uint64_t r)
{
    int64_t off = 0;
    for (uint32_t d = lead; d-- > 0;) {
        off += (int64_t)(r % L->shape[d]) * L->st[d];
        r /= L->shape[d];
    }
    return off;
}

static uint64_t rows_of(const remat__layout *L)
{
    uint64_t r = 1;
    for (uint32_t d = 0; d + 1 < L->nd; d++)
        r *= L->shape[d];
    return r;
}

/* tgt[j] (written, or added to when add) = (sum over every i of `shape`
 * that maps to j of s1[i] * s2[i]) / div. st_t are tgt's strides aligned
 * to shape, 0 on the dimensions summed over; s2 may be NULL (1). The
 * summed dimensions are iterated innermost, so each target element's sum
 * is complete before it is stored, in a fixed order. n_t: tgt's elements. */
static void reduce_into(int f32, uint32_t nd, const uint64_t *shape, uint8_t *tgt, const int64_t *st_t, uint64_t n_t,
                        int add, const uint8_t *s1, const int64_t *st_1, const uint8_t *s2, const int64_t *st_2,
                        double div)
{
    uint32_t ord[MAXD], n = 0;
    uint64_t inner = 1, total = 1;
    for (uint32_t d = 0; d < nd; d++)
        if (st_t[d] != 0 || shape[d] == 1)
            ord[n++] = d;
    for (uint32_t d = 0; d < nd; d++)
        if (!(st_t[d] != 0 || shape[d] == 1)) {
            ord[n++] = d;
            inner *= shape[d];
        }
    odo o;
    memset(&o, 0, sizeof o);
    o.nd = nd;
    for (uint32_t i = 0; i < nd; i++) {
        o.shape[i] = shape[ord[i]];
        total *= shape[ord[i]];
        o.st[0][i] = st_t[ord[i]];
        o.st[1][i] = st_1[ord[i]];
        o.st[2][i] = s2 ? st_2[ord[i]] : 0;
    }
    if (total == 0) {
        /* Nothing to sum: a written target is zero. */
        for (uint64_t j = 0; j < n_t && !add; j++)
            ST(tgt, f32, (int64_t)j, 0.0);
        return;
    }
    for (uint64_t gi = 0; gi < total / inner; gi++) {
        int64_t tj = o.off[0];
        double s = 0;
        for (uint64_t r = 0; r < inner; r++) {
            double v = LD(s1, f32, o.off[1]);
            if (s2)
                v *= LD(s2, f32, o.off[2]);
            s += v;
            odo_next(&o);
        }
        put(tgt, f32, tj, div == 1 ? s : s / div, add);
    }
}

/* ---- matmul and linear ------------------------------------------------------- */

typedef struct {
    uint64_t nb, M, K, N;
    int64_t sam, sak, sbk, sbn;
} mm_dims;

static mm_dims dims_of(const remat__layout *A, const remat__layout *B, const remat__layout *O)
{
    mm_dims d;
    d.M = O->shape[O->nd - 2];
    d.N = O->shape[O->nd - 1];
    d.K = A->shape[A->nd - 1];
    d.nb = 1;
    for (uint32_t i = 0; i + 2 < O->nd; i++)
        d.nb *= O->shape[i];
    d.sam = A->st[A->nd - 2];
    d.sak = A->st[A->nd - 1];
    d.sbk = B->st[B->nd - 2];
    d.sbn = B->st[B->nd - 1];
    return d;
}

/* A 2-D operand is shared by every batch: its batch offset is 0. */
static int64_t batch_off(const remat__layout *L, uint64_t b)
{
    return L->nd > 2 ? lead_off(L, L->nd - 2, b) : 0;
}

static void mm_forward(int f32, const uint8_t *a, const remat__layout *A, const uint8_t *b, const remat__layout *B,
                       const uint8_t *bias, const remat__layout *Lb, uint8_t *c, const remat__layout *O)
{
    mm_dims d = dims_of(A, B, O);
    for (uint64_t bi = 0; bi < d.nb; bi++) {
        int64_t oa = batch_off(A, bi), ob = batch_off(B, bi);
        for (uint64_t m = 0; m < d.M; m++)
            for (uint64_t n = 0; n < d.N; n++) {
                double s = 0;
                for (uint64_t k = 0; k < d.K; k++)
                    s += LD(a, f32, oa + (int64_t)m * d.sam + (int64_t)k * d.sak) *
                         LD(b, f32, ob + (int64_t)k * d.sbk + (int64_t)n * d.sbn);
                if (bias)
                    s += LD(bias, f32, (int64_t)n * Lb->st[0]);
                ST(c, f32, (int64_t)((bi * d.M + m) * d.N + n), s);
            }
    }
}

/* dA = dC B^T, summed over the batches when A is shared. */
static void mm_grad_a(int f32, const uint8_t *dc, const uint8_t *b, const remat__layout *A, const remat__layout *B,
                      const remat__layout *O, uint8_t *da, int add)
{
    mm_dims d = dims_of(A, B, O);
    int shared = A->nd == 2 && d.nb > 1;
    uint64_t nb_out = shared ? 1 : d.nb, nb_in = shared ? d.nb : 1;
    for (uint64_t bo = 0; bo < nb_out; bo++)
        for (uint64_t m = 0; m < d.M; m++)
            for (uint64_t k = 0; k < d.K; k++) {
                double s = 0;
                for (uint64_t bj = 0; bj < nb_in; bj++) {
                    uint64_t bi = shared ? bj : bo;
                    int64_t ob = batch_off(B, bi);
                    for (uint64_t n = 0; n < d.N; n++)
                        s += LD(dc, f32, (int64_t)((bi * d.M + m) * d.N + n)) *
                             LD(b, f32, ob + (int64_t)k * d.sbk + (int64_t)n * d.sbn);
                }
                put(da, f32, (int64_t)((bo * d.M + m) * d.K + k), s, add);
            }
}

/* dB = A^T dC, summed over the batches when B is shared. */
static void mm_grad_b(int f32, const uint8_t *dc, const uint8_t *a, const remat__layout *A, const remat__layout *B,
                      const remat__layout *O, uint8_t *db, int add)
{
    mm_dims d = dims_of(A, B, O);
    int shared = B->nd == 2 && d.nb > 1;
    uint64_t nb_out = shared ? 1 : d.nb, nb_in = shared ? d.nb : 1;
    for (uint64_t bo = 0; bo < nb_out; bo++)
        for (uint64_t k = 0; k < d.K; k++)
            for (uint64_t n = 0; n < d.N; n++) {
                double s = 0;
                for (uint64_t bj = 0; bj < nb_in; bj++) {
                    uint64_t bi = shared ? bj : bo;
                    int64_t oa = batch_off(A, bi);
                    for (uint64_t m = 0; m < d.M; m++)
                        s += LD(a, f32, oa + (int64_t)m * d.sam + (int64_t)k * d.sak) *
                             LD(dc, f32, (int64_t)((bi * d.M + m) * d.N + n));
                }
                put(db, f32, (int64_t)((bo * d.K + k) * d.N + n), s, add);
            }
}

/* ---- elementwise ---------------------------------------------------------------- */

static double unary_f(remat__kop_kind kind, int gelu_tanh, double v)
{
    switch (kind) {
    case REMAT_KOP_RELU: return v > 0 ? v : 0.0;
    case REMAT_KOP_TANH: return tanh(v);
    case REMAT_KOP_SIGMOID: return 1.0 / (1.0 + exp(-v));
    default: /* gelu */
        if (gelu_tanh)
            return 0.5 * v * (1.0 + tanh(SQRT_2_OVER_PI * (v + 0.044715 * v * v * v)));
        return 0.5 * v * (1.0 + erf(v * SQRT1_2));
    }
}

/* f'(x) from the value the backward reads: the output y when from_output
 * (relu, tanh, sigmoid), else the input x. */
static double unary_df(remat__kop_kind kind, int gelu_tanh, int from_output, double v)
{
    switch (kind) {
    case REMAT_KOP_RELU: return v > 0 ? 1.0 : 0.0;
    case REMAT_KOP_TANH: {
        double t = from_output ? v : tanh(v);
        return 1.0 - t * t;
    }
    case REMAT_KOP_SIGMOID: {
        double s = from_output ? v : 1.0 / (1.0 + exp(-v));
        return s * (1.0 - s);
    }
    default:
        if (gelu_tanh) {
            double u = SQRT_2_OVER_PI * (v + 0.044715 * v * v * v), th = tanh(u);
            return 0.5 * (1.0 + th) + 0.5 * v * (1.0 - th * th) * SQRT_2_OVER_PI * (1.0 + 3.0 * 0.044715 * v * v);
        }
        return 0.5 * (1.0 + erf(v * SQRT1_2)) + v * exp(-0.5 * v * v) * INV_SQRT_2PI;
    }
}

static void unary_forward(const remat__kop *o, int f32, const uint8_t *x, const remat__layout *X, uint8_t *y)
{
    odo it;
    odo_init(&it, X->nd, X->shape);
    memcpy(it.st[0], X->st, X->nd * sizeof *X->st);
    for (uint64_t i = 0; i < X->n; i++, odo_next(&it))
        ST(y, f32, (int64_t)i, unary_f(o->kind, o->gelu_tanh, LD(x, f32, it.off[0])));
}

static void unary_backward(const remat__kop *o, int f32, const uint8_t *dy, const uint8_t *src,
                           const remat__layout *S, uint8_t *dx, int add)
{
    odo it;
    odo_init(&it, S->nd, S->shape);
    memcpy(it.st[0], S->st, S->nd * sizeof *S->st);
    for (uint64_t i = 0; i < S->n; i++, odo_next(&it)) {
        double d = LD(dy, f32, (int64_t)i);
        double v = LD(src, f32, it.off[0]);
        double r = o->kind == REMAT_KOP_RELU ? (v > 0 ? d : 0.0) : d * unary_df(o->kind, o->gelu_tanh, o->from_output, v);
        put(dx, f32, (int64_t)i, r, add);
    }
}

static void binary_forward(int mul, int f32, const uint8_t *a, const remat__layout *A, const uint8_t *b,
                           const remat__layout *B, uint8_t *y, const remat__layout *O)
{
    odo it;
    odo_init(&it, O->nd, O->shape);
    align(O->nd, O->shape, A->nd, A->shape, A->st, it.st[0]);
    align(O->nd, O->shape, B->nd, B->shape, B->st, it.st[1]);
    for (uint64_t i = 0; i < O->n; i++, odo_next(&it)) {
        double x = LD(a, f32, it.off[0]), z = LD(b, f32, it.off[1]);
        ST(y, f32, (int64_t)i, mul ? x * z : x + z);
    }
}

/* The gradient of operand T (layout L) of an add or a mul: dy (times the
 * other operand for a mul), summed over the dimensions T was broadcast on. */
static void binary_grad(int f32, const uint8_t *dy, const remat__layout *O, const remat__layout *L, uint8_t *g,
                        int add, const uint8_t *other, const remat__layout *Lo)
{
    int64_t cst[MAXD], st_t[MAXD], st_dy[MAXD], st_o[MAXD];
    contig(L->nd, L->shape, cst);
    align(O->nd, O->shape, L->nd, L->shape, cst, st_t);
    contig(O->nd, O->shape, st_dy);
    if (other)
        align(O->nd, O->shape, Lo->nd, Lo->shape, Lo->st, st_o);
    reduce_into(f32, O->nd, O->shape, g, st_t, L->n, add, dy, st_dy, other, st_o, 1);
}

/* ---- reductions ---------------------------------------------------------------- */

/* The output's strides aligned to the input's dimensions (0 on reduced). */
static void sum_out_strides(const remat__kop *o, const remat__layout *X, int64_t *st)
{
    int64_t s = 1;
    for (uint32_t d = X->nd; d-- > 0;) {
        st[d] = o->rmask[d] ? 0 : s;
        if (!o->rmask[d])
            s *= (int64_t)X->shape[d];
    }
}

static void sum_forward(const remat__kop *o, int f32, const uint8_t *x, const remat__layout *X, uint8_t *y,
                        const remat__layout *Y)
{
    int64_t st_y[MAXD];
    sum_out_strides(o, X, st_y);
    reduce_into(f32, X->nd, X->shape, y, st_y, Y->n, 0, x, X->st, NULL, NULL,
                o->kind == REMAT_KOP_MEAN ? (double)o->rcount : 1);
}

static void sum_backward(const remat__kop *o, int f32, const uint8_t *dy, const remat__layout *X, uint8_t *dx,
                         int add)
{
    odo it;
    odo_init(&it, X->nd, X->shape);
    sum_out_strides(o, X, it.st[0]);
    for (uint64_t i = 0; i < X->n; i++, odo_next(&it)) {
        double v = LD(dy, f32, it.off[0]);
        put(dx, f32, (int64_t)i, o->kind == REMAT_KOP_MEAN ? v / (double)o->rcount : v, add);
    }
}

/* ---- rows: layer norm, softmax, cross-entropy ------------------------------------- */

static double round_to(int f32, double v)
{
    return f32 ? (double)(float)v : v;
}

/* Mean and 1/sqrt(var + eps) of one row, rounded to the storage type, so
 * that statistics recomputed in the backward equal the saved ones. */
static void ln_stats(int f32, const uint8_t *x, int64_t base, int64_t sd, uint64_t D, double eps, double *mean,
                     double *rstd)
{
    double s = 0, v = 0;
    for (uint64_t j = 0; j < D; j++)
        s += LD(x, f32, base + (int64_t)j * sd);
    double m = round_to(f32, s / (double)D);
    for (uint64_t j = 0; j < D; j++) {
        double c = LD(x, f32, base + (int64_t)j * sd) - m;
        v += c * c;
    }
    *mean = m;
    *rstd = round_to(f32, 1.0 / sqrt(v / (double)D + eps));
}

typedef struct {
    const uint8_t *p;
    int64_t st;
} vec;

static void ln_forward(const remat__kop *o, int f32, const uint8_t *x, const remat__layout *X, vec gamma, vec beta,
                       uint8_t *y, uint8_t *mean_out, uint8_t *rstd_out)
{
    uint64_t R = rows_of(X), D = X->shape[X->nd - 1];
    int64_t sd = X->st[X->nd - 1];
    for (uint64_t r = 0; r < R; r++) {
        int64_t base = lead_off(X, X->nd - 1, r);
        double m, rs;
        ln_stats(f32, x, base, sd, D, o->eps, &m, &rs);
        if (mean_out)
            ST(mean_out, f32, (int64_t)r, m);
        if (rstd_out)
            ST(rstd_out, f32, (int64_t)r, rs);
        for (uint64_t j = 0; y && j < D; j++) {
            double v = (LD(x, f32, base + (int64_t)j * sd) - m) * rs;
            if (gamma.p)
                v *= LD(gamma.p, f32, (int64_t)j * gamma.st);
            if (beta.p)
                v += LD(beta.p, f32, (int64_t)j * beta.st);
            ST(y, f32, (int64_t)(r * D + j), v);
        }
    }
}

static void ln_backward(const remat__kop *o, int f32, const uint8_t *dy, const uint8_t *x, const remat__layout *X,
                        vec gamma, const uint8_t *mean_in, const uint8_t *rstd_in, uint8_t *dx, int mx, uint8_t *dg,
                        int mg, uint8_t *db, int mb)
{
    uint64_t R = rows_of(X), D = X->shape[X->nd - 1];
    int64_t sd = X->st[X->nd - 1];
    for (uint64_t r = 0; r < R; r++) {
        int64_t base = lead_off(X, X->nd - 1, r);
        double m, rs;
        if (mean_in) {
            m = LD(mean_in, f32, (int64_t)r);
            rs = LD(rstd_in, f32, (int64_t)r);
        } else {
            ln_stats(f32, x, base, sd, D, o->eps, &m, &rs);
        }
        const int64_t row = (int64_t)(r * D);
        if (mx) {
            double c1 = 0, c2 = 0;
            for (uint64_t j = 0; j < D; j++) {
                double xh = (LD(x, f32, base + (int64_t)j * sd) - m) * rs;
                double gj = LD(dy, f32, row + (int64_t)j);
                if (gamma.p)
                    gj *= LD(gamma.p, f32, (int64_t)j * gamma.st);
                c1 += gj;
                c2 += gj * xh;
            }
            c1 /= (double)D;
            c2 /= (double)D;
            for (uint64_t j = 0; j < D; j++) {
                double xh = (LD(x, f32, base + (int64_t)j * sd) - m) * rs;
                double gj = LD(dy, f32, row + (int64_t)j);
                if (gamma.p)
                    gj *= LD(gamma.p, f32, (int64_t)j * gamma.st);
                put(dx, f32, row + (int64_t)j, rs * (gj - c1 - xh * c2), mx == 1);
            }
        }
        /* Weight and bias gradients accumulate row by row, in row order. */
        for (uint64_t j = 0; j < D && (mg || mb); j++) {
            double d = LD(dy, f32, row + (int64_t)j);
            if (mg)
                put(dg, f32, (int64_t)j, d * ((LD(x, f32, base + (int64_t)j * sd) - m) * rs), r > 0 || mg == 1);
            if (mb)
                put(db, f32, (int64_t)j, d, r > 0 || mb == 1);
        }
    }
    for (uint64_t j = 0; R == 0 && j < D; j++) {
        if (mg == 2)
            ST(dg, f32, (int64_t)j, 0.0);
        if (mb == 2)
            ST(db, f32, (int64_t)j, 0.0);
    }
}

static void softmax_forward(int f32, const uint8_t *x, const remat__layout *X, uint8_t *y)
{
    uint64_t R = rows_of(X), D = X->shape[X->nd - 1];
    int64_t sd = X->st[X->nd - 1];
    for (uint64_t r = 0; r < R; r++) {
        int64_t base = lead_off(X, X->nd - 1, r);
        double mx = -INFINITY, s = 0;
        for (uint64_t j = 0; j < D; j++) {
            double v = LD(x, f32, base + (int64_t)j * sd);
            mx = v > mx ? v : mx;
        }
        for (uint64_t j = 0; j < D; j++)
            s += exp(LD(x, f32, base + (int64_t)j * sd) - mx);
        for (uint64_t j = 0; j < D; j++)
            ST(y, f32, (int64_t)(r * D + j), exp(LD(x, f32, base + (int64_t)j * sd) - mx) / s);
    }
}

static void softmax_backward(int f32, const uint8_t *dy, const uint8_t *y, const remat__layout *Y, uint8_t *dx,
                             int add)
{
    uint64_t R = rows_of(Y), D = Y->shape[Y->nd - 1];
    int64_t sd = Y->st[Y->nd - 1];
    for (uint64_t r = 0; r < R; r++) {
        int64_t base = lead_off(Y, Y->nd - 1, r), row = (int64_t)(r * D);
        double dot = 0;
        for (uint64_t j = 0; j < D; j++)
            dot += LD(dy, f32, row + (int64_t)j) * LD(y, f32, base + (int64_t)j * sd);
        for (uint64_t j = 0; j < D; j++) {
            double yj = LD(y, f32, base + (int64_t)j * sd);
            put(dx, f32, row + (int64_t)j, yj * (LD(dy, f32, row + (int64_t)j) - dot), add);
        }
    }
}

/* log(sum(exp(row))), stable. */
static double row_lse(int f32, const uint8_t *x, int64_t base, int64_t sd, uint64_t D)
{
    double mx = -INFINITY, s = 0;
    for (uint64_t j = 0; j < D; j++) {
        double v = LD(x, f32, base + (int64_t)j * sd);
        mx = v > mx ? v : mx;
    }
    for (uint64_t j = 0; j < D; j++)
        s += exp(LD(x, f32, base + (int64_t)j * sd) - mx);
    return mx + log(s);
}

static remat_status target_of(remat__engine *E, uint32_t k, const uint8_t *tp, const remat__layout *T, uint64_t r,
                              uint64_t C, uint64_t *out)
{
    int64_t off = lead_off(T, T->nd, r), v;
    if (T->elem == REMAT_ELEM_I64)
        v = ((const int64_t *)(const void *)tp)[off];
    else
        v = ((const int32_t *)(const void *)tp)[off];
    if (v < 0 || (uint64_t)v >= C) {
        const remat_op *op = &E->g->ops[k];
        return remat_err_set(E->err, REMAT_EPARSE,
                             "op '%.80s' (cross_entropy): target %lld in row %llu of '%.80s' is not a class in [0, %llu)",
                             op->id, (long long)v, (unsigned long long)r,
                             E->g->tensors[remat_op_inputs(E->g, op)[1]].id, (unsigned long long)C);
    }
    *out = (uint64_t)v;
    return REMAT_OK;
}

/* ---- dispatch ---------------------------------------------------------------------- */

remat_status remat__kernel_forward(const remat__kprog *P, remat__engine *E, uint32_t k)
{
    const remat_graph *g = E->g;
    const remat_op *op = &g->ops[k];
    const remat__kop *o = &P->ops[k];
    const uint32_t *in = remat_op_inputs(g, op), *out = remat_op_outputs(g, op);
    const int f32 = P->dtype == REMAT_ELEM_F32;
    const remat__layout *L0 = &P->lay[in[0]], *O = &P->lay[out[0]];
    const uint8_t *x0 = data_of(E, in[0]);
    uint8_t *y = E->mark[out[0]] ? E->buf[out[0]] : NULL;
    switch (o->kind) {
    case REMAT_KOP_LINEAR:
    case REMAT_KOP_MATMUL: {
        const uint8_t *bias = op->n_in > 2 ? data_of(E, in[2]) : NULL;
        mm_forward(f32, x0, L0, data_of(E, in[1]), &P->lay[in[1]], bias, bias ? &P->lay[in[2]] : NULL, y, O);
        return REMAT_OK;
    }
    case REMAT_KOP_ADD:
    case REMAT_KOP_MUL:
        binary_forward(o->kind == REMAT_KOP_MUL, f32, x0, L0, data_of(E, in[1]), &P->lay[in[1]], y, O);
        return REMAT_OK;
    case REMAT_KOP_RELU:
    case REMAT_KOP_GELU:
    case REMAT_KOP_TANH:
    case REMAT_KOP_SIGMOID: unary_forward(o, f32, x0, L0, y); return REMAT_OK;
    case REMAT_KOP_SOFTMAX: softmax_forward(f32, x0, L0, y); return REMAT_OK;
    case REMAT_KOP_LAYER_NORM: {
        vec gamma = {NULL, 0}, beta = {NULL, 0};
        if (op->n_in > 1)
            gamma = (vec){data_of(E, in[1]), P->lay[in[1]].st[0]};
        if (op->n_in > 2)
            beta = (vec){data_of(E, in[2]), P->lay[in[2]].st[0]};
        uint8_t *mean = op->n_out == 3 && E->mark[out[1]] ? E->buf[out[1]] : NULL;
        uint8_t *rstd = op->n_out == 3 && E->mark[out[2]] ? E->buf[out[2]] : NULL;
        ln_forward(o, f32, x0, L0, gamma, beta, y, mean, rstd);
        return REMAT_OK;
    }
    case REMAT_KOP_CROSS_ENTROPY: {
        const remat__layout *T = &P->lay[in[1]];
        uint64_t R = rows_of(L0), C = L0->shape[L0->nd - 1];
        int64_t sd = L0->st[L0->nd - 1];
        double total = 0;
        for (uint64_t r = 0; r < R; r++) {
            uint64_t c;
            remat_status st = target_of(E, k, data_of(E, in[1]), T, r, C, &c);
            if (st != REMAT_OK)
                return st;
            int64_t base = lead_off(L0, L0->nd - 1, r);
            total += row_lse(f32, x0, base, sd, C) - LD(x0, f32, base + (int64_t)c * sd);
        }
        ST(y, f32, 0, o->sum_reduction ? total : total / (double)R);
        return REMAT_OK;
    }
    case REMAT_KOP_MSE_LOSS: {
        const remat__layout *B = &P->lay[in[1]];
        odo it;
        odo_init(&it, L0->nd, L0->shape);
        memcpy(it.st[0], L0->st, L0->nd * sizeof *L0->st);
        memcpy(it.st[1], B->st, B->nd * sizeof *B->st);
        const uint8_t *x1 = data_of(E, in[1]);
        double total = 0;
        for (uint64_t i = 0; i < L0->n; i++, odo_next(&it)) {
            double d = LD(x0, f32, it.off[0]) - LD(x1, f32, it.off[1]);
            total += d * d;
        }
        ST(y, f32, 0, o->sum_reduction ? total : total / (double)L0->n);
        return REMAT_OK;
    }
    case REMAT_KOP_SUM:
    case REMAT_KOP_MEAN: sum_forward(o, f32, x0, L0, y, O); return REMAT_OK;
    case REMAT_KOP_RESHAPE:
    case REMAT_KOP_TRANSPOSE: {
        if (o->view)
            return REMAT_OK; /* a view's bytes are its base's */
        odo it;
        odo_init(&it, O->nd, O->shape);
        if (o->kind == REMAT_KOP_RESHAPE) {
            /* Row-major order of the input is the output's order. */
            odo_init(&it, L0->nd, L0->shape);
            memcpy(it.st[0], L0->st, L0->nd * sizeof *L0->st);
        } else {
            for (uint32_t d = 0; d < O->nd; d++)
                it.st[0][d] = L0->st[o->perm[d]];
        }
        for (uint64_t i = 0; i < O->n; i++, odo_next(&it))
            ST(y, f32, (int64_t)i, LD(x0, f32, it.off[0]));
        return REMAT_OK;
    }
    default: return remat__engine_broken(E, "no forward kernel for op '%s'", op->id);
    }
}

remat_status remat__kernel_backward(const remat__kprog *P, remat__engine *E, uint32_t k)
{
    const remat_graph *g = E->g;
    const remat_op *op = &g->ops[k];
    const remat__kop *o = &P->ops[k];
    const uint32_t *in = remat_op_inputs(g, op), *out = remat_op_outputs(g, op);
    const int f32 = P->dtype == REMAT_ELEM_F32;
    const remat__layout *L0 = &P->lay[in[0]], *O = &P->lay[out[0]];
    const uint8_t *dy = E->grad[out[0]];
    if (!dy)
        return remat__engine_broken(E, "the gradient of '%s' is missing", g->tensors[out[0]].id);
    int m;
    switch (o->kind) {
    case REMAT_KOP_LINEAR:
    case REMAT_KOP_MATMUL: {
        const remat__layout *L1 = &P->lay[in[1]];
        if ((m = take(E, in[0])) != 0)
            mm_grad_a(f32, dy, data_of(E, in[1]), L0, L1, O, E->grad[in[0]], m == 1);
        if ((m = take(E, in[1])) != 0)
            mm_grad_b(f32, dy, data_of(E, in[0]), L0, L1, O, E->grad[in[1]], m == 1);
        if (op->n_in > 2 && (m = take(E, in[2])) != 0) {
            int64_t st_b[MAXD], st_dy[MAXD];
            memset(st_b, 0, sizeof st_b);
            st_b[O->nd - 1] = 1;
            contig(O->nd, O->shape, st_dy);
            reduce_into(f32, O->nd, O->shape, E->grad[in[2]], st_b, P->lay[in[2]].n, m == 1, dy, st_dy, NULL, NULL,
                        1);
        }
        return REMAT_OK;
    }
    case REMAT_KOP_ADD:
    case REMAT_KOP_MUL: {
        int mul = o->kind == REMAT_KOP_MUL;
        for (int s = 0; s < 2; s++)
            if ((m = take(E, in[s])) != 0)
                binary_grad(f32, dy, O, &P->lay[in[s]], E->grad[in[s]], m == 1, mul ? data_of(E, in[1 - s]) : NULL,
                            &P->lay[in[1 - s]]);
        return REMAT_OK;
    }
    case REMAT_KOP_RELU:
    case REMAT_KOP_GELU:
    case REMAT_KOP_TANH:
    case REMAT_KOP_SIGMOID:
        if ((m = take(E, in[0])) != 0) {
            uint32_t src = o->from_output ? out[0] : in[0];
            unary_backward(o, f32, dy, data_of(E, src), &P->lay[src], E->grad[in[0]], m == 1);
        }
        return REMAT_OK;
    case REMAT_KOP_SOFTMAX:
        if ((m = take(E, in[0])) != 0)
            softmax_backward(f32, dy, data_of(E, out[0]), O, E->grad[in[0]], m == 1);
        return REMAT_OK;
    case REMAT_KOP_LAYER_NORM: {
        vec gamma = {NULL, 0};
        if (op->n_in > 1)
            gamma = (vec){data_of(E, in[1]), P->lay[in[1]].st[0]};
        int mx = take(E, in[0]);
        int mg = op->n_in > 1 ? take(E, in[1]) : 0;
        int mb = op->n_in > 2 ? take(E, in[2]) : 0;
        const uint8_t *mean = o->ln_stats ? data_of(E, out[1]) : NULL, *rstd = o->ln_stats ? data_of(E, out[2]) : NULL;
        ln_backward(o, f32, dy, data_of(E, in[0]), L0, gamma, mean, rstd, E->grad[in[0]], mx,
                    mg ? E->grad[in[1]] : NULL, mg, mb ? E->grad[in[2]] : NULL, mb);
        return REMAT_OK;
    }
    case REMAT_KOP_CROSS_ENTROPY: {
        if ((m = take(E, in[0])) == 0)
            return REMAT_OK;
        const remat__layout *T = &P->lay[in[1]];
        const uint8_t *x = data_of(E, in[0]);
        uint64_t R = rows_of(L0), C = L0->shape[L0->nd - 1];
        int64_t sd = L0->st[L0->nd - 1];
        double scale = LD(dy, f32, 0) / (o->sum_reduction ? 1.0 : (double)R);
        for (uint64_t r = 0; r < R; r++) {
            uint64_t c;
            remat_status st = target_of(E, k, data_of(E, in[1]), T, r, C, &c);
            if (st != REMAT_OK)
                return st;
            int64_t base = lead_off(L0, L0->nd - 1, r);
            double lse = row_lse(f32, x, base, sd, C);
            for (uint64_t j = 0; j < C; j++) {
                double p = exp(LD(x, f32, base + (int64_t)j * sd) - lse) - (j == c ? 1.0 : 0.0);
                put(E->grad[in[0]], f32, (int64_t)(r * C + j), scale * p, m == 1);
            }
        }
        return REMAT_OK;
    }
    case REMAT_KOP_MSE_LOSS: {
        const remat__layout *B = &P->lay[in[1]];
        const uint8_t *x0 = data_of(E, in[0]), *x1 = data_of(E, in[1]);
        double c = 2.0 * LD(dy, f32, 0) / (o->sum_reduction ? 1.0 : (double)L0->n);
        for (int s = 0; s < 2; s++) {
            if ((m = take(E, in[s])) == 0)
                continue;
            odo it;
            odo_init(&it, L0->nd, L0->shape);
            memcpy(it.st[0], L0->st, L0->nd * sizeof *L0->st);
            memcpy(it.st[1], B->st, B->nd * sizeof *B->st);
            for (uint64_t i = 0; i < L0->n; i++, odo_next(&it)) {
                double v = c * (LD(x0, f32, it.off[0]) - LD(x1, f32, it.off[1]));
                put(E->grad[in[s]], f32, (int64_t)i, s == 0 ? v : -v, m == 1);
            }
        }
        return REMAT_OK;
    }
    case REMAT_KOP_SUM:
    case REMAT_KOP_MEAN:
        if ((m = take(E, in[0])) != 0)
            sum_backward(o, f32, dy, L0, E->grad[in[0]], m == 1);
        return REMAT_OK;
    case REMAT_KOP_RESHAPE:
    case REMAT_KOP_TRANSPOSE: {
        if ((m = take(E, in[0])) == 0)
            return REMAT_OK;
        uint8_t *dx = E->grad[in[0]];
        if (o->kind == REMAT_KOP_RESHAPE) {
            for (uint64_t i = 0; i < O->n; i++)
                put(dx, f32, (int64_t)i, LD(dy, f32, (int64_t)i), m == 1);
            return REMAT_OK;
        }
        int64_t cst[MAXD];
        contig(L0->nd, L0->shape, cst);
        odo it;
        odo_init(&it, O->nd, O->shape);
        for (uint32_t d = 0; d < O->nd; d++)
            it.st[0][d] = cst[o->perm[d]];
        for (uint64_t i = 0; i < O->n; i++, odo_next(&it))
            put(dx, f32, it.off[0], LD(dy, f32, (int64_t)i), m == 1);
        return REMAT_OK;
    }
    default: return remat__engine_broken(E, "no backward kernel for op '%s'", op->id);
    }
}

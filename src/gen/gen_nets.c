/*
 * gen_nets.c - the model families of remat gen: resnet, transformer, unet.
 *
 * These graphs are small (tens to thousands of ops) and shaped like real
 * networks, so they go through a tiny tensor record (`tns`: id, shape,
 * bytes) that makes every size the product of a shape, computed once with
 * overflow checks, and each op line is built from the records it reads.
 * What each op saves follows what its backward reads in PyTorch; the
 * comments say where a choice was made. The writer and its option errors
 * live in gen.c; nothing here is random.
 */
#include "gen_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef remat__gen_writer gw;

/* ------------------------------------------------ model-family helpers */

#define MAX_DIM 4

/* A tensor of the model families: its id, shape and bytes (own storage; the
 * logical size for a view). */
typedef struct {
    char id[32];
    uint32_t ndim;
    uint64_t shape[MAX_DIM];
    uint64_t bytes;
} tns;

/* Sets t's id (printf-style) and shape; bytes = product(shape) * elem. */
static void tns_make(gw *w, tns *t, uint64_t elem, uint32_t ndim, const uint64_t *shape, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 6, 7)))
#endif
    ;

static void tns_make(gw *w, tns *t, uint64_t elem, uint32_t ndim, const uint64_t *shape, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->id, sizeof t->id, fmt, ap);
    va_end(ap);
    t->ndim = ndim;
    t->bytes = elem;
    int over = 0;
    for (uint32_t i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        over |= !remat_u64_mul(t->bytes, shape[i], &t->bytes);
    }
    if (over) {
        char dims[128];
        size_t n = 0;
        for (uint32_t i = 0; i < ndim && n < sizeof dims; i++)
            n += (size_t)snprintf(dims + n, sizeof dims - n, "%s%" PRIu64, i ? " x " : "", shape[i]);
        remat__gen_invalid(w,
                           "tensor '%s' (%s elements of %" PRIu64 " bytes) would exceed 2^64-1 bytes; "
                           "choose smaller sizes",
                           t->id, dims, elem);
        t->bytes = 0;
    }
}

#define SHAPE(...) ((const uint64_t[]){__VA_ARGS__})
#define NDIM(...) ((uint32_t)(sizeof((const uint64_t[]){__VA_ARGS__}) / sizeof(uint64_t)))
/* tns_make with the shape given inline: MAKE(w, &t, elem, (a, b, c), "fmt", ...). */
#define MAKE(w, t, elem, dims, ...) tns_make((w), (t), (elem), NDIM dims, SHAPE dims, __VA_ARGS__)

static void put_shape(gw *w, const tns *t)
{
    remat_buf_puts(&w->b, ", \"shape\": [");
    for (uint32_t i = 0; i < t->ndim; i++) {
        if (i)
            remat_buf_puts(&w->b, ", ");
        remat__gen_put_u64(w, t->shape[i]);
    }
    remat_buf_puts(&w->b, "]");
}

/* The inputs and params arrays are written as lists of leaves. */
typedef struct {
    int n; /* entries written so far in the current array */
} list;

static void leaf(gw *w, list *l, const tns *t)
{
    remat_buf_printf(&w->b, "%s\n  {\"id\": \"%s\", \"bytes\": ", l->n++ ? "," : "", t->id);
    remat__gen_put_u64(w, t->bytes);
    put_shape(w, t);
    remat_buf_puts(&w->b, "}");
}

static void ids(gw *w, const char *key, const tns *const *ts, int n)
{
    remat_buf_printf(&w->b, ", \"%s\": [", key);
    for (int i = 0; i < n; i++)
        remat_buf_printf(&w->b, "%s\"%s\"", i ? ", " : "", ts[i]->id);
    remat_buf_puts(&w->b, "]");
}

/* One op. outs[0..n_out): one output is written inline (its id is the op's
 * id); several as an "outputs" array with the op id outs[0]'s. n_save < 0
 * keeps the format's default (all inputs). A view (alias != NULL) writes
 * alias_of and no flops; views are given no saves, because the backward of
 * a reshape, flatten or split only reshapes the gradient. */
typedef struct {
    const char *type;
    const tns *in[4];
    int n_in;
    const tns *out[3];
    int n_out;
    const tns *save[4];
    int n_save;
    const tns *alias;
    uint64_t flops;
} opdesc;

/* What few ops write beyond opdesc, each only when set, so the families
 * that never set them keep their bytes: the backward's FLOPs (0: the
 * format's 2 x flops), its transient bytes, and an attrs object's text (the
 * tensor-parallel collectives say what they move). */
typedef struct {
    uint64_t bwd_flops;
    uint64_t bwd_workspace;
    const char *attrs;
} opextra;

static void op_x(gw *w, list *l, const opdesc *d, const opextra *x)
{
    const tns *o0 = d->out[0];
    remat_buf_printf(&w->b, "%s\n  {\"id\": \"%s\", \"op\": \"%s\"", l->n++ ? "," : "", o0->id, d->type);
    ids(w, "inputs", d->in, d->n_in);
    if (d->n_out == 1) {
        remat_buf_puts(&w->b, ", \"bytes\": ");
        remat__gen_put_u64(w, o0->bytes);
        put_shape(w, o0);
        if (d->alias)
            remat_buf_printf(&w->b, ", \"alias_of\": \"%s\"", d->alias->id);
    } else {
        remat_buf_puts(&w->b, ", \"outputs\": [");
        for (int i = 0; i < d->n_out; i++) {
            remat_buf_printf(&w->b, "%s{\"id\": \"%s\", \"bytes\": ", i ? ", " : "", d->out[i]->id);
            remat__gen_put_u64(w, d->out[i]->bytes);
            put_shape(w, d->out[i]);
            remat_buf_puts(&w->b, "}");
        }
        remat_buf_puts(&w->b, "]");
    }
    if (!d->alias) {
        remat_buf_puts(&w->b, ", \"flops\": ");
        remat__gen_put_u64(w, d->flops);
    }
    if (d->n_save >= 0)
        ids(w, "saves", d->save, d->n_save);
    if (x && x->bwd_flops) {
        remat_buf_puts(&w->b, ", \"bwd_flops\": ");
        remat__gen_put_u64(w, x->bwd_flops);
    }
    if (x && x->bwd_workspace) {
        remat_buf_puts(&w->b, ", \"bwd_workspace\": ");
        remat__gen_put_u64(w, x->bwd_workspace);
    }
    if (x && x->attrs)
        remat_buf_printf(&w->b, ", \"attrs\": %s", x->attrs);
    remat_buf_puts(&w->b, "}");
}

static void op(gw *w, list *l, const opdesc *d)
{
    op_x(w, l, d, NULL);
}

/* FLOPs helpers: products of up to five factors, overflow-checked. */
static uint64_t prod(gw *w, const char *what, int n, const uint64_t *f)
{
    uint64_t r = 1;
    for (int i = 0; i < n; i++)
        r = remat__gen_mul(w, r, f[i], what);
    return r;
}
#define FLOPS(w, what, ...) prod((w), (what), (int)NDIM(__VA_ARGS__), SHAPE(__VA_ARGS__))

/* Elements of t (its bytes are elements x elem). */
static uint64_t elems(const tns *t)
{
    uint64_t r = 1;
    for (uint32_t i = 0; i < t->ndim; i++)
        r *= t->shape[i]; /* bounded by bytes, already checked */
    return r;
}

static int require(gw *w, uint64_t v, uint64_t lo, const char *opt)
{
    if (v < lo) {
        remat__gen_invalid(w, "%s must be at least %" PRIu64 " (got %" PRIu64 ")", opt, lo, v);
        return 0;
    }
    return 1;
}

/* --------------------------------------------------------------- resnet */

/* conv3x3 (same padding) -> batchnorm (3 outputs) -> optional relu. The BN's
 * statistics are fp32 per channel whatever the activation precision. */
static void conv_bn(gw *w, list *ops, const tns *in, const tns *wt, const tns *g, uint64_t p, uint64_t n, uint64_t c,
                    uint64_t cin, uint64_t s, const char *pre, tns *conv, tns *bn, tns *mean, tns *invstd)
{
    MAKE(w, conv, p, (n, c, s, s), "%s_c", pre);
    op(w, ops, &(opdesc){"conv2d", {in, wt}, 2, {conv}, 1, {0}, -1, NULL,
                         FLOPS(w, conv->id, 2, n, c, s, s, cin, 9)});
    MAKE(w, bn, p, (n, c, s, s), "%s_bn", pre);
    MAKE(w, mean, 4, (c), "%s_bn_mean", pre);
    MAKE(w, invstd, 4, (c), "%s_bn_invstd", pre);
    op(w, ops, &(opdesc){"batchnorm", {conv, g}, 2, {bn, mean, invstd}, 3, {conv, g, mean, invstd}, 4, NULL,
                         remat__gen_mul(w, elems(bn), 8, bn->id)});
}

static void relu(gw *w, list *ops, const tns *in, tns *out, const char *id)
{
    snprintf(out->id, sizeof out->id, "%s", id);
    out->ndim = in->ndim;
    memcpy(out->shape, in->shape, sizeof out->shape);
    out->bytes = in->bytes;
    /* ReLU's backward needs only the sign of its output. */
    op(w, ops, &(opdesc){"relu", {in}, 1, {out}, 1, {out}, 1, NULL, elems(in)});
}

int remat__gen_resnet(gw *w, const remat_gen_opts *o, const char *name)
{
    if (!require(w, o->blocks, 1, "--blocks") || !require(w, o->batch, 1, "--batch") ||
        !require(w, o->channels, 1, "--channels") || !require(w, o->size, 1, "--size") ||
        !require(w, o->in_channels, 1, "--in-channels") || !require(w, o->classes, 1, "--classes") ||
        !require(w, o->elem_bytes, 1, "--elem-bytes"))
        return 0;
    const uint64_t p = o->elem_bytes, N = o->batch, C = o->channels, S = o->size, CI = o->in_channels,
                   K = o->classes;
    const uint32_t B = o->blocks;
    remat__gen_header(w, name, "resnet");
    remat__gen_meta_u64(w, "blocks", B);
    remat__gen_meta_u64(w, "batch", N);
    remat__gen_meta_u64(w, "channels", C);
    remat__gen_meta_u64(w, "size", S);
    remat__gen_meta_u64(w, "elem_bytes", p);
    remat__gen_meta_end(w);

    tns x, y;
    list L = {0};
    /* The data loader hands images over flattened; the first op reshapes. */
    MAKE(w, &x, p, (N, remat__gen_mul(w, CI, remat__gen_mul(w, S, S, "--size"), "--size")), "x");
    MAKE(w, &y, 8, (N), "y");
    remat_buf_puts(&w->b, " \"inputs\": [");
    leaf(w, &L, &x);
    leaf(w, &L, &y);
    remat_buf_puts(&w->b, "],\n \"params\": [");
    tns stem_w, stem_g, fc_w, bw[4];
    L.n = 0;
    MAKE(w, &stem_w, p, (C, CI, 3, 3), "stem_w");
    MAKE(w, &stem_g, p, (2, C), "stem_g");
    leaf(w, &L, &stem_w);
    leaf(w, &L, &stem_g);
    for (uint32_t i = 0; i < B && !w->bad; i++) {
        MAKE(w, &bw[0], p, (C, C, 3, 3), "b%" PRIu32 "_w1", i);
        MAKE(w, &bw[1], p, (2, C), "b%" PRIu32 "_g1", i);
        MAKE(w, &bw[2], p, (C, C, 3, 3), "b%" PRIu32 "_w2", i);
        MAKE(w, &bw[3], p, (2, C), "b%" PRIu32 "_g2", i);
        for (int j = 0; j < 4; j++)
            leaf(w, &L, &bw[j]);
    }
    MAKE(w, &fc_w, p, (C, K), "fc_w");
    leaf(w, &L, &fc_w);
    remat_buf_puts(&w->b, "],\n \"ops\": [");

    list ops = {0};
    tns x4, conv, bn, mean, invstd, cur, r1, conv2, bn2, m2, s2, sum, pool, flat, fc, loss;
    MAKE(w, &x4, p, (N, CI, S, S), "x4");
    op(w, &ops, &(opdesc){"reshape", {&x}, 1, {&x4}, 1, {0}, 0, &x, 0});
    conv_bn(w, &ops, &x4, &stem_w, &stem_g, p, N, C, CI, S, "stem", &conv, &bn, &mean, &invstd);
    relu(w, &ops, &bn, &cur, "stem_relu");
    for (uint32_t i = 0; i < B && !w->bad && !w->b.failed; i++) {
        char pre[24], id[32];
        MAKE(w, &bw[0], p, (C, C, 3, 3), "b%" PRIu32 "_w1", i);
        MAKE(w, &bw[1], p, (2, C), "b%" PRIu32 "_g1", i);
        MAKE(w, &bw[2], p, (C, C, 3, 3), "b%" PRIu32 "_w2", i);
        MAKE(w, &bw[3], p, (2, C), "b%" PRIu32 "_g2", i);
        snprintf(pre, sizeof pre, "b%" PRIu32 "_1", i);
        conv_bn(w, &ops, &cur, &bw[0], &bw[1], p, N, C, C, S, pre, &conv, &bn, &mean, &invstd);
        snprintf(id, sizeof id, "b%" PRIu32 "_relu", i);
        relu(w, &ops, &bn, &r1, id);
        snprintf(pre, sizeof pre, "b%" PRIu32 "_2", i);
        conv_bn(w, &ops, &r1, &bw[2], &bw[3], p, N, C, C, S, pre, &conv2, &bn2, &m2, &s2);
        MAKE(w, &sum, p, (N, C, S, S), "b%" PRIu32 "_add", i);
        /* An add's backward passes the gradient through: it saves nothing. */
        op(w, &ops, &(opdesc){"add", {&bn2, &cur}, 2, {&sum}, 1, {0}, 0, NULL, elems(&sum)});
        snprintf(id, sizeof id, "b%" PRIu32 "_out", i);
        relu(w, &ops, &sum, &cur, id);
    }
    MAKE(w, &pool, p, (N, C, 1, 1), "pool");
    /* Global average pooling's backward needs only the input's shape. */
    op(w, &ops, &(opdesc){"avgpool", {&cur}, 1, {&pool}, 1, {0}, 0, NULL, elems(&cur)});
    MAKE(w, &flat, p, (N, C), "flat");
    op(w, &ops, &(opdesc){"flatten", {&pool}, 1, {&flat}, 1, {0}, 0, &pool, 0});
    MAKE(w, &fc, p, (N, K), "fc");
    op(w, &ops, &(opdesc){"matmul", {&flat, &fc_w}, 2, {&fc}, 1, {0}, -1, NULL, FLOPS(w, "fc", 2, N, C, K)});
    MAKE(w, &loss, 4, (1), "loss");
    op(w, &ops, &(opdesc){"cross_entropy", {&fc, &y}, 2, {&loss}, 1, {0}, -1, NULL, FLOPS(w, "loss", 5, N, K)});
    remat__gen_footer(w);
    return 1;
}

/* ---------------------------------------------------------- transformer */

/* Layernorm with its fp32 per-token mean and rstd as extra outputs; the
 * backward reads the input, the weight and both statistics. */
static void layernorm(gw *w, list *ops, const tns *in, const tns *g, uint64_t p, uint64_t s, uint64_t b, uint64_t h,
                      const char *id, tns *out)
{
    tns mean, rstd;
    MAKE(w, out, p, (s, b, h), "%s", id);
    MAKE(w, &mean, 4, (s, b), "%s_mean", id);
    MAKE(w, &rstd, 4, (s, b), "%s_rstd", id);
    op(w, ops, &(opdesc){"layernorm", {in, g}, 2, {out, &mean, &rstd}, 3, {in, g, &mean, &rstd}, 4, NULL,
                         remat__gen_mul(w, elems(out), 8, id)});
}

/* Dropout as Megatron keeps it: the dropped tensor and a 1-byte mask per
 * element; the backward multiplies the gradient by the mask (and the scale)
 * and reads nothing else. Replaying it is exact when the RNG state is saved,
 * as Megatron's checkpointing does, so it stays recomputable. */
static void dropout(gw *w, list *ops, const tns *in, const char *id, tns *out)
{
    tns mask;
    *out = *in;
    snprintf(out->id, sizeof out->id, "%s", id);
    mask = *in;
    snprintf(mask.id, sizeof mask.id, "%s_mask", id);
    mask.bytes = elems(in); /* 1 byte per element, whatever the activation precision */
    op(w, ops, &(opdesc){"dropout", {in}, 1, {out, &mask}, 2, {&mask}, 1, NULL, elems(in)});
}

/* One collective of Megatron's tensor-parallel regions (Shoeybi et al. 2019
 * section 3; Korthikanti et al. 2022 section 4.2.2): an op of `type` from in
 * to out, saving nothing, whose attrs name what it moves in forward and in
 * backward. An in-place one (all-reduce, and the identity f) is a view of its
 * input: NCCL reduces the tensor where it lies, so it adds no bytes. */
static void collective(gw *w, list *ops, const char *type, const tns *in, tns *out, int in_place, const char *fwd,
                       const char *bwd, uint64_t t)
{
    char attrs[160];
    snprintf(attrs, sizeof attrs,
             "{\"collective_fwd\": \"%s\", \"collective_bwd\": \"%s\", \"group\": \"tensor\", \"ranks\": %" PRIu64 "}",
             fwd, bwd, t);
    op_x(w, ops, &(opdesc){type, {in}, 1, {out}, 1, {0}, 0, in_place ? in : NULL, 0}, &(opextra){0, 0, attrs});
}

/* The input of a column-parallel linear (QKV, fc1) from layernorm output
 * ln: with t = 1 ln itself; with tensor parallelism the identity f whose
 * backward all-reduces the gradient; with sequence parallelism an
 * all-gather of the s/t shards into a new (s, b, h) buffer, whose backward
 * reduce-scatters. */
static const tns *tp_enter(gw *w, list *ops, const tns *ln, uint64_t p, uint64_t s, uint64_t b, uint64_t h,
                           uint64_t t, int sp, tns *buf)
{
    if (t == 1)
        return ln;
    if (sp) {
        MAKE(w, buf, p, (s, b, h), "%.28s_ag", ln->id);
        collective(w, ops, "all_gather", ln, buf, 0, "all_gather", "reduce_scatter", t);
    } else {
        *buf = *ln;
        snprintf(buf->id, sizeof buf->id, "%.28s_tp", ln->id);
        collective(w, ops, "tp_copy", ln, buf, 1, "none", "all_reduce", t);
    }
    return buf;
}

/* The output of a row-parallel linear (attention projection, fc2) is a
 * partial sum: all-reduced in place (g), or reduce-scattered to the s/t
 * shard with sequence parallelism, whose backward all-gathers. */
static const tns *tp_leave(gw *w, list *ops, const tns *part, uint64_t p, uint64_t ss, uint64_t b, uint64_t h,
                           uint64_t t, int sp, tns *buf)
{
    if (t == 1)
        return part;
    if (sp) {
        MAKE(w, buf, p, (ss, b, h), "%.28s_rs", part->id);
        collective(w, ops, "reduce_scatter", part, buf, 0, "reduce_scatter", "all_gather", t);
    } else {
        *buf = *part;
        snprintf(buf->id, sizeof buf->id, "%.28s_ar", part->id);
        collective(w, ops, "all_reduce", part, buf, 1, "all_reduce", "none", t);
    }
    return buf;
}

/* A column-parallel linear: in x wt -> out. With sequence parallelism
 * Megatron saves the layernorm's s/t shard `ln`, not the gathered input,
 * and its backward all-gathers it again for the weight gradient
 * (Korthikanti et al. section 4.2.2): the save is the shard and the
 * gathered buffer is the backward's workspace. */
static void col_linear(gw *w, list *ops, const tns *in, const tns *ln, const tns *wt, const tns *out, uint64_t t,
                       int sp, uint64_t flops)
{
    if (!(t > 1 && sp)) {
        op(w, ops, &(opdesc){"matmul", {in, wt}, 2, {out}, 1, {0}, -1, NULL, flops});
        return;
    }
    char attrs[120];
    snprintf(attrs, sizeof attrs, "{\"collective_bwd\": \"all_gather\", \"group\": \"tensor\", \"ranks\": %" PRIu64 "}",
             t);
    op_x(w, ops, &(opdesc){"matmul", {in, wt}, 2, {out}, 1, {ln, wt}, 2, NULL, flops}, &(opextra){0, in->bytes, attrs});
}

int remat__gen_transformer(gw *w, const remat_gen_opts *o, const char *name)
{
    if (!require(w, o->seq, 1, "-s/--seq") || !require(w, o->batch, 1, "-b/--batch") ||
        !require(w, o->hidden, 1, "-h/--hidden") || !require(w, o->heads, 1, "-a/--heads") ||
        !require(w, o->layers, 1, "-L/--layers") || !require(w, o->vocab, 1, "--vocab") ||
        !require(w, o->elem_bytes, 1, "--elem-bytes"))
        return 0;
    if (o->hidden % o->heads != 0)
        return remat__gen_invalid(w, "-h/--hidden (%" PRIu32 ") must be a multiple of -a/--heads (%" PRIu32 ")",
                                  o->hidden, o->heads);
    /* One rank of t: heads split evenly (so does h, heads dividing it); with
     * sequence parallelism the sequence too. */
    const uint64_t t = o->tp ? o->tp : 1;
    const int sp = o->sp && t > 1, sel = o->selective, vp = o->vocab_parallel && t > 1;
    if (o->heads % t != 0)
        return remat__gen_invalid(w, "--tp %" PRIu64 " must divide -a/--heads (%" PRIu32 ")", t, o->heads);
    if (sp && o->seq % t != 0)
        return remat__gen_invalid(w, "--sp: --tp %" PRIu64 " must divide -s/--seq (%" PRIu32 ")", t, o->seq);
    if (vp && o->vocab % t != 0)
        return remat__gen_invalid(w, "--vocab-parallel: --tp %" PRIu64 " must divide --vocab (%" PRIu32 ")", t,
                                  o->vocab);
    /* Ops per layer: 15, 3 dropouts, 4 collectives (f and g twice, or two
     * all-gathers and two reduce-scatters), less the attention core's 3 or 4
     * ops fused into one under --selective. */
    const uint64_t per_layer = 15 + (o->dropout ? 3 : 0) + (t > 1 ? 4 : 0) - (sel ? (o->dropout ? 3 : 2) : 0);
    if ((uint64_t)o->layers * per_layer + 4 + (sp ? 2 : 0) + (vp && !sp ? 2 : 0) > REMAT__GEN_MAX_OPS)
        return remat__gen_invalid(w, "-L/--layers %" PRIu32 " is too many (limit %llu ops)", o->layers,
                                  REMAT__GEN_MAX_OPS);
    const uint64_t p = o->elem_bytes, s = o->seq, b = o->batch, h = o->hidden, a = o->heads, V = o->vocab;
    const uint64_t hp = h / t, ap = a / t, ss = sp ? s / t : s, Vp = vp ? V / t : V;
    remat__gen_header(w, name, "transformer");
    remat__gen_meta_u64(w, "seq", s);
    remat__gen_meta_u64(w, "batch", b);
    remat__gen_meta_u64(w, "hidden", h);
    remat__gen_meta_u64(w, "heads", a);
    remat__gen_meta_u64(w, "layers", o->layers);
    remat__gen_meta_u64(w, "vocab", V);
    remat__gen_meta_u64(w, "elem_bytes", p);
    if (o->dropout)
        remat__gen_meta_u64(w, "dropout", 1);
    if (t > 1)
        remat__gen_meta_u64(w, "tp", t);
    if (sp)
        remat__gen_meta_u64(w, "sp", 1);
    if (sel)
        remat__gen_meta_u64(w, "selective", 1);
    if (vp)
        remat__gen_meta_u64(w, "vocab_parallel", 1);
    remat__gen_meta_end(w);

    tns tokens, labels, wte, lnf_w, head_w;
    list L = {0};
    MAKE(w, &tokens, 8, (s, b), "tokens");
    MAKE(w, &labels, 8, (s, b), "labels");
    remat_buf_puts(&w->b, " \"inputs\": [");
    leaf(w, &L, &tokens);
    leaf(w, &L, &labels);
    remat_buf_puts(&w->b, "],\n \"params\": [");
    L.n = 0;
    /* With vp, Megatron's VocabParallelEmbedding: this rank's V/t rows. */
    MAKE(w, &wte, p, (Vp, h), "wte");
    leaf(w, &L, &wte);
    /* Per layer: ln1 (gamma, beta), W_qkv, W_o, ln2, W_fc1, W_fc2: 12h^2 + 4h
     * elements, the four matrices split t ways (QKV and fc1 by columns, W_o
     * and fc2 by rows), the layernorms replicated. Biases are left out; they
     * do not change activations. The embedding and the head stay whole on
     * every rank unless `vocab_parallel` splits them by vocabulary. */
    tns pw[6];
    for (uint32_t l = 0; l < o->layers && !w->bad && !w->b.failed; l++) {
        MAKE(w, &pw[0], p, (2, h), "l%" PRIu32 "_ln1_w", l);
        MAKE(w, &pw[1], p, (h, 3 * hp), "l%" PRIu32 "_wqkv", l);
        MAKE(w, &pw[2], p, (hp, h), "l%" PRIu32 "_wo", l);
        MAKE(w, &pw[3], p, (2, h), "l%" PRIu32 "_ln2_w", l);
        MAKE(w, &pw[4], p, (h, 4 * hp), "l%" PRIu32 "_wfc1", l);
        MAKE(w, &pw[5], p, (4 * hp, h), "l%" PRIu32 "_wfc2", l);
        for (int j = 0; j < 6; j++)
            leaf(w, &L, &pw[j]);
    }
    MAKE(w, &lnf_w, p, (2, h), "lnf_w");
    MAKE(w, &head_w, p, (h, Vp), "head_w");
    leaf(w, &L, &lnf_w);
    leaf(w, &L, &head_w);
    remat_buf_puts(&w->b, "],\n \"ops\": [");

    list ops = {0};
    tns x, ln1, qkv, q, k, v, scores, probs, ctx, attn, res1, ln2, fc1, gelu, fc2, buf1, buf2;
    MAKE(w, &x, p, (s, b, h), "embed");
    /* The embedding's backward scatters into wte by token: it reads only the
     * token ids. */
    op(w, &ops, &(opdesc){"embedding", {&tokens, &wte}, 2, {&x}, 1, {&tokens}, 1, NULL, elems(&x)});
    if (vp) {
        /* A rank looks up only the tokens in its V/t rows (zeros for the
         * rest), so the output is a partial sum: Megatron's
         * VocabParallelEmbedding all-reduces it in place, or with sequence
         * parallelism reduce-scatters it to the s/t shard (its backward
         * all-gathers the gradient). */
        tns xr;
        if (sp) {
            MAKE(w, &xr, p, (ss, b, h), "embed_rs");
            collective(w, &ops, "reduce_scatter", &x, &xr, 0, "reduce_scatter", "all_gather", t);
        } else {
            xr = x;
            snprintf(xr.id, sizeof xr.id, "embed_ar");
            collective(w, &ops, "all_reduce", &x, &xr, 1, "all_reduce", "none", t);
        }
        x = xr;
    } else if (sp) {
        /* Megatron's scatter_to_sequence_parallel_region: each rank keeps its
         * s/t slice (a copy here, so the whole embedding output is freed);
         * its backward all-gathers the gradient. */
        tns xs;
        MAKE(w, &xs, p, (ss, b, h), "embed_sp");
        collective(w, &ops, "scatter", &x, &xs, 0, "none", "all_gather", t);
        x = xs;
    }
    for (uint32_t l = 0; l < o->layers && !w->bad && !w->b.failed; l++) {
        char id[32];
        MAKE(w, &pw[0], p, (2, h), "l%" PRIu32 "_ln1_w", l);
        MAKE(w, &pw[1], p, (h, 3 * hp), "l%" PRIu32 "_wqkv", l);
        MAKE(w, &pw[2], p, (hp, h), "l%" PRIu32 "_wo", l);
        MAKE(w, &pw[3], p, (2, h), "l%" PRIu32 "_ln2_w", l);
        MAKE(w, &pw[4], p, (h, 4 * hp), "l%" PRIu32 "_wfc1", l);
        MAKE(w, &pw[5], p, (4 * hp, h), "l%" PRIu32 "_wfc2", l);
        snprintf(id, sizeof id, "l%" PRIu32 "_ln1", l);
        layernorm(w, &ops, &x, &pw[0], p, ss, b, h, id, &ln1);
        const tns *qin = tp_enter(w, &ops, &ln1, p, s, b, h, t, sp, &buf1);
        MAKE(w, &qkv, p, (s, b, 3 * hp), "l%" PRIu32 "_qkv", l);
        col_linear(w, &ops, qin, &ln1, &pw[1], &qkv, t, sp, FLOPS(w, qkv.id, 2, s, b, h, 3 * hp));
        /* Q, K and V are slices of one buffer: views with their own logical
         * size, so saving any of them keeps all of qkv alive. */
        MAKE(w, &q, p, (s, b, hp), "l%" PRIu32 "_q", l);
        MAKE(w, &k, p, (s, b, hp), "l%" PRIu32 "_k", l);
        MAKE(w, &v, p, (s, b, hp), "l%" PRIu32 "_v", l);
        op(w, &ops, &(opdesc){"split", {&qkv}, 1, {&q}, 1, {0}, 0, &qkv, 0});
        op(w, &ops, &(opdesc){"split", {&qkv}, 1, {&k}, 1, {0}, 0, &qkv, 0});
        op(w, &ops, &(opdesc){"split", {&qkv}, 1, {&v}, 1, {0}, 0, &qkv, 0});
        MAKE(w, &scores, p, (b, ap, s, s), "l%" PRIu32 "_scores", l);
        MAKE(w, &probs, p, (b, ap, s, s), "l%" PRIu32 "_softmax", l);
        MAKE(w, &ctx, p, (s, b, hp), "l%" PRIu32 "_ctx", l);
        const uint64_t f_scores = FLOPS(w, scores.id, 2, b, s, s, hp), f_probs = remat__gen_mul(w, elems(&probs), 5, probs.id),
                       f_ctx = FLOPS(w, ctx.id, 2, b, s, s, hp);
        if (sel) {
            /* Selective recomputation (Korthikanti et al. section 5), as
             * Megatron runs it: the attention core (QK^T, softmax, its
             * dropout, attention over V) is one checkpointed function that
             * saves only Q, K and V; its backward reruns the forward first
             * (bwd_flops = 2 x flops + flops) and holds what that rebuilds,
             * the probabilities and, with dropout, the mask and the dropped
             * probabilities, while it runs (bwd_workspace). */
            uint64_t f = f_scores + f_probs + f_ctx + (o->dropout ? elems(&probs) : 0);
            uint64_t held = probs.bytes + (o->dropout ? elems(&probs) + probs.bytes : 0);
            op_x(w, &ops, &(opdesc){"core_attention", {&q, &k, &v}, 3, {&ctx}, 1, {0}, -1, NULL, f},
                 &(opextra){remat__gen_mul(w, f, 3, ctx.id), held, NULL});
        } else {
            op(w, &ops, &(opdesc){"bmm", {&q, &k}, 2, {&scores}, 1, {0}, -1, NULL, f_scores});
            /* Softmax's backward is y * (dy - sum(y * dy)): it reads its output. */
            op(w, &ops, &(opdesc){"softmax", {&scores}, 1, {&probs}, 1, {&probs}, 1, NULL, f_probs});
            tns dprobs = probs;
            if (o->dropout) {
                snprintf(id, sizeof id, "l%" PRIu32 "_attn_drop", l);
                dropout(w, &ops, &probs, id, &dprobs);
            }
            op(w, &ops, &(opdesc){"bmm", {&dprobs, &v}, 2, {&ctx}, 1, {0}, -1, NULL, f_ctx});
        }
        tns dattn, dfc2;
        MAKE(w, &attn, p, (s, b, h), "l%" PRIu32 "_attn", l);
        op(w, &ops, &(opdesc){"matmul", {&ctx, &pw[2]}, 2, {&attn}, 1, {0}, -1, NULL,
                              FLOPS(w, attn.id, 2, s, b, hp, h)});
        dattn = *tp_leave(w, &ops, &attn, p, ss, b, h, t, sp, &buf2);
        if (o->dropout) {
            snprintf(id, sizeof id, "l%" PRIu32 "_proj_drop", l);
            tns in = dattn;
            dropout(w, &ops, &in, id, &dattn);
        }
        MAKE(w, &res1, p, (ss, b, h), "l%" PRIu32 "_res1", l);
        op(w, &ops, &(opdesc){"add", {&x, &dattn}, 2, {&res1}, 1, {0}, 0, NULL, elems(&res1)});
        snprintf(id, sizeof id, "l%" PRIu32 "_ln2", l);
        layernorm(w, &ops, &res1, &pw[3], p, ss, b, h, id, &ln2);
        const tns *fin = tp_enter(w, &ops, &ln2, p, s, b, h, t, sp, &buf1);
        MAKE(w, &fc1, p, (s, b, 4 * hp), "l%" PRIu32 "_fc1", l);
        col_linear(w, &ops, fin, &ln2, &pw[4], &fc1, t, sp, FLOPS(w, fc1.id, 2, s, b, h, 4 * hp));
        MAKE(w, &gelu, p, (s, b, 4 * hp), "l%" PRIu32 "_gelu", l);
        op(w, &ops, &(opdesc){"gelu", {&fc1}, 1, {&gelu}, 1, {0}, -1, NULL,
                              remat__gen_mul(w, elems(&gelu), 8, gelu.id)});
        MAKE(w, &fc2, p, (s, b, h), "l%" PRIu32 "_fc2", l);
        op(w, &ops, &(opdesc){"matmul", {&gelu, &pw[5]}, 2, {&fc2}, 1, {0}, -1, NULL,
                              FLOPS(w, fc2.id, 2, s, b, 4 * hp, h)});
        dfc2 = *tp_leave(w, &ops, &fc2, p, ss, b, h, t, sp, &buf2);
        if (o->dropout) {
            snprintf(id, sizeof id, "l%" PRIu32 "_mlp_drop", l);
            tns in = dfc2;
            dropout(w, &ops, &in, id, &dfc2);
        }
        tns res2;
        MAKE(w, &res2, p, (ss, b, h), "l%" PRIu32 "_res2", l);
        op(w, &ops, &(opdesc){"add", {&res1, &dfc2}, 2, {&res2}, 1, {0}, 0, NULL, elems(&res2)});
        x = res2;
    }
    tns lnf, logits, loss;
    layernorm(w, &ops, &x, &lnf_w, p, ss, b, h, "lnf", &lnf);
    const tns *hin = &lnf;
    if (sp) {
        /* The head reads the whole sequence: gather the final layernorm's
         * shards (Megatron's gather_from_sequence_parallel_region). */
        MAKE(w, &buf1, p, (s, b, h), "lnf_ag");
        collective(w, &ops, "all_gather", &lnf, &buf1, 0, "all_gather", "reduce_scatter", t);
        hin = &buf1;
    } else if (vp) {
        /* The vocabulary-parallel head is a column-parallel linear: its
         * input enters through f (Megatron's parallel_lm_logits). */
        buf1 = lnf;
        snprintf(buf1.id, sizeof buf1.id, "lnf_tp");
        collective(w, &ops, "tp_copy", &lnf, &buf1, 1, "none", "all_reduce", t);
        hin = &buf1;
    }
    MAKE(w, &logits, p, (s, b, Vp), "logits");
    op(w, &ops, &(opdesc){"matmul", {hin, &head_w}, 2, {&logits}, 1, {0}, -1, NULL,
                          FLOPS(w, "logits", 2, s, b, h, Vp)});
    MAKE(w, &loss, 4, (1), "loss");
    if (vp) {
        /* Megatron's vocab_parallel_cross_entropy on the rank's V/t logits
         * (never gathered): three all-reduces of one fp32 value per token
         * (the max, the target's logit, the sum of exponentials), 12sb
         * bytes in all; its softmax overwrites the logits, which it saves. */
        char attrs[200];
        snprintf(attrs, sizeof attrs,
                 "{\"collective_fwd\": \"all_reduce\", \"collective_fwd_bytes\": %" PRIu64
                 ", \"group\": \"tensor\", \"ranks\": %" PRIu64 "}",
                 remat__gen_mul(w, 12 * s, b, "loss"), t);
        op_x(w, &ops, &(opdesc){"vocab_parallel_cross_entropy", {&logits, &labels}, 2, {&loss}, 1, {0}, -1, NULL,
                                FLOPS(w, "loss", 5, s, b, Vp)},
             &(opextra){0, 0, attrs});
    } else {
        op(w, &ops, &(opdesc){"cross_entropy", {&logits, &labels}, 2, {&loss}, 1, {0}, -1, NULL,
                              FLOPS(w, "loss", 5, s, b, V)});
    }
    remat__gen_footer(w);
    return 1;
}

/* ----------------------------------------------------------------- unet */

static void conv_relu2(gw *w, list *ops, const tns *in, const tns *w1, const tns *w2, uint64_t p, uint64_t n,
                       uint64_t c, uint64_t cin, uint64_t s, const char *pre, tns *out)
{
    tns c1, r1, c2;
    char id[32];
    MAKE(w, &c1, p, (n, c, s, s), "%s_c1", pre);
    op(w, ops, &(opdesc){"conv2d", {in, w1}, 2, {&c1}, 1, {0}, -1, NULL, FLOPS(w, c1.id, 2, n, c, s, s, cin, 9)});
    snprintf(id, sizeof id, "%s_r1", pre);
    relu(w, ops, &c1, &r1, id);
    MAKE(w, &c2, p, (n, c, s, s), "%s_c2", pre);
    op(w, ops, &(opdesc){"conv2d", {&r1, w2}, 2, {&c2}, 1, {0}, -1, NULL, FLOPS(w, c2.id, 2, n, c, s, s, c, 9)});
    snprintf(id, sizeof id, "%s_r2", pre);
    relu(w, ops, &c2, out, id);
}

/* Parameters of level i: encoder e<i>_w1/w2, decoder d<i>_wu/w1/w2; the
 * bottleneck mid_w1/w2. Channels double per level: c_i = C * 2^i. */
static void unet_params(gw *w, uint64_t p, uint64_t C, uint64_t CI, uint32_t d, uint32_t i, tns *e1, tns *e2,
                        tns *wu, tns *d1, tns *d2)
{
    uint64_t ci = remat__gen_mul(w, C, (uint64_t)1 << i, "--channels");
    uint64_t cin = i == 0 ? CI : ci / 2, cn = remat__gen_mul(w, ci, 2, "--channels");
    MAKE(w, e1, p, (ci, cin, 3, 3), "e%" PRIu32 "_w1", i);
    MAKE(w, e2, p, (ci, ci, 3, 3), "e%" PRIu32 "_w2", i);
    if (i < d) {
        MAKE(w, wu, p, (cn, ci, 2, 2), "d%" PRIu32 "_wu", i);
        MAKE(w, d1, p, (ci, 2 * ci, 3, 3), "d%" PRIu32 "_w1", i);
        MAKE(w, d2, p, (ci, ci, 3, 3), "d%" PRIu32 "_w2", i);
    } else { /* the bottleneck is level d */
        MAKE(w, e1, p, (ci, cin, 3, 3), "mid_w1");
        MAKE(w, e2, p, (ci, ci, 3, 3), "mid_w2");
    }
}

int remat__gen_unet(gw *w, const remat_gen_opts *o, const char *name)
{
    if (!require(w, o->depth, 1, "--depth") || !require(w, o->batch, 1, "--batch") ||
        !require(w, o->channels, 1, "--channels") || !require(w, o->size, 1, "--size") ||
        !require(w, o->in_channels, 1, "--in-channels") || !require(w, o->classes, 1, "--classes") ||
        !require(w, o->elem_bytes, 1, "--elem-bytes"))
        return 0;
    if (o->depth > 20)
        return remat__gen_invalid(w, "--depth %" PRIu32 " is too deep (at most 20 levels)", o->depth);
    const uint32_t d = o->depth;
    if (o->size % (1u << d) != 0)
        return remat__gen_invalid(w, "--size (%" PRIu32 ") must be a multiple of 2^--depth (%u) so every level "
                                     "pools evenly",
                                  o->size, 1u << d);
    const uint64_t p = o->elem_bytes, N = o->batch, C = o->channels, S = o->size, CI = o->in_channels,
                   CO = o->classes;
    remat__gen_header(w, name, "unet");
    remat__gen_meta_u64(w, "depth", d);
    remat__gen_meta_u64(w, "batch", N);
    remat__gen_meta_u64(w, "channels", C);
    remat__gen_meta_u64(w, "size", S);
    remat__gen_meta_u64(w, "elem_bytes", p);
    remat__gen_meta_end(w);

    tns x, y, e1, e2, wu, d1, d2, head_w;
    list L = {0};
    MAKE(w, &x, p, (N, CI, S, S), "x");
    MAKE(w, &y, p, (N, CO, S, S), "y");
    remat_buf_puts(&w->b, " \"inputs\": [");
    leaf(w, &L, &x);
    leaf(w, &L, &y);
    remat_buf_puts(&w->b, "],\n \"params\": [");
    L.n = 0;
    for (uint32_t i = 0; i <= d && !w->bad; i++) {
        unet_params(w, p, C, CI, d, i, &e1, &e2, &wu, &d1, &d2);
        leaf(w, &L, &e1);
        leaf(w, &L, &e2);
        if (i < d) {
            leaf(w, &L, &wu);
            leaf(w, &L, &d1);
            leaf(w, &L, &d2);
        }
    }
    MAKE(w, &head_w, p, (CO, C, 1, 1), "head_w");
    leaf(w, &L, &head_w);
    remat_buf_puts(&w->b, "],\n \"ops\": [");
    if (w->bad)
        return 0;

    list ops = {0};
    tns skip[21], cur = x, pool, idx;
    uint64_t cin = CI;
    for (uint32_t i = 0; i < d; i++) {
        char pre[16];
        uint64_t ci = C << i, si = S >> i;
        unet_params(w, p, C, CI, d, i, &e1, &e2, &wu, &d1, &d2);
        snprintf(pre, sizeof pre, "e%" PRIu32, i);
        conv_relu2(w, &ops, &cur, &e1, &e2, p, N, ci, cin, si, pre, &skip[i]);
        /* Max-pool returns its argmax indices (int64) as a second output;
         * its backward scatters through them and reads the input's shape. */
        MAKE(w, &pool, p, (N, ci, si / 2, si / 2), "e%" PRIu32 "_pool", i);
        MAKE(w, &idx, 8, (N, ci, si / 2, si / 2), "e%" PRIu32 "_idx", i);
        op(w, &ops, &(opdesc){"maxpool", {&skip[i]}, 1, {&pool, &idx}, 2, {&skip[i], &idx}, 2, NULL,
                              remat__gen_mul(w, elems(&skip[i]), 1, pool.id)});
        cur = pool;
        cin = ci;
    }
    unet_params(w, p, C, CI, d, d, &e1, &e2, &wu, &d1, &d2);
    conv_relu2(w, &ops, &cur, &e1, &e2, p, N, C << d, cin, S >> d, "mid", &cur);
    for (uint32_t i = d; i-- > 0;) {
        char pre[16];
        uint64_t ci = C << i, si = S >> i;
        tns up, cat, out;
        unet_params(w, p, C, CI, d, i, &e1, &e2, &wu, &d1, &d2);
        MAKE(w, &up, p, (N, ci, si, si), "d%" PRIu32 "_up", i);
        /* A 2x2 stride-2 transposed conv: every input pixel feeds 4 outputs. */
        op(w, &ops, &(opdesc){"conv_transpose2d", {&cur, &wu}, 2, {&up}, 1, {0}, -1, NULL,
                              FLOPS(w, up.id, 2, N, 2 * ci, si / 2, si / 2, ci, 4)});
        MAKE(w, &cat, p, (N, 2 * ci, si, si), "d%" PRIu32 "_cat", i);
        /* Concat's backward slices the gradient: it saves nothing. */
        op(w, &ops, &(opdesc){"concat", {&up, &skip[i]}, 2, {&cat}, 1, {0}, 0, NULL, elems(&cat)});
        snprintf(pre, sizeof pre, "d%" PRIu32, i);
        conv_relu2(w, &ops, &cat, &d1, &d2, p, N, ci, 2 * ci, si, pre, &out);
        cur = out;
    }
    tns head, loss;
    MAKE(w, &head, p, (N, CO, S, S), "head");
    op(w, &ops, &(opdesc){"conv2d", {&cur, &head_w}, 2, {&head}, 1, {0}, -1, NULL,
                          FLOPS(w, "head", 2, N, CO, S, S, C)});
    MAKE(w, &loss, 4, (1), "loss");
    op(w, &ops, &(opdesc){"mse_loss", {&head, &y}, 2, {&loss}, 1, {0}, -1, NULL,
                          remat__gen_mul(w, elems(&head), 3, "loss")});
    remat__gen_footer(w);
    return 1;
}

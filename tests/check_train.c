/*
 * check_train.c - the real training step: kernels, optimizers, plans,
 * peaks, learning, state files and resumption.
 *
 * Oracles independent of the code under test:
 *   - every backward kernel against central finite differences of the
 *     forward kernels, in f64: |analytic - numeric| <= 1e-6 * max(1,
 *     |analytic|), with h = 1e-6 (truncation error ~h^2 = 1e-12, rounding
 *     ~eps/h = 2e-10, both far below the bound; a wrong formula is off by
 *     O(1));
 *   - the optimizers against their formulas written out again here, on a
 *     loss whose gradient is known in closed form;
 *   - plans against store-all: after K steps the parameters and optimizer
 *     state are memcmp-equal under sqrt(n), revolve, chain-dp and the other
 *     strategies that exist, and under random keep sets;
 *   - the trainer's allocator peak against remat_replay's accounted peak
 *     plus the ledger's optimizer state;
 *   - learning: a spiral and a regression reach losses that a model which
 *     ignores its input cannot reach (justified at each test);
 *   - resumption: a run split by a state file written and read back equals
 *     the uninterrupted run, bit for bit.
 * Test graphs are written in a small notation (see dsl()) that this file
 * turns into graph JSON, so every byte count is computed, not typed.
 */
#include "test_util.h"
#include "train/engine.h"
#include "util/util_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- graphs from a compact notation ---------------------------------------------
 *
 * Tokens separated by spaces:
 *   dtype=f32          the float dtype (default f64)
 *   P:w[4,5]           a param          F:w[4,5]  a frozen param
 *   I:x[3,4]           a float input    L:t[3]    an i64 input (class targets)
 *   y=type(a,b)[3,5]   an op with one output of that shape, followed by any of
 *                      {"attrs":...}  ~s1,s2 (its saves; "~" alone: none)
 *                      @base (a view of base; the shape may then be omitted)
 *                      +m[3]+r[3] (further outputs: a multi-output op)
 * The last op's first output is the graph's output (the loss). */
static void put_shape(remat_buf *b, const char *s, size_t n)
{
    remat_buf_puts(b, "[");
    remat_buf_putn(b, s, n);
    remat_buf_puts(b, "]");
}

static uint64_t shape_elems(const char *s, size_t n)
{
    uint64_t e = 1, v = 0;
    int any = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == ',') {
            if (any)
                e *= v;
            v = 0;
            any = 0;
        } else {
            v = v * 10 + (uint64_t)(s[i] - '0');
            any = 1;
        }
    }
    return e;
}

/* Parses "name[shape]" at p: returns the end, fills name and shape spans. */
static const char *name_shape(const char *p, const char **name, size_t *nlen, const char **shape, size_t *slen)
{
    *name = p;
    while (*p && *p != '[' && *p != '=' && *p != '(' && *p != ' ' && *p != '+' && *p != '{' && *p != '~' &&
           *p != '@')
        p++;
    *nlen = (size_t)(p - *name);
    *shape = NULL;
    *slen = 0;
    if (*p == '[') {
        *shape = ++p;
        while (*p != ']')
            p++;
        *slen = (size_t)(p - *shape);
        p++;
    }
    return p;
}

static char *dsl(const char *text)
{
    remat_buf in, pa, ops;
    remat_buf_init(&in);
    remat_buf_init(&pa);
    remat_buf_init(&ops);
    const char *dt = "f64";
    unsigned size = 8;
    char last[64] = "";
    const char *p = text;
    while (*p) {
        while (*p == ' ' || *p == '\n')
            p++;
        if (!*p)
            break;
        if (strncmp(p, "dtype=f32", 9) == 0) {
            dt = "f32";
            size = 4;
            p += 9;
            continue;
        }
        if (p[1] == ':') {
            char kind = p[0];
            const char *nm, *sh;
            size_t nl, sl;
            p = name_shape(p + 2, &nm, &nl, &sh, &sl);
            remat_buf *b = kind == 'P' || kind == 'F' ? &pa : &in;
            unsigned esz = kind == 'L' ? 8 : size;
            remat_buf_printf(b, "%s{\"id\":\"%.*s\",\"bytes\":%llu,\"dtype\":\"%s\",\"shape\":", b->len ? "," : "",
                             (int)nl, nm, (unsigned long long)(shape_elems(sh, sl) * esz), kind == 'L' ? "i64" : dt);
            put_shape(b, sh, sl);
            if (kind == 'F')
                remat_buf_puts(b, ",\"frozen\":true");
            remat_buf_puts(b, "}");
            continue;
        }
        /* An op. */
        const char *nm, *sh;
        size_t nl, sl;
        p = name_shape(p, &nm, &nl, &sh, &sl);
        ck_assert_msg(*p == '=', "dsl: expected '=' near '%s'", nm);
        const char *ty = ++p;
        while (*p != '(')
            p++;
        size_t tl = (size_t)(p - ty);
        const char *args = ++p;
        while (*p != ')')
            p++;
        size_t al = (size_t)(p - args);
        p++;
        const char *osh = NULL;
        size_t osl = 0;
        if (*p == '[') {
            osh = ++p;
            while (*p != ']')
                p++;
            osl = (size_t)(p - osh);
            p++;
        }
        remat_buf_printf(&ops, "%s{\"id\":\"%.*s\",\"op\":\"%.*s\",\"inputs\":[", ops.len ? "," : "", (int)nl, nm,
                         (int)tl, ty);
        for (size_t i = 0, s = 0; i <= al; i++)
            if (i == al || args[i] == ',') {
                remat_buf_printf(&ops, "%s\"%.*s\"", s ? "," : "", (int)(i - s), args + s);
                s = i + 1;
            }
        remat_buf_puts(&ops, "],\"flops\":10");
        snprintf(last, sizeof last, "%.*s", (int)nl, nm);
        int multi = 0, view = 0;
        char more[512] = "";
        while (*p && *p != ' ' && *p != '\n') {
            if (*p == '{') {
                const char *a = p;
                int depth = 0;
                do {
                    depth += *p == '{' ? 1 : *p == '}' ? -1 : 0;
                    p++;
                } while (depth > 0);
                remat_buf_printf(&ops, ",\"attrs\":%.*s", (int)(p - a), a);
            } else if (*p == '~') {
                const char *s = ++p;
                while (*p && *p != ' ' && *p != '\n' && *p != '@' && *p != '+' && *p != '{')
                    p++;
                remat_buf_puts(&ops, ",\"saves\":[");
                for (const char *q = s, *w = s; q <= p; q++)
                    if (q == p || *q == ',') {
                        if (q > w)
                            remat_buf_printf(&ops, "%s\"%.*s\"", w == s ? "" : ",", (int)(q - w), w);
                        w = q + 1;
                    }
                remat_buf_puts(&ops, "]");
            } else if (*p == '@') {
                const char *s = ++p;
                while (*p && *p != ' ' && *p != '\n' && *p != '~' && *p != '{')
                    p++;
                remat_buf_printf(&ops, ",\"alias_of\":\"%.*s\"", (int)(p - s), s);
                view = 1;
            } else if (*p == '+') {
                const char *mn, *ms;
                size_t mnl, msl;
                p = name_shape(p + 1, &mn, &mnl, &ms, &msl);
                size_t used = strlen(more);
                snprintf(more + used, sizeof more - used, ",{\"id\":\"%.*s\",\"bytes\":%llu,\"shape\":[%.*s]}",
                         (int)mnl, mn, (unsigned long long)(shape_elems(ms, msl) * size), (int)msl, ms);
                multi = 1;
            } else {
                ck_abort_msg("dsl: unexpected '%c' after op %s", *p, last);
            }
        }
        if (multi) {
            remat_buf_printf(&ops, ",\"outputs\":[{\"id\":\"%.*s\",\"bytes\":%llu,\"shape\":[%.*s]}%s]}", (int)nl, nm,
                             (unsigned long long)(shape_elems(osh, osl) * size), (int)osl, osh, more);
            continue;
        }
        if (osh) {
            remat_buf_puts(&ops, ",\"shape\":");
            put_shape(&ops, osh, osl);
        }
        if (!view)
            remat_buf_printf(&ops, ",\"bytes\":%llu", (unsigned long long)(shape_elems(osh, osl) * size));
        remat_buf_printf(&ops, ",\"dtype\":\"%s\"}", dt);
    }
    remat_buf out;
    remat_buf_init(&out);
    remat_buf_printf(&out,
                     "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"t\",\"inputs\":[%s],\"params\":[%s],"
                     "\"ops\":[%s],\"outputs\":[\"%s\"]}",
                     in.data ? in.data : "", pa.data ? pa.data : "", ops.data ? ops.data : "", last);
    remat_buf_destroy(&in);
    remat_buf_destroy(&pa);
    remat_buf_destroy(&ops);
    ck_assert(!out.failed);
    char *s = malloc(out.len + 1);
    memcpy(s, out.data, out.len + 1);
    remat_buf_destroy(&out);
    return s;
}

static remat_analysis *analyze_dsl(const char *text, remat_graph **g)
{
    char *json = dsl(text);
    remat_analysis *a = t_analyze(json, g);
    free(json);
    return a;
}

static remat_trainer *trainer_of(const remat_analysis *a)
{
    remat_trainer *tr = NULL;
    remat_err err;
    remat_err_init(&err);
    remat_status st = remat_trainer_create(a, &tr, &err);
    ck_assert_msg(st == REMAT_OK, "trainer: %s", err.msg);
    return tr;
}

static void store_all(const remat_analysis *a, remat_schedule *s)
{
    remat_err err;
    remat_err_init(&err);
    remat_schedule_init(s);
    ck_assert_int_eq(remat_schedule_store_all(a, s, &err), REMAT_OK);
}

/* Deterministic values in [-1, 1), independent of the code under test. */
static double det_uniform(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* ---- gradient checks ------------------------------------------------------------ */

/* Every op type, alone or in the combinations its variants need; each loss
 * is a sum of the op's output weighted by an input r (so every output
 * element has its own gradient) unless the op is a loss itself. */
static const char *const GRADCHECK[] = {
    /* linear: 2-D and 3-D x, with and without bias */
    "P:x[3,4] P:w[4,5] P:b[5] I:r[3,5] h=linear(x,w,b)[3,5] m=mul(h,r)[3,5] l=sum(m)[]",
    "P:x[2,3,4] P:w[4,2] I:r[2,3,2] h=linear(x,w)[2,3,2] m=mul(h,r)[2,3,2] l=sum(m)[]",
    /* matmul: 2-D, batched, A shared, B shared, B a transposed view */
    "P:a[3,4] P:b[4,2] I:r[3,2] h=matmul(a,b)[3,2] m=mul(h,r)[3,2] l=sum(m)[]",
    "P:a[2,3,4] P:b[2,4,2] I:r[2,3,2] h=matmul(a,b)[2,3,2] m=mul(h,r)[2,3,2] l=sum(m)[]",
    "P:a[3,4] P:b[2,4,2] I:r[2,3,2] h=matmul(a,b)[2,3,2] m=mul(h,r)[2,3,2] l=sum(m)[]",
    "P:a[2,3,4] P:b[4,2] I:r[2,3,2] h=matmul(a,b)[2,3,2] m=mul(h,r)[2,3,2] l=sum(m)[]",
    "P:a[3,4] P:p[2,4] bt=transpose(p)[4,2]@p h=matmul(a,bt)[3,2] I:r[3,2] m=mul(h,r)[3,2] l=sum(m)[]",
    /* add and mul with broadcasting, and an operand used twice */
    "P:a[3,4] P:b[4] I:r[3,4] h=add(a,b)[3,4] m=mul(h,r)[3,4] l=sum(m)[]",
    "P:a[3,1] P:b[1,4] I:r[3,4] h=mul(a,b)[3,4] m=mul(h,r)[3,4] l=sum(m)[]",
    "P:a[3,4] I:r[3,4] h=mul(a,a)[3,4] k=add(h,a)[3,4] m=mul(k,r)[3,4] l=sum(m)[]",
    /* unary ops: the backward reading the output, and reading the input */
    "P:x[3,4] I:r[3,4] h=relu(x)[3,4]~h m=mul(h,r)[3,4] l=sum(m)[]",
    "P:x[3,4] I:r[3,4] h=relu(x)[3,4]~x m=mul(h,r)[3,4] l=sum(m)[]",
    "P:x[3,4] I:r[3,4] h=tanh(x)[3,4]~h m=mul(h,r)[3,4] l=sum(m)[]",
    "P:x[3,4] I:r[3,4] h=tanh(x)[3,4]~x m=mul(h,r)[3,4] l=sum(m)[]",
    "P:x[3,4] I:r[3,4] h=sigmoid(x)[3,4]~h m=mul(h,r)[3,4] l=sum(m)[]",
    "P:x[3,4] I:r[3,4] h=sigmoid(x)[3,4]~x m=mul(h,r)[3,4] l=sum(m)[]",
    "P:x[3,4] I:r[3,4] h=gelu(x)[3,4] m=mul(h,r)[3,4] l=sum(m)[]",
    "P:x[3,4] I:r[3,4] h=gelu(x)[3,4]{\"approximate\":\"tanh\"} m=mul(h,r)[3,4] l=sum(m)[]",
    /* layer norm: y only; y, mean, rstd saved; no affine weights */
    "P:x[3,5] P:g[5] P:b[5] I:r[3,5] h=layer_norm(x,g,b)[3,5] m=mul(h,r)[3,5] l=sum(m)[]",
    "P:x[2,3,5] P:g[5] P:b[5] I:r[2,3,5] h=layer_norm(x,g,b)[2,3,5]+mu[2,3]+rs[2,3]~x,g,mu,rs m=mul(h,r)[2,3,5] "
    "l=sum(m)[]",
    "P:x[3,5] I:r[3,5] h=layer_norm(x)[3,5]{\"eps\":0.001} m=mul(h,r)[3,5] l=sum(m)[]",
    /* softmax over the last dimension */
    "P:x[3,4] I:r[3,4] h=softmax(x)[3,4]~h m=mul(h,r)[3,4] l=sum(m)[]",
    /* losses: cross-entropy (mean and sum), mse with a learnable target */
    "P:x[4,3] L:t[4] l=cross_entropy(x,t)[]",
    "P:x[2,2,3] L:t[2,2] l=cross_entropy(x,t)[]{\"reduction\":\"sum\"}",
    "P:p[3,2] P:q[3,2] l=mse_loss(p,q)[]",
    /* reductions: over one dimension, keepdim, and mean */
    "P:x[3,4] I:r[3] s=sum(x)[3]{\"dim\":1} m=mul(s,r)[3] l=sum(m)[]",
    "P:x[3,4] I:r[1,4] s=mean(x)[1,4]{\"dim\":0,\"keepdim\":true} m=mul(s,r)[1,4] l=sum(m)[]",
    "P:x[2,3,4] l=mean(x)[]",
    /* views and copies: a reshape view, a reshape copy of a transposed view,
     * a transpose copy, a permute view read by matmul */
    "P:x[3,4] I:r[2,6] v=reshape(x)[2,6]@x m=mul(v,r)[2,6] l=sum(m)[]",
    "P:x[3,4] I:r[2,6] t=transpose(x)[4,3]@x v=reshape(t)[2,6] m=mul(v,r)[2,6] l=sum(m)[]",
    "P:x[3,4] I:r[4,3] v=transpose(x)[4,3]{\"dims\":[0,1]} m=mul(v,r)[4,3] l=sum(m)[]",
    "P:x[2,3,4] P:w[3,2] v=permute(x)[2,4,3]{\"dims\":[0,2,1]}@x h=matmul(v,w)[2,4,2] I:r[2,4,2] m=mul(h,r)[2,4,2] "
    "l=sum(m)[]",
};

static double ld_f64(const uint8_t *p, uint64_t i)
{
    double v;
    memcpy(&v, p + 8 * i, 8);
    return v;
}

static void gradcheck(const char *text)
{
    remat_graph *g;
    remat_analysis *a = analyze_dsl(text, &g);
    remat_trainer *tr = trainer_of(a);
    remat_err err;
    remat_err_init(&err);
    remat_optim o;
    ck_assert_int_eq(remat_optim_init(&o, REMAT_LEDGER_SGD, &err), REMAT_OK);
    remat_model_state st;
    ck_assert_int_eq(remat_trainer_init_state(tr, &o, 7, &st, &err), REMAT_OK);
    /* Every param uniform in [-1, 1): away from the init's zeros and ones. */
    uint64_t rs = 0x9E3779B97F4A7C15ULL;
    for (uint32_t t = 0; t < g->n_tensors; t++)
        for (uint64_t i = 0; st.value[t] && i < g->tensors[t].bytes / 8; i++) {
            double v = det_uniform(&rs);
            memcpy(st.value[t] + 8 * i, &v, 8);
        }
    remat_batch b;
    ck_assert_int_eq(remat_batch_alloc(tr, &b, &err), REMAT_OK);
    ck_assert_int_eq(remat_trainer_synthetic_batch(tr, 3, 0, &b, &err), REMAT_OK);
    remat_schedule s;
    store_all(a, &s);
    uint8_t **grads = calloc(g->n_tensors, sizeof *grads);
    for (uint32_t t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].kind == REMAT_TENSOR_PARAM)
            grads[t] = calloc(1, g->tensors[t].logical_bytes + 1);
    double loss;
    remat_status rc = remat_train_gradients(tr, &s, &st, &b, grads, &loss, &err);
    ck_assert_msg(rc == REMAT_OK, "%s: %s", text, err.msg);
    ck_assert_msg(isfinite(loss), "%s: loss %g", text, loss);
    const double h = 1e-6;
    int checked = 0;
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        if (!grads[t])
            continue;
        for (uint64_t i = 0; i < g->tensors[t].bytes / 8; i++) {
            double x0 = ld_f64(st.value[t], i), lp, lm, v;
            v = x0 + h;
            memcpy(st.value[t] + 8 * i, &v, 8);
            ck_assert_int_eq(remat_train_gradients(tr, &s, &st, &b, NULL, &lp, &err), REMAT_OK);
            v = x0 - h;
            memcpy(st.value[t] + 8 * i, &v, 8);
            ck_assert_int_eq(remat_train_gradients(tr, &s, &st, &b, NULL, &lm, &err), REMAT_OK);
            memcpy(st.value[t] + 8 * i, &x0, 8);
            double numeric = (lp - lm) / (2 * h), analytic = ld_f64(grads[t], i);
            double bound = 1e-6 * fmax(1.0, fabs(analytic));
            ck_assert_msg(fabs(analytic - numeric) <= bound, "%s: d loss / d %s[%llu]: analytic %.12g, numeric %.12g",
                          text, g->tensors[t].id, (unsigned long long)i, analytic, numeric);
            checked++;
        }
    }
    ck_assert_int_gt(checked, 0);
    for (uint32_t t = 0; t < g->n_tensors; t++)
        free(grads[t]);
    free(grads);
    remat_schedule_destroy(&s);
    remat_batch_destroy(&b);
    remat_model_state_destroy(&st);
    remat_trainer_destroy(tr);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}

START_TEST(train_should_match_finite_differences_for_every_kernel)
{
    gradcheck(GRADCHECK[_i]);
}
END_TEST

/* ---- optimizers against their formulas ------------------------------------------- */

/* loss = sum(p * c): the gradient of p is c, whatever p is. */
START_TEST(train_should_update_as_the_optimizer_formulas_say)
{
    static const remat_ledger_optimizer kinds[] = {REMAT_LEDGER_SGD, REMAT_LEDGER_MOMENTUM, REMAT_LEDGER_ADAM,
                                                   REMAT_LEDGER_ADAMW};
    remat_graph *g;
    remat_analysis *a = analyze_dsl("P:p[3] I:c[3] m=mul(p,c)[3] l=sum(m)[]", &g);
    remat_trainer *tr = trainer_of(a);
    remat_schedule s;
    store_all(a, &s);
    uint32_t p = t_tensor(g, "p"), c = t_tensor(g, "c");
    for (size_t q = 0; q < 4; q++) {
        remat_err err;
        remat_err_init(&err);
        remat_optim o;
        ck_assert_int_eq(remat_optim_init(&o, kinds[q], &err), REMAT_OK);
        o.lr = 0.1;
        o.weight_decay = 0.05;
        remat_model_state st;
        ck_assert_int_eq(remat_trainer_init_state(tr, &o, 1, &st, &err), REMAT_OK);
        double w[3] = {0.5, -1.5, 2.0}, cv[3] = {0.3, -0.7, 1.1}, m1[3] = {0}, m2[3] = {0};
        memcpy(st.value[p], w, sizeof w);
        remat_batch b;
        ck_assert_int_eq(remat_batch_alloc(tr, &b, &err), REMAT_OK);
        memcpy(b.data[c], cv, sizeof cv);
        for (int k = 1; k <= 3; k++) {
            remat_step_result r;
            ck_assert_int_eq(remat_train_step(tr, &s, &st, &b, &r, &err), REMAT_OK);
            ck_assert_uint_eq(r.step, (uint64_t)k);
            for (int i = 0; i < 3; i++) {
                double gr = cv[i];
                switch (kinds[q]) {
                case REMAT_LEDGER_SGD: w[i] -= 0.1 * (gr + 0.05 * w[i]); break;
                case REMAT_LEDGER_MOMENTUM:
                    gr += 0.05 * w[i];
                    m1[i] = k == 1 ? gr : 0.9 * m1[i] + gr;
                    w[i] -= 0.1 * m1[i];
                    break;
                default: {
                    if (kinds[q] == REMAT_LEDGER_ADAMW)
                        w[i] *= 1 - 0.1 * 0.05;
                    else
                        gr += 0.05 * w[i];
                    m1[i] = 0.9 * m1[i] + 0.1 * gr;
                    m2[i] = 0.999 * m2[i] + 0.001 * gr * gr;
                    double mh = m1[i] / (1 - pow(0.9, k)), vh = m2[i] / (1 - pow(0.999, k));
                    w[i] -= 0.1 * mh / (sqrt(vh) + 1e-8);
                }
                }
                double got = ld_f64(st.value[p], (uint64_t)i);
                ck_assert_msg(fabs(got - w[i]) <= 1e-12 * fmax(1, fabs(w[i])), "%s step %d p[%d]: %.17g, expected %.17g",
                              remat_ledger_optimizer_name(kinds[q]), k, i, got, w[i]);
            }
        }
        if (kinds[q] == REMAT_LEDGER_ADAM || kinds[q] == REMAT_LEDGER_ADAMW)
            for (int i = 0; i < 3; i++) {
                ck_assert(fabs(ld_f64(st.state[0][p], (uint64_t)i) - m1[i]) <= 1e-14);
                ck_assert(fabs(ld_f64(st.state[1][p], (uint64_t)i) - m2[i]) <= 1e-14);
            }
        remat_batch_destroy(&b);
        remat_model_state_destroy(&st);
    }
    /* Optimizers the ledger knows but the trainer does not run. */
    remat_err err;
    remat_err_init(&err);
    remat_optim o;
    ck_assert_int_eq(remat_optim_init(&o, REMAT_LEDGER_LION, &err), REMAT_EUNSUPPORTED);
    ck_assert_msg_contains(&err, "lion is budgeted by the ledger but not executed");
    remat_schedule_destroy(&s);
    remat_trainer_destroy(tr);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* ---- plans ------------------------------------------------------------------------- */

/* A small transformer-like block: layer norm with saved statistics, a
 * projection, attention scores through a transposed view, softmax, gelu, a
 * residual add, a frozen param, and a cross-entropy loss. */
static const char *const BLOCK =
    "P:wi[2,8] P:g1[8] P:b1[8] P:wq[8,8] P:wk[8,8] F:wv[8,8] P:w2[8,8] P:wo[8,3] I:x[2,6,2] L:t[2,6] "
    "e=linear(x,wi)[2,6,8] n=layer_norm(e,g1,b1)[2,6,8]+mu[2,6]+rs[2,6]~e,g1,mu,rs "
    "q=linear(n,wq)[2,6,8] k=linear(n,wk)[2,6,8] v=linear(n,wv)[2,6,8] kt=transpose(k)[2,8,6]@k "
    "s=matmul(q,kt)[2,6,6] p=softmax(s)[2,6,6]~p c=matmul(p,v)[2,6,8] f=linear(c,w2)[2,6,8] u=gelu(f)[2,6,8] "
    "res=add(u,e)[2,6,8] o=linear(res,wo)[2,6,3] l=cross_entropy(o,t)[]";

static const char *const MLP3 = "P:w1[2,16] P:b1[16] P:w2[16,16] P:b2[16] P:w3[16,3] P:b3[3] I:x[32,2] L:t[32] "
                                "h1=linear(x,w1,b1)[32,16]~x,w1 a1=tanh(h1)[32,16]~a1 h2=linear(a1,w2,b2)[32,16]~a1,w2 "
                                "a2=relu(h2)[32,16]~a2 h3=linear(a2,w3,b3)[32,3]~a2,w3 l=cross_entropy(h3,t)[]";

static void run_steps(remat_trainer *tr, const remat_analysis *a, const remat_schedule *s, remat_optim *o, int k,
                      remat_model_state *st, uint64_t *rebuilt, double *last_loss)
{
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_trainer_init_state(tr, o, 11, st, &err), REMAT_OK);
    remat_batch b;
    ck_assert_int_eq(remat_batch_alloc(tr, &b, &err), REMAT_OK);
    remat_exec_extras x;
    memset(&x, 0, sizeof x);
    x.optimizer_state = st->state_bytes;
    remat_replay_result rr;
    ck_assert_int_eq(remat_replay(a, s, &x, NULL, &rr, &err), REMAT_OK);
    ck_assert(rr.valid);
    for (int i = 0; i < k; i++) {
        ck_assert_int_eq(remat_trainer_synthetic_batch(tr, 5, st->step, &b, &err), REMAT_OK);
        remat_step_result r;
        remat_status rc = remat_train_step(tr, s, st, &b, &r, &err);
        ck_assert_msg(rc == REMAT_OK, "step %d: %s", i, err.msg);
        ck_assert(r.verified && r.equal && r.mismatches == 0);
        /* The trainer's allocator against the replay with the ledger's
         * optimizer state, and against the replay without it plus the
         * state's own bytes. */
        ck_assert_uint_eq(r.measured_peak_bytes, r.accounted_peak_bytes);
        ck_assert_uint_eq(r.measured_peak_bytes, rr.peak_bytes);
        ck_assert_uint_eq(r.optimizer_state_bytes, st->state_bytes);
        if (rebuilt)
            *rebuilt += r.recomputed_tensors_checked;
        if (last_loss)
            *last_loss = r.loss;
    }
    remat_replay_result_destroy(&rr);
    remat_batch_destroy(&b);
}

static void bit_identical_under_plans(const char *text, const char *graph_file, remat_ledger_optimizer kind)
{
    remat_graph *g;
    remat_analysis *a;
    if (graph_file) {
        remat_err err;
        remat_err_init(&err);
        ck_assert_int_eq(remat_graph_load_file(graph_file, &g, &err), REMAT_OK);
        ck_assert_int_eq(remat_analyze(g, &a, &err), REMAT_OK);
    } else {
        a = analyze_dsl(text, &g);
    }
    remat_trainer *tr = trainer_of(a);
    remat_err err;
    remat_err_init(&err);
    remat_optim o;
    ck_assert_int_eq(remat_optim_init(&o, kind, &err), REMAT_OK);
    o.lr = 0.01;
    remat_schedule s;
    store_all(a, &s);
    remat_model_state ref;
    run_steps(tr, a, &s, &o, 4, &ref, NULL, NULL);
    remat_schedule_destroy(&s);
    int plans = 0, named = 0;
    uint64_t rebuilt = 0;
    /* Every strategy that exists, under the tightest of a few activation
     * budgets it meets (so that it recomputes), else unconstrained. */
    remat_replay_result base;
    store_all(a, &s);
    ck_assert_int_eq(remat_replay(a, &s, NULL, NULL, &base, &err), REMAT_OK);
    remat_schedule_destroy(&s);
    static const char *const names[] = {"sqrtn", "revolve", "chain-dp", "chen-greedy", "mincut", "dtr"};
    static const double fractions[] = {0.5, 0.7, 0.85, 0};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        remat_plan plan;
        remat_replay_result r;
        remat_status rc = REMAT_EINVAL;
        int missing = 0;
        for (size_t f = 0; f < sizeof fractions / sizeof fractions[0] && rc != REMAT_OK && !missing; f++) {
            remat_plan_options po;
            remat_plan_options_init(&po);
            po.strategy = names[i];
            if (fractions[f] > 0) {
                po.budget_kind = REMAT_BUDGET_ACTIVATION;
                po.budget = (uint64_t)(fractions[f] * (double)base.activation_peak);
            }
            remat_err_init(&err);
            rc = remat_plan_make(a, &po, &plan, &r, &err);
            missing = strstr(err.msg, "unknown strategy") != NULL;
            if (rc != REMAT_OK) {
                remat_plan_destroy(&plan);
                remat_replay_result_destroy(&r);
            }
        }
        if (rc != REMAT_OK)
            continue; /* not in this build, or no plan for this graph */
        remat_replay_result_destroy(&r);
        remat_model_state st;
        run_steps(tr, a, &plan.schedule, &o, 4, &st, &rebuilt, NULL);
        char where[160];
        ck_assert_msg(remat_model_state_equal(&st, &ref, g, where, sizeof where), "%s: differs at %s", names[i], where);
        remat_model_state_destroy(&st);
        remat_plan_destroy(&plan);
        plans++;
        named++;
    }
    /* Random keep sets through the default policy. */
    uint64_t rs = 12345;
    uint8_t *keep = calloc(g->n_tensors, 1);
    for (int trial = 0; trial < 6; trial++) {
        for (uint32_t t = 0; t < g->n_tensors; t++)
            keep[t] = det_uniform(&rs) > 0.2 * trial - 0.5;
        remat_schedule ks;
        remat_schedule_init(&ks);
        ck_assert_int_eq(remat_schedule_from_keep(a, keep, &ks, &err), REMAT_OK);
        remat_model_state st;
        run_steps(tr, a, &ks, &o, 4, &st, &rebuilt, NULL);
        char where[160];
        ck_assert_msg(remat_model_state_equal(&st, &ref, g, where, sizeof where), "keep set %d: differs at %s", trial,
                      where);
        remat_model_state_destroy(&st);
        remat_schedule_destroy(&ks);
        plans++;
    }
    free(keep);
    remat_replay_result_destroy(&base);
    ck_assert_int_ge(named, 3); /* sqrtn, revolve and chain-dp at least */
    ck_assert_int_ge(plans, 9);
    ck_assert_uint_gt(rebuilt, 0); /* recomputation really happened, and was checked */
    remat_model_state_destroy(&ref);
    remat_trainer_destroy(tr);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}

START_TEST(train_should_give_the_same_state_under_every_plan_for_mlp423)
{
    char path[256];
    snprintf(path, sizeof path, "%s/../../graphs/mlp423.json", getenv("REMAT_FIXTURES") ? getenv("REMAT_FIXTURES")
                                                                                         : "tests/fixtures");
    bit_identical_under_plans(NULL, path, REMAT_LEDGER_ADAM);
}
END_TEST

START_TEST(train_should_give_the_same_state_under_every_plan_for_a_block)
{
    bit_identical_under_plans(BLOCK, NULL, REMAT_LEDGER_ADAMW);
}
END_TEST

START_TEST(train_should_give_the_same_state_under_every_plan_in_f32)
{
    char text[1024];
    snprintf(text, sizeof text, "dtype=f32 %s", MLP3);
    bit_identical_under_plans(text, NULL, REMAT_LEDGER_MOMENTUM);
}
END_TEST

/* A workspace, a view that holds its base and a multi-output op: the
 * trainer's allocator still peaks at the accounted bytes, step after step. */
START_TEST(train_should_measure_the_accounted_peak_with_workspace_and_views)
{
    remat_graph *g;
    char *json = dsl("P:w[4,4] P:g[4] I:x[8,4] I:r[8,4] h=linear(x,w)[8,4] v=reshape(h)[32]@h "
                     "n=layer_norm(h,g)[8,4]+mu[8]+rs[8]~h,g,mu,rs s=sum(v)[] m=mul(n,r)[8,4] q=sum(m)[] "
                     "l=add(q,s)[]");
    /* Give the projection a forward and a backward workspace. */
    char *at = strstr(json, "\"id\":\"h\",\"op\":\"linear\"");
    ck_assert_ptr_nonnull(at);
    size_t off = (size_t)(at - json) + strlen("\"id\":\"h\",\"op\":\"linear\"");
    char *j2 = malloc(strlen(json) + 64);
    snprintf(j2, strlen(json) + 64, "%.*s,\"workspace\":1000,\"bwd_workspace\":3000%s", (int)off, json, json + off);
    remat_analysis *a = t_analyze(j2, &g);
    free(json);
    free(j2);
    remat_trainer *tr = trainer_of(a);
    remat_err err;
    remat_err_init(&err);
    remat_optim o;
    ck_assert_int_eq(remat_optim_init(&o, REMAT_LEDGER_ADAM, &err), REMAT_OK);
    uint8_t keep_none[64] = {0};
    remat_schedule s;
    remat_schedule_init(&s);
    ck_assert_int_eq(remat_schedule_from_keep(a, keep_none, &s, &err), REMAT_OK);
    remat_model_state st;
    uint64_t rebuilt = 0;
    run_steps(tr, a, &s, &o, 3, &st, &rebuilt, NULL);
    ck_assert_uint_gt(rebuilt, 0);
    /* The peak is the replay's with the ledger's Adam state: 2 x 20 f64. */
    remat_step_result r;
    remat_batch b;
    ck_assert_int_eq(remat_batch_alloc(tr, &b, &err), REMAT_OK);
    ck_assert_int_eq(remat_train_step(tr, &s, &st, &b, &r, &err), REMAT_OK);
    ck_assert_uint_eq(r.optimizer_state_bytes, 2 * 20 * 8);
    ck_assert_uint_eq(r.accounted_peak_bytes, r.replay_peak_bytes + 320);
    ck_assert_uint_eq(r.measured_peak_bytes, r.accounted_peak_bytes);
    remat_batch_destroy(&b);
    remat_model_state_destroy(&st);
    remat_schedule_destroy(&s);
    remat_trainer_destroy(tr);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* The engine's judge re-derives the peak from remat_replay's allocation
 * events; workspace the extras hold for the whole step must count once,
 * beside each op's own transient workspace. */
START_TEST(engine_should_judge_extras_as_the_replay_counts_them)
{
    remat_graph *g;
    char *json = dsl("P:w[4,4] I:x[8,4] h=linear(x,w)[8,4] l=sum(h)[]");
    char *at = strstr(json, "\"op\":\"linear\"");
    ck_assert_ptr_nonnull(at);
    size_t off = (size_t)(at - json) + strlen("\"op\":\"linear\"");
    char *j2 = malloc(strlen(json) + 64);
    snprintf(j2, strlen(json) + 64, "%.*s,\"workspace\":500,\"bwd_workspace\":700%s", (int)off, json, json + off);
    remat_analysis *a = t_analyze(j2, &g);
    free(json);
    free(j2);
    remat_schedule s;
    store_all(a, &s);
    remat_exec_extras x;
    memset(&x, 0, sizeof x);
    x.optimizer_state = 256;
    x.workspace = 1000;
    x.comm_buffers = 24;
    for (uint64_t scale = 1; scale <= 7; scale += 6) {
        remat_replay_result r;
        uint64_t acct;
        remat_err err;
        remat_err_init(&err);
        ck_assert_int_eq(remat__engine_judge(a, &s, &x, scale, &r, &acct, &err), REMAT_OK);
        ck_assert(r.valid);
        if (scale == 1)
            ck_assert_uint_eq(acct, r.peak_bytes);
        else /* every term rounded up on its own: close to, and not below, peak / 7 */
            ck_assert(acct >= r.peak_bytes / 7 && acct <= r.peak_bytes / 7 + 16);
        remat_replay_result_destroy(&r);
    }
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* ---- learning -------------------------------------------------------------------------- */

/* Trains for `steps` steps; returns the mean loss of the last `window`
 * steps and the first step's loss in *first. */
static double mean_loss(remat_trainer *tr, const remat_schedule *s, remat_model_state *st, uint64_t seed, int steps,
                        int window, double *first)
{
    remat_err err;
    remat_err_init(&err);
    remat_batch b;
    ck_assert_int_eq(remat_batch_alloc(tr, &b, &err), REMAT_OK);
    double tail = 0;
    for (int k = 0; k < steps; k++) {
        ck_assert_int_eq(remat_trainer_synthetic_batch(tr, seed, st->step, &b, &err), REMAT_OK);
        remat_step_result r;
        ck_assert_int_eq(remat_train_step(tr, s, st, &b, &r, &err), REMAT_OK);
        if (k == 0)
            *first = r.loss;
        if (k >= steps - window)
            tail += r.loss / window;
    }
    remat_batch_destroy(&b);
    return tail;
}

/* A 3-class spiral (cs231n's: each arm winds 4 radians) with a 2-16-16-3
 * tanh/relu MLP and Adam, a fresh batch of 32 points per step. A
 * classifier that ignores its input cannot beat the entropy of uniform
 * classes, ln 3 = 1.0986, and the first step starts there; a linear one
 * cannot separate arms that wind around each other (it stays above 0.6).
 * A mean below 0.15 over the last 50 steps means about 86% of the
 * probability on the right class: the arms are told apart. */
START_TEST(train_should_learn_the_spiral)
{
    remat_graph *g;
    remat_analysis *a = analyze_dsl(MLP3, &g);
    remat_trainer *tr = trainer_of(a);
    ck_assert_int_eq(remat_trainer_task(tr), REMAT_TASK_SPIRAL);
    remat_err err;
    remat_err_init(&err);
    remat_optim o;
    ck_assert_int_eq(remat_optim_init(&o, REMAT_LEDGER_ADAM, &err), REMAT_OK);
    o.lr = 0.02;
    remat_model_state st;
    ck_assert_int_eq(remat_trainer_init_state(tr, &o, 1, &st, &err), REMAT_OK);
    remat_schedule s;
    store_all(a, &s);
    double first, tail = mean_loss(tr, &s, &st, 1, 1000, 50, &first);
    ck_assert_msg(first > 1.0, "first step: loss %g", first);
    ck_assert_msg(tail < 0.15, "last 50 steps: mean loss %g (first step: %g)", tail, first);
    remat_schedule_destroy(&s);
    remat_model_state_destroy(&st);
    remat_trainer_destroy(tr);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* mlp423 on its regression, y_j = sin(A_j x + j) with |A| <= 2 on x in
 * [-1, 1)^2, Adam at lr 0.01, a fresh batch of 16 per step. Predicting
 * each output's mean would leave its variance, about 0.3 to 0.5 per
 * output, and the first step starts near there; 0.01 over the last 30
 * steps is thirty times lower: the network has fit the function. */
START_TEST(train_should_learn_the_regression_of_mlp423)
{
    remat_graph *g;
    remat_analysis *a;
    remat_err err;
    remat_err_init(&err);
    char path[256];
    snprintf(path, sizeof path, "%s/../../graphs/mlp423.json", getenv("REMAT_FIXTURES") ? getenv("REMAT_FIXTURES")
                                                                                         : "tests/fixtures");
    ck_assert_int_eq(remat_graph_load_file(path, &g, &err), REMAT_OK);
    ck_assert_int_eq(remat_analyze(g, &a, &err), REMAT_OK);
    remat_trainer *tr = trainer_of(a);
    ck_assert_int_eq(remat_trainer_task(tr), REMAT_TASK_REGRESSION);
    ck_assert_uint_eq(remat_trainer_param_elements(tr, true), 423);
    remat_optim o;
    ck_assert_int_eq(remat_optim_init(&o, REMAT_LEDGER_ADAM, &err), REMAT_OK);
    o.lr = 0.01;
    remat_model_state st;
    ck_assert_int_eq(remat_trainer_init_state(tr, &o, 1, &st, &err), REMAT_OK);
    ck_assert_uint_eq(st.state_bytes, 6768);
    remat_schedule s;
    store_all(a, &s);
    double first, tail = mean_loss(tr, &s, &st, 1, 600, 30, &first);
    ck_assert_msg(first > 0.3, "first step: loss %g", first);
    ck_assert_msg(tail < 0.01, "last 30 steps: mean loss %g (first step: %g)", tail, first);
    remat_schedule_destroy(&s);
    remat_model_state_destroy(&st);
    remat_trainer_destroy(tr);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* ---- state files and resumption ------------------------------------------------------- */

static void reload(const remat_graph *g, const remat_model_state *st, remat_model_state *out)
{
    remat_err err;
    remat_err_init(&err);
    size_t len;
    char *text = remat_model_state_format(g, st, &len, &err);
    ck_assert_ptr_nonnull(text);
    remat_status rc = remat_model_state_load_json(g, text, len, "state.json", out, &err);
    ck_assert_msg(rc == REMAT_OK, "%s", err.msg);
    remat_free(text);
}

START_TEST(train_should_resume_from_a_state_file_exactly)
{
    for (int f32 = 0; f32 < 2; f32++) {
        char text[1024];
        snprintf(text, sizeof text, "%s%s", f32 ? "dtype=f32 " : "", MLP3);
        remat_graph *g;
        remat_analysis *a = analyze_dsl(text, &g);
        remat_trainer *tr = trainer_of(a);
        remat_err err;
        remat_err_init(&err);
        remat_optim o;
        ck_assert_int_eq(remat_optim_init(&o, REMAT_LEDGER_ADAM, &err), REMAT_OK);
        remat_schedule s;
        store_all(a, &s);
        remat_model_state whole, half, resumed;
        ck_assert_int_eq(remat_trainer_init_state(tr, &o, 3, &whole, &err), REMAT_OK);
        ck_assert_int_eq(remat_trainer_init_state(tr, &o, 3, &half, &err), REMAT_OK);
        double head;
        mean_loss(tr, &s, &whole, 9, 8, 1, &head);
        mean_loss(tr, &s, &half, 9, 5, 1, &head);
        reload(g, &half, &resumed);
        ck_assert(remat_model_state_equal(&half, &resumed, g, NULL, 0));
        ck_assert_uint_eq(resumed.step, 5);
        mean_loss(tr, &s, &resumed, 9, 3, 1, &head);
        char where[160];
        ck_assert_msg(remat_model_state_equal(&whole, &resumed, g, where, sizeof where), "differs at %s", where);
        remat_model_state_destroy(&whole);
        remat_model_state_destroy(&half);
        remat_model_state_destroy(&resumed);
        remat_schedule_destroy(&s);
        remat_trainer_destroy(tr);
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
    }
}
END_TEST

/* Values that decimal printing gets wrong unless it is exact. */
START_TEST(state_should_round_trip_every_bit)
{
    remat_graph *g;
    remat_analysis *a = analyze_dsl("P:p[8] I:c[8] m=mul(p,c)[8] l=sum(m)[]", &g);
    remat_trainer *tr = trainer_of(a);
    remat_err err;
    remat_err_init(&err);
    remat_optim o;
    ck_assert_int_eq(remat_optim_init(&o, REMAT_LEDGER_MOMENTUM, &err), REMAT_OK);
    remat_model_state st, back;
    ck_assert_int_eq(remat_trainer_init_state(tr, &o, 1, &st, &err), REMAT_OK);
    double v[8] = {0.1, -0.0, 5e-324, 1.7976931348623157e308, INFINITY, -INFINITY, 1.0 / 3.0, -2.2250738585072014e-308};
    uint32_t p = t_tensor(g, "p");
    memcpy(st.value[p], v, sizeof v);
    memcpy(st.state[0][p], v, sizeof v);
    st.step = 9007199254740991ULL;
    reload(g, &st, &back);
    ck_assert(remat_model_state_equal(&st, &back, g, NULL, 0));
    ck_assert_uint_eq(back.step, 9007199254740991ULL);
    ck_assert_double_eq(back.optim.momentum, 0.9);
    /* NaN reads back as NaN (its payload is not kept). */
    double nan = NAN;
    memcpy(st.value[p], &nan, 8);
    remat_model_state_destroy(&back);
    reload(g, &st, &back);
    double got;
    memcpy(&got, back.value[p], 8);
    ck_assert(isnan(got));
    remat_model_state_destroy(&back);
    remat_model_state_destroy(&st);
    remat_trainer_destroy(tr);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

static void state_fails(const remat_graph *g, const char *json, remat_status code, const char *substr)
{
    remat_model_state st;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_model_state_load_json(g, json, strlen(json), "s.json", &st, &err), code);
    ck_assert_msg_contains(&err, substr);
    ck_assert_ptr_null(st.value);
}

START_TEST(state_should_refuse_bad_files_naming_the_place)
{
    remat_graph *g;
    remat_analysis *a = analyze_dsl("P:p[2] F:q[2] I:c[2] m=mul(p,c)[2] k=mul(m,q)[2] l=sum(k)[]", &g);
    const char *head = "{\"format\": \"remat-state\", \"version\": 1, \"dtype\": \"f64\", \"step\": 1, "
                       "\"optimizer\": {\"name\": \"momentum\"}, ";
    char buf[512];
#define STATE(body) (snprintf(buf, sizeof buf, "%s%s}", head, body), buf)
    state_fails(g, "{\"format\": \"remat-state\"", REMAT_EPARSE, "s.json:1:");
    state_fails(g, "{}\n{}", REMAT_EPARSE, "s.json:2:1: unexpected text after the JSON value");
    state_fails(g, STATE("\"params\": {\"p\": {\"value\": [1, 2], \"momentum_buffer\": [0, 0]}}"), REMAT_EGRAPH,
                "param 'q' of graph 't' is missing");
    state_fails(g,
                STATE("\"params\": {\"p\": {\"value\": [1, 2, 3], \"momentum_buffer\": [0, 0]}, \"q\": {\"value\": "
                      "[1, 1]}}"),
                REMAT_EGRAPH, "params.p.value: more than the tensor's 2 elements");
    state_fails(g, STATE("\"params\": {\"p\": {\"value\": [1, 2]}, \"q\": {\"value\": [1, 1]}}"), REMAT_EGRAPH,
                "params.p: missing \"momentum_buffer\"");
    state_fails(g,
                STATE("\"params\": {\"p\": {\"value\": [1, 2], \"momentum_buffer\": [0, 0]}, \"q\": {\"value\": [1, "
                      "1], \"momentum_buffer\": [0, 0]}}"),
                REMAT_EGRAPH, "param 'q' is frozen");
    state_fails(g, STATE("\"params\": {\"z\": {\"value\": [1]}}"), REMAT_EGRAPH, "graph 't' has no param 'z'");
    state_fails(g, STATE("\"params\": {\"p\": {\"value\": [1, \"x\"]}}"), REMAT_EGRAPH,
                "params.p.value: element 1 is not a number");
    state_fails(g,
                "{\"format\": \"remat-state\", \"version\": 1, \"dtype\": \"f64\", \"step\": 1, \"optimizer\": "
                "{\"name\": \"lion\"}, \"params\": {}}",
                REMAT_EGRAPH, "optimizer.name: optimizer lion is budgeted");
    state_fails(g, "{\"format\": \"remat-state\", \"version\": 2}", REMAT_EGRAPH, "version: unsupported");
    state_fails(g, "{\"format\": \"remat-state\", \"version\": 1, \"extra\": 1}", REMAT_EGRAPH,
                "unknown field 'extra'");
#undef STATE
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(data_should_load_batches_and_refuse_bad_ones)
{
    remat_graph *g;
    remat_analysis *a = analyze_dsl("P:w[2,3] I:x[2,2] L:t[2] h=linear(x,w)[2,3] l=cross_entropy(h,t)[]", &g);
    remat_trainer *tr = trainer_of(a);
    remat_err err;
    remat_err_init(&err);
    const char *good = "{\"format\": \"remat-data\", \"version\": 1, \"batches\": ["
                       "{\"x\": [[0.5, -1], [2, 0.25]], \"t\": [0, 2]}, {\"x\": [1, 2, 3, 4], \"t\": [1, 1]}]}";
    remat_dataset d;
    ck_assert_int_eq(remat_dataset_load_json(g, good, strlen(good), "d.json", &d, &err), REMAT_OK);
    ck_assert_uint_eq(d.n_batches, 2);
    remat_batch b;
    ck_assert_int_eq(remat_batch_alloc(tr, &b, &err), REMAT_OK);
    remat_batch_from_dataset(tr, &d, 3, &b); /* step 3: batch 1 */
    uint32_t x = t_tensor(g, "x"), t = t_tensor(g, "t");
    ck_assert_double_eq(ld_f64(b.data[x], 2), 3.0);
    int64_t t1;
    memcpy(&t1, b.data[t] + 8, 8);
    ck_assert_int_eq(t1, 1);
    remat_batch_from_dataset(tr, &d, 0, &b);
    ck_assert_double_eq(ld_f64(b.data[x], 1), -1.0);
    /* A target outside the classes is refused when the step reads it. */
    int64_t bad = 3;
    memcpy(b.data[t], &bad, 8);
    remat_optim o;
    ck_assert_int_eq(remat_optim_init(&o, REMAT_LEDGER_SGD, &err), REMAT_OK);
    remat_model_state st;
    ck_assert_int_eq(remat_trainer_init_state(tr, &o, 1, &st, &err), REMAT_OK);
    remat_schedule s;
    store_all(a, &s);
    remat_step_result r;
    ck_assert_int_eq(remat_train_step(tr, &s, &st, &b, &r, &err), REMAT_EPARSE);
    ck_assert_msg_contains(&err, "target 3 in row 0 of 't' is not a class in [0, 3)");
    remat_schedule_destroy(&s);
    remat_model_state_destroy(&st);
    remat_batch_destroy(&b);
    remat_dataset_destroy(&d);
    static const struct {
        const char *json, *msg;
    } bads[] = {
        {"{\"format\": \"remat-data\", \"version\": 1, \"batches\": []}", "batches: must be a non-empty array"},
        {"{\"format\": \"remat-data\", \"version\": 1, \"batches\": [{\"x\": [1, 2, 3], \"t\": [0, 1]}]}",
         "batches[0].x: 3 elements, but tensor 'x' has 4"},
        {"{\"format\": \"remat-data\", \"version\": 1, \"batches\": [{\"x\": [1, 2, 3, 4]}]}",
         "batches[0]: input 't' is missing"},
        {"{\"format\": \"remat-data\", \"version\": 1, \"batches\": [{\"x\": [1, 2, 3, 4], \"t\": [0.5, 1]}]}",
         "batches[0].t: element 0 is not a whole number"},
        {"{\"format\": \"remat-data\", \"version\": 1, \"batches\": [{\"w\": [1]}]}", "graph 't' has no input 'w'"},
    };
    for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++) {
        remat_err_init(&err);
        ck_assert_int_eq(remat_dataset_load_json(g, bads[i].json, strlen(bads[i].json), "d.json", &d, &err),
                         REMAT_EGRAPH);
        ck_assert_msg_contains(&err, bads[i].msg);
    }
    remat_trainer_destroy(tr);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* ---- graphs that cannot be executed ------------------------------------------------------ */

static void refuses(const char *json, remat_status code, const char *substr)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(json, &g);
    remat_trainer *tr = NULL;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_trainer_create(a, &tr, &err), code);
    ck_assert_ptr_null(tr);
    ck_assert_msg_contains(&err, substr);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}

static void refuses_dsl(const char *text, remat_status code, const char *substr)
{
    char *json = dsl(text);
    refuses(json, code, substr);
    free(json);
}

START_TEST(train_should_refuse_graphs_it_cannot_execute)
{
    /* The first unsupported op in forward order, with the supported list. */
    refuses_dsl("P:x[3,4] h=conv2d(x)[3,4] k=softmax_cross(h)[] l=sum(k)[]", REMAT_EUNSUPPORTED,
                "op 'h' has type 'conv2d', which remat cannot execute (executable ops: linear, matmul");
    /* mlp2: leaves without shapes. */
    char path[256];
    snprintf(path, sizeof path, "%s/../../graphs/mlp2.json",
             getenv("REMAT_FIXTURES") ? getenv("REMAT_FIXTURES") : "tests/fixtures");
    char *text;
    size_t len;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat__read_file(path, &text, &len, &err), REMAT_OK);
    refuses(text, REMAT_EUNSUPPORTED, "input 'x' has no shape");
    remat__free(text);
    /* Types, shapes, attrs, saves, outputs. */
    refuses(
        "{\"format\":\"remat-graph\",\"version\":1,\"params\":[{\"id\":\"w\",\"bytes\":8,\"dtype\":\"bf16\","
        "\"shape\":[4]}],\"ops\":[{\"id\":\"l\",\"op\":\"sum\",\"inputs\":[\"w\"],\"bytes\":2,\"flops\":1}],"
        "\"outputs\":[\"l\"]}",
        REMAT_EUNSUPPORTED, "param 'w' has dtype 'bf16'");
    refuses(
        "{\"format\":\"remat-graph\",\"version\":1,\"params\":[{\"id\":\"w\",\"bytes\":32,\"dtype\":\"f64\","
        "\"shape\":[4]}],\"ops\":[{\"id\":\"h\",\"op\":\"relu\",\"inputs\":[\"w\"],\"bytes\":32,\"dtype\":\"f64\","
        "\"shape\":[4],\"flops\":4,\"saves\":[\"h\"],\"grad_views\":true},{\"id\":\"l\",\"op\":\"sum\","
        "\"inputs\":[\"h\"],\"bytes\":8,\"dtype\":\"f64\",\"shape\":[],\"flops\":4,\"saves\":[]}],\"outputs\":[\"l\"]}",
        REMAT_EGRAPH, "op 'h' (relu): grad_views is set, but this op's executable backward writes whole gradients");
    refuses_dsl("P:a[3,4] P:b[5,2] h=matmul(a,b)[3,2] l=sum(h)[]", REMAT_EGRAPH,
                "op 'h' (matmul): inner dimensions differ: 'a' [3, 4] and 'b' [5, 2]");
    refuses_dsl("P:a[3,4] P:b[4,2] h=matmul(a,b)[3,3] l=sum(h)[]", REMAT_EGRAPH,
                "op 'h' (matmul): output 'h' has shape [3, 3], expected [3, 2]");
    refuses_dsl("P:a[3,4] P:b[2,4] h=add(a,b)[3,4] l=sum(h)[]", REMAT_EGRAPH, "do not broadcast");
    refuses_dsl("P:x[3,4] P:w[4,2] h=linear(x,w)[3,2]~x l=sum(h)[]", REMAT_EGRAPH,
                "op 'h' (linear): its backward step reads 'w' (for the gradient of the first input), which its "
                "saves do not list");
    refuses_dsl("P:x[3,4] h=relu(x)[3,4]~ l=sum(h)[]", REMAT_EGRAPH, "its saves list neither");
    refuses_dsl("P:x[3,4] h=softmax(x)[3,4]{\"dim\":0}~h l=sum(h)[]", REMAT_EGRAPH,
                "softmax runs over the last dimension only");
    refuses_dsl("P:x[3,4] h=layer_norm(x)[3,4]{\"eps\":\"small\"} l=sum(h)[]", REMAT_EGRAPH,
                "attrs.eps (op 'h'): must be a number");
    refuses_dsl("P:x[3,4] t=transpose(x)[4,3]@x v=reshape(t)[12]@t l=sum(v)[]", REMAT_EGRAPH,
                "a reshape view needs a contiguous input");
    refuses_dsl("P:x[3,4] L:t[3] h=relu(t)[3]~t l=sum(h)[]", REMAT_EGRAPH, "integer tensors are cross_entropy targets");
    refuses_dsl("P:x[3,4] h=relu(x)[3,4]~h", REMAT_EUNSUPPORTED, "the loss 'h' has 12 elements");
    refuses_dsl("P:x[3,4] h=layer_norm(x)[3,4]+mu[3]+rs[3] k=sum(mu)[] l=sum(h)[] z=add(l,k)[]", REMAT_EGRAPH,
                "a gradient flows into its statistics output 'mu'");
    remat_analysis_destroy(NULL);
}
END_TEST

/* Every allocation of a step, of the trainer's preparation and of the
 * state file's round trip can fail; each failure is reported as out of
 * memory, and nothing leaks (the sanitizer build checks that). */
START_TEST(train_should_fail_cleanly_at_every_allocation)
{
    remat_graph *g;
    remat_analysis *a = analyze_dsl("P:w1[2,4] P:g[4] P:w2[4,3] I:x[5,2] L:t[5] h=linear(x,w1)[5,4] "
                                    "n=layer_norm(h,g)[5,4]+mu[5]+rs[5]~h,g,mu,rs ht=transpose(n)[4,5]@n "
                                    "nt=transpose(ht)[5,4]@ht o=linear(nt,w2)[5,3] l=cross_entropy(o,t)[]",
                                    &g);
    remat_err err;
    remat_err_init(&err);
    uint8_t *keep = calloc(g->n_tensors, 1);
    remat_schedule s;
    remat_schedule_init(&s);
    ck_assert_int_eq(remat_schedule_from_keep(a, keep, &s, &err), REMAT_OK);
    free(keep);
    int failures = 0, done = 0;
    for (uint64_t n = 1; n < 100000 && !done; n++) {
        remat_err_init(&err);
        remat_trainer *tr = NULL;
        remat_model_state st, back;
        remat_model_state_init(&st);
        remat_model_state_init(&back);
        remat_batch b;
        memset(&b, 0, sizeof b);
        remat_optim o;
        ck_assert_int_eq(remat_optim_init(&o, REMAT_LEDGER_ADAM, &err), REMAT_OK);
        remat__alloc_fail_at(n);
        remat_status rc = remat_trainer_create(a, &tr, &err);
        if (rc == REMAT_OK)
            rc = remat_trainer_init_state(tr, &o, 1, &st, &err);
        if (rc == REMAT_OK)
            rc = remat_batch_alloc(tr, &b, &err);
        if (rc == REMAT_OK)
            rc = remat_trainer_synthetic_batch(tr, 1, 0, &b, &err);
        remat_step_result r;
        if (rc == REMAT_OK)
            rc = remat_train_step(tr, &s, &st, &b, &r, &err);
        char *text = NULL;
        size_t len = 0;
        if (rc == REMAT_OK && !(text = remat_model_state_format(g, &st, &len, &err)))
            rc = err.code;
        if (rc == REMAT_OK)
            rc = remat_model_state_load_json(g, text, len, "s.json", &back, &err);
        remat__alloc_fail_at(0);
        remat_free(text);
        if (rc == REMAT_OK) {
            ck_assert(r.verified);
            ck_assert(remat_model_state_equal(&st, &back, g, NULL, 0));
            done = 1;
        } else {
            ck_assert_msg(rc == REMAT_ENOMEM, "allocation %llu: %s", (unsigned long long)n, err.msg);
            ck_assert_msg(strstr(err.msg, "out of memory") || strstr(err.msg, "cannot allocate"), "%s", err.msg);
            failures++;
        }
        remat_model_state_destroy(&back);
        remat_model_state_destroy(&st);
        remat_batch_destroy(&b);
        remat_trainer_destroy(tr);
    }
    ck_assert(done);
    ck_assert_int_gt(failures, 30);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

Suite *train_suite(void)
{
    Suite *s = suite_create("train");
    TCase *tc = tcase_create("kernels");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, train_should_match_finite_differences_for_every_kernel, 0,
                        (int)(sizeof GRADCHECK / sizeof GRADCHECK[0]));
    tcase_add_test(tc, train_should_update_as_the_optimizer_formulas_say);
    tcase_add_test(tc, train_should_refuse_graphs_it_cannot_execute);
    suite_add_tcase(s, tc);
    tc = tcase_create("plans");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, train_should_give_the_same_state_under_every_plan_for_mlp423);
    tcase_add_test(tc, train_should_give_the_same_state_under_every_plan_for_a_block);
    tcase_add_test(tc, train_should_give_the_same_state_under_every_plan_in_f32);
    tcase_add_test(tc, train_should_measure_the_accounted_peak_with_workspace_and_views);
    tcase_add_test(tc, engine_should_judge_extras_as_the_replay_counts_them);
    suite_add_tcase(s, tc);
    tc = tcase_create("learning");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, train_should_learn_the_spiral);
    tcase_add_test(tc, train_should_learn_the_regression_of_mlp423);
    suite_add_tcase(s, tc);
    tc = tcase_create("state");
    tcase_add_test(tc, train_should_resume_from_a_state_file_exactly);
    tcase_add_test(tc, state_should_round_trip_every_bit);
    tcase_add_test(tc, state_should_refuse_bad_files_naming_the_place);
    tcase_add_test(tc, data_should_load_batches_and_refuse_bad_ones);
    suite_add_tcase(s, tc);
    tc = tcase_create("failure");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, train_should_fail_cleanly_at_every_allocation);
    suite_add_tcase(s, tc);
    return s;
}

/*
 * check_train.c - the real training step's parts: kernels, optimizers, the
 * graphs it refuses, and failure at every allocation. Whole runs (plans,
 * peaks, learning, state files and resumption) are in check_train_runs.c,
 * the same suite.
 *
 * Oracles independent of the code under test:
 *   - every backward kernel against central finite differences of the
 *     forward kernels, in f64: |analytic - numeric| <= 1e-6 * max(1,
 *     |analytic|), with h = 1e-6 (truncation error ~h^2 = 1e-12, rounding
 *     ~eps/h = 2e-10, both far below the bound; a wrong formula is off by
 *     O(1));
 *   - the optimizers against their formulas written out again here, on a
 *     loss whose gradient is known in closed form.
 * Test graphs are written in a small notation (see dsl()) that this file
 * turns into graph JSON, so every byte count is computed, not typed.
 */
#include "check_train.h"
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

char *dsl(const char *text)
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

remat_analysis *analyze_dsl(const char *text, remat_graph **g)
{
    char *json = dsl(text);
    remat_analysis *a = t_analyze(json, g);
    free(json);
    return a;
}

remat_trainer *trainer_of(const remat_analysis *a)
{
    remat_trainer *tr = NULL;
    remat_err err;
    remat_err_init(&err);
    remat_status st = remat_trainer_create(a, &tr, &err);
    ck_assert_msg(st == REMAT_OK, "trainer: %s", err.msg);
    return tr;
}

void store_all(const remat_analysis *a, remat_schedule *s)
{
    remat_err err;
    remat_err_init(&err);
    remat_schedule_init(s);
    ck_assert_int_eq(remat_schedule_store_all(a, s, &err), REMAT_OK);
}

/* Deterministic values in [-1, 1), independent of the code under test. */
double det_uniform(uint64_t *s)
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

double ld_f64(const uint8_t *p, uint64_t i)
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
    train_plans_tests(tc);
    suite_add_tcase(s, tc);
    tc = tcase_create("learning");
    tcase_set_timeout(tc, 60);
    train_learning_tests(tc);
    suite_add_tcase(s, tc);
    tc = tcase_create("state");
    train_state_tests(tc);
    suite_add_tcase(s, tc);
    tc = tcase_create("failure");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, train_should_fail_cleanly_at_every_allocation);
    suite_add_tcase(s, tc);
    return s;
}

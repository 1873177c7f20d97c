/*
 * oracle.c - the independent oracle: generated graphs and a naive replay.
 *
 * Everything here is computed from the spec and the instruction list alone
 * (see oracle.h for why): the generator and its JSON writer, the backward
 * pass of DESIGN 2, a closed-form bound on the peak, and a simulator that
 * sums live bytes from scratch at every step. Nothing here may call into
 * src/exec or read the analysis; the only remat names used are types and
 * enum constants.
 */
#include "oracle.h"

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static uint64_t rng_next(uint64_t *s)
{
    /* splitmix64: tiny, seedable, good enough to spread test cases. */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint32_t oracle_rnd(uint64_t *s, uint32_t n)
{
    return (uint32_t)(rng_next(s) % n);
}

static int add_tensor(spec *G, const char *id, int kind, int producer)
{
    ck_assert_int_lt(G->n_t, GN_T);
    int t = G->n_t++;
    snprintf(G->tid[t], sizeof G->tid[t], "%s", id);
    G->kind[t] = kind;
    G->alias[t] = -1;
    G->root[t] = t;
    G->producer[t] = producer;
    G->frozen[t] = G->rg[t] = G->is_out[t] = 0;
    G->view_bytes_given[t] = 0;
    return t;
}

static uint64_t rand_bytes(uint64_t *s)
{
    return oracle_rnd(s, 25) == 0 ? 0 : 1 + oracle_rnd(s, 4096);
}

int oracle_contains(const int *v, int n, int x)
{
    for (int i = 0; i < n; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

void spec_generate(uint64_t *s, spec *G)
{
    memset(G, 0, sizeof *G);
    char id[32];
    int n_inputs = 1 + (int)oracle_rnd(s, 2), n_params = 1 + (int)oracle_rnd(s, 4);
    for (int i = 0; i < n_inputs; i++) {
        snprintf(id, sizeof id, "x%d", i);
        int t = add_tensor(G, id, REMAT_TENSOR_INPUT, -1);
        G->bytes[t] = G->logical[t] = rand_bytes(s);
        G->rg[t] = oracle_rnd(s, 5) == 0;
    }
    for (int i = 0; i < n_params; i++) {
        snprintf(id, sizeof id, "w%d", i);
        int t = add_tensor(G, id, REMAT_TENSOR_PARAM, -1);
        G->bytes[t] = G->logical[t] = rand_bytes(s);
        G->frozen[t] = oracle_rnd(s, 4) == 0;
    }
    G->n_ops = 2 + (int)oracle_rnd(s, GN_OPS - 1);
    for (int k = 0; k < G->n_ops; k++) {
        snprintf(G->oid[k], sizeof G->oid[k], "k%d", k);
        /* Inputs: mostly recent activations (long chains), sometimes any
         * tensor (skip connections, leaves); a repeat (mul(x, x)) now and then. */
        G->n_in[k] = 1 + (int)oracle_rnd(s, GN_IN);
        for (int i = 0; i < G->n_in[k]; i++) {
            int t;
            if (G->n_t > n_inputs + n_params && oracle_rnd(s, 10) < 6) {
                int lo = G->n_t - 6 > n_inputs + n_params ? G->n_t - 6 : n_inputs + n_params;
                t = lo + (int)oracle_rnd(s, (uint32_t)(G->n_t - lo));
            } else {
                t = (int)oracle_rnd(s, (uint32_t)G->n_t);
            }
            G->in[k][i] = t;
        }
        G->multi[k] = oracle_rnd(s, 5) == 0;
        G->n_out[k] = G->multi[k] ? 2 + (int)oracle_rnd(s, GN_OUT - 1) : 1;
        for (int j = 0; j < G->n_out[k]; j++) {
            if (G->multi[k])
                snprintf(id, sizeof id, "k%d_%d", k, j);
            else
                snprintf(id, sizeof id, "k%d", k);
            int t = add_tensor(G, id, REMAT_TENSOR_ACTIVATION, k);
            G->out[k][j] = t;
            if (oracle_rnd(s, 100) < 15) { /* a view of one of the op's inputs */
                int base = G->in[k][oracle_rnd(s, (uint32_t)G->n_in[k])];
                G->alias[t] = base;
                G->root[t] = G->root[base];
                G->bytes[t] = 0;
                G->view_bytes_given[t] = oracle_rnd(s, 2);
                G->logical[t] = G->view_bytes_given[t] ? rand_bytes(s) : G->logical[base];
            } else {
                G->bytes[t] = G->logical[t] = rand_bytes(s);
            }
        }
        int view_op = !G->multi[k] && G->alias[G->out[k][0]] >= 0;
        G->flops_given[k] = !view_op || oracle_rnd(s, 2);
        G->flops[k] = G->flops_given[k] ? oracle_rnd(s, 100000) : 0;
        G->bwd_given[k] = oracle_rnd(s, 10) < 3;
        G->bwd_flops[k] = G->bwd_given[k] ? oracle_rnd(s, 200000) : 2 * G->flops[k];
        G->ws[k] = oracle_rnd(s, 10) < 3 ? 1 + oracle_rnd(s, 3000) : 0;
        G->bws[k] = oracle_rnd(s, 10) < 3 ? 1 + oracle_rnd(s, 3000) : 0;
        G->recomputable[k] = oracle_rnd(s, 10) != 0;
        /* Saves: the default (distinct inputs), or a random subset of
         * inputs and outputs, sometimes with any other activation (graphs
         * converted from joint graphs save what they like). */
        G->saves_given[k] = oracle_rnd(s, 4) != 0;
        G->n_save[k] = 0;
        if (!G->saves_given[k]) {
            for (int i = 0; i < G->n_in[k]; i++)
                if (!oracle_contains(G->save[k], G->n_save[k], G->in[k][i]))
                    G->save[k][G->n_save[k]++] = G->in[k][i];
        } else {
            for (int i = 0; i < G->n_in[k] + G->n_out[k]; i++) {
                int t = i < G->n_in[k] ? G->in[k][i] : G->out[k][i - G->n_in[k]];
                if (oracle_rnd(s, 2) && !oracle_contains(G->save[k], G->n_save[k], t))
                    G->save[k][G->n_save[k]++] = t;
            }
            if (oracle_rnd(s, 10) == 0) {
                int t = n_inputs + n_params + (int)oracle_rnd(s, (uint32_t)(G->n_t - n_inputs - n_params));
                if (!oracle_contains(G->save[k], G->n_save[k], t))
                    G->save[k][G->n_save[k]++] = t;
            }
        }
    }
    /* The loss is the last op's first output; sometimes a second output. */
    G->outputs[G->n_outputs++] = G->out[G->n_ops - 1][0];
    if (oracle_rnd(s, 10) < 3) {
        int t = n_inputs + n_params + (int)oracle_rnd(s, (uint32_t)(G->n_t - n_inputs - n_params));
        if (t != G->outputs[0])
            G->outputs[G->n_outputs++] = t;
    }
    for (int i = 0; i < G->n_outputs; i++)
        G->is_out[G->outputs[i]] = 1;
    /* File order: usually generation order (topological); sometimes
     * shuffled, so the analyzer must sort. */
    for (int k = 0; k < G->n_ops; k++)
        G->file_op[k] = k;
    if (oracle_rnd(s, 5) == 0) {
        for (int k = G->n_ops - 1; k > 0; k--) {
            int j = (int)oracle_rnd(s, (uint32_t)k + 1), x = G->file_op[k];
            G->file_op[k] = G->file_op[j];
            G->file_op[j] = x;
        }
        /* The loader sizes a view without "bytes" from its base at the
         * moment it reads the view, so a base defined later in the file
         * gives it 0 bytes (a loader bug, reported): shuffled files state
         * every view's size. Files in order still use the default. */
        for (int t = 0; t < G->n_t; t++)
            if (G->alias[t] >= 0)
                G->view_bytes_given[t] = 1;
    }
    for (int i = 0; i < G->n_ops; i++)
        G->file_pos[G->file_op[i]] = i;
}

typedef struct {
    char *p;
    size_t len, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void sb_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    ck_assert(w >= 0 && (size_t)w < b->cap - b->len);
    b->len += (size_t)w;
}

static void sb_ids(sbuf *b, const spec *G, const int *v, int n)
{
    sb_printf(b, "[");
    for (int i = 0; i < n; i++)
        sb_printf(b, "%s\"%s\"", i ? "," : "", G->tid[v[i]]);
    sb_printf(b, "]");
}

static void spec_write(const spec *G, sbuf *b)
{
    sb_printf(b, "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"gen\",\"inputs\":[");
    int first = 1;
    for (int t = 0; t < G->n_t; t++)
        if (G->kind[t] == REMAT_TENSOR_INPUT) {
            sb_printf(b, "%s{\"id\":\"%s\",\"bytes\":%llu%s}", first ? "" : ",", G->tid[t],
                      (unsigned long long)G->bytes[t], G->rg[t] ? ",\"requires_grad\":true" : "");
            first = 0;
        }
    sb_printf(b, "],\"params\":[");
    first = 1;
    for (int t = 0; t < G->n_t; t++)
        if (G->kind[t] == REMAT_TENSOR_PARAM) {
            sb_printf(b, "%s{\"id\":\"%s\",\"bytes\":%llu%s}", first ? "" : ",", G->tid[t],
                      (unsigned long long)G->bytes[t], G->frozen[t] ? ",\"frozen\":true" : "");
            first = 0;
        }
    sb_printf(b, "],\"ops\":[");
    for (int i = 0; i < G->n_ops; i++) {
        int k = G->file_op[i];
        sb_printf(b, "%s{\"id\":\"%s\",\"op\":\"f\",\"inputs\":", i ? "," : "", G->oid[k]);
        sb_ids(b, G, G->in[k], G->n_in[k]);
        if (G->multi[k])
            sb_printf(b, ",\"outputs\":[");
        for (int j = 0; j < G->n_out[k]; j++) {
            int t = G->out[k][j];
            if (G->multi[k])
                sb_printf(b, "%s{\"id\":\"%s\"", j ? "," : "", G->tid[t]);
            if (G->alias[t] >= 0) {
                sb_printf(b, ",\"alias_of\":\"%s\"", G->tid[G->alias[t]]);
                if (G->view_bytes_given[t])
                    sb_printf(b, ",\"bytes\":%llu", (unsigned long long)G->logical[t]);
            } else {
                sb_printf(b, ",\"bytes\":%llu", (unsigned long long)G->bytes[t]);
            }
            if (G->multi[k])
                sb_printf(b, "}");
        }
        if (G->multi[k])
            sb_printf(b, "]");
        if (G->flops_given[k])
            sb_printf(b, ",\"flops\":%llu", (unsigned long long)G->flops[k]);
        if (G->bwd_given[k])
            sb_printf(b, ",\"bwd_flops\":%llu", (unsigned long long)G->bwd_flops[k]);
        if (G->ws[k])
            sb_printf(b, ",\"workspace\":%llu", (unsigned long long)G->ws[k]);
        if (G->bws[k])
            sb_printf(b, ",\"bwd_workspace\":%llu", (unsigned long long)G->bws[k]);
        if (!G->recomputable[k])
            sb_printf(b, ",\"recomputable\":false");
        /* An op whose outputs are all views saves nothing by default
         * (graphs/README.md); the model's default is the distinct inputs,
         * so write them out. */
        int all_views = 1;
        for (int o = 0; o < G->n_out[k]; o++)
            all_views &= G->alias[G->out[k][o]] >= 0;
        if (G->saves_given[k] || all_views) {
            sb_printf(b, ",\"saves\":");
            sb_ids(b, G, G->save[k], G->n_save[k]);
        }
        sb_printf(b, "}");
    }
    sb_printf(b, "],\"outputs\":");
    sb_ids(b, G, G->outputs, G->n_outputs);
    sb_printf(b, "}");
}

size_t spec_json(const spec *G, char *buf, size_t cap)
{
    sbuf b = {buf, 0, cap};
    spec_write(G, &b);
    return b.len;
}

/* DESIGN 2: a gradient flows into t iff t needs one (a trainable param, an
 * input with requires_grad, or an activation computed from such a tensor)
 * and t reaches an output; an op has a backward step iff a gradient flows
 * into one of its outputs. Generation order is topological. */
void spec_derive(spec *G)
{
    uint8_t needs[GN_T] = {0}, reach[GN_T] = {0};
    for (int t = 0; t < G->n_t; t++)
        needs[t] = (G->kind[t] == REMAT_TENSOR_PARAM && !G->frozen[t]) || (G->kind[t] == REMAT_TENSOR_INPUT && G->rg[t]);
    for (int k = 0; k < G->n_ops; k++) {
        int any = 0;
        for (int i = 0; i < G->n_in[k]; i++)
            any |= needs[G->in[k][i]];
        for (int j = 0; j < G->n_out[k]; j++)
            needs[G->out[k][j]] = (uint8_t)any;
    }
    for (int t = 0; t < G->n_t; t++)
        reach[t] = (uint8_t)G->is_out[t];
    for (int k = G->n_ops - 1; k >= 0; k--) {
        int any = 0;
        for (int j = 0; j < G->n_out[k]; j++)
            any |= reach[G->out[k][j]];
        if (any)
            for (int i = 0; i < G->n_in[k]; i++)
                reach[G->in[k][i]] = 1;
    }
    for (int t = 0; t < G->n_t; t++)
        G->gflow[t] = needs[t] && reach[t];
    for (int k = 0; k < G->n_ops; k++) {
        G->has_bwd[k] = 0;
        for (int j = 0; j < G->n_out[k]; j++)
            G->has_bwd[k] |= G->gflow[G->out[k][j]];
    }
}

/* A closed-form lower bound on any valid schedule's peak: at op k's BWD,
 * the leaves, the storage of everything it saves, the gradients of its
 * outputs (which exist by then) and its backward workspace are live
 * together; at its FWD, the leaves, its inputs' storage and its workspace. */
uint64_t spec_lower_bound(const spec *G, uint64_t *leaves)
{
    *leaves = 0;
    for (int t = 0; t < G->n_t; t++)
        if (G->kind[t] != REMAT_TENSOR_ACTIVATION)
            *leaves += G->bytes[t];
    uint64_t best = *leaves;
    for (int k = 0; k < G->n_ops; k++) {
        int roots[GN_IN + GN_SAVE], nr = 0;
        uint64_t f = *leaves + G->ws[k], b = *leaves + G->bws[k];
        for (int i = 0; i < G->n_in[k]; i++) {
            int r = G->root[G->in[k][i]];
            if (G->kind[r] == REMAT_TENSOR_ACTIVATION && !oracle_contains(roots, nr, r)) {
                roots[nr++] = r;
                f += G->bytes[r];
            }
        }
        best = f > best ? f : best;
        if (!G->has_bwd[k])
            continue;
        nr = 0;
        for (int i = 0; i < G->n_save[k]; i++) {
            int r = G->root[G->save[k][i]];
            if (G->kind[r] == REMAT_TENSOR_ACTIVATION && !oracle_contains(roots, nr, r)) {
                roots[nr++] = r;
                b += G->bytes[r];
            }
        }
        for (int j = 0; j < G->n_out[k]; j++)
            if (G->gflow[G->out[k][j]])
                b += G->logical[G->out[k][j]];
        best = b > best ? b : best;
    }
    return best;
}

typedef struct {
    const spec *G;
    uint8_t res[GN_T], grad[GN_T], scat[GN_T];
    uint8_t fwd_done[GN_OPS], bwd_done[GN_OPS];
    int seeded;
} osim;

static int storage_live(const osim *S, int root)
{
    for (int t = 0; t < S->G->n_t; t++)
        if (S->res[t] && S->G->root[t] == root)
            return 1;
    return 0;
}

static remat_category grad_cat(const spec *G, int t)
{
    return G->kind[t] == REMAT_TENSOR_PARAM ? REMAT_CAT_PARAM_GRADS : REMAT_CAT_ACTIVATION_GRADS;
}

/* Live bytes per category, summed from scratch over every storage root and
 * every gradient at every step: nothing incremental that could drift the
 * way the executor's running totals could. */
static void live_now(const osim *S, uint64_t *cat)
{
    const spec *G = S->G;
    uint8_t live[GN_T] = {0};
    for (int t = 0; t < G->n_t; t++)
        live[G->root[t]] |= S->res[t];
    memset(cat, 0, REMAT_CAT_COUNT * sizeof *cat);
    for (int r = 0; r < G->n_t; r++)
        if (G->root[r] == r && live[r])
            cat[S->scat[r]] += G->bytes[r];
    for (int t = 0; t < G->n_t; t++)
        if (S->grad[t])
            cat[grad_cat(G, t)] += G->logical[t];
}

/* The activation peak counts "activations + recomputed + activation_grads
 * + workspace" (graphs/README.md), written out here rather than asked of
 * remat_category_is_activation, which lives in the executor under test. */
static int is_activation_cat(int c)
{
    return c == REMAT_CAT_ACTIVATIONS || c == REMAT_CAT_RECOMPUTED || c == REMAT_CAT_ACTIVATION_GRADS ||
           c == REMAT_CAT_WORKSPACE;
}

static uint64_t sum_cat(const uint64_t *cat, int activation_only)
{
    uint64_t s = 0;
    for (int c = 0; c < REMAT_CAT_COUNT; c++)
        if (!activation_only || is_activation_cat(c))
            s += cat[c];
    return s;
}

static void oracle_step(oracle *O, size_t i, const uint64_t *hw, const uint64_t *after)
{
    uint64_t tot = sum_cat(hw, 0), act = sum_cat(hw, 1);
    O->hw[i] = tot;
    memcpy(O->hw_cat + i * REMAT_CAT_COUNT, hw, REMAT_CAT_COUNT * sizeof *hw);
    O->live_after[i] = sum_cat(after, 0);
    if (i == 0 || tot > O->peak) {
        O->peak = tot;
        O->peak_i = i;
        memcpy(O->peak_cat, hw, sizeof O->peak_cat);
    }
    if (i == 0 || act > O->act_peak) {
        O->act_peak = act;
        O->act_peak_i = i;
    }
    for (int c = 0; c < REMAT_CAT_COUNT; c++)
        if (hw[c] > O->cat_peak[c])
            O->cat_peak[c] = hw[c];
    O->n_steps = i + 1;
}

/* The first illegal instruction ends the simulation (see oracle_run). */
#define OFAIL(cond)                 \
    do {                            \
        if (cond) {                 \
            O->fail_index = i;      \
            return;                 \
        }                           \
    } while (0)

void oracle_run(const spec *G, const int *op_of, const int *t_of, const remat_schedule *s,
                const remat_exec_extras *x, oracle *O)
{
    osim S;
    memset(&S, 0, sizeof S);
    S.G = G;
    memset(O->rec_count, 0, sizeof O->rec_count);
    memset(O->n_fwd, 0, sizeof O->n_fwd);
    memset(O->n_bwd, 0, sizeof O->n_bwd);
    O->peak = O->act_peak = O->f_fwd = O->f_bwd = O->f_rec = 0;
    O->n_steps = 0;
    O->fail_index = SIZE_MAX;
    memset(O->cat_peak, 0, sizeof O->cat_peak);
    for (int t = 0; t < GN_T; t++)
        O->release_at[t] = SIZE_MAX;
    O->resident_at_end = 0;
    for (int t = 0; t < G->n_t; t++)
        if (G->kind[t] != REMAT_TENSOR_ACTIVATION) {
            S.res[t] = 1;
            S.scat[t] = G->kind[t] == REMAT_TENSOR_INPUT ? REMAT_CAT_INPUTS
                        : G->frozen[t]                   ? REMAT_CAT_FROZEN
                                                         : REMAT_CAT_PARAMS;
        }
    /* Persistent extras, in their own categories the whole time. */
    uint64_t fixed[REMAT_CAT_COUNT] = {0};
    if (x) {
        fixed[REMAT_CAT_OPTIMIZER_STATE] = x->optimizer_state;
        fixed[REMAT_CAT_MASTER_WEIGHTS] = x->master_weights;
        fixed[REMAT_CAT_FROZEN] = x->frozen_copies;
        fixed[REMAT_CAT_COMM_BUFFERS] = x->comm_buffers;
        fixed[REMAT_CAT_WORKSPACE] = x->workspace; /* a library's workspace, held the whole step */
    }
    int opt_seen = 0;
    for (size_t i = 0; i <= s->n; i++) {
        remat_instr in = i < s->n ? s->ins[i] : (remat_instr){REMAT_I_OPT, 0};
        if (i == s->n && opt_seen)
            break;
        OFAIL(opt_seen);
        uint64_t before[REMAT_CAT_COUNT], hw[REMAT_CAT_COUNT], after[REMAT_CAT_COUNT];
        live_now(&S, before);
        for (int c = 0; c < REMAT_CAT_COUNT; c++)
            before[c] += fixed[c];
        memcpy(hw, before, sizeof hw);
        int k = -1, t = -1;
        if (in.kind == REMAT_I_FWD || in.kind == REMAT_I_RECOMPUTE || in.kind == REMAT_I_BWD)
            k = op_of[in.arg];
        else if (in.kind == REMAT_I_FREE)
            t = t_of[in.arg];
        switch (in.kind) {
        case REMAT_I_FWD:
        case REMAT_I_RECOMPUTE: {
            int rec = in.kind == REMAT_I_RECOMPUTE;
            OFAIL(rec ? !S.fwd_done[k] || !G->recomputable[k] : S.fwd_done[k]);
            for (int j = 0; j < G->n_in[k]; j++)
                OFAIL(!S.res[G->in[k][j]]);
            remat_category c = rec ? REMAT_CAT_RECOMPUTED : REMAT_CAT_ACTIVATIONS;
            int fresh = 0;
            for (int j = 0; j < G->n_out[k]; j++) {
                int o = G->out[k][j];
                if (S.res[o])
                    continue;
                fresh = 1;
                /* A non-view output allocates unless its storage is still
                 * live through one of its views. */
                if (G->root[o] == o && !storage_live(&S, o)) {
                    hw[c] += G->bytes[o];
                    S.scat[o] = (uint8_t)c;
                }
            }
            OFAIL(!fresh);
            hw[REMAT_CAT_WORKSPACE] += G->ws[k];
            for (int j = 0; j < G->n_out[k]; j++)
                S.res[G->out[k][j]] = 1;
            S.fwd_done[k] = 1;
            if (rec) {
                O->f_rec += G->flops[k];
                O->rec_count[k]++;
            } else {
                O->f_fwd += G->flops[k];
                O->n_fwd[k]++;
            }
            break;
        }
        case REMAT_I_FREE:
            OFAIL(G->kind[t] != REMAT_TENSOR_ACTIVATION || !S.res[t]);
            S.res[t] = 0;
            if (!storage_live(&S, G->root[t]))
                O->release_at[G->root[t]] = i;
            break;
        case REMAT_I_BWD: {
            OFAIL(!G->has_bwd[k] || S.bwd_done[k] || !S.fwd_done[k]);
            /* Its output gradients are complete: every other op reading an
             * output that gets a gradient has run its backward step. */
            for (int j = 0; j < G->n_out[k]; j++) {
                int o = G->out[k][j];
                if (!G->gflow[o])
                    continue;
                for (int q = 0; q < G->n_ops; q++)
                    if (q != k && G->has_bwd[q] && oracle_contains(G->in[q], G->n_in[q], o))
                        OFAIL(!S.bwd_done[q]);
            }
            for (int j = 0; j < G->n_save[k]; j++)
                OFAIL(!S.res[G->save[k][j]]);
            uint8_t will[GN_T];
            memcpy(will, S.grad, sizeof will);
            if (!S.seeded)
                for (int j = 0; j < G->n_outputs; j++) {
                    int o = G->outputs[j];
                    if (G->gflow[o] && !will[o]) {
                        hw[grad_cat(G, o)] += G->logical[o];
                        will[o] = 1;
                    }
                }
            for (int j = 0; j < G->n_in[k]; j++) {
                int xi = G->in[k][j];
                if (G->gflow[xi] && !will[xi]) {
                    hw[grad_cat(G, xi)] += G->logical[xi];
                    will[xi] = 1;
                }
            }
            hw[REMAT_CAT_WORKSPACE] += G->bws[k];
            memcpy(S.grad, will, sizeof S.grad);
            for (int j = 0; j < G->n_out[k]; j++)
                S.grad[G->out[k][j]] = 0;
            S.seeded = 1;
            S.bwd_done[k] = 1;
            O->f_bwd += G->bwd_flops[k];
            O->n_bwd[k]++;
            break;
        }
        case REMAT_I_OPT:
            for (int q = 0; q < G->n_ops; q++)
                OFAIL(!S.fwd_done[q] || S.bwd_done[q] != G->has_bwd[q]);
            opt_seen = 1;
            hw[REMAT_CAT_WORKSPACE] += x ? x->optimizer_workspace : 0;
            for (int q = 0; q < G->n_t; q++)
                O->resident_at_end += G->kind[q] == REMAT_TENSOR_ACTIVATION && S.res[q];
            break;
        default:
            OFAIL(1);
        }
        live_now(&S, after);
        for (int c = 0; c < REMAT_CAT_COUNT; c++)
            after[c] += fixed[c];
        oracle_step(O, i, hw, after);
    }
}


/*
 * chain_profile.c - each stage's costs and memory figures, measured.
 *
 * The dynamic program of chain_dp.c needs, per stage, what Beaumont et
 * al. call its forward and backward costs and the sizes of its output and
 * its tape, plus the transient memory of each way to run it. Rather than
 * re-deriving any of that from the graph (the executor is the only place
 * that computes a peak), we build probe schedules out of the very
 * primitives the program emits with (chain_emit.c), replay them with an
 * observer, and read each figure off the phase of the replay in which the
 * stage ran:
 *
 *   ckpt    every boundary a checkpoint: the whole forward as advances
 *           from pinned inputs, then each stage reversed from its input
 *           with its output already freed; three more such probes reverse
 *           lazily, or with the output still resident when the stage's
 *           backward saves it (chain.h);
 *   tape    every stage run forward keeping its tape, the last one's first
 *           run and reverse, then each backward;
 *   sweep   one forward sweep that pins nothing (a long advance), then a
 *           checkpoint-every-boundary replay to finish the step.
 *
 * A figure is relative: the high-water mark of a phase over the live bytes
 * it started with, or the bytes a phase leaves behind. Relative figures
 * compose because a stage touches only its own tensors, its input boundary
 * and leaves (blocks.c guarantees it), and because no two stage inputs
 * share storage (chain_dp.c merges such cuts), except for gradients, which
 * grow in a fixed order and are tracked separately as the gradient load
 * G(j).
 *
 * Stages with a non-recomputable op are never replayed: the probes run
 * them with their tape kept, and the figures of replaying them are left
 * unset (the program never uses them).
 */
#include "chain.h"
#include "../util/util_internal.h"

#include <string.h>

/* Probe kinds; PROBE_KEEP and PROBE_LAZY modify PROBE_CKPT's reverses. */
enum { PROBE_CKPT = 0, PROBE_TAPE = 1, PROBE_SWEEP = 2, PROBE_KIND = 3, PROBE_KEEP = 4, PROBE_LAZY = 8 };

/* Instruction ranges of each stage's phases in one probe schedule. */
typedef struct {
    size_t *f_lo, *f_hi; /* forward phase of stage j (advance, tape forward, sweep step) */
    size_t *b_lo, *b_hi; /* reverse / backward phase of stage j */
    size_t opt;          /* the OPT instruction */
} phases;

static int64_t sat64(uint64_t v)
{
    return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

static int64_t add64(int64_t x, int64_t y)
{
    if (y > 0 && x > INT64_MAX - y)
        return INT64_MAX;
    if (y < 0 && x < INT64_MIN - y)
        return INT64_MIN;
    return x + y;
}

/* ---- probe schedules ---------------------------------------------------- */

static size_t here(const remat_chain_emit *E)
{
    return E->B.out->n;
}

static remat_status build_probe(const remat_analysis *a, const remat_blocks *st, const uint8_t *nr, int flags,
                                remat_schedule *out, phases *ph, remat_err *err)
{
    const int kind = flags & PROBE_KIND, how = flags & PROBE_LAZY ? REMAT_CHAIN_LAZY : 0;
    remat_chain_emit E;
    remat_status s = remat__chain_emit_init(&E, a, st, out, err);
    if (s != REMAT_OK)
        return s;
    const uint32_t n = st->n;
#define MARK(field, j)                  \
    do {                                \
        if (ph)                         \
            ph->field[j] = here(&E);    \
    } while (0)
#define TRY(call)                       \
    do {                                \
        if ((s = (call)) != REMAT_OK)   \
            goto out;                   \
    } while (0)
    if (kind == PROBE_TAPE) {
        /* Every stage's tape kept; the last stage's reverse is its first
         * run. */
        for (uint32_t j = 0; j + 1 < n; j++) {
            MARK(f_lo, j);
            TRY(remat__chain_tape_forward(&E, j, 0));
            MARK(f_hi, j);
        }
        MARK(b_lo, n - 1);
        TRY(remat__chain_reverse(&E, n - 1, 0));
        MARK(b_hi, n - 1);
        for (uint32_t j = n - 1; j-- > 0;) {
            TRY(remat__chain_unpin(&E, j + 1));
            MARK(b_lo, j);
            TRY(remat__chain_backward(&E, j));
            MARK(b_hi, j);
        }
    } else {
        /* The whole forward first (checkpoints at every boundary, or, for
         * the sweep, none), so that every stage's reverse is a replay. */
        for (uint32_t j = 0; j < n; j++) {
            MARK(f_lo, j);
            if (nr[j])
                TRY(remat__chain_tape_forward(&E, j, 0));
            else
                TRY(remat__chain_advance(&E, j, j + 1));
            if (kind != PROBE_SWEEP)
                remat__chain_pin(&E, j + 1);
            MARK(f_hi, j);
        }
        if (kind == PROBE_SWEEP)
            for (uint32_t j = 0; j + 1 < n; j++) {
                /* Nothing is resident now: checkpoint every boundary again. */
                TRY(remat__chain_advance(&E, j, j + 1));
                remat__chain_pin(&E, j + 1);
            }
        for (uint32_t j = n; j-- > 0;) {
            /* x_{j+1}: a tape forward's output stays only if saved; a
             * checkpoint goes (or stays while saved, with PROBE_KEEP). The
             * phase starts after that decision. */
            if (nr[j] || (flags & PROBE_KEEP))
                TRY(remat__chain_unpin(&E, j + 1));
            else
                TRY(remat__chain_release(&E, j + 1));
            MARK(b_lo, j);
            if (nr[j])
                TRY(remat__chain_backward(&E, j));
            else
                TRY(remat__chain_reverse(&E, j, how));
            MARK(b_hi, j);
        }
    }
    if (ph)
        ph->opt = here(&E);
    s = remat__builder_opt(&E.B);
out:
#undef MARK
#undef TRY
    remat__chain_emit_destroy(&E);
    return s;
}

remat_status remat__chain_probe_schedule(const remat_analysis *a, const remat_blocks *st, const uint8_t *nr,
                                         int kind, remat_schedule *out, remat_err *err)
{
    return build_probe(a, st, nr, kind == 0 ? PROBE_CKPT : PROBE_TAPE, out, NULL, err);
}

/* ---- the meter: live bytes in the budget's metric, per instruction ------- */

typedef struct {
    const remat_graph *g;
    int activation;
    size_t n;
    int64_t run, grun, base;
    int64_t *hw, *after, *gafter; /* per instruction */
} meter;

static int counted(const meter *M, remat_category c)
{
    return !M->activation || remat_category_is_activation(c);
}

static void note(meter *M, size_t index)
{
    if (index < M->n) {
        M->after[index] = M->run;
        M->gafter[index] = M->grun;
    }
}

static int on_alloc(void *ctx, size_t index, uint32_t storage, int grad, remat_category cat, uint64_t bytes)
{
    meter *M = ctx;
    if (!counted(M, cat))
        return 0;
    int64_t b = sat64(bytes);
    M->run = add64(M->run, b);
    if (grad)
        M->grun = add64(M->grun, b);
    /* Leaves and the ledger's extras are placed before instruction 0. */
    if (!grad && (storage == REMAT_NONE || M->g->tensors[storage].kind != REMAT_TENSOR_ACTIVATION))
        M->base = add64(M->base, b);
    else
        note(M, index);
    return 0;
}

static int on_free(void *ctx, size_t index, uint32_t storage, int grad, remat_category cat, uint64_t bytes)
{
    meter *M = ctx;
    (void)storage;
    if (!counted(M, cat))
        return 0;
    int64_t b = sat64(bytes);
    M->run = add64(M->run, -b);
    if (grad)
        M->grun = add64(M->grun, -b);
    note(M, index);
    return 0;
}

static int on_step(void *ctx, size_t index, remat_instr in, uint64_t live_after, uint64_t high_water,
                   const uint64_t *hw_by_category)
{
    meter *M = ctx;
    (void)in;
    (void)live_after;
    if (index >= M->n)
        return 0;
    uint64_t v = 0;
    if (!M->activation)
        v = high_water;
    else
        for (int c = 0; c < REMAT_CAT_COUNT; c++)
            if (remat_category_is_activation((remat_category)c))
                v += hw_by_category[c]; /* bounded by high_water */
    M->hw[index] = sat64(v);
    note(M, index);
    return 0;
}

static int64_t before(const meter *M, size_t p)
{
    return p == 0 ? M->base : M->after[p - 1];
}

static int64_t grad_before(const meter *M, size_t p)
{
    return p == 0 ? 0 : M->gafter[p - 1];
}

/* High-water mark of instructions [lo, hi) over the live bytes before lo. */
static int64_t peak(const meter *M, size_t lo, size_t hi)
{
    int64_t b = before(M, lo), m = 0;
    for (size_t i = lo; i < hi; i++)
        if (add64(M->hw[i], -b) > m)
            m = add64(M->hw[i], -b);
    return m;
}

static int64_t delta(const meter *M, size_t lo, size_t hi)
{
    return add64(before(M, hi), -before(M, lo));
}

/* FLOPs of the forward executions in [lo, hi), all or RECOMPUTE only. */
static uint64_t flops(const remat_graph *g, const remat_schedule *s, size_t lo, size_t hi, int recompute_only)
{
    uint64_t f = 0;
    for (size_t i = lo; i < hi; i++) {
        uint32_t k = s->ins[i].kind;
        if (k == REMAT_I_RECOMPUTE || (k == REMAT_I_FWD && !recompute_only))
            if (!remat_u64_add(f, g->ops[s->ins[i].arg].flops, &f))
                f = UINT64_MAX;
    }
    return f;
}

typedef struct {
    remat_schedule s;
    phases ph;
    meter M;
    remat_eval e;
} probe;

static void probe_destroy(probe *p)
{
    remat_schedule_destroy(&p->s);
    remat__free(p->ph.f_lo);
    remat__free(p->ph.f_hi);
    remat__free(p->ph.b_lo);
    remat__free(p->ph.b_hi);
    remat__free(p->M.hw);
    remat__free(p->M.after);
    remat__free(p->M.gafter);
    memset(p, 0, sizeof *p);
}

static remat_status run_probe(remat_planner *P, const remat_blocks *st, const uint8_t *nr, int flags, probe *p)
{
    const remat_analysis *a = P->a;
    uint32_t n = st->n;
    memset(p, 0, sizeof *p);
    remat_schedule_init(&p->s);
    p->ph.f_lo = remat__array(n, sizeof(size_t));
    p->ph.f_hi = remat__array(n, sizeof(size_t));
    p->ph.b_lo = remat__array(n, sizeof(size_t));
    p->ph.b_hi = remat__array(n, sizeof(size_t));
    if (!p->ph.f_lo || !p->ph.f_hi || !p->ph.b_lo || !p->ph.b_hi)
        return remat_err_set(P->err, REMAT_ENOMEM, "out of memory planning");
    remat_status s = build_probe(a, st, nr, flags, &p->s, &p->ph, P->err);
    if (s != REMAT_OK)
        return s;
    meter *M = &p->M;
    M->g = a->g;
    M->activation = P->o->budget_kind == REMAT_BUDGET_ACTIVATION;
    M->n = p->s.n;
    M->hw = remat__array(M->n + 1, sizeof *M->hw);
    M->after = remat__array(M->n + 1, sizeof *M->after);
    M->gafter = remat__array(M->n + 1, sizeof *M->gafter);
    if (!M->hw || !M->after || !M->gafter)
        return remat_err_set(P->err, REMAT_ENOMEM, "out of memory planning");
    remat_replay_observer obs = {M, on_alloc, on_free, on_step};
    remat_replay_result r;
    remat_err local;
    remat_err_init(&local);
    P->evaluations++;
    /* The probe's observer indexes the compute schedule: it measures
     * without the sharding (plan.c's final replay judges each rank). */
    remat_exec_extras xu = P->o->extras;
    xu.sharding = NULL;
    s = remat_replay(a, &p->s, &xu, &obs, &r, &local);
    if (s != REMAT_OK)
        return remat_err_set(P->err, s, "%s", local.msg);
    if (!r.valid) {
        remat_replay_result_destroy(&r);
        return remat_err_set(P->err, REMAT_EINTERNAL, "chain-dp: a probe schedule is invalid: %s", local.msg);
    }
    p->e.valid = 1;
    p->e.peak = r.peak_bytes;
    p->e.metric = M->activation ? r.activation_peak : r.peak_bytes;
    p->e.extra_flops = r.flops_recompute;
    remat_replay_result_destroy(&r);
    return REMAT_OK;
}

/* ---- the profile -------------------------------------------------------- */

void remat__chain_profile_destroy(remat_chain_profile *pr)
{
    if (!pr)
        return;
    void *v[] = {pr->nr,      pr->so,     pr->own_in, pr->peel,  pr->grad,     pr->hold,   pr->gain,
                 pr->adv_first, pr->adv_mid, pr->tf_pk, pr->tf_end, pr->tb_pk, pr->adv_cost, pr->tf_cost};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        remat__free(v[i]);
    for (int i = 0; i < 4; i++) {
        remat__free(pr->leaf_pk[i]);
        remat__free(pr->leaf_cost[i]);
    }
    memset(pr, 0, sizeof *pr);
}

/* Marks nr (a non-recomputable op) and so (the backward saves x_{j+1}). */
static void classify(const remat_analysis *a, const remat_blocks *st, remat_chain_profile *pr)
{
    const remat_graph *g = a->g;
    for (uint32_t j = 0; j < st->n; j++) {
        uint32_t xo = st->in[j + 1];
        int other = 0; /* an activation other than x_{j+1} is saved */
        for (uint32_t i = st->start[j]; i < st->start[j + 1]; i++) {
            const remat_op *op = &g->ops[a->order[i]];
            if (!op->recomputable)
                pr->nr[j] = 1;
            if (a->bwd_step[a->order[i]] == REMAT_NONE)
                continue;
            const uint32_t *sv = remat_op_saves(g, op);
            for (uint32_t q = 0; q < op->n_save; q++) {
                if (sv[q] == xo)
                    pr->so[j] = 1;
                if (sv[q] == st->in[j] && sv[q] != REMAT_NONE)
                    pr->own_in[j] = 1;
                if (sv[q] != xo && g->tensors[sv[q]].kind == REMAT_TENSOR_ACTIVATION)
                    other = 1;
            }
        }
        pr->peel[j] = !other;
    }
}

remat_status remat__chain_profile_build(remat_planner *P, const remat_blocks *st, remat_chain_profile *pr)
{
    const remat_analysis *a = P->a;
    const remat_graph *g = a->g;
    const uint32_t n = st->n;
    memset(pr, 0, sizeof *pr);
    pr->n = n;
    pr->activation = P->o->budget_kind == REMAT_BUDGET_ACTIVATION;
    size_t n1 = (size_t)n + 1;
    pr->nr = remat__calloc(n1, 1);
    pr->so = remat__calloc(n1, 1);
    pr->own_in = remat__calloc(n1, 1);
    pr->peel = remat__calloc(n1, 1);
    int64_t **i64[] = {&pr->grad,  &pr->hold,   &pr->gain,  &pr->adv_first, &pr->adv_mid, &pr->tf_pk,
                       &pr->tf_end, &pr->tb_pk, &pr->leaf_pk[0], &pr->leaf_pk[1], &pr->leaf_pk[2], &pr->leaf_pk[3]};
    uint64_t **u64[] = {&pr->adv_cost,     &pr->tf_cost,      &pr->leaf_cost[0],
                        &pr->leaf_cost[1], &pr->leaf_cost[2], &pr->leaf_cost[3]};
    int ok = pr->nr && pr->so && pr->own_in && pr->peel;
    for (size_t i = 0; i < sizeof i64 / sizeof i64[0]; i++)
        ok &= (*i64[i] = remat__array(n1, sizeof(int64_t))) != NULL;
    for (size_t i = 0; i < sizeof u64 / sizeof u64[0]; i++)
        ok &= (*u64[i] = remat__array(n1, sizeof(uint64_t))) != NULL;
    if (!ok)
        return remat_err_set(P->err, REMAT_ENOMEM, "out of memory planning");
    classify(a, st, pr);
    int any_nr = 0, any_so = 0;
    for (uint32_t j = 0; j < n; j++) {
        any_nr |= pr->nr[j];
        any_so |= j + 1 < n && pr->so[j] && !pr->nr[j];
    }

    probe p;
    remat_status s = run_probe(P, st, pr->nr, PROBE_CKPT, &p);
    pr->replays++;
    if (s == REMAT_OK) {
        const meter *M = &p.M;
        pr->base = (uint64_t)(M->base < 0 ? 0 : M->base);
        pr->ckpt_all = p.e;
        pr->grad[n] = 0;
        for (uint32_t j = n; j-- > 0;) {
            pr->grad[j] = grad_before(M, p.ph.b_hi[j]);
            int64_t pk = peak(M, p.ph.b_lo[j], p.ph.b_hi[j]);
            uint64_t c = flops(g, &p.s, p.ph.b_lo[j], p.ph.b_hi[j], 1);
            for (int v = 0; v < 4; v++) {
                pr->leaf_pk[v][j] = pk;
                pr->leaf_cost[v][j] = c;
            }
        }
        for (uint32_t j = 0; j < n; j++) {
            pr->adv_first[j] = peak(M, p.ph.f_lo[j], p.ph.f_hi[j]);
            pr->adv_cost[j] = flops(g, &p.s, p.ph.f_lo[j], p.ph.f_hi[j], 0);
            if (!pr->nr[j])
                pr->hold[j + 1] = delta(M, p.ph.f_lo[j], p.ph.f_hi[j]);
        }
        pr->fin = add64(M->hw[p.ph.opt], -M->base);
    }
    probe_destroy(&p);
    /* The other ways to reverse a stage: lazily, and with x_{j+1} kept. */
    for (int v = 1; v < 4 && s == REMAT_OK; v++) {
        int keep = v & 1, lazy = v >> 1;
        if (keep && !any_so)
            continue;
        s = run_probe(P, st, pr->nr, PROBE_CKPT | (keep ? PROBE_KEEP : 0) | (lazy ? PROBE_LAZY : 0), &p);
        pr->replays++;
        for (uint32_t j = 0; s == REMAT_OK && j < n; j++)
            if ((pr->so[j] || !keep) && !pr->nr[j]) {
                pr->leaf_pk[v][j] = peak(&p.M, p.ph.b_lo[j], p.ph.b_hi[j]);
                pr->leaf_cost[v][j] = flops(g, &p.s, p.ph.b_lo[j], p.ph.b_hi[j], 1);
            }
        probe_destroy(&p);
    }
    if (s == REMAT_OK) {
        s = run_probe(P, st, pr->nr, PROBE_TAPE, &p);
        pr->replays++;
        if (s == REMAT_OK) {
            pr->tape_all = p.e;
            for (uint32_t j = 0; j + 1 < n; j++) {
                pr->tf_pk[j] = peak(&p.M, p.ph.f_lo[j], p.ph.f_hi[j]);
                pr->tf_end[j] = delta(&p.M, p.ph.f_lo[j], p.ph.f_hi[j]);
                pr->tf_cost[j] = flops(g, &p.s, p.ph.f_lo[j], p.ph.f_hi[j], 0);
                /* Measured after x_{j+1} is unpinned: it is resident then
                 * iff saved, whatever ran in between. */
                pr->tb_pk[j] = peak(&p.M, p.ph.b_lo[j], p.ph.b_hi[j]);
            }
            pr->first_pk = peak(&p.M, p.ph.b_lo[n - 1], p.ph.b_hi[n - 1]);
        }
        probe_destroy(&p);
    }
    /* What a checkpoint holds: at least the bytes of its storage (a view
     * holds its base), and what the probes saw it add. */
    for (uint32_t j = 0; j <= n; j++) {
        uint32_t x = st->in[j];
        if (x == REMAT_NONE) {
            pr->hold[j] = pr->gain[j] = 0;
            continue;
        }
        const remat_tensor *T = &g->tensors[x];
        int64_t b = sat64(g->tensors[T->storage].bytes);
        if (pr->hold[j] < b)
            pr->hold[j] = b;
        pr->gain[j] = T->storage == x ? sat64(T->bytes) : 0;
    }
    if (s == REMAT_OK && !any_nr && n > 1) {
        /* A stage inside a longer advance starts with x_j resident but not
         * pinned; the sweep measures it over the sweep's start. */
        s = run_probe(P, st, pr->nr, PROBE_SWEEP, &p);
        pr->replays++;
        for (uint32_t j = 0; s == REMAT_OK && j < n; j++) {
            int64_t b0 = before(&p.M, p.ph.f_lo[0]);
            int64_t carried = add64(before(&p.M, p.ph.f_lo[j]), -b0);
            if (j > 0 && pr->hold[j] < carried)
                pr->hold[j] = carried;
            int64_t m = 0;
            for (size_t i = p.ph.f_lo[j]; i < p.ph.f_hi[j]; i++)
                if (add64(p.M.hw[i], -b0) > m)
                    m = add64(p.M.hw[i], -b0);
            pr->adv_mid[j] = m;
        }
        probe_destroy(&p);
    } else {
        for (uint32_t j = 0; j < n; j++)
            pr->adv_mid[j] = add64(pr->hold[j], pr->adv_first[j]);
    }
    return s;
}

static uint64_t gcd64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static uint64_t mag(int64_t v)
{
    return v < 0 ? (v == INT64_MIN ? (uint64_t)INT64_MAX + 1 : (uint64_t)-v) : (uint64_t)v;
}

uint64_t remat__chain_profile_gcd(const remat_chain_profile *pr)
{
    uint64_t g = mag(pr->fin);
    g = gcd64(g, mag(pr->first_pk));
    for (uint32_t j = 0; j <= pr->n; j++) {
        const int64_t v[] = {pr->grad[j], pr->hold[j], pr->gain[j]};
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
            g = gcd64(g, mag(v[i]));
        if (j == pr->n)
            break;
        const int64_t w[] = {pr->adv_first[j], pr->adv_mid[j], pr->tf_pk[j],   pr->tf_end[j],   pr->tb_pk[j],
                             pr->leaf_pk[0][j], pr->leaf_pk[1][j], pr->leaf_pk[2][j], pr->leaf_pk[3][j]};
        for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
            g = gcd64(g, mag(w[i]));
    }
    return g;
}

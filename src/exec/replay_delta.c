/*
 * replay_delta.c - the replay of a schedule that differs from a base
 * schedule in a window, at about the cost of the window (issue 20).
 *
 * A local search flips one activation at a time (keep <-> recompute), and
 * the default policy's schedule of the flipped keep set differs from the
 * current one only between the flipped tensor's last forward use and its
 * last backward need: before, both run the same instructions from the same
 * state; after, both usually hold the same state again and run the same
 * instructions to the end. The replay is a deterministic function of its
 * state and the instructions still to come, so neither part needs
 * replaying:
 *   - the base is replayed once, saving a snapshot of the cursor's state
 *     every `every` instructions and every step's high-water mark (total
 *     and over the activation categories), from which each snapshot gets
 *     the most any later step reaches;
 *   - a candidate starts from the last snapshot at or before its first
 *     changed instruction (the peaks and FLOPs so far are the base's
 *     there), and at each snapshot point j of the base that lies in the
 *     common suffix (the candidate's index j + n_candidate - n_base) it
 *     compares its state with the snapshot: equal, the rest of the replay
 *     is the base's, so its peak is the larger of the two parts' and its
 *     extra FLOPs the sum.
 * The state compared is every field a later step reads: residency, the
 * per-storage resident counts and categories (of live storages: a freed
 * one's stale category is never read), gradients allocated and pending,
 * the done flags, the live bytes per category, and whether the seed and OPT
 * ran. The per-step fields (mask, base, add, undo) are reset by every
 * step's begin and the dedupe stamps are zero between steps.
 *
 * A candidate is judged valid exactly when the full replay would judge it
 * so: every instruction up to the OPT that ends it applies, and the OPT
 * checks the gradients complete, as finish() would. Schedules without a
 * final OPT (the implied one) and sharded replays (collectives inserted by
 * replay_shard.c) are replayed whole.
 *
 * Memory: a snapshot holds 12 bytes per tensor and 6 per op; at most
 * SNAP_MAX of them within SNAP_BYTES (so on 10^5 ops the snapshots are
 * fewer and farther apart, never more memory).
 */
#include "remat/exec.h"
#include "../util/util_internal.h"
#include "replay_cursor.h"

#include <string.h>

#define SNAP_MAX 32
#define SNAP_BYTES (24u << 20)
/* Fewer instructions between snapshots than this cost more to copy than
 * they save. */
#define SNAP_MIN_EVERY 64

typedef struct {
    size_t at;               /* instructions applied before it */
    uint8_t *flags;          /* res, ever, grad, cat (n_tensors each), fwd_done, bwd_done (n_ops each) */
    uint32_t *counts;        /* cnt, pending (n_tensors each), recompute_counts (n_ops) */
    uint64_t live[REMAT_CAT_COUNT];
    uint64_t total, act_live;
    int seeded, opt_seen;
    remat_replay_result r;   /* the running figures (recompute_counts: not this copy's) */
    uint64_t suf_total, suf_act; /* the largest step mark from `at` to the end */
} snap;

struct remat__delta {
    const remat_analysis *a;
    remat_replay_cursor *c;
    remat_exec_extras extras;
    int whole;               /* sharded: every schedule replayed whole */
    remat_schedule base;
    int base_ok;             /* the base is valid and ends with OPT: its snapshots are usable */
    uint64_t base_flops;
    snap s[SNAP_MAX];
    size_t n_snap, every;
    uint64_t *hw_total, *hw_act;
    size_t hw_cap;
    size_t nt, no;           /* array lengths (at least 1) */
};

static size_t flag_bytes(const remat__delta *d)
{
    return 4 * d->nt + 2 * d->no;
}

static size_t count_words(const remat__delta *d)
{
    return 2 * d->nt + d->no;
}

/* The cost of copying or comparing one snapshot, in work units: one unit
 * is one replayed instruction, about 28 ns on the project's machine, in
 * which memcpy moves well over 256 bytes even from memory (measured on the
 * 994- and 9994-op transformers: 1.3-2.3 kB per instruction in cache). */
static uint64_t snap_work(const remat__delta *d)
{
    return (flag_bytes(d) + 4 * count_words(d)) / 256 + 1;
}

remat_status remat__delta_create(const remat_analysis *a, const remat_exec_extras *extras, remat__delta **out,
                                 remat_err *err)
{
    *out = NULL;
    remat__delta *d = remat__calloc(1, sizeof *d);
    if (!d)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory setting up the replay");
    d->a = a;
    if (extras)
        d->extras = *extras;
    d->whole = d->extras.sharding != NULL;
    d->nt = a->g->n_tensors ? a->g->n_tensors : 1;
    d->no = a->g->n_ops ? a->g->n_ops : 1;
    remat_schedule_init(&d->base);
    size_t per = flag_bytes(d) + 4 * count_words(d);
    size_t n = SNAP_BYTES / per;
    n = n < 2 ? 2 : n > SNAP_MAX ? SNAP_MAX : n;
    remat_status st = REMAT_OK;
    for (size_t i = 0; i < n && st == REMAT_OK; i++) {
        d->s[i].flags = remat__malloc(flag_bytes(d));
        d->s[i].counts = remat__array(count_words(d), sizeof *d->s[i].counts);
        if (!d->s[i].flags || !d->s[i].counts)
            st = remat_err_set(err, REMAT_ENOMEM, "out of memory setting up the replay");
    }
    if (st == REMAT_OK)
        st = remat_replay_begin(a, extras, NULL, &d->c, err);
    if (st != REMAT_OK) {
        remat__delta_destroy(d);
        return st;
    }
    *out = d;
    return REMAT_OK;
}

void remat__delta_destroy(remat__delta *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < SNAP_MAX; i++) {
        remat__free(d->s[i].flags);
        remat__free(d->s[i].counts);
    }
    remat__free(d->hw_total);
    remat__free(d->hw_act);
    remat_schedule_destroy(&d->base);
    remat_replay_cursor_destroy(d->c);
    remat__free(d);
}

static void save(remat__delta *d, snap *p)
{
    const remat_replay_cursor *c = d->c;
    const size_t nt = d->nt, no = d->no;
    p->at = c->index;
    memcpy(p->flags, c->res, nt);
    memcpy(p->flags + nt, c->ever, nt);
    memcpy(p->flags + 2 * nt, c->grad, nt);
    memcpy(p->flags + 3 * nt, c->cat, nt);
    memcpy(p->flags + 4 * nt, c->fwd_done, no);
    memcpy(p->flags + 4 * nt + no, c->bwd_done, no);
    memcpy(p->counts, c->cnt, nt * sizeof *p->counts);
    memcpy(p->counts + nt, c->pending, nt * sizeof *p->counts);
    memcpy(p->counts + 2 * nt, c->r->recompute_counts, no * sizeof *p->counts);
    memcpy(p->live, c->live, sizeof p->live);
    p->total = c->total;
    p->act_live = c->act_live;
    p->seeded = c->seeded;
    p->opt_seen = c->opt_seen;
    p->r = *c->r;
    p->r.recompute_counts = NULL;
}

static void restore(remat__delta *d, const snap *p)
{
    remat_replay_cursor *c = d->c;
    const size_t nt = d->nt, no = d->no;
    memcpy(c->res, p->flags, nt);
    memcpy(c->ever, p->flags + nt, nt);
    memcpy(c->grad, p->flags + 2 * nt, nt);
    memcpy(c->cat, p->flags + 3 * nt, nt);
    memcpy(c->fwd_done, p->flags + 4 * nt, no);
    memcpy(c->bwd_done, p->flags + 4 * nt + no, no);
    memcpy(c->cnt, p->counts, nt * sizeof *p->counts);
    memcpy(c->pending, p->counts + nt, nt * sizeof *p->counts);
    uint32_t *counts = c->r->recompute_counts;
    memcpy(counts, p->counts + 2 * nt, no * sizeof *p->counts);
    *c->r = p->r;
    c->r->recompute_counts = counts;
    memcpy(c->live, p->live, sizeof c->live);
    c->total = p->total;
    c->act_live = p->act_live;
    c->seeded = p->seeded;
    c->opt_seen = p->opt_seen;
    c->index = p->at;
    c->failed = REMAT_OK;
    c->ended = 0;
    c->mask = 0;
    c->undo_b = 0;
}

/* Whether the cursor's state is the snapshot's (see the file comment). */
static int same(const remat__delta *d, const snap *p)
{
    const remat_replay_cursor *c = d->c;
    const size_t nt = d->nt, no = d->no;
    if (c->total != p->total || c->act_live != p->act_live || c->seeded != p->seeded ||
        c->opt_seen != p->opt_seen || memcmp(c->live, p->live, sizeof c->live) != 0)
        return 0;
    if (memcmp(c->res, p->flags, nt) != 0 || memcmp(c->ever, p->flags + nt, nt) != 0 ||
        memcmp(c->grad, p->flags + 2 * nt, nt) != 0 || memcmp(c->fwd_done, p->flags + 4 * nt, no) != 0 ||
        memcmp(c->bwd_done, p->flags + 4 * nt + no, no) != 0 ||
        memcmp(c->cnt, p->counts, nt * sizeof *p->counts) != 0 ||
        memcmp(c->pending, p->counts + nt, nt * sizeof *p->counts) != 0)
        return 0;
    for (size_t t = 0; t < nt; t++)
        if (c->cnt[t] && c->cat[t] != p->flags[3 * nt + t])
            return 0;
    return 1;
}

/* The cursor from the start (its arrays kept). */
static remat_status restart(remat__delta *d, remat_err *err)
{
    return remat__replay_restart(d->c, err);
}

/* The figures of a whole replay of s (the fallback). */
static remat_status whole(remat__delta *d, const remat_schedule *s, remat__delta_figures *f, remat_err *err)
{
    remat_replay_result r;
    remat_status st = remat_replay(d->a, s, &d->extras, NULL, &r, err);
    if (st != REMAT_OK)
        return st;
    f->valid = r.valid;
    f->peak_bytes = r.peak_bytes;
    f->activation_peak = r.activation_peak;
    f->flops_recompute = r.flops_recompute;
    f->work = s->n + 1;
    remat_replay_result_destroy(&r);
    return REMAT_OK;
}

static int ends_with_opt(const remat_schedule *s)
{
    return s->n > 0 && s->ins[s->n - 1].kind == REMAT_I_OPT;
}

/* Applies s->ins[i]; *bad = 1 when the replay rejects it. */
static remat_status step(remat__delta *d, remat_instr in, int *bad, remat_err *err)
{
    remat_err local;
    remat_err_init(&local);
    remat_status st = remat_replay_apply(d->c, in, &local);
    if (st == REMAT_ESCHEDULE) {
        *bad = 1;
        return REMAT_OK;
    }
    if (st != REMAT_OK)
        return remat_err_set(err, st, "%s", local.msg);
    return REMAT_OK;
}

static void figures_of(const remat__delta *d, remat__delta_figures *f)
{
    f->valid = 1;
    f->peak_bytes = d->c->r->peak_bytes;
    f->activation_peak = d->c->r->activation_peak;
    f->flops_recompute = d->c->r->flops_recompute;
}

remat_status remat__delta_base(remat__delta *d, const remat_schedule *s, remat__delta_figures *f, remat_err *err)
{
    memset(f, 0, sizeof *f);
    d->base_ok = 0;
    remat_schedule_clear(&d->base);
    if (d->whole || !ends_with_opt(s))
        return whole(d, s, f, err);
    remat_status st = REMAT_OK;
    if (s->n > d->base.cap) {
        remat_instr *ins = remat__array(s->n, sizeof *ins);
        if (!ins)
            return remat_err_set(err, REMAT_ENOMEM, "out of memory replaying");
        remat__free(d->base.ins);
        d->base.ins = ins;
        d->base.cap = s->n;
    }
    memcpy(d->base.ins, s->ins, s->n * sizeof *s->ins);
    d->base.n = s->n;
    if (s->n > d->hw_cap) {
        remat__free(d->hw_total);
        remat__free(d->hw_act);
        d->hw_total = remat__array(s->n, sizeof *d->hw_total);
        d->hw_act = remat__array(s->n, sizeof *d->hw_act);
        d->hw_cap = d->hw_total && d->hw_act ? s->n : 0;
        if (!d->hw_cap)
            st = remat_err_set(err, REMAT_ENOMEM, "out of memory replaying");
    }
    if (st == REMAT_OK)
        st = restart(d, err);
    if (st != REMAT_OK)
        return st;
    size_t cap = SNAP_MAX;
    while (cap > 0 && !d->s[cap - 1].flags)
        cap--;
    /* Snapshots at least four copies' worth apart: a base then costs at
     * most a quarter more than a plain replay, and a candidate replays on
     * average half that spacing before its window. */
    d->every = (s->n + cap - 1) / cap;
    if (d->every < SNAP_MIN_EVERY)
        d->every = SNAP_MIN_EVERY;
    if (d->every < 4 * snap_work(d))
        d->every = 4 * snap_work(d);
    d->n_snap = 0;
    int bad = 0;
    f->work = s->n;
    for (size_t i = 0; i < s->n && !bad; i++) {
        if (i % d->every == 0) {
            save(d, &d->s[d->n_snap++]);
            f->work += snap_work(d);
        }
        d->c->step_total = d->c->step_act = 0;
        if ((st = step(d, s->ins[i], &bad, err)) != REMAT_OK)
            return st;
        d->hw_total[i] = d->c->step_total;
        d->hw_act[i] = d->c->step_act;
    }
    if (bad) {
        f->valid = 0;
        d->n_snap = 0;
        return REMAT_OK;
    }
    figures_of(d, f);
    /* Each snapshot's suffix maxima, from the end. */
    uint64_t mt = 0, ma = 0;
    size_t k = d->n_snap;
    for (size_t i = s->n; i-- > 0;) {
        if (d->hw_total[i] > mt)
            mt = d->hw_total[i];
        if (d->hw_act[i] > ma)
            ma = d->hw_act[i];
        if (k > 0 && d->s[k - 1].at == i) {
            d->s[k - 1].suf_total = mt;
            d->s[k - 1].suf_act = ma;
            k--;
        }
    }
    d->base_flops = f->flops_recompute;
    d->base_ok = 1;
    return REMAT_OK;
}

remat_status remat__delta_eval(remat__delta *d, const remat_schedule *s, remat__delta_figures *f, remat_err *err)
{
    memset(f, 0, sizeof *f);
    if (!d->base_ok || !ends_with_opt(s))
        return whole(d, s, f, err);
    const remat_schedule *b = &d->base;
    const size_t nmin = s->n < b->n ? s->n : b->n;
    size_t p = 0;
    while (p < nmin && s->ins[p].kind == b->ins[p].kind && s->ins[p].arg == b->ins[p].arg)
        p++;
    size_t q = 0;
    while (q < nmin - p && s->ins[s->n - 1 - q].kind == b->ins[b->n - 1 - q].kind &&
           s->ins[s->n - 1 - q].arg == b->ins[b->n - 1 - q].arg)
        q++;
    /* The instruction compares cost a fraction of replaying them. */
    f->work = (p + q) / 16;
    size_t k0 = p / d->every;
    if (k0 >= d->n_snap)
        k0 = d->n_snap - 1;
    restore(d, &d->s[k0]);
    f->work += snap_work(d);
    /* The first snapshot whose base suffix the candidate shares. */
    size_t m = k0 + 1;
    while (m < d->n_snap && d->s[m].at < b->n - q)
        m++;
    int bad = 0;
    remat_status st;
    for (size_t i = d->s[k0].at; i < s->n; i++) {
        if (m < d->n_snap && d->s[m].at + s->n == i + b->n) {
            f->work += snap_work(d);
            if (same(d, &d->s[m])) {
                const snap *j = &d->s[m];
                figures_of(d, f);
                if (j->suf_total > f->peak_bytes)
                    f->peak_bytes = j->suf_total;
                if (j->suf_act > f->activation_peak)
                    f->activation_peak = j->suf_act;
                /* base_flops >= j->r.flops_recompute: the base's running sum. */
                if (!remat_u64_add(f->flops_recompute, d->base_flops - j->r.flops_recompute, &f->flops_recompute))
                    return remat_err_set(err, REMAT_EOVERFLOW, "instruction %zu: FLOP total exceeds 2^64-1", i);
                return REMAT_OK;
            }
            m++;
        }
        f->work++;
        if ((st = step(d, s->ins[i], &bad, err)) != REMAT_OK)
            return st;
        if (bad)
            return REMAT_OK; /* f->valid = 0 */
    }
    figures_of(d, f);
    return REMAT_OK;
}

const uint64_t *remat__delta_marks(const remat__delta *d, int activation)
{
    if (!d->base_ok)
        return NULL;
    return activation ? d->hw_act : d->hw_total;
}

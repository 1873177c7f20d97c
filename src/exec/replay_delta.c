/*
 * replay_delta.c - the replay of a schedule that differs from a base
 * schedule in a few places, at about the cost of those places (issue 20).
 *
 * A local search flips one activation at a time (keep <-> recompute), and
 * the default policy's schedule of the flipped keep set differs from the
 * current one in two short edits: where the tensor is freed in forward, and
 * where backward rebuilds it (or no longer does). Between and around the
 * edits both schedules run the same instructions, and the replay is a
 * deterministic function of its state and the instructions still to come:
 *   - the base is replayed once, saving a snapshot of the cursor's state
 *     every `every` instructions, always at a FWD or BWD (each op's FWD and
 *     BWD appear exactly once in every schedule, in the analysis's order,
 *     so they align a candidate with the base), every step's high-water
 *     mark (total and over the activation categories) with its maximum per
 *     stretch between snapshots, and for each storage the instructions that
 *     read or change its residency (a FWD's inputs and outputs, a BWD's
 *     saves, a FREE's tensor; an OPT reads none);
 *   - a candidate starts from the last snapshot at or before its first
 *     changed instruction (the figures so far are the base's there);
 *   - when it reaches a snapshot's anchor, its state is compared with the
 *     snapshot's. Everything but residency must be equal (it is, at the same
 *     anchor: the same FWD and BWD steps have run); the storages whose
 *     residency differs form a set D. As long as both run the same
 *     instructions and none of them touches D, every step does what it does
 *     in the base, with the live bytes of each category shifted by the same
 *     constant: the candidate's marks are the base's plus that shift. So the
 *     replay jumps to the last snapshot before the first instruction that
 *     touches D or differs, taking the base's maxima and FLOPs over the
 *     stretch, restores that snapshot and writes D's residency back. When
 *     the common stretch is the rest of the base, the replay is done.
 * The figures are the full replay's (tests/check_exec_delta.c checks them on
 * thousands of random flips and mutated schedules against remat_replay).
 * Modular arithmetic is exact for the shifts: every shifted figure is a
 * true byte count of the candidate's replay.
 *
 * A candidate is judged valid exactly when the full replay would judge it
 * so: every instruction up to the OPT that ends it applies (or is one the
 * base applied from the same relevant state), and the OPT checks the
 * gradients complete, as finish() would. Schedules without a final OPT (the
 * implied one) and sharded replays (collectives inserted by replay_shard.c)
 * are replayed whole.
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
/* A jump carries at most this many storages (and their tensors) whose
 * residency differs from the base's; more, and the replay just goes on. */
#define D_MAX 32
#define D_MEMBERS_MAX 256

typedef struct {
    size_t at;               /* instructions applied before it */
    uint8_t *flags;          /* res, ever, grad, cat (n_tensors each), fwd_done, bwd_done (n_ops each) */
    uint32_t *counts;        /* cnt, pending (n_tensors each), recompute_counts (n_ops) */
    uint64_t live[REMAT_CAT_COUNT];
    uint64_t total, act_live;
    int seeded, opt_seen;
    remat_replay_result r;   /* the running figures (recompute_counts: not this copy's) */
} snap;

struct remat__delta {
    const remat_analysis *a;
    remat_replay_cursor *c;
    remat_exec_extras extras;
    int whole;               /* sharded: every schedule replayed whole */
    remat_schedule base;
    int base_ok;             /* the base is valid and ends with OPT: its snapshots are usable */
    uint64_t base_flops;
    remat__delta_figures base_fig; /* what remat__delta_base gave for it */
    snap s[SNAP_MAX];
    size_t n_snap, every;
    uint64_t *hw_total, *hw_act;
    size_t hw_cap;
    uint64_t blk_total[SNAP_MAX], blk_act[SNAP_MAX]; /* the largest mark from snapshot k to k + 1 (or the end) */
    size_t *pos_fwd, *pos_bwd; /* op -> index of its FWD / BWD in the base (SIZE_MAX: none) */
    uint32_t *touch_off, *touch; /* storage -> the base's instructions that touch it (CSR, nt + 1 offsets) */
    size_t touch_cap;
    /* The touches in instruction order, (storage, instruction) pairs: a new
     * base keeps those of the prefix it shares with the last one and reads
     * only its own instructions after it. pairs_upto: the instructions they
     * cover (0: none valid). */
    uint32_t *pairs;
    size_t n_pairs, pairs_cap, pairs_upto;
    uint32_t *members_off, *members; /* storage -> its tensors (itself and its views) */
    uint32_t *stor;          /* tensor -> its storage: a dense copy for the passes over every
                              * tensor or touch (a tensor record is a cache line of its own) */
    uint32_t *mark;          /* storage -> epoch it was put in D */
    uint32_t epoch;
    uint32_t dset[D_MAX];
    uint8_t d_res[D_MEMBERS_MAX], d_ever[D_MEMBERS_MAX], d_cat[D_MAX];
    uint32_t d_cnt[D_MAX];
    size_t nt, no;           /* array lengths (at least 1) */
    remat_err local;         /* the cursor's messages (step) */
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
    const remat_graph *g = a->g;
    if (st == REMAT_OK) {
        d->pos_fwd = remat__array(d->no, sizeof *d->pos_fwd);
        d->pos_bwd = remat__array(d->no, sizeof *d->pos_bwd);
        d->touch_off = remat__array(d->nt + 1, sizeof *d->touch_off);
        d->members_off = remat__calloc(d->nt + 1, sizeof *d->members_off);
        d->members = remat__array(d->nt, sizeof *d->members);
        d->mark = remat__calloc(d->nt, sizeof *d->mark);
        d->stor = remat__array(d->nt, sizeof *d->stor);
        if (!d->pos_fwd || !d->pos_bwd || !d->touch_off || !d->members_off || !d->members || !d->mark || !d->stor)
            st = remat_err_set(err, REMAT_ENOMEM, "out of memory setting up the replay");
    }
    if (st == REMAT_OK) {
        /* Each storage's tensors, by a counting sort on the storage. */
        for (uint32_t t = 0; t < g->n_tensors; t++) {
            d->stor[t] = g->tensors[t].storage;
            d->members_off[g->tensors[t].storage + 1]++;
        }
        for (size_t t = 0; t < d->nt; t++)
            d->members_off[t + 1] += d->members_off[t];
        for (uint32_t t = 0; t < g->n_tensors; t++)
            d->members[d->members_off[g->tensors[t].storage]++] = t;
        for (size_t t = d->nt; t > 0; t--)
            d->members_off[t] = d->members_off[t - 1];
        d->members_off[0] = 0;
        st = remat_replay_begin(a, extras, NULL, &d->c, err);
    }
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
    remat__free(d->pos_fwd);
    remat__free(d->pos_bwd);
    remat__free(d->touch_off);
    remat__free(d->touch);
    remat__free(d->pairs);
    remat__free(d->members_off);
    remat__free(d->members);
    remat__free(d->mark);
    remat__free(d->stor);
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

/* Applies in; *bad = 1 when the replay rejects it. The cursor's messages
 * go to d->local, cleared once per replay (not per instruction: nothing is
 * applied after the first failure). */
static remat_status step(remat__delta *d, remat_instr in, int *bad, remat_err *err)
{
    remat_status st = remat_replay_apply(d->c, in, &d->local);
    if (st == REMAT_ESCHEDULE) {
        *bad = 1;
        return REMAT_OK;
    }
    if (st != REMAT_OK)
        return remat_err_set(err, st, "%s", d->local.msg);
    return REMAT_OK;
}

static void figures_of(const remat__delta *d, remat__delta_figures *f)
{
    f->valid = 1;
    f->peak_bytes = d->c->r->peak_bytes;
    f->activation_peak = d->c->r->activation_peak;
    f->flops_recompute = d->c->r->flops_recompute;
}

static int is_anchor(remat_instr in)
{
    return in.kind == REMAT_I_FWD || in.kind == REMAT_I_BWD;
}

/* Appends the base's touches of instructions [from, n) to the pairs: the
 * tensors whose residency an instruction reads or changes, by storage. */
static remat_status touch_pairs(remat__delta *d, size_t from, remat_err *err)
{
    const remat_graph *g = d->a->g;
    const remat_schedule *b = &d->base;
    for (size_t i = from; i < b->n; i++) {
        remat_instr in = b->ins[i];
        const uint32_t *l1 = NULL, *l2 = NULL;
        uint32_t n1 = 0, n2 = 0;
        if ((in.kind == REMAT_I_FWD || in.kind == REMAT_I_RECOMPUTE) && in.arg < g->n_ops) {
            l1 = remat_op_inputs(g, &g->ops[in.arg]);
            n1 = g->ops[in.arg].n_in;
            l2 = remat_op_outputs(g, &g->ops[in.arg]);
            n2 = g->ops[in.arg].n_out;
        } else if (in.kind == REMAT_I_BWD && in.arg < g->n_ops) {
            l1 = remat_op_saves(g, &g->ops[in.arg]);
            n1 = g->ops[in.arg].n_save;
        } else if (in.kind == REMAT_I_FREE && in.arg < g->n_tensors) {
            l1 = &b->ins[i].arg;
            n1 = 1;
        }
        if (d->n_pairs + 2 * ((size_t)n1 + n2) > d->pairs_cap) {
            size_t cap = d->pairs_cap ? d->pairs_cap : 1024;
            while (cap < d->n_pairs + 2 * ((size_t)n1 + n2))
                cap *= 2;
            uint32_t *p = remat__realloc(d->pairs, cap * sizeof *p);
            if (!p)
                return remat_err_set(err, REMAT_ENOMEM, "out of memory replaying");
            d->pairs = p;
            d->pairs_cap = cap;
        }
        for (uint32_t k = 0; k < n1 + n2; k++) {
            d->pairs[d->n_pairs++] = d->stor[k < n1 ? l1[k] : l2[k - n1]];
            d->pairs[d->n_pairs++] = (uint32_t)i;
        }
    }
    return REMAT_OK;
}

/* The touch lists of the base (a CSR by storage, each list ascending),
 * from its touches in instruction order: those of the first `keep`
 * instructions are the last base's (the same instructions), the rest read
 * again. */
static remat_status build_touches(remat__delta *d, size_t keep, remat_err *err)
{
    if (d->base.n > UINT32_MAX)
        return REMAT_EUNSUPPORTED; /* no jumps on a schedule this long */
    /* The pairs of the shared prefix: those before the first pair of an
     * instruction at or after keep (pairs ascend by instruction). */
    size_t lo = 0, hi = keep > 0 ? d->n_pairs / 2 : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->pairs[2 * mid + 1] < keep)
            lo = mid + 1;
        else
            hi = mid;
    }
    d->n_pairs = 2 * lo;
    remat_status st = touch_pairs(d, keep, err);
    if (st != REMAT_OK) {
        d->n_pairs = 0;
        return st;
    }
    const size_t total = d->n_pairs / 2;
    if (total > UINT32_MAX)
        return REMAT_EUNSUPPORTED;
    memset(d->touch_off, 0, (d->nt + 1) * sizeof *d->touch_off);
    for (size_t k = 0; k < total; k++)
        d->touch_off[d->pairs[2 * k] + 1]++;
    for (size_t t = 0; t < d->nt; t++)
        d->touch_off[t + 1] += d->touch_off[t];
    if (total > d->touch_cap) {
        uint32_t *p = remat__array(total, sizeof *p);
        if (!p)
            return remat_err_set(err, REMAT_ENOMEM, "out of memory replaying");
        remat__free(d->touch);
        d->touch = p;
        d->touch_cap = total;
    }
    for (size_t k = 0; k < total; k++)
        d->touch[d->touch_off[d->pairs[2 * k]]++] = d->pairs[2 * k + 1];
    for (size_t t = d->nt; t > 0; t--)
        d->touch_off[t] = d->touch_off[t - 1];
    d->touch_off[0] = 0;
    d->pairs_upto = d->base.n;
    return REMAT_OK;
}

/* The snapshot spacing for a base of n instructions with cap snapshots. */
static size_t spacing(const remat__delta *d, size_t n, size_t cap)
{
    size_t every = (n + cap - 1) / cap;
    if (every < SNAP_MIN_EVERY)
        every = SNAP_MIN_EVERY;
    if (every < 4 * snap_work(d))
        every = 4 * snap_work(d);
    return every;
}

/* How many snapshots of the old base a new base s may keep: those at or
 * before the first instruction where s differs from it, when the spacing
 * is the same (so a full replay of s would take them at the same places,
 * from the same state). A local search's new base is the flip it kept,
 * which differs from the old one only from the flip's window on. */
static size_t reusable_snapshots(const remat__delta *d, const remat_schedule *s, size_t cap)
{
    if (!d->base_ok || d->n_snap == 0 || spacing(d, s->n, cap) != d->every)
        return 0;
    const remat_schedule *b = &d->base;
    size_t n = s->n < b->n ? s->n : b->n, p = 0;
    while (p < n && s->ins[p].kind == b->ins[p].kind && s->ins[p].arg == b->ins[p].arg)
        p++;
    size_t k = 0;
    while (k < d->n_snap && d->s[k].at <= p)
        k++;
    return k;
}

remat_status remat__delta_base(remat__delta *d, const remat_schedule *s, remat__delta_figures *f, remat_err *err)
{
    memset(f, 0, sizeof *f);
    size_t cap = SNAP_MAX;
    while (cap > 0 && !d->s[cap - 1].flags)
        cap--;
    const size_t keep_snaps = d->whole || !ends_with_opt(s) ? 0 : reusable_snapshots(d, s, cap);
    if (keep_snaps > 0 && keep_snaps == d->n_snap && s->n == d->base.n &&
        memcmp(s->ins, d->base.ins, s->n * sizeof *s->ins) == 0) {
        *f = d->base_fig; /* the same base again (a search that starts where the last one ended) */
        return REMAT_OK;
    }
    /* The instructions s shares with the last base whose touches are
     * known: build_touches keeps theirs. */
    size_t shared = 0;
    if (d->pairs_upto > 0) {
        const size_t nmin = s->n < d->pairs_upto ? s->n : d->pairs_upto;
        while (shared < nmin && s->ins[shared].kind == d->base.ins[shared].kind &&
               s->ins[shared].arg == d->base.ins[shared].arg)
            shared++;
    }
    d->pairs_upto = 0;
    d->base_ok = 0;
    d->n_snap = 0;
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
        /* Grown with room (a search's bases grow a little at a time), the
         * marks before a resumed replay's start kept. */
        size_t cap_hw = s->n + s->n / 4;
        uint64_t *ht = cap_hw <= SIZE_MAX / sizeof *ht ? remat__realloc(d->hw_total, cap_hw * sizeof *ht) : NULL;
        if (ht)
            d->hw_total = ht;
        uint64_t *ha = ht ? remat__realloc(d->hw_act, cap_hw * sizeof *ha) : NULL;
        if (ha)
            d->hw_act = ha;
        if (!ht || !ha) {
            d->hw_cap = 0; /* the next base starts over */
            return remat_err_set(err, REMAT_ENOMEM, "out of memory replaying");
        }
        d->hw_cap = cap_hw;
    }
    remat_err_init(&d->local);
    const remat_graph *g = d->a->g;
    /* Snapshots at least four copies' worth apart: a base then costs at
     * most a quarter more than a plain replay, and a candidate replays on
     * average half that spacing before its first edit. */
    d->every = spacing(d, s->n, cap);
    size_t from = 0;
    if (keep_snaps > 0) {
        /* Resume at the last snapshot kept (taken again there, as a full
         * replay would): everything before it is the old base's. */
        from = d->s[keep_snaps - 1].at;
        restore(d, &d->s[keep_snaps - 1]);
        d->n_snap = keep_snaps - 1;
        for (size_t k = 0; k < d->no; k++) {
            if (d->pos_fwd[k] != SIZE_MAX && d->pos_fwd[k] >= from)
                d->pos_fwd[k] = SIZE_MAX;
            if (d->pos_bwd[k] != SIZE_MAX && d->pos_bwd[k] >= from)
                d->pos_bwd[k] = SIZE_MAX;
        }
    } else {
        if ((st = restart(d, err)) != REMAT_OK)
            return st;
        for (size_t k = 0; k < d->no; k++)
            d->pos_fwd[k] = d->pos_bwd[k] = SIZE_MAX;
    }
    int bad = 0;
    size_t next = from;
    /* The work of the whole replay it stands for (the instructions, and a
     * copy per snapshot, counted below), however much of it was reused. */
    f->work = s->n + (keep_snaps > 0 ? (keep_snaps - 1) * snap_work(d) : 0);
    for (size_t i = from; i < s->n && !bad; i++) {
        remat_instr in = s->ins[i];
        if (i >= next && is_anchor(in) && d->n_snap < cap) {
            save(d, &d->s[d->n_snap++]);
            f->work += snap_work(d);
            next = i + d->every;
        }
        if (in.arg < g->n_ops && in.kind == REMAT_I_FWD)
            d->pos_fwd[in.arg] = i;
        if (in.arg < g->n_ops && in.kind == REMAT_I_BWD)
            d->pos_bwd[in.arg] = i;
        d->c->step_total = d->c->step_act = 0;
        if ((st = step(d, in, &bad, err)) != REMAT_OK)
            return st;
        d->hw_total[i] = d->c->step_total;
        d->hw_act[i] = d->c->step_act;
    }
    if (bad || d->n_snap == 0) {
        f->valid = !bad;
        if (!bad)
            figures_of(d, f);
        d->n_snap = 0;
        return REMAT_OK;
    }
    figures_of(d, f);
    /* Each stretch's maxima. */
    for (size_t k = 0; k < d->n_snap; k++) {
        size_t end = k + 1 < d->n_snap ? d->s[k + 1].at : s->n;
        uint64_t mt = 0, ma = 0;
        for (size_t i = d->s[k].at; i < end; i++) {
            mt = d->hw_total[i] > mt ? d->hw_total[i] : mt;
            ma = d->hw_act[i] > ma ? d->hw_act[i] : ma;
        }
        d->blk_total[k] = mt;
        d->blk_act[k] = ma;
    }
    st = build_touches(d, shared, err);
    if (st == REMAT_EUNSUPPORTED) {
        d->n_snap = 0; /* figures right, no snapshots */
        return REMAT_OK;
    }
    if (st != REMAT_OK)
        return st;
    d->base_flops = f->flops_recompute;
    d->base_fig = *f;
    d->base_ok = 1;
    return REMAT_OK;
}

/* x shifted by (cur - base), the difference of a candidate's live bytes
 * and the base's; 0 when it would pass 2^64 - 1 (the caller then replays,
 * and the replay reports the overflow). */
static int shifted(uint64_t x, uint64_t cur, uint64_t base, uint64_t *out)
{
    if (cur >= base)
        return remat_u64_add(x, cur - base, out);
    *out = x - (base - cur); /* a true byte count of the candidate: no wrap */
    return 1;
}

/* The first instruction of the base at or after `from` that touches
 * storage st (the base's length when none does). */
static size_t next_touch(const remat__delta *d, uint32_t st, size_t from)
{
    uint32_t lo = d->touch_off[st], hi = d->touch_off[st + 1];
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (d->touch[mid] < from)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < d->touch_off[st + 1] ? d->touch[lo] : d->base.n;
}

/* At snapshot m's anchor (the candidate about to apply s->ins[*i]): the
 * set D of storages whose residency differs, and the jump (see the file
 * comment). *done = 1: f holds the figures. Otherwise *i and *m say where
 * the replay goes on (unchanged *i: no jump). */
static remat_status try_jump(remat__delta *d, const remat_schedule *s, size_t q, size_t *i, size_t *m,
                             remat__delta_figures *f, int *done, remat_err *err)
{
    remat_replay_cursor *c = d->c;
    const remat_graph *g = d->a->g;
    const snap *S = &d->s[*m];
    const size_t nt = d->nt, no = d->no, nb = d->base.n;
    f->work += snap_work(d);
    *done = 0;
    const size_t m0 = *m;
    *m = m0 + 1;
    if (c->seeded != S->seeded || c->opt_seen != S->opt_seen || memcmp(c->grad, S->flags + 2 * nt, nt) != 0 ||
        memcmp(c->fwd_done, S->flags + 4 * nt, no) != 0 || memcmp(c->bwd_done, S->flags + 4 * nt + no, no) != 0 ||
        memcmp(c->pending, S->counts + nt, nt * sizeof *S->counts) != 0)
        return REMAT_OK;
    if (++d->epoch == 0) {
        memset(d->mark, 0, nt * sizeof *d->mark);
        d->epoch = 1;
    }
    uint32_t nd = 0, nmem = 0;
    /* By blocks: a block whose residency, counts and categories all equal
     * the snapshot's holds no difference (most of them; a candidate
     * differs from the base in a few storages). */
    enum { BLOCK = 64 };
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        if (t % BLOCK == 0) {
            const uint32_t nk = g->n_tensors - t < BLOCK ? g->n_tensors - t : BLOCK;
            if (memcmp(c->res + t, S->flags + t, nk) == 0 && memcmp(c->ever + t, S->flags + nt + t, nk) == 0 &&
                memcmp(c->cnt + t, S->counts + t, nk * sizeof *c->cnt) == 0 &&
                memcmp(c->cat + t, S->flags + 3 * nt + t, nk) == 0) {
                t += nk - 1;
                continue;
            }
        }
        uint32_t st = d->stor[t];
        int differs = c->res[t] != S->flags[t] || c->ever[t] != S->flags[nt + t];
        if (st == t)
            differs |= c->cnt[t] != S->counts[t] || ((c->cnt[t] || S->counts[t]) && c->cat[t] != S->flags[3 * nt + t]);
        if (differs && d->mark[st] != d->epoch) {
            nmem += d->members_off[st + 1] - d->members_off[st];
            if (nd == D_MAX || nmem > D_MEMBERS_MAX)
                return REMAT_OK;
            d->mark[st] = d->epoch;
            d->dset[nd++] = st;
        }
    }
    size_t z = nb;
    for (uint32_t k = 0; k < nd; k++) {
        size_t x = next_touch(d, d->dset[k], S->at);
        z = x < z ? x : z;
    }
    /* The common stretch from (*i, S->at), up to z. */
    size_t run = 0, lim = z - S->at;
    if (S->at + s->n == *i + nb && S->at >= nb - q) {
        run = lim; /* inside the common suffix */
    } else {
        while (run < lim && *i + run < s->n && s->ins[*i + run].kind == d->base.ins[S->at + run].kind &&
               s->ins[*i + run].arg == d->base.ins[S->at + run].arg)
            run++;
        f->work += run / 16;
    }
    const size_t zz = S->at + run;
    size_t m2 = m0;
    while (m2 + 1 < d->n_snap && d->s[m2 + 1].at <= zz)
        m2++;
    const int to_end = zz == nb && *i + run == s->n;
    if (!to_end && m2 == m0)
        return REMAT_OK;
    /* The base's maxima over the stretch, shifted by the candidate's
     * difference in live bytes. */
    size_t last = to_end ? d->n_snap : m2;
    uint64_t bt = 0, ba = 0, pt, pa;
    for (size_t k = m0; k < last; k++) {
        bt = d->blk_total[k] > bt ? d->blk_total[k] : bt;
        ba = d->blk_act[k] > ba ? d->blk_act[k] : ba;
    }
    if (!shifted(bt, c->total, S->total, &pt) || !shifted(ba, c->act_live, S->act_live, &pa))
        return REMAT_OK;
    const uint64_t peak = c->r->peak_bytes > pt ? c->r->peak_bytes : pt;
    const uint64_t act = c->r->activation_peak > pa ? c->r->activation_peak : pa;
    const uint64_t upto = to_end ? d->base_flops : d->s[m2].r.flops_recompute;
    uint64_t flops;
    if (!remat_u64_add(c->r->flops_recompute, upto - S->r.flops_recompute, &flops))
        return remat_err_set(err, REMAT_EOVERFLOW, "instruction %zu: FLOP total exceeds 2^64-1", *i);
    if (to_end) {
        f->valid = 1;
        f->peak_bytes = peak;
        f->activation_peak = act;
        f->flops_recompute = flops;
        *done = 1;
        return REMAT_OK;
    }
    /* Jump: the candidate's D and live-byte difference onto snapshot m2. */
    uint64_t dl[REMAT_CAT_COUNT];
    for (int k = 0; k < REMAT_CAT_COUNT; k++)
        dl[k] = c->live[k] - S->live[k]; /* modular: added back below, exact */
    const uint64_t dt = c->total - S->total, da = c->act_live - S->act_live;
    uint32_t w = 0;
    for (uint32_t k = 0; k < nd; k++) {
        uint32_t st = d->dset[k];
        d->d_cnt[k] = c->cnt[st];
        d->d_cat[k] = c->cat[st];
        for (uint32_t x = d->members_off[st]; x < d->members_off[st + 1]; x++, w++) {
            d->d_res[w] = c->res[d->members[x]];
            d->d_ever[w] = c->ever[d->members[x]];
        }
    }
    const snap *T = &d->s[m2];
    restore(d, T);
    f->work += snap_work(d);
    w = 0;
    for (uint32_t k = 0; k < nd; k++) {
        uint32_t st = d->dset[k];
        c->cnt[st] = d->d_cnt[k];
        c->cat[st] = d->d_cat[k];
        for (uint32_t x = d->members_off[st]; x < d->members_off[st + 1]; x++, w++) {
            c->res[d->members[x]] = d->d_res[w];
            c->ever[d->members[x]] = d->d_ever[w];
        }
    }
    for (int k = 0; k < REMAT_CAT_COUNT; k++)
        c->live[k] += dl[k];
    c->total += dt;
    c->act_live += da;
    c->r->peak_bytes = peak;
    c->r->activation_peak = act;
    c->r->flops_recompute = flops;
    *i += T->at - S->at;
    c->index = *i;
    *m = m2 + 1;
    return REMAT_OK;
}

remat_status remat__delta_eval(remat__delta *d, const remat_schedule *s, remat__delta_figures *f, remat_err *err)
{
    memset(f, 0, sizeof *f);
    if (!d->base_ok || !ends_with_opt(s))
        return whole(d, s, f, err);
    const remat_graph *g = d->a->g;
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
    size_t k0 = 0;
    while (k0 + 1 < d->n_snap && d->s[k0 + 1].at <= p)
        k0++;
    restore(d, &d->s[k0]);
    remat_err_init(&d->local);
    f->work += snap_work(d);
    size_t m = k0 + 1, i = d->s[k0].at;
    int bad = 0;
    remat_status st;
    while (i < s->n) {
        remat_instr in = s->ins[i];
        if (m < d->n_snap && is_anchor(in) && in.arg < g->n_ops) {
            size_t j = in.kind == REMAT_I_FWD ? d->pos_fwd[in.arg] : d->pos_bwd[in.arg];
            while (m < d->n_snap && d->s[m].at < j)
                m++;
            if (m < d->n_snap && d->s[m].at == j) {
                int done = 0;
                size_t i0 = i;
                if ((st = try_jump(d, s, q, &i, &m, f, &done, err)) != REMAT_OK)
                    return st;
                if (done)
                    return REMAT_OK;
                if (i != i0)
                    continue;
            }
        }
        f->work++;
        if ((st = step(d, in, &bad, err)) != REMAT_OK)
            return st;
        if (bad)
            return REMAT_OK; /* f->valid = 0 */
        i++;
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

/*
 * dtr_run.c - one DTR replay: the store-all step under a memory limit,
 * emitting the schedule it performs (the design is in dtr.c).
 *
 * There is no accounting here: every instruction the run emits is applied
 * to a replay cursor (remat/exec.h), the executor itself, and the run reads
 * residency, live bytes and what the next instruction would add
 * (remat_replay_cost) from it. So the peak DTR plans against is the peak the
 * executor replays, by construction, and a rule added to the executor
 * (collectives, sharded state) reaches DTR with no edit here. Only the
 * categories the budget caps count toward the limit (all of them for
 * --budget).
 *
 * A step runs as a stack of frames: the top frame's first missing
 * requirement pushes a RECOMPUTE frame for its producer, and a frame whose
 * requirements are all resident runs its instruction. Frames lock their
 * requirements and their op's outputs from the moment they are pushed, so
 * what a pending frame needs is never evicted and every frame completes; the
 * depth is bounded by the longest path in the graph (each pushed op is a
 * strict ancestor of the frame below).
 */
#include "dtr_internal.h"
#include "../util/util_internal.h"

#include <string.h>

/* Abandon a run past this many work units per tensor, op and ref: that is
 * recomputation without end (thrashing), not planning. */
#define DTR_WORK_FACTOR 1024u

/* ------------------------------------------------------------ static tables */

/* need_end, consumers first: rebuilding an output o of a recomputable
 * consumer reads t, so t is needed as long as o may have to be rebuilt.
 * That is rebuild_end(o): need_end(o) when o's storage may be evicted (it
 * can go at any step and be read again up to its need_end); otherwise o is
 * resident from its step to its last direct read, and is dropped (and may
 * be rebuilt) only after that, for a rebuild of its own consumers'
 * outputs: the latest rebuild_end of those. The difference matters for a
 * tensor held to the end of the step (the loss, which the caller holds and
 * which the earliest op's backward step reads): it is never evicted, so
 * no rebuild of it reads its ancestors, which would otherwise all be
 * "needed" to the end, and in hold mode every output of an op that cannot
 * be recomputed upstream of it (a dropout's raw mask) would be kept to
 * the end of the step, long after anything could rebuild from it. */
static void compute_need_end(remat_dtr_static *S, uint32_t *rebuild_end)
{
    const remat_analysis *a = S->a;
    const remat_graph *g = S->g;
    for (uint32_t i = g->n_ops; i-- > 0;) {
        const remat_op *op = &g->ops[a->order[i]];
        const uint32_t *out = remat_op_outputs(g, op);
        for (uint32_t j = 0; j < op->n_out; j++) {
            uint32_t t = out[j], ne = remat__later_step(a->life[t].last_fwd_use, a->life[t].last_bwd_use);
            uint32_t rb = UINT32_MAX; /* the latest rebuild of a consumer's output */
            for (uint32_t c = a->cons_off[t]; c < a->cons_off[t + 1]; c++) {
                const remat_op *cop = &g->ops[a->cons[c]];
                if (!cop->recomputable)
                    continue;
                const uint32_t *cout = remat_op_outputs(g, cop);
                for (uint32_t m = 0; m < cop->n_out; m++)
                    rb = remat__later_step(rb, rebuild_end[cout[m]]);
            }
            ne = remat__later_step(ne, rb);
            S->need_end[t] = remat__later_step(ne, i); /* never read: banished after its own step */
            rebuild_end[t] = S->evictable[g->tensors[t].storage] ? S->need_end[t] : rb;
        }
    }
    for (uint32_t t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].kind == REMAT_TENSOR_ACTIVATION)
            S->end_off[S->need_end[t] + 1]++;
    for (uint32_t s = 0; s < a->n_steps; s++)
        S->end_off[s + 1] += S->end_off[s];
    for (uint32_t t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].kind == REMAT_TENSOR_ACTIVATION)
            S->end_list[S->end_off[S->need_end[t]]++] = t;
    /* The fill advanced each bucket's start to the next one's: shift back. */
    for (uint32_t s = a->n_steps; s > 0; s--)
        S->end_off[s] = S->end_off[s - 1];
    S->end_off[0] = 0;
}

/* Views per storage, and which storages each mode may evict. */
static void compute_evictable(remat_dtr_static *S)
{
    const remat_analysis *a = S->a;
    const remat_graph *g = S->g;
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        const remat_tensor *T = &g->tensors[t];
        int act = T->kind == REMAT_TENSOR_ACTIVATION;
        if (act && T->storage != t)
            S->view_off[T->storage + 1]++;
        S->rebuildable[t] = act && g->ops[T->producer].recomputable;
        S->cost[t] = act ? (double)g->ops[T->producer].flops : 0;
        S->evictable[t] = S->rebuildable[t] && T->storage == t && T->bytes > 0;
    }
    /* The graph's outputs (the loss) are the caller's: never evicted, so
     * nothing ever rebuilds them (compute_need_end). */
    for (uint32_t k = 0; k < g->n_outputs; k++)
        S->evictable[g->tensors[g->outputs[k]].storage] = 0;
    for (uint32_t t = 0; t < g->n_tensors; t++)
        S->view_off[t + 1] += S->view_off[t];
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        const remat_tensor *T = &g->tensors[t];
        if (T->kind == REMAT_TENSOR_ACTIVATION && T->storage != t) {
            S->views[S->view_off[T->storage]++] = t;
            if (!S->rebuildable[t])
                S->evictable[T->storage] = 0;
        }
    }
    for (uint32_t t = g->n_tensors; t > 0; t--)
        S->view_off[t] = S->view_off[t - 1];
    S->view_off[0] = 0;
    /* Release mode: descendants of fixed outputs through recomputable ops
     * (one pass in forward order) are never evicted. */
    uint8_t *tainted = S->evictable_release; /* tainted first, then inverted */
    for (uint32_t i = 0; i < g->n_ops; i++) {
        const remat_op *op = &g->ops[a->order[i]];
        const uint32_t *in = remat_op_inputs(g, op), *out = remat_op_outputs(g, op);
        uint8_t t = !op->recomputable && op->n_out > 0;
        S->has_fixed |= t;
        for (uint32_t j = 0; j < op->n_in && !t; j++)
            t = tainted[in[j]];
        for (uint32_t j = 0; j < op->n_out; j++)
            tainted[out[j]] = t;
    }
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        uint8_t any = tainted[t];
        for (uint32_t i = S->view_off[t]; i < S->view_off[t + 1]; i++)
            any |= tainted[S->views[i]];
        tainted[t] = any;
    }
    for (uint32_t t = 0; t < g->n_tensors; t++)
        S->evictable_release[t] = S->evictable[t] && !tainted[t];
}

/* The dense tables of dtr_internal.h (prod, bytes, share, the filtered
 * neighbour lists). Two passes over the neighbours: count, then fill. */
static remat_status compute_neighbours(remat_dtr_static *S, remat_err *err)
{
    const remat_analysis *a = S->a;
    const remat_graph *g = S->g;
    size_t nt = g->n_tensors ? g->n_tensors : 1;
    S->prod = remat__array(nt, sizeof *S->prod);
    S->bytes = remat__array(nt, sizeof *S->bytes);
    S->share = remat__calloc(nt, sizeof *S->share);
    S->nb_off = remat__calloc(nt + 1, sizeof *S->nb_off);
    S->nb_mid = remat__calloc(nt, sizeof *S->nb_mid);
    S->nb_deg = remat__calloc(nt, sizeof *S->nb_deg);
    if (!S->prod || !S->bytes || !S->share || !S->nb_off || !S->nb_mid || !S->nb_deg)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory planning dtr");
    uint64_t total = 0;
    for (int fill = 0; fill < 2; fill++) {
        uint64_t k = 0;
        for (uint32_t t = 0; t < g->n_tensors; t++) {
            const remat_tensor *T = &g->tensors[t];
            S->prod[t] = T->producer;
            S->bytes[t] = T->bytes;
            S->nb_off[t] = (uint32_t)k;
            S->nb_mid[t] = (uint32_t)k;
            if (T->kind != REMAT_TENSOR_ACTIVATION)
                continue;
            const remat_op *op = &g->ops[T->producer];
            const uint32_t *in = remat_op_inputs(g, op);
            uint32_t deg = 0;
            S->share[t] = op->flops / (op->n_out ? op->n_out : 1);
            for (uint32_t i = 0; i < op->n_in; i++, deg++)
                if (S->rebuildable[in[i]]) {
                    if (fill)
                        S->nb[k] = in[i];
                    k++;
                }
            S->nb_mid[t] = (uint32_t)k;
            for (uint32_t c = a->cons_off[t]; c < a->cons_off[t + 1]; c++) {
                const remat_op *cop = &g->ops[a->cons[c]];
                const uint32_t *out = remat_op_outputs(g, cop);
                for (uint32_t j = 0; j < cop->n_out; j++, deg++)
                    if (S->rebuildable[out[j]]) {
                        if (fill)
                            S->nb[k] = out[j];
                        k++;
                    }
            }
            S->nb_deg[t] = deg;
            if (k > UINT32_MAX)
                return remat_err_set(err, REMAT_EOVERFLOW, "dtr: more than 2^32 neighbour entries");
        }
        S->nb_off[g->n_tensors] = (uint32_t)k;
        total = k;
        if (!fill && !(S->nb = remat__array(total ? total : 1, sizeof *S->nb)))
            return remat_err_set(err, REMAT_ENOMEM, "out of memory planning dtr");
    }
    return REMAT_OK;
}

remat_status remat__dtr_static_build(const remat_analysis *a, const remat_plan_options *o, remat_dtr_static *S,
                                     remat_err *err)
{
    const remat_graph *g = a->g;
    size_t nt = g->n_tensors ? g->n_tensors : 1;
    memset(S, 0, sizeof *S);
    S->a = a;
    S->g = g;
    S->kind = o->budget_kind;
    /* DTR's eviction drives the cursor with compute instructions only: it
     * plans one rank's budget with the state unsharded (never less than the
     * rank holds), and plan.c's final replay inserts the collectives and
     * judges the plan per rank. */
    S->x_unsharded = o->extras;
    S->x_unsharded.sharding = NULL;
    S->x = &S->x_unsharded;
    S->need_end = remat__array(nt, sizeof *S->need_end);
    S->end_off = remat__array((size_t)a->n_steps + 1, sizeof *S->end_off);
    S->end_list = remat__array(nt, sizeof *S->end_list);
    S->view_off = remat__array(nt + 1, sizeof *S->view_off);
    S->views = remat__array(nt, sizeof *S->views);
    S->evictable = remat__calloc(nt, 1);
    S->evictable_release = remat__calloc(nt, 1);
    S->rebuildable = remat__calloc(nt, 1);
    S->cost = remat__array(nt, sizeof *S->cost);
    if (!S->need_end || !S->end_off || !S->end_list || !S->view_off || !S->views || !S->evictable ||
        !S->evictable_release || !S->rebuildable || !S->cost)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory planning dtr");
    uint32_t *rebuild_end = remat__array(nt, sizeof *rebuild_end);
    if (!rebuild_end)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory planning dtr");
    compute_evictable(S);
    compute_need_end(S, rebuild_end);
    remat__free(rebuild_end);
    return compute_neighbours(S, err);
}

void remat__dtr_static_destroy(remat_dtr_static *S)
{
    remat__free(S->need_end);
    remat__free(S->end_off);
    remat__free(S->end_list);
    remat__free(S->view_off);
    remat__free(S->views);
    remat__free(S->evictable);
    remat__free(S->evictable_release);
    remat__free(S->rebuildable);
    remat__free(S->cost);
    remat__free(S->prod);
    remat__free(S->bytes);
    remat__free(S->share);
    remat__free(S->nb_off);
    remat__free(S->nb_mid);
    remat__free(S->nb);
    remat__free(S->nb_deg);
    memset(S, 0, sizeof *S);
}

/* ------------------------------------------------------------ run state */

remat_status remat__dtr_run_init(remat_dtr_run *R, const remat_dtr_static *S, remat_err *err)
{
    const remat_graph *g = S->g;
    size_t nt = g->n_tensors ? g->n_tensors : 1, no = g->n_ops ? g->n_ops : 1;
    memset(R, 0, sizeof *R);
    R->S = S;
    R->a = S->a;
    R->g = g;
    R->err = err;
    R->lockc = remat__array(nt, sizeof *R->lockc);
    R->slock = remat__array(nt, sizeof *R->slock);
    R->fwd_rem = remat__array(nt, sizeof *R->fwd_rem);
    R->bwd_rem = remat__array(nt, sizeof *R->bwd_rem);
    R->fr = remat__array(no + 2, sizeof *R->fr);
    R->cpos = remat__array(nt, sizeof *R->cpos);
    R->cand = remat__array(nt, sizeof *R->cand);
    R->last = remat__array(nt, sizeof *R->last);
    R->heap = remat__array(nt, sizeof *R->heap);
    R->mark = remat__array(nt, sizeof *R->mark);
    R->seen = remat__array(nt, sizeof *R->seen);
    R->opmark = remat__array(no, sizeof *R->opmark);
    R->dfs = remat__array(nt + 1, sizeof *R->dfs);
    R->node_of = remat__array(nt, sizeof *R->node_of);
    R->ev = remat__calloc(nt, 1);
    R->nsum = remat__array(nt, sizeof *R->nsum);
    if (!R->ev || !R->nsum || !R->lockc || !R->slock || !R->fwd_rem || !R->bwd_rem || !R->fr || !R->cpos ||
        !R->cand || !R->last || !R->heap || !R->mark || !R->seen || !R->opmark || !R->dfs || !R->node_of)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory planning dtr");
    remat_status st = remat_replay_begin(S->a, S->x, S->obs, &R->cur, err);
    if (st != REMAT_OK)
        return st;
    R->mask = S->kind == REMAT_BUDGET_ACTIVATION ? REMAT_CAT_MASK_ACTIVATION : REMAT_CAT_MASK_ALL;
    R->res = R->cur->res;
    R->made = R->cur->ever;
    R->cnt = R->cur->cnt;
    R->thrash_cap = ((uint64_t)g->n_tensors + g->n_refs + g->n_ops + 1) * DTR_WORK_FACTOR;
    return REMAT_OK;
}

void remat__dtr_run_destroy(remat_dtr_run *R)
{
    remat_replay_cursor_destroy(R->cur);
    remat__free(R->lockc);
    remat__free(R->slock);
    remat__free(R->fwd_rem);
    remat__free(R->bwd_rem);
    remat__free(R->fr);
    remat__free(R->cpos);
    remat__free(R->cand);
    remat__free(R->last);
    remat__free(R->heap);
    remat__free(R->mark);
    remat__free(R->seen);
    remat__free(R->opmark);
    remat__free(R->dfs);
    remat__free(R->node_of);
    remat__free(R->ev);
    remat__free(R->nsum);
    remat__free(R->uf_parent);
    remat__free(R->uf_mark);
    remat__free(R->uf_cost);
    memset(R, 0, sizeof *R);
}

/* ------------------------------------------------------------ accounting */

/* Appends an instruction to the schedule and applies it to the replay. An
 * instruction the executor refuses is a bug here, reported as one. */
static remat_status emit(remat_dtr_run *R, remat_instr_kind k, uint32_t arg)
{
    if (remat_schedule_push(R->out, k, arg) != REMAT_OK)
        return remat_err_set(R->err, REMAT_ENOMEM, "out of memory planning dtr");
    remat_instr in = {(uint32_t)k, arg};
    /* The cursor keeps its own message (its local err): an err per
     * instruction would cost more than the instruction. */
    remat_status st = remat_replay_apply(R->cur, in, NULL);
    if (st == REMAT_ESCHEDULE)
        return remat_err_set(R->err, REMAT_EINTERNAL, "dtr: emitted an instruction the executor refuses: %s",
                             R->cur->local.msg);
    if (st != REMAT_OK)
        return remat_err_set(R->err, st, "%s", R->cur->local.msg);
    R->live = remat_replay_live(R->cur, R->mask);
    return REMAT_OK;
}

/* ------------------------------------------------------------ residency */

static void cand_insert(remat_dtr_run *R, uint32_t s)
{
    if (R->cpos[s] != REMAT_NONE)
        return;
    R->cpos[s] = R->n_cand;
    R->cand[R->n_cand++] = s;
}

static void cand_remove(remat_dtr_run *R, uint32_t s)
{
    uint32_t p = R->cpos[s];
    if (p == REMAT_NONE)
        return;
    uint32_t moved = R->cand[--R->n_cand];
    R->cand[p] = moved;
    R->cpos[moved] = p;
    R->cpos[s] = REMAT_NONE;
}

/* t is resident (again): a candidate if it may be evicted, and no longer
 * part of an evicted neighbourhood. Idempotent. */
static remat_status produced(remat_dtr_run *R, uint32_t t)
{
    uint32_t s = R->g->tensors[t].storage;
    if (t == s && R->evictable[s])
        cand_insert(R, s);
    return remat__dtr_set_evicted(R, t, 0);
}

/* FREE t: emits it (the replay releases the storage with its last
 * resident member). */
static remat_status release(remat_dtr_run *R, uint32_t t)
{
    uint32_t s = R->g->tensors[t].storage;
    remat_status st = emit(R, REMAT_I_FREE, t);
    if (st != REMAT_OK)
        return st;
    if (t == s)
        cand_remove(R, s);
    /* Rebuildable and not banished: it joins the evicted neighbourhoods. */
    if (R->S->rebuildable[t] && !remat__dtr_banished(R, t))
        return remat__dtr_set_evicted(R, t, 1);
    return REMAT_OK;
}

/* Nothing reads t directly any more (DTR frees it eagerly; it stays
 * rebuildable), or nothing may read it at all. A fixed output in hold mode
 * waits for the second: a tensor rebuilt from it may still need it. */
static int is_dead(const remat_dtr_run *R, uint32_t t)
{
    if (R->lockc[t])
        return 0;
    if (remat__dtr_banished(R, t))
        return 1;
    return (R->release || R->S->rebuildable[t]) && R->fwd_rem[t] == 0 && R->bwd_rem[t] == 0;
}

/* Frees t if it is dead. A base waits for its views: freeing it earlier
 * releases nothing and only costs a rebuild. */
static remat_status try_free(remat_dtr_run *R, uint32_t t)
{
    const remat_graph *g = R->g;
    if (g->tensors[t].kind != REMAT_TENSOR_ACTIVATION || !R->res[t] || !is_dead(R, t))
        return REMAT_OK;
    uint32_t s = g->tensors[t].storage;
    if (t == s && R->cnt[s] > 1)
        return REMAT_OK;
    remat_status st = release(R, t);
    if (st == REMAT_OK && t != s && g->tensors[s].kind == REMAT_TENSOR_ACTIVATION && R->res[s] && R->cnt[s] == 1)
        st = try_free(R, s);
    return st;
}

remat_status remat__dtr_evict(remat_dtr_run *R, uint32_t s)
{
    remat_status st = REMAT_OK;
    for (uint32_t i = R->S->view_off[s]; i < R->S->view_off[s + 1] && st == REMAT_OK; i++)
        if (R->res[R->S->views[i]])
            st = release(R, R->S->views[i]);
    if (st == REMAT_OK)
        st = release(R, s);
    R->evictions++;
    return st;
}

static void lock(remat_dtr_run *R, uint32_t t, int d)
{
    R->lockc[t] += (uint32_t)d;
    R->slock[R->g->tensors[t].storage] += (uint32_t)d;
}

/* ------------------------------------------------------------ instructions */

static const uint32_t *frame_reqs(const remat_dtr_run *R, const remat_dtr_frame *f, uint32_t *n)
{
    const remat_op *op = &R->g->ops[f->op];
    *n = f->kind == REMAT_DTR_FR_BWD ? op->n_save : op->n_in;
    return f->kind == REMAT_DTR_FR_BWD ? remat_op_saves(R->g, op) : remat_op_inputs(R->g, op);
}

static void frame_lock(remat_dtr_run *R, const remat_dtr_frame *f, int d)
{
    uint32_t n;
    const uint32_t *req = frame_reqs(R, f, &n);
    for (uint32_t i = 0; i < n; i++)
        lock(R, req[i], d);
    if (f->kind != REMAT_DTR_FR_BWD) {
        const remat_op *op = &R->g->ops[f->op];
        const uint32_t *out = remat_op_outputs(R->g, op);
        for (uint32_t i = 0; i < op->n_out; i++)
            lock(R, out[i], d);
    }
}

static void touch(remat_dtr_run *R, const uint32_t *ts, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        R->last[R->g->tensors[ts[i]].storage] = R->clock;
}

/* Runs the frame's instruction (its requirements are resident and locked),
 * then frees what is dead. */
static remat_status execute(remat_dtr_run *R, const remat_dtr_frame *f)
{
    static const remat_instr_kind kinds[] = {REMAT_I_FWD, REMAT_I_RECOMPUTE, REMAT_I_BWD};
    const remat_graph *g = R->g;
    const remat_op *op = &g->ops[f->op];
    remat_instr in = {(uint32_t)kinds[f->kind], f->op};
    uint64_t add = remat_replay_cost(R->cur, in, R->mask);
    remat_status st = remat__dtr_make_room(R, add);
    if (st != REMAT_OK)
        return st;
    uint64_t hw = R->live > UINT64_MAX - add ? UINT64_MAX : R->live + add;
    if (hw > R->abort_above) {
        R->abandoned = 1;
        return REMAT_OK;
    }
    if (hw > R->hw_pass)
        R->hw_pass = hw;
    if ((st = emit(R, kinds[f->kind], f->op)) != REMAT_OK)
        return st;
    uint32_t n_req;
    const uint32_t *req = frame_reqs(R, f, &n_req), *out = remat_op_outputs(g, op);
    touch(R, req, n_req);
    if (f->kind != REMAT_DTR_FR_BWD) {
        for (uint32_t i = 0; i < op->n_out && st == REMAT_OK; i++)
            st = produced(R, out[i]);
        if (st != REMAT_OK)
            return st;
        touch(R, out, op->n_out);
        if (f->kind == REMAT_DTR_FR_RECOMPUTE)
            R->rebuilds++;
    }
    R->clock++;
    R->work++;
    frame_lock(R, f, -1);
    if (f->kind == REMAT_DTR_FR_FWD) {
        uint32_t sk = remat__dtr_next_seen(R); /* an op may read a tensor twice */
        for (uint32_t i = 0; i < n_req; i++)
            if (R->seen[req[i]] != sk) {
                R->seen[req[i]] = sk;
                R->fwd_rem[req[i]]--;
            }
    } else if (f->kind == REMAT_DTR_FR_BWD) {
        for (uint32_t i = 0; i < n_req; i++) /* saves are distinct */
            R->bwd_rem[req[i]]--;
    }
    for (uint32_t i = 0; i < n_req && st == REMAT_OK; i++)
        st = try_free(R, req[i]);
    for (uint32_t i = 0; f->kind != REMAT_DTR_FR_BWD && i < op->n_out && st == REMAT_OK; i++)
        st = try_free(R, out[i]);
    return st;
}

/* One step of the store-all sequence, with whatever rematerialization its
 * requirements need. */
static remat_status run_step(remat_dtr_run *R, uint32_t op, uint32_t kind)
{
    const remat_graph *g = R->g;
    remat_dtr_frame top = {op, kind, 0, 0};
    R->fr[0] = top;
    R->n_fr = 1;
    while (R->n_fr > 0) {
        remat_dtr_frame *f = &R->fr[R->n_fr - 1];
        if (f->stage == 0) {
            frame_lock(R, f, 1);
            f->stage = 1;
        }
        uint32_t n_req;
        const uint32_t *req = frame_reqs(R, f, &n_req);
        while (f->i < n_req && R->res[req[f->i]])
            f->i++;
        if (f->i < n_req) {
            uint32_t t = req[f->i], p = g->tensors[t].producer;
            /* Fixed outputs are never evicted and freed only when no step
             * needs them: a lost requirement is a bug here. */
            if (!R->S->rebuildable[t] || !R->made[t])
                return remat_err_set(R->err, REMAT_EINTERNAL, "dtr: '%s' is needed but was lost", g->tensors[t].id);
            if (R->work > R->work_cap) {
                R->abandoned = 1;
                return REMAT_OK;
            }
            remat_dtr_frame child = {p, REMAT_DTR_FR_RECOMPUTE, 0, 0};
            R->fr[R->n_fr++] = child;
            continue;
        }
        remat_status st = execute(R, f);
        if (st != REMAT_OK || R->abandoned)
            return st;
        R->n_fr--;
    }
    return REMAT_OK;
}

/* After step s: banish what no later step can need, freeing what is still
 * resident (fixed outputs in hold mode wait for this). */
static remat_status end_step(remat_dtr_run *R, uint32_t s)
{
    remat_status st = REMAT_OK;
    R->step_over = 1;
    for (uint32_t i = R->S->end_off[s]; i < R->S->end_off[s + 1] && st == REMAT_OK; i++) {
        uint32_t t = R->S->end_list[i];
        st = R->res[t] ? try_free(R, t) : remat__dtr_set_evicted(R, t, 0);
    }
    R->step_over = 0;
    return st;
}

static void run_reset(remat_dtr_run *R, remat_dtr_config cfg, remat_schedule *out)
{
    const remat_graph *g = R->g;
    const remat_analysis *a = R->a;
    size_t nt = g->n_tensors ? g->n_tensors : 1;
    R->score = cfg.score;
    R->release = cfg.release;
    R->evictable = cfg.release ? R->S->evictable_release : R->S->evictable;
    R->limit = cfg.limit;
    R->abort_above = cfg.abort_above;
    R->work_cap = cfg.work_cap ? cfg.work_cap : R->thrash_cap;
    R->out = out;
    memset(R->lockc, 0, nt * sizeof *R->lockc);
    memset(R->slock, 0, nt * sizeof *R->slock);
    memset(R->last, 0, nt * sizeof *R->last);
    memset(R->ev, 0, nt);
    memset(R->nsum, 0, nt * sizeof *R->nsum);
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        R->cpos[t] = REMAT_NONE;
        R->node_of[t] = REMAT_NONE;
        R->fwd_rem[t] = a->cons_off[t + 1] - a->cons_off[t];
        R->bwd_rem[t] = a->saver_off[t + 1] - a->saver_off[t];
    }
    R->n_cand = R->n_nodes = R->n_heap = 0;
    R->live = R->peak = R->clock = R->hw_pass = 0;
    R->seeded = R->step_over = R->abandoned = 0;
    R->evictions = R->rebuilds = R->work = 0;
    R->rng = 0x5eed0d7eULL;
}

remat_status remat__dtr_run(remat_dtr_run *R, remat_dtr_config cfg, remat_schedule *out, remat_replay_result *r)
{
    const remat_graph *g = R->g;
    const remat_analysis *a = R->a;
    if (r)
        memset(r, 0, sizeof *r);
    remat_schedule_clear(out);
    run_reset(R, cfg, out);
    /* Leaves are resident throughout, as are the ledger's extras: the
     * replay placed them. */
    remat_status st = remat__replay_restart(R->cur, R->err);
    if (st != REMAT_OK)
        return st;
    R->live = remat_replay_live(R->cur, R->mask);
    for (uint32_t i = 0; i < g->n_ops && st == REMAT_OK && !R->abandoned; i++) {
        R->now = i;
        st = run_step(R, a->order[i], REMAT_DTR_FR_FWD);
        if (st == REMAT_OK && !R->abandoned)
            st = end_step(R, i);
    }
    for (uint32_t j = 0; j < a->n_bwd && st == REMAT_OK && !R->abandoned; j++) {
        R->now = g->n_ops + j;
        st = run_step(R, a->bwd_order[j], REMAT_DTR_FR_BWD);
        if (st == REMAT_OK && !R->abandoned)
            st = end_step(R, g->n_ops + j);
    }
    if (st != REMAT_OK || R->abandoned)
        return st;
    R->now = a->n_steps - 1;
    remat_instr opt = {REMAT_I_OPT, 0};
    uint64_t add = remat_replay_cost(R->cur, opt, R->mask);
    if (R->live > UINT64_MAX - add || R->live + add > R->abort_above) {
        R->abandoned = 1;
        return REMAT_OK;
    }
    if ((st = emit(R, REMAT_I_OPT, 0)) != REMAT_OK)
        return st;
    remat_replay_result res;
    remat_err e;
    remat_err_init(&e);
    if ((st = remat_replay_end(R->cur, &res, &e)) != REMAT_OK)
        return remat_err_set(R->err, st, "%s", e.msg);
    if (!res.valid) {
        remat_replay_result_destroy(&res);
        return remat_err_set(R->err, REMAT_EINTERNAL, "dtr: the executor refuses the schedule: %s", e.msg);
    }
    R->peak = R->mask == REMAT_CAT_MASK_ALL ? res.peak_bytes : res.activation_peak;
    if (r)
        *r = res;
    else
        remat_replay_result_destroy(&res);
    return REMAT_OK;
}

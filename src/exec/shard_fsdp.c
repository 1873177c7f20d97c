/*
 * shard_fsdp.c - where PyTorch FSDP puts its collectives: the builder of
 * FULL_SHARD and SHARD_GRAD_OP schedules (torch 1.13,
 * torch/distributed/fsdp/fully_sharded_data_parallel.py).
 *
 * Design: FSDP acts at module hooks, not per op, so a unit here is gathered
 * from the first instruction of a phase that reads it (the module's
 * pre-forward, or its pre-backward hook) to the last one of that phase
 * (its post-forward, or its post-backward hook). Rules, from the source:
 *   - `_pre_forward_unshard` all-gathers the unit, then `_prefetch_handles`
 *     gathers the next unit of the recorded forward order when
 *     forward_prefetch (limit 1);
 *   - `_post_forward` reshards under FULL_SHARD, except the root's params
 *     ("Do not free the root's parameters in the post-forward");
 *     SHARD_GRAD_OP keeps them gathered into backward;
 *   - `_pre_backward_hook` unshards the unit and, with BACKWARD_PRE,
 *     prefetches the next unit in backward order (the reverse of the
 *     post-forward order, `get_handles_to_backward_prefetch`, limit 1);
 *   - `_post_backward_hook` reshards (`_should_free_unsharded_flat_param`:
 *     both sharded strategies free here), prefetches with BACKWARD_POST,
 *     then reduce-scatters the flat gradient; remat emits the RELEASE, the
 *     prefetch, then the unit's REDUCE_SCATTER once its last gradient is
 *     written (the hook fires when the flat parameter's gradient is whole);
 *   - a unit still gathered when backward ends (SHARD_GRAD_OP's unit that
 *     backward never reads) is resharded in `_wait_for_post_backward`:
 *     remat releases it before OPT.
 * A prefetch only takes a unit whose hook has not run yet in the phase
 * (`_needs_pre_forward_unshard`, `_needs_pre_backward_unshard`) and that is
 * not gathered. limit_all_gathers acts on when a released buffer can be
 * reused, which the replay models (replay_shard.c), not on the order.
 */
#include "shard_internal.h"
#include "../util/util_internal.h"

#include <string.h>

typedef struct {
    const remat_sharding *sh;
    remat_schedule *out;
    uint8_t *gathered;
} fsdp_builder;

static int reads_params(remat_instr in)
{
    return in.kind == REMAT_I_FWD || in.kind == REMAT_I_RECOMPUTE || in.kind == REMAT_I_BWD;
}

static remat_status emit(fsdp_builder *B, remat_instr_kind k, uint32_t arg, remat_err *err)
{
    if (remat_schedule_push(B->out, k, arg) != REMAT_OK)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory inserting collectives");
    if (k == REMAT_I_ALLGATHER)
        B->gathered[arg] = 1;
    else if (k == REMAT_I_RELEASE)
        B->gathered[arg] = 0;
    return REMAT_OK;
}

/* Appends the units instruction `in` reads (params among an op's inputs,
 * and a BWD's saves), once each, to units[at..]; returns the new end.
 * With units NULL it only counts (an upper bound). */
static size_t units_of(const remat_sharding *sh, remat_instr in, uint32_t *units, size_t at)
{
    const remat_graph *g = sh->a->g;
    if (!reads_params(in) || in.arg >= g->n_ops)
        return at;
    const remat_op *op = &g->ops[in.arg];
    const uint32_t *lists[2] = {remat_op_inputs(g, op), remat_op_saves(g, op)};
    uint32_t lens[2] = {op->n_in, in.kind == REMAT_I_BWD ? op->n_save : 0};
    size_t start = at;
    for (int l = 0; l < 2; l++)
        for (uint32_t j = 0; j < lens[l]; j++) {
            uint32_t u = sh->unit_of[lists[l][j]];
            if (u == REMAT_NONE)
                continue;
            int dup = 0;
            for (size_t q = start; units && q < at && !dup; q++)
                dup = units[q] == u;
            if (!dup) {
                if (units)
                    units[at] = u;
                at++;
            }
        }
    return at;
}

remat_status remat__schedule_shard_fsdp(const remat_sharding *sh, const remat_schedule *in, remat_schedule *out,
                                        remat_err *err)
{
    const remat_graph *g = sh->a->g;
    const remat_shard_config *cfg = &sh->cfg;
    size_t n = in->n, no = g->n_ops ? g->n_ops : 1, nt = g->n_tensors ? g->n_tensors : 1, cap = 0;
    for (size_t i = 0; i < n; i++)
        cap = units_of(sh, in->ins[i], NULL, cap);
    fsdp_builder B = {sh, out, remat__calloc(no, 1)};
    size_t *uoff = remat__array(n + 1, sizeof *uoff);
    uint32_t *units = remat__array(cap ? cap : 1, sizeof *units);
    size_t *last[2] = {remat__array(no, sizeof(size_t)), remat__array(no, sizeof(size_t))};
    uint32_t *next[2] = {remat__array(no, sizeof(uint32_t)), remat__array(no, sizeof(uint32_t))};
    uint8_t *seen[2] = {remat__calloc(no, 1), remat__calloc(no, 1)};
    uint32_t *left = remat__calloc(nt, sizeof *left);
    uint64_t *bucket_left = remat__calloc(sh->n_buckets ? sh->n_buckets : 1, sizeof *bucket_left);
    uint32_t *ready = remat__array(sh->n_buckets ? sh->n_buckets : 1, sizeof *ready); /* one BWD's reduced buckets */
    remat_status st = REMAT_OK;
    if (!B.gathered || !uoff || !units || !last[0] || !last[1] || !next[0] || !next[1] || !seen[0] || !seen[1] ||
        !left || !bucket_left || !ready)
        st = remat_err_set(err, REMAT_ENOMEM, "out of memory inserting collectives");
    if (st == REMAT_OK) {
        /* Per unit and phase: its last reader, and the unit whose hook runs
         * next after its own (the recorded execution order). */
        uint32_t tail[2] = {REMAT_NONE, REMAT_NONE};
        for (size_t k = 0; k < no; k++) {
            last[0][k] = last[1][k] = SIZE_MAX;
            next[0][k] = next[1][k] = REMAT_NONE;
        }
        size_t at = 0;
        for (size_t i = 0; i < n; i++) {
            remat_instr I = in->ins[i];
            uoff[i] = at;
            at = units_of(sh, I, units, at);
            int ph = I.kind != REMAT_I_FWD;
            for (size_t j = uoff[i]; j < at; j++) {
                uint32_t u = units[j];
                if (last[ph][u] == SIZE_MAX) {
                    if (tail[ph] != REMAT_NONE)
                        next[ph][tail[ph]] = u;
                    tail[ph] = u;
                }
                last[ph][u] = i;
            }
            if (I.kind >= REMAT_I_ALLGATHER && st == REMAT_OK)
                st = remat_err_set(err, REMAT_EINVAL, "instruction %zu: the schedule already has collectives", i);
        }
        uoff[n] = at;
        remat__shard_count_writers(sh, in, left, bucket_left);
    }
    int opt_seen = 0, full = cfg->fsdp == REMAT_FSDP_FULL_SHARD;
    for (size_t i = 0; st == REMAT_OK && i <= n; i++) {
        remat_instr I = i < n ? in->ins[i] : (remat_instr){REMAT_I_OPT, 0};
        if (i == n && opt_seen)
            break;
        if (I.kind == REMAT_I_OPT) {
            /* _wait_for_post_backward reshards what backward left gathered. */
            for (uint32_t u = 0; u < g->n_ops && st == REMAT_OK; u++)
                if (B.gathered[u])
                    st = emit(&B, REMAT_I_RELEASE, u, err);
            opt_seen = 1;
        }
        int ph = I.kind != REMAT_I_FWD, reads = reads_params(I) && i < n;
        for (size_t j = reads ? uoff[i] : 0; reads && j < uoff[i + 1] && st == REMAT_OK; j++)
            if (!B.gathered[units[j]])
                st = emit(&B, REMAT_I_ALLGATHER, units[j], err);
        /* The pre-forward and pre-backward hooks' prefetch. */
        int pre = ph ? cfg->backward_prefetch == REMAT_FSDP_BACKWARD_PRE : cfg->forward_prefetch;
        for (size_t j = reads ? uoff[i] : 0; reads && j < uoff[i + 1] && st == REMAT_OK; j++) {
            uint32_t u = units[j], v = next[ph][u];
            if (seen[ph][u])
                continue;
            seen[ph][u] = 1;
            if (pre && v != REMAT_NONE && !seen[ph][v] && !B.gathered[v])
                st = emit(&B, REMAT_I_ALLGATHER, v, err);
        }
        if (st == REMAT_OK)
            st = emit(&B, (remat_instr_kind)I.kind, I.arg, err);
        /* The post-forward and post-backward hooks. */
        for (size_t j = reads ? uoff[i] : 0; reads && j < uoff[i + 1] && st == REMAT_OK; j++) {
            uint32_t u = units[j], v = next[1][u];
            if (last[ph][u] != i || !B.gathered[u])
                continue;
            if (!ph && (!full || u == sh->root_unit))
                continue;
            st = emit(&B, REMAT_I_RELEASE, u, err);
            if (st == REMAT_OK && ph && cfg->backward_prefetch == REMAT_FSDP_BACKWARD_POST && v != REMAT_NONE &&
                !seen[1][v] && !B.gathered[v])
                st = emit(&B, REMAT_I_ALLGATHER, v, err);
        }
        uint32_t n_ready = st == REMAT_OK && i < n ? remat__shard_ready_buckets(sh, I, left, bucket_left, ready) : 0;
        for (uint32_t k = 0; k < n_ready && st == REMAT_OK; k++)
            st = emit(&B, REMAT_I_REDUCE_SCATTER, ready[k], err);
    }
    remat__free(B.gathered);
    remat__free(uoff);
    remat__free(units);
    for (int p = 0; p < 2; p++) {
        remat__free(last[p]);
        remat__free(next[p]);
        remat__free(seen[p]);
    }
    remat__free(left);
    remat__free(bucket_left);
    remat__free(ready);
    return st;
}

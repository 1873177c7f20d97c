/*
 * keep_floor.c - a floor under the extra FLOPs of a keep set's default-policy
 * schedule, read off the keep set alone (issue 20).
 *
 * A search that judges many keep sets under a budget (chen-greedy's
 * thresholds) already knows a fitting plan's extra FLOPs once it has one,
 * and a keep set that surely recomputes more can never be preferred. The
 * schedule's own FLOPs (remat__schedule_extra_flops) tell that after the
 * policy has built it, but the build is most of a judgement's cost. This
 * floor needs none: by the policy's rules (src/exec/policy.c) an activation
 * that is not kept is freed right after its last forward use (a graph
 * output at the end of forward), and before a BWD step every saved tensor
 * that is not resident is rebuilt by recomputing it. So an activation that
 * is not kept and that some backward step saves is produced by at least one
 * RECOMPUTE of its op, and the FLOPs of the distinct ops with such an
 * output are a lower bound on the RECOMPUTE FLOPs.
 *
 * Residency there is a tensor's, not its storage's: a view that stays does
 * not make its freed base resident (builder.c), so views and bases count
 * like any tensor. Left out: outputs of ops that cannot be recomputed (the
 * policy always keeps them). The floor ignores every rebuild it cannot
 * name (ancestors rebuilt as stepping stones, a tensor rebuilt twice), so
 * it is loose; tests/check_bound.c checks it never exceeds the built
 * schedule's FLOPs over random graphs (views among them) and keep sets.
 */
#include "planner.h"
#include "../util/util_internal.h"

#include <string.h>

void remat__keep_floor_destroy(remat__keep_floor *f)
{
    if (!f)
        return;
    remat__free(f->flops);
    remat__free(f->off);
    remat__free(f->t);
    memset(f, 0, sizeof *f);
}

remat_status remat__keep_floor_init(const remat_analysis *a, remat__keep_floor *f)
{
    const remat_graph *g = a->g;
    memset(f, 0, sizeof *f);
    f->flops = remat__array(g->n_ops ? g->n_ops : 1, sizeof *f->flops);
    f->off = remat__array((size_t)g->n_ops + 1, sizeof *f->off);
    f->t = remat__array(g->n_tensors ? g->n_tensors : 1, sizeof *f->t);
    if (!f->flops || !f->off || !f->t) {
        remat__keep_floor_destroy(f);
        return REMAT_ENOMEM;
    }
    uint32_t n = 0, k = 0;
    for (uint32_t i = 0; i < g->n_ops; i++) {
        const remat_op *op = &g->ops[i];
        if (!op->recomputable || op->flops == 0)
            continue;
        const uint32_t *out = remat_op_outputs(g, op);
        const uint32_t k0 = k;
        for (uint32_t j = 0; j < op->n_out; j++) {
            const uint32_t t = out[j];
            if (g->tensors[t].kind == REMAT_TENSOR_ACTIVATION && a->life[t].last_bwd_use != REMAT_NONE)
                f->t[k++] = t;
        }
        if (k == k0)
            continue;
        f->flops[n] = op->flops;
        f->off[n++] = k0;
    }
    f->off[n] = k;
    f->n = n;
    return REMAT_OK;
}

uint64_t remat__keep_floor_of(const remat__keep_floor *f, const uint8_t *keep)
{
    uint64_t sum = 0;
    for (uint32_t i = 0; i < f->n; i++)
        for (uint32_t j = f->off[i]; j < f->off[i + 1]; j++)
            if (!keep[f->t[j]]) {
                sum = sum > UINT64_MAX - f->flops[i] ? UINT64_MAX : sum + f->flops[i];
                break;
            }
    return sum;
}

/*
 * replay_grad.c - gradient views in the replay: which gradients are slices
 * of another, and when the storage they share is freed.
 *
 * PyTorch's backward of cat (cat_tensors_backward, torch/csrc/autograd/
 * FunctionsManual.cpp) returns narrow() views of the one output gradient,
 * so that buffer lives until its last slice is freed (graphs/README.md,
 * "Gradient views"). Which input may get a slice is fixed per tensor when
 * the cursor is set up (gview); whether it gets one is decided when the
 * backward step runs, and the state lives in the cursor's grad flags, which
 * the delta replay (replay_delta.c) already copies and compares. replay.c's
 * do_backward calls these: slice or allocate, then, around the step's mark,
 * flag the storages the step lets go of (GRAD_DYING) and free them after it.
 */
#include "replay_cursor.h"

typedef struct remat_replay_cursor replay;

/* gview: an activation's gradient is a slice of u's when the first
 * backward step (in backward order) to write it is that of u's producer, an
 * op with grad_views. Any other writer comes later, so PyTorch has already
 * sliced it there; a schedule that runs another writer first gives the
 * gradient its own storage instead (remat__grad_slice_now). O(refs). */
void remat__grad_find_slices(replay *R)
{
    const remat_graph *g = R->g;
    const remat_analysis *a = R->a;
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        R->gview[t] = REMAT_NONE;
        if (g->tensors[t].kind != REMAT_TENSOR_ACTIVATION || !a->grad_flows[t] || a->is_output[t])
            continue;
        uint32_t first = REMAT_NONE;
        for (uint32_t j = a->cons_off[t]; j < a->cons_off[t + 1]; j++) {
            uint32_t c = a->cons[j];
            if (a->bwd_step[c] != REMAT_NONE && (first == REMAT_NONE || a->bwd_step[c] < a->bwd_step[first]))
                first = c;
        }
        if (first == REMAT_NONE || !g->ops[first].grad_views)
            continue;
        uint32_t u = remat_op_outputs(g, &g->ops[first])[0];
        if (a->grad_flows[u])
            R->gview[t] = u;
    }
}

/* Whether the backward step of op k, writing the gradient of input t that
 * has none yet, writes it as a slice of k's output gradient: k is t's
 * designated slicer and that gradient is its own (seeded now, for a loss). */
int remat__grad_slice_now(const replay *R, uint32_t k, uint32_t t, int seed_now)
{
    uint32_t u = R->gview[t];
    if (u == REMAT_NONE || R->g->tensors[u].producer != k)
        return 0;
    return R->grad[u] == REMAT__GRAD_OWN || (seed_now && R->a->is_output[u]);
}

/* Whether a live slice of u's gradient holds its storage. */
static int storage_held(const replay *R, uint32_t u)
{
    const remat_graph *g = R->g;
    uint32_t k = g->tensors[u].producer;
    if (k == REMAT_NONE || !g->ops[k].grad_views)
        return 0;
    const uint32_t *inp = remat_op_inputs(g, &g->ops[k]);
    for (uint32_t i = 0; i < g->ops[k].n_in; i++)
        if (R->grad[inp[i]] == REMAT__GRAD_VIEW && R->gview[inp[i]] == u)
            return 1;
    return 0;
}

/* Flags u's gradient REMAT__GRAD_DYING when it is read and done (REMAT__GRAD_HELD) and no
 * slice holds it any more; returns the bytes that will then be freed. */
uint64_t remat__grad_mark_dying(replay *R, uint32_t u)
{
    if (u == REMAT_NONE || R->grad[u] != REMAT__GRAD_HELD || storage_held(R, u))
        return 0;
    R->grad[u] = REMAT__GRAD_DYING;
    return R->g->tensors[u].logical_bytes;
}

remat_status remat__grad_free_dying(replay *R, uint32_t u)
{
    if (u == REMAT_NONE || R->grad[u] != REMAT__GRAD_DYING)
        return REMAT_OK;
    uint64_t bytes = R->g->tensors[u].logical_bytes;
    R->grad[u] = REMAT__GRAD_NONE;
    remat__replay_free_bytes(R, REMAT_CAT_ACTIVATION_GRADS, bytes);
    return remat__replay_notify_free(R, u, 1, REMAT_CAT_ACTIVATION_GRADS, bytes);
}

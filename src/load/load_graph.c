/*
 * load_graph.c - what a graph is once every element is read: its views'
 * storage and logical sizes, its outputs, its fingerprint.
 *
 * Views are settled here rather than while their ops are read because a
 * view may come before its base in the file (any order is allowed), and a
 * view without bytes takes its base's size.
 */
#include "load_internal.h"

#include <stdio.h>
#include <string.h>

#define fail remat__load_fail
#define nomem remat__load_nomem

/* Views of views resolve to the root base, and a view without bytes takes
 * its logical size from its base, which may come later in the file, so both
 * are settled here, after every op is read. Each alias chain is walked once
 * (tensors on it are marked done), so a chain of 10^6 views costs O(10^6),
 * without recursion. An alias cycle is only possible if the op graph has a
 * cycle, which analyze reports; its tensors are simply stored in themselves. */
static int finish_storage(loader *L)
{
    remat_graph *g = L->g;
    uint32_t n = g->n_tensors;
    /* One block: n state bytes, then (4-aligned) a stack of n indices. */
    size_t stack_at = ((size_t)n + 3) & ~(size_t)3;
    uint8_t *state = remat__malloc(stack_at + (size_t)n * sizeof(uint32_t));
    if (!state)
        return nomem(L), 0;
    uint32_t *stack = (uint32_t *)(void *)(state + stack_at);
    /* state: 0 not seen, 1 on the walk in progress, 2 done. */
    for (uint32_t i = 0; i < n; i++)
        state[i] = g->tensors[i].alias_of == REMAT_NONE ? 2 : 0;
    for (uint32_t i = 0; i < n; i++) {
        if (state[i] != 0)
            continue;
        uint32_t depth = 0, r = i;
        while (state[r] == 0) {
            state[r] = 1;
            stack[depth++] = r;
            r = g->tensors[r].alias_of;
        }
        /* r is done (its storage and logical size are final) or on this
         * walk (a cycle). Settle the walk from the top down. */
        int cycle = state[r] == 1;
        while (depth > 0) {
            remat_tensor *t = &g->tensors[stack[--depth]];
            const remat_tensor *b = &g->tensors[t->alias_of];
            if (cycle) {
                if (t->storage == LOAD_LOGICAL_INHERIT)
                    t->logical_bytes = 0;
                t->storage = (uint32_t)(t - g->tensors);
            } else {
                if (t->storage == LOAD_LOGICAL_INHERIT)
                    t->logical_bytes = b->logical_bytes;
                t->storage = b->storage;
            }
            state[t - g->tensors] = 2;
        }
    }
    remat__free(state);
    return 1;
}

static uint64_t fingerprint(const remat_graph *g)
{
    uint64_t h = REMAT_FNV_OFFSET;
    for (uint32_t i = 0; i < g->n_tensors; i++) {
        const remat_tensor *t = &g->tensors[i];
        h = remat__fnv1a(h, t->id, strlen(t->id) + 1);
        uint64_t f[5] = {(uint64_t)t->kind, t->bytes, t->logical_bytes, t->alias_of,
                         (uint64_t)t->frozen | (uint64_t)t->requires_grad << 1};
        h = remat__fnv1a(h, f, sizeof f);
    }
    for (uint32_t k = 0; k < g->n_ops; k++) {
        const remat_op *op = &g->ops[k];
        h = remat__fnv1a(h, op->id, strlen(op->id) + 1);
        h = remat__fnv1a(h, op->type, strlen(op->type) + 1);
        uint64_t f[8] = {op->n_in, op->n_out, op->n_save, op->flops, op->bwd_flops, op->workspace, op->bwd_workspace,
                         (uint64_t)op->recomputable | (uint64_t)op->grad_views << 1};
        h = remat__fnv1a(h, f, sizeof f);
    }
    h = remat__fnv1a(h, g->refs, (size_t)g->n_refs * sizeof *g->refs);
    h = remat__fnv1a(h, g->outputs, (size_t)g->n_outputs * sizeof *g->outputs);
    return h;
}

int remat__load_finish(loader *L, const cJSON *outputs)
{
    remat_graph *g = L->g;
    if (!finish_storage(L))
        return 0;
    g->n_outputs = (uint32_t)cJSON_GetArraySize(outputs);
    g->outputs = remat__store_alloc(L->st, g->n_outputs, sizeof *g->outputs);
    if (!g->outputs)
        return nomem(L), 0;
    /* Every id is registered by now: nothing is deferred here. The first
     * problem in list order wins: an entry that does not resolve, or one
     * that repeats an earlier entry. */
    int streaming = L->streaming, ok = 1;
    L->streaming = 0;
    uint32_t u = 0;
    const cJSON *bad = outputs->child;
    for (; bad; bad = bad->next, u++)
        if (!cJSON_IsString(bad) || !remat_strmap_get(&L->st->tensor_ids, bad->valuestring, &g->outputs[u]))
            break;
    uint8_t small[PAIRWISE_MAX], *first = small;
    if (u > PAIRWISE_MAX && !(first = remat__malloc(u)))
        ok = (nomem(L), 0);
    else if ((ok = remat__load_first_occurrences(L, g->outputs, u, first)) != 0) {
        uint32_t i = 0;
        while (i < u && first[i])
            i++;
        char p[PATH_MAX_LEN];
        if (i < u) {
            snprintf(p, sizeof p, "outputs[%u]", i);
            ok = (fail(L, REMAT_EGRAPH, p, "output '%s' is listed twice", g->tensors[g->outputs[i]].id), 0);
        } else if (bad) {
            snprintf(p, sizeof p, "outputs[%u]", u);
            ok = remat__load_resolve(L, bad, p, &g->outputs[u], 0, REMAT_NONE);
        }
    }
    if (first != small)
        remat__free(first);
    L->streaming = streaming;
    if (!ok)
        return 0;
    g->fingerprint = fingerprint(g);
    return 1;
}

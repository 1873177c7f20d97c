/*
 * pp_stage.c - cutting a graph into pipeline stages, and one stage as a
 * graph of its own.
 *
 * A stage is a contiguous range of the forward order, so every tensor a
 * stage reads was made by itself, by an earlier stage (it arrives: a
 * received activation, written as an input that wants a gradient when a
 * gradient flows into it in the whole graph, so the stage's backward makes
 * the gradient it sends back), or is a leaf (an input or a param, which the
 * stage holds itself). Its activations that a later stage reads, and the
 * graph's own outputs, are its outputs: the activations it sends, whose
 * gradients it receives. A tensor a later stage makes can only be read in
 * the same stage's backward if the stages share a device and a moment; they
 * do not, so such a save is refused. A skip connection that jumps over a
 * stage goes straight to its reader (not relayed through the stage between).
 */
#include "remat/pipeline.h"
#include "../util/util_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

remat_status remat_pp_partition(const remat_analysis *a, uint32_t n, remat_pp_balance by, uint32_t *cuts,
                                remat_err *err)
{
    const remat_graph *g = a->g;
    if (n < 1 || n > g->n_ops)
        return remat_err_set(err, REMAT_EINVAL, "%u pipeline stages for %u ops: every stage needs at least one op", n,
                             g->n_ops);
    /* Weights in doubles: sums of 2^64-sized FLOPs only need their ratios. */
    double total = 0;
    double *w = remat__malloc((size_t)g->n_ops * sizeof *w);
    if (!w)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory partitioning %u ops", g->n_ops);
    for (uint32_t i = 0; i < g->n_ops; i++) {
        const remat_op *op = &g->ops[a->order[i]];
        double x = 0;
        if (by == REMAT_PP_BALANCE_FLOPS) {
            x = (double)op->flops + (double)op->bwd_flops;
        } else {
            const uint32_t *o = remat_op_outputs(g, op);
            for (uint32_t j = 0; j < op->n_out; j++)
                x += (double)g->tensors[o[j]].bytes;
        }
        w[i] = x;
        total += x;
    }
    /* Cut where the prefix sum first reaches k/n of the total, leaving at
     * least one op to each part on either side. */
    cuts[0] = 0;
    double acc = 0;
    uint32_t i = 0;
    for (uint32_t k = 1; k < n; k++) {
        double goal = total * k / n;
        uint32_t lo = cuts[k - 1] + 1, hi = g->n_ops - (n - k);
        if (i < lo) {
            while (i < lo)
                acc += w[i++];
        }
        while (i < hi && acc + w[i] / 2 < goal)
            acc += w[i++];
        cuts[k] = i;
    }
    cuts[n] = g->n_ops;
    remat__free(w);
    return REMAT_OK;
}

remat_status remat_pp_parse_stages(const char *text, uint32_t n_ops, uint32_t n, uint32_t *cuts, remat_err *err)
{
    const char *p = text;
    uint32_t k = 0;
    cuts[0] = 0;
    while (*p) {
        char *end;
        if (k == n)
            return remat_err_set(err, REMAT_EINVAL, "--pp-stages '%.80s': more than the %u stages of the pipeline", text,
                                 n);
        unsigned long lo = strtoul(p, &end, 10);
        if (end == p || *end != ':')
            return remat_err_set(err, REMAT_EINVAL, "--pp-stages '%.80s': entry %u: expected FIRST:END", text, k + 1);
        p = end + 1;
        unsigned long hi = strtoul(p, &end, 10);
        if (end == p || (*end && *end != ','))
            return remat_err_set(err, REMAT_EINVAL, "--pp-stages '%.80s': entry %u: expected FIRST:END", text, k + 1);
        if (lo != cuts[k] || hi <= lo || hi > n_ops)
            return remat_err_set(err, REMAT_EINVAL,
                                 "--pp-stages '%.80s': entry %u (%lu:%lu) must start at %u and end after it, at most "
                                 "at %u (the ops in forward order)",
                                 text, k + 1, lo, hi, cuts[k], n_ops);
        cuts[++k] = (uint32_t)hi;
        p = *end ? end + 1 : end;
    }
    if (k != n || cuts[n] != n_ops)
        return remat_err_set(err, REMAT_EINVAL, "--pp-stages '%.80s': %u stages ending at op %u; the pipeline needs %u "
                             "ending at %u", text, k, k ? cuts[k] : 0, n, n_ops);
    return REMAT_OK;
}

static void put_str(remat_buf *b, const char *s)
{
    /* remat_buf_json_str writes the quotes too. */
    remat_buf_json_str(b, s);
}

static void put_ids(remat_buf *b, const remat_graph *g, const char *key, const uint32_t *ts, uint32_t n)
{
    remat_buf_printf(b, ", \"%s\": [", key);
    for (uint32_t i = 0; i < n; i++) {
        if (i)
            remat_buf_puts(b, ", ");
        put_str(b, g->tensors[ts[i]].id);
    }
    remat_buf_puts(b, "]");
}

static void put_u64(remat_buf *b, uint64_t v)
{
    if (v > ((uint64_t)1 << 53))
        remat_buf_printf(b, "\"%" PRIu64 "\"", v);
    else
        remat_buf_printf(b, "%" PRIu64, v);
}

/* Where tensor t is made: its producer's forward position, or -1 for a leaf. */
static int64_t made_at(const remat_analysis *a, uint32_t t)
{
    uint32_t p = a->g->tensors[t].producer;
    return p == REMAT_NONE ? -1 : (int64_t)a->pos[p];
}

/* A tensor's element type, when the graph names one: the time model's
 * roofline picks its peak by it (remat/time.h). */
static void put_dtype(remat_buf *b, const remat_tensor *T)
{
    if (T->dtype && *T->dtype) {
        remat_buf_puts(b, ", \"dtype\": ");
        remat_buf_json_str(b, T->dtype);
    }
}

remat_status remat_pp_stage_graph(const remat_analysis *a, uint32_t first, uint32_t end, uint32_t k, char **json,
                                  size_t *len, remat_err *err)
{
    const remat_graph *g = a->g;
    *json = NULL;
    /* role per tensor: 1 leaf read, 2 received, 3 made here. */
    uint8_t *role = remat__calloc(g->n_tensors, 1);
    uint8_t *sent = remat__calloc(g->n_tensors, 1);
    if (!role || !sent) {
        remat__free(role);
        remat__free(sent);
        return remat_err_set(err, REMAT_ENOMEM, "out of memory writing pipeline stage %u", k);
    }
    remat_status st = REMAT_OK;
    for (uint32_t i = first; i < end && st == REMAT_OK; i++) {
        const remat_op *op = &g->ops[a->order[i]];
        const uint32_t *o = remat_op_outputs(g, op);
        for (uint32_t j = 0; j < op->n_out; j++)
            role[o[j]] = 3;
    }
    for (uint32_t i = first; i < end && st == REMAT_OK; i++) {
        const remat_op *op = &g->ops[a->order[i]];
        const uint32_t *lists[2] = {remat_op_inputs(g, op), remat_op_saves(g, op)};
        const uint32_t ns[2] = {op->n_in, op->n_save};
        for (int l = 0; l < 2; l++)
            for (uint32_t j = 0; j < ns[l]; j++) {
                uint32_t t = lists[l][j];
                if (role[t] == 3)
                    continue;
                int64_t at = made_at(a, t);
                if (at >= (int64_t)end) {
                    st = remat_err_set(err, REMAT_EINVAL,
                                       "pipeline stage %u (ops %u:%u): op '%s' saves '%s', which a later stage makes; "
                                       "choose cuts that keep them together (--pp-stages)",
                                       k, first, end, op->id, g->tensors[t].id);
                    break;
                }
                role[t] = at < 0 ? 1 : 2;
            }
    }
    /* Sent: made here and read by a later stage, or a graph output. */
    for (uint32_t i = end; i < g->n_ops && st == REMAT_OK; i++) {
        const remat_op *op = &g->ops[a->order[i]];
        const uint32_t *lists[2] = {remat_op_inputs(g, op), remat_op_saves(g, op)};
        const uint32_t ns[2] = {op->n_in, op->n_save};
        for (int l = 0; l < 2; l++)
            for (uint32_t j = 0; j < ns[l]; j++)
                if (role[lists[l][j]] == 3)
                    sent[lists[l][j]] = 1;
    }
    for (uint32_t t = 0; t < g->n_tensors; t++)
        if (role[t] == 3 && a->is_output[t])
            sent[t] = 1;
    if (st != REMAT_OK) {
        remat__free(role);
        remat__free(sent);
        return st;
    }
    remat_buf b;
    remat_buf_init(&b);
    char name[200];
    snprintf(name, sizeof name, "%.180s.stage%u", g->name ? g->name : "graph", k);
    remat_buf_puts(&b, "{\"format\": \"remat-graph\", \"version\": 1, \"name\": ");
    remat_buf_json_str(&b, name);
    remat_buf_printf(&b, ",\n \"meta\": {\"pipeline_stage\": %u, \"first_op\": %u, \"end_op\": %u},\n \"inputs\": [", k,
                     first, end);
    int n = 0;
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        const remat_tensor *T = &g->tensors[t];
        if (!(role[t] == 2 || (role[t] == 1 && T->kind == REMAT_TENSOR_INPUT)))
            continue;
        remat_buf_puts(&b, n++ ? ",\n  {\"id\": " : "\n  {\"id\": ");
        put_str(&b, T->id);
        remat_buf_puts(&b, ", \"bytes\": ");
        put_u64(&b, T->logical_bytes);
        put_dtype(&b, T);
        if ((role[t] == 2 && a->grad_flows[t]) || (role[t] == 1 && T->requires_grad))
            remat_buf_puts(&b, ", \"requires_grad\": true");
        remat_buf_puts(&b, "}");
    }
    remat_buf_puts(&b, "],\n \"params\": [");
    n = 0;
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        const remat_tensor *T = &g->tensors[t];
        if (!(role[t] == 1 && T->kind == REMAT_TENSOR_PARAM))
            continue;
        remat_buf_puts(&b, n++ ? ",\n  {\"id\": " : "\n  {\"id\": ");
        put_str(&b, T->id);
        remat_buf_puts(&b, ", \"bytes\": ");
        put_u64(&b, T->logical_bytes);
        put_dtype(&b, T);
        if (T->frozen)
            remat_buf_puts(&b, ", \"frozen\": true");
        remat_buf_puts(&b, "}");
    }
    remat_buf_puts(&b, "],\n \"ops\": [");
    for (uint32_t i = first; i < end; i++) {
        const remat_op *op = &g->ops[a->order[i]];
        const uint32_t *o = remat_op_outputs(g, op);
        remat_buf_puts(&b, i > first ? ",\n  {\"id\": " : "\n  {\"id\": ");
        put_str(&b, op->id);
        remat_buf_puts(&b, ", \"op\": ");
        put_str(&b, op->type);
        put_ids(&b, g, "inputs", remat_op_inputs(g, op), op->n_in);
        remat_buf_puts(&b, ", \"outputs\": [");
        for (uint32_t j = 0; j < op->n_out; j++) {
            const remat_tensor *T = &g->tensors[o[j]];
            remat_buf_puts(&b, j ? ", {\"id\": " : "{\"id\": ");
            put_str(&b, T->id);
            remat_buf_puts(&b, ", \"bytes\": ");
            put_u64(&b, T->logical_bytes);
            put_dtype(&b, T);
            if (T->alias_of != REMAT_NONE) {
                remat_buf_puts(&b, ", \"alias_of\": ");
                put_str(&b, g->tensors[T->alias_of].id);
            }
            remat_buf_puts(&b, "}");
        }
        remat_buf_puts(&b, "]");
        remat_buf_puts(&b, ", \"flops\": ");
        put_u64(&b, op->flops);
        remat_buf_puts(&b, ", \"bwd_flops\": ");
        put_u64(&b, op->bwd_flops);
        if (op->workspace) {
            remat_buf_puts(&b, ", \"workspace\": ");
            put_u64(&b, op->workspace);
        }
        if (op->bwd_workspace) {
            remat_buf_puts(&b, ", \"bwd_workspace\": ");
            put_u64(&b, op->bwd_workspace);
        }
        if (!op->recomputable)
            remat_buf_puts(&b, ", \"recomputable\": false");
        put_ids(&b, g, "saves", remat_op_saves(g, op), op->n_save);
        if (op->attrs_json)
            remat_buf_printf(&b, ", \"attrs\": %s", op->attrs_json);
        remat_buf_puts(&b, "}");
    }
    remat_buf_puts(&b, "],\n \"outputs\": [");
    n = 0;
    for (uint32_t t = 0; t < g->n_tensors; t++)
        if (sent[t]) {
            if (n++)
                remat_buf_puts(&b, ", ");
            put_str(&b, g->tensors[t].id);
        }
    remat_buf_puts(&b, "]}\n");
    remat__free(role);
    remat__free(sent);
    if (b.failed || !b.data) {
        remat_buf_destroy(&b);
        return remat_err_set(err, REMAT_ENOMEM, "out of memory writing pipeline stage %u", k);
    }
    *json = b.data;
    if (len)
        *len = b.len;
    return REMAT_OK;
}

/*
 * pp_plan.c - rematerialization planned per pipeline stage, judged per
 * device with the schedule's multiplicity.
 *
 * Each virtual stage is written as a graph of its own (pp_stage.c), loaded
 * and analyzed like any graph, and planned with the caller's options; its
 * one-microbatch replay gives three figures:
 *   persistent  params, their gradients, optimizer state and frozen copies
 *               (each category's own maximum: the gradients accumulate over
 *               every microbatch, so once the first backward has run they
 *               are there for the rest of the step);
 *   held        what one microbatch leaves resident between its forward and
 *               its backward: the kept activations, its inputs (the received
 *               activation, a first stage's data), less the activations it
 *               sent that its own backward never reads (Megatron-LM frees a
 *               sent output's data: deallocate_output_tensor);
 *   running     the replayed peak less the persistent bytes at that moment:
 *               one microbatch's forward and backward, its workspace and the
 *               gradients it receives and sends.
 * The schedule's simulation (pp_schedule.c) says, for each event of a
 * device, how many microbatches of each of its chunks are held by others;
 * the device's peak is its chunks' persistent bytes plus the largest
 * "held by others + running" over its events. Under a total budget a
 * device whose peak is over is replanned at the largest stage budget that
 * makes it fit, found by bisection (about 12 plans per device): the
 * planner is exact about one microbatch, the bisection about the rest.
 */
#include "remat/pipeline.h"
#include "../util/util_internal.h"

#include <stdio.h>
#include <string.h>

#define PERSISTENT_CATS                                                                                          \
    ((1u << REMAT_CAT_PARAMS) | (1u << REMAT_CAT_PARAM_GRADS) | (1u << REMAT_CAT_OPTIMIZER_STATE) |              \
     (1u << REMAT_CAT_MASTER_WEIGHTS) | (1u << REMAT_CAT_FROZEN))

typedef struct {
    remat_graph *g;
    remat_analysis *a;
    uint8_t *sent_unsaved; /* per tensor of the stage graph: an output storage no backward step reads */
} stage_graph;

void remat_pp_result_destroy(remat_pp_result *r)
{
    if (!r)
        return;
    for (uint32_t i = 0; r->stages && i < r->n_stages; i++) {
        remat_plan_destroy(&r->stages[i].plan);
        remat_replay_result_destroy(&r->stages[i].replay);
    }
    remat__free(r->stages);
    remat__free(r->device_peak);
    remat_pp_timeline_destroy(&r->timeline);
    memset(r, 0, sizeof *r);
}

static remat_status open_stage(const remat_analysis *a, uint32_t first, uint32_t end, uint32_t k, stage_graph *sg,
                               remat_pp_stage *st, remat_err *err)
{
    char *json;
    size_t len;
    remat_status s = remat_pp_stage_graph(a, first, end, k, &json, &len, err);
    if (s != REMAT_OK)
        return s;
    char src[48];
    snprintf(src, sizeof src, "pipeline stage %u", k);
    s = remat_graph_load_json(json, len, src, &sg->g, err);
    remat_free(json);
    if (s == REMAT_OK)
        s = remat_analyze(sg->g, &sg->a, err);
    if (s != REMAT_OK)
        return s;
    const remat_graph *g = sg->g;
    sg->sent_unsaved = remat__calloc(g->n_tensors ? g->n_tensors : 1, 1);
    uint8_t *saved = remat__calloc(g->n_tensors ? g->n_tensors : 1, 1);
    if (!sg->sent_unsaved || !saved) {
        remat__free(saved);
        return remat_err_set(err, REMAT_ENOMEM, "out of memory planning pipeline stage %u", k);
    }
    for (uint32_t t = 0; t < g->n_tensors; t++)
        if (sg->a->saver_off[t + 1] > sg->a->saver_off[t])
            saved[g->tensors[t].storage] = 1;
    for (uint32_t i = 0; i < g->n_outputs; i++) {
        uint32_t s0 = g->tensors[g->outputs[i]].storage;
        if (!saved[s0] && g->tensors[s0].kind == REMAT_TENSOR_ACTIVATION)
            sg->sent_unsaved[s0] = 1;
    }
    remat__free(saved);
    /* What crosses: inputs that are activations of the whole graph
     * (received) and this stage's outputs (sent). */
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        uint32_t whole = remat_graph_find_tensor(a->g, g->tensors[t].id);
        if (g->tensors[t].kind == REMAT_TENSOR_INPUT && whole != REMAT_NONE &&
            a->g->tensors[whole].kind == REMAT_TENSOR_ACTIVATION)
            st->recv_bytes += g->tensors[t].logical_bytes;
    }
    for (uint32_t i = 0; i < g->n_outputs; i++)
        if (!a->is_output[remat_graph_find_tensor(a->g, g->tensors[g->outputs[i]].id)])
            st->send_bytes += g->tensors[g->outputs[i]].logical_bytes;
    for (uint32_t i = 0; i < g->n_ops; i++) {
        st->fwd_flops += (double)g->ops[i].flops;
        if (sg->a->bwd_step[i] != REMAT_NONE)
            st->bwd_flops += (double)g->ops[i].bwd_flops;
    }
    return REMAT_OK;
}

/* Plans stage st under its budget and measures its three figures. */
static remat_status plan_stage(const stage_graph *sg, const remat_plan_options *base, remat_pp_stage *st,
                               double *bwd_time, remat_err *err)
{
    remat_plan_destroy(&st->plan);
    remat_replay_result_destroy(&st->replay);
    remat_plan_options o = *base;
    if (st->budget) {
        o.budget_kind = REMAT_BUDGET_TOTAL;
        o.budget = st->budget;
    } else {
        o.budget_kind = REMAT_BUDGET_NONE;
    }
    remat_status s = remat_plan_make(sg->a, &o, &st->plan, &st->replay, err);
    if (s != REMAT_OK)
        return s;
    const remat_replay_result *r = &st->replay;
    st->persistent = 0;
    uint64_t at_peak = 0;
    for (int c = 0; c < REMAT_CAT_COUNT; c++)
        if (PERSISTENT_CATS & (1u << c)) {
            st->persistent += r->category_peak[c];
            at_peak += r->peak_by_category[c];
        }
    st->running = r->peak_bytes - at_peak;
    *bwd_time = st->bwd_flops + (double)r->flops_recompute;
    /* Held: replay up to the first backward step and read what is live. */
    remat_replay_cursor *cur = NULL;
    s = remat_replay_begin(sg->a, NULL, NULL, &cur, err);
    for (size_t i = 0; s == REMAT_OK && i < st->plan.schedule.n; i++) {
        remat_instr in = st->plan.schedule.ins[i];
        if (in.kind == REMAT_I_BWD)
            break;
        s = remat_replay_apply(cur, in, err);
    }
    if (s == REMAT_OK) {
        const uint32_t mask = (1u << REMAT_CAT_INPUTS) | (1u << REMAT_CAT_ACTIVATIONS) | (1u << REMAT_CAT_RECOMPUTED);
        uint64_t held = remat_replay_live(cur, mask);
        const remat_graph *g = sg->g;
        for (uint32_t t = 0; t < g->n_tensors; t++)
            if (sg->sent_unsaved[t] && remat_replay_resident(cur, t) && held >= g->tensors[t].bytes)
                held -= g->tensors[t].bytes;
        st->held = held;
    }
    remat_replay_cursor_destroy(cur);
    return s;
}

/* The device's peak from the timeline's events (see the file comment). */
static uint64_t device_peak(const remat_pp_result *r, uint32_t d, uint64_t *counts)
{
    const uint32_t P = r->config.stages, V = r->config.chunks;
    uint64_t base = 0, worst = 0;
    for (uint32_t c = 0; c < V; c++) {
        base += r->stages[c * P + d].persistent;
        counts[c] = 0;
    }
    const size_t per = r->timeline.n_events / P;
    const remat_pp_event *ev = r->timeline.events + (size_t)d * per;
    for (size_t i = 0; i < per; i++) {
        const remat_pp_stage *run = &r->stages[ev[i].chunk * P + d];
        if (ev[i].backward)
            counts[ev[i].chunk]--;
        uint64_t x = run->running;
        for (uint32_t c = 0; c < V; c++)
            x += counts[c] * r->stages[c * P + d].held;
        if (x > worst)
            worst = x;
        if (!ev[i].backward)
            counts[ev[i].chunk]++;
    }
    return base + worst;
}

remat_status remat_pp_plan(const remat_analysis *a, const remat_pp_config *c, const uint32_t *cuts,
                           remat_pp_balance by, const remat_plan_options *o, remat_pp_result *r, remat_err *err)
{
    memset(r, 0, sizeof *r);
    remat_status s = remat_pp_check(c, err);
    if (s != REMAT_OK)
        return s;
    if (o->budget_kind == REMAT_BUDGET_ACTIVATION)
        return remat_err_set(err, REMAT_EINVAL, "--activation-budget with --pp: a device's budget caps its whole "
                                                "peak; use --budget");
    const remat_exec_extras none = {0};
    if (memcmp(&o->extras, &none, sizeof none) != 0)
        return remat_err_set(err, REMAT_EINVAL, "--pp does not take the ledger's options yet (each stage would need "
                                                "its own share of the optimizer state)");
    const uint32_t P = c->stages, V = c->chunks, n = P * V;
    r->config = *c;
    r->n_stages = n;
    r->stages = remat__calloc(n, sizeof *r->stages);
    r->device_peak = remat__calloc(P, sizeof *r->device_peak);
    uint32_t *cut = remat__malloc(((size_t)n + 1) * sizeof *cut);
    stage_graph *sg = remat__calloc(n, sizeof *sg);
    double *fwd = remat__calloc(n, sizeof *fwd), *bwd = remat__calloc(n, sizeof *bwd);
    uint64_t *counts = remat__calloc(V, sizeof *counts);
    if (!r->stages || !r->device_peak || !cut || !sg || !fwd || !bwd || !counts) {
        s = remat_err_set(err, REMAT_ENOMEM, "out of memory planning a pipeline of %u stages", n);
        goto out;
    }
    for (uint32_t v = 0; v < n; v++)
        remat_plan_init(&r->stages[v].plan);
    if (cuts)
        memcpy(cut, cuts, ((size_t)n + 1) * sizeof *cut);
    else if ((s = remat_pp_partition(a, n, by, cut, err)) != REMAT_OK)
        goto out;
    for (uint32_t v = 0; v < n && s == REMAT_OK; v++) {
        remat_pp_stage *st = &r->stages[v];
        st->first = cut[v];
        st->end = cut[v + 1];
        st->device = v % P;
        st->chunk = v / P;
        st->budget = o->budget_kind == REMAT_BUDGET_TOTAL ? o->budget : 0;
        s = open_stage(a, st->first, st->end, v, &sg[v], st, err);
        if (s == REMAT_OK)
            s = plan_stage(&sg[v], o, st, &bwd[v], err);
        fwd[v] = st->fwd_flops;
        if (s == REMAT_EINFEASIBLE) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            remat_err_init(err);
            s = remat_err_set(err, REMAT_EINFEASIBLE, "pipeline stage %u (device %u, ops %u:%u): %s", v, st->device,
                              st->first, st->end, msg);
        }
    }
    if (s != REMAT_OK)
        goto out;
    /* The order of events fixes the multiplicity; the durations only move
     * the events in time, so one simulation serves every round. */
    if ((s = remat_pp_simulate(c, fwd, bwd, &r->timeline, err)) != REMAT_OK)
        goto out;
    for (uint32_t d = 0; d < P && s == REMAT_OK; d++) {
        r->device_peak[d] = device_peak(r, d, counts);
        if (o->budget_kind != REMAT_BUDGET_TOTAL || r->device_peak[d] <= o->budget)
            continue;
        /* Over: search the largest stage budget b (the same for each of the
         * device's chunks) whose plans make the device fit. A smaller b
         * recomputes more and holds less, so the device's peak falls as b
         * does, until the stage cannot reach b at all. */
        uint64_t lo = 0, hi = o->budget, best = 0, least = r->device_peak[d];
        const uint64_t step = o->budget / 4096 > 0 ? o->budget / 4096 : 1;
        while (hi - lo > step && s == REMAT_OK) {
            uint64_t mid = lo + (hi - lo) / 2;
            int reached = 1;
            for (uint32_t ch = 0; ch < V && s == REMAT_OK && reached; ch++) {
                uint32_t v = ch * P + d;
                r->stages[v].budget = mid;
                s = plan_stage(&sg[v], o, &r->stages[v], &bwd[v], err);
                if (s == REMAT_EINFEASIBLE) {
                    remat_err_init(err);
                    s = REMAT_OK;
                    reached = 0;
                }
            }
            if (s != REMAT_OK)
                break;
            uint64_t peak = reached ? device_peak(r, d, counts) : UINT64_MAX;
            if (peak < least)
                least = peak;
            if (!reached || peak <= o->budget) {
                if (reached)
                    best = mid;
                lo = mid;
            } else {
                hi = mid;
            }
        }
        if (s == REMAT_OK && !best)
            s = remat_err_set(err, REMAT_EINFEASIBLE,
                              "pipeline device %u: with %u microbatches in flight no plan of its stages fits the "
                              "budget of %llu B (the least its search reached: %llu B)",
                              d, r->timeline.max_in_flight[d], (unsigned long long)o->budget,
                              (unsigned long long)least);
        for (uint32_t ch = 0; ch < V && s == REMAT_OK; ch++) {
            uint32_t v = ch * P + d;
            r->stages[v].budget = best;
            s = plan_stage(&sg[v], o, &r->stages[v], &bwd[v], err);
        }
        if (s == REMAT_OK)
            r->device_peak[d] = device_peak(r, d, counts);
    }
    if (s != REMAT_OK)
        goto out;
    /* The final plans' recomputation is part of each backward. */
    remat_pp_timeline_destroy(&r->timeline);
    if ((s = remat_pp_simulate(c, fwd, bwd, &r->timeline, err)) != REMAT_OK)
        goto out;
    r->largest = 0;
    for (uint32_t d = 1; d < P; d++)
        if (r->device_peak[d] > r->device_peak[r->largest])
            r->largest = d;
out:
    for (uint32_t v = 0; sg && v < n; v++) {
        remat__free(sg[v].sent_unsaved);
        remat_analysis_destroy(sg[v].a);
        remat_graph_destroy(sg[v].g);
    }
    remat__free(sg);
    remat__free(cut);
    remat__free(fwd);
    remat__free(bwd);
    remat__free(counts);
    return s;
}

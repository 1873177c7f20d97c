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
 *               activation, a first stage's data) and the outputs it sent,
 *               which the runtime keeps for the backward;
 *   running     the largest high-water mark of the other categories over
 *               one microbatch's forward and backward: its workspace and the
 *               gradients it receives and sends, a received gradient held
 *               until its backward returns (the caller's reference).
 * The schedule's simulation (pp_schedule.c) says, for each event of a
 * device, how many microbatches of each of its chunks are held by others;
 * the device's peak is its chunks' persistent bytes plus the largest
 * "held by others + running" over its events. Under a total budget a
 * device whose peak is over is planned again for that figure (fit_device):
 * its stages under the activation budget that the search finds, each
 * candidate judged by the device's peak, so what the search accepts is
 * what the simulation gives.
 *
 * With a device (o->device), the final plans are timed: a stage's forward
 * is the sum of its FWD instructions' op times (remat/time.h: measured
 * attrs.duration_ns, else the roofline), its backward the sum of its BWD
 * and RECOMPUTE instructions', and each boundary tensor a SEND (latency +
 * bytes / link bandwidth). The schedule is simulated once more with those
 * figures, so the step, the bubble and the exposed send/recv are seconds.
 * The stage's plans are not changed by timing them (--objective time
 * changes them, through the planner, before).
 */
#include "remat/pipeline.h"
#include "remat/time.h"
#include "pp_internal.h"
#include "../util/util_internal.h"

#include <stdio.h>
#include <string.h>

#define PERSISTENT_CATS                                                                                          \
    ((1u << REMAT_CAT_PARAMS) | (1u << REMAT_CAT_PARAM_GRADS) | (1u << REMAT_CAT_OPTIMIZER_STATE) |              \
     (1u << REMAT_CAT_MASTER_WEIGHTS) | (1u << REMAT_CAT_FROZEN))


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

remat_status remat__pp_open_stage(const remat_analysis *a, uint32_t first, uint32_t end, uint32_t k, stage_graph *sg,
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
    sg->out_storage = remat__calloc(g->n_tensors ? g->n_tensors : 1, 1);
    if (!sg->out_storage)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory planning pipeline stage %u", k);
    for (uint32_t i = 0; i < g->n_outputs; i++)
        sg->out_storage[g->tensors[g->outputs[i]].storage] = 1;
    /* What crosses: inputs that are activations of the whole graph
     * (received) and this stage's outputs (sent). */
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        uint32_t whole = remat_graph_find_tensor(a->g, g->tensors[t].id);
        if (g->tensors[t].kind == REMAT_TENSOR_INPUT && whole != REMAT_NONE &&
            a->g->tensors[whole].kind == REMAT_TENSOR_ACTIVATION)
            st->recv_bytes += g->tensors[t].logical_bytes;
    }
    sg->grad_hold = remat__calloc(g->n_ops ? g->n_ops : 1, sizeof *sg->grad_hold);
    if (!sg->grad_hold)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory planning pipeline stage %u", k);
    for (uint32_t i = 0; i < g->n_outputs; i++) {
        const remat_tensor *T = &g->tensors[g->outputs[i]];
        if (!a->is_output[remat_graph_find_tensor(a->g, T->id)]) {
            st->send_bytes += T->logical_bytes;
            if (T->producer != REMAT_NONE)
                sg->grad_hold[T->producer] += T->logical_bytes;
        }
    }
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
    o.extras = st->extras;
    if (st->budget) {
        o.budget_kind = st->budget_kind;
        o.budget = st->budget;
    } else {
        o.budget_kind = REMAT_BUDGET_NONE;
    }
    remat_status s = remat_plan_make(sg->a, &o, &st->plan, &st->replay, err);
    if (s != REMAT_OK)
        return s;
    return remat__pp_measure_stage(sg, st, bwd_time, err);
}

remat_status remat__pp_measure_stage(const stage_graph *sg, remat_pp_stage *st, double *bwd_time, remat_err *err)
{
    remat_status s;
    const remat_replay_result *r = &st->replay;
    st->persistent = 0;
    for (int c = 0; c < REMAT_CAT_COUNT; c++)
        if (PERSISTENT_CATS & (1u << c))
            st->persistent += r->category_peak[c];
    *bwd_time = st->bwd_flops + (double)r->flops_recompute;
    /* One more pass over the schedule with the cursor: held is what is live
     * when the first backward step comes; running is the largest
     * high-water mark of everything but the persistent categories, plus,
     * once remat's rules have freed them, the outputs the stage sent and
     * the gradients it received: the pipeline's runtime keeps its
     * references to both until the microbatch's backward returns
     * (torch.autograd.backward's arguments; Megatron-LM's output_tensor and
     * output_tensor_grad, unless deallocate_pipeline_outputs frees the
     * output's data). */
    const uint32_t np = REMAT_CAT_MASK_ALL & ~(uint32_t)PERSISTENT_CATS;
    const uint32_t held_mask = (1u << REMAT_CAT_INPUTS) | (1u << REMAT_CAT_ACTIVATIONS) | (1u << REMAT_CAT_RECOMPUTED);
    const remat_graph *g = sg->g;
    uint8_t *kept = remat__calloc(g->n_tensors ? g->n_tensors : 1, 1);
    if (!kept)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory planning a pipeline stage");
    remat_replay_cursor *cur = NULL;
    s = remat_replay_begin(sg->a, &st->extras, NULL, &cur, err);
    uint64_t extra = 0, running = 0;
    int seen_bwd = 0;
    for (size_t i = 0; s == REMAT_OK && i < st->plan.schedule.n; i++) {
        remat_instr in = st->plan.schedule.ins[i];
        if (in.kind == REMAT_I_BWD && !seen_bwd) {
            seen_bwd = 1;
            st->held = remat_replay_live(cur, held_mask) + extra;
        }
        uint64_t hw = remat_replay_live(cur, np) + remat_replay_cost(cur, in, np) + extra;
        if (hw > running)
            running = hw;
        s = remat_replay_apply(cur, in, err);
        if (s != REMAT_OK)
            break;
        if (in.kind == REMAT_I_BWD)
            extra += sg->grad_hold[in.arg];
        /* An output, once made, stays until the backward returns. */
        for (uint32_t t = 0; t < g->n_tensors; t++) {
            if (!sg->out_storage[t])
                continue;
            int now = remat_replay_resident(cur, t);
            if (now && !kept[t]) {
                kept[t] = 1;
            } else if (!now && kept[t] == 1) {
                kept[t] = 2;
                extra += g->tensors[t].bytes;
            }
        }
    }
    remat__free(kept);
    st->running = running;
    remat_replay_cursor_destroy(cur);
    return s;
}

/* Stage st's forward, recomputation and backward seconds on device dev,
 * summed over its plan's instructions (see the file comment). */
static remat_status time_stage(const stage_graph *sg, const remat_device *dev, remat_pp_stage *st, remat_err *err)
{
    remat_op_times t;
    remat_status s = remat_op_times_init(sg->a, dev, &t, err);
    if (s != REMAT_OK)
        return s;
    st->fwd_time = st->bwd_time = st->recompute_time = 0;
    for (size_t i = 0; i < st->plan.schedule.n; i++) {
        remat_instr in = st->plan.schedule.ins[i];
        if (in.kind == REMAT_I_FWD)
            st->fwd_time += t.fwd[in.arg];
        else if (in.kind == REMAT_I_RECOMPUTE)
            st->recompute_time += t.fwd[in.arg];
        else if (in.kind == REMAT_I_BWD)
            st->bwd_time += t.bwd[in.arg];
    }
    st->n_measured = t.n_fwd_measured + t.n_bwd_measured;
    st->n_timed = 2 * t.n_ops;
    remat_op_times_destroy(&t);
    st->act_send_time = remat_time_collective(dev, REMAT_COLL_SEND, st->send_bytes, 2);
    st->grad_send_time = remat_time_collective(dev, REMAT_COLL_SEND, st->recv_bytes, 2);
    return REMAT_OK;
}

/* The device's peak from the timeline's events (see the file comment),
 * in *peak; REMAT_EOVERFLOW (naming the device) where the held bytes of
 * the microbatches in flight pass 2^64. */
static remat_status device_peak(const remat_pp_result *r, uint32_t d, uint64_t *counts, uint64_t *peak,
                                remat_err *err)
{
    const uint32_t P = r->config.stages, V = r->config.chunks;
    uint64_t base = 0, worst = 0;
    bool ok = true;
    for (uint32_t c = 0; c < V; c++) {
        ok = ok && remat_u64_add(base, r->stages[c * P + d].persistent, &base);
        counts[c] = 0;
    }
    const size_t per = r->timeline.n_events / P;
    const remat_pp_event *ev = r->timeline.events + (size_t)d * per;
    for (size_t i = 0; i < per && ok; i++) {
        const remat_pp_stage *run = &r->stages[ev[i].chunk * P + d];
        if (ev[i].backward)
            counts[ev[i].chunk]--;
        uint64_t x = run->running, held;
        for (uint32_t c = 0; c < V && ok; c++)
            ok = remat_u64_mul(counts[c], r->stages[c * P + d].held, &held) && remat_u64_add(x, held, &x);
        if (x > worst)
            worst = x;
        if (!ev[i].backward)
            counts[ev[i].chunk]++;
    }
    if (!ok || !remat_u64_add(base, worst, peak))
        return remat_err_set(err, REMAT_EOVERFLOW,
                             "pipeline device %u: the bytes its microbatches in flight hold pass 2^64", d);
    return REMAT_OK;
}

void remat__pp_close_stages(stage_graph *sg, uint32_t n)
{
    for (uint32_t v = 0; sg && v < n; v++) {
        remat__free(sg[v].out_storage);
        remat__free(sg[v].grad_hold);
        remat_analysis_destroy(sg[v].a);
        remat_graph_destroy(sg[v].g);
    }
    remat__free(sg);
}

remat_status remat__pp_finish(remat_pp_result *r, const stage_graph *sg, const remat_device *device, double *fwd,
                              double *bwd, remat_err *err)
{
    const remat_pp_config *c = &r->config;
    const uint32_t P = c->stages, n = r->n_stages;
    remat_status s = REMAT_OK;
    remat_pp_timeline_destroy(&r->timeline);
    if (device) {
        double *act = remat__calloc(n, sizeof *act), *grad = remat__calloc(n, sizeof *grad);
        if (!act || !grad)
            s = remat_err_set(err, REMAT_ENOMEM, "out of memory timing a pipeline of %u stages", n);
        r->timed = true;
        r->device = *device;
        for (uint32_t v = 0; v < n && s == REMAT_OK; v++) {
            remat_pp_stage *st = &r->stages[v];
            s = time_stage(&sg[v], device, st, err);
            fwd[v] = st->fwd_time;
            bwd[v] = st->bwd_time + st->recompute_time;
            act[v] = st->act_send_time;
            grad[v] = st->grad_send_time;
        }
        if (s != REMAT_OK && s != REMAT_ENOMEM) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            remat_status code = err->code ? err->code : s;
            remat_err_init(err);
            s = remat_err_set(err, code, "timing the pipeline's stages: %s", msg);
        }
        if (s == REMAT_OK) {
            remat_pp_link link = {act, grad};
            s = remat_pp_simulate_linked(c, fwd, bwd, &link, &r->timeline, err);
        }
        remat__free(act);
        remat__free(grad);
    } else {
        s = remat_pp_simulate(c, fwd, bwd, &r->timeline, err);
    }
    if (s != REMAT_OK)
        return s;
    uint64_t *counts = remat__calloc(c->chunks, sizeof *counts);
    if (!counts)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory judging a pipeline of %u stages", n);
    /* The order of events, hence each device's peak, does not depend on
     * the durations: this is the figure the planning judged. */
    remat_status s2 = REMAT_OK;
    for (uint32_t d = 0; d < P && s2 == REMAT_OK; d++)
        s2 = device_peak(r, d, counts, &r->device_peak[d], err);
    remat__free(counts);
    if (s2 != REMAT_OK)
        return s2;
    r->largest = 0;
    for (uint32_t d = 1; d < P; d++)
        if (r->device_peak[d] > r->device_peak[r->largest])
            r->largest = d;
    return REMAT_OK;
}

/* Plans device d's chunks at (kind, b): *peak gets the device's figure, or
 * UINT64_MAX when a chunk's planner cannot reach b; *extra the chunks'
 * recomputed FLOPs. */
static remat_status try_device(remat_pp_result *r, const stage_graph *sg, const remat_plan_options *o, uint32_t d,
                               remat_budget_kind kind, uint64_t b, uint64_t *counts, double *bwd, uint64_t *peak,
                               uint64_t *extra, remat_err *err)
{
    const uint32_t P = r->config.stages, V = r->config.chunks;
    *peak = UINT64_MAX;
    *extra = 0;
    for (uint32_t ch = 0; ch < V; ch++) {
        uint32_t v = ch * P + d;
        r->stages[v].budget = b;
        r->stages[v].budget_kind = kind;
        remat_status s = plan_stage(&sg[v], o, &r->stages[v], &bwd[v], err);
        if (s == REMAT_EINFEASIBLE) {
            remat_err_init(err);
            return REMAT_OK;
        }
        if (s != REMAT_OK)
            return s;
        if (!remat_u64_add(*extra, r->stages[v].replay.flops_recompute, extra))
            *extra = UINT64_MAX - 1; /* saturates, still below "none yet" */
    }
    return device_peak(r, d, counts, peak, err);
}

/* Moves device d's chunks' plans (and what was measured of them) between
 * r and keep, so the best candidate survives the search without planning
 * it again (a planner with a time limit need not repeat its answer). */
static void swap_device(remat_pp_result *r, uint32_t d, remat_pp_stage *keep, double *bwd, double *keep_bwd)
{
    const uint32_t P = r->config.stages, V = r->config.chunks;
    for (uint32_t ch = 0; ch < V; ch++) {
        remat_pp_stage t = r->stages[ch * P + d];
        r->stages[ch * P + d] = keep[ch];
        keep[ch] = t;
        double x = bwd[ch * P + d];
        bwd[ch * P + d] = keep_bwd[ch];
        keep_bwd[ch] = x;
    }
}

/* Device d peaks over the budget B with its one-microbatch plans: search
 * for plans that fit. What a plan of d's stages must satisfy is
 * device_peak's own rule: persistent + max over d's events of (held bytes
 * of the microbatches in flight elsewhere + the running one's high-water
 * mark) <= B, which with one chunk and k microbatches in flight reads
 *     persistent + (k - 1) * held + running <= B.
 * The persistent state is there once whatever the plan, and held and
 * running are activation bytes, so the stages are planned under an
 * activation budget a (activations, recomputed ones, their gradients,
 * workspace: the bytes that in-flight microbatches multiply), not under a
 * total budget for one microbatch, in which the gradients that accumulate
 * during the backward leave room for activations early in it that the other
 * microbatches then hold k - 1 times. The search starts at the rule's own
 * figure for the one-microbatch plans, a = B - persistent - (k - 1) * held,
 * then bisects a in [0, B - persistent], judging every candidate by
 * device_peak itself, so the planned figure is the simulated one; it keeps
 * the fitting candidate with the fewest recomputed FLOPs (planners are not
 * monotone in held bytes). The total budgets of one microbatch (the earlier
 * search, the same bisection) are searched too, so the answer never
 * recomputes more than that search's: on transformers one family or the
 * other recomputes less. About 2 x 13 plans per device that is over. */
static remat_status fit_device(remat_pp_result *r, const stage_graph *sg, const remat_plan_options *o, uint32_t d,
                               uint64_t *counts, double *bwd, remat_err *err)
{
    const uint32_t P = r->config.stages, V = r->config.chunks;
    const uint64_t B = o->budget;
    uint64_t persistent = 0, held = 0;
    for (uint32_t ch = 0; ch < V; ch++) {
        /* Saturating: a sum past 2^64 bytes is over any budget anyway. */
        if (!remat_u64_add(persistent, r->stages[ch * P + d].persistent, &persistent))
            persistent = UINT64_MAX;
        if (!remat_u64_add(held, r->stages[ch * P + d].held, &held))
            held = UINT64_MAX;
    }
    remat_pp_stage *keep = remat__calloc(V, sizeof *keep);
    double *keep_bwd = remat__calloc(V, sizeof *keep_bwd);
    if (!keep || !keep_bwd) {
        remat__free(keep);
        remat__free(keep_bwd);
        return remat_err_set(err, REMAT_ENOMEM, "out of memory planning pipeline device %u", d);
    }
    /* keep starts as each chunk's stage without a plan: what a swap puts
     * back in r must still describe the stage (its cut, extras, bytes). */
    for (uint32_t ch = 0; ch < V; ch++) {
        keep[ch] = r->stages[ch * P + d];
        remat_plan_init(&keep[ch].plan);
        memset(&keep[ch].replay, 0, sizeof keep[ch].replay);
    }
    remat_status s = REMAT_OK;
    uint64_t least = r->device_peak[d], best_extra = UINT64_MAX;
    const uint32_t others = r->timeline.max_in_flight[d] > 0 ? r->timeline.max_in_flight[d] - 1 : 0;
    const remat_budget_kind kinds[2] = {REMAT_BUDGET_ACTIVATION, REMAT_BUDGET_TOTAL};
    for (int f = 0; f < 2 && s == REMAT_OK; f++) {
        const uint64_t top = kinds[f] == REMAT_BUDGET_TOTAL ? B : (B > persistent ? B - persistent : 0);
        uint64_t lo = 0, hi = top, seed = 0;
        if (kinds[f] == REMAT_BUDGET_ACTIVATION) {
            uint64_t in_flight = 0;
            int over = !remat_u64_mul(held, others, &in_flight) || in_flight >= top;
            seed = over ? 0 : top - in_flight;
        }
        const uint64_t step = B / 4096 > 0 ? B / 4096 : 1;
        for (int first = 1; s == REMAT_OK && (first || hi - lo > step); first = 0) {
            uint64_t mid = first ? seed : lo + (hi - lo) / 2;
            if (first && !seed)
                continue;
            uint64_t peak, extra;
            s = try_device(r, sg, o, d, kinds[f], mid, counts, bwd, &peak, &extra, err);
            if (s != REMAT_OK)
                break;
            if (peak < least)
                least = peak;
            if (peak <= B && extra < best_extra) {
                best_extra = extra;
                r->device_peak[d] = peak;
                swap_device(r, d, keep, bwd, keep_bwd);
            }
            /* Fits or cannot be reached: a larger budget recomputes less. */
            if (peak == UINT64_MAX || peak <= B)
                lo = mid > lo ? mid : lo;
            else
                hi = mid < hi ? mid : hi;
        }
    }
    if (s == REMAT_OK && best_extra == UINT64_MAX)
        s = remat_err_set(err, REMAT_EINFEASIBLE,
                          "pipeline device %u: with %u microbatches in flight no plan of its stages fits the "
                          "budget of %llu B (the least its search reached: %llu B)",
                          d, r->timeline.max_in_flight[d], (unsigned long long)B, (unsigned long long)least);
    if (s == REMAT_OK)
        swap_device(r, d, keep, bwd, keep_bwd);
    for (uint32_t ch = 0; ch < V; ch++) {
        remat_plan_destroy(&keep[ch].plan);
        remat_replay_result_destroy(&keep[ch].replay);
    }
    remat__free(keep);
    remat__free(keep_bwd);
    return s;
}

remat_status remat_pp_plan(const remat_analysis *a, const remat_pp_config *c, const uint32_t *cuts,
                           remat_pp_balance by, const remat_plan_options *o, remat_pp_result *r, remat_err *err)
{
    return remat_pp_plan_staged(a, c, cuts, by, o, NULL, r, err);
}

remat_status remat_pp_plan_staged(const remat_analysis *a, const remat_pp_config *c, const uint32_t *cuts,
                                  remat_pp_balance by, const remat_plan_options *o,
                                  const remat_exec_extras *stage_extras, remat_pp_result *r, remat_err *err)
{
    memset(r, 0, sizeof *r);
    remat_status s = remat_pp_check(c, err);
    if (s != REMAT_OK)
        return s;
    if (o->budget_kind == REMAT_BUDGET_ACTIVATION)
        return remat_err_set(err, REMAT_EINVAL, "`REMAT_BUDGET_ACTIVATION` with `remat_pp_config`: a device's budget "
                                                "caps its whole peak; use `REMAT_BUDGET_TOTAL`");
    const remat_exec_extras none = {0};
    if (memcmp(&o->extras, &none, sizeof none) != 0)
        return remat_err_set(err, REMAT_EINVAL, "pipeline: the ledger's state goes per stage (stage_extras), not in "
                                                "the plan options");
    for (uint32_t v = 0; stage_extras && v < c->stages * c->chunks; v++)
        if (stage_extras[v].sharding)
            return remat_err_set(err, REMAT_EINVAL, "`dp` with `remat_pp_config`: a pipeline stage's data-parallel sharding is not "
                                                    "modelled yet");
    const uint32_t P = c->stages, V = c->chunks, n = P * V;
    r->config = *c;
    r->n_stages = n;
    r->budget = o->budget_kind == REMAT_BUDGET_TOTAL ? o->budget : 0;
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
        st->budget_kind = REMAT_BUDGET_TOTAL;
        if (stage_extras)
            st->extras = stage_extras[v];
        s = remat__pp_open_stage(a, st->first, st->end, v, &sg[v], st, err);
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
        if ((s = device_peak(r, d, counts, &r->device_peak[d], err)) != REMAT_OK)
            break;
        if (o->budget_kind == REMAT_BUDGET_TOTAL && r->device_peak[d] > o->budget)
            s = fit_device(r, sg, o, d, counts, bwd, err);
    }
    if (s != REMAT_OK)
        goto out;
    s = remat__pp_finish(r, sg, o->device, fwd, bwd, err);
out:
    remat__pp_close_stages(sg, n);
    remat__free(cut);
    remat__free(fwd);
    remat__free(bwd);
    remat__free(counts);
    return s;
}

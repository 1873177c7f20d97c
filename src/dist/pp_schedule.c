/*
 * pp_schedule.c - pipeline schedules (GPipe, 1F1B, interleaved 1F1B) and
 * their simulation.
 *
 * Each device's order of work is written down first, exactly as the
 * schedule defines it (remat/pipeline.h cites where), and the simulation
 * then only assigns times: an event starts when its device has finished the
 * event before it and its dependence has ended (a forward waits for the
 * previous virtual stage's forward of the same microbatch, a backward for
 * the next virtual stage's backward). Because each device's order is fixed,
 * one sweep that advances every device as far as its dependences allow,
 * repeated until nothing is left, gives the same times as an event queue,
 * with no queue. A sweep that advances nothing would be a schedule that
 * waits on itself; the orders built here never do, and the check stays as
 * an internal error rather than a hang.
 *
 * Durations are inputs: unit times, FLOPs over a rate, or a time model's
 * per-stage figures. Sends are free unless a link is given
 * (remat_pp_simulate_linked): then each boundary tensor travels on the
 * sending device's own link stream, one per direction (the activation to
 * the next stage, the input gradient to the previous one), as a pipeline
 * runtime's isend does (Megatron-LM's p2p_communication; tests/torch/
 * pp_1f1b.py): the sender computes on while it travels, the receiver's
 * event waits for its arrival, and a transfer waits for the one before it
 * on the same stream. The part of a device's wait that lies after the
 * producing event ended is the exposed send/recv time; the rest of its
 * idle time is the bubble.
 */
#include "remat/pipeline.h"
#include "../util/util_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[] = {"gpipe", "1f1b", "interleaved"};

const char *remat_pp_kind_name(remat_pp_kind k)
{
    return (unsigned)k < 3 ? kind_names[k] : "?";
}

remat_status remat_pp_parse_schedule(const char *text, remat_pp_config *c, remat_err *err)
{
    if (strcmp(text, "gpipe") == 0 || strcmp(text, "1f1b") == 0) {
        c->kind = text[0] == 'g' ? REMAT_PP_GPIPE : REMAT_PP_1F1B;
        c->chunks = 1;
        return REMAT_OK;
    }
    const char *pre = "interleaved:";
    if (strncmp(text, pre, strlen(pre)) == 0) {
        const char *v = text + strlen(pre);
        char *end;
        unsigned long n = strtoul(v, &end, 10);
        if (*v >= '0' && *v <= '9' && !*end && n >= 2 && n <= 1024) {
            c->kind = REMAT_PP_INTERLEAVED;
            c->chunks = (uint32_t)n;
            return REMAT_OK;
        }
        return remat_err_set(err, REMAT_EINVAL, "--pp-schedule '%.64s': V must be a whole number from 2 to 1024", text);
    }
    return remat_err_set(err, REMAT_EINVAL, "--pp-schedule '%.64s': expected gpipe, 1f1b or interleaved:V", text);
}

remat_status remat_pp_check(const remat_pp_config *c, remat_err *err)
{
    if (c->stages < 1 || c->stages > 4096)
        return remat_err_set(err, REMAT_EINVAL, "--pp %u is out of range (1 to 4096)", c->stages);
    if (c->microbatches < 1 || c->microbatches > 1u << 20)
        return remat_err_set(err, REMAT_EINVAL, "--microbatches %u is out of range (1 to 1048576)", c->microbatches);
    if (c->kind == REMAT_PP_INTERLEAVED) {
        if (c->chunks < 2)
            return remat_err_set(err, REMAT_EINVAL, "interleaved: V must be at least 2 (got %u)", c->chunks);
        /* Megatron-LM's interleaved schedule asserts this too: its
         * microbatch numbering runs in groups of P. */
        if (c->microbatches % c->stages != 0)
            return remat_err_set(err, REMAT_EINVAL,
                                 "--pp-schedule interleaved needs --microbatches (%u) to be a multiple of --pp (%u)",
                                 c->microbatches, c->stages);
    } else if (c->chunks != 1) {
        return remat_err_set(err, REMAT_EINVAL, "%s has one chunk per device (got %u)", remat_pp_kind_name(c->kind),
                             c->chunks);
    }
    return REMAT_OK;
}

/* Device d's k-th forward (or backward) in the interleaved schedule:
 * chunks cycle every P microbatches, backward through the chunks in reverse
 * (Megatron-LM, get_model_chunk_id and its microbatch numbering). */
static void interleaved_id(const remat_pp_config *c, uint32_t k, bool backward, uint32_t *chunk, uint32_t *mb)
{
    const uint32_t P = c->stages, V = c->chunks;
    uint32_t in_group = k % (P * V);
    *chunk = in_group / P;
    if (backward)
        *chunk = V - 1 - *chunk;
    *mb = (k / (P * V)) * P + k % P;
}

/* Writes device d's order of work into ev (M*V*2 events). */
static void device_order(const remat_pp_config *c, uint32_t d, remat_pp_event *ev)
{
    const uint32_t P = c->stages, M = c->microbatches, V = c->chunks, total = M * V;
    uint32_t warm;
    switch (c->kind) {
    case REMAT_PP_GPIPE: warm = total; break;
    case REMAT_PP_1F1B: warm = P - d - 1 < total ? P - d - 1 : total; break;
    default: {
        uint64_t w = (uint64_t)(P - d - 1) * 2 + (uint64_t)(V - 1) * P;
        warm = w < total ? (uint32_t)w : total;
    }
    }
    uint32_t nf = 0, nb = 0, n = 0;
#define PUSH(bw)                                                                                                   \
    do {                                                                                                           \
        remat_pp_event *e = &ev[n++];                                                                              \
        uint32_t k = (bw) ? nb++ : nf++;                                                                           \
        e->device = d;                                                                                             \
        e->backward = (bw);                                                                                        \
        if (c->kind == REMAT_PP_INTERLEAVED) {                                                                     \
            interleaved_id(c, k, (bw), &e->chunk, &e->microbatch);                                                 \
        } else {                                                                                                   \
            e->chunk = 0;                                                                                          \
            e->microbatch = k;                                                                                     \
        }                                                                                                          \
    } while (0)
    for (uint32_t i = 0; i < warm; i++)
        PUSH(false);
    for (uint32_t i = 0; i < total - warm; i++) {
        PUSH(false);
        PUSH(true);
    }
    while (nb < total)
        PUSH(true);
#undef PUSH
}

void remat_pp_timeline_destroy(remat_pp_timeline *t)
{
    if (!t)
        return;
    remat__free(t->events);
    remat__free(t->max_in_flight);
    remat__free(t->sends);
    remat__free(t->device_busy);
    remat__free(t->device_exposed);
    memset(t, 0, sizeof *t);
}

remat_status remat_pp_simulate(const remat_pp_config *c, const double *fwd, const double *bwd, remat_pp_timeline *t,
                               remat_err *err)
{
    return remat_pp_simulate_linked(c, fwd, bwd, NULL, t, err);
}

remat_status remat_pp_simulate_linked(const remat_pp_config *c, const double *fwd, const double *bwd,
                                      const remat_pp_link *link, remat_pp_timeline *t, remat_err *err)
{
    memset(t, 0, sizeof *t);
    remat_status st = remat_pp_check(c, err);
    if (st != REMAT_OK)
        return st;
    const uint32_t P = c->stages, M = c->microbatches, V = c->chunks, S = P * V;
    for (uint32_t v = 0; v < S; v++) {
        if (!isfinite(fwd[v]) || !isfinite(bwd[v]) || fwd[v] < 0 || bwd[v] < 0)
            return remat_err_set(err, REMAT_EINVAL, "stage %u: durations must be finite and >= 0", v);
        if (link && (!isfinite(link->act[v]) || !isfinite(link->grad[v]) || link->act[v] < 0 || link->grad[v] < 0))
            return remat_err_set(err, REMAT_EINVAL, "stage %u: send times must be finite and >= 0", v);
    }
    const size_t per_dev = (size_t)M * V * 2, n = per_dev * P, cells = (size_t)M * S;
    /* Every boundary of every microbatch crosses once each way. */
    const size_t n_sends = link ? (size_t)M * (S - 1) * 2 : 0;
    t->events = remat__calloc(n, sizeof *t->events);
    t->max_in_flight = remat__calloc(P, sizeof *t->max_in_flight);
    t->device_busy = remat__calloc(P, sizeof *t->device_busy);
    t->device_exposed = remat__calloc(P, sizeof *t->device_exposed);
    t->sends = n_sends ? remat__calloc(n_sends, sizeof *t->sends) : NULL;
    /* fend/bend: when a cell's forward (backward) ended; farr/barr: when
     * its result arrived at the device that reads it (the same without a
     * link). link_free: per device and direction, when its stream is free. */
    double *fend = remat__malloc(cells * sizeof *fend), *bend = remat__malloc(cells * sizeof *bend);
    double *farr = remat__malloc(cells * sizeof *farr), *barr = remat__malloc(cells * sizeof *barr);
    double *link_free = remat__calloc((size_t)P * 2, sizeof *link_free);
    size_t *next = remat__calloc(P, sizeof *next);
    double *free_at = remat__calloc(P, sizeof *free_at);
    if (!t->events || !t->max_in_flight || !t->device_busy || !t->device_exposed || (n_sends && !t->sends) || !fend ||
        !bend || !farr || !barr || !link_free || !next || !free_at) {
        st = remat_err_set(err, REMAT_ENOMEM, "out of memory simulating a pipeline of %u x %u", P, M);
        goto out;
    }
    t->devices = P;
    t->chunks = V;
    t->microbatches = M;
    t->n_events = n;
    for (size_t i = 0; i < cells; i++)
        fend[i] = bend[i] = farr[i] = barr[i] = -1;
    for (uint32_t d = 0; d < P; d++)
        device_order(c, d, t->events + (size_t)d * per_dev);
    size_t done = 0;
    while (done < n) {
        size_t before = done;
        for (uint32_t d = 0; d < P; d++) {
            remat_pp_event *ev = t->events + (size_t)d * per_dev;
            while (next[d] < per_dev) {
                remat_pp_event *e = &ev[next[d]];
                const uint32_t v = e->chunk * P + d;
                const size_t cell = (size_t)e->microbatch * S + v;
                /* dep: when the input arrives; made: when its producer
                 * ended (equal without a link). */
                double dep = 0, made = 0;
                if (!e->backward && v > 0) {
                    dep = farr[cell - 1];
                    made = fend[cell - 1];
                } else if (e->backward && v + 1 < S) {
                    dep = barr[cell + 1];
                    made = bend[cell + 1];
                } else if (e->backward) {
                    dep = made = fend[cell];
                }
                if (dep < 0 || (e->backward && fend[cell] < 0))
                    break;
                e->start = dep > free_at[d] ? dep : free_at[d];
                {
                    double ready = made > free_at[d] ? made : free_at[d];
                    e->wait_comm = e->start > ready ? e->start - ready : 0;
                }
                e->end = e->start + (e->backward ? bwd[v] : fwd[v]);
                free_at[d] = e->end;
                (e->backward ? bend : fend)[cell] = e->end;
                /* Its result travels to the stage that reads it. */
                double arrive = e->end;
                int sends = e->backward ? v > 0 : v + 1 < S;
                if (link && sends) {
                    double *lf = &link_free[(size_t)d * 2 + e->backward];
                    remat_pp_send *x = &t->sends[t->n_sends++];
                    x->from = d;
                    x->to = e->backward ? (v - 1) % P : (v + 1) % P;
                    x->chunk = e->chunk;
                    x->microbatch = e->microbatch;
                    x->backward = e->backward;
                    x->start = e->end > *lf ? e->end : *lf;
                    x->end = x->start + (e->backward ? link->grad[v] : link->act[v]);
                    *lf = arrive = x->end;
                }
                (e->backward ? barr : farr)[cell] = arrive;
                t->busy += e->end - e->start;
                t->device_busy[d] += e->end - e->start;
                t->device_exposed[d] += e->wait_comm;
                t->exposed_comm += e->wait_comm;
                if (e->end > t->step_time)
                    t->step_time = e->end;
                if (arrive > t->step_time) /* never: the last event sends nothing */
                    t->step_time = arrive;
                next[d]++;
                done++;
            }
        }
        if (done == before) {
            st = remat_err_set(err, REMAT_EINVAL, "internal: the %s schedule waits on itself", remat_pp_kind_name(c->kind));
            goto out;
        }
    }
    /* Microbatch-chunks held: those whose forward has run on the device and
     * whose backward has not, the running one excluded. */
    for (uint32_t d = 0; d < P; d++) {
        remat_pp_event *ev = t->events + (size_t)d * per_dev;
        uint32_t held = 0;
        for (size_t i = 0; i < per_dev; i++) {
            if (ev[i].backward)
                held--;
            ev[i].held = held;
            if (!ev[i].backward) {
                held++;
                if (held > t->max_in_flight[d])
                    t->max_in_flight[d] = held;
            }
        }
    }
    {
        /* The bubble is the idle time the schedule itself makes: waits on
         * a link are counted apart, as exposed send/recv. */
        double total = t->step_time * P, idle = total - t->busy - t->exposed_comm;
        if (idle < 0) /* rounding of sums that cancel */
            idle = 0;
        t->bubble_time = idle;
        t->bubble_fraction = total > 0 ? idle / total : 0;
        t->bubble_ratio = t->busy > 0 ? idle / t->busy : 0;
    }
out:
    remat__free(fend);
    remat__free(bend);
    remat__free(farr);
    remat__free(barr);
    remat__free(link_free);
    remat__free(next);
    remat__free(free_at);
    if (st != REMAT_OK)
        remat_pp_timeline_destroy(t);
    return st;
}

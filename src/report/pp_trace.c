/*
 * pp_trace.c - a timed pipeline as a Chrome trace: one process per device,
 * one lane per stream.
 *
 * remat_pp_plan with a device leaves a timeline in seconds: each device's
 * forward and backward events, and each boundary tensor's transfer on the
 * sending device's link stream (one per direction). Here they become "X"
 * events of the Chrome Trace Event Format (Perfetto, chrome://tracing):
 * pid = device, tid 0 its compute stream, tid 1 its sends to the next stage
 * (activations), tid 2 its sends to the previous stage (gradients). A
 * device's idle time on tid 0 is visible as gaps; a gap that ends when a
 * transfer ends is exposed send/recv, any other the bubble. Times are
 * microseconds with three decimals (nanoseconds), like the single-device
 * trace's time axis (trace_chrome.c). The document is built whole in
 * memory and returned, or NULL with the error.
 */
#include "remat/trace.h"
#include "../util/util_internal.h"

#include <stdio.h>
#include <string.h>

static void event(remat_buf *b, int *first, const char *name, const char *cat, double start, double end,
                  uint32_t pid, uint32_t tid, uint32_t stage, uint32_t mb)
{
    remat_buf_printf(b,
                     "%s{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"ts\": %.3f, \"dur\": %.3f, \"pid\": %u, "
                     "\"tid\": %u, \"args\": {\"stage\": %u, \"microbatch\": %u}}",
                     *first ? "" : ",\n", name, cat, start * 1e6, (end - start) * 1e6, pid, tid, stage, mb);
    *first = 0;
}

char *remat_pp_trace_chrome(const remat_pp_result *r, size_t *len, remat_err *err)
{
    if (!r->timed) {
        remat_err_set(err, REMAT_EINVAL, "a pipeline trace needs a timed pipeline (plan it with a device)");
        return NULL;
    }
    const remat_pp_timeline *t = &r->timeline;
    const uint32_t P = r->config.stages;
    remat_buf b;
    remat_buf_init(&b);
    remat_buf_puts(&b, "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n");
    int first = 1;
    static const char *const lanes[] = {"compute", "send to next stage (activations)",
                                        "send to previous stage (gradients)"};
    for (uint32_t d = 0; d < P; d++) {
        remat_buf_printf(&b, "%s{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %u, \"tid\": 0, \"args\": "
                             "{\"name\": \"device %u\"}}",
                         first ? "" : ",\n", d, d);
        first = 0;
        for (uint32_t l = 0; l < 3; l++)
            remat_buf_printf(&b, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %u, \"tid\": %u, \"args\": "
                                 "{\"name\": \"%s\"}}",
                             d, l, lanes[l]);
    }
    char name[64];
    for (size_t i = 0; i < t->n_events; i++) {
        const remat_pp_event *e = &t->events[i];
        const uint32_t v = e->chunk * P + e->device;
        snprintf(name, sizeof name, "%s mb %u stage %u", e->backward ? "B" : "F", e->microbatch, v);
        event(&b, &first, name, e->backward ? (r->stages[v].recompute_time > 0 ? "backward+recompute" : "backward")
                                            : "forward",
              e->start, e->end, e->device, 0, v, e->microbatch);
    }
    for (size_t i = 0; i < t->n_sends; i++) {
        const remat_pp_send *x = &t->sends[i];
        const uint32_t v = x->chunk * P + x->from;
        snprintf(name, sizeof name, "%s mb %u to device %u", x->backward ? "send grad" : "send act", x->microbatch,
                 x->to);
        event(&b, &first, name, x->backward ? "send_gradient" : "send_activation", x->start, x->end, x->from,
              x->backward ? 2 : 1, v, x->microbatch);
    }
    remat_buf_printf(&b, "\n], \"otherData\": {\"device\": ");
    remat_buf_json_str(&b, r->device.name);
    remat_buf_printf(&b, ", \"schedule\": \"%s\", \"devices\": %u, \"microbatches\": %u, \"chunks\": %u, "
                         "\"step_us\": %.3f, \"bubble_fraction\": %.6f, \"exposed_comm_us\": %.3f}}\n",
                     remat_pp_kind_name(r->config.kind), P, r->config.microbatches, r->config.chunks,
                     t->step_time * 1e6, t->bubble_fraction, t->exposed_comm * 1e6);
    return remat_buf_finish(&b, len, err, "pipeline trace");
}

/*
 * remat/time.h - the completed step time: devices, per-op time, collectives,
 * and a two-stream timeline over a replayed schedule.
 *
 * A device says how fast one accelerator computes (peak FLOP/s per element
 * type), moves bytes to and from its memory, and talks to its peers (link
 * bandwidth and a per-message latency). Presets carry the vendor datasheets'
 * figures (README.md, "Step time" cites each); a JSON device file
 * (format "remat-device") gives any other.
 *
 * An op's time is measured when the graph says so (attrs.duration_ns and
 * attrs.bwd_duration_ns, graphs/README.md "Measured durations"), else the
 * roofline max(FLOPs / peak(dtype), bytes moved / memory bandwidth) plus the
 * device's kernel overhead. A collective costs the ring algorithm's time
 * (Thakur, Rabenseifner and Gropp 2005, section 4; NCCL's "Performance"
 * notes): over N ranks, an all-gather or reduce-scatter of a B-byte buffer
 * takes (N-1) latency + (N-1)/N B / link bandwidth, an all-reduce twice that.
 *
 * The timeline runs a schedule on two streams: a compute stream (FWD,
 * RECOMPUTE, BWD, OPT in schedule order) and a communication stream (the
 * collectives in schedule order). A collective starts when the stream is
 * free and its data is ready; an instruction that needs a collective's result
 * waits for it. Step time = compute + exposed communication.
 *
 *     remat_device d; remat_err err; remat_err_init(&err);
 *     remat_device_resolve("a100-sxm-80gb", &d, &err);
 *     remat_op_times t;
 *     remat_op_times_init(a, &d, &t, &err);
 *     remat_timeline tl;
 *     remat_timeline_run(a, &schedule, NULL, &d, &t, &tl, &err);   // tl.step_time, tl.exposed_comm, ...
 *     remat_timeline_destroy(&tl);
 *     remat_op_times_destroy(&t);
 *
 * Times are seconds (double). Bandwidths are bytes per second; the docs
 * write them in GB/s = 10^9 B/s, as the datasheets do.
 */
#ifndef REMAT_TIME_H
#define REMAT_TIME_H

#include "remat/exec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element types a device has a peak for. */
#define REMAT_DTYPE_MAP(X) \
    X(F64, "f64")          \
    X(F32, "f32")          \
    X(TF32, "tf32")        \
    X(BF16, "bf16")        \
    X(F16, "f16")          \
    X(FP8, "fp8")          \
    X(INT8, "int8")

typedef enum {
#define REMAT__DTYPE_ENUM(name, text) REMAT_DTYPE_##name,
    REMAT_DTYPE_MAP(REMAT__DTYPE_ENUM)
#undef REMAT__DTYPE_ENUM
    REMAT_DTYPE_COUNT
} remat_dtype;

/* "f32", ...; and the reverse, accepting the aliases graphs use (float32,
 * fp32, float, float64, double, bfloat16, float16, half, fp16, e4m3, e5m2,
 * i8). Returns 0 for an unknown name. */
const char *remat_dtype_name(remat_dtype d);
int remat_dtype_parse(const char *s, remat_dtype *out);

typedef struct remat_device {
    char name[64];
    double peak_flops[REMAT_DTYPE_COUNT]; /* FLOP/s; 0: the device has no such unit (an op in it is an error) */
    double mem_bandwidth;                 /* bytes/s to and from device memory */
    double link_bandwidth;                /* bytes/s one rank sends (and receives) on its ring link */
    double link_latency;                  /* seconds per ring step (alpha) */
    double kernel_overhead;               /* seconds added to each kernel (launch), 0 in the presets */
    remat_dtype default_dtype;            /* for tensors that name no dtype */
} remat_device;

/* The preset names (static); *n gets their number. */
const char *const *remat_device_presets(size_t *n);

/* Fills *out with preset `name`; REMAT_EINVAL naming the presets when
 * there is none. O(presets). */
remat_status remat_device_preset(const char *name, remat_device *out, remat_err *err);

/* Reads a device file: {"format": "remat-device", "version": 1, "name": S,
 * "peak_flops": {"f32": N, ...}, "memory_bandwidth": N, "link_bandwidth": N,
 * "link_latency": N, "kernel_overhead": N, "default_dtype": S}, bandwidths
 * in bytes/s and times in seconds; "base": "PRESET" starts from a preset and
 * the other fields override it. Strict: an unknown key, a wrong type, a
 * negative or non-finite figure, or a missing required field
 * (memory_bandwidth, and at least one peak, unless a base gives them) is
 * REMAT_EPARSE naming SOURCE (and line:column for syntax) and the JSON path. */
remat_status remat_device_load_json(const char *text, size_t len, const char *source, remat_device *out,
                                    remat_err *err);
remat_status remat_device_load_file(const char *path, remat_device *out, remat_err *err);

/* A preset name, else a device file's path (a bare name that is neither a
 * preset nor an existing file is the unknown-preset error). */
remat_status remat_device_resolve(const char *name_or_path, remat_device *out, remat_err *err);

/* The roofline: overhead + max(flops / peak, bytes / bandwidth). */
double remat_time_roofline(double flops, double bytes, double peak, double bandwidth, double overhead);

/* Per-op durations of a's graph on device d. fwd[k] is op k's forward (and
 * each recomputation's) time, bwd[k] its backward step's. Measured figures
 * (attrs.duration_ns, attrs.bwd_duration_ns) win over the roofline.
 * Roofline bytes moved: forward, every input's and every non-view output's
 * logical bytes; backward, every saved tensor's, every output's gradient and
 * every input gradient written (inputs a gradient flows into). An op whose
 * outputs are all views runs no kernel (time 0). The dtype is the first
 * output's, else the first input's, else the device's default; a dtype
 * remat has no peak table entry for (i64, bool) counts as the default. */
typedef struct remat_op_times {
    uint32_t n_ops;
    double *fwd, *bwd;           /* seconds, per op (owned) */
    uint32_t n_fwd_measured, n_bwd_measured;
} remat_op_times;

/* REMAT_EGRAPH for a bad duration attribute or a dtype the device has no
 * peak for (naming the op); REMAT_ENOMEM. Safe to destroy after a failure.
 * O(ops + refs). */
remat_status remat_op_times_init(const remat_analysis *a, const remat_device *d, remat_op_times *out,
                                 remat_err *err);
void remat_op_times_destroy(remat_op_times *t);

/* The optimizer step's time: memory-bound, it reads weights, gradients,
 * optimizer state and master copy and writes weights, state and master copy
 * (param_bytes: trainable weights' bytes as the rank holds them). */
double remat_time_optimizer(const remat_device *d, uint64_t param_bytes, uint64_t grad_bytes,
                            const remat_exec_extras *extras);

/* SEND: one point-to-point transfer to a neighbour (a pipeline stage's
 * activations or gradients), latency + bytes / link bandwidth. */
typedef enum { REMAT_COLL_ALLREDUCE, REMAT_COLL_ALLGATHER, REMAT_COLL_REDUCE_SCATTER, REMAT_COLL_SEND } remat_collective;

/* Ring time of a collective over `ranks` ranks of a buffer of `bytes`
 * (the whole buffer, every rank's part together): (N-1) alpha +
 * (N-1)/N bytes / link bandwidth for all-gather and reduce-scatter,
 * 2 (N-1) alpha + 2 (N-1)/N bytes / link bandwidth for all-reduce; 0 for
 * one rank. SEND: alpha + bytes / link bandwidth (ranks >= 2 ignored). The reduction's arithmetic is not counted (it hides under the
 * transfer on every device remat has a preset for). */
double remat_time_collective(const remat_device *d, remat_collective kind, uint64_t bytes, uint64_t ranks);

/* Streams of the timeline. */
typedef enum { REMAT_STREAM_COMPUTE, REMAT_STREAM_COMM, REMAT_STREAM_NONE } remat_stream;

typedef struct remat_timeline {
    size_t n;              /* instructions: the schedule's, plus an implied OPT when it has none */
    double *start, *end;   /* seconds, per instruction (owned) */
    uint8_t *stream;       /* remat_stream per instruction; FREE and RELEASE take no time (NONE) */
    size_t *pred;          /* what bound each start: an instruction index, or SIZE_MAX (time 0) */
    double step_time;      /* the last end */
    double compute_time;   /* busy time of the compute stream */
    double forward_time, recompute_time, backward_time, optimizer_time;
    double comm_time;      /* busy time of the communication stream */
    double exposed_comm;   /* step_time - compute_time: compute idle, waiting for a collective */
    size_t *crit;          /* the critical path, first instruction first (owned) */
    size_t n_crit;
    double crit_compute, crit_comm; /* time on it per stream (they sum to step_time with the waits) */
} remat_timeline;

/* Per op k, the time of the tensor-parallel collective its forward step
 * (fwd[k]) and its backward step (bwd[k]) run on the communication stream,
 * 0 where the step runs none (remat_timeline_run's rule: an op whose attrs
 * name collective_fwd / collective_bwd and attrs.ranks >= 2 and that does
 * no arithmetic of its own). fwd and bwd have g->n_ops elements. O(ops +
 * refs). */
remat_status remat_time_op_collectives(const remat_graph *g, const remat_device *d, double *fwd, double *bwd,
                                       remat_err *err);

/* Runs s (replay it first: the timeline assumes a valid schedule) on two
 * streams. Dependencies: a compute instruction follows the previous one; at
 * ZeRO 3 it waits for the latest ALLGATHER of each unit whose params it
 * reads; OPT waits for every reduction before it. A collective follows the
 * previous collective, starts no earlier than the compute instruction
 * before it in the schedule starts (the program issues it there), and
 * waits for its data: a reduction for that compute instruction's end (the
 * BWD that completed its bucket), an ALLGATHER after OPT for OPT's end.
 * A tensor-parallel collective op's step (remat_time_op_collectives) runs
 * on the communication stream the same way, after the compute step before
 * it; a compute step waits for the collective that made a tensor it reads
 * (a forward's inputs, a backward's output gradients).
 * Collectives need extras->sharding (their sizes and rank count);
 * REMAT_EINVAL when it is missing or an argument is out of range.
 * O(instructions + refs). */
remat_status remat_timeline_run(const remat_analysis *a, const remat_schedule *s, const remat_exec_extras *extras,
                                const remat_device *d, const remat_op_times *t, remat_timeline *out,
                                remat_err *err);
void remat_timeline_destroy(remat_timeline *tl);

#ifdef __cplusplus
}
#endif
#endif

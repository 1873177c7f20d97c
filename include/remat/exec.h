/*
 * remat/exec.h - the executor: the one judge of every plan.
 *
 * remat_replay walks a schedule instruction by instruction, checks that each
 * is legal (what it reads is resident, nothing is freed twice, every backward
 * step runs exactly once and after the steps that complete its output
 * gradients), and measures live memory per category at every step's
 * high-water mark (resident before + new outputs + workspace), the peak,
 * and FLOPs. Nothing else in remat computes a peak: planners call this.
 *
 * remat_schedule_from_keep is the default policy that turns a keep set into
 * a schedule (graphs/README.md, "Default policy").
 *
 *     remat_schedule s; remat_schedule_init(&s);
 *     remat_schedule_from_keep(a, keep, &s, &err);
 *     remat_replay_result r;
 *     remat_replay(a, &s, NULL, &r, &err);   // r.valid, r.peak_bytes, ...
 *     remat_replay_result_destroy(&r);
 *     remat_schedule_destroy(&s);
 */
#ifndef REMAT_EXEC_H
#define REMAT_EXEC_H

#include "remat/analyze.h"
#include "remat/schedule.h"

#ifdef __cplusplus
extern "C" {
#endif

#define REMAT_CATEGORY_MAP(X)                         \
    X(PARAMS, "params")                               \
    X(PARAM_GRADS, "param_grads")                     \
    X(OPTIMIZER_STATE, "optimizer_state")             \
    X(MASTER_WEIGHTS, "master_weights")               \
    X(FROZEN, "frozen")                               \
    X(INPUTS, "inputs")                               \
    X(ACTIVATIONS, "activations")                     \
    X(RECOMPUTED, "recomputed")                       \
    X(ACTIVATION_GRADS, "activation_grads")           \
    X(WORKSPACE, "workspace")                         \
    X(COMM_BUFFERS, "comm_buffers")                   \
    X(GATHERED_PARAMS, "gathered_params")

typedef enum {
#define REMAT__CAT_ENUM(name, text) REMAT_CAT_##name,
    REMAT_CATEGORY_MAP(REMAT__CAT_ENUM)
#undef REMAT__CAT_ENUM
    REMAT_CAT_COUNT
} remat_category;

const char *remat_category_name(remat_category c);
/* The colour every remat chart gives category c ("#rrggbb", static). */
const char *remat_category_color(remat_category c);

/* 1 for the categories an --activation-budget caps: activations,
 * recomputed, activation_grads, workspace. */
int remat_category_is_activation(remat_category c);

/* Persistent state that the graph does not describe (from the ledger):
 * resident for the whole step, in their own categories. optimizer_workspace
 * is transient during the optimizer step. Zero-initialize for none. */
typedef struct remat_sharding remat_sharding;

typedef struct remat_exec_extras {
    uint64_t optimizer_state;
    uint64_t master_weights;
    uint64_t frozen_copies;
    uint64_t comm_buffers;
    uint64_t optimizer_workspace;
    uint64_t workspace;          /* library workspace held for the whole step (category workspace) */
    /* NULL: one device. Otherwise the data-parallel sharding this replay
     * measures one rank of (see "Sharded data parallel" below); the caller
     * keeps it alive for the replay. */
    const remat_sharding *sharding;
} remat_exec_extras;

/* Observer: called during replay, for the tracer and numeric mode. Any
 * callback may be NULL. `storage` is the tensor that owns the bytes; for
 * gradients, grad = 1 and storage is the tensor whose gradient it is.
 * A callback returning non-zero stops the replay with REMAT_EINTERNAL
 * (its own error text in err, set by the observer). */
typedef struct remat_replay_observer {
    void *ctx;
    int (*on_alloc)(void *ctx, size_t index, uint32_t storage, int grad, remat_category cat, uint64_t bytes);
    int (*on_free)(void *ctx, size_t index, uint32_t storage, int grad, remat_category cat, uint64_t bytes);
    /* After the instruction has executed: live bytes now, and the step's
     * high-water mark with its per-category composition. */
    int (*on_step)(void *ctx, size_t index, remat_instr in, uint64_t live_after, uint64_t high_water,
                   const uint64_t *hw_by_category);
} remat_replay_observer;

typedef struct remat_replay_result {
    bool valid;
    /* When invalid: the first failing instruction (index == n for a problem
     * found at the end of the schedule) and why, in err. */
    size_t fail_index;
    uint64_t peak_bytes;
    size_t peak_index;           /* instruction at which the peak occurs */
    uint64_t peak_by_category[REMAT_CAT_COUNT]; /* composition at the peak */
    uint64_t category_peak[REMAT_CAT_COUNT];    /* each category's own maximum */
    uint64_t sum_of_category_peaks;
    uint64_t activation_peak;    /* max over steps of the activation categories together */
    size_t activation_peak_index;
    uint64_t flops_forward, flops_backward, flops_recompute;
    uint32_t *recompute_counts;  /* per op (owned; free with _destroy) */
    uint64_t n_instructions;
    /* Live bytes per category when the optimizer step starts: the persistent
     * state a rank holds at OPT (weights, gradients, optimizer state, master
     * copy), the figure that the ledger's lines describe. */
    uint64_t at_opt_by_category[REMAT_CAT_COUNT];
    /* Sharded replays: the collectives' volume per rank for this step, in
     * elements and bytes, counted as Rajbhandari et al. (2020, section 7)
     * count it: an all-gather or a reduce-scatter of E elements moves E, an
     * all-reduce 2E. A ring sends (dp-1)/dp of that volume from each rank. */
    uint64_t comm_elements, comm_bytes;
    uint32_t n_collectives;
} remat_replay_result;

/* Replays s against the analysis. Returns REMAT_OK with r->valid set either
 * way when the schedule was judged (invalid: r->fail_index and err's message
 * say which instruction and why, err->code = REMAT_ESCHEDULE); other codes
 * for ENOMEM, overflow (EOVERFLOW) or an observer's failure. extras and obs
 * may be NULL. O(instructions + refs read), no allocation per instruction. */
remat_status remat_replay(const remat_analysis *a, const remat_schedule *s, const remat_exec_extras *extras,
                          const remat_replay_observer *obs, remat_replay_result *r, remat_err *err);

void remat_replay_result_destroy(remat_replay_result *r);

/* ---- Stepping a replay ---------------------------------------------------
 *
 * The same replay, one instruction at a time, for a driver that decides the
 * next instruction from the state the previous ones left (dynamic eviction,
 * a runtime mirroring its allocator, collectives entering the step). Every
 * rule is remat_replay's: remat_replay(a, s, ...) is begin, apply for each
 * instruction of s, end. Evicting a tensor is applying FREE of it.
 *
 *     remat_replay_cursor *c;
 *     remat_replay_begin(a, NULL, NULL, &c, &err);
 *     remat_instr in = {REMAT_I_FWD, op};
 *     if (remat_replay_live(c, REMAT_CAT_MASK_ALL) + remat_replay_cost(c, in, REMAT_CAT_MASK_ALL) > limit)
 *         ... apply FREE of something first ...
 *     remat_replay_apply(c, in, &err);
 *     ...
 *     remat_replay_end(c, &r, &err);     // the implied OPT, then r as remat_replay fills it
 *     remat_replay_cursor_destroy(c);
 */

/* Category masks: bit c for remat_category c. */
#define REMAT_CAT_MASK_ALL ((1u << REMAT_CAT_COUNT) - 1u)
#define REMAT_CAT_MASK_ACTIVATION                                                                    \
    ((1u << REMAT_CAT_ACTIVATIONS) | (1u << REMAT_CAT_RECOMPUTED) | (1u << REMAT_CAT_ACTIVATION_GRADS) | \
     (1u << REMAT_CAT_WORKSPACE))

typedef struct remat_replay_cursor remat_replay_cursor;

/* Starts a replay: leaves and extras resident, nothing run. extras and obs
 * may be NULL (both are copied). *out owns the cursor (destroy it); NULL
 * on failure (REMAT_ENOMEM, or the observer's failure). O(tensors). */
remat_status remat_replay_begin(const remat_analysis *a, const remat_exec_extras *extras,
                                const remat_replay_observer *obs, remat_replay_cursor **out, remat_err *err);

/* Judges and applies one instruction. REMAT_ESCHEDULE when it is illegal
 * (err names it, as remat_replay's message does); after any failure the
 * cursor refuses further instructions, and remat_replay_end reports the
 * judged failure as remat_replay does (r->valid false). O(refs it reads). */
remat_status remat_replay_apply(remat_replay_cursor *c, remat_instr in, remat_err *err);

/* What applying `in` would add to the live bytes of the categories in mask
 * at its high-water mark (new outputs, gradients, the seed, workspace),
 * without applying it; sums saturate at 2^64-1. Meaningful for an
 * instruction apply would accept. O(refs of its op). */
uint64_t remat_replay_cost(remat_replay_cursor *c, remat_instr in, uint32_t mask);

/* Live bytes now in the categories of mask (O(1) for the two masks above);
 * by_category gets all REMAT_CAT_COUNT figures. */
uint64_t remat_replay_live(const remat_replay_cursor *c, uint32_t mask);
void remat_replay_live_by_category(const remat_replay_cursor *c, uint64_t *by_category);

/* 1 if tensor is resident now. */
int remat_replay_resident(const remat_replay_cursor *c, uint32_t tensor);

/* The result so far (peaks and FLOPs of the instructions applied); valid
 * stays false until remat_replay_end. Owned by the cursor. */
const remat_replay_result *remat_replay_progress(const remat_replay_cursor *c);

/* Ends the replay (the optimizer step is implied when no OPT was applied)
 * and moves the result to *r, exactly as remat_replay would have filled it
 * for the instructions applied; destroy *r. The cursor accepts nothing
 * more but must still be destroyed. */
remat_status remat_replay_end(remat_replay_cursor *c, remat_replay_result *r, remat_err *err);

/* Frees the cursor; NULL is accepted. */
void remat_replay_cursor_destroy(remat_replay_cursor *c);

/* ---- Sharded data parallel (graphs/README.md, "Sharded data parallel") ---
 *
 * A sharded replay measures ONE rank of dp data-parallel ranks. The
 * sharding names the units (the params gathered together: one unit per op
 * that is the first to read a param, holding the params it reads first;
 * or one per module prefix, cfg.wrap_depth / cfg.unit_prefixes)
 * and the gradient buckets (trainable params in order of gradient
 * completion, reverse forward order, filled up to the bucket size), and
 * what each rank keeps resident:
 *   stage 0 (DDP): every array whole; each bucket all-reduced (ALLREDUCE)
 *     once its gradients are complete;
 *   stage 1: optimizer state and master copy sharded (the ledger's lines);
 *     each bucket reduce-scattered (REDUCE_SCATTER); gradients stay whole;
 *     the flat bit16 group is padded to a multiple of 2 dp (DeepSpeed
 *     stage_1_and_2.py), its padding resident in params; after OPT every
 *     unit's updated weights are all-gathered;
 *   stage 2: as 1, and REDUCE_SCATTER frees the bucket's whole gradients
 *     into the rank's gradient partition (allocated at the first one:
 *     2 ceil(Psi / 2dp) elements, DeepSpeed's grads_in_partition);
 *   stage 3: as 2 (but the gradient partition, sum of ceil(e / dp), is
 *     resident from the start: stage3.py allocates it with the engine), and
 *     weights sharded per param (ceil(e / dp) elements of
 *     each, DeepSpeed partition_parameters.py pads each param to dp); a
 *     unit is gathered (ALLGATHER, category gathered_params, the padded
 *     whole) before a FWD, RECOMPUTE or BWD reads its params and released
 *     (RELEASE) after; a param of at most persist_threshold elements is
 *     persistent: resident gathered (its padded whole beside its partition,
 *     in params), never in a unit's gather, and all-gathered once after OPT
 *     (DeepSpeed stage3.py _post_step). Volumes count real elements, not
 *     the padding.
 *   PyTorch FSDP (cfg.fsdp; graphs/README.md, "PyTorch FSDP"): FULL_SHARD
 *     and SHARD_GRAD_OP are stage 3's residency with one flat parameter per
 *     unit (each rank ceil(E_u / dp) elements of it, gathered as dp of
 *     them), one REDUCE_SCATTER per unit, FSDP's hooks placing the gathers
 *     (src/exec/shard_fsdp.c); NO_SHARD is stage 0 with one ALLREDUCE
 *     per unit. Buffers (frozen params) are in no unit and stay whole. A
 *     RELEASE under FSDP holds the unit's buffer (the allocator cannot reuse
 *     it before the GPU passes the free): with limit_all_gathers an
 *     ALLGATHER that finds two or more held first reclaims the oldest, as
 *     torch's _FreeEventQueue waits on it; without it they stay to the end.
 * Rules the replay enforces (REMAT_ESCHEDULE naming the instruction):
 *   - stage 3: a FWD, RECOMPUTE or BWD that reads a param (input or saved)
 *     needs its unit gathered; RELEASE needs it gathered; ALLGATHER of a
 *     gathered unit is refused; a released unit is not read;
 *   - a bucket is reduced once, and only when every gradient in it is
 *     complete (every BWD that writes it has run);
 *   - OPT needs every bucket reduced; after OPT only the stage 1/2
 *     ALLGATHERs of updated weights, or stage 3's of persistent params,
 *     may follow;
 *   - a collective in a replay without a sharding, or of the wrong kind for
 *     the stage (ALLREDUCE at stages 1-3, REDUCE_SCATTER at stage 0), is
 *     refused.
 * remat_replay given a sharding and a schedule with no collectives inserts
 * them first (remat_schedule_shard) and replays that; with an observer it
 * refuses (REMAT_EINVAL: the observer's indices would not be the caller's
 * schedule's). */

/* PyTorch FSDP's sharding strategies (torch 1.13 fully_sharded_data_parallel.py
 * ShardingStrategy) and backward prefetch (BackwardPrefetch). */
typedef enum {
    REMAT_FSDP_OFF = 0,     /* not FSDP: DDP (stage 0) or DeepSpeed ZeRO by stage */
    REMAT_FSDP_FULL_SHARD,  /* gather before forward, free after, gather before backward, free, reduce-scatter */
    REMAT_FSDP_SHARD_GRAD_OP, /* gathered from a unit's forward through its backward; reduce-scatter */
    REMAT_FSDP_NO_SHARD     /* nothing sharded; each unit's gradient all-reduced (DDP's memory) */
} remat_fsdp_strategy;

typedef enum { REMAT_FSDP_PREFETCH_NONE = 0, REMAT_FSDP_BACKWARD_PRE, REMAT_FSDP_BACKWARD_POST } remat_fsdp_prefetch;

typedef struct remat_shard_config {
    uint32_t stage;                 /* ZeRO stage 0..3 (0 = plain data parallel, DDP); with fsdp set,
                                     * remat_sharding_init sets it (3, or 0 for NO_SHARD) */
    uint64_t dp;                    /* ranks, >= 2 */
    uint32_t elem_bytes;            /* bytes per element of params, gradients, collectives (2) */
    uint64_t bucket_elements;       /* gradient bucket (stage 0: 25 MiB / elem_bytes, DDP bucket_cap_mb;
                                     * 1-3: 5e8, DeepSpeed reduce_bucket_size) */
    uint64_t first_bucket_elements; /* stage 0: 1 MiB / elem_bytes (DDP's first bucket); else = bucket */
    uint64_t prefetch_elements;     /* stage 3: stage3_prefetch_bucket_size (5e7); 0: no prefetch */
    uint64_t max_live_elements;     /* stage 3: stage3_max_live_parameters (1e9) */
    uint64_t max_reuse_elements;    /* stage 3: stage3_max_reuse_distance; a unit is kept gathered after an
                                     * instruction when the schedule reads it again before this many elements
                                     * of other units' reads (0: released after each use, the section 7
                                     * model; DeepSpeed's default is 1e9, which a config file gets) */
    uint64_t persist_threshold;     /* stage 3: stage3_param_persistence_threshold; a param of at most this
                                     * many elements stays gathered the whole step (0: none; DeepSpeed's
                                     * default is 1e5) */
    int offload_optimizer;          /* stages 1-3: offload_optimizer {device: cpu}: the gradient partition is on
                                     * the host, so REDUCE_SCATTER frees the bucket's gradients (stage 1 too)
                                     * and allocates no partition on the device */
    /* PyTorch FSDP instead of DeepSpeed (graphs/README.md, "Sharded data
     * parallel", FSDP): one flat parameter per unit, padded to a multiple
     * of dp as a whole; one gradient reduction per unit. */
    remat_fsdp_strategy fsdp;
    remat_fsdp_prefetch backward_prefetch; /* torch 1.13's default: none */
    int forward_prefetch;           /* gather the next unit in forward order at a unit's pre-forward */
    int limit_all_gathers;          /* the rate limiter (_FreeEventQueue, 2 in flight); off: a released
                                     * buffer stays charged to the end of the step (no bound then) */
    /* Units (every stage): 0 and no prefixes: one per op that first reads a
     * param. wrap_depth N: one per module path cut to N components (ops of
     * shallower modules form the root unit). unit_prefixes: one per listed
     * module prefix, a param in the longest that matches its first reader's
     * module, the rest in the root unit. Both need ops' attrs.module. */
    uint32_t wrap_depth;
    const char *const *unit_prefixes;
    size_t n_unit_prefixes;
} remat_shard_config;

/* Sets the defaults above for stage and dp. */
void remat_shard_config_init(remat_shard_config *cfg, uint32_t stage, uint64_t dp);

struct remat_sharding {
    remat_shard_config cfg;
    const remat_analysis *a;
    uint32_t *unit_of;          /* per tensor: op owning the param's unit; REMAT_NONE for non-params */
    uint64_t *unit_elements;    /* per op: elements its unit gathers (padded per param to dp; persistent
                                 * params excluded) */
    uint64_t *unit_numel;       /* per op: the same unpadded, as DeepSpeed's prefetch and max-live
                                 * counters count them (ds_numel) */
    uint64_t *unit_persist_elements; /* per op: elements of its persistent params (stage 3) */
    uint8_t *persistent;        /* per tensor: 1 for a stage 3 param kept gathered (persist_threshold) */
    uint64_t *param_bytes;      /* per tensor: a param's resident bytes on the rank (stage 3: its
                                 * partition, plus the padded gathered whole when persistent) */
    uint64_t *unit_grad_elements; /* per op: elements of its unit's params with a gradient (unpadded) */
    uint32_t *bucket_of;        /* per tensor: bucket of a param with a gradient; REMAT_NONE otherwise */
    uint64_t *bucket_elements;  /* per bucket: elements of its params (unpadded) */
    uint32_t n_buckets;
    uint64_t psi;               /* trainable elements with a gradient (Psi) */
    uint64_t weight_bytes;      /* each rank's resident trainable weights */
    uint64_t frozen_bytes;      /* each rank's resident frozen params */
    uint64_t grad_partition_bytes; /* stages 2-3: each rank's gradient partition (stage 2: 2 ceil(Psi /
                                    * 2dp) elements, DeepSpeed's padded flat group; stage 3: the sum of
                                    * ceil(E / dp) over params) */
    uint64_t weight_pad_bytes;  /* stages 1-2: the padding of the flat bit16 group, in params */
    uint64_t persist_elements;  /* stage 3: elements of the persistent params */
    /* Elements each rank really owns of the flat partition (the last ranks'
     * padding holds no parameter); memory is the padded partition on every
     * rank, so every rank replays the same bytes. */
    uint64_t *rank_elements;    /* dp entries */
    /* Units by module (wrap_depth, unit_prefixes): the root unit's op, or
     * REMAT_NONE (FSDP does not free the root's params after forward). */
    uint32_t root_unit;
    uint32_t n_units;           /* units with params */
    uint64_t fsdp_shard_elements; /* FSDP: the rank's elements of the trainable units' flat params,
                                   * sum of ceil(E_u / dp) (flat_param.py _get_shard) */
};

/* Builds the sharding of a's graph. REMAT_EINVAL for a bad config (names
 * the field) or a param whose bytes are not whole elements (names it);
 * REMAT_EOVERFLOW; REMAT_ENOMEM. Destroy with remat_sharding_destroy (safe
 * after a failure). O(tensors + refs). */
remat_status remat_sharding_init(const remat_analysis *a, const remat_shard_config *cfg, remat_sharding *out,
                                 remat_err *err);
void remat_sharding_destroy(remat_sharding *sh);

/* Inserts the collectives of sh into the compute schedule in (FWD,
 * RECOMPUTE, BWD, FREE, OPT; an OPT is appended when absent): stage 3
 * gathers each unit before the instruction that reads it, then prefetches
 * the next units in the order the schedule reads them while the prefetched
 * elements are below min(max_live - gathered, prefetch)
 * (DeepSpeed partitioned_param_coordinator.py fetch_sub_module), and
 * releases a unit after an instruction unless the next param-reading
 * instruction of the same phase (forward: FWD; backward: BWD, RECOMPUTE)
 * reads it; a bucket is reduced right after the BWD that completes its last
 * gradient. out should be empty. O(instructions x units gathered). */
remat_status remat_schedule_shard(const remat_sharding *sh, const remat_schedule *in, remat_schedule *out,
                                  remat_err *err);

/* 1 if s contains a collective. */
int remat_schedule_has_collectives(const remat_schedule *s);

/* PyTorch's ZeroRedundancyOptimizer (torch 1.13,
 * torch/distributed/optim/zero_redundancy_optimizer.py, _partition_parameters):
 * whole params assigned to ranks, largest first (equal sizes in graph
 * order), each to the first rank with the fewest elements so far. Every
 * trainable (not frozen) param is in the one param group; a rank's
 * optimizer state covers its params that get a gradient. Weights and
 * gradients stay whole (DDP). */
typedef struct remat_zero_redundancy {
    uint64_t dp;
    uint32_t *rank_of;             /* per tensor: the rank that updates a trainable param; REMAT_NONE otherwise */
    uint64_t *rank_elements;       /* dp entries: elements assigned (torch's `sizes`) */
    uint64_t *rank_state_elements; /* dp entries: of those, elements with a gradient (state is made for them) */
    uint64_t *rank_temps;          /* dp entries: the rank's Adam temporaries, elements (remat_torch_adam_temporaries) */
    uint64_t *prev;                /* dp entries: scratch, the last param with a gradient given to each rank */
    uint32_t largest_rank;         /* most state elements; the lowest such rank on a tie */
} remat_zero_redundancy;

/* Assigns a's trainable params (bytes / elem_bytes elements each) to dp
 * ranks. REMAT_EINVAL for dp < 2 or a param that is not whole elements
 * (names it); REMAT_EOVERFLOW; REMAT_ENOMEM. Destroy with
 * remat_zero_redundancy_destroy (safe after a failure, and on NULL).
 * O(P log P + P x dp) for P params. */
remat_status remat_zero_redundancy_init(const remat_analysis *a, uint64_t dp, uint32_t elem_bytes,
                                        remat_zero_redundancy *out, remat_err *err);
void remat_zero_redundancy_destroy(remat_zero_redundancy *z);

/* The temporaries of torch 1.13's single-tensor Adam/AdamW step over a's
 * trainable params with a gradient, in the graph's order (the exporter
 * writes model.parameters()'s): max over i of 2 e_i + e_(i-1) elements,
 * e = bytes / elem_bytes (torch/optim/adam.py: a param's sqrt and quotient
 * are live with the previous param's denom). Saturates at UINT64_MAX.
 * O(tensors). */
uint64_t remat_torch_adam_temporaries(const remat_analysis *a, uint32_t elem_bytes);

/* Default policy: keep[t] = 1 keeps activation t resident until its last
 * backward need; 0 frees it after its last forward use and recomputes it
 * (recursively, from resident ancestors) before the first backward step
 * that saves it. Outputs of non-recomputable ops are always kept. Appends
 * to out (which should be empty). O(instructions emitted + refs). */
remat_status remat_schedule_from_keep(const remat_analysis *a, const uint8_t *keep, remat_schedule *out,
                                      remat_err *err);

/* The store-all schedule: every activation kept. */
remat_status remat_schedule_store_all(const remat_analysis *a, remat_schedule *out, remat_err *err);

/* ---- Numeric replay (README, "Numeric mode"; src/train/numeric.c) ----------
 *
 * remat_numeric_replay executes a schedule on real memory so that a plan is
 * proved, not just accounted. It first runs remat_replay (the judge: an
 * invalid schedule stops here), then walks the schedule again with its own
 * buffers and its own allocator:
 *   - every storage (non-view tensor) gets a buffer of ceil(bytes / scale)
 *     bytes, allocated when FWD/RECOMPUTE produces it and freed when FREE
 *     releases the last resident tensor of that storage (views share their
 *     base's buffer); inputs and params are filled once, deterministically;
 *   - every forward op runs a kernel whose output bytes are a keyed stream
 *     seeded by BLAKE2b over the op id, the output index and every byte of
 *     every input, in input order; each backward step seeds each distinct
 *     differentiable input's contribution from the op id, the input's slot,
 *     the output gradients and the saved tensors, and adds it into the
 *     gradient buffer (ceil(logical_bytes / scale) bytes) by wrapping
 *     byte-wise addition, so accumulation order cannot change the result;
 *     gradients follow remat_replay's rules (seed at the first BWD, an
 *     activation's gradient freed after its producer's BWD, param and input
 *     gradients kept to the end);
 *   - workspace is a real buffer of ceil(workspace / scale) bytes held while
 *     the op runs.
 * Checks: the first computation of every storage-owning activation records
 * a BLAKE2b-256 digest and every RECOMPUTE must reproduce it bit for bit;
 * the allocator's high-water mark of live bytes must equal the accounted
 * peak of the scaled sizes. That scaled peak is computed from remat_replay's
 * own allocation events (an observer): each allocation counts
 * ceil(bytes / scale), and a step's high-water mark is the scaled live bytes
 * after its allocations plus ceil(step workspace / scale). At scale 1 the
 * allocator must also equal remat_replay's peak_bytes itself. Views are not
 * hashed on recompute: they own no bytes, and the bytes they alias are
 * checked when their owner is rebuilt.
 *
 * The parameter-gradient hash is BLAKE2b-256 over every parameter that has
 * a gradient, in tensor order (id, length, bytes). It is the same for every
 * valid schedule of a graph at a given scale, and changes with the graph
 * (sizes, wiring, ids) and with the scale.
 *
 *     remat_numeric_result nr;
 *     if (remat_numeric_replay(a, &s, 1, &nr, &err) == REMAT_OK && nr.verified)
 *         printf("%s\n", nr.param_grad_hash_hex);
 *     remat_numeric_result_destroy(&nr);
 */
typedef struct remat_numeric_result {
    remat_replay_result replay;  /* the accounting replay of the schedule (owned) */
    bool ran;                    /* the schedule was valid and was executed numerically */
    bool verified;               /* ran, no mismatch, and allocator peak == scaled accounted peak */
    uint64_t scale;
    uint64_t recomputed_tensors_checked; /* storage-owning outputs rebuilt by RECOMPUTE and compared */
    uint64_t mismatches;
    size_t first_mismatch_index;         /* instruction of the first mismatch (when mismatches > 0) */
    uint32_t first_mismatch_tensor;
    uint32_t param_grads_hashed;         /* parameters whose gradient is in the hash */
    uint8_t param_grad_hash[32];
    char param_grad_hash_hex[65];
    uint64_t allocator_peak_bytes;       /* the numeric allocator's high-water mark */
    uint64_t accounted_peak_bytes_scaled;
    bool equal;                          /* allocator_peak_bytes == accounted_peak_bytes_scaled
                                          * (and == replay.peak_bytes at scale 1) */
    uint64_t peak_rss_bytes;             /* getrusage ru_maxrss of the whole process so far */
    double wall_seconds;                 /* the numeric execution (CLOCK_MONOTONIC), not the accounting pass */
} remat_numeric_result;

/* Replays s for accounting, then numerically at 1/scale size (scale >= 1).
 * Returns REMAT_OK when the schedule was judged and, if valid, executed:
 *   - out->replay.valid false: invalid schedule; err as from remat_replay
 *     (REMAT_ESCHEDULE, the instruction and why); nothing ran numerically;
 *   - out->ran and !out->verified: a recomputed tensor differed from its
 *     first computation (err names the first one, its instruction and both
 *     digests) or the allocator disagreed with the accounting (err gives
 *     both figures); err->code is REMAT_EINTERNAL in both cases, since
 *     deterministic kernels make either a bug in remat.
 * Other codes: REMAT_EINVAL (scale 0), REMAT_ENOMEM (a buffer could not be
 * allocated: the message names the tensor and suggests a larger scale),
 * REMAT_EOVERFLOW. out is always safe to destroy. Cost: O(instructions +
 * refs) plus time linear in the bytes hashed and written (each op reads its
 * inputs once and writes and hashes its outputs once); memory: the live
 * scaled buffers plus 32 bytes per tensor. */
remat_status remat_numeric_replay(const remat_analysis *a, const remat_schedule *s, uint64_t scale,
                                  remat_numeric_result *out, remat_err *err);

/* Frees what out owns (its replay result). Accepts NULL. */
void remat_numeric_result_destroy(remat_numeric_result *out);

/* ---- end of numeric replay ---------------------------------------------- */

#ifdef __cplusplus
}
#endif
#endif

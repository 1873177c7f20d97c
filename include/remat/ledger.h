/*
 * remat/ledger.h - the training-state ledger: the persistent and per-step
 * state of one device, category by category (DESIGN section 7).
 *
 * A memory estimate must state its optimizer, precision and sharding. The
 * ledger never multiplies a parameter count by one bytes-per-parameter
 * constant: each array (weights, gradients, optimizer state, master weights,
 * frozen copies) has its own stored precision and its own sharding rule, and
 * communication buffers, workspace and a fragmentation reserve are explicit
 * byte lines, never a factor. Every choice it made is written down as an
 * assumption string, and everything it does not count as an exclusion.
 *
 *     remat_ledger_config cfg;
 *     remat_ledger_config_init(&cfg);           // f32 weights, adam, ZeRO 0
 *     cfg.weights = REMAT_LEDGER_DT_BF16;       // grads and states follow
 *     cfg.states = REMAT_LEDGER_DT_F32;
 *     cfg.master = REMAT_LEDGER_DT_F32;
 *     remat_ledger_result r;
 *     if (remat_ledger_from_count(&cfg, 1000000000, &r, &err) != REMAT_OK) { ...err.msg... }
 *     printf("%llu B\n", (unsigned long long)r.total_bytes);   // 16000000000
 *
 * Parameter elements come either from a count (remat_ledger_from_count) or
 * from a loaded graph (remat_ledger_from_graph): each param's element count
 * is its shape's product, or its bytes divided by the size of its own dtype
 * (both must agree when both are given); a param with neither is counted in
 * the weight precision and the result says so. Frozen params of a graph are
 * weights only (category "frozen": no gradient, no optimizer state).
 *
 * All arithmetic is uint64_t with overflow checks (REMAT_EOVERFLOW naming
 * the term and its option). The result is a plain value in caller storage:
 * no heap memory, nothing to destroy.
 *
 * For the executor: the categories map onto DESIGN section 4's as weights =
 * params (trainable), gradients = param_grads, and the rest by name. Every
 * category except gradients is resident for the whole step; gradients grow
 * during backward: remat_ledger_bytes_at() answers "persistent bytes of this
 * category at an instant when this many gradient elements exist", and
 * remat_ledger_param_elements() gives each param's element count so a replay
 * can add a param's gradient at its grad_birth step. When the ledger comes
 * from the replayed graph, its weights and frozen lines replace the graph's
 * own param bytes (they describe the same arrays, in the training precision).
 */
#ifndef REMAT_LEDGER_H
#define REMAT_LEDGER_H

#include "remat/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Stored precisions. AUTO and NONE appear only in a config: AUTO means "the
 * field's documented default rule", NONE means "no such array" (master). */
typedef enum {
    REMAT_LEDGER_DT_AUTO = 0,
    REMAT_LEDGER_DT_NONE,
    REMAT_LEDGER_DT_F64,
    REMAT_LEDGER_DT_F32,
    REMAT_LEDGER_DT_TF32, /* a compute mode: stored as a 4-byte f32 */
    REMAT_LEDGER_DT_BF16,
    REMAT_LEDGER_DT_F16,
    REMAT_LEDGER_DT_F8_E4M3,
    REMAT_LEDGER_DT_F8_E5M2,
    REMAT_LEDGER_DT_INT8,
    REMAT_LEDGER_DT_UINT8,
    REMAT_LEDGER_DT_COUNT
} remat_ledger_dtype;

typedef enum {
    REMAT_LEDGER_SGD,       /* no state */
    REMAT_LEDGER_MOMENTUM,  /* 1 state: the momentum buffer */
    REMAT_LEDGER_ADAM,      /* 2 states: first and second moment */
    REMAT_LEDGER_ADAMW,     /* 2 states, as Adam */
    REMAT_LEDGER_LION,      /* 1 state: the momentum */
    REMAT_LEDGER_ADAFACTOR, /* factored second moment (+ first moment if adafactor_beta1) */
    REMAT_LEDGER_ADAM8BIT,  /* 2 one-byte states + one f32 scale per block per state */
    REMAT_LEDGER_OPTIMIZER_COUNT
} remat_ledger_optimizer;

/* Where Adam's `step` counter lives (Adam and AdamW only; the other
 * optimizers keep none, or a Python number):
 *   HOST: torch.optim.Adam/AdamW in PyTorch 1.13 with capturable=False (the
 *     default) keep torch.tensor(0.), a 4-byte f32 tensor on the CPU, per
 *     tensor the optimizer steps: on the host line, not on the device;
 *   DEVICE: capturable=True or fused=True put that 4-byte tensor on the
 *     param's device (and so does training on the CPU): in optimizer_state;
 *   NONE: DeepSpeed's FusedAdam and DeepSpeedCPUAdam keep a Python int
 *     (deepspeed/ops/adam/fused_adam.py, cpu_adam.py): no tensor.
 * The tensors the optimizer steps: every trainable param without ZeRO; one
 * flat fp32 partition per rank at stages 1-2 (stage_1_and_2.py hands the
 * optimizer single_partition_of_fp32_groups, one per param group: remat
 * has one group); one per sub group at stage 3 (stage3.py
 * _create_fp16_sub_groups: partitions added until sub_group_size). */
typedef enum {
    REMAT_LEDGER_STEP_HOST = 0,
    REMAT_LEDGER_STEP_DEVICE,
    REMAT_LEDGER_STEP_NONE
} remat_ledger_step;

/* The ledger's lines, in report order. Names ("weights", "gradients",
 * "optimizer_state", "master_weights", "frozen", "comm_buffers", "workspace",
 * "fragmentation_reserve") are the JSON keys. */
typedef enum {
    REMAT_LEDGER_WEIGHTS,
    REMAT_LEDGER_GRADIENTS,
    REMAT_LEDGER_OPTIMIZER_STATE,
    REMAT_LEDGER_MASTER_WEIGHTS,
    REMAT_LEDGER_FROZEN,
    REMAT_LEDGER_COMM_BUFFERS,
    REMAT_LEDGER_WORKSPACE,
    REMAT_LEDGER_FRAGMENTATION_RESERVE,
    REMAT_LEDGER_CATEGORY_COUNT
} remat_ledger_category;

#define REMAT_LEDGER_DEFAULT_BLOCK 2048    /* bitsandbytes' blockwise quantization block */
#define REMAT_LEDGER_DEFAULT_MIN_8BIT 4096 /* bitsandbytes' min_8bit_size */

/* What to budget. Caller storage; remat_ledger_config_init sets every field
 * to its default, written after each field. */
typedef struct remat_ledger_config {
    remat_ledger_dtype weights; /* AUTO: the graph params' common dtype, else f32 */
    remat_ledger_dtype grads;   /* AUTO: like the weights (PyTorch's zeros_like(param)) */
    remat_ledger_dtype states;  /* AUTO: like the weights; adam8bit always stores 1-byte states */
    remat_ledger_dtype master;  /* AUTO = NONE: no master copy */
    remat_ledger_dtype comm;    /* AUTO: like the gradients; the collectives' dtype */
    remat_ledger_optimizer optimizer; /* ADAM */
    bool adafactor_beta1;       /* false: Adafactor keeps no first moment (its default, beta1 = None) */
    uint64_t block;             /* 2048: adam8bit elements per f32 scale */
    uint64_t min_8bit;          /* 4096: adam8bit keeps f32 states for smaller tensors (0: never) */
    uint64_t frozen_copies;     /* 0: whole-model copies of the weights (reference, teacher) */
    uint32_t zero_stage;        /* 0..3 */
    uint64_t dp;                /* 0 = not given: one device; stages 1-3 then refuse */
    uint64_t bucket_bytes;      /* 0: communication bucket size in bytes ... */
    uint64_t bucket_elements;   /* 0: ... or in elements of the comm dtype (at most one nonzero) */
    uint64_t prefetch;          /* 0: buckets resident besides the one in flight */
    uint64_t persist_threshold; /* 0: ZeRO 3 stage3_param_persistence_threshold in elements; a param of at
                                 * most this many stays gathered (DeepSpeed's default is 1e5) */
    remat_ledger_step step;     /* HOST: where Adam's step counters live (see remat_ledger_step) */
    uint64_t sub_group;         /* 1e9: ZeRO 3 sub_group_size, elements of partitions per optimizer group */
    bool bucket_uncapped;       /* false: a bucket above the model is capped at it; true: counted whole, as
                                 * DeepSpeed allocates its reduce buffer of reduce_bucket_size elements */
    bool offload_optimizer;     /* false: ZeRO 1-3 offload_optimizer {device: cpu}: optimizer state, master
                                 * and the gradient partition live on the host (see remat_ledger_result) */
    uint64_t workspace;         /* 0: framework workspace bytes (cuBLAS, NCCL, ...) */
    uint64_t reserve;           /* 0: allocator fragmentation reserve bytes */
} remat_ledger_config;

/* One category on one device: the stored elements (after sharding) and
 * their bytes. dtype is NONE for byte-only lines (workspace, reserve) and
 * for absent arrays. */
typedef struct remat_ledger_line {
    uint64_t elements;
    uint64_t bytes;
    remat_ledger_dtype dtype;
} remat_ledger_line;

#define REMAT_LEDGER_MAX_NOTES 24
#define REMAT_LEDGER_NOTE_LEN 320

typedef struct remat_ledger_result {
    /* The resolved configuration (no AUTO left). */
    remat_ledger_optimizer optimizer;
    uint32_t zero_stage;
    uint64_t dp;                 /* >= 1 */
    uint64_t trainable_elements; /* Psi: elements that get a gradient (unsharded) */
    uint64_t frozen_elements;    /* elements of the graph's frozen params (unsharded) */
    /* The lines, per device. */
    remat_ledger_line weights, gradients, optimizer_state, master_weights, frozen;
    remat_ledger_line comm_buffers, workspace, fragmentation_reserve;
    uint64_t total_bytes;        /* sum of the eight lines' bytes */
    /* Host memory of this rank (not in total_bytes, which is the device's):
     * Adam's step counters (HOST), and with offload_optimizer the optimizer
     * state, the master copy and the gradient partition (stages 1-2: f32,
     * DeepSpeed's single_partition_of_fp32_groups[i].grad; stage 3: in the
     * gradients' precision, grad_partitions_flat_buffer), whose device lines
     * are then 0. host.elements counts their elements, host.dtype is NONE. */
    remat_ledger_line host;
    uint64_t step_tensors;       /* tensors the optimizer steps (Adam's step counters) */
    /* Offload transfers per step (not collectives): the gradient partition
     * down to the host, the updated weight partition back up. */
    uint64_t offload_elements, offload_bytes;
    /* Communication per step per device (not memory: not in total_bytes). */
    uint64_t comm_elements, comm_bytes;
    remat_ledger_dtype comm_dtype;
    char source[128];            /* "--params 1000000000" or "graph mlp423" */
    uint32_t n_assumptions, n_excluded;
    char assumptions[REMAT_LEDGER_MAX_NOTES][REMAT_LEDGER_NOTE_LEN];
    char excluded[REMAT_LEDGER_MAX_NOTES][REMAT_LEDGER_NOTE_LEN];
} remat_ledger_result;

/* Sets every field to its default (see remat_ledger_config). */
void remat_ledger_config_init(remat_ledger_config *cfg);

/* Budgets n trainable parameter elements laid out as one flat tensor.
 * Adafactor needs shapes: REMAT_EINVAL ("cannot factor without shapes").
 * Fails with REMAT_EINVAL for a bad config (names the option), with
 * REMAT_EOVERFLOW when a term exceeds 2^64-1 bytes. O(1). */
remat_status remat_ledger_from_count(const remat_ledger_config *cfg, uint64_t n, remat_ledger_result *out,
                                     remat_err *err);

/* Budgets the params of g (trainable and frozen). REMAT_EGRAPH when a param's
 * dtype is unknown, its bytes do not match its shape and dtype, or (for
 * Adafactor) a trainable param has no shape; REMAT_EINVAL when the params
 * disagree on a dtype and cfg->weights is AUTO. O(params). */
remat_status remat_ledger_from_graph(const remat_ledger_config *cfg, const remat_graph *g,
                                     remat_ledger_result *out, remat_err *err);

/* Element count of param tensor t of g: its shape's product, or its bytes /
 * the size of its own dtype; with neither, bytes / the size of `fallback`
 * (pass the result's weights.dtype). REMAT_EGRAPH names the param. O(ndim). */
remat_status remat_ledger_param_elements(const remat_graph *g, uint32_t t, remat_ledger_dtype fallback,
                                         uint64_t *out, remat_err *err);

/* The line of category c; NULL for an out-of-range c. */
const remat_ledger_line *remat_ledger_line_of(const remat_ledger_result *r, remat_ledger_category c);

/* Bytes of category c resident at an instant when grad_elements of the
 * r->trainable_elements gradient elements exist (0 during forward, all of
 * them at the optimizer step; values above are clamped). Every category but
 * gradients is constant; gradients are grad_elements (divided by dp, rounded
 * up, from ZeRO stage 2) in their precision, reaching r->gradients.bytes at
 * the end. O(1); cannot overflow (bounded by the computed line). */
uint64_t remat_ledger_bytes_at(const remat_ledger_result *r, remat_ledger_category c, uint64_t grad_elements);

/* Text (a table with exact bytes, GiB (2^30) and GB (10^9) per line, then
 * communication, assumptions and exclusions) or JSON:
 *   {"source", "optimizer", "zero_stage", "dp", "params": {"trainable", "frozen"},
 *    "dtypes": {...}, "categories": {name: bytes, ...}, "elements": {name: elements, ...},
 *    "communication": {"elements_per_step", "bytes_per_step", "dtype"},
 *    "host": {"elements", "bytes", "step_tensors"}, "offload": {"elements_per_step", "bytes_per_step"},
 *    "total_bytes", "assumptions": [...], "excluded": [...]}
 * Returns a NUL-terminated string the caller frees with remat_free; NULL
 * with REMAT_ENOMEM. O(1). */
char *remat_ledger_format(const remat_ledger_result *r, bool json, size_t *len, remat_err *err);

/* Precision names. parse accepts the canonical names (f64 f32 tf32 bf16 f16
 * f8_e4m3 f8_e5m2 int8 uint8) and aliases (float64, fp32, double, half,
 * bfloat16, fp8_e4m3, e5m2, i8, u8, ...), case-insensitively, plus "none";
 * REMAT_EINVAL names `what` and lists the canonical names. */
remat_status remat_ledger_dtype_parse(const char *name, const char *what, remat_ledger_dtype *out,
                                      remat_err *err);
const char *remat_ledger_dtype_name(remat_ledger_dtype dt); /* "f64", "none", "auto" */
uint32_t remat_ledger_dtype_size(remat_ledger_dtype dt);    /* bytes per element; 0 for AUTO/NONE */

remat_status remat_ledger_optimizer_parse(const char *name, const char *what, remat_ledger_optimizer *out,
                                          remat_err *err);
const char *remat_ledger_optimizer_name(remat_ledger_optimizer o);
/* Full-size state arrays per element (sgd 0, momentum 1, adam 2, adamw 2,
 * lion 1, adam8bit 2); Adafactor's are shape-dependent: 0 here. */
uint32_t remat_ledger_optimizer_states(remat_ledger_optimizer o);

const char *remat_ledger_category_name(remat_ledger_category c);

/* Parses a parameter count: "423", "1000000000", "7B", "1.5B", "175e9",
 * "70M", "8k", "2T" (k = 10^3, M = 10^6, B or G = 10^9, T = 10^12,
 * case-insensitive; here B means billion, not bytes). The value must be a
 * whole number; REMAT_EINVAL or REMAT_EOVERFLOW names `what`. */
remat_status remat_ledger_parse_count(const char *s, const char *what, uint64_t *out, remat_err *err);

/* ---- A DeepSpeed JSON config, read as options ---------------------------
 *
 * remat_ledger_ds_read reads the keys of a DeepSpeed config file that decide
 * a rank's memory (deepspeed/runtime/zero/config.py, offload_config.py, the
 * engine's fp16/bf16/optimizer sections) into plain values, each with the
 * default DeepSpeed gives an absent key; `has` says which keys the file
 * gave. Keys that change nothing remat models (scheduler, logging, loss
 * scaling, gradient clipping, ...) are accepted; a key remat does not know,
 * a value of the wrong type, "auto" (the Hugging Face Trainer fills it in)
 * and settings remat cannot model (NVMe offload, partial offload, ZeRO++
 * quantization and hpZ, MiCS) are refused with the key's JSON path. The
 * command line maps the values onto the ledger and sharding options; flags
 * given beside the file win. */
typedef struct remat_ds_config {
    uint32_t has;                   /* REMAT_DS_HAS_* bits */
    uint32_t stage;                 /* zero_optimization.stage (0) */
    uint64_t reduce_bucket_size;    /* 5e8 elements */
    uint64_t allgather_bucket_size; /* 5e8 elements */
    uint64_t prefetch_bucket_size;  /* stage3_prefetch_bucket_size, 5e7 */
    uint64_t max_live_parameters;   /* stage3_max_live_parameters, 1e9 */
    uint64_t max_reuse_distance;    /* stage3_max_reuse_distance, 1e9 */
    uint64_t persistence_threshold; /* stage3_param_persistence_threshold, 1e5 */
    uint64_t sub_group_size;        /* 1e9 */
    bool contiguous_gradients;      /* true: the reduce (ipg) buffer of reduce_bucket_size is allocated */
    bool overlap_comm;              /* stage 3: true, else false: two ipg buffers at stages 1-2 */
    bool offload_optimizer;         /* offload_optimizer.device == "cpu" */
    bool offload_param;             /* offload_param.device == "cpu" (stage 3) */
    remat_ledger_dtype weights;     /* bf16 or f16 when enabled, else f32 */
    remat_ledger_dtype comm;        /* communication_data_type; AUTO when absent */
    remat_ledger_optimizer optimizer; /* optimizer.type (Adam: adam) */
    remat_ledger_step step;         /* NONE (FusedAdam, DeepSpeedCPUAdam); HOST with torch_adam */
    uint64_t micro_batch;           /* train_micro_batch_size_per_gpu; 0 when absent */
    /* activation_checkpointing */
    bool partition_activations, cpu_checkpointing, contiguous_memory_optimization;
    bool synchronize_checkpoint_boundary, profile;
    uint64_t number_checkpoints;    /* 0 when absent (null) */
} remat_ds_config;

#define REMAT_DS_HAS_STAGE (1u << 0)
#define REMAT_DS_HAS_REDUCE_BUCKET (1u << 1)
#define REMAT_DS_HAS_PREFETCH (1u << 2)
#define REMAT_DS_HAS_MAX_LIVE (1u << 3)
#define REMAT_DS_HAS_PERSISTENCE (1u << 4)
#define REMAT_DS_HAS_PRECISION (1u << 5)     /* fp16 or bf16 enabled */
#define REMAT_DS_HAS_OPTIMIZER (1u << 6)
#define REMAT_DS_HAS_ACTIVATION_CKPT (1u << 7)
#define REMAT_DS_HAS_SUB_GROUP (1u << 8)
#define REMAT_DS_HAS_ALLGATHER_BUCKET (1u << 9)
#define REMAT_DS_HAS_MAX_REUSE (1u << 10)

/* Parses a DeepSpeed config from text[0..len) (named source in messages).
 * REMAT_EPARSE for text that is not JSON (line:column), and naming the key's
 * path ("zero_optimization.offload_optimizer.device", also in err->loc.path)
 * for a key or value refused as above; REMAT_ENOMEM. O(len). */
remat_status remat_ledger_ds_read(const char *text, size_t len, const char *source, remat_ds_config *out,
                                  remat_err *err);

/* What a plan sets in a DeepSpeed config (remat_ledger_ds_write). */
typedef struct remat_ds_settings {
    uint32_t stage;
    uint64_t reduce_bucket_size;    /* 0: leave the file's */
    uint64_t prefetch_bucket_size, max_live_parameters, max_reuse_distance, persistence_threshold, sub_group_size;
    bool offload_optimizer;
    uint64_t number_checkpoints;    /* activation_checkpointing.number_checkpoints; 0: null */
} remat_ds_settings;

/* The config text[0..len) again, every key it had kept, with the settings
 * written over zero_optimization (stage, reduce_bucket_size, the stage 3
 * knobs, offload_optimizer.device) and activation_checkpointing
 * (number_checkpoints; partition_activations and cpu_checkpointing false:
 * remat plans neither). A key given under DeepSpeed's other spelling
 * (prefetch_bucket_size for stage3_prefetch_bucket_size, ...) is replaced,
 * not doubled. *out (remat_free) is the JSON, NUL-terminated, *out_len its
 * length. Errors as remat_ledger_ds_read, plus REMAT_ENOMEM. O(len). */
remat_status remat_ledger_ds_write(const char *text, size_t len, const char *source, const remat_ds_settings *set,
                                   char **out, size_t *out_len, remat_err *err);

#ifdef __cplusplus
}
#endif
#endif

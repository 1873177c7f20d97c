/*
 * remat/gen.h - synthetic graphs: chains, random layered DAGs, residual
 * networks, transformer stacks and U-Nets, written as remat-graph JSON.
 *
 * The generator exists for tests and benchmarks: every family is a pure
 * function of its options, randomness comes from a self-contained splitmix64
 * stream seeded by `seed` (never rand()), so the same options give the same
 * bytes on every machine. Every graph it writes loads and analyzes: one loss
 * tensor named "loss" as the only output, at least one trainable param, every
 * op on a path to the loss. The model families use real byte sizes (shape x
 * bytes per element) and FLOPs (2*m*n*k for a matmul), so a planner's answer on
 * them can be compared with published activation-memory formulas.
 *
 *     remat_gen_opts o;
 *     remat_gen_opts_init(&o, REMAT_GEN_TRANSFORMER);
 *     o.layers = 4;
 *     size_t len;
 *     char *json = remat_gen_json(&o, &len, &err);
 *     if (!json) { ...err.msg names the option... }
 *     remat_graph_load_json(json, len, "gen", &g, &err);
 *     remat_free(json);
 *
 * The families, op counts in closed form, and what each op saves:
 *
 *   chain        `ops` ops in a line from input x; op i reads the previous
 *                activation and, every `param_every` ops, its own param; each
 *                op saves its inputs. The last op is "loss". Equal sizes and
 *                costs, or with `random` uniform in [bytes, max_bytes] and
 *                [flops, max_flops].                        ops = n
 *   layered      `layers` layers of `width` ops; an op reads `fan_in` distinct
 *                ops of the layer before (always including the one in its own
 *                column, so every op reaches the loss) and its layer's param;
 *                a "sum" loss reads the last layer. Random sizes and costs.
 *                                                           ops = width*layers + 1
 *   resnet       stem conv-bn-relu, `blocks` residual blocks conv-bn-relu-
 *                conv-bn-add-relu, global pool, flatten, fc, loss. Batchnorm is
 *                one op with three outputs (out, mean, invstd) whose backward
 *                saves its input, weight, mean and invstd; the input reshape and
 *                the flatten are views.                     ops = 7*blocks + 8
 *   transformer  embedding, `layers` pre-LN blocks (layernorm with mean/rstd
 *                outputs, QKV matmul split into three views, scores, softmax
 *                saving its output, attention-over-values, output projection,
 *                residual add, layernorm, fc1, gelu, fc2, residual add), final
 *                layernorm, logits, cross-entropy. No dropout. Per layer the
 *                saved activations are 16*p*s*b*h + p*a*s^2*b bytes plus
 *                16*s*b bytes of fp32 layernorm statistics (Korthikanti et
 *                al.'s 34*s*b*h + 5*a*s^2*b at p = 2, less the dropout masks
 *                and dropout outputs).                      ops = 15*layers + 4
 *                With `dropout`, Megatron's three dropouts per layer (on the
 *                attention probabilities, after the output projection, after
 *                fc2) each output the dropped tensor and a 1-byte mask and
 *                save only the mask; attention-over-values then reads (and
 *                saves) the dropped probabilities. The saved activations are
 *                then (16*p + 2)*s*b*h + (2*p + 1)*a*s^2*b + 16*s*b bytes per
 *                layer: exactly Korthikanti et al.'s s*b*h*(34 + 5*a*s/h) at
 *                p = 2, plus the layernorm statistics the paper leaves out as
 *                small buffers.                             ops = 18*layers + 4
 *                With `tp` = t > 1, one rank of Megatron-LM tensor
 *                parallelism: QKV and fc1 split by columns, W_o and fc2 by
 *                rows, a/t heads, the collectives as ops (tp_copy and an
 *                in-place all_reduce per parallel region; with `sp`,
 *                all_gather and reduce_scatter, the sequence split t ways
 *                outside them); `selective` fuses the attention core into
 *                one checkpointed core_attention op. Saved bytes per layer
 *                are then Korthikanti et al.'s Table 2 (graphs/README.md,
 *                "Tensor-parallel ranks and pipeline stages").
 *                With `vocab_parallel` (t > 1) the embedding and the head
 *                hold V/t rows each (Megatron's VocabParallelEmbedding
 *                and parallel_lm_logits): the embedding's partial output
 *                is all-reduced in place (reduce-scattered with `sp`),
 *                the head reads the final layernorm through f, the logits
 *                are (s, b, V/t) and the loss is a
 *                vocab_parallel_cross_entropy whose three fp32 all-reduces
 *                per token its attrs name.
 *                                 ops += 4*layers (t > 1), + 2 (sp),
 *                                        + 2 (vocab_parallel without sp),
 *                                        - 3*layers (selective; 2 without dropout)
 *   unet         `depth` encoder levels (conv-relu-conv-relu, max-pool with an
 *                indices output), a bottleneck, `depth` decoder levels
 *                (transposed conv, concat with the encoder's long skip,
 *                conv-relu-conv-relu), a 1x1 head and an MSE loss.
 *                                                           ops = 11*depth + 6
 *
 * Ids are short ("t123", "w7") in chain and layered so that 10^6-op graphs
 * stay small; the model families use readable ids ("l3_qkv", "b2_bn1").
 */
#ifndef REMAT_GEN_H
#define REMAT_GEN_H

#include "remat/util.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    REMAT_GEN_CHAIN,
    REMAT_GEN_LAYERED,
    REMAT_GEN_RESNET,
    REMAT_GEN_TRANSFORMER,
    REMAT_GEN_UNET
} remat_gen_family;

#define REMAT_GEN_FAMILY_COUNT 5

/* Each field is named after the `remat gen` option that sets it, and error
 * messages name the option. A field a family does not use is ignored. */
typedef struct remat_gen_opts {
    remat_gen_family family;
    const char *name;      /* --name; NULL: family and size ("chain16", "transformer4") */
    uint64_t seed;         /* --seed: chain with `random`, and layered */

    /* chain */
    uint32_t ops;          /* --ops (>= 1) */
    uint32_t param_every;  /* --param-every: op i (1-based) reads a param when (i-1) % k == 0 */
    bool random;           /* --random: sizes and costs drawn per op */
    /* chain and layered */
    uint64_t bytes;        /* --bytes: each activation's bytes (the minimum when random) */
    uint64_t max_bytes;    /* --max-bytes: the maximum when random; 0 = 4 * bytes */
    uint64_t flops;        /* --flops: each op's forward FLOPs (the minimum when random) */
    uint64_t max_flops;    /* --max-flops: 0 = 4 * flops */
    uint64_t param_bytes;  /* --param-bytes: each param's bytes; 0 = bytes */
    /* layered (and transformer: `layers`) */
    uint32_t width;        /* --width */
    uint32_t layers;       /* -L/--layers */
    uint32_t fan_in;       /* --fan-in (1..width) */

    /* resnet, transformer, unet */
    uint32_t batch;        /* -b/--batch (the micro-batch for transformer) */
    uint32_t elem_bytes;   /* --elem-bytes: bytes per element (2 for transformer, 4 for resnet/unet) */
    /* resnet and unet */
    uint32_t blocks;       /* --blocks (resnet) */
    uint32_t depth;        /* --depth (unet) */
    uint32_t channels;     /* --channels: resnet width, unet base channels (doubling per level) */
    uint32_t size;         /* --size: spatial height = width of the input image */
    uint32_t in_channels;  /* --in-channels */
    uint32_t classes;      /* --classes: resnet classes, unet output channels */
    /* transformer (Megatron names) */
    uint32_t seq;          /* -s/--seq: sequence length s */
    uint32_t hidden;       /* -h/--hidden: hidden size h */
    uint32_t heads;        /* -a/--heads: attention heads a (must divide h) */
    uint32_t vocab;        /* --vocab */
    bool dropout;          /* --dropout: Megatron's three dropouts per layer, each saving a 1-byte mask */
    /* transformer: Megatron tensor parallelism (one rank's graph) */
    uint32_t tp;           /* --tp: tensor-parallel degree t (1 = none; must divide heads, and seq with sp) */
    bool sp;               /* --sp: sequence parallelism over the same t ranks (Korthikanti et al. section 4.2.2) */
    bool selective;        /* --selective: the attention core as one checkpointed op (Korthikanti et al. section 5) */
    bool vocab_parallel;   /* --vocab-parallel: embedding and head split by vocabulary (t must divide vocab) */
} remat_gen_opts;

/* Fills o with the family's defaults: chain of 16 ops of 1 MiB and 10^9
 * FLOPs; layered 4x4 with fan-in 2; resnet with 3 blocks (ResNet-8 depth);
 * transformer s=1024 b=4 h=1024 a=16 L=24 vocab=50257 bytes=2; unet depth 3.
 * Never fails. */
void remat_gen_opts_init(remat_gen_opts *o, remat_gen_family family);

/* "chain", "layered", ... */
const char *remat_gen_family_name(remat_gen_family family);

/* Parses a family name. REMAT_EINVAL naming the known families otherwise. */
remat_status remat_gen_family_parse(const char *name, remat_gen_family *out, remat_err *err);

/* The largest graph remat_gen_json writes, in ops: ten million (about
 * 1.4 GB of JSON and ten seconds). Larger requests (chain --ops, layered
 * --width x --layers, resnet --blocks, transformer --layers) are
 * REMAT_EINVAL "out of range" rather than minutes of writing. */
#define REMAT_GEN_MAX_OPS 10000000u

/* Writes the graph as remat-graph JSON into a new NUL-terminated string that
 * the caller frees with remat_free; *len (if not NULL) gets its length.
 * Returns NULL with err set: REMAT_EINVAL for options out of range or whose
 * sizes overflow 2^64 (the message names the option), REMAT_ENOMEM.
 * Counts from 2^53 up are written as decimal strings, as the format requires.
 * Cost: O(ops + refs) time; memory is the text itself (about 70 bytes per
 * chain op, 100 per layered op). Layered sampling is O(fan_in^2) per op. */
char *remat_gen_json(const remat_gen_opts *o, size_t *len, remat_err *err);

#ifdef __cplusplus
}
#endif
#endif

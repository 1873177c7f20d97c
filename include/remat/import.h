/*
 * remat/import.h - peers' training graphs converted into remat graphs:
 * Checkmate/Moccasin graphs (below) and the DTR prototype's operator logs
 * (after remat_import_checkmate_file).
 *
 * Checkmate (Jain et al., MLSys 2020) and Moccasin (Bartan et al., ICML 2023)
 * describe a training step as one networkx DiGraph saved as node-link JSON:
 * forward nodes, a loss node and backward nodes, each with `cost_cpu` and
 * `cost_ram` (the bytes of the one tensor it produces), edges from every
 * value a node reads. In Checkmate's dfgraph_from_keras
 * (checkmate/tf2_keras/extraction.py) the backward node of layer I, bwd(I),
 * holds the gradient of I's OUTPUT (cost_ram = I's bytes) and is computed by
 * the backward rule of I's consumers: for each consumer C it reads C's
 * output and bwd(C) (next_outputs_deps), and it reads I (output_dep). In
 * remat that work is BWD(C), which reads grad(C) and writes the gradients of
 * C's inputs. remat derives the backward pass from each op's `saves`, so the
 * import puts every backward node on the BWD step of a consumer:
 *
 *   forward node X            op X: bytes = cost_ram, flops = cost_cpu,
 *                             inputs = its forward predecessors in node order
 *                             (a node with none reads the implicit input)
 *   loss node (backward: true,  op "Loss" (the graph output): its inputs are
 *   no backward predecessor)  its forward predecessors; flops = its cost_cpu
 *   backward node bwd(I)      carried by BWD(C1), C1 = I's first consumer in
 *                             node order (the loss counts): C1's bwd_flops +=
 *                             its cost_cpu; C1's saves += the forward nodes
 *                             and the loss with an edge into it
 *   several consumers         bwd(I) can only run once every consumer's
 *                             gradient exists; in remat's backward (reverse
 *                             forward order) that is BWD(C1), the last of
 *                             them, so C1 carries all of bwd(I)'s cost and
 *                             reads; the other consumers' BWD steps only
 *                             accumulate into grad(I) (no cost, no reads)
 *   bwd(X), X read by nothing carried by X's own BWD step (summary.own_step)
 *   backward -> backward edge the gradient flow, which remat derives itself
 *   implicit input            "input", 0 bytes, requires_grad when the file
 *                             has backward nodes (so every op gets a BWD
 *                             step); the first layer's BWD writes its 0-byte
 *                             gradient, which Checkmate does not compute, and
 *                             carries nothing unless the first layer
 *                             consumes another
 *
 * So forward + backward compute is the sum of cost_cpu, and on a chain the
 * store-all schedule holds the same values at every step as Checkmate's
 * free-at-last-use schedule (plus the loss's gradient seed, cost_ram of the
 * loss, at BWD(Loss)). Where a tensor has several consumers the two differ
 * in one way (graphs/README.md works an example): remat's later consumer
 * writes grad(I) when it runs backward, as autograd does, while Checkmate
 * keeps that consumer's output gradient until bwd(I) runs.
 * A forward node without a backward node carries nothing for itself. A file
 * without backward nodes is an inference graph: its sinks
 * are the outputs and no gradient flows. The converted graph's "meta" names
 * the source and the node counts; each op's "attrs" keeps its node id, the
 * id of the backward node of its output ("backward_node") and the backward
 * nodes its BWD step carries ("computes").
 *
 *     char *json; size_t len;
 *     if (remat_import_checkmate_file("resnet_train_nx.json", NULL, &json, &len, &err) != REMAT_OK)
 *         fprintf(stderr, "%s\n", err.msg);   // "f.json: links[3].target: unknown node id 17"
 *     remat_graph_load_json(json, len, "imported", &g, &err);
 *     remat_free(json);
 */
#ifndef REMAT_IMPORT_H
#define REMAT_IMPORT_H

#include "remat/graph.h"
#include "remat/util.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct remat_import_summary {
    uint32_t forward_nodes;   /* forward nodes, not counting the loss */
    uint32_t backward_nodes;  /* backward nodes, not counting the loss */
    uint32_t by_layout;       /* backward nodes matched by Checkmate's index layout, not by name */
    uint32_t without_backward; /* forward nodes no backward node belongs to */
    uint32_t shared;          /* gradient nodes of a tensor with several consumers (one BWD carries each) */
    uint32_t own_step;        /* gradient nodes of a forward node nothing reads (carried by its own BWD) */
    uint32_t links;           /* links read (duplicates included) */
    uint64_t saves;           /* references written into saves */
} remat_import_summary;

/* Converts Checkmate/Moccasin node-link JSON text (len bytes, need not be
 * NUL-terminated) into remat-graph JSON text. `source` names the input in
 * messages and in the graph's meta; `name` is the graph's name (NULL: the
 * file's graph.name, else "checkmate"). On success *out owns the
 * NUL-terminated text (free with remat_free), *out_len its length, and
 * *summary (if not NULL) the counts. Failures: REMAT_EPARSE for text that is
 * not JSON (with line:column), REMAT_EGRAPH for a file that is not a
 * Checkmate graph (the message names the JSON path: "nodes[4].cost_ram: ..."),
 * REMAT_ENOMEM. err->loc holds the same place as data: the file, the JSON
 * path, line and column for text that is not JSON, and the node's id where
 * the error is about one node. Cycles are left to the loader and the
 * analyzer of the result. Cost: O(nodes + links) after an O(nodes log nodes) id sort. */
remat_status remat_import_checkmate(const char *text, size_t len, const char *source, const char *name, char **out,
                                    size_t *out_len, remat_import_summary *summary, remat_err *err);

/* Reads path ("-" for stdin) and converts it; as above. */
remat_status remat_import_checkmate_file(const char *path, const char *name, char **out, size_t *out_len,
                                         remat_import_summary *summary, remat_err *err);

/* ---- The DTR prototype's operator-trace logs --------------------------------
 *
 * DTR (Kirisame et al., "Dynamic Tensor Rematerialization", ICLR 2021;
 * github.com/uwsampl/dtr-prototype) runs a modified PyTorch that logs every
 * operator on a checkpointed tensor, one JSON object per line, and replays
 * the log in its simulator (simrd). What remat reads, and where it learned
 * it (all in uwsampl/dtr-prototype):
 *
 *   - the writer, dtr_code/dtr-implementation.patch: aten/src/ATen/Logger.h
 *     (the field names; MEMORY, ALIAS and TIME are written as decimal
 *     *strings*), aten/src/ATen/CheckpointTensorImpl.cpp (TIME is the
 *     operator's wall time in nanoseconds; MEMORY is the result's storage
 *     nbytes, and for a view the storage it shares; ALIAS is the index in
 *     ARGS of the argument a result is a view of, -1 for none; every
 *     argument is checkpointed first, so a non-checkpointed one shows up as a
 *     CONSTANT just before the CALL); tensor names are "x<counter>";
 *   - the reader, simrd/simrd/parse/parse.py (parse, parse_file): which
 *     lines must follow which, the backward rule, COPY/COPY_FROM/RELEASE
 *     reference counting, MUTATE as a new version;
 *   - the harness, dtr_code/dtr_eval/shared/run_torch_trial.py (it writes
 *     the ANNOTATE START line before the logged run) and model_util.py (it
 *     deletes the data, target and loss before the log ends, "so anything
 *     still live will be a gradient or weight").
 *
 * The instructions, with the fields remat reads (other fields, such as an
 * older writer's CONSTANTS, are ignored):
 *
 *   {"INSTRUCTION":"CONSTANT","NAME":n}    a tensor made outside the log (a weight,
 *                                          the data); the next line must be its MEMORY
 *   {"INSTRUCTION":"MEMORY","NAME":n,"MEMORY":"bytes"}
 *   {"INSTRUCTION":"CALL","NAME":op,"ARGS":[n...],"RESULT":[n...],"TIME":"ns"}
 *                                          followed by MEMORY r then ALIAS r for each
 *                                          result r, in RESULT order
 *   {"INSTRUCTION":"ALIAS","NAME":r,"ALIAS":"i"}   r is a view of ARGS[i]; "-1": not a view
 *   {"INSTRUCTION":"MUTATE","NAME":op,"ARGS":[n...],"MUTATE":[i...],"TIME":"ns"}
 *                                          an in-place op writing ARGS[i] for each i
 *   {"INSTRUCTION":"COPY","DST":n,"SRC":m}        a new name n for m's tensor
 *   {"INSTRUCTION":"COPY_FROM","DST":n,"SRC":m}   name n now stands for m's tensor
 *   {"INSTRUCTION":"RELEASE","NAME":n}            name n is dropped
 *   {"INSTRUCTION":"ANNOTATE","ANNOTATION":a}     "START", "BACKWARD", or any note
 *   {"INSTRUCTION":"PIN","NAME":n}                the writer has it; simrd does not
 *                                                  read it; ignored
 *
 * Counts (MEMORY, TIME, ALIAS, MUTATE indices) may be JSON numbers or
 * decimal strings; they must be whole (ALIAS may be -1), and bytes and times
 * non-negative. Blank lines are skipped.
 *
 * The mapping to a remat graph:
 *
 *   lines before the first   skipped (simrd's parse_file(start=True) does the
 *   ANNOTATE "START"         same; a log without START is read whole)
 *   backward part            from the first CALL or MUTATE whose NAME contains
 *                            "backward", or an ANNOTATE "BACKWARD", to the end
 *                            (simrd's rule; it is sticky). Only the forward part
 *                            becomes ops; the backward part gives saves and
 *                            bwd_flops
 *   forward CALL             one op, type = NAME, inputs = ARGS, one output per
 *                            RESULT (bytes = MEMORY; a result with ALIAS i is a
 *                            view: alias_of = ARGS[i], no bytes of its own, as
 *                            simrd counts it); flops = TIME in nanoseconds, so
 *                            every cost in the graph is measured time, not FLOPs.
 *                            Single-result ops are named after their result; a
 *                            multi-result op after its first result. A CALL
 *                            without results makes no op
 *   forward MUTATE           functionalized as simrd does: an op (type = NAME,
 *                            inputs = ARGS, flops = TIME) whose outputs are new
 *                            versions "n@1", "n@2", ... of each mutated name n,
 *                            each as large as the storage it overwrites; later
 *                            reads of n read the newest version
 *   CONSTANT                 an input, or a param when the log never releases it:
 *                            the harness frees data, target and loss before the
 *                            log ends and keeps the weights (reference counts
 *                            over COPY, COPY_FROM, RELEASE and MUTATE as in
 *                            simrd). Frozen weights cannot be told apart from
 *                            trainable ones; buffers the model frees count as
 *                            inputs. A log without a backward part trains
 *                            nothing: all its constants are inputs
 *   COPY, COPY_FROM          only names: no op, no tensor
 *   RELEASE                  only reference counts (remat derives lifetimes
 *                            itself); a release of an unknown name is ignored,
 *                            as simrd ignores it, and counted
 *   gradient seed and loss   loss.backward() logs ones_like(loss) just before the
 *                            first backward op. So if the last forward op is a
 *                            CALL with one argument and one result (not a view)
 *                            that no forward op reads and the backward part
 *                            reads, it is the seed: it makes no op, and its
 *                            argument is the loss, the one graph output.
 *                            Otherwise the outputs are the forward results that
 *                            nothing reads and that are still live when the
 *                            forward part ends (none: an error)
 *   backward CALL or MUTATE  its forward arguments S (distinct, the seed left
 *                            out) are saved by one forward op, and its TIME is
 *                            added to that op's bwd_flops. The log does not say
 *                            which forward op a backward op belongs to; the
 *                            candidates are the ops that get a backward step (as
 *                            remat_analyze decides it on the converted graph,
 *                            loaded before any backward instruction is given
 *                            out) and have every tensor
 *                            of S among their inputs or outputs. The one chosen
 *                            is the earliest (in forward order) whose type is
 *                            the NAME's part before "_backward" (PyTorch names
 *                            most backward kernels so: cudnn_convolution_backward
 *                            belongs to cudnn_convolution), else the earliest of
 *                            all: its backward step runs last, so no saved
 *                            tensor is freed before a real read (mm(x.t(), grad)
 *                            in addmm's backward reads x, and x's producer
 *                            saves it). If no op has all of S, each tensor goes
 *                            to an op that has it by the same rule (the TIME
 *                            with the first); reads and times no op takes
 *                            (gradient arithmetic reads no forward tensor) are
 *                            counted in the summary. An op no backward
 *                            instruction is given has bwd_flops 0 and saves
 *                            nothing
 *
 * The converted graph's "meta" records the source, the counts, the loss and
 * the seed; each op's "attrs" gives its log line.
 *
 *     if (remat_import_dtr_file("resnet32.log", NULL, &json, &len, &sum, &err) != REMAT_OK)
 *         fprintf(stderr, "%s\n", err.msg);  // "resnet32.log:17: ARGS[1]: unknown tensor 'x42'"
 */
typedef struct remat_import_dtr_summary {
    uint32_t lines;             /* instruction lines read after START (blank lines not counted) */
    uint32_t skipped;           /* lines before the START annotation */
    uint32_t backward_line;     /* the line where the backward part starts; 0: no backward part */
    uint32_t forward_calls, forward_mutates;
    uint32_t backward_calls, backward_mutates;
    uint32_t constants;         /* CONSTANT lines, both parts */
    uint32_t params, inputs;    /* the forward constants, split by the release rule */
    uint32_t releases, releases_ignored; /* RELEASE lines; those of unknown or released names */
    uint32_t reads_after_release; /* arguments read through a released name (simrd allows it) */
    uint32_t copies, copy_froms, annotations, pins;
    uint32_t empty;             /* forward CALLs without RESULT or MUTATEs without MUTATE: no op */
    uint32_t ops, views;        /* in the converted graph */
    uint32_t seed;              /* 1 when a gradient seed was found (the loss is its argument) */
    uint32_t unattributed;      /* backward instructions whose TIME no forward op took */
    uint64_t saves;             /* references written into saves */
    uint64_t unattributed_reads; /* forward tensors read in backward that no op could save */
    uint64_t forward_ns, backward_ns, unattributed_ns; /* TIME sums (saturating) */
} remat_import_dtr_summary;

/* Converts a DTR log (text, len bytes, need not be NUL-terminated) into
 * remat-graph JSON text. `source` names the log in messages and meta; `name`
 * is the graph's name (NULL: source's file name without its extension, or
 * "dtr"). On success *out owns the NUL-terminated text (remat_free), *out_len
 * (if not NULL) its length and *summary (if not NULL) the counts. Failures
 * name the line and the field: REMAT_EPARSE for a line that is not JSON
 * ("log:4:12: not valid JSON near here"), REMAT_EGRAPH for one that breaks
 * the format ("log:17: ARGS[1]: unknown tensor 'x42'", "log:9: RESULT[0]:
 * 'x3' is already defined (line 5)", "log:6: INSTRUCTION: expected the
 * MEMORY line of 'x3' (RESULT[0] of the CALL at line 5), found ALIAS") or
 * cannot be mapped (no forward op, no output, a converted graph the loader
 * refuses: "log: the converted graph is not a valid training step: ..."),
 * REMAT_EOVERFLOW for a bwd_flops sum above 2^64-1, REMAT_ENOMEM. err->loc
 * holds the place: file, line (and column for text that is not JSON), the
 * field as its path within the line's object ("ARGS[1]") and the tensor
 * named ("x42"). Cost: O(lines + references), one load and analysis of the
 * converted graph, plus, per backward instruction, the ops that read or
 * make its first forward argument. */
remat_status remat_import_dtr(const char *text, size_t len, const char *source, const char *name, char **out,
                              size_t *out_len, remat_import_dtr_summary *summary, remat_err *err);

/* Reads path ("-" for stdin) and converts it; as above. */
remat_status remat_import_dtr_file(const char *path, const char *name, char **out, size_t *out_len,
                                   remat_import_dtr_summary *summary, remat_err *err);

/* ---- One rank of Megatron-LM tensor parallelism ----------------------------
 *
 * Shoeybi et al. 2019 ("Megatron-LM", section 3) split a transformer's
 * linears two ways: a column-parallel linear holds 1/t of the weight's
 * output features, so each rank computes 1/t of the output; a row-parallel
 * linear holds 1/t of the input features, reads that 1/t of its input, and
 * its output is a partial sum the ranks all-reduce. A region runs from
 * column-parallel linears (QKV, fc1) to a row-parallel one (the attention
 * projection, fc2); its input passes through f (identity forward, all-reduce
 * of the gradient backward) and its output through g (all-reduce forward,
 * identity backward). remat_import_tp_split turns an exported graph and a
 * partition naming the linears into the graph of one rank of t:
 *
 *   partition file   {"format": "remat-tp-partition", "version": 1,
 *                     "column": ["blocks.*.attn.qkv", "blocks.*.fc1"],
 *                     "row": ["blocks.*.attn.proj", "blocks.*.fc2"]}
 *                    patterns are shell globs (fnmatch, `*` crosses dots)
 *                    on each op's attrs.module, as the PyTorch exporter
 *                    writes it; "comment" may hold any text
 *   the linear       of a matched module: the op that reads the param
 *                    "<module>.weight" (views recorded in the module are not
 *                    linears). Every pattern must match one, a module may
 *                    not be both, and each op keeps its inputs' order
 *   column linear    weight and bias (if it reads "<module>.bias") / t;
 *                    work / t; output split; its input read through a new
 *                    op "<x>_tp" (type tp_copy, a view of x, saving nothing:
 *                    f), shared by column linears that read the same x.
 *                    Its input must not already be split
 *   row linear       weight / t, bias whole (added after the reduction, as
 *                    Megatron's RowParallelLinear does); work / t; input
 *                    must be split; a new op "<y>_ar" (type all_reduce, a
 *                    view of its output y: g, in place as NCCL reduces) is
 *                    inserted after it and every later reader of y reads it
 *   other ops        an op reading a split tensor is split: every output's
 *                    bytes / t (exactly; a remainder is an error naming the
 *                    tensor), flops, bwd_flops, workspace, bwd_workspace and
 *                    measured durations / t (rounded up). Tensors made from
 *                    nothing (ops whose inputs are all such tensors, as
 *                    empty_like -> bernoulli_ -> div_ makes a dropout mask)
 *                    are split when every reader is split and as large as
 *                    its reader's output; a scalar or a broadcast stays whole
 *   shapes           dropped from split tensors and params (the split
 *                    dimension is not tracked through views); bytes exact
 *   the result       name "<name>-tp<t>", meta.tp and meta.tp_partition,
 *                    attrs.tp_split "column"/"row"/"shard" on each split op;
 *                    the collectives' attrs as `remat gen transformer --tp`
 *                    writes them (collective_fwd, collective_bwd, group
 *                    "tensor", ranks t). A graph output that would be split
 *                    is an error (a region left open)
 *
 * Sequence parallelism and a vocabulary-parallel embedding or head are not
 * split this way (gen transformer --tp --sp models the former).
 *
 * On success *out owns the text (remat_free) and *summary (may be NULL) the
 * counts. Failures: the loader's errors for a graph that is not valid,
 * REMAT_EPARSE for a partition that is not JSON, REMAT_EGRAPH naming the
 * partition's JSON path or the op, REMAT_EINVAL for t = 0, REMAT_ENOMEM.
 * Cost: O(ops + tensors + uses) plus one scan of later ops per collective. */
typedef struct remat_import_tp_summary {
    uint32_t linears[2];        /* column- and row-parallel linears found */
    uint32_t split_ops;         /* ops doing 1/t of their work (the linears included) */
    uint32_t sharded_tensors;   /* activations split t ways */
    uint32_t split_params;      /* params split t ways */
    uint32_t collectives;       /* f and g ops inserted */
    uint64_t param_bytes_split; /* those params' bytes before the split */
} remat_import_tp_summary;

remat_status remat_import_tp_split(const char *text, size_t len, const char *source, const char *part_text,
                                   size_t part_len, const char *part_source, uint32_t tp, char **out, size_t *out_len,
                                   remat_import_tp_summary *summary, remat_err *err);

/* Reads both files and splits; as above. */
remat_status remat_import_tp_split_files(const char *graph_path, const char *part_path, uint32_t tp, char **out,
                                         size_t *out_len, remat_import_tp_summary *summary, remat_err *err);

/* ---- Measured durations ----------------------------------------------------
 *
 * The graph text (the file g was loaded from; len bytes) with op k's
 * attrs.duration_ns = fwd_ns[k] and attrs.bwd_duration_ns = bwd_ns[k]
 * (nanoseconds; a 0 removes the key, so an op without a backward step
 * carries none), and meta.durations = note, which says where the figures
 * come from (they are one machine's). Every other field is kept. The file's
 * ops must be g's, in order (REMAT_EINVAL otherwise). On success *out owns
 * the text (remat_free). REMAT_EPARSE, REMAT_ENOMEM. O(size of the text). */
remat_status remat_import_set_durations(const char *text, size_t len, const char *source, const remat_graph *g,
                                        const uint64_t *fwd_ns, const uint64_t *bwd_ns, const char *note, char **out,
                                        size_t *out_len, remat_err *err);

#ifdef __cplusplus
}
#endif
#endif

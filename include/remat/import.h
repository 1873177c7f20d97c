/*
 * remat/import.h - peers' training graphs converted into remat graphs.
 *
 * Checkmate (Jain et al., MLSys 2020) and Moccasin (Bartan et al., ICML 2023)
 * describe a training step as one networkx DiGraph saved as node-link JSON:
 * forward nodes, a loss node and backward nodes, each with `cost_cpu` and
 * `cost_ram` (the bytes of the one tensor it produces), edges from every
 * value a node reads. remat describes only the forward graph and derives the
 * backward pass from each op's `saves`, so the import turns every backward
 * node into the `saves` and `bwd_flops` of the forward op it belongs to:
 *
 *   forward node X            op X: bytes = cost_ram, flops = cost_cpu,
 *                             inputs = its forward predecessors in node order
 *                             (a node with none reads the implicit input)
 *   loss node (backward: true,  op "Loss" (the graph output): its inputs are
 *   no backward predecessor)  its forward predecessors; bwd_flops 0 (its
 *                             cost_cpu is counted once, in flops)
 *   backward node of X        X's bwd_flops = its cost_cpu; X's saves = the
 *   ("X_backward", "Grad <X>", forward nodes and the loss with an edge into
 *   or by Checkmate's layout)  it, in node order: the tensors it reads
 *   backward -> backward edge the gradient flow, which remat derives itself
 *   implicit input            "input", 0 bytes, requires_grad when the file
 *                             has backward nodes (so a gradient flows into
 *                             every op, as Checkmate's per-layer weights make
 *                             it); read by every forward node without
 *                             forward predecessors
 *
 * A forward node without a backward node saves nothing and costs nothing in
 * backward. A file without backward nodes is an inference graph: its sinks
 * are the outputs and no gradient flows. The converted graph's "meta" names
 * the source and the node counts; each op's "attrs" keeps its node ids.
 *
 *     char *json; size_t len;
 *     if (remat_import_checkmate_file("resnet_train_nx.json", NULL, &json, &len, &err) != REMAT_OK)
 *         fprintf(stderr, "%s\n", err.msg);   // "f.json: links[3].target: unknown node id 17"
 *     remat_graph_load_json(json, len, "imported", &g, &err);
 *     remat_free(json);
 */
#ifndef REMAT_IMPORT_H
#define REMAT_IMPORT_H

#include "remat/util.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct remat_import_summary {
    uint32_t forward_nodes;   /* forward nodes, not counting the loss */
    uint32_t backward_nodes;  /* backward nodes, not counting the loss */
    uint32_t by_layout;       /* backward nodes matched by Checkmate's index layout, not by name */
    uint32_t without_backward; /* forward nodes no backward node belongs to */
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
 * REMAT_ENOMEM. Cycles are left to the loader and the analyzer of the result.
 * Cost: O(nodes + links) after an O(nodes log nodes) id sort. */
remat_status remat_import_checkmate(const char *text, size_t len, const char *source, const char *name, char **out,
                                    size_t *out_len, remat_import_summary *summary, remat_err *err);

/* Reads path ("-" for stdin) and converts it; as above. */
remat_status remat_import_checkmate_file(const char *path, const char *name, char **out, size_t *out_len,
                                         remat_import_summary *summary, remat_err *err);

#ifdef __cplusplus
}
#endif
#endif

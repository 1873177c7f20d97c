/*
 * igraph_adapter.h - the igraph adapter's interface.
 *
 * Only src/analyze/igraph_adapter.c includes <igraph.h>. Everything else asks
 * it questions in terms of op indices and plain arrays.
 */
#ifndef REMAT_ANALYZE_IGRAPH_ADAPTER_H
#define REMAT_ANALYZE_IGRAPH_ADAPTER_H

#include "remat/analyze.h"

/* Writes a topological order of g's ops (edge producer -> consumer) into
 * order[n_ops]. A cycle fails with REMAT_EGRAPH naming the ops on it. */
remat_status remat__ig_topo_order(const remat_graph *g, uint32_t *order, remat_err *err);

/* reach[op] = 1 for every op from which some graph output is reachable
 * through op inputs (the op itself produces or feeds the loss). */
remat_status remat__ig_reaches_outputs(const remat_graph *g, uint8_t *reach, remat_err *err);

/* Articulation points of the undirected op graph (edge producer - consumer):
 * cut[op] = 1 where removing the op disconnects the graph. */
remat_status remat__ig_articulation_ops(const remat_graph *g, uint8_t *cut, remat_err *err);

/* Minimum s-t cut of a directed graph with n vertices, edge list
 * edges[2*i], edges[2*i+1] and capacities cap[i]. side[v] = 1 for the
 * vertices on the source's side of the cut; *value gets its capacity. */
remat_status remat__ig_st_mincut(uint32_t n, const uint32_t *edges, size_t n_edges, const double *cap, uint32_t s,
                                 uint32_t t, uint8_t *side, double *value, remat_err *err);

#endif

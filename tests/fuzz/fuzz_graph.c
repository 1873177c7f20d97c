/*
 * fuzz_graph.c - libFuzzer target for the graph loader and what follows it.
 *
 *     make fuzz FUZZ_SECONDS=60        (builds build-fuzz/fuzz_graph, runs it)
 *     build-fuzz/fuzz_graph CORPUS_DIR tests/fuzz/corpus/graph -dict=tests/fuzz/remat.dict
 *
 * Besides crashes, leaks and undefined behaviour, it checks that the two
 * drivers of the loader agree on every input (fuzz_load.h; fuzz_load.c is
 * that half alone, a hundred times faster). A loaded graph is then
 * analyzed, scheduled, replayed, reported, traced and, when small, planned
 * with one strategy at one budget that a hash of the input picks.
 */
#include "fuzz_load.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    remat_graph *g = fuzz_load_graph(data, size);
    if (!g)
        return 0;
    /* Planners are the costly part; small graphs find their bugs as well. */
    fuzz_exercise(g, g->n_ops <= 48, fuzz_pick(data, size));
    remat_graph_destroy(g);
    return 0;
}

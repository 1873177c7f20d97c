/*
 * fuzz_load.c - libFuzzer target for the graph loader alone.
 *
 *     build-fuzz/fuzz_load CORPUS_DIR tests/fuzz/corpus/graph -dict=tests/fuzz/remat.dict
 *
 * The loader is where hostile bytes arrive, and the graph target spends
 * nearly all its time after it (analysis, replays, planners): this one
 * stops at the loaded graph, so it runs its checks (fuzz_load.h: both
 * drivers, the same status, message and graph) at tens of thousands of
 * inputs a second. It shares the graph target's seeds.
 */
#include "fuzz_load.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    remat_graph *g = fuzz_load_graph(data, size);
    remat_graph_destroy(g);
    return 0;
}

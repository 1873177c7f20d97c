/*
 * fuzz_plan.c - libFuzzer target for the plan reader and what follows it.
 *
 *     make fuzz FUZZ_SECONDS=60        (builds build-fuzz/fuzz_plan, runs it)
 *     build-fuzz/fuzz_plan CORPUS_DIR tests/fuzz/corpus/plan -dict=tests/fuzz/remat.dict
 *
 * Plans name the graph they were made for by fingerprint, so every input is
 * read against one graph, graphs/bnview.json (multi-output ops and views of
 * inputs, of outputs and of views), embedded below; the seed plans were made
 * for it by `remat plan`. A plan that loads is replayed (a hand-written
 * schedule may be invalid; the replay must say so cleanly), reported and,
 * when valid, traced.
 */
#include "fuzz_common.h"

#include <stdint.h>

/* graphs/bnview.json, compacted (the fingerprint ignores formatting). */
static const char GRAPH[] =
    "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"bnview\",\"meta\":{\"about\":\"multi-output ops"
    " (batchnorm with mean/invstd, max-pool with indices) and views: of an input, of a multi-output op's "
    "output, and of a view\"},\"inputs\":[{\"id\":\"x\",\"bytes\":6144,\"shape\":[8,192]},{\"id\":\"y\","
    "\"bytes\":64,\"shape\":[8]}],\"params\":[{\"id\":\"w1\",\"bytes\":432,\"shape\":[4,3,3,3]},{\"id\":"
    "\"bn_g\",\"bytes\":32,\"shape\":[2,4]},{\"id\":\"w2\",\"bytes\":1280,\"shape\":[32,10]}],\"ops\":[{"
    "\"id\":\"img\",\"op\":\"reshape\",\"inputs\":[\"x\"],\"alias_of\":\"x\",\"shape\":[8,3,8,8],\"saves"
    "\":[]},{\"id\":\"conv\",\"op\":\"conv2d\",\"inputs\":[\"img\",\"w1\"],\"bytes\":8192,\"shape\":[8,4,"
    "8,8],\"flops\":110592},{\"id\":\"bn\",\"op\":\"batchnorm\",\"inputs\":[\"conv\",\"bn_g\"],\"outputs"
    "\":[{\"id\":\"bn\",\"bytes\":8192,\"shape\":[8,4,8,8]},{\"id\":\"bn_mean\",\"bytes\":16,\"shape\":[4"
    "]},{\"id\":\"bn_invstd\",\"bytes\":16,\"shape\":[4]}],\"flops\":16384,\"saves\":[\"conv\",\"bn_g\","
    "\"bn_mean\",\"bn_invstd\"]},{\"id\":\"act\",\"op\":\"relu\",\"inputs\":[\"bn\"],\"bytes\":8192,\"sha"
    "pe\":[8,4,8,8],\"flops\":2048,\"saves\":[\"act\"]},{\"id\":\"pool\",\"op\":\"maxpool\",\"inputs\":["
    "\"act\"],\"outputs\":[{\"id\":\"pool\",\"bytes\":2048,\"shape\":[8,4,4,4]},{\"id\":\"pool_idx\",\"by"
    "tes\":4096,\"shape\":[8,4,4,4],\"dtype\":\"int64\"}],\"flops\":2048,\"saves\":[\"act\",\"pool_idx\"]"
    "},{\"id\":\"flat\",\"op\":\"flatten\",\"inputs\":[\"pool\"],\"alias_of\":\"pool\",\"shape\":[8,64],"
    "\"saves\":[]},{\"id\":\"half\",\"op\":\"narrow\",\"inputs\":[\"flat\"],\"alias_of\":\"flat\",\"bytes"
    "\":1024,\"shape\":[8,32],\"saves\":[]},{\"id\":\"fc\",\"op\":\"matmul\",\"inputs\":[\"half\",\"w2\"]"
    ",\"bytes\":320,\"shape\":[8,10],\"flops\":5120},{\"id\":\"loss\",\"op\":\"cross_entropy\",\"inputs\""
    ":[\"fc\",\"y\"],\"bytes\":4,\"flops\":400}],\"outputs\":[\"loss\"]}";

static remat_graph *graph;
static remat_analysis *analysis;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    remat_err err;
    remat_err_init(&err);
    if (remat_graph_load_json(GRAPH, sizeof GRAPH - 1, "bnview.json", &graph, &err) != REMAT_OK ||
        remat_analyze(graph, &analysis, &err) != REMAT_OK) {
        fprintf(stderr, "fuzz_plan: %s\n", err.msg);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    remat_plan p;
    remat_err err;
    remat_err_init(&err);
    remat_status st = remat_plan_load_json(graph, (const char *)data, size, "fuzz.plan", &p, &err);
    if (st != REMAT_OK) {
        FUZZ_EXPECT(st == REMAT_EPARSE || st == REMAT_EPLAN, "plan load: %s: %s", remat_status_str(st), err.msg);
        FUZZ_EXPECT(strncmp(err.msg, "fuzz.plan", 9) == 0, "message does not name the source: %s", err.msg);
        remat_plan_destroy(&p);
        return 0;
    }
    FUZZ_EXPECT(p.n_tensors == graph->n_tensors && p.keep != NULL, "plan without its keep set");
    fuzz_replay(analysis, &p.schedule, 0, "plan");
    /* The plan written back out (as remat plan -o would) reads back. */
    remat_replay_result r;
    remat_err_init(&err);
    if (remat_replay(analysis, &p.schedule, NULL, NULL, &r, &err) == REMAT_OK && r.valid) {
        size_t len;
        remat_err e2;
        remat_err_init(&e2);
        char *text = remat_report_plan(analysis, &p, &r, &len, &e2);
        FUZZ_EXPECT(text != NULL, "plan report: %s", e2.msg);
        remat_plan q;
        remat_err_init(&e2);
        st = remat_plan_load_json(graph, text, len, "again.plan", &q, &e2);
        FUZZ_EXPECT(st == REMAT_OK, "a written plan does not read back: %s\n%s", e2.msg, text);
        FUZZ_EXPECT(q.schedule.n == p.schedule.n &&
                        memcmp(q.schedule.ins, p.schedule.ins, p.schedule.n * sizeof *p.schedule.ins) == 0,
                    "a written plan reads back another schedule");
        remat_plan_destroy(&q);
        remat_free(text);
    }
    remat_replay_result_destroy(&r);
    remat_plan_destroy(&p);
    return 0;
}

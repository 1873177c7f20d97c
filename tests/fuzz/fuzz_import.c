/*
 * fuzz_import.c - libFuzzer target for the peers' graph importers.
 *
 *     make fuzz FUZZ_SECONDS=60        (builds build-fuzz/fuzz_import, runs it)
 *     build-fuzz/fuzz_import CORPUS_DIR tests/fuzz/corpus/import -dict=tests/fuzz/remat.dict
 *
 * The first byte picks the format (even: Checkmate node-link JSON, odd: a
 * DTR operator log), the rest is the file. An import either fails cleanly
 * or produces text that the one graph loader reads; a converted graph that
 * loads is analyzed, scheduled, replayed and traced like any other
 * (fuzz_exercise), so a mapping that writes a graph the rest of remat
 * chokes on is found here, not by a user.
 */
#include "fuzz_common.h"
#include "remat/import.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const int dtr = data[0] & 1;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    char *json = NULL;
    size_t json_len = 0;
    remat_err err;
    remat_err_init(&err);
    remat_status st;
    if (dtr) {
        remat_import_dtr_summary sum;
        st = remat_import_dtr(text, len, "fuzz.log", NULL, &json, &json_len, &sum, &err);
    } else {
        remat_import_summary sum;
        st = remat_import_checkmate(text, len, "fuzz.json", NULL, &json, &json_len, &sum, &err);
    }
    if (st != REMAT_OK) {
        FUZZ_EXPECT(json == NULL, "%s import: text returned on failure", dtr ? "dtr" : "checkmate");
        FUZZ_EXPECT(fuzz_clean_failure(st), "%s import: %s: %s", dtr ? "dtr" : "checkmate", remat_status_str(st),
                    err.msg);
        FUZZ_EXPECT(strncmp(err.msg, "fuzz.", 5) == 0, "message does not name the source: %s", err.msg);
        return 0;
    }
    FUZZ_EXPECT(json != NULL && strlen(json) == json_len, "import: text and length disagree");
    remat_graph *g = NULL;
    remat_err_init(&err);
    st = remat_graph_load_json(json, json_len, "imported", &g, &err);
    /* The importers leave cycles and a step without a loss to the loader
     * and the analyzer (as `remat import` does): a clean refusal is fine. */
    FUZZ_EXPECT(st == REMAT_OK || st == REMAT_EGRAPH || st == REMAT_EOVERFLOW, "imported graph: %s: %s",
                remat_status_str(st), err.msg);
    if (st == REMAT_OK)
        fuzz_exercise(g, g->n_ops <= 24, UINT64_MAX);
    remat_graph_destroy(g);
    remat_free(json);
    return 0;
}

/*
 * fuzz_load.h - the loader half of the graph targets: both drivers of the
 * loader (src/load/load_internal.h) on one input, and what must hold
 * between them: the same status and the same message (so the stream driver
 * never accepts what the tree driver refuses, nor hides its canonical
 * message), and on success the same graph, field by field. A failure is a
 * clean status whose message names the source.
 */
#ifndef REMAT_FUZZ_LOAD_H
#define REMAT_FUZZ_LOAD_H

#include "fuzz_common.h"
#include "load/load_internal.h"

#include <stdint.h>

/* The graph the default driver loaded from data (destroy it), or NULL when
 * the input was refused. */
static inline remat_graph *fuzz_load_graph(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    remat_graph *g = NULL, *t = NULL, *s = NULL;
    remat_err err, terr, serr;
    remat_err_init(&err);
    remat_err_init(&terr);
    remat_err_init(&serr);
    remat_status st = remat_graph_load_json(text, size, "fuzz.json", &g, &err);
    remat_status tst = remat__graph_load_json_mode(text, size, "fuzz.json", &t, &terr, REMAT_LOAD_TREE);
    remat_status sst = remat__graph_load_json_mode(text, size, "fuzz.json", &s, &serr, REMAT_LOAD_STREAM);
    FUZZ_EXPECT(st == tst && strcmp(err.msg, terr.msg) == 0, "drivers disagree: '%s' vs tree '%s'", err.msg,
                terr.msg);
    FUZZ_EXPECT(sst == REMAT_OK ? tst == REMAT_OK : sst == REMAT_EUNSUPPORTED,
                "stream driver: %s (%s), tree driver: %s", remat_status_str(sst), serr.msg, terr.msg);
    char why[256];
    if (st == REMAT_OK)
        FUZZ_EXPECT(remat__graph_same(g, t, why, sizeof why), "drivers read different graphs: %s", why);
    if (sst == REMAT_OK)
        FUZZ_EXPECT(remat__graph_same(s, t, why, sizeof why), "stream driver read another graph: %s", why);
    remat_graph_destroy(t);
    remat_graph_destroy(s);
    if (st != REMAT_OK) {
        FUZZ_EXPECT(g == NULL, "graph returned on failure");
        FUZZ_EXPECT(st == REMAT_EPARSE || st == REMAT_EGRAPH || st == REMAT_EOVERFLOW, "load: %s: %s",
                    remat_status_str(st), err.msg);
        FUZZ_EXPECT(strncmp(err.msg, "fuzz.json", 9) == 0, "message does not name the source: %s", err.msg);
        return NULL;
    }
    return g;
}

#endif

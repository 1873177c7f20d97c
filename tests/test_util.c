/*
 * test_util.c - see test_util.h.
 */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>

remat_graph *t_load(const char *json)
{
    remat_graph *g = NULL;
    remat_err err;
    remat_err_init(&err);
    remat_status st = remat_graph_load_json(json, strlen(json), "t.json", &g, &err);
    ck_assert_msg(st == REMAT_OK, "load failed: %s", err.msg);
    return g;
}

remat_graph *t_gen(const remat_gen_opts *o)
{
    remat_err err;
    remat_err_init(&err);
    char *json = remat_gen_json(o, NULL, &err);
    ck_assert_msg(json != NULL, "gen failed: %s", err.msg);
    remat_graph *g = t_load(json);
    remat_free(json);
    return g;
}

remat_graph *t_gen_chain(uint32_t ops, uint64_t param_bytes)
{
    remat_gen_opts o;
    remat_gen_opts_init(&o, REMAT_GEN_CHAIN);
    o.ops = ops;
    o.param_bytes = param_bytes;
    return t_gen(&o);
}

remat_analysis *t_analyze(const char *json, remat_graph **g)
{
    *g = t_load(json);
    remat_analysis *a = NULL;
    remat_err err;
    remat_err_init(&err);
    remat_status st = remat_analyze(*g, &a, &err);
    ck_assert_msg(st == REMAT_OK, "analyze failed: %s", err.msg);
    return a;
}

void t_load_fails(const char *json, remat_status code, const char *substr)
{
    remat_graph *g = NULL;
    remat_err err;
    remat_err_init(&err);
    remat_status st = remat_graph_load_json(json, strlen(json), "t.json", &g, &err);
    if (st == REMAT_OK) {
        remat_analysis *a = NULL;
        st = remat_analyze(g, &a, &err);
        remat_analysis_destroy(a);
    }
    remat_graph_destroy(g);
    ck_assert_msg(st == code, "expected status %s, got %s (%s)", remat_status_str(code), remat_status_str(st),
                  err.msg);
    ck_assert_msg(strstr(err.msg, substr) != NULL, "message '%s' lacks '%s'", err.msg, substr);
}

const char *t_fixture(const char *name, char *buf, size_t cap)
{
    const char *dir = getenv("REMAT_FIXTURES");
    snprintf(buf, cap, "%s/%s", dir ? dir : "tests/fixtures", name);
    return buf;
}

uint32_t t_tensor(const remat_graph *g, const char *id)
{
    uint32_t t = remat_graph_find_tensor(g, id);
    ck_assert_msg(t != REMAT_NONE, "no tensor %s", id);
    return t;
}

uint32_t t_op(const remat_graph *g, const char *id)
{
    uint32_t k = remat_graph_find_op(g, id);
    ck_assert_msg(k != REMAT_NONE, "no op %s", id);
    return k;
}

uint32_t t_fwd(const remat_analysis *a, const char *op)
{
    return a->pos[t_op(a->g, op)];
}

uint32_t t_bwd(const remat_analysis *a, const char *op)
{
    uint32_t s = a->bwd_step[t_op(a->g, op)];
    ck_assert_msg(s != REMAT_NONE, "op %s has no backward step", op);
    return s;
}

/*
 * igraph_adapter.c - the one file that talks to igraph.
 *
 * igraph's default error handler aborts the process, which is not acceptable
 * for a tool that reads other programs' files. Every entry point installs a
 * handler that records igraph's reason and returns, and restores the previous
 * handler on the way out. The reason is kept in a thread-local buffer because
 * the handler gets no user pointer.
 *
 * The op graph has one vertex per op and an edge producer -> consumer for
 * every input reference to an activation (duplicates are harmless here).
 *
 * igraph 0.10 as Debian builds it is not thread-safe (IGRAPH_THREAD_SAFE is
 * 0: its error handler and its cleanup stack are process-wide), so a
 * session holds one process-wide lock from begin to end: two threads
 * planning different graphs take turns here and nowhere else.
 */
#define _POSIX_C_SOURCE 200809L
#include "igraph_adapter.h"
#include "../util/util_internal.h"

#include <igraph.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char ig_reason[256];
static pthread_mutex_t ig_lock = PTHREAD_MUTEX_INITIALIZER;

static void record_error(const char *reason, const char *file, int line, igraph_error_t code)
{
    (void)file;
    (void)line;
    snprintf(ig_reason, sizeof ig_reason, "%s (igraph error %d)", reason ? reason : "?", (int)code);
}

typedef struct {
    igraph_error_handler_t *prev;
    igraph_t graph;
    int have_graph;
} ig_session;

static void session_begin(ig_session *s)
{
    pthread_mutex_lock(&ig_lock);
    ig_reason[0] = '\0';
    s->prev = igraph_set_error_handler(record_error);
    s->have_graph = 0;
}

static void session_end(ig_session *s)
{
    if (s->have_graph)
        igraph_destroy(&s->graph);
    igraph_set_error_handler(s->prev);
    pthread_mutex_unlock(&ig_lock);
}

static remat_status ig_fail(remat_err *err, const char *what)
{
    if (strstr(ig_reason, "memory"))
        return remat_err_set(err, REMAT_ENOMEM, "%s: out of memory in igraph", what);
    return remat_err_set(err, REMAT_EINTERNAL, "%s: igraph failed: %s", what, ig_reason);
}

/* Builds the op graph, with `extra` additional vertices after the ops. */
static remat_status build(ig_session *s, const remat_graph *g, uint32_t extra, const uint32_t *extra_edges,
                          size_t n_extra_edges, igraph_bool_t directed, remat_err *err)
{
    igraph_vector_int_t edges;
    size_t n = 0;
    for (uint32_t k = 0; k < g->n_ops; k++) {
        const remat_op *op = &g->ops[k];
        const uint32_t *in = remat_op_inputs(g, op);
        for (uint32_t i = 0; i < op->n_in; i++)
            n += g->tensors[in[i]].producer != REMAT_NONE;
    }
    if (igraph_vector_int_init(&edges, (igraph_integer_t)(2 * (n + n_extra_edges))) != IGRAPH_SUCCESS)
        return ig_fail(err, "building the op graph");
    igraph_integer_t e = 0;
    for (uint32_t k = 0; k < g->n_ops; k++) {
        const remat_op *op = &g->ops[k];
        const uint32_t *in = remat_op_inputs(g, op);
        for (uint32_t i = 0; i < op->n_in; i++) {
            uint32_t p = g->tensors[in[i]].producer;
            if (p == REMAT_NONE)
                continue;
            VECTOR(edges)[e++] = p;
            VECTOR(edges)[e++] = k;
        }
    }
    for (size_t i = 0; i < 2 * n_extra_edges; i++)
        VECTOR(edges)[e++] = extra_edges[i];
    igraph_error_t rc = igraph_create(&s->graph, &edges, (igraph_integer_t)g->n_ops + extra, directed);
    igraph_vector_int_destroy(&edges);
    if (rc != IGRAPH_SUCCESS)
        return ig_fail(err, "building the op graph");
    s->have_graph = 1;
    return REMAT_OK;
}

/* igraph says only "not a DAG"; find the ops on one cycle ourselves. Kahn's
 * algorithm removes everything not on or behind a cycle; from any remaining
 * op, walking to a remaining predecessor must revisit an op, and the walk
 * from that op back to itself is a cycle. Iterative: no recursion depth. */
static remat_status report_cycle(const remat_graph *g, remat_err *err)
{
    uint32_t n = g->n_ops;
    uint32_t *indeg = remat__array(n, sizeof *indeg);
    uint32_t *queue = remat__array(n, sizeof *queue);
    uint32_t *pred = remat__array(n, sizeof *pred);
    uint32_t *seen = remat__array(n, sizeof *seen);
    uint32_t *succ_off = remat__array((size_t)n + 1, sizeof *succ_off);
    uint32_t *succ = remat__array(g->n_refs ? g->n_refs : 1, sizeof *succ);
    remat_status st = REMAT_ENOMEM;
    if (!indeg || !queue || !pred || !seen || !succ_off || !succ) {
        remat_err_set(err, REMAT_ENOMEM, "out of memory while reporting a cycle");
        goto out;
    }
    for (uint32_t k = 0; k < n; k++) {
        const uint32_t *in = remat_op_inputs(g, &g->ops[k]);
        for (uint32_t i = 0; i < g->ops[k].n_in; i++) {
            uint32_t p = g->tensors[in[i]].producer;
            if (p != REMAT_NONE) {
                indeg[k]++;
                succ_off[p + 1]++;
                pred[k] = p; /* any predecessor; fixed up below to a remaining one */
            }
        }
    }
    for (uint32_t k = 0; k < n; k++)
        succ_off[k + 1] += succ_off[k];
    {
        uint32_t *fill = seen; /* reuse as cursor */
        memcpy(fill, succ_off, n * sizeof *fill);
        for (uint32_t k = 0; k < n; k++) {
            const uint32_t *in = remat_op_inputs(g, &g->ops[k]);
            for (uint32_t i = 0; i < g->ops[k].n_in; i++) {
                uint32_t p = g->tensors[in[i]].producer;
                if (p != REMAT_NONE)
                    succ[fill[p]++] = k;
            }
        }
    }
    uint32_t head = 0, tail = 0;
    for (uint32_t k = 0; k < n; k++)
        if (indeg[k] == 0)
            queue[tail++] = k;
    while (head < tail) {
        uint32_t k = queue[head++];
        for (uint32_t j = succ_off[k]; j < succ_off[k + 1]; j++)
            if (--indeg[succ[j]] == 0)
                queue[tail++] = succ[j];
    }
    /* Every op left has indeg > 0 from another op left. */
    uint32_t start = REMAT_NONE;
    for (uint32_t k = 0; k < n && start == REMAT_NONE; k++)
        if (indeg[k] > 0)
            start = k;
    if (start == REMAT_NONE) {
        st = remat_err_set(err, REMAT_EINTERNAL, "igraph reported a cycle that the check could not find");
        goto out;
    }
    for (uint32_t k = 0; k < n; k++) {
        seen[k] = REMAT_NONE;
        if (indeg[k] == 0)
            continue;
        const uint32_t *in = remat_op_inputs(g, &g->ops[k]);
        for (uint32_t i = 0; i < g->ops[k].n_in; i++) {
            uint32_t p = g->tensors[in[i]].producer;
            if (p != REMAT_NONE && indeg[p] > 0)
                pred[k] = p;
        }
    }
    uint32_t cur = start, step = 0;
    while (seen[cur] == REMAT_NONE) {
        seen[cur] = step++;
        cur = pred[cur];
    }
    /* cur is on the cycle; walk it again collecting names (in forward
     * direction: pred walks backwards, so collect then print reversed). */
    remat_buf b;
    remat_buf_init(&b);
    uint32_t len = 0, x = cur;
    do {
        queue[len++] = x;
        x = pred[x];
    } while (x != cur);
    for (uint32_t i = len; i-- > 0;) {
        if (len - i > 12 && i > 0) {
            remat_buf_printf(&b, " -> ... (%u ops)", len);
            break;
        }
        remat_buf_printf(&b, "%s%s", i == len - 1 ? "" : " -> ", g->ops[queue[i]].id);
    }
    remat_buf_printf(&b, " -> %s", g->ops[queue[len - 1]].id);
    st = remat_err_set(err, REMAT_EGRAPH, "the graph has a cycle: %s", b.failed ? "(out of memory)" : b.data);
    remat_buf_destroy(&b);
out:
    remat__free(indeg);
    remat__free(queue);
    remat__free(pred);
    remat__free(seen);
    remat__free(succ_off);
    remat__free(succ);
    return st;
}

remat_status remat__ig_topo_order(const remat_graph *g, uint32_t *order, remat_err *err)
{
    ig_session s;
    session_begin(&s);
    remat_status st = build(&s, g, 0, NULL, 0, IGRAPH_DIRECTED, err);
    igraph_bool_t dag = 0;
    igraph_vector_int_t res;
    int have_res = 0;
    if (st == REMAT_OK && igraph_is_dag(&s.graph, &dag) != IGRAPH_SUCCESS)
        st = ig_fail(err, "checking for cycles");
    if (st == REMAT_OK && !dag) {
        session_end(&s);
        return report_cycle(g, err);
    }
    if (st == REMAT_OK) {
        if (igraph_vector_int_init(&res, 0) != IGRAPH_SUCCESS)
            st = ig_fail(err, "topological sort");
        else
            have_res = 1;
    }
    if (st == REMAT_OK && igraph_topological_sorting(&s.graph, &res, IGRAPH_OUT) != IGRAPH_SUCCESS)
        st = ig_fail(err, "topological sort");
    if (st == REMAT_OK) {
        if ((uint32_t)igraph_vector_int_size(&res) != g->n_ops)
            st = remat_err_set(err, REMAT_EINTERNAL, "topological sort returned %ld of %u ops",
                               (long)igraph_vector_int_size(&res), g->n_ops);
        else
            for (uint32_t i = 0; i < g->n_ops; i++)
                order[i] = (uint32_t)VECTOR(res)[i];
    }
    if (have_res)
        igraph_vector_int_destroy(&res);
    session_end(&s);
    return st;
}

remat_status remat__ig_reaches_outputs(const remat_graph *g, uint8_t *reach, remat_err *err)
{
    /* One extra vertex, the sink, with an edge from every output's producer:
     * the ops that reach an output are the sink's in-component. */
    uint32_t *extra = remat__array((size_t)g->n_outputs * 2, sizeof *extra);
    if (!extra)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory computing reachability");
    size_t ne = 0;
    for (uint32_t i = 0; i < g->n_outputs; i++) {
        uint32_t p = g->tensors[g->outputs[i]].producer;
        if (p == REMAT_NONE)
            continue;
        extra[2 * ne] = p;
        extra[2 * ne + 1] = g->n_ops;
        ne++;
    }
    ig_session s;
    session_begin(&s);
    remat_status st = build(&s, g, 1, extra, ne, IGRAPH_DIRECTED, err);
    remat__free(extra);
    igraph_vector_int_t res;
    if (st == REMAT_OK && igraph_vector_int_init(&res, 0) != IGRAPH_SUCCESS)
        st = ig_fail(err, "reachability");
    else if (st == REMAT_OK) {
        if (igraph_subcomponent(&s.graph, &res, g->n_ops, IGRAPH_IN) != IGRAPH_SUCCESS)
            st = ig_fail(err, "reachability");
        else {
            memset(reach, 0, g->n_ops);
            for (igraph_integer_t i = 0; i < igraph_vector_int_size(&res); i++)
                if (VECTOR(res)[i] < (igraph_integer_t)g->n_ops)
                    reach[VECTOR(res)[i]] = 1;
        }
        igraph_vector_int_destroy(&res);
    }
    session_end(&s);
    return st;
}

remat_status remat__ig_articulation_ops(const remat_graph *g, uint8_t *cut, remat_err *err)
{
    ig_session s;
    session_begin(&s);
    remat_status st = build(&s, g, 0, NULL, 0, IGRAPH_UNDIRECTED, err);
    igraph_vector_int_t res;
    if (st == REMAT_OK && igraph_vector_int_init(&res, 0) != IGRAPH_SUCCESS)
        st = ig_fail(err, "articulation points");
    else if (st == REMAT_OK) {
        if (igraph_articulation_points(&s.graph, &res) != IGRAPH_SUCCESS)
            st = ig_fail(err, "articulation points");
        else {
            memset(cut, 0, g->n_ops);
            for (igraph_integer_t i = 0; i < igraph_vector_int_size(&res); i++)
                cut[VECTOR(res)[i]] = 1;
        }
        igraph_vector_int_destroy(&res);
    }
    session_end(&s);
    return st;
}

remat_status remat__ig_st_mincut(uint32_t n, const uint32_t *edges, size_t n_edges, const double *cap, uint32_t s,
                                 uint32_t t, uint8_t *side, double *value, remat_err *err)
{
    ig_session S;
    session_begin(&S);
    igraph_vector_int_t ev, part;
    igraph_vector_t capv;
    int have_ev = 0, have_cap = 0, have_part = 0;
    remat_status st = REMAT_OK;
    if (igraph_vector_int_init(&ev, (igraph_integer_t)(2 * n_edges)) != IGRAPH_SUCCESS) {
        st = ig_fail(err, "minimum cut");
        goto out;
    }
    have_ev = 1;
    for (size_t i = 0; i < 2 * n_edges; i++)
        VECTOR(ev)[i] = edges[i];
    if (igraph_vector_init(&capv, (igraph_integer_t)n_edges) != IGRAPH_SUCCESS) {
        st = ig_fail(err, "minimum cut");
        goto out;
    }
    have_cap = 1;
    for (size_t i = 0; i < n_edges; i++)
        VECTOR(capv)[i] = cap[i];
    if (igraph_create(&S.graph, &ev, (igraph_integer_t)n, IGRAPH_DIRECTED) != IGRAPH_SUCCESS) {
        st = ig_fail(err, "minimum cut");
        goto out;
    }
    S.have_graph = 1;
    if (igraph_vector_int_init(&part, 0) != IGRAPH_SUCCESS) {
        st = ig_fail(err, "minimum cut");
        goto out;
    }
    have_part = 1;
    igraph_real_t v = 0;
    if (igraph_maxflow(&S.graph, &v, NULL, NULL, &part, NULL, s, t, &capv, NULL) != IGRAPH_SUCCESS) {
        st = ig_fail(err, "minimum cut");
        goto out;
    }
    memset(side, 0, n);
    for (igraph_integer_t i = 0; i < igraph_vector_int_size(&part); i++)
        side[VECTOR(part)[i]] = 1;
    *value = v;
out:
    if (have_part)
        igraph_vector_int_destroy(&part);
    if (have_cap)
        igraph_vector_destroy(&capv);
    if (have_ev)
        igraph_vector_int_destroy(&ev);
    session_end(&S);
    return st;
}

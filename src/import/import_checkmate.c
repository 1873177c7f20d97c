/*
 * import_checkmate.c - Checkmate/Moccasin node-link training graphs to
 * remat-graph JSON (the mapping is documented in remat/import.h).
 *
 * The file is read in passes, each of which can name the JSON path of what
 * it refuses: nodes (ids, flags, costs), links (endpoints), then the roles
 * (which backward node is the loss, which forward node each backward node
 * belongs to), then the output text. Node ids may be JSON integers or
 * strings, as networkx writes whatever the graph used; they are compared
 * through one canonical key ("#12" or "$name") so that 12 and "12" stay
 * different nodes, as they are in networkx.
 *
 * The output is text, not a remat_graph: the converted file is what users
 * keep and plan on, and loading it through the one loader checks it by the
 * same rules as any other graph (the CLI does that before writing it).
 */
#include "import_internal.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

typedef struct {
    char *key;          /* canonical id: "#123" or "$text" (owned) */
    char *id_json;      /* the id as JSON text, for attrs (owned) */
    const char *name;   /* the node's name (borrowed from the cJSON tree), or NULL */
    char *rid;          /* the remat id of a forward node or the loss (owned) */
    int backward;       /* the file's flag */
    int is_loss;
    int name_shared;    /* another forward node has the same name: names cannot match it */
    int has_int_id;
    long long int_id;
    uint64_t cpu, ram;
    uint32_t bwd;       /* forward node: its backward node, or NONE */
    uint32_t fwd;       /* backward node: the forward node it belongs to, or NONE */
    uint32_t in_off, n_in;   /* predecessors, a slice of cx.preds (node order, no repeats) */
    uint32_t n_fwd_succ;     /* forward or loss successors (for sinks of an inference graph) */
} cnode;

typedef struct {
    const char *source;
    remat_err *err;
    cnode *nodes;
    uint32_t n;
    uint32_t *preds;
    remat_strmap keys;  /* canonical id -> node */
    remat_strmap names; /* forward name -> node (names used once only) */
    remat_strmap rids;  /* remat ids in use */
    int keys_ok, names_ok, rids_ok;
} cx;

/* Records "source: path: message" (REMAT_EGRAPH), with the file and the
 * JSON path in err's location, and returns 0. */
static int bad(cx *c, const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static int bad(cx *c, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    remat__err_vat(c->err, REMAT_EGRAPH, c->source, 0, 0, path, NULL, fmt, ap);
    va_end(ap);
    return 0;
}

/* bad() about one node: its id also goes into err's location. */
static int bad_node(cx *c, const cnode *x, const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static int bad_node(cx *c, const cnode *x, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    remat__err_vat(c->err, REMAT_EGRAPH, c->source, 0, 0, path, x->key ? x->key + 1 : NULL, fmt, ap);
    va_end(ap);
    return 0;
}

static int nomem(cx *c)
{
    remat_err_set(c->err, REMAT_ENOMEM, "%s: out of memory converting the graph", c->source);
    return 0;
}

/* A node's name for messages: its name, else its id. */
static const char *label(const cnode *v)
{
    return v->name ? v->name : v->key + 1;
}

static char *dup_printf(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

static char *dup_printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *s = remat__malloc((size_t)n + 1);
    if (!s)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* A node id: an integral JSON number or a string. */
static int node_key(cx *c, const cJSON *v, const char *path, cnode *out)
{
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (!isfinite(d) || d != floor(d) || fabs(d) > 9007199254740991.0)
            return bad(c, path, "a numeric node id must be a whole number");
        out->has_int_id = 1;
        out->int_id = (long long)d;
        out->key = dup_printf("#%lld", out->int_id);
        out->id_json = dup_printf("%lld", out->int_id);
    } else if (cJSON_IsString(v)) {
        out->key = dup_printf("$%s", v->valuestring);
        remat_buf b;
        remat_buf_init(&b);
        remat_buf_json_str(&b, v->valuestring);
        out->id_json = b.failed ? NULL : b.data;
        if (b.failed)
            remat_buf_destroy(&b);
    } else {
        return bad(c, path, "a node id must be a number or a string");
    }
    return out->key && out->id_json ? 1 : nomem(c);
}

/* A cost: a whole non-negative JSON number up to 2^53 (networkx writes
 * Python ints as JSON numbers; a profiler's 110.0 is accepted). */
static int get_cost(cx *c, const cJSON *obj, const char *key, const char *path, uint64_t *out)
{
    char p[96];
    snprintf(p, sizeof p, "%s.%s", path, key);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        return bad(c, p, "missing (every Checkmate node has cost_cpu and cost_ram)");
    if (!cJSON_IsNumber(v))
        return bad(c, p, "must be a number");
    double d = v->valuedouble;
    if (!isfinite(d) || d < 0 || d != floor(d) || d > 9007199254740991.0)
        return bad(c, p, "must be a whole number from 0 to 2^53-1");
    *out = (uint64_t)d;
    return 1;
}

static int read_nodes(cx *c, const cJSON *arr)
{
    c->n = (uint32_t)cJSON_GetArraySize(arr);
    if (c->n == 0)
        return bad(c, "nodes", "no nodes");
    c->nodes = remat__array(c->n, sizeof *c->nodes);
    if (!c->nodes)
        return nomem(c);
    if (remat_strmap_init(&c->keys, c->n) != REMAT_OK)
        return nomem(c);
    c->keys_ok = 1;
    uint32_t i = 0;
    char path[64];
    for (const cJSON *v = arr->child; v; v = v->next, i++) {
        cnode *x = &c->nodes[i];
        x->bwd = x->fwd = NONE;
        snprintf(path, sizeof path, "nodes[%u]", i);
        if (!cJSON_IsObject(v))
            return bad(c, path, "must be an object {id, name, backward, cost_cpu, cost_ram}");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(v, "id");
        char p[80];
        snprintf(p, sizeof p, "%s.id", path);
        if (!id)
            return bad(c, p, "missing");
        if (!node_key(c, id, p, x))
            return 0;
        uint32_t prev;
        remat_status st = remat_strmap_put(&c->keys, x->key, i, &prev);
        if (st == REMAT_EINVAL)
            return bad_node(c, x, p, "node id %s is also nodes[%u]'s", x->key + 1, prev);
        if (st != REMAT_OK)
            return nomem(c);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(v, "name");
        snprintf(p, sizeof p, "%s.name", path);
        if (name && !cJSON_IsString(name) && !cJSON_IsNumber(name))
            return bad(c, p, "must be a string");
        x->name = cJSON_IsString(name) && name->valuestring[0] ? name->valuestring : NULL;
        const cJSON *bw = cJSON_GetObjectItemCaseSensitive(v, "backward");
        snprintf(p, sizeof p, "%s.backward", path);
        if (bw && !cJSON_IsBool(bw) && !cJSON_IsNull(bw))
            return bad(c, p, "must be true, false or null");
        x->backward = cJSON_IsTrue(bw);
        if (!get_cost(c, v, "cost_cpu", path, &x->cpu) || !get_cost(c, v, "cost_ram", path, &x->ram))
            return 0;
    }
    return 1;
}

static int endpoint(cx *c, const cJSON *link, const char *key, const char *path, uint32_t *out)
{
    char p[80];
    snprintf(p, sizeof p, "%s.%s", path, key);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(link, key);
    if (!v)
        return bad(c, p, "missing");
    cnode tmp = {0};
    if (!node_key(c, v, p, &tmp)) {
        remat__free(tmp.key);
        remat__free(tmp.id_json);
        return 0;
    }
    int found = remat_strmap_get(&c->keys, tmp.key, out);
    if (!found)
        bad(c, p, "unknown node id %s", tmp.key + 1);
    remat__free(tmp.key);
    remat__free(tmp.id_json);
    return found;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Reads the links into per-node predecessor lists (counting sort, then each
 * list sorted and without repeats: a multigraph's parallel edges are one
 * read). */
static int read_links(cx *c, const cJSON *arr, remat_import_summary *sum)
{
    uint32_t m = (uint32_t)cJSON_GetArraySize(arr);
    sum->links = m;
    uint32_t *src = remat__array(m ? m : 1, sizeof *src), *dst = remat__array(m ? m : 1, sizeof *dst);
    uint32_t *count = remat__array((size_t)c->n + 1, sizeof *count);
    c->preds = remat__array(m ? m : 1, sizeof *c->preds);
    int ok = src && dst && count && c->preds ? 1 : nomem(c);
    uint32_t i = 0;
    char path[64];
    for (const cJSON *l = ok ? arr->child : NULL; l && ok; l = l->next, i++) {
        snprintf(path, sizeof path, "links[%u]", i);
        if (!cJSON_IsObject(l)) {
            ok = bad(c, path, "must be an object {source, target}");
            break;
        }
        ok = endpoint(c, l, "source", path, &src[i]) && endpoint(c, l, "target", path, &dst[i]);
        if (ok && src[i] == dst[i])
            ok = bad_node(c, &c->nodes[src[i]], path, "a node that reads itself (%s)", label(&c->nodes[src[i]]));
        if (ok)
            count[dst[i] + 1]++;
    }
    if (ok) {
        for (uint32_t v = 0; v < c->n; v++)
            count[v + 1] += count[v];
        for (uint32_t v = 0; v < c->n; v++)
            c->nodes[v].in_off = count[v];
        for (uint32_t k = 0; k < m; k++)
            c->preds[count[dst[k]]++] = src[k];
        for (uint32_t v = 0; v < c->n; v++) {
            cnode *x = &c->nodes[v];
            uint32_t *p = c->preds + x->in_off, n = count[v] - x->in_off, w = 0;
            qsort(p, n, sizeof *p, cmp_u32);
            for (uint32_t k = 0; k < n; k++)
                if (k == 0 || p[k] != p[k - 1])
                    p[w++] = p[k];
            x->n_in = w;
        }
    }
    remat__free(src);
    remat__free(dst);
    remat__free(count);
    return ok;
}

/* The loss is the backward node that no backward node feeds. */
static int find_loss(cx *c, uint32_t *loss)
{
    *loss = NONE;
    uint32_t n_bwd = 0, found = 0, first[3];
    for (uint32_t v = 0; v < c->n; v++) {
        cnode *x = &c->nodes[v];
        if (!x->backward)
            continue;
        n_bwd++;
        int fed = 0;
        for (uint32_t k = 0; k < x->n_in; k++)
            fed |= c->nodes[c->preds[x->in_off + k]].backward;
        if (!fed) {
            if (found < 3)
                first[found] = v;
            found++;
        }
    }
    if (n_bwd == 0)
        return 1; /* an inference graph */
    if (found == 0)
        return bad(c, "nodes", "every backward node is fed by another: no loss node (the backward node no backward "
                               "node feeds)");
    if (found > 1)
        return bad(c, "nodes",
                   "%u backward nodes are fed by no backward node (%s, %s%s): cannot tell which is the loss", found,
                   label(&c->nodes[first[0]]), label(&c->nodes[first[1]]), found > 2 ? ", ..." : "");
    *loss = first[0];
    c->nodes[*loss].is_loss = 1;
    return 1;
}

/* Every edge must run forward -> forward, forward -> backward or backward ->
 * backward (the loss counts as forward: it is an op of remat's forward
 * graph). */
static int check_roles(cx *c)
{
    for (uint32_t v = 0; v < c->n; v++) {
        const cnode *x = &c->nodes[v];
        int x_bwd = x->backward && !x->is_loss;
        for (uint32_t k = 0; k < x->n_in; k++) {
            cnode *u = &c->nodes[c->preds[x->in_off + k]];
            int u_bwd = u->backward && !u->is_loss;
            if (u_bwd && !x_bwd) {
                char path[64];
                snprintf(path, sizeof path, "nodes[%u]", v);
                return bad_node(c, x, path, "%s node '%s' reads backward node '%s'",
                                x->is_loss ? "the loss" : "forward", label(x), label(u));
            }
            if (!u_bwd && !x_bwd)
                u->n_fwd_succ++;
        }
    }
    return 1;
}

/* "X_backward" and "Grad <X>" name X's backward node. Returns the length of
 * X within name, or 0. */
static size_t forward_name(const char *name, size_t *start)
{
    size_t n = strlen(name);
    static const char suffix[] = "_backward";
    *start = 0;
    if (n > sizeof suffix - 1 && strcmp(name + n - (sizeof suffix - 1), suffix) == 0)
        return n - (sizeof suffix - 1);
    if (n > 7 && strncmp(name, "Grad <", 6) == 0 && name[n - 1] == '>') {
        *start = 6;
        return n - 7;
    }
    return 0;
}

static int match_backward(cx *c, remat_import_summary *sum)
{
    if (remat_strmap_init(&c->names, c->n) != REMAT_OK)
        return nomem(c);
    c->names_ok = 1;
    /* A name that two forward nodes share is useless for matching: both are
     * marked, and the layout rule decides for their backward nodes. */
    for (uint32_t v = 0; v < c->n; v++) {
        cnode *x = &c->nodes[v];
        if (x->backward || !x->name)
            continue;
        uint32_t prev;
        remat_status st = remat_strmap_put(&c->names, x->name, v, &prev);
        if (st == REMAT_EINVAL)
            x->name_shared = c->nodes[prev].name_shared = 1;
        else if (st != REMAT_OK)
            return nomem(c);
    }
    char buf[512];
    for (uint32_t v = 0; v < c->n; v++) {
        cnode *x = &c->nodes[v];
        if (!x->backward || x->is_loss)
            continue;
        sum->backward_nodes++;
        uint32_t f = NONE;
        size_t start, len = x->name ? forward_name(x->name, &start) : 0;
        if (len && len < sizeof buf) {
            memcpy(buf, x->name + start, len);
            buf[len] = '\0';
            uint32_t w;
            if (remat_strmap_get(&c->names, buf, &w) && !c->nodes[w].name_shared)
                f = w;
        }
        if (f == NONE && x->has_int_id) {
            /* Checkmate's layout (dfgraph_from_keras): ids 0..n-1 forward,
             * n the loss, and the backward node of i is (2n) - i. */
            long long mirror = (long long)c->n - 1 - x->int_id;
            char key[32];
            snprintf(key, sizeof key, "#%lld", mirror);
            uint32_t w;
            if (remat_strmap_get(&c->keys, key, &w) && !c->nodes[w].backward) {
                f = w;
                sum->by_layout++;
            }
        }
        char path[64];
        snprintf(path, sizeof path, "nodes[%u]", v);
        if (f == NONE)
            return bad_node(c, x, path,
                            "backward node '%s' belongs to no forward node (by name 'X_backward' or 'Grad <X>', or "
                            "by Checkmate's layout: backward of node i is node %u - i)",
                            label(x), c->n - 1);
        if (c->nodes[f].bwd != NONE)
            return bad_node(c, x, path, "backward nodes '%s' and '%s' both belong to forward node '%s'",
                            label(&c->nodes[c->nodes[f].bwd]), label(x), label(&c->nodes[f]));
        c->nodes[f].bwd = v;
        x->fwd = f;
    }
    return 1;
}

/* remat ids: the node's name when it is free, else name#id (or n<id> for a
 * node without a name). "input" is taken first, by the implicit input. */
static int assign_ids(cx *c)
{
    if (remat_strmap_init(&c->rids, c->n + 1) != REMAT_OK)
        return nomem(c);
    c->rids_ok = 1;
    if (remat_strmap_put(&c->rids, "input", NONE, NULL) != REMAT_OK)
        return nomem(c);
    for (uint32_t v = 0; v < c->n; v++) {
        cnode *x = &c->nodes[v];
        if (x->backward && !x->is_loss)
            continue;
        x->rid = x->name ? dup_printf("%s", x->name) : dup_printf("n%s", x->key + 1);
        if (!x->rid)
            return nomem(c);
        uint32_t prev;
        remat_status st = remat_strmap_put(&c->rids, x->rid, v, &prev);
        if (st == REMAT_EINVAL) {
            char *alt = dup_printf("%s#%s", x->name ? x->name : "n", x->key + 1);
            if (!alt)
                return nomem(c);
            remat__free(x->rid);
            x->rid = alt;
            st = remat_strmap_put(&c->rids, x->rid, v, &prev);
            if (st == REMAT_EINVAL) {
                char path[64];
                snprintf(path, sizeof path, "nodes[%u]", v);
                return bad_node(c, x, path, "cannot give node '%s' an id of its own ('%s' is taken)", label(x), x->rid);
            }
        }
        if (st != REMAT_OK)
            return nomem(c);
    }
    return 1;
}

static void put_id_list(remat_buf *b, const char *key, const char *const *ids, uint32_t n)
{
    remat_buf_printf(b, ", \"%s\": [", key);
    for (uint32_t k = 0; k < n; k++) {
        if (k)
            remat_buf_puts(b, ", ");
        remat_buf_json_str(b, ids[k]);
    }
    remat_buf_puts(b, "]");
}

/* The consumer-side rule (dfgraph_from_keras, checkmate/tf2_keras/
 * extraction.py: for a layer C reading I it adds I -> C, bwd(C) -> bwd(I) and,
 * with next_outputs_deps, C -> bwd(I); with output_dep, I -> bwd(I)): the
 * gradient node bwd(I) is the gradient of I's output, computed by the backward
 * rule of I's consumers. In remat that work is BWD(C), which writes the
 * gradients of C's inputs. When I has several consumers, bwd(I) is one node
 * that can only run once every consumer's gradient exists; in remat's
 * backward (reverse forward order) that moment is the BWD of I's consumer
 * that comes first in forward order, so that step carries bwd(I)'s whole
 * cost and every forward value bwd(I) reads; the other consumers' BWD steps
 * only accumulate into grad(I). A gradient node of a forward node that
 * nothing reads has no consumer: it stays with its own node's BWD.
 * carrier[v] is the op (node index) whose BWD carries node v's gradient
 * node, or NONE. */
static void assign_carriers(const cx *c, uint32_t *carrier, remat_import_summary *sum)
{
    for (uint32_t v = 0; v < c->n; v++)
        carrier[v] = NONE;
    for (uint32_t v = 0; v < c->n; v++) {
        const cnode *x = &c->nodes[v];
        if (x->backward && !x->is_loss)
            continue;
        for (uint32_t k = 0; k < x->n_in; k++) {
            uint32_t u = c->preds[x->in_off + k];
            const cnode *ux = &c->nodes[u];
            if ((ux->backward && !ux->is_loss) || ux->bwd == NONE)
                continue;
            if (carrier[u] == NONE)
                carrier[u] = v; /* v runs in node order: the first consumer */
        }
    }
    for (uint32_t v = 0; v < c->n; v++) {
        const cnode *x = &c->nodes[v];
        if (x->bwd == NONE)
            continue;
        if (carrier[v] == NONE) {
            carrier[v] = v;
            sum->own_step++;
        } else if (x->n_fwd_succ > 1) {
            sum->shared++;
        }
    }
}

static int write_graph(cx *c, uint32_t loss, const char *name, remat_buf *b, remat_import_summary *sum)
{
    int training = loss != NONE;
    if (!training) {
        uint32_t sinks = 0;
        for (uint32_t v = 0; v < c->n; v++)
            sinks += c->nodes[v].n_fwd_succ == 0;
        if (sinks == 0)
            return bad(c, "nodes", "no backward nodes and no forward node that nothing reads: the graph has no "
                                   "output (a cycle?)");
    }
    const char **ids = remat__array((size_t)c->n + 1, sizeof *ids);
    uint32_t *carrier = remat__array(c->n, sizeof *carrier);
    uint32_t *reads = remat__array((size_t)c->n + 1, sizeof *reads);
    uint32_t *carried = remat__array((size_t)c->n + 1, sizeof *carried);
    uint32_t *mark = remat__calloc(c->n, sizeof *mark);
    if (!ids || !carrier || !reads || !carried || !mark) {
        remat__free(mark);
        remat__free(ids);
        remat__free(carrier);
        remat__free(reads);
        remat__free(carried);
        return nomem(c);
    }
    assign_carriers(c, carrier, sum);
    uint32_t fwd = 0;
    for (uint32_t v = 0; v < c->n; v++)
        fwd += !c->nodes[v].backward;
    sum->forward_nodes = fwd;
    remat_buf_puts(b, "{\"format\": \"remat-graph\", \"version\": 1, \"name\": ");
    remat_buf_json_str(b, name);
    remat_buf_puts(b, ",\n \"meta\": {\"imported_from\": \"checkmate\", \"source\": ");
    remat_buf_json_str(b, c->source);
    remat_buf_printf(b, ", \"forward_nodes\": %u, \"backward_nodes\": %u", fwd, sum->backward_nodes);
    if (training) {
        remat_buf_puts(b, ", \"loss\": ");
        remat_buf_json_str(b, c->nodes[loss].rid);
    }
    remat_buf_puts(b, ", \"mapping\": \"see remat/import.h: forward node -> op (bytes = cost_ram, flops = cost_cpu); "
                      "the gradient node of X's output -> bwd_flops and saves of the BWD step of X's first "
                      "consumer (the backward rule that computes it)\"},\n");
    remat_buf_printf(b, " \"inputs\": [{\"id\": \"input\", \"bytes\": 0%s}],\n \"ops\": [",
                     training ? ", \"requires_grad\": true" : "");
    uint32_t n_ops = 0;
    int ok = 1;
    for (uint32_t v = 0; v < c->n && ok; v++) {
        const cnode *x = &c->nodes[v];
        if (x->backward && !x->is_loss)
            continue;
        remat_buf_puts(b, n_ops++ ? ",\n  {\"id\": " : "\n  {\"id\": ");
        remat_buf_json_str(b, x->rid);
        remat_buf_printf(b, ", \"op\": \"%s\"", x->is_loss ? "checkmate_loss" : "checkmate");
        uint32_t n = 0;
        for (uint32_t k = 0; k < x->n_in; k++) {
            const cnode *u = &c->nodes[c->preds[x->in_off + k]];
            if (!u->backward || u->is_loss)
                ids[n++] = u->rid;
        }
        if (n == 0)
            ids[n++] = "input"; /* Checkmate leaves the input implicit in the first node */
        put_id_list(b, "inputs", ids, n);
        remat_buf_printf(b, ", \"bytes\": %" PRIu64 ", \"flops\": %" PRIu64, x->ram, x->cpu);
        /* The gradient nodes this op's BWD carries: those of its inputs it is
         * the first consumer of (preds are in node order), and its own when
         * nothing reads it. */
        uint32_t n_carried = 0, n_reads = 0;
        for (uint32_t k = 0; k < x->n_in; k++) {
            uint32_t u = c->preds[x->in_off + k];
            if (carrier[u] == v && u != v)
                carried[n_carried++] = c->nodes[u].bwd;
        }
        if (x->bwd != NONE && carrier[v] == v)
            carried[n_carried++] = x->bwd;
        uint64_t bwd_flops = 0;
        for (uint32_t j = 0; j < n_carried; j++) {
            const cnode *g = &c->nodes[carried[j]];
            if (!remat_u64_add(bwd_flops, g->cpu, &bwd_flops) || bwd_flops > 9007199254740991ull) {
                char path[64];
                snprintf(path, sizeof path, "nodes[%u]", v);
                ok = bad_node(c, x, path, "the backward cost op '%s' carries exceeds 2^53-1", label(x));
                break;
            }
            for (uint32_t k = 0; k < g->n_in; k++) {
                uint32_t u = c->preds[g->in_off + k];
                /* mark: each value once per op, so reads never outgrows n */
                if ((!c->nodes[u].backward || c->nodes[u].is_loss) && mark[u] != v + 1) {
                    mark[u] = v + 1;
                    reads[n_reads++] = u;
                }
            }
        }
        if (!ok)
            break;
        qsort(reads, n_reads, sizeof *reads, cmp_u32);
        uint32_t nb = 0;
        for (uint32_t k = 0; k < n_reads; k++)
            ids[nb++] = c->nodes[reads[k]].rid;
        if (!x->is_loss && x->bwd == NONE)
            sum->without_backward++;
        remat_buf_printf(b, ", \"bwd_flops\": %" PRIu64, bwd_flops);
        sum->saves += nb;
        put_id_list(b, "saves", ids, nb);
        remat_buf_printf(b, ", \"attrs\": {\"node\": %s", x->id_json);
        if (x->bwd != NONE)
            remat_buf_printf(b, ", \"backward_node\": %s", c->nodes[x->bwd].id_json);
        if (n_carried) {
            remat_buf_puts(b, ", \"computes\": [");
            for (uint32_t j = 0; j < n_carried; j++)
                remat_buf_printf(b, "%s%s", j ? ", " : "", c->nodes[carried[j]].id_json);
            remat_buf_puts(b, "]");
        }
        remat_buf_puts(b, "}}");
    }
    if (ok) {
        remat_buf_puts(b, "],\n \"outputs\": [");
        if (training) {
            remat_buf_json_str(b, c->nodes[loss].rid);
        } else {
            /* An inference graph: every forward node nothing reads is an output. */
            uint32_t k = 0;
            for (uint32_t v = 0; v < c->n; v++) {
                if (c->nodes[v].n_fwd_succ == 0) {
                    if (k++)
                        remat_buf_puts(b, ", ");
                    remat_buf_json_str(b, c->nodes[v].rid);
                }
            }
        }
        remat_buf_puts(b, "]}\n");
    }
    remat__free(ids);
    remat__free(carrier);
    remat__free(reads);
    remat__free(carried);
    remat__free(mark);
    return !ok ? 0 : b->failed ? nomem(c) : 1;
}

static void line_col(const char *text, size_t len, const char *at, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (const char *q = text; at && q < at && q < text + len; q++) {
        if (*q == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

remat_status remat_import_checkmate(const char *text, size_t len, const char *source, const char *name, char **out,
                                    size_t *out_len, remat_import_summary *summary, remat_err *err)
{
    remat_err local;
    remat__import_begin(&err, &local, out, out_len, &source, "<checkmate>");
    remat_import_summary sum = {0};
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        int line, col;
        line_col(text, len, end, &line, &col);
        remat__err_at(err, REMAT_EPARSE, source, (uint32_t)line, col, NULL, NULL, "not valid JSON near here");
        return err->code;
    }
    cx c = {.source = source, .err = err};
    remat_buf b;
    remat_buf_init(&b);
    int ok = 1;
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(root, "nodes");
    const cJSON *links = cJSON_GetObjectItemCaseSensitive(root, "links");
    if (!links)
        links = cJSON_GetObjectItemCaseSensitive(root, "edges"); /* networkx >= 3.4 may say "edges" */
    if (!cJSON_IsObject(root))
        ok = bad(&c, "", "top level must be a node-link object {\"nodes\": [...], \"links\": [...]}");
    else if (!cJSON_IsArray(nodes))
        ok = bad(&c, "nodes", "missing or not an array (is this networkx node-link JSON?)");
    else if (!cJSON_IsArray(links))
        ok = bad(&c, "links", "missing or not an array (is this networkx node-link JSON?)");
    uint32_t loss = NONE;
    ok = ok && read_nodes(&c, nodes) && read_links(&c, links, &sum) && find_loss(&c, &loss) && check_roles(&c) &&
         match_backward(&c, &sum) && assign_ids(&c);
    if (ok) {
        if (!name) {
            const cJSON *gr = cJSON_GetObjectItemCaseSensitive(root, "graph");
            const cJSON *gn = cJSON_IsObject(gr) ? cJSON_GetObjectItemCaseSensitive(gr, "name") : NULL;
            name = cJSON_IsString(gn) && gn->valuestring[0] ? gn->valuestring : "checkmate";
        }
        ok = write_graph(&c, loss, name, &b, &sum);
    }
    for (uint32_t v = 0; c.nodes && v < c.n; v++) {
        remat__free(c.nodes[v].key);
        remat__free(c.nodes[v].id_json);
        remat__free(c.nodes[v].rid);
    }
    remat__free(c.nodes);
    remat__free(c.preds);
    if (c.keys_ok)
        remat_strmap_destroy(&c.keys);
    if (c.names_ok)
        remat_strmap_destroy(&c.names);
    if (c.rids_ok)
        remat_strmap_destroy(&c.rids);
    cJSON_Delete(root);
    if (ok && summary)
        *summary = sum;
    return remat__import_finish(ok, &b, out, out_len, err);
}

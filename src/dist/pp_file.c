/*
 * pp_file.c - the pipeline plan file (format "remat-pp-plan", version 1):
 * every stage's plan, written by `remat plan --pp ... -o FILE` and replayed
 * by `remat replay GRAPH FILE`.
 *
 * The file names the whole graph (name and fingerprint), the schedule
 * (kind, devices, microbatches, chunks) and the cuts, and holds each
 * virtual stage's plan as an ordinary plan document ("remat-plan") for that
 * stage's own graph. Stage graphs are a function of the whole graph and the
 * cuts (pp_stage.c), so reading rebuilds them and each stage's plan is
 * checked against its stage graph's fingerprint by the plan reader itself:
 * a file cut differently, or for another graph, is refused with the names.
 * Every stage's schedule is replayed again on load (the memory figures are
 * recomputed, never read), then measured and simulated by the same steps
 * that planning uses (pp_internal.h), so `replay` of a written file prints
 * the figures `plan` printed.
 */
#include "pp_internal.h"
#include "../load/json_glue.h"
#include "../util/util_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

char *remat_pp_plan_write(const remat_analysis *a, const remat_pp_result *r, size_t *len, remat_err *err)
{
    const remat_pp_config *c = &r->config;
    remat_buf b;
    remat_buf_init(&b);
    remat_buf_puts(&b, "{\"format\": \"remat-pp-plan\", \"version\": 1,\n \"graph\": {\"name\": ");
    remat_buf_json_str(&b, a->g->name ? a->g->name : "");
    remat_buf_printf(&b, ", \"fingerprint\": \"%016" PRIx64 "\"},\n", a->g->fingerprint);
    remat_buf_printf(&b, " \"pipeline\": {\"schedule\": \"%s\", \"devices\": %u, \"microbatches\": %u, \"chunks\": %u},\n",
                     remat_pp_kind_name(c->kind), c->stages, c->microbatches, c->chunks);
    if (r->budget)
        remat_buf_printf(&b, " \"budget\": %" PRIu64 ",\n", r->budget);
    remat_buf_puts(&b, " \"cuts\": [");
    for (uint32_t v = 0; v < r->n_stages; v++)
        remat_buf_printf(&b, "%u, ", r->stages[v].first);
    remat_buf_printf(&b, "%u],\n", r->n_stages ? r->stages[r->n_stages - 1].end : 0);
    /* The ledger's state per stage, when there is any: the replay of each
     * stage counts it, so reading the file back must too. */
    int any = 0;
    for (uint32_t v = 0; v < r->n_stages; v++) {
        const remat_exec_extras *x = &r->stages[v].extras;
        any |= x->optimizer_state || x->master_weights || x->frozen_copies || x->comm_buffers ||
               x->optimizer_workspace || x->workspace;
    }
    if (any) {
        remat_buf_puts(&b, " \"stage_state\": [");
        for (uint32_t v = 0; v < r->n_stages; v++) {
            const remat_exec_extras *x = &r->stages[v].extras;
            remat_buf_printf(&b,
                             "%s{\"optimizer_state\": %" PRIu64 ", \"master_weights\": %" PRIu64
                             ", \"frozen_copies\": %" PRIu64 ", \"comm_buffers\": %" PRIu64
                             ", \"optimizer_workspace\": %" PRIu64 ", \"workspace\": %" PRIu64 "}",
                             v ? ",\n   " : "", x->optimizer_state, x->master_weights, x->frozen_copies,
                             x->comm_buffers, x->optimizer_workspace, x->workspace);
        }
        remat_buf_puts(&b, "],\n");
    }
    remat_buf_puts(&b, " \"stages\": [\n");
    remat_status s = REMAT_OK;
    for (uint32_t v = 0; v < r->n_stages && s == REMAT_OK; v++) {
        const remat_pp_stage *st = &r->stages[v];
        stage_graph *sg = remat__calloc(1, sizeof *sg);
        remat_pp_stage scratch;
        memset(&scratch, 0, sizeof scratch);
        s = sg ? remat__pp_open_stage(a, st->first, st->end, v, sg, &scratch, err)
               : remat_err_set(err, REMAT_ENOMEM, "out of memory writing a pipeline plan");
        if (s == REMAT_OK) {
            size_t plen;
            char *doc = remat_report_plan(sg->a, &st->plan, &st->replay, &plen, err);
            if (!doc)
                s = err->code ? err->code : REMAT_ENOMEM;
            else {
                /* The plan document ends with "}\n": one array element. */
                while (plen && (doc[plen - 1] == '\n' || doc[plen - 1] == ' '))
                    plen--;
                remat_buf_putn(&b, doc, plen);
                remat_buf_puts(&b, v + 1 < r->n_stages ? ",\n" : "\n");
                remat_free(doc);
            }
        }
        remat__pp_close_stages(sg, sg ? 1 : 0);
    }
    if (s != REMAT_OK) {
        remat_buf_destroy(&b);
        return NULL;
    }
    remat_buf_puts(&b, "]}\n");
    return remat_buf_finish(&b, len, err, "pipeline plan");
}

static remat_status bad(remat_err *err, const char *source, const char *path, const char *what)
{
    return remat_err_set(err, REMAT_EPARSE, "%s: %s: %s", source, path, what);
}

/* A whole number in [lo, hi] at obj.key. */
static remat_status count(const cJSON *obj, const char *key, const char *path, uint32_t lo, uint32_t hi,
                          const char *source, uint32_t *out, remat_err *err)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(x) || x->valuedouble != (double)(uint32_t)x->valuedouble || x->valuedouble < lo ||
        x->valuedouble > hi) {
        char msg[96];
        snprintf(msg, sizeof msg, "must be a whole number from %u to %u", lo, hi);
        return bad(err, source, path, msg);
    }
    *out = (uint32_t)x->valuedouble;
    return REMAT_OK;
}

/* Reads the header into c and cuts (n + 1 entries allocated here). */
static remat_status header(const remat_analysis *a, const cJSON *root, const char *source, remat_pp_config *c,
                           uint32_t **cuts, remat_err *err)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsString(f) || strcmp(f->valuestring, "remat-pp-plan") != 0)
        return bad(err, source, "format", "must be \"remat-pp-plan\"");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (!cJSON_IsNumber(ver) || ver->valuedouble != 1)
        return bad(err, source, "version", "must be 1 (the only version this remat reads)");
    const cJSON *gr = cJSON_GetObjectItemCaseSensitive(root, "graph");
    const cJSON *gname = cJSON_GetObjectItemCaseSensitive(gr, "name");
    const cJSON *gfp = cJSON_GetObjectItemCaseSensitive(gr, "fingerprint");
    if (!cJSON_IsObject(gr) || !cJSON_IsString(gname) || !cJSON_IsString(gfp))
        return bad(err, source, "graph", "must be an object {\"name\", \"fingerprint\"}");
    unsigned long long fp = 0;
    char tail;
    if (sscanf(gfp->valuestring, "%16llx%c", &fp, &tail) != 1)
        return bad(err, source, "graph.fingerprint", "must be a hex string");
    if (fp != a->g->fingerprint)
        return remat_err_set(err, REMAT_EPARSE,
                             "%s: this pipeline plan was made for graph '%.80s' (fingerprint %016llx), not for graph "
                             "'%.80s' (fingerprint %016llx)",
                             source, gname->valuestring, fp, a->g->name ? a->g->name : "",
                             (unsigned long long)a->g->fingerprint);
    const cJSON *pl = cJSON_GetObjectItemCaseSensitive(root, "pipeline");
    if (!cJSON_IsObject(pl))
        return bad(err, source, "pipeline", "must be an object {\"schedule\", \"devices\", \"microbatches\", \"chunks\"}");
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(pl, "schedule");
    if (!cJSON_IsString(kind))
        return bad(err, source, "pipeline.schedule", "must be \"gpipe\", \"1f1b\" or \"interleaved\"");
    remat_status s;
    if ((s = count(pl, "devices", "pipeline.devices", 1, 4096, source, &c->stages, err)) != REMAT_OK ||
        (s = count(pl, "microbatches", "pipeline.microbatches", 1, 1u << 20, source, &c->microbatches, err)) !=
            REMAT_OK ||
        (s = count(pl, "chunks", "pipeline.chunks", 1, 1024, source, &c->chunks, err)) != REMAT_OK)
        return s;
    if (strcmp(kind->valuestring, "gpipe") == 0)
        c->kind = REMAT_PP_GPIPE;
    else if (strcmp(kind->valuestring, "1f1b") == 0)
        c->kind = REMAT_PP_1F1B;
    else if (strcmp(kind->valuestring, "interleaved") == 0)
        c->kind = REMAT_PP_INTERLEAVED;
    else
        return bad(err, source, "pipeline.schedule", "must be \"gpipe\", \"1f1b\" or \"interleaved\"");
    remat_err why;
    remat_err_init(&why);
    if (remat_pp_check(c, &why) != REMAT_OK)
        return remat_err_set(err, REMAT_EPARSE, "%s: pipeline: %s", source, why.msg);
    const uint32_t n = c->stages * c->chunks;
    const cJSON *cu = cJSON_GetObjectItemCaseSensitive(root, "cuts");
    if (!cJSON_IsArray(cu) || (uint32_t)cJSON_GetArraySize(cu) != n + 1)
        return remat_err_set(err, REMAT_EPARSE, "%s: cuts: must be an array of %u forward positions (devices x chunks "
                                                "+ 1)", source, n + 1);
    *cuts = remat__malloc(((size_t)n + 1) * sizeof **cuts);
    if (!*cuts)
        return remat_err_set(err, REMAT_ENOMEM, "out of memory reading %s", source);
    uint32_t i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, cu)
    {
        char path[32];
        snprintf(path, sizeof path, "cuts[%u]", i);
        if (!cJSON_IsNumber(x) || x->valuedouble != (double)(uint32_t)x->valuedouble)
            return bad(err, source, path, "must be a whole number");
        (*cuts)[i] = (uint32_t)x->valuedouble;
        /* Contiguous, increasing, from 0 to every op: what pp_stage.c cuts. */
        if ((i == 0 && (*cuts)[0] != 0) || (i > 0 && (*cuts)[i] <= (*cuts)[i - 1]) ||
            (i == n && (*cuts)[n] != a->g->n_ops)) {
            char msg[96];
            snprintf(msg, sizeof msg, "cuts must rise from 0 to the graph's %u ops, each stage non-empty",
                     a->g->n_ops);
            return bad(err, source, path, msg);
        }
        i++;
    }
    return REMAT_OK;
}

/* The optional "stage_state": per stage, the ledger's byte counts. */
static remat_status stage_state(const cJSON *root, const char *source, uint32_t n, remat_pp_result *r,
                                remat_err *err)
{
    const cJSON *ss = cJSON_GetObjectItemCaseSensitive(root, "stage_state");
    if (!ss)
        return REMAT_OK;
    if (!cJSON_IsArray(ss) || (uint32_t)cJSON_GetArraySize(ss) != n)
        return remat_err_set(err, REMAT_EPARSE, "%s: stage_state: must be an array of %u objects (one per stage)",
                             source, n);
    static const char *const keys[] = {"optimizer_state", "master_weights", "frozen_copies", "comm_buffers",
                                       "optimizer_workspace", "workspace"};
    for (uint32_t v = 0; v < n; v++) {
        const cJSON *o = cJSON_GetArrayItem(ss, (int)v);
        remat_exec_extras *x = &r->stages[v].extras;
        uint64_t *field[] = {&x->optimizer_state, &x->master_weights, &x->frozen_copies, &x->comm_buffers,
                             &x->optimizer_workspace, &x->workspace};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, keys[k]);
            if (!cJSON_IsNumber(f) || !(f->valuedouble >= 0) || f->valuedouble > 9007199254740992.0 ||
                f->valuedouble != (double)(uint64_t)f->valuedouble) {
                char path[80];
                snprintf(path, sizeof path, "stage_state[%u].%s", v, keys[k]);
                return bad(err, source, path, "must be a whole number of bytes from 0 to 2^53");
            }
            *field[k] = (uint64_t)f->valuedouble;
        }
    }
    return REMAT_OK;
}

remat_status remat_pp_plan_load_json(const remat_analysis *a, const char *text, size_t len, const char *source,
                                     const remat_device *device, remat_pp_result *r, remat_err *err)
{
    memset(r, 0, sizeof *r);
    if (!source)
        source = "<pipeline plan>";
    cJSON *root;
    remat_status s = remat__json_document(text, len, source, &root, err);
    if (s != REMAT_OK)
        return s;
    uint32_t *cuts = NULL;
    stage_graph *sg = NULL;
    double *fwd = NULL, *bwd = NULL;
    uint32_t n = 0;
    remat_pp_config c;
    memset(&c, 0, sizeof c);
    if ((s = header(a, root, source, &c, &cuts, err)) != REMAT_OK)
        goto out;
    n = c.stages * c.chunks;
    const cJSON *stages = cJSON_GetObjectItemCaseSensitive(root, "stages");
    if (!cJSON_IsArray(stages) || (uint32_t)cJSON_GetArraySize(stages) != n) {
        s = remat_err_set(err, REMAT_EPARSE, "%s: stages: must be an array of %u plans (devices x chunks)", source, n);
        goto out;
    }
    r->config = c;
    r->n_stages = n;
    const cJSON *bu = cJSON_GetObjectItemCaseSensitive(root, "budget");
    if (bu) {
        /* Byte counts are exact integers up to 2^53, as in every remat file. */
        if (!cJSON_IsNumber(bu) || !(bu->valuedouble >= 1) || bu->valuedouble > 9007199254740992.0 ||
            bu->valuedouble != (double)(uint64_t)bu->valuedouble) {
            s = bad(err, source, "budget", "must be a whole number of bytes from 1 to 2^53");
            goto out;
        }
        r->budget = (uint64_t)bu->valuedouble;
    }
    r->stages = remat__calloc(n, sizeof *r->stages);
    r->device_peak = remat__calloc(c.stages, sizeof *r->device_peak);
    sg = remat__calloc(n, sizeof *sg);
    fwd = remat__calloc(n, sizeof *fwd);
    bwd = remat__calloc(n, sizeof *bwd);
    if (!r->stages || !r->device_peak || !sg || !fwd || !bwd) {
        s = remat_err_set(err, REMAT_ENOMEM, "out of memory reading %s", source);
        goto out;
    }
    for (uint32_t v = 0; v < n; v++)
        remat_plan_init(&r->stages[v].plan);
    if ((s = stage_state(root, source, n, r, err)) != REMAT_OK)
        goto out;
    for (uint32_t v = 0; v < n && s == REMAT_OK; v++) {
        remat_pp_stage *st = &r->stages[v];
        st->first = cuts[v];
        st->end = cuts[v + 1];
        st->device = v % c.stages;
        st->chunk = v / c.stages;
        if ((s = remat__pp_open_stage(a, st->first, st->end, v, &sg[v], st, err)) != REMAT_OK)
            break;
        char *doc = cJSON_PrintUnformatted(cJSON_GetArrayItem(stages, (int)v));
        if (!doc) {
            s = remat_err_set(err, REMAT_ENOMEM, "out of memory reading %s", source);
            break;
        }
        char src[300];
        snprintf(src, sizeof src, "%.240s: stages[%u]", source, v);
        s = remat_plan_load_json(sg[v].g, doc, strlen(doc), src, &st->plan, err);
        cJSON_free(doc);
        if (s != REMAT_OK)
            break;
        st->budget_kind = st->plan.budget_kind;
        st->budget = st->plan.budget_kind != REMAT_BUDGET_NONE ? st->plan.budget : 0;
        s = remat_replay(sg[v].a, &st->plan.schedule, &st->extras, NULL, &st->replay, err);
        if (s == REMAT_OK && !st->replay.valid) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            remat_err_init(err);
            s = remat_err_set(err, REMAT_ESCHEDULE, "%s: the schedule is not valid: %s", src, msg);
        }
        if (s == REMAT_OK)
            s = remat__pp_measure_stage(&sg[v], st, &bwd[v], err);
        fwd[v] = st->fwd_flops;
    }
    if (s == REMAT_OK)
        s = remat__pp_finish(r, sg, device, fwd, bwd, err);
out:
    cJSON_Delete(root);
    remat__pp_close_stages(sg, n);
    remat__free(cuts);
    remat__free(fwd);
    remat__free(bwd);
    if (s != REMAT_OK)
        remat_pp_result_destroy(r);
    return s;
}

remat_status remat_pp_plan_load_file(const remat_analysis *a, const char *path, const remat_device *device,
                                     remat_pp_result *r, remat_err *err)
{
    memset(r, 0, sizeof *r);
    char *text;
    size_t len;
    remat_status s = remat__read_file(path, &text, &len, err);
    if (s != REMAT_OK)
        return s;
    s = remat_pp_plan_load_json(a, text, len, path, device, r, err);
    remat__free(text);
    return s;
}

bool remat_pp_plan_sniff(const char *text, size_t len)
{
    cJSON *root;
    remat_err err;
    remat_err_init(&err);
    if (remat__json_document(text, len, "plan", &root, &err) != REMAT_OK)
        return false;
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "format");
    bool yes = cJSON_IsString(f) && strcmp(f->valuestring, "remat-pp-plan") == 0;
    cJSON_Delete(root);
    return yes;
}

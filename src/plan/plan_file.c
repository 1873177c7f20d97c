/*
 * plan_file.c - the plan file (format "remat-plan", version 1): the plan
 * type's lifetime, its reader and its writers (with and without the static
 * offsets of remat/alloc.h).
 *
 * A plan names the graph it was made for by name and fingerprint; a plan for
 * another graph is refused with both names, because replaying it would
 * report numbers about a graph the user did not ask about. Instructions are
 * strings "KIND id" split at the first space, so ids may contain spaces.
 */
#include "../load/graph_store.h"
#include "../load/json_glue.h"
#include "remat/alloc.h"
#include "remat/report.h"
#include "remat/plan.h"
#include "../exec/schedule_json.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void remat_plan_init(remat_plan *p)
{
    memset(p, 0, sizeof *p);
    remat_schedule_init(&p->schedule);
}

void remat_plan_destroy(remat_plan *p)
{
    if (!p)
        return;
    remat__free(p->graph_name);
    remat__free(p->strategy);
    remat__free(p->params_json);
    remat__free(p->keep);
    remat_schedule_destroy(&p->schedule);
    remat_plan_init(p);
}

static remat_status pfail(remat_err *err, const char *source, const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static remat_status pfail(remat_err *err, const char *source, const char *path, const char *fmt, ...)
{
    char detail[REMAT_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    remat_err_loc loc;
    remat_err_loc_make(&loc, source, path, 0, 0, NULL);
    return remat_err_set_at(err, REMAT_EPLAN, &loc, "%s: %s%s%s", source, path, *path ? ": " : "", detail);
}

static char *dup_or_null(const char *s)
{
    return s ? remat__strdup(s) : NULL;
}

static const struct {
    const char *name;
    remat_instr_kind kind;
    int op; /* 1: argument is an op id; 0: a tensor id; -1: none */
} kinds[] = {
    {"FWD", REMAT_I_FWD, 1}, {"RECOMPUTE", REMAT_I_RECOMPUTE, 1}, {"BWD", REMAT_I_BWD, 1},
    {"FREE", REMAT_I_FREE, 0}, {"OPT", REMAT_I_OPT, -1},
};

static remat_status parse_instr(const remat_graph *g, const char *text, const char *source, const char *path,
                                remat_schedule *s, remat_err *err)
{
    const char *sp = strchr(text, ' ');
    size_t klen = sp ? (size_t)(sp - text) : strlen(text);
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        if (strlen(kinds[i].name) != klen || strncmp(kinds[i].name, text, klen) != 0)
            continue;
        uint32_t arg = 0;
        if (kinds[i].op < 0) {
            if (sp)
                return pfail(err, source, path, "OPT takes no argument");
        } else {
            if (!sp || !sp[1])
                return pfail(err, source, path, "'%s' needs an %s id", kinds[i].name, kinds[i].op ? "op" : "tensor");
            arg = kinds[i].op ? remat_graph_find_op(g, sp + 1) : remat_graph_find_tensor(g, sp + 1);
            if (arg == REMAT_NONE)
                return pfail(err, source, path, "unknown %s id '%.80s'", kinds[i].op ? "op" : "tensor", sp + 1);
        }
        if (remat_schedule_push(s, kinds[i].kind, arg) != REMAT_OK)
            return remat_err_set(err, REMAT_ENOMEM, "%s: out of memory reading the schedule", source);
        return REMAT_OK;
    }
    return pfail(err, source, path, "unknown instruction '%.40s' (FWD, RECOMPUTE, BWD, FREE, OPT)", text);
}

static remat_status load(const remat_graph *g, const cJSON *root, const char *source, remat_plan *p,
                         remat_err *err)
{
    char path[64];
    if (!cJSON_IsObject(root))
        return pfail(err, source, "", "top level must be an object");
    static const char *const allowed[] = {"format", "version", "graph", "strategy", "params", "budget",
                                          "keep",   "schedule", "replayed", "offsets", NULL};
    for (const cJSON *c = root->child; c; c = c->next) {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            ok |= c->string && strcmp(c->string, *a) == 0;
        if (!ok)
            return pfail(err, source, "", "unknown field '%.40s'", c->string ? c->string : "");
    }
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "remat-plan") != 0)
        return pfail(err, source, "format", "must be \"remat-plan\"");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (!cJSON_IsNumber(ver) || ver->valuedouble != 1)
        return pfail(err, source, "version", "unsupported plan version (this remat reads version 1)");
    const cJSON *gr = cJSON_GetObjectItemCaseSensitive(root, "graph");
    if (!cJSON_IsObject(gr))
        return pfail(err, source, "graph", "must be an object {\"name\", \"fingerprint\"}");
    const cJSON *gname = cJSON_GetObjectItemCaseSensitive(gr, "name");
    const cJSON *gfp = cJSON_GetObjectItemCaseSensitive(gr, "fingerprint");
    if (!cJSON_IsString(gname))
        return pfail(err, source, "graph.name", "must be a string");
    if (!cJSON_IsString(gfp))
        return pfail(err, source, "graph.fingerprint", "must be a hex string");
    /* Hex digits only: strtoull alone would also take a sign ("-1" is
     * 2^64-1), leading spaces and "0x". */
    size_t nhex = strspn(gfp->valuestring, "0123456789abcdefABCDEF");
    if (nhex == 0 || nhex > 16 || gfp->valuestring[nhex])
        return pfail(err, source, "graph.fingerprint", "must be a hex string");
    unsigned long long fp = strtoull(gfp->valuestring, NULL, 16);
    if (fp != g->fingerprint)
        return pfail(err, source, "graph",
                     "this plan was made for graph '%.80s' (fingerprint %016llx), not for graph '%.80s' "
                     "(fingerprint %016llx)",
                     gname->valuestring, fp, g->name, (unsigned long long)g->fingerprint);
    const cJSON *strat = cJSON_GetObjectItemCaseSensitive(root, "strategy");
    if (strat && !cJSON_IsString(strat))
        return pfail(err, source, "strategy", "must be a string");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(root, "params");
    if (params && !cJSON_IsObject(params))
        return pfail(err, source, "params", "must be an object");
    p->graph_name = remat__strdup(gname->valuestring);
    p->graph_fingerprint = fp;
    p->strategy = dup_or_null(strat ? strat->valuestring : "unknown");
    if (params) {
        char *txt = cJSON_PrintUnformatted(params);
        p->params_json = dup_or_null(txt);
        cJSON_free(txt);
        if (!p->params_json)
            return remat_err_set(err, REMAT_ENOMEM, "%s: out of memory", source);
    }
    if (!p->graph_name || !p->strategy)
        return remat_err_set(err, REMAT_ENOMEM, "%s: out of memory", source);
    const cJSON *budget = cJSON_GetObjectItemCaseSensitive(root, "budget");
    if (budget && !cJSON_IsNull(budget)) {
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(budget, "kind");
        const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(budget, "bytes");
        if (!cJSON_IsObject(budget) || !cJSON_IsString(kind))
            return pfail(err, source, "budget", "must be null or {\"kind\": \"total\"|\"activation\", \"bytes\": N}");
        if (strcmp(kind->valuestring, "total") == 0)
            p->budget_kind = REMAT_BUDGET_TOTAL;
        else if (strcmp(kind->valuestring, "activation") == 0)
            p->budget_kind = REMAT_BUDGET_ACTIVATION;
        else
            return pfail(err, source, "budget.kind", "must be \"total\" or \"activation\"");
        if (cJSON_IsString(bytes)) {
            remat_err e2;
            remat_err_init(&e2);
            if (remat_parse_bytes(bytes->valuestring, "budget.bytes", &p->budget, &e2) != REMAT_OK)
                return pfail(err, source, "budget.bytes", "%s", e2.msg);
        } else if (cJSON_IsNumber(bytes) && bytes->valuedouble >= 0 && bytes->valuedouble < 9007199254740992.0 &&
                   bytes->valuedouble == floor(bytes->valuedouble)) {
            p->budget = (uint64_t)bytes->valuedouble;
        } else {
            return pfail(err, source, "budget.bytes", "must be a non-negative integer or a decimal string");
        }
    }
    p->n_tensors = g->n_tensors;
    p->keep = remat__calloc(g->n_tensors ? g->n_tensors : 1, 1);
    if (!p->keep)
        return remat_err_set(err, REMAT_ENOMEM, "%s: out of memory", source);
    const cJSON *keep = cJSON_GetObjectItemCaseSensitive(root, "keep");
    if (keep) {
        if (!cJSON_IsArray(keep))
            return pfail(err, source, "keep", "must be an array of activation ids");
        int i = 0;
        for (const cJSON *k = keep->child; k; k = k->next, i++) {
            snprintf(path, sizeof path, "keep[%d]", i);
            if (!cJSON_IsString(k))
                return pfail(err, source, path, "must be a tensor id");
            uint32_t t = remat_graph_find_tensor(g, k->valuestring);
            if (t == REMAT_NONE)
                return pfail(err, source, path, "unknown tensor id '%.80s'", k->valuestring);
            p->keep[t] = 1;
        }
    }
    const cJSON *sched = cJSON_GetObjectItemCaseSensitive(root, "schedule");
    if (!cJSON_IsArray(sched))
        return pfail(err, source, "schedule", "missing or not an array of instructions");
    int i = 0;
    for (const cJSON *e = sched->child; e; e = e->next, i++) {
        snprintf(path, sizeof path, "schedule[%d]", i);
        if (!cJSON_IsString(e))
            return pfail(err, source, path, "must be a string like \"FWD op\"");
        remat_status st = parse_instr(g, e->valuestring, source, path, &p->schedule, err);
        if (st != REMAT_OK)
            return st;
    }
    return REMAT_OK;
}

remat_status remat_plan_load_json(const remat_graph *g, const char *text, size_t len, const char *source,
                                  remat_plan *out, remat_err *err)
{
    remat_plan_init(out);
    if (!source)
        source = "<plan>";
    const char *end = NULL;
    cJSON *root = remat__json_parse(text, len, &end);
    if (!root) {
        /* cJSON fails the same way when an allocation fails: that is out of
         * memory, not bad input (the graph loader does the same). */
        if (remat__json_alloc_failed())
            return remat_err_set(err, REMAT_ENOMEM, "%s: out of memory while parsing", source);
        int line, col;
        remat__json_line_col(text, len, end, &line, &col);
        remat_err_loc loc;
        remat_err_loc_make(&loc, source, NULL, line, col, NULL);
        return remat_err_set_at(err, REMAT_EPARSE, &loc, "%s:%d:%d: not valid JSON near here", source, line, col);
    }
    remat_err local;
    remat_err_init(&local);
    remat_status st = load(g, root, source, out, err ? err : &local);
    cJSON_Delete(root);
    if (st != REMAT_OK)
        remat_plan_destroy(out);
    return st;
}

remat_status remat_plan_load_file(const remat_graph *g, const char *path, remat_plan *out, remat_err *err)
{
    char *text;
    size_t len;
    remat_plan_init(out);
    remat_status st = remat__read_file(path, &text, &len, err);
    if (st != REMAT_OK)
        return st;
    st = remat_plan_load_json(g, text, len, path, out, err);
    remat__free(text);
    return st;
}

char *remat_report_plan(const remat_analysis *a, const remat_plan *p, const remat_replay_result *r, size_t *len,
                        remat_err *err)
{
    const remat_graph *g = a->g;
    remat_buf b;
    remat_buf_init(&b);
    remat_buf_puts(&b, "{\"format\": \"remat-plan\", \"version\": 1,\n \"graph\": {\"name\": ");
    remat_buf_json_str(&b, g->name);
    remat_buf_printf(&b, ", \"fingerprint\": \"%016llx\"},\n \"strategy\": ", (unsigned long long)g->fingerprint);
    remat_buf_json_str(&b, p->strategy ? p->strategy : "unknown");
    remat_buf_printf(&b, ",\n \"params\": %s,\n \"budget\": ", p->params_json ? p->params_json : "{}");
    if (p->budget_kind == REMAT_BUDGET_NONE)
        remat_buf_puts(&b, "null");
    else
        remat_buf_printf(&b, "{\"kind\": \"%s\", \"bytes\": \"%llu\"}",
                         p->budget_kind == REMAT_BUDGET_TOTAL ? "total" : "activation", (unsigned long long)p->budget);
    if (r && r->valid) {
        remat_buf_printf(&b, ",\n \"replayed\": {\"peak_bytes\": \"%llu\", \"peak_step\": ",
                         (unsigned long long)r->peak_bytes);
        remat__step_json(&b, g, &p->schedule, r->peak_index);
        remat_buf_printf(&b, ", \"activation_peak_bytes\": \"%llu\", \"recompute_flops\": \"%llu\", \"overhead\": %.6f}",
                         (unsigned long long)r->activation_peak, (unsigned long long)r->flops_recompute, remat__flops_overhead(r));
    }
    remat_buf_puts(&b, ",\n \"keep\": [");
    int first = 1;
    for (uint32_t t = 0; t < g->n_tensors; t++) {
        if (g->tensors[t].kind != REMAT_TENSOR_ACTIVATION || !p->keep || !p->keep[t])
            continue;
        remat_buf_puts(&b, first ? "" : ", ");
        remat_buf_json_str(&b, g->tensors[t].id);
        first = 0;
    }
    remat_buf_puts(&b, "],\n \"schedule\": [");
    for (size_t i = 0; i < p->schedule.n; i++) {
        remat_buf_puts(&b, i ? ",\n  " : "\n  ");
        remat__instr_json(&b, g, p->schedule.ins[i]);
    }
    remat_buf_puts(&b, "\n ]\n}\n");
    return remat_buf_finish(&b, len, err, "plan");
}

char *remat_report_plan_with_offsets(const remat_analysis *a, const remat_plan *p, const remat_replay_result *r,
                                     const remat_exec_extras *extras, uint64_t *arena, size_t *len, remat_err *err)
{
    remat_alloc_trace t;
    remat_static_result sp;
    memset(&sp, 0, sizeof sp);
    remat_status st = remat_alloc_trace_build(a, &p->schedule, extras, REMAT_ALLOC_ALL, &t, NULL, err);
    if (st == REMAT_OK) {
        remat_static_options o;
        remat_static_options_init(&o);
        o.stop_at_bound = 1; /* an arena at the bound cannot be beaten */
        st = remat_alloc_static_plan(&t, &o, &sp, err);
    }
    char *text = NULL;
    if (st == REMAT_OK)
        text = remat_report_plan(a, p, r, len, err);
    if (text)
        text = remat_report_plan_offsets(a, &t, &sp, text, len, err);
    if (text && arena)
        *arena = sp.arena_bytes;
    remat_static_result_destroy(&sp);
    remat_alloc_trace_destroy(&t);
    return text;
}

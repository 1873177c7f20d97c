/*
 * check_trace.c - the lifetime tracer and its four documents, against an
 * oracle.
 *
 * The oracle is the replay itself, observed here by a recorder that shares
 * no code with src/report/trace*.c: for every step it keeps the high-water
 * total, its per-category composition and the live bytes after the step.
 * Every document is then read back the way an outside tool would read it
 * (cJSON for JSON and the Chrome trace, an RFC 4180 reader written here for
 * CSV, a small XML well-formedness checker and xmllint for SVG) and the
 * figures are recomputed from the intervals alone:
 *   high_water[s][c] = sum of bytes of intervals of c with alloc <= s <= free,
 *   live_after[s]    = sum of bytes of intervals with alloc <= s < free,
 * and must equal the replay's, at every step, for every category, on the
 * bundled graphs, on generated ones, under store-all, random keep sets and
 * planner schedules. Hand-checked cases, which pin the meaning of single
 * intervals (mlp2's lifetimes table in graphs/README.md) and of "why live"
 * texts, and the errors are in check_trace_hand.c (the same case).
 */
#define _POSIX_C_SOURCE 200809L
#include "check_trace.h"
#include "remat/trace.h"
#include "util/util_internal.h"

#include <cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define NC REMAT_CAT_COUNT

/* REQUIRE (check_trace.h) for two counts, printing both and their expressions. */
#define REQUIRE_EQ(a, b, what)                                                                                  \
    do {                                                                                                        \
        uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                                                        \
        if (a_ != b_)                                                                                           \
            ck_abort_msg("%s: %llu != %llu (%s != %s)", what, (unsigned long long)a_, (unsigned long long)b_, #a, \
                         #b);                                                                                   \
    } while (0)

/* ---- The oracle: the replay's own per-step figures ------------------------ */

typedef struct {
    size_t n, cap;
    uint64_t *hw;    /* n x NC */
    uint64_t *total; /* high-water total per step */
    uint64_t *live;  /* live after each step */
} oracle;

static int or_step(void *ctx, size_t i, remat_instr in, uint64_t live, uint64_t hw, const uint64_t *by)
{
    oracle *o = ctx;
    (void)in;
    REQUIRE(i == o->n && i < o->cap, "step %zu out of order", i);
    memcpy(o->hw + i * NC, by, NC * sizeof *by);
    o->total[i] = hw;
    o->live[i] = live;
    o->n++;
    return 0;
}

static void oracle_run(const remat_analysis *a, const remat_schedule *s, const remat_exec_extras *x, oracle *o,
                       remat_replay_result *r)
{
    memset(o, 0, sizeof *o);
    o->cap = s->n + 1;
    o->hw = calloc(o->cap * NC, sizeof *o->hw);
    o->total = calloc(o->cap, sizeof *o->total);
    o->live = calloc(o->cap, sizeof *o->live);
    ck_assert(o->hw && o->total && o->live);
    remat_replay_observer obs = {o, NULL, NULL, or_step};
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_replay(a, s, x, &obs, r, &err), REMAT_OK);
    REQUIRE(r->valid, "invalid schedule: %s", err.msg);
}

static void oracle_free(oracle *o)
{
    free(o->hw);
    free(o->total);
    free(o->live);
}

/* ---- Recomputing the figures from intervals ------------------------------ */

/* Difference arrays: hw counts [alloc, free], live counts [alloc, free). */
typedef struct {
    size_t n;
    uint64_t *dhw;   /* (n + 1) x NC */
    uint64_t *dlive; /* n + 1 */
} sums;

static void sums_init(sums *S, size_t n)
{
    S->n = n;
    S->dhw = calloc((n + 1) * NC, sizeof *S->dhw);
    S->dlive = calloc(n + 1, sizeof *S->dlive);
    ck_assert(S->dhw && S->dlive);
}

/* free == SIZE_MAX: to the end. Wrapping u64 arithmetic cancels exactly. */
static void sums_add(sums *S, int c, uint64_t bytes, size_t alloc, size_t free_)
{
    REQUIRE(alloc < S->n, "alloc %zu past the last step", alloc);
    REQUIRE(free_ == SIZE_MAX || (free_ >= alloc && free_ < S->n), "free %zu out of range", free_);
    S->dhw[alloc * NC + (size_t)c] += bytes;
    S->dlive[alloc] += bytes;
    if (free_ != SIZE_MAX) {
        S->dhw[(free_ + 1) * NC + (size_t)c] -= bytes;
        S->dlive[free_] -= bytes;
    }
}

/* Checks the recomputed figures against the oracle at every step, and the
 * peak (the first largest high-water mark) against the replay's result. */
static void sums_check(sums *S, const oracle *o, const remat_replay_result *r, const char *what)
{
    ck_assert_uint_eq(S->n, o->n);
    uint64_t cur[NC] = {0}, live = 0, peak = 0;
    size_t peak_at = 0;
    for (size_t s = 0; s < S->n; s++) {
        uint64_t total = 0;
        for (int c = 0; c < NC; c++) {
            cur[c] += S->dhw[s * NC + (size_t)c];
            REQUIRE(cur[c] == o->hw[s * NC + (size_t)c], "%s: step %zu %s: intervals %llu, replay %llu", what,
                          s, remat_category_name((remat_category)c), (unsigned long long)cur[c],
                          (unsigned long long)o->hw[s * NC + (size_t)c]);
            total += cur[c];
        }
        REQUIRE(total == o->total[s], "%s: step %zu total", what, s);
        live += S->dlive[s];
        REQUIRE(live == o->live[s], "%s: step %zu live after: intervals %llu, replay %llu", what, s,
                      (unsigned long long)live, (unsigned long long)o->live[s]);
        if (s == 0 || total > peak) {
            peak = total;
            peak_at = s;
        }
    }
    ck_assert_uint_eq(peak, r->peak_bytes);
    ck_assert_uint_eq(peak_at, r->peak_index);
    free(S->dhw);
    free(S->dlive);
}

static uint64_t json_u64(const cJSON *v)
{
    if (cJSON_IsString(v))
        return strtoull(v->valuestring, NULL, 10);
    REQUIRE(cJSON_IsNumber(v), "not a count");
    return (uint64_t)v->valuedouble;
}

static int category_of(const char *name)
{
    for (int c = 0; c < NC; c++)
        if (strcmp(remat_category_name((remat_category)c), name) == 0)
            return c;
    ck_abort_msg("unknown category '%s'", name);
    return -1;
}

static const cJSON *field(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    REQUIRE(v != NULL, "missing field '%s'", name);
    return v;
}

static cJSON *parse(const char *text, size_t len)
{
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    REQUIRE(j != NULL, "not JSON near offset %td", end ? end - text : -1);
    return j;
}

/* The trace and its documents, for one schedule. */
typedef struct {
    const remat_analysis *a;
    const remat_schedule *s;
    remat_trace *t;
    oracle o;
    remat_replay_result r;
    size_t n_intervals; /* from the JSON, to compare the other formats with */
    char **ids;         /* interval ids from the JSON */
} subject;

/* ---- JSON ----------------------------------------------------------------- */

static int has_string(const cJSON *arr, const char *s)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, arr)
        if (cJSON_IsString(e) && strcmp(e->valuestring, s) == 0)
            return 1;
    return 0;
}

static void check_json(subject *X)
{
    const remat_graph *g = X->a->g;
    remat_err err;
    remat_err_init(&err);
    size_t len;
    char *text = remat_trace_json(X->t, NULL, &len, &err);
    REQUIRE(text != NULL, "%s", err.msg);
    cJSON *j = parse(text, len);
    ck_assert_str_eq(field(j, "format")->valuestring, "remat-trace");
    ck_assert_int_eq(field(j, "version")->valueint, 1);
    ck_assert_uint_eq((size_t)field(j, "n_steps")->valuedouble, X->o.n);
    const cJSON *cats = field(j, "categories"), *steps = field(j, "steps"), *ivs = field(j, "intervals");
    int cat_of[NC];
    ck_assert_int_eq(cJSON_GetArraySize(cats), NC);
    for (int c = 0; c < NC; c++)
        cat_of[c] = category_of(cJSON_GetArrayItem(cats, c)->valuestring);
    /* Steps: as the replay measured them. */
    ck_assert_int_eq(cJSON_GetArraySize(steps), (int)X->o.n);
    size_t s = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, steps) {
        REQUIRE_EQ(field(e, "index")->valuedouble, s, "index");
        REQUIRE_EQ(json_u64(field(e, "high_water")), X->o.total[s], "high_water");
        REQUIRE_EQ(json_u64(field(e, "live_after")), X->o.live[s], "live_after");
        const cJSON *by = field(e, "by_category");
        for (int c = 0; c < NC; c++)
            REQUIRE_EQ(json_u64(cJSON_GetArrayItem(by, c)), X->o.hw[s * NC + (size_t)cat_of[c]], "by_category");
        s++;
    }
    /* Intervals: the figures again, from them alone. */
    sums S;
    sums_init(&S, X->o.n);
    X->n_intervals = (size_t)cJSON_GetArraySize(ivs);
    X->ids = calloc(X->n_intervals + 1, sizeof *X->ids);
    size_t i = 0;
    cJSON_ArrayForEach(e, ivs) {
        const cJSON *fr = field(e, "free");
        size_t alloc = (size_t)field(e, "alloc")->valuedouble;
        size_t free_ = cJSON_IsNull(fr) ? SIZE_MAX : (size_t)fr->valuedouble;
        sums_add(&S, category_of(field(e, "category")->valuestring), json_u64(field(e, "bytes")), alloc, free_);
        X->ids[i++] = strdup(field(e, "id")->valuestring);
        REQUIRE(cJSON_IsBool(field(e, "grad")), "grad is not a bool");
        REQUIRE(cJSON_IsArray(field(e, "saved_for")) && cJSON_IsArray(field(e, "read_at")), "uses are not arrays");
    }
    sums_check(&S, &X->o, &X->r, "JSON");
    /* Every backward step is listed in saved_for of the interval that holds
     * each tensor it saves at that moment. */
    for (s = 0; s < X->s->n; s++) {
        remat_instr in = X->s->ins[s];
        if (in.kind != REMAT_I_BWD)
            continue;
        const remat_op *op = &g->ops[in.arg];
        char name[300];
        snprintf(name, sizeof name, "bwd:%s", op->id);
        for (uint32_t k = 0; k < op->n_save; k++) {
            const char *holder = g->tensors[g->tensors[remat_op_saves(g, op)[k]].storage].id;
            int found = 0;
            cJSON_ArrayForEach(e, ivs) {
                const cJSON *tn = field(e, "tensor"), *fr = field(e, "free");
                if (!cJSON_IsString(tn) || strcmp(tn->valuestring, holder) != 0 || cJSON_IsTrue(field(e, "grad")))
                    continue;
                size_t alloc = (size_t)field(e, "alloc")->valuedouble;
                if (alloc > s || (!cJSON_IsNull(fr) && (size_t)fr->valuedouble < s))
                    continue;
                found = has_string(field(e, "saved_for"), name);
            }
            REQUIRE(found, "%s is not in saved_for of %s", name, holder);
        }
    }
    const cJSON *peak = field(j, "peak");
    ck_assert_uint_eq(json_u64(field(peak, "bytes")), X->r.peak_bytes);
    ck_assert_uint_eq((size_t)field(peak, "step")->valuedouble, X->r.peak_index);
    cJSON_Delete(j);
    remat_free(text);
}

/* ---- CSV ------------------------------------------------------------------ */

/* RFC 4180: fields separated by commas, records by CRLF, a field quoted
 * with "..." may hold commas, line breaks and doubled quotes. Returns the
 * number of fields of the record at *p (at most cap, each malloc'd). */
static int csv_record(const char **p, char **fields, int cap)
{
    int n = 0;
    const char *c = *p;
    for (;;) {
        char *f = malloc(strlen(c) + 1);
        size_t k = 0;
        if (*c == '"') {
            for (c++;; c++) {
                REQUIRE(*c, "unterminated quoted field");
                if (*c == '"' && c[1] == '"')
                    f[k++] = *c++;
                else if (*c == '"')
                    break;
                else
                    f[k++] = *c;
            }
            c++;
        } else {
            while (*c && *c != ',' && *c != '\r' && *c != '\n') {
                REQUIRE(*c != '"', "quote inside an unquoted field");
                f[k++] = *c++;
            }
        }
        f[k] = '\0';
        REQUIRE(n < cap, "too many fields");
        fields[n++] = f;
        if (*c == ',') {
            c++;
            continue;
        }
        REQUIRE(c[0] == '\r' && c[1] == '\n', "record does not end in CRLF");
        *p = c + 2;
        return n;
    }
}

static void check_csv(subject *X)
{
    remat_err err;
    remat_err_init(&err);
    size_t len;
    char *text = remat_trace_csv(X->t, NULL, &len, &err);
    REQUIRE(text != NULL, "%s", err.msg);
    ck_assert_uint_eq(strlen(text), len);
    const char *p = text;
    char *f[16];
    static const char *const header[] = {"id", "tensor", "grad", "category", "bytes",
                                         "alloc", "free", "why", "by", "saved_for"};
    int n = csv_record(&p, f, 16);
    ck_assert_int_eq(n, 10);
    for (int k = 0; k < n; k++) {
        ck_assert_str_eq(f[k], header[k]);
        free(f[k]);
    }
    sums S;
    sums_init(&S, X->o.n);
    size_t rows = 0;
    while (*p) {
        n = csv_record(&p, f, 16);
        REQUIRE(n == 10 && rows < X->n_intervals, "row %zu has %d fields", rows, n);
        REQUIRE(strcmp(f[0], X->ids[rows]) == 0, "id '%s' != '%s'", f[0], X->ids[rows]); /* ids survive quoting */
        sums_add(&S, category_of(f[3]), strtoull(f[4], NULL, 10), strtoull(f[5], NULL, 10),
                 f[6][0] ? strtoull(f[6], NULL, 10) : SIZE_MAX);
        for (int k = 0; k < n; k++)
            free(f[k]);
        rows++;
    }
    ck_assert_uint_eq(rows, X->n_intervals);
    sums_check(&S, &X->o, &X->r, "CSV");
    remat_free(text);
}

/* ---- Chrome --------------------------------------------------------------- */

typedef struct {
    int pid, tid;
    double ts, dur;
} xev;

static int xev_cmp(const void *pa, const void *pb)
{
    const xev *a = pa, *b = pb;
    if (a->pid != b->pid)
        return a->pid - b->pid;
    if (a->tid != b->tid)
        return a->tid - b->tid;
    return (a->ts > b->ts) - (a->ts < b->ts);
}

/* Lanes never overlap; the tensor lanes are as few as the most intervals
 * alive at once (greedy partitioning is optimal); the counters, carried
 * forward, are the replay's composition at every step. */
static void check_chrome(subject *X, int flops_time)
{
    remat_trace_options o;
    remat_trace_options_init(&o);
    o.flops_time = flops_time;
    remat_err err;
    remat_err_init(&err);
    size_t len;
    char *text = remat_trace_chrome(X->t, &o, &len, &err);
    REQUIRE(text != NULL, "%s", err.msg);
    cJSON *j = parse(text, len);
    const cJSON *evs = field(j, "traceEvents"), *e;
    size_t n = (size_t)cJSON_GetArraySize(evs), nx = 0, nsteps = 0;
    xev *x = calloc(n + 1, sizeof *x);
    uint64_t *cnt = calloc((X->o.n + 1) * (NC + 1), sizeof *cnt);
    uint8_t *set = calloc((X->o.n + 1) * (NC + 1), 1);
    double last_end = 0;
    cJSON_ArrayForEach(e, evs) {
        const char *ph = field(e, "ph")->valuestring;
        int pid = field(e, "pid")->valueint;
        if (strcmp(ph, "X") == 0 && pid == 1) {
            nsteps++;
            double end = field(e, "ts")->valuedouble + field(e, "dur")->valuedouble;
            last_end = end > last_end ? end : last_end;
        } else if (strcmp(ph, "X") == 0) {
            REQUIRE(pid == 3 || pid == 4, "X event in pid %d", pid);
            x[nx++] = (xev){pid, field(e, "tid")->valueint, field(e, "ts")->valuedouble, field(e, "dur")->valuedouble};
        } else if (strcmp(ph, "C") == 0 && !flops_time) {
            const char *name = field(e, "name")->valuestring;
            int c = strcmp(name, "total") == 0 ? NC : category_of(name);
            size_t s = (size_t)field(e, "ts")->valuedouble;
            REQUIRE(s < X->o.n, "counter past the end");
            cnt[s * (NC + 1) + (size_t)c] = json_u64(field(field(e, "args"), "bytes"));
            set[s * (NC + 1) + (size_t)c] = 1;
        }
    }
    ck_assert_uint_eq(nsteps, X->o.n);
    ck_assert_uint_eq(nx, X->n_intervals);
    qsort(x, nx, sizeof *x, xev_cmp);
    int lanes = 0;
    for (size_t i = 0; i < nx; i++) {
        if (x[i].pid == 3 && x[i].tid + 1 > lanes)
            lanes = x[i].tid + 1;
        if (i + 1 < nx && x[i + 1].pid == x[i].pid && x[i + 1].tid == x[i].tid)
            REQUIRE(x[i].ts + x[i].dur <= x[i + 1].ts, "events overlap on pid %d tid %d at ts %g", x[i].pid,
                          x[i].tid, x[i + 1].ts);
    }
    if (!flops_time) {
        /* Step time: the most tensor intervals alive in one step. */
        int most = 0;
        for (size_t s = 0; s < X->o.n; s++) {
            int alive = 0;
            for (size_t i = 0; i < X->t->n_intervals; i++) {
                const remat_trace_interval *iv = &X->t->iv[i];
                if (iv->why != REMAT_TRACE_WHY_LEAF && iv->why != REMAT_TRACE_WHY_LEDGER && iv->alloc <= s &&
                    (iv->free == REMAT_TRACE_END || iv->free >= s))
                    alive++;
            }
            most = alive > most ? alive : most;
        }
        ck_assert_int_eq(lanes, most);
        ck_assert(last_end == (double)X->o.n);
        uint64_t cur[NC + 1] = {0};
        for (size_t s = 0; s < X->o.n; s++) {
            uint64_t sum = 0;
            for (int c = 0; c <= NC; c++) {
                if (set[s * (NC + 1) + (size_t)c])
                    cur[c] = cnt[s * (NC + 1) + (size_t)c];
                if (c < NC) {
                    REQUIRE_EQ(cur[c], X->o.hw[s * NC + (size_t)c], "counter");
                    sum += cur[c];
                }
            }
            REQUIRE_EQ(cur[NC], sum, "total counter");
            REQUIRE_EQ(cur[NC], X->o.total[s], "total counter");
        }
    } else {
        /* FLOP time ends at the total FLOPs over the automatic scale. */
        uint64_t total = X->r.flops_forward + X->r.flops_backward + X->r.flops_recompute, div = 1;
        while (total / div >= 1000000)
            div *= 10;
        REQUIRE(last_end == (double)(total / div), "end %g", last_end);
    }
    free(x);
    free(cnt);
    free(set);
    cJSON_Delete(j);
    remat_free(text);
}

/* ---- SVG ------------------------------------------------------------------ */

/* A small well-formedness check, independent of the writer: balanced
 * elements, quoted attributes, no raw '<' or stray '&' in text or values,
 * one root element named svg. */
void xml_wellformed(const char *p)
{
    char stack[64][32];
    int depth = 0, roots = 0;
    if (strncmp(p, "<?xml", 5) == 0)
        p = strstr(p, "?>") + 2;
    while (*p) {
        if (*p == '&') {
            const char *semi = strchr(p, ';');
            REQUIRE(semi && semi - p <= 8, "stray '&'");
            REQUIRE(p[1] == '#' || strncmp(p, "&amp;", 5) == 0 || strncmp(p, "&lt;", 4) == 0 ||
                              strncmp(p, "&gt;", 4) == 0 || strncmp(p, "&quot;", 6) == 0 || strncmp(p, "&apos;", 6) == 0,
                          "unknown entity");
            p = semi + 1;
            continue;
        }
        if (*p != '<') {
            REQUIRE((unsigned char)*p >= 0x20 || *p == '\n' || *p == '\t' || *p == '\r', "control character");
            p++;
            continue;
        }
        if (p[1] == '/') {
            REQUIRE(depth > 0, "end tag at the top level");
            size_t n = strlen(stack[depth - 1]);
            REQUIRE(strncmp(p + 2, stack[depth - 1], n) == 0 && p[2 + n] == '>', "mismatched end tag");
            depth--;
            p += 3 + n;
            continue;
        }
        p++;
        size_t n = 0;
        while (p[n] && p[n] != ' ' && p[n] != '>' && p[n] != '/' && p[n] != '\n')
            n++;
        REQUIRE(n > 0 && n < 32, "bad element name");
        if (depth == 0) {
            roots++;
            REQUIRE(n == 3 && strncmp(p, "svg", 3) == 0, "root is not svg");
        }
        char name[32];
        memcpy(name, p, n);
        name[n] = '\0';
        p += n;
        for (;;) {
            while (*p == ' ' || *p == '\n')
                p++;
            if (*p == '/' && p[1] == '>') {
                p += 2;
                break;
            }
            if (*p == '>') {
                p++;
                REQUIRE(depth < 64, "too deep");
                strcpy(stack[depth++], name);
                break;
            }
            while (*p && *p != '=' && *p != '>')
                p++;
            REQUIRE(p[0] == '=' && p[1] == '"', "unquoted attribute in <%s>", name);
            for (p += 2; *p != '"'; p++)
                REQUIRE(*p && *p != '<' && (*p != '&' || strchr(p, ';')), "bad attribute value in <%s>", name);
            p++;
        }
    }
    ck_assert_int_eq(depth, 0);
    ck_assert_int_eq(roots, 1);
}

static int have_tool(const char *name)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", name);
    return system(cmd) == 0;
}

/* Runs xmllint --noout on the text when xmllint is installed (the CLI tests
 * also render it with rsvg-convert). */
void xmllint_ok(const char *text, size_t len)
{
    if (!have_tool("xmllint"))
        return;
    char path[] = "/tmp/remat-trace-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
    close(fd);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "xmllint --noout %s", path);
    int rc = system(cmd);
    unlink(path);
    REQUIRE(rc == 0, "xmllint rejected the SVG");
}

static void check_svg(subject *X, remat_budget_kind kind, uint64_t budget)
{
    remat_trace_options o;
    remat_trace_options_init(&o);
    o.label = "test <&> \"plan\"";
    o.budget_kind = kind;
    o.budget = budget;
    remat_err err;
    remat_err_init(&err);
    size_t len;
    char *text = remat_trace_svg(X->t, &o, &len, &err);
    REQUIRE(text != NULL, "%s", err.msg);
    xml_wellformed(text);
    ck_assert_ptr_nonnull(strstr(text, "peak "));
    ck_assert_ptr_nonnull(strstr(text, "test &lt;&amp;&gt; &quot;plan&quot;"));
    if (kind != REMAT_BUDGET_NONE)
        ck_assert_ptr_nonnull(strstr(text, "budget"));
    if (X->t->n_recompute_steps)
        ck_assert_ptr_nonnull(strstr(text, "RECOMPUTE"));
    remat_free(text);
}

/* ---- Driving -------------------------------------------------------------- */

static void check_all(const remat_analysis *a, const remat_schedule *s, const remat_exec_extras *x, int lint)
{
    subject X;
    memset(&X, 0, sizeof X);
    X.a = a;
    X.s = s;
    oracle_run(a, s, x, &X.o, &X.r);
    remat_err err;
    remat_err_init(&err);
    REQUIRE(remat_trace_build(a, s, x, &X.t, &err) == REMAT_OK, "%s", err.msg);
    ck_assert_uint_eq(X.t->n_steps, X.o.n);
    check_json(&X);
    check_csv(&X);
    check_chrome(&X, 0);
    check_chrome(&X, 1);
    check_svg(&X, REMAT_BUDGET_TOTAL, X.r.peak_bytes);
    size_t len;
    char *svg = remat_trace_svg(X.t, NULL, &len, &err);
    ck_assert_ptr_nonnull(svg);
    if (lint)
        xmllint_ok(svg, len);
    remat_free(svg);
    char *audit = remat_trace_audit(X.t, NULL, REMAT_REPORT_JSON, &len, &err);
    ck_assert_ptr_nonnull(audit);
    cJSON *j = parse(audit, len);
    ck_assert_uint_eq(json_u64(field(field(j, "peak"), "bytes")), X.r.peak_bytes);
    cJSON_Delete(j);
    remat_free(audit);
    for (size_t i = 0; i < X.n_intervals; i++)
        free(X.ids[i]);
    free(X.ids);
    remat_trace_destroy(X.t);
    remat_replay_result_destroy(&X.r);
    oracle_free(&X.o);
}

static uint64_t rng_next(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Store-all, then `rounds` random keep sets through the default policy. */
void check_graph(const remat_analysis *a, uint64_t seed, int rounds, int lint)
{
    const remat_graph *g = a->g;
    remat_err err;
    remat_err_init(&err);
    remat_schedule s;
    remat_schedule_init(&s);
    ck_assert_int_eq(remat_schedule_store_all(a, &s, &err), REMAT_OK);
    check_all(a, &s, NULL, lint);
    uint8_t *keep = calloc(g->n_tensors + 1, 1);
    for (int k = 0; k < rounds; k++) {
        for (uint32_t t = 0; t < g->n_tensors; t++)
            keep[t] = (uint8_t)(rng_next(&seed) % 3 == 0);
        remat_schedule_clear(&s);
        REQUIRE(remat_schedule_from_keep(a, keep, &s, &err) == REMAT_OK, "%s", err.msg);
        remat_exec_extras x = {0};
        x.optimizer_state = 1000 * (uint64_t)k;
        x.optimizer_workspace = 77 * (uint64_t)k;
        x.comm_buffers = (uint64_t)k;
        x.workspace = 3 * (uint64_t)k;
        check_all(a, &s, k ? &x : NULL, lint && k == 0);
    }
    free(keep);
    remat_schedule_destroy(&s);
}

START_TEST(trace_should_add_up_to_the_replay_on_every_bundled_graph)
{
    DIR *d = opendir("graphs");
    REQUIRE(d != NULL, "run the tests from the repository root");
    struct dirent *de;
    int graphs = 0;
    while ((de = readdir(d)) != NULL) {
        size_t n = strlen(de->d_name);
        if (n < 6 || strcmp(de->d_name + n - 5, ".json") != 0)
            continue;
        char path[512];
        snprintf(path, sizeof path, "graphs/%s", de->d_name);
        remat_graph *g = NULL;
        remat_analysis *a = NULL;
        remat_err err;
        remat_err_init(&err);
        REQUIRE(remat_graph_load_file(path, &g, &err) == REMAT_OK, "%s", err.msg);
        ck_assert_int_eq(remat_analyze(g, &a, &err), REMAT_OK);
        check_graph(a, 17 + (uint64_t)graphs, 3, graphs < 2);
        /* Planner schedules too: their own orders, not only the policy's. */
        static const char *const strategies[] = {"sqrtn", "revolve"};
        for (size_t k = 0; k < 2; k++) {
            remat_plan_options o;
            remat_plan_options_init(&o);
            o.strategy = strategies[k];
            remat_plan plan;
            remat_replay_result r;
            remat_err_init(&err);
            if (remat_plan_make(a, &o, &plan, &r, &err) == REMAT_OK)
                check_all(a, &plan.schedule, NULL, 0);
            remat_replay_result_destroy(&r);
            remat_plan_destroy(&plan);
        }
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
        graphs++;
    }
    closedir(d);
    ck_assert_int_ge(graphs, 2);
}
END_TEST

START_TEST(trace_should_add_up_to_the_replay_on_generated_graphs)
{
    for (int f = 0; f < REMAT_GEN_FAMILY_COUNT; f++) {
        for (uint64_t seed = 1; seed <= 4; seed++) {
            remat_gen_opts o;
            remat_gen_opts_init(&o, (remat_gen_family)f);
            o.seed = seed;
            o.layers = 2 + (uint32_t)seed % 2;
            o.ops = 6 + (uint32_t)seed;
            o.random = true;
            o.blocks = 1;
            o.depth = 1;
            remat_err err;
            remat_err_init(&err);
            size_t len;
            char *json = remat_gen_json(&o, &len, &err);
            REQUIRE(json != NULL, "%s", err.msg);
            remat_graph *g = NULL;
            remat_analysis *a = NULL;
            ck_assert_int_eq(remat_graph_load_json(json, len, "gen", &g, &err), REMAT_OK);
            remat_free(json);
            ck_assert_int_eq(remat_analyze(g, &a, &err), REMAT_OK);
            check_graph(a, seed * 31 + (uint64_t)f, 4, 0);
            remat_analysis_destroy(a);
            remat_graph_destroy(g);
        }
    }
}
END_TEST

Suite *trace_suite(void)
{
    Suite *s = suite_create("trace");
    TCase *tc = tcase_create("trace");
    tcase_set_timeout(tc, 120);
    trace_hand_tests(tc);
    tcase_add_test(tc, trace_should_add_up_to_the_replay_on_generated_graphs);
    tcase_add_test(tc, trace_should_add_up_to_the_replay_on_every_bundled_graph);
    suite_add_tcase(s, tc);
    return s;
}

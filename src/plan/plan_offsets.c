/*
 * plan_offsets.c - the "offsets" section of a plan file, checked before
 * anything may trust it.
 *
 * `remat plan -o` writes the static offset plan of the schedule beside it:
 * per storage interval its tensor, category, the instruction that allocates
 * it (-1: resident before the first), the instruction after which it is
 * released (null: never), its offset and its bytes, and the arena they fit
 * in. A hand-edited or foreign file can claim anything, so the reader holds
 * it to what the writer guarantees: every field of its type, every
 * instruction inside the schedule, every interval inside the arena, and no
 * two intervals that are alive at the same instruction sharing a byte.
 *
 * Liveness follows the allocation trace (include/remat/alloc.h): an interval
 * occupies the instructions first..last inclusive, since releases after an
 * instruction come after that instruction's allocations. The overlap check
 * sweeps the intervals in allocation order, keeping the live ones sorted by
 * offset: live intervals are disjoint, so a new one can only collide with
 * its two neighbours. O(n log n + n x live), live being the most intervals
 * alive at once (hundreds to thousands in real plans).
 */
#include "plan_offsets.h"
#include "../load/graph_store.h"
#include "remat/exec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t first, last; /* instructions + 1: 0 = before the first; UINT64_MAX = never released */
    uint64_t off, bytes;
    uint32_t index;       /* in the file */
} span;

static remat_status ofail(remat_err *err, const char *source, const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static remat_status ofail(remat_err *err, const char *source, const char *path, const char *fmt, ...)
{
    char detail[REMAT_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return remat_err_set(err, REMAT_EPLAN, "%s: %s: %s", source, path, detail);
}

/* A whole number in [0, 2^53] from a JSON number. */
static int whole(const cJSON *v, uint64_t *out)
{
    return cJSON_IsNumber(v) && v->valuedouble <= 9007199254740992.0 &&
           remat__u64_from_double_checked(v->valuedouble, out);
}

static int category_known(const char *s)
{
    static const char *const names[] = {
#define REMAT__CAT_NAME(name, text) text,
        REMAT_CATEGORY_MAP(REMAT__CAT_NAME)
#undef REMAT__CAT_NAME
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i]) == 0)
            return 1;
    return 0;
}

static int by_first(const void *x, const void *y)
{
    const span *a = x, *b = y;
    if (a->first != b->first)
        return a->first < b->first ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* Reads interval i into *s; an error names its path. */
static remat_status read_span(const remat_graph *g, const cJSON *e, uint32_t i, size_t n_instr, uint64_t arena,
                              const char *source, span *s, remat_err *err)
{
    char path[80];
    snprintf(path, sizeof path, "offsets.intervals[%u]", i);
    if (!cJSON_IsObject(e))
        return ofail(err, source, path, "must be an object {\"tensor\", \"category\", \"instruction\", \"free\", "
                                        "\"offset\", \"bytes\"}");
    static const char *const allowed[] = {"tensor", "op", "grad", "category", "instruction", "free", "offset", "bytes",
                                          NULL};
    for (const cJSON *c = e->child; c; c = c->next) {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            ok |= c->string && strcmp(c->string, *a) == 0;
        if (!ok)
            return ofail(err, source, path, "unknown field '%.40s'", c->string ? c->string : "");
    }
    const cJSON *tensor = cJSON_GetObjectItemCaseSensitive(e, "tensor");
    if (!cJSON_IsNull(tensor) && !(cJSON_IsString(tensor) && remat_graph_find_tensor(g, tensor->valuestring) != REMAT_NONE))
        return ofail(err, source, path, "tensor: must be null or a tensor id of the graph%s%.80s%s",
                     cJSON_IsString(tensor) ? " (unknown id '" : "", cJSON_IsString(tensor) ? tensor->valuestring : "",
                     cJSON_IsString(tensor) ? "')" : "");
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(e, "op");
    if (op && !cJSON_IsNull(op) && !(cJSON_IsString(op) && remat_graph_find_op(g, op->valuestring) != REMAT_NONE))
        return ofail(err, source, path, "op: must be null or an op id of the graph");
    const cJSON *grad = cJSON_GetObjectItemCaseSensitive(e, "grad");
    if (grad && !cJSON_IsBool(grad))
        return ofail(err, source, path, "grad: must be true or false");
    const cJSON *cat = cJSON_GetObjectItemCaseSensitive(e, "category");
    if (!cJSON_IsString(cat) || !category_known(cat->valuestring))
        return ofail(err, source, path, "category: must be a category name (params, activations, ...)");
    const cJSON *first = cJSON_GetObjectItemCaseSensitive(e, "instruction");
    const cJSON *free_ = cJSON_GetObjectItemCaseSensitive(e, "free");
    uint64_t f, l;
    if (cJSON_IsNumber(first) && first->valuedouble == -1)
        s->first = 0;
    else if (whole(first, &f) && f < n_instr)
        s->first = f + 1;
    else
        return ofail(err, source, path, "instruction: must be -1 (resident) or an instruction index below %zu", n_instr);
    if (cJSON_IsNull(free_))
        s->last = UINT64_MAX;
    else if (whole(free_, &l) && l < n_instr && l + 1 >= s->first)
        s->last = l + 1;
    else
        return ofail(err, source, path, "free: must be null (never) or an instruction index from its own "
                                        "instruction up to %zu", n_instr ? n_instr - 1 : 0);
    uint64_t end;
    if (!whole(cJSON_GetObjectItemCaseSensitive(e, "offset"), &s->off))
        return ofail(err, source, path, "offset: must be a whole number of bytes");
    if (!whole(cJSON_GetObjectItemCaseSensitive(e, "bytes"), &s->bytes) || s->bytes == 0)
        return ofail(err, source, path, "bytes: must be a whole number of bytes above 0");
    if (!remat_u64_add(s->off, s->bytes, &end) || end > arena)
        return ofail(err, source, path, "[%llu, %llu) lies outside the arena of %llu B", (unsigned long long)s->off,
                     (unsigned long long)s->off + (unsigned long long)s->bytes, (unsigned long long)arena);
    s->index = i;
    return REMAT_OK;
}

/* Live spans by offset, with a search for where off goes. */
static size_t lower_bound(const span *const *live, size_t n, uint64_t off)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (live[mid]->off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static remat_status overlap_fail(remat_err *err, const char *source, const span *a, const span *b)
{
    char path[80];
    snprintf(path, sizeof path, "offsets.intervals[%u]", b->index);
    return ofail(err, source, path,
                 "[%llu, %llu) shares bytes with offsets.intervals[%u] [%llu, %llu) while both are alive",
                 (unsigned long long)b->off, (unsigned long long)(b->off + b->bytes), a->index,
                 (unsigned long long)a->off, (unsigned long long)(a->off + a->bytes));
}

remat_status remat__plan_check_offsets(const remat_graph *g, const cJSON *o, size_t n_instr, const char *source,
                                       remat_err *err)
{
    if (!cJSON_IsObject(o))
        return ofail(err, source, "offsets", "must be an object {\"arena_bytes\", \"intervals\", ...}");
    uint64_t arena, bound;
    if (!whole(cJSON_GetObjectItemCaseSensitive(o, "arena_bytes"), &arena))
        return ofail(err, source, "offsets.arena_bytes", "must be a whole number of bytes");
    const cJSON *lb = cJSON_GetObjectItemCaseSensitive(o, "lower_bound_bytes");
    if (lb && (!whole(lb, &bound) || bound > arena))
        return ofail(err, source, "offsets.lower_bound_bytes", "must be a whole number of bytes, at most arena_bytes");
    const cJSON *iv = cJSON_GetObjectItemCaseSensitive(o, "intervals");
    if (!cJSON_IsArray(iv))
        return ofail(err, source, "offsets.intervals", "must be an array");
    size_t n = 0;
    for (const cJSON *e = iv->child; e; e = e->next)
        n++;
    if (n > UINT32_MAX)
        return ofail(err, source, "offsets.intervals", "too many intervals");
    span *s = remat__array(n ? n : 1, sizeof *s);
    const span **live = remat__array(n ? n : 1, sizeof *live);
    remat_status st = s && live ? REMAT_OK : remat_err_set(err, REMAT_ENOMEM, "%s: out of memory reading offsets", source);
    uint32_t i = 0;
    for (const cJSON *e = iv->child; st == REMAT_OK && e; e = e->next, i++)
        st = read_span(g, e, i, n_instr, arena, source, &s[i], err);
    if (st == REMAT_OK)
        qsort(s, n, sizeof *s, by_first);
    size_t n_live = 0;
    for (size_t k = 0; st == REMAT_OK && k < n; k++) {
        /* Release what ended before this one's first instruction. */
        size_t w = 0;
        for (size_t r = 0; r < n_live; r++)
            if (live[r]->last >= s[k].first)
                live[w++] = live[r];
        n_live = w;
        size_t at = lower_bound(live, n_live, s[k].off);
        if (at > 0 && live[at - 1]->off + live[at - 1]->bytes > s[k].off)
            st = overlap_fail(err, source, live[at - 1], &s[k]);
        else if (at < n_live && live[at]->off < s[k].off + s[k].bytes)
            st = overlap_fail(err, source, live[at], &s[k]);
        if (st != REMAT_OK)
            break;
        memmove(live + at + 1, live + at, (n_live - at) * sizeof *live);
        live[at] = &s[k];
        n_live++;
    }
    remat__free(s);
    remat__free((void *)live);
    return st;
}

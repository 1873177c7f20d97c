/*
 * exec_util.c - see exec_util.h.
 *
 * The graphs live here, not beside the hand computations that explain their
 * figures (check_exec.c), because the mutation and plan-file suites replay
 * them too; one copy keeps every suite on the same bytes.
 */
#include "exec_util.h"

/* graphs/mlp2.json: a view (v1 of a1), relu saving its output, a sum saving
 * nothing, a frozen param (w2). */
const char *const MLP2 =
    "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"mlp2\","
    "\"inputs\":[{\"id\":\"x\",\"bytes\":4096}],"
    "\"params\":[{\"id\":\"w1\",\"bytes\":65536},{\"id\":\"w2\",\"bytes\":65536,\"frozen\":true}],"
    "\"ops\":["
    "{\"id\":\"h1\",\"op\":\"matmul\",\"inputs\":[\"x\",\"w1\"],\"bytes\":4096,\"flops\":131072},"
    "{\"id\":\"a1\",\"op\":\"relu\",\"inputs\":[\"h1\"],\"bytes\":4096,\"flops\":1024,\"saves\":[\"a1\"]},"
    "{\"id\":\"v1\",\"op\":\"view\",\"inputs\":[\"a1\"],\"alias_of\":\"a1\"},"
    "{\"id\":\"h2\",\"op\":\"matmul\",\"inputs\":[\"v1\",\"w2\"],\"bytes\":4096,\"flops\":131072},"
    "{\"id\":\"loss\",\"op\":\"sum\",\"inputs\":[\"h2\"],\"bytes\":4,\"flops\":1024,\"saves\":[]}],"
    "\"outputs\":[\"loss\"]}";

const char *const MLP2_STORE_ALL = "FWD h1, FWD a1, FREE h1, FWD v1, FWD h2, FWD loss, FREE h2, FREE loss, "
                                       "BWD loss, BWD h2, FREE v1, BWD v1, BWD a1, FREE a1, BWD h1, OPT";

/* A 4-op chain with distinct sizes so every figure has one explanation. */
const char *const CHAIN4 =
    "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"chain4\","
    "\"inputs\":[{\"id\":\"x\",\"bytes\":1000}],\"params\":[{\"id\":\"w\",\"bytes\":200}],"
    "\"ops\":["
    "{\"id\":\"a\",\"op\":\"matmul\",\"inputs\":[\"x\",\"w\"],\"bytes\":400,\"flops\":100},"
    "{\"id\":\"b\",\"op\":\"tanh\",\"inputs\":[\"a\"],\"bytes\":300,\"flops\":10,\"saves\":[\"b\"]},"
    "{\"id\":\"c\",\"op\":\"scale\",\"inputs\":[\"b\"],\"bytes\":500,\"flops\":20},"
    "{\"id\":\"loss\",\"op\":\"sum\",\"inputs\":[\"c\"],\"bytes\":8,\"flops\":5,\"saves\":[]}],"
    "\"outputs\":[\"loss\"]}";

/* ---- Schedules as text -------------------------------------------------- */

remat_instr instr_of(const remat_graph *g, const char *text)
{
    static const struct {
        const char *name;
        remat_instr_kind kind;
        int op;
    } kinds[] = {{"FWD", REMAT_I_FWD, 1},
                 {"RECOMPUTE", REMAT_I_RECOMPUTE, 1},
                 {"BWD", REMAT_I_BWD, 1},
                 {"FREE", REMAT_I_FREE, 0},
                 {"OPT", REMAT_I_OPT, -1}};
    char kind[16];
    const char *sp = strchr(text, ' ');
    size_t kl = sp ? (size_t)(sp - text) : strlen(text);
    ck_assert_msg(kl < sizeof kind, "bad instruction '%s'", text);
    memcpy(kind, text, kl);
    kind[kl] = 0;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        if (strcmp(kinds[i].name, kind) != 0)
            continue;
        remat_instr in = {(uint32_t)kinds[i].kind, 0};
        if (kinds[i].op > 0)
            in.arg = t_op(g, sp + 1);
        else if (kinds[i].op == 0)
            in.arg = t_tensor(g, sp + 1);
        return in;
    }
    ck_abort_msg("bad instruction '%s'", text);
    return (remat_instr){0, 0};
}

/* "FWD a, FREE b, OPT" -> s (appended). */
void sched_parse(const remat_graph *g, const char *text, remat_schedule *s)
{
    char one[128];
    const char *p = text;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        ck_assert(n < sizeof one);
        memcpy(one, p, n);
        one[n] = 0;
        remat_instr in = instr_of(g, one);
        ck_assert_int_eq(remat_schedule_push(s, (remat_instr_kind)in.kind, in.arg), REMAT_OK);
        p += n;
        while (*p == ',' || *p == ' ')
            p++;
    }
}

void sched_copy(remat_schedule *dst, const remat_schedule *src)
{
    remat_schedule_init(dst);
    for (size_t i = 0; i < src->n; i++)
        ck_assert_int_eq(remat_schedule_push(dst, (remat_instr_kind)src->ins[i].kind, src->ins[i].arg), REMAT_OK);
}

void sched_del(remat_schedule *s, size_t i)
{
    ck_assert(i < s->n);
    memmove(s->ins + i, s->ins + i + 1, (s->n - i - 1) * sizeof *s->ins);
    s->n--;
}

void sched_ins(remat_schedule *s, size_t i, remat_instr in)
{
    ck_assert(i <= s->n);
    ck_assert_int_eq(remat_schedule_push(s, REMAT_I_OPT, 0), REMAT_OK);
    memmove(s->ins + i + 1, s->ins + i, (s->n - 1 - i) * sizeof *s->ins);
    s->ins[i] = in;
}

/* ---- Replay helpers ----------------------------------------------------- */

void build_keep(const remat_analysis *a, const uint8_t *keep, remat_schedule *s)
{
    remat_err err;
    remat_err_init(&err);
    remat_schedule_init(s);
    remat_status st = keep ? remat_schedule_from_keep(a, keep, s, &err) : remat_schedule_store_all(a, s, &err);
    ck_assert_msg(st == REMAT_OK, "policy failed: %s", err.msg);
}

void replay_valid(const remat_analysis *a, const remat_schedule *s, const remat_exec_extras *x,
                  remat_replay_result *r)
{
    remat_err err;
    remat_err_init(&err);
    remat_status st = remat_replay(a, s, x, NULL, r, &err);
    ck_assert_msg(st == REMAT_OK, "replay failed: %s", err.msg);
    ck_assert_msg(r->valid, "schedule rejected: %s", err.msg);
}

void assert_categories(const uint64_t *got, const uint64_t *want)
{
    for (int c = 0; c < REMAT_CAT_COUNT; c++)
        ck_assert_msg(got[c] == want[c], "category %s: %llu, expected %llu", remat_category_name((remat_category)c),
                      (unsigned long long)got[c], (unsigned long long)want[c]);
}

/* Mutations start from this text (not from the policy), after checking
 * that it replays valid. */
remat_analysis *mlp2_schedule(remat_graph **g, remat_schedule *s)
{
    remat_analysis *a = t_analyze(MLP2, g);
    remat_schedule_init(s);
    sched_parse(*g, MLP2_STORE_ALL, s);
    remat_replay_result r;
    replay_valid(a, s, NULL, &r);
    ck_assert_uint_eq(r.peak_bytes, 204800);
    remat_replay_result_destroy(&r);
    return a;
}

/*
 * segments_seeds.c - auto's ladder seeds from sqrtn and chen-greedy, judged
 * once for every ladder budget (issue 20).
 *
 * The quick form of sqrtn and chen-greedy (segments.c, P->quick) judges a
 * list of keep sets that depends on the graph and the options only, never
 * on the budget, and answers with the first best of them under
 * remat__better. auto's ladder asks for that answer at up to 32 budgets, so
 * it records the list once (remat__segments_record) and repeats the pick
 * at each budget with what earlier budgets learnt about every keep set: its
 * floor (keep_floor.c), its schedule's FLOPs, its replay. Each keep set is
 * built and replayed at most once in all, instead of once per budget: on
 * mobilenet_v2-b2 (195 ops) the ladder's seeds took 0.16 s of auto's
 * 0.75 s of CPU.
 *
 * The pick walks the list as segments.c's try_cuts and judge_keep do, step
 * for step, so it returns the keep set and figures that running the
 * strategy at that budget would: the first keep set is judged; once the
 * best fits, a keep set whose floor, then whose schedule's FLOPs, exceed
 * the best's cannot be preferred and is not judged; an unschedulable keep
 * set counts as invalid.
 */
#include "planner.h"
#include "../util/util_internal.h"

#include <string.h>

enum { SEED_NEW, SEED_BUILT, SEED_JUDGED, SEED_UNSCHEDULABLE };

struct remat__seeds {
    uint32_t n, cap, nt;
    uint8_t *keeps;  /* n keep sets of nt bytes, in the strategy's judging order */
    uint8_t *state;  /* SEED_* */
    uint64_t *floor; /* remat__keep_floor_of */
    uint64_t *flops; /* the schedule's RECOMPUTE FLOPs (SEED_BUILT on) */
    remat_eval *e;   /* its replay (SEED_JUDGED) */
    remat__keep_floor kf;
    remat__policy *pol;
    int pol_base;
    remat_schedule s;
    uint32_t s_of; /* the keep set whose schedule s holds (UINT32_MAX: none) */
};

void remat__seeds_destroy(remat__seeds *t)
{
    if (!t)
        return;
    remat__free(t->keeps);
    remat__free(t->state);
    remat__free(t->floor);
    remat__free(t->flops);
    remat__free(t->e);
    remat__keep_floor_destroy(&t->kf);
    remat__policy_destroy(t->pol);
    remat_schedule_destroy(&t->s);
    remat__free(t);
}

remat_status remat__seeds_add(remat__seeds *t, const uint8_t *keep)
{
    if (t->n == t->cap) {
        uint32_t cap = t->cap ? 2 * t->cap : 16;
        uint8_t *k = remat__realloc(t->keeps, (size_t)cap * (t->nt ? t->nt : 1));
        if (!k)
            return REMAT_ENOMEM;
        t->keeps = k;
        t->cap = cap;
    }
    memcpy(t->keeps + (size_t)t->n * t->nt, keep, t->nt);
    t->n++;
    return REMAT_OK;
}

remat_status remat__seeds_create(remat_planner *P, const char *strategy, remat__seeds **out)
{
    *out = NULL;
    const int greedy = strcmp(strategy, "chen-greedy") == 0;
    if (!greedy && strcmp(strategy, "sqrtn") != 0)
        return REMAT_EUNSUPPORTED;
    remat__seeds *t = remat__calloc(1, sizeof *t);
    if (!t)
        return remat_err_set(P->err, REMAT_ENOMEM, "out of memory planning");
    t->nt = P->a->g->n_tensors;
    t->s_of = UINT32_MAX;
    remat_schedule_init(&t->s);
    remat_status st = remat__segments_record(P, greedy, t);
    remat_err local;
    remat_err_init(&local);
    if (st == REMAT_OK) {
        const uint32_t n = t->n ? t->n : 1;
        t->state = remat__calloc(n, 1);
        t->floor = remat__array(n, sizeof *t->floor);
        t->flops = remat__array(n, sizeof *t->flops);
        t->e = remat__calloc(n, sizeof *t->e);
        if (!t->state || !t->floor || !t->flops || !t->e || remat__keep_floor_init(P->a, &t->kf) != REMAT_OK)
            st = remat_err_set(P->err, REMAT_ENOMEM, "out of memory planning");
    }
    if (st == REMAT_OK && (st = remat__policy_create(P->a, &t->pol, &local)) != REMAT_OK)
        st = remat_err_set(P->err, st, "%s", local.msg);
    for (uint32_t i = 0; st == REMAT_OK && i < t->n; i++)
        t->floor[i] = remat__keep_floor_of(&t->kf, t->keeps + (size_t)i * t->nt);
    if (st != REMAT_OK) {
        remat__seeds_destroy(t);
        return st;
    }
    *out = t;
    return REMAT_OK;
}

/* Keep set i's schedule into t->s, as an edit of the last one built. */
static remat_status seed_schedule(remat__seeds *t, remat_planner *P, uint32_t i)
{
    if (t->s_of == i)
        return REMAT_OK;
    remat_err local;
    remat_err_init(&local);
    const uint8_t *keep = t->keeps + (size_t)i * t->nt;
    t->s_of = UINT32_MAX;
    remat_status st = t->pol_base ? remat__policy_build(t->pol, keep, &t->s, &local)
                                  : remat__policy_base(t->pol, keep, &t->s, &local);
    if (st == REMAT_OK && t->pol_base)
        st = remat__policy_adopt(t->pol, &t->s, &local);
    if (st == REMAT_OK) {
        t->pol_base = 1;
        t->s_of = i;
    }
    if (st == REMAT_EINFEASIBLE) {
        t->state[i] = SEED_UNSCHEDULABLE; /* judged valid = 0, as judge_keep does */
        return REMAT_OK;
    }
    return st == REMAT_OK ? REMAT_OK : remat_err_set(P->err, st, "%s", local.msg);
}

/* Keep set i's schedule FLOPs, once. */
static remat_status seed_build(remat__seeds *t, remat_planner *P, uint32_t i)
{
    if (t->state[i] != SEED_NEW)
        return REMAT_OK;
    remat_status st = seed_schedule(t, P, i);
    if (st != REMAT_OK || t->state[i] == SEED_UNSCHEDULABLE)
        return st;
    t->flops[i] = remat__schedule_extra_flops(P->a->g, &t->s);
    t->state[i] = SEED_BUILT;
    return REMAT_OK;
}

/* Keep set i's replay, once. */
static remat_status seed_judge(remat__seeds *t, remat_planner *P, uint32_t i)
{
    remat_status st = seed_build(t, P, i);
    if (st != REMAT_OK || t->state[i] != SEED_BUILT)
        return st;
    if ((st = seed_schedule(t, P, i)) != REMAT_OK)
        return st;
    if (t->state[i] == SEED_UNSCHEDULABLE) /* built once, refused now: never (the build is deterministic) */
        return remat_err_set(P->err, REMAT_EINTERNAL, "auto: a seed's schedule changed between builds");
    if ((st = remat__eval_schedule(P, &t->s, &t->e[i])) != REMAT_OK)
        return st;
    t->state[i] = SEED_JUDGED;
    return REMAT_OK;
}

remat_status remat__seeds_pick(remat__seeds *t, remat_planner *P, const uint8_t **keep, remat_eval *e)
{
    *keep = NULL;
    memset(e, 0, sizeof *e);
    remat_eval none;
    memset(&none, 0, sizeof none);
    uint32_t best = UINT32_MAX;
    for (uint32_t i = 0; i < t->n; i++) {
        remat_status st;
        const remat_eval *b = best == UINT32_MAX ? NULL : t->state[best] == SEED_JUDGED ? &t->e[best] : &none;
        const int bounded = b && P->o->budget_kind != REMAT_BUDGET_NONE && remat__fits(P, b);
        if (bounded && t->floor[i] > b->extra_flops)
            continue;
        if ((st = seed_build(t, P, i)) != REMAT_OK)
            return st;
        if (bounded && t->state[i] != SEED_UNSCHEDULABLE && t->flops[i] > b->extra_flops)
            continue;
        if ((st = seed_judge(t, P, i)) != REMAT_OK)
            return st;
        const remat_eval *x = t->state[i] == SEED_JUDGED ? &t->e[i] : &none;
        if (!b || remat__better(P, x, b))
            best = i;
    }
    if (best == UINT32_MAX || t->state[best] != SEED_JUDGED)
        return REMAT_OK;
    *keep = t->keeps + (size_t)best * t->nt;
    *e = t->e[best];
    return REMAT_OK;
}

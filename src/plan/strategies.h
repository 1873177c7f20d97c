/*
 * strategies.h - the registry: every strategy and every option they read,
 * as X-macro lists.
 *
 * Private to src/plan. plan.c derives the lookup and the public strategy
 * table (remat_plan_strategies) from REMAT__STRATEGIES, plan_options.c the
 * option table and its parser from REMAT__OPTIONS, planner.h each
 * strategy's prototype; auto's candidates, exact's warm starts, compare's
 * columns and the CLI's flags and help are derived from the public tables.
 * So a new strategy with one option touches three files: its own .c, one
 * entry in each list here, and its field in remat_plan_options
 * (include/remat/plan.h).
 */
#ifndef REMAT_PLAN_STRATEGIES_H
#define REMAT_PLAN_STRATEGIES_H

#include "remat/plan.h"

#define REMAT__M REMAT_STRATEGY_MONOTONE
#define REMAT__L REMAT_STRATEGY_LINEARIZED
#define REMAT__A REMAT_STRATEGY_AUTO
#define REMAT__S REMAT_STRATEGY_LOCAL_START
#define REMAT__W REMAT_STRATEGY_WARM_START
#define REMAT__F REMAT_STRATEGY_BUDGET_FREE
#define REMAT__H REMAT_STRATEGY_AUTO_HEAVY
#define REMAT__P REMAT_STRATEGY_PAPER

/* X(name, function, summary, options it reads, flags, auto_rank,
 * warm_rank): see remat_strategy_info. */
#define REMAT__STRATEGIES(X)                                                                                         \
    X("auto", remat__strategy_auto,                                                                                  \
      "the default: every applicable strategy plus a local search; least extra FLOPs within the budget",            \
      "time_limit", REMAT_STRATEGY_RUNS_OTHERS, 0, 0)                                                               \
    X("store-all", remat__strategy_store_all,                                                                        \
      "keep every activation (no recomputation): the baseline and the upper bound on memory", "", REMAT__M | REMAT__A | REMAT__S | REMAT__F, 1, 0)  \
    X("sqrtn", remat__strategy_sqrtn,                                                                                \
      "Chen et al. 2016: about sqrt(n) segments, keep their boundaries, replay a segment in backward",              \
      "segments linearized chen_reading", REMAT__M | REMAT__L | REMAT__A | REMAT__S | REMAT__W | REMAT__P, 2, 3)           \
    X("chen-greedy", remat__strategy_chen_greedy,                                                                    \
      "Chen et al.'s greedy segmenting by accumulated bytes, searching the threshold", "linearized chen_reading",  \
      REMAT__M | REMAT__L | REMAT__A | REMAT__S | REMAT__W | REMAT__P | REMAT__H, 3, 4)                            \
    X("revolve", remat__strategy_revolve,                                                                            \
      "Griewank and Walther's binomial checkpointing over the block chain, slots from the budget", "", REMAT__M | REMAT__A | REMAT__W,  \
      4, 1)                                                                                                          \
    X("chain-dp", remat__strategy_chain_dp,                                                                          \
      "Beaumont et al.'s optimal dynamic program over the chain of blocks: measured per-stage costs and bytes",     \
      "dp_step dp_slots", REMAT__M | REMAT__A | REMAT__W | REMAT__H, 6, 2)                                                                          \
    X("mincut", remat__strategy_mincut,                                                                              \
      "AOTAutograd-style minimum cut: least saved bytes, never recomputing costly ops (no budget)",                 \
      "never_recompute", REMAT__M | REMAT__A | REMAT__S | REMAT__F, 5, 0)                                                                           \
    X("exact", remat__strategy_exact,                                                                                \
      "Checkmate-style mixed-integer program (GLPK): least extra FLOPs within the budget, with a time limit",        \
      "time_limit", REMAT__M | REMAT__A | REMAT_STRATEGY_SMALL_ONLY, 7, 0)                                                        \
    X("dtr", remat__strategy_dtr,                                                                                    \
      "Kirisame et al.'s dynamic tensor rematerialization: replay under the budget, evict the lowest score, "       \
      "rebuild on demand",                                                                                          \
      "dtr_score", REMAT__A | REMAT_STRATEGY_AUTO_LADDER | REMAT__W, 8, 5)

/* X(field of remat_plan_options, kind, usage argument, choices, help). */
#define REMAT__OPTIONS(X)                                                                                       \
    X(linearized, REMAT_OPTION_FLAG, NULL, NULL,                                                               \
      "sqrtn, chen-greedy: cut anywhere, keeping every tensor live across the cut")                            \
    X(segments, REMAT_OPTION_COUNT, "N", NULL, "sqrtn: number of segments of remat's placement (0 = about sqrt(ops))") \
    X(chen_reading, REMAT_OPTION_CHOICE, "R", "remat paper",                                                   \
      "sqrtn, chen-greedy: Chen et al. as the paper and Checkmate state it (paper), or the best of that and "  \
      "remat's variations (remat, the default)")                                                              \
    X(dp_step, REMAT_OPTION_BYTES, "B", NULL, "chain-dp: memory discretization in bytes (0 = automatic)")      \
    X(dp_slots, REMAT_OPTION_COUNT, "N", NULL, "chain-dp: number of memory slots when dp-step is 0")           \
    X(time_limit, REMAT_OPTION_SECONDS, "S", NULL, "exact: seconds for the solver (default 10)")               \
    X(never_recompute, REMAT_OPTION_TEXT, "OPS", NULL, "mincut: comma-separated op types never recomputed")   \
    X(dtr_score, REMAT_OPTION_CHOICE, "S", "h_dtr eq local best", "dtr: eviction score (best: try all three)") \
    X(budget_mode, REMAT_OPTION_CHOICE, "M", "logical arena",                                                  \
      "every strategy: the budget caps the logical peak, or the arena of a static offset plan")


#endif

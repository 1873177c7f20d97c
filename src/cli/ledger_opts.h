/*
 * ledger_opts.h - the training-state options that `remat ledger` and the
 * planning commands (plan, replay, compare, trace) share, so that
 * `--budget` can be a device's capacity: the ledger adds what the graph does
 * not describe (optimizer state, master weights, frozen copies,
 * communication buffers, library workspace) and the replay counts it at the
 * instant of the peak.
 */
#ifndef REMAT_CLI_LEDGER_OPTS_H
#define REMAT_CLI_LEDGER_OPTS_H

#include "cli.h"
#include "remat/ledger.h"
#include "remat/exec.h"

#include <stdio.h>

#include <getopt.h>

enum {
    REMAT_LOPT_WEIGHTS = 600,
    REMAT_LOPT_GRADS,
    REMAT_LOPT_STATES,
    REMAT_LOPT_MASTER,
    REMAT_LOPT_COMM,
    REMAT_LOPT_OPTIMIZER,
    REMAT_LOPT_FROZEN_COPIES,
    REMAT_LOPT_ZERO,
    REMAT_LOPT_DP,
    REMAT_LOPT_BUCKET,
    REMAT_LOPT_BUCKET_ELEMENTS,
    REMAT_LOPT_PREFETCH,
    REMAT_LOPT_WORKSPACE,
    REMAT_LOPT_RESERVE,
    REMAT_LOPT_BLOCK,
    REMAT_LOPT_MIN_8BIT,
    REMAT_LOPT_ADAFACTOR_BETA1,
    REMAT_LOPT_STAGE3_PREFETCH,
    REMAT_LOPT_STAGE3_MAX_LIVE,
    REMAT_LOPT_FIRST_BUCKET,
    REMAT_LOPT_STAGE3_PERSIST,
    REMAT_LOPT_ADAM_STEP,
    REMAT_LOPT_SUB_GROUP,
    REMAT_LOPT_OFFLOAD_OPTIMIZER,
    REMAT_LOPT_DS_CONFIG,
    REMAT_LOPT_DS_WRITE,
    REMAT_LOPT_STAGE3_MAX_REUSE,
    /* PyTorch's sharding (shard_opts.c). */
    REMAT_LOPT_SHARD,
    REMAT_LOPT_RANK,
    REMAT_LOPT_OPT_WORKSPACE,
    /* PyTorch FSDP (shard_opts.c) and units by module. */
    REMAT_LOPT_FSDP_STRATEGY,
    REMAT_LOPT_FSDP_BWD_PREFETCH,
    REMAT_LOPT_FSDP_FWD_PREFETCH,
    REMAT_LOPT_FSDP_LIMIT,
    REMAT_LOPT_FSDP_WRAP,
    REMAT_LOPT_FSDP_UNITS
};

#define REMAT_CLI_SHARD_LONG_OPTS                                             \
    {"shard", required_argument, NULL, REMAT_LOPT_SHARD},                     \
    {"rank", required_argument, NULL, REMAT_LOPT_RANK},                       \
    {"optimizer-workspace", required_argument, NULL, REMAT_LOPT_OPT_WORKSPACE}, \
    {"fsdp-strategy", required_argument, NULL, REMAT_LOPT_FSDP_STRATEGY},     \
    {"fsdp-backward-prefetch", required_argument, NULL, REMAT_LOPT_FSDP_BWD_PREFETCH}, \
    {"fsdp-forward-prefetch", no_argument, NULL, REMAT_LOPT_FSDP_FWD_PREFETCH}, \
    {"fsdp-limit-all-gathers", no_argument, NULL, REMAT_LOPT_FSDP_LIMIT},     \
    {"fsdp-wrap", required_argument, NULL, REMAT_LOPT_FSDP_WRAP},             \
    {"fsdp-units", required_argument, NULL, REMAT_LOPT_FSDP_UNITS}

#define REMAT_CLI_LEDGER_LONG_OPTS                                             \
    {"weights", required_argument, NULL, REMAT_LOPT_WEIGHTS},                 \
    {"grads", required_argument, NULL, REMAT_LOPT_GRADS},                     \
    {"states", required_argument, NULL, REMAT_LOPT_STATES},                   \
    {"master", required_argument, NULL, REMAT_LOPT_MASTER},                   \
    {"comm", required_argument, NULL, REMAT_LOPT_COMM},                       \
    {"optimizer", required_argument, NULL, REMAT_LOPT_OPTIMIZER},             \
    {"frozen-copies", required_argument, NULL, REMAT_LOPT_FROZEN_COPIES},     \
    {"zero", required_argument, NULL, REMAT_LOPT_ZERO},                       \
    {"dp", required_argument, NULL, REMAT_LOPT_DP},                           \
    {"bucket", required_argument, NULL, REMAT_LOPT_BUCKET},                   \
    {"bucket-elements", required_argument, NULL, REMAT_LOPT_BUCKET_ELEMENTS}, \
    {"prefetch", required_argument, NULL, REMAT_LOPT_PREFETCH},               \
    {"workspace", required_argument, NULL, REMAT_LOPT_WORKSPACE},             \
    {"reserve", required_argument, NULL, REMAT_LOPT_RESERVE},                 \
    {"block", required_argument, NULL, REMAT_LOPT_BLOCK},                     \
    {"min-8bit", required_argument, NULL, REMAT_LOPT_MIN_8BIT},               \
    {"adafactor-beta1", no_argument, NULL, REMAT_LOPT_ADAFACTOR_BETA1},       \
    {"stage3-prefetch", required_argument, NULL, REMAT_LOPT_STAGE3_PREFETCH}, \
    {"stage3-max-live", required_argument, NULL, REMAT_LOPT_STAGE3_MAX_LIVE}, \
    {"stage3-max-reuse", required_argument, NULL, REMAT_LOPT_STAGE3_MAX_REUSE}, \
    {"first-bucket-elements", required_argument, NULL, REMAT_LOPT_FIRST_BUCKET},      \
    {"stage3-persistence", required_argument, NULL, REMAT_LOPT_STAGE3_PERSIST},       \
    {"adam-step", required_argument, NULL, REMAT_LOPT_ADAM_STEP},                     \
    {"sub-group-size", required_argument, NULL, REMAT_LOPT_SUB_GROUP},                \
    {"offload-optimizer", no_argument, NULL, REMAT_LOPT_OFFLOAD_OPTIMIZER},           \
    {"deepspeed-config", required_argument, NULL, REMAT_LOPT_DS_CONFIG},             \
    {"write-deepspeed-config", required_argument, NULL, REMAT_LOPT_DS_WRITE}, \
    REMAT_CLI_SHARD_LONG_OPTS

typedef struct remat_cli_ledger {
    const char *cmd; /* the command, for messages (trace and audit set it) */
    remat_ledger_config cfg;
    int used;       /* any ledger option was given */
    int have_block, have_min8;
    /* Sharded data parallel (--dp N >= 2): the rank the planning commands
     * replay, built by remat_cli_ledger_extras. */
    remat_shard_config shard;
    int have_prefetch, have_max_live, have_persist;
    int sharded;
    remat_sharding sh;
    /* --shard zero-redundancy: PyTorch's ZeroRedundancyOptimizer on DDP;
     * the replay is of one rank (--rank, default the largest). */
    int zero_redundancy, have_rank, zr_built;
    uint64_t rank;
    remat_zero_redundancy zr;
    /* --shard fsdp and its options (kept in shard until the sharding is
     * built); --fsdp-units' prefixes, split into unit_buf. */
    int fsdp, have_fsdp_opts;
    char unit_buf[4096];
    const char *unit_list[256];
    /* --optimizer-workspace: bytes, or `torch` (opt_ws_torch). */
    int have_opt_ws, opt_ws_torch;
    uint64_t opt_ws_bytes;
    /* --deepspeed-config: the file, and the options given as flags (bit
     * c - REMAT_LOPT_WEIGHTS), which win over the file's keys. */
    const char *ds_path, *ds_write;
    int ds_applied;
    uint64_t given;
    remat_ds_config ds;
    /* What the ledger put on the host, and the offload transfers per step. */
    uint64_t host_bytes, offload_elements, offload_bytes;
} remat_cli_ledger;

void remat_cli_ledger_init(remat_cli_ledger *L);
/* Frees the sharding; accepts a ledger that never built one. */
void remat_cli_ledger_destroy(remat_cli_ledger *L);

/* Handles option c if it is a ledger option: returns REMAT_EXIT_OK, or the
 * usage error's exit code; -1 when c is not a ledger option. */
int remat_cli_ledger_option(const char *cmd, int c, const char *arg, remat_cli_ledger *L);

/* Reads --deepspeed-config (once) into the options no flag gave, then the
 * cross-option checks (an option that applies to another optimizer is
 * refused, not ignored). Returns an exit code. */
int remat_cli_ledger_check(const char *cmd, remat_cli_ledger *L);

/* For the planning commands: when ledger options were given, budgets g's
 * training state and fills x with the state the graph does not describe.
 * The replay counts the graph's own params and their gradients at the
 * graph's sizes, so weights and gradients must be stored as the graph
 * stores them. With --dp N >= 2 it also builds the sharding of the rank
 * (every ZeRO stage, 0 being DDP), which x->sharding points to (owned by
 * L: destroy L after the last replay).
 * *reserve gets the fragmentation reserve, which the caller subtracts from
 * the budget. Prints what it added to stderr when verbose. Returns an exit
 * code. */
int remat_cli_ledger_extras(const char *cmd, const remat_analysis *a, remat_cli_ledger *L, remat_exec_extras *x,
                            uint64_t *reserve);

/* With a sharding: replaces the compute schedule s by the same schedule
 * with its collectives inserted (remat_schedule_shard), so that reports
 * name the instructions the replay judged. Returns an exit code. */
int remat_cli_ledger_shard_schedule(const remat_cli_ledger *L, remat_schedule *s);

/* With a sharding: prints the rank's sharding and communication lines
 * (text) after a report. */
void remat_cli_ledger_print_sharding(FILE *f, const remat_cli_ledger *L, const remat_replay_result *r);

/* shard_opts.c: the PyTorch sharding options. _option handles c like
 * remat_cli_ledger_option (-1: not one of them); _apply runs at the end of
 * remat_cli_ledger_extras with the graph's ledger r and sets the rank's
 * optimizer state, master copy and optimizer workspace in x; _print adds
 * the per-rank lines; _destroy frees the assignment. Exit codes. */
int remat_cli_shard_option(const char *cmd, int c, const char *arg, remat_cli_ledger *L);
int remat_cli_shard_apply(const char *cmd, const remat_analysis *a, remat_cli_ledger *L,
                          const remat_ledger_result *r, remat_exec_extras *x);
void remat_cli_shard_print(FILE *f, const remat_cli_ledger *L, const remat_replay_result *r);
void remat_cli_shard_destroy(remat_cli_ledger *L);

/* `plan --write-deepspeed-config OUT` (ds_write.c): rewrites the
 * --deepspeed-config file with the sharding planned under and the number of
 * recomputed segments of schedule s, writes it to OUT whole, and prints to H
 * what the config cannot say (the ops each segment spans, a multi-pass
 * recomputation). Nothing without the option. Returns an exit code. */
int remat_cli_ledger_write_ds(const remat_cli_ledger *L, const remat_analysis *a, const remat_schedule *s,
                              const remat_replay_result *r, FILE *H);

/* Takes the ledger's fragmentation reserve out of a total budget (it is
 * space the allocator cannot hand out); an activation budget is left as
 * it is. Returns an exit code: a reserve above the budget is a usage error. */
int remat_cli_apply_reserve(const char *cmd, remat_plan_options *o, uint64_t reserve);

#endif

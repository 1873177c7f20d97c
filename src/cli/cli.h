/*
 * cli.h - what the subcommands share: exit codes, the command table's shape,
 * and helpers to load a graph and print errors the same way everywhere.
 * Only main() exits; every cmd_x returns an exit code.
 */
#ifndef REMAT_CLI_H
#define REMAT_CLI_H

#include "remat.h"
#include "remat/report.h"
#include "remat/plan.h"
#include "util/util_internal.h"

#include <getopt.h>
#include <stdio.h>

/* Documented in README.md ("Exit codes"). */
typedef enum {
    REMAT_EXIT_OK = 0,
    REMAT_EXIT_FAIL = 1,       /* the job ran and its answer is "no": an invalid schedule */
    REMAT_EXIT_USAGE = 2,      /* bad command line */
    REMAT_EXIT_INPUT = 3,      /* bad or unreadable input file */
    REMAT_EXIT_INFEASIBLE = 4, /* no plan meets the budget */
    REMAT_EXIT_INTERNAL = 5    /* out of memory, I/O failure on output, a bug */
} remat_exit;

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *usage;   /* one line after "remat NAME " */
    const char *summary; /* one line for `remat help` */
} remat_command;

/* The format flags a command's documents have besides their defaults, as
 * getopt entries: "--json" (val 'j') when the document table
 * (remat_report_docs) lists JSON for one of them where it is not the
 * default. */
#define REMAT_CLI_FORMAT_FLAGS 1
/* The bit of document d in a command's set of documents. */
#define REMAT_CLI_DOC(d) (1u << (d))

/* opts = own (ending in its {NULL} entry) with the format flags of the
 * documents in docs (REMAT_CLI_DOC bits: every document the command may
 * write, e.g. plan's replay summary and its pipeline report) before the
 * terminator; opts must hold the entries of own plus
 * REMAT_CLI_FORMAT_FLAGS. Returns opts. */
const struct option *remat_cli_options(unsigned docs, const struct option *own, struct option *opts);

/* The format a command writes its document in: JSON when --json was given,
 * else the document's default; both read off the library's document table
 * (remat_report_docs), as remat_report_write, which every command's report
 * goes through, checks the pair. */
remat_report_format remat_cli_format(remat_report_doc doc, int json);

/* Maps a status to an exit code. */
int remat_cli_exit_for(remat_status st);

/* err's message with the library's API parameter names spelled as this
 * command's flags, in out[0..cap). A backquoted parameter ("`zero_stage`")
 * is mapped in any message; a leading remat_plan_options name ("strategy:")
 * and one with an underscore ("use a larger dp_step" -> "use a larger
 * --dp-step") only in argument errors and unmet budgets (other messages may
 * quote a graph's ids). Every message of the library that reaches the user
 * passes through it: remat_cli_fail and remat_cli_usage_err do so, and so
 * must a command that prints one itself. */
const char *remat_cli_in_flags(const remat_err *err, char *out, size_t cap);

/* The mapping above on text msg (a ledger note, say): plain (nonzero)
 * applies the plain-name rules too. Writes out[0..cap), returns its length. */
size_t remat_cli_text_in_flags(const char *msg, int plain, char *out, size_t cap);

/* remat_cli_usage_error(cmd, ...) with err's message in flags. */
int remat_cli_usage_err(const char *cmd, const remat_err *err);

/* The flag of remat_gen_options field name (n bytes: "param_every" ->
 * "--param-every", "hidden" -> "-h/--hidden") from gen's option table, in
 * flag[0..cap); 0 when it is none. */
int remat_cli_gen_flag(const char *name, size_t n, char *flag, size_t cap);

/* Prints "remat: <msg>" to stderr and returns the exit code for err. */
int remat_cli_fail(const remat_err *err);

/* The same for an error about file (a plan whose schedule is invalid, a
 * graph whose sizes overflow): "remat: FILE: <msg>", unless the message
 * names the file already. */
int remat_cli_fail_in(const char *file, const remat_err *err);

/* Prints "remat NAME: <msg>\nusage: ..." and returns REMAT_EXIT_USAGE. */
int remat_cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Writes s to f with control characters as \xNN, so that an id holding an
 * ESC cannot drive the terminal. Every error message goes through it. */
void remat_cli_put_escaped(FILE *f, const char *s);

/* A whole number for option opt in [lo, hi]: "'x' is not a whole number"
 * or "N is out of range (lo to hi)" as usage errors. Returns an exit code. */
int remat_cli_parse_count(const char *cmd, const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

/* Prints "remat: <formatted>" to stderr, control characters escaped (for
 * messages that are not one remat_err). */
void remat_cli_errorf(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Where a command's human lines go: stderr when its document goes to
 * stdout (-o -), so that stdout carries the document alone; else stdout. */
FILE *remat_cli_human(const char *out);

/* Prints the usage of cmd (for --help) to f. */
void remat_cli_print_usage(FILE *f, const char *cmd);

/* getopt_long(argc, argv, shortopts, longopts, NULL), recording longopts as
 * the running command's table: remat_cli_print_usage lists every option of
 * it that the command's synopsis does not name, so a new option shows in
 * the usage with no edit there. */
int remat_cli_getopt(int argc, char *const argv[], const char *shortopts, const struct option *longopts);

/* The argument an option's usage shows ("B" for --budget; "ARG" when it has
 * none, which tests/cli/usage.sh refuses). */
const char *remat_cli_metavar(const char *name);

/* Loads and analyzes path; on failure prints the error, returns its exit
 * code and leaves *g and *a NULL. */
int remat_cli_open_graph(const char *path, remat_graph **g, remat_analysis **a);

/* Writes text to path ("-" = stdout) through remat__write_file_atomic
 * (atomic for regular files, in place for devices and FIFOs); returns an
 * exit code (2 for an empty name, 5 for a failed write). */
int remat_cli_write(const char *path, const char *text, size_t len);

int cmd_lifetimes(int argc, char **argv);
int cmd_gen(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_tp_split(int argc, char **argv);
int cmd_ledger(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_step(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_audit(int argc, char **argv);
/* Loads GRAPH and PLAN (store-all when NULL; its strategy is then
 * "store-all") and builds the trace (cmd_trace.c). L (a struct
 * remat_cli_ledger, ledger_opts.h; NULL for none) adds the training state
 * and, with --dp, the rank's collectives, which the trace then shows as
 * steps. On failure prints the error, returns its exit code and leaves *g,
 * *a and *t NULL; plan is left for the caller to destroy either way, and L
 * too (it may hold the sharding the trace was built with). */
struct remat_trace;
struct remat_cli_ledger;
/* x (may be NULL) gets the extras the trace was built with (the step
 * time's timeline needs the same ones). */
int remat_cli_trace_open(const char *graph, const char *plan_path, struct remat_cli_ledger *L, remat_graph **g,
                         remat_analysis **a, remat_plan *plan, struct remat_trace **t, remat_exec_extras *x);
int cmd_compare(int argc, char **argv);
int cmd_alloc(int argc, char **argv);
int remat_cli_plan_option(const char *cmd, int c, const char *arg, remat_plan_options *o);

/* Pipeline parallelism on plan (cmd_pipeline.c). */
enum {
    REMAT_PPOPT_PP = 900,
    REMAT_PPOPT_MICROBATCHES,
    REMAT_PPOPT_SCHEDULE,
    REMAT_PPOPT_STAGES,
    REMAT_PPOPT_BALANCE
};
#define REMAT_CLI_PP_LONG_OPTS                                               \
    {"pp", required_argument, NULL, REMAT_PPOPT_PP},                         \
    {"microbatches", required_argument, NULL, REMAT_PPOPT_MICROBATCHES},     \
    {"pp-schedule", required_argument, NULL, REMAT_PPOPT_SCHEDULE},          \
    {"pp-stages", required_argument, NULL, REMAT_PPOPT_STAGES},              \
    {"pp-balance", required_argument, NULL, REMAT_PPOPT_BALANCE}
typedef struct remat_cli_pp {
    int set;            /* --pp given */
    int extra;          /* another pipeline option given */
    remat_pp_config c;
    const char *stages; /* --pp-stages text, or NULL */
    remat_pp_balance by;
    const char *plan_out; /* plan -o: where remat_cli_pp_run writes the pipeline plan file, or NULL */
    struct remat_cli_ledger *ledger; /* the ledger's options when given (each stage's state), or NULL */
} remat_cli_pp;
void remat_cli_pp_init(remat_cli_pp *p);
/* -1: not a pipeline option; 0: taken; > 0: the exit code of a usage error. */
int remat_cli_pp_option(const char *cmd, int c, const char *arg, remat_cli_pp *p);
/* Usage errors for combinations (exit 2), else REMAT_EXIT_OK. */
int remat_cli_pp_check(const char *cmd, const remat_cli_pp *p);
/* Plans every stage and prints the per-device report to H. */
int remat_cli_pp_run(const char *cmd, const char *graph, const remat_analysis *a, const remat_cli_pp *p,
                     const remat_plan_options *o, int json, FILE *H);
/* `remat trace --pp ... --device D --format chrome`: plans the stages with o
 * (o->device set), or reads them from the pipeline plan file pp_plan (not
 * NULL), and writes the timed pipeline's Chrome trace to out. */
int remat_cli_pp_trace(const char *graph, const remat_analysis *a, const remat_cli_pp *p, const char *pp_plan,
                       const remat_plan_options *o, const char *out);
/* `remat replay GRAPH FILE` for a pipeline plan file: replays every
 * stage's plan (timed on device when not NULL) and prints the per-device
 * report as remat_cli_pp_run does. */
int remat_cli_pp_replay_file(const char *graph, const remat_analysis *a, const char *path, const char *text,
                             size_t len, const remat_device *device, int json, FILE *H);
/* pp_ledger.c: x[v] = the ledger's state for virtual stage v's params
 * (cuts: P*V+1 forward positions); *reserve the device's reserve. An exit
 * code (--dp with --pp refused). */
int remat_cli_pp_ledger(const char *cmd, const remat_analysis *a, const remat_cli_pp *p, struct remat_cli_ledger *L,
                        const uint32_t *cuts, remat_exec_extras *x, uint64_t *reserve);
/* `remat compare --pp ...`: every strategy under the same pipeline
 * (pp_compare.c), the table or JSON written to out whole. */
int remat_cli_pp_compare(const char *graph, const remat_analysis *a, const remat_cli_pp *p,
                         const remat_plan_options *o, int json, const char *out);
/* --budget (total) or --activation-budget: parses arg into o; a repeated
 * option, or both, is a usage error that says which. Returns an exit code. */
int remat_cli_budget_option(const char *cmd, int total, const char *arg, remat_plan_options *o);
/* After parsing: an option that the chosen strategy would ignore is a
 * usage error naming the option and the strategies it applies to. */
int remat_cli_plan_check(const char *cmd, const remat_plan_options *o);
/* The long options of remat_cli_plan_option (--strategy, the budgets, and
 * one flag per remat_plan_option_table entry, its name in names[i]) into
 * out; returns how many (at most 3 + cap). */
struct option;
size_t remat_cli_plan_long_opts(struct option *out, char (*names)[32], size_t cap);


#endif

/*
 * main.c - the remat command: one table of subcommands (as git.c does), and
 * what every subcommand shares.
 *
 * Each entry's function parses its own options with getopt_long and returns
 * an exit code; only main() exits. Around every command, main() refuses an
 * empty output name before any work and checks stdout after it (a report
 * that did not reach a full disk or a closed pipe is exit 5); every error
 * line goes through one printer that escapes control characters, so an id
 * holding an ESC cannot drive the terminal; and a loaded graph's oddities
 * that remat accepts (a late save, an output no op computes) get one
 * warning each.
 */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static int cmd_help(int argc, char **argv);

static const remat_command commands[] = {
    {"lifetimes", cmd_lifetimes, "GRAPH [--json] [-o FILE]",
     "derive the backward pass and print every tensor's lifetime"},
    {"plan", cmd_plan,
     "GRAPH [--budget B | --activation-budget B] [--device NAME|FILE [--objective flops|time|step-time]] [-o PLAN] "
     "[--pp P [--microbatches M] [--pp-schedule gpipe|1f1b|interleaved:V] [--pp-stages A:B,...] "
     "[--pp-balance flops|bytes]]",
     "choose what to keep and recompute under a budget; the figures are the replayed ones"},
    {"compare", cmd_compare,
     "GRAPH (--budget B | --activation-budget B) [--device NAME|FILE [--objective flops|time|step-time]] [--json] "
     "[--time-limit S] | GRAPH --sweep N [--svg FILE] "
     "[--activation-budget 0] | GRAPH --pp P [--microbatches M] [--pp-schedule S] [--pp-stages A:B,...] "
     "--budget B [--device NAME|FILE]",
     "run every strategy at one budget (a table), or sweep budgets (JSON and an SVG chart); exact gets "
     "--time-limit S seconds (default 1)"},
    {"replay", cmd_replay,
     "GRAPH [PLAN | PIPELINE-PLAN] [--numeric [--scale K]] [--device NAME|FILE] [--json] [-o FILE] | GRAPH --pp P "
     "[--microbatches M] [--pp-schedule S] [--pp-stages A:B,...] [--device NAME|FILE] [--json]",
     "replay a plan's schedule (store-all without PLAN): validate it, measure peak and FLOPs (and step time on a "
     "device)"},
    {"ledger", cmd_ledger,
     "(--params N | --graph GRAPH) [--zero S --dp N] [--bucket B | --bucket-elements N] [-o FILE]",
     "budget one device's weights, gradients, optimizer state, copies and ZeRO shards"},
    {"gen", cmd_gen, "FAMILY [options] [-o FILE]",
     "write a synthetic graph: chain, layered, resnet, transformer or unet"},
    {"trace", cmd_trace,
     "GRAPH [--plan PLAN] [--budget B | --activation-budget B] [--format json|chrome|csv|svg] "
     "[--flops-time [--flops-per-us N] | --device NAME|FILE] -o FILE | GRAPH --pp P [--microbatches M] "
     "[--pp-schedule S] [--pp-stages A:B,...] --device NAME|FILE --format chrome -o FILE | GRAPH --plan "
     "PIPELINE-PLAN --device NAME|FILE --format chrome -o FILE",
     "trace every step and tensor interval of a replay: JSON, Chrome/Perfetto, CSV or SVG timeline"},
    {"audit", cmd_audit,
     "GRAPH [PLAN] [-o FILE]",
     "explain the peak: its step, bytes per category, the largest live tensors and why each is live"},
    {"step", cmd_step,
     "GRAPH [PLAN] --optimizer sgd|momentum|adam|adamw [--lr X] [--steps K] (--data FILE | --seed S) "
     "[--state STATE] [-o STATE] [--every N] [--record-durations GRAPH]",
     "run real training steps under a plan: losses, measured vs accounted peak, time with and without recompute"},
    {"import", cmd_import, "checkmate|dtr FILE [--name NAME] [-o GRAPH]",
     "convert a Checkmate/Moccasin training graph or a DTR operator log into a remat graph"},
    {"tp-split", cmd_tp_split, "GRAPH --tp T --partition FILE [-o GRAPH]",
     "write one rank's graph of T-way Megatron tensor parallelism, the linears split as FILE names them"},
    {"alloc", cmd_alloc,
     "GRAPH [PLAN] [--policy best-fit|first-fit|caching|all] [--static greedy-size|greedy-lifetime|alloc-order|best|none] "
     "[--activation-only] [--svg FILE [--svg-layout static|POLICY]] [--work N] [--json] [-o FILE]",
     "place every allocation in one address space: allocator high-water, fragmentation, a static offset plan"},
    {"help", cmd_help, "[COMMAND]", "show help for remat or one command"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const remat_command *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

/* The option table of the command running now, as its getopt calls pass
 * it, copied (a command may build its table on its stack): the usage lists
 * every option the command accepts from the table it parses with, so the
 * two cannot drift apart. */
#define MAX_SEEN 256
static struct {
    char name[40];
    int has_arg, val;
} seen[MAX_SEEN];
static size_t n_seen;
static char seen_cmd[32];

int remat_cli_getopt(int argc, char *const argv[], const char *shortopts, const struct option *longopts)
{
    n_seen = 0;
    for (const struct option *o = longopts; o->name && n_seen < MAX_SEEN; o++, n_seen++) {
        snprintf(seen[n_seen].name, sizeof seen[n_seen].name, "%s", o->name);
        seen[n_seen].has_arg = o->has_arg;
        seen[n_seen].val = o->val;
    }
    snprintf(seen_cmd, sizeof seen_cmd, "%s", argv[0]);
    return getopt_long(argc, argv, shortopts, longopts, NULL);
}

/* The argument an option's usage shows ("--budget B"): the strategy
 * options' own from their table, else this list; an option missing from
 * both shows "ARG", which the usage test (tests/cli/usage.sh) refuses. */
static const struct {
    const char *name, *arg;
} metavars[] = {
    {"budget", "B"}, {"activation-budget", "B"}, {"strategy", "S"}, {"output", "FILE"}, {"plan", "PLAN"},
    {"params", "N"}, {"graph", "GRAPH"}, {"weights", "DT"}, {"grads", "DT"}, {"states", "DT"}, {"master", "DT"},
    {"comm", "DT"}, {"optimizer", "NAME"}, {"frozen-copies", "K"}, {"zero", "S"}, {"dp", "N"}, {"bucket", "B"},
    {"bucket-elements", "N"}, {"prefetch", "K"}, {"workspace", "B"}, {"reserve", "B"}, {"block", "N"},
    {"min-8bit", "N"}, {"stage3-prefetch", "N"}, {"stage3-max-live", "N"}, {"first-bucket-elements", "N"},
    {"stage3-persistence", "N"}, {"adam-step", "WHERE"}, {"sub-group-size", "N"}, {"deepspeed-config", "FILE"},
    {"write-deepspeed-config", "FILE"}, {"shard", "KIND"}, {"rank", "R"}, {"optimizer-workspace", "torch|B"},
    {"device", "NAME|FILE"}, {"objective", "flops|time"}, {"measured", "FILE"}, {"pp", "P"},
    {"microbatches", "M"}, {"pp-schedule", "gpipe|1f1b|interleaved:V"}, {"pp-stages", "A:B,..."},
    {"pp-balance", "flops|bytes"}, {"sweep", "N"}, {"svg", "FILE"}, {"scale", "K"}, {"format", "FMT"},
    {"flops-per-us", "N"}, {"top", "N"}, {"width", "W"}, {"height", "H"}, {"lr", "X"}, {"momentum", "X"},
    {"betas", "B1,B2"}, {"eps", "X"}, {"weight-decay", "X"}, {"steps", "K"}, {"data", "FILE"}, {"seed", "S"},
    {"state", "STATE"}, {"every", "N"}, {"name", "NAME"}, {"policy", "POLICY"}, {"static", "ORDER"},
    {"svg-layout", "LAYOUT"}, {"work", "N"}, {"stage3-max-reuse", "N"}, {"fsdp-strategy", "S"},
    {"fsdp-backward-prefetch", "P"}, {"fsdp-wrap", "DEPTH"}, {"fsdp-units", "PREFIXES"},
};

const char *remat_cli_metavar(const char *name)
{
    size_t n;
    const remat_plan_option_info *t = remat_plan_option_table(&n);
    for (size_t i = 0; i < n; i++) {
        char flag[64];
        size_t k = 0;
        for (const char *p = t[i].name; *p && k + 1 < sizeof flag; p++)
            flag[k++] = *p == '_' ? '-' : *p;
        flag[k] = '\0';
        if (strcmp(flag, name) == 0 && t[i].arg)
            return t[i].arg;
    }
    for (size_t i = 0; i < sizeof metavars / sizeof metavars[0]; i++)
        if (strcmp(metavars[i].name, name) == 0)
            return metavars[i].arg;
    return "ARG";
}

static int opt_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

/* 1 when text names "--name" as a whole option (not a prefix of a longer one). */
static int names_option(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(text, "--"); p; p = strstr(p + 2, "--"))
        if (strncmp(p + 2, name, n) == 0 && !opt_char(p[2 + n]))
            return 1;
    return 0;
}

void remat_cli_print_usage(FILE *f, const char *cmd)
{
    const remat_command *c = find_command(cmd);
    if (!c)
        return;
    /* The synopsis says what a table cannot (operands, alternatives, what
     * goes together); every other option of the command's table follows. */
    fprintf(f, "usage: remat %s %s", c->name, c->usage);
    if (strcmp(seen_cmd, cmd) == 0)
        for (size_t i = 0; i < n_seen; i++) {
            const char *name = seen[i].name;
            int v = seen[i].val;
            char shortname[4] = {'-', (char)v, ' ', '\0'};
            if (strcmp(name, "help") == 0 || names_option(c->usage, name) ||
                (v > ' ' && v < 127 && strstr(c->usage, shortname)))
                continue;
            if (seen[i].has_arg == no_argument)
                fprintf(f, " [--%s]", name);
            else
                fprintf(f, " [--%s %s]", name, remat_cli_metavar(name));
        }
    fprintf(f, "\n  %s\n", c->summary);
}

static void print_help(FILE *f)
{
    fprintf(f, "remat %s - plan activation rematerialization for training, and prove it by replay\n\n"
               "usage: remat COMMAND [options]\n\ncommands:\n",
            remat_version());
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n`remat COMMAND --help` shows a command's options. Byte sizes accept 123, 4KiB,\n"
               "1.5GiB (2^30) and 2GB (10^9). Exit codes: 0 ok, 1 invalid result, 2 usage,\n"
               "3 bad input, 4 infeasible budget, 5 internal error.\n");
}

/* `remat help CMD` is `remat CMD --help`, so the usage comes from the
 * table CMD parses with. `remat help --options CMD` prints that help, then
 * the table's options one "--name" a line, for the usage test
 * (tests/cli/usage.sh). */
static int cmd_help(int argc, char **argv)
{
    int list = argc > 2 && strcmp(argv[1], "--options") == 0;
    if (argc > 1) {
        const char *name = argv[list ? 2 : 1];
        const remat_command *c = find_command(name);
        if (!c)
            return remat_cli_usage_error("help", "unknown command '%s'", name);
        if (c->fn == cmd_help) {
            remat_cli_print_usage(stdout, "help");
            return REMAT_EXIT_OK;
        }
        char *args[] = {(char *)c->name, (char *)"--help", NULL};
        n_seen = 0;
        int rc = c->fn(2, args);
        for (size_t i = 0; list && i < n_seen; i++) {
            int v = seen[i].val;
            if (v > ' ' && v < 127)
                printf("--%s -%c\n", seen[i].name, v);
            else
                printf("--%s\n", seen[i].name);
        }
        return rc;
    }
    print_help(stdout);
    return REMAT_EXIT_OK;
}

const struct option *remat_cli_options(unsigned docs, const struct option *own, struct option *opts)
{
    size_t k = 0, n;
    for (; own[k].name; k++)
        opts[k] = own[k];
    const remat_report_doc_info *d = remat_report_docs(&n);
    int json = 0;
    for (size_t i = 0; i < n; i++)
        if ((docs & REMAT_CLI_DOC(i)) && (d[i].formats & (1u << REMAT_REPORT_JSON)) && d[i].first != REMAT_REPORT_JSON)
            json = 1;
    if (json)
        opts[k++] = (struct option){"json", no_argument, NULL, 'j'};
    opts[k] = (struct option){NULL, 0, NULL, 0};
    return opts;
}

remat_report_format remat_cli_format(remat_report_doc doc, int json)
{
    size_t n;
    const remat_report_doc_info *d = remat_report_docs(&n);
    return json && (d[doc].formats & (1u << REMAT_REPORT_JSON)) ? REMAT_REPORT_JSON : d[doc].first;
}

int remat_cli_exit_for(remat_status st)
{
    switch (st) {
    case REMAT_OK: return REMAT_EXIT_OK;
    case REMAT_EINVAL: return REMAT_EXIT_USAGE;
    case REMAT_EIO:
    case REMAT_EPARSE:
    case REMAT_EGRAPH:
    case REMAT_EPLAN:
    case REMAT_EOVERFLOW:
    case REMAT_EUNSUPPORTED: return REMAT_EXIT_INPUT;
    case REMAT_ESCHEDULE: return REMAT_EXIT_FAIL;
    case REMAT_EINFEASIBLE: return REMAT_EXIT_INFEASIBLE;
    default: return REMAT_EXIT_INTERNAL;
    }
}

void remat_cli_put_escaped(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\x%02x", *p);
        else
            fputc(*p, f);
    }
}

/* The library's parameters that are not remat_plan_options fields (those
 * map by rule: dp_step is --dp-step), each beside the flag that sets it on
 * this command line. A library message writes such a name in backquotes
 * ("`zero_stage`: stage 4 does not exist"); names of gen's options come
 * from cmd_gen's own option table (remat_cli_gen_flag). */
static const struct {
    const char *param, *flag;
} param_flags[] = {
    /* remat_ledger_config and remat_ledger_from_count */
    {"weights", "--weights"},
    {"grads", "--grads"},
    {"states", "--states"},
    {"master", "--master"},
    {"comm", "--comm"},
    {"optimizer", "--optimizer"},
    {"adafactor_beta1", "--adafactor-beta1"},
    {"block", "--block"},
    {"min_8bit", "--min-8bit"},
    {"frozen_copies", "--frozen-copies"},
    {"zero_stage", "--zero"},
    {"dp", "--dp"},
    {"bucket_bytes", "--bucket"},
    {"bucket_elements", "--bucket-elements"},
    {"prefetch", "--prefetch"},
    {"persist_threshold", "--stage3-persistence"},
    {"offload_optimizer", "--offload-optimizer"},
    {"step", "--adam-step"},
    {"sub_group", "--sub-group-size"},
    {"workspace", "--workspace"},
    {"reserve", "--reserve"},
    {"n_params", "--params"},
    {"remat_ledger_from_graph", "--graph"},
    /* remat_shard_config, remat_zero_redundancy_init, remat_exec_extras */
    {"stage", "--zero"},
    {"remat_shard_config.elem_bytes", "--weights"},
    {"remat_zero_redundancy_init.elem_bytes", "--weights"},
    {"sharding", "--dp N and --zero K"},
    {"wrap_depth", "--fsdp-wrap"},
    {"unit_prefixes", "--fsdp-units"},
    /* remat_pp_config and the pipeline planner */
    {"remat_pp_config", "--pp"},
    {"stages", "--pp"},
    {"microbatches", "--microbatches"},
    {"remat_pp_config.kind", "--pp-schedule"},
    {"remat_pp_parse_schedule", "--pp-schedule"},
    {"remat_pp_parse_stages", "--pp-stages"},
    {"REMAT_BUDGET_ACTIVATION", "--activation-budget"},
    {"REMAT_BUDGET_TOTAL", "--budget"},
    {"extras", "the ledger's options"},
    /* remat_numeric_replay's scale */
    {"scale", "--scale"},
};

/* The flag of remat_plan_options field (or "strategy") name, n bytes, in
 * flag[0..cap); 0 when it is none. The table is the library's, so a new
 * option is mapped with no edit here. */
static int plan_flag_for(const char *name, size_t n, char *flag, size_t cap)
{
    size_t count;
    const remat_plan_option_info *t = remat_plan_option_table(&count);
    int known = n == 8 && strncmp(name, "strategy", 8) == 0;
    for (size_t i = 0; i < count && !known; i++)
        known = strlen(t[i].name) == n && strncmp(t[i].name, name, n) == 0;
    if (!known || n + 3 > cap)
        return 0;
    flag[0] = flag[1] = '-';
    for (size_t i = 0; i < n; i++)
        flag[i + 2] = name[i] == '_' ? '-' : name[i];
    flag[n + 2] = '\0';
    return 1;
}

/* The flag of any library parameter name (n bytes), as above. */
static int flag_for(const char *name, size_t n, char *flag, size_t cap)
{
    if (plan_flag_for(name, n, flag, cap) || remat_cli_gen_flag(name, n, flag, cap))
        return 1;
    for (size_t i = 0; i < sizeof param_flags / sizeof param_flags[0]; i++)
        if (strlen(param_flags[i].param) == n && strncmp(param_flags[i].param, name, n) == 0) {
            if (strlen(param_flags[i].flag) >= cap)
                return 0;
            strcpy(flag, param_flags[i].flag);
            return 1;
        }
    return 0;
}

static int word_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

size_t remat_cli_text_in_flags(const char *msg, int plain, char *out, size_t cap)
{
    size_t k = 0;
    char flag[64];
    for (const char *p = msg; *p && k + 1 < cap;) {
        const char *e = p;
        while (word_char(*e))
            e++;
        size_t n = (size_t)(e - p);
        if (*p == '`') {
            /* `name`: a parameter, whatever the message's code. */
            const char *q = p + 1;
            while (word_char(*q) || *q == '.') /* "remat_shard_config.elem_bytes" */
                q++;
            if (*q == '`' && q > p + 1 && flag_for(p + 1, (size_t)(q - p - 1), flag, sizeof flag)) {
                for (const char *f = flag; *f && k + 1 < cap; f++)
                    out[k++] = *f;
                p = q + 1;
                continue;
            }
            out[k++] = *p++;
            continue;
        }
        int lead = p == msg && *e == ':';
        if (plain && n && (lead || memchr(p, '_', n)) && (p == msg || !word_char(p[-1])) &&
            plan_flag_for(p, n, flag, sizeof flag)) {
            for (const char *f = flag; *f && k + 1 < cap; f++)
                out[k++] = *f;
            p = e;
        } else if (n) {
            for (; p < e && k + 1 < cap; p++)
                out[k++] = *p;
        } else {
            out[k++] = *p++;
        }
    }
    out[k] = '\0';
    return k;
}

/* The library's messages about a bad argument name its API parameters; the
 * user of this command typed flags, so the message is told in those. A
 * backquoted name ("`zero_stage`") is a parameter wherever it stands; so,
 * in argument errors and unmet budgets only (other messages may quote the
 * user's graph, whose ids may be anything), are a leading remat_plan_options
 * name ("strategy:" becomes "--strategy:") and one whose name has an
 * underscore (no English word does) standing as a whole word ("use a larger
 * dp_step" -> "use a larger --dp-step"). */
const char *remat_cli_in_flags(const remat_err *err, char *out, size_t cap)
{
    const char *msg = err->msg[0] ? err->msg : remat_status_str(err->code);
    remat_cli_text_in_flags(msg, err->code == REMAT_EINVAL || err->code == REMAT_EINFEASIBLE, out, cap);
    return out;
}

int remat_cli_usage_err(const char *cmd, const remat_err *err)
{
    char buf[2 * REMAT_ERR_MSG_MAX];
    return remat_cli_usage_error(cmd, "%s", remat_cli_in_flags(err, buf, sizeof buf));
}

int remat_cli_fail(const remat_err *err)
{
    char buf[2 * REMAT_ERR_MSG_MAX];
    fputs("remat: ", stderr);
    remat_cli_put_escaped(stderr, remat_cli_in_flags(err, buf, sizeof buf));
    fputc('\n', stderr);
    return remat_cli_exit_for(err->code);
}

int remat_cli_fail_in(const char *file, const remat_err *err)
{
    char buf[2 * REMAT_ERR_MSG_MAX];
    const char *msg = remat_cli_in_flags(err, buf, sizeof buf);
    size_t n = strlen(file);
    if (strncmp(msg, file, n) == 0 && msg[n] == ':') /* it names the file already */
        return remat_cli_fail(err);
    fputs("remat: ", stderr);
    remat_cli_put_escaped(stderr, file);
    fputs(": ", stderr);
    remat_cli_put_escaped(stderr, msg);
    fputc('\n', stderr);
    return remat_cli_exit_for(err->code);
}

int remat_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "remat %s: ", cmd);
    remat_cli_put_escaped(stderr, msg);
    fputc('\n', stderr);
    remat_cli_print_usage(stderr, cmd);
    return REMAT_EXIT_USAGE;
}

int remat_cli_parse_count(const char *cmd, const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    int digits = *s != '\0';
    for (const char *p = s; *p; p++)
        digits = digits && *p >= '0' && *p <= '9';
    if (!digits)
        return remat_cli_usage_error(cmd, "%s: '%s' is not a whole number", opt, s);
    errno = 0;
    unsigned long long v = strtoull(s, NULL, 10);
    if (errno == ERANGE || v < lo || v > hi)
        return remat_cli_usage_error(cmd, "%s: %s is out of range (%llu to %llu)", opt, s, (unsigned long long)lo,
                                     (unsigned long long)hi);
    *out = (uint64_t)v;
    return REMAT_EXIT_OK;
}

void remat_cli_errorf(const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fputs("remat: ", stderr);
    remat_cli_put_escaped(stderr, msg);
    fputc('\n', stderr);
}

FILE *remat_cli_human(const char *out)
{
    return out && strcmp(out, "-") == 0 ? stderr : stdout;
}

/* Two things a graph may do that are rarely meant, each accepted as
 * graphs/README.md documents and warned about once.
 *
 * A save of a tensor that a later op produces is accepted (graphs/README.md,
 * "saves": converted joint graphs do this, and the tensor exists by the time
 * backward runs), but it keeps that tensor alive from its birth to this
 * op's backward step, which is rarely what a hand-written graph means: say
 * so once, with the first such place and the count. */
static void warn_odd_graph(const char *path, const remat_analysis *a)
{
    const remat_graph *g = a->g;
    uint64_t n = 0;
    uint32_t first_op = REMAT_NONE, first_t = REMAT_NONE, first_i = 0;
    for (uint32_t k = 0; k < g->n_ops; k++) {
        if (a->bwd_step[k] == REMAT_NONE) /* its saves are never read */
            continue;
        const uint32_t *sv = remat_op_saves(g, &g->ops[k]);
        for (uint32_t i = 0; i < g->ops[k].n_save; i++) {
            uint32_t p = g->tensors[sv[i]].producer;
            if (p != REMAT_NONE && a->pos[p] > a->pos[k]) {
                if (n++ == 0) {
                    first_op = k;
                    first_t = sv[i];
                    first_i = i;
                }
            }
        }
    }
    /* An output that no op computes (a param, an input) is accepted, as
     * graphs/README.md says, but backward starts from nothing there. */
    for (uint32_t i = 0; i < g->n_outputs; i++) {
        const remat_tensor *T = &g->tensors[g->outputs[i]];
        if (T->kind == REMAT_TENSOR_ACTIVATION)
            continue;
        fputs("remat: warning: ", stderr);
        remat_cli_put_escaped(stderr, path);
        fprintf(stderr, ": outputs[%u]: '", i);
        remat_cli_put_escaped(stderr, T->id);
        fprintf(stderr, "' is a %s: no op computes it, so nothing flows back from it (a loss is an op's output)\n",
                T->kind == REMAT_TENSOR_PARAM ? "param" : "graph input");
        break;
    }
    if (!n)
        return;
    fputs("remat: warning: ", stderr);
    remat_cli_put_escaped(stderr, path);
    fprintf(stderr, ": ops[%u].saves[%u]: op '", first_op, first_i);
    remat_cli_put_escaped(stderr, g->ops[first_op].id);
    fputs("' saves '", stderr);
    remat_cli_put_escaped(stderr, g->tensors[first_t].id);
    fprintf(stderr, "', which a later op produces: it is kept from then until this op's backward step "
                    "(%llu such save%s in all; see \"saves\" in graphs/README.md)\n",
            (unsigned long long)n, n == 1 ? "" : "s");
}

int remat_cli_open_graph(const char *path, remat_graph **g, remat_analysis **a)
{
    remat_err err;
    remat_err_init(&err);
    *g = NULL;
    *a = NULL;
    if (remat_graph_load_file(path, g, &err) != REMAT_OK)
        return remat_cli_fail(&err);
    if (remat_analyze(*g, a, &err) != REMAT_OK) {
        remat_graph_destroy(*g);
        *g = NULL;
        /* Analysis errors (a cycle) are about the file: name it. */
        fprintf(stderr, "remat: ");
        remat_cli_put_escaped(stderr, path);
        fputs(": ", stderr);
        remat_cli_put_escaped(stderr, err.msg);
        fputc('\n', stderr);
        return remat_cli_exit_for(err.code);
    }
    warn_odd_graph(path, *a);
    return REMAT_EXIT_OK;
}

int remat_cli_write(const char *path, const char *text, size_t len)
{
    remat_err err;
    remat_err_init(&err);
    if (remat__write_file_atomic(path, text, len, &err) != REMAT_OK) {
        remat_cli_fail(&err);
        return err.code == REMAT_EINVAL ? REMAT_EXIT_USAGE : REMAT_EXIT_INTERNAL;
    }
    return REMAT_EXIT_OK;
}

/* Options whose argument names an output file, in every command. */
static int names_an_output(const char *opt)
{
    return strcmp(opt, "-o") == 0 || strcmp(opt, "--output") == 0 || strcmp(opt, "--svg") == 0;
}

/* An empty output name is a usage error before any work is done (getopt
 * would hand it over as a name, and the write would fail only at the end).
 * Scanning argv here, once, covers every command's -o, --output and --svg
 * in both their "-o X" and "--output=X" spellings. */
static int check_output_names(const char *cmd, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            break;
        const char *eq = strchr(argv[i], '=');
        if (eq && eq[1] == '\0' && argv[i][0] == '-' && argv[i][1] == '-') {
            char opt[32];
            size_t n = (size_t)(eq - argv[i]);
            if (n < sizeof opt) {
                memcpy(opt, argv[i], n);
                opt[n] = '\0';
                if (names_an_output(opt))
                    return remat_cli_usage_error(cmd, "%s: the output file name is empty (give a name, or - for "
                                                      "stdout)", opt);
            }
        }
        if (names_an_output(argv[i]) && i + 1 < argc && argv[i + 1][0] == '\0')
            return remat_cli_usage_error(cmd, "%s: the output file name is empty (give a name, or - for stdout)",
                                         argv[i]);
    }
    return REMAT_EXIT_OK;
}

/* Every command's stdout is checked once, here: a report that could not be
 * written (a full disk, a closed pipe, /dev/full) is a failure, exit 5, not
 * a silent success. */
static int finish_stdout(int rc)
{
    errno = 0;
    int bad = fflush(stdout) != 0 || ferror(stdout);
    int saved = errno;
    if (!bad || rc != REMAT_EXIT_OK) /* a failed command has said why */
        return rc;
    fprintf(stderr, "remat: stdout: write failed: %s\n", strerror(saved ? saved : EIO));
    return REMAT_EXIT_INTERNAL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        print_help(stderr);
        return REMAT_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("remat %s\n", remat_version());
        return finish_stdout(REMAT_EXIT_OK);
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        print_help(stdout);
        return finish_stdout(REMAT_EXIT_OK);
    }
    const remat_command *c = find_command(argv[1]);
    if (!c) {
        fprintf(stderr, "remat: unknown command '%s' (see `remat help`)\n", argv[1]);
        return REMAT_EXIT_USAGE;
    }
    int rc = check_output_names(c->name, argc - 1, argv + 1);
    if (rc != REMAT_EXIT_OK)
        return rc;
    return finish_stdout(c->fn(argc - 1, argv + 1));
}

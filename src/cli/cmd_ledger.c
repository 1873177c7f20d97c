/*
 * cmd_ledger.c - `remat ledger (--params N | --graph GRAPH) [options] [--json]`:
 * the training-state ledger of one device (remat/ledger.h).
 *
 * Every option's value is checked here or by the ledger, and a bad one is a
 * usage error naming the option (exit 2); a graph that cannot be budgeted is
 * bad input (exit 3). An option that only applies to another optimizer is
 * refused rather than ignored, so a typo in --optimizer does not silently
 * drop --block.
 */
#include "ledger_opts.h"

#include <getopt.h>
#include <string.h>

enum { OPT_PARAMS = 256, OPT_GRAPH };

static const char *const help_text =
    "\n"
    "  --params N          trainable parameter elements: 423, 7B, 1.5B, 175e9 (k M B T = 10^3..10^12)\n"
    "  --graph GRAPH       count each param of a graph (shape or bytes/dtype); frozen params: weights only\n"
    "  --weights DT        weight precision (default: the graph params' dtype, else f32)\n"
    "  --grads DT          gradient precision (default: like the weights)\n"
    "  --states DT         optimizer-state precision (default: like the weights)\n"
    "  --master DT         master-weight copy (default: none)\n"
    "  --comm DT           collectives' dtype (default: like the gradients)\n"
    "  --optimizer NAME    sgd, momentum, adam (default), adamw, lion, adafactor, adam8bit\n"
    "  --frozen-copies K   whole-model frozen copies (reference, teacher): weights only\n"
    "  --zero S --dp N     ZeRO stage 0-3 over N data-parallel devices\n"
    "  --bucket B          communication bucket in bytes (or --bucket-elements N, in the comm dtype)\n"
    "  --prefetch K        buckets resident besides the one in flight\n"
    "  --workspace B       library workspace held throughout (an explicit line)\n"
    "  --reserve B         allocator fragmentation reserve (an explicit line)\n"
    "  --block N           adam8bit: elements per f32 scale (default 2048)\n"
    "  --min-8bit N        adam8bit: smaller tensors keep f32 states (default 4096; 0: none)\n"
    "  --adafactor-beta1   adafactor: keep a first moment too\n"
    "  --adam-step WHERE   Adam's step counters: host (PyTorch 1.13's default, off the device), device\n"
    "                      (capturable or fused, or CPU training), none (DeepSpeed FusedAdam: an int)\n"
    "  --offload-optimizer ZeRO 1-3: optimizer state, master and gradient partition on the host\n"
    "  --stage3-persistence N  ZeRO 3: params of at most N elements stay gathered (default 0; DeepSpeed's 1e5)\n"
    "  --sub-group-size N  ZeRO 3: optimizer sub groups of N partition elements (default 1e9)\n"
    "  --json, -o FILE     JSON output; write to FILE\n"
    "DT: f64 f32 tf32 bf16 f16 f8_e4m3 f8_e5m2 int8 uint8 (aliases fp32, float64, half, ...).\n"
    "Byte sizes B accept 123, 4KiB, 1.5GiB (2^30) and 2GB (10^9).\n";

/* The ledger's notes name the library's parameters ("`master` f32 adds a
 * master copy"); this command's reader typed flags, so they are told in
 * those, as its error messages are. A note that the mapping would overflow
 * is cut at its buffer, as the library cuts its own. */
static void in_flags(char *text, size_t cap)
{
    char buf[2 * REMAT_LEDGER_NOTE_LEN];
    size_t n = remat_cli_text_in_flags(text, 0, buf, sizeof buf);
    if (n >= cap)
        n = cap - 1;
    memcpy(text, buf, n);
    text[n] = '\0';
}

static void notes_in_flags(remat_ledger_result *r)
{
    in_flags(r->source, sizeof r->source);
    for (uint32_t i = 0; i < r->n_assumptions; i++)
        in_flags(r->assumptions[i], sizeof r->assumptions[i]);
    for (uint32_t i = 0; i < r->n_excluded; i++)
        in_flags(r->excluded[i], sizeof r->excluded[i]);
}

int cmd_ledger(int argc, char **argv)
{
    static const struct option own[] = {
        {"params", required_argument, NULL, OPT_PARAMS},
        {"graph", required_argument, NULL, OPT_GRAPH},
        REMAT_CLI_LEDGER_LONG_OPTS,
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct option buf[sizeof own / sizeof own[0] + REMAT_CLI_FORMAT_FLAGS];
    const struct option *opts = remat_cli_options(REMAT_CLI_DOC(REMAT_DOC_LEDGER), own, buf);
    remat_cli_ledger L;
    remat_cli_ledger_init(&L);
    remat_ledger_config *cfg = &L.cfg;
    remat_err err;
    remat_err_init(&err);
    const char *params = NULL, *graph = NULL, *out = "-";
    int json = 0, c;
    optind = 1;
    /* Each case either stores its value or returns the usage error. */
    while ((c = remat_cli_getopt(argc, argv, "jo:h", opts)) != -1) {
        int lrc = remat_cli_ledger_option("ledger", c, optarg, &L);
        if (lrc >= 0) {
            if (lrc != REMAT_EXIT_OK)
                return lrc;
            continue;
        }
        switch (c) {
        case OPT_PARAMS: params = optarg; break;
        case OPT_GRAPH: graph = optarg; break;
        case 'j': json = 1; break;
        case 'o': out = optarg; break;
        case 'h':
            remat_cli_print_usage(stdout, "ledger");
            fputs(help_text, stdout);
            return REMAT_EXIT_OK;
        default: return remat_cli_usage_error("ledger", "bad option");
        }
    }
    if (optind != argc)
        return remat_cli_usage_error("ledger", "unexpected argument '%s'", argv[optind]);
    if ((params == NULL) == (graph == NULL))
        return remat_cli_usage_error("ledger", "give exactly one of --params N and --graph GRAPH");
    int crc = remat_cli_ledger_check("ledger", &L);
    if (crc != REMAT_EXIT_OK)
        return crc;

    remat_ledger_result r;
    remat_status st;
    if (params) {
        uint64_t n;
        if (remat_ledger_parse_count(params, "--params", &n, &err) != REMAT_OK)
            return remat_cli_usage_err("ledger", &err);
        st = remat_ledger_from_count(cfg, n, &r, &err);
    } else {
        remat_graph *g;
        remat_analysis *a;
        int rc = remat_cli_open_graph(graph, &g, &a);
        if (rc != REMAT_EXIT_OK)
            return rc;
        st = remat_ledger_from_graph(cfg, g, &r, &err);
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
        if (st == REMAT_EGRAPH) {
            remat_cli_fail_in(graph, &err);
            return REMAT_EXIT_INPUT;
        }
    }
    /* The options made a term impossible (or too big): that is a usage
     * error, whatever remat_cli_exit_for says of overflow in input files. */
    if (st == REMAT_EINVAL || st == REMAT_EOVERFLOW)
        return remat_cli_usage_err("ledger", &err);
    if (st != REMAT_OK)
        return remat_cli_fail(&err);
    notes_in_flags(&r);
    size_t len;
    remat_report_input in = {.ledger = &r};
    char *text = remat_report_write(REMAT_DOC_LEDGER, &in, remat_cli_format(REMAT_DOC_LEDGER, json), &len, &err);
    int rc = text ? remat_cli_write(out, text, len) : remat_cli_fail(&err);
    remat_free(text);
    return rc;
}

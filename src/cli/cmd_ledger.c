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
#include "cli.h"
#include "remat/ledger.h"

#include <getopt.h>
#include <string.h>

enum {
    OPT_PARAMS = 256,
    OPT_GRAPH,
    OPT_WEIGHTS,
    OPT_GRADS,
    OPT_STATES,
    OPT_MASTER,
    OPT_COMM,
    OPT_OPTIMIZER,
    OPT_FROZEN_COPIES,
    OPT_ZERO,
    OPT_DP,
    OPT_BUCKET,
    OPT_BUCKET_ELEMENTS,
    OPT_PREFETCH,
    OPT_WORKSPACE,
    OPT_RESERVE,
    OPT_BLOCK,
    OPT_MIN_8BIT,
    OPT_ADAFACTOR_BETA1,
};

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
    "  --json, -o FILE     JSON output; write to FILE\n"
    "DT: f64 f32 tf32 bf16 f16 f8_e4m3 f8_e5m2 int8 uint8 (aliases fp32, float64, half, ...).\n"
    "Byte sizes B accept 123, 4KiB, 1.5GiB (2^30) and 2GB (10^9).\n";

/* A plain decimal integer, nothing else: "--dp 8x" must not become 8. */
static int parse_uint(const char *s, const char *opt, uint64_t *out)
{
    uint64_t v = 0;
    if (!*s)
        return remat_cli_usage_error("ledger", "%s: empty value", opt), 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return remat_cli_usage_error("ledger", "%s: '%s' is not a non-negative integer", opt, s), 0;
        if (!remat_u64_mul(v, 10, &v) || !remat_u64_add(v, (uint64_t)(*p - '0'), &v))
            return remat_cli_usage_error("ledger", "%s: '%s' exceeds 2^64-1", opt, s), 0;
    }
    *out = v;
    return 1;
}

int cmd_ledger(int argc, char **argv)
{
    static const struct option opts[] = {
        {"params", required_argument, NULL, OPT_PARAMS},
        {"graph", required_argument, NULL, OPT_GRAPH},
        {"weights", required_argument, NULL, OPT_WEIGHTS},
        {"grads", required_argument, NULL, OPT_GRADS},
        {"states", required_argument, NULL, OPT_STATES},
        {"master", required_argument, NULL, OPT_MASTER},
        {"comm", required_argument, NULL, OPT_COMM},
        {"optimizer", required_argument, NULL, OPT_OPTIMIZER},
        {"frozen-copies", required_argument, NULL, OPT_FROZEN_COPIES},
        {"zero", required_argument, NULL, OPT_ZERO},
        {"dp", required_argument, NULL, OPT_DP},
        {"bucket", required_argument, NULL, OPT_BUCKET},
        {"bucket-elements", required_argument, NULL, OPT_BUCKET_ELEMENTS},
        {"prefetch", required_argument, NULL, OPT_PREFETCH},
        {"workspace", required_argument, NULL, OPT_WORKSPACE},
        {"reserve", required_argument, NULL, OPT_RESERVE},
        {"block", required_argument, NULL, OPT_BLOCK},
        {"min-8bit", required_argument, NULL, OPT_MIN_8BIT},
        {"adafactor-beta1", no_argument, NULL, OPT_ADAFACTOR_BETA1},
        {"json", no_argument, NULL, 'j'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    remat_ledger_config cfg;
    remat_ledger_config_init(&cfg);
    remat_err err;
    remat_err_init(&err);
    const char *params = NULL, *graph = NULL, *out = "-";
    int json = 0, c, have_block = 0, have_min8 = 0;
    uint64_t v;
    optind = 1;
    /* Each case either stores its value or returns the usage error. */
    while ((c = getopt_long(argc, argv, "jo:h", opts, NULL)) != -1) {
        remat_ledger_dtype *dt = NULL;
        const char *name = NULL;
        switch (c) {
        case OPT_PARAMS: params = optarg; break;
        case OPT_GRAPH: graph = optarg; break;
        case OPT_WEIGHTS: dt = &cfg.weights, name = "--weights"; break;
        case OPT_GRADS: dt = &cfg.grads, name = "--grads"; break;
        case OPT_STATES: dt = &cfg.states, name = "--states"; break;
        case OPT_MASTER: dt = &cfg.master, name = "--master"; break;
        case OPT_COMM: dt = &cfg.comm, name = "--comm"; break;
        case OPT_OPTIMIZER:
            if (remat_ledger_optimizer_parse(optarg, "--optimizer", &cfg.optimizer, &err) != REMAT_OK)
                return remat_cli_usage_error("ledger", "%s", err.msg);
            break;
        case OPT_FROZEN_COPIES:
            if (!parse_uint(optarg, "--frozen-copies", &cfg.frozen_copies))
                return REMAT_EXIT_USAGE;
            break;
        case OPT_ZERO:
            if (!parse_uint(optarg, "--zero", &v))
                return REMAT_EXIT_USAGE;
            if (v > 3)
                return remat_cli_usage_error("ledger", "--zero: stage %s does not exist (use 0, 1, 2 or 3)", optarg);
            cfg.zero_stage = (uint32_t)v;
            break;
        case OPT_DP:
            if (!parse_uint(optarg, "--dp", &cfg.dp))
                return REMAT_EXIT_USAGE;
            if (cfg.dp == 0)
                return remat_cli_usage_error("ledger", "--dp: the data-parallel degree must be at least 1");
            break;
        case OPT_BUCKET:
        case OPT_WORKSPACE:
        case OPT_RESERVE: {
            const char *o = c == OPT_BUCKET ? "--bucket" : c == OPT_WORKSPACE ? "--workspace" : "--reserve";
            uint64_t *dst = c == OPT_BUCKET ? &cfg.bucket_bytes : c == OPT_WORKSPACE ? &cfg.workspace : &cfg.reserve;
            if (remat_parse_bytes(optarg, o, dst, &err) != REMAT_OK)
                return remat_cli_usage_error("ledger", "%s", err.msg);
            break;
        }
        case OPT_BUCKET_ELEMENTS:
            if (remat_ledger_parse_count(optarg, "--bucket-elements", &cfg.bucket_elements, &err) != REMAT_OK)
                return remat_cli_usage_error("ledger", "%s", err.msg);
            break;
        case OPT_PREFETCH:
            if (!parse_uint(optarg, "--prefetch", &cfg.prefetch))
                return REMAT_EXIT_USAGE;
            break;
        case OPT_BLOCK:
            if (!parse_uint(optarg, "--block", &cfg.block))
                return REMAT_EXIT_USAGE;
            if (cfg.block == 0)
                return remat_cli_usage_error("ledger", "--block: the adam8bit block must be at least 1 element");
            have_block = 1;
            break;
        case OPT_MIN_8BIT:
            if (!parse_uint(optarg, "--min-8bit", &cfg.min_8bit))
                return REMAT_EXIT_USAGE;
            have_min8 = 1;
            break;
        case OPT_ADAFACTOR_BETA1: cfg.adafactor_beta1 = true; break;
        case 'j': json = 1; break;
        case 'o': out = optarg; break;
        case 'h':
            remat_cli_print_usage(stdout, "ledger");
            fputs(help_text, stdout);
            return REMAT_EXIT_OK;
        default: return remat_cli_usage_error("ledger", "bad option");
        }
        if (dt && remat_ledger_dtype_parse(optarg, name, dt, &err) != REMAT_OK)
            return remat_cli_usage_error("ledger", "%s", err.msg);
    }
    if (optind != argc)
        return remat_cli_usage_error("ledger", "unexpected argument '%s'", argv[optind]);
    if ((params == NULL) == (graph == NULL))
        return remat_cli_usage_error("ledger", "give exactly one of --params N and --graph GRAPH");
    if ((have_block || have_min8) && cfg.optimizer != REMAT_LEDGER_ADAM8BIT)
        return remat_cli_usage_error("ledger", "%s applies to --optimizer adam8bit only (not %s)",
                                     have_block ? "--block" : "--min-8bit", remat_ledger_optimizer_name(cfg.optimizer));
    if (cfg.adafactor_beta1 && cfg.optimizer != REMAT_LEDGER_ADAFACTOR)
        return remat_cli_usage_error("ledger", "--adafactor-beta1 applies to --optimizer adafactor only (not %s)",
                                     remat_ledger_optimizer_name(cfg.optimizer));

    remat_ledger_result r;
    remat_status st;
    if (params) {
        uint64_t n;
        if (remat_ledger_parse_count(params, "--params", &n, &err) != REMAT_OK)
            return remat_cli_usage_error("ledger", "%s", err.msg);
        st = remat_ledger_from_count(&cfg, n, &r, &err);
    } else {
        remat_graph *g;
        remat_analysis *a;
        int rc = remat_cli_open_graph(graph, &g, &a);
        if (rc != REMAT_EXIT_OK)
            return rc;
        st = remat_ledger_from_graph(&cfg, g, &r, &err);
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
        if (st == REMAT_EGRAPH) {
            fprintf(stderr, "remat: %s: %s\n", graph, err.msg);
            return REMAT_EXIT_INPUT;
        }
    }
    /* The options made a term impossible (or too big): that is a usage
     * error, whatever remat_cli_exit_for says of overflow in input files. */
    if (st == REMAT_EINVAL || st == REMAT_EOVERFLOW)
        return remat_cli_usage_error("ledger", "%s", err.msg);
    if (st != REMAT_OK)
        return remat_cli_fail(&err);
    size_t len;
    char *text = remat_ledger_format(&r, json, &len, &err);
    int rc = text ? remat_cli_write(out, text, len) : remat_cli_fail(&err);
    remat_free(text);
    return rc;
}

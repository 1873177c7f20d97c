/*
 * cmd_gen.c - `remat gen FAMILY [options] [-o FILE]`: synthetic graphs.
 *
 * Options are parsed into raw values first and applied after the family is
 * known (the family may come after the options), so that an option a family
 * does not use is an error that says so, rather than silently ignored: a
 * user who types `remat gen chain --width 8` has misunderstood something.
 * Every option error names the option and exits 2.
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Family bits for the "applies to" column. */
#define F_CHAIN (1u << REMAT_GEN_CHAIN)
#define F_LAYERED (1u << REMAT_GEN_LAYERED)
#define F_RESNET (1u << REMAT_GEN_RESNET)
#define F_TRANSFORMER (1u << REMAT_GEN_TRANSFORMER)
#define F_UNET (1u << REMAT_GEN_UNET)
#define F_ALL (F_CHAIN | F_LAYERED | F_RESNET | F_TRANSFORMER | F_UNET)
#define F_NETS (F_RESNET | F_TRANSFORMER | F_UNET)

typedef enum { K_COUNT, K_BYTES, K_FLOPS, K_SEED, K_FLAG, K_TEXT } kind;

/* One row per option: how to parse it, which families take it, and where
 * it goes in remat_gen_opts. The getopt table is built from these rows. */
typedef struct {
    const char *name;
    int short_name; /* 0: long only */
    kind k;
    unsigned families;
    size_t offset;
} gen_option;

#define OFF(field) offsetof(remat_gen_opts, field)

static const gen_option options[] = {
    {"ops", 0, K_COUNT, F_CHAIN, OFF(ops)},
    {"param-every", 0, K_COUNT, F_CHAIN, OFF(param_every)},
    {"random", 0, K_FLAG, F_CHAIN, OFF(random)},
    {"bytes", 0, K_BYTES, F_CHAIN | F_LAYERED, OFF(bytes)},
    {"max-bytes", 0, K_BYTES, F_CHAIN | F_LAYERED, OFF(max_bytes)},
    {"flops", 0, K_FLOPS, F_CHAIN | F_LAYERED, OFF(flops)},
    {"max-flops", 0, K_FLOPS, F_CHAIN | F_LAYERED, OFF(max_flops)},
    {"param-bytes", 0, K_BYTES, F_CHAIN | F_LAYERED, OFF(param_bytes)},
    {"seed", 0, K_SEED, F_CHAIN | F_LAYERED, OFF(seed)},
    {"width", 0, K_COUNT, F_LAYERED, OFF(width)},
    {"layers", 'L', K_COUNT, F_LAYERED | F_TRANSFORMER, OFF(layers)},
    {"fan-in", 0, K_COUNT, F_LAYERED, OFF(fan_in)},
    {"batch", 'b', K_COUNT, F_NETS, OFF(batch)},
    {"elem-bytes", 0, K_COUNT, F_NETS, OFF(elem_bytes)},
    {"blocks", 0, K_COUNT, F_RESNET, OFF(blocks)},
    {"depth", 0, K_COUNT, F_UNET, OFF(depth)},
    {"channels", 0, K_COUNT, F_RESNET | F_UNET, OFF(channels)},
    {"size", 0, K_COUNT, F_RESNET | F_UNET, OFF(size)},
    {"in-channels", 0, K_COUNT, F_RESNET | F_UNET, OFF(in_channels)},
    {"classes", 0, K_COUNT, F_RESNET | F_UNET, OFF(classes)},
    {"seq", 's', K_COUNT, F_TRANSFORMER, OFF(seq)},
    {"hidden", 'h', K_COUNT, F_TRANSFORMER, OFF(hidden)},
    {"heads", 'a', K_COUNT, F_TRANSFORMER, OFF(heads)},
    {"vocab", 0, K_COUNT, F_TRANSFORMER, OFF(vocab)},
    {"dropout", 0, K_FLAG, F_TRANSFORMER, OFF(dropout)},
    {"tp", 0, K_COUNT, F_TRANSFORMER, OFF(tp)},
    {"sp", 0, K_FLAG, F_TRANSFORMER, OFF(sp)},
    {"selective", 0, K_FLAG, F_TRANSFORMER, OFF(selective)},
    {"vocab-parallel", 0, K_FLAG, F_TRANSFORMER, OFF(vocab_parallel)},
    {"name", 0, K_TEXT, F_ALL, OFF(name)},
};
#define N_OPTIONS (sizeof options / sizeof options[0])
/* getopt values of the long-only options start past any character. */
#define LONG_BASE 256
#define OPT_OUTPUT 'o'
#define OPT_HELP (LONG_BASE + 100)

static const char gen_help[] =
    "usage: remat gen FAMILY [options] [-o FILE]\n"
    "  write a synthetic remat-graph (JSON) to FILE or stdout\n\n"
    "families (ops in closed form):\n"
    "  chain        n ops in a line, one param per k ops     ops = n\n"
    "  layered      random layered DAG into one loss          ops = width*layers + 1\n"
    "  resnet       residual conv-bn-relu stack               ops = 7*blocks + 8\n"
    "  transformer  pre-LN blocks, Megatron parameters        ops = 15*layers + 4 (18*layers + 4 with --dropout)\n"
    "  unet         encoder/decoder with long concat skips    ops = 11*depth + 6\n"
    "  (at most 10^7 ops, about 1.4 GB of JSON: larger sizes are refused as out of range)\n\n"
    "chain:        --ops N (16) --param-every K (1) --random --seed S (1)\n"
    "              --bytes B (1MiB) --max-bytes B (4x) --flops F (1e9) --max-flops F (4x)\n"
    "              --param-bytes B (= --bytes)\n"
    "layered:      --width W (4) -L/--layers N (4) --fan-in F (2) --seed S and the\n"
    "              byte/flop ranges of chain (sizes and costs are always random)\n"
    "resnet:       --blocks N (3) -b/--batch N (8) --channels C (64) --size S (32)\n"
    "              --in-channels C (3) --classes K (10) --elem-bytes P (4)\n"
    "transformer:  -s/--seq S (1024) -b/--batch B (4) -h/--hidden H (1024)\n"
    "              -a/--heads A (16) -L/--layers L (24) --vocab V (50257) --elem-bytes P (2)\n"
    "              --dropout (Megatron's dropouts, 1-byte masks: Korthikanti et al.'s bytes)\n"
    "              --tp T (1): one rank of T-way tensor parallelism (T divides A), with\n"
    "              its all-reduces; --sp: sequence parallelism too (T divides S), with\n"
    "              all-gathers and reduce-scatters; --selective: the attention core as\n"
    "              one checkpointed op (Korthikanti et al.'s selective recomputation);\n"
    "              --vocab-parallel: the embedding and head split by vocabulary (T\n"
    "              divides V), the parallel cross-entropy (Megatron's VocabParallelEmbedding)\n"
    "              (+4 ops per layer with T > 1, -2 or -3 with --selective, +2 with --sp)\n"
    "unet:         --depth D (3) -b/--batch N (8) --channels C (16, doubling per level)\n"
    "              --size S (64, a multiple of 2^D) --in-channels C (3) --classes K (1)\n"
    "              --elem-bytes P (4)\n"
    "all:          --name NAME  -o/--output FILE (atomic; - for stdout)  --help\n\n"
    "Byte sizes accept 123, 4KiB, 1.5GiB, 2GB. FLOPs accept integers and 1e9-style\n"
    "exact values. The same options and seed always give the same file.\n";

/* A positive count that fits in uint32_t. */
static int parse_count(const char *opt, const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!*s || *s == '-' || *s == '+')
        return remat_cli_usage_error("gen", "--%s: expected a positive integer, got '%s'", opt, s);
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || (errno && errno != ERANGE))
        return remat_cli_usage_error("gen", "--%s: expected a positive integer, got '%s'", opt, s);
    if (v == 0 || v > UINT32_MAX || errno == ERANGE)
        return remat_cli_usage_error("gen", "--%s: %s is out of range (1 to %" PRIu32 ")", opt, s, UINT32_MAX);
    *out = v;
    return REMAT_EXIT_OK;
}

/* A FLOP count: a decimal integer, or an exact value like 2.5e9, up to 2^53. */
static int parse_flops(const char *opt, const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!*s || *s == '-' || *s == '+')
        return remat_cli_usage_error("gen", "--%s: expected a non-negative integer, got '%s'", opt, s);
    if (strpbrk(s, ".eE")) {
        double d = strtod(s, &end);
        if (*end || errno || !isfinite(d) || d != floor(d) || d > 9007199254740992.0)
            return remat_cli_usage_error("gen", "--%s: '%s' is not a whole number up to 2^53", opt, s);
        *out = (uint64_t)d;
        return REMAT_EXIT_OK;
    }
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno)
        return remat_cli_usage_error("gen", "--%s: expected a non-negative integer, got '%s'", opt, s);
    *out = v;
    return REMAT_EXIT_OK;
}

static int parse_seed(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!*s || *s == '-' || *s == '+')
        return remat_cli_usage_error("gen", "--seed: expected an integer from 0 to 2^64-1, got '%s'", s);
    unsigned long long v = strtoull(s, &end, 0);
    if (*end || errno)
        return remat_cli_usage_error("gen", "--seed: expected an integer from 0 to 2^64-1, got '%s'", s);
    *out = v;
    return REMAT_EXIT_OK;
}

/* The value as typed, kept until the family is known. */
typedef struct {
    int set;
    uint64_t v;
    const char *text;
} raw_value;

static void apply(remat_gen_opts *o, const gen_option *opt, const raw_value *r)
{
    char *field = (char *)o + opt->offset;
    switch (opt->k) {
    case K_COUNT: {
        uint32_t v = (uint32_t)r->v;
        memcpy(field, &v, sizeof v);
        break;
    }
    case K_BYTES:
    case K_FLOPS:
    case K_SEED: memcpy(field, &r->v, sizeof r->v); break;
    case K_FLAG: {
        bool b = true;
        memcpy(field, &b, sizeof b);
        break;
    }
    case K_TEXT: memcpy(field, &r->text, sizeof r->text); break;
    }
}

static const char *families_of(unsigned mask, char *buf, size_t cap)
{
    buf[0] = '\0';
    for (int f = 0; f < REMAT_GEN_FAMILY_COUNT; f++)
        if (mask & (1u << f)) {
            size_t n = strlen(buf);
            snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", remat_gen_family_name((remat_gen_family)f));
        }
    return buf;
}

int cmd_gen(int argc, char **argv)
{
    struct option longopts[N_OPTIONS + 3];
    char shortopts[64];
    raw_value raw[N_OPTIONS];
    memset(raw, 0, sizeof raw);
    /* A leading ':' makes a missing value return ':' rather than '?'. No
     * '+': permuting lets the family come before or after the options. */
    size_t sn = 0;
    shortopts[sn++] = ':';
    shortopts[sn++] = 'o';
    shortopts[sn++] = ':';
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const gen_option *g = &options[i];
        longopts[i] = (struct option){g->name, g->k == K_FLAG ? no_argument : required_argument, NULL,
                                      g->short_name ? g->short_name : LONG_BASE + (int)i};
        if (g->short_name) {
            shortopts[sn++] = (char)g->short_name;
            shortopts[sn++] = ':';
        }
    }
    shortopts[sn] = '\0';
    longopts[N_OPTIONS] = (struct option){"output", required_argument, NULL, OPT_OUTPUT};
    longopts[N_OPTIONS + 1] = (struct option){"help", no_argument, NULL, OPT_HELP};
    longopts[N_OPTIONS + 2] = (struct option){NULL, 0, NULL, 0};

    const char *out = "-";
    int c;
    optind = 1;
    opterr = 0; /* our messages name the option; getopt's would be printed twice */
    while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        if (c == OPT_HELP) {
            fputs(gen_help, stdout);
            return REMAT_EXIT_OK;
        }
        if (c == OPT_OUTPUT) {
            out = optarg;
            continue;
        }
        if (c == ':')
            return remat_cli_usage_error("gen", "option '%s' needs a value", argv[optind - 1]);
        if (c == '?') {
            if (optopt)
                return remat_cli_usage_error("gen", "unknown option '-%c' (see remat gen --help)", optopt);
            return remat_cli_usage_error("gen", "unknown or ambiguous option '%s' (see remat gen --help)",
                                         argv[optind - 1]);
        }
        size_t i = 0;
        while (i < N_OPTIONS && (options[i].short_name ? options[i].short_name : LONG_BASE + (int)i) != c)
            i++;
        if (i == N_OPTIONS)
            return remat_cli_usage_error("gen", "internal: unhandled option %d", c);
        const gen_option *g = &options[i];
        raw_value *r = &raw[i];
        r->set = 1;
        r->text = optarg;
        int rc = REMAT_EXIT_OK;
        switch (g->k) {
        case K_COUNT: rc = parse_count(g->name, optarg, &r->v); break;
        case K_FLOPS: rc = parse_flops(g->name, optarg, &r->v); break;
        case K_SEED: rc = parse_seed(optarg, &r->v); break;
        case K_BYTES: {
            char what[32];
            remat_err err;
            remat_err_init(&err);
            snprintf(what, sizeof what, "--%s", g->name);
            if (remat_parse_bytes(optarg, what, &r->v, &err) != REMAT_OK)
                return remat_cli_usage_error("gen", "%s", err.msg);
            break;
        }
        case K_FLAG:
        case K_TEXT: break;
        }
        if (rc != REMAT_EXIT_OK)
            return rc;
    }
    if (optind >= argc)
        return remat_cli_usage_error("gen", "expected a FAMILY (chain, layered, resnet, transformer, unet)");
    if (optind < argc - 1)
        return remat_cli_usage_error("gen", "unexpected argument '%s' after the family", argv[optind + 1]);

    remat_err err;
    remat_err_init(&err);
    remat_gen_family fam;
    if (remat_gen_family_parse(argv[optind], &fam, &err) != REMAT_OK)
        return remat_cli_usage_error("gen", "%s", err.msg);
    remat_gen_opts o;
    remat_gen_opts_init(&o, fam);
    for (size_t i = 0; i < N_OPTIONS; i++) {
        if (!raw[i].set)
            continue;
        if (!(options[i].families & (1u << fam))) {
            char fams[96];
            return remat_cli_usage_error("gen", "--%s does not apply to %s (it applies to %s)", options[i].name,
                                         remat_gen_family_name(fam),
                                         families_of(options[i].families, fams, sizeof fams));
        }
        apply(&o, &options[i], &raw[i]);
    }
    size_t len;
    char *text = remat_gen_json(&o, &len, &err);
    if (!text) {
        if (err.code == REMAT_EINVAL)
            return remat_cli_usage_error("gen", "%s", err.msg);
        return remat_cli_fail(&err);
    }
    int rc = remat_cli_write(out, text, len);
    remat_free(text);
    return rc;
}

/*
 * cmd_replay.c - `remat replay GRAPH [PLAN] [--numeric [--scale K]] [--json] [-o FILE]`.
 *
 * With no plan it replays the store-all schedule. An invalid schedule prints
 * valid: false with the first failing instruction and exits 1.
 *
 * --numeric also executes the schedule on real buffers (remat_numeric_replay)
 * and adds a "numeric" object to the report: recomputations checked,
 * mismatches, the parameter-gradient hash, the allocator's high-water mark
 * beside the scaled accounted peak, peak RSS and wall time. A mismatch or an
 * allocator/accounting disagreement exits 1, like an invalid schedule: the
 * plan was not proved. --scale K divides every buffer by K (rounding up) so
 * that large graphs fit; the hash then describes the scaled run.
 */
#include "cli.h"
#include "ledger_opts.h"
#include "time_opts.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

/* A scale is a plain divisor: digits only, at least 1. */
static void numeric_json(remat_buf *b, const remat_numeric_result *nr, const remat_err *why)
{
    remat_buf_printf(b,
                     ",\n \"numeric\": {\"scale\": %llu, \"recomputed_tensors_checked\": %llu, \"mismatches\": %llu, "
                     "\"param_grad_hash\": \"%s\", \"param_grads_hashed\": %u,\n  \"allocator_peak_bytes\": %llu, "
                     "\"accounted_peak_bytes_scaled\": %llu, \"equal\": %s, \"peak_rss_bytes\": %llu, "
                     "\"wall_seconds\": %.6f",
                     (unsigned long long)nr->scale, (unsigned long long)nr->recomputed_tensors_checked,
                     (unsigned long long)nr->mismatches, nr->param_grad_hash_hex, nr->param_grads_hashed,
                     (unsigned long long)nr->allocator_peak_bytes,
                     (unsigned long long)nr->accounted_peak_bytes_scaled, nr->equal ? "true" : "false",
                     (unsigned long long)nr->peak_rss_bytes, nr->wall_seconds);
    if (!nr->verified) {
        remat_buf_puts(b, ", \"error\": ");
        remat_buf_json_str(b, why->msg);
    }
    remat_buf_puts(b, "}");
}

static void numeric_text(remat_buf *b, const remat_numeric_result *nr)
{
    char x[64], y[64];
    remat_buf_printf(b, "numeric     scale %llu: %llu recomputed tensors checked, %llu mismatches (%s)\n",
                     (unsigned long long)nr->scale, (unsigned long long)nr->recomputed_tensors_checked,
                     (unsigned long long)nr->mismatches, nr->verified ? "verified" : "NOT verified");
    remat_buf_printf(b, "  param grad hash   %s (BLAKE2b-256 over %u parameter gradient%s)\n",
                     nr->param_grad_hash_hex, nr->param_grads_hashed, nr->param_grads_hashed == 1 ? "" : "s");
    remat_buf_printf(b, "  allocator peak    %s\n", remat_format_bytes(nr->allocator_peak_bytes, x, sizeof x));
    remat_buf_printf(b, "  accounted peak    %s with every buffer at 1/%llu size (%s)\n",
                     remat_format_bytes(nr->accounted_peak_bytes_scaled, y, sizeof y), (unsigned long long)nr->scale,
                     nr->equal ? "equal" : "DIFFERENT");
    remat_buf_printf(b, "  peak RSS          %s (the whole process)\n",
                     remat_format_bytes(nr->peak_rss_bytes, x, sizeof x));
    remat_buf_printf(b, "  wall time         %.6f s\n", nr->wall_seconds);
}

/* Appends the numeric figures to a replay report. The JSON report is one
 * object ending in "}\n": the numeric object goes in before that brace, so
 * the accounting fields stay exactly as remat_report_replay writes them. */
static char *with_numeric(char *text, size_t *len, int json, const remat_numeric_result *nr, const remat_err *why,
                          remat_err *err)
{
    remat_buf b;
    remat_buf_init(&b);
    if (json) {
        if (*len < 2 || text[*len - 2] != '}' || text[*len - 1] != '\n') {
            remat_buf_destroy(&b);
            remat_free(text);
            remat_err_set(err, REMAT_EINTERNAL, "replay report does not end with an object");
            return NULL;
        }
        remat_buf_putn(&b, text, *len - 2);
        numeric_json(&b, nr, why);
        remat_buf_puts(&b, "}\n");
    } else {
        remat_buf_putn(&b, text, *len);
        numeric_text(&b, nr);
    }
    remat_free(text);
    return remat_buf_finish(&b, len, err, "replay report");
}

int cmd_replay(int argc, char **argv)
{
    static const struct option own[] = {
        {"output", required_argument, NULL, 'o'},
        {"numeric", no_argument, NULL, 'n'},
        {"scale", required_argument, NULL, 's'},
        REMAT_CLI_LEDGER_LONG_OPTS,
        REMAT_CLI_TIME_LONG_OPTS,
        REMAT_CLI_PP_LONG_OPTS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct option buf[sizeof own / sizeof own[0] + REMAT_CLI_FORMAT_FLAGS];
    const struct option *opts =
        remat_cli_options(REMAT_CLI_DOC(REMAT_DOC_REPLAY) | REMAT_CLI_DOC(REMAT_DOC_PIPELINE), own, buf);
    int json = 0, numeric = 0, c;
    uint64_t scale = 1;
    const char *out = "-", *scale_arg = NULL;
    optind = 1;
    remat_cli_ledger L;
    remat_cli_ledger_init(&L);
    remat_cli_time T;
    remat_cli_time_init(&T);
    remat_cli_pp pp;
    remat_cli_pp_init(&pp);
    while ((c = remat_cli_getopt(argc, argv, "jo:h", opts)) != -1) {
        int lrc = remat_cli_pp_option("replay", c, optarg, &pp);
        if (lrc > 0)
            return lrc;
        if (lrc == 0)
            continue;
        lrc = remat_cli_ledger_option("replay", c, optarg, &L);
        if (lrc > 0)
            return lrc;
        if (lrc == 0)
            continue;
        if ((lrc = remat_cli_time_option("replay", c, optarg, 0, &T)) > 0)
            return lrc;
        if (lrc == 0)
            continue;
        switch (c) {
        case 'j': json = 1; break;
        case 'o': out = optarg; break;
        case 'n': numeric = 1; break;
        case 's': scale_arg = optarg; break;
        case 'h': remat_cli_print_usage(stdout, "replay"); return REMAT_EXIT_OK;
        default: return remat_cli_usage_error("replay", "bad option");
        }
    }
    if (optind != argc - 1 && optind != argc - 2)
        return remat_cli_usage_error("replay", "expected GRAPH [PLAN]");
    if (scale_arg && !numeric)
        return remat_cli_usage_error("replay", "--scale applies to --numeric only");
    int prc;
    if ((prc = remat_cli_time_load("replay", &T, NULL)) != REMAT_EXIT_OK)
        return prc;
    if (scale_arg && (prc = remat_cli_parse_count("replay", "--scale", scale_arg, 1, UINT64_MAX, &scale)) != REMAT_EXIT_OK)
        return prc;
    if (L.used && numeric)
        return remat_cli_usage_error("replay", "--numeric replays the graph's own tensors: drop the ledger options");
    if ((prc = remat_cli_pp_check("replay", &pp)) != REMAT_EXIT_OK)
        return prc;
    if (pp.set && (optind == argc - 2 || numeric || strcmp(out, "-") != 0))
        return remat_cli_usage_error("replay", "--pp replays each stage's store-all schedule: no PLAN, --numeric or "
                                               "-o with it");
    remat_graph *g;
    remat_analysis *a;
    int rc = remat_cli_open_graph(argv[optind], &g, &a);
    if (rc != REMAT_EXIT_OK)
        return rc;
    if (!pp.set && optind == argc - 2) {
        /* A pipeline plan file (plan --pp -o) replays per stage. */
        char *ptext = NULL;
        size_t plen = 0;
        remat_err ferr;
        remat_err_init(&ferr);
        if (remat__read_file(argv[optind + 1], &ptext, &plen, &ferr) == REMAT_OK && remat_pp_plan_sniff(ptext, plen)) {
            if (numeric || L.used || strcmp(out, "-") != 0)
                rc = remat_cli_usage_error("replay", "a pipeline plan replays per stage: no --numeric, -o or ledger "
                                                     "options with it");
            else
                rc = remat_cli_pp_replay_file(argv[optind], a, argv[optind + 1], ptext, plen,
                                              T.have_device ? &T.dev : NULL, json, stdout);
            remat__free(ptext);
            remat_cli_ledger_destroy(&L);
            remat_analysis_destroy(a);
            remat_graph_destroy(g);
            return rc;
        }
        remat__free(ptext);
    }
    if (pp.set) {
        /* Store-all per stage: the plan strategy that keeps everything. */
        remat_plan_options po;
        remat_plan_options_init(&po);
        po.strategy = "store-all";
        po.device = T.have_device ? &T.dev : NULL;
        pp.ledger = L.used ? &L : NULL;
        rc = remat_cli_pp_run("replay", argv[optind], a, &pp, &po, json, stdout);
        remat_cli_ledger_destroy(&L);
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
        return rc;
    }
    remat_exec_extras extras;
    uint64_t reserve = 0;
    if ((rc = remat_cli_ledger_extras("replay", a, &L, &extras, &reserve)) != REMAT_EXIT_OK) {
        remat_cli_ledger_destroy(&L);
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
        return rc;
    }
    remat_err err;
    remat_err_init(&err);
    remat_plan plan;
    remat_plan_init(&plan);
    remat_status st;
    if (optind == argc - 2)
        st = remat_plan_load_file(g, argv[optind + 1], &plan, &err);
    else
        st = remat_schedule_store_all(a, &plan.schedule, &err);
    if (st == REMAT_OK && (rc = remat_cli_ledger_shard_schedule(&L, &plan.schedule)) != REMAT_EXIT_OK) {
        remat_plan_destroy(&plan);
        remat_cli_ledger_destroy(&L);
        remat_analysis_destroy(a);
        remat_graph_destroy(g);
        return rc;
    }
    remat_numeric_result nr;
    memset(&nr, 0, sizeof nr);
    remat_replay_result *r = &nr.replay;
    if (st == REMAT_OK)
        st = numeric ? remat_numeric_replay(a, &plan.schedule, scale, &nr, &err)
                     : remat_replay(a, &plan.schedule, &extras, NULL, r, &err);
    /* A schedule's or an overflow's message names the file it came from. */
    const char *src = optind == argc - 2 ? argv[optind + 1] : argv[optind];
    if (st != REMAT_OK) {
        rc = remat_cli_fail_in(src, &err);
    } else {
        remat_err rerr;
        remat_err_init(&rerr);
        size_t len;
        remat_report_input in = {.a = a, .s = &plan.schedule, .r = r, .why = &err};
        char *text = remat_report_write(REMAT_DOC_REPLAY, &in, remat_cli_format(REMAT_DOC_REPLAY, json), &len, &rerr);
        if (text && numeric && nr.ran)
            text = with_numeric(text, &len, json, &nr, &err, &rerr);
        int trc = REMAT_EXIT_OK;
        if (text && r->valid)
            trc = remat_cli_time_append(&T, a, &plan.schedule, &extras, json, &text, &len);
        rc = trc != REMAT_EXIT_OK ? trc : text ? remat_cli_write(out, text, len) : remat_cli_fail(&rerr);
        remat_free(text);
        if (rc == REMAT_EXIT_OK && !json && r->valid)
            remat_cli_ledger_print_sharding(stdout, &L, r);
        if (rc == REMAT_EXIT_OK && (!r->valid || (numeric && !nr.verified))) {
            if (!json)
                remat_cli_fail_in(src, &err);
            rc = REMAT_EXIT_FAIL;
        }
    }
    remat_numeric_result_destroy(&nr);
    remat_plan_destroy(&plan);
    remat_cli_ledger_destroy(&L);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
    return rc;
}

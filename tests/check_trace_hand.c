/*
 * check_trace_hand.c - the lifetime tracer on cases checked by hand: mlp2's
 * intervals as graphs/README.md's lifetimes table gives them, the "why live"
 * texts of recomputed tensors and workspace, ledger extras as resident
 * intervals, ids that every writer must escape, long traces drawn one
 * column per group; and its errors (an invalid schedule, bad writer
 * options, out of memory at every allocation). Part of the "trace" suite
 * (check_trace.c builds it and holds the oracle).
 */
#define _POSIX_C_SOURCE 200809L
#include "check_trace.h"
#include "remat/trace.h"
#include "util/util_internal.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- Hand-checked meaning ------------------------------------------------- */

static remat_trace *trace_of(const remat_analysis *a, const remat_schedule *s)
{
    remat_trace *t = NULL;
    remat_err err;
    remat_err_init(&err);
    REQUIRE(remat_trace_build(a, s, NULL, &t, &err) == REMAT_OK, "%s", err.msg);
    return t;
}

static remat_analysis *load_file(const char *path, remat_graph **g)
{
    remat_err err;
    remat_err_init(&err);
    remat_analysis *a = NULL;
    REQUIRE(remat_graph_load_file(path, g, &err) == REMAT_OK, "%s", err.msg);
    ck_assert_int_eq(remat_analyze(*g, &a, &err), REMAT_OK);
    return a;
}

/* mlp2 under store-all, interval by interval. Its schedule:
 *  0 FWD h1   1 FWD a1   2 FREE h1   3 FWD v1   4 FWD h2   5 FWD loss
 *  6 FREE h2  7 FREE loss  8 BWD loss  9 BWD h2  10 FREE v1  11 BWD v1
 * 12 BWD a1  13 FREE a1  14 BWD h1  15 OPT
 * and graphs/README.md's lifetime table says: h1 lives fwd:h1..fwd:a1 (freed
 * by the FREE right after), a1 until bwd:a1, h2 until fwd:loss, loss (an
 * output) until backward starts, v1 is a view (no bytes, no interval of its
 * own: its uses belong to a1); gradients: loss bwd:loss..bwd:loss, h2
 * bwd:loss..bwd:h2, v1 bwd:h2..bwd:v1, a1 bwd:v1..bwd:a1, h1 bwd:a1..bwd:h1,
 * w1 bwd:h1..the end; x, w1 and w2 (frozen) resident throughout. */
static const char *const MLP2_CSV =
    "id,tensor,grad,category,bytes,alloc,free,why,by,saved_for\r\n"
    "x,x,0,inputs,4096,0,,leaf,,bwd:h1\r\n"
    "w1,w1,0,params,65536,0,,leaf,,bwd:h1\r\n"
    "w2,w2,0,frozen,65536,0,,leaf,,bwd:h2\r\n"
    "h1,h1,0,activations,4096,0,2,produced,fwd:h1,\r\n"
    "a1,a1,0,activations,4096,1,13,produced,fwd:a1,bwd:h2;bwd:a1\r\n"
    "h2,h2,0,activations,4096,4,6,produced,fwd:h2,\r\n"
    "loss,loss,0,activations,4,5,7,produced,fwd:loss,\r\n"
    "grad:loss,loss,1,activation_grads,4,8,8,gradient,bwd:loss,\r\n"
    "grad:h2,h2,1,activation_grads,4096,8,9,gradient,bwd:loss,\r\n"
    "grad:v1,v1,1,activation_grads,4096,9,11,gradient,bwd:h2,\r\n"
    "grad:a1,a1,1,activation_grads,4096,11,12,gradient,bwd:v1,\r\n"
    "grad:h1,h1,1,activation_grads,4096,12,14,gradient,bwd:a1,\r\n"
    "grad:w1,w1,1,param_grads,65536,14,,gradient,bwd:h1,\r\n";

START_TEST(trace_should_list_mlp2_intervals_as_the_lifetime_table_says)
{
    remat_graph *g;
    remat_analysis *a = load_file("graphs/mlp2.json", &g);
    remat_schedule s;
    remat_schedule_init(&s);
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_schedule_store_all(a, &s, &err), REMAT_OK);
    remat_trace *t = trace_of(a, &s);
    size_t len;
    char *csv = remat_trace_csv(t, NULL, &len, &err);
    ck_assert_str_eq(csv, MLP2_CSV);
    remat_free(csv);
    /* a1 is read by fwd:v1 and fwd:h2 (through the view v1). */
    ck_assert_uint_eq(t->iv[4].n_uses, 4);
    ck_assert_uint_eq(t->uses[t->iv[4].use_off].step, 3);
    ck_assert_uint_eq(t->first_bwd, 8);
    ck_assert_uint_eq(t->n_steps, 16);
    /* The peak (204800 B at BWD h1, step 14): w1, w2, grad:w1, x, grad:h1. */
    char *audit = remat_trace_audit(t, NULL, REMAT_REPORT_TEXT, &len, &err);
    ck_assert_ptr_nonnull(strstr(audit, "peak at step 14: BWD h1 (backward)"));
    ck_assert_ptr_nonnull(strstr(audit, "total                      204800 B"));
    ck_assert_ptr_nonnull(strstr(audit, "grad:w1: gradient of param w1, kept for the optimizer"));
    ck_assert_ptr_nonnull(strstr(audit, "grad:h1: gradient of h1, written by bwd:a1, read by bwd:h1 (step 14)"));
    ck_assert_ptr_nonnull(strstr(audit, "w2: leaf: frozen param, resident throughout"));
    ck_assert_ptr_nonnull(strstr(audit, "largest live at the peak, leaves and ledger aside (2 of 2):\n"
                                        "            65536 B  param_grads       grad:w1"));
    ck_assert_ptr_nonnull(strstr(audit, "resident throughout: 3 leaves and ledger extras, 132.00 KiB (135168 B)"));
    remat_free(audit);
    char buf[256];
    /* At FWD h2 (step 4) a1 is read right then, and saved later through v1. */
    ck_assert_str_eq(remat_trace_why_live(t, 4, 4, buf, sizeof buf),
                     "input of fwd:h2 (step 4), then saved for bwd:h2 (step 9)");
    ck_assert_str_eq(remat_trace_why_live(t, 4, 9, buf, sizeof buf), "saved for bwd:h2 (step 9) through view v1");
    ck_assert_str_eq(remat_trace_why_live(t, 4, 13, buf, sizeof buf), "no further use; released by free:a1 (step 13)");
    ck_assert_str_eq(remat_trace_why_live(t, 6, 6, buf, sizeof buf),
                     "graph output loss, held until free:loss (step 7)");
    remat_trace_destroy(t);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* x -> a -> b -> loss with workspace; keeping nothing makes the default
 * policy free a after fwd:b and rebuild it before bwd:b, which saves it. */
static const char *const CHAIN =
    "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"chain\","
    "\"inputs\":[{\"id\":\"x\",\"bytes\":100}],\"params\":[{\"id\":\"w\",\"bytes\":10}],"
    "\"ops\":[{\"id\":\"a\",\"op\":\"matmul\",\"inputs\":[\"x\",\"w\"],\"bytes\":1000,\"flops\":50,\"workspace\":300},"
    "{\"id\":\"b\",\"op\":\"tanh\",\"inputs\":[\"a\"],\"bytes\":1000,\"flops\":5,\"bwd_workspace\":70},"
    "{\"id\":\"loss\",\"op\":\"sum\",\"inputs\":[\"b\"],\"bytes\":4,\"flops\":1,\"saves\":[]}],"
    "\"outputs\":[\"loss\"]}";

static size_t find_step(const remat_trace *t, remat_instr_kind k, uint32_t arg)
{
    for (size_t s = 0; s < t->n_steps; s++)
        if (t->steps[s].in.kind == (uint32_t)k && t->steps[s].in.arg == arg)
            return s;
    ck_abort_msg("no such step");
    return 0;
}

START_TEST(trace_should_explain_recomputed_tensors_and_workspace)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(CHAIN, &g);
    uint8_t keep[8] = {0};
    remat_schedule s;
    remat_schedule_init(&s);
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_schedule_from_keep(a, keep, &s, &err), REMAT_OK);
    remat_trace *t = trace_of(a, &s);
    uint32_t op_a = t_op(g, "a"), op_b = t_op(g, "b");
    size_t re = find_step(t, REMAT_I_RECOMPUTE, op_a), bb = find_step(t, REMAT_I_BWD, op_b);
    size_t fa = find_step(t, REMAT_I_FWD, op_a);
    ck_assert_uint_eq(t->n_recompute_steps, 1);
    size_t rec = SIZE_MAX, ws_f = SIZE_MAX, ws_b = SIZE_MAX;
    for (size_t i = 0; i < t->n_intervals; i++) {
        const remat_trace_interval *iv = &t->iv[i];
        if (iv->why == REMAT_TRACE_WHY_RECOMPUTED)
            rec = i;
        if (iv->why == REMAT_TRACE_WHY_WORKSPACE && iv->alloc == fa)
            ws_f = i;
        if (iv->why == REMAT_TRACE_WHY_WORKSPACE && iv->alloc == bb)
            ws_b = i;
    }
    ck_assert_uint_ne(rec, SIZE_MAX);
    ck_assert_uint_eq(t->iv[rec].alloc, re);
    ck_assert_uint_eq(t->iv[rec].category, REMAT_CAT_RECOMPUTED);
    ck_assert_uint_eq(t->iv[rec].bytes, 1000);
    /* Workspace is transient: one step, alloc == free. */
    ck_assert_uint_ne(ws_f, SIZE_MAX);
    ck_assert_uint_eq(t->iv[ws_f].bytes, 300);
    ck_assert_uint_eq(t->iv[ws_f].free, fa);
    ck_assert_uint_ne(ws_b, SIZE_MAX);
    ck_assert_uint_eq(t->iv[ws_b].bytes, 70);
    char buf[256], want[256];
    snprintf(want, sizeof want, "just recomputed; saved for bwd:b (step %zu)", bb);
    ck_assert_str_eq(remat_trace_why_live(t, rec, re, buf, sizeof buf), want);
    snprintf(want, sizeof want, "recomputed by recompute:a (step %zu); saved for bwd:b (step %zu)", re, bb);
    ck_assert_str_eq(remat_trace_why_live(t, rec, bb, buf, sizeof buf), want);
    ck_assert_str_eq(remat_trace_why_live(t, ws_f, fa, buf, sizeof buf), "workspace of fwd:a, held while it runs");
    remat_trace_destroy(t);
    remat_schedule_destroy(&s);
    check_graph(a, 5, 3, 1);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(trace_should_list_ledger_extras_as_resident_intervals)
{
    remat_graph *g;
    remat_analysis *a = load_file("graphs/mlp2.json", &g);
    remat_schedule s;
    remat_schedule_init(&s);
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_schedule_store_all(a, &s, &err), REMAT_OK);
    remat_exec_extras x = {0};
    x.optimizer_state = 131072;
    x.master_weights = 8;
    x.optimizer_workspace = 512;
    x.workspace = 1024; /* a library's workspace, held for the whole step */
    remat_trace *t = NULL;
    ck_assert_int_eq(remat_trace_build(a, &s, &x, &t, &err), REMAT_OK);
    size_t len;
    char *csv = remat_trace_csv(t, NULL, &len, &err);
    ck_assert_ptr_nonnull(strstr(csv, "\r\nledger:optimizer_state,,0,optimizer_state,131072,0,,ledger,,\r\n"));
    ck_assert_ptr_nonnull(strstr(csv, "\r\nledger:master_weights,,0,master_weights,8,0,,ledger,,\r\n"));
    ck_assert_ptr_nonnull(strstr(csv, "\r\nledger:workspace,,0,workspace,1024,0,,ledger,,\r\n"));
    /* The optimizer's workspace, at the optimizer step (15). */
    ck_assert_ptr_nonnull(strstr(csv, "\r\nworkspace,,0,workspace,512,15,15,workspace,optimizer,\r\n"));
    remat_free(csv);
    remat_trace_destroy(t);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* Ids with every character the writers must escape: a comma, quotes, XML
 * specials, a line break, a control character and non-ASCII text. */
static const char *const WEIRD =
    "{\"format\":\"remat-graph\",\"version\":1,\"name\":\"we<ird> & \\\"name\\\"\","
    "\"inputs\":[{\"id\":\"x,1\",\"bytes\":64}],\"params\":[{\"id\":\"w\\\"q'\",\"bytes\":32}],"
    "\"ops\":[{\"id\":\"h<1>&amp;\",\"op\":\"matmul\",\"inputs\":[\"x,1\",\"w\\\"q'\"],\"bytes\":128,\"flops\":10},"
    "{\"id\":\"\xc3\xbcn\xc3\xaf\\ncode\",\"op\":\"relu\",\"inputs\":[\"h<1>&amp;\"],\"bytes\":128,\"flops\":2,"
    "\"saves\":[\"\xc3\xbcn\xc3\xaf\\ncode\"]},"
    "{\"id\":\"l\\u0001oss\",\"op\":\"sum\",\"inputs\":[\"\xc3\xbcn\xc3\xaf\\ncode\"],\"bytes\":4,\"flops\":1,"
    "\"saves\":[]}],\"outputs\":[\"l\\u0001oss\"]}";

START_TEST(trace_should_escape_ids_in_every_format)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(WEIRD, &g);
    check_graph(a, 9, 3, 1); /* JSON and CSV ids round-trip; SVG passes xmllint */
    remat_schedule s;
    remat_schedule_init(&s);
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_schedule_store_all(a, &s, &err), REMAT_OK);
    remat_trace *t = trace_of(a, &s);
    size_t len;
    char *csv = remat_trace_csv(t, NULL, &len, &err);
    ck_assert_ptr_nonnull(strstr(csv, "\r\n\"x,1\",\"x,1\",0,inputs,64,0,,leaf,,"));
    ck_assert_ptr_nonnull(strstr(csv, "\r\n\"w\"\"q'\",\"w\"\"q'\",0,params,32,"));
    ck_assert_ptr_nonnull(strstr(csv, "\"\xc3\xbcn\xc3\xaf\ncode\""));
    remat_free(csv);
    char *svg = remat_trace_svg(t, NULL, &len, &err);
    ck_assert_ptr_nonnull(strstr(svg, "we&lt;ird&gt; &amp; &quot;name&quot;"));
    ck_assert_ptr_null(strstr(svg, "\x01"));
    remat_free(svg);
    remat_trace_destroy(t);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(trace_should_draw_long_traces_one_column_per_group_keeping_the_peak)
{
    remat_gen_opts o;
    remat_gen_opts_init(&o, REMAT_GEN_CHAIN);
    o.ops = 2000;
    o.random = true;
    o.seed = 3;
    remat_err err;
    remat_err_init(&err);
    size_t len;
    char *json = remat_gen_json(&o, &len, &err);
    remat_graph *g = NULL;
    ck_assert_int_eq(remat_graph_load_json(json, len, "gen", &g, &err), REMAT_OK);
    remat_free(json);
    remat_analysis *a = NULL;
    ck_assert_int_eq(remat_analyze(g, &a, &err), REMAT_OK);
    remat_schedule s;
    remat_schedule_init(&s);
    ck_assert_int_eq(remat_schedule_store_all(a, &s, &err), REMAT_OK);
    remat_trace *t = trace_of(a, &s);
    remat_trace_options opt;
    remat_trace_options_init(&opt);
    opt.budget_kind = REMAT_BUDGET_ACTIVATION;
    opt.budget = t->replay.activation_peak;
    char *svg = remat_trace_svg(t, &opt, &len, &err);
    ck_assert_ptr_nonnull(svg);
    xml_wellformed(svg);
    xmllint_ok(svg, len);
    ck_assert_ptr_nonnull(strstr(svg, "each column: the highest high-water mark among its steps"));
    ck_assert_ptr_nonnull(strstr(svg, "activation budget"));
    char peak[64];
    snprintf(peak, sizeof peak, "(%llu B) at step %zu", (unsigned long long)t->replay.peak_bytes,
             t->replay.peak_index);
    ck_assert_ptr_nonnull(strstr(svg, peak));
    remat_free(svg);
    remat_trace_destroy(t);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* ---- Errors --------------------------------------------------------------- */

START_TEST(trace_should_refuse_an_invalid_schedule_naming_the_instruction)
{
    remat_graph *g;
    remat_analysis *a = load_file("graphs/mlp2.json", &g);
    remat_schedule s;
    remat_schedule_init(&s);
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_schedule_store_all(a, &s, &err), REMAT_OK);
    s.ins[2] = s.ins[1]; /* FREE h1 becomes a second FWD a1 */
    remat_trace *t = (remat_trace *)1;
    ck_assert_int_eq(remat_trace_build(a, &s, NULL, &t, &err), REMAT_ESCHEDULE);
    ck_assert_ptr_null(t);
    ck_assert_msg_contains(&err, "instruction 2 (FWD a1)");
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(trace_should_refuse_bad_writer_options)
{
    remat_graph *g;
    remat_analysis *a = load_file("graphs/mlp2.json", &g);
    remat_schedule s;
    remat_schedule_init(&s);
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_schedule_store_all(a, &s, &err), REMAT_OK);
    remat_trace *t = trace_of(a, &s);
    remat_trace_options o;
    remat_trace_options_init(&o);
    o.flops_time = 1;
    /* 1000 FLOPs per us: fwd:h1's 131072 FLOPs end at 131 us, fwd:a1's 1024
     * more at floor(132096 / 1000) = 132. */
    o.flops_per_us = 1000;
    size_t len;
    char *text = remat_trace_chrome(t, &o, &len, &err);
    ck_assert_ptr_nonnull(strstr(text, "\"name\": \"FWD h1\", \"cat\": \"fwd\", \"ph\": \"X\", \"ts\": 0, \"dur\": 131,"));
    ck_assert_ptr_nonnull(strstr(text, "\"name\": \"FWD a1\", \"cat\": \"fwd\", \"ph\": \"X\", \"ts\": 131, \"dur\": 1,"));
    ck_assert_ptr_nonnull(strstr(text, "\"time_unit\": \"1 us = 1000 FLOPs\""));
    remat_free(text);
    remat_trace_options_init(&o);
    o.width = 100;
    remat_err_init(&err);
    ck_assert_ptr_null(remat_trace_svg(t, &o, NULL, &err));
    ck_assert_int_eq(err.code, REMAT_EINVAL);
    ck_assert_msg_contains(&err, "SVG size 100x640");
    remat_trace_destroy(t);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* Every allocation on the way fails once: the result is ENOMEM (or a
 * success if that allocation was not needed), never a crash or a leak. */
START_TEST(trace_should_report_out_of_memory_at_every_allocation)
{
    remat_graph *g;
    remat_analysis *a = t_analyze(CHAIN, &g);
    uint8_t keep[8] = {0};
    remat_schedule s;
    remat_schedule_init(&s);
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat_schedule_from_keep(a, keep, &s, &err), REMAT_OK);
    uint64_t k;
    for (k = 1; k < 100000; k++) {
        remat_err_init(&err);
        remat__alloc_fail_at(k);
        remat_trace *t = NULL;
        remat_status st = remat_trace_build(a, &s, NULL, &t, &err);
        char *docs[6] = {NULL};
        int failed = st != REMAT_OK;
        if (!failed) {
            remat_trace_options o;
            remat_trace_options_init(&o);
            o.flops_time = 1;
            docs[0] = remat_trace_json(t, NULL, NULL, &err);
            docs[1] = docs[0] ? remat_trace_csv(t, NULL, NULL, &err) : NULL;
            docs[2] = docs[1] ? remat_trace_chrome(t, &o, NULL, &err) : NULL;
            docs[3] = docs[2] ? remat_trace_svg(t, NULL, NULL, &err) : NULL;
            docs[4] = docs[3] ? remat_trace_audit(t, NULL, REMAT_REPORT_TEXT, NULL, &err) : NULL;
            docs[5] = docs[4] ? remat_trace_audit(t, NULL, REMAT_REPORT_JSON, NULL, &err) : NULL;
            failed = docs[5] == NULL;
        }
        uint64_t made = remat__alloc_fail_at(0);
        for (int i = 0; i < 6; i++)
            remat_free(docs[i]);
        remat_trace_destroy(t);
        if (failed) {
            ck_assert_int_eq(err.code, REMAT_ENOMEM);
            ck_assert_msg_contains(&err, "out of memory");
        } else if (made < k) {
            break;
        }
    }
    ck_assert_uint_gt(k, 10);
    ck_assert_uint_lt(k, 100000);
    remat_schedule_destroy(&s);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* The hand-checked cases and errors of the trace suite's one case (check_trace.c). */
void trace_hand_tests(TCase *tc)
{
    tcase_add_test(tc, trace_should_list_mlp2_intervals_as_the_lifetime_table_says);
    tcase_add_test(tc, trace_should_explain_recomputed_tensors_and_workspace);
    tcase_add_test(tc, trace_should_list_ledger_extras_as_resident_intervals);
    tcase_add_test(tc, trace_should_escape_ids_in_every_format);
    tcase_add_test(tc, trace_should_draw_long_traces_one_column_per_group_keeping_the_peak);
    tcase_add_test(tc, trace_should_refuse_an_invalid_schedule_naming_the_instruction);
    tcase_add_test(tc, trace_should_refuse_bad_writer_options);
    tcase_add_test(tc, trace_should_report_out_of_memory_at_every_allocation);
}

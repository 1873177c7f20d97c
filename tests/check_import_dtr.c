/*
 * check_import_dtr.c - `remat import dtr`: the DTR prototype's operator logs
 * converted to remat graphs. The expectations are worked out by hand from
 * the logs (the fixture's are derived in the comments below, not read off
 * the converter), including the store-all peak of the converted graph; every
 * refusal is checked for its status and for a message naming the line and
 * the field.
 *
 * Fixtures (tests/fixtures/dtr/): small.log, hand-written in the writer's
 * exact shape (nlohmann's dump: sorted keys, counts as decimal strings);
 * resnet_b3.log, made by make_resnet_log.py: a ResNet step as the cuDNN
 * build logs it, checked against closed forms in the number of blocks.
 */
#include "test_util.h"
#include "util/util_internal.h"

#include <stdio.h>
#include <stdlib.h>

/* Inline logs are written with ' for " to stay readable; this swaps them.
 * The result lives until the next call. */
static const char *dq(const char *s)
{
    static char buf[16384];
    size_t n = strlen(s);
    ck_assert_uint_lt(n, sizeof buf);
    for (size_t i = 0; i <= n; i++)
        buf[i] = s[i] == '\'' ? '"' : s[i];
    return buf;
}

/* Converts an inline log (single quotes), asserting success; loads and
 * analyzes the result. */
static remat_analysis *import_log(const char *log, const char *name, remat_graph **g, remat_import_dtr_summary *sum)
{
    const char *text = dq(log);
    remat_err err;
    remat_err_init(&err);
    char *out = NULL;
    size_t len = 0;
    ck_assert_msg(remat_import_dtr(text, strlen(text), "t.log", name, &out, &len, sum, &err) == REMAT_OK,
                  "import failed: %s", err.msg);
    ck_assert_uint_eq(len, strlen(out));
    remat_analysis *a = t_analyze(out, g);
    remat_free(out);
    return a;
}

static remat_analysis *import_fixture(const char *name, remat_graph **g, remat_import_dtr_summary *sum)
{
    char path[512];
    t_fixture(name, path, sizeof path);
    remat_err err;
    remat_err_init(&err);
    char *out = NULL;
    size_t len = 0;
    ck_assert_msg(remat_import_dtr_file(path, NULL, &out, &len, sum, &err) == REMAT_OK, "import %s: %s", path,
                  err.msg);
    remat_analysis *a = t_analyze(out, g);
    remat_free(out);
    return a;
}

static void import_fails(const char *log, remat_status code, const char *substr)
{
    const char *text = dq(log);
    remat_err err;
    remat_err_init(&err);
    char *out = (char *)"untouched";
    remat_status st = remat_import_dtr(text, strlen(text), "t.log", NULL, &out, NULL, NULL, &err);
    ck_assert_int_eq(st, code);
    ck_assert_int_eq(err.code, code);
    ck_assert_ptr_null(out);
    ck_assert_msg_contains(&err, substr);
    ck_assert_msg_contains(&err, "t.log");
}

/* op's inputs (or saves) as "a,b,c". */
static const char *refs(const remat_graph *g, const char *op_id, int saves, char *buf, size_t cap)
{
    const remat_op *op = &g->ops[t_op(g, op_id)];
    const uint32_t *r = saves ? remat_op_saves(g, op) : remat_op_inputs(g, op);
    uint32_t n = saves ? op->n_save : op->n_in;
    size_t at = 0;
    buf[0] = '\0';
    for (uint32_t k = 0; k < n && at < cap; k++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%s", k ? "," : "", g->tensors[r[k]].id);
    return buf;
}

static void check_op(const remat_graph *g, const char *id, const char *type, const char *inputs, uint64_t bytes,
                     uint64_t flops, uint64_t bwd_flops, const char *saves)
{
    char buf[256];
    const remat_op *op = &g->ops[t_op(g, id)];
    ck_assert_str_eq(op->type, type);
    ck_assert_str_eq(refs(g, id, 0, buf, sizeof buf), inputs);
    ck_assert_str_eq(refs(g, id, 1, buf, sizeof buf), saves);
    ck_assert_uint_eq(g->tensors[t_tensor(g, id)].bytes, bytes);
    ck_assert_uint_eq(op->flops, flops);
    ck_assert_uint_eq(op->bwd_flops, bwd_flops);
}

/* small.log by hand. Lines 1-2 precede START and are forgotten (x0's
 * RELEASE on line 60 is then a release of an unknown name). Forward:
 *   12 mm(x3, x1) -> x5 8192 B, 1500 ns
 *   15 relu_ MUTATEs x5 -> version x5@1, 8192 B (x5's storage), 300 ns
 *   16 view(x5) -> x7, ALIAS 0: a view of x5@1 (the name x5 moved to it)
 *   19 mm(x7, x2) -> x8 4096 B; 22 COPY x9 = x8
 *   23 _log_softmax(x9) -> x10 4096 B (x9 stands for x8)
 *   27 nll_loss_forward(x10, x4) -> x11 4 B, x12 4 B
 *   32 ones_like(x11) -> x13: one argument, one result, read only by the
 *      backward part: the gradient seed; x11 is the loss.
 * Backward (from line 35, nll_loss_backward):
 *   35 reads x10 x4 x12 (x13 is the seed): only nll_loss_forward has all
 *      three -> its saves, 150 ns
 *   38 reads x10 x8: _log_softmax (x8 in, x10 out) -> 250 ns
 *   42 reads x2: mm x8 is its only reader -> 700 ns
 *   45 reads x7: "mm" names no forward op; its producer, the view op,
 *      comes before mm x8 -> 600 ns
 *   49 reads x5 = x5@1: no op is a "threshold"; its producer relu_ comes
 *      before the view -> 280 ns
 *   53 reads x3: mm x5 -> 900 ns
 *   56 add_ reads only gradients: no op takes it (50 ns unattributed)
 * Weights x1, x2 are never released (params); x3, x4 are (inputs). */
START_TEST(import_dtr_should_map_the_hand_written_log_op_by_op)
{
    remat_graph *g;
    remat_import_dtr_summary s;
    remat_analysis *a = import_fixture("dtr/small.log", &g, &s);
    ck_assert_str_eq(g->name, "small");
    ck_assert_uint_eq(g->n_ops, 6);
    check_op(g, "x5", "mm", "x3,x1", 8192, 1500, 900, "x3");
    check_op(g, "x5@1", "relu_", "x5", 8192, 300, 280, "x5@1");
    check_op(g, "x7", "view", "x5@1", 0, 20, 600, "x7");
    check_op(g, "x8", "mm", "x7,x2", 4096, 800, 700, "x2");
    check_op(g, "x10", "_log_softmax", "x8", 4096, 200, 250, "x8,x10");
    check_op(g, "x11", "nll_loss_forward", "x10,x4", 4, 100, 150, "x4,x10,x12");
    const remat_tensor *v = &g->tensors[t_tensor(g, "x7")];
    ck_assert_uint_eq(v->alias_of, t_tensor(g, "x5@1"));
    ck_assert_uint_eq(v->logical_bytes, 8192);
    ck_assert_uint_eq(g->tensors[t_tensor(g, "x12")].bytes, 4);
    ck_assert_int_eq(g->tensors[t_tensor(g, "x1")].kind, REMAT_TENSOR_PARAM);
    ck_assert_int_eq(g->tensors[t_tensor(g, "x2")].kind, REMAT_TENSOR_PARAM);
    ck_assert_uint_eq(g->tensors[t_tensor(g, "x1")].bytes, 4096);
    ck_assert_uint_eq(g->tensors[t_tensor(g, "x2")].bytes, 1024);
    ck_assert_int_eq(g->tensors[t_tensor(g, "x3")].kind, REMAT_TENSOR_INPUT);
    ck_assert_int_eq(g->tensors[t_tensor(g, "x4")].kind, REMAT_TENSOR_INPUT);
    ck_assert_uint_eq(g->tensors[t_tensor(g, "x3")].bytes, 2048);
    ck_assert_uint_eq(g->tensors[t_tensor(g, "x4")].bytes, 64);
    ck_assert_uint_eq(g->n_tensors, 11); /* 4 leaves, 7 activations: no x0, x13 */
    ck_assert_uint_eq(g->n_outputs, 1);
    ck_assert_str_eq(g->tensors[g->outputs[0]].id, "x11");
    ck_assert_uint_eq(a->n_bwd, 6);
    /* The view x7 keeps x5@1's storage until bwd:x5@1, its own save. */
    ck_assert_uint_eq(a->life[t_tensor(g, "x5@1")].last_bwd_use, t_bwd(a, "x5@1"));
    ck_assert_uint_eq(a->life[t_tensor(g, "x10")].last_bwd_use, t_bwd(a, "x10"));
    ck_assert_uint_eq(s.lines, 64);
    ck_assert_uint_eq(s.skipped, 2);
    ck_assert_uint_eq(s.backward_line, 35);
    ck_assert_uint_eq(s.forward_calls, 6);
    ck_assert_uint_eq(s.forward_mutates, 1);
    ck_assert_uint_eq(s.backward_calls, 6);
    ck_assert_uint_eq(s.backward_mutates, 1);
    ck_assert_uint_eq(s.constants, 4);
    ck_assert_uint_eq(s.params, 2);
    ck_assert_uint_eq(s.inputs, 2);
    ck_assert_uint_eq(s.releases, 15);
    ck_assert_uint_eq(s.releases_ignored, 1);
    ck_assert_uint_eq(s.copies, 1);
    ck_assert_uint_eq(s.copy_froms, 0);
    ck_assert_uint_eq(s.annotations, 0); /* the START line itself is not counted */
    ck_assert_uint_eq(s.seed, 1);
    ck_assert_uint_eq(s.ops, 6);
    ck_assert_uint_eq(s.views, 1);
    ck_assert_uint_eq(s.saves, 9);
    ck_assert_uint_eq(s.unattributed, 1);
    ck_assert_uint_eq(s.unattributed_reads, 0);
    ck_assert_uint_eq(s.unattributed_ns, 50);
    ck_assert_uint_eq(s.forward_ns, 1500 + 300 + 20 + 800 + 200 + 100 + 5);
    ck_assert_uint_eq(s.backward_ns, 150 + 250 + 700 + 600 + 280 + 900 + 50);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* Store-all on the converted graph, by hand (graphs/README.md's rules).
 * Resident: params 4096 + 1024, inputs 2048 + 64: 7232 B. Forward: x5
 * dies after fwd:x5@1; x5@1 (8192) lives to bwd:x5@1 (it and its view x7
 * are saved); x8 and x10 (4096 each) to bwd:x10; x12 (4) to bwd:x11; the
 * loss x11 (4) to the end of forward. Backward steps, each allocating the
 * gradients of its inputs, then dropping those of its outputs:
 *   bwd:x11  27720 (seed 4 + grad x10 4096)
 *   bwd:x10  31808 (+ grad x8 4096), then x8, x10, grad x10 go: 19520
 *   bwd:x8   28736 (+ grad x7 8192, its base's logical size, + grad x2 1024)
 *   bwd:x7   32832 (+ grad x5@1 8192): the peak, first reached here
 *   bwd:x5@1 32832 (+ grad x5 8192, after grad x7 went)
 * At bwd:x7: params 5120, param grads 1024, inputs 2112, activations 8192,
 * activation grads 16384. FLOPs: forward 2920 ns (no seed), backward 2880. */
START_TEST(import_dtr_should_replay_store_all_to_the_hand_computed_peak)
{
    remat_graph *g;
    remat_import_dtr_summary s;
    remat_analysis *a = import_fixture("dtr/small.log", &g, &s);
    remat_err err;
    remat_err_init(&err);
    remat_schedule sch;
    remat_schedule_init(&sch);
    ck_assert_int_eq(remat_schedule_store_all(a, &sch, &err), REMAT_OK);
    remat_replay_result r;
    ck_assert_int_eq(remat_replay(a, &sch, NULL, NULL, &r, &err), REMAT_OK);
    ck_assert(r.valid);
    ck_assert_uint_eq(r.peak_bytes, 32832);
    ck_assert_uint_eq(sch.ins[r.peak_index].kind, REMAT_I_BWD);
    ck_assert_uint_eq(sch.ins[r.peak_index].arg, t_op(g, "x7"));
    ck_assert_uint_eq(r.peak_by_category[REMAT_CAT_PARAMS], 5120);
    ck_assert_uint_eq(r.peak_by_category[REMAT_CAT_PARAM_GRADS], 1024);
    ck_assert_uint_eq(r.peak_by_category[REMAT_CAT_INPUTS], 2112);
    ck_assert_uint_eq(r.peak_by_category[REMAT_CAT_ACTIVATIONS], 8192);
    ck_assert_uint_eq(r.peak_by_category[REMAT_CAT_ACTIVATION_GRADS], 16384);
    ck_assert_uint_eq(r.flops_forward, 2920);
    ck_assert_uint_eq(r.flops_backward, 2880);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&sch);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

static int saves_has(const remat_graph *g, const remat_op *op, uint32_t t)
{
    for (uint32_t k = 0; k < op->n_save; k++)
        if (remat_op_saves(g, op)[k] == t)
            return 1;
    return 0;
}

/* resnet_b3.log: stem conv-bn-relu, B = 3 basic blocks (conv-bn-relu,
 * conv-bn, add_ identity, relu_), pool, view, t(fc weight), addmm,
 * log-softmax, NLL; then ones_like(loss) and the backward calls. Closed
 * forms in B:
 *   ops     3 + 7B + 6 (conv, bn, relu_ | per block 7 | pool, view, t,
 *           addmm, _log_softmax, nll_loss_forward; the seed is no op)
 *   params  5 + 6B (each conv's weight, each bn's gamma and beta, fc w, b);
 *           inputs 4 + 4B (data, target, each bn's running mean and var,
 *           which the log releases with the model)
 *   saves   18 + 20B: per conv {x, w}, per bn {input, gamma, running mean
 *           and var, save_mean, save_var, reserve}, per relu_ its output
 *           (1 + 2B of each); nll {log-probs, target, total weight};
 *           log-softmax {logits, log-probs}; the pool its input (its
 *           backward, adaptive_avg_pool2d_backward, names it, though the
 *           input's producer relu_ is earlier); t(fc weight) reads wt and
 *           t(flat) reads flat, "t" names no forward op, so each goes to
 *           the earliest op that has it, its producer (the t and view ops)
 *   8 backward calls read only gradients (sum, t, view, 2 mm, B adds). */
START_TEST(import_dtr_should_map_a_generated_resnet_log_by_closed_forms)
{
    const uint32_t B = 3;
    remat_graph *g;
    remat_import_dtr_summary s;
    remat_analysis *a = import_fixture("dtr/resnet_b3.log", &g, &s);
    ck_assert_uint_eq(g->n_ops, 3 + 7 * B + 6);
    ck_assert_uint_eq(s.params, 5 + 6 * B);
    ck_assert_uint_eq(s.inputs, 4 + 4 * B);
    ck_assert_uint_eq(s.saves, 18 + 20 * B);
    ck_assert_uint_eq(s.views, 2);
    ck_assert_uint_eq(s.seed, 1);
    ck_assert_uint_eq(s.unattributed, 5 + B);
    ck_assert_uint_eq(s.forward_mutates, 1 + 3 * B);
    ck_assert_uint_eq(a->n_bwd, g->n_ops); /* every op depends on a weight and reaches the loss */
    /* Every batch norm has 4 outputs and saves 7 tensors; every conv
     * saves its input and weight; every relu_ its own output. */
    uint32_t bn = 0, conv = 0, relu = 0;
    for (uint32_t o = 0; o < g->n_ops; o++) {
        const remat_op *op = &g->ops[o];
        if (strcmp(op->type, "cudnn_batch_norm") == 0) {
            bn++;
            ck_assert_uint_eq(op->n_out, 4);
            ck_assert_uint_eq(op->n_save, 7);
            ck_assert_uint_eq(op->bwd_flops, 16000);
        } else if (strcmp(op->type, "cudnn_convolution") == 0) {
            conv++;
            ck_assert_uint_eq(op->n_save, 2);
            ck_assert(saves_has(g, op, remat_op_inputs(g, op)[0]) && saves_has(g, op, remat_op_inputs(g, op)[1]));
            ck_assert_uint_eq(op->bwd_flops, 40000);
        } else if (strcmp(op->type, "adaptive_avg_pool2d") == 0) {
            ck_assert_uint_eq(op->n_save, 1);
            ck_assert_uint_eq(remat_op_saves(g, op)[0], remat_op_inputs(g, op)[0]);
            ck_assert_uint_eq(op->bwd_flops, 3000);
        } else if (strcmp(op->type, "relu_") == 0) {
            relu++;
            ck_assert_uint_eq(op->n_save, 1);
            ck_assert_uint_eq(remat_op_saves(g, op)[0], remat_op_outputs(g, op)[0]);
            ck_assert_uint_eq(op->bwd_flops, 3000);
        }
    }
    ck_assert_uint_eq(bn, 1 + 2 * B);
    ck_assert_uint_eq(conv, 1 + 2 * B);
    ck_assert_uint_eq(relu, 1 + 2 * B);
    ck_assert_str_eq(g->ops[g->tensors[g->outputs[0]].producer].type, "nll_loss_forward");
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* Shorthands for inline logs: a constant with its MEMORY line, and a
 * one-result CALL with its MEMORY and ALIAS lines. */
#define CONST(n, b)                                                                                              \
    "{'INSTRUCTION':'CONSTANT','NAME':'" n "'}\n{'INSTRUCTION':'MEMORY','NAME':'" n "','MEMORY':'" b "'}\n"
#define CALL1(op, args, r, b, alias, t)                                                                          \
    "{'INSTRUCTION':'CALL','NAME':'" op "','ARGS':[" args "],'RESULT':['" r "'],'TIME':'" t "'}\n"                 \
    "{'INSTRUCTION':'MEMORY','NAME':'" r "','MEMORY':'" b "'}\n{'INSTRUCTION':'ALIAS','NAME':'" r "','ALIAS':'" alias \
    "'}\n"
#define REL(n) "{'INSTRUCTION':'RELEASE','NAME':'" n "'}\n"

/* No START: the whole log is read. No backward part: an inference log, so
 * every constant is an input and nothing gets a backward step; the outputs
 * are the results nothing reads that are still live at the end (y; the
 * dead z was released). Counts may be plain JSON numbers. */
START_TEST(import_dtr_should_make_an_inference_graph_without_a_backward_part)
{
    const char *log = CONST("w", "16") CONST("x", "8") CALL1("mm", "'x','w'", "y", "32", "-1", "7")
        "{'INSTRUCTION':'CALL','NAME':'sum','ARGS':['x'],'RESULT':['z'],'TIME':3}\n"
        "{'INSTRUCTION':'MEMORY','NAME':'z','MEMORY':4}\n{'INSTRUCTION':'ALIAS','NAME':'z','ALIAS':-1}\n" REL("z")
            REL("x");
    remat_graph *g;
    remat_import_dtr_summary s;
    remat_analysis *a = import_log(log, NULL, &g, &s);
    ck_assert_str_eq(g->name, "t");
    ck_assert_uint_eq(g->n_ops, 2);
    check_op(g, "z", "sum", "x", 4, 3, 0, "");
    ck_assert_uint_eq(g->n_outputs, 1);
    ck_assert_str_eq(g->tensors[g->outputs[0]].id, "y");
    ck_assert_int_eq(g->tensors[t_tensor(g, "w")].kind, REMAT_TENSOR_INPUT);
    ck_assert_uint_eq(a->n_bwd, 0);
    ck_assert_uint_eq(s.backward_line, 0);
    ck_assert_uint_eq(s.seed, 0);
    ck_assert_uint_eq(s.params, 0);
    ck_assert_uint_eq(s.inputs, 2);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* ANNOTATE BACKWARD starts the backward part even where no op name says
 * so. Without a seed, the outputs are the forward results nothing reads
 * (the backward part included) that are live when forward ends: h3, not
 * the statistic s that the backward part reads. COPY keeps a weight alive
 * under a second name: w1, released as "w1" but still held as "w1c", is a
 * param; b lost its only name to COPY_FROM and is an input. */
START_TEST(import_dtr_should_take_the_backward_annotation_and_unread_outputs)
{
    const char *log = CONST("x", "8") CONST("w1", "16") CONST("b", "4")
        "{'INSTRUCTION':'COPY','DST':'w1c','SRC':'w1'}\n" REL("w1")
            "{'INSTRUCTION':'CALL','NAME':'stats','ARGS':['x','w1c','b'],'RESULT':['h1','s'],'TIME':'10'}\n"
            "{'INSTRUCTION':'MEMORY','NAME':'h1','MEMORY':'32'}\n{'INSTRUCTION':'ALIAS','NAME':'h1','ALIAS':'-1'}\n"
            "{'INSTRUCTION':'MEMORY','NAME':'s','MEMORY':'8'}\n{'INSTRUCTION':'ALIAS','NAME':'s','ALIAS':'-1'}\n"
            "{'INSTRUCTION':'COPY_FROM','DST':'b','SRC':'h1'}\n" CALL1("tanh", "'b'", "h2", "32", "-1", "5")
                CALL1("neg", "'h2'", "h3", "32", "-1", "2") "{'INSTRUCTION':'ANNOTATE','ANNOTATION':'BACKWARD'}\n"
                    CALL1("mul", "'h2','s'", "g", "32", "-1", "9") REL("x") REL("h1");
    remat_graph *g;
    remat_import_dtr_summary s;
    remat_analysis *a = import_log(log, "bwd", &g, &s);
    ck_assert_str_eq(g->name, "bwd");
    ck_assert_uint_eq(g->n_ops, 3);
    ck_assert_uint_eq(g->n_outputs, 1);
    ck_assert_str_eq(g->tensors[g->outputs[0]].id, "h3");
    ck_assert_int_eq(g->tensors[t_tensor(g, "w1")].kind, REMAT_TENSOR_PARAM);
    ck_assert_int_eq(g->tensors[t_tensor(g, "b")].kind, REMAT_TENSOR_INPUT);
    ck_assert_int_eq(g->tensors[t_tensor(g, "x")].kind, REMAT_TENSOR_INPUT);
    /* tanh reads "b", which now names h1. The backward mul reads h2 and s:
     * no op has both (stats has s; tanh and neg have h2), so each goes to
     * the earliest op that has it, and the time to the op of the first
     * argument, h2: tanh. */
    check_op(g, "h1", "stats", "x,w1,b", 32, 10, 0, "s");
    check_op(g, "h2", "tanh", "h1", 32, 5, 9, "h2");
    check_op(g, "h3", "neg", "h2", 32, 2, 0, "");
    ck_assert_uint_eq(s.backward_line, 21);
    ck_assert_uint_eq(s.copies, 1);
    ck_assert_uint_eq(s.copy_froms, 1);
    ck_assert_uint_eq(s.annotations, 1);
    ck_assert_uint_eq(s.seed, 0);
    ck_assert_uint_eq(s.saves, 2);
    ck_assert_uint_eq(s.unattributed, 0);
    ck_assert_uint_eq(a->n_bwd, 3);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* MUTATE twice on one name makes versions a@1 and a@2; a MUTATE writing
 * two arguments is one op with two outputs, each as large as the storage
 * it overwrites (a view's: its base's); a CALL without results makes no
 * op; the seed is found through a name COPY made; sum_backward's read goes
 * to the op its name points at, sum, not to the earlier swap_ that made
 * the tensor. */
START_TEST(import_dtr_should_version_mutated_tensors)
{
    const char *log = CONST("w", "8") CALL1("zeros", "", "a", "64", "-1", "2") CALL1("view", "'a'", "v", "64", "0", "1")
        "{'INSTRUCTION':'MUTATE','NAME':'mul_','ARGS':['a','w'],'MUTATE':[0],'TIME':'3'}\n"
        "{'INSTRUCTION':'MUTATE','NAME':'add_','ARGS':['a','w'],'MUTATE':['0'],'TIME':'4'}\n"
        "{'INSTRUCTION':'MUTATE','NAME':'swap_','ARGS':['a','v'],'MUTATE':[1,0],'TIME':'6'}\n"
        "{'INSTRUCTION':'CALL','NAME':'record','ARGS':['a'],'RESULT':[],'TIME':'1'}\n"
            CALL1("sum", "'a','v'", "l", "4", "-1", "5") "{'INSTRUCTION':'COPY','DST':'lc','SRC':'l'}\n"
                CALL1("ones_like", "'lc'", "seed", "4", "-1", "1")
                    CALL1("sum_backward", "'seed','a'", "ga", "64", "-1", "7");
    remat_graph *g;
    remat_import_dtr_summary s;
    remat_analysis *a = import_log(log, NULL, &g, &s);
    ck_assert_uint_eq(g->n_ops, 6);
    check_op(g, "a@1", "mul_", "a,w", 64, 3, 0, "");
    check_op(g, "a@2", "add_", "a@1,w", 64, 4, 0, "");
    /* swap_ writes ARGS[1] (v: a view of a, so a's 64 B) then ARGS[0]. */
    check_op(g, "v@1", "swap_", "a@2,v", 64, 6, 0, "");
    const remat_op *sw = &g->ops[t_op(g, "v@1")];
    ck_assert_uint_eq(sw->n_out, 2);
    ck_assert_str_eq(g->tensors[remat_op_outputs(g, sw)[1]].id, "a@3");
    ck_assert_uint_eq(g->tensors[t_tensor(g, "a@3")].bytes, 64);
    ck_assert_uint_eq(g->tensors[t_tensor(g, "v")].alias_of, t_tensor(g, "a"));
    check_op(g, "l", "sum", "a@3,v@1", 4, 5, 7, "a@3");
    ck_assert_str_eq(g->tensors[g->outputs[0]].id, "l");
    ck_assert_uint_eq(s.empty, 1);
    ck_assert_uint_eq(s.seed, 1);
    ck_assert_uint_eq(s.forward_mutates, 3);
    /* zeros and view depend on no weight: no backward step. */
    ck_assert_uint_eq(a->n_bwd, 4);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(import_dtr_should_refuse_lines_that_are_not_instructions)
{
    import_fails(CONST("x", "4") "{'INSTRUCTION':'CALL',\n", REMAT_EPARSE, "t.log:3:");
    import_fails(CONST("x", "4") "{'INSTRUCTION':'CALL',\n", REMAT_EPARSE,
                 "not valid JSON near here (at the end of the line: a DTR log has one JSON object per line)");
    import_fails("{'INSTRUCTION' 'CALL'}\n", REMAT_EPARSE, "t.log:1:16: not valid JSON near here");
    import_fails("{'INSTRUCTION':'PIN','NAME':'x'} {}\n", REMAT_EPARSE, "t.log:1:34: text after the JSON object");
    import_fails("[1]\n", REMAT_EGRAPH, "t.log:1: must be a JSON object with an INSTRUCTION field");
    import_fails("\n\n{'NAME':'x'}\n", REMAT_EGRAPH, "t.log:3: INSTRUCTION: missing");
    import_fails("{'INSTRUCTION':7}\n", REMAT_EGRAPH, "t.log:1: INSTRUCTION: must be a string");
    import_fails("{'INSTRUCTION':'FREE','NAME':'x'}\n", REMAT_EGRAPH,
                 "t.log:1: INSTRUCTION: unknown instruction 'FREE' (known: CALL, MUTATE, CONSTANT, MEMORY, ALIAS, "
                 "COPY, COPY_FROM, RELEASE, ANNOTATE, PIN)");
    import_fails("{'INSTRUCTION':'MEMORY','NAME':'x','MEMORY':'4'}\n", REMAT_EGRAPH,
                 "t.log:1: INSTRUCTION: a MEMORY line must follow the CONSTANT or CALL that makes its tensor");
    import_fails("{'INSTRUCTION':'ANNOTATE'}\n", REMAT_EGRAPH, "t.log:1: ANNOTATION: missing");
    import_fails("{'INSTRUCTION':'PIN','NAME':''}\n", REMAT_EGRAPH, "t.log:1: NAME: an empty tensor name");
    import_fails("", REMAT_EGRAPH, "t.log: no forward CALL or MUTATE with results");
}
END_TEST

START_TEST(import_dtr_should_refuse_bad_references_and_sequences)
{
    import_fails(CONST("x1", "4") CALL1("mm", "'x1','x42'", "x2", "4", "-1", "1"), REMAT_EGRAPH,
                 "t.log:3: ARGS[1]: unknown tensor 'x42'");
    import_fails(CONST("x1", "4") "{'INSTRUCTION':'CALL','NAME':'f','ARGS':['x1'],'RESULT':['x2'],'TIME':'1'}\n"
                                  "{'INSTRUCTION':'ALIAS','NAME':'x2','ALIAS':'-1'}\n",
                 REMAT_EGRAPH,
                 "t.log:4: INSTRUCTION: expected the MEMORY line of 'x2' (RESULT[0] of the CALL at line 3), found "
                 "ALIAS");
    import_fails(CONST("x1", "4") "{'INSTRUCTION':'CALL','NAME':'f','ARGS':['x1'],'RESULT':['x2'],'TIME':'1'}\n"
                                  "{'INSTRUCTION':'MEMORY','NAME':'x9','MEMORY':'4'}\n",
                 REMAT_EGRAPH, "t.log:4: NAME: expected the MEMORY line of 'x2' (RESULT[0] of the CALL at line 3), "
                               "found one for 'x9'");
    import_fails(CONST("x1", "4") "{'INSTRUCTION':'CALL','NAME':'f','ARGS':['x1'],'RESULT':['x2','x3'],'TIME':'1'}\n"
                                  "{'INSTRUCTION':'MEMORY','NAME':'x2','MEMORY':'4'}\n"
                                  "{'INSTRUCTION':'ALIAS','NAME':'x2','ALIAS':'-1'}\n",
                 REMAT_EGRAPH,
                 "t.log: the log ends before the MEMORY line of 'x3' (RESULT[1] of the CALL at line 3)");
    import_fails("{'INSTRUCTION':'CONSTANT','NAME':'x1'}\n" CALL1("f", "'x1'", "x2", "4", "-1", "1"), REMAT_EGRAPH,
                 "t.log:2: INSTRUCTION: expected the MEMORY line of CONSTANT 'x1' (line 1), found CALL");
    import_fails(CONST("x1", "4") CALL1("f", "'x1'", "x2", "4", "-1", "1") CALL1("g", "'x1'", "x2", "4", "-1", "1"),
                 REMAT_EGRAPH, "t.log:6: RESULT[0]: 'x2' is already defined (line 3)");
    import_fails(CONST("x1", "4") "{'INSTRUCTION':'CALL','NAME':'f','ARGS':['x1'],'RESULT':['x2','x2'],'TIME':'1'}\n",
                 REMAT_EGRAPH, "t.log:3: RESULT[1]: 'x2' is listed twice");
    import_fails(CONST("x1", "4") CONST("x1", "4"), REMAT_EGRAPH, "t.log:3: NAME: 'x1' is already defined (line 1)");
    import_fails(CONST("x1", "4") CALL1("f", "'x1'", "x2", "4", "1", "1"), REMAT_EGRAPH,
                 "t.log:5: ALIAS: index 1 is outside the ARGS of the CALL at line 3 (1 arguments)");
    import_fails(CONST("x1", "4") CALL1("f", "'x1'", "x2", "4", "-2", "1"), REMAT_EGRAPH,
                 "t.log:5: ALIAS: must be -1 or an index into the CALL's ARGS, got '-2'");
    import_fails(CONST("x1", "4") "{'INSTRUCTION':'MUTATE','NAME':'f_','ARGS':['x1'],'MUTATE':[3],'TIME':'1'}\n",
                 REMAT_EGRAPH, "t.log:3: MUTATE[0]: index 3 is outside ARGS (1 arguments)");
    import_fails(CONST("x1", "4") "{'INSTRUCTION':'MUTATE','NAME':'f_','ARGS':['x1'],'MUTATE':[0,0],'TIME':'1'}\n",
                 REMAT_EGRAPH, "t.log:3: MUTATE[1]: index 0 is also MUTATE[0]");
    import_fails(CONST("x1", "4") "{'INSTRUCTION':'MUTATE','NAME':'f_','ARGS':['x1'],'MUTATE':[-1],'TIME':'1'}\n",
                 REMAT_EGRAPH, "t.log:3: MUTATE[0]: must be an index into ARGS (negative)");
    import_fails(CONST("x1", "4") "{'INSTRUCTION':'COPY','DST':'x2','SRC':'x7'}\n", REMAT_EGRAPH,
                 "t.log:3: SRC: unknown tensor 'x7'");
    import_fails(CONST("x1", "4") "{'INSTRUCTION':'COPY','DST':'x1','SRC':'x1'}\n", REMAT_EGRAPH,
                 "t.log:3: DST: 'x1' is already defined (line 1)");
    import_fails(CONST("x1", "4") "{'INSTRUCTION':'COPY_FROM','DST':'x5','SRC':'x1'}\n", REMAT_EGRAPH,
                 "t.log:3: DST: unknown tensor 'x5'");
    import_fails(CONST("x1", "4") "{'INSTRUCTION':'CALL','NAME':'f','ARGS':'x1','RESULT':['x2'],'TIME':'1'}\n",
                 REMAT_EGRAPH, "t.log:3: ARGS: must be an array");
    import_fails(CONST("x1", "4") "{'INSTRUCTION':'CALL','NAME':'f','ARGS':[1],'RESULT':['x2'],'TIME':'1'}\n",
                 REMAT_EGRAPH, "t.log:3: ARGS[0]: must be a string (a tensor name)");
    import_fails(CONST("x1", "4") "{'INSTRUCTION':'CALL','ARGS':[],'RESULT':['x2'],'TIME':'1'}\n", REMAT_EGRAPH,
                 "t.log:3: NAME: missing");
    import_fails(CONST("x1", "4") "{'INSTRUCTION':'CALL','NAME':'f','ARGS':[],'TIME':'1'}\n", REMAT_EGRAPH,
                 "t.log:3: RESULT: missing");
}
END_TEST

START_TEST(import_dtr_should_refuse_sizes_and_times_that_are_not_whole)
{
    import_fails("{'INSTRUCTION':'CONSTANT','NAME':'x'}\n{'INSTRUCTION':'MEMORY','NAME':'x','MEMORY':'-4'}\n",
                 REMAT_EGRAPH, "t.log:2: MEMORY: must be a whole number of bytes from 0 to 2^64-1, got '-4'");
    import_fails("{'INSTRUCTION':'CONSTANT','NAME':'x'}\n{'INSTRUCTION':'MEMORY','NAME':'x','MEMORY':-4}\n",
                 REMAT_EGRAPH, "t.log:2: MEMORY: must be a whole number of bytes from 0 to 2^64-1, got -4 (negative)");
    import_fails("{'INSTRUCTION':'CONSTANT','NAME':'x'}\n{'INSTRUCTION':'MEMORY','NAME':'x','MEMORY':4.5}\n",
                 REMAT_EGRAPH, "got 4.5 (not a whole number)");
    import_fails("{'INSTRUCTION':'CONSTANT','NAME':'x'}\n{'INSTRUCTION':'MEMORY','NAME':'x','MEMORY':'4.5'}\n",
                 REMAT_EGRAPH, "got '4.5' (not a whole non-negative decimal number)");
    import_fails("{'INSTRUCTION':'CONSTANT','NAME':'x'}\n{'INSTRUCTION':'MEMORY','NAME':'x',"
                 "'MEMORY':'18446744073709551616'}\n",
                 REMAT_EGRAPH, "(above 2^64-1)");
    import_fails("{'INSTRUCTION':'CONSTANT','NAME':'x'}\n{'INSTRUCTION':'MEMORY','NAME':'x','MEMORY':1e300}\n",
                 REMAT_EGRAPH, "above 2^53-1");
    import_fails("{'INSTRUCTION':'CONSTANT','NAME':'x'}\n{'INSTRUCTION':'MEMORY','NAME':'x'}\n", REMAT_EGRAPH,
                 "t.log:2: MEMORY: missing");
    import_fails(CONST("x", "4") "{'INSTRUCTION':'CALL','NAME':'f','ARGS':['x'],'RESULT':['y'],'TIME':'-3'}\n",
                 REMAT_EGRAPH, "t.log:3: TIME: must be a whole number of nanoseconds from 0 to 2^64-1, got '-3'");
    import_fails(CONST("x", "4") "{'INSTRUCTION':'CALL','NAME':'f','ARGS':['x'],'RESULT':['y'],'TIME':0.25}\n",
                 REMAT_EGRAPH, "TIME: must be a whole number of nanoseconds");
    import_fails(CONST("x", "4") "{'INSTRUCTION':'CALL','NAME':'f','ARGS':['x'],'RESULT':['y']}\n", REMAT_EGRAPH,
                 "t.log:3: TIME: missing");
}
END_TEST

/* What converts line by line but cannot be mapped. */
START_TEST(import_dtr_should_refuse_logs_it_cannot_map)
{
    /* Only constants. */
    import_fails(CONST("x", "4") CONST("y", "4"), REMAT_EGRAPH, "t.log: no forward CALL or MUTATE with results");
    /* Backward from the first line: no forward op. */
    import_fails(CONST("x", "4") CALL1("relu_backward", "'x'", "g", "4", "-1", "1"), REMAT_EGRAPH,
                 "no forward CALL or MUTATE with results before the backward part");
    /* The only result is released before the backward part and is no
     * seed (the backward part does not read it): no output. */
    import_fails(CONST("x", "4") CALL1("f", "'x'", "y", "4", "-1", "1") REL("y")
                     CALL1("f_backward", "'x'", "g", "4", "-1", "1"),
                 REMAT_EGRAPH, "t.log: cannot tell the graph's outputs");
}
END_TEST

START_TEST(import_dtr_should_report_a_missing_file)
{
    remat_err err;
    remat_err_init(&err);
    char *out = (char *)"untouched";
    ck_assert_int_ne(remat_import_dtr_file("/nonexistent/x.log", NULL, &out, NULL, NULL, &err), REMAT_OK);
    ck_assert_ptr_null(out);
    ck_assert_msg_contains(&err, "/nonexistent/x.log");
}
END_TEST

/* Every allocation failure becomes REMAT_ENOMEM, never a crash, a wrong
 * status or a half-written result. */
START_TEST(import_dtr_should_fail_cleanly_out_of_memory)
{
    char path[512];
    t_fixture("dtr/small.log", path, sizeof path);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    char *text = malloc(1 << 16);
    ck_assert_ptr_nonnull(text);
    size_t len = fread(text, 1, 1 << 16, f);
    fclose(f);
    int succeeded = 0;
    for (uint64_t n = 1; n < 20000 && !succeeded; n++) {
        remat_err err;
        remat_err_init(&err);
        char *out = NULL;
        remat__alloc_fail_at(n);
        remat_status st = remat_import_dtr(text, len, "t.log", NULL, &out, NULL, NULL, &err);
        remat__alloc_fail_at(0);
        if (st == REMAT_OK) {
            succeeded = 1;
            remat_free(out);
        } else {
            ck_assert_msg(st == REMAT_ENOMEM, "allocation %llu: %s", (unsigned long long)n, err.msg);
            ck_assert_ptr_null(out);
        }
    }
    ck_assert(succeeded);
    free(text);
}
END_TEST

Suite *import_dtr_suite(void)
{
    Suite *s = suite_create("import_dtr");
    TCase *tc = tcase_create("dtr");
    tcase_add_test(tc, import_dtr_should_map_the_hand_written_log_op_by_op);
    tcase_add_test(tc, import_dtr_should_replay_store_all_to_the_hand_computed_peak);
    tcase_add_test(tc, import_dtr_should_map_a_generated_resnet_log_by_closed_forms);
    tcase_add_test(tc, import_dtr_should_make_an_inference_graph_without_a_backward_part);
    tcase_add_test(tc, import_dtr_should_take_the_backward_annotation_and_unread_outputs);
    tcase_add_test(tc, import_dtr_should_version_mutated_tensors);
    tcase_add_test(tc, import_dtr_should_refuse_lines_that_are_not_instructions);
    tcase_add_test(tc, import_dtr_should_refuse_bad_references_and_sequences);
    tcase_add_test(tc, import_dtr_should_refuse_sizes_and_times_that_are_not_whole);
    tcase_add_test(tc, import_dtr_should_refuse_logs_it_cannot_map);
    tcase_add_test(tc, import_dtr_should_report_a_missing_file);
    tcase_add_test(tc, import_dtr_should_fail_cleanly_out_of_memory);
    suite_add_tcase(s, tc);
    return s;
}

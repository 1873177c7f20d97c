/*
 * check_import.c - `remat import checkmate`: Checkmate/Moccasin node-link
 * graphs converted to remat graphs, checked op by op against what the
 * files say by hand (the expectations below are read off the fixtures, not
 * off the converter), and every refusal with its status and message.
 *
 * Fixtures (tests/fixtures/checkmate/): small_train_nx.json is hand-written
 * in the layout of Checkmate's dfgraph_from_keras (conv -> relu -> fc ->
 * Loss, backward nodes named X_backward); residual_train_nx.json (a skip
 * connection) and fork_train_nx.json (one tensor read by two layers that are
 * merged later) are made by make_graphs.py with networkx ("Grad <X>" names).
 *
 * In those graphs the gradient node of X holds grad(X's output) and is
 * computed by the backward rule of X's consumers, so the import puts it on
 * the BWD step of X's first consumer (graphs/README.md). Each graph's
 * store-all schedule and peak are worked out below twice by hand: under
 * Checkmate's own free-at-last-use model (nodes run in id order, each value
 * freed after its last reader) and under remat's (lifetimes of DESIGN 3),
 * and the replayed peak must be remat's figure.
 */
#include "exec_util.h"
#include "test_util.h"
#include "util/util_internal.h"

#include <stdio.h>
#include <stdlib.h>

/* Converts text, asserting success, and loads and analyzes the result. */
static remat_analysis *import_text(const char *json, remat_graph **g, remat_import_summary *sum)
{
    remat_err err;
    remat_err_init(&err);
    char *out = NULL;
    size_t len = 0;
    ck_assert_msg(remat_import_checkmate(json, strlen(json), "t.json", NULL, &out, &len, sum, &err) == REMAT_OK,
                  "import failed: %s", err.msg);
    ck_assert_uint_eq(len, strlen(out));
    remat_analysis *a = t_analyze(out, g);
    remat_free(out);
    return a;
}

static remat_analysis *import_fixture(const char *name, remat_graph **g, remat_import_summary *sum)
{
    char path[512];
    t_fixture(name, path, sizeof path);
    remat_err err;
    remat_err_init(&err);
    char *out = NULL;
    size_t len = 0;
    ck_assert_msg(remat_import_checkmate_file(path, NULL, &out, &len, sum, &err) == REMAT_OK, "import %s: %s", path,
                  err.msg);
    remat_analysis *a = t_analyze(out, g);
    remat_free(out);
    return a;
}

static void import_fails(const char *json, remat_status code, const char *substr)
{
    remat_err err;
    remat_err_init(&err);
    char *out = (char *)"untouched";
    remat_status st = remat_import_checkmate(json, strlen(json), "t.json", NULL, &out, NULL, NULL, &err);
    ck_assert_int_eq(st, code);
    ck_assert_int_eq(err.code, code);
    ck_assert_ptr_null(out);
    ck_assert_msg_contains(&err, substr);
    ck_assert_msg_contains(&err, "t.json");
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

static void check_op(const remat_graph *g, const char *id, const char *inputs, uint64_t bytes, uint64_t flops,
                     uint64_t bwd_flops, const char *saves)
{
    char buf[256];
    const remat_op *op = &g->ops[t_op(g, id)];
    ck_assert_str_eq(refs(g, id, 0, buf, sizeof buf), inputs);
    ck_assert_str_eq(refs(g, id, 1, buf, sizeof buf), saves);
    ck_assert_uint_eq(g->tensors[t_tensor(g, id)].bytes, bytes);
    ck_assert_uint_eq(op->flops, flops);
    ck_assert_uint_eq(op->bwd_flops, bwd_flops);
}

/* The store-all schedule's activation peak and the instruction at which
 * it occurs ("BWD x"). */
static uint64_t store_all_peak(const remat_analysis *a, char *step, size_t cap)
{
    remat_err err;
    remat_err_init(&err);
    remat_schedule s;
    remat_schedule_init(&s);
    ck_assert_int_eq(remat_schedule_store_all(a, &s, &err), REMAT_OK);
    remat_replay_result r;
    replay_valid(a, &s, NULL, &r);
    remat_instr_text(a->g, s.ins[r.activation_peak_index], step, cap);
    uint64_t peak = r.activation_peak;
    ck_assert_uint_eq(r.flops_recompute, 0);
    remat_replay_result_destroy(&r);
    remat_schedule_destroy(&s);
    return peak;
}

START_TEST(import_should_map_the_hand_written_graph_node_by_node)
{
    remat_graph *g;
    remat_import_summary sum;
    remat_analysis *a = import_fixture("checkmate/small_train_nx.json", &g, &sum);
    ck_assert_str_eq(g->name, "small (hand-written)_train");
    ck_assert_uint_eq(g->n_ops, 4);
    /* Node 6 conv_backward holds grad(conv) and reads conv and relu (the
     * output_dep and next_outputs_deps edges): it is relu's backward rule,
     * so BWD(relu) carries it. Likewise relu_backward (5) is BWD(fc)'s and
     * fc_backward (4), which reads the loss, is BWD(Loss)'s. BWD(conv) would
     * write the gradient of the network input, which Checkmate does not
     * compute: it costs nothing and reads nothing. */
    check_op(g, "conv", "input", 100, 10, 0, "");
    check_op(g, "relu", "conv", 100, 2, 20, "conv,relu");
    check_op(g, "fc", "relu", 10, 5, 4, "relu,fc");
    check_op(g, "Loss", "fc", 4, 1, 10, "fc,Loss");
    ck_assert_uint_eq(g->n_outputs, 1);
    ck_assert_str_eq(g->tensors[g->outputs[0]].id, "Loss");
    /* The implicit input: 0 bytes, wants a gradient, so every op gets a
     * backward step, as every Checkmate layer has one. */
    const remat_tensor *in = &g->tensors[t_tensor(g, "input")];
    ck_assert_int_eq(in->kind, REMAT_TENSOR_INPUT);
    ck_assert_uint_eq(in->bytes, 0);
    ck_assert(in->requires_grad);
    ck_assert_uint_eq(a->n_bwd, 4);
    ck_assert_uint_eq(sum.forward_nodes, 3);
    ck_assert_uint_eq(sum.backward_nodes, 3);
    ck_assert_uint_eq(sum.by_layout, 0);
    ck_assert_uint_eq(sum.links, 11);
    ck_assert_uint_eq(sum.saves, 6);
    ck_assert_uint_eq(sum.without_backward, 0);
    ck_assert_uint_eq(sum.shared, 0);
    ck_assert_uint_eq(sum.own_step, 0);
    /* relu is read last by conv_backward, i.e. by BWD(relu). */
    ck_assert_uint_eq(a->life[t_tensor(g, "relu")].last_bwd_use, t_bwd(a, "relu"));
    /* Checkmate, nodes 0..6 (live after each, freed after its last reader):
     * conv 100, relu 200, fc 210, Loss 214, fc_backward 224 (Loss freed:
     * 220), relu_backward 320 (fc, fc_backward freed: 300), conv_backward
     * 400. remat: 100, 200, 210, 214; BWD(Loss) 214 + seed 4 + grad(fc) 10 =
     * 228 (Loss and the seed freed: 220); BWD(fc) 220 + grad(relu) 100 =
     * 320 (fc, grad(fc) freed: 300); BWD(relu) 300 + grad(conv) 100 = 400. Both peaks: 400, at the step
     * that computes grad(conv). Compute: 18 forward, 34 backward = 52, the
     * sum of cost_cpu. */
    char step[64];
    ck_assert_uint_eq(store_all_peak(a, step, sizeof step), 400);
    ck_assert_str_eq(step, "BWD relu");
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(import_should_map_the_networkx_residual_graph)
{
    remat_graph *g;
    remat_import_summary sum;
    remat_analysis *a = import_fixture("checkmate/residual_train_nx.json", &g, &sum);
    ck_assert_uint_eq(g->n_ops, 6);
    /* bwd(i) = 10 - i holds grad(i) and reads i and i's consumers. stem's
     * (node 10, cost 14) reads stem, conv_a and add: stem has two consumers,
     * conv_a and add, and its gradient is complete only when both have run
     * backward; conv_a is the first in forward order, so its BWD (the later
     * in backward) carries node 10's cost and reads. BWD(add) carries
     * conv_b's gradient node (8) and accumulates into grad(stem) for free. */
    check_op(g, "stem", "input", 64, 7, 0, "");
    check_op(g, "conv_a", "stem", 32, 11, 14, "stem,conv_a,add");
    check_op(g, "conv_b", "conv_a", 64, 13, 22, "conv_a,conv_b");
    check_op(g, "add", "stem,conv_b", 64, 3, 26, "conv_b,add");
    check_op(g, "head", "add", 8, 5, 6, "add,head");
    check_op(g, "Loss", "head", 4, 0, 10, "head,Loss");
    ck_assert_uint_eq(sum.backward_nodes, 5);
    ck_assert_uint_eq(sum.by_layout, 0);
    ck_assert_uint_eq(sum.links, 22);
    ck_assert_uint_eq(sum.shared, 1);
    ck_assert_uint_eq(a->n_bwd, 6);
    /* Checkmate, nodes 0..10: forward 64, 96, 160, 224, 232, 236; Grad
     * <head> 244 (Loss freed: 240); Grad <add> 304 (head, Grad <head>
     * freed: 288); Grad <conv_b> 352; Grad <conv_a> 384 (conv_b, Grad
     * <conv_b> freed: 256); Grad <stem> 320. Peak 384.
     * remat: forward to 236; BWD(Loss) 236 + 4 + 8 = 248 (then 240);
     * BWD(head) 240 + grad(add) 64 = 304 (then 288); BWD(add) 288 +
     * grad(conv_b) 64 + grad(stem) 64 = 416 (then 352); BWD(conv_b) 352 +
     * grad(conv_a) 32 = 384 (then 256); BWD(conv_a) accumulates into
     * grad(stem): 256. Peak 416: remat's add writes grad(stem) when it runs
     * backward (as autograd does), while Checkmate keeps Grad <add> and
     * builds grad(stem) at the end; the two peaks differ by that tensor. */
    char step[64];
    ck_assert_uint_eq(store_all_peak(a, step, sizeof step), 416);
    ck_assert_str_eq(step, "BWD add");
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(import_should_map_a_tensor_read_by_two_layers)
{
    remat_graph *g;
    remat_import_summary sum;
    remat_analysis *a = import_fixture("checkmate/fork_train_nx.json", &g, &sum);
    /* stem is read by left and right, which cat merges. stem's gradient
     * node (10, cost 8) reads stem, left and right: BWD(left), the later of
     * the two in backward, carries it; BWD(right) only accumulates into
     * grad(stem). cat's BWD carries the gradient nodes of both its inputs
     * (9: left, cat; 8: right, cat). */
    check_op(g, "stem", "input", 40, 4, 0, "");
    check_op(g, "left", "stem", 16, 6, 8, "stem,left,right");
    check_op(g, "right", "stem", 24, 8, 0, "");
    check_op(g, "cat", "left,right", 40, 1, 28, "left,right,cat");
    check_op(g, "head", "cat", 8, 2, 2, "cat,head");
    check_op(g, "Loss", "head", 4, 0, 4, "head,Loss");
    ck_assert_uint_eq(sum.shared, 1);
    ck_assert_uint_eq(sum.saves, 10);
    /* right is read last by stem's gradient node, i.e. by BWD(left). */
    ck_assert_uint_eq(a->life[t_tensor(g, "right")].last_bwd_use, t_bwd(a, "left"));
    /* Checkmate, nodes 0..10: forward 40, 56, 80, 120, 128, 132; Grad
     * <head> 140 (136); Grad <cat> 176 (160); Grad <right> 184; Grad <left>
     * 200 (cat, Grad <cat> freed: 120); Grad <stem> 160. Peak 200.
     * remat: BWD(Loss) 132 + 4 + 8 = 144 (136); BWD(head) 136 + 40 = 176
     * (160); BWD(cat) 160 + grad(left) 16 + grad(right) 24 = 200 (cat and
     * grad(cat) freed: 120); BWD(right) 120 + grad(stem) 40 = 160 (136);
     * BWD(left) 136. Peak 200 in both, at the step that makes Grad <left>.
     * Compute: forward 21 + backward 42 = 63, the sum of cost_cpu. */
    char step[64];
    ck_assert_uint_eq(store_all_peak(a, step, sizeof step), 200);
    ck_assert_str_eq(step, "BWD cat");
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* Without names, Checkmate's layout (bwd of i is 2n - i) matches. */
START_TEST(import_should_match_backward_nodes_by_layout_without_names)
{
    const char *json = "{\"nodes\": ["
                       "{\"id\": 0, \"backward\": false, \"cost_cpu\": 3, \"cost_ram\": 30},"
                       "{\"id\": 1, \"backward\": false, \"cost_cpu\": 5, \"cost_ram\": 50},"
                       "{\"id\": 2, \"backward\": true, \"cost_cpu\": 1, \"cost_ram\": 4},"
                       "{\"id\": 3, \"backward\": true, \"cost_cpu\": 10, \"cost_ram\": 50},"
                       "{\"id\": 4, \"backward\": true, \"cost_cpu\": 6, \"cost_ram\": 30}],"
                       " \"links\": [{\"source\": 0, \"target\": 1}, {\"source\": 1, \"target\": 2},"
                       " {\"source\": 2, \"target\": 3}, {\"source\": 1, \"target\": 3}, {\"source\": 0, \"target\": 4},"
                       " {\"source\": 1, \"target\": 4}, {\"source\": 3, \"target\": 4}, {\"source\": 1, \"target\": 4}]}";
    remat_graph *g;
    remat_import_summary sum;
    remat_analysis *a = import_text(json, &g, &sum);
    /* Node 4 (bwd of n0) is carried by n0's consumer n1; node 3 (bwd of
     * n1) by the loss n2. The repeated link 1 -> 4 is one read. */
    check_op(g, "n0", "input", 30, 3, 0, "");
    check_op(g, "n1", "n0", 50, 5, 6, "n0,n1");
    check_op(g, "n2", "n1", 4, 1, 10, "n1,n2");
    ck_assert_uint_eq(sum.by_layout, 2);
    ck_assert_uint_eq(sum.links, 8);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* One BWD step can carry several gradient nodes whose reads overlap: d
 * reads a, b and c, and the gradient nodes of a, b and c (carried by d,
 * their one consumer) each read a, b, c and d (as with dfgraph_from_keras's
 * input_dep). d's saves name each value once, and its bwd_flops is the sum
 * of the three costs. */
START_TEST(import_should_read_each_value_once_when_one_step_carries_several_gradient_nodes)
{
    const char *json = "{\"nodes\": ["
                       "{\"id\": 0, \"name\": \"a\", \"cost_cpu\": 1, \"cost_ram\": 8},"
                       "{\"id\": 1, \"name\": \"b\", \"cost_cpu\": 1, \"cost_ram\": 8},"
                       "{\"id\": 2, \"name\": \"c\", \"cost_cpu\": 1, \"cost_ram\": 8},"
                       "{\"id\": 3, \"name\": \"d\", \"cost_cpu\": 1, \"cost_ram\": 8},"
                       "{\"id\": 4, \"name\": \"Loss\", \"backward\": true, \"cost_cpu\": 0, \"cost_ram\": 4},"
                       "{\"id\": 5, \"name\": \"d_backward\", \"backward\": true, \"cost_cpu\": 2, \"cost_ram\": 8},"
                       "{\"id\": 6, \"name\": \"c_backward\", \"backward\": true, \"cost_cpu\": 3, \"cost_ram\": 8},"
                       "{\"id\": 7, \"name\": \"b_backward\", \"backward\": true, \"cost_cpu\": 5, \"cost_ram\": 8},"
                       "{\"id\": 8, \"name\": \"a_backward\", \"backward\": true, \"cost_cpu\": 7, \"cost_ram\": 8}],"
                       " \"links\": [{\"source\": 0, \"target\": 3}, {\"source\": 1, \"target\": 3},"
                       " {\"source\": 2, \"target\": 3}, {\"source\": 3, \"target\": 4}, {\"source\": 4, \"target\": 5},"
                       " {\"source\": 3, \"target\": 5},"
                       " {\"source\": 5, \"target\": 6}, {\"source\": 5, \"target\": 7}, {\"source\": 5, \"target\": 8},"
                       " {\"source\": 0, \"target\": 6}, {\"source\": 1, \"target\": 6}, {\"source\": 2, \"target\": 6},"
                       " {\"source\": 3, \"target\": 6}, {\"source\": 0, \"target\": 7}, {\"source\": 1, \"target\": 7},"
                       " {\"source\": 2, \"target\": 7}, {\"source\": 3, \"target\": 7}, {\"source\": 0, \"target\": 8},"
                       " {\"source\": 1, \"target\": 8}, {\"source\": 2, \"target\": 8}, {\"source\": 3, \"target\": 8}]}";
    remat_graph *g;
    remat_import_summary sum;
    remat_analysis *a = import_text(json, &g, &sum);
    check_op(g, "d", "a,b,c", 8, 1, 15, "a,b,c,d");
    check_op(g, "Loss", "d", 4, 0, 2, "d,Loss");
    check_op(g, "a", "input", 8, 1, 0, "");
    ck_assert_uint_eq(sum.saves, 6);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(import_should_take_string_ids_and_keep_shared_names_apart)
{
    /* Two forward nodes named "x": the second becomes "x#b"; a forward node
     * named "input" leaves the implicit input its id. */
    const char *json = "{\"graph\": {}, \"nodes\": ["
                       "{\"id\": \"a\", \"name\": \"x\", \"cost_cpu\": 1, \"cost_ram\": 8},"
                       "{\"id\": \"b\", \"name\": \"x\", \"cost_cpu\": 2, \"cost_ram\": 16},"
                       "{\"id\": \"c\", \"name\": \"input\", \"backward\": null, \"cost_cpu\": 3, \"cost_ram\": 24},"
                       "{\"id\": \"L\", \"name\": \"loss\", \"backward\": true, \"cost_cpu\": 4, \"cost_ram\": 4}],"
                       " \"links\": [{\"source\": \"a\", \"target\": \"b\"}, {\"source\": \"b\", \"target\": \"c\"},"
                       " {\"source\": \"c\", \"target\": \"L\"}]}";
    remat_graph *g;
    remat_import_summary sum;
    remat_analysis *a = import_text(json, &g, &sum);
    ck_assert_str_eq(g->name, "checkmate");
    check_op(g, "x", "input", 8, 1, 0, "");
    check_op(g, "x#b", "x", 16, 2, 0, "");
    check_op(g, "input#c", "x#b", 24, 3, 0, "");
    check_op(g, "loss", "input#c", 4, 4, 0, "");
    ck_assert_uint_eq(sum.without_backward, 3);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

START_TEST(import_should_make_an_inference_graph_without_backward_nodes)
{
    const char *json = "{\"nodes\": [{\"id\": 0, \"name\": \"a\", \"cost_cpu\": 1, \"cost_ram\": 10},"
                       "{\"id\": 1, \"name\": \"b\", \"cost_cpu\": 1, \"cost_ram\": 20},"
                       "{\"id\": 2, \"name\": \"c\", \"cost_cpu\": 1, \"cost_ram\": 30}],"
                       " \"links\": [{\"source\": 0, \"target\": 1}, {\"source\": 0, \"target\": 2}]}";
    remat_graph *g;
    remat_import_summary sum;
    remat_analysis *a = import_text(json, &g, &sum);
    ck_assert_uint_eq(g->n_outputs, 2);
    ck_assert_str_eq(g->tensors[g->outputs[0]].id, "b");
    ck_assert_str_eq(g->tensors[g->outputs[1]].id, "c");
    ck_assert(!g->tensors[t_tensor(g, "input")].requires_grad);
    ck_assert_uint_eq(a->n_bwd, 0);
    remat_analysis_destroy(a);
    remat_graph_destroy(g);
}
END_TEST

/* Nodes for the role errors: forward a (0), forward b (1). */
#define AB "{\"id\": 0, \"name\": \"a\", \"cost_cpu\": 1, \"cost_ram\": 4}, " \
           "{\"id\": 1, \"name\": \"b\", \"cost_cpu\": 1, \"cost_ram\": 4}"
#define BWD(id, name) "{\"id\": " #id ", \"name\": \"" name "\", \"backward\": true, \"cost_cpu\": 1, \"cost_ram\": 4}"

START_TEST(import_should_refuse_what_is_not_a_checkmate_graph)
{
    import_fails("{\"nodes\": [", REMAT_EPARSE, "t.json:1:");
    import_fails("[]", REMAT_EGRAPH, "top level must be a node-link object");
    import_fails("{\"links\": []}", REMAT_EGRAPH, "nodes: missing or not an array");
    import_fails("{\"nodes\": [{\"id\": 0, \"cost_cpu\": 1, \"cost_ram\": 1}]}", REMAT_EGRAPH,
                 "links: missing or not an array");
    import_fails("{\"nodes\": [], \"links\": []}", REMAT_EGRAPH, "nodes: no nodes");
    import_fails("{\"nodes\": [7], \"links\": []}", REMAT_EGRAPH, "nodes[0]: must be an object");
    import_fails("{\"nodes\": [{\"cost_cpu\": 1, \"cost_ram\": 1}], \"links\": []}", REMAT_EGRAPH,
                 "nodes[0].id: missing");
    import_fails("{\"nodes\": [{\"id\": 1.5, \"cost_cpu\": 1, \"cost_ram\": 1}], \"links\": []}", REMAT_EGRAPH,
                 "nodes[0].id: a numeric node id must be a whole number");
    import_fails("{\"nodes\": [{\"id\": [0], \"cost_cpu\": 1, \"cost_ram\": 1}], \"links\": []}", REMAT_EGRAPH,
                 "nodes[0].id: a node id must be a number or a string");
    import_fails("{\"nodes\": [{\"id\": 0, \"cost_cpu\": 1, \"cost_ram\": 1}, {\"id\": 0, \"cost_cpu\": 1, "
                 "\"cost_ram\": 1}], \"links\": []}",
                 REMAT_EGRAPH, "nodes[1].id: node id 0 is also nodes[0]'s");
    import_fails("{\"nodes\": [{\"id\": 0, \"cost_ram\": 1}], \"links\": []}", REMAT_EGRAPH,
                 "nodes[0].cost_cpu: missing");
    import_fails("{\"nodes\": [{\"id\": 0, \"cost_cpu\": 1, \"cost_ram\": -4}], \"links\": []}", REMAT_EGRAPH,
                 "nodes[0].cost_ram: must be a whole number from 0 to 2^53-1");
    import_fails("{\"nodes\": [{\"id\": 0, \"cost_cpu\": \"1\", \"cost_ram\": 4}], \"links\": []}", REMAT_EGRAPH,
                 "nodes[0].cost_cpu: must be a number");
    import_fails("{\"nodes\": [{\"id\": 0, \"backward\": 1, \"cost_cpu\": 1, \"cost_ram\": 4}], \"links\": []}",
                 REMAT_EGRAPH, "nodes[0].backward: must be true, false or null");
    import_fails("{\"nodes\": [{\"id\": 0, \"name\": {}, \"cost_cpu\": 1, \"cost_ram\": 4}], \"links\": []}",
                 REMAT_EGRAPH, "nodes[0].name: must be a string");
    import_fails("{\"nodes\": [{\"id\": 0, \"cost_cpu\": 1, \"cost_ram\": 4}], \"links\": [{\"source\": 0, "
                 "\"target\": 9}]}",
                 REMAT_EGRAPH, "links[0].target: unknown node id 9");
    import_fails("{\"nodes\": [{\"id\": 0, \"cost_cpu\": 1, \"cost_ram\": 4}], \"links\": [{\"source\": \"0\", "
                 "\"target\": 0}]}",
                 REMAT_EGRAPH, "links[0].source: unknown node id 0");
    import_fails("{\"nodes\": [{\"id\": 0, \"cost_cpu\": 1, \"cost_ram\": 4}], \"links\": [{\"target\": 0}]}",
                 REMAT_EGRAPH, "links[0].source: missing");
    import_fails("{\"nodes\": [{\"id\": 0, \"cost_cpu\": 1, \"cost_ram\": 4}], \"links\": [3]}", REMAT_EGRAPH,
                 "links[0]: must be an object");
    import_fails("{\"nodes\": [{\"id\": 0, \"name\": \"a\", \"cost_cpu\": 1, \"cost_ram\": 4}], \"links\": "
                 "[{\"source\": 0, \"target\": 0}]}",
                 REMAT_EGRAPH, "links[0]: a node that reads itself (a)");
    import_fails("{\"nodes\": [" AB "], \"links\": [{\"source\": 0, \"target\": 1}, {\"source\": 1, \"target\": "
                 "0}]}",
                 REMAT_EGRAPH, "nodes: no backward nodes and no forward node that nothing reads");
}
END_TEST

START_TEST(import_should_refuse_roles_it_cannot_map)
{
    /* Two backward nodes that no backward node feeds. */
    import_fails("{\"nodes\": [" AB ", " BWD(2, "L1") ", " BWD(3, "L2") "], \"links\": [{\"source\": 1, \"target\": "
                 "2}, {\"source\": 1, \"target\": 3}]}",
                 REMAT_EGRAPH, "2 backward nodes are fed by no backward node (L1, L2): cannot tell which is the loss");
    /* A cycle of backward nodes: none is the loss. */
    import_fails("{\"nodes\": [" AB ", " BWD(2, "p") ", " BWD(3, "q") "], \"links\": [{\"source\": 2, \"target\": "
                 "3}, {\"source\": 3, \"target\": 2}]}",
                 REMAT_EGRAPH, "no loss node");
    /* A forward node reading a backward node. */
    import_fails("{\"nodes\": [" AB ", " BWD(2, "Loss") ", " BWD(3, "a_backward") "], \"links\": [{\"source\": 1, "
                 "\"target\": 2}, {\"source\": 2, \"target\": 3}, {\"source\": 3, \"target\": 1}]}",
                 REMAT_EGRAPH, "nodes[1]: forward node 'b' reads backward node 'a_backward'");
    /* A backward node for no forward node: no name matches, and its layout
     * mirror (4 - 1 - 9) is no node. */
    import_fails("{\"nodes\": [" AB ", " BWD(2, "Loss") ", " BWD(9, "zz_backward") "], \"links\": [{\"source\": 1, "
                 "\"target\": 2}, {\"source\": 2, \"target\": 9}]}",
                 REMAT_EGRAPH, "nodes[3]: backward node 'zz_backward' belongs to no forward node");
    /* Two backward nodes for one forward node. */
    import_fails("{\"nodes\": [" AB ", " BWD(2, "Loss") ", " BWD(3, "b_backward") ", " BWD(4, "Grad <b>") "], "
                 "\"links\": [{\"source\": 1, \"target\": 2}, {\"source\": 2, \"target\": 3}, {\"source\": 3, "
                 "\"target\": 4}]}",
                 REMAT_EGRAPH, "backward nodes 'b_backward' and 'Grad <b>' both belong to forward node 'b'");
}
END_TEST

/* The converted graph goes through the one loader: a cycle among forward
 * nodes converts, and the analyzer names it. */
START_TEST(import_should_leave_cycles_to_the_analyzer)
{
    const char *json = "{\"nodes\": [" AB ", " BWD(2, "Loss") "], \"links\": [{\"source\": 0, \"target\": 1}, "
                       "{\"source\": 1, \"target\": 0}, {\"source\": 1, \"target\": 2}]}";
    remat_err err;
    remat_err_init(&err);
    char *out = NULL;
    ck_assert_int_eq(remat_import_checkmate(json, strlen(json), "t.json", "cyc", &out, NULL, NULL, &err), REMAT_OK);
    remat_graph *g = NULL;
    remat_analysis *a = NULL;
    ck_assert_int_eq(remat_graph_load_json(out, strlen(out), "cyc", &g, &err), REMAT_OK);
    ck_assert_str_eq(g->name, "cyc");
    ck_assert_int_eq(remat_analyze(g, &a, &err), REMAT_EGRAPH);
    ck_assert_msg_contains(&err, "cycle");
    remat_graph_destroy(g);
    remat_free(out);
}
END_TEST

START_TEST(import_should_report_a_missing_file)
{
    remat_err err;
    remat_err_init(&err);
    char *out = (char *)"untouched";
    ck_assert_int_ne(remat_import_checkmate_file("/nonexistent/x.json", NULL, &out, NULL, NULL, &err), REMAT_OK);
    ck_assert_ptr_null(out);
    ck_assert_msg_contains(&err, "/nonexistent/x.json");
}
END_TEST

/* Every allocation failure becomes REMAT_ENOMEM, never a crash or leak. */
START_TEST(import_should_fail_cleanly_out_of_memory)
{
    char path[512];
    t_fixture("checkmate/residual_train_nx.json", path, sizeof path);
    char *text = NULL;
    size_t len = 0;
    remat_err err;
    remat_err_init(&err);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    text = malloc(1 << 16);
    len = fread(text, 1, 1 << 16, f);
    fclose(f);
    int succeeded = 0;
    for (uint64_t n = 1; n < 10000 && !succeeded; n++) {
        remat_err_init(&err);
        char *out = NULL;
        remat__alloc_fail_at(n);
        remat_status st = remat_import_checkmate(text, len, "t.json", NULL, &out, NULL, NULL, &err);
        remat__alloc_fail_at(0);
        if (st == REMAT_OK) {
            succeeded = 1;
            remat_free(out);
        } else {
            ck_assert_msg(st == REMAT_ENOMEM || st == REMAT_EPARSE, "allocation %llu: %s", (unsigned long long)n,
                          err.msg);
            ck_assert_ptr_null(out);
        }
    }
    ck_assert(succeeded);
    free(text);
}
END_TEST

Suite *import_suite(void)
{
    Suite *s = suite_create("import");
    TCase *tc = tcase_create("checkmate");
    tcase_add_test(tc, import_should_map_the_hand_written_graph_node_by_node);
    tcase_add_test(tc, import_should_map_the_networkx_residual_graph);
    tcase_add_test(tc, import_should_map_a_tensor_read_by_two_layers);
    tcase_add_test(tc, import_should_match_backward_nodes_by_layout_without_names);
    tcase_add_test(tc, import_should_read_each_value_once_when_one_step_carries_several_gradient_nodes);
    tcase_add_test(tc, import_should_take_string_ids_and_keep_shared_names_apart);
    tcase_add_test(tc, import_should_make_an_inference_graph_without_backward_nodes);
    tcase_add_test(tc, import_should_refuse_what_is_not_a_checkmate_graph);
    tcase_add_test(tc, import_should_refuse_roles_it_cannot_map);
    tcase_add_test(tc, import_should_leave_cycles_to_the_analyzer);
    tcase_add_test(tc, import_should_report_a_missing_file);
    tcase_add_test(tc, import_should_fail_cleanly_out_of_memory);
    suite_add_tcase(s, tc);
    return s;
}

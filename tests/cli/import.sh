# import.sh - `remat import checkmate|dtr`: Checkmate/Moccasin node-link
# training graphs and DTR operator logs become remat graphs that load,
# analyze, replay and plan; files that are not such inputs exit 3 naming the
# place (a log's line and field), bad command lines exit 2.
import_ok() { "$REMAT" import "$@" >"$T/import.log" 2>&1 && cat "$T/import.log"; }
CM=tests/fixtures/checkmate

expect import_help 0 "networkx node-link JSON" -- "$REMAT" import --help
expect import_in_help 0 "import" -- "$REMAT" help
expect import_small 0 "4 ops, 4 backward steps, 6 saves" -- import_ok checkmate "$CM/small_train_nx.json" -o "$T/small.json"
expect import_small_saves 0 '"saves": ["conv", "relu"]' -- cat "$T/small.json"
expect import_small_lifetimes 0 "bwd:conv" -- "$REMAT" lifetimes "$T/small.json"
# By hand: conv_backward (grad of conv's output, reading conv and relu) is
# relu's backward rule, so BWD(relu) runs it; there conv and relu are kept
# (200 B), grad(relu) is read and grad(conv) written (200 B): 400 B, the
# free-at-last-use peak Checkmate's own model gives this graph.
expect import_small_replay 0 "peak        400 B at bwd:relu" -- "$REMAT" replay "$T/small.json"
expect import_small_compute 0 "forward 18, backward 34" -- "$REMAT" replay "$T/small.json"
expect import_small_stdout 0 '"outputs": ["Loss"]' -- "$REMAT" import checkmate "$CM/small_train_nx.json"
expect import_name 0 '"name": "mine"' -- "$REMAT" import checkmate "$CM/small_train_nx.json" --name mine
expect import_residual 0 "6 ops, 6 backward steps, 11 saves" -- import_ok checkmate "$CM/residual_train_nx.json" -o "$T/res.json"
expect import_residual_shared 0 "1 gradient nodes of a tensor with several consumers" -- cat "$T/import.log"
expect import_fork 0 "6 ops, 6 backward steps, 10 saves" -- import_ok checkmate "$CM/fork_train_nx.json" -o "$T/fork.json"
expect import_fork_replay 0 "peak        200 B at bwd:cat" -- "$REMAT" replay "$T/fork.json"
expect import_residual_plans 0 "budget" -- "$REMAT" plan "$T/res.json" --strategy auto --activation-budget 360
expect import_no_args 2 "expected FORMAT and FILE" -- "$REMAT" import
expect import_unknown_format 2 "unknown format 'tf' (known: checkmate, dtr)" -- "$REMAT" import tf "$CM/small_train_nx.json"
expect import_missing_file 3 "cannot open" -- "$REMAT" import checkmate "$T/nope.json"
expect import_remat_graph 3 "nodes: missing or not an array" -- "$REMAT" import checkmate graphs/mlp2.json
printf '{"nodes": [{"id": 0, "cost_cpu": 1, "cost_ram": 8}, {"id": 1, "cost_cpu": 1, "cost_ram": 8},\n {"id": 2, "name": "Loss", "backward": true, "cost_cpu": 1, "cost_ram": 4}],\n "links": [{"source": 0, "target": 1}, {"source": 1, "target": 0}, {"source": 1, "target": 2}]}' >"$T/cycle.json"
expect import_cycle 3 "cycle" -- "$REMAT" import checkmate "$T/cycle.json" -o "$T/never.json"
expect import_cycle_writes_nothing 0 "absent" -- sh -c "test -e \"$T/never.json\" || echo absent"
printf '{"nodes": [{"id": 0, "cost_cpu": 1, "cost_ram": 8}],\n "links": [{"source": 0, "target": 5}]}' >"$T/dangling.json"
expect import_dangling_link 3 "links[0].target: unknown node id 5" -- "$REMAT" import checkmate "$T/dangling.json"

# DTR operator logs (tests/fixtures/dtr/; the mapping is worked by hand in
# tests/check_import_dtr.c).
DT=tests/fixtures/dtr
expect import_dtr_help 0 "the DTR prototype's operator logs" -- "$REMAT" import --help
expect import_dtr_small 0 "graph 'small': 6 ops (1 of them views), 2 params, 2 inputs, loss from the gradient seed, 6 backward steps, 9 saves" -- import_ok dtr "$DT/small.log" -o "$T/dtr_small.json"
expect import_dtr_small_counts 0 "64 lines after START (2 skipped before it)" -- cat "$T/import.log"
expect import_dtr_small_view 0 '"alias_of": "x5@1"' -- cat "$T/dtr_small.json"
expect import_dtr_small_saves 0 '"saves": ["x4", "x10", "x12"]' -- cat "$T/dtr_small.json"
# By hand (check_import_dtr.c): store-all peaks at bwd:x7 with 32832 B.
expect import_dtr_small_replay 0 "(32832 B) at bwd:x7" -- "$REMAT" replay "$T/dtr_small.json"
expect import_dtr_stdout 0 '"outputs": ["x11"]' -- "$REMAT" import dtr "$DT/small.log"
expect import_dtr_name 0 '"name": "mine"' -- "$REMAT" import dtr "$DT/small.log" --name mine
expect import_dtr_resnet 0 "30 ops (2 of them views), 23 params, 16 inputs, loss from the gradient seed, 30 backward steps, 78 saves" -- import_ok dtr "$DT/resnet_b3.log" -o "$T/dtr_resnet.json"
expect import_dtr_resnet_plans 0 "budget" -- "$REMAT" plan "$T/dtr_resnet.json" --strategy auto --activation-budget 1MiB
expect import_dtr_resnet_generated 0 "same" -- sh -c "/usr/bin/python3 $DT/make_resnet_log.py | cmp - $DT/resnet_b3.log && echo same"
printf '{"INSTRUCTION":"CONSTANT","NAME":"x1"}\n{"INSTRUCTION":"MEMORY","NAME":"x1","MEMORY":"4"}\n{"INSTRUCTION":"CALL","NAME":"f","ARGS":["x1","x42"],"RESULT":["x2"],"TIME":"1"}\n' >"$T/unknown.log"
expect import_dtr_unknown_tensor 3 "unknown.log:3: ARGS[1]: unknown tensor 'x42'" -- "$REMAT" import dtr "$T/unknown.log" -o "$T/never.log.json"
expect import_dtr_unknown_writes_nothing 0 "absent" -- sh -c "test -e \"$T/never.log.json\" || echo absent"
printf '{"INSTRUCTION":"CONSTANT","NAME":"x1"}\n{"INSTRUCTION":"MEMORY","NAME":"x1","MEMORY":"-4"}\n' >"$T/neg.log"
expect import_dtr_negative_memory 3 "neg.log:2: MEMORY: must be a whole number of bytes" -- "$REMAT" import dtr "$T/neg.log"
printf '{"INSTRUCTION":"CONSTANT","NAME":"x1"}\nnot json\n' >"$T/junk.log"
expect import_dtr_not_json 3 "junk.log:2:1: not valid JSON near here" -- "$REMAT" import dtr "$T/junk.log"
expect import_dtr_checkmate_file 3 "small_train_nx.json:1:88: not valid JSON near here (at the end of the line: a DTR log has one JSON object per line)" -- "$REMAT" import dtr "$CM/small_train_nx.json"
expect import_dtr_remat_graph 3 "oneline.json:1: INSTRUCTION: missing" -- sh -c "tr -d '\\n' < graphs/mlp2.json > \"$T/oneline.json\"; \"$REMAT\" import dtr \"$T/oneline.json\""
expect import_dtr_missing_file 3 "cannot open" -- "$REMAT" import dtr "$T/nope.log"

# gen transformer --dropout: Megatron's dropouts, 18 ops per layer.
expect gen_transformer_dropout 0 "58 ops" -- sh -c "\"$REMAT\" gen transformer -s 16 -b 2 -h 32 -a 4 -L 3 --vocab 50 --dropout -o \"$T/td.json\" && \"$REMAT\" lifetimes \"$T/td.json\""
# Chen's method in both readings on an imported Checkmate graph (issue 15):
# the paper's names itself in the plan's params, compare shows both rows.
expect import_sqrtn_paper 0 '"reading": "paper"' -- "$REMAT" plan "$T/res.json" --strategy sqrtn --linearized --chen-reading paper --activation-budget 400
expect import_greedy_remat 0 '"reading": "remat"' -- "$REMAT" plan "$T/res.json" --strategy chen-greedy --linearized --activation-budget 400
expect import_compare_paper 0 'chen-greedy/paper/linearized' -- "$REMAT" compare "$T/res.json" --activation-budget 400
expect import_bad_reading 2 "chen-reading: 'checkmate' is not one of remat, paper" -- "$REMAT" plan "$T/res.json" --strategy sqrtn --chen-reading checkmate

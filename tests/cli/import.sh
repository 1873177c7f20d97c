# import.sh - `remat import checkmate`: Checkmate/Moccasin node-link training
# graphs become remat graphs that load, analyze, replay and plan; files that
# are not such graphs exit 3 naming the place, bad command lines exit 2.
import_ok() { "$REMAT" import "$@" >"$T/import.log" 2>&1 && cat "$T/import.log"; }
CM=tests/fixtures/checkmate

expect import_help 0 "networkx node-link JSON" -- "$REMAT" import --help
expect import_in_help 0 "import" -- "$REMAT" help
expect import_small 0 "4 ops, 4 backward steps, 6 saves" -- import_ok checkmate "$CM/small_train_nx.json" -o "$T/small.json"
expect import_small_saves 0 '"saves": ["conv", "relu"]' -- cat "$T/small.json"
expect import_small_lifetimes 0 "bwd:conv" -- "$REMAT" lifetimes "$T/small.json"
# By hand: conv and relu (100 B each) and fc (10 B) and the loss (4 B) are
# all saved; the peak is at bwd:relu with conv, relu and fc kept (210 B) and
# the gradients of relu's input and output (200 B).
expect import_small_replay 0 "peak        410 B at bwd:relu" -- "$REMAT" replay "$T/small.json"
expect import_small_stdout 0 '"outputs": ["Loss"]' -- "$REMAT" import checkmate "$CM/small_train_nx.json"
expect import_name 0 '"name": "mine"' -- "$REMAT" import checkmate "$CM/small_train_nx.json" --name mine
expect import_residual 0 "6 ops, 6 backward steps, 11 saves" -- import_ok checkmate "$CM/residual_train_nx.json" -o "$T/res.json"
expect import_residual_plans 0 "budget" -- "$REMAT" plan "$T/res.json" --strategy auto --activation-budget 300
expect import_no_args 2 "expected FORMAT and FILE" -- "$REMAT" import
expect import_unknown_format 2 "unknown format 'dtr'" -- "$REMAT" import dtr "$CM/small_train_nx.json"
expect import_missing_file 3 "cannot open" -- "$REMAT" import checkmate "$T/nope.json"
expect import_remat_graph 3 "nodes: missing or not an array" -- "$REMAT" import checkmate graphs/mlp2.json
printf '{"nodes": [{"id": 0, "cost_cpu": 1, "cost_ram": 8}, {"id": 1, "cost_cpu": 1, "cost_ram": 8},\n {"id": 2, "name": "Loss", "backward": true, "cost_cpu": 1, "cost_ram": 4}],\n "links": [{"source": 0, "target": 1}, {"source": 1, "target": 0}, {"source": 1, "target": 2}]}' >"$T/cycle.json"
expect import_cycle 3 "cycle" -- "$REMAT" import checkmate "$T/cycle.json" -o "$T/never.json"
expect import_cycle_writes_nothing 0 "absent" -- sh -c "test -e \"$T/never.json\" || echo absent"
printf '{"nodes": [{"id": 0, "cost_cpu": 1, "cost_ram": 8}],\n "links": [{"source": 0, "target": 5}]}' >"$T/dangling.json"
expect import_dangling_link 3 "links[0].target: unknown node id 5" -- "$REMAT" import checkmate "$T/dangling.json"

# gen transformer --dropout: Megatron's dropouts, 18 ops per layer.
expect gen_transformer_dropout 0 "58 ops" -- sh -c "\"$REMAT\" gen transformer -s 16 -b 2 -h 32 -a 4 -L 3 --vocab 50 --dropout -o \"$T/td.json\" && \"$REMAT\" lifetimes \"$T/td.json\""

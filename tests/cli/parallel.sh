# parallel.sh - `remat gen transformer --tp/--sp/--selective` (one Megatron
# rank) and `remat plan --pp` (pipeline stages): good runs and bad options.

# One rank of tensor parallelism loads, and its collectives are ops.
expect gen_tp_writes 0 "gen ok" -- gen_ok transformer -L 2 -s 32 -b 2 -h 64 -a 8 --vocab 50 --dropout --tp 4 -o "$T/tp.json"
expect gen_tp_loads 0 "48 ops" -- "$REMAT" lifetimes "$T/tp.json"
expect gen_tp_all_reduce 0 '"op": "all_reduce"' -- cat "$T/tp.json"
expect gen_tp_meta 0 '"tp": 4' -- cat "$T/tp.json"
expect gen_sp_writes 0 "gen ok" -- gen_ok transformer -L 2 -s 32 -b 2 -h 64 -a 8 --vocab 50 --dropout --tp 4 --sp -o "$T/sp.json"
expect gen_sp_loads 0 "50 ops" -- "$REMAT" lifetimes "$T/sp.json"
expect gen_sp_reduce_scatter 0 '"collective_fwd": "reduce_scatter"' -- cat "$T/sp.json"
expect gen_selective_writes 0 "gen ok" -- gen_ok transformer -L 2 -s 32 -b 2 -h 64 -a 8 --vocab 50 --dropout --selective -o "$T/sel.json"
expect gen_selective_loads 0 "34 ops" -- "$REMAT" lifetimes "$T/sel.json"
expect gen_selective_core 0 '"op": "core_attention"' -- cat "$T/sel.json"
expect gen_tp_replays 0 "is valid" -- "$REMAT" replay "$T/sp.json"
expect gen_tp_divides_heads 2 "--tp 3 must divide -a/--heads (8)" -- "$REMAT" gen transformer -a 8 -h 64 --tp 3
expect gen_sp_divides_seq 2 "--sp: --tp 4 must divide -s/--seq (30)" -- "$REMAT" gen transformer -s 30 --tp 4 --sp
expect gen_tp_not_chain 2 "--tp does not apply to chain" -- "$REMAT" gen chain --tp 2

# Pipeline: per device, with the first device holding the most.
"$REMAT" gen chain --ops 8 --param-bytes 1KiB -o "$T/c8.json"
expect pp_plan_1f1b 0 "pipeline 1f1b: 2 devices x 4 microbatches" -- \
    "$REMAT" plan "$T/c8.json" --strategy store-all --pp 2 --microbatches 4 --pp-stages 0:4,4:8
expect pp_plan_largest 0 "device 0 peak 12.01 MiB (12591104 B), 2 in flight  <- largest" -- \
    "$REMAT" plan "$T/c8.json" --strategy store-all --pp 2 --microbatches 4 --pp-stages 0:4,4:8
expect pp_plan_gpipe 0 "device 1 peak 22.01 MiB (23076864 B), 4 in flight" -- \
    "$REMAT" plan "$T/c8.json" --strategy store-all --pp 2 --microbatches 4 --pp-schedule gpipe --pp-stages 0:4,4:8
expect pp_plan_bubble 0 "bubble 20.00% of device time (25.00% of the ideal)" -- \
    "$REMAT" plan "$T/c8.json" --strategy store-all --pp 2 --microbatches 4 --pp-stages 0:4,4:8
expect pp_plan_json 0 '"in_flight": 2, "peak_bytes": ' -- \
    "$REMAT" plan "$T/c8.json" --strategy store-all --pp 2 --microbatches 4 --json
expect pp_plan_budget 0 "device 0 peak 9.01 MiB (9445376 B), 2 in flight  <- largest" -- \
    "$REMAT" plan "$T/c8.json" --pp 2 --microbatches 4 --pp-stages 0:4,4:8 --budget 10MiB
expect pp_plan_infeasible 4 "pipeline stage 0 (device 0, ops 0:4): strategy auto cannot meet" -- \
    "$REMAT" plan "$T/c8.json" --pp 2 --microbatches 4 --pp-stages 0:4,4:8 --budget 3MiB
expect pp_plan_interleaved 0 "pipeline interleaved:2: 2 devices x 4 microbatches, 4 stages" -- \
    "$REMAT" plan "$T/c8.json" --strategy store-all --pp 2 --microbatches 4 --pp-schedule interleaved:2
expect pp_needs_pp 2 "need --pp P" -- "$REMAT" plan "$T/c8.json" --microbatches 4
expect pp_bad_schedule 2 "expected gpipe, 1f1b or interleaved:V" -- "$REMAT" plan "$T/c8.json" --pp 2 --pp-schedule zigzag
expect pp_interleaved_multiple 2 "multiple of --pp (2)" -- \
    "$REMAT" plan "$T/c8.json" --pp 2 --microbatches 3 --pp-schedule interleaved:2
expect pp_bad_stages 2 "entry 2 (5:8) must start at 4" -- "$REMAT" plan "$T/c8.json" --pp 2 --pp-stages 0:4,5:8
expect pp_too_many_stages 2 "every stage needs at least one op" -- "$REMAT" plan "$T/c8.json" --pp 9
expect pp_no_activation_budget 2 "--activation-budget with --pp" -- \
    "$REMAT" plan "$T/c8.json" --pp 2 --activation-budget 8MiB

# replay --pp: each stage's store-all schedule, the same devices as plan's.
expect pp_replay 0 "device 0 peak 12.01 MiB (12591104 B), 2 in flight  <- largest" -- \
    "$REMAT" replay "$T/c8.json" --pp 2 --microbatches 4 --pp-stages 0:4,4:8
expect pp_replay_no_plan 2 "--pp replays each stage's store-all schedule" -- \
    "$REMAT" replay "$T/c8.json" "$T/c8.json" --pp 2
# The pipeline's messages name the library's calls; the command tells them
# in its flags.
expect pp_bad_stages_in_flags 2 "--pp-stages '0:4,5:8': entry 2" -- "$REMAT" plan "$T/c8.json" --pp 2 --pp-stages 0:4,5:8
expect pp_bad_schedule_in_flags 2 "--pp-schedule 'zigzag': expected gpipe" -- "$REMAT" plan "$T/c8.json" --pp 2 --pp-schedule zigzag

# compare --pp: every strategy under the same pipeline. Store-all's device 0
# peaks at 12591104 B (above), so at 10 MiB it is refused with that figure,
# while every feasible row's largest device stays within the budget.
expect pp_compare_refused 0 "store-all          no        pipeline device 0: with 2 microbatches in flight no plan of its stages fits the budget of 10485760 B (the least its search reached: 12591104 B)" -- \
    "$REMAT" compare "$T/c8.json" --pp 2 --microbatches 4 --pp-stages 0:4,4:8 --budget 10MiB
expect pp_compare_within 0 "every feasible row within 10485760" -- sh -c "'$REMAT' compare '$T/c8.json' --pp 2 --microbatches 4 --pp-stages 0:4,4:8 --budget 10MiB | awk '\$2 == \"yes\" { n++; if (\$3 > 10485760) bad++ } END { if (n > 0 && !bad) print \"every feasible row within 10485760\" }'"
expect pp_compare_store_all 0 '{"strategy": "store-all", "feasible": true, "peak_bytes": 12591104, "largest_device": 0' -- \
    "$REMAT" compare "$T/c8.json" --pp 2 --microbatches 4 --pp-stages 0:4,4:8 --budget 13MiB --json
expect pp_compare_no_sweep 2 "--pp compares at one per-device --budget B" -- \
    "$REMAT" compare "$T/c8.json" --pp 2 --sweep 4

# Pipeline plan files: plan --pp -o writes every stage's plan, replay reads
# them back and prints the same devices (each stage replayed again, not read).
"$REMAT" plan "$T/c8.json" --pp 2 --microbatches 4 --pp-stages 0:4,4:8 --budget 10MiB -o "$T/c8.ppplan" | grep '^device' >"$T/pp-planned.txt"
expect pp_file_format 0 '"format": "remat-pp-plan", "version": 1' -- cat "$T/c8.ppplan"
expect pp_file_same_devices 0 "same devices" -- sh -c "'$REMAT' replay '$T/c8.json' '$T/c8.ppplan' | grep '^device' | cmp -s - '$T/pp-planned.txt' && echo same devices"
expect pp_file_budget_met 0 "budget (total, per device) 10.00 MiB (10485760 B): met" -- "$REMAT" replay "$T/c8.json" "$T/c8.ppplan"
# A budget the devices do not meet (edited), another graph, other cuts, and
# a stage schedule that does not replay are refused, each naming its place.
sed 's/"budget": 10485760/"budget": 9000000/' "$T/c8.ppplan" >"$T/over.ppplan"
expect pp_file_over_budget 1 "over.ppplan: device 0 peaks at 9.01 MiB (9445376 B), over the plan's budget of 8.58 MiB (9000000 B)" -- "$REMAT" replay "$T/c8.json" "$T/over.ppplan"
"$REMAT" gen chain --ops 9 --param-bytes 1KiB -o "$T/c9.json"
expect pp_file_other_graph 3 "this pipeline plan was made for graph 'chain8'" -- "$REMAT" replay "$T/c9.json" "$T/c8.ppplan"
sed 's/"cuts": \[0, 4, 8\]/"cuts": [0, 3, 8]/' "$T/c8.ppplan" >"$T/recut.ppplan"
expect pp_file_recut 3 "recut.ppplan: stages[0]" -- "$REMAT" replay "$T/c8.json" "$T/recut.ppplan"
sed 's/"cuts": \[0, 4, 8\]/"cuts": [0, 8, 8]/' "$T/c8.ppplan" >"$T/empty.ppplan"
expect pp_file_empty_stage 3 "cuts[2]: cuts must rise from 0 to the graph's 8 ops" -- "$REMAT" replay "$T/c8.json" "$T/empty.ppplan"
sed 's/"BWD t6", *//' "$T/c8.ppplan" >"$T/nobwd.ppplan"
expect pp_file_bad_schedule 1 "stages[1]: the schedule is not valid: instruction 10 (BWD t5): gradient of 't5' is incomplete" -- "$REMAT" replay "$T/c8.json" "$T/nobwd.ppplan"
expect pp_file_no_numeric 2 "a pipeline plan replays per stage" -- "$REMAT" replay "$T/c8.json" "$T/c8.ppplan" --numeric

# The ledger's options with --pp: each stage's state from its own params.
# c8's params are 1 KiB f32 each, four per stage, so Adam's two f32 moments
# add 2 x 4 x 1024 = 8192 B to each device: 12591104 + 8192 = 12599296 B.
expect pp_ledger_adam 0 "device 0 peak 12.02 MiB (12599296 B), 2 in flight  <- largest" -- \
    "$REMAT" plan "$T/c8.json" --strategy store-all --pp 2 --microbatches 4 --pp-stages 0:4,4:8 --optimizer adam
expect pp_ledger_replay 0 "device 0 peak 12.02 MiB (12599296 B)" -- \
    "$REMAT" replay "$T/c8.json" --pp 2 --microbatches 4 --pp-stages 0:4,4:8 --optimizer adam
expect pp_ledger_no_dp 2 "--dp, --shard and --deepspeed-config with --pp" -- \
    "$REMAT" plan "$T/c8.json" --pp 2 --optimizer adam --dp 4
# trace --plan with a pipeline plan file: its stages' own plans on the time
# axis, 2 devices x 4 microbatches x forward and backward (16 events) and
# one boundary crossed both ways per microbatch (8 sends).
expect pp_file_trace 0 "16 compute, 8 sends" -- sh -c "'$REMAT' trace '$T/c8.json' --plan '$T/c8.ppplan' --device h200 --format chrome | awk '/\"ph\": \"X\"/ { if (/\"tid\": 0,/) c++; else s++ } END { print c \" compute, \" s \" sends\" }'"
expect pp_file_trace_budget 2 "then trace --plan FILE" -- "$REMAT" trace "$T/c8.json" --plan "$T/c8.ppplan" --device h200 --format chrome --budget 9MiB
expect pp_file_trace_with_pp 2 "give --plan FILE without --pp" -- "$REMAT" trace "$T/c8.json" --pp 2 --plan "$T/c8.ppplan" --device h200 --format chrome

# A device's peak is counted in 64 bits or refused. Device 0's row of the
# table says: persistent 2048 B, held 1152921504606849024 B per microbatch in
# flight elsewhere, running 2305843009213697024 B. With 14 in flight its peak
# is persistent + 13 x held + running = 17293822569102736384 B (15 EiB); with
# 15 the sum passes 2^64 (the figure used to wrap).
cat >"$T/huge.json" <<'JSON'
{ "format": "remat-graph", "version": 1, "name": "huge",
  "inputs": [ {"id": "x", "bytes": 1024} ],
  "params": [ {"id": "w1", "bytes": 1024}, {"id": "w2", "bytes": 1024} ],
  "ops": [
    {"id": "h1", "op": "matmul", "inputs": ["x", "w1"], "bytes": "1152921504606846976", "flops": 1000},
    {"id": "a1", "op": "relu", "inputs": ["h1"], "bytes": 1024, "flops": 1000},
    {"id": "h2", "op": "matmul", "inputs": ["a1", "w2"], "bytes": 1024, "flops": 1000},
    {"id": "loss", "op": "sum", "inputs": ["h2"], "bytes": 4, "flops": 1000, "saves": []} ],
  "outputs": ["loss"] }
JSON
expect pp_peak_overflow 3 "pipeline device 0: the bytes its microbatches in flight hold pass 2^64" -- \
    "$REMAT" plan "$T/huge.json" --strategy store-all --pp 2 --microbatches 15 --pp-schedule gpipe --pp-stages 0:2,2:4
expect pp_peak_row 0 "0      0     0:2                  14           2048 1152921504606849024 2305843009213697024" -- \
    "$REMAT" plan "$T/huge.json" --strategy store-all --pp 2 --microbatches 14 --pp-schedule gpipe --pp-stages 0:2,2:4
expect pp_peak_fits 0 "device 0 peak 15.00 EiB (17293822569102736384 B)" -- \
    "$REMAT" plan "$T/huge.json" --strategy store-all --pp 2 --microbatches 14 --pp-schedule gpipe --pp-stages 0:2,2:4

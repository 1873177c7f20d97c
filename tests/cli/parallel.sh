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
expect pp_no_output 2 "-o with --pp" -- "$REMAT" plan "$T/c8.json" --pp 2 -o "$T/p.json"
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

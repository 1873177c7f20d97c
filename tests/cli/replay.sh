# replay.sh - `remat replay GRAPH [PLAN]`: the store-all replay of mlp2 (its
# figures are derived by hand in tests/check_exec.c), plan files that replay,
# broken schedules (exit 1, the instruction named), and plans that cannot be
# read or were made for another graph (exit 3).
expect replay_store_all_valid 0 '"valid": true' -- "$REMAT" replay graphs/mlp2.json --json
expect replay_store_all_peak 0 '"peak_bytes": 204800' -- "$REMAT" replay graphs/mlp2.json --json
expect replay_store_all_peak_step 0 '"peak_step": "bwd:h1"' -- "$REMAT" replay graphs/mlp2.json --json
expect replay_store_all_flops 0 '"flops": {"forward": 264192, "backward": 528384, "recompute": 0}' -- \
    "$REMAT" replay graphs/mlp2.json --json
expect replay_store_all_text 0 "peak        200.00 KiB (204800 B) at bwd:h1 (instruction 14)" -- \
    "$REMAT" replay graphs/mlp2.json

# A plan file written by `remat plan` replays to the same figures.
"$REMAT" plan graphs/mlp2.json --strategy store-all -o "$T/sa.json" >/dev/null 2>&1
expect replay_plan_file 0 '"peak_bytes": 204800' -- "$REMAT" replay graphs/mlp2.json "$T/sa.json" --json

# Broken schedules: the plan's instructions are one per line.
grep -v '"FWD v1"' "$T/sa.json" >"$T/no_fwd_v1.json"
expect replay_broken_json 1 '"valid": false, "fail_index": 3, "instruction": "FWD h2"' -- \
    "$REMAT" replay graphs/mlp2.json "$T/no_fwd_v1.json" --json
expect replay_broken_why 1 "input 'v1' is not resident (it was never produced)" -- \
    "$REMAT" replay graphs/mlp2.json "$T/no_fwd_v1.json" --json
expect replay_broken_text 1 "no_fwd_v1.json: instruction 3 (FWD h2): input 'v1' is not resident" -- \
    "$REMAT" replay graphs/mlp2.json "$T/no_fwd_v1.json"
sed 's/^  "FREE h1",$/  "FREE h1", "FREE h1",/' "$T/sa.json" >"$T/double_free.json"
expect replay_double_free 1 '"instruction": "FREE h1", "error": "instruction 3 (FREE h1): '"'h1'"' is not resident (double free)"' -- \
    "$REMAT" replay graphs/mlp2.json "$T/double_free.json" --json
grep -v '"BWD h1"' "$T/sa.json" >"$T/no_bwd_h1.json"
expect replay_missing_bwd 1 "gradient of param 'w1' is incomplete" -- \
    "$REMAT" replay graphs/mlp2.json "$T/no_bwd_h1.json" --json

# Plans that cannot be used: exit 3, naming the place or both graphs.
expect replay_other_graph 3 "this plan was made for graph 'mlp2'" -- "$REMAT" replay graphs/mlp423.json "$T/sa.json"
expect replay_other_graph_names_it 3 "not for graph 'mlp423'" -- "$REMAT" replay graphs/mlp423.json "$T/sa.json"
sed 's/^  "FREE h1",$/  "FROB h1",/' "$T/sa.json" >"$T/unknown_kind.json"
expect replay_unknown_instruction 3 "schedule[2]: unknown instruction 'FROB h1'" -- \
    "$REMAT" replay graphs/mlp2.json "$T/unknown_kind.json"
sed 's/^  "FWD h2",$/  "FWD h9",/' "$T/sa.json" >"$T/unknown_op.json"
expect replay_unknown_op 3 "schedule[4]: unknown op id 'h9'" -- "$REMAT" replay graphs/mlp2.json "$T/unknown_op.json"
expect replay_missing_plan 3 "cannot open" -- "$REMAT" replay graphs/mlp2.json "$T/nope.json"
expect replay_too_many_args 2 "expected GRAPH [PLAN]" -- "$REMAT" replay graphs/mlp2.json "$T/sa.json" extra

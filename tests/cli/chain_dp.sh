# chain_dp.sh - `remat plan --strategy chain-dp`: plans within the budget
# whose schedules replay (and rebuild bit for bit numerically), its
# parameters, the discretization options and their errors, and an
# infeasible budget that names one chain-dp meets.

# transformer4's store-all activation peak is 10766340 B: half of it.
T4=graphs/transformer4.json
T4_HALF=5383170

expect chain_dp_fits 0 "budget (activation) 5.13 MiB (5383170 B): met" -- \
    "$REMAT" plan "$T4" --strategy chain-dp --activation-budget "$T4_HALF"
expect chain_dp_params 0 '"plan": "dp", "stages": 12, "blocks": 12' -- \
    "$REMAT" plan "$T4" --strategy chain-dp --activation-budget "$T4_HALF"
expect chain_dp_json 0 '"strategy": "chain-dp", "params": {"plan": "store-tapes"' -- \
    "$REMAT" plan graphs/mlp2.json --strategy chain-dp --json
expect chain_dp_total_budget 0 "budget (total) 40.00 MiB (41943040 B): met" -- \
    "$REMAT" plan graphs/hetchain12.json --strategy chain-dp --budget 40MiB

# No budget, or one every tape fits in: nothing is recomputed.
expect chain_dp_no_budget 0 "recompute 0 (overhead 0.00%)" -- "$REMAT" plan "$T4" --strategy chain-dp
expect chain_dp_at_store_all 0 "recompute 0 (overhead 0.00%)" -- \
    "$REMAT" plan "$T4" --strategy chain-dp --activation-budget 10766340

# The discretization: slots or a step in bytes, both still within budget.
expect chain_dp_slots 0 '"slots": 16,' -- \
    "$REMAT" plan "$T4" --strategy chain-dp --dp-slots 16 --activation-budget "$T4_HALF"
expect chain_dp_step 0 '"step_bytes": 65536,' -- \
    "$REMAT" plan "$T4" --strategy chain-dp --dp-step 64KiB --activation-budget "$T4_HALF"
expect chain_dp_step_too_small 2 "chain-dp: a step of 1 B gives" -- \
    "$REMAT" plan "$T4" --strategy chain-dp --dp-step 1 --activation-budget "$T4_HALF"
# The library names its parameters (dp_step, dp_slots); the command line
# tells them as the flags the user typed.
expect chain_dp_step_names_flags 2 "use a larger --dp-step or fewer --dp-slots" -- \
    "$REMAT" plan "$T4" --strategy chain-dp --dp-step 1 --activation-budget "$T4_HALF"
# ... but only in argument and budget errors: a graph's own ids stay as written.
printf '{"format": "remat-graph", "version": 1, "inputs": [{"id": "x", "bytes": 4}],\n "ops": [{"id": "a", "op": "f", "inputs": ["dp_step"], "bytes": 4, "flops": 1}], "outputs": ["a"]}' >"$T/dp_id.json"
expect chain_dp_graph_ids_unmapped 3 "ops[0].inputs[0]: unknown tensor id 'dp_step'" -- "$REMAT" lifetimes "$T/dp_id.json"
expect chain_dp_slots_not_a_number 2 "--dp-slots: 'x' is not a whole number" -- \
    "$REMAT" plan "$T4" --strategy chain-dp --dp-slots x --activation-budget "$T4_HALF"

# The plan file replays valid, and numerically every rebuild is bit-exact.
"$REMAT" plan "$T4" --strategy chain-dp --activation-budget "$T4_HALF" -o "$T/chain_dp.json" >/dev/null
expect chain_dp_plan_replays 0 "is valid" -- "$REMAT" replay "$T4" "$T/chain_dp.json"
expect chain_dp_plan_rebuilds_exactly 0 "0 mismatches (verified)" -- \
    "$REMAT" replay "$T4" "$T/chain_dp.json" --numeric

# Cuts on one storage (a view of the previous cut) merge into one stage.
expect chain_dp_merges_views 0 '"merged_cuts": 1,' -- "$REMAT" plan graphs/mlp2.json --strategy chain-dp

# A long chain is planned on at most 128 stages.
"$REMAT" gen chain --ops 300 --random --seed 3 -o "$T/chain300.json"
expect chain_dp_coarsens 0 '"stages": 128, "blocks": 300, "merged_cuts": 172, "coarsened": true' -- \
    "$REMAT" plan "$T/chain300.json" --strategy chain-dp --activation-budget 100MiB

# Infeasible: exit 4, naming the smallest peak chain-dp reaches, which it meets.
expect chain_dp_infeasible 4 "strategy chain-dp cannot meet the activation budget of 1 B" -- \
    "$REMAT" plan "$T4" --strategy chain-dp --activation-budget 1
chain_dp_named_budget() {
    named=$("$REMAT" plan "$1" --strategy chain-dp "$2" 1 2>&1 | sed -n 's/.*[( ]\([0-9][0-9]*\) B)*$/\1/p')
    [ -n "$named" ] && "$REMAT" plan "$1" --strategy chain-dp "$2" "$named"
}
for g in transformer4 bnview unet3 hetchain12; do
    expect "chain_dp_meets_named_activation_budget_$g" 0 "met" -- \
        chain_dp_named_budget "graphs/$g.json" --activation-budget
    expect "chain_dp_meets_named_total_budget_$g" 0 "met" -- chain_dp_named_budget "graphs/$g.json" --budget
done
expect chain_dp_listed 2 ", chain-dp" -- "$REMAT" plan "$T4" --strategy nope

# exact.sh - `remat plan --strategy exact`: proved optimal plans on a small
# graph (total and activation budgets), clean JSON (GLPK prints nothing), a
# plan file that replays, an infeasible budget that names the proved
# minimum, the time limit option, graphs too large for the program.

# A remat built without GLPK says so, and the rest is skipped.
if "$REMAT" plan graphs/mlp2.json --strategy exact --budget 100KiB 2>&1 | grep -q "needs GLPK"; then
    expect exact_needs_glpk 3 "strategy exact needs GLPK" -- \
        "$REMAT" plan graphs/mlp2.json --strategy exact --budget 100KiB
else

# hetchain12's store-all peak is 47474524 B: 90% of it.
HC=graphs/hetchain12.json
HC_90=42727071

expect exact_optimal 0 '"status": "optimal", "objective": 361471180, "bound": 361471180, "gap": 0' -- \
    "$REMAT" plan "$HC" --strategy exact --budget "$HC_90"
expect exact_budget_met 0 "budget (total) 40.75 MiB (42727071 B): met" -- \
    "$REMAT" plan "$HC" --strategy exact --budget "$HC_90"
expect exact_activation_budget 0 '"status": "optimal"' -- \
    "$REMAT" plan "$HC" --strategy exact --activation-budget 30000000
expect exact_time_limit_in_params 0 '"time_limit": 2.5' -- \
    "$REMAT" plan "$HC" --strategy exact --budget "$HC_90" --time-limit 2.5
expect exact_time_limit_bad 2 "--time-limit: '0' is not a positive number" -- \
    "$REMAT" plan "$HC" --strategy exact --budget "$HC_90" --time-limit 0

# --json is one JSON document from its first byte: nothing from GLPK before it.
"$REMAT" plan "$HC" --strategy exact --budget "$HC_90" --json >"$T/exact.json" 2>/dev/null
expect exact_json_clean 0 '{"strategy": "exact", "params": {"status": "optimal"' -- head -c 60 "$T/exact.json"

# The plan file replays valid within the budget.
"$REMAT" plan "$HC" --strategy exact --budget "$HC_90" -o "$T/exact_plan.json" >/dev/null
expect exact_plan_replays 0 "is valid" -- "$REMAT" replay "$HC" "$T/exact_plan.json"

# Without a budget, or when store-all fits, nothing needs solving.
expect exact_no_budget 0 '"source": "no budget: store-all"' -- "$REMAT" plan graphs/mlp2.json --strategy exact
expect exact_store_all_fits 0 '"source": "store-all fits"' -- \
    "$REMAT" plan graphs/mlp2.json --strategy exact --budget 1MiB

# mlp2's peak cannot go below store-all's 200 KiB: the error proves it.
expect exact_infeasible 4 "the smallest peak of any schedule in its class is 200.00 KiB (204800 B), proved" -- \
    "$REMAT" plan graphs/mlp2.json --strategy exact --budget 100KiB
expect exact_infeasible_activation 4 "strategy exact cannot meet the activation budget of 1 B" -- \
    "$REMAT" plan graphs/mlp2.json --strategy exact --activation-budget 1

# Every strategy that misses a budget quotes the class's peak floor
# (bound.c). On mlp423 it is relu a1's backward step: a1 itself (its save),
# a1's gradient and h1's gradient, which the step writes, each 16 x 20 f64:
# 3 x 2560 = 7680 B. One byte below, no schedule fits, and the message says
# where; at 7680 B auto fits (the floor is tight); store-all, which misses
# 8000 B, is told how low a schedule could go.
expect floor_proves_infeasible 4 "no schedule that runs each step once, in the graph's order, can (at bwd:a1 every such schedule holds at least 7.50 KiB (7680 B)): the smallest" -- \
    "$REMAT" plan graphs/mlp423.json --strategy auto --activation-budget 7679
expect floor_is_met 0 "forward 13632" -- "$REMAT" plan graphs/mlp423.json --strategy auto --activation-budget 7680
expect floor_below_a_miss 4 "(no schedule that runs each step once, in the graph's order, goes below 7.50 KiB (7680 B), at bwd:a1): the smallest" -- \
    "$REMAT" plan graphs/mlp423.json --strategy store-all --activation-budget 8000

# Past 200 ops the program is refused, not left to run.
"$REMAT" gen chain --ops 201 -o "$T/chain201.json"
expect exact_too_large 3 "the graph has 201 ops; the exact program handles at most 200" -- \
    "$REMAT" plan "$T/chain201.json" --strategy exact --budget 1GiB

# compare at a budget exact proves infeasible: its row shows the smallest
# plan it found, replayed (it once left no plan, and compare replayed an
# empty one and failed the whole table), and a sweep's range starts at the
# smallest replayed peak, not at 0.
expect compare_exact_infeasible_row 0 '"strategy": "exact", "feasible": false, "peak_bytes": ' -- \
    "$REMAT" compare graphs/resnet8.json --budget 5MiB --time-limit 0.3 --json
sweep_start() {
    "$REMAT" compare "$1" --sweep 3 --time-limit 0.2 >"$T/sweep.json" || return 1
    if grep -q '"budgets": \[0,' "$T/sweep.json"; then echo "sweep starts at 0"; else echo "sweep starts above 0"; fi
}
expect compare_sweep_starts_at_a_replayed_peak 0 'sweep starts above 0' -- sweep_start graphs/mlp2.json

fi

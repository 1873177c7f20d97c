# dtr.sh - `remat plan --strategy dtr`: plans within the budget whose
# schedules replay (and rebuild bit for bit numerically), each score, the
# score option's errors, and an infeasible budget that names one dtr meets.

# transformer4's store-all activation peak is 10766340 B: half of it.
T4=graphs/transformer4.json
T4_HALF=5383170

expect dtr_fits 0 "budget (activation) 5.13 MiB (5383170 B): met" -- \
    "$REMAT" plan "$T4" --strategy dtr --activation-budget "$T4_HALF"
expect dtr_default_tries_every_score 0 '"scores_tried": ["h_dtr", "eq", "local"]' -- \
    "$REMAT" plan "$T4" --strategy dtr --activation-budget "$T4_HALF"
for score in h_dtr eq local; do
    expect "dtr_score_$score" 0 "\"score\": \"$score\", \"scores_tried\": [\"$score\"]" -- \
        "$REMAT" plan "$T4" --strategy dtr --dtr-score "$score" --activation-budget "$T4_HALF"
done
expect dtr_score_best 0 '"scores_tried": ["h_dtr", "eq", "local"]' -- \
    "$REMAT" plan "$T4" --strategy dtr --dtr-score best --activation-budget "$T4_HALF"
expect dtr_score_unknown 2 "--dtr-score: 'lru' is not one of h_dtr, eq, local, best" -- \
    "$REMAT" plan "$T4" --strategy dtr --dtr-score lru --activation-budget "$T4_HALF"
expect dtr_score_missing 2 "usage" -- "$REMAT" plan "$T4" --strategy dtr --dtr-score

# The plan file replays valid, and numerically every rebuild is bit-exact.
"$REMAT" plan "$T4" --strategy dtr --activation-budget "$T4_HALF" -o "$T/dtr.json" >/dev/null
expect dtr_plan_replays 0 "is valid" -- "$REMAT" replay "$T4" "$T/dtr.json"
expect dtr_plan_rebuilds_exactly 0 "0 mismatches (verified)" -- "$REMAT" replay "$T4" "$T/dtr.json" --numeric
expect dtr_json 0 '"strategy": "dtr"' -- "$REMAT" plan "$T4" --strategy dtr --activation-budget "$T4_HALF" --json

# A total budget, and a budget at the store-all peak: nothing recomputed.
expect dtr_total_budget 0 "budget (total)" -- "$REMAT" plan graphs/hetchain12.json --strategy dtr --budget 40MiB
expect dtr_at_store_all 0 "recompute 0 (overhead 0.00%)" -- \
    "$REMAT" plan "$T4" --strategy dtr --activation-budget 10766340
expect dtr_no_budget 0 "recompute 0 (overhead 0.00%)" -- "$REMAT" plan graphs/bnview.json --strategy dtr

# Infeasible: exit 4, naming the smallest peak dtr reaches, which it meets.
expect dtr_infeasible 4 "strategy dtr cannot meet the activation budget of 1 B" -- \
    "$REMAT" plan "$T4" --strategy dtr --activation-budget 1
dtr_named_budget() {
    named=$("$REMAT" plan "$1" --strategy dtr --activation-budget 1 2>&1 | sed -n 's/.*[( ]\([0-9][0-9]*\) B)*$/\1/p')
    [ -n "$named" ] && "$REMAT" plan "$1" --strategy dtr --activation-budget "$named"
}
for g in transformer4 bnview unet3; do
    expect "dtr_meets_named_budget_$g" 0 "met" -- dtr_named_budget "graphs/$g.json"
done

# Views and multi-output ops; dtr among the known strategies.
expect dtr_views_and_multi_output 0 "met" -- "$REMAT" plan graphs/bnview.json --strategy dtr --activation-budget 30KiB
expect dtr_listed 2 ", dtr" -- "$REMAT" plan "$T4" --strategy nope

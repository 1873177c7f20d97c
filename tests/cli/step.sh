# step.sh - `remat step`: real training steps of mlp423 (the specification's
# 423-parameter MLP, Adam in binary64) under store-all and under plans, the
# measured peak beside the accounted one, bit-identical states with and
# without recomputation, resumption from a state file, data files, and the
# errors (exit 2 for options, 3 for graphs and files that cannot be used).
S="$REMAT step"
M=graphs/mlp423.json
ADAM="--optimizer adam --lr 0.01 --seed 1"
expect step_help 0 "usage: remat step GRAPH [PLAN] --optimizer" -- $S --help
expect step_in_help 0 "step" -- "$REMAT" help

# Store-all: 14608 B replayed + 6768 B of Adam moments (two f64 arrays of
# 423) = 21376 B, measured by the trainer's own allocator.
expect step_mlp423 0 "measured 21376 B by the trainer's allocator, accounted 21376 B (remat replay 14608 B + 6768 B of adam optimizer state from the ledger): equal" -- \
    $S $M $ADAM --steps 3
expect step_mlp423_header 0 "423 f64 parameters (423 trainable)" -- $S $M $ADAM
expect step_mlp423_task 0 "synthetic regression (seed 1): x [16, 2] -> y [16, 3]" -- $S $M $ADAM
expect step_sgd_no_state 0 "(remat replay 14608 B + 0 B of sgd optimizer state" -- $S $M --optimizer sgd --seed 1
expect step_momentum_state 0 "+ 3384 B of momentum optimizer state" -- $S $M --optimizer momentum --seed 1

# Plans: sqrt(n) rebuilds one tensor per step, revolve two; both end where
# store-all ends, bit for bit, and their peaks are measured as replayed.
"$REMAT" plan $M --strategy sqrtn -o "$T/sqrtn.json" >/dev/null 2>&1
"$REMAT" plan $M --strategy revolve -o "$T/revolve.json" >/dev/null 2>&1
expect step_sqrtn_recompute 0 "1 tensor rebuilt per step (5 in all), each bit-identical to its first computation" -- \
    $S $M "$T/sqrtn.json" $ADAM --steps 5
expect step_sqrtn_same_state 0 "store-all  parameters and optimizer state bit-identical to the plan's after every step" -- \
    $S $M "$T/sqrtn.json" $ADAM --steps 5
expect step_revolve_peak 0 "measured 23976 B by the trainer's allocator, accounted 23976 B (remat replay 17208 B" -- \
    $S $M "$T/revolve.json" $ADAM --steps 2
expect step_revolve_time 0 "time       median per step over 2: plan" -- $S $M "$T/revolve.json" $ADAM --steps 2

# It learns: the regression's loss starts near 0.65 and falls below 0.01.
expect step_learns 0 "learned" -- sh -c "$S $M $ADAM --steps 300 --every 299 | awk '
    /^ +1  / { first = \$2 } /^ +300  / { last = \$2 }
    END { if (first > 0.3 && last < 0.01) print \"learned\"; else print \"first\", first, \"last\", last }'"

# Resumption: 3 + 2 steps from a state file end in the state of 5 steps,
# byte for byte (the file prints every float exactly).
$S $M "$T/revolve.json" $ADAM --steps 5 -o "$T/s5.json" >/dev/null 2>&1
$S $M $ADAM --steps 3 -o "$T/s3.json" >/dev/null 2>&1
expect step_resume_header 0 "starting at step 3 (resumed)" -- $S $M --state "$T/s3.json" --seed 1 --steps 2 -o "$T/r5.json"
expect step_resume_equal 0 "same" -- sh -c "cmp '$T/s5.json' '$T/r5.json' && echo same"
expect step_state_format 0 '"format": "remat-state", "version": 1' -- cat "$T/s5.json"
expect step_state_step 0 '"step": 5,' -- cat "$T/s5.json"
expect step_state_moments 0 '"exp_avg_sq": [' -- cat "$T/s5.json"
expect step_resume_keeps_lr 0 "optimizer adam: lr 0.01" -- $S $M --state "$T/s3.json" --seed 1
expect step_resume_overrides_lr 0 "optimizer adam: lr 0.005" -- $S $M --state "$T/s3.json" --seed 1 --lr 0.005
expect step_resume_wrong_optimizer 2 "the state holds adam state" -- $S $M --state "$T/s3.json" --seed 1 --optimizer momentum
sed 's/"step": 3,/"step": 3, "bogus": 1,/' "$T/s3.json" >"$T/bad_state.json"
expect step_bad_state 3 "unknown field 'bogus'" -- $S $M --state "$T/bad_state.json" --seed 1
expect step_missing_state 3 "nope.json" -- $S $M --state "$T/nope.json" --seed 1

# A data file: two batches of mlp423's x [16, 2] and y [16, 3].
{
    printf '{"format": "remat-data", "version": 1, "batches": ['
    for b in 0 1; do
        [ $b -eq 1 ] && printf ', '
        printf '{"x": ['
        i=0; while [ $i -lt 32 ]; do [ $i -gt 0 ] && printf ', '; printf '0.%d' $(( (i * 7 + b) % 10 )); i=$((i + 1)); done
        printf '], "y": ['
        i=0; while [ $i -lt 48 ]; do [ $i -gt 0 ] && printf ', '; printf -- '-0.%d' $(( (i * 3 + b) % 10 )); i=$((i + 1)); done
        printf ']}'
    done
    printf ']}\n'
} >"$T/data.json"
expect step_data 0 "data       $T/data.json: 2 batches, batch k = step k mod 2" -- $S $M --optimizer adam --data "$T/data.json" --steps 3
expect step_data_peak 0 "accounted 21376 B" -- $S $M --optimizer adam --data "$T/data.json" --steps 2
sed 's/"y": \[/"y": [1, /' "$T/data.json" >"$T/bad_data.json"
expect step_bad_data 3 "batches[0].y: more than the tensor's 48 elements" -- $S $M --optimizer adam --data "$T/bad_data.json"

# Graphs that cannot be executed (exit 3).
expect step_no_shapes 3 "input 'x' has no shape" -- $S graphs/mlp2.json --optimizer sgd --seed 1
expect step_foreign_op 3 "which remat cannot execute (executable ops: linear, matmul" -- \
    $S graphs/transformer4.json --optimizer sgd --seed 1

# Options (exit 2).
expect step_no_optimizer 2 "give --optimizer sgd|momentum|adam|adamw" -- $S $M --seed 1
expect step_no_data 2 "give --seed S (synthetic data) or --data FILE" -- $S $M --optimizer adam
expect step_lion 2 "optimizer lion is budgeted by the ledger but not executed" -- $S $M --optimizer lion --seed 1
expect step_bad_optimizer 2 "--optimizer: unknown optimizer 'rmsprop'" -- $S $M --optimizer rmsprop --seed 1
expect step_bad_lr 2 "--lr: 'fast' is not a non-negative number" -- $S $M --optimizer adam --lr fast --seed 1
expect step_bad_betas 2 "--betas: '0.9' is not two numbers" -- $S $M --optimizer adam --betas 0.9 --seed 1
expect step_bad_steps 2 "--steps: 0 is out of range (1 to" -- $S $M --optimizer adam --seed 1 --steps 0
expect step_bad_seed 2 "--seed: 'x' is not a whole number" -- $S $M --optimizer adam --seed x
expect step_extra_arg 2 "expected GRAPH [PLAN]" -- $S $M a b --optimizer adam --seed 1
"$REMAT" plan graphs/mlp2.json --strategy store-all -o "$T/mlp2plan.json" >/dev/null 2>&1
expect step_foreign_plan 3 "this plan was made for graph 'mlp2'" -- $S $M "$T/mlp2plan.json" $ADAM

# --record-durations: the graph with each op's median kernel times, which
# the step-time model then uses for every op (a time is not pinned here;
# tests/check_durations.c checks the figures are the ones measured).
expect step_durations 0 "durations  6 ops, median of 3 steps" -- $S $M --optimizer sgd --seed 1 --steps 3 --every 0 --record-durations "$T/mlp423.timed.json"
expect step_durations_used 0 "measured durations for 6 forward and 6 backward of 6 ops" -- "$REMAT" replay "$T/mlp423.timed.json" --device a100-sxm-80gb
expect step_durations_note 0 "remat step: median of 3 steps' kernel times" -- cat "$T/mlp423.timed.json"
"$REMAT" plan $M --strategy auto --activation-budget 7680 -o "$T/mlp423.plan.json" >/dev/null 2>&1
expect step_durations_plan 0 "durations  6 ops, median of 2 steps" -- $S $M "$T/mlp423.plan.json" --optimizer sgd --seed 1 --steps 2 --every 0 --record-durations "$T/mlp423.timed2.json"
expect step_durations_bad_out 5 "" -- $S $M --optimizer sgd --seed 1 --steps 1 --every 0 --record-durations "$T/no/such/dir/x.json"

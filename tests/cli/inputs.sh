# inputs.sh - inputs held to what they claim (issue 19): plan files as
# strict as graphs (trailing text, their static offsets), a loss that is a
# parameter, saves of tensors produced later, errors that name their file;
# and options that apply to what was asked, with range errors that say so.
I="$T/inputs"
mkdir -p "$I"
py() { /usr/bin/python3 -c "$@"; }

# ---- plan files -------------------------------------------------------
"$REMAT" plan graphs/transformer4.json --strategy revolve --activation-budget 2.5MiB -o "$I/p.json" >/dev/null
expect in_plan_reads 0 "is valid" -- "$REMAT" replay graphs/transformer4.json "$I/p.json"
{ cat "$I/p.json"; echo '{"again": 1}'; } >"$I/trailing.json"
lines=$(wc -l <"$I/p.json")
expect in_plan_trailing 3 "trailing.json:$((lines + 1)):1: unexpected text after the JSON value" -- \
    "$REMAT" replay graphs/transformer4.json "$I/trailing.json"

# The offsets the writer made are non-overlapping by a brute-force check of
# our own (every pair alive at one instruction: first..free inclusive, -1
# resident from the start, null never freed) and inside the arena.
expect in_offsets_bruteforce 0 "disjoint" -- py '
import json, sys
d = json.load(open(sys.argv[1])); o = d["offsets"]; iv = o["intervals"]; n = len(d["schedule"])
span = [(v["instruction"], n if v["free"] is None else v["free"], v["offset"], v["offset"] + v["bytes"]) for v in iv]
assert all(e <= o["arena_bytes"] for _, _, _, e in span)
bad = [(i, j) for i in range(len(span)) for j in range(i) if span[i][0] <= span[j][1] and span[j][0] <= span[i][1]
       and span[i][2] < span[j][3] and span[j][2] < span[i][3]]
print("disjoint" if not bad else bad[:3])' "$I/p.json"

# Broken on purpose, each found by the same brute force: two intervals alive
# together made to share an address; one moved past the arena; one freed
# outside the schedule.
py '
import json, sys
d = json.load(open(sys.argv[1])); iv = d["offsets"]["intervals"]; n = len(d["schedule"])
end = lambda v: n if v["free"] is None else v["free"]
i, j = next((i, j) for i in range(len(iv)) for j in range(i) if iv[i]["instruction"] <= end(iv[j])
            and iv[j]["instruction"] <= end(iv[i]) and iv[i]["offset"] != iv[j]["offset"])
iv[i]["offset"] = iv[j]["offset"]
json.dump(d, open(sys.argv[2], "w"))
print(i, j)' "$I/p.json" "$I/overlap.json" >"$I/overlap.ij"
ij=$(cat "$I/overlap.ij")
expect in_offsets_overlap 3 "shares bytes with offsets.intervals[" -- "$REMAT" replay graphs/transformer4.json "$I/overlap.json"
expect in_offsets_overlap_names 0 "names the pair" -- sh -c "'$REMAT' replay graphs/transformer4.json '$I/overlap.json' 2>&1 |
    grep -qE 'intervals\[(${ij% *}|${ij#* })\].*intervals\[(${ij% *}|${ij#* })\]' && echo 'names the pair'"
py '
import json, sys
d = json.load(open(sys.argv[1])); d["offsets"]["intervals"][3]["offset"] = d["offsets"]["arena_bytes"]
json.dump(d, open(sys.argv[2], "w"))' "$I/p.json" "$I/outside.json"
expect in_offsets_outside 3 "offsets.intervals[3]: [" -- "$REMAT" replay graphs/transformer4.json "$I/outside.json"
expect in_offsets_outside_arena 3 "lies outside the arena" -- "$REMAT" replay graphs/transformer4.json "$I/outside.json"
py '
import json, sys
d = json.load(open(sys.argv[1])); d["offsets"]["intervals"][5]["free"] = len(d["schedule"])
json.dump(d, open(sys.argv[2], "w"))' "$I/p.json" "$I/late.json"
expect in_offsets_free_range 3 "offsets.intervals[5]: free: must be null (never) or an instruction index" -- \
    "$REMAT" replay graphs/transformer4.json "$I/late.json"

# An invalid schedule names the plan file; so do audit, trace, alloc.
py '
import json, sys
d = json.load(open(sys.argv[1])); d["schedule"].insert(0, "BWD " + d["schedule"][0].split(" ", 1)[1]); del d["offsets"]
json.dump(d, open(sys.argv[2], "w"))' "$I/p.json" "$I/badsched.json"
for cmd in replay audit alloc; do
    expect "in_sched_names_file_$cmd" 1 "badsched.json: instruction 0 (BWD" -- "$REMAT" $cmd graphs/transformer4.json "$I/badsched.json"
done
expect in_sched_names_file_trace 1 "badsched.json: instruction 0 (BWD" -- \
    "$REMAT" trace graphs/transformer4.json --plan "$I/badsched.json" -o "$I/t.json"

# ---- graphs -----------------------------------------------------------
printf '{"format": "remat-graph", "version": 1, "params": [{"id": "w", "bytes": 64}],
 "inputs": [{"id": "x", "bytes": 64}],
 "ops": [{"id": "h", "op": "mul", "inputs": ["x", "w"], "bytes": 64, "flops": 16}], "outputs": ["w"]}\n' >"$I/lossparam.json"
# A param as the loss: accepted as graphs/README.md says (no backward
# step, so nothing to rematerialize), with a warning naming it.
expect in_loss_param 0 "warning: $I/lossparam.json: outputs[0]: 'w' is a param" -- "$REMAT" lifetimes "$I/lossparam.json"
expect in_loss_param_no_bwd 0 "0 backward steps" -- "$REMAT" lifetimes "$I/lossparam.json"
printf '{"format": "remat-graph", "version": 1, "inputs": [{"id": "x", "bytes": 64}], "params": [{"id": "w", "bytes": 64}],
 "ops": [{"id": "h1", "op": "mul", "inputs": ["x", "w"], "bytes": 64, "flops": 16, "saves": ["h2"]},
         {"id": "h2", "op": "relu", "inputs": ["h1"], "bytes": 64, "flops": 16},
         {"id": "loss", "op": "sum", "inputs": ["h2"], "bytes": 4, "flops": 16, "saves": []}], "outputs": ["loss"]}\n' >"$I/late_save.json"
expect in_late_save_warns 0 "late_save.json: ops[0].saves[0]: op 'h1' saves 'h2', which a later op produces" -- \
    "$REMAT" lifetimes "$I/late_save.json"
# h2 is kept from its birth to bwd:h1, the last backward step.
expect in_late_save_kept 0 '"id": "h2"' -- sh -c "'$REMAT' lifetimes --json '$I/late_save.json' 2>/dev/null | grep -o '\"id\": \"h2\"[^}]*\"last_bwd_use\": \"bwd:h1\"'"
expect in_bundled_no_warning 0 "quiet" -- sh -c "for g in graphs/*.json; do '$REMAT' lifetimes \$g 2>&1 >/dev/null; done | grep -q . || echo quiet"

# ---- options ----------------------------------------------------------
P="$REMAT plan graphs/transformer4.json"
expect opt_linearized_revolve 2 "--linearized does not apply to --strategy revolve (it applies to sqrtn chen-greedy)" -- \
    $P --strategy revolve --linearized --budget 16MiB
expect opt_linearized_auto 2 "--linearized does not apply to --strategy auto" -- $P --linearized --budget 16MiB
expect opt_dtr_score_sqrtn 2 "--dtr-score does not apply to --strategy sqrtn (it applies to auto dtr)" -- \
    $P --strategy sqrtn --dtr-score eq --budget 16MiB
expect opt_time_limit_dtr 2 "--time-limit does not apply to --strategy dtr" -- $P --strategy dtr --time-limit 2 --budget 16MiB
expect opt_segments_revolve 2 "--segments does not apply to --strategy revolve" -- $P --strategy revolve --segments 4
expect opt_never_recompute 2 "--never-recompute does not apply to --strategy exact" -- $P --strategy exact --never-recompute matmul
# Which strategies read an option is the strategy table's: a choice given
# its non-default value is refused with the rest; auto reads what its
# candidates read (dtr's score), and budget_mode, which no strategy lists,
# every strategy reads.
expect opt_chen_reading_revolve 2 "--chen-reading does not apply to --strategy revolve (it applies to auto sqrtn chen-greedy)" -- \
    $P --strategy revolve --chen-reading paper --budget 16MiB
expect opt_dtr_score_chain_dp 2 "--dtr-score does not apply to --strategy chain-dp (it applies to auto dtr)" -- \
    $P --strategy chain-dp --dtr-score local --budget 16MiB
expect opt_dtr_score_auto_ok 0 '"candidates": [' -- "$REMAT" plan graphs/mlp2.json --dtr-score eq --budget 1MiB
expect opt_budget_mode_any 0 "static offset plan; the budget caps it" -- $P --strategy revolve --budget-mode arena --budget 16MiB
expect opt_dp_both 2 "give one of --dp-step and --dp-slots, not both" -- $P --strategy chain-dp --dp-step 1MiB --dp-slots 8
expect opt_dp_auto_ok 0 "met" -- $P --dp-slots 16 --budget 16MiB
expect opt_arena_without_budget 2 "--budget-mode arena needs a budget" -- $P --budget-mode arena
expect opt_budget_twice 2 "--budget given twice (give it once)" -- $P --budget 16MiB --budget 17MiB
expect opt_act_budget_twice 2 "--activation-budget given twice" -- $P --activation-budget 1MiB --activation-budget 2MiB
expect opt_both_budgets 2 "give one of --budget and --activation-budget, not both" -- $P --budget 16MiB --activation-budget 2MiB
expect opt_compare_budget_twice 2 "--budget given twice" -- "$REMAT" compare graphs/mlp2.json --budget 1MiB --budget 2MiB
expect opt_trace_budget_twice 2 "--budget given twice" -- "$REMAT" trace graphs/mlp2.json --budget 1MiB --budget 2MiB -o "$I/x.json"
expect opt_sweep_budget 2 "--budget does not apply to --sweep" -- "$REMAT" compare graphs/mlp2.json --sweep 3 --budget 1MiB
expect opt_sweep_act_budget 2 "--activation-budget B does not apply to --sweep" -- \
    "$REMAT" compare graphs/mlp2.json --sweep 3 --activation-budget 1MiB
expect opt_trace_format_name 2 "--format csv does not match -o $I/x.svg" -- \
    "$REMAT" trace graphs/mlp2.json --format csv -o "$I/x.svg"
expect opt_trace_chrome_json_ok 0 '"traceEvents"' -- sh -c "'$REMAT' trace graphs/mlp2.json --format chrome -o '$I/c.json' && cat '$I/c.json'"
expect opt_range_segments 2 "--segments: 99999999999 is out of range (at most 4294967295)" -- \
    $P --strategy sqrtn --segments 99999999999
expect opt_range_top 2 "--top: 5000 is out of range (1 to 1000)" -- "$REMAT" audit graphs/mlp2.json --top 5000
expect opt_range_sweep 2 "--sweep: 1 is out of range (2 to 1000)" -- "$REMAT" compare graphs/mlp2.json --sweep 1
expect opt_range_width 2 "--width: 0 is out of range (1 to 20000)" -- "$REMAT" trace graphs/mlp2.json --width 0 -o "$I/x.svg"
expect opt_range_steps 2 "--steps: 99999999999999999999999 is out of range" -- \
    "$REMAT" step graphs/mlp423.json --optimizer sgd --seed 1 --steps 99999999999999999999999
expect opt_not_number 2 "--top: 'x' is not a whole number" -- "$REMAT" audit graphs/mlp2.json --top x
expect opt_gen_max 2 "--ops must be between 1 and 10000000" -- "$REMAT" gen chain --ops 10000001
expect opt_gen_max_resnet 2 "--blocks: 14000008 ops is out of range (at most 10000000 ops" -- \
    "$REMAT" gen resnet --blocks 2000000
expect opt_gen_help_max 0 "at most 10^7 ops" -- "$REMAT" gen --help

# ---- whole messages ---------------------------------------------------
# compare's row carries the strategy's whole message, as plan prints it
# (it was cut at 160 characters, losing the figures that come last).
"$REMAT" gen chain --ops 250 -o "$I/c250.json"
msg=$("$REMAT" plan "$I/c250.json" --strategy exact --budget 100MiB 2>&1 | sed -n 's/^remat: //p')
expect msg_compare_whole 0 "$msg" -- "$REMAT" compare "$I/c250.json" --budget 100MiB

# ---- plan: a logical budget under the static arena is said ------------
# dtr at its own peak: the static offset plan of its schedule needs more
# (the arena written into the plan file, which the warning must quote).
"$REMAT" plan graphs/transformer4.json --strategy dtr --budget 16677892 -o "$I/dtr.json" 2>"$I/dtr.err" >/dev/null
arena=$(py 'import json, sys; print(json.load(open(sys.argv[1]))["offsets"]["arena_bytes"])' "$I/dtr.json")
expect plan_arena_warns 0 "warning: the static arena of this plan (remat alloc) is" -- cat "$I/dtr.err"
expect plan_arena_figure 0 "($arena B), over the total budget of 15.91 MiB (16677892 B)" -- cat "$I/dtr.err"
expect plan_arena_warns_without_o 0 "($arena B), over the total budget" -- \
    sh -c "'$REMAT' plan graphs/transformer4.json --strategy dtr --budget 16677892 2>&1 >/dev/null"
# sqrtn at 16 MiB: its arena (README's compare table) is within the budget.
expect plan_arena_quiet_when_it_fits 0 "quiet" -- \
    sh -c "'$REMAT' plan graphs/transformer4.json --strategy sqrtn --budget 16MiB 2>&1 >/dev/null | grep -q warning || echo quiet"

# ---- progress: on a terminal only ----------------------------------------
# Through script(1), stderr is a TTY: the progress line names auto's
# candidates; redirected to a file, stderr gets none of it.
if command -v script >/dev/null 2>&1; then
    script -qc "'$REMAT' plan graphs/transformer4.json --budget 16MiB >/dev/null" "$I/tty.log" >/dev/null 2>&1
    expect progress_on_tty 0 "remat plan: revolve" -- cat "$I/tty.log"
fi
expect progress_not_in_logs 0 "silent" -- \
    sh -c "'$REMAT' plan graphs/transformer4.json --budget 16MiB 2>&1 >/dev/null | grep -q . || echo silent"
expect opt_time_limit_inf 2 "--time-limit: 'inf' is not a positive number" -- $P --strategy exact --time-limit inf

# Sizes whose sum overflows 2^64: the message names the graph file.
printf '{"format": "remat-graph", "version": 1, "inputs": [{"id": "x", "bytes": "18446744073709551615"}],
 "params": [{"id": "w", "bytes": "18446744073709551615"}],
 "ops": [{"id": "h", "op": "mul", "inputs": ["x", "w"], "bytes": "18446744073709551615", "flops": 1}], "outputs": ["h"]}\n' >"$I/overflow.json"
for cmd in replay audit alloc; do
    expect "in_overflow_names_file_$cmd" 3 "overflow.json: instruction 0: live bytes exceed 2^64-1" -- "$REMAT" $cmd "$I/overflow.json"
done
expect in_overflow_names_file_plan 3 "overflow.json: auto: strategy store-all: instruction 0: live bytes exceed" -- \
    "$REMAT" plan "$I/overflow.json"

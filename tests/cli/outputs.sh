# outputs.sh - where documents go (issue 19): -o never replaces what is not
# a regular file (a device, a FIFO), follows symbolic links and replaces
# their target in its own directory, -o - leaves stdout to the document,
# -o '' is a usage error, every command notices a failed stdout, and every
# JSON document is valid whatever the graph's strings hold.
G=graphs/mlp2.json
O="$T/outputs"
mkdir -p "$O"
json_ok() { /usr/bin/python3 -c 'import json, sys; json.load(open(sys.argv[1], encoding="utf-8")); print("valid json")' "$1"; }

# A FIFO is written in place: a reader gets the document and the FIFO stays.
mkfifo "$O/fifo"
cat "$O/fifo" >"$O/from_fifo" &
reader=$!
"$REMAT" lifetimes --json -o "$O/fifo" $G
wait $reader
"$REMAT" lifetimes --json -o "$O/direct.json" $G
expect out_fifo_is_fifo 0 "fifo kept" -- sh -c "test -p '$O/fifo' && echo 'fifo kept'"
expect out_fifo_content 0 "same" -- sh -c "cmp '$O/from_fifo' '$O/direct.json' && echo same"

# A character device: one made here when we may (root, mknod allowed), else
# /dev/null itself, which must still be a character device afterwards.
if mknod "$O/null" c 1 3 2>/dev/null; then DEV="$O/null"; else DEV=/dev/null; fi
expect out_device_write 0 "written" -- sh -c "'$REMAT' lifetimes --json -o '$DEV' $G && echo written"
expect out_device_kept 0 "still a device" -- sh -c "test -c '$DEV' && echo 'still a device'"
# (Only when /dev/null is a device to begin with: on a shared machine an old
# remat elsewhere may have replaced it already.)
if [ -c /dev/null ]; then
    expect out_dev_null_kept 0 "still a device" -- sh -c "'$REMAT' plan $G -o /dev/null >/dev/null && test -c /dev/null && echo 'still a device'"
fi

# A symbolic link into another directory: the link stays a link, its target
# is replaced, and no temporary file is left in either directory.
mkdir -p "$O/a" "$O/b"
echo old >"$O/b/real.json"
ln -s ../b/real.json "$O/a/link.json"
"$REMAT" lifetimes --json -o "$O/a/link.json" $G
expect out_symlink_kept 0 "still a link" -- sh -c "test -L '$O/a/link.json' && echo 'still a link'"
expect out_symlink_target 0 "same" -- sh -c "cmp '$O/b/real.json' '$O/direct.json' && echo same"
expect out_symlink_no_temp 0 "temporary files: 0." -- sh -c "echo temporary files: \$(( \$(ls -A '$O/a' | grep -c tmp) + \$(ls -A '$O/b' | grep -c tmp) ))."
# A dangling link: its target is created.
ln -s "$O/b/new.json" "$O/a/dangling.json"
"$REMAT" lifetimes --json -o "$O/a/dangling.json" $G
expect out_dangling_target 0 "same" -- sh -c "test -L '$O/a/dangling.json' && cmp '$O/b/new.json' '$O/direct.json' && echo same"
# A directory is refused, and left alone.
expect out_directory 5 "is a directory" -- "$REMAT" lifetimes --json -o "$O/a" $G

# -o '' is a usage error before any work; so are --output= and --svg ''.
expect out_empty 2 "-o: the output file name is empty" -- "$REMAT" lifetimes $G -o ''
expect out_empty_long 2 "--output: the output file name is empty" -- "$REMAT" plan $G --output=
expect out_empty_svg 2 "--svg: the output file name is empty" -- "$REMAT" compare $G --sweep 3 --svg ''

# -o -: stdout is the document alone, the summary goes to stderr.
"$REMAT" plan graphs/transformer4.json --budget 16MiB -o - >"$O/plan_stdout.json" 2>"$O/plan_stderr"
expect out_dash_plan_json 0 "valid json" -- json_ok "$O/plan_stdout.json"
expect out_dash_plan_format 0 '{"format": "remat-plan"' -- head -c 30 "$O/plan_stdout.json"
expect out_dash_plan_summary 0 "peak " -- cat "$O/plan_stderr"
"$REMAT" step graphs/mlp423.json --optimizer adam --seed 1 --steps 2 -o - >"$O/state_stdout.json" 2>"$O/state_stderr"
expect out_dash_step_json 0 "valid json" -- json_ok "$O/state_stdout.json"
expect out_dash_step_summary 0 "measured 21376 B" -- cat "$O/state_stderr"

# A failed stdout is a failure (exit 5) in every command.
for cmd in "lifetimes $G" "plan $G" "replay $G" "compare $G --budget 1MiB" "audit $G" "alloc $G" \
    "ledger --params 1000" "gen chain" "trace $G --format json -o -" "import checkmate tests/fixtures/checkmate/small_train_nx.json" \
    "step graphs/mlp423.json --optimizer sgd --seed 1" "lifetimes $G --json -o /dev/full" "help" "--version"; do
    name=$(echo "$cmd" | cut -d' ' -f1)
    expect "out_full_$name" 5 "write failed" -- sh -c "$REMAT $cmd >/dev/full"
done

# Strings in JSON: control characters (ESC, DEL) in ids and names come out
# escaped, so every document is valid; invalid UTF-8 is refused where it is.
printf '{"format": "remat-graph", "version": 1, "name": "n\\u001b[31m\\u007f",
 "inputs": [{"id": "x\\u001b", "bytes": 8}], "params": [{"id": "w\\u0001\\"", "bytes": 8}],
 "ops": [{"id": "h\\u0007", "op": "mul", "inputs": ["x\\u001b", "w\\u0001\\""], "bytes": 8, "flops": 8}],
 "outputs": ["h\\u0007"]}\n' >"$O/ctl.json"
"$REMAT" lifetimes --json "$O/ctl.json" >"$O/ctl_out.json"
expect out_ctl_json_valid 0 "valid json" -- json_ok "$O/ctl_out.json"
"$REMAT" plan "$O/ctl.json" -o "$O/ctl_plan.json" >/dev/null
expect out_ctl_plan_valid 0 "valid json" -- json_ok "$O/ctl_plan.json"
"$REMAT" trace "$O/ctl.json" -o "$O/ctl_trace.json"
expect out_ctl_trace_valid 0 "valid json" -- json_ok "$O/ctl_trace.json"
printf '{"format": "remat-graph", "version": 1, "name": "n\377\376",
 "inputs": [], "ops": [], "outputs": []}\n' >"$O/utf8.json"
expect out_bad_utf8 3 "utf8.json:1:51: byte 0xff is not valid UTF-8" -- "$REMAT" lifetimes "$O/utf8.json"
printf '{"format": "remat-graph", "version": 1, "name": "ok",\n "inputs": [{"id": "x\300\257", "bytes": 8}]}' >"$O/overlong.json"
expect out_overlong_utf8 3 "overlong.json:2:22: byte 0xc0 is not valid UTF-8" -- "$REMAT" lifetimes "$O/overlong.json"
# Messages print control characters escaped: no raw ESC reaches the terminal.
printf '{"format": "remat-graph", "version": 1, "inputs": [{"id": "x", "bytes": 8}],
 "ops": [{"id": "h", "op": "relu", "inputs": ["y\\u001b[2J"], "bytes": 8, "flops": 8}], "outputs": ["h"]}\n' >"$O/esc.json"
expect out_esc_message 3 "unknown tensor id 'y\\x1b[2J'" -- "$REMAT" lifetimes "$O/esc.json"
expect out_esc_no_raw 0 "no raw escape" -- sh -c "'$REMAT' lifetimes '$O/esc.json' 2>&1 | od -An -c | grep -q '033' || echo 'no raw escape'"

# --json on an infeasible budget is still a document: feasible false and the
# smallest budget, which the same strategy then meets.
"$REMAT" plan graphs/transformer4.json --strategy sqrtn --budget 1MiB --json >"$O/inf.json" 2>/dev/null
expect out_infeasible_rc 4 "smallest peak" -- "$REMAT" plan graphs/transformer4.json --strategy sqrtn --budget 1MiB --json
expect out_infeasible_json 0 "valid json" -- json_ok "$O/inf.json"
expect out_infeasible_false 0 '"feasible": false' -- cat "$O/inf.json"
smallest=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["smallest_budget"])' "$O/inf.json")
expect out_infeasible_smallest_meets 0 "met" -- "$REMAT" plan graphs/transformer4.json --strategy sqrtn --budget "$smallest"

# A diverging run stops at the first non-finite value and writes no state.
expect out_step_nonfinite 1 "step 2: the loss is inf (not finite); no state written" -- \
    "$REMAT" step graphs/mlp423.json --optimizer sgd --lr 1e308 --seed 1 --steps 5 -o "$O/nan_state.json"
expect out_step_no_state 0 "absent" -- sh -c "test -e '$O/nan_state.json' || echo absent"

# Every JSON document every command writes parses, on the graph with
# control characters in its strings and on a bundled one.
for g in "$O/ctl.json" graphs/transformer4.json; do
    n=$(basename "$g" .json)
    "$REMAT" plan "$g" -o "$O/$n.plan.json" >/dev/null 2>&1
    k=0
    for cmd in "lifetimes $g --json" "replay $g --json" "plan $g --json" "compare $g --budget 1GiB --json" \
        "audit $g --json" "alloc $g --json" "ledger --graph $g --json" "trace $g --format json -o -" \
        "trace $g --format chrome -o -" "replay $g $O/$n.plan.json --json" "compare $g --sweep 3"; do
        k=$((k + 1))
        "$REMAT" $cmd >"$O/doc_${n}_$k.json" 2>/dev/null
        expect "out_json_valid_${n}_$k" 0 "valid json" -- json_ok "$O/doc_${n}_$k.json"
    done
done

# edges.sh - the command at the edges: budgets of 0 and 2^64-1, byte and
# FLOP sums past 2^64-1 (refused, never wrapped), ids with quotes,
# backslashes, spaces, tabs, non-ASCII text and 20000 bytes through plan
# files, degenerate graphs, long chains, and the permissions of outputs.
E=$T/edges
mkdir -p "$E"

# Budgets: 0 is below anything and names the smallest budget; 2^64-1 caps
# nothing; 2^64 is not a byte count.
expect edges_budget_0 4 "smallest" -- "$REMAT" plan graphs/mlp2.json --strategy sqrtn --budget 0
expect edges_activation_budget_0 4 "smallest" -- "$REMAT" plan graphs/mlp2.json --strategy revolve --activation-budget 0
expect edges_budget_max 0 "met" -- "$REMAT" plan graphs/mlp2.json --budget 18446744073709551615
expect edges_activation_budget_max 0 "met" -- "$REMAT" plan graphs/transformer4.json --strategy chen-greedy \
    --activation-budget 18446744073709551615
expect edges_budget_past_max 2 "--budget" -- "$REMAT" plan graphs/mlp2.json --budget 18446744073709551616

# Two live activations of 2^63 bytes; three ops of 2^63-1
# FLOPs each.
printf '%s\n' '{"format": "remat-graph", "version": 1, "inputs": [{"id": "x", "bytes": 4}],' \
    '"params": [{"id": "w", "bytes": 4}], "ops": [' \
    '{"id": "a", "op": "f", "inputs": ["x", "w"], "bytes": "9223372036854775808", "flops": 1},' \
    '{"id": "b", "op": "f", "inputs": ["a"], "bytes": "9223372036854775808", "flops": 1},' \
    '{"id": "loss", "op": "f", "inputs": ["b"], "bytes": 4, "flops": 1}], "outputs": ["loss"]}' >"$E/bytes.json"
sed -e 's/"bytes": [^,]*, "flops": 1/"bytes": 4, "flops": "9223372036854775807", "bwd_flops": 1/' \
    "$E/bytes.json" >"$E/flops.json"
expect edges_bytes_overflow_replay 3 "live bytes exceed 2^64-1" -- "$REMAT" replay "$E/bytes.json"
expect edges_bytes_overflow_plan 3 "exceed 2^64-1" -- "$REMAT" plan "$E/bytes.json" --strategy revolve \
    --budget 18446744073709551615
expect edges_bytes_overflow_trace 3 "exceed 2^64-1" -- "$REMAT" trace "$E/bytes.json" --format json -o "$E/t.json"
expect edges_flops_overflow_replay 3 "FLOP total exceeds 2^64-1" -- "$REMAT" replay "$E/flops.json"
expect edges_flops_overflow_plan 3 "exceeds 2^64-1" -- "$REMAT" plan "$E/flops.json" --strategy sqrtn \
    --budget 18446744073709551615

# Odd ids survive a plan file: written, read back and replayed.
printf '%s\n' '{"format": "remat-graph", "version": 1, "name": "odd \"ids\"",' \
    '"inputs": [{"id": "x \\ y", "bytes": 64}], "params": [{"id": "w\tw", "bytes": 64}], "ops": [' \
    '{"id": "say \"hi\"", "op": "f", "inputs": ["x \\ y", "w\tw"], "bytes": 64, "flops": 10},' \
    '{"id": "FWD  spaced ", "op": "f", "inputs": ["say \"hi\""], "bytes": 64, "flops": 10},' \
    '{"id": "caf\u00e9 \u2713", "op": "f", "inputs": ["FWD  spaced "], "bytes": 64, "flops": 10},' \
    '{"id": "loss", "op": "f", "inputs": ["caf\u00e9 \u2713"], "bytes": 4, "flops": 10}], "outputs": ["loss"]}' \
    >"$E/odd.json"
expect edges_odd_ids_plan 0 "plan written" -- "$REMAT" plan "$E/odd.json" --strategy sqrtn --budget 1GiB \
    -o "$E/odd.plan.json"
expect edges_odd_ids_replay 0 "is valid" -- "$REMAT" replay "$E/odd.json" "$E/odd.plan.json"
expect edges_odd_ids_lifetimes 0 '"id": "FWD  spaced "' -- "$REMAT" lifetimes "$E/odd.json" --json
long=$(printf '%020000d' 0 | tr 0 L)
sed -e "s/say \\\\\"hi\\\\\"/$long/g" "$E/odd.json" >"$E/long.json"
expect edges_long_id_plan 0 "plan written" -- "$REMAT" plan "$E/long.json" --strategy revolve --budget 1GiB \
    -o "$E/long.plan.json"
expect edges_long_id_replay 0 "is valid" -- "$REMAT" replay "$E/long.json" "$E/long.plan.json"

# Degenerate graphs: empty saves, an op without inputs, a graph whose only
# output is an input (no backward step at all).
printf '%s\n' '{"format": "remat-graph", "version": 1, "params": [{"id": "w", "bytes": 16}], "ops": [' \
    '{"id": "c", "op": "const", "inputs": [], "bytes": 16, "flops": 0, "saves": []},' \
    '{"id": "loss", "op": "f", "inputs": ["c", "w"], "bytes": 4, "flops": 1, "saves": []}], "outputs": ["loss"]}' \
    >"$E/noinputs.json"
expect edges_no_inputs_plan 0 "met" -- "$REMAT" plan "$E/noinputs.json" --strategy sqrtn --budget 1KiB
printf '%s\n' '{"format": "remat-graph", "version": 1, "inputs": [{"id": "x", "bytes": 16}],' \
    '"params": [{"id": "w", "bytes": 16}], "ops": [' \
    '{"id": "a", "op": "f", "inputs": ["x", "w"], "bytes": 16, "flops": 1}], "outputs": ["x"]}' >"$E/outin.json"
expect edges_output_is_input_lifetimes 0 "0 backward steps" -- "$REMAT" lifetimes "$E/outin.json"
expect edges_output_is_input_replay 0 "is valid" -- "$REMAT" replay "$E/outin.json"
expect edges_output_is_input_plan 0 "met" -- "$REMAT" plan "$E/outin.json" --strategy revolve --budget 1KiB
# Accepted, with a warning that names it (graphs/README.md, outputs).
expect edges_output_is_input_warns 0 "warning: $E/outin.json: outputs[0]: 'x' is a graph input" -- "$REMAT" lifetimes "$E/outin.json"

# A 10^5-op chain through a pipe: Revolve plans it (its recursion is a
# heap stack now), and an impossible budget is refused at once instead of
# building a schedule of 5*10^9 instructions.
"$REMAT" gen chain --ops 100000 --param-every 1000 -o "$E/chain.json"
expect edges_chain_revolve 0 "met" -- "$REMAT" plan "$E/chain.json" --strategy revolve --budget 1TiB
expect edges_chain_revolve_infeasible 4 "smallest" -- "$REMAT" plan "$E/chain.json" --strategy revolve \
    --activation-budget 1
expect edges_chain_stdin 0 "100000 ops" -- sh -c "\"$REMAT\" lifetimes - <\"$E/chain.json\""

# Outputs get the permissions the umask allows (not a temporary file's
# 0600), and a replaced file keeps its own.
expect edges_output_mode_new 0 "644" -- sh -c "umask 022; \"$REMAT\" gen chain -o \"$E/m.json\" && stat -c %a \"$E/m.json\""
chmod 640 "$E/m.json"
expect edges_output_mode_kept 0 "640" -- sh -c "umask 077; \"$REMAT\" gen chain --ops 8 -o \"$E/m.json\" && stat -c %a \"$E/m.json\""

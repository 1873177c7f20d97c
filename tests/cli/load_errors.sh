# load_errors.sh - every bad graph in tests/fixtures/bad/ is refused by
# `remat lifetimes` with exit 3 (bad input) and one message that names the
# file and the place: line:column for syntax, a JSON path or an id for content.
B=tests/fixtures/bad
bad() { # bad NAME SUBSTR: lifetimes on $B/NAME.json exits 3 with "$B/NAME.json<SUBSTR>"
    expect "load_$1" 3 "remat: $B/$1.json$2" -- "$REMAT" lifetimes "$B/$1.json"
}

# Syntax.
bad not_json ":4:14: not valid JSON"
bad empty ": empty file, not JSON"
bad trailing_text ":5:1: unexpected text after the JSON value"
# Wrong types and values at the top.
bad top_level_array ": top level must be an object"
bad wrong_format ": format: must be \"remat-graph\""
bad wrong_version ": version: unsupported version (this remat reads version 1)"
# Wrong field types.
bad bytes_not_a_number ": ops[0].bytes: string 'lots' is not a decimal count"
bad inputs_not_array ": ops[0].inputs: must be an array"
bad frozen_not_bool ": params[0].frozen: must be true or false"
# Missing, unknown and repeated fields.
bad missing_format ": missing required field 'format'"
bad missing_version ": missing required field 'version'"
bad missing_ops ": missing required field 'ops'"
bad missing_outputs ": missing required field 'outputs'"
bad missing_op_id ": ops[1]: missing required field 'id'"
bad missing_op_type ": ops[0]: missing required field 'op'"
bad missing_bytes ": ops[0]: missing required field 'bytes'"
bad missing_flops ": ops[0]: missing required field 'flops'"
bad unknown_field ": ops[0]: unknown field 'flop'"
bad duplicate_key ": ops[0]: field 'bytes' is given twice"
# References and ids.
bad unknown_input ": ops[1].inputs[1]: unknown tensor id 'hh'"
bad unknown_save ": ops[0].saves[1]: unknown tensor id 'ghost'"
bad unknown_output ": outputs[0]: unknown tensor id 'loss'"
bad unknown_alias ": ops[1].alias_of: unknown tensor id 'q'"
bad alias_not_input ": ops[2].alias_of: 'h' is not among the op's inputs"
bad duplicate_tensor_id ": params[0]: duplicate id 'x' (already used by input tensor)"
bad duplicate_op_id ": ops[1]: duplicate op id 'h' (first at ops[0])"
# a reads c, b reads a, c reads b: the message walks the cycle in data-flow
# order and leaves out the loss, which only hangs off it.
bad cycle ": the graph has a cycle: b -> c -> a -> b"
# Counts.
bad negative_bytes ": ops[0].bytes: must not be negative (got -4096)"
bad fractional_flops ": ops[0].flops: must be a whole number (got 1.5)"
bad huge_number_bytes ": ops[0].bytes: 1e+20 exceeds 2^53-1"
bad string_bytes_overflow ": ops[0].bytes: '18446744073709551616' exceeds 2^64-1"
# Empty graphs.
bad no_outputs ": outputs: the graph names no outputs (the loss)"
bad empty_ops ": ops: the graph has no ops"

# Unreadable input: a missing file and a directory.
expect load_missing_file 3 "$T/absent.json: cannot open" -- "$REMAT" lifetimes "$T/absent.json"
mkdir -p "$T/a_directory.json"
expect load_directory 3 "$T/a_directory.json: cannot read" -- "$REMAT" lifetimes "$T/a_directory.json"
# Standard input is a file too ("-"), and is named as such.
expect load_stdin_bad 3 "remat: -: top level must be an object" -- sh -c "echo '[1]' | \"$REMAT\" lifetimes -"

# Byte counts beyond 2^53 written as decimal strings come out exact.
printf '%s\n' '{"format": "remat-graph", "version": 1,' \
    ' "inputs": [{"id": "x", "bytes": "18446744073709551615"}],' \
    ' "ops": [{"id": "h", "op": "relu", "inputs": ["x"], "bytes": "9007199254740993", "flops": 1}],' \
    ' "outputs": ["h"]}' >"$T/big.json"
expect load_big_bytes_input 0 '"bytes": 18446744073709551615' -- "$REMAT" lifetimes --json "$T/big.json"
expect load_big_bytes_op 0 '"bytes": 9007199254740993' -- "$REMAT" lifetimes --json "$T/big.json"

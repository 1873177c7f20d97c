# basics.sh - help, version, usage errors and the lifetimes command.
expect version 0 "remat " -- "$REMAT" --version
expect help 0 "lifetimes" -- "$REMAT" help
expect no_command 2 "usage" -- "$REMAT"
expect unknown_command 2 "unknown command 'frob'" -- "$REMAT" frob
expect lifetimes_help 0 "usage: remat lifetimes" -- "$REMAT" lifetimes --help
expect lifetimes_text 0 "bwd:h1..optimizer" -- "$REMAT" lifetimes graphs/mlp2.json
expect lifetimes_json 0 '"last_bwd_use": "bwd:a1"' -- "$REMAT" lifetimes --json graphs/mlp2.json
expect lifetimes_missing_file 3 "cannot open" -- "$REMAT" lifetimes "$T/nope.json"
expect lifetimes_no_arg 2 "expected exactly one GRAPH" -- "$REMAT" lifetimes
printf '{"format": "remat-graph",\n "version": 1,\n "ops": [}' >"$T/syntax.json"
expect syntax_error 3 "syntax.json:3:" -- "$REMAT" lifetimes "$T/syntax.json"
"$REMAT" lifetimes --json -o "$T/l.json" graphs/mlp2.json
expect output_file 0 '"steps"' -- cat "$T/l.json"


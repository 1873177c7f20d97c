#!/bin/sh
# cli_test.sh - the remat command end to end: exit codes and messages on good
# and bad input. Usage: sh tests/cli_test.sh path/to/remat
# Prints "N passed, N failed" last; exits non-zero if anything failed.
REMAT=${1:-build/remat}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0
fail=0

# expect NAME RC SUBSTR -- command...: runs the command, checks its exit
# status and that stdout+stderr contain SUBSTR.
expect() {
    name=$1 rc=$2 sub=$3
    shift 4
    "$@" >"$T/out" 2>&1
    got=$?
    if [ "$got" -ne "$rc" ]; then
        echo "FAIL $name: exit $got, expected $rc"; sed 's/^/    /' "$T/out" | head -5
        fail=$((fail + 1))
    elif ! grep -qF -- "$sub" "$T/out"; then
        echo "FAIL $name: output lacks '$sub'"; sed 's/^/    /' "$T/out" | head -5
        fail=$((fail + 1))
    else
        pass=$((pass + 1))
    fi
}

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

echo "cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]

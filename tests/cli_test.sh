#!/bin/sh
# cli_test.sh - the remat command end to end: exit codes and messages on good
# and bad input. Usage: sh tests/cli_test.sh path/to/remat
# Prints "N passed, N failed" last; exits non-zero if anything failed.
REMAT=${1:-build/remat}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0
fail=0

# shown: on a failure, the output's first 5 lines, then (when there are
# more) its lines that say what failed and its last 5, so a CI log names
# the cause of a long check's failure, not only its start.
shown() {
    sed 's/^/    /' "$T/out" | head -5
    if [ "$(wc -l <"$T/out")" -gt 5 ]; then
        echo "    ..."
        sed '1,5d' "$T/out" | grep -E 'MISMATCH|OUTSIDE|DIFFER|FAIL|Error|error:|Traceback|did not finish' |
            head -20 | sed 's/^/    /'
        echo "    ... (last lines)"
        tail -5 "$T/out" | sed 's/^/    /'
    fi
}

# expect NAME RC SUBSTR -- command...: runs the command, checks its exit
# status and that stdout+stderr contain SUBSTR.
expect() {
    name=$1 rc=$2 sub=$3
    shift 4
    "$@" >"$T/out" 2>&1
    got=$?
    if [ "$got" -ne "$rc" ]; then
        echo "FAIL $name: exit $got, expected $rc"; shown
        fail=$((fail + 1))
    elif ! grep -qF -- "$sub" "$T/out"; then
        echo "FAIL $name: output lacks '$sub'"; shown
        fail=$((fail + 1))
    else
        pass=$((pass + 1))
    fi
}

# Each tests/cli/*.sh adds its own cases with `expect`; they run in this
# shell, share $REMAT and the scratch directory $T, and run from the
# repository root.
for f in tests/cli/*.sh; do
    . "./$f"
done

echo "cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]

#!/bin/sh
# readme_test.sh - README.md's example outputs are real: every fenced block
# that starts with "$ build/remat ..." is run (in a scratch directory that
# sees graphs/ and tests/, after what `make demo` writes), and its output must
# equal the block's, line by line; so must the library example's printed
# line and the figures the prose quotes. Usage: sh tests/readme_test.sh
# BUILD_DIR, from the repository root. Prints "readme: N passed, N failed".
#
# What varies between runs is masked on both sides, and only that: wall
# times (the compare table's time column, step's per-step times and median,
# numeric replay's wall time and the process's RSS) and exact's row of the
# compare table (the solver stops at a 1 s time limit, so what it proves
# depends on the machine). Column alignment is ignored (fields compared).
BUILD=${1:-build}
ROOT=$(pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0
fail=0

mkdir -p "$T/run/build"
ln -s "$ROOT/graphs" "$T/run/graphs"
ln -s "$ROOT/tests" "$T/run/tests"
ln -s "$ROOT/$BUILD/remat" "$T/run/build/remat"
(cd "$T/run" && build/remat plan graphs/transformer4.json --budget 16MiB -o build/transformer4.plan.json >/dev/null)

# Splits README.md's blocks into commands: $T/c.N.K.cmd (block N's Kth
# command) and $T/c.N.K.want (the lines README shows after it).
awk -v dir="$T" '
    /^```/ { infence = !infence; if (!infence) inblock = 0; first = infence; next }
    first { first = 0; if ($0 ~ /^\$ build\/remat /) { inblock = 1; n++ } }
    inblock && /^\$ / { k++; out = dir "/c." n "." k; print substr($0, 3) > (out ".cmd"); printf "" > (out ".want"); next }
    inblock { print >> (out ".want") }
' README.md

normalize() {
    awk '
        /^  wall time / || /^  peak RSS / { next }            # numeric replay: the clock and the process
        /^time       median per step/ { next }                 # step: the clock
        /^(graph      |           optimizer|data       |plan       )/ { next }   # step header ("..." in README)
        /^\.\.\. / { next }
        NF == 9 && $5 ~ /%$/ && $1 != "strategy" { if ($1 == "exact") next; $6 = "-" }   # compare: time (ms)
        /^ *[0-9]+  [0-9.e+-]+ +[0-9.]+ [mu]?s/ { print $1, $2; next }                   # step: loss rows
        { $1 = $1; print }
    ' "$1"
}

# One command at a time, in README order (a later command may read what an
# earlier one wrote); a command whose output README does not show is run,
# not compared.
# Sorted on the file names alone: mktemp's directory name has a dot of its
# own, which would shift sort's fields and put command 10 before command 9.
for name in $(cd "$T" && ls c.*.cmd | sort -t. -k2,2n -k3,3n); do
    cmd=$T/$name
    base=${cmd%.cmd}
    (cd "$T/run" && sh -c "$(cat "$cmd")") >"$base.got" 2>&1
    [ -s "$base.want" ] || continue
    normalize "$base.want" >"$T/want.norm"
    normalize "$base.got" >"$T/got.norm"
    if cmp -s "$T/want.norm" "$T/got.norm"; then
        pass=$((pass + 1))
    else
        echo "FAIL readme: \$ $(cat "$cmd")"
        diff "$T/want.norm" "$T/got.norm" | head -12 | sed 's/^/    /'
        fail=$((fail + 1))
    fi
done

# Figures quoted in the prose.
check() { # NAME EXPECTED ACTUAL
    if [ "$2" = "$3" ]; then pass=$((pass + 1)); else echo "FAIL readme $1: README says '$2', a run gives '$3'"; fail=$((fail + 1)); fi
}
want=$(sed -n 's/^It prints `\(peak [0-9]* B, extra FLOPs [0-9]*\)`.*/\1/p' README.md)
check library_example "$want" "$("$ROOT/$BUILD/example_api" 2>&1)"
ledger=$("$BUILD/remat" ledger --graph graphs/mlp423.json --weights f64 --optimizer adam --json)
for f in weights optimizer_state total_bytes; do
    want=$(sed -n "s/.*\`\"$f\": \([0-9]*\)\`.*/\1/p" README.md | head -1)
    got=$(printf '%s\n' "$ledger" | grep -E "\"(categories|total_bytes)\"" | sed -n "s/.*\"$f\": \([0-9][0-9]*\).*/\1/p" | head -1)
    check "ledger_$f" "$want" "$got"
done
want=$(sed -n 's/.*`remat replay graphs\/mlp423.json --optimizer adam` peaks at \([0-9]*\) B.*/\1/p' README.md)
got=$("$BUILD/remat" replay graphs/mlp423.json --optimizer adam | sed -n 's/^peak .*(\([0-9]*\) B).*/\1/p')
check replay_adam_peak "$want" "$got"

echo "readme: $pass passed, $fail failed"
[ "$fail" -eq 0 ]

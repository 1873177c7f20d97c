#!/bin/sh
# strategy_cost.sh - what adding a strategy costs: at most three files.
#
# Copies the library and the command (src, include, scripts, Makefile) to a
# scratch directory, adds a toy strategy with one option there the way
# src/plan/strategies.h says to (its own src/plan/toy.c, its entries in the
# registry's two lists, its field in remat_plan_options), counts the files
# that differ from this tree (diff -rq: at most 3), builds only remat at -O0,
# and shows that everything derived from the registry picked the strategy up
# with no other edit: `remat plan --strategy toy --toy-knob K` (its params
# echo K), `remat compare` (a toy row), the usage text (the strategy and its
# flag), auto (toy is among its candidates, since its flags say so), the
# refusal of --toy-knob beside a strategy that does not read it, and the
# folder ladder (scripts/check-layout.sh on the built objects).
#
# Usage: sh tests/strategy_cost.sh (from the repository root; make check
# runs it). Skips, saying why, when the build tools or libraries are missing.
SRC=$(pwd)
for tool in make cc pkg-config nm; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "strategy_cost: skipped ($tool not found)"
        exit 0
    fi
done
if ! pkg-config --exists igraph libcjson; then
    echo "strategy_cost: skipped (igraph or libcjson not found by pkg-config)"
    exit 0
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
no() {
    echo "FAIL strategy_cost: $*"
    fail=1
}

cp -R src include scripts Makefile "$T/" || exit 1
W=$T

# 1. Its own file.
cat >"$W/src/plan/toy.c" <<'EOF'
/*
 * toy.c - a demo strategy with one option (tests/strategy_cost.sh writes it
 * into a copy of the tree): store-all's plan, with its option echoed in its
 * params, so that a test can see the option reach it.
 */
#include "planner.h"

remat_status remat__strategy_toy(remat_planner *P, remat_plan *out)
{
    remat_status st = remat__strategy_store_all(P, out);
    return st != REMAT_OK ? st : remat__plan_params(P, out, "{\"knob\": %u}", P->o->toy_knob);
}
EOF

# 2. One entry at the end of each list of the registry (each list's last
# line is the first of its block without a continuation backslash).
awk 'function add(list) {
    if (list == "s") {
        print "    X(\"toy\", remat__strategy_toy, \"a demo strategy: keeps every activation and echoes its knob\", \"toy_knob\", \\"
        print "      REMAT__M | REMAT__A, 9, 0)"
    } else
        print "    X(toy_knob, REMAT_OPTION_COUNT, \"K\", NULL, \"toy: a number it echoes in its params\")"
}
in_list && !/\\$/ { print $0 " \\"; add(in_list); in_list = ""; next }
{ print }
/^#define REMAT__STRATEGIES\(X\)/ { in_list = "s" }
/^#define REMAT__OPTIONS\(X\)/ { in_list = "o" }' "$SRC/src/plan/strategies.h" >"$W/src/plan/strategies.h"

# 3. Its field in remat_plan_options (the last).
awk '/^} remat_plan_options;/ { print "    uint32_t toy_knob;             /* toy: a number it echoes in its params */" }
{ print }' "$SRC/include/remat/plan.h" >"$W/include/remat/plan.h"

changed=$( { diff -rq "$SRC/src" "$W/src"; diff -rq "$SRC/include" "$W/include"; diff -rq "$SRC/scripts" "$W/scripts";
             diff -q "$SRC/Makefile" "$W/Makefile"; } | wc -l)
[ "$changed" -le 3 ] || no "the toy strategy touched $changed files (at most 3):" \
    "$( { diff -rq "$SRC/src" "$W/src"; diff -rq "$SRC/include" "$W/include"; } )"
grep -q toy_knob "$W/src/plan/strategies.h" && grep -q toy_knob "$W/include/remat/plan.h" ||
    no "the registry or remat/plan.h was not edited (has its layout changed?)"

if ! nice make -C "$W" -j2 --no-print-directory OPT=-O0 build/remat >"$T/build.log" 2>&1; then
    no "the tree with the toy strategy does not build:"
    tail -20 "$T/build.log"
    exit 1
fi
R="$W/build/remat"
G="$SRC/graphs/mlp2.json"

# expect NAME RC SUBSTR command...: its exit status and a substring of its output.
expect() {
    name=$1 rc=$2 sub=$3
    shift 3
    "$@" >"$T/out" 2>&1
    got=$?
    if [ "$got" -ne "$rc" ]; then
        no "$name: exit $got, expected $rc"; head -5 "$T/out"
    elif ! grep -qF -- "$sub" "$T/out"; then
        no "$name: output lacks '$sub'"; head -5 "$T/out"
    fi
}
expect toy_plan 0 'strategy toy {"knob": 3}' "$R" plan "$G" --strategy toy --toy-knob 3 --budget 1MiB
expect toy_plan_met 0 'met' "$R" plan "$G" --strategy toy --toy-knob 3 --budget 1MiB
expect toy_compare 0 'toy ' "$R" compare "$G" --budget 1MiB
expect toy_compare_json 0 '"strategy": "toy"' "$R" compare "$G" --budget 1MiB --json
expect toy_usage 0 '  toy ' "$R" plan --help
expect toy_usage_flag 0 '--toy-knob K' "$R" plan --help
expect toy_usage_help 0 'toy: a number it echoes in its params' "$R" plan --help
expect toy_auto 0 '"toy"' "$R" plan "$G" --budget 1MiB
expect toy_auto_reads_knob 0 '"toy"' "$R" plan "$G" --budget 1MiB --toy-knob 3
expect toy_knob_refused 2 '--toy-knob does not apply to --strategy sqrtn (it applies to auto toy)' \
    "$R" plan "$G" --strategy sqrtn --toy-knob 3 --budget 1MiB
expect toy_knob_bad 2 "--toy-knob: 'x' is not a whole number" "$R" plan "$G" --strategy toy --toy-knob x
expect toy_layout 0 'layout: ok' sh -c "cd '$W' && sh scripts/check-layout.sh build"

[ "$fail" -eq 0 ] && echo "strategy_cost: a strategy with one option: $changed files, picked up by plan, compare, usage and auto"
exit "$fail"

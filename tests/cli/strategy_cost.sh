# strategy_cost.sh - what adding a strategy costs: at most three files.
#
# Copies the library and the command (src, include, scripts, Makefile) to
# the scratch directory, adds a toy strategy with one option there the way
# src/plan/strategies.h says to (its own src/plan/toy.c, its entries in the
# registry's two lists, its field in remat_plan_options), counts the files
# that differ from this tree (diff -rq: at most 3), builds only remat at -O0
# (one make -j2: about 20 s of CPU), and shows that everything derived from
# the registry picked the strategy up with no other edit: `remat plan
# --strategy toy --toy-knob K` (its params echo K), `remat compare` (a toy
# row), the usage text (the strategy and its flag), auto (toy is among its
# candidates, since its flags say so), the refusal of --toy-knob beside a
# strategy that does not read it, and the folder ladder
# (scripts/check-layout.sh on the built objects). Skipped, saying why, when
# the build tools or libraries are missing.
SC_SRC=$(pwd)
SC_SKIP=
for SC_TOOL in make cc pkg-config nm; do
    command -v "$SC_TOOL" >/dev/null 2>&1 || SC_SKIP="$SC_TOOL not found"
done
[ -n "$SC_SKIP" ] || pkg-config --exists igraph libcjson || SC_SKIP="igraph or libcjson not found by pkg-config"
if [ -n "$SC_SKIP" ]; then
    echo "strategy_cost: skipped ($SC_SKIP)"
else
SC_W="$T/strategy_cost"
mkdir -p "$SC_W"
cp -R src include scripts Makefile "$SC_W/"

# 1. Its own file.
cat >"$SC_W/src/plan/toy.c" <<'EOF'
/*
 * toy.c - a demo strategy with one option (tests/cli/strategy_cost.sh writes it
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
/^#define REMAT__OPTIONS\(X\)/ { in_list = "o" }' "$SC_SRC/src/plan/strategies.h" >"$SC_W/src/plan/strategies.h"

# 3. Its field in remat_plan_options (the last).
awk '/^} remat_plan_options;/ { print "    uint32_t toy_knob;             /* toy: a number it echoes in its params */" }
{ print }' "$SC_SRC/include/remat/plan.h" >"$SC_W/include/remat/plan.h"

# The files the toy touched, and that it touched the ones it should.
SC_CHANGED=$( { diff -rq "$SC_SRC/src" "$SC_W/src"; diff -rq "$SC_SRC/include" "$SC_W/include";
                diff -rq "$SC_SRC/scripts" "$SC_W/scripts"; diff -q "$SC_SRC/Makefile" "$SC_W/Makefile"; } 2>&1)
SC_N=$(printf '%s\n' "$SC_CHANGED" | grep -c .)
expect strategy_cost_at_most_three_files 0 "files changed: at most 3" -- sh -c \
    '[ "$1" -le 3 ] && echo "$1 files changed: at most 3" || { echo "$1 files changed:"; printf "%s\n" "$2"; exit 1; }' \
    sh "$SC_N" "$SC_CHANGED"
expect strategy_cost_registry_edited 0 "toy_knob" -- grep -h toy_knob "$SC_W/src/plan/strategies.h" "$SC_W/include/remat/plan.h"
expect strategy_cost_builds 0 "" -- nice make -C "$SC_W" -j2 --no-print-directory OPT=-O0 build/remat
SC_R="$SC_W/build/remat"
SC_G="$SC_SRC/graphs/mlp2.json"
expect toy_plan 0 'strategy toy {"knob": 3}' -- "$SC_R" plan "$SC_G" --strategy toy --toy-knob 3 --budget 1MiB
expect toy_plan_met 0 'met' -- "$SC_R" plan "$SC_G" --strategy toy --toy-knob 3 --budget 1MiB
expect toy_compare 0 'toy ' -- "$SC_R" compare "$SC_G" --budget 1MiB
expect toy_compare_json 0 '"strategy": "toy"' -- "$SC_R" compare "$SC_G" --budget 1MiB --json
expect toy_usage 0 '  toy ' -- "$SC_R" plan --help
expect toy_usage_flag 0 '--toy-knob K' -- "$SC_R" plan --help
expect toy_usage_help 0 'toy: a number it echoes in its params' -- "$SC_R" plan --help
expect toy_auto 0 '"toy"' -- "$SC_R" plan "$SC_G" --budget 1MiB
expect toy_auto_reads_knob 0 '"toy"' -- "$SC_R" plan "$SC_G" --budget 1MiB --toy-knob 3
expect toy_knob_refused 2 '--toy-knob does not apply to --strategy sqrtn (it applies to auto toy)' -- \
    "$SC_R" plan "$SC_G" --strategy sqrtn --toy-knob 3 --budget 1MiB
expect toy_knob_bad 2 "--toy-knob: 'x' is not a whole number" -- "$SC_R" plan "$SC_G" --strategy toy --toy-knob x
expect toy_layout 0 'layout: ok' -- sh -c "cd '$SC_W' && sh scripts/check-layout.sh build"

fi

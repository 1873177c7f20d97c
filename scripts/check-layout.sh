#!/bin/sh
# check-layout.sh - the ladder of src/README.md, checked.
#
# Usage: sh scripts/check-layout.sh [BUILD]   (BUILD: the build directory, default build)
#
# Two views of one rule, "a folder uses only the folders below it":
#   1. includes: a src/F file includes its own folder's headers, public
#      headers, and from another folder G only G's inner-interface headers,
#      and only when F may use G;
#   2. symbols (when BUILD/obj holds the objects): every symbol an object in
#      src/F takes from another library folder G is defined in G with F
#      allowed to use G, so a public declaration cannot hide an upward call.
# It also refuses a file of code over MAX_LINES lines (STYLE.md: split along
# a seam that has a name): src/, and the tests, scripts and shell scripts
# beside it (documentation and data have no limit; see below). And it checks
# the public headers (reachable from remat.h, one guard, self-contained, no
# internal names, no issue numbers).
# Prints every violation and exits 1 if there is one.
set -u
cd "$(dirname "$0")/.."
BUILD=${1:-build}
MAX_LINES=${MAX_LINES:-800}

# may FOLDER: the folders FOLDER may use, directly or through the ladder.
may() {
    case $1 in
    util) echo "" ;;
    load) echo "util" ;;
    analyze) echo "util load" ;;
    ledger) echo "util load" ;;
    gen) echo "util" ;;
    exec) echo "util load analyze" ;;
    time) echo "util load analyze exec" ;;
    alloc) echo "util load analyze exec" ;;
    plan) echo "util load analyze exec alloc time" ;;
    import) echo "util load analyze" ;;
    train) echo "util load analyze ledger exec" ;;
    dist) echo "util load analyze exec alloc time plan" ;;
    report) echo "util load analyze ledger gen exec alloc time plan import train dist" ;;
    cli) echo "util load analyze ledger gen exec alloc time plan import train dist report" ;;
    *) echo "?" ;;
    esac
}

# exported FOLDER: its inner-interface headers (everything else is private).
exported() {
    case $1 in
    util) echo "util_internal.h hash.h" ;;
    load) echo "json_glue.h graph_store.h" ;;
    analyze) echo "igraph_adapter.h" ;;
    exec) echo "builder.h schedule_json.h replay_cursor.h intervals.h" ;;
    plan) echo "probe.h" ;;
    *) echo "" ;;
    esac
}

contains() { # contains WORD LIST...
    w=$1
    shift
    for x in "$@"; do [ "$x" = "$w" ] && return 0; done
    return 1
}

bad=0
say() {
    echo "layout: $*"
    bad=1
}

# lines_ok FILE: FILE has at most MAX_LINES lines.
lines_ok() {
    n=$(wc -l <"$1")
    [ "$n" -le "$MAX_LINES" ] || say "$1: $n lines (over $MAX_LINES: split it along a named seam)"
}

for f in src/*/*.c src/*/*.h; do
    dir=${f#src/}
    dir=${dir%%/*}
    [ "$(may "$dir")" = "?" ] && say "$f: folder src/$dir/ is not on the ladder (scripts/check-layout.sh, src/README.md)"
    lines_ok "$f"
    # Quoted includes only; "remat/..." and "remat.h" are the public headers.
    grep -o '^#include "[^"]*"' "$f" | sed 's/^#include "//; s/"$//' | while read -r inc; do
        case $inc in
        remat.h | remat/*) continue ;;
        ../*/*) g=${inc#../} ;;
        */*) g=$inc ;;
        *) continue ;; # own folder
        esac
        gdir=${g%%/*}
        hdr=${g#*/}
        [ "$gdir" = "$dir" ] && continue
        # shellcheck disable=SC2046
        if ! contains "$gdir" $(may "$dir"); then
            echo "layout: $f includes $inc: src/$dir may not use src/$gdir"
        elif ! contains "$hdr" $(exported "$gdir"); then
            echo "layout: $f includes $inc: private to src/$gdir (its inner interface: $(exported "$gdir"))"
        fi
    done | grep . && bad=1
done

# The same limit for the code outside src/: the tests (suites, their
# helpers and headers, bench, fuzz targets, the PyTorch checks), the scripts,
# and every shell script (.ci/run is one). A suite that outgrows it is split
# into files that fill the same TCases (tests/check_load.h shows how), so
# its name still runs it whole. Documentation (README.md, graphs/README.md,
# src/README.md) is left out on purpose: a reference reads best whole, and
# its length is not code's. So is data (fixtures, graphs, fuzz corpora).
for f in tests/*.c tests/*.h tests/*/*.c tests/*/*.h tests/*/*.py scripts/*.py \
    ./*.sh scripts/*.sh tests/*.sh tests/*/*.sh .ci/run; do
    [ -f "$f" ] && lines_ok "$f"
done

# Every tests/check_*.c is a suite or a part of one. A suite defines
# `Suite *NAME_suite(void)` at the start of a line (the Makefile lists those
# for the runner); a part defines hooks `void NAME_tests(TCase *tc)` that a
# suite's file calls. A file that is neither, or a hook nobody calls, would
# compile and link and run none of its tests, so it is refused here.
for f in tests/check_*.c; do
    [ -f "$f" ] || continue # a copy of src/ alone (tests/cli/strategy_cost.sh)
    grep -q '^Suite \*[a-z0-9_]*_suite(void)$' "$f" && continue
    hooks=$(sed -n 's/^void \([a-z0-9_]*_tests\)(TCase \*[a-z]*)$/\1/p' "$f")
    [ -n "$hooks" ] || say "$f: neither a suite (Suite *NAME_suite(void)) nor a part of one (void NAME_tests(TCase *tc))"
    for h in $hooks; do
        grep -q "^[[:space:]]*$h([a-z]*);" tests/check_*.c || say "$f: $h() adds tests that no suite runs (call it from the suite's file)"
    done
done

# Flags belong to the command: a library message names the API parameter
# (include/remat/util.h, remat_err), and the CLI spells it as its flag
# (remat_cli_in_flags), so no string literal outside src/cli names a
# "--flag". Comment lines are skipped; char literals of a quote are dropped
# first so the literals on a line pair up.
for f in src/*/*.c src/*/*.h; do
    case $f in src/cli/*) continue ;; esac
    sed -e "s/'\\\\\"'//g" -e "s/'\"'//g" "$f" | awk -v f="$f" '
        { line = $0; t = line; sub(/^[ \t]+/, "", t) }
        t ~ /^(\*|\/\/|\/\*)/ { next }
        {
            while (match(line, /"([^"\\]|\\.)*"/)) {
                lit = substr(line, RSTART, RLENGTH)
                if (lit ~ /(^|[^A-Za-z0-9_-])--[a-z]/)
                    printf "layout: %s:%d: %s names a flag (a library message names the API parameter; see remat_cli_in_flags)\n", f, NR, lit
                line = substr(line, RSTART + RLENGTH)
            }
        }'
done | grep . && bad=1

# Public headers: each reachable from remat.h, one include guard each,
# compiling on its own, and no internal names (remat__ is for src/ only;
# REMAT__ X-macro helpers are fine), no issue numbers, no "later stages".
for h in include/remat/*.h; do
    n=${h#include/}
    grep -q "^#include \"$n\"" include/remat.h || say "$h: not included by include/remat.h"
    [ "$(grep -c '^#ifndef REMAT_' "$h")" -eq 1 ] || say "$h: not exactly one include guard"
    grep -n 'remat__[a-z]' "$h" | sed "s|^|layout: $h:|; s|\$| (internal name in a public header)|" | grep . && bad=1
    grep -n -i -e 'issue [0-9]' -e 'later stage' "$h" | sed "s|^|layout: $h:|" | grep . && bad=1
    if command -v "${CC:-cc}" >/dev/null 2>&1; then
        printf '#include "%s"\nint main(void) { return 0; }\n' "$n" |
            "${CC:-cc}" -std=c11 -Wall -Werror -fsyntax-only -Iinclude -x c - 2>/dev/null ||
            say "$h: does not compile on its own"
    fi
done

if [ -d "$BUILD/obj/src" ] && command -v nm >/dev/null 2>&1; then
    T=$(mktemp -d)
    trap 'rm -rf "$T"' EXIT
    for c in src/*/*.c; do
        o="$BUILD/obj/${c%.c}.o"
        [ -f "$o" ] || continue
        d=${c#src/}
        d=${d%%/*}
        nm -P --defined-only "$o" 2>/dev/null | awk -v d="$d" '$2 ~ /^[TDRBC]$/ {print $1, d}' >>"$T/defs"
        nm -P -u "$o" 2>/dev/null | awk -v d="$d" -v c="$c" '{print $1, d, c}' >>"$T/uses"
    done
    LC_ALL=C sort -u "$T/defs" >"$T/defs.s"
    LC_ALL=C sort "$T/uses" >"$T/uses.s"
    LC_ALL=C join "$T/uses.s" "$T/defs.s" | while read -r sym user file owner; do
        [ "$user" = "$owner" ] && continue
        # shellcheck disable=SC2046
        contains "$owner" $(may "$user") || echo "layout: $file uses $sym from src/$owner: src/$user may not use src/$owner"
    done | sort -u | grep . && bad=1
fi

[ "$bad" -eq 0 ] && echo "layout: ok (src/README.md's ladder holds)"
exit "$bad"

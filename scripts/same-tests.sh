#!/bin/sh
# same-tests.sh - the unit tests of the work tree are those of a revision,
# moved but not changed: for splitting or merging test files.
#
# Usage: sh scripts/same-tests.sh [REV]   (REV: default main)
#
# Compares tests/*.c at REV with the work tree's: the sorted START_TEST
# names must be identical, and so must each test's text from its START_TEST
# line to its END_TEST, byte for byte. What registers a test (tcase_add_*)
# and in which case is not compared here: run the suite before and after
# with CK_LOG_FILE_NAME set and compare the logs' case:test lines for that.
# Prints what it found and exits 1 on a difference.
set -u
cd "$(dirname "$0")/.." || exit 2
rev=${1:-main}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
for f in $(git ls-tree --name-only "$rev" tests/ | grep '\.c$'); do git show "$rev:$f"; done >"$T/before.c" || exit 2
cat tests/*.c >"$T/after.c"

names() { grep -o '^START_TEST([A-Za-z0-9_]*)' "$1" | LC_ALL=C sort; }
# blocks FILE DIR: each test's text into DIR/NAME (a name given twice
# shows as a difference, since its file then holds both).
blocks() {
    mkdir -p "$2"
    awk -v d="$2" '
        /^START_TEST\(/ { n = $0; sub(/^START_TEST\(/, "", n); sub(/\).*/, "", n); f = d "/" n }
        f != "" { print >>f }
        /^END_TEST/ { if (f != "") close(f); f = "" }' "$1"
}

bad=0
names "$T/before.c" >"$T/before.names"
names "$T/after.c" >"$T/after.names"
if cmp -s "$T/before.names" "$T/after.names"; then
    echo "same-tests: names identical ($(wc -l <"$T/after.names") START_TEST at $rev and here)"
else
    echo "same-tests: names differ (< $rev, > work tree):"
    diff "$T/before.names" "$T/after.names"
    bad=1
fi
blocks "$T/before.c" "$T/b"
blocks "$T/after.c" "$T/a"
if diff -r "$T/b" "$T/a" >"$T/d"; then
    echo "same-tests: bodies identical ($(cat "$T"/a/* | wc -l) lines from START_TEST to END_TEST)"
else
    echo "same-tests: bodies differ (< $rev, > work tree):"
    head -40 "$T/d"
    bad=1
fi
exit "$bad"

#!/bin/sh
# install_test.sh - `make install` gives a library that installs like one:
# a shared library whose soname carries the major version, remat.pc through
# which `pkg-config --cflags --libs remat` builds and links the README's
# library example against the installed shared library (igraph, cJSON and
# GLPK come from remat.pc), an umbrella header that includes every public
# header, and a version macro that agrees with remat_version().
# Usage: sh tests/install_test.sh BUILD_DIR (run from the repository root).
BUILD=${1:-build}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL install: $*"; fail=$((fail + 1)); }

P="$T/prefix"
if ! make --no-print-directory -s BUILD="$BUILD" PREFIX="$P" install >"$T/log" 2>&1; then
    bad "make install failed"; sed 's/^/    /' "$T/log" | tail -5
    echo "install: $pass passed, $fail failed"
    exit 1
fi
V=$(sed -n 's/^#define REMAT_VERSION_STRING "\(.*\)"/\1/p' include/remat/util.h)
MAJOR=${V%%.*}

# The shared library: a real file for the full version, links for the
# soname and the development name, and the soname recorded inside it.
[ -f "$P/lib/libremat.so.$V" ] && [ ! -L "$P/lib/libremat.so.$V" ] && ok || bad "libremat.so.$V missing"
[ "$(readlink "$P/lib/libremat.so.$MAJOR")" = "libremat.so.$V" ] && ok || bad "libremat.so.$MAJOR link"
[ "$(readlink "$P/lib/libremat.so")" = "libremat.so.$MAJOR" ] && ok || bad "libremat.so link"
soname=$(readelf -d "$P/lib/libremat.so.$V" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libremat.so.$MAJOR" ] && ok || bad "soname is '$soname', expected libremat.so.$MAJOR"
[ -f "$P/lib/libremat.a" ] && ok || bad "libremat.a missing"

# pkg-config: the flags name remat and its three dependencies.
export PKG_CONFIG_PATH="$P/lib/pkgconfig"
libs=$(pkg-config --libs remat 2>"$T/pcerr")
[ -n "$libs" ] && ok || { bad "pkg-config --libs remat failed: $(cat "$T/pcerr")"; }
for want in -lremat -ligraph -lcjson -lglpk; do
    case " $libs " in *" $want "*) ok ;; *) bad "pkg-config --libs remat lacks $want: $libs" ;; esac
done
[ "$(pkg-config --modversion remat)" = "$V" ] && ok || bad "pkg-config --modversion is not $V"

# The README's library example, built against the installed headers and
# shared library only, runs and prints what README.md says it prints.
if cc -std=c11 -o "$T/example" tests/example_api.c $(pkg-config --cflags --libs remat) 2>"$T/ccerr"; then
    ok
    readelf -d "$T/example" | grep -q "NEEDED.*\[libremat.so.$MAJOR\]" && ok || bad "example not linked to libremat.so.$MAJOR"
    if LD_LIBRARY_PATH="$P/lib" "$T/example" >"$T/out" 2>&1; then ok; else bad "example failed: $(cat "$T/out")"; fi
    want=$(sed -n 's/^It prints `\(peak [0-9]* B, extra FLOPs [0-9]*\)`.*/\1/p' README.md)
    [ -n "$want" ] && [ "$(cat "$T/out")" = "$want" ] && ok || bad "example printed '$(cat "$T/out")', README.md says '$want'"
else
    bad "example does not build from pkg-config's flags: $(head -3 "$T/ccerr")"
fi

# remat.h includes every public header, and the version macros agree with
# the library's function.
for h in include/remat/*.h; do
    grep -q "#include \"remat/$(basename "$h")\"" include/remat.h && ok || bad "remat.h does not include remat/$(basename "$h")"
done
cat >"$T/version.c" <<'EOF'
#include <remat.h>
#include <stdio.h>
#include <string.h>
int main(void)
{
    char s[32];
    snprintf(s, sizeof s, "%d.%d.%d", REMAT_VERSION_MAJOR, REMAT_VERSION_MINOR, REMAT_VERSION_PATCH);
    int n = (REMAT_VERSION_MAJOR << 16) | (REMAT_VERSION_MINOR << 8) | REMAT_VERSION_PATCH;
    return !(strcmp(s, REMAT_VERSION_STRING) == 0 && strcmp(remat_version(), REMAT_VERSION_STRING) == 0 &&
             n == REMAT_VERSION_NUMBER);
}
EOF
if cc -std=c11 -o "$T/version" "$T/version.c" $(pkg-config --cflags --libs remat) && LD_LIBRARY_PATH="$P/lib" "$T/version"; then
    ok
else
    bad "version macros and remat_version() disagree"
fi
[ "$("$P/bin/remat" --version)" = "remat $V" ] && ok || bad "remat --version is not 'remat $V'"

# uninstall leaves the prefix's directories empty of remat's files.
make --no-print-directory -s BUILD="$BUILD" PREFIX="$P" uninstall >/dev/null 2>&1
left=$(find "$P" -type f -o -type l | wc -l)
[ "$left" -eq 0 ] && ok || bad "uninstall left $left files"

echo "install: $pass passed, $fail failed"
[ "$fail" -eq 0 ]

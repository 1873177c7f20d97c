#!/bin/sh
# install-deps.sh - install the Debian packages remat builds and tests with.
# Idempotent: packages already present are left alone, and apt is only asked
# when something is missing. Needs root (or sudo) for apt-get.
set -eu
PKGS="build-essential pkg-config libigraph-dev libcjson-dev check libglpk-dev valgrind librsvg2-bin libxml2-utils clang"
# --torch: Debian's PyTorch and torchvision, for the exporter and the checks
# against PyTorch's figures (tests/cli/torch.sh skips without them). Never a
# dependency of the C core.
if [ "${1:-}" = "--torch" ]; then
    PKGS="python3-torch python3-torchvision python3-networkx"
fi
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# make fuzz needs libFuzzer's runtime, which clang only recommends; the
# package is named after clang's major version (libclang-rt-14-dev on
# Debian 12), so it is looked for once clang is there.
fuzzer_rt() {
    if [ "${1:-}" != "--torch" ] && command -v clang >/dev/null 2>&1 &&
        [ ! -e "$(clang -print-file-name=libclang_rt.fuzzer-x86_64.a)" ]; then
        echo "libclang-rt-$(clang -dumpversion | cut -d. -f1)-dev"
    fi
}
missing="$missing $(fuzzer_rt "${1:-}")"
missing=$(echo $missing)
if [ -z "$missing" ]; then
    echo "install-deps: all packages present"
    exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing$missing"
$SUDO apt-get update -qq
# PyTorch is installed as Debian recommends it (that is how it was checked).
RECS="--no-install-recommends"
[ "${1:-}" = "--torch" ] && RECS=""
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $RECS $missing
rt=$(fuzzer_rt "${1:-}")
if [ -n "$rt" ]; then
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$rt"
fi

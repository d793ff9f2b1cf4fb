#!/bin/sh
# deps.sh [--check] [aarch64|browser]: the Debian packages Hearth builds
# against. `make deps` (which `make demo` and `make test` run first): the
# packages README.md names. `make deps-aarch64` (an opt-in): the cross
# compiler, qemu-user and the arm64 PCRE2 of the phone tests; it adds
# dpkg's arm64 architecture. `make deps-browser` (an opt-in): Debian's
# chromium for the page's test, and Node.js with npm for the client tests
# when no node and npm are on the PATH (a Node.js from elsewhere is kept). Only what is missing is installed, with apt-get install
# --no-upgrade --no-install-recommends (nothing already there is upgraded
# by name), apt's output in build/deps.log (HEARTH_DEPS_LOG); nothing is
# printed or run when everything is there. --check only looks: it prints
# the missing packages and exits 1, installing nothing.
set -e
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
pkgs="libsqlite3-dev libical-dev libcjson-dev libpcre2-dev libmicrohttpd-dev pkg-config"
target=deps
if [ "${1:-}" = aarch64 ]; then
    pkgs="gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user libpcre2-dev:arm64"
    target=deps-aarch64
elif [ "${1:-}" = browser ]; then
    pkgs="chromium"
    command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || pkgs="$pkgs nodejs npm"
    target=deps-browser
elif pkg-config --exists sqlite3 libical libcjson libpcre2-8 libmicrohttpd 2>/dev/null; then
    exit 0 # the libraries are there (from these packages or built by hand)
fi
# Installed for this machine: a package named without an architecture
# counts only as this machine's own (or arch-independent) build, so that
# libpcre2-dev:arm64 of deps-aarch64 does not pass for libpcre2-dev.
native=$(dpkg --print-architecture 2>/dev/null || echo none)
installed() {
    case $1 in
    *:*) dpkg-query -W -f='${Status}\n' "$1" 2>/dev/null | grep -q "ok installed" ;;
    *) dpkg-query -W -f='${Status} ${Architecture}\n' "$1" 2>/dev/null |
           grep -Eq "ok installed ($native|all)\$" ;;
    esac
}
missing=""
for p in $pkgs; do
    installed "$p" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ $check = 1 ]; then
    echo "$missing"
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "hearth: missing$missing, and apt-get is not here (not Debian): install them by hand" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "hearth: missing Debian packages:$missing; as root: make $target" \
         "(or: sudo apt-get install --no-upgrade$missing)" >&2
    exit 1
fi
log=${HEARTH_DEPS_LOG:-build/deps.log}
mkdir -p "$(dirname "$log")"
if [ $target = deps-aarch64 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
    echo "hearth: added dpkg's arm64 architecture (for libpcre2-dev:arm64)" >&2
fi
echo "hearth: installing$missing (apt-get's output in $log)" >&2
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086
if ! { apt-get update && apt-get install -y --no-upgrade --no-install-recommends $missing; } \
        >"$log" 2>&1; then
    echo "hearth: apt-get could not install$missing; its output is in $log, ending:" >&2
    tail -n 5 "$log" >&2
    exit 1
fi
echo "hearth: installed$missing" >&2

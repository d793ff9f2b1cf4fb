#!/bin/sh
# deps.sh: installs the Debian packages Hearth builds against, if missing.
# Quiet and quick when everything is there; called by the Makefile.
set -e
pkgs="libsqlite3-dev libical-dev libcjson-dev libpcre2-dev pkg-config"
# `deps.sh aarch64` (make test, make test-aarch64): the cross compiler,
# qemu-user and the arm64 PCRE2 the engine links (Debian multiarch).
if [ "${1:-}" = aarch64 ]; then
    pkgs="gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user libpcre2-dev:arm64"
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        [ "$(id -u)" -eq 0 ] || { echo "hearth: not root; run: sudo dpkg --add-architecture arm64" >&2; exit 1; }
        dpkg --add-architecture arm64
    fi
fi
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
        missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "hearth: installing build dependencies:$missing" >&2
if [ "$(id -u)" -ne 0 ]; then
    echo "hearth: not root; run: sudo apt-get install -y$missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq $missing >&2

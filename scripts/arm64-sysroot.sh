#!/bin/sh
# arm64-sysroot.sh DIR: the arm64 libraries the whole `hearth` links (SQLite,
# libical with ICU and Berkeley DB, cJSON, PCRE2, libmicrohttpd with GnuTLS
# and what GnuTLS links), headers and shared objects,
# fetched as Debian .deb files with `apt-get download PKG:arm64` and unpacked
# with `dpkg-deb -x` into DIR (default build/aarch64-sysroot). Nothing is
# installed: libical-dev:arm64 cannot be installed next to the host's. glibc,
# libgcc and libstdc++ are not fetched: they come from the cross compiler's
# packages (/usr/aarch64-linux-gnu), so that loader and libc are one build.
# Quick when DIR is complete; exits non-zero, saying why, when it cannot be.
set -e
dest=${1:-build/aarch64-sysroot}
pkgs="libsqlite3-dev libsqlite3-0 libical-dev libical3 libicu72 libdb5.3
libcjson-dev libcjson1 libpcre2-dev libpcre2-8-0 libmicrohttpd-dev libmicrohttpd12
libgnutls30 libp11-kit0 libidn2-0 libunistring2 libtasn1-6 libnettle8 libhogweed6 libgmp10
libffi8"
stamp="$dest/.complete"
want=$(echo $pkgs)
[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && exit 0
for t in apt-get apt-cache dpkg-deb; do
    command -v $t >/dev/null 2>&1 || { echo "arm64-sysroot: $t not found (not Debian?)" >&2; exit 1; }
done
if ! apt-cache show libsqlite3-0:arm64 >/dev/null 2>&1; then
    [ "$(id -u)" -eq 0 ] || { echo "arm64-sysroot: apt knows no arm64 packages; run as root: dpkg --add-architecture arm64 && apt-get update" >&2; exit 1; }
    dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
    apt-get update -qq >&2 || true
    apt-cache show libsqlite3-0:arm64 >/dev/null 2>&1 ||
        { echo "arm64-sysroot: no arm64 packages in the apt lists after apt-get update" >&2; exit 1; }
fi
mkdir -p "$(dirname "$dest")"
tmp=$(mktemp -d "$dest.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "arm64-sysroot: fetching the arm64 packages of$(printf ' %s' $pkgs) into $dest" >&2
# apt's _apt user may not write here; the download then runs as the caller
chmod 755 "$tmp"
mkdir "$tmp/debs" "$tmp/root"
args=""
for p in $pkgs; do args="$args $p:arm64"; done
# shellcheck disable=SC2086
if ! (cd "$tmp/debs" && apt-get download -q $args) >"$tmp/log" 2>&1; then
    echo "arm64-sysroot: apt-get download failed:" >&2
    tail -n 5 "$tmp/log" >&2
    exit 1
fi
for d in "$tmp"/debs/*.deb; do dpkg-deb -x "$d" "$tmp/root"; done
lib="$tmp/root/usr/lib/aarch64-linux-gnu"
for so in libsqlite3.so libical.so libcjson.so libpcre2-8.so libmicrohttpd.so; do
    [ -e "$lib/$so" ] || { echo "arm64-sysroot: $so missing from the packages" >&2; exit 1; }
done
rm -rf "$tmp/root/usr/share/doc" "$tmp/root/usr/share/man"
(cd "$tmp/debs" && ls) >"$tmp/root/.packages"
echo "$want" >"$tmp/root/.complete"
# another build may have finished first: then keep the one in place
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    rm -rf "$dest"
    mv -T "$tmp/root" "$dest" 2>/dev/null || true
fi
[ "$(cat "$stamp" 2>/dev/null)" = "$want" ] || { echo "arm64-sysroot: could not move the sysroot into $dest" >&2; exit 1; }
echo "arm64-sysroot: ready in $dest" >&2

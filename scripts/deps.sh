#!/bin/sh
# deps.sh: installs the Debian packages Hearth builds against, if missing.
# Quiet and quick when everything is there; called by the Makefile.
set -e
pkgs="libsqlite3-dev libical-dev libcjson-dev libpcre2-dev pkg-config"
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

#!/bin/sh
# node_setup.sh NAME: sourced by the client and page tests of hearth serve:
# finds node and npm, installs tests/serve/package.json's packages (pinned
# by its package-lock.json) with `npm ci` into $HEARTH_BUILD/serve-node
# once, and copies the test scripts there (their imports resolve in its
# node_modules). Sets NODE_DIR; where something is missing it prints the
# test's skip line, with the reason and the command that fixes it, and
# exits 0.
name=$1
build=${HEARTH_BUILD:-build}
NODE_DIR=$(cd "$build" && pwd)/serve-node
skip() {
    echo "skip $name: $*"
    exit 0
}
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 ||
    skip "no node and npm on the PATH (make deps-browser installs Debian's, as root)"
major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
[ "$major" -ge 18 ] 2>/dev/null || skip "node $(node --version 2>/dev/null) is older than 18"
[ -x "$build/hearth" ] || skip "$build/hearth is not built"
mkdir -p "$NODE_DIR"
if ! cmp -s tests/serve/package-lock.json "$NODE_DIR/package-lock.json" ||
   [ ! -d "$NODE_DIR/node_modules" ]; then
    rm -rf "$NODE_DIR/node_modules"
    cp tests/serve/package.json tests/serve/package-lock.json "$NODE_DIR/"
    if ! (cd "$NODE_DIR" && timeout 300 npm ci --no-audit --no-fund >npm.log 2>&1); then
        rm -f "$NODE_DIR/package-lock.json"
        skip "npm could not install the test packages (no registry?): cd $NODE_DIR && npm ci; its output is in $NODE_DIR/npm.log"
    fi
fi
cp tests/serve/*.mjs "$NODE_DIR/"
export NODE_DIR
export HEARTH_ROOT=$(pwd)
export HEARTH_BIN=$(cd "$build" && pwd)/hearth

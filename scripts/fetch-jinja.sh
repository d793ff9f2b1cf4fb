#!/bin/sh
# fetch-jinja.sh: installs @huggingface/jinja (a Jinja implementation in
# JavaScript, MIT) from the npm registry into build/jinja/, the reference
# renderer of the chat-template transcript tests. Nothing of it is
# committed. Exits non-zero (and the tests skip) without node or npm.
set -e
ver=0.5.11
dest=${HEARTH_JINJA:-build/jinja}
[ -f "$dest/.complete-$ver" ] && exit 0
command -v node >/dev/null 2>&1 || { echo "fetch-jinja: node not found" >&2; exit 1; }
command -v npm >/dev/null 2>&1 || { echo "fetch-jinja: npm not found" >&2; exit 1; }
mkdir -p "$dest"
(cd "$dest" && npm install --silent --no-audit --no-fund --no-save \
    "@huggingface/jinja@$ver" >/dev/null 2>&1) ||
    { echo "fetch-jinja: npm install @huggingface/jinja@$ver failed" >&2; exit 1; }
touch "$dest/.complete-$ver"

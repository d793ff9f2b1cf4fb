#!/bin/sh
# fetch-reference.sh: fetches the llama.cpp reference (a CPU build published
# on the npm registry, see ../shared/docs/REFERENCE.md) into
# build/reference/: bins/ holds libllama and the ggml CPU variants, include/
# the llama.h and ggml headers of the same commit. Nothing of it is
# committed. Exits non-zero (and tests skip) where npm cannot be reached.
set -e
ver=3.22.1
dest=${HEARTH_REFERENCE:-build/reference}
[ -f "$dest/.complete-$ver" ] && exit 0
command -v npm >/dev/null 2>&1 || { echo "fetch-reference: npm not found" >&2; exit 1; }
command -v git >/dev/null 2>&1 || { echo "fetch-reference: git not found" >&2; exit 1; }
mkdir -p "$dest"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch-reference: llama.cpp via npm (@node-llama-cpp/linux-x64@$ver)" >&2
(cd "$tmp" && npm pack --silent "@node-llama-cpp/linux-x64@$ver" \
    "node-llama-cpp@$ver" >/dev/null 2>&1)
tar -xzf "$tmp/node-llama-cpp-linux-x64-$ver.tgz" -C "$tmp"
rm -rf "$dest/bins"
mkdir -p "$dest/bins"
cp "$tmp"/package/bins/linux-x64/*.so "$dest/bins/"
mkdir -p "$tmp/src"
tar -xzf "$tmp/node-llama-cpp-$ver.tgz" -C "$tmp/src" package/llama/gitRelease.bundle
bundle="$tmp/src/package/llama/gitRelease.bundle"
git init -q "$tmp/git"
(cd "$tmp/git" && git bundle unbundle "$bundle" >"$tmp/refs" 2>/dev/null)
rev=$(awk 'NR==1{print $1}' "$tmp/refs")
mkdir -p "$dest/include"
for h in include/llama.h ggml/include/ggml.h ggml/include/ggml-cpu.h \
         ggml/include/ggml-backend.h ggml/include/ggml-alloc.h \
         ggml/include/ggml-opt.h; do
    (cd "$tmp/git" && git show "$rev:$h") >"$dest/include/${h##*/}" 2>/dev/null || true
done
[ -s "$dest/include/llama.h" ] || { echo "fetch-reference: llama.h not found in bundle" >&2; exit 1; }
echo "$rev" >"$dest/commit"
touch "$dest/.complete-$ver"
echo "fetch-reference: ready in $dest (llama.cpp $rev)" >&2

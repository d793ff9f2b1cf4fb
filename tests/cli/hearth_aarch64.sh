#!/bin/sh
# hearth_aarch64.sh X86_HEARTH AARCH64_HEARTH: the whole `hearth` cross-built
# for aarch64 (AARCH64_HEARTH: a command running it, the qemu-user wrapper
# `make hearth-aarch64` writes) against the x86-64 build on the same inputs:
# `info` on the project's model, and a one-shot `ask` in a fresh sample world
# (tests/fixtures/world, as `make demo` makes it) at temperature 0, whose
# tool calls and answer must be the same. Prints tests/test.h-style lines
# (ok, FAIL, skip) for tests/run.sh; exits 1 on a failure.
set -u
x86=$1
arm=$2
model=${HEARTH_TEST_MODEL:-models/hearth-tiny.gguf}
# One tool and a short result keep the prompt near 550 tokens: the run costs
# about 11 CPU-s under qemu (about 20 ms per token there, 0.3 natively).
request="What is on my calendar on Saturday?"
opts="--yes --temp 0 -t 2 --tools calendar.list_events --no-memory --max-tokens 200 --timeout 3000"
fails=0

ok() { echo "ok   $1"; }
fail() {
    echo "FAIL $1: $2"
    fails=$((fails + 1))
}

if [ ! -f "$model" ]; then
    echo "skip info_as_on_x86: no model at $model"
    echo "skip ask_as_on_x86: no model at $model"
    exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hearth-aarch64.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# `info` prints the same description; the governor line carries the load.
for a in x86 arm; do
    eval "bin=\$$a"
    "$bin" info -m "$model" >"$tmp/info.$a" 2>&1
    echo $? >"$tmp/info.$a.rc"
    grep -v '^governor' "$tmp/info.$a" >"$tmp/info.$a.cmp"
done
if [ "$(cat "$tmp/info.arm.rc")" != 0 ]; then
    fail info_as_on_x86 "aarch64 hearth info exited $(cat "$tmp/info.arm.rc"): $(head -n 3 "$tmp/info.arm")"
elif ! grep -q '^architecture *qwen3' "$tmp/info.arm.cmp"; then
    fail info_as_on_x86 "no architecture line: $(head -n 3 "$tmp/info.arm")"
elif ! cmp -s "$tmp/info.x86.cmp" "$tmp/info.arm.cmp"; then
    fail info_as_on_x86 "differs from x86-64: $(diff "$tmp/info.x86.cmp" "$tmp/info.arm.cmp" | head -n 6)"
else
    ok info_as_on_x86
fi

# `ask` in a fresh world each, clock fixed.
for a in x86 arm; do
    eval "bin=\$$a"
    home=$tmp/home.$a
    mkdir -p "$home/config"
    cp -r tests/fixtures/world/. "$home/config/"
    mkdir -p "$home/config/files" # the config's file root: ask checks it is there
    # shellcheck disable=SC2086
    HEARTH_HOME=$home HEARTH_NOW=2026-12-01T09:00:00+01:00 \
        "$bin" ask "$request" --model "$model" $opts >"$tmp/ask.$a" 2>"$tmp/ask.$a.err"
    echo $? >"$tmp/ask.$a.rc"
    grep -- '->' "$tmp/ask.$a.err" >"$tmp/calls.$a"
done
if [ "$(cat "$tmp/ask.x86.rc")" != 0 ]; then
    fail ask_as_on_x86 "x86-64 hearth ask exited $(cat "$tmp/ask.x86.rc"): $(tail -n 2 "$tmp/ask.x86.err")"
elif [ "$(cat "$tmp/ask.arm.rc")" != 0 ]; then
    fail ask_as_on_x86 "aarch64 hearth ask exited $(cat "$tmp/ask.arm.rc"): $(tail -n 2 "$tmp/ask.arm.err")"
elif ! grep -q 'calendar.list_events' "$tmp/calls.arm" || ! grep -q '^ *ok ' "$tmp/ask.arm.err"; then
    fail ask_as_on_x86 "no successful calendar.list_events call: $(head -n 4 "$tmp/ask.arm.err")"
elif ! [ -s "$tmp/ask.arm" ]; then
    fail ask_as_on_x86 "no answer on stdout"
elif ! cmp -s "$tmp/calls.x86" "$tmp/calls.arm"; then
    fail ask_as_on_x86 "tool calls differ: $(diff "$tmp/calls.x86" "$tmp/calls.arm" | head -n 6)"
elif ! cmp -s "$tmp/ask.x86" "$tmp/ask.arm"; then
    fail ask_as_on_x86 "answers differ: $(diff "$tmp/ask.x86" "$tmp/ask.arm" | head -n 6)"
else
    ok ask_as_on_x86
    echo "#    $(cat "$tmp/calls.arm") -> $(cat "$tmp/ask.arm")"
fi
[ "$fails" -eq 0 ]

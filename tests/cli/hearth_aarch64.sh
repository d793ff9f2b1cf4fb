#!/bin/sh
# hearth_aarch64.sh X86_HEARTH AARCH64_HEARTH: the whole `hearth` cross-built
# for aarch64 (AARCH64_HEARTH: a command running it, the qemu-user wrapper
# `make hearth-aarch64` writes) against the x86-64 build on the same inputs:
# `info` on the project's model, and a one-shot `ask` in a fresh sample world
# (tests/fixtures/world, as `make demo` makes it) at temperature 0, whose
# tool calls and answer must be the same, and `serve` answering the same
# chat completion over loopback TCP. Prints tests/test.h-style lines
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
    echo "skip serve_as_on_x86: no model at $model"
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
# `serve`: one chat completion with a call required, over loopback TCP
# (bash's /dev/tcp: no HTTP client needed); ids and times left out.
body='{"messages": [{"role": "user", "content": "What is the weather in Paris?"}], "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}], "tool_choice": "required", "temperature": 0}'
serve_once() { # serve_once BIN DIR: the answer's body in DIR/resp
    home=$2/home
    mkdir -p "$home/config" "$2/run"
    chmod 700 "$2/run"
    cp -r tests/fixtures/world/. "$home/config/"
    mkdir -p "$home/config/files"
    HEARTH_HOME=$home "$1" serve --socket "$2/run/s.sock" --listen 127.0.0.1:0 \
        --model "$model" -t 2 2>"$2/log" &
    pid=$!
    port=
    for _ in $(seq 1 240); do
        port=$(sed -n 's|^http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$2/log")
        [ -n "$port" ] && break
        sleep 0.5
    done
    if [ -n "$port" ]; then
        HX_PORT=$port HX_TOKEN=$(cat "$home/config/serve-token") HX_BODY=$body bash -c '
            exec 3<>/dev/tcp/127.0.0.1/$HX_PORT
            printf "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %s\r\nConnection: close\r\n\r\n%s" \
                "$HX_PORT" "$HX_TOKEN" "${#HX_BODY}" "$HX_BODY" >&3
            cat <&3' | tr -d '\r' | sed '1,/^$/d' |
            sed -e 's/"id":"[^"]*"//g' -e 's/"created":[0-9]*//g' >"$2/resp"
    fi
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
}
for a in x86 arm; do
    eval "bin=\$$a"
    mkdir -p "$tmp/serve.$a"
    serve_once "$bin" "$tmp/serve.$a"
done
if ! grep -q '"finish_reason":"tool_calls"' "$tmp/serve.arm/resp" 2>/dev/null; then
    fail serve_as_on_x86 "no tool call from the aarch64 server: $(tail -n 3 "$tmp/serve.arm/log") $(head -c 300 "$tmp/serve.arm/resp" 2>/dev/null)"
elif ! cmp -s "$tmp/serve.x86/resp" "$tmp/serve.arm/resp"; then
    fail serve_as_on_x86 "answers differ: $(diff "$tmp/serve.x86/resp" "$tmp/serve.arm/resp" | head -n 4)"
else
    ok serve_as_on_x86
fi
[ "$fails" -eq 0 ]

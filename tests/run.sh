#!/usr/bin/env bash
# run.sh: runs every test binary given on the command line, shows their
# lines, and ends with "N passed, N failed, N skipped"; exits 1 on any failure.
# A binary that crashes, times out or exits non-zero without a FAIL line
# counts as one failure. HX_TEST_TIMEOUT (seconds, default 600) bounds each.
set -u
pass=0 fail=0 skip=0
timeout_s=${HX_TEST_TIMEOUT:-600}
for bin in "$@"; do
    [ -x "$bin" ] || continue
    name=${bin##*/tests/}
    echo "== $name"
    t0=$(date +%s%N)
    out=$(timeout -k 10 "$timeout_s" "$bin" 2>&1)
    rc=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
    printf '%s\n' "$out" | grep -v '^# [0-9]* passed' 
    p=$(printf '%s\n' "$out" | grep -c '^ok ')
    f=$(printf '%s\n' "$out" | grep -c '^FAIL ')
    s=$(printf '%s\n' "$out" | grep -c '^skip ')
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
            echo "FAIL $name: timed out after ${timeout_s}s"
        else
            echo "FAIL $name: exited with status $rc"
        fi
        f=1
    fi
    printf '   (%s: %d.%d s)\n' "$name" $((ms / 1000)) $((ms % 1000 / 100))
    pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
done
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]

#!/bin/sh
# eval-samples.sh MODEL OUTDIR: bench/agent-eval on the five held-out
# samples models/README.md reports (--n 300 --seed S for S = 1, 7, 11, 13,
# and the 300 tasks of `hearth datagen --tasks --split heldout --n 300
# --seed 2001`), one model thread each, in two lanes at once (2 cores),
# then their sums: single-call tasks, multi-call scheduling, all, calls
# schema-valid, answers stating what a read found. Per sample: OUTDIR/S.txt
# (agent-eval's report) and OUTDIR/S.jsonl (per-task results). HEARTH and
# AGENT_EVAL name the binaries (default build/hearth, build/bench/agent-eval).
set -eu
MODEL=$1
OUT=$2
HEARTH=${HEARTH:-build/hearth}
AGENT_EVAL=${AGENT_EVAL:-build/bench/agent-eval}
mkdir -p "$OUT"
[ -s "$OUT/tasks-s4.jsonl.in" ] ||
    "$HEARTH" datagen --tasks --split heldout --n 300 --seed 2001 -o "$OUT/tasks-s4.jsonl.in" >/dev/null

# lane NAME-ARGS...: each "name:agent-eval args" in turn
lane() {
    for spec in "$@"; do
        name=${spec%%:*}
        # shellcheck disable=SC2086
        "$AGENT_EVAL" --model "$MODEL" ${spec#*:} --threads 1 --log "$OUT/$name.jsonl" \
            >"$OUT/$name.txt" 2>&1
    done
}
lane "s1:--n 300 --seed 1" "s7:--n 300 --seed 7" "s11:--n 300 --seed 11" &
lane "s13:--n 300 --seed 13" "s4:--tasks $OUT/tasks-s4.jsonl.in" &
wait

# the sums of the five reports' "  <row>  passed/total" lines
awk '
    /^  single /                  { split($2, a, "/"); s[1] += a[1]; t[1] += a[2] }
    /^  multi-call scheduling /   { split($3, a, "/"); s[2] += a[1]; t[2] += a[2] }
    /^  all /                     { split($2, a, "/"); s[3] += a[1]; t[3] += a[2] }
    /^  schema-valid calls /      { split($3, a, "/"); s[4] += a[1]; t[4] += a[2] }
    /^  answers stating /         { split($(NF-1), a, "/"); s[5] += a[1]; t[5] += a[2] }
    END {
        split("single-call tasks|multi-call scheduling|all tasks|calls schema-valid|answers stating what the read found", n, "|")
        for (i = 1; i <= 5; i++)
            printf "%-40s %5d of %5d  %5.1f%%\n", n[i], s[i], t[i], t[i] ? 100 * s[i] / t[i] : 0
    }' "$OUT"/s1.txt "$OUT"/s7.txt "$OUT"/s11.txt "$OUT"/s13.txt "$OUT"/s4.txt |
    tee "$OUT/summary.txt"

#!/bin/sh
# quant-table.sh: issue 11's proof on the project's own model: hearth-tiny
# at F32, Q8_0, and Q4_K_M without and with calibration (on held-out
# conversations the loss does not use), with file size, bits per weight,
# held-out loss, logits against llama.cpp and agent-evaluation success.
# Writes $TINY_DIR/quant-table.md. Usage: scripts/quant-table.sh [BUILD]
# Knobs: TINY_DIR (build/tiny, from make tiny-model), QT_LOSS_N (200
# conversations), QT_CALIB_N (100), QT_TASKS_N (100 evaluation tasks).
set -eu
B=${1:-build}
D=${TINY_DIR:-build/tiny}
LOSS_N=${QT_LOSS_N:-200}
CALIB_N=${QT_CALIB_N:-100}
TASKS_N=${QT_TASKS_N:-100}
F32=$D/model-f32.gguf
for f in "$F32" "$D/heldout.jsonl" "$D/tasks.jsonl"; do
    [ -s "$f" ] || { echo "quant-table: $f missing (make tiny-model first)" >&2; exit 1; }
done
say() { printf '[quant-table] %s\n' "$*" >&2; }

say "calibration text: held-out conversations $LOSS_N..$((LOSS_N + CALIB_N - 1))"
"$B/bench/quant-table" --heldout "$D/heldout.jsonl" --skip "$LOSS_N" --n "$CALIB_N" \
    --dump "$D/calib.txt"
for t in Q8_0 Q4_K_M; do
    say "quantize $t"
    nice "$B/hearth" quantize "$F32" "$D/qt-$t.gguf" --type $t >"$D/qt-$t.log" 2>&1
done
say "quantize Q4_K_M calibrated"
nice "$B/hearth" quantize "$F32" "$D/qt-Q4_K_M-cal.gguf" --type Q4_K_M \
    --calibrate "$D/calib.txt" >"$D/qt-Q4_K_M-cal.log" 2>&1

OUT=$D/quant-table.md
say "held-out loss and llama.cpp logits"
HEARTH_BUILD=$B nice "$B/bench/quant-table" --heldout "$D/heldout.jsonl" --n "$LOSS_N" \
    F32="$F32" Q8_0="$D/qt-Q8_0.gguf" Q4_K_M="$D/qt-Q4_K_M.gguf" \
    Q4_K_M+calibration="$D/qt-Q4_K_M-cal.gguf" >"$OUT"
printf '\nAgent evaluation (held-out tasks, greedy):\n\n' >>"$OUT"
for m in "F32 $F32" "Q8_0 $D/qt-Q8_0.gguf" "Q4_K_M $D/qt-Q4_K_M.gguf" \
         "Q4_K_M+calibration $D/qt-Q4_K_M-cal.gguf"; do
    set -- $m
    say "agent-eval $1"
    head -n "$TASKS_N" "$D/tasks.jsonl" >"$D/qt-tasks.jsonl"
    nice "$B/bench/agent-eval" --model "$2" --tasks "$D/qt-tasks.jsonl" \
        >"$D/qt-eval-$1.txt" 2>&1 || true
    printf -- '- %s: %s\n' "$1" "$(grep -E '^ +(all|single|multi-call|schema)' \
        "$D/qt-eval-$1.txt" | tr -s ' ' | paste -sd ';' -)" >>"$OUT"
done
cat "$OUT"

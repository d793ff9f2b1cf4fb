#!/bin/sh
# quant-table.sh: quantization measured on the project's own model: hearth-tiny
# at F32, Q8_0, Q4_K_M and Q4_0, the two 4-bit presets without and with
# calibration, with file size, bits per weight, held-out loss (with paired
# differences and standard errors), logits against llama.cpp and
# agent-evaluation success. Writes $TINY_DIR/quant-table.md.
# Usage: scripts/quant-table.sh [BUILD]
# Knobs: TINY_DIR (build/tiny, from make tiny-model: heldout.jsonl,
# tasks.jsonl, train.jsonl), QT_MODEL (the F32 model; $TINY_DIR/model-f32.gguf),
# QT_LOSS_N (500 held-out conversations: all of them), QT_CALIB_FROM
# (the calibration conversations: $TINY_DIR/train.jsonl, never the held-out
# ones), QT_CALIB_N (200 of them), QT_TASKS_N (100 evaluation tasks; 0
# skips the agent evaluation), QT_THREADS (2).
set -eu
B=${1:-build}
D=${TINY_DIR:-build/tiny}
F32=${QT_MODEL:-$D/model-f32.gguf}
LOSS_N=${QT_LOSS_N:-500}
CALIB_FROM=${QT_CALIB_FROM:-$D/train.jsonl}
CALIB_N=${QT_CALIB_N:-200}
TASKS_N=${QT_TASKS_N:-100}
TH=${QT_THREADS:-2}
for f in "$F32" "$D/heldout.jsonl" "$D/tasks.jsonl" "$CALIB_FROM"; do
    [ -s "$f" ] || { echo "quant-table: $f missing (make tiny-model first, or set" \
                          "TINY_DIR / QT_MODEL / QT_CALIB_FROM)" >&2; exit 1; }
done
say() { printf '[quant-table] %s\n' "$*" >&2; }
# Calibration text never overlaps the evaluation: from another file, or
# from the held-out file past the conversations the loss uses.
SKIP=0
[ "$(realpath "$CALIB_FROM")" = "$(realpath "$D/heldout.jsonl")" ] && SKIP=$LOSS_N

say "calibration text: $CALIB_FROM conversations $SKIP..$((SKIP + CALIB_N - 1))"
"$B/bench/quant-table" --heldout "$CALIB_FROM" --skip "$SKIP" --n "$CALIB_N" \
    --dump "$D/calib.txt"
for t in Q8_0 Q4_K_M Q4_0; do
    say "quantize $t"
    nice "$B/hearth" quantize "$F32" "$D/qt-$t.gguf" --type $t --threads "$TH" \
        >"$D/qt-$t.log" 2>&1
done
say "calibrate (imatrix) and quantize Q4_K_M, Q4_0"
nice "$B/hearth" quantize "$F32" "$D/qt-Q4_K_M-cal.gguf" --type Q4_K_M --threads "$TH" \
    --calibrate "$D/calib.txt" --calib-special --imatrix-out "$D/qt-imatrix.gguf" \
    >"$D/qt-Q4_K_M-cal.log" 2>&1
nice "$B/hearth" quantize "$F32" "$D/qt-Q4_0-cal.gguf" --type Q4_0 --threads "$TH" \
    --imatrix "$D/qt-imatrix.gguf" >"$D/qt-Q4_0-cal.log" 2>&1

OUT=$D/quant-table.md
say "held-out loss ($LOSS_N conversations) and llama.cpp logits"
HEARTH_BUILD=$B nice "$B/bench/quant-table" --heldout "$D/heldout.jsonl" --n "$LOSS_N" \
    --threads "$TH" --pair Q4_K_M,Q4_K_M+calibration --pair Q4_0,Q4_0+calibration \
    F32="$F32" Q8_0="$D/qt-Q8_0.gguf" Q4_K_M="$D/qt-Q4_K_M.gguf" \
    Q4_K_M+calibration="$D/qt-Q4_K_M-cal.gguf" Q4_0="$D/qt-Q4_0.gguf" \
    Q4_0+calibration="$D/qt-Q4_0-cal.gguf" >"$OUT"
if [ "$TASKS_N" -gt 0 ]; then
    printf '\nAgent evaluation (%s held-out tasks, greedy):\n\n' "$TASKS_N" >>"$OUT"
    head -n "$TASKS_N" "$D/tasks.jsonl" >"$D/qt-tasks.jsonl"
    for m in "F32 $F32" "Q8_0 $D/qt-Q8_0.gguf" "Q4_K_M $D/qt-Q4_K_M.gguf" \
             "Q4_K_M+calibration $D/qt-Q4_K_M-cal.gguf" "Q4_0 $D/qt-Q4_0.gguf" \
             "Q4_0+calibration $D/qt-Q4_0-cal.gguf"; do
        set -- $m
        say "agent-eval $1"
        nice "$B/bench/agent-eval" --model "$2" --tasks "$D/qt-tasks.jsonl" \
            >"$D/qt-eval-$1.txt" 2>&1 || true
        printf -- '- %s: %s\n' "$1" "$(grep -E '^ +(all|single|multi-call|schema)' \
            "$D/qt-eval-$1.txt" | tr -s ' ' | paste -sd ';' -)" >>"$OUT"
    done
fi
cat "$OUT"

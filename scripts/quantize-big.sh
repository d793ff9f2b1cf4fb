#!/bin/sh
# quantize-big.sh: quantizing streams: a random-weight F16 model of
# Qwen3-0.6B's shape (Qwen2 tokenizer) quantized to Q4_K_M, plain and with
# an importance matrix calibrated on a short text: CPU time, wall time and
# peak RSS against the F16 file. Usage: scripts/quantize-big.sh [BUILD]
# Knobs: QB_DIR (scratch for the 1.2 GB model; $TMPDIR or /tmp, removed
# after unless QB_KEEP=1), QB_THREADS (2), HEARTH_SHARED_DATA (the vocab).
set -eu
B=${1:-build}
T=${QB_DIR:-${TMPDIR:-/tmp}}
TH=${QB_THREADS:-2}
V=${HEARTH_SHARED_DATA:-../shared/data}/vocab/ggml-vocab-qwen2.gguf
IN=$T/hx-q06-f16.gguf
[ -s "$V" ] || { echo "quantize-big: $V missing (set HEARTH_SHARED_DATA)" >&2; exit 1; }
say() { printf '[quantize-big] %s\n' "$*" >&2; }
mkdir -p "$T"

[ -s "$IN" ] || { say "writing $IN"; nice "$B/hearth" mkmodel -o "$IN" --type F16 \
    --layers 28 --embd 1024 --heads 16 --heads-kv 8 --head-dim 128 --ff 3072 \
    --vocab "$V" --tied >/dev/null; }
# Calibration text: the first 2 KB of the README (a few hundred tokens).
head -c 2048 README.md >"$T/hx-q06-calib.txt"

# run LABEL ARGS...: one quantization under /usr/bin/time, one table row.
run() {
    label=$1; shift
    say "quantize $label"
    nice /usr/bin/time -v "$B/hearth" quantize "$IN" "$T/hx-q06-q4km.gguf" --type Q4_K_M \
        --threads "$TH" "$@" >"$T/hx-q06.log" 2>"$T/hx-q06-time.txt"
    awk -v label="$label" -v in_bytes="$(wc -c <"$IN")" \
        -v out_bytes="$(wc -c <"$T/hx-q06-q4km.gguf")" -F': ' '
        /User time/ { u = $2 } /System time/ { s = $2 }
        /Elapsed/ { w = $2 } /Maximum resident/ { r = $2 / 1024 }
        END { printf "| %s | %.1f MiB | %.1f s + %.1f s | %s | %.0f MiB (%.0f%% of the F16 file) |\n",
              label, out_bytes / 1048576, u, s, w, r, 100 * r * 1048576 / in_bytes }' \
        "$T/hx-q06-time.txt"
}
printf '| Q4_K_M of a %s MiB F16 file | output | CPU user + system | wall | peak RSS |\n' \
    "$(($(wc -c <"$IN") / 1048576))"
printf '|---|---:|---:|---:|---:|\n'
run "plain"
run "calibrated (imatrix collection included)" --calibrate "$T/hx-q06-calib.txt"
grep -E "calibrated on" "$T/hx-q06.log" >&2 || true
rm -f "$T/hx-q06-q4km.gguf" "$T/hx-q06-calib.txt" "$T/hx-q06.log" "$T/hx-q06-time.txt"
[ "${QB_KEEP:-0}" = 1 ] || rm -f "$IN"

#!/bin/sh
# tiny-model.sh: builds models/hearth-tiny.gguf from nothing (generated
# conversations, a BPE vocabulary, a 6 x 256 qwen3 trained from scratch on 2
# threads, Q8_0) and writes models/README.md with the recipe and figures.
#
# Usage: scripts/tiny-model.sh [HEARTH_BINARY]   (make tiny-model)
# Every stage writes into $TINY_DIR (build/tiny) and is skipped when its
# output exists; training checkpoints every few steps and resumes after a
# kill (run the script again). Remove $TINY_DIR/<file> to redo a stage.
# Knobs (environment): TINY_DIR, TINY_OUT (models/hearth-tiny.gguf),
# TINY_N_TRAIN (conversations, 20000), TINY_N_HELDOUT (1000), TINY_N_TASKS
# (500), TINY_SEED (1), TINY_THREADS (2), TINY_STEPS (optimizer steps,
# 2500: the schedule's length, so the model does not depend on how busy the
# machine is; in the brief style 6,750 s of training at 3,035 tokens/s in
# F32 on the 2 cores of an Intel Xeon at 2.3 GHz, 1 h 55 min from
# nothing; 3,000 compact-style steps took 2 h 11 min from nothing on an
# AMD EPYC in bfloat16, some 3 h 20 min on the Intel Xeon),
# TINY_BUDGET
# (training seconds, 0: none; > 0 ends the schedule early where the steps
# would take longer), TINY_CTX (2048: the model's context), TINY_SEQ (4096:
# a window's tokens; longer than TINY_CTX packs more conversations after
# one copy of the tool list, 23% more targets a token than 2048),
# TINY_BATCH (2), TINY_ACCUM (1), TINY_RECOMPUTE (off: the activations of a
# 2 x 4096 micro-batch, past auto's 1 GiB, are kept, not computed twice;
# hearth train --recompute), TINY_PRODUCTS (auto: hearth train times F32
# and bfloat16 products on the model's shape and takes the faster, keeping
# the choice in the checkpoint: bfloat16 was a fifth to a third faster a
# step on the AMD EPYC machines, F32 on the Intel Xeon, whose
# AVX512-BF16 runs at half the F32 rate; bf16 or f32 to force one;
# TINY_BF16=1 or 0 as before means bf16 or f32), TINY_LR (1e-3), TINY_WARMUP
# (100), TINY_LAYERS (6),
# TINY_BASE (none: from nothing; a GGUF: continue training that model, its
# shape and tokenizer, on the new data: no vocabulary stage and no shape
# knobs; set TINY_LR lower and TINY_WARMUP shorter for it), TINY_GROW (0;
# with TINY_BASE, N > 0: the base deepened by N layers, each a copy of the
# one before it whose output projections start at zero, hearth train
# --grow-layers),
# TINY_EMBD (256), TINY_HEADS (4), TINY_KV (2), TINY_HEAD_DIM (64),
# TINY_FF (768), TINY_VOCAB (4096), TINY_TARGET_WEIGHT (8: the assistant's
# turns count 8 times in BPE training), TINY_SPLIT_INITIAL (0; 1: a word's
# leading space or quote never merges with it, so a value after a JSON quote
# is the same tokens as in the request: hearth vocab train --split-initial),
# TINY_VALUE_WEIGHT (1: off; W > 1: the targets where a tool call's
# argument value starts or ends count W times in the loss, hearth train
# --value-weight; 4 was worse at 850 steps, models/HISTORY.md), TINY_QUANT (Q8_0), TINY_CKPT_EVERY (10 steps between
# checkpoints), TINY_STYLE (brief: the prompt style the vocabulary and the
# model are trained in, hearth.prompt_style; brief lists each tool as its
# name and argument names, 251 tokens for compact's 668 with descriptions
# and types, and trains 1.27x as many assistant tokens a second on the
# Intel Xeon; compact as the committed file).
set -eu

HEARTH=${1:-build/hearth}
DIR=${TINY_DIR:-build/tiny}
OUT=${TINY_OUT:-models/hearth-tiny.gguf}
N_TRAIN=${TINY_N_TRAIN:-20000}
N_HELDOUT=${TINY_N_HELDOUT:-1000}
N_TASKS=${TINY_N_TASKS:-500}
SEED=${TINY_SEED:-1}
THREADS=${TINY_THREADS:-2}
BUDGET=${TINY_BUDGET:-0}
STEPS=${TINY_STEPS:-2500}
CTX=${TINY_CTX:-2048}
SEQ=${TINY_SEQ:-4096}
BATCH=${TINY_BATCH:-2}
ACCUM=${TINY_ACCUM:-1}
RECOMPUTE=${TINY_RECOMPUTE:-off}
PRODUCTS_ASKED=${TINY_PRODUCTS:-auto}
[ "${TINY_BF16:-}" = 1 ] && PRODUCTS_ASKED=bf16
[ "${TINY_BF16:-}" = 0 ] && PRODUCTS_ASKED=f32
LR=${TINY_LR:-1e-3}
WARMUP=${TINY_WARMUP:-100}
LAYERS=${TINY_LAYERS:-6}
EMBD=${TINY_EMBD:-256}
HEADS=${TINY_HEADS:-4}
KV=${TINY_KV:-2}
HEAD_DIM=${TINY_HEAD_DIM:-64}
FF=${TINY_FF:-768}
VOCAB=${TINY_VOCAB:-4096}
BASE=${TINY_BASE:-}
GROW=${TINY_GROW:-0}
TARGET_WEIGHT=${TINY_TARGET_WEIGHT:-8}
SPLIT_INITIAL=
[ "${TINY_SPLIT_INITIAL:-0}" = 1 ] && SPLIT_INITIAL=--split-initial
VALUE_WEIGHT=${TINY_VALUE_WEIGHT:-1}
QUANT=${TINY_QUANT:-Q8_0}
STYLE=${TINY_STYLE:-brief}
CKPT_EVERY=${TINY_CKPT_EVERY:-10}
LENGTH="$STEPS steps"
[ "$BUDGET" = 0 ] || LENGTH="$STEPS steps or ${BUDGET} s, whichever ends first"
BUILD_DIR=$(dirname "$HEARTH")

[ -x "$HEARTH" ] || { echo "tiny-model: $HEARTH not built (make)" >&2; exit 1; }
mkdir -p "$DIR"
T_ALL=$(date +%s)

# One line per stage: [tiny k/7] name: what, then its time when done.
stage_start() {
    STAGE="$1"
    STAGE_T=$(date +%s)
    printf '[tiny %s] %s\n' "$1" "$2" >&2
}
stage_done() {
    printf '[tiny %s] done in %ss%s\n' "$STAGE" $(($(date +%s) - STAGE_T)) "${1:+: $1}" >&2
}
skip() { printf '[tiny %s] skipped: %s exists\n' "$1" "$2" >&2; }

# $1 output, then the command writing "$1.tmp": the output appears only
# once complete, so a killed stage reruns.
make_file() {
    out=$1
    shift
    rm -f "$out.tmp"
    "$@"
    mv "$out.tmp" "$out"
}

# 1. conversations (the real planner and tools, compact style)
if [ -s "$DIR/train.jsonl" ]; then skip 1/7 "$DIR/train.jsonl"; else
    stage_start 1/7 "datagen: $N_TRAIN training conversations, $N_HELDOUT held-out, $N_TASKS tasks"
    make_file "$DIR/heldout.jsonl" nice "$HEARTH" datagen --split heldout --n "$N_HELDOUT" \
        --seed $((SEED + 1000)) -o "$DIR/heldout.jsonl.tmp" 2>>"$DIR/datagen.log"
    make_file "$DIR/tasks.jsonl" nice "$HEARTH" datagen --tasks --split heldout --n "$N_TASKS" \
        --seed $((SEED + 2000)) -o "$DIR/tasks.jsonl.tmp" 2>>"$DIR/datagen.log"
    make_file "$DIR/train.jsonl" nice "$HEARTH" datagen --split train --n "$N_TRAIN" \
        --seed "$SEED" -o "$DIR/train.jsonl.tmp" 2>>"$DIR/datagen.log"
    stage_done "$(grep trajectories "$DIR/datagen.log" | tail -1)"
fi

# 2. vocabulary: byte-level BPE over the rendered training conversations
# (the final data mix), the assistant's turns counted TARGET_WEIGHT times
# so that merges go to what the model writes (values after a JSON quote);
# then how many tokens are rarely a target
if [ -n "$BASE" ]; then printf '[tiny 2/7] skipped: continuing %s, its tokenizer kept\n' "$BASE" >&2
elif [ -s "$DIR/vocab.gguf" ]; then skip 2/7 "$DIR/vocab.gguf"; else
    stage_start 2/7 "vocab: $VOCAB-token BPE on the training conversations, targets x$TARGET_WEIGHT"
    make_file "$DIR/vocab.gguf" nice "$HEARTH" vocab train --size "$VOCAB" \
        -o "$DIR/vocab.gguf.tmp" --chat "$DIR/train.jsonl" --style "$STYLE" \
        --target-weight "$TARGET_WEIGHT" $SPLIT_INITIAL >"$DIR/vocab.log" 2>&1
    nice "$HEARTH" vocab coverage --vocab "$DIR/vocab.gguf" --chat "$DIR/train.jsonl" \
        --style "$STYLE" >>"$DIR/vocab.log" 2>&1 || true
    stage_done "$(grep 'bytes/token' "$DIR/vocab.log" | tail -1); $(grep 'fewer than' "$DIR/vocab.log" | tail -1)"
fi

# 3. training, resumable: the checkpoint carries the step, the data
# position and the schedule fixed by the time budget
if [ -s "$DIR/model-f32.gguf" ]; then skip 3/7 "$DIR/model-f32.gguf"; else
    RESUME=
    [ -s "$DIR/train.ckpt" ] && RESUME=--resume
    WEIGHTED=
    [ "$VALUE_WEIGHT" -gt 1 ] && WEIGHTED=", value edges x$VALUE_WEIGHT"
    # from nothing: the shape and the vocabulary; continued: the base's
    MODEL="--vocab $DIR/vocab.gguf --layers $LAYERS --embd $EMBD --heads $HEADS --kv-heads $KV --head-dim $HEAD_DIM --ff $FF"
    SHAPE="${LAYERS}x$EMBD, $HEADS/$KV heads of $HEAD_DIM, ff $FF"
    [ -n "$BASE" ] && MODEL="--base $BASE --grow-layers $GROW" && SHAPE="continuing $BASE"
    [ -n "$BASE" ] && [ "$GROW" -gt 0 ] && SHAPE="$SHAPE with $GROW layers added"
    stage_start 3/7 "train: $STYLE style, $SHAPE, ${BATCH}x$SEQ tokens x $ACCUM per step, WSD lr $LR, $LENGTH, $THREADS threads, $PRODUCTS_ASKED products$WEIGHTED${RESUME:+ (resuming)}"
    # the per-step log line by line, so a kill loses none of it
    LINEBUF=
    command -v stdbuf >/dev/null 2>&1 && LINEBUF="stdbuf -oL"
    make_file "$DIR/model-f32.gguf" $LINEBUF nice "$HEARTH" train --chat "$DIR/train.jsonl" \
        --style "$STYLE" $MODEL --out "$DIR/model-f32.gguf.tmp" --svg "$DIR/loss.svg" \
        --ctx "$CTX" --seq "$SEQ" --batch "$BATCH" \
        --accum "$ACCUM" --recompute "$RECOMPUTE" --products "$PRODUCTS_ASKED" --value-weight "$VALUE_WEIGHT" \
        --lr "$LR" --warmup "$WARMUP" --steps "$STEPS" --wsd \
        --time-budget "$BUDGET" --threads "$THREADS" --seed "$SEED" \
        --ckpt "$DIR/train.ckpt" --ckpt-every "$CKPT_EVERY" $RESUME --log >>"$DIR/train.log"
    stage_done "$(grep '^trained' "$DIR/train.log" | tail -1)"
fi

# 4. quantize
if [ -s "$DIR/hearth-tiny.gguf" ]; then skip 4/7 "$DIR/hearth-tiny.gguf"; else
    stage_start 4/7 "quantize: $QUANT"
    make_file "$DIR/hearth-tiny.gguf" nice "$HEARTH" quantize "$DIR/model-f32.gguf" \
        "$DIR/hearth-tiny.gguf.tmp" --type "$QUANT" >"$DIR/quantize.log" 2>&1
    stage_done "$(tail -1 "$DIR/quantize.log")"
fi

# 5. checks: the prompt style key, Hearth's loader, llama.cpp's loader
stage_start 5/7 "check: hearth.prompt_style, hearth info, llama.cpp"
LC_ALL=C grep -a -q 'hearth.prompt_style' "$DIR/hearth-tiny.gguf" ||
    { echo "tiny-model: $DIR/hearth-tiny.gguf lacks hearth.prompt_style" >&2; exit 1; }
"$HEARTH" info -m "$DIR/hearth-tiny.gguf" >"$DIR/info.txt"
LLAMA="not checked (no llama.cpp reference: make reference, then build $BUILD_DIR/tests/ref/hxref)"
if [ -x "$BUILD_DIR/tests/ref/hxref" ]; then
    if "$BUILD_DIR/tests/ref/hxref" generate "$DIR/hearth-tiny.gguf" 4 1 2 3 >"$DIR/llama.txt" 2>&1; then
        LLAMA="loads and generates in llama.cpp ($(cat "${HEARTH_REFERENCE:-build/reference}/commit" 2>/dev/null || echo reference))"
    else
        echo "tiny-model: llama.cpp did not load $DIR/hearth-tiny.gguf (see $DIR/llama.txt)" >&2
        exit 1
    fi
fi
stage_done "$LLAMA"

# 6. evaluation on held-out tasks, when the agent evaluation is built
EVAL="not run (no $BUILD_DIR/bench/agent-eval)"
if [ -x "$BUILD_DIR/bench/agent-eval" ]; then
    stage_start 6/7 "agent-eval: $N_TASKS held-out tasks"
    nice "$BUILD_DIR/bench/agent-eval" --model "$DIR/hearth-tiny.gguf" \
        --tasks "$DIR/tasks.jsonl" --log "$DIR/agent-eval.jsonl" --threads "$THREADS" \
        >"$DIR/eval.txt" 2>&1 || true
    EVAL=$(cat "$DIR/eval.txt")
    stage_done
else
    skip 6/7 "no agent-eval binary; evaluation"
fi

# 7. install and describe
stage_start 7/7 "install: $OUT and $(dirname "$OUT")/README.md"
mkdir -p "$(dirname "$OUT")"
cp "$DIR/hearth-tiny.gguf" "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
# (a resumed run repeats the steps after the last checkpoint: the last line
# has the step count)
STEPS_DONE=$(grep '^step [0-9]* loss' "$DIR/train.log" | tail -1 | cut -d' ' -f2)
LAST=$(grep '^step [0-9]* loss' "$DIR/train.log" | tail -1)
FIRST=$(grep '^step [0-9]* loss' "$DIR/train.log" | head -1)
SIZE=$(wc -c <"$OUT")
# hearth train's last line says whether its products were bfloat16 (it
# keeps F32 where the CPU lacks AVX512-BF16, or, with auto, where F32 is
# faster)
PRODUCTS="F32 (hearth train --products $PRODUCTS_ASKED)"
if grep '^trained' "$DIR/train.log" | tail -1 | grep -q 'bfloat16 products'; then
    PRODUCTS="bfloat16 operands, F32 sums (hearth train --products $PRODUCTS_ASKED)"
fi
SHAPE_DESC="$LAYERS layers, C = $EMBD, $HEADS query heads x $HEAD_DIM, $KV KV heads, FFN $FF"
[ -n "$BASE" ] && SHAPE_DESC="the start's (\`hearth info -m $OUT\`)"
[ -n "$BASE" ] && [ "$GROW" -gt 0 ] &&
    SHAPE_DESC="the start's with $GROW layers added, copies of the layers before them whose output projections started at zero (\`hearth info -m $OUT\`)"
cat >"$(dirname "$OUT")/README.md" <<EOF
# hearth-tiny

The default model of \`hearth ask\`, \`hearth chat\` and \`make demo\`: a
demonstration-size qwen3 model trained from scratch on this machine by
\`make tiny-model\` (scripts/tiny-model.sh) on conversations the project
generates with its real planner and tools. It plans and calls Hearth's tools
in the $STYLE prompt style and knows nothing else; for real use point Hearth
at Qwen3-30B-A3B or another GGUF of a supported architecture.

## Recipe

| item | value |
|---|---|
| architecture | qwen3, tied embeddings, q/k RMSNorm, NEOX RoPE base 1e6 |
| start | ${BASE:-nothing (random weights)} |
| shape | $SHAPE_DESC |
| vocabulary | $VOCAB byte-level BPE (\`hearth vocab train --target-weight $TARGET_WEIGHT\` on the training conversations) |
| data | $N_TRAIN generated conversations (\`hearth datagen --split train --seed $SEED\`), rendered in the $STYLE style; loss on the assistant's tokens only, where a call's argument value starts or ends x$VALUE_WEIGHT |
| context | $CTX tokens; windows of $SEQ tokens of packed conversations, each window starting at a conversation |
| batch | $BATCH x $SEQ tokens x $ACCUM micro-batches per step |
| optimizer | AdamW 0.9/0.95, wd 0.1 on matrices, clip 1.0 |
| products | $PRODUCTS |
| schedule | peak $LR, $WARMUP warmup steps, constant, linear to 0.1x over the last 20% (WSD); length $LENGTH |
| threads | $THREADS |
| file | $QUANT, $SIZE bytes, \`hearth.prompt_style = $STYLE\` |

## Figures

- steps: $STEPS_DONE
- first: $FIRST
- last: $LAST
- $(grep '^trained' "$DIR/train.log" | tail -1)
- llama.cpp: $LLAMA
- loss curve: $DIR/loss.svg (not committed)

## Held-out evaluation (bench/agent-eval)

\`\`\`
$EVAL
\`\`\`

Rebuild: \`rm -rf $DIR && make tiny-model\` (about two hours on 2 cores).
EOF
stage_done "$(wc -c <"$OUT") bytes; total $(($(date +%s) - T_ALL))s"

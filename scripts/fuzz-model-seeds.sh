#!/bin/sh
# fuzz-model-seeds.sh: writes the seed models of tests/fuzz/fuzz_model.c
# into tests/fuzz/corpus/fuzz_model/ with `hearth mkmodel` (random weights,
# seeded, so the same bytes each time). Usage: scripts/fuzz-model-seeds.sh
# [HEARTH] (default build/hearth; run from the repository root).
set -e
hearth=${1:-build/hearth}
out=tests/fuzz/corpus/fuzz_model
[ -x "$hearth" ] || { echo "fuzz-model-seeds: no $hearth (make it first)" >&2; exit 1; }
mkdir -p "$out"
# 1 layer, 8 tokens, 32 wide, 2 heads on 1 KV head of 16: a few KB each.
small="--layers 1 --n-vocab 8 --embd 32 --heads 2 --heads-kv 1 --head-dim 16 \
    --ff 32 --experts 2 --experts-used 1 --ff-exp 32 --ctx 64"
mk() { name=$1; shift; "$hearth" mkmodel -o "$out/$name.gguf" $small "$@" >/dev/null; }
mk qwen3-F32 --arch qwen3 --type F32 --tied
mk qwen3moe-Q8_0 --arch qwen3moe --type Q8_0 --tied
mk llama-F16 --arch llama --type F16
# quantized: ffn_down's rows are the FFN's width, 256 here, so they hold
# the K-quants' 256-value blocks; the other matrices are 32 wide
mk qwen3-Q4_0-Q4_K --arch qwen3 --type Q4_0 --ff 256 --tensor-types ffn_down=Q4_K --tied
mk llama-Q8_0-Q6_K --arch llama --type Q8_0 --ff 256 --tensor-types ffn_down=Q6_K
mk qwen3moe-Q4_0-Q5_K --arch qwen3moe --type Q4_0 --ff-exp 256 \
    --tensor-types ffn_down_exps=Q5_K --tied

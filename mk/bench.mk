# mk/bench.mk: the benchmarks and evaluations, included by the Makefile;
# each is a separate target (bench/README.md holds their figures).
.PHONY: bench-engine bench-maskbench bench-memory bench-mail

# Engine benchmark: Hearth against llama.cpp (pp512 / tg128 at 1 and 2
# threads, peak RSS, decode against read bandwidth) on random-weight models
# of real shapes cached in ~/.cache/hearth/bench-models; rewrites its section
# of bench/README.md. ARGS=--big adds the 30B-A3B row (an 18.6 GB file).
$(BUILD)/bench/engine: bench/engine.c $(call libs_for,modelfile)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(call libs_for,modelfile) $(LDLIBS)
bench-engine: $(BUILD)/bench/engine reference
	@if [ -f $(HEARTH_REFERENCE)/include/llama.h ]; then \
	    $(MAKE) --no-print-directory $(HXREF) || echo "hearth: hxref did not build; Hearth only" >&2; fi
	HEARTH_BUILD=$(BUILD) nice $(BUILD)/bench/engine $(ARGS)

# Logits error by depth on the 30B-A3B layer shape: Hearth and llama.cpp
# (repack off / on) against the exact double reference (bench/depth.c).
$(BUILD)/bench/depth: bench/depth.c $(call libs_for,modelfile)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(call libs_for,modelfile) $(LDLIBS)
.PHONY: bench-depth
bench-depth: $(BUILD)/bench/depth reference
	$(MAKE) --no-print-directory $(HXREF)
	HEARTH_BUILD=$(BUILD) nice $(BUILD)/bench/depth $(ARGS)

# Time to first token of an agent turn with the full tool list: cold, warm
# from the prefix cache on disk, warm in-process (ARGS="--reps 5 --kv q8").
.PHONY: bench-ttft
$(BUILD)/bench/ttft: bench/ttft.c bench/turn.h $(ALL_LIBS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(ALL_LIBS) $(LDLIBS)
bench-ttft: $(BUILD)/bench/ttft
	nice $(BUILD)/bench/ttft $(ARGS)

# Attention over KV history spilled to disk vs all in memory, per token
# (ARGS="--ctx 8192 --kv q8 --layers 12").
.PHONY: bench-kvspill
$(BUILD)/bench/kvspill: bench/kvspill.c $(call libs_for,engine)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(call libs_for,engine) $(LDLIBS)
bench-kvspill: $(BUILD)/bench/kvspill
	nice $(BUILD)/bench/kvspill $(ARGS)

# Mail benchmark: mail.search over 10,000 generated messages.
$(BUILD)/bench/mail: bench/mail.c $(call libs_for,tools)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(call libs_for,tools) $(LDLIBS)
bench-mail: $(BUILD)/bench/mail
	nice $(BUILD)/bench/mail

# Memory benchmark: 100k memories, 10k episodes, recall p50/p99.
$(BUILD)/bench/memory: bench/memory.c $(call libs_for,memory)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(call libs_for,memory) $(LDLIBS)
bench-memory: $(BUILD)/bench/memory
	nice $(BUILD)/bench/memory

# MaskBench: every schema in $HEARTH_SHARED_DATA/maskbench (single thread).
$(BUILD)/bench/maskbench: bench/maskbench.c $(call libs_for,engine)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(call libs_for,engine) $(LDLIBS)
bench-maskbench: $(BUILD)/bench/maskbench
	nice $(BUILD)/bench/maskbench

# Kernel micro benchmark: GEMV GB/s and GEMM GMAC/s per tensor type
# (THREADS=n; HEARTH_ISA=scalar|avx2|avx512 caps the ISA); `bench/kernels
# 1 attn`: attention of a turn's pass over a long cached prefix.
$(BUILD)/bench/kernels: bench/kernels.c $(call libs_for,modelfile)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(call libs_for,modelfile) $(LDLIBS)
bench-kernels: $(BUILD)/bench/kernels
	nice $(BUILD)/bench/kernels $(or $(THREADS),1)

# Tool-call generation, engine/spec (forced runs and drafts in batched
# passes) against one token per pass on the same model and prompts, output
# checked identical: stories260K and a random-weight Qwen3-0.6B-shaped
# Q8_0 model with the Qwen2 tokenizer (written once into $(BUILD)/models).
# Random Qwen3-0.6B shapes with the Qwen2 tokenizer, in the three layouts
# real files use (Q4_0 with a Q6_K tied embedding, as llama.cpp writes it).
QWEN06_SHAPE := --layers 28 --embd 1024 --heads 16 --heads-kv 8 --head-dim 128 --ff 3072
QWEN2_VOCAB = $(or $(HEARTH_SHARED_DATA),../shared/data)/vocab/ggml-vocab-qwen2.gguf
SPEC_QWEN := $(BUILD)/models/qwen3-0.6b-shape-q8_0.gguf
SPEC_QWENS := $(SPEC_QWEN) $(BUILD)/models/qwen3-0.6b-shape-q4_0.gguf \
	$(BUILD)/models/qwen3-0.6b-shape-q4_k_m.gguf
spec_type_q8_0 := --type Q8_0
spec_type_q4_0 := --type Q4_0 --tensor-types token_embd=Q6_K
spec_type_q4_k_m := --type Q4_K_M
$(BUILD)/bench/spec: bench/spec.c $(call libs_for,engine)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(call libs_for,engine) $(LDLIBS)
$(BUILD)/models/qwen3-0.6b-shape-%.gguf: | $(BUILD)/hearth
	@mkdir -p $(@D)
	nice $(BUILD)/hearth mkmodel -o $@ $(spec_type_$*) $(QWEN06_SHAPE) --tied --vocab $(QWEN2_VOCAB)
# hearth-tiny embedded in Qwen3-0.6B's shape (hearth mkmodel --embed: its
# function at the real shape's cost, 151,936 tokens), in the three layouts:
# the agent's own tool-call generation with and without speculative
# decoding (agent-eval --decode both, SPEC_TASKS held-out tasks).
SPEC_TINYS := $(BUILD)/models/hearth-tiny-0.6b-shape-q8_0.gguf \
	$(BUILD)/models/hearth-tiny-0.6b-shape-q4_k_m.gguf \
	$(BUILD)/models/hearth-tiny-0.6b-shape-q4_0.gguf
$(BUILD)/models/hearth-tiny-0.6b-shape-%.gguf: models/hearth-tiny.gguf | $(BUILD)/hearth
	@mkdir -p $(@D)
	nice $(BUILD)/hearth mkmodel -o $@ $(spec_type_$*) $(QWEN06_SHAPE) --n-vocab 151936 --embed $<
# The same in Qwen3-30B-A3B's shape (qwen3moe, 128 experts of which 8 are
# used, an 18.6 GB file): hearth-tiny's block in every expert, a random
# router, so a batch of tokens reads the experts its tokens pick.
QWEN30_SHAPE := --arch qwen3moe --layers 48 --embd 2048 --heads 32 --heads-kv 4 --head-dim 128 \
	--experts 128 --experts-used 8 --ff-exp 768
SPEC_MOE := $(BUILD)/models/hearth-tiny-30b-a3b-shape-q4_k_m.gguf
$(SPEC_MOE): models/hearth-tiny.gguf | $(BUILD)/hearth
	@mkdir -p $(@D)
	nice $(BUILD)/hearth mkmodel -o $@ --type Q4_K_M --tensor-types token_embd=Q6_K \
	    $(QWEN30_SHAPE) --n-vocab 151936 --embed $<
.PHONY: bench-spec bench-spec-agent bench-spec-moe
bench-spec-moe: $(BUILD)/bench/agent-eval $(SPEC_MOE)
	nice $(BUILD)/bench/agent-eval --model $(SPEC_MOE) --n $(or $(SPEC_TASKS),40) --seed 5 \
	    --threads $(or $(THREADS),2) --decode both --log $(BUILD)/spec-moe.jsonl
bench-spec-agent: $(BUILD)/bench/agent-eval $(SPEC_TINYS)
	for m in $(SPEC_TINYS); do \
	    nice $(BUILD)/bench/agent-eval --model $$m --n $(or $(SPEC_TASKS),40) --seed 5 \
	        --threads $(or $(THREADS),2) --decode both --log $(BUILD)/spec-agent.jsonl || exit 1; done
bench-spec: $(BUILD)/bench/spec $(SPEC_QWENS) bench-spec-agent
	nice $(BUILD)/bench/spec $(or $(HEARTH_SHARED_DATA),../shared/data)/models/stories260K.gguf 1 $(or $(THREADS),2) $(or $(REPS),2)
	nice $(BUILD)/bench/spec $(or $(HEARTH_SHARED_DATA),../shared/data)/models/stories260K.gguf 0 $(or $(THREADS),2) $(or $(REPS),2)
	for m in $(SPEC_QWENS); do for g in 0 1; do \
	    nice $(BUILD)/bench/spec $$m $$g $(or $(THREADS),2) $(or $(REPS),1) || exit 1; done; done

# Training throughput: optimizer steps of the hearth-tiny recipe (6 x 256,
# micro-batch 4 x 1024 packed tokens); tok/s (wall and CPU), load, peak RSS.
# STEPS=n THREADS=n; HX_BENCH_* override the shape (bench/train.c); BF16=1
# also times bfloat16 products (hearth train --bf16) against F32.
$(BUILD)/bench/train: bench/train.c $(call libs_for,lora)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(call libs_for,lora) $(LDLIBS)
.PHONY: bench-train
bench-train: $(BUILD)/bench/train
	nice $(BUILD)/bench/train $(or $(STEPS),3) $(or $(THREADS),2) $(if $(BF16),bf16)

# LoRA adapters applied unmerged: prefill and decode ms/token of MODEL
# alone and with a random rank-RANK adapter on q/k/v/o (alternating runs,
# medians). MODEL=file.gguf RANK=16 THREADS=2 TOKENS=64.
$(BUILD)/bench/lora: bench/lora.c $(call libs_for,engine)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(call libs_for,engine) $(LDLIBS)
.PHONY: bench-lora
bench-lora: $(BUILD)/bench/lora
	nice $(BUILD)/bench/lora $(MODEL) $(or $(RANK),16) $(or $(THREADS),2) $(or $(TOKENS),64)

# The nightly LoRA run (`hearth nightly --force` on generated accepted
# episodes): training tokens/s wall and per CPU-second, peak RSS, for
# hearth-tiny and a random-weight Qwen3-0.6B-shaped Q4_K_M base with the
# Qwen2 tokenizer (written once into $(BUILD)/models). STEPS=3 THREADS=2.
NIGHTLY_QWEN := $(BUILD)/models/qwen3-0.6b-shape-q4_k_m.gguf
$(NIGHTLY_QWEN): | $(BUILD)/hearth
	@mkdir -p $(@D)
	nice $(BUILD)/hearth mkmodel -o $@ --type Q4_K_M --tensor-types token_embd=Q6_K \
	    $(QWEN06_SHAPE) --tied --vocab $(QWEN2_VOCAB)
$(BUILD)/bench/nightly: bench/nightly.c $(ALL_LIBS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(ALL_LIBS) $(LDLIBS)
.PHONY: bench-nightly
bench-nightly: $(BUILD)/bench/nightly $(NIGHTLY_QWEN)
	nice $(BUILD)/bench/nightly models/hearth-tiny.gguf $(or $(STEPS),3) $(or $(THREADS),2)
	nice $(BUILD)/bench/nightly $(NIGHTLY_QWEN) $(or $(STEPS),3) $(or $(THREADS),2)

# Agent evaluation: the full agent on held-out generated tasks in fresh
# sample worlds, final state checked; success per category, schema-valid
# calls, per-task reasons in build/agent-eval.jsonl.
# ARGS="--model FILE --n 200 --seed 1 --threads 2" (or --tasks FILE, --oracle).
# Beside it, the hand-written evaluation (bench/handeval/README.md): worlds
# and requests nobody generated; calls, state and the answer's facts per
# category, per-task results in build/hand-eval.jsonl, transcripts in
# build/hand-eval.txt. HAND_ARGS="--model FILE --world W --category C".
$(BUILD)/bench/agent-eval: bench/agent_eval.c $(ALL_LIBS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(ALL_LIBS) $(LDLIBS)
$(BUILD)/bench/hand-eval: bench/hand_eval.c $(ALL_LIBS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(ALL_LIBS) $(LDLIBS)
.PHONY: bench-agent-eval
bench-agent-eval: $(BUILD)/bench/agent-eval $(BUILD)/bench/hand-eval
	nice $(BUILD)/bench/agent-eval $(ARGS)
	nice $(BUILD)/bench/hand-eval --trace $(BUILD)/hand-eval.txt $(HAND_ARGS)

# The five held-out samples models/README.md reports figures on, two lanes
# at once, and their sums (scripts/eval-samples.sh, ~8 minutes on 2 cores
# for hearth-tiny): MODEL=file (default models/hearth-tiny.gguf), OUT=dir.
.PHONY: eval-samples
eval-samples: $(BUILD)/hearth $(BUILD)/bench/agent-eval
	HEARTH=$(BUILD)/hearth AGENT_EVAL=$(BUILD)/bench/agent-eval nice sh scripts/eval-samples.sh \
	    $(or $(MODEL),models/hearth-tiny.gguf) $(or $(OUT),$(BUILD)/eval-samples)

# The personalization proof (bench/persona.c): a persona's accepted
# episodes and held-out requests before and after `hearth nightly --force`
# (its defaults, its gates) on a fresh data directory, and its generic gate's
# paired suite, as a table.
# ARGS="--model FILE --episodes 48 --heldout 20 --generic 30 --nightly '--steps 60'"
$(BUILD)/bench/persona: bench/persona.c $(ALL_LIBS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(ALL_LIBS) $(LDLIBS)
.PHONY: bench-persona
bench-persona: $(BUILD)/bench/persona $(BUILD)/hearth
	nice $(BUILD)/bench/persona --hearth $(BUILD)/hearth $(ARGS)

# The quantization table on the project's own model: F32, Q8_0, Q4_K_M and
# Q4_0 with and without calibration: size, bits/weight, held-out loss with
# paired differences and standard errors, logits vs llama.cpp,
# agent-evaluation success (scripts/quant-table.sh; needs build/tiny from
# make tiny-model; TINY_DIR, QT_MODEL=F32.gguf and the other QT_* knobs).
$(BUILD)/bench/quant-table: bench/quant_table.c $(ALL_LIBS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(ALL_LIBS) $(LDLIBS)
.PHONY: bench-quant
bench-quant: $(BUILD)/hearth $(BUILD)/bench/quant-table $(BUILD)/bench/agent-eval
	@if [ -f $(HEARTH_REFERENCE)/include/llama.h ]; then \
	    $(MAKE) --no-print-directory $(HXREF) || true; fi
	sh scripts/quant-table.sh $(BUILD)
# Quantizing a random Qwen3-0.6B-shaped F16 model to Q4_K_M, plain and
# calibrated: CPU and wall time, peak RSS (scripts/quantize-big.sh).
.PHONY: bench-quantize-big
bench-quantize-big: $(BUILD)/hearth
	sh scripts/quantize-big.sh $(BUILD)

# A phone's memory (bench/phone.c): the 30B-A3B shape at budgets of 16, 12,
# 8 and 6 GiB with a 2 GB/s read limit (../shared/tools/phone-sim, as root),
# Hearth with --max-memory the budget less a margin against llama.cpp in the
# same cgroup; the file's router and uniformly random routing; the 0.6B and
# 4B dense shapes at half their file size. Heavy (an 18.6 GB file, about 30
# minutes). ARGS="--budgets 8 --tokens 16 --no-llama".
QWEN4B_SHAPE := --layers 36 --embd 2560 --heads 32 --heads-kv 8 --head-dim 128 --ff 9728
PHONE_DENSE := $(BUILD)/models/qwen3-0.6b-shape-q4_k_m.gguf $(BUILD)/models/qwen3-4b-shape-q4_k_m.gguf
$(BUILD)/models/qwen3-4b-shape-q4_k_m.gguf: | $(BUILD)/hearth
	@mkdir -p $(@D)
	nice $(BUILD)/hearth mkmodel -o $@ --type Q4_K_M --tensor-types token_embd=Q6_K \
	    $(QWEN4B_SHAPE) --tied --vocab $(QWEN2_VOCAB)
$(BUILD)/bench/phone: bench/phone.c bench/turn.h $(ALL_LIBS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(ALL_LIBS) $(LDLIBS)
.PHONY: bench-phone
bench-phone: $(BUILD)/bench/phone $(SPEC_MOE) $(PHONE_DENSE) reference
	$(MAKE) --no-print-directory $(HXREF)
	HEARTH_BUILD=$(BUILD) nice $(BUILD)/bench/phone --moe $(SPEC_MOE) \
	    --dense $(BUILD)/models/qwen3-0.6b-shape-q4_k_m.gguf,$(BUILD)/models/qwen3-4b-shape-q4_k_m.gguf \
	    $(ARGS)

# Inference in slices: slice lengths (p50/p99/max) and the frame delays of a
# simulated 60 Hz UI thread beside it (ARGS="--model FILE ... --budget 8").
.PHONY: bench-slices
$(BUILD)/bench/slices: bench/slices.c $(call libs_for,engine)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(call libs_for,engine) $(LDLIBS)
bench-slices: $(BUILD)/bench/slices
	$(BUILD)/bench/slices $(ARGS)

# Request tiers and the governor's tool cut on the agent evaluations' tasks:
# the share of each tier, of cuts that leave out a needed tool, and the
# no-model tier's success beside the model's on the same requests (the
# generated held-out set, seed 2003: the tier's forms were written reading
# seed 2002's requests; and the hand-written one). ARGS: --no-run, --model.
.PHONY: bench-tiers
$(BUILD)/bench/tiers: bench/tiers.c bench/turn.h $(ALL_LIBS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(ALL_LIBS) $(LDLIBS)
bench-tiers: $(BUILD)/bench/tiers $(BUILD)/hearth
	$(BUILD)/hearth datagen --tasks --split heldout --n 300 --seed 2003 -o $(BUILD)/tiers-tasks.jsonl
	$(BUILD)/bench/tiers $(ARGS) $(BUILD)/tiers-tasks.jsonl bench/handeval
# hearth serve (bench/serve_load.c): a thousand loopback connections (a
# fifth bad clients) for SECONDS (default 10), conversations streaming
# together, and conversations batched into one forward pass against
# taking turns, on hearth-tiny and hearth-tiny in Qwen3-0.6B's shape (Q4_0).
.PHONY: bench-serve
$(BUILD)/bench/serve-load: bench/serve_load.c tests/serve/load.h tests/serve/serve_test.h \
    $(call libs_for,serve)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests/serve $(LDFLAGS) -o $@ $< $(call libs_for,serve) $(LDLIBS)
bench-serve: $(BUILD)/bench/serve-load $(BUILD)/hearth $(BUILD)/models/hearth-tiny-0.6b-shape-q4_0.gguf
	HEARTH_BUILD=$(BUILD) nice $(BUILD)/bench/serve-load --seconds $(or $(SECONDS),10) \
	    --threads $(or $(THREADS),2) --model models/hearth-tiny.gguf \
	    --model $(BUILD)/models/hearth-tiny-0.6b-shape-q4_0.gguf

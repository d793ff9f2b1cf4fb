# Hearth: plain Makefile. `make` builds build/hearth; `make test` builds and
# runs every test; `make asan` / `make ubsan` run them under sanitizers.
# Each module is a static library; tests in tests/<module>/test_*.c link the
# module and what it depends on (DESIGN.md layering, one direction only).

BUILD ?= build
CC ?= cc
OPT ?= -O2
# Installs the Debian packages we build against when they are missing.
DEPS_STATUS := $(shell sh scripts/deps.sh >&2 && echo ok)
PKGS := sqlite3 libical libcjson libpcre2-8
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wpointer-arith -Wvla -Wformat=2 -Wno-format-truncation -Werror
CFLAGS := -std=c11 -D_GNU_SOURCE -g $(OPT) -pthread -fno-strict-aliasing \
          -I. $(WARN) $(PKG_CFLAGS) $(EXTRA_CFLAGS)
LDFLAGS := -pthread $(EXTRA_LDFLAGS)
LDLIBS := $(PKG_LIBS) -ldl -lm

MODULES := base engine sandbox memory tools lora agent
# What each module's library needs after it on the link line.
deps_base := base
deps_engine := engine base
deps_sandbox := sandbox base
deps_memory := memory base
deps_tools := tools sandbox base
deps_lora := lora memory engine base
deps_agent := agent tools memory lora sandbox engine base

src_of = $(filter-out agent/main.c,$(wildcard $(1)/*.c $(1)/*/*.c))
obj_of = $(patsubst %.c,$(BUILD)/%.o,$(call src_of,$(1)))
lib_of = $(BUILD)/lib$(1).a
libs_for = $(foreach m,$(deps_$(1)),$(call lib_of,$(m)))

TEST_SRCS := $(foreach m,$(MODULES),$(wildcard tests/$(m)/test_*.c))
TEST_BINS := $(patsubst %.c,$(BUILD)/%,$(TEST_SRCS))
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(patsubst %.c,$(BUILD)/%,$(FUZZ_SRCS))
ALL_LIBS := $(call libs_for,agent)

.PHONY: all test test-build check asan ubsan fuzz clean demo reference eval-samples \
        bench-engine bench-maskbench bench-memory bench-mail
.DEFAULT_GOAL := all

all: $(BUILD)/hearth

# ---- libraries ----
define module_rules
$(call lib_of,$(1)): $(call obj_of,$(1))
	@mkdir -p $$(@D)
	@rm -f $$@
	$$(AR) rcs $$@ $$^
endef
$(foreach m,$(MODULES),$(eval $(call module_rules,$(m))))

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/hearth: $(BUILD)/agent/main.o $(ALL_LIBS)
	$(CC) $(LDFLAGS) -o $@ $< $(ALL_LIBS) $(LDLIBS)

# ---- tests: tests/<module>/test_x.c links the module's libraries ----
define test_rules
$(BUILD)/tests/$(1)/%: tests/$(1)/%.c $(call libs_for,$(1)) tests/test.h
	@mkdir -p $$(@D)
	$$(CC) $$(CFLAGS) -Itests -MMD -MP $$(LDFLAGS) -o $$@ $$< \
	    $(call libs_for,$(1)) $$(LDLIBS)
endef
$(foreach m,$(MODULES),$(eval $(call test_rules,$(m))))

# Fuzz targets define LLVMFuzzerTestOneInput; here they are linked with a
# standalone driver that replays a corpus and random mutations of it, so the
# test suite runs them briefly; `make fuzz` builds them with libFuzzer.
# Each target links the module it exercises (fuzz_mod_<name>, default all).
fuzz_mod_fuzz_gguf := engine
fuzz_mod_fuzz_tokenizer := engine
fuzz_mod_fuzz_schema := engine
fuzz_mod_fuzz_grammar_bytes := engine
fuzz_mod_fuzz_gvcache := engine
fuzz_mod_fuzz_mail := tools
fuzz_mod_fuzz_ics := tools
fuzz_mod_fuzz_when := tools
fuzz_mod_fuzz_governor := engine
fuzz_mod_fuzz_memory_query := memory
fuzz_mod_fuzz_adapter := engine
fuzz_mod_fuzz_ckpt := lora
fuzz_libs = $(call libs_for,$(or $(fuzz_mod_$(1)),agent))
.SECONDEXPANSION:
$(BUILD)/tests/fuzz/%: tests/fuzz/%.c tests/fuzz/driver.c $$(call fuzz_libs,$$*)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests $(LDFLAGS) -o $@ $< tests/fuzz/driver.c \
	    $(call fuzz_libs,$*) $(LDLIBS)

test-build: $(BUILD)/hearth $(TEST_BINS) $(FUZZ_BINS)

# The llama.cpp reference (npm) used by differential tests; a failed fetch
# only makes those tests skip.
reference:
	@sh scripts/fetch-reference.sh || echo "hearth: llama.cpp reference unavailable; differential tests will skip" >&2

# The reference harness tests/ref/hxref.c (see tests/ref/ref.h): standalone,
# linked only with -ldl; `test` builds it when the reference was fetched.
HEARTH_REFERENCE ?= build/reference
HXREF := $(BUILD)/tests/ref/hxref
$(HXREF): tests/ref/hxref.c tests/ref/compat/gguf.h
	@mkdir -p $(@D)
	$(CC) -std=c11 -D_GNU_SOURCE -g -O1 $(WARN) \
	    -isystem $(HEARTH_REFERENCE)/include -iquote tests/ref/compat \
	    -o $@ $< -ldl

test: test-build reference
	@if [ -f $(HEARTH_REFERENCE)/include/llama.h ]; then \
	    $(MAKE) --no-print-directory $(HXREF) || echo "hearth: hxref did not build; differential tests will skip" >&2; fi
	@$(MAKE) --no-print-directory aarch64-build T="$(AARCH64_TESTS)"
	@$(MAKE) --no-print-directory hearth-aarch64-test
	@HEARTH_BUILD=$(BUILD) tests/run.sh $(TEST_BINS) $(FUZZ_BINS) \
	    $(call aarch64_runs,$(AARCH64_TESTS)) $(AARCH64_HEARTH_TEST)

# ---- aarch64 (phones): the engine and the training engine (lora)
# cross-built with Debian's gcc-aarch64-linux-gnu into $(BUILD)/aarch64,
# their kernel, differential and gradient tests run under qemu-user twice:
# -cpu max (NEON + SDOT: the dotprod kernels) and -cpu cortex-a53 (ARMv8.0:
# NEON only); test_kernels checks that the kernel set it expects was the one
# picked (HX_TEST_EXPECT_ISA).
# `make test` runs them after the x86 tests (about 40 CPU-s of cross
# build and 35 of qemu; scripts/deps.sh aarch64 installs the tools, and
# without them each run reports a skip saying so); `make test-aarch64`
# runs only them and fails without the tools.
AARCH64_CC ?= aarch64-linux-gnu-gcc
AARCH64 := $(BUILD)/aarch64
# module/name of each test run under qemu
AARCH64_TESTS := engine/kernels engine/kernels_nan engine/quant engine/model lora/ops lora/grad lora/actmem
AARCH64_CPUS := max:dotprod cortex-a53:neon
# Tests of a binary too slow under emulation: a 600-token double-precision
# reference (about 5 CPU-s under qemu; the split-KV path it checks is the
# scalar attention code, compiled alike on both architectures).
AARCH64_SKIP_model := test_long_context_split
# The quantizers' calibration quality: scalar float code, no kernels
# (about 3.7 CPU-s under qemu).
AARCH64_SKIP_quant := test_imatrix_output
# The central-difference gradient checks: thousands of forward passes each
# (22 to 36 CPU-s each under qemu; they pass there, run by hand). The
# training forward against the engine's decode, packing and the shared
# prefix stay; the float GEMM is covered by lora/ops' test_gemm_shapes.
AARCH64_SKIP_grad := test_full_model test_untied_from_gguf test_lora_f32 \
    test_lora_q8_0 test_lora_vs_full_f32 test_lora_vs_full_q8_0
# The 256-wide Q4_K_M model (10.8 CPU-s under qemu; passes there): the
# Q8_0 one checks the same recomputation, test_kernels the Q4_K kernels.
AARCH64_SKIP_actmem := test_lora_recompute_exact_q4_k
# the cross-built binary of module/name $(1)
aarch64_bin = $(AARCH64)/tests/$(dir $(1))test_$(notdir $(1))
aarch64_runs = $(foreach c,$(AARCH64_CPUS),$(foreach t,$(1),\
    $(call aarch64_bin,$(t))@$(firstword $(subst :, ,$(c)))))
# The loader and libc must come from one glibc build: -L alone takes the
# cross package's ld.so but, through the host's ld.so.cache, the multiarch
# libc6:arm64 that libpcre2-dev:arm64 installs, and that mix spins forever
# in the first pthread_create (the "slow" test_kernels@max in CI).
QEMU_AARCH64 := qemu-aarch64 -L /usr/aarch64-linux-gnu \
    -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib
# One wrapper: test $(1) under -cpu $(2), expecting kernel set $(3).
aarch64_wrap = w=$(call aarch64_bin,$(1))@$(2); \
    printf '\043!/bin/sh\n\043 $(1) on aarch64 under qemu-user -cpu $(2) ($(3) kernels)\nHX_TEST_EXPECT_ISA=$(3) HX_TEST_SKIP="$(AARCH64_SKIP_$(notdir $(1)))" exec $(QEMU_AARCH64) -cpu $(2) $(abspath $(call aarch64_bin,$(1))) "$$@"\n' > $$w && chmod +x $$w;
.PHONY: aarch64-build test-aarch64
# Without the tools, a wrapper that reports the run skipped and why.
AARCH64_NOTOOLS := no aarch64 cross compiler or qemu-user (scripts/deps.sh aarch64 installs them, as root)
aarch64_skip = w=$(call aarch64_bin,$(1))@$(2); \
    printf '\043!/bin/sh\necho "skip $(1)@$(2): $(AARCH64_NOTOOLS)"\n' > $$w && chmod +x $$w;
# Cross-builds the tests of $(T) and writes one qemu wrapper per test and
# -cpu (test_x@max, test_x@cortex-a53), which tests/run.sh runs.
aarch64-build:
	@if ! sh scripts/deps.sh aarch64 || ! command -v $(AARCH64_CC) >/dev/null || \
	    ! command -v qemu-aarch64 >/dev/null; then \
	    echo "hearth: $(AARCH64_NOTOOLS); aarch64 tests skipped" >&2; \
	    mkdir -p $(addprefix $(AARCH64)/tests/,$(sort $(dir $(T)))); \
	    $(foreach c,$(AARCH64_CPUS),$(foreach t,$(T),$(call aarch64_skip,$(t),$(word 1,$(subst :, ,$(c)))))) \
	    exit 0; fi; \
	$(MAKE) --no-print-directory BUILD=$(AARCH64) CC=$(AARCH64_CC) \
	    AR=aarch64-linux-gnu-ar PKG_CFLAGS= PKG_LIBS=-lpcre2-8 OPT=-O2 \
	    EXTRA_CFLAGS= EXTRA_LDFLAGS= \
	    $(foreach t,$(T),$(call aarch64_bin,$(t))) || exit 1; \
	$(foreach c,$(AARCH64_CPUS),$(foreach t,$(T),$(call aarch64_wrap,$(t),$(word 1,$(subst :, ,$(c))),$(word 2,$(subst :, ,$(c))))))
test-aarch64:
	@$(MAKE) --no-print-directory aarch64-build T="$(AARCH64_TESTS)"
	@command -v $(AARCH64_CC) >/dev/null || { echo "hearth: $(AARCH64_CC) missing" >&2; exit 1; }
	@$(MAKE) --no-print-directory hearth-aarch64-test
	@HEARTH_BUILD=$(AARCH64) tests/run.sh $(call aarch64_runs,$(AARCH64_TESTS)) \
	    $(AARCH64_HEARTH_TEST)

# The whole `hearth` for aarch64: every module and agent/main.c cross-built
# into $(AARCH64)/hearth against the arm64 SQLite, libical (with ICU and
# Berkeley DB), cJSON and PCRE2 that scripts/arm64-sysroot.sh fetches as
# .deb files (apt-get download) and unpacks into $(AARCH64_SYSROOT)
# (nothing installed: libical-dev:arm64 conflicts with the host's).
# $(AARCH64)/hearth-qemu runs it under qemu-user (QEMU_CPU picks the CPU)
# with the cross package's loader and libc and the sysroot's libraries, and
# seccomp off (qemu-user has none; HEARTH_SANDBOX_DISABLE).
# tests/agent/hearth_aarch64.sh checks its `info` and a one-shot `ask` in a
# sample world against the x86-64 build's; `make test` runs it (about 30
# CPU-s to cross-build the other modules once, 11 under qemu; a 12 MB
# download once), reported skipped, with the reason, without the tools or
# the packages.
AARCH64_SYSROOT ?= build/aarch64-sysroot
AARCH64_SYS = $(abspath $(AARCH64_SYSROOT))
AARCH64_SYSLIB = $(AARCH64_SYS)/usr/lib/aarch64-linux-gnu
AARCH64_HEARTH_TEST := $(AARCH64)/tests/agent/hearth_aarch64@max
.PHONY: hearth-aarch64 hearth-aarch64-test
hearth-aarch64:
	@sh scripts/arm64-sysroot.sh $(AARCH64_SYSROOT)
	@$(MAKE) --no-print-directory BUILD=$(AARCH64) CC=$(AARCH64_CC) \
	    AR=aarch64-linux-gnu-ar OPT=-O2 EXTRA_CFLAGS= EXTRA_LDFLAGS= \
	    PKG_CFLAGS="-isystem $(AARCH64_SYS)/usr/include -isystem $(AARCH64_SYS)/usr/include/cjson" \
	    PKG_LIBS="-L$(AARCH64_SYSLIB) -Wl,-rpath-link,$(AARCH64_SYSLIB) -lsqlite3 -lical -lcjson -lpcre2-8" \
	    $(AARCH64)/hearth
	@printf '\043!/bin/sh\n\043 hearth for aarch64 under qemu-user (QEMU_CPU picks the CPU): the loader and\n\043 libc of the cross package, the arm64 libraries of $(AARCH64_SYSROOT)\nHEARTH_SANDBOX_DISABLE=seccomp$${HEARTH_SANDBOX_DISABLE:+,$$HEARTH_SANDBOX_DISABLE}\nexport HEARTH_SANDBOX_DISABLE\nexec qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib:$(AARCH64_SYSLIB) $(abspath $(AARCH64)/hearth) "$$@"\n' \
	    > $(AARCH64)/hearth-qemu && chmod +x $(AARCH64)/hearth-qemu
	@echo "hearth: $(AARCH64)/hearth-qemu runs $(AARCH64)/hearth under qemu-aarch64"
# Writes $(AARCH64_HEARTH_TEST), which tests/run.sh runs: the comparison
# under -cpu max, or a skip saying why.
hearth-aarch64-test: $(BUILD)/hearth
	@w=$(AARCH64_HEARTH_TEST); mkdir -p $(dir $(AARCH64_HEARTH_TEST)); why=; \
	if ! sh scripts/deps.sh aarch64 || ! command -v $(AARCH64_CC) >/dev/null || \
	    ! command -v qemu-aarch64 >/dev/null; then why="$(AARCH64_NOTOOLS)"; \
	elif ! sh scripts/arm64-sysroot.sh $(AARCH64_SYSROOT) 2>$$w.log; then \
	    why="the arm64 libraries could not be fetched: $$(tail -n 1 $$w.log | tr -cd '[:alnum:] :;,./()_-')"; fi; \
	cat $$w.log >&2 2>/dev/null; rm -f $$w.log; \
	if [ -n "$$why" ]; then echo "hearth: $$why; agent/hearth_aarch64@max skipped" >&2; \
	    printf '\043!/bin/sh\necho "skip agent/hearth_aarch64@max: %s"\n' "$$why" > $$w; \
	    chmod +x $$w; exit 0; fi; \
	$(MAKE) --no-print-directory hearth-aarch64 || exit 1; \
	printf '\043!/bin/sh\n\043 the whole hearth on aarch64 under qemu-user -cpu max against the x86-64 build\ncd $(CURDIR) && QEMU_CPU=max exec sh tests/agent/hearth_aarch64.sh $(abspath $(BUILD)/hearth) $(abspath $(AARCH64)/hearth-qemu)\n' \
	    > $$w && chmod +x $$w

# Sanitizer builds run the unit tests clean (separate build directories).
# HX_TEST_SANITIZER tells the heaviest tests to run their code paths on
# fewer positions or repetitions (tests/test.h test_sanitized); each test
# binary gets 30 minutes (instrumented code on a shared machine) unless
# HX_TEST_TIMEOUT says otherwise.
SAN_ENV = HX_TEST_SANITIZER=$(1) HX_TEST_TIMEOUT=$${HX_TEST_TIMEOUT:-1800}
asan:
	$(call SAN_ENV,address) $(MAKE) BUILD=build/asan OPT=-O1 \
	    EXTRA_CFLAGS="-fsanitize=address -fno-omit-frame-pointer" \
	    EXTRA_LDFLAGS="-fsanitize=address" test
ubsan:
	$(call SAN_ENV,undefined) $(MAKE) BUILD=build/ubsan OPT=-O1 \
	    EXTRA_CFLAGS="-fsanitize=undefined -fno-sanitize-recover=all" \
	    EXTRA_LDFLAGS="-fsanitize=undefined" test

# libFuzzer builds (clang), for long runs: build/fuzz/fuzz_x CORPUS_DIR
fuzz:
	@mkdir -p build/fuzz
	for f in $(FUZZ_SRCS); do \
	    n=$$(basename $$f .c); \
	    clang -std=c11 -D_GNU_SOURCE -g -O1 -I. -Itests $(PKG_CFLAGS) \
	        -fsanitize=fuzzer,address,undefined $$f \
	        $(foreach m,$(deps_agent),$(call src_of,$(m))) \
	        -o build/fuzz/$$n $(PKG_LIBS) -ldl -lm -pthread || exit 1; \
	done

# Engine benchmark: Hearth against llama.cpp (pp512 / tg128 at 1 and 2
# threads, peak RSS, decode against read bandwidth) on random-weight models
# of real shapes cached in ~/.cache/hearth/bench-models; rewrites its section
# of bench/README.md. ARGS=--big adds the 30B-A3B row (an 18.6 GB file).
$(BUILD)/bench/engine: bench/engine.c $(call libs_for,engine)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(call libs_for,engine) $(LDLIBS)
bench-engine: $(BUILD)/bench/engine reference
	@if [ -f $(HEARTH_REFERENCE)/include/llama.h ]; then \
	    $(MAKE) --no-print-directory $(HXREF) || echo "hearth: hxref did not build; Hearth only" >&2; fi
	HEARTH_BUILD=$(BUILD) nice $(BUILD)/bench/engine $(ARGS)

# Logits error by depth on the 30B-A3B layer shape: Hearth and llama.cpp
# (repack off / on) against the exact double reference (bench/depth.c).
$(BUILD)/bench/depth: bench/depth.c $(call libs_for,engine)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(call libs_for,engine) $(LDLIBS)
.PHONY: bench-depth
bench-depth: $(BUILD)/bench/depth reference
	$(MAKE) --no-print-directory $(HXREF)
	HEARTH_BUILD=$(BUILD) nice $(BUILD)/bench/depth $(ARGS)

# Time to first token of an agent turn with the full tool list: cold, warm
# from the prefix cache on disk, warm in-process (ARGS="--reps 5 --kv q8").
.PHONY: bench-ttft
$(BUILD)/bench/ttft: bench/ttft.c $(ALL_LIBS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(ALL_LIBS) $(LDLIBS)
bench-ttft: $(BUILD)/bench/ttft
	nice $(BUILD)/bench/ttft $(ARGS)

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
# (THREADS=n; HEARTH_ISA=scalar|avx2|avx512 caps the ISA).
$(BUILD)/bench/kernels: bench/kernels.c $(call libs_for,engine)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(call libs_for,engine) $(LDLIBS)
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

# Issue 10's personalization proof (bench/persona.c): a persona's accepted
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

# Issue 11's proof table on the project's own model: F32, Q8_0, Q4_K_M and
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

# The main job (see README): what Hearth can run today.
demo: $(BUILD)/hearth
	@sh scripts/demo.sh $(BUILD)/hearth

# models/hearth-tiny.gguf from nothing (data, vocabulary, ~2 h of training
# on 2 threads, Q8_0, checks, evaluation): scripts/tiny-model.sh, stages
# in build/tiny skipped when done, training resumable; TINY_* knobs.
.PHONY: tiny-model
tiny-model: $(BUILD)/hearth
	@if [ -f bench/agent_eval.c ]; then $(MAKE) --no-print-directory $(BUILD)/bench/agent-eval; fi
	@if [ -f $(HEARTH_REFERENCE)/include/llama.h ]; then \
	    $(MAKE) --no-print-directory $(HXREF) || true; fi
	sh scripts/tiny-model.sh $(BUILD)/hearth

clean:
	rm -rf $(BUILD) build

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

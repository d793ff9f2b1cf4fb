# mk/aarch64.mk: the phone builds, included by the Makefile: the engine's
# tests and the whole hearth cross-built for aarch64 and run under qemu-user.
# The tools are an opt-in (`make deps-aarch64`); without them `make test`
# reports these runs skipped with that command in the reason.

# ---- aarch64 (phones): the engine and the training engine (lora)
# cross-built with Debian's gcc-aarch64-linux-gnu into $(BUILD)/aarch64,
# their kernel, differential and gradient tests run under qemu-user twice:
# -cpu max (NEON + SDOT: the dotprod kernels) and -cpu cortex-a53 (ARMv8.0:
# NEON only); test_kernels checks that the kernel set it expects was the one
# picked (HX_TEST_EXPECT_ISA).
# `make test` runs them after the x86 tests (about 40 CPU-s of cross
# build and 35 of qemu) when the tools are there (`make deps-aarch64`
# installs them), and otherwise reports each run skipped, saying so;
# `make test-aarch64` runs only them and fails without the tools.
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
# Without the tools, a wrapper that reports the run skipped and why. The
# check only looks (scripts/deps.sh --check): it never installs.
AARCH64_NOTOOLS := no aarch64 cross compiler, qemu-user or arm64 PCRE2 (make deps-aarch64 installs them, as root)
aarch64_tools = sh scripts/deps.sh --check aarch64 >/dev/null && command -v $(AARCH64_CC) >/dev/null && \
    command -v qemu-aarch64 >/dev/null
aarch64_skip = w=$(call aarch64_bin,$(1))@$(2); \
    printf '\043!/bin/sh\necho "skip $(1)@$(2): $(AARCH64_NOTOOLS)"\n' > $$w && chmod +x $$w;
# Cross-builds the tests of $(T) and writes one qemu wrapper per test and
# -cpu (test_x@max, test_x@cortex-a53), which tests/run.sh runs.
aarch64-build:
	@if ! { $(aarch64_tools); }; then \
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

# The whole `hearth` for aarch64: every module and cli/main.c cross-built
# into $(AARCH64)/hearth against the arm64 SQLite, libical (with ICU and
# Berkeley DB), cJSON, PCRE2 and libmicrohttpd (with GnuTLS and what it
# links) that scripts/arm64-sysroot.sh fetches as
# .deb files (apt-get download) and unpacks into $(AARCH64_SYSROOT)
# (nothing installed: libical-dev:arm64 conflicts with the host's).
# $(AARCH64)/hearth-qemu runs it under qemu-user (QEMU_CPU picks the CPU)
# with the cross package's loader and libc and the sysroot's libraries, and
# seccomp off (qemu-user has none; HEARTH_SANDBOX_DISABLE).
# tests/cli/hearth_aarch64.sh checks its `info`, a one-shot `ask` in a
# sample world and a chat completion from its `serve` against the x86-64
# build's; `make test` runs it (about 30 CPU-s to cross-build the other
# modules once, 16 under qemu; a 17 MB download once), reported skipped,
# with the reason, without the tools or the packages.
AARCH64_SYSROOT ?= build/aarch64-sysroot
AARCH64_SYS = $(abspath $(AARCH64_SYSROOT))
AARCH64_SYSLIB = $(AARCH64_SYS)/usr/lib/aarch64-linux-gnu
AARCH64_HEARTH_TEST := $(AARCH64)/tests/cli/hearth_aarch64@max
.PHONY: hearth-aarch64 hearth-aarch64-test
hearth-aarch64:
	@sh scripts/arm64-sysroot.sh $(AARCH64_SYSROOT)
	@$(MAKE) --no-print-directory BUILD=$(AARCH64) CC=$(AARCH64_CC) \
	    AR=aarch64-linux-gnu-ar OPT=-O2 EXTRA_CFLAGS= EXTRA_LDFLAGS= \
	    PKG_CFLAGS="-isystem $(AARCH64_SYS)/usr/include -isystem $(AARCH64_SYS)/usr/include/cjson" \
	    PKG_LIBS="-L$(AARCH64_SYSLIB) -Wl,-rpath-link,$(AARCH64_SYSLIB) -lsqlite3 -lical -lcjson -lpcre2-8 -lmicrohttpd" \
	    $(AARCH64)/hearth
	@printf '\043!/bin/sh\n\043 hearth for aarch64 under qemu-user (QEMU_CPU picks the CPU): the loader and\n\043 libc of the cross package, the arm64 libraries of $(AARCH64_SYSROOT)\nHEARTH_SANDBOX_DISABLE=seccomp$${HEARTH_SANDBOX_DISABLE:+,$$HEARTH_SANDBOX_DISABLE}\nexport HEARTH_SANDBOX_DISABLE\nexec qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib:$(AARCH64_SYSLIB) $(abspath $(AARCH64)/hearth) "$$@"\n' \
	    > $(AARCH64)/hearth-qemu && chmod +x $(AARCH64)/hearth-qemu
	@echo "hearth: $(AARCH64)/hearth-qemu runs $(AARCH64)/hearth under qemu-aarch64"
# Writes $(AARCH64_HEARTH_TEST), which tests/run.sh runs: the comparison
# under -cpu max, or a skip saying why.
hearth-aarch64-test: $(BUILD)/hearth
	@w=$(AARCH64_HEARTH_TEST); mkdir -p $(dir $(AARCH64_HEARTH_TEST)); why=; \
	if ! { $(aarch64_tools); }; then why="$(AARCH64_NOTOOLS)"; \
	elif ! sh scripts/arm64-sysroot.sh $(AARCH64_SYSROOT) 2>$$w.log; then \
	    why="the arm64 libraries could not be fetched: $$(tail -n 1 $$w.log | tr -cd '[:alnum:] :;,./()_-')"; fi; \
	cat $$w.log >&2 2>/dev/null; rm -f $$w.log; \
	if [ -n "$$why" ]; then echo "hearth: $$why; cli/hearth_aarch64@max skipped" >&2; \
	    printf '\043!/bin/sh\necho "skip cli/hearth_aarch64@max: %s"\n' "$$why" > $$w; \
	    chmod +x $$w; exit 0; fi; \
	$(MAKE) --no-print-directory hearth-aarch64 || exit 1; \
	printf '\043!/bin/sh\n\043 the whole hearth on aarch64 under qemu-user -cpu max against the x86-64 build\ncd $(CURDIR) && QEMU_CPU=max exec sh tests/cli/hearth_aarch64.sh $(abspath $(BUILD)/hearth) $(abspath $(AARCH64)/hearth-qemu)\n' \
	    > $$w && chmod +x $$w

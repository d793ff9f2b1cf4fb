# Hearth: plain Makefile. `make` builds build/hearth; `make test` builds and
# runs every test; `make check` checks the layering; `make asan` / `make
# ubsan` run the tests under sanitizers; `make install` puts hearth, its
# model and man page under PREFIX.
# Each module (a folder) is a static library behind its public header,
# using only the modules its deps_* list names (README.md, Layout); tests
# in tests/<module>/test_*.c test it. The phone (aarch64) cross builds are
# in mk/aarch64.mk, the benchmarks in mk/bench.mk.

BUILD ?= build
CC ?= cc
OPT ?= -O2
# The libraries Hearth builds against, found by pkg-config. Reading this
# Makefile installs nothing: `make deps` installs the Debian packages
# README.md names (scripts/deps.sh), and `make demo` and `make test` run it
# first.
PKGS := sqlite3 libical libcjson libpcre2-8 libmicrohttpd
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
# Without them, compiling stops at once saying what to run (no-packages),
# not at a missing header; a cross build passes its own PKG_LIBS.
PKG_CHECK := $(if $(strip $(PKG_LIBS)),,no-packages)

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wpointer-arith -Wvla -Wformat=2 -Wno-format-truncation -Werror
CFLAGS := -std=c11 -D_GNU_SOURCE -g $(OPT) -pthread -fno-strict-aliasing \
          -I. $(WARN) $(PKG_CFLAGS) $(EXTRA_CFLAGS)
LDFLAGS := -pthread $(EXTRA_LDFLAGS)
LDLIBS := $(PKG_LIBS) -ldl -lm

MODULES := base engine modelfile sandbox memory tools lora agent sim nightly serve cli
# What each module's library needs after it on the link line.
deps_base := base
deps_engine := engine base
deps_modelfile := modelfile engine base
deps_sandbox := sandbox base
deps_memory := memory base
deps_tools := tools sandbox base
deps_lora := lora engine base
deps_agent := agent tools memory sandbox engine base
deps_sim := sim agent tools memory sandbox engine base
deps_nightly := nightly sim agent tools memory lora sandbox engine base
deps_serve := serve agent tools memory sandbox engine base
deps_cli := cli serve nightly sim agent tools memory lora modelfile sandbox engine base
# What a module's tests link (tdeps_*, else its deps_*): the engine's and
# lora's add modelfile/'s random-model generator and nothing more (they are
# cross-built for aarch64 too, mk/aarch64.mk); the agent's, sim's,
# nightly's and serve's link everything (tests are exempt from the layering).
tdeps_engine := modelfile engine base
tdeps_lora := lora modelfile engine base
tdeps_agent := $(deps_cli)
tdeps_sim := $(deps_cli)
tdeps_nightly := $(deps_cli)
tdeps_serve := $(deps_cli)

src_of = $(filter-out cli/main.c,$(wildcard $(1)/*.c $(1)/*/*.c))
obj_of = $(patsubst %.c,$(BUILD)/%.o,$(call src_of,$(1)))
lib_of = $(BUILD)/lib$(1).a
libs_for = $(foreach m,$(deps_$(1)),$(call lib_of,$(m)))
test_libs_for = $(foreach m,$(or $(tdeps_$(1)),$(deps_$(1))),$(call lib_of,$(m)))

TEST_SRCS := $(foreach m,$(MODULES),$(wildcard tests/$(m)/test_*.c))
# hearth serve's client tests: node with npm packages and Debian's chromium
# (tests/serve/node_setup.sh installs the packages into $(BUILD)/serve-node;
# each test says skipped, and why, without them).
SCRIPT_TESTS := tests/serve/openai_client.sh tests/serve/page_browser.sh
TEST_BINS := $(patsubst %.c,$(BUILD)/%,$(TEST_SRCS))
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(patsubst %.c,$(BUILD)/%,$(FUZZ_SRCS))
ALL_LIBS := $(call libs_for,cli)

.PHONY: all test test-run test-build check asan ubsan sanitize fuzz clean demo demo-run reference \
        deps deps-aarch64 deps-browser no-packages install uninstall
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

$(BUILD)/%.o: %.c | $(PKG_CHECK)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# The page's files are assembled into page.o (.incbin): -MMD does not see them.
$(BUILD)/serve/page.o: $(wildcard serve/page/*)

$(BUILD)/hearth: $(BUILD)/cli/main.o $(ALL_LIBS)
	$(CC) $(LDFLAGS) -o $@ $< $(ALL_LIBS) $(LDLIBS)

# ---- tests: tests/<module>/test_x.c links the module's libraries ----
define test_rules
$(BUILD)/tests/$(1)/%: tests/$(1)/%.c $(call test_libs_for,$(1)) tests/test.h
	@mkdir -p $$(@D)
	$$(CC) $$(CFLAGS) -Itests -MMD -MP $$(LDFLAGS) -o $$@ $$< \
	    $(call test_libs_for,$(1)) $$(LDLIBS)
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
fuzz_mod_fuzz_names := tools
fuzz_mod_fuzz_config := tools
fuzz_mod_fuzz_governor := engine
fuzz_mod_fuzz_memory_query := memory
fuzz_mod_fuzz_adapter := modelfile
fuzz_mod_fuzz_kvfile := modelfile
fuzz_mod_fuzz_ckpt := lora
fuzz_mod_fuzz_serve := serve
fuzz_libs = $(call libs_for,$(or $(fuzz_mod_$(1)),cli))
.SECONDEXPANSION:
$(BUILD)/tests/fuzz/%: tests/fuzz/%.c tests/fuzz/driver.c $$(call fuzz_libs,$$*)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests $(LDFLAGS) -o $@ $< tests/fuzz/driver.c \
	    $(call fuzz_libs,$*) $(LDLIBS)

test-build: $(BUILD)/hearth $(TEST_BINS) $(FUZZ_BINS)

# The layering, checked (scripts/check.sh): includes across modules only
# through public headers and only of the modules each depends on (the
# deps_* lists), every exported symbol hx_-prefixed, every library linking
# only what it depends on.
comma := ,
space := $(subst ,, )
check: $(foreach m,$(MODULES),$(call lib_of,$(m)))
	@sh scripts/check.sh $(BUILD) "$(foreach m,$(MODULES),$(m):$(subst $(space),$(comma),$(deps_$(m))))"

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

# ---- the Debian packages (scripts/deps.sh) ----
# `make deps`: the packages README.md names, installed only when missing,
# with apt-get install --no-upgrade (apt's output in build/deps.log).
# `make deps-aarch64`: the opt-in cross compiler, qemu-user and arm64 PCRE2
# of the phone tests (it adds dpkg's arm64 architecture); without them
# `make test` reports those runs skipped. `make deps-browser`: the opt-in
# chromium (and Node.js) of hearth serve's page and client tests, which
# otherwise report themselves skipped.
deps:
	@sh scripts/deps.sh
deps-aarch64:
	@sh scripts/deps.sh aarch64
deps-browser:
	@sh scripts/deps.sh browser
no-packages:
	@echo "hearth: pkg-config finds no $(PKGS); run 'make deps' (as root) to install" \
	    "the Debian packages README.md names" >&2; exit 1

include mk/aarch64.mk

# The README's two commands: the packages first, then the work in a new
# make that reads the flags of the packages just installed.
test: deps
	@$(MAKE) --no-print-directory test-run
test-run: test-build reference
	@if [ -f $(HEARTH_REFERENCE)/include/llama.h ]; then \
	    $(MAKE) --no-print-directory $(HXREF) || echo "hearth: hxref did not build; differential tests will skip" >&2; fi
	@$(if $(NO_AARCH64),,$(MAKE) --no-print-directory aarch64-build T="$(AARCH64_TESTS)")
	@$(if $(NO_AARCH64),,$(MAKE) --no-print-directory hearth-aarch64-test)
	@HEARTH_BUILD=$(BUILD) tests/run.sh $(TEST_BINS) $(FUZZ_BINS) $(SCRIPT_TESTS) \
	    $(if $(NO_AARCH64),,$(call aarch64_runs,$(AARCH64_TESTS)) $(AARCH64_HEARTH_TEST))

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

# Both sanitizers in one build (build/sanitize), what CI runs: every test
# and fuzz replay under ASan (leaks included) and UBSan at once, one build
# and one run instead of asan's and ubsan's two. The aarch64 runs are left out
# (NO_AARCH64): their cross-built binaries are never instrumented, and make
# test runs them.
sanitize:
	$(call SAN_ENV,address+undefined) $(MAKE) BUILD=build/sanitize OPT=-O1 NO_AARCH64=1 \
	    EXTRA_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
	    EXTRA_LDFLAGS="-fsanitize=address,undefined" test

# libFuzzer builds (clang), for long runs: build/fuzz/fuzz_x CORPUS_DIR
fuzz:
	@mkdir -p build/fuzz
	for f in $(FUZZ_SRCS); do \
	    n=$$(basename $$f .c); \
	    clang -std=c11 -D_GNU_SOURCE -g -O1 -I. -Itests $(PKG_CFLAGS) \
	        -fsanitize=fuzzer,address,undefined $$f \
	        $(foreach m,$(deps_cli),$(call src_of,$(m))) \
	        -o build/fuzz/$$n $(PKG_LIBS) -ldl -lm -pthread || exit 1; \
	done

include mk/bench.mk

# The main job (see README): what Hearth can run today.
demo: deps
	@$(MAKE) --no-print-directory demo-run
demo-run: $(BUILD)/hearth
	@sh scripts/demo.sh $(BUILD)/hearth

# ---- install: PREFIX/bin/hearth, the default model beside it in
# PREFIX/share/hearth (where hearth looks for it), and the man page made
# from the verbs' --help (scripts/manpage.sh); DESTDIR for packaging.
PREFIX ?= $(HOME)/.local
INSTALLED := bin/hearth share/hearth/hearth-tiny.gguf share/man/man1/hearth.1
$(BUILD)/hearth.1: $(BUILD)/hearth scripts/manpage.sh
	sh scripts/manpage.sh $(BUILD)/hearth > $@.tmp && mv $@.tmp $@ || { rm -f $@.tmp; exit 1; }
install: $(BUILD)/hearth $(BUILD)/hearth.1
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/hearth \
	    $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(BUILD)/hearth $(DESTDIR)$(PREFIX)/bin/hearth
	install -m 644 models/hearth-tiny.gguf $(DESTDIR)$(PREFIX)/share/hearth/hearth-tiny.gguf
	install -m 644 $(BUILD)/hearth.1 $(DESTDIR)$(PREFIX)/share/man/man1/hearth.1
	@echo "hearth: installed into $(DESTDIR)$(PREFIX) ($(INSTALLED))"
	@case ":$$PATH:" in *":$(PREFIX)/bin:"*) ;; \
	    *) echo "hearth: $(PREFIX)/bin is not on your PATH; add it to run 'hearth'";; esac
# Removes what install put there, and PREFIX/share/hearth once empty.
uninstall:
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/,$(INSTALLED))
	rmdir $(DESTDIR)$(PREFIX)/share/hearth 2>/dev/null || true

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

# b2fs - build, test and install.
#
#   make            release build: build/b2f, build/b2fs, build/libb2fs.a
#   make test       sanitizer build (ASan+UBSan) and every test; ends with
#                   "N passed, N failed"
#   make fuzz       libFuzzer targets (clang), each run for FUZZ_SECONDS
#   make install    PREFIX=/usr/local DESTDIR=
#   make demo       build, write a demo data set and mount it

CC      ?= cc
PREFIX  ?= /usr/local
DESTDIR ?=
PKGS    := fuse3 liblz4 libzstd zlib
ARCH    := $(shell uname -m)

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   := $(shell pkg-config --libs $(PKGS))
# libzfp (Debian: libzfp-dev, no pkg-config file) for python-blosc2's ZFP
# codecs; without it (ZFP=0, or not installed) their chunks fail to decode
# with an error that says so.
ZFP ?= $(shell printf '\043include <zfp.h>\n' | $(CC) -E -x c - >/dev/null 2>&1 && echo 1)
ifeq ($(ZFP),1)
PKG_CFLAGS += -DB2_HAVE_ZFP
PKG_LIBS   += -lzfp -lm
endif

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wvla
BASE    := -std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -Iinclude -Isrc $(PKG_CFLAGS) -pthread
OPT     ?= -O2 -g
SAN     := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
TSAN    := -O1 -g -fsanitize=thread

ifeq ($(ARCH),x86_64)
SIMD_AVX2 := -mavx2
endif

LIB_SRC  := $(sort $(wildcard src/common/*.c src/codec/*.c src/chunk/*.c src/frame/*.c \
             src/b2nd/*.c src/cache/*.c src/file/*.c src/store/*.c src/ns/*.c))
CLI_SRC  := $(sort $(wildcard src/cli/*.c))
FUSE_SRC := $(sort $(wildcard fuse/*.c))
UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))

# $(call objs,builddir,sources)
objs = $(patsubst %.c,$(1)/obj/%.o,$(2))

.PHONY: all san tsan fault venv test print-libs test-crash fuzz fuzz-long clean install demo bench
all: build/b2f build/b2fs

# The libraries a program linked with libb2fs.a needs (tests/t_fuzz_regress.sh).
print-libs:
	@echo $(PKG_LIBS)

# ---- one rule set per build flavour -------------------------------------
define flavour
$(1)/obj/%_avx2.o: %_avx2.c
	@mkdir -p $$(dir $$@)
	$$(CC) $$(BASE) $$(WARN) $(2) $$(SIMD_AVX2) -MMD -MP -c $$< -o $$@
$(1)/obj/%.o: %.c
	@mkdir -p $$(dir $$@)
	$$(CC) $$(BASE) $$(WARN) $(2) -MMD -MP -c $$< -o $$@
$(1)/libb2fs.a: $(call objs,$(1),$(LIB_SRC))
	@rm -f $$@
	ar rcs $$@ $$^
$(1)/b2f: $(call objs,$(1),$(CLI_SRC)) $(1)/libb2fs.a
	$$(CC) $(2) -pthread -o $$@ $$^ $$(PKG_LIBS)
$(1)/b2fs: $(call objs,$(1),$(FUSE_SRC)) $(1)/libb2fs.a
	$$(CC) $(2) -pthread -o $$@ $$^ $$(PKG_LIBS)
$(1)/tests/%: $(1)/obj/tests/unit/%.o $(1)/libb2fs.a
	@mkdir -p $$(dir $$@)
	$$(CC) $(2) -pthread -o $$@ $$^ $$(PKG_LIBS)
-include $$(wildcard $(1)/obj/*/*.d $(1)/obj/*/*/*.d $(1)/obj/*/*/*/*.d)
endef

$(eval $(call flavour,build,$(OPT)))
$(eval $(call flavour,build/san,$(SAN)))
$(eval $(call flavour,build/tsan,$(TSAN)))
# Test-only: sanitizers plus the fault-injection hooks of src/common/fileio.c.
$(eval $(call flavour,build/fault,$(SAN) -DB2_FAULT_INJECTION))

UNIT_BINS_SAN  := $(patsubst tests/unit/%.c,build/san/tests/%,$(UNIT_SRC))
UNIT_BINS_TSAN := $(patsubst tests/unit/%.c,build/tsan/tests/%,$(filter %_mt.c,$(UNIT_SRC)))

UNIT_BINS_FAULT := build/fault/tests/test_fwrite build/fault/tests/test_file_fault

san: build/san/b2f build/san/b2fs $(UNIT_BINS_SAN)
tsan: $(UNIT_BINS_TSAN) build/tsan/b2fs
fault: $(UNIT_BINS_FAULT) build/fault/b2fs

# python-blosc2 and NumPy from PyPI in build/venv for the interoperability
# tests (says so and goes on where PyPI cannot be reached).
venv:
	@bash scripts/setup-venv

# The test command the README gives.
test: all san tsan fault venv
	@bash tests/run.sh

# Crash safety through the mount: 200 SIGKILL trials, then disk-fault trials.
test-crash: all san build/fault/b2fs
	@bash tests/t_crash.sh 200

# ---- fuzzing (clang + libFuzzer) ----------------------------------------
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_FLAGS   := -std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -Iinclude -Isrc $(PKG_CFLAGS) -pthread \
                -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_BINS    := $(patsubst tests/fuzz/%.c,build/fuzz/%,$(FUZZ_SRC))

# The name-mapping target links the (pure) mapping of the namespace layer.
build/fuzz/fuzz_names: tests/fuzz/fuzz_names.c src/ns/names.c src/common/error.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $^

build/fuzz/%: tests/fuzz/%.c $(LIB_SRC)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(LIB_SRC) $(PKG_LIBS)

fuzz: $(FUZZ_BINS)
	@bash tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_BINS)

# Each target for at least 10 minutes (issue: reliability).
fuzz-long: $(FUZZ_BINS)
	@bash tests/fuzz/run.sh $${FUZZ_LONG_SECONDS:-600} $(FUZZ_BINS)

# ---- install -------------------------------------------------------------
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 build/b2f build/b2fs $(DESTDIR)$(PREFIX)/bin/
	install -m 644 docs/b2f.1 docs/b2fs.1 $(DESTDIR)$(PREFIX)/share/man/man1/

demo: all
	@bash scripts/demo

bench: all
	@bash scripts/bench-decode

clean:
	rm -rf build

# mcp-sandbox: one binary, a static library under it, and the test tiers.
#
#   make run     install missing Debian packages, build, start the server
#   make test    install test dependencies, build, run every tier (ends "N passed, N failed")
#   make         build only (BUILD=dir to build elsewhere, SAN=address,undefined for sanitizers)

BUILD   ?= build
CC      ?= gcc
SAN     ?=
OPT     ?= -O2 -g
VERSION := 0.1.0

PKGS     := jansson libseccomp libmicrohttpd sqlite3 nettle jose libcrypto libcurl
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN := -Wall -Wextra -Werror=implicit-function-declaration -Wshadow -Wstrict-prototypes \
        -Wmissing-prototypes -Wformat=2 -Wno-format-nonliteral
CFLAGS_ALL := -std=c17 -D_GNU_SOURCE -D_FORTIFY_SOURCE=3 $(OPT) $(WARN) $(WERROR) \
              -fno-strict-aliasing -fstack-protector-strong -Isrc -Isrc/lib \
              -DSBX_VERSION=\"$(VERSION)\" $(PKG_CFLAGS) $(EXTRA_CFLAGS)
ifneq ($(SAN),)
CFLAGS_ALL += -fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=all -U_FORTIFY_SOURCE
LDFLAGS_ALL += -fsanitize=$(SAN)
endif
LDLIBS_ALL := $(PKG_LIBS) -lpthread

LIB_SRCS := $(sort $(wildcard src/lib/*.c src/jail/*.c src/service/*.c src/protocol/*.c \
                              src/transport/*.c src/cli/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o)
RUNTIME_FILES := $(sort $(wildcard runtime/python/*.py))
RUNTIME_OBJS := $(RUNTIME_FILES:%=$(BUILD)/%.o)
UNIT_SRCS := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)

all: $(BUILD)/mcp-sandbox $(BUILD)/tests/probe $(BUILD)/tests/vm-sandboxes $(UNIT_BINS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

# Runtime drivers are embedded into the binary so that no install path can go stale.
$(BUILD)/runtime/%.o: runtime/%
	@mkdir -p $(dir $@)
	ld -r -z noexecstack -b binary -o $@ $<

# The seccomp policy is compiled with libseccomp at build time and embedded (see
# src/jail/seccomp.c): the generator links the table, the compiler and libseccomp; the binaries
# that run sandboxes get only the finished program.
SECCOMP_GEN_OBJS := $(addprefix $(BUILD)/src/,jail/seccomp_table.o jail/seccomp_policy.o \
                                               lib/err.o lib/util.o)
$(BUILD)/tools/seccomp_gen: $(BUILD)/tools/seccomp_gen.o $(SECCOMP_GEN_OBJS)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(shell pkg-config --libs libseccomp 2>/dev/null)

$(BUILD)/gen/seccomp_filter.c: $(BUILD)/tools/seccomp_gen
	@mkdir -p $(dir $@)
	$< $@.tmp && mv $@.tmp $@

$(BUILD)/gen/%.o: $(BUILD)/gen/%.c
	$(CC) $(CFLAGS_ALL) -c $< -o $@

# The driver's bytecode, compiled by the interpreter that sandboxes run; its source goes in
# too (RUNTIME_OBJS), for a sandbox whose Python is another version than at build time.
$(BUILD)/gen/driver_code.c: runtime/python/driver.py tools/driver_bytecode.py
	@mkdir -p $(dir $@)
	/usr/bin/python3 -I -S tools/driver_bytecode.py $< $@.tmp && mv $@.tmp $@

$(BUILD)/libmcpsbx.a: $(LIB_OBJS) $(RUNTIME_OBJS) $(BUILD)/gen/seccomp_filter.o \
                      $(BUILD)/gen/driver_code.o
	@rm -f $@
	ar rcs $@ $^

# Two executables from one library (src/front/serve_exec.c says why). mcp-sandbox is what hosts
# and users start: run, pool, doctor and config, and serve by exec'ing mcp-sandbox-server from its
# own directory. It links libc and jansson only: its serve_exec.o satisfies cmd_serve, so the
# archive's server objects never come in, and a heavy library reaching the run path fails here.
# It is also linked statically (static-pie, so still randomised): no loader, no libc and jansson
# to map and relocate, no lazy PLT resolution in the forked sandbox child. That saved 54 of 178
# page faults per `run -- /bin/true` here, where a fault costs 10-17 us. The price: a glibc or
# jansson security update needs a rebuild of this binary. Sanitizer builds stay dynamic (ASan
# cannot be static); FRONT_STATIC= (empty) builds it dynamic too.
FRONT_LIBS := $(shell pkg-config --libs jansson 2>/dev/null)
FRONT_STATIC ?= $(if $(SAN),,-static-pie)
$(BUILD)/mcp-sandbox: $(BUILD)/src/main.o $(BUILD)/src/front/serve_exec.o $(BUILD)/libmcpsbx.a \
                      $(BUILD)/mcp-sandbox-server
	$(CC) $(LDFLAGS_ALL) $(FRONT_STATIC) -o $@ $(filter %.o %.a,$^) $(FRONT_LIBS)

$(BUILD)/mcp-sandbox-server: $(BUILD)/src/main.o $(BUILD)/libmcpsbx.a
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LDLIBS_ALL)

# The probe is static so that it runs inside a sandbox with nothing but itself.
PROBE_SRCS := $(sort $(wildcard tests/integration/probe*.c))
$(BUILD)/tests/probe: $(PROBE_SRCS) tests/integration/probe.h
	@mkdir -p $(dir $@)
	$(CC) -std=c17 -D_GNU_SOURCE -O2 -Wall -Wextra -static -o $@ $(PROBE_SRCS)

# The server's cgroup use, for the cgroup2-vm tier's busybox guest: linked like the front end.
$(BUILD)/tests/vm-sandboxes: tests/vm/cgroup2-sandboxes.c $(BUILD)/libmcpsbx.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) $(FRONT_STATIC) -o $@ $< $(BUILD)/libmcpsbx.a $(FRONT_LIBS)

$(BUILD)/tests/test_%: tests/unit/test_%.c $(BUILD)/libmcpsbx.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(BUILD)/libmcpsbx.a $(LDFLAGS_ALL) $(LDLIBS_ALL) -lcmocka

# libFuzzer targets (clang): a short bounded run is part of `make test`, longer with `make fuzz`.
FUZZ_SRCS := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BUILD := build-fuzz
FUZZ_BINS := $(FUZZ_SRCS:tests/fuzz/%.c=$(FUZZ_BUILD)/%)
fuzz-build:
	$(MAKE) BUILD=$(FUZZ_BUILD) CC=clang SAN=address,undefined \
	    EXTRA_CFLAGS=-fsanitize=fuzzer-no-link $(FUZZ_BUILD)/libmcpsbx.a
	@for f in $(FUZZ_SRCS); do \
	  b=$(FUZZ_BUILD)/$$(basename $$f .c); \
	  clang -std=c17 -D_GNU_SOURCE -g -O1 -Isrc -Isrc/lib $(PKG_CFLAGS) \
	    -fsanitize=fuzzer,address,undefined -o $$b $$f $(FUZZ_BUILD)/libmcpsbx.a $(LDLIBS_ALL) || exit 1; \
	done
FUZZ_SECONDS ?= 600
fuzz: fuzz-build
	@for b in $(FUZZ_BINS); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$(basename $$b); \
	  $$b -max_total_time=$(FUZZ_SECONDS) $(FUZZ_BUILD)/corpus/$$(basename $$b) tests/fuzz/seeds/$$(basename $$b) || exit 1; \
	done

run:
	@scripts/install-deps.sh
	@$(MAKE) --no-print-directory -s all
	@exec scripts/start-server.sh

test:
	@scripts/install-deps.sh --test
	@$(MAKE) --no-print-directory -s all WERROR=-Werror
	@exec tests/run-all.sh

bench:
	@exec bench/run

format:
	clang-format -i $$(git ls-files --cached --others --exclude-standard '*.c' '*.h')

format-check:
	clang-format --dry-run --Werror $$(git ls-files --cached --others --exclude-standard '*.c' '*.h')

clean:
	rm -rf build build-* 

.PHONY: all run test bench fuzz fuzz-build format format-check clean
-include $(LIB_OBJS:.o=.d) $(BUILD)/src/main.d $(BUILD)/src/front/serve_exec.d $(BUILD)/tools/seccomp_gen.d

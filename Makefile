# remat - build, test, benchmark, install.
#
#   make            build/remat (CLI), build/libremat.a and build/libremat.so (with a soname)
#   make check      install missing Debian packages, build, check the src/ ladder, run every test
#   make sanitize   the same tests under AddressSanitizer + UBSan (build-san/)
#   make tsan       two threads planning different graphs at once, under ThreadSanitizer (build-tsan/)
#   make valgrind   the unit tests under valgrind (no leaks, no errors)
#   make bench      benchmarks that print figures (never pass/fail on time); BENCH="load ..." picks sections,
#                   BENCH=peers PEERS=DIR: Checkmate graphs of DIR (default ../shared/checkmate-graphs)
#   make fuzz       libFuzzer targets (clang) for FUZZ_SECONDS each (build-fuzz/)
#   make demo       compare strategies and plan the bundled transformer at 16 MiB
#   make install    PREFIX=/usr/local DESTDIR= (binary, libraries, headers, remat.pc)
#
# BUILD=dir puts every output in another directory, so parallel work (or a
# sanitizer build) does not clobber build/.

BUILD   ?= build
PREFIX  ?= /usr/local
CC      ?= cc
PKGS    := igraph libcjson
VERSION := $(shell sed -n 's/^\#define REMAT_VERSION_STRING "\(.*\)"/\1/p' include/remat/util.h)

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   := $(shell pkg-config --libs check 2>/dev/null)
GLPK_LIBS  := $(shell test -e /usr/include/glpk.h && echo -lglpk)
GLPK_DEF   := $(if $(GLPK_LIBS),-DREMAT_HAVE_GLPK=1,)

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
OPT     ?= -O2 -g
CFLAGS  ?=
CFLAGS  += -std=c11 $(OPT) $(WARN) -Iinclude -Isrc $(PKG_CFLAGS) $(GLPK_DEF) -MMD -MP
LDLIBS  += $(PKG_LIBS) $(GLPK_LIBS) -lm -pthread

# Every folder under src/ except cli is part of the library (src/README.md
# draws the ladder), so a new file in any of them builds with no edit here.
LIB_SRC  := $(sort $(filter-out src/cli/%,$(wildcard src/*/*.c)))
CLI_SRC  := $(sort $(wildcard src/cli/*.c))
TEST_SRC := $(sort $(wildcard tests/check_*.c))
TEST_LIB := tests/test_util.c tests/exec_util.c tests/oracle.c
# A suite is a `Suite *NAME_suite(void)` defined at the start of a line in a
# tests/check_*.c; a file that defines none is a part of a suite split along
# a seam (tests/check_load_errors.c adds its TCases to check_load.c's "load").
# /dev/null first: with no tests (a copy of src alone) sed reads no stdin.
SUITES   := $(shell sed -n 's/^Suite \*\([a-z0-9_]*\)_suite(void)$$/\1/p' /dev/null $(TEST_SRC))
BENCH_SRC:= $(sort $(wildcard tests/bench/*.c))

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/obj/%.o) $(TEST_LIB:%.c=$(BUILD)/obj/%.o)
BENCH_OBJ:= $(BENCH_SRC:%.c=$(BUILD)/obj/%.o)

.PHONY: all check test sanitize tsan valgrind bench fuzz demo install uninstall clean deps

# The shared library's soname carries the major version (0 until the API is
# declared stable, as libtool's convention for 0.x); the file name the whole
# version. Library objects are position-independent so one set of objects
# makes both libraries.
SOMAJOR := $(firstword $(subst ., ,$(VERSION)))
SONAME  := libremat.so.$(SOMAJOR)
SOFILE  := libremat.so.$(VERSION)
LIBDIR  ?= $(PREFIX)/lib

all: $(BUILD)/remat $(BUILD)/libremat.a $(BUILD)/$(SOFILE) $(BUILD)/remat.pc

$(LIB_OBJ): CFLAGS += -fPIC

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# Suite constructors are declared only in the generated runner.
$(BUILD)/obj/tests/%.o: CFLAGS += $(CHECK_CFLAGS) -Wno-missing-prototypes

$(BUILD)/libremat.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/$(SOFILE): $(LIB_OBJ)
	$(CC) $(CFLAGS) $(LDFLAGS) -shared -Wl,-soname,$(SONAME) -o $@ $^ $(LDLIBS)
	ln -sf $(SOFILE) $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $(BUILD)/libremat.so

# pkg-config metadata: `pkg-config --libs remat` links remat with igraph,
# cJSON and GLPK (public Requires, so a static link works from the same
# file); the headers need none of theirs.
REMAT_PC = { echo 'prefix=$(PREFIX)'; echo 'libdir=$(LIBDIR)'; echo 'includedir=$${prefix}/include'; echo; \
	  echo 'Name: remat'; \
	  echo 'Description: activation rematerialization planning for neural-network training, proved by replay'; \
	  echo 'Version: $(VERSION)'; echo 'Requires: $(PKGS)'; \
	  echo 'Libs: -L$${libdir} -lremat $(GLPK_LIBS) -lm -pthread'; echo 'Cflags: -I$${includedir}'; }

$(BUILD)/remat.pc: Makefile include/remat/util.h
	@mkdir -p $(dir $@)
	$(REMAT_PC) > $@

$(BUILD)/remat: $(CLI_OBJ) $(BUILD)/libremat.a
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(CLI_OBJ) $(BUILD)/libremat.a $(LDLIBS)

# The runner is generated: it calls every NAME_suite of SUITES.
$(BUILD)/gen/check_main.c: $(TEST_SRC) Makefile tests/runner.c.in
	@mkdir -p $(dir $@)
	{ echo '#include <check.h>'; \
	  for s in $(SUITES); do echo "Suite *$${s}_suite(void);"; done; \
	  echo 'static Suite *(*const suites[])(void) = {'; \
	  for s in $(SUITES); do echo "    $${s}_suite,"; done; \
	  echo '};'; cat tests/runner.c.in; } > $@

$(BUILD)/obj/gen/check_main.o: $(BUILD)/gen/check_main.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CHECK_CFLAGS) -Itests -c $< -o $@

$(BUILD)/check_remat: $(TEST_OBJ) $(BUILD)/obj/gen/check_main.o $(BUILD)/libremat.a
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(TEST_OBJ) $(BUILD)/obj/gen/check_main.o $(BUILD)/libremat.a $(CHECK_LIBS) $(LDLIBS)

# The README's library example, compiled against the installed-style headers.
$(BUILD)/example_api: tests/example_api.c $(BUILD)/libremat.a
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ tests/example_api.c $(BUILD)/libremat.a $(LDLIBS)

# Two threads planning different graphs at once (make check runs it plain,
# make tsan under ThreadSanitizer).
$(BUILD)/threads: tests/threads.c $(BUILD)/libremat.a
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ tests/threads.c $(BUILD)/libremat.a $(LDLIBS)

$(BUILD)/bench_remat: $(BENCH_OBJ) $(BUILD)/libremat.a
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(BENCH_OBJ) $(BUILD)/libremat.a $(LDLIBS)

# Installs the Debian packages only when pkg-config cannot find them.
deps:
	@pkg-config --exists $(PKGS) check || sh scripts/install-deps.sh

check: deps
	$(MAKE) --no-print-directory all $(BUILD)/check_remat $(BUILD)/example_api $(BUILD)/threads
	sh scripts/check-layout.sh $(BUILD)
	REMAT_FIXTURES=tests/fixtures $(BUILD)/check_remat
	$(BUILD)/example_api
	$(BUILD)/threads 1
	sh tests/cli_test.sh $(BUILD)/remat
	sh tests/readme_test.sh $(BUILD)
	sh tests/install_test.sh $(BUILD)

test: check

sanitize: deps
	$(MAKE) --no-print-directory BUILD=build-san OPT="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all" \
		LDFLAGS="-fsanitize=address,undefined" build-san/remat build-san/check_remat
	CK_FORK=no REMAT_FIXTURES=tests/fixtures build-san/check_remat
	sh tests/cli_test.sh build-san/remat

# The library from two threads at once under ThreadSanitizer (build-tsan/):
# any data race on the load, analysis, planning, replay, trace or allocator
# paths fails it.
tsan: deps
	$(MAKE) --no-print-directory BUILD=build-tsan OPT="-O1 -g -fsanitize=thread" LDFLAGS="-fsanitize=thread" \
		build-tsan/threads
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" build-tsan/threads 2

valgrind: deps
	$(MAKE) --no-print-directory all $(BUILD)/check_remat
	CK_FORK=no REMAT_FIXTURES=tests/fixtures valgrind --quiet --error-exitcode=9 --leak-check=full \
		--errors-for-leak-kinds=definite,indirect $(BUILD)/check_remat

# BENCH names sections (make bench BENCH="load resnet50"); empty runs all.
# PEERS: the directory of Checkmate graphs for BENCH=peers; PEERS_EXACT_S:
# exact's time limit there (seconds).
BENCH ?=
PEERS ?= ../shared/checkmate-graphs
PEERS_EXACT_S ?= 10
bench: deps
	$(MAKE) --no-print-directory OPT="-O2 -g" all $(BUILD)/bench_remat
	REMAT_PEERS_DIR="$(PEERS)" REMAT_PEERS_EXACT_S="$(PEERS_EXACT_S)" $(BUILD)/bench_remat $(BUILD)/remat $(BENCH)

# Fuzzing: the graph loader alone (load, fast), the loader with analysis,
# policy, replay, reports, tracer and planners (graph), the plan reader and
# the importers (Checkmate, DTR logs), under ASan + UBSan, each for
# FUZZ_SECONDS. The seeds are tests/fuzz/corpus/* (load shares graph's);
# what the fuzzer finds goes to build-fuzz/corpus/* (not committed) and
# crashes to build-fuzz/.
FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_TARGETS := load graph plan import

$(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h tests/fuzz/fuzz_load.h $(BUILD)/libremat.a
	$(CC) $(CFLAGS) -fsanitize=fuzzer $(LDFLAGS) -o $@ $< $(BUILD)/libremat.a $(LDLIBS)

fuzz: deps
	@command -v $(FUZZ_CC) >/dev/null 2>&1 || { echo "make fuzz: $(FUZZ_CC) not found (sh scripts/install-deps.sh installs it)" >&2; exit 1; }
	$(MAKE) --no-print-directory BUILD=build-fuzz CC=$(FUZZ_CC) WARN="$(WARN) -Wno-error" \
		OPT="-O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link $(FUZZ_SAN)" LDFLAGS="$(FUZZ_SAN)" \
		$(FUZZ_TARGETS:%=build-fuzz/fuzz_%)
	for t in $(FUZZ_TARGETS); do \
		mkdir -p build-fuzz/corpus/$$t && \
		seeds=$$t; [ $$t = load ] && seeds=graph; \
		build-fuzz/fuzz_$$t build-fuzz/corpus/$$t tests/fuzz/corpus/$$seeds -dict=tests/fuzz/remat.dict \
			-max_total_time=$(FUZZ_SECONDS) -max_len=16384 -timeout=20 -rss_limit_mb=2048 \
			-print_final_stats=1 -artifact_prefix=build-fuzz/ || exit 1; \
	done

# The main job on a bundled graph: every strategy side by side at a 16 MiB
# device budget, then the automatic plan, written and proved by numeric replay.
demo: deps
	$(MAKE) --no-print-directory all
	$(BUILD)/remat compare graphs/transformer4.json --budget 16MiB
	$(BUILD)/remat plan graphs/transformer4.json --budget 16MiB -o $(BUILD)/transformer4.plan.json
	$(BUILD)/remat replay graphs/transformer4.json $(BUILD)/transformer4.plan.json --numeric

# remat.pc is written for the PREFIX given here (build/remat.pc is for the
# default one).
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(PREFIX)/include/remat
	install -m 755 $(BUILD)/remat $(DESTDIR)$(PREFIX)/bin/remat
	install -m 644 $(BUILD)/libremat.a $(DESTDIR)$(LIBDIR)/libremat.a
	install -m 755 $(BUILD)/$(SOFILE) $(DESTDIR)$(LIBDIR)/$(SOFILE)
	ln -sf $(SOFILE) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libremat.so
	$(REMAT_PC) > $(DESTDIR)$(LIBDIR)/pkgconfig/remat.pc && chmod 644 $(DESTDIR)$(LIBDIR)/pkgconfig/remat.pc
	install -m 644 include/remat.h $(DESTDIR)$(PREFIX)/include/remat.h
	install -m 644 include/remat/*.h $(DESTDIR)$(PREFIX)/include/remat/

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/remat $(DESTDIR)$(LIBDIR)/libremat.a $(DESTDIR)$(LIBDIR)/$(SOFILE) \
		$(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/libremat.so $(DESTDIR)$(LIBDIR)/pkgconfig/remat.pc \
		$(DESTDIR)$(PREFIX)/include/remat.h
	rm -rf $(DESTDIR)$(PREFIX)/include/remat

clean:
	rm -rf build build-san build-fuzz build-tsan

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(BENCH_OBJ:.o=.d)

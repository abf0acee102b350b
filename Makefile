# logfs build. `make` builds build/logfs; `make test` builds and runs every
# test. Both first install missing Debian packages (packaging/install-deps.sh).
#
# Flavours: `make tsa`, `make tsan`, `make asan` and `make fuzz` run this
# Makefile again with BUILDDIR set to build/tsa, build/tsan, build/asan or
# build/fuzz and the flavour's
# compiler and flags, so every flavour keeps its own objects and binaries and
# `make build` never rebuilds because of another flavour.

BUILDDIR ?= build
PREFIX ?= /usr/local
SBINDIR ?= $(PREFIX)/sbin
DATADIR ?= $(PREFIX)/share
DESTDIR ?=
CXX ?= g++
JOBS ?= $(shell nproc)
CLANGXX ?= clang++-14

PKGS := libsystemd fuse3 rocksdb libglog gflags protobuf absl_status absl_statusor absl_strings \
        absl_str_format absl_synchronization absl_time absl_flat_hash_map absl_hash absl_cord libcrypto \
        prometheus-cpp-core prometheus-cpp-pull

# pkg-config runs only after the dependency step, so a fresh machine works.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS))
PKG_LIBS = $(shell pkg-config --libs $(PKGS))
# gRPC, for the etcd client (store/meta/ha/etcd/). Its cflags go to store/meta/ha/etcd/ and
# the generated etcd code only; everything links it (Debian's libgrpc++-dev
# ships grpc++.pc; the fallback is the libraries it names).
GRPC_CFLAGS = $(shell pkg-config --cflags grpc++ 2>/dev/null)
GRPC_LIBS = $(shell pkg-config --libs grpc++ 2>/dev/null || echo -lgrpc++ -lgrpc -lgpr)

# Set by the flavour targets below, empty in the default (gcc) build:
# FLAVOUR_FLAGS go to every compile and link, FLAVOUR_WARN to our own sources
# (not the generated proto), FLAVOUR_SRCS are extra sources linked into every
# binary of the flavour.
FLAVOUR_FLAGS ?=
FLAVOUR_WARN ?=
FLAVOUR_SRCS ?=

# -g1: line tables (backtraces, perf and gdb with file:line), not the full
# debug info of -g, which costs a third more compile time; `make OPT="-O2
# -g"` (after `make clean`) for gdb with locals. TEST_OPT is for the tests'
# own code, which waits on processes and disks: -O1 compiles it faster still.
OPT ?= -O2 -g1
TEST_OPT ?= -O1 -g1
WARN := -Wall -Wextra -Werror -Wno-unused-parameter $(FLAVOUR_WARN)
# asio picks aligned_alloc or operator new for its handler memory by whether a
# libstdc++ header came before its own (it tests _GLIBCXX_HAVE_ALIGNED_ALLOC).
# Sources include them in either order, so aligned_new and aligned_delete could
# come from different choices (an ODR violation ASan reports as
# alloc-dealloc-mismatch). One choice for every translation unit:
CPPFLAGS += -I. -I$(BUILDDIR)/gen -DFUSE_USE_VERSION=314 -DASIO_STANDALONE -DASIO_NO_DEPRECATED \
            -DASIO_HAS_STD_ALIGNED_ALLOC=1
# -fPIC: the RocksDB plugin (a shared library) links the same objects as the
# binaries; -fno-semantic-interposition keeps calls within it direct, so
# position-independent code costs the binaries nothing measurable.
CXXFLAGS += -std=c++17 $(OPT) $(FLAVOUR_FLAGS) -MMD -MP -pthread -fPIC -fno-semantic-interposition
LDLIBS += $(GRPC_LIBS) $(PKG_LIBS) -pthread

PROTO := store/format/logfs.proto
PROTO_CC := $(BUILDDIR)/gen/store/format/logfs.pb.cc
PROTO_H := $(BUILDDIR)/gen/store/format/logfs.pb.h
PROTO_OBJ := $(BUILDDIR)/obj/gen/store/format/logfs.pb.o

# etcd v3's gRPC API, generated from the .proto files Debian ships
# (golang-etcd-server-dev, and their imports from golang-github-gogo-protobuf-dev
# and golang-github-gogo-googleapis-dev) into $(ETCD_GEN), which only
# store/meta/ha/etcd/*.cc see (-isystem: generated code is not held to our warnings).
# The import paths are those the files use ("etcd/mvcc/mvccpb/kv.proto",
# "gogoproto/gogo.proto", "google/api/annotations.proto").
ETCD_GEN := $(BUILDDIR)/gen/etcdpb
ETCD_PROTO_PATH := /usr/share/gocode/src/go.etcd.io /usr/share/gocode/src/github.com/gogo/protobuf \
                   /usr/share/gocode/src/github.com/gogo/googleapis
ETCD_PROTOS := etcd/etcdserver/etcdserverpb/rpc.proto etcd/mvcc/mvccpb/kv.proto \
               etcd/auth/authpb/auth.proto gogoproto/gogo.proto google/api/annotations.proto \
               google/api/http.proto
ETCD_PROTO_FILES := $(foreach p,$(ETCD_PROTOS),$(firstword $(wildcard $(addsuffix /$(p),$(ETCD_PROTO_PATH))) $(p)))
# Only rpc.proto has services (KV, Lease, ...): the one .grpc.pb file pair.
ETCD_GRPC := $(ETCD_GEN)/etcd/etcdserver/etcdserverpb/rpc.grpc.pb
ETCD_PB_CC := $(ETCD_PROTOS:%.proto=$(ETCD_GEN)/%.pb.cc) $(ETCD_GRPC).cc
ETCD_PB_H := $(ETCD_PB_CC:.cc=.h)
ETCD_PB_OBJS := $(ETCD_PB_CC:$(BUILDDIR)/gen/%.cc=$(BUILDDIR)/obj/gen/%.o)

SRC_DIRS := src/util src/status src/metrics src/env $(shell find store -type d) wal cache fsclient fuse \
            rocksdb_fs src/cluster bench
ALL_SRCS := $(foreach d,$(SRC_DIRS),$(wildcard $(d)/*.cc))
LIB_SRCS := $(filter-out %_test.cc,$(ALL_SRCS)) $(FLAVOUR_SRCS)
# Unit tests: the *_test.cc next to the code. They need no root, no
# /dev/fuse and start no processes; what does lives in tests/.
# The fakes they use (tests/fakes/ but the power-cut FUSE layer) and those
# fakes' own tests go with them.
UNIT_FAKE_SRCS := $(filter-out tests/fakes/power_cut_fs%,$(wildcard tests/fakes/*.cc))
UNIT_TEST_SRCS := $(filter %_test.cc,$(ALL_SRCS)) $(UNIT_FAKE_SRCS)
INTEGRATION_TEST_SRCS := $(filter-out tests/test_main.cc,$(wildcard tests/*.cc)) \
                         $(wildcard tests/fakes/power_cut_fs*.cc)
MAIN_SRCS := $(wildcard src/main/*.cc)
# Google Benchmark micro-benchmarks of the hot paths (make microbench).
MICRO_SRCS := $(wildcard bench/micro/*_bench.cc) bench/micro/micro_main.cc

LIB_OBJS := $(PROTO_OBJ) $(ETCD_PB_OBJS) $(LIB_SRCS:%.cc=$(BUILDDIR)/obj/%.o)
MAIN_OBJS := $(MAIN_SRCS:%.cc=$(BUILDDIR)/obj/%.o)
TEST_MAIN_OBJ := $(BUILDDIR)/obj/tests/test_main.o
UNIT_TEST_OBJS := $(UNIT_TEST_SRCS:%.cc=$(BUILDDIR)/obj/%.o)
INTEGRATION_TEST_OBJS := $(INTEGRATION_TEST_SRCS:%.cc=$(BUILDDIR)/obj/%.o)
MICRO_OBJS := $(MICRO_SRCS:%.cc=$(BUILDDIR)/obj/%.o)

# Precompiled headers (gcc's, so the default build only): pch/lib.h for
# the product's objects, pch/test.h (made at TEST_OPT) for the tests' own,
# force-included with -include. Each object then loads the standard, absl,
# protobuf, glog and asio headers parsed once per build instead of parsing
# them again: a clean build of `make test`'s three binaries on 2 cores
# took 430 s with them and 648 s without. The clang flavours parse every
# header themselves, so a source that lacks an #include still fails in
# `make tsa`. PCH=0 turns them off. The generated protobuf and etcd code
# is compiled without.
PCH ?= $(if $(findstring clang,$(CXX)),0,1)
PCH_DIR := $(BUILDDIR)/obj/pch
ifeq ($(PCH),1)
LIB_PCH := $(PCH_DIR)/lib.h
TEST_PCH := $(PCH_DIR)/test.h
endif

# The version (packaging/version.sh: git describe, else the VERSION file)
# as a header. FORCE runs the recipe on every make, but the file is replaced
# only when the version changed, so src/util/version.o alone recompiles and
# the binaries relink (as git's GIT-VERSION-FILE does).
VERSION_H := $(BUILDDIR)/gen/src/util/version_gen.h

# The RocksDB FileSystem plugin (docs/rocksdb.md): the client library and
# rocksdb_fs/ as a shared library, with rocksdb_fs/plugin/ (the registration
# when it is loaded) and none of the servers, FUSE or gflags.
PLUGIN := $(BUILDDIR)/liblogfs_rocksdb.so
PLUGIN_DIRS := src/util src/status src/metrics src/env store/format store/rpc store/client cache wal \
               fsclient rocksdb_fs rocksdb_fs/plugin
PLUGIN_OBJS := $(PROTO_OBJ) $(patsubst %.cc,$(BUILDDIR)/obj/%.o, \
                 $(filter-out %_test.cc,$(foreach d,$(PLUGIN_DIRS),$(wildcard $(d)/*.cc))))
PLUGIN_MAP := rocksdb_fs/plugin/exports.map

# logfs_unit holds the unit tests alone; logfs_test holds every test, so one
# --gtest_filter reaches any suite.
BINARIES := $(BUILDDIR)/logfs $(BUILDDIR)/logfs_unit $(BUILDDIR)/logfs_test \
            $(BUILDDIR)/logfs_microbench $(PLUGIN)

.PHONY: all deps deps-clang bin build test unit faults microbench tsa tsan asan fuzz fuzz-build \
        clean help install check-layers deb FORCE

# The run command: build/logfs alone (the test binaries come with `make
# test`, `make build`).
all: deps
	@$(MAKE) --no-print-directory -j$(JOBS) bin

bin: $(BUILDDIR)/logfs $(PLUGIN)

build: $(BINARIES)

deps:
	@packaging/install-deps.sh

deps-clang:
	@packaging/install-deps.sh clang

# The micro-benchmarks are not built here (make tsa builds them in CI).
test: deps check-layers
	@$(MAKE) --no-print-directory -j$(JOBS) $(BUILDDIR)/logfs $(BUILDDIR)/logfs_unit $(BUILDDIR)/logfs_test \
	  $(PLUGIN)
	@$(MAKE) --no-print-directory deb
	LOGFS_BIN=$(abspath $(BUILDDIR)/logfs) tests/run_tests.sh $(BUILDDIR)/logfs_test $(TEST_ARGS)

# Includes go down the stack only (README "Layout").
check-layers:
	@.ci/check_layers.sh

# The unit tests alone: no root, no /dev/fuse, no child processes.
unit: deps
	@$(MAKE) --no-print-directory -j$(JOBS) $(BUILDDIR)/logfs_unit
	$(BUILDDIR)/logfs_unit $(TEST_ARGS)

# Micro-benchmarks of the hot paths (bench/micro/, Google Benchmark):
# make microbench MICROBENCH_ARGS=--benchmark_filter=Crc
MICROBENCH_ARGS ?=
microbench: deps
	@$(MAKE) --no-print-directory -j$(JOBS) $(BUILDDIR)/logfs_microbench
	$(BUILDDIR)/logfs_microbench $(MICROBENCH_ARGS)

# The fault-injection suite, many trials each: make faults FAULT_ARGS="--trials=20"
faults: deps
	@$(MAKE) --no-print-directory -j$(JOBS) build
	tests/faults.sh $(FAULT_ARGS)

# --- clang flavours ---------------------------------------------------------
# Every clang build is -Werror with -Wall -Wextra (WARN above) plus
# -Wthread-safety, which checks the ABSL_GUARDED_BY /
# ABSL_EXCLUSIVE_LOCKS_REQUIRED annotations (STYLE §6). clang also reports,
# unlike gcc, a dropped absl::StatusOr: Debian's absl marks it
# warn_unused_result for clang only (STYLE §4; drop one on purpose with
# .IgnoreError() and a comment). The one warning disabled is WARN's
# -Wno-unused-parameter, as in the gcc build: overrides and the FUSE and
# asio callbacks take parameters they do not use.
CLANG_WARN := -Wthread-safety
# make tsa: compile and link everything with the analysis on. -O0: the
# analysis is in the front end, so optimizing would only cost CPU.
TSA_VARS := BUILDDIR=$(BUILDDIR)/tsa CXX=$(CLANGXX) OPT="-O0" TEST_OPT="-O0" FLAVOUR_WARN="$(CLANG_WARN)"
# ThreadSanitizer. Debian's libabsl is not built with it, so
# tests/sanitizers/tsan_absl_sync.cc tells TSan about absl::Mutex's
# happens-before edges.
TSAN_VARS := BUILDDIR=$(BUILDDIR)/tsan CXX=$(CLANGXX) OPT="-O1 -g" TEST_OPT="-O1 -g" FLAVOUR_WARN="$(CLANG_WARN)" \
             FLAVOUR_FLAGS="-fsanitize=thread" FLAVOUR_SRCS=tests/sanitizers/tsan_absl_sync.cc
# AddressSanitizer with UndefinedBehaviorSanitizer; any UB report aborts.
ASAN_VARS := BUILDDIR=$(BUILDDIR)/asan CXX=$(CLANGXX) OPT="-O1 -g" TEST_OPT="-O1 -g" FLAVOUR_WARN="$(CLANG_WARN)" \
             FLAVOUR_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
# The integration subset the sanitizer targets run after the unit tests:
# real meta/segd/mount processes writing, fsyncing, reading and rolling.
SANITIZER_FILTER ?= ReplicationTest.*:RollTest.*

tsa: deps-clang
	@$(MAKE) --no-print-directory -j$(JOBS) $(TSA_VARS) build

tsan: deps-clang
	@$(MAKE) --no-print-directory -j$(JOBS) $(TSAN_VARS) build
	tests/sanitizers/run.sh tsan $(BUILDDIR)/tsan '$(SANITIZER_FILTER)'

asan: deps-clang
	@$(MAKE) --no-print-directory -j$(JOBS) $(ASAN_VARS) build
	tests/sanitizers/run.sh asan $(BUILDDIR)/asan '$(SANITIZER_FILTER)'

# libFuzzer targets (fuzz/, one per *_fuzzer.cc) under ASan + UBSan. The
# objects get libFuzzer's coverage instrumentation (-fsanitize=fuzzer-no-link);
# only the targets' links add libFuzzer itself (-fsanitize=fuzzer). The
# flavour compiles only the folders the targets use and links them from an
# archive, so each target takes just the objects it needs. `make fuzz` runs
# every target for FUZZ_SECONDS on seeds it writes into a temp dir
# (fuzz/run.sh); a crash, UB report, leak or hang fails it.
FUZZ_VARS := BUILDDIR=$(BUILDDIR)/fuzz CXX=$(CLANGXX) OPT="-O1 -g" TEST_OPT="-O1 -g" FLAVOUR_WARN="$(CLANG_WARN)" \
             FLAVOUR_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all \
                            -fno-omit-frame-pointer"
FUZZ_SECONDS ?= 60
FUZZ_LIB_DIRS := src/util src/status src/env src/metrics $(filter-out store/admin,$(shell find store -type d))
FUZZ_LIB_OBJS := $(PROTO_OBJ) $(ETCD_PB_OBJS) $(patsubst %.cc,$(BUILDDIR)/obj/%.o, \
                   $(filter-out %_test.cc,$(foreach d,$(FUZZ_LIB_DIRS),$(wildcard $(d)/*.cc))))
FUZZ_TARGET_SRCS := $(wildcard fuzz/*_fuzzer.cc)
FUZZ_HELPER_OBJS := $(patsubst %.cc,$(BUILDDIR)/obj/%.o,$(filter-out %_fuzzer.cc,$(wildcard fuzz/*.cc)))
FUZZ_BINARIES := $(FUZZ_TARGET_SRCS:fuzz/%.cc=$(BUILDDIR)/%)

fuzz: deps-clang
	@$(MAKE) --no-print-directory -j$(JOBS) $(FUZZ_VARS) fuzz-build
	fuzz/run.sh $(BUILDDIR)/fuzz $(FUZZ_SECONDS)

fuzz-build: $(FUZZ_BINARIES)
# Kept: the link rule's pattern would make them intermediate and delete them.
.SECONDARY: $(FUZZ_HELPER_OBJS) $(FUZZ_TARGET_SRCS:%.cc=$(BUILDDIR)/obj/%.o)

# The Debian package, from the current build/logfs (debian/rules calls
# `make bin`, which is incremental), into $(BUILDDIR)/deb/, then lintian.
# packaging/make-deb.sh says how.
deb: deps
	@$(MAKE) --no-print-directory -j$(JOBS) bin
	packaging/make-deb.sh $(BUILDDIR)

# --- rules --------------------------------------------------------------------
$(VERSION_H): FORCE
	@mkdir -p $(dir $@)
	@printf '#pragma once\n#define LOGFS_VERSION_STRING "%s"\n' "$$(packaging/version.sh)" > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; echo "VERSION $$(packaging/version.sh)"; fi

$(BUILDDIR)/obj/src/util/version.o: $(VERSION_H)

$(PROTO_CC) $(PROTO_H) &: $(PROTO)
	@mkdir -p $(BUILDDIR)/gen
	protoc --cpp_out=$(BUILDDIR)/gen $(PROTO)

$(PROTO_OBJ): $(PROTO_CC)
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) $(PKG_CFLAGS) -w -c $< -o $@

$(ETCD_PB_CC) $(ETCD_PB_H) &: $(ETCD_PROTO_FILES)
	@mkdir -p $(ETCD_GEN)
	protoc $(addprefix -I,$(ETCD_PROTO_PATH)) -I/usr/include --cpp_out=$(ETCD_GEN) $(ETCD_PROTOS)
	protoc $(addprefix -I,$(ETCD_PROTO_PATH)) -I/usr/include --grpc_out=$(ETCD_GEN) \
	  --plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin) etcd/etcdserver/etcdserverpb/rpc.proto

$(BUILDDIR)/obj/gen/etcdpb/%.o: $(ETCD_GEN)/%.cc $(ETCD_PB_H)
	@mkdir -p $(dir $@)
	@echo "CXX $<"
	@$(CXX) $(CPPFLAGS) -I$(ETCD_GEN) $(CXXFLAGS) $(PKG_CFLAGS) $(GRPC_CFLAGS) -w -c $< -o $@

# The tests' own objects at TEST_OPT (above).
$(TEST_MAIN_OBJ) $(UNIT_TEST_OBJS) $(INTEGRATION_TEST_OBJS): OPT = $(TEST_OPT)
ifeq ($(PCH),1)
# A precompiled header is made with its objects' flags (gcc refuses it
# otherwise: -Winvalid-pch, an error under -Werror) next to a copy of
# its header, where -include looks for it.
$(PCH_DIR)/%.h.gch: pch/%.h
	@mkdir -p $(dir $@)
	@echo "PCH $<"
	@cp $< $(PCH_DIR)/$*.h
	@$(CXX) $(CPPFLAGS) $(CXXFLAGS) $(WARN) $(PKG_CFLAGS) -x c++-header $(PCH_DIR)/$*.h -o $@
$(TEST_PCH).gch: pch/lib.h
$(TEST_PCH).gch: OPT = $(TEST_OPT)
$(BUILDDIR)/obj/%.o: PCH_FLAGS = -include $(LIB_PCH) -Winvalid-pch
$(TEST_MAIN_OBJ) $(UNIT_TEST_OBJS) $(INTEGRATION_TEST_OBJS): PCH_FLAGS = -include $(TEST_PCH) -Winvalid-pch
$(filter-out $(PROTO_OBJ) $(ETCD_PB_OBJS) $(BUILDDIR)/obj/store/meta/ha/etcd/%,$(LIB_OBJS)) $(MAIN_OBJS) \
  $(MICRO_OBJS) $(filter-out $(PROTO_OBJ),$(PLUGIN_OBJS)): $(LIB_PCH).gch
$(TEST_MAIN_OBJ) $(UNIT_TEST_OBJS) $(INTEGRATION_TEST_OBJS): $(TEST_PCH).gch
endif
# Every object may include the generated header.
$(BUILDDIR)/obj/%.o: %.cc $(PROTO_H)
	@mkdir -p $(dir $@)
	@echo "CXX $<"
	@$(CXX) $(CPPFLAGS) $(CXXFLAGS) $(WARN) $(PKG_CFLAGS) $(PCH_FLAGS) -c $< -o $@

# store/meta/ha/etcd/ alone also sees gRPC and the generated etcd API.
$(BUILDDIR)/obj/store/meta/ha/etcd/%.o: store/meta/ha/etcd/%.cc $(PROTO_H) $(ETCD_PB_H)
	@mkdir -p $(dir $@)
	@echo "CXX $<"
	@$(CXX) $(CPPFLAGS) -isystem $(ETCD_GEN) $(CXXFLAGS) $(WARN) $(PKG_CFLAGS) $(GRPC_CFLAGS) \
	  -c $< -o $@

$(BUILDDIR)/logfs: $(MAIN_OBJS) $(LIB_OBJS)
	@echo "LINK $@"
	@$(CXX) $(CXXFLAGS) -o $@ $^ $(LDLIBS)

$(BUILDDIR)/logfs_unit: $(TEST_MAIN_OBJ) $(UNIT_TEST_OBJS) $(LIB_OBJS)
	@echo "LINK $@"
	@$(CXX) $(CXXFLAGS) -o $@ $^ $(LDLIBS) -lgmock -lgtest

# zlib: tests/png_reader.cc inflates the PNGs the plot tests render.
$(BUILDDIR)/logfs_test: $(TEST_MAIN_OBJ) $(UNIT_TEST_OBJS) $(INTEGRATION_TEST_OBJS) $(LIB_OBJS)
	@echo "LINK $@"
	@$(CXX) $(CXXFLAGS) -o $@ $^ $(LDLIBS) -lgmock -lgtest $(shell pkg-config --libs zlib)

# Only the registration is exported ($(PLUGIN_MAP)): the library's own
# symbols are local to it (the protobuf descriptors of logfs.proto still
# register in libprotobuf's one pool: docs/rocksdb.md). --no-undefined
# but under a sanitizer, whose runtime only executables link.
PLUGIN_NO_UNDEFINED := $(if $(findstring -fsanitize,$(FLAVOUR_FLAGS)),,-Wl,--no-undefined)
$(PLUGIN): $(PLUGIN_OBJS) $(PLUGIN_MAP)
	@echo "LINK $@"
	@$(CXX) $(CXXFLAGS) -shared $(PLUGIN_NO_UNDEFINED) -Wl,--as-needed -Wl,--version-script=$(PLUGIN_MAP) \
	  -o $@ $(PLUGIN_OBJS) $(PKG_LIBS) -pthread

$(BUILDDIR)/logfs_microbench: $(MICRO_OBJS) $(LIB_OBJS)
	@echo "LINK $@"
	@$(CXX) $(CXXFLAGS) -o $@ $^ $(LDLIBS) -lbenchmark

$(BUILDDIR)/libfuzz_deps.a: $(FUZZ_LIB_OBJS)
	@rm -f $@
	@ar rcs $@ $^

$(BUILDDIR)/%_fuzzer: $(BUILDDIR)/obj/fuzz/%_fuzzer.o $(FUZZ_HELPER_OBJS) $(BUILDDIR)/libfuzz_deps.a
	@echo "LINK $@"
	@$(CXX) $(CXXFLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS)

# The mount(8) helper is a link to logfs (argv[0] dispatch). mount(8)
# looks for helpers in /sbin only (/usr/sbin with merged /usr): a
# PREFIX other than /usr needs SBINDIR=/usr/sbin for mount -t fuse.logfs.
# The Prometheus alerting rules (with their promtool unit tests) and the
# Grafana dashboard go where the package puts them, under DATADIR/logfs/.
install: all
	install -D -m 0755 $(BUILDDIR)/logfs $(DESTDIR)$(PREFIX)/bin/logfs
	install -D -m 0644 $(PLUGIN) $(DESTDIR)$(PREFIX)/lib/logfs/liblogfs_rocksdb.so
	install -d $(DESTDIR)$(SBINDIR)
	ln -sfr $(DESTDIR)$(PREFIX)/bin/logfs $(DESTDIR)$(SBINDIR)/mount.fuse.logfs
	install -D -m 0644 -t $(DESTDIR)$(DATADIR)/logfs/prometheus packaging/prometheus/logfs-alerts.yml \
	  packaging/prometheus/logfs-alerts.test.yml
	install -D -m 0644 -t $(DESTDIR)$(DATADIR)/logfs/grafana packaging/grafana/logfs-dashboard.json
	install -D -m 0755 -t $(DESTDIR)$(PREFIX)/lib/logfs packaging/make-etcd-certs.sh

clean:
	rm -rf $(BUILDDIR)

help:
	@echo "targets:"
	@echo "  all (default)  build build/logfs and the RocksDB plugin build/liblogfs_rocksdb.so"
	@echo "  build          build/logfs, the test binaries (build/logfs_unit, build/logfs_test) and"
	@echo "                 the micro-benchmarks (build/logfs_microbench)"
	@echo "  microbench     run the micro-benchmarks (MICROBENCH_ARGS=--benchmark_filter=...)"
	@echo "  test           run every test (needs root and /dev/fuse)"
	@echo "  unit           run the unit tests alone (build/logfs_unit; no root, no FUSE)"
	@echo "  faults         the fault-injection suite, FAULT_ARGS=--trials=N"
	@echo "  tsa            build everything with clang -Wthread-safety -Werror (build/tsa)"
	@echo "  tsan           unit tests + an integration subset under ThreadSanitizer (build/tsan)"
	@echo "  asan           the same under AddressSanitizer + UBSan (build/asan)"
	@echo "  fuzz           each libFuzzer target in fuzz/ for FUZZ_SECONDS (build/fuzz)"
	@echo "  deb            the Debian package $(BUILDDIR)/deb/logfs_VERSION_amd64.deb, then lintian"
	@echo "  install clean"
	@echo "  make test TEST_ARGS=--gtest_filter=Foo*   run a subset"
	@echo "  make tsan SANITIZER_FILTER='RollTest.*'   choose the integration subset"

-include $(shell find $(BUILDDIR)/obj -name '*.d' 2>/dev/null)

# logfs build. `make` builds build/logfs; `make test` builds and runs every
# test. Both first install missing Debian packages (packaging/install-deps.sh).

BUILDDIR ?= build
PREFIX ?= /usr/local
DESTDIR ?=
CXX ?= g++
JOBS ?= $(shell nproc)

PKGS := fuse3 rocksdb libglog gflags protobuf absl_status absl_statusor absl_strings \
        absl_str_format absl_synchronization absl_time absl_flat_hash_map absl_hash absl_cord

# pkg-config runs only after the dependency step, so a fresh machine works.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS))
PKG_LIBS = $(shell pkg-config --libs $(PKGS))

OPT ?= -O2 -g
WARN := -Wall -Wextra -Werror -Wno-unused-parameter
CPPFLAGS += -I. -I$(BUILDDIR)/gen -DFUSE_USE_VERSION=314 -DASIO_STANDALONE -DASIO_NO_DEPRECATED
CXXFLAGS += -std=c++17 $(OPT) -MMD -MP -pthread
LDLIBS += $(PKG_LIBS) -pthread

PROTO := store/format/logfs.proto
PROTO_CC := $(BUILDDIR)/gen/store/format/logfs.pb.cc
PROTO_H := $(BUILDDIR)/gen/store/format/logfs.pb.h
PROTO_OBJ := $(BUILDDIR)/obj/gen/store/format/logfs.pb.o

SRC_DIRS := src/util src/status src/env $(shell find store -type d) wal cache fuse src/cluster bench
ALL_SRCS := $(foreach d,$(SRC_DIRS),$(wildcard $(d)/*.cc))
LIB_SRCS := $(filter-out %_test.cc,$(ALL_SRCS))
UNIT_TEST_SRCS := $(filter %_test.cc,$(ALL_SRCS))
MAIN_SRCS := $(wildcard src/main/*.cc)
TEST_SRCS := $(UNIT_TEST_SRCS) $(wildcard tests/*.cc) $(wildcard tests/fakes/*.cc)

LIB_OBJS := $(PROTO_OBJ) $(LIB_SRCS:%.cc=$(BUILDDIR)/obj/%.o)
MAIN_OBJS := $(MAIN_SRCS:%.cc=$(BUILDDIR)/obj/%.o)
TEST_OBJS := $(TEST_SRCS:%.cc=$(BUILDDIR)/obj/%.o)

.PHONY: all deps build test faults clean help install check-layers

all: deps
	@$(MAKE) --no-print-directory -j$(JOBS) build

build: $(BUILDDIR)/logfs $(BUILDDIR)/logfs_test

deps:
	@packaging/install-deps.sh

test: deps check-layers
	@$(MAKE) --no-print-directory -j$(JOBS) build
	LOGFS_BIN=$(abspath $(BUILDDIR)/logfs) $(BUILDDIR)/logfs_test $(TEST_ARGS)

# Includes go down the stack only (README "Layout").
check-layers:
	@.ci/check_layers.sh

# The fault-injection suite, many trials each: make faults FAULT_ARGS="--trials=20"
faults: deps
	@$(MAKE) --no-print-directory -j$(JOBS) build
	tests/faults.sh $(FAULT_ARGS)

$(PROTO_CC) $(PROTO_H): $(PROTO)
	@mkdir -p $(BUILDDIR)/gen
	protoc --cpp_out=$(BUILDDIR)/gen $(PROTO)

$(PROTO_OBJ): $(PROTO_CC)
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) $(PKG_CFLAGS) -w -c $< -o $@

# Every object may include the generated header.
$(BUILDDIR)/obj/%.o: %.cc $(PROTO_H)
	@mkdir -p $(dir $@)
	@echo "CXX $<"
	@$(CXX) $(CPPFLAGS) $(CXXFLAGS) $(WARN) $(PKG_CFLAGS) -c $< -o $@

$(BUILDDIR)/logfs: $(MAIN_OBJS) $(LIB_OBJS)
	@echo "LINK $@"
	@$(CXX) $(CXXFLAGS) -o $@ $^ $(LDLIBS)

$(BUILDDIR)/logfs_test: $(TEST_OBJS) $(LIB_OBJS)
	@echo "LINK $@"
	@$(CXX) $(CXXFLAGS) -o $@ $^ $(LDLIBS) -lgmock -lgtest

install: all
	install -D -m 0755 $(BUILDDIR)/logfs $(DESTDIR)$(PREFIX)/bin/logfs

clean:
	rm -rf $(BUILDDIR)

help:
	@echo "targets: all (default) test faults install clean"
	@echo "  make test TEST_ARGS=--gtest_filter=Foo*   run a subset"

-include $(shell find $(BUILDDIR)/obj -name '*.d' 2>/dev/null)

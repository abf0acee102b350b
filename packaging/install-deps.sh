#!/usr/bin/env bash
# Installs the Debian 12 packages logfs needs to build, test and run.
# Does nothing (and needs no network) when they are all present.
#
#   packaging/install-deps.sh            build/test/run packages (make uses this)
#   packaging/install-deps.sh bench      also the tools bench/compare.sh and
#                                        bench/shell_appends.sh run
#   packaging/install-deps.sh gluster    also GlusterFS (bench/compare.sh --with-gluster)
#   packaging/install-deps.sh clang      also clang 14, its sanitizer runtimes and
#                                        llvm-symbolizer (make tsa, tsan, asan)
# Extra groups can be combined: `install-deps.sh bench gluster`.
set -euo pipefail

PACKAGES=(
  build-essential pkg-config
  libfuse3-dev fuse3
  librocksdb-dev rocksdb-tools
  libgflags-dev libgoogle-glog-dev
  libgtest-dev libgmock-dev
  # make microbench (bench/micro/, built with every `make build`).
  libbenchmark-dev
  libabsl-dev
  libasio-dev
  libssl-dev
  protobuf-compiler libprotobuf-dev
  # The etcd client (store/meta/ha/etcd/): gRPC C++ and etcd 3.4's .proto files with
  # their imports; etcd itself for meta high availability and its tests.
  libgrpc++-dev protobuf-compiler-grpc
  golang-etcd-server-dev golang-github-gogo-protobuf-dev golang-github-gogo-googleapis-dev
  etcd-server etcd-client
  attr
  # sd_notify for the systemd units; `make deb` (debhelper, lintian) and the
  # package tests (systemd-analyze verify, dpkg -i) run in `make test`.
  libsystemd-dev systemd
  debhelper dpkg-dev fakeroot lintian adduser
  # Metrics (src/metrics/): prometheus-cpp's core and pull Exposer; promtool
  # (package prometheus) lints every /metrics output in tests/metrics_test.cc.
  prometheus-cpp-dev prometheus
  # Tests: bench plots rendered to PNG (rsvg-convert) and decoded (zlib).
  librsvg2-bin zlib1g-dev
)

for group in "$@"; do
  case "$group" in
    bench) PACKAGES+=(fio rocksdb-tools python3 bc) ;;
    gluster) PACKAGES+=(glusterfs-server glusterfs-client) ;;
    clang) PACKAGES+=(clang-14 libclang-rt-14-dev llvm-14) ;;
    *) echo "install-deps: unknown group '$group' (known: bench, gluster, clang)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}; run as root or install them" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

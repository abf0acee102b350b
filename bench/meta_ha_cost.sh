#!/usr/bin/env bash
# The cost of meta high availability on namespace calls (issue 14, item 7):
# creates (open O_CREAT + close of an empty file) and renames per second
# through a real mount, with a lone meta (RocksDB's WAL is the journal) and
# with three meta replicas journaling to a three-member etcd, in ABAB
# order on the same machine. Appends and fsyncs do not touch meta, so the
# WAL rows of bench/compare.sh are unaffected by construction.
#
#   bench/meta_ha_cost.sh [--files=N] [--runs=R]    (defaults 500, 2)
# Needs root and /dev/fuse; everything runs on 127.0.0.1 under a temp dir.
set -euo pipefail
files=500
runs=2
for arg in "$@"; do
  case "$arg" in
    --files=*) files="${arg#*=}" ;;
    --runs=*) runs="${arg#*=}" ;;
    *) echo "usage: $0 [--files=N] [--runs=R]" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
bin=$PWD/build/logfs
root=$(mktemp -d /tmp/logfs-ha-cost-XXXXXX)
# shellcheck source=bench/meta_ha_cluster.sh
. bench/meta_ha_cluster.sh
cleanup() {
  for m in "$root"/mnt*; do fusermount3 -uz "$m" 2>/dev/null || true; done
  for p in "${HA_PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$root"
}
trap cleanup EXIT

# run NAME: creates/s and renames/s of $files files (in one process).
run() {
  python3 - "$root/mnt-$1" "$1" "$files" <<'PY'
import os, sys, time, random
mnt, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
d = os.path.join(mnt, "d%d" % random.randrange(1 << 30))
os.mkdir(d)
t0 = time.monotonic()
for i in range(n):
    os.close(os.open(os.path.join(d, "f%d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
t1 = time.monotonic()
for i in range(n):
    os.rename(os.path.join(d, "f%d" % i), os.path.join(d, "g%d" % i))
t2 = time.monotonic()
print("%-4s creates/s %6.0f  renames/s %6.0f  (create %.2f ms, rename %.2f ms)" %
      (name, n / (t1 - t0), n / (t2 - t1), (t1 - t0) / n * 1e3, (t2 - t1) / n * 1e3))
PY
}

ha_start_etcd "$root"
ha_start_cluster "$bin" "$root" lone 1
ha_start_cluster "$bin" "$root" ha 3
for r in $(seq 1 "$runs"); do run lone; run ha; done

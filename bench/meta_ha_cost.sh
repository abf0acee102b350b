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
pids=()
cleanup() {
  for m in "$root"/mnt*; do fusermount3 -uz "$m" 2>/dev/null || true; done
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$root"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_file() { for _ in $(seq 1 200); do [ -s "$1" ] && return 0; sleep 0.05; done; echo "no $1" >&2; return 1; }

start_etcd() {
  local cluster="" urls=() i
  for i in 0 1 2; do cp[$i]=$(free_port); pp[$i]=$(free_port); cluster+="e$i=http://127.0.0.1:${pp[$i]},"; done
  for i in 0 1 2; do
    etcd --name e$i --data-dir "$root/etcd$i" --listen-client-urls http://127.0.0.1:${cp[$i]} \
      --advertise-client-urls http://127.0.0.1:${cp[$i]} --listen-peer-urls http://127.0.0.1:${pp[$i]} \
      --initial-advertise-peer-urls http://127.0.0.1:${pp[$i]} --initial-cluster "${cluster%,}" \
      --initial-cluster-state new >"$root/etcd$i.log" 2>&1 &
    pids+=($!)
  done
  ETCD="127.0.0.1:${cp[0]},127.0.0.1:${cp[1]},127.0.0.1:${cp[2]}"
  for _ in $(seq 1 200); do
    ETCDCTL_API=3 etcdctl --endpoints="$ETCD" endpoint health >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "etcd did not come up" >&2; return 1
}

# start_cluster NAME META_ARGS...: meta (or replicas), 3 segds, a mount at $root/mnt-NAME.
start_cluster() {
  local name=$1 replicas=$2 metas="" i
  for i in $(seq 1 "$replicas"); do
    local d="$root/$name-meta$i"
    if [ "$replicas" -gt 1 ]; then
      "$bin" meta --data_dir="$d" --listen=127.0.0.1:0 --address_file="$d.addr" \
        --etcd="$ETCD" --cluster="$name" >"$d.log" 2>&1 &
    else
      "$bin" meta --data_dir="$d" --listen=127.0.0.1:0 --address_file="$d.addr" >"$d.log" 2>&1 &
    fi
    pids+=($!)
    wait_file "$d.addr"
    metas+="$(cat "$d.addr"),"
  done
  metas=${metas%,}
  for i in 1 2 3; do
    "$bin" segd --data_dir="$root/$name-segd$i" --listen=127.0.0.1:0 --meta="$metas" \
      --address_file="$root/$name-segd$i.addr" >"$root/$name-segd$i.log" 2>&1 &
    pids+=($!)
    wait_file "$root/$name-segd$i.addr"
  done
  mkdir -p "$root/mnt-$name"
  for _ in $(seq 1 100); do
    "$bin" mount --meta="$metas" --log_file="$root/$name-mount.log" "$root/mnt-$name" 2>/dev/null && return 0
    sleep 0.2  # an election or registrations still in progress
  done
  echo "mount of $name failed" >&2; return 1
}

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

start_etcd
start_cluster lone 1
start_cluster ha 3
for r in $(seq 1 "$runs"); do run lone; run ha; done

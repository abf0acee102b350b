#!/usr/bin/env bash
# Records block-cache traces of RocksDB on logfs and replays them, with a
# synthetic scan-plus-hot-set trace, through LRU, the mount's segmented
# LRU and Belady's OPT (`logfs bench cache-replay`; docs/PERFORMANCE.md
# "Block cache policy, measured").
#
#   bench/cache_traces.sh [--logfs=BIN] [--out=DIR] [--keys=N] [--seconds=S]
#                         [--capacity_mib=LIST]
#
# An embedded cluster (state in OUT/data) is mounted three times: once to
# fill a DB with db_bench fillrandom (KEYS keys of 400 bytes, no
# compression), then once per traced workload with --block_cache_trace:
# readrandom and readwhilewriting, S seconds each, with
# --use_direct_reads so every read reaches the mount (RocksDB's own block
# cache is 8 MiB) and no kernel page cache hides the pattern. Prints the
# replay table; the traces stay in OUT (16 bytes per lookup).
set -euo pipefail
LOGFS=build/logfs OUT=build/cache-traces KEYS=1000000 SECS=30 CAPS=32,64,128,256
for arg in "$@"; do
  case "$arg" in
    --logfs=*) LOGFS=${arg#*=} ;;
    --out=*) OUT=${arg#*=} ;;
    --keys=*) KEYS=${arg#*=} ;;
    --seconds=*) SECS=${arg#*=} ;;
    --capacity_mib=*) CAPS=${arg#*=} ;;
    *) echo "cache_traces: unknown argument $arg" >&2; exit 2 ;;
  esac
done
command -v db_bench >/dev/null || { echo "cache_traces: needs db_bench (Debian's rocksdb-tools)" >&2; exit 1; }
LOGFS=$(realpath "$LOGFS")
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
MNT=$OUT/mnt
mkdir -p "$MNT"
cleanup() { "$LOGFS" umount "$MNT" >/dev/null 2>&1 || true; }
trap cleanup EXIT

DB=(--db="$MNT/db" --wal_dir="$MNT/wal/db" --compression_type=none --value_size=400
    --num="$KEYS" --threads=1 --statistics=0 --cache_size=$((8 << 20)))
mount_logfs() { "$LOGFS" mount --data_dir="$OUT/data" "$@" "$MNT"; }

rm -rf "$OUT/data"
mount_logfs
mkdir -p "$MNT/wal" && setfattr -n user.logfs.kind -v wal "$MNT/wal"
echo "cache_traces: fillrandom, $KEYS keys" >&2
db_bench "${DB[@]}" --benchmarks=fillrandom,compact >"$OUT/fill.log" 2>&1
"$LOGFS" umount "$MNT"

traces=()
for workload in readrandom readwhilewriting; do
  trace=$OUT/$workload.trace
  mount_logfs --block_cache_trace="$trace"
  echo "cache_traces: $workload for ${SECS}s" >&2
  db_bench "${DB[@]}" --use_existing_db=1 --use_direct_reads=1 --benchmarks="$workload" \
    --duration="$SECS" >"$OUT/$workload.log" 2>&1
  "$LOGFS" umount "$MNT"
  traces+=("$trace")
done
"$LOGFS" bench cache-replay --trace="$(IFS=,; echo "${traces[*]}"),scan_hot" --capacity_mib="$CAPS"

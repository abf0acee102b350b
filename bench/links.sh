#!/usr/bin/env bash
# bench/links.sh: what issue 44's links and clones cost, on an embedded
# cluster of its own (build/logfs mount --data_dir=...):
#   1. RocksDB checkpoint of a DB of many SSTs, with stock ldb on the mount
#      (link(2) through FUSE) and through the plugin (LinkFile): seconds,
#      and the bytes the segment servers' replica files grew by;
#   2. a sealed file copied four ways on the mount: cp --reflink=never
#      (bytes through FUSE: read and write, what cp did before the mount
#      answered copy_file_range), cp (copy_file_range: its sealed segments
#      appended by reference), ln (a hard link) and logfs clone (a
#      metadata-only copy): seconds, bytes written, and the speed-up over
#      the byte copy.
# Each figure is the median of --runs; the baseline (the byte copy) is
# measured in the same run. Prints one markdown table.
#
#   bench/links.sh [--ssts=N] [--sst_mb=M] [--file_mb=F] [--runs=R] [--dir=DIR]
#
# --ssts SSTs of about --sst_mb MiB each (default 1000 x 2: a 2 GiB DB),
# --file_mb the copied file (default 1024). Needs root and /dev/fuse;
# installs rocksdb-tools through packaging/install-deps.sh. Everything it
# mounts is unmounted on exit, also on failure or ctrl-C.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOGFS=${LOGFS_BIN:-$REPO/build/logfs}
PLUGIN=$(dirname "$LOGFS")/liblogfs_rocksdb.so
SSTS=1000
SST_MB=2
FILE_MB=1024
RUNS=3
DIR=""
for arg in "$@"; do
  case "$arg" in
    --ssts=*) SSTS=${arg#*=} ;;
    --sst_mb=*) SST_MB=${arg#*=} ;;
    --file_mb=*) FILE_MB=${arg#*=} ;;
    --runs=*) RUNS=${arg#*=} ;;
    --dir=*) DIR=${arg#*=} ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "links.sh: unknown flag $arg (--help)" >&2; exit 2 ;;
  esac
done
for n in "$SSTS" "$SST_MB" "$FILE_MB" "$RUNS"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "links.sh: counts must be positive integers" >&2; exit 2; }
done
[[ -x $LOGFS ]] || { echo "links.sh: $LOGFS missing: run make" >&2; exit 2; }
[[ -f $PLUGIN ]] || { echo "links.sh: $PLUGIN missing: run make" >&2; exit 2; }
"$REPO/packaging/install-deps.sh" bench >/dev/null

[[ -n $DIR ]] || DIR=$(mktemp -d /var/tmp/logfs-links.XXXXXX)
MNT=$DIR/mnt
mkdir -p "$MNT"
cleanup() { "$LOGFS" umount "$MNT" >/dev/null 2>&1 || fusermount3 -uz "$MNT" 2>/dev/null || true; }
trap cleanup EXIT INT TERM
"$LOGFS" mount --data_dir="$DIR/data" "$MNT"

META=$(getfattr --absolute-names --only-values -n user.logfs.meta_address "$MNT")
SECRET=$(getfattr --absolute-names --only-values -n user.logfs.cluster_secret_file "$MNT")
URI="id=logfs://$META;cluster_secret_file=$SECRET"

# Bytes of every replica file of the three segment servers (du may find
# one a server deletes meanwhile: not an error).
replica_bytes() {
  { du -sb "$DIR"/data/segd*/segments 2>/dev/null || true; } | awk '{s += $1} END {printf "%.0f\n", s}'
}
now() { date +%s.%N; }
median() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
seconds() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", b - a}'; }

# A DB of $SSTS SSTs: fillseq with flushes of about $SST_MB MiB and no
# compactions, through the plugin (the mount would do as well).
value_bytes=1000
keys=$((SSTS * SST_MB * 1024 * 1024 / (value_bytes + 32)))
echo "loading $SSTS SSTs of ~$SST_MB MiB ($keys keys)..." >&2
LD_PRELOAD=$PLUGIN db_bench --fs_uri="$URI" --db=/db --benchmarks=fillseq --num="$keys" \
  --value_size=$value_bytes --compression_type=none --write_buffer_size=$((SST_MB << 20)) \
  --max_write_buffer_number=4 --disable_auto_compactions=1 --disable_wal=1 --threads=1 \
  --statistics=0 >/dev/null 2>&1
sst_count=$(find "$MNT/db" -name '*.sst' | wc -l)
db_bytes=$(du -sb "$MNT/db" | awk '{print $1}')

declare -A results
run_checkpoints() {  # $1 label, $2 command template with CKPT
  local label=$1 template=$2 times=() grown=()
  for r in $(seq 1 "$RUNS"); do
    local before after start end cmd=${template//CKPT/ckpt_${label}_$r}
    before=$(replica_bytes)
    start=$(now)
    eval "$cmd" >/dev/null 2>&1
    end=$(now)
    after=$(replica_bytes)
    times+=("$(seconds "$start" "$end")")
    grown+=($((after - before)))
  done
  results[$label.s]=$(printf '%s\n' "${times[@]}" | median)
  results[$label.bytes]=$(printf '%s\n' "${grown[@]}" | median)
}
echo "checkpoints..." >&2
run_checkpoints mount "ldb --db=$MNT/db --try_load_options checkpoint --checkpoint_dir=$MNT/CKPT"
run_checkpoints plugin "LD_PRELOAD=$PLUGIN ldb --fs_uri='$URI' --db=/db checkpoint --checkpoint_dir=/CKPT"
linked=$(stat -c %h "$(find "$MNT/db" -name '*.sst' | head -1)")

# A sealed file of $FILE_MB MiB, copied four ways.
echo "copies of a $FILE_MB MiB file..." >&2
mkdir -p "$MNT/files"
head -c $((FILE_MB << 20)) /dev/urandom >"$MNT/files/src"
run_copies() {  # $1 label, $2 command template with DST
  local label=$1 template=$2 times=() grown=()
  for r in $(seq 1 "$RUNS"); do
    local before after start end dst=$MNT/files/${label}_$r
    before=$(replica_bytes)
    sync
    echo 3 >/proc/sys/vm/drop_caches
    start=$(now)
    eval "${template//DST/$dst}" >/dev/null
    end=$(now)
    after=$(replica_bytes)
    times+=("$(seconds "$start" "$end")")
    grown+=($((after - before)))
    cmp -s "$MNT/files/src" "$dst" || { echo "links.sh: $dst differs from src" >&2; exit 1; }
  done
  results[$label.s]=$(printf '%s\n' "${times[@]}" | median)
  results[$label.bytes]=$(printf '%s\n' "${grown[@]}" | median)
}
run_copies bytes "cp --reflink=never $MNT/files/src DST"
run_copies cp "cp $MNT/files/src DST"
run_copies link "ln $MNT/files/src DST"
run_copies clone "$LOGFS clone $MNT/files/src DST"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b <= 0) b = 0.001; printf "%.0f", a / b}'; }
echo
echo "bench/links.sh --ssts=$SSTS --sst_mb=$SST_MB --file_mb=$FILE_MB --runs=$RUNS ($(date -u +%F), $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo
echo "| what | seconds (median of $RUNS) | bytes the segment servers' replicas grew by | vs the byte copy |"
echo "|---|--:|--:|--:|"
echo "| ldb checkpoint on the mount, $sst_count SSTs, $((db_bytes >> 20)) MiB | ${results[mount.s]} | ${results[mount.bytes]} | |"
echo "| ldb checkpoint through the plugin | ${results[plugin.s]} | ${results[plugin.bytes]} | |"
echo "| cp --reflink=never of a $FILE_MB MiB sealed file: bytes (baseline) | ${results[bytes.s]} | ${results[bytes.bytes]} | 1 |"
echo "| cp (copy_file_range: segments by reference) | ${results[cp.s]} | ${results[cp.bytes]} | $(ratio "${results[bytes.s]}" "${results[cp.s]}") x |"
echo "| ln (hard link) | ${results[link.s]} | ${results[link.bytes]} | $(ratio "${results[bytes.s]}" "${results[link.s]}") x |"
echo "| logfs clone | ${results[clone.s]} | ${results[clone.bytes]} | $(ratio "${results[bytes.s]}" "${results[clone.s]}") x |"
echo
echo "An SST of the DB has $linked names after $((2 * RUNS)) checkpoints."

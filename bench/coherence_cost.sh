#!/usr/bin/env bash
# bench/coherence_cost.sh: what coherent mount caches (docs/coherence.md)
# buy on the stat and listing path, against ext4 and against logfs with
# invalidations off (meta --cache_lease_ms=0: the kernel keeps names and
# attributes 1 s, as before 0.2). Measured in one run, on one machine:
#
#   tree    ls -lR and find -printf '%s %m' (an lstat per name) over a tree
#           of DIRS directories of FILES empty files, each run RUNS times
#           after a warm-up pass, plus one pass after drop_caches (cold);
#   meta    `logfs bench meta --processes` stat and readdir phases.
#
# Prints the medians (ms, ops/s) and ratios as a markdown table. Needs root
# (drop_caches, FUSE). Usage:
#   bench/coherence_cost.sh [--bin=build/logfs] [--dirs=100] [--files=100]
#                           [--runs=3] [--meta_threads=4] [--meta_files=500]
set -euo pipefail
BIN=build/logfs DIRS=100 FILES=100 RUNS=3 META_THREADS=4 META_FILES=500
for a in "$@"; do
  case "$a" in
    --bin=*) BIN=${a#*=} ;;
    --dirs=*) DIRS=${a#*=} ;;
    --files=*) FILES=${a#*=} ;;
    --runs=*) RUNS=${a#*=} ;;
    --meta_threads=*) META_THREADS=${a#*=} ;;
    --meta_files=*) META_FILES=${a#*=} ;;
    *) echo "coherence_cost.sh: unknown argument $a" >&2; exit 2 ;;
  esac
done
BIN=$(realpath "$BIN")
cd "$(dirname "$0")/.."
# shellcheck source=bench/meta_ha_cluster.sh
. bench/meta_ha_cluster.sh

ROOT=$(mktemp -d /var/tmp/logfs-coherence-XXXXXX)
MOUNTS=()
cleanup() {
  for m in "${MOUNTS[@]}"; do fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m" 2>/dev/null || true; done
  for p in "${HA_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${HA_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$ROOT"
}
trap cleanup EXIT

ha_start_cluster "$BIN" "$ROOT" coherent 1
declare -A DIR=([coherent]=$HA_MNT/t)
MOUNTS+=("$HA_MNT")
HA_META_FLAGS=--cache_lease_ms=0 ha_start_cluster "$BIN" "$ROOT" legacy 1
DIR[legacy]=$HA_MNT/t
MOUNTS+=("$HA_MNT")
DIR[ext4]=$ROOT/ext4/t
TARGETS=(ext4 coherent legacy)

now_ms() { echo $(($(date +%s%N) / 1000000)); }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }

for t in "${TARGETS[@]}"; do
  mkdir -p "${DIR[$t]}"
  start=$(now_ms)
  for d in $(seq 1 "$DIRS"); do
    mkdir "${DIR[$t]}/d$d"
    (cd "${DIR[$t]}/d$d" && eval "touch f{1..$FILES}")
  done
  echo "$t: made $((DIRS * FILES)) files in $(($(now_ms) - start)) ms" >&2
done

declare -A RESULT
timed() {  # timed KEY COMMAND...: appends the ms to RESULT[KEY]
  local key=$1 start
  shift
  start=$(now_ms)
  "$@" >/dev/null
  RESULT[$key]+="$(($(now_ms) - start)) "
}
for t in "${TARGETS[@]}"; do
  sync
  echo 3 >/proc/sys/vm/drop_caches
  timed "$t.lsR.cold" ls -lR "${DIR[$t]}"
done
for t in "${TARGETS[@]}"; do ls -lR "${DIR[$t]}" >/dev/null; done  # warm-up
for _ in $(seq 1 "$RUNS"); do
  for t in "${TARGETS[@]}"; do
    timed "$t.lsR" ls -lR "${DIR[$t]}"
    timed "$t.find" find "${DIR[$t]}" -printf '%s %m\n'
  done
done
for t in "${TARGETS[@]}"; do
  mkdir -p "${DIR[$t]}/../bm"
  out=$("$BIN" bench meta --dir="${DIR[$t]}/../bm" --processes --threads="$META_THREADS" \
    --files="$META_FILES" 2>&1 | grep '^phase=')
  RESULT[$t.stat]=$(echo "$out" | awk '/^phase=stat /{for(i=1;i<=NF;i++) if($i~/^ops_per_s=/){sub("ops_per_s=","",$i); print $i}}')
  RESULT[$t.readdir]=$(echo "$out" | awk '/^phase=readdir /{for(i=1;i<=NF;i++) if($i~/^ops_per_s=/){sub("ops_per_s=","",$i); print $i}}')
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "n/a"; else printf "%.2f", a / b }'; }
echo
echo "coherence_cost: $((DIRS * FILES)) files in $DIRS directories, $RUNS runs (medians); bench meta $META_THREADS processes x $META_FILES files"
echo
echo "| measure | ext4 | logfs coherent | logfs 1 s (--cache_lease_ms=0) | coherent / 1 s | ext4 / coherent |"
echo "|---|--:|--:|--:|--:|--:|"
for m in lsR.cold lsR find; do
  e=$(echo "${RESULT[ext4.$m]}" | tr ' ' '\n' | grep . | median)
  c=$(echo "${RESULT[coherent.$m]}" | tr ' ' '\n' | grep . | median)
  l=$(echo "${RESULT[legacy.$m]}" | tr ' ' '\n' | grep . | median)
  # Times: smaller is better, so the speed-up is legacy / coherent.
  echo "| $m (ms) | $e | $c | $l | $(ratio "$l" "$c") faster | $(ratio "$e" "$c") |"
done
for m in stat readdir; do
  e=${RESULT[ext4.$m]} c=${RESULT[coherent.$m]} l=${RESULT[legacy.$m]}
  echo "| bench meta $m (ops/s) | $e | $c | $l | $(ratio "$c" "$l") faster | $(ratio "$e" "$c") |"
done

#!/usr/bin/env bash
# bench/snapshots.sh: what issue 44's directory snapshots cost, on an
# embedded cluster of its own (build/logfs mount --data_dir=...): a tree of
# --files small sealed files in --dirs directories, then per run
#   - `logfs snapshot create` of it (seconds, and the bytes the segment
#     servers' replica files grew by),
#   - `ls -lR` of the snapshot against `ls -lR` of the tree (names, sizes,
#     modes must be the same),
#   - `logfs snapshot delete`,
# against the baseline measured in the same run: `cp -a` of the tree on the
# mount (every byte read and written again; once, it is slow). Medians of
# --runs. Prints one markdown table.
#
#   bench/snapshots.sh [--files=N] [--dirs=D] [--file_kb=K] [--runs=R] [--dir=DIR]
#
# Defaults: 10000 files of 4 KiB in 100 directories (replication 1), 3 runs. Needs root and
# /dev/fuse. Everything it mounts is unmounted on exit, also on failure or
# ctrl-C.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOGFS=${LOGFS_BIN:-$REPO/build/logfs}
FILES=10000
DIRS=100
FILE_KB=4
RUNS=3
DIR=""
for arg in "$@"; do
  case "$arg" in
    --files=*) FILES=${arg#*=} ;;
    --dirs=*) DIRS=${arg#*=} ;;
    --file_kb=*) FILE_KB=${arg#*=} ;;
    --runs=*) RUNS=${arg#*=} ;;
    --dir=*) DIR=${arg#*=} ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "snapshots.sh: unknown flag $arg (--help)" >&2; exit 2 ;;
  esac
done
for n in "$FILES" "$DIRS" "$FILE_KB" "$RUNS"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "snapshots.sh: counts must be positive integers" >&2; exit 2; }
done
[[ -x $LOGFS ]] || { echo "snapshots.sh: $LOGFS missing: run make" >&2; exit 2; }

[[ -n $DIR ]] || DIR=$(mktemp -d /var/tmp/logfs-snapshots.XXXXXX)
MNT=$DIR/mnt
mkdir -p "$MNT"
cleanup() { "$LOGFS" umount "$DIR/mnt" >/dev/null 2>&1 || fusermount3 -uz "$DIR/mnt" 2>/dev/null || true; }
trap cleanup EXIT INT TERM
"$LOGFS" mount --data_dir="$DIR/data" "$MNT"

replica_bytes() { du -sb "$DIR"/data/segd*/segments | awk '{s += $1} END {printf "%.0f\n", s}'; }
now() { date +%s.%N; }
median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
# `ls -lR` without the times: names, modes, links, owners, sizes.
listing() { (cd "$1" && ls -lR --time-style=+ .); }

echo "making $FILES files of $FILE_KB KiB in $DIRS directories..." >&2
# One replica per file (the tree and its copy inherit it from `b`): a
# segment server keeps two descriptors open per replica (data and .crc),
# and three servers holding 3 x 10,000 replicas would pass a
# 20,000-descriptor limit (the units set LimitNOFILE=65536). A snapshot's
# cost does not depend on the replication.
mkdir "$MNT/b"
setfattr -n user.logfs.replication -v 1 "$MNT/b"
MNT=$MNT/b
mkdir "$MNT/tree"
# One process writes them all: a fork per file would take longer than the runs.
python3 - "$MNT/tree" "$FILES" "$DIRS" "$FILE_KB" <<'PY'
import os, sys
top, files, dirs, kb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
data = os.urandom(kb * 1024)
for d in range(dirs):
    os.mkdir(f"{top}/d{d}")
for f in range(files):
    with open(f"{top}/d{f % dirs}/f{f}", "wb") as out:
        out.write(data)
PY
listing "$MNT/tree" > "$DIR/tree.ls"

create_s=() delete_s=() copy_s=() create_bytes=() copy_bytes=()
for ((run = 1; run <= RUNS; run++)); do
  before=$(replica_bytes)
  t0=$(now)
  "$LOGFS" snapshot create "$MNT/tree" "run$run" >/dev/null
  t1=$(now)
  create_s+=("$(echo "$t1 - $t0" | bc -l)")
  create_bytes+=($(($(replica_bytes) - before)))
  listing "$MNT/tree/.snapshot/run$run" > "$DIR/snap.ls"
  if ! cmp -s "$DIR/tree.ls" "$DIR/snap.ls"; then
    echo "snapshots.sh: ls -lR of the snapshot differs from the tree's:" >&2
    diff "$DIR/tree.ls" "$DIR/snap.ls" | head >&2
    exit 1
  fi
  t0=$(now)
  "$LOGFS" snapshot delete "$MNT/tree" "run$run" >/dev/null
  t1=$(now)
  delete_s+=("$(echo "$t1 - $t0" | bc -l)")

  if ((run == 1)); then
    before=$(replica_bytes)
    t0=$(now)
    cp -a "$MNT/tree" "$MNT/copy" || exit 1
    t1=$(now)
    copy_s+=("$(echo "$t1 - $t0" | bc -l)")
    copy_bytes+=($(($(replica_bytes) - before)))
  fi
done
rm -rf "$MNT/copy"

c=$(printf '%s\n' "${create_s[@]}" | median)
d=$(printf '%s\n' "${delete_s[@]}" | median)
p=$(printf '%s\n' "${copy_s[@]}" | median)
cb=$(printf '%s\n' "${create_bytes[@]}" | median)
pb=$(printf '%s\n' "${copy_bytes[@]}" | median)
echo "| $FILES files, $DIRS dirs, $FILE_KB KiB each (median of $RUNS) | seconds | replica bytes written | vs cp -a |"
echo "|---|---:|---:|---:|"
printf '| cp -a of the tree (baseline, once) | %.3f | %s | 1.0x |\n' "$p" "$pb"
printf '| logfs snapshot create | %.3f | %s | %.0fx |\n' "$c" "$cb" "$(echo "$p / $c" | bc -l)"
printf '| logfs snapshot delete | %.3f | - | - |\n' "$d"
echo "ls -lR of every snapshot matched the tree's (names, modes, links, owners, sizes)" >&2

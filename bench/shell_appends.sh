#!/usr/bin/env bash
# bench/shell_appends.sh: a file appended to by many short-lived writers,
# as shell logging does (`echo line >> log` in a loop, cron jobs, logrotate's
# create mode): N appends, each opening the file again, then a cold `cat`
# of it, on
#   ext4   a plain directory under the work dir (the same disk)
#   logfs  the embedded 3-replica cluster (`logfs mount --data_dir=...`),
#          the file in a WAL directory
# and, with --baseline_appends=M (M > 0), logfs with --nocontinue_wal_segments
# (every writer starts a segment, as before issue 30) for M appends, whose
# per-append figures are then comparable. Prints one markdown table: appends/s, the
# cold cat's MB/s and time, the file's segments, and each figure's ratio to
# ext4. Needs root (mounts, drop_caches) and /dev/fuse; everything it
# mounts is unmounted on exit, also on failure or ctrl-C.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
APPENDS=100000 BASELINE_APPENDS=0 WORK='' BIN=${LOGFS_BIN:-$REPO/build/logfs}

usage() {
  cat <<EOF
usage: bench/shell_appends.sh [--appends=N] [--baseline_appends=M] [--work=DIR] [--bin=PATH]
  --appends=N           appends per target (default 100000)
  --baseline_appends=M  also logfs with --nocontinue_wal_segments, M appends (default 0: not run)
  --work=DIR            scratch dir on the disk under test (default: a new dir under build/)
  --bin=PATH            the logfs binary (default \$LOGFS_BIN, else build/logfs)
EOF
}
for arg in "$@"; do
  case "$arg" in
    --appends=*) APPENDS=${arg#*=} ;;
    --baseline_appends=*) BASELINE_APPENDS=${arg#*=} ;;
    --work=*) WORK=${arg#*=} ;;
    --bin=*) BIN=${arg#*=} ;;
    -h|--help) usage; exit 0 ;;
    *) echo "shell_appends: unknown flag '$arg'" >&2; usage >&2; exit 2 ;;
  esac
done
for n in "$APPENDS" "$BASELINE_APPENDS"; do
  [[ $n =~ ^[0-9]+$ ]] || { echo "shell_appends: counts are whole numbers (got '$n')" >&2; exit 2; }
done
[ "$APPENDS" -gt 0 ] || { echo "shell_appends: --appends must be positive" >&2; exit 2; }
[ -x "$BIN" ] || { echo "shell_appends: no logfs binary at $BIN (run make)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "shell_appends: needs root (drop_caches, FUSE mounts)" >&2; exit 2; }
"$REPO/packaging/install-deps.sh" bench >&2  # bc
[ -n "$WORK" ] || WORK=$(mktemp -d "$REPO/build/shell-appends.XXXXXX")
mkdir -p "$WORK"

MOUNTS=()
cleanup() {
  for m in "${MOUNTS[@]}"; do
    "$BIN" umount "$m" >/dev/null 2>&1 || fusermount3 -uz "$m" 2>/dev/null || true
  done
  rm -rf "$WORK"/{ext4,logfs-*} 2>/dev/null || true
  rmdir "$WORK" 2>/dev/null || true
}
trap cleanup EXIT INT TERM

now() { date +%s.%N; }

# Appends N lines to FILE, each through a descriptor of its own (bash's
# builtin echo: one open, write, close each, no fork), and prints the
# seconds it took.
append_lines() {
  local file=$1 n=$2 start end
  start=$(now)
  for ((i = 1; i <= n; i++)); do echo "line $i of the shell appends benchmark" >>"$file"; done
  end=$(now)
  echo "$end - $start" | bc -l
}

# Drops the kernel's caches (and a logfs mount's block cache), then cats
# FILE: prints "SECONDS BYTES".
cold_cat() {
  local file=$1 start end bytes
  sync
  echo 3 >/proc/sys/vm/drop_caches
  setfattr -n user.logfs.drop_block_cache -v 1 "$file" 2>/dev/null || true
  start=$(now)
  bytes=$(cat "$file" | wc -c)
  end=$(now)
  echo "$(echo "$end - $start" | bc -l) $bytes"
}

# Runs the workload on DIR (a directory of a target): prints
# "APPEND_SECONDS CAT_SECONDS BYTES SEGMENTS LINES".
run_target() {
  local dir=$1 n=$2 file=$1/appends.log segments lines a c
  rm -f "$file"
  a=$(append_lines "$file" "$n")
  read -r c bytes < <(cold_cat "$file")
  lines=$(wc -l <"$file")
  [ "$lines" = "$n" ] || { echo "shell_appends: $file has $lines lines, not $n" >&2; exit 1; }
  segments=$(getfattr --absolute-names --only-values -n user.logfs.segments "$file" 2>/dev/null | head -1 || true)
  if [[ $segments =~ ^([0-9]+)\ segments\ in ]]; then
    segments=${BASH_REMATCH[1]}
  elif [ -n "$segments" ]; then
    segments=$(getfattr --absolute-names --only-values -n user.logfs.segments "$file" | wc -l)
  else
    segments=-
  fi
  echo "$a $c $bytes $segments $lines"
}

# NAME [FLAGS...]: mounts an embedded cluster (unmounted on exit) and sets
# WAL_DIR to a WAL directory on it. Not in a subshell: MOUNTS must keep it.
mount_logfs() {
  local name=$1
  shift
  local mnt=$WORK/logfs-$name-mnt
  mkdir -p "$mnt"
  "$BIN" mount --data_dir="$WORK/logfs-$name-data" "$@" "$mnt" >&2
  MOUNTS+=("$mnt")
  mkdir -p "$mnt/wal"
  setfattr -n user.logfs.kind -v wal "$mnt/wal"
  WAL_DIR=$mnt/wal
}

declare -A RESULT
mkdir -p "$WORK/ext4"
echo "ext4: $APPENDS appends ..." >&2
RESULT[ext4]=$(run_target "$WORK/ext4" "$APPENDS")
echo "logfs: $APPENDS appends ..." >&2
mount_logfs cont
RESULT[logfs]=$(run_target "$WAL_DIR" "$APPENDS")
if [ "$BASELINE_APPENDS" -gt 0 ]; then
  echo "logfs --nocontinue_wal_segments: $BASELINE_APPENDS appends ..." >&2
  mount_logfs new --nocontinue_wal_segments
  RESULT[nocontinue]=$(run_target "$WAL_DIR" "$BASELINE_APPENDS")
fi

read -r e_a e_c e_b _ _ <<<"${RESULT[ext4]}"
e_rate=$(echo "$APPENDS / $e_a" | bc -l)
e_mbs=$(echo "$e_b / $e_c / 1000000" | bc -l)
echo
echo "$(date -u +%FT%TZ) $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || true): bench/shell_appends.sh --appends=$APPENDS --baseline_appends=$BASELINE_APPENDS"
echo
echo "| target | appends | appends/s | x ext4 | cold cat MB/s | x ext4 | cold cat s | segments |"
echo "|---|--:|--:|--:|--:|--:|--:|--:|"
for t in ext4 logfs nocontinue; do
  [ -n "${RESULT[$t]:-}" ] || continue
  read -r a c b s n <<<"${RESULT[$t]}"
  rate=$(echo "$n / $a" | bc -l)
  mbs=$(echo "$b / $c / 1000000" | bc -l)
  label=$t
  [ "$t" = nocontinue ] && label="logfs --nocontinue_wal_segments"
  printf '| %s | %d | %.0f | %.4f | %.1f | %.4f | %.3f | %s |\n' "$label" "$n" "$rate" \
    "$(echo "$rate / $e_rate" | bc -l)" "$mbs" "$(echo "$mbs / $e_mbs" | bc -l)" "$c" "$s"
done

#!/usr/bin/env bash
# bench/compare.sh: the same workloads, in one run, on
#   ext4         a plain directory under the work dir (a local disk file system)
#   passthrough  libfuse's example passthrough_ll over a directory on the same
#                disk, compiled at run time from libfuse3-dev's examples
#   logfs        the embedded 3-replica cluster (`logfs mount --data_dir=...`)
#   gluster      (--with-gluster) GlusterFS replica 3, three bricks on this host
#   logfs-plugin (--targets=...,logfs-plugin; row C only) db_bench on the
#                logfs target's cluster through the RocksDB plugin
#                (build/liblogfs_rocksdb.so, docs/rocksdb.md): no FUSE
#   logfs-ha     (--targets=...,logfs-ha; row M only) logfs with three meta
#                replicas journaling to a three-member etcd, three segds and a
#                mount, all on loopback (bench/meta_ha_cluster.sh)
# and prints one markdown table: the median figure per target and its ratio
# to ext4, with the targets from the issue. Workloads:
#   A  fio sequential append, write + fdatasync per write, new files,
#      512 B and 4 KiB, 1 and 16 jobs: syncs/s
#   B  `logfs bench read`: random reads of 4 KiB and 64 KiB, 1 and 10
#      threads, cold and warm: p50 latency and ops/s
#   C  RocksDB db_bench (--db and --wal_dir on the target): fillseq --sync=1,
#      fillrandom, readrandom warm and after dropping the kernel caches: ops/s;
#      fillseq's p99; and the floor of a synced WAL on a quorum of two
#      replicas on this one disk: fio, 2 jobs appending 4 KiB + fdatasync at
#      once on ext4, syncs/s per job
#   D  fio sequential throughput in a block dir: 1 MiB writes of a 1 GiB
#      file with an fsync at the end, then a cold 1 MiB read of it: MB/s
#   M  `logfs bench meta`: 1 and 16 processes, each in a directory of its
#      own, 1000 empty files each: create, stat, rename, unlink ops/s
# --rows and --targets pick rows and targets. With --baseline_bin=PATH the
# logfs target is measured with two binaries, PATH and LOGFS_BIN, back to
# back in every row (see usage): an A/B of two builds.
# Needs root (mounts, drop_caches) and /dev/fuse. Installs fio, rocksdb-tools
# (and glusterfs-server with --with-gluster) via packaging/install-deps.sh.
# Everything it mounts or starts is unmounted/stopped on exit, also on
# failure or ctrl-C.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CMDLINE=$0
for arg in "$@"; do
  if [[ $arg =~ ^[A-Za-z0-9_./=,:+-]+$ ]]; then CMDLINE+=" $arg"; else CMDLINE+=" $(printf '%q' "$arg")"; fi
done

usage() {
  cat <<EOF
usage: bench/compare.sh [flags]
  --runs=N         runs of every measurement; the table shows medians (default 3)
  --seconds=S      seconds per fio run, per bench-read phase and per readrandom
                   (default 5; fillseq --sync=1 writes 6000*S keys)
  --db_keys=N      keys fillrandom loads for readrandom (default 400000)
  --out=FILE       markdown output (default build/compare.md); with ext4 among
                   the targets also one SVG chart per workload of the ratios
                   to ext4 next to it (FILE-A.svg ... FILE-D.svg, FILE-M.svg:
                   `logfs bench plot-ratios --table=FILE`)
  --only=A,B,C,D,M run a subset of the workloads
  --rows=LIST      run only these rows (comma-separated, any case; a workload
                   letter A, B, C, D or M stands for all its rows):
                     A512x1 A512x16 A4kx1 A4kx16   fio, block size x jobs
                     B4kx1 B4kx10 B64kx1 B64kx10   bench read, read size x
                                                   threads (cold and warm)
                     fillseq fillrandom readwarm readcold   db_bench
                     seqwrite seqread               fio, 1 MiB sequential
                     Mx1 Mx16                       bench meta, processes
                   seqread also runs seqwrite (it reads its file).
                   readwarm and readcold also run fillrandom (it loads their
                   DB). With --only, a row runs if both select it.
  --targets=LIST   the file systems to measure, of ext4, passthrough, logfs,
                   logfs-plugin, logfs-ha, gluster (default
                   ext4,passthrough,logfs; gluster is the same as
                   --with-gluster; logfs-plugin, db_bench through the RocksDB
                   plugin on the logfs target's cluster, runs in row C only
                   and needs logfs and no --baseline_bin; logfs-ha, meta on
                   three replicas and etcd, is measured in row M only). Without
                   ext4 the table has no ratios to ext4 and no target check.
  --baseline_bin=PATH
                   A/B of two builds: measure the logfs target with PATH too,
                   in a column "logfs (baseline)" next to "logfs" (LOGFS_BIN),
                   plus a column logfs/baseline. They alternate per row: in
                   each row of each run the two binaries run back to back,
                   each on a fresh embedded cluster and mount of its own that
                   lives for that row only (never two clusters at once; C's
                   fillrandom, readwarm and readcold share one cluster, the DB
                   they read). The baseline goes first in odd runs, LOGFS_BIN
                   in even runs. B reads with LOGFS_BIN's bench read on both,
                   and M runs its bench meta on both.
                   Without it, one logfs cluster serves the whole run.
  --with-gluster   also GlusterFS replica 3 on three bricks on this host
  --work_dir=DIR   where the targets live (default: a new directory on the
                   repo's disk, /var/tmp or /tmp if not tmpfs, else build/)
  --keep           keep the work dir (data and logs) afterwards
  --quick          tiny sizes, 1 run, 1 second: a smoke test
  -h, --help       this text
env: LOGFS_BIN (default <repo>/build/logfs; built with make if missing)
The check of two builds on the WAL rows, 3 runs each:
  LOGFS_BIN=NEW bench/compare.sh --baseline_bin=OLD --rows=A512x1,A512x16,fillseq
EOF
}

RUNS='' SECS='' DB_KEYS='' OUT='' ONLY=A,B,C,D,M WITH_GLUSTER=0 WORK='' KEEP=0 QUICK=0
ROWS='' TARGET_LIST=ext4,passthrough,logfs BASE_BIN=''
for arg in "$@"; do
  case "$arg" in
    --runs=*) RUNS=${arg#*=} ;;
    --seconds=*) SECS=${arg#*=} ;;
    --db_keys=*) DB_KEYS=${arg#*=} ;;
    --out=*) OUT=${arg#*=} ;;
    --only=*) ONLY=${arg#*=} ;;
    --rows=*) ROWS=${arg#*=} ;;
    --targets=*) TARGET_LIST=${arg#*=} ;;
    --baseline_bin=*|--baseline-bin=*) BASE_BIN=${arg#*=} ;;
    --with-gluster|--with_gluster) WITH_GLUSTER=1 ;;
    --work_dir=*|--work-dir=*) WORK=${arg#*=} ;;
    --keep) KEEP=1 ;;
    --quick) QUICK=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compare.sh: unknown argument '$arg'" >&2; usage >&2; exit 2 ;;
  esac
done
if [ "$QUICK" = 1 ]; then
  : "${RUNS:=1}" "${SECS:=1}" "${DB_KEYS:=20000}"
  B_FILES=2 B_FILE_BYTES=$((4 << 20)) FILLSEQ_PER_SEC=2000 SEQ_BYTES=$((64 << 20)) M_FILES=100
else
  : "${RUNS:=3}" "${SECS:=5}" "${DB_KEYS:=400000}"
  B_FILES=4 B_FILE_BYTES=$((64 << 20)) FILLSEQ_PER_SEC=6000 SEQ_BYTES=$((1 << 30)) M_FILES=1000
fi
: "${OUT:=$REPO/build/compare.md}"
for v in runs:RUNS seconds:SECS db_keys:DB_KEYS; do
  name=${v#*:}
  [[ ${!name} =~ ^[1-9][0-9]*$ ]] || { echo "compare.sh: --${v%%:*} must be a positive integer" >&2; exit 2; }
done
DO_A=0 DO_B=0 DO_C=0 DO_D=0 DO_M=0
declare -A ONLY_ON
IFS=, read -ra only_list <<<"$ONLY"
for w in "${only_list[@]}"; do
  case "${w^^}" in
    A|B|C|D|M) ONLY_ON[${w^^}]=1 ;;
    *) echo "compare.sh: --only takes A, B, C, D, M (got '$w')" >&2; exit 2 ;;
  esac
done
# The rows, named as in --rows; ROW_ON[name]=1 for each one that runs.
ALL_ROWS=(A512x1 A512x16 A4kx1 A4kx16 B4kx1 B4kx10 B64kx1 B64kx10 fillseq fillrandom readwarm readcold
          seqwrite seqread Mx1 Mx16)
row_workload() { case "$1" in A*) echo A ;; B*) echo B ;; seq*) echo D ;; M*) echo M ;; *) echo C ;; esac; }
declare -A ROW_ON
IFS=, read -ra rows_list <<<"${ROWS:-A,B,C,D,M}"
for w in "${rows_list[@]}"; do
  found=0
  for r in "${ALL_ROWS[@]}"; do
    if [ "${w,,}" = "${r,,}" ]; then
      ROW_ON[$r]=1 found=1
    elif [[ $w =~ ^[ABCDMabcdm]$ ]] && [ "${w^^}" = "$(row_workload "$r")" ]; then
      ROW_ON[$r]=1 found=1
    fi
  done
  [ "$found" = 1 ] || { echo "compare.sh: --rows: unknown row '$w' (see --help)" >&2; exit 2; }
done
if [ -n "${ROW_ON[readwarm]:-}${ROW_ON[readcold]:-}" ]; then ROW_ON[fillrandom]=1; fi
if [ -n "${ROW_ON[seqread]:-}" ]; then ROW_ON[seqwrite]=1; fi
for r in "${ALL_ROWS[@]}"; do
  if [ -n "${ROW_ON[$r]:-}" ] && [ -z "${ONLY_ON[$(row_workload "$r")]:-}" ]; then unset "ROW_ON[$r]"; fi
done
[ ${#ROW_ON[@]} -gt 0 ] || { echo "compare.sh: --only and --rows select no row" >&2; exit 2; }
row_on() { [ -n "${ROW_ON[$1]:-}" ]; }
for r in "${!ROW_ON[@]}"; do
  case "$(row_workload "$r")" in A) DO_A=1 ;; B) DO_B=1 ;; C) DO_C=1 ;; D) DO_D=1 ;; M) DO_M=1 ;; esac
done
# The targets in table order; with --baseline_bin "baseline" (the logfs
# target on BASE_BIN) comes right before "logfs".
declare -A TARGET_ON
IFS=, read -ra target_list <<<"$TARGET_LIST"
for w in "${target_list[@]}"; do
  case "${w,,}" in
    ext4|passthrough|logfs|logfs-plugin|logfs-ha) TARGET_ON[${w,,}]=1 ;;
    gluster) WITH_GLUSTER=1 ;;
    *) echo "compare.sh: --targets takes ext4, passthrough, logfs, logfs-plugin, logfs-ha, gluster (got '$w')" >&2; exit 2 ;;
  esac
done
if [ -n "$BASE_BIN" ] && [ -n "${TARGET_ON[logfs]:-}" ]; then TARGET_ON[baseline]=1; fi
TARGETS=()
for t in ext4 passthrough baseline logfs logfs-plugin logfs-ha; do
  [ -z "${TARGET_ON[$t]:-}" ] || TARGETS+=("$t")
done
if [ -n "${TARGET_ON[logfs-plugin]:-}" ] && { [ -z "${TARGET_ON[logfs]:-}" ] || [ -n "$BASE_BIN" ]; }; then
  echo "compare.sh: logfs-plugin runs on the logfs target's cluster: it needs logfs in --targets and no --baseline_bin" >&2
  exit 2
fi
[ ${#TARGETS[@]} -gt 0 ] || [ "$WITH_GLUSTER" = 1 ] || { echo "compare.sh: --targets is empty" >&2; exit 2; }
FRESH=0  # 1: each logfs cell gets a fresh cluster of its binary (--baseline_bin)
if [ -n "$BASE_BIN" ]; then
  [ -n "${TARGET_ON[logfs]:-}" ] || { echo "compare.sh: --baseline_bin needs logfs in --targets" >&2; exit 2; }
  if [ ! -f "$BASE_BIN" ] || [ ! -x "$BASE_BIN" ]; then
    echo "compare.sh: --baseline_bin=$BASE_BIN is not an executable file" >&2
    exit 2
  fi
  BASE_BIN=$(realpath "$BASE_BIN")
  FRESH=1
fi

log() { printf '[compare %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (FUSE mounts, drop_caches, package installs)"
[ -e /dev/fuse ] || die "/dev/fuse is missing"

# ---------------------------------------------------------------- packages
groups=(bench)
[ "$WITH_GLUSTER" = 1 ] && groups+=(gluster)
"$REPO/packaging/install-deps.sh" "${groups[@]}" || die "packaging/install-deps.sh ${groups[*]} failed"
for tool in fio db_bench python3 gcc pkg-config fusermount3 setfattr; do
  command -v "$tool" >/dev/null || die "$tool not found after install-deps"
done
if [ -n "${TARGET_ON[logfs-ha]:-}" ]; then
  for tool in etcd etcdctl; do
    command -v "$tool" >/dev/null || die "$tool not found (packaging/install-deps.sh installs etcd-server and etcd-client)"
  done
fi

LOGFS_BIN=${LOGFS_BIN:-$REPO/build/logfs}
if [ ! -x "$LOGFS_BIN" ]; then
  [ "$LOGFS_BIN" = "$REPO/build/logfs" ] || die "LOGFS_BIN=$LOGFS_BIN is not executable"
  log "building $LOGFS_BIN (make -C $REPO)"
  make -C "$REPO" >&2
fi
# logfs-plugin: the RocksDB plugin next to the logfs binary (make builds both).
PLUGIN=${LOGFS_PLUGIN:-$(dirname "$LOGFS_BIN")/liblogfs_rocksdb.so}
if [ -n "${TARGET_ON[logfs-plugin]:-}" ] && [ ! -f "$PLUGIN" ]; then
  die "logfs-plugin: $PLUGIN is missing (make builds it; or set LOGFS_PLUGIN)"
fi

# ---------------------------------------------------------------- work dir
fs_type() {  # the name findmnt gives (ext4), else the statfs magic name
  findmnt -no FSTYPE -T "$1" 2>/dev/null | head -1 || true
}
pick_work_dir() {
  local repo_dev cand t
  repo_dev=$(stat -c %d "$REPO")
  for cand in /var/tmp "${TMPDIR:-/tmp}" /tmp; do
    if [ ! -d "$cand" ] || [ ! -w "$cand" ]; then continue; fi
    t=$(stat -f -c %T "$cand")
    case "$t" in tmpfs|ramfs) continue ;; esac
    [ "$(stat -c %d "$cand")" = "$repo_dev" ] || continue
    mktemp -d "$cand/logfs-compare.XXXXXX"
    return
  done
  mkdir -p "$REPO/build"
  mktemp -d "$REPO/build/compare-work.XXXXXX"
}
OWN_WORK=0
if [ -z "$WORK" ]; then
  WORK=$(pick_work_dir)
  OWN_WORK=1
else
  mkdir -p "$WORK"
  WORK=$(cd "$WORK" && pwd)
  for d in ext4 pt-back pt-mnt logfs-data logfs-mnt logfs-ha gl-bricks gl-mnt; do
    [ ! -e "$WORK/$d" ] || die "--work_dir=$WORK already has $d/ (from an earlier run?); use an empty dir"
  done
fi
LOGS=$WORK/logs
RAW=$WORK/raw.tsv
mkdir -p "$LOGS"
: >"$RAW"
STATFS_TYPE=$(stat -f -c %T "$WORK")
MNT_TYPE=$(fs_type "$WORK")
LOCAL_FS=${MNT_TYPE:-$STATFS_TYPE}
case "$STATFS_TYPE" in tmpfs|ramfs) log "WARNING: work dir $WORK is on $STATFS_TYPE, not a disk" ;; esac

# ---------------------------------------------------------------- cleanup
PT_PID='' PT_MNT='' LOGFS_MNT='' LOGFS_MNT_BIN='' HA_ROOT='' HA_MOUNTED='' GL_MNT='' GL_VOL='' GL_NS='' GLUSTERD_PID='' FAILED=1 CELLS_FAILED=0
pids_mentioning() {  # live pids whose command line contains $1 (a path unique to this run)
  local f pid args
  for f in /proc/[0-9]*/cmdline; do
    pid=${f#/proc/}; pid=${pid%/cmdline}
    if [ "$pid" = $$ ] || [ "$pid" = "$BASHPID" ]; then continue; fi
    mapfile -d '' args 2>/dev/null <"$f" || continue
    [[ " ${args[*]} " == *"$1"* ]] && is_alive "$pid" && echo "$pid"
  done
  return 0
}
is_alive() { [ -e "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }
is_mounted() { grep -qF " $1 " /proc/mounts; }
unmount_fuse() {
  local m=$1 _
  is_mounted "$m" || return 0
  for _ in 1 2 3 4 5; do
    fusermount3 -u "$m" 2>/dev/null || umount "$m" 2>/dev/null || true
    is_mounted "$m" || return 0
    sleep 1
  done
  log "lazy unmount of $m"
  fusermount3 -uz "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
}
stop_pids() {  # TERM, wait up to 10 s, KILL
  local p _ alive
  [ $# -gt 0 ] || return 0
  kill "$@" 2>/dev/null || true
  for _ in $(seq 1 20); do
    alive=0
    for p in "$@"; do
      if is_alive "$p"; then alive=1; fi
    done
    [ $alive = 1 ] || return 0
    sleep 0.5
  done
  kill -9 "$@" 2>/dev/null || true
}
# Unmounts logfs (if mounted), stops the mount daemon, meta and segds of
# this run's data dir (if still up) and copies their logs to $1.
stop_logfs() {
  if [ -n "$LOGFS_MNT" ] && is_mounted "$LOGFS_MNT"; then
    timeout 60 "$LOGFS_MNT_BIN" umount "$LOGFS_MNT" >>"$LOGS/logfs-umount.log" 2>&1 || unmount_fuse "$LOGFS_MNT"
  fi
  if [ -n "$LOGFS_MNT" ]; then
    # shellcheck disable=SC2046
    stop_pids $(pids_mentioning "$WORK/logfs-data")
  fi
  if [ -d "$WORK/logfs-data" ]; then
    mkdir -p "$1"
    find "$WORK/logfs-data" -maxdepth 2 -name '*.log' -type f -exec cp {} "$1/" \; 2>/dev/null || true
  fi
}
# Unmounts logfs-ha and stops its etcd, meta replicas, segds and mount
# daemon (every process whose command line names its root); keeps their
# logs in $LOGS/logfs-ha.
stop_logfs_ha() {
  [ -n "$HA_ROOT" ] || return 0
  if [ -n "$HA_MOUNTED" ]; then unmount_fuse "$HA_MOUNTED"; fi
  # shellcheck disable=SC2046
  stop_pids $(pids_mentioning "$HA_ROOT/")
  mkdir -p "$LOGS/logfs-ha"
  cp "$HA_ROOT"/*.log "$LOGS/logfs-ha/" 2>/dev/null || true
}
cleanup() {
  local rc=$?
  set +e
  trap - EXIT INT TERM
  [ $rc -eq 0 ] || log "exiting with status $rc; cleaning up"
  if [ -n "$GL_MNT" ]; then unmount_fuse "$GL_MNT"; fi
  if [ -n "$GL_VOL" ]; then
    in_gl_ns gluster --mode=script volume stop "$GL_VOL" force >>"$LOGS/gluster.log" 2>&1
    in_gl_ns gluster --mode=script volume delete "$GL_VOL" >>"$LOGS/gluster.log" 2>&1
    rm -rf "/var/run/gluster/vols/$GL_VOL" "/var/run/gluster/shd/$GL_VOL"
    # bricks and the self-heal daemon of this volume, should any linger
    # shellcheck disable=SC2046
    stop_pids $(pids_mentioning "$WORK/gl-bricks/") $(pids_mentioning "shd/$GL_VOL ")
  fi
  if [ -n "$GLUSTERD_PID" ]; then stop_pids "$GLUSTERD_PID"; fi
  if [ -n "$GL_NS" ]; then ip netns del "$GL_NS" 2>/dev/null; fi
  stop_logfs "$LOGS/logfs"
  stop_logfs_ha
  if [ -n "$PT_MNT" ]; then unmount_fuse "$PT_MNT"; fi
  if [ -n "$PT_PID" ]; then stop_pids "$PT_PID"; fi
  if [ "$KEEP" = 1 ]; then
    log "kept the work dir $WORK"
  elif [ $rc -ne 0 ] || [ "$FAILED" = 1 ] || [ "$CELLS_FAILED" != 0 ]; then
    # keep the logs for a post-mortem, drop the data
    rm -rf "$WORK"/{ext4,pt-back,pt-mnt,logfs-data,logfs-mnt,logfs-ha,gl-bricks,gl-mnt} 2>/dev/null
    log "logs kept in $LOGS"
  elif [ "$OWN_WORK" = 1 ]; then
    rm -rf "$WORK"
  else
    rm -rf "$WORK"/{ext4,pt-back,pt-mnt,logfs-data,logfs-mnt,logfs-ha,gl-bricks,gl-mnt,passthrough,logs,raw.tsv}
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "work dir $WORK ($LOCAL_FS), logs in $LOGS"

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
wait_mounted() {  # $1 mountpoint, $2 pid that must stay alive (optional)
  local _
  for _ in $(seq 1 100); do
    is_mounted "$1" && return 0
    if [ -n "${2:-}" ] && ! kill -0 "$2" 2>/dev/null; then return 1; fi
    sleep 0.1
  done
  return 1
}

# ---------------------------------------------------------------- targets
declare -A WAL_ROOT BLOCK_ROOT

mkdir -p "$WORK/ext4"
WAL_ROOT[ext4]=$WORK/ext4
BLOCK_ROOT[ext4]=$WORK/ext4

# passthrough: libfuse's example, with its defaults (-o cache=auto, which
# sets entry/attr timeout=1.0 s; no writeback cache; multi-threaded,
# max_threads=10), compiled from the installed libfuse3-dev and run in the
# foreground so that its pid is ours to stop.
setup_passthrough() {
  local ex=/usr/share/doc/libfuse3-dev/examples f src=$WORK/passthrough
  mkdir -p "$src" "$WORK/pt-back" "$WORK/pt-mnt"
  for f in passthrough_ll.c passthrough_helpers.h; do
    if [ -f "$ex/$f" ]; then cp "$ex/$f" "$src/"
    elif [ -f "$ex/$f.gz" ]; then zcat "$ex/$f.gz" >"$src/$f"
    else die "$ex/$f not found (libfuse3-dev)"; fi
  done
  # shellcheck disable=SC2046
  gcc -Wall -O2 -o "$src/passthrough_ll" "$src/passthrough_ll.c" $(pkg-config --cflags --libs fuse3) \
    >"$LOGS/passthrough-build.log" 2>&1 || die "compiling passthrough_ll failed: $LOGS/passthrough-build.log"
  "$src/passthrough_ll" -f -o source="$WORK/pt-back" "$WORK/pt-mnt" >"$LOGS/passthrough.log" 2>&1 &
  PT_PID=$!
  PT_MNT=$WORK/pt-mnt
  wait_mounted "$PT_MNT" "$PT_PID" || die "passthrough_ll did not mount: $LOGS/passthrough.log"
  WAL_ROOT[passthrough]=$PT_MNT
  BLOCK_ROOT[passthrough]=$PT_MNT
}

# Mounts a new embedded cluster of binary $1 at $WORK/logfs-mnt with a `wal`
# and a `block` directory; returns 1 with the reason in MOUNT_WHY if it failed.
MOUNT_WHY=''
mount_logfs() {
  mkdir -p "$WORK/logfs-data" "$WORK/logfs-mnt"
  LOGFS_MNT=$WORK/logfs-mnt LOGFS_MNT_BIN=$1
  if ! "$1" mount --data_dir="$WORK/logfs-data" "$LOGFS_MNT" >>"$LOGS/logfs-mount.log" 2>&1; then
    MOUNT_WHY="logfs mount failed: $LOGS/logfs-mount.log and $WORK/logfs-data/mount.log"
    return 1
  fi
  wait_mounted "$LOGFS_MNT" || { MOUNT_WHY="logfs is not mounted at $LOGFS_MNT"; return 1; }
  if ! { mkdir "$LOGFS_MNT/wal" "$LOGFS_MNT/block" &&
    setfattr -n user.logfs.kind -v wal "$LOGFS_MNT/wal" &&
    setfattr -n user.logfs.kind -v block "$LOGFS_MNT/block"; }; then
    MOUNT_WHY="making the wal and block dirs in $LOGFS_MNT failed"
    return 1
  fi
}
setup_logfs() {
  mount_logfs "$LOGFS_BIN" || die "$MOUNT_WHY"
  WAL_ROOT[logfs]=$LOGFS_MNT/wal
  BLOCK_ROOT[logfs]=$LOGFS_MNT/block
}

# logfs-ha: meta as three replicas journaling to a three-member etcd, three
# segment servers and a mount of LOGFS_BIN, all on loopback under
# $WORK/logfs-ha, set up as bench/meta_ha_cost.sh does (the functions of
# bench/meta_ha_cluster.sh), with a `wal` and a `block` directory like the
# logfs target's. It lives for the whole run; only row M measures it.
setup_logfs_ha() {
  # shellcheck source=bench/meta_ha_cluster.sh
  . "$REPO/bench/meta_ha_cluster.sh"
  HA_ROOT=$WORK/logfs-ha
  mkdir -p "$HA_ROOT"
  ha_start_etcd "$HA_ROOT" >>"$LOGS/logfs-ha-setup.log" 2>&1 ||
    die "logfs-ha: etcd did not come up: $LOGS/logfs-ha-setup.log"
  ha_start_cluster "$LOGFS_BIN" "$HA_ROOT" ha 3 >>"$LOGS/logfs-ha-setup.log" 2>&1 ||
    die "logfs-ha: the cluster or its mount did not come up: $LOGS/logfs-ha-setup.log"
  HA_MOUNTED=$HA_MNT
  wait_mounted "$HA_MOUNTED" || die "logfs-ha is not mounted at $HA_MOUNTED"
  if ! { mkdir "$HA_MOUNTED/wal" "$HA_MOUNTED/block" &&
    setfattr -n user.logfs.kind -v wal "$HA_MOUNTED/wal" &&
    setfattr -n user.logfs.kind -v block "$HA_MOUNTED/block"; }; then
    die "making the wal and block dirs in $HA_MOUNTED failed"
  fi
  WAL_ROOT[logfs-ha]=$HA_MOUNTED/wal
  BLOCK_ROOT[logfs-ha]=$HA_MOUNTED/block
}

# With --baseline_bin the two logfs targets take turns on one mount point:
# each cell mounts a fresh cluster of its binary, and drops it afterwards.
declare -A BIN_OF=([logfs]=$LOGFS_BIN [baseline]=$BASE_BIN)
CLUSTER_DOWN=0  # 1: this cell's fresh cluster did not come up
for t in baseline logfs; do
  WAL_ROOT[$t]=$WORK/logfs-mnt/wal
  BLOCK_ROOT[$t]=$WORK/logfs-mnt/block
done

# GlusterFS refuses bricks on loopback addresses, and this script sends
# traffic to no address of the machine's own: glusterd, its bricks and the
# client run in a network namespace of this run's (GL_NS), on an address
# of a veth pair inside it. `nsenter --net` keeps the FUSE mount visible.
GL_ADDR=10.254.77.1
in_gl_ns() { nsenter --net="/run/netns/$GL_NS" "$@"; }
setup_gluster() {
  local pid
  for pid in $(pgrep -x glusterd || true); do
    is_alive "$pid" && die "gluster: stop the running glusterd (pid $pid) first; this script runs its own in a network namespace"
  done
  GL_NS=logfscmp$$
  ip netns add "$GL_NS" || { GL_NS=; die "gluster: cannot create network namespace"; }
  in_gl_ns ip link set lo up
  in_gl_ns ip link add glcmp0 type veth peer name glcmp1
  in_gl_ns ip addr add "$GL_ADDR/24" dev glcmp0
  in_gl_ns ip link set glcmp0 up
  in_gl_ns ip link set glcmp1 up
  in_gl_ns glusterd -p "$WORK/glusterd.pid" -l "$LOGS/glusterd.log" ||
    die "glusterd failed to start: $LOGS/glusterd.log"
  for _ in $(seq 1 50); do [ -s "$WORK/glusterd.pid" ] && break; sleep 0.1; done
  GLUSTERD_PID=$(cat "$WORK/glusterd.pid")
  for _ in $(seq 1 50); do in_gl_ns gluster --mode=script pool list >/dev/null 2>&1 && break; sleep 0.2; done
  GL_VOL=logfscmp$$
  mkdir -p "$WORK/gl-bricks"/{1,2,3} "$WORK/gl-mnt"
  in_gl_ns gluster --mode=script volume create "$GL_VOL" replica 3 \
    "$GL_ADDR:$WORK/gl-bricks/1" "$GL_ADDR:$WORK/gl-bricks/2" "$GL_ADDR:$WORK/gl-bricks/3" force \
    >>"$LOGS/gluster.log" 2>&1 || { GL_VOL=; die "gluster volume create failed: $LOGS/gluster.log"; }
  in_gl_ns gluster --mode=script volume start "$GL_VOL" >>"$LOGS/gluster.log" 2>&1 ||
    die "gluster volume start failed: $LOGS/gluster.log"
  GL_MNT=$WORK/gl-mnt
  in_gl_ns mount -t glusterfs "$GL_ADDR:/$GL_VOL" "$GL_MNT" >>"$LOGS/gluster.log" 2>&1 ||
    die "mount -t glusterfs $GL_ADDR:/$GL_VOL failed: $LOGS/gluster.log"
  wait_mounted "$GL_MNT" || die "gluster volume not mounted at $GL_MNT"
  GL_HOST=$GL_ADDR
  WAL_ROOT[gluster]=$GL_MNT
  BLOCK_ROOT[gluster]=$GL_MNT
}

if [ -n "${TARGET_ON[passthrough]:-}" ]; then
  log "setting up passthrough_ll"
  setup_passthrough
fi
if [ "$FRESH" = 1 ]; then
  log "logfs (baseline) is $BASE_BIN, logfs is $LOGFS_BIN: a fresh cluster for each cell"
elif [ -n "${TARGET_ON[logfs]:-}" ]; then
  log "mounting logfs ($LOGFS_BIN)"
  setup_logfs
fi
# logfs-plugin: db_bench with the plugin preloaded, its files under /plugin
# of the logfs target's cluster (so its mount can make and remove them).
if [ -n "${TARGET_ON[logfs-plugin]:-}" ]; then
  PLUGIN_META=$(getfattr --only-values -n user.logfs.meta_address "$LOGFS_MNT") ||
    die "logfs-plugin: cannot read user.logfs.meta_address of $LOGFS_MNT"
  PLUGIN_SECRET=$(getfattr --only-values -n user.logfs.cluster_secret_file "$LOGFS_MNT" 2>/dev/null || true)
  PLUGIN_URI="id=logfs://$PLUGIN_META"
  [ -z "$PLUGIN_SECRET" ] || PLUGIN_URI+=";cluster_secret_file=$PLUGIN_SECRET"
  mkdir -p "$LOGFS_MNT/plugin" || die "logfs-plugin: mkdir $LOGFS_MNT/plugin failed"
  WAL_ROOT[logfs-plugin]=$LOGFS_MNT/plugin
  BLOCK_ROOT[logfs-plugin]=$LOGFS_MNT/plugin
  log "logfs-plugin: $PLUGIN with --fs_uri='$PLUGIN_URI'"
fi
if [ -n "${TARGET_ON[logfs-ha]:-}" ]; then
  log "starting logfs-ha: etcd x3, meta x3, segd x3 and a mount ($LOGFS_BIN)"
  setup_logfs_ha
fi
GL_HOST=
if [ "$WITH_GLUSTER" = 1 ]; then
  log "setting up GlusterFS replica 3"
  setup_gluster
  TARGETS+=(gluster)
fi

cell_failed() {  # message log-file target
  CELLS_FAILED=$((CELLS_FAILED + 1))
  log "$1"
  tail -n 3 "$2" 2>/dev/null | sed 's/^/    | /' >&2 || true
  if is_logfs "$3" && [ -f "$WORK/logfs-data/mount.log" ]; then
    grep -E '^[EW]' "$WORK/logfs-data/mount.log" | tail -n 3 | sed 's/^/    | mount.log: /' >&2 || true
  fi
}
is_logfs() { [ "$1" = logfs ] || [ "$1" = baseline ]; }
record() {  # id target run value
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$RAW"
}
TIMEOUT=$((SECS * 40 + 600))

# measure target run cell command...: runs the command (which measures one
# cell of target) and, with --baseline_bin, gives a logfs target a fresh
# cluster of its binary for it. If that cluster does not come up, the command
# records its figures as failed (cluster_down) and the run goes on.
measure() {
  local t=$1 run=$2 cell=$3
  shift 3
  if [ "$t" = logfs-ha ] && [[ $cell != M* ]]; then return 0; fi  # row M only
  if [ "$t" = logfs-plugin ] && [[ $cell != C* ]]; then return 0; fi  # row C only
  if [ "$FRESH" != 1 ] || ! is_logfs "$t"; then
    "$@"
    return 0
  fi
  CLUSTER_DOWN=0
  if ! mount_logfs "${BIN_OF[$t]}"; then
    CLUSTER_DOWN=1
    cell_failed "run $run $cell $t: $MOUNT_WHY" "$LOGS/logfs-mount.log" "$t"
  fi
  sync  # the new cluster's files reach the disk before the cell, not during it
  "$@"
  stop_logfs "$LOGS/logfs/r$run.$cell.$t"
  is_mounted "$LOGFS_MNT" && die "$LOGFS_MNT is still mounted after the $cell cell of $t"
  rm -rf "$WORK/logfs-data"
  sync
  CLUSTER_DOWN=0
}
# cluster_down target run id...: true, after recording the ids as failed, if
# this cell's fresh cluster did not come up.
cluster_down() {
  local t=$1 run=$2 i
  shift 2
  [ "$CLUSTER_DOWN" = 1 ] || return 1
  for i in "$@"; do record "$i" "$t" "$run" nan; done
}

# ---------------------------------------------------------------- A: fio
# Sequential write to a new file per job, write + fdatasync each block.
# fio's defaults for a write job (overwrite=0, file_append=0) unlink an old
# file and create the new one with O_CREAT and no O_TRUNC, and with
# --fallocate=none it neither preallocates nor truncates nor lays the file
# out; --size is far more than the run can write, so the offset never wraps
# and every write lands at the end of the file (logfs WAL files are
# append-only).
run_fio() {  # target bs jobs run
  local t=$1 bs=$2 jobs=$3 run=$4 bytes dir id json iops
  case "$bs" in 512) bytes=512 ;; 4k) bytes=4096 ;; esac
  id=A.$bs.$jobs
  dir=${WAL_ROOT[$t]}/A-$bs-$jobs-r$run
  json=$LOGS/$id.$t.r$run.json
  if cluster_down "$t" "$run" "$id"; then return 0; fi
  mkdir -p "$dir"
  if timeout --foreground -k 10 "$TIMEOUT" fio --name=append --directory="$dir" --rw=write --bs="$bs" \
      --ioengine=sync --fdatasync=1 --fallocate=none --overwrite=0 \
      --size=$((bytes * 200000 * SECS)) --time_based --runtime="$SECS" \
      --numjobs="$jobs" --group_reporting --output-format=json --output="$json" \
      >"$LOGS/$id.$t.r$run.log" 2>&1 &&
    iops=$(python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
if j["error"]: sys.exit("fio error %d" % j["error"])
print("%.1f" % j["write"]["iops"])' "$json" 2>>"$LOGS/$id.$t.r$run.log"); then
    record "$id" "$t" "$run" "$iops"
    log "run $run A $bs x$jobs $t: $iops syncs/s"
  else
    record "$id" "$t" "$run" nan
    cell_failed "run $run A $bs x$jobs $t: FAILED (see $LOGS/$id.$t.r$run.log)" "$LOGS/$id.$t.r$run.log" "$t"
  fi
  rm -rf "$dir"
  sync
}

# ---------------------------------------------------------------- B: bench read
# `logfs bench read` prints per phase (cold, warm):
#   <phase> read (ns): count=N min=N mean=N ... p50=N ... max=N
#   (or "<phase> read latency (ns): ...")
#   <phase>: ops=N seconds=S ops/s=X bytes/s=Y block cache hit ratio=R
B_SUPPORTED=0
probe_bench_read() {
  local d=$WORK/ext4/B-probe
  mkdir -p "$d"
  if timeout --foreground -k 5 60 "$LOGFS_BIN" bench read --dir="$d" --files=1 --file_bytes=65536 --read_bytes=4096 \
      --threads=1 --seconds=1 --cache=warm >"$LOGS/bench-read-probe.log" 2>&1 &&
    grep -qE '^warm: ops=' "$LOGS/bench-read-probe.log"; then
    B_SUPPORTED=1
  else
    log "WARNING: '$(basename "$LOGFS_BIN") bench read' is not available or failed; B cells are n/a" \
      "($(head -c 300 "$LOGS/bench-read-probe.log" | tr '\n' ' '))"
  fi
  rm -rf "$d"
}
run_bench_read() {  # target read_bytes threads run
  local t=$1 rb=$2 thr=$3 run=$4 id out phase p50 ops
  id=B.$rb.$thr
  out=$LOGS/$id.$t.r$run.log
  if [ "$B_SUPPORTED" != 1 ]; then
    return 0
  fi
  if cluster_down "$t" "$run" "$id".{cold,warm}.{p50,ops}; then return 0; fi
  mkdir -p "${BLOCK_ROOT[$t]}/B-files"
  if ! timeout --foreground -k 10 "$TIMEOUT" "$LOGFS_BIN" bench read --dir="${BLOCK_ROOT[$t]}/B-files" --files="$B_FILES" \
      --file_bytes="$B_FILE_BYTES" --read_bytes="$rb" --threads="$thr" --seconds="$SECS" \
      --cache=both --keep >"$out" 2>&1; then
    cell_failed "run $run B $rb x$thr $t: FAILED (see $out)" "$out" "$t"
  fi
  for phase in cold warm; do
    p50=$(sed -nE "s/^$phase read( latency)? \\(ns\\):.* p50=([0-9.]+).*/\\2/p" "$out" | tail -1)
    ops=$(sed -nE "s/^$phase: ops=[0-9]+ .*ops\\/s=([0-9.eE+-]+).*/\\1/p" "$out" | tail -1)
    record "$id.$phase.p50" "$t" "$run" "$(awk -v v="${p50:-nan}" 'BEGIN{ if (v == "nan") print "nan"; else printf "%.1f", v / 1000 }')"
    record "$id.$phase.ops" "$t" "$run" "${ops:-nan}"
    log "run $run B $rb x$thr $phase $t: p50 ${p50:-?} ns, ${ops:-?} ops/s"
  done
}

# ---------------------------------------------------------------- C: db_bench
DB_COMMON=(--compression_type=none --threads=1 --statistics=0)
declare -A FILL_FAILED
db_bench_ops() {  # log benchmark-name -> ops/s from "name : X micros/op N ops/sec"
  sed -nE "s/^$2 +: +[0-9.]+ micros\\/op ([0-9.]+) ops\\/sec.*/\\1/p" "$1" | tail -1
}
run_db_step() {  # target run step
  local t=$1 run=$2 step=$3 db wal out bench ops rc=0
  if cluster_down "$t" "$run" "C.$step"; then
    if [ "$step" = fillrandom ]; then FILL_FAILED[$t]=1; fi
    return 0
  fi
  db=${BLOCK_ROOT[$t]}/C-r$run-db
  wal=${WAL_ROOT[$t]}/C-r$run-wal
  case "$step" in
    fillseq)
      db=$db-seq wal=$wal-seq
      mkdir -p "$db" "$wal"
      bench=fillseq
      set -- --benchmarks=fillseq --sync=1 --num=$((FILLSEQ_PER_SEC * SECS)) --histogram=1 ;;
    fillrandom)
      mkdir -p "$db" "$wal"
      bench=fillrandom
      set -- --benchmarks=fillrandom --num="$DB_KEYS" ;;
    warm)
      # readseq first pulls the whole DB through the caches
      bench=readrandom
      set -- --benchmarks=readseq,readrandom --use_existing_db=1 --num="$DB_KEYS" --duration="$SECS" ;;
    cold)
      drop_caches
      bench=readrandom
      set -- --benchmarks=readrandom --use_existing_db=1 --num="$DB_KEYS" --duration="$SECS" ;;
  esac
  out=$LOGS/C.$step.$t.r$run.log
  if [ "$step" = warm ] || [ "$step" = cold ]; then
    if [ "${FILL_FAILED[$t]:-0}" = 1 ]; then
      # readrandom on what a failed fillrandom left would not compare
      log "run $run C $step $t: skipped (fillrandom failed in this run)"
      record "C.$step" "$t" "$run" nan
      return 0
    fi
  fi
  if [ "$t" = logfs-plugin ]; then
    # The same directories, named as the plugin sees them (its root is the
    # cluster's).
    timeout --foreground -k 10 "$TIMEOUT" env LD_PRELOAD="$PLUGIN" db_bench --fs_uri="$PLUGIN_URI" \
      --db="${db#"$LOGFS_MNT"}" --wal_dir="${wal#"$LOGFS_MNT"}" "${DB_COMMON[@]}" "$@" >"$out" 2>&1 || rc=$?
  else
    timeout --foreground -k 10 "$TIMEOUT" db_bench --db="$db" --wal_dir="$wal" "${DB_COMMON[@]}" "$@" >"$out" 2>&1 || rc=$?
  fi
  ops=$(db_bench_ops "$out" "$bench")
  if [ "$step" = fillseq ]; then
    # --histogram=1: "Percentiles: P50: 77.20 P75: 98.30 P99: 150.10 ..." (us)
    record "C.fillseq.p99" "$t" "$run" "$(sed -nE 's/^Percentiles: .* P99: ([0-9.]+) .*/\1/p' "$out" | tail -1 | grep . || echo nan)"
  fi
  if [ $rc -ne 0 ] || [ -z "$ops" ]; then
    cell_failed "run $run C $step $t: FAILED (exit $rc, see $out)" "$out" "$t"
    ops=nan
    if [ "$step" = fillrandom ]; then FILL_FAILED[$t]=1; fi
  else
    log "run $run C $step $t: $ops ops/s"
  fi
  record "C.$step" "$t" "$run" "$ops"
  if [ "$step" = fillseq ]; then rm -rf "$db" "$wal"; fi
}

# ---------------------------------------------------------------- D: fio sequential
# One job writes a new file of SEQ_BYTES in 1 MiB writes and fsyncs it at
# the end (a block file on logfs: its three replicas are written on this
# one disk), then, after the kernel caches and the mount's block cache are
# dropped, reads it back in 1 MiB reads. MB/s = bytes / wall time of the
# fio command, the final fsync included.
wall_mbps() {  # bytes start_ns end_ns
  awk -v b="$1" -v s="$2" -v e="$3" 'BEGIN { printf "%.1f", b / ((e - s) / 1e9) / 1e6 }'
}
run_seq() {  # target run
  local t=$1 run=$2 dir file out start end mbps step rw
  dir=${BLOCK_ROOT[$t]}/D-r$run
  file=$dir/seq.dat
  if cluster_down "$t" "$run" D.write D.read; then return 0; fi
  mkdir -p "$dir"
  for step in write read; do
    row_on "seq$step" || continue
    out=$LOGS/D.$step.$t.r$run.log
    rw=$step
    if [ "$step" = read ]; then
      drop_caches
      if is_logfs "$t"; then setfattr -n user.logfs.drop_block_cache -v 1 "$LOGFS_MNT" 2>>"$out" || true; fi
    fi
    start=$(date +%s%N)
    if timeout --foreground -k 10 "$TIMEOUT" fio --name="seq$step" --filename="$file" --rw="$rw" --bs=1M \
        --size="$SEQ_BYTES" --ioengine=sync --end_fsync=$([ "$step" = write ] && echo 1 || echo 0) \
        --fallocate=none --numjobs=1 >"$out" 2>&1; then
      end=$(date +%s%N)
      mbps=$(wall_mbps "$SEQ_BYTES" "$start" "$end")
      record "D.$step" "$t" "$run" "$mbps"
      log "run $run D seq$step $t: $mbps MB/s"
    else
      record "D.$step" "$t" "$run" nan
      cell_failed "run $run D seq$step $t: FAILED (see $out)" "$out" "$t"
      [ "$step" = write ] && { row_on seqread && record D.read "$t" "$run" nan; break; }
    fi
  done
  rm -rf "$dir"
  sync
}

# ---------------------------------------------------------------- M: bench meta
# `logfs bench meta` prints one line per phase:
#   phase=create ops=N seconds=S ops_per_s=X p50_ns=N p99_ns=N
# (create, stat, readdir, rename, unlink; the row takes all but readdir).
# Each cell works in a new directory of its own under the block dir, which
# the bench removes.
M_SUPPORTED=0
M_PHASES=(create stat rename unlink)
probe_bench_meta() {
  if timeout --foreground -k 5 60 "$LOGFS_BIN" bench meta --dir="$WORK/ext4" --files=2 \
      >"$LOGS/bench-meta-probe.log" 2>&1 &&
    grep -qE '^phase=unlink ops=2 ' "$LOGS/bench-meta-probe.log"; then
    M_SUPPORTED=1
  else
    log "WARNING: '$(basename "$LOGFS_BIN") bench meta' is not available or failed; M cells are n/a" \
      "($(head -c 300 "$LOGS/bench-meta-probe.log" | tr '\n' ' '))"
  fi
}
run_bench_meta() {  # target processes run
  local t=$1 procs=$2 run=$3 id out phase ops figures=''
  id=M.$procs
  out=$LOGS/$id.$t.r$run.log
  if cluster_down "$t" "$run" "${M_PHASES[@]/#/$id.}"; then return 0; fi
  if ! timeout --foreground -k 10 "$TIMEOUT" "$LOGFS_BIN" bench meta --dir="${BLOCK_ROOT[$t]}" --processes \
      --threads="$procs" --files="$M_FILES" >"$out" 2>&1; then
    cell_failed "run $run M x$procs $t: FAILED (see $out)" "$out" "$t"
  fi
  for phase in "${M_PHASES[@]}"; do
    ops=$(sed -nE "s/^phase=$phase ops=[0-9]+ .*ops_per_s=([0-9.]+) .*/\1/p" "$out" | tail -1)
    record "$id.$phase" "$t" "$run" "${ops:-nan}"
    figures+=" $phase ${ops:-?}"
  done
  log "run $run M x$procs $t (ops/s):$figures"
  sync
}

# ---------------------------------------------------------------- runs
# The targets take turns on each row. With --baseline_bin the two logfs
# targets swap places in even runs, so that neither always goes first.
run_order() {  # run -> ORDER, the targets in the order they take turns
  local i
  ORDER=("${TARGETS[@]}")
  if [ "$FRESH" = 1 ] && [ $(($1 % 2)) = 0 ]; then
    for i in "${!ORDER[@]}"; do
      case "${ORDER[i]}" in logfs) ORDER[i]=baseline ;; baseline) ORDER[i]=logfs ;; esac
    done
  fi
}
# The floor of a synced WAL on a quorum of two replicas on this machine's
# one disk: two jobs appending 4 KiB + fdatasync at once on ext4; syncs/s
# per job.
run_floor() {  # run
  local run=$1 dir=$WORK/ext4/C-floor-r$1 json=$LOGS/C.floor.r$1.json iops
  mkdir -p "$dir"
  if timeout --foreground -k 10 "$TIMEOUT" fio --name=floor --directory="$dir" --rw=write --bs=4k \
      --ioengine=sync --fdatasync=1 --fallocate=none --overwrite=0 --size=$((4096 * 200000 * SECS)) \
      --time_based --runtime="$SECS" --numjobs=2 --group_reporting --output-format=json --output="$json" \
      >"$LOGS/C.floor.r$run.log" 2>&1 &&
    iops=$(python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
if j["error"]: sys.exit("fio error %d" % j["error"])
print("%.1f" % (j["write"]["iops"] / 2))' "$json" 2>>"$LOGS/C.floor.r$run.log"); then
    record C.floor ext4 "$run" "$iops"
    log "run $run C floor: $iops syncs/s per job, 2 jobs at once on ext4"
  else
    record C.floor ext4 "$run" nan
    cell_failed "run $run C floor: FAILED (see $LOGS/C.floor.r$run.log)" "$LOGS/C.floor.r$run.log" ext4
  fi
  rm -rf "$dir"
  sync
}
run_db_steps() {  # target run step...: C's steps in order, on one cluster
  local t=$1 run=$2 step
  shift 2
  for step in "$@"; do run_db_step "$t" "$run" "$step"; done
}
START=$(date +%s)
[ "$DO_B" = 1 ] && probe_bench_read
[ "$DO_M" = 1 ] && probe_bench_meta
for run in $(seq 1 "$RUNS"); do
  run_order "$run"
  log "=== run $run of $RUNS (targets: ${ORDER[*]})"
  for bs in 512 4k; do
    for jobs in 1 16; do
      row_on "A${bs}x$jobs" || continue
      for t in "${ORDER[@]}"; do measure "$t" "$run" "A${bs}x$jobs" run_fio "$t" "$bs" "$jobs" "$run"; done
    done
  done
  if [ "$B_SUPPORTED" = 1 ]; then
    for rb in 4096 65536; do
      for thr in 1 10; do
        row_on "B$((rb / 1024))kx$thr" || continue
        for t in "${ORDER[@]}"; do
          measure "$t" "$run" "B$((rb / 1024))kx$thr" run_bench_read "$t" "$rb" "$thr" "$run"
        done
      done
    done
  fi
  if [ "$DO_C" = 1 ]; then
    FILL_FAILED=()
    # A unit is the steps one cluster serves: the readrandoms read the DB
    # that fillrandom loaded. On a cluster that stays up, every step is a
    # unit of its own, and the targets take turns on each step.
    steps=()
    row_on fillseq && steps+=(fillseq)
    row_on fillrandom && steps+=(fillrandom)
    row_on readwarm && steps+=(warm)
    row_on readcold && steps+=(cold)
    units=("${steps[@]}")
    if [ "$FRESH" = 1 ]; then
      units=() chain=()
      for step in "${steps[@]}"; do
        if [ "$step" = fillseq ]; then units+=(fillseq); else chain+=("$step"); fi
      done
      [ ${#chain[@]} = 0 ] || units+=("${chain[*]}")
    fi
    if row_on fillseq && [ -n "${TARGET_ON[ext4]:-}" ]; then run_floor "$run"; fi
    for unit in "${units[@]}"; do
      read -ra unit_steps <<<"$unit"
      for t in "${ORDER[@]}"; do
        measure "$t" "$run" "C.${unit_steps[0]}" run_db_steps "$t" "$run" "${unit_steps[@]}"
      done
    done
    for t in "${TARGETS[@]}"; do rm -rf "${BLOCK_ROOT[$t]}/C-r$run-db" "${WAL_ROOT[$t]}/C-r$run-wal"; done
  fi
  if [ "$DO_D" = 1 ]; then
    for t in "${ORDER[@]}"; do measure "$t" "$run" "D" run_seq "$t" "$run"; done
  fi
  if [ "$M_SUPPORTED" = 1 ]; then
    for procs in 1 16; do
      row_on "Mx$procs" || continue
      for t in "${ORDER[@]}"; do measure "$t" "$run" "Mx$procs" run_bench_meta "$t" "$procs" "$run"; done
    done
  fi
done
ELAPSED=$(($(date +%s) - START))

# ---------------------------------------------------------------- table
mem_gib=$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
git_rev=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?')
git -C "$REPO" diff --quiet HEAD 2>/dev/null || git_rev="$git_rev (+ uncommitted changes)"
versions="fio $(fio --version 2>/dev/null); db_bench $(db_bench --version 2>/dev/null | awk '{print $3}'); fuse3 $(pkg-config --modversion fuse3)"
[ "$WITH_GLUSTER" = 1 ] && versions+="; $(gluster --version 2>/dev/null | sed -n 1p || true)"
export CMP_RAW=$RAW CMP_TARGETS="${TARGETS[*]}" CMP_LOCAL="$LOCAL_FS" CMP_STATFS="$STATFS_TYPE" \
  CMP_WORK="$WORK" CMP_CMDLINE="$CMDLINE" CMP_RUNS="$RUNS" CMP_SECS="$SECS" CMP_MEM="$mem_gib" \
  CMP_DO="$DO_A$DO_B$DO_C$DO_D$DO_M" CMP_B_SUPPORTED="$B_SUPPORTED" CMP_M_SUPPORTED="$M_SUPPORTED" CMP_M_FILES="$M_FILES" CMP_LOGFS_BIN="$LOGFS_BIN" CMP_GIT="$git_rev" \
  CMP_ELAPSED="$ELAPSED" CMP_DB_KEYS="$DB_KEYS" CMP_FILLSEQ=$((FILLSEQ_PER_SEC * SECS)) \
  CMP_B_FILES="$B_FILES" CMP_B_FILE_BYTES="$B_FILE_BYTES" CMP_GL_HOST="$GL_HOST" \
  CMP_VERSIONS="$versions" CMP_ROWS="${!ROW_ON[*]}" CMP_BASE_BIN="$BASE_BIN" \
  CMP_SEQ_BYTES="$SEQ_BYTES" CMP_PLUGIN="$PLUGIN"
if [ "$FRESH" = 1 ]; then
  CMP_BIN_SHA="$(sha256sum "$BASE_BIN" | cut -c1-12) $(sha256sum "$LOGFS_BIN" | cut -c1-12)"
  export CMP_BIN_SHA
fi
mkdir -p "$(dirname "$OUT")"
python3 - >"$OUT.tmp" <<'PY'
import math, os, statistics, subprocess, time
from collections import defaultdict

E = os.environ
targets = E["CMP_TARGETS"].split()
others = [t for t in targets if t != "ext4"]
local = E["CMP_LOCAL"]
label = {t: (local if t == "ext4" else t) for t in targets}
if "baseline" in targets: label["baseline"] = "logfs (baseline)"
ref = "ext4" if "ext4" in targets else None          # the ratios' reference
check = ref is not None and "logfs" in targets       # the target and "logfs met" columns
vals = defaultdict(list)          # (id, target) -> [(run, value)]
for line in open(E["CMP_RAW"]):
    i, t, r, v = line.rstrip("\n").split("\t")
    vals[(i, t)].append((int(r), float(v)))
runs = int(E["CMP_RUNS"])

def med(i, t):
    xs = [v for _, v in vals.get((i, t), []) if not math.isnan(v)]
    return (statistics.median(xs) if xs else None), len(xs), len(vals.get((i, t), []))

def fmt(x, kind):
    if x is None: return "n/a"
    if kind == "lat": return "%.2f" % x if x < 10 else "%.1f" % x
    if kind == "ratio": return "%.2f" % x
    return "%.0f" % x if x >= 100 else "%.1f" % x

rows = []   # (row name as in --rows, workload, variant, metric, id, kind, target)
on = set(E["CMP_ROWS"].split())
# The targets are issue 16's (logfs / ext4 in one run). A target is (op,
# threshold) or (op, threshold, how the threshold is made).
# Three reads with no target of their own, B 4 KiB and 64 KiB with 10
# threads cold and readrandom after drop_caches, must not fall below 0.95 x
# their ratio in issue 16's table (the issue's text).
READ_FLOOR = {("4096", 10, "cold"): (">=", 0.95 * 0.96, "0.95 x 0.96"),
              ("65536", 10, "cold"): (">=", 0.95 * 0.84, "0.95 x 0.84")}
for bs, bsl in (("512", "512 B"), ("4k", "4 KiB")):
    for j in (1, 16):
        tgt = ((">=", 0.7) if j == 1 else (">=", 0.9)) if bs == "512" else None
        rows.append(("A%sx%d" % (bs, j), "A fio append+fdatasync", "%s, %d job%s" % (bsl, j, "s" if j > 1 else ""),
                     "syncs/s", "A.%s.%d" % (bs, j), "rate", tgt))
for rb, rbl in (("4096", "4 KiB"), ("65536", "64 KiB")):
    for th in (1, 10):
        for ph in ("cold", "warm"):
            name, v = "B%dkx%d" % (int(rb) // 1024, th), "%s, %d thr, %s" % (rbl, th, ph)
            rows.append((name, "B logfs bench read", v, "p50 us", "B.%s.%d.%s.p50" % (rb, th, ph), "lat", None))
            tgt = (">=", 0.9) if (rb, th, ph) == ("65536", 1, "cold") else READ_FLOOR.get((rb, th, ph))
            rows.append((name, "B logfs bench read", v, "ops/s", "B.%s.%d.%s.ops" % (rb, th, ph), "rate", tgt))
if {"B4kx1", "B4kx10"} <= on:
    rows.append(("B4kx10", "B logfs bench read", "4 KiB warm, p50 10 thr / 1 thr", "ratio", "B.ratio", "ratio", ("<=", 1.5)))
rows.append(("fillseq", "C db_bench", "fillseq --sync=1 (%s keys)" % E["CMP_FILLSEQ"], "ops/s", "C.fillseq", "rate", (">=", 0.7)))
rows.append(("fillseq", "C db_bench", "fillseq --sync=1, p99", "us", "C.fillseq.p99", "lat", None))
rows.append(("fillseq", "C db_bench", "floor: fio 4 KiB append+fdatasync, 2 jobs at once, per job", "syncs/s",
             "C.floor", "rate", None))
rows.append(("fillrandom", "C db_bench", "fillrandom (%s keys)" % E["CMP_DB_KEYS"], "ops/s", "C.fillrandom", "rate", (">=", 0.5)))
rows.append(("readwarm", "C db_bench", "readrandom warm", "ops/s", "C.warm", "rate", (">=", 0.9)))
rows.append(("readcold", "C db_bench", "readrandom after drop_caches", "ops/s", "C.cold", "rate", (">=", 0.95 * 0.97, "0.95 x 0.97")))
seq_mib = int(E["CMP_SEQ_BYTES"]) >> 20
# Sequential writes: each byte is written three times on this one disk.
rows.append(("seqwrite", "D fio sequential", "1 MiB writes, %d MiB, fsync at end" % seq_mib, "MB/s", "D.write", "rate", (">=", 0.8 / 3, "0.8 / 3")))
rows.append(("seqread", "D fio sequential", "1 MiB reads of it, cold", "MB/s", "D.read", "rate", (">=", 0.9)))
for j in (1, 16):
    for ph in ("create", "stat", "rename", "unlink"):
        rows.append(("Mx%d" % j, "M logfs bench meta", "%s, %d process%s" % (ph, j, "es" if j > 1 else ""),
                     "ops/s", "M.%d.%s" % (j, ph), "rate", None))
rows = [r[1:] for r in rows if r[0] in on]
do_a, do_b, do_c, do_d, do_m = (c == "1" for c in E["CMP_DO"])

def cell(i, t):
    if i == "B.ratio":
        a, _, _ = med("B.4096.10.warm.p50", t)
        b, _, _ = med("B.4096.1.warm.p50", t)
        return (a / b if a is not None and b else None), ""
    m, ok, n = med(i, t)
    note = "" if ok == n else " (%d/%d ok)" % (ok, n)
    return m, note

out = []
w = out.append
w("# logfs comparison: %s" % " vs ".join(label[t] for t in targets))
w("")
w("- date: %s; kernel %s; %d CPUs; memory %s" % (time.strftime("%Y-%m-%d %H:%M:%S %z"),
  os.uname().release, os.cpu_count(), E["CMP_MEM"]))
w("- work dir: `%s` on **%s** (statfs type %s); all targets on that disk" % (E["CMP_WORK"], local, E["CMP_STATFS"]))
w("- command: `%s`" % E["CMP_CMDLINE"])
if "logfs" in targets:
    w("- logfs: `%s` at commit %s; embedded cluster, 1 meta + 3 segd on loopback; fio and db_bench --wal_dir in a "
      "`user.logfs.kind=wal` dir, db_bench --db and bench read in a `block` dir" % (E["CMP_LOGFS_BIN"], E["CMP_GIT"]))
if "baseline" in targets:
    sha_base, sha_logfs = E["CMP_BIN_SHA"].split()
    w("- logfs (baseline): `%s` (sha256 %s; logfs: sha256 %s), the same setup; each logfs cell on a fresh cluster of "
      "its binary that lives for that row only (C's fillrandom and readrandoms share one), the two binaries back to "
      "back in each row, the baseline first in odd runs, logfs first in even runs; `logfs/baseline` = logfs / "
      "logfs (baseline)" % (E["CMP_BASE_BIN"], sha_base, sha_logfs))
if "logfs-plugin" in targets:
    w("- logfs-plugin: db_bench with `LD_PRELOAD=%s --fs_uri=id=logfs://META` on the logfs target's cluster "
      "(row C only): the RocksDB plugin, in-process, no FUSE; its WAL and MANIFEST are WAL files by name" % E["CMP_PLUGIN"])
if "logfs-ha" in targets:
    w("- logfs-ha: `%s` with meta as three replicas journaling to a three-member etcd, 3 segd and a mount, all on "
      "loopback (bench/meta_ha_cluster.sh, as bench/meta_ha_cost.sh); measured in row M only" % E["CMP_LOGFS_BIN"])
if "passthrough" in targets:
    w("- passthrough: libfuse example passthrough_ll, compiled at run time, its defaults "
      "(cache=auto: entry/attr timeout 1 s, no writeback cache, max_threads 10), over a dir on the same disk")
if "gluster" in targets:
    w("- gluster: replica 3 volume, 3 bricks under the work dir on %s (force), mounted with "
      "`mount -t glusterfs %s:/VOL` in a network namespace of the run, default volume options" % (E["CMP_GL_HOST"], E["CMP_GL_HOST"]))
w("- %s; %d run(s) per cell, targets interleaved within each run, medians shown; %s s per fio run, "
  "bench-read phase and readrandom" % (E["CMP_VERSIONS"], runs, E["CMP_SECS"]))
if do_a: w("- A: `fio --rw=write --ioengine=sync --fdatasync=1 --fallocate=none --overwrite=0 --time_based`, "
  "one new file per job; syncs/s = write IOPS (one fdatasync per write)")
if do_b:
    if E["CMP_B_SUPPORTED"] == "1":
        w("- B: `logfs bench read --files=%s --file_bytes=%s --cache=both` (cold drops the kernel caches first)"
          % (E["CMP_B_FILES"], E["CMP_B_FILE_BYTES"]))
    else:
        w("- B: **n/a**: this logfs binary has no working `bench read` subcommand")
if do_c: w("- C: `db_bench --compression_type=none`; readrandom warm = a new process after readseq over the DB; "
  "cold = `sync; echo 3 > /proc/sys/vm/drop_caches` first (also empties the page cache under segd and bricks)")
if do_d: w("- D: `fio --rw=write|read --bs=1M --ioengine=sync --size=%d MiB`, one job, one file in a block dir; "
  "the write with `--end_fsync=1`; the read after `drop_caches` (and, on logfs, `user.logfs.drop_block_cache`); "
  "MB/s = bytes / wall time of the fio command" % seq_mib)
if do_m:
    if E["CMP_M_SUPPORTED"] == "1":
        w("- M: `logfs bench meta --processes --threads=1|16 --files=%s`, each process in a directory of its own "
          "(under the block dir on logfs): ops/s of each phase over all processes, by the phase's wall clock; "
          "create = open(O_CREAT|O_EXCL) + close of an empty file" % E["CMP_M_FILES"])
    else:
        w("- M: **n/a**: this logfs binary has no working `bench meta` subcommand")
if ref:
    w("- ratio = target / %s of the same figure: higher is better for syncs/s and ops/s, lower for p50 latency; "
      "\"met\" checks logfs against the issue's target" % label["ext4"])
w("- wall time of the measurements: %s s" % E["CMP_ELAPSED"])
w("")
hdr = ["workload", "variant", "metric"] + [label[t] for t in targets]
if ref: hdr += ["%s/%s" % (label[t], label[ref]) for t in others]
if "baseline" in targets: hdr += ["logfs/baseline"]
ncols = len(hdr)
if check: hdr += ["target", "logfs met"]
w("| " + " | ".join(hdr) + " |")
w("|" + "|".join("---" if k < 3 else "--:" for k in range(ncols)) + "|" + "---|---|" * check)
def ratio(x, y, digits):
    return "%.*fx" % (digits, x / y) if x is not None and y else "n/a"
for wl, var, metric, i, kind, tgt in rows:
    cells = {t: cell(i, t) for t in targets}
    line = [wl, var, metric] + [fmt(cells[t][0], kind) + cells[t][1] for t in targets]
    if ref:
        for t in others:
            line.append("-" if i == "B.ratio" else ratio(cells[t][0], cells[ref][0], 2))
    if "baseline" in targets:
        line.append("-" if i == "B.ratio" else ratio(cells["logfs"][0], cells["baseline"][0], 3))
    if not check:
        pass
    elif tgt:
        base = cells["ext4"][0]
        op, th = tgt[:2]
        # 4 decimals, so that a value just under a made threshold does not
        # print as equal to it.
        shown = "%g" % th if len(tgt) == 2 else "%s = %.4f" % (tgt[2], th)
        also_ok = True  # fillrandom: logfs must also not fall below the passthrough
        if i == "B.ratio":
            tv = cells["logfs"][0]
            line.append("%s %s" % (op, shown))
        else:
            x = cells["logfs"][0]
            tv = x / base if x is not None and base else None
            text = "logfs/%s %s %s" % (label["ext4"], op, shown)
            pt = cells["passthrough"][0] if i == "C.fillrandom" and "passthrough" in cells else None
            if pt:
                text += ", logfs >= passthrough"
                also_ok = x is not None and x >= pt
            line.append(text)
        if tv is None:
            line.append("n/a")
        else:
            ok = (tv >= th if op == ">=" else tv <= th) and also_ok
            line.append(("yes" if ok else "**no**") + " (%.4f)" % tv)
    else:
        line += ["", ""]
    w("| " + " | ".join(line) + " |")
if "logfs-plugin" in targets and ref and do_c:
    # Issue 32's targets for RocksDB through the plugin.
    w("")
    w("logfs-plugin against its targets (medians):")
    w("")
    w("| check | value | target | met |")
    w("|---|--:|---|---|")
    def check_row(name, value, text, ok):
        w("| %s | %s | %s | %s |" % (name, "n/a" if value is None else "%.3f" % value, text,
                                      "n/a" if value is None else ("yes" if ok else "**no**")))
    def plugin_ratio(i):
        x, _, _ = med(i, "logfs-plugin")
        b, _, _ = med(i, "ext4")
        return x / b if x is not None and b else None
    if "fillrandom" in on:
        r = plugin_ratio("C.fillrandom"); check_row("fillrandom / ext4", r, ">= 0.8", r is not None and r >= 0.8)
    if "fillseq" in on:
        x, _, _ = med("C.fillseq", "logfs-plugin")
        f, _, _ = med("C.floor", "ext4")
        r = x / f if x is not None and f else None
        check_row("fillseq --sync=1 / floor", r, ">= 0.9", r is not None and r >= 0.9)
        r = plugin_ratio("C.fillseq.p99")
        check_row("fillseq p99 / ext4's", r, "<= 2", r is not None and r <= 2)
    for row, i in (("readwarm", "C.warm"), ("readcold", "C.cold")):
        if row in on:
            r = plugin_ratio(i); check_row("%s / ext4" % row, r, ">= 0.95", r is not None and r >= 0.95)
if runs > 1:
    w("")
    w("Per-run values (run 1, 2, ...):")
    w("")
    pair = ["logfs/baseline"] if "baseline" in targets else []
    w("| id | " + " | ".join([label[t] for t in targets] + pair) + " |")
    w("|---|" + "---|" * (len(targets) + len(pair)))
    ids = []
    for line in open(E["CMP_RAW"]):
        i = line.split("\t")[0]
        if i not in ids: ids.append(i)
    def per_run_ratios(i):   # logfs / baseline of the same run
        base = dict(vals.get((i, "baseline"), []))
        return ", ".join("%.3f" % (v / base[r]) if base.get(r) and not math.isnan(v / base[r]) else "nan"
                         for r, v in sorted(vals.get((i, "logfs"), [])))
    for i in ids:
        line = [", ".join("%g" % v for _, v in sorted(vals.get((i, t), []))) for t in targets]
        if pair: line.append(per_run_ratios(i))
        w("| %s | " % i + " | ".join(line) + " |")
print("\n".join(out))
PY
mv "$OUT.tmp" "$OUT"
cat "$OUT"
log "table saved to $OUT (measurements took ${ELAPSED}s)"
# One chart per workload of the ratios to ext4, next to the table
# (build/compare-A.svg, ...); without ext4 there are no ratios to chart.
if [[ " ${TARGETS[*]} " == *" ext4 "* ]]; then
  if charts=$("$LOGFS_BIN" bench plot-ratios --table="$OUT" 2>&1); then
    log "charts: $(echo $charts)"
  else
    log "charts not written: $charts"
  fi
fi
[ "$CELLS_FAILED" = 0 ] || log "$CELLS_FAILED measurement(s) failed; logs are kept in $LOGS"
FAILED=0

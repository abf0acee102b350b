#!/usr/bin/env bash
# Runs every test of logfs_test (what `make test` does after building).
#
# Phase 1: every suite but those below runs in a process of its own, at
# most JOBS processes at once, each starting the next suite as soon as its
# last one ends (a work queue; GoogleTest's static sharding left one shard
# running LargeDirTest for two minutes after the others had finished).
# The suites known to take longest go first, so that no long one starts
# last. Each test starts its own processes on free ports and temp dirs, and
# the tests mostly wait on disks and timers: on 2 cores, three at once keep
# both busy. The two suites that change the machine (the package install,
# a mount helper in /usr/sbin) run one after the other in one process.
# Phase 2: the suites that bound a latency or a failover time, one at a
# time, since a test beside them would stretch what they measure.
#
#   tests/run_tests.sh BIN [GTEST_ARGS...]
#
# With a --gtest_filter in GTEST_ARGS the selected tests run in one
# process, in order, as `BIN ARGS` would. Env: TEST_JOBS (default 3;
# SHARDS, its old name, is read too). Each process's output goes to
# BIN.logs/SUITE.log; a failed suite's failures and log are printed. The
# last line is "N passed, N failed, N skipped" over all of them; exit 1 if
# any test failed or a process did not finish cleanly.
set -uo pipefail
bin=${1:?usage: tests/run_tests.sh BIN [GTEST_ARGS...]}
shift
for arg in "$@"; do
  case "$arg" in --gtest_filter=*) exec "$bin" "$@" ;; esac
done
jobs=${TEST_JOBS:-${SHARDS:-3}}
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "run_tests: TEST_JOBS must be a positive integer" >&2; exit 2; }
SERIAL_SUITES=(
  SlowReplicaFaultTest  # fsync latency bounds
  BenchTest             # benchmarks
  EtcdClientTest        # failover within 3 s
  MetaHaFaultTest       # failover within the lease TTL + 2 s
  RocksdbPluginHaFaultTest  # etcd x3, meta x3, segd x5 and a RocksDB writer
  MetaHaCutOffFaultTest
  PartitionFaultTest    # fsync bounded by its timeout
  FuseWorkersTest       # stat within 1 s
)
MACHINE_SUITES=(
  PackageInstallTest    # dpkg -i and --purge of the package
  MountHelperTest       # /usr/sbin/mount.fuse.logfs, mount -a
)
# Longest first (seconds in a run of 2026-12-03, three at once); the order
# only matters for how evenly the processes end, and a suite missing from
# the binary is skipped.
LONG_SUITES=(
  LargeDirTest          # 130
  LostReplyTest         # 69
  MACHINE               # 37: MACHINE_SUITES
  ToolsTest             # 31
  FaultTest             # 38
  ReplicationTest       # 29
  MetaRestartTest       # 21
  RollTest              # 18
  ReplicaReportTest     # 16
  ReopenAppendTest      # 13
)

listed=$("$bin" --gtest_list_tests) || { echo "run_tests: $bin --gtest_list_tests failed" >&2; exit 1; }
# Suite lines end with "." (a typed or parameterized one has a comment
# after it); test lines are indented.
mapfile -t suites < <(awk '/^[^ ]+\.( |$)/ { sub(/\..*$/, ""); print }' <<<"$listed")
declare -A special=()
for s in "${SERIAL_SUITES[@]}" "${MACHINE_SUITES[@]}"; do special[$s]=1; done
machine_filter=$(printf '%s.*:' "${MACHINE_SUITES[@]}")
declare -A present=() queued=()
for s in "${suites[@]}"; do present[$s]=1; done
items=()
for s in "${LONG_SUITES[@]}"; do
  if [ "$s" = MACHINE ]; then
    items+=("${machine_filter%:}")
  elif [ -n "${present[$s]:-}" ]; then
    items+=("$s.*")
  fi
  queued[$s]=1
done
for s in "${suites[@]}"; do
  [ -n "${special[$s]:-}${queued[$s]:-}" ] || items+=("$s.*")
done
serial_filter=$(printf '%s.*:' "${SERIAL_SUITES[@]}")
items+=("${serial_filter%:}")  # phase 2, after the others

logdir=$bin.logs
rm -rf "$logdir" && mkdir -p "$logdir" || exit 1
# The log of a filter: its first suite's name (the machine suites and the
# serial ones are logged as "machine" and "serial").
log_of() {
  case "$1" in
    "${machine_filter%:}") echo "$logdir/machine.log" ;;
    "${serial_filter%:}") echo "$logdir/serial.log" ;;
    *) local suite=${1%%.*}; echo "$logdir/${suite//\//_}.log" ;;
  esac
}
# Runs one filter; its exit code and seconds go to LOG.rc and LOG.secs.
run_item() {
  local log start
  log=$(log_of "$1")
  start=$SECONDS
  "$bin" --gtest_filter="$1" "${@:2}" >"$log" 2>&1
  echo $? >"$log.rc"
  echo $((SECONDS - start)) >"$log.secs"
}

last=$((${#items[@]} - 1))
for ((i = 0; i < last; i++)); do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  run_item "${items[i]}" "$@" &
done
wait
run_item "${items[last]}" "$@"

status=0 passed=0 failed=0 skipped=0
for item in "${items[@]}"; do
  log=$(log_of "$item")
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -1)
  if [ -z "$line" ]; then
    echo "run_tests: $log has no result line (the process did not finish):" >&2
    tail -n 40 "$log" >&2
    status=1
    continue
  fi
  read -r p _ f _ s _ <<<"${line//,/}"
  passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
  if [ "$f" != 0 ]; then
    echo "=== failures in $log:"
    grep -E '^\[  FAILED  \] [A-Za-z]' "$log" | grep -v ' tests\?, listed below' | sort -u
    grep -B2 -A12 -E '(Failure|FAILED)$|: Failure' "$log" | head -n 200
  elif [ "$(cat "$log.rc")" != 0 ]; then
    echo "run_tests: $log: exit code $(cat "$log.rc") after its tests passed:" >&2
    tail -n 40 "$log" >&2
    status=1
  fi
done
grep -hE '^\[  SKIPPED \] [A-Za-z]' "$logdir"/*.log | sort -u
echo
echo "slowest (s): $(for f in "$logdir"/*.log.secs; do echo "$(cat "$f") $(basename "$f" .log.secs)"; done |
  sort -rn | head -n 6 | awk '{ printf "%s%s %s", (NR > 1 ? ", " : ""), $2, $1 }')"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ] || status=1
exit $status

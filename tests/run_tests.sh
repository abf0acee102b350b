#!/usr/bin/env bash
# Runs every test of logfs_test (what `make test` does after building):
# most suites in SHARDS processes at once (GoogleTest's sharding:
# GTEST_TOTAL_SHARDS/GTEST_SHARD_INDEX; each test starts its own
# processes on free ports and temp dirs, and the tests mostly wait on
# disks and timers: on 2 cores two shards kept them busy a third of the
# time, and three shards took 260 s where two took 398 s), then the
# suites below one at a time: those that change the machine (install
# the package, a mount helper in /usr/sbin) and those that bound a
# latency or a failover time, which a shard beside them would stretch.
#
#   tests/run_tests.sh BIN [GTEST_ARGS...]
#
# With a --gtest_filter in GTEST_ARGS the selected tests run in one
# process, in order, as `BIN ARGS` would. Env: SHARDS (default 3). Each
# shard's output goes to a log next to BIN (BIN.shardN.log); a failed
# shard's failures and log are printed. The last line is "N passed, N
# failed, N skipped" over all of them; exit 1 if any test failed or a
# process did not finish.
set -uo pipefail
bin=${1:?usage: tests/run_tests.sh BIN [GTEST_ARGS...]}
shift
for arg in "$@"; do
  case "$arg" in --gtest_filter=*) exec "$bin" "$@" ;; esac
done
shards=${SHARDS:-3}
[[ $shards =~ ^[1-9][0-9]*$ ]] || { echo "run_tests: SHARDS must be a positive integer" >&2; exit 2; }
SERIAL_SUITES=(
  PackageInstallTest    # dpkg -i and --purge of the package
  MountHelperTest       # /usr/sbin/mount.fuse.logfs, mount -a
  SlowReplicaFaultTest  # fsync latency bounds
  BenchTest             # benchmarks
  EtcdClientTest        # failover within 3 s
  MetaHaFaultTest       # failover within the lease TTL + 2 s
  MetaHaCutOffFaultTest
  PartitionFaultTest    # fsync bounded by its timeout
  FuseWorkersTest       # stat within 1 s
)
serial_filter=$(printf '%s.*:' "${SERIAL_SUITES[@]}")
serial_filter=${serial_filter%:}

pids=() logs=()
for ((i = 0; i < shards; i++)); do
  log=$bin.shard$i.log
  logs+=("$log")
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i \
    "$bin" --gtest_filter="-$serial_filter" "$@" >"$log" 2>&1 &
  pids+=($!)
done
status=0
for ((i = 0; i < shards; i++)); do
  wait "${pids[i]}" || status=1
done
serial_log=$bin.serial.log
logs+=("$serial_log")
"$bin" --gtest_filter="$serial_filter" "$@" >"$serial_log" 2>&1 || status=1

passed=0 failed=0 skipped=0
for log in "${logs[@]}"; do
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
  fi
done
grep -hE '^\[  SKIPPED \] [A-Za-z]' "${logs[@]}" | sort -u
echo
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ] || status=1
exit $status

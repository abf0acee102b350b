#!/usr/bin/env bash
# Runs every fault of the fault-injection suite (tests/fault_test.cc,
# tests/partition_fault_test.cc) N
# times against a real cluster and prints a markdown table: fault |
# trials | acked bytes | acked bytes lost | longest fsync stall (ms) |
# max seconds to full replication | failed trials.
#
#   tests/faults.sh [--trials=N] [--seconds=S] [--filter=GTEST_FILTER]
#   (defaults: 20 trials, 3 s each, every suite named *FaultTest; e.g.
#   --filter='PartitionFaultTest.*' runs the network partitions alone)
set -euo pipefail
cd "$(dirname "$0")/.."
trials=20
seconds=3
filter='*FaultTest.*'
for arg in "$@"; do
  case "$arg" in
    --trials=*) trials="${arg#*=}" ;;
    --seconds=*) seconds="${arg#*=}" ;;
    --filter=*) filter="${arg#*=}" ;;
    *) echo "faults.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
make --no-print-directory build >/dev/null
out=$(mktemp)
trap 'rm -f "$out"' EXIT
LOGFS_BIN="$PWD/build/logfs" LOGFS_FAULT_SECONDS="$seconds" \
  build/logfs_test --gtest_filter="$filter" --gtest_repeat="$trials" >"$out" 2>&1 || true
echo "| fault | trials | acked bytes | acked bytes lost | longest fsync stall (ms) | max seconds to full replication | failed trials |"
echo "|---|---|---|---|---|---|---|"
# A failure counts against the fault of the test that failed (known from
# that test's rows), also when the trial failed before printing its row.
awk '
  /^\[ RUN      \] / { test = $4; printed = 0 }
  /^fault=/ {
    split($0, kv, " ");
    for (i in kv) { split(kv[i], p, "="); v[p[1]] = p[2] }
    f = v["fault"]; n[f]++; acked[f] += v["acked_bytes"]; lost[f] += v["acked_bytes_lost"];
    if (v["longest_fsync_ms"] + 0 > stall[f]) stall[f] = v["longest_fsync_ms"] + 0;
    if (v["seconds_to_full_replication"] + 0 > repl[f]) repl[f] = v["seconds_to_full_replication"] + 0;
    fault_of[test] = f; printed = 1
  }
  /^\[  FAILED  \] .* \([0-9]+ ms\)$/ { failed_test[$4]++; if (!printed) rowless[$4]++ }
  END {
    for (t in failed_test) {
      f = (t in fault_of) ? fault_of[t] : t
      failed[f] += failed_test[t]; n[f] += rowless[t]
    }
    for (f in n) printf "| %s | %d | %d | %d | %d | %s | %d |\n", f, n[f], acked[f], lost[f], stall[f], (repl[f] > 0 ? sprintf("%.1f", repl[f]) : "-"), failed[f] + 0
  }' "$out" | sort
grep -q "^\[  FAILED  \]" "$out" && { echo; echo "some trials failed; log: kept in $out.log"; cp "$out" "$out.log"; exit 1; }
exit 0

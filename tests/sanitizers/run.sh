#!/usr/bin/env bash
# Runs a sanitizer build's tests: the unit tests (logfs_unit), then the
# integration tests matching FILTER (logfs_test), whose meta, segd and mount
# processes are the same build's logfs (LOGFS_BIN). Every process writes its
# sanitizer reports to a file under BUILDDIR/reports, child processes
# included (their stderr goes to log files nobody reads), and the run fails
# if any report was written or any test failed.
#
#   tests/sanitizers/run.sh tsan|asan BUILDDIR FILTER     (make tsan / make asan)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kind=$1
dir=$(realpath "$2")
filter=$3
reports=$dir/reports
rm -rf "$reports"
mkdir -p "$reports"

case "$kind" in
  tsan)
    # The libraries we link are not built with TSan: their synchronization
    # through pthread is still seen, absl's is made visible by
    # tests/sanitizers/tsan_absl_sync.cc, and tsan.supp names what remains.
    export TSAN_OPTIONS="log_path=$reports/tsan second_deadlock_stack=1 suppressions=$here/tsan.supp"
    ;;
  asan)
    # Leaks are checked in the unit tests only (see the unit run below): the
    # daemons end on a signal by design, with their state still allocated.
    export ASAN_OPTIONS="log_path=$reports/asan detect_leaks=0 abort_on_error=1 strict_string_checks=1"
    export UBSAN_OPTIONS="log_path=$reports/ubsan print_stacktrace=1 halt_on_error=1"
    ;;
  *) echo "usage: $0 tsan|asan BUILDDIR FILTER" >&2; exit 2 ;;
esac

rc=0
echo "== $kind: unit tests"
if [ "$kind" = asan ]; then
  ASAN_OPTIONS=${ASAN_OPTIONS/detect_leaks=0/detect_leaks=1} "$dir/logfs_unit" || rc=1
else
  "$dir/logfs_unit" || rc=1
fi
echo "== $kind: integration tests '$filter' (LOGFS_BIN=$dir/logfs)"
LOGFS_BIN=$dir/logfs "$dir/logfs_test" --gtest_filter="$filter" || rc=1

shopt -s nullglob
found=("$reports"/*)
if ((${#found[@]})); then
  echo "== $kind: ${#found[@]} report file(s) in $reports:"
  for f in "${found[@]}"; do
    echo "--- $f"
    head -n 60 "$f"
  done
  rc=1
fi
echo "== $kind: $([ $rc -eq 0 ] && echo passed || echo FAILED)"
exit $rc

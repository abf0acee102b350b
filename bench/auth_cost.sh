#!/usr/bin/env bash
# The cost of authentication (README "Authentication") on `logfs bench
# wal`: starts two clusters of meta + 3 segment servers on loopback, one
# plain and one with --cluster_secret_file, and runs the bench against each
# in turn (1 and 16 writers, alternating plain and authenticated in every
# round, in ABBA order, so both see the same machine), then prints the medians and the
# authenticated / plain ratios of appends/s, p50, p99 and the CPU per
# append of the bench and that cluster's servers.
#
#   bench/auth_cost.sh [--runs=N] [--seconds=S]     (defaults: 3 runs, 5 s each)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=3
seconds=5
for arg in "$@"; do
  case "$arg" in
    --runs=*) runs="${arg#*=}" ;;
    --seconds=*) seconds="${arg#*=}" ;;
    *) echo "auth_cost.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
bin="${LOGFS_BIN:-$PWD/build/logfs}"
dir=$(mktemp -d /tmp/logfs-auth-cost-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
umask 077
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$dir/secret"

wait_file() {  # path: polls up to 10 s for a non-empty file
  for _ in $(seq 100); do [ -s "$1" ] && return 0; sleep 0.1; done
  echo "auth_cost.sh: $1 never appeared" >&2; exit 1
}
start_cluster() {  # name, extra flags...
  local d="$dir/$1"; shift
  mkdir -p "$d"
  "$bin" meta --data_dir="$d/meta" --listen=127.0.0.1:0 --address_file="$d/meta.addr" "$@" \
    2>"$d/meta.log" & pids+=($!); echo $! > "$d/pids"
  wait_file "$d/meta.addr"
  for s in 0 1 2; do
    "$bin" segd --data_dir="$d/segd$s" --listen=127.0.0.1:0 --meta="$(cat "$d/meta.addr")" \
      --address_file="$d/segd$s.addr" "$@" 2>"$d/segd$s.log" & pids+=($!); echo $! >> "$d/pids"
  done
  for s in 0 1 2; do wait_file "$d/segd$s.addr"; done
}
ticks() {  # CPU ticks (user + system) of the pids in file $1
  local t=0
  while read -r p; do set -- $(cut -d' ' -f14,15 "/proc/$p/stat"); t=$((t + $1 + $2)); done < "$1"
  echo "$t"
}

start_cluster plain
start_cluster auth --cluster_secret_file="$dir/secret"
hz=$(getconf CLK_TCK)
for run in $(seq "$runs"); do
  for writers in 1 16; do
    # ABBA: odd runs plain first, even runs auth first, so drift (page
    # cache, journal files, other load) favours neither.
    order="plain auth"
    [ $((run % 2)) -eq 0 ] && order="auth plain"
    for mode in $order; do
      flags=()
      [ "$mode" = auth ] && flags=(--cluster_secret_file="$dir/secret")
      before=$(ticks "$dir/$mode/pids")
      out=$( { /usr/bin/time -f "benchcpu %U %S" "$bin" bench wal --meta="$(cat "$dir/$mode/meta.addr")" \
               --threads="$writers" --files="$writers" --seconds="$seconds" "${flags[@]}"; } 2>&1)
      after=$(ticks "$dir/$mode/pids")
      echo "$out" | awk -v w="$writers" -v m="$mode" -v st="$(( after - before ))" -v hz="$hz" '
        /^append\+sync latency/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "p50") p50 = kv[2]; if (kv[1] == "p99") p99 = kv[2] } }
        /^appends=/ { split($1, kv, "="); n = kv[2]; for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "appends/s") aps = kv[2] } }
        /^benchcpu/ { cpu = $2 + $3 }
        END { printf "%s %s %s %s %s %s\n", w, m, aps, p50 / 1000, p99 / 1000, (cpu + st / hz) / n * 1e6 }'
    done
  done
done > "$dir/rows"
echo "| writers | appends/s plain | appends/s auth | ratio | p50 us plain | p50 us auth | ratio | p99 us plain | p99 us auth | ratio | CPU us/append plain | CPU us/append auth | ratio |"
echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
for writers in 1 16; do
  for col in 3 4 5 6; do
    for mode in plain auth; do
      awk -v w="$writers" -v m="$mode" -v c="$col" '$1 == w && $2 == m { print $c }' "$dir/rows" |
        sort -g | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'
    done
  done | paste -sd' ' | awk -v w="$writers" '{ printf "| %s | %.0f | %.0f | %.3f | %.0f | %.0f | %.3f | %.0f | %.0f | %.3f | %.1f | %.1f | %.3f |\n", w, $1, $2, $2 / $1, $3, $4, $4 / $3, $5, $6, $6 / $5, $7, $8, $8 / $7 }'
done

#!/usr/bin/env bash
# Includes go down the stack only (README "Layout"; STYLE §1):
#   src/{util,status,env,cluster} <- store/format <- store/rpc <- store/client
#   <- {store/segd, store/meta, store/admin, cache, wal} <- fsclient (the client
#   library) <- {fuse, rocksdb_fs (the RocksDB FileSystem plugin, and its
#   rocksdb_fs/plugin registration)} <- {bench, fuzz} <- src/main,
#   and bench/micro (micro-benchmarks) over store/segd, cache, wal and below
#   and inside store/meta: store/meta/db (RocksDB, the journal interface)
#   <- {store/meta/namespace, store/meta/ha} <- store/meta (the server),
#   and src/{util,status} <- store/meta/ha/etcd (the etcd client) <- store/meta/ha
#   and src/{util,status} <- src/metrics <- {store/segd, store/meta, cache, wal} (histograms)
# segd and meta never include each other; an internal/ folder is private to
# its parent; RocksDB only in store/meta/db/metadata_db*.cc (metadata_db.cc
# and its checkpoints in metadata_db_checkpoint.cc) and rocksdb_fs/, gRPC and the
# generated etcd API only in store/meta/ha/etcd/*.cc, libfuse only in fuse/, gflags
# only in src/main/. tests/ may include anything, and a
# *_test.cc anywhere may include tests/fakes/. There is no
# list of exceptions: move the code down instead.
# Usage: .ci/check_layers.sh [ROOT]   (exit 1 and one line per bad include)
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"

# allowed[folder] = the folders its files may include, besides its own.
declare -A allowed=(
  [src/util]=""
  [src/status]="src/util"
  [src/env]="src/status src/util"
  [src/cluster]="src/env src/status src/util"
  [store/format]="src/env src/status src/util"
  [store/rpc]="store/format src/env src/status src/util"
  [store/client]="store/rpc store/format src/env src/status src/util"
  [store/meta/ha/etcd]="src/status src/util"
  [src/metrics]="src/status src/util"
)
base_client="store/client store/rpc store/format src/env src/status src/util"
meta_parts="store/meta/db store/meta/namespace store/meta/ha store/meta/coherence"
for f in store/segd store/meta $meta_parts store/admin cache wal; do allowed[$f]="$base_client"; done
for f in store/segd store/meta $meta_parts cache wal; do allowed[$f]+=" src/metrics"; done
# meta's parts: the database below the namespace and HA, the server above all.
allowed[store/meta/namespace]+=" store/meta/db"
allowed[store/meta/coherence]+=" store/meta/db"
allowed[store/meta/ha]+=" store/meta/db store/meta/ha/etcd"
allowed[store/meta]+=" $meta_parts store/meta/ha/etcd"
allowed[fsclient]="wal cache src/metrics $base_client"
allowed[fuse]="fsclient wal cache src/metrics $base_client"
allowed[rocksdb_fs]="fsclient wal cache src/metrics $base_client"
allowed[rocksdb_fs/plugin]="rocksdb_fs"
allowed[bench]="fuse fsclient wal cache store/admin src/cluster src/metrics $base_client"
# fuzz/: the libFuzzer targets, each of one decoder or server's handlers.
allowed[fuzz]="store/segd store/meta $meta_parts $base_client"
# bench/micro/: micro-benchmarks of the hot paths of each layer.
allowed[bench/micro]="store/segd cache wal src/metrics $base_client"

bad=0
report() { echo "layer check: $1: $2"; bad=1; }
while IFS= read -r file; do
  dir=$(dirname "$file")
  owner=${dir%/internal}                  # internal/ belongs to its parent
  case "$file" in tests/*) continue ;; esac
  [[ "$file" == src/main/* ]] && main=1 || main=0
  while IFS= read -r inc; do
    case "$inc" in
      rocksdb/*|\"rocksdb/*)
        [[ "$file" == store/meta/db/metadata_db*.cc || "$file" == rocksdb_fs/* ]] ||
          report "$file" "RocksDB ($inc)" ;;
      grpc/*|grpcpp/*|grpc++/*|\"etcd/*|etcd/*|\"gogoproto/*|\"google/api/*)
        [[ "$file" == store/meta/ha/etcd/*.cc ]] || report "$file" "gRPC or the etcd API ($inc)" ;;
      fuse_*.h|fuse.h|fuse3/*) [[ "$owner" == fuse ]] || report "$file" "libfuse ($inc)" ;;
      gflags/*|\"gflags/*) ((main)) || report "$file" "gflags ($inc)" ;;
      \"*/*)
        ((main)) && continue
        inc=${inc#\"}
        case "${inc%%/*}" in src|store|wal|cache|fsclient|fuse|rocksdb_fs|bench|fuzz|tests) ;; *) continue ;; esac
        # A unit test next to its code may use the fakes (STYLE §5, §10).
        [[ "$file" == *_test.cc && "$inc" == tests/fakes/* ]] && continue
        idir=$(dirname "$inc")
        [[ "$idir" == */internal && "${idir%/internal}" != "$owner" ]] &&
          { report "$file" "private header $inc"; continue; }
        idir=${idir%/internal}
        [[ "$idir" == "$owner" ]] && continue
        [[ " ${allowed[$owner]-__none__} " == *" $idir "* ]] || report "$file" "includes $inc"
        ;;
    esac
  done < <(sed -n -e 's/^#include <\([^>]*\)>.*/\1/p' -e 's/^#include "\([^"]*\)".*/"\1/p' "$file")
done < <(git ls-files '*.cc' '*.h' | grep -v '^build/')
exit $bad

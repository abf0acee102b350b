// The pure parts of the RocksDB plugin: its URI, the file kind it gives
// each RocksDB file, and how a logfs error becomes an IOStatus. No I/O;
// thread-safe (pure functions).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rocksdb/io_status.h"
#include "store/format/logfs.pb.h"

namespace logfs::rocksdb_fs {

// "logfs://META_LIST[/ROOT]": META_LIST is meta's "host:port" or the list
// of meta replicas "h1:p,h2:p,..." (as a mount's --meta); ROOT, an
// absolute logfs directory ("/" if none), is where RocksDB's paths start:
// with logfs://m:7000/dbs, RocksDB's "/bench" is logfs's "/dbs/bench".
struct Uri {
  std::string meta;
  std::string root;  // absolute, no trailing '/' but for "/"
};
// kInvalidArgument naming what is wrong (no "logfs://", no meta address,
// a root with "." or "..").
absl::StatusOr<Uri> ParseUri(absl::string_view uri);

// The logfs path of RocksDB's `path` under `root`: "/dbs" + "/bench/CURRENT";
// a relative `path` is taken from the root ("bench" -> "/dbs/bench").
std::string UnderRoot(const std::string& root, absl::string_view path);

// The kind of a file RocksDB creates, by RocksDB's file names
// (file/filename.h): write-ahead logs ("NNNNNN.log"), MANIFEST-NNNNNN and
// the info log (LOG) are append-only logs that RocksDB syncs record by
// record, so WAL files (each append fanned out at once, ack quorum 2 of
// 3; LOG.old.* are renamed LOGs, and keep the kind); everything else
// RocksDB creates (SSTs, blob files, CURRENT, OPTIONS, IDENTITY,
// temporary files) is written once and then read at random: block files.
proto::FileKind KindOf(absl::string_view path);

// `status` (logfs's, with the errno attached) as RocksDB's: ENOENT
// PathNotFound, ENOSPC NoSpace, ENOTSUP/EOPNOTSUPP NotSupported, anything
// else IOError; each message starts with `context` (the operation and
// path).
rocksdb::IOStatus ToIOStatus(const absl::Status& status, absl::string_view context);

}  // namespace logfs::rocksdb_fs

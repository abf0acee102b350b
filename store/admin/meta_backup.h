// `logfs meta backup` and `logfs meta bootstrap` (README "Backing up meta
// and bootstrapping a replica"): fetch a consistent checkpoint of meta's
// database from any replica that answers (store/client/checkpoint_client.h;
// standbys serve checkpoints too), into a backup directory or into a new
// or wiped replica's data dir.
//
// Thread-safety: the functions share no state; each call blocks.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/env/file_system.h"

namespace logfs::admin {

struct MetaBackupOptions {
  // Meta replicas ("host:port"), tried in order until one serves a whole
  // checkpoint.
  std::vector<std::string> meta_addresses;
  int rpc_timeout_ms = 5000;  // deadline of each call (one chunk of <= 8 MiB)
  env::FileSystem* file_system = env::FileSystem::Default();  // not owned
  // Bootstrap only (required there): opens the database at the directory
  // as meta would (meta::MetadataDb::Open; store/admin sits beside
  // store/meta and may not include it, so src/main passes it), closes it,
  // and returns its applied seq (MetaCounter::kAppliedSeq).
  std::function<absl::StatusOr<uint64_t>(const std::string& dir)> open_applied_seq;
};

// What was fetched.
struct MetaBackupResult {
  std::string meta_address;  // the replica that served it
  uint64_t checkpoint_id = 0;
  uint64_t applied_seq = 0;  // the meta journal's records the copy holds
  uint64_t files = 0;
  uint64_t bytes = 0;
  std::string moved_aside;  // Bootstrap with force: where the old metadb went, or ""
};

// Writes a consistent checkpoint into `dir` (created if missing), which
// then opens as meta's database (a data dir's metadb/). A failed attempt's
// files are removed before the next replica is tried. Errors:
// kInvalidArgument (no address, empty `dir`), kFailedPrecondition (`dir`
// exists and is not an empty directory), the last replica's error
// (kUnavailable when none answered), syscall errors of `dir`.
absl::StatusOr<MetaBackupResult> Backup(const MetaBackupOptions& options, const std::string& dir);

// The name of meta's database inside its data dir (meta_server.cc).
inline constexpr char kMetadataDbDirName[] = "metadb";

// Makes the database of a new or wiped replica from a peer's checkpoint:
// downloads it into <data_dir>/metadb.bootstrap (removed first), checks that
// it opens as a MetadataDb with the applied seq the peer listed, then
// renames it to <data_dir>/metadb and syncs data_dir. If metadb exists it
// refuses (kFailedPrecondition), unless `force`: then the old one is
// renamed to metadb.old-<UTC time> first, never deleted. Even with
// `force` it refuses while another process holds the old database's lock
// (a meta still running on data_dir). A crash between the two renames
// leaves metadb.old-* and metadb.bootstrap, and no metadb: run it again.
// Errors: as Backup, plus kDataLoss when the download does not open or its
// applied seq differs.
absl::StatusOr<MetaBackupResult> Bootstrap(const MetaBackupOptions& options,
                                           const std::string& data_dir, bool force);

}  // namespace logfs::admin

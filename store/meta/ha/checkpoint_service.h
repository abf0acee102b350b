// Serves meta's checkpoints (docs/rpc.md, Checkpoint; logfs.proto
// CheckpointRequest): Checkpoint with id 0 makes a new RocksDB checkpoint
// of this replica under options.dir/<id> (MetadataDb::CreateCheckpoint)
// and lists its files and applied journal seq; with an id it lists that
// one again. ReadCheckpoint answers up to format::kReadBytesMax bytes of
// one of its files as frame data. `logfs meta backup` and `bootstrap`
// (store/admin/meta_backup.h) fetch a checkpoint this way. Every replica
// serves them, standbys included.
//
// A checkpoint hard-links the database's table files, so it pins their
// disk space: the service keeps at most options.checkpoints_max, drops one
// unread for options.idle_expiry (checked at every request and by
// DropIdle), and at Create removes whatever options.dir holds (a previous
// run's). Ids grow from the wall clock at Create (microseconds), so an id
// from before a restart finds nothing instead of another checkpoint.
//
// Requests are validated: a file name must be one the checkpoint lists
// (so nothing outside its directory is ever read), an offset must not be
// past the file's end. Errors: kInvalidArgument (an unparseable request,
// a bad file name, a type it does not serve), kNotFound (an unknown or
// dropped checkpoint, a file it does not list), kOutOfRange (offset past
// the end), kResourceExhausted (checkpoints_max checkpoints all read
// within options.busy_grace: retry later), the database's errors from
// CreateCheckpoint, syscall errors of reads.
//
// Thread-safety: every method may be called from any thread at once. File
// I/O runs without the lock held; a checkpoint dropped during a read
// gives that read kNotFound.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/message_lite.h"
#include "src/env/file_system.h"
#include "store/format/frame.h"
#include "store/format/logfs.pb.h"
#include "store/meta/db/metadata_db.h"
#include "store/rpc/rpc_server.h"

namespace logfs::meta {

// The checkpoints directory inside meta's --data_dir.
inline constexpr char kCheckpointsDir[] = "checkpoints";

struct CheckpointServiceOptions {
  // Owned by the service: its contents are removed at Create. Created
  // (with parents) if missing. Must be on the database's file system, so
  // that checkpoints hard-link instead of copying.
  std::string dir;
  int checkpoints_max = 2;
  // A checkpoint unread (no Checkpoint or ReadCheckpoint naming it) this
  // long is dropped.
  absl::Duration idle_expiry = absl::Minutes(10);
  // A new checkpoint may push out the least recently read one only if it
  // was unread this long; else the request gets kResourceExhausted.
  absl::Duration busy_grace = absl::Seconds(30);
  // Not owned; must outlive the service. Lists, reads and removals go
  // through it (RocksDB writes the checkpoint itself).
  env::FileSystem* file_system = env::FileSystem::Default();
  std::function<absl::Time()> now = [] { return absl::Now(); };
};

class CheckpointService {
 public:
  // A reply: the message and the frame's data section.
  struct Answer {
    std::unique_ptr<google::protobuf::MessageLite> message;
    std::string data;
  };
  using Reply = absl::StatusOr<Answer>;

  // Keeps `db`, which must outlive the service. Errors: those of making or
  // emptying options.dir.
  static absl::StatusOr<std::unique_ptr<CheckpointService>> Create(
      MetadataDb* db, const CheckpointServiceOptions& options);

  // Whether `type` is one Handle serves (kCheckpoint, kReadCheckpoint).
  static bool Serves(format::MessageType type);

  // Serves one request (see the file comment for errors). Never keeps
  // `request`. Blocks for the checkpoint's creation (a memtable flush and
  // a few links) or one read.
  Reply Handle(const format::Frame& request) ABSL_LOCKS_EXCLUDED(mu_);
  // Handle, with its answer sent through `responder` (meta's RpcServer).
  void Respond(const format::Frame& request, const rpc::Responder& responder)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Drops every checkpoint unread for idle_expiry (a timer may call it;
  // Handle calls it too). Removal errors are logged.
  void DropIdle() ABSL_LOCKS_EXCLUDED(mu_);

  // Ids of the checkpoints kept (made, or being made), ascending.
  std::vector<uint64_t> TEST_Ids() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    std::string dir;
    bool ready = false;  // false while being made
    std::map<std::string, uint64_t> file_bytes;
    uint64_t applied_seq = 0;
    absl::Time last_read;
  };

  CheckpointService(MetadataDb* db, const CheckpointServiceOptions& options, uint64_t first_id);

  absl::StatusOr<proto::CheckpointResponse> Make() ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<proto::CheckpointResponse> Describe(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  Reply Read(const proto::CheckpointRequest& request) ABSL_LOCKS_EXCLUDED(mu_);
  // Reserves an id for a new checkpoint, first dropping what must go;
  // appends the directories to remove to `*dropped`.
  absl::StatusOr<uint64_t> ReserveLocked(std::vector<std::string>* dropped)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TakeIdleLocked(absl::Time now, std::vector<std::string>* dropped)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveDirs(const std::vector<std::string>& dirs);  // logs failures

  // Immutable after construction.
  MetadataDb* const db_;
  const CheckpointServiceOptions options_;

  absl::Mutex mu_;
  std::map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_);
};

// Whether `name` may name a file of a checkpoint: not empty, no '/', not
// "." or "..", no NUL.
bool IsCheckpointFileName(const std::string& name);

}  // namespace logfs::meta

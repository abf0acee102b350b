// Everything a FileWriter reaches outside its own memory: the segment
// servers that hold its replicas, meta, a clock and a timer. The writer
// takes it as an interface (LogDevice's EpochRecovery takes its Deps so),
// so that a unit test drives a roll, a recovery or an fsync deadline with
// a fake and no processes (wal/file_writer_test.cc). The production
// implementation, over logfs RPCs, is wal/rpc_writer_deps.cc: the only
// file of the writer that builds requests.
//
// Thread-safe: every method may be called from any thread, concurrently.
// Callbacks run on another thread (a network thread in production), never
// inline from the call that started them, unless a method says otherwise;
// they must not block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "store/format/logfs.pb.h"
#include "store/rpc/rpc_client.h"

namespace logfs::wal {

// A segment as its replicas know it.
struct SegmentRef {
  uint64_t id = 0;
  uint64_t epoch = 0;
};

// One Append of a chunk to one replica.
struct AppendCall {
  SegmentRef segment;
  size_t replica = 0;   // the writer's index of the replica, handed back with the answer
  uint64_t offset = 0;  // segment offset of the chunk's first byte
  uint32_t crc32c = 0;  // of the chunk
  bool sync = false;    // make it durable before answering
};

// A SealSegment at meta: seal the writer's open segment (if any) and, for
// a roll, place the next one.
struct MetaSealCall {
  uint64_t ino = 0;
  uint64_t mount_id = 0;
  uint64_t segment_id = 0;  // 0: no segment is open
  uint64_t sealed_length = 0;
  bool close = false;                    // and release the lease
  bool keep_lease = false;               // seal only: no next segment, the lease stays
  int64_t mtime_ns = 0;                  // with `close`: the file's mtime
  std::vector<uint64_t> failed_servers;  // replicas meta drops from the segment
  // Servers the next segment should not use (slow ones) while others have
  // room; unlike failed_servers, their replicas of the sealed one stay.
  std::vector<uint64_t> avoid_servers;
  uint64_t sealed_file_length = 0;       // the writer's view of the sealed segments
  uint64_t lease_epoch = 0;              // the inode's lease_epoch the writer opened with
  // With segment_id 0: meta may give the file's last segment back open
  // instead of a new one, if shorter than this (SealSegmentRequest.
  // continue_below_bytes); 0: a new one.
  uint64_t continue_below_bytes = 0;
  std::optional<proto::CallId> call;     // makes retries exactly-once
  // With `close` and segment_id 0: the writer changed nothing since it
  // opened the file (SealSegmentRequest.unchanged).
  bool unchanged = false;
};

// Where a replica's answer to an Append or a Sync goes.
class ReplicaReplyHandler {
 public:
  virtual ~ReplicaReplyHandler() = default;
  // Replica `replica` of segment `segment_id` answered an Append
  // (`sync_round` false) or a Sync (true) with its durable length of the
  // segment, or failed (any error: the replica is lost to the writer).
  virtual void OnReplicaReply(uint64_t segment_id, size_t replica, bool sync_round,
                              absl::StatusOr<uint64_t> durable_length) = 0;
};

class WriterDeps {
 public:
  using Done = std::function<void(absl::Status)>;
  using InodeDone = std::function<void(absl::StatusOr<proto::Inode>)>;

  virtual ~WriterDeps() = default;

  // The clock of the fsync deadline.
  virtual absl::Time Now() = 0;
  // Runs `fn` once, after `delay`; never, if the event loop stops first
  // (at shutdown).
  virtual void RunAfter(absl::Duration delay, std::function<void()> fn) = 0;

  // Appends `data` to a replica at `address`; the answer goes to
  // `handler`, which the call keeps alive. With `batch`, the request may
  // be written only at batch->Flush(), which the caller runs once it has
  // dropped its lock (a fake may ignore the batch). The writer calls this
  // with its lock held, so the answer never comes inline.
  virtual void Append(const std::string& address, const AppendCall& call,
                      std::shared_ptr<const std::string> data,
                      const std::shared_ptr<ReplicaReplyHandler>& handler,
                      rpc::CallBatch* batch) = 0;
  // Asks a replica to make everything it has durable; as Append.
  virtual void SyncReplica(const std::string& address, SegmentRef segment, size_t replica,
                           const std::shared_ptr<ReplicaReplyHandler>& handler,
                           rpc::CallBatch* batch) = 0;
  // Seals a replica at `length` (cutting bytes past it); `done` gets OK or
  // the replica's error. May answer inline: the writer holds no lock.
  virtual void SealReplica(const std::string& address, SegmentRef segment, uint64_t length,
                           Done done) = 0;

  // Blocking, each to every address at once, one answer per address in
  // order. Never called with the writer's lock held.
  // Creates the replica of `segment`.
  virtual std::vector<absl::Status> CreateReplicas(const std::vector<std::string>& addresses,
                                                   SegmentRef segment) = 0;
  // Opens each replica of `segment`, sealed at `length`, again for
  // appends at segment.epoch (CreateSegment with reopen_length).
  virtual std::vector<absl::Status> ReopenReplicas(const std::vector<std::string>& addresses,
                                                   SegmentRef segment, uint64_t length) = 0;
  // Each replica's length of the segment (bytes received, durable or not).
  virtual std::vector<absl::StatusOr<uint64_t>> ReplicaLengths(
      const std::vector<std::string>& addresses, uint64_t segment_id) = 0;
  // Blocking: appends `data` at `offset` to one replica and makes it
  // durable (bringing a short survivor up to the seal length).
  virtual absl::Status FillReplica(const std::string& address, SegmentRef segment, uint64_t offset,
                                   std::string data) = 0;

  // Meta. Both ride out a short meta restart: a call whose transport fails
  // is sent again (same call id) within the retry window the
  // implementation was built with, the same for every call; meta's own
  // answer, an error included, is final.
  // Seals at meta; `done` gets the inode with its segments (for a roll,
  // the last one is the new open segment). May answer inline.
  virtual void SealAtMeta(const MetaSealCall& call, InodeDone done) = 0;
  // Blocking: empties the file in meta (truncate(0)).
  virtual absl::Status TruncateAtMeta(uint64_t ino, uint64_t mount_id,
                                      std::optional<proto::CallId> call) = 0;
};

}  // namespace logfs::wal

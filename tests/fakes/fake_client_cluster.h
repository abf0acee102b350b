// An in-memory cluster for unit tests of fsclient::Client: a namespace
// (meta's calls: directories, files, writer leases, pins, xattrs) and
// segment servers (replicas as strings) behind ClientDeps, and behind
// wal::WriterDeps for the writers it makes, so that the client's real
// writers append, sync, roll and seal against it. Replicas answer on a
// thread of the fake's (never inline, as the writer requires), which also
// runs the writers' timers.
//
// Not a model of meta's rules beyond what the client relies on: one
// writer lease per file (EBUSY for another mount), kinds inherited or
// given at create, segments placed on three servers "s1".."s3" with an
// ack quorum of 2. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fsclient/client_deps.h"
#include "wal/writer_deps.h"

namespace logfs::testing {

class FakeClientCluster final : public fsclient::ClientDeps, public wal::WriterDeps {
 public:
  static constexpr uint64_t kMountId = 7;
  static constexpr uint64_t kOtherMount = 99;

  FakeClientCluster();
  ~FakeClientCluster() override;

  // ---------------------------------------------------- test controls
  // The writer lease of `ino` goes to another mount (0: nobody).
  void SetLeaseHolder(uint64_t ino, uint64_t mount_id);
  uint64_t LeaseHolder(uint64_t ino);
  // Gives `ino` an open segment whose three replicas hold `bytes[i]`,
  // durable (written by another mount that is still writing, or died).
  void AddOpenSegmentWrittenElsewhere(uint64_t ino, const std::vector<std::string>& bytes);
  // The inode as meta has it (sealed segments, lengths).
  proto::Inode InodeOf(uint64_t ino);
  // ReadSegments calls by mode: how many had to go past the caches.
  int cached_only_reads();
  int remote_reads();
  // Pins (Open without Release) held on `ino`.
  int pins(uint64_t ino);

  // ------------------------------------------------------- ClientDeps
  absl::StatusOr<uint64_t> NewMount(const std::string& host) override;
  absl::Status MountHeartbeat(const proto::MountHeartbeatRequest& request) override;
  // Resumes kMountId's session, call ids after `last_call_seq`.
  void ResumeMount(uint64_t mount_id, uint64_t last_call_seq, uint32_t cache_lease_ms) override;
  uint64_t mount_id() const override;
  uint64_t last_call_seq() const override;
  absl::StatusOr<proto::Attr> Lookup(uint64_t parent, const std::string& name,
                                     const proto::CacheSession& cache) override;
  absl::StatusOr<proto::Attr> GetAttr(uint64_t ino, const proto::CacheSession& cache) override;
  // Answered by `watch_cache` (set it before the client's CacheCoherence
  // starts); kUnimplemented without.
  absl::StatusOr<proto::WatchCacheResponse> WatchCache(const proto::WatchCacheRequest& request,
                                                       absl::Duration timeout) override;
  uint32_t cache_lease_ms() const override { return answered_cache_lease_ms; }
  std::function<absl::StatusOr<proto::WatchCacheResponse>(const proto::WatchCacheRequest&,
                                                          absl::Duration)>
      watch_cache;
  uint32_t answered_cache_lease_ms = 0;  // what NewMount answered
  absl::StatusOr<proto::Inode> GetInode(uint64_t ino) override;
  absl::StatusOr<proto::Attr> SetAttr(proto::SetAttrRequest request) override;
  absl::StatusOr<proto::Attr> Create(proto::CreateRequest request) override;
  absl::StatusOr<proto::Inode> CreateForWrite(proto::CreateRequest request) override;
  absl::Status Unlink(proto::UnlinkRequest request) override;
  absl::Status Rename(proto::RenameRequest request) override;
  absl::StatusOr<proto::Attr> Link(proto::LinkRequest request) override;
  absl::StatusOr<std::string> Readlink(uint64_t ino) override;
  absl::StatusOr<proto::ReaddirResponse> Readdir(uint64_t ino,
                                                 const std::string& start_after) override;
  absl::StatusOr<proto::StatFsResponse> StatFs() override;
  absl::StatusOr<std::string> GetXattr(uint64_t ino, const std::string& name,
                                       const proto::CacheSession& cache) override;
  absl::StatusOr<std::vector<std::string>> ListXattr(uint64_t ino) override;
  absl::Status SetXattr(proto::SetXattrRequest request) override;
  absl::Status RemoveXattr(uint64_t ino, const std::string& name) override;
  absl::StatusOr<proto::Inode> Open(uint64_t ino) override;
  absl::Status Release(uint64_t ino) override;
  absl::StatusOr<proto::Inode> OpenWrite(uint64_t ino, bool truncate) override;
  // As meta's: whole sealed segments of the source appended to the end of
  // a file whose lease this mount holds and whose last segment is sealed.
  absl::StatusOr<proto::Inode> CopyRange(proto::CopyRangeRequest request) override;
  int copy_range_calls();
  uint64_t AckedLengthOfOpenSegment(const proto::Segment& open, uint32_t quorum) override;
  absl::Status ReadSegments(cache::BlockCache* block_cache, uint64_t ino,
                            const std::vector<proto::Segment>& segments, uint64_t length,
                            uint64_t offset, uint64_t size, cache::ReadMode mode,
                            cache::ReadBuffer* out) override;
  std::shared_ptr<wal::FileWriter> NewWriter(wal::FileWriterOptions options,
                                             proto::Inode inode) override;
  proto::CallId NextCallId() override;
  cache::SegmentReaderStats ReaderStats() const override { return {}; }
  size_t LocalServers() const override { return 0; }
  void TrimReplicas() override {}
  void Shutdown() override;

  // ------------------------------------------------------- WriterDeps
  absl::Time Now() override { return absl::Now(); }
  void RunAfter(absl::Duration delay, std::function<void()> fn) override;
  void Append(const std::string& address, const wal::AppendCall& call,
              std::shared_ptr<const std::string> data,
              const std::shared_ptr<wal::ReplicaReplyHandler>& handler,
              rpc::CallBatch* batch) override;
  void SyncReplica(const std::string& address, wal::SegmentRef segment, size_t replica,
                   const std::shared_ptr<wal::ReplicaReplyHandler>& handler,
                   rpc::CallBatch* batch) override;
  void SealReplica(const std::string& address, wal::SegmentRef segment, uint64_t length,
                   Done done) override;
  std::vector<absl::Status> CreateReplicas(const std::vector<std::string>& addresses,
                                           wal::SegmentRef segment) override;
  std::vector<absl::Status> ReopenReplicas(const std::vector<std::string>& addresses,
                                           wal::SegmentRef segment, uint64_t length) override;
  std::vector<absl::StatusOr<uint64_t>> ReplicaLengths(const std::vector<std::string>& addresses,
                                                       uint64_t segment_id) override;
  absl::Status FillReplica(const std::string& address, wal::SegmentRef segment, uint64_t offset,
                           std::string data) override;
  void SealAtMeta(const wal::MetaSealCall& call, InodeDone done) override;
  absl::Status TruncateAtMeta(uint64_t ino, uint64_t mount_id,
                              std::optional<proto::CallId> call) override;

 private:
  struct Replica {
    std::string bytes;
    uint64_t durable = 0;  // as a segment server: the bytes synced
    bool sealed = false;
  };
  struct Entry {
    proto::Inode inode;
    std::map<std::string, uint64_t> children;  // directories
    std::map<std::string, std::string> xattrs;
    uint64_t lease = 0;  // the writing mount, 0: none
    int pins = 0;
  };

  absl::StatusOr<Entry*> FindLocked(uint64_t ino);
  absl::StatusOr<proto::Attr> CreateLocked(const proto::CreateRequest& request);
  // The inode as meta answers it: attr.size the sealed length, the flags.
  proto::Inode ReplyLocked(const Entry& entry) const;
  absl::StatusOr<proto::Inode> OpenWriteLocked(uint64_t ino, uint64_t mount_id);
  void AddSegmentLocked(proto::Inode& inode);
  void Post(std::function<void()> answer);
  void RunNetwork();

  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopped_ = false;
  std::deque<std::function<void()>> answers_;
  std::multimap<absl::Time, std::function<void()>> timers_;  // by when due
  std::map<uint64_t, Entry> inodes_;
  std::map<std::pair<uint64_t, std::string>, Replica> replicas_;  // (segment id, address)
  uint64_t next_ino_ = 2;
  uint64_t next_segment_id_ = 100;
  uint64_t next_call_ = 1;
  bool connected_ = false;  // NewMount was called
  int cached_only_reads_ = 0;
  int remote_reads_ = 0;
  int copy_range_calls_ = 0;
  std::thread network_;  // last: starts once the rest is built
};

}  // namespace logfs::testing

// What a Client asks of the cluster, behind one interface, as
// wal/writer_deps.h is the writer's: meta's calls, the acked length of an
// open segment from its replicas, reads of sealed and open segments, and
// new writers. The Client's own logic (live sizes, leases and the writer
// table, opens of sealed block files, reads' hand-offs, xattrs) then runs
// in unit tests against a fake (fsclient/client_test.cc); production uses
// RpcClientDeps (rpc_client_deps.cc) over MetaClient, SegdClient and the
// SegmentReader.
//
// Thread-safe: the Client calls from its callers' threads and its pools.
// Every call but the housekeeping ones may block on the cluster (a meta
// round trip, a replica), so it must come from a thread allowed to wait
// on the io threads (executors.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cache/block_cache.h"
#include "cache/file_read.h"
#include "cache/segment_reader.h"
#include "store/format/logfs.pb.h"
#include "wal/file_writer.h"

namespace logfs::fsclient {

class Executors;
struct ClientOptions;

class ClientDeps {
 public:
  virtual ~ClientDeps() = default;

  // ------------------------------------------------------------- meta
  // As client::MetaClient's calls of the same names (errors there): every
  // call but NewMount and MountHeartbeat rides out a meta restart within
  // ClientOptions::meta_retry.
  virtual absl::StatusOr<uint64_t> NewMount(const std::string& host) = 0;
  virtual absl::Status MountHeartbeat(const proto::MountHeartbeatRequest& request) = 0;
  virtual void ResumeMount(uint64_t mount_id, uint64_t last_call_seq, uint32_t cache_lease_ms) = 0;
  // This session's mount id (0 before NewMount).
  virtual uint64_t mount_id() const = 0;
  virtual uint64_t last_call_seq() const = 0;
  // `cache`: the mount's cache session (empty: none), CacheCoherence.
  virtual absl::StatusOr<proto::Attr> Lookup(uint64_t parent, const std::string& name,
                                             const proto::CacheSession& cache) = 0;
  virtual absl::StatusOr<proto::Attr> GetAttr(uint64_t ino, const proto::CacheSession& cache) = 0;
  virtual absl::StatusOr<proto::WatchCacheResponse> WatchCache(
      const proto::WatchCacheRequest& request, absl::Duration timeout) = 0;
  // From NewMount's answer: 0 when meta sends no invalidations.
  virtual uint32_t cache_lease_ms() const = 0;
  virtual absl::StatusOr<proto::Inode> GetInode(uint64_t ino) = 0;
  virtual absl::StatusOr<proto::Attr> SetAttr(proto::SetAttrRequest request) = 0;
  virtual absl::StatusOr<proto::Attr> Create(proto::CreateRequest request) = 0;
  virtual absl::StatusOr<proto::Inode> CreateForWrite(proto::CreateRequest request) = 0;
  virtual absl::Status Unlink(proto::UnlinkRequest request) = 0;
  virtual absl::Status Rename(proto::RenameRequest request) = 0;
  virtual absl::StatusOr<proto::Attr> Link(proto::LinkRequest request) = 0;
  virtual absl::StatusOr<std::string> Readlink(uint64_t ino) = 0;
  virtual absl::StatusOr<proto::ReaddirResponse> Readdir(uint64_t ino,
                                                         const std::string& start_after) = 0;
  virtual absl::StatusOr<proto::StatFsResponse> StatFs() = 0;
  virtual absl::StatusOr<std::string> GetXattr(uint64_t ino, const std::string& name,
                                               const proto::CacheSession& cache) = 0;
  virtual absl::StatusOr<std::vector<std::string>> ListXattr(uint64_t ino) = 0;
  virtual absl::Status SetXattr(proto::SetXattrRequest request) = 0;
  virtual absl::Status RemoveXattr(uint64_t ino, const std::string& name) = 0;
  virtual absl::StatusOr<proto::Inode> Open(uint64_t ino) = 0;
  virtual absl::Status Release(uint64_t ino) = 0;
  virtual absl::StatusOr<proto::Inode> OpenWrite(uint64_t ino, bool truncate) = 0;
  // Meta's CopyRange (client::MetaClient::CopyRange): the destination
  // inode after it. Its errors are meta's refusals, but kUnavailable and
  // kDeadlineExceeded: meta may or may not have applied it.
  virtual absl::StatusOr<proto::Inode> CopyRange(proto::CopyRangeRequest request) = 0;

  // -------------------------------------------------- segment servers
  // What the ack quorum (`quorum` of its replicas) holds of `open`, the
  // open segment of a file another session writes
  // (client::AckedLengthOfOpenSegment): 0 when too few replicas answer.
  virtual uint64_t AckedLengthOfOpenSegment(const proto::Segment& open, uint32_t quorum) = 0;
  // Bytes [offset, offset + size) of the file whose readable segments and
  // length these are, through `block_cache` (null: none), as
  // cache::ReadFile; with mode kCachedOnly, cache::RemoteReadNeeded() where
  // it would wait for a segment server.
  virtual absl::Status ReadSegments(cache::BlockCache* block_cache, uint64_t ino,
                                    const std::vector<proto::Segment>& segments, uint64_t length,
                                    uint64_t offset, uint64_t size, cache::ReadMode mode,
                                    cache::ReadBuffer* out) = 0;
  // The writer of the file meta opened for this session as `inode` (its
  // lease held): wal::FileWriter::Create over these servers and meta.
  virtual std::shared_ptr<wal::FileWriter> NewWriter(wal::FileWriterOptions options,
                                                     proto::Inode inode) = 0;
  // A fresh id for one change (wal::FileWriterOptions::next_call_id).
  virtual proto::CallId NextCallId() = 0;

  // ------------------------------------------------------ housekeeping
  // The read path's counters (user.logfs.stats, /metrics).
  virtual cache::SegmentReaderStats ReaderStats() const = 0;
  // Segment servers on this host reached over their Unix socket.
  virtual size_t LocalServers() const = 0;
  // Closes replicas their servers deleted, and those idle past their
  // limit (the heartbeat's pass, once a heartbeat interval).
  virtual void TrimReplicas() = 0;
  // Closes every connection: calls in flight and later fail (kUnavailable).
  virtual void Shutdown() = 0;
};

// The production deps: connections on `executors`' io threads,
// authenticated with options.cluster_key (else the process's key).
std::unique_ptr<ClientDeps> NewRpcClientDeps(const ClientOptions& options, Executors& executors);

}  // namespace logfs::fsclient

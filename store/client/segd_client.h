// The typed client of the segment-server service (docs/rpc.md "Segment
// server"): one method per RPC, to any server by address, over one shared
// rpc::ClientPool (so calls to a server multiplex on its connection). Each
// call makes one attempt with the caller's timeout; nothing is retried
// here (the writer and meta decide what a failed replica means).
//
// Errors: kUnavailable (cannot connect, connection lost, pool shut down),
// kDeadlineExceeded (no answer within the timeout), kInternal (an answer
// that does not parse), or the server's answer: kNotFound (no replica),
// kFailedPrecondition (sealed, or fenced by a higher epoch), kOutOfRange,
// kDataLoss (a chunk failed its CRC), kResourceExhausted (disk full).
//
// Thread-safe. Blocking calls and fan-outs must not run on an io thread of
// the pool's io_context; asynchronous calls may, and their callbacks run
// on one, exactly once, never inline.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "store/client/local_routes.h"
#include "store/format/logfs.pb.h"
#include "store/format/replica_fds.h"
#include "store/rpc/client_pool.h"
#include "store/rpc/rpc_client.h"

namespace logfs::client {

// A Read's answer: the replica's state and the bytes (fewer than asked at
// the end of the replica).
struct ReadReply {
  proto::ReadResponse response;
  std::string data;
};

// One CopySegment of a fan-out: the target server and what it copies.
struct CopyCall {
  std::string target_address;
  proto::CopySegmentRequest request;
};

class SegdClient {
 public:
  // The replica's state after the call (Append, Sync, Seal, CreateSegment
  // and SegmentInfo all answer with it).
  using InfoCallback = std::function<void(absl::StatusOr<proto::SegmentInfoResponse>)>;
  using InfoResults = std::vector<absl::StatusOr<proto::SegmentInfoResponse>>;

  // `pool` must outlive the client.
  explicit SegdClient(rpc::ClientPool& pool) : pool_(pool) {}

  // With `routes` (null: none, the default), every blocking call and
  // fan-out first learns the route to its servers (LocalRoutes::Learn: a
  // server on this host is then called over its Unix socket). The
  // asynchronous calls use what is known: a writer's appends follow its
  // CreateSegmentEach (or a recovery's SegmentInfoEach) to the same
  // servers. Kept; must outlive the client. Call before any call.
  void set_local_routes(LocalRoutes* routes) { routes_ = routes; }

  SegdClient(const SegdClient&) = delete;
  SegdClient& operator=(const SegdClient&) = delete;

  // The io_context the calls complete on (for timers of their users).
  asio::io_context& io() { return pool_.io(); }

  // ------------------------------------------------------------ blocking
  // An empty replica at `epoch` (idempotent for the same epoch).
  // `meta_epoch`: CreateSegmentRequest.meta_epoch (0 unless meta sends it).
  absl::StatusOr<proto::SegmentInfoResponse> CreateSegment(const std::string& address,
                                                           uint64_t segment_id, uint64_t epoch,
                                                           absl::Duration timeout,
                                                           uint64_t meta_epoch = 0);
  // Fences the replica at `epoch` (CreateSegment with a higher epoch: the
  // server rejects appends of older epochs from then on) and returns its
  // state after the fence. A sealed replica is not fenced (the server
  // answers kFailedPrecondition): its SegmentInfo is returned instead. A
  // refusal of `meta_epoch` (format::IsMetaEpochFenced) is returned as is.
  absl::StatusOr<proto::SegmentInfoResponse> Fence(const std::string& address, uint64_t segment_id,
                                                   uint64_t epoch, absl::Duration timeout,
                                                   uint64_t meta_epoch = 0);
  // `data` at `request.offset()` (with its crc32c in the request).
  absl::StatusOr<proto::SegmentInfoResponse> Append(const std::string& address,
                                                    const proto::AppendRequest& request,
                                                    std::string data, absl::Duration timeout);
  // Seals the replica at `request.length()` (docs/rpc.md "Seal").
  absl::StatusOr<proto::SegmentInfoResponse> Seal(const std::string& address,
                                                  const proto::SealRequest& request,
                                                  absl::Duration timeout);
  absl::StatusOr<proto::SegmentInfoResponse> SegmentInfo(const std::string& address,
                                                         uint64_t segment_id,
                                                         absl::Duration timeout);
  // Checks nothing of the data: the caller compares its crc32c.
  absl::StatusOr<ReadReply> Read(const std::string& address, const proto::ReadRequest& request,
                                 absl::Duration timeout);
  // The server's counters, id and incarnation.
  absl::StatusOr<proto::ServerStatsResponse> ServerStats(const std::string& address,
                                                         absl::Duration timeout);
  // Where the server's short-circuit socket is, and its host's boot id.
  absl::StatusOr<proto::ShortCircuitInfoResponse> ShortCircuitInfo(const std::string& address,
                                                                   absl::Duration timeout);

  // -------------------------------------------------------- asynchronous
  // The writer's fan-out: `data` is shared by the replicas' calls (kept
  // alive, never copied, until sent). With a `batch`, the request leaves at
  // the batch's Flush (rpc::CallBatch).
  void AsyncAppend(const std::string& address, const proto::AppendRequest& request,
                   std::shared_ptr<const std::string> data, absl::Duration timeout,
                   InfoCallback done, rpc::CallBatch* batch = nullptr);
  void AsyncSync(const std::string& address, const proto::SyncRequest& request,
                 absl::Duration timeout, InfoCallback done, rpc::CallBatch* batch = nullptr);
  void AsyncSeal(const std::string& address, const proto::SealRequest& request,
                 absl::Duration timeout, InfoCallback done);

  // ------------------------------------ fan-out: blocking, all at once
  // One result per address, in order, each call with `timeout`.
  InfoResults CreateSegmentEach(const std::vector<std::string>& addresses, uint64_t segment_id,
                                uint64_t epoch, absl::Duration timeout);
  InfoResults SealEach(const std::vector<std::string>& addresses, const proto::SealRequest& request,
                       absl::Duration timeout);
  // CreateSegment with reopen_length on each (store/segd/replica_store.h
  // Reopen); kFailedPrecondition from a server that answered but kept the
  // replica sealed (one from before reopen_length).
  InfoResults ReopenSegmentEach(const std::vector<std::string>& addresses, uint64_t segment_id,
                                uint64_t epoch, uint64_t length, absl::Duration timeout);
  InfoResults SegmentInfoEach(const std::vector<std::string>& addresses, uint64_t segment_id,
                              absl::Duration timeout);
  // One status per copy, in order: OK once the target holds the sealed
  // copy (docs/rpc.md "CopySegment").
  std::vector<absl::Status> CopySegmentEach(const std::vector<CopyCall>& copies,
                                            absl::Duration timeout);

 private:
  // LocalRoutes::Learn of `address` (or each of `addresses`), with routes_.
  void Route(const std::string& address, absl::Duration timeout);
  void Route(const std::vector<std::string>& addresses, absl::Duration timeout);

  rpc::ClientPool& pool_;
  LocalRoutes* routes_ = nullptr;
};

// ShortCircuitOpen over the server's Unix socket at `socket_path`: the
// read-only descriptors of a sealed replica's data and .crc files, and its
// sealed length. Connecting and receiving the answer each wait at most
// `timeout`. Errors: the server's answer (kNotFound, kFailedPrecondition
// when not sealed), kUnavailable (nobody listens, end of stream, past the
// deadline), other errno statuses of the socket, kInternal for a reply
// without both descriptors. Blocks; thread-safe.
absl::StatusOr<format::ReplicaFds> ShortCircuitOpen(const std::string& socket_path,
                                                    uint64_t segment_id, absl::Duration timeout);

}  // namespace logfs::client

// What meta needs from segment servers: a replica's lengths and sealing it.
// Behind an interface so namespace tests fake the servers
// (STYLE.md §5, the network seam); RpcSegmentServerApi is the real one.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <asio.hpp>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "store/format/logfs.pb.h"
#include "store/meta/namespace/rereplication_task.h"
#include "store/client/segd_client.h"
#include "store/rpc/client_pool.h"

namespace logfs::meta {

class SegmentServerApi {
 public:
  virtual ~SegmentServerApi() = default;

  // The replica's state on the server at `address`. kNotFound (no such
  // replica), kUnavailable / kDeadlineExceeded (server unreachable).
  // Blocks; thread-safe.
  virtual absl::StatusOr<proto::SegmentInfoResponse> SegmentInfo(const std::string& address,
                                                                 uint64_t segment_id) = 0;

  // Seals the replica at `length` (docs/rpc.md "Seal"). kOutOfRange when the
  // replica is shorter, kFailedPrecondition when sealed at another length.
  // Blocks; thread-safe.
  virtual absl::StatusOr<proto::SegmentInfoResponse> Seal(const std::string& address,
                                                          uint64_t segment_id, uint64_t epoch,
                                                          uint64_t length) = 0;

  // Fences the replica at `epoch` (CreateSegment with a higher epoch: the
  // server persists it and rejects appends of older epochs from then on)
  // and returns its state after the fence. A sealed replica is not fenced;
  // its state is returned. Errors as SegmentInfo. The default (for fakes)
  // only reads the state.
  virtual absl::StatusOr<proto::SegmentInfoResponse> Fence(const std::string& address,
                                                           uint64_t segment_id,
                                                           uint64_t epoch) {
    return SegmentInfo(address, segment_id);
  }

  // Asks every task's target server to copy its segment (CopySegment: the
  // target drops any local replica and copies the sealed one afresh), all
  // at once, each call with `timeout`; blocks until every one answered.
  // One status per task, in order. The default (for fakes) copies nothing:
  // kUnimplemented.
  virtual std::vector<absl::Status> CopySegments(const std::vector<RereplicationTask>& tasks,
                                                 absl::Duration timeout) {
    return std::vector<absl::Status>(tasks.size(), absl::UnimplementedError("no copies"));
  }

  // Who serves at `address` (ServerStats: its server id and incarnation),
  // for telling a second process claiming a server id from a restart.
  // Waits at most kIdentifyTimeout. Errors as SegmentInfo. The default (for fakes): kUnavailable, nobody.
  virtual absl::StatusOr<proto::ServerStatsResponse> Identify(const std::string& address) {
    return absl::UnavailableError("no servers");
  }
};

// The longest Identify waits for an answer.
inline constexpr absl::Duration kIdentifyTimeout = absl::Seconds(1);

// Calls segment servers through a client::SegdClient over a ClientPool of
// its own. Blocking calls must not run on an io thread of `io`; meta gives
// this object an io_context of its own.
class RpcSegmentServerApi : public SegmentServerApi {
 public:
  // `io` must outlive this object and be run by some thread.
  RpcSegmentServerApi(asio::io_context& io, absl::Duration timeout);
  ~RpcSegmentServerApi() override;  // calls Shutdown()

  // Fails calls in flight and every later call with kUnavailable.
  void Shutdown();

  // The meta epoch every later command to a segment server carries
  // (CreateSegment of Fence, Seal, CopySegment: docs/meta_ha.md
  // "Fencing"); 0 (the default) for a lone meta. A server refuses a
  // command below the highest epoch it has seen with kFailedPrecondition
  // (format::IsMetaEpochFenced). Thread-safe; meta sets it at promotion.
  void SetMetaEpoch(uint64_t meta_epoch) { meta_epoch_.store(meta_epoch); }
  uint64_t meta_epoch() const { return meta_epoch_.load(); }

  absl::StatusOr<proto::SegmentInfoResponse> SegmentInfo(const std::string& address,
                                                         uint64_t segment_id) override;
  absl::StatusOr<proto::SegmentInfoResponse> Seal(const std::string& address,
                                                  uint64_t segment_id, uint64_t epoch,
                                                  uint64_t length) override;
  absl::StatusOr<proto::SegmentInfoResponse> Fence(const std::string& address,
                                                   uint64_t segment_id, uint64_t epoch) override;

  absl::StatusOr<proto::ServerStatsResponse> Identify(const std::string& address) override;

  // kUnavailable after Shutdown().
  std::vector<absl::Status> CopySegments(const std::vector<RereplicationTask>& tasks,
                                         absl::Duration timeout) override;

 private:
  // Immutable after construction.
  const absl::Duration timeout_;

  // Internally synchronized. After Shutdown, the pool hands out clients
  // that are shut down, so a call racing it fails too.
  rpc::ClientPool pool_;
  client::SegdClient segd_;
  std::atomic<bool> shut_down_{false};
  std::atomic<uint64_t> meta_epoch_{0};
};

}  // namespace logfs::meta

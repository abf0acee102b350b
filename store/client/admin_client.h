// Blocking calls for the admin tools (`logfs status`, `logfs fsck`,
// `logfs recover`, `logfs bench`): a MetaClient and a SegdClient without
// retries (each call one attempt of `timeout`, its error as it came),
// with the io_context and thread they need, and the page loops of meta's
// listings. The typed clients do the calls (store/client/meta_client.h,
// segd_client.h); this class only owns their plumbing, so that a tool needs
// no asio.
//
// Thread-safety: any thread may call; calls block (at most the timeout
// each).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include <asio.hpp>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "store/client/meta_client.h"
#include "store/client/segd_client.h"
#include "store/format/logfs.pb.h"
#include "store/rpc/client_pool.h"

namespace logfs::client {

// Pages fetched at most by ForEachFile and ListServers (bounds a run on a
// huge namespace).
inline constexpr size_t kAdminPagesMax = 1 << 20;

class AdminClient {
 public:
  // `meta_address`: "host:port", or meta replicas "h1:p,h2:p,..." (the
  // active answers; store/client/meta_endpoints.h).
  AdminClient(std::string meta_address, absl::Duration timeout);
  ~AdminClient();

  // Every registered server, by id, gathered from meta's ListServers
  // pages, with the first page's re-replication progress. Errors: kUnavailable / kDeadlineExceeded
  // (meta unreachable).
  absl::StatusOr<proto::ListServersResponse> ListServers();
  absl::StatusOr<proto::StatFsResponse> StatFs() { return meta_.StatFs(); }
  // What each listed meta replica says it is (MetaState), in list order:
  // its address and answer or error. All are asked at once (the call takes
  // at most one timeout), and the client's later calls go to the one that
  // says it is active.
  struct ReplicaState {
    std::string address;
    absl::StatusOr<proto::MetaStateResponse> state;
  };
  std::vector<ReplicaState> MetaStates();
  // Calls fn(file) for every regular file meta lists (ListSegments pages
  // in inode order). Errors as ListServers.
  absl::Status ForEachFile(const std::function<void(const proto::Inode&)>& fn);
  // Revokes the writer lease of `ino` and recovers its open segment
  // (meta's RecoverLease). Errors: as ListServers, ENOENT, kUnavailable
  // when too few replicas answer.
  absl::StatusOr<proto::Inode> RecoverLease(uint64_t ino) { return meta_.RecoverLease(ino); }
  // `logfs clone`: meta's Clone (a metadata-only copy; EXDEV for a file
  // being written, EEXIST, ...).
  absl::StatusOr<proto::Attr> Clone(proto::CloneRequest request) {
    return meta_.Clone(std::move(request));
  }
  // `logfs snapshot`: meta's Snapshot (create, delete, list).
  absl::StatusOr<proto::SnapshotResponse> Snapshot(proto::SnapshotRequest request) {
    return meta_.Snapshot(std::move(request));
  }
  // `logfs fsck`: meta's check of its share records (and their repair).
  absl::StatusOr<proto::CheckSharesResponse> CheckShares(bool repair) {
    return meta_.CheckShares(repair);
  }
  // One replica's state on the segment server at `address`.
  absl::StatusOr<proto::SegmentInfoResponse> SegmentInfo(const std::string& address,
                                                         uint64_t segment_id) {
    return segd_.SegmentInfo(address, segment_id, timeout_);
  }
  // The counters of the segment server at `address` (segd ServerStats).
  absl::StatusOr<proto::ServerStatsResponse> ServerStats(const std::string& address) {
    return segd_.ServerStats(address, timeout_);
  }

 private:
  static MetaClientOptions MetaOptions(absl::Duration timeout);

  const absl::Duration timeout_;
  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  rpc::ClientPool clients_;
  MetaClient meta_;
  SegdClient segd_;
  std::thread io_thread_;
};

}  // namespace logfs::client

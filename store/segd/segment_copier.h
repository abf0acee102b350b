// The segment server's half of re-replication (docs/rpc.md "CopySegment"):
// makes a sealed local replica of a segment by reading it from another
// segment server in Read-sized chunks, verifying each chunk's crc32c,
// appending it locally, and sealing (which fdatasyncs) at the wanted length.
//
// Copies run one at a time on a worker thread of their own, never on an io
// thread; the reads use a private io_context and thread, because
// client::SegdClient's blocking calls must not run on their own io threads.
//
// Thread-safety: Enqueue may be called from any thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include <asio.hpp>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "store/client/segd_client.h"
#include "store/rpc/client_pool.h"
#include "store/format/logfs.pb.h"
#include "store/segd/replica_store.h"

namespace logfs::segd {

// Copies queued at most; more are refused with kResourceExhausted.
inline constexpr size_t kCopyQueueMax = 64;

struct SegmentCopierOptions {
  int rpc_timeout_ms = 5000;  // per Read call to a source server
};

class SegmentCopier {
 public:
  // The sealed local replica, or why no source could be copied.
  using Callback = std::function<void(absl::StatusOr<ReplicaInfo>)>;

  // Keeps `store`, which must outlive the copier. Starts its threads.
  SegmentCopier(ReplicaStore* store, SegmentCopierOptions options);
  ~SegmentCopier();  // Stop()

  // Queues one copy; `done` runs exactly once, on the worker thread, or
  // inline with kResourceExhausted (queue full) or kUnavailable (stopped).
  // Result: OK with the sealed replica (also when it was already here,
  // sealed at `length`); otherwise the last source's error — kDataLoss
  // (crc mismatch), kFailedPrecondition (source not sealed at `length`),
  // kUnavailable / kDeadlineExceeded, or a local store error. A failed copy
  // leaves no local replica behind.
  void Enqueue(proto::CopySegmentRequest request, Callback done) ABSL_LOCKS_EXCLUDED(mu_);

  // Fails queued copies with kUnavailable, cancels the running one's reads
  // and joins the threads. Idempotent; call from one thread at a time.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Job {
    proto::CopySegmentRequest request;
    Callback done;
  };
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  bool Stopping() ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<ReplicaInfo> Copy(const proto::CopySegmentRequest& request);
  absl::StatusOr<ReplicaInfo> CopyFrom(const std::string& source,
                                       const proto::CopySegmentRequest& request);

  // Immutable after construction.
  ReplicaStore* const store_;
  const SegmentCopierOptions options_;

  // The private io_context for reads from sources, and its thread.
  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  rpc::ClientPool clients_;
  client::SegdClient segd_{clients_};

  absl::Mutex mu_;
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;

  // Started by the constructor once every other member exists.
  std::thread io_thread_;
  std::thread worker_;
};

}  // namespace logfs::segd

// Fetches a checkpoint of meta's database (store/meta/ha/checkpoint_service.h)
// into a local directory, for `logfs meta backup` and `bootstrap`
// (store/admin/meta_backup.h): asks the meta at an address for a new
// checkpoint (Checkpoint, id 0), reads each file it lists in chunks of
// format::kReadBytesMax (ReadCheckpoint), writes it, fdatasyncs it,
// checks its size against the listing, and fsyncs the directory. Each
// call makes one attempt of `timeout`, without retries.
//
// Thread-safety: any thread may call; calls block.
#pragma once

#include <asio.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/env/file_system.h"
#include "store/format/logfs.pb.h"
#include "store/rpc/client_pool.h"

namespace logfs::client {

class CheckpointClient {
 public:
  // `file_system` (not owned, must outlive the client) receives the files.
  explicit CheckpointClient(absl::Duration timeout,
                            env::FileSystem* file_system = env::FileSystem::Default());
  ~CheckpointClient();
  CheckpointClient(const CheckpointClient&) = delete;
  CheckpointClient& operator=(const CheckpointClient&) = delete;

  // Downloads a new checkpoint of the meta at `address` ("host:port")
  // into `dir`, which must exist and should be empty (a file of the same
  // name is overwritten). Returns the checkpoint's listing (id, files,
  // applied seq). On error, `dir` may hold some files: the caller removes
  // them. Errors: kUnavailable / kDeadlineExceeded (meta unreachable or
  // slow), meta's answer (kNotFound once meta dropped the checkpoint,
  // kResourceExhausted when it is busy), kDataLoss (a listed name that is
  // not a plain file name, a file that ends early or runs long), syscall
  // errors of writes (kResourceExhausted for ENOSPC).
  absl::StatusOr<proto::CheckpointResponse> Fetch(const std::string& address,
                                                  const std::string& dir);

 private:
  absl::Status FetchFile(rpc::RpcClient& meta, uint64_t checkpoint_id,
                         const proto::CheckpointFile& file, const std::string& path);

  const absl::Duration timeout_;
  env::FileSystem* const file_system_;
  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  rpc::ClientPool clients_;
  std::thread io_thread_;
};

}  // namespace logfs::client

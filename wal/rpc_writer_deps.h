// The production WriterDeps (wal/writer_deps.h): logfs RPCs to the segment
// servers (through a ClientPool) and to meta, asio timers on the pool's
// io_context, the system clock.
#pragma once

#include <memory>

#include "absl/time/time.h"
#include "store/client/meta_retry.h"
#include "store/rpc/client_pool.h"
#include "store/rpc/rpc_client.h"
#include "wal/writer_deps.h"

namespace logfs::wal {

struct RpcWriterDepsOptions {
  absl::Duration replica_timeout = absl::Seconds(10);  // one replica call
  client::MetaRetryOptions meta_retry;                 // every meta call
};

// `meta` and `pool` must outlive the result (and every call it started).
std::shared_ptr<WriterDeps> NewRpcWriterDeps(RpcWriterDepsOptions options,
                                             std::shared_ptr<rpc::RpcClient> meta,
                                             rpc::ClientPool* pool);

}  // namespace logfs::wal

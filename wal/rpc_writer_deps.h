// The production WriterDeps (wal/writer_deps.h): the typed clients of the
// segment servers and of meta (store/client/), asio timers on the segment
// client's io_context, the system clock. Meta calls follow the MetaClient's
// own retry policy (its timeout and retry window), the same for every
// call of the mount. Thread-safe, as WriterDeps requires.
#pragma once

#include <memory>

#include "absl/time/time.h"
#include "store/client/meta_client.h"
#include "store/client/segd_client.h"
#include "wal/writer_deps.h"

namespace logfs::wal {

struct RpcWriterDepsOptions {
  absl::Duration replica_timeout = absl::Seconds(10);  // one replica call
};

// `meta` and `segd` must outlive the result (and every call it started).
std::shared_ptr<WriterDeps> NewRpcWriterDeps(RpcWriterDepsOptions options, client::MetaClient* meta,
                                             client::SegdClient* segd);

}  // namespace logfs::wal

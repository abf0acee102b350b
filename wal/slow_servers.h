// The segment servers that writers of one process (a mount) found slow
// (wal/replica_lag.h), each until a time: while listed, every segment those
// writers place asks meta to put it elsewhere (SealSegmentRequest
// avoid_servers), as HBase's ExcludeDatanodeManager keeps a slow datanode
// out of every new WAL stream of a region server for a while (HBASE-26347).
// Shared by the writers through FileWriterOptions::slow_servers.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace logfs::wal {

class SlowServers {
 public:
  // Lists `server_id` until `until` (a later time extends it).
  void Add(uint64_t server_id, absl::Time until) ABSL_LOCKS_EXCLUDED(mu_);
  // The servers listed at `now`, by id; forgets the expired ones.
  std::vector<uint64_t> Current(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Mutex mu_;
  std::map<uint64_t, absl::Time> until_ ABSL_GUARDED_BY(mu_);
};

}  // namespace logfs::wal

// One planned copy of a sealed segment to a new server (re-replication,
// docs/rpc.md "Re-replication"): planned by Namespace::PlanRereplication,
// executed by the target segment server (CopySegment), recorded by
// Namespace::CommitReplica. Plain values; copyable.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace logfs::meta {

struct RereplicationTask {
  uint64_t ino = 0;
  uint64_t segment_id = 0;
  uint64_t epoch = 0;
  uint64_t length = 0;  // sealed length, bytes
  // "host:port" of the segment's replicas on live servers, in list order.
  std::vector<std::string> source_addresses;
  uint64_t target_server_id = 0;
  std::string target_address;
  // A copy that restores the spread of a segment with its full replication
  // whose replicas share a failure domain they need not share
  // (format::NeedlesslySharedDomain): once it is recorded, one replica in
  // the shared domain leaves the segment (Namespace::CommitReplica), as
  // HDFS moves mis-replicated blocks. False: a missing replica.
  bool spread = false;
};

struct RereplicationPlan {
  std::vector<RereplicationTask> tasks;
  uint64_t next_ino = 0;  // where the next plan starts; 0: the scan is complete
};

}  // namespace logfs::meta

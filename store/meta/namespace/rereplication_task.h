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

// What a plan saw of the inodes it scanned, whatever its room for tasks:
// summed over the plans of one scan of the namespace (from ino 0 until
// next_ino is 0 again), the cluster's segment counts for /metrics.
struct SegmentCensus {
  uint64_t open_segments = 0;              // not sealed yet (written to)
  uint64_t under_replicated_segments = 0;  // sealed, fewer live replicas than wanted
  uint64_t under_replicated_bytes = 0;     // their lengths
  uint64_t missing_copies = 0;             // live replicas they lack in all
  uint64_t lost_segments = 0;              // sealed with no live replica at all
  uint64_t misplaced_segments = 0;         // replicas needlessly share a failure domain

  SegmentCensus& operator+=(const SegmentCensus& other) {
    open_segments += other.open_segments;
    under_replicated_segments += other.under_replicated_segments;
    under_replicated_bytes += other.under_replicated_bytes;
    missing_copies += other.missing_copies;
    lost_segments += other.lost_segments;
    misplaced_segments += other.misplaced_segments;
    return *this;
  }
};

struct RereplicationPlan {
  std::vector<RereplicationTask> tasks;
  uint64_t next_ino = 0;  // where the next plan starts; 0: the scan is complete
  SegmentCensus census;   // of the inodes this plan scanned
};

}  // namespace logfs::meta

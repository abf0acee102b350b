// `logfs fsck`: checks that every sealed segment has its file's
// replication in good replicas, and that they agree. A replica is good when
// its server is live in meta and answers SegmentInfo sealed, not corrupt,
// at the segment's recorded length. Open segments belong to their writer:
// their replicas are not asked. A sealed segment is reported when it has
// fewer good replicas than wanted or a replica answers with anything
// else; any segment, open ones included, is listed as misplaced when its
// replicas share a failure domain they need not share.
//
// Thread-safety: a plain function; it blocks on RPCs (timeout each).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "store/format/logfs.pb.h"

namespace logfs::admin {

struct FsckOptions {
  std::string meta_address;  // "host:port"
  int rpc_timeout_ms = 5000;  // per call
  // Called on RunFsck's thread after each segment (open ones included)
  // with the segments done and the total, and once with 0 of the total
  // before the first. The total comes from a first pass over meta's
  // segment lists that keeps nothing (memory stays one page, whatever the
  // namespace's size); segments added since raise it as they are met.
  // Null: no progress and no counting pass. `logfs fsck` feeds a
  // util::ProgressMeter with it.
  std::function<void(uint64_t checked, uint64_t total)> progress;
  // Have meta rewrite its share records that disagree with the files
  // (`logfs fsck --repair_shares`); they are checked either way.
  bool repair_shares = false;
};

struct ReplicaCheck {
  uint64_t server_id = 0;
  std::string address;
  bool server_live = false;  // in meta's registry
  absl::Status status;       // of SegmentInfo (not asked when the server is dead)
  proto::SegmentInfoResponse info;
  bool good = false;
};

struct SegmentCheck {
  uint64_t ino = 0;
  uint64_t segment_id = 0;
  uint64_t length = 0;  // recorded in meta
  uint32_t wanted = 0;  // the file's replication
  uint32_t good = 0;
  std::vector<ReplicaCheck> replicas;
};

// A segment (sealed or open) whose replicas share a failure domain they
// need not share: placement's rule (store/format/failure_domain.h) over the live
// servers' domains would put them in distinct domains at `level` levels
// ("rack/host": 1 = racks). As HDFS fsck's "mis-replicated blocks": listed
// and counted, but the data is whole, so it does not make fsck fail;
// re-replication does not move replicas that are good.
struct MisplacedSegment {
  uint64_t ino = 0;
  uint64_t segment_id = 0;
  size_t level = 0;
  std::string shared_domain;  // the domain prefix two or more replicas share
  size_t live_domains = 0;    // distinct live domains at `level`
};

struct FsckReport {
  uint64_t files = 0;
  uint64_t segments = 0;
  uint64_t open_segments = 0;          // replicas not asked; spread checked
  std::vector<SegmentCheck> problems;  // under-replicated or disagreeing
  std::vector<MisplacedSegment> misplaced;
  // Meta's check of its share records (proto::CheckSharesRequest); not OK
  // when meta could not answer it (logfs 0.1): then nothing is known.
  absl::Status shares_status;
  proto::CheckSharesResponse shares;
};

// No problem segment, and no share record disagreeing with the files
// (or every one repaired).
bool Healthy(const FsckReport& report);

// The domain prefix that replicas in `replica_domains` share although
// `live_domains` (every live, healthy server's domain) has a distinct one
// for each of them at the level placement spreads over; "" when they are
// spread as placement would. Sets *level and *distinct (distinct live
// domains at that level). format::NeedlesslySharedDomain, the rule meta's
// re-replication also moves replicas by. Pure; thread-safe.
std::string NeedlesslySharedDomain(const std::vector<std::string>& replica_domains,
                                   const std::vector<std::string>& live_domains, size_t* level,
                                   size_t* distinct);

// What the spread check needs of meta's registry (ListServers): each
// registered server's failure domain, and those of the live servers with
// a healthy disk (where placement may put replicas).
struct ServerDomains {
  std::map<uint64_t, std::string> domain;  // by server id
  std::vector<std::string> live_domains;
};
ServerDomains ReadServerDomains(const proto::ListServersResponse& servers);

// The segments of `file`, open ones included, whose replicas share a failure domain
// they need not share (NeedlesslySharedDomain over `servers`), in the
// file's order; replicas on servers not in `servers` are left out. Pure;
// thread-safe.
std::vector<MisplacedSegment> MisplacedSegmentsOf(const ServerDomains& servers,
                                                  const proto::Inode& file);

// Errors: meta unreachable (kUnavailable, kDeadlineExceeded).
absl::StatusOr<FsckReport> RunFsck(const FsckOptions& options);

// One line per problem segment with every replica's state, then a summary
// line.
std::string FormatFsck(const FsckReport& report);

}  // namespace logfs::admin

// Meta's state of one segment server's replica reports (docs/rpc.md
// "Replica reports"): which report it asked for, the pages received so
// far, a complete report waiting to be reconciled, the replicas a
// reconcile found missing once (confirmed by the next report), and the
// strays to hand out for deletion. Plain values, kept in memory only
// (Namespace::ServerState); guarded by the Namespace's mutex.
#pragma once

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace logfs::meta {

struct ReportedReplicaState {
  uint64_t length = 0;
  bool sealed = false;
  bool corrupt = false;
};

struct ReplicaReportState {
  using Replicas = absl::flat_hash_map<uint64_t, ReportedReplicaState>;  // by segment id

  uint64_t asked_id = 0;  // the last report id asked for (ids count up from 1)
  int64_t asked_ns = 0;   // when; 0: never
  bool wanted = true;     // ask at the next heartbeat (registration, meta start)
  Replicas building;      // pages of report asked_id so far
  uint64_t done_id = 0;   // a complete report waiting for a reconcile; 0: none
  uint64_t completed_id = 0;  // the last report whose final page arrived
  int64_t last_page_ns = 0;   // when a page of report asked_id last arrived
  Replicas done;
  // (ino, segment id) of sealed replicas listed on the server that the
  // last reconcile found missing or corrupt in its report. Dropped only
  // if a report asked at or after missing_confirm_from misses them too:
  // that report's snapshot was taken after the scan that found them, so a
  // replica made meanwhile (a copy, a new segment) is in it.
  std::set<std::pair<uint64_t, uint64_t>> missing;
  uint64_t missing_confirm_from = 0;
  std::vector<uint64_t> strays;  // to hand out with the next heartbeat
};

}  // namespace logfs::meta

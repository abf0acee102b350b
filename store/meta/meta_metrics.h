// Process-wide counters of this meta server: every namespace or cluster
// call by message type (a latency histogram, errors by status code) and
// re-replication copies, in relaxed atomics; and the collector that adds
// them and the cluster's server table to /metrics at scrape time.
//
// Thread-safe; monotonic from process start.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "src/metrics/family_list.h"
#include "store/format/message_type.h"

namespace logfs::meta {

class Namespace;

// One call of `type` answered after `elapsed` with `status`.
void RecordMetaCall(format::MessageType type, absl::Duration elapsed, const absl::Status& status);

// Re-replication copies handed to segment servers (`bytes`: the segments'
// lengths) and how many of them failed.
void RecordRereplication(uint64_t tasks, uint64_t bytes, uint64_t failed);

// Adds the calls, re-replication counters, whether this replica serves
// (`ns` non-null: the active's namespace), and then live/dead servers from
// `ns` (its server table, paged under its lock: scrape time only).
void CollectMetaMetrics(Namespace* ns, metrics::FamilyList& out);

}  // namespace logfs::meta

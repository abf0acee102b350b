// Process-wide counters of this meta server: every namespace or cluster
// call by message type (a latency histogram, errors by status code), in
// relaxed atomics; and the collector that adds them, re-replication
// progress and the cluster's server table to /metrics at scrape time.
//
// Thread-safe; monotonic from process start.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "src/metrics/family_list.h"
#include "store/format/message_type.h"
#include "store/meta/coherence/mount_caches.h"
#include "store/meta/rereplicator.h"

namespace logfs::meta {

// One call of `type` answered after `elapsed` with `status`.
void RecordMetaCall(format::MessageType type, absl::Duration elapsed, const absl::Status& status);

// Adds the calls, whether this replica serves (`ns` non-null: the
// active's namespace), then, when serving, re-replication from `progress`
// (the Rereplicator's, so /metrics and `logfs status` show one count) and
// live/dead servers from `ns` (its server table, paged under its lock:
// scrape time only), and the mount cache sessions from `caches` (null:
// invalidations off).
void CollectMetaMetrics(Namespace* ns, const Rereplicator::Progress* progress,
                        const MountCaches::Stats* caches, metrics::FamilyList& out);

}  // namespace logfs::meta

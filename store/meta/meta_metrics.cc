#include "store/meta/meta_metrics.h"

#include <array>
#include <atomic>
#include <string>

#include "absl/strings/ascii.h"
#include "src/metrics/histogram.h"
#include "store/meta/namespace/namespace.h"

namespace logfs::meta {
namespace {

constexpr int kTypes = static_cast<int>(format::MessageType::kMetaTypeEnd);
constexpr int kCodes = 17;  // absl::StatusCode 0..16

// The op label: the message type's enumerator without its k, in
// snake_case ("get_attr"); message_type.h has no names, so they are here.
constexpr std::array<const char*, kTypes> kTypeNames = {
    "invalid",      "register_server", "heartbeat",     "lookup",
    "get_attr",     "set_attr",        "create",        "unlink",
    "rename",       "readlink",        "readdir",       "set_xattr",
    "get_xattr",    "list_xattr",      "remove_xattr",  "stat_fs",
    "open",         "release",         "open_write",    "seal_segment",
    "new_mount",    "mount_heartbeat", "get_inode",     "report_bad_replica",
    "list_servers", "list_segments",   "recover_lease", "meta_state",
    "checkpoint",   "read_checkpoint", "watch_cache",   "link",
    "clone",        "snapshot",        "copy_range",    "check_shares"};
static_assert(static_cast<int>(format::MessageType::kCheckShares) == kTypes - 1,
              "kTypeNames lists every meta message type");

struct CallCounters {
  metrics::LatencyHistogram latency;
  std::array<std::atomic<uint64_t>, kCodes> errors{};
};

struct MetaCounters {
  std::array<CallCounters, kTypes> calls;
};

MetaCounters& Counters() {
  static auto* counters = new MetaCounters();  // never destroyed: handlers may run at exit
  return *counters;
}

std::string CodeName(int code) {
  return absl::AsciiStrToLower(absl::StatusCodeToString(static_cast<absl::StatusCode>(code)));
}

}  // namespace

void RecordMetaCall(format::MessageType type, absl::Duration elapsed, const absl::Status& status) {
  const int i = static_cast<int>(type);
  if (i <= 0 || i >= kTypes) return;  // refused before any work
  CallCounters& c = Counters().calls[i];
  c.latency.Observe(elapsed);
  const int code = static_cast<int>(status.code());
  if (!status.ok() && code < kCodes) c.errors[code].fetch_add(1, std::memory_order_relaxed);
}

void CollectMetaMetrics(Namespace* ns, const Rereplicator::Progress* progress,
                        const MountCaches::Stats* caches, metrics::FamilyList& out) {
  const MetaCounters& c = Counters();
  for (int i = 1; i < kTypes; ++i) {
    const metrics::Histogram::Snapshot latency = c.calls[i].latency.Read();
    if (latency.count == 0) continue;
    out.AddHistogram("logfs_meta_call_duration_seconds",
                     "Calls meta handled, by type, from decode to reply.", latency, 1e-9,
                     {{"op", kTypeNames[i]}});
    for (int code = 1; code < kCodes; ++code) {
      const uint64_t n = c.calls[i].errors[code].load(std::memory_order_relaxed);
      if (n == 0) continue;
      out.AddCounter("logfs_meta_call_errors_total",
                     "Calls answered with an error, by type and code.", static_cast<double>(n),
                     {{"op", kTypeNames[i]}, {"code", CodeName(code)}});
    }
  }
  out.AddGauge("logfs_meta_serving", "1 if this replica answers namespace calls (the active).",
               ns != nullptr ? 1 : 0);
  if (ns == nullptr) return;
  if (caches != nullptr) {
    out.AddGauge("logfs_meta_cache_sessions", "Mount cache sessions (mounts polling for invalidations).",
                 static_cast<double>(caches->sessions));
    out.AddCounter("logfs_meta_cache_invalidations_total",
                   "Cache invalidations sent to mounts (docs/coherence.md).",
                   static_cast<double>(caches->invalidations_sent));
    out.AddCounter("logfs_meta_cache_resets_total",
                   "Mount cache sessions reset: too many invalidations unacknowledged.",
                   static_cast<double>(caches->resets));
    out.AddCounter("logfs_meta_cache_lapsed_sessions_total",
                   "Mount cache sessions that stopped polling while owing invalidations (changes "
                   "waited for their cache lease to run out).",
                   static_cast<double>(caches->lapsed_waits));
  }
  if (progress != nullptr) {
    out.AddCounter("logfs_meta_rereplication_copies_total",
                   "Segment copies re-replication made and recorded (this replica, since it "
                   "became active).",
                   static_cast<double>(progress->copied_segments));
    out.AddCounter("logfs_meta_rereplication_bytes_total", "Bytes of those copies.",
                   static_cast<double>(progress->copied_bytes));
    out.AddCounter("logfs_meta_rereplication_failures_total",
                   "Copies that failed (retried by a later pass).",
                   static_cast<double>(progress->failed_copies));
    out.AddGauge("logfs_meta_rereplication_in_flight_copies",
                 "Copies of the current pass sent and not yet answered.",
                 static_cast<double>(progress->in_flight_segments));
    out.AddGauge("logfs_meta_rereplication_in_flight_bytes", "Bytes of those copies.",
                 static_cast<double>(progress->in_flight_bytes));
    if (progress->scans > 0) {
      const SegmentCensus& c = progress->census;
      const char* help =
          "Segments by state, as of the last complete re-replication scan (a no_live_replica "
          "segment is under_replicated too; a misplaced one, whose replicas needlessly share a "
          "failure domain as fsck's MISPLACED, may be open or under_replicated).";
      out.AddGauge("logfs_meta_segments", help, static_cast<double>(c.open_segments),
                   {{"state", "open"}});
      out.AddGauge("logfs_meta_segments", "", static_cast<double>(c.under_replicated_segments),
                   {{"state", "under_replicated"}});
      out.AddGauge("logfs_meta_segments", "", static_cast<double>(c.lost_segments),
                   {{"state", "no_live_replica"}});
      out.AddGauge("logfs_meta_segments", "", static_cast<double>(c.misplaced_segments),
                   {{"state", "misplaced"}});
      out.AddGauge("logfs_meta_under_replicated_bytes",
                   "Bytes of the under-replicated segments (last complete scan).",
                   static_cast<double>(c.under_replicated_bytes));
      out.AddGauge("logfs_meta_rereplication_backlog_copies",
                   "Live replicas the under-replicated segments lack (last complete scan).",
                   static_cast<double>(c.missing_copies));
    }
    out.AddCounter("logfs_meta_rereplication_scans_total",
                   "Complete scans of the namespace by re-replication.",
                   static_cast<double>(progress->scans));
  }
  uint64_t live = 0, dead = 0, capacity = 0, free = 0;
  uint64_t start = 0;
  for (int page = 0; page < 1000; ++page) {  // bounded: 1000 pages of servers
    auto servers = ns->ListServers(start);
    if (!servers.ok()) return;
    for (const auto& s : servers->servers()) {
      (s.live() ? live : dead) += 1;
      if (s.live()) capacity += s.capacity_bytes(), free += s.free_bytes();
    }
    start = servers->next_server_id();
    if (start == 0) break;
  }
  out.AddGauge("logfs_meta_servers", "Registered segment servers, by state.", live,
               {{"state", "live"}});
  out.AddGauge("logfs_meta_servers", "", dead, {{"state", "dead"}});
  out.AddGauge("logfs_meta_capacity_bytes", "Capacity the live segment servers last reported.",
               capacity);
  out.AddGauge("logfs_meta_free_bytes", "Free space the live segment servers last reported.", free);
  const Namespace::Gauges g = ns->TableGauges();
  out.AddGauge("logfs_meta_inodes", "Inodes in the namespace.", g.inodes);
  out.AddGauge("logfs_meta_mounts", "Mounts heard from and not yet expired.", g.mounts);
  out.AddGauge("logfs_meta_leases", "Writer leases held (files open for write).", g.leases);
  out.AddGauge("logfs_meta_lapsed_leases",
               "Writer leases whose mount went silent, awaiting lease recovery.", g.lapsed_leases);
  out.AddCounter("logfs_meta_commit_groups_total",
                 "Group commits: synced RocksDB writes (and journal appends) of namespace changes.",
                 g.commit_groups);
  out.AddCounter("logfs_meta_committed_changes_total",
                 "Namespace changes made durable; over logfs_meta_commit_groups_total, the mean "
                 "group size.",
                 g.committed_changes);
}

}  // namespace logfs::meta

// Client::CollectMetrics: the client's /metrics families (its writers and
// its read path). Counter names map one to one onto user.logfs.stats keys
// where both exist (same atomics).
#include "fsclient/client.h"
#include "wal/writer_counters.h"

namespace logfs::fsclient {
namespace {

void CollectWriterMetrics(metrics::FamilyList& out) {
  const wal::WriterCounters& c = wal::GlobalWriterCounters();
  auto counter = [&out](const char* name, const char* help, const std::atomic<uint64_t>& v) {
    out.AddCounter(name, help, static_cast<double>(v.load(std::memory_order_relaxed)));
  };
  counter("logfs_wal_appends_total",
          "Chunks the writers appended (one Append fan-out to every replica each).", c.appends);
  counter("logfs_wal_append_bytes_total", "Bytes in those chunks (counted once, not per replica).",
          c.append_bytes);
  counter("logfs_wal_syncs_total", "Sync calls of the writers (fsync, fdatasync, close).", c.syncs);
  counter("logfs_wal_sync_rounds_total", "Sync RPC rounds sent to replicas.", c.sync_rounds);
  counter("logfs_wal_sync_groups_total",
          "Acked-length advances that released waiting syncs (group commits).", c.sync_groups);
  counter("logfs_wal_synced_waiters_total", "Syncs released by those group commits.",
          c.synced_waiters);
  counter("logfs_wal_quorum_synced_appends_total",
          "Eager appends only the first ack quorum was asked to sync.", c.quorum_synced_appends);
  counter("logfs_wal_rolls_total", "Segments the writers rolled (full, slow replica, truncate).",
          c.rolls);
  counter("logfs_wal_slow_replica_rolls_total", "Rolls away from a replica found slow.",
          c.slow_replica_rolls);
  counter("logfs_wal_recoveries_total", "Replica failures the writers recovered from by rolling.",
          c.recoveries);
  counter("logfs_wal_fsync_timeouts_total",
          "Writers failed because no ack quorum was reached within --fsync_timeout_ms.",
          c.fsync_timeouts);
  out.AddHistogram("logfs_wal_sync_group_waiters", "Syncs released per group commit.",
                   c.sync_group_waiters.Read(), 1);
}

}  // namespace

void Client::CollectMetrics(metrics::FamilyList& out) const {
  CollectWriterMetrics(out);
  const CacheCoherence::Stats cache = coherence_->stats();
  out.AddCounter("logfs_mount_cache_polls_total", "Answers to the mount's cache poll from meta.",
                 static_cast<double>(cache.polls));
  out.AddCounter("logfs_mount_cache_invalidations_total",
                 "Invalidations of names and attributes meta sent (docs/coherence.md).",
                 static_cast<double>(cache.invalidations));
  out.AddCounter("logfs_mount_cache_drops_total",
                 "Everything the kernel was given dropped: a new session, or the cache lease ran "
                 "out (meta unreachable).",
                 static_cast<double>(cache.drops));
  out.AddGauge("logfs_mount_cache_trusted",
               "1 while the mount holds a cache lease (the kernel keeps names and attributes long).",
               cache.trusted ? 1 : 0);
  const cache::SegmentReaderStats r = deps_->ReaderStats();
  out.AddCounter("logfs_read_short_circuit_total",
                 "Segment reads served from a local replica file.", r.short_circuit_reads);
  out.AddCounter("logfs_read_short_circuit_bytes_total", "Bytes of those reads.",
                 r.short_circuit_bytes);
  out.AddCounter("logfs_read_short_circuit_failures_total",
                 "Local replicas found unusable (the read went over TCP).",
                 r.short_circuit_failures);
  out.AddCounter("logfs_read_remote_total", "Segment reads over TCP from a segment server.",
                 r.remote_reads);
  out.AddCounter("logfs_replica_cache_hits_total", "Short-circuit replica lookups found open.",
                 r.replica_cache.hits);
  out.AddCounter("logfs_replica_cache_misses_total",
                 "Short-circuit replica lookups that opened the replica.", r.replica_cache.opens);
  const cache::ReplicaCacheStats& rc = r.replica_cache;
  const char* closed = "Replicas closed, by the eviction-map limit they went past.";
  out.AddCounter("logfs_replica_cache_evictions_total", closed, rc.evictions_by_count,
                 {{"reason", "count"}});
  out.AddCounter("logfs_replica_cache_evictions_total", closed, rc.evictions_by_age,
                 {{"reason", "age"}});
  out.AddCounter("logfs_replica_cache_invalidations_total",
                 "Replicas dropped after a read through them failed.", rc.invalidations);
  out.AddCounter("logfs_replica_cache_deletions_total",
                 "Replicas dropped because their server deleted their files.", rc.deletions);
  out.AddCounter("logfs_replica_cache_mmaps_total", "Replicas mapped for reading.", rc.mmaps);
  out.AddCounter("logfs_replica_cache_mmap_failures_total",
                 "Replicas that could not be mapped (read with pread).", rc.mmap_failures);
  const char* unmapped = "Evictable replicas unmapped, by the mmapped-map limit they went past.";
  out.AddCounter("logfs_replica_cache_unmaps_total", unmapped, rc.unmaps_by_count,
                 {{"reason", "count"}});
  out.AddCounter("logfs_replica_cache_unmaps_total", unmapped, rc.unmaps_by_bytes,
                 {{"reason", "bytes"}});
  out.AddCounter("logfs_replica_cache_unmaps_total", unmapped, rc.unmaps_by_age,
                 {{"reason", "age"}});
  out.AddGauge("logfs_replica_cache_open_replicas", "Replicas held open now.", rc.open_replicas);
  out.AddGauge("logfs_replica_cache_evictable_replicas",
               "Of them, referenced by no read (in an eviction map).", rc.evictable);
  out.AddGauge("logfs_replica_cache_mmapped_replicas", "Replicas mapped now.", rc.mmapped);
  out.AddGauge("logfs_replica_cache_mmapped_bytes", "Bytes of replicas mapped now.",
               rc.mmapped_bytes);
  out.AddGauge("logfs_replica_cache_evictable_mmapped_replicas",
               "Of the mapped replicas, those referenced by no read.", rc.evictable_mmapped);
  if (block_cache_ == nullptr) return;
  const cache::BlockCacheStats b = block_cache_->stats();
  out.AddCounter("logfs_block_cache_hits_total", "Block cache lookups found.", b.hits);
  out.AddCounter("logfs_block_cache_misses_total", "Block cache lookups not found.", b.misses);
  out.AddCounter("logfs_block_cache_inserts_total", "Blocks inserted.", b.inserts);
  out.AddCounter("logfs_block_cache_evictions_total", "Blocks evicted.", b.evictions);
  out.AddGauge("logfs_block_cache_blocks", "Blocks cached now.", b.blocks);
  out.AddGauge("logfs_block_cache_bytes", "Bytes the cached blocks are charged.", b.bytes);
  out.AddGauge("logfs_block_cache_reserved_bytes", "The block cache's chunk pool footprint.",
               b.reserved_bytes);
}

}  // namespace logfs::fsclient

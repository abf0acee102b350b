// How far each replica of a writer's open segment trails the ack quorum,
// and whether one trails it persistently ("slow"). A slow replica does not
// delay an fsync (the quorum does not wait for it), but it holds the
// writer's re-send tail, and if it is one of the replicas asked to sync at
// once (FileWriter::EagerSync) it is; so the writer rolls away from it, as
// HBase's fan-out WAL excludes a datanode whose packets are slow and rolls
// the log (HBASE-26347: StreamSlowMonitor, ExcludeDatanodeManager).
//
// A lag sample is the time from when the quorum acked an offset of the
// segment to when this replica made that offset durable. Each time the
// acked length passes a replica, the replica gets one pending offset (the
// acked length then, with that time); when it reaches it, that is one
// sample, and if it is still behind, its next pending offset is the acked
// length as it last advanced (with that time: a lower bound of the lag),
// or the next one. One stall is about one sample, however many acks it
// held up.
//
// The rule: a replica is slow once at least `slow_samples` of its samples,
// each longer than `slow_lag`, fall within the last `window`, and at least
// twice as many as any other replica of the segment has in that window.
// One late ack (a page-cache flush, a scheduling hiccup) is not enough; a
// disk that keeps taking 20-50 ms, or a process stopped in bursts, is. The
// comparison keeps a loaded machine, on which every replica trails now and
// then (each is the last of three in turn), from finding them all slow:
// only the one that trails while the others keep up stands out. Samples
// count for the segment only: a roll starts a new monitor.
//
// A value type: not thread-safe; FileWriter keeps it under its mu_.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "wal/replica_set.h"

namespace logfs::wal {

struct ReplicaLagOptions {
  // A sample longer than this is a slow one. Zero: never slow (off).
  absl::Duration slow_lag = absl::Milliseconds(20);
  int slow_samples = 4;                      // this many slow samples ...
  absl::Duration window = absl::Seconds(2);  // ... within this long: slow
};

class ReplicaLagMonitor {
 public:
  // No segment: nothing is ever slow.
  ReplicaLagMonitor() = default;
  ReplicaLagMonitor(size_t replicas, ReplicaLagOptions options);

  // Replica `i` has made the segment's first `durable` bytes durable (as
  // the writer heard at `now`). Call before OnQuorumAcked for the same
  // answer.
  void OnDurable(size_t i, uint64_t durable, absl::Time now);
  // The quorum's acked length of the segment is now `acked` (larger than
  // before), at `now`, with the durable lengths in `replicas` (whose
  // failed replicas are not watched). Allocates nothing.
  void OnQuorumAcked(uint64_t acked, absl::Time now, const ReplicaSet& replicas);

  // The first replica found slow, if any (it stays slow).
  std::optional<size_t> slow() const { return slow_; }
  // Replica `i`'s last lag sample (zero before its first).
  absl::Duration last_lag(size_t i) const { return replicas_.at(i).last_lag; }
  // Replica `i`'s longest lag sample on this segment.
  absl::Duration worst_lag(size_t i) const { return replicas_.at(i).worst_lag; }

 private:
  struct Replica {
    uint64_t durable = 0;
    std::optional<uint64_t> pending;  // a quorum-acked offset it has not reached
    absl::Time pending_since;         // when the quorum acked it
    absl::Duration last_lag;
    absl::Duration worst_lag;
    std::deque<absl::Time> slow_at;  // its slow samples within the window (bounded)
  };

  void Sample(size_t i, absl::Time now);
  // Replica `i`'s slow samples since `since`, forgetting older ones.
  size_t SlowSince(size_t i, absl::Time since);

  ReplicaLagOptions options_;
  std::vector<Replica> replicas_;
  uint64_t acked_ = 0;
  absl::Time acked_at_;
  std::optional<size_t> slow_;
};

}  // namespace logfs::wal

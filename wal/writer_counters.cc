#include "wal/writer_counters.h"

#include "absl/strings/str_cat.h"

namespace logfs::wal {

WriterCounters& GlobalWriterCounters() {
  static WriterCounters counters;
  return counters;
}

std::string FormatWriterCounters() {
  const WriterCounters& c = GlobalWriterCounters();
  return absl::StrCat(
      "appends=", c.appends.load(), " append_bytes=", c.append_bytes.load(),
      " syncs=", c.syncs.load(), " sync_rounds=", c.sync_rounds.load(),
      " sync_groups=", c.sync_groups.load(), " synced_waiters=", c.synced_waiters.load(),
      " quorum_synced_appends=", c.quorum_synced_appends.load(), " rolls=", c.rolls.load(),
      " slow_replica_rolls=", c.slow_replica_rolls.load(), "\n");
}

}  // namespace logfs::wal

// Writers of this process with bytes sent to replicas and not yet acked
// (FileWriter::busy_): zero means an append about to be sent is alone in
// the mount (FileWriter::EagerSync). Relaxed atomics: a stale value only
// changes how many replicas sync an append at once, never durability.
#pragma once

#include <atomic>

namespace logfs::wal::internal {

inline std::atomic<int> busy_writers{0};

}  // namespace logfs::wal::internal

// A sealed replica opened for reading: its data and CRC files as
// descriptors, and its sealed length. A segment server hands these to a
// mount on the same host over its Unix socket (short-circuit reads,
// docs/rpc.md "Short-circuit reads"); the mount's replica cache keeps them.
// Owns both descriptors; movable, not copyable; not thread-safe to mutate.
#pragma once

#include <cstdint>

#include "src/util/unique_fd.h"

namespace logfs::format {

struct ReplicaFds {
  util::UniqueFd data;  // <id>.seg, read-only
  util::UniqueFd crc;   // <id>.crc, read-only
  uint64_t length = 0;  // sealed length, bytes
};

}  // namespace logfs::format

#include "wal/slow_servers.h"

#include <algorithm>

namespace logfs::wal {

void SlowServers::Add(uint64_t server_id, absl::Time until) {
  absl::MutexLock lock(&mu_);
  absl::Time& at = until_[server_id];
  at = std::max(at, until);
}

std::vector<uint64_t> SlowServers::Current(absl::Time now) {
  absl::MutexLock lock(&mu_);
  std::vector<uint64_t> out;
  for (auto it = until_.begin(); it != until_.end();) {
    if (it->second <= now) {
      it = until_.erase(it);
    } else {
      out.push_back(it->first);
      ++it;
    }
  }
  return out;
}

}  // namespace logfs::wal

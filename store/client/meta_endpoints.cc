#include "store/client/meta_endpoints.h"

#include <glog/logging.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "store/format/error_codec.h"
#include "store/rpc/endpoint.h"

namespace logfs::client {

MetaEndpoints::MetaEndpoints(std::vector<std::string> addresses, Connect connect)
    : connect_(std::move(connect)), addresses_(std::move(addresses)) {
  CHECK(!addresses_.empty()) << "no meta address";
  current_ = connect_(addresses_[0]);
  handed_out_.push_back(current_);
}

std::shared_ptr<MetaEndpoints> MetaEndpoints::Single(std::shared_ptr<rpc::RpcClient> meta) {
  CHECK(meta != nullptr);
  std::string address = meta->address();
  auto single = std::make_shared<MetaEndpoints>(std::vector<std::string>{address},
                                                [meta](const std::string&) { return meta; });
  single->fixed_ = true;
  return single;
}

std::shared_ptr<MetaEndpoints> MetaEndpoints::OverPool(rpc::ClientPool& pool,
                                                       const std::string& list) {
  auto addresses = ParseList(list);
  return std::make_shared<MetaEndpoints>(
      addresses.ok() ? std::move(*addresses) : std::vector<std::string>{list},
      [&pool](const std::string& address) { return pool.Get(address); });
}

absl::StatusOr<std::vector<std::string>> MetaEndpoints::ParseList(const std::string& list) {
  std::vector<std::string> addresses;
  for (absl::string_view entry : absl::StrSplit(list, ',')) {
    if (entry.empty()) continue;
    auto endpoint = rpc::SplitHostPort(std::string(entry));
    if (!endpoint.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad meta address '", entry,
                       "' (want host:port[,host:port...]): ", endpoint.status().message()));
    }
    if (std::find(addresses.begin(), addresses.end(), entry) == addresses.end()) {
      addresses.emplace_back(entry);
    }
  }
  if (addresses.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no meta address in '", list, "' (want host:port[,host:port...])"));
  }
  return addresses;
}

std::shared_ptr<rpc::RpcClient> MetaEndpoints::Current() {
  absl::MutexLock lock(&mu_);
  return current_;
}

void MetaEndpoints::MoveToLocked(size_t index) {
  current_index_ = index;
  // Connecting only makes the object; it dials on the first call.
  current_ = connect_(addresses_[index]);
  if (shut_down_) current_->Shutdown();
  if (std::find(handed_out_.begin(), handed_out_.end(), current_) == handed_out_.end()) {
    handed_out_.push_back(current_);
  }
}

bool MetaEndpoints::MoveTo(const std::string& address) {
  if (fixed_) return false;
  absl::MutexLock lock(&mu_);
  auto it = std::find(addresses_.begin(), addresses_.end(), address);
  if (it == addresses_.end()) return false;
  const auto index = static_cast<size_t>(it - addresses_.begin());
  if (index != current_index_) MoveToLocked(index);
  return true;
}

bool MetaEndpoints::Failed(const std::shared_ptr<rpc::RpcClient>& used,
                           const absl::Status& status) {
  std::string active;
  const bool refused = format::IsNotActiveMeta(status, &active);
  const bool transport = !refused && !rpc::IsServerAnswer(status) &&
                         (absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status));
  if (fixed_ || (!refused && !transport)) return false;
  absl::MutexLock lock(&mu_);
  if (used != current_ || (addresses_.size() == 1 && active.empty())) return false;
  if (refused && !active.empty()) {
    auto it = std::find(addresses_.begin(), addresses_.end(), active);
    if (it == addresses_.end()) {
      LOG(INFO) << "meta at " << used->address() << " names the active " << active
                << ", which --meta does not list: using it";
      addresses_.push_back(active);
      it = addresses_.end() - 1;
    }
    const auto index = static_cast<size_t>(it - addresses_.begin());
    if (index == current_index_) return false;  // it names itself: not active yet
    MoveToLocked(index);
    return true;
  }
  const absl::Time now = absl::Now();
  if (transport) failed_at_[addresses_[current_index_]] = now;
  // The next replica that has not failed a transport lately (a stopped or
  // dead active would hold every call for a whole attempt again); the
  // next one at all when every one has.
  size_t next = (current_index_ + 1) % addresses_.size();
  for (size_t step = 1; step < addresses_.size(); ++step) {
    const size_t candidate = (current_index_ + step) % addresses_.size();
    auto it = failed_at_.find(addresses_[candidate]);
    if (it == failed_at_.end() || now - it->second > kFailedReplicaAvoidance) {
      next = candidate;
      break;
    }
  }
  MoveToLocked(next);
  return false;
}

std::string MetaEndpoints::Describe() const {
  absl::MutexLock lock(&mu_);
  return absl::StrJoin(addresses_, ",");
}

size_t MetaEndpoints::size() const {
  absl::MutexLock lock(&mu_);
  return addresses_.size();
}

void MetaEndpoints::Shutdown() {
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
  for (const auto& client : handed_out_) client->Shutdown();
}

bool MetaEndpoints::is_shut_down() const {
  absl::MutexLock lock(&mu_);
  return shut_down_;
}

}  // namespace logfs::client

#include "store/format/wire_version.h"

#include <atomic>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/util/version.h"

namespace logfs::format {
namespace {

std::atomic<uint32_t> test_min{0};
std::atomic<uint32_t> test_max{0};

std::string Describe(const proto::VersionRange& v) {
  return absl::StrCat("logfs ", v.role(), " ", v.release().empty() ? "?" : v.release());
}

}  // namespace

proto::VersionRange OwnVersion(absl::string_view role) {
  proto::VersionRange v;
  const uint32_t min = test_min.load(std::memory_order_relaxed);
  const uint32_t max = test_max.load(std::memory_order_relaxed);
  v.set_wire_min(max != 0 ? min : kWireVersionMin);
  v.set_wire_max(max != 0 ? max : kWireVersion);
  v.set_release(Version());
  v.set_role(std::string(role));
  return v;
}

proto::VersionRange PeerVersion(bool has, const proto::VersionRange& stated,
                                absl::string_view role) {
  proto::VersionRange v;
  if (has) v = stated;
  if (!has || v.wire_max() == 0) {
    v.set_wire_min(kWireVersionUnstated);
    v.set_wire_max(kWireVersionUnstated);
    if (v.release().empty()) v.set_release("0.1 (states no version)");
  }
  if (v.role().empty()) v.set_role(std::string(role));
  return v;
}

constexpr absl::string_view kRefusalWords = " speaks wire versions ";

absl::Status CheckPeerVersion(const proto::VersionRange& self, const proto::VersionRange& peer,
                              absl::string_view peer_name, bool peer_may_be_newer) {
  const bool shared = peer.wire_min() <= self.wire_max() && self.wire_min() <= peer.wire_max();
  const bool too_new = !peer_may_be_newer && peer.wire_max() > self.wire_max();
  if (shared && !too_new) return absl::OkStatus();
  // The older side is the one to upgrade.
  const bool peer_older = peer.wire_max() < self.wire_min();
  return absl::FailedPreconditionError(absl::StrCat(
      Describe(peer), " at ", peer_name, kRefusalWords, peer.wire_min(), "..",
      peer.wire_max(), ", this ", self.role(), " (logfs ", self.release(), ") ", self.wire_min(),
      "..", self.wire_max(), ": upgrade ", peer_older ? "the " : "this ",
      peer_older ? peer.role() : self.role(), too_new && shared ? " first" : "",
      " (docs/OPERATIONS.md \"Upgrade\")"));
}

bool IsVersionRefusal(const absl::Status& status) {
  return absl::IsFailedPrecondition(status) && absl::StrContains(status.message(), kRefusalWords);
}

void SetWireVersionsForTest(uint32_t min, uint32_t max) {
  test_min.store(min, std::memory_order_relaxed);
  test_max.store(max, std::memory_order_relaxed);
}

}  // namespace logfs::format

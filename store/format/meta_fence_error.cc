#include "store/format/meta_fence_error.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace logfs::format {
namespace {
constexpr char kPrefix[] = "fenced: meta epoch ";
}  // namespace

absl::Status MetaEpochFencedError(uint64_t meta_epoch, uint64_t highest) {
  return absl::FailedPreconditionError(absl::StrCat(kPrefix, meta_epoch, " is below ", highest,
                                                    ", the highest this server has seen"));
}

bool IsMetaEpochFenced(const absl::Status& status) {
  return absl::IsFailedPrecondition(status) && absl::StartsWith(status.message(), kPrefix);
}

}  // namespace logfs::format

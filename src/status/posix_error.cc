#include "src/status/posix_error.h"

#include <string>

#include "absl/numeric/int128.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"

namespace logfs {
namespace {
constexpr char kErrnoPayloadUrl[] = "logfs/errno";
}  // namespace

absl::Status PosixError(int errno_value, absl::string_view message) {
  absl::Status status = absl::ErrnoToStatus(errno_value, message);
  // ErrnoToStatus prefixes strerror; keep the caller's message plain.
  status = absl::Status(status.code(), message);
  status.SetPayload(kErrnoPayloadUrl, absl::Cord(std::to_string(errno_value)));
  return status;
}

int AttachedErrno(const absl::Status& status) {
  auto payload = status.GetPayload(kErrnoPayloadUrl);
  int value = 0;
  if (payload.has_value() && absl::SimpleAtoi(std::string(*payload), &value)) return value;
  return 0;
}

}  // namespace logfs

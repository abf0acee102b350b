#include "store/format/error_codec.h"

#include <glog/logging.h>

#include <optional>

#include "absl/strings/cord.h"
#include "src/status/posix_error.h"
#include "store/format/logfs.pb.h"

namespace logfs::format {
namespace {
constexpr char kActiveMetaPayload[] = "logfs.io/active_meta";
}  // namespace

absl::Status NotActiveMetaError(absl::string_view message, absl::string_view active_address) {
  absl::Status status = absl::UnavailableError(message);
  status.SetPayload(kActiveMetaPayload, absl::Cord(active_address));
  return status;
}

bool IsNotActiveMeta(const absl::Status& status, std::string* active_address) {
  auto payload = status.GetPayload(kActiveMetaPayload);
  if (!payload.has_value()) return false;
  if (active_address != nullptr) *active_address = std::string(*payload);
  return true;
}

std::string EncodeErrorBody(const absl::Status& status) {
  CHECK(!status.ok()) << "an error frame for an OK status";
  proto::ErrorResponse error;
  error.set_code(static_cast<int>(status.code()));
  error.set_message(std::string(status.message()));
  error.set_posix_errno(AttachedErrno(status));
  std::string active;
  if (IsNotActiveMeta(status, &active)) error.set_active_meta(std::move(active));
  return error.SerializeAsString();
}

absl::Status DecodeErrorBody(absl::string_view body) {
  proto::ErrorResponse error;
  if (!error.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    return absl::InternalError("unparseable error response");
  }
  if (error.posix_errno() != 0) return PosixError(error.posix_errno(), error.message());
  auto code = static_cast<absl::StatusCode>(error.code());
  if (code == absl::StatusCode::kOk) code = absl::StatusCode::kUnknown;
  if (code == absl::StatusCode::kUnavailable && error.has_active_meta()) {
    return NotActiveMetaError(error.message(), error.active_meta());
  }
  return absl::Status(code, error.message());
}

}  // namespace logfs::format

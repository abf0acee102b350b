#include "store/format/error_codec.h"

#include <glog/logging.h>

#include "src/status/posix_error.h"
#include "store/format/logfs.pb.h"

namespace logfs::format {

std::string EncodeErrorBody(const absl::Status& status) {
  CHECK(!status.ok()) << "an error frame for an OK status";
  proto::ErrorResponse error;
  error.set_code(static_cast<int>(status.code()));
  error.set_message(std::string(status.message()));
  error.set_posix_errno(AttachedErrno(status));
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
  return absl::Status(code, error.message());
}

}  // namespace logfs::format

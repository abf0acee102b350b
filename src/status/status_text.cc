#include "src/status/status_text.h"

#include "absl/strings/str_cat.h"

namespace logfs {

std::string StatusText(const absl::Status& status) {
  if (status.ok()) return "OK";
  return absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message());
}

}  // namespace logfs

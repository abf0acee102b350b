#include "src/status/status_text.h"

#include <gtest/gtest.h>

#include <cerrno>

#include "absl/strings/cord.h"
#include "src/status/posix_error.h"

namespace logfs {
namespace {

TEST(StatusTextTest, CodeAndMessageWithoutPayloads) {
  // Goal: what a user sees of a status names its code and message and
  // none of the payloads that ToString prints.
  absl::Status status = absl::UnauthenticatedError("check --cluster_secret_file");
  status.SetPayload("logfs/server_answer", absl::Cord("1"));
  ASSERT_NE(std::string::npos, status.ToString().find("server_answer"));
  EXPECT_EQ("UNAUTHENTICATED: check --cluster_secret_file", StatusText(status));
  absl::Status posix = PosixError(ENOTDIR, "stat /etc/hostname/x: Not a directory");
  ASSERT_NE(0, AttachedErrno(posix));
  EXPECT_EQ("FAILED_PRECONDITION: stat /etc/hostname/x: Not a directory", StatusText(posix));
  EXPECT_EQ("OK", StatusText(absl::OkStatus()));
}

}  // namespace
}  // namespace logfs

#include "src/status/posix_error.h"

#include <gtest/gtest.h>

#include <cerrno>

#include "src/status/syscall_error.h"

namespace logfs {
namespace {

TEST(PosixErrorTest, TheErrnoRidesAlongWithTheCanonicalCode) {
  absl::Status busy = PosixError(EBUSY, "leased");
  EXPECT_EQ(EBUSY, AttachedErrno(busy));
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, busy.code());  // as absl::ErrnoToStatus
  EXPECT_EQ("leased", busy.message());
  EXPECT_EQ(ENOTEMPTY, AttachedErrno(PosixError(ENOTEMPTY, "not empty")));
}

TEST(PosixErrorTest, StatusesWithoutAnErrnoCarryNone) {
  EXPECT_EQ(0, AttachedErrno(absl::OkStatus()));
  EXPECT_EQ(0, AttachedErrno(absl::NotFoundError("x")));
  EXPECT_EQ(0, AttachedErrno(absl::UnavailableError("connection refused")));
}

TEST(SyscallErrorTest, KeepsTheErrnoAndSaysWhatFailed) {
  absl::Status s = SyscallError(ENOSPC, "pwrite journal");
  EXPECT_EQ(ENOSPC, AttachedErrno(s));
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_NE(std::string::npos, s.message().find("pwrite journal")) << s;
}

}  // namespace
}  // namespace logfs

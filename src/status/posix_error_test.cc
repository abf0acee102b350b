// The one mapping of statuses to errno (README "Errors").
#include "src/status/posix_error.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace logfs {
namespace {

TEST(PosixErrorTest, AttachedErrnoWins) {
  EXPECT_EQ(ENOTEMPTY, ErrnoFromStatus(PosixError(ENOTEMPTY, "not empty")));
  EXPECT_EQ(EBUSY, ErrnoFromStatus(PosixError(EBUSY, "leased")));
  EXPECT_EQ(0, ErrnoFromStatus(absl::OkStatus()));
}

TEST(PosixErrorTest, UnreachableAndTooSlowAreTheSameCause) {
  // Goal: a server that does not answer in time and one that cannot be
  // reached give the caller the same errno (issue 11: open for write gave
  // ETIMEDOUT where every other call gave EIO).
  EXPECT_EQ(EIO, ErrnoFromStatus(absl::UnavailableError("connection refused")));
  EXPECT_EQ(EIO, ErrnoFromStatus(absl::DeadlineExceededError("no response in time")));
  EXPECT_EQ(ENOSPC, ErrnoFromStatus(absl::ResourceExhaustedError("disk full")));
  EXPECT_EQ(EIO, ErrnoFromStatus(absl::DataLossError("crc")));
}

}  // namespace
}  // namespace logfs

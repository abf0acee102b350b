#include "fuse/errno_map.h"

#include <gtest/gtest.h>

#include <cerrno>

#include "src/status/posix_error.h"
#include "src/status/syscall_error.h"

namespace logfs::fuse {
namespace {

TEST(ErrnoMapTest, AnAttachedErrnoWinsOverTheCode) {
  EXPECT_EQ(ENOTEMPTY, ToErrno(PosixError(ENOTEMPTY, "dir")));
  EXPECT_EQ(ESTALE, ToErrno(PosixError(ESTALE, "gone")));
  EXPECT_EQ(EROFS, ToErrno(SyscallError(EROFS, "open")));
}

TEST(ErrnoMapTest, CodesWithoutAnErrnoMapToTheReadmeTable) {
  EXPECT_EQ(0, ToErrno(absl::OkStatus()));
  EXPECT_EQ(ENOENT, ToErrno(absl::NotFoundError("x")));
  EXPECT_EQ(EEXIST, ToErrno(absl::AlreadyExistsError("x")));
  EXPECT_EQ(EPERM, ToErrno(absl::PermissionDeniedError("x")));
  EXPECT_EQ(EINVAL, ToErrno(absl::InvalidArgumentError("x")));
  EXPECT_EQ(ENOSPC, ToErrno(absl::ResourceExhaustedError("x")));
  EXPECT_EQ(EIO, ToErrno(absl::DeadlineExceededError("x")));
  EXPECT_EQ(EIO, ToErrno(absl::UnavailableError("x")));
  EXPECT_EQ(EIO, ToErrno(absl::DataLossError("x")));
  EXPECT_EQ(ENOSYS, ToErrno(absl::UnimplementedError("x")));
  EXPECT_EQ(EAGAIN, ToErrno(absl::AbortedError("x")));
  EXPECT_EQ(EACCES, ToErrno(absl::UnauthenticatedError("x")));
}

TEST(ErrnoMapTest, ASocketsErrnoIsEioLikeATimeout) {
  // Goal: a syscall error of a connection (the short-circuit socket, a
  // reset TCP stream) carries its errno, but a file call answers EIO for
  // any unreachable server, as README "Errors" says.
  EXPECT_EQ(EIO, ToErrno(SyscallError(ECONNREFUSED, "connect segd.sock")));
  EXPECT_EQ(EIO, ToErrno(SyscallError(ECONNRESET, "recvmsg")));
  EXPECT_EQ(EIO, ToErrno(SyscallError(ETIMEDOUT, "connect")));
  EXPECT_EQ(ENOSPC, ToErrno(SyscallError(ENOSPC, "pwrite")));
}

TEST(ErrnoMapTest, RefusalsAnswerWithTheirDocumentedErrno) {
  EXPECT_EQ(ERANGE, ToErrno(Refusal::kXattrBufferTooSmall));
  EXPECT_EQ(EPERM, ToErrno(Refusal::kNotRoot));
  EXPECT_EQ(EOPNOTSUPP, ToErrno(Refusal::kFallocateMode));
}

}  // namespace
}  // namespace logfs::fuse

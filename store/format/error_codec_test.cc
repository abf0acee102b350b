// Error frame bodies: a failed status crosses the wire with its code, its
// message and its errno; garbage and an OK code never read as success.
#include "store/format/error_codec.h"

#include <gtest/gtest.h>

#include <cerrno>

#include "src/status/posix_error.h"
#include "store/format/logfs.pb.h"

namespace logfs::format {
namespace {

TEST(ErrorCodecTest, CodeAndMessageRoundTrip) {
  const absl::Status sent = absl::FailedPreconditionError("segment 7 is sealed");
  const absl::Status got = DecodeErrorBody(EncodeErrorBody(sent));
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, got.code());
  EXPECT_EQ("segment 7 is sealed", got.message());
  EXPECT_EQ(0, AttachedErrno(got));
}

TEST(ErrorCodecTest, ErrnoRoundTrips) {
  // ENOTEMPTY and EEXIST share a code (kAlreadyExists, kFailedPrecondition
  // ...) with other errnos: only the attached errno tells them apart.
  for (int errno_value : {ENOTEMPTY, EISDIR, ENOENT, ENOSPC, EXDEV}) {
    const absl::Status sent = PosixError(errno_value, "rename a b");
    const absl::Status got = DecodeErrorBody(EncodeErrorBody(sent));
    EXPECT_EQ(sent.code(), got.code()) << errno_value;
    EXPECT_EQ("rename a b", got.message()) << errno_value;
    EXPECT_EQ(errno_value, AttachedErrno(got));
    EXPECT_EQ(errno_value, AttachedErrno(got));
  }
}

TEST(ErrorCodecTest, EveryErrorCodeRoundTrips) {
  for (int code = 1; code <= 16; ++code) {
    const absl::Status sent(static_cast<absl::StatusCode>(code), "why");
    const absl::Status got = DecodeErrorBody(EncodeErrorBody(sent));
    EXPECT_EQ(sent.code(), got.code()) << code;
    EXPECT_EQ("why", got.message());
  }
}

TEST(ErrorCodecTest, BodyIsTheErrorResponseProto) {
  // The bytes are docs/wire_format.md's ErrorResponse, field by field.
  proto::ErrorResponse error;
  ASSERT_TRUE(error.ParseFromString(EncodeErrorBody(PosixError(EPERM, "uid 5"))));
  EXPECT_EQ(static_cast<int>(absl::StatusCode::kPermissionDenied), error.code());
  EXPECT_EQ("uid 5", error.message());
  EXPECT_EQ(EPERM, error.posix_errno());
}

TEST(ErrorCodecTest, OkCodeAndGarbageNeverReadAsSuccess) {
  proto::ErrorResponse ok_code;
  ok_code.set_message("odd peer");
  const absl::Status got = DecodeErrorBody(ok_code.SerializeAsString());
  EXPECT_EQ(absl::StatusCode::kUnknown, got.code());
  EXPECT_EQ("odd peer", got.message());

  const absl::Status garbage = DecodeErrorBody(std::string("\xff\xff\xff", 3));
  EXPECT_EQ(absl::StatusCode::kInternal, garbage.code());
  EXPECT_EQ("unparseable error response", garbage.message());
}

TEST(ErrorCodecTest, AStandbysRefusalKeepsTheActiveItNamesEvenWhenItKnowsNone) {
  std::string active;
  const absl::Status named = DecodeErrorBody(
      EncodeErrorBody(NotActiveMetaError("meta at a:1 is a standby", "b:2")));
  EXPECT_EQ(absl::StatusCode::kUnavailable, named.code());
  EXPECT_EQ("meta at a:1 is a standby", named.message());
  ASSERT_TRUE(IsNotActiveMeta(named, &active));
  EXPECT_EQ("b:2", active);

  const absl::Status unknown =
      DecodeErrorBody(EncodeErrorBody(NotActiveMetaError("no active yet", "")));
  active = "x";
  ASSERT_TRUE(IsNotActiveMeta(unknown, &active));
  EXPECT_EQ("", active);

  EXPECT_FALSE(IsNotActiveMeta(DecodeErrorBody(EncodeErrorBody(absl::UnavailableError("down")))));
}

}  // namespace
}  // namespace logfs::format

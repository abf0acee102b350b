// A Responder without a connection (the sink constructor, for tests and
// fuzz targets) hands over exactly one response: the reply, the error, or
// kInternal when dropped unanswered.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "store/format/error_codec.h"
#include "store/format/frame.h"
#include "store/format/logfs.pb.h"
#include "store/rpc/rpc_server.h"

namespace logfs::rpc {
namespace {

struct Sent {
  uint8_t flags;
  std::string message;
  std::string data;
};

Responder::Sink Collect(std::vector<Sent>* sent) {
  return [sent](uint8_t flags, std::string message, std::string data) {
    sent->push_back({flags, std::move(message), std::move(data)});
  };
}

TEST(ResponderTest, SinkGetsTheReplyAndItsData) {
  std::vector<Sent> sent;
  {
    Responder responder(Collect(&sent), format::MessageType::kRead, 7);
    proto::ReadResponse response;
    response.set_length(3);
    responder.Reply(response, "abc");
  }
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].flags, format::kFlagResponse);
  proto::ReadResponse got;
  ASSERT_TRUE(got.ParseFromString(sent[0].message));
  EXPECT_EQ(got.length(), 3u);
  EXPECT_EQ(sent[0].data, "abc");
}

TEST(ResponderTest, SinkGetsTheErrorBody) {
  std::vector<Sent> sent;
  Responder(Collect(&sent), format::MessageType::kLookup, 1)
      .ReplyError(absl::NotFoundError("no such file"));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].flags, format::kFlagResponse | format::kFlagError);
  absl::Status status = format::DecodeErrorBody(sent[0].message);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "no such file");
}

TEST(ResponderTest, DroppedResponderSendsInternalOnce) {
  std::vector<Sent> sent;
  {
    Responder responder(Collect(&sent), format::MessageType::kSync, 2);
    Responder copy = responder;  // copies share the one response
  }
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].flags, format::kFlagResponse | format::kFlagError);
  EXPECT_EQ(format::DecodeErrorBody(sent[0].message).code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace logfs::rpc

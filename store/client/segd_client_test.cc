// SegdClient against fake segment servers (RpcServers on loopback): the
// calls carry their fields and data; Fence of a sealed replica falls back
// to its state; fan-outs answer one result per address in order, a dead
// server's as kUnavailable; CopySegmentEach sends each target its own
// request; a pool that is shut down fails later calls at once.
#include "store/client/segd_client.h"

#include <gtest/gtest.h>

#include <memory>

#include "absl/synchronization/notification.h"
#include "src/util/crc32c.h"
#include "store/client/internal/fake_server.h"
#include "store/format/meta_fence_error.h"
#include "store/rpc/io_threads.h"

namespace logfs::client {
namespace {

using format::MessageType;
using internal::FakeServer;
using internal::Parse;

constexpr absl::Duration kTimeout = absl::Seconds(5);

// A replica of segment 9 at epoch 2, sealed at 10 bytes of "0123456789":
// appends extend its length, CreateSegment of a higher epoch is refused
// (sealed), reads of segment 13 fail their CRCs.
void AnswerAsReplica(const format::Frame& request, rpc::Responder responder) {
  proto::SegmentInfoResponse info;
  info.set_segment_id(9);
  info.set_epoch(2);
  info.set_length(10);
  info.set_sealed(true);
  switch (request.type) {
    case MessageType::kAppend: {
      auto append = Parse<proto::AppendRequest>(request);
      info.set_sealed(false);
      info.set_length(append.offset() + request.data.size());
      return responder.Reply(info);
    }
    case MessageType::kCreateSegment:
      return responder.ReplyError(absl::FailedPreconditionError("segment 9 is sealed"));
    case MessageType::kRead: {
      auto read = Parse<proto::ReadRequest>(request);
      if (read.segment_id() == 13) {
        return responder.ReplyError(absl::DataLossError("replica 13 is corrupt"));
      }
      std::string data = std::string("0123456789").substr(read.offset(), read.length());
      proto::ReadResponse response;
      response.set_length(10);
      response.set_sealed(true);
      response.set_crc32c(util::Crc32c(data.data(), data.size()));
      return responder.Reply(response, data);
    }
    case MessageType::kCopySegment:
      return responder.Reply(proto::Empty());
    default:
      return responder.Reply(info);
  }
}

class SegdClientTest : public testing::Test {
 protected:
  // Destroyed in reverse: a test's servers first, then the pool.
  rpc::IoThreads io_{1};
  rpc::ClientPool pool_{io_.io()};
  SegdClient segd_{pool_};
};

TEST_F(SegdClientTest, AppendCarriesItsDataBlockingAndAsync) {
  FakeServer server(AnswerAsReplica);
  proto::AppendRequest append;
  append.set_segment_id(9);
  append.set_epoch(2);
  append.set_offset(4);
  append.set_sync(true);
  auto info = segd_.Append(server.address(), append, "abcd", kTimeout);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(8u, info->length());
  // The fan-out form shares its data between calls.
  append.set_offset(8);
  auto shared = std::make_shared<const std::string>("efgh");
  absl::Notification done;
  absl::StatusOr<proto::SegmentInfoResponse> async_info;
  segd_.AsyncAppend(server.address(), append, shared, kTimeout,
                    [&](absl::StatusOr<proto::SegmentInfoResponse> r) {
                      async_info = std::move(r);
                      done.Notify();
                    });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(async_info.ok()) << async_info.status();
  EXPECT_EQ(12u, async_info->length());
  auto frames = server.requests(MessageType::kAppend);
  ASSERT_EQ(2u, frames.size());
  EXPECT_EQ("abcd", frames[0].data);
  EXPECT_EQ("efgh", frames[1].data);
  auto sent = Parse<proto::AppendRequest>(frames[1]);
  EXPECT_EQ(9u, sent.segment_id());
  EXPECT_EQ(2u, sent.epoch());
  EXPECT_EQ(8u, sent.offset());
  EXPECT_TRUE(sent.sync());
}

TEST_F(SegdClientTest, FenceOfASealedReplicaReturnsItsState) {
  // Goal: CreateSegment at the fence epoch is refused (sealed), so Fence
  // asks for the replica's state and returns it.
  FakeServer server(AnswerAsReplica);
  auto info = segd_.Fence(server.address(), 9, 5, kTimeout);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->sealed());
  EXPECT_EQ(10u, info->length());
  auto frames = server.requests();
  ASSERT_EQ(2u, frames.size());
  EXPECT_EQ(MessageType::kCreateSegment, frames[0].type);
  EXPECT_EQ(5u, Parse<proto::CreateSegmentRequest>(frames[0]).epoch());
  EXPECT_EQ(MessageType::kSegmentInfo, frames[1].type);
  EXPECT_EQ(9u, Parse<proto::SegmentInfoRequest>(frames[1]).segment_id());
}

TEST_F(SegdClientTest, AReopenThatLeavesTheReplicaSealedIsARefusal) {
  // Goal: a reopen is a CreateSegment carrying reopen_length; a server that
  // answers with the replica still sealed (one from before reopen_length,
  // which only fenced it) has refused, and a server that opened it has not.
  FakeServer old_server([](const format::Frame& request, rpc::Responder responder) {
    proto::SegmentInfoResponse info;
    info.set_segment_id(9);
    info.set_epoch(3);
    info.set_length(10);
    info.set_sealed(true);
    responder.Reply(info);
  });
  FakeServer new_server([](const format::Frame& request, rpc::Responder responder) {
    proto::SegmentInfoResponse info;
    info.set_segment_id(9);
    info.set_epoch(3);
    info.set_length(10);
    responder.Reply(info);
  });
  auto results =
      segd_.ReopenSegmentEach({old_server.address(), new_server.address()}, 9, 3, 10, kTimeout);
  ASSERT_EQ(2u, results.size());
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, results[0].status().code());
  ASSERT_TRUE(results[1].ok()) << results[1].status();
  EXPECT_FALSE(results[1]->sealed());
  auto frames = new_server.requests();
  ASSERT_EQ(1u, frames.size());
  EXPECT_EQ(MessageType::kCreateSegment, frames[0].type);
  EXPECT_EQ(10u, Parse<proto::CreateSegmentRequest>(frames[0]).reopen_length());
  EXPECT_EQ(3u, Parse<proto::CreateSegmentRequest>(frames[0]).epoch());
}

TEST_F(SegdClientTest, FenceRefusedForItsMetaEpochIsReturnedAsIs) {
  // Goal: a server that refuses the meta epoch (a deposed meta's fence)
  // is not taken for a sealed replica: no SegmentInfo, the refusal comes
  // back, and the request carried the meta epoch.
  FakeServer server([](const format::Frame& request, rpc::Responder responder) {
    responder.ReplyError(format::MetaEpochFencedError(4, 7));
  });
  auto info = segd_.Fence(server.address(), 9, 5, kTimeout, /*meta_epoch=*/4);
  EXPECT_TRUE(format::IsMetaEpochFenced(info.status())) << info.status();
  auto frames = server.requests();
  ASSERT_EQ(1u, frames.size());
  EXPECT_EQ(MessageType::kCreateSegment, frames[0].type);
  EXPECT_EQ(4u, Parse<proto::CreateSegmentRequest>(frames[0]).meta_epoch());
}

TEST_F(SegdClientTest, ReadReturnsBytesAndTheServersDataLoss) {
  FakeServer server(AnswerAsReplica);
  proto::ReadRequest read;
  read.set_segment_id(9);
  read.set_offset(2);
  read.set_length(5);
  auto reply = segd_.Read(server.address(), read, kTimeout);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ("23456", reply->data);
  EXPECT_TRUE(reply->response.sealed());
  EXPECT_EQ(util::Crc32c("23456", 5), reply->response.crc32c());
  read.set_segment_id(13);
  auto corrupt = segd_.Read(server.address(), read, kTimeout);
  EXPECT_TRUE(absl::IsDataLoss(corrupt.status())) << corrupt.status();
  EXPECT_TRUE(rpc::IsServerAnswer(corrupt.status()));
}

TEST_F(SegdClientTest, FanOutAnswersPerAddressInOrder) {
  // Goal: a dead address in the middle gets kUnavailable at its place; the
  // live server gets both its calls.
  FakeServer server(AnswerAsReplica);
  const std::string dead = internal::FreeAddress();
  proto::SealRequest seal;
  seal.set_segment_id(9);
  seal.set_epoch(2);
  seal.set_length(10);
  auto results = segd_.SealEach({server.address(), dead, server.address()}, seal, kTimeout);
  ASSERT_EQ(3u, results.size());
  EXPECT_TRUE(results[0].ok()) << results[0].status();
  EXPECT_TRUE(absl::IsUnavailable(results[1].status())) << results[1].status();
  EXPECT_TRUE(results[2].ok()) << results[2].status();
  EXPECT_EQ(10u, results[2]->length());
  auto frames = server.requests(MessageType::kSeal);
  ASSERT_EQ(2u, frames.size());
  EXPECT_EQ(10u, Parse<proto::SealRequest>(frames[0]).length());
}

TEST_F(SegdClientTest, CopySegmentEachSendsEachTargetItsRequest) {
  FakeServer a(AnswerAsReplica);
  FakeServer b(AnswerAsReplica);
  std::vector<CopyCall> copies(2);
  copies[0].target_address = a.address();
  copies[0].request.set_segment_id(1);
  copies[0].request.add_source_addresses(b.address());
  copies[1].target_address = b.address();
  copies[1].request.set_segment_id(2);
  copies[1].request.set_length(77);
  std::vector<absl::Status> results = segd_.CopySegmentEach(copies, kTimeout);
  ASSERT_EQ(2u, results.size());
  EXPECT_TRUE(results[0].ok()) << results[0];
  EXPECT_TRUE(results[1].ok()) << results[1];
  auto at_a = Parse<proto::CopySegmentRequest>(a.requests(MessageType::kCopySegment).at(0));
  auto at_b = Parse<proto::CopySegmentRequest>(b.requests(MessageType::kCopySegment).at(0));
  EXPECT_EQ(1u, at_a.segment_id());
  EXPECT_EQ(b.address(), at_a.source_addresses(0));
  EXPECT_EQ(2u, at_b.segment_id());
  EXPECT_EQ(77u, at_b.length());
}

TEST_F(SegdClientTest, ShutDownPoolFailsLaterCallsAtOnce) {
  // Goal: after ShutdownAll, a call to a server never reached before fails
  // with kUnavailable without a request leaving (meta's Shutdown relies on
  // it for calls that race it).
  FakeServer server(AnswerAsReplica);
  pool_.ShutdownAll();
  auto info = segd_.SegmentInfo(server.address(), 9, kTimeout);
  EXPECT_TRUE(absl::IsUnavailable(info.status())) << info.status();
  EXPECT_TRUE(server.requests().empty());
}

}  // namespace
}  // namespace logfs::client

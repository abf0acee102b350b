// RpcSegmentServerApi against a fake segment server (an RpcServer on
// loopback) that records what it was sent: every command carries the
// meta epoch set last (0 before any).
#include "store/meta/namespace/segd_api.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "store/format/logfs.pb.h"
#include "store/format/message_type.h"
#include "store/rpc/io_threads.h"
#include "store/rpc/rpc_server.h"

namespace logfs::meta {
namespace {

// Answers every segd request with an unsealed replica's info and keeps
// the frames.
class RecordingSegd {
 public:
  RecordingSegd()
      : io_(std::make_unique<rpc::IoThreads>(1)),
        server_(std::make_unique<rpc::RpcServer>(
            io_->io(),
            [this](format::Frame frame, rpc::Responder responder) {
              {
                absl::MutexLock lock(&mu_);
                frames_.push_back(frame);
              }
              if (frame.type == format::MessageType::kCopySegment) {
                return responder.Reply(proto::Empty());
              }
              responder.Reply(proto::SegmentInfoResponse());
            },
            format::IsSegdType)) {
    absl::Status listening = server_->Listen("127.0.0.1:0");
    EXPECT_TRUE(listening.ok()) << listening;
  }
  ~RecordingSegd() {
    server_->Stop();
    io_->Join();
    server_.reset();
  }
  std::string address() const { return server_->bound_address(); }
  std::vector<format::Frame> frames() {
    absl::MutexLock lock(&mu_);
    return frames_;
  }

 private:
  std::unique_ptr<rpc::IoThreads> io_;
  std::unique_ptr<rpc::RpcServer> server_;
  absl::Mutex mu_;
  std::vector<format::Frame> frames_ ABSL_GUARDED_BY(mu_);
};

template <typename Message>
Message Parse(const format::Frame& frame) {
  Message message;
  EXPECT_TRUE(message.ParseFromString(frame.message));
  return message;
}

TEST(RpcSegmentServerApiTest, EveryCommandCarriesTheMetaEpochSetLast) {
  RecordingSegd segd;
  rpc::IoThreads io(1);
  {
    RpcSegmentServerApi api(io.io(), absl::Seconds(10));
    ASSERT_TRUE(api.Seal(segd.address(), 1, 2, 0).ok());  // before any: 0
    api.SetMetaEpoch(7);
    EXPECT_EQ(7u, api.meta_epoch());
    ASSERT_TRUE(api.Seal(segd.address(), 1, 2, 0).ok());
    ASSERT_TRUE(api.Fence(segd.address(), 1, 3).ok());
    RereplicationTask task;
    task.segment_id = 1;
    task.epoch = 3;
    task.target_address = segd.address();
    task.source_addresses = {"127.0.0.1:1"};
    std::vector<absl::Status> copied = api.CopySegments({task}, absl::Seconds(10));
    ASSERT_EQ(1u, copied.size());
    EXPECT_TRUE(copied[0].ok()) << copied[0];
  }
  io.Join();
  std::vector<format::Frame> frames = segd.frames();
  ASSERT_EQ(4u, frames.size());
  ASSERT_EQ(format::MessageType::kSeal, frames[0].type);
  EXPECT_EQ(0u, Parse<proto::SealRequest>(frames[0]).meta_epoch());
  ASSERT_EQ(format::MessageType::kSeal, frames[1].type);
  EXPECT_EQ(7u, Parse<proto::SealRequest>(frames[1]).meta_epoch());
  ASSERT_EQ(format::MessageType::kCreateSegment, frames[2].type);
  EXPECT_EQ(7u, Parse<proto::CreateSegmentRequest>(frames[2]).meta_epoch());
  EXPECT_EQ(3u, Parse<proto::CreateSegmentRequest>(frames[2]).epoch());
  ASSERT_EQ(format::MessageType::kCopySegment, frames[3].type);
  EXPECT_EQ(7u, Parse<proto::CopySegmentRequest>(frames[3]).meta_epoch());
}

}  // namespace
}  // namespace logfs::meta

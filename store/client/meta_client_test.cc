// MetaClient against a fake meta (an RpcServer on loopback): each method
// sends its message type with the request's fields; changes carry fresh
// call ids of the mount; meta's errors come back final with their errno;
// a timed-out attempt is retried for a read but not for Open (which pins
// without a call id); session calls and a client without a retry window
// make one attempt and return the transport's error as it came.
#include "store/client/meta_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <memory>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "src/status/posix_error.h"
#include "store/client/internal/fake_server.h"
#include "store/rpc/client_pool.h"
#include "store/rpc/io_threads.h"

namespace logfs::client {
namespace {

using format::MessageType;
using internal::FakeServer;
using internal::Parse;

// Answers every type with an empty success of its response type, except
// NewMount (mount id 7) and Lookup/GetAttr/Create (an attr of ino 42).
void AnswerAll(const format::Frame& request, rpc::Responder responder) {
  switch (request.type) {
    case MessageType::kNewMount: {
      proto::NewMountResponse response;
      response.set_mount_id(7);
      return responder.Reply(response);
    }
    case MessageType::kLookup:
    case MessageType::kGetAttr:
    case MessageType::kCreate: {
      proto::AttrResponse response;
      response.mutable_attr()->set_ino(42);
      return responder.Reply(response);
    }
    case MessageType::kOpen:
    case MessageType::kOpenWrite:
    case MessageType::kSealSegment:
    case MessageType::kCopyRange: {
      proto::InodeResponse response;
      response.mutable_inode()->mutable_attr()->set_ino(42);
      return responder.Reply(response);
    }
    default:
      return responder.Reply(proto::Empty());
  }
}

class MetaClientTest : public testing::Test {
 protected:
  // A client of `server` with `window` (unset: no retries) and attempts of
  // `timeout`.
  std::unique_ptr<MetaClient> ClientOf(const std::string& address,
                                       std::optional<absl::Duration> window,
                                       absl::Duration timeout = absl::Seconds(5)) {
    MetaClientOptions options;
    options.timeout = timeout;
    options.retry_window = window;
    return std::make_unique<MetaClient>(io_.io(), pool_.Get(address), options);
  }

  // Destroyed in reverse: servers of a test first, then the clients.
  rpc::IoThreads io_{1};
  rpc::ClientPool pool_{io_.io()};
};

TEST_F(MetaClientTest, MethodsSendTheirTypeAndFields) {
  FakeServer meta(AnswerAll);
  auto client = ClientOf(meta.address(), absl::Seconds(10));
  // (a) Value methods build the request.
  auto attr = client->Lookup(1, "name");
  ASSERT_TRUE(attr.ok()) << attr.status();
  EXPECT_EQ(42u, attr->ino());
  ASSERT_TRUE(client->Readdir(5, "after").ok());
  ASSERT_TRUE(client->RemoveXattr(6, "user.x").ok());
  // (b) The frames meta got, in order.
  auto frames = meta.requests();
  ASSERT_EQ(3u, frames.size());
  EXPECT_EQ(MessageType::kLookup, frames[0].type);
  auto lookup = Parse<proto::LookupRequest>(frames[0]);
  EXPECT_EQ(1u, lookup.parent());
  EXPECT_EQ("name", lookup.name());
  EXPECT_EQ(MessageType::kReaddir, frames[1].type);
  auto readdir = Parse<proto::ReaddirRequest>(frames[1]);
  EXPECT_EQ(5u, readdir.ino());
  EXPECT_EQ("after", readdir.start_after());
  EXPECT_EQ(MessageType::kRemoveXattr, frames[2].type);
  auto remove = Parse<proto::GetXattrRequest>(frames[2]);
  EXPECT_EQ(6u, remove.ino());
  EXPECT_EQ("user.x", remove.name());
}

TEST_F(MetaClientTest, ChangesCarryFreshCallIdsOfTheMount) {
  // Goal: after NewMount, every change carries (mount id, next seq), unless
  // it brings its own; Open names the mount and carries no call id.
  FakeServer meta(AnswerAll);
  auto client = ClientOf(meta.address(), absl::Seconds(10));
  auto mount_id = client->NewMount("host1");
  ASSERT_TRUE(mount_id.ok()) << mount_id.status();
  EXPECT_EQ(7u, *mount_id);
  EXPECT_EQ(7u, client->mount_id());
  proto::CreateRequest create;
  create.set_parent(1);
  create.set_name("f");
  ASSERT_TRUE(client->Create(create).ok());
  proto::UnlinkRequest unlink;
  unlink.set_parent(1);
  unlink.set_name("f");
  ASSERT_TRUE(client->Unlink(unlink).ok());
  proto::SetXattrRequest set;
  set.mutable_call()->set_mount_id(7);
  set.mutable_call()->set_seq(99);  // a caller's own id is kept
  ASSERT_TRUE(client->SetXattr(set).ok());
  ASSERT_TRUE(client->Open(42).ok());

  EXPECT_EQ("host1",
            Parse<proto::NewMountRequest>(meta.requests(MessageType::kNewMount)[0]).host());
  auto created = Parse<proto::CreateRequest>(meta.requests(MessageType::kCreate)[0]);
  EXPECT_EQ("f", created.name());
  EXPECT_EQ(7u, created.call().mount_id());
  EXPECT_EQ(1u, created.call().seq());
  auto unlinked = Parse<proto::UnlinkRequest>(meta.requests(MessageType::kUnlink)[0]);
  EXPECT_EQ(7u, unlinked.call().mount_id());
  EXPECT_EQ(2u, unlinked.call().seq());
  auto xattr = Parse<proto::SetXattrRequest>(meta.requests(MessageType::kSetXattr)[0]);
  EXPECT_EQ(99u, xattr.call().seq());
  auto open = Parse<proto::OpenRequest>(meta.requests(MessageType::kOpen)[0]);
  EXPECT_EQ(42u, open.ino());
  EXPECT_EQ(7u, open.mount_id());
  EXPECT_EQ(3u, client->NextCallId().seq());
}

TEST_F(MetaClientTest, CreateForWriteNamesTheMountAndFallsBackToOpenWriteOnAnOlderMeta) {
  // Goal: CreateForWrite sends a Create naming this mount as the writer
  // and returns the inode meta answers with; a meta from before the field
  // answers with the attr alone (AnswerAll), and the client then takes the
  // lease with OpenWrite of the new inode, as before.
  FakeServer meta(AnswerAll);
  auto client = ClientOf(meta.address(), absl::Seconds(10));
  ASSERT_TRUE(client->NewMount("host1").ok());
  proto::CreateRequest create;
  create.set_parent(1);
  create.set_name("f");
  auto opened = client->CreateForWrite(create);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(42u, opened->attr().ino());
  auto created = Parse<proto::CreateRequest>(meta.requests(MessageType::kCreate)[0]);
  EXPECT_EQ(7u, created.open_for_write_mount_id());
  ASSERT_EQ(1u, meta.requests(MessageType::kOpenWrite).size());
  EXPECT_EQ(42u, Parse<proto::OpenWriteRequest>(meta.requests(MessageType::kOpenWrite)[0]).ino());
}

TEST_F(MetaClientTest, MetaErrorIsFinalAndKeepsItsErrno) {
  FakeServer meta([](const format::Frame&, rpc::Responder responder) {
    responder.ReplyError(PosixError(ENOENT, "no such name"));
  });
  auto client = ClientOf(meta.address(), absl::Seconds(10));
  auto attr = client->Lookup(1, "missing");
  ASSERT_FALSE(attr.ok());
  EXPECT_EQ(ENOENT, AttachedErrno(attr.status()));
  EXPECT_TRUE(rpc::IsServerAnswer(attr.status()));
  EXPECT_EQ(1u, meta.requests().size());
}

TEST_F(MetaClientTest, TimedOutReadIsRetriedButOpenIsNot) {
  // Goal: the first request of each type goes unanswered (as if meta lost
  // it). GetAttr tries again and gets the second one answered; Open, which
  // pins without a call id, fails with kDeadlineExceeded after one; so does
  // the heartbeat, a session call.
  std::atomic<int> seen[128] = {};
  FakeServer meta([&](const format::Frame& request, rpc::Responder responder) {
    if (seen[static_cast<int>(request.type) % 128].fetch_add(1) == 0) return;  // held
    AnswerAll(request, std::move(responder));
  });
  auto client = ClientOf(meta.address(), absl::Seconds(10), absl::Milliseconds(200));
  auto attr = client->GetAttr(42);
  EXPECT_TRUE(attr.ok()) << attr.status();
  EXPECT_EQ(2u, meta.requests(MessageType::kGetAttr).size());
  auto open = client->Open(42);
  EXPECT_TRUE(absl::IsDeadlineExceeded(open.status())) << open.status();
  EXPECT_EQ(1u, meta.requests(MessageType::kOpen).size());
  absl::Status beat = client->MountHeartbeat(proto::MountHeartbeatRequest());
  EXPECT_TRUE(absl::IsDeadlineExceeded(beat)) << beat;
  EXPECT_EQ(1u, meta.requests(MessageType::kMountHeartbeat).size());
}

TEST_F(MetaClientTest, WithoutRetryWindowTransportErrorComesAsItIs) {
  // Goal: the admin tools' client reports a refused connection as the
  // transport's kUnavailable, at once; a mount's (zero window) reports it
  // as "meta unreachable".
  const std::string nobody = internal::FreeAddress();
  auto admin = ClientOf(nobody, std::nullopt);
  auto admin_statfs = admin->StatFs();
  EXPECT_TRUE(absl::IsUnavailable(admin_statfs.status())) << admin_statfs.status();
  EXPECT_FALSE(absl::StrContains(admin_statfs.status().message(), "unreachable"));
  auto mount = ClientOf(nobody, absl::ZeroDuration());
  auto mount_statfs = mount->StatFs();
  EXPECT_TRUE(absl::IsUnavailable(mount_statfs.status())) << mount_statfs.status();
  EXPECT_TRUE(absl::StrContains(mount_statfs.status().message(), "unreachable"))
      << mount_statfs.status();
}

TEST_F(MetaClientTest, ASessionWithoutAMountSendsChangesWithoutCallIds) {
  // Goal: a tool's session (no NewMount: `logfs clone`) stamps no call id.
  // Every such session would count from seq 1 under mount id 0, and meta
  // would answer a second tool's change with the first one's recorded
  // reply (a clone onto an existing name "succeeded").
  FakeServer meta([](const format::Frame& request, rpc::Responder responder) {
    AnswerAll(request, std::move(responder));
  });
  auto client = ClientOf(meta.address(), absl::Seconds(10));
  proto::CloneRequest clone;
  clone.set_ino(42);
  clone.set_new_parent(1);
  clone.set_new_name("copy");
  ASSERT_TRUE(client->Clone(clone).ok());
  auto sent = Parse<proto::CloneRequest>(meta.requests(MessageType::kClone)[0]);
  EXPECT_EQ(0u, sent.call().seq());
  EXPECT_EQ(0u, sent.call().mount_id());
}

TEST_F(MetaClientTest, CopyRangeCarriesTheMountIdAndTheCallersCallId) {
  // Goal: meta checks the lease of the mount the client says it is, and
  // the caller's call id (the same on every attempt) is not replaced.
  FakeServer meta([](const format::Frame& request, rpc::Responder responder) {
    AnswerAll(request, std::move(responder));
  });
  auto client = ClientOf(meta.address(), absl::Seconds(10));
  client->ResumeMount(/*mount_id=*/5, /*last_call_seq=*/0, /*cache_lease_ms=*/0);
  proto::CopyRangeRequest copy;
  copy.set_ino(42);
  copy.set_length(100);
  copy.set_dst_ino(43);
  copy.mutable_call()->set_mount_id(5);
  copy.mutable_call()->set_seq(77);
  ASSERT_TRUE(client->CopyRange(copy).ok());
  auto sent = Parse<proto::CopyRangeRequest>(meta.requests(MessageType::kCopyRange)[0]);
  EXPECT_EQ(5u, sent.mount_id());
  EXPECT_EQ(77u, sent.call().seq());
}

TEST_F(MetaClientTest, AsyncCallsAnswerOnce) {
  // Goal: AsyncSealSegment stamps a call id and completes OK;
  // ReportBadReplica hands meta's refusal to its callback.
  FakeServer meta([](const format::Frame& request, rpc::Responder responder) {
    if (request.type == MessageType::kReportBadReplica) {
      return responder.ReplyError(absl::FailedPreconditionError("segment open"));
    }
    AnswerAll(request, std::move(responder));
  });
  auto client = ClientOf(meta.address(), absl::Seconds(10));
  client->ResumeMount(/*mount_id=*/5, /*last_call_seq=*/0, /*cache_lease_ms=*/0);
  proto::SealSegmentRequest seal;
  seal.set_ino(42);
  seal.set_segment_id(3);
  seal.set_sealed_length(100);
  absl::Notification sealed;
  absl::Status seal_status = absl::UnknownError("not run");
  client->AsyncSealSegment(seal, [&](absl::StatusOr<proto::Inode> s) {
    seal_status = s.status();
    sealed.Notify();
  });
  proto::ReportBadReplicaRequest report;
  report.set_segment_id(3);
  report.set_server_id(2);
  absl::Notification reported;
  absl::Status report_status;
  client->ReportBadReplica(report, [&](absl::Status s) {
    report_status = s;
    reported.Notify();
  });
  ASSERT_TRUE(sealed.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(reported.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(seal_status.ok()) << seal_status;
  EXPECT_TRUE(absl::IsFailedPrecondition(report_status)) << report_status;
  auto sent = Parse<proto::SealSegmentRequest>(meta.requests(MessageType::kSealSegment)[0]);
  EXPECT_EQ(3u, sent.segment_id());
  EXPECT_EQ(100u, sent.sealed_length());
  EXPECT_EQ(1u, sent.call().seq());
  EXPECT_EQ(5u, sent.call().mount_id());
  EXPECT_EQ(2u,
            Parse<proto::ReportBadReplicaRequest>(meta.requests(MessageType::kReportBadReplica)[0])
                .server_id());
}

}  // namespace
}  // namespace logfs::client

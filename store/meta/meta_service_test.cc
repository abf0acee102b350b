// MetaService, meta's request handler, on a real Namespace: a request is
// parsed as its type's message and answered with the namespace's result;
// bodies that do not parse and types meta does not serve are
// kInvalidArgument; sessions follow NewMount's connection.
#include "store/meta/meta_service.h"

#include <gtest/gtest.h>

#include <string>

#include "store/format/frame.h"
#include "store/format/logfs.pb.h"
#include "store/format/message_type.h"
#include "store/meta/namespace/namespace_fixture.h"

namespace logfs::meta {
namespace {

class MetaServiceTest : public NamespaceFixture {
 protected:
  MetaService::Reply Call(format::MessageType type, const std::string& message,
                          uint64_t connection_id = 1) {
    format::Frame frame;
    frame.type = type;
    frame.message = message;
    frame.connection_id = connection_id;
    return MetaService(ns_.get()).Handle(frame);
  }
};

TEST_F(MetaServiceTest, CreateThenLookupAnswersTheAttr) {
  proto::CreateRequest create;
  create.set_parent(kRootIno);
  create.set_name("f");
  create.set_mode(0100644);
  auto created = Call(format::MessageType::kCreate, create.SerializeAsString());
  ASSERT_TRUE(created.ok()) << created.status();
  const auto& attr = static_cast<const proto::AttrResponse&>(**created).attr();

  proto::LookupRequest lookup;
  lookup.set_parent(kRootIno);
  lookup.set_name("f");
  auto found = Call(format::MessageType::kLookup, lookup.SerializeAsString());
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(static_cast<const proto::AttrResponse&>(**found).attr().ino(), attr.ino());
  EXPECT_EQ(static_cast<const proto::AttrResponse&>(**found).attr().mode(), 0100644u);
}

TEST_F(MetaServiceTest, UnparseableBodyIsInvalidArgument) {
  auto reply = Call(format::MessageType::kLookup, std::string("\xff\xff\xff", 3));
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(MetaServiceTest, TypeMetaDoesNotServeIsInvalidArgument) {
  auto reply = Call(format::MessageType::kAppend, "");
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(MetaServiceTest, NewMountsSessionEndsWithItsConnection) {
  MetaService service(ns_.get());
  format::Frame frame;
  frame.type = format::MessageType::kNewMount;
  frame.connection_id = 9;
  auto reply = service.Handle(frame);
  ASSERT_TRUE(reply.ok()) << reply.status();
  const uint64_t mount_id = static_cast<const proto::NewMountResponse&>(**reply).mount_id();
  EXPECT_EQ(service.TakeSession(8), std::nullopt);
  EXPECT_EQ(service.TakeSession(9), mount_id);
  EXPECT_EQ(service.TakeSession(9), std::nullopt);
}

// A session handed to a successor (`logfs mount --takeover`) outlives the
// predecessor's connection: whether the successor heartbeats first, or
// the predecessor said it hands the session off before it went.
TEST_F(MetaServiceTest, HandedOffSessionOutlivesItsFirstConnection) {
  MetaService service(ns_.get());
  format::Frame frame;
  frame.type = format::MessageType::kNewMount;
  frame.connection_id = 9;
  auto reply = service.Handle(frame);
  ASSERT_TRUE(reply.ok()) << reply.status();
  const uint64_t mount_id = static_cast<const proto::NewMountResponse&>(**reply).mount_id();
  auto heartbeat = [&](uint64_t connection, bool handing_off) {
    proto::MountHeartbeatRequest request;
    request.set_mount_id(mount_id);
    request.set_handing_off(handing_off);
    format::Frame f;
    f.type = format::MessageType::kMountHeartbeat;
    f.connection_id = connection;
    f.message = request.SerializeAsString();
    ASSERT_TRUE(service.Handle(f).ok());
  };
  // The successor heartbeats on connection 10 before 9 closes.
  heartbeat(10, false);
  EXPECT_EQ(service.TakeSession(9), std::nullopt);
  // Then hands off again, saying so, and its connection closes first.
  heartbeat(10, true);
  EXPECT_EQ(service.TakeSession(10), std::nullopt);
  // The third daemon's connection ends the session as usual, and so does
  // one whose handoff was called off.
  heartbeat(11, true);
  heartbeat(11, false);
  EXPECT_EQ(service.TakeSession(11), mount_id);
}

}  // namespace
}  // namespace logfs::meta

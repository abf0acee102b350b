// MetaServer over real TCP on 127.0.0.1: the RPCs reach the namespace and
// errors keep their errno; a bad frame closes only its own connection; an
// unparseable request gets kInvalidArgument; state survives a restart on
// the same data dir.
#include "store/meta/meta_server.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "src/status/posix_error.h"
#include "src/util/coding.h"
#include "store/format/frame.h"
#include "store/format/logfs.pb.h"
#include "store/format/message_type.h"
#include "store/rpc/rpc_client.h"

namespace logfs::meta {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(10);

class MetaServerTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = testing::TempDir() + "logfs_meta_server_test_XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(tmpl.data()));
    dir_ = tmpl;
    client_work_.emplace(asio::make_work_guard(client_io_));
    client_thread_ = std::thread([this] { client_io_.run(); });
    StartServer();
  }

  void TearDown() override {
    StopServer();
    client_work_.reset();
    client_io_.stop();
    client_thread_.join();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  void StartServer() {
    io_ = std::make_unique<asio::io_context>();
    work_.emplace(asio::make_work_guard(*io_));
    for (int i = 0; i < 3; ++i) io_threads_.emplace_back([this] { io_->run(); });
    MetaServerOptions options;
    options.data_dir = dir_ + "/meta";
    options.listen_address = "127.0.0.1:0";
    options.dead_server_ms = 60000;
    options.lease_timeout_ms = 60000;
    options.rpc_timeout_ms = 2000;
    options.default_replication = 3;
    options.wal_ack_quorum = 2;
    auto server = MetaServer::Start(options, *io_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    client_ = rpc::RpcClient::Create(client_io_, server_->bound_address());
  }

  // Closes the client, stops the server and its io threads, and closes the
  // database so another server can open it.
  //
  // The server's io threads stop before any client connection closes:
  // store/rpc/rpc_server.cc can pop an already emptied write queue when a peer
  // closes while a response write is completing, so tests never close
  // connections under a running server (except the garbage one, which the
  // server closes itself with nothing in flight).
  void StopServer() {
    if (server_ != nullptr) server_->Stop();
    work_.reset();
    if (io_ != nullptr) io_->stop();
    for (auto& thread : io_threads_) thread.join();
    io_threads_.clear();
    if (client_ != nullptr) client_->Shutdown();
    client_.reset();
    raw_sockets_.clear();
    server_.reset();
    io_.reset();
  }

  template <typename Response>
  absl::StatusOr<Response> Call(format::MessageType type,
                                const google::protobuf::MessageLite& request) {
    Response response;
    absl::Status status = client_->Call(type, request, &response, kTimeout);
    if (!status.ok()) return status;
    return response;
  }

  absl::StatusOr<proto::Attr> Create(uint64_t parent, const std::string& name, uint32_t mode) {
    proto::CreateRequest request;
    request.set_parent(parent);
    request.set_name(name);
    request.set_mode(mode);
    auto response = Call<proto::AttrResponse>(format::MessageType::kCreate, request);
    if (!response.ok()) return response.status();
    return response->attr();
  }

  absl::StatusOr<proto::Attr> Lookup(uint64_t parent, const std::string& name) {
    proto::LookupRequest request;
    request.set_parent(parent);
    request.set_name(name);
    auto response = Call<proto::AttrResponse>(format::MessageType::kLookup, request);
    if (!response.ok()) return response.status();
    return response->attr();
  }

  uint64_t RegisterServer(const std::string& address, uint64_t free_bytes) {
    proto::RegisterServerRequest request;
    request.set_address(address);
    request.set_capacity_bytes(100ull << 30);
    request.set_free_bytes(free_bytes);
    auto response =
        Call<proto::RegisterServerResponse>(format::MessageType::kRegisterServer, request);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? response->server_id() : 0;
  }

  // A blocking socket to the server with a receive timeout, for raw frames.
  // Owned by the fixture; closed in StopServer().
  asio::ip::tcp::socket* RawConnect() {
    raw_sockets_.push_back(std::make_unique<asio::ip::tcp::socket>(raw_io_));
    asio::ip::tcp::socket* socket = raw_sockets_.back().get();
    auto colon = server_->bound_address().rfind(':');
    asio::ip::tcp::endpoint endpoint(
        asio::ip::make_address("127.0.0.1"),
        static_cast<uint16_t>(std::stoi(server_->bound_address().substr(colon + 1))));
    asio::error_code ec;
    socket->connect(endpoint, ec);
    EXPECT_FALSE(ec) << ec.message();
    timeval timeout{10, 0};
    setsockopt(socket->native_handle(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    return socket;
  }

  std::string dir_;
  asio::io_context client_io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> client_work_;
  std::thread client_thread_;
  asio::io_context raw_io_;
  std::vector<std::unique_ptr<asio::ip::tcp::socket>> raw_sockets_;

  std::unique_ptr<asio::io_context> io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::vector<std::thread> io_threads_;
  std::unique_ptr<MetaServer> server_;
  std::shared_ptr<rpc::RpcClient> client_;
};

TEST_F(MetaServerTest, OpenWriteAndSealPlaceSegmentOnThreeServers) {
  // (a) three segment servers and a mount announce themselves.
  std::set<uint64_t> ids;
  for (int i = 1; i <= 3; ++i) {
    ids.insert(RegisterServer("127.0.0.1:" + std::to_string(9000 + i), (1ull << 30) * i));
  }
  EXPECT_EQ(3u, ids.size());
  auto mount =
      Call<proto::NewMountResponse>(format::MessageType::kNewMount, proto::NewMountRequest());
  ASSERT_TRUE(mount.ok()) << mount.status();
  EXPECT_NE(0u, mount->mount_id());
  // (b) a file, with POSIX errors carried back with their errno.
  auto file = Create(1, "wal.log", S_IFREG | 0644);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(EEXIST, AttachedErrno(Create(1, "wal.log", S_IFREG | 0644).status()));
  EXPECT_EQ(ENOENT, AttachedErrno(Lookup(1, "missing").status()));
  EXPECT_EQ(file->ino(), Lookup(1, "wal.log")->ino());
  // (c) OpenWrite, then the first segment.
  proto::OpenWriteRequest open;
  open.set_ino(file->ino());
  open.set_mount_id(mount->mount_id());
  auto opened = Call<proto::InodeResponse>(format::MessageType::kOpenWrite, open);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_TRUE(opened->inode().attr().open_for_write());
  proto::SealSegmentRequest seal;
  seal.set_ino(file->ino());
  seal.set_mount_id(mount->mount_id());
  auto sealed = Call<proto::InodeResponse>(format::MessageType::kSealSegment, seal);
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  ASSERT_EQ(1, sealed->inode().segments_size());
  const proto::Segment& segment = sealed->inode().segments(0);
  ASSERT_EQ(3, segment.replicas_size());
  std::set<std::string> addresses;
  for (const auto& replica : segment.replicas()) addresses.insert(replica.address());
  EXPECT_EQ((std::set<std::string>{"127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.1:9003"}),
            addresses);
  // (d) another mount is refused.
  open.set_mount_id(mount->mount_id() + 1);
  auto busy = Call<proto::InodeResponse>(format::MessageType::kOpenWrite, open);
  EXPECT_EQ(EBUSY, AttachedErrno(busy.status()));
  auto statfs = Call<proto::StatFsResponse>(format::MessageType::kStatFs, proto::Empty());
  ASSERT_TRUE(statfs.ok());
  EXPECT_EQ(3u, statfs->live_servers());
  EXPECT_EQ(2u, statfs->inodes());
}

TEST_F(MetaServerTest, UnparseableRequestGetsInvalidArgument) {
  auto socket = RawConnect();
  // Field 1 with wire type 7 (invalid): valid frame, garbage protobuf.
  std::string wire =
      format::EncodeFrame(0, format::MessageType::kLookup, 5, std::string("\x0f\xff\xff", 3), "");
  asio::error_code ec;
  asio::write(*socket, asio::buffer(wire), ec);
  ASSERT_FALSE(ec);
  char header[format::kFrameHeaderBytes];
  asio::read(*socket, asio::buffer(header, format::kFrameHeaderBytes), ec);
  ASSERT_FALSE(ec) << ec.message();
  auto decoded = format::DecodeFrameHeader(header);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(5u, decoded->request_id);
  EXPECT_EQ(format::kFlagResponse | format::kFlagError, decoded->flags);
  std::string message(decoded->message_bytes, '\0');
  asio::read(*socket, asio::buffer(message), ec);
  ASSERT_FALSE(ec);
  proto::ErrorResponse error;
  ASSERT_TRUE(error.ParseFromString(message));
  EXPECT_EQ(static_cast<int>(absl::StatusCode::kInvalidArgument), error.code());
  // The connection is still usable.
  proto::GetAttrRequest getattr;
  getattr.set_ino(1);
  wire = format::EncodeFrame(0, format::MessageType::kGetAttr, 6, getattr.SerializeAsString(), "");
  asio::write(*socket, asio::buffer(wire), ec);
  asio::read(*socket, asio::buffer(header, format::kFrameHeaderBytes), ec);
  ASSERT_FALSE(ec) << ec.message();
  decoded = format::DecodeFrameHeader(header);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(format::kFlagResponse, decoded->flags);
  message.assign(decoded->message_bytes, '\0');
  asio::read(*socket, asio::buffer(message), ec);
  ASSERT_FALSE(ec);
  proto::AttrResponse attr;
  ASSERT_TRUE(attr.ParseFromString(message));
  EXPECT_EQ(1u, attr.attr().ino());
}

TEST_F(MetaServerTest, GarbageFrameClosesOnlyThatConnection) {
  ASSERT_TRUE(Create(1, "before", S_IFREG | 0644).ok());
  auto socket = RawConnect();
  std::string garbage(format::kFrameHeaderBytes, 'x');
  asio::error_code ec;
  asio::write(*socket, asio::buffer(garbage), ec);
  ASSERT_FALSE(ec);
  char byte;
  asio::read(*socket, asio::buffer(&byte, 1), ec);
  EXPECT_EQ(asio::error::eof, ec) << ec.message();
  // The client's own connection still works.
  auto attr = Lookup(1, "before");
  ASSERT_TRUE(attr.ok()) << attr.status();
  EXPECT_TRUE(Create(1, "after", S_IFREG | 0644).ok());
}

TEST_F(MetaServerTest, RestartOnSameDirKeepsNamespaceAndServers) {
  uint64_t server_id = RegisterServer("127.0.0.1:9100", 5ull << 30);
  auto dir = Create(1, "dir", S_IFDIR | 0755);
  ASSERT_TRUE(dir.ok());
  auto file = Create(dir->ino(), "file", S_IFREG | 0600);
  ASSERT_TRUE(file.ok());

  StopServer();
  StartServer();

  auto found = Lookup(dir->ino(), "file");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(file->ino(), found->ino());
  EXPECT_EQ(static_cast<uint32_t>(S_IFREG | 0600), found->mode());
  proto::HeartbeatRequest heartbeat;
  heartbeat.set_server_id(server_id);
  auto response = Call<proto::HeartbeatResponse>(format::MessageType::kHeartbeat, heartbeat);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_FALSE(response->reregister());
  // A second meta on the same dir while this one runs is refused.
  asio::io_context other_io;
  MetaServerOptions options;
  options.data_dir = dir_ + "/meta";
  options.listen_address = "127.0.0.1:0";
  auto second = MetaServer::Start(options, other_io);
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, second.status().code()) << second.status();
}

}  // namespace
}  // namespace logfs::meta

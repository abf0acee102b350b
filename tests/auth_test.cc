// Authenticated connections against real `logfs meta` and `logfs segd`
// processes (README "Authentication", docs/wire_format.md): a peer with no
// secret or the wrong one reads, appends, seals, fences, deletes and lists
// nothing; a tampered, replayed or reordered frame closes an authenticated
// connection; and processes configured with and without a secret fail
// with a message that says so, never a hang.
#include <arpa/inet.h>
#include <glog/logging.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "src/cluster/local_cluster.h"
#include "src/env/secret_file.h"
#include "src/util/crc32c.h"
#include "store/client/meta_client.h"
#include "store/client/segd_client.h"
#include "store/format/error_codec.h"
#include "store/format/frame.h"
#include "store/format/logfs.pb.h"
#include "store/rpc/client_pool.h"
#include "store/rpc/frame_auth.h"
#include "store/rpc/io_threads.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

constexpr uint64_t kRootIno = 1;
constexpr uint64_t kSegment = 7001;
const std::string kWrongSecret = "this-is-not-the-cluster-secret-0123456789abcdef";

// A loopback TCP connection as a raw socket, with bounded reads.
class RawConnection {
 public:
  explicit RawConnection(const std::string& address) {
    const size_t colon = address.rfind(':');
    int port = 0;
    CHECK(absl::SimpleAtoi(address.substr(colon + 1), &port));
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, address.substr(0, colon).c_str(), &addr.sin_addr);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~RawConnection() { ::close(fd_); }
  bool connected() const { return connected_; }

  bool Send(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  // Exactly `n` bytes, or fewer if the peer closes or 5 s pass.
  std::string Receive(size_t n) {
    std::string out(n, '\0');
    size_t got = 0;
    while (got < n) {
      const ssize_t r = ::recv(fd_, out.data() + got, n - got, 0);
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    out.resize(got);
    return out;
  }
  // Everything until the peer closes; `closed` false if it did not
  // within 5 s.
  std::string ReceiveUntilClosed(bool* closed) {
    std::string out;
    char buf[4096];
    for (int i = 0; i < 10000; ++i) {
      const ssize_t r = ::recv(fd_, buf, sizeof(buf), 0);
      if (r == 0 || (r < 0 && errno == ECONNRESET)) {
        *closed = true;
        return out;
      }
      if (r < 0) break;  // timeout
      out.append(buf, static_cast<size_t>(r));
    }
    *closed = false;
    return out;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

std::string Frame(format::MessageType type, const google::protobuf::MessageLite& request,
                  const std::string& data = "") {
  return format::EncodeFrame(0, type, 42, request.SerializeAsString(), data);
}

// An authenticated raw connection: the handshake by hand, then frames
// tagged with this side's FrameMac.
class AuthenticatedRaw {
 public:
  AuthenticatedRaw(const std::string& address, const std::string& secret) : conn_(address) {
    const std::string client_hello = rpc::EncodeHello(*rpc::NewHello(rpc::AuthRole::kClient, "t"));
    conn_.Send(client_hello);
    const std::string answer = conn_.Receive(rpc::kAuthHelloBytes + rpc::kAuthProofBytes);
    if (answer.size() != rpc::kAuthHelloBytes + rpc::kAuthProofBytes) return;
    const std::string server_hello = answer.substr(0, rpc::kAuthHelloBytes);
    auto keys = rpc::DeriveAuthKeys(secret, client_hello, server_hello);
    server_proof_ok_ =
        rpc::ProofsEqual(answer.substr(rpc::kAuthHelloBytes),
                         rpc::AuthProof(*keys, rpc::AuthRole::kServer, client_hello, server_hello));
    conn_.Send(rpc::AuthProof(*keys, rpc::AuthRole::kClient, client_hello, server_hello));
    send_ = std::make_unique<rpc::FrameMac>(keys->client_to_server);
  }
  bool server_proof_ok() const { return server_proof_ok_; }
  // `frame` (a whole encoded frame) with its tag.
  std::string Tagged(const std::string& frame) {
    char tag[rpc::kAuthTagBytes];
    const absl::string_view body = absl::string_view(frame).substr(format::kFrameHeaderBytes);
    auto header = format::DecodeFrameHeader(frame.data());
    CHECK(header.ok());
    send_->Sign(frame.data(), body.substr(0, header->message_bytes),
                body.substr(header->message_bytes), tag);
    return frame + std::string(tag, sizeof(tag));
  }
  RawConnection& conn() { return conn_; }

 private:
  RawConnection conn_;
  bool server_proof_ok_ = false;
  std::unique_ptr<rpc::FrameMac> send_;
};

class AuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/auth_test.XXXXXX";
    ASSERT_NE(nullptr, ::mkdtemp(tmpl));
    root_ = tmpl;
    cluster::LocalClusterOptions options;
    options.binary = LogfsBinary();
    options.data_dir = root_ + "/data";
    options.segment_servers = 1;
    options.authenticate = true;
    auto started = cluster::LocalCluster::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    cluster_ = std::move(*started);
    auto secret = env::ReadSecretFile(cluster_->cluster_secret_file());
    ASSERT_TRUE(secret.ok()) << secret.status();
    secret_ = *secret;
    key_ = *rpc::ClusterKey::Create(secret_, "auth_test");
    pool_ = std::make_unique<rpc::ClientPool>(io_.io(), key_);
    segd_ = std::make_unique<client::SegdClient>(*pool_);
    client::MetaClientOptions meta_options;
    meta_options.timeout = absl::Seconds(5);
    meta_options.retry_window = std::nullopt;
    meta_ = std::make_unique<client::MetaClient>(io_.io(), pool_->Get(cluster_->meta_address()),
                                                 meta_options);
  }
  void TearDown() override {
    if (pool_ != nullptr) pool_->ShutdownAll();
    if (cluster_ != nullptr) cluster_->Stop();
    std::filesystem::remove_all(root_);
  }
  const std::string& segd() const { return cluster_->segd_address(0); }
  std::string meta() const { return cluster_->meta_address(); }

  // The replica every attack aims at: open, epoch 1, "hello".
  void MakeReplica() {
    ASSERT_TRUE(segd_->CreateSegment(segd(), kSegment, 1, absl::Seconds(5)).ok());
    ASSERT_TRUE(segd_->Append(segd(), AppendRequest(0), "hello", absl::Seconds(5)).ok());
  }
  static proto::AppendRequest AppendRequest(uint64_t offset, const std::string& data = "hello") {
    proto::AppendRequest append;
    append.set_segment_id(kSegment);
    append.set_epoch(1);
    append.set_offset(offset);
    append.set_sync(true);
    append.set_crc32c(util::Crc32c(data.data(), data.size()));
    return append;
  }
  // The replica is as MakeReplica left it.
  void ExpectReplicaUnchanged() {
    auto info = segd_->SegmentInfo(segd(), kSegment, absl::Seconds(5));
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(5u, info->length());
    EXPECT_EQ(1u, info->epoch());
    EXPECT_FALSE(info->sealed());
  }

  // The segd requests of every kind an intruder tries.
  std::vector<std::string> SegdAttacks() {
    proto::ReadRequest read;
    read.set_segment_id(kSegment);
    read.set_length(5);
    proto::SegmentInfoRequest info;
    info.set_segment_id(kSegment);
    proto::SealRequest seal;
    seal.set_segment_id(kSegment);
    seal.set_epoch(1);
    seal.set_length(5);
    proto::CreateSegmentRequest fence;
    fence.set_segment_id(kSegment);
    fence.set_epoch(9);
    proto::DeleteSegmentRequest del;
    del.set_segment_id(kSegment);
    return {Frame(format::MessageType::kRead, read),
            Frame(format::MessageType::kSegmentInfo, info),
            Frame(format::MessageType::kAppend, AppendRequest(5, "EVIL!"), "EVIL!"),
            Frame(format::MessageType::kSeal, seal),
            Frame(format::MessageType::kCreateSegment, fence),
            Frame(format::MessageType::kDeleteSegment, del),
            Frame(format::MessageType::kServerStats, proto::Empty())};
  }
  std::vector<std::string> MetaAttacks() {
    proto::LookupRequest lookup;
    lookup.set_parent(kRootIno);
    lookup.set_name("keep");
    proto::CreateRequest create;
    create.set_parent(kRootIno);
    create.set_name("intruder");
    create.set_mode(S_IFREG | 0644);
    proto::UnlinkRequest unlink;
    unlink.set_parent(kRootIno);
    unlink.set_name("keep");
    proto::ReaddirRequest readdir;
    readdir.set_ino(kRootIno);
    proto::ListSegmentsRequest segments;
    proto::ListServersRequest servers;
    proto::SealSegmentRequest seal;
    proto::RecoverLeaseRequest recover;
    return {Frame(format::MessageType::kLookup, lookup),
            Frame(format::MessageType::kCreate, create),
            Frame(format::MessageType::kUnlink, unlink),
            Frame(format::MessageType::kReaddir, readdir),
            Frame(format::MessageType::kListSegments, segments),
            Frame(format::MessageType::kListServers, servers),
            Frame(format::MessageType::kSealSegment, seal),
            Frame(format::MessageType::kRecoverLease, recover)};
  }
  void MakeKeepFile() {
    proto::CreateRequest create;
    create.set_parent(kRootIno);
    create.set_name("keep");
    create.set_mode(S_IFREG | 0644);
    ASSERT_TRUE(meta_->Create(create).ok());
  }
  void ExpectNamespaceUnchanged() {
    EXPECT_TRUE(meta_->Lookup(kRootIno, "keep").ok());
    EXPECT_FALSE(meta_->Lookup(kRootIno, "intruder").ok());
  }

  std::string root_;
  std::unique_ptr<cluster::LocalCluster> cluster_;
  std::string secret_;
  rpc::ClusterKeyPtr key_;
  rpc::IoThreads io_{1};
  std::unique_ptr<rpc::ClientPool> pool_;
  std::unique_ptr<client::SegdClient> segd_;
  std::unique_ptr<client::MetaClient> meta_;
};

// A plain frame (no secret) gets one error frame saying authentication is
// required, then the connection closes: nothing else comes back.
void ExpectRefusedPlain(const std::string& address, const std::string& frame) {
  RawConnection conn(address);
  ASSERT_TRUE(conn.connected());
  ASSERT_TRUE(conn.Send(frame));
  bool closed = false;
  const std::string answer = conn.ReceiveUntilClosed(&closed);
  EXPECT_TRUE(closed);
  ASSERT_GE(answer.size(), format::kFrameHeaderBytes);
  auto header = format::DecodeFrameHeader(answer.data());
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(format::kFlagResponse | format::kFlagError, header->flags);
  ASSERT_EQ(answer.size(), format::kFrameHeaderBytes + header->message_bytes);
  absl::Status error = format::DecodeErrorBody(answer.substr(format::kFrameHeaderBytes));
  EXPECT_EQ(absl::StatusCode::kUnauthenticated, error.code()) << error;
  EXPECT_NE(std::string::npos, error.message().find("--cluster_secret_file")) << error;
}

// A peer with the wrong secret: the server's proof does not match its
// own, and its own proof and tagged frame get the connection closed with
// no answer.
void ExpectRefusedWrongSecret(const std::string& address, const std::string& frame) {
  AuthenticatedRaw raw(address, kWrongSecret);
  EXPECT_FALSE(raw.server_proof_ok());
  raw.conn().Send(raw.Tagged(frame));
  bool closed = false;
  EXPECT_EQ("", raw.conn().ReceiveUntilClosed(&closed));
  EXPECT_TRUE(closed);
}

TEST_F(AuthTest, SegdServesNothingWithoutTheSecret) {
  // Goal: no read, append, seal, fence, delete or stats call of a peer
  // without the secret, or with another, reaches segd. Method: (a) make a
  // replica through an authenticated client; (b) send every kind of
  // request as a plain frame, and after a handshake with a wrong secret,
  // each on a raw socket: each connection closes; (c) the replica is as
  // it was.
  MakeReplica();
  for (const std::string& frame : SegdAttacks()) {
    ExpectRefusedPlain(segd(), frame);
    ExpectRefusedWrongSecret(segd(), frame);
  }
  ExpectReplicaUnchanged();
  auto read = segd_->Read(
      segd(),
      [] {
        proto::ReadRequest r;
        r.set_segment_id(kSegment);
        r.set_length(5);
        return r;
      }(),
      absl::Seconds(5));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ("hello", read->data);
}

TEST_F(AuthTest, MetaServesNothingWithoutTheSecret) {
  // The same against meta: lookups, creates, unlinks, listings, seals
  // and lease recovery of an unauthenticated peer change and show nothing.
  MakeKeepFile();
  for (const std::string& frame : MetaAttacks()) {
    ExpectRefusedPlain(meta(), frame);
    ExpectRefusedWrongSecret(meta(), frame);
  }
  ExpectNamespaceUnchanged();
}

TEST_F(AuthTest, TamperedReplayedAndReorderedFramesCloseTheConnection) {
  // Goal: on an authenticated connection, a frame whose bytes changed, a
  // frame sent twice, and two frames swapped each close the connection
  // before they are served. Method: a raw connection with the right
  // secret; (a) a good tagged SegmentInfo is answered; (b) a tampered
  // append (data changed after tagging), (c) a replay of (a) and (d) two
  // appends in swapped order each get the connection closed with no
  // answer, and the replica is unchanged.
  MakeReplica();
  proto::SegmentInfoRequest info;
  info.set_segment_id(kSegment);
  const std::string info_frame = Frame(format::MessageType::kSegmentInfo, info);
  const std::string append =
      Frame(format::MessageType::kAppend, AppendRequest(5, "EVIL!"), "EVIL!");
  {  // (a), then (c)
    AuthenticatedRaw raw(segd(), secret_);
    ASSERT_TRUE(raw.server_proof_ok());
    const std::string tagged = raw.Tagged(info_frame);
    ASSERT_TRUE(raw.conn().Send(tagged));
    const std::string answer = raw.conn().Receive(format::kFrameHeaderBytes);
    ASSERT_EQ(format::kFrameHeaderBytes, answer.size());
    auto header = format::DecodeFrameHeader(answer.data());
    ASSERT_TRUE(header.ok());
    EXPECT_EQ(format::kFlagResponse, header->flags);  // served, not an error
    raw.conn().Receive(header->message_bytes + header->data_bytes + rpc::kAuthTagBytes);
    ASSERT_TRUE(raw.conn().Send(tagged));  // the replay
    bool closed = false;
    EXPECT_EQ("", raw.conn().ReceiveUntilClosed(&closed));
    EXPECT_TRUE(closed);
  }
  {  // (b)
    AuthenticatedRaw raw(segd(), secret_);
    std::string tampered = raw.Tagged(append);
    tampered[tampered.size() - rpc::kAuthTagBytes - 1] ^= 1;  // a data byte
    ASSERT_TRUE(raw.conn().Send(tampered));
    bool closed = false;
    EXPECT_EQ("", raw.conn().ReceiveUntilClosed(&closed));
    EXPECT_TRUE(closed);
  }
  {  // (d)
    AuthenticatedRaw raw(segd(), secret_);
    const std::string first = raw.Tagged(append);
    const std::string second = raw.Tagged(info_frame);
    ASSERT_TRUE(raw.conn().Send(second + first));
    bool closed = false;
    EXPECT_EQ("", raw.conn().ReceiveUntilClosed(&closed));
    EXPECT_TRUE(closed);
  }
  ExpectReplicaUnchanged();
}

TEST_F(AuthTest, ToolsWithoutOrWithAnotherSecretFailClearly) {
  // Goal: a secret on some processes and not others fails with a message
  // naming the cause, at once. Method: `logfs status` (a) without a
  // secret, (b) with another one, (c) with a group-readable one, (d) with
  // the cluster's; (e) a segd with another secret exits saying meta
  // refused it.
  const std::string bin = LogfsBinary();
  const std::string other = root_ + "/other.secret";
  ASSERT_TRUE(env::CreateSecretFile(other, kWrongSecret).ok());
  const std::string loose = root_ + "/loose.secret";
  ASSERT_TRUE(env::CreateSecretFile(loose, kWrongSecret).ok());
  ASSERT_EQ(0, ::chmod(loose.c_str(), 0640));
  const absl::Time start = absl::Now();
  CommandResult plain = RunCommand(absl::StrCat(bin, " status --meta=", meta()));
  EXPECT_EQ(1, plain.exit_code) << plain.output;
  EXPECT_NE(std::string::npos, plain.output.find("--cluster_secret_file")) << plain.output;
  CommandResult wrong =
      RunCommand(absl::StrCat(bin, " status --meta=", meta(), " --cluster_secret_file=", other));
  EXPECT_EQ(1, wrong.exit_code) << wrong.output;
  EXPECT_NE(std::string::npos, wrong.output.find("refused authentication")) << wrong.output;
  CommandResult loose_run =
      RunCommand(absl::StrCat(bin, " status --meta=", meta(), " --cluster_secret_file=", loose));
  EXPECT_EQ(1, loose_run.exit_code) << loose_run.output;
  EXPECT_NE(std::string::npos, loose_run.output.find("mode 0640")) << loose_run.output;
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));  // no retries, no hang
  CommandResult good = RunCommand(absl::StrCat(
      bin, " status --meta=", meta(), " --cluster_secret_file=", cluster_->cluster_secret_file()));
  EXPECT_EQ(0, good.exit_code) << good.output;
  CommandResult segd = RunCommand(absl::StrCat("timeout 20 ", bin, " segd --data_dir=", root_,
                                               "/intruder --meta=", meta(),
                                               " --cluster_secret_file=", other, " 2>&1"));
  EXPECT_NE(0, segd.exit_code);
  EXPECT_NE(124, segd.exit_code) << "hung: " << segd.output;
  EXPECT_NE(std::string::npos, segd.output.find("refused authentication")) << segd.output;
  EXPECT_NE(std::string::npos, segd.output.find("--cluster_secret_file")) << segd.output;
  // (f) A segd without a secret says so, without the status payloads
  // ("[logfs/server_answer='1']") meant for code.
  CommandResult bare = RunCommand(absl::StrCat("timeout 20 ", bin, " segd --data_dir=", root_,
                                               "/bare --meta=", meta(), " 2>&1"));
  EXPECT_EQ(1, bare.exit_code) << bare.output;
  EXPECT_NE(std::string::npos, bare.output.find("--cluster_secret_file")) << bare.output;
  EXPECT_EQ(std::string::npos, bare.output.find("[logfs/")) << bare.output;
}

TEST_F(AuthTest, MountWithoutTheSecretFailsClearly) {
  // A mount of an authenticated cluster without the secret exits with the
  // reason; with it, it mounts.
  const std::string mnt = root_ + "/mnt";
  std::filesystem::create_directories(mnt);
  CommandResult mount =
      RunCommand(absl::StrCat("timeout 30 ", LogfsBinary(), " mount --meta=", meta(),
                              " --log_file=", root_, "/mount.log ", mnt, " 2>&1"));
  if (mount.exit_code == 0) RunCommand("fusermount3 -uz " + mnt);
  EXPECT_EQ(1, mount.exit_code) << mount.output;
  EXPECT_NE(std::string::npos, mount.output.find("--cluster_secret_file")) << mount.output;
}

// The embedded default: a secret made in the data dir, owner-only, used
// again on the next start.
TEST_F(AuthTest, LocalClusterMakesAnOwnerOnlySecretOnce) {
  struct stat st;
  ASSERT_EQ(0, ::stat(cluster_->cluster_secret_file().c_str(), &st));
  EXPECT_EQ(0600u, st.st_mode & 07777);
  EXPECT_EQ(64u, secret_.size());  // 32 random bytes, hex
  cluster_->Stop();
  cluster::LocalClusterOptions options;
  options.binary = LogfsBinary();
  options.data_dir = root_ + "/data";
  options.segment_servers = 1;
  options.authenticate = true;
  auto again = cluster::LocalCluster::Start(options);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(secret_, *env::ReadSecretFile((*again)->cluster_secret_file()));
  (*again)->Stop();
}

}  // namespace
}  // namespace logfs::testing

// Fuzz target: meta's request handlers behind the frame decoder
// (store/meta/meta_service.h), each request as the decoder hands it over
// (a type meta serves, any body), on a real Namespace over RocksDB in a
// scratch dir made once per process. State carries over between inputs,
// as on a long-running meta.
//
// Input: requests as fuzz/fuzz_input.h describes, at most 16 per input;
// the selector picks one of meta's 26 message types. Segment servers are a
// fake that answers at once (no network): SegmentInfo and Fence report a
// replica whose length follows from its id, Seal seals at the asked
// length, copies succeed.
//
// Checks beyond the sanitizers: a handler's error is never OK, and a
// response always serializes within the frame limit.
#include <glog/logging.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "store/format/frame.h"
#include "store/format/logfs.pb.h"
#include "store/format/message_type.h"
#include "store/meta/meta_service.h"
#include "store/meta/metadata_db.h"
#include "store/meta/namespace.h"
#include "store/meta/segd_api.h"

namespace logfs::fuzz {
namespace {

using format::MessageType;

constexpr size_t kRequestsMax = 16;
constexpr uint16_t kMetaTypes = static_cast<uint16_t>(MessageType::kMetaTypeEnd) - 1;

MessageType MetaType(uint8_t selector) {
  return static_cast<MessageType>(1 + selector % kMetaTypes);
}
uint8_t Selector(MessageType type) { return static_cast<uint8_t>(static_cast<int>(type) - 1); }

class FakeSegmentServers : public meta::SegmentServerApi {
 public:
  absl::StatusOr<proto::SegmentInfoResponse> SegmentInfo(const std::string&,
                                                         uint64_t segment_id) override {
    proto::SegmentInfoResponse info;
    info.set_segment_id(segment_id);
    info.set_epoch(1);
    info.set_length(segment_id % 5000);
    info.set_durable_length(segment_id % 5000);
    return info;
  }
  absl::StatusOr<proto::SegmentInfoResponse> Seal(const std::string&, uint64_t segment_id,
                                                  uint64_t epoch, uint64_t length) override {
    proto::SegmentInfoResponse info;
    info.set_segment_id(segment_id);
    info.set_epoch(epoch);
    info.set_length(length);
    info.set_durable_length(length);
    info.set_sealed(true);
    return info;
  }
  std::vector<absl::Status> CopySegments(const std::vector<meta::RereplicationTask>& tasks,
                                         absl::Duration) override {
    return std::vector<absl::Status>(tasks.size(), absl::OkStatus());
  }
};

struct Meta {
  std::string dir;
  FakeSegmentServers servers;
  std::unique_ptr<meta::MetadataDb> db;
  std::unique_ptr<meta::Namespace> ns;
  std::unique_ptr<meta::MetaService> service;
};

Meta& TheMeta() {
  static Meta* m = [] {
    auto* m = new Meta;
    m->dir = MakeScratchDir("meta");
    auto db = meta::MetadataDb::Open({m->dir + "/metadb"});
    CHECK(db.ok()) << db.status();
    m->db = std::move(*db);
    meta::NamespaceOptions options;
    auto ns = meta::Namespace::Open(m->db.get(), &m->servers, options);
    CHECK(ns.ok()) << ns.status();
    m->ns = std::move(*ns);
    m->service = std::make_unique<meta::MetaService>(m->ns.get());
    return m;
  }();
  return *m;
}

proto::CallId Call(uint64_t mount, uint64_t seq) {
  proto::CallId call;
  call.set_mount_id(mount);
  call.set_seq(seq);
  return call;
}

FuzzRequest Request(MessageType type, const google::protobuf::MessageLite& message) {
  return FuzzRequest{Selector(type), message.SerializeAsString(), ""};
}

// One valid request per message type, then sequences that build on each
// other (a server registers and heartbeats; a mount creates, writes and
// seals a file).
std::vector<Seed> Seeds() {
  std::vector<FuzzRequest> one;
  proto::RegisterServerRequest reg;
  reg.set_address("127.0.0.1:7100");
  reg.set_capacity_bytes(1 << 30);
  reg.set_free_bytes(1 << 29);
  reg.set_host("h1");
  reg.set_incarnation(42);
  one.push_back(Request(MessageType::kRegisterServer, reg));
  proto::HeartbeatRequest hb;
  hb.set_server_id(1);
  hb.set_capacity_bytes(1 << 30);
  hb.set_free_bytes(1 << 29);
  hb.set_incarnation(42);
  hb.set_report_id(1);
  auto* replica = hb.add_report();
  replica->set_segment_id(1);
  replica->set_length(10);
  hb.set_report_done(true);
  one.push_back(Request(MessageType::kHeartbeat, hb));
  proto::LookupRequest lookup;
  lookup.set_parent(meta::kRootIno);
  lookup.set_name("f");
  one.push_back(Request(MessageType::kLookup, lookup));
  proto::GetAttrRequest get_attr;
  get_attr.set_ino(meta::kRootIno);
  one.push_back(Request(MessageType::kGetAttr, get_attr));
  proto::SetAttrRequest set_attr;
  set_attr.set_ino(2);
  set_attr.set_to_set(0xff);
  set_attr.set_mode(0644);
  set_attr.set_size(3);
  *set_attr.mutable_call() = Call(1, 3);
  one.push_back(Request(MessageType::kSetAttr, set_attr));
  proto::CreateRequest create;
  create.set_parent(meta::kRootIno);
  create.set_name("f");
  create.set_mode(0100644);
  *create.mutable_call() = Call(1, 1);
  one.push_back(Request(MessageType::kCreate, create));
  proto::UnlinkRequest unlink;
  unlink.set_parent(meta::kRootIno);
  unlink.set_name("g");
  *unlink.mutable_call() = Call(1, 5);
  one.push_back(Request(MessageType::kUnlink, unlink));
  proto::RenameRequest rename;
  rename.set_parent(meta::kRootIno);
  rename.set_name("f");
  rename.set_new_parent(meta::kRootIno);
  rename.set_new_name("g");
  *rename.mutable_call() = Call(1, 4);
  one.push_back(Request(MessageType::kRename, rename));
  one.push_back(Request(MessageType::kReadlink, get_attr));
  proto::ReaddirRequest readdir;
  readdir.set_ino(meta::kRootIno);
  one.push_back(Request(MessageType::kReaddir, readdir));
  proto::SetXattrRequest set_xattr;
  set_xattr.set_ino(meta::kRootIno);
  set_xattr.set_name("user.logfs.kind");
  set_xattr.set_value("wal");
  *set_xattr.mutable_call() = Call(1, 2);
  one.push_back(Request(MessageType::kSetXattr, set_xattr));
  proto::GetXattrRequest get_xattr;
  get_xattr.set_ino(meta::kRootIno);
  get_xattr.set_name("user.logfs.segments");
  one.push_back(Request(MessageType::kGetXattr, get_xattr));
  one.push_back(Request(MessageType::kListXattr, get_attr));
  *get_xattr.mutable_call() = Call(1, 6);
  one.push_back(Request(MessageType::kRemoveXattr, get_xattr));
  one.push_back(Request(MessageType::kStatFs, proto::Empty()));
  proto::OpenRequest open;
  open.set_ino(2);
  open.set_mount_id(1);
  one.push_back(Request(MessageType::kOpen, open));
  proto::ReleaseRequest release;
  release.set_ino(2);
  release.set_mount_id(1);
  one.push_back(Request(MessageType::kRelease, release));
  proto::OpenWriteRequest open_write;
  open_write.set_ino(2);
  open_write.set_mount_id(1);
  one.push_back(Request(MessageType::kOpenWrite, open_write));
  proto::SealSegmentRequest seal;
  seal.set_ino(2);
  seal.set_mount_id(1);
  seal.set_segment_id(1);
  seal.set_sealed_length(10);
  seal.set_close(true);
  one.push_back(Request(MessageType::kSealSegment, seal));
  proto::NewMountRequest new_mount;
  new_mount.set_host("h1");
  one.push_back(Request(MessageType::kNewMount, new_mount));
  proto::MountHeartbeatRequest mount_hb;
  mount_hb.set_mount_id(1);
  mount_hb.add_writing_inos(2);
  one.push_back(Request(MessageType::kMountHeartbeat, mount_hb));
  get_attr.set_ino(2);
  one.push_back(Request(MessageType::kGetInode, get_attr));
  proto::ReportBadReplicaRequest bad;
  bad.set_segment_id(1);
  bad.set_server_id(1);
  bad.set_reason("crc");
  bad.set_ino(2);
  one.push_back(Request(MessageType::kReportBadReplica, bad));
  one.push_back(Request(MessageType::kListServers, proto::ListServersRequest()));
  one.push_back(Request(MessageType::kListSegments, proto::ListSegmentsRequest()));
  proto::RecoverLeaseRequest recover;
  recover.set_ino(2);
  one.push_back(Request(MessageType::kRecoverLease, recover));

  std::vector<Seed> seeds;
  for (const FuzzRequest& r : one) {
    seeds.push_back({"type_" + std::to_string(1 + r.selector), JoinRequests({r})});
  }
  auto pick = [&one](MessageType type) { return one[Selector(type)]; };
  // Registrations give placement servers to put segments on.
  seeds.push_back({"servers", JoinRequests({pick(MessageType::kRegisterServer),
                                            pick(MessageType::kHeartbeat)})});
  seeds.push_back(
      {"file", JoinRequests({pick(MessageType::kRegisterServer), pick(MessageType::kNewMount),
                             pick(MessageType::kCreate), pick(MessageType::kOpenWrite),
                             pick(MessageType::kMountHeartbeat), pick(MessageType::kSealSegment),
                             pick(MessageType::kGetXattr)})});
  seeds.push_back(
      {"names", JoinRequests({pick(MessageType::kCreate), pick(MessageType::kRename),
                              pick(MessageType::kReaddir), pick(MessageType::kUnlink),
                              pick(MessageType::kSetXattr), pick(MessageType::kListXattr)})});
  return seeds;
}

}  // namespace
}  // namespace logfs::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  logfs::fuzz::QuietLogs();
  logfs::fuzz::WriteSeedsIfAsked(logfs::fuzz::Seeds());
  logfs::fuzz::TheMeta();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace logfs;
  fuzz::Meta& meta = fuzz::TheMeta();
  uint64_t request_id = 0;
  for (fuzz::FuzzRequest& r : fuzz::SplitRequests(data, size, fuzz::kRequestsMax)) {
    format::Frame frame;
    frame.type = fuzz::MetaType(r.selector);
    frame.request_id = ++request_id;
    frame.message = std::move(r.message);
    frame.data = std::move(r.data);
    frame.connection_id = 1 + r.selector % 3;
    meta::MetaService::Reply reply = meta.service->Handle(frame);
    if (!reply.ok()) continue;
    CHECK(*reply != nullptr);
    CHECK_LE((*reply)->ByteSizeLong(), format::kMaxMessageBytes);
  }
  return 0;
}

// Fuzz target: meta's request handlers behind the frame decoder
// (store/meta/meta_service.h), each request as the decoder hands it over
// (a type meta serves, any body), on a real Namespace over RocksDB in a
// scratch dir made once per process. State carries over between inputs,
// as on a long-running meta.
//
// Input: requests as fuzz/fuzz_input.h describes, at most 16 per input;
// the selector picks one of meta's message types. Checkpoint and
// ReadCheckpoint go to a CheckpointService on a fixed clock (its first
// checkpoint is id 1000; at most 2 are made per process). Segment servers are a
// fake that answers at once (no network): SegmentInfo and Fence report a
// replica whose length follows from its id, Seal seals at the asked
// length, copies succeed.
//
// Checks beyond the sanitizers: a handler's error is never OK, and a
// response always serializes within the frame limit.
#include <glog/logging.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "fuzz/fuzz_input.h"
#include "store/format/frame.h"
#include "store/format/limits.h"
#include "store/format/logfs.pb.h"
#include "store/format/message_type.h"
#include "store/meta/ha/checkpoint_service.h"
#include "store/meta/meta_service.h"
#include "store/meta/db/metadata_db.h"
#include "store/meta/namespace/namespace.h"
#include "store/meta/namespace/segd_api.h"

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
  std::unique_ptr<meta::CheckpointService> checkpoints;
};

// The id of the fuzz process's first checkpoint (the service's clock).
constexpr uint64_t kFirstCheckpointId = 1000;

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
    meta::CheckpointServiceOptions checkpoint_options;
    checkpoint_options.dir = m->dir + "/checkpoints";
    checkpoint_options.now = [] { return absl::FromUnixMicros(kFirstCheckpointId); };
    auto checkpoints = meta::CheckpointService::Create(m->db.get(), checkpoint_options);
    CHECK(checkpoints.ok()) << checkpoints.status();
    m->checkpoints = std::move(*checkpoints);
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

using Requests = std::map<MessageType, FuzzRequest>;

void Add(Requests& out, MessageType type, const google::protobuf::MessageLite& message) {
  out[type] = FuzzRequest{Selector(type), message.SerializeAsString(), ""};
}

// Segment servers and mounts: registration, heartbeats, listings.
void AddServerRequests(Requests& out) {
  proto::RegisterServerRequest reg;
  reg.set_address("127.0.0.1:7100");
  reg.set_capacity_bytes(1 << 30);
  reg.set_free_bytes(1 << 29);
  reg.set_host("h1");
  reg.set_incarnation(42);
  Add(out, MessageType::kRegisterServer, reg);
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
  Add(out, MessageType::kHeartbeat, hb);
  proto::NewMountRequest new_mount;
  new_mount.set_host("h1");
  Add(out, MessageType::kNewMount, new_mount);
  proto::MountHeartbeatRequest mount_hb;
  mount_hb.set_mount_id(1);
  mount_hb.add_writing_inos(2);
  Add(out, MessageType::kMountHeartbeat, mount_hb);
  Add(out, MessageType::kStatFs, proto::Empty());
  Add(out, MessageType::kListServers, proto::ListServersRequest());
  Add(out, MessageType::kListSegments, proto::ListSegmentsRequest());
  proto::ReportBadReplicaRequest bad;
  bad.set_segment_id(1);
  bad.set_server_id(1);
  bad.set_reason("crc");
  bad.set_ino(2);
  Add(out, MessageType::kReportBadReplica, bad);
}

// Names and attributes. The first file created gets ino 2.
void AddNameRequests(Requests& out) {
  proto::LookupRequest lookup;
  lookup.set_parent(meta::kRootIno);
  lookup.set_name("f");
  Add(out, MessageType::kLookup, lookup);
  proto::GetAttrRequest root;
  root.set_ino(meta::kRootIno);
  Add(out, MessageType::kGetAttr, root);
  Add(out, MessageType::kReadlink, root);
  Add(out, MessageType::kListXattr, root);
  proto::GetAttrRequest file;
  file.set_ino(2);
  Add(out, MessageType::kGetInode, file);
  proto::SetAttrRequest set_attr;
  set_attr.set_ino(2);
  set_attr.set_to_set(0xff);
  set_attr.set_mode(0644);
  set_attr.set_size(3);
  *set_attr.mutable_call() = Call(1, 3);
  Add(out, MessageType::kSetAttr, set_attr);
  proto::CreateRequest create;
  create.set_parent(meta::kRootIno);
  create.set_name("f");
  create.set_mode(0100644);
  *create.mutable_call() = Call(1, 1);
  Add(out, MessageType::kCreate, create);
  proto::UnlinkRequest unlink;
  unlink.set_parent(meta::kRootIno);
  unlink.set_name("g");
  *unlink.mutable_call() = Call(1, 5);
  Add(out, MessageType::kUnlink, unlink);
  proto::RenameRequest rename;
  rename.set_parent(meta::kRootIno);
  rename.set_name("f");
  rename.set_new_parent(meta::kRootIno);
  rename.set_new_name("g");
  *rename.mutable_call() = Call(1, 4);
  Add(out, MessageType::kRename, rename);
  proto::LinkRequest link;
  link.set_ino(2);
  link.set_new_parent(meta::kRootIno);
  link.set_new_name("h");
  *link.mutable_call() = Call(1, 6);
  Add(out, MessageType::kLink, link);
  proto::CloneRequest clone;
  clone.set_ino(2);
  clone.set_new_parent(meta::kRootIno);
  clone.set_new_name("c");
  clone.set_mode(0644);
  *clone.mutable_call() = Call(1, 7);
  Add(out, MessageType::kClone, clone);
  proto::SnapshotRequest snapshot;
  snapshot.set_op(proto::SnapshotRequest::CREATE);
  snapshot.set_dir(meta::kRootIno);
  snapshot.set_name("s");
  Add(out, MessageType::kSnapshot, snapshot);
  proto::CheckSharesRequest check_shares;
  check_shares.set_repair(true);
  Add(out, MessageType::kCheckShares, check_shares);
  proto::ReaddirRequest readdir;
  readdir.set_ino(meta::kRootIno);
  Add(out, MessageType::kReaddir, readdir);
}

// Xattrs, opens, write leases and seals.
void AddFileRequests(Requests& out) {
  proto::SetXattrRequest set_xattr;
  set_xattr.set_ino(meta::kRootIno);
  set_xattr.set_name("user.logfs.kind");
  set_xattr.set_value("wal");
  *set_xattr.mutable_call() = Call(1, 2);
  Add(out, MessageType::kSetXattr, set_xattr);
  proto::GetXattrRequest get_xattr;
  get_xattr.set_ino(2);
  get_xattr.set_name("user.logfs.segments");
  Add(out, MessageType::kGetXattr, get_xattr);
  *get_xattr.mutable_call() = Call(1, 6);
  Add(out, MessageType::kRemoveXattr, get_xattr);
  proto::OpenRequest open;
  open.set_ino(2);
  open.set_mount_id(1);
  Add(out, MessageType::kOpen, open);
  proto::ReleaseRequest release;
  release.set_ino(2);
  release.set_mount_id(1);
  Add(out, MessageType::kRelease, release);
  proto::OpenWriteRequest open_write;
  open_write.set_ino(2);
  open_write.set_mount_id(1);
  Add(out, MessageType::kOpenWrite, open_write);
  proto::SealSegmentRequest seal;
  seal.set_ino(2);
  seal.set_mount_id(1);
  seal.set_segment_id(1);
  seal.set_sealed_length(10);
  seal.set_close(true);
  Add(out, MessageType::kSealSegment, seal);
  proto::CopyRangeRequest copy_range;
  copy_range.set_ino(2);
  copy_range.set_length(10);
  copy_range.set_dst_ino(3);
  copy_range.set_mount_id(1);
  *copy_range.mutable_call() = Call(1, 8);
  Add(out, MessageType::kCopyRange, copy_range);
  proto::RecoverLeaseRequest recover;
  recover.set_ino(2);
  Add(out, MessageType::kRecoverLease, recover);
}

// MetaState; a new checkpoint, then reads of its CURRENT file.
void AddCheckpointRequests(Requests& out) {
  // Served by meta_server.cc, not MetaService: the service refuses it.
  Add(out, MessageType::kMetaState, proto::Empty());
  Add(out, MessageType::kCheckpoint, proto::CheckpointRequest());
  proto::CheckpointRequest read;
  read.set_checkpoint_id(kFirstCheckpointId);
  read.set_file("CURRENT");
  read.set_length(8);
  Add(out, MessageType::kReadCheckpoint, read);
  // A mount's cache poll: meta_server.cc's too (MountCaches).
  proto::WatchCacheRequest watch;
  watch.set_mount_id(1);
  Add(out, MessageType::kWatchCache, watch);
}

// One valid request per message type, then sequences that build on each
// other (a server registers and heartbeats; a mount creates, writes and
// seals a file).
std::vector<Seed> Seeds() {
  Requests one;
  AddServerRequests(one);
  AddNameRequests(one);
  AddFileRequests(one);
  AddCheckpointRequests(one);
  CHECK_EQ(one.size(), kMetaTypes);
  std::vector<Seed> seeds;
  for (const auto& [type, r] : one) {
    seeds.push_back({"type_" + std::to_string(static_cast<int>(type)), JoinRequests({r})});
  }
  auto join = [&one](std::vector<MessageType> types) {
    std::vector<FuzzRequest> requests;
    for (MessageType type : types) requests.push_back(one.at(type));
    return JoinRequests(requests);
  };
  using T = MessageType;
  seeds.push_back({"servers", join({T::kRegisterServer, T::kHeartbeat})});
  seeds.push_back({"file", join({T::kRegisterServer, T::kNewMount, T::kCreate, T::kOpenWrite,
                                 T::kMountHeartbeat, T::kSealSegment, T::kGetXattr})});
  seeds.push_back({"copy_range", join({T::kRegisterServer, T::kNewMount, T::kCreate, T::kClone,
                                       T::kOpenWrite, T::kCopyRange, T::kGetXattr})});
  seeds.push_back({"names", join({T::kCreate, T::kRename, T::kLink, T::kClone, T::kReaddir,
                                  T::kUnlink, T::kSetXattr, T::kListXattr})});
  seeds.push_back({"snapshot", join({T::kCreate, T::kSnapshot, T::kUnlink, T::kReaddir,
                                     T::kCheckShares})});
  seeds.push_back({"checkpoint", join({T::kCreate, T::kCheckpoint, T::kReadCheckpoint})});
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
    if (meta::CheckpointService::Serves(frame.type)) {
      meta::CheckpointService::Reply answer = meta.checkpoints->Handle(frame);
      if (!answer.ok()) continue;
      CHECK(answer->message != nullptr);
      CHECK_LE(answer->data.size(), format::kReadBytesMax);
      continue;
    }
    meta::MetaService::Reply reply = meta.service->Handle(frame);
    if (!reply.ok()) continue;
    CHECK(*reply != nullptr);
    CHECK_LE((*reply)->ByteSizeLong(), format::kMaxMessageBytes);
  }
  return 0;
}

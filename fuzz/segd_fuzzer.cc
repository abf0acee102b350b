// Fuzz target: the segment server's request handlers behind the frame
// decoder (store/segd/segment_service.h), each request as the decoder
// hands it over (a type segd serves, any message and data), on a real
// ReplicaStore, SyncThread and SegmentCopier over a scratch data dir made
// once per process.
//
// Input: requests as fuzz/fuzz_input.h describes, at most 16 per input;
// the selector picks one of segd's 11 message types, and every request
// but the last is marked as followed by more buffered ones (the burst
// path of synced appends). Replies come back through a Responder sink.
// After each input every request must be answered within 5 s (else the
// target aborts: a hang), and then every replica is deleted, so that an
// input starts from an empty store (only the journal and server id carry
// over) and disk use stays bounded.
//
// CopySegment's sources are replaced with 127.0.0.1:1 (nothing listens,
// so the copier's connections fail at once): a fuzz run dials nobody.
#include <glog/logging.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "fuzz/fuzz_input.h"
#include "src/util/crc32c.h"
#include "store/format/error_codec.h"
#include "store/format/frame.h"
#include "store/format/logfs.pb.h"
#include "store/format/message_type.h"
#include "store/rpc/rpc_server.h"
#include "store/segd/replica_store.h"
#include "store/segd/segment_copier.h"
#include "store/segd/segment_service.h"
#include "store/segd/sync_thread.h"

namespace logfs::fuzz {
namespace {

using format::MessageType;

constexpr size_t kRequestsMax = 16;
static_assert(kRequestsMax < 32, "answered_ids has a bit per request id");
constexpr int kFirstType = static_cast<int>(MessageType::kCreateSegment);
constexpr int kSegdTypes = static_cast<int>(MessageType::kSegdTypeEnd) - kFirstType;
constexpr absl::Duration kAnswerWait = absl::Seconds(5);

MessageType SegdType(uint8_t selector) {
  return static_cast<MessageType>(kFirstType + selector % kSegdTypes);
}
uint8_t Selector(MessageType type) {
  return static_cast<uint8_t>(static_cast<int>(type) - kFirstType);
}

struct Segd {
  std::string dir;
  std::unique_ptr<segd::ReplicaStore> store;
  std::unique_ptr<segd::SyncThread> sync_thread;
  std::unique_ptr<segd::SegmentCopier> copier;
  std::unique_ptr<segd::SegmentService> service;
  absl::Mutex mu;
  uint64_t answered ABSL_GUARDED_BY(mu) = 0;  // responses the sink got
  // Of this input's requests (ids 1..kRequestsMax), bit id: answered.
  uint32_t answered_ids ABSL_GUARDED_BY(mu) = 0;
};

Segd& TheSegd() {
  static Segd* s = [] {
    auto* s = new Segd;
    s->dir = MakeScratchDir("segd");
    segd::ReplicaStoreOptions options{s->dir, /*journal_bytes=*/1u << 20};
    auto store = segd::ReplicaStore::Open(options);
    CHECK(store.ok()) << store.status();
    s->store = std::move(*store);
    s->sync_thread = std::make_unique<segd::SyncThread>(
        s->store.get(), segd::SyncThreadOptions{/*sync_interval_ms=*/1, 1 << 16});
    s->copier = std::make_unique<segd::SegmentCopier>(
        s->store.get(), segd::SegmentCopierOptions{/*rpc_timeout_ms=*/200});
    s->service = std::make_unique<segd::SegmentService>(s->store.get(), s->sync_thread.get(),
                                                        s->copier.get());
    return s;
  }();
  return *s;
}

// CopySegment with its sources pointed at a closed loopback port; other
// messages unchanged.
std::string WithoutPeers(MessageType type, std::string message) {
  if (type != MessageType::kCopySegment) return message;
  proto::CopySegmentRequest copy;
  if (!copy.ParseFromString(message)) return message;
  for (std::string& source : *copy.mutable_source_addresses()) source = "127.0.0.1:1";
  return copy.SerializeAsString();
}

FuzzRequest Request(MessageType type, const google::protobuf::MessageLite& message,
                    std::string data = "") {
  return FuzzRequest{Selector(type), message.SerializeAsString(), std::move(data)};
}

// One valid request per message type, then a replica's life: create,
// append, sync, read, seal, read, delete.
std::vector<Seed> Seeds() {
  const std::string bytes = "hello, segment";
  proto::CreateSegmentRequest create;
  create.set_segment_id(1);
  create.set_epoch(1);
  proto::AppendRequest append;
  append.set_segment_id(1);
  append.set_epoch(1);
  append.set_offset(0);
  append.set_sync(true);
  append.set_crc32c(util::Crc32c(bytes.data(), bytes.size()));
  proto::SyncRequest sync;
  sync.set_segment_id(1);
  sync.set_epoch(1);
  proto::ReadRequest read;
  read.set_segment_id(1);
  read.set_length(1 << 20);
  proto::SegmentInfoRequest info;
  info.set_segment_id(1);
  proto::SealRequest seal;
  seal.set_segment_id(1);
  seal.set_epoch(2);
  seal.set_length(bytes.size());
  proto::CreateSegmentRequest reopen;  // the sealed replica, open again
  reopen.set_segment_id(1);
  reopen.set_epoch(3);
  reopen.set_reopen_length(bytes.size());
  proto::DeleteSegmentRequest del;
  del.set_segment_id(1);
  proto::CopySegmentRequest copy;
  copy.set_segment_id(2);
  copy.set_epoch(1);
  copy.add_source_addresses("127.0.0.1:1");
  copy.set_length(10);
  const std::vector<FuzzRequest> one = {
      Request(MessageType::kCreateSegment, create),
      Request(MessageType::kAppend, append, bytes),
      Request(MessageType::kSync, sync),
      Request(MessageType::kRead, read),
      Request(MessageType::kSegmentInfo, info),
      Request(MessageType::kSeal, seal),
      Request(MessageType::kDeleteSegment, del),
      Request(MessageType::kCopySegment, copy),
      Request(MessageType::kServerStats, proto::Empty()),
      Request(MessageType::kShortCircuitInfo, proto::Empty()),
      Request(MessageType::kShortCircuitOpen, info),
      Request(MessageType::kCreateSegment, reopen),
  };
  std::vector<Seed> seeds;
  for (const FuzzRequest& r : one) {
    seeds.push_back({"type_" + std::to_string(kFirstType + r.selector), JoinRequests({r})});
  }
  seeds.push_back(
      {"life", JoinRequests({one[0], one[1], one[2], one[3], one[4], one[5], one[3], one[6]})});
  seeds.push_back({"create_append", JoinRequests({one[0], one[1]})});
  // A replica's second life: sealed, reopened, appended to again.
  seeds.push_back({"reopen", JoinRequests({one[0], one[1], one[2], one[5], one[11], one[4]})});
  return seeds;
}

void Answered(Segd& segd, uint64_t request_id) {
  absl::MutexLock lock(&segd.mu);
  ++segd.answered;
  segd.answered_ids |= uint32_t{1} << request_id;
}

// Whether the service answers `type` on a pool rather than inline: a real
// client waits for such an answer (a create's, before it appends).
bool RunsOnPool(MessageType type) {
  return type == MessageType::kCreateSegment || type == MessageType::kSeal ||
         type == MessageType::kDeleteSegment;
}

// CHECK-fails (a hang) unless request `request_id` is answered within
// kAnswerWait.
void WaitForAnswer(Segd& segd, uint64_t request_id) {
  absl::MutexLock lock(&segd.mu);
  auto answered = [&segd, request_id]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(segd.mu) {
    return (segd.answered_ids & (uint32_t{1} << request_id)) != 0;
  };
  CHECK(segd.mu.AwaitWithTimeout(absl::Condition(&answered), kAnswerWait))
      << "segd left request " << request_id << " unanswered for 5 s";
}

// CHECK-fails (a hang) unless `answered` reaches `sent` within kAnswerWait.
void WaitForAnswers(Segd& segd, uint64_t sent) {
  absl::MutexLock lock(&segd.mu);
  auto all = [&segd, sent]()
                 ABSL_EXCLUSIVE_LOCKS_REQUIRED(segd.mu) { return segd.answered >= sent; };
  CHECK(segd.mu.AwaitWithTimeout(absl::Condition(&all), kAnswerWait))
      << "segd left " << sent - segd.answered << " requests unanswered for 5 s (answered ids: 0x"
      << std::hex << segd.answered_ids << ")";
}

}  // namespace
}  // namespace logfs::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  logfs::fuzz::QuietLogs();
  logfs::fuzz::WriteSeedsIfAsked(logfs::fuzz::Seeds());
  logfs::fuzz::TheSegd();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace logfs;
  fuzz::Segd& segd = fuzz::TheSegd();
  uint64_t first = 0;
  {
    absl::MutexLock lock(&segd.mu);
    first = segd.answered;
    segd.answered_ids = 0;  // every answer of the last input came
  }
  std::vector<fuzz::FuzzRequest> requests = fuzz::SplitRequests(data, size, fuzz::kRequestsMax);
  for (size_t i = 0; i < requests.size(); ++i) {
    format::Frame frame;
    frame.type = fuzz::SegdType(requests[i].selector);
    frame.request_id = i + 1;
    const bool wait = fuzz::RunsOnPool(frame.type);
    frame.message = fuzz::WithoutPeers(frame.type, std::move(requests[i].message));
    frame.data = std::move(requests[i].data);
    frame.connection_id = 1;
    frame.more_buffered = i + 1 < requests.size();
    frame.more_bytes_buffered = frame.more_buffered;
    rpc::Responder responder(
        [&segd, id = frame.request_id](uint8_t flags, std::string message, std::string) {
          CHECK_NE(flags & format::kFlagResponse, 0);
          if ((flags & format::kFlagError) != 0) {
            CHECK(!format::DecodeErrorBody(message).ok());
          }
          fuzz::Answered(segd, id);
        },
        frame.type, frame.request_id);
    segd.service->Handle(std::move(frame), std::move(responder));
    if (wait) fuzz::WaitForAnswer(segd, i + 1);
  }
  fuzz::WaitForAnswers(segd, first + requests.size());
  for (uint64_t id : segd.store->SegmentIds()) {
    absl::Status deleted = segd.store->Delete(id);
    CHECK(deleted.ok()) << deleted;
    segd.sync_thread->Recheck(id);
  }
  return 0;
}

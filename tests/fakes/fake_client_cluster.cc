#include "tests/fakes/fake_client_cluster.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/status/posix_error.h"

namespace logfs::testing {
namespace {

constexpr uint64_t kRoot = 1;
constexpr int kReplicas = 3;
constexpr uint32_t kAckQuorum = 2;

std::string ServerAddress(int s) { return absl::StrCat("s", s); }

uint64_t SealedLength(const proto::Inode& inode) {
  uint64_t n = 0;
  for (const auto& s : inode.segments()) {
    if (s.sealed()) n += s.length();
  }
  return n;
}

}  // namespace

FakeClientCluster::FakeClientCluster() {
  Entry& root = inodes_[kRoot];
  root.inode.mutable_attr()->set_ino(kRoot);
  root.inode.mutable_attr()->set_mode(S_IFDIR | 0755);
  root.inode.mutable_attr()->set_nlink(2);
  root.inode.mutable_attr()->set_kind(proto::KIND_BLOCK);
  network_ = std::thread([this] { RunNetwork(); });
}

FakeClientCluster::~FakeClientCluster() { Shutdown(); }

void FakeClientCluster::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  wake_.notify_all();
  network_.join();
  // They hold writers: dropped with the lock released, as a writer's
  // destructor may call back.
  std::deque<std::function<void()>> answers;
  std::multimap<absl::Time, std::function<void()>> timers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    answers.swap(answers_);
    timers.swap(timers_);
  }
}

void FakeClientCluster::Post(std::function<void()> answer) {
  answers_.push_back(std::move(answer));
  wake_.notify_all();
}

// Delivers the answers in order, and runs the writers' timers (coalescing,
// deadlines) when due.
void FakeClientCluster::RunNetwork() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (stopped_) return;
    std::function<void()> job;
    if (!answers_.empty()) {
      job = std::move(answers_.front());
      answers_.pop_front();
    } else if (!timers_.empty() && timers_.begin()->first <= absl::Now()) {
      job = std::move(timers_.begin()->second);
      timers_.erase(timers_.begin());
    } else if (!timers_.empty()) {
      wake_.wait_for(lock, absl::ToChronoNanoseconds(timers_.begin()->first - absl::Now()));
      continue;
    } else {
      wake_.wait(lock);
      continue;
    }
    lock.unlock();
    job();
    job = nullptr;  // with the lock released (it may hold the last share of a writer)
    lock.lock();
  }
}

// ------------------------------------------------------------ test controls

void FakeClientCluster::SetLeaseHolder(uint64_t ino, uint64_t mount_id) {
  std::lock_guard<std::mutex> lock(mu_);
  inodes_[ino].lease = mount_id;
}

uint64_t FakeClientCluster::LeaseHolder(uint64_t ino) {
  std::lock_guard<std::mutex> lock(mu_);
  return inodes_[ino].lease;
}

void FakeClientCluster::AddOpenSegmentWrittenElsewhere(uint64_t ino,
                                                       const std::vector<std::string>& bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  proto::Inode& inode = inodes_[ino].inode;
  AddSegmentLocked(inode);
  const proto::Segment& open = *inode.segments().rbegin();
  for (int i = 0; i < open.replicas_size() && i < static_cast<int>(bytes.size()); ++i) {
    Replica& r = replicas_[{open.id(), open.replicas(i).address()}];
    r.bytes = bytes[i];
    r.durable = r.bytes.size();
  }
}

proto::Inode FakeClientCluster::InodeOf(uint64_t ino) {
  std::lock_guard<std::mutex> lock(mu_);
  return ReplyLocked(inodes_[ino]);
}

int FakeClientCluster::cached_only_reads() {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_only_reads_;
}

int FakeClientCluster::remote_reads() {
  std::lock_guard<std::mutex> lock(mu_);
  return remote_reads_;
}

int FakeClientCluster::pins(uint64_t ino) {
  std::lock_guard<std::mutex> lock(mu_);
  return inodes_[ino].pins;
}

// --------------------------------------------------------------- namespace

absl::StatusOr<FakeClientCluster::Entry*> FakeClientCluster::FindLocked(uint64_t ino) {
  auto it = inodes_.find(ino);
  if (it == inodes_.end()) return PosixError(ESTALE, absl::StrCat("no inode ", ino));
  return &it->second;
}

proto::Inode FakeClientCluster::ReplyLocked(const Entry& entry) const {
  proto::Inode inode = entry.inode;
  proto::Attr* attr = inode.mutable_attr();
  if (S_ISREG(attr->mode())) attr->set_size(SealedLength(inode));
  attr->set_open_for_write(entry.lease != 0);
  attr->set_open_segment(inode.segments_size() > 0 && !inode.segments().rbegin()->sealed());
  return inode;
}

absl::StatusOr<uint64_t> FakeClientCluster::NewMount(const std::string& host) {
  std::lock_guard<std::mutex> lock(mu_);
  connected_ = true;
  return kMountId;
}

absl::Status FakeClientCluster::MountHeartbeat(const proto::MountHeartbeatRequest& request) {
  return absl::OkStatus();
}

void FakeClientCluster::ResumeMount(uint64_t, uint64_t last_call_seq, uint32_t) {
  std::lock_guard<std::mutex> lock(mu_);
  connected_ = true;
  next_call_ = last_call_seq + 1;
}

uint64_t FakeClientCluster::last_call_seq() const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_call_ - 1;
}

uint64_t FakeClientCluster::mount_id() const {
  std::lock_guard<std::mutex> lock(mu_);
  return connected_ ? kMountId : 0;
}

absl::StatusOr<proto::Attr> FakeClientCluster::Lookup(uint64_t parent, const std::string& name,
                                                      const proto::CacheSession&) {
  std::lock_guard<std::mutex> lock(mu_);
  auto dir = FindLocked(parent);
  if (!dir.ok()) return dir.status();
  auto it = (*dir)->children.find(name);
  if (it == (*dir)->children.end()) return PosixError(ENOENT, absl::StrCat("no '", name, "'"));
  return ReplyLocked(inodes_[it->second]).attr();
}

absl::StatusOr<proto::WatchCacheResponse> FakeClientCluster::WatchCache(
    const proto::WatchCacheRequest& request, absl::Duration timeout) {
  if (!watch_cache) return absl::UnimplementedError("the fake meta has no cache watch");
  return watch_cache(request, timeout);
}

absl::StatusOr<proto::Attr> FakeClientCluster::GetAttr(uint64_t ino, const proto::CacheSession&) {
  auto inode = GetInode(ino);
  if (!inode.ok()) return inode.status();
  return inode->attr();
}

absl::StatusOr<proto::Inode> FakeClientCluster::GetInode(uint64_t ino) {
  std::lock_guard<std::mutex> lock(mu_);
  auto entry = FindLocked(ino);
  if (!entry.ok()) return entry.status();
  return ReplyLocked(**entry);
}

absl::StatusOr<proto::Attr> FakeClientCluster::SetAttr(proto::SetAttrRequest request) {
  std::lock_guard<std::mutex> lock(mu_);
  auto entry = FindLocked(request.ino());
  if (!entry.ok()) return entry.status();
  proto::Attr* attr = (*entry)->inode.mutable_attr();
  if (request.to_set() != 0 && request.mode() != 0) {
    attr->set_mode((attr->mode() & S_IFMT) | (request.mode() & 07777));
  }
  return ReplyLocked(**entry).attr();
}

absl::StatusOr<proto::Attr> FakeClientCluster::CreateLocked(const proto::CreateRequest& request) {
  auto parent = FindLocked(request.parent());
  if (!parent.ok()) return parent.status();
  if (!S_ISDIR((*parent)->inode.attr().mode())) return PosixError(ENOTDIR, "not a directory");
  if ((*parent)->children.count(request.name()) != 0) {
    return PosixError(EEXIST, absl::StrCat("'", request.name(), "' exists"));
  }
  const proto::FileKind parent_kind = (*parent)->inode.attr().kind();
  const uint64_t ino = next_ino_++;
  (*parent)->children[request.name()] = ino;
  Entry& entry = inodes_[ino];
  proto::Attr* attr = entry.inode.mutable_attr();
  attr->set_ino(ino);
  attr->set_mode(request.mode());
  attr->set_nlink(S_ISDIR(request.mode()) ? 2 : 1);
  attr->set_kind(request.has_kind() && S_ISREG(request.mode()) ? request.kind() : parent_kind);
  return ReplyLocked(entry).attr();
}

absl::StatusOr<proto::Attr> FakeClientCluster::Create(proto::CreateRequest request) {
  std::lock_guard<std::mutex> lock(mu_);
  return CreateLocked(request);
}

absl::StatusOr<proto::Inode> FakeClientCluster::CreateForWrite(proto::CreateRequest request) {
  std::lock_guard<std::mutex> lock(mu_);
  auto attr = CreateLocked(request);
  if (!attr.ok()) return attr.status();
  return OpenWriteLocked(attr->ino(), kMountId);  // as MetaClient::CreateForWrite asks
}

absl::Status FakeClientCluster::Unlink(proto::UnlinkRequest request) {
  std::lock_guard<std::mutex> lock(mu_);
  auto parent = FindLocked(request.parent());
  if (!parent.ok()) return parent.status();
  if ((*parent)->children.erase(request.name()) == 0) return PosixError(ENOENT, "no such name");
  return absl::OkStatus();
}

absl::Status FakeClientCluster::Rename(proto::RenameRequest request) {
  std::lock_guard<std::mutex> lock(mu_);
  auto from = FindLocked(request.parent());
  auto to = FindLocked(request.new_parent());
  if (!from.ok()) return from.status();
  if (!to.ok()) return to.status();
  auto it = (*from)->children.find(request.name());
  if (it == (*from)->children.end()) return PosixError(ENOENT, "no such name");
  const uint64_t ino = it->second;
  (*from)->children.erase(it);
  (*to)->children[request.new_name()] = ino;
  return absl::OkStatus();
}

absl::StatusOr<proto::Attr> FakeClientCluster::Link(proto::LinkRequest request) {
  return PosixError(EXDEV, "the fake cluster has no hard links");
}

absl::StatusOr<std::string> FakeClientCluster::Readlink(uint64_t ino) {
  return PosixError(EINVAL, "not a symlink");
}

absl::StatusOr<proto::ReaddirResponse> FakeClientCluster::Readdir(uint64_t ino,
                                                                  const std::string& start_after) {
  std::lock_guard<std::mutex> lock(mu_);
  auto dir = FindLocked(ino);
  if (!dir.ok()) return dir.status();
  proto::ReaddirResponse response;
  for (auto it = (*dir)->children.upper_bound(start_after); it != (*dir)->children.end(); ++it) {
    proto::DirEntry* entry = response.add_entries();
    entry->set_name(it->first);
    entry->set_ino(it->second);
  }
  return response;
}

absl::StatusOr<proto::StatFsResponse> FakeClientCluster::StatFs() {
  proto::StatFsResponse response;
  response.set_capacity_bytes(1ull << 30);
  response.set_free_bytes(1ull << 29);
  return response;
}

absl::StatusOr<std::string> FakeClientCluster::GetXattr(uint64_t ino, const std::string& name,
                                                        const proto::CacheSession&) {
  std::lock_guard<std::mutex> lock(mu_);
  auto entry = FindLocked(ino);
  if (!entry.ok()) return entry.status();
  auto it = (*entry)->xattrs.find(name);
  if (it == (*entry)->xattrs.end()) return PosixError(ENODATA, absl::StrCat(name, " is not set"));
  return it->second;
}

absl::StatusOr<std::vector<std::string>> FakeClientCluster::ListXattr(uint64_t ino) {
  std::lock_guard<std::mutex> lock(mu_);
  auto entry = FindLocked(ino);
  if (!entry.ok()) return entry.status();
  std::vector<std::string> names;
  for (const auto& [name, value] : (*entry)->xattrs) names.push_back(name);
  return names;
}

absl::Status FakeClientCluster::SetXattr(proto::SetXattrRequest request) {
  std::lock_guard<std::mutex> lock(mu_);
  auto entry = FindLocked(request.ino());
  if (!entry.ok()) return entry.status();
  (*entry)->xattrs[request.name()] = request.value();
  return absl::OkStatus();
}

absl::Status FakeClientCluster::RemoveXattr(uint64_t ino, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto entry = FindLocked(ino);
  if (!entry.ok()) return entry.status();
  if ((*entry)->xattrs.erase(name) == 0) return PosixError(ENODATA, "not set");
  return absl::OkStatus();
}

absl::StatusOr<proto::Inode> FakeClientCluster::Open(uint64_t ino) {
  std::lock_guard<std::mutex> lock(mu_);
  auto entry = FindLocked(ino);
  if (!entry.ok()) return entry.status();
  ++(*entry)->pins;
  return ReplyLocked(**entry);
}

absl::Status FakeClientCluster::Release(uint64_t ino) {
  std::lock_guard<std::mutex> lock(mu_);
  auto entry = FindLocked(ino);
  if (!entry.ok()) return entry.status();
  --(*entry)->pins;
  return absl::OkStatus();
}

absl::StatusOr<proto::Inode> FakeClientCluster::OpenWriteLocked(uint64_t ino, uint64_t mount_id) {
  auto entry = FindLocked(ino);
  if (!entry.ok()) return entry.status();
  if ((*entry)->lease != 0 && (*entry)->lease != mount_id) {
    return PosixError(EBUSY, absl::StrCat("mount ", (*entry)->lease, " writes file ", ino));
  }
  (*entry)->lease = mount_id;
  return ReplyLocked(**entry);
}

absl::StatusOr<proto::Inode> FakeClientCluster::OpenWrite(uint64_t ino, bool truncate) {
  std::lock_guard<std::mutex> lock(mu_);
  auto opened = OpenWriteLocked(ino, kMountId);
  if (opened.ok() && truncate) {
    inodes_[ino].inode.clear_segments();
    opened->clear_segments();
    opened->mutable_attr()->set_size(0);
  }
  return opened;
}

// --------------------------------------------------------------- segments

uint64_t FakeClientCluster::AckedLengthOfOpenSegment(const proto::Segment& open,
                                                     uint32_t quorum) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint64_t> lengths;
  for (const auto& r : open.replicas()) {
    auto it = replicas_.find({open.id(), r.address()});
    lengths.push_back(it == replicas_.end() ? 0 : it->second.durable);
  }
  if (lengths.size() < quorum || quorum == 0) return 0;
  std::sort(lengths.rbegin(), lengths.rend());
  return lengths[quorum - 1];  // what `quorum` replicas all hold
}

absl::Status FakeClientCluster::ReadSegments(cache::BlockCache* block_cache, uint64_t ino,
                                             const std::vector<proto::Segment>& segments,
                                             uint64_t length, uint64_t offset, uint64_t size,
                                             cache::ReadMode mode, cache::ReadBuffer* out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (mode == cache::ReadMode::kCachedOnly) {
    ++cached_only_reads_;
    return cache::RemoteReadNeeded();
  }
  ++remote_reads_;
  const uint64_t end = std::min(offset + size, length);
  std::string bytes;
  uint64_t file_offset = 0;
  for (const proto::Segment& s : segments) {
    const uint64_t seg_end = file_offset + s.length();
    if (seg_end > offset && file_offset < end && s.replicas_size() > 0) {
      const std::string& data = replicas_[{s.id(), s.replicas(0).address()}].bytes;
      const uint64_t from = std::max(offset, file_offset) - file_offset;
      const uint64_t to = std::min(end, seg_end) - file_offset;
      if (data.size() < to) return PosixError(EIO, "a replica is short");
      bytes.append(data, from, to - from);
    }
    file_offset = seg_end;
  }
  out->AppendOwned(std::move(bytes));
  return absl::OkStatus();
}

std::shared_ptr<wal::FileWriter> FakeClientCluster::NewWriter(wal::FileWriterOptions options,
                                                              proto::Inode inode) {
  // Not owned: the client owns the fake, and drops its writers (writers_)
  // before it (deps_); Shutdown drops the answers that hold them.
  std::shared_ptr<wal::WriterDeps> deps(std::shared_ptr<void>(), this);
  return wal::FileWriter::Create(std::move(options), std::move(inode), std::move(deps));
}

proto::CallId FakeClientCluster::NextCallId() {
  std::lock_guard<std::mutex> lock(mu_);
  proto::CallId call;
  call.set_mount_id(kMountId);
  call.set_seq(next_call_++);
  return call;
}

// ------------------------------------------------------------- WriterDeps

void FakeClientCluster::RunAfter(absl::Duration delay, std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) return;
  timers_.emplace(absl::Now() + delay, std::move(fn));
  wake_.notify_all();
}

void FakeClientCluster::Append(const std::string& address, const wal::AppendCall& call,
                               std::shared_ptr<const std::string> data,
                               const std::shared_ptr<wal::ReplicaReplyHandler>& handler,
                               rpc::CallBatch*) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<uint64_t> durable;
  Replica& r = replicas_[{call.segment.id, address}];
  if (r.sealed) {
    durable = absl::FailedPreconditionError("sealed");
  } else if (call.offset != r.bytes.size()) {
    durable = absl::OutOfRangeError("append not at the end");
  } else {
    // As a segment server: the answer is the replica's durable length,
    // which an append with `sync` brings up to what it holds.
    r.bytes += *data;
    if (call.sync) r.durable = r.bytes.size();
    durable = r.durable;
  }
  Post([handler, call, durable] {
    handler->OnReplicaReply(call.segment.id, call.replica, false, durable);
  });
}

void FakeClientCluster::SyncReplica(const std::string& address, wal::SegmentRef segment,
                                    size_t replica,
                                    const std::shared_ptr<wal::ReplicaReplyHandler>& handler,
                                    rpc::CallBatch*) {
  std::lock_guard<std::mutex> lock(mu_);
  Replica& r = replicas_[{segment.id, address}];
  r.durable = r.bytes.size();
  const uint64_t durable = r.durable;
  Post([handler, segment, replica, durable] {
    handler->OnReplicaReply(segment.id, replica, true, durable);
  });
}

void FakeClientCluster::SealReplica(const std::string& address, wal::SegmentRef segment,
                                    uint64_t length, Done done) {
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Replica& r = replicas_[{segment.id, address}];
    if (length > r.bytes.size()) {
      status = absl::OutOfRangeError("seal past the end");
    } else {
      r.bytes.resize(length);
      r.durable = length;
      r.sealed = true;
    }
  }
  done(status);
}

std::vector<absl::Status> FakeClientCluster::CreateReplicas(
    const std::vector<std::string>& addresses, wal::SegmentRef segment) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& a : addresses) replicas_[{segment.id, a}];
  return std::vector<absl::Status>(addresses.size());
}

std::vector<absl::Status> FakeClientCluster::ReopenReplicas(
    const std::vector<std::string>& addresses, wal::SegmentRef segment, uint64_t length) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& a : addresses) replicas_[{segment.id, a}].sealed = false;
  return std::vector<absl::Status>(addresses.size());
}

std::vector<absl::StatusOr<uint64_t>> FakeClientCluster::ReplicaLengths(
    const std::vector<std::string>& addresses, uint64_t segment_id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<absl::StatusOr<uint64_t>> out;
  for (const auto& a : addresses) out.push_back(replicas_[{segment_id, a}].bytes.size());
  return out;
}

absl::Status FakeClientCluster::FillReplica(const std::string& address, wal::SegmentRef segment,
                                            uint64_t offset, std::string data) {
  std::lock_guard<std::mutex> lock(mu_);
  Replica& r = replicas_[{segment.id, address}];
  if (offset != r.bytes.size()) return absl::OutOfRangeError("fill not at the end");
  r.bytes += data;
  r.durable = r.bytes.size();
  return absl::OkStatus();
}

absl::StatusOr<proto::Inode> FakeClientCluster::CopyRange(proto::CopyRangeRequest request) {
  std::lock_guard<std::mutex> lock(mu_);
  ++copy_range_calls_;
  auto source = FindLocked(request.ino());
  auto dst = FindLocked(request.dst_ino());
  if (!source.ok()) return source.status();
  if (!dst.ok()) return dst.status();
  proto::Inode& to = (*dst)->inode;
  if ((*dst)->lease != request.mount_id()) return PosixError(EBUSY, "no lease");
  if (to.segments_size() > 0 && !to.segments().rbegin()->sealed()) {
    return PosixError(EINVAL, "destination ends in an open segment");
  }
  if (request.dst_offset() != SealedLength(to)) return PosixError(EINVAL, "not at the end");
  const uint64_t end = request.offset() + request.length();
  std::vector<proto::Segment> copied;
  uint64_t covered = 0;
  for (const proto::Segment& segment : (*source)->inode.segments()) {
    if (segment.file_offset() + segment.length() <= request.offset()) continue;
    if (segment.file_offset() >= end) break;
    if (!segment.sealed() || segment.file_offset() < request.offset() ||
        segment.file_offset() + segment.length() > end) {
      return PosixError(EINVAL, "not whole sealed segments");
    }
    copied.push_back(segment);
    covered += segment.length();
  }
  if (covered != request.length() || covered == 0) return PosixError(EINVAL, "bad range");
  for (proto::Segment& segment : copied) {
    segment.set_file_offset(SealedLength(to));
    *to.add_segments() = std::move(segment);
  }
  return ReplyLocked(**dst);
}

int FakeClientCluster::copy_range_calls() {
  std::lock_guard<std::mutex> lock(mu_);
  return copy_range_calls_;
}

void FakeClientCluster::AddSegmentLocked(proto::Inode& inode) {
  proto::Segment* next = inode.add_segments();
  next->set_id(next_segment_id_++);
  next->set_epoch(1);
  next->set_ack_quorum(kAckQuorum);
  next->set_file_offset(SealedLength(inode));
  for (int s = 1; s <= kReplicas; ++s) {
    proto::Replica* r = next->add_replicas();
    r->set_server_id(s);
    r->set_address(ServerAddress(s));
  }
}

void FakeClientCluster::SealAtMeta(const wal::MetaSealCall& call, InodeDone done) {
  absl::StatusOr<proto::Inode> reply;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto entry = FindLocked(call.ino);
    if (!entry.ok()) {
      reply = entry.status();
    } else {
      proto::Inode& inode = (*entry)->inode;
      if (call.segment_id != 0) {
        proto::Segment* open = inode.mutable_segments(inode.segments_size() - 1);
        open->set_sealed(true);
        open->set_length(call.sealed_length);
      }
      if (call.close) {
        (*entry)->lease = 0;
      } else if (!call.keep_lease) {
        AddSegmentLocked(inode);
      }
      reply = ReplyLocked(**entry);
    }
  }
  done(std::move(reply));
}

absl::Status FakeClientCluster::TruncateAtMeta(uint64_t ino, uint64_t mount_id,
                                               std::optional<proto::CallId> call) {
  std::lock_guard<std::mutex> lock(mu_);
  auto entry = FindLocked(ino);
  if (!entry.ok()) return entry.status();
  (*entry)->inode.clear_segments();
  return absl::OkStatus();
}

}  // namespace logfs::testing

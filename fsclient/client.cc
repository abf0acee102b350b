#include "fsclient/client.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/status/macros.h"
#include "src/status/posix_error.h"
#include "store/client/meta_retry.h"
#include "store/format/error_codec.h"
#include "store/format/setattr_bits.h"
#include "store/format/wire_version.h"
#include "store/format/xattr_names.h"
#include "store/rpc/rpc_client.h"
#include "wal/writer_counters.h"

namespace logfs::fsclient {
namespace {

using format::kClusterSecretFileXattr;
using format::kDropBlockCacheXattr;
using format::kDurableLengthXattr;
using format::kMetaAddressXattr;
using format::kMountPidXattr;
using format::kSegmentsXattr;
using format::kStatsXattr;

bool HasOpenSegment(const proto::Inode& inode) {
  return inode.segments_size() > 0 && !inode.segments().rbegin()[0].sealed();
}

uint64_t SealedLength(const proto::Inode& inode) {
  uint64_t n = 0;
  for (const auto& s : inode.segments()) n += s.length();
  return n;
}

}  // namespace

Client::Client(ClientOptions options) : Client(std::move(options), NewRpcClientDeps) {}

Client::Client(ClientOptions options, const DepsFactory& deps)
    : options_(std::move(options)),
      executors_(Executors::Options{.io_threads = options_.io_threads}),
      deps_(deps(options_, executors_)),
      coherence_(std::make_unique<CacheCoherence>(*deps_, options_.cache)) {
  if (options_.block_cache_bytes > 0) {
    cache::BlockCacheOptions cache_options;
    cache_options.capacity_bytes = options_.block_cache_bytes;
    cache_options.block_bytes = options_.block_cache_block_bytes;
    cache_options.tracer = options_.block_cache_tracer;
    block_cache_ = std::make_unique<cache::BlockCache>(cache_options);
  }
}

Client::~Client() { Shutdown(); }

absl::Status Client::Connect() {
  executors_.StartIo();
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  absl::StatusOr<uint64_t> mount_id = NewMountWithin(host);
  if (!mount_id.ok()) return mount_id.status();
  executors_.StartHeartbeat([this] { HeartbeatLoop(); });
  return absl::OkStatus();
}

absl::StatusOr<Client::Session> Client::HandOff() {
  std::vector<std::shared_ptr<wal::FileWriter>> writers;
  {
    absl::MutexLock lock(&mu_);
    for (uint64_t ino : writers_.WritingInos()) writers.push_back(writers_.Find(ino));
  }
  // Sealed together: each waits for its own replicas and meta.
  struct Seal {
    absl::Notification done;
    absl::Status status;
  };
  std::vector<std::shared_ptr<Seal>> seals;
  for (auto& writer : writers) {
    auto seal = std::make_shared<Seal>();
    seals.push_back(seal);
    writer->SealAsync([seal](absl::Status s) {
      seal->status = std::move(s);
      seal->done.Notify();
    });
  }
  for (size_t i = 0; i < seals.size(); ++i) {
    if (!seals[i]->done.WaitForNotificationWithTimeout(options_.fsync_timeout +
                                                       absl::Seconds(1))) {
      return PosixError(EIO, absl::StrCat("the writer of inode ", writers[i]->ino(),
                                          " did not seal in time"));
    }
    if (!seals[i]->status.ok()) {
      return absl::Status(seals[i]->status.code(),
                          absl::StrCat("the writer of inode ", writers[i]->ino(),
                                       " cannot seal: ", seals[i]->status.message()));
    }
  }
  proto::MountHeartbeatRequest request;
  request.set_mount_id(deps_->mount_id());
  request.set_handing_off(true);
  for (auto& writer : writers) request.add_writing_inos(writer->ino());
  {
    absl::MutexLock lock(&heartbeat_mu_);
    handing_off_.store(true);
    if (absl::Status s = deps_->MountHeartbeat(request); !s.ok()) {
      handing_off_.store(false);
      return s;
    }
  }
  return Session{deps_->mount_id(), deps_->last_call_seq(), deps_->cache_lease_ms()};
}

void Client::CancelHandOff() {
  absl::MutexLock lock(&heartbeat_mu_);
  handing_off_.store(false);
  proto::MountHeartbeatRequest request;
  request.set_mount_id(deps_->mount_id());
  if (absl::Status s = deps_->MountHeartbeat(request); !s.ok()) {
    LOG(WARNING) << "heartbeat after a cancelled handoff: " << s << " (the next one says it)";
  }
}

absl::Status Client::Resume(const Session& session) {
  executors_.StartIo();
  deps_->ResumeMount(session.mount_id, session.last_call_seq, session.cache_lease_ms);
  proto::MountHeartbeatRequest request;
  request.set_mount_id(session.mount_id);
  const absl::Time deadline = absl::Now() + options_.connect_wait;
  for (int attempt = 1;; ++attempt) {
    absl::Status s = deps_->MountHeartbeat(request);
    if (s.ok()) break;
    if (absl::Now() >= deadline || (rpc::IsServerAnswer(s) && !format::IsNotActiveMeta(s))) {
      return absl::UnavailableError(absl::StrCat("cannot resume mount ", session.mount_id,
                                                 " at meta ", options_.meta_address, ": ",
                                                 s.message()));
    }
    absl::SleepFor(std::min(client::MetaRetryDelay(attempt), deadline - absl::Now()));
  }
  executors_.StartHeartbeat([this] { HeartbeatLoop(); });
  return absl::OkStatus();
}

proto::HandedOffFile Client::Describe(const OpenFile& file) {
  proto::HandedOffFile handed;
  handed.set_ino(file.ino);
  handed.set_writable(file.writable);
  handed.set_write_denied(file.write_denied);
  handed.set_append(file.append);
  handed.set_set_id_at_open(file.set_id_at_open.load());
  return handed;
}

absl::StatusOr<std::unique_ptr<OpenFile>> Client::Adopt(const proto::HandedOffFile& handed) {
  const uint64_t ino = handed.ino();
  ASSIGN_OR_RETURN(proto::Inode inode, deps_->GetInode(ino));
  auto file = std::make_unique<OpenFile>();
  file->ino = ino;
  file->kind = inode.attr().kind();
  file->writable = handed.writable();
  file->write_denied = handed.write_denied();
  file->append = handed.append();
  file->set_id_at_open = handed.set_id_at_open();
  if (file->writable && !file->write_denied) {
    absl::MutexLock lock(&mu_);
    // One writer per file, however many handles write it (Open's rule).
    file->writer = writers_.Find(ino) != nullptr ? writers_.Acquire(ino)
                                                 : NewWriterLocked(std::move(inode));
    return file;
  }
  SetReadState(*file, std::move(inode));
  return file;
}

void Client::SetReadState(OpenFile& file, proto::Inode inode) {
  file.growing =
      inode.attr().open_for_write() || HasOpenSegment(inode) || FindWriter(file.ino) != nullptr;
  file.live = file.growing || file.kind == proto::KIND_WAL;
  absl::MutexLock lock(&file.mu);
  file.inode = std::move(inode);
}

// The first contact with meta: while it is down, starting or electing, the
// mount waits for it as an NFS mount retries its first MNT call (mount.nfs
// "retry="), rather than failing a boot that raced meta.
absl::StatusOr<uint64_t> Client::NewMountWithin(const std::string& host) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + options_.connect_wait;
  for (int attempt = 1;; ++attempt) {
    absl::StatusOr<uint64_t> mount_id = deps_->NewMount(host);
    if (mount_id.ok()) {
      if (attempt > 1) LOG(INFO) << "meta reached after " << attempt << " attempts";
      return mount_id;
    }
    const absl::Status& failure = mount_id.status();
    // A version neither shares (store/format/wire_version.h): its one line
    // says which side to upgrade, and the refusal is final.
    if (format::IsVersionRefusal(failure)) return failure;
    // An answer of meta's is final, unless it is a standby's "not active".
    const bool retryable = format::IsNotActiveMeta(failure) ||
                           (!rpc::IsServerAnswer(failure) &&
                            (absl::IsUnavailable(failure) || absl::IsDeadlineExceeded(failure)));
    const absl::Duration left = deadline - absl::Now();
    if (!retryable || left <= absl::ZeroDuration()) {
      return absl::UnavailableError(absl::StrCat(
          "cannot reach meta at ", options_.meta_address, " (", attempt,
          attempt == 1 ? " attempt in " : " attempts in ",
          absl::FormatDuration(absl::Trunc(absl::Now() - start, absl::Milliseconds(1))),
          "): ", failure.message()));
    }
    const absl::Duration delay = std::min(client::MetaRetryDelay(attempt), left);
    LOG(WARNING) << "meta at " << options_.meta_address << " not reachable (attempt " << attempt
                 << "): " << failure.message() << "; retrying in " << delay << ", giving up in "
                 << absl::Trunc(left, absl::Milliseconds(1));
    absl::SleepFor(delay);  // backoff between attempts, nothing to poll
  }
}

void Client::Shutdown() {
  if (!stopping_.HasBeenNotified()) stopping_.Notify();
  // Waiting calls and writers' recoveries use the client pool and finish
  // within their deadlines: wait for them before the pool and the io
  // threads go.
  executors_.JoinPools();
  // Meta holds a cache poll up to a quarter of its lease: the connection's
  // close ends the one in flight at once, after the drop of what the
  // kernel was given.
  coherence_->DropWithin(absl::InfiniteDuration());
  deps_->Shutdown();
  coherence_->Stop();
  executors_.StopIo();
}

// Also trims the short-circuit replica cache.
void Client::HeartbeatLoop() {
  proto::MountHeartbeatRequest request;
  request.set_mount_id(deps_->mount_id());
  while (!stopping_.WaitForNotificationWithTimeout(options_.heartbeat_interval)) {
    request.clear_writing_inos();
    {
      // A meta that restarted lost its leases: these take them back.
      absl::MutexLock lock(&mu_);
      for (uint64_t ino : writers_.WritingInos()) request.add_writing_inos(ino);
    }
    absl::Status s;
    {
      absl::MutexLock lock(&heartbeat_mu_);
      request.set_handing_off(handing_off_.load());
      s = deps_->MountHeartbeat(request);
    }
    if (!s.ok()) LOG(WARNING) << "mount heartbeat to meta failed: " << s;
    deps_->TrimReplicas();  // closes replicas deleted, or idle past their limit
  }
}

std::shared_ptr<wal::FileWriter> Client::FindWriter(uint64_t ino) {
  absl::MutexLock lock(&mu_);
  return writers_.Find(ino);
}

uint64_t Client::LiveLength(proto::Inode& inode) {
  if (!HasOpenSegment(inode)) return SealedLength(inode);
  proto::Segment& open = *inode.mutable_segments()->rbegin();
  if (inode.attr().kind() == proto::KIND_BLOCK) {
    // A block file's open segment is its writer's until sealed: the writer
    // may still cut it (FileWriter::CutTo), so no reader sees any of it.
    open.set_length(0);
    return SealedLength(inode);
  }
  uint32_t quorum = open.ack_quorum() != 0 ? open.ack_quorum() : inode.ack_quorum();
  open.set_length(deps_->AckedLengthOfOpenSegment(open, quorum));
  return SealedLength(inode);
}

// ---------------------------------------------------------------- namespace

void Client::Lookup(uint64_t parent, const std::string& name, AttrDone done) {
  // Meta's answer names the inode and its attributes at once: asking for
  // them again by inode would race with a rename that replaces the name.
  // The kernel holds the parent directory's lock through a lookup: it
  // never waits here for written bytes to become durable (the size is the
  // acked length, and the attributes expire at once: the stat that
  // follows asks with a getattr, which waits).
  WithLiveSizeAsync(deps_->Lookup(parent, name, coherence_->session()), /*wait_durable=*/false,
                    std::move(done));
}

void Client::GetAttr(uint64_t ino, AttrDone done) {
  WithLiveSizeAsync(deps_->GetAttr(ino, coherence_->session()), /*wait_durable=*/true,
                    std::move(done));
}

void Client::WithLiveSizeAsync(absl::StatusOr<proto::Attr> attr, bool wait_durable, AttrDone done) {
  if (!attr.ok() || !S_ISREG(attr->mode())) {
    done(std::move(attr));
    return;
  }
  if (auto writer = FindWriter(attr->ino())) {
    // The size is the durable length (DESIGN §2). On the writing mount it
    // counts every byte whose write() returned, as on a local file system:
    // a stat while some are not durable yet waits until they are, as a
    // read of them does, on the waiting pool (a sync waits for replicas).
    // A failed writer's bytes past the acked length never will be: its
    // file ends there.
    attr->set_open_for_write(true);
    const uint64_t written = writer->length();
    if (writer->acked_length() >= written || !wait_durable) {
      attr->set_size(std::min(written, writer->acked_length()));
      done(std::move(attr));
      return;
    }
    executors_.PostWaiting([this, writer = std::move(writer), attr = *std::move(attr),
                               done = std::move(done)]() mutable {
      // A failure leaves the acked length, which is what the size then is.
      WaitUntilDurable(*writer).IgnoreError();
      attr.set_size(writer->acked_length());
      done(std::move(attr));
    });
    return;
  }
  if (!attr->open_for_write() && !attr->open_segment()) {
    done(std::move(attr));
    return;
  }
  // Another mount writes the file, or its writer died and meta has not
  // recovered it yet: the size is what the ack quorum holds (DESIGN §2),
  // never less than what a read returns. A stalled replica must not hold
  // a FUSE worker, so the replicas are asked from the waiting pool.
  executors_.PostWaiting([this, attr = *std::move(attr), done = std::move(done)]() mutable {
    absl::StatusOr<proto::Inode> inode = deps_->GetInode(attr.ino());
    if (!inode.ok()) {
      done(inode.status());
      return;
    }
    attr.set_size(LiveLength(*inode));
    attr.set_open_segment(HasOpenSegment(*inode));
    done(std::move(attr));
  });
}

void Client::SetAttr(const proto::SetAttrRequest& in, AttrDone done) {
  if ((in.to_set() & format::kSetAttrSize) != 0) {
    // The kernel sends RELEASE after close(2) has returned, so a truncate
    // right after a close can find that close's writer still sealing: the
    // seal decides the length the truncate changes. It runs once the close
    // has ended (on the close's thread), against what the close left; no
    // thread waits for it (the close itself runs on the waiting pool).
    absl::MutexLock lock(&mu_);
    if (writers_.Closing(in.ino())) {
      writers_.RunAfterClose(in.ino(), [this, in, done = std::move(done)]() mutable {
        SetAttr(in, std::move(done));
      });
      return;
    }
  }
  proto::SetAttrRequest request = in;
  request.set_mount_id(deps_->mount_id());
  auto writer = FindWriter(request.ino());
  if (writer != nullptr && (request.to_set() & format::kSetAttrMtime) != 0) {
    writer->SetMtime(request.mtime_ns());  // or the writer's close overwrites it
  }
  // The local writer knows the true length; meta only what is sealed.
  // A WAL file empties (copy-truncate rotation); a block file being
  // written may be cut short before it is sealed (RocksDB's direct-I/O
  // padding: FileWriter::CutTo); any other change is refused.
  enum class SizeChange { kNone, kEmpty, kCut } change = SizeChange::kNone;
  if ((request.to_set() & format::kSetAttrSize) != 0 && writer != nullptr) {
    if (request.size() == 0 && writer->kind() == proto::KIND_WAL) {
      change = SizeChange::kEmpty;
    } else if (request.size() < writer->length() && writer->kind() == proto::KIND_BLOCK) {
      change = SizeChange::kCut;
    } else if (request.size() != writer->length()) {
      return done(PosixError(EPERM, "logfs files only grow, or a WAL file empties"));
    }
    request.set_to_set(request.to_set() & ~format::kSetAttrSize);
  }
  auto set = [this, request, change,
              writer = change != SizeChange::kNone ? writer : nullptr](AttrDone done) {
    if (change == SizeChange::kEmpty) {
      if (absl::Status s = writer->TruncateToZero(); !s.ok()) return done(std::move(s));
    } else if (change == SizeChange::kCut) {
      if (absl::Status s = writer->CutTo(request.size()); !s.ok()) return done(std::move(s));
    }
    if (absl::Status s = deps_->SetAttr(request).status(); !s.ok()) return done(std::move(s));
    GetAttr(request.ino(), std::move(done));
  };
  if (change == SizeChange::kNone) return set(std::move(done));
  // Emptying or cutting the file waits for the writer's roll or recovery
  // in progress, or for its replicas: on the waiting pool.
  executors_.PostWaiting(
             [set = std::move(set), done = std::move(done)]() mutable { set(std::move(done)); });
}

namespace {
proto::CreateRequest CreateRequestOf(uint64_t parent, const std::string& name, uint32_t mode,
                                     uid_t uid, gid_t gid) {
  proto::CreateRequest request;
  request.set_parent(parent);
  request.set_name(name);
  request.set_mode(mode);
  request.set_uid(uid);
  request.set_gid(gid);
  return request;
}

// What a write by a caller without CAP_FSETID clears (should_remove_suid).
bool HasSetIdToClear(uint32_t mode) {
  return S_ISREG(mode) && ((mode & S_ISUID) != 0 || (mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP));
}
}  // namespace

absl::StatusOr<proto::Attr> Client::Create(uint64_t parent, const std::string& name, uint32_t mode,
                                          uid_t uid, gid_t gid, const std::string& symlink_target,
                                          uint64_t rdev) {
  proto::CreateRequest request = CreateRequestOf(parent, name, mode, uid, gid);
  request.set_symlink_target(symlink_target);
  request.set_rdev(rdev);
  return deps_->Create(std::move(request));
}

absl::Status Client::Unlink(uint64_t parent, const std::string& name, bool directory) {
  proto::UnlinkRequest request;
  request.set_parent(parent);
  request.set_name(name);
  request.set_directory(directory);
  return deps_->Unlink(std::move(request));
}

absl::Status Client::Rename(uint64_t parent, const std::string& name, uint64_t new_parent,
                           const std::string& new_name, uint32_t flags) {
  proto::RenameRequest request;
  request.set_parent(parent);
  request.set_name(name);
  request.set_new_parent(new_parent);
  request.set_new_name(new_name);
  request.set_flags(flags);
  return deps_->Rename(std::move(request));
}

absl::StatusOr<proto::Attr> Client::Link(uint64_t ino, uint64_t new_parent,
                                        const std::string& new_name) {
  proto::LinkRequest request;
  request.set_ino(ino);
  request.set_new_parent(new_parent);
  request.set_new_name(new_name);
  return deps_->Link(std::move(request));
}

// ---------------------------------------------------------------- xattrs

absl::StatusOr<std::string> Client::FormatSegments(const proto::Inode& inode, int64_t page) {
  // Lines packed into pages of at most kSegmentsXattrBytesMax bytes.
  std::vector<std::string> pages(1);
  for (const auto& s : inode.segments()) {
    std::vector<std::string> addresses;
    for (const auto& r : s.replicas()) addresses.push_back(r.address());
    std::string line = absl::StrCat(s.id(), " ", absl::StrJoin(addresses, ","), " ", s.length(),
                                    " ", s.sealed() ? "sealed" : "open", "\n");
    if (!pages.back().empty() &&
        pages.back().size() + line.size() > format::kSegmentsXattrBytesMax) {
      pages.emplace_back();
    }
    pages.back() += line;
  }
  if (page >= 0) {
    if (page >= static_cast<int64_t>(pages.size())) {
      return PosixError(ENODATA, absl::StrCat("the segment listing has ", pages.size(), " pages"));
    }
    return std::move(pages[page]);
  }
  if (pages.size() == 1) return std::move(pages[0]);
  return absl::StrCat(inode.segments_size(), " segments in ", pages.size(),
                      " pages: ", kSegmentsXattr, ".0 to ", kSegmentsXattr, ".", pages.size() - 1,
                      "\n");
}

std::string Client::FormatStats() {
  std::string out = wal::FormatWriterCounters();
  out.pop_back();  // the newline
  const cache::SegmentReaderStats r = deps_->ReaderStats();
  absl::StrAppend(&out, " short_circuit_reads=", r.short_circuit_reads,
                  " short_circuit_bytes=", r.short_circuit_bytes,
                  " short_circuit_failures=", r.short_circuit_failures,
                  " remote_reads=", r.remote_reads, " replica_cache_hits=", r.replica_cache.hits,
                  " replica_cache_opens=", r.replica_cache.opens,
                  " replica_cache_evictions=", r.replica_cache.evictions(),
                  " replica_cache_deletions=", r.replica_cache.deletions,
                  " replica_cache_open_replicas=", r.replica_cache.open_replicas,
                  " replica_cache_mmaps=", r.replica_cache.mmaps,
                  " replica_cache_mmapped=", r.replica_cache.mmapped);
  if (block_cache_ != nullptr) {
    const cache::BlockCacheStats c = block_cache_->stats();
    absl::StrAppend(&out, " block_cache_hits=", c.hits, " block_cache_misses=", c.misses,
                    " block_cache_inserts=", c.inserts, " block_cache_evictions=", c.evictions,
                    " block_cache_blocks=", c.blocks, " block_cache_bytes=", c.bytes,
                    " block_cache_reserved_bytes=", c.reserved_bytes);
  }
  // Segment servers found on this host with an RPC Unix socket.
  absl::StrAppend(&out, " local_rpc_servers=", deps_->LocalServers());
  const CacheCoherence::Stats cache = coherence_->stats();
  absl::StrAppend(&out, " cache_polls=", cache.polls, " cache_invalidations=", cache.invalidations,
                  " cache_drops=", cache.drops, " cache_trusted=", cache.trusted ? 1 : 0);
  out += "\n";
  return out;
}

void Client::GetXattr(uint64_t ino, const std::string& name, XattrDone done) {
  if (name == kMountPidXattr && ino == 1) return done(std::to_string(getpid()));
  if (name == kMetaAddressXattr) return done(options_.meta_address);
  if (name == kClusterSecretFileXattr) {
    if (options_.cluster_secret_file.empty()) return done(PosixError(ENODATA, "no cluster secret"));
    return done(options_.cluster_secret_file);
  }
  if (name == kStatsXattr) return done(FormatStats());
  // user.logfs.segments, or page K of it: user.logfs.segments.K.
  int64_t page = -1;
  const std::string page_prefix = absl::StrCat(kSegmentsXattr, ".");
  const bool is_page = absl::StartsWith(name, page_prefix) &&
                       absl::SimpleAtoi(name.substr(page_prefix.size()), &page) && page >= 0;
  const bool segments = name == kSegmentsXattr || is_page;
  if (!segments && name != kDurableLengthXattr) {
    // Meta's answer, which the mount keeps while meta invalidates it.
    if (auto cached = coherence_->CachedXattr(ino, name)) return done(*std::move(cached));
    const CacheCoherence::Ticket ticket = coherence_->Begin();
    absl::StatusOr<std::string> answer = deps_->GetXattr(ino, name, coherence_->session());
    coherence_->StoreXattr(ticket, ino, name, answer);
    return done(std::move(answer));
  }
  absl::StatusOr<proto::Inode> inode = deps_->GetInode(ino);
  if (!inode.ok()) return done(inode.status());
  if (!S_ISREG(inode->attr().mode())) return done(PosixError(ENODATA, "not a regular file"));
  auto format = [this, segments, page](const proto::Inode& inode,
                                       uint64_t durable) -> absl::StatusOr<std::string> {
    if (segments) return FormatSegments(inode, page);
    return std::to_string(durable);
  };
  if (auto writer = FindWriter(ino)) {
    inode->clear_segments();
    for (auto& s : writer->ReadableSegments()) *inode->add_segments() = std::move(s);
    return done(format(*inode, writer->acked_length()));
  }
  if (!HasOpenSegment(*inode)) return done(format(*inode, SealedLength(*inode)));
  // The open segment's acked length comes from its replicas: asked from
  // the waiting pool, as GetAttr does.
  executors_.PostWaiting(
             [this, inode = *std::move(inode), format, done = std::move(done)]() mutable {
               const uint64_t durable = LiveLength(inode);
               done(format(inode, durable));
             });
}

absl::Status Client::SetXattr(uint64_t ino, const std::string& name, const std::string& value,
                             int flags) {
  if (name == kDropBlockCacheXattr) {
    if (block_cache_ != nullptr) block_cache_->Clear();
    return absl::OkStatus();
  }
  proto::SetXattrRequest request;
  request.set_ino(ino);
  request.set_name(name);
  request.set_value(value);
  request.set_flags(flags);
  absl::Status set = deps_->SetXattr(std::move(request));
  // Meta tells every mount but this one (cache_coherence.h).
  coherence_->ForgetXattrs(ino);
  return set;
}

absl::Status Client::RemoveXattr(uint64_t ino, const std::string& name) {
  absl::Status removed = deps_->RemoveXattr(ino, name);
  coherence_->ForgetXattrs(ino);
  return removed;
}

// ---------------------------------------------------------------- files

void Client::WaitUntilNotClosing(uint64_t ino) {
  Executors::CheckMayWaitOn(Executor::kWaiting, "a writer's close");
  absl::MutexLock lock(&mu_);
  auto not_closing = [this, ino]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !writers_.Closing(ino);
  };
  mu_.Await(absl::Condition(&not_closing));
}

absl::StatusOr<std::shared_ptr<wal::FileWriter>> Client::AcquireWriter(uint64_t ino, bool truncate) {
  std::shared_ptr<wal::FileWriter> existing;
  Executors::CheckMayWaitOn(Executor::kWaiting, "another open or a close of the file");
  {
    absl::MutexLock lock(&mu_);
    // Wait while another open of this file takes the lease, or a writer of
    // it is being closed (sealed, lease released); other files go on.
    auto settled = [this, ino]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return writers_.Settled(ino);
    };
    mu_.Await(absl::Condition(&settled));
    existing = writers_.Acquire(ino);  // null: a placeholder while meta is asked
  }
  if (existing != nullptr) {
    absl::Status status;
    if (truncate && existing->length() > 0) {
      status = existing->kind() != proto::KIND_WAL
                   ? PosixError(EPERM, "block files cannot be truncated")
                   : existing->TruncateToZero();
    }
    if (!status.ok()) {
      bool last;
      {
        absl::MutexLock lock(&mu_);
        last = writers_.Release(ino);
      }
      // The other handles were released while the truncate ran: nobody
      // else will close the writer.
      if (last) CloseWriter(ino, std::move(existing), [](absl::Status) {});
      return status;
    }
    return existing;
  }
  absl::StatusOr<proto::Inode> opened = deps_->OpenWrite(ino, truncate);
  absl::MutexLock lock(&mu_);
  if (!opened.ok()) {
    writers_.Abandon(ino);
    return opened.status();
  }
  return NewWriterLocked(std::move(*opened));
}

std::shared_ptr<wal::FileWriter> Client::NewWriterLocked(proto::Inode opened) {
  const uint64_t ino = opened.attr().ino();
  wal::FileWriterOptions options;
  options.mount_id = deps_->mount_id();
  bool wal = opened.attr().kind() == proto::KIND_WAL;
  options.segment_bytes = wal ? options_.wal_segment_bytes : options_.block_segment_bytes;
  options.continue_below_bytes =
      wal && options_.continue_wal_segments ? options_.wal_segment_bytes : 0;
  options.append_bytes = wal ? 1 : options_.block_append_bytes;
  options.coalesce_delay = options_.wal_coalesce_delay;
  options.coalesce_bytes = options_.wal_coalesce_bytes;
  options.replica_timeout = options_.replica_timeout;
  options.fsync_timeout = options_.fsync_timeout;
  options.slow_replica = options_.slow_replica;
  options.slow_servers = slow_servers_;
  options.next_call_id = [this] { return deps_->NextCallId(); };
  options.run_blocking = [this](std::function<void()> job) {
    executors_.PostRecovery(std::move(job));
  };
  options.run_waiting = [this](std::function<void()> job) {
    executors_.PostWaiting(std::move(job));
  };
  auto writer = deps_->NewWriter(std::move(options), std::move(opened));
  writers_.Install(ino, writer);
  return writer;
}

absl::Status Client::ClearSetId(OpenFile& file) {
  proto::SetAttrRequest request;
  request.set_ino(file.ino);
  request.set_mount_id(deps_->mount_id());
  request.set_clear_set_id(true);
  RETURN_IF_ERROR(deps_->SetAttr(std::move(request)).status());
  file.set_id_at_open = false;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<OpenFile>> Client::CreateForWrite(
    uint64_t parent, const std::string& name, uint32_t mode, uid_t uid, gid_t gid, int flags,
    proto::Attr* attr, std::optional<proto::FileKind> kind) {
  proto::CreateRequest request = CreateRequestOf(parent, name, mode, uid, gid);
  if (kind.has_value()) request.set_kind(*kind);
  ASSIGN_OR_RETURN(proto::Inode opened, deps_->CreateForWrite(std::move(request)));
  *attr = opened.attr();
  auto file = std::make_unique<OpenFile>();
  file->ino = opened.attr().ino();
  file->writable = true;
  file->append = (flags & O_APPEND) != 0;
  file->kind = opened.attr().kind();
  file->set_id_at_open = HasSetIdToClear(opened.attr().mode());
  absl::MutexLock lock(&mu_);
  // A new inode: no other handle of this mount can know it yet.
  file->writer = NewWriterLocked(std::move(opened));
  return file;
}

absl::StatusOr<std::unique_ptr<OpenFile>> Client::OpenCreated(
    uint64_t parent, const std::string& name, int flags,
    const std::function<int(const proto::Attr&)>& may_open, proto::Attr* attr) {
  ASSIGN_OR_RETURN(proto::Attr found, deps_->Lookup(parent, name, proto::CacheSession()));
  if (S_ISDIR(found.mode())) return PosixError(EISDIR, absl::StrCat("'", name, "' is a directory"));
  if (!S_ISREG(found.mode())) {
    return PosixError(EEXIST, absl::StrCat("'", name, "' exists and is not a regular file"));
  }
  if (const int refused = may_open(found); refused != 0) {
    return PosixError(refused, absl::StrCat("no access to '", name, "'"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<OpenFile> file, Open(found.ino(), flags));
  *attr = std::move(found);
  return file;
}

absl::StatusOr<std::unique_ptr<OpenFile>> Client::Open(uint64_t ino, int flags) {
  auto file = std::make_unique<OpenFile>();
  file->ino = ino;
  file->writable = (flags & O_ACCMODE) != O_RDONLY;
  file->append = (flags & O_APPEND) != 0;
  bool truncate = (flags & O_TRUNC) != 0;
  if (file->writable) {
    WaitUntilNotClosing(ino);  // a sealing writer decides what this open finds
    ASSIGN_OR_RETURN(proto::Inode inode, deps_->GetInode(ino));
    if (S_ISDIR(inode.attr().mode())) return PosixError(EISDIR, "is a directory");
    if (inode.read_only()) return PosixError(EROFS, "the file is in a snapshot, which is read-only");
    file->kind = inode.attr().kind();
    bool sealed_block = file->kind == proto::KIND_BLOCK && SealedLength(inode) > 0 &&
                        !HasOpenSegment(inode) && FindWriter(ino) == nullptr;
    if (!sealed_block) {
      ASSIGN_OR_RETURN(file->writer, AcquireWriter(ino, truncate));
      file->set_id_at_open = HasSetIdToClear(inode.attr().mode());
      return file;
    }
    // A sealed block file opens for write (RocksDB's LOCK) but rejects writes.
    if (truncate) return PosixError(EPERM, "sealed block files are immutable");
    file->write_denied = true;
  }
  ASSIGN_OR_RETURN(proto::Inode inode, deps_->Open(ino));
  file->kind = inode.attr().kind();
  SetReadState(*file, std::move(inode));
  return file;
}

absl::StatusOr<cache::ReadBuffer> Client::Read(OpenFile& file, uint64_t offset, uint64_t size) {
  return ReadInternal(file, offset, size, cache::ReadMode::kAny);
}

void Client::ReadAsync(std::shared_ptr<OpenFile> file, uint64_t offset, uint64_t size,
                      ReadDone done) {
  absl::StatusOr<cache::ReadBuffer> read =
      ReadInternal(*file, offset, size, cache::ReadMode::kCachedOnly);
  if (!cache::IsRemoteReadNeeded(read.status())) {
    done(std::move(read));
    return;
  }
  executors_.PostWaiting([this, file = std::move(file), offset, size, done = std::move(done)] {
    done(ReadInternal(*file, offset, size, cache::ReadMode::kAny));
  });
}

absl::StatusOr<cache::ReadBuffer> Client::ReadInternal(OpenFile& file, uint64_t offset,
                                                      uint64_t size, cache::ReadMode mode) {
  std::vector<proto::Segment> segments;
  uint64_t length;
  auto writer = file.writer != nullptr ? file.writer : FindWriter(file.ino);
  if (writer != nullptr) {
    // Bytes whose write() returned are read back once they are durable
    // (DESIGN §2), never cut short: a copy-truncate rotation copies them.
    // If the writer fails instead, they never will be: the file ends at
    // its acked length (where its close seals it), and the read returns
    // what is there, as the size (WithLiveSizeAsync) then says.
    if (std::min(offset + size, writer->length()) > writer->acked_length()) {
      if (mode == cache::ReadMode::kCachedOnly) return cache::RemoteReadNeeded();
      WaitUntilDurable(*writer).IgnoreError();  // its error is the writer's: write, fsync, close
    }
    segments = writer->ReadableSegments();
    length = writer->acked_length();
  } else {
    bool refresh;
    uint64_t ticket = 0;
    {
      absl::MutexLock lock(&file.mu);
      length = SealedLength(file.inode);
      refresh = file.live && (offset + size > length || HasOpenSegment(file.inode));
      if (!refresh) {
        segments.assign(file.inode.segments().begin(), file.inode.segments().end());
      } else if (mode != cache::ReadMode::kCachedOnly) {
        ticket = ++file.inode_asks;
      }
    }
    if (refresh) {
      // A live file's length comes from meta and from its open segment's
      // replicas (LiveLength): asked on the waiting pool, never on a FUSE
      // worker, and with no lock held, so that other reads of this handle
      // do not wait behind a stalled server.
      if (mode == cache::ReadMode::kCachedOnly) return cache::RemoteReadNeeded();
      ASSIGN_OR_RETURN(proto::Inode inode, deps_->GetInode(file.ino));
      length = LiveLength(inode);
      segments.assign(inode.segments().begin(), inode.segments().end());
      absl::MutexLock lock(&file.mu);
      // Of answers that cross, keep the one asked for last.
      if (ticket > file.inode_ticket) {
        file.inode_ticket = ticket;
        file.inode = std::move(inode);
      }
    }
  }
  cache::ReadBuffer out;
  RETURN_IF_ERROR(deps_->ReadSegments(block_cache_.get(), file.ino, segments, length, offset,
                                      size, mode, &out));
  return out;
}

absl::Status Client::WaitUntilDurable(wal::FileWriter& writer) {
  Executors::CheckMayWaitOn(Executor::kRecovery, "a writer's sync");
  struct Wait {
    absl::Notification done;
    absl::Status status;
  };
  auto wait = std::make_shared<Wait>();
  writer.Sync([wait](absl::Status s) {
    wait->status = std::move(s);
    wait->done.Notify();
  });
  // The writer fails itself (EIO) once a sync waits past fsync_timeout; the
  // extra second only covers that failure reaching us.
  if (!wait->done.WaitForNotificationWithTimeout(options_.fsync_timeout + absl::Seconds(1))) {
    return PosixError(EIO, "written bytes did not become durable in time");
  }
  return wait->status;
}

absl::Status Client::Write(OpenFile& file, uint64_t offset, const char* data, size_t size) {
  if (file.write_denied || file.writer == nullptr) {
    return PosixError(EPERM, "sealed block files are immutable");
  }
  std::optional<uint64_t> at;
  if (!file.append) at = offset;
  return file.writer->Write(at, absl::string_view(data, size));
}

void Client::WriteAsync(OpenFile& file, uint64_t offset, const char* data, size_t size,
                       std::function<void(absl::Status)> done) {
  if (file.write_denied || file.writer == nullptr) {
    done(PosixError(EPERM, "sealed block files are immutable"));
    return;
  }
  std::optional<uint64_t> at;
  if (!file.append) at = offset;
  file.writer->WriteAsync(at, absl::string_view(data, size), std::move(done));
}

void Client::Sync(OpenFile& file, std::function<void(absl::Status)> done) {
  if (file.writer == nullptr) {
    done(absl::OkStatus());
    return;
  }
  file.writer->Sync(std::move(done));
}

void Client::Flush(OpenFile& file, std::function<void(absl::Status)> done) {
  if (file.writer == nullptr) {
    done(absl::OkStatus());
    return;
  }
  file.writer->SealAsync(std::move(done));
}

absl::Status Client::Release(std::shared_ptr<OpenFile> file) {
  Executors::CheckMayWaitOn(Executor::kWaiting, "a writer's close");
  absl::Notification released;
  absl::Status status;
  ReleaseAsync(std::move(file), [&](absl::Status s) {
    status = std::move(s);
    released.Notify();
  });
  released.WaitForNotification();
  return status;
}

void Client::ReleaseAsync(std::shared_ptr<OpenFile> file, std::function<void(absl::Status)> done) {
  if (file->writer == nullptr) {
    done(deps_->Release(file->ino));
    return;
  }
  bool last;
  {
    absl::MutexLock lock(&mu_);
    last = writers_.Release(file->ino);
  }
  if (!last) {  // other handles still write
    done(absl::OkStatus());
    return;
  }
  const uint64_t ino = file->ino;
  std::shared_ptr<wal::FileWriter> writer = file->writer;
  CloseWriter(ino, std::move(writer),
              [file = std::move(file), done = std::move(done)](absl::Status status) {
                done(std::move(status));
              });
}

void Client::CloseWriter(uint64_t ino, std::shared_ptr<wal::FileWriter> writer,
                         std::function<void(absl::Status)> done) {
  wal::FileWriter& closing = *writer;
  closing.CloseAsync([this, ino, writer = std::move(writer),
                      done = std::move(done)](absl::Status status) {
    std::vector<std::function<void()>> after_close;
    {
      absl::MutexLock lock(&mu_);
      after_close = writers_.Closed(ino);
    }
    done(std::move(status));
    for (auto& call : after_close) call();
  });
}

}  // namespace logfs::fsclient

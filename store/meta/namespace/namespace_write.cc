// Namespace: open pins, writer leases, segment sealing and placement, and
// recovery of an open segment whose writer died (docs/rpc.md "OpenWrite",
// "SealSegment").
#include <glog/logging.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "src/status/macros.h"
#include "src/status/posix_error.h"
#include "src/util/log_rate_limit.h"
#include "store/meta/namespace/internal/namespace_txn.h"
#include "store/meta/namespace/namespace.h"

namespace logfs::meta {
namespace {

// Sets each segment's file_offset and the file size from the recorded
// segment lengths.
void UpdateOffsets(proto::Inode* inode) {
  uint64_t offset = 0;
  for (auto& segment : *inode->mutable_segments()) {
    segment.set_file_offset(offset);
    offset += segment.length();
  }
  inode->mutable_attr()->set_size(offset);
}

absl::Status CheckRegular(const proto::Inode& inode) {
  if (S_ISDIR(inode.attr().mode())) return PosixError(EISDIR, "is a directory");
  if (!S_ISREG(inode.attr().mode())) return PosixError(EINVAL, "not a regular file");
  return absl::OkStatus();
}

}  // namespace

// Removes the replicas on `failed` servers from a segment being sealed; they
// may hold a partial or diverging copy. (Re-replication restores the count.)
static void DropReplicas(proto::Segment* segment,
                         const google::protobuf::RepeatedField<uint64_t>& failed) {
  auto* replicas = segment->mutable_replicas();
  replicas->erase(std::remove_if(replicas->begin(), replicas->end(),
                                 [&](const proto::Replica& r) {
                                   return std::find(failed.begin(), failed.end(), r.server_id()) !=
                                          failed.end();
                                 }),
                  replicas->end());
}

absl::Status Namespace::AppendSegment(Txn& txn, proto::Inode* inode,
                                      const std::vector<uint64_t>& excluded_servers,
                                      const std::vector<uint64_t>& avoided_servers) {
  // Bounded so that every reply carrying the inode fits in one frame
  // (store/format/limits.h), as HDFS bounds blocks per file. The new segment
  // counts at its worst case; one ByteSizeLong per roll costs less than
  // the synced write of the same inode that follows.
  const size_t reply_bytes = ReplyInode(*inode).ByteSizeLong();
  if (reply_bytes + format::internal::LengthFieldBytes(format::internal::kSegmentBytesMax) >
      options_.inode_reply_bytes_max) {
    return PosixError(EFBIG, absl::StrCat("inode ", inode->attr().ino(), " has ",
                                          inode->segments_size(), " segments (", reply_bytes,
                                          " bytes), the most a file may have (truncate a WAL "
                                          "file to 0 or start a new file)"));
  }
  const uint32_t replication = Replication(*inode);
  const uint32_t ack_quorum = AckQuorum(*inode);
  auto placed = servers_.Place(replication, excluded_servers, {}, avoided_servers, NowNs());
  // Too few live servers for every replica (a roll away from failed ones
  // on a small cluster, a new block file while one of three servers is
  // down): a segment on fewer servers, down to the ack quorum but never
  // below kDegradedReplicasMin, keeps the writer going; every replica it
  // has must ack, and re-replication completes it once sealed (HDFS's
  // replace-datanode-on-failure "best effort" and
  // dfs.namenode.replication.min). Block files ack on every replica, so
  // without the floor one dead server of three would fail every new one.
  const uint32_t floor = std::min(ack_quorum, format::kDegradedReplicasMin);
  for (uint32_t n = replication - 1; absl::IsUnavailable(placed.status()) && n >= floor && n > 0;
       --n) {
    placed = servers_.Place(n, excluded_servers, {}, avoided_servers, NowNs());
    if (placed.ok()) {
      LOGFS_LOG_EVERY_MS(WARNING, 1000)
          << "inode " << inode->attr().ino() << ": new segment on " << n << " of " << replication
          << " replicas (too few live servers)";
    }
  }
  if (!placed.ok()) return placed.status();
  std::vector<uint64_t> server_ids = std::move(*placed);
  UpdateOffsets(inode);
  proto::Segment* segment = inode->add_segments();
  segment->set_id(AllocateId(txn, MetaCounter::kNextSegmentId));
  segment->set_epoch(1);
  for (uint64_t server_id : server_ids) segment->add_replicas()->set_server_id(server_id);
  segment->set_file_offset(inode->attr().size());
  segment->set_ack_quorum(std::min<uint32_t>(ack_quorum, server_ids.size()));
  txn.Put(inode);
  return absl::OkStatus();
}

absl::StatusOr<proto::Inode> Namespace::Open(uint64_t ino, uint64_t mount_id) {
  absl::MutexLock lock(&mu_);
  // Answered from the durable view, but the pin is a decision: a file
  // whose deletion is staged (an unlink nobody pinned against) is not
  // pinned back to life.
  Txn latest(db_);
  RETURN_IF_ERROR(latest.Get(ino).status());
  Txn txn(db_, MetadataDb::View::kDurable);
  ASSIGN_OR_RETURN(proto::Inode * inode, txn.Get(ino));
  TouchMount(mount_id);
  mounts_.Pin(ino, mount_id);
  return ReplyInode(*inode);
}

absl::Status Namespace::Release(uint64_t ino, uint64_t mount_id) {
  return ChangeIfStaged([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    if (!mounts_.Unpin(ino, mount_id)) return absl::OkStatus();  // nothing held: idempotent
    // A writer that goes away without SealSegment(close) (a lock file never
    // written) gives its lease up with its last pin.
    if (!mounts_.PinnedBy(ino, mount_id)) mounts_.RevokeIfHeldBy(ino, mount_id);
    return MaybeDeleteOrphan(ino);
  });
}

absl::StatusOr<proto::Inode> Namespace::OpenWrite(const proto::OpenWriteRequest& request) {
  RecoveryPlan plan;
  bool needs_recovery = false;
  auto opened = Change([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return OpenWriteLocked(request, &needs_recovery, &plan);
  });
  if (!opened.ok() || !needs_recovery) return opened;
  // The caller holds the lease now, so no other mount can write or recover
  // this file while the segment servers are asked without the mutex.
  absl::StatusOr<RecoveryResult> result = RecoverSegment(*segment_servers_, plan);
  return Change(
      [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return FinishRecovery(request, plan, result); });
}

absl::StatusOr<proto::Inode> Namespace::OpenWriteLocked(const proto::OpenWriteRequest& request,
                                                        bool* needs_recovery, RecoveryPlan* plan) {
  const uint64_t ino = request.ino();
  const uint64_t mount_id = request.mount_id();
  TouchMount(mount_id);
  Txn txn(db_);
  ASSIGN_OR_RETURN(proto::Inode * inode, txn.Get(ino));
  RETURN_IF_ERROR(CheckRegular(*inode));
  RETURN_IF_ERROR(RefuseReadOnly(*inode));
  uint64_t holder = LiveLeaseHolder(ino);
  if (holder != 0 && holder != mount_id) {
    return PosixError(EBUSY, absl::StrCat("file is open for write by mount ", holder));
  }
  const bool wal = inode->attr().kind() == proto::KIND_WAL;
  if (holder != mount_id && !wal && inode->attr().size() > 0) {
    return PosixError(EPERM, "block file is sealed and immutable");
  }
  if (request.truncate() && wal && inode->segments_size() > 0) {
    DropSegments(txn, inode);
    inode->mutable_attr()->set_mtime_ns(NowNs());
    inode->mutable_attr()->set_ctime_ns(NowNs());
  }
  const proto::Segment* open = OpenLastSegment(*inode);
  if (holder != mount_id && open != nullptr) {
    *needs_recovery = true;
    *plan = PlanRecovery(*open);
    mounts_.Grant(ino, mount_id);
    return proto::Inode();
  }
  if (holder != mount_id) PassLease(ino, inode, txn);
  RETURN_IF_ERROR(txn.Commit());
  mounts_.Grant(ino, mount_id);
  mounts_.Pin(ino, mount_id);
  return ReplyInode(*inode);
}

void Namespace::PassLease(uint64_t ino, proto::Inode* inode, Txn& txn) {
  inode->set_lease_epoch(inode->lease_epoch() + 1);
  txn.Put(inode);
  // A mount whose lease lapsed does not get it back by heartbeat either.
  mounts_.ForgetLapsed(ino);
}

absl::StatusOr<proto::Inode> Namespace::FinishRecovery(
    const proto::OpenWriteRequest& request, const RecoveryPlan& plan,
    const absl::StatusOr<RecoveryResult>& result) {
  const uint64_t ino = request.ino();
  const bool have_lease = mounts_.HeldBy(ino, request.mount_id());
  auto give_up = [&](absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (have_lease) mounts_.Revoke(ino);
    return status;
  };
  if (!result.ok()) return give_up(result.status());
  if (!have_lease) return PosixError(EBUSY, "lease lost during recovery");
  Txn txn(db_);
  auto inode_or = txn.Get(ino);
  if (!inode_or.ok()) return give_up(inode_or.status());
  proto::Inode* inode = *inode_or;
  const proto::Segment* open = OpenLastSegment(*inode);
  if (open == nullptr || open->id() != plan.segment_id) {
    return give_up(PosixError(EAGAIN, "segment changed during recovery; retry"));
  }
  proto::Segment* segment = inode->mutable_segments(inode->segments_size() - 1);
  segment->set_length(result->length);
  segment->set_sealed(true);
  if (result->epoch != 0) segment->set_epoch(result->epoch);
  segment->clear_replicas();
  for (uint64_t server_id : result->kept_server_ids)
    segment->add_replicas()->set_server_id(server_id);
  if (absl::Status synced = SyncSharedReplicas(txn, ino, *segment); !synced.ok()) {
    return give_up(synced);
  }
  UpdateOffsets(inode);
  PassLease(ino, inode, txn);
  absl::Status committed = txn.Commit();
  if (!committed.ok()) return give_up(committed);
  if (inode->attr().kind() != proto::KIND_WAL && inode->attr().size() > 0) {
    return give_up(PosixError(EPERM, "block file is sealed and immutable"));
  }
  mounts_.Pin(ino, request.mount_id());
  return ReplyInode(*inode);
}

absl::StatusOr<proto::Inode> Namespace::SealSegment(const proto::SealSegmentRequest& request) {
  const uint64_t ino = request.ino();
  return Change([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::StatusOr<proto::Inode> {
    TouchMount(request.mount_id());
    servers_.MarkFailing(request.failed_servers(), NowNs());
    ASSIGN_OR_RETURN(auto recorded,
                     RecordedReply(request.call(), format::MessageType::kSealSegment));
    if (recorded.has_value()) {
      // Applied before meta restarted: the writer goes on with the segment
      // it was given, so it takes its lease back as an unanswered seal's
      // writer would (below), unless somebody else holds it by now or it
      // passed to another holder since (lease_epoch).
      // The record holds no reply: the inode as it is now is the answer
      // (the writer holds the lease, so nothing has changed it since), and
      // a record per seal stays small however long the segment list grows.
      Txn txn(db_);
      ASSIGN_OR_RETURN(proto::Inode * inode, txn.Get(ino));
      if (!request.close() && LiveLeaseHolder(ino) == 0 &&
          request.lease_epoch() == inode->lease_epoch()) {
        mounts_.Grant(ino, request.mount_id());
      }
      return ReplyInode(*inode);
    }
    Txn txn(db_);
    ASSIGN_OR_RETURN(proto::Inode * inode, txn.Get(ino));
    RETURN_IF_ERROR(CheckRegular(*inode));
    RETURN_IF_ERROR(RefuseReadOnly(*inode));
    if (absl::Status leased = TakeSealLease(request, *inode); !leased.ok()) {
      // A close that changed nothing and lost its lease meanwhile (a
      // retry after its reply was lost and another writer came): what it
      // asked, that this mount let go, holds.
      if (!request.close() || !request.unchanged() || request.segment_id() != 0) return leased;
      mounts_.Unpin(ino, request.mount_id());
      return ReplyInode(*inode);
    }
    RETURN_IF_ERROR(ApplySeal(request, txn, inode));
    auto reply_bytes = [] { return std::string(); };  // replayed from the inode
    if (!request.close() && request.keep_lease()) {
      // Sealed at a flush (close(2) of a descriptor): the writer keeps its
      // lease and asks for a new segment only if it writes again.
      RecordCall(txn, request.call(), format::MessageType::kSealSegment, reply_bytes);
      RETURN_IF_ERROR(txn.Commit());
      return ReplyInode(*inode);
    }
    if (!request.close() && request.segment_id() == 0 && request.continue_below_bytes() > 0 &&
        ContinueLastSegment(txn, inode, request.continue_below_bytes(), request.avoid_servers())) {
      RecordCall(txn, request.call(), format::MessageType::kSealSegment, reply_bytes);
      RETURN_IF_ERROR(txn.Commit());
      return ReplyInode(*inode);
    }
    if (!request.close()) {
      std::vector<uint64_t> excluded(request.failed_servers().begin(),
                                     request.failed_servers().end());
      std::vector<uint64_t> avoided(request.avoid_servers().begin(), request.avoid_servers().end());
      absl::Status appended = AppendSegment(txn, inode, excluded, avoided);
      if (!appended.ok()) {
        // Keep the seal: the writer may retry with segment_id 0.
        RETURN_IF_ERROR(txn.Commit());
        return appended;
      }
      RecordCall(txn, request.call(), format::MessageType::kSealSegment, reply_bytes);
      RETURN_IF_ERROR(txn.Commit());
      return ReplyInode(*inode);
    }
    // A writer that changed nothing (an empty file created and closed)
    // leaves the file as it is: its close is no durable change.
    const bool unchanged =
        request.unchanged() && request.segment_id() == 0 && OpenLastSegment(*inode) == nullptr;
    if (!unchanged) {
      int64_t now = NowNs();
      inode->mutable_attr()->set_mtime_ns(request.mtime_ns() != 0 ? request.mtime_ns() : now);
      inode->mutable_attr()->set_ctime_ns(now);
      txn.Put(inode);
      RecordCall(txn, request.call(), format::MessageType::kSealSegment, reply_bytes);
      RETURN_IF_ERROR(txn.Commit());
    }
    mounts_.Revoke(ino);
    mounts_.Unpin(ino, request.mount_id());
    proto::Inode reply = ReplyInode(*inode);
    RETURN_IF_ERROR(MaybeDeleteOrphan(ino));
    return reply;
  });
}

bool Namespace::ContinueLastSegment(Txn& txn, proto::Inode* inode, uint64_t below,
                                    const google::protobuf::RepeatedField<uint64_t>& avoided) {
  if (inode->attr().kind() != proto::KIND_WAL || inode->segments_size() == 0) return false;
  proto::Segment* last = inode->mutable_segments(inode->segments_size() - 1);
  if (!last->sealed() || last->length() == 0 || last->length() >= below) return false;
  // A segment another file lists (a clone) never changes again.
  if (IsShared(txn, last->id())) return false;
  if (static_cast<uint32_t>(last->replicas_size()) != Replication(*inode)) return false;
  for (const proto::Replica& replica : last->replicas()) {
    if (std::find(avoided.begin(), avoided.end(), replica.server_id()) != avoided.end()) {
      return false;  // its writer found that server slow
    }
    const ServerState* server = servers_.Find(replica.server_id());
    if (server == nullptr || !ServerLive(*server) || ServerRegistry::Suspect(*server) ||
        !server->disk_failure.empty() || !server->unreachable.empty()) {
      return false;
    }
  }
  // Open again: a re-replication copy in flight finds it changed and is
  // dropped (CommitReplica), lease recovery treats it as any open segment.
  last->set_sealed(false);
  last->set_epoch(last->epoch() + 1);
  txn.Put(inode);
  return true;
}

absl::Status Namespace::TakeSealLease(const proto::SealSegmentRequest& request,
                                      const proto::Inode& inode) {
  const uint64_t holder = LiveLeaseHolder(request.ino());
  if (holder == request.mount_id()) return absl::OkStatus();
  // With no live lease (meta restarted, or the lease lapsed) a writer may
  // take it back while its segment is still the open last one: nobody has
  // recovered the file meanwhile.
  const proto::Segment* open = OpenLastSegment(inode);
  uint64_t sealed_length = 0;
  for (const auto& segment : inode.segments()) {
    if (segment.sealed()) sealed_length += segment.length();
  }
  const bool same_open =
      request.segment_id() != 0 && open != nullptr && open->id() == request.segment_id();
  const bool nothing_open = request.segment_id() == 0 && open == nullptr;
  // And the lease has not passed to anyone since the writer opened the
  // file (a recovery may have changed nothing else).
  const bool readopt = holder == 0 && (same_open || nothing_open) &&
                       sealed_length == request.sealed_file_length() &&
                       request.lease_epoch() == inode.lease_epoch();
  if (!readopt) {
    return PosixError(
        EBUSY, absl::StrCat("mount ", request.mount_id(), " holds no lease on ", request.ino()));
  }
  mounts_.Grant(request.ino(), request.mount_id());
  return absl::OkStatus();
}

absl::Status Namespace::ApplySeal(const proto::SealSegmentRequest& request, Txn& txn,
                                  proto::Inode* inode) {
  const proto::Segment* open = OpenLastSegment(*inode);
  if (request.segment_id() == 0) {
    if (open == nullptr) return absl::OkStatus();
    return PosixError(ESTALE, absl::StrCat("segment ", open->id(), " of ", request.ino(),
                                           " is open: seal it by id"));
  }
  const proto::Segment* last =
      inode->segments_size() > 0 ? &inode->segments(inode->segments_size() - 1) : nullptr;
  const bool already_sealed = last != nullptr && last->id() == request.segment_id() &&
                              last->sealed() && last->length() == request.sealed_length();
  if (already_sealed) return absl::OkStatus();  // a retry of a seal that was recorded
  if (open == nullptr || open->id() != request.segment_id()) {
    return PosixError(ESTALE, absl::StrCat("segment ", request.segment_id(),
                                           " is not the open last segment of ", request.ino()));
  }
  proto::Segment* segment = inode->mutable_segments(inode->segments_size() - 1);
  segment->set_length(request.sealed_length());
  segment->set_sealed(true);
  DropReplicas(segment, request.failed_servers());
  if (request.sealed_length() == 0) {
    // An empty sealed segment holds nothing: forget it (its replicas may
    // never have been sealed on their servers) and delete its replicas.
    for (const auto& replica : segment->replicas()) {
      txn.batch().AddPendingDeletion(replica.server_id(), segment->id());
    }
    inode->mutable_segments()->RemoveLast();
  } else {
    // A snapshot taken while it was open lists a prefix of it.
    RETURN_IF_ERROR(SyncSharedReplicas(txn, inode->attr().ino(), *segment));
  }
  UpdateOffsets(inode);
  txn.Put(inode);
  return absl::OkStatus();
}

}  // namespace logfs::meta

// Forced lease recovery (`logfs recover PATH`).
namespace logfs::meta {
namespace {
// Holds the lease while meta itself recovers a file; never a real mount id
// (those count up from 1).
constexpr uint64_t kRecoveryMountId = std::numeric_limits<uint64_t>::max();
}  // namespace

RecoveryPlan Namespace::PlanRecovery(const proto::Segment& open) const {
  RecoveryPlan plan;
  plan.segment_id = open.id();
  plan.epoch = open.epoch();
  plan.ack_quorum = open.ack_quorum();
  proto::Segment with_addresses = open;
  servers_.FillAddresses(&with_addresses);
  plan.replicas.assign(with_addresses.replicas().begin(), with_addresses.replicas().end());
  return plan;
}

namespace {
bool SegmentSealed(const proto::Inode& inode, uint64_t segment_id) {
  for (const auto& s : inode.segments()) {
    if (s.id() == segment_id) return s.sealed();
  }
  return false;
}
}  // namespace

absl::StatusOr<proto::Inode> Namespace::RecoverLease(uint64_t ino, bool only_if_unleased) {
  RecoveryPlan plan;
  bool recovering = false;
  auto done = Change([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::StatusOr<proto::Inode> {
    Txn txn(db_);
    ASSIGN_OR_RETURN(proto::Inode * inode, txn.Get(ino));
    RETURN_IF_ERROR(CheckRegular(*inode));
    RETURN_IF_ERROR(RefuseReadOnly(*inode));
    if (only_if_unleased && LiveLeaseHolder(ino) != 0) return ReplyInode(*inode);
    mounts_.Revoke(ino);  // the holder's next SealSegment gets EBUSY
    const proto::Segment* open = OpenLastSegment(*inode);
    if (open == nullptr) {
      // Nothing to seal, but the lease passes all the same: the writer
      // must not take it back (TakeSealLease) although the file is as it
      // left it.
      PassLease(ino, inode, txn);
      RETURN_IF_ERROR(txn.Commit());
      return ReplyInode(*inode);
    }
    plan = PlanRecovery(*open);
    // Keep other mounts out while the replicas are sealed.
    TouchMount(kRecoveryMountId);
    mounts_.Grant(ino, kRecoveryMountId);
    recovering = true;
    return proto::Inode();
  });
  if (!done.ok() || !recovering) return done;
  absl::StatusOr<RecoveryResult> result = RecoverSegment(*segment_servers_, plan);
  return Change([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::StatusOr<proto::Inode> {
    proto::OpenWriteRequest as_recovery;
    as_recovery.set_ino(ino);
    as_recovery.set_mount_id(kRecoveryMountId);
    auto inode = FinishRecovery(as_recovery, plan, result);
    if (!inode.ok() && AttachedErrno(inode.status()) == EPERM) {
      // A sealed block file: recovered all the same (OpenWrite's EPERM).
      Txn txn(db_);
      ASSIGN_OR_RETURN(proto::Inode * sealed, txn.Get(ino));
      inode = ReplyInode(*sealed);
    }
    // Recovery keeps neither the lease nor the pin FinishRecovery took.
    mounts_.RevokeIfHeldBy(ino, kRecoveryMountId);
    if (inode.ok()) mounts_.Unpin(ino, kRecoveryMountId);
    const int err = inode.ok() ? 0 : AttachedErrno(inode.status());
    if (err == EBUSY || err == EAGAIN) {
      // Another recovery of this file (meta's own after a lapsed lease, or a
      // second `logfs recover`) sealed the segment first and dropped the
      // recovery lease: the file is recovered all the same.
      Txn txn(db_);
      auto current = txn.Get(ino);
      if (current.ok() && SegmentSealed(**current, plan.segment_id)) inode = ReplyInode(**current);
    }
    return inode;
  });
}

}  // namespace logfs::meta

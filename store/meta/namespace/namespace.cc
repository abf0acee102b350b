// Namespace: startup, reply helpers, and the read / create / setattr calls.
// Removal and rename: namespace_remove.cc; xattrs: namespace_xattr.cc;
// open files and segments: namespace_write.cc; servers and mounts:
// namespace_servers.cc.
#include "store/meta/namespace/namespace.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "src/status/macros.h"
#include "src/status/posix_error.h"
#include "store/format/file_type.h"
#include "store/format/setattr_bits.h"
#include "store/meta/namespace/internal/namespace_txn.h"

namespace logfs::meta {
namespace {

bool IsReg(const proto::Inode& inode) { return S_ISREG(inode.attr().mode()); }

}  // namespace

absl::Status ValidateNewName(const std::string& name) {
  if (name.size() > format::kNameBytesMax) {
    return PosixError(ENAMETOOLONG,
                      absl::StrCat("name longer than ", format::kNameBytesMax, " bytes"));
  }
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    return PosixError(EINVAL, absl::StrCat("invalid name '", name, "'"));
  }
  return absl::OkStatus();
}

Namespace::Namespace(MetadataDb* db, SegmentServerApi* segment_servers, NamespaceOptions options)
    : db_(db),
      segment_servers_(segment_servers),
      options_(std::move(options)),
      servers_(options_.dead_server_ms * kNanosPerMilli),
      mounts_(MountTable::Options{
          .lease_timeout_ns = options_.lease_timeout_ms * kNanosPerMilli,
          .lease_recovery_delay_ns = options_.lease_recovery_delay_ms * kNanosPerMilli,
          .unlinked_grace_ns = options_.unlinked_grace_ms * kNanosPerMilli}) {}

Namespace::~Namespace() = default;

absl::StatusOr<std::unique_ptr<Namespace>> Namespace::Open(MetadataDb* db,
                                                           SegmentServerApi* segment_servers,
                                                           NamespaceOptions options) {
  std::unique_ptr<Namespace> ns(new Namespace(db, segment_servers, std::move(options)));
  RETURN_IF_ERROR(ns->Load());
  RETURN_IF_ERROR(ns->WaitStaged());
  return ns;
}

absl::Status Namespace::Load() {
  absl::MutexLock lock(&mu_);
  Txn txn(db_);
  for (MetaCounter counter : {MetaCounter::kNextIno, MetaCounter::kNextSegmentId,
                              MetaCounter::kNextMountId, MetaCounter::kNextServerId}) {
    ASSIGN_OR_RETURN(uint64_t next, db_->GetCounter(counter));
    if (next == 0) next = counter == MetaCounter::kNextIno ? kRootIno + 1 : 1;
    next_ids_[counter] = next;
  }
  ASSIGN_OR_RETURN(cluster_id_, db_->GetCounter(MetaCounter::kClusterId));
  if (cluster_id_ == 0) {
    std::random_device random;
    while (cluster_id_ == 0) {
      cluster_id_ = (static_cast<uint64_t>(random()) << 32) ^ random();
    }
    txn.batch().PutCounter(MetaCounter::kClusterId, cluster_id_);
  }
  auto root = db_->GetInode(kRootIno);
  if (absl::IsNotFound(root.status())) {
    int64_t now = NowNs();
    proto::Inode inode;
    proto::Attr* attr = inode.mutable_attr();
    attr->set_ino(kRootIno);
    attr->set_mode(S_IFDIR | 0755);
    attr->set_nlink(2);
    attr->set_kind(proto::KIND_BLOCK);
    attr->set_atime_ns(now);
    attr->set_mtime_ns(now);
    attr->set_ctime_ns(now);
    inode.set_parent(kRootIno);
    txn.Add(std::move(inode));
    txn.batch().PutCounter(MetaCounter::kNextIno, next_ids_[MetaCounter::kNextIno]);
  } else if (!root.ok()) {
    return root.status();
  }
  ASSIGN_OR_RETURN(auto servers, db_->ListServers());
  // Registered servers count as live for one --dead_server_ms after a meta
  // start, until their heartbeats (every second) say more; as HDFS's
  // NameNode trusts its DataNode list while it leaves safe mode. Without
  // this, every new segment fails right after a meta restart.
  for (auto& record : servers) servers_.Restore(std::move(record), NowNs());
  // Pins do not survive a restart, so every orphan is now unreferenced.
  ASSIGN_OR_RETURN(auto orphans, db_->ListOrphans());
  for (uint64_t ino : orphans) {
    auto inode = txn.Get(ino);
    if (inode.ok() && (*inode)->attr().nlink() == 0) DeleteFile(txn, **inode);
    txn.batch().DeleteOrphan(ino);
  }
  RETURN_IF_ERROR(txn.Commit());
  RETURN_IF_ERROR(FinishSnapshots());
  ASSIGN_OR_RETURN(inode_count_, db_->CountInodes());
  return absl::OkStatus();
}

int64_t Namespace::NowNs() const {
  return options_.now_ns ? options_.now_ns() : absl::ToUnixNanos(absl::Now());
}

uint64_t Namespace::AllocateId(Txn& txn, MetaCounter counter) {
  uint64_t id = next_ids_[counter]++;
  txn.batch().PutCounter(counter, id + 1);
  return id;
}

uint32_t Namespace::Replication(const proto::Inode& inode) const {
  return inode.replication() != 0 ? inode.replication() : options_.default_replication;
}

uint32_t Namespace::AckQuorum(const proto::Inode& inode) const {
  uint32_t replication = Replication(inode);
  if (inode.ack_quorum() != 0) return std::min(inode.ack_quorum(), replication);
  if (inode.attr().kind() == proto::KIND_WAL) return std::min(options_.wal_ack_quorum, replication);
  return replication;
}

proto::Attr Namespace::ReplyAttr(const proto::Inode& inode) const {
  proto::Attr attr = inode.attr();
  attr.set_open_for_write(LiveLeaseHolder(attr.ino()) != 0);
  attr.set_open_segment(OpenLastSegment(inode) != nullptr);
  return attr;
}

proto::Inode Namespace::ReplyInode(const proto::Inode& inode) const {
  proto::Inode reply = inode;
  // Xattrs are served by GetXattr/ListXattr; left out, the reply stays
  // within store/format/limits.h's kInodeReplyBytesMax.
  reply.clear_xattrs();
  *reply.mutable_attr() = ReplyAttr(inode);
  reply.set_replication(Replication(inode));
  reply.set_ack_quorum(AckQuorum(inode));
  for (auto& segment : *reply.mutable_segments()) servers_.FillAddresses(&segment);
  return reply;
}

absl::Status RefuseReadOnly(const proto::Inode& inode) {
  if (!inode.read_only()) return absl::OkStatus();
  return PosixError(EROFS, absl::StrCat("inode ", inode.attr().ino(),
                                        " is in a snapshot, which is read-only"));
}

absl::StatusOr<proto::Inode*> Namespace::GetDir(Txn& txn, uint64_t ino) {
  ASSIGN_OR_RETURN(proto::Inode * dir, txn.Get(ino));
  if (!IsDir(*dir)) return PosixError(ENOTDIR, absl::StrCat("inode ", ino, " is not a directory"));
  return dir;
}

absl::StatusOr<proto::Attr> Namespace::Lookup(uint64_t parent, const std::string& name) {
  if (name.size() > format::kNameBytesMax) {
    return PosixError(ENAMETOOLONG,
                      absl::StrCat("name longer than ", format::kNameBytesMax, " bytes"));
  }
  absl::MutexLock lock(&mu_);
  Txn txn(db_, MetadataDb::View::kDurable);
  ASSIGN_OR_RETURN(proto::Inode * dir, GetDir(txn, parent));
  if (name == ".") return ReplyAttr(*dir);
  if (name == "..") {
    ASSIGN_OR_RETURN(proto::Inode * up, txn.Get(dir->parent() != 0 ? dir->parent() : kRootIno));
    return ReplyAttr(*up);
  }
  auto entry = db_->GetDirEntry(parent, name, MetadataDb::View::kDurable, txn.snapshot());
  if (absl::IsNotFound(entry.status())) {
    return PosixError(ENOENT, absl::StrCat("no entry '", name, "' in ", parent));
  }
  if (!entry.ok()) return entry.status();
  ASSIGN_OR_RETURN(proto::Inode * child, txn.Get(entry->ino()));
  return ReplyAttr(*child);
}

absl::StatusOr<proto::Attr> Namespace::GetAttr(uint64_t ino) {
  absl::MutexLock lock(&mu_);
  Txn txn(db_, MetadataDb::View::kDurable);
  ASSIGN_OR_RETURN(proto::Inode * inode, txn.Get(ino));
  return ReplyAttr(*inode);
}

absl::StatusOr<proto::Inode> Namespace::GetInode(uint64_t ino) {
  absl::MutexLock lock(&mu_);
  Txn txn(db_, MetadataDb::View::kDurable);
  ASSIGN_OR_RETURN(proto::Inode * inode, txn.Get(ino));
  return ReplyInode(*inode);
}

absl::StatusOr<std::string> Namespace::Readlink(uint64_t ino) {
  absl::MutexLock lock(&mu_);
  Txn txn(db_, MetadataDb::View::kDurable);
  ASSIGN_OR_RETURN(proto::Inode * inode, txn.Get(ino));
  if (!S_ISLNK(inode->attr().mode())) {
    return PosixError(EINVAL, absl::StrCat("inode ", ino, " is not a symlink"));
  }
  return inode->symlink_target();
}

absl::StatusOr<proto::ReaddirResponse> Namespace::Readdir(uint64_t ino,
                                                          const std::string& start_after) {
  uint64_t snapshot_dir = 0;
  {
    absl::MutexLock lock(&mu_);
    Txn txn(db_, MetadataDb::View::kDurable);
    ASSIGN_OR_RETURN(proto::Inode * dir, GetDir(txn, ino));
    snapshot_dir = dir->snapshot_dir();
  }
  // RocksDB reads need no lock: a page is one iterator's view of the
  // durable state, and the cursor keeps later pages right however the
  // directory changes.
  ASSIGN_OR_RETURN(MetadataDb::DirPage page,
                   db_->ListDir(ino, start_after, format::kReaddirPageEntriesMax,
                                format::kReaddirPageBytesMax, MetadataDb::View::kDurable));
  proto::ReaddirResponse response;
  for (auto& entry : page.entries) {
    // The snapshot directory is looked up by name only, as HDFS's
    // `.snapshot` and CephFS's `.snap`: `ls`, `rm -r` and RocksDB's
    // directory scans never see it. The page may be newer than the inode
    // read above (a first snapshot made in between): read it again.
    if (entry.name() == ".snapshot" && snapshot_dir == 0) {
      absl::StatusOr<proto::Inode> now = db_->GetInode(ino, MetadataDb::View::kDurable);
      if (now.ok()) snapshot_dir = now->snapshot_dir();
    }
    if (snapshot_dir != 0 && entry.ino() == snapshot_dir) continue;
    *response.add_entries() = std::move(entry);
  }
  response.set_more(page.more);
  return response;
}

absl::StatusOr<proto::Attr> Namespace::Create(const proto::CreateRequest& request) {
  if (request.open_for_write_mount_id() != 0) {
    return PosixError(EINVAL, "a create open for write is CreateForWrite");
  }
  ASSIGN_OR_RETURN(proto::Inode created, CreateInode(request));
  return std::move(*created.mutable_attr());
}

absl::StatusOr<proto::Inode> Namespace::CreateForWrite(const proto::CreateRequest& request) {
  if (request.open_for_write_mount_id() == 0) {
    return PosixError(EINVAL, "a create open for write names its mount");
  }
  if ((request.mode() & S_IFMT) != S_IFREG) {
    return PosixError(EINVAL, "only a regular file is created open for write");
  }
  return CreateInode(request);
}

absl::StatusOr<proto::Inode> Namespace::CreateInode(const proto::CreateRequest& request) {
  RETURN_IF_ERROR(ValidateNewName(request.name()));
  uint32_t type = request.mode() & S_IFMT;
  const bool special = format::IsSpecialFile(type);
  if (type != S_IFREG && type != S_IFDIR && type != S_IFLNK && !special) {
    return PosixError(EINVAL, absl::StrCat("cannot create file type ", type >> 12));
  }
  if (request.rdev() != 0 && type != S_IFCHR && type != S_IFBLK) {
    return PosixError(EINVAL, "only a device node has a device number");
  }
  if (type == S_IFLNK && request.symlink_target().empty()) {
    return PosixError(ENOENT, "empty symlink target");
  }
  if (request.symlink_target().size() > format::kSymlinkTargetBytesMax) {
    return PosixError(ENAMETOOLONG, absl::StrCat("symlink target longer than ",
                                                 format::kSymlinkTargetBytesMax, " bytes"));
  }
  const uint64_t writer = request.open_for_write_mount_id();
  return Change([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::StatusOr<proto::Inode> {
    ASSIGN_OR_RETURN(auto recorded, RecordedReply(request.call(), format::MessageType::kCreate));
    if (recorded.has_value()) {
      proto::AttrResponse reply;
      if (!reply.ParseFromString(*recorded))
        return absl::DataLossError("unparseable recorded reply");
      proto::Inode inode = reply.has_inode() ? reply.inode() : proto::Inode();
      *inode.mutable_attr() = reply.attr();
      if (writer == 0) return inode;
      // Created before meta restarted or failed over (leases live in
      // memory): the writer goes on with the lease it was given, if the
      // file is still as created (nobody wrote it or took the lease since).
      const uint64_t ino = inode.attr().ino();
      Txn txn(db_);
      ASSIGN_OR_RETURN(proto::Inode * now, txn.Get(ino));
      const uint64_t holder = LiveLeaseHolder(ino);
      if ((holder != 0 && holder != writer) || now->lease_epoch() != inode.lease_epoch() ||
          now->segments_size() != 0) {
        return PosixError(EBUSY, absl::StrCat("file ", ino, " was opened for write since"));
      }
      TouchMount(writer);
      if (holder == 0) {
        mounts_.Grant(ino, writer);
        mounts_.Pin(ino, writer);
      }
      return ReplyInode(*now);
    }
    Txn txn(db_);
    ASSIGN_OR_RETURN(proto::Inode * parent, DirForNewEntry(txn, request.parent(), request.name()));

    int64_t now = NowNs();
    proto::Inode inode;
    proto::Attr* attr = inode.mutable_attr();
    attr->set_ino(AllocateId(txn, MetaCounter::kNextIno));
    attr->set_mode(type | (request.mode() & 07777));
    attr->set_uid(request.uid());
    attr->set_gid(request.gid());
    attr->set_atime_ns(now);
    attr->set_mtime_ns(now);
    attr->set_ctime_ns(now);
    attr->set_nlink(type == S_IFDIR ? 2 : 1);
    if (special) {
      // Metadata only: no kind, no settings, never a segment or a lease.
      attr->set_rdev(request.rdev());
    } else {
      const proto::FileKind kind =
          request.has_kind() && request.kind() != proto::KIND_UNSPECIFIED && type == S_IFREG
              ? request.kind()
              : parent->attr().kind();
      attr->set_kind(kind == proto::KIND_WAL ? proto::KIND_WAL : proto::KIND_BLOCK);
      // Only explicitly set values are stored; 0 means "the kind's default".
      inode.set_replication(parent->replication());
      inode.set_ack_quorum(parent->ack_quorum());
    }
    if (type == S_IFLNK) {
      inode.set_symlink_target(request.symlink_target());
      attr->set_size(request.symlink_target().size());
    }
    if (type == S_IFDIR) {
      inode.set_parent(parent->attr().ino());
      parent->mutable_attr()->set_nlink(parent->attr().nlink() + 1);
    }
    AddEntry(txn, parent, request.name(), inode, now);
    proto::Inode* added = txn.Add(std::move(inode));
    const uint64_t ino = added->attr().ino();
    if (writer != 0) {
      // The lease as OpenWrite would pass it (lease_epoch 1), in this
      // change: a create + close of a file costs no OpenWrite.
      PassLease(ino, added, txn);
      TouchMount(writer);
      mounts_.Grant(ino, writer);
    }
    RecordCall(txn, request.call(), format::MessageType::kCreate,
               [this, added, writer]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                 proto::AttrResponse reply;
                 *reply.mutable_attr() = ReplyAttr(*added);
                 if (writer != 0) *reply.mutable_inode() = ReplyInode(*added);
                 return reply.SerializeAsString();
               });
    if (absl::Status staged = txn.Commit(); !staged.ok()) {
      if (writer != 0) mounts_.Revoke(ino);
      return staged;
    }
    ++inode_count_;
    if (writer != 0) mounts_.Pin(ino, writer);
    return ReplyInode(*added);
  });
}

absl::StatusOr<proto::Inode*> Namespace::DirForNewEntry(Txn& txn, uint64_t parent,
                                                        const std::string& name) {
  ASSIGN_OR_RETURN(proto::Inode * dir, GetDir(txn, parent));
  RETURN_IF_ERROR(RefuseReadOnly(*dir));
  auto existing = db_->GetDirEntry(parent, name);
  if (existing.ok()) return PosixError(EEXIST, absl::StrCat("'", name, "' exists"));
  if (!absl::IsNotFound(existing.status())) return existing.status();
  return dir;
}

void Namespace::AddEntry(Txn& txn, proto::Inode* parent, const std::string& name,
                         const proto::Inode& inode, int64_t now_ns) {
  proto::DirEntry entry;
  entry.set_name(name);
  entry.set_ino(inode.attr().ino());
  entry.set_mode(inode.attr().mode());
  txn.batch().PutDirEntry(parent->attr().ino(), entry);
  parent->mutable_attr()->set_mtime_ns(now_ns);
  parent->mutable_attr()->set_ctime_ns(now_ns);
  txn.Put(parent);
}

void Namespace::RecordAttrCall(Txn& txn, const proto::CallId& call, format::MessageType type,
                               const proto::Inode* inode) {
  RecordCall(txn, call, type, [this, inode]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    proto::AttrResponse reply;
    *reply.mutable_attr() = ReplyAttr(*inode);
    return reply.SerializeAsString();
  });
}

absl::StatusOr<proto::Attr> Namespace::Link(const proto::LinkRequest& request) {
  RETURN_IF_ERROR(ValidateNewName(request.new_name()));
  return Change([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::StatusOr<proto::Attr> {
    ASSIGN_OR_RETURN(auto recorded, RecordedReply(request.call(), format::MessageType::kLink));
    if (recorded.has_value()) return RecordedAttr(*recorded);
    Txn txn(db_);
    ASSIGN_OR_RETURN(proto::Inode * inode, txn.Get(request.ino()));
    if (IsDir(*inode)) return PosixError(EPERM, "hard links to directories are not allowed");
    if (inode->read_only()) {
      // Its link count is the snapshot's; EXDEV makes link() callers
      // (RocksDB's checkpoint, `cp -l`) copy instead.
      return PosixError(EXDEV, absl::StrCat("inode ", request.ino(),
                                            " is in a snapshot; clone or copy it instead"));
    }
    // An unlinked file (open somewhere, or in its unlink grace) gets no
    // new name, as the VFS refuses linkat() of an inode with i_nlink 0.
    if (inode->attr().nlink() == 0) {
      return PosixError(ENOENT, absl::StrCat("inode ", request.ino(), " has been unlinked"));
    }
    if (inode->attr().nlink() >= kLinkCountMax) {
      return PosixError(EMLINK, absl::StrCat("inode ", request.ino(), " has ", kLinkCountMax,
                                             " links"));
    }
    ASSIGN_OR_RETURN(proto::Inode * parent,
                     DirForNewEntry(txn, request.new_parent(), request.new_name()));
    const int64_t now = NowNs();
    AddEntry(txn, parent, request.new_name(), *inode, now);
    inode->mutable_attr()->set_nlink(inode->attr().nlink() + 1);
    inode->mutable_attr()->set_ctime_ns(now);
    txn.Put(inode);
    RecordAttrCall(txn, request.call(), format::MessageType::kLink, inode);
    RETURN_IF_ERROR(txn.Commit());
    return ReplyAttr(*inode);
  });
}

absl::StatusOr<proto::Attr> Namespace::Clone(const proto::CloneRequest& request) {
  RETURN_IF_ERROR(ValidateNewName(request.new_name()));
  return Change([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::StatusOr<proto::Attr> {
    ASSIGN_OR_RETURN(auto recorded, RecordedReply(request.call(), format::MessageType::kClone));
    if (recorded.has_value()) return RecordedAttr(*recorded);
    Txn txn(db_);
    ASSIGN_OR_RETURN(proto::Inode * source, txn.Get(request.ino()));
    if (!IsReg(*source)) return PosixError(EINVAL, "only a regular file can be cloned");
    if (OpenLastSegment(*source) != nullptr) {
      return PosixError(EXDEV, absl::StrCat("inode ", request.ino(),
                                            " ends in an open segment; only a copy can take it"));
    }
    ASSIGN_OR_RETURN(proto::Inode * parent,
                     DirForNewEntry(txn, request.new_parent(), request.new_name()));
    const int64_t now = NowNs();
    proto::Inode inode;
    proto::Attr* attr = inode.mutable_attr();
    attr->set_ino(AllocateId(txn, MetaCounter::kNextIno));
    attr->set_mode(S_IFREG | (request.mode() & 07777));
    attr->set_uid(request.uid());
    attr->set_gid(request.gid());
    attr->set_atime_ns(now);
    attr->set_mtime_ns(now);
    attr->set_ctime_ns(now);
    attr->set_nlink(1);
    attr->set_kind(parent->attr().kind() == proto::KIND_WAL ? proto::KIND_WAL : proto::KIND_BLOCK);
    attr->set_size(source->attr().size());
    // The source's replication: files that share a segment want as many
    // replicas of it as each other.
    inode.set_replication(source->replication());
    inode.set_ack_quorum(source->ack_quorum());
    *inode.mutable_segments() = source->segments();
    const uint64_t ino = attr->ino();
    for (const proto::Segment& segment : source->segments()) {
      ASSIGN_OR_RETURN(proto::SharedSegment * shared, txn.Sharers(segment.id()));
      if (shared->inos_size() == 0) shared->add_inos(request.ino());
      shared->add_inos(ino);
      txn.PutSharers(segment.id());
    }
    AddEntry(txn, parent, request.new_name(), inode, now);
    proto::Inode* added = txn.Add(std::move(inode));
    RecordAttrCall(txn, request.call(), format::MessageType::kClone, added);
    RETURN_IF_ERROR(txn.Commit());
    ++inode_count_;
    return ReplyAttr(*added);
  });
}

absl::StatusOr<proto::Attr> Namespace::SetAttr(const proto::SetAttrRequest& request) {
  return Change([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::StatusOr<proto::Attr> {
    ASSIGN_OR_RETURN(auto recorded, RecordedReply(request.call(), format::MessageType::kSetAttr));
    if (recorded.has_value()) return RecordedAttr(*recorded);
    Txn txn(db_);
    ASSIGN_OR_RETURN(proto::Inode * inode, txn.Get(request.ino()));
    RETURN_IF_ERROR(RefuseReadOnly(*inode));
    proto::Attr* attr = inode->mutable_attr();
    int64_t now = NowNs();
    uint32_t to_set = request.to_set();
    if (to_set & format::kSetAttrSize) {
      if (IsDir(*inode)) return PosixError(EISDIR, "truncate of a directory");
      if (!IsReg(*inode)) return PosixError(EINVAL, "truncate of a non-regular file");
      if (attr->kind() == proto::KIND_WAL && request.size() == 0) {
        uint64_t holder = LiveLeaseHolder(request.ino());
        if (holder != 0 && holder != request.mount_id()) {
          return PosixError(EBUSY, absl::StrCat("file is open for write by mount ", holder));
        }
        if (inode->segments_size() > 0) {
          DropSegments(txn, inode);
          attr->set_mtime_ns(now);
        }
      } else if (request.size() != attr->size()) {
        return PosixError(EPERM, absl::StrCat("files are append-only: cannot resize from ",
                                              attr->size(), " to ", request.size()));
      }
    }
    if (to_set & format::kSetAttrMode)
      attr->set_mode((attr->mode() & S_IFMT) | (request.mode() & 07777));
    if (to_set & format::kSetAttrUid) attr->set_uid(request.uid());
    if (to_set & format::kSetAttrGid) attr->set_gid(request.gid());
    if (to_set & format::kSetAttrAtime) attr->set_atime_ns(request.atime_ns());
    if (to_set & format::kSetAttrAtimeNow) attr->set_atime_ns(now);
    if (to_set & format::kSetAttrMtime) attr->set_mtime_ns(request.mtime_ns());
    if (to_set & format::kSetAttrMtimeNow) attr->set_mtime_ns(now);
    if (request.clear_set_id() && IsReg(*inode)) {
      const uint32_t clear = S_ISUID | ((attr->mode() & S_IXGRP) != 0 ? S_ISGID : 0);
      attr->set_mode(attr->mode() & ~clear);
    }
    attr->set_ctime_ns(now);
    txn.Put(inode);
    RecordCall(txn, request.call(), format::MessageType::kSetAttr,
               [this, inode]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                 return AttrReplyBytes(ReplyAttr(*inode));
               });
    RETURN_IF_ERROR(txn.Commit());
    return ReplyAttr(*inode);
  });
}

Namespace::Gauges Namespace::TableGauges() const {
  absl::MutexLock lock(&mu_);
  Gauges g;
  g.inodes = inode_count_;
  g.mounts = mounts_.mounts();
  g.leases = mounts_.leases();
  g.lapsed_leases = mounts_.lapsed_leases();
  const MetadataDb::GroupCommitStats stats = db_->group_commit_stats();
  g.commit_groups = stats.groups;
  g.committed_changes = stats.changes;
  return g;
}

}  // namespace logfs::meta

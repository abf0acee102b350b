// Namespace: unlink, rmdir, rename, and deleting files and orphans.
#include <sys/stat.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "src/status/macros.h"
#include "src/status/posix_error.h"
#include "store/meta/namespace/internal/namespace_txn.h"
#include "store/meta/namespace/namespace.h"

namespace logfs::meta {
namespace {

// renameat2 flags (linux/fs.h).
constexpr uint32_t kRenameNoReplace = 1 << 0;
constexpr uint32_t kRenameExchange = 1 << 1;

// Bound on directory depth when checking that a directory is not moved
// into its own subtree; deeper trees fail with ELOOP instead of looping.
constexpr int kDirDepthMax = 4096;

absl::Status ValidateExistingName(const std::string& name) {
  if (name.size() > format::kNameBytesMax) {
    return PosixError(ENAMETOOLONG,
                      absl::StrCat("name longer than ", format::kNameBytesMax, " bytes"));
  }
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
    return PosixError(EINVAL, absl::StrCat("invalid name '", name, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<proto::DirEntry> GetEntry(MetadataDb* db, uint64_t parent, const std::string& name) {
  auto entry = db->GetDirEntry(parent, name);
  if (absl::IsNotFound(entry.status())) {
    return PosixError(ENOENT, absl::StrCat("no entry '", name, "' in ", parent));
  }
  return entry;
}

}  // namespace

void Namespace::QueueReplicaDeletions(Txn& txn, const proto::Inode& inode) {
  for (const auto& segment : inode.segments()) {
    // Open segments too: a snapshot lists the prefix of one that was open
    // when it was taken.
    if (StillShared(txn, inode.attr().ino(), segment.id())) continue;
    for (const auto& replica : segment.replicas()) {
      txn.batch().AddPendingDeletion(replica.server_id(), segment.id());
    }
  }
}

void Namespace::DeleteFile(Txn& txn, const proto::Inode& inode) {
  QueueReplicaDeletions(txn, inode);
  txn.Delete(inode.attr().ino());
  if (inode_count_ > 0) --inode_count_;
}

void Namespace::DropSegments(Txn& txn, proto::Inode* inode) {
  QueueReplicaDeletions(txn, *inode);
  inode->clear_segments();
  inode->mutable_attr()->set_size(0);
  txn.Put(inode);
}

absl::Status Namespace::RemoveEntry(Txn& txn, proto::Inode* parent, const std::string& name,
                                    proto::Inode* child) {
  int64_t now = NowNs();
  txn.batch().DeleteDirEntry(parent->attr().ino(), name);
  parent->mutable_attr()->set_mtime_ns(now);
  parent->mutable_attr()->set_ctime_ns(now);
  txn.Put(parent);
  uint64_t ino = child->attr().ino();
  if (IsDir(*child)) {
    parent->mutable_attr()->set_nlink(parent->attr().nlink() - 1);
    txn.Delete(ino);
    if (inode_count_ > 0) --inode_count_;
    return absl::OkStatus();
  }
  uint32_t nlink = child->attr().nlink() > 0 ? child->attr().nlink() - 1 : 0;
  child->mutable_attr()->set_nlink(nlink);
  child->mutable_attr()->set_ctime_ns(now);
  if (nlink > 0) {
    txn.Put(child);
  } else if (mounts_.Pinned(ino) || options_.unlinked_grace_ms > 0) {
    // Open somewhere, or just replaced: keep the data until the last
    // Release and the grace have passed (or the next start, which deletes
    // every orphan).
    txn.Put(child);
    txn.batch().AddOrphan(ino);
    mounts_.MarkUnlinked(ino, now);
  } else {
    DeleteFile(txn, *child);
  }
  return absl::OkStatus();
}

absl::Status Namespace::MaybeDeleteOrphan(uint64_t ino) {
  if (mounts_.Pinned(ino) || mounts_.InUnlinkGrace(ino)) return absl::OkStatus();
  Txn txn(db_);
  auto inode = txn.Get(ino);
  if (!inode.ok()) return absl::OkStatus();  // already gone
  if ((*inode)->attr().nlink() != 0) return absl::OkStatus();
  DeleteFile(txn, **inode);
  txn.batch().DeleteOrphan(ino);
  return txn.Commit();
}

absl::Status Namespace::Unlink(uint64_t parent_ino, const std::string& name, bool directory,
                               const proto::CallId& call) {
  if (directory && name == "..") return PosixError(ENOTEMPTY, "rmdir of '..'");
  RETURN_IF_ERROR(ValidateExistingName(name));
  return Change([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    ASSIGN_OR_RETURN(auto recorded, RecordedReply(call, format::MessageType::kUnlink));
    if (recorded.has_value()) return absl::OkStatus();
    Txn txn(db_);
    ASSIGN_OR_RETURN(proto::Inode * parent, GetDir(txn, parent_ino));
    ASSIGN_OR_RETURN(proto::DirEntry entry, GetEntry(db_, parent_ino, name));
    ASSIGN_OR_RETURN(proto::Inode * child, txn.Get(entry.ino()));
    RETURN_IF_ERROR(RefuseReadOnly(*parent));
    RETURN_IF_ERROR(RefuseReadOnly(*child));
    if (directory) {
      if (!IsDir(*child))
        return PosixError(ENOTDIR, absl::StrCat("'", name, "' is not a directory"));
      ASSIGN_OR_RETURN(bool has_entries, db_->HasEntries(entry.ino()));
      if (has_entries) return PosixError(ENOTEMPTY, absl::StrCat("'", name, "' is not empty"));
    } else if (IsDir(*child)) {
      return PosixError(EISDIR, absl::StrCat("'", name, "' is a directory"));
    }
    RETURN_IF_ERROR(RemoveEntry(txn, parent, name, child));
    RecordCall(txn, call, format::MessageType::kUnlink, [] { return std::string(); });
    return txn.Commit();
  });
}

absl::Status Namespace::CheckOutsideSubtree(Txn& txn, uint64_t dir, uint64_t top) {
  uint64_t walk = dir;
  for (int depth = 0;; ++depth) {
    if (walk == top) return PosixError(EINVAL, "cannot move a directory into its own subtree");
    if (walk == kRootIno) return absl::OkStatus();
    if (depth == kDirDepthMax) return PosixError(ELOOP, "directory tree too deep");
    ASSIGN_OR_RETURN(proto::Inode * up, txn.Get(walk));
    walk = up->parent() != 0 ? up->parent() : kRootIno;
  }
}

absl::Status Namespace::Rename(const proto::RenameRequest& request) {
  if (request.flags() & kRenameExchange) return PosixError(EINVAL, "RENAME_EXCHANGE unsupported");
  if (request.flags() & ~kRenameNoReplace) {
    return PosixError(EINVAL, absl::StrCat("unsupported rename flags ", request.flags()));
  }
  RETURN_IF_ERROR(ValidateExistingName(request.name()));
  RETURN_IF_ERROR(ValidateExistingName(request.new_name()));
  return Change([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    ASSIGN_OR_RETURN(auto recorded, RecordedReply(request.call(), format::MessageType::kRename));
    if (recorded.has_value()) return absl::OkStatus();
    Txn txn(db_);
    ASSIGN_OR_RETURN(proto::Inode * src_parent, GetDir(txn, request.parent()));
    ASSIGN_OR_RETURN(proto::Inode * dst_parent, GetDir(txn, request.new_parent()));
    ASSIGN_OR_RETURN(proto::DirEntry src_entry, GetEntry(db_, request.parent(), request.name()));
    if (request.parent() == request.new_parent() && request.name() == request.new_name()) {
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(proto::Inode * src, txn.Get(src_entry.ino()));
    RETURN_IF_ERROR(RefuseReadOnly(*src_parent));
    RETURN_IF_ERROR(RefuseReadOnly(*dst_parent));
    RETURN_IF_ERROR(RefuseReadOnly(*src));
    const bool src_is_dir = IsDir(*src);
    if (src_is_dir)
      RETURN_IF_ERROR(CheckOutsideSubtree(txn, request.new_parent(), src->attr().ino()));
    auto dst_entry = db_->GetDirEntry(request.new_parent(), request.new_name());
    if (dst_entry.ok()) {
      if (request.flags() & kRenameNoReplace) {
        return PosixError(EEXIST, absl::StrCat("'", request.new_name(), "' exists"));
      }
      if (dst_entry->ino() == src_entry.ino()) return absl::OkStatus();
      ASSIGN_OR_RETURN(proto::Inode * dst, txn.Get(dst_entry->ino()));
      RETURN_IF_ERROR(RefuseReadOnly(*dst));
      if (!src_is_dir && IsDir(*dst)) {
        return PosixError(EISDIR, "cannot rename a file over a directory");
      }
      if (src_is_dir && !IsDir(*dst)) {
        return PosixError(ENOTDIR, "cannot rename a directory over a file");
      }
      if (IsDir(*dst)) {
        ASSIGN_OR_RETURN(bool has_entries, db_->HasEntries(dst->attr().ino()));
        if (has_entries) {
          return PosixError(ENOTEMPTY, absl::StrCat("'", request.new_name(), "' is not empty"));
        }
      }
      RETURN_IF_ERROR(RemoveEntry(txn, dst_parent, request.new_name(), dst));
    } else if (!absl::IsNotFound(dst_entry.status())) {
      return dst_entry.status();
    }
    int64_t now = NowNs();
    txn.batch().DeleteDirEntry(request.parent(), request.name());
    src_entry.set_name(request.new_name());
    txn.batch().PutDirEntry(request.new_parent(), src_entry);
    if (src_is_dir && request.parent() != request.new_parent()) {
      src_parent->mutable_attr()->set_nlink(src_parent->attr().nlink() - 1);
      dst_parent->mutable_attr()->set_nlink(dst_parent->attr().nlink() + 1);
      src->set_parent(request.new_parent());
    }
    src->mutable_attr()->set_ctime_ns(now);
    for (proto::Inode* dir : {src_parent, dst_parent}) {
      dir->mutable_attr()->set_mtime_ns(now);
      dir->mutable_attr()->set_ctime_ns(now);
      txn.Put(dir);
    }
    txn.Put(src);
    RecordCall(txn, request.call(), format::MessageType::kRename, [] { return std::string(); });
    return txn.Commit();
  });
}

}  // namespace logfs::meta

// Namespace: extended attributes, including the user.logfs.* file-kind and
// replication settings (docs/rpc.md "SetXattr").
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "src/status/macros.h"
#include "src/status/posix_error.h"
#include "store/format/file_type.h"
#include "store/format/xattr_names.h"
#include "store/meta/namespace/internal/namespace_txn.h"
#include "store/meta/namespace/namespace.h"

namespace logfs::meta {
namespace {

// setxattr flags (sys/xattr.h).
constexpr uint32_t kXattrCreate = 1;
constexpr uint32_t kXattrReplace = 2;

// The settings may change only while they cannot contradict data already
// written: on directories, and on regular files with no data and no open
// segment.
absl::Status CheckSettingsChangeable(const proto::Inode& inode) {
  uint32_t mode = inode.attr().mode();
  if (S_ISDIR(mode)) return absl::OkStatus();
  if (!S_ISREG(mode)) return PosixError(EPERM, "logfs settings apply to files and directories");
  bool open_segment =
      inode.segments_size() > 0 && !inode.segments(inode.segments_size() - 1).sealed();
  if (inode.attr().size() > 0 || open_segment) {
    return PosixError(EPERM, "logfs settings of a file with data cannot change");
  }
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> ParseCount(const std::string& name, const std::string& raw, uint32_t max) {
  absl::string_view value =
      absl::StripAsciiWhitespace(absl::StripSuffix(raw, std::string(1, '\0')));
  uint32_t count = 0;
  if (!absl::SimpleAtoi(value, &count) || count < 1 || count > max) {
    return PosixError(EINVAL, absl::StrCat(name, " must be 1..", max, ", not '", raw, "'"));
  }
  return count;
}

// ENOSPC unless `inode` has room for xattr `name` = `value` (replacing a
// stored value of that name): listxattr's names within XATTR_LIST_MAX and
// the stored names and values within kXattrBytesPerInodeMax, as ext4
// refuses an xattr its inode has no room for.
absl::Status CheckXattrRoom(const proto::Inode& inode, const std::vector<std::string>& listed,
                            const std::string& name, const std::string& value) {
  size_t list_bytes = 0;
  for (const auto& n : listed) list_bytes += n.size() + 1;
  size_t stored_bytes = 0;
  for (const auto& [n, v] : inode.xattrs()) stored_bytes += n.size() + v.size();
  auto old = inode.xattrs().find(name);
  if (old == inode.xattrs().end()) {
    list_bytes += name.size() + 1;
    stored_bytes += name.size() + value.size();
  } else {
    stored_bytes = stored_bytes - old->second.size() + value.size();
  }
  if (list_bytes > format::kXattrListBytesMax) {
    return PosixError(ENOSPC,
                      absl::StrCat("xattr names of inode ", inode.attr().ino(), " would take ",
                                   list_bytes, " bytes, over ", format::kXattrListBytesMax));
  }
  if (stored_bytes > format::kXattrBytesPerInodeMax) {
    return PosixError(
        ENOSPC, absl::StrCat("xattrs of inode ", inode.attr().ino(), " would take ", stored_bytes,
                             " bytes, over ", format::kXattrBytesPerInodeMax));
  }
  return absl::OkStatus();
}

absl::Status CheckXattrName(const std::string& name) {
  if (name.size() > format::kXattrNameBytesMax) {
    return PosixError(ERANGE, absl::StrCat("xattr name longer than ", format::kXattrNameBytesMax));
  }
  if (name.empty()) return PosixError(EINVAL, "empty xattr name");
  return absl::OkStatus();
}

// POSIX ACLs are not supported: their xattrs are refused as on a file
// system mounted `noacl`, so that tools that set a mode through an ACL
// (cp -a, cp -p, mv across file systems) fall back to chmod instead of
// storing an ACL that nothing enforces while the mode stays as created.
absl::Status CheckNotAcl(const std::string& name) {
  if (absl::StartsWith(name, "system.posix_acl_")) {
    return PosixError(EOPNOTSUPP, absl::StrCat(name, ": POSIX ACLs are not supported"));
  }
  return absl::OkStatus();
}

// What ListXattr returns for `inode`: the user.logfs.* settings (none for
// a special file), the mount's computed names for regular files, then the
// stored names sorted.
std::vector<std::string> ListedXattrNames(const proto::Inode& inode) {
  std::vector<std::string> names;
  if (!format::IsSpecialFile(inode.attr().mode())) {
    names = {format::kKindXattr, format::kReplicationXattr, format::kAckQuorumXattr};
  }
  if (S_ISREG(inode.attr().mode())) {
    names.push_back(format::kSegmentsXattr);
    names.push_back(format::kDurableLengthXattr);
  }
  std::vector<std::string> stored;
  for (const auto& [name, value] : inode.xattrs()) stored.push_back(name);
  std::sort(stored.begin(), stored.end());  // proto maps have no order
  names.insert(names.end(), stored.begin(), stored.end());
  return names;
}

}  // namespace

absl::Status Namespace::SetXattr(const proto::SetXattrRequest& request) {
  const std::string& name = request.name();
  const std::string& value = request.value();
  RETURN_IF_ERROR(CheckXattrName(name));
  RETURN_IF_ERROR(CheckNotAcl(name));
  return Change([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    ASSIGN_OR_RETURN(auto recorded, RecordedReply(request.call(), format::MessageType::kSetXattr));
    if (recorded.has_value()) return absl::OkStatus();
    Txn txn(db_);
    ASSIGN_OR_RETURN(proto::Inode * inode, txn.Get(request.ino()));
    RETURN_IF_ERROR(RefuseReadOnly(*inode));
    if (absl::StartsWith(name, format::kLogfsXattrPrefix)) {
      if (name == format::kSegmentsXattr || name == format::kDurableLengthXattr) {
        return PosixError(EPERM, absl::StrCat(name, " is read-only"));
      }
      if (name != format::kKindXattr && name != format::kReplicationXattr &&
          name != format::kAckQuorumXattr) {
        return PosixError(EPERM, absl::StrCat(name, ": user.logfs.* is reserved"));
      }
      RETURN_IF_ERROR(CheckSettingsChangeable(*inode));
      if (name == format::kKindXattr) {
        absl::string_view kind =
            absl::StripAsciiWhitespace(absl::StripSuffix(value, std::string(1, '\0')));
        if (kind == "wal") {
          inode->mutable_attr()->set_kind(proto::KIND_WAL);
        } else if (kind == "block") {
          inode->mutable_attr()->set_kind(proto::KIND_BLOCK);
        } else {
          return PosixError(EINVAL, absl::StrCat("kind must be wal or block, not '", value, "'"));
        }
      } else if (name == format::kReplicationXattr) {
        ASSIGN_OR_RETURN(uint32_t replication, ParseCount(name, value, format::kReplicationMax));
        if (replication > servers_.size()) {
          return PosixError(EINVAL,
                            absl::StrCat("replication ", replication, " needs that many ",
                                         "segment servers; ", servers_.size(), " are registered"));
        }
        if (inode->ack_quorum() > replication) {
          return PosixError(EINVAL, absl::StrCat("replication ", replication,
                                                 " is below ack_quorum ", inode->ack_quorum()));
        }
        inode->set_replication(replication);
      } else {
        ASSIGN_OR_RETURN(uint32_t ack_quorum, ParseCount(name, value, Replication(*inode)));
        inode->set_ack_quorum(ack_quorum);
      }
    } else {
      if (value.size() > format::kXattrValueBytesMax) {
        return PosixError(E2BIG,
                          absl::StrCat("xattr value larger than ", format::kXattrValueBytesMax));
      }
      bool exists = inode->xattrs().count(name) != 0;
      if ((request.flags() & kXattrCreate) && exists) {
        return PosixError(EEXIST, absl::StrCat("xattr ", name, " exists"));
      }
      if ((request.flags() & kXattrReplace) && !exists) {
        return PosixError(ENODATA, absl::StrCat("no xattr ", name));
      }
      RETURN_IF_ERROR(CheckXattrRoom(*inode, ListedXattrNames(*inode), name, value));
      (*inode->mutable_xattrs())[name] = value;
    }
    inode->mutable_attr()->set_ctime_ns(NowNs());
    txn.Put(inode);
    RecordCall(txn, request.call(), format::MessageType::kSetXattr, [] { return std::string(); });
    return txn.Commit();
  });
}

absl::StatusOr<std::string> Namespace::GetXattr(uint64_t ino, const std::string& name) {
  RETURN_IF_ERROR(CheckXattrName(name));
  RETURN_IF_ERROR(CheckNotAcl(name));
  absl::MutexLock lock(&mu_);
  Txn txn(db_, MetadataDb::View::kDurable);
  ASSIGN_OR_RETURN(proto::Inode * inode, txn.Get(ino));
  if (format::IsSpecialFile(inode->attr().mode()) &&
      absl::StartsWith(name, format::kLogfsXattrPrefix)) {
    return PosixError(ENODATA,
                      absl::StrCat("no xattr ", name, ": a special file has no logfs settings"));
  }
  if (name == format::kKindXattr) return inode->attr().kind() == proto::KIND_WAL ? "wal" : "block";
  if (name == format::kReplicationXattr) return absl::StrCat(Replication(*inode));
  if (name == format::kAckQuorumXattr) return absl::StrCat(AckQuorum(*inode));
  auto it = inode->xattrs().find(name);
  if (it == inode->xattrs().end()) return PosixError(ENODATA, absl::StrCat("no xattr ", name));
  return it->second;
}

absl::StatusOr<std::vector<std::string>> Namespace::ListXattr(uint64_t ino) {
  absl::MutexLock lock(&mu_);
  Txn txn(db_, MetadataDb::View::kDurable);
  ASSIGN_OR_RETURN(proto::Inode * inode, txn.Get(ino));
  return ListedXattrNames(*inode);
}

absl::Status Namespace::RemoveXattr(uint64_t ino, const std::string& name,
                                    const proto::CallId& call) {
  RETURN_IF_ERROR(CheckXattrName(name));
  if (absl::StartsWith(name, format::kLogfsXattrPrefix)) {
    return PosixError(EPERM, absl::StrCat(name, " cannot be removed"));
  }
  return Change([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    ASSIGN_OR_RETURN(auto recorded, RecordedReply(call, format::MessageType::kRemoveXattr));
    if (recorded.has_value()) return absl::OkStatus();
    Txn txn(db_);
    ASSIGN_OR_RETURN(proto::Inode * inode, txn.Get(ino));
    RETURN_IF_ERROR(RefuseReadOnly(*inode));
    if (inode->mutable_xattrs()->erase(name) == 0) {
      return PosixError(ENODATA, absl::StrCat("no xattr ", name));
    }
    inode->mutable_attr()->set_ctime_ns(NowNs());
    txn.Put(inode);
    RecordCall(txn, call, format::MessageType::kRemoveXattr, [] { return std::string(); });
    return txn.Commit();
  });
}

}  // namespace logfs::meta

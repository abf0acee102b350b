// Private to store/meta/namespace*.cc: the inodes one namespace call reads and
// changes, staged with the call's other mutations as one MetadataDb batch
// (durable once Namespace::Change's wait returns). Reading an inode twice
// gives the same object, so a call that touches one directory in two roles
// (rename within a directory) sees its own changes. A change reads the
// latest view (every staged change); a read that answers a client reads
// the durable view. Not thread-safe; used under Namespace::mu_.
#pragma once

#include <sys/stat.h>

#include <cerrno>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "src/status/posix_error.h"
#include "store/meta/db/metadata_db.h"
#include "store/meta/namespace/namespace.h"

namespace logfs::meta {

// The options' ms in the ns of the clock (NowNs).
inline constexpr int64_t kNanosPerMilli = 1000 * 1000;

// The last segment of `inode` if it is open (being written, or left by a
// writer that died), else nullptr.
inline const proto::Segment* OpenLastSegment(const proto::Inode& inode) {
  if (inode.segments_size() == 0) return nullptr;
  const proto::Segment& last = inode.segments(inode.segments_size() - 1);
  return last.sealed() ? nullptr : &last;
}

// EROFS when `inode` is in a snapshot (proto::Inode.read_only).
absl::Status RefuseReadOnly(const proto::Inode& inode);
// A name a change may add: ENAMETOOLONG past kNameBytesMax; EINVAL for
// "", ".", "..", or one holding '/' or NUL.
absl::Status ValidateNewName(const std::string& name);

inline bool IsDir(const proto::Inode& inode) { return S_ISDIR(inode.attr().mode()); }

class Namespace::Txn {
 public:
  // A durable-view Txn reads at one snapshot (MetadataDb::Snapshot).
  explicit Txn(MetadataDb* db, MetadataDb::View view = MetadataDb::View::kLatest)
      : db_(db),
        view_(view),
        snapshot_(view == MetadataDb::View::kDurable ? db->DurableSnapshot() : nullptr) {}

  MetadataDb::View view() const { return view_; }
  // Where this Txn reads (null for the latest view): for the caller's own
  // reads of other keys.
  const MetadataDb::Snapshot* snapshot() const { return snapshot_.get(); }

  // The inode, loaded once. ESTALE when absent or deleted in this txn:
  // inode numbers are never reused, so a caller naming a missing one holds
  // a stale handle (as NFS's NFS3ERR_STALE), and the kernel answers ESTALE
  // by looking the path up again, where ENOENT would tell the application
  // that a name it asked for does not exist (a file replaced by rename).
  absl::StatusOr<proto::Inode*> Get(uint64_t ino) {
    if (deleted_.count(ino) != 0) return PosixError(ESTALE, absl::StrCat("no inode ", ino));
    auto it = inodes_.find(ino);
    if (it != inodes_.end()) return &it->second;
    auto loaded = db_->GetInode(ino, view_, snapshot_.get());
    if (absl::IsNotFound(loaded.status())) {
      return PosixError(ESTALE, absl::StrCat("no inode ", ino));
    }
    if (!loaded.ok()) return loaded.status();
    return &inodes_.emplace(ino, std::move(*loaded)).first->second;
  }

  // Marks a loaded inode to be written (with its generation bumped).
  void Put(proto::Inode* inode) { dirty_.insert(inode->attr().ino()); }

  // Adds a new inode, to be written.
  proto::Inode* Add(proto::Inode inode) {
    uint64_t ino = inode.attr().ino();
    dirty_.insert(ino);
    deleted_.erase(ino);
    return &(inodes_[ino] = std::move(inode));
  }

  void Delete(uint64_t ino) {
    deleted_.insert(ino);
    dirty_.erase(ino);
  }

  MetadataDb::Batch& batch() { return batch_; }

  // The files that list sealed segment `segment_id` when more than one
  // does (proto::SharedSegment; empty while one does), loaded once, so a
  // call that changes it twice sees its own change. PutSharers marks it to
  // be written at Commit: kept while it names two files or more, else
  // deleted. Errors from the database.
  absl::StatusOr<proto::SharedSegment*> Sharers(uint64_t segment_id) {
    auto it = shared_.find(segment_id);
    if (it != shared_.end()) return &it->second;
    absl::StatusOr<proto::SharedSegment> loaded = db_->GetSharedSegment(segment_id);
    if (!loaded.ok()) return loaded.status();
    return &shared_.emplace(segment_id, std::move(*loaded)).first->second;
  }
  void PutSharers(uint64_t segment_id) { shared_dirty_.insert(segment_id); }

  // Makes Commit record `call` as applied (docs/rpc.md "Retries"), with
  // reply() as its reply, run after the generations are bumped so that it
  // sees what is written; and drop the record of the change the same mount
  // made `keep_per_mount` changes earlier, which bounds the table.
  void RecordCall(const proto::CallId& call, format::MessageType type, int64_t now_ns,
                  uint32_t keep_per_mount, std::function<std::string()> reply) {
    call_ = call;
    batch_.set_origin(call);  // its own kernel knows (docs/coherence.md)
    call_record_.set_type(static_cast<uint32_t>(type));
    call_record_.set_time_ns(now_ns);
    call_keep_ = keep_per_mount;
    call_reply_ = std::move(reply);
  }

  // Stages everything as one batch (MetadataDb::Stage): visible to later
  // changes at once, durable when Namespace::Change's wait returns. A
  // durable-view Txn never commits.
  absl::Status Commit() {
    for (uint64_t ino : dirty_) {
      proto::Inode& inode = inodes_[ino];
      inode.set_generation(inode.generation() + 1);
      batch_.PutInode(inode);
    }
    if (call_reply_) {
      call_record_.set_reply(call_reply_());
      batch_.PutCallRecord(call_, call_record_);
      if (call_.seq() > call_keep_)
        batch_.DeleteCallRecord(call_.mount_id(), call_.seq() - call_keep_);
    }
    for (uint64_t ino : deleted_) batch_.DeleteInode(ino);
    for (uint64_t segment_id : shared_dirty_) {
      const proto::SharedSegment& shared = shared_[segment_id];
      if (shared.inos_size() >= 2) {
        batch_.PutSharedSegment(segment_id, shared);
      } else {
        batch_.DeleteSharedSegment(segment_id);
      }
    }
    if (batch_.count() == 0) return absl::OkStatus();
    if (view_ != MetadataDb::View::kLatest) {
      return absl::InternalError("a change decided on the durable view");
    }
    return db_->Stage(batch_).status();
  }

 private:
  MetadataDb* const db_;
  const MetadataDb::View view_;
  const std::unique_ptr<MetadataDb::Snapshot> snapshot_;
  std::map<uint64_t, proto::Inode> inodes_;
  std::set<uint64_t> dirty_;
  std::set<uint64_t> deleted_;
  std::map<uint64_t, proto::SharedSegment> shared_;  // by segment id
  std::set<uint64_t> shared_dirty_;
  MetadataDb::Batch batch_;
  proto::CallId call_;
  proto::CallRecord call_record_;
  uint32_t call_keep_ = 0;
  std::function<std::string()> call_reply_;  // set: record call_
};

// Replies as the table of applied changes stores them (serialized
// responses), and back.
inline std::string AttrReplyBytes(const proto::Attr& attr) {
  proto::AttrResponse response;
  *response.mutable_attr() = attr;
  return response.SerializeAsString();
}
inline absl::StatusOr<proto::Attr> RecordedAttr(const std::string& reply) {
  proto::AttrResponse response;
  if (!response.ParseFromString(reply)) return absl::DataLossError("unparseable recorded reply");
  return response.attr();
}
}  // namespace logfs::meta

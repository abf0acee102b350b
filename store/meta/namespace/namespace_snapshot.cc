// Namespace: directory snapshots (docs/snapshots.md). A snapshot of
// directory D is a read-only copy of the tree under D, in metadata only,
// reached as D/.snapshot/NAME (HDFS's `.snapshot`, CephFS's `.snap`): the
// snapshot directory is a real entry of D that readdir leaves out.
//
// Sealed files share their segments with the snapshot (the records of
// namespace_clone.cc). A file being written is taken at its durable
// length, HDFS's rule for open files in a snapshot: the length at least
// its ack quorum of replicas has fdatasynced, asked of the replicas while
// the mutex holds every namespace change back. Every write synced before
// the snapshot began is in it, and the tree is the namespace of one
// instant, so a live RocksDB directory (WAL, MANIFEST, SSTs) snapshots as
// a DB a crash at that instant could have left. The snapshot lists that
// prefix of the open segment as sealed (Segment.prefix); the writer goes
// on appending past it, and a replica is deleted only when neither lists
// the segment any more.
//
// A large tree takes several batches (a journal record holds 1 MiB). The
// snapshot's record (key 'n') is BUILDING from the first until the last,
// which adds the name, and DELETING from the batch that removes the name
// until the last of its tree is gone; a meta that starts finishes either
// by deleting what the record's tree holds (FinishSnapshots).
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include <glog/logging.h>
#include "src/status/macros.h"
#include "src/status/posix_error.h"
#include "store/meta/namespace/internal/namespace_txn.h"
#include "store/meta/namespace/namespace.h"

namespace logfs::meta {
namespace {

// The snapshot directory's name in the directory it snapshots.
constexpr char kSnapshotDirName[] = ".snapshot";
// Entries read per page while walking a tree.
constexpr size_t kWalkPageEntries = 4096;
constexpr size_t kWalkPageBytes = 1 << 20;
// Inodes one snapshot may hold (its walk keeps them in memory).
constexpr size_t kSnapshotInodesMax = 2'000'000;
constexpr size_t kNoParent = std::numeric_limits<size_t>::max();

// One name in a tree, parents before children. A file with several names
// in the tree (hard links) has its inode on the node of its first name.
struct TreeNode {
  proto::Inode inode;     // on a file's first name (and every directory); else empty
  size_t parent = kNoParent;
  std::string name;
  size_t inode_node = 0;  // the node holding this name's inode
  bool missing = false;   // the entry names an inode that is gone (a delete resumed)
};

// Every name under directory `top` (node 0), in the latest view, leaving
// out snapshot directories. With `tolerate_missing`, an entry whose inode
// is gone is kept as a `missing` node (its entry is still to delete);
// otherwise it is an error (a namespace that disagrees with itself).
absl::StatusOr<std::vector<TreeNode>> WalkTree(MetadataDb* db, const proto::Inode& top,
                                               bool tolerate_missing) {
  std::vector<TreeNode> nodes(1);
  nodes[0].inode = top;
  std::map<uint64_t, size_t> files;  // ino -> node with its inode, for hard links
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].missing || !IsDir(nodes[i].inode) || nodes[i].inode_node != i) continue;
    const uint64_t dir = nodes[i].inode.attr().ino();
    const uint64_t hidden = nodes[i].inode.snapshot_dir();
    std::string after;
    for (bool more = true; more;) {
      ASSIGN_OR_RETURN(MetadataDb::DirPage page,
                       db->ListDir(dir, after, kWalkPageEntries, kWalkPageBytes));
      more = page.more;
      for (proto::DirEntry& entry : page.entries) {
        after = entry.name();
        if (hidden != 0 && entry.ino() == hidden) continue;
        TreeNode node;
        node.parent = i;
        node.name = std::move(*entry.mutable_name());
        node.inode_node = nodes.size();
        if (auto linked = files.find(entry.ino()); linked != files.end()) {
          node.inode_node = linked->second;
        } else {
          absl::StatusOr<proto::Inode> inode = db->GetInode(entry.ino());
          if (absl::IsNotFound(inode.status()) && tolerate_missing) {
            node.missing = true;
          } else if (!inode.ok()) {
            return inode.status();
          } else {
            node.inode = std::move(*inode);
            if (!IsDir(node.inode)) files.emplace(entry.ino(), nodes.size());
          }
        }
        nodes.push_back(std::move(node));
        if (nodes.size() > kSnapshotInodesMax) {
          return PosixError(EFBIG, absl::StrCat("more than ", kSnapshotInodesMax,
                                                " names under directory ", top.attr().ino()));
        }
      }
    }
  }
  return nodes;
}

// A batch's bytes as NamespaceOptions::snapshot_batch_bytes counts them.
size_t InodeBatchBytes(const proto::Inode& inode) {
  return inode.ByteSizeLong() + static_cast<size_t>(inode.segments_size()) * 64;
}

}  // namespace

absl::StatusOr<proto::SnapshotResponse> Namespace::Snapshot(const proto::SnapshotRequest& request) {
  switch (request.op()) {
    case proto::SnapshotRequest::CREATE:
      return CreateSnapshot(request);
    case proto::SnapshotRequest::DELETE:
      return DeleteSnapshot(request);
    case proto::SnapshotRequest::LIST:
      return ListSnapshots(request.dir());
    default:
      return PosixError(EINVAL, absl::StrCat("unknown snapshot operation ", request.op()));
  }
}

absl::Status Namespace::TakeDurablePrefix(proto::Inode* inode) {
  if (!S_ISREG(inode->attr().mode()) || OpenLastSegment(*inode) == nullptr) return absl::OkStatus();
  proto::Segment* open = inode->mutable_segments(inode->segments_size() - 1);
  std::vector<std::pair<uint64_t, uint64_t>> durable;  // (bytes, server id)
  for (const proto::Replica& replica : open->replicas()) {
    const ServerState* server = servers_.Find(replica.server_id());
    if (server == nullptr || !ServerLive(*server)) continue;
    absl::StatusOr<proto::SegmentInfoResponse> info =
        segment_servers_->SegmentInfo(server->record.address(), open->id());
    if (!info.ok()) {
      LOG(WARNING) << "snapshot: segment " << open->id() << " on server " << replica.server_id()
                   << ": " << info.status();
      continue;
    }
    durable.emplace_back(info->sealed() ? info->length() : info->durable_length(),
                         replica.server_id());
  }
  const uint32_t quorum = open->ack_quorum() != 0 ? open->ack_quorum() : AckQuorum(*inode);
  if (durable.size() < std::max<uint32_t>(quorum, 1)) {
    return PosixError(EAGAIN, absl::StrCat("inode ", inode->attr().ino(),
                                           " is being written and ", durable.size(), " of the ",
                                           quorum, " replicas its durable length needs answered"));
  }
  std::sort(durable.begin(), durable.end(), std::greater<>());
  // Synced on an ack quorum: no recovery of the segment ends before it.
  const uint64_t length = durable[std::max<uint32_t>(quorum, 1) - 1].first;
  inode->mutable_attr()->set_open_segment(false);
  inode->mutable_attr()->set_open_for_write(false);
  if (length == 0) {
    inode->mutable_segments()->RemoveLast();
    return absl::OkStatus();
  }
  open->set_length(length);
  open->set_sealed(true);
  open->set_prefix(true);
  open->set_replica_length(0);
  open->clear_replicas();
  for (const auto& [bytes, server_id] : durable) {
    if (bytes >= length) open->add_replicas()->set_server_id(server_id);
  }
  // The sum, not size + length: a WAL segment continued after a seal is
  // counted in `size` already.
  uint64_t size = 0;
  for (const proto::Segment& segment : inode->segments()) size += segment.length();
  inode->mutable_attr()->set_size(size);
  return absl::OkStatus();
}

absl::StatusOr<proto::SnapshotResponse> Namespace::CreateSnapshot(
    const proto::SnapshotRequest& request) {
  RETURN_IF_ERROR(ValidateNewName(request.name()));
  return Change([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::StatusOr<proto::SnapshotResponse> {
    Txn reads(db_);
    ASSIGN_OR_RETURN(proto::Inode * dir, GetDir(reads, request.dir()));
    RETURN_IF_ERROR(RefuseReadOnly(*dir));
    uint64_t snapshot_dir = dir->snapshot_dir();
    const bool new_snapshot_dir = snapshot_dir == 0;
    absl::StatusOr<proto::DirEntry> taken =
        new_snapshot_dir ? db_->GetDirEntry(request.dir(), kSnapshotDirName)
                         : db_->GetDirEntry(snapshot_dir, request.name());
    if (taken.ok()) {
      return PosixError(EEXIST, new_snapshot_dir
                                    ? absl::StrCat("directory ", request.dir(),
                                                   " has an entry '.snapshot' of its own")
                                    : absl::StrCat("snapshot '", request.name(), "' exists"));
    }
    if (!absl::IsNotFound(taken.status())) return taken.status();

    ASSIGN_OR_RETURN(std::vector<TreeNode> nodes, WalkTree(db_, *dir, /*tolerate_missing=*/false));
    proto::SnapshotResponse response;
    proto::SnapshotRecord record;
    std::vector<uint32_t> names(nodes.size(), 0);    // per inode node
    std::vector<uint32_t> subdirs(nodes.size(), 0);  // per directory node
    for (size_t i = 0; i < nodes.size(); ++i) {
      TreeNode& node = nodes[i];
      if (i > 0) {
        ++names[node.inode_node];
        if (IsDir(nodes[node.inode_node].inode)) ++subdirs[node.parent];
      }
      if (node.inode_node != i) continue;
      const bool open = OpenLastSegment(node.inode) != nullptr;
      RETURN_IF_ERROR(TakeDurablePrefix(&node.inode));
      if (open) response.set_open_files(response.open_files() + 1);
      record.set_files(record.files() + 1);
      if (S_ISREG(node.inode.attr().mode())) record.set_bytes(record.bytes() + node.inode.attr().size());
    }

    const int64_t now = NowNs();
    std::vector<uint64_t> snapshot_ino(nodes.size(), 0);  // per inode node
    auto txn = std::make_unique<Txn>(db_);
    size_t batch_bytes = 0;
    if (new_snapshot_dir) snapshot_dir = AllocateId(*txn, MetaCounter::kNextIno);
    for (size_t i = 0; i < nodes.size(); ++i) {
      const TreeNode& node = nodes[i];
      if (node.inode_node == i) {
        proto::Inode copy = node.inode;
        const uint64_t source_ino = copy.attr().ino();
        const uint64_t ino = AllocateId(*txn, MetaCounter::kNextIno);
        snapshot_ino[i] = ino;
        copy.mutable_attr()->set_ino(ino);
        copy.mutable_attr()->set_open_for_write(false);
        copy.set_generation(0);
        copy.set_lease_epoch(0);
        copy.set_snapshot_dir(0);
        copy.set_read_only(true);
        if (IsDir(copy)) {
          copy.mutable_attr()->set_nlink(2 + subdirs[i]);
          copy.set_parent(i == 0 ? snapshot_dir : snapshot_ino[node.parent]);
        } else {
          copy.mutable_attr()->set_nlink(names[i]);
        }
        for (const proto::Segment& segment : copy.segments()) {
          ASSIGN_OR_RETURN(proto::SharedSegment * shared, txn->Sharers(segment.id()));
          if (shared->inos_size() == 0) shared->add_inos(source_ino);
          shared->add_inos(ino);
          txn->PutSharers(segment.id());
          batch_bytes += static_cast<size_t>(shared->inos_size()) * 10;
        }
        if (i == 0) {
          record.set_state(proto::SnapshotRecord::BUILDING);
          record.set_dir(request.dir());
          record.set_name(request.name());
          record.set_root(ino);
          record.set_ctime_ns(now);
          txn->batch().PutSnapshot(record);
        }
        batch_bytes += InodeBatchBytes(copy);
        txn->Add(std::move(copy));
        ++inode_count_;
      }
      if (i > 0) {
        proto::DirEntry entry;
        entry.set_name(node.name);
        entry.set_ino(snapshot_ino[node.inode_node]);
        entry.set_mode(nodes[node.inode_node].inode.attr().mode());
        txn->batch().PutDirEntry(snapshot_ino[node.parent], entry);
        batch_bytes += node.name.size() + 32;
      }
      if (batch_bytes >= options_.snapshot_batch_bytes) {
        RETURN_IF_ERROR(txn->Commit());
        txn = std::make_unique<Txn>(db_);
        batch_bytes = 0;
      }
    }

    // The last batch makes it visible: the name, and the snapshot
    // directory with it if this is the directory's first snapshot.
    ASSIGN_OR_RETURN(proto::Inode * parent, txn->Get(request.dir()));
    proto::Inode* snapshots = nullptr;
    if (new_snapshot_dir) {
      proto::Inode made;
      proto::Attr* attr = made.mutable_attr();
      attr->set_ino(snapshot_dir);
      attr->set_mode(S_IFDIR | 0555);
      attr->set_uid(parent->attr().uid());
      attr->set_gid(parent->attr().gid());
      attr->set_atime_ns(now);
      attr->set_mtime_ns(now);
      attr->set_ctime_ns(now);
      attr->set_nlink(2);
      attr->set_kind(parent->attr().kind());
      made.set_parent(request.dir());
      made.set_read_only(true);
      snapshots = txn->Add(std::move(made));
      ++inode_count_;
      proto::DirEntry entry;
      entry.set_name(kSnapshotDirName);
      entry.set_ino(snapshot_dir);
      entry.set_mode(S_IFDIR | 0555);
      txn->batch().PutDirEntry(request.dir(), entry);
      // Not counted in the directory's st_nlink: readdir does not show it.
      parent->set_snapshot_dir(snapshot_dir);
      parent->mutable_attr()->set_ctime_ns(now);
      txn->Put(parent);
    } else {
      ASSIGN_OR_RETURN(snapshots, txn->Get(snapshot_dir));
    }
    proto::DirEntry entry;
    entry.set_name(request.name());
    entry.set_ino(snapshot_ino[0]);
    entry.set_mode(S_IFDIR | (nodes[0].inode.attr().mode() & 07777));
    txn->batch().PutDirEntry(snapshot_dir, entry);
    snapshots->mutable_attr()->set_nlink(snapshots->attr().nlink() + 1);
    snapshots->mutable_attr()->set_mtime_ns(now);
    snapshots->mutable_attr()->set_ctime_ns(now);
    txn->Put(snapshots);
    record.set_state(proto::SnapshotRecord::READY);
    txn->batch().PutSnapshot(record);
    RETURN_IF_ERROR(txn->Commit());
    *response.add_snapshots()->mutable_record() = record;
    LOG(INFO) << "snapshot '" << request.name() << "' of directory " << request.dir() << ": "
              << record.files() << " inodes, " << record.bytes() << " bytes, "
              << response.open_files() << " open files at their durable length";
    return response;
  });
}

absl::StatusOr<proto::SnapshotResponse> Namespace::DeleteSnapshot(
    const proto::SnapshotRequest& request) {
  RETURN_IF_ERROR(ValidateNewName(request.name()));
  return Change([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::StatusOr<proto::SnapshotResponse> {
    Txn txn(db_);
    ASSIGN_OR_RETURN(proto::Inode * dir, GetDir(txn, request.dir()));
    const uint64_t snapshot_dir = dir->snapshot_dir();
    absl::StatusOr<proto::DirEntry> entry =
        snapshot_dir == 0 ? absl::NotFoundError("no snapshots")
                          : db_->GetDirEntry(snapshot_dir, request.name());
    if (absl::IsNotFound(entry.status())) {
      return PosixError(ENOENT, absl::StrCat("directory ", request.dir(), " has no snapshot '",
                                             request.name(), "'"));
    }
    if (!entry.ok()) return entry.status();
    ASSIGN_OR_RETURN(std::vector<proto::SnapshotRecord> records, db_->ListSnapshots());
    auto found = std::find_if(records.begin(), records.end(), [&](const auto& r) {
      return r.root() == entry->ino();
    });
    proto::SnapshotRecord record;
    if (found != records.end()) {
      record = *found;
    } else {
      // Not made by CreateSnapshot (a namespace restored without its
      // records): deleted all the same.
      record.set_dir(request.dir());
      record.set_name(request.name());
      record.set_root(entry->ino());
    }
    const int64_t now = NowNs();
    ASSIGN_OR_RETURN(proto::Inode * snapshots, txn.Get(snapshot_dir));
    txn.batch().DeleteDirEntry(snapshot_dir, request.name());
    snapshots->mutable_attr()->set_nlink(std::max<uint32_t>(snapshots->attr().nlink(), 3) - 1);
    snapshots->mutable_attr()->set_mtime_ns(now);
    snapshots->mutable_attr()->set_ctime_ns(now);
    txn.Put(snapshots);
    ASSIGN_OR_RETURN(MetadataDb::DirPage left, db_->ListDir(snapshot_dir, "", 2, kWalkPageBytes));
    const bool last = std::none_of(left.entries.begin(), left.entries.end(), [&](const auto& e) {
      return e.name() != request.name();
    });
    if (last) {
      // The last snapshot takes the snapshot directory with it.
      txn.batch().DeleteDirEntry(request.dir(), kSnapshotDirName);
      txn.Delete(snapshot_dir);
      if (inode_count_ > 0) --inode_count_;
      dir->set_snapshot_dir(0);
      dir->mutable_attr()->set_ctime_ns(now);
      txn.Put(dir);
    }
    record.set_state(proto::SnapshotRecord::DELETING);
    txn.batch().PutSnapshot(record);
    RETURN_IF_ERROR(txn.Commit());
    RETURN_IF_ERROR(DeleteSnapshotTree(record));
    proto::SnapshotResponse response;
    *response.add_snapshots()->mutable_record() = record;
    return response;
  });
}

absl::Status Namespace::DeleteSnapshotTree(const proto::SnapshotRecord& record) {
  absl::StatusOr<proto::Inode> root = db_->GetInode(record.root());
  std::vector<TreeNode> nodes;
  if (root.ok()) {
    ASSIGN_OR_RETURN(nodes, WalkTree(db_, *root, /*tolerate_missing=*/true));
  } else if (!absl::IsNotFound(root.status())) {
    return root.status();
  }
  const int64_t now = NowNs();
  auto txn = std::make_unique<Txn>(db_);
  size_t batch_bytes = 0;
  // Children first, the root last: a delete that stops between batches
  // leaves a tree that the next walk from the root still reaches.
  for (size_t i = nodes.size(); i-- > 0;) {
    const TreeNode& node = nodes[i];
    if (i > 0) {
      txn->batch().DeleteDirEntry(nodes[node.parent].inode.attr().ino(), node.name);
      batch_bytes += node.name.size() + 16;
    }
    if (node.missing || node.inode_node != i) continue;
    const proto::Inode& inode = node.inode;
    const uint64_t ino = inode.attr().ino();
    if (IsDir(inode)) {
      txn->Delete(ino);
      if (inode_count_ > 0) --inode_count_;
    } else if (mounts_.Pinned(ino)) {
      // Open for reading somewhere: an orphan until its last Release.
      ASSIGN_OR_RETURN(proto::Inode * pinned, txn->Get(ino));
      pinned->mutable_attr()->set_nlink(0);
      pinned->mutable_attr()->set_ctime_ns(now);
      txn->Put(pinned);
      txn->batch().AddOrphan(ino);
      mounts_.MarkUnlinked(ino, now);
    } else {
      // The share records DeleteFile rewrites count too: many snapshots of
      // one tree make them long.
      for (const proto::Segment& segment : inode.segments()) {
        ASSIGN_OR_RETURN(proto::SharedSegment * shared, txn->Sharers(segment.id()));
        batch_bytes += static_cast<size_t>(shared->inos_size()) * 10 + 16;
      }
      DeleteFile(*txn, inode);
    }
    batch_bytes += InodeBatchBytes(inode);
    if (batch_bytes >= options_.snapshot_batch_bytes) {
      RETURN_IF_ERROR(txn->Commit());
      txn = std::make_unique<Txn>(db_);
      batch_bytes = 0;
    }
  }
  txn->batch().DeleteSnapshot(record.root());
  return txn->Commit();
}

absl::Status Namespace::FinishSnapshots() {
  ASSIGN_OR_RETURN(std::vector<proto::SnapshotRecord> records, db_->ListSnapshots());
  for (const proto::SnapshotRecord& record : records) {
    if (record.state() == proto::SnapshotRecord::READY) continue;
    LOG(WARNING) << "snapshot '" << record.name() << "' of directory " << record.dir() << " was "
                 << (record.state() == proto::SnapshotRecord::BUILDING ? "being made"
                                                                       : "being deleted")
                 << " when meta stopped: deleting what it holds";
    // Logged, not fatal: a meta that cannot finish it now serves anyway
    // (the tree is unreachable by name) and tries again at its next start.
    if (absl::Status deleted = DeleteSnapshotTree(record); !deleted.ok()) {
      LOG(ERROR) << "snapshot '" << record.name() << "' of directory " << record.dir()
                 << ": cannot delete what it holds yet: " << deleted;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<proto::SnapshotResponse> Namespace::ListSnapshots(uint64_t dir) {
  proto::SnapshotResponse response;
  {
    absl::MutexLock lock(&mu_);
    if (dir != 0) {
      Txn txn(db_);
      RETURN_IF_ERROR(GetDir(txn, dir).status());
    }
    ASSIGN_OR_RETURN(std::vector<proto::SnapshotRecord> records, db_->ListSnapshots());
    for (proto::SnapshotRecord& record : records) {
      if (record.state() != proto::SnapshotRecord::READY) continue;
      if (dir != 0 && record.dir() != dir) continue;
      proto::SnapshotInfo* info = response.add_snapshots();
      *info->mutable_record() = std::move(record);
      ASSIGN_OR_RETURN(*info->mutable_dir_path(), PathOf(info->record().dir()));
      absl::StatusOr<proto::Inode> root = db_->GetInode(info->record().root());
      if (!root.ok()) continue;  // listed without its bytes
      ASSIGN_OR_RETURN(std::vector<TreeNode> nodes,
                       WalkTree(db_, *root, /*tolerate_missing=*/true));
      std::set<uint64_t> inos;
      for (const TreeNode& node : nodes) {
        if (!node.missing) inos.insert(nodes[node.inode_node].inode.attr().ino());
      }
      uint64_t exclusive = 0;
      for (size_t i = 0; i < nodes.size(); ++i) {
        if (nodes[i].missing || nodes[i].inode_node != i) continue;
        for (const proto::Segment& segment : nodes[i].inode.segments()) {
          ASSIGN_OR_RETURN(proto::SharedSegment shared, db_->GetSharedSegment(segment.id()));
          const bool only_here = std::all_of(shared.inos().begin(), shared.inos().end(),
                                             [&](uint64_t ino) { return inos.count(ino) != 0; });
          if (only_here) exclusive += segment.length();
        }
      }
      info->set_exclusive_bytes(exclusive);
    }
  }
  // Answer only what is durable.
  RETURN_IF_ERROR(WaitStaged());
  return response;
}

absl::StatusOr<std::string> Namespace::PathOf(uint64_t dir) {
  std::vector<std::string> parts;
  for (int depth = 0; dir != kRootIno; ++depth) {
    if (depth == 4096) return std::string("?");
    absl::StatusOr<proto::Inode> inode = db_->GetInode(dir);
    if (!inode.ok()) return std::string("?");
    const uint64_t parent = inode->parent() != 0 ? inode->parent() : kRootIno;
    // A directory knows its parent, not its name: find it among the
    // parent's entries.
    std::string name;
    std::string after;
    for (bool more = true; more && name.empty();) {
      ASSIGN_OR_RETURN(MetadataDb::DirPage page,
                       db_->ListDir(parent, after, kWalkPageEntries, kWalkPageBytes));
      more = page.more;
      for (const proto::DirEntry& entry : page.entries) {
        after = entry.name();
        if (entry.ino() == dir) {
          name = entry.name();
          break;
        }
      }
    }
    if (name.empty()) return std::string("?");
    parts.push_back(std::move(name));
    dir = parent;
  }
  std::string path;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) absl::StrAppend(&path, "/", *it);
  return path.empty() ? std::string("/") : path;
}

}  // namespace logfs::meta

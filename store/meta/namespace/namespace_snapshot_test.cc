// Directory snapshots (Namespace::Snapshot): a read-only copy of a tree
// under DIR/.snapshot/NAME that readdir does not show; sealed files share
// segments, a file being written is taken at its durable length on an ack
// quorum; every change inside is EROFS (a link out EXDEV); a replica goes
// only when neither the files nor a snapshot list it; a create or delete
// cut short by a restart is finished at Load; trees larger than a batch
// are written in several.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include "src/status/posix_error.h"
#include "store/format/setattr_bits.h"
#include "store/meta/namespace/namespace.h"
#include "store/meta/namespace/namespace_fixture.h"

namespace logfs::meta {
namespace {

class NamespaceSnapshotTest : public NamespaceTest {
 protected:
  void Configure(NamespaceOptions* options) override {
    NamespaceTest::Configure(options);
    if (snapshot_batch_bytes_ != 0) options->snapshot_batch_bytes = snapshot_batch_bytes_;
  }
  absl::StatusOr<proto::SnapshotResponse> Snapshot(proto::SnapshotRequest::Op op, uint64_t dir,
                                                   const std::string& name = "") {
    proto::SnapshotRequest request;
    request.set_op(op);
    request.set_dir(dir);
    request.set_name(name);
    return ns_->Snapshot(request);
  }
  absl::StatusOr<proto::SnapshotResponse> Create(uint64_t dir, const std::string& name) {
    return Snapshot(proto::SnapshotRequest::CREATE, dir, name);
  }
  absl::StatusOr<proto::SnapshotResponse> Delete(uint64_t dir, const std::string& name) {
    return Snapshot(proto::SnapshotRequest::DELETE, dir, name);
  }
  std::vector<std::string> Names(uint64_t dir) {
    std::vector<std::string> names;
    auto page = ns_->Readdir(dir, "");
    EXPECT_TRUE(page.ok()) << page.status();
    if (page.ok()) {
      for (const auto& entry : page->entries()) names.push_back(entry.name());
    }
    return names;
  }
  // The snapshot NAME of directory `dir`: its root's inode, 0 if absent.
  uint64_t SnapshotRoot(uint64_t dir, const std::string& name) {
    const uint64_t snapshots = LookupIno(dir, ".snapshot");
    return snapshots == 0 ? 0 : LookupIno(snapshots, name);
  }
  size_t PendingDeletions(const std::vector<uint64_t>& servers) {
    size_t n = 0;
    for (uint64_t server : servers) n += Deletions(server).size();
    return n;
  }

  size_t snapshot_batch_bytes_ = 0;
};

TEST_F(NamespaceSnapshotTest, ASnapshotCopiesTheTreeHiddenFromReaddirAndSharesTheSegments) {
  auto servers = RegisterServers(3);
  const uint64_t d = Dir(kRootIno, "d");
  const uint64_t a = File(d, "a");
  WriteAndClose(a, 1, 100);
  const uint64_t s = Dir(d, "s");
  WriteAndClose(File(s, "b"), 1, 50);
  Make(s, "l", S_IFLNK | 0777, "../a");
  proto::LinkRequest link;
  link.set_ino(a);
  link.set_new_parent(d);
  link.set_new_name("a2");
  ASSERT_TRUE(ns_->Link(link).ok());

  auto made = Create(d, "one");
  ASSERT_TRUE(made.ok()) << made.status();
  const proto::SnapshotRecord& record = made->snapshots(0).record();
  EXPECT_EQ(5u, record.files());  // d, a (two names), s, b, l
  EXPECT_EQ(150u, record.bytes());  // regular files' bytes
  EXPECT_EQ(0u, made->open_files());

  // Hidden from readdir, reached by name.
  EXPECT_EQ((std::vector<std::string>{"a", "a2", "s"}), Names(d));
  const uint64_t root = SnapshotRoot(d, "one");
  ASSERT_NE(0u, root);
  EXPECT_EQ((std::vector<std::string>{"a", "a2", "s"}), Names(root));
  const uint64_t copy_a = LookupIno(root, "a");
  EXPECT_NE(a, copy_a);
  EXPECT_EQ(copy_a, LookupIno(root, "a2"));
  EXPECT_EQ(2u, ns_->GetAttr(copy_a)->nlink());
  EXPECT_EQ(100u, ns_->GetAttr(copy_a)->size());
  const uint64_t copy_s = LookupIno(root, "s");
  EXPECT_EQ(50u, ns_->GetAttr(LookupIno(copy_s, "b"))->size());
  EXPECT_EQ("../a", *ns_->Readlink(LookupIno(copy_s, "l")));
  EXPECT_EQ(3u, ns_->GetAttr(root)->nlink());  // ., its entry, s/..
  EXPECT_EQ(ns_->GetInode(a)->segments(0).id(), ns_->GetInode(copy_a)->segments(0).id());

  // The files go; the snapshot keeps their replicas, and now holds them
  // alone.
  ASSERT_TRUE(ns_->Unlink(d, "a", false).ok());
  ASSERT_TRUE(ns_->Unlink(d, "a2", false).ok());
  ASSERT_TRUE(ns_->Unlink(s, "b", false).ok());
  EXPECT_EQ(0u, PendingDeletions(servers));
  auto listed = Snapshot(proto::SnapshotRequest::LIST, d);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(1, listed->snapshots_size());
  EXPECT_EQ("one", listed->snapshots(0).record().name());
  EXPECT_EQ("/d", listed->snapshots(0).dir_path());
  EXPECT_EQ(150u, listed->snapshots(0).exclusive_bytes());
  // A directory with snapshots is not empty (as HDFS refuses to delete a
  // snapshottable directory that has snapshots).
  ASSERT_TRUE(ns_->Unlink(s, "l", false).ok());
  ASSERT_TRUE(ns_->Unlink(d, "s", true).ok());
  EXPECT_EQ(ENOTEMPTY, AttachedErrno(ns_->Unlink(kRootIno, "d", true)));

  // A restart keeps it all.
  Reopen();
  EXPECT_EQ(100u, ns_->GetAttr(LookupIno(SnapshotRoot(d, "one"), "a"))->size());
  ASSERT_TRUE(Delete(d, "one").ok());
  EXPECT_EQ(0u, SnapshotRoot(d, "one"));
  EXPECT_EQ(0u, LookupIno(d, ".snapshot"));
  EXPECT_EQ(ESTALE, AttachedErrno(ns_->GetAttr(copy_a).status()));
  EXPECT_EQ(2u * 3, PendingDeletions(servers));  // two segments, three replicas each
  EXPECT_TRUE(ns_->Unlink(kRootIno, "d", true).ok());
  EXPECT_EQ(0, Snapshot(proto::SnapshotRequest::LIST, 0)->snapshots_size());
}

TEST_F(NamespaceSnapshotTest, EverythingInASnapshotIsReadOnly) {
  RegisterServers(3);
  const uint64_t d = Dir(kRootIno, "d");
  WriteAndClose(File(d, "f"), 1, 10);
  Dir(d, "sub");
  ASSERT_TRUE(Create(d, "s").ok());
  const uint64_t root = SnapshotRoot(d, "s");
  const uint64_t f = LookupIno(root, "f");
  const uint64_t sub = LookupIno(root, "sub");
  const uint64_t snapshots = LookupIno(d, ".snapshot");

  EXPECT_EQ(EROFS, CreateErrno(root, "new", S_IFREG | 0644));
  EXPECT_EQ(EROFS, CreateErrno(snapshots, "new", S_IFDIR | 0755));
  EXPECT_EQ(EROFS, AttachedErrno(ns_->Unlink(root, "f", false)));
  EXPECT_EQ(EROFS, AttachedErrno(ns_->Unlink(root, "sub", true)));
  EXPECT_EQ(EROFS, AttachedErrno(ns_->Unlink(snapshots, "s", true)));
  EXPECT_EQ(EROFS, AttachedErrno(ns_->Unlink(d, ".snapshot", true)));
  EXPECT_EQ(EROFS, RenameErrno(root, "f", root, "g"));
  EXPECT_EQ(EROFS, RenameErrno(root, "f", d, "g"));
  EXPECT_EQ(EROFS, RenameErrno(d, "f", root, "f2"));
  EXPECT_EQ(EROFS, RenameErrno(d, ".snapshot", kRootIno, "x"));
  EXPECT_EQ(EROFS, SetXattrErrno(f, "user.x", "1"));
  EXPECT_EQ(EROFS, AttachedErrno(ns_->RemoveXattr(f, "user.x")));
  proto::SetAttrRequest chmod;
  chmod.set_ino(f);
  chmod.set_to_set(format::kSetAttrMode);
  chmod.set_mode(0600);
  EXPECT_EQ(EROFS, AttachedErrno(ns_->SetAttr(chmod).status()));
  EXPECT_EQ(EROFS, AttachedErrno(OpenWrite(f, 1).status()));
  EXPECT_EQ(EROFS, AttachedErrno(Create(sub, "nested").status()));
  // A link out would change the snapshot's link count: EXDEV, so link()
  // callers copy instead; a clone is the way out.
  proto::LinkRequest link;
  link.set_ino(f);
  link.set_new_parent(d);
  link.set_new_name("out");
  EXPECT_EQ(EXDEV, AttachedErrno(ns_->Link(link).status()));
  proto::CloneRequest clone;
  clone.set_ino(f);
  clone.set_new_parent(d);
  clone.set_new_name("restored");
  clone.set_mode(0644);
  auto restored = ns_->Clone(clone);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(10u, restored->size());
  EXPECT_EQ(0, SetXattrErrno(restored->ino(), "user.x", "1"));

  EXPECT_EQ(EEXIST, AttachedErrno(Create(d, "s").status()));
  EXPECT_EQ(ENOENT, AttachedErrno(Delete(d, "nope").status()));
  EXPECT_EQ(EINVAL, AttachedErrno(Create(d, "a/b").status()));
  EXPECT_EQ(ENOTDIR, AttachedErrno(Create(LookupIno(d, "f"), "s").status()));
  // A directory's own `.snapshot` entry is not taken over.
  const uint64_t e = Dir(kRootIno, "e");
  File(e, ".snapshot");
  EXPECT_EQ(EEXIST, AttachedErrno(Create(e, "s").status()));
}

TEST_F(NamespaceSnapshotTest, AFileBeingWrittenIsTakenAtItsDurableLengthOnAnAckQuorum) {
  auto servers = RegisterServers(3);
  uint64_t wal = 0;
  const proto::Segment open = OpenWalSegment(&wal);  // "f" in the root, mount 1
  ASSERT_EQ(3, open.replicas_size());
  // Written 100, 90 and 40 bytes; fdatasynced 80, 60 and 40. Two of
  // three make the ack quorum: 60 bytes are durable on two.
  fake_.Put(open.replicas(0).address(), open.id(), 100, 80);
  fake_.Put(open.replicas(1).address(), open.id(), 90, 60);
  fake_.Put(open.replicas(2).address(), open.id(), 40, 40);
  auto made = Create(kRootIno, "snap");
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(1u, made->open_files());
  const uint64_t copy = LookupIno(SnapshotRoot(kRootIno, "snap"), "f");
  auto taken = ns_->GetInode(copy);
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(60u, taken->attr().size());
  EXPECT_FALSE(taken->attr().open_for_write());
  ASSERT_EQ(1, taken->segments_size());
  const proto::Segment& prefix = taken->segments(0);
  EXPECT_EQ(open.id(), prefix.id());
  EXPECT_TRUE(prefix.sealed());
  EXPECT_TRUE(prefix.prefix());
  EXPECT_EQ(60u, prefix.length());
  EXPECT_EQ(0u, prefix.replica_length());
  EXPECT_EQ(2, prefix.replicas_size());  // the one with 40 bytes cannot serve it

  // The writer seals at 120: the snapshot learns its replicas' length.
  ASSERT_TRUE(Seal(wal, 1, open.id(), 120, /*close=*/true).ok());
  EXPECT_EQ(120u, ns_->GetAttr(wal)->size());
  taken = ns_->GetInode(copy);
  EXPECT_EQ(60u, taken->segments(0).length());
  EXPECT_EQ(120u, taken->segments(0).replica_length());
  EXPECT_EQ(3, taken->segments(0).replicas_size());
  // The file goes, the replicas stay for the snapshot until it goes too.
  ASSERT_TRUE(ns_->Unlink(kRootIno, "f", false).ok());
  EXPECT_EQ(0u, PendingDeletions(servers));
  ASSERT_TRUE(Delete(kRootIno, "snap").ok());
  EXPECT_EQ(3u, PendingDeletions(servers));
}

// Found by review: a writer that seals at exactly the snapshot's length
// still tells the snapshot its replicas are sealed (re-replication and
// fsck need that), a snapshot's prefix never hands its replica subset to
// the writer's open segment, and a read-only copy cannot be sealed or
// recovered into a writable file.
TEST_F(NamespaceSnapshotTest, APrefixSealedAtItsOwnLengthIsCopyableAndNeverSpeaksForTheWriter) {
  RegisterServers(3);
  uint64_t wal = 0;
  const proto::Segment open = OpenWalSegment(&wal);
  fake_.Put(open.replicas(0).address(), open.id(), 50, 50);
  fake_.Put(open.replicas(1).address(), open.id(), 50, 50);
  fake_.Put(open.replicas(2).address(), open.id(), 20, 20);
  ASSERT_TRUE(Create(kRootIno, "snap").ok());
  const uint64_t copy = LookupIno(SnapshotRoot(kRootIno, "snap"), "f");
  ASSERT_EQ(2, ns_->GetInode(copy)->segments(0).replicas_size());
  // The writer's open segment keeps its three replicas.
  EXPECT_EQ(3, ns_->GetInode(wal)->segments(0).replicas_size());
  EXPECT_EQ(EROFS, AttachedErrno(Seal(copy, 1, 0, 0, /*close=*/false).status()));
  EXPECT_EQ(EROFS, AttachedErrno(ns_->RecoverLease(copy).status()));
  ASSERT_TRUE(Seal(wal, 1, open.id(), 50, /*close=*/true).ok());
  const proto::Segment prefix = ns_->GetInode(copy)->segments(0);
  EXPECT_TRUE(prefix.prefix());
  EXPECT_EQ(50u, prefix.replica_length());
  EXPECT_EQ(3, prefix.replicas_size());
  EXPECT_EQ(50u, ns_->GetAttr(copy)->size());
}

TEST_F(NamespaceSnapshotTest, TooFewAnsweringReplicasOfAnOpenSegmentRefuseWithEagain) {
  RegisterServers(3);
  uint64_t wal = 0;
  const proto::Segment open = OpenWalSegment(&wal);
  fake_.Put(open.replicas(0).address(), open.id(), 100, 80);
  fake_.down.insert(open.replicas(1).address());
  fake_.down.insert(open.replicas(2).address());
  EXPECT_EQ(EAGAIN, AttachedErrno(Create(kRootIno, "snap").status()));
  EXPECT_EQ(0u, LookupIno(kRootIno, ".snapshot"));
  EXPECT_EQ(0, Snapshot(proto::SnapshotRequest::LIST, 0)->snapshots_size());
  // A snapshot that takes nothing but sealed files needs no answer.
  const uint64_t d = Dir(kRootIno, "d");
  WriteAndClose(File(d, "g"), 2, 7);
  EXPECT_TRUE(Create(d, "snap").ok());
}

TEST_F(NamespaceSnapshotTest, ATreeLargerThanABatchTakesSeveralAndACutShortCreateIsUndone) {
  snapshot_batch_bytes_ = 2048;
  Reopen();
  auto servers = RegisterServers(3);
  const uint64_t d = Dir(kRootIno, "d");
  constexpr int kFiles = 120;
  for (int i = 0; i < kFiles; ++i) {
    const uint64_t sub = i % 10 == 0 ? Dir(d, "sub" + std::to_string(i)) : d;
    WriteAndClose(File(sub, "f" + std::to_string(i)), 1, 10 + i);
  }
  const uint64_t groups_before = db_->group_commit_stats().changes;
  auto made = Create(d, "big");
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_GT(db_->group_commit_stats().changes - groups_before, 5u);  // several batches
  EXPECT_EQ(1u + 12 + kFiles, made->snapshots(0).record().files());
  const uint64_t root = SnapshotRoot(d, "big");
  EXPECT_EQ(20u, ns_->GetAttr(LookupIno(LookupIno(root, "sub10"), "f10"))->size());
  EXPECT_EQ(10u + 119, ns_->GetAttr(LookupIno(root, "f119"))->size());

  // A meta that stopped in the middle of a create: the name was not yet
  // added, the record says BUILDING. The next start deletes what it made.
  {
    MetadataDb::Batch cut;
    const uint64_t snapshots = LookupIno(d, ".snapshot");
    cut.DeleteDirEntry(snapshots, "big");
    auto records = db_->ListSnapshots();
    ASSERT_TRUE(records.ok());
    ASSERT_EQ(1u, records->size());
    proto::SnapshotRecord building = records->at(0);
    building.set_state(proto::SnapshotRecord::BUILDING);
    cut.PutSnapshot(building);
    ASSERT_TRUE(db_->Write(cut).ok());
  }
  Reopen();
  EXPECT_EQ(ESTALE, AttachedErrno(ns_->GetAttr(root).status()));
  EXPECT_TRUE(db_->ListSnapshots()->empty());
  // Its share records went with it: deleting the files deletes the
  // replicas.
  for (int i = 0; i < kFiles; ++i) {
    const uint64_t sub = i % 10 == 0 ? LookupIno(d, "sub" + std::to_string(i)) : d;
    ASSERT_TRUE(ns_->Unlink(sub, "f" + std::to_string(i), false).ok());
  }
  EXPECT_EQ(3u * kFiles, PendingDeletions(servers));
}

}  // namespace
}  // namespace logfs::meta

// Metadata-only copies (Namespace::Clone) and shared segments: a clone
// lists its source's sealed segments; replicas are deleted only when the
// last file that lists them goes (also after a restart); a re-replication
// copy or a dropped replica changes every file that lists the segment; a
// shared WAL segment is never continued; an open segment is never shared.
// CopyRange appends a source's whole sealed segments to the end of a file
// its caller writes, and refuses what is not that.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include "src/status/posix_error.h"
#include "store/meta/namespace/namespace.h"
#include "store/meta/namespace/namespace_fixture.h"

namespace logfs::meta {
namespace {

class NamespaceCloneTest : public NamespaceTest {
 protected:
  absl::StatusOr<proto::Attr> Clone(uint64_t ino, uint64_t new_parent, const std::string& name) {
    proto::CloneRequest request;
    request.set_ino(ino);
    request.set_new_parent(new_parent);
    request.set_new_name(name);
    request.set_mode(0640);
    request.set_uid(7);
    request.set_gid(8);
    return ns_->Clone(request);
  }
  std::vector<uint64_t> SegmentIds(uint64_t ino) {
    std::vector<uint64_t> ids;
    auto inode = ns_->GetInode(ino);
    EXPECT_TRUE(inode.ok()) << inode.status();
    if (inode.ok()) {
      for (const auto& segment : inode->segments()) ids.push_back(segment.id());
    }
    return ids;
  }
  std::vector<uint64_t> ReplicaServers(uint64_t ino, int segment) {
    std::vector<uint64_t> servers;
    auto inode = ns_->GetInode(ino);
    EXPECT_TRUE(inode.ok()) << inode.status();
    if (inode.ok()) {
      for (const auto& r : inode->segments(segment).replicas()) servers.push_back(r.server_id());
    }
    std::sort(servers.begin(), servers.end());
    return servers;
  }
};

TEST_F(NamespaceCloneTest, ACloneSharesTheSegmentsAndTheLastFileDeletesTheReplicas) {
  auto servers = RegisterServers(3);
  const uint64_t f = File(kRootIno, "f");
  WriteAndClose(f, /*mount=*/1, 100);
  const uint64_t first = SegmentIds(f).at(0);
  auto cloned = Clone(f, kRootIno, "g");
  ASSERT_TRUE(cloned.ok()) << cloned.status();
  const uint64_t g = cloned->ino();
  EXPECT_NE(f, g);
  EXPECT_EQ(100u, cloned->size());
  EXPECT_EQ(1u, cloned->nlink());
  EXPECT_EQ(S_IFREG | 0640u, cloned->mode());
  EXPECT_EQ(7u, cloned->uid());
  EXPECT_EQ(g, LookupIno(kRootIno, "g"));
  EXPECT_EQ(SegmentIds(f), SegmentIds(g));
  // A clone of the clone: three files list the segment.
  auto again = Clone(g, kRootIno, "h");
  ASSERT_TRUE(again.ok()) << again.status();
  const uint64_t h = again->ino();

  ASSERT_TRUE(ns_->Unlink(kRootIno, "f", false).ok());
  ASSERT_TRUE(ns_->Unlink(kRootIno, "g", false).ok());
  for (uint64_t server : servers) EXPECT_TRUE(Deletions(server).empty()) << server;
  EXPECT_EQ(100u, ns_->GetAttr(h)->size());
  // A restart keeps the count: still no deletion until the last goes.
  Reopen();
  ASSERT_TRUE(ns_->Unlink(kRootIno, "h", false).ok());
  for (uint64_t server : servers) {
    EXPECT_EQ(std::vector<uint64_t>{first}, Deletions(server)) << server;
  }
}

TEST_F(NamespaceCloneTest, OnlySealedRegularFilesClone) {
  RegisterServers(3);
  const uint64_t dir = Dir(kRootIno, "d");
  File(kRootIno, "taken");
  uint64_t wal = 0;
  OpenWalSegment(&wal);  // "f", open segment being written by mount 1
  EXPECT_EQ(EXDEV, AttachedErrno(Clone(wal, kRootIno, "x").status()));
  EXPECT_EQ(EINVAL, AttachedErrno(Clone(dir, kRootIno, "x").status()));
  const uint64_t empty = File(kRootIno, "empty");
  EXPECT_EQ(EEXIST, AttachedErrno(Clone(empty, kRootIno, "taken").status()));
  EXPECT_EQ(ESTALE, AttachedErrno(Clone(9999, kRootIno, "x").status()));
  EXPECT_EQ(0u, LookupIno(kRootIno, "x"));
  auto cloned = Clone(empty, dir, "e");  // no segments: an empty file
  ASSERT_TRUE(cloned.ok()) << cloned.status();
  EXPECT_EQ(0u, cloned->size());
}

TEST_F(NamespaceCloneTest, AReplicaCopiedForOneFileIsListedByEveryFileSharingTheSegment) {
  auto servers = RegisterServers(4);
  const uint64_t f = File(kRootIno, "f");
  proto::Inode written = WriteAndClose(f, /*mount=*/1, 100);
  const proto::Segment& segment = written.segments(0);
  auto cloned = Clone(f, kRootIno, "g");
  ASSERT_TRUE(cloned.ok());
  const uint64_t g = cloned->ino();
  std::vector<uint64_t> holders = ReplicaServers(f, 0);
  uint64_t target = 0;
  for (uint64_t server : servers) {
    if (std::find(holders.begin(), holders.end(), server) == holders.end()) target = server;
  }
  ASSERT_NE(0u, target);
  RereplicationTask task;
  task.ino = g;
  task.segment_id = segment.id();
  task.epoch = segment.epoch();
  task.length = segment.length();
  task.target_server_id = target;
  task.target_address = "10.0.0.9:7000";
  ASSERT_TRUE(ns_->CommitReplica(task).ok());
  EXPECT_EQ(4u, ReplicaServers(g, 0).size());
  EXPECT_EQ(ReplicaServers(g, 0), ReplicaServers(f, 0));
}

TEST_F(NamespaceCloneTest, ASharedWalSegmentIsNeverContinued) {
  RegisterServers(3);
  uint64_t wal = 0;
  proto::Segment open = OpenWalSegment(&wal);
  ASSERT_TRUE(Seal(wal, 1, open.id(), 50, /*close=*/true).ok());
  auto cloned = Clone(wal, kRootIno, "copy");
  ASSERT_TRUE(cloned.ok()) << cloned.status();
  // The next writer of the source asks to continue its short last
  // segment (a WAL reopened for append): it gets a new one instead.
  ASSERT_TRUE(OpenWrite(wal, 2).ok());
  proto::SealSegmentRequest request;
  request.set_ino(wal);
  request.set_mount_id(2);
  request.set_continue_below_bytes(1 << 20);
  auto next = ns_->SealSegment(request);
  ASSERT_TRUE(next.ok()) << next.status();
  ASSERT_EQ(2, next->segments_size());
  EXPECT_TRUE(next->segments(0).sealed());
  EXPECT_EQ(50u, next->segments(0).length());
  EXPECT_NE(open.id(), next->segments(1).id());
}

class NamespaceCopyRangeTest : public NamespaceCloneTest {
 protected:
  // Writes `ino` as `mount` in sealed segments of `lengths`, then closes it.
  proto::Inode WriteSegments(uint64_t ino, uint64_t mount, const std::vector<uint64_t>& lengths) {
    EXPECT_TRUE(OpenWrite(ino, mount).ok());
    auto inode = Seal(ino, mount, 0, 0, /*close=*/false);
    for (size_t i = 0; inode.ok() && i < lengths.size(); ++i) {
      const uint64_t open = inode->segments(inode->segments_size() - 1).id();
      inode = Seal(ino, mount, open, lengths[i], /*close=*/i + 1 == lengths.size());
    }
    EXPECT_TRUE(inode.ok()) << inode.status();
    return inode.ok() ? *inode : proto::Inode();
  }
  absl::StatusOr<proto::Inode> CopyRange(uint64_t ino, uint64_t offset, uint64_t length,
                                         uint64_t dst, uint64_t dst_offset, uint64_t mount,
                                         uint64_t lease_epoch, uint64_t seq) {
    proto::CopyRangeRequest request;
    request.set_ino(ino);
    request.set_offset(offset);
    request.set_length(length);
    request.set_dst_ino(dst);
    request.set_dst_offset(dst_offset);
    request.set_mount_id(mount);
    request.set_lease_epoch(lease_epoch);
    request.mutable_call()->set_mount_id(mount);
    request.mutable_call()->set_seq(seq);
    return ns_->CopyRange(request);
  }
};

TEST_F(NamespaceCopyRangeTest, AppendsTheSourceSegmentsAndTheWriterGoesOnAfterThem) {
  auto servers = RegisterServers(3);
  const uint64_t f = File(kRootIno, "f");
  WriteSegments(f, /*mount=*/1, {100, 50});
  const std::vector<uint64_t> source_ids = SegmentIds(f);
  ASSERT_EQ(2u, source_ids.size());
  const uint64_t g = File(kRootIno, "g");
  auto opened = OpenWrite(g, /*mount=*/2);
  ASSERT_TRUE(opened.ok()) << opened.status();
  auto copied = CopyRange(f, 0, 150, g, 0, 2, opened->lease_epoch(), /*seq=*/1);
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_EQ(150u, copied->attr().size());
  EXPECT_EQ(source_ids, SegmentIds(g));
  EXPECT_EQ(100u, copied->segments(1).file_offset());
  EXPECT_EQ(150u, ns_->GetAttr(g)->size());
  // A retry of the applied call changes nothing more.
  auto retried = CopyRange(f, 0, 150, g, 0, 2, opened->lease_epoch(), /*seq=*/1);
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(source_ids, SegmentIds(g));

  // The writer's next segment comes after the copied ones.
  auto next = Seal(g, 2, 0, 0, /*close=*/false);
  ASSERT_TRUE(next.ok()) << next.status();
  ASSERT_EQ(3, next->segments_size());
  EXPECT_EQ(150u, next->segments(2).file_offset());
  ASSERT_TRUE(Seal(g, 2, next->segments(2).id(), 10, /*close=*/true).ok());
  EXPECT_EQ(160u, ns_->GetAttr(g)->size());

  // The source goes: the copy keeps the segments' replicas.
  ASSERT_TRUE(ns_->Unlink(kRootIno, "f", false).ok());
  for (uint64_t server : servers) EXPECT_TRUE(Deletions(server).empty()) << server;
  Reopen();
  EXPECT_EQ(160u, ns_->GetAttr(g)->size());
  ASSERT_TRUE(ns_->Unlink(kRootIno, "g", false).ok());
  std::vector<uint64_t> deleted;
  for (uint64_t server : servers) {
    for (uint64_t id : Deletions(server)) deleted.push_back(id);
  }
  for (uint64_t id : source_ids) {
    EXPECT_NE(deleted.end(), std::find(deleted.begin(), deleted.end(), id)) << id;
  }
}

TEST_F(NamespaceCopyRangeTest, OnlyWholeSealedSegmentsAtTheEndOfALeasedFile) {
  RegisterServers(3);
  const uint64_t f = File(kRootIno, "f");
  WriteSegments(f, /*mount=*/1, {100, 50});
  const uint64_t g = File(kRootIno, "g");
  auto opened = OpenWrite(g, /*mount=*/2);
  ASSERT_TRUE(opened.ok()) << opened.status();
  const uint64_t epoch = opened->lease_epoch();
  uint64_t seq = 1;
  auto copy_errno = [&](uint64_t offset, uint64_t length, uint64_t dst, uint64_t dst_offset,
                        uint64_t mount, uint64_t lease_epoch) {
    return AttachedErrno(
        CopyRange(f, offset, length, dst, dst_offset, mount, lease_epoch, ++seq).status());
  };
  EXPECT_EQ(EINVAL, copy_errno(50, 100, g, 0, 2, epoch));   // starts inside a segment
  EXPECT_EQ(EINVAL, copy_errno(0, 120, g, 0, 2, epoch));    // ends inside one
  EXPECT_EQ(EINVAL, copy_errno(0, 200, g, 0, 2, epoch));    // past the end
  EXPECT_EQ(EINVAL, copy_errno(0, 0, g, 0, 2, epoch));      // empty
  EXPECT_EQ(EINVAL, copy_errno(0, 100, g, 10, 2, epoch));   // not at the destination's end
  EXPECT_EQ(EBUSY, copy_errno(0, 100, g, 0, 3, epoch));     // another mount's file
  EXPECT_EQ(EBUSY, copy_errno(0, 100, g, 0, 2, epoch + 1)); // another lease
  EXPECT_EQ(EINVAL, copy_errno(0, 100, f, 0, 1, 0));        // into itself
  EXPECT_EQ(ESTALE, copy_errno(0, 100, 9999, 0, 2, epoch));
  EXPECT_EQ(0u, ns_->GetAttr(g)->size());

  // The second segment alone, then the first after it; not one twice.
  auto second = CopyRange(f, 100, 50, g, 0, 2, epoch, ++seq);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(50u, second->attr().size());
  auto first = CopyRange(f, 0, 100, g, 50, 2, epoch, ++seq);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(150u, first->attr().size());
  EXPECT_EQ(EINVAL, copy_errno(0, 100, g, 150, 2, epoch));

  // A destination whose last segment is open (bytes meta cannot count).
  auto open = Seal(g, 2, 0, 0, /*close=*/false);
  ASSERT_TRUE(open.ok()) << open.status();
  EXPECT_EQ(EINVAL, copy_errno(100, 50, g, 150, 2, epoch));

  // A source whose bytes are in an open segment.
  const uint64_t w = File(kRootIno, "w");
  ASSERT_TRUE(OpenWrite(w, 4).ok());
  ASSERT_TRUE(Seal(w, 4, 0, 0, /*close=*/false).ok());
  const uint64_t h = File(kRootIno, "h");
  auto h_opened = OpenWrite(h, 2);
  ASSERT_TRUE(h_opened.ok()) << h_opened.status();
  EXPECT_EQ(EINVAL, AttachedErrno(
                        CopyRange(w, 0, 10, h, 0, 2, h_opened->lease_epoch(), ++seq).status()));
}

}  // namespace
}  // namespace logfs::meta

namespace logfs::meta {
namespace {

// logfs fsck's check of the share records: a record that misses a file
// (whose deletion would then delete replicas the other still needs) and
// one for a segment nobody lists are reported, and rewritten from the
// inodes with `repair`; after the repair, deletion waits for the last file.
TEST_F(NamespaceCloneTest, CheckSharesFindsAndRepairsRecordsThatDisagreeWithTheInodes) {
  auto servers = RegisterServers(3);
  const uint64_t f = File(kRootIno, "f");
  WriteAndClose(f, 1, 100);
  auto cloned = Clone(f, kRootIno, "g");
  ASSERT_TRUE(cloned.ok()) << cloned.status();
  const uint64_t segment = SegmentIds(f).at(0);
  proto::CheckSharesRequest check;
  auto healthy = ns_->CheckShares(check);
  ASSERT_TRUE(healthy.ok()) << healthy.status();
  EXPECT_EQ(1u, healthy->shared_segments());
  EXPECT_EQ(0u, healthy->disagreeing());

  // A lost record, and a stale one for a segment no file lists.
  {
    MetadataDb::Batch damage;
    damage.DeleteSharedSegment(segment);
    proto::SharedSegment stale;
    stale.add_inos(900);
    stale.add_inos(901);
    damage.PutSharedSegment(777777, stale);
    ASSERT_TRUE(db_->Write(damage).ok());
  }
  auto found = ns_->CheckShares(check);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(2u, found->disagreeing());
  EXPECT_FALSE(found->repaired());
  ASSERT_EQ(2, found->disagreements_size());
  EXPECT_EQ(segment, found->disagreements(0).segment_id());
  EXPECT_EQ(0, found->disagreements(0).recorded_size());
  EXPECT_EQ(2, found->disagreements(0).listing_size());
  EXPECT_EQ(777777u, found->disagreements(1).segment_id());
  EXPECT_EQ(2, found->disagreements(1).recorded_size());

  check.set_repair(true);
  auto repaired = ns_->CheckShares(check);
  ASSERT_TRUE(repaired.ok()) << repaired.status();
  EXPECT_TRUE(repaired->repaired());
  EXPECT_EQ(0u, ns_->CheckShares(proto::CheckSharesRequest())->disagreeing());
  ASSERT_TRUE(ns_->Unlink(kRootIno, "f", false).ok());
  for (uint64_t server : servers) EXPECT_TRUE(Deletions(server).empty()) << server;
  ASSERT_TRUE(ns_->Unlink(kRootIno, "g", false).ok());
  size_t deletions = 0;
  for (uint64_t server : servers) deletions += Deletions(server).size();
  EXPECT_EQ(3u, deletions);
}

}  // namespace
}  // namespace logfs::meta

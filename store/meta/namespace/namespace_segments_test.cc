// Namespace unit tests of files and their segments: orphans at restart,
// kinds and xattrs, write leases, truncate, placement on seal and roll,
// reopen, and recovery of a dead writer's open segment.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "src/status/posix_error.h"
#include "store/meta/namespace/namespace_fixture.h"
#include "store/meta/namespace/namespace.h"

namespace logfs::meta {
namespace {

TEST_F(NamespaceTest, OrphanLeftAtRestartIsDeletedAtOpen) {
  auto servers = RegisterServers(3);
  uint64_t f = File(kRootIno, "f");
  uint64_t segment_id = WriteAndClose(f, 1, 10).segments(0).id();
  ASSERT_TRUE(ns_->Open(f, 7).ok());
  ASSERT_TRUE(ns_->Unlink(kRootIno, "f", false).ok());
  ASSERT_TRUE(ns_->GetAttr(f).ok());
  Reopen();
  EXPECT_EQ(ESTALE, AttachedErrno(ns_->GetAttr(f).status()));
  EXPECT_EQ(std::vector<uint64_t>{segment_id}, Deletions(servers[1]));
}

// CreateRequest.kind (the RocksDB plugin's WAL and MANIFEST files): a
// regular file takes the kind asked for, whatever its directory's; a
// directory ignores it and still inherits.
TEST_F(NamespaceTest, CreateWithAKindOverridesTheDirectorys) {
  uint64_t wal_dir = Dir(kRootIno, "wal");
  ASSERT_EQ(0, SetXattrErrno(wal_dir, "user.logfs.kind", "wal"));
  auto create = [&](uint64_t parent, const std::string& name, uint32_t mode,
                    proto::FileKind kind) {
    proto::CreateRequest request;
    request.set_parent(parent);
    request.set_name(name);
    request.set_mode(mode);
    request.set_kind(kind);
    auto attr = ns_->Create(request);
    EXPECT_TRUE(attr.ok()) << attr.status();
    return attr.ok() ? attr->kind() : proto::KIND_UNSPECIFIED;
  };
  EXPECT_EQ(proto::KIND_WAL, create(kRootIno, "000007.log", S_IFREG | 0644, proto::KIND_WAL));
  EXPECT_EQ(proto::KIND_BLOCK, create(wal_dir, "000008.sst", S_IFREG | 0644, proto::KIND_BLOCK));
  EXPECT_EQ(proto::KIND_WAL, create(wal_dir, "sub", S_IFDIR | 0755, proto::KIND_BLOCK));
  EXPECT_EQ(proto::KIND_BLOCK, ns_->GetAttr(File(kRootIno, "plain"))->kind());
}

TEST_F(NamespaceTest, KindInheritanceAndXattrErrors) {
  uint64_t wal_dir = Dir(kRootIno, "wal");
  ASSERT_EQ(0, SetXattrErrno(wal_dir, "user.logfs.kind", "wal"));
  uint64_t log = File(wal_dir, "log");
  uint64_t sst = File(kRootIno, "sst");
  uint64_t nested = Dir(wal_dir, "nested");
  EXPECT_EQ(proto::KIND_WAL, ns_->GetAttr(log)->kind());
  EXPECT_EQ(proto::KIND_WAL, ns_->GetAttr(nested)->kind());
  EXPECT_EQ("wal", Xattr(log, "user.logfs.kind"));
  EXPECT_EQ("3", Xattr(log, "user.logfs.replication"));
  EXPECT_EQ("2", Xattr(log, "user.logfs.ack_quorum"));
  EXPECT_EQ("block", Xattr(sst, "user.logfs.kind"));
  EXPECT_EQ("3", Xattr(sst, "user.logfs.ack_quorum"));
  // Replication set on the directory is inherited by later children; it
  // cannot exceed the registered servers.
  EXPECT_EQ(EINVAL, SetXattrErrno(wal_dir, "user.logfs.replication", "5"));
  RegisterServers(5);
  ASSERT_EQ(0, SetXattrErrno(wal_dir, "user.logfs.replication", "5"));
  uint64_t log5 = File(wal_dir, "log5");
  EXPECT_EQ("5", Xattr(log5, "user.logfs.replication"));
  EXPECT_EQ("2", Xattr(log5, "user.logfs.ack_quorum"));
  EXPECT_EQ("3", Xattr(log, "user.logfs.replication"));
  auto inode = ns_->GetInode(log5);
  EXPECT_EQ(5u, inode->replication());
  EXPECT_EQ(2u, inode->ack_quorum());
  // A file with no data may still change kind.
  ASSERT_EQ(0, SetXattrErrno(log5, "user.logfs.kind", "block"));
  EXPECT_EQ("5", Xattr(log5, "user.logfs.ack_quorum"));
  // Bad values and read-only names.
  EXPECT_EQ(EINVAL, SetXattrErrno(wal_dir, "user.logfs.kind", "tape"));
  EXPECT_EQ(EINVAL, SetXattrErrno(wal_dir, "user.logfs.ack_quorum", "6"));
  EXPECT_EQ(EINVAL, SetXattrErrno(wal_dir, "user.logfs.replication", "17"));
  EXPECT_EQ(EINVAL, SetXattrErrno(wal_dir, "user.logfs.replication", "0"));
  EXPECT_EQ(EPERM, SetXattrErrno(log, "user.logfs.segments", "x"));
  EXPECT_EQ(EPERM, SetXattrErrno(log, "user.logfs.durable_length", "1"));
  EXPECT_EQ(EPERM, AttachedErrno(ns_->RemoveXattr(wal_dir, "user.logfs.kind")));
  // A file with data keeps its settings.
  RegisterServers(3);
  WriteAndClose(log, 1, 10);
  EXPECT_EQ(EPERM, SetXattrErrno(log, "user.logfs.kind", "block"));
  EXPECT_EQ(EPERM, SetXattrErrno(log, "user.logfs.replication", "2"));
  // Ordinary names.
  ASSERT_EQ(0, SetXattrErrno(log, "user.note", "hi", /*XATTR_CREATE=*/1));
  EXPECT_EQ(EEXIST, SetXattrErrno(log, "user.note", "again", 1));
  EXPECT_EQ(ENODATA, SetXattrErrno(log, "user.other", "v", /*XATTR_REPLACE=*/2));
  EXPECT_EQ("hi", Xattr(log, "user.note"));
  EXPECT_EQ(ENODATA, AttachedErrno(ns_->GetXattr(log, "user.other").status()));
  EXPECT_EQ(E2BIG, SetXattrErrno(log, "user.big", std::string((64 << 10) + 1, 'v')));
  EXPECT_EQ(ERANGE, SetXattrErrno(log, "user." + std::string(251, 'n'), "v"));
  auto names = ns_->ListXattr(log);
  EXPECT_EQ((std::vector<std::string>{"user.logfs.kind", "user.logfs.replication",
                                      "user.logfs.ack_quorum", "user.logfs.segments",
                                      "user.logfs.durable_length", "user.note"}),
            *names);
  EXPECT_EQ(3u, ns_->ListXattr(wal_dir)->size());
  ASSERT_TRUE(ns_->RemoveXattr(log, "user.note").ok());
  EXPECT_EQ(ENODATA, AttachedErrno(ns_->RemoveXattr(log, "user.note")));
}

TEST_F(NamespaceTest, OpenWriteIsExclusivePerMountAndReentrant) {
  uint64_t f = File(kRootIno, "f");
  ASSERT_TRUE(ns_->NewMount().ok());
  auto first = OpenWrite(f, 1);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->attr().open_for_write());
  EXPECT_TRUE(ns_->GetAttr(f)->open_for_write());
  EXPECT_EQ(EBUSY, AttachedErrno(OpenWrite(f, 2).status()));
  EXPECT_TRUE(OpenWrite(f, 1).ok());
  EXPECT_EQ(EISDIR, AttachedErrno(OpenWrite(kRootIno, 1).status()));
  uint64_t link = Make(kRootIno, "l", S_IFLNK | 0777, "f");
  EXPECT_EQ(EINVAL, AttachedErrno(OpenWrite(link, 1).status()));
  // Mount 1 goes silent; mount 2 keeps heartbeating and takes over.
  Advance(30000);
  ASSERT_TRUE(ns_->MountHeartbeat(2).ok());
  EXPECT_EQ(EBUSY, AttachedErrno(OpenWrite(f, 2).status()));
  Advance(30001);
  ASSERT_TRUE(ns_->MountHeartbeat(2).ok());
  EXPECT_FALSE(ns_->GetAttr(f)->open_for_write());
  EXPECT_TRUE(OpenWrite(f, 2).ok());
  EXPECT_EQ(EBUSY, AttachedErrno(OpenWrite(f, 1).status()));
}

TEST_F(NamespaceTest, TruncateRules) {
  auto servers = RegisterServers(3);
  uint64_t wal_dir = Dir(kRootIno, "w");
  ASSERT_EQ(0, SetXattrErrno(wal_dir, "user.logfs.kind", "wal"));
  uint64_t log = File(wal_dir, "log");
  uint64_t segment_id = WriteAndClose(log, 1, 50).segments(0).id();
  auto truncate = [&](uint64_t ino, uint64_t size, uint64_t mount) {
    proto::SetAttrRequest request;
    request.set_ino(ino);
    request.set_to_set(1 << 3);  // FUSE_SET_ATTR_SIZE
    request.set_size(size);
    request.set_mount_id(mount);
    return ns_->SetAttr(request);
  };
  EXPECT_EQ(EPERM, AttachedErrno(truncate(log, 10, 0).status()));
  EXPECT_EQ(EPERM, AttachedErrno(truncate(log, 60, 0).status()));
  EXPECT_EQ(50u, truncate(log, 50, 0)->size());  // same size: no-op
  EXPECT_EQ(EISDIR, AttachedErrno(truncate(wal_dir, 0, 0).status()));
  // (a) a live lease of another mount blocks truncate(0).
  ASSERT_TRUE(OpenWrite(log, 2).ok());
  EXPECT_EQ(EBUSY, AttachedErrno(truncate(log, 0, 3).status()));
  ASSERT_TRUE(Seal(log, 2, 0, 0, true).ok());
  // (b) truncate(0) drops the segments and queues the replicas.
  auto truncated = truncate(log, 0, 3);
  ASSERT_TRUE(truncated.ok()) << truncated.status();
  EXPECT_EQ(0u, truncated->size());
  EXPECT_EQ(0, ns_->GetInode(log)->segments_size());
  EXPECT_EQ(std::vector<uint64_t>{segment_id}, Deletions(servers[0]));
  // (c) O_TRUNC on a WAL file does the same.
  WriteAndClose(log, 1, 70);
  auto reopened = OpenWrite(log, 1, /*truncate=*/true);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ(0u, reopened->attr().size());
  EXPECT_EQ(0, reopened->segments_size());
  ASSERT_TRUE(Seal(log, 1, 0, 0, true).ok());
  // (d) a block file with data is immutable.
  uint64_t sst = File(kRootIno, "sst");
  EXPECT_EQ(0u, truncate(sst, 0, 0)->size());  // empty block file: no-op
  WriteAndClose(sst, 1, 20);
  EXPECT_EQ(EPERM, AttachedErrno(truncate(sst, 0, 0).status()));
  EXPECT_EQ(EPERM, AttachedErrno(OpenWrite(sst, 1).status()));
  EXPECT_EQ(EPERM, AttachedErrno(OpenWrite(sst, 1, true).status()));
}

TEST_F(NamespaceTest, SealSegmentPlacesNewSegmentOnDistinctServers) {
  auto servers = RegisterServers(4);  // free space 1000, 2000, 3000, 4000
  uint64_t f = File(kRootIno, "f");
  ASSERT_TRUE(OpenWrite(f, 1).ok());
  auto first = Seal(f, 1, 0, 0, false);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(1, first->segments_size());
  const proto::Segment& s0 = first->segments(0);
  EXPECT_FALSE(s0.sealed());
  EXPECT_EQ(1u, s0.epoch());
  EXPECT_EQ(3u, s0.ack_quorum());
  ASSERT_EQ(3, s0.replicas_size());
  // Three distinct servers (free space within 1 GiB counts as a tie, and
  // ties rotate), addresses filled in.
  std::set<uint64_t> ids;
  for (const auto& r : s0.replicas()) {
    ids.insert(r.server_id());
    EXPECT_EQ(absl::StrCat("10.0.0.", r.server_id(), ":7000"), r.address());
  }
  EXPECT_EQ(3u, ids.size());
  // (a) errors: wrong segment, other mount, open segment not named.
  EXPECT_EQ(ESTALE, AttachedErrno(Seal(f, 1, s0.id() + 100, 5, false).status()));
  EXPECT_EQ(ESTALE, AttachedErrno(Seal(f, 1, 0, 0, false).status()));
  EXPECT_EQ(EBUSY, AttachedErrno(Seal(f, 2, s0.id(), 5, false).status()));
  // (b) seal at 100 and roll.
  auto second = Seal(f, 1, s0.id(), 100, false);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(2, second->segments_size());
  EXPECT_TRUE(second->segments(0).sealed());
  EXPECT_EQ(100u, second->segments(0).length());
  EXPECT_EQ(100u, second->segments(1).file_offset());
  EXPECT_NE(s0.id(), second->segments(1).id());
  EXPECT_EQ(100u, second->attr().size());
  uint64_t s1 = second->segments(1).id();
  // (c) only two servers stay alive: the block file's next segment goes on
  // both (kDegradedReplicasMin), acked by both.
  Advance(10001);
  Deletions(servers[0]);
  Deletions(servers[1]);
  auto third = Seal(f, 1, s1, 30, false);
  ASSERT_TRUE(third.ok()) << third.status();
  const proto::Segment& degraded = third->segments(third->segments_size() - 1);
  EXPECT_EQ(2, degraded.replicas_size());
  EXPECT_EQ(2u, degraded.ack_quorum());
  EXPECT_EQ(2u, ns_->StatFs()->live_servers());
  // (d) one alive: no new segment.
  Advance(10001);
  Deletions(servers[0]);
  auto fourth = Seal(f, 1, degraded.id(), 7, false);
  EXPECT_EQ(absl::StatusCode::kUnavailable, fourth.status().code());
  EXPECT_NE(std::string::npos, fourth.status().message().find("1 live")) << fourth.status();
  // The seal itself was recorded, and repeating it (here with close) is
  // answered, not refused with ESTALE.
  EXPECT_EQ(137u, ns_->GetAttr(f)->size());
  ASSERT_TRUE(Seal(f, 1, degraded.id(), 7, true).ok());
  EXPECT_FALSE(ns_->GetAttr(f)->open_for_write());
  EXPECT_EQ(1u, ns_->StatFs()->live_servers());
}

TEST_F(NamespaceTest, StateSurvivesReopen) {
  auto servers = RegisterServers(3);
  uint64_t d = Dir(kRootIno, "d");
  uint64_t f = File(d, "f");
  ASSERT_EQ(0, SetXattrErrno(f, "user.a", "b"));
  WriteAndClose(f, 1, 42);
  auto mount = ns_->NewMount();
  Reopen();
  EXPECT_EQ(d, LookupIno(kRootIno, "d"));
  EXPECT_EQ(f, LookupIno(d, "f"));
  EXPECT_EQ(42u, ns_->GetAttr(f)->size());
  EXPECT_EQ("b", Xattr(f, "user.a"));
  EXPECT_EQ(3u, ns_->GetAttr(kRootIno)->nlink());
  // Ids keep counting; servers keep their ids, count as live for one
  // dead_server_ms after the restart, and then only if they heartbeat.
  uint64_t g = File(kRootIno, "g");
  EXPECT_GT(g, f);
  EXPECT_GT(*ns_->NewMount(), *mount);
  EXPECT_EQ(3u, ns_->StatFs()->live_servers());
  Advance(10001);
  EXPECT_EQ(0u, ns_->StatFs()->live_servers());
  EXPECT_TRUE(Deletions(servers[0]).empty());
  EXPECT_EQ(1u, ns_->StatFs()->live_servers());
  proto::HeartbeatRequest unknown;
  unknown.set_server_id(999);
  EXPECT_TRUE(ns_->Heartbeat(unknown)->reregister());
  proto::RegisterServerRequest again;
  again.set_server_id(servers[2]);
  again.set_address("10.0.0.9:7001");
  EXPECT_EQ(servers[2], *ns_->RegisterServer(again));
  auto inode = ns_->GetInode(f);
  ASSERT_EQ(servers[2], inode->segments(0).replicas(0).server_id());
  EXPECT_EQ("10.0.0.9:7001", inode->segments(0).replicas(0).address());
}

TEST_F(NamespaceTest, OpenWriteRecoversDeadWritersSegment) {
  auto servers = RegisterServers(3);
  uint64_t f = 0;
  const proto::Segment seg = OpenWalSegment(&f);
  ASSERT_EQ(3, seg.replicas_size());
  ASSERT_EQ(2u, seg.ack_quorum());
  // Replica 0 has 100 durable bytes, replica 1 only 80, replica 2 is down.
  fake_.Put(seg.replicas(0).address(), seg.id(), 120, 100);
  fake_.Put(seg.replicas(1).address(), seg.id(), 80, 80);
  fake_.down.insert(seg.replicas(2).address());
  // (a) while mount 1's lease is live, mount 2 gets EBUSY and no recovery.
  EXPECT_EQ(EBUSY, AttachedErrno(OpenWrite(f, 2).status()));
  EXPECT_EQ(0, fake_.seal_calls);
  // (b) mount 1 dies; with only one replica reachable (fewer than
  // RF - AQ + 1 = 2) recovery refuses and changes nothing.
  Advance(60001);
  fake_.down.insert(seg.replicas(1).address());
  auto refused = OpenWrite(f, 2);
  EXPECT_EQ(absl::StatusCode::kUnavailable, refused.status().code()) << refused.status();
  EXPECT_FALSE(ns_->GetInode(f)->segments(0).sealed());
  EXPECT_FALSE(ns_->GetAttr(f)->open_for_write());
  // (c) two reachable: sealed at the longest durable length; the shorter
  // replica gets the sealed segment copied to it (its missing tail with
  // the rest); the unreachable one is dropped.
  fake_.down.erase(seg.replicas(1).address());
  auto recovered = OpenWrite(f, 2);
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  ASSERT_EQ(1, recovered->segments_size());
  const proto::Segment& sealed = recovered->segments(0);
  EXPECT_TRUE(sealed.sealed());
  EXPECT_EQ(100u, sealed.length());
  ASSERT_EQ(2, sealed.replicas_size());
  EXPECT_EQ(seg.replicas(0).server_id(), sealed.replicas(0).server_id());
  EXPECT_EQ(seg.replicas(0).address(), sealed.replicas(0).address());
  EXPECT_EQ(seg.replicas(1).server_id(), sealed.replicas(1).server_id());
  ASSERT_EQ(1u, fake_.copies.size());
  EXPECT_EQ(seg.replicas(1).address(), fake_.copies[0].target_address);
  EXPECT_EQ(std::vector<std::string>{seg.replicas(0).address()}, fake_.copies[0].source_addresses);
  EXPECT_EQ(100u, (fake_.replicas[{seg.replicas(1).address(), seg.id()}].length()));
  EXPECT_EQ(100u, recovered->attr().size());
  EXPECT_TRUE(recovered->attr().open_for_write());
  EXPECT_TRUE((fake_.replicas[{seg.replicas(0).address(), seg.id()}].sealed()));
  // (d) mount 2 now writes after the recovered bytes; the zombie cannot.
  for (uint64_t server : servers) Deletions(server);  // heartbeats: live again
  auto next = Seal(f, 2, 0, 0, false);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(100u, next->segments(1).file_offset());
  EXPECT_EQ(EBUSY, AttachedErrno(Seal(f, 1, seg.id(), 120, false).status()));
}

TEST_F(NamespaceTest, RollOnASmallClusterPlacesTheNextSegmentOnFewerReplicas) {
  RegisterServers(3);
  uint64_t f = 0;
  const proto::Segment seg = OpenWalSegment(&f);
  ASSERT_EQ(3, seg.replicas_size());
  // The writer rolls away from a failed replica: only 2 servers are left,
  // which is still the ack quorum of a WAL file.
  proto::SealSegmentRequest roll;
  roll.set_ino(f);
  roll.set_mount_id(1);
  roll.set_segment_id(seg.id());
  roll.set_sealed_length(100);
  roll.add_failed_servers(seg.replicas(2).server_id());
  auto rolled = ns_->SealSegment(roll);
  ASSERT_TRUE(rolled.ok()) << rolled.status();
  ASSERT_EQ(2, rolled->segments_size());
  const proto::Segment& next = rolled->segments(1);
  EXPECT_FALSE(next.sealed());
  EXPECT_EQ(2, next.replicas_size());
  EXPECT_EQ(2u, next.ack_quorum());
  for (const auto& r : next.replicas()) EXPECT_NE(seg.replicas(2).server_id(), r.server_id());
  // Below the ack quorum there is no segment: the writer gets the error.
  roll.set_segment_id(next.id());
  roll.set_sealed_length(0);
  roll.clear_failed_servers();
  roll.add_failed_servers(seg.replicas(2).server_id());
  roll.add_failed_servers(next.replicas(0).server_id());
  EXPECT_EQ(absl::StatusCode::kUnavailable, ns_->SealSegment(roll).status().code());
}

TEST_F(NamespaceTest, RecoveryNeverTakesItsLengthFromACorruptReplica) {
  RegisterServers(3);
  uint64_t f = 0;
  const proto::Segment seg = OpenWalSegment(&f);
  // Replica 0 claims the most bytes but a chunk of it failed its checksum.
  fake_.Put(seg.replicas(0).address(), seg.id(), 150, 150, /*corrupt=*/true);
  fake_.Put(seg.replicas(1).address(), seg.id(), 100, 100);
  fake_.Put(seg.replicas(2).address(), seg.id(), 100, 90);
  Advance(60001);
  auto recovered = OpenWrite(f, 2);
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  const proto::Segment& sealed = recovered->segments(0);
  EXPECT_EQ(100u, sealed.length());
  // The good replicas are kept; the corrupt one is replaced by a copy.
  EXPECT_EQ(3, sealed.replicas_size());
  ASSERT_EQ(1u, fake_.copies.size());
  EXPECT_EQ(seg.replicas(0).address(), fake_.copies[0].target_address);
  EXPECT_FALSE((fake_.replicas[{seg.replicas(0).address(), seg.id()}].corrupt()));
}

TEST_F(NamespaceTest, RecoveryNeedsEnoughAnswersThatAreNotCorrupt) {
  RegisterServers(3);
  uint64_t f = 0;
  const proto::Segment seg = OpenWalSegment(&f);
  // The acked bytes may be only on the corrupt replica and the silent one:
  // sealing at the third's shorter length would take them back.
  fake_.Put(seg.replicas(0).address(), seg.id(), 1000, 1000, /*corrupt=*/true);
  fake_.down.insert(seg.replicas(1).address());
  fake_.Put(seg.replicas(2).address(), seg.id(), 500, 500);
  Advance(60001);
  auto refused = OpenWrite(f, 2);
  EXPECT_EQ(absl::StatusCode::kUnavailable, refused.status().code()) << refused.status();
  EXPECT_EQ(0, fake_.seal_calls);
  EXPECT_TRUE(fake_.copies.empty());
  EXPECT_FALSE(ns_->GetInode(f)->segments(0).sealed());
}

TEST_F(NamespaceTest, TwoRecoveriesOfOneFileAtOnceBothSucceed) {
  // Goal: `logfs recover` while another recovery of the same file runs
  // (meta's own after a lapsed lease, or a second `logfs recover`) reports
  // the file recovered, not EBUSY "lease lost during recovery": the first
  // to finish seals the segment and drops the recovery's lease, which the
  // other then misses (found by PartitionFaultTest.WritingMountCutOffFrom-
  // EveryServer: the admin recover failed although the file was sealed).
  // Method: the first recovery is held at its first replica call while
  // the second runs to the end.
  RegisterServers(3);
  uint64_t f = 0;
  const proto::Segment seg = OpenWalSegment(&f);
  for (int r = 0; r < 3; ++r) fake_.Put(seg.replicas(r).address(), seg.id(), 100, 100);
  absl::Notification held, release;
  std::atomic<bool> first{true};
  fake_.before_info = [&] {
    if (first.exchange(false)) {
      held.Notify();
      release.WaitForNotification();
    }
  };
  absl::StatusOr<proto::Inode> slow;
  std::thread t([&] { slow = ns_->RecoverLease(f); });
  held.WaitForNotification();
  auto fast = ns_->RecoverLease(f);
  ASSERT_TRUE(fast.ok()) << fast.status();
  EXPECT_TRUE(fast->segments(0).sealed());
  release.Notify();
  t.join();
  ASSERT_TRUE(slow.ok()) << slow.status();
  EXPECT_TRUE(slow->segments(0).sealed());
  EXPECT_EQ(100u, slow->segments(0).length());
  EXPECT_EQ(100u, ns_->GetAttr(f)->size());
  // Nobody keeps a lease: another mount opens the file for write.
  EXPECT_TRUE(OpenWrite(f, 2).ok());
}

TEST_F(NamespaceTest, ARecoveredWriterNeverTakesItsLeaseBackEvenIfNothingChanged) {
  // Goal: once `logfs recover` revoked a writer's lease, that writer's
  // later seals are refused (EBUSY, which it turns into EIO), also when
  // recovery found nothing to seal: the writer had sealed its segment at a
  // flush and kept the lease, so the file is exactly as it left it (found
  // by a new user: the old writer went on writing after the recover).
  // Method: (a) mount 1 opens, writes a segment and seals it keeping the
  // lease; (b) recover; (c) mount 1 asks for its next segment as a writer
  // with nothing open does, with its view of the file; (d) a writer that
  // merely lost its lease (meta restarted) still takes it back.
  RegisterServers(3);
  uint64_t f = File(kRootIno, "f");
  ASSERT_EQ(0, SetXattrErrno(f, "user.logfs.kind", "wal"));
  // (a)
  auto opened = OpenWrite(f, 1);
  ASSERT_TRUE(opened.ok()) << opened.status();
  auto first = Seal(f, 1, 0, 0, false);
  ASSERT_TRUE(first.ok()) << first.status();
  proto::SealSegmentRequest flush;
  flush.set_ino(f);
  flush.set_mount_id(1);
  flush.set_segment_id(first->segments(0).id());
  flush.set_sealed_length(2);
  flush.set_keep_lease(true);
  flush.set_lease_epoch(opened->lease_epoch());
  ASSERT_TRUE(ns_->SealSegment(flush).ok());
  // (b)
  auto recovered = ns_->RecoverLease(f);
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_EQ(2u, recovered->attr().size());
  EXPECT_GT(recovered->lease_epoch(), opened->lease_epoch());
  // (c)
  proto::SealSegmentRequest next;
  next.set_ino(f);
  next.set_mount_id(1);
  next.set_sealed_file_length(2);
  next.set_lease_epoch(opened->lease_epoch());
  EXPECT_EQ(EBUSY, AttachedErrno(ns_->SealSegment(next).status()));
  EXPECT_FALSE(ns_->GetAttr(f)->open_for_write());
  EXPECT_EQ(1, ns_->GetInode(f)->segments_size());
  // (d) mount 2 opens it now; meta restarts (leases are in memory); the
  // same request from mount 2, with the epoch it opened with, is served.
  auto reopened = OpenWrite(f, 2);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  Reopen();
  next.set_mount_id(2);
  next.set_lease_epoch(reopened->lease_epoch());
  auto taken_back = ns_->SealSegment(next);
  ASSERT_TRUE(taken_back.ok()) << taken_back.status();
  EXPECT_EQ(2, taken_back->segments_size());
}

TEST_F(NamespaceTest, ALapsedLeaseIsNotGivenBackToItsMountAfterARecovery) {
  // Goal: a mount whose lease lapsed (its connection broke) gets it back
  // when it heartbeats again, unless the file was recovered meanwhile.
  RegisterServers(3);
  uint64_t f = 0;
  const proto::Segment seg = OpenWalSegment(&f);
  for (int r = 0; r < 3; ++r) fake_.Put(seg.replicas(r).address(), seg.id(), 100, 100);
  ns_->MountDisconnected(1);
  ASSERT_TRUE(ns_->ExpireMounts().ok());
  ASSERT_TRUE(ns_->RecoverLease(f).ok());
  ASSERT_TRUE(ns_->MountHeartbeat(1, {f}).ok());
  EXPECT_FALSE(ns_->GetAttr(f)->open_for_write());
  Advance(5001);
  ASSERT_TRUE(ns_->MountHeartbeat(1, {f}).ok());
  EXPECT_TRUE(ns_->TakeLapsedOpenFiles().empty());
  EXPECT_FALSE(ns_->GetAttr(f)->open_for_write());
  EXPECT_EQ(EBUSY, AttachedErrno(Seal(f, 1, seg.id(), 100, false).status()));
}

}  // namespace
}  // namespace logfs::meta

namespace logfs::meta {
namespace {

// The first SealSegment of a lease (nothing open) of `mount` on `ino`,
// asking to continue a last segment shorter than `below` bytes.
absl::StatusOr<proto::Inode> SealNext(Namespace& ns, uint64_t ino, uint64_t mount,
                                      uint64_t below) {
  proto::SealSegmentRequest request;
  request.set_ino(ino);
  request.set_mount_id(mount);
  request.set_continue_below_bytes(below);
  return ns.SealSegment(request);
}

TEST_F(NamespaceTest, AReopenedWalFileContinuesItsLastSegmentWhileItIsShortAndWhole) {
  // Goal: continue_below_bytes gives a WAL file's next writer its last
  // segment back open at epoch + 1 (same id, replicas and length) while
  // the segment is sealed, shorter than asked, on its full replica set of
  // live servers; else, and for block files, a new segment as before.
  auto servers = RegisterServers(4);
  uint64_t f = 0;
  const proto::Segment first = OpenWalSegment(&f);
  ASSERT_TRUE(Seal(f, 1, first.id(), 100, /*close=*/true).ok());
  // (a) continued: the last segment, open again.
  ASSERT_TRUE(OpenWrite(f, 2).ok());
  auto continued = SealNext(*ns_, f, 2, 1000);
  ASSERT_TRUE(continued.ok()) << continued.status();
  ASSERT_EQ(1, continued->segments_size());
  const proto::Segment& again = continued->segments(0);
  EXPECT_EQ(first.id(), again.id());
  EXPECT_FALSE(again.sealed());
  EXPECT_EQ(first.epoch() + 1, again.epoch());
  EXPECT_EQ(100u, again.length());
  EXPECT_EQ(3, again.replicas_size());
  EXPECT_EQ(100u, continued->attr().size());
  // (b) sealed again longer by its writer, closed: still one segment.
  auto closed = Seal(f, 2, first.id(), 150, /*close=*/true);
  ASSERT_TRUE(closed.ok()) << closed.status();
  ASSERT_EQ(1, closed->segments_size());
  EXPECT_TRUE(closed->segments(0).sealed());
  EXPECT_EQ(150u, closed->attr().size());
  // (c) not shorter than asked: a new segment after it.
  ASSERT_TRUE(OpenWrite(f, 1).ok());
  auto full = SealNext(*ns_, f, 1, 150);
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_EQ(2, full->segments_size());
  EXPECT_FALSE(full->segments(1).sealed());
  EXPECT_EQ(0u, full->segments(1).length());
  ASSERT_TRUE(Seal(f, 1, full->segments(1).id(), 10, /*close=*/true).ok());
  // (d) a replica's server dead: a new segment.
  Advance(10001);
  for (uint64_t s : servers) {
    if (s != closed->segments(0).replicas(0).server_id()) Deletions(s);  // heartbeats
  }
  auto last = ns_->GetInode(f);
  ASSERT_TRUE(last.ok());
  const proto::Segment tail = last->segments(1);
  ASSERT_TRUE(OpenWrite(f, 2).ok());
  auto survivor = SealNext(*ns_, f, 2, 1000);
  ASSERT_TRUE(survivor.ok()) << survivor.status();
  bool tail_on_dead = false;
  for (const auto& r : tail.replicas()) {
    tail_on_dead |= r.server_id() == closed->segments(0).replicas(0).server_id();
  }
  EXPECT_EQ(tail_on_dead ? 3 : 2, survivor->segments_size())
      << "continued only if every replica's server is live";
  // (e) block files never continue.
  uint64_t block = File(kRootIno, "b");
  ASSERT_TRUE(OpenWrite(block, 1).ok());
  auto placed = SealNext(*ns_, block, 1, 1000);
  ASSERT_TRUE(placed.ok()) << placed.status();
  proto::SealSegmentRequest flush;  // close(2) of a descriptor: sealed, lease kept
  flush.set_ino(block);
  flush.set_mount_id(1);
  flush.set_segment_id(placed->segments(0).id());
  flush.set_sealed_length(10);
  flush.set_keep_lease(true);
  ASSERT_TRUE(ns_->SealSegment(flush).ok());
  auto next = SealNext(*ns_, block, 1, 1000);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(2, next->segments_size());
}

}  // namespace
}  // namespace logfs::meta

// Namespace over group commit (docs/meta_ha.md "Group commit"): a change's
// call returns once it is durable, reads that answer clients see only
// durable changes and never wait for a sync, an answer decided on top of a
// staged change waits for it, and a create + close of an empty file is one
// durable change.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cerrno>
#include <thread>

#include "src/status/posix_error.h"
#include "tests/fakes/gated_journal.h"
#include "store/meta/namespace/namespace_fixture.h"

namespace logfs::meta {
namespace {

proto::CreateRequest CreateRequest(uint64_t parent, const std::string& name, uint64_t writer = 0) {
  proto::CreateRequest request;
  request.set_parent(parent);
  request.set_name(name);
  request.set_mode(S_IFREG | 0644);
  request.set_open_for_write_mount_id(writer);
  return request;
}

uint64_t Changes(MetadataDb& db) { return db.group_commit_stats().changes; }

TEST_F(NamespaceTest, AChangeIsVisibleToReadsOnlyOnceDurableAndReadsDoNotWaitForIt) {
  GatedJournal journal;
  db_->SetJournal(&journal);
  journal.Hold(true);
  absl::StatusOr<proto::Attr> created;
  std::thread creator([&] { created = ns_->Create(CreateRequest(kRootIno, "f")); });
  journal.AwaitHeldAppend();
  // Staged, not durable: lookups and listings answer at once without it.
  EXPECT_EQ(ENOENT, AttachedErrno(ns_->Lookup(kRootIno, "f").status()));
  auto page = ns_->Readdir(kRootIno, "");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(0, page->entries_size());
  // A change decided on top of it (EEXIST) waits for it to be durable.
  absl::StatusOr<proto::Attr> again;
  std::thread second([&] { again = ns_->Create(CreateRequest(kRootIno, "f")); });
  journal.Hold(false);
  creator.join();
  second.join();
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(EEXIST, AttachedErrno(again.status()));
  auto found = ns_->Lookup(kRootIno, "f");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(created->ino(), found->ino());
}

TEST_F(NamespaceTest, AFailedGroupFailsTheChangeAndLeavesNoTrace) {
  GatedJournal journal;
  db_->SetJournal(&journal);
  journal.Fail(absl::UnavailableError("etcd is gone"));
  auto created = ns_->Create(CreateRequest(kRootIno, "f"));
  EXPECT_FALSE(created.ok());
  EXPECT_EQ(ENOENT, AttachedErrno(ns_->Lookup(kRootIno, "f").status()));
  // Writes stay stopped (the replica steps down).
  EXPECT_FALSE(ns_->Create(CreateRequest(kRootIno, "g")).ok());
}

TEST_F(NamespaceTest, CreateForWriteTakesTheLeaseInTheCreatesOwnChange) {
  ASSERT_TRUE(ns_->NewMount().ok());  // mount 1
  const uint64_t before = Changes(*db_);
  auto opened = ns_->CreateForWrite(CreateRequest(kRootIno, "f", /*writer=*/1));
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(before + 1, Changes(*db_));
  EXPECT_TRUE(opened->attr().open_for_write());
  EXPECT_EQ(1u, opened->lease_epoch());
  const uint64_t f = opened->attr().ino();
  // Held as OpenWrite holds it: another mount gets EBUSY, this one writes.
  EXPECT_EQ(EBUSY, AttachedErrno(OpenWrite(f, 2).status()));
  auto segment = Seal(f, 1, 0, 0, /*close=*/false);
  EXPECT_TRUE(segment.ok() || absl::IsUnavailable(segment.status())) << segment.status();
  // Other types, and a create without a mount, are refused.
  proto::CreateRequest dir = CreateRequest(kRootIno, "d", 1);
  dir.set_mode(S_IFDIR | 0755);
  EXPECT_EQ(EINVAL, AttachedErrno(ns_->CreateForWrite(dir).status()));
  EXPECT_EQ(EINVAL, AttachedErrno(ns_->CreateForWrite(CreateRequest(kRootIno, "g")).status()));
  EXPECT_EQ(EINVAL, AttachedErrno(ns_->Create(CreateRequest(kRootIno, "g", 1)).status()));
}

TEST_F(NamespaceTest, ACreateForWriteRetriedAfterARestartGetsItsInodeAndLease) {
  ASSERT_TRUE(ns_->NewMount().ok());
  proto::CreateRequest request = CreateRequest(kRootIno, "f", 1);
  request.mutable_call()->set_mount_id(1);
  request.mutable_call()->set_seq(7);
  auto first = ns_->CreateForWrite(request);
  ASSERT_TRUE(first.ok()) << first.status();
  Reopen();  // leases are gone with the process
  auto retry = ns_->CreateForWrite(request);
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ(first->attr().ino(), retry->attr().ino());
  EXPECT_EQ(1u, retry->lease_epoch());
  EXPECT_EQ(EBUSY, AttachedErrno(OpenWrite(first->attr().ino(), 2).status()));
}

TEST_F(NamespaceTest, TheCloseOfAWriterThatChangedNothingIsNoDurableChange) {
  ASSERT_TRUE(ns_->NewMount().ok());
  auto opened = ns_->CreateForWrite(CreateRequest(kRootIno, "f", 1));
  ASSERT_TRUE(opened.ok()) << opened.status();
  const uint64_t f = opened->attr().ino();
  const uint64_t before = Changes(*db_);
  proto::SealSegmentRequest close;
  close.set_ino(f);
  close.set_mount_id(1);
  close.set_close(true);
  close.set_lease_epoch(opened->lease_epoch());
  close.set_unchanged(true);
  auto closed = ns_->SealSegment(close);
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_EQ(before, Changes(*db_));
  EXPECT_FALSE(closed->attr().open_for_write());
  EXPECT_EQ(opened->attr().mtime_ns(), closed->attr().mtime_ns());
  // The lease is gone: another mount opens it for write.
  EXPECT_TRUE(OpenWrite(f, 2).ok());
  // A close that changed something (an explicit mtime) is a change.
  close.set_mount_id(2);
  close.set_unchanged(false);
  close.set_mtime_ns(12345);
  close.set_lease_epoch(2);
  closed = ns_->SealSegment(close);
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_EQ(before + 2, Changes(*db_));  // OpenWrite's lease, then the close
  EXPECT_EQ(12345, closed->attr().mtime_ns());
}

TEST_F(NamespaceTest, AnOpenDoesNotPinAFileWhoseDeletionIsStaged) {
  const uint64_t f = File(kRootIno, "f");
  GatedJournal journal;
  db_->SetJournal(&journal);
  journal.Hold(true);
  absl::Status unlinked;
  std::thread unlinker([&] { unlinked = ns_->Unlink(kRootIno, "f", /*directory=*/false); });
  journal.AwaitHeldAppend();
  // The deletion is staged, not durable: the durable view still has the
  // inode, but an open must not pin it back to life.
  EXPECT_TRUE(ns_->GetAttr(f).ok());
  EXPECT_EQ(ESTALE, AttachedErrno(ns_->Open(f, 1).status()));
  journal.Hold(false);
  unlinker.join();
  ASSERT_TRUE(unlinked.ok()) << unlinked;
  EXPECT_EQ(ESTALE, AttachedErrno(ns_->GetAttr(f).status()));
}

TEST_F(NamespaceTest, ARetriedCreateForWriteDoesNotTakeBackALeaseThatMovedOn) {
  ASSERT_TRUE(ns_->NewMount().ok());
  proto::CreateRequest request = CreateRequest(kRootIno, "f", 1);
  request.mutable_call()->set_mount_id(1);
  request.mutable_call()->set_seq(9);
  auto first = ns_->CreateForWrite(request);
  ASSERT_TRUE(first.ok()) << first.status();
  Reopen();  // leases are gone; another mount opens the file for write
  ASSERT_TRUE(OpenWrite(first->attr().ino(), 2).ok());
  EXPECT_EQ(EBUSY, AttachedErrno(ns_->CreateForWrite(request).status()));
}

}  // namespace
}  // namespace logfs::meta

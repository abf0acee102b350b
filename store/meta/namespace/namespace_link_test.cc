// Hard links in meta (Namespace::Link): names counted in nlink, data kept
// until the last name and the last pin are gone, rename over a linked
// name, the errnos of link(2), a retried call applied once, and all of it
// after a restart.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cerrno>
#include <string>
#include <vector>

#include "src/status/posix_error.h"
#include "store/meta/namespace/namespace.h"
#include "store/meta/namespace/namespace_fixture.h"

namespace logfs::meta {
namespace {

class NamespaceLinkTest : public NamespaceTest {
 protected:
  absl::StatusOr<proto::Attr> Link(uint64_t ino, uint64_t new_parent, const std::string& name,
                                   uint64_t mount_id = 0, uint64_t seq = 0) {
    proto::LinkRequest request;
    request.set_ino(ino);
    request.set_new_parent(new_parent);
    request.set_new_name(name);
    request.mutable_call()->set_mount_id(mount_id);
    request.mutable_call()->set_seq(seq);
    return ns_->Link(request);
  }
  int LinkErrno(uint64_t ino, uint64_t new_parent, const std::string& name) {
    return AttachedErrno(Link(ino, new_parent, name).status());
  }
  uint32_t Nlink(uint64_t ino) {
    auto attr = ns_->GetAttr(ino);
    EXPECT_TRUE(attr.ok()) << attr.status();
    return attr.ok() ? attr->nlink() : 0;
  }
};

TEST_F(NamespaceLinkTest, ALinkIsASecondNameAndTheDataStaysUntilTheLastNameGoes) {
  auto servers = RegisterServers(3);
  const uint64_t dir = Dir(kRootIno, "d");
  const uint64_t f = File(kRootIno, "f");
  proto::Inode written = WriteAndClose(f, /*mount=*/1, 100);
  const uint64_t segment_id = written.segments(0).id();
  const int64_t dir_mtime = ns_->GetAttr(dir)->mtime_ns();
  Advance(5);

  auto linked = Link(f, dir, "g");
  ASSERT_TRUE(linked.ok()) << linked.status();
  EXPECT_EQ(f, linked->ino());
  EXPECT_EQ(2u, linked->nlink());
  EXPECT_EQ(100u, linked->size());
  EXPECT_EQ(f, LookupIno(dir, "g"));
  EXPECT_EQ(f, LookupIno(kRootIno, "f"));
  EXPECT_GT(ns_->GetAttr(dir)->mtime_ns(), dir_mtime);
  auto page = ns_->Readdir(dir, "");
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(1, page->entries_size());
  EXPECT_EQ("g", page->entries(0).name());
  EXPECT_EQ(f, page->entries(0).ino());

  // Unlinking one name keeps the inode, its data and the other name.
  ASSERT_TRUE(ns_->Unlink(kRootIno, "f", false).ok());
  EXPECT_EQ(0u, LookupIno(kRootIno, "f"));
  EXPECT_EQ(1u, Nlink(f));
  EXPECT_EQ(100u, ns_->GetAttr(f)->size());
  for (uint64_t server : servers) EXPECT_TRUE(Deletions(server).empty());

  // The last name queues the replicas for deletion, once each.
  ASSERT_TRUE(ns_->Unlink(dir, "g", false).ok());
  EXPECT_EQ(ESTALE, AttachedErrno(ns_->GetAttr(f).status()));
  for (uint64_t server : servers) {
    EXPECT_EQ(std::vector<uint64_t>{segment_id}, Deletions(server));
  }
}

TEST_F(NamespaceLinkTest, LinkRefusesAsLinkTwoDoes) {
  const uint64_t dir = Dir(kRootIno, "d");
  const uint64_t f = File(kRootIno, "f");
  File(kRootIno, "taken");
  EXPECT_EQ(EPERM, LinkErrno(dir, kRootIno, "dirlink"));
  EXPECT_EQ(EEXIST, LinkErrno(f, kRootIno, "taken"));
  EXPECT_EQ(EEXIST, LinkErrno(f, kRootIno, "f"));
  EXPECT_EQ(ENOTDIR, LinkErrno(f, f, "x"));
  EXPECT_EQ(ESTALE, LinkErrno(9999, kRootIno, "x"));
  EXPECT_EQ(ENAMETOOLONG, LinkErrno(f, kRootIno, std::string(format::kNameBytesMax + 1, 'n')));
  EXPECT_EQ(EINVAL, LinkErrno(f, kRootIno, "a/b"));
  EXPECT_EQ(1u, Nlink(f));

  // An unlinked file that is still open has nlink 0: no new name for it
  // (the VFS refuses linkat() of such an inode with ENOENT too).
  ASSERT_TRUE(ns_->Open(f, /*mount_id=*/7).ok());
  ASSERT_TRUE(ns_->Unlink(kRootIno, "f", false).ok());
  EXPECT_EQ(ENOENT, LinkErrno(f, kRootIno, "back"));
  EXPECT_EQ(0u, LookupIno(kRootIno, "back"));
}

TEST_F(NamespaceLinkTest, EveryTypeButADirectoryLinks) {
  const uint64_t symlink = Make(kRootIno, "s", S_IFLNK | 0777, "target");
  const uint64_t fifo = Make(kRootIno, "p", S_IFIFO | 0644);
  const uint64_t socket = Make(kRootIno, "k", S_IFSOCK | 0644);
  for (uint64_t ino : {symlink, fifo, socket}) {
    auto linked = Link(ino, kRootIno, "link" + std::to_string(ino));
    ASSERT_TRUE(linked.ok()) << linked.status();
    EXPECT_EQ(2u, linked->nlink());
  }
  EXPECT_EQ("target", *ns_->Readlink(LookupIno(kRootIno, "link" + std::to_string(symlink))));
}

TEST_F(NamespaceLinkTest, RenameOverALinkedNameDropsOneLink) {
  const uint64_t x = File(kRootIno, "x");
  const uint64_t y = File(kRootIno, "y");
  ASSERT_TRUE(Link(y, kRootIno, "y2").ok());
  // Two names of one inode: rename does nothing (POSIX), both stay.
  EXPECT_EQ(0, RenameErrno(kRootIno, "y", kRootIno, "y2"));
  EXPECT_EQ(y, LookupIno(kRootIno, "y"));
  EXPECT_EQ(y, LookupIno(kRootIno, "y2"));
  EXPECT_EQ(2u, Nlink(y));
  // Another file over one of them: that name now names it, the other stays.
  EXPECT_EQ(0, RenameErrno(kRootIno, "x", kRootIno, "y2"));
  EXPECT_EQ(x, LookupIno(kRootIno, "y2"));
  EXPECT_EQ(y, LookupIno(kRootIno, "y"));
  EXPECT_EQ(1u, Nlink(y));
  EXPECT_EQ(1u, Nlink(x));
}

TEST_F(NamespaceLinkTest, ARetriedLinkIsAppliedOnceAndLinksSurviveARestart) {
  const uint64_t f = File(kRootIno, "f");
  auto first = Link(f, kRootIno, "g", /*mount_id=*/3, /*seq=*/11);
  ASSERT_TRUE(first.ok()) << first.status();
  // The same call again (a reply lost, a meta failover): the recorded
  // answer, not EEXIST, and no third link.
  auto again = Link(f, kRootIno, "g", 3, 11);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(2u, again->nlink());
  EXPECT_EQ(2u, Nlink(f));

  Reopen();
  EXPECT_EQ(f, LookupIno(kRootIno, "f"));
  EXPECT_EQ(f, LookupIno(kRootIno, "g"));
  EXPECT_EQ(2u, Nlink(f));
  ASSERT_TRUE(ns_->Unlink(kRootIno, "f", false).ok());
  Reopen();
  EXPECT_EQ(1u, Nlink(f));
  EXPECT_EQ(f, LookupIno(kRootIno, "g"));
}

}  // namespace
}  // namespace logfs::meta

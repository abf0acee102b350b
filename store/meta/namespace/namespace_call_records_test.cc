// The table of applied changes (docs/rpc.md "Retries"): a change with a
// call id that meta applied is answered with its first reply when the same
// id comes again, also after meta reopened its database (a restart), and
// is never applied twice. Namespace over a real MetadataDb in a temp dir.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "src/status/posix_error.h"
#include "store/meta/namespace/namespace.h"
#include "store/meta/namespace/namespace_fixture.h"

namespace logfs::meta {
namespace {

constexpr uint64_t kMountId = 7;
constexpr uint32_t kRecordsPerMount = 8;

class NamespaceCallsTest : public NamespaceFixture {
 protected:
  void Configure(NamespaceOptions* options) override {
    options->call_records_per_mount = kRecordsPerMount;
    options->call_record_retention_ms = 60 * 60 * 1000;
  }

  static proto::CallId Call(uint64_t seq) {
    proto::CallId call;
    call.set_mount_id(kMountId);
    call.set_seq(seq);
    return call;
  }
  static proto::CreateRequest CreateRequest(const std::string& name, uint32_t mode,
                                            uint64_t seq) {
    proto::CreateRequest request;
    request.set_parent(kRootIno);
    request.set_name(name);
    request.set_mode(mode);
    *request.mutable_call() = Call(seq);
    return request;
  }
  static proto::RenameRequest RenameRequest(const std::string& from, const std::string& to,
                                            uint64_t seq) {
    proto::RenameRequest request;
    request.set_parent(kRootIno);
    request.set_name(from);
    request.set_new_parent(kRootIno);
    request.set_new_name(to);
    *request.mutable_call() = Call(seq);
    return request;
  }
  int Entries() {
    auto page = ns_->Readdir(kRootIno, "");  // these tests stay within one page
    EXPECT_TRUE(page.ok()) << page.status();
    EXPECT_TRUE(!page.ok() || !page->more());
    return page.ok() ? page->entries_size() : -1;
  }

};

TEST_F(NamespaceCallsTest, RetriedCreateAfterRestartGetsTheFirstReply) {
  // Goal: a create (O_EXCL, so a second one would be EEXIST) and a mkdir
  // that meta applied, retried with the same call id after meta reopened
  // its database, answer with the attr of what the first one made.
  auto file = ns_->Create(CreateRequest("f", S_IFREG | 0644, 1));
  ASSERT_TRUE(file.ok()) << file.status();
  auto dir = ns_->Create(CreateRequest("d", S_IFDIR | 0755, 2));
  ASSERT_TRUE(dir.ok()) << dir.status();
  Reopen();
  auto file_again = ns_->Create(CreateRequest("f", S_IFREG | 0644, 1));
  ASSERT_TRUE(file_again.ok()) << file_again.status();
  EXPECT_EQ(file->ino(), file_again->ino());
  EXPECT_EQ(file->mode(), file_again->mode());
  EXPECT_EQ(file->ctime_ns(), file_again->ctime_ns());
  auto dir_again = ns_->Create(CreateRequest("d", S_IFDIR | 0755, 2));
  ASSERT_TRUE(dir_again.ok()) << dir_again.status();
  EXPECT_EQ(dir->ino(), dir_again->ino());
  // Nothing was made twice; a new call id is a new create.
  EXPECT_EQ(2, Entries());
  auto root = ns_->GetAttr(kRootIno);
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(3u, root->nlink());  // one subdirectory
  EXPECT_EQ(EEXIST, AttachedErrno(ns_->Create(CreateRequest("f", S_IFREG | 0644, 3)).status()));
}

TEST_F(NamespaceCallsTest, RetriedRenameAndUnlinkAfterRestartSucceed) {
  // Goal: a rename whose source is gone because the first attempt moved it,
  // and an unlink whose name is gone because the first attempt removed it,
  // succeed on the retry instead of failing with ENOENT.
  ASSERT_TRUE(ns_->Create(CreateRequest("a", S_IFREG | 0644, 1)).ok());
  ASSERT_TRUE(ns_->Create(CreateRequest("x", S_IFREG | 0644, 2)).ok());
  ASSERT_TRUE(ns_->Rename(RenameRequest("a", "b", 3)).ok());
  ASSERT_TRUE(ns_->Unlink(kRootIno, "x", false, Call(4)).ok());
  Reopen();
  EXPECT_TRUE(ns_->Rename(RenameRequest("a", "b", 3)).ok());
  EXPECT_TRUE(ns_->Unlink(kRootIno, "x", false, Call(4)).ok());
  EXPECT_TRUE(ns_->Lookup(kRootIno, "b").ok());
  EXPECT_EQ(1, Entries());
  // Without the record (another call id) they fail as POSIX says.
  EXPECT_EQ(ENOENT, AttachedErrno(ns_->Rename(RenameRequest("a", "b", 5))));
  EXPECT_EQ(ENOENT, AttachedErrno(ns_->Unlink(kRootIno, "x", false, Call(6))));
}

TEST_F(NamespaceCallsTest, RetriedSetXattrCreateDoesNotFailWithEexist) {
  // Goal: setxattr(XATTR_CREATE) and removexattr, retried, keep their
  // first outcome (0) instead of EEXIST / ENODATA.
  auto file = ns_->Create(CreateRequest("f", S_IFREG | 0644, 1));
  ASSERT_TRUE(file.ok());
  proto::SetXattrRequest set;
  set.set_ino(file->ino());
  set.set_name("user.k");
  set.set_value("v");
  set.set_flags(1);  // XATTR_CREATE
  *set.mutable_call() = Call(2);
  ASSERT_TRUE(ns_->SetXattr(set).ok());
  Reopen();
  EXPECT_TRUE(ns_->SetXattr(set).ok());
  ASSERT_TRUE(ns_->RemoveXattr(file->ino(), "user.k", Call(3)).ok());
  EXPECT_TRUE(ns_->RemoveXattr(file->ino(), "user.k", Call(3)).ok());
  EXPECT_EQ(ENODATA, AttachedErrno(ns_->GetXattr(file->ino(), "user.k").status()));
}

TEST_F(NamespaceCallsTest, FailedChangeIsNotRecorded) {
  // Goal: a change that failed changed nothing and is not recorded, so its
  // retry runs afresh (here: succeeds once its cause is gone).
  EXPECT_EQ(ENOENT, AttachedErrno(ns_->Rename(RenameRequest("a", "b", 1))));
  ASSERT_TRUE(ns_->Create(CreateRequest("a", S_IFREG | 0644, 2)).ok());
  EXPECT_TRUE(ns_->Rename(RenameRequest("a", "b", 1)).ok());
  EXPECT_TRUE(ns_->Lookup(kRootIno, "b").ok());
}

TEST_F(NamespaceCallsTest, TableKeepsTheLastChangesOfEachMountAndExpiresOldOnes) {
  // Goal: the table is bounded: a mount's record goes once it has made
  // call_records_per_mount changes since, and every record once it is older
  // than call_record_retention_ms.
  for (uint64_t seq = 1; seq <= kRecordsPerMount + 1; ++seq) {
    ASSERT_TRUE(ns_->Create(CreateRequest("f" + std::to_string(seq), S_IFREG | 0644, seq)).ok());
  }
  // Call 1 is forgotten: its retry is a new create, EEXIST; call 2 is kept.
  EXPECT_EQ(EEXIST, AttachedErrno(ns_->Create(CreateRequest("f1", S_IFREG | 0644, 1)).status()));
  EXPECT_TRUE(ns_->Create(CreateRequest("f2", S_IFREG | 0644, 2)).ok());
  // An hour later everything is expired.
  now_ns_ += 60 * 60 * 1000 * kMs + 1;
  ASSERT_TRUE(ns_->ExpireCallRecords().ok());
  EXPECT_EQ(EEXIST, AttachedErrno(ns_->Create(CreateRequest("f2", S_IFREG | 0644, 2)).status()));
}

TEST_F(NamespaceCallsTest, CallIdOfAnotherTypeIsRefused) {
  // Goal: a call id reused for another kind of change (a client bug) is
  // refused rather than answered with the other change's reply.
  ASSERT_TRUE(ns_->Create(CreateRequest("a", S_IFREG | 0644, 1)).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(ns_->Rename(RenameRequest("a", "b", 1))));
  EXPECT_TRUE(ns_->Lookup(kRootIno, "a").ok());
}

}  // namespace
}  // namespace logfs::meta

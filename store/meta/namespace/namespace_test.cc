// Namespace over a real MetadataDb in a temp dir, with a fake clock and
// fake segment servers: the POSIX rules and exact errnos of docs/rpc.md,
// limits, pins, replaced files and leases.
#include "store/meta/namespace/namespace.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "src/status/posix_error.h"
#include "store/format/setattr_bits.h"
#include "store/meta/namespace/namespace_fixture.h"

namespace logfs::meta {
namespace {

TEST_F(NamespaceTest, RootIsABlockDirectory) {
  auto root = ns_->GetAttr(kRootIno);
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(static_cast<uint32_t>(S_IFDIR | 0755), root->mode());
  EXPECT_EQ(2u, root->nlink());
  EXPECT_EQ(proto::KIND_BLOCK, root->kind());
  EXPECT_EQ("block", Xattr(kRootIno, "user.logfs.kind"));
  EXPECT_EQ("3", Xattr(kRootIno, "user.logfs.ack_quorum"));
}

TEST_F(NamespaceTest, CreateLookupReaddir) {
  uint64_t b = File(kRootIno, "b");
  uint64_t a = Dir(kRootIno, "a");
  uint64_t c = Make(kRootIno, "c", S_IFLNK | 0777, "b");
  EXPECT_EQ(b, LookupIno(kRootIno, "b"));
  EXPECT_EQ(a, LookupIno(kRootIno, "a"));
  auto attr = ns_->Lookup(kRootIno, "b");
  EXPECT_EQ(static_cast<uint32_t>(S_IFREG | 0644), attr->mode());
  EXPECT_EQ(1000u, attr->uid());
  EXPECT_EQ(1u, attr->nlink());
  EXPECT_EQ(0u, attr->size());
  EXPECT_EQ(2u, ns_->GetAttr(a)->nlink());
  EXPECT_EQ(3u, ns_->GetAttr(kRootIno)->nlink());
  EXPECT_EQ("b", *ns_->Readlink(c));
  EXPECT_EQ(1u, ns_->GetAttr(c)->size());
  EXPECT_EQ(EINVAL, AttachedErrno(ns_->Readlink(b).status()));
  EXPECT_EQ(kRootIno, LookupIno(a, ".."));

  auto page = ns_->Readdir(kRootIno, "");
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(3, page->entries_size());
  EXPECT_FALSE(page->more());
  EXPECT_EQ("a", page->entries(0).name());
  EXPECT_EQ("b", page->entries(1).name());
  EXPECT_EQ("c", page->entries(2).name());
  EXPECT_EQ(b, page->entries(1).ino());
  EXPECT_TRUE(S_ISDIR(page->entries(0).mode()));

  EXPECT_EQ(EEXIST, CreateErrno(kRootIno, "b", S_IFREG | 0644));
  EXPECT_EQ(ENOENT, AttachedErrno(ns_->Lookup(kRootIno, "zz").status()));
  EXPECT_EQ(ENOTDIR, AttachedErrno(ns_->Lookup(b, "x").status()));
  EXPECT_EQ(ENOTDIR, CreateErrno(b, "x", S_IFREG | 0644));
  EXPECT_EQ(ENOTDIR, AttachedErrno(ns_->Readdir(b, "").status()));
  EXPECT_EQ(ESTALE, CreateErrno(999, "x", S_IFREG | 0644));  // no such directory inode
  EXPECT_EQ(ENAMETOOLONG, CreateErrno(kRootIno, std::string(256, 'n'), S_IFREG | 0644));
  EXPECT_EQ(ENAMETOOLONG, AttachedErrno(ns_->Lookup(kRootIno, std::string(256, 'n')).status()));
  EXPECT_EQ(0, CreateErrno(kRootIno, std::string(255, 'n'), S_IFREG | 0644));
  EXPECT_EQ(EINVAL, CreateErrno(kRootIno, "typeless", 0644));  // S_IFMT bits 0
  EXPECT_EQ(ESTALE, AttachedErrno(ns_->GetAttr(12345).status()));
}

// Goal: FIFOs, sockets and device nodes are inodes with a type, mode,
// owner and (device nodes) a device number, and nothing else: no kind, no
// logfs settings, no segments, no lease; xattrs, rename and unlink work as
// on a regular file. Method: create one of each in a WAL directory, then
// check their attributes, xattrs, OpenWrite's refusal, ListSegments (what
// fsck and re-replication walk), a rename over one and an unlink.
TEST_F(NamespaceTest, SpecialFilesAreMetadataOnly) {
  uint64_t wal = Dir(kRootIno, "wal");
  ASSERT_EQ(0, SetXattrErrno(wal, "user.logfs.kind", "wal"));
  const dev_t null_dev = makedev(1, 3);
  struct Special {
    std::string name;
    uint32_t mode;
    uint64_t rdev;
  };
  const std::vector<Special> specials = {{"fifo", S_IFIFO | 0640, 0},
                                         {"sock", S_IFSOCK | 0755, 0},
                                         {"chr", S_IFCHR | 0666, null_dev},
                                         {"blk", S_IFBLK | 0660, makedev(8, 1)}};
  std::vector<uint64_t> inos;
  for (const Special& s : specials) {
    proto::CreateRequest request;
    request.set_parent(wal);
    request.set_name(s.name);
    request.set_mode(s.mode);
    request.set_uid(1000);
    request.set_gid(100);
    request.set_rdev(s.rdev);
    auto attr = ns_->Create(request);
    ASSERT_TRUE(attr.ok()) << s.name << ": " << attr.status();
    SCOPED_TRACE(s.name);
    EXPECT_EQ(s.mode, attr->mode());
    EXPECT_EQ(s.rdev, attr->rdev());
    EXPECT_EQ(1u, attr->nlink());
    EXPECT_EQ(0u, attr->size());
    EXPECT_EQ(proto::KIND_UNSPECIFIED, attr->kind());
    EXPECT_EQ(1000u, attr->uid());
    inos.push_back(attr->ino());
    // Readdir's d_type comes from the entry's mode.
    auto page = ns_->Readdir(wal, "");
    ASSERT_TRUE(page.ok());
    bool listed = false;
    for (const auto& e : page->entries()) {
      if (e.name() == s.name) listed = e.mode() == s.mode && e.ino() == attr->ino();
    }
    EXPECT_TRUE(listed);
    // No logfs settings: not listed, not readable, not settable.
    auto names = ns_->ListXattr(attr->ino());
    ASSERT_TRUE(names.ok());
    EXPECT_TRUE(names->empty()) << absl::StrJoin(*names, ",");
    EXPECT_EQ(ENODATA, AttachedErrno(ns_->GetXattr(attr->ino(), "user.logfs.kind").status()));
    EXPECT_EQ(EPERM, SetXattrErrno(attr->ino(), "user.logfs.kind", "block"));
    EXPECT_EQ(0, SetXattrErrno(attr->ino(), "user.note", "special"));
    EXPECT_EQ("special", Xattr(attr->ino(), "user.note"));
    // Never a lease or a segment.
    EXPECT_EQ(EINVAL, AttachedErrno(OpenWrite(attr->ino(), 7).status()));
  }
  // POSIX ACLs are not supported on any inode (as a noacl mount).
  EXPECT_EQ(EOPNOTSUPP, SetXattrErrno(wal, "system.posix_acl_access", std::string(28, 'a')));
  EXPECT_EQ(EOPNOTSUPP,
            AttachedErrno(ns_->GetXattr(inos[0], "system.posix_acl_default").status()));
  // Only a device node has a device number.
  proto::CreateRequest fifo_with_rdev;
  fifo_with_rdev.set_parent(wal);
  fifo_with_rdev.set_name("fifo2");
  fifo_with_rdev.set_mode(S_IFIFO | 0644);
  fifo_with_rdev.set_rdev(null_dev);
  EXPECT_EQ(EINVAL, AttachedErrno(ns_->Create(fifo_with_rdev).status()));
  // ListSegments (fsck, re-replication) walks regular files only.
  uint64_t file = File(wal, "log");
  auto listed = ns_->ListSegments(0, 1000);
  ASSERT_TRUE(listed.ok());
  std::vector<uint64_t> files;
  for (const auto& f : listed->files()) files.push_back(f.attr().ino());
  EXPECT_EQ(std::vector<uint64_t>{file}, files);
  // A FIFO renamed over a socket replaces it; then both go by unlink.
  ASSERT_EQ(0, RenameErrno(wal, "fifo", wal, "sock"));
  EXPECT_EQ(inos[0], LookupIno(wal, "sock"));
  EXPECT_EQ(ESTALE, AttachedErrno(ns_->GetAttr(inos[1]).status()));
  ASSERT_TRUE(ns_->Unlink(wal, "sock", false).ok());
  EXPECT_EQ(ESTALE, AttachedErrno(ns_->GetAttr(inos[0]).status()));
  EXPECT_EQ(ENOTDIR, AttachedErrno(ns_->Unlink(wal, "chr", true)));
  ASSERT_TRUE(ns_->Unlink(wal, "chr", false).ok());
  EXPECT_EQ(0u, LookupIno(wal, "chr"));
  EXPECT_EQ(inos[3], LookupIno(wal, "blk"));
}


// Goal: Readdir pages through a directory larger than one page, and its
// "start after this name" cursor survives changes between pages, as
// `rm -rf` (which unlinks while it lists) needs. Method: (a) fill the
// root with one page and a half; (b) read page 1; (c) delete its last name
// (the cursor), a name of page 2 and one of page 1, add a name before the
// cursor and one after; (d) page 2 starts right after the cursor and holds
// every other later name once, the new later one included.
TEST_F(NamespaceTest, ReaddirPagesWithStableCursorAcrossDeletes) {
  constexpr int kFiles = static_cast<int>(format::kReaddirPageEntriesMax) * 3 / 2;
  auto name = [](int i) {
    char buf[16];
    snprintf(buf, sizeof(buf), "f%05d", i);
    return std::string(buf);
  };
  // (a)
  for (int i = 0; i < kFiles; ++i) ASSERT_NE(0u, File(kRootIno, name(i))) << i;
  // (b)
  auto first = ns_->Readdir(kRootIno, "");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(static_cast<int>(format::kReaddirPageEntriesMax), first->entries_size());
  EXPECT_TRUE(first->more());
  EXPECT_GE(format::kMaxMessageBytes, first->ByteSizeLong());
  for (int i = 0; i < first->entries_size(); ++i) ASSERT_EQ(name(i), first->entries(i).name());
  const std::string cursor = first->entries(first->entries_size() - 1).name();
  const int next = first->entries_size();  // index of the first name of page 2
  // (c)
  ASSERT_TRUE(ns_->Unlink(kRootIno, cursor, false).ok());
  ASSERT_TRUE(ns_->Unlink(kRootIno, name(next + 10), false).ok());
  ASSERT_TRUE(ns_->Unlink(kRootIno, name(3), false).ok());
  File(kRootIno, "e-before");
  File(kRootIno, "g-after");
  // (d)
  auto second = ns_->Readdir(kRootIno, cursor);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->more());
  std::vector<std::string> expected;
  for (int i = next; i < kFiles; ++i) {
    if (i != next + 10) expected.push_back(name(i));
  }
  expected.push_back("g-after");
  std::vector<std::string> got;
  for (const auto& entry : second->entries()) got.push_back(entry.name());
  EXPECT_EQ(expected, got);
  // A cursor past every name: an empty last page.
  auto past = ns_->Readdir(kRootIno, "zzz");
  ASSERT_TRUE(past.ok());
  EXPECT_EQ(0, past->entries_size());
  EXPECT_FALSE(past->more());
}

// Goal: a page is also bounded in bytes. Method: 255-byte names, enough
// that kReaddirPageEntriesMax of them exceed kReaddirPageBytesMax; the
// first page stops at the byte budget and the second holds the rest.
TEST_F(NamespaceTest, ReaddirPageIsBoundedInBytes) {
  const int files = static_cast<int>(format::kReaddirPageBytesMax / 255) + 10;
  ASSERT_LT(static_cast<size_t>(files), format::kReaddirPageEntriesMax);
  auto name = [](int i) {
    std::string n = std::to_string(100000 + i);
    n.resize(255, 'x');
    return n;
  };
  for (int i = 0; i < files; ++i) ASSERT_NE(0u, File(kRootIno, name(i))) << i;
  auto first = ns_->Readdir(kRootIno, "");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->more());
  EXPECT_LT(first->entries_size(), files);
  EXPECT_GE(format::kReaddirPageBytesMax + 64, first->ByteSizeLong());
  auto second = ns_->Readdir(kRootIno, first->entries(first->entries_size() - 1).name());
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->more());
  EXPECT_EQ(files, first->entries_size() + second->entries_size());
}

// Goal: a file's segment list is bounded in bytes, so every reply with the
// inode fits in a frame; the roll past the bound fails with EFBIG and keeps
// what was written; truncate(0) of a WAL empties the list. Method: with a
// 32 KiB budget (the default is kInodeReplyBytesMax), (a) roll a WAL file,
// one byte per segment, until a roll fails; (b) it failed with EFBIG, with
// the last segment sealed and the reply within the budget; (c) OpenWrite
// with truncate, then a new segment opens.
TEST_F(NamespaceTest, SegmentsPerFileAreBoundedWithEfbig) {
  inode_reply_bytes_max_ = 32 << 10;
  Reopen();
  RegisterServers(3);
  uint64_t ino = 0;
  proto::Segment open = OpenWalSegment(&ino);
  // (a)
  absl::Status rolled_status;
  size_t segments = 1;
  for (; segments < 10000; ++segments) {
    auto rolled = Seal(ino, 1, open.id(), 1, /*close=*/false);
    if (!rolled.ok()) {
      rolled_status = rolled.status();
      break;
    }
    open = rolled->segments(rolled->segments_size() - 1);
  }
  ASSERT_GT(segments, 100u);
  auto full = ns_->GetInode(ino);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(static_cast<int>(segments), full->segments_size());
  EXPECT_GE(32u << 10, full->ByteSizeLong());
  EXPECT_EQ(EFBIG, AttachedErrno(rolled_status)) << rolled_status;
  // (b)
  EXPECT_TRUE(full->segments(full->segments_size() - 1).sealed());
  EXPECT_EQ(segments, full->attr().size());
  EXPECT_EQ(EFBIG, AttachedErrno(Seal(ino, 1, 0, 0, /*close=*/false).status()));
  ASSERT_TRUE(Seal(ino, 1, 0, 0, /*close=*/true).ok());
  // (c)
  ASSERT_TRUE(OpenWrite(ino, 1, /*truncate=*/true).ok());
  auto reopened = Seal(ino, 1, 0, 0, /*close=*/false);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ(1, reopened->segments_size());
}

// Goal: an inode's xattrs are bounded, so listxattr fits XATTR_LIST_MAX
// and the inode stays small: ENOSPC past either bound, as ext4 does.
// Method: (a) many long names until ENOSPC, the listed names within
// 64 KiB; (b) values of 64 KiB until ENOSPC; replacing one with a value
// of the same size still works, and removing one makes room.
TEST_F(NamespaceTest, XattrsPerInodeAreBoundedWithEnospc) {
  uint64_t names_file = File(kRootIno, "names");
  // (a)
  int added = 0;
  int last = 0;
  for (int i = 0; i < 1000 && last == 0; ++i) {
    std::string name = "user.n" + std::to_string(1000 + i);
    name.resize(format::kXattrNameBytesMax, 'x');
    last = SetXattrErrno(names_file, name, "v");
    if (last == 0) ++added;
  }
  EXPECT_EQ(ENOSPC, last);
  EXPECT_LT(200, added);
  auto names = ns_->ListXattr(names_file);
  ASSERT_TRUE(names.ok());
  size_t list_bytes = 0;
  for (const auto& name : *names) list_bytes += name.size() + 1;
  EXPECT_GE(format::kXattrListBytesMax, list_bytes);
  EXPECT_LT(format::kXattrListBytesMax - format::kXattrNameBytesMax - 1, list_bytes);
  // (b)
  uint64_t values_file = File(kRootIno, "values");
  const std::string value(format::kXattrValueBytesMax, 'v');
  const size_t fit = format::kXattrBytesPerInodeMax / (format::kXattrValueBytesMax + 8);
  for (size_t i = 0; i < fit; ++i) {
    ASSERT_EQ(0, SetXattrErrno(values_file, "user.v" + std::to_string(i), value)) << i;
  }
  EXPECT_EQ(ENOSPC, SetXattrErrno(values_file, "user.v" + std::to_string(fit), value));
  EXPECT_EQ(0,
            SetXattrErrno(values_file, "user.v0", std::string(format::kXattrValueBytesMax, 'w')));
  ASSERT_TRUE(ns_->RemoveXattr(values_file, "user.v0").ok());
  EXPECT_EQ(0, SetXattrErrno(values_file, "user.v" + std::to_string(fit), value));
  // Replies with the inode leave xattrs out (GetXattr serves them).
  auto inode = ns_->GetInode(values_file);
  ASSERT_TRUE(inode.ok());
  EXPECT_EQ(0u, inode->xattrs().size());
  EXPECT_EQ(std::string(format::kXattrValueBytesMax, 'v'), Xattr(values_file, "user.v1"));
}

// Goal: ListServers pages, and server addresses are bounded (they are in
// every segment meta returns). Method: (a) a too long address: EINVAL;
// (b) one page and a bit of servers list in two pages, each once.
TEST_F(NamespaceTest, ListServersPagesAndAddressesAreBounded) {
  // (a)
  proto::RegisterServerRequest long_address;
  long_address.set_address(std::string(format::kServerAddressBytesMax + 1, 'a'));
  EXPECT_EQ(EINVAL, AttachedErrno(ns_->RegisterServer(long_address).status()));
  // (b)
  const int servers = static_cast<int>(format::kListServersPageMax) + 5;
  std::vector<uint64_t> ids = RegisterServers(servers);
  auto first = ns_->ListServers(0);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(static_cast<int>(format::kListServersPageMax), first->servers_size());
  ASSERT_NE(0u, first->next_server_id());
  auto second = ns_->ListServers(first->next_server_id());
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(0u, second->next_server_id());
  std::vector<uint64_t> listed;
  for (const auto& s : first->servers()) listed.push_back(s.server_id());
  for (const auto& s : second->servers()) listed.push_back(s.server_id());
  EXPECT_EQ(ids, listed);
}
TEST_F(NamespaceTest, ClearSetIdClearsSetUidAndGroupExecutableSetGidOfRegularFiles) {
  // The mode meta has now decides, not the caller's copy (issue 34 item 6).
  const auto mode_after_clear = [&](uint64_t ino, uint32_t mode) {
    proto::SetAttrRequest chmod;
    chmod.set_ino(ino);
    chmod.set_to_set(format::kSetAttrMode);
    chmod.set_mode(mode);
    EXPECT_TRUE(ns_->SetAttr(chmod).ok());
    proto::SetAttrRequest clear;
    clear.set_ino(ino);
    clear.set_clear_set_id(true);
    auto attr = ns_->SetAttr(clear);
    EXPECT_TRUE(attr.ok()) << attr.status();
    return attr.ok() ? attr->mode() & 07777 : 0xffffffffu;
  };
  const uint64_t file = File(kRootIno, "f");
  EXPECT_EQ(0777u, mode_after_clear(file, 06777));
  EXPECT_EQ(0755u, mode_after_clear(file, 04755));
  EXPECT_EQ(02767u, mode_after_clear(file, 06767));  // S_ISGID without S_IXGRP stays
  EXPECT_EQ(0644u, mode_after_clear(file, 0644));
  const uint64_t dir = Dir(kRootIno, "d");
  EXPECT_EQ(02775u, mode_after_clear(dir, 02775)) << "a directory's S_ISGID is inheritance";
}

TEST_F(NamespaceTest, RmdirOfNonEmptyDirFailsWithEnotempty) {
  uint64_t a = Dir(kRootIno, "a");
  File(a, "f");
  EXPECT_EQ(ENOTEMPTY, AttachedErrno(ns_->Unlink(kRootIno, "a", true)));
  EXPECT_EQ(EISDIR, AttachedErrno(ns_->Unlink(kRootIno, "a", false)));
  EXPECT_EQ(ENOTDIR, AttachedErrno(ns_->Unlink(a, "f", true)));
  EXPECT_EQ(ENOENT, AttachedErrno(ns_->Unlink(a, "nope", false)));
  ASSERT_TRUE(ns_->Unlink(a, "f", false).ok());
  ASSERT_TRUE(ns_->Unlink(kRootIno, "a", true).ok());
  EXPECT_EQ(2u, ns_->GetAttr(kRootIno)->nlink());
  EXPECT_EQ(ENOENT, AttachedErrno(ns_->Lookup(kRootIno, "a").status()));
  EXPECT_EQ(ESTALE, AttachedErrno(ns_->GetAttr(a).status()));
}

TEST_F(NamespaceTest, RenameReplacesAtomicallyAndFollowsTheRules) {
  // (a) file over file: the target's inode goes, the source keeps its ino.
  uint64_t x = File(kRootIno, "x");
  uint64_t y = File(kRootIno, "y");
  ASSERT_EQ(0, RenameErrno(kRootIno, "x", kRootIno, "y"));
  EXPECT_EQ(x, LookupIno(kRootIno, "y"));
  EXPECT_EQ(0u, LookupIno(kRootIno, "x"));
  EXPECT_EQ(ESTALE, AttachedErrno(ns_->GetAttr(y).status()));
  // (b) the errnos.
  uint64_t d = Dir(kRootIno, "d");
  uint64_t e = Dir(kRootIno, "e");
  uint64_t sub = Dir(d, "sub");
  File(e, "inside");
  EXPECT_EQ(EISDIR, RenameErrno(kRootIno, "y", kRootIno, "d"));
  EXPECT_EQ(ENOTDIR, RenameErrno(kRootIno, "d", kRootIno, "y"));
  EXPECT_EQ(ENOTEMPTY, RenameErrno(kRootIno, "d", kRootIno, "e"));
  EXPECT_EQ(EINVAL, RenameErrno(kRootIno, "d", sub, "loop"));
  EXPECT_EQ(EINVAL, RenameErrno(kRootIno, "d", d, "self"));
  EXPECT_EQ(EEXIST, RenameErrno(kRootIno, "y", e, "inside", /*RENAME_NOREPLACE=*/1));
  EXPECT_EQ(EINVAL, RenameErrno(kRootIno, "y", kRootIno, "z", /*RENAME_EXCHANGE=*/2));
  EXPECT_EQ(ENOENT, RenameErrno(kRootIno, "missing", kRootIno, "z"));
  EXPECT_EQ(0, RenameErrno(kRootIno, "y", kRootIno, "y"));
  EXPECT_EQ(x, LookupIno(kRootIno, "y"));
  // (c) a directory over an empty directory, across parents: link counts
  // and ".." follow.
  uint64_t empty = Dir(e, "empty");
  EXPECT_EQ(3u, ns_->GetAttr(d)->nlink());
  EXPECT_EQ(3u, ns_->GetAttr(e)->nlink());
  ASSERT_EQ(0, RenameErrno(d, "sub", e, "empty"));
  EXPECT_EQ(sub, LookupIno(e, "empty"));
  EXPECT_EQ(ESTALE, AttachedErrno(ns_->GetAttr(empty).status()));
  EXPECT_EQ(2u, ns_->GetAttr(d)->nlink());
  EXPECT_EQ(3u, ns_->GetAttr(e)->nlink());
  EXPECT_EQ(e, LookupIno(sub, ".."));
  // (d) a move of a directory into a sibling.
  ASSERT_EQ(0, RenameErrno(kRootIno, "d", e, "d2"));
  EXPECT_EQ(4u, ns_->GetAttr(e)->nlink());
  EXPECT_EQ(3u, ns_->GetAttr(kRootIno)->nlink());
}

TEST_F(NamespaceTest, UnlinkOfPinnedFileKeepsItUntilRelease) {
  auto servers = RegisterServers(3);
  uint64_t f = File(kRootIno, "f");
  proto::Inode written = WriteAndClose(f, /*mount=*/1, 100);
  uint64_t segment_id = written.segments(0).id();
  ASSERT_TRUE(ns_->Open(f, /*mount_id=*/7).ok());
  ASSERT_TRUE(ns_->Unlink(kRootIno, "f", false).ok());
  // (a) gone from the directory, but the inode and its data stay.
  EXPECT_EQ(0u, LookupIno(kRootIno, "f"));
  auto attr = ns_->GetAttr(f);
  ASSERT_TRUE(attr.ok());
  EXPECT_EQ(0u, attr->nlink());
  EXPECT_EQ(100u, attr->size());
  EXPECT_TRUE(Deletions(servers[0]).empty());
  // (b) the last release deletes it and queues each replica once.
  ASSERT_TRUE(ns_->Release(f, 7).ok());
  EXPECT_EQ(ESTALE, AttachedErrno(ns_->GetAttr(f).status()));
  for (uint64_t server : servers) {
    EXPECT_EQ(std::vector<uint64_t>{segment_id}, Deletions(server));
    EXPECT_TRUE(Deletions(server).empty());
  }
}

TEST_F(NamespaceTest, AReplacedFileStaysOpenableForTheGraceThenGoesStale) {
  // Goal: a kernel that looked a name up just before a rename replaced it
  // opens the old inode an instant later; within unlinked_grace_ms meta
  // still has it (nlink 0), after that it is ESTALE and its replicas go.
  unlinked_grace_ms_ = 2000;
  Reopen();
  auto servers = RegisterServers(3);
  uint64_t x = File(kRootIno, "x");
  uint64_t y = File(kRootIno, "y");
  uint64_t segment_id = WriteAndClose(y, /*mount=*/1, 10).segments(0).id();
  ASSERT_EQ(0, RenameErrno(kRootIno, "x", kRootIno, "y"));
  EXPECT_EQ(x, LookupIno(kRootIno, "y"));
  // (a) within the grace: the old inode opens and reads as before.
  auto old_attr = ns_->GetAttr(y);
  ASSERT_TRUE(old_attr.ok()) << old_attr.status();
  EXPECT_EQ(0u, old_attr->nlink());
  EXPECT_EQ(10u, old_attr->size());
  ASSERT_TRUE(ns_->Open(y, 7).ok());
  EXPECT_TRUE(Deletions(servers[0]).empty());
  // (b) past the grace, still pinned: kept until the release.
  Advance(2001);
  ASSERT_TRUE(ns_->ExpireMounts().ok());
  ASSERT_TRUE(ns_->GetAttr(y).ok());
  ASSERT_TRUE(ns_->Release(y, 7).ok());
  EXPECT_EQ(ESTALE, AttachedErrno(ns_->GetAttr(y).status()));
  EXPECT_EQ(std::vector<uint64_t>{segment_id}, Deletions(servers[0]));
  // (c) unpinned: gone at the first expiry pass after the grace.
  ASSERT_TRUE(ns_->Unlink(kRootIno, "y", false).ok());
  ASSERT_TRUE(ns_->GetAttr(x).ok());
  Advance(1000);
  ASSERT_TRUE(ns_->ExpireMounts().ok());
  ASSERT_TRUE(ns_->GetAttr(x).ok());
  Advance(1001);
  ASSERT_TRUE(ns_->ExpireMounts().ok());
  EXPECT_EQ(ESTALE, AttachedErrno(ns_->GetAttr(x).status()));
}

TEST_F(NamespaceTest, ALapsedLeaseGoesBackToALiveMountElseMetaRecoversTheFile) {
  // Goal: meta recovers the file of a writer whose mount died, but not of
  // one whose connection merely broke. Method: (a) two mounts each open a
  // segment of a file; (b) both connections close and an expiry pass drops
  // both leases; (c) mount 1 heartbeats again; (d) past
  // lease_recovery_delay_ms only mount 2's file is handed out for recovery,
  // and mount 1 holds its lease again, so its next seal works.
  RegisterServers(3);
  // (a)
  uint64_t live = File(kRootIno, "live");
  uint64_t dead = File(kRootIno, "dead");
  ASSERT_TRUE(OpenWrite(live, 1).ok());
  ASSERT_TRUE(OpenWrite(dead, 2).ok());
  auto live_segment = Seal(live, 1, 0, 0, false);
  ASSERT_TRUE(live_segment.ok()) << live_segment.status();
  ASSERT_TRUE(Seal(dead, 2, 0, 0, false).ok());
  // (b)
  ns_->MountDisconnected(1);
  ns_->MountDisconnected(2);
  ASSERT_TRUE(ns_->ExpireMounts().ok());
  EXPECT_FALSE(ns_->GetAttr(live)->open_for_write());
  EXPECT_TRUE(ns_->TakeLapsedOpenFiles().empty());  // not yet due
  // (c)
  ASSERT_TRUE(ns_->MountHeartbeat(1).ok());
  // (d)
  Advance(5001);
  ASSERT_TRUE(ns_->MountHeartbeat(1).ok());
  EXPECT_EQ(std::vector<uint64_t>{dead}, ns_->TakeLapsedOpenFiles());
  EXPECT_TRUE(ns_->GetAttr(live)->open_for_write());
  EXPECT_FALSE(ns_->GetAttr(dead)->open_for_write());
  const uint64_t open_id = live_segment->segments(0).id();
  EXPECT_TRUE(Seal(live, 1, open_id, 10, /*close=*/true).ok());
  EXPECT_TRUE(ns_->TakeLapsedOpenFiles().empty());  // each handed out once
}

TEST_F(NamespaceTest, AServerOfAnotherClusterIsRefused) {
  // A server whose data dir names another cluster (meta lost its database,
  // or the wrong --meta) must not join; a new one, or one of this cluster,
  // may. The cluster id survives a restart.
  const uint64_t cluster = ns_->cluster_id();
  ASSERT_NE(0u, cluster);
  proto::RegisterServerRequest request;
  request.set_address("10.0.0.9:7000");
  request.set_cluster_id(cluster + 1);
  auto refused = ns_->RegisterServer(request);
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, refused.status().code());
  EXPECT_NE(std::string::npos, refused.status().message().find("belongs to cluster"));
  request.set_cluster_id(0);
  EXPECT_TRUE(ns_->RegisterServer(request).ok());
  request.set_cluster_id(cluster);
  EXPECT_TRUE(ns_->RegisterServer(request).ok());
  Reopen();
  EXPECT_EQ(cluster, ns_->cluster_id());
}

}  // namespace
}  // namespace logfs::meta

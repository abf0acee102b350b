// Namespace over a real MetadataDb in a temp dir, with a fake clock and
// fake segment servers: the POSIX rules and exact errnos of docs/rpc.md,
// pins and orphans, leases, placement, reopen, and recovery of a dead
// writer's open segment.
#include "store/meta/namespace.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "src/status/posix_error.h"

namespace logfs::meta {
namespace {

constexpr int64_t kMs = 1000 * 1000;

// Replicas in memory, with Seal semantics of docs/rpc.md; servers listed
// in `down` do not answer.
class FakeSegmentServers : public SegmentServerApi {
 public:
  absl::StatusOr<proto::SegmentInfoResponse> SegmentInfo(const std::string& address,
                                                         uint64_t segment_id) override {
    absl::MutexLock lock(&mu_);
    if (down.count(address)) return absl::UnavailableError("down");
    auto it = replicas.find({address, segment_id});
    if (it == replicas.end()) return absl::NotFoundError("no replica");
    return it->second;
  }
  absl::StatusOr<proto::SegmentInfoResponse> Seal(const std::string& address,
                                                  uint64_t segment_id, uint64_t epoch,
                                                  uint64_t length) override {
    absl::MutexLock lock(&mu_);
    ++seal_calls;
    if (down.count(address)) return absl::UnavailableError("down");
    auto it = replicas.find({address, segment_id});
    if (it == replicas.end()) return absl::NotFoundError("no replica");
    proto::SegmentInfoResponse& info = it->second;
    if (length > info.length()) return absl::OutOfRangeError("short");
    if (info.sealed() && info.length() != length) return absl::FailedPreconditionError("sealed");
    info.set_sealed(true);
    info.set_length(length);
    info.set_durable_length(length);
    return info;
  }
  // CopySegment: the target gets the first source's replica if that one
  // is sealed at the task's length.
  std::vector<absl::Status> CopySegments(const std::vector<RereplicationTask>& tasks,
                                         absl::Duration) override {
    absl::MutexLock lock(&mu_);
    std::vector<absl::Status> out;
    for (const auto& task : tasks) {
      copies.push_back(task);
      auto source = task.source_addresses.empty()
                        ? replicas.end()
                        : replicas.find({task.source_addresses[0], task.segment_id});
      if (down.count(task.target_address) || source == replicas.end() ||
          !source->second.sealed() || source->second.length() != task.length) {
        out.push_back(absl::UnavailableError("copy failed"));
        continue;
      }
      proto::SegmentInfoResponse copy = source->second;
      copy.set_epoch(task.epoch);
      copy.set_corrupt(false);
      replicas[{task.target_address, task.segment_id}] = copy;
      out.push_back(absl::OkStatus());
    }
    return out;
  }
  void Put(const std::string& address, uint64_t segment_id, uint64_t length,
           uint64_t durable_length, bool corrupt = false) {
    absl::MutexLock lock(&mu_);
    proto::SegmentInfoResponse& info = replicas[{address, segment_id}];
    info.set_segment_id(segment_id);
    info.set_epoch(1);
    info.set_length(length);
    info.set_durable_length(durable_length);
    info.set_corrupt(corrupt);
  }

  absl::Mutex mu_;
  std::map<std::pair<std::string, uint64_t>, proto::SegmentInfoResponse> replicas;
  std::set<std::string> down;
  int seal_calls = 0;
  std::vector<RereplicationTask> copies;
};

class NamespaceTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/logfs_namespace_test_XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(tmpl));
    dir_ = tmpl;
    Reopen();
  }
  void TearDown() override {
    ns_.reset();
    db_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  void Reopen() {
    ns_.reset();
    db_.reset();
    auto db = MetadataDb::Open({dir_ + "/db"});
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(*db);
    NamespaceOptions options;
    options.dead_server_ms = 10000;
    options.lease_timeout_ms = 60000;
    options.default_replication = 3;
    options.wal_ack_quorum = 2;
    options.unlinked_grace_ms = unlinked_grace_ms_;
    if (inode_reply_bytes_max_ != 0) options.inode_reply_bytes_max = inode_reply_bytes_max_;
    options.now_ns = [this] { return now_ns_.load(); };
    auto ns = Namespace::Open(db_.get(), &fake_, options);
    ASSERT_TRUE(ns.ok()) << ns.status();
    ns_ = std::move(*ns);
  }
  void Advance(int64_t ms) { now_ns_ += ms * kMs; }

  uint64_t Make(uint64_t parent, const std::string& name, uint32_t mode,
                const std::string& target = "") {
    proto::CreateRequest request;
    request.set_parent(parent);
    request.set_name(name);
    request.set_mode(mode);
    request.set_uid(1000);
    request.set_gid(100);
    request.set_symlink_target(target);
    auto attr = ns_->Create(request);
    EXPECT_TRUE(attr.ok()) << attr.status();
    return attr.ok() ? attr->ino() : 0;
  }
  uint64_t File(uint64_t parent, const std::string& name) {
    return Make(parent, name, S_IFREG | 0644);
  }
  uint64_t Dir(uint64_t parent, const std::string& name) {
    return Make(parent, name, S_IFDIR | 0755);
  }
  int CreateErrno(uint64_t parent, const std::string& name, uint32_t mode) {
    proto::CreateRequest request;
    request.set_parent(parent);
    request.set_name(name);
    request.set_mode(mode);
    return ErrnoFromStatus(ns_->Create(request).status());
  }
  int RenameErrno(uint64_t parent, const std::string& name, uint64_t new_parent,
                  const std::string& new_name, uint32_t flags = 0) {
    proto::RenameRequest request;
    request.set_parent(parent);
    request.set_name(name);
    request.set_new_parent(new_parent);
    request.set_new_name(new_name);
    request.set_flags(flags);
    return ErrnoFromStatus(ns_->Rename(request));
  }
  int SetXattrErrno(uint64_t ino, const std::string& name, const std::string& value,
                    uint32_t flags = 0) {
    proto::SetXattrRequest request;
    request.set_ino(ino);
    request.set_name(name);
    request.set_value(value);
    request.set_flags(flags);
    return ErrnoFromStatus(ns_->SetXattr(request));
  }
  std::string Xattr(uint64_t ino, const std::string& name) {
    auto value = ns_->GetXattr(ino, name);
    EXPECT_TRUE(value.ok()) << value.status();
    return value.ok() ? *value : "";
  }
  uint64_t LookupIno(uint64_t parent, const std::string& name) {
    auto attr = ns_->Lookup(parent, name);
    return attr.ok() ? attr->ino() : 0;
  }
  // Registers servers "s1".."sN" with free space i GiB.
  std::vector<uint64_t> RegisterServers(int count) {
    std::vector<uint64_t> ids;
    for (int i = 1; i <= count; ++i) {
      proto::RegisterServerRequest request;
      request.set_address("10.0.0." + std::to_string(i) + ":7000");
      request.set_capacity_bytes(100ull << 30);
      request.set_free_bytes((1ull << 30) * i);  // GiB apart: not tied
      auto id = ns_->RegisterServer(request);
      EXPECT_TRUE(id.ok()) << id.status();
      ids.push_back(id.ok() ? *id : 0);
    }
    return ids;
  }
  absl::StatusOr<proto::Inode> OpenWrite(uint64_t ino, uint64_t mount, bool truncate = false) {
    proto::OpenWriteRequest request;
    request.set_ino(ino);
    request.set_mount_id(mount);
    request.set_truncate(truncate);
    return ns_->OpenWrite(request);
  }
  absl::StatusOr<proto::Inode> Seal(uint64_t ino, uint64_t mount, uint64_t segment_id,
                                    uint64_t length, bool close) {
    proto::SealSegmentRequest request;
    request.set_ino(ino);
    request.set_mount_id(mount);
    request.set_segment_id(segment_id);
    request.set_sealed_length(length);
    request.set_close(close);
    return ns_->SealSegment(request);
  }
  // Creates WAL file "f" in the root, opens it for write as mount 1 and
  // returns its first (open) segment.
  proto::Segment OpenWalSegment(uint64_t* ino) {
    *ino = File(kRootIno, "f");
    EXPECT_EQ(0, SetXattrErrno(*ino, "user.logfs.kind", "wal"));
    EXPECT_TRUE(OpenWrite(*ino, 1).ok());
    auto opened = Seal(*ino, 1, 0, 0, false);
    EXPECT_TRUE(opened.ok()) << opened.status();
    return opened.ok() ? opened->segments(0) : proto::Segment();
  }
  // Writes one segment of `length` bytes to `ino` as `mount` and closes.
  proto::Inode WriteAndClose(uint64_t ino, uint64_t mount, uint64_t length) {
    EXPECT_TRUE(OpenWrite(ino, mount).ok());
    auto opened = Seal(ino, mount, 0, 0, /*close=*/false);
    EXPECT_TRUE(opened.ok()) << opened.status();
    uint64_t segment_id = opened->segments(opened->segments_size() - 1).id();
    auto closed = Seal(ino, mount, segment_id, length, /*close=*/true);
    EXPECT_TRUE(closed.ok()) << closed.status();
    return *closed;
  }
  std::vector<uint64_t> Deletions(uint64_t server_id) {
    proto::HeartbeatRequest request;
    request.set_server_id(server_id);
    request.set_free_bytes(1000);
    auto response = ns_->Heartbeat(request);
    EXPECT_TRUE(response.ok());
    return {response->delete_segments().begin(), response->delete_segments().end()};
  }

  std::string dir_;
  std::atomic<int64_t> now_ns_{1700000000ll * 1000 * kMs};
  int64_t unlinked_grace_ms_ = 0;  // most tests: deleted at once
  size_t inode_reply_bytes_max_ = 0;  // 0: the default
  FakeSegmentServers fake_;
  std::unique_ptr<MetadataDb> db_;
  std::unique_ptr<Namespace> ns_;
};

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
  EXPECT_EQ(EINVAL, ErrnoFromStatus(ns_->Readlink(b).status()));
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
  EXPECT_EQ(ENOENT, ErrnoFromStatus(ns_->Lookup(kRootIno, "zz").status()));
  EXPECT_EQ(ENOTDIR, ErrnoFromStatus(ns_->Lookup(b, "x").status()));
  EXPECT_EQ(ENOTDIR, CreateErrno(b, "x", S_IFREG | 0644));
  EXPECT_EQ(ENOTDIR, ErrnoFromStatus(ns_->Readdir(b, "").status()));
  EXPECT_EQ(ESTALE, CreateErrno(999, "x", S_IFREG | 0644));  // no such directory inode
  EXPECT_EQ(ENAMETOOLONG, CreateErrno(kRootIno, std::string(256, 'n'), S_IFREG | 0644));
  EXPECT_EQ(ENAMETOOLONG, ErrnoFromStatus(ns_->Lookup(kRootIno, std::string(256, 'n')).status()));
  EXPECT_EQ(0, CreateErrno(kRootIno, std::string(255, 'n'), S_IFREG | 0644));
  EXPECT_EQ(EINVAL, CreateErrno(kRootIno, "fifo", S_IFIFO | 0644));
  EXPECT_EQ(ESTALE, ErrnoFromStatus(ns_->GetAttr(12345).status()));
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
  EXPECT_EQ(EFBIG, ErrnoFromStatus(rolled_status)) << rolled_status;
  // (b)
  EXPECT_TRUE(full->segments(full->segments_size() - 1).sealed());
  EXPECT_EQ(segments, full->attr().size());
  EXPECT_EQ(EFBIG, ErrnoFromStatus(Seal(ino, 1, 0, 0, /*close=*/false).status()));
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
  EXPECT_EQ(EINVAL, ErrnoFromStatus(ns_->RegisterServer(long_address).status()));
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
TEST_F(NamespaceTest, RmdirOfNonEmptyDirFailsWithEnotempty) {
  uint64_t a = Dir(kRootIno, "a");
  File(a, "f");
  EXPECT_EQ(ENOTEMPTY, ErrnoFromStatus(ns_->Unlink(kRootIno, "a", true)));
  EXPECT_EQ(EISDIR, ErrnoFromStatus(ns_->Unlink(kRootIno, "a", false)));
  EXPECT_EQ(ENOTDIR, ErrnoFromStatus(ns_->Unlink(a, "f", true)));
  EXPECT_EQ(ENOENT, ErrnoFromStatus(ns_->Unlink(a, "nope", false)));
  ASSERT_TRUE(ns_->Unlink(a, "f", false).ok());
  ASSERT_TRUE(ns_->Unlink(kRootIno, "a", true).ok());
  EXPECT_EQ(2u, ns_->GetAttr(kRootIno)->nlink());
  EXPECT_EQ(ENOENT, ErrnoFromStatus(ns_->Lookup(kRootIno, "a").status()));
  EXPECT_EQ(ESTALE, ErrnoFromStatus(ns_->GetAttr(a).status()));
}

TEST_F(NamespaceTest, RenameReplacesAtomicallyAndFollowsTheRules) {
  // (a) file over file: the target's inode goes, the source keeps its ino.
  uint64_t x = File(kRootIno, "x");
  uint64_t y = File(kRootIno, "y");
  ASSERT_EQ(0, RenameErrno(kRootIno, "x", kRootIno, "y"));
  EXPECT_EQ(x, LookupIno(kRootIno, "y"));
  EXPECT_EQ(0u, LookupIno(kRootIno, "x"));
  EXPECT_EQ(ESTALE, ErrnoFromStatus(ns_->GetAttr(y).status()));
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
  EXPECT_EQ(ESTALE, ErrnoFromStatus(ns_->GetAttr(empty).status()));
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
  EXPECT_EQ(ESTALE, ErrnoFromStatus(ns_->GetAttr(f).status()));
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
  EXPECT_EQ(ESTALE, ErrnoFromStatus(ns_->GetAttr(y).status()));
  EXPECT_EQ(std::vector<uint64_t>{segment_id}, Deletions(servers[0]));
  // (c) unpinned: gone at the first expiry pass after the grace.
  ASSERT_TRUE(ns_->Unlink(kRootIno, "y", false).ok());
  ASSERT_TRUE(ns_->GetAttr(x).ok());
  Advance(1000);
  ASSERT_TRUE(ns_->ExpireMounts().ok());
  ASSERT_TRUE(ns_->GetAttr(x).ok());
  Advance(1001);
  ASSERT_TRUE(ns_->ExpireMounts().ok());
  EXPECT_EQ(ESTALE, ErrnoFromStatus(ns_->GetAttr(x).status()));
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

TEST_F(NamespaceTest, OrphanLeftAtRestartIsDeletedAtOpen) {
  auto servers = RegisterServers(3);
  uint64_t f = File(kRootIno, "f");
  uint64_t segment_id = WriteAndClose(f, 1, 10).segments(0).id();
  ASSERT_TRUE(ns_->Open(f, 7).ok());
  ASSERT_TRUE(ns_->Unlink(kRootIno, "f", false).ok());
  ASSERT_TRUE(ns_->GetAttr(f).ok());
  Reopen();
  EXPECT_EQ(ESTALE, ErrnoFromStatus(ns_->GetAttr(f).status()));
  EXPECT_EQ(std::vector<uint64_t>{segment_id}, Deletions(servers[1]));
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
  EXPECT_EQ(EPERM, ErrnoFromStatus(ns_->RemoveXattr(wal_dir, "user.logfs.kind")));
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
  EXPECT_EQ(ENODATA, ErrnoFromStatus(ns_->GetXattr(log, "user.other").status()));
  EXPECT_EQ(E2BIG, SetXattrErrno(log, "user.big", std::string((64 << 10) + 1, 'v')));
  EXPECT_EQ(ERANGE, SetXattrErrno(log, "user." + std::string(251, 'n'), "v"));
  auto names = ns_->ListXattr(log);
  EXPECT_EQ((std::vector<std::string>{"user.logfs.kind", "user.logfs.replication",
                                      "user.logfs.ack_quorum", "user.logfs.segments",
                                      "user.logfs.durable_length", "user.note"}),
            *names);
  EXPECT_EQ(3u, ns_->ListXattr(wal_dir)->size());
  ASSERT_TRUE(ns_->RemoveXattr(log, "user.note").ok());
  EXPECT_EQ(ENODATA, ErrnoFromStatus(ns_->RemoveXattr(log, "user.note")));
}

TEST_F(NamespaceTest, OpenWriteIsExclusivePerMountAndReentrant) {
  uint64_t f = File(kRootIno, "f");
  ASSERT_TRUE(ns_->NewMount().ok());
  auto first = OpenWrite(f, 1);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->attr().open_for_write());
  EXPECT_TRUE(ns_->GetAttr(f)->open_for_write());
  EXPECT_EQ(EBUSY, ErrnoFromStatus(OpenWrite(f, 2).status()));
  EXPECT_TRUE(OpenWrite(f, 1).ok());
  EXPECT_EQ(EISDIR, ErrnoFromStatus(OpenWrite(kRootIno, 1).status()));
  uint64_t link = Make(kRootIno, "l", S_IFLNK | 0777, "f");
  EXPECT_EQ(EINVAL, ErrnoFromStatus(OpenWrite(link, 1).status()));
  // Mount 1 goes silent; mount 2 keeps heartbeating and takes over.
  Advance(30000);
  ASSERT_TRUE(ns_->MountHeartbeat(2).ok());
  EXPECT_EQ(EBUSY, ErrnoFromStatus(OpenWrite(f, 2).status()));
  Advance(30001);
  ASSERT_TRUE(ns_->MountHeartbeat(2).ok());
  EXPECT_FALSE(ns_->GetAttr(f)->open_for_write());
  EXPECT_TRUE(OpenWrite(f, 2).ok());
  EXPECT_EQ(EBUSY, ErrnoFromStatus(OpenWrite(f, 1).status()));
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
  EXPECT_EQ(EPERM, ErrnoFromStatus(truncate(log, 10, 0).status()));
  EXPECT_EQ(EPERM, ErrnoFromStatus(truncate(log, 60, 0).status()));
  EXPECT_EQ(50u, truncate(log, 50, 0)->size());  // same size: no-op
  EXPECT_EQ(EISDIR, ErrnoFromStatus(truncate(wal_dir, 0, 0).status()));
  // (a) a live lease of another mount blocks truncate(0).
  ASSERT_TRUE(OpenWrite(log, 2).ok());
  EXPECT_EQ(EBUSY, ErrnoFromStatus(truncate(log, 0, 3).status()));
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
  EXPECT_EQ(EPERM, ErrnoFromStatus(truncate(sst, 0, 0).status()));
  EXPECT_EQ(EPERM, ErrnoFromStatus(OpenWrite(sst, 1).status()));
  EXPECT_EQ(EPERM, ErrnoFromStatus(OpenWrite(sst, 1, true).status()));
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
  EXPECT_EQ(ESTALE, ErrnoFromStatus(Seal(f, 1, s0.id() + 100, 5, false).status()));
  EXPECT_EQ(ESTALE, ErrnoFromStatus(Seal(f, 1, 0, 0, false).status()));
  EXPECT_EQ(EBUSY, ErrnoFromStatus(Seal(f, 2, s0.id(), 5, false).status()));
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
  EXPECT_EQ(EBUSY, ErrnoFromStatus(OpenWrite(f, 2).status()));
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
  EXPECT_EQ(std::vector<std::string>{seg.replicas(0).address()},
            fake_.copies[0].source_addresses);
  EXPECT_EQ(100u, (fake_.replicas[{seg.replicas(1).address(), seg.id()}].length()));
  EXPECT_EQ(100u, recovered->attr().size());
  EXPECT_TRUE(recovered->attr().open_for_write());
  EXPECT_TRUE((fake_.replicas[{seg.replicas(0).address(), seg.id()}].sealed()));
  // (d) mount 2 now writes after the recovered bytes; the zombie cannot.
  for (uint64_t server : servers) Deletions(server);  // heartbeats: live again
  auto next = Seal(f, 2, 0, 0, false);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(100u, next->segments(1).file_offset());
  EXPECT_EQ(EBUSY, ErrnoFromStatus(Seal(f, 1, seg.id(), 120, false).status()));
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

}  // namespace
}  // namespace logfs::meta

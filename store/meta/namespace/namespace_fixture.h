// Test only: the fixtures of the Namespace unit tests. NamespaceFixture: a
// Namespace over a real MetadataDb in a temp dir (removed at the end), with
// a fake wall clock that only Advance moves, and segment servers that are
// never reachable unless a test brings its own fake (servers()). Reopen is
// a meta restart: the namespace and the database close and open again
// from disk. NamespaceTest adds FakeSegmentServers (replicas in memory)
// and helpers that make files, servers and segments. Not thread-safe
// (FakeSegmentServers is).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "src/status/posix_error.h"
#include "store/meta/db/metadata_db.h"
#include "store/meta/namespace/namespace.h"
#include "store/meta/namespace/segd_api.h"

namespace logfs::meta {

inline constexpr int64_t kMs = 1000 * 1000;  // ns in a ms: the fake clock's unit

// Segment servers that cannot be reached: for tests that make no calls to
// them, or that check what meta does when none answers.
class UnreachableSegmentServers : public SegmentServerApi {
 public:
  absl::StatusOr<proto::SegmentInfoResponse> SegmentInfo(const std::string&, uint64_t) override {
    return absl::UnavailableError("no segment servers in this test");
  }
  absl::StatusOr<proto::SegmentInfoResponse> Seal(const std::string&, uint64_t, uint64_t,
                                                  uint64_t) override {
    return absl::UnavailableError("no segment servers in this test");
  }
  std::vector<absl::Status> CopySegments(const std::vector<RereplicationTask>& tasks,
                                         absl::Duration) override {
    return std::vector<absl::Status>(tasks.size(),
                                     absl::UnavailableError("no segment servers in this test"));
  }
};

class NamespaceFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "logfs_namespace_XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(tmpl.data()));
    dir_ = tmpl;
    Reopen();
  }
  void TearDown() override {
    ns_.reset();
    db_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // What a test sets beyond the defaults (called by every Reopen).
  virtual void Configure(NamespaceOptions* options) {}
  // The segment servers the namespace calls; owned by the test.
  virtual SegmentServerApi* servers() { return &unreachable_; }

  void Reopen() {
    ns_.reset();
    db_.reset();
    auto db = MetadataDb::Open({dir_ + "/db"});
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(*db);
    NamespaceOptions options;
    options.now_ns = [this] { return now_ns_.load(); };
    Configure(&options);
    auto ns = Namespace::Open(db_.get(), servers(), options);
    ASSERT_TRUE(ns.ok()) << ns.status();
    ns_ = std::move(*ns);
  }
  void Advance(int64_t ms) { now_ns_ += ms * kMs; }

  std::string dir_;
  std::atomic<int64_t> now_ns_{1700000000000 * kMs};
  UnreachableSegmentServers unreachable_;
  std::unique_ptr<MetadataDb> db_;
  std::unique_ptr<Namespace> ns_;
};


// Replicas in memory, with Seal semantics of docs/rpc.md; servers listed
// in `down` do not answer.
class FakeSegmentServers : public SegmentServerApi {
 public:
  absl::StatusOr<proto::SegmentInfoResponse> SegmentInfo(const std::string& address,
                                                         uint64_t segment_id) override {
    if (before_info) before_info();  // e.g. holds a recovery at its fence
    absl::MutexLock lock(&mu_);
    if (down.count(address)) return absl::UnavailableError("down");
    auto it = replicas.find({address, segment_id});
    if (it == replicas.end()) return absl::NotFoundError("no replica");
    return it->second;
  }
  absl::StatusOr<proto::SegmentInfoResponse> Seal(const std::string& address, uint64_t segment_id,
                                                  uint64_t epoch, uint64_t length) override {
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
      if (down.count(task.target_address) || source == replicas.end() || !source->second.sealed() ||
          source->second.length() != task.length) {
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
  std::function<void()> before_info;  // set before the calls it is to see
};

// NamespaceFixture with FakeSegmentServers, unlinked files deleted at
// once unless a test sets unlinked_grace_ms_ (before Reopen), and helpers.
class NamespaceTest : public NamespaceFixture {
 protected:
  void Configure(NamespaceOptions* options) override {
    options->unlinked_grace_ms = unlinked_grace_ms_;
    if (inode_reply_bytes_max_ != 0) options->inode_reply_bytes_max = inode_reply_bytes_max_;
  }
  SegmentServerApi* servers() override { return &fake_; }

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
    return AttachedErrno(ns_->Create(request).status());
  }
  int RenameErrno(uint64_t parent, const std::string& name, uint64_t new_parent,
                  const std::string& new_name, uint32_t flags = 0) {
    proto::RenameRequest request;
    request.set_parent(parent);
    request.set_name(name);
    request.set_new_parent(new_parent);
    request.set_new_name(new_name);
    request.set_flags(flags);
    return AttachedErrno(ns_->Rename(request));
  }
  int SetXattrErrno(uint64_t ino, const std::string& name, const std::string& value,
                    uint32_t flags = 0) {
    proto::SetXattrRequest request;
    request.set_ino(ino);
    request.set_name(name);
    request.set_value(value);
    request.set_flags(flags);
    return AttachedErrno(ns_->SetXattr(request));
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

  int64_t unlinked_grace_ms_ = 0;     // most tests: deleted at once
  size_t inode_reply_bytes_max_ = 0;  // 0: the default
  FakeSegmentServers fake_;
};

}  // namespace logfs::meta

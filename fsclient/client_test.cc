// fsclient::Client's own logic against an in-memory cluster
// (tests/fakes/fake_client_cluster.h, behind ClientDeps): its real
// writers, writer table, executors and read hand-offs, with no process,
// socket or disk. tests/rocksdb_plugin_test.cc and the FUSE tests run the
// same code against real servers.
#include "fsclient/client.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "fsclient/path_client.h"
#include "src/status/posix_error.h"
#include "store/format/setattr_bits.h"
#include "tests/fakes/fake_client_cluster.h"

namespace logfs::fsclient {
namespace {

using testing::FakeClientCluster;

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClientOptions options;
    options.meta_address = "meta.test:7000";
    options.block_cache_bytes = 0;  // every read reaches the fake
    options.heartbeat_interval = absl::Seconds(60);
    client_ = std::make_unique<Client>(options, [this](const ClientOptions&, Executors&) {
      auto fake = std::make_unique<FakeClientCluster>();
      fake_ = fake.get();
      return fake;
    });
    ASSERT_TRUE(client_->Connect().ok());
    paths_ = std::make_unique<PathClient>(client_.get());
  }
  void TearDown() override { client_->Shutdown(); }

  // A file at `path` holding `data`, closed (sealed); its inode.
  uint64_t WriteFile(const std::string& path, const std::string& data, proto::FileKind kind) {
    auto file = paths_->Create(path, 0644, O_WRONLY | O_APPEND, kind);
    EXPECT_TRUE(file.ok()) << file.status();
    if (!file.ok()) return 0;
    const uint64_t ino = (*file)->ino;
    EXPECT_TRUE(paths_->Append(**file, data).ok());
    EXPECT_TRUE(paths_->Close(std::move(*file)).ok());
    return ino;
  }
  absl::StatusOr<proto::Attr> GetAttr(uint64_t ino) {
    absl::Notification done;
    absl::StatusOr<proto::Attr> attr;
    client_->GetAttr(ino, [&](absl::StatusOr<proto::Attr> a) {
      attr = std::move(a);
      done.Notify();
    });
    done.WaitForNotification();
    return attr;
  }
  absl::StatusOr<std::string> Xattr(uint64_t ino, const std::string& name) {
    absl::Notification done;
    absl::StatusOr<std::string> value;
    client_->GetXattr(ino, name, [&](absl::StatusOr<std::string> v) {
      value = std::move(v);
      done.Notify();
    });
    done.WaitForNotification();
    return value;
  }
  std::string ReadAll(const std::string& path) {
    auto file = paths_->Open(path, O_RDONLY);
    EXPECT_TRUE(file.ok()) << file.status();
    if (!file.ok()) return "<open failed>";
    std::string out(1 << 16, '\0');
    auto n = paths_->ReadAt(**file, 0, out.size(), out.data());
    EXPECT_TRUE(n.ok()) << n.status();
    out.resize(n.ok() ? *n : 0);
    EXPECT_TRUE(paths_->Close(std::move(*file)).ok());
    return out;
  }

  FakeClientCluster* fake_ = nullptr;  // owned by client_
  std::unique_ptr<Client> client_;
  std::unique_ptr<PathClient> paths_;
};

TEST_F(ClientTest, AppendsAreReadBackAndCloseSealsAtTheirLength) {
  auto file = paths_->Create("/000001.log", 0644, O_WRONLY | O_APPEND, proto::KIND_WAL);
  ASSERT_TRUE(file.ok()) << file.status();
  const uint64_t ino = (*file)->ino;
  EXPECT_EQ(proto::KIND_WAL, (*file)->kind);
  ASSERT_TRUE(paths_->Append(**file, "hello ").ok());
  ASSERT_TRUE(paths_->Append(**file, "world").ok());
  // The writing client's size counts every appended byte once durable.
  auto attr = GetAttr(ino);
  ASSERT_TRUE(attr.ok()) << attr.status();
  EXPECT_EQ(11u, attr->size());
  EXPECT_TRUE(attr->open_for_write());
  ASSERT_TRUE(paths_->Sync(**file).ok());
  EXPECT_EQ("hello world", ReadAll("/000001.log"));
  EXPECT_EQ(FakeClientCluster::kMountId, fake_->LeaseHolder(ino));
  ASSERT_TRUE(paths_->Close(std::move(*file)).ok());
  const proto::Inode sealed = fake_->InodeOf(ino);
  ASSERT_EQ(1, sealed.segments_size());
  EXPECT_TRUE(sealed.segments(0).sealed());
  EXPECT_EQ(11u, sealed.segments(0).length());
  EXPECT_EQ(0u, fake_->LeaseHolder(ino));
  EXPECT_EQ("hello world", ReadAll("/000001.log"));
}

TEST_F(ClientTest, OpensOfAFileShareItsWriterAndTheLastCloseReleasesTheLease) {
  const uint64_t ino = WriteFile("/wal", "", proto::KIND_WAL);
  auto first = paths_->Open("/wal", O_WRONLY | O_APPEND);
  auto second = paths_->Open("/wal", O_WRONLY | O_APPEND);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ((*first)->writer, (*second)->writer);
  ASSERT_TRUE(paths_->Append(**first, "a").ok());
  ASSERT_TRUE(paths_->Append(**second, "b").ok());
  ASSERT_TRUE(paths_->Close(std::move(*first)).ok());
  EXPECT_EQ(FakeClientCluster::kMountId, fake_->LeaseHolder(ino));  // the second still writes
  ASSERT_TRUE(paths_->Close(std::move(*second)).ok());
  EXPECT_EQ(0u, fake_->LeaseHolder(ino));
  EXPECT_EQ("ab", ReadAll("/wal"));
}

TEST_F(ClientTest, AnotherMountsLeaseIsEbusyAndLeavesNoWriterBehind) {
  const uint64_t ino = WriteFile("/busy", "", proto::KIND_WAL);
  fake_->SetLeaseHolder(ino, FakeClientCluster::kOtherMount);
  EXPECT_EQ(EBUSY, AttachedErrno(paths_->Open("/busy", O_WRONLY).status()));
  // Nothing is left in the writer table: once the lease is free, an open
  // takes it (it would wait forever on a placeholder).
  fake_->SetLeaseHolder(ino, 0);
  auto file = paths_->Open("/busy", O_WRONLY | O_APPEND);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(FakeClientCluster::kMountId, fake_->LeaseHolder(ino));
  ASSERT_TRUE(paths_->Close(std::move(*file)).ok());
}

TEST_F(ClientTest, ASealedBlockFileOpensForWriteButRefusesWritesAndTruncation) {
  const uint64_t ino = WriteFile("/000007.sst", "table", proto::KIND_BLOCK);
  auto file = paths_->Open("/000007.sst", O_WRONLY);  // RocksDB's LOCK works this way
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE((*file)->write_denied);
  EXPECT_EQ(EPERM, AttachedErrno(paths_->Append(**file, "more")));
  EXPECT_EQ(0u, fake_->LeaseHolder(ino));  // no lease was taken
  ASSERT_TRUE(paths_->Close(std::move(*file)).ok());
  EXPECT_EQ(EPERM, AttachedErrno(paths_->Open("/000007.sst", O_WRONLY | O_TRUNC).status()));
  EXPECT_EQ("table", ReadAll("/000007.sst"));
}

TEST_F(ClientTest, AFileAnotherMountWritesHasItsAckedLengthAsSize) {
  const uint64_t ino = WriteFile("/tail", "sealed-", proto::KIND_WAL);
  // The replicas of the open segment hold different lengths: 4, 2, 0.
  fake_->AddOpenSegmentWrittenElsewhere(ino, {"open", "op", ""});
  fake_->SetLeaseHolder(ino, FakeClientCluster::kOtherMount);
  // Meta knows only the sealed 7 bytes; the size is what the ack quorum
  // (2 of 3) holds on top, asked of the replicas: 2 bytes.
  auto attr = GetAttr(ino);
  ASSERT_TRUE(attr.ok()) << attr.status();
  EXPECT_EQ(9u, attr->size());
  EXPECT_TRUE(attr->open_segment());
  EXPECT_EQ("sealed-op", ReadAll("/tail"));
  auto durable = Xattr(ino, "user.logfs.durable_length");
  ASSERT_TRUE(durable.ok()) << durable.status();
  EXPECT_EQ("9", *durable);
}

TEST_F(ClientTest, AReadThatMustReachAReplicaRunsOnTheWaitingPool) {
  WriteFile("/data", "0123456789", proto::KIND_BLOCK);
  auto file = paths_->Open("/data", O_RDONLY);
  ASSERT_TRUE(file.ok()) << file.status();
  absl::Notification done;
  absl::StatusOr<cache::ReadBuffer> read;
  Executor ran_on = Executor::kCaller;
  client_->ReadAsync(*file, 2, 5, [&](absl::StatusOr<cache::ReadBuffer> r) {
    read = std::move(r);
    ran_on = Executors::Current();
    done.Notify();
  });
  done.WaitForNotification();
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ("23456", read->ToString());
  EXPECT_EQ(Executor::kWaiting, ran_on);
  EXPECT_EQ(1, fake_->cached_only_reads());  // tried on the caller's thread first
  EXPECT_GE(fake_->remote_reads(), 1);
  const uint64_t ino = (*file)->ino;
  EXPECT_EQ(1, fake_->pins(ino));  // an open for read pins the inode at meta
  ASSERT_TRUE(paths_->Close(std::move(*file)).ok());
  EXPECT_EQ(0, fake_->pins(ino));
}

TEST_F(ClientTest, TheClientAnswersItsOwnXattrs) {
  const uint64_t ino = WriteFile("/x", "12345", proto::KIND_BLOCK);
  EXPECT_EQ("meta.test:7000", *Xattr(ino, "user.logfs.meta_address"));
  EXPECT_EQ(ENODATA, AttachedErrno(Xattr(ino, "user.logfs.cluster_secret_file").status()));
  const proto::Inode inode = fake_->InodeOf(ino);
  ASSERT_EQ(1, inode.segments_size());
  EXPECT_EQ(std::to_string(inode.segments(0).id()) + " s1,s2,s3 5 sealed\n",
            *Xattr(ino, "user.logfs.segments"));
  EXPECT_EQ("5", *Xattr(ino, "user.logfs.durable_length"));
  EXPECT_EQ(ENODATA, AttachedErrno(Xattr(ino, "user.logfs.segments.1").status()));
  EXPECT_NE(std::string::npos, Xattr(ino, "user.logfs.stats")->find(" remote_reads="));
  EXPECT_EQ(ENODATA, AttachedErrno(Xattr(ino, "user.app").status()));  // meta's answer
}

TEST_F(ClientTest, AWalFileBeingWrittenEmptiesButNoFileGrowsBySetattr) {
  auto file = paths_->Create("/rotate.log", 0644, O_WRONLY | O_APPEND, proto::KIND_WAL);
  ASSERT_TRUE(file.ok()) << file.status();
  const uint64_t ino = (*file)->ino;
  ASSERT_TRUE(paths_->Append(**file, "old lines\n").ok());
  auto set_size = [&](uint64_t size) {
    proto::SetAttrRequest request;
    request.set_ino(ino);
    request.set_to_set(format::kSetAttrSize);
    request.set_size(size);
    absl::Notification done;
    absl::StatusOr<proto::Attr> attr;
    client_->SetAttr(request, [&](absl::StatusOr<proto::Attr> a) {
      attr = std::move(a);
      done.Notify();
    });
    done.WaitForNotification();
    return attr;
  };
  EXPECT_EQ(EPERM, AttachedErrno(set_size(100).status()));
  auto emptied = set_size(0);
  ASSERT_TRUE(emptied.ok()) << emptied.status();
  EXPECT_EQ(0u, emptied->size());
  ASSERT_TRUE(paths_->Append(**file, "new\n").ok());
  ASSERT_TRUE(paths_->Close(std::move(*file)).ok());
  EXPECT_EQ("new\n", ReadAll("/rotate.log"));
}

TEST_F(ClientTest, PathCallsResolveFromTheRootWithTheirErrnos) {
  ASSERT_TRUE(paths_->MakeDirs("/a/b/c", 0755).ok());
  ASSERT_TRUE(paths_->MakeDirs("/a/b/c", 0755).ok());  // mkdir -p: no EEXIST
  EXPECT_EQ(EEXIST, AttachedErrno(paths_->MakeDir("/a/b", 0755)));
  WriteFile("/a/b/f", "x", proto::KIND_BLOCK);
  EXPECT_EQ(ENOTDIR, AttachedErrno(paths_->MakeDirs("/a/b/f/g", 0755)));
  EXPECT_EQ(ENOTDIR, AttachedErrno(paths_->Stat("/a/b/f/g").status()));
  EXPECT_EQ(ENOENT, AttachedErrno(paths_->Stat("/a/nope").status()));
  EXPECT_EQ(EINVAL, AttachedErrno(paths_->Stat("relative").status()));
  ASSERT_TRUE(paths_->Rename("/a/b/f", "/a/g").ok());
  auto names = paths_->List("/a");
  ASSERT_TRUE(names.ok());
  EXPECT_EQ((std::vector<std::string>{"b", "g"}), *names);
  EXPECT_EQ(EEXIST, AttachedErrno(paths_->Create("/a/g", 0644, O_WRONLY, std::nullopt).status()));
  auto root = paths_->Stat("/");
  ASSERT_TRUE(root.ok());
  EXPECT_TRUE(S_ISDIR(root->mode()));
  ASSERT_TRUE(paths_->Remove("/a/g", false).ok());
  EXPECT_EQ(ENOENT, AttachedErrno(paths_->Stat("/a/g").status()));
}

TEST_F(ClientTest, CopyRangeAppendsSealedSegmentsAndLaterWritesFollowThem) {
  const uint64_t src_ino = WriteFile("/src", "hello world", proto::KIND_BLOCK);
  auto src = paths_->Open("/src", O_RDONLY);
  ASSERT_TRUE(src.ok()) << src.status();
  auto dst = paths_->Create("/dst", 0644, O_WRONLY | O_APPEND, proto::KIND_BLOCK);
  ASSERT_TRUE(dst.ok()) << dst.status();
  const uint64_t dst_ino = (*dst)->ino;
  // Not at a segment's start, not at the destination's end: bytes.
  EXPECT_EQ(EOPNOTSUPP, AttachedErrno(client_->CopyRange(**src, 3, **dst, 0, 8).status()));
  EXPECT_EQ(EOPNOTSUPP, AttachedErrno(client_->CopyRange(**src, 0, **dst, 5, 11).status()));
  // Shorter than the segment: no whole segment fits.
  EXPECT_EQ(EOPNOTSUPP, AttachedErrno(client_->CopyRange(**src, 0, **dst, 0, 10).status()));
  auto copied = client_->CopyRange(**src, 0, **dst, 0, 1 << 20);
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_EQ(11u, *copied);
  ASSERT_TRUE(paths_->Append(**dst, "!!").ok());
  // Bytes in flight at the end: the next copy takes bytes.
  EXPECT_EQ(EOPNOTSUPP, AttachedErrno(client_->CopyRange(**src, 0, **dst, 13, 11).status()));
  ASSERT_TRUE(paths_->Close(std::move(*dst)).ok());
  EXPECT_EQ("hello world!!", ReadAll("/dst"));
  const proto::Inode written = fake_->InodeOf(dst_ino);
  ASSERT_EQ(2, written.segments_size());
  EXPECT_EQ(fake_->InodeOf(src_ino).segments(0).id(), written.segments(0).id());
  EXPECT_EQ(11u, written.segments(1).file_offset());
  // A read-only destination is not this mount's to append to.
  auto readonly = paths_->Open("/dst", O_RDONLY);
  ASSERT_TRUE(readonly.ok()) << readonly.status();
  EXPECT_EQ(EOPNOTSUPP,
            AttachedErrno(client_->CopyRange(**src, 0, **readonly, 13, 11).status()));
  EXPECT_EQ(1, fake_->copy_range_calls());
  ASSERT_TRUE(paths_->Close(std::move(*readonly)).ok());
  ASSERT_TRUE(paths_->Close(std::move(*src)).ok());
}

}  // namespace
}  // namespace logfs::fsclient

// Directory snapshots on real mounts of a real cluster (issue 44;
// docs/snapshots.md): `logfs snapshot create|list|delete`, the snapshot
// under DIR/.snapshot/NAME on every mount and hidden from readdir,
// read-only (EROFS), and a snapshot of a live RocksDB DB (its WAL open and
// synced, its MANIFEST open) that opens as a consistent DB holding every
// write synced before the snapshot and none after.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <atomic>
#include <map>
#include <memory>
#include <thread>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "rocksdb/db.h"
#include "rocksdb/options.h"
#include "rocksdb/write_batch.h"
#include "store/client/admin_client.h"
#include "tests/mounted_cluster.h"
#include "tests/segd_stats.h"

namespace logfs::testing {
namespace {

using SnapshotsTest = SharedClusterTest<2>;

CommandResult Snapshot(const std::string& args) {
  return RunCommand(absl::StrCat("timeout -s KILL 60 ", LogfsBinary(), " snapshot ", args, " 2>&1"));
}

int OpenErrno(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags, 0644);
  if (fd >= 0) {
    ::close(fd);
    return 0;
  }
  return errno;
}

TEST_F(SnapshotsTest, ASnapshotIsAHiddenReadOnlyCopySeenByEveryMount) {
  MountedCluster& c = *cluster_;
  ASSERT_EQ(0, ::mkdir(c.Path("sd").c_str(), 0755));
  ASSERT_EQ(0, ::mkdir(c.Path("sd/sub").c_str(), 0755));
  const std::string data = Pattern(3 << 20, 5);
  ASSERT_TRUE(WriteFile(c.Path("sd/a"), data).ok());
  ASSERT_TRUE(WriteFile(c.Path("sd/sub/b"), "bee").ok());
  // Mount 1 has looked `.snapshot` up before it exists (a negative entry).
  struct stat st;
  EXPECT_NE(0, ::stat(c.Path("sd/.snapshot", 1).c_str(), &st));

  SegdStats segds(c);
  const uint64_t appends_before = segds.TotalAppends();
  CommandResult made = Snapshot(absl::StrCat("create ", c.Path("sd"), " s1"));
  ASSERT_EQ(0, made.exit_code) << made.output;
  EXPECT_TRUE(absl::StrContains(made.output, "4 inodes")) << made.output;
  EXPECT_EQ(appends_before, segds.TotalAppends()) << "a snapshot wrote to the segment servers";

  // Every mount sees it, by name only.
  for (int mount : {0, 1}) {
    EXPECT_EQ(data, *ReadFile(c.Path("sd/.snapshot/s1/a", mount))) << mount;
    EXPECT_EQ("bee", *ReadFile(c.Path("sd/.snapshot/s1/sub/b", mount))) << mount;
    CommandResult ls = RunCommand("ls -a " + c.Path("sd", mount));
    EXPECT_EQ(".\n..\na\nsub\n", ls.output) << mount;
  }
  CommandResult lsr = RunCommand("cd " + c.Path("sd/.snapshot/s1", 1) + " && ls -R");
  EXPECT_EQ(".:\na\nsub\n\n./sub:\nb\n", lsr.output);

  // The source changes; the snapshot does not.
  ASSERT_EQ(0, ::unlink(c.Path("sd/a").c_str()));
  ASSERT_TRUE(WriteFile(c.Path("sd/a"), "new").ok());
  ASSERT_EQ(0, ::unlink(c.Path("sd/sub/b").c_str()));
  DropKernelCaches();
  EXPECT_EQ(data, *ReadFile(c.Path("sd/.snapshot/s1/a", 1)));
  EXPECT_EQ("bee", *ReadFile(c.Path("sd/.snapshot/s1/sub/b")));

  // Read-only, as a read-only mount is: EROFS.
  const std::string in = c.Path("sd/.snapshot/s1");
  EXPECT_EQ(EROFS, OpenErrno(in + "/a", O_WRONLY));
  EXPECT_EQ(EROFS, OpenErrno(in + "/new", O_WRONLY | O_CREAT));
  EXPECT_EQ(-1, ::unlink((in + "/a").c_str()));
  EXPECT_EQ(EROFS, errno);
  EXPECT_EQ(-1, ::mkdir((in + "/d").c_str(), 0755));
  EXPECT_EQ(EROFS, errno);
  EXPECT_EQ(-1, ::rename((in + "/a").c_str(), c.Path("sd/a2").c_str()));
  EXPECT_EQ(EROFS, errno);
  EXPECT_EQ(-1, ::chmod((in + "/a").c_str(), 0600));
  EXPECT_EQ(EROFS, errno);
  EXPECT_EQ(-1, ::link((in + "/a").c_str(), c.Path("sd/a3").c_str()));
  EXPECT_EQ(EXDEV, errno);
  // cp and `logfs clone` restore from it.
  CommandResult cp = RunCommand("cp " + in + "/a " + c.Path("sd/restored") + " 2>&1");
  ASSERT_EQ(0, cp.exit_code) << cp.output;
  EXPECT_EQ(data, *ReadFile(c.Path("sd/restored")));

  CommandResult list = Snapshot(absl::StrCat("list ", c.Path("sd")));
  ASSERT_EQ(0, list.exit_code) << list.output;
  EXPECT_TRUE(absl::StrContains(list.output, "s1")) << list.output;
  EXPECT_TRUE(absl::StrContains(list.output, "/sd")) << list.output;
  EXPECT_EQ(2, Snapshot(absl::StrCat("create ", c.Path("sd"), " s1")).exit_code);
  // A directory with snapshots cannot be removed (rm -r empties it and
  // fails at the rmdir), as HDFS's snapshottable directories.
  EXPECT_NE(0, RunCommand("rm -rf " + c.Path("sd") + " 2>&1").exit_code);
  EXPECT_EQ(data, *ReadFile(c.Path("sd/.snapshot/s1/a")));

  CommandResult deleted = Snapshot(absl::StrCat("delete ", c.Path("sd"), " s1"));
  ASSERT_EQ(0, deleted.exit_code) << deleted.output;
  EXPECT_NE(0, ::stat(c.Path("sd/.snapshot", 1).c_str(), &st));
  EXPECT_EQ(ENOENT, errno);
  EXPECT_EQ(2, Snapshot(absl::StrCat("delete ", c.Path("sd"), " s1")).exit_code);
  EXPECT_EQ(0, RunCommand("rm -rf " + c.Path("sd")).exit_code);
}

// The point of issue 44's item 4: a snapshot of a live DB's directory
// (WAL being written and synced, MANIFEST open) opens as the DB a crash at
// that instant would have left: every write synced before the snapshot
// began, nothing begun after it returned, each batch whole or absent. The
// snapshot is asked in-process: a fork would close the DB's descriptors
// in the child, and each close(2) seals the file's segment (a FUSE flush),
// so nothing would be open to take at its durable length.
TEST_F(SnapshotsTest, ASnapshotOfALiveRocksDbOpensAsAConsistentDb) {
  MountedCluster& c = *cluster_;
  const std::string db_path = c.Path("livedb");
  // WAL files, as the plugin makes RocksDB's WAL and MANIFEST: their last
  // segment stays open while the DB runs.
  ASSERT_EQ(0, ::mkdir(db_path.c_str(), 0755));
  ASSERT_EQ(0, ::setxattr(db_path.c_str(), "user.logfs.kind", "wal", 3, 0)) << strerror(errno);
  rocksdb::Options options;
  options.create_if_missing = true;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, db_path, &raw);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::unique_ptr<rocksdb::DB> db(raw);
  constexpr int kKeysPerBatch = 20;
  auto value_of = [](int batch, int k) { return Pattern(200, batch * 100 + k); };
  // Batch b holds keys "b<b>_<k>"; done is the number of batches whose
  // synced Write returned.
  std::atomic<int> done{0};
  std::atomic<bool> stop{false};
  std::atomic<bool> failed{false};
  std::thread writer([&] {
    rocksdb::WriteOptions synced;
    synced.sync = true;
    for (int b = 0; !stop.load() && b < 100000; ++b) {
      rocksdb::WriteBatch batch;
      for (int k = 0; k < kKeysPerBatch; ++k) {
        batch.Put(absl::StrCat("b", b, "_", k), value_of(b, k));
      }
      if (!db->Write(synced, &batch).ok()) {
        failed = true;
        return;
      }
      done = b + 1;
      if (b == 40) db->Flush(rocksdb::FlushOptions());  // an SST and a MANIFEST edit
    }
  });
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (done.load() < 80 && !failed.load() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  const int synced_before = done.load();
  struct stat dir;
  ASSERT_EQ(0, ::stat(db_path.c_str(), &dir));
  client::AdminClient admin(c.cluster().meta_address(), absl::Seconds(30));
  proto::SnapshotRequest request;
  request.set_op(proto::SnapshotRequest::CREATE);
  request.set_dir(dir.st_ino);
  request.set_name("snap");
  absl::StatusOr<proto::SnapshotResponse> made = admin.Snapshot(request);
  const int begun_after = done.load() + 1;  // the batch in flight may be in it
  // More after it: batches, a flush and a compaction replace files the
  // snapshot lists.
  while (done.load() < begun_after + 20 && !failed.load() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  stop = true;
  writer.join();
  ASSERT_FALSE(failed.load());
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_GE(made->open_files(), 1u) << "the WAL was not open when the snapshot was taken";
  ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
  ASSERT_TRUE(db->CompactRange(rocksdb::CompactRangeOptions(), nullptr, nullptr).ok());

  // Opened from the other mount while the DB stays open.
  auto check = [&](const std::string& path) {
    rocksdb::DB* snap_raw = nullptr;
    rocksdb::Status opened = rocksdb::DB::OpenForReadOnly(rocksdb::Options(), path, &snap_raw);
    ASSERT_TRUE(opened.ok()) << opened.ToString();
    std::unique_ptr<rocksdb::DB> snap(snap_raw);
    std::map<int, int> keys_per_batch;
    std::unique_ptr<rocksdb::Iterator> it(snap->NewIterator(rocksdb::ReadOptions()));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      const std::string key = it->key().ToString();
      const size_t cut = key.find('_');
      ASSERT_NE(std::string::npos, cut) << key;
      const int b = std::stoi(key.substr(1, cut - 1));
      const int k = std::stoi(key.substr(cut + 1));
      EXPECT_EQ(value_of(b, k), it->value().ToString()) << key;
      ++keys_per_batch[b];
    }
    ASSERT_TRUE(it->status().ok()) << it->status().ToString();
    for (int b = 0; b < synced_before; ++b) {
      EXPECT_EQ(kKeysPerBatch, keys_per_batch[b]) << "batch " << b << " was synced before";
    }
    for (const auto& [b, n] : keys_per_batch) {
      EXPECT_LT(b, begun_after) << "batch " << b << " began after the snapshot";
      EXPECT_EQ(kKeysPerBatch, n) << "batch " << b << " is torn";
    }
  };
  check(c.Path("livedb/.snapshot/snap", 1));
  db.reset();

  // The DB goes (as a region moved away): the snapshot still opens.
  ASSERT_EQ(0, RunCommand("rm -f " + db_path + "/*").exit_code);
  DropKernelCaches();
  check(c.Path("livedb/.snapshot/snap"));
  ASSERT_EQ(0, Snapshot(absl::StrCat("delete ", db_path, " snap")).exit_code);
  EXPECT_EQ(0, ::rmdir(db_path.c_str())) << strerror(errno);
}

}  // namespace
}  // namespace logfs::testing

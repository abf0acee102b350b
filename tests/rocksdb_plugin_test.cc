// The RocksDB plugin (rocksdb_fs/, docs/rocksdb.md) against a real cluster
// and a real FUSE mount of it: Debian's stock db_bench and ldb with
// build/liblogfs_rocksdb.so preloaded; RocksDB in this process on the
// plugin's FileSystem; one namespace and one set of leases with the
// mount (a DB the plugin has open is EBUSY to the mount's writer and the
// reverse); a killed plugin process's lock recovered like a dead mount's;
// authentication with the options in the URI.
#include <fcntl.h>
#include <sys/stat.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "rocksdb/sst_file_writer.h"
#include "rocksdb/utilities/checkpoint.h"
#include "tests/mounted_cluster.h"
#include "tests/rocksdb_plugin_fs.h"

namespace logfs::testing {
namespace {

// build/liblogfs_rocksdb.so, next to the logfs binary under test.
std::string PluginPath() {
  return (std::filesystem::path(LogfsBinary()).parent_path() / "liblogfs_rocksdb.so").string();
}

std::string FsUri(MountedCluster& c, const std::string& root = "") {
  return absl::StrCat("logfs://", c.cluster().meta_address(), root);
}

// A stock RocksDB tool (db_bench, ldb) with the plugin preloaded.
CommandResult RunTool(const std::string& command_line) {
  return RunCommand(
      absl::StrCat("LD_PRELOAD=", PluginPath(), " timeout -s KILL 120 ", command_line, " 2>&1"));
}

class RocksdbPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(PluginPath())) << PluginPath() << ": run make";
  }
};

TEST_F(RocksdbPluginTest, StockDbBenchAndLdbRunThroughThePlugin) {
  auto c = MountedCluster::Start({});
  ASSERT_TRUE(c.ok()) << c.status();
  MountedCluster& cluster = **c;
  const std::string uri = FsUri(cluster, "/dbs");
  CommandResult bench = RunTool(absl::StrCat(
      "db_bench --fs_uri=", uri, " --db=/bench --benchmarks=fillseq,readrandom,readseq --num=3000 ",
      "--value_size=200 --sync=1 --threads=1 --compression_type=none --statistics=0"));
  ASSERT_EQ(0, bench.exit_code) << bench.output;
  EXPECT_NE(std::string::npos, bench.output.find("fillseq")) << bench.output;
  EXPECT_NE(std::string::npos, bench.output.find("(3000 of 3000 found)")) << bench.output;

  // The DB is in the one namespace: the mount sees it, with WAL files
  // where RocksDB logs and block files for the rest.
  const std::string db = cluster.Path("dbs/bench");
  bool saw_log = false, saw_manifest = false, saw_current = false;
  for (const auto& entry : std::filesystem::directory_iterator(db)) {
    const std::string name = entry.path().filename().string();
    if (absl::EndsWith(name, ".log")) {
      saw_log = true;
      EXPECT_EQ("wal", Xattr(entry.path().string(), "user.logfs.kind")) << name;
    } else if (absl::StartsWith(name, "MANIFEST-")) {
      saw_manifest = true;
      EXPECT_EQ("wal", Xattr(entry.path().string(), "user.logfs.kind")) << name;
    } else if (name == "CURRENT") {
      saw_current = true;
      EXPECT_EQ("block", Xattr(entry.path().string(), "user.logfs.kind"));
    }
  }
  EXPECT_TRUE(saw_log && saw_manifest && saw_current);
  EXPECT_EQ("wal", Xattr(db + "/LOG", "user.logfs.kind"));
  auto log = ReadFile(db + "/LOG");
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_NE(std::string::npos, log->find("RocksDB version")) << log->substr(0, 500);

  // ldb through the plugin and ldb on the mount read the same keys.
  CommandResult through_plugin =
      RunTool(absl::StrCat("ldb --fs_uri=", uri, " --db=/bench scan | wc -l"));
  ASSERT_EQ(0, through_plugin.exit_code) << through_plugin.output;
  EXPECT_EQ("3000\n", through_plugin.output);
  CommandResult on_mount = RunCommand(
      absl::StrCat("timeout -s KILL 120 ldb --db=", db, " --try_load_options scan 2>&1 | wc -l"));
  ASSERT_EQ(0, on_mount.exit_code) << on_mount.output;
  EXPECT_EQ("3000\n", on_mount.output);
}

TEST_F(RocksdbPluginTest, APluginDbAndAMountExcludeEachOther) {
  auto c = MountedCluster::Start({});
  ASSERT_TRUE(c.ok()) << c.status();
  MountedCluster& cluster = **c;
  std::shared_ptr<rocksdb::FileSystem> fs = PluginFileSystem(FsUri(cluster));
  ASSERT_NE(nullptr, fs);
  std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(fs);
  rocksdb::Options options;
  options.env = env.get();
  options.create_if_missing = true;
  rocksdb::WriteOptions synced;
  synced.sync = true;
  {
    rocksdb::DB* raw = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(options, "/shared", &raw);
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::unique_ptr<rocksdb::DB> db(raw);
    for (int i = 0; i < 100; ++i) {
      ASSERT_TRUE(db->Put(synced, absl::StrCat("key", i), absl::StrCat("value", i)).ok());
    }
    // While this process has the DB open, its LOCK is this client's lease:
    // the mount's writer gets EBUSY, and so does RocksDB on the mount.
    const int fd = ::open(cluster.Path("shared/LOCK").c_str(), O_WRONLY);
    EXPECT_EQ(-1, fd);
    EXPECT_EQ(EBUSY, errno);
    if (fd >= 0) ::close(fd);
    rocksdb::Options posix;
    rocksdb::DB* other = nullptr;
    s = rocksdb::DB::Open(posix, cluster.Path("shared"), &other);
    EXPECT_FALSE(s.ok());
    delete other;
    // The synced WAL is readable on the mount at once (durable bytes).
    auto wal = std::filesystem::directory_iterator(cluster.Path("shared"));
    uint64_t wal_bytes = 0;
    for (const auto& entry : wal) {
      if (absl::EndsWith(entry.path().string(), ".log")) wal_bytes += entry.file_size();
    }
    EXPECT_GT(wal_bytes, 100u * 10);
  }
  // Closed: RocksDB on the mount opens it and reads every key; while it
  // has it open, the plugin's open is refused in turn.
  {
    rocksdb::Options posix;
    rocksdb::DB* raw = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(posix, cluster.Path("shared"), &raw);
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::unique_ptr<rocksdb::DB> db(raw);
    std::string value;
    ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), "key42", &value).ok());
    EXPECT_EQ("value42", value);
    ASSERT_TRUE(db->Put(synced, "from-mount", "yes").ok());
    rocksdb::DB* other = nullptr;
    s = rocksdb::DB::Open(options, "/shared", &other);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(std::string::npos, s.ToString().find("held by another logfs client")) << s.ToString();
    delete other;
  }
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, "/shared", &raw);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::unique_ptr<rocksdb::DB> db(raw);
  std::string value;
  ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), "from-mount", &value).ok());
  EXPECT_EQ("yes", value);
  int keys = 0;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++keys;
  EXPECT_EQ(101, keys);
}

// The FileSystem calls themselves, as RocksDB's contract states them.
TEST_F(RocksdbPluginTest, FileCallsKeepRocksdbsContract) {
  auto c = MountedCluster::Start({});
  ASSERT_TRUE(c.ok()) << c.status();
  MountedCluster& cluster = **c;
  std::shared_ptr<rocksdb::FileSystem> fs = PluginFileSystem(FsUri(cluster, "/calls"));
  ASSERT_NE(nullptr, fs);
  const rocksdb::IOOptions io;
  const rocksdb::FileOptions fo;
  auto write = [&](const std::string& name, const std::string& data) {
    std::unique_ptr<rocksdb::FSWritableFile> file;
    ASSERT_TRUE(fs->NewWritableFile(name, fo, &file, nullptr).ok()) << name;
    ASSERT_TRUE(file->Append(data, io, nullptr).ok());
    ASSERT_TRUE(file->Sync(io, nullptr).ok());
    ASSERT_TRUE(file->Close(io, nullptr).ok());
  };
  write("/000009.log", "abc");
  // ReopenWritableFile appends to a WAL file, from its length.
  std::unique_ptr<rocksdb::FSWritableFile> reopened;
  ASSERT_TRUE(fs->ReopenWritableFile("/000009.log", fo, &reopened, nullptr).ok());
  EXPECT_EQ(3u, reopened->GetFileSize(io, nullptr));
  ASSERT_TRUE(reopened->Append("de", io, nullptr).ok());
  EXPECT_TRUE(reopened->PositionedAppend("x", 0, io, nullptr).IsNotSupported());
  ASSERT_TRUE(reopened->Close(io, nullptr).ok());
  auto log = ReadFile(cluster.Path("calls/000009.log"));
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ("abcde", *log);
  // A sealed block file takes no appends; NewWritableFile replaces it.
  write("/000010.sst", "table");
  EXPECT_TRUE(fs->ReopenWritableFile("/000010.sst", fo, &reopened, nullptr).IsNotSupported());
  write("/000010.sst", "new");
  EXPECT_EQ("new", ReadFile(cluster.Path("calls/000010.sst")).value_or(""));
  // FileExists: NotFound for a missing file and a name that cannot exist.
  EXPECT_TRUE(fs->FileExists("/000010.sst", io, nullptr).ok());
  EXPECT_TRUE(fs->FileExists("/missing", io, nullptr).IsNotFound());
  EXPECT_TRUE(fs->FileExists("/000010.sst/below", io, nullptr).IsNotFound());
  EXPECT_TRUE(fs->FileExists("/a/../b", io, nullptr).IsNotFound());
  uint64_t size = 0;
  EXPECT_TRUE(fs->GetFileSize("/missing", io, &size, nullptr).IsPathNotFound());
  std::vector<std::string> children;
  ASSERT_TRUE(fs->GetChildren("/", io, &children, nullptr).ok());
  std::sort(children.begin(), children.end());
  EXPECT_EQ((std::vector<std::string>{"000009.log", "000010.sst"}), children);
  // A LOCK that is a sealed block file with data holds no lease: refused.
  write("/LOCK", "not empty");
  rocksdb::FileLock* lock = nullptr;
  EXPECT_TRUE(fs->LockFile("/LOCK", io, &lock, nullptr).IsIOError());
  EXPECT_EQ(nullptr, lock);
  ASSERT_TRUE(fs->DeleteFile("/LOCK", io, nullptr).ok());
  ASSERT_TRUE(fs->LockFile("/LOCK", io, &lock, nullptr).ok());
  rocksdb::FileLock* again = nullptr;
  EXPECT_TRUE(fs->LockFile("/LOCK", io, &again, nullptr).IsIOError());  // this process holds it
  ASSERT_TRUE(fs->UnlockFile(lock, io, nullptr).ok());
  // A file that outlives its FileSystem still closes (seals) cleanly.
  std::unique_ptr<rocksdb::FSWritableFile> last;
  ASSERT_TRUE(fs->NewWritableFile("/000011.log", fo, &last, nullptr).ok());
  ASSERT_TRUE(last->Append("tail", io, nullptr).ok());
  fs.reset();
  ASSERT_TRUE(last->Close(io, nullptr).ok());
  last.reset();
  EXPECT_EQ("tail", ReadFile(cluster.Path("calls/000011.log")).value_or(""));
}

// A plugin process killed with its DB open: its lock lease lapses like a
// dead mount's, and the mount then opens the DB with every synced key.
TEST_F(RocksdbPluginTest, AKilledPluginProcessIsRecoveredLikeADeadMount) {
  MountedClusterOptions options;
  options.meta_flags = {"--lease_timeout_ms=2000", "--lease_recovery_delay_ms=500"};
  auto c = MountedCluster::Start(options);
  ASSERT_TRUE(c.ok()) << c.status();
  MountedCluster& cluster = **c;
  const std::string uri = FsUri(cluster);
  // db_bench writing synced records for a long time, killed mid-way.
  const std::string out = cluster.root() + "/db_bench.out";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::setenv("LD_PRELOAD", PluginPath().c_str(), 1);
    const std::string fs_uri = "--fs_uri=" + uri;
    ::execlp("db_bench", "db_bench", fs_uri.c_str(), "--db=/killed", "--benchmarks=fillseq",
             "--num=100000000", "--sync=1", "--value_size=100", "--stats_interval_seconds=0",
             static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Until some records are synced (the WAL grows on the mount).
  const std::string db = cluster.Path("killed");
  uint64_t wal_bytes = 0;
  for (const absl::Time deadline = absl::Now() + absl::Seconds(60);
       wal_bytes < 64 * 1024 && absl::Now() < deadline;) {
    wal_bytes = 0;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(db, error)) {
      if (absl::EndsWith(entry.path().string(), ".log")) wal_bytes += entry.file_size(error);
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_GE(wal_bytes, 64u * 1024) << ReadFile(out).value_or("");
  ASSERT_EQ(0, ::kill(pid, SIGKILL));
  int status = 0;
  ASSERT_EQ(pid, ::waitpid(pid, &status, 0));
  // The lease lapses (2 s) and meta recovers the files; the mount's open
  // of the DB succeeds within a bound.
  rocksdb::Status s;
  std::unique_ptr<rocksdb::DB> opened;
  for (const absl::Time deadline = absl::Now() + absl::Seconds(30); absl::Now() < deadline;) {
    rocksdb::Options posix;
    rocksdb::DB* raw = nullptr;
    s = rocksdb::DB::Open(posix, db, &raw);
    if (s.ok()) {
      opened.reset(raw);
      break;
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  ASSERT_NE(nullptr, opened) << s.ToString();
  // The recovered WAL replays: records of 100-byte values, as many as a
  // 64 KiB WAL holds at least (the fault suite's rocksdb-kill-engine row
  // checks each acknowledged key).
  int keys = 0;
  std::unique_ptr<rocksdb::Iterator> it(opened->NewIterator(rocksdb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    EXPECT_EQ(100u, it->value().size());
    ++keys;
  }
  EXPECT_GT(keys, 64 * 1024 / 200);
}

TEST_F(RocksdbPluginTest, AuthenticatesWithTheSecretFileInTheOptions) {
  MountedClusterOptions options;
  options.authenticate = true;
  auto c = MountedCluster::Start(options);
  ASSERT_TRUE(c.ok()) << c.status();
  MountedCluster& cluster = **c;
  const std::string secret = cluster.cluster().cluster_secret_file();
  ASSERT_FALSE(secret.empty());
  CommandResult with = RunTool(absl::StrCat(
      "db_bench '--fs_uri=id=", FsUri(cluster), ";cluster_secret_file=", secret,
      "' --db=/auth --benchmarks=fillseq --num=100 --sync=1"));
  EXPECT_EQ(0, with.exit_code) << with.output;
  EXPECT_TRUE(std::filesystem::exists(cluster.Path("auth/CURRENT")));
  // Without the secret, meta refuses the session: a clear error, no hang.
  CommandResult without = RunTool(absl::StrCat("db_bench --fs_uri=", FsUri(cluster),
                                               " --db=/noauth --benchmarks=fillseq --num=100"));
  EXPECT_NE(0, without.exit_code);
  EXPECT_NE(std::string::npos, without.output.find("cannot connect to meta")) << without.output;
  EXPECT_FALSE(std::filesystem::exists(cluster.Path("noauth")));
}

// LinkFile through the plugin (docs/rocksdb.md "Checkpoints and
// ingestion"): RocksDB's Checkpoint and IngestExternalFile(move_files)
// link SSTs in meta instead of copying their bytes (before, the plugin had
// no LinkFile, and RocksDB copied every SST), in this process and in
// stock ldb; the mount sees one inode under both names.
TEST_F(RocksdbPluginTest, CheckpointAndMoveIngestionLinkSstsThroughThePlugin) {
  auto c = MountedCluster::Start({});
  ASSERT_TRUE(c.ok()) << c.status();
  MountedCluster& cluster = **c;
  const std::string uri = FsUri(cluster);
  std::shared_ptr<rocksdb::FileSystem> fs = PluginFileSystem(uri);
  ASSERT_NE(nullptr, fs);
  std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(fs);
  rocksdb::Options options;
  options.env = env.get();
  options.create_if_missing = true;
  options.disable_auto_compactions = true;
  constexpr int kSsts = 10;
  auto ino_of = [&](const std::string& relative) {
    struct stat st;
    EXPECT_EQ(0, ::stat(cluster.Path(relative).c_str(), &st)) << relative;
    return std::make_pair(st.st_ino, st.st_nlink);
  };
  std::vector<std::string> ssts;
  {
    rocksdb::DB* raw = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(options, "/pdb", &raw);
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::unique_ptr<rocksdb::DB> db(raw);
    for (int sst = 0; sst < kSsts; ++sst) {
      for (int k = 0; k < 100; ++k) {
        ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), absl::StrCat("key", sst, "_", k), "v").ok());
      }
      ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
    }
    std::vector<rocksdb::LiveFileMetaData> live;
    db->GetLiveFilesMetaData(&live);
    for (const auto& file : live) ssts.push_back(file.name);  // "/000012.sst"
    ASSERT_EQ(static_cast<size_t>(kSsts), ssts.size());

    rocksdb::Checkpoint* raw_checkpoint = nullptr;
    ASSERT_TRUE(rocksdb::Checkpoint::Create(db.get(), &raw_checkpoint).ok());
    std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw_checkpoint);
    s = checkpoint->CreateCheckpoint("/pckpt");
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (const std::string& sst : ssts) {
      EXPECT_EQ(ino_of("pdb" + sst).first, ino_of("pckpt" + sst).first) << sst << " was copied";
      EXPECT_EQ(2u, ino_of("pdb" + sst).second) << sst;
    }

    // An SST written through the plugin, moved into the DB: linked in
    // under the DB's name, then its outside name removed.
    rocksdb::SstFileWriter writer(rocksdb::EnvOptions(), options);
    ASSERT_TRUE(writer.Open("/ext.sst").ok());
    for (int k = 0; k < 100; ++k) {
      ASSERT_TRUE(writer.Put(absl::StrCat("ext", 1000 + k), "w").ok());
    }
    ASSERT_TRUE(writer.Finish().ok());
    const ino_t ext_ino = ino_of("ext.sst").first;
    rocksdb::IngestExternalFileOptions move;
    move.move_files = true;
    s = db->IngestExternalFile({"/ext.sst"}, move);
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::string value;
    ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), "ext1042", &value).ok());
    EXPECT_EQ("w", value);
    bool moved = false;
    for (const auto& entry : std::filesystem::directory_iterator(cluster.Path("pdb"))) {
      struct stat st;
      if (::stat(entry.path().c_str(), &st) == 0 && st.st_ino == ext_ino) moved = true;
    }
    EXPECT_TRUE(moved) << "the ingested SST is not the external file's inode: it was copied";
  }
  // Stock ldb through the plugin: a third name for each SST.
  CommandResult ldb =
      RunTool(absl::StrCat("ldb --fs_uri=", uri, " --db=/pdb checkpoint --checkpoint_dir=/pckpt2"));
  ASSERT_EQ(0, ldb.exit_code) << ldb.output;
  for (const std::string& sst : ssts) EXPECT_EQ(3u, ino_of("pckpt2" + sst).second) << sst;
  CommandResult scan = RunTool(absl::StrCat("ldb --fs_uri=", uri, " --db=/pckpt2 scan | wc -l"));
  ASSERT_EQ(0, scan.exit_code) << scan.output;
  EXPECT_EQ(absl::StrCat(kSsts * 100 + 100, "\n"), scan.output);
}

}  // namespace
}  // namespace logfs::testing

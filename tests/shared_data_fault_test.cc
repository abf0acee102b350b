// Fault row (tests/faults.sh, issue 44): kill -9 of meta in the middle of
// a storm of checkpoint-like changes on shared data: sealed files made,
// hard-linked into a checkpoint directory, cloned (`logfs clone`), their
// original names deleted, as RocksDB's checkpoints and compactions do, and
// snapshots of the DB directory made and deleted (`logfs snapshot`). Meta
// restarts on its data dir. Promises: every name whose change was
// acknowledged reads back its exact bytes (a replica that something still
// refers to is never deleted), every acknowledged unlink stays done, an
// acknowledged snapshot holds exactly the DB's names acknowledged before
// it, `logfs fsck` finds every share record agreeing with the files, and
// once every file and snapshot is removed no replica is left on any
// segment server (none leaks). A change that failed while meta was down
// may or may not have been applied; either is fine, as long as what
// exists is right.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <vector>
#include <random>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/fault_row.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

constexpr size_t kFileBytes = 64 << 10;

enum class State { kPresent, kAbsent, kUncertain };

struct Name {
  int content = 0;  // Pattern seed of its bytes
  State state = State::kUncertain;
};

// Replica data files on the cluster's segment servers.
int ReplicaFiles(MountedCluster& c) {
  int count = 0;
  for (int i = 0; i < c.cluster().segment_servers(); ++i) {
    const std::string dir = absl::StrCat(c.root(), "/data/segd", i, "/segments");
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      if (entry.path().extension() == ".seg") ++count;
    }
  }
  return count;
}

TEST(SharedDataFaultTest, KillMetaDuringCheckpointsAndDeletes) {
  MountedClusterOptions options;
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  for (const char* dir : {"db", "ckpt", "clone"}) {
    ASSERT_EQ(0, ::mkdir(c.Path(dir).c_str(), 0755)) << dir;
  }
  std::map<std::string, Name> names;  // relative path -> what it should be
  auto set = [&](const std::string& path, int content, bool acked) {
    names[path] = Name{content, acked ? State::kPresent : State::kUncertain};
  };
  auto removed = [&](const std::string& path, bool acked) {
    names[path].state = acked ? State::kAbsent : State::kUncertain;
  };

  std::atomic<bool> done{false};
  std::thread killer([&] {
    std::mt19937 random(static_cast<uint32_t>(absl::ToUnixNanos(absl::Now())));
    absl::SleepFor(absl::Milliseconds(300 + random() % 1200));
    if (!done.load()) {
      EXPECT_TRUE(c.cluster().RestartMeta().ok());  // SIGKILL, then start
    }
  });
  // Snapshots of db/: name -> the db/ names acknowledged present and
  // absent when it was made (an unacknowledged snapshot is not checked).
  struct Taken {
    bool acked = false;
    std::vector<std::string> present;
    std::vector<std::string> absent;
  };
  std::map<std::string, Taken> snapshots;
  auto snapshot = [&](const std::string& op, const std::string& name) {
    return RunCommand(absl::StrCat(LogfsBinary(), " snapshot ", op, " ", c.Path("db"), " ", name,
                                   " --rpc_timeout_ms=20000 2>&1"));
  };
  const absl::Time end = absl::Now() + absl::Seconds(TrialSeconds());
  int changes = 0, failed = 0;
  for (int i = 0; absl::Now() < end || i < 8; ++i) {
    const std::string file = absl::StrCat("db/", i, ".sst");
    const bool written = WriteFile(c.Path(file), Pattern(kFileBytes, i)).ok();
    set(file, i, written);
    if (!written) {
      ++failed;
      continue;
    }
    const std::string link = absl::StrCat("ckpt/", i, ".sst");
    const bool linked = ::link(c.Path(file).c_str(), c.Path(link).c_str()) == 0;
    set(link, i, linked);
    const std::string clone = absl::StrCat("clone/", i, ".sst");
    const CommandResult cloned =
        RunCommand(absl::StrCat(LogfsBinary(), " clone ", c.Path(file), " ", c.Path(clone),
                                " --rpc_timeout_ms=20000 2>&1"));
    set(clone, i, cloned.exit_code == 0);
    // A compaction: the DB's older names go; the checkpoint's and the
    // clones' keep the data.
    if (i >= 2) {
      const std::string old = absl::StrCat("db/", i - 2, ".sst");
      removed(old, ::unlink(c.Path(old).c_str()) == 0);
    }
    if (i >= 4 && i % 2 == 0) {
      const std::string old = absl::StrCat("ckpt/", i - 4, ".sst");
      removed(old, ::unlink(c.Path(old).c_str()) == 0);
    }
    changes += 5;
    failed += (linked ? 0 : 1) + (cloned.exit_code == 0 ? 0 : 1);
    if (i % 3 == 0) {
      Taken taken;
      for (const auto& [path, name] : names) {
        if (path.rfind("db/", 0) != 0) continue;
        if (name.state == State::kPresent) taken.present.push_back(path.substr(3));
        if (name.state == State::kAbsent) taken.absent.push_back(path.substr(3));
      }
      const std::string made = absl::StrCat("s", i);
      taken.acked = snapshot("create", made).exit_code == 0;
      snapshots[made] = std::move(taken);
      ++changes;
      // Older snapshots go, as a backup schedule drops them.
      const std::string old = absl::StrCat("s", i - 6);
      if (snapshots.count(old) != 0) {
        if (snapshot("delete", old).exit_code == 0) snapshots.erase(old);
        ++changes;
      }
    }
  }
  done.store(true);
  killer.join();

  // Every acknowledged name reads back its bytes; every acknowledged
  // removal stayed; an unacknowledged change is either way, but right.
  DropKernelCaches();
  FaultRow row;
  row.name = "kill-meta-links-clones";
  for (const auto& [path, name] : names) {
    struct stat st;
    const bool exists = ::stat(c.Path(path).c_str(), &st) == 0;
    if (name.state == State::kAbsent) {
      EXPECT_FALSE(exists) << path << " was removed, and is back";
      continue;
    }
    if (name.state == State::kPresent) row.acked_bytes += kFileBytes;
    if (!exists) {
      if (name.state == State::kPresent) {
        row.acked_bytes_lost += kFileBytes;
        ADD_FAILURE() << path << " was acknowledged, and is gone";
      }
      continue;
    }
    auto read = ReadFile(c.Path(path));
    if (!read.ok() || *read != Pattern(kFileBytes, name.content)) {
      if (name.state == State::kPresent) row.acked_bytes_lost += kFileBytes;
      ADD_FAILURE() << path << ": " << (read.ok() ? "wrong bytes" : read.status().ToString());
    }
  }
  row.write_errors = static_cast<uint64_t>(failed);
  for (const auto& [made, taken] : snapshots) {
    if (!taken.acked) continue;
    const std::string dir = c.Path("db/.snapshot/" + made);
    for (const std::string& file : taken.present) {
      auto read = ReadFile(dir + "/" + file);
      const int content = std::stoi(file);
      if (!read.ok() || *read != Pattern(kFileBytes, content)) {
        row.acked_bytes_lost += kFileBytes;
        ADD_FAILURE() << "snapshot " << made << ": " << file << ": "
                      << (read.ok() ? "wrong bytes" : read.status().ToString());
      }
    }
    for (const std::string& file : taken.absent) {
      struct stat st;
      EXPECT_NE(0, ::stat((dir + "/" + file).c_str(), &st)) << made << " holds removed " << file;
    }
  }
  // The share records agree with the files (the storm's kills included).
  CommandResult fsck = RunCommand(absl::StrCat(
      LogfsBinary(), " fsck --noprogress --meta=", c.cluster().meta_address(),
      c.cluster().cluster_secret_file().empty()
          ? ""
          : absl::StrCat(" --cluster_secret_file=", c.cluster().cluster_secret_file()),
      " 2>&1"));
  EXPECT_NE(std::string::npos, fsck.output.find(" 0 share records disagree")) << fsck.output;
  for (const auto& [made, taken] : snapshots) snapshot("delete", made);

  // Everything removed: every replica goes from every server.
  for (const char* dir : {"db", "ckpt", "clone"}) {
    for (const auto& entry : std::filesystem::directory_iterator(c.Path(dir))) {
      EXPECT_EQ(0, ::unlink(entry.path().c_str())) << entry.path() << ": " << strerror(errno);
    }
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (ReplicaFiles(c) > 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(100));
  const int leaked = ReplicaFiles(c);
  EXPECT_EQ(0, leaked) << "replicas left on the servers after every file was removed";
  row.extra = absl::StrCat(" changes=", changes, " leaked_replicas=", leaked);
  PrintFaultRow(row);
  EXPECT_GT(row.acked_bytes, 0u);
}

}  // namespace
}  // namespace logfs::testing

// ReplicaStore's part of replica reports (issue 11 item 7): ListReplicas
// for the report, and DeleteIfIdle, which deletes a stray replica only if
// nothing changed its files for the grace period.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "src/util/crc32c.h"
#include "store/segd/replica_store.h"

namespace logfs::segd {
namespace {

class ReplicaStoreReportTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = testing::TempDir() + "logfs_replica_report_test_XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(tmpl.data()));
    dir_ = tmpl;
    auto store = ReplicaStore::Open(ReplicaStoreOptions{dir_, 1u << 20, false});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }
  void TearDown() override {
    store_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  bool Exists(uint64_t id) {
    return ::access(absl::StrCat(dir_, "/segments/", id, ".seg").c_str(), F_OK) == 0;
  }
  // Sets the mtime of every file of replica `id` to `age_s` seconds ago.
  void Age(uint64_t id, int age_s) {
    struct timespec times[2];
    ::clock_gettime(CLOCK_REALTIME, &times[0]);
    times[0].tv_sec -= age_s;
    times[1] = times[0];
    for (const char* suffix : {".seg", ".state", ".crc"}) {
      std::string path = absl::StrCat(dir_, "/segments/", id, suffix);
      ASSERT_EQ(0, ::utimensat(AT_FDCWD, path.c_str(), times, 0)) << path;
    }
  }

  std::string dir_;
  std::unique_ptr<ReplicaStore> store_;
};

TEST_F(ReplicaStoreReportTest, ListReplicasGivesEveryReplicaWithLengthAndSeal) {
  ASSERT_TRUE(store_->Create(1, 1).ok());
  ASSERT_TRUE(store_->Create(2, 1).ok());
  const std::string data = "hello";
  ASSERT_TRUE(store_->Append(2, 1, 0, data, util::Crc32c(data.data(), data.size())).ok());
  ASSERT_TRUE(store_->Seal(2, 1, 5).ok());
  std::vector<ReplicaInfo> listed = store_->ListReplicas();
  std::sort(listed.begin(), listed.end(),
            [](const ReplicaInfo& a, const ReplicaInfo& b) { return a.segment_id < b.segment_id; });
  ASSERT_EQ(2u, listed.size());
  EXPECT_EQ(1u, listed[0].segment_id);
  EXPECT_FALSE(listed[0].sealed);
  EXPECT_EQ(2u, listed[1].segment_id);
  EXPECT_TRUE(listed[1].sealed);
  EXPECT_EQ(5u, listed[1].length);
  EXPECT_FALSE(listed[1].corrupt);
}

TEST_F(ReplicaStoreReportTest, DeleteIfIdleKeepsAReplicaThatChangedWithinTheGrace) {
  // Goal: a stray is deleted only once its files are older than the
  // grace: a create or copy in progress is never removed under it.
  ASSERT_TRUE(store_->Create(7, 1).ok());
  auto deleted = store_->DeleteIfIdle(7, 60000);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_FALSE(*deleted);
  EXPECT_TRUE(Exists(7));
  EXPECT_TRUE(store_->Info(7).ok());
  // An hour old: deleted, from disk and from the store.
  Age(7, 3600);
  deleted = store_->DeleteIfIdle(7, 60000);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_TRUE(*deleted);
  EXPECT_FALSE(Exists(7));
  EXPECT_TRUE(absl::IsNotFound(store_->Info(7).status()));
  // Absent: nothing to do.
  deleted = store_->DeleteIfIdle(7, 0);
  ASSERT_TRUE(deleted.ok());
  EXPECT_FALSE(*deleted);
}

}  // namespace
}  // namespace logfs::segd

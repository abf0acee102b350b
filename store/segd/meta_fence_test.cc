// MetaFence over the real file system in a temp dir.
#include "store/segd/meta_fence.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "src/env/posix_file.h"
#include "store/format/meta_fence_error.h"

namespace logfs::segd {
namespace {

class MetaFenceTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = testing::TempDir() + "meta_fence_test.XXXXXX";
    ASSERT_NE(nullptr, ::mkdtemp(tmpl.data()));
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<MetaFence> OpenFence() {
    auto fence = MetaFence::Open(*env::FileSystem::Default(), dir_);
    EXPECT_TRUE(fence.ok()) << fence.status();
    return fence.ok() ? std::move(*fence) : nullptr;
  }
  std::string FileText() { return *env::ReadSmallFile(dir_ + "/meta_epoch", 64); }

  std::string dir_;
};

TEST_F(MetaFenceTest, RaisesDurablyRefusesLowerAndSurvivesReopen) {
  std::unique_ptr<MetaFence> fence = OpenFence();
  ASSERT_NE(nullptr, fence);
  EXPECT_EQ(0u, fence->highest());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/meta_epoch"));
  ASSERT_TRUE(fence->Admit(7).ok());
  EXPECT_EQ(7u, fence->highest());
  EXPECT_EQ("7\n", FileText());
  ASSERT_TRUE(fence->Admit(7).ok());  // the same epoch: admitted, no write
  absl::Status refused = fence->Admit(4).status();
  EXPECT_TRUE(format::IsMetaEpochFenced(refused)) << refused;
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, refused.code());
  EXPECT_EQ("fenced: meta epoch 4 is below 7, the highest this server has seen", refused.message());
  fence.reset();

  fence = OpenFence();
  ASSERT_NE(nullptr, fence);
  EXPECT_EQ(7u, fence->highest());
  EXPECT_TRUE(format::IsMetaEpochFenced(fence->Admit(6).status()));
  ASSERT_TRUE(fence->Admit(9).ok());
  EXPECT_EQ("9\n", FileText());
}

TEST_F(MetaFenceTest, EpochZeroIsNeverRefusedAsACommandButIsAsAnAnswer) {
  std::unique_ptr<MetaFence> fence = OpenFence();
  ASSERT_NE(nullptr, fence);
  // While no elected meta was seen, a lone meta's answers (0) are acted on.
  EXPECT_TRUE(fence->Admit(0, MetaFence::Zero::kCompared).ok());
  ASSERT_TRUE(fence->Admit(5).ok());
  EXPECT_TRUE(fence->Admit(0).ok());
  EXPECT_EQ(5u, fence->highest());
  EXPECT_TRUE(format::IsMetaEpochFenced(fence->Admit(0, MetaFence::Zero::kCompared).status()));
}

TEST_F(MetaFenceTest, CorruptFileIsAClearStartupError) {
  std::ofstream(dir_ + "/meta_epoch") << "7x\n";
  auto fence = MetaFence::Open(*env::FileSystem::Default(), dir_);
  ASSERT_FALSE(fence.ok());
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, fence.status().code());
  EXPECT_NE(std::string::npos, fence.status().message().find(dir_ + "/meta_epoch is corrupt"))
      << fence.status();
}

// A hold keeps a raise out until it is dropped.
TEST_F(MetaFenceTest, RaiseWaitsForCommandsAdmittedBelowIt) {
  std::unique_ptr<MetaFence> fence = OpenFence();
  ASSERT_NE(nullptr, fence);
  ASSERT_TRUE(fence->Admit(3).ok());
  absl::StatusOr<MetaFence::Hold> hold = fence->Admit(3);
  ASSERT_TRUE(hold.ok());
  std::atomic<bool> raised{false};
  std::thread raiser([&] {
    EXPECT_TRUE(fence->Admit(4).ok());
    raised.store(true);
  });
  // The raiser blocks on the hold; give it a bounded chance to go wrong.
  for (int i = 0; i < 100 && !raised.load(); ++i) std::this_thread::yield();
  EXPECT_FALSE(raised.load());
  { MetaFence::Hold dropped = std::move(*hold); }
  raiser.join();
  EXPECT_TRUE(raised.load());
  EXPECT_EQ(4u, fence->highest());
}

}  // namespace
}  // namespace logfs::segd

// The mount's side of coherent caches against a scripted meta (the fake
// cluster's watch_cache) and a recording kernel. tests/coherence_test.cc
// runs it against a real meta and two FUSE mounts.
#include "fsclient/cache_coherence.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "tests/fakes/fake_client_cluster.h"

namespace logfs::fsclient {
namespace {

using testing::FakeClientCluster;

class RecordingKernel : public KernelCache {
 public:
  void InvalidateEntry(uint64_t parent, const std::string& name) override {
    absl::MutexLock lock(&mu_);
    dropped_.push_back(absl::StrCat("entry ", parent, "/", name));
  }
  void InvalidateInode(uint64_t ino) override {
    absl::MutexLock lock(&mu_);
    dropped_.push_back(absl::StrCat("inode ", ino));
  }
  std::vector<std::string> dropped() {
    absl::MutexLock lock(&mu_);
    return dropped_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> dropped_;
};

// Meta's answers, handed out one per poll; a poll with none queued waits
// for one up to its timeout, as a held poll does, or fails at once when
// meta is "down".
class ScriptedMeta {
 public:
  void Answer(proto::WatchCacheResponse response) {
    absl::MutexLock lock(&mu_);
    answers_.push_back(std::move(response));
  }
  void SetDown(bool down) {
    absl::MutexLock lock(&mu_);
    down_ = down;
  }
  int polls() {
    absl::MutexLock lock(&mu_);
    return polls_;
  }
  uint64_t last_acked() {
    absl::MutexLock lock(&mu_);
    return last_acked_;
  }
  absl::StatusOr<proto::WatchCacheResponse> Poll(const proto::WatchCacheRequest& request,
                                                 absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    ++polls_;
    last_acked_ = request.acked_seq();
    if (down_) return absl::UnavailableError("meta is down");
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !answers_.empty() || down_; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&ready), std::min(timeout, absl::Milliseconds(50))) ||
        down_) {
      return absl::DeadlineExceededError("held");
    }
    proto::WatchCacheResponse response = std::move(answers_.front());
    answers_.pop_front();
    return response;
  }

 private:
  absl::Mutex mu_;
  std::deque<proto::WatchCacheResponse> answers_ ABSL_GUARDED_BY(mu_);
  bool down_ ABSL_GUARDED_BY(mu_) = false;
  int polls_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t last_acked_ ABSL_GUARDED_BY(mu_) = 0;
};

proto::WatchCacheResponse Reset(uint64_t token, uint64_t seq, uint32_t lease_ms) {
  proto::WatchCacheResponse response;
  response.set_token(token);
  response.set_reset(true);
  response.set_seq(seq);
  response.set_cache_lease_ms(lease_ms);
  return response;
}

// Polls `done` every millisecond for up to 10 s.
template <typename Fn>
bool Eventually(Fn done) {
  for (int i = 0; i < 10000; ++i) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return done();
}

class CacheCoherenceTest : public ::testing::Test {
 protected:
  void Start(uint32_t lease_ms) {
    ASSERT_TRUE(fake_.NewMount("host").ok());
    fake_.answered_cache_lease_ms = lease_ms;
    fake_.watch_cache = [this](const proto::WatchCacheRequest& request, absl::Duration timeout) {
      return meta_.Poll(request, timeout);
    };
    coherence_ = std::make_unique<CacheCoherence>(fake_, CacheCoherenceOptions{});
    coherence_->Start(&kernel_);
  }
  void TearDown() override {
    if (coherence_ != nullptr) coherence_->Stop();
  }
  // What the kernel is told for an entry answer begun at `ticket`.
  std::pair<double, double> Entry(CacheCoherence::Ticket ticket, uint64_t parent,
                                  const std::string& name, uint64_t ino) {
    std::pair<double, double> given;
    coherence_->ReplyEntry(ticket, parent, name, ino, true, [&](double entry_s, double attr_s) {
      given = {entry_s, attr_s};
      return 0;
    });
    return given;
  }
  bool Trusted() { return coherence_->stats().trusted; }

  FakeClientCluster fake_;
  ScriptedMeta meta_;
  RecordingKernel kernel_;
  std::unique_ptr<CacheCoherence> coherence_;
};

TEST_F(CacheCoherenceTest, AMetaWithoutInvalidationsKeepsTheOneSecondTimeouts) {
  Start(/*lease_ms=*/0);
  EXPECT_EQ(Entry(coherence_->Begin(), 1, "a", 5), std::make_pair(1.0, 1.0));
  EXPECT_EQ(meta_.polls(), 0);
  EXPECT_EQ(coherence_->session().mount_id(), 0u);
}

TEST_F(CacheCoherenceTest, NothingIsCachedUntilMetaAnswers) {
  Start(/*lease_ms=*/10000);
  EXPECT_EQ(Entry(coherence_->Begin(), 1, "a", 5), std::make_pair(0.0, 0.0));
  meta_.Answer(Reset(/*token=*/77, /*seq=*/1, 10000));
  ASSERT_TRUE(Eventually([&] { return Trusted(); }));
  EXPECT_EQ(coherence_->session().token(), 77u);
  EXPECT_EQ(coherence_->session().mount_id(), FakeClientCluster::kMountId);
  EXPECT_EQ(Entry(coherence_->Begin(), 1, "a", 5), std::make_pair(60.0, 60.0));
  ASSERT_TRUE(Eventually([&] { return meta_.last_acked() == 1; }));
}

TEST_F(CacheCoherenceTest, InvalidationsReachTheKernelForWhatItWasGiven) {
  Start(/*lease_ms=*/10000);
  meta_.Answer(Reset(77, 1, 10000));
  ASSERT_TRUE(Eventually([&] { return Trusted(); }));
  Entry(coherence_->Begin(), 1, "given", 5);
  const CacheCoherence::Ticket before = coherence_->Begin();

  proto::WatchCacheResponse change;
  change.set_token(77);
  change.set_seq(3);
  change.set_cache_lease_ms(10000);
  change.add_invalidations()->set_ino(5);
  auto* entry = change.add_invalidations();
  entry->set_parent(1);
  entry->set_name("given");
  auto* other = change.add_invalidations();  // never given: nothing to drop
  other->set_parent(1);
  other->set_name("never");
  meta_.Answer(change);
  ASSERT_TRUE(Eventually([&] { return meta_.last_acked() == 3; }));
  EXPECT_EQ(kernel_.dropped(), (std::vector<std::string>{"inode 5", "entry 1/given"}));
  // An answer asked for before the invalidation arrived is not kept.
  EXPECT_EQ(Entry(before, 1, "given", 5), std::make_pair(0.0, 0.0));
}

TEST_F(CacheCoherenceTest, ALapsedLeaseDropsEverythingGiven) {
  Start(/*lease_ms=*/300);
  meta_.Answer(Reset(77, 1, 300));
  ASSERT_TRUE(Eventually([&] { return Trusted(); }));
  Entry(coherence_->Begin(), 1, "a", 5);
  coherence_->Renamed(2, "moved");
  meta_.SetDown(true);
  ASSERT_TRUE(Eventually([&] { return kernel_.dropped().size() == 3; }));
  std::vector<std::string> dropped = kernel_.dropped();
  std::sort(dropped.begin(), dropped.end());
  EXPECT_EQ(dropped, (std::vector<std::string>{"entry 1/a", "entry 2/moved", "inode 5"}));
  EXPECT_FALSE(Trusted());
  EXPECT_EQ(Entry(coherence_->Begin(), 1, "a", 5), std::make_pair(0.0, 0.0));
  EXPECT_EQ(coherence_->stats().drops, 2u);  // the first reset, then the lapse
}

TEST_F(CacheCoherenceTest, AFileBeingWrittenKeepsNoAttributes) {
  Start(/*lease_ms=*/10000);
  meta_.Answer(Reset(77, 1, 10000));
  ASSERT_TRUE(Eventually([&] { return Trusted(); }));
  std::pair<double, double> given;
  coherence_->ReplyEntry(coherence_->Begin(), 1, "wal", 9, /*attr_cacheable=*/false,
                         [&](double entry_s, double attr_s) {
                           given = {entry_s, attr_s};
                           return 0;
                         });
  EXPECT_EQ(given, std::make_pair(60.0, 0.0));
  double attr_s = -1;
  coherence_->ReplyAttr(coherence_->Begin(), 9, false, [&](double s) {
    attr_s = s;
    return 0;
  });
  EXPECT_EQ(attr_s, 0);
}

}  // namespace
}  // namespace logfs::fsclient

#include "store/meta/coherence/mount_caches.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace logfs::meta {
namespace {

constexpr uint64_t kMountA = 1;
constexpr uint64_t kMountB = 2;
constexpr uint64_t kDir = 10;
constexpr uint64_t kFile = 11;

class MountCachesTest : public ::testing::Test {
 protected:
  MountCachesTest() { Make(/*restarted=*/false); }

  void Make(bool restarted) {
    MountCachesOptions options;
    options.lease = absl::Seconds(1);
    options.restarted = restarted;
    options.queue_max = 4;
    options.inodes_max = 8;
    caches_.reset();
    caches_ = std::make_unique<MountCaches>(options, [this] { return now_; });
  }

  // One poll of `mount`, answered at once or held: the answer, if any yet.
  struct Poll {
    std::shared_ptr<std::optional<proto::WatchCacheResponse>> answer =
        std::make_shared<std::optional<proto::WatchCacheResponse>>();
  };
  Poll Watch(uint64_t mount, uint64_t token, uint64_t acked) {
    proto::WatchCacheRequest request;
    request.set_mount_id(mount);
    request.set_token(token);
    request.set_acked_seq(acked);
    Poll poll;
    caches_->Watch(request, [answer = poll.answer](const proto::WatchCacheResponse& response) {
      ASSERT_FALSE(answer->has_value()) << "answered twice";
      *answer = response;
    });
    return poll;
  }

  // A new session for `mount`, its reset acknowledged by a second poll,
  // which is held (held_[mount]).
  proto::CacheSession Join(uint64_t mount) {
    Poll first = Watch(mount, 0, 0);
    EXPECT_TRUE(first.answer->has_value());
    EXPECT_TRUE((*first.answer)->reset());
    proto::CacheSession session;
    session.set_mount_id(mount);
    session.set_token((*first.answer)->token());
    acked_[mount] = (*first.answer)->seq();
    held_[mount] = Watch(mount, session.token(), acked_[mount]);
    EXPECT_FALSE(held_[mount].answer->has_value());
    return session;
  }

  ChangedKeys Entry(uint64_t origin, uint64_t parent, const std::string& name) {
    ChangedKeys change;
    change.origin_mount = origin;
    change.entries.emplace_back(parent, name);
    change.inodes.push_back(parent);
    return change;
  }

  // The reply of the change (mount, call) (0, 0: one without a call id,
  // which waits for everything published so far): has it gone out?
  std::shared_ptr<bool> Wait(uint64_t mount = 0, uint64_t call = 0) {
    auto done = std::make_shared<bool>(false);
    caches_->AfterInvalidated(mount, call, [done] { *done = true; });
    return done;
  }

  absl::Time now_ = absl::FromUnixSeconds(1000);
  std::unique_ptr<MountCaches> caches_;
  std::map<uint64_t, uint64_t> acked_;
  std::map<uint64_t, Poll> held_;
};

TEST_F(MountCachesTest, ChangeWaitsUntilTheMountThatLookedUpAcknowledges) {
  proto::CacheSession a = Join(kMountA);
  caches_->RecordDir(a, kDir);
  Poll held = Watch(kMountA, a.token(), acked_[kMountA]);
  EXPECT_FALSE(held.answer->has_value());  // nothing owed: held

  caches_->Publish({Entry(kMountB, kDir, "cfg")});
  auto done = Wait();
  ASSERT_TRUE(held.answer->has_value());  // the held poll carries it
  const proto::WatchCacheResponse& answer = **held.answer;
  EXPECT_FALSE(answer.reset());
  ASSERT_EQ(answer.invalidations_size(), 2);
  EXPECT_EQ(answer.invalidations(0).ino(), kDir);  // the directory's attributes
  EXPECT_EQ(answer.invalidations(1).parent(), kDir);
  EXPECT_EQ(answer.invalidations(1).name(), "cfg");
  EXPECT_FALSE(*done);

  Poll next = Watch(kMountA, a.token(), answer.seq());  // applied
  EXPECT_TRUE(*done);
  EXPECT_FALSE(next.answer->has_value());
}

TEST_F(MountCachesTest, MountsThatRecordedNothingOweNothing) {
  proto::CacheSession a = Join(kMountA);
  caches_->RecordDir(a, kDir + 1);
  caches_->Publish({Entry(kMountB, kDir, "x")});
  EXPECT_TRUE(*Wait());
  EXPECT_EQ(caches_->stats().invalidations_sent, 0u);
}

TEST_F(MountCachesTest, TheChangingMountRecordsInsteadOfBeingInvalidated) {
  proto::CacheSession a = Join(kMountA);
  proto::CacheSession b = Join(kMountB);
  caches_->Publish({Entry(kMountA, kDir, "new")});  // A created kDir/new
  EXPECT_TRUE(*Wait());
  // Now A knows kDir: B's change to it is A's to drop.
  caches_->Publish({Entry(kMountB, kDir, "new")});
  auto done = Wait();
  EXPECT_FALSE(*done);
  Poll poll = Watch(kMountA, a.token(), acked_[kMountA]);
  ASSERT_TRUE(poll.answer->has_value());
  EXPECT_EQ((*poll.answer)->invalidations(1).name(), "new");
  Watch(kMountA, a.token(), (*poll.answer)->seq());
  EXPECT_TRUE(*done);
  (void)b;
}

TEST_F(MountCachesTest, AMountThatStopsPollingIsWaitedForOneLeaseThenForgotten) {
  proto::CacheSession a = Join(kMountA);
  now_ += absl::Milliseconds(250);
  caches_->TEST_Tick();  // its last poll is answered; then the mount goes silent
  ASSERT_TRUE(held_[kMountA].answer->has_value());
  caches_->RecordInode(a, kFile);
  ChangedKeys chmod;
  chmod.origin_mount = kMountB;
  chmod.inodes.push_back(kFile);
  caches_->Publish({chmod});
  auto done = Wait();
  now_ += absl::Milliseconds(750);
  caches_->TEST_Tick();
  EXPECT_FALSE(*done);  // its lease has not run out
  now_ += absl::Milliseconds(100);  // lease + margin since its last poll arrived
  caches_->TEST_Tick();
  EXPECT_TRUE(*done);
  EXPECT_EQ(caches_->stats().lapsed_waits, 1u);
  EXPECT_EQ(caches_->stats().sessions, 0u);
  // When it polls again, it starts over: it must drop everything.
  Poll back = Watch(kMountA, a.token(), acked_[kMountA]);
  ASSERT_TRUE(back.answer->has_value());
  EXPECT_TRUE((*back.answer)->reset());
  EXPECT_NE((*back.answer)->token(), a.token());
}

TEST_F(MountCachesTest, AMountThatPollsButNeverAcknowledgesIsForgottenAfterALease) {
  // Its answers are lost, or its poll thread is stuck: it has not renewed
  // its trust since the answer it did not acknowledge was sent.
  proto::CacheSession a = Join(kMountA);
  caches_->RecordInode(a, kFile);
  ChangedKeys chmod;
  chmod.origin_mount = kMountB;
  chmod.inodes.push_back(kFile);
  caches_->Publish({chmod});  // sent to the held poll
  auto done = Wait();
  for (int i = 0; i < 5; ++i) {
    now_ += absl::Milliseconds(200);
    Watch(kMountA, a.token(), acked_[kMountA]);  // polls, acknowledging nothing new
    caches_->TEST_Tick();
  }
  EXPECT_FALSE(*done);
  now_ += absl::Milliseconds(200);  // a lease + margin since it was sent
  caches_->TEST_Tick();
  EXPECT_TRUE(*done);
}

TEST_F(MountCachesTest, ResetsEndUnderLoad) {
  // A session's reset covers what was queued before it; what comes after
  // is queued as usual, so acknowledging the reset ends it.
  proto::CacheSession a = Join(kMountA);
  for (uint64_t ino = 100; ino < 110; ++ino) caches_->RecordInode(a, ino);  // everything
  ChangedKeys change;
  change.origin_mount = kMountB;
  change.inodes.push_back(5000);
  for (int i = 0; i < 6; ++i) caches_->Publish({change});  // past queue_max: a reset
  Poll reset = Watch(kMountA, a.token(), acked_[kMountA]);
  ASSERT_TRUE(reset.answer->has_value());
  ASSERT_TRUE((*reset.answer)->reset());
  caches_->RecordInode(a, 5000);  // looked up again after the reset
  caches_->Publish({change});     // more load meanwhile
  Poll next = Watch(kMountA, a.token(), (*reset.answer)->seq());
  ASSERT_TRUE(next.answer->has_value());
  EXPECT_FALSE((*next.answer)->reset());
  ASSERT_EQ((*next.answer)->invalidations_size(), 1);
  EXPECT_EQ((*next.answer)->invalidations(0).ino(), 5000u);
  auto done = Wait();
  Watch(kMountA, a.token(), (*next.answer)->seq());
  EXPECT_TRUE(*done);
}

TEST_F(MountCachesTest, HeldPollsAreAnsweredEmptyAfterAQuarterLease) {
  proto::CacheSession a = Join(kMountA);
  Poll held = Watch(kMountA, a.token(), acked_[kMountA]);
  now_ += absl::Milliseconds(249);
  caches_->TEST_Tick();
  EXPECT_FALSE(held.answer->has_value());
  now_ += absl::Milliseconds(1);
  caches_->TEST_Tick();
  ASSERT_TRUE(held.answer->has_value());
  EXPECT_EQ((*held.answer)->invalidations_size(), 0);
  EXPECT_EQ((*held.answer)->cache_lease_ms(), 1000u);
}

TEST_F(MountCachesTest, AMountWithAChangeInFlightIsNotWaitedFor) {
  // Its kernel may hold the directory's lock until its own change returns.
  proto::CacheSession a = Join(kMountA);
  caches_->RecordDir(a, kDir);
  caches_->BeginChange(kMountA);
  caches_->Publish({Entry(kMountB, kDir, "x")});
  EXPECT_TRUE(*Wait());
  caches_->EndChange(kMountA);
  caches_->Publish({Entry(kMountB, kDir, "y")});
  EXPECT_FALSE(*Wait());
}

TEST_F(MountCachesTest, AChangeWaitsForItsOwnInvalidationsOnly) {
  proto::CacheSession a = Join(kMountA);
  caches_->RecordDir(a, kDir);
  caches_->RecordInode(a, kFile);
  ChangedKeys first = Entry(kMountB, kDir, "x");
  first.origin_call = 1;
  ChangedKeys second;
  second.origin_mount = kMountB;
  second.origin_call = 2;
  second.inodes.push_back(kFile);
  caches_->Publish({first});
  caches_->Publish({second});
  ASSERT_TRUE(held_[kMountA].answer->has_value());  // the first
  const uint64_t first_seq = (*held_[kMountA].answer)->seq();
  auto first_done = Wait(kMountB, 1);
  auto second_done = Wait(kMountB, 2);
  Poll poll = Watch(kMountA, a.token(), first_seq);  // A applied the first only
  EXPECT_TRUE(*first_done);
  EXPECT_FALSE(*second_done);
  ASSERT_TRUE(poll.answer->has_value());
  Watch(kMountA, a.token(), (*poll.answer)->seq());
  EXPECT_TRUE(*second_done);
  // A change that invalidated nobody does not wait for others' debts.
  ChangedKeys third = Entry(kMountB, kDir + 5, "z");
  third.origin_call = 3;
  caches_->Publish({third, Entry(kMountB, kDir, "w")});
  EXPECT_TRUE(*Wait(kMountB, 3));
}

TEST_F(MountCachesTest, AChangeDoesNotOweWhatAnEarlierChangeQueued) {
  proto::CacheSession a = Join(kMountA);
  caches_->RecordDir(a, kDir);
  ChangedKeys first = Entry(kMountB, kDir, "x");  // A owes it, unacknowledged
  first.origin_call = 1;
  ChangedKeys second = Entry(kMountB, kDir + 5, "y");  // nobody cached kDir + 5
  second.origin_call = 2;
  caches_->Publish({first, second});
  EXPECT_FALSE(*Wait(kMountB, 1));
  EXPECT_TRUE(*Wait(kMountB, 2));
}

TEST_F(MountCachesTest, AChangeDoesNotWaitForLaterInvalidations) {
  proto::CacheSession a = Join(kMountA);
  caches_->RecordDir(a, kDir);
  auto first = Wait();  // nothing owed yet
  EXPECT_TRUE(*first);
  caches_->Publish({Entry(kMountB, kDir, "x")});
  auto second = Wait();
  EXPECT_FALSE(*second);
}

TEST_F(MountCachesTest, ARestartedMetaHoldsChangesForOneLease) {
  Make(/*restarted=*/true);
  auto done = Wait();
  EXPECT_FALSE(*done);  // mounts may still trust the previous meta's answers
  now_ += absl::Milliseconds(1100);
  caches_->TEST_Tick();
  EXPECT_TRUE(*done);
  EXPECT_TRUE(*Wait());
}

TEST_F(MountCachesTest, ALookupRacingAChangeGetsAnInvalidationToo) {
  proto::CacheSession a = Join(kMountA);
  const uint64_t position = caches_->ReadPosition();
  ChangedKeys chmod;
  chmod.origin_mount = kMountB;
  chmod.inodes.push_back(kFile);
  caches_->Publish({chmod});  // between the lookup's read and its record
  EXPECT_TRUE(caches_->RecordInodeRead(a, kFile, position, /*invalidate=*/true));
  Poll poll = Watch(kMountA, a.token(), acked_[kMountA]);
  ASSERT_TRUE(poll.answer->has_value());
  ASSERT_EQ((*poll.answer)->invalidations_size(), 1);
  EXPECT_EQ((*poll.answer)->invalidations(0).ino(), kFile);
  // A read after the change owes nothing.
  EXPECT_FALSE(caches_->RecordInodeRead(a, kFile + 1, caches_->ReadPosition(), true));
  Poll after = Watch(kMountA, a.token(), (*poll.answer)->seq());
  EXPECT_FALSE(after.answer->has_value());
}

TEST_F(MountCachesTest, BoundsEndInEverythingOrAReset) {
  proto::CacheSession a = Join(kMountA);
  for (uint64_t ino = 100; ino < 110; ++ino) caches_->RecordInode(a, ino);  // past inodes_max
  ChangedKeys change;
  change.origin_mount = kMountB;
  change.inodes.push_back(5000);  // never recorded: "everything" covers it
  caches_->Publish({change});
  ASSERT_TRUE(held_[kMountA].answer->has_value());
  ASSERT_EQ((*held_[kMountA].answer)->invalidations_size(), 1);
  EXPECT_EQ((*held_[kMountA].answer)->invalidations(0).ino(), 5000u);
  for (int i = 0; i < 5; ++i) caches_->Publish({change});  // past queue_max
  Poll poll = Watch(kMountA, a.token(), acked_[kMountA]);
  ASSERT_TRUE(poll.answer->has_value());
  EXPECT_TRUE((*poll.answer)->reset());
  EXPECT_EQ((*poll.answer)->invalidations_size(), 0);
  EXPECT_EQ(caches_->stats().resets, 1u);
  auto done = Wait();
  EXPECT_FALSE(*done);
  Watch(kMountA, a.token(), (*poll.answer)->seq());
  EXPECT_TRUE(*done);
}

TEST_F(MountCachesTest, UnknownSessionsRecordNothing) {
  proto::CacheSession stale;
  stale.set_mount_id(kMountA);
  stale.set_token(12345);
  caches_->RecordDir(stale, kDir);
  proto::CacheSession a = Join(kMountA);
  caches_->Publish({Entry(kMountB, kDir, "x")});
  EXPECT_TRUE(*Wait());
  (void)a;
}

}  // namespace
}  // namespace logfs::meta

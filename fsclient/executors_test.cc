// Executors: each thread knows its executor, the wait rule holds at
// compile time and is CHECKed at run time, and shutdown joins in order.
#include "fsclient/executors.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <string>

#include "absl/synchronization/notification.h"

namespace logfs::fsclient {
namespace {

static_assert(MayWaitOn(Executor::kCaller, Executor::kWaiting));
static_assert(MayWaitOn(Executor::kCaller, Executor::kIo));
static_assert(MayWaitOn(Executor::kWaiting, Executor::kRecovery));
static_assert(MayWaitOn(Executor::kWaiting, Executor::kIo));
static_assert(MayWaitOn(Executor::kRecovery, Executor::kIo));
static_assert(!MayWaitOn(Executor::kWaiting, Executor::kWaiting), "a pool never waits on itself");
static_assert(!MayWaitOn(Executor::kRecovery, Executor::kWaiting));
static_assert(!MayWaitOn(Executor::kIo, Executor::kIo), "io threads never block");

Executor CurrentOn(Executors& executors, Executor where) {
  std::promise<Executor> seen;
  auto record = [&seen] { seen.set_value(Executors::Current()); };
  switch (where) {
    case Executor::kWaiting:
      executors.PostWaiting(record);
      break;
    case Executor::kRecovery:
      executors.PostRecovery(record);
      break;
    case Executor::kIo:
      asio::post(executors.io(), record);
      break;
    case Executor::kHeartbeat:
      executors.StartHeartbeat(record);
      break;
    case Executor::kCaller:
      record();
      break;
  }
  return seen.get_future().get();
}

TEST(ExecutorsTest, EachThreadKnowsItsExecutor) {
  Executors executors({.io_threads = 1, .waiting_threads = 2, .recovery_threads = 1});
  executors.StartIo();
  for (Executor e : {Executor::kCaller, Executor::kWaiting, Executor::kRecovery, Executor::kIo,
                     Executor::kHeartbeat}) {
    EXPECT_EQ(e, CurrentOn(executors, e)) << ExecutorName(e);
  }
  EXPECT_EQ(Executor::kCaller, Executors::Current());
}

TEST(ExecutorsTest, AWaitingJobMayWaitForARecoveryAndShutdownRunsBoth) {
  std::atomic<int> ran{0};
  {
    Executors executors({.io_threads = 1, .waiting_threads = 1, .recovery_threads = 1});
    executors.StartIo();
    executors.PostWaiting([&] {
      Executors::CheckMayWaitOn(Executor::kRecovery, "the test's recovery");
      absl::Notification recovered;
      executors.PostRecovery([&] {
        ++ran;
        recovered.Notify();
      });
      recovered.WaitForNotification();
      ++ran;
    });
    executors.Shutdown();
    EXPECT_EQ(2, ran.load());
  }
  EXPECT_EQ(2, ran.load());
}

TEST(ExecutorsDeathTest, AWaitingJobThatWouldWaitOnTheWaitingPoolDies) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Executors executors({.io_threads = 1, .waiting_threads = 1, .recovery_threads = 1});
        absl::Notification checked;  // never, if the check fires
        executors.PostWaiting([&] {
          Executors::CheckMayWaitOn(Executor::kWaiting, "a writer's close");
          checked.Notify();
        });
        checked.WaitForNotification();
      },
      "executor 'waiting' would wait on 'waiting' \\(a writer's close\\)");
}

TEST(ExecutorsDeathTest, AnIoThreadThatWouldBlockDies) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Executors executors({.io_threads = 1, .waiting_threads = 1, .recovery_threads = 1});
        executors.StartIo();
        absl::Notification checked;  // never, if the check fires
        asio::post(executors.io(), [&] {
          Executors::CheckMayWaitOn(Executor::kIo, "a meta call");
          checked.Notify();
        });
        checked.WaitForNotification();
      },
      "executor 'io' would wait on 'io'");
}

}  // namespace
}  // namespace logfs::fsclient

// The threads of a Client, one executor per job, and the one rule between
// them: a thread may block waiting for work of an executor that comes
// after its own in `Executor`'s order, never of its own or of one before
// it. So no pool waits on itself (a pool of N threads whose jobs wait for
// jobs queued behind them deadlocks once N of them wait) and waits never
// form a cycle. Each thread an Executors starts knows its executor
// (Current()); a blocking wait states what it waits on with
// CheckMayWaitOn, which CHECKs the rule, so a wrong hand-off fails at
// once in tests instead of hanging a mount under load. As Folly's named
// executors and Seastar's scheduling groups name where work runs, here
// the name also says what the work may wait for.
//
// Thread-safe: Post* and io() from any thread. Shutdown once, from a
// thread none of these started (a kCaller thread); it joins the pools in
// the rule's order and then stops the io threads, dropping io handlers
// not yet run.
#pragma once

#include <asio.hpp>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

namespace logfs::fsclient {

// In the order of the rule: each may wait only on those after it.
enum class Executor : int {
  // Threads that call the Client: FUSE workers, an application's threads.
  // Which calls block them, and on what, is in client.h (a FUSE worker
  // waits on meta, never on a segment server: DESIGN §2).
  kCaller = 0,
  // Work a caller hands over instead of waiting for segment servers: a
  // read from a remote replica, the wait for written bytes to become
  // durable, a writer's close, a WAL writer's full queue or roll.
  kWaiting = 1,
  // A writer's recovery from a failed replica: blocking calls to replicas
  // and meta (wal::FileWriterOptions::run_blocking).
  kRecovery = 2,
  // The lease heartbeat: a blocking call to meta every interval.
  kHeartbeat = 3,
  // Network threads: replies of meta and segment servers. Never block.
  kIo = 4,
};

const char* ExecutorName(Executor executor);

// Whether a thread of `from` may block until work on `on` is done.
constexpr bool MayWaitOn(Executor from, Executor on) {
  return static_cast<int>(from) < static_cast<int>(on);
}

class Executors {
 public:
  struct Options {
    int io_threads = 1;
    // Each waiting job holds a thread while it waits, so more than this
    // many waits at once queue here, not in the kernel.
    int waiting_threads = 16;
    int recovery_threads = 2;
  };
  explicit Executors(Options options);
  ~Executors();  // Shutdown()

  Executors(const Executors&) = delete;
  Executors& operator=(const Executors&) = delete;

  // The executor of the calling thread: kCaller for a thread none of
  // these started.
  static Executor Current();
  // CHECKs that the calling thread may block until work on `on` is done
  // (MayWaitOn(Current(), on)); `what` names the wait in the message.
  static void CheckMayWaitOn(Executor on, const char* what);

  // The io_context the io threads run (RPC clients take it by reference).
  asio::io_context& io() { return io_; }
  // Starts the io threads (before the first RPC).
  void StartIo();
  void PostWaiting(std::function<void()> job);
  void PostRecovery(std::function<void()> job);
  // Runs `loop` on the heartbeat thread; it must return once the owner
  // asks it to (Shutdown joins it first).
  void StartHeartbeat(std::function<void()> loop);

  // Joins the heartbeat thread, then the waiting pool (its jobs finish
  // within their deadlines; they may wait for recoveries), then the
  // recovery pool; returns with the io threads still running, so the
  // owner can close its connections on them (StopIo next). Idempotent.
  void JoinPools();
  // Stops and joins the io threads. Idempotent.
  void StopIo();
  // JoinPools, then StopIo.
  void Shutdown() {
    JoinPools();
    StopIo();
  }

 private:
  const Options options_;
  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::vector<std::thread> io_threads_;
  asio::thread_pool waiting_;
  asio::thread_pool recovery_;
  std::thread heartbeat_;
};

}  // namespace logfs::fsclient

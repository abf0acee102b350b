// FileWriter over a fake WriterDeps: no processes, no sockets. The fake is
// a small cluster in memory (replicas as strings, a meta that places
// segments on the first healthy servers) whose answers come from a
// network thread of its own, as in production. It can fail a server, hold
// a server's appends unanswered, and move a clock that the fsync deadline
// reads, with timers the test fires.
#include "wal/file_writer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "src/status/posix_error.h"
#include "wal/writer_counters.h"

namespace logfs::wal {
namespace {

constexpr absl::Duration kWait = absl::Seconds(20);  // bound of every wait
constexpr int kServers = 6;
constexpr uint32_t kAckQuorum = 2;
constexpr int kReplicas = 3;
constexpr uint64_t kIno = 5;

std::string Address(int server) { return absl::StrCat("s", server); }

class FakeCluster : public WriterDeps {
 public:
  FakeCluster() : network_([this] { RunNetwork(); }) {}
  ~FakeCluster() override { Shutdown(); }

  // Stops the network thread and drops every pending answer and timer (they
  // hold the writer).
  void Shutdown() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return;
      stopped_ = true;
    }
    wake_.notify_all();
    network_.join();
    std::lock_guard<std::mutex> lock(mu_);
    answers_.clear();
    held_.clear();
    timers_.clear();
  }

  // Every call to server `s` fails with kUnavailable from now on.
  void Fail(int s) {
    std::lock_guard<std::mutex> lock(mu_);
    failed_.insert(Address(s));
  }
  // Every later SealAtMeta answers `error` (meta's own error: final).
  void FailMetaSeals(absl::Status error) {
    std::lock_guard<std::mutex> lock(mu_);
    meta_seal_error_ = std::move(error);
  }
  // The next `n` SealAtMeta calls answer `error`, later ones as usual.
  void FailNextMetaSeals(int n, absl::Status error) {
    std::lock_guard<std::mutex> lock(mu_);
    meta_seal_error_ = std::move(error);
    meta_seal_failures_left_ = n;
  }
  // Appends to server `s` are applied at once but answered only at
  // AnswerHeld (a reply lost on its way, or late): the server holds bytes
  // the writer does not know are there.
  void HoldAnswers(int s) {
    std::lock_guard<std::mutex> lock(mu_);
    answers_held_servers_.insert(Address(s));
  }
  // Appends to server `s` are neither applied nor answered (a slow disk).
  void Hold(int s) {
    std::lock_guard<std::mutex> lock(mu_);
    held_servers_.insert(Address(s));
  }
  // Applies and answers the appends held so far, now (the server stays
  // held: later appends wait again). A slow disk's late sync.
  void ReleaseHeld() {
    std::lock_guard<std::mutex> lock(mu_);
    for (HeldAppend& h : held_) AppendAndAnswerLocked(h.address, h.call, *h.data, h.handler);
    held_.clear();
  }
  // Waits (bounded) until every answer queued so far has been delivered.
  bool WaitIdle() {
    std::unique_lock<std::mutex> lock(mu_);
    return idle_.wait_for(lock, std::chrono::seconds(20),
                          [&] { return stopped_ || (answers_.empty() && !answering_); });
  }
  // Appends to server `s` are answered at once again.
  void Unhold(int s) {
    std::lock_guard<std::mutex> lock(mu_);
    held_servers_.erase(Address(s));
  }
  size_t held_appends() {
    std::lock_guard<std::mutex> lock(mu_);
    return held_.size();
  }
  // At the first replica seal, before it, the held appends arrive and are
  // answered: bytes that land after a recovery asked for the replicas'
  // lengths and before it sealed them.
  void ReleaseHeldAtFirstSeal() {
    std::lock_guard<std::mutex> lock(mu_);
    release_held_at_seal_ = true;
  }

  void Advance(absl::Duration d) {
    std::lock_guard<std::mutex> lock(mu_);
    now_ += d;
  }
  // Runs the timers due by now, on the caller's thread.
  void FireDueTimers() {
    for (;;) {
      std::function<void()> fn;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = std::find_if(timers_.begin(), timers_.end(),
                               [&](const auto& t) { return t.first <= now_; });
        if (it == timers_.end()) return;
        fn = std::move(it->second);
        timers_.erase(it);
      }
      fn();
    }
  }
  // Append calls made so far (one per replica per chunk).
  size_t appends() {
    std::lock_guard<std::mutex> lock(mu_);
    return appends_;
  }
  size_t pending_timers() {
    std::lock_guard<std::mutex> lock(mu_);
    return timers_.size();
  }

  // The bytes of segment `id` on server `s`, and whether it is sealed.
  std::string Bytes(uint64_t id, int s) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = replicas_.find({id, Address(s)});
    return it == replicas_.end() ? "<none>" : it->second.bytes;
  }
  bool Sealed(uint64_t id, int s) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = replicas_.find({id, Address(s)});
    return it != replicas_.end() && it->second.sealed;
  }
  // The meta seals seen, in order.
  // Whether placement honours avoid_servers (meta does while enough other
  // servers have room); set before the calls it is to affect.
  std::atomic<bool> honour_avoid{true};

  std::vector<MetaSealCall> meta_seals() {
    std::lock_guard<std::mutex> lock(mu_);
    return meta_seals_;
  }
  proto::Inode inode() {
    std::lock_guard<std::mutex> lock(mu_);
    return inode_;
  }

  // WriterDeps.
  absl::Time Now() override {
    std::lock_guard<std::mutex> lock(mu_);
    return now_;
  }
  void RunAfter(absl::Duration delay, std::function<void()> fn) override {
    std::lock_guard<std::mutex> lock(mu_);
    timers_.emplace_back(now_ + delay, std::move(fn));
  }
  void Append(const std::string& address, const AppendCall& call,
              std::shared_ptr<const std::string> data,
              const std::shared_ptr<ReplicaReplyHandler>& handler, rpc::CallBatch*) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++appends_;
    if (held_servers_.count(address) != 0) {
      held_.push_back({address, call, std::move(data), handler});
      return;
    }
    if (answers_held_servers_.count(address) != 0) {
      AppendLocked(address, call.segment.id, call.offset, *data).IgnoreError();  // never answered
      return;
    }
    AppendAndAnswerLocked(address, call, *data, handler);
  }
  void SyncReplica(const std::string& address, SegmentRef segment, size_t replica,
                   const std::shared_ptr<ReplicaReplyHandler>& handler, rpc::CallBatch*) override {
    std::lock_guard<std::mutex> lock(mu_);
    absl::StatusOr<uint64_t> durable = LengthLocked(address, segment.id);
    Answer([=] { handler->OnReplicaReply(segment.id, replica, true, durable); });
  }
  void SealReplica(const std::string& address, SegmentRef segment, uint64_t length,
                   Done done) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (release_held_at_seal_) {
      release_held_at_seal_ = false;
      held_servers_.clear();
      for (HeldAppend& h : held_) AppendAndAnswerLocked(h.address, h.call, *h.data, h.handler);
      held_.clear();
    }
    absl::Status status = failed_seals_.count(address) != 0
                              ? absl::DataLossError(address + ": fdatasync failed")
                              : SealLocked(address, segment.id, length);
    Answer([done = std::move(done), status] { done(status); });
  }
  std::vector<absl::Status> CreateReplicas(const std::vector<std::string>& addresses,
                                           SegmentRef segment) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<absl::Status> out;
    for (const auto& a : addresses) {
      if (failed_.count(a) != 0) {
        out.push_back(absl::UnavailableError(a + " is down"));
      } else {
        replicas_[{segment.id, a}];
        out.push_back(absl::OkStatus());
      }
    }
    return out;
  }
  std::vector<absl::Status> ReopenReplicas(const std::vector<std::string>& addresses,
                                           SegmentRef segment, uint64_t length) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<absl::Status> out;
    for (const auto& a : addresses) {
      absl::StatusOr<Replica*> r = FindLocked(a, segment.id);
      if (r.ok() && refuse_reopen_.count(a) != 0) r = absl::UnavailableError(a + " refuses");
      if (r.ok() && (!(*r)->sealed || (*r)->bytes.size() != length)) {
        r = absl::FailedPreconditionError("not sealed at that length");
      }
      if (r.ok()) (*r)->sealed = false;
      out.push_back(r.status());
    }
    return out;
  }
  // Every later seal of a replica on server `s` fails (its disk failed).
  void FailSeals(int s) {
    std::lock_guard<std::mutex> lock(mu_);
    failed_seals_.insert(Address(s));
  }
  // ReopenReplicas fails on server `s` (an older server, a full disk).
  void RefuseReopen(int s) {
    std::lock_guard<std::mutex> lock(mu_);
    refuse_reopen_.insert(Address(s));
  }

  std::vector<absl::StatusOr<uint64_t>> ReplicaLengths(const std::vector<std::string>& addresses,
                                                       uint64_t segment_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<absl::StatusOr<uint64_t>> out;
    for (const auto& a : addresses) out.push_back(LengthLocked(a, segment_id));
    return out;
  }
  absl::Status FillReplica(const std::string& address, SegmentRef segment, uint64_t offset,
                           std::string data) override {
    std::lock_guard<std::mutex> lock(mu_);
    return AppendLocked(address, segment.id, offset, data).status();
  }
  void SealAtMeta(const MetaSealCall& call, InodeDone done) override {
    std::lock_guard<std::mutex> lock(mu_);
    meta_seals_.push_back(call);
    const bool fail = !meta_seal_error_.ok() && meta_seal_failures_left_ != 0;
    if (fail && meta_seal_failures_left_ > 0) --meta_seal_failures_left_;
    absl::StatusOr<proto::Inode> inode =
        fail ? absl::StatusOr<proto::Inode>(meta_seal_error_) : MetaSealLocked(call);
    Answer([done = std::move(done), inode] { done(inode); });
  }
  absl::Status TruncateAtMeta(uint64_t, uint64_t, std::optional<proto::CallId>) override {
    std::lock_guard<std::mutex> lock(mu_);
    inode_.clear_segments();
    return absl::OkStatus();
  }

 private:
  struct Replica {
    std::string bytes;
    bool sealed = false;
  };

  struct HeldAppend {
    std::string address;
    AppendCall call;
    std::shared_ptr<const std::string> data;
    std::shared_ptr<ReplicaReplyHandler> handler;
  };

  void AppendAndAnswerLocked(const std::string& address, const AppendCall& call,
                             absl::string_view data,
                             const std::shared_ptr<ReplicaReplyHandler>& handler) {
    absl::StatusOr<uint64_t> durable = AppendLocked(address, call.segment.id, call.offset, data);
    Answer([=] { handler->OnReplicaReply(call.segment.id, call.replica, false, durable); });
  }
  void Answer(std::function<void()> answer) {
    answers_.push_back(std::move(answer));
    wake_.notify_all();
  }
  void RunNetwork() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      wake_.wait(lock, [&] { return stopped_ || !answers_.empty(); });
      if (stopped_) return;
      std::function<void()> answer = std::move(answers_.front());
      answers_.pop_front();
      answering_ = true;
      lock.unlock();
      answer();
      lock.lock();
      answering_ = false;
      idle_.notify_all();
    }
  }
  absl::StatusOr<Replica*> FindLocked(const std::string& address, uint64_t segment_id) {
    if (failed_.count(address) != 0) return absl::UnavailableError(address + " is down");
    auto it = replicas_.find({segment_id, address});
    if (it == replicas_.end()) return absl::NotFoundError("no such replica");
    return &it->second;
  }
  absl::StatusOr<uint64_t> LengthLocked(const std::string& address, uint64_t segment_id) {
    absl::StatusOr<Replica*> r = FindLocked(address, segment_id);
    if (!r.ok()) return r.status();
    return (*r)->bytes.size();
  }
  absl::StatusOr<uint64_t> AppendLocked(const std::string& address, uint64_t segment_id,
                                        uint64_t offset, absl::string_view data) {
    absl::StatusOr<Replica*> found = FindLocked(address, segment_id);
    if (!found.ok()) return found.status();
    Replica& r = **found;
    if (r.sealed) return absl::FailedPreconditionError("sealed");
    if (offset != r.bytes.size()) return absl::OutOfRangeError("append not at the end");
    r.bytes.append(data.data(), data.size());
    return r.bytes.size();
  }
  absl::Status SealLocked(const std::string& address, uint64_t segment_id, uint64_t length) {
    absl::StatusOr<Replica*> found = FindLocked(address, segment_id);
    if (!found.ok()) return found.status();
    Replica& r = **found;
    // As a segment server: a sealed replica takes its own length again,
    // and refuses any other.
    if (r.sealed) {
      return length == r.bytes.size() ? absl::OkStatus()
                                      : absl::FailedPreconditionError("already sealed");
    }
    if (length > r.bytes.size()) return absl::OutOfRangeError("seal past the end");
    r.bytes.resize(length);
    r.sealed = true;
    return absl::OkStatus();
  }
  absl::StatusOr<proto::Inode> MetaSealLocked(const MetaSealCall& call) {
    if (call.segment_id == 0 && call.continue_below_bytes > 0 && inode_.segments_size() > 0) {
      // As meta: the last segment, sealed and short enough, goes on.
      proto::Segment* last = inode_.mutable_segments(inode_.segments_size() - 1);
      if (last->sealed() && last->length() > 0 && last->length() < call.continue_below_bytes) {
        last->set_sealed(false);
        last->set_epoch(last->epoch() + 1);
        return inode_;
      }
    }
    if (call.segment_id != 0) {
      proto::Segment* open = inode_.mutable_segments(inode_.segments_size() - 1);
      if (open->id() != call.segment_id || open->sealed()) {
        return absl::FailedPreconditionError("not the open segment");
      }
      open->set_sealed(true);
      open->set_length(call.sealed_length);
      auto* replicas = open->mutable_replicas();
      for (int i = replicas->size() - 1; i >= 0; --i) {
        const uint64_t id = replicas->Get(i).server_id();
        if (std::count(call.failed_servers.begin(), call.failed_servers.end(), id) != 0) {
          replicas->DeleteSubrange(i, 1);
        }
      }
    }
    if (!call.close && !call.keep_lease) {
      proto::Segment* next = inode_.add_segments();
      next->set_id(next_segment_id_++);
      next->set_epoch(1);
      next->set_ack_quorum(kAckQuorum);
      // The first healthy servers, none avoided (meta's placement honours
      // avoid_servers while enough others have room).
      for (int s = 1; s <= kServers && next->replicas_size() < kReplicas; ++s) {
        if (std::count(call.failed_servers.begin(), call.failed_servers.end(), s) != 0) continue;
        if (honour_avoid &&
            std::count(call.avoid_servers.begin(), call.avoid_servers.end(), s) != 0) {
          continue;
        }
        proto::Replica* r = next->add_replicas();
        r->set_server_id(s);
        r->set_address(Address(s));
      }
    }
    return inode_;
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable idle_;  // an answer was delivered
  bool answering_ = false;        // the network thread runs one
  bool stopped_ = false;
  std::deque<std::function<void()>> answers_;
  std::vector<HeldAppend> held_;
  bool release_held_at_seal_ = false;
  std::set<std::string> failed_;
  std::set<std::string> held_servers_;
  std::map<std::pair<uint64_t, std::string>, Replica> replicas_;
  std::vector<MetaSealCall> meta_seals_;
  absl::Status meta_seal_error_;
  int meta_seal_failures_left_ = -1;  // -1: every one, while meta_seal_error_ is set
  std::set<std::string> answers_held_servers_;
  std::set<std::string> refuse_reopen_;
  std::set<std::string> failed_seals_;
  std::vector<std::pair<absl::Time, std::function<void()>>> timers_;
  absl::Time now_ = absl::FromUnixSeconds(1'000'000);
  uint64_t next_segment_id_ = 1;
  size_t appends_ = 0;
  proto::Inode inode_;
  std::thread network_;  // last: started once the rest is built
};

// Runs the writer's recoveries on threads of their own, joined at the end.
class Jobs {
 public:
  ~Jobs() { JoinAll(); }
  // Joins the jobs started so far.
  void JoinAll() {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
  }
  std::function<void(std::function<void()>)> Runner() {
    return [this](std::function<void()> job) {
      std::lock_guard<std::mutex> lock(mu_);
      threads_.emplace_back(std::move(job));
    };
  }

 private:
  std::mutex mu_;
  std::vector<std::thread> threads_;
};

// The status a Sync ends with, waited for with a bound.
struct SyncResult {
  absl::Notification done;
  absl::Status status;
  FileWriter::SyncCallback callback() {
    return [this](absl::Status s) {
      status = std::move(s);
      done.Notify();
    };
  }
  bool Wait() { return done.WaitForNotificationWithTimeout(kWait); }
};

class FileWriterTest : public ::testing::Test {
 protected:
  void SetUp() override { cluster_ = std::make_shared<FakeCluster>(); }
  void TearDown() override {
    writer_.reset();
    cluster_->Shutdown();
  }

  void Open(FileWriterOptions options, proto::FileKind kind = proto::KIND_WAL) {
    OpenAgain(std::move(options), proto::Inode(), kind);
  }
  // A writer of the file as `inode` (meta's) has it: a reopen for append.
  void OpenAgain(FileWriterOptions options, proto::Inode inode,
                 proto::FileKind kind = proto::KIND_WAL) {
    options.run_blocking = jobs_.Runner();
    inode.mutable_attr()->set_kind(kind);
    inode.mutable_attr()->set_ino(kIno);
    inode.set_ack_quorum(kAckQuorum);
    writer_ = FileWriter::Create(options, inode, cluster_);
  }
  absl::Status Sync() {
    SyncResult result;
    writer_->Sync(result.callback());
    if (!result.Wait()) return absl::DeadlineExceededError("sync did not complete");
    return result.status;
  }
  // The file as a reader of the mount sees it, read from the first replica
  // of each segment.
  std::string Contents() {
    std::string out;
    for (const proto::Segment& s : writer_->ReadableSegments()) {
      if (s.replicas_size() == 0) continue;
      out += cluster_->Bytes(s.id(), static_cast<int>(s.replicas(0).server_id()))
                 .substr(0, s.length());
    }
    return out;
  }

  Jobs jobs_;  // first: joined after the writer is gone
  std::shared_ptr<FakeCluster> cluster_;
  std::shared_ptr<FileWriter> writer_;
};

TEST_F(FileWriterTest, RollSealsTheFullSegmentAndOpensTheNext) {
  // Goal: a write that crosses segment_bytes seals the full segment on its
  // replicas and in meta once it is acked, and the rest of the write goes
  // to the next segment.
  // Method: 100-byte segments, one write of 250 bytes, then a sync.
  FileWriterOptions options;
  options.segment_bytes = 100;
  Open(options);
  std::string data;
  for (int i = 0; i < 250; ++i) data += static_cast<char>('a' + i % 26);
  // (a) The write rolls twice.
  ASSERT_TRUE(writer_->Write(std::nullopt, data).ok());
  ASSERT_TRUE(Sync().ok());
  EXPECT_EQ(250u, writer_->length());
  EXPECT_EQ(250u, writer_->acked_length());
  // (b) Meta saw the first segment asked for, then two seals that each
  // placed the next.
  std::vector<MetaSealCall> seals = cluster_->meta_seals();
  ASSERT_EQ(3u, seals.size());
  EXPECT_EQ(0u, seals[0].segment_id);
  EXPECT_EQ(1u, seals[1].segment_id);
  EXPECT_EQ(100u, seals[1].sealed_length);
  EXPECT_EQ(0u, seals[1].sealed_file_length);
  EXPECT_EQ(2u, seals[2].segment_id);
  EXPECT_EQ(100u, seals[2].sealed_file_length);
  // (c) Segments 1 and 2 are sealed at 100 on every replica; 3 is open.
  std::vector<proto::Segment> segments = writer_->ReadableSegments();
  ASSERT_EQ(3u, segments.size());
  for (int s = 1; s <= 3; ++s) {
    EXPECT_TRUE(cluster_->Sealed(1, s));
    EXPECT_EQ(data.substr(0, 100), cluster_->Bytes(1, s));
    EXPECT_EQ(data.substr(100, 100), cluster_->Bytes(2, s));
    EXPECT_FALSE(cluster_->Sealed(3, s));
  }
  EXPECT_TRUE(segments[0].sealed());
  EXPECT_EQ(200u, segments[2].file_offset());
  EXPECT_EQ(50u, segments[2].length());
  EXPECT_EQ(data, Contents());
}

TEST_F(FileWriterTest, UnsyncedWalWritesAreCoalescedIntoOneAppend) {
  // Goal (issue 16 item 1): once a WAL goes unsynced (kLazyAfterAppends
  // writes without a Sync), its writes are held and sent as one append
  // per replica when the coalesce delay passes, when coalesce_bytes are
  // there, or when a Sync asks; before that, and after a Sync, each write
  // is sent at once.
  // Method: 10-byte writes, a 1 ms delay, 100 bytes at most; the fake's
  // clock and timers are driven by hand; appends counted per replica.
  FileWriterOptions options;
  options.coalesce_delay = absl::Milliseconds(1);
  options.coalesce_bytes = 100;
  Open(options);
  const std::string record = "0123456789";
  auto write = [&](int n) {
    for (int i = 0; i < n; ++i) ASSERT_TRUE(writer_->Write(std::nullopt, record).ok());
  };
  // (a) Eager: each of the first kLazyAfterAppends writes is an append.
  write(FileWriter::kLazyAfterAppends);
  ASSERT_TRUE(cluster_->WaitIdle());
  const size_t eager = cluster_->appends();
  EXPECT_EQ(3 * FileWriter::kLazyAfterAppends, eager);
  EXPECT_EQ(320u, cluster_->Bytes(1, 1).size());
  // (b) Lazy: 5 writes wait for the timer, then go as one append each.
  write(5);
  ASSERT_TRUE(cluster_->WaitIdle());
  EXPECT_EQ(eager, cluster_->appends());
  EXPECT_EQ(320u, cluster_->Bytes(1, 1).size());
  EXPECT_EQ(370u, writer_->length());  // accepted, as stat shows it
  cluster_->Advance(absl::Microseconds(999));
  cluster_->FireDueTimers();
  EXPECT_EQ(eager, cluster_->appends());
  cluster_->Advance(absl::Microseconds(1));
  cluster_->FireDueTimers();
  ASSERT_TRUE(cluster_->WaitIdle());
  EXPECT_EQ(eager + 3, cluster_->appends());
  for (int s = 1; s <= 3; ++s) EXPECT_EQ(370u, cluster_->Bytes(1, s).size());
  // (c) A full batch goes at once, no timer needed.
  write(10);
  ASSERT_TRUE(cluster_->WaitIdle());
  EXPECT_EQ(eager + 6, cluster_->appends());
  EXPECT_EQ(470u, cluster_->Bytes(1, 1).size());
  // (d) A Sync sends what waits, and makes the next writes eager again.
  write(2);
  ASSERT_TRUE(Sync().ok());
  EXPECT_EQ(490u, writer_->acked_length());
  EXPECT_EQ(eager + 9, cluster_->appends());
  write(1);
  ASSERT_TRUE(cluster_->WaitIdle());
  EXPECT_EQ(eager + 12, cluster_->appends());
  cluster_->Advance(absl::Seconds(1));
  cluster_->FireDueTimers();  // the timer of (c)'s batch, if any, sends nothing more
  ASSERT_TRUE(cluster_->WaitIdle());
  EXPECT_EQ(eager + 12, cluster_->appends());
  std::string expected;
  for (int i = 0; i < 50; ++i) expected += record;
  EXPECT_EQ(expected, Contents());
}

TEST_F(FileWriterTest, WriteAsyncQueuesWritesThatWouldWaitAndKeepsTheirOrder) {
  // Goal (issue 16 item 4, DESIGN §2): WriteAsync never blocks its caller
  // (a FUSE worker). A write that can be taken at once is answered inline;
  // one that would wait (a roll, a full queue) is queued and answered from
  // a run_waiting thread once taken, and later writes queue behind it.
  // Method: 1000-byte segments and 64 unacked bytes at most; the first
  // write needs the first segment (a roll); then two servers hold their
  // appends, so no quorum acks and the queue fills.
  FileWriterOptions options;
  options.segment_bytes = 1000;
  options.max_unacked_bytes = 64;
  options.run_waiting = jobs_.Runner();
  Open(options);
  struct Answer {
    SyncResult result;
    std::atomic<bool> inline_done{false};
  };
  auto write_async = [&](const std::string& data, Answer* answer) {
    const std::thread::id caller = std::this_thread::get_id();
    writer_->WriteAsync(std::nullopt, data, [answer, caller](absl::Status s) {
      if (std::this_thread::get_id() == caller) answer->inline_done = true;
      answer->result.callback()(std::move(s));
    });
  };
  // (a) No segment yet: queued, answered from a waiting thread.
  Answer first;
  write_async(std::string(10, 'a'), &first);
  ASSERT_TRUE(first.result.Wait());
  EXPECT_TRUE(first.result.status.ok()) << first.result.status;
  EXPECT_FALSE(first.inline_done);
  ASSERT_TRUE(Sync().ok());
  // (b) Room and a segment: taken inline, though no quorum acks it.
  cluster_->Hold(1);
  cluster_->Hold(2);
  Answer second, third;
  write_async(std::string(60, 'b'), &second);
  EXPECT_TRUE(second.inline_done);
  EXPECT_TRUE(second.result.status.ok());
  write_async(std::string(10, 'c'), &third);
  EXPECT_TRUE(third.inline_done);
  // (c) 70 bytes unacked: the next two wait, in order, without blocking.
  Answer fourth, fifth;
  write_async("dddd", &fourth);
  write_async("eeee", &fifth);
  EXPECT_FALSE(fourth.inline_done);
  EXPECT_FALSE(fourth.result.done.HasBeenNotified());
  EXPECT_FALSE(fifth.result.done.HasBeenNotified());
  EXPECT_EQ(80u, writer_->length());
  // (d) The held appends land: the queue drains, in order.
  cluster_->Unhold(1);
  cluster_->Unhold(2);
  cluster_->ReleaseHeld();
  ASSERT_TRUE(fourth.result.Wait());
  ASSERT_TRUE(fifth.result.Wait());
  EXPECT_TRUE(fourth.result.status.ok()) << fourth.result.status;
  EXPECT_TRUE(fifth.result.status.ok()) << fifth.result.status;
  ASSERT_TRUE(Sync().ok());
  EXPECT_EQ(std::string(10, 'a') + std::string(60, 'b') + std::string(10, 'c') + "ddddeeee",
            Contents());
  // (e) A write at the wrong offset still fails with EPERM, inline.
  SyncResult wrong;
  writer_->WriteAsync(3, "x", wrong.callback());
  ASSERT_TRUE(wrong.done.HasBeenNotified());
  EXPECT_EQ(EPERM, AttachedErrno(wrong.status)) << wrong.status;
}

TEST_F(FileWriterTest, AWriteSentFromTheLastQueuedWritesAnswerIsTakenInline) {
  // Goal: the drain of queued writes has ended when the last one is
  // answered: a write sent from that answer (a FUSE worker that replied
  // and writes again) is taken inline, and a wrong offset refused inline,
  // not queued behind a drain with nothing left to do. Before the fix the
  // drain still ran then, which made step (e) of the test above fail now
  // and then.
  // Method: the first write needs a roll, so it is queued; its answer
  // sends a write at the wrong offset and records whether that one was
  // answered before WriteAsync returned.
  FileWriterOptions options;
  options.segment_bytes = 1000;
  options.run_waiting = jobs_.Runner();
  Open(options);
  SyncResult first, wrong;
  std::atomic<bool> wrong_inline{false};
  writer_->WriteAsync(std::nullopt, std::string(10, 'a'), [&](absl::Status s) {
    writer_->WriteAsync(3, "x", wrong.callback());
    wrong_inline = wrong.done.HasBeenNotified();
    first.callback()(std::move(s));
  });
  ASSERT_TRUE(first.Wait());
  EXPECT_TRUE(first.status.ok()) << first.status;
  ASSERT_TRUE(wrong.Wait());
  EXPECT_TRUE(wrong_inline);
  EXPECT_EQ(EPERM, AttachedErrno(wrong.status)) << wrong.status;
  jobs_.JoinAll();
  ASSERT_TRUE(Sync().ok());
  EXPECT_EQ(std::string(10, 'a'), Contents());
}

TEST_F(FileWriterTest, CoalescingOffSendsEveryWrite) {
  // Goal: with a zero coalesce delay an unsynced WAL still sends each
  // write at once (the behaviour before coalescing).
  FileWriterOptions options;
  options.coalesce_delay = absl::ZeroDuration();
  Open(options);
  for (uint64_t i = 0; i < FileWriter::kLazyAfterAppends + 5; ++i) {
    ASSERT_TRUE(writer_->Write(std::nullopt, "0123456789").ok());
  }
  ASSERT_TRUE(cluster_->WaitIdle());
  EXPECT_EQ(3 * (FileWriter::kLazyAfterAppends + 5), cluster_->appends());
  EXPECT_EQ(0u, cluster_->pending_timers());
}

TEST_F(FileWriterTest, MetaOutOfSpaceAtARollFailsTheWriterWithEnospc) {
  // Goal: when meta cannot place the next segment for lack of space, even
  // with no errno attached (RocksDB full answers a bare
  // kResourceExhausted), the writer fails with ENOSPC, as a full local
  // disk does, not EIO.
  // Method: 100-byte segments; the first segment is placed, then every
  // meta seal answers kResourceExhausted; a write past the segment rolls.
  FileWriterOptions options;
  options.segment_bytes = 100;
  Open(options);
  ASSERT_TRUE(writer_->Write(std::nullopt, std::string(50, 'a')).ok());
  ASSERT_TRUE(Sync().ok());
  cluster_->FailMetaSeals(absl::ResourceExhaustedError("metadata db: no space left"));
  absl::Status wrote = writer_->Write(std::nullopt, std::string(100, 'b'));
  absl::Status synced = wrote.ok() ? Sync() : wrote;
  EXPECT_EQ(ENOSPC, AttachedErrno(synced)) << synced;
}

TEST_F(FileWriterTest, ZeroSegmentBytesIsRefusedInsteadOfRollingForever) {
  // Goal: with segment_bytes 0 (no segment can hold a byte) a write fails
  // at once with kInvalidArgument and asks meta for no segment, instead of
  // rolling one empty segment after another forever.
  FileWriterOptions options;
  options.segment_bytes = 0;
  Open(options);
  absl::Status wrote = writer_->Write(std::nullopt, "x");
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, wrote.code()) << wrote;
  EXPECT_TRUE(cluster_->meta_seals().empty());
  EXPECT_EQ(0u, writer_->length());
  EXPECT_TRUE(writer_->Write(std::nullopt, "").ok());
}

TEST_F(FileWriterTest, ReplicaFailingMidStreamRollsAndResendsTheUnackedTail) {
  // Goal: when replicas fail mid-stream, the writer seals the open segment
  // at the acked length on the survivor, rolls to a segment on healthy
  // servers, re-sends the bytes past the seal there, and the sync of them
  // completes; no byte is lost or doubled.
  // Method: ack quorum 2 of 3; "first" is synced everywhere; then servers
  // 2 and 3 fail, so "second" reaches only server 1 (not a quorum).
  FileWriterOptions options;
  Open(options);
  ASSERT_TRUE(writer_->Write(std::nullopt, "first").ok());
  ASSERT_TRUE(Sync().ok());
  // (a) Two of the three replicas fail under the next write.
  cluster_->Fail(2);
  cluster_->Fail(3);
  ASSERT_TRUE(writer_->Write(std::nullopt, "second").ok());
  // (b) Its sync completes once the recovery has re-sent it.
  ASSERT_TRUE(Sync().ok());
  EXPECT_EQ(11u, writer_->acked_length());
  // (c) Segment 1 is sealed at the acked length on the survivor alone;
  // meta dropped the failed replicas and placed segment 2 elsewhere.
  std::vector<MetaSealCall> seals = cluster_->meta_seals();
  ASSERT_EQ(2u, seals.size());
  EXPECT_EQ(1u, seals[1].segment_id);
  EXPECT_EQ(5u, seals[1].sealed_length);
  std::vector<uint64_t> failed = seals[1].failed_servers;
  std::sort(failed.begin(), failed.end());
  EXPECT_EQ((std::vector<uint64_t>{2, 3}), failed);
  EXPECT_TRUE(cluster_->Sealed(1, 1));
  EXPECT_EQ("first", cluster_->Bytes(1, 1)) << "the unacked bytes were cut at the seal";
  std::vector<proto::Segment> segments = writer_->ReadableSegments();
  ASSERT_EQ(2u, segments.size());
  ASSERT_EQ(1, segments[0].replicas_size());
  EXPECT_EQ(1u, segments[0].replicas(0).server_id());
  for (const auto& r : segments[1].replicas()) {
    EXPECT_NE(2u, r.server_id());
    EXPECT_NE(3u, r.server_id());
    EXPECT_EQ("second", cluster_->Bytes(2, static_cast<int>(r.server_id())));
  }
  EXPECT_EQ("firstsecond", Contents());
  // (d) The writer goes on.
  ASSERT_TRUE(writer_->Write(std::nullopt, "!").ok());
  ASSERT_TRUE(Sync().ok());
  EXPECT_EQ("firstsecond!", Contents());
}

TEST_F(FileWriterTest, CloseAfterAFailedRecoverySealsWhereTheRecoveryDid) {
  // Goal: a recovery that sealed the survivors past the acked length (a
  // quorum of them held more than the writer had heard of) and then could
  // not open the next segment leaves the writer failed; Close must seal at
  // that same length, keeping the survivors. Before, Close sealed at the
  // acked length, every survivor refused ("already sealed"), and meta was
  // told to drop them all: the segment kept no replica of its acked bytes.
  // Method: "first" synced on all three; servers 1 and 2 then take
  // "second" without answering, server 3 fails, and meta refuses the
  // roll's seal once; then Close.
  FileWriterOptions options;
  Open(options);
  ASSERT_TRUE(writer_->Write(std::nullopt, "first").ok());
  ASSERT_TRUE(Sync().ok());
  cluster_->HoldAnswers(1);
  cluster_->HoldAnswers(2);
  cluster_->Fail(3);
  cluster_->FailNextMetaSeals(1, absl::UnavailableError("meta is down"));
  ASSERT_TRUE(writer_->Write(std::nullopt, "second").ok());
  // (a) The recovery seals 1 and 2 at 11 bytes, fails at meta: the sync
  // fails, and so does the writer.
  EXPECT_FALSE(Sync().ok());
  jobs_.JoinAll();
  ASSERT_TRUE(cluster_->Sealed(1, 1));
  ASSERT_EQ("firstsecond", cluster_->Bytes(1, 1));
  EXPECT_EQ(5u, writer_->acked_length());
  // (b) Close seals the segment where the recovery did, dropping only the
  // failed server.
  EXPECT_FALSE(writer_->Close().ok()) << "the writer failed; its error stays";
  std::vector<MetaSealCall> seals = cluster_->meta_seals();
  ASSERT_FALSE(seals.empty());
  const MetaSealCall& close = seals.back();
  EXPECT_TRUE(close.close);
  EXPECT_EQ(1u, close.segment_id);
  EXPECT_EQ(11u, close.sealed_length);
  EXPECT_EQ((std::vector<uint64_t>{3}), close.failed_servers);
  EXPECT_EQ("firstsecond", cluster_->Bytes(1, 1));
  EXPECT_EQ("firstsecond", cluster_->Bytes(1, 2));
  proto::Inode inode = cluster_->inode();
  ASSERT_EQ(1, inode.segments_size());
  EXPECT_EQ(2, inode.segments(0).replicas_size()) << "meta kept the survivors";
}

TEST_F(FileWriterTest, ACutOfBufferedBytesDropsThemBeforeTheySail) {
  // Goal: ftruncate of a block file being written, to a length within the
  // bytes still buffered (RocksDB's direct-I/O padding of its last write),
  // drops them: the file is sealed at the cut, the padding never reaches a
  // replica.
  FileWriterOptions options;
  options.append_bytes = 1 << 20;
  Open(options, proto::KIND_BLOCK);
  const std::string data(5000, 'd');
  ASSERT_TRUE(writer_->Write(std::nullopt, data).ok());
  ASSERT_TRUE(writer_->CutTo(4000).ok());
  EXPECT_EQ(4000u, writer_->length());
  ASSERT_TRUE(writer_->Close().ok());
  const MetaSealCall close = cluster_->meta_seals().back();
  EXPECT_TRUE(close.close);
  EXPECT_EQ(4000u, close.sealed_length);
  EXPECT_EQ(data.substr(0, 4000), Contents());
}

TEST_F(FileWriterTest, ACutOfSentBytesSealsTheOpenSegmentThere) {
  // Goal: a cut within bytes already sent (and synced) waits for them to
  // be acked, seals the open segment at the cut on every replica and in
  // meta, keeping the lease; the next write opens a new segment; nothing
  // past the cut is ever re-sent.
  // Method: block file, every write sent at once (append_bytes 1).
  FileWriterOptions options;
  options.append_bytes = 1;
  Open(options, proto::KIND_BLOCK);
  ASSERT_TRUE(writer_->Write(std::nullopt, std::string(5000, 'a')).ok());
  ASSERT_TRUE(Sync().ok());
  ASSERT_TRUE(writer_->CutTo(4000).ok());
  EXPECT_EQ(4000u, writer_->length());
  std::vector<MetaSealCall> seals = cluster_->meta_seals();
  ASSERT_EQ(2u, seals.size());  // the first placement, the cut
  EXPECT_TRUE(seals[1].keep_lease);
  EXPECT_EQ(1u, seals[1].segment_id);
  EXPECT_EQ(4000u, seals[1].sealed_length);
  for (int s = 1; s <= kReplicas; ++s) {
    EXPECT_TRUE(cluster_->Sealed(1, s));
    EXPECT_EQ(std::string(4000, 'a'), cluster_->Bytes(1, s));
  }
  ASSERT_TRUE(writer_->Write(std::nullopt, "end").ok());
  ASSERT_TRUE(writer_->Close().ok());
  EXPECT_EQ(std::string(4000, 'a') + "end", Contents());
  EXPECT_EQ(4003u, cluster_->meta_seals().back().sealed_length + 4000);
}

TEST_F(FileWriterTest, ACutIntoASealedSegmentIsRefused) {
  // Goal: sealed bytes never change (EPERM), nor does a cut grow a file;
  // a cut past them works.
  FileWriterOptions options;
  options.append_bytes = 1;
  options.segment_bytes = 1000;
  Open(options, proto::KIND_BLOCK);
  ASSERT_TRUE(writer_->Write(std::nullopt, std::string(1500, 'b')).ok());
  ASSERT_TRUE(Sync().ok());
  ASSERT_EQ(2u, writer_->ReadableSegments().size()) << "a roll at 1000 bytes";
  EXPECT_EQ(EPERM, AttachedErrno(writer_->CutTo(900)));
  EXPECT_EQ(EPERM, AttachedErrno(writer_->CutTo(1600))) << "past the end";
  absl::Status cut = writer_->CutTo(1200);
  EXPECT_TRUE(cut.ok()) << cut;
  EXPECT_EQ(1200u, writer_->length());
}

TEST_F(FileWriterTest, ACutOfAWalFileIsRefused) {
  // Goal: a WAL file only grows or empties: its readers see acked bytes
  // of the open segment, which a cut would take back.
  Open(FileWriterOptions());
  ASSERT_TRUE(writer_->Write(std::nullopt, "wal").ok());
  EXPECT_EQ(EPERM, AttachedErrno(writer_->CutTo(1)));
  EXPECT_EQ(3u, writer_->length());
}

TEST_F(FileWriterTest, AWriterOfAReopenedWalFileContinuesItsLastSegment) {
  // Goal: the next writer of a WAL file (reopened for append) continues
  // its last, unfull segment: meta gives it back open at a higher epoch,
  // every replica reopens, the bytes go on at its end, and the file keeps
  // one segment however many writers come and go.
  FileWriterOptions options;
  options.continue_below_bytes = 1000;
  Open(options);
  ASSERT_TRUE(writer_->Write(std::nullopt, "first").ok());
  ASSERT_TRUE(writer_->Close().ok());
  for (int round = 0; round < 3; ++round) {
    OpenAgain(options, cluster_->inode());
    const std::string more = absl::StrCat("+", round);
    ASSERT_TRUE(writer_->Write(5 + 2 * round, more).ok()) << "round " << round;
    ASSERT_TRUE(Sync().ok());
    EXPECT_EQ(7u + 2 * round, writer_->acked_length());
    ASSERT_TRUE(writer_->Close().ok());
  }
  proto::Inode inode = cluster_->inode();
  ASSERT_EQ(1, inode.segments_size());
  EXPECT_TRUE(inode.segments(0).sealed());
  EXPECT_EQ(11u, inode.segments(0).length());
  EXPECT_EQ(4u, inode.segments(0).epoch()) << "one epoch per writer";
  EXPECT_EQ(3, inode.segments(0).replicas_size());
  for (int s = 1; s <= kReplicas; ++s) EXPECT_EQ("first+0+1+2", cluster_->Bytes(1, s));
}

TEST_F(FileWriterTest, ASegmentThatCannotBeContinuedEverywhereIsSealedBackAndANewOnePlaced) {
  // Goal: if a replica of the segment meta continued does not reopen (an
  // older server, a full disk), the writer seals them all back where they
  // were, keeps every replica of it, and writes to a new segment that
  // avoids that server.
  FileWriterOptions options;
  options.continue_below_bytes = 1000;
  Open(options);
  ASSERT_TRUE(writer_->Write(std::nullopt, "first").ok());
  ASSERT_TRUE(writer_->Close().ok());
  cluster_->RefuseReopen(2);
  OpenAgain(options, cluster_->inode());
  ASSERT_TRUE(writer_->Write(std::nullopt, "second").ok());
  ASSERT_TRUE(writer_->Close().ok());
  proto::Inode inode = cluster_->inode();
  ASSERT_EQ(2, inode.segments_size());
  EXPECT_EQ(5u, inode.segments(0).length());
  EXPECT_EQ(3, inode.segments(0).replicas_size()) << "its replicas all hold it, sealed";
  for (int s = 1; s <= kReplicas; ++s) {
    EXPECT_TRUE(cluster_->Sealed(1, s));
    EXPECT_EQ("first", cluster_->Bytes(1, s));
  }
  for (const auto& r : inode.segments(1).replicas()) EXPECT_NE(2u, r.server_id());
  EXPECT_EQ("firstsecond", Contents());
}

TEST_F(FileWriterTest, CloseAfterARecoveryThatSealedTooFewReplicasKeepsTheOnesThatDid) {
  // Goal: a recovery that seals fewer replicas than the ack quorum at a
  // length past the acked one fails; Close then seals at that length too,
  // which the replica already sealed there takes, so meta keeps it with
  // the acked bytes. Before, Close sealed at the acked length, the sealed
  // replica refused, and meta dropped every replica.
  // Method: "first" synced everywhere; servers 1 and 2 take "second"
  // without answering, server 3 fails, and server 2's seals fail.
  FileWriterOptions options;
  Open(options);
  ASSERT_TRUE(writer_->Write(std::nullopt, "first").ok());
  ASSERT_TRUE(Sync().ok());
  cluster_->HoldAnswers(1);
  cluster_->HoldAnswers(2);
  cluster_->FailSeals(2);
  cluster_->Fail(3);
  ASSERT_TRUE(writer_->Write(std::nullopt, "second").ok());
  EXPECT_FALSE(Sync().ok()) << "one replica sealed: fewer than the ack quorum";
  jobs_.JoinAll();
  ASSERT_TRUE(cluster_->Sealed(1, 1));
  EXPECT_FALSE(writer_->Close().ok());
  const MetaSealCall close = cluster_->meta_seals().back();
  EXPECT_TRUE(close.close);
  EXPECT_EQ(11u, close.sealed_length);
  std::vector<uint64_t> failed = close.failed_servers;
  std::sort(failed.begin(), failed.end());
  EXPECT_EQ((std::vector<uint64_t>{2, 3}), failed);
  proto::Inode inode = cluster_->inode();
  ASSERT_EQ(1, inode.segments_size());
  ASSERT_EQ(1, inode.segments(0).replicas_size()) << "meta kept the sealed replica";
  EXPECT_EQ(1u, inode.segments(0).replicas(0).server_id());
  EXPECT_EQ("firstsecond", cluster_->Bytes(1, 1));
}

TEST_F(FileWriterTest, AReplicaThatDoesNotTakeTheSealBackLeavesTheSegment) {
  // Goal: when a continuation is refused and a replica then does not take
  // the seal back at the segment's length, meta is told it failed (and
  // drops it, for re-replication), not that every replica holds it.
  FileWriterOptions options;
  options.continue_below_bytes = 1000;
  Open(options);
  ASSERT_TRUE(writer_->Write(std::nullopt, "first").ok());
  ASSERT_TRUE(writer_->Close().ok());
  cluster_->RefuseReopen(2);
  cluster_->FailSeals(3);
  OpenAgain(options, cluster_->inode());
  ASSERT_TRUE(writer_->Write(std::nullopt, "second").ok());
  ASSERT_TRUE(Sync().ok());
  proto::Inode inode = cluster_->inode();
  ASSERT_EQ(2, inode.segments_size());
  EXPECT_EQ(5u, inode.segments(0).length());
  ASSERT_EQ(2, inode.segments(0).replicas_size());
  for (const auto& r : inode.segments(0).replicas()) EXPECT_NE(3u, r.server_id());
  EXPECT_EQ("firstsecond", Contents());
}

TEST_F(FileWriterTest, SyncPastTheFsyncDeadlineFailsTheWriter) {
  // Goal: a sync that no ack quorum answers within fsync_timeout fails with
  // EIO, and so does every later call (sticky; never retried).
  // Method: every replica holds its appends; the fake clock moves past the
  // timeout in two steps, and the test fires the writer's deadline timer.
  FileWriterOptions options;
  options.fsync_timeout = absl::Seconds(1);
  Open(options);
  for (int s = 1; s <= kServers; ++s) cluster_->Hold(s);
  ASSERT_TRUE(writer_->Write(std::nullopt, "lost?").ok());
  SyncResult sync;
  writer_->Sync(sync.callback());
  EXPECT_EQ(3u, cluster_->held_appends());
  ASSERT_EQ(1u, cluster_->pending_timers());
  // (a) Before the deadline the check re-arms and the sync still waits.
  cluster_->Advance(absl::Milliseconds(600));
  cluster_->FireDueTimers();
  EXPECT_FALSE(sync.done.HasBeenNotified());
  EXPECT_EQ(1u, cluster_->pending_timers());
  // (b) Past it the sync fails with EIO.
  cluster_->Advance(absl::Milliseconds(500));
  cluster_->FireDueTimers();
  ASSERT_TRUE(sync.Wait());
  EXPECT_EQ(EIO, AttachedErrno(sync.status)) << sync.status;
  EXPECT_EQ(0u, cluster_->pending_timers()) << "no waiter left: no re-arm";
  // (c) Sticky.
  EXPECT_EQ(EIO, AttachedErrno(writer_->Write(std::nullopt, "more")));
  EXPECT_EQ(EIO, AttachedErrno(Sync()));
  EXPECT_EQ(0u, writer_->acked_length());
}

TEST_F(FileWriterTest, SyncFailsAtItsDeadlineNotAPeriodLater) {
  // Goal: the deadline check, which runs every tenth of fsync_timeout,
  // also runs just past the oldest sync's deadline: a sync fails within
  // fsync_timeout (+1 ms), not up to 10% late (found by the network
  // partitions of tests/partition_fault_test.cc: fsyncs of 5.3-5.5 s with
  // --fsync_timeout_ms=5000).
  FileWriterOptions options;
  options.fsync_timeout = absl::Seconds(1);
  Open(options);
  for (int s = 1; s <= kServers; ++s) cluster_->Hold(s);
  ASSERT_TRUE(writer_->Write(std::nullopt, "lost?").ok());
  SyncResult sync;
  writer_->Sync(sync.callback());
  cluster_->Advance(absl::Milliseconds(950));
  cluster_->FireDueTimers();  // re-armed for 1001 ms after the sync
  EXPECT_FALSE(sync.done.HasBeenNotified());
  cluster_->Advance(absl::Milliseconds(55));
  cluster_->FireDueTimers();
  ASSERT_TRUE(sync.Wait()) << "not failed 1005 ms after a 1 s deadline";
  EXPECT_EQ(EIO, AttachedErrno(sync.status)) << sync.status;
}

TEST_F(FileWriterTest, AcksArrivingDuringARecoveryDoNotPassItsSeal) {
  // Goal: a recovery seals the survivors at a length it picked from their
  // lengths; appends that land on them after that, and whose acks arrive
  // before the seal cuts them away, must not count as acked: the bytes are
  // re-sent to the next segment and acked there. (Counted, they made a
  // sync return before its bytes were anywhere durable, and broke the
  // writer's acked <= sent invariant, a CHECK failure.)
  // Method: ack quorum 2 of 3; "first" synced; server 3 fails and servers
  // 1 and 2 hold the next append, so the recovery finds them at 5 bytes;
  // at the first seal the held appends land and are acked (11 bytes on a
  // quorum) just before the seal at 5.
  FileWriterOptions options;
  Open(options);
  ASSERT_TRUE(writer_->Write(std::nullopt, "first").ok());
  ASSERT_TRUE(Sync().ok());
  cluster_->Hold(1);
  cluster_->Hold(2);
  cluster_->Fail(3);
  cluster_->ReleaseHeldAtFirstSeal();
  ASSERT_TRUE(writer_->Write(std::nullopt, "second").ok());
  // (a) The sync completes, from the next segment.
  ASSERT_TRUE(Sync().ok());
  EXPECT_EQ(11u, writer_->acked_length());
  // (b) Segment 1 is sealed at 5 (the late bytes were cut), and "second"
  // is on segment 2.
  std::vector<MetaSealCall> seals = cluster_->meta_seals();
  ASSERT_EQ(2u, seals.size());
  EXPECT_EQ(5u, seals[1].sealed_length);
  EXPECT_EQ("first", cluster_->Bytes(1, 1));
  EXPECT_EQ("first", cluster_->Bytes(1, 2));
  std::vector<proto::Segment> segments = writer_->ReadableSegments();
  ASSERT_EQ(2u, segments.size());
  EXPECT_EQ(5u, segments[1].file_offset());
  EXPECT_EQ(6u, segments[1].length());
  EXPECT_EQ("firstsecond", Contents());
}

// Slow-replica exclusion (wal/replica_lag.h). The fake's server 3 holds its
// appends (a slow disk); the test moves the clock by `lag` and then lets
// them land: one lag sample of `lag` per write.
class SlowReplicaTest : public FileWriterTest {
 protected:
  static constexpr absl::Duration kLate = absl::Milliseconds(30);  // past the 20 ms default

  // Writes and syncs `data` with server 3 held; its ack lands `lag` after
  // the quorum's. Returns the sync's status (it must not wait for 3).
  absl::Status WriteWithLateReplica(const std::string& data, absl::Duration lag) {
    cluster_->Hold(3);
    absl::Status s = writer_->Write(std::nullopt, data);
    if (s.ok()) s = Sync();
    cluster_->Advance(lag);
    cluster_->ReleaseHeld();
    cluster_->Unhold(3);
    EXPECT_TRUE(cluster_->WaitIdle());  // the late acks have reached the writer
    return s;
  }
  static uint64_t SlowRolls() { return GlobalWriterCounters().slow_replica_rolls.load(); }
};

TEST_F(SlowReplicaTest, AReplicaThatStaysSlowIsRolledAwayFrom) {
  // Goal: a replica whose acks trail the quorum's by more than slow_lag,
  // slow_samples times within the window, is rolled away from at the next
  // write: its replica of the sealed segment stays (not failed), meta is
  // asked to avoid its server, the new segment is elsewhere, and the roll
  // is counted. Method: defaults (20 ms, 4 within 2 s); 4 writes whose
  // acks from server 3 land 30 ms late; then one more write.
  FileWriterOptions options;
  Open(options);
  const uint64_t rolls = SlowRolls();
  std::string expected;
  for (int i = 0; i < 4; ++i) {
    const std::string data = absl::StrCat("r", i);
    expected += data;
    ASSERT_TRUE(WriteWithLateReplica(data, kLate).ok());
  }
  ASSERT_EQ(1u, cluster_->meta_seals().size()) << "no roll before the next write";
  // (a) The next write rolls.
  ASSERT_TRUE(writer_->Write(std::nullopt, "next").ok());
  ASSERT_TRUE(Sync().ok());
  expected += "next";
  EXPECT_EQ(rolls + 1, SlowRolls());
  std::vector<MetaSealCall> seals = cluster_->meta_seals();
  ASSERT_EQ(2u, seals.size());
  EXPECT_EQ(1u, seals[1].segment_id);
  EXPECT_EQ(8u, seals[1].sealed_length);
  EXPECT_TRUE(seals[1].failed_servers.empty()) << "roll, not a failure";
  EXPECT_EQ((std::vector<uint64_t>{3}), seals[1].avoid_servers);
  // (b) Segment 1 keeps its three replicas, sealed with every byte.
  std::vector<proto::Segment> segments = writer_->ReadableSegments();
  ASSERT_EQ(2u, segments.size());
  EXPECT_EQ(3, cluster_->inode().segments(0).replicas_size());
  for (int s = 1; s <= 3; ++s) {
    EXPECT_TRUE(cluster_->Sealed(1, s));
    EXPECT_EQ("r0r1r2r3", cluster_->Bytes(1, s));
  }
  // (c) Segment 2 is away from server 3.
  for (const auto& r : segments[1].replicas()) EXPECT_NE(3u, r.server_id());
  EXPECT_EQ(expected, Contents());
  // (d) Later placements avoid it too (it is listed for a while).
  ASSERT_TRUE(writer_->Close().ok());
  EXPECT_EQ((std::vector<uint64_t>{3}), cluster_->meta_seals().back().avoid_servers);
}

TEST_F(SlowReplicaTest, ASlowServerMetaPlacesAgainIsRolledAwayFromOncePerBackoff) {
  // Goal: when meta places the new segment on the slow server again (no
  // other server has room), the writer does not roll every window, making
  // tiny segments, but at most once per slow_roll_backoff. Method: meta
  // ignores avoid_servers; 4 late writes roll; 4 more within the backoff
  // do not; past the backoff, 4 more roll again.
  FileWriterOptions options;
  Open(options);
  cluster_->honour_avoid = false;
  const uint64_t rolls = SlowRolls();
  auto late_writes_then_one = [&](const std::string& tag) {
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(WriteWithLateReplica(absl::StrCat(tag, i), kLate).ok());
    }
    ASSERT_TRUE(writer_->Write(std::nullopt, tag).ok());
    ASSERT_TRUE(Sync().ok());
  };
  late_writes_then_one("a");
  EXPECT_EQ(rolls + 1, SlowRolls());
  ASSERT_EQ(2u, cluster_->meta_seals().size());
  cluster_->Advance(absl::Seconds(3));  // past the lag window, within the backoff
  late_writes_then_one("b");
  EXPECT_EQ(rolls + 1, SlowRolls()) << "rolled again within the backoff";
  EXPECT_EQ(2u, cluster_->meta_seals().size());
  cluster_->Advance(options.slow_roll_backoff);
  late_writes_then_one("c");
  EXPECT_EQ(rolls + 2, SlowRolls());
  EXPECT_EQ(3u, cluster_->meta_seals().size());
  EXPECT_EQ("a0a1a2a3ab0b1b2b3bc0c1c2c3c", Contents());
}

TEST_F(SlowReplicaTest, OneLateAckIsNotEnough) {
  // Goal: a replica that is late now and then is not rolled away from:
  // fewer than slow_samples slow samples in the window, or as many spread
  // over longer than the window, or samples not over slow_lag. Method: (a)
  // 3 late acks, then fast writes; (b) 3 s later, 2 more late acks (5 in
  // all, never 4 within 2 s); (c) 10 acks 8 ms late (under 20 ms).
  FileWriterOptions options;
  Open(options);
  const uint64_t rolls = SlowRolls();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(WriteWithLateReplica("a", kLate).ok());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(writer_->Write(std::nullopt, "b").ok());
    ASSERT_TRUE(Sync().ok());
  }
  cluster_->Advance(absl::Seconds(3));
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(WriteWithLateReplica("c", kLate).ok());
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(WriteWithLateReplica("d", absl::Milliseconds(8)).ok());
  }
  ASSERT_TRUE(writer_->Write(std::nullopt, "e").ok());
  ASSERT_TRUE(Sync().ok());
  EXPECT_EQ(1u, cluster_->meta_seals().size()) << "no roll";
  EXPECT_EQ(rolls, SlowRolls());
}

TEST_F(SlowReplicaTest, TheQuorumIsNeverWaitedOnByTheSlowReplica) {
  // Goal: syncs complete on the ack quorum while the slow replica has not
  // answered at all; it holds no sync and no write up. Method: server 3
  // holds every append for 20 writes + syncs (the clock does not move:
  // the writer has no sample of it yet); each sync completes, acked
  // length = length; then 3 lands them all, late.
  FileWriterOptions options;
  Open(options);
  cluster_->Hold(3);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(writer_->Write(std::nullopt, "x").ok());
    ASSERT_TRUE(Sync().ok()) << i;
    EXPECT_EQ(static_cast<uint64_t>(i + 1), writer_->acked_length());
  }
  EXPECT_EQ(20u, cluster_->held_appends());
  EXPECT_EQ(std::string(20, 'x'), cluster_->Bytes(1, 1));
  EXPECT_EQ("", cluster_->Bytes(1, 3));
  cluster_->Advance(kLate);
  cluster_->ReleaseHeld();
  cluster_->Unhold(3);
  ASSERT_TRUE(cluster_->WaitIdle());
  EXPECT_EQ(std::string(20, 'x'), cluster_->Bytes(1, 3));
  EXPECT_EQ(1u, cluster_->meta_seals().size()) << "one stall is one sample: no roll";
}

TEST_F(SlowReplicaTest, SlowLagZeroTurnsItOff) {
  // Goal: --slow_replica_ms=0 keeps every replica, however late.
  FileWriterOptions options;
  options.slow_replica.slow_lag = absl::ZeroDuration();
  Open(options);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(WriteWithLateReplica("z", kLate).ok());
  ASSERT_TRUE(writer_->Write(std::nullopt, "z").ok());
  ASSERT_TRUE(Sync().ok());
  EXPECT_EQ(1u, cluster_->meta_seals().size());
}

}  // namespace
}  // namespace logfs::wal

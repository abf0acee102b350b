// The etcd client (store/meta/ha/etcd/etcd_client.h) against a real 3-member etcd
// (src/cluster/etcd_cluster.h, Debian's /usr/bin/etcd on loopback): leases
// and their expiry, a Txn guarded by the leader key's create_revision (the
// meta epoch of issue 14), Range/DeleteRange/Compact, etcd's refusals, and
// member failures: a killed member is skipped, a cluster without quorum fails
// calls within the call deadline and serves again once members return.
#include "store/meta/ha/etcd/etcd_client.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "src/cluster/etcd_cluster.h"

namespace logfs::etcd {
namespace {

constexpr absl::Duration kCallTimeout = absl::Seconds(1);
// What a failing call may take beyond its deadline (scheduling on a loaded
// 2-core test machine).
constexpr absl::Duration kCallMargin = absl::Milliseconds(500);
constexpr absl::Duration kPollInterval = absl::Milliseconds(20);

class EtcdClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(0, access("/usr/bin/etcd", X_OK)) << "etcd-server is not installed";
    char tmpl[] = "/tmp/logfs-etcd-test-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(tmpl));
    dir_ = tmpl;
    cluster::EtcdClusterOptions options;
    options.members = 3;
    options.dir = dir_;
    auto cluster = cluster::EtcdCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster);
    auto client = EtcdClient::Connect({cluster_->endpoints(), kCallTimeout, {}});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }

  void TearDown() override {
    client_.reset();
    cluster_.reset();  // SIGKILLs and reaps every member
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }

  // The single value at `key` ("" if absent).
  std::string Get(const std::string& key) {
    auto kvs = client_->Range(key);
    EXPECT_TRUE(kvs.ok()) << kvs.status();
    if (!kvs.ok() || kvs->empty()) return "";
    return kvs->front().value;
  }

  std::string dir_;
  std::unique_ptr<cluster::EtcdCluster> cluster_;
  std::unique_ptr<EtcdClient> client_;
};

std::vector<std::string> Keys(const std::vector<KeyValue>& kvs) {
  std::vector<std::string> keys;
  for (const KeyValue& kv : kvs) keys.push_back(kv.key);
  return keys;
}

// Goal: a renewed lease lives; one left alone expires after its TTL, taking
// its keys along, and is then kNotFound everywhere. Method: grant 2 s,
// renew, attach a key, stop renewing and poll the key.
TEST_F(EtcdClientTest, LeaseExpiresWithoutRenewal) {
  const absl::Duration ttl = absl::Seconds(2);
  auto lease = client_->GrantLease(ttl);
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(client_->Put("/t/owned", "x", *lease).ok());
  // (a) Renewals answer the full TTL.
  for (int i = 0; i < 3; ++i) {
    auto left = client_->KeepAlive(*lease);
    ASSERT_TRUE(left.ok()) << left.status();
    EXPECT_EQ(ttl, *left);
  }
  const absl::Time renewed = absl::Now();
  auto left = client_->TimeToLive(*lease);
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_GT(*left, absl::ZeroDuration());
  EXPECT_LE(*left, ttl);
  // (b) Unrenewed, the key goes with the lease: not before the TTL ran out
  // (less the time the last renewal took to come back), not long after.
  const absl::Time deadline = renewed + ttl + absl::Seconds(3);
  while (!Get("/t/owned").empty() && absl::Now() < deadline) absl::SleepFor(kPollInterval);
  const absl::Duration lived = absl::Now() - renewed;
  EXPECT_EQ("", Get("/t/owned"));
  EXPECT_GE(lived, ttl - absl::Milliseconds(200));
  // (c) The lease is gone for every call.
  EXPECT_EQ(absl::StatusCode::kNotFound, client_->KeepAlive(*lease).status().code());
  EXPECT_EQ(absl::StatusCode::kNotFound, client_->TimeToLive(*lease).status().code());
  EXPECT_EQ(absl::StatusCode::kNotFound, client_->Put("/t/k", "v", *lease).code());
  EXPECT_EQ(absl::StatusCode::kNotFound, client_->RevokeLease(*lease).code());
}

TEST_F(EtcdClientTest, RevokeDeletesTheLeasesKeys) {
  auto lease = client_->GrantLease(absl::Seconds(30));
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(client_->Put("/t/a", "1", *lease).ok());
  EXPECT_EQ("1", Get("/t/a"));
  ASSERT_TRUE(client_->RevokeLease(*lease).ok());
  EXPECT_EQ("", Get("/t/a"));
  EXPECT_EQ(absl::StatusCode::kNotFound, client_->KeepAlive(*lease).status().code());
}

// The election of issue 14: create the leader key if absent, under the
// candidate's lease; epoch = its create_revision; every write of the holder
// is a Txn guarded by create_revision(leader) == epoch.
class Candidate {
 public:
  Candidate(EtcdClient* client, std::string name) : client_(client), name_(std::move(name)) {}
  // Campaigns once; true if it became the holder.
  bool Campaign() {
    auto lease = client_->GrantLease(absl::Seconds(30));
    EXPECT_TRUE(lease.ok()) << lease.status();
    lease_ = *lease;
    Compare absent{kLeader, Compare::Target::kCreateRevision, Compare::Result::kEqual, 0, ""};
    Op put{Op::Type::kPut, kLeader, name_, "", lease_, 0};
    Op read{Op::Type::kRange, kLeader, "", "", 0, 0};
    auto txn = client_->Txn({absent}, {put}, {read});
    EXPECT_TRUE(txn.ok()) << txn.status();
    if (txn->succeeded) {
      epoch_ = txn->revision;  // the key was created by this txn's revision
      EXPECT_TRUE(txn->ranges.empty());
    } else {
      EXPECT_EQ(1u, txn->ranges.size());
      EXPECT_EQ(1u, txn->ranges[0].size());
      seen_holder_ = txn->ranges[0][0].value;
    }
    return txn->succeeded;
  }
  // A journal write guarded by our epoch; the txn's `succeeded`.
  bool Append(const std::string& key, const std::string& value) {
    Compare held{kLeader, Compare::Target::kCreateRevision, Compare::Result::kEqual, epoch_, ""};
    auto txn = client_->Txn({held}, {Op{Op::Type::kPut, key, value, "", 0, 0}}, {});
    EXPECT_TRUE(txn.ok()) << txn.status();
    return txn.ok() && txn->succeeded;
  }
  int64_t lease() const { return lease_; }
  int64_t epoch() const { return epoch_; }
  const std::string& seen_holder() const { return seen_holder_; }

  static constexpr const char* kLeader = "/logfs/test/meta/leader";

 private:
  EtcdClient* client_;
  std::string name_;
  int64_t lease_ = 0, epoch_ = -1;
  std::string seen_holder_;
};

TEST_F(EtcdClientTest, TxnGuardedByLeaderCreateRevision) {
  Candidate a(client_.get(), "a"), b(client_.get(), "b");
  // (a) a wins, b loses and sees a.
  ASSERT_TRUE(a.Campaign());
  ASSERT_FALSE(b.Campaign());
  EXPECT_EQ("a", b.seen_holder());
  auto leader = client_->Range(Candidate::kLeader);
  ASSERT_TRUE(leader.ok() && leader->size() == 1);
  EXPECT_EQ(a.epoch(), (*leader)[0].create_revision);
  EXPECT_EQ(a.lease(), (*leader)[0].lease);
  // (b) Only the holder's guarded writes apply.
  EXPECT_TRUE(a.Append("/logfs/test/meta/journal/1", "from a"));
  EXPECT_FALSE(b.Append("/logfs/test/meta/journal/2", "from b"));
  // (c) a's lease ends (as if it expired); b takes over with a higher epoch.
  ASSERT_TRUE(client_->RevokeLease(a.lease()).ok());
  ASSERT_TRUE(b.Campaign());
  EXPECT_GT(b.epoch(), a.epoch());
  // (d) The deposed a cannot write any more, b can.
  EXPECT_FALSE(a.Append("/logfs/test/meta/journal/3", "stale a"));
  EXPECT_TRUE(b.Append("/logfs/test/meta/journal/3", "from b"));
  auto journal =
      client_->Range("/logfs/test/meta/journal/", PrefixEnd("/logfs/test/meta/journal/"));
  ASSERT_TRUE(journal.ok()) << journal.status();
  ASSERT_EQ(2u, journal->size());
  EXPECT_EQ("from a", (*journal)[0].value);
  EXPECT_EQ("from b", (*journal)[1].value);
}

TEST_F(EtcdClientTest, RangeWithPrefixAndLimit) {
  for (const char* key : {"/p/c", "/p/a", "/q/x", "/p/b", "/p"}) {
    ASSERT_TRUE(client_->Put(key, absl::StrCat("v", key)).ok());
  }
  int64_t revision = 0;
  auto all = client_->Range("/p/", PrefixEnd("/p/"), 0, &revision);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ((std::vector<std::string>{"/p/a", "/p/b", "/p/c"}), Keys(*all));
  EXPECT_EQ("v/p/a", (*all)[0].value);
  EXPECT_EQ(1, (*all)[0].version);
  EXPECT_GE(revision, (*all)[0].mod_revision);
  auto two = client_->Range("/p/", PrefixEnd("/p/"), 2);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ((std::vector<std::string>{"/p/a", "/p/b"}), Keys(*two));
  auto missing = client_->Range("/none");
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_TRUE(missing->empty());
  // The same through a read-only Txn, two ranges in order.
  auto txn = client_->Txn({},
                          {Op{Op::Type::kRange, "/p/", "", PrefixEnd("/p/"), 0, 1},
                           Op{Op::Type::kRange, "/q/x", "", "", 0, 0}},
                          {});
  ASSERT_TRUE(txn.ok()) << txn.status();
  EXPECT_TRUE(txn->succeeded);
  ASSERT_EQ(2u, txn->ranges.size());
  EXPECT_EQ((std::vector<std::string>{"/p/a"}), Keys(txn->ranges[0]));
  EXPECT_EQ((std::vector<std::string>{"/q/x"}), Keys(txn->ranges[1]));
  EXPECT_EQ(revision, txn->revision);
}

TEST_F(EtcdClientTest, DeleteRangeCountsDeletedKeys) {
  for (const char* key : {"/d/1", "/d/2", "/d/3", "/e"}) ASSERT_TRUE(client_->Put(key, "x").ok());
  auto one = client_->DeleteRange("/d/2");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(1, *one);
  auto rest = client_->DeleteRange("/d/", PrefixEnd("/d/"));
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_EQ(2, *rest);
  auto none = client_->DeleteRange("/d/1");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(0, *none);
  EXPECT_EQ("x", Get("/e"));
}

TEST_F(EtcdClientTest, CompactKeepsCurrentValues) {
  ASSERT_TRUE(client_->Put("/c", "1").ok());
  ASSERT_TRUE(client_->Put("/c", "2").ok());
  int64_t revision = 0;
  ASSERT_TRUE(client_->Range("/c", "", 0, &revision).ok());
  ASSERT_TRUE(client_->Compact(revision).ok());
  EXPECT_EQ("2", Get("/c"));
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, client_->Compact(revision - 1).code());
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, client_->Compact(revision + 1000).code());
}

// etcd's limits (Debian defaults: 1.5 MiB requests, 128 ops per Txn) and a
// Txn writing a key twice come back as kInvalidArgument, and nothing applies.
TEST_F(EtcdClientTest, RefusedRequestsAreInvalidArgument) {
  EXPECT_EQ(absl::StatusCode::kInvalidArgument,
            client_->Put("/big", std::string(1600 * 1024, 'x')).code());
  EXPECT_EQ(absl::StatusCode::kInvalidArgument,
            client_->Put("/big", std::string(3 * 1024 * 1024, 'x')).code());
  std::vector<Op> many;
  for (int i = 0; i < 129; ++i)
    many.push_back(Op{Op::Type::kPut, absl::StrCat("/m/", i), "x", "", 0, 0});
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, client_->Txn({}, many, {}).status().code());
  Op put{Op::Type::kPut, "/dup", "x", "", 0, 0};
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, client_->Txn({}, {put, put}, {}).status().code());
  auto left = client_->Range("/", PrefixEnd("/"));
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_TRUE(left->empty());
}

// Goal: with a follower SIGKILLed, every later call goes through the other
// members at once. The channel balances round-robin over all members, so
// the killed one is one the client was using. A read sent to it before the
// client has seen its connection close is retried on another member; a
// write sent then fails with its outcome unknown (the client cannot tell
// a member that died before the request from one that died after passing
// it to the leader), so the first calls after the kill are reads, one per
// member: round-robin sends one of them to the dead member, if it still
// picks it at all.
TEST_F(EtcdClientTest, KilledMemberIsSkipped) {
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(client_->Put(absl::StrCat("/k/", i), "before").ok());
  auto leader = cluster_->Leader();
  ASSERT_TRUE(leader.ok()) << leader.status();
  const int victim = (*leader + 1) % cluster_->members();
  cluster_->Kill(victim);
  for (int i = 0; i < cluster_->members(); ++i) {
    const absl::Time start = absl::Now();
    EXPECT_EQ("before", Get(absl::StrCat("/k/", i))) << i;
    EXPECT_LT(absl::Now() - start, kCallTimeout) << i;
  }
  for (int i = 0; i < 12; ++i) {
    const absl::Time start = absl::Now();
    const absl::Status put = client_->Put(absl::StrCat("/k/", i), "after");
    ASSERT_TRUE(put.ok()) << i << ": " << put;
    EXPECT_EQ("after", Get(absl::StrCat("/k/", i)));
    EXPECT_LT(absl::Now() - start, kCallTimeout) << i;
  }
  auto lease = client_->GrantLease(absl::Seconds(10));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_TRUE(client_->KeepAlive(*lease).ok());
}

// Goal: with the leader SIGKILLed, writes work again once the two others
// elect a new leader (an election timeout, 500 ms here, plus the vote), and
// every call after that succeeds. Writes sent meanwhile fail (etcd drops
// proposals while there is no leader), each within its deadline.
TEST_F(EtcdClientTest, KilledLeaderIsReplaced) {
  ASSERT_TRUE(client_->Put("/l", "before").ok());
  auto leader = cluster_->Leader();
  ASSERT_TRUE(leader.ok()) << leader.status();
  const absl::Time killed = absl::Now();
  cluster_->Kill(*leader);
  int failures = 0;
  absl::Status put;
  while (!(put = client_->Put("/l", "after")).ok() && absl::Now() < killed + absl::Seconds(5)) {
    EXPECT_TRUE(absl::IsUnavailable(put) || absl::IsDeadlineExceeded(put)) << put;
    ++failures;
  }
  ASSERT_TRUE(put.ok()) << put;
  const absl::Duration failover = absl::Now() - killed;
  std::printf("etcd leader failover: first write %s after the kill, %d failed before\n",
              absl::FormatDuration(failover).c_str(), failures);
  EXPECT_LT(failover, absl::Seconds(3));
  auto next = cluster_->Leader();
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_NE(*leader, *next);
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(client_->Put(absl::StrCat("/l/", i), "x").ok()) << i;
    EXPECT_EQ("after", Get("/l"));
  }
}

// Goal: without quorum every call fails (kUnavailable, or kDeadlineExceeded
// while the survivor still believes in a leader) within the call deadline
// plus a margin, never hanging; with the members back, calls work again.
TEST_F(EtcdClientTest, QuorumLossFailsWithinDeadlineAndRecovers) {
  ASSERT_TRUE(client_->Put("/quorum", "1").ok());
  auto lease = client_->GrantLease(absl::Seconds(30));
  ASSERT_TRUE(lease.ok()) << lease.status();
  cluster_->Kill(1);
  cluster_->Kill(2);
  // (a) Each kind of call fails in time. The survivor notices the lost
  // leader after an election timeout; from then on it refuses at once.
  absl::Duration last;
  for (int round = 0; round < 3; ++round) {
    std::vector<std::pair<std::string, std::function<absl::Status()>>> calls = {
        {"Put", [&] { return client_->Put("/quorum", "2"); }},
        {"Range", [&] { return client_->Range("/quorum").status(); }},
        {"KeepAlive", [&] { return client_->KeepAlive(*lease).status(); }},
    };
    for (auto& [name, call] : calls) {
      const absl::Time start = absl::Now();
      const absl::Status s = call();
      last = absl::Now() - start;
      std::printf("no quorum, round %d: %s failed after %s: %s\n", round, name.c_str(),
                  absl::FormatDuration(last).c_str(), std::string(s.message()).c_str());
      EXPECT_TRUE(absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) << name << ": " << s;
      EXPECT_LE(last, kCallTimeout + kCallMargin) << name;
      EXPECT_NE(std::string::npos, s.message().find(cluster_->endpoint(0))) << s;
    }
  }
  EXPECT_LT(last, kCallTimeout / 2) << "a member without leader should refuse at once";
  // (b) Back with quorum: the next calls succeed.
  ASSERT_TRUE(cluster_->Restart(1).ok());
  ASSERT_TRUE(cluster_->Restart(2).ok());
  ASSERT_TRUE(cluster_->WaitHealthy(absl::Seconds(10)).ok());
  EXPECT_TRUE(client_->KeepAlive(*lease).ok());
  ASSERT_TRUE(client_->Put("/quorum", "3").ok());
  EXPECT_EQ("3", Get("/quorum"));
}

TEST_F(EtcdClientTest, StoppedMemberContinues) {
  ASSERT_TRUE(cluster_->Stop(2).ok());
  EXPECT_FALSE(cluster_->Healthy(2, absl::Milliseconds(200)));
  ASSERT_TRUE(cluster_->Continue(2).ok());
  EXPECT_TRUE(cluster_->WaitHealthy(absl::Seconds(5)).ok());
}

TEST(EtcdClientConnectTest, RefusesBadEndpointsAndAbsentServers) {
  EXPECT_EQ(absl::StatusCode::kInvalidArgument,
            EtcdClient::Connect({{}, kCallTimeout, {}}).status().code());
  EXPECT_EQ(absl::StatusCode::kInvalidArgument,
            EtcdClient::Connect({{"127.0.0.1"}, kCallTimeout, {}}).status().code());
  // Port 1 (tcpmux): nothing listens there on a test machine.
  const absl::Time start = absl::Now();
  auto none = EtcdClient::Connect({{"127.0.0.1:1"}, absl::Milliseconds(300), {}});
  EXPECT_EQ(absl::StatusCode::kUnavailable, none.status().code()) << none.status();
  EXPECT_NE(std::string::npos, none.status().message().find("127.0.0.1:1"));
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(300) + kCallMargin);
}

}  // namespace
}  // namespace logfs::etcd

#include "store/meta/ha/meta_ha.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "src/util/log_rate_limit.h"
#include "store/format/wire_version.h"

namespace logfs::meta {
namespace {

constexpr int64_t kNanosPerMilli = 1000 * 1000;
// Journal records read per etcd range.
constexpr size_t kRecordsPerRead = 256;
// A standby applies at most this many pages per poll before it looks at
// the leader key again.
constexpr int kPagesPerStep = 16;
// An active looks at its members, trims and republishes this often.
constexpr int64_t kActiveStepMs = 1000;
// A replica republishes its applied seq at least this often.
constexpr int64_t kPublishIntervalMs = 5000;
// How long Start tries to reach etcd.
constexpr int64_t kStartTimeoutMs = 10000;

}  // namespace

int64_t MetaHa::SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

absl::StatusOr<std::unique_ptr<MetaHa>> MetaHa::Create(MetaHaOptions options, MetadataDb* db,
                                                       Hooks hooks) {
  if (options.etcd_endpoints.empty()) return absl::InvalidArgumentError("no etcd endpoints");
  if (options.cluster.empty() || options.cluster.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cluster must be a nonempty name without '/', not '", options.cluster, "'"));
  }
  if (options.lease_ttl_ms < 600) {
    return absl::InvalidArgumentError(
        absl::StrCat("the meta lease TTL must be at least 600 ms, not ", options.lease_ttl_ms));
  }
  etcd::EtcdClientOptions etcd_options;
  etcd_options.endpoints = options.etcd_endpoints;
  etcd_options.tls = options.etcd_tls;
  // A renewal must fit in the ttl/2 the active may serve on one.
  etcd_options.call_timeout =
      absl::Milliseconds(std::clamp<int64_t>(options.lease_ttl_ms / 4, 100, 2000));
  auto etcd = etcd::EtcdClient::Connect(etcd_options);
  if (!etcd.ok()) return etcd.status();
  std::unique_ptr<MetaHa> ha(
      new MetaHa(std::move(options), db, std::move(hooks), std::move(*etcd)));
  const int64_t deadline = SteadyNowNs() + kStartTimeoutMs * kNanosPerMilli;
  absl::Status last;
  while (true) {
    const int64_t sent = SteadyNowNs();
    auto lease = ha->etcd_->GrantLease(absl::Milliseconds(ha->options_.lease_ttl_ms));
    if (lease.ok()) {
      ha->lease_.store(*lease);
      ha->valid_until_ns_.store(sent + ha->options_.lease_ttl_ms / 2 * kNanosPerMilli);
      break;
    }
    last = lease.status();
    if (SteadyNowNs() > deadline) {
      return absl::UnavailableError(
          absl::StrCat("cannot reach etcd at ", absl::StrJoin(ha->options_.etcd_endpoints, ","),
                       " for ", kStartTimeoutMs / 1000, " s: ", last.message()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  LOG(INFO) << "meta replica " << ha->options_.advertised_address << " of cluster '"
            << ha->options_.cluster << "' starts as a standby at journal record "
            << db->applied_seq() << " (etcd " << absl::StrJoin(ha->options_.etcd_endpoints, ",")
            << ", lease TTL " << ha->options_.lease_ttl_ms << " ms)";
  return ha;
}

void MetaHa::Begin() {
  CHECK(!ha_thread_.joinable()) << "MetaHa::Begin twice";
  ha_thread_ = std::thread([this] { Run(); });
  keepalive_thread_ = std::thread([this] { KeepAliveLoop(); });
}

MetaHa::MetaHa(MetaHaOptions options, MetadataDb* db, Hooks hooks,
               std::unique_ptr<etcd::EtcdClient> etcd)
    : options_(std::move(options)),
      keys_(options_.cluster),
      db_(db),
      hooks_(std::move(hooks)),
      etcd_(std::move(etcd)),
      reader_(etcd_.get(), options_.cluster, 0) {}

MetaHa::~MetaHa() { Stop(); }

void MetaHa::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (ha_thread_.joinable()) ha_thread_.join();
  if (keepalive_thread_.joinable()) keepalive_thread_.join();
  active_.store(false);
  const int64_t lease = lease_.exchange(0);
  if (lease != 0) etcd_->RevokeLease(lease).IgnoreError();  // best effort: a faster failover
}

bool MetaHa::Pause(int64_t ms) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(ms));
  return !stopping_;
}

bool MetaHa::ServingNow() const {
  return active_.load(std::memory_order_acquire) && !stepped_down_.load() &&
         SteadyNowNs() < valid_until_ns_.load();
}

proto::MetaStateResponse MetaHa::State() const {
  proto::MetaStateResponse state;
  state.set_active(ServingNow());
  state.set_applied_seq(db_->applied_seq());
  state.set_cluster(options_.cluster);
  absl::MutexLock lock(&mu_);
  state.set_meta_epoch(epoch_);
  state.set_active_address(state.active() || !active_.load() ? active_address_ : "");
  return state;
}

void MetaHa::JournalFailed(const absl::Status& why) {
  StepDown(absl::StrCat("its journal failed: ", why.message()));
}

void MetaHa::StepDown(const std::string& why) {
  if (stepped_down_.exchange(true)) return;
  const bool was_active = active_.exchange(false);
  LOG(ERROR) << "meta replica " << options_.advertised_address
             << (was_active ? " stops serving as the active: " : " stops: ") << why;
  if (hooks_.step_down) hooks_.step_down(why);
}

void MetaHa::KeepAliveLoop() {
  const int64_t ttl_ms = options_.lease_ttl_ms;
  while (Pause(ttl_ms / 6)) {
    const int64_t sent = SteadyNowNs();
    int64_t lease = lease_.load();
    if (lease == 0) {
      auto granted = etcd_->GrantLease(absl::Milliseconds(ttl_ms));
      if (granted.ok()) {
        lease_.store(*granted);
        valid_until_ns_.store(sent + ttl_ms / 2 * kNanosPerMilli);
      }
      continue;
    }
    absl::StatusOr<absl::Duration> left = etcd_->KeepAlive(lease);
    if (left.ok()) {
      valid_until_ns_.store(sent + ttl_ms / 2 * kNanosPerMilli);
    } else if (absl::IsNotFound(left.status())) {
      if (active_.load()) {
        StepDown(absl::StrCat("its etcd lease ", lease, " expired"));
        return;
      }
      // A standby's lease only holds its member key: take another.
      lease_.store(0);
    } else {
      LOGFS_LOG_EVERY_MS(WARNING, 5000) << "renewing the meta lease: " << left.status();
    }
    if (active_.load() && SteadyNowNs() >= valid_until_ns_.load()) {
      StepDown(absl::StrCat("its etcd lease was not renewed for ", ttl_ms / 2, " ms"));
      return;
    }
  }
}

void MetaHa::Run() {
  while (!stepped_down_.load()) {
    if (active_.load()) {
      ActiveStep();
      if (!Pause(kActiveStepMs)) return;
    } else {
      StandbyStep();
      if (!Pause(options_.poll_interval_ms)) return;
    }
  }
}

bool MetaHa::CatchUp(int max_pages) {
  const proto::VersionRange own_wire = format::OwnVersion("meta");
  for (int page = 0; page < max_pages; ++page) {
    auto records = reader_.Read(db_->applied_seq() + 1, kRecordsPerRead);
    if (!records.ok()) {
      LOGFS_LOG_EVERY_MS(WARNING, 5000) << "reading the meta journal: " << records.status();
      return false;
    }
    for (const proto::MetaJournalRecord& record : *records) {
      // Written by an active this replica does not share a version with
      // (an active upgraded before its standbys): stop here, and never
      // campaign, rather than apply what it may not understand. 0: 0.1.
      const uint32_t written =
          record.wire_version() != 0 ? record.wire_version() : format::kWireVersionUnstated;
      if (written < own_wire.wire_min() || written > own_wire.wire_max()) {
        proto::VersionRange writer;
        writer.set_wire_min(written);
        writer.set_wire_max(written);
        writer.set_role("meta");
        writer.set_release(absl::StrCat("of wire version ", written));
        LOGFS_LOG_EVERY_MS(ERROR, 5000)
            << "this replica stops applying the journal and never campaigns: "
            << format::CheckPeerVersion(own_wire, writer,
                                        absl::StrCat("journal record ", record.seq(), " (the active)"))
                   .message();
        return false;
      }
      if (absl::Status applied = db_->ApplyJournalRecord(record); !applied.ok()) {
        LOGFS_LOG_EVERY_MS(ERROR, 5000)
            << "applying meta journal record " << record.seq() << ": " << applied;
        return false;
      }
    }
    if (records->size() < kRecordsPerRead) return true;
  }
  return false;
}

void MetaHa::StandbyStep() {
  const int64_t lease = lease_.load();
  auto trimmed = reader_.TrimmedThrough();
  if (!trimmed.ok()) {
    LOGFS_LOG_EVERY_MS(WARNING, 5000) << "reading the meta journal: " << trimmed.status();
    return;
  }
  // Behind the trimmed point: it cannot catch up, but still names the
  // active to clients.
  const bool behind = db_->applied_seq() < *trimmed;
  if (behind && !needs_bootstrap_.exchange(true)) {
    LOG(ERROR) << "this meta replica has applied journal records up to " << db_->applied_seq()
               << " but the journal was trimmed through " << *trimmed
               << ": it cannot catch up and never campaigns. Stop it, and run `logfs meta "
                  "bootstrap --data_dir=... --meta=...` to start it from a peer's checkpoint";
  }
  const bool caught_up = !behind && CatchUp(kPagesPerStep);
  PublishMember(lease);
  auto leader = etcd_->Range(keys_.leader);
  if (!leader.ok()) {
    LOGFS_LOG_EVERY_MS(WARNING, 5000) << "reading the meta leader key: " << leader.status();
    return;
  }
  if (!leader->empty()) {
    absl::MutexLock lock(&mu_);
    epoch_ = static_cast<uint64_t>((*leader)[0].create_revision);
    // Our own address: the key of this replica before it stepped down,
    // until that lease expires. Not an active to send clients to.
    const std::string& holder = (*leader)[0].value;
    active_address_ = holder == options_.advertised_address ? "" : holder;
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    active_address_.clear();
  }
  if (caught_up && lease != 0) Campaign(lease);
}

void MetaHa::Campaign(int64_t lease) {
  etcd::Compare absent;
  absent.key = keys_.leader;
  absent.target = etcd::Compare::Target::kCreateRevision;
  absent.result = etcd::Compare::Result::kEqual;
  absent.number = 0;
  etcd::Op put;
  put.type = etcd::Op::Type::kPut;
  put.key = keys_.leader;
  put.value = options_.advertised_address;
  put.lease = lease;
  auto won = etcd_->Txn({absent}, {put}, {});
  if (!won.ok() || !won->succeeded) return;  // someone else did; seen at the next step
  const auto epoch = static_cast<uint64_t>(won->revision);
  LOG(INFO) << "meta replica " << options_.advertised_address << " won the election: epoch "
            << epoch;
  // A deposed active may have committed records after this replica's last
  // read and before its leader key expired; none can follow now.
  bool drained = false;
  for (int tries = 0; tries < 100 && !drained; ++tries) drained = CatchUp(kPagesPerStep);
  if (!drained) return StepDown("it could not read the journal's end after its election");
  journal_ =
      std::make_unique<EtcdMetaJournal>(etcd_.get(), options_.cluster, static_cast<int64_t>(epoch));
  auto first = reader_.Read(1, 1);
  auto trimmed = reader_.TrimmedThrough();
  if (!first.ok() || !trimmed.ok()) return StepDown("it could not read the journal's start");
  if (first->empty() && *trimmed == 0 && db_->applied_seq() > 0) {
    // A database written before the journal existed (a lone meta made a
    // replica): the others must start from its checkpoint.
    if (!journal_->SetBase(db_->applied_seq()).ok()) return StepDown("it lost its election");
  }
  trimmed_ = std::max(*trimmed, trimmed_);
  if (absl::Status synced = db_->SyncWal(); !synced.ok()) {
    return StepDown(absl::StrCat("syncing its database: ", synced.message()));
  }
  {
    absl::MutexLock lock(&mu_);
    epoch_ = epoch;
    active_address_ = options_.advertised_address;
  }
  if (absl::Status promoted = hooks_.promote(epoch, journal_.get()); !promoted.ok()) {
    return StepDown(absl::StrCat("its promotion failed: ", promoted.message()));
  }
  active_.store(true, std::memory_order_release);
  LOG(INFO) << "meta replica " << options_.advertised_address << " is the active of epoch " << epoch
            << " at journal record " << db_->applied_seq();
}

void MetaHa::PublishMember(int64_t lease) {
  if (lease == 0) return;
  const uint64_t applied = db_->applied_seq();
  const int64_t now = SteadyNowNs();
  if (applied == published_seq_ && now - published_ns_ < kPublishIntervalMs * kNanosPerMilli) {
    return;
  }
  if (etcd_->Put(keys_.Member(options_.advertised_address), absl::StrCat(applied), lease).ok()) {
    published_seq_ = applied;
    published_ns_ = now;
  }
}

void MetaHa::ActiveStep() {
  PublishMember(lease_.load());
  MaybeTrim();
}

void MetaHa::MaybeTrim() {
  const int64_t now = SteadyNowNs();
  if (now - trimmed_ns_ < options_.trim_interval_ms * kNanosPerMilli) return;
  trimmed_ns_ = now;
  int64_t revision = 0;
  auto members =
      etcd_->Range(keys_.members_prefix, etcd::PrefixEnd(keys_.members_prefix), 0, &revision);
  if (!members.ok()) return;
  uint64_t through = db_->applied_seq();
  for (const etcd::KeyValue& member : *members) {
    uint64_t applied = 0;
    if (absl::SimpleAtoi(member.value, &applied)) through = std::min(through, applied);
  }
  const uint64_t applied = db_->applied_seq();
  through = std::min(through, applied > options_.journal_keep_records
                                  ? applied - options_.journal_keep_records
                                  : 0);
  if (through <= trimmed_) return;
  absl::Status trimmed = journal_->Trim(through);
  if (absl::IsFailedPrecondition(trimmed)) return StepDown(std::string(trimmed.message()));
  if (!trimmed.ok()) return;
  trimmed_ = through;
  LOG(INFO) << "trimmed the meta journal through record " << through;
  // Old revisions of deleted records stay in etcd until compacted.
  if (revision > 0) etcd_->Compact(revision).IgnoreError();
}

}  // namespace logfs::meta

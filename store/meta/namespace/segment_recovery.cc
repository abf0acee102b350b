#include "store/meta/namespace/segment_recovery.h"

#include <glog/logging.h>

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "store/meta/namespace/rereplication_task.h"

namespace logfs::meta {
namespace {

// Deadline of recovery's copies to replicas that are behind: a base plus
// one second per kRecoveryCopyBytesPerSecond of the segment. Kept well
// inside a mount's meta call timeout, since OpenWrite waits for them; a
// copy that misses it drops its replica, and re-replication copies it
// later.
constexpr absl::Duration kRecoveryCopyTimeoutBase = absl::Seconds(2);
constexpr uint64_t kRecoveryCopyBytesPerSecond = 64u << 20;

struct Answer {
  uint64_t server_id;
  std::string address;
  proto::SegmentInfoResponse info;
};

// Fences every replica at `fence_epoch` and returns those that answered.
// Fence first, then read lengths: a writer that is still alive can no
// longer add bytes behind the lengths read.
std::vector<Answer> FenceReplicas(SegmentServerApi& servers, const RecoveryPlan& plan,
                                  uint64_t fence_epoch) {
  std::vector<Answer> answers;
  for (const auto& replica : plan.replicas) {
    auto info = servers.Fence(replica.address(), plan.segment_id, fence_epoch);
    if (info.ok()) answers.push_back({replica.server_id(), replica.address(), *info});
  }
  return answers;
}

absl::Status CheckEnoughAnswers(const RecoveryPlan& plan, const std::vector<Answer>& answers) {
  const size_t replicas = plan.replicas.size();
  const size_t needed = replicas >= plan.ack_quorum && plan.ack_quorum > 0
                            ? replicas - plan.ack_quorum + 1
                            : 1;
  const size_t sound = std::count_if(answers.begin(), answers.end(),
                                     [](const Answer& a) { return !a.info.corrupt(); });
  if (sound >= needed) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("recovering segment ", plan.segment_id, ": ", sound,
                                             " of ", replicas,
                                             " replicas answered without corruption, need ",
                                             needed));
}

uint64_t RecoveredLength(const std::vector<Answer>& answers) {
  bool any_sealed = false;
  uint64_t length = 0;
  for (const auto& answer : answers) {
    if (answer.info.corrupt()) continue;
    if (answer.info.sealed()) {
      length = any_sealed ? std::max(length, answer.info.length()) : answer.info.length();
      any_sealed = true;
    } else if (!any_sealed) {
      length = std::max(length, answer.info.durable_length());
    }
  }
  return length;
}

// Copies the sealed segment from `sources` to each replica in `behind`;
// adds the ones that got it to `result`.
void CopyToReplicasBehind(SegmentServerApi& servers, const RecoveryPlan& plan,
                          const std::vector<const Answer*>& behind,
                          const std::vector<std::string>& sources, RecoveryResult* result) {
  std::vector<RereplicationTask> copies;
  for (const Answer* answer : behind) {
    RereplicationTask task;
    task.segment_id = plan.segment_id;
    task.epoch = result->epoch;
    task.length = result->length;
    task.source_addresses = sources;
    task.target_server_id = answer->server_id;
    task.target_address = answer->address;
    copies.push_back(std::move(task));
  }
  if (copies.empty()) return;
  const absl::Duration timeout =
      kRecoveryCopyTimeoutBase +
      absl::Seconds(static_cast<int64_t>(result->length / kRecoveryCopyBytesPerSecond));
  std::vector<absl::Status> copied = servers.CopySegments(copies, timeout);
  for (size_t i = 0; i < copies.size(); ++i) {
    if (copied[i].ok()) {
      result->kept_server_ids.push_back(copies[i].target_server_id);
    } else {
      LOG(WARNING) << "recovering segment " << plan.segment_id << ": copy to "
                   << copies[i].target_address << " failed (re-replication will retry): "
                   << copied[i];
    }
  }
}

}  // namespace

absl::StatusOr<RecoveryResult> RecoverSegment(SegmentServerApi& servers, const RecoveryPlan& plan) {
  RecoveryResult result;
  if (plan.replicas.empty()) return result;
  result.epoch = plan.epoch + 1;
  const std::vector<Answer> answers = FenceReplicas(servers, plan, result.epoch);
  if (absl::Status enough = CheckEnoughAnswers(plan, answers); !enough.ok()) return enough;
  result.length = RecoveredLength(answers);
  // Seal the replicas that hold the recovered length; the others (shorter
  // or corrupt) get a copy of the sealed segment, so the file keeps its
  // replication.
  std::vector<const Answer*> behind;
  std::vector<std::string> sources;
  for (const auto& answer : answers) {
    if (answer.info.corrupt() || answer.info.length() < result.length) {
      behind.push_back(&answer);
      continue;
    }
    const uint64_t epoch = std::max(result.epoch, answer.info.epoch());
    if (servers.Seal(answer.address, plan.segment_id, epoch, result.length).ok()) {
      result.kept_server_ids.push_back(answer.server_id);
      sources.push_back(answer.address);
    }
  }
  if (result.kept_server_ids.empty()) {
    return absl::UnavailableError(absl::StrCat("recovering segment ", plan.segment_id,
                                               ": no replica could be sealed at ", result.length));
  }
  CopyToReplicasBehind(servers, plan, behind, sources, &result);
  return result;
}

}  // namespace logfs::meta

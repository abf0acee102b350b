// The segment servers meta knows, in memory: each one's persisted
// registration, liveness, reported space, disk failure, incarnation,
// replica-report state, and whether meta can dial its advertised address;
// and the placement of new replicas on them (distinct live servers with
// room in distinct failure domains, placement.h), as HDFS's
// DatanodeManager and BlockPlacementPolicyDefault keep and use them.
//
// A value type: no I/O, no clock of its own (every time is the caller's
// `now_ns`, ns since the Unix epoch), no locking. Namespace holds one under
// its mutex; it persists registrations itself (MetadataDb::PutServer)
// before it records them here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/repeated_field.h"
#include "store/format/logfs.pb.h"
#include "store/meta/namespace/internal/replica_report_state.h"

namespace logfs::meta {

struct ServerState {
  proto::RegisterServerRequest record;  // persisted registration
  int64_t last_seen_ns = 0;             // 0: not heard from since start
  // Registered or heartbeat since this meta started: capacity_bytes and
  // free_bytes are known (a restarted meta trusts its registry for
  // liveness, but knows no space until the first heartbeat).
  bool reported = false;
  uint64_t capacity_bytes = 0;
  uint64_t free_bytes = 0;
  // A writer reported this server failing (SealSegment failed_servers)
  // at this time; placement avoids it until a heartbeat arrives after
  // it (Suspect()). 0: never.
  int64_t failure_reported_ns = 0;
  // Why the server's last heartbeat said it takes no appends (its
  // journal failed; HeartbeatRequest.disk_failure); "" when healthy.
  // Placement skips it; a new process (incarnation) starts healthy.
  std::string disk_failure;
  // Random per segd process (RegisterServerRequest); 0: not yet known
  // (meta restarted), any is accepted.
  uint64_t incarnation = 0;
  // The deletions (segment ids) the last heartbeat's reply handed out:
  // the server runs them before it sends the next heartbeat, so until
  // then no copy of these segments goes there (ChooseCopyTarget).
  std::vector<uint64_t> deletions_in_flight;
  ReplicaReportState reports;
  // When meta last dialled the advertised address (DueProbes; 0: not
  // since the server registered), and why that failed ("" when it
  // answered).
  int64_t probed_ns = 0;
  std::string unreachable;
};

class ServerRegistry {
 public:
  // A server not heard from for `dead_server_ns` is dead.
  explicit ServerRegistry(int64_t dead_server_ns) : dead_server_ns_(dead_server_ns) {}

  // ---- the servers, by id
  ServerState* Find(uint64_t server_id);
  const ServerState* Find(uint64_t server_id) const;
  // A server known to be registered (CHECKs that it is).
  const ServerState& At(uint64_t server_id) const;
  const std::map<uint64_t, ServerState>& servers() const { return servers_; }
  std::map<uint64_t, ServerState>& servers() { return servers_; }
  size_t size() const { return servers_.size(); }
  // The advertised address of `server_id`, "" if unknown.
  std::string Address(uint64_t server_id) const;
  // Sets each replica's address from its server id ("" if unknown).
  void FillAddresses(proto::Segment* segment) const;

  // ---- registration and heartbeats
  // A registration read back at meta's start: live on trust from `now_ns`
  // for one dead_server_ns (as HDFS's NameNode trusts its DataNode list
  // in safe mode), space unknown until its first heartbeat.
  void Restore(proto::RegisterServerRequest record, int64_t now_ns);
  // The address of a live server holding `request`'s id with another
  // incarnation, that must be asked whether it still runs ("" when there
  // is no conflict: unknown id, unknown incarnations, dead holder, or the
  // same address on the same host, which two processes cannot bind).
  std::string ConflictingHolder(const proto::RegisterServerRequest& request, int64_t now_ns) const;
  // Records a registration (already persisted, its id assigned): a new
  // incarnation starts with a healthy disk and a fresh replica report;
  // its address is dialled again. Returns the server's state.
  ServerState& Register(proto::RegisterServerRequest record, int64_t now_ns);
  // A heartbeat's liveness, space and disk state for `server` (the
  // caller checked its incarnation). Logs a disk failure once.
  void Beat(ServerState& server, const proto::HeartbeatRequest& request, int64_t now_ns);
  // Writers saw these servers fail (SealSegment failed_servers): they are
  // Suspect until their next heartbeat.
  void MarkFailing(const google::protobuf::RepeatedField<uint64_t>& server_ids, int64_t now_ns);

  // ---- liveness
  bool Live(const ServerState& server, int64_t now_ns) const;
  bool Live(uint64_t server_id, int64_t now_ns) const;
  // Reported failing by a writer and not heard from since: live, but new
  // segments go elsewhere while other servers have room.
  static bool Suspect(const ServerState& server) {
    return server.failure_reported_ns != 0 && server.last_seen_ns <= server.failure_reported_ns;
  }
  // The failure domains of the live servers with a healthy disk.
  std::vector<std::string> LiveHealthyDomains(int64_t now_ns) const;
  // Space and count of the live servers (StatFs).
  struct LiveSpace {
    uint64_t capacity_bytes = 0;
    uint64_t free_bytes = 0;
    uint32_t servers = 0;
  };
  LiveSpace SumLiveSpace(int64_t now_ns) const;

  // ---- probes of advertised addresses (Namespace::ProbeServerAddresses)
  struct Probe {
    uint64_t server_id = 0;
    uint64_t incarnation = 0;
    std::string address;
  };
  // Up to `max` live servers due a dial (never dialled since they
  // registered, unreachable the last time, or reached `reprobe_ns` ago or
  // more), going on round the servers by id from where the last call
  // stopped, each at most once per call.
  std::vector<Probe> DueProbes(size_t max, int64_t reprobe_ns, int64_t now_ns);
  // Records a dial's outcome (`unreachable`: why it failed, "" if the
  // server answered as itself); false, recording nothing, if the server
  // registered again since (it is dialled anew).
  bool RecordProbe(const Probe& probe, std::string unreachable, int64_t now_ns);

  // ---- placement
  // How bad a choice for a new replica `server` is: 0 for a good one; 1
  // when its writer avoids it (slow); kLastResortRank when a writer saw it
  // fail (Suspect) or meta cannot dial it, plus 1 when also avoided.
  static constexpr int kLastResortRank = 2;
  static int LastChoiceRank(const ServerState& server, bool avoided);
  // `replication` distinct live servers with room and a healthy disk,
  // none of `excluded`, in distinct failure domains (placement.h) also
  // from the live servers in `kept` (replicas the segment keeps), by
  // LastChoiceRank, then most free space (in GiB), ties rotating by one
  // per call. Servers in `avoided` are taken only as far as the count or
  // the spread needs them; last resorts only when too few others are
  // left, so placement never fails for them. kUnavailable when too few
  // servers are live, ENOSPC (PosixError) when the others are full.
  absl::StatusOr<std::vector<uint64_t>> Place(uint32_t replication,
                                              const std::vector<uint64_t>& excluded,
                                              const std::vector<uint64_t>& kept,
                                              const std::vector<uint64_t>& avoided, int64_t now_ns);

 private:
  const int64_t dead_server_ns_;
  std::map<uint64_t, ServerState> servers_;  // by server id
  uint64_t placements_ = 0;                  // rotates placement ties
  uint64_t probe_cursor_ = 0;                // the server id the last probe dialled
};

}  // namespace logfs::meta

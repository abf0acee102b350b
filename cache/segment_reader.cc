#include "cache/segment_reader.h"

#include <glog/logging.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "src/env/posix_file.h"
#include "src/status/macros.h"
#include "store/format/chunk_crc.h"
#include "store/rpc/rpc_client.h"
#include "store/rpc/unix_socket.h"

namespace logfs::cache {

namespace {

// The chunks a read of [offset, offset + size) of a `length`-byte replica
// touches: chunks [first, first + count), bytes [from, to).
struct ChunkRange {
  uint64_t first, count, from, to;
};

absl::StatusOr<ChunkRange> ChunksOfRead(uint64_t length, uint64_t offset, uint64_t size) {
  if (offset + size > length) {
    return absl::OutOfRangeError(
        absl::StrCat("read to ", offset + size, " past the replica's ", length, " bytes"));
  }
  ChunkRange r;
  r.first = offset / format::kCrcChunkBytes;
  r.count = format::ChunkCount(offset + size) - r.first;
  r.from = format::ChunkStart(r.first);
  r.to = std::min(length, format::ChunkStart(r.first + r.count));
  return r;
}

// kDataLoss unless `data` (chunks r.first.., from r.from) matches its CRCs.
absl::Status VerifyChunks(absl::string_view data, int crc_fd, const ChunkRange& r) {
  ASSIGN_OR_RETURN(std::vector<uint32_t> crcs, format::ReadChunkCrcs(crc_fd, r.first, r.count));
  if (auto bad = format::FirstBadChunk(data, crcs); bad.has_value()) {
    return absl::DataLossError(absl::StrCat("chunk ", r.first + *bad, " fails its CRC"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ReadVerifiedReplica(const format::ReplicaFds& files, uint64_t offset,
                                                uint64_t size) {
  ASSIGN_OR_RETURN(const ChunkRange r, ChunksOfRead(files.length, offset, size));
  ASSIGN_OR_RETURN(std::string data, env::PreadUpTo(files.data.get(), r.from, r.to - r.from));
  if (data.size() != r.to - r.from) {
    return absl::DataLossError(absl::StrCat("replica file ends at ", r.from + data.size(),
                                            ", before its sealed length ", files.length));
  }
  RETURN_IF_ERROR(VerifyChunks(data, files.crc.get(), r));
  if (r.from == offset && data.size() == size) return data;
  return data.substr(offset - r.from, size);
}

absl::StatusOr<absl::string_view> ReadVerifiedMapped(absl::string_view mapped, int crc_fd,
                                                     uint64_t offset, uint64_t size) {
  ASSIGN_OR_RETURN(const ChunkRange r, ChunksOfRead(mapped.size(), offset, size));
  RETURN_IF_ERROR(VerifyChunks(mapped.substr(r.from, r.to - r.from), crc_fd, r));
  return mapped.substr(offset, size);
}

namespace {

constexpr char kRemoteReadNeededPayload[] = "logfs.remote_read_needed";

}  // namespace

absl::Status RemoteReadNeeded() {
  absl::Status status = absl::UnavailableError("the read needs a segment server");
  status.SetPayload(kRemoteReadNeededPayload, absl::Cord("1"));
  return status;
}

bool IsRemoteReadNeeded(const absl::Status& status) {
  return absl::IsUnavailable(status) && status.GetPayload(kRemoteReadNeededPayload).has_value();
}

SegmentReader::SegmentReader(client::SegdClient& segd, SegmentReaderOptions options)
    : segd_(segd),
      options_(std::move(options)),
      boot_id_(options_.host_id.empty() ? rpc::HostBootId() : options_.host_id),
      replica_cache_(options_.replica_cache) {}

absl::StatusOr<SegmentBytes> SegmentReader::ReadBytes(const proto::Segment& segment,
                                                      uint64_t offset, uint64_t size,
                                                      const client::BadReplicaReporter& reporter,
                                                      ReadMode mode) {
  // Over TCP, from the replicas in the order `s` lists them.
  auto remote = [&](const proto::Segment& s) -> absl::StatusOr<SegmentBytes> {
    ASSIGN_OR_RETURN(std::string data, client::ReadSegmentRange(segd_, s, offset, size,
                                                                options_.timeout, reporter));
    return SegmentBytes(std::move(data));
  };
  if (mode == ReadMode::kCachedOnly) {
    if (!options_.short_circuit || !segment.sealed() || boot_id_.empty()) {
      return RemoteReadNeeded();
    }
    uint64_t bad_server = 0;
    auto local = ReadCachedReplica(segment, offset, size, &bad_server);
    if (!local.ok()) return RemoteReadNeeded();
    short_circuit_reads_.fetch_add(1, std::memory_order_relaxed);
    short_circuit_bytes_.fetch_add(size, std::memory_order_relaxed);
    return local;
  }
  if (!options_.short_circuit || !segment.sealed() || boot_id_.empty()) {
    remote_reads_.fetch_add(1, std::memory_order_relaxed);
    return remote(segment);
  }
  uint64_t bad_server = 0;
  auto local = ReadShortCircuit(segment, offset, size, &bad_server);
  if (local.ok()) {
    short_circuit_reads_.fetch_add(1, std::memory_order_relaxed);
    short_circuit_bytes_.fetch_add(size, std::memory_order_relaxed);
    return local;
  }
  remote_reads_.fetch_add(1, std::memory_order_relaxed);
  if (absl::IsNotFound(local.status())) {
    return remote(segment);
  }
  short_circuit_failures_.fetch_add(1, std::memory_order_relaxed);
  LOG(WARNING) << "short-circuit read of segment " << segment.id()
               << " failed, reading over TCP: " << local.status();
  if (bad_server == 0) {
    return remote(segment);
  }
  // The replica that failed its CRC is read over TCP first, so its server
  // checks its copy, marks it corrupt and the reporter tells meta; the
  // read then moves on to a good replica.
  proto::Segment reordered = segment;
  auto* replicas = reordered.mutable_replicas();
  std::stable_partition(replicas->begin(), replicas->end(), [bad_server](const proto::Replica& r) {
    return r.server_id() == bad_server;
  });
  return remote(reordered);
}

// Reads from the first replica on this host that opens and reads cleanly:
// cached descriptors first, then (a miss) a replica opened through its
// server's socket. kNotFound if no replica is on this host. A replica
// whose bytes fail their CRC ends the attempt with kDataLoss and its
// server id in `*bad_server`.
absl::StatusOr<SegmentBytes> SegmentReader::ReadShortCircuit(const proto::Segment& segment,
                                                             uint64_t offset, uint64_t size,
                                                             uint64_t* bad_server) {
  auto cached = ReadCachedReplica(segment, offset, size, bad_server);
  if (!absl::IsNotFound(cached.status())) return cached;
  absl::Status last = absl::NotFoundError("no replica on this host");
  for (const proto::Replica& replica : segment.replicas()) {
    const std::string socket = LocalSocket(replica.address());
    if (socket.empty()) continue;
    auto files = OpenLocal(socket, segment.id());
    if (!files.ok()) {
      // The replica is not servable there; anything else (the socket gone,
      // permission denied) means the server is of no use for a while.
      if (!absl::IsNotFound(files.status()) && !absl::IsFailedPrecondition(files.status()) &&
          !absl::IsDataLoss(files.status())) {
        ForgetServer(replica.address());
      }
      last = files.status();
      continue;
    }
    ReplicaCache::Ref ref =
        replica_cache_.Insert({segment.id(), replica.server_id()}, std::move(*files));
    auto data = ReadCached(std::move(ref), replica.server_id(), offset, size, bad_server);
    if (data.ok() || absl::IsDataLoss(data.status())) return data;
    last = data.status();
  }
  return last;
}

bool SegmentReader::HasCachedReplica(const proto::Segment& segment) {
  if (!options_.short_circuit || !segment.sealed() || boot_id_.empty()) return false;
  for (const proto::Replica& replica : segment.replicas()) {
    if (replica_cache_.Contains({segment.id(), replica.server_id()})) return true;
  }
  return false;
}

absl::StatusOr<SegmentBytes> SegmentReader::ReadCachedReplica(const proto::Segment& segment,
                                                              uint64_t offset, uint64_t size,
                                                              uint64_t* bad_server) {
  // The hit path: no allocation, no call to a server.
  for (const proto::Replica& replica : segment.replicas()) {
    ReplicaCache::Ref ref = replica_cache_.Lookup({segment.id(), replica.server_id()});
    if (!ref) continue;
    if (ref.files().length < segment.length()) {
      // Opened before the segment was continued (a WAL file reopened for
      // append) and sealed longer: its descriptors still serve the old
      // length, with that length's CRCs; the longer replica is opened anew.
      replica_cache_.Invalidate(ref);
      continue;
    }
    return ReadCached(std::move(ref), replica.server_id(), offset, size, bad_server);
  }
  return absl::NotFoundError("no replica of this host in the replica cache");
}

absl::StatusOr<SegmentBytes> SegmentReader::ReadCached(ReplicaCache::Ref ref, uint64_t server_id,
                                                       uint64_t offset, uint64_t size,
                                                       uint64_t* bad_server) {
  absl::Status failed;
  if (const absl::string_view mapped = replica_cache_.Map(ref); !mapped.empty()) {
    auto view = ReadVerifiedMapped(mapped, ref.files().crc.get(), offset, size);
    if (view.ok()) return SegmentBytes(std::move(ref), *view);
    failed = view.status();
  } else {
    auto data = ReadVerifiedReplica(ref.files(), offset, size);
    if (data.ok()) return SegmentBytes(std::move(*data));
    failed = data.status();
  }
  replica_cache_.Invalidate(ref);  // opened afresh next time
  if (absl::IsDataLoss(failed)) *bad_server = server_id;
  return failed;
}

std::string SegmentReader::LocalSocket(const std::string& address) {
  const absl::Time now = absl::Now();
  {
    absl::MutexLock lock(&mu_);
    auto it = servers_.find(address);
    // A known answer, or a failure not yet due for a retry.
    if (it != servers_.end() && (it->second.retry_after == absl::InfinitePast() ||
                                 now < it->second.retry_after)) {
      return it->second.socket_path;
    }
  }
  absl::StatusOr<proto::ShortCircuitInfoResponse> info =
      segd_.ShortCircuitInfo(address, options_.timeout);
  ServerInfo learned;
  if (!info.ok()) {
    learned.retry_after = now + kRetryAfterFailure;
    VLOG(1) << "short-circuit info of " << address << ": " << info.status();
  } else if (info->boot_id() == boot_id_) {
    learned.socket_path = info->socket_path();
  }
  absl::MutexLock lock(&mu_);
  servers_[address] = learned;
  return learned.socket_path;
}

void SegmentReader::ForgetServer(const std::string& address) {
  absl::MutexLock lock(&mu_);
  ServerInfo& info = servers_[address];
  info.socket_path.clear();
  info.retry_after = absl::Now() + kRetryAfterFailure;
}

absl::StatusOr<format::ReplicaFds> SegmentReader::OpenLocal(const std::string& socket_path,
                                                            uint64_t segment_id) {
  // A local exchange: a short deadline, so a stuck server costs little
  // before the read goes over TCP.
  const absl::Duration timeout = std::min(options_.timeout, kLocalTimeout);
  return client::ShortCircuitOpen(socket_path, segment_id, timeout);
}

SegmentReaderStats SegmentReader::stats() const {
  SegmentReaderStats out;
  out.short_circuit_reads = short_circuit_reads_.load(std::memory_order_relaxed);
  out.short_circuit_bytes = short_circuit_bytes_.load(std::memory_order_relaxed);
  out.short_circuit_failures = short_circuit_failures_.load(std::memory_order_relaxed);
  out.remote_reads = remote_reads_.load(std::memory_order_relaxed);
  out.replica_cache = replica_cache_.stats();
  return out;
}

}  // namespace logfs::cache

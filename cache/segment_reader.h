// Reads bytes of one segment for the mount (DESIGN §5). A sealed segment
// is read from a replica on this host when there is one: the segment
// server hands over read-only descriptors of the replica's data and .crc
// files once (store/segd/short_circuit_server.h), the ReplicaCache keeps them,
// and reads are a pread plus a CRC check here, with no round trip
// (short-circuit local reads, as HDFS's). Otherwise, or when that fails,
// the replicas are read over TCP in order (client::ReadSegmentRange), which
// also reports a corrupt replica to meta: a short-circuit read that finds
// a bad CRC falls back to that path starting with the bad replica, so its
// server checks its copy itself and meta hears of it.
//
// Thread-safe. Read blocks the caller.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cache/replica_cache.h"
#include "store/format/logfs.pb.h"
#include "store/client/replica_reader.h"
#include "store/client/segd_client.h"
#include "src/status/macros.h"

namespace logfs::cache {

// How far a read may go for its bytes. kAny: anywhere (TCP to a segment
// server, a replica's first open through its server's socket), blocking
// the caller. kCachedOnly: only what needs no segment server at all (the
// block cache, replicas this process already has open); where it would
// need more it returns RemoteReadNeeded() instead, so that a caller that
// must not wait (a FUSE worker) can hand the read to a thread that may.
enum class ReadMode { kAny, kCachedOnly };

// The status a kCachedOnly read returns where it would need a segment
// server (kUnavailable with a marker payload); never an answer to a user.
absl::Status RemoteReadNeeded();
bool IsRemoteReadNeeded(const absl::Status& status);

// Bytes of a segment read by SegmentReader::ReadBytes: either its own
// string, or a view into a mapped local replica, kept mapped by the
// replica-cache reference it holds. Movable; view() is valid while it
// lives and is not moved from.
class SegmentBytes {
 public:
  SegmentBytes() = default;
  explicit SegmentBytes(std::string owned) : owned_(std::move(owned)) {}
  SegmentBytes(ReplicaCache::Ref pin, absl::string_view mapped)
      : pin_(std::move(pin)), mapped_(mapped) {}

  absl::string_view view() const { return pin_ ? mapped_ : absl::string_view(owned_); }
  // The bytes as a string: moved out if owned, else copied from the mapping.
  std::string Take() && { return pin_ ? std::string(mapped_) : std::move(owned_); }

 private:
  std::string owned_;
  ReplicaCache::Ref pin_;
  absl::string_view mapped_;
};

struct SegmentReaderOptions {
  bool short_circuit = true;
  absl::Duration timeout = absl::Seconds(10);  // per replica call, TCP or Unix socket
  ReplicaCacheOptions replica_cache;
  // This host's id, compared with a segment server's (ShortCircuitInfo)
  // before reading its replicas from their files; empty: the boot id.
  std::string host_id;
};

struct SegmentReaderStats {
  uint64_t short_circuit_reads = 0;
  uint64_t short_circuit_bytes = 0;
  uint64_t short_circuit_failures = 0;  // local replica unusable: read over TCP instead
  uint64_t remote_reads = 0;
  ReplicaCacheStats replica_cache;
};

class SegmentReader {
 public:
  // `segd` must outlive the reader.
  SegmentReader(client::SegdClient& segd, SegmentReaderOptions options);

  // Bytes [offset, offset + size) of `segment`, all of which its readable
  // length holds. kUnavailable (EIO) when no replica can serve them. With
  // kCachedOnly, only from a replica in the replica cache, else
  // RemoteReadNeeded() (also for a replica that fails there: the kAny
  // read that follows handles it).
  absl::StatusOr<std::string> Read(const proto::Segment& segment, uint64_t offset, uint64_t size,
                                   const client::BadReplicaReporter& reporter,
                                   ReadMode mode = ReadMode::kAny) {
    ASSIGN_OR_RETURN(SegmentBytes bytes, ReadBytes(segment, offset, size, reporter, mode));
    return std::move(bytes).Take();
  }
  // As Read, but bytes from a mapped local replica come back as a view of
  // the mapping, CRC-checked, not copied: a caller that copies them on
  // (into the block cache) copies them once.
  absl::StatusOr<SegmentBytes> ReadBytes(const proto::Segment& segment, uint64_t offset,
                                         uint64_t size, const client::BadReplicaReporter& reporter,
                                         ReadMode mode = ReadMode::kAny);

  // Whether a kCachedOnly Read of `segment` can be served (a replica of it
  // is in the replica cache), without counting a lookup.
  bool HasCachedReplica(const proto::Segment& segment);

  // Drops cached replicas whose server deleted them (their disk space
  // comes back once no read holds them), then closes those idle past
  // their limit. Call now and then (the client does once a heartbeat
  // interval): the cost is one fstat per cached replica.
  void Trim() {
    replica_cache_.DropDeleted();
    replica_cache_.Trim();
  }

  SegmentReaderStats stats() const;

 private:
  struct ServerInfo {
    std::string socket_path;  // empty: not on this host, or short-circuit off
    absl::Time retry_after = absl::InfinitePast();  // when the answer was an error
  };

  static constexpr absl::Duration kRetryAfterFailure = absl::Seconds(10);
  static constexpr absl::Duration kLocalTimeout = absl::Seconds(1);  // Unix socket exchanges

  absl::StatusOr<SegmentBytes> ReadShortCircuit(const proto::Segment& segment, uint64_t offset,
                                                uint64_t size, uint64_t* bad_server);
  // ReadShortCircuit's hit path alone: kNotFound unless a replica of
  // `segment` is in the replica cache.
  absl::StatusOr<SegmentBytes> ReadCachedReplica(const proto::Segment& segment, uint64_t offset,
                                                 uint64_t size, uint64_t* bad_server);
  // Through the replica's mapping (made on its first read) when it has
  // one, else with pread.
  absl::StatusOr<SegmentBytes> ReadCached(ReplicaCache::Ref ref, uint64_t server_id,
                                          uint64_t offset, uint64_t size, uint64_t* bad_server);
  // The short-circuit socket of the server at `address` on this host, or
  // "" (learned once per server with ShortCircuitInfo; failures retried
  // after kRetryAfterFailure).
  std::string LocalSocket(const std::string& address) ABSL_LOCKS_EXCLUDED(mu_);
  // After a failed open: no short-circuit through that server for a while.
  void ForgetServer(const std::string& address) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<format::ReplicaFds> OpenLocal(const std::string& socket_path, uint64_t segment_id);

  client::SegdClient& segd_;
  const SegmentReaderOptions options_;
  const std::string boot_id_;
  ReplicaCache replica_cache_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, ServerInfo> servers_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> short_circuit_reads_{0}, short_circuit_bytes_{0},
      short_circuit_failures_{0}, remote_reads_{0};
};

// Bytes [offset, offset + size) of a sealed replica through its read-only
// descriptors, after checking the CRC of every chunk they touch (layout:
// store/format/chunk_crc.h). kOutOfRange past its length; kDataLoss if a CRC
// differs or a file is shorter than the length says; errno statuses.
absl::StatusOr<std::string> ReadVerifiedReplica(const format::ReplicaFds& files, uint64_t offset,
                                                uint64_t size);

// The same over `mapped`, a mapping of the replica's data file holding its
// sealed bytes: a view of bytes [offset, offset + size) of it, after the
// CRC check of every chunk they touch (the CRCs read from `crc_fd`).
absl::StatusOr<absl::string_view> ReadVerifiedMapped(absl::string_view mapped, int crc_fd,
                                                     uint64_t offset, uint64_t size);

}  // namespace logfs::cache

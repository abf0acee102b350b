// The durability checker (DESIGN §3): writers append numbered, checksummed
// records to WAL files through a mount and log, to a file outside logfs,
// every offset that an fdatasync acknowledged; a watcher stats the files
// and notes any length that shrank; the verifier later reads the files
// back and reports every acknowledged record that is missing, damaged or
// out of order, and garbage that is followed by records.
//
// Record: u32 magic | u32 writer | u64 seq | u32 payload_bytes | payload |
// u32 crc32c (of everything before it), little-endian.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace logfs::bench {

struct CheckerOptions {
  std::string dir;      // where the WAL files go (on the mount)
  std::string log_dir;  // where acknowledgements are logged (not on logfs)
  int writers = 16;     // one file each
  uint32_t payload_bytes = 200;
  int sync_every = 1;   // records per fdatasync
  absl::Duration duration = absl::Seconds(5);
};

struct WriteReport {
  uint64_t records_acked = 0;
  uint64_t bytes_acked = 0;
  uint64_t write_errors = 0;          // writes/fsyncs that failed (allowed)
  absl::Duration longest_fsync;       // slowest fdatasync that returned
  // Of the fdatasyncs that returned 0, over every writer (nearest rank).
  absl::Duration fsync_p50;
  absl::Duration fsync_p99;
  // A watcher saw a writer's first file get shorter while that writer had
  // had no error (after one, the tail it wrote but never had acked may go).
  uint64_t shrinks_seen = 0;
  std::string summary;
};

struct VerifyReport {
  uint64_t acked_bytes = 0;
  uint64_t acked_bytes_lost = 0;     // acked offsets beyond the valid prefix
  uint64_t damaged_records = 0;      // bad checksum or order before the acked end
  uint64_t garbage_then_records = 0; // invalid bytes followed by valid records
  uint64_t unacked_tail_bytes = 0;   // bytes past the acked end (allowed)
  std::vector<std::string> problems; // one line per problem
  bool ok() const {
    return acked_bytes_lost == 0 && damaged_records == 0 && garbage_then_records == 0;
  }
  std::string summary;
};

// Runs the writers for `duration`; writers keep going past errors (after
// a failure a writer goes on in a new file, its next generation, created
// with O_EXCL). Errors: kInvalidArgument (options),
// the errno of an unusable dir or log dir.
absl::StatusOr<WriteReport> RunCheckerWriters(const CheckerOptions& options);

// Reads back every file logged in `log_dir` from `dir` and checks it.
absl::StatusOr<VerifyReport> VerifyCheckerFiles(const CheckerOptions& options);

// Encodes one record (exposed for tests).
std::string EncodeCheckerRecord(uint32_t writer, uint64_t seq, uint32_t payload_bytes);

}  // namespace logfs::bench

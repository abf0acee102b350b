// On-disk layout of a segment server's data dir (docs/segd_layout.md) and
// the small POSIX helpers the replica store needs:
//
//   <data_dir>/server_id          decimal id from meta, "\n"-terminated
//   <data_dir>/segments/<id>.seg  replica bytes, exactly `length` long
//   <data_dir>/segments/<id>.state  "epoch=E\nsealed=0|1\nsealed_length=L\n"
//   <data_dir>/segments/<id>.crc  CRC32C per kCrcChunkBytes chunk (store/format/chunk_crc.h)
//
// Small files are replaced with env::WriteFileAtomically and read with
// env::ReadSmallFile (src/env/posix_file.h). Thread-safe: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace logfs::segd {

inline constexpr char kSegmentsDirName[] = "segments";
inline constexpr char kServerIdFileName[] = "server_id";
inline constexpr char kSegmentFileSuffix[] = ".seg";
inline constexpr char kStateFileSuffix[] = ".state";
inline constexpr char kCrcFileSuffix[] = ".crc";
inline constexpr size_t kStateFileBytesMax = 4096;

// Persisted per-replica state. `length` is not stored: it is the .seg size.
struct ReplicaState {
  uint64_t epoch = 0;
  bool sealed = false;
  uint64_t sealed_length = 0;
};

std::string EncodeReplicaState(const ReplicaState& state);
// kDataLoss if `text` is not a well-formed state file.
absl::StatusOr<ReplicaState> DecodeReplicaState(absl::string_view text);

}  // namespace logfs::segd

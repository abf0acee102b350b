// Helpers shared by the libFuzzer targets in fuzz/ (README "Fuzzing"):
// the structured input of the request-handler targets, seed corpus
// writing, a scratch directory per process, and quiet logs.
//
// Request input: a sequence of requests, each
//   [u8 selector][u16 LE message length][message][u16 LE data length][data]
// where the selector picks the message type from the target's list
// (selector % list size), so every handler is one byte away. A length
// past the input's end takes what is left. Seeds are written with
// JoinRequests, so they parse back to the same requests.
//
// Not thread-safe: called from the fuzzer's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace logfs::fuzz {

// Reads an input front to back; every Take past the end returns what is
// left (zeros for integers).
class InputReader {
 public:
  InputReader(const uint8_t* data, size_t size)
      : bytes_(reinterpret_cast<const char*>(data), size) {}
  bool empty() const { return bytes_.empty(); }
  uint8_t TakeU8();
  uint16_t TakeU16();
  absl::string_view TakeBytes(size_t n);
  absl::string_view TakeRest() { return TakeBytes(bytes_.size()); }

 private:
  absl::string_view bytes_;
};

struct FuzzRequest {
  uint8_t selector = 0;
  std::string message;
  std::string data;
};

// At most `requests_max` requests of `input`.
std::vector<FuzzRequest> SplitRequests(const uint8_t* data, size_t size, size_t requests_max);
// The input that SplitRequests turns into `requests` (each part at most
// 65535 bytes).
std::string JoinRequests(const std::vector<FuzzRequest>& requests);

// A seed: file name in the corpus dir, and its bytes.
using Seed = std::pair<std::string, std::string>;

// If LOGFS_FUZZ_SEEDS names a directory, writes each seed into it and
// exits the process (status 0; 1 if a write failed). Otherwise returns.
// fuzz/run.sh calls every target this way before fuzzing it, so the seed
// corpus is made by the encoders of this tree and never goes stale.
void WriteSeedsIfAsked(const std::vector<Seed>& seeds);

// A new directory for this process's files, under LOGFS_FUZZ_TMPDIR (set
// by fuzz/run.sh, which removes it), else /dev/shm or /tmp. CHECK-fails if
// none can be made.
std::string MakeScratchDir(const std::string& name);

// Empties `dir` (files and subdirectories), keeping the directory.
void EmptyDir(const std::string& dir);

// Makes directory `dir`/`name` (which must not exist); CHECK-fails on error.
void MakeDirIn(const std::string& dir, const std::string& name);

// Writes `bytes` to `path` (created or truncated); CHECK-fails on error.
void WriteFile(const std::string& path, absl::string_view bytes);

// Drops log lines below FATAL: the servers log every rejected input,
// which would cost more than running it.
void QuietLogs();

}  // namespace logfs::fuzz

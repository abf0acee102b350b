// `logfs bench meta`: a namespace benchmark after mdtest. Workers (threads,
// or forked processes with `processes`: FUSE serializes some calls per
// process) each make `files` empty files in a directory of their own (or
// all in one shared directory) and then go through the phases in order,
// with a barrier between phases so that no two overlap:
//   create   a new empty file per name: open(O_CREAT|O_EXCL|O_WRONLY), close
//   stat     stat(2) of each, which must be a regular file
//   readdir  one full listing of the worker's directory, which must hold
//            every name expected there and no other
//   rename   each file to a new name in the same directory
//   unlink   each renamed file
// Two targets, as `bench wal`:
//   dir   system calls under a directory of any file system (ext4, a
//         FUSE passthrough, a logfs mount);
//   meta  the same phases as meta's namespace RPCs through the logfs
//         client library, without FUSE (create: Create with no open;
//         stat: Lookup; readdir: Readdir pages), workers on threads.
// Everything happens in a new run directory, bench-meta-<pid>-<µs>, under
// `dir` (or the root of the file system) that is removed at the end, also
// after a failure when it can be.
//
// The report, per phase: ops (over all workers; readdir: the names
// listed), seconds of wall clock from the first worker's start to the
// last one's end, ops/s, and the p50 and p99 latency of one call
// (readdir: of one whole listing), as a markdown table and as one line
// per phase for scripts:
//   phase=create ops=16000 seconds=0.912345 ops_per_s=17537 p50_ns=51234 p99_ns=180345
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace logfs::bench {

struct MetaBenchOptions {
  std::string dir;           // exactly one of dir and meta
  std::string meta;          // "host:port" of meta (or its replicas)
  int workers = 1;           // --threads; in [1, kMetaWorkersMax]
  int files = 1000;          // per worker; workers * files <= kMetaFilesTotalMax
  bool shared_dir = false;   // every worker in one directory
  bool processes = false;    // workers are forked processes (dir only)
};

// Bounds (STYLE §8). A worker of a shared directory lists and checks every
// worker's names, so the total bounds each worker's memory too.
inline constexpr int kMetaWorkersMax = 1024;
inline constexpr int64_t kMetaFilesTotalMax = 1'000'000;

// Runs the phases and removes the run directory. Returns the report.
// Errors: kInvalidArgument for bad options; kUnavailable if meta cannot be
// reached; the first failing call as "worker W, PHASE: CALL PATH: reason
// (errno N, ENAME)" with the errno's code (kDataLoss for a failed check,
// e.g. a name readdir did not list); a worker process that died, with its
// exit status.
absl::StatusOr<std::string> RunMetaBench(const MetaBenchOptions& options);

}  // namespace logfs::bench

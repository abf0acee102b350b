// `logfs snapshot create|list|delete DIR [NAME]`: read-only, point-in-time
// copies of a directory tree on a logfs mount, in metadata only (meta's
// Snapshot, docs/snapshots.md), reached as DIR/.snapshot/NAME as in HDFS
// (`hdfs dfs -createSnapshot DIR NAME`). A file being written is taken at
// its durable length, so a snapshot of a live RocksDB directory opens as
// a consistent DB. `list` without DIR, given --meta, lists every
// snapshot of the cluster.
#include <gflags/gflags.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "src/main/subcommands.h"
#include "src/status/posix_error.h"
#include "store/client/admin_client.h"

DECLARE_string(meta);           // src/main/server_main.cc
DECLARE_int32(rpc_timeout_ms);  // src/main/server_main.cc

namespace logfs::main {
namespace {

constexpr char kUsage[] =
    "logfs snapshot create DIR NAME | delete DIR NAME | list [DIR]  [--meta=HOST:PORT]";

int Fail(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "logfs snapshot: %s: %s\n", what.c_str(),
               std::string(status.message()).c_str());
  const int error = AttachedErrno(status);
  return error == EEXIST || error == ENOENT || error == EROFS || error == EAGAIN ? 2 : 1;
}

std::string Bytes(uint64_t bytes) {
  constexpr double kMiB = 1024.0 * 1024;
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / kMiB);
}

std::string Time(int64_t ns) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixNanos(ns), absl::LocalTimeZone());
}

}  // namespace

int SnapshotMain(int argc, char** argv) {
  InitProcess(&argc, &argv, kUsage, {{}, {"meta", "rpc_timeout_ms"}});
  if (!AtMostArgs(argc, argv, 3, kUsage)) return 1;
  const std::string op = argc > 1 ? argv[1] : "";
  proto::SnapshotRequest request;
  if (op == "create" && argc == 4) {
    request.set_op(proto::SnapshotRequest::CREATE);
  } else if (op == "delete" && argc == 4) {
    request.set_op(proto::SnapshotRequest::DELETE);
  } else if (op == "list" && argc <= 3) {
    request.set_op(proto::SnapshotRequest::LIST);
  } else {
    std::fprintf(stderr, "logfs snapshot: expected create DIR NAME, delete DIR NAME or list [DIR]\n"
                         "usage: %s\n", kUsage);
    return 1;
  }
  const std::string dir = argc > 2 ? argv[2] : "";
  if (argc > 3) request.set_name(argv[3]);
  std::string meta = FLAGS_meta;
  if (!dir.empty()) {
    struct stat st;
    if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      std::fprintf(stderr, "logfs snapshot: %s is not a directory\n", dir.c_str());
      return 1;
    }
    if (meta.empty()) meta = MetaOfMount(dir);
    request.set_dir(st.st_ino);
    LoadTheMountsSecret(dir, "logfs snapshot");
  }
  if (meta.empty()) {
    std::fprintf(stderr, "logfs snapshot: %s (give --meta)\n",
                 dir.empty() ? "list without DIR lists a cluster's snapshots"
                             : (dir + " is not on a logfs mount").c_str());
    return 1;
  }
  client::AdminClient admin(meta, absl::Milliseconds(FLAGS_rpc_timeout_ms));
  absl::StatusOr<proto::SnapshotResponse> response = admin.Snapshot(request);
  if (!response.ok()) {
    return Fail(absl::StrCat(op, " ", dir, request.name().empty() ? "" : " ", request.name()),
                response.status());
  }
  switch (request.op()) {
    case proto::SnapshotRequest::CREATE: {
      const proto::SnapshotRecord& record = response->snapshots(0).record();
      std::printf("created %s/.snapshot/%s: %llu inodes, %s, %llu open files at their durable "
                  "length; no bytes written\n",
                  dir.c_str(), request.name().c_str(),
                  static_cast<unsigned long long>(record.files()),
                  Bytes(record.bytes()).c_str(),
                  static_cast<unsigned long long>(response->open_files()));
      return 0;
    }
    case proto::SnapshotRequest::DELETE:
      std::printf("deleted %s/.snapshot/%s\n", dir.c_str(), request.name().c_str());
      return 0;
    default:
      break;
  }
  std::printf("%-20s %-19s %10s %12s %12s  %s\n", "NAME", "CREATED", "INODES", "BYTES",
              "ONLY_HERE", "DIRECTORY");
  for (const proto::SnapshotInfo& info : response->snapshots()) {
    const proto::SnapshotRecord& record = info.record();
    std::printf("%-20s %-19s %10llu %12s %12s  %s\n", record.name().c_str(),
                Time(record.ctime_ns()).c_str(), static_cast<unsigned long long>(record.files()),
                Bytes(record.bytes()).c_str(),
                Bytes(info.exclusive_bytes()).c_str(), info.dir_path().c_str());
  }
  return 0;
}

}  // namespace logfs::main

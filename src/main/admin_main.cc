// `logfs status` and `logfs fsck`: ask a running cluster's meta (and, for
// fsck, every replica) and print what they say. Neither takes positional
// arguments. Exit codes: status 0, or 1 if meta cannot be asked (or on a
// usage error); fsck 0 when every sealed segment is fully replicated and
// its replicas agree, 1 while any is not, 2 if meta cannot be asked (or on
// a usage error).
#include <gflags/gflags.h>

#include <cstdio>
#include <string>

#include "src/main/subcommands.h"
#include "store/admin/cluster_status.h"
#include "store/admin/fsck.h"

DECLARE_string(meta);           // src/main/server_main.cc
DECLARE_int32(rpc_timeout_ms);  // src/main/server_main.cc

namespace logfs::main {
namespace {

bool RequireMeta(const char* what) {
  if (!FLAGS_meta.empty()) return true;
  std::fprintf(stderr, "logfs %s: --meta=HOST:PORT is required\n", what);
  return false;
}

}  // namespace

int StatusMain(int argc, char** argv) {
  constexpr char kUsage[] = "logfs status --meta=HOST:PORT [--cluster_secret_file=PATH]";
  InitProcess(&argc, &argv, kUsage, {{}, {"meta", "rpc_timeout_ms"}});
  if (!AtMostArgs(argc, argv, 0, kUsage)) return 1;
  if (!RequireMeta("status")) return 1;
  admin::ClusterStatusOptions options;
  options.meta_address = FLAGS_meta;
  options.rpc_timeout_ms = FLAGS_rpc_timeout_ms;
  auto status = admin::GetClusterStatus(options);
  if (!status.ok()) {
    std::fprintf(stderr, "logfs status: cannot ask meta at %s: %s\n", FLAGS_meta.c_str(),
                 std::string(status.status().message()).c_str());
    return 1;
  }
  std::fputs(admin::FormatClusterStatus(*status).c_str(), stdout);
  return 0;
}

int FsckMain(int argc, char** argv) {
  constexpr char kUsage[] = "logfs fsck --meta=HOST:PORT [--cluster_secret_file=PATH]";
  InitProcess(&argc, &argv, kUsage, {{}, {"meta", "rpc_timeout_ms"}});
  if (!AtMostArgs(argc, argv, 0, kUsage)) return 2;
  if (!RequireMeta("fsck")) return 2;
  admin::FsckOptions options;
  options.meta_address = FLAGS_meta;
  options.rpc_timeout_ms = FLAGS_rpc_timeout_ms;
  auto report = admin::RunFsck(options);
  if (!report.ok()) {
    std::fprintf(stderr, "logfs fsck: cannot ask meta at %s: %s\n", FLAGS_meta.c_str(),
                 std::string(report.status().message()).c_str());
    return 2;
  }
  std::fputs(admin::FormatFsck(*report).c_str(), stdout);
  return report->problems.empty() ? 0 : 1;
}

}  // namespace logfs::main

// `logfs recover PATH`: revoke the writer lease of a file on a mount and
// recover it now, as `hdfs debug recoverLease` does. The mount answers
// which meta it uses (user.logfs.meta_address); --meta overrides it.
#include <gflags/gflags.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <cstdio>
#include <string>

#include "src/main/subcommands.h"
#include "store/client/admin_client.h"
#include "store/format/xattr_names.h"

DECLARE_string(meta);           // src/main/server_main.cc
DECLARE_int32(rpc_timeout_ms);  // src/main/server_main.cc

namespace logfs::main {

int RecoverMain(int argc, char** argv) {
  constexpr char kUsage[] = "logfs recover [--meta=HOST:PORT] PATH";
  InitProcess(&argc, &argv, kUsage, {{}, {"meta", "rpc_timeout_ms"}});
  if (!AtMostArgs(argc, argv, 1, kUsage)) return 1;
  if (argc != 2) {
    std::fprintf(stderr, "logfs recover: expected one file path\n");
    return 1;
  }
  const char* path = argv[1];
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
    std::fprintf(stderr, "logfs recover: %s is not a regular file on a logfs mount\n", path);
    return 1;
  }
  std::string meta = FLAGS_meta;
  if (meta.empty()) {
    char buf[256] = {0};
    ssize_t n = getxattr(path, format::kMetaAddressXattr, buf, sizeof(buf) - 1);
    if (n <= 0) {
      std::fprintf(stderr, "logfs recover: %s is not on a logfs mount (give --meta)\n", path);
      return 1;
    }
    meta.assign(buf, n);
  }
  client::AdminClient admin(meta, absl::Milliseconds(FLAGS_rpc_timeout_ms));
  auto inode = admin.RecoverLease(st.st_ino);
  if (!inode.ok()) {
    std::fprintf(stderr, "logfs recover: %s: %s\n", path,
                 std::string(inode.status().message()).c_str());
    return 1;
  }
  uint64_t length = 0;
  for (const auto& s : inode->segments()) length += s.length();
  std::printf("recovered %s: %d segments, %llu bytes, sealed\n", path, inode->segments_size(),
              static_cast<unsigned long long>(length));
  return 0;
}

}  // namespace logfs::main

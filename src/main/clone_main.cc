// `logfs clone SRC DST`: a metadata-only copy of sealed file SRC as new
// file DST, both on one logfs mount (meta's Clone, docs/OPERATIONS.md
// "Clones"): DST lists SRC's sealed segments, so it costs one meta change
// and no bytes on the segment servers, whatever the size; the two are
// separate files from then on (JuiceFS's `juicefs clone`, `cp --reflink`
// on a copy-on-write file system). The mount answers which meta it uses
// (user.logfs.meta_address); --meta overrides it.
#include <gflags/gflags.h>
#include <libgen.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "src/main/subcommands.h"
#include "src/status/posix_error.h"
#include "store/client/admin_client.h"

DECLARE_string(meta);           // src/main/server_main.cc
DECLARE_int32(rpc_timeout_ms);  // src/main/server_main.cc

namespace logfs::main {

int CloneMain(int argc, char** argv) {
  constexpr char kUsage[] = "logfs clone [--meta=HOST:PORT] SRC DST";
  InitProcess(&argc, &argv, kUsage, {{}, {"meta", "rpc_timeout_ms"}});
  if (!AtMostArgs(argc, argv, 2, kUsage)) return 1;
  if (argc != 3) {
    std::fprintf(stderr, "logfs clone: expected SRC and DST\nusage: %s\n", kUsage);
    return 1;
  }
  const std::string source = argv[1];
  const std::string target = argv[2];
  struct stat src;
  if (stat(source.c_str(), &src) != 0 || !S_ISREG(src.st_mode)) {
    std::fprintf(stderr, "logfs clone: %s is not a regular file on a logfs mount\n",
                 source.c_str());
    return 1;
  }
  std::string dir_buf = target;
  std::string base_buf = target;
  const std::string dir = dirname(dir_buf.data());
  const std::string name = basename(base_buf.data());
  struct stat parent;
  if (stat(dir.c_str(), &parent) != 0 || !S_ISDIR(parent.st_mode) || parent.st_dev != src.st_dev) {
    std::fprintf(stderr, "logfs clone: %s is not a directory on the mount of %s\n", dir.c_str(),
                 source.c_str());
    return 1;
  }
  LoadTheMountsSecret(source, "logfs clone");
  std::string meta = FLAGS_meta.empty() ? MetaOfMount(source) : FLAGS_meta;
  if (meta.empty()) {
    std::fprintf(stderr, "logfs clone: %s is not on a logfs mount (give --meta)\n",
                 source.c_str());
    return 1;
  }
  const mode_t mask = umask(0);
  umask(mask);
  proto::CloneRequest request;
  request.set_ino(src.st_ino);
  request.set_new_parent(parent.st_ino);
  request.set_new_name(name);
  request.set_mode(src.st_mode & 07777 & ~mask);
  request.set_uid(getuid());
  request.set_gid(getgid());
  client::AdminClient admin(meta, absl::Milliseconds(FLAGS_rpc_timeout_ms));
  auto attr = admin.Clone(request);
  if (!attr.ok()) {
    std::fprintf(stderr, "logfs clone: %s to %s: %s\n", source.c_str(), target.c_str(),
                 std::string(attr.status().message()).c_str());
    const int error = AttachedErrno(attr.status());
    return error == EEXIST || error == EXDEV || error == EINVAL ? 2 : 1;
  }
  std::printf("cloned %s to %s: %llu bytes, no bytes written\n", source.c_str(), target.c_str(),
              static_cast<unsigned long long>(attr->size()));
  return 0;
}

}  // namespace logfs::main

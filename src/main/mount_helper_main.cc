// `mount.fuse.logfs SRC MNT [-sfnv] [-o OPTS] [-t TYPE]`: the mount(8)
// helper. /usr/sbin/mount.fuse.logfs (and mount.logfs) link to `logfs`,
// which dispatches on the program name (src/main/main.cc), as sshfs's
// mount.fuse.sshfs does. mount(8) runs it for `mount -t fuse.logfs` and
// for fstab lines of type fuse.logfs (util-linux mount(8) "EXTERNAL
// HELPERS"); it drops defaults, auto, noauto, comment= and x-* itself and
// passes `rw` or `ro`.
//
// SRC is the meta list (--meta); each -o option becomes a `logfs mount`
// flag (docs/OPERATIONS.md "Mount options"), which gflags validates. The
// mount is `logfs mount` itself: it returns once the mount serves, after
// waiting up to --mount_wait_ms for meta. Exit status: 0 mounted, 1 usage
// error or failed mount (mount(8) "RETURN CODES" leaves a helper's codes
// to it; 1 is what mount(8) calls incorrect invocation).
#include <gflags/gflags.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/main/subcommands.h"
#include "store/client/meta_endpoints.h"

namespace logfs::main {
namespace {

constexpr char kProgram[] = "mount.fuse.logfs";
constexpr char kUsage[] =
    "mount.fuse.logfs META_LIST MOUNTPOINT [-sfnv] [-o OPTION[,OPTION...]]\n"
    "  (run by mount(8) for type fuse.logfs; META_LIST is HOST:PORT[,HOST:PORT...])";

// What the helper's -h lists besides the -o table: the `logfs mount` flags
// (its --help's but for those of the embedded cluster and --meta, which
// the helper sets).
HelpFlags MountHelpFlags() { return {{"mount:"}, MountSharedFlags()}; }

// Options that mean nothing to logfs: mount(8) and systemd read them from
// the fstab line (network mount, boot may go on, who may mount, which are
// mounted by -a), or they name what logfs does anyway.
constexpr const char* kIgnored[] = {"_netdev", "nofail", "auto",   "noauto",
                                    "user",    "users",  "nouser", "defaults",
                                    "rw",      "nodev",  "nosuid", "default_permissions"};

// `logfs mount` flags that -o may not set: SRC gives the meta list and the
// fsname, mount(8)'s -f is "fake", and the helper never runs an embedded
// cluster.
constexpr const char* kReserved[] = {"meta", "fsname", "f", "data_dir", "segment_servers"};

template <size_t N>
bool OneOf(const std::string& s, const char* const (&list)[N]) {
  for (const char* item : list) {
    if (s == item) return true;
  }
  return false;
}

// True if `name` is a flag `logfs mount` takes (those its --help lists).
bool IsMountFlag(const std::string& name, bool* is_bool) {
  gflags::CommandLineFlagInfo info;
  if (OneOf(name, kReserved) || !gflags::GetCommandLineFlagInfo(name.c_str(), &info)) {
    return false;
  }
  if (info.filename.rfind("src/main/", 0) != 0) return false;  // libraries' flags
  bool listed = name == "cluster_secret_file";
  const HelpFlags help = MountHelpFlags();
  for (const auto& shared : help.shared) listed = listed || name == shared;
  for (const auto& prefix : help.prefixes) {
    listed = listed || info.description.rfind(prefix, 0) == 0;
  }
  *is_bool = info.type == "bool";
  return listed;
}

void PrintOptionTable() {
  std::printf(
      "usage: %s\n\n"
      "-o options (docs/OPERATIONS.md \"Mount options\"):\n"
      "  flagfile=PATH             gflags flagfile (e.g. /etc/logfs/mount.flags); other\n"
      "                            options override it\n"
      "  cluster_secret_file=PATH  the cluster secret\n"
      "  allow_other               other users may use the mount (--allow_other)\n"
      "  ro                        read-only (--read_only); rw: the default\n"
      "  NAME=VALUE, NAME, noNAME  the `logfs mount` flag --NAME (listed below; noNAME\n"
      "                            and NAME for bool flags), e.g. fsync_timeout_ms=30000,\n"
      "                            mount_wait_ms=60000\n"
      "  ignored: _netdev nofail auto noauto user users nouser defaults rw x-* comment=*\n"
      "           default_permissions nodev nosuid (always on)\n"
      "  refused: dev suid (logfs mounts are always nodev,nosuid), meta fsname f\n"
      "           data_dir segment_servers (set by the helper), any other option\n"
      "-s sloppy: ignore unknown options (with a warning); -f fake: check, do not mount;\n"
      "-n: no mtab (logfs writes none); -v: print the mount command\n\n",
      kUsage);
}

struct HelperArgs {
  std::string source;
  std::string mountpoint;
  std::vector<std::string> options;  // -o, split at commas
  bool sloppy = false;
  bool fake = false;
  bool verbose = false;
};

// Parses mount(8)'s argv; prints a one-line error and returns false on bad
// input.
bool ParseHelperArgs(int argc, char** argv, HelperArgs* args) {
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-o" || arg == "-t" || arg == "-N") {
      if (i + 1 == argc) {
        std::fprintf(stderr, "%s: %s needs a value\n", kProgram, arg.c_str());
        return false;
      }
      std::string value = argv[++i];
      if (arg == "-N") {
        std::fprintf(stderr, "%s: -N (mount namespace) is not supported\n", kProgram);
        return false;
      }
      if (arg == "-t" && value != "fuse.logfs" && value != "logfs") {
        std::fprintf(stderr, "%s: type '%s' is not logfs\n", kProgram, value.c_str());
        return false;
      }
      if (arg == "-o") {
        for (absl::string_view o : absl::StrSplit(value, ',', absl::SkipEmpty())) {
          args->options.emplace_back(o);
        }
      }
    } else if (arg.size() >= 2 && arg[0] == '-' && arg != "--") {
      for (char c : arg.substr(1)) {
        if (c == 's') {
          args->sloppy = true;
        } else if (c == 'f') {
          args->fake = true;
        } else if (c == 'v') {
          args->verbose = true;
        } else if (c != 'n') {
          std::fprintf(stderr, "%s: unknown argument '%s'\nusage: %s\n", kProgram, arg.c_str(),
                       kUsage);
          return false;
        }
      }
    } else {
      positional.push_back(arg);
    }
  }
  if (positional.size() != 2) {
    std::fprintf(stderr, "%s: expected META_LIST and MOUNTPOINT, got %zu arguments\nusage: %s\n",
                 kProgram, positional.size(), kUsage);
    return false;
  }
  args->source = positional[0];
  args->mountpoint = positional[1];
  return true;
}

// The `logfs mount` flags for the -o options, or false after a one-line
// error naming the option. A flagfile comes first, so the rest override it.
bool OptionsToFlags(const HelperArgs& args, std::vector<std::string>* flags) {
  std::vector<std::string> flagfiles;
  for (const std::string& option : args.options) {
    const size_t eq = option.find('=');
    const std::string name = option.substr(0, eq);
    if (OneOf(option, kIgnored) || absl::StartsWith(option, "x-") ||
        absl::StartsWith(option, "comment=")) {
      continue;
    }
    if (name == "dev" || name == "suid") {
      std::fprintf(stderr,
                   "%s: mount option '%s' is refused: logfs mounts are always nodev,nosuid\n",
                   kProgram, option.c_str());
      return false;
    }
    if (option == "ro") {
      flags->push_back("--read_only");
      continue;
    }
    if (name == "flagfile" && eq != std::string::npos) {
      flagfiles.push_back("--" + option);
      continue;
    }
    bool is_bool = false;
    if (IsMountFlag(name, &is_bool)) {
      if (eq == std::string::npos && !is_bool) {
        std::fprintf(stderr, "%s: mount option '%s' needs a value (%s=VALUE)\n", kProgram,
                     option.c_str(), option.c_str());
        return false;
      }
      flags->push_back("--" + option);
      continue;
    }
    if (eq == std::string::npos && absl::StartsWith(name, "no") &&
        IsMountFlag(name.substr(2), &is_bool) && is_bool) {
      flags->push_back("--" + option);
      continue;
    }
    if (args.sloppy) {
      std::fprintf(stderr, "%s: ignoring unknown mount option '%s' (-s)\n", kProgram,
                   option.c_str());
      continue;
    }
    std::fprintf(stderr, "%s: unknown mount option '%s' (see %s --help)\n", kProgram,
                 option.c_str(), kProgram);
    return false;
  }
  flags->insert(flags->begin(), flagfiles.begin(), flagfiles.end());
  return true;
}

}  // namespace

bool IsMountHelperName(const char* argv0) {
  const char* slash = std::strrchr(argv0, '/');
  const char* base = slash == nullptr ? argv0 : slash + 1;
  return std::strcmp(base, "mount.fuse.logfs") == 0 || std::strcmp(base, "mount.logfs") == 0;
}

int MountHelperMain(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      PrintOptionTable();
      PrintHelpFlags(MountHelpFlags());
      return 0;
    }
  }
  HelperArgs args;
  if (!ParseHelperArgs(argc, argv, &args)) return 1;
  auto meta_list = client::MetaEndpoints::ParseList(args.source);
  if (!meta_list.ok()) {
    std::fprintf(stderr, "%s: META_LIST %s: %s\n", kProgram, args.source.c_str(),
                 std::string(meta_list.status().message()).c_str());
    return 1;
  }
  std::vector<std::string> flags;
  if (!OptionsToFlags(args, &flags)) return 1;
  std::vector<std::string> mount_args = {std::string(kProgram)};
  mount_args.insert(mount_args.end(), flags.begin(), flags.end());
  mount_args.push_back("--meta=" + args.source);
  mount_args.push_back("--fsname=" + args.source);
  mount_args.push_back(args.mountpoint);
  if (args.verbose) {
    std::fprintf(stderr, "%s: logfs mount %s\n", kProgram,
                 absl::StrJoin(mount_args.begin() + 1, mount_args.end(), " ").c_str());
  }
  std::vector<char*> mount_argv;
  for (auto& a : mount_args) mount_argv.push_back(a.data());
  mount_argv.push_back(nullptr);
  int mount_argc = static_cast<int>(mount_args.size());
  if (args.fake) {
    // Everything but the mount: the flags parse and validate, the mount
    // point is a directory.
    char** fake_argv = mount_argv.data();
    InitProcess(&mount_argc, &fake_argv, kUsage, MountHelpFlags());
    struct stat st;
    if (stat(args.mountpoint.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      std::fprintf(stderr, "%s: mount point %s is not a directory\n", kProgram,
                   args.mountpoint.c_str());
      return 1;
    }
    return 0;
  }
  return MountMain(mount_argc, mount_argv.data());
}

}  // namespace logfs::main

// `logfs` multi-call binary: the first argument names the subcommand, or
// the program name is mount.fuse.logfs (the mount(8) helper).
// This folder is the only home of gflags and main().
#include <cstdio>
#include <cstring>
#include <string>

#include "src/main/subcommands.h"
#include "src/util/version.h"

namespace {

struct Subcommand {
  const char* name;
  int (*run)(int argc, char** argv);
  const char* summary;
};

constexpr Subcommand kSubcommands[] = {
    {"meta", logfs::main::MetaMain, "run the meta server"},
    {"segd", logfs::main::SegdMain, "run a segment server"},
    {"mount", logfs::main::MountMain,
     "mount logfs at a directory (embedded cluster without --meta)"},
    {"umount", logfs::main::UmountMain, "unmount a logfs mount and wait for its daemon to exit"},
    {"bench", logfs::main::BenchMain,
     "benchmarks: 'bench wal --dir=PATH|--meta=HOST:PORT', 'bench read --dir=PATH'"},
    {"status", logfs::main::StatusMain, "servers, space, open and under-replicated segments"},
    {"fsck", logfs::main::FsckMain, "check every sealed segment's replicas; exit 1 if any lacks"},
    {"recover", logfs::main::RecoverMain, "revoke a file's writer lease and recover it now"},
    {"clone", logfs::main::CloneMain, "copy a sealed file in metadata only: no byte is written"},
    {"snapshot", logfs::main::SnapshotMain,
     "create, list or delete read-only point-in-time copies of a directory"},
    {"checker", logfs::main::CheckerMain,
     "durability checker: 'checker write|verify --dir --ack_dir'"},
    {"version", nullptr, "print \"logfs VERSION\" (also: logfs --version)"},
};

void Usage(FILE* out) {
  std::fprintf(out, "usage: logfs <subcommand> [--flag=value ...] [args]\n\nsubcommands:\n");
  for (const auto& s : kSubcommands) std::fprintf(out, "  %-8s %s\n", s.name, s.summary);
  std::fprintf(out, "\n'logfs <subcommand> --help' lists its flags.\n");
}

}  // namespace

int main(int argc, char** argv) {
  // Run as /usr/sbin/mount.fuse.logfs (a link to logfs) by mount(8).
  if (argc > 0 && logfs::main::IsMountHelperName(argv[0])) {
    return logfs::main::MountHelperMain(argc, argv);
  }
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    Usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (std::strcmp(argv[1], "--version") == 0 || std::strcmp(argv[1], "version") == 0) {
    if (argc > 2) {
      std::fprintf(stderr, "logfs: unexpected argument '%s' after %s\n", argv[2], argv[1]);
      return 2;
    }
    std::printf("logfs %s\n", logfs::Version());
    return 0;
  }
  for (const auto& s : kSubcommands) {
    if (s.run != nullptr && std::strcmp(argv[1], s.name) == 0) {
      // The subcommand sees "logfs <name>" as its program name.
      std::string program = std::string(argv[0]) + " " + s.name;
      argv[1] = program.data();
      return s.run(argc - 1, argv + 1);
    }
  }
  std::fprintf(stderr, "logfs: unknown subcommand '%s'\n", argv[1]);
  Usage(stderr);
  return 2;
}

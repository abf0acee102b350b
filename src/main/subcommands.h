// Entry points of the logfs subcommands. Each parses its own gflags from
// argv (argv[0] is "logfs <name>") and returns the process exit code.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace logfs::main {

int MetaMain(int argc, char** argv);
int SegdMain(int argc, char** argv);
int MountMain(int argc, char** argv);
int UmountMain(int argc, char** argv);
// The mount(8) helper (src/main/mount_helper_main.cc): main() runs it when
// IsMountHelperName(argv[0]) (basename mount.fuse.logfs or mount.logfs).
bool IsMountHelperName(const char* argv0);
int MountHelperMain(int argc, char** argv);
int BenchMain(int argc, char** argv);
int StatusMain(int argc, char** argv);
int FsckMain(int argc, char** argv);
int CheckerMain(int argc, char** argv);
int RecoverMain(int argc, char** argv);
// src/main/clone_main.cc
int CloneMain(int argc, char** argv);
// src/main/snapshot_main.cc
int SnapshotMain(int argc, char** argv);
// `logfs meta backup|bootstrap` (src/main/meta_admin_main.cc): MetaMain
// hands argv to MetaAdminMain when IsMetaAdminCommand (argv[1] names one).
bool IsMetaAdminCommand(int argc, char** argv);
int MetaAdminMain(int argc, char** argv);

// What `logfs <subcommand> --help` lists: the flags whose description
// starts with one of `prefixes` (e.g. "mount:") and the shared flags named
// in `shared`.
struct HelpFlags {
  std::vector<std::string> prefixes;
  std::vector<std::string> shared;
};

// Prints "flags:" and the flags `help` selects, with their defaults and
// descriptions, to stdout.
void PrintHelpFlags(const HelpFlags& help);

// The flags `logfs mount` shares with other subcommands, as its --help and
// the mount helper's list them (with those of the "mount:" prefix).
inline const std::vector<std::string>& MountSharedFlags() {
  static const auto* flags = new std::vector<std::string>{"io_threads", "rpc_timeout_ms", "host_id",
                                                          "metrics_listen", "metrics_address_file"};
  return *flags;
}

// Shared by the subcommands: parses flags (exits with a one-line error on
// an unknown or bad flag) and sets up glog to stderr. --help (or -h)
// prints `usage` and the subcommand's flags, and exits 0.
// With --cluster_secret_file, it loads the secret (LoadClusterSecret) and
// exits with a one-line error if it cannot.
void InitProcess(int* argc, char*** argv, const char* usage, const HelpFlags& help);

// After InitProcess: true if argv holds no more than `max_args` arguments
// besides argv[0]; else prints "PROGRAM: unexpected argument 'X'" and
// "usage: USAGE" to stderr and returns false (the caller exits non-zero).
bool AtMostArgs(int argc, char** argv, int max_args, const char* usage);

// Reads the secret file at `path` (env::ReadSecretFile: refused if group
// or others may access it) and makes it the key of every connection this
// process opens or accepts (rpc::SetProcessClusterKey), named after
// `program` ("logfs segd") and the host name. Call before any connection.
absl::Status LoadClusterSecret(const std::string& path, const std::string& program);

// A tool that works on files of a logfs mount (`logfs bench --dir`,
// `logfs clone`) and talks to its cluster: without --cluster_secret_file,
// loads the secret the mount under `path` uses (its
// user.logfs.cluster_secret_file; an embedded cluster's
// DATA_DIR/cluster.secret), if this user may read it. Nothing when
// --cluster_secret_file is given, or `path` is not on a mount with a
// secret; a secret that cannot be loaded is reported on stderr.
void LoadTheMountsSecret(const std::string& path, const std::string& program);
// The meta address the mount under `path` tells (its
// user.logfs.meta_address), or "" when `path` is not on a logfs mount.
std::string MetaOfMount(const std::string& path);

}  // namespace logfs::main

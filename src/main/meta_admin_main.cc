// `logfs meta backup` and `logfs meta bootstrap` (store/admin/meta_backup.h):
// sub-subcommands of `logfs meta`, named right after it. Exit codes: 0
// done, 1 on a usage error or a failure (one line on stderr).
#include <gflags/gflags.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/main/subcommands.h"
#include "store/admin/meta_backup.h"
#include "store/meta/db/metadata_db.h"

DECLARE_string(meta);           // src/main/server_main.cc
DECLARE_string(data_dir);       // src/main/server_main.cc
DECLARE_int32(rpc_timeout_ms);  // src/main/server_main.cc
DEFINE_bool(force, false,
            "meta bootstrap: replace an existing DATA_DIR/metadb, which is moved aside to "
            "metadb.old-<UTC time> (never deleted); refused while a meta runs on it");

namespace logfs::main {
namespace {

// --meta as a list "h1:p,h2:p"; false (after a message) if empty.
bool MetaList(const char* program, std::vector<std::string>* addresses) {
  *addresses = absl::StrSplit(FLAGS_meta, ',', absl::SkipWhitespace());
  if (!addresses->empty()) return true;
  std::fprintf(stderr, "%s: --meta=HOST:PORT[,HOST:PORT...] is required\n", program);
  return false;
}

int Failed(const char* program, const absl::Status& status) {
  std::fprintf(stderr, "%s: %s\n", program, std::string(status.message()).c_str());
  return 1;
}

std::string Describe(const admin::MetaBackupResult& result) {
  return absl::StrCat("checkpoint ", result.checkpoint_id, " of meta at ", result.meta_address,
                      ": applied seq ", result.applied_seq, ", ", result.files, " files, ",
                      result.bytes, " bytes");
}

int BackupMain(int argc, char** argv) {
  constexpr char kUsage[] = "logfs meta backup --meta=HOST:PORT[,HOST:PORT...] DIR";
  InitProcess(&argc, &argv, kUsage, {{"meta backup:"}, {"meta", "rpc_timeout_ms"}});
  if (!AtMostArgs(argc, argv, 1, kUsage)) return 1;
  if (argc != 2 || argv[1][0] == '\0') {
    std::fprintf(stderr, "%s: expected the backup directory\nusage: %s\n", argv[0], kUsage);
    return 1;
  }
  admin::MetaBackupOptions options;
  if (!MetaList(argv[0], &options.meta_addresses)) return 1;
  options.rpc_timeout_ms = FLAGS_rpc_timeout_ms;
  auto result = admin::Backup(options, argv[1]);
  if (!result.ok()) return Failed(argv[0], result.status());
  std::printf("backed up %s into %s\n", Describe(*result).c_str(), argv[1]);
  return 0;
}

absl::StatusOr<uint64_t> OpenAppliedSeq(const std::string& dir) {
  auto db = meta::MetadataDb::Open({dir});
  if (!db.ok()) return db.status();
  return (*db)->GetCounter(meta::MetaCounter::kAppliedSeq);
}

int BootstrapMain(int argc, char** argv) {
  constexpr char kUsage[] =
      "logfs meta bootstrap --meta=HOST:PORT[,HOST:PORT...] --data_dir=DIR [--force]";
  InitProcess(&argc, &argv, kUsage, {{"meta bootstrap:"}, {"meta", "data_dir", "rpc_timeout_ms"}});
  if (!AtMostArgs(argc, argv, 0, kUsage)) return 1;
  if (FLAGS_data_dir.empty()) {
    std::fprintf(stderr, "%s: --data_dir is required\n", argv[0]);
    return 1;
  }
  admin::MetaBackupOptions options;
  if (!MetaList(argv[0], &options.meta_addresses)) return 1;
  options.rpc_timeout_ms = FLAGS_rpc_timeout_ms;
  options.open_applied_seq = OpenAppliedSeq;
  auto result = admin::Bootstrap(options, FLAGS_data_dir, FLAGS_force);
  if (!result.ok()) return Failed(argv[0], result.status());
  if (!result->moved_aside.empty()) {
    std::printf("moved the old database aside to %s\n", result->moved_aside.c_str());
  }
  std::printf("bootstrapped %s/%s from %s\n", FLAGS_data_dir.c_str(), admin::kMetadataDbDirName,
              Describe(*result).c_str());
  return 0;
}

}  // namespace

bool IsMetaAdminCommand(int argc, char** argv) {
  return argc >= 2 &&
         (std::strcmp(argv[1], "backup") == 0 || std::strcmp(argv[1], "bootstrap") == 0);
}

int MetaAdminMain(int argc, char** argv) {
  const bool backup = std::strcmp(argv[1], "backup") == 0;
  // The sub-subcommand sees "logfs meta <name>" as its program name.
  std::string program = absl::StrCat(argv[0], " ", argv[1]);
  argv[1] = program.data();
  return backup ? BackupMain(argc - 1, argv + 1) : BootstrapMain(argc - 1, argv + 1);
}

}  // namespace logfs::main

// One group-commit round of a segment server's journal
// (store/segd/journal.h): `range(0)` appends of 512 bytes staged with Add,
// then one Sync (a direct write with RWF_DSYNC, so the disk's flush is in
// the figure). The journal lives in a temp dir under $TMPDIR, else
// /var/tmp: a disk, not tmpfs, as a segment server's data dir is. Items
// are appends, so items/s is the round's appends per second.
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "store/segd/journal.h"

namespace logfs {
namespace {

std::string TempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/var/tmp") +
                     "/logfs-journal-bench-XXXXXX";
  return mkdtemp(tmpl.data()) != nullptr ? tmpl : "";
}

void BM_JournalRound(benchmark::State& state) {
  const std::string dir = TempDir();
  if (dir.empty()) return state.SkipWithError("no temp dir");
  segd::JournalOptions options;
  options.dir = dir;
  options.journal_bytes = 16u << 20;
  auto journal =
      segd::Journal::Open(options, [](const segd::JournalRecord&) { return absl::OkStatus(); });
  if (!journal.ok() || !(*journal)->Restart().ok()) {
    std::filesystem::remove_all(dir);
    return state.SkipWithError("cannot open a journal");
  }
  (*journal)->SetCheckpoint([] { return absl::OkStatus(); });  // nothing to sync at a wrap
  const std::string record(512, 'r');
  uint64_t offset = 0;
  for (auto _ : state) {
    for (int64_t i = 0; i < state.range(0); ++i) {
      if (!(*journal)->Add(1, offset, record).ok()) return state.SkipWithError("Add failed");
      offset += record.size();
    }
    if (!(*journal)->Sync().ok()) return state.SkipWithError("Sync failed");
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
  journal->reset();
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_JournalRound)->Arg(1)->Arg(8)->Arg(64)->UseRealTime();

}  // namespace
}  // namespace logfs

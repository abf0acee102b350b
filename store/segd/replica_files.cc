#include "store/segd/replica_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/status/macros.h"

namespace logfs::segd {

std::string EncodeReplicaState(const ReplicaState& state) {
  return absl::StrCat("epoch=", state.epoch, "\nsealed=", state.sealed ? 1 : 0,
                      "\nsealed_length=", state.sealed_length, "\n");
}

absl::StatusOr<ReplicaState> DecodeReplicaState(absl::string_view text) {
  ReplicaState state;
  unsigned seen = 0;  // bit per field: each must appear exactly once
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(line, '=');
    uint64_t value = 0;
    if (!absl::SimpleAtoi(kv.second, &value)) {
      return absl::DataLossError(absl::StrCat("bad state line '", line, "'"));
    }
    unsigned field = 0;
    if (kv.first == "epoch") {
      state.epoch = value;
      field = 1;
    } else if (kv.first == "sealed") {
      state.sealed = value != 0;
      field = 2;
    } else if (kv.first == "sealed_length") {
      state.sealed_length = value;
      field = 4;
    } else {
      return absl::DataLossError(absl::StrCat("unknown state field '", kv.first, "'"));
    }
    if ((seen & field) != 0) {
      return absl::DataLossError(absl::StrCat("repeated state field '", kv.first, "'"));
    }
    seen |= field;
  }
  if (seen != 7) return absl::DataLossError("state file is missing fields");
  return state;
}

}  // namespace logfs::segd

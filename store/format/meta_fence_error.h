// The refusal of a meta command whose meta epoch is below the highest a
// segment server has seen (docs/meta_ha.md "Fencing"): kFailedPrecondition
// with a message that starts "fenced: meta epoch ", so that callers can
// tell it from the other kFailedPrecondition answers of CreateSegment and
// Seal (a sealed replica, a segment epoch fence) across the wire, which
// carries the code and message only (store/format/error_codec.h).
// Thread-safe: pure functions.
#pragma once

#include <cstdint>

#include "absl/status/status.h"

namespace logfs::format {

// "fenced: meta epoch 4 is below 7, the highest this server has seen".
absl::Status MetaEpochFencedError(uint64_t meta_epoch, uint64_t highest);
// Whether `status` is such a refusal (also after a round trip).
bool IsMetaEpochFenced(const absl::Status& status);

}  // namespace logfs::format

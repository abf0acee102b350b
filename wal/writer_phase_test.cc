// The writer's phase table (wal/writer_phase.h), checked edge by edge.
#include "wal/writer_phase.h"

#include <gtest/gtest.h>

#include <set>
#include <utility>

namespace logfs::wal {
namespace {

using P = WriterPhase;

TEST(WriterPhaseTest, AllowsExactlyTheDocumentedTransitions) {
  const std::set<std::pair<P, P>> allowed = {
      {P::kIdle, P::kRolling},       {P::kRolling, P::kIdle},       {P::kIdle, P::kSealing},
      {P::kSealing, P::kIdle},       {P::kIdle, P::kClosing},       {P::kClosing, P::kClosed},
      {P::kIdle, P::kRecovering},    {P::kRecovering, P::kIdle},    {P::kRolling, P::kRecovering},
      {P::kRecovering, P::kRolling}, {P::kSealing, P::kRecovering}, {P::kRecovering, P::kSealing},
      {P::kClosing, P::kRecovering}, {P::kRecovering, P::kClosing}, {P::kRecovering, P::kClosed},
  };
  const P all[] = {P::kIdle, P::kRolling, P::kSealing, P::kRecovering, P::kClosing, P::kClosed};
  for (P from : all) {
    for (P to : all) {
      EXPECT_EQ(allowed.count({from, to}) == 1, IsAllowedTransition(from, to))
          << WriterPhaseName(from) << " -> " << WriterPhaseName(to);
    }
  }
}

}  // namespace
}  // namespace logfs::wal

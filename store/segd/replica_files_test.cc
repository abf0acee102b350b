// The replica state file codec (store/segd/replica_files.h): what
// EncodeReplicaState writes decodes back; a file that is not exactly the
// three fields, once each, is kDataLoss.
#include "store/segd/replica_files.h"

#include <gtest/gtest.h>

namespace logfs::segd {
namespace {

TEST(ReplicaFilesTest, StateRoundTrips) {
  auto state = DecodeReplicaState(EncodeReplicaState({7, true, 4096}));
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->epoch, 7u);
  EXPECT_TRUE(state->sealed);
  EXPECT_EQ(state->sealed_length, 4096u);
}

TEST(ReplicaFilesTest, MissingOrUnknownFieldIsDataLoss) {
  EXPECT_TRUE(absl::IsDataLoss(DecodeReplicaState("epoch=1\nsealed=0\n").status()));
  EXPECT_TRUE(absl::IsDataLoss(DecodeReplicaState("").status()));
  EXPECT_TRUE(absl::IsDataLoss(
      DecodeReplicaState("epoch=1\nsealed=0\nsealed_length=0\nsize=3\n").status()));
  EXPECT_TRUE(
      absl::IsDataLoss(DecodeReplicaState("epoch=x\nsealed=0\nsealed_length=0\n").status()));
}

// Three lines of one field used to count as the three fields: a damaged
// file read as epoch 5, open, sealed_length 0.
TEST(ReplicaFilesTest, RepeatedFieldIsDataLoss) {
  EXPECT_TRUE(absl::IsDataLoss(DecodeReplicaState("epoch=5\nepoch=5\nepoch=5\n").status()));
  EXPECT_TRUE(absl::IsDataLoss(DecodeReplicaState("epoch=5\nsealed=1\nsealed=0\n").status()));
}

}  // namespace
}  // namespace logfs::segd

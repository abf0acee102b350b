#include "fuse/handle_table.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>

namespace logfs::fuse {
namespace {

TEST(HandleTableTest, IdsNameTheirHandlesUntilTakenAndAreGivenOutAgain) {
  HandleTable<int> table;
  const uint64_t a = table.Add(std::make_shared<int>(1));
  const uint64_t b = table.Add(std::make_shared<int>(2));
  ASSERT_NE(0u, a);
  ASSERT_NE(a, b);
  EXPECT_EQ(1, *table.Get(a));
  EXPECT_EQ(2, *table.Get(b));
  EXPECT_EQ(nullptr, table.Get(0));
  EXPECT_EQ(nullptr, table.Get(b + 1));
  EXPECT_EQ(nullptr, table.Get(HandleTable<int>::kIdMax + 1));
  std::shared_ptr<int> taken = table.Take(a);
  ASSERT_NE(nullptr, taken);
  EXPECT_EQ(1, *taken);
  EXPECT_EQ(nullptr, table.Get(a));
  EXPECT_EQ(nullptr, table.Take(a));  // a RELEASE of an unknown handle
  EXPECT_EQ(a, table.Add(std::make_shared<int>(3)));  // freed ids first
  EXPECT_EQ(3, *table.Get(a));
}

TEST(HandleTableTest, AHandedOverTableKeepsItsIdsAndNewOnesAvoidThem) {
  // A successor daemon puts its predecessor's handles back under the ids
  // the kernel knows (fuse/session.h), then gives out ids of its own.
  HandleTable<int> table;
  ASSERT_TRUE(table.AddAt(5000, std::make_shared<int>(50)));  // past the first block
  ASSERT_TRUE(table.AddAt(2, std::make_shared<int>(2)));
  EXPECT_FALSE(table.AddAt(2, std::make_shared<int>(9)));  // in use
  EXPECT_FALSE(table.AddAt(0, std::make_shared<int>(9)));
  EXPECT_FALSE(table.AddAt(HandleTable<int>::kIdMax + 1, std::make_shared<int>(9)));
  EXPECT_EQ(50, *table.Get(5000));
  EXPECT_EQ(2, *table.Get(2));
  std::set<uint64_t> given;
  for (int i = 0; i < 6000; ++i) {
    const uint64_t id = table.Add(std::make_shared<int>(i));
    ASSERT_NE(0u, id);
    ASSERT_NE(2u, id);
    ASSERT_NE(5000u, id);
    ASSERT_TRUE(given.insert(id).second) << id;
  }
  auto snapshot = table.Snapshot();
  ASSERT_EQ(6002u, snapshot.size());
  EXPECT_EQ(2u, snapshot[1].first);
  EXPECT_EQ(2, *snapshot[1].second);
}

}  // namespace
}  // namespace logfs::fuse

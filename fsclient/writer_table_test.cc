// WriterTable alone: handles shared by the opens of one file, the
// placeholder of an open at meta, the close of the last handle and the
// calls that run after it.
#include "fsclient/writer_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

namespace logfs::fsclient {
namespace {

struct FakeWriter {
  int id = 0;
};

TEST(WriterTableTest, AFirstOpenLeavesAPlaceholderThatBlocksOthersUntilInstalled) {
  WriterTable<FakeWriter> table;
  EXPECT_TRUE(table.Settled(7));
  EXPECT_EQ(nullptr, table.Acquire(7));  // ask meta for the lease
  EXPECT_FALSE(table.Settled(7));        // a second open waits
  EXPECT_EQ(nullptr, table.Find(7));     // no writer yet
  EXPECT_TRUE(table.WritingInos().empty());
  table.Install(7, std::make_shared<FakeWriter>(FakeWriter{1}));
  EXPECT_TRUE(table.Settled(7));
  ASSERT_NE(nullptr, table.Find(7));
  EXPECT_EQ(1, table.Find(7)->id);
  EXPECT_EQ(std::vector<uint64_t>{7}, table.WritingInos());
}

TEST(WriterTableTest, AFailedOpenAtMetaLeavesNothing) {
  WriterTable<FakeWriter> table;
  EXPECT_EQ(nullptr, table.Acquire(7));
  table.Abandon(7);
  EXPECT_TRUE(table.Settled(7));
  EXPECT_EQ(nullptr, table.Acquire(7));  // the next open asks meta again
}

TEST(WriterTableTest, HandlesShareOneWriterAndOnlyTheLastReleaseCloses) {
  WriterTable<FakeWriter> table;
  table.Install(7, std::make_shared<FakeWriter>(FakeWriter{1}));
  auto second = table.Acquire(7);
  ASSERT_NE(nullptr, second);
  EXPECT_EQ(1, second->id);
  EXPECT_NE(nullptr, table.Acquire(7));  // a third handle
  EXPECT_FALSE(table.Release(7));        // the third's truncate was refused
  EXPECT_FALSE(table.Release(7));
  EXPECT_FALSE(table.Closing(7));
  EXPECT_TRUE(table.Release(7));  // the last handle
  EXPECT_TRUE(table.Closing(7));
  EXPECT_FALSE(table.Settled(7));  // an open waits for the close
  EXPECT_TRUE(table.Closed(7).empty());
  EXPECT_TRUE(table.Settled(7));
  EXPECT_EQ(nullptr, table.Find(7));
}

TEST(WriterTableTest, AnOpenThatFailsAfterTheOthersWereReleasedClosesTheWriter) {
  WriterTable<FakeWriter> table;
  table.Install(7, std::make_shared<FakeWriter>(FakeWriter{1}));
  EXPECT_NE(nullptr, table.Acquire(7));  // an O_TRUNC open, truncating
  EXPECT_FALSE(table.Release(7));        // meanwhile the first handle goes
  EXPECT_TRUE(table.Release(7));         // the truncate fails: last handle
  EXPECT_TRUE(table.Closing(7));
}

TEST(WriterTableTest, CallsQueuedDuringACloseComeBackOnceItEnds) {
  WriterTable<FakeWriter> table;
  std::vector<std::string> ran;
  EXPECT_FALSE(table.RunAfterClose(7, [&] { ran.push_back("no close"); }));
  table.Install(7, std::make_shared<FakeWriter>(FakeWriter{1}));
  EXPECT_FALSE(table.RunAfterClose(7, [&] { ran.push_back("open, not closing"); }));
  ASSERT_TRUE(table.Release(7));
  EXPECT_TRUE(table.RunAfterClose(7, [&] { ran.push_back("truncate 1"); }));
  EXPECT_TRUE(table.RunAfterClose(7, [&] { ran.push_back("truncate 2"); }));
  EXPECT_TRUE(ran.empty());
  for (auto& call : table.Closed(7)) call();
  EXPECT_EQ((std::vector<std::string>{"truncate 1", "truncate 2"}), ran);
}

TEST(WriterTableTest, FilesAreIndependent) {
  WriterTable<FakeWriter> table;
  table.Install(7, std::make_shared<FakeWriter>(FakeWriter{1}));
  EXPECT_EQ(nullptr, table.Acquire(8));
  ASSERT_TRUE(table.Release(7));
  EXPECT_FALSE(table.Settled(8));  // still at meta
  EXPECT_FALSE(table.Settled(7));  // closing
  table.Install(8, std::make_shared<FakeWriter>(FakeWriter{2}));
  EXPECT_TRUE(table.Settled(8));
  std::vector<uint64_t> writing = table.WritingInos();  // 7's close still runs
  std::sort(writing.begin(), writing.end());
  EXPECT_EQ((std::vector<uint64_t>{7, 8}), writing);
}

}  // namespace
}  // namespace logfs::fsclient

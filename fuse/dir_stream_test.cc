// DirStream over a fake meta that pages a std::set of names three at a
// time: the FUSE offset convention, one page held at a time, rewinds,
// seeks back, and changes to the directory between pages.
#include "fuse/dir_stream.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace logfs::fuse {
namespace {

constexpr int kPageEntries = 3;

class DirStreamTest : public ::testing::Test {
 protected:
  DirStreamTest()
      : stream_(7, [this](const std::string& start_after) { return Fetch(start_after); }) {}

  absl::StatusOr<proto::ReaddirResponse> Fetch(const std::string& start_after) {
    ++fetches_;
    if (!fail_.ok()) return fail_;
    proto::ReaddirResponse response;
    auto it = names_.upper_bound(start_after);
    for (; it != names_.end() && response.entries_size() < kPageEntries; ++it) {
      proto::DirEntry* entry = response.add_entries();
      entry->set_name(*it);
      entry->set_ino(100);
    }
    response.set_more(it != names_.end());
    return response;
  }

  // Reads like the kernel: from `offset`, taking at most `take` entries per
  // call and continuing at the offset of the last one taken, to the end.
  std::vector<std::string> ReadFrom(uint64_t offset, size_t take) {
    std::vector<std::string> names;
    for (int calls = 0; calls < 1000; ++calls) {
      auto entries = stream_.EntriesAt(offset);
      EXPECT_TRUE(entries.ok()) << entries.status();
      if (!entries.ok() || entries->empty()) return names;
      for (size_t i = 0; i < entries->size() && i < take; ++i) {
        names.push_back((*entries)[i].name());
        ++offset;
      }
    }
    ADD_FAILURE() << "no end of directory";
    return names;
  }

  std::set<std::string> names_;
  int fetches_ = 0;
  absl::Status fail_;
  DirStream stream_;
};

TEST_F(DirStreamTest, ListsDotsThenEveryNameOnceAcrossPages) {
  for (char c = 'a'; c <= 'h'; ++c) names_.insert(std::string(1, c));
  ASSERT_TRUE(stream_.Open().ok());
  EXPECT_EQ(1, fetches_);
  std::vector<std::string> expected = {".", "..", "a", "b", "c", "d", "e", "f", "g", "h"};
  // The first read uses the page Open fetched; a reader that takes two
  // entries at a time resumes inside pages and at their ends.
  EXPECT_EQ(expected, ReadFrom(0, 2));
  EXPECT_EQ(3, fetches_);  // 8 names: pages of 3, 3, 2
  auto first = stream_.EntriesAt(0);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(".", (*first)[0].name());
  EXPECT_EQ(7u, (*first)[0].ino());
  EXPECT_EQ(4, fetches_);  // offset 0 again (rewinddir): a fresh listing
}

TEST_F(DirStreamTest, CursorSurvivesDeletesAndAddsBetweenPages) {
  for (char c = 'a'; c <= 'h'; ++c) names_.insert(std::string(1, c));
  ASSERT_TRUE(stream_.Open().ok());
  auto first = stream_.EntriesAt(0);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(5u, first->size());  // ".", "..", a, b, c
  // rm -rf: what was listed is removed before the next page is read.
  names_.erase("a");
  names_.erase("b");
  names_.erase("c");
  names_.erase("e");
  names_.insert("0");   // before the cursor: not seen in this pass
  names_.insert("dd");  // after it: seen
  EXPECT_EQ((std::vector<std::string>{"d", "dd", "f", "g", "h"}), ReadFrom(5, 10));
}

TEST_F(DirStreamTest, ARestoredStreamContinuesWhereTheExportedOneStood) {
  // A successor daemon's stream (logfs mount --takeover) continues an rm
  // -rf's listing: the kernel's next offset names the same place, with
  // what was removed meanwhile neither repeated nor hiding what is left.
  for (char c = 'a'; c <= 'h'; ++c) names_.insert(std::string(1, c));
  ASSERT_TRUE(stream_.Open().ok());
  auto first = stream_.EntriesAt(0);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(5u, first->size());  // ".", "..", a, b, c
  proto::HandedOffDir handed;
  stream_.Export(&handed);
  names_.erase("a");
  names_.erase("b");
  names_.erase("c");
  DirStream successor(7, [this](const std::string& start_after) { return Fetch(start_after); });
  successor.Restore(handed);
  std::vector<std::string> names;
  for (uint64_t offset = 5;;) {
    auto entries = successor.EntriesAt(offset);
    ASSERT_TRUE(entries.ok()) << entries.status();
    if (entries->empty()) break;
    for (const auto& e : *entries) names.push_back(e.name());
    offset += entries->size();
  }
  EXPECT_EQ((std::vector<std::string>{"d", "e", "f", "g", "h"}), names);
}

TEST_F(DirStreamTest, SeekBackToAnEarlierPageListsAgainAndSkips) {
  for (char c = 'a'; c <= 'h'; ++c) names_.insert(std::string(1, c));
  ASSERT_TRUE(stream_.Open().ok());
  EXPECT_EQ(10u, ReadFrom(0, 10).size());
  // Position 3 ("b") is in the first page, no longer held.
  EXPECT_EQ((std::vector<std::string>{"b", "c", "d", "e", "f", "g", "h"}), ReadFrom(3, 10));
  // Past the end: the end.
  auto past = stream_.EntriesAt(50);
  ASSERT_TRUE(past.ok());
  EXPECT_TRUE(past->empty());
}

TEST_F(DirStreamTest, EmptyDirectoryHasOnlyDots) {
  ASSERT_TRUE(stream_.Open().ok());
  EXPECT_EQ((std::vector<std::string>{".", ".."}), ReadFrom(0, 10));
}

TEST_F(DirStreamTest, FetchErrorsAreReturned) {
  fail_ = absl::NotFoundError("gone");
  EXPECT_EQ(absl::StatusCode::kNotFound, stream_.Open().code());
  EXPECT_EQ(absl::StatusCode::kNotFound, stream_.EntriesAt(0).status().code());
  fail_ = absl::OkStatus();
  EXPECT_TRUE(stream_.EntriesAt(0).ok());  // the next call lists again
}

TEST_F(DirStreamTest, EmptyPageWithMoreIsAnError) {
  DirStream broken(7, [](const std::string&) {
    proto::ReaddirResponse response;
    response.set_more(true);
    return absl::StatusOr<proto::ReaddirResponse>(response);
  });
  EXPECT_EQ(absl::StatusCode::kInternal, broken.Open().code());
}

}  // namespace
}  // namespace logfs::fuse

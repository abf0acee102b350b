// Test only: the base of the Namespace unit tests. A Namespace over a real
// MetadataDb in a temp dir (removed at the end), with a fake wall clock that
// only Advance moves, and segment servers that are never reachable unless a
// test brings its own fake. Reopen is a meta restart: the namespace and the
// database close and open again from disk.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "store/meta/metadata_db.h"
#include "store/meta/namespace.h"
#include "store/meta/segd_api.h"

namespace logfs::meta {

inline constexpr int64_t kFixtureNanosPerMilli = 1000 * 1000;

// Segment servers that cannot be reached: for tests that make no calls to
// them, or that check what meta does when none answers.
class UnreachableSegmentServers : public SegmentServerApi {
 public:
  absl::StatusOr<proto::SegmentInfoResponse> SegmentInfo(const std::string&, uint64_t) override {
    return absl::UnavailableError("no segment servers in this test");
  }
  absl::StatusOr<proto::SegmentInfoResponse> Seal(const std::string&, uint64_t, uint64_t,
                                                  uint64_t) override {
    return absl::UnavailableError("no segment servers in this test");
  }
  std::vector<absl::Status> CopySegments(const std::vector<RereplicationTask>& tasks,
                                         absl::Duration) override {
    return std::vector<absl::Status>(tasks.size(),
                                     absl::UnavailableError("no segment servers in this test"));
  }
};

class NamespaceFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "logfs_namespace_XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(tmpl.data()));
    dir_ = tmpl;
    Reopen();
  }
  void TearDown() override {
    ns_.reset();
    db_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // What a test sets beyond the defaults (called by every Reopen).
  virtual void Configure(NamespaceOptions* options) {}
  // The segment servers the namespace calls; owned by the test.
  virtual SegmentServerApi* servers() { return &unreachable_; }

  void Reopen() {
    ns_.reset();
    db_.reset();
    auto db = MetadataDb::Open({dir_ + "/db"});
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(*db);
    NamespaceOptions options;
    options.now_ns = [this] { return now_ns_.load(); };
    Configure(&options);
    auto ns = Namespace::Open(db_.get(), servers(), options);
    ASSERT_TRUE(ns.ok()) << ns.status();
    ns_ = std::move(*ns);
  }
  void Advance(int64_t ms) { now_ns_ += ms * kFixtureNanosPerMilli; }

  std::string dir_;
  std::atomic<int64_t> now_ns_{1700000000000 * kFixtureNanosPerMilli};
  UnreachableSegmentServers unreachable_;
  std::unique_ptr<MetadataDb> db_;
  std::unique_ptr<Namespace> ns_;
};

}  // namespace logfs::meta

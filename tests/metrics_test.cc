// /metrics of every process of a cluster (issue 15 item 5): meta, three
// segment servers and a mount run with --metrics_listen on 127.0.0.1 port
// 0; after writes, fsyncs and reads each one's scrape holds counters that
// moved by at least what was done, passes `promtool check metrics` with no
// lint problems, and a garbage request gets 400 while the server stays up.
// Every metric the packaged alert rules and Grafana dashboard name
// (packaging/prometheus/, packaging/grafana/; issue 34 item 5) is one that
// some process of the cluster exports.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "src/util/version.h"
#include "tests/fakes/loopback_exchange.h"
#include "tests/mounted_cluster.h"
#include "tests/package_util.h"

namespace logfs::testing {
namespace {

// promtool's verdict on `text`: its exit status and output.
CommandResult Promtool(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name + ".txt";
  EXPECT_TRUE(WriteFile(path, text).ok());
  return RunCommand("promtool check metrics < " + path);
}

// The families a scrape declares: name -> type, from its "# TYPE" lines.
std::map<std::string, std::string> DeclaredFamilies(const std::string& text) {
  std::map<std::string, std::string> families;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, "# TYPE ")) continue;
    std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (words.size() == 2) families[words[0]] = words[1];
  }
  return families;
}

// Whether a PromQL name is one of `families`: the family itself, or a
// histogram's _bucket, _sum or _count series (a summary's _sum, _count).
bool Exported(const std::string& name, const std::map<std::string, std::string>& families) {
  if (families.count(name) > 0) return true;
  for (absl::string_view suffix : {"_bucket", "_sum", "_count"}) {
    if (!absl::EndsWith(name, suffix)) continue;
    auto it = families.find(name.substr(0, name.size() - suffix.size()));
    if (it == families.end()) continue;
    if (it->second == "histogram" || (it->second == "summary" && suffix != "_bucket")) return true;
  }
  return false;
}

// Every logfs_ name in `text` (expressions, legends and descriptions alike).
std::set<std::string> LogfsNames(const std::string& text) {
  std::set<std::string> names;
  const std::regex name("logfs_[a-z0-9_]+");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), name); it != std::sregex_iterator();
       ++it) {
    names.insert(it->str());
  }
  return names;
}

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/logfs-metrics-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(tmpl));
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }
  std::vector<std::string> Flags(const std::string& name) const {
    return {"--metrics_listen=127.0.0.1:0",
            "--metrics_address_file=" + dir_ + "/" + name + ".metrics_address"};
  }
  std::string dir_;
};

TEST_F(MetricsTest, EveryProcessServesLintCleanMetricsThatMove) {
  // (a) A cluster whose every process serves metrics on a free port.
  MountedClusterOptions options;
  options.meta_flags = Flags("meta");
  for (int i = 0; i < options.segment_servers; ++i) {
    options.segd_hosts.emplace_back();
    options.segd_hosts.back().flags = Flags(absl::StrCat("segd", i));
  }
  options.mount_flags = Flags("mount");
  {
    auto mc = MountedCluster::Start(options);
    ASSERT_TRUE(mc.ok()) << mc.status();
    // (b) 4 writes of 256 KiB, each followed by an fsync; a read back; a
    // lookup that fails with ENOENT.
    constexpr size_t kPiece = 256 << 10;
    constexpr int kPieces = 4;
    const std::string data = Pattern(kPiece * kPieces, 7);
    const std::string path = (*mc)->Path("metrics.dat");
    int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    for (int i = 0; i < kPieces; ++i) {
      ASSERT_EQ(write(fd, data.data() + i * kPiece, kPiece), static_cast<ssize_t>(kPiece));
      ASSERT_EQ(fsync(fd), 0);
    }
    ASSERT_EQ(close(fd), 0);
    auto back = ReadFile(path);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, data);
    struct stat st;
    EXPECT_EQ(stat((*mc)->Path("missing").c_str(), &st), -1);

    // (c) Every process's scrape: values that moved, promtool clean, and a
    // garbage request refused without taking the server down.
    std::vector<std::string> names = {"meta", "segd0", "segd1", "segd2", "mount"};
    std::map<std::string, std::string> exported;  // every process's families
    for (const std::string& name : names) {
      SCOPED_TRACE(name);
      const int port = PortInAddressFile(dir_ + "/" + name + ".metrics_address");
      ASSERT_GT(port, 0);
      const std::string text = ScrapeMetrics(port);
      ASSERT_FALSE(text.empty());
      EXPECT_EQ(MetricSample(text, absl::StrCat("logfs_build_info{version=\"", Version(), "\"}")),
                1);
      const CommandResult lint = Promtool(dir_, name, text);
      EXPECT_EQ(lint.exit_code, 0) << lint.output;
      EXPECT_EQ(lint.output, "") << text;
      const std::string garbage = ExchangeOverLoopback(port, "\x16\x03\x01 not http\r\n\r\n");
      EXPECT_TRUE(absl::StartsWith(garbage, "HTTP/1.0 400")) << garbage;
      const std::string again = ScrapeMetrics(port);
      EXPECT_FALSE(again.empty());
      exported.merge(DeclaredFamilies(again));
      if (name == "mount") {
        EXPECT_GE(MetricSample(again, "logfs_wal_append_bytes_total"), data.size());
        EXPECT_GE(MetricSample(again, "logfs_wal_syncs_total"), kPieces);
        EXPECT_GE(MetricSample(again, "logfs_fuse_op_duration_seconds_count{op=\"fsync\"}"),
                  kPieces);
        EXPECT_GE(MetricSample(again, "logfs_fuse_op_duration_seconds_count{op=\"write\"}"),
                  kPieces);
        EXPECT_GE(MetricSample(again, "logfs_fuse_op_duration_seconds_count{op=\"read\"}"), 1);
        EXPECT_GE(MetricSample(again, "logfs_fuse_op_errors_total{op=\"lookup\",errno=\"ENOENT\"}"),
                  1);
        EXPECT_GE(MetricSample(again, "logfs_wal_sync_group_waiters_count"), 1);
      } else if (name == "meta") {
        EXPECT_GE(MetricSample(again, "logfs_meta_call_duration_seconds_count{op=\"create\"}"), 1);
        // The file was created open for write (no OpenWrite) and sealed.
        EXPECT_GE(MetricSample(again, "logfs_meta_call_duration_seconds_count{op=\"seal_segment\"}"),
                  1);
        EXPECT_GE(MetricSample(again, "logfs_meta_commit_groups_total"), 1);
        EXPECT_GE(MetricSample(again, "logfs_meta_committed_changes_total"),
                  MetricSample(again, "logfs_meta_commit_groups_total"));
        EXPECT_EQ(MetricSample(again, "logfs_meta_servers{state=\"live\"}"), 3);
        EXPECT_EQ(MetricSample(again, "logfs_meta_serving"), 1);
        EXPECT_EQ(MetricSample(again, "logfs_meta_mounts"), 1);
        EXPECT_GE(MetricSample(again, "logfs_meta_inodes"), 2);  // the root and metrics.dat
        // The segment census comes with the first complete re-replication
        // scan (a pass every --dead_server_ms / 4): poll for it, bounded.
        std::string census = again;
        for (int i = 0; i < 200 && MetricSample(census, "logfs_meta_rereplication_scans_total") < 1;
             ++i) {
          absl::SleepFor(absl::Milliseconds(100));
          census = ScrapeMetrics(port);
        }
        ASSERT_GE(MetricSample(census, "logfs_meta_rereplication_scans_total"), 1);
        EXPECT_EQ(MetricSample(census, "logfs_meta_segments{state=\"under_replicated\"}"), 0);
        EXPECT_EQ(MetricSample(census, "logfs_meta_segments{state=\"no_live_replica\"}"), 0);
        EXPECT_EQ(MetricSample(census, "logfs_meta_segments{state=\"misplaced\"}"), 0);
        EXPECT_EQ(MetricSample(census, "logfs_meta_rereplication_backlog_copies"), 0);
        exported.merge(DeclaredFamilies(census));
        const CommandResult census_lint = Promtool(dir_, "meta-census", census);
        EXPECT_EQ(census_lint.exit_code, 0) << census_lint.output;
        EXPECT_EQ(census_lint.output, "") << census;
      } else {
        // Three replicas on three servers: each holds every byte.
        EXPECT_GE(MetricSample(again, "logfs_segd_append_bytes_total"), data.size());
        EXPECT_GE(MetricSample(again, "logfs_segd_appends_total"), kPieces);
        EXPECT_GE(MetricSample(again, "logfs_segd_sync_round_duration_seconds_count"), 1);
        EXPECT_GE(MetricSample(again, "logfs_segd_replica_bytes"), data.size());
        EXPECT_GT(MetricSample(again, "logfs_segd_disk_free_bytes"), 0);
      }
      if (const char* save = std::getenv("LOGFS_METRICS_SAMPLE_DIR")) {
        const std::string kind = name.substr(0, 4) == "segd" ? "segd" : name;
        if (name != "segd1" && name != "segd2") {
          EXPECT_TRUE(WriteFile(absl::StrCat(save, "/metrics-sample-", kind, ".txt"), again).ok());
        }
      }
    }

    // (d) The packaged alert rules and dashboard name only metrics the
    // cluster exports (a family counts once declared, whatever its
    // samples; the lookup of (b) made logfs_fuse_op_errors_total appear).
    for (const char* file :
         {"packaging/prometheus/logfs-alerts.yml", "packaging/grafana/logfs-dashboard.json"}) {
      SCOPED_TRACE(file);
      auto text = ReadFile(SourceDir() + "/" + file);
      ASSERT_TRUE(text.ok()) << text.status();
      const std::set<std::string> used = LogfsNames(*text);
      EXPECT_GE(used.size(), 10u);
      for (const std::string& name : used) {
        EXPECT_TRUE(Exported(name, exported)) << name << " is exported by no process";
      }
    }
  }
}

}  // namespace
}  // namespace logfs::testing

// RocksDB with direct I/O on a mount (issue 30 item 4): its direct-I/O
// writer writes SSTs in aligned blocks, padding the last one, and cuts the
// padding with ftruncate before close. That ftruncate failed with EPERM
// (a logfs file only grows), so the first flush failed ("While ftruncate
// file to size ...: Operation not permitted") and the DB stopped taking
// writes. A shrinking ftruncate of a block file still open for write now
// becomes the length it is sealed at (wal::FileWriter::CutTo).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

TEST(RocksDbDirectIoTest, DbBenchWithBothDirectIoOptionsFlushesCompactsAndReadsBack) {
  // Goal: stock db_bench with --use_direct_io_for_flush_and_compaction and
  // --use_direct_reads fills 60,000 keys through many flushes (a 1 MiB
  // write buffer), compacts, finds every key again, and ldb finds the DB
  // consistent; RocksDB's LOG records no background error.
  // Method: the DB in a block directory, its WAL in a WAL directory of one
  // mount; db_bench fillseq, then compact and readrandom on the same DB.
  auto mc = MountedCluster::Start({});
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  MakeWalDir(c);
  ASSERT_EQ(0, mkdir(c.Path("db").c_str(), 0755));
  const std::string common = absl::StrCat(
      " --num=60000 --db=", c.Path("db"), " --wal_dir=", c.Path("wal"),
      " --use_direct_io_for_flush_and_compaction=true --use_direct_reads=true"
      " --write_buffer_size=1048576 --compression_type=none 2>&1");
  CommandResult fill = RunCommand("db_bench --benchmarks=fillseq" + common);
  ASSERT_EQ(0, fill.exit_code) << fill.output;
  CommandResult read = RunCommand("db_bench --benchmarks=compact,readrandom --use_existing_db=1" +
                                  common);
  ASSERT_EQ(0, read.exit_code) << read.output;
  EXPECT_NE(std::string::npos, read.output.find("(60000 of 60000 found)")) << read.output;
  CommandResult log = RunCommand("grep -h 'Background IO error\\|Operation not permitted' " +
                                 c.Path("db") + "/LOG*");
  EXPECT_EQ("", log.output) << "RocksDB's LOG";
  CommandResult check = RunCommand("ldb --db=" + c.Path("db") + " checkconsistency 2>&1");
  EXPECT_EQ(0, check.exit_code) << check.output;
  EXPECT_EQ("OK\n", check.output);
}

}  // namespace
}  // namespace logfs::testing

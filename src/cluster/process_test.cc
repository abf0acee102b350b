// Spawn's children (src/cluster/process.h).
#include "src/cluster/process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace logfs::cluster {
namespace {

// Regression test: a descriptor the parent had open without O_CLOEXEC
// (a file on a FUSE mount, in the mixed-version fault test) went on living
// in every server the parent started, and kept that mount busy long after
// the parent closed it. A child has stdin, stdout, stderr, nothing else.
TEST(SpawnTest, AChildInheritsOnlyItsStandardDescriptors) {
  char dir[] = "/tmp/logfs-spawn-XXXXXX";
  ASSERT_NE(nullptr, mkdtemp(dir));
  const std::string leaked_path = std::string(dir) + "/open-in-parent";
  const int leaked = open(leaked_path.c_str(), O_CREAT | O_WRONLY, 0644);  // no O_CLOEXEC
  ASSERT_GE(leaked, 3);
  const std::string log = std::string(dir) + "/child.log";
  // ls opens /proc/self/fd itself: that one is 3.
  auto pid = Spawn({"/bin/ls", "-1", "/proc/self/fd"}, log);
  ASSERT_TRUE(pid.ok()) << pid.status();
  int status = 0;
  ASSERT_EQ(*pid, waitpid(*pid, &status, 0));
  close(leaked);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::ifstream in(log);
  std::stringstream fds;
  fds << in.rdbuf();
  EXPECT_EQ("0\n1\n2\n3\n", fds.str());
  std::system((std::string("rm -rf ") + dir).c_str());
}

}  // namespace
}  // namespace logfs::cluster

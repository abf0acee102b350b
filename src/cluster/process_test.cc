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

// A descriptor the parent had open without O_CLOEXEC (a file on a FUSE
// mount, in the mixed-version fault test) lives on in every server the
// parent starts, and keeps that mount busy, unless Spawn closes it: with
// close_inherited the child has stdin, stdout, stderr, nothing else.
TEST(SpawnTest, AChildInheritsOnlyItsStandardDescriptorsIfAsked) {
  char dir[] = "/tmp/logfs-spawn-XXXXXX";
  ASSERT_NE(nullptr, mkdtemp(dir));
  const std::string leaked_path = std::string(dir) + "/open-in-parent";
  const int leaked = open(leaked_path.c_str(), O_CREAT | O_WRONLY, 0644);  // no O_CLOEXEC
  ASSERT_GE(leaked, 3);
  const std::string log = std::string(dir) + "/child.log";
  // ls opens /proc/self/fd itself: that one is 3.
  auto fds_of_child = [&](bool close_inherited) {
    unlink(log.c_str());
    auto pid = Spawn({"/bin/ls", "-1", "/proc/self/fd"}, log, "", close_inherited);
    EXPECT_TRUE(pid.ok()) << pid.status();
    int status = 0;
    EXPECT_EQ(*pid, waitpid(*pid, &status, 0));
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    std::ifstream in(log);
    std::stringstream fds;
    fds << in.rdbuf();
    return fds.str();
  };
  EXPECT_EQ("0\n1\n2\n3\n", fds_of_child(true));
  EXPECT_NE("0\n1\n2\n3\n", fds_of_child(false)) << "inherited by default";
  close(leaked);
  std::system((std::string("rm -rf ") + dir).c_str());
}

}  // namespace
}  // namespace logfs::cluster

// Whether a FUSE caller is dying, judged from /proc texts (fuse/process_state.h).
#include "fuse/process_state.h"

#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>

#include "absl/strings/str_cat.h"

namespace logfs::fuse {
namespace {

// A /proc/TID/stat line with `flags` (field 9) and `exit_code` (field 52);
// the command holds a space and a parenthesis, as a real one may.
std::string Stat(uint64_t flags, int exit_code) {
  std::string s = "4242 (a b) c) S 1 4242 4242 0 -1 ";
  absl::StrAppend(&s, flags);
  for (int field = 10; field <= 51; ++field) absl::StrAppend(&s, " 0");
  absl::StrAppend(&s, " ", exit_code, "\n");
  return s;
}

std::string Status(const char* sig_pending, const char* shared_pending,
                   const char* blocked = "0000000000000000",
                   const char* ignored = "0000000000000000",
                   const char* caught = "0000000000000000") {
  return absl::StrCat("Name:\tx\nState:\tS (sleeping)\nSigPnd:\t", sig_pending, "\nShdPnd:\t",
                      shared_pending, "\nSigBlk:\t", blocked, "\nSigIgn:\t", ignored,
                      "\nSigCgt:\t", caught, "\n");
}

constexpr const char* kNone = "0000000000000000";
constexpr const char* kKill = "0000000000000100";  // bit SIGKILL - 1
constexpr const char* kTerm = "0000000000004000";  // bit SIGTERM - 1
constexpr const char* kChld = "0000000000010000";  // bit SIGCHLD - 1
constexpr const char* kQuit = "0000000000000004";  // bit SIGQUIT - 1
constexpr uint64_t kPfExiting = 0x4;

TEST(ProcessStateTest, SigkillPendingOnTheThreadOrItsGroupIsDying) {
  EXPECT_TRUE(IsDying(Stat(0, 0), Status(kKill, kNone)));
  EXPECT_TRUE(IsDying(Stat(0, 0), Status(kNone, kKill)));
}

TEST(ProcessStateTest, APendingSignalThatEndsTheProcessIsDying) {
  // Fatal by default, and neither caught, ignored nor blocked.
  EXPECT_TRUE(IsDying(Stat(0, 0), Status(kTerm, kNone)));
  EXPECT_TRUE(IsDying(Stat(0, 0), Status(kNone, kQuit)));  // dumps core
}

TEST(ProcessStateTest, ASignalItCatchesIgnoresOrBlocksOrThatDoesNotEndItIsNot) {
  EXPECT_FALSE(IsDying(Stat(0, 0), Status(kTerm, kNone, kNone, kNone, kTerm)));  // caught
  EXPECT_FALSE(IsDying(Stat(0, 0), Status(kTerm, kNone, kNone, kTerm)));         // ignored
  EXPECT_FALSE(IsDying(Stat(0, 0), Status(kTerm, kNone, kTerm)));                // blocked
  EXPECT_FALSE(IsDying(Stat(0, 0), Status(kChld, kNone)));  // ignored by default
  EXPECT_FALSE(IsDying(Stat(0, 0), Status(kNone, kNone)));
}

TEST(ProcessStateTest, ExitingAfterAFatalSignalIsDyingANormalExitIsNot) {
  EXPECT_TRUE(IsDying(Stat(kPfExiting, SIGKILL), Status(kNone, kNone)));
  EXPECT_TRUE(IsDying(Stat(kPfExiting, 0x80 | SIGABRT), Status(kNone, kNone)));  // core dump
  EXPECT_FALSE(IsDying(Stat(kPfExiting, 3 << 8), Status(kNone, kNone)));         // exit(3)
  EXPECT_FALSE(IsDying(Stat(0, SIGKILL), Status(kNone, kNone)));                 // not exiting
}

TEST(ProcessStateTest, TextItCannotParseIsNotDying) {
  EXPECT_FALSE(IsDying("", ""));
  EXPECT_FALSE(IsDying("4242 (x) S 1 2", "SigPnd:\tzz\n"));
}

TEST(ProcessStateTest, RealProcesses) {
  // This process is alive; a killed child, before it is reaped, exists
  // as a zombie (not exiting any more: its flags keep PF_EXITING, and its
  // exit code says SIGKILL); a reaped one cannot be seen.
  EXPECT_FALSE(CallerIsDying(getpid()));
  EXPECT_FALSE(CallerIsDying(0));
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  ASSERT_EQ(0, kill(child, SIGKILL));
  siginfo_t info;
  ASSERT_EQ(0, waitid(P_PID, child, &info, WEXITED | WNOWAIT));
  EXPECT_TRUE(CallerIsDying(child));
  ASSERT_EQ(child, waitpid(child, nullptr, 0));
  EXPECT_FALSE(CallerIsDying(child)) << "a task that cannot be seen is taken to live on";
}

TEST(ProcessStateTest, SupplementaryGroupsComeFromTheGroupsLine) {
  const char* status = "Name:\tcat\nGid:\t100\t100\t100\t100\nGroups:\t4 24 27 1000 \nCapEff:\t0\n";
  EXPECT_TRUE(StatusInGroup(status, 27));
  EXPECT_TRUE(StatusInGroup(status, 1000));
  EXPECT_FALSE(StatusInGroup(status, 100));  // the primary group is not listed there
  EXPECT_FALSE(StatusInGroup(status, 2));
  EXPECT_FALSE(StatusInGroup("Groups:\t\n", 0));
  EXPECT_FALSE(StatusInGroup("Name:\tx\n", 0));
  // This process's own groups, from /proc.
  gid_t groups[256];
  const int count = getgroups(256, groups);
  if (count > 0) {
    EXPECT_TRUE(CallerInGroup(getpid(), groups[0]));
  }
  EXPECT_FALSE(CallerInGroup(0, 0));
}

TEST(ProcessStateTest, CapabilitiesComeFromTheEffectiveSet) {
  const std::string root =
      "Name:\tx\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\n"
      "CapEff:\t000001ffffffffff\n";
  // CAP_FSETID (4) in the permitted set only: not effective.
  const std::string dropped =
      "Name:\tx\nCapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffef\n";
  EXPECT_TRUE(StatusHasCapability(root, CAP_FSETID));
  EXPECT_FALSE(StatusHasCapability(dropped, CAP_FSETID));
  EXPECT_TRUE(StatusHasCapability(dropped, CAP_CHOWN));
  EXPECT_FALSE(StatusHasCapability("Name:\tx\n", CAP_FSETID)) << "no CapEff line";
  EXPECT_FALSE(StatusHasCapability("CapEff:\tzz\n", CAP_FSETID));
  EXPECT_FALSE(StatusHasCapability(root, 64));
}

// A child that runs `change` (true: it worked), reports it, and waits to be
// killed; `*worked` says whether the change worked. The caller kills and
// reaps the child.
pid_t PausedChild(const std::function<bool()>& change, bool* worked) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return -1;
  const pid_t child = fork();
  if (child == 0) {
    close(pipe_fds[0]);
    const char c = change() ? 'y' : 'n';
    if (write(pipe_fds[1], &c, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  close(pipe_fds[1]);
  char c = 0;
  if (child < 0 || read(pipe_fds[0], &c, 1) != 1) c = 0;
  close(pipe_fds[0]);
  *worked = c == 'y';
  return child;
}

void KillAndReap(pid_t child) {
  ASSERT_EQ(0, kill(child, SIGKILL));
  ASSERT_EQ(child, waitpid(child, nullptr, 0));
}

TEST(ProcessStateTest, CapabilitiesOfRealProcesses) {
  // This test runs as root (make test); a child that becomes nobody has
  // none; a task that cannot be seen has none.
  EXPECT_EQ(geteuid() == 0, CallerHasCapability(gettid(), CAP_FSETID));
  bool dropped = false;
  const pid_t child = PausedChild(
      [] { return setresuid(65534, 65534, 65534) == 0 || geteuid() != 0; }, &dropped);
  ASSERT_GT(child, 0);
  EXPECT_TRUE(dropped);
  EXPECT_FALSE(CallerHasCapability(child, CAP_FSETID));
  KillAndReap(child);
  EXPECT_FALSE(CallerHasCapability(child, CAP_FSETID)) << "a task that cannot be seen has none";
  EXPECT_FALSE(CallerHasCapability(0, CAP_FSETID));
}

TEST(ProcessStateTest, RootOfAnotherUserNamespaceHasNoCapabilityHere) {
  // A task in a new user namespace has every capability there (CapEff is
  // full), none in the initial one, which is what capable() asks about.
  bool unshared = false;
  const pid_t child = PausedChild([] { return unshare(CLONE_NEWUSER) == 0; }, &unshared);
  ASSERT_GT(child, 0);
  if (unshared) {
    EXPECT_FALSE(CallerHasCapability(child, CAP_FSETID));
  }
  KillAndReap(child);
  if (!unshared) GTEST_SKIP() << "this kernel refuses unshare(CLONE_NEWUSER)";
}

}  // namespace
}  // namespace logfs::fuse

// Helpers of the package tests (tests/package_test.cc,
// tests/package_install_test.cc): the shipped systemd units' command lines
// and a socket that receives sd_notify messages. Thread-compatible.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace logfs::testing {

// The source tree: $LOGFS_SOURCE_DIR, else the current directory if it
// holds packaging/systemd (make test runs there), else the parent of
// $LOGFS_BIN's folder (build/logfs -> .).
std::string SourceDir();

// The value of every `key=` line in `unit` (a unit file's text), in order.
std::vector<std::string> UnitValues(const std::string& unit, const std::string& key);

// A unit's command line ("ExecStart=" value, no quoting: ours have none)
// split on blanks, with the specifiers systemd expands in them replaced:
// %i (the instance as given), %I and %f (unescaped; %f with a leading '/',
// as systemd-escape --unescape --path) and %% . A leading '-' (ignore
// failure) is dropped.
std::vector<std::string> ExpandCommand(const std::string& value, const std::string& instance);

// Binds a Unix datagram socket at a fresh path (the $NOTIFY_SOCKET of a
// service) and collects what sd_notify sends to it. Owns the socket and
// its path; closes and unlinks both when destroyed.
class NotifySocket {
 public:
  NotifySocket();
  ~NotifySocket();
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;

  // The socket's path ("" if bind failed: then Wait fails).
  const std::string& path() const { return path_; }

  // Receives messages until one has the line `line` (e.g. "READY=1") or
  // `timeout` passes; true if it came. Every message is kept (messages()).
  bool Wait(const std::string& line, absl::Duration timeout);

  // Every message received so far, in order.
  const std::vector<std::string>& messages() const { return messages_; }
  // Forgets the messages received so far: the next Wait waits for a new one.
  void ForgetMessages() { messages_.clear(); }

  // The file descriptor store, as systemd keeps it: the descriptor of each
  // FDSTORE=1 message with its FDNAME=, in the order stored; an
  // FDSTOREREMOVE=1 closes and drops those of its name. Owned; closed by
  // CloseStored and the destructor.
  const std::vector<int>& stored() const { return stored_; }
  const std::vector<std::string>& stored_names() const { return stored_names_; }
  void CloseStored();

 private:
  // Keeps the message and what it does to the store.
  void Received(std::string message, std::vector<int> fds);

  int fd_ = -1;
  std::string dir_;
  std::string path_;
  std::vector<std::string> messages_;
  std::vector<int> stored_;
  std::vector<std::string> stored_names_;
};

// Waits up to `timeout` for child `pid` to exit; its exit code, or -1 if it
// is still running (then the caller stops it) or died of a signal.
int WaitExitCode(pid_t pid, absl::Duration timeout);

// True once `path` is a mount point in /proc/self/mounts, polled for up to
// `timeout`; with `mounted` false, waits for it to be one no more.
bool WaitMounted(const std::string& path, bool mounted, absl::Duration timeout);

}  // namespace logfs::testing

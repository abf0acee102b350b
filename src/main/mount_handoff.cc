#include "src/main/mount_handoff.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <openssl/evp.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-login.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "src/status/macros.h"
#include "store/format/wire_version.h"

namespace logfs::main {
namespace {

constexpr char kFuseFdName[] = "logfs-fuse";
constexpr char kStateFdName[] = "logfs-state";
// The takeover socket's conversation: the successor asks; the
// predecessor drains and sends the descriptors ("handoff") or why not; the
// successor adopts and says "ready" (or why not); the predecessor says
// "commit" and from then on never serves again, and only then does the
// successor serve. Whoever hears nothing in time, or EOF, gives up: the
// predecessor serves on, the successor exits without serving.
constexpr char kAskMessage[] = "takeover";
constexpr char kHandoffMessage[] = "handoff";
constexpr char kReadyMessage[] = "ready";
constexpr char kCommitMessage[] = "commit";
constexpr size_t kMessageBytesMax = 4096;
constexpr size_t kStateBytesMax = size_t{1} << 30;

std::string Errno(const char* what) { return absl::StrCat(what, ": ", strerror(errno)); }

sockaddr_un AddressOf(const std::string& name, socklen_t* length) {
  sockaddr_un address;
  std::memset(&address, 0, sizeof(address));
  address.sun_family = AF_UNIX;
  // Abstract: sun_path starts with a NUL; no file to clean up.
  std::memcpy(address.sun_path + 1, name.data(), name.size());
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return address;
}

// `state` in a sealed memfd (a message could not carry a big one).
absl::StatusOr<int> StateMemfd(const proto::MountHandoff& state) {
  const int fd = memfd_create("logfs-handoff", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return absl::InternalError(Errno("memfd_create"));
  const std::string bytes = state.SerializeAsString();
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = Errno("writing the handover state");
      close(fd);
      return absl::InternalError(why);
    }
    done += static_cast<size_t>(n);
  }
  fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  return fd;
}

absl::StatusOr<proto::MountHandoff> ReadState(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return absl::InternalError(Errno("fstat of the handover state"));
  if (st.st_size <= 0 || static_cast<size_t>(st.st_size) > kStateBytesMax) {
    return absl::InvalidArgumentError(absl::StrCat("handover state of ", st.st_size, " bytes"));
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = pread(fd, bytes.data() + done, bytes.size() - done, done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::InternalError(Errno("reading the handover state"));
    done += static_cast<size_t>(n);
  }
  proto::MountHandoff state;
  if (!state.ParseFromString(bytes)) {
    return absl::InvalidArgumentError("the handover state does not parse");
  }
  RETURN_IF_ERROR(format::CheckPeerVersion(
      format::OwnVersion("mount"),
      format::PeerVersion(state.has_version(), state.version(), "mount"), "the mount daemon"));
  return state;
}

// Sends `message` with `fds` (may be empty) in one datagram.
absl::Status SendMessage(int connection, const std::string& message, const std::vector<int>& fds) {
  iovec iov{const_cast<char*>(message.data()), message.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  if (!fds.empty()) {
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(cmsg), fds.data(), sizeof(int) * fds.size());
  }
  while (sendmsg(connection, &msg, MSG_NOSIGNAL) < 0) {
    if (errno != EINTR) return absl::UnavailableError(Errno("sendmsg on the takeover socket"));
  }
  return absl::OkStatus();
}

// Waits up to `wait` for one datagram; its descriptors go to `fds`.
absl::StatusOr<std::string> ReceiveMessage(int connection, absl::Duration wait,
                                           std::vector<int>* fds) {
  const absl::Time deadline = absl::Now() + wait;
  for (;;) {
    pollfd p{connection, POLLIN, 0};
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) return absl::DeadlineExceededError("no answer on the takeover socket");
    const int ready = poll(&p, 1, static_cast<int>(std::min<int64_t>(left_ms, 1 << 30)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return absl::UnavailableError(Errno("poll"));
    if (ready == 0) continue;
    break;
  }
  std::string message(kMessageBytesMax, '\0');
  iovec iov{message.data(), message.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  while ((n = recvmsg(connection, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  if (n < 0) return absl::UnavailableError(Errno("recvmsg on the takeover socket"));
  for (cmsghdr* cmsg = CMSG_FIRSTHDR(&msg); cmsg != nullptr; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
    if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
      if (fds != nullptr) {
        fds->push_back(fd);
      } else {
        close(fd);
      }
    }
  }
  if (n == 0) return absl::UnavailableError("the takeover socket was closed");
  message.resize(static_cast<size_t>(n));
  return message;
}

// A SIGTERM's job: true if systemd is restarting this unit (its job is a
// restart), asked over D-Bus; false when it cannot tell.
bool SystemdRestartsThisUnit() {
  char* unit = nullptr;
  if (sd_pid_get_unit(0, &unit) < 0) return false;
  sd_bus* bus = nullptr;
  sd_bus_message* reply = nullptr;
  sd_bus_message* job = nullptr;
  sd_bus_error error = SD_BUS_ERROR_NULL;
  char* type = nullptr;
  bool restart = false;
  const char* unit_path = nullptr;
  uint32_t job_id = 0;
  const char* job_path = nullptr;
  if (sd_bus_open_system(&bus) >= 0 &&
      sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                         "org.freedesktop.systemd1.Manager", "GetUnit", &error, &reply, "s",
                         unit) >= 0 &&
      sd_bus_message_read(reply, "o", &unit_path) >= 0 &&
      sd_bus_get_property(bus, "org.freedesktop.systemd1", unit_path,
                          "org.freedesktop.systemd1.Unit", "Job", &error, &job, "(uo)") >= 0 &&
      sd_bus_message_read(job, "(uo)", &job_id, &job_path) >= 0 && job_id != 0 &&
      sd_bus_get_property_string(bus, "org.freedesktop.systemd1", job_path,
                                 "org.freedesktop.systemd1.Job", "JobType", &error, &type) >= 0) {
    restart = std::strcmp(type, "restart") == 0 || std::strcmp(type, "try-restart") == 0;
    LOG(INFO) << "SIGTERM: systemd's job for " << unit << " is a " << type;
  } else {
    LOG(INFO) << "SIGTERM: cannot ask systemd what its job for " << unit << " is ("
              << (error.message != nullptr ? error.message : "no bus") << "): unmounting";
  }
  free(type);
  sd_bus_error_free(&error);
  sd_bus_message_unref(job);
  sd_bus_message_unref(reply);
  sd_bus_flush_close_unref(bus);
  free(unit);
  return restart;
}

// The signal handlers' pipe (write end): the listener thread reads the
// signal numbers.
int g_signal_write_fd = -1;

void OnSignalHandler(int signal) {
  const int saved_errno = errno;
  const char byte = static_cast<char>(signal);
  ssize_t ignored = write(g_signal_write_fd, &byte, 1);
  (void)ignored;
  errno = saved_errno;
}

// True if `fd` is a /dev/fuse descriptor (character device 10:229).
bool IsFuseDevice(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == 10 &&
         minor(st.st_rdev) == 229;
}

}  // namespace

std::string TakeoverSocketName(const std::string& mountpoint) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(mountpoint.data(), mountpoint.size(), digest, &length, EVP_sha256(), nullptr);
  return absl::StrCat("logfs-mount/",
                      absl::BytesToHexString(absl::string_view(
                          reinterpret_cast<const char*>(digest), std::min(length, 16u))));
}

Handover::~Handover() {
  if (connection >= 0) close(connection);
  if (adoption.fuse_fd >= 0) close(adoption.fuse_fd);
}

absl::StatusOr<std::unique_ptr<Handover>> RequestTakeover(const std::string& mountpoint,
                                                          absl::Duration wait) {
  const int connection = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (connection < 0) return absl::InternalError(Errno("socket"));
  auto handover = std::make_unique<Handover>();
  handover->connection = connection;
  socklen_t length;
  const sockaddr_un address = AddressOf(TakeoverSocketName(mountpoint), &length);
  if (connect(connection, reinterpret_cast<const sockaddr*>(&address), length) != 0) {
    return absl::NotFoundError(absl::StrCat("no logfs mount daemon serves ", mountpoint,
                                            " on this host (", strerror(errno), ")"));
  }
  // Anyone may bind an abstract name: only a daemon of root or of this
  // user is asked.
  ucred peer{};
  socklen_t peer_length = sizeof(peer);
  if (getsockopt(connection, SOL_SOCKET, SO_PEERCRED, &peer, &peer_length) != 0 ||
      (peer.uid != 0 && peer.uid != geteuid())) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the takeover socket of ", mountpoint, " belongs to uid ", peer.uid, ", not a mount daemon"));
  }
  handover->predecessor = peer.pid;
  RETURN_IF_ERROR(SendMessage(connection, kAskMessage, {}));
  std::vector<int> fds;
  absl::StatusOr<std::string> answer = ReceiveMessage(connection, wait, &fds);
  if (answer.ok() && *answer != kHandoffMessage) {
    for (int fd : fds) close(fd);
    return absl::FailedPreconditionError(absl::StrCat("the mount daemon refused: ", *answer));
  }
  if (answer.ok() && fds.size() != 2) {
    for (int fd : fds) close(fd);
    return absl::InternalError(absl::StrCat("the handover carries ", fds.size(),
                                            " descriptors, not 2"));
  }
  if (!answer.ok()) return answer.status();
  if (!IsFuseDevice(fds[0])) {
    close(fds[0]);
    close(fds[1]);
    return absl::FailedPreconditionError("the handover's descriptor is not /dev/fuse");
  }
  handover->adoption.fuse_fd = fds[0];
  absl::StatusOr<proto::MountHandoff> state = ReadState(fds[1]);
  close(fds[1]);
  if (!state.ok()) {
    AnswerHandover(*handover, state.status()).IgnoreError();
    return state.status();
  }
  handover->adoption.state = *std::move(state);
  return handover;
}

absl::StatusOr<std::unique_ptr<Handover>> HandoverFromFdStore() {
  char** names = nullptr;
  const int n = sd_listen_fds_with_names(/*unset_environment=*/1, &names);
  int fuse_fd = -1;
  int state_fd = -1;
  for (int i = 0; i < n; ++i) {
    const int fd = SD_LISTEN_FDS_START + i;
    // The last of a name counts (a store that kept an older one).
    if (names != nullptr && std::strcmp(names[i], kFuseFdName) == 0 && IsFuseDevice(fd)) {
      if (fuse_fd >= 0) close(fuse_fd);
      fuse_fd = fd;
    } else if (names != nullptr && std::strcmp(names[i], kStateFdName) == 0) {
      if (state_fd >= 0) close(state_fd);
      state_fd = fd;
    } else {
      close(fd);
    }
  }
  for (int i = 0; names != nullptr && names[i] != nullptr; ++i) free(names[i]);
  free(names);
  if (fuse_fd < 0 || state_fd < 0) {
    if (fuse_fd >= 0) close(fuse_fd);
    if (state_fd >= 0) close(state_fd);
    return nullptr;
  }
  absl::StatusOr<proto::MountHandoff> state = ReadState(state_fd);
  close(state_fd);
  if (!state.ok()) {
    close(fuse_fd);
    return state.status();
  }
  auto handover = std::make_unique<Handover>();
  handover->from_fd_store = true;
  handover->adoption.fuse_fd = fuse_fd;
  handover->adoption.state = *std::move(state);
  return handover;
}

absl::Status AnswerHandover(Handover& handover, const absl::Status& result) {
  if (handover.from_fd_store) {
    if (!result.ok()) return result;  // left in the store for the next attempt
    // The store's copies would keep the connection alive past this
    // daemon's death: a kill -9 must leave ENOTCONN, as without a store.
    for (const char* name : {kFuseFdName, kStateFdName}) {
      const int r = sd_notify(0, absl::StrCat("FDSTOREREMOVE=1\nFDNAME=", name).c_str());
      if (r < 0) LOG(WARNING) << "FDSTOREREMOVE " << name << ": " << strerror(-r);
    }
    return absl::OkStatus();
  }
  if (handover.connection < 0) return result;
  if (!result.ok()) {
    SendMessage(handover.connection, std::string(result.message()), {}).IgnoreError();
    return result;
  }
  RETURN_IF_ERROR(SendMessage(handover.connection, kReadyMessage, {}));
  absl::StatusOr<std::string> answer =
      ReceiveMessage(handover.connection, absl::Seconds(30), nullptr);
  if (absl::IsDeadlineExceeded(answer.status())) {
    // Closed first, so that a late "commit" fails to reach us and the
    // old daemon serves on; one already here counts.
    shutdown(handover.connection, SHUT_RDWR);
    char buf[sizeof(kCommitMessage)];
    const ssize_t n = recv(handover.connection, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) answer = std::string(buf, static_cast<size_t>(n));
  }
  if (!answer.ok() || *answer != kCommitMessage) {
    return absl::AbortedError(absl::StrCat(
        "the running daemon did not let go of the mount (it serves on): ",
        answer.ok() ? *answer : std::string(answer.status().message())));
  }
  return absl::OkStatus();
}

HandoffListener::HandoffListener(fuse::SessionControl& control, std::string mountpoint,
                                 SigtermHandoff sigterm, bool can_hand_off)
    : control_(control),
      mountpoint_(std::move(mountpoint)),
      sigterm_(sigterm),
      can_hand_off_(can_hand_off) {}

HandoffListener::~HandoffListener() { Stop(); }

absl::Status HandoffListener::Start(pid_t predecessor, std::function<void()> after_predecessor) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) return absl::InternalError(Errno("pipe2"));
  signal_read_fd_ = pipe_fds[0];
  g_signal_write_fd = pipe_fds[1];
  wake_fd_ = eventfd(0, EFD_CLOEXEC);
  if (wake_fd_ < 0) return absl::InternalError(Errno("eventfd"));
  if (predecessor <= 0) {
    // Without it the mount works, but cannot be taken over by hand (the
    // name is taken: another daemon of this mount point, or a squatter).
    if (absl::Status s = Listen(); !s.ok()) LOG(WARNING) << s.message();
    if (after_predecessor) after_predecessor();
  }
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = OnSignalHandler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaction(s, &action, nullptr);
  signal(SIGPIPE, SIG_IGN);
  thread_ = std::thread([this, predecessor, after = std::move(after_predecessor)] {
    if (predecessor > 0 && WaitForExit(predecessor)) {
      // The predecessor is gone with its socket and its metrics port.
      if (absl::Status s = Listen(); !s.ok()) LOG(WARNING) << s.message();
      if (after) after();
    }
    Run();
  });
  return absl::OkStatus();
}

absl::Status HandoffListener::Listen() {
  // Only root or this daemon's user may take the mount over (SO_PEERCRED,
  // OnConnection).
  listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  socklen_t length;
  const sockaddr_un address = AddressOf(TakeoverSocketName(mountpoint_), &length);
  if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<const sockaddr*>(&address), length) != 0 ||
      listen(listen_fd_, 4) != 0) {
    const std::string why = strerror(errno);
    if (listen_fd_ >= 0) close(listen_fd_);
    listen_fd_ = -1;
    return absl::FailedPreconditionError(
        absl::StrCat("cannot listen on the takeover socket of ", mountpoint_, ": ", why,
                     " (does another daemon serve it?)"));
  }
  return absl::OkStatus();
}

void HandoffListener::Stop() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    ssize_t ignored = write(wake_fd_, &one, sizeof(one));
    (void)ignored;
    thread_.join();
    // A second SIGTERM while the daemon shuts down ends it, as without a
    // handler.
    for (int s : {SIGTERM, SIGINT, SIGHUP}) signal(s, SIG_DFL);
  }
  if (g_signal_write_fd >= 0) close(g_signal_write_fd);
  g_signal_write_fd = -1;
  for (int* fd : {&listen_fd_, &wake_fd_, &signal_read_fd_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

bool HandoffListener::WaitForExit(pid_t predecessor) {
  // A pidfd turns readable when the process has exited.
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, predecessor, 0));
  if (pidfd < 0) return true;  // gone already (ESRCH)
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  bool exited = false;
  while (!exited && absl::Now() < deadline) {
    pollfd fds[3] = {{pidfd, POLLIN, 0}, {signal_read_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 3, 1000) < 0 && errno != EINTR) break;
    if (fds[2].revents != 0) {
      close(pidfd);
      return false;
    }
    if (fds[1].revents != 0) ReadSignals();
    exited = fds[0].revents != 0;
  }
  close(pidfd);
  if (!exited) LOG(WARNING) << "daemon " << predecessor << ", taken over from, still runs after 120 s";
  return true;
}

void HandoffListener::ReadSignals() {
  char byte;
  while (read(signal_read_fd_, &byte, 1) == 1) OnSignal(byte);
}

void HandoffListener::Run() {
  for (;;) {
    pollfd fds[3] = {{signal_read_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    if (poll(fds, listen_fd_ >= 0 ? 3 : 2, -1) < 0) {
      if (errno == EINTR) continue;
      PLOG(ERROR) << "poll";
      return;
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents != 0) ReadSignals();
    if (listen_fd_ >= 0 && fds[2].revents != 0) {
      const int connection = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (connection >= 0) OnConnection(connection);
    }
  }
}

void HandoffListener::OnSignal(int signal) {
  bool hand_off = false;
  if (signal == SIGTERM && can_hand_off_ && std::getenv("NOTIFY_SOCKET") != nullptr) {
    hand_off = sigterm_ == SigtermHandoff::kAlways ||
               (sigterm_ == SigtermHandoff::kAuto && SystemdRestartsThisUnit());
  }
  if (!hand_off) {
    LOG(INFO) << strsignal(signal) << ": unmounting";
    control_.Unmount();
    return;
  }
  LOG(INFO) << "SIGTERM while systemd restarts this mount: handing it to systemd's fd store";
  // Draining and sealing may take longer than the unit's TimeoutStopSec:
  // systemd must not kill this daemon before it has stored the mount.
  sd_notify(0, "EXTEND_TIMEOUT_USEC=180000000");
  const bool started = control_.HandOff(
      [this](int fuse_fd, const proto::MountHandoff& state) -> absl::Status {
        absl::Status stored = StoreInSystemd(fuse_fd, state);
        // SIGTERM asked this daemon to go: without a successor, the mount
        // goes with it, as on any stop.
        if (!stored.ok()) control_.Unmount();
        return stored;
      });
  if (!started) {
    // A takeover under way: if it fails, the daemon still goes, as told.
    LOG(INFO) << "SIGTERM during a handoff: unmounting if it fails";
    control_.Unmount();
  }
}

absl::Status HandoffListener::StoreInSystemd(int fuse_fd, const proto::MountHandoff& in) {
  proto::MountHandoff state = in;
  *state.mutable_version() = format::OwnVersion("mount");
  ASSIGN_OR_RETURN(const int state_fd, StateMemfd(state));
  const std::string store_fuse = absl::StrCat("FDSTORE=1\nFDNAME=", kFuseFdName);
  const std::string store_state = absl::StrCat("FDSTORE=1\nFDNAME=", kStateFdName);
  int r = sd_pid_notify_with_fds(0, 0, store_fuse.c_str(), &fuse_fd, 1);
  if (r > 0) r = sd_pid_notify_with_fds(0, 0, store_state.c_str(), &state_fd, 1);
  close(state_fd);
  if (r > 0) return absl::OkStatus();
  sd_notify(0, absl::StrCat("FDSTOREREMOVE=1\nFDNAME=", kFuseFdName).c_str());
  return absl::UnavailableError(absl::StrCat("cannot store the descriptors in systemd: ",
                                             r < 0 ? strerror(-r) : "no $NOTIFY_SOCKET"));
}

void HandoffListener::OnConnection(int fd) {
  // Closed when the last holder lets go: after the answer, or if the
  // session ends otherwise before it delivers (the successor sees EOF).
  auto connection = std::shared_ptr<int>(new int(fd), [](int* p) {
    close(*p);
    delete p;
  });
  ucred peer{};
  socklen_t length = sizeof(peer);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0 ||
      (peer.uid != 0 && peer.uid != geteuid())) {
    LOG(WARNING) << "takeover refused to pid " << peer.pid << " of uid " << peer.uid;
    SendMessage(fd, "only root or the mount's user may take it over", {}).IgnoreError();
    return;
  }
  absl::StatusOr<std::string> ask = ReceiveMessage(fd, absl::Seconds(5), nullptr);
  if (!ask.ok() || *ask != kAskMessage) return;
  if (!can_hand_off_) {
    SendMessage(fd, "a mount with an embedded cluster cannot be handed over (its servers are "
                    "this daemon's children)", {})
        .IgnoreError();
    return;
  }
  LOG(INFO) << "takeover asked by pid " << peer.pid << ": handing the mount over";
  const bool started = control_.HandOff(
      [connection](int fuse_fd, const proto::MountHandoff& in) -> absl::Status {
        proto::MountHandoff state = in;
        *state.mutable_version() = format::OwnVersion("mount");
        ASSIGN_OR_RETURN(const int state_fd, StateMemfd(state));
        absl::Status sent = SendMessage(*connection, kHandoffMessage, {fuse_fd, state_fd});
        close(state_fd);
        RETURN_IF_ERROR(sent);
        // The successor answers once it could serve: adopting every
        // handle asks meta for each.
        ASSIGN_OR_RETURN(const std::string answer,
                         ReceiveMessage(*connection, absl::Seconds(180), nullptr));
        if (answer != kReadyMessage) {
          return absl::FailedPreconditionError(absl::StrCat("the successor failed: ", answer));
        }
        // From here on this daemon never serves again, whatever happens
        // to the successor: two daemons must never serve one mount.
        RETURN_IF_ERROR(SendMessage(*connection, kCommitMessage, {}));
        return absl::OkStatus();
      });
  if (!started) {
    SendMessage(fd, "the mount is being unmounted or handed over already", {}).IgnoreError();
  }
}

}  // namespace logfs::main

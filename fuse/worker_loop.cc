#include "fuse/worker_loop.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <linux/fuse.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

namespace logfs::fuse {

WorkerLoop::WorkerLoop(fuse_session* se, int threads)
    : se_(se), threads_(std::max(threads, 1)), stop_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

WorkerLoop::~WorkerLoop() {
  if (stop_fd_ >= 0) close(stop_fd_);
}

void WorkerLoop::Stop() {
  stopping_.store(true);
  const uint64_t one = 1;
  ssize_t ignored = write(stop_fd_, &one, sizeof(one));  // an eventfd write does not fail
  (void)ignored;
}

std::string WorkerLoop::init_request() const {
  absl::MutexLock lock(&mu_);
  return init_request_;
}

absl::StatusOr<WorkerLoop::End> WorkerLoop::Run() {
  if (stop_fd_ < 0) return absl::InternalError(absl::StrCat("eventfd: ", strerror(errno)));
  const int fd = fuse_session_fd(se_);
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return absl::InternalError(absl::StrCat("cannot make /dev/fuse non-blocking: ", strerror(errno)));
  }
  std::vector<int> epoll_fds;
  absl::Status ready;
  for (int i = 0; i < threads_ && ready.ok(); ++i) {
    const int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) {
      ready = absl::InternalError(absl::StrCat("epoll_create1: ", strerror(errno)));
      break;
    }
    epoll_fds.push_back(ep);
    epoll_event device{};
    device.events = EPOLLIN | EPOLLEXCLUSIVE;
    epoll_event stop{};
    stop.events = EPOLLIN;
    stop.data.fd = stop_fd_;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &device) != 0 ||
        epoll_ctl(ep, EPOLL_CTL_ADD, stop_fd_, &stop) != 0) {
      ready = absl::InternalError(absl::StrCat("epoll_ctl: ", strerror(errno)));
    }
  }
  if (ready.ok()) {
    std::vector<std::thread> workers;
    workers.reserve(epoll_fds.size());
    for (int ep : epoll_fds) workers.emplace_back([this, ep] { Work(ep); });
    for (auto& worker : workers) worker.join();
  }
  for (int ep : epoll_fds) close(ep);
  // As it was: the next reader of the descriptor may block in read(2).
  fcntl(fd, F_SETFL, flags);
  if (!ready.ok()) return ready;
  return unmounted_.load() ? End::kUnmounted : End::kStopped;
}

void WorkerLoop::Work(int epoll_fd) {
  fuse_buf buf;
  std::memset(&buf, 0, sizeof(buf));
  // A request read is always processed: the stop is looked at only
  // before a read.
  while (!stopping_.load()) {
    const int res = fuse_session_receive_buf(se_, &buf);
    if (res == -EAGAIN || res == -EINTR) {
      epoll_event events[2];
      if (epoll_wait(epoll_fd, events, 2, -1) < 0 && errno != EINTR) {
        // Not the kernel's end of the connection: the session ends as on
        // a stop (it unmounts, or hands over if that was asked).
        PLOG(ERROR) << "epoll_wait on /dev/fuse";
        Stop();
      }
      continue;
    }
    if (res <= 0) {
      // 0: the kernel ended the connection (ENODEV: unmounted or
      // aborted); below 0 an error reading the device (libfuse logged it).
      unmounted_.store(true);
      Stop();
      break;
    }
    if ((buf.flags & FUSE_BUF_IS_FD) == 0 && static_cast<size_t>(res) >= sizeof(fuse_in_header) &&
        static_cast<const fuse_in_header*>(buf.mem)->opcode == FUSE_INIT) {
      absl::MutexLock lock(&mu_);
      init_request_.assign(static_cast<const char*>(buf.mem), static_cast<size_t>(res));
    }
    fuse_session_process_buf(se_, &buf);
  }
  std::free(buf.mem);
}

}  // namespace logfs::fuse

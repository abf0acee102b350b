#include "store/segd/short_circuit_server.h"

#include <glog/logging.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "src/status/posix_error.h"
#include "src/status/syscall_error.h"
#include "store/format/error_codec.h"
#include "store/format/logfs.pb.h"
#include "store/rpc/unix_socket.h"
#include "store/segd/replica_files.h"

namespace logfs::segd {
namespace {

constexpr uint32_t kMaxRequestBytes = 256;

absl::Status CheckPeer(int connection, const std::vector<uint32_t>& allowed_uids) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(connection, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return SyscallError(errno, "getsockopt SO_PEERCRED");
  }
  const bool listed =
      std::find(allowed_uids.begin(), allowed_uids.end(), cred.uid) != allowed_uids.end();
  if (cred.uid != 0 && cred.uid != ::geteuid() && !listed) {
    return PosixError(EPERM, absl::StrCat("uid ", cred.uid, " (pid ", cred.pid,
                                          ") may not open replicas; only root, uid ", ::geteuid(),
                                          " and --short_circuit_uids may"));
  }
  return absl::OkStatus();
}

void SendError(int connection, format::MessageType type, uint64_t request_id,
               const absl::Status& status) {
  absl::Status sent = rpc::SendUnixFrame(connection, format::kFlagResponse | format::kFlagError,
                                         type, request_id, format::EncodeErrorBody(status), {});
  if (!sent.ok()) VLOG(1) << "short-circuit: reply lost: " << sent;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShortCircuitServer>> ShortCircuitServer::Start(
    const std::string& socket_path, ReplicaStore* store, std::vector<uint32_t> allowed_uids,
    absl::Duration io_timeout) {
  sockaddr_un addr{};
  if (socket_path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("short-circuit socket path is longer than ",
                                                   sizeof(addr.sun_path) - 1,
                                                   " bytes: ", socket_path));
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  util::UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!listener.valid()) return SyscallError(errno, "socket(AF_UNIX)");
  // A socket file left by an earlier server of this data dir (one data
  // dir serves one segment server at a time).
  if (::unlink(socket_path.c_str()) != 0 && errno != ENOENT) {
    return SyscallError(errno, "unlink " + socket_path);
  }
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return SyscallError(errno, "bind " + socket_path);
  }
  if (::chmod(socket_path.c_str(), 0666) != 0) return SyscallError(errno, "chmod " + socket_path);
  if (::listen(listener.get(), 64) != 0) return SyscallError(errno, "listen " + socket_path);
  auto server = std::unique_ptr<ShortCircuitServer>(new ShortCircuitServer(
      socket_path, std::move(listener), store, std::move(allowed_uids), io_timeout));
  server->thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

ShortCircuitServer::ShortCircuitServer(std::string socket_path, util::UniqueFd listener,
                                       ReplicaStore* store, std::vector<uint32_t> allowed_uids,
                                       absl::Duration io_timeout)
    : socket_path_(std::move(socket_path)),
      listener_(std::move(listener)),
      store_(store),
      allowed_uids_(std::move(allowed_uids)),
      io_timeout_(io_timeout) {}

ShortCircuitServer::~ShortCircuitServer() { Stop(); }

void ShortCircuitServer::Stop() {
  if (stopping_.exchange(true)) return;
  // Wakes the blocked accept (Linux fails it with EINVAL).
  ::shutdown(listener_.get(), SHUT_RDWR);
  if (thread_.joinable()) thread_.join();
  ::unlink(socket_path_.c_str());
}

void ShortCircuitServer::AcceptLoop() {
  while (!stopping_.load()) {
    util::UniqueFd connection(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!connection.valid()) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (!stopping_.load()) LOG(ERROR) << "short-circuit accept: " << std::strerror(errno);
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        ::usleep(10000);  // out of descriptors: let some close before the next try
        continue;
      }
      return;
    }
    Serve(connection.get());
  }
}

// Serves the one request of a connection (a client connects per open, so
// an idle connection never holds up the others), all of it within
// io_timeout. Only root and this server's uid get an answer other than
// kPermissionDenied.
void ShortCircuitServer::Serve(int connection) {
  const absl::Time deadline = absl::Now() + io_timeout_;
  if (!rpc::SetSocketTimeouts(connection, io_timeout_).ok()) return;
  const absl::Status peer = CheckPeer(connection, allowed_uids_);
  // Requests are a segment id: a few bytes. (Read even from a refused
  // peer, so that the error reaches it instead of a reset.)
  auto request = rpc::ReceiveUnixFrame(connection, deadline, kMaxRequestBytes);
  if (!peer.ok()) {
    LOG(WARNING) << "short-circuit: refused a connection: " << peer;
    return SendError(connection, format::MessageType::kShortCircuitOpen,
                     request.ok() ? request->frame.request_id : 0, peer);
  }
  if (!request.ok()) {
    if (!absl::IsUnavailable(request.status())) {
      LOG(WARNING) << "short-circuit: closing a connection: " << request.status();
    }
    return;
  }
  const format::Frame& frame = request->frame;
  if (frame.flags != 0 || frame.type != format::MessageType::kShortCircuitOpen) {
    return SendError(connection, frame.type, frame.request_id,
                     absl::InvalidArgumentError(absl::StrCat(
                         "the short-circuit socket serves ShortCircuitOpen requests only, not type ",
                         static_cast<int>(frame.type))));
  }
  proto::ShortCircuitOpenRequest open;
  if (!open.ParseFromString(frame.message)) {
    return SendError(connection, frame.type, frame.request_id,
                     absl::InvalidArgumentError("unparseable ShortCircuitOpen request"));
  }
  auto files = store_->OpenReadOnly(open.segment_id());
  if (!files.ok()) return SendError(connection, frame.type, frame.request_id, files.status());
  proto::ShortCircuitOpenResponse response;
  response.set_length(files->length);
  // Counted before the reply: a client that has its descriptors must find
  // them counted (ShortCircuitTest read 0 in 18 of 30 runs otherwise).
  opens_.fetch_add(1);
  absl::Status sent =
      rpc::SendUnixFrame(connection, format::kFlagResponse, frame.type, frame.request_id,
                         response.SerializeAsString(), {files->data.get(), files->crc.get()});
  if (!sent.ok()) VLOG(1) << "short-circuit: reply lost: " << sent;
}

}  // namespace logfs::segd

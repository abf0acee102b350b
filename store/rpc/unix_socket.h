// logfs frames (store/format/frame.h) over a Unix stream socket, with file
// descriptors passed alongside as SCM_RIGHTS: the short-circuit channel
// between a mount and a segment server on the same host (DESIGN §5, §6).
// One request and one response per exchange; blocking calls. A receive is
// bounded by its deadline as a whole; sends by the socket's SO_SNDTIMEO
// (SetSocketTimeouts).
//
// Thread-safe (stateless); a socket must be used by one thread at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/util/unique_fd.h"
#include "store/format/frame.h"

namespace logfs::rpc {

// Frames on this channel carry small messages only.
inline constexpr uint32_t kUnixFrameMaxMessageBytes = 64u << 10;
// At most this many descriptors ride on one frame.
inline constexpr size_t kUnixFrameMaxFds = 4;

// Sends one frame with no data bytes and `fds` (borrowed, not closed)
// attached to its first byte. kUnavailable on a closed peer or timeout,
// other errno statuses as they come.
absl::Status SendUnixFrame(int socket, uint8_t flags, format::MessageType type, uint64_t request_id,
                           const std::string& message, const std::vector<int>& fds);

struct UnixFrame {
  format::Frame frame;
  std::vector<util::UniqueFd> fds;  // received descriptors, owned (close-on-exec)
};

// Receives one frame and the descriptors sent with it, all of it by
// `deadline`. kInvalidArgument for a bad header, a message over
// `max_message_bytes`, data bytes, or more than kUnixFrameMaxFds
// descriptors; kDataLoss for a bad checksum; kUnavailable on end of stream
// or past the deadline. Any descriptors received with a bad frame are
// closed.
absl::StatusOr<UnixFrame> ReceiveUnixFrame(int socket, absl::Time deadline,
                                           uint32_t max_message_bytes = kUnixFrameMaxMessageBytes);

// Sets SO_RCVTIMEO and SO_SNDTIMEO.
absl::Status SetSocketTimeouts(int socket, absl::Duration timeout);

// A connected Unix stream socket to `path`. kUnavailable if nobody listens.
absl::StatusOr<util::UniqueFd> ConnectUnix(const std::string& path, absl::Duration timeout);

// This host's boot id (/proc/sys/kernel/random/boot_id, without the
// newline): two processes that read the same one share a kernel, and so
// may share files. Empty if unreadable.
std::string HostBootId();

}  // namespace logfs::rpc

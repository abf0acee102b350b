#include "tests/fakes/loopback_exchange.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

namespace logfs::testing {

std::string ExchangeOverLoopback(int port, const std::string& request, size_t max_bytes) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  timeval timeout{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
    shutdown(fd, SHUT_WR);
    char buf[65536];
    ssize_t n;
    while (reply.size() < max_bytes && (n = read(fd, buf, sizeof(buf))) > 0) reply.append(buf, n);
  }
  close(fd);
  return reply;
}

}  // namespace logfs::testing

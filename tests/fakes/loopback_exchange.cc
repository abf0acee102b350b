#include "tests/fakes/loopback_exchange.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

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

std::string ScrapeMetrics(int port) {
  const std::string reply = ExchangeOverLoopback(port, "GET /metrics HTTP/1.0\r\n\r\n");
  const size_t body = reply.find("\r\n\r\n");
  if (!absl::StartsWith(reply, "HTTP/1.1 200") || body == std::string::npos) return "";
  return reply.substr(body + 4);
}

double MetricSample(const std::string& text, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StartsWith(line, series + " ")) continue;
    double value = -1;
    if (absl::SimpleAtod(line.substr(series.size() + 1), &value)) return value;
  }
  return -1;
}

int PortInAddressFile(const std::string& path) {
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  int port = 0;
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || !absl::SimpleAtoi(text.substr(colon + 1), &port)) return 0;
  return port;
}

}  // namespace logfs::testing

#include "store/rpc/endpoint.h"

#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace logfs::rpc {

absl::StatusOr<asio::ip::tcp::endpoint> ParseEndpoint(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("address '", address, "' is not host:port"));
  }
  std::string host = address.substr(0, colon);
  if (host == "localhost") host = "127.0.0.1";
  if (!host.empty() && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  uint32_t port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port) || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("bad port in address '", address, "'"));
  }
  asio::error_code ec;
  auto ip = asio::ip::make_address(host, ec);
  if (ec) {
    return absl::InvalidArgumentError(absl::StrCat("bad host in address '", address, "'"));
  }
  return asio::ip::tcp::endpoint(ip, static_cast<uint16_t>(port));
}

}  // namespace logfs::rpc

#include "store/rpc/endpoint.h"

#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "src/status/macros.h"

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

std::string FormatEndpoint(const asio::ip::tcp::endpoint& endpoint) {
  const std::string host = endpoint.address().to_string();
  return endpoint.address().is_v6() ? absl::StrCat("[", host, "]:", endpoint.port())
                                    : absl::StrCat(host, ":", endpoint.port());
}

absl::StatusOr<std::string> AdvertisedAddress(const std::string& listen, const std::string& bound,
                                              const std::string& advertise) {
  ASSIGN_OR_RETURN(asio::ip::tcp::endpoint listening, ParseEndpoint(listen));
  ASSIGN_OR_RETURN(asio::ip::tcp::endpoint bound_endpoint, ParseEndpoint(bound));
  if (advertise.empty()) {
    if (listening.address().is_unspecified()) {
      return absl::InvalidArgumentError(
          absl::StrCat("listening on the wildcard address ", listen,
                       ", which others cannot dial: set --advertise=HOST[:PORT] to the address "
                       "they should use"));
    }
    return FormatEndpoint(bound_endpoint);
  }
  // "host" alone: no port. An IPv6 host has colons of its own, so it must
  // come in brackets to carry a port ("[::1]:7000"); "::1" alone is a host.
  const bool bracketed = advertise.front() == '[';
  const size_t colon = advertise.rfind(':');
  const bool has_port = bracketed ? advertise.back() != ']'
                                  : colon != std::string::npos && advertise.find(':') == colon;
  const std::string with_port =
      has_port ? advertise
               : absl::StrCat(bracketed || advertise.find(':') == std::string::npos
                                  ? advertise
                                  : absl::StrCat("[", advertise, "]"),
                              ":0");
  auto parsed = ParseEndpoint(with_port);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--advertise=", advertise, ": ", parsed.status().message()));
  }
  if (parsed->address().is_unspecified()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--advertise=", advertise, " is a wildcard address, which others cannot dial"));
  }
  if (parsed->port() == 0) parsed->port(bound_endpoint.port());
  return FormatEndpoint(*parsed);
}

}  // namespace logfs::rpc

#include "store/rpc/endpoint.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "src/status/macros.h"

namespace logfs::rpc {

namespace {

// RFC 1123 host name: labels of 1..63 letters, digits and '-', not
// starting or ending with '-', joined by dots (one trailing dot allowed).
bool IsDnsName(absl::string_view name) {
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);
  if (name.empty() || name.size() > 253) return false;
  // A last label of digits alone is a mistyped number ("10.0.0", "300.1.1.1"),
  // which getaddrinfo would read in inet_aton's old forms (RFC 3696 2).
  const size_t dot = name.rfind('.');
  const absl::string_view last = dot == absl::string_view::npos ? name : name.substr(dot + 1);
  if (std::all_of(last.begin(), last.end(), [](char c) { return absl::ascii_isdigit(c); })) {
    return false;
  }
  for (absl::string_view label : absl::StrSplit(name, '.')) {
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (char c : label) {
      if (!absl::ascii_isalnum(c) && c != '-') return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<HostPort> SplitHostPort(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("address '", address, "' is not host:port"));
  }
  HostPort out;
  out.host = address.substr(0, colon);
  if (out.host == "localhost") out.host = "127.0.0.1";
  const bool bracketed = !out.host.empty() && out.host.front() == '[' && out.host.back() == ']';
  if (bracketed) out.host = out.host.substr(1, out.host.size() - 2);
  uint32_t port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port) || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("bad port in address '", address, "'"));
  }
  out.port = static_cast<uint16_t>(port);
  asio::error_code ec;
  asio::ip::make_address(out.host, ec);
  if (!ec) return out;
  if (bracketed || !IsDnsName(out.host)) {
    return absl::InvalidArgumentError(absl::StrCat("bad host in address '", address, "'"));
  }
  out.numeric = false;
  return out;
}

absl::StatusOr<asio::ip::tcp::endpoint> ParseEndpoint(const std::string& address) {
  ASSIGN_OR_RETURN(HostPort split, SplitHostPort(address));
  if (!split.numeric) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", address, "' names a host: a numeric address is needed here"));
  }
  return asio::ip::tcp::endpoint(asio::ip::make_address(split.host), split.port);
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
  auto split = SplitHostPort(with_port);
  if (!split.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--advertise=", advertise, ": ", split.status().message()));
  }
  if (!split->numeric) {  // a host name, which those who dial it resolve
    return absl::StrCat(split->host, ":", split->port != 0 ? split->port : bound_endpoint.port());
  }
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

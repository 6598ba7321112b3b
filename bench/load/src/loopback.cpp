#include "troupe/bench/loopback.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/url/parse.hpp>
#include <fmt/format.h>

namespace troupe::bench {

expected<loopback_url> check_loopback_url(std::string_view url) {
  auto parsed = boost::urls::parse_uri(url);
  if (!parsed) {
    return fail(errc::invalid_argument, fmt::format("'{}' is not a URL", url));
  }
  if (parsed->scheme() != "http") {
    return fail(errc::invalid_argument,
                fmt::format("'{}': only http:// targets are supported (loopback, no TLS)", url));
  }
  loopback_url out;
  const auto kind = parsed->host_type();
  const std::string host = parsed->host_address();
  bool loopback = false;
  if (kind == boost::urls::host_type::ipv4 || kind == boost::urls::host_type::ipv6) {
    boost::system::error_code ec;
    const auto address = boost::asio::ip::make_address(host, ec);
    loopback = !ec && address.is_loopback();
  } else if (kind == boost::urls::host_type::name) {
    // Only the one name that is loopback by definition (RFC 6761; libcurl never asks DNS
    // for it). Any other name would have to be resolved first, which is already traffic.
    loopback = host == "localhost";
  }
  if (!loopback) {
    return fail(errc::permission_denied,
                fmt::format("refusing target '{}': troupe bench only talks to loopback "
                            "(127.0.0.0/8, ::1, localhost); host '{}' is outside it",
                            url, host));
  }
  out.host = kind == boost::urls::host_type::ipv6 ? fmt::format("[{}]", host) : host;
  if (parsed->has_port()) {
    out.port = parsed->port_number();
    if (out.port == 0) {
      return fail(errc::invalid_argument, fmt::format("'{}': port 0 is not a target", url));
    }
  }
  // (Assigning "/" after the fact trips g++ 12's false -Wrestrict at -O2.)
  const auto target = parsed->encoded_target();
  out.target.assign(target.empty() ? std::string_view("/") : std::string_view(target));
  out.origin = fmt::format("http://{}:{}", out.host, out.port);
  return out;
}

} // namespace troupe::bench

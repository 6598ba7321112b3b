#pragma once

/// \file
/// Outbound HTTP for tools whose destination a model can steer (custom HTTP tools,
/// web_fetch): the URL must be http or https; its host is resolved here and every address
/// is checked with `is_private_address` (no loopback, private, link-local, CGNAT,
/// multicast or unspecified destination unless allowed); the transfer is then pinned to
/// the checked addresses (libcurl's CURLOPT_RESOLVE), so a second DNS answer (rebinding)
/// cannot send it elsewhere, and the address it actually reached is checked again before
/// the body is read. Redirects are followed here, each hop checked the same way; a hop to
/// another origin drops the request's headers (they may carry credentials). The body is
/// bounded, and one deadline covers resolution, every hop and the body.
///
/// Runs on the executor of the client it is given (the calling shard's); blocking is
/// never done on it: name resolution runs on Asio's resolver thread.

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/address.hpp>

#include "troupe/net/http_client.hpp"
#include "troupe/runtime/error.hpp"

namespace troupe::tools {

/// What one outbound request may reach and read.
struct outbound_policy {
  /// Loopback and private destinations allowed (a tool's `allow_private`).
  bool allow_private = false;
  /// Body bytes read at most.
  std::size_t max_body_bytes = 1024 * 1024;
  /// A longer body is cut at `max_body_bytes` (and the response says so) instead of
  /// failing with limit_exceeded.
  bool truncate = false;
  /// Redirects followed at most; 0 answers a redirect as it is.
  unsigned max_redirects = 0;
  /// Resolution, every hop and the body together.
  std::chrono::milliseconds timeout{30'000};
};

/// The response of an outbound request.
struct outbound_response {
  unsigned status = 0;
  std::vector<net::http_header> headers;
  std::string body;
  /// The body was cut at `max_body_bytes`.
  bool truncated = false;
  /// The URL that answered (after redirects).
  std::string url;
  /// The IP address that answered.
  std::string address;

  /// The first header named `name` (case-insensitive), or empty.
  std::string_view header(std::string_view name) const noexcept;
};

/// Resolves `host` (a name or an IP literal) before `deadline` and returns its addresses,
/// all of them checked. Fails with permission_denied naming the host and the address when
/// one is private and `allow_private` is false (one bad address refuses the host: a name
/// that resolves partly inside is not trusted), with not_found when the name does not
/// resolve, with timeout when the deadline passes first.
boost::asio::awaitable<expected<std::vector<boost::asio::ip::address>>>
resolve_destination(std::string host, std::chrono::steady_clock::time_point deadline,
                    bool allow_private);

/// Sends `request` (its URL, method, headers and body; its deadlines are replaced by
/// `policy.timeout`) through `http` under `policy` and reads the whole response. Fails
/// with invalid_argument for a URL that is not http(s) or a redirect that cannot be
/// followed, permission_denied for a private destination (before any connection is
/// made), limit_exceeded for a body over the cap (unless `truncate`), timeout, or the
/// client's own errors.
boost::asio::awaitable<expected<outbound_response>>
guarded_fetch(net::http_client& http, net::http_client_request request, outbound_policy policy);

} // namespace troupe::tools

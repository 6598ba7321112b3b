#include "troupe/net/http_request_parser.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>

#include "request_parser.hpp"

namespace troupe::net {

namespace http = boost::beast::http;

namespace detail {

void apply_limits(request_parser& parser, const request_limits& limits) {
  // Beast counts the header limit in 32 bits; a larger configured limit means "no limit"
  // in practice, so it is clamped rather than wrapped.
  const auto header_limit =
      std::min<std::size_t>(limits.header_limit_bytes, std::numeric_limits<std::uint32_t>::max());
  parser.header_limit(static_cast<std::uint32_t>(header_limit));
  parser.body_limit(limits.body_limit_bytes);
}

bool header_within_limit(const http::request<http::string_body>& in, std::size_t limit) {
  std::size_t bytes = in.target().size();
  for (const auto& field : in) {
    bytes += field.name_string().size() + field.value().size();
    if (bytes > limit) {
      return false;
    }
  }
  return bytes <= limit;
}

http_request to_request(http::request<http::string_body>&& in) {
  http_request out;
  out.method = parse_http_method(in.method_string());
  out.target = std::string(in.target());
  const auto q = out.target.find('?');
  out.path = out.target.substr(0, q);
  if (q != std::string::npos) {
    out.query = out.target.substr(q + 1);
  }
  out.headers.reserve(8);
  for (const auto& field : in) {
    out.headers.push_back({std::string(field.name_string()), std::string(field.value())});
  }
  out.body = std::move(in.body());
  return out;
}

} // namespace detail

namespace {

request_read_error read_error(const boost::system::error_code& ec) {
  auto failure = request_read_failure::malformed;
  if (ec == http::error::header_limit) {
    failure = request_read_failure::headers_too_large;
  } else if (ec == http::error::body_limit) {
    failure = request_read_failure::body_too_large;
  } else if (ec == http::error::partial_message || ec == http::error::end_of_stream ||
             ec == http::error::need_more) {
    failure = request_read_failure::incomplete;
  }
  return {failure, ec.message()};
}

} // namespace

tl::expected<parsed_request, request_read_error> parse_http_request(std::string_view bytes,
                                                                    const request_limits& limits) {
  detail::request_parser parser;
  detail::apply_limits(parser, limits);
  // Header and body in one pass, as the server's read_header + read do over a socket.
  parser.eager(true);
  boost::system::error_code ec;
  std::size_t used = 0;
  while (!parser.is_done()) {
    std::size_t taken = 0;
    if (used < bytes.size()) {
      taken = parser.put(boost::asio::buffer(bytes.data() + used, bytes.size() - used), ec);
      used += taken;
    }
    // Beast takes nothing more either when the rest is not a whole element (need_more) or,
    // in a body, when no bytes are left (no error, nothing taken). With no more bytes to
    // come, that is the end of the stream, as a closed socket is for the server.
    if (ec == http::error::need_more || (!ec && taken == 0)) {
      ec = {};
      if (!parser.got_some()) {
        // Beast would finish an empty message here; no byte is no request.
        ec = http::error::end_of_stream;
      } else {
        parser.put_eof(ec);
      }
      if (!ec && !parser.is_done()) {
        ec = http::error::partial_message;
      }
    }
    if (ec) {
      return tl::unexpected(read_error(ec));
    }
  }
  if (!detail::header_within_limit(parser.get(), limits.header_limit_bytes)) {
    return tl::unexpected(read_error(http::error::header_limit));
  }
  parsed_request out;
  out.consumed = used;
  auto raw = parser.release();
  out.version = raw.version();
  out.keep_alive = raw.keep_alive();
  out.request = detail::to_request(std::move(raw));
  return out;
}

} // namespace troupe::net

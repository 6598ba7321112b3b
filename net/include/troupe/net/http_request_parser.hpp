#pragma once

/// \file
/// Reading one HTTP/1.x request from bytes, with exactly the parser and limits the server
/// reads its requests with (Beast's request parser, `header_limit_bytes`,
/// `body_limit_bytes`). The server applies the same settings to the bytes of its sockets;
/// this entry point makes that parsing testable and fuzzable without a socket.

#include <cstddef>
#include <string>
#include <string_view>

#include <tl/expected.hpp>

#include "troupe/net/http_message.hpp"

namespace troupe::net {

/// The bounds a request is read under (the server's `http_server_options`).
struct request_limits {
  /// Request line plus header fields; beyond it the server answers 431.
  std::size_t header_limit_bytes = 16 * 1024;
  /// Body after transfer decoding; beyond it the server answers 413.
  std::size_t body_limit_bytes = 1024 * 1024;
};

/// Why no request could be read.
enum class request_read_failure {
  /// The bytes end before the request does; the server would wait for more.
  incomplete,
  /// The request line and headers exceed `header_limit_bytes` (431).
  headers_too_large,
  /// The body exceeds `body_limit_bytes` (413).
  body_too_large,
  /// The bytes are not an HTTP/1.x request (400).
  malformed,
};

/// A failed read: the kind and the parser's words for it.
struct request_read_error {
  request_read_failure failure = request_read_failure::malformed;
  std::string message;
};

/// One request read from the front of a byte sequence.
struct parsed_request {
  http_request request;
  /// 10 for HTTP/1.0, 11 for HTTP/1.1.
  unsigned version = 11;
  /// Whether the connection may carry another request after this one.
  bool keep_alive = false;
  /// Bytes the request took; a pipelined request may follow them.
  std::size_t consumed = 0;
};

/// Parses the request at the start of `bytes` (a chunked body is decoded). The bytes are
/// all there is: a request they do not finish is `incomplete`.
tl::expected<parsed_request, request_read_error> parse_http_request(std::string_view bytes,
                                                                    const request_limits& limits);

} // namespace troupe::net

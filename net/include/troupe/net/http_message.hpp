#pragma once

/// \file
/// troupe's own request and response values, independent of Beast, so that route
/// handlers in higher layers compile without Beast's headers.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace troupe::net {

/// The HTTP methods troupe routes; anything else is `other`.
enum class http_method { get, head, post, put, patch, del, options, other };

/// "GET", "POST", … ("OTHER" for other).
std::string_view to_string(http_method m) noexcept;
/// Maps a method token to the enum (`other` when unknown).
http_method parse_http_method(std::string_view token) noexcept;

/// One header field.
struct http_header {
  std::string name;
  std::string value;
};

/// A request as a handler sees it: the body fully read (bounded by the body limit).
struct http_request {
  http_method method = http_method::get;
  /// The request target as sent, e.g. "/api/v1/runs/7?x=1".
  std::string target;
  /// The target's path with percent-encoding left intact ("/api/v1/runs/7").
  std::string path;
  /// The query string without '?', or empty.
  std::string query;
  std::vector<http_header> headers;
  std::string body;

  /// The first header named `name` (case-insensitive), or empty.
  std::string_view header(std::string_view name) const noexcept;
  /// The decoded value of query parameter `name` (Boost.URL, '+' as space), or empty.
  std::string query_param(std::string_view name) const;
};

/// A complete (non-streaming) response.
struct http_response {
  unsigned status = 200;
  std::string content_type = "application/json";
  std::vector<http_header> headers;
  std::string body;

  /// A response with a JSON body.
  static http_response json(unsigned status, std::string body);
  /// A response with a text/plain body.
  static http_response text(unsigned status, std::string body,
                            std::string content_type = "text/plain; charset=utf-8");
  /// troupe's error shape, used for every error answer:
  /// `{"error":{"code":"…","message":"…"}}`.
  static http_response error(unsigned status, std::string_view code, std::string_view message);
};

/// The JSON error body `{"error":{"code":…,"message":…}}`.
std::string error_body(std::string_view code, std::string_view message);

/// Case-insensitive ASCII comparison, as header names need.
bool iequals(std::string_view a, std::string_view b) noexcept;

/// Decodes %XX escapes (and '+' as space when `plus_is_space`) with Boost.URL; malformed
/// escapes are kept as they are ("%zz" stays "%zz").
std::string percent_decode(std::string_view text, bool plus_is_space = false);

} // namespace troupe::net

#pragma once

// Private helpers of the API routes: reading JSON request bodies field by field with
// errors that name the field, pagination, and mapping troupe errors to HTTP answers.

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <simdjson.h>

#include "troupe/net/http_message.hpp"
#include "troupe/runtime/error.hpp"
#include "troupe/storage/repositories.hpp"

namespace troupe::actors::detail {

/// A parsed JSON object body. The first problem found is kept as "<field>: <what>".
class json_body {
public:
  /// Parses `text`; a body that is not a JSON object is an error on field "body".
  explicit json_body(std::string_view text);

  bool has(std::string_view field);
  /// A string field; `required` missing fields are an error.
  std::optional<std::string> text(std::string_view field, bool required = false,
                                  std::size_t max_size = 64 * 1024);
  /// An integer field (or null when `nullable`: then the outer optional holds nullopt).
  std::optional<std::optional<std::int64_t>> integer(std::string_view field, bool nullable = false);
  /// An array of strings, returned as its JSON text.
  std::optional<std::string> string_array(std::string_view field);
  /// An object, returned as its JSON text.
  std::optional<std::string> object(std::string_view field);

  /// Records every field not in `known` as a problem ("unknown field").
  void only(std::initializer_list<std::string_view> known);
  /// The element of `field`, when present (for shapes the helpers above do not cover).
  std::optional<simdjson::dom::element> element(std::string_view field) {
    return get(field);
  }

  /// Records a validation problem (the first one wins).
  void invalid(std::string_view field, std::string_view what);
  bool ok() const noexcept {
    return error_.empty();
  }
  /// The 400 answer for the first problem.
  net::http_response error_response() const;

private:
  std::optional<simdjson::dom::element> get(std::string_view field);
  simdjson::dom::parser parser_;
  simdjson::padded_string padded_;
  simdjson::dom::object object_;
  std::string error_;
};

/// Reads `limit` (1..200, default 50) and `offset` (>= 0) from the query; on a bad value
/// returns the 400 answer instead.
std::optional<net::http_response> read_page(const net::http_request& request, storage::page& into);

/// The HTTP answer for a failed operation (not_found 404, conflict 409, …).
net::http_response error_response(const error& e);

} // namespace troupe::actors::detail

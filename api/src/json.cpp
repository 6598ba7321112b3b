#include "json.hpp"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "troupe/runtime/crypto.hpp"

namespace troupe::api::detail {

json_body::json_body(std::string_view text) : padded_(text) {
  simdjson::dom::element root;
  if (parser_.parse(padded_).get(root) != simdjson::SUCCESS) {
    invalid("body", "is not valid JSON");
    return;
  }
  if (root.get_object().get(object_) != simdjson::SUCCESS) {
    invalid("body", "must be a JSON object");
  }
}

std::optional<simdjson::dom::element> json_body::get(std::string_view field) {
  if (!ok()) {
    return std::nullopt;
  }
  simdjson::dom::element value;
  if (object_.at_key(field).get(value) != simdjson::SUCCESS) {
    return std::nullopt;
  }
  return value;
}

void json_body::only(std::initializer_list<std::string_view> known) {
  if (!ok()) {
    return;
  }
  for (auto [key, value] : object_) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      invalid(key, "is not a known field");
      return;
    }
  }
}

bool json_body::has(std::string_view field) {
  return get(field).has_value();
}

std::optional<std::string> json_body::text(std::string_view field, bool required,
                                           std::size_t max_size) {
  auto value = get(field);
  if (!value) {
    if (required) {
      invalid(field, "is required");
    }
    return std::nullopt;
  }
  std::string_view s;
  if (value->get_string().get(s) != simdjson::SUCCESS) {
    invalid(field, "must be a string");
    return std::nullopt;
  }
  if (required && s.empty()) {
    invalid(field, "must not be empty");
    return std::nullopt;
  }
  if (s.size() > max_size) {
    invalid(field, fmt::format("must be at most {} bytes", max_size));
    return std::nullopt;
  }
  return std::string(s);
}

std::optional<std::optional<std::int64_t>> json_body::integer(std::string_view field,
                                                              bool nullable) {
  auto value = get(field);
  if (!value) {
    return std::nullopt;
  }
  if (nullable && value->is_null()) {
    return std::optional<std::int64_t>{};
  }
  std::int64_t n = 0;
  if (value->get_int64().get(n) != simdjson::SUCCESS) {
    invalid(field, nullable ? "must be an integer or null" : "must be an integer");
    return std::nullopt;
  }
  return std::optional<std::int64_t>{n};
}

std::optional<std::string> json_body::string_array(std::string_view field) {
  auto value = get(field);
  if (!value) {
    return std::nullopt;
  }
  simdjson::dom::array items;
  if (value->get_array().get(items) != simdjson::SUCCESS) {
    invalid(field, "must be an array of strings");
    return std::nullopt;
  }
  for (auto item : items) {
    if (!item.is_string()) {
      invalid(field, "must be an array of strings");
      return std::nullopt;
    }
  }
  return simdjson::minify(*value);
}

std::optional<std::string> json_body::object(std::string_view field) {
  auto value = get(field);
  if (!value) {
    return std::nullopt;
  }
  if (!value->is_object()) {
    invalid(field, "must be an object");
    return std::nullopt;
  }
  return simdjson::minify(*value);
}

void json_body::invalid(std::string_view field, std::string_view what) {
  if (error_.empty()) {
    error_ = fmt::format("{}: {}", field, what);
  }
}

net::http_response json_body::error_response() const {
  return net::http_response::error(400, "invalid_argument", error_);
}

namespace {

std::optional<std::int64_t> parse_int(std::string_view text) {
  std::int64_t v = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc{} || ptr != end || text.empty()) {
    return std::nullopt;
  }
  return v;
}

} // namespace

std::optional<net::http_response> read_page(const net::http_request& request, storage::page& into) {
  if (const auto limit = request.query_param("limit"); !limit.empty()) {
    const auto v = parse_int(limit);
    if (!v || *v < 1 || *v > 200) {
      return net::http_response::error(400, "invalid_argument",
                                       "limit: must be an integer from 1 to 200");
    }
    into.limit = *v;
  }
  if (const auto offset = request.query_param("offset"); !offset.empty()) {
    const auto v = parse_int(offset);
    if (!v || *v < 0) {
      return net::http_response::error(400, "invalid_argument",
                                       "offset: must be a non-negative integer");
    }
    into.offset = *v;
  }
  return std::nullopt;
}

std::optional<storage::row_id> parse_id(std::string_view text) {
  const auto v = parse_int(text);
  if (!v || *v <= 0) {
    return std::nullopt;
  }
  return *v;
}

net::http_response not_found(std::string_view what) {
  return net::http_response::error(404, "not_found", fmt::format("no such {}", what));
}

net::http_response error_response(const error& e) {
  switch (e.code) {
    case errc::invalid_argument:
      return net::http_response::error(400, "invalid_argument", e.message);
    case errc::not_found:
      return net::http_response::error(404, "not_found", e.message);
    case errc::conflict:
      return net::http_response::error(409, "conflict", e.message);
    case errc::permission_denied:
      return net::http_response::error(403, "permission_denied", e.message);
    case errc::limit_exceeded:
      return net::http_response::error(413, "payload_too_large", e.message);
    case errc::timeout:
    case errc::unavailable:
      return net::http_response::error(503, "unavailable", e.message);
    default:
      return net::http_response::error(500, "internal", e.message);
  }
}

} // namespace troupe::api::detail

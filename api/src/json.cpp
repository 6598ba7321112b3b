#include "json.hpp"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "troupe/runtime/crypto.hpp"

namespace troupe::api {

json_body::json_body(std::string_view text) {
  auto parsed = json_object::parse(text);
  if (!parsed) {
    record(parsed.error());
    return;
  }
  object_.emplace(std::move(*parsed));
}

std::nullopt_t json_body::record(const error& e) {
  if (error_.empty()) {
    error_ = e.message;
  }
  return std::nullopt;
}

void json_body::only(std::initializer_list<std::string_view> known) {
  if (!ok() || !object_) {
    return;
  }
  for (const auto key : object_->keys()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      invalid(key, "is not a known field");
      return;
    }
  }
}

std::optional<std::string> json_body::text(std::string_view field, bool required,
                                           std::size_t max_size) {
  if (!ok() || !object_) {
    return std::nullopt;
  }
  auto value = required ? object_->required_text(field, true).map([](std::string s) {
    return std::optional<std::string>(std::move(s));
  })
                        : object_->text(field);
  if (!value) {
    return record(value.error());
  }
  if (*value && (*value)->size() > max_size) {
    invalid(field, fmt::format("must be at most {} bytes", max_size));
    return std::nullopt;
  }
  return std::move(*value);
}

std::optional<std::optional<std::int64_t>> json_body::integer(std::string_view field,
                                                              bool nullable) {
  if (!ok() || !object_) {
    return std::nullopt;
  }
  const auto value = object_->element(field);
  if (!value) {
    return std::nullopt;
  }
  if (nullable && value->is_null()) {
    return std::optional<std::int64_t>{};
  }
  auto n = object_->integer(field);
  if (!n) {
    invalid(field, nullable ? "must be an integer or null" : "must be an integer");
    return std::nullopt;
  }
  return *n;
}

std::optional<std::string> json_body::string_array(std::string_view field) {
  if (!ok() || !object_) {
    return std::nullopt;
  }
  const auto value = object_->element(field);
  if (!value) {
    return std::nullopt;
  }
  if (auto items = object_->text_list(field); !items) {
    invalid(field, "must be an array of strings");
    return std::nullopt;
  }
  return simdjson::minify(*value);
}

std::optional<std::string> json_body::object(std::string_view field) {
  if (!ok() || !object_) {
    return std::nullopt;
  }
  const auto value = object_->element(field);
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

net::http_response submit_refusal(const error& e) {
  if (e.code != errc::limit_exceeded) {
    return error_response(e);
  }
  auto r = net::http_response::error(429, "too_many_requests", e.message);
  r.headers.push_back({"Retry-After", "1"});
  return r;
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
    case errc::overloaded:
      return net::http_response::error(503, "overloaded", e.message);
    default:
      return net::http_response::error(500, "internal", e.message);
  }
}

} // namespace troupe::api

#pragma once

/// \file
/// What the messaging platforms' wires (Telegram, Slack) share: joining a method to an API
/// base URL, and reading their JSON: the whole text is validated by
/// simdjson's DOM parser before anything is read (platform bytes are untrusted; see the
/// note on json_scratch in provider_wire.cpp), then members are looked up by type, an
/// absent member or one of another type reading as absent. Private to troupe_net.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <simdjson.h>

#include "troupe/runtime/error.hpp"

namespace troupe::net::channel_json {

namespace dom = simdjson::dom;

/// A parsed document: owns the parser the elements point into.
class document {
public:
  /// Parses `text`, which must be a JSON object; `what` names it in errors
  /// ("getUpdates answer: is not valid JSON (…)").
  static expected<document> parse_object(std::string_view text, std::string_view what) {
    document d;
    const simdjson::padded_string padded(text);
    dom::element root;
    if (auto e = d.parser_->parse(padded).get(root); e != simdjson::SUCCESS) {
      return fail(errc::parse_error,
                  std::string(what) + ": is not valid JSON (" + simdjson::error_message(e) + ")");
    }
    if (root.get_object().get(d.root_) != simdjson::SUCCESS) {
      return fail(errc::parse_error, std::string(what) + ": is not a JSON object");
    }
    return d;
  }

  dom::object root() const noexcept {
    return root_;
  }

private:
  document() : parser_(std::make_unique<dom::parser>()) {}
  std::unique_ptr<dom::parser> parser_;
  dom::object root_;
};

inline std::optional<dom::element> member(dom::object obj, std::string_view key) {
  dom::element value;
  if (obj.at_key(key).get(value) != simdjson::SUCCESS) {
    return std::nullopt;
  }
  return value;
}

inline std::optional<dom::object> object_member(dom::object obj, std::string_view key) {
  dom::object inner;
  if (auto v = member(obj, key); v && v->get_object().get(inner) == simdjson::SUCCESS) {
    return inner;
  }
  return std::nullopt;
}

inline std::optional<dom::array> array_member(dom::object obj, std::string_view key) {
  dom::array inner;
  if (auto v = member(obj, key); v && v->get_array().get(inner) == simdjson::SUCCESS) {
    return inner;
  }
  return std::nullopt;
}

inline std::optional<std::string_view> string_member(dom::object obj, std::string_view key) {
  std::string_view text;
  if (auto v = member(obj, key); v && v->get_string().get(text) == simdjson::SUCCESS) {
    return text;
  }
  return std::nullopt;
}

/// A string member as a std::string, "" when absent.
inline std::string text_member(dom::object obj, std::string_view key) {
  return std::string(string_member(obj, key).value_or(""));
}

/// An integer member (a JSON number without a fraction that fits int64).
inline std::optional<std::int64_t> int_member(dom::object obj, std::string_view key) {
  std::int64_t n = 0;
  if (auto v = member(obj, key); v && v->get_int64().get(n) == simdjson::SUCCESS) {
    return n;
  }
  return std::nullopt;
}

inline std::optional<bool> bool_member(dom::object obj, std::string_view key) {
  bool b = false;
  if (auto v = member(obj, key); v && v->get_bool().get(b) == simdjson::SUCCESS) {
    return b;
  }
  return std::nullopt;
}

/// `{api_base}/{path}`, without doubling a trailing slash of `api_base`.
inline std::string join_url(std::string_view api_base, std::string_view path) {
  while (!api_base.empty() && api_base.back() == '/') {
    api_base.remove_suffix(1);
  }
  std::string url(api_base);
  url += '/';
  url += path;
  return url;
}

/// A short excerpt of untrusted text for an error message.
inline std::string excerpt(std::string_view text) {
  constexpr std::size_t limit = 160;
  std::string out(text.substr(0, limit));
  if (text.size() > limit) {
    out += "...";
  }
  return out;
}

} // namespace troupe::net::channel_json

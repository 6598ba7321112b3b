#include "troupe/net/http_message.hpp"

#include <boost/url/encoding_opts.hpp>
#include <boost/url/grammar/hexdig_chars.hpp>
#include <boost/url/grammar/lut_chars.hpp>
#include <boost/url/parse_query.hpp>
#include <boost/url/pct_string_view.hpp>
#include <boost/url/rfc/pchars.hpp>

#include "troupe/runtime/json_writer.hpp"

namespace troupe::net {

namespace urls = boost::urls;

namespace {

/// The characters RFC 3986 allows unescaped in a query (pchar / "/" / "?").
constexpr urls::grammar::lut_chars query_chars = urls::pchars + '/' + '?';

/// Decoding options: '+' read as a space or as itself.
urls::encoding_opts plus_as(bool plus_is_space) noexcept {
  urls::encoding_opts opts;
  opts.space_as_plus = plus_is_space;
  return opts;
}

/// `text` with what Boost.URL rejects escaped as itself: each '%' that does not begin
/// two hex digits, and, when `strict_chars`, each character outside `query_chars`. Then
/// decoding gives those characters back literally, which is how troupe has always read
/// malformed escapes ("%zz" stays "%zz"; clients send them in hand-typed links).
std::string escape_strays(std::string_view text, bool strict_chars) {
  static constexpr char digits[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size() + 8);
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool escape_start = c == '%' && i + 2 < text.size() &&
                              urls::grammar::hexdig_chars(text[i + 1]) &&
                              urls::grammar::hexdig_chars(text[i + 2]);
    if (escape_start ||
        (c != '%' && (!strict_chars || query_chars(static_cast<unsigned char>(c))))) {
      out.push_back(c);
      continue;
    }
    const auto byte = static_cast<unsigned char>(c);
    out.push_back('%');
    out.push_back(digits[byte >> 4]);
    out.push_back(digits[byte & 0x0f]);
  }
  return out;
}

char ascii_lower(char c) noexcept {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

} // namespace

std::string_view to_string(http_method m) noexcept {
  switch (m) {
    case http_method::get:
      return "GET";
    case http_method::head:
      return "HEAD";
    case http_method::post:
      return "POST";
    case http_method::put:
      return "PUT";
    case http_method::patch:
      return "PATCH";
    case http_method::del:
      return "DELETE";
    case http_method::options:
      return "OPTIONS";
    case http_method::other:
      return "OTHER";
  }
  return "OTHER";
}

http_method parse_http_method(std::string_view token) noexcept {
  if (token == "GET") {
    return http_method::get;
  }
  if (token == "POST") {
    return http_method::post;
  }
  if (token == "PUT") {
    return http_method::put;
  }
  if (token == "PATCH") {
    return http_method::patch;
  }
  if (token == "DELETE") {
    return http_method::del;
  }
  if (token == "HEAD") {
    return http_method::head;
  }
  if (token == "OPTIONS") {
    return http_method::options;
  }
  return http_method::other;
}

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (ascii_lower(a[i]) != ascii_lower(b[i])) {
      return false;
    }
  }
  return true;
}

std::string percent_decode(std::string_view text, bool plus_is_space) {
  if (const auto valid = urls::make_pct_string_view(text)) {
    return valid->decode(plus_as(plus_is_space));
  }
  const auto repaired = escape_strays(text, false);
  return urls::make_pct_string_view(repaired).value().decode(plus_as(plus_is_space));
}

std::string_view http_request::header(std::string_view name) const noexcept {
  for (const auto& h : headers) {
    if (iequals(h.name, name)) {
      return h.value;
    }
  }
  return {};
}

std::string http_request::query_param(std::string_view name) const {
  // A query Boost.URL rejects (a stray '%', a character RFC 3986 does not allow) is read
  // leniently: those characters are escaped as themselves first, as percent_decode does.
  std::string repaired;
  auto params = urls::parse_query(query);
  if (!params) {
    repaired = escape_strays(query, true);
    params = urls::parse_query(repaired);
  }
  if (!params) {
    return {};
  }
  const auto opts = plus_as(true);
  for (const auto param : *params) {
    if (param.key.decode(opts) == name) {
      return param.has_value ? param.value.decode(opts) : std::string{};
    }
  }
  return {};
}

std::string error_body(std::string_view code, std::string_view message) {
  json_writer w;
  w.begin_object().key("error").begin_object();
  w.key("code").value(code).key("message").value(message);
  w.end_object().end_object();
  return std::move(w).str();
}

http_response http_response::json(unsigned status, std::string body) {
  http_response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

http_response http_response::text(unsigned status, std::string body, std::string content_type) {
  http_response r;
  r.status = status;
  r.content_type = std::move(content_type);
  r.body = std::move(body);
  return r;
}

http_response http_response::error(unsigned status, std::string_view code,
                                   std::string_view message) {
  return json(status, error_body(code, message));
}

} // namespace troupe::net

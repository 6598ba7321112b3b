#include "troupe/net/http_message.hpp"

#include "troupe/runtime/json_writer.hpp"

namespace troupe::net {

namespace {

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
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
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '%' && i + 2 < text.size()) {
      const int hi = hex_value(text[i + 1]);
      const int lo = hex_value(text[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(plus_is_space && c == '+' ? ' ' : c);
  }
  return out;
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
  std::string_view rest = query;
  while (!rest.empty()) {
    const auto amp = rest.find('&');
    const auto pair = rest.substr(0, amp);
    const auto eq = pair.find('=');
    const auto key = percent_decode(pair.substr(0, eq), true);
    if (key == name) {
      return eq == std::string_view::npos ? std::string{}
                                          : percent_decode(pair.substr(eq + 1), true);
    }
    if (amp == std::string_view::npos) {
      break;
    }
    rest.remove_prefix(amp + 1);
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

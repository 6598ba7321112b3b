#include "troupe/net/multipart.hpp"

#include <algorithm>

#include "troupe/net/http_message.hpp"

namespace troupe::net {

std::string header_parameter(std::string_view header, std::string_view key) {
  std::size_t at = 0;
  while ((at = header.find(key, at)) != std::string_view::npos) {
    const bool starts = at == 0 || header[at - 1] == ';' || header[at - 1] == ' ';
    const auto after = at + key.size();
    if (!starts || after >= header.size() || header[after] != '=') {
      at = after;
      continue;
    }
    auto value = header.substr(after + 1);
    if (!value.empty() && value.front() == '"') {
      std::string out;
      for (std::size_t i = 1; i < value.size() && value[i] != '"'; ++i) {
        if (value[i] == '\\' && i + 1 < value.size()) {
          ++i;
        }
        out.push_back(value[i]);
      }
      return out;
    }
    return std::string(value.substr(0, value.find(';')));
  }
  return {};
}

expected<std::vector<form_part>> parse_multipart(std::string_view content_type,
                                                 std::string_view body) {
  if (!iequals(content_type.substr(0, std::min<std::size_t>(content_type.size(), 19)),
               "multipart/form-data")) {
    return fail(errc::invalid_argument, "body: must be multipart/form-data");
  }
  const auto boundary = header_parameter(content_type, "boundary");
  if (boundary.empty() || boundary.size() > 70) {
    return fail(errc::invalid_argument, "body: the multipart boundary is missing");
  }
  const auto delimiter = "--" + boundary;
  std::vector<form_part> parts;
  auto at = body.find(delimiter);
  if (at == std::string_view::npos) {
    return fail(errc::invalid_argument, "body: no multipart part found");
  }
  at += delimiter.size();
  for (;;) {
    if (body.substr(at, 2) == "--") {
      return parts; // the closing delimiter
    }
    if (body.substr(at, 2) != "\r\n") {
      return fail(errc::invalid_argument, "body: malformed multipart delimiter");
    }
    at += 2;
    // A part without headers (RFC 2046 allows it) starts its data after one more CRLF.
    const auto headers_end = body.substr(at, 2) == "\r\n" ? at - 2 : body.find("\r\n\r\n", at);
    if (headers_end == std::string_view::npos) {
      return fail(errc::invalid_argument, "body: a multipart part has no header end");
    }
    form_part part;
    auto headers = body.substr(at, headers_end - std::min(at, headers_end));
    while (!headers.empty()) {
      const auto eol = headers.find("\r\n");
      const auto line = headers.substr(0, eol);
      headers = eol == std::string_view::npos ? std::string_view{} : headers.substr(eol + 2);
      const auto colon = line.find(':');
      if (colon == std::string_view::npos) {
        continue;
      }
      const auto name = line.substr(0, colon);
      auto value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') {
        value.remove_prefix(1);
      }
      if (iequals(name, "Content-Disposition")) {
        part.name = header_parameter(value, "name");
        part.filename = header_parameter(value, "filename");
      } else if (iequals(name, "Content-Type")) {
        part.content_type = std::string(value);
      }
    }
    const auto data_begin = headers_end + 4;
    const auto next = body.find("\r\n" + delimiter, data_begin);
    if (next == std::string_view::npos) {
      return fail(errc::invalid_argument, "body: a multipart part is not terminated");
    }
    part.data = body.substr(data_begin, next - data_begin);
    parts.push_back(std::move(part));
    at = next + 2 + delimiter.size();
  }
}

} // namespace troupe::net

#include "troupe/tools/http_template.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "troupe/runtime/json_writer.hpp"

namespace troupe::tools {

namespace {

// RFC 3986 unreserved characters pass; everything else (also '/', '?', '&', '#', '@', ':')
// is percent-encoded, so a value stays inside the one component it was placed in.
void append_url_encoded(std::string& out, std::string_view value) {
  constexpr std::string_view hex = "0123456789ABCDEF";
  for (const char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(hex[u >> 4]);
      out.push_back(hex[u & 0x0f]);
    }
  }
}

// The inside of a JSON string, escaped by the project's JSON writer (quotes, backslashes
// and control characters), without the enclosing quotes.
void append_json_escaped(std::string& out, std::string_view value) {
  json_writer w;
  w.value(value);
  const std::string_view quoted = w.str();
  out += quoted.substr(1, quoted.size() - 2);
}

bool placeholder_char(char c) noexcept {
  const auto u = static_cast<unsigned char>(c);
  return std::isalnum(u) != 0 || c == '_' || c == '-';
}

// Walks `text`, calling `on_literal` for each literal character and `on_placeholder` for
// each `{name}` (name: letters, digits, '_', '-'); any other brace is literal text, so a
// JSON body template needs no escaping.
template <class Literal, class Placeholder>
expected<void> walk(std::string_view text, Literal on_literal, Placeholder on_placeholder) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '{') {
      std::size_t end = i + 1;
      while (end < text.size() && placeholder_char(text[end])) {
        ++end;
      }
      if (end > i + 1 && end < text.size() && text[end] == '}') {
        if (auto ok = on_placeholder(text.substr(i + 1, end - i - 1)); !ok) {
          return ok;
        }
        i = end;
        continue;
      }
    }
    on_literal(text[i]);
  }
  return {};
}

} // namespace

expected<std::string> expand_template(std::string_view text, const template_values& values,
                                      template_part part) {
  std::string out;
  out.reserve(text.size());
  auto ok = walk(
      text, [&](char c) { out.push_back(c); },
      [&](std::string_view name) -> expected<void> {
        const auto it = values.find(name);
        if (it == values.end()) {
          return fail(errc::invalid_argument,
                      fmt::format("template: no value for the placeholder '{{{}}}'", name));
        }
        const auto& value = it->second;
        switch (part) {
          case template_part::url:
            append_url_encoded(out, value);
            break;
          case template_part::body:
            append_json_escaped(out, value);
            break;
          case template_part::header:
            for (const char c : value) {
              const auto u = static_cast<unsigned char>(c);
              if (u < 0x20 || u == 0x7f) {
                return fail(errc::invalid_argument,
                            fmt::format("the argument '{}' holds a control character, which a "
                                        "header value may not carry",
                                        name));
              }
            }
            out += value;
            break;
        }
        return {};
      });
  if (!ok) {
    return tl::unexpected(ok.error());
  }
  return out;
}

expected<std::vector<std::string>> template_placeholders(std::string_view text) {
  std::vector<std::string> names;
  auto ok = walk(
      text, [](char) {},
      [&](std::string_view name) -> expected<void> {
        if (std::find(names.begin(), names.end(), name) == names.end()) {
          names.emplace_back(name);
        }
        return {};
      });
  if (!ok) {
    return tl::unexpected(ok.error());
  }
  return names;
}

bool is_private_address(const boost::asio::ip::address& address) noexcept {
  if (address.is_unspecified() || address.is_loopback() || address.is_multicast()) {
    return true;
  }
  if (address.is_v6()) {
    const auto v6 = address.to_v6();
    if (v6.is_v4_mapped()) {
      return is_private_address(boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, v6));
    }
    const auto bytes = v6.to_bytes();
    // fc00::/7 unique local, fe80::/10 link-local, fec0::/10 site-local.
    return (bytes[0] & 0xfe) == 0xfc || v6.is_link_local() || v6.is_site_local();
  }
  const auto b = address.to_v4().to_bytes();
  return b[0] == 10 || b[0] == 0 || (b[0] == 172 && (b[1] & 0xf0) == 16) ||
         (b[0] == 192 && b[1] == 168) || (b[0] == 169 && b[1] == 254) ||
         (b[0] == 100 && (b[1] & 0xc0) == 64) || b[0] >= 224;
}

} // namespace troupe::tools

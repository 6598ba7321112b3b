#pragma once

/// \file
/// Reads the flat XML messages WeChat and WeCom post (`<xml><ToUserName><![CDATA[…]]>
/// </ToUserName>…</xml>`): the text of each child of the root element, by name. The
/// parser is expat. Platform bytes are untrusted: a document type declaration (and so any
/// entity: the XXE and "billion laughs" attacks) is refused, as is input over a size
/// limit, malformed XML and a repeated field. Text of deeper elements is not read (an
/// event's nested details); a child that has children reads as empty.

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "troupe/runtime/error.hpp"

namespace troupe::net::channel {

/// The most bytes `parse_flat_xml` reads by default: a WeChat text message is well under
/// 4 KiB (2,048 bytes of content, escaped, plus a dozen short fields).
inline constexpr std::size_t flat_xml_default_limit = 64 * 1024;

/// The fields of a flat XML document: each child of the root, its text (CDATA sections
/// and character references resolved).
class flat_xml {
public:
  /// The text of field `name`, when the root has it.
  std::optional<std::string_view> field(std::string_view name) const;
  /// The text of field `name`, "" when absent.
  std::string text(std::string_view name) const;
  /// The root element's name.
  const std::string& root() const noexcept {
    return root_;
  }
  std::size_t size() const noexcept {
    return fields_.size();
  }

private:
  friend expected<flat_xml> parse_flat_xml(std::string_view, std::size_t);
  std::string root_;
  std::map<std::string, std::string, std::less<>> fields_;
};

/// Parses `xml`; an invalid_argument error for input over `limit` bytes, malformed XML,
/// a DOCTYPE or entity declaration, or a field that appears twice.
expected<flat_xml> parse_flat_xml(std::string_view xml, std::size_t limit = flat_xml_default_limit);

/// `text` as XML character data: `&`, `<`, `>`, `"` and `'` escaped (what a fake or a
/// passive reply writes).
std::string xml_escape(std::string_view text);

} // namespace troupe::net::channel

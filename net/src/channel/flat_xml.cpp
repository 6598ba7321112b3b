#include "troupe/net/channel/flat_xml.hpp"

#include <memory>

#include <expat.h>
#include <fmt/format.h>

namespace troupe::net::channel {

namespace {

/// What the expat callbacks build; `refused` stops the parse with its reason.
struct reader {
  XML_Parser parser = nullptr;
  std::string root;
  std::map<std::string, std::string, std::less<>> fields;
  int depth = 0;
  std::string current;
  std::string text;
  bool nested = false;
  std::string refused;

  void refuse(std::string why) {
    if (refused.empty()) {
      refused = std::move(why);
    }
    XML_StopParser(parser, XML_FALSE);
  }
};

void on_start(void* data, const XML_Char* name, const XML_Char**) {
  auto& r = *static_cast<reader*>(data);
  ++r.depth;
  if (r.depth == 1) {
    r.root = name;
  } else if (r.depth == 2) {
    r.current = name;
    r.text.clear();
    r.nested = false;
  } else {
    r.nested = true;
  }
}

void on_end(void* data, const XML_Char*) {
  auto& r = *static_cast<reader*>(data);
  if (r.depth == 2) {
    auto value = r.nested ? std::string() : std::move(r.text);
    if (!r.fields.emplace(r.current, std::move(value)).second) {
      r.refuse(fmt::format("the field <{}> appears twice", r.current));
    }
    r.text.clear();
  }
  --r.depth;
}

void on_text(void* data, const XML_Char* s, int len) {
  auto& r = *static_cast<reader*>(data);
  if (r.depth == 2 && len > 0) {
    r.text.append(s, static_cast<std::size_t>(len));
  }
}

void on_doctype(void* data, const XML_Char*, const XML_Char*, const XML_Char*, int) {
  static_cast<reader*>(data)->refuse("a document type declaration is not accepted");
}

void on_entity(void* data, const XML_Char*, int, const XML_Char*, int, const XML_Char*,
               const XML_Char*, const XML_Char*, const XML_Char*) {
  static_cast<reader*>(data)->refuse("an entity declaration is not accepted");
}

struct parser_deleter {
  void operator()(XML_Parser p) const noexcept {
    XML_ParserFree(p);
  }
};

} // namespace

std::optional<std::string_view> flat_xml::field(std::string_view name) const {
  if (auto it = fields_.find(name); it != fields_.end()) {
    return std::string_view(it->second);
  }
  return std::nullopt;
}

std::string flat_xml::text(std::string_view name) const {
  return std::string(field(name).value_or(""));
}

expected<flat_xml> parse_flat_xml(std::string_view xml, std::size_t limit) {
  if (xml.size() > limit) {
    return fail(errc::invalid_argument,
                fmt::format("the XML body has {} bytes, more than {}", xml.size(), limit));
  }
  std::unique_ptr<std::remove_pointer_t<XML_Parser>, parser_deleter> parser(
      XML_ParserCreate("UTF-8"));
  if (!parser) {
    return fail(errc::internal, "cannot create an XML parser");
  }
  reader r;
  r.parser = parser.get();
  XML_SetUserData(parser.get(), &r);
  XML_SetElementHandler(parser.get(), on_start, on_end);
  XML_SetCharacterDataHandler(parser.get(), on_text);
  XML_SetStartDoctypeDeclHandler(parser.get(), on_doctype);
  XML_SetEntityDeclHandler(parser.get(), on_entity);
  // No external entity is ever loaded (expat loads none without a handler; said plainly).
  XML_SetParamEntityParsing(parser.get(), XML_PARAM_ENTITY_PARSING_NEVER);
  const auto status = XML_Parse(parser.get(), xml.data(), static_cast<int>(xml.size()), XML_TRUE);
  if (!r.refused.empty()) {
    return fail(errc::invalid_argument, "the XML body is refused: " + r.refused);
  }
  if (status != XML_STATUS_OK) {
    return fail(errc::invalid_argument, fmt::format("the XML body is malformed ({} at line {})",
                                                    XML_ErrorString(XML_GetErrorCode(parser.get())),
                                                    XML_GetCurrentLineNumber(parser.get())));
  }
  flat_xml out;
  out.root_ = std::move(r.root);
  out.fields_ = std::move(r.fields);
  return out;
}

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

} // namespace troupe::net::channel

#include "troupe/net/mcp/protocol.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <simdjson.h>

#include "troupe/runtime/json_writer.hpp"

namespace troupe::net::mcp {

namespace {

/// A parsed document that owns its parser.
struct document {
  simdjson::dom::parser parser;
  simdjson::padded_string text;
  simdjson::dom::element root;
};

expected<std::unique_ptr<document>> parse_object(std::string_view json, std::string_view what) {
  auto doc = std::make_unique<document>();
  doc->text = simdjson::padded_string(json);
  if (doc->parser.parse(doc->text).get(doc->root) != simdjson::SUCCESS || !doc->root.is_object()) {
    return fail(errc::parse_error, fmt::format("{}: not a JSON object", what));
  }
  return doc;
}

std::string_view text_of(simdjson::dom::element e, std::string_view key) {
  std::string_view s;
  if (e[key].get_string().get(s) != simdjson::SUCCESS) {
    return {};
  }
  return s;
}

// "1.2 KiB" for a byte count.
std::string human_size(std::size_t bytes) {
  if (bytes < 1024) {
    return fmt::format("{} bytes", bytes);
  }
  if (bytes < 1024 * 1024) {
    return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / 1024.0);
  }
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

// The decoded size of base64 text.
std::size_t base64_bytes(std::string_view b64) {
  std::size_t padding = 0;
  while (!b64.empty() && b64.back() == '=') {
    b64.remove_suffix(1);
    ++padding;
  }
  return b64.size() * 3 / 4;
}

// One content part as the model reads it.
std::string describe_part(simdjson::dom::element part) {
  const auto type = text_of(part, "type");
  if (type == "text") {
    return std::string(text_of(part, "text"));
  }
  if (type == "image" || type == "audio") {
    const auto mime = text_of(part, "mimeType");
    return fmt::format("[{} {}, {}]", type, mime.empty() ? "of unknown type" : mime,
                       human_size(base64_bytes(text_of(part, "data"))));
  }
  if (type == "resource") {
    simdjson::dom::element resource;
    if (part["resource"].get(resource) != simdjson::SUCCESS) {
      return "[resource]";
    }
    const auto uri = text_of(resource, "uri");
    std::string_view text;
    if (resource["text"].get_string().get(text) == simdjson::SUCCESS) {
      return fmt::format("[resource {}]\n{}", uri, text);
    }
    const auto mime = text_of(resource, "mimeType");
    return fmt::format("[resource {} ({}), {}]", uri, mime.empty() ? "binary" : mime,
                       human_size(base64_bytes(text_of(resource, "blob"))));
  }
  if (type == "resource_link") {
    auto out = fmt::format("[resource link: {} {}", text_of(part, "name"), text_of(part, "uri"));
    if (const auto mime = text_of(part, "mimeType"); !mime.empty()) {
      out += fmt::format(" ({})", mime);
    }
    if (const auto description = text_of(part, "description"); !description.empty()) {
      out += fmt::format(": {}", description);
    }
    return out + "]";
  }
  return fmt::format("[{} content]", type.empty() ? "untyped" : type);
}

// A value of the type a property schema names, for example arguments.
void write_example(json_writer& w, simdjson::dom::element schema, int& counter) {
  simdjson::dom::element value;
  if (schema["default"].get(value) == simdjson::SUCCESS) {
    w.raw(simdjson::minify(value));
    return;
  }
  simdjson::dom::array choices;
  if (schema["enum"].get_array().get(choices) == simdjson::SUCCESS && choices.size() > 0) {
    w.raw(simdjson::minify(*choices.begin()));
    return;
  }
  auto type = text_of(schema, "type");
  simdjson::dom::array types;
  if (type.empty() && schema["type"].get_array().get(types) == simdjson::SUCCESS) {
    for (auto t : types) {
      std::string_view name;
      if (t.get_string().get(name) == simdjson::SUCCESS && name != "null") {
        type = name;
        break;
      }
    }
  }
  if (type == "number" || type == "integer") {
    w.value(++counter);
  } else if (type == "boolean") {
    w.value(true);
  } else if (type == "array") {
    w.begin_array().end_array();
  } else if (type == "object") {
    w.begin_object().end_object();
  } else if (type == "null") {
    w.value(nullptr);
  } else {
    w.value("test");
  }
}

} // namespace

bool supported_protocol_version(std::string_view version) noexcept {
  return std::find(supported_protocol_versions.begin(), supported_protocol_versions.end(),
                   version) != supported_protocol_versions.end();
}

std::string write_initialize_params(const client_identity& client,
                                    std::string_view protocol_version) {
  json_writer w;
  w.begin_object().key("protocolVersion").value(protocol_version);
  w.key("capabilities").begin_object();
  if (client.elicitation) {
    // An empty object means form mode in 2025-11-25 and is what 2025-06-18 defines.
    w.key("elicitation").begin_object().end_object();
  }
  w.end_object();
  w.key("clientInfo").begin_object().key("name").value(client.name);
  w.key("version").value(client.version.empty() ? std::string_view("0") : client.version);
  w.end_object().end_object();
  return std::move(w).str();
}

expected<server_identity> parse_initialize_result(std::string_view result_json) {
  auto doc = parse_object(result_json, "initialize result");
  if (!doc) {
    return tl::unexpected(doc.error());
  }
  const auto root = (*doc)->root;
  server_identity s;
  s.protocol_version = std::string(text_of(root, "protocolVersion"));
  if (s.protocol_version.empty()) {
    return fail(errc::invalid_argument, "initialize result: protocolVersion is missing");
  }
  if (!supported_protocol_version(s.protocol_version)) {
    return fail(errc::invalid_argument,
                fmt::format("the server speaks MCP {}, which troupe does not (it speaks {})",
                            s.protocol_version, fmt::join(supported_protocol_versions, ", ")));
  }
  simdjson::dom::element info;
  if (root["serverInfo"].get(info) == simdjson::SUCCESS && info.is_object()) {
    s.name = std::string(text_of(info, "name"));
    s.version = std::string(text_of(info, "version"));
  }
  s.instructions = std::string(text_of(root, "instructions"));
  simdjson::dom::element tools;
  if (root["capabilities"]["tools"].get(tools) == simdjson::SUCCESS && tools.is_object()) {
    s.has_tools = true;
    bool changed = false;
    if (tools["listChanged"].get_bool().get(changed) == simdjson::SUCCESS) {
      s.tools_list_changed = changed;
    }
  }
  return s;
}

std::string write_list_tools_params(std::string_view cursor) {
  json_writer w;
  w.begin_object();
  if (!cursor.empty()) {
    w.key("cursor").value(cursor);
  }
  w.end_object();
  return std::move(w).str();
}

expected<tool_page> parse_tools_list_result(std::string_view result_json) {
  auto doc = parse_object(result_json, "tools/list result");
  if (!doc) {
    return tl::unexpected(doc.error());
  }
  const auto root = (*doc)->root;
  simdjson::dom::array tools;
  if (root["tools"].get_array().get(tools) != simdjson::SUCCESS) {
    return fail(errc::invalid_argument, "tools/list result: tools must be an array");
  }
  tool_page page;
  std::size_t index = 0;
  for (auto t : tools) {
    tool_info info;
    info.name = std::string(text_of(t, "name"));
    if (info.name.empty()) {
      return fail(errc::invalid_argument,
                  fmt::format("tools/list result: tools[{}] has no name", index));
    }
    info.title = std::string(text_of(t, "title"));
    info.description = std::string(text_of(t, "description"));
    simdjson::dom::element schema;
    if (t["inputSchema"].get(schema) == simdjson::SUCCESS && schema.is_object()) {
      info.input_schema = simdjson::minify(schema);
    } else {
      info.input_schema = R"({"type":"object"})";
    }
    bool read_only = false;
    if (t["annotations"]["readOnlyHint"].get_bool().get(read_only) == simdjson::SUCCESS) {
      info.read_only = read_only;
    }
    page.tools.push_back(std::move(info));
    ++index;
  }
  page.next_cursor = std::string(text_of(root, "nextCursor"));
  return page;
}

std::string write_call_tool_params(std::string_view name, std::string_view arguments_json,
                                   std::string_view progress_token) {
  json_writer w;
  w.begin_object().key("name").value(name);
  w.key("arguments").raw(arguments_json.empty() ? std::string_view("{}") : arguments_json);
  if (!progress_token.empty()) {
    w.key("_meta").begin_object().key("progressToken").raw(progress_token).end_object();
  }
  w.end_object();
  return std::move(w).str();
}

expected<call_outcome> parse_call_result(std::string_view result_json) {
  auto doc = parse_object(result_json, "tools/call result");
  if (!doc) {
    return tl::unexpected(doc.error());
  }
  const auto root = (*doc)->root;
  call_outcome out;
  bool is_error = false;
  if (root["isError"].get_bool().get(is_error) == simdjson::SUCCESS) {
    out.is_error = is_error;
  }
  simdjson::dom::element structured;
  if (root["structuredContent"].get(structured) == simdjson::SUCCESS) {
    out.structured = simdjson::minify(structured);
  }
  simdjson::dom::array content;
  if (root["content"].get_array().get(content) == simdjson::SUCCESS) {
    for (auto part : content) {
      if (!out.text.empty()) {
        out.text += "\n";
      }
      out.text += describe_part(part);
    }
  }
  if (out.text.empty() && !out.structured.empty()) {
    out.text = out.structured;
  }
  return out;
}

expected<elicitation_policy> parse_elicitation_policy(std::string_view name) {
  if (name == "defaults") {
    return elicitation_policy::accept_defaults;
  }
  if (name == "decline") {
    return elicitation_policy::decline;
  }
  return fail(errc::invalid_argument,
              fmt::format("'{}' is not an elicitation policy (defaults, decline)", name));
}

std::string_view to_string(elicitation_policy policy) noexcept {
  return policy == elicitation_policy::accept_defaults ? "defaults" : "decline";
}

std::string answer_elicitation(std::string_view params_json, elicitation_policy policy) {
  static const std::string decline = R"({"action":"decline"})";
  if (policy == elicitation_policy::decline) {
    return decline;
  }
  auto doc = parse_object(params_json, "elicitation/create params");
  if (!doc) {
    return decline;
  }
  const auto root = (*doc)->root;
  if (const auto mode = text_of(root, "mode"); !mode.empty() && mode != "form") {
    return decline;
  }
  simdjson::dom::object properties;
  if (root["requestedSchema"]["properties"].get_object().get(properties) != simdjson::SUCCESS) {
    return decline;
  }
  simdjson::dom::array required;
  if (root["requestedSchema"]["required"].get_array().get(required) == simdjson::SUCCESS) {
    for (auto r : required) {
      std::string_view name;
      simdjson::dom::element field;
      simdjson::dom::element value;
      if (r.get_string().get(name) != simdjson::SUCCESS ||
          properties[name].get(field) != simdjson::SUCCESS ||
          field["default"].get(value) != simdjson::SUCCESS) {
        return decline;
      }
    }
  }
  json_writer w;
  w.begin_object().key("action").value("accept").key("content").begin_object();
  for (auto [name, field] : properties) {
    simdjson::dom::element value;
    if (field["default"].get(value) == simdjson::SUCCESS) {
      w.key(name).raw(simdjson::minify(value));
    }
  }
  w.end_object().end_object();
  return std::move(w).str();
}

std::string example_arguments(std::string_view input_schema_json) {
  auto doc = parse_object(input_schema_json, "input schema");
  if (!doc) {
    return "{}";
  }
  const auto root = (*doc)->root;
  simdjson::dom::object properties;
  if (root["properties"].get_object().get(properties) != simdjson::SUCCESS) {
    return "{}";
  }
  std::vector<std::string_view> required;
  simdjson::dom::array listed;
  if (root["required"].get_array().get(listed) == simdjson::SUCCESS) {
    for (auto r : listed) {
      std::string_view name;
      if (r.get_string().get(name) == simdjson::SUCCESS) {
        required.push_back(name);
      }
    }
  }
  json_writer w;
  w.begin_object();
  int counter = 0;
  for (auto [name, schema] : properties) {
    simdjson::dom::element dflt;
    const bool wanted = std::find(required.begin(), required.end(), name) != required.end() ||
                        schema["default"].get(dflt) == simdjson::SUCCESS;
    if (wanted) {
      w.key(name);
      write_example(w, schema, counter);
    }
  }
  w.end_object();
  return std::move(w).str();
}

} // namespace troupe::net::mcp

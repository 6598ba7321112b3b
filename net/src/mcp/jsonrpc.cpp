#include "troupe/net/mcp/jsonrpc.hpp"

#include <fmt/format.h>
#include <simdjson.h>

#include "troupe/runtime/json_writer.hpp"

namespace troupe::net::mcp {

namespace {

// The id of `object` as JSON text: a string (with its quotes) or an integer. A
// fractional number, null, an object or an array is not an id JSON-RPC allows.
expected<std::string> read_id(simdjson::dom::element id, bool null_allowed) {
  switch (id.type()) {
    case simdjson::dom::element_type::STRING:
    case simdjson::dom::element_type::INT64:
    case simdjson::dom::element_type::UINT64:
      return simdjson::minify(id);
    case simdjson::dom::element_type::NULL_VALUE:
      if (null_allowed) {
        return std::string("null");
      }
      break;
    default:
      break;
  }
  return fail(errc::invalid_argument, "id: must be a string or an integer");
}

expected<jsonrpc_message> read_message(simdjson::dom::element element) {
  simdjson::dom::object object;
  if (element.get_object().get(object) != simdjson::SUCCESS) {
    return fail(errc::invalid_argument, "a JSON-RPC message must be an object");
  }
  std::string_view version;
  if (object["jsonrpc"].get_string().get(version) != simdjson::SUCCESS || version != "2.0") {
    return fail(errc::invalid_argument, "jsonrpc: must be \"2.0\"");
  }
  jsonrpc_message m;
  simdjson::dom::element id;
  const bool has_id = object["id"].get(id) == simdjson::SUCCESS;
  simdjson::dom::element method;
  if (object["method"].get(method) == simdjson::SUCCESS) {
    std::string_view name;
    if (method.get_string().get(name) != simdjson::SUCCESS || name.empty()) {
      return fail(errc::invalid_argument, "method: must be a non-empty string");
    }
    m.method = std::string(name);
    simdjson::dom::element params;
    if (object["params"].get(params) == simdjson::SUCCESS) {
      if (!params.is_object() && !params.is_array()) {
        return fail(errc::invalid_argument,
                    fmt::format("{}: params must be an object or an array", m.method));
      }
      m.params = simdjson::minify(params);
    }
    if (has_id) {
      auto read = read_id(id, false);
      if (!read) {
        return tl::unexpected(read.error());
      }
      m.kind = message_kind::request;
      m.id = std::move(*read);
    } else {
      m.kind = message_kind::notification;
    }
    return m;
  }
  if (!has_id) {
    return fail(errc::invalid_argument, "a message without a method must be a response with an id");
  }
  simdjson::dom::element result;
  simdjson::dom::element error;
  const bool has_result = object["result"].get(result) == simdjson::SUCCESS;
  const bool has_error = object["error"].get(error) == simdjson::SUCCESS;
  if (has_result == has_error) {
    return fail(errc::invalid_argument, "a response must have exactly one of result and error");
  }
  auto read = read_id(id, has_error);
  if (!read) {
    return tl::unexpected(read.error());
  }
  m.id = std::move(*read);
  if (has_result) {
    m.kind = message_kind::response;
    m.result = simdjson::minify(result);
    return m;
  }
  m.kind = message_kind::error_response;
  std::int64_t code = 0;
  if (error["code"].get_int64().get(code) != simdjson::SUCCESS) {
    return fail(errc::invalid_argument, "error.code: must be an integer");
  }
  m.error_code = code;
  std::string_view message;
  if (error["message"].get_string().get(message) == simdjson::SUCCESS) {
    m.error_message = std::string(message);
  }
  simdjson::dom::element data;
  if (error["data"].get(data) == simdjson::SUCCESS) {
    m.error_data = simdjson::minify(data);
  }
  return m;
}

void write_id(json_writer& w, std::string_view id) {
  if (id.empty()) {
    w.value(nullptr);
  } else {
    w.raw(id);
  }
}

} // namespace

expected<std::vector<jsonrpc_message>> parse_jsonrpc(std::string_view text) {
  simdjson::dom::parser parser;
  const simdjson::padded_string padded(text);
  simdjson::dom::element root;
  if (const auto code = parser.parse(padded).get(root); code != simdjson::SUCCESS) {
    return fail(errc::parse_error, fmt::format("not JSON: {}", simdjson::error_message(code)));
  }
  std::vector<jsonrpc_message> out;
  simdjson::dom::array batch;
  if (root.get_array().get(batch) == simdjson::SUCCESS) {
    if (batch.size() == 0) {
      return fail(errc::invalid_argument, "an empty batch");
    }
    std::size_t index = 0;
    for (auto item : batch) {
      auto m = read_message(item);
      if (!m) {
        return fail(errc::invalid_argument, fmt::format("batch[{}]: {}", index, m.error().message));
      }
      out.push_back(std::move(*m));
      ++index;
    }
    return out;
  }
  auto m = read_message(root);
  if (!m) {
    return tl::unexpected(m.error());
  }
  out.push_back(std::move(*m));
  return out;
}

std::string write_request(std::string_view id, std::string_view method,
                          std::string_view params_json) {
  json_writer w;
  w.begin_object().key("jsonrpc").value("2.0").key("id");
  write_id(w, id);
  w.key("method").value(method);
  if (!params_json.empty()) {
    w.key("params").raw(params_json);
  }
  w.end_object();
  return std::move(w).str();
}

std::string write_notification(std::string_view method, std::string_view params_json) {
  json_writer w;
  w.begin_object().key("jsonrpc").value("2.0").key("method").value(method);
  if (!params_json.empty()) {
    w.key("params").raw(params_json);
  }
  w.end_object();
  return std::move(w).str();
}

std::string write_result(std::string_view id, std::string_view result_json) {
  json_writer w;
  w.begin_object().key("jsonrpc").value("2.0").key("id");
  write_id(w, id);
  w.key("result").raw(result_json.empty() ? std::string_view("{}") : result_json);
  w.end_object();
  return std::move(w).str();
}

std::string write_error(std::string_view id, std::int64_t code, std::string_view message) {
  json_writer w;
  w.begin_object().key("jsonrpc").value("2.0").key("id");
  write_id(w, id);
  w.key("error").begin_object().key("code").value(code).key("message").value(message);
  w.end_object().end_object();
  return std::move(w).str();
}

std::string id_json(std::int64_t n) {
  return std::to_string(n);
}

} // namespace troupe::net::mcp

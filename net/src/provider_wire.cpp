#include "troupe/net/provider_wire.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>

#include <simdjson.h>

#include "troupe/runtime/json_writer.hpp"
#include "wire_names.hpp"

namespace troupe::net {

namespace od = simdjson::ondemand;
namespace oa = wire_names::openai;
namespace an = wire_names::anthropic;

namespace detail {

/// A simdjson on-demand parser plus a padded copy of the input (simdjson reads up to
/// SIMDJSON_PADDING bytes past the end).
struct json_scratch {
  od::parser parser;
  std::unique_ptr<char[]> buffer;
  std::size_t capacity = 0;

  simdjson::simdjson_result<od::document> iterate(std::string_view text) {
    const auto need = text.size() + simdjson::SIMDJSON_PADDING;
    if (need > capacity) {
      capacity = std::max(need, std::size_t{1024});
      buffer = std::make_unique<char[]>(capacity);
    }
    std::memcpy(buffer.get(), text.data(), text.size());
    std::memset(buffer.get() + text.size(), 0, simdjson::SIMDJSON_PADDING);
    return parser.iterate(buffer.get(), text.size(), capacity);
  }
};

} // namespace detail

namespace {

using detail::json_scratch;

// True when simdjson gave the document up. Its on-demand parser abandons a document when a
// lookup meets a structural error (a lookup of an absent key scans the whole object): the
// document's parser pointer becomes null, and the next lookup dereferences it. So a lookup
// whose failure is tolerated (an optional field) is followed by this check before the
// document is used again. Found by fuzz/openai_stream_fuzz.cpp.
bool abandoned(od::document& doc) noexcept {
  return !doc.is_alive();
}

tl::unexpected<provider_error> malformed(std::string message) {
  return tl::unexpected<provider_error>(
      provider_error{provider_failure::malformed_response, std::move(message), 0, std::nullopt});
}

std::string excerpt(std::string_view text) {
  constexpr std::size_t limit = 200;
  std::string out(text.substr(0, limit));
  if (text.size() > limit) {
    out += "…";
  }
  return out;
}

bool contains_icase(std::string_view text, std::string_view needle) {
  return std::search(text.begin(), text.end(), needle.begin(), needle.end(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) ==
                  std::tolower(static_cast<unsigned char>(b));
         }) != text.end();
}

// True when `json` parses as one complete JSON value (full validation: the DOM parser).
bool valid_json(std::string_view json) {
  if (json.empty()) {
    return false;
  }
  simdjson::dom::parser parser;
  simdjson::padded_string padded(json);
  simdjson::dom::element element;
  return parser.parse(padded).get(element) == simdjson::SUCCESS;
}

// Reads a string or null; false on other types.
bool get_string_or_null(od::value value, std::string_view& out) {
  od::json_type type;
  if (value.type().get(type)) {
    return false;
  }
  if (type == od::json_type::null) {
    out = {};
    return true;
  }
  if (type != od::json_type::string) {
    return false;
  }
  return !value.get_string().get(out);
}

bool get_count(od::value value, std::uint64_t& out) {
  od::json_type type;
  if (value.type().get(type)) {
    return false;
  }
  if (type == od::json_type::null) {
    out = 0;
    return true;
  }
  return !value.get_uint64().get(out);
}

// Reads the fields of an error object in either provider's shape.
struct error_fields {
  std::string message;
  std::string type;
  std::string code;
};

bool read_error_object(od::value value, error_fields& out) {
  od::object obj;
  if (value.get_object().get(obj)) {
    std::string_view text;
    if (!get_string_or_null(value, text)) {
      return false;
    }
    out.message = text;
    return true;
  }
  for (auto field : obj) {
    std::string_view key;
    if (field.unescaped_key().get(key)) {
      return false;
    }
    od::value v;
    if (field.value().get(v)) {
      return false;
    }
    od::json_type type;
    if (v.type().get(type)) {
      return false;
    }
    std::string_view text;
    if (type == od::json_type::string) {
      if (v.get_string().get(text)) {
        return false;
      }
    } else if (type == od::json_type::number) {
      std::string_view raw = v.raw_json_token();
      while (!raw.empty() && std::isspace(static_cast<unsigned char>(raw.back()))) {
        raw.remove_suffix(1);
      }
      text = raw;
    } else {
      continue;
    }
    if (key == "message") {
      out.message = text;
    } else if (key == "type") {
      out.type = text;
    } else if (key == "code") {
      out.code = text;
    }
  }
  return true;
}

provider_error error_from_fields(unsigned status, const error_fields& e) {
  provider_error out;
  out.http_status = status;
  out.message = e.message.empty() ? e.type : e.message;
  const auto any = [&](std::string_view word) {
    return contains_icase(e.type, word) || contains_icase(e.code, word);
  };
  if (any("context_length") || contains_icase(e.message, "context length") ||
      contains_icase(e.message, "context window") ||
      contains_icase(e.message, "prompt is too long") ||
      contains_icase(e.message, "maximum context")) {
    out.kind = provider_failure::context_overflow;
  } else if (any("rate_limit") || status == 429) {
    out.kind = provider_failure::rate_limited;
  } else if (any("authentication") || any("permission") || any("invalid_api_key") ||
             status == 401 || status == 403) {
    out.kind = provider_failure::auth_failed;
  } else if (any("not_found") || any("model_not_found") || status == 404) {
    out.kind = provider_failure::not_found;
  } else if (any("content_filter") || any("content_policy")) {
    out.kind = provider_failure::content_filtered;
  } else if (any("overloaded") || any("server_error") || any("api_error") || status >= 500 ||
             status == 0) {
    out.kind = provider_failure::server_error;
  } else if (status == 408) {
    out.kind = provider_failure::timeout;
  } else {
    out.kind = provider_failure::bad_request;
  }
  return out;
}

} // namespace

// --- provider types -----------------------------------------------------------------------

expected<provider_type> parse_provider_type(std::string_view name) {
  if (name == "openai") {
    return provider_type::openai;
  }
  if (name == "openai-compatible" || name == "openai_compatible") {
    return provider_type::openai_compatible;
  }
  if (name == "openrouter") {
    return provider_type::openrouter;
  }
  if (name == "qwen") {
    return provider_type::qwen;
  }
  if (name == "kimi") {
    return provider_type::kimi;
  }
  if (name == "claude" || name == "anthropic") {
    return provider_type::claude;
  }
  return fail(errc::invalid_argument,
              "unknown provider type '" + std::string(name) +
                  "' (expected openai, openai-compatible, openrouter, qwen, kimi or claude)");
}

std::string_view to_string(provider_type t) noexcept {
  switch (t) {
    case provider_type::openai:
      return "openai";
    case provider_type::openai_compatible:
      return "openai-compatible";
    case provider_type::openrouter:
      return "openrouter";
    case provider_type::qwen:
      return "qwen";
    case provider_type::kimi:
      return "kimi";
    case provider_type::claude:
      return "claude";
  }
  return "openai-compatible";
}

wire_format wire_of(provider_type t) noexcept {
  return t == provider_type::claude ? wire_format::anthropic : wire_format::openai;
}

std::string_view default_base_url(provider_type t) noexcept {
  switch (t) {
    case provider_type::openai:
      return "https://api.openai.com/v1";
    case provider_type::openrouter:
      return "https://openrouter.ai/api/v1";
    case provider_type::qwen:
      return "https://dashscope.aliyuncs.com/compatible-mode/v1";
    case provider_type::kimi:
      return "https://api.moonshot.cn/v1";
    case provider_type::claude:
      return "https://api.anthropic.com/v1";
    case provider_type::openai_compatible:
      return "";
  }
  return "";
}

// --- request building ----------------------------------------------------------------------

namespace {

expected<void> check_fragments(const completion_request& request) {
  for (const auto& tool : request.tools) {
    if (tool.name.empty()) {
      return fail(errc::invalid_argument, "a tool has no name");
    }
    if (!valid_json(tool.parameters_json)) {
      return fail(errc::invalid_argument,
                  "tool '" + tool.name + "' has parameters that are not valid JSON");
    }
  }
  if (!request.response_format_json.empty() && !valid_json(request.response_format_json)) {
    return fail(errc::invalid_argument, "response_format is not valid JSON");
  }
  if (request.model.empty()) {
    return fail(errc::invalid_argument, "the request names no model");
  }
  return {};
}

} // namespace

expected<std::string> build_openai_request(const completion_request& request) {
  if (auto ok = check_fragments(request); !ok) {
    return tl::unexpected(ok.error());
  }
  json_writer w;
  w.begin_object();
  w.key("model").value(request.model);
  w.key("messages").begin_array();
  for (const auto& m : request.messages) {
    w.begin_object();
    w.key("role").value(to_string(m.role));
    if (m.role == chat_role::assistant && !m.tool_calls.empty()) {
      w.key("content");
      if (m.content.empty()) {
        w.value(nullptr);
      } else {
        w.value(m.content);
      }
      w.key("tool_calls").begin_array();
      for (const auto& call : m.tool_calls) {
        w.begin_object();
        w.key("id").value(call.id);
        w.key("type").value("function");
        w.key("function").begin_object();
        w.key("name").value(call.name);
        w.key("arguments").value(call.arguments.empty() ? std::string_view("{}") : call.arguments);
        w.end_object();
        w.end_object();
      }
      w.end_array();
    } else {
      w.key("content").value(m.content);
    }
    if (m.role == chat_role::tool) {
      w.key("tool_call_id").value(m.tool_call_id);
      if (!m.name.empty()) {
        w.key("name").value(m.name);
      }
    }
    w.end_object();
  }
  w.end_array();
  if (!request.tools.empty()) {
    w.key("tools").begin_array();
    for (const auto& tool : request.tools) {
      w.begin_object();
      w.key("type").value("function");
      w.key("function").begin_object();
      w.key("name").value(tool.name);
      if (!tool.description.empty()) {
        w.key("description").value(tool.description);
      }
      w.key("parameters").raw(tool.parameters_json);
      w.end_object();
      w.end_object();
    }
    w.end_array();
  }
  if (request.choice) {
    w.key("tool_choice");
    switch (request.choice->how) {
      case tool_choice::mode::automatic:
        w.value("auto");
        break;
      case tool_choice::mode::none:
        w.value("none");
        break;
      case tool_choice::mode::required:
        w.value("required");
        break;
      case tool_choice::mode::named:
        w.begin_object();
        w.key("type").value("function");
        w.key("function").begin_object().key("name").value(request.choice->name).end_object();
        w.end_object();
        break;
    }
  }
  if (request.temperature) {
    w.key("temperature").value(*request.temperature);
  }
  if (request.max_tokens) {
    w.key("max_tokens").value(*request.max_tokens);
  }
  if (!request.stop.empty()) {
    w.key("stop").begin_array();
    for (const auto& s : request.stop) {
      w.value(s);
    }
    w.end_array();
  }
  if (!request.response_format_json.empty()) {
    w.key("response_format").raw(request.response_format_json);
  }
  w.key("stream").value(request.stream);
  if (request.stream) {
    w.key("stream_options").begin_object().key("include_usage").value(true).end_object();
  }
  w.end_object();
  return std::move(w).str();
}

expected<std::string> build_anthropic_request(const completion_request& request,
                                              std::uint32_t default_max_tokens) {
  if (auto ok = check_fragments(request); !ok) {
    return tl::unexpected(ok.error());
  }
  json_writer w;
  w.begin_object();
  w.key("model").value(request.model);
  w.key("max_tokens").value(request.max_tokens.value_or(default_max_tokens));
  std::string system;
  for (const auto& m : request.messages) {
    if (m.role == chat_role::system) {
      if (!system.empty()) {
        system += "\n\n";
      }
      system += m.content;
    }
  }
  if (!system.empty()) {
    w.key("system").value(system);
  }
  w.key("messages").begin_array();
  bool in_tool_results = false; // consecutive tool results share one user turn
  for (const auto& m : request.messages) {
    if (m.role == chat_role::system) {
      continue;
    }
    if (m.role == chat_role::tool) {
      if (!in_tool_results) {
        w.begin_object();
        w.key("role").value("user");
        w.key("content").begin_array();
        in_tool_results = true;
      }
      w.begin_object();
      w.key("type").value("tool_result");
      w.key("tool_use_id").value(m.tool_call_id);
      w.key("content").value(m.content);
      w.end_object();
      continue;
    }
    if (in_tool_results) {
      w.end_array().end_object();
      in_tool_results = false;
    }
    w.begin_object();
    w.key("role").value(m.role == chat_role::assistant ? "assistant" : "user");
    if (m.role == chat_role::assistant && !m.tool_calls.empty()) {
      w.key("content").begin_array();
      if (!m.content.empty()) {
        w.begin_object().key("type").value("text").key("text").value(m.content).end_object();
      }
      for (const auto& call : m.tool_calls) {
        w.begin_object();
        w.key("type").value("tool_use");
        w.key("id").value(call.id);
        w.key("name").value(call.name);
        w.key("input");
        if (valid_json(call.arguments)) {
          w.raw(call.arguments);
        } else {
          // Anthropic wants an object; arguments the model garbled are kept as text.
          w.begin_object().key("_raw_arguments").value(call.arguments).end_object();
        }
        w.end_object();
      }
      w.end_array();
    } else {
      w.key("content").value(m.content);
    }
    w.end_object();
  }
  if (in_tool_results) {
    w.end_array().end_object();
  }
  w.end_array();
  if (!request.tools.empty()) {
    w.key("tools").begin_array();
    for (const auto& tool : request.tools) {
      w.begin_object();
      w.key("name").value(tool.name);
      if (!tool.description.empty()) {
        w.key("description").value(tool.description);
      }
      w.key("input_schema").raw(tool.parameters_json);
      w.end_object();
    }
    w.end_array();
  }
  if (request.choice) {
    w.key("tool_choice").begin_object();
    switch (request.choice->how) {
      case tool_choice::mode::automatic:
        w.key("type").value("auto");
        break;
      case tool_choice::mode::none:
        w.key("type").value("none");
        break;
      case tool_choice::mode::required:
        w.key("type").value("any");
        break;
      case tool_choice::mode::named:
        w.key("type").value("tool").key("name").value(request.choice->name);
        break;
    }
    w.end_object();
  }
  if (request.temperature) {
    w.key("temperature").value(*request.temperature);
  }
  if (!request.stop.empty()) {
    w.key("stop_sequences").begin_array();
    for (const auto& s : request.stop) {
      w.value(s);
    }
    w.end_array();
  }
  w.key("stream").value(request.stream);
  w.end_object();
  return std::move(w).str();
}

// --- errors ------------------------------------------------------------------------------------

std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view value) {
  while (!value.empty() && value.front() == ' ') {
    value.remove_prefix(1);
  }
  while (!value.empty() && (value.back() == ' ' || value.back() == '\r')) {
    value.remove_suffix(1);
  }
  if (value.empty()) {
    return std::nullopt;
  }
  double seconds = 0;
  const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
  if (ec != std::errc{} || ptr != value.data() + value.size() || seconds < 0 ||
      seconds > 24 * 3600) {
    return std::nullopt;
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0));
}

provider_error classify_http_error(unsigned status, std::string_view body,
                                   std::string_view retry_after) {
  error_fields fields;
  json_scratch scratch;
  od::document doc;
  bool parsed = false;
  if (!body.empty() && !scratch.iterate(body).get(doc)) {
    od::object obj;
    if (!doc.get_object().get(obj)) {
      od::value err;
      if (!obj.find_field_unordered("error").get(err)) {
        parsed = read_error_object(err, fields);
      }
    }
  }
  if (!parsed) {
    fields.message = excerpt(body);
  }
  auto out = error_from_fields(status, fields);
  if (out.message.empty()) {
    out.message = "HTTP " + std::to_string(status);
  } else {
    out.message = "HTTP " + std::to_string(status) + ": " + out.message;
  }
  out.retry_after = parse_retry_after(retry_after);
  return out;
}

namespace {

/// A finish word of one wire and what it means. Each table lists a reason's canonical word
/// (the one written) first; later rows are words also read.
struct finish_word {
  std::string_view word;
  finish_reason reason;
};

constexpr finish_word openai_finish_words[] = {
    {"stop", finish_reason::stop},
    {"length", finish_reason::length},
    {"tool_calls", finish_reason::tool_calls},
    {"function_call", finish_reason::tool_calls},
    {"content_filter", finish_reason::content_filter},
    {"other", finish_reason::other},
};

constexpr finish_word anthropic_stop_words[] = {
    {"end_turn", finish_reason::stop},
    {"stop_sequence", finish_reason::stop},
    {"max_tokens", finish_reason::length},
    {"model_context_window_exceeded", finish_reason::length},
    {"tool_use", finish_reason::tool_calls},
    {"refusal", finish_reason::content_filter},
    {"pause_turn", finish_reason::other},
};

template <std::size_t N>
finish_reason reason_of(const finish_word (&table)[N], std::string_view word) noexcept {
  for (const auto& row : table) {
    if (row.word == word) {
      return row.reason;
    }
  }
  return finish_reason::other;
}

template <std::size_t N>
std::string_view word_of(const finish_word (&table)[N], finish_reason r) noexcept {
  for (const auto& row : table) {
    if (row.reason == r) {
      return row.word;
    }
  }
  return table[0].word;
}

} // namespace

finish_reason parse_openai_finish(std::string_view word) noexcept {
  return reason_of(openai_finish_words, word);
}

finish_reason parse_anthropic_stop(std::string_view word) noexcept {
  return reason_of(anthropic_stop_words, word);
}

std::string_view openai_finish_word(finish_reason r) noexcept {
  return word_of(openai_finish_words, r);
}

std::string_view anthropic_stop_word(finish_reason r) noexcept {
  return word_of(anthropic_stop_words, r);
}

// --- OpenAI ------------------------------------------------------------------------------------

openai_stream_decoder::openai_stream_decoder() : json_(std::make_unique<json_scratch>()) {}
openai_stream_decoder::~openai_stream_decoder() = default;
openai_stream_decoder::openai_stream_decoder(openai_stream_decoder&&) noexcept = default;
openai_stream_decoder& openai_stream_decoder::operator=(openai_stream_decoder&&) noexcept = default;

openai_stream_decoder::call_state& openai_stream_decoder::call_at(std::size_t index) {
  for (auto& c : calls_) {
    if (c.index == index) {
      return c;
    }
  }
  auto& c = calls_.emplace_back();
  c.index = index;
  return c;
}

void openai_stream_decoder::complete_calls(std::vector<stream_event>& out) {
  for (auto& c : calls_) {
    if (c.completed) {
      continue;
    }
    c.completed = true;
    auto& e = out.emplace_back();
    e.type = stream_event::kind::tool_call_complete;
    e.index = c.index;
    e.id = c.id;
    e.name = c.name;
    e.text = c.arguments;
  }
}

void openai_stream_decoder::flush(std::vector<stream_event>& out) {
  complete_calls(out);
}

namespace {

// Decodes the `usage` object of either a chunk or a whole completion.
bool read_openai_usage(od::value value, token_usage& usage, bool& present) {
  od::json_type type;
  if (value.type().get(type)) {
    return false;
  }
  if (type == od::json_type::null) {
    return true;
  }
  od::object obj;
  if (value.get_object().get(obj)) {
    return false;
  }
  present = true;
  for (auto field : obj) {
    od::raw_json_string key;
    if (field.key().get(key)) {
      return false;
    }
    std::uint64_t* target = nullptr;
    if (key == oa::prompt_tokens) {
      target = &usage.prompt_tokens;
    } else if (key == oa::completion_tokens) {
      target = &usage.completion_tokens;
    } else if (key == oa::total_tokens) {
      target = &usage.total_tokens;
    }
    if (target) {
      od::value v;
      if (field.value().get(v) || !get_count(v, *target)) {
        return false;
      }
    }
  }
  if (usage.total_tokens == 0) {
    usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
  }
  return true;
}

} // namespace

decode_result openai_stream_decoder::decode(std::string_view data, std::vector<stream_event>& out) {
  if (data == oa::done_payload) {
    done_ = true;
    complete_calls(out);
    return {};
  }
  od::document doc;
  od::object root;
  if (json_->iterate(data).get(doc) || doc.get_object().get(root)) {
    return malformed("a stream chunk is not a JSON object: " + excerpt(data));
  }
  bool bad = false;
  std::optional<finish_reason> finish;
  token_usage usage;
  bool usage_present = false;
  // Look up the two fields that matter rather than visiting every field: a chunk's id,
  // model, fingerprint… are skipped without being decoded. A payload without choices may
  // be an error object.
  for (const std::string_view key : {std::string_view(oa::choices), std::string_view(oa::usage)}) {
    od::value value;
    const auto found = root.find_field_unordered(key).get(value);
    if (found == simdjson::NO_SUCH_FIELD) {
      od::value err;
      if (key == oa::choices && !root.find_field_unordered(oa::error).get(err)) {
        error_fields fields;
        if (!read_error_object(err, fields)) {
          bad = true;
          break;
        }
        auto e = error_from_fields(0, fields);
        e.message = "error in stream: " + e.message;
        return tl::unexpected(std::move(e));
      }
      if (abandoned(doc)) {
        bad = true;
        break;
      }
      continue;
    }
    if (found) {
      bad = true;
      break;
    }
    if (key == oa::choices) {
      od::json_type type;
      if (value.type().get(type)) {
        bad = true;
        break;
      }
      if (type == od::json_type::null) {
        continue; // vLLM sends choices: null with the usage chunk
      }
      od::array choices;
      if (value.get_array().get(choices)) {
        bad = true;
        break;
      }
      for (auto choice_result : choices) {
        od::object choice;
        if (choice_result.get_object().get(choice)) {
          bad = true;
          break;
        }
        std::uint64_t choice_index = 0;
        {
          od::value index_value;
          const auto has_index = choice.find_field_unordered(oa::index).get(index_value);
          if ((has_index && has_index != simdjson::NO_SUCH_FIELD) ||
              (!has_index && !get_count(index_value, choice_index))) {
            bad = true;
            break;
          }
        }
        if (choice_index != 0) {
          continue; // n > 1: only the first choice is followed
        }
        for (const std::string_view ckey :
             {std::string_view(oa::delta), std::string_view(oa::finish_reason)}) {
          od::value cvalue;
          const auto has_field = choice.find_field_unordered(ckey).get(cvalue);
          if (has_field == simdjson::NO_SUCH_FIELD) {
            continue;
          }
          if (has_field) {
            bad = true;
            break;
          }
          if (ckey == oa::delta) {
            od::object delta;
            od::json_type dtype;
            if (cvalue.type().get(dtype)) {
              bad = true;
              break;
            }
            if (dtype == od::json_type::null) {
              continue;
            }
            if (cvalue.get_object().get(delta)) {
              bad = true;
              break;
            }
            for (auto df : delta) {
              od::raw_json_string dkey;
              od::value dvalue;
              if (df.key().get(dkey) || df.value().get(dvalue)) {
                bad = true;
                break;
              }
              if (dkey == oa::content || dkey == oa::reasoning_content || dkey == oa::reasoning) {
                std::string_view text;
                if (!get_string_or_null(dvalue, text)) {
                  bad = true;
                  break;
                }
                if (!text.empty()) {
                  auto& e = out.emplace_back();
                  e.type = dkey == oa::content ? stream_event::kind::text_delta
                                               : stream_event::kind::reasoning_delta;
                  e.text.assign(text);
                }
              } else if (dkey == oa::tool_calls) {
                od::json_type ttype;
                if (dvalue.type().get(ttype)) {
                  bad = true;
                  break;
                }
                if (ttype == od::json_type::null) {
                  continue;
                }
                od::array calls;
                if (dvalue.get_array().get(calls)) {
                  bad = true;
                  break;
                }
                std::size_t position = 0;
                for (auto call_result : calls) {
                  od::object call;
                  if (call_result.get_object().get(call)) {
                    bad = true;
                    break;
                  }
                  std::optional<std::uint64_t> index;
                  std::string_view id;
                  std::string_view name;
                  std::string_view arguments;
                  for (auto tf : call) {
                    od::raw_json_string tkey;
                    od::value tvalue;
                    if (tf.key().get(tkey) || tf.value().get(tvalue)) {
                      bad = true;
                      break;
                    }
                    if (tkey == oa::index) {
                      std::uint64_t i = 0;
                      if (!get_count(tvalue, i)) {
                        bad = true;
                        break;
                      }
                      index = i;
                    } else if (tkey == oa::id) {
                      if (!get_string_or_null(tvalue, id)) {
                        bad = true;
                        break;
                      }
                    } else if (tkey == oa::function) {
                      od::object fn;
                      if (tvalue.get_object().get(fn)) {
                        bad = true;
                        break;
                      }
                      for (auto ff : fn) {
                        od::raw_json_string fkey;
                        od::value fvalue;
                        if (ff.key().get(fkey) || ff.value().get(fvalue)) {
                          bad = true;
                          break;
                        }
                        if (fkey == oa::name) {
                          if (!get_string_or_null(fvalue, name)) {
                            bad = true;
                            break;
                          }
                        } else if (fkey == oa::arguments) {
                          if (!get_string_or_null(fvalue, arguments)) {
                            bad = true;
                            break;
                          }
                        }
                      }
                    }
                    if (bad) {
                      break;
                    }
                  }
                  if (bad) {
                    break;
                  }
                  // The views point into the parser's buffer, valid until the next
                  // iterate; copy them now.
                  auto& state = call_at(index.value_or(position));
                  const bool fresh = state.id.empty() && state.name.empty();
                  if (!id.empty()) {
                    state.id.assign(id);
                  }
                  if (!name.empty()) {
                    state.name.assign(name);
                  }
                  if (fresh && (!id.empty() || !name.empty())) {
                    auto& e = out.emplace_back();
                    e.type = stream_event::kind::tool_call_start;
                    e.index = state.index;
                    e.id = state.id;
                    e.name = state.name;
                  }
                  if (!arguments.empty()) {
                    state.arguments.append(arguments);
                    auto& e = out.emplace_back();
                    e.type = stream_event::kind::tool_call_delta;
                    e.index = state.index;
                    e.text.assign(arguments);
                  }
                  ++position;
                }
              }
              if (bad) {
                break;
              }
            }
          } else {
            std::string_view word;
            if (!get_string_or_null(cvalue, word)) {
              bad = true;
              break;
            }
            if (!word.empty()) {
              finish = parse_openai_finish(word);
            }
          }
          if (bad) {
            break;
          }
        }
        if (bad) {
          break;
        }
      }
    } else if (key == oa::usage) {
      if (!read_openai_usage(value, usage, usage_present)) {
        bad = true;
      }
    }
    if (bad) {
      break;
    }
  }
  if (bad) {
    return malformed("a stream chunk does not have the chat.completion.chunk shape: " +
                     excerpt(data));
  }
  if (finish && !finished_) {
    finished_ = true;
    complete_calls(out);
    auto& e = out.emplace_back();
    e.type = stream_event::kind::finish;
    e.reason = *finish;
  }
  if (usage_present) {
    auto& e = out.emplace_back();
    e.type = stream_event::kind::usage;
    e.usage = usage;
  }
  return {};
}

decode_result decode_openai_completion(std::string_view body, std::vector<stream_event>& out) {
  json_scratch scratch;
  od::document doc;
  od::object root;
  if (scratch.iterate(body).get(doc) || doc.get_object().get(root)) {
    return malformed("the answer is not a JSON object: " + excerpt(body));
  }
  // Whole answers are small and rare: read them field by field, order-independent.
  od::value err;
  if (!root.find_field_unordered(oa::error).get(err)) {
    error_fields fields;
    read_error_object(err, fields);
    return tl::unexpected(error_from_fields(0, fields));
  }
  if (abandoned(doc)) {
    return malformed("the answer is not valid JSON: " + excerpt(body));
  }
  od::array choices;
  std::optional<finish_reason> finish;
  if (root.find_field_unordered(oa::choices).get_array().get(choices)) {
    return malformed("the answer has no choices: " + excerpt(body));
  }
  for (auto choice_result : choices) {
    od::object choice;
    if (choice_result.get_object().get(choice)) {
      return malformed("a choice is not an object");
    }
    od::object message;
    if (choice.find_field_unordered(oa::message).get_object().get(message)) {
      return malformed("a choice has no message: " + excerpt(body));
    }
    for (auto mf : message) {
      std::string_view key;
      od::value value;
      if (mf.unescaped_key().get(key) || mf.value().get(value)) {
        return malformed("a message is not valid JSON");
      }
      if (key == oa::content || key == oa::reasoning_content || key == oa::reasoning) {
        std::string_view text;
        if (!get_string_or_null(value, text)) {
          return malformed("message content is not a string");
        }
        if (!text.empty()) {
          auto& e = out.emplace_back();
          e.type = key == oa::content ? stream_event::kind::text_delta
                                      : stream_event::kind::reasoning_delta;
          e.text.assign(text);
        }
      } else if (key == oa::tool_calls) {
        od::json_type type;
        if (value.type().get(type)) {
          return malformed("tool_calls is not valid JSON");
        }
        if (type == od::json_type::null) {
          continue;
        }
        od::array calls;
        if (value.get_array().get(calls)) {
          return malformed("tool_calls is not an array");
        }
        std::size_t index = 0;
        for (auto call_result : calls) {
          od::object call;
          std::string_view id;
          std::string_view name;
          std::string_view arguments;
          od::object fn;
          if (call_result.get_object().get(call) || call.find_field_unordered(oa::id).get(id) ||
              call.find_field_unordered(oa::function).get_object().get(fn) ||
              fn.find_field_unordered(oa::name).get(name)) {
            return malformed("a tool call lacks id, function or name");
          }
          od::value args;
          if (!fn.find_field_unordered(oa::arguments).get(args)) {
            if (!get_string_or_null(args, arguments)) {
              return malformed("tool call arguments are not a string");
            }
          } else if (abandoned(doc)) {
            return malformed("a tool call is not valid JSON");
          }
          stream_event start;
          start.type = stream_event::kind::tool_call_start;
          start.index = index;
          start.id.assign(id);
          start.name.assign(name);
          stream_event done = start;
          done.type = stream_event::kind::tool_call_complete;
          done.text.assign(arguments);
          stream_event delta;
          delta.type = stream_event::kind::tool_call_delta;
          delta.index = index;
          delta.text.assign(arguments);
          out.push_back(std::move(start));
          if (!delta.text.empty()) {
            out.push_back(std::move(delta));
          }
          out.push_back(std::move(done));
          ++index;
        }
      }
    }
    std::string_view word;
    if (!choice.find_field_unordered(oa::finish_reason).get(word)) {
      finish = parse_openai_finish(word);
    } else if (abandoned(doc)) {
      return malformed("a choice is not valid JSON: " + excerpt(body));
    }
    break; // only the first choice
  }
  token_usage usage;
  bool usage_present = false;
  od::value usage_value;
  if (!root.find_field_unordered(oa::usage).get(usage_value)) {
    if (!read_openai_usage(usage_value, usage, usage_present)) {
      return malformed("usage is not an object of counts");
    }
  }
  if (finish) {
    auto& e = out.emplace_back();
    e.type = stream_event::kind::finish;
    e.reason = *finish;
  }
  if (usage_present) {
    auto& e = out.emplace_back();
    e.type = stream_event::kind::usage;
    e.usage = usage;
  }
  return {};
}

// --- Anthropic ---------------------------------------------------------------------------------

anthropic_stream_decoder::anthropic_stream_decoder() : json_(std::make_unique<json_scratch>()) {}
anthropic_stream_decoder::~anthropic_stream_decoder() = default;
anthropic_stream_decoder::anthropic_stream_decoder(anthropic_stream_decoder&&) noexcept = default;
anthropic_stream_decoder&
anthropic_stream_decoder::operator=(anthropic_stream_decoder&&) noexcept = default;

anthropic_stream_decoder::block_state* anthropic_stream_decoder::block_at(std::size_t index) {
  for (auto& b : blocks_) {
    if (b.index == index) {
      return &b;
    }
  }
  return nullptr;
}

void anthropic_stream_decoder::flush(std::vector<stream_event>& out) {
  for (auto& b : blocks_) {
    if (b.tool && !b.completed) {
      b.completed = true;
      auto& e = out.emplace_back();
      e.type = stream_event::kind::tool_call_complete;
      e.index = b.index;
      e.id = b.id;
      e.name = b.name;
      e.text = b.input.empty() ? "{}" : b.input;
    }
  }
}

namespace {

// Reads Anthropic usage counts into `usage`, assigning only the counts present.
bool read_anthropic_usage(od::object obj, token_usage& usage) {
  for (auto field : obj) {
    std::string_view key;
    od::value v;
    if (field.unescaped_key().get(key) || field.value().get(v)) {
      return false;
    }
    std::uint64_t n = 0;
    if (key == an::input_tokens) {
      if (!get_count(v, n)) {
        return false;
      }
      usage.prompt_tokens = n;
    } else if (key == an::output_tokens) {
      if (!get_count(v, n)) {
        return false;
      }
      usage.completion_tokens = n;
    }
  }
  usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
  return true;
}

} // namespace

decode_result anthropic_stream_decoder::decode(std::string_view event, std::string_view data,
                                               std::vector<stream_event>& out) {
  od::document doc;
  od::object root;
  if (json_->iterate(data).get(doc) || doc.get_object().get(root)) {
    return malformed("an Anthropic event is not a JSON object: " + excerpt(data));
  }
  std::string type(event);
  {
    std::string_view t;
    if (!root.find_field_unordered(an::type).get(t)) {
      type.assign(t);
    } else if (abandoned(doc)) {
      return malformed("an Anthropic event is not valid JSON: " + excerpt(data));
    }
  }
  const auto bad_shape = [&] {
    return malformed("an Anthropic '" + type + "' event has an unexpected shape: " + excerpt(data));
  };
  if (type == an::message_start) {
    od::object message;
    od::object usage;
    if (root.find_field_unordered(an::message).get_object().get(message)) {
      return bad_shape();
    }
    if (!message.find_field_unordered(an::usage).get_object().get(usage)) {
      if (!read_anthropic_usage(usage, usage_)) {
        return bad_shape();
      }
      auto& e = out.emplace_back();
      e.type = stream_event::kind::usage;
      e.usage = usage_;
    }
  } else if (type == an::content_block_start) {
    std::uint64_t index = 0;
    od::object block;
    std::string_view block_type;
    if (root.find_field_unordered(an::index).get(index) ||
        root.find_field_unordered(an::content_block).get_object().get(block) ||
        block.find_field_unordered(an::type).get(block_type)) {
      return bad_shape();
    }
    auto& b = blocks_.emplace_back();
    b.index = index;
    if (block_type == an::tool_use_block || block_type == an::server_tool_use_block) {
      std::string_view id;
      std::string_view name;
      if (block.find_field_unordered(an::id).get(id) ||
          block.find_field_unordered(an::name).get(name)) {
        return bad_shape();
      }
      b.tool = true;
      b.id.assign(id);
      b.name.assign(name);
      auto& e = out.emplace_back();
      e.type = stream_event::kind::tool_call_start;
      e.index = index;
      e.id = b.id;
      e.name = b.name;
    } else if (block_type == an::text_block) {
      std::string_view text;
      if (!block.find_field_unordered(an::text).get(text) && !text.empty()) {
        auto& e = out.emplace_back();
        e.type = stream_event::kind::text_delta;
        e.text.assign(text);
      }
    }
  } else if (type == an::content_block_delta) {
    std::uint64_t index = 0;
    od::object delta;
    std::string_view delta_type;
    if (root.find_field_unordered(an::index).get(index) ||
        root.find_field_unordered(an::delta).get_object().get(delta) ||
        delta.find_field_unordered(an::type).get(delta_type)) {
      return bad_shape();
    }
    std::string_view text;
    if (delta_type == an::text_delta) {
      if (delta.find_field_unordered(an::text).get(text)) {
        return bad_shape();
      }
      auto& e = out.emplace_back();
      e.type = stream_event::kind::text_delta;
      e.text.assign(text);
    } else if (delta_type == an::thinking_delta) {
      if (delta.find_field_unordered(an::thinking).get(text)) {
        return bad_shape();
      }
      auto& e = out.emplace_back();
      e.type = stream_event::kind::reasoning_delta;
      e.text.assign(text);
    } else if (delta_type == an::input_json_delta) {
      if (delta.find_field_unordered(an::partial_json).get(text)) {
        return bad_shape();
      }
      auto* b = block_at(index);
      if (b == nullptr || !b->tool) {
        return malformed("input_json_delta for block " + std::to_string(index) +
                         ", which is not an open tool_use block");
      }
      b->input.append(text);
      if (!text.empty()) {
        auto& e = out.emplace_back();
        e.type = stream_event::kind::tool_call_delta;
        e.index = index;
        e.text.assign(text);
      }
    }
    // signature_delta, citations_delta and future delta types carry nothing we keep.
  } else if (type == an::content_block_stop) {
    std::uint64_t index = 0;
    if (root.find_field_unordered(an::index).get(index)) {
      return bad_shape();
    }
    auto* b = block_at(index);
    if (b != nullptr && b->tool && !b->completed) {
      b->completed = true;
      auto& e = out.emplace_back();
      e.type = stream_event::kind::tool_call_complete;
      e.index = index;
      e.id = b->id;
      e.name = b->name;
      e.text = b->input.empty() ? "{}" : b->input;
    }
  } else if (type == an::message_delta) {
    od::object delta;
    std::optional<finish_reason> finish;
    if (!root.find_field_unordered(an::delta).get_object().get(delta)) {
      od::value stop;
      if (!delta.find_field_unordered(an::stop_reason).get(stop)) {
        std::string_view word;
        if (!get_string_or_null(stop, word)) {
          return bad_shape();
        }
        if (!word.empty()) {
          finish = parse_anthropic_stop(word);
        }
      }
    }
    if (abandoned(doc)) {
      return bad_shape();
    }
    od::object usage;
    if (!root.find_field_unordered(an::usage).get_object().get(usage)) {
      // Cumulative: the counts replace the earlier ones.
      if (!read_anthropic_usage(usage, usage_)) {
        return bad_shape();
      }
      auto& e = out.emplace_back();
      e.type = stream_event::kind::usage;
      e.usage = usage_;
    }
    if (finish && !finished_) {
      finished_ = true;
      flush(out);
      auto& e = out.emplace_back();
      e.type = stream_event::kind::finish;
      e.reason = *finish;
    }
  } else if (type == an::message_stop) {
    done_ = true;
    flush(out);
  } else if (type == an::error_event) {
    od::value err;
    error_fields fields;
    if (root.find_field_unordered(an::error).get(err) || !read_error_object(err, fields)) {
      return bad_shape();
    }
    auto e = error_from_fields(0, fields);
    e.message = "error in stream: " + e.message;
    return tl::unexpected(std::move(e));
  }
  // ping and unknown event types are ignored.
  return {};
}

decode_result decode_anthropic_message(std::string_view body, std::vector<stream_event>& out) {
  json_scratch scratch;
  od::document doc;
  od::object root;
  if (scratch.iterate(body).get(doc) || doc.get_object().get(root)) {
    return malformed("the answer is not a JSON object: " + excerpt(body));
  }
  std::string_view type;
  if (!root.find_field_unordered(an::type).get(type) && type == an::error_event) {
    od::value err;
    error_fields fields;
    if (!root.find_field_unordered(an::error).get(err)) {
      read_error_object(err, fields);
    }
    return tl::unexpected(error_from_fields(0, fields));
  }
  if (abandoned(doc)) {
    return malformed("the answer is not valid JSON: " + excerpt(body));
  }
  od::array content;
  if (root.find_field_unordered(an::content).get_array().get(content)) {
    return malformed("the answer has no content array: " + excerpt(body));
  }
  std::size_t index = 0;
  for (auto block_result : content) {
    od::object block;
    std::string_view block_type;
    if (block_result.get_object().get(block) ||
        block.find_field_unordered(an::type).get(block_type)) {
      return malformed("a content block has no type");
    }
    if (block_type == an::text_block) {
      std::string_view text;
      if (block.find_field_unordered(an::text).get(text)) {
        return malformed("a text block has no text");
      }
      auto& e = out.emplace_back();
      e.type = stream_event::kind::text_delta;
      e.text.assign(text);
    } else if (block_type == an::thinking_block) {
      std::string_view text;
      if (!block.find_field_unordered(an::thinking).get(text)) {
        auto& e = out.emplace_back();
        e.type = stream_event::kind::reasoning_delta;
        e.text.assign(text);
      } else if (abandoned(doc)) {
        return malformed("a thinking block is not valid JSON");
      }
    } else if (block_type == an::tool_use_block) {
      std::string_view id;
      std::string_view name;
      od::value input;
      if (block.find_field_unordered(an::id).get(id) ||
          block.find_field_unordered(an::name).get(name) ||
          block.find_field_unordered(an::input).get(input)) {
        return malformed("a tool_use block lacks id, name or input");
      }
      std::string_view raw;
      od::object input_object;
      if (input.get_object().get(input_object) || input_object.raw_json().get(raw)) {
        return malformed("a tool_use input is not valid JSON");
      }
      stream_event start;
      start.type = stream_event::kind::tool_call_start;
      start.index = index;
      start.id.assign(id);
      start.name.assign(name);
      stream_event done = start;
      done.type = stream_event::kind::tool_call_complete;
      done.text.assign(raw);
      out.push_back(std::move(start));
      out.push_back(std::move(done));
    }
    ++index;
  }
  std::string_view stop;
  if (!root.find_field_unordered(an::stop_reason).get(stop)) {
    auto& e = out.emplace_back();
    e.type = stream_event::kind::finish;
    e.reason = parse_anthropic_stop(stop);
  } else if (abandoned(doc)) {
    return malformed("the answer is not valid JSON: " + excerpt(body));
  }
  od::object usage;
  if (!root.find_field_unordered(an::usage).get_object().get(usage)) {
    token_usage counts;
    if (read_anthropic_usage(usage, counts)) {
      auto& e = out.emplace_back();
      e.type = stream_event::kind::usage;
      e.usage = counts;
    }
  }
  return {};
}

std::string_view json_kernel_name() noexcept {
  return SIMDJSON_STRINGIFY(SIMDJSON_BUILTIN_IMPLEMENTATION);
}

tl::expected<std::vector<std::string>, provider_error> parse_model_list(std::string_view body) {
  json_scratch scratch;
  od::document doc;
  od::object root;
  od::array data;
  if (scratch.iterate(body).get(doc) || doc.get_object().get(root) ||
      root.find_field_unordered(oa::data).get_array().get(data)) {
    return malformed("the model list is not {\"data\":[…]}: " + excerpt(body));
  }
  std::vector<std::string> ids;
  for (auto item : data) {
    od::object obj;
    std::string_view id;
    if (item.get_object().get(obj) || obj.find_field_unordered(oa::id).get(id)) {
      return malformed("a model entry has no id");
    }
    ids.emplace_back(id);
  }
  return ids;
}

} // namespace troupe::net

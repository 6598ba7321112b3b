#include "troupe/net/provider_wire.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>

#include <simdjson.h>

#include "troupe/runtime/json_writer.hpp"
#include "wire_names.hpp"

namespace troupe::net {

namespace dom = simdjson::dom;
namespace oa = wire_names::openai;
namespace an = wire_names::anthropic;

namespace detail {

/// A simdjson DOM parser plus a padded copy of the input (simdjson reads up to
/// SIMDJSON_PADDING bytes past the end). The DOM parser validates the whole text before
/// anything is read from it: a provider's answer is untrusted bytes, and simdjson's
/// on-demand API (used here before) walks malformed input past its structure — a
/// delta object whose comma was a colon ran on into its choice, and a later lookup met
/// an assumption that is undefined behaviour in release builds. Found by
/// fuzz/openai_stream_fuzz.cpp.
struct json_scratch {
  dom::parser parser;
  std::unique_ptr<char[]> buffer;
  std::size_t capacity = 0;

  simdjson::simdjson_result<dom::element> parse(std::string_view text) {
    const auto need = text.size() + simdjson::SIMDJSON_PADDING;
    if (need > capacity) {
      capacity = std::max(need, std::size_t{1024});
      buffer = std::make_unique<char[]>(capacity);
    }
    std::memcpy(buffer.get(), text.data(), text.size());
    std::memset(buffer.get() + text.size(), 0, simdjson::SIMDJSON_PADDING);
    return parser.parse(buffer.get(), text.size(), false);
  }
};

} // namespace detail

namespace {

using detail::json_scratch;

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
// Tool schemas are checked on every request, so the thread's parser is reused (a new
// parser allocates and clears its buffers: most of this check's cost).
bool valid_json(std::string_view json) {
  if (json.empty()) {
    return false;
  }
  static thread_local simdjson::dom::parser parser;
  simdjson::dom::element element;
  // parse(const char*, size_t) copies into the parser's own padded buffer.
  return parser.parse(json.data(), json.size()).get(element) == simdjson::SUCCESS;
}

/// Why `text` could not be read as a JSON object: not JSON at all (with simdjson's reason),
/// or JSON of another type.
tl::unexpected<provider_error> not_an_object(std::string_view what, std::string_view text,
                                             simdjson::error_code parsed) {
  if (parsed != simdjson::SUCCESS) {
    return malformed(std::string(what) + " is not valid JSON (" + simdjson::error_message(parsed) +
                     "): " + excerpt(text));
  }
  return malformed(std::string(what) + " is not a JSON object: " + excerpt(text));
}

/// A member of `obj`: the value when present, nullopt when absent (a validated document
/// has no other failure).
std::optional<dom::element> member(dom::object obj, std::string_view key) {
  dom::element value;
  if (obj.at_key(key).get(value)) {
    return std::nullopt;
  }
  return value;
}

/// A member that must be a string.
std::optional<std::string_view> string_member(dom::object obj, std::string_view key) {
  std::string_view text;
  if (auto v = member(obj, key); v && !v->get_string().get(text)) {
    return text;
  }
  return std::nullopt;
}

/// A member that must be an object.
std::optional<dom::object> object_member(dom::object obj, std::string_view key) {
  dom::object inner;
  if (auto v = member(obj, key); v && !v->get_object().get(inner)) {
    return inner;
  }
  return std::nullopt;
}

// Reads a string or null; false on other types.
bool get_string_or_null(dom::element value, std::string_view& out) {
  if (value.is_null()) {
    out = {};
    return true;
  }
  return !value.get_string().get(out);
}

// Reads a count (a non-negative integer) or null (0); false on other types.
bool get_count(dom::element value, std::uint64_t& out) {
  if (value.is_null()) {
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

bool read_error_object(dom::element value, error_fields& out) {
  dom::object obj;
  if (value.get_object().get(obj)) {
    std::string_view text;
    if (!get_string_or_null(value, text)) {
      return false;
    }
    out.message = text;
    return true;
  }
  for (const auto field : obj) {
    std::string text;
    std::string_view s;
    std::int64_t i = 0;
    std::uint64_t u = 0;
    double d = 0;
    if (!field.value.get_string().get(s)) {
      text = s;
    } else if (!field.value.get_int64().get(i)) {
      text = std::to_string(i);
    } else if (!field.value.get_uint64().get(u)) {
      text = std::to_string(u);
    } else if (!field.value.get_double().get(d)) {
      text = simdjson::to_string(field.value);
    } else {
      continue;
    }
    if (field.key == "message") {
      out.message = std::move(text);
    } else if (field.key == "type") {
      out.type = std::move(text);
    } else if (field.key == "code") {
      out.code = std::move(text);
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

// The error a whole answer carried instead of a completion. One that names neither a
// message nor a type is still an error, and says so (found by fuzz/anthropic_stream:
// `{"type":"error"}` with no error object made an error without a message).
provider_error answer_error(const error_fields& fields) {
  auto e = error_from_fields(0, fields);
  if (e.message.empty()) {
    e.message = "the provider answered with an error it did not describe";
  }
  return e;
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
  dom::element doc;
  dom::object obj;
  bool parsed = false;
  if (!body.empty() && !scratch.parse(body).get(doc) && !doc.get_object().get(obj)) {
    if (auto err = member(obj, oa::error)) {
      parsed = read_error_object(*err, fields);
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
bool read_openai_usage(dom::element value, token_usage& usage, bool& present) {
  if (value.is_null()) {
    return true;
  }
  dom::object obj;
  if (value.get_object().get(obj)) {
    return false;
  }
  present = true;
  for (const auto field : obj) {
    std::uint64_t* target = nullptr;
    if (field.key == oa::prompt_tokens) {
      target = &usage.prompt_tokens;
    } else if (field.key == oa::completion_tokens) {
      target = &usage.completion_tokens;
    } else if (field.key == oa::total_tokens) {
      target = &usage.total_tokens;
    }
    if (target && !get_count(field.value, *target)) {
      return false;
    }
  }
  if (usage.total_tokens == 0) {
    usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
  }
  return true;
}

/// True for the members of a message or delta that carry its text: `content`, and the
/// reasoning under either name.
bool is_text_member(std::string_view key) noexcept {
  return key == oa::content || key == oa::reasoning_content || key == oa::reasoning;
}

/// Appends the text (or reasoning) event of a text member, none when it is empty or null;
/// false when the value is neither a string nor null.
bool append_text(std::string_view key, dom::element value, std::vector<stream_event>& out) {
  std::string_view text;
  if (!get_string_or_null(value, text)) {
    return false;
  }
  if (!text.empty()) {
    auto& e = out.emplace_back();
    e.type =
        key == oa::content ? stream_event::kind::text_delta : stream_event::kind::reasoning_delta;
    e.text.assign(text);
  }
  return true;
}

/// One streamed tool-call fragment, its views into the parser's buffer.
struct call_fragment {
  std::optional<std::uint64_t> index;
  std::string_view id;
  std::string_view name;
  std::string_view arguments;
};

bool read_call_fragment(dom::element value, call_fragment& out) {
  dom::object call;
  if (value.get_object().get(call)) {
    return false;
  }
  for (const auto field : call) {
    if (field.key == oa::index) {
      std::uint64_t i = 0;
      if (!get_count(field.value, i)) {
        return false;
      }
      out.index = i;
    } else if (field.key == oa::id) {
      if (!get_string_or_null(field.value, out.id)) {
        return false;
      }
    } else if (field.key == oa::function) {
      dom::object fn;
      if (field.value.get_object().get(fn)) {
        return false;
      }
      for (const auto f : fn) {
        if (f.key == oa::name) {
          if (!get_string_or_null(f.value, out.name)) {
            return false;
          }
        } else if (f.key == oa::arguments) {
          if (!get_string_or_null(f.value, out.arguments)) {
            return false;
          }
        }
      }
    }
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
  dom::element doc;
  dom::object root;
  if (const auto parsed = json_->parse(data).get(doc); parsed || doc.get_object().get(root)) {
    return not_an_object("a stream chunk", data, parsed);
  }
  const auto bad = [&] {
    return malformed("a stream chunk does not have the chat.completion.chunk shape: " +
                     excerpt(data));
  };
  std::optional<finish_reason> finish;
  token_usage usage;
  bool usage_present = false;
  // Only the two fields that matter are looked up; a chunk's id, model, fingerprint… are
  // not read. A payload without choices may be an error object.
  const auto choices_value = member(root, oa::choices);
  if (!choices_value) {
    if (auto err = member(root, oa::error)) {
      error_fields fields;
      if (!read_error_object(*err, fields)) {
        return bad();
      }
      auto e = error_from_fields(0, fields);
      e.message = "error in stream: " + e.message;
      return tl::unexpected(std::move(e));
    }
  } else if (!choices_value->is_null()) { // vLLM sends choices: null with the usage chunk
    dom::array choices;
    if (choices_value->get_array().get(choices)) {
      return bad();
    }
    for (const auto choice_value : choices) {
      dom::object choice;
      if (choice_value.get_object().get(choice)) {
        return bad();
      }
      std::uint64_t choice_index = 0;
      if (auto index = member(choice, oa::index); index && !get_count(*index, choice_index)) {
        return bad();
      }
      if (choice_index != 0) {
        continue; // n > 1: only the first choice is followed
      }
      if (auto delta_value = member(choice, oa::delta); delta_value && !delta_value->is_null()) {
        dom::object delta;
        if (delta_value->get_object().get(delta)) {
          return bad();
        }
        for (const auto field : delta) {
          if (is_text_member(field.key)) {
            if (!append_text(field.key, field.value, out)) {
              return bad();
            }
          } else if (field.key == oa::tool_calls && !field.value.is_null()) {
            dom::array calls;
            if (field.value.get_array().get(calls)) {
              return bad();
            }
            std::size_t position = 0;
            for (const auto call_value : calls) {
              call_fragment fragment;
              if (!read_call_fragment(call_value, fragment)) {
                return bad();
              }
              // The views point into the parser's buffer, valid until the next parse;
              // copy them now.
              auto& state = call_at(fragment.index.value_or(position));
              const bool fresh = state.id.empty() && state.name.empty();
              if (!fragment.id.empty()) {
                state.id.assign(fragment.id);
              }
              if (!fragment.name.empty()) {
                state.name.assign(fragment.name);
              }
              if (fresh && (!fragment.id.empty() || !fragment.name.empty())) {
                auto& e = out.emplace_back();
                e.type = stream_event::kind::tool_call_start;
                e.index = state.index;
                e.id = state.id;
                e.name = state.name;
              }
              if (!fragment.arguments.empty()) {
                state.arguments.append(fragment.arguments);
                auto& e = out.emplace_back();
                e.type = stream_event::kind::tool_call_delta;
                e.index = state.index;
                e.text.assign(fragment.arguments);
              }
              ++position;
            }
          }
        }
      }
      if (auto reason = member(choice, oa::finish_reason)) {
        std::string_view word;
        if (!get_string_or_null(*reason, word)) {
          return bad();
        }
        if (!word.empty()) {
          finish = parse_openai_finish(word);
        }
      }
    }
  }
  if (auto usage_value = member(root, oa::usage);
      usage_value && !read_openai_usage(*usage_value, usage, usage_present)) {
    return bad();
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
  dom::element doc;
  dom::object root;
  if (const auto parsed = scratch.parse(body).get(doc); parsed || doc.get_object().get(root)) {
    return not_an_object("the answer", body, parsed);
  }
  if (auto err = member(root, oa::error)) {
    error_fields fields;
    read_error_object(*err, fields);
    return tl::unexpected(answer_error(fields));
  }
  dom::array choices;
  if (auto v = member(root, oa::choices); !v || v->get_array().get(choices)) {
    return malformed("the answer has no choices: " + excerpt(body));
  }
  std::optional<finish_reason> finish;
  for (const auto choice_value : choices) {
    dom::object choice;
    if (choice_value.get_object().get(choice)) {
      return malformed("a choice is not an object");
    }
    const auto message = object_member(choice, oa::message);
    if (!message) {
      return malformed("a choice has no message: " + excerpt(body));
    }
    for (const auto field : *message) {
      if (is_text_member(field.key)) {
        if (!append_text(field.key, field.value, out)) {
          return malformed("message content is not a string");
        }
      } else if (field.key == oa::tool_calls && !field.value.is_null()) {
        dom::array calls;
        if (field.value.get_array().get(calls)) {
          return malformed("tool_calls is not an array");
        }
        std::size_t index = 0;
        for (const auto call_value : calls) {
          dom::object call;
          std::optional<std::string_view> id;
          std::optional<dom::object> fn;
          std::optional<std::string_view> name;
          if (call_value.get_object().get(call) || !(id = string_member(call, oa::id)) ||
              !(fn = object_member(call, oa::function)) || !(name = string_member(*fn, oa::name))) {
            return malformed("a tool call lacks id, function or name");
          }
          std::string_view arguments;
          if (auto args = member(*fn, oa::arguments);
              args && !get_string_or_null(*args, arguments)) {
            return malformed("tool call arguments are not a string");
          }
          stream_event start;
          start.type = stream_event::kind::tool_call_start;
          start.index = index;
          start.id.assign(*id);
          start.name.assign(*name);
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
    if (auto word = string_member(choice, oa::finish_reason)) {
      finish = parse_openai_finish(*word);
    }
    break; // only the first choice
  }
  token_usage usage;
  bool usage_present = false;
  if (auto usage_value = member(root, oa::usage);
      usage_value && !read_openai_usage(*usage_value, usage, usage_present)) {
    return malformed("usage is not an object of counts");
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
bool read_anthropic_usage(dom::object obj, token_usage& usage) {
  for (const auto field : obj) {
    std::uint64_t n = 0;
    if (field.key == an::input_tokens) {
      if (!get_count(field.value, n)) {
        return false;
      }
      usage.prompt_tokens = n;
    } else if (field.key == an::output_tokens) {
      if (!get_count(field.value, n)) {
        return false;
      }
      usage.completion_tokens = n;
    }
  }
  usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
  return true;
}

/// A member that must be a non-negative integer.
std::optional<std::uint64_t> index_member(dom::object obj, std::string_view key) {
  std::uint64_t n = 0;
  if (auto v = member(obj, key); v && !v->get_uint64().get(n)) {
    return n;
  }
  return std::nullopt;
}

} // namespace

decode_result anthropic_stream_decoder::decode(std::string_view event, std::string_view data,
                                               std::vector<stream_event>& out) {
  dom::element doc;
  dom::object root;
  if (const auto parsed = json_->parse(data).get(doc); parsed || doc.get_object().get(root)) {
    return not_an_object("an Anthropic event", data, parsed);
  }
  std::string type(event);
  if (auto t = string_member(root, an::type)) {
    type.assign(*t);
  }
  const auto bad_shape = [&] {
    return malformed("an Anthropic '" + type + "' event has an unexpected shape: " + excerpt(data));
  };
  if (type == an::message_start) {
    const auto message = object_member(root, an::message);
    if (!message) {
      return bad_shape();
    }
    if (auto usage = object_member(*message, an::usage)) {
      if (!read_anthropic_usage(*usage, usage_)) {
        return bad_shape();
      }
      auto& e = out.emplace_back();
      e.type = stream_event::kind::usage;
      e.usage = usage_;
    }
  } else if (type == an::content_block_start) {
    const auto index = index_member(root, an::index);
    const auto block = object_member(root, an::content_block);
    const auto block_type = block ? string_member(*block, an::type) : std::nullopt;
    if (!index || !block_type) {
      return bad_shape();
    }
    auto& b = blocks_.emplace_back();
    b.index = *index;
    if (*block_type == an::tool_use_block || *block_type == an::server_tool_use_block) {
      const auto id = string_member(*block, an::id);
      const auto name = string_member(*block, an::name);
      if (!id || !name) {
        return bad_shape();
      }
      b.tool = true;
      b.id.assign(*id);
      b.name.assign(*name);
      auto& e = out.emplace_back();
      e.type = stream_event::kind::tool_call_start;
      e.index = *index;
      e.id = b.id;
      e.name = b.name;
    } else if (*block_type == an::text_block) {
      if (auto text = string_member(*block, an::text); text && !text->empty()) {
        auto& e = out.emplace_back();
        e.type = stream_event::kind::text_delta;
        e.text.assign(*text);
      }
    }
  } else if (type == an::content_block_delta) {
    const auto index = index_member(root, an::index);
    const auto delta = object_member(root, an::delta);
    const auto delta_type = delta ? string_member(*delta, an::type) : std::nullopt;
    if (!index || !delta_type) {
      return bad_shape();
    }
    if (*delta_type == an::text_delta) {
      const auto text = string_member(*delta, an::text);
      if (!text) {
        return bad_shape();
      }
      auto& e = out.emplace_back();
      e.type = stream_event::kind::text_delta;
      e.text.assign(*text);
    } else if (*delta_type == an::thinking_delta) {
      const auto text = string_member(*delta, an::thinking);
      if (!text) {
        return bad_shape();
      }
      auto& e = out.emplace_back();
      e.type = stream_event::kind::reasoning_delta;
      e.text.assign(*text);
    } else if (*delta_type == an::input_json_delta) {
      const auto text = string_member(*delta, an::partial_json);
      if (!text) {
        return bad_shape();
      }
      auto* b = block_at(*index);
      if (b == nullptr || !b->tool) {
        return malformed("input_json_delta for block " + std::to_string(*index) +
                         ", which is not an open tool_use block");
      }
      b->input.append(*text);
      if (!text->empty()) {
        auto& e = out.emplace_back();
        e.type = stream_event::kind::tool_call_delta;
        e.index = *index;
        e.text.assign(*text);
      }
    }
    // signature_delta, citations_delta and future delta types carry nothing we keep.
  } else if (type == an::content_block_stop) {
    const auto index = index_member(root, an::index);
    if (!index) {
      return bad_shape();
    }
    auto* b = block_at(*index);
    if (b != nullptr && b->tool && !b->completed) {
      b->completed = true;
      auto& e = out.emplace_back();
      e.type = stream_event::kind::tool_call_complete;
      e.index = *index;
      e.id = b->id;
      e.name = b->name;
      e.text = b->input.empty() ? "{}" : b->input;
    }
  } else if (type == an::message_delta) {
    std::optional<finish_reason> finish;
    if (auto delta = object_member(root, an::delta)) {
      if (auto stop = member(*delta, an::stop_reason)) {
        std::string_view word;
        if (!get_string_or_null(*stop, word)) {
          return bad_shape();
        }
        if (!word.empty()) {
          finish = parse_anthropic_stop(word);
        }
      }
    }
    if (auto usage = object_member(root, an::usage)) {
      // Cumulative: the counts replace the earlier ones.
      if (!read_anthropic_usage(*usage, usage_)) {
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
    error_fields fields;
    auto err = member(root, an::error);
    if (!err || !read_error_object(*err, fields)) {
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
  dom::element doc;
  dom::object root;
  if (const auto parsed = scratch.parse(body).get(doc); parsed || doc.get_object().get(root)) {
    return not_an_object("the answer", body, parsed);
  }
  if (auto type = string_member(root, an::type); type && *type == an::error_event) {
    error_fields fields;
    if (auto err = member(root, an::error)) {
      read_error_object(*err, fields);
    }
    return tl::unexpected(answer_error(fields));
  }
  dom::array content;
  if (auto v = member(root, an::content); !v || v->get_array().get(content)) {
    return malformed("the answer has no content array: " + excerpt(body));
  }
  std::size_t index = 0;
  for (const auto block_value : content) {
    dom::object block;
    std::optional<std::string_view> block_type;
    if (block_value.get_object().get(block) || !(block_type = string_member(block, an::type))) {
      return malformed("a content block has no type");
    }
    if (*block_type == an::text_block) {
      const auto text = string_member(block, an::text);
      if (!text) {
        return malformed("a text block has no text");
      }
      auto& e = out.emplace_back();
      e.type = stream_event::kind::text_delta;
      e.text.assign(*text);
    } else if (*block_type == an::thinking_block) {
      if (auto text = string_member(block, an::thinking)) {
        auto& e = out.emplace_back();
        e.type = stream_event::kind::reasoning_delta;
        e.text.assign(*text);
      }
    } else if (*block_type == an::tool_use_block) {
      const auto id = string_member(block, an::id);
      const auto name = string_member(block, an::name);
      const auto input = member(block, an::input);
      if (!id || !name || !input) {
        return malformed("a tool_use block lacks id, name or input");
      }
      if (!input->is_object()) {
        return malformed("a tool_use input is not valid JSON");
      }
      stream_event start;
      start.type = stream_event::kind::tool_call_start;
      start.index = index;
      start.id.assign(*id);
      start.name.assign(*name);
      stream_event done = start;
      done.type = stream_event::kind::tool_call_complete;
      done.text = simdjson::minify(*input);
      out.push_back(std::move(start));
      out.push_back(std::move(done));
    }
    ++index;
  }
  if (auto stop = string_member(root, an::stop_reason)) {
    auto& e = out.emplace_back();
    e.type = stream_event::kind::finish;
    e.reason = parse_anthropic_stop(*stop);
  }
  if (auto usage = object_member(root, an::usage)) {
    token_usage counts;
    if (read_anthropic_usage(*usage, counts)) {
      auto& e = out.emplace_back();
      e.type = stream_event::kind::usage;
      e.usage = counts;
    }
  }
  return {};
}

std::string_view json_kernel_name() noexcept {
  return simdjson::get_active_implementation()->name();
}

tl::expected<std::vector<std::string>, provider_error> parse_model_list(std::string_view body) {
  json_scratch scratch;
  dom::element doc;
  dom::object root;
  dom::array data;
  if (scratch.parse(body).get(doc) || doc.get_object().get(root) ||
      root.at_key(oa::data).get_array().get(data)) {
    return malformed("the model list is not {\"data\":[…]}: " + excerpt(body));
  }
  std::vector<std::string> ids;
  for (const auto item : data) {
    dom::object obj;
    std::optional<std::string_view> id;
    if (item.get_object().get(obj) || !(id = string_member(obj, oa::id))) {
      return malformed("a model entry has no id");
    }
    ids.emplace_back(*id);
  }
  return ids;
}

} // namespace troupe::net

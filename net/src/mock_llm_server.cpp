#include "troupe/net/mock_llm_server.hpp"

#include <charconv>
#include <ctime>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <simdjson.h>

#include "troupe/runtime/json_writer.hpp"

namespace troupe::net {

namespace dom = simdjson::dom;

namespace {

enum class wire { openai, anthropic };

std::optional<unsigned> parse_unsigned(std::string_view text) {
  unsigned value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || ptr != text.data() + text.size() || text.empty()) {
    return std::nullopt;
  }
  return value;
}

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  for (;;) {
    const auto at = text.find(sep);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) {
      return parts;
    }
    text.remove_prefix(at + 1);
  }
}

} // namespace

expected<mock_fault> parse_mock_fault(std::string_view spec) {
  const auto parts = split(spec, ':');
  mock_fault f;
  const auto name = parts[0];
  auto number = [&](std::size_t i, unsigned& out) -> bool {
    if (parts.size() <= i) {
      return true;
    }
    auto v = parse_unsigned(parts[i]);
    if (!v) {
      return false;
    }
    out = *v;
    return true;
  };
  bool ok = true;
  if (name == "429") {
    f.type = mock_fault::kind::rate_limit;
    ok = number(1, f.retry_after_s);
  } else if (name == "500") {
    f.type = mock_fault::kind::server_error;
  } else if (name == "401") {
    f.type = mock_fault::kind::auth;
  } else if (name == "reset") {
    f.type = mock_fault::kind::reset;
    ok = number(1, f.after_chunks);
  } else if (name == "malformed") {
    f.type = mock_fault::kind::malformed;
    ok = number(1, f.after_chunks);
  } else if (name == "stall") {
    f.type = mock_fault::kind::stall;
    f.after_chunks = 1;
    ok = parts.size() >= 2 && number(1, f.stall_ms) && number(2, f.after_chunks);
  } else if (name == "no-done") {
    f.type = mock_fault::kind::no_done;
  } else if (name == "split") {
    f.type = mock_fault::kind::split;
    ok = number(1, f.split_bytes) && f.split_bytes > 0;
  } else if (name.empty() || name == "none") {
    f.type = mock_fault::kind::none;
  } else {
    ok = false;
  }
  if (!ok) {
    return fail(errc::invalid_argument,
                "bad mock fault '" + std::string(spec) +
                    "' (expected 429[:S], 500, 401, reset[:N], malformed[:N], stall:MS[:N], "
                    "no-done or split[:BYTES])");
  }
  return f;
}

// --- script ----------------------------------------------------------------------------------

namespace {

expected<mock_rule> parse_rule(dom::element e) {
  mock_rule rule;
  dom::object obj;
  if (e.get_object().get(obj)) {
    return fail(errc::invalid_argument, "a mock rule is not a JSON object");
  }
  const auto uint_field = [](dom::object o, std::string_view key,
                             std::optional<unsigned>& out) -> bool {
    dom::element v;
    if (o.at_key(key).get(v)) {
      return true;
    }
    std::uint64_t n = 0;
    if (v.get_uint64().get(n) || n > 1'000'000'000) {
      return false;
    }
    out = static_cast<unsigned>(n);
    return true;
  };
  dom::object match;
  if (!obj.at_key("match").get_object().get(match)) {
    std::string_view s;
    if (!match.at_key("user").get_string().get(s)) {
      rule.user_contains = std::string(s);
    }
    if (!match.at_key("prompt").get_string().get(s)) {
      rule.prompt_contains = std::string(s);
    }
    bool b = false;
    if (!match.at_key("has_tool_result").get_bool().get(b)) {
      rule.has_tool_result = b;
    }
    std::uint64_t n = 0;
    if (!match.at_key("call").get_uint64().get(n)) {
      rule.call = n;
    }
    if (!match.at_key("max_call").get_uint64().get(n)) {
      rule.max_call = n;
    }
  }
  dom::object reply;
  if (!obj.at_key("reply").get_object().get(reply)) {
    std::string_view s;
    if (!reply.at_key("text").get_string().get(s)) {
      rule.text = std::string(s);
    }
    if (!reply.at_key("finish_reason").get_string().get(s)) {
      if (s == "stop") {
        rule.finish = finish_reason::stop;
      } else if (s == "length") {
        rule.finish = finish_reason::length;
      } else if (s == "content_filter") {
        rule.finish = finish_reason::content_filter;
      } else if (s == "tool_calls") {
        rule.finish = finish_reason::tool_calls;
      } else {
        return fail(errc::invalid_argument, "unknown finish_reason '" + std::string(s) + "'");
      }
    }
    dom::array calls;
    if (!reply.at_key("tool_calls").get_array().get(calls)) {
      for (dom::element c : calls) {
        tool_call call;
        std::string_view name;
        if (c.at_key("name").get_string().get(name)) {
          return fail(errc::invalid_argument, "a scripted tool call has no name");
        }
        call.name = std::string(name);
        dom::element args;
        if (!c.at_key("arguments").get(args)) {
          std::string_view text;
          if (!args.get_string().get(text)) {
            call.arguments = std::string(text);
          } else {
            call.arguments = simdjson::minify(args);
          }
        } else {
          call.arguments = "{}";
        }
        std::string_view id;
        if (!c.at_key("id").get_string().get(id)) {
          call.id = std::string(id);
        }
        rule.tool_calls.push_back(std::move(call));
      }
    }
  }
  if (!uint_field(obj, "tokens", rule.knobs.tokens) ||
      !uint_field(obj, "ttft_ms", rule.knobs.ttft_ms) ||
      !uint_field(obj, "token_delay_ms", rule.knobs.token_delay_ms) ||
      !uint_field(obj, "chunk_tokens", rule.knobs.chunk_tokens) ||
      !uint_field(obj, "argument_fragment_bytes", rule.knobs.argument_fragment_bytes)) {
    return fail(errc::invalid_argument, "a mock rule knob is not a non-negative integer");
  }
  std::string_view fault;
  if (!obj.at_key("fault").get_string().get(fault)) {
    auto f = parse_mock_fault(fault);
    if (!f) {
      return tl::unexpected(f.error());
    }
    rule.fault = *f;
  }
  return rule;
}

} // namespace

expected<std::vector<mock_rule>> parse_mock_script(std::string_view text) {
  dom::parser parser;
  std::vector<mock_rule> rules;
  auto add_all = [&](dom::array array) -> expected<void> {
    for (dom::element e : array) {
      auto rule = parse_rule(e);
      if (!rule) {
        return tl::unexpected(rule.error());
      }
      rules.push_back(std::move(*rule));
    }
    return {};
  };
  dom::element root;
  if (!parser.parse(simdjson::padded_string(text)).get(root)) {
    dom::array array;
    dom::object obj;
    if (!root.get_array().get(array)) {
      if (auto ok = add_all(array); !ok) {
        return tl::unexpected(ok.error());
      }
      return rules;
    }
    if (!root.get_object().get(obj) && !obj.at_key("rules").get_array().get(array)) {
      if (auto ok = add_all(array); !ok) {
        return tl::unexpected(ok.error());
      }
      return rules;
    }
  }
  // JSONL: one rule per non-empty line.
  std::size_t line_number = 0;
  for (auto line : split(text, '\n')) {
    ++line_number;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) {
      line.remove_suffix(1);
    }
    if (line.empty() || line.front() == '#') {
      continue;
    }
    dom::element e;
    if (parser.parse(simdjson::padded_string(line)).get(e)) {
      return fail(errc::parse_error,
                  "mock script line " + std::to_string(line_number) + " is not valid JSON");
    }
    auto rule = parse_rule(e);
    if (!rule) {
      return fail(errc::invalid_argument,
                  "mock script line " + std::to_string(line_number) + ": " + rule.error().message);
    }
    rules.push_back(std::move(*rule));
  }
  return rules;
}

// --- server ----------------------------------------------------------------------------------

struct mock_llm_server::state {
  explicit state(mock_llm_options o) : options(std::move(o)) {}
  mock_llm_options options;
  http_server* server = nullptr;
  std::atomic<std::uint64_t> requests{0};
  std::atomic<std::uint64_t> calls{0};
  std::atomic<std::uint64_t> openai{0};
  std::atomic<std::uint64_t> anthropic{0};
  std::atomic<std::uint64_t> faults{0};
  std::atomic<std::uint64_t> started{0};
  std::atomic<std::uint64_t> completed{0};
  std::atomic<std::uint64_t> abandoned{0};
  std::atomic<std::uint64_t> chunks{0};
  std::atomic<std::int64_t> active{0};
};

namespace {

using state_ptr = std::shared_ptr<mock_llm_server::state>;

struct parsed_request {
  std::string model;
  bool stream = false;
  bool include_usage = false;
  std::optional<std::uint64_t> max_tokens;
  std::string last_user;
  /// Every message's text, joined by newlines (for `prompt` matches).
  std::string all_text;
  bool has_tool_result = false;
  std::vector<std::string> tool_names;
  std::size_t prompt_chars = 0;
};

// Text of a message's content: a string, or the text blocks of an array.
std::string content_text(dom::element content, bool& tool_result) {
  std::string_view s;
  if (!content.get_string().get(s)) {
    return std::string(s);
  }
  std::string out;
  dom::array blocks;
  if (!content.get_array().get(blocks)) {
    for (dom::element b : blocks) {
      std::string_view type;
      if (b.at_key("type").get_string().get(type)) {
        continue;
      }
      if (type == "tool_result") {
        tool_result = true;
      } else if (type == "text" && !b.at_key("text").get_string().get(s)) {
        out += s;
      }
    }
  }
  return out;
}

expected<parsed_request> parse_request(std::string_view body) {
  thread_local dom::parser parser;
  dom::element root;
  if (parser.parse(body.data(), body.size(), true).get(root)) {
    return fail(errc::parse_error, "the request body is not valid JSON");
  }
  parsed_request r;
  std::string_view s;
  if (root.at_key("model").get_string().get(s)) {
    return fail(errc::invalid_argument, "the request has no model");
  }
  r.model = std::string(s);
  bool b = false;
  if (!root.at_key("stream").get_bool().get(b)) {
    r.stream = b;
  }
  if (!root.at_pointer("/stream_options/include_usage").get_bool().get(b)) {
    r.include_usage = b;
  }
  std::uint64_t n = 0;
  if (!root.at_key("max_tokens").get_uint64().get(n) ||
      !root.at_key("max_completion_tokens").get_uint64().get(n)) {
    r.max_tokens = n;
  }
  if (!root.at_key("system").get_string().get(s)) {
    r.prompt_chars += s.size();
  }
  dom::array messages;
  if (root.at_key("messages").get_array().get(messages)) {
    return fail(errc::invalid_argument, "the request has no messages array");
  }
  for (dom::element m : messages) {
    std::string_view role;
    if (m.at_key("role").get_string().get(role)) {
      return fail(errc::invalid_argument, "a message has no role");
    }
    bool tool_result = role == "tool";
    dom::element content;
    std::string text;
    if (!m.at_key("content").get(content)) {
      text = content_text(content, tool_result);
    }
    r.prompt_chars += text.size();
    r.all_text += text;
    r.all_text += '\n';
    r.has_tool_result = r.has_tool_result || tool_result;
    if (role == "user" && !text.empty()) {
      r.last_user = std::move(text);
    }
  }
  dom::array tools;
  if (!root.at_key("tools").get_array().get(tools)) {
    for (dom::element t : tools) {
      if (!t.at_pointer("/function/name").get_string().get(s) ||
          !t.at_key("name").get_string().get(s)) {
        r.tool_names.emplace_back(s);
      }
    }
  }
  return r;
}

const mock_rule* find_rule(const mock_llm_options& options, const parsed_request& r,
                           std::uint64_t call) {
  for (const auto& rule : options.rules) {
    if (rule.user_contains && r.last_user.find(*rule.user_contains) == std::string::npos) {
      continue;
    }
    if (rule.prompt_contains && r.all_text.find(*rule.prompt_contains) == std::string::npos) {
      continue;
    }
    if (rule.has_tool_result && *rule.has_tool_result != r.has_tool_result) {
      continue;
    }
    if (rule.call && *rule.call != call) {
      continue;
    }
    if (rule.max_call && call > *rule.max_call) {
      continue;
    }
    return &rule;
  }
  return nullptr;
}

unsigned knob(const http_request& req, std::string_view header, std::optional<unsigned> rule_value,
              unsigned fallback) {
  if (auto v = parse_unsigned(req.header(header))) {
    return *v;
  }
  return rule_value.value_or(fallback);
}

/// Everything needed to write one answer.
struct answer_plan {
  wire format = wire::openai;
  std::string model;
  std::uint64_t call = 0;
  bool include_usage = false;
  std::string text;
  std::vector<std::size_t> chunk_ends; // end offsets of the text chunks
  std::vector<tool_call> calls;
  finish_reason finish = finish_reason::stop;
  std::uint64_t prompt_tokens = 0;
  std::uint64_t completion_tokens = 0;
  unsigned fragment_bytes = 8;
};

constexpr std::string_view filler[] = {"alpha",   "bravo", "charlie", "delta", "echo",
                                       "foxtrot", "golf",  "hotel",   "india", "juliet"};

answer_plan make_plan(const mock_llm_options& options, const parsed_request& r,
                      const mock_rule* rule, const http_request& req, wire format,
                      std::uint64_t call) {
  answer_plan p;
  p.format = format;
  p.model = r.model.empty() ? options.model : r.model;
  p.call = call;
  p.include_usage = format == wire::anthropic || r.include_usage;
  const mock_knobs none;
  const auto& k = rule ? rule->knobs : none;
  const unsigned tokens = knob(req, "X-Mock-Tokens", k.tokens, options.tokens);
  const unsigned chunk =
      std::max(1u, knob(req, "X-Mock-Chunk-Tokens", k.chunk_tokens, options.chunk_tokens));
  p.fragment_bytes = std::max(1u, knob(req, "X-Mock-Argument-Fragment-Bytes",
                                       k.argument_fragment_bytes, options.argument_fragment_bytes));
  p.prompt_tokens = r.prompt_chars / 4 + 1;

  std::vector<std::string_view> words;
  std::string head;
  if (rule && !rule->tool_calls.empty()) {
    p.calls = rule->tool_calls;
  } else if (!rule || (!rule->text && rule->tool_calls.empty())) {
    // Default mode: call a tool the user names, once, while no tool result is present.
    if (!r.has_tool_result && !(rule && rule->text)) {
      for (const auto& name : r.tool_names) {
        if (!name.empty() && r.last_user.find(name) != std::string::npos) {
          std::string args = "{\"query\":";
          append_json_string(args, r.last_user.substr(0, 200));
          args += "}";
          p.calls.push_back({"", name, std::move(args)});
          break;
        }
      }
    }
  }
  for (std::size_t i = 0; i < p.calls.size(); ++i) {
    if (p.calls[i].id.empty()) {
      p.calls[i].id = (format == wire::openai ? "call_mock_" : "toolu_mock_") +
                      std::to_string(call) + "_" + std::to_string(i);
    }
  }
  if (p.calls.empty()) {
    if (rule && rule->text) {
      p.text = *rule->text;
    } else {
      head = "mock-llm reply " + std::to_string(call) +
             " to: " + r.last_user.substr(0, std::min<std::size_t>(r.last_user.size(), 40));
      p.text.reserve(head.size() + tokens * 8);
      std::size_t count = 0;
      for (auto w : split(head, ' ')) {
        if (count == tokens) {
          break;
        }
        if (!w.empty()) {
          p.text.append(count == 0 ? "" : " ").append(w);
          ++count;
        }
      }
      for (std::size_t i = 0; count < tokens; ++i, ++count) {
        p.text.append(count == 0 ? "" : " ").append(filler[i % std::size(filler)]);
      }
    }
    // Tokens are words with the space before them; chunks are `chunk` tokens.
    std::size_t in_chunk = 0;
    std::size_t words_total = 0;
    for (std::size_t i = 1; i <= p.text.size(); ++i) {
      if (i == p.text.size() || p.text[i] == ' ') {
        ++words_total;
        if (++in_chunk == chunk || i == p.text.size()) {
          p.chunk_ends.push_back(i);
          in_chunk = 0;
        }
      }
    }
    p.completion_tokens = words_total;
    p.finish = finish_reason::stop;
    if (r.max_tokens && *r.max_tokens < words_total) {
      // Honour max_tokens like a real model: cut and report length.
      std::size_t kept = 0;
      std::size_t cut = 0;
      std::size_t cut_chunks = 0;
      for (std::size_t i = 1; i <= p.text.size() && kept < *r.max_tokens; ++i) {
        if (i == p.text.size() || p.text[i] == ' ') {
          ++kept;
          cut = i;
        }
      }
      p.text.resize(cut);
      while (cut_chunks < p.chunk_ends.size() && p.chunk_ends[cut_chunks] < cut) {
        ++cut_chunks;
      }
      p.chunk_ends.resize(cut_chunks);
      p.chunk_ends.push_back(cut);
      p.completion_tokens = kept;
      p.finish = finish_reason::length;
    }
  } else {
    p.finish = finish_reason::tool_calls;
    std::size_t bytes = 0;
    for (const auto& c : p.calls) {
      bytes += c.arguments.size() + c.name.size();
    }
    p.completion_tokens = bytes / 4 + 1;
  }
  if (rule && rule->finish) {
    p.finish = *rule->finish;
  }
  return p;
}

std::string_view anthropic_stop(finish_reason r) {
  switch (r) {
    case finish_reason::length:
      return "max_tokens";
    case finish_reason::tool_calls:
      return "tool_use";
    case finish_reason::content_filter:
      return "refusal";
    default:
      return "end_turn";
  }
}

std::string_view text_chunk(const answer_plan& p, std::size_t i) {
  const std::size_t begin = i == 0 ? 0 : p.chunk_ends[i - 1];
  return std::string_view(p.text).substr(begin, p.chunk_ends[i] - begin);
}

// Argument fragments of every call, round-robin across calls so that parallel calls
// interleave on the wire (OpenAI only; Anthropic blocks are sequential).
std::vector<std::pair<std::size_t, std::string_view>> fragments(const answer_plan& p,
                                                                bool interleave) {
  std::vector<std::pair<std::size_t, std::string_view>> out;
  std::vector<std::size_t> at(p.calls.size(), 0);
  bool more = true;
  while (more) {
    more = false;
    for (std::size_t c = 0; c < p.calls.size(); ++c) {
      const auto& args = p.calls[c].arguments;
      while (at[c] < args.size()) {
        out.emplace_back(c, std::string_view(args).substr(at[c], p.fragment_bytes));
        at[c] += p.fragment_bytes;
        more = true;
        if (interleave) {
          break;
        }
      }
    }
  }
  return out;
}

std::vector<std::string> openai_events(const answer_plan& p) {
  std::vector<std::string> events;
  std::string prefix =
      "data: {\"id\":\"chatcmpl-mock-" + std::to_string(p.call) +
      "\",\"object\":\"chat.completion.chunk\",\"created\":" + std::to_string(std::time(nullptr)) +
      ",\"model\":";
  append_json_string(prefix, p.model);
  const std::string usage_prefix = prefix + ",\"choices\":[],\"usage\":";
  prefix += ",\"choices\":[{\"index\":0,\"delta\":";
  constexpr std::string_view open_suffix = ",\"finish_reason\":null}]}\n\n";
  events.reserve(p.chunk_ends.size() + p.calls.size() * 4 + 4);
  events.push_back(prefix + "{\"role\":\"assistant\",\"content\":\"\"}" + std::string(open_suffix));
  for (std::size_t i = 0; i < p.chunk_ends.size(); ++i) {
    std::string e;
    e.reserve(prefix.size() + 64);
    e.append(prefix).append("{\"content\":");
    append_json_string(e, text_chunk(p, i));
    e.append("}").append(open_suffix);
    events.push_back(std::move(e));
  }
  for (std::size_t c = 0; c < p.calls.size(); ++c) {
    std::string e = prefix + "{\"tool_calls\":[{\"index\":" + std::to_string(c) + ",\"id\":";
    append_json_string(e, p.calls[c].id);
    e += ",\"type\":\"function\",\"function\":{\"name\":";
    append_json_string(e, p.calls[c].name);
    e += ",\"arguments\":\"\"}}]}";
    e += open_suffix;
    events.push_back(std::move(e));
  }
  for (const auto& [c, piece] : fragments(p, true)) {
    std::string e = prefix + "{\"tool_calls\":[{\"index\":" + std::to_string(c) +
                    ",\"function\":{\"arguments\":";
    append_json_string(e, piece);
    e += "}}]}";
    e += open_suffix;
    events.push_back(std::move(e));
  }
  events.push_back(prefix + "{},\"finish_reason\":\"" + std::string(to_string(p.finish)) +
                   "\"}]}\n\n");
  if (p.include_usage) {
    events.push_back(usage_prefix + "{\"prompt_tokens\":" + std::to_string(p.prompt_tokens) +
                     ",\"completion_tokens\":" + std::to_string(p.completion_tokens) +
                     ",\"total_tokens\":" + std::to_string(p.prompt_tokens + p.completion_tokens) +
                     "}}\n\n");
  }
  events.emplace_back("data: [DONE]\n\n");
  return events;
}

std::string anthropic_event(std::string_view name, std::string_view data) {
  std::string e;
  e.reserve(name.size() + data.size() + 16);
  e.append("event: ").append(name).append("\ndata: ").append(data).append("\n\n");
  return e;
}

std::vector<std::string> anthropic_events(const answer_plan& p) {
  std::vector<std::string> events;
  std::string start = "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_mock_" +
                      std::to_string(p.call) +
                      "\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":";
  append_json_string(start, p.model);
  start += ",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":" +
           std::to_string(p.prompt_tokens) + ",\"output_tokens\":1}}}";
  events.push_back(anthropic_event("message_start", start));
  std::size_t index = 0;
  if (!p.chunk_ends.empty()) {
    events.push_back(anthropic_event(
        "content_block_start",
        R"({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})"));
    for (std::size_t i = 0; i < p.chunk_ends.size(); ++i) {
      std::string d =
          R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":)";
      append_json_string(d, text_chunk(p, i));
      d += "}}";
      events.push_back(anthropic_event("content_block_delta", d));
    }
    events.push_back(
        anthropic_event("content_block_stop", R"({"type":"content_block_stop","index":0})"));
    index = 1;
  }
  const auto pieces = fragments(p, false);
  for (std::size_t c = 0; c < p.calls.size(); ++c, ++index) {
    const auto i = std::to_string(index);
    std::string s = "{\"type\":\"content_block_start\",\"index\":" + i +
                    ",\"content_block\":{\"type\":\"tool_use\",\"id\":";
    append_json_string(s, p.calls[c].id);
    s += ",\"name\":";
    append_json_string(s, p.calls[c].name);
    s += ",\"input\":{}}}";
    events.push_back(anthropic_event("content_block_start", s));
    for (const auto& [call, piece] : pieces) {
      if (call != c) {
        continue;
      }
      std::string d = "{\"type\":\"content_block_delta\",\"index\":" + i +
                      ",\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":";
      append_json_string(d, piece);
      d += "}}";
      events.push_back(anthropic_event("content_block_delta", d));
    }
    events.push_back(anthropic_event("content_block_stop",
                                     "{\"type\":\"content_block_stop\",\"index\":" + i + "}"));
  }
  events.push_back(anthropic_event("message_delta",
                                   "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"" +
                                       std::string(anthropic_stop(p.finish)) +
                                       "\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":" +
                                       std::to_string(p.completion_tokens) + "}}"));
  events.push_back(anthropic_event("message_stop", R"({"type":"message_stop"})"));
  return events;
}

std::string openai_body(const answer_plan& p) {
  json_writer w;
  w.begin_object();
  w.key("id").value("chatcmpl-mock-" + std::to_string(p.call));
  w.key("object").value("chat.completion");
  w.key("created").value(static_cast<std::int64_t>(std::time(nullptr)));
  w.key("model").value(p.model);
  w.key("choices").begin_array().begin_object();
  w.key("index").value(0);
  w.key("message").begin_object();
  w.key("role").value("assistant");
  w.key("content");
  if (p.text.empty()) {
    w.value(nullptr);
  } else {
    w.value(p.text);
  }
  if (!p.calls.empty()) {
    w.key("tool_calls").begin_array();
    for (const auto& c : p.calls) {
      w.begin_object().key("id").value(c.id).key("type").value("function");
      w.key("function").begin_object().key("name").value(c.name);
      w.key("arguments").value(c.arguments).end_object().end_object();
    }
    w.end_array();
  }
  w.end_object();
  w.key("finish_reason").value(to_string(p.finish));
  w.end_object().end_array();
  w.key("usage").begin_object();
  w.key("prompt_tokens").value(p.prompt_tokens);
  w.key("completion_tokens").value(p.completion_tokens);
  w.key("total_tokens").value(p.prompt_tokens + p.completion_tokens);
  w.end_object();
  w.end_object();
  return std::move(w).str();
}

std::string anthropic_body(const answer_plan& p) {
  json_writer w;
  w.begin_object();
  w.key("id").value("msg_mock_" + std::to_string(p.call));
  w.key("type").value("message");
  w.key("role").value("assistant");
  w.key("model").value(p.model);
  w.key("content").begin_array();
  if (!p.text.empty()) {
    w.begin_object().key("type").value("text").key("text").value(p.text).end_object();
  }
  for (const auto& c : p.calls) {
    w.begin_object().key("type").value("tool_use").key("id").value(c.id);
    w.key("name").value(c.name).key("input").raw(c.arguments).end_object();
  }
  w.end_array();
  w.key("stop_reason").value(anthropic_stop(p.finish));
  w.key("stop_sequence").value(nullptr);
  w.key("usage").begin_object();
  w.key("input_tokens").value(p.prompt_tokens);
  w.key("output_tokens").value(p.completion_tokens);
  w.end_object();
  w.end_object();
  return std::move(w).str();
}

http_response fault_response(wire format, unsigned status, std::string_view type,
                             std::string_view message) {
  json_writer w;
  w.begin_object();
  if (format == wire::anthropic) {
    w.key("type").value("error");
    w.key("error").begin_object().key("type").value(type).key("message").value(message);
    w.end_object();
  } else {
    w.key("error").begin_object().key("message").value(message).key("type").value(type);
    w.key("code").value(type).end_object();
  }
  w.end_object();
  return http_response::json(status, std::move(w).str());
}

asio::awaitable<void> sleep_ms(unsigned ms) {
  if (ms == 0) {
    co_return;
  }
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_after(std::chrono::milliseconds(ms));
  co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
}

// Writes a prepared answer as a stream, injecting the fault.
asio::awaitable<void> pump_answer(state_ptr st, response_stream out,
                                  std::vector<std::string> events, unsigned ttft_ms,
                                  unsigned delay_ms, mock_fault fault) {
  st->started.fetch_add(1, std::memory_order_relaxed);
  st->active.fetch_add(1, std::memory_order_relaxed);
  bool abandoned = false;
  if (fault.type == mock_fault::kind::no_done) {
    events.pop_back(); // [DONE] or message_stop
  }
  co_await sleep_ms(ttft_ms);
  std::string batch;
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (i == fault.after_chunks) {
      if (fault.type == mock_fault::kind::reset) {
        // Let the chunks already queued reach the client, then reset the connection: the
        // server drops a stream's queue on abort.
        co_await sleep_ms(20);
        out.abort();
        abandoned = true; // counted as a fault, not as a completed stream
        break;
      }
      if (fault.type == mock_fault::kind::malformed) {
        std::string broken = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tru\n\n";
        co_await out.write(std::move(broken));
      }
      if (fault.type == mock_fault::kind::stall) {
        co_await sleep_ms(fault.stall_ms);
      }
    }
    bool ok = true;
    if (fault.type == mock_fault::kind::split) {
      const std::string_view all = events[i];
      for (std::size_t at = 0; at < all.size() && ok; at += fault.split_bytes) {
        std::string piece(all.substr(at, fault.split_bytes));
        ok = co_await out.write(std::move(piece));
        co_await sleep_ms(1); // so that the pieces leave as separate writes
      }
    } else if (delay_ms == 0) {
      // Without pacing, events are coalesced into writes of up to 4 KiB, as a busy server's
      // socket would coalesce them; each stays its own SSE event.
      batch.append(events[i]);
      const bool fault_next = i + 1 == fault.after_chunks && fault.type != mock_fault::kind::none;
      if (batch.size() >= 4096 || i + 1 == events.size() || fault_next) {
        ok = co_await out.write(std::move(batch));
        batch = std::string();
      }
    } else {
      ok = co_await out.write(std::move(events[i]));
    }
    if (!ok) {
      abandoned = true;
      st->abandoned.fetch_add(1, std::memory_order_relaxed);
      break;
    }
    st->chunks.fetch_add(1, std::memory_order_relaxed);
    if (delay_ms > 0 && i + 1 < events.size()) {
      co_await sleep_ms(delay_ms);
    }
  }
  if (!abandoned) {
    out.finish();
    st->completed.fetch_add(1, std::memory_order_relaxed);
  }
  st->active.fetch_sub(1, std::memory_order_relaxed);
}

asio::awaitable<http_response> answer(request_context& ctx, state_ptr st, wire format) {
  st->requests.fetch_add(1, std::memory_order_relaxed);
  (format == wire::openai ? st->openai : st->anthropic).fetch_add(1, std::memory_order_relaxed);
  const auto call = st->calls.fetch_add(1) + 1;
  auto parsed = parse_request(ctx.request().body);
  if (!parsed) {
    co_return fault_response(format, 400, "invalid_request_error",
                             "mock-llm: " + parsed.error().message);
  }
  const auto& options = st->options;
  const mock_rule* rule = find_rule(options, *parsed, call);
  mock_fault fault = rule ? rule->fault : mock_fault{};
  if (const auto spec = ctx.request().header("X-Mock-Fault"); !spec.empty()) {
    auto f = parse_mock_fault(spec);
    if (!f) {
      co_return fault_response(format, 400, "invalid_request_error",
                               "mock-llm: " + f.error().message);
    }
    fault = *f;
  }
  if (auto until = parse_unsigned(ctx.request().header("X-Mock-Fault-Until"))) {
    fault.until_call = *until;
  }
  if (fault.until_call != 0 && call > fault.until_call) {
    fault.type = mock_fault::kind::none;
  }
  if (fault.type != mock_fault::kind::none) {
    st->faults.fetch_add(1, std::memory_order_relaxed);
  }
  switch (fault.type) {
    case mock_fault::kind::rate_limit: {
      auto r = fault_response(format, 429, "rate_limit_error",
                              "mock-llm: rate limited (injected fault)");
      r.headers.push_back({"retry-after", std::to_string(fault.retry_after_s)});
      co_return r;
    }
    case mock_fault::kind::server_error:
      co_return fault_response(format, 500, format == wire::openai ? "server_error" : "api_error",
                               "mock-llm: internal error (injected fault)");
    case mock_fault::kind::auth:
      co_return fault_response(format, 401, "authentication_error",
                               "mock-llm: invalid API key (injected fault)");
    default:
      break;
  }
  const mock_knobs none;
  const auto& k = rule ? rule->knobs : none;
  const auto& req = ctx.request();
  const unsigned ttft = knob(req, "X-Mock-TTFT-Ms", k.ttft_ms, options.ttft_ms);
  const unsigned delay =
      knob(req, "X-Mock-Token-Delay-Ms", k.token_delay_ms, options.token_delay_ms);
  auto plan = make_plan(options, *parsed, rule, req, format, call);
  if (!parsed->stream) {
    co_await sleep_ms(ttft);
    co_return http_response::json(200, format == wire::openai ? openai_body(plan)
                                                              : anthropic_body(plan));
  }
  auto events = format == wire::openai ? openai_events(plan) : anthropic_events(plan);
  auto stream = ctx.begin_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
  asio::co_spawn(ctx.executor(),
                 pump_answer(st, std::move(stream), std::move(events), ttft, delay, fault),
                 asio::detached);
  co_return http_response{};
}

asio::awaitable<http_response> list_models(state_ptr st) {
  st->requests.fetch_add(1, std::memory_order_relaxed);
  json_writer w;
  w.begin_object().key("object").value("list").key("data").begin_array();
  w.begin_object().key("id").value(st->options.model).key("object").value("model");
  w.key("owned_by").value("troupe-mock-llm").end_object();
  w.end_array().end_object();
  co_return http_response::json(200, std::move(w).str());
}

asio::awaitable<http_response> report(const mock_llm_server* server) {
  co_return http_response::json(200, server->stats_json());
}

} // namespace

mock_llm_server::mock_llm_server(asio::io_context& io, mock_llm_options options)
    : state_(std::make_shared<state>(std::move(options))),
      metrics_(std::make_unique<metrics_registry>()) {
  router routes;
  auto st = state_;
  routes.add(http_method::post, "/v1/chat/completions",
             [st](request_context& ctx) { return answer(ctx, st, wire::openai); });
  routes.add(http_method::post, "/chat/completions",
             [st](request_context& ctx) { return answer(ctx, st, wire::openai); });
  routes.add(http_method::post, "/v1/messages",
             [st](request_context& ctx) { return answer(ctx, st, wire::anthropic); });
  routes.add(http_method::get, "/v1/models", [st](request_context&) { return list_models(st); });
  routes.add(http_method::get, "/_mock/stats", [this](request_context&) { return report(this); });
  auto server_options = state_->options.server;
  server_options.server_name = "troupe-mock-llm";
  server_ = std::make_unique<http_server>(io, std::move(routes), server_options, *metrics_);
  state_->server = server_.get();
}

mock_llm_server::~mock_llm_server() = default;

expected<endpoint> mock_llm_server::listen(const endpoint& where) {
  return server_->listen(where);
}

void mock_llm_server::start() {
  server_->start();
}

void mock_llm_server::stop(std::chrono::milliseconds grace, std::function<void()> done) {
  server_->stop(grace, std::move(done));
}

mock_llm_stats mock_llm_server::stats() const {
  mock_llm_stats s;
  s.requests = state_->requests.load();
  s.completion_requests = state_->calls.load();
  s.openai_requests = state_->openai.load();
  s.anthropic_requests = state_->anthropic.load();
  s.faults_injected = state_->faults.load();
  s.streams_started = state_->started.load();
  s.streams_completed = state_->completed.load();
  s.streams_abandoned = state_->abandoned.load();
  s.chunks_sent = state_->chunks.load();
  s.active_streams = static_cast<std::size_t>(std::max<std::int64_t>(0, state_->active.load()));
  s.open_connections = server_->open_connections();
  return s;
}

std::string mock_llm_server::stats_json() const {
  const auto s = stats();
  json_writer w;
  w.begin_object();
  w.key("mock").value(true);
  w.key("requests").value(s.requests);
  w.key("completion_requests").value(s.completion_requests);
  w.key("openai_requests").value(s.openai_requests);
  w.key("anthropic_requests").value(s.anthropic_requests);
  w.key("faults_injected").value(s.faults_injected);
  w.key("streams_started").value(s.streams_started);
  w.key("streams_completed").value(s.streams_completed);
  w.key("streams_abandoned").value(s.streams_abandoned);
  w.key("chunks_sent").value(s.chunks_sent);
  w.key("active_streams").value(s.active_streams);
  w.key("open_connections").value(s.open_connections);
  w.end_object();
  return std::move(w).str();
}

} // namespace troupe::net

#include "answer_plan.hpp"

#include <algorithm>

#include <simdjson.h>

#include "text_scan.hpp"
#include "troupe/runtime/json_writer.hpp"

namespace troupe::mock::detail {

namespace dom = simdjson::dom;

namespace {

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

constexpr std::string_view filler[] = {"alpha",   "bravo", "charlie", "delta", "echo",
                                       "foxtrot", "golf",  "hotel",   "india", "juliet"};

} // namespace

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

unsigned knob(const net::http_request& req, std::string_view header,
              std::optional<unsigned> rule_value, unsigned fallback) {
  if (auto v = parse_unsigned(req.header(header))) {
    return *v;
  }
  return rule_value.value_or(fallback);
}

answer_plan make_plan(const mock_llm_options& options, const parsed_request& r,
                      const mock_rule* rule, const net::http_request& req, net::wire_format format,
                      std::uint64_t call) {
  answer_plan p;
  p.format = format;
  p.model = r.model.empty() ? options.model : r.model;
  p.call = call;
  p.include_usage = format == net::wire_format::anthropic || r.include_usage;
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
      p.calls[i].id = (format == net::wire_format::openai ? "call_mock_" : "toolu_mock_") +
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

} // namespace troupe::mock::detail

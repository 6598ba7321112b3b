#include "troupe/mock/script.hpp"

#include <simdjson.h>

#include "text_scan.hpp"
#include "troupe/net/provider_wire.hpp"

namespace troupe::mock {

namespace dom = simdjson::dom;

using detail::parse_unsigned;
using detail::split;

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

expected<std::vector<mock_fault>> parse_mock_fault_list(std::string_view specs) {
  std::vector<mock_fault> out;
  for (const auto spec : split(specs, ',')) {
    if (spec.empty()) {
      continue;
    }
    auto f = parse_mock_fault(spec);
    if (!f) {
      return tl::unexpected(f.error());
    }
    out.push_back(*f);
  }
  return out;
}

mock_fault draw_mock_fault(const std::vector<mock_fault>& faults, double rate, std::uint64_t seed,
                           std::uint64_t call) {
  if (faults.empty() || rate <= 0) {
    return {};
  }
  // splitmix64 of the seed and the call number: one well-mixed 64-bit value per call.
  auto mix = [](std::uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  const auto draw = mix(seed ^ mix(call));
  // The top 53 bits as a number in [0, 1); the low bits pick the fault.
  const auto unit = static_cast<double>(draw >> 11) * 0x1.0p-53;
  if (unit >= rate) {
    return {};
  }
  return faults[static_cast<std::size_t>(mix(draw) % faults.size())];
}

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
  const auto string_field = [](dom::object o, std::string_view key,
                               std::optional<std::string>& out) {
    std::string_view s;
    if (!o.at_key(key).get_string().get(s)) {
      out = std::string(s);
    }
  };
  dom::object match;
  if (!obj.at_key("match").get_object().get(match)) {
    string_field(match, "user", rule.user_contains);
    string_field(match, "prompt", rule.prompt_contains);
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
    string_field(reply, "text", rule.text);
    std::string_view s;
    if (!reply.at_key("finish_reason").get_string().get(s)) {
      // OpenAI's canonical words, read with the wire's own table; "other" is no word a
      // script may ask for.
      const auto reason = net::parse_openai_finish(s);
      if (reason == finish_reason::other || net::openai_finish_word(reason) != s) {
        return fail(errc::invalid_argument, "unknown finish_reason '" + std::string(s) + "'");
      }
      rule.finish = reason;
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

} // namespace troupe::mock

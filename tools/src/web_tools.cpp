// web_search and web_fetch (web_tools.hpp).

#include "troupe/tools/web_tools.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "tool_arguments.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/tools/guarded_fetch.hpp"
#include "troupe/tools/html_text.hpp"

namespace troupe::tools {

namespace asio = boost::asio;

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  });
  return out;
}

// "text/html; charset=ISO-8859-1" -> ("text/html", "ISO-8859-1").
std::pair<std::string, std::string> media_type(std::string_view content_type) {
  const auto semi = content_type.find(';');
  auto type = lower(content_type.substr(0, semi));
  while (!type.empty() && type.back() == ' ') {
    type.pop_back();
  }
  std::string charset;
  if (semi != std::string_view::npos) {
    const auto params = lower(content_type.substr(semi + 1));
    if (const auto at = params.find("charset="); at != std::string::npos) {
      charset = params.substr(at + 8);
      charset = charset.substr(0, charset.find(';'));
      std::erase(charset, '"');
      std::erase(charset, ' ');
    }
  }
  return {type, charset};
}

// Why a search failed: no engine enabled (not_found) is policy_blocked, an engine that
// throttled it (limit_exceeded) rate_limited; otherwise as any tool's error.
std::string_view search_failure_kind(const error& e) {
  switch (e.code) {
    case errc::not_found:
      return "policy_blocked";
    case errc::limit_exceeded:
      return "rate_limited";
    default:
      return failure_kind_of(e);
  }
}

// At most `max_chars` code points of `text`.
std::pair<std::string, bool> first_chars(std::string text, std::size_t max_chars) {
  std::size_t chars = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      if (chars == max_chars) {
        text.resize(i);
        return {std::move(text), true};
      }
      ++chars;
    }
  }
  return {std::move(text), false};
}

class web_search_tool final : public tool {
public:
  explicit web_search_tool(std::shared_ptr<const web_tool_options> options)
      : options_(std::move(options)) {
    descriptor_.name = "web_search";
    descriptor_.description =
        "Search the web. Returns up to `limit` results (default 5, at most 10), each with a "
        "title, a URL and a snippet; read a page with web_fetch.";
    descriptor_.input_schema =
        R"({"type":"object","properties":{"query":{"type":"string","minLength":1,"maxLength":400},)"
        R"("limit":{"type":"integer","minimum":1,"maximum":10}},"required":["query"],)"
        R"("additionalProperties":false})";
    descriptor_.concurrency_safe = true;
  }
  const tool_descriptor& descriptor() const noexcept override {
    return descriptor_;
  }
  bool offered_to(const agent_settings& agent) const noexcept override {
    return agent.web_search == web_search_mode::external;
  }
  asio::awaitable<tool_result> invoke(std::string arguments, tool_context ctx) const override {
    return run(options_, std::move(arguments), ctx.http);
  }

private:
  static asio::awaitable<tool_result> run(std::shared_ptr<const web_tool_options> options,
                                          std::string arguments, net::http_client* http) {
    auto args = detail::parse_tool_arguments(arguments);
    if (!args) {
      co_return tool_failure("invalid_arguments", args.error().message);
    }
    auto query = args->required_text("query", true);
    auto limit = args->integer("limit");
    if (!query || !limit) {
      co_return tool_failure("invalid_arguments",
                             !query ? query.error().message : limit.error().message);
    }
    const auto wanted = limit->value_or(default_search_limit);
    if (wanted < 1 || wanted > max_search_limit) {
      co_return tool_failure("invalid_arguments",
                             fmt::format("arguments.limit: must be 1 to {}", max_search_limit));
    }
    if (http == nullptr) {
      co_return tool_failure("tool_error", "no HTTP client is available to this call");
    }
    auto engines =
        options->engines ? options->engines->all() : std::vector<search_engine_settings>{};
    auto outcome = co_await search_web(*http, std::move(engines), options, std::move(*query),
                                       static_cast<unsigned>(wanted));
    if (!outcome) {
      co_return tool_failure(search_failure_kind(outcome.error()), outcome.error().message);
    }
    json_writer w;
    w.begin_object().key("query").value(outcome->query);
    w.key("provider").value(outcome->provider).key("engine").value(outcome->engine);
    w.key("results").begin_array();
    for (const auto& h : outcome->results) {
      w.begin_object().key("title").value(h.title).key("url").value(h.url);
      w.key("snippet").value(h.snippet).end_object();
    }
    w.end_array();
    if (!outcome->failed.empty()) {
      w.key("failed_engines").begin_array();
      for (const auto& f : outcome->failed) {
        w.value(f);
      }
      w.end_array();
    }
    w.end_object();
    co_return tool_result{true, std::move(w).str(), {}, {}};
  }

  std::shared_ptr<const web_tool_options> options_;
  tool_descriptor descriptor_;
};

class web_fetch_tool final : public tool {
public:
  explicit web_fetch_tool(std::shared_ptr<const web_tool_options> options)
      : options_(std::move(options)) {
    descriptor_.name = "web_fetch";
    descriptor_.description =
        "Fetch a web page (http or https) and return its readable text and title; text and "
        "JSON bodies come back as they are. Long pages are cut.";
    descriptor_.input_schema =
        R"({"type":"object","properties":{"url":{"type":"string","minLength":1,"maxLength":8192}},)"
        R"("required":["url"],"additionalProperties":false})";
    descriptor_.concurrency_safe = true;
  }
  const tool_descriptor& descriptor() const noexcept override {
    return descriptor_;
  }
  bool offered_to(const agent_settings& agent) const noexcept override {
    return agent.web_search != web_search_mode::off;
  }
  asio::awaitable<tool_result> invoke(std::string arguments, tool_context ctx) const override {
    return run(options_, std::move(arguments), ctx.http);
  }

private:
  static asio::awaitable<tool_result> run(std::shared_ptr<const web_tool_options> options,
                                          std::string arguments, net::http_client* http) {
    auto args = detail::parse_tool_arguments(arguments);
    if (!args) {
      co_return tool_failure("invalid_arguments", args.error().message);
    }
    auto url = args->required_text("url", true);
    if (!url) {
      co_return tool_failure("invalid_arguments", url.error().message);
    }
    if (http == nullptr) {
      co_return tool_failure("tool_error", "no HTTP client is available to this call");
    }
    const auto& web = options->web;
    net::http_client_request request;
    request.url = *url;
    request.headers = {{"Accept", "text/html,application/xhtml+xml,text/plain;q=0.9,"
                                  "application/json;q=0.8,*/*;q=0.1"}};
    outbound_policy policy;
    policy.allow_private = web.fetch_allow_private;
    policy.max_body_bytes = web.fetch_max_bytes;
    policy.truncate = true;
    policy.max_redirects = 5;
    policy.timeout = web.fetch_timeout;
    auto response = co_await guarded_fetch(*http, std::move(request), policy);
    if (!response) {
      const auto& e = response.error();
      co_return tool_failure(failure_kind_of(e), e.message);
    }
    if (response->status < 200 || response->status >= 300) {
      co_return tool_failure(failure_kind_of_status(response->status),
                             fmt::format("{} answered HTTP {}", response->url, response->status));
    }
    auto [type, charset] = media_type(response->header("Content-Type"));
    const bool html = type == "text/html" || type == "application/xhtml+xml" ||
                      (type.empty() && response->body.find('<') != std::string::npos);
    const bool json = type == "application/json" || type.ends_with("+json");
    const bool text = type.starts_with("text/") || type.empty();
    if (!html && !json && !text) {
      co_return tool_failure(
          "tool_error",
          fmt::format("{} is {}: web_fetch reads HTML, text and JSON only", response->url, type));
    }
    std::string title;
    std::string body;
    if (html) {
      auto page = html_to_text(response->body, charset);
      title = std::move(page.title);
      body = std::move(page.text);
    } else {
      body = std::move(response->body);
    }
    const auto total = body.size();
    auto [kept, cut] = first_chars(std::move(body), web.fetch_max_chars);
    json_writer w;
    w.begin_object().key("url").value(response->url).key("status").value(response->status);
    w.key("content_type").value(type.empty() ? "text/plain" : type);
    if (html) {
      w.key("title").value(title);
    }
    w.key("text").value(kept);
    w.key("truncated").value(cut || response->truncated);
    if (cut || response->truncated) {
      w.key("note").value(fmt::format(
          "cut: {} of {} bytes of text shown{}", kept.size(), total,
          response->truncated ? fmt::format(", and only the first {} bytes of the page were read",
                                            web.fetch_max_bytes)
                              : ""));
    }
    w.end_object();
    co_return tool_result{true, std::move(w).str(), {}, {}};
  }

  std::shared_ptr<const web_tool_options> options_;
  tool_descriptor descriptor_;
};

} // namespace

expected<std::string> search_engine_key(const search_engine_settings& engine,
                                        const web_tool_options& options) {
  if (engine.key_env.empty()) {
    if (engine.type == search_engine_type::searxng) {
      return std::string();
    }
    return fail(errc::invalid_argument,
                fmt::format("search engine '{}' has no key_env", engine.name));
  }
  if (!options.key_env.allows(engine.key_env)) {
    return fail(errc::permission_denied,
                fmt::format("search engine '{}': key_env '{}' is not allowed: {}", engine.name,
                            engine.key_env, key_env_rule()));
  }
  const auto found = options.environment.find(engine.key_env);
  if (found == options.environment.end() || found->second.empty()) {
    return fail(errc::unavailable,
                fmt::format("search engine '{}': the variable {} (its key_env) is not set",
                            engine.name, engine.key_env));
  }
  return found->second;
}

asio::awaitable<expected<web_search_outcome>>
search_web(net::http_client& http, std::vector<search_engine_settings> engines,
           std::shared_ptr<const web_tool_options> options, std::string query, unsigned limit) {
  const auto order = search_order(engines);
  if (order.empty()) {
    co_return fail(errc::not_found,
                   "web_search is in external mode but no search engine is enabled: add one "
                   "with [[search_engines]] in the config or POST /api/v1/search_engines");
  }
  web_search_outcome outcome;
  outcome.query = query;
  error last{errc::unavailable, ""};
  for (const auto& engine : order) {
    auto key = search_engine_key(engine, *options);
    if (!key) {
      last = key.error();
      outcome.failed.push_back(key.error().message);
      continue;
    }
    auto hits = co_await search_once(http, engine, std::move(*key), query, limit,
                                     options->web.search_timeout);
    if (!hits) {
      last = hits.error();
      outcome.failed.push_back(hits.error().message);
      continue;
    }
    outcome.provider = std::string(to_string(engine.type));
    outcome.engine = engine.name;
    outcome.results = std::move(*hits);
    co_return outcome;
  }
  std::string all;
  for (const auto& f : outcome.failed) {
    all += (all.empty() ? "" : "; ") + f;
  }
  co_return fail(last.code, fmt::format("web_search failed with every enabled engine: {}", all));
}

std::shared_ptr<const tool> make_web_search_tool(std::shared_ptr<const web_tool_options> options) {
  return std::make_shared<const web_search_tool>(std::move(options));
}

std::shared_ptr<const tool> make_web_fetch_tool(std::shared_ptr<const web_tool_options> options) {
  return std::make_shared<const web_fetch_tool>(std::move(options));
}

std::shared_ptr<dynamic_tool_source>
make_web_tool_source(std::shared_ptr<const web_tool_options> options) {
  auto source = std::make_shared<dynamic_tool_source>(std::string(web_source_name));
  // Two fixed tools with valid, distinct names: this cannot fail.
  (void)source->replace({make_web_search_tool(options), make_web_fetch_tool(options)});
  return source;
}

} // namespace troupe::tools

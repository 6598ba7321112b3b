// The web search engines' wire formats and one search (search_engines.hpp).

#include "troupe/tools/search_engines.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <simdjson.h>

#include "troupe/runtime/json_writer.hpp"
#include "troupe/tools/guarded_fetch.hpp"
#include "troupe/tools/html_text.hpp"
#include "troupe/tools/http_template.hpp"

namespace troupe::tools {

namespace asio = boost::asio;

namespace {

// Answers larger than this are not a search result page.
constexpr std::size_t max_answer_bytes = 4 * 1024 * 1024;

std::string encoded(std::string_view value) {
  // The url part of a template percent-encodes everything but RFC 3986's unreserved set.
  return expand_template("{v}", {{"v", std::string(value)}}, template_part::url).value_or("");
}

std::string_view string_field(simdjson::dom::element e, std::string_view key) {
  std::string_view out;
  if (e[key].get_string().get(out) != simdjson::SUCCESS) {
    return {};
  }
  return out;
}

// What an engine said in an error body, in its own shape.
std::string error_detail(search_engine_type type, std::string_view body) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(body.data(), body.size()).get(root) == simdjson::SUCCESS) {
    std::string_view text;
    switch (type) {
      case search_engine_type::tavily:
        if (root["detail"]["error"].get_string().get(text) == simdjson::SUCCESS ||
            root["detail"].get_string().get(text) == simdjson::SUCCESS) {
          return std::string(text);
        }
        break;
      case search_engine_type::serpapi:
        if (root["error"].get_string().get(text) == simdjson::SUCCESS) {
          return std::string(text);
        }
        break;
      case search_engine_type::brave: {
        std::string_view code;
        if (root["error"]["code"].get_string().get(code) != simdjson::SUCCESS) {
          code = {};
        }
        if (root["error"]["detail"].get_string().get(text) == simdjson::SUCCESS) {
          return code.empty() ? std::string(text) : fmt::format("{}: {}", code, text);
        }
        break;
      }
      case search_engine_type::searxng:
        break;
    }
  }
  auto text = plain_text(body.substr(0, 2000));
  if (text.size() > 300) {
    text.resize(300);
  }
  return text;
}

// A snippet cut to `max_chars` code points, on a character boundary.
std::string cut(std::string text, std::size_t max_chars) {
  std::size_t chars = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      if (chars == max_chars) {
        text.resize(i);
        while (!text.empty() && text.back() == ' ') {
          text.pop_back();
        }
        return text + "…";
      }
      ++chars;
    }
  }
  return text;
}

// Brave's X-RateLimit-Reset is "<seconds for the per-second window>, <for the month>".
std::string wait_hint(std::string_view retry_after) {
  const auto comma = retry_after.find(',');
  auto first = retry_after.substr(0, comma);
  while (!first.empty() && first.front() == ' ') {
    first.remove_prefix(1);
  }
  return first.empty() ? std::string() : fmt::format("; retry after {} s", first);
}

} // namespace

std::string plain_text(std::string_view text) {
  if (text.find_first_of("<&") == std::string_view::npos) {
    std::string out;
    bool space = false;
    for (const char c : text) {
      if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
        space = !out.empty();
        continue;
      }
      if (space) {
        out.push_back(' ');
        space = false;
      }
      out.push_back(c);
    }
    return out;
  }
  auto page = html_to_text(fmt::format("<p>{}</p>", text), "UTF-8").text;
  std::string out;
  bool space = false;
  for (const char c : page) {
    if (c == ' ' || c == '\n') {
      space = !out.empty();
      continue;
    }
    if (space) {
      out.push_back(' ');
      space = false;
    }
    out.push_back(c);
  }
  return out;
}

net::http_client_request search_request(const search_engine_settings& engine, std::string_view key,
                                        std::string_view query, unsigned limit) {
  net::http_client_request r;
  const auto base = engine.effective_base_url();
  switch (engine.type) {
    case search_engine_type::tavily: {
      r.method = net::http_method::post;
      r.url = base + "/search";
      r.headers = {{"Authorization", fmt::format("Bearer {}", key)},
                   {"Content-Type", "application/json"}};
      json_writer w;
      w.begin_object().key("query").value(query).key("max_results").value(limit);
      w.key("search_depth").value("basic").key("include_answer").value(false);
      w.key("include_raw_content").value(false).key("include_images").value(false);
      w.end_object();
      r.body = std::move(w).str();
      break;
    }
    case search_engine_type::serpapi:
      r.url = fmt::format("{}/search.json?engine=google&q={}&num={}&api_key={}", base,
                          encoded(query), limit, encoded(key));
      break;
    case search_engine_type::brave:
      r.url = fmt::format("{}/res/v1/web/search?q={}&count={}", base, encoded(query), limit);
      r.headers = {{"Accept", "application/json"}, {"X-Subscription-Token", std::string(key)}};
      break;
    case search_engine_type::searxng:
      r.url = fmt::format("{}/search?q={}&format=json", base, encoded(query));
      r.headers = {{"Accept", "application/json"}};
      if (!key.empty()) {
        r.headers.push_back({"Authorization", fmt::format("Bearer {}", key)});
      }
      break;
  }
  return r;
}

expected<std::vector<search_hit>> read_search_response(search_engine_type type, unsigned status,
                                                       std::string_view body,
                                                       std::string_view retry_after) {
  if (status == 429) {
    return fail(errc::limit_exceeded,
                fmt::format("rate limited (HTTP 429: {}{})", error_detail(type, body),
                            wait_hint(retry_after)));
  }
  if (status == 401 || status == 403) {
    return fail(errc::permission_denied,
                fmt::format("refused the request (HTTP {}: {}){}", status, error_detail(type, body),
                            type == search_engine_type::searxng && status == 403
                                ? "; a SearXNG instance must list json under search.formats"
                                : ""));
  }
  if (status >= 500) {
    return fail(errc::unavailable,
                fmt::format("failed (HTTP {}: {})", status, error_detail(type, body)));
  }
  if (status < 200 || status >= 300) {
    return fail(errc::io_error,
                fmt::format("answered HTTP {}: {}", status, error_detail(type, body)));
  }
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(body.data(), body.size()).get(root); err) {
    return fail(errc::parse_error, fmt::format("answered HTTP {} with a body that is not JSON ({})",
                                               status, simdjson::error_message(err)));
  }
  const auto malformed = [&](std::string_view what) {
    return fail(errc::parse_error,
                fmt::format("answered with JSON that is not {}'s search answer ({})",
                            to_string(type), what));
  };
  simdjson::dom::array results;
  std::string_view title_key = "title";
  std::string_view url_key = "url";
  std::string_view snippet_key = "content";
  switch (type) {
    case search_engine_type::tavily:
    case search_engine_type::searxng:
      if (root["results"].get_array().get(results) != simdjson::SUCCESS) {
        return malformed("no results array");
      }
      break;
    case search_engine_type::serpapi: {
      auto organic = root["organic_results"];
      if (organic.error() == simdjson::NO_SUCH_FIELD) {
        std::string_view said;
        if (root["error"].get_string().get(said) == simdjson::SUCCESS) {
          if (said.find("hasn't returned any results") != std::string_view::npos) {
            return std::vector<search_hit>{};
          }
          return fail(errc::io_error, fmt::format("said: {}", said));
        }
        simdjson::dom::object metadata;
        if (root["search_metadata"].get_object().get(metadata) == simdjson::SUCCESS) {
          return std::vector<search_hit>{};
        }
        return malformed("no organic_results");
      }
      if (organic.get_array().get(results) != simdjson::SUCCESS) {
        return malformed("organic_results is not an array");
      }
      url_key = "link";
      snippet_key = "snippet";
      break;
    }
    case search_engine_type::brave: {
      auto web = root["web"];
      if (web.error() == simdjson::NO_SUCH_FIELD) {
        // A search with no web results has no "web" section.
        if (string_field(root, "type") == "search") {
          return std::vector<search_hit>{};
        }
        return malformed("no web section");
      }
      if (web["results"].get_array().get(results) != simdjson::SUCCESS) {
        return malformed("web.results is not an array");
      }
      snippet_key = "description";
      break;
    }
  }
  std::vector<search_hit> hits;
  for (auto item : results) {
    if (!item.is_object()) {
      return malformed("a result is not an object");
    }
    hits.push_back({std::string(string_field(item, title_key)),
                    std::string(string_field(item, url_key)),
                    std::string(string_field(item, snippet_key))});
  }
  return hits;
}

std::vector<search_hit> normalise_hits(std::vector<search_hit> hits, unsigned limit) {
  std::vector<search_hit> out;
  std::set<std::string> seen;
  for (auto& h : hits) {
    if (out.size() >= limit) {
      break;
    }
    auto url = plain_text(h.url);
    if ((!url.starts_with("http://") && !url.starts_with("https://")) || !seen.insert(url).second) {
      continue;
    }
    auto title = plain_text(h.title);
    out.push_back({title.empty() ? url : cut(std::move(title), max_snippet_chars), url,
                   cut(plain_text(h.snippet), max_snippet_chars)});
  }
  return out;
}

asio::awaitable<expected<std::vector<search_hit>>>
search_once(net::http_client& http, search_engine_settings engine, std::string key,
            std::string query, unsigned limit, std::chrono::milliseconds timeout) {
  const auto who = fmt::format("search engine '{}' ({})", engine.name, to_string(engine.type));
  outbound_policy policy;
  // An admin chose this URL (it may be a SearXNG on the local network).
  policy.allow_private = true;
  policy.max_body_bytes = max_answer_bytes;
  policy.timeout = timeout;
  auto response = co_await guarded_fetch(http, search_request(engine, key, query, limit), policy);
  if (!response) {
    co_return fail(response.error().code, fmt::format("{}: {}", who, response.error().message));
  }
  auto retry = response->header("Retry-After");
  if (retry.empty()) {
    retry = response->header("X-RateLimit-Reset");
  }
  auto hits = read_search_response(engine.type, response->status, response->body, retry);
  if (!hits) {
    co_return fail(hits.error().code, fmt::format("{}: {}", who, hits.error().message));
  }
  co_return normalise_hits(std::move(*hits), limit);
}

void search_engine_catalog::set(std::vector<search_engine_settings> engines) {
  std::lock_guard lock(mutex_);
  engines_ = std::move(engines);
}

std::vector<search_engine_settings> search_engine_catalog::all() const {
  std::lock_guard lock(mutex_);
  return engines_;
}

} // namespace troupe::tools

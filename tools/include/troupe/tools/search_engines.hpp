#pragma once

/// \file
/// The web search engines' wire formats (issue 18) and one search through one engine:
///
/// - tavily: `POST {base}/search`, `Authorization: Bearer <key>`, a JSON body
///   `{"query", "max_results", "search_depth": "basic", "include_answer": false,
///   "include_raw_content": false, "include_images": false}`; the answer's
///   `results[].title / url / content`; errors `{"detail": {"error": "…"}}`.
/// - serpapi: `GET {base}/search.json?engine=google&q=…&num=…&api_key=<key>`; the
///   answer's `organic_results[].title / link / snippet`; errors `{"error": "…"}` (a 200
///   with "hasn't returned any results" is an empty list).
/// - brave: `GET {base}/res/v1/web/search?q=…&count=…`, `X-Subscription-Token: <key>`,
///   `Accept: application/json`; the answer's `web.results[].title / url / description`
///   (descriptions carry <strong> marks, removed); errors `{"type": "ErrorResponse",
///   "error": {"status", "code", "detail"}}`, a 429's wait in `X-RateLimit-Reset`.
/// - searxng: `GET {base}/search?q=…&format=json` (and `Authorization: Bearer <key>` when
///   a key is configured, for a proxy in front of it); the answer's
///   `results[].title / url / content` (an instance without the JSON format answers 403).
///
/// Results are normalised to `{title, url, snippet}`: markup removed, entities decoded,
/// white space collapsed, snippets cut to 300 characters (on a character boundary, with
/// "…"), results without an http(s) URL and repeated URLs dropped, at most the limit.
///
/// Engines are configured by an admin, so their base URL may be a private address (a
/// SearXNG on the local network); the private-address rule is for URLs a model chooses.

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "troupe/net/http_client.hpp"
#include "troupe/runtime/tool_config.hpp"

namespace troupe::tools {

/// One normalised result.
struct search_hit {
  std::string title;
  std::string url;
  std::string snippet;

  friend bool operator==(const search_hit&, const search_hit&) = default;
};

/// `limit`'s default and bound.
inline constexpr unsigned default_search_limit = 5;
inline constexpr unsigned max_search_limit = 10;
/// Characters of a snippet at most.
inline constexpr std::size_t max_snippet_chars = 300;

/// The request asking `engine` for `limit` results for `query` with API key `key`.
net::http_client_request search_request(const search_engine_settings& engine, std::string_view key,
                                        std::string_view query, unsigned limit);

/// Reads the answer of an engine of `type` (its HTTP status, body and the header telling
/// when to retry: Retry-After, or Brave's X-RateLimit-Reset). Fails with limit_exceeded
/// (429: rate limited, the wait named when given), permission_denied (401, 403: the key),
/// unavailable (5xx), parse_error (a body that is not the engine's JSON) or io_error
/// (another status), each message saying what the engine said.
expected<std::vector<search_hit>> read_search_response(search_engine_type type, unsigned status,
                                                       std::string_view body,
                                                       std::string_view retry_after);

/// Normalises results as described above.
std::vector<search_hit> normalise_hits(std::vector<search_hit> hits, unsigned limit);

/// Text with markup removed, entities decoded and white space collapsed (for titles and
/// snippets).
std::string plain_text(std::string_view text);

/// One search: the request through `http`, the answer read and normalised, within
/// `timeout`. Errors start with "search engine '<name>' (<type>)".
boost::asio::awaitable<expected<std::vector<search_hit>>>
search_once(net::http_client& http, search_engine_settings engine, std::string key,
            std::string query, unsigned limit, std::chrono::milliseconds timeout);

/// The node's search engines, as the config and the API leave them. Thread-safe.
class search_engine_catalog {
public:
  void set(std::vector<search_engine_settings> engines);
  std::vector<search_engine_settings> all() const;

private:
  mutable std::mutex mutex_;
  std::vector<search_engine_settings> engines_;
};

} // namespace troupe::tools

#pragma once

// Fakes of web search engines for tests, each speaking its engine's exact wire format on
// 127.0.0.1 (see tools/search_engines.hpp for the formats):
//
// - tavily: POST /search with `Authorization: Bearer <key>` and a JSON body
//   (`query`, `max_results`); answers `{"query", "follow_up_questions", "answer",
//   "images", "results": [{"title", "url", "content", "score", "raw_content"}],
//   "response_time", "request_id"}`; a wrong key gets 401
//   `{"detail": {"error": "Unauthorized: missing or invalid API key."}}`.
// - brave: GET /res/v1/web/search?q=&count= with `X-Subscription-Token`; answers
//   `{"type": "search", "query": {…}, "web": {"type": "search", "results": [{"type":
//   "search_result", "title", "url", "description" (with <strong> marks), …}]}}`; a wrong
//   key gets 422 SUBSCRIPTION_TOKEN_INVALID as an ErrorResponse; every answer carries the
//   X-RateLimit-* headers.
// - serpapi: GET /search.json?engine=google&q=&num=&api_key=; answers `search_metadata`,
//   `search_parameters` and `organic_results[{position, title, link, displayed_link,
//   snippet}]`; a wrong key gets 401 `{"error": "Invalid API key. …"}`.
// - searxng: GET /search?q=&format=json; answers `{"query", "number_of_results",
//   "results": [{"url", "title", "content", "engine", …}], "answers", …}`; without
//   format=json it answers 403 as an instance without the JSON format does.
//
// Results come from a list the test sets, or twelve made from the query. Faults on
// demand: 429 in the engine's own shape (with Retry-After or X-RateLimit-Reset), a 200
// whose body is not JSON, a 500. Every call is recorded as method "search".

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "support/fake_platform.hpp"
#include "troupe/runtime/tool_config.hpp"

namespace troupe::test {

/// A failure the fake answers a search with.
enum class search_fault { rate_limited, malformed, server_error };

/// One result the fake has (fields as the test wants them, markup included).
struct fake_hit {
  std::string title;
  std::string url;
  std::string snippet;
};

class fake_search_engine {
public:
  explicit fake_search_engine(search_engine_type type, std::string key = "test-search-key");
  ~fake_search_engine();
  fake_search_engine(const fake_search_engine&) = delete;
  fake_search_engine& operator=(const fake_search_engine&) = delete;

  /// "http://127.0.0.1:<port>": the engine's base_url.
  std::string base_url() const;
  const std::string& key() const noexcept;
  /// The next `times` searches get `fault`.
  void add_fault(search_fault fault, std::size_t times = 1);
  /// The results every later search answers with (before the count is applied).
  void set_results(std::vector<fake_hit> hits);
  const call_log& calls() const noexcept;

  struct state;

private:
  std::shared_ptr<state> state_;
  std::unique_ptr<loopback_server> server_;
};

} // namespace troupe::test

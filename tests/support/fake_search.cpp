#include "support/fake_search.hpp"

#include <mutex>

#include <fmt/format.h>
#include <simdjson.h>

#include "troupe/runtime/json_writer.hpp"

namespace troupe::test {

using net::http_method;
using net::http_response;
using net::request_context;

struct fake_search_engine::state {
  search_engine_type type = search_engine_type::tavily;
  std::string key;
  call_log log;
  fault_plan<search_fault> faults;
  std::mutex mutex;
  std::optional<std::vector<fake_hit>> hits;
};

namespace {

using state_ptr = std::shared_ptr<fake_search_engine::state>;

// Twelve results made from the query (the engine's default when the test set none).
std::vector<fake_hit> made_from(const std::string& query) {
  std::vector<fake_hit> out;
  for (int i = 1; i <= 12; ++i) {
    out.push_back({fmt::format("Result {} for {}", i, query),
                   fmt::format("https://example.org/{}/{}", i, query.size()),
                   fmt::format("Snippet {} about {}.", i, query)});
  }
  return out;
}

http_response rate_limited(search_engine_type type) {
  switch (type) {
    case search_engine_type::tavily: {
      auto r = http_response::json(
          429,
          R"({"detail":{"error":"Your request has been blocked due to excessive requests. Please reduce the rate of requests."}})");
      r.headers.push_back({"Retry-After", "2"});
      return r;
    }
    case search_engine_type::brave: {
      auto r = http_response::json(
          429,
          R"({"type":"ErrorResponse","error":{"id":"7c0d1f0e-0000-4000-8000-000000000000","status":429,"code":"RATE_LIMITED","detail":"Request rate limit exceeded for plan.","meta":{"plan":"Free","rate_limit":1,"rate_current":2,"quota_limit":2000,"quota_current":17,"component":"rate_limiter"}},"time":1767225600})");
      r.headers.push_back({"X-RateLimit-Limit", "1, 2000"});
      r.headers.push_back({"X-RateLimit-Policy", "1;w=1, 2000;w=2592000"});
      r.headers.push_back({"X-RateLimit-Remaining", "0, 1983"});
      r.headers.push_back({"X-RateLimit-Reset", "1, 1419704"});
      return r;
    }
    case search_engine_type::serpapi:
      return http_response::json(429, R"({"error":"Your account has run out of searches."})");
    case search_engine_type::searxng:
      return http_response::text(429, "Too Many Requests");
  }
  return http_response::text(429, "Too Many Requests");
}

http_response unauthorized(search_engine_type type) {
  switch (type) {
    case search_engine_type::tavily:
      return http_response::json(
          401, R"({"detail":{"error":"Unauthorized: missing or invalid API key."}})");
    case search_engine_type::brave:
      return http_response::json(
          422,
          R"({"type":"ErrorResponse","error":{"id":"9b2e0a11-0000-4000-8000-000000000000","status":422,"code":"SUBSCRIPTION_TOKEN_INVALID","detail":"The provided subscription token is invalid.","meta":{"component":"authentication"}},"time":1767225600})");
    case search_engine_type::serpapi:
      return http_response::json(
          401,
          R"({"error":"Invalid API key. Your API key should be here: https://serpapi.com/manage-api-key"})");
    case search_engine_type::searxng:
      return http_response::text(403, "Forbidden");
  }
  return http_response::text(401, "Unauthorized");
}

std::string tavily_answer(const std::string& query, const std::vector<fake_hit>& hits,
                          std::size_t count) {
  json_writer w;
  w.begin_object().key("query").value(query).key("follow_up_questions").value(nullptr);
  w.key("answer").value(nullptr).key("images").begin_array().end_array();
  w.key("results").begin_array();
  for (std::size_t i = 0; i < hits.size() && i < count; ++i) {
    w.begin_object().key("title").value(hits[i].title).key("url").value(hits[i].url);
    w.key("content").value(hits[i].snippet).key("score").value(0.9 - 0.01 * static_cast<double>(i));
    w.key("raw_content").value(nullptr).end_object();
  }
  w.end_array().key("response_time").value(0.42);
  w.key("request_id").value("123e4567-e89b-12d3-a456-426614174111").end_object();
  return std::move(w).str();
}

std::string brave_answer(const std::string& query, const std::vector<fake_hit>& hits,
                         std::size_t count) {
  json_writer w;
  w.begin_object().key("type").value("search");
  w.key("query")
      .begin_object()
      .key("original")
      .value(query)
      .key("show_strict_warning")
      .value(false);
  w.key("is_navigational").value(false).key("more_results_available").value(hits.size() > count);
  w.end_object();
  w.key("web").begin_object().key("type").value("search").key("results").begin_array();
  for (std::size_t i = 0; i < hits.size() && i < count; ++i) {
    w.begin_object().key("type").value("search_result").key("title").value(hits[i].title);
    w.key("url").value(hits[i].url).key("is_source_local").value(false);
    w.key("is_source_both").value(false).key("description").value(hits[i].snippet);
    w.key("language").value("en").key("family_friendly").value(true);
    w.key("meta_url")
        .begin_object()
        .key("scheme")
        .value("https")
        .key("netloc")
        .value("example.org");
    w.key("hostname").value("example.org").key("path").value("› result").end_object();
    w.end_object();
  }
  w.end_array().key("family_friendly").value(true).end_object().end_object();
  return std::move(w).str();
}

std::string serpapi_answer(const std::string& query, const std::vector<fake_hit>& hits,
                           std::size_t count) {
  json_writer w;
  w.begin_object()
      .key("search_metadata")
      .begin_object()
      .key("id")
      .value("65a0b0c0d0e0f0a0b0c0d0e0");
  w.key("status").value("Success").key("total_time_taken").value(1.2).end_object();
  w.key("search_parameters").begin_object().key("engine").value("google").key("q").value(query);
  w.key("google_domain").value("google.com").key("device").value("desktop").end_object();
  w.key("search_information").begin_object().key("query_displayed").value(query).end_object();
  w.key("organic_results").begin_array();
  for (std::size_t i = 0; i < hits.size() && i < count; ++i) {
    w.begin_object().key("position").value(i + 1).key("title").value(hits[i].title);
    w.key("link").value(hits[i].url).key("displayed_link").value(hits[i].url);
    w.key("snippet").value(hits[i].snippet).end_object();
  }
  w.end_array().end_object();
  return std::move(w).str();
}

std::string searxng_answer(const std::string& query, const std::vector<fake_hit>& hits) {
  json_writer w;
  w.begin_object().key("query").value(query).key("number_of_results").value(0);
  w.key("results").begin_array();
  for (std::size_t i = 0; i < hits.size(); ++i) {
    w.begin_object().key("url").value(hits[i].url).key("title").value(hits[i].title);
    w.key("content").value(hits[i].snippet).key("engine").value("duckduckgo");
    w.key("template").value("default.html").key("engines").begin_array().value("duckduckgo");
    w.end_array().key("positions").begin_array().value(i + 1).end_array();
    w.key("score").value(1.0).key("category").value("general").end_object();
  }
  w.end_array();
  for (const auto* empty :
       {"answers", "corrections", "infoboxes", "suggestions", "unresponsive_engines"}) {
    w.key(empty).begin_array().end_array();
  }
  w.end_object();
  return std::move(w).str();
}

http_response answer(const net::http_request& request, const state_ptr& st) {
  std::string query;
  std::size_t count = 10;
  std::string key;
  switch (st->type) {
    case search_engine_type::tavily: {
      if (request.method != http_method::post) {
        return http_response::json(405, R"({"detail":"Method Not Allowed"})");
      }
      const auto auth = request.header("Authorization");
      key = auth.starts_with("Bearer ") ? std::string(auth.substr(7)) : std::string();
      simdjson::dom::parser parser;
      simdjson::dom::element body;
      std::string_view q;
      if (parser.parse(request.body).get(body) != simdjson::SUCCESS ||
          body["query"].get_string().get(q) != simdjson::SUCCESS) {
        return http_response::json(400, R"({"detail":{"error":"Query is missing."}})");
      }
      query = std::string(q);
      std::int64_t n = 0;
      if (body["max_results"].get_int64().get(n) == simdjson::SUCCESS && n > 0) {
        count = static_cast<std::size_t>(n);
      } else {
        count = 5;
      }
      break;
    }
    case search_engine_type::brave:
      key = std::string(request.header("X-Subscription-Token"));
      query = request.query_param("q");
      count = request.query_param("count").empty()
                  ? 20
                  : static_cast<std::size_t>(std::stoul(request.query_param("count")));
      if (request.header("Accept").find("application/json") == std::string_view::npos) {
        return http_response::json(
            406,
            R"({"type":"ErrorResponse","error":{"status":406,"code":"NOT_ACCEPTABLE","detail":"Accept must be application/json"}})");
      }
      break;
    case search_engine_type::serpapi:
      key = request.query_param("api_key");
      query = request.query_param("q");
      count = request.query_param("num").empty()
                  ? 10
                  : static_cast<std::size_t>(std::stoul(request.query_param("num")));
      if (request.query_param("engine") != "google") {
        return http_response::json(400, R"({"error":"Unsupported `` search engine."})");
      }
      break;
    case search_engine_type::searxng:
      key = st->key;
      query = request.query_param("q");
      if (request.query_param("format") != "json") {
        return http_response::text(403, "<html><body><h1>403 Forbidden</h1></body></html>",
                                   "text/html");
      }
      break;
  }
  if (key != st->key) {
    return unauthorized(st->type);
  }
  if (auto fault = st->faults.take("search")) {
    switch (*fault) {
      case search_fault::rate_limited:
        return rate_limited(st->type);
      case search_fault::malformed:
        return http_response::json(200, R"({"results": [{"title": "cut off in the mid)");
      case search_fault::server_error:
        return http_response::text(500, "<html><body>Internal Server Error</body></html>",
                                   "text/html");
    }
  }
  std::vector<fake_hit> hits;
  {
    std::lock_guard lock(st->mutex);
    hits = st->hits ? *st->hits : made_from(query);
  }
  switch (st->type) {
    case search_engine_type::tavily:
      return http_response::json(200, tavily_answer(query, hits, count));
    case search_engine_type::brave: {
      auto r = http_response::json(200, brave_answer(query, hits, count));
      r.headers.push_back({"X-RateLimit-Limit", "1, 2000"});
      r.headers.push_back({"X-RateLimit-Remaining", "0, 1984"});
      r.headers.push_back({"X-RateLimit-Reset", "1, 1419704"});
      return r;
    }
    case search_engine_type::serpapi:
      return http_response::json(200, serpapi_answer(query, hits, count));
    case search_engine_type::searxng:
      return http_response::json(200, searxng_answer(query, hits));
  }
  return http_response::text(500, "unknown engine");
}

asio::awaitable<http_response> handle(request_context& ctx, state_ptr st) {
  auto request = ctx.request();
  auto r = answer(request, st);
  // The target too: GET engines carry everything in it.
  st->log.add({"search", std::move(request.headers), request.target + "\n" + request.body, r.status,
               r.body, std::chrono::steady_clock::now()});
  co_return r;
}

} // namespace

fake_search_engine::fake_search_engine(search_engine_type type, std::string key)
    : state_(std::make_shared<state>()) {
  state_->type = type;
  state_->key = std::move(key);
  net::router routes;
  auto st = state_;
  const auto route = [st](request_context& ctx) { return handle(ctx, st); };
  switch (type) {
    case search_engine_type::tavily:
      routes.add(http_method::post, "/search", route);
      routes.add(http_method::get, "/search", route);
      break;
    case search_engine_type::brave:
      routes.add(http_method::get, "/res/v1/web/search", route);
      break;
    case search_engine_type::serpapi:
      routes.add(http_method::get, "/search.json", route);
      break;
    case search_engine_type::searxng:
      routes.add(http_method::get, "/search", route);
      break;
  }
  server_ =
      std::make_unique<loopback_server>(std::move(routes), fmt::format("fake-{}", to_string(type)));
}

fake_search_engine::~fake_search_engine() {
  server_.reset();
}

std::string fake_search_engine::base_url() const {
  return server_->origin();
}

const std::string& fake_search_engine::key() const noexcept {
  return state_->key;
}

void fake_search_engine::add_fault(search_fault fault, std::size_t times) {
  state_->faults.add("search", fault, times);
}

void fake_search_engine::set_results(std::vector<fake_hit> hits) {
  std::lock_guard lock(state_->mutex);
  state_->hits = std::move(hits);
}

const call_log& fake_search_engine::calls() const noexcept {
  return state_->log;
}

} // namespace troupe::test

// Custom tools, web search and web fetch in the real `troupe serve` (issue 18): the tools
// and search engines APIs, a tool change reaching the next run but not a running one, and
// runs where the scripted mock-llm calls an HTTP tool, a script tool, web_search (a fake
// Tavily) and web_fetch (a local page); builtin mode's request field; external mode with
// no engine.

#include <cstdlib>
#include <future>
#include <mutex>
#include <optional>

#include <catch2/catch.hpp>

#include "net/mock_llm_fixture.hpp"
#include "support/api_server.hpp"
#include "support/fake_search.hpp"
#include "support/origin_server.hpp"
#include "support/wait_until.hpp"
#include "troupe/mock/mock_llm_server.hpp"

using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

// Every completion request the mock received, in order.
class request_log {
public:
  std::function<void(const std::string&)> observer() {
    return [this](const std::string& body) {
      std::lock_guard lock(mutex_);
      bodies_.push_back(body);
    };
  }
  std::vector<std::string> all() const {
    std::lock_guard lock(mutex_);
    return bodies_;
  }
  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return bodies_.size();
  }

private:
  mutable std::mutex mutex_;
  std::vector<std::string> bodies_;
};

troupe::mock::mock_llm_options scripted(const std::string& script, request_log& log) {
  auto o = troupe::test::scripted(script);
  o.observe = log.observer();
  return o;
}

std::string provider(const mock_llm_fixture& mock) {
  return mock_provider_toml(mock);
}

std::string agent(const std::string& name, const std::string& more = {}) {
  return "[[agents]]\nname = \"" + name +
         "\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\ntimeout_s = 60\n" + more;
}

// Sets environment variables for the troupe children this test starts; restores them.
class scoped_env {
public:
  void set(const std::string& name, const std::string& value) {
    const char* old = std::getenv(name.c_str());
    saved_.emplace_back(name, old == nullptr ? std::nullopt : std::optional<std::string>(old));
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~scoped_env() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) {
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      } else {
        ::unsetenv(it->first.c_str());
      }
    }
  }

private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

std::string probe_tool(const origin_server& origin, const std::string& path) {
  return R"({"name":"probe","description":"asks the origin","kind":"http","url":")" +
         origin.origin() + "/echo/" + path + R"(","allow_private":true,"timeout":10})";
}

} // namespace

TEST_CASE("the tools API creates, reads, changes and deletes custom tools, writes need an "
          "admin token and bad definitions are refused naming the field",
          "[integration][custom_tools]") {
  request_log log;
  mock_llm_fixture mock(scripted("[]", log));
  origin_server origin;
  const std::string declared = "[[tools]]\nname = \"declared_tool\"\nurl = \"" + origin.origin() +
                               "/echo/x\"\nallow_private = true\n";
  api_server s("rate_per_second = 1000\nrate_burst = 1000\n",
               provider(mock) + agent("worker") + declared);
  REQUIRE(s.port() != 0);
  const auto user = s.user_token("ann");

  auto listed = s.call("GET", "/api/v1/tools", user);
  REQUIRE(status_of(listed) == 200);
  CHECK_THAT(body_of(listed), Catch::Contains(R"("name":"declared_tool")") &&
                                  Catch::Contains(R"("declared":true)") &&
                                  Catch::Contains(R"("total":1)"));

  const auto create = R"({"name":"weather","description":"the weather","kind":"http",)"
                      R"("parameters":{"type":"object","properties":{"city":{"type":"string"}},)"
                      R"("required":["city"]},"url":"https://api.example.org/w?q={city}",)"
                      R"("headers":{"Authorization":"Bearer ${TROUPE_KEY_WEATHER}"},)"
                      R"("agents":["worker"],"timeout":15})";
  CHECK(status_of(s.call("POST", "/api/v1/tools", user, create)) == 403);
  auto made = s.call("POST", "/api/v1/tools", s.admin(), create);
  INFO(made);
  REQUIRE(status_of(made) == 201);
  CHECK_THAT(body_of(made), Catch::Contains(R"("url":"https://api.example.org/w?q={city}")") &&
                                Catch::Contains(R"("timeout":15)"));
  CHECK(status_of(s.call("POST", "/api/v1/tools", s.admin(), create)) == 409);
  auto got = s.call("GET", "/api/v1/tools/weather", user);
  REQUIRE(status_of(got) == 200);
  CHECK_THAT(body_of(got), Catch::Contains(R"("Authorization":"Bearer ${TROUPE_KEY_WEATHER}")"));

  const auto refused = [&](const std::string& body, const std::string& field) {
    auto r = s.call("POST", "/api/v1/tools", s.admin(), body);
    INFO(body << "\n" << r);
    CHECK(status_of(r) == 400);
    CHECK_THAT(body_of(r), Catch::Contains(field));
  };
  refused(R"({"name":"t1","url":"https://x.org","agents":["nobody"]})",
          "agents: no agent is named 'nobody'");
  refused(
      R"({"name":"t2","url":"https://x.org","parameters":{"type":"object","properties":{"a":{"type":"strng"}}}})",
      "parameters:");
  refused(R"({"name":"t3","url":"ftp://x.org"})", "url: must start with http:// or https://");
  refused(R"({"name":"t4","url":"https://x.org/{missing}"})",
          "url: the placeholder {missing} is not a property");
  refused(R"({"name":"t5","url":"https://x.org","urll":"x"})", "urll: unknown field");
  refused(R"({"name":"t6","url":"https://x.org","headers":{"Authorization":"Bearer sk-live"}})",
          "headers.Authorization: a credential must come from an environment variable");
  refused(R"({"name":"t7","url":"https://x.org","headers":{"X-Key":"${HOME}"}})",
          "'HOME' is not allowed");
  refused(R"({"url":"https://x.org"})", "name: is required");
  auto builtin =
      s.call("POST", "/api/v1/tools", s.admin(), R"({"name":"read","url":"https://x.org"})");
  CHECK(status_of(builtin) == 409);
  CHECK_THAT(body_of(builtin), Catch::Contains("built-in tool"));

  auto changed = s.call("PATCH", "/api/v1/tools/weather", s.admin(), R"({"timeout":20})");
  REQUIRE(status_of(changed) == 200);
  CHECK_THAT(body_of(changed), Catch::Contains(R"("timeout":20)") &&
                                   Catch::Contains(R"("description":"the weather")"));
  CHECK(status_of(s.call("PATCH", "/api/v1/tools/weather", user, R"({"timeout":21})")) == 403);
  CHECK(status_of(s.call("PATCH", "/api/v1/tools/weather", s.admin(), R"({"name":"other"})")) ==
        400);
  CHECK(status_of(s.call("PATCH", "/api/v1/tools/weather", s.admin(), R"({"timeout":0})")) == 400);
  CHECK(status_of(s.call("PATCH", "/api/v1/tools/declared_tool", s.admin(), R"({"timeout":5})")) ==
        409);
  CHECK(status_of(s.call("DELETE", "/api/v1/tools/declared_tool", s.admin())) == 409);
  CHECK(status_of(s.call("DELETE", "/api/v1/tools/weather", user)) == 403);
  CHECK(status_of(s.call("DELETE", "/api/v1/tools/weather", s.admin())) == 204);
  CHECK(status_of(s.call("GET", "/api/v1/tools/weather", user)) == 404);
  CHECK(status_of(s.call("DELETE", "/api/v1/tools/weather", s.admin())) == 404);

  // What the API made survives a restart.
  REQUIRE(status_of(s.call("POST", "/api/v1/tools", s.admin(), create)) == 201);
  s.restart();
  CHECK(status_of(s.call("GET", "/api/v1/tools/weather", s.admin())) == 200);
}

TEST_CASE("a tool change over the API reaches the next run but not a running one",
          "[integration][custom_tools]") {
  request_log log;
  mock_llm_fixture mock(scripted(R"([
    {"match": {"user": "probe", "has_tool_result": false}, "ttft_ms": 3000,
     "reply": {"tool_calls": [{"name": "probe", "arguments": {}}]}},
    {"match": {"user": "probe", "has_tool_result": true}, "reply": {"text": "probed"}}
  ])",
                                 log));
  origin_server origin;
  api_server s("rate_per_second = 1000\nrate_burst = 1000\n", provider(mock) + agent("worker"));
  REQUIRE(s.port() != 0);
  REQUIRE(status_of(s.call("POST", "/api/v1/tools", s.admin(), probe_tool(origin, "v1"))) == 201);

  const auto port = s.port();
  const auto token = s.admin();
  auto first = std::async(std::launch::async, [&] {
    return http_exchange(port, "POST", "/api/v1/chat", R"({"agent":"worker","message":"probe"})",
                         "Authorization: Bearer " + token +
                             "\r\nContent-Type: application/json\r\n");
  });
  // The run took its tools when it started; its first model call is on its way.
  REQUIRE(wait_until([&] { return log.size() >= 1; }, 20s));
  auto changed = s.call("PATCH", "/api/v1/tools/probe", s.admin(),
                        R"({"url":")" + origin.origin() + R"(/echo/v2"})");
  REQUIRE(status_of(changed) == 200);
  // The change was stored before the running run called the tool.
  CHECK(origin.calls().count("request") == 0);
  const auto answer = first.get();
  INFO(answer);
  REQUIRE(status_of(answer) == 200);
  CHECK_THAT(body_of(answer), Catch::Contains(R"("name":"probe","status":"success")"));
  auto seen = origin.calls().all();
  REQUIRE(seen.size() == 1);
  CHECK_THAT(seen[0].body, Catch::StartsWith("/echo/v1"));

  auto second =
      s.call("POST", "/api/v1/chat", s.admin(), R"({"agent":"worker","message":"probe again"})");
  REQUIRE(status_of(second) == 200);
  seen = origin.calls().all();
  REQUIRE(seen.size() == 2);
  CHECK_THAT(seen[1].body, Catch::StartsWith("/echo/v2"));

  // Deleted, the tool is gone from the next run's offer.
  REQUIRE(status_of(s.call("DELETE", "/api/v1/tools/probe", s.admin())) == 204);
  const auto before = log.size();
  REQUIRE(status_of(s.call("POST", "/api/v1/chat", s.admin(),
                           R"({"agent":"worker","message":"hello"})")) == 200);
  const auto bodies = log.all();
  REQUIRE(bodies.size() > before);
  CHECK_THAT(bodies[before], !Catch::Contains(R"("name":"probe")"));
}

TEST_CASE("an agent's run calls an HTTP tool, a script tool, web_search and web_fetch",
          "[integration][custom_tools][web_search]") {
  fake_search_engine tavily(troupe::search_engine_type::tavily);
  origin_server origin;
  scoped_env env;
  env.set("TROUPE_KEY_TAVILY_E2E", tavily.key());
  request_log log;
  mock_llm_fixture mock(scripted(R"([
    {"match": {"user": "use every tool", "has_tool_result": false},
     "reply": {"tool_calls": [
       {"name": "lookup", "arguments": {"item": "books & more"}},
       {"name": "count_words", "arguments": {"text": "three little words"}},
       {"name": "web_search", "arguments": {"query": "troupe actors", "limit": 2}},
       {"name": "web_fetch", "arguments": {"url": ")" +
                                     origin.origin() + R"(/page"}}]}},
    {"match": {"user": "use every tool", "has_tool_result": true},
     "reply": {"text": "all tools answered"}}
  ])",
                                 log));
  const std::string config =
      provider(mock) + agent("worker", "web_search = \"external\"\n") +
      "[[tools]]\nname = \"lookup\"\ndescription = \"looks an item up\"\n"
      "parameters = { type = \"object\", properties = { item = { type = \"string\" } } }\n"
      "url = \"" +
      origin.origin() +
      "/echo/{item}\"\nallow_private = true\n"
      "[[tools]]\nname = \"count_words\"\nkind = \"script\"\nlanguage = \"python\"\n"
      "parameters = '{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\"}}}'\n"
      "code = \"import json,sys; a=json.load(sys.stdin); print(len(a['text'].split()), 'words')\"\n"
      "[[search_engines]]\nname = \"tav\"\ntype = \"tavily\"\nkey_env = \"TROUPE_KEY_TAVILY_E2E\"\n"
      "base_url = \"" +
      tavily.base_url() +
      "\"\n"
      "[web]\nfetch_allow_private = true\n";
  api_server s("rate_per_second = 1000\nrate_burst = 1000\n", config);
  REQUIRE(s.port() != 0);

  auto answer =
      s.call("POST", "/api/v1/chat", s.admin(), R"({"agent":"worker","message":"use every tool"})");
  INFO(answer);
  REQUIRE(status_of(answer) == 200);
  const auto body = body_of(answer);
  CHECK(json_field(body, "content") == "all tools answered");
  for (const auto* tool : {"lookup", "count_words", "web_search", "web_fetch"}) {
    CHECK_THAT(body,
               Catch::Contains(std::string(R"("name":")") + tool + R"(","status":"success")"));
  }
  // What each tool answered reached the model.
  const auto bodies = log.all();
  REQUIRE(bodies.size() >= 2);
  const auto& prompt = bodies[1];
  CHECK_THAT(prompt, Catch::Contains("/echo/books%20%26%20more"));
  CHECK_THAT(prompt, Catch::Contains("3 words"));
  CHECK_THAT(prompt, Catch::Contains("Result 1 for troupe actors") &&
                         Catch::Contains("Result 2 for troupe actors") &&
                         !Catch::Contains("Result 3 for troupe actors"));
  CHECK_THAT(prompt, Catch::Contains("# Main heading"));
  CHECK(tavily.calls().count("search") == 1);
  CHECK(origin.calls().count("request") == 2);
  // The first request offered every tool, the web ones included.
  for (const auto* tool : {"lookup", "count_words", "web_search", "web_fetch"}) {
    CHECK_THAT(bodies[0], Catch::Contains(std::string(R"("name":")") + tool + "\""));
  }
}

TEST_CASE("builtin web search sends the provider's own option, and external mode without an "
          "engine refuses web_search",
          "[integration][custom_tools][web_search]") {
  request_log log;
  mock_llm_fixture mock(scripted(R"([
    {"match": {"user": "search please", "has_tool_result": false},
     "reply": {"tool_calls": [{"name": "web_search", "arguments": {"query": "anything"}}]}},
    {"match": {"user": "search please", "has_tool_result": true}, "reply": {"text": "no engine"}}
  ])",
                                 log));
  api_server s("rate_per_second = 1000\nrate_burst = 1000\n",
               provider(mock) + agent("builtin", "web_search = \"builtin\"\n") +
                   agent("external", "web_search = \"external\"\n") + agent("plain"));
  REQUIRE(s.port() != 0);

  REQUIRE(status_of(s.call("POST", "/api/v1/chat", s.admin(),
                           R"({"agent":"builtin","message":"hello"})")) == 200);
  auto bodies = log.all();
  REQUIRE(bodies.size() == 1);
  CHECK_THAT(bodies[0], Catch::Contains(R"("web_search_options":{})"));
  CHECK_THAT(bodies[0], Catch::Contains(R"("name":"web_fetch")") &&
                            !Catch::Contains(R"("name":"web_search")"));

  REQUIRE(status_of(s.call("POST", "/api/v1/chat", s.admin(),
                           R"({"agent":"plain","message":"hello"})")) == 200);
  bodies = log.all();
  REQUIRE(bodies.size() == 2);
  CHECK_THAT(bodies[1],
             !Catch::Contains("web_search_options") && !Catch::Contains(R"("name":"web_fetch")"));

  auto refused = s.call("POST", "/api/v1/chat", s.admin(),
                        R"({"agent":"external","message":"search please"})");
  INFO(refused);
  REQUIRE(status_of(refused) == 200);
  CHECK_THAT(body_of(refused), !Catch::Contains(R"("name":"web_search","status":"success")"));
  bodies = log.all();
  REQUIRE(bodies.size() >= 4);
  CHECK_THAT(bodies[3], Catch::Contains("no search engine is enabled"));
}

TEST_CASE("the search engines API manages engines and tests one against its fake",
          "[integration][web_search]") {
  fake_search_engine brave(troupe::search_engine_type::brave);
  scoped_env env;
  env.set("TROUPE_KEY_BRAVE_API", brave.key());
  request_log log;
  mock_llm_fixture mock(scripted("[]", log));
  api_server s("rate_per_second = 1000\nrate_burst = 1000\n", provider(mock) + agent("worker"));
  REQUIRE(s.port() != 0);
  const auto user = s.user_token("bob");

  const auto create = R"({"name":"brave","type":"brave","key_env":"TROUPE_KEY_BRAVE_API",)"
                      R"("base_url":")" +
                      brave.base_url() + R"(","default":true})";
  CHECK(status_of(s.call("POST", "/api/v1/search_engines", user, create)) == 403);
  auto made = s.call("POST", "/api/v1/search_engines", s.admin(), create);
  INFO(made);
  REQUIRE(status_of(made) == 201);
  CHECK_THAT(body_of(made),
             Catch::Contains(R"("type":"brave")") && Catch::Contains(R"("default":true)"));
  CHECK(status_of(s.call("POST", "/api/v1/search_engines", s.admin(), create)) == 409);
  auto bad = s.call("POST", "/api/v1/search_engines", s.admin(),
                    R"({"name":"b2","type":"brave","key_env":"HOME"})");
  CHECK(status_of(bad) == 400);
  CHECK_THAT(body_of(bad), Catch::Contains("key_env: 'HOME' is not allowed"));
  auto untyped = s.call("POST", "/api/v1/search_engines", s.admin(), R"({"name":"b3"})");
  CHECK_THAT(body_of(untyped), Catch::Contains("type: is required"));

  auto listed = s.call("GET", "/api/v1/search_engines", user);
  REQUIRE(status_of(listed) == 200);
  CHECK_THAT(body_of(listed), Catch::Contains(R"("name":"brave")"));

  auto tested = s.call("POST", "/api/v1/search_engines/brave/test", s.admin(),
                       R"({"query":"hello world","limit":2})");
  INFO(tested);
  REQUIRE(status_of(tested) == 200);
  CHECK_THAT(body_of(tested), Catch::Contains(R"("ok":true)") &&
                                  Catch::Contains("Result 2 for hello world") &&
                                  !Catch::Contains("Result 3"));
  CHECK(status_of(s.call("POST", "/api/v1/search_engines/brave/test", user, "{}")) == 403);
  brave.add_fault(search_fault::rate_limited);
  auto limited = s.call("POST", "/api/v1/search_engines/brave/test", s.admin(), "{}");
  REQUIRE(status_of(limited) == 200);
  CHECK_THAT(body_of(limited),
             Catch::Contains(R"("ok":false)") && Catch::Contains("rate limited (HTTP 429"));

  auto changed = s.call("PATCH", "/api/v1/search_engines/brave", s.admin(), R"({"enabled":false})");
  REQUIRE(status_of(changed) == 200);
  CHECK_THAT(body_of(changed), Catch::Contains(R"("enabled":false)"));
  CHECK(status_of(s.call("DELETE", "/api/v1/search_engines/brave", s.admin())) == 204);
  CHECK(status_of(s.call("GET", "/api/v1/search_engines/brave", user)) == 404);
}

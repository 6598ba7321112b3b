// web_search against local fakes of the engines speaking their exact wire formats (issue
// 18): results normalised and limited, a 429 and a malformed body read as what they are,
// the next engine tried, and external mode without an engine refused.

#include <catch2/catch.hpp>

#include "support/fake_search.hpp"
#include "tools/tool_harness.hpp"
#include "troupe/tools/tool_resolver.hpp"
#include "troupe/tools/web_tools.hpp"

using namespace troupe;
using namespace troupe::tools;
using namespace troupe::test;

namespace {

search_engine_settings engine_for(const fake_search_engine& fake, search_engine_type type,
                                  std::string name, bool is_default = false) {
  search_engine_settings e;
  e.name = std::move(name);
  e.type = type;
  e.key_env = "TROUPE_KEY_" + std::string(to_string(type));
  std::transform(e.key_env.begin(), e.key_env.end(), e.key_env.begin(), [](char c) {
    return static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  });
  e.base_url = fake.base_url();
  e.is_default = is_default;
  return e;
}

struct web_fixture {
  std::shared_ptr<web_tool_options> options = std::make_shared<web_tool_options>();
  std::shared_ptr<const tool> search;

  web_fixture() {
    options->engines = std::make_shared<search_engine_catalog>();
    search = make_web_search_tool(options);
  }
  void use(std::vector<std::pair<search_engine_settings, const fake_search_engine*>> engines) {
    std::vector<search_engine_settings> list;
    for (auto& [e, fake] : engines) {
      options->environment[e.key_env] = fake->key();
      list.push_back(e);
    }
    options->engines->set(std::move(list));
  }
};

} // namespace

TEST_CASE("web_search through Tavily sends its request shape and normalises the answer",
          "[tools][web_search][integration]") {
  fake_search_engine tavily(search_engine_type::tavily);
  web_fixture f;
  f.use({{engine_for(tavily, search_engine_type::tavily, "tav"), &tavily}});
  auto r = call_tool(*f.search, R"({"query":"rust async"})");
  INFO(r.content);
  REQUIRE(r.ok);
  CHECK_THAT(
      r.content,
      Catch::StartsWith(
          R"({"query":"rust async","provider":"tavily","engine":"tav","results":[{"title":"Result 1 for rust async","url":"https://example.org/1/10","snippet":"Snippet 1 about rust async."})"));
  const auto calls = tavily.calls().all();
  REQUIRE(calls.size() == 1);
  CHECK(calls[0].header("Authorization") == "Bearer " + tavily.key());
  CHECK_THAT(calls[0].body,
             Catch::Contains(R"("query":"rust async","max_results":5,"search_depth":"basic")"));
  // The default limit is 5.
  std::size_t results = 0;
  for (std::size_t at = r.content.find("\"url\""); at != std::string::npos;
       at = r.content.find("\"url\"", at + 1)) {
    ++results;
  }
  CHECK(results == 5);
}

TEST_CASE("web_search through Brave removes its markup and honours the limit",
          "[tools][web_search][integration]") {
  fake_search_engine brave(search_engine_type::brave);
  brave.set_results({
      {"The <strong>Rust</strong> Book", "https://doc.rust-lang.org/book/",
       "Learn <strong>Rust</strong> &amp; its <strong>async</strong> story &#8212; fast."},
      {"Duplicate", "https://doc.rust-lang.org/book/", "the same URL again"},
      {"No URL", "", "dropped"},
      {"Long", "https://example.org/long", std::string(400, 'a') + " tail"},
      {"", "https://example.org/untitled", "a result without a title"},
  });
  web_fixture f;
  f.use({{engine_for(brave, search_engine_type::brave, "brave"), &brave}});
  auto r = call_tool(*f.search, R"({"query":"rust","limit":10})");
  INFO(r.content);
  REQUIRE(r.ok);
  CHECK_THAT(
      r.content,
      Catch::Contains(
          R"({"title":"The Rust Book","url":"https://doc.rust-lang.org/book/","snippet":"Learn Rust & its async story — fast."})"));
  CHECK_THAT(r.content, !Catch::Contains("Duplicate") && !Catch::Contains("dropped") &&
                            !Catch::Contains("<strong>"));
  // A snippet is cut at 300 characters with an ellipsis.
  CHECK_THAT(r.content, Catch::Contains("\"snippet\":\"" + std::string(300, 'a') + "…\""));
  // A result without a title is titled by its URL.
  CHECK_THAT(r.content, Catch::Contains(R"({"title":"https://example.org/untitled")"));
  const auto calls = brave.calls().all();
  REQUIRE(calls.size() == 1);
  CHECK(calls[0].header("X-Subscription-Token") == brave.key());
  CHECK(calls[0].header("Accept") == "application/json");
  CHECK_THAT(calls[0].body, Catch::StartsWith("/res/v1/web/search?q=rust&count=10"));
}

TEST_CASE("web_search limits: at most 10 results, 11 or 0 refused",
          "[tools][web_search][integration]") {
  fake_search_engine tavily(search_engine_type::tavily);
  web_fixture f;
  f.use({{engine_for(tavily, search_engine_type::tavily, "tav"), &tavily}});
  auto ten = call_tool(*f.search, R"({"query":"q","limit":10})");
  REQUIRE(ten.ok);
  CHECK_THAT(ten.content, Catch::Contains("Result 10 for q") && !Catch::Contains("Result 11"));
  for (const auto* bad : {R"({"query":"q","limit":11})", R"({"query":"q","limit":0})",
                          R"({"query":""})", R"({"limit":3})"}) {
    INFO(bad);
    auto r = call_tool(*f.search, bad);
    CHECK_FALSE(r.ok);
    CHECK(r.failure_kind == "invalid_arguments");
  }
  CHECK(tavily.calls().count("search") == 1);
}

TEST_CASE("a 429 from one engine is read as rate limiting and the next engine answers",
          "[tools][web_search][integration]") {
  fake_search_engine tavily(search_engine_type::tavily);
  fake_search_engine brave(search_engine_type::brave);
  web_fixture f;
  f.use({{engine_for(brave, search_engine_type::brave, "brave"), &brave},
         {engine_for(tavily, search_engine_type::tavily, "tav", true), &tavily}});
  tavily.add_fault(search_fault::rate_limited);
  auto r = call_tool(*f.search, R"({"query":"fallback"})");
  INFO(r.content);
  REQUIRE(r.ok);
  CHECK_THAT(r.content, Catch::Contains(R"("provider":"brave","engine":"brave")"));
  CHECK_THAT(r.content, Catch::Contains("search engine 'tav' (tavily): rate limited (HTTP 429: "
                                        "Your request has been blocked due to excessive "
                                        "requests. Please reduce the rate of requests.; retry "
                                        "after 2 s)"));
  // The default was asked first.
  CHECK(tavily.calls().count("search") == 1);
  CHECK(brave.calls().count("search") == 1);
}

TEST_CASE("a 429 from the only engine fails the call as rate limited, naming the wait",
          "[tools][web_search][integration]") {
  fake_search_engine brave(search_engine_type::brave);
  web_fixture f;
  f.use({{engine_for(brave, search_engine_type::brave, "brave"), &brave}});
  brave.add_fault(search_fault::rate_limited);
  auto r = call_tool(*f.search, R"({"query":"x"})");
  CHECK_FALSE(r.ok);
  CHECK(r.failure_kind == "rate_limited");
  CHECK_THAT(r.content, Catch::Contains("RATE_LIMITED: Request rate limit exceeded for plan.") &&
                            Catch::Contains("retry after 1 s"));
  // The next call goes through again.
  CHECK(call_tool(*f.search, R"({"query":"x"})").ok);
}

TEST_CASE("a malformed or failed engine answer is an error that says so",
          "[tools][web_search][integration]") {
  fake_search_engine tavily(search_engine_type::tavily);
  web_fixture f;
  f.use({{engine_for(tavily, search_engine_type::tavily, "tav"), &tavily}});
  tavily.add_fault(search_fault::malformed);
  auto r = call_tool(*f.search, R"({"query":"x"})");
  CHECK_FALSE(r.ok);
  CHECK(r.failure_kind == "tool_error");
  CHECK_THAT(r.content, Catch::Contains("search engine 'tav' (tavily): answered HTTP 200 with a "
                                        "body that is not JSON"));
  tavily.add_fault(search_fault::server_error);
  auto failed = call_tool(*f.search, R"({"query":"x"})");
  CHECK_THAT(failed.content, Catch::Contains("failed (HTTP 500: Internal Server Error)"));
}

TEST_CASE("a wrong key is reported in the engine's own words", "[tools][web_search][integration]") {
  fake_search_engine tavily(search_engine_type::tavily);
  fake_search_engine brave(search_engine_type::brave);
  web_fixture f;
  f.use({{engine_for(tavily, search_engine_type::tavily, "tav"), &tavily}});
  f.options->environment["TROUPE_KEY_TAVILY"] = "wrong";
  auto r = call_tool(*f.search, R"({"query":"x"})");
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.content, Catch::Contains("refused the request (HTTP 401: Unauthorized: missing or "
                                        "invalid API key.)"));
  f.use({{engine_for(brave, search_engine_type::brave, "brave"), &brave}});
  f.options->environment["TROUPE_KEY_BRAVE"] = "wrong";
  CHECK_THAT(call_tool(*f.search, R"({"query":"x"})").content,
             Catch::Contains("HTTP 422: SUBSCRIPTION_TOKEN_INVALID: The provided subscription "
                             "token is invalid."));
  f.options->environment.erase("TROUPE_KEY_BRAVE");
  CHECK_THAT(call_tool(*f.search, R"({"query":"x"})").content,
             Catch::Contains("the variable TROUPE_KEY_BRAVE (its key_env) is not set"));
}

TEST_CASE("SerpAPI and SearXNG answers are read in their own shapes",
          "[tools][web_search][integration]") {
  fake_search_engine serp(search_engine_type::serpapi);
  fake_search_engine searx(search_engine_type::searxng, "");
  web_fixture f;
  f.use({{engine_for(serp, search_engine_type::serpapi, "serp"), &serp}});
  auto r = call_tool(*f.search, R"({"query":"a b","limit":2})");
  INFO(r.content);
  REQUIRE(r.ok);
  CHECK_THAT(r.content, Catch::Contains(R"("provider":"serpapi")") &&
                            Catch::Contains("Result 2 for a b") && !Catch::Contains("Result 3"));
  CHECK_THAT(serp.calls().all().at(0).body,
             Catch::StartsWith("/search.json?engine=google&q=a%20b&num=2&api_key=" + serp.key()));

  auto e = engine_for(searx, search_engine_type::searxng, "searx");
  e.key_env.clear();
  f.options->engines->set({e});
  auto s = call_tool(*f.search, R"({"query":"c","limit":3})");
  INFO(s.content);
  REQUIRE(s.ok);
  // SearXNG has no count parameter: the limit is applied to its answer.
  CHECK_THAT(s.content, Catch::Contains(R"("provider":"searxng")") &&
                            Catch::Contains("Result 3 for c") && !Catch::Contains("Result 4"));
  CHECK_THAT(searx.calls().all().at(0).body, Catch::StartsWith("/search?q=c&format=json"));
}

TEST_CASE("external mode without an enabled engine is refused with a clear error",
          "[tools][web_search]") {
  fake_search_engine tavily(search_engine_type::tavily);
  web_fixture f;
  auto r = call_tool(*f.search, R"({"query":"x"})");
  CHECK_FALSE(r.ok);
  CHECK(r.failure_kind == "policy_blocked");
  CHECK_THAT(r.content, Catch::Contains("no search engine is enabled") &&
                            Catch::Contains("[[search_engines]]") &&
                            Catch::Contains("POST /api/v1/search_engines"));
  auto disabled = engine_for(tavily, search_engine_type::tavily, "tav");
  disabled.enabled = false;
  f.use({{disabled, &tavily}});
  CHECK(call_tool(*f.search, R"({"query":"x"})").failure_kind == "policy_blocked");
  CHECK(tavily.calls().count("search") == 0);
}

TEST_CASE("the web tools are offered by an agent's web_search mode", "[tools][web_search]") {
  auto options = std::make_shared<web_tool_options>();
  tool_resolver resolver;
  REQUIRE(resolver.add_source(make_web_tool_source(options)));
  const auto names = [&](web_search_mode mode, std::vector<std::string> tools = {}) {
    agent_settings a;
    a.name = "a";
    a.web_search = mode;
    a.tools = std::move(tools);
    auto snapshot = resolver.resolve(a);
    REQUIRE(snapshot);
    std::vector<std::string> out;
    for (const auto& t : (*snapshot)->selected()) {
      out.push_back(t.descriptor().name);
    }
    return out;
  };
  CHECK(names(web_search_mode::off).empty());
  CHECK(names(web_search_mode::builtin) == std::vector<std::string>{"web_fetch"});
  CHECK(names(web_search_mode::external) == std::vector<std::string>{"web_search", "web_fetch"});
  agent_settings named;
  named.name = "a";
  named.tools = {"web_search"};
  auto refused = resolver.resolve(named);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().message,
             Catch::Contains("'web_search'") && Catch::Contains("not offered to it"));
}

// Custom HTTP tools against a real server on loopback (issue 18): placeholders reach the
// server encoded for where they stand, hostile argument values stay data, the response
// cap and the timeout hold, secrets come from variables, and without allow_private a
// loopback or private destination is refused before any connection.

#include <catch2/catch.hpp>
#include <simdjson.h>

#include "support/origin_server.hpp"
#include "tools/tool_harness.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/tools/custom_tools.hpp"

using namespace troupe;
using namespace troupe::tools;
using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

constexpr std::string_view text_params =
    R"({"type":"object","properties":{"path":{"type":"string"},"q":{"type":"string"},)"
    R"("name":{"type":"string"},"who":{"type":"string"},"n":{"type":"integer"}},)"
    R"("required":["q"]})";

custom_tool_settings echo_tool(const origin_server& server) {
  custom_tool_settings t;
  t.name = "echo";
  t.description = "echoes";
  t.parameters = std::string(text_params);
  t.method = "POST";
  t.url = server.origin() + "/echo/{path}?q={q}&fixed=1";
  t.headers = {{"X-Who", "{who}"}, {"X-Count", "n={n}"}};
  t.body = R"({"name":"{name}","n":{n}})";
  t.allow_private = true;
  t.timeout = 10s;
  return t;
}

std::shared_ptr<const tool> build(custom_tool_settings t,
                                  std::map<std::string, std::string> env = {}) {
  auto environment = std::make_shared<custom_tool_environment>();
  environment->environment = std::move(env);
  auto made = make_custom_tool(std::move(t), std::move(environment));
  REQUIRE(made);
  return *made;
}

std::string args(std::initializer_list<std::pair<std::string, std::string>> fields,
                 std::optional<int> n = std::nullopt) {
  json_writer w;
  w.begin_object();
  for (const auto& [k, v] : fields) {
    w.key(k).value(v);
  }
  if (n) {
    w.key("n").value(*n);
  }
  w.end_object();
  return std::move(w).str();
}

// The echo route's answer inside the tool's result: {"ok", "status", "body": {…}}.
struct echoed {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  explicit echoed(const std::string& content) {
    REQUIRE(parser.parse(content).get(root) == simdjson::SUCCESS);
  }
  std::string at(std::string_view pointer) {
    std::string_view s;
    if (root.at_pointer(pointer).get_string().get(s) != simdjson::SUCCESS) {
      return "<absent>";
    }
    return std::string(s);
  }
};

} // namespace

TEST_CASE("an HTTP tool fills placeholders in the URL, the headers and the body",
          "[tools][http_tool][integration]") {
  origin_server server;
  auto tool = build(echo_tool(server));
  auto r = call_tool(
      *tool, args({{"path", "items"}, {"q", "red shoes"}, {"name", "Ann"}, {"who", "agent-7"}}, 3));
  INFO(r.content);
  REQUIRE(r.ok);
  echoed e(r.content);
  CHECK(e.at("/body/method") == "POST");
  CHECK(e.at("/body/target") == "/echo/items?q=red%20shoes&fixed=1");
  CHECK(e.at("/body/headers/X-Who") == "agent-7");
  CHECK(e.at("/body/headers/X-Count") == "n=3");
  CHECK(e.at("/body/headers/Content-Type") == "application/json");
  CHECK(e.at("/body/body") == R"({"name":"Ann","n":3})");
  CHECK(server.calls().count("request") == 1);
}

TEST_CASE("injection attempts in an HTTP tool's arguments stay data",
          "[tools][http_tool][integration]") {
  origin_server server;
  auto tool = build(echo_tool(server));

  SECTION("a query value with &admin=1 stays one value") {
    auto r = call_tool(*tool, args({{"path", "x"}, {"q", "shoes&admin=1"}}));
    REQUIRE(r.ok);
    echoed e(r.content);
    CHECK(e.at("/body/target") == "/echo/x?q=shoes%26admin%3D1&fixed=1");
  }
  SECTION("a path value with ../ stays inside its segment") {
    auto r = call_tool(*tool, args({{"path", "../../admin"}, {"q", "x"}}));
    REQUIRE(r.ok);
    echoed e(r.content);
    CHECK(e.at("/body/target") == "/echo/..%2F..%2Fadmin?q=x&fixed=1");
    // One path segment, which the server's router decodes.
    CHECK(e.at("/body/tail") == "../../admin");
  }
  SECTION("a body value with \"} cannot end its JSON string") {
    const std::string hostile = R"(x"}, "admin": true, "y": {")";
    auto r = call_tool(*tool, args({{"path", "x"}, {"q", "x"}, {"name", hostile}}, 1));
    REQUIRE(r.ok);
    echoed e(r.content);
    const auto body = e.at("/body/body");
    simdjson::dom::parser p;
    simdjson::dom::element sent;
    REQUIRE(p.parse(body).get(sent) == simdjson::SUCCESS);
    std::string_view name;
    REQUIRE(sent["name"].get_string().get(name) == simdjson::SUCCESS);
    CHECK(name == hostile);
    CHECK(sent["admin"].error() == simdjson::NO_SUCH_FIELD);
  }
  SECTION("a header value with CRLF is refused and nothing is sent") {
    auto r = call_tool(*tool, args({{"path", "x"}, {"q", "x"}, {"who", "a\r\nX-Admin: 1"}}));
    CHECK_FALSE(r.ok);
    CHECK(r.failure_kind == "invalid_arguments");
    CHECK_THAT(r.content, Catch::Contains("control character"));
    CHECK(server.calls().count("request") == 0);
  }
  SECTION("a value that looks like a placeholder or a variable is not expanded") {
    auto r = call_tool(*tool, args({{"path", "x"},
                                    {"q", "{name}"},
                                    {"name", "${TROUPE_KEY_T}"},
                                    {"who", "${TROUPE_KEY_T}"}}));
    REQUIRE(r.ok);
    echoed e(r.content);
    CHECK(e.at("/body/target") == "/echo/x?q=%7Bname%7D&fixed=1");
    CHECK(e.at("/body/headers/X-Who") == "${TROUPE_KEY_T}");
    CHECK(e.at("/body/body") == R"({"name":"${TROUPE_KEY_T}","n":})");
  }
}

TEST_CASE("an HTTP tool's header takes a secret from an allowed variable, never from an "
          "argument",
          "[tools][http_tool][integration]") {
  origin_server server;
  auto t = echo_tool(server);
  t.headers = {{"Authorization", "Bearer ${TROUPE_KEY_ORIGIN}"}};
  auto tool = build(t, {{"TROUPE_KEY_ORIGIN", "s3cret-value"}});
  auto r = call_tool(*tool, args({{"path", "x"}, {"q", "x"}}));
  REQUIRE(r.ok);
  echoed e(r.content);
  CHECK(e.at("/body/headers/Authorization") == "Bearer s3cret-value");

  auto unset = build(t, {});
  auto missing = call_tool(*unset, args({{"path", "x"}, {"q", "x"}}));
  CHECK_FALSE(missing.ok);
  CHECK_THAT(missing.content, Catch::Contains("TROUPE_KEY_ORIGIN") && Catch::Contains("not set"));
  CHECK(server.calls().count("request") == 1);
}

TEST_CASE("an HTTP tool's arguments are checked against its parameters before a request",
          "[tools][http_tool][integration]") {
  origin_server server;
  auto tool = build(echo_tool(server));
  auto r = call_tool(*tool, R"({"path":"x"})");
  CHECK_FALSE(r.ok);
  CHECK(r.failure_kind == "invalid_arguments");
  CHECK_THAT(r.content, Catch::Contains("q"));
  auto wrong = call_tool(*tool, R"({"q":"x","n":"three"})");
  CHECK_FALSE(wrong.ok);
  CHECK_THAT(wrong.content, Catch::Contains("n"));
  CHECK(server.calls().count("request") == 0);
}

TEST_CASE("a placeholder that is not a parameter, or a bad schema, is refused naming the field",
          "[tools][http_tool]") {
  origin_server server;
  auto t = echo_tool(server);
  t.url = server.origin() + "/echo/{nope}";
  auto made = make_custom_tool(t, nullptr);
  REQUIRE_FALSE(made);
  CHECK_THAT(made.error().message,
             Catch::Contains("tool 'echo': url: the placeholder {nope} is not a property"));
  t = echo_tool(server);
  t.headers = {{"X-A", "{ghost}"}};
  CHECK_THAT(make_custom_tool(t, nullptr).error().message, Catch::Contains("headers.X-A"));
  t = echo_tool(server);
  t.parameters = R"({"type":"object","properties":{"q":{"type":"strin"}}})";
  CHECK_THAT(make_custom_tool(t, nullptr).error().message,
             Catch::Contains("tool 'echo': parameters:"));
}

TEST_CASE("an HTTP tool refuses a response larger than its cap",
          "[tools][http_tool][integration]") {
  origin_server server;
  custom_tool_settings t;
  t.name = "big";
  t.url = server.origin() + "/big";
  t.allow_private = true;
  t.max_response_bytes = 1000;
  auto capped = build(t);
  auto r = call_tool(*capped, "{}");
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.content, Catch::Contains("larger than 1000 bytes"));
  t.max_response_bytes = 10'000;
  auto roomy = build(t);
  auto whole = call_tool(*roomy, "{}");
  REQUIRE(whole.ok);
  CHECK_THAT(whole.content, Catch::Contains(std::string(5000, 'x')));
}

TEST_CASE("an HTTP tool's timeout fires while the server is silent",
          "[tools][http_tool][integration]") {
  origin_server server;
  custom_tool_settings t;
  t.name = "slow";
  t.url = server.origin() + "/slow";
  t.allow_private = true;
  t.timeout = 1s;
  auto tool = build(t);
  tool_result r;
  const auto took = timed([&] { r = call_tool(*tool, "{}"); });
  CHECK_FALSE(r.ok);
  CHECK(r.failure_kind == "timeout");
  CHECK_THAT(r.content, Catch::Contains("timeout is 1 s"));
  CHECK(took >= 900ms);
  CHECK(took < 2500ms);
}

TEST_CASE("without allow_private a loopback or private destination is refused before any "
          "connection",
          "[tools][http_tool][integration]") {
  origin_server server;
  for (const auto& url :
       {server.origin() + "/echo/x",
        "http://localhost:" + std::to_string(server.port()) + "/echo/x",
        "http://[::1]:" + std::to_string(server.port()) + "/echo/x",
        "http://[::ffff:127.0.0.1]:" + std::to_string(server.port()) + "/echo/x",
        std::string("http://10.1.2.3/x"), std::string("http://169.254.169.254/latest/meta-data"),
        std::string("http://0.0.0.0:") + std::to_string(server.port()) + "/echo/x"}) {
    custom_tool_settings t;
    t.name = "private";
    t.url = url;
    t.timeout = 5s;
    auto tool = build(t);
    INFO(url);
    auto r = call_tool(*tool, "{}");
    CHECK_FALSE(r.ok);
    CHECK(r.failure_kind == "policy_blocked");
    CHECK_THAT(r.content, Catch::Contains("allow_private"));
  }
  CHECK(server.calls().count("request") == 0);
}

TEST_CASE("an HTTP tool follows a redirect under the same rule and reports other statuses",
          "[tools][http_tool][integration]") {
  origin_server server;
  custom_tool_settings t;
  t.name = "hop";
  t.url = server.origin() + "/redirect";
  t.allow_private = true;
  auto tool = build(t);
  auto r = call_tool(*tool, "{}");
  REQUIRE(r.ok);
  echoed e(r.content);
  CHECK(e.at("/body/target") == "/echo/after-redirect");

  t.allow_private = true;
  t.url = server.origin() + "/status/404";
  auto missing = call_tool(*build(t), "{}");
  CHECK_FALSE(missing.ok);
  CHECK(missing.failure_kind == "not_found");
  CHECK_THAT(missing.content, Catch::Contains(R"("status":404)"));
  t.url = server.origin() + "/status/429";
  CHECK(call_tool(*build(t), "{}").failure_kind == "rate_limited");
}

TEST_CASE("a redirect to another origin drops the tool's headers",
          "[tools][http_tool][integration]") {
  origin_server first;
  origin_server second;
  custom_tool_settings t;
  t.name = "away";
  t.parameters = R"({"type":"object","properties":{"to":{"type":"string"}}})";
  t.url = first.origin() + "/redirect-to?url={to}";
  t.headers = {{"Authorization", "Bearer ${TROUPE_KEY_FIRST}"}};
  t.allow_private = true;
  auto tool = build(t, {{"TROUPE_KEY_FIRST", "only-for-first"}});
  auto r = call_tool(*tool, args({{"to", second.origin() + "/echo/landed"}}));
  REQUIRE(r.ok);
  echoed e(r.content);
  CHECK(e.at("/body/target") == "/echo/landed");
  CHECK(e.at("/body/headers/Authorization") == "<absent>");
  const auto at_first = first.calls().all();
  REQUIRE(at_first.size() == 1);
  CHECK(at_first[0].header("Authorization") == "Bearer only-for-first");
}

TEST_CASE("the custom tool set versions every change and offers a tool only to its agents",
          "[tools][custom_tools]") {
  origin_server server;
  custom_tool_set set(std::make_shared<custom_tool_environment>(), {"read", "web_search"});
  auto t = echo_tool(server);
  t.agents = {"alpha"};
  const auto v1 = set.install(t);
  REQUIRE(v1);
  const auto before = set.source()->current();
  t.description = "changed";
  const auto v2 = set.install(t);
  REQUIRE(v2);
  CHECK(*v2 == *v1 + 1);
  // The earlier set is unchanged: what a running run holds.
  CHECK(before->tools.front()->descriptor().description == "echoes");
  CHECK(set.source()->current()->tools.front()->descriptor().description == "changed");

  agent_settings alpha;
  alpha.name = "alpha";
  agent_settings beta;
  beta.name = "beta";
  const auto& echo = *set.source()->current()->tools.front();
  CHECK(echo.offered_to(alpha));
  CHECK_FALSE(echo.offered_to(beta));
  t.enabled = false;
  REQUIRE(set.install(t));
  CHECK_FALSE(set.source()->current()->tools.front()->offered_to(alpha));

  auto reserved = echo_tool(server);
  reserved.name = "read";
  auto refused = set.install(reserved);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().message, Catch::Contains("built-in tool"));
  CHECK(set.remove("echo"));
  CHECK_FALSE(set.remove("echo"));
  CHECK(set.source()->current()->tools.empty());
  CHECK(set.source()->current()->version == *v2 + 2);
}

// Custom tools, search engines and web search modes as the config file and the API write
// them (issue 18): every key read, bad values refused with the field named.

#include <catch2/catch.hpp>

#include "troupe/runtime/json_object.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/runtime/settings.hpp"

using namespace troupe;

namespace {

expected<settings> load(std::string_view toml) {
  return apply_toml(settings{}, toml, "test.toml");
}

std::string error_of(std::string_view toml) {
  auto s = load(toml);
  REQUIRE_FALSE(s);
  return s.error().message;
}

custom_tool_settings http_tool() {
  custom_tool_settings t;
  t.name = "weather";
  t.url = "https://api.example.org/weather?q={city}";
  t.parameters = R"({"type":"object","properties":{"city":{"type":"string"}}})";
  return t;
}

std::string check(const custom_tool_settings& t, key_env_policy policy = {}) {
  auto ok = validate_custom_tool(t, policy, "tool 't'");
  return ok ? std::string("ok") : ok.error().message;
}

} // namespace

TEST_CASE("[[tools]] entries read every key of an http and a script tool",
          "[runtime][settings][tools]") {
  auto s = load(R"toml(
[[tools]]
name = "weather"
description = "Current weather"
kind = "http"
parameters = { type = "object", properties = { city = { type = "string", minLength = 1 } }, required = ["city"] }
timeout = 12
enabled = false
agents = ["assistant", "helper"]
method = "POST"
url = "https://api.example.org/weather?q={city}"
headers = { Authorization = "Bearer ${TROUPE_KEY_WEATHER}", X-City = "{city}" }
body = '{"city": "{city}"}'
max_response_bytes = 4096
allow_private = true

[[tools]]
name = "word_count"
kind = "script"
language = "javascript"
code = "console.log(1)"
parameters = '{"type":"object","properties":{"text":{"type":"string"}}}'
)toml");
  REQUIRE(s);
  REQUIRE(s->custom_tools.size() == 2);
  const auto& w = s->custom_tools[0];
  CHECK(w.name == "weather");
  CHECK(w.description == "Current weather");
  CHECK(w.kind == custom_tool_kind::http);
  CHECK(
      w.parameters ==
      R"({"properties":{"city":{"minLength":1,"type":"string"}},"required":["city"],"type":"object"})");
  CHECK(w.timeout == std::chrono::seconds(12));
  CHECK_FALSE(w.enabled);
  CHECK(w.agents == std::vector<std::string>{"assistant", "helper"});
  CHECK(w.offered_to("helper"));
  CHECK_FALSE(w.offered_to("other"));
  CHECK(w.method == "POST");
  CHECK(w.url == "https://api.example.org/weather?q={city}");
  REQUIRE(w.headers.size() == 2);
  CHECK(w.headers[0] == tool_header{"Authorization", "Bearer ${TROUPE_KEY_WEATHER}"});
  CHECK(w.headers[1] == tool_header{"X-City", "{city}"});
  CHECK(w.body == R"({"city": "{city}"})");
  CHECK(w.max_response_bytes == 4096);
  CHECK(w.allow_private);
  const auto& c = s->custom_tools[1];
  CHECK(c.kind == custom_tool_kind::script);
  CHECK(c.language == script_language::javascript);
  CHECK(c.code == "console.log(1)");
  CHECK(c.parameters == R"({"type":"object","properties":{"text":{"type":"string"}}})");
  CHECK(c.offered_to("anyone"));
}

TEST_CASE("[[tools]] refuses unknown keys, wrong types and bad values, naming the field",
          "[runtime][settings][tools]") {
  CHECK_THAT(error_of("[[tools]]\nname = \"t\"\nurl = \"https://x.org\"\nfoo = 1\n"),
             Catch::Contains("unknown key 'foo'") && Catch::Contains("[[tools]] entry 1"));
  CHECK_THAT(error_of("[[tools]]\nname = \"t\"\nurl = \"https://x.org\"\ntimeout = 0\n"),
             Catch::Contains("'timeout' must be a whole number from 1 to 600"));
  CHECK_THAT(error_of("[[tools]]\nname = \"t\"\nkind = \"ftp\"\n"),
             Catch::Contains("kind: 'ftp' is not one of http, script"));
  CHECK_THAT(error_of("[[tools]]\nname = \"bad name\"\nurl = \"https://x.org\"\n"),
             Catch::Contains("tool 'bad name': name:"));
  CHECK_THAT(error_of("[[tools]]\nname = \"t\"\nurl = \"https://x.org\"\n[[tools]]\nname = \"t\"\n"
                      "url = \"https://y.org\"\n"),
             Catch::Contains("two tools are named 't'"));
  CHECK_THAT(error_of("[[tools]]\nname = \"t\"\nurl = \"https://x.org\"\nparameters = \"[1]\"\n"),
             Catch::Contains("tool 't': parameters: must be a JSON Schema object"));
  CHECK_THAT(error_of("[[tools]]\nname = \"t\"\nurl = \"https://x.org\"\nheaders = { X-Key = "
                      "\"${HOME}\" }\n"),
             Catch::Contains("headers.X-Key") && Catch::Contains("'HOME' is not allowed"));
  // A file cannot have both [tools] and [[tools]]: the error says what to do instead.
  CHECK_THAT(error_of("[tools]\nallow_host = false\n[[tools]]\nname = \"t\"\n"),
             Catch::Contains("TROUPE_TOOLS_"));
}

TEST_CASE("a custom tool's URL keeps placeholders out of the host and credentials come from "
          "variables",
          "[runtime][settings][tools]") {
  CHECK(check(http_tool()) == "ok");
  auto t = http_tool();
  t.url = "https://{host}/x";
  CHECK_THAT(check(t), Catch::Contains("url: a placeholder may not stand in the host"));
  t.url = "ftp://example.org/";
  CHECK_THAT(check(t), Catch::Contains("url: must start with http:// or https://"));
  t.url = "https://example.org/?k=${TROUPE_KEY_X}";
  CHECK_THAT(check(t), Catch::Contains("url: ${NAME} references are expanded in header values"));
  t = http_tool();
  t.headers = {{"Authorization", "Bearer sk-live-1234"}};
  CHECK_THAT(check(t), Catch::Contains("headers.Authorization: a credential must come from an "
                                       "environment variable"));
  t.headers = {{"Authorization", "Bearer ${TROUPE_KEY_WEATHER}"}};
  CHECK(check(t) == "ok");
  t.headers = {{"X-Api-Key", "{key}"}};
  CHECK(check(t) == "ok");
  t.headers = {{"X-Api-Key", "${SECRET_THING}"}};
  CHECK_THAT(check(t), Catch::Contains("'SECRET_THING' is not allowed"));
  CHECK(check(t, key_env_policy({"SECRET_THING"})) == "ok");
  t.headers = {{"Bad Header", "x"}};
  CHECK_THAT(check(t), Catch::Contains("headers.Bad Header: is not a valid header name"));
  t = http_tool();
  t.method = "GET";
  t.body = "{}";
  CHECK_THAT(check(t), Catch::Contains("body: a GET request sends no body"));
  t = http_tool();
  t.method = "TRACE";
  CHECK_THAT(check(t), Catch::Contains("method: must be GET, POST, PUT, PATCH or DELETE"));
  t = http_tool();
  t.parameters = R"({"type":"string"})";
  CHECK_THAT(check(t), Catch::Contains("parameters: the schema's type must be \"object\""));
  CHECK(env_references("a ${X} b ${Y_1}") == std::vector<std::string>{"X", "Y_1"});
}

TEST_CASE("a script tool needs a language and exactly one of code and file",
          "[runtime][settings][tools]") {
  custom_tool_settings t;
  t.name = "s";
  t.kind = custom_tool_kind::script;
  CHECK_THAT(check(t), Catch::Contains("code: a script tool needs exactly one of code and file"));
  t.code = "print(1)";
  CHECK(check(t) == "ok");
  t.file = "/tmp/x.py";
  CHECK_THAT(check(t), Catch::Contains("exactly one of code and file"));
  t.file.clear();
  t.url = "https://example.org";
  CHECK_THAT(check(t), Catch::Contains("url: is only for kind \"http\""));
  t.url.clear();
  t.code = std::string(200 * 1024, 'x');
  CHECK_THAT(check(t), Catch::Contains("code: is longer than 100 KiB"));
}

TEST_CASE("a custom tool's JSON shape reads back what it wrote, and a change applies only "
          "the fields it names",
          "[runtime][tools]") {
  auto t = http_tool();
  t.headers = {{"Authorization", "Bearer ${TROUPE_KEY_W}"}};
  t.agents = {"a"};
  t.method = "POST";
  t.body = R"({"q":"{city}"})";
  json_writer w;
  write_custom_tool(w, t);
  auto object = json_object::parse(w.str());
  REQUIRE(object);
  custom_tool_settings back;
  REQUIRE(read_custom_tool(*object, back));
  CHECK(back == t);
  // As storage reads it back: `declared` taken from the JSON.
  t.declared = true;
  json_writer stored;
  write_custom_tool(stored, t);
  auto stored_object = json_object::parse(stored.str());
  REQUIRE(stored_object);
  custom_tool_settings from_storage;
  REQUIRE(read_custom_tool(*stored_object, from_storage, true));
  CHECK(from_storage == t);

  auto change = json_object::parse(R"({"url":"https://other.example.org/{city}","timeout":9})");
  REQUIRE(change);
  REQUIRE(read_custom_tool(*change, back));
  CHECK(back.url == "https://other.example.org/{city}");
  CHECK(back.timeout == std::chrono::seconds(9));
  CHECK(back.method == "POST");

  auto unknown = json_object::parse(R"({"urll":"x"})");
  REQUIRE(unknown);
  auto refused = read_custom_tool(*unknown, back);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().message, Catch::Contains("urll: unknown field"));
  auto wrong = json_object::parse(R"({"timeout":"soon"})");
  REQUIRE(wrong);
  CHECK_THAT(read_custom_tool(*wrong, back).error().message, Catch::Contains("timeout:"));
}

TEST_CASE("[[search_engines]] entries read every key and are checked",
          "[runtime][settings][search]") {
  auto s = load(R"(
[[search_engines]]
name = "tav"
type = "tavily"
key_env = "TROUPE_KEY_TAVILY"
default = true

[[search_engines]]
name = "local"
type = "searxng"
base_url = "http://127.0.0.1:8888/"
enabled = false
)");
  REQUIRE(s);
  REQUIRE(s->search_engines.size() == 2);
  CHECK(s->search_engines[0].type == search_engine_type::tavily);
  CHECK(s->search_engines[0].is_default);
  CHECK(s->search_engines[0].effective_base_url() == "https://api.tavily.com");
  CHECK(s->search_engines[1].effective_base_url() == "http://127.0.0.1:8888");
  CHECK_FALSE(s->search_engines[1].enabled);
  // Only the enabled ones, the default first.
  const auto order = search_order(s->search_engines);
  REQUIRE(order.size() == 1);
  CHECK(order[0].name == "tav");

  CHECK_THAT(error_of("[[search_engines]]\nname = \"b\"\ntype = \"brave\"\n"),
             Catch::Contains("search engine 'b': key_env: a brave engine needs"));
  CHECK_THAT(error_of("[[search_engines]]\nname = \"s\"\ntype = \"searxng\"\n"),
             Catch::Contains("search engine 's': base_url: a searxng engine needs"));
  CHECK_THAT(error_of("[[search_engines]]\nname = \"b\"\ntype = \"bing\"\nkey_env = \"X\"\n"),
             Catch::Contains("type: 'bing' is not one of tavily, serpapi, brave, searxng"));
  CHECK_THAT(error_of("[[search_engines]]\nname = \"b\"\ntype = \"brave\"\nkey_env = \"PATH\"\n"),
             Catch::Contains("key_env: 'PATH' is not allowed"));
  CHECK_THAT(error_of("[[search_engines]]\nname = \"a\"\ntype = \"brave\"\nkey_env = "
                      "\"TROUPE_KEY_A\"\ndefault = true\n[[search_engines]]\nname = \"b\"\ntype = "
                      "\"brave\"\nkey_env = \"TROUPE_KEY_B\"\ndefault = true\n"),
             Catch::Contains("at most one may be the default"));
}

TEST_CASE("an agent's web_search mode is read, printed and checked against the web tools it "
          "names",
          "[runtime][settings][search]") {
  const std::string base = "[[providers]]\nname = \"p\"\ntype = \"openai\"\n[[agents]]\nname = "
                           "\"a\"\nprovider = \"p\"\nmodel = \"m\"\n";
  auto s = load(base + "web_search = \"external\"\n");
  REQUIRE(s);
  CHECK(s->agents[0].web_search == web_search_mode::external);
  CHECK_THAT(to_toml(*s), Catch::Contains("web_search = \"external\""));
  auto off = load(base);
  REQUIRE(off);
  CHECK(off->agents[0].web_search == web_search_mode::off);
  CHECK_THAT(error_of(base + "web_search = \"always\"\n"),
             Catch::Contains("agent 'a': web_search: 'always' is not one of off, builtin, "
                             "external"));

  const std::vector<std::string> known = {"web_search", "web_fetch", "read"};
  auto agents = s->agents;
  agents[0].tools = {"web_search", "web_fetch"};
  CHECK(validate_agents(s->providers, agents, known));
  agents[0].web_search = web_search_mode::builtin;
  auto refused = validate_agents(s->providers, agents, known);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().message,
             Catch::Contains("agent 'a': tools names 'web_search' but web_search is \"builtin\""));
  agents[0].tools = {"web_fetch"};
  CHECK(validate_agents(s->providers, agents, known));
  agents[0].web_search = web_search_mode::off;
  CHECK_FALSE(validate_agents(s->providers, agents, known));
}

TEST_CASE("[web] limits are settings keys with defaults", "[runtime][settings][search]") {
  auto s = load("[web]\nfetch_allow_private = true\nfetch_timeout_ms = 5000\n"
                "fetch_max_chars = 500\nsearch_timeout_ms = 3000\n");
  REQUIRE(s);
  CHECK(s->web.fetch_allow_private);
  CHECK(s->web.fetch_timeout == std::chrono::milliseconds(5000));
  CHECK(s->web.fetch_max_chars == 500);
  CHECK(s->web.search_timeout == std::chrono::milliseconds(3000));
  CHECK(settings{}.web.fetch_max_bytes == 2 * 1024 * 1024);
}

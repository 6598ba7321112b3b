#include <cstdio>
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "troupe/runtime/settings.hpp"

using namespace troupe;

namespace {

std::filesystem::path write_temp_config(const std::string& text) {
  static int counter = 0;
  auto path = std::filesystem::temp_directory_path() /
              ("troupe-settings-test-" + std::to_string(::getpid()) + "-" +
               std::to_string(++counter) + ".toml");
  std::ofstream(path) << text;
  return path;
}

} // namespace

TEST_CASE("settings default to loopback 8080 and ./var/troupe", "[runtime][settings]") {
  auto s = resolve_settings({});
  REQUIRE(s);
  CHECK(s->listen == endpoint{"127.0.0.1", 8080});
  CHECK(s->data_dir == std::filesystem::path("./var/troupe"));
  CHECK(s->log_level == log::level::info);
  CHECK(s->server.shutdown_timeout == std::chrono::seconds(10));
}

TEST_CASE("settings take flag over environment over file over default", "[runtime][settings]") {
  const auto file = write_temp_config("listen = \"127.0.0.1:1000\"\n"
                                      "log_level = \"warn\"\n"
                                      "data_dir = \"/tmp/from-file\"\n"
                                      "[server]\nrequest_timeout_ms = 1234\n");
  setting_sources sources;
  sources.config_file = file;
  sources.environment = {{"TROUPE_LISTEN", "127.0.0.1:2000"},
                         {"TROUPE_LOG_LEVEL", "debug"},
                         {"TROUPE_SERVER_IO_THREADS", "3"},
                         {"UNRELATED", "x"}};
  sources.flags = {{"listen", "127.0.0.1:3000"}};
  auto s = resolve_settings(sources);
  REQUIRE(s);
  CHECK(s->listen.port == 3000);                    // flag beats env and file
  CHECK(s->log_level == log::level::debug);         // env beats file
  CHECK(s->data_dir == "/tmp/from-file");           // file beats default
  CHECK(s->server.request_timeout.count() == 1234); // nested key from the file
  CHECK(s->server.io_threads == 3);                 // nested key from the environment
  std::filesystem::remove(file);
}

TEST_CASE("an unknown key in the config file is an error naming the key and the file",
          "[runtime][settings]") {
  const auto file = write_temp_config("listen = \"127.0.0.1:1\"\n[server]\nbody_limit = 5\n");
  setting_sources sources;
  sources.config_file = file;
  auto s = resolve_settings(sources);
  REQUIRE_FALSE(s);
  CHECK(s.error().code == errc::invalid_argument);
  CHECK_THAT(s.error().message, Catch::Contains("server.body_limit"));
  CHECK_THAT(s.error().message, Catch::Contains(file.string()));
  CHECK_THAT(s.error().message, Catch::Contains(":3"));
  std::filesystem::remove(file);
}

TEST_CASE("a bad value names its key and its source", "[runtime][settings]") {
  SECTION("in the file") {
    auto s = apply_toml({}, "[server]\nio_threads = 0\n", "my.toml");
    REQUIRE_FALSE(s);
    CHECK_THAT(s.error().message, Catch::Contains("my.toml"));
    CHECK_THAT(s.error().message, Catch::Contains("server.io_threads"));
  }
  SECTION("in the environment") {
    setting_sources sources;
    sources.environment = {{"TROUPE_LOG_FORMAT", "xml"}};
    auto s = resolve_settings(sources);
    REQUIRE_FALSE(s);
    CHECK_THAT(s.error().message, Catch::Contains("TROUPE_LOG_FORMAT"));
  }
  SECTION("in a flag") {
    setting_sources sources;
    sources.flags = {{"data_dir", ""}};
    auto s = resolve_settings(sources);
    REQUIRE_FALSE(s);
    CHECK_THAT(s.error().message, Catch::Contains("--data-dir"));
  }
  SECTION("a TOML syntax error gives line and column") {
    auto s = apply_toml({}, "listen = \n", "broken.toml");
    REQUIRE_FALSE(s);
    CHECK_THAT(s.error().message, Catch::StartsWith("broken.toml:1:"));
  }
  SECTION("a missing config file") {
    setting_sources sources;
    sources.config_file = "/nonexistent/troupe.toml";
    auto s = resolve_settings(sources);
    REQUIRE_FALSE(s);
    CHECK(s.error().code == errc::not_found);
  }
}

TEST_CASE("endpoints parse IPv4, IPv6 and port 0 and reject junk", "[runtime][settings]") {
  CHECK(parse_endpoint("0.0.0.0:80").value() == endpoint{"0.0.0.0", 80});
  CHECK(parse_endpoint("[::1]:9000").value() == endpoint{"::1", 9000});
  CHECK(parse_endpoint("127.0.0.1:0").value().port == 0);
  CHECK(endpoint{"::1", 9000}.to_string() == "[::1]:9000");
  CHECK_FALSE(parse_endpoint("localhost"));
  CHECK_FALSE(parse_endpoint(":80"));
  CHECK_FALSE(parse_endpoint("127.0.0.1:65536"));
  CHECK_FALSE(parse_endpoint("127.0.0.1:8o"));
  CHECK_FALSE(parse_endpoint("[::1]9000"));
  // Brackets inside a host: to_string would print what cannot be read back (fuzzing).
  CHECK_FALSE(parse_endpoint("::]1[:0"));
  CHECK_FALSE(parse_endpoint("[[::1]]:80"));
}

TEST_CASE("the resolved settings print as TOML that reads back the same", "[runtime][settings]") {
  settings s;
  REQUIRE(apply_setting(s, "listen", "[::1]:7"));
  REQUIRE(apply_setting(s, "server.sse_ping_interval_ms", "500"));
  REQUIRE(apply_setting(s, "actors.scheduler_policy", "stealing"));
  auto again = apply_toml({}, to_toml(s), "printed");
  REQUIRE(again);
  CHECK(again->listen == s.listen);
  CHECK(again->server.sse_ping_interval.count() == 500);
  CHECK(again->actors.scheduler_policy == "stealing");
}

TEST_CASE("the scheduler defaults to shards, one per core, and sharing stays selectable",
          "[runtime][settings]") {
  const settings defaults;
  CHECK(defaults.actors.scheduler_policy == "shards");
  CHECK(defaults.actors.shards == 0);
  CHECK(defaults.actors.lag_warn.count() == 50);
  settings s;
  REQUIRE(apply_setting(s, "actors.scheduler_policy", "sharing"));
  CHECK(s.actors.scheduler_policy == "sharing");
  REQUIRE(apply_setting(s, "actors.shards", "3"));
  REQUIRE(apply_setting(s, "actors.lag_warn_ms", "20"));
  REQUIRE(apply_setting(s, "actors.malloc_arenas", "6"));
  auto again = apply_toml({}, to_toml(s), "printed");
  REQUIRE(again);
  CHECK(again->actors.shards == 3);
  CHECK(again->actors.lag_warn.count() == 20);
  CHECK(again->actors.malloc_arenas == 6);
  CHECK_FALSE(apply_setting(s, "actors.scheduler_policy", "shard"));
  CHECK_FALSE(apply_setting(s, "actors.shards", "-1"));
}

TEST_CASE("every catalogued key has an environment name and a default", "[runtime][settings]") {
  for (const auto& info : setting_catalog()) {
    CHECK(info.env_name.rfind("TROUPE_", 0) == 0);
    CHECK_FALSE(info.default_value.empty());
    CHECK_FALSE(info.help.empty());
  }
  CHECK(setting_catalog().size() >= 10);
}

TEST_CASE("providers and agents are read from [[providers]] and [[agents]]",
          "[runtime][settings][agents]") {
  auto s = apply_toml({},
                      R"([[providers]]
name = "local"
type = "openai-compatible"
base_url = "http://127.0.0.1:9000/v1"
api_key_env = "TROUPE_KEY_LOCAL"
models = ["m1", "m1-mini"]

[[agents]]
name = "assistant"
provider = "local"
model = "m1"
fast_model = "m1-mini"
fallback_model = ""
system_prompt = "You are helpful."
tools = ["read", "finish"]
max_rounds = 7
timeout_s = 60
queue_policy = "steer"
)",
                      "agents.toml");
  REQUIRE(s);
  REQUIRE(s->providers.size() == 1);
  CHECK(s->providers[0].models == std::vector<std::string>{"m1", "m1-mini"});
  CHECK(s->providers[0].resolve_api_key({{"TROUPE_KEY_LOCAL", "k-1"}}) == "k-1");
  REQUIRE(s->agents.size() == 1);
  const auto& a = s->agents[0];
  CHECK(a.name == "assistant");
  CHECK(a.fast_model == "m1-mini");
  CHECK(a.tools == std::vector<std::string>{"read", "finish"});
  CHECK(a.max_rounds == 7);
  CHECK(a.timeout == std::chrono::seconds(60));
  CHECK(a.queue == queue_policy::steer);
  CHECK(validate_agents(s->providers, s->agents, {"read", "finish"}));
}

TEST_CASE("an unknown key or a wrong type in an agent entry names it",
          "[runtime][settings][agents]") {
  auto unknown = apply_toml({}, "[[agents]]\nname = \"a\"\ntemperature = 3\n", "x.toml");
  REQUIRE_FALSE(unknown);
  CHECK_THAT(unknown.error().message, Catch::Contains("unknown key 'temperature'"));
  CHECK_THAT(unknown.error().message, Catch::Contains("x.toml:3"));
  auto wrong = apply_toml({}, "[[agents]]\nname = \"a\"\nmax_rounds = \"many\"\n", "x.toml");
  REQUIRE_FALSE(wrong);
  CHECK_THAT(wrong.error().message, Catch::Contains("'max_rounds' must be a whole number"));
  auto policy = apply_toml({}, "[[agents]]\nname = \"a\"\nqueue_policy = \"drop\"\n", "x.toml");
  REQUIRE_FALSE(policy);
  CHECK_THAT(policy.error().message, Catch::Contains("agent 'a'"));
}

TEST_CASE("a float where an agent entry wants a whole number is refused, however large",
          "[runtime][settings][agents]") {
  // 1e20 is past int64: toml++'s own float-to-integer conversion of it is undefined
  // behaviour (found by fuzz/settings_toml_fuzz, which runs under UBSan).
  for (const auto* number : {"1e20", "-1e300", "2.0", "nan", "inf"}) {
    INFO(number);
    auto r = apply_toml({}, std::string("[[agents]]\nname = \"a\"\ntimeout_s = ") + number + "\n",
                        "x.toml");
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("'timeout_s' must be a whole number"));
  }
}

TEST_CASE("an unknown provider, model or tool is an error naming the agent",
          "[runtime][settings][agents]") {
  const std::vector<provider_settings> providers = {
      {"local", "openai-compatible", "http://x/v1", "", "", {"m1"}}};
  agent_settings a;
  a.name = "helper";
  a.provider = "nowhere";
  a.model = "m1";
  auto e = validate_agents(providers, {a}, {"read"});
  REQUIRE_FALSE(e);
  CHECK_THAT(e.error().message, Catch::Contains("agent 'helper': unknown provider 'nowhere'"));
  a.provider = "local";
  a.model = "m9";
  CHECK_THAT(validate_agents(providers, {a}, {"read"}).error().message,
             Catch::Contains("agent 'helper': provider 'local' has no model 'm9'"));
  a.model = "m1";
  a.tools = {"read", "teleport"};
  CHECK_THAT(validate_agents(providers, {a}, {"read"}).error().message,
             Catch::Contains("agent 'helper': unknown tool 'teleport'"));
  a.tools = {"read"};
  CHECK(validate_agents(providers, {a}, {"read"}));
  auto twice = validate_agents(providers, {a, a}, {"read"});
  CHECK_THAT(twice.error().message, Catch::Contains("defined twice"));
  CHECK_FALSE(validate_agents({{"p", "warp-drive", "", "", "", {}}}, {}, {}));
}

TEST_CASE("printed settings include providers and agents but never an inline key",
          "[runtime][settings][agents]") {
  settings s;
  s.providers.push_back(
      {"local", "openai-compatible", "http://x/v1", "TROUPE_KEY_K", "sk-secret", {"m1"}});
  agent_settings a;
  a.name = "assistant";
  a.provider = "local";
  a.model = "m1";
  a.system_prompt = "Say \"hi\".\nThen stop.";
  a.tools = {"read"};
  s.agents.push_back(a);
  const auto text = to_toml(s);
  CHECK(text.find("sk-secret") == std::string::npos);
  auto again = apply_toml({}, text, "printed");
  REQUIRE(again);
  REQUIRE(again->agents.size() == 1);
  CHECK(again->agents[0].system_prompt == a.system_prompt);
  CHECK(again->providers[0].api_key_env == "TROUPE_KEY_K");
}

TEST_CASE("the embedded catalog uses OpenAI when a key is set and the demo model otherwise",
          "[runtime][settings][agents]") {
  const std::vector<std::string> tools = {
      "code_interpreter", "read", "write", "edit", "ls", "find", "grep", "plan", "finish"};
  auto demo = make_embedded_catalog({}, "http://127.0.0.1:9/v1");
  CHECK(demo.demo);
  REQUIRE(demo.agents.size() == 1);
  CHECK(demo.agents[0].name == "assistant");
  CHECK(demo.providers[0].base_url == "http://127.0.0.1:9/v1");
  CHECK(validate_agents(demo.providers, demo.agents, tools));

  auto real = make_embedded_catalog({{"OPENAI_API_KEY", "sk-x"}, {"TROUPE_MODEL", "gpt-x"}}, "");
  CHECK_FALSE(real.demo);
  CHECK(real.providers[0].type == "openai");
  CHECK(real.providers[0].resolve_api_key({{"OPENAI_API_KEY", "sk-x"}}) == "sk-x");
  CHECK(real.agents[0].model == "gpt-x");
  CHECK(validate_agents(real.providers, real.agents, tools));

  auto compatible = make_embedded_catalog(
      {{"OPENAI_API_KEY", "k"}, {"OPENAI_BASE_URL", "http://127.0.0.1:1/v1"}}, "");
  CHECK(compatible.providers[0].type == "openai-compatible");
  CHECK(compatible.agents[0].model == "gpt-4o-mini");
}

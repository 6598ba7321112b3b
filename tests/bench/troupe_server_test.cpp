#include <string>

#include <catch2/catch.hpp>

#include "troupe/bench/troupe_server.hpp"
#include "troupe/runtime/settings.hpp"

using troupe::bench::troupe_config_text;
using troupe::bench::troupe_setup;

TEST_CASE("the config troupe bench generates is one troupe's own parser accepts as meant",
          "[bench][troupe_server]") {
  troupe_setup setup;
  setup.provider_base_url = "http://127.0.0.1:4321/v1";
  setup.agents = {{"bench-chat", {}, 4}, {"bench-agent", {"read"}, 3}};
  setup.settings = {{"api.run_retention_ms", "1000"}, {"server.io_threads", "2"}};
  const auto text = troupe_config_text(setup, "/tmp/some \"quoted\" dir");
  INFO(text);
  auto parsed = troupe::apply_toml(troupe::settings{}, text, "generated");
  REQUIRE(parsed);
  CHECK(parsed->listen.port == 0);
  CHECK(parsed->listen.host == "127.0.0.1");
  CHECK(parsed->data_dir == "/tmp/some \"quoted\" dir");
  // Rate limits out of the way of the load; the scenario's own settings applied.
  CHECK(parsed->api.rate_per_second >= 1e9);
  CHECK(parsed->api.rate_burst >= 1e9);
  CHECK(parsed->api.run_retention.count() == 1000);
  CHECK(parsed->server.io_threads == 2);
  REQUIRE(parsed->providers.size() == 1);
  CHECK(parsed->providers[0].base_url == "http://127.0.0.1:4321/v1");
  REQUIRE(parsed->agents.size() == 2);
  CHECK(parsed->agents[0].name == "bench-chat");
  CHECK(parsed->agents[0].tools.empty());
  CHECK(parsed->agents[0].provider == parsed->providers[0].name);
  CHECK(parsed->agents[1].tools == std::vector<std::string>{"read"});
  CHECK(parsed->agents[1].max_rounds == 3);
}

TEST_CASE("a setting given to troupe bench wins over the bench's own default",
          "[bench][troupe_server]") {
  troupe_setup setup;
  setup.provider_base_url = "http://127.0.0.1:4321/v1";
  setup.settings = {{"api.rate_burst", "5.0"}};
  auto parsed = troupe::apply_toml(troupe::settings{}, troupe_config_text(setup, "/tmp/x"), "gen");
  REQUIRE(parsed);
  CHECK(parsed->api.rate_burst == 5.0);
  CHECK(parsed->api.rate_per_second >= 1e9);
}

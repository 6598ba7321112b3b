#include <catch2/catch.hpp>

#include "troupe/runtime/settings.hpp"

using namespace troupe;

namespace {

constexpr const char* two_agents = R"([[providers]]
name = "local"
type = "openai-compatible"
base_url = "http://127.0.0.1:9000/v1"
context_window = 32000

[[agents]]
name = "inherits"
provider = "local"
model = "m1"

[[agents]]
name = "small"
provider = "local"
model = "m1"
context_window = 8192
)";

} // namespace

TEST_CASE("a provider's context window defaults to 128,000 tokens", "[runtime][settings][agents]") {
  auto s = apply_toml({}, "[[providers]]\nname = \"p\"\n[[agents]]\nname = \"a\"\n", "x.toml");
  REQUIRE(s);
  CHECK(s->providers[0].context_window == 128'000);
  CHECK(s->agents[0].context_window == 0);
  CHECK(effective_context_window(s->agents[0], s->providers[0]) == 128'000);
}

TEST_CASE("context_window is read from providers and overridden per agent",
          "[runtime][settings][agents]") {
  auto s = apply_toml({}, two_agents, "agents.toml");
  REQUIRE(s);
  CHECK(s->providers[0].context_window == 32'000);
  CHECK(s->agents[0].context_window == 0);
  CHECK(s->agents[1].context_window == 8'192);
  CHECK(effective_context_window(s->agents[0], s->providers[0]) == 32'000);
  CHECK(effective_context_window(s->agents[1], s->providers[0]) == 8'192);
}

TEST_CASE("a context_window that is not a sensible whole number names the entry",
          "[runtime][settings][agents]") {
  auto text = apply_toml({}, "[[providers]]\nname = \"p\"\ncontext_window = \"big\"\n", "x.toml");
  REQUIRE_FALSE(text);
  CHECK_THAT(text.error().message, Catch::Contains("[[providers]] entry 1: 'context_window'"));
  auto tiny = apply_toml({}, "[[agents]]\nname = \"a\"\ncontext_window = 10\n", "x.toml");
  REQUIRE_FALSE(tiny);
  CHECK_THAT(tiny.error().message, Catch::Contains("[[agents]] entry 1: 'context_window' must be "
                                                   "a whole number from 1024"));
}

TEST_CASE("printed settings carry the context windows and read back the same",
          "[runtime][settings][agents]") {
  auto s = apply_toml({}, two_agents, "agents.toml");
  REQUIRE(s);
  const auto text = to_toml(*s);
  CHECK_THAT(text, Catch::Contains("context_window = 32000"));
  CHECK_THAT(text, Catch::Contains("context_window = 8192"));
  auto again = apply_toml({}, text, "printed");
  REQUIRE(again);
  CHECK(again->providers[0].context_window == 32'000);
  CHECK(again->agents[0].context_window == 0);
  CHECK(again->agents[1].context_window == 8'192);
}
